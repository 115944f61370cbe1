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

/* Take an exact dict out of the collector when no key or value may be tracked, by CPython's own
 * rule (_PyDict_MaybeUntrack, which the collector applies to every dict it scans: a non-GC
 * object or an untracked one other than an exact tuple, which counts as tracked). A dict the
 * collector would untrack at its first scan, untracked without that scan: at 10^6 fragments
 * bind's per-attestation id maps (2 x 10^6 entries) made the first collection after bind's
 * pause cost 0.1-0.3 s (GROWTH40). Inserting a tracked key or value later tracks the dict again
 * (CPython's insertdict), so nothing the collector must see is hidden. Reads each entry's
 * headers only; runs no Python code. */
static inline void
mr_gc_untrack_atomic_dict(PyObject *dict)
{
    if (dict == NULL || !PyDict_CheckExact(dict) || !PyObject_GC_IsTracked(dict)) return;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        PyObject *both[2] = {key, value};
        for (int k = 0; k < 2; k++) {
            PyObject *o = both[k];
            if (!PyType_IS_GC(Py_TYPE(o))) continue;
            if (PyTuple_CheckExact(o) || PyObject_GC_IsTracked(o)) return;
        }
    }
    PyObject_GC_UnTrack(dict);
}

/* Registers this file's functions on the module; returns 0 or -1 with an exception set. */
int Init_GcTrack(PyObject *module);

#endif
