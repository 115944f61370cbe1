/* physical: placeholder until the kernels of this concern land. */
#include "physical.h"

int
Init_Physical(PyObject *Py_UNUSED(module))
{
    return 0;
}
