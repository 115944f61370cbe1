#ifndef MOONCAKE_RESHARD_VIEW_SCOPE_H
#define MOONCAKE_RESHARD_VIEW_SCOPE_H
#include "common.h"

/* Registers ``ViewScope`` and ``view_scope_state`` (bound_contracts._ViewScope); returns 0 or
 * -1 with an exception set. */
int Init_ViewScope(PyObject *module);

#endif
