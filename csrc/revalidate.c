/* revalidate: TransferPlan revalidation kernels (issue 5).
 *
 * revalidate_scan is the per-operation pass of the revalidation fast path
 * (bound_contracts._fast_revalidate): exact classes, both byte extents inside their
 * fragments (TransferRegion.validate_bounds) and the segment budgets, plus the
 * distinct fragment objects of the plan. It never reports which rule failed: on
 * anything unexpected or failing it returns None and the Python layer runs the
 * rule-by-rule path, which raises the spec's first failure. Only errors of the
 * interpreter itself (memory) propagate as exceptions.
 *
 * Integers are read only from exact ``int`` objects within the signed 64-bit range
 * and all arithmetic is overflow-checked: a value outside that range, or a sum or
 * product that leaves it, declines (the Python path decides on arbitrary precision).
 */
#include "revalidate.h"

enum {
    RV_SOURCE,
    RV_TARGET,
    RV_OUTER,
    RV_SSTRIDES,
    RV_TSTRIDES,
    RV_INNER,
    RV_SBASE,
    RV_TBASE,
    RV_OFFSET,
    RV_SHAPE,
    RV_BINDING,
    RV_NBYTES,
    RV_NNAMES
};

static const char *const rv_names[RV_NNAMES] = {
    "source",      "target",   "outer_loop_counts", "source_strides", "target_strides", "inner_bytes",
    "source_base_offset", "target_base_offset", "overlap_offset", "overlap_shape", "binding", "nbytes",
};

/* Interned attribute names, created once by Init_Revalidate (kept for the process). */
static PyObject *rv_keys[RV_NNAMES];

/* Outcome of one step: continue, decline (None to the caller) or error (exception set). */
#define RV_OK 0
#define RV_DECLINE 1
#define RV_ERROR (-1)

/* An exact int within int64 into *out: RV_OK, RV_DECLINE (anything else), RV_ERROR. */
static int
rv_int(PyObject *value, int64_t *out)
{
    if (value == NULL || !PyLong_CheckExact(value)) return RV_DECLINE;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0) return RV_DECLINE;
    if (x == -1 && PyErr_Occurred()) return RV_ERROR;
    *out = (int64_t)x;
    return RV_OK;
}

/* A budget (exact positive int): values above int64 saturate (no int64 count exceeds them). */
static int
rv_budget(PyObject *value, int64_t *out)
{
    if (!PyLong_CheckExact(value)) return RV_DECLINE;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow > 0) {
        *out = INT64_MAX;
        return RV_OK;
    }
    if (overflow < 0) return RV_DECLINE;
    if (x == -1 && PyErr_Occurred()) return RV_ERROR;
    *out = (int64_t)x;
    return RV_OK;
}

/* Borrowed item ``name`` of an instance dict, as a new reference; NULL with no error when
 * missing, NULL with an error set on failure. */
static PyObject *
rv_item(PyObject *dict, PyObject *name)
{
    PyObject *value = PyDict_GetItemWithError(dict, name);
    if (value == NULL) return NULL;
    Py_INCREF(value);
    return value;
}

/* ``fragment.binding.nbytes`` of a BoundWeightFragment (exact class checked by the caller). */
static int
rv_fragment_nbytes(PyObject *fragment, int64_t *out)
{
    PyObject *dict = PyObject_GenericGetDict(fragment, NULL);
    if (dict == NULL) return RV_ERROR;
    PyObject *binding = rv_item(dict, rv_keys[RV_BINDING]);
    Py_DECREF(dict);
    if (binding == NULL) return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    PyObject *nbytes = PyObject_GetAttr(binding, rv_keys[RV_NBYTES]);
    Py_DECREF(binding);
    if (nbytes == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return RV_ERROR;
        PyErr_Clear();
        return RV_DECLINE;
    }
    int rc = rv_int(nbytes, out);
    Py_DECREF(nbytes);
    return rc;
}

/* Open-addressing identity table: fragment object -> position in the distinct list. */
typedef struct {
    PyObject **keys; /* borrowed (the distinct list holds them); NULL marks an empty slot */
    Py_ssize_t *values;
    size_t mask;
} rv_table;

static int
rv_table_init(rv_table *t, size_t n_items)
{
    size_t cap = 8;
    while (cap < n_items * 2 + 1) {
        if (cap > SIZE_MAX / 4) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    t->keys = mr_alloc_array(cap, sizeof(PyObject *));
    t->values = mr_alloc_array(cap, sizeof(Py_ssize_t));
    if (t->keys == NULL || t->values == NULL) {
        PyMem_Free(t->keys);
        PyMem_Free(t->values);
        t->keys = NULL;
        t->values = NULL;
        return -1;
    }
    memset(t->keys, 0, cap * sizeof(PyObject *));
    t->mask = cap - 1;
    return 0;
}

static void
rv_table_free(rv_table *t)
{
    PyMem_Free(t->keys);
    PyMem_Free(t->values);
}

/* Position of ``object`` in ``distinct``, appending it when new; -1 with an error set. */
static Py_ssize_t
rv_position(rv_table *t, PyObject *distinct, PyObject *object)
{
    size_t slot = (size_t)(((uintptr_t)object >> 4) * (uintptr_t)0x9E3779B97F4A7C15ULL) & t->mask;
    while (t->keys[slot] != NULL) {
        if (t->keys[slot] == object) return t->values[slot];
        slot = (slot + 1) & t->mask;
    }
    Py_ssize_t position = PyList_Size(distinct);
    if (position < 0 || PyList_Append(distinct, object) < 0) return -1;
    t->keys[slot] = object;
    t->values[slot] = position;
    return position;
}

/* Store PyLong(position) at index i of list (a new list of the right size). */
static int
rv_set_position(PyObject *list, Py_ssize_t i, Py_ssize_t position)
{
    PyObject *number = PyLong_FromSsize_t(position);
    if (number == NULL) return -1;
    return PyList_SetItem(list, i, number); /* steals number */
}

/* One operation; *segments receives its segment count. */
static int
rv_operation(PyObject *op, PyTypeObject *region_type, PyTypeObject *bound_type, int64_t max_segments,
             int64_t *segments, PyObject **source, PyObject **target, PyObject **box)
{
    if (Py_TYPE(op) != region_type) return RV_DECLINE;
    PyObject *dict = PyObject_GenericGetDict(op, NULL);
    if (dict == NULL) return RV_ERROR;
    PyObject *v[RV_SHAPE + 1] = {NULL};
    int rc = RV_OK;
    for (int k = 0; k <= RV_SHAPE; k++) {
        v[k] = rv_item(dict, rv_keys[k]);
        if (v[k] == NULL) {
            rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
            break;
        }
    }
    Py_DECREF(dict);
    int64_t inner = 0, s_end = 0, t_end = 0, count = 1, s_nbytes = 0, t_nbytes = 0;
    if (rc != RV_OK) goto done;
    if (Py_TYPE(v[RV_SOURCE]) != bound_type || Py_TYPE(v[RV_TARGET]) != bound_type) {
        rc = RV_DECLINE;
        goto done;
    }
    PyObject *outer = v[RV_OUTER], *s_strides = v[RV_SSTRIDES], *t_strides = v[RV_TSTRIDES];
    if (!PyTuple_CheckExact(outer) || !PyTuple_CheckExact(s_strides) || !PyTuple_CheckExact(t_strides)) {
        rc = RV_DECLINE;
        goto done;
    }
    Py_ssize_t rank = PyTuple_Size(outer);
    if (rank < 0 || PyTuple_Size(s_strides) != rank || PyTuple_Size(t_strides) != rank) {
        rc = rank < 0 ? RV_ERROR : RV_DECLINE;
        goto done;
    }
    if ((rc = rv_int(v[RV_INNER], &inner)) != RV_OK) goto done;
    if ((rc = rv_int(v[RV_SBASE], &s_end)) != RV_OK) goto done;
    if ((rc = rv_int(v[RV_TBASE], &t_end)) != RV_OK) goto done;
    if (mr_add_i64(s_end, inner, &s_end) < 0 || mr_add_i64(t_end, inner, &t_end) < 0) {
        rc = RV_DECLINE;
        goto done;
    }
    for (Py_ssize_t d = 0; d < rank; d++) {
        int64_t c, ss, ts, minus, step;
        if ((rc = rv_int(PyTuple_GetItem(outer, d), &c)) != RV_OK) goto done;
        if ((rc = rv_int(PyTuple_GetItem(s_strides, d), &ss)) != RV_OK) goto done;
        if ((rc = rv_int(PyTuple_GetItem(t_strides, d), &ts)) != RV_OK) goto done;
        if (__builtin_sub_overflow(c, (int64_t)1, &minus) || mr_mul_i64(minus, ss, &step) < 0
            || mr_add_i64(s_end, step, &s_end) < 0 || mr_mul_i64(minus, ts, &step) < 0
            || mr_add_i64(t_end, step, &t_end) < 0 || mr_mul_i64(count, c, &count) < 0) {
            rc = RV_DECLINE;
            goto done;
        }
    }
    if ((rc = rv_fragment_nbytes(v[RV_SOURCE], &s_nbytes)) != RV_OK) goto done;
    if ((rc = rv_fragment_nbytes(v[RV_TARGET], &t_nbytes)) != RV_OK) goto done;
    if (s_end > s_nbytes || t_end > t_nbytes || count > max_segments) {
        rc = RV_DECLINE;
        goto done;
    }
    *box = PyTuple_Pack(2, v[RV_OFFSET], v[RV_SHAPE]);
    if (*box == NULL) {
        rc = RV_ERROR;
        goto done;
    }
    *segments = count;
    *source = v[RV_SOURCE];
    *target = v[RV_TARGET];
    v[RV_SOURCE] = v[RV_TARGET] = NULL; /* ownership to the caller */
done:
    for (int k = 0; k <= RV_SHAPE; k++) Py_XDECREF(v[k]);
    return rc;
}

PyDoc_STRVAR(revalidate_scan_doc,
"revalidate_scan(operations, max_segments_per_region, max_total_lowered_segments,\n"
"                region_type, bound_type)\n"
"--\n\n"
"Per-operation pass of the TransferPlan revalidation fast path. ``operations`` is a tuple.\n"
"Returns ``None`` unless every operation is exactly ``region_type`` with both fragments\n"
"exactly ``bound_type``, equal outer loop ranks, both byte extents inside their fragments\n"
"(``validate_bounds``) and the segment counts within both budgets, all on exact ints in the\n"
"signed 64-bit range. Otherwise returns ``(fragments, source_of, target_of, boxes)``: the\n"
"distinct fragment objects (first appearance, source before target), each operation's\n"
"source and target position in that list and its ``(overlap_offset, overlap_shape)``.");

static PyObject *
revalidate_scan(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *operations, *max_segments_obj, *max_total_obj, *region_obj, *bound_obj;
    if (!PyArg_ParseTuple(args, "O!OOO!O!:revalidate_scan", &PyTuple_Type, &operations, &max_segments_obj,
                          &max_total_obj, &PyType_Type, &region_obj, &PyType_Type, &bound_obj)) {
        return NULL;
    }
    int64_t max_segments = 0, max_total = 0;
    int rc = rv_budget(max_segments_obj, &max_segments);
    if (rc == RV_OK) rc = rv_budget(max_total_obj, &max_total);
    if (rc == RV_ERROR) return NULL;
    if (rc == RV_DECLINE) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_Size(operations);
    if (n < 0) return NULL;
    if ((size_t)n > SIZE_MAX / 4) return PyErr_NoMemory();
    PyObject *distinct = PyList_New(0);
    PyObject *source_of = PyList_New(n);
    PyObject *target_of = PyList_New(n);
    PyObject *boxes = PyList_New(n);
    rv_table table = {NULL, NULL, 0};
    PyObject *result = NULL;
    if (distinct == NULL || source_of == NULL || target_of == NULL || boxes == NULL
        || rv_table_init(&table, (size_t)n * 2) < 0) {
        goto done;
    }
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyTuple_GetItem(operations, i);
        if (op == NULL) goto done;
        PyObject *source = NULL, *target = NULL, *box = NULL;
        int64_t segments = 0;
        rc = rv_operation(op, (PyTypeObject *)region_obj, (PyTypeObject *)bound_obj, max_segments, &segments, &source,
                          &target, &box);
        if (rc == RV_ERROR) goto done;
        if (rc == RV_DECLINE || mr_add_i64(total, segments, &total) < 0 || total > max_total) {
            Py_XDECREF(source);
            Py_XDECREF(target);
            Py_XDECREF(box);
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (PyList_SetItem(boxes, i, box) < 0) { /* steals box */
            Py_DECREF(source);
            Py_DECREF(target);
            goto done;
        }
        Py_ssize_t s_position = rv_position(&table, distinct, source);
        Py_ssize_t t_position = s_position < 0 ? -1 : rv_position(&table, distinct, target);
        Py_DECREF(source);
        Py_DECREF(target);
        if (t_position < 0 || rv_set_position(source_of, i, s_position) < 0
            || rv_set_position(target_of, i, t_position) < 0) {
            goto done;
        }
    }
    result = PyTuple_Pack(4, distinct, source_of, target_of, boxes);
done:
    rv_table_free(&table);
    Py_XDECREF(distinct);
    Py_XDECREF(source_of);
    Py_XDECREF(target_of);
    Py_XDECREF(boxes);
    return result;
}

static PyMethodDef revalidate_methods[] = {
    {"revalidate_scan", revalidate_scan, METH_VARARGS, revalidate_scan_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_Revalidate(PyObject *module)
{
    for (int k = 0; k < RV_NNAMES; k++) {
        if (rv_keys[k] != NULL) continue;
        rv_keys[k] = PyUnicode_InternFromString(rv_names[k]);
        if (rv_keys[k] == NULL) return -1;
    }
    return PyModule_AddFunctions(module, revalidate_methods);
}
