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

#define RS_OK 0
#define RS_DECLINE 1
#define RS_ERROR (-1)

/* An exact int within int64 (revalidate_scan's rule): RS_OK, RS_DECLINE, RS_ERROR. */
static int
rs_int(PyObject *value, int64_t *out)
{
    if (value == NULL || !PyLong_CheckExact(value)) return RS_DECLINE;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0) return RS_DECLINE;
    if (x == -1 && PyErr_Occurred()) return RS_ERROR;
    *out = (int64_t)x;
    return RS_OK;
}

/* An exact int index in [0, limit): RS_OK, RS_DECLINE, RS_ERROR. */
static int
rs_index(PyObject *value, Py_ssize_t limit, Py_ssize_t *out)
{
    int64_t x = 0;
    int rc = rs_int(value, &x);
    if (rc != RS_OK) return rc;
    if (x < 0 || x >= (int64_t)limit) return RS_DECLINE;
    *out = (Py_ssize_t)x;
    return RS_OK;
}

/* The facts being derived (the carry is dropped, not the restore, on anything unusual). */
typedef struct {
    int active;
    PyObject *bound_cls;
    PyObject *regions;   /* list: the regions in order */
    PyObject *frags;     /* list: distinct fragments, first appearance */
    PyObject *source_of; /* list of int positions */
    PyObject *target_of;
    PyObject *boxes; /* list of (overlap_offset, overlap_shape) */
    PyObject **keys; /* identity table: fragment -> position (borrowed: frags holds them) */
    Py_ssize_t *values;
    size_t mask;
    int64_t *ends; /* per distinct fragment: the largest byte extent end */
    int64_t max_count, max_total, total;
} rs_carry;

static void
rs_carry_drop(rs_carry *c)
{
    c->active = 0;
    Py_CLEAR(c->regions);
    Py_CLEAR(c->frags);
    Py_CLEAR(c->source_of);
    Py_CLEAR(c->target_of);
    Py_CLEAR(c->boxes);
    PyMem_Free(c->keys);
    PyMem_Free(c->values);
    PyMem_Free(c->ends);
    c->keys = NULL;
    c->values = NULL;
    c->ends = NULL;
}

/* For n operations (at most 2n distinct fragments): 0, or -1 with an exception. */
static int
rs_carry_init(rs_carry *c, Py_ssize_t n)
{
    size_t cap = 8;
    if ((size_t)n > SIZE_MAX / 8) {
        PyErr_NoMemory();
        return -1;
    }
    while (cap < (size_t)n * 4 + 1) cap *= 2; /* load at most one half */
    c->regions = PyList_New(n);
    c->frags = PyList_New(0);
    c->source_of = PyList_New(n);
    c->target_of = PyList_New(n);
    c->boxes = PyList_New(n);
    c->keys = mr_alloc_array(cap, sizeof(*c->keys));
    c->values = c->keys == NULL ? NULL : mr_alloc_array(cap, sizeof(*c->values));
    c->ends = c->values == NULL ? NULL : mr_alloc_array((size_t)n * 2 + 1, sizeof(*c->ends));
    if (c->regions == NULL || c->frags == NULL || c->source_of == NULL || c->target_of == NULL || c->boxes == NULL
        || c->ends == NULL) {
        rs_carry_drop(c);
        return -1;
    }
    memset(c->keys, 0, cap * sizeof(*c->keys));
    c->mask = cap - 1;
    c->max_count = INT64_MIN;
    c->max_total = INT64_MIN;
    c->total = 0;
    c->active = 1;
    return 0;
}

/* Position of fragment in the distinct list (appended when new), its end raised to at least
 * end, stored as item i of list: 0, or -1 with an exception. */
static int
rs_position(rs_carry *c, PyObject *fragment, int64_t end, PyObject *list, Py_ssize_t i)
{
    size_t slot = (size_t)(((uintptr_t)fragment >> 4) * (uintptr_t)0x9E3779B97F4A7C15ULL) & c->mask;
    Py_ssize_t position = -1;
    while (c->keys[slot] != NULL) {
        if (c->keys[slot] == fragment) {
            position = c->values[slot];
            break;
        }
        slot = (slot + 1) & c->mask;
    }
    if (position < 0) {
        position = PyList_Size(c->frags);
        if (position < 0 || PyList_Append(c->frags, fragment) < 0) return -1;
        c->keys[slot] = fragment;
        c->values[slot] = position;
        c->ends[position] = end;
    } else if (end > c->ends[position]) {
        c->ends[position] = end;
    }
    PyObject *number = PyLong_FromSsize_t(position);
    if (number == NULL) return -1;
    return PyList_SetItem(list, i, number); /* steals number */
}

/* revalidate_scan's per-operation rule on the values v (in field order) stored in region i:
 * RS_OK recorded, RS_DECLINE (the carry is off), RS_ERROR. */
static int
rs_carry_region(rs_carry *c, PyObject *const *v, PyObject *region, Py_ssize_t i)
{
    if ((PyObject *)Py_TYPE(v[RS_SOURCE]) != c->bound_cls || (PyObject *)Py_TYPE(v[RS_TARGET]) != c->bound_cls) {
        return RS_DECLINE;
    }
    PyObject *outer = v[RS_OUTER], *s_strides = v[RS_SSTRIDES], *t_strides = v[RS_TSTRIDES];
    if (!PyTuple_CheckExact(outer) || !PyTuple_CheckExact(s_strides) || !PyTuple_CheckExact(t_strides)) {
        return RS_DECLINE;
    }
    Py_ssize_t rank = PyTuple_Size(outer);
    if (rank < 0) return RS_ERROR;
    if (PyTuple_Size(s_strides) != rank || PyTuple_Size(t_strides) != rank) return RS_DECLINE;
    int64_t inner = 0, s_end = 0, t_end = 0, count = 1;
    int rc;
    if ((rc = rs_int(v[RS_INNER], &inner)) != RS_OK) return rc;
    if ((rc = rs_int(v[RS_SBASE], &s_end)) != RS_OK) return rc;
    if ((rc = rs_int(v[RS_TBASE], &t_end)) != RS_OK) return rc;
    if (mr_add_i64(s_end, inner, &s_end) < 0 || mr_add_i64(t_end, inner, &t_end) < 0) return RS_DECLINE;
    for (Py_ssize_t d = 0; d < rank; d++) {
        int64_t n = 0, ss = 0, ts = 0, minus, step;
        PyObject *items[3] = {PyTuple_GetItem(outer, d), PyTuple_GetItem(s_strides, d), PyTuple_GetItem(t_strides, d)};
        if (items[0] == NULL || items[1] == NULL || items[2] == NULL) return RS_ERROR;
        if ((rc = rs_int(items[0], &n)) != RS_OK) return rc;
        if ((rc = rs_int(items[1], &ss)) != RS_OK) return rc;
        if ((rc = rs_int(items[2], &ts)) != RS_OK) return rc;
        if (__builtin_sub_overflow(n, (int64_t)1, &minus) || mr_mul_i64(minus, ss, &step) < 0
            || mr_add_i64(s_end, step, &s_end) < 0 || mr_mul_i64(minus, ts, &step) < 0
            || mr_add_i64(t_end, step, &t_end) < 0 || mr_mul_i64(count, n, &count) < 0) {
            return RS_DECLINE;
        }
    }
    /* revalidate_scan's running total: its largest prefix is what the budget must cover */
    if (mr_add_i64(c->total, count, &c->total) < 0) return RS_DECLINE;
    if (c->total > c->max_total) c->max_total = c->total;
    if (count > c->max_count) c->max_count = count;
    PyObject *box = PyTuple_Pack(2, v[RS_OFFSET], v[RS_SHAPE]);
    if (box == NULL) return RS_ERROR;
    if (PyList_SetItem(c->boxes, i, box) < 0) return RS_ERROR; /* steals box */
    if (PyList_SetItem(c->regions, i, Py_NewRef(region)) < 0) return RS_ERROR;
    if (rs_position(c, v[RS_SOURCE], s_end, c->source_of, i) < 0) return RS_ERROR;
    if (rs_position(c, v[RS_TARGET], t_end, c->target_of, i) < 0) return RS_ERROR;
    return RS_OK;
}

/* (regions, fragments, source_of, target_of, boxes, ends, max_count, max_total): new reference. */
static PyObject *
rs_carry_result(rs_carry *c)
{
    Py_ssize_t distinct = PyList_Size(c->frags);
    if (distinct < 0) return NULL;
    if ((size_t)distinct > (size_t)PY_SSIZE_T_MAX / sizeof(int64_t)) return PyErr_NoMemory();
    PyObject *ends = PyBytes_FromStringAndSize((const char *)c->ends, distinct * (Py_ssize_t)sizeof(int64_t));
    PyObject *max_count = PyLong_FromLongLong(c->max_count);
    PyObject *max_total = PyLong_FromLongLong(c->max_total);
    PyObject *result = NULL;
    if (ends != NULL && max_count != NULL && max_total != NULL) {
        result = PyTuple_Pack(8, c->regions, c->frags, c->source_of, c->target_of, c->boxes, ends, max_count,
                              max_total);
    }
    Py_XDECREF(ends);
    Py_XDECREF(max_count);
    Py_XDECREF(max_total);
    return result;
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
    PyObject *regions = PyTuple_New(n);
    if (regions == NULL) return NULL;
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
        PyObject *dict = NULL;
        PyObject *region = mr_new_instance(region_cls, &dict, "restore_regions_carried");
        if (region == NULL) break;
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
        PyObject *carried = carry.active ? rs_carry_result(&carry) : Py_NewRef(Py_None);
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
