/* planobj: trusted construction of the logical planner's result objects (issue 5).
 *
 * The overlap kernel (overlap.c) proves every invariant of a region; what is left per region
 * is building the frozen TransferRegion instance itself. build_regions allocates each
 * instance with the class's tp_alloc (no __init__ / __post_init__: nothing left to check)
 * and installs one fresh field dict, so a planner-built region costs one allocation and one
 * dict instead of a Python-level constructor call. The records come from plan_overlaps. */
#include "planobj.h"

#define PO_NFIELDS 11
#define PO_RECORD_LEN 11

static const char *const po_field_names[PO_NFIELDS] = {
    "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset",
    "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
};

static void
po_release_keys(PyObject **keys)
{
    for (int k = 0; k < PO_NFIELDS; k++) {
        Py_XDECREF(keys[k]);
        keys[k] = NULL;
    }
}

/* The list index held by item (a Python int in [0, bound)), or -1 with ValueError set. */
static Py_ssize_t
po_index(PyObject *item, Py_ssize_t bound)
{
    if (!PyLong_Check(item)) {
        PyErr_SetString(PyExc_ValueError, "region record index must be an int");
        return -1;
    }
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (value == -1 && PyErr_Occurred()) return -1;
    if (overflow != 0 || value < 0 || value >= (long long)bound) {
        PyErr_SetString(PyExc_ValueError, "region record index out of range");
        return -1;
    }
    return (Py_ssize_t)value;
}

/* One region instance of cls from record (a tuple of PO_RECORD_LEN items). */
static PyObject *
po_region(PyObject *cls, allocfunc alloc, PyObject *const *keys, PyObject *tensor_key, PyObject *record,
          PyObject *sources, Py_ssize_t nsources, PyObject *targets, Py_ssize_t ntargets)
{
    if (!PyTuple_Check(record) || PyTuple_Size(record) != PO_RECORD_LEN) {
        PyErr_SetString(PyExc_ValueError, "region record must be a tuple of 11 items");
        return NULL;
    }
    PyObject *item = PyTuple_GetItem(record, 0);
    if (item == NULL) return NULL;
    Py_ssize_t si = po_index(item, nsources);
    if (si < 0) return NULL;
    item = PyTuple_GetItem(record, 1);
    if (item == NULL) return NULL;
    Py_ssize_t ti = po_index(item, ntargets);
    if (ti < 0) return NULL;
    PyObject *source = PyList_GetItem(sources, si); /* borrowed */
    if (source == NULL) return NULL;
    PyObject *target = PyList_GetItem(targets, ti); /* borrowed */
    if (target == NULL) return NULL;
    PyObject *dict = PyDict_New();
    if (dict == NULL) return NULL;
    PyObject *tensor_id = PyObject_GetAttr(target, tensor_key);
    if (tensor_id == NULL) goto fail;
    int rc = PyDict_SetItem(dict, keys[0], tensor_id);
    Py_DECREF(tensor_id);
    if (rc < 0) goto fail;
    if (PyDict_SetItem(dict, keys[1], source) < 0) goto fail;
    if (PyDict_SetItem(dict, keys[2], target) < 0) goto fail;
    for (Py_ssize_t k = 3; k < PO_NFIELDS; k++) {
        item = PyTuple_GetItem(record, k - 1);
        if (item == NULL || PyDict_SetItem(dict, keys[k], item) < 0) goto fail;
    }
    PyObject *region = alloc((PyTypeObject *)cls, 0);
    if (region == NULL) goto fail;
    if (PyObject_GenericSetDict(region, dict, NULL) < 0) {
        Py_DECREF(region);
        goto fail;
    }
    Py_DECREF(dict);
    return region;
fail:
    Py_DECREF(dict);
    return NULL;
}

PyDoc_STRVAR(build_regions_doc,
"build_regions(cls, records, sources, targets)\n"
"--\n\n"
"Instances of cls (a heap type whose instances have a __dict__) built from plan_overlaps\n"
"records, without calling cls: record (si, ti, overlap_offset, overlap_shape, source_base,\n"
"target_base, inner_bytes, outer_loop_counts, source_strides, target_strides, segments)\n"
"gives the fields tensor_id=targets[ti].tensor_id, source=sources[si], target=targets[ti]\n"
"and the geometry in order (the segment count is not stored). sources and targets are lists.\n"
"Returns a tuple.");

static PyObject *
po_build_regions(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *cls, *records, *sources, *targets;
    if (!PyArg_ParseTuple(args, "OOOO:build_regions", &cls, &records, &sources, &targets)) return NULL;
    if (!PyType_Check(cls) || !(PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "build_regions: cls must be a heap type");
        return NULL;
    }
    if (!PyList_Check(records) || !PyList_Check(sources) || !PyList_Check(targets)) {
        PyErr_SetString(PyExc_TypeError, "build_regions: records, sources and targets must be lists");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "build_regions: cls has no allocator");
        return NULL;
    }
    PyObject *keys[PO_NFIELDS] = {NULL};
    PyObject *tensor_key = NULL;
    PyObject *result = NULL;
    for (int k = 0; k < PO_NFIELDS; k++) {
        keys[k] = PyUnicode_InternFromString(po_field_names[k]);
        if (keys[k] == NULL) goto done;
    }
    tensor_key = keys[0];
    {
        Py_ssize_t n = PyList_Size(records);
        Py_ssize_t nsources = PyList_Size(sources);
        Py_ssize_t ntargets = PyList_Size(targets);
        if (n < 0 || nsources < 0 || ntargets < 0) goto done;
        result = PyTuple_New(n);
        if (result == NULL) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *record = PyList_GetItem(records, i); /* borrowed */
            if (record == NULL) goto fail;
            /* The lists may change under hostile attribute hooks: re-read their sizes. */
            nsources = PyList_Size(sources);
            ntargets = PyList_Size(targets);
            if (nsources < 0 || ntargets < 0) goto fail;
            Py_INCREF(record);
            PyObject *region = po_region(cls, alloc, keys, tensor_key, record, sources, nsources, targets, ntargets);
            Py_DECREF(record);
            if (region == NULL) goto fail;
            if (PyTuple_SetItem(result, i, region) < 0) goto fail; /* steals region */
        }
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    po_release_keys(keys);
    return result;
}

static PyMethodDef planobj_methods[] = {
    {"build_regions", po_build_regions, METH_VARARGS, build_regions_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_PlanObjects(PyObject *module)
{
    return PyModule_AddFunctions(module, planobj_methods);
}
