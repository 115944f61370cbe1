#ifndef MOONCAKE_RESHARD_EXACT_H
#define MOONCAKE_RESHARD_EXACT_H
#include "common.h"

/* Registers this file's functions on the module; returns 0 or -1 with an exception set. */
int Init_Exact(PyObject *module);

/* 1 when index is exactly the parts keyed by participant id (``_native.part_index_exact``), 0 when
 * not, -1 with an exception set. Runs no Python code. */
int mr_part_index_exact(PyObject *parts, PyObject *index, PyObject *part_class);

#endif
