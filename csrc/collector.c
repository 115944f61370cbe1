/* The process-wide pause of Python's cyclic garbage collector behind
 * ``mooncake.reshard._collector.collector_paused()``.
 *
 * The collector's enabled state is shared by the whole process, so concurrent and nested users
 * are counted: the first to enter records the state it found and disables the collector, the
 * last to leave restores that state (a save/restore per use would leave the collector disabled
 * when two threads interleave: A enters, B enters, A leaves, B leaves). Here in C because every
 * revalidation, bind and restore enters it, and the Python class with its lock cost ~8k
 * instructions per use: the count and the flag are read and written with the GIL held and no
 * Python code runs between them, which is the atomicity the lock gave. */
#include "collector.h"

static Py_ssize_t pause_depth = 0; /* users inside */
static int pause_restore = 0;      /* the collector was enabled when the first user entered */

static PyObject *
pause_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    (void)self;
    if (pause_depth == PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "collector pause nested too deeply");
        return NULL;
    }
    if (pause_depth == 0) pause_restore = PyGC_Disable();
    pause_depth++;
    Py_RETURN_NONE;
}

static PyObject *
pause_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (pause_depth == 0) {
        PyErr_SetString(PyExc_RuntimeError, "collector pause left more often than entered");
        return NULL;
    }
    pause_depth--;
    if (pause_depth == 0 && pause_restore) PyGC_Enable();
    Py_RETURN_NONE; /* never suppresses the exception */
}

static PyMethodDef pause_methods[] = {
    {"__enter__", pause_enter, METH_NOARGS, "Disable the collector (the first user records its state)."},
    {"__exit__", (PyCFunction)(void (*)(void))pause_exit, METH_FASTCALL,
     "Restore the recorded state when the last user leaves."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot pause_slots[] = {
    {Py_tp_doc, (void *)"The collector pause context manager (one instance: ``collector_pause``)."},
    {Py_tp_methods, pause_methods},
    {0, NULL},
};

static PyType_Spec pause_spec = {
    .name = "mooncake.reshard._native.CollectorPause",
    .basicsize = 0,
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = pause_slots,
};

int
Init_Collector(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &pause_spec, NULL);
    if (type == NULL) return -1;
    /* DISALLOW_INSTANTIATION removes tp_new from Python's view only: the one instance is made here */
    PyObject *pause = PyType_GenericAlloc((PyTypeObject *)type, 0);
    int rc = pause == NULL ? -1 : PyModule_AddObjectRef(module, "collector_pause", pause);
    if (rc == 0) rc = PyModule_AddType(module, (PyTypeObject *)type);
    Py_XDECREF(pause);
    Py_DECREF(type);
    return rc;
}
