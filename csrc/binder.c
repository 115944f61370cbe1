/* binder: runtime binding and executor projection kernels (issue 5). */
#include "binder.h"

static PyMethodDef binder_methods[] = {
    {NULL, NULL, 0, NULL},
};

int
Init_Binder(PyObject *module)
{
    return PyModule_AddFunctions(module, binder_methods);
}
