#ifndef MOONCAKE_RESHARD_COLLECTOR_H
#define MOONCAKE_RESHARD_COLLECTOR_H
#include "common.h"

/* Registers ``collector_pause`` (the one CollectorPause context manager of
 * ``_collector.collector_paused``); returns 0 or -1 with an exception set. */
int Init_Collector(PyObject *module);

#endif
