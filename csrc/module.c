/* mooncake.reshard._native: module definition.
 *
 * Multi-phase init; each concern lives in its own file and registers its
 * functions through an Init_<Part>() hook declared in its header. */
#include "common.h"
#include "canonical.h"
#include "collector.h"
#include "binder.h"
#include "coverage.h"
#include "exact.h"
#include "gctrack.h"
#include "graph_typecheck.h"
#include "heap.h"
#include "layout.h"
#include "overlap.h"
#include "physical.h"
#include "pickle_codec.h"
#include "planobj.h"
#include "regioncheck.h"
#include "restore_scan.h"
#include "revalidate.h"
#include "table.h"
#include "view_scope.h"

static int
native_exec(PyObject *module)
{
    if (Init_Binder(module) < 0) return -1;
    if (Init_Canonical(module) < 0) return -1;
    if (Init_Collector(module) < 0) return -1;
    if (Init_Coverage(module) < 0) return -1;
    if (Init_Exact(module) < 0) return -1;
    if (Init_GcTrack(module) < 0) return -1;
    if (Init_GraphTypecheck(module) < 0) return -1;
    if (Init_Heap(module) < 0) return -1;
    if (Init_Layout(module) < 0) return -1;
    if (Init_Overlap(module) < 0) return -1;
    if (Init_Physical(module) < 0) return -1;
    if (Init_PickleCodec(module) < 0) return -1;
    if (Init_PlanObjects(module) < 0) return -1;
    if (Init_RegionCheck(module) < 0) return -1;
    if (Init_RestoreScan(module) < 0) return -1;
    if (Init_Revalidate(module) < 0) return -1;
    if (Init_Table(module) < 0) return -1;
    if (Init_ViewScope(module) < 0) return -1;
    return 0;
}

static PyModuleDef_Slot native_slots[] = {
    {Py_mod_exec, (void *)native_exec},
    {0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "mooncake.reshard._native",
    .m_doc = "C core of mooncake.reshard: canonical hashing, coverage, overlap planning "
             "and physical-range validation kernels.",
    .m_size = 0,
    .m_slots = native_slots,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModuleDef_Init(&native_module);
}
