/* Shared helpers for the C core: Python.h under the limited API, checked
 * arithmetic. Everything here is static inline. */
#ifndef MOONCAKE_RESHARD_COMMON_H
#define MOONCAKE_RESHARD_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>

/* Checked arithmetic: return 0 on success, -1 on overflow. */
static inline int
mr_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int
mr_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

static inline int
mr_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int
mr_add_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* Allocation of n elements of size sz with overflow check; sets MemoryError. */
static inline void *
mr_alloc_array(size_t n, size_t sz)
{
    size_t total;
    if (__builtin_mul_overflow(n, sz, &total)) {
        PyErr_NoMemory();
        return NULL;
    }
    void *p = PyMem_Malloc(total ? total : 1);
    if (p == NULL) PyErr_NoMemory();
    return p;
}

/* Advice for a large buffer about to be filled: back it with transparent huge pages (fewer
 * page faults). Buffers under 8 MiB are left alone; failures are ignored (advice only). */
#include <sys/mman.h>
static inline void
mr_advise_huge(void *data, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (data == NULL || bytes < ((size_t)8 << 20)) return;
    uintptr_t begin = ((uintptr_t)data + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)data + bytes) & ~(huge - 1);
    if (end > begin) (void)madvise((void *)begin, (size_t)(end - begin), MADV_HUGEPAGE);
#else
    (void)data;
    (void)bytes;
#endif
}

/* A new instance of the heap class cls whose instance dict is dict (as ``object.__new__(cls)``
 * then ``__dict__.update(dict)`` leaves it); NULL with an exception (`who` names the caller). */
static inline PyObject *
mr_instance_with_dict(PyObject *cls, PyObject *dict, const char *who)
{
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s: class has no allocator", who);
        return NULL;
    }
    PyObject *obj = alloc((PyTypeObject *)cls, 0);
    if (obj == NULL) return NULL;
    if (PyObject_GenericSetDict(obj, dict, NULL) < 0) {
        Py_DECREF(obj);
        return NULL;
    }
    return obj;
}

#endif
