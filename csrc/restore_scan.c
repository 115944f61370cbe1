/* restore_scan: the regions of a TransferPlan pickle record with the revalidation scan's
 * facts derived from the values stored in them (round 12, RESTORE).
 *
 * restore_regions_carried(table, fragments, region_cls, region_fields, bound_cls) builds the
 * regions exactly as revalidate.c's restore_regions does (a new instance of region_cls whose
 * own key-sharing dict holds the record's values in field order, the source and target indices
 * replaced by their fragments) and then, in a second pass over the very value objects it
 * stored, derives what revalidate_scan would derive from those regions: the distinct
 * fragments (first appearance, source before target), each operation's positions and (overlap_offset,
 * overlap_shape) box, each fragment's largest byte extent end, the largest segment count and
 * the largest running total of segments, with revalidate_scan's arithmetic (exact ints within
 * int64, every step overflow-checked) in the same order. These are the carried facts of
 * bind_regions (binder.c), in the shape revalidate_scan_carried takes; the restore hands them
 * to the new plan's revalidation, whose regions are exactly these new objects, unreachable by
 * any other code until the restore returns (the case "this call's own objects", as for bind).
 * Everything an adapter value could change is read again by revalidate_scan_carried: the
 * budgets, and every distinct fragment's binding and its nbytes.
 *
 * Returns None when the table is not exactly the record's shape (the caller then runs
 * restore_regions or its Python reference, which decide and raise); otherwise
 * ``(regions, carried)``, carried None when any value is one revalidate_scan would decline
 * (not an exact int within int64, an overflow, a rank mismatch, a fragment of another class):
 * the plain scan then decides. */
#include "restore_scan.h"
#include "layout.h"
#include "gctrack.h"
#include "scan_carry.h"

/* The record's region fields, in TransferRegion's field order (bound_pickle checks it). */
enum {
    RS_TENSOR_ID,
    RS_SOURCE,
    RS_TARGET,
    RS_OFFSET,
    RS_SHAPE,
    RS_SBASE,
    RS_TBASE,
    RS_INNER,
    RS_OUTER,
    RS_SSTRIDES,
    RS_TSTRIDES,
    RS_NFIELDS
};

static const char *const rs_names[RS_NFIELDS] = {
    "tensor_id",          "source",      "target",            "overlap_offset", "overlap_shape",
    "source_base_offset", "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides",
    "target_strides",
};

#define RS_OK SC_OK
#define RS_DECLINE SC_DECLINE
#define RS_ERROR SC_ERROR

/* An exact int index in [0, limit): RS_OK, RS_DECLINE, RS_ERROR. */
static int
rs_index(PyObject *value, Py_ssize_t limit, Py_ssize_t *out)
{
    int64_t x = 0;
    int rc = sc_carry_int(value, &x);
    if (rc != RS_OK) return rc;
    if (x < 0 || x >= (int64_t)limit) return RS_DECLINE;
    *out = (Py_ssize_t)x;
    return RS_OK;
}

/* The facts being derived (the carry is dropped, not the restore, on anything unusual): the
 * shared core (scan_carry.h) and this file's extra, the regions list. */
typedef struct {
    int active;
    PyObject *bound_cls;
    PyObject *regions; /* list: the regions in order */
    sc_carry sc;
} rs_carry;

static void
rs_carry_drop(rs_carry *c)
{
    c->active = 0;
    Py_CLEAR(c->regions);
    sc_carry_clear(&c->sc);
}

/* For n operations (at most 2n distinct fragments): 0, or -1 with an exception. */
static int
rs_carry_init(rs_carry *c, Py_ssize_t n)
{
    c->regions = mr_gc_hide(PyList_New(n)); /* out of the collector until full (gctrack.h) */
    if (c->regions == NULL || sc_carry_init(&c->sc, n, INT64_MIN) < 0) {
        rs_carry_drop(c);
        return -1;
    }
    c->active = 1;
    return 0;
}

/* revalidate_scan's per-operation rule on the values v (in field order) stored in region i:
 * RS_OK recorded, RS_DECLINE (the carry is off), RS_ERROR. */
static int
rs_carry_region(rs_carry *c, PyObject *const *v, PyObject *region, Py_ssize_t i)
{
    _Static_assert(RS_TSTRIDES - RS_SOURCE + 1 == SC_NVALUES, "region fields from source");
    Py_ssize_t s_pos = -1, t_pos = -1;
    int rc = sc_carry_region(&c->sc, c->bound_cls, v + RS_SOURCE, i, &s_pos, &t_pos);
    if (rc != RS_OK) return rc;
    if (PyList_SetItem(c->regions, i, Py_NewRef(region)) < 0) return RS_ERROR;
    return RS_OK;
}

static PyObject *rs_keys[RS_NFIELDS]; /* interned field names (Init_RestoreScan) */

/* region_fields: an exact tuple of exactly the RS_NFIELDS names above (equal str): 1, 0, -1. */
static int
rs_fields(PyObject *names)
{
    if (!PyTuple_CheckExact(names) || PyTuple_Size(names) != RS_NFIELDS) return 0;
    for (Py_ssize_t k = 0; k < RS_NFIELDS; k++) {
        PyObject *name = PyTuple_GetItem(names, k);
        if (name == NULL) return -1;
        if (!PyUnicode_CheckExact(name)) return 0;
        int same = PyUnicode_Compare(name, rs_keys[k]);
        if (same == -1 && PyErr_Occurred()) return -1;
        if (same != 0) return 0;
    }
    return 1;
}

static int
rs_heap_type(PyObject *cls)
{
    return PyType_Check(cls) && (PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE);
}

PyDoc_STRVAR(restore_regions_carried_doc,
"restore_regions_carried(table, fragments, region_cls, region_fields, bound_cls)\n"
"--\n\n"
"restore_regions' regions of a TransferPlan pickle record's flat operation table and, derived\n"
"from the values stored in them in the same pass, revalidate_scan's facts in the shape\n"
"revalidate_scan_carried takes: ``(regions, carried)``; carried is None when a value is one\n"
"revalidate_scan would decline. None when the table is not exactly the record's shape.\n"
"region_fields must be TransferRegion's eleven field names in order (TypeError otherwise).");

static PyObject *
restore_regions_carried(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *table, *fragments, *region_cls, *names, *bound_cls;
    if (!PyArg_ParseTuple(args, "OOOOO:restore_regions_carried", &table, &fragments, &region_cls, &names, &bound_cls)) {
        return NULL;
    }
    if (!rs_heap_type(region_cls) || !rs_heap_type(bound_cls)) {
        PyErr_SetString(PyExc_TypeError, "restore_regions_carried: classes must be heap types");
        return NULL;
    }
    int names_ok = rs_fields(names);
    if (names_ok < 0) return NULL;
    if (names_ok == 0) {
        PyErr_SetString(PyExc_TypeError, "restore_regions_carried: region_fields must be TransferRegion's fields");
        return NULL;
    }
    if (!PyTuple_CheckExact(table) || !PyTuple_CheckExact(fragments)) Py_RETURN_NONE;
    const Py_ssize_t end = PyTuple_Size(table);
    const Py_ssize_t count = PyTuple_Size(fragments);
    if (end < 0 || count < 0) return NULL;
    if (end % RS_NFIELDS != 0) Py_RETURN_NONE;
    const Py_ssize_t n = end / RS_NFIELDS;
    PyObject *regions = mr_gc_hide(PyTuple_New(n)); /* out of the collector until full (gctrack.h) */
    if (regions == NULL) return NULL;
    /* region_cls in a C-owned layout of exactly these names (layout.h): the values stored
     * directly (what its default pickling's __setstate__ stores); left tracked, as the
     * dict-backed regions were (the caller offers them to the collector afterwards) */
    static mr_layout_memo region_memo;
    mr_layout_class rl;
    (void)mr_layout_memo_check(&region_memo, &rl, region_cls, names);
    int status = RS_OK;
    for (Py_ssize_t i = 0; i < n && status == RS_OK; i++) {
        const Py_ssize_t position = i * RS_NFIELDS;
        PyObject *v[RS_NFIELDS];
        for (Py_ssize_t k = 0; k < RS_NFIELDS; k++) v[k] = PyTuple_GetItem(table, position + k); /* borrowed */
        Py_ssize_t source = 0, target = 0;
        status = rs_index(v[RS_SOURCE], count, &source);
        if (status == RS_OK) status = rs_index(v[RS_TARGET], count, &target);
        if (status != RS_OK) break;
        v[RS_SOURCE] = PyTuple_GetItem(fragments, source);
        v[RS_TARGET] = PyTuple_GetItem(fragments, target);
        status = RS_ERROR;
        if (v[RS_SOURCE] == NULL || v[RS_TARGET] == NULL) break;
        if (rl.cls != NULL) {
            PyObject *region = mr_layout_new_gc(&rl, v, RS_NFIELDS, 0);
            if (region == NULL || PyTuple_SetItem(regions, i, region) < 0) break; /* steals region */
            status = RS_OK;
            continue;
        }
        PyObject *dict = NULL;
        PyObject *region = mr_new_instance(region_cls, &dict, "restore_regions_carried");
        if (region == NULL) {
            if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
                /* no instance dict (a layout class not accepted above): the caller decides */
                PyErr_Clear();
                status = RS_DECLINE;
            }
            break;
        }
        int failed = 0;
        for (Py_ssize_t k = 0; k < RS_NFIELDS && !failed; k++) {
            failed = PyDict_SetItem(dict, PyTuple_GetItem(names, k), v[k]) < 0;
        }
        Py_DECREF(dict);
        if (failed) {
            Py_DECREF(region);
            break;
        }
        if (PyTuple_SetItem(regions, i, region) < 0) break; /* steals region */
        status = RS_OK;
    }
    /* The facts, in a second pass over the same values (the table's items and the fragments
     * just stored, the table being immutable): their temporaries (positions, boxes) are then
     * allocated after every region, not interleaved with them, and freed together after the
     * revalidation (interleaved, they kept about 80 MiB of allocator pools resident at 562k
     * operations). */
    rs_carry carry;
    memset(&carry, 0, sizeof(carry));
    carry.bound_cls = bound_cls;
    if (status == RS_OK && n > 0 && rs_carry_init(&carry, n) < 0) status = RS_ERROR;
    for (Py_ssize_t i = 0; i < n && status == RS_OK && carry.active; i++) {
        const Py_ssize_t position = i * RS_NFIELDS;
        PyObject *v[RS_NFIELDS];
        for (Py_ssize_t k = 0; k < RS_NFIELDS; k++) v[k] = PyTuple_GetItem(table, position + k); /* borrowed */
        Py_ssize_t source = 0, target = 0;
        status = rs_index(v[RS_SOURCE], count, &source);
        if (status == RS_OK) status = rs_index(v[RS_TARGET], count, &target);
        if (status != RS_OK) {
            status = RS_ERROR; /* checked by the first pass */
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "restore_regions_carried: table changed");
            break;
        }
        v[RS_SOURCE] = PyTuple_GetItem(fragments, source);
        v[RS_TARGET] = PyTuple_GetItem(fragments, target);
        PyObject *region = PyTuple_GetItem(regions, i);
        if (v[RS_SOURCE] == NULL || v[RS_TARGET] == NULL || region == NULL) {
            status = RS_ERROR;
            break;
        }
        int rc = rs_carry_region(&carry, v, region, i);
        if (rc == RS_ERROR) status = RS_ERROR;
        if (rc == RS_DECLINE) rs_carry_drop(&carry);
    }
    PyObject *result = NULL;
    if (status == RS_OK) {
        mr_gc_show(regions); /* full (and so are the carry's lists, sc_carry_result) */
        if (carry.active) mr_gc_show(carry.regions);
        PyObject *carried = carry.active ? sc_carry_result(&carry.sc, carry.regions, NULL) : Py_NewRef(Py_None);
        if (carried != NULL) {
            result = PyTuple_Pack(2, regions, carried);
            Py_DECREF(carried);
        }
    } else if (status == RS_DECLINE) {
        result = Py_NewRef(Py_None);
    }
    rs_carry_drop(&carry);
    Py_DECREF(regions);
    return result;
}

static PyMethodDef restore_scan_methods[] = {
    {"restore_regions_carried", restore_regions_carried, METH_VARARGS, restore_regions_carried_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_RestoreScan(PyObject *module)
{
    for (int k = 0; k < RS_NFIELDS; k++) {
        if (rs_keys[k] == NULL) {
            rs_keys[k] = PyUnicode_InternFromString(rs_names[k]);
            if (rs_keys[k] == NULL) return -1;
        }
    }
    return PyModule_AddFunctions(module, restore_scan_methods);
}
