/* regioncheck: canonical-geometry recheck of transfer regions inside revalidated plans (issue 5). */
#include "regioncheck.h"

static PyMethodDef regioncheck_methods[] = {
    {NULL, NULL, 0, NULL},
};

int
Init_RegionCheck(PyObject *module)
{
    return PyModule_AddFunctions(module, regioncheck_methods);
}
