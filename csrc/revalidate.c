/* revalidate: TransferPlan revalidation kernels (issue 5). */
#include "revalidate.h"

static PyMethodDef revalidate_methods[] = {
    {NULL, NULL, 0, NULL},
};

int
Init_Revalidate(PyObject *module)
{
    return PyModule_AddFunctions(module, revalidate_methods);
}
