/* ``bound_contracts._ViewScope``: ``with ViewScope(built_now=False):`` one revalidation.
 *
 * Entering saves the four fields of this thread's ``_ViewState`` (its ``__dict__``: a
 * ``threading.local`` gives each thread its own) and installs a fresh scope: ``scope`` {},
 * ``built_now``, ``held`` [], ``snapshots`` {}. Leaving puts the saved fields back, ``held`` last
 * (the values the revalidation held are released there, outside it). Exactly what the Python
 * class did, in C because every replace, bind and restore enters one (~6.5k instructions per use
 * in Python, most of them the instance, the two method calls and the attribute traffic).
 *
 * The thread-local object is registered once by ``view_scope_state(local)`` (bound_contracts at
 * import); a scope entered before that raises RuntimeError. */
#include "view_scope.h"

enum { VS_SCOPE, VS_BUILT_NOW, VS_HELD, VS_SNAPSHOTS, VS_NFIELDS };

static const char *const vs_names[VS_NFIELDS] = {"scope", "built_now", "held", "snapshots"};
static PyObject *vs_keys[VS_NFIELDS];   /* interned field names, kept for the process */
static PyObject *vs_state_local = NULL; /* the registered _ViewState instance */
static PyObject *vs_dict_name = NULL;   /* "__dict__" */

typedef struct {
    PyObject_HEAD
    PyObject *built_now;
    PyObject *saved[VS_NFIELDS];
    int entered;
} vs_object;

/* This thread's field dict of the registered state (new reference), or NULL with an exception. */
static PyObject *
vs_thread_dict(void)
{
    if (vs_state_local == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ViewScope: no view state registered (view_scope_state)");
        return NULL;
    }
    PyObject *state = PyObject_GetAttr(vs_state_local, vs_dict_name);
    if (state != NULL && !PyDict_CheckExact(state)) {
        Py_DECREF(state);
        PyErr_SetString(PyExc_TypeError, "ViewScope: the view state's __dict__ is not a dict");
        return NULL;
    }
    return state;
}

static PyObject *
vs_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"built_now", NULL};
    PyObject *built_now = Py_False;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:_ViewScope", kwlist, &built_now)) return NULL;
    vs_object *self = (vs_object *)PyType_GenericAlloc(type, 0);
    if (self == NULL) return NULL;
    self->built_now = Py_NewRef(built_now);
    return (PyObject *)self;
}

static int
vs_traverse(PyObject *obj, visitproc visit, void *arg)
{
    vs_object *self = (vs_object *)obj;
    Py_VISIT(Py_TYPE(obj));
    Py_VISIT(self->built_now);
    for (int k = 0; k < VS_NFIELDS; k++) Py_VISIT(self->saved[k]);
    return 0;
}

static int
vs_clear(PyObject *obj)
{
    vs_object *self = (vs_object *)obj;
    Py_CLEAR(self->built_now);
    for (int k = 0; k < VS_NFIELDS; k++) Py_CLEAR(self->saved[k]);
    return 0;
}

static void
vs_dealloc(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    PyObject_GC_UnTrack(obj);
    vs_clear(obj);
    freefunc free_slot = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_slot(obj);
    Py_DECREF(type);
}

static PyObject *
vs_enter(PyObject *obj, PyObject *Py_UNUSED(ignored))
{
    vs_object *self = (vs_object *)obj;
    PyObject *state = vs_thread_dict();
    if (state == NULL) return NULL;
    PyObject *saved[VS_NFIELDS];
    for (int k = 0; k < VS_NFIELDS; k++) { /* KeyError as the Python class raised it */
        saved[k] = PyDict_GetItemWithError(state, vs_keys[k]);
        if (saved[k] == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, vs_keys[k]);
            Py_DECREF(state);
            return NULL;
        }
    }
    for (int k = 0; k < VS_NFIELDS; k++) Py_INCREF(saved[k]); /* all held before any release */
    for (int k = 0; k < VS_NFIELDS; k++) {
        PyObject *old = self->saved[k];
        self->saved[k] = saved[k];
        Py_XDECREF(old);
    }
    PyObject *fresh[VS_NFIELDS] = {PyDict_New(), Py_NewRef(self->built_now), PyList_New(0), PyDict_New()};
    int rc = 0;
    for (int k = 0; k < VS_NFIELDS; k++) {
        if (fresh[k] == NULL) rc = -1;
    }
    /* (the replaced values are the saved ones, still held here: no release runs code) */
    for (int k = 0; k < VS_NFIELDS && rc == 0; k++) rc = PyDict_SetItem(state, vs_keys[k], fresh[k]);
    for (int k = 0; k < VS_NFIELDS; k++) Py_XDECREF(fresh[k]);
    Py_DECREF(state);
    if (rc < 0) return NULL;
    self->entered = 1;
    Py_RETURN_NONE;
}

static PyObject *
vs_exit(PyObject *obj, PyObject *const *args, Py_ssize_t nargs)
{
    vs_object *self = (vs_object *)obj;
    (void)args;
    (void)nargs; /* (*exc: any number, as the Python class) */
    if (!self->entered) {
        PyErr_SetString(PyExc_RuntimeError, "ViewScope left without being entered");
        return NULL;
    }
    PyObject *state = vs_thread_dict();
    if (state == NULL) return NULL;
    /* Taken out of the object first: a release below can run code (a weakref callback), which
     * must not find them half put back through this object. */
    PyObject *saved[VS_NFIELDS];
    for (int k = 0; k < VS_NFIELDS; k++) {
        saved[k] = self->saved[k];
        self->saved[k] = NULL;
    }
    self->entered = 0;
    /* scope, built_now, snapshots, then held: the values the revalidation held are released last */
    static const int order[VS_NFIELDS] = {VS_SCOPE, VS_BUILT_NOW, VS_SNAPSHOTS, VS_HELD};
    int rc = 0;
    for (int i = 0; i < VS_NFIELDS && rc == 0; i++) {
        int k = order[i];
        rc = PyDict_SetItem(state, vs_keys[k], saved[k]);
    }
    Py_DECREF(state);
    for (int k = 0; k < VS_NFIELDS; k++) Py_DECREF(saved[k]);
    if (rc < 0) return NULL;
    Py_RETURN_NONE; /* never suppresses the exception */
}

static PyMethodDef vs_methods[] = {
    {"__enter__", vs_enter, METH_NOARGS, "Install a fresh view scope in this thread's view state."},
    {"__exit__", (PyCFunction)(void (*)(void))vs_exit, METH_FASTCALL, "Put the saved view state back."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot vs_slots[] = {
    {Py_tp_new, vs_new},
    {Py_tp_dealloc, vs_dealloc},
    {Py_tp_traverse, vs_traverse},
    {Py_tp_clear, vs_clear},
    {Py_tp_methods, vs_methods},
    {Py_tp_doc, (void *)"_ViewScope(built_now=False)\n--\n\n``with`` one revalidation: a fresh view scope."},
    {0, NULL},
};

static PyType_Spec vs_spec = {
    .name = "mooncake.reshard._native.ViewScope",
    .basicsize = sizeof(vs_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = vs_slots,
};

static PyObject *
view_scope_state(PyObject *module, PyObject *local)
{
    (void)module;
    PyObject *old = vs_state_local;
    vs_state_local = Py_NewRef(local);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyMethodDef view_scope_functions[] = {
    {"view_scope_state", view_scope_state, METH_O,
     "view_scope_state(local, /)\n--\n\nRegister the thread-local _ViewState that ViewScope saves and sets."},
    {NULL, NULL, 0, NULL},
};

int
Init_ViewScope(PyObject *module)
{
    if (vs_dict_name == NULL) {
        vs_dict_name = PyUnicode_InternFromString("__dict__");
        if (vs_dict_name == NULL) return -1;
        for (int k = 0; k < VS_NFIELDS; k++) {
            vs_keys[k] = PyUnicode_InternFromString(vs_names[k]);
            if (vs_keys[k] == NULL) return -1;
        }
    }
    if (PyModule_AddFunctions(module, view_scope_functions) < 0) return -1;
    PyObject *type = PyType_FromModuleAndSpec(module, &vs_spec, NULL);
    if (type == NULL) return -1;
    int rc = PyModule_AddType(module, (PyTypeObject *)type);
    Py_DECREF(type);
    return rc;
}
