/* Keeping acyclic library instances out of the cyclic garbage collector, from Python.
 *
 * The constructors of the input value classes (PlacementFragment, ParallelRank, ...) call
 * untrack_inert(self, Class) as their last step; the C builders use common.h's
 * mr_untrack_inert directly. See common.h for the rule (which values are inert) and for
 * what forging a cycle through an untracked instance does (a leak, never a crash). */
#include "gctrack.h"

PyDoc_STRVAR(untrack_inert_doc,
"untrack_inert(obj, cls)\n"
"--\n\n"
"Untrack obj and its instance dict from the cyclic garbage collector when type(obj) is\n"
"exactly cls and every value in obj's instance dict is inert (an object of a type without\n"
"GC support, a tuple of inert items, or an untracked non-dict object); tracked tuples among\n"
"the values are untracked on the way. Returns True when obj was untracked (or already was\n"
"and qualifies), False otherwise (obj left as it was). Instances of subclasses of cls and\n"
"objects without an instance dict are never untracked.");

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

static PyMethodDef gctrack_methods[] = {
    {"untrack_inert", (PyCFunction)(void (*)(void))gt_untrack_inert, METH_FASTCALL, untrack_inert_doc},
    {"untrack_table", gt_untrack_table, METH_O, untrack_table_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_GcTrack(PyObject *module)
{
    return PyModule_AddFunctions(module, gctrack_methods);
}
