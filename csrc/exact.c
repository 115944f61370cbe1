/* Exact-class scans for _planner/exactness.py: whether reading a placement's members can run
 * user code (a subclass's __eq__, __hash__, property or __getattribute__). The Python version
 * (exactness.placement_members, kept as this function's oracle in the tests) chained every
 * member through several map/set passes: ~180 ms per bind at 230k fragments. Here one pass per
 * tuple, each item's class and its attribute's class read once. No Python code runs: an item's
 * attribute is read only when the item's class is exactly one of the allowed ones. */
#include "exact.h"

PyDoc_STRVAR(classes_within_doc,
"classes_within(items, allowed, name, name_allowed)\n"
"--\n\n"
"True when items (an exact tuple) holds only objects whose class is exactly one of allowed (a\n"
"tuple of classes) and, when name is a str, whose attribute name is an object whose class is\n"
"exactly one of name_allowed (a tuple of classes); False otherwise (also when an item lacks the\n"
"attribute). The attribute is read only from an item of an allowed class, so no Python code\n"
"runs when allowed holds only classes whose attribute reads run none.");

/* 1 when Py_TYPE(obj) is one of the n classes, else 0. */
static int
ex_class_in(PyObject *obj, PyObject *const *classes, Py_ssize_t n)
{
    PyObject *cls = (PyObject *)Py_TYPE(obj);
    for (Py_ssize_t k = 0; k < n; k++) {
        if (classes[k] == cls) return 1;
    }
    return 0;
}

/* The items of ``classes`` (an exact tuple of classes) into ``out`` (at most 8), or -1 with an
 * error set. */
static Py_ssize_t
ex_classes(PyObject *classes, PyObject **out, const char *what)
{
    if (!PyTuple_CheckExact(classes)) {
        PyErr_Format(PyExc_TypeError, "classes_within: %s must be a tuple", what);
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(classes);
    if (n < 0) return -1;
    if (n > 8) {
        PyErr_Format(PyExc_ValueError, "classes_within: at most 8 %s classes", what);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *cls = PyTuple_GetItem(classes, k);
        if (cls == NULL) return -1;
        if (!PyType_Check(cls)) {
            PyErr_Format(PyExc_TypeError, "classes_within: %s must hold classes", what);
            return -1;
        }
        out[k] = cls;
    }
    return n;
}

static PyObject *
ex_classes_within(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "classes_within expects 4 arguments (items, allowed, name, name_allowed)");
        return NULL;
    }
    PyObject *items = args[0];
    PyObject *name = args[2];
    if (!PyTuple_CheckExact(items)) Py_RETURN_FALSE;
    PyObject *allowed[8];
    PyObject *name_allowed[8];
    Py_ssize_t n_allowed = ex_classes(args[1], allowed, "allowed");
    if (n_allowed < 0) return NULL;
    Py_ssize_t n_name_allowed = 0;
    int with_name = PyUnicode_CheckExact(name);
    if (with_name) {
        n_name_allowed = ex_classes(args[3], name_allowed, "name_allowed");
        if (n_name_allowed < 0) return NULL;
    } else if (name != Py_None) {
        PyErr_SetString(PyExc_TypeError, "classes_within: name must be a str or None");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(items);
    if (n < 0) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(items, i); /* borrowed; the tuple is immutable */
        if (item == NULL) return NULL;
        if (i + 8 < n) {
            PyObject *ahead = PyTuple_GetItem(items, i + 8);
            if (ahead != NULL) __builtin_prefetch(ahead);
        }
        if (!ex_class_in(item, allowed, n_allowed)) Py_RETURN_FALSE;
        if (!with_name) continue;
        PyObject *value = PyObject_GetAttr(item, name);
        if (value == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
        int ok = ex_class_in(value, name_allowed, n_name_allowed);
        Py_DECREF(value);
        if (!ok) Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef ex_methods[] = {
    {"classes_within", (PyCFunction)(void (*)(void))ex_classes_within, METH_FASTCALL, classes_within_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_Exact(PyObject *module)
{
    return PyModule_AddFunctions(module, ex_methods);
}
