#ifndef MOONCAKE_RESHARD_TABLE_H
#define MOONCAKE_RESHARD_TABLE_H
#include "common.h"

/* Registers FragmentTable and pack_fragments on the module; returns 0 or -1 with an exception set. */
int Init_Table(PyObject *module);

#endif
