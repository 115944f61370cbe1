/* Keeping acyclic library instances out of the cyclic garbage collector, from Python.
 *
 * The constructors of the input value classes (PlacementFragment, ParallelRank, ...) call
 * untrack_inert(self, Class) as their last step; the C builders use common.h's
 * mr_untrack_inert directly. See common.h for the rule (which values are inert) and for
 * what forging a cycle through an untracked instance does (a leak, never a crash). */
#include "gctrack.h"
#include "layout.h"

PyDoc_STRVAR(untrack_inert_doc,
"untrack_inert(obj, cls)\n"
"--\n\n"
"Untrack obj and its instance dict from the cyclic garbage collector when type(obj) is\n"
"exactly cls and every value in obj's instance dict is inert (an object of a type without\n"
"GC support, a tuple of inert items, or an untracked non-dict object); tracked tuples among\n"
"the values are untracked on the way. Returns True when obj was untracked (or already was\n"
"and qualifies), False otherwise (obj left as it was). For cls a C-owned layout (value_base)\n"
"the values are obj's fields, all of which must be set. Instances of subclasses of cls and\n"
"other objects without an instance dict are never untracked.");

static PyObject *
gt_untrack_inert(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "untrack_inert expects 2 arguments (obj, cls)");
        return NULL;
    }
    PyObject *obj = args[0];
    PyObject *cls = args[1];
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "untrack_inert: cls must be a class");
        return NULL;
    }
    /* Exact heap classes only: a subclass may add fields or mutable state. */
    if ((PyObject *)Py_TYPE(obj) != cls || !(PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE)) {
        Py_RETURN_FALSE;
    }
    /* A C-owned layout class (PlacementFragment): judged by its fields, all set and inert.
     * The memo remembers one accepted class (its instance layout cannot change); any other
     * class runs the full check, which a dict-backed class fails at once. */
    static mr_layout_memo memo;
    mr_layout_class lc = {NULL, 0};
    if (memo.cls == cls) {
        lc.cls = cls;
        lc.n = PyTuple_Size(memo.names);
    } else {
        PyObject *base, *mro;
        Py_ssize_t index;
        const mr_layout_info *info = mr_layout_find(cls, &base, &index, &mro);
        if (info != NULL) {
            Py_DECREF(mro);
            (void)mr_layout_memo_check(&memo, &lc, cls, info->names);
        }
    }
    if (lc.cls != NULL) {
        PyObject *const *fields = mr_layout_fields_set(obj, &lc);
        if (fields == NULL) Py_RETURN_FALSE;
        int untracked = mr_untrack_values(obj, NULL, fields, lc.n);
        if (untracked < 0) return NULL;
        return PyBool_FromLong(untracked);
    }
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
        return NULL;
    }
    int done = mr_untrack_inert(obj, dict);
    Py_DECREF(dict);
    return PyBool_FromLong(done);
}

PyDoc_STRVAR(untrack_table_doc,
"untrack_table(table)\n"
"--\n\n"
"Untrack table, an instance of exactly _native.FragmentTable, from the cyclic garbage\n"
"collector: a FragmentTable holds plain C arrays and no reference to any Python object but\n"
"its type, so it can never be part of a reference cycle. True when table is (now) untracked,\n"
"False for any other object (left as it was).");

static PyObject *
gt_untrack_table(PyObject *module, PyObject *table)
{
    PyObject *type = PyObject_GetAttrString(module, "FragmentTable");
    if (type == NULL) return NULL;
    int exact = (PyObject *)Py_TYPE(table) == type;
    Py_DECREF(type);
    if (!exact) Py_RETURN_FALSE;
    if (PyObject_GC_IsTracked(table)) PyObject_GC_UnTrack(table);
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(untrack_bound_regions_doc,
"untrack_bound_regions(regions, bound_cls, /)\n"
"--\n\n"
"For an exact list or tuple of at least 1024 regions: untrack each region's source and target\n"
"that is exactly bound_cls when its fields are inert but for its attestation, whose closure\n"
"holds no bound fragment (only its known keys, untracked placement and evidence, no bound row\n"
"cached on it), then the region when all its fields are inert (csrc/common.h\n"
"mr_untrack_bound_regions; a bound_cls stored in a C-owned layout has its fields read from its\n"
"instances). Returns None; anything else is left as it was. TypeError for a\n"
"bound_cls that is not a heap class.");

static PyObject *
gt_untrack_bound_regions(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "untrack_bound_regions expects 2 arguments (regions, bound_cls)");
        return NULL;
    }
    PyObject *bound_cls = args[1];
    if (!PyType_Check(bound_cls) || !(PyType_GetFlags((PyTypeObject *)bound_cls) & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "untrack_bound_regions: bound_cls must be a heap class");
        return NULL;
    }
    PyObject *names[3] = {PyUnicode_InternFromString("source"), PyUnicode_InternFromString("target"),
                          PyUnicode_InternFromString("attestation")};
    if (names[0] != NULL && names[1] != NULL && names[2] != NULL) {
        /* a bound_cls stored in a C-owned layout of BoundWeightFragment's fields: read its slots */
        static mr_layout_memo bound_memo;
        mr_layout_class lc;
        int layout = mr_bound_layout(&bound_memo, &lc, bound_cls);
        /* regions in TransferRegion's C-owned layout (the class of the first one) read directly
         * (any other object in the list is then left tracked: untracking is only ever optional);
         * otherwise through their instance dicts */
        static mr_layout_memo memo;
        mr_layout_class rl = {NULL, 0};
        Py_ssize_t size = PyList_CheckExact(args[0]) ? PyList_Size(args[0])
                          : PyTuple_CheckExact(args[0]) ? PyTuple_Size(args[0]) : 0;
        if (size > 0) {
            PyObject *first = PyList_CheckExact(args[0]) ? PyList_GetItem(args[0], 0) : PyTuple_GetItem(args[0], 0);
            if (first != NULL) (void)mr_region_layout(&memo, &rl, (PyObject *)Py_TYPE(first));
        }
        if (rl.cls != NULL) mr_untrack_layout_regions(args[0], &rl, bound_cls, layout, names[2]);
        else mr_untrack_bound_regions(args[0], bound_cls, layout, names[0], names[1], names[2]);
    }
    for (int k = 0; k < 3; k++) Py_XDECREF(names[k]);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(inert_tuple_doc,
"inert_tuple(items, /)\n"
"--\n\n"
"tuple(items) for an exact list items, untracked by the cyclic garbage collector when every\n"
"item is inert (csrc/common.h mr_gc_inert: an object of a type without GC support, a tuple of\n"
"inert items, or an untracked non-dict object): a tuple never changes once built, so one whose\n"
"items can reach nothing that holds it is never part of a reference cycle. The collector's own\n"
"first scan would walk every item (and keep a tuple of untracked instances); bind's operations\n"
"tuple (10^6 regions at the largest sweep point) is judged here, in the pass that copies it.\n"
"TypeError for anything but an exact list. Runs no Python code.");

static PyObject *
gt_inert_tuple(PyObject *Py_UNUSED(module), PyObject *items)
{
    if (!PyList_CheckExact(items)) {
        PyErr_SetString(PyExc_TypeError, "inert_tuple: items must be an exact list");
        return NULL;
    }
    Py_ssize_t n = PyList_Size(items);
    if (n < 0) return NULL;
    /* out of the collector until full (gctrack.h); shown again unless every item is inert */
    PyObject *tuple = mr_gc_hide(PyTuple_New(n));
    if (tuple == NULL) return NULL;
    int inert = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GetItem(items, i); /* borrowed; in range (no code runs here) */
        if (item == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        if (inert && !mr_gc_inert(item, MR_INERT_DEPTH)) inert = 0;
        Py_INCREF(item);
        if (PyTuple_SetItem(tuple, i, item) < 0) { /* steals item */
            Py_DECREF(tuple);
            return NULL;
        }
    }
    if (!inert) mr_gc_show(tuple);
    return tuple;
}

static PyMethodDef gctrack_methods[] = {
    {"inert_tuple", gt_inert_tuple, METH_O, inert_tuple_doc},
    {"untrack_inert", (PyCFunction)(void (*)(void))gt_untrack_inert, METH_FASTCALL, untrack_inert_doc},
    {"untrack_table", gt_untrack_table, METH_O, untrack_table_doc},
    {"untrack_bound_regions", (PyCFunction)(void (*)(void))gt_untrack_bound_regions, METH_FASTCALL,
     untrack_bound_regions_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_GcTrack(PyObject *module)
{
    return PyModule_AddFunctions(module, gctrack_methods);
}
