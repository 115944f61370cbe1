#ifndef MOONCAKE_RESHARD_EXACT_H
#define MOONCAKE_RESHARD_EXACT_H
#include "common.h"

/* Registers this file's functions on the module; returns 0 or -1 with an exception set. */
int Init_Exact(PyObject *module);

#endif
