/* canonical: placeholder until the kernels of this concern land. */
#include "canonical.h"

int
Init_Canonical(PyObject *Py_UNUSED(module))
{
    return 0;
}
