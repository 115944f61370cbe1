#ifndef MOONCAKE_RESHARD_GRAPH_TYPECHECK_H
#define MOONCAKE_RESHARD_GRAPH_TYPECHECK_H
#include "common.h"

/* Registers this file's functions on the module; returns 0 or -1 with an exception set. */
int Init_GraphTypecheck(PyObject *module);

#endif
