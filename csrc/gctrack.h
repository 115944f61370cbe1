#ifndef MOONCAKE_RESHARD_GCTRACK_H
#define MOONCAKE_RESHARD_GCTRACK_H
#include "common.h"

/* A list or tuple made with empty (NULL) slots (PyList_New(n), PyTuple_New(n)) is tracked by the
 * collector from the start. Code that runs before it is full (a gc callback at an allocation, a
 * finalizer or weakref callback at a release, an attribute hook) can reach it through
 * gc.get_objects() and read a NULL item: a crash (session 28, tests/test_sound8_half_filled.py).
 * mr_gc_hide takes such a container out of the collector at creation (it then holds its items
 * as any C owner does: never freed early, at worst a cycle through it leaks) and mr_gc_show puts
 * it back once full. Both accept NULL; mr_gc_show leaves objects without GC support alone. */
static inline PyObject *
mr_gc_hide(PyObject *obj)
{
    if (obj != NULL && PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    return obj;
}

static inline void
mr_gc_show(PyObject *obj)
{
    if (obj != NULL && PyType_IS_GC(Py_TYPE(obj)) && !PyObject_GC_IsTracked(obj)) PyObject_GC_Track(obj);
}

/* Registers this file's functions on the module; returns 0 or -1 with an exception set. */
int Init_GcTrack(PyObject *module);

#endif
