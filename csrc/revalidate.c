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
#include "exact.h"
#include "layout.h"
#include "plain_dict.h"
#include "gctrack.h"

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

/* This file's readers of runtime fragments: the memo of their exact class's layout check
 * (layout.h mr_runtime_layout). */
static mr_class_memo rv_runtime_memo;

/* The state of a runtime fragment of the exact class the caller checked (new reference;
 * layout.h mr_runtime_state): the fragment itself when its class is a C-owned runtime layout,
 * else its instance dict; rv_item and ov_get read either. NULL with no error when it has
 * neither (a class the layout check declines, without __dict__: the caller declines), NULL with
 * an error on failure. */
static PyObject *rv_plain_runtime_state(PyObject *obj);

static PyObject *
rv_runtime_state(PyObject *fragment)
{
    PyObject *state = rv_plain_runtime_state(fragment);
    if (state == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
    return state;
}

/* Borrowed item ``name`` of an instance dict, as a new reference; NULL with no error when
 * missing, NULL with an error set on failure. */
static PyObject *
rv_item(PyObject *dict, PyObject *name)
{
    /* (dict: an instance dict, or a runtime fragment's state from rv_runtime_state; the accepted
     * runtime layout class, never a dict, is checked first: one pointer comparison where
     * PyDict_Check is a call under the limited API) */
    PyObject *value;
    if (rv_runtime_memo.memo.cls != NULL && (PyObject *)Py_TYPE(dict) == rv_runtime_memo.memo.cls) {
        Py_ssize_t index = mr_runtime_index(name);
        value = index < 0 ? NULL : ((mr_layout_object *)dict)->fields[index];
    }
    else {
        value = PyDict_Check(dict) ? PyDict_GetItemWithError(dict, name)
                                   : mr_runtime_state_get(&rv_runtime_memo, dict, name);
    }
    if (value == NULL) return NULL;
    Py_INCREF(value);
    return value;
}

/* mr_runtime_state for this file's passes: an instance dict only when plain (plain_dict.h),
 * else NULL with AttributeError, as for an object without one. */
static PyObject *
rv_plain_runtime_state(PyObject *obj)
{
    PyObject *state = mr_runtime_state(&rv_runtime_memo, obj);
    if (state == NULL || state == obj || pd_plain_keys(state)) return state;
    Py_DECREF(state);
    pd_refuse();
    return NULL;
}

/* mr_state_item for this file's passes: a dict-backed object's instance dict is probed only when
 * plain (plain_dict.h); else NULL with no error, as when it has none (the caller declines). */
static PyObject *
rv_state_item(PyObject *obj, const mr_layout_class *lc, Py_ssize_t index, PyObject *name)
{
    PyObject *const *fields = mr_layout_fields(obj, lc);
    if (fields != NULL) return mr_state_item(obj, lc, index, name); /* (its slot) */
    PyObject *dict = pd_instance_dict(obj);
    if (dict == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear(); /* none, or not plain */
        return NULL;
    }
    PyObject *value = PyDict_GetItemWithError(dict, name);
    Py_XINCREF(value);
    Py_DECREF(dict);
    return value;
}

/* This file's readers of bound fragments: the memo of their exact class's layout check. */
static mr_layout_memo rv_bound_memo;

/* A new reference to field `index` (named `name`) of a bound fragment's state: its layout slot
 * when its exact class is a C-owned layout of BoundWeightFragment's fields (layout.h
 * mr_bound_layout, through this file's memo: a hit is one pointer comparison), else the item of
 * its instance dict. NULL with no error when empty / missing (also: no __dict__), NULL with an
 * error on failure. Runs no Python code. */
static PyObject *
rv_bound_item(PyObject *fragment, Py_ssize_t index, PyObject *name)
{
    if (fragment == NULL) return NULL; /* (a failed item read: its error is set) */
    mr_layout_class lc;
    (void)mr_bound_layout(&rv_bound_memo, &lc, (PyObject *)Py_TYPE(fragment));
    return rv_state_item(fragment, &lc, index, name);
}

/* This file's readers of placement fragments: the memo of their exact class's layout check. */
static mr_class_memo rv_pf_memo;

/* A new reference to field `index` (named `name`) of a placement fragment's state: its layout
 * slot when its exact class is a C-owned layout of PlacementFragment's fields (layout.h
 * mr_pf_layout, through this file's memo: a hit is one pointer comparison), else the item of
 * its instance dict. NULL with no error when empty / missing (also: no __dict__), NULL with an
 * error on failure. Runs no Python code. */
static PyObject *
rv_pf_item(PyObject *placement, Py_ssize_t index, PyObject *name)
{
    if (placement == NULL) return NULL; /* (a failed item read: its error is set) */
    mr_layout_class lc;
    (void)mr_pf_layout(&rv_pf_memo, &lc, (PyObject *)Py_TYPE(placement));
    return rv_state_item(placement, &lc, index, name);
}

/* ---- Prefetch hints (the staged loops below): nothing decided, no Python code, nothing held --- */

/* Item q of a list or tuple, borrowed, or NULL (out of range, another container, a failed read;
 * no error left set). */
static PyObject *
rv_hint_item(PyObject *seq, Py_ssize_t q)
{
    Py_ssize_t n = PyList_Check(seq) ? PyList_Size(seq) : PyTuple_Check(seq) ? PyTuple_Size(seq) : -1;
    if (q < 0 || q >= n) return NULL;
    PyObject *item = PyList_Check(seq) ? PyList_GetItem(seq, q) : PyTuple_GetItem(seq, q);
    if (item == NULL) PyErr_Clear();
    return item;
}

/* The first `lines` cache lines of an object. */
static void
rv_prefetch_lines(const PyObject *obj, int lines)
{
    for (int k = 0; k < lines; k++) __builtin_prefetch((const char *)obj + 64 * k);
}

/* pd_plain_keys(dict), the same verdict, for the large attested dicts of revalidate_fragments:
 * each key's class is read RV_KEYS_AHEAD keys after a hint brought it in, so the misses of
 * several keys overlap (at 10^6 every key is one: the strs lie scattered). The keys are borrowed
 * from the dict only between PyDict_Next calls, which run no Python code and change nothing.
 * Below RV_KEYS_HINTED keys the plain walk (the contract benchmark's few keys stay cached). */
#define RV_KEYS_AHEAD 8
#define RV_KEYS_HINTED 32

static int
rv_plain_keys(PyObject *dict)
{
    if (!PyDict_CheckExact(dict)) return 0;
    if (PyDict_Size(dict) < RV_KEYS_HINTED) return pd_plain_keys(dict);
    PyObject *ring[RV_KEYS_AHEAD];
    Py_ssize_t pos = 0, seen = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        __builtin_prefetch(key);
        PyObject **at = &ring[seen % RV_KEYS_AHEAD];
        if (seen >= RV_KEYS_AHEAD && !PyUnicode_CheckExact(*at)) return 0;
        *at = key;
        seen++;
    }
    for (Py_ssize_t k = 0; k < RV_KEYS_AHEAD && k < seen; k++) {
        if (!PyUnicode_CheckExact(ring[k])) return 0;
    }
    return 1;
}

/* The placement slot of a bound fragment of the exact class this file's readers accepted
 * (rv_bound_memo), or NULL (another class, or the slot empty). */
static PyObject *
rv_hint_placement(PyObject *fragment)
{
    if (rv_bound_memo.cls == NULL || (PyObject *)Py_TYPE(fragment) != rv_bound_memo.cls) return NULL;
    return ((mr_layout_object *)fragment)->fields[MR_BF_PLACEMENT];
}

/* Prefetches the placement fragment id of a placement fragment of the exact class this file's
 * readers accepted (rv_pf_memo); anything else is skipped. */
static void
rv_hint_pfid(PyObject *placement)
{
    if (rv_pf_memo.memo.cls == NULL || (PyObject *)Py_TYPE(placement) != rv_pf_memo.memo.cls) return;
    PyObject *pfid = ((mr_layout_object *)placement)->fields[MR_PF_PLACEMENT_FRAGMENT_ID];
    if (pfid != NULL) __builtin_prefetch(pfid);
}

/* ``fragment.binding.nbytes`` of a BoundWeightFragment (exact class checked by the caller). */
static int
rv_fragment_nbytes(PyObject *fragment, int64_t *out)
{
    PyObject *binding = rv_bound_item(fragment, MR_BF_BINDING, rv_keys[RV_BINDING]);
    if (binding == NULL) return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    PyObject *nbytes = pd_getattr(binding, rv_keys[RV_NBYTES]);
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

static void rs_store(rv_table *t, PyObject *object, Py_ssize_t value);
static Py_ssize_t rs_lookup(const rv_table *t, const void *object);
static int rv_table_reserve(rv_table *t, size_t n_items);

/* Position of ``object`` in ``distinct``, appending it when new; -1 with an error set. */
static Py_ssize_t
rv_position(rv_table *t, PyObject *distinct, PyObject *object)
{
    size_t slot = mr_ptr_slot(object, t->mask);
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

/* Growable open-addressing identity table: object address -> object (both borrowed; the
 * user keeps them alive). revalidate_views: one side's runtime fragment ids: an exact str
 * fragment id object -> the row ``runtime[fragment_id]`` holds once the side is indexed. A
 * lookup of that very object in ``runtime`` (exact str: hash and equality are the str's own,
 * no Python code) returns the same row, so a hit decides exactly what the dict lookup does.
 * Keys and rows are kept alive by ``keep`` (see rw_side). Slots interleave key and value: one
 * cache line per lookup where the dict costs the key object, its index and its entry. */
typedef struct {
    PyObject *key;    /* borrowed (kept); NULL marks an empty slot */
    PyObject *row; /* borrowed (kept) */
} rw_slot;

typedef struct {
    rw_slot *slots;
    size_t mask;
    size_t count;
} rw_ident;

static int
rw_ident_init(rw_ident *t, size_t cap)
{
    t->slots = mr_alloc_array(cap, sizeof(rw_slot));
    if (t->slots == NULL) return -1;
    memset(t->slots, 0, cap * sizeof(rw_slot));
    t->mask = cap - 1;
    t->count = 0;
    return 0;
}

/* The row of ``key`` (borrowed), NULL when absent. */
static PyObject *
rw_ident_get(const rw_ident *t, const void *key)
{
    size_t slot = mr_ptr_slot(key, t->mask);
    while (t->slots[slot].key != NULL) {
        if ((const void *)t->slots[slot].key == key) return t->slots[slot].row;
        slot = (slot + 1) & t->mask;
    }
    return NULL;
}

static void
rw_ident_prefetch(const rw_ident *t, const void *key)
{
    __builtin_prefetch(&t->slots[mr_ptr_slot(key, t->mask)]);
}

/* Record key -> row unless key is present (its row is then the same: see above);
 * the table doubles at 3/4 load. -1 with MemoryError. */
static int
rw_ident_put(rw_ident *t, PyObject *key, PyObject *row)
{
    if ((t->count + 1) * 4 > (t->mask + 1) * 3) {
        size_t cap = t->mask + 1;
        if (cap > SIZE_MAX / 2 / sizeof(rw_slot)) {
            PyErr_NoMemory();
            return -1;
        }
        rw_ident grown;
        if (rw_ident_init(&grown, cap * 2) < 0) return -1;
        for (size_t i = 0; i < cap; i++) {
            if (t->slots[i].key == NULL) continue;
            size_t slot = mr_ptr_slot(t->slots[i].key, grown.mask);
            while (grown.slots[slot].key != NULL) slot = (slot + 1) & grown.mask;
            grown.slots[slot] = t->slots[i];
        }
        grown.count = t->count;
        PyMem_Free(t->slots);
        *t = grown;
    }
    size_t slot = mr_ptr_slot(key, t->mask);
    while (t->slots[slot].key != NULL) {
        if (t->slots[slot].key == key) return 0;
        slot = (slot + 1) & t->mask;
    }
    t->slots[slot].key = key;
    t->slots[slot].row = row;
    t->count++;
    return 0;
}

/* Prefetch the first lines of ``list[i]`` (no effect when out of range; nothing read). */
static void
rs_prefetch_item(PyObject *list, Py_ssize_t i)
{
    if (i >= PyList_Size(list)) return;
    PyObject *item = PyList_GetItem(list, i);
    if (item == NULL) return;
    __builtin_prefetch(item);
    __builtin_prefetch((const char *)item + 64);
}

/* Prefetch the instance dict of ``list[i]`` (PyObject_GenericGetDict runs no Python code; an
 * object without one is skipped). */
static void
rs_prefetch_dict(PyObject *list, Py_ssize_t i)
{
    if (i >= PyList_Size(list)) return;
    PyObject *item = PyList_GetItem(list, i);
    if (item == NULL) return;
    if ((PyObject *)Py_TYPE(item) == rv_bound_memo.cls) {
        /* a bound fragment in its C-owned layout (accepted by rv_bound_item): the fields are in
         * the object itself, there is no dict */
        __builtin_prefetch(item);
        __builtin_prefetch((const char *)item + 48);
        return;
    }
    PyObject *dict = PyObject_GenericGetDict(item, NULL);
    if (dict == NULL) {
        PyErr_Clear();
        return;
    }
    __builtin_prefetch(dict);
    __builtin_prefetch((const char *)dict + 32);
    Py_DECREF(dict);
}

/* Store PyLong(position) at index i of list (a new list of the right size). */
static int
rv_set_position(PyObject *list, Py_ssize_t i, Py_ssize_t position)
{
    PyObject *number = PyLong_FromSsize_t(position);
    if (number == NULL) return -1;
    return PyList_SetItem(list, i, number); /* steals number */
}

/* 1 when value is an exact tuple whose items are all exact ints, else 0 (runs no Python code). */
static int
rv_exact_int_tuple(PyObject *value)
{
    return mr_exact_tuple_of(value, &PyLong_Type);
}

/* 1 when value is an exact tuple whose items are all exact strs, else 0 (runs no Python code). */
static int
rv_exact_str_tuple(PyObject *value)
{
    return mr_exact_tuple_of(value, &PyUnicode_Type);
}

/* The layout index (layout.h MR_RG_*) of each of rv_operation's fields RV_SOURCE .. RV_SHAPE. */
static const int rv_region_index[RV_SHAPE + 1] = {
    MR_RG_SOURCE,             MR_RG_TARGET,       MR_RG_OUTER_LOOP_COUNTS, MR_RG_SOURCE_STRIDES,
    MR_RG_TARGET_STRIDES,     MR_RG_INNER_BYTES,  MR_RG_SOURCE_BASE_OFFSET, MR_RG_TARGET_BASE_OFFSET,
    MR_RG_OVERLAP_OFFSET,     MR_RG_OVERLAP_SHAPE,
};

/* One operation; *segments receives its segment count. rl: region_type's layout check (layout.h;
 * cls NULL: read through the instance dict). */
static int
rv_operation(PyObject *op, PyTypeObject *region_type, const mr_layout_class *rl, PyTypeObject *bound_type,
             int64_t max_segments, int64_t *segments, PyObject **source, PyObject **target, PyObject **box)
{
    if (Py_TYPE(op) != region_type) return RV_DECLINE;
    PyObject *v[RV_SHAPE + 1] = {NULL};
    int rc = RV_OK;
    PyObject *const *fields = mr_layout_fields(op, rl);
    if (fields != NULL) {
        for (int k = 0; k <= RV_SHAPE; k++) {
            v[k] = fields[rv_region_index[k]];
            if (v[k] == NULL) {
                rc = RV_DECLINE; /* an empty field: a missing key */
                break;
            }
            Py_INCREF(v[k]);
        }
    } else {
        PyObject *dict = pd_instance_dict(op);
        if (dict == NULL) {
            /* no instance dict (a layout class rl did not accept): the rules decide */
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return RV_ERROR;
            PyErr_Clear();
            return RV_DECLINE;
        }
        for (int k = 0; k <= RV_SHAPE; k++) {
            v[k] = rv_item(dict, rv_keys[k]);
            if (v[k] == NULL) {
                rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
                break;
            }
        }
        Py_DECREF(dict);
    }
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
    /* the box: exact tuples of exact ints (the rules' _require_typed_region refuses other
     * kinds; the passes after this one compare and hash them, and a subclass accepted here
     * would be converted in place by TransferRegion.__post_init__ later:
     * tests/test_audit25_region_boxes.py). Their ranks are the later passes' to check, as for
     * the carried scan of a restore (tests/test_pickle_restore_scan.py). */
    if (!rv_exact_int_tuple(v[RV_OFFSET]) || !rv_exact_int_tuple(v[RV_SHAPE])) {
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
revalidate_scan(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *operations, *max_segments_obj, *max_total_obj, *region_obj, *bound_obj;
    if (!mr_parse_vector(args, nargs, "O!OOO!O!:revalidate_scan", &PyTuple_Type, &operations, &max_segments_obj,
                          &max_total_obj, &PyType_Type, &region_obj, &PyType_Type, &bound_obj)) {
        return NULL;
    }
    int64_t max_segments = 0, max_total = 0;
    int rc = rv_budget(max_segments_obj, &max_segments);
    if (rc == RV_OK) rc = rv_budget(max_total_obj, &max_total);
    if (rc == RV_ERROR) return NULL;
    if (rc == RV_DECLINE) Py_RETURN_NONE;
    static mr_layout_memo scan_memo; /* region_obj in TransferRegion's C-owned layout (layout.h) */
    mr_layout_class rl;
    (void)mr_region_layout(&scan_memo, &rl, region_obj);
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
        rc = rv_operation(op, (PyTypeObject *)region_obj, &rl, (PyTypeObject *)bound_obj, max_segments, &segments,
                          &source, &target, &box);
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

/* --- revalidate_scan_carried ------------------------------------------------------------ */

static Py_ssize_t rs_positions_size(PyObject *side_of);
static Py_ssize_t rs_position(PyObject *side_of, Py_ssize_t i, Py_ssize_t n_frags);

PyDoc_STRVAR(revalidate_scan_carried_doc,
"revalidate_scan_carried(operations, carried, max_segments_per_region,\n"
"                        max_total_lowered_segments, bound_type, binding_type)\n"
"--\n\n"
"revalidate_scan for the plan a bind call has just built, from the facts bind_regions derived\n"
"from the regions it built in that call (``carried``: its fourth result). Only the private bind\n"
"path passes them, for regions and bound fragments no other code has reached yet; everything\n"
"the adapter can reach is read again: the budgets, and every distinct fragment's binding (an\n"
"exact ``binding_type``) and its ``nbytes``, which must cover the largest extent end of that\n"
"fragment's operations. ``operations`` must hold exactly the carried regions in order.\n"
"Returns what revalidate_scan returns for those operations, or ``None`` when anything differs\n"
"from the carried shape (the caller then runs revalidate_scan). The compact form of the facts\n"
"(``bound_contracts._compact_carried``: both position lists packed as bytes of native int32,\n"
"the boxes None) is accepted as well, and its packed positions and None returned as carried.");

static PyObject *
revalidate_scan_carried(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *operations, *carried, *max_segments_obj, *max_total_obj, *bound_obj, *binding_obj;
    if (!mr_parse_vector(args, nargs, "O!O!OOO!O!:revalidate_scan_carried", &PyTuple_Type, &operations, &PyTuple_Type,
                          &carried, &max_segments_obj, &max_total_obj, &PyType_Type, &bound_obj, &PyType_Type,
                          &binding_obj)) {
        return NULL;
    }
    Py_ssize_t carried_size = PyTuple_Size(carried);
    if (carried_size != 8 && carried_size != 9) Py_RETURN_NONE; /* item 8: regions_canonical_carried's */
    PyObject *c[8];
    for (Py_ssize_t k = 0; k < 8; k++) {
        c[k] = PyTuple_GetItem(carried, k);
        if (c[k] == NULL) return NULL;
    }
    PyObject *regions = c[0], *frags = c[1], *source_of = c[2], *target_of = c[3], *boxes = c[4], *ends = c[5];
    /* The compact form (bound_contracts._compact_carried): both position lists packed (exact
     * bytes of native int32, rs_position) and no boxes (None; the fast path reads each box from
     * its region); returned as it is carried. */
    int compact = PyBytes_CheckExact(source_of) && PyBytes_CheckExact(target_of) && boxes == Py_None;
    if (!PyList_CheckExact(regions) || !PyList_CheckExact(frags)
        || !(compact || (PyList_CheckExact(source_of) && PyList_CheckExact(target_of) && PyList_CheckExact(boxes)))
        || !PyBytes_CheckExact(ends)) {
        Py_RETURN_NONE;
    }
    int64_t max_segments = 0, max_total = 0, max_count = 0, max_prefix = 0;
    int rc = rv_budget(max_segments_obj, &max_segments);
    if (rc == RV_OK) rc = rv_budget(max_total_obj, &max_total);
    if (rc == RV_OK) rc = rv_int(c[6], &max_count);
    if (rc == RV_OK) rc = rv_int(c[7], &max_prefix);
    if (rc == RV_ERROR) return NULL;
    if (rc == RV_DECLINE || max_count > max_segments || max_prefix > max_total) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_Size(operations);
    Py_ssize_t distinct = PyList_Size(frags);
    Py_ssize_t ends_size = PyBytes_Size(ends);
    if (n < 0 || distinct < 0 || ends_size < 0) return NULL;
    if (n == 0 || PyList_Size(regions) != n || rs_positions_size(source_of) != n || rs_positions_size(target_of) != n
        || (!compact && PyList_Size(boxes) != n) || (size_t)distinct > (size_t)PY_SSIZE_T_MAX / sizeof(int64_t)
        || ends_size != distinct * (Py_ssize_t)sizeof(int64_t)) {
        Py_RETURN_NONE;
    }
    /* The plan's operations are the carried regions themselves (pointers only: the regions and
     * their fields are this bind call's own objects, unreachable by other code until it returns,
     * so what bind_regions derived from them still holds). */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyTuple_GetItem(operations, i), *region = PyList_GetItem(regions, i);
        if (op == NULL || region == NULL) return NULL;
        if (op != region) Py_RETURN_NONE;
    }
    const char *raw = PyBytes_AsString(ends);
    if (raw == NULL) return NULL;
    /* Every distinct fragment (a bound fragment this call created: exact bound_type, read again
     * as cheap) and the adapter's binding it holds, whose nbytes is read again (the adapter may
     * have changed it since binding read it). */
    for (Py_ssize_t p = 0; p < distinct; p++) {
        PyObject *fragment = PyList_GetItem(frags, p);
        if (fragment == NULL) return NULL;
        if (Py_TYPE(fragment) != (PyTypeObject *)bound_obj) Py_RETURN_NONE;
        PyObject *binding = rv_bound_item(fragment, MR_BF_BINDING, rv_keys[RV_BINDING]);
        if (binding == NULL) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        /* exact binding class: nbytes is a plain field in its instance dict (what getattr
         * returns), read once per fragment as no code can run between per-operation reads */
        if (Py_TYPE(binding) != (PyTypeObject *)binding_obj) {
            Py_DECREF(binding);
            Py_RETURN_NONE;
        }
        PyObject *bdict = rv_runtime_state(binding); /* (its layout, or its instance dict) */
        Py_DECREF(binding);
        if (bdict == NULL) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        PyObject *nbytes = rv_item(bdict, rv_keys[RV_NBYTES]);
        Py_DECREF(bdict);
        if (nbytes == NULL) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        int64_t have = 0, need = 0;
        rc = rv_int(nbytes, &have);
        Py_DECREF(nbytes);
        if (rc == RV_ERROR) return NULL;
        memcpy(&need, raw + (size_t)p * sizeof(int64_t), sizeof(int64_t));
        if (rc == RV_DECLINE || need > have) Py_RETURN_NONE;
    }
    /* The position lists: exact ints in [0, distinct) (bind_regions built them); packed ones
     * in that range. */
    PyObject *lists[2] = {source_of, target_of};
    for (int k = 0; k < 2; k++) {
        for (Py_ssize_t i = 0; i < n; i++) {
            if (compact) {
                if (rs_position(lists[k], i, distinct) < 0) Py_RETURN_NONE;
                continue;
            }
            PyObject *item = PyList_GetItem(lists[k], i);
            if (item == NULL) return NULL;
            int64_t position = 0;
            rc = rv_int(item, &position);
            if (rc == RV_ERROR) return NULL;
            if (rc == RV_DECLINE || position < 0 || position >= distinct) Py_RETURN_NONE;
        }
    }
    return PyTuple_Pack(4, frags, source_of, target_of, boxes);
}

/* --- revalidate_fragments -------------------------------------------------------------- */

enum {
    RF_PLACEMENT,
    RF_BINDING,
    RF_OWNER,
    RF_ATTESTATION,
    RF_PLACEMENT_DICT,
    RF_BINDING_DICT,
    RF_RESOURCE_ID,
    RF_REVISION,
    RF_WEIGHT_GENERATION,
    RF_KEY_BASE,
    RF_PFID,
    RF_RANK,
    RF_DP,
    RF_TP,
    RF_PP,
    RF_EP,
    RF_WORKER_ID,
    RF_FRAGMENT_ID,
    RF_STAGE,
    RF_ATTESTED_VIEW,
    RF_EVIDENCE,
    RF_RUNTIME_LEASE,
    RF_INSTANCE_ID,
    RF_NNAMES
};

/* A view's key_base: (instance_id, placement_id, participant_id, digest, lease_id), the first
 * and last the evidence's (av_build; bound_contracts._AttestedView). */
#define RF_KEY_BASE_N 5
#define RF_KEY_BASE_INSTANCE 0
#define RF_KEY_BASE_LEASE 4

static const char *const rf_names[RF_NNAMES] = {
    "placement", "binding", "owner", "attestation", "_placement_dict", "_binding_dict", "resource_id",
    "revision", "weight_generation", "key_base", "placement_fragment_id", "rank", "dp", "tp", "pp", "ep",
    "worker_id", "fragment_id", "pipeline_stage_id", "_attested_view", "evidence", "runtime_lease_id",
    "instance_id",
};

static PyObject *rf_keys[RF_NNAMES];

/* What rs_class_attrs (revalidate_side) asks of each name: a ``__slots__`` slot, or a plain
 * instance attribute. */
enum { RS_ATTR_SLOT, RS_ATTR_PLAIN };
static int rs_class_attrs(PyObject *type, PyObject *const *names, int n_names, int want);

typedef struct {
    PyTypeObject *placement_type;  /* PlacementFragment */
    PyTypeObject *binding_type;    /* RuntimeBindingFragment */
    PyTypeObject *attestation_type; /* RuntimeBindingAttestation */
    PyTypeObject *manifest_type;   /* WeightPlacementManifest */
    PyTypeObject *rank_type;       /* ParallelRank */
    PyObject *identity;            /* (resource_id, revision, weight_generation) of the plan */
    PyObject *view_of;             /* attestation -> its _AttestedView */
    PyObject *module;              /* this module (attested_view's attested_rows) */
    PyObject *view_type;           /* _AttestedView, or NULL: views only through view_of */
    PyObject *evidence_type;       /* RuntimeBindingEvidence (with view_type) */
    /* ``views`` (rf_view_of): bound_contracts._VIEW_STATE, WeightPlacementPart and
     * bound_contracts._attested_view_end; NULL (all three): every view through view_of */
    PyObject *view_state;
    PyObject *part_class;
    PyObject *view_end;
    struct rf_proved *proved;      /* this call's placements of the plan identity, or NULL */
    /* revalidate_fragments' attested_by_call: the two-sided lookups of each fragment in its
     * attestation's dicts, and the dicts' plain-key checks, are the caller's proven facts */
    int attested_by_call;
} rf_config;

static PyObject *av_build(PyObject *module, PyObject *view_type, PyObject *attestation, PyObject *const *types,
                          PyObject *objects);
static PyObject *rf_view_of(PyObject *attestation, const rf_config *cfg);

/* ``getattr(object, name)``; NULL with no error set on AttributeError (decline). */
static PyObject *
rf_attr(PyObject *object, PyObject *name)
{
    PyObject *value = pd_getattr(object, name);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
    return value;
}

/* The placements one call of revalidate_fragments found of the plan identity (rf_identity:
 * RV_OK) since Python code last ran in it: the attestations of one participant's side share
 * their placement (the contract plan's 12 attestations, 2 placements), whose identity is then
 * not read again. Sound while no Python code runs: rf_identity reads plain fields (its dict
 * checked, exact class) and compares exact strs and an int, and nothing else the pass does
 * between two attestations runs Python code or changes a placement (the dict probes of plain
 * dicts, tuple and layout reads; plain_dict.h's rule); the pass runs Python code only in its
 * view calls (rf_view_of), before each of which the set is emptied (rf_proved_reset). Held
 * references: no address is reused while one is kept. Only a passing verdict is kept (a refused
 * placement is read again: the same checks, errors and order as before). */
#define RF_PROVED_N 8 /* beyond, a placement's identity is read again */

/* And the (object, snapshot) pairs of attested views' deps found unchanged (dc_unchanged: 1)
 * in that window, for a deps' first RF_PROVED_LEAD pairs only: the placement and its parts
 * dict (bound_contracts._view_deps records them first), which the attestations of one side
 * share, with the very same snapshot tuples when recorded in one revalidation (_view_deps
 * shares them): the contract plan's 12 attestations walked the 12 items of one of 2 placements
 * and the 8 of its parts dict 12 times. Sound as the identities: dc_unchanged reads exact dicts
 * (PyDict_Next), C-owned layout slots and tuple items, compares pointers and runs no Python
 * code; only Python code could change such an object or snapshot. A pair found changed, or an
 * error, is walked again (the same order of checks and errors as before). */
#define RF_PROVED_PAIRS 8
#define RF_PROVED_LEAD 2

typedef struct rf_proved {
    PyObject *placements[RF_PROVED_N]; /* owned, the first n */
    int n;
    PyObject *pairs[2 * RF_PROVED_PAIRS]; /* owned (object, snapshot), the first 2 * n_pairs */
    int n_pairs;
    /* The classes proven inert for the pass's generic reads in that window (rf_inert: a
     * placement's identity fields, a view's key_base), owned, or NULL. A class is only edited
     * by Python code, so a proof holds until the next view call, as the facts above. */
    PyObject *inert[2];
    /* Kept for the whole call (not reset): the view calls made so far; each entry's placement
     * as read when the entry was made (a list, in entry order, or NULL); and how many entries
     * were made before (or by) the last view call: their placements may have been edited since
     * and are read again by rf_identities, the others are still the ones read. */
    Py_ssize_t calls;
    PyObject *read_placements;
    Py_ssize_t stale;
} rf_proved;

/* 1 when placement is kept in proved (NULL: never). */
static int
rf_proved_has(const rf_proved *proved, const PyObject *placement)
{
    if (proved == NULL) return 0;
    for (int k = 0; k < proved->n; k++) {
        if (proved->placements[k] == placement) return 1;
    }
    return 0;
}

static void
rf_proved_add(rf_proved *proved, PyObject *placement)
{
    if (proved != NULL && proved->n < RF_PROVED_N) proved->placements[proved->n++] = Py_NewRef(placement);
}

/* 1 when the pair (object, snapshot) is kept in proved (NULL: never). */
static int
rf_proved_has_pair(const rf_proved *proved, const PyObject *object, const PyObject *snapshot)
{
    if (proved == NULL) return 0;
    for (int k = 0; k < proved->n_pairs; k++) {
        if (proved->pairs[2 * k] == object && proved->pairs[2 * k + 1] == snapshot) return 1;
    }
    return 0;
}

static void
rf_proved_add_pair(rf_proved *proved, PyObject *object, PyObject *snapshot)
{
    if (proved == NULL || proved->n_pairs >= RF_PROVED_PAIRS) return;
    proved->pairs[2 * proved->n_pairs] = Py_NewRef(object);
    proved->pairs[2 * proved->n_pairs + 1] = Py_NewRef(snapshot);
    proved->n_pairs++;
}

/* Forgets everything (before Python code may run: a view call; and at the call's end). */
static void
rf_proved_reset(rf_proved *proved)
{
    if (proved == NULL) return;
    while (proved->n > 0) {
        proved->n--; /* (not inside Py_CLEAR: a macro that reads its argument twice) */
        Py_CLEAR(proved->placements[proved->n]);
    }
    while (proved->n_pairs > 0) {
        proved->n_pairs--;
        Py_CLEAR(proved->pairs[2 * proved->n_pairs]);
        Py_CLEAR(proved->pairs[2 * proved->n_pairs + 1]);
    }
    Py_CLEAR(proved->inert[0]);
    Py_CLEAR(proved->inert[1]);
}

/* The two generic reads rf_inert proves: a placement's identity, a view's key_base. */
enum { RF_INERT_IDENTITY, RF_INERT_KEY_BASE };

/* 1 when a generic getattr of the read ``which`` on an instance of ``type`` runs no Python code
 * (AUDIT38): metaclass exactly type, the generic attribute lookup, and for the identity no
 * descriptor under resource_id, revision or weight_generation in the MRO (the instance dict's
 * values, checked plain by pd_getattr_safe), for key_base a slot (rs_class_attrs). A data
 * descriptor planted on the class (a property) would run code inside the pass, after earlier
 * placements were proven and earlier fragments checked, and could forge them
 * (tests/test_audit3838_fragment_reads.py). Else 0: the caller declines. Remembered in proved
 * until Python code may run (rf_proved_reset). Runs no Python code. */
static int
rf_inert(rf_proved *proved, PyTypeObject *type, int which)
{
    if (proved != NULL && proved->inert[which] == (PyObject *)type) return 1;
    if (Py_TYPE((PyObject *)type) != &PyType_Type
        || PyType_GetSlot(type, Py_tp_getattro) != (void *)PyObject_GenericGetAttr) {
        return 0;
    }
    int ok = which == RF_INERT_IDENTITY
                 ? rs_class_attrs((PyObject *)type, &rf_keys[RF_RESOURCE_ID], 3, RS_ATTR_PLAIN)
                 : rs_class_attrs((PyObject *)type, &rf_keys[RF_KEY_BASE], 1, RS_ATTR_SLOT);
    if (ok && proved != NULL) {
        PyObject *old = proved->inert[which];
        proved->inert[which] = Py_NewRef((PyObject *)type);
        Py_XDECREF(old);
    }
    return ok;
}

/* RV_OK when ``(placement.resource_id, placement.revision, placement.weight_generation)``
 * equals the plan identity, RV_DECLINE when not, RV_ERROR on failure. */
static int
rf_identity(PyObject *placement, PyObject *identity, rf_proved *proved)
{
    PyObject *values[3] = {NULL, NULL, NULL};
    /* its class first: a descriptor under one of the names would run code (rf_inert) */
    if (!rf_inert(proved, Py_TYPE(placement), RF_INERT_IDENTITY)) return RV_DECLINE;
    /* one check of its dict for the three reads (plain fields: no Python code runs between) */
    int rc = pd_getattr_safe(placement);
    if (rc <= 0) return rc < 0 ? RV_ERROR : RV_DECLINE;
    rc = RV_OK;
    for (int k = 0; k < 3 && rc == RV_OK; k++) {
        values[k] = PyObject_GetAttr(placement, rf_keys[RF_RESOURCE_ID + k]);
        if (values[k] == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
        if (values[k] == NULL) rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    }
    /* exact strs and int only (the plan identity's are checked at the pass's entry): a
     * subclass's __eq__ would run inside the pass (tests/test_audit25_forged_in_pass.py) */
    if (rc == RV_OK
        && (!PyUnicode_CheckExact(values[0]) || !PyUnicode_CheckExact(values[1]) || !PyLong_CheckExact(values[2]))) {
        rc = RV_DECLINE;
    }
    if (rc == RV_OK) {
        PyObject *mine = PyTuple_Pack(3, values[0], values[1], values[2]);
        if (mine == NULL) {
            rc = RV_ERROR;
        }
        else {
            int equal = PyObject_RichCompareBool(mine, identity, Py_EQ);
            Py_DECREF(mine);
            rc = equal < 0 ? RV_ERROR : (equal ? RV_OK : RV_DECLINE);
        }
    }
    for (int k = 0; k < 3; k++) Py_XDECREF(values[k]);
    return rc;
}

/* dc_unchanged of a value on a C-owned layout: its set fields (fields, n of them, NULL where
 * empty), in field order, named by names (the interned field names; NULL before Init_Layout),
 * are the recorded (name, value) pairs (the state _record takes from layout_state_reader). */
static int
dc_unchanged_fields(PyObject *const *fields, PyObject *const *names, Py_ssize_t n, PyObject *snapshot)
{
    const Py_ssize_t count = PyTuple_Size(snapshot);
    if (count < 0) return -1;
    if (fields == NULL || names[0] == NULL) return 0;
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (fields[i] == NULL) continue;
        if (at > count - 2) return 0;
        if (PyTuple_GetItem(snapshot, at) != names[i] || PyTuple_GetItem(snapshot, at + 1) != fields[i]) return 0;
        at += 2;
    }
    return at == count;
}

/* dc_unchanged of a runtime fragment on its C-owned layout (lc accepted its class). */
static int
dc_unchanged_runtime(PyObject *object, const mr_layout_class *lc, PyObject *snapshot)
{
    return dc_unchanged_fields(mr_layout_fields(object, lc), mr_runtime_name_ptrs, MR_RF_N, snapshot);
}

/* 1 when ``object``'s instance dict (or ``object`` itself when it is an exact dict) holds exactly
 * the keys and values of ``snapshot`` (``(key0, value0, key1, value1, ...)``), by pointer, in
 * order, with the same size; 0 otherwise (also when it has no instance dict, or one that is not
 * an exact dict); -1 with an error set. */
static int
dc_unchanged(PyObject *object, PyObject *snapshot)
{
    if (!PyTuple_CheckExact(snapshot)) {
        PyErr_SetString(PyExc_TypeError, "deps_unchanged: every snapshot must be a tuple");
        return -1;
    }
    PyObject *dict = NULL;
    mr_layout_class lc;
    if (PyDict_CheckExact(object)) {
        dict = Py_NewRef(object);
    }
    else if (rv_runtime_memo.memo.cls != NULL && (PyObject *)Py_TYPE(object) == rv_runtime_memo.memo.cls) {
        /* a runtime fragment of the layout class already accepted (one pointer comparison; no
         * AttributeError raised and cleared per fragment) */
        lc.cls = rv_runtime_memo.memo.cls;
        lc.n = MR_RF_N;
        return dc_unchanged_runtime(object, &lc, snapshot);
    }
    else if (mr_pf_derived((PyObject *)Py_TYPE(object))) {
        /* a placement fragment in its C-owned layout (the class or a subclass): its set fields in
         * field order are its recorded state (bound_contracts._record) */
        return dc_unchanged_fields((PyObject *const *)((mr_layout_object *)object)->fields, mr_pf_name_ptrs, MR_PF_N,
                                   snapshot);
    }
    else if (PyType_Check(object)) {
        /* a class: its namespace is no instance dict (bound_contracts._record never records one,
         * its __dict__ being a mappingproxy); and PyObject_GenericGetDict would store a new dict
         * in a static builtin type's tp_dict, which CPython 3.12+ keeps NULL (that dict lives in
         * the interpreter state): deps_unchanged((int, ())) was True there, and int's tp_dict set */
        return 0;
    }
    else {
        dict = PyObject_GenericGetDict(object, NULL);
        if (dict == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
            PyErr_Clear(); /* no instance dict: not the recorded object state, unless ... */
            if (mr_runtime_layout(&rv_runtime_memo, &lc, (PyObject *)Py_TYPE(object)))
                return dc_unchanged_runtime(object, &lc, snapshot);
            return 0;
        }
        if (!PyDict_CheckExact(dict)) {
            Py_DECREF(dict);
            return 0;
        }
    }
    const Py_ssize_t size = PyDict_Size(dict);
    const Py_ssize_t count = PyTuple_Size(snapshot);
    int same = size >= 0 && count >= 0 && size <= PY_SSIZE_T_MAX / 2 && size * 2 == count;
    Py_ssize_t position = 0, at = 0;
    PyObject *key = NULL, *value = NULL;
    while (same && PyDict_Next(dict, &position, &key, &value)) {
        if (at > count - 2) {
            same = 0;
            break;
        }
        if (PyTuple_GetItem(snapshot, at) != key || PyTuple_GetItem(snapshot, at + 1) != value) same = 0;
        at += 2;
    }
    if (same && at != count) same = 0;
    Py_DECREF(dict);
    return same;
}

/* 1 when every ``(object, snapshot)`` pair of the exact tuple ``deps`` is unchanged (see
 * ``dc_unchanged``), 0 when one is not, -1 with an error set. proved (or NULL): the first
 * RF_PROVED_LEAD pairs found unchanged in this window are not walked again (rf_proved). */
static int
dc_all_unchanged(PyObject *deps, rf_proved *proved)
{
    if (!PyTuple_CheckExact(deps) || PyTuple_Size(deps) % 2 != 0) {
        PyErr_SetString(PyExc_TypeError, "deps_unchanged: deps must be a tuple of (object, snapshot) pairs");
        return -1;
    }
    const Py_ssize_t count = PyTuple_Size(deps);
    for (Py_ssize_t at = 0; at < count; at += 2) {
        PyObject *object = PyTuple_GetItem(deps, at), *snapshot = PyTuple_GetItem(deps, at + 1);
        const int lead = proved != NULL && at < 2 * RF_PROVED_LEAD;
        if (lead && rf_proved_has_pair(proved, object, snapshot)) continue;
        int same = dc_unchanged(object, snapshot);
        if (same <= 0) return same;
        if (lead) rf_proved_add_pair(proved, object, snapshot);
    }
    return 1;
}

/* The view of the exact cache ``bound_contracts._attested_view`` keeps on an attestation of
 * exactly ``cfg->attestation_type`` (``_attested_view``: ``(view, evidence, placement,
 * placement_dict, deps)``) when the attestation still holds that evidence, placement and
 * placement dict and every recorded dependency is unchanged (new reference); NULL with no
 * error set otherwise (``view_of`` then decides), NULL with an error set on failure. */
static PyObject *
rf_exact_view(PyObject *attestation, PyObject *state, const rf_config *cfg, PyObject *placement,
              PyObject *placement_dict, PyObject *taken_cached, PyObject *taken_evidence)
{
    /* (state: the attestation's instance dict, checked plain by the caller, no Python code run
     * since; taken_*: its values under _attested_view and evidence taken in that walk, borrowed,
     * or NULL: looked up) */
    if (Py_TYPE(attestation) != cfg->attestation_type) return NULL;
    PyObject *cached = taken_cached != NULL ? Py_NewRef(taken_cached) : rv_item(state, rf_keys[RF_ATTESTED_VIEW]);
    if (cached == NULL) return NULL;
    PyObject *evidence = NULL, *view = NULL;
    if (!PyTuple_CheckExact(cached) || PyTuple_Size(cached) != 5) goto done;
    evidence = taken_evidence != NULL ? Py_NewRef(taken_evidence) : rv_item(state, rf_keys[RF_EVIDENCE]);
    if (evidence == NULL) goto done;
    if (PyTuple_GetItem(cached, 1) != evidence || PyTuple_GetItem(cached, 2) != placement ||
        PyTuple_GetItem(cached, 3) != placement_dict) {
        goto done;
    }
    PyObject *deps = PyTuple_GetItem(cached, 4);
    if (!PyTuple_CheckExact(deps) || PyTuple_Size(deps) == 0) goto done;
    int same = dc_all_unchanged(deps, cfg->proved);
    if (same == 1) view = Py_NewRef(PyTuple_GetItem(cached, 0));
done:
    Py_XDECREF(evidence);
    Py_DECREF(cached);
    return view;
}

/* rf_attested_entry's status when the entry needs ``view_of`` (Python code) and the caller
 * allows no call (see revalidate_fragments: Python code run after an earlier entry's dicts were
 * checked could plant a key in them). */
#define RF_CALLOUT 2

/* may_call of rf_attested_entry for rf_enter_all: calls allowed, and the caller checks every
 * entry's two dicts again after its last call, before any probe (so the check right after this
 * entry's own call would only be repeated there: at 10^6 each is a walk of a large dict whose
 * every key is a cache miss). */
#define RF_CALL_RECHECKED 2

/* The attested entry ``(placement_dict, binding_dict, view)`` of a new attestation, checked
 * (exact manifest class, plan identity); *entry is a new reference. RF_CALLOUT (nothing kept)
 * when its view is not the exact cached one and may_call is 0. With may_call RF_CALL_RECHECKED
 * the two dicts are checked before the call (so a dict already not plain declines before any
 * Python code runs, as with 1) but not again after it: the caller does that for every entry. */
static int
rf_attested_entry(PyObject *attestation, const rf_config *cfg, PyObject **entry, int may_call, PyObject **read)
{
    PyObject *placement = NULL, *placement_dict = NULL, *binding_dict = NULL, *view = NULL;
    int rc = RV_DECLINE;
    /* its five fields from one checked dict (rf_identity reads plain fields: no Python code),
     * taken in the walk that checks it (pd_instance_values; a name not found there is looked
     * up) */
    enum { T_PLACEMENT, T_PLACEMENT_DICT, T_BINDING_DICT, T_CACHED, T_EVIDENCE, T_N };
    static const int taken_names[T_N] = {RF_PLACEMENT, RF_PLACEMENT_DICT, RF_BINDING_DICT, RF_ATTESTED_VIEW,
                                         RF_EVIDENCE};
    PyObject *taken[T_N];
    PyObject *state = pd_instance_values(attestation, rf_keys, taken_names, T_N, taken);
    if (state == NULL) goto done;
    placement = taken[T_PLACEMENT] != NULL ? Py_NewRef(taken[T_PLACEMENT]) : rv_item(state, rf_keys[RF_PLACEMENT]);
    if (placement == NULL) goto done;
    /* (its identity: rf_identities, once every view call of the pass has run) */
    if (Py_TYPE(placement) != cfg->manifest_type) goto done;
    /* both probed by placement fragment id below, for every fragment of this attestation:
     * plain keys (pd_plain_keys: exact dict, exact str keys), so no probe runs Python code
     * (a planted key's __eq__ could free the entry the pass reads: test_audit25_attested_dicts) */
    placement_dict = taken[T_PLACEMENT_DICT] != NULL ? Py_NewRef(taken[T_PLACEMENT_DICT])
                                                    : rv_item(state, rf_keys[RF_PLACEMENT_DICT]);
    /* (attested_by_call: neither dict is probed, in this pass or after it: exact dicts only) */
    if (placement_dict == NULL
        || !(cfg->attested_by_call ? PyDict_CheckExact(placement_dict) : rv_plain_keys(placement_dict)))
        goto done;
    binding_dict = taken[T_BINDING_DICT] != NULL ? Py_NewRef(taken[T_BINDING_DICT])
                                                : rv_item(state, rf_keys[RF_BINDING_DICT]);
    if (binding_dict == NULL || !(cfg->attested_by_call ? PyDict_CheckExact(binding_dict) : rv_plain_keys(binding_dict)))
        goto done;
    /* The exact cached view when every object it was derived from is unchanged, else
     * ``view_of`` (which builds a new one from the current values). */
    view = rf_exact_view(attestation, state, cfg, placement, placement_dict, taken[T_CACHED], taken[T_EVIDENCE]);
    if (view == NULL && PyErr_Occurred()) goto done;
    if (view == NULL && !may_call) {
        rc = RF_CALLOUT;
        goto done;
    }
    if (view == NULL) {
        rf_proved_reset(cfg->proved); /* Python code runs in the call */
        if (cfg->proved != NULL) cfg->proved->calls++;
        view = rf_view_of(attestation, cfg);
        if (view == NULL) goto done;
        /* Python code ran (a hook, or what the view's code reaches, could plant a key): the two
         * dicts checked again before any probe (by the caller, after its last call, with
         * RF_CALL_RECHECKED) */
        if (may_call != RF_CALL_RECHECKED && !cfg->attested_by_call
            && (!rv_plain_keys(placement_dict) || !rv_plain_keys(binding_dict)))
            goto done;
    }
    *entry = PyTuple_Pack(3, placement_dict, binding_dict, view);
    rc = *entry == NULL ? RV_ERROR : RV_OK;
    if (rc == RV_OK) *read = Py_NewRef(placement);
done:
    if (rc == RV_DECLINE && PyErr_Occurred()) rc = RV_ERROR;
    Py_XDECREF(state);
    Py_XDECREF(placement);
    Py_XDECREF(placement_dict);
    Py_XDECREF(binding_dict);
    Py_XDECREF(view);
    return rc;
}

/* ``(rank.dp, rank.tp, rank.pp, rank.ep)`` of an exact ParallelRank, from its instance dict. */
/* Derived tuples shared between the fragments of one call. Many fragments share their executor
 * (74k operations: 83k fragments, 176 executor keys, 1 route), so the key, rank and route tuples
 * of a fragment are looked up by the very objects they are built from (held here: an address
 * cannot be reused meanwhile), and a tuple built from the same objects is shared instead of
 * allocating one per fragment (about 19 MiB of temporaries less at 74k operations). Every value
 * is still read for every fragment on every call; only the allocation is saved (a tuple built
 * from the same objects is equal element by element, the items even identical). */
typedef struct {
    PyObject *k[4];  /* owned: the objects the value was built from (NULL-padded) */
    PyObject *value; /* owned: the tuple built from them; NULL marks an empty slot */
} rf_memo_entry;

typedef struct {
    rf_memo_entry *slots; /* a power of two of them, at most half used; NULL: no sharing */
    size_t mask;
    size_t used;
} rf_memo_table;

/* One attested dict of an entry as rf_fragment reads it: a cursor (rf_cursor_item) and, once
 * the cursor missed RF_TABLE_MISSES times in a dict of RF_TABLE_MIN_KEYS keys or more, an
 * identity table of its items built in one walk (rf_table_item). */
struct rf_side {
    Py_ssize_t cursor;
    Py_ssize_t misses; /* cursor misses so far; -1: no table for this dict (too small, or no memory) */
    rw_ident table;    /* slots NULL: not built */
    /* (for an entry whose dicts rf_enter_all's view calls left unchecked: rf_side_plain) */
    Py_ssize_t hits_from; /* the cursor when the last Python code had run (0 for a side made since) */
    int checked;          /* 1: every key found an exact str since the last Python code ran */
};

typedef struct {
    rf_memo_table rank, key, route;
    rf_memo_table rank_object; /* rank object -> its (dp, tp, pp, ep) tuple */
    PyObject **bases;          /* per attested entry index: its view's key_base (owned) */
    Py_ssize_t n_bases;
    struct rf_side *sides;     /* per attested entry index: its two dicts' cursors and tables */
    Py_ssize_t n_sides;        /* entries with sides (grown with the entries: a few hundred) */
    /* entries below this index: their two dicts are checked plain (rf_side_plain) before any
     * probe of them and before the pass returns (rf_enter_all's view calls ran Python code after
     * their checks); 0 while no view call ran after an entry's own check */
    Py_ssize_t recheck_below;
} rf_memo;

/* Below this many fragments nothing is shared (the tuples are few; the table would only cost
 * time on the small plans the contract benchmark revalidates). */
#define RF_MEMO_MIN_FRAGMENTS 256

/* Slots for up to n distinct values (at most 2048 shared: beyond, tuples are built as before);
 * none for a small n (then every tuple is built, as before). */
static int
rf_memo_init(rf_memo_table *t, size_t n)
{
    t->slots = NULL;
    t->mask = 0;
    t->used = 0;
    if (n < RF_MEMO_MIN_FRAGMENTS) return 0;
    size_t cap = 16;
    while (cap < 2 * n && cap < 4096) cap *= 2;
    t->slots = PyMem_Calloc(cap, sizeof(rf_memo_entry));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->mask = cap - 1;
    t->used = 0;
    return 0;
}

static void
rf_memo_free(rf_memo_table *t)
{
    if (t->slots != NULL) {
        for (size_t i = 0; i <= t->mask; i++) {
            for (int j = 0; j < 4; j++) Py_XDECREF(t->slots[i].k[j]);
            Py_XDECREF(t->slots[i].value);
        }
    }
    PyMem_Free(t->slots);
    t->slots = NULL;
}

static size_t
rf_memo_slot(const rf_memo_table *t, PyObject *const *k)
{
    uint64_t h = 0;
    for (int j = 0; j < 4; j++) h = (h ^ (uint64_t)(uintptr_t)k[j]) * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 20) & t->mask;
}

/* The tuple built from exactly these objects (borrowed), or NULL. */
static PyObject *
rf_memo_get(const rf_memo_table *t, PyObject *const *k)
{
    if (t->slots == NULL) return NULL;
    for (size_t i = rf_memo_slot(t, k); t->slots[i].value != NULL; i = (i + 1) & t->mask) {
        const rf_memo_entry *e = &t->slots[i];
        if (e->k[0] == k[0] && e->k[1] == k[1] && e->k[2] == k[2] && e->k[3] == k[3]) return e->value;
    }
    return NULL;
}

/* Remembers value as built from k (after rf_memo_get found none); a full table keeps none. */
static void
rf_memo_put(rf_memo_table *t, PyObject *const *k, PyObject *value)
{
    if (t->slots == NULL || t->used >= (t->mask + 1) / 2) return;
    size_t i = rf_memo_slot(t, k);
    while (t->slots[i].value != NULL) i = (i + 1) & t->mask;
    for (int j = 0; j < 4; j++) {
        Py_XINCREF(k[j]);
        t->slots[i].k[j] = k[j];
    }
    Py_INCREF(value);
    t->slots[i].value = value;
    t->used++;
}

/* (dp, tp, pp, ep) of an exact rank; memo (or NULL) shares a previous tuple of the same values.
 * A rank object met before in this call gives the tuple read from it then (each distinct
 * rank's fields are read once per call; the memo holds the rank, so its address is not
 * reused). */
static int
rf_rank_tuple(PyObject *rank, const rf_config *cfg, rf_memo *memo, PyObject **out)
{
    if (Py_TYPE(rank) != cfg->rank_type) return RV_DECLINE;
    PyObject *by_object[4] = {rank, NULL, NULL, NULL};
    PyObject *known = memo == NULL ? NULL : rf_memo_get(&memo->rank_object, by_object);
    if (known != NULL) {
        *out = Py_NewRef(known);
        return RV_OK;
    }
    /* (the four values taken in the walk that checks the dict, a name not found there looked
     * up: pd_instance_values) */
    static const int names[4] = {RF_DP, RF_TP, RF_PP, RF_EP};
    PyObject *values[4];
    PyObject *dict = pd_instance_values(rank, rf_keys, names, 4, values);
    if (dict == NULL) return RV_ERROR;
    for (int k = 0; k < 4; k++) {
        if (values[k] == NULL) values[k] = PyDict_GetItemWithError(dict, rf_keys[names[k]]); /* borrowed */
        if (values[k] == NULL) {
            Py_DECREF(dict);
            return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
        }
    }
    PyObject *shared = memo == NULL ? NULL : rf_memo_get(&memo->rank, values);
    if (shared != NULL) {
        *out = Py_NewRef(shared);
        if (memo != NULL) rf_memo_put(&memo->rank_object, by_object, shared);
        Py_DECREF(dict);
        return RV_OK;
    }
    *out = PyTuple_Pack(4, values[0], values[1], values[2], values[3]);
    if (*out != NULL && memo != NULL) {
        rf_memo_put(&memo->rank, values, *out);
        rf_memo_put(&memo->rank_object, by_object, *out);
    }
    Py_DECREF(dict);
    return *out == NULL ? RV_ERROR : RV_OK;
}

/* ``expected is actual``: RV_OK, else RV_DECLINE. */
static int
rf_equal(PyObject *expected, PyObject *actual)
{
    /* the same object only: comparing two objects runs their class's __eq__ (Python code, and a
     * profile or trace hook with it) inside the pass, after the entries' dicts were checked. Bind,
     * pickle, deepcopy and replace() keep them the same object; anything else the rules decide
     * (by ==, as before) */
    return expected == actual ? RV_OK : RV_DECLINE;
}

/* ``value`` (an exact str) equals the attested ``base[at]``: RV_OK, else RV_DECLINE (no Python
 * code runs: both exact str). */
static int
rf_attested_str(PyObject *base, Py_ssize_t at, PyObject *value)
{
    PyObject *attested = PyTuple_GetItem(base, at); /* borrowed; in range */
    if (attested == value) return RV_OK;
    if (attested == NULL || !PyUnicode_CheckExact(attested)) return RV_DECLINE;
    int order = PyUnicode_Compare(value, attested);
    if (order == -1 && PyErr_Occurred()) return RV_ERROR;
    return order == 0 ? RV_OK : RV_DECLINE;
}

/* The index in entry_list of attestation's entry (an exact attestation_type), made and added
 * when it has none yet (rf_attested_entry; may_call as there): RV_OK with *index, else
 * RV_DECLINE, RV_ERROR or RF_CALLOUT. The attestation is held (appended to held): ``entries``
 * is keyed by address, and Python code run by a later view call could drop the fragment's
 * reference and put another attestation at that address. */
static int
rf_entry_index(PyObject *attestation, const rf_config *cfg, rv_table *entries, PyObject *entry_list,
               PyObject *attested, PyObject *held, int may_call, Py_ssize_t *index)
{
    size_t slot = mr_ptr_slot(attestation, entries->mask);
    while (entries->keys[slot] != NULL) {
        if (entries->keys[slot] == attestation) {
            *index = entries->values[slot];
            return RV_OK;
        }
        slot = (slot + 1) & entries->mask;
    }
    PyObject *fresh = NULL, *placement = NULL;
    rf_proved *proved = cfg->proved;
    const Py_ssize_t calls = proved != NULL ? proved->calls : 0;
    int rc = rf_attested_entry(attestation, cfg, &fresh, may_call, &placement);
    if (rc != RV_OK) return rc;
    PyObject *id = PyLong_FromVoidPtr(attestation);
    int failed = id == NULL || PyDict_SetItem(attested, id, fresh) < 0 || PyList_Append(entry_list, fresh) < 0
                 || PyList_Append(held, attestation) < 0
                 || (proved != NULL && proved->read_placements != NULL && PyList_Append(proved->read_placements, placement) < 0);
    Py_XDECREF(id);
    Py_DECREF(fresh);
    Py_DECREF(placement);
    if (failed) return RV_ERROR;
    *index = PyList_Size(entry_list) - 1;
    /* (a view call made for this entry: every entry so far was read before it) */
    if (proved != NULL && proved->calls != calls) proved->stale = *index + 1;
    /* (a table grown as attestations come: one per participant, far fewer than the
     * fragments it was once sized for: ~16 bytes per fragment of bind's peak) */
    if (*index < 0 || rv_table_reserve(entries, (size_t)*index + 1) < 0) return RV_ERROR;
    rs_store(entries, attestation, *index); /* alive: the fragment (held by the caller) holds it */
    return RV_OK;
}

/* ``dict[key]`` (borrowed) when the item at the cursor ``*pos`` (PyDict_Next's position) has the
 * very object ``key`` as its key; the cursor then moves past it. NULL when that item has another
 * key or the cursor is at the end (the caller probes). The fragments mostly come in their
 * attestation's dict order (89 % of them at Kimi 4 layers, 80 % in the 10^5 sweep), so this reads
 * the dict's entries in order where a probe by hash costs its index and entry, two misses once the
 * dicts leave the cache. Exact: the dict (an exact dict whose keys are exact str, checked by the
 * caller) maps ``key`` to this value now, since its keys are distinct and ``key`` equals itself,
 * which is what the probe returns; no Python code runs. A stale cursor (the dict changed) can
 * only miss or land on another current item. */
static PyObject *
rf_cursor_item(PyObject *dict, Py_ssize_t *pos, PyObject *key)
{
    Py_ssize_t at = *pos;
    PyObject *k = NULL, *v = NULL;
    if (at < 0 || !PyDict_Next(dict, &at, &k, &v) || k != key) return NULL;
    *pos = at;
    return v;
}

/* The two sides of entry ``index`` (its placement and binding dicts: rf_side), the array grown
 * to hold them (new cursors at the dicts' start, no table); NULL with MemoryError. */
static struct rf_side *
rf_sides(rf_memo *memo, Py_ssize_t index)
{
    if (index < 0) return NULL;
    if (index >= memo->n_sides) {
        Py_ssize_t room = memo->n_sides < 8 ? 8 : memo->n_sides;
        while (room <= index) {
            if (room > PY_SSIZE_T_MAX / 8) {
                PyErr_NoMemory();
                return NULL;
            }
            room *= 2;
        }
        size_t bytes;
        if (__builtin_mul_overflow((size_t)room, 2 * sizeof(struct rf_side), &bytes)) {
            PyErr_NoMemory();
            return NULL;
        }
        struct rf_side *grown = PyMem_Realloc(memo->sides, bytes);
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        memset(grown + 2 * memo->n_sides, 0, (size_t)(room - memo->n_sides) * 2 * sizeof(struct rf_side));
        memo->sides = grown;
        memo->n_sides = room;
    }
    return memo->sides + 2 * index;
}

/* Frees every side's table and starts its miss count again (the dicts may have changed: Python
 * code ran, rf_enter_all's view calls; or the call is over). The cursors stay (a stale cursor
 * only misses). */
static void
rf_sides_reset(rf_memo *memo)
{
    for (Py_ssize_t k = 0; k < 2 * memo->n_sides; k++) {
        PyMem_Free(memo->sides[k].table.slots);
        memo->sides[k].table.slots = NULL;
        memo->sides[k].misses = 0;
    }
}

/* 1 when ``dict``, side ``side`` of entry ``index``, is plain (pd_plain_keys) now, else 0; no
 * Python code runs. For the entries rf_enter_all's view calls left unchecked (below
 * memo->recheck_below): no Python code has run in the pass since those calls, and the only reads
 * of their dicts since are rf_cursor_item's (a hit is the dict's next live entry, whose key is
 * the very exact str looked for; a miss reads nothing) and rf_table_item's (after this check), so
 * the live keys from the side's hits_from up to its cursor were all met as exact strs. A side
 * counting its hits from the dict's start (hits_from 0) walks only the keys from its cursor on;
 * else the whole dict. Once found plain a side stays so (no Python code runs after). Entries
 * made after the calls were checked when made (rf_attested_entry, with no call since). This
 * replaces rf_enter_all's walk of every entry's dicts (at 10^6 each key of it a cache miss):
 * an in-order side then needs no walk of its own; the verdict is the same, since a dict found
 * not plain here or at the end of the pass declines it (before any probe, as before). */
static int
rf_side_plain(const rf_memo *memo, Py_ssize_t index, struct rf_side *side, PyObject *dict)
{
    if (index >= memo->recheck_below || side->checked) return 1;
    if (!PyDict_CheckExact(dict)) return 0;
    Py_ssize_t pos = side->hits_from == 0 && side->cursor >= 0 ? side->cursor : 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) return 0;
    }
    side->checked = 1;
    return 1;
}

/* Fragments whose attestation's dict order is unrelated to theirs (the sweep: the source side's
 * half of the attestations, ~20 % of the fragments) miss the cursor every time, and each probe
 * by hash then costs the dict's index slot and entry, two misses once the dicts leave the cache
 * (~87 ms of the pass at 10^6). After RF_TABLE_MISSES misses in one dict of at least
 * RF_TABLE_MIN_KEYS keys, the dict's items are put in an identity table (rw_ident: key object ->
 * value, one walk in the dict's order), whose slot for a coming fragment's placement fragment id
 * is prefetched ahead (rf_table_hint): one line per probe, brought in early. */
#define RF_TABLE_MISSES 64
#define RF_TABLE_MIN_KEYS 1024

/* ``dict[key]`` (borrowed) from the side's identity table, built on the side's
 * RF_TABLE_MISSES-th cursor miss; NULL when the table does not hold that very key object (or
 * there is no table): the caller probes the dict, which decides. Never fails (a table that
 * cannot be allocated is not built). Exact: the table holds the dict's items as of its walk,
 * and no Python code runs in the pass after that walk (a view call, the only Python code the pass
 * runs after its first entry, happens in rf_enter_all, which resets the tables), so the dict
 * maps the very key object to the same value now (what the probe returns: the key equals itself;
 * the keys are exact str, checked by the caller). */
static PyObject *
rf_table_item(struct rf_side *side, PyObject *dict, PyObject *key)
{
    if (side->table.slots == NULL) {
        if (side->misses < 0 || ++side->misses < RF_TABLE_MISSES) return NULL;
        const Py_ssize_t size = PyDict_Size(dict);
        size_t cap = 16;
        while (size >= RF_TABLE_MIN_KEYS && cap < 2 * (size_t)size && cap <= SIZE_MAX / 4) cap *= 2;
        if (size < RF_TABLE_MIN_KEYS || cap < 2 * (size_t)size || rw_ident_init(&side->table, cap) < 0) {
            PyErr_Clear(); /* (a negative size: not a dict; a failed allocation: no table) */
            side->table.slots = NULL;
            side->misses = -1;
            return NULL;
        }
        Py_ssize_t pos = 0;
        PyObject *k = NULL, *v = NULL;
        while (PyDict_Next(dict, &pos, &k, &v)) {
            if (rw_ident_put(&side->table, k, v) < 0) { /* (sized for them all: never grows) */
                PyErr_Clear();
                PyMem_Free(side->table.slots);
                side->table.slots = NULL;
                side->misses = -1;
                return NULL;
            }
        }
    }
    return rw_ident_get(&side->table, key);
}

/* Hint only: prefetches the table slots (rf_table_item) of the placement fragment id of the
 * fragment a few places ahead, when its attestation has an entry whose sides have tables.
 * Reads only pointers the staged hints brought in; decides nothing, holds nothing. */
static inline __attribute__((always_inline)) void
rf_table_hint(const rf_memo *memo, const rv_table *entries, PyObject *fragment)
{
    PyObject *placement = fragment == NULL ? NULL : rv_hint_placement(fragment);
    if (placement == NULL || rv_pf_memo.memo.cls == NULL || (PyObject *)Py_TYPE(placement) != rv_pf_memo.memo.cls)
        return;
    PyObject *attestation = ((mr_layout_object *)fragment)->fields[MR_BF_ATTESTATION];
    PyObject *pfid = ((mr_layout_object *)placement)->fields[MR_PF_PLACEMENT_FRAGMENT_ID];
    if (attestation == NULL || pfid == NULL) return;
    const Py_ssize_t index = rs_lookup(entries, attestation);
    if (index < 0 || index >= memo->n_sides) return;
    for (int side = 0; side < 2; side++) {
        const rw_ident *t = &memo->sides[2 * index + side].table;
        if (t->slots != NULL) rw_ident_prefetch(t, pfid);
    }
}

/* One fragment: appends its key (unless keys is None: revalidate_fragments' want_keys), route
 * half and runtime id. ``entries`` maps attestations
 * (borrowed; the fragments hold them) to their entry tuple (borrowed from ``attested``).
 * RF_CALLOUT: its attestation is new and needs ``view_of`` while may_call is 0 (nothing
 * appended). */
static int
rf_fragment(PyObject *fragment, const rf_config *cfg, rv_table *entries, PyObject *entry_list, PyObject *attested,
            PyObject *held, PyObject *keys, PyObject *routes, PyObject *runtime_ids, rf_memo *memo, int may_call)
{
    enum { F_PLACEMENT, F_BINDING, F_OWNER, F_ATTESTATION, F_N };
    PyObject *f[F_N] = {NULL};
    PyObject *binding_owner = NULL, *pfid = NULL, *rank = NULL, *rank_tuple = NULL, *worker = NULL;
    PyObject *fragment_id = NULL, *stage = NULL, *expected = NULL, *key = NULL, *route = NULL, *lease = NULL;
    PyObject *instance = NULL, *entry = NULL;
    int rc = RV_DECLINE;
    /* its layout's slots (or its instance dict: rv_bound_item) */
    static const Py_ssize_t slot_of[F_N] = {MR_BF_PLACEMENT, MR_BF_BINDING, MR_BF_OWNER, MR_BF_ATTESTATION};
    mr_layout_class lc;
    (void)mr_bound_layout(&rv_bound_memo, &lc, (PyObject *)Py_TYPE(fragment));
    /* its layout's slots read in place (rv_state_item's layout path, without a call per field) */
    PyObject *const *ff = mr_layout_fields(fragment, &lc);
    for (int k = 0; k < F_N; k++) {
        f[k] = ff != NULL ? Py_XNewRef(ff[slot_of[k]]) : rv_state_item(fragment, &lc, slot_of[k], rf_keys[RF_PLACEMENT + k]);
        if (f[k] == NULL) break;
    }
    if (PyErr_Occurred()) {
        rc = RV_ERROR;
        goto done;
    }
    if (f[F_ATTESTATION] == NULL) goto done;
    /* its runtime lease: an exact str, compared with the attested lease below (anything else,
     * or an emptied slot: the rules decide) */
    lease = ff != NULL ? Py_XNewRef(ff[MR_BF_RUNTIME_LEASE_ID])
                       : rv_state_item(fragment, &lc, MR_BF_RUNTIME_LEASE_ID, rf_keys[RF_RUNTIME_LEASE]);
    if (lease == NULL || !PyUnicode_CheckExact(lease)) goto done;
    /* its instance id: the same (the constructor's fence compares both) */
    instance = ff != NULL ? Py_XNewRef(ff[MR_BF_INSTANCE_ID])
                          : rv_state_item(fragment, &lc, MR_BF_INSTANCE_ID, rf_keys[RF_INSTANCE_ID]);
    if (instance == NULL || !PyUnicode_CheckExact(instance)) goto done;
    if (Py_TYPE(f[F_PLACEMENT]) != cfg->placement_type || Py_TYPE(f[F_BINDING]) != cfg->binding_type) goto done;
    if (f[F_OWNER] != Py_None) goto done;
    /* The placement and binding are exactly PlacementFragment and RuntimeBindingFragment,
     * classes without descriptors of their own for these fields: each attribute read is its
     * instance state's value, so both states are read together here (a field missing from
     * the state, where the attribute would be a class default, declines). */
    {
        /* (the placement's fields from its layout's slots: rv_pf_item; the binding's from its
         * state: its layout, or its instance dict) */
        if (rv_runtime_memo.memo.cls != NULL && (PyObject *)Py_TYPE(f[F_BINDING]) == rv_runtime_memo.memo.cls) {
            /* the runtime layout this file's readers accepted: its state is the object itself,
             * read slot by slot (what rv_runtime_state and rv_item read for it) */
            PyObject *const *bf = (PyObject *const *)((mr_layout_object *)f[F_BINDING])->fields;
            binding_owner = Py_XNewRef(bf[MR_RF_OWNER]);
            worker = binding_owner == NULL ? NULL : Py_XNewRef(bf[MR_RF_WORKER_ID]);
            fragment_id = worker == NULL ? NULL : Py_XNewRef(bf[MR_RF_FRAGMENT_ID]);
        }
        else {
            PyObject *bdict = rv_runtime_state(f[F_BINDING]);
            if (bdict == NULL) {
                rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
                goto done;
            }
            binding_owner = rv_item(bdict, rf_keys[RF_OWNER]);
            worker = binding_owner == NULL ? NULL : rv_item(bdict, rf_keys[RF_WORKER_ID]);
            fragment_id = worker == NULL ? NULL : rv_item(bdict, rf_keys[RF_FRAGMENT_ID]);
            Py_DECREF(bdict);
        }
        if (fragment_id != NULL && rv_pf_memo.memo.cls != NULL
            && (PyObject *)Py_TYPE(f[F_PLACEMENT]) == rv_pf_memo.memo.cls) {
            /* the placement layout rv_pf_item accepts: the same slots, read in place */
            PyObject *const *pf = (PyObject *const *)((mr_layout_object *)f[F_PLACEMENT])->fields;
            /* (read only for the lookups, which attested_by_call skips: not touched then) */
            pfid = cfg->attested_by_call ? Py_NewRef(Py_None) : Py_XNewRef(pf[MR_PF_PLACEMENT_FRAGMENT_ID]);
            rank = pfid == NULL ? NULL : Py_XNewRef(pf[MR_PF_RANK]);
            stage = rank == NULL ? NULL : Py_XNewRef(pf[MR_PF_PIPELINE_STAGE_ID]);
        }
        else {
            pfid = fragment_id == NULL ? NULL
                                       : rv_pf_item(f[F_PLACEMENT], MR_PF_PLACEMENT_FRAGMENT_ID, rf_keys[RF_PFID]);
            rank = pfid == NULL ? NULL : rv_pf_item(f[F_PLACEMENT], MR_PF_RANK, rf_keys[RF_RANK]);
            stage = rank == NULL ? NULL : rv_pf_item(f[F_PLACEMENT], MR_PF_PIPELINE_STAGE_ID, rf_keys[RF_STAGE]);
        }
        if (PyErr_Occurred()) {
            rc = RV_ERROR;
            goto done;
        }
    }
    if (stage == NULL || binding_owner != Py_None) goto done;
    /* the runtime fragment id keys revalidate_views' runtime maps (hashed and compared there):
     * an exact str only (AUDIT5 F1) */
    if (!PyUnicode_CheckExact(fragment_id)) goto done;
    PyObject *attestation = f[F_ATTESTATION];
    if (Py_TYPE(attestation) != cfg->attestation_type) goto done;
    /* The attestation's entry: found by identity, else checked and added. */
    Py_ssize_t index = -1;
    rc = rf_entry_index(attestation, cfg, entries, entry_list, attested, held, may_call, &index);
    if (rc != RV_OK) goto done;
    rc = RV_DECLINE;
    entry = Py_XNewRef(PyList_GetItem(entry_list, index)); /* held: nothing below may free it */
    if (entry == NULL) {
        rc = RV_ERROR;
        goto done;
    }
    /* probed with an exact str only (a subclass's __hash__ / __eq__ would run in the probe) */
    if (!cfg->attested_by_call && !PyUnicode_CheckExact(pfid)) goto done;
    /* attested_by_call: the caller proved that the two dicts map pfid to these very objects
     * (revalidate_fragments' doc), which is what the lookups below would find */
    struct rf_side *sides = cfg->attested_by_call ? NULL : rf_sides(memo, index);
    if (sides == NULL && !cfg->attested_by_call) {
        rc = RV_ERROR;
        goto done;
    }
    for (int side = 0; sides != NULL && side < 2; side++) {
        PyObject *dict = PyTuple_GetItem(entry, side); /* (the entry holds it) */
        expected = rf_cursor_item(dict, &sides[side].cursor, pfid); /* borrowed */
        if (expected == NULL && !rf_side_plain(memo, index, &sides[side], dict)) goto done; /* (before a probe) */
        if (expected == NULL) expected = rf_table_item(&sides[side], dict, pfid); /* borrowed */
        if (expected == NULL) expected = PyDict_GetItemWithError(dict, pfid); /* borrowed */
        if (expected == NULL) goto done;
        Py_INCREF(expected);
        rc = rf_equal(expected, f[side == 0 ? F_PLACEMENT : F_BINDING]);
        Py_CLEAR(expected);
        if (rc != RV_OK) goto done;
        rc = RV_DECLINE;
    }
    rc = rf_rank_tuple(rank, cfg, memo, &rank_tuple);
    if (rc != RV_OK) goto done;
    rc = RV_DECLINE;
    {
        /* the view's key_base, read once per view in this call (the view is this call's
         * own derived object, held by ``attested``) */
        PyObject *base = NULL;
        if (memo->bases != NULL && index < memo->n_bases) base = Py_XNewRef(memo->bases[index]);
        if (base == NULL) {
            PyObject *view = PyTuple_GetItem(entry, 2); /* (the entry holds it) */
            if (view == NULL) {
                rc = RV_ERROR;
                goto done;
            }
            if (!rf_inert(cfg->proved, Py_TYPE(view), RF_INERT_KEY_BASE)) goto done; /* (rf_inert) */
            base = rf_attr(view, rf_keys[RF_KEY_BASE]);
            if (base == NULL) goto done;
            if (memo->bases != NULL && index < memo->n_bases) memo->bases[index] = Py_NewRef(base);
        }
        if (!PyTuple_CheckExact(base) || PyTuple_Size(base) != RF_KEY_BASE_N) {
            Py_DECREF(base);
            goto done;
        }
        /* the fragment's lease and instance id are the evidence's (the constructor's fence,
         * spec §9.3 step 9: a value forged in place after construction declines; the rules
         * refuse it) */
        rc = rf_attested_str(base, RF_KEY_BASE_LEASE, lease);
        if (rc == RV_OK) rc = rf_attested_str(base, RF_KEY_BASE_INSTANCE, instance);
        if (rc != RV_OK) {
            Py_DECREF(base);
            goto done;
        }
        rc = RV_DECLINE;
        if (keys == Py_None) { /* no key wanted: every check above still ran */
            Py_DECREF(base);
            goto key_done;
        }
        PyObject *from[4] = {base, worker, rank_tuple, NULL};
        PyObject *shared = rf_memo_get(&memo->key, from);
        if (shared != NULL) {
            key = Py_NewRef(shared); /* built from these very objects */
            Py_DECREF(base);
            goto key_done;
        }
        Py_ssize_t n = PyTuple_Size(base);
        key = n < 0 || n > PY_SSIZE_T_MAX - 2 ? NULL : PyTuple_New(n + 2);
        if (key == NULL) {
            Py_DECREF(base);
            rc = RV_ERROR;
            goto done;
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *item = PyTuple_GetItem(base, k);
            if (item == NULL || PyTuple_SetItem(key, k, Py_NewRef(item)) < 0) {
                Py_DECREF(base);
                rc = RV_ERROR;
                goto done;
            }
        }
        if (PyTuple_SetItem(key, n, Py_NewRef(worker)) < 0 || PyTuple_SetItem(key, n + 1, Py_NewRef(rank_tuple)) < 0) {
            Py_DECREF(base);
            rc = RV_ERROR;
            goto done;
        }
        rf_memo_put(&memo->key, from, key);
        Py_DECREF(base);
    }
key_done:
    {
        PyObject *pp = PyTuple_GetItem(rank_tuple, 2); /* borrowed: rank_tuple holds it */
        if (pp == NULL) {
            rc = RV_ERROR;
            goto done;
        }
        PyObject *from[4] = {pp, stage, NULL, NULL};
        PyObject *shared = rf_memo_get(&memo->route, from);
        if (shared != NULL) {
            route = Py_NewRef(shared);
        }
        else {
            route = PyTuple_Pack(2, pp, stage);
            if (route != NULL) rf_memo_put(&memo->route, from, route);
        }
    }
    if (route == NULL || (keys != Py_None && PyList_Append(keys, key) < 0) || PyList_Append(routes, route) < 0
        || PyList_Append(runtime_ids, fragment_id) < 0) {
        rc = RV_ERROR;
        goto done;
    }
    rc = RV_OK;
done:
    if (rc == RV_DECLINE && PyErr_Occurred()) rc = RV_ERROR;
    for (int k = 0; k < F_N; k++) Py_XDECREF(f[k]);
    Py_XDECREF(binding_owner);
    Py_XDECREF(pfid);
    Py_XDECREF(rank);
    Py_XDECREF(rank_tuple);
    Py_XDECREF(worker);
    Py_XDECREF(fragment_id);
    Py_XDECREF(stage);
    Py_XDECREF(expected);
    Py_XDECREF(key);
    Py_XDECREF(route);
    Py_XDECREF(lease);
    Py_XDECREF(instance);
    Py_XDECREF(entry);
    return rc;
}

/* Hints only (nothing is decided on them; no Python code runs, nothing is held): the fragments
 * lie scattered in memory while the loop takes them in list order. Staged hints for the
 * fragment at i + RF_STAGE_* (a fragment, placement or binding of any other class than the
 * layouts this file's readers accepted is skipped): stage 0 the fragment, 1 its placement and
 * binding, 2 its placement fragment id (the str the two attested dicts are searched with) and
 * its binding's runtime fragment id.
 * Each stage reads only what the stage before brought into the cache, so the misses of
 * several fragments overlap instead of following one another. */
#define RF_STAGE_FRAGMENT 16
#define RF_STAGE_PARTS 8
#define RF_STAGE_PFID 4

/* (always inlined: GCC drops the calls to a static function whose only effects are prefetches,
 * as layout.h's mr_pf_prefetch_ahead notes) */
static inline __attribute__((always_inline)) void
rf_stage_hint(PyObject *fragment, int stage)
{
    if (fragment == NULL) return;
    if (stage == 0) {
        rv_prefetch_lines(fragment, 2);
        return;
    }
    PyObject *placement = rv_hint_placement(fragment);
    if (placement == NULL) return;
    if (stage == 1) {
        PyObject *binding = ((mr_layout_object *)fragment)->fields[MR_BF_BINDING];
        rv_prefetch_lines(placement, 2);
        if (binding != NULL) rv_prefetch_lines(binding, 3);
        return;
    }
    if (stage == 2) rv_hint_pfid(placement); /* (stage 3: the runtime fragment id only) */
    /* and the binding's runtime fragment id (a str of its own per fragment, which the loop
     * takes a reference to) */
    PyObject *binding = ((mr_layout_object *)fragment)->fields[MR_BF_BINDING];
    if (binding == NULL || rv_runtime_memo.memo.cls == NULL) return;
    if ((PyObject *)Py_TYPE(binding) != rv_runtime_memo.memo.cls) return;
    PyObject *fid = ((mr_layout_object *)binding)->fields[MR_RF_FRAGMENT_ID];
    if (fid != NULL) __builtin_prefetch(fid);
}

/* Python code run by a view call (``view_of``: the package's, but a profile or trace hook, or
 * a forged value's method it reaches, runs there too) after an earlier entry's dicts were checked
 * could plant a key in them (they are reachable: gc.get_objects()), and the pass would probe them
 * unchecked. So the pass calls ``view_of`` only while no entry exists yet; the first time a view
 * call is needed after that, every remaining fragment's new attestation gets its entry at once
 * (all the calls made here, in fragment order), and then every entry's two dicts are checked
 * again by the caller (rf_side_plain: before any probe of a dict and before the pass returns;
 * not also right after each call: RF_CALL_RECHECKED). From there on no Python code runs in the
 * pass: a new attestation needing a call declines (the rules decide). A fragment whose
 * attestation is missing or inexact gets none here (rf_fragment declines there). RV_OK,
 * RV_DECLINE (an entry refused), RV_ERROR. */
static int
rf_enter_all(PyObject *items, Py_ssize_t from, Py_ssize_t n, const rf_config *cfg, rv_table *entries,
             PyObject *entry_list, PyObject *attested, PyObject *held)
{
    for (Py_ssize_t j = from; j < n; j++) {
        PyObject *fragment = PyList_GetItem(items, j); /* borrowed; the caller's private list holds it */
        if (fragment == NULL) return RV_ERROR;
        mr_layout_class lc;
        (void)mr_bound_layout(&rv_bound_memo, &lc, (PyObject *)Py_TYPE(fragment));
        PyObject *attestation = rv_state_item(fragment, &lc, MR_BF_ATTESTATION, rf_keys[RF_ATTESTATION]);
        if (attestation == NULL) {
            if (PyErr_Occurred()) return RV_ERROR;
            continue;
        }
        Py_ssize_t index = -1;
        int rc = Py_TYPE(attestation) != cfg->attestation_type
                     ? RV_OK
                     : rf_entry_index(attestation, cfg, entries, entry_list, attested, held, RF_CALL_RECHECKED,
                                      &index);
        Py_DECREF(attestation);
        if (rc != RV_OK) return rc == RF_CALLOUT ? RV_ERROR : rc; /* (may_call: never RF_CALLOUT) */
    }
    /* (every entry's two dicts checked again by the caller: rf_side_plain, before any probe of
     * them and before the pass returns) */
    return RV_OK;
}

/* The plan identity of every entry's attested placement (``held``: the entries' attestations,
 * exact attestation_type, in entry order), checked after the fragment loop (AUDIT38): the
 * pass's view calls run Python code (and a read of the identity would, through a descriptor
 * planted on the manifest class), which could edit a placement already checked; here no Python
 * code runs from the checks to the pass's return (rf_inert proves the reads run none), so what
 * is checked is what the rules read. Each placement is read again from its attestation's
 * instance dict (plain), exactly manifest_type. RV_OK, RV_DECLINE, RV_ERROR. */
static int
rf_identities(PyObject *held, const rf_config *cfg)
{
    rf_proved *proved = cfg->proved;
    rf_proved_reset(proved); /* (proofs made before a view call are not relied on) */
    const Py_ssize_t count = PyList_Size(held);
    if (count < 0 || proved == NULL || proved->read_placements == NULL || PyList_Size(proved->read_placements) != count)
        return count < 0 || PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    for (Py_ssize_t k = 0; k < count; k++) {
        if (k >= proved->stale) {
            /* read when its entry was made, no view call since (and no Python code: the reads
             * of the pass run none) */
            PyObject *placement = PyList_GetItem(proved->read_placements, k); /* borrowed; in range */
            if (placement == NULL) return RV_ERROR;
            if (Py_TYPE(placement) != cfg->manifest_type) return RV_DECLINE;
            if (rf_proved_has(proved, placement)) continue;
            Py_INCREF(placement); /* (held across the reads) */
            int rc = rf_identity(placement, cfg->identity, proved);
            if (rc == RV_OK) rf_proved_add(proved, placement);
            Py_DECREF(placement);
            if (rc != RV_OK) return rc;
            continue;
        }
        PyObject *attestation = PyList_GetItem(held, k); /* borrowed; held holds it */
        if (attestation == NULL) return RV_ERROR;
        PyObject *taken[1];
        static const int names[1] = {RF_PLACEMENT};
        PyObject *state = pd_instance_values(attestation, rf_keys, names, 1, taken);
        if (state == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return RV_ERROR;
            PyErr_Clear();
            return RV_DECLINE;
        }
        PyObject *placement = taken[0] != NULL ? Py_NewRef(taken[0]) : rv_item(state, rf_keys[RF_PLACEMENT]);
        Py_DECREF(state);
        if (placement == NULL) return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
        int rc = RV_OK;
        if (Py_TYPE(placement) != cfg->manifest_type) rc = RV_DECLINE;
        else if (!rf_proved_has(cfg->proved, placement)) {
            rc = rf_identity(placement, cfg->identity, cfg->proved);
            if (rc == RV_OK) rf_proved_add(cfg->proved, placement);
        }
        Py_DECREF(placement);
        if (rc != RV_OK) return rc;
    }
    return RV_OK;
}

PyDoc_STRVAR(revalidate_fragments_doc,
"revalidate_fragments(fragments, placement_type, binding_type, attestation_type,\n"
"                     manifest_type, rank_type, identity, view_of, view_type=None, evidence_type=None,\n"
"                     want_keys=True, views=None)\n"
"--\n\n"
"Per distinct bound fragment of the TransferPlan revalidation fast path (spec §9.6 step 11).\n"
"``fragments`` is a list of bound fragments (their class is checked by the caller). Returns\n"
"``None`` unless every fragment's placement and binding are exactly ``placement_type`` and\n"
"``binding_type``, both owners are ``None``, its attestation is exactly ``attestation_type``\n"
"whose placement is exactly ``manifest_type`` with ``(resource_id, revision,\n"
"weight_generation) == identity``, the attestation's ``_placement_dict`` / ``_binding_dict``\n"
"(exact dicts) hold entries equal to the fragment's placement and binding for its placement\n"
"fragment id, and the placement's rank is exactly ``rank_type``. Otherwise returns\n"
"``(keys, route_halves, runtime_ids, attested)``: per fragment ``view.key_base + (worker_id,\n"
"(dp, tp, pp, ep))``, ``(pp, pipeline_stage_id)`` and the runtime fragment id, and\n"
"``{id(attestation): (placement_dict, binding_dict, view)}``. The view is the exact cache\n"
"entry ``bound_contracts._attested_view`` keeps on an attestation of exactly\n"
"``attestation_type`` (``_attested_view``: ``(view, evidence, placement, placement_dict,\n"
"deps)``) when the attestation still holds that evidence, placement and placement dict and\n"
"``deps_unchanged(deps)``, else ``view_of(attestation)``; ``view_type`` and ``evidence_type``\n"
"are still checked (two types or None) but not used. Errors raised by the values' own methods\n"
"propagate (TypeError for malformed ``deps`` of such an entry). With ``want_keys`` false the\n"
"keys are not built (every check is the same) and ``keys`` is None: for a caller that does not\n"
"run revalidate_side, their only reader.\n"
"``views``, None or ``(view_state, part_class, view_end)`` (``bound_contracts._VIEW_STATE``,\n"
"``WeightPlacementPart``, ``bound_contracts._attested_view_end``, with ``view_type`` given):\n"
"``view_of`` is then ``bound_contracts._attested_view`` and its common paths run in C (the\n"
"scope entry; a first view without ``_attested_view`` recorded; a view with binding's snapshot\n"
"objects), calling ``view_end`` for its other ends and ``view_of`` whenever something else is\n"
"found before anything is changed.\n"
"``attested_by_call`` (requires ``want_keys`` false): the caller's proof that every fragment's\n"
"placement and binding are the very objects its attestation's ``_placement_dict`` and\n"
"``_binding_dict`` map its placement fragment id to, and that nothing probes those dicts after\n"
"this pass: then the two lookups per fragment and the dicts' plain-key checks (which guard\n"
"those probes) are skipped, and every other check runs. A sealed bind call proves it for the\n"
"fragments bind_regions_ordered made in that call (bound_contracts._fast_revalidate_live).");

static PyObject *
revalidate_fragments(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *fragments;
    PyObject *types[5];
    rf_config cfg;
    PyObject *view_type = Py_None, *evidence_type = Py_None, *views = Py_None;
    int want_keys = 1, attested_by_call = 0;
    if (!mr_parse_vector(args, nargs, "O!O!O!O!O!O!O!O|OOpOp:revalidate_fragments", &PyList_Type, &fragments,
                          &PyType_Type, &types[0], &PyType_Type, &types[1], &PyType_Type, &types[2], &PyType_Type,
                          &types[3], &PyType_Type, &types[4], &PyTuple_Type, &cfg.identity, &cfg.view_of, &view_type,
                          &evidence_type, &want_keys, &views, &attested_by_call)) {
        return NULL;
    }
    if (attested_by_call && want_keys) {
        /* (the keys' reader, revalidate_side, probes the dicts this mode leaves unchecked) */
        PyErr_SetString(PyExc_TypeError, "revalidate_fragments: attested_by_call requires want_keys false");
        return NULL;
    }
    cfg.attested_by_call = attested_by_call;
    cfg.view_state = cfg.part_class = cfg.view_end = NULL;
    if (views != Py_None) {
        if (!PyTuple_CheckExact(views) || PyTuple_Size(views) != 3 || view_type == Py_None
            || !PyType_Check(PyTuple_GetItem(views, 1)) || !PyCallable_Check(PyTuple_GetItem(views, 2))) {
            PyErr_SetString(PyExc_TypeError,
                            "revalidate_fragments: views must be None or (view_state, part_class, view_end) with a "
                            "view_type");
            return NULL;
        }
        cfg.view_state = PyTuple_GetItem(views, 0); /* borrowed: the caller's tuple holds them */
        cfg.part_class = PyTuple_GetItem(views, 1);
        cfg.view_end = PyTuple_GetItem(views, 2);
    }
    if ((view_type == Py_None) != (evidence_type == Py_None)
        || (view_type != Py_None && (!PyType_Check(view_type) || !PyType_Check(evidence_type)))) {
        PyErr_SetString(PyExc_TypeError, "revalidate_fragments: view_type and evidence_type must be two types or None");
        return NULL;
    }
    cfg.module = module;
    cfg.proved = NULL;
    cfg.view_type = view_type == Py_None ? NULL : view_type;
    cfg.evidence_type = evidence_type == Py_None ? NULL : evidence_type;
    if (!PyCallable_Check(cfg.view_of)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_fragments: view_of must be callable");
        return NULL;
    }
    /* the plan identity (resource_id, revision, weight_generation): exact values, else the
     * rules decide (rf_identity compares it with every attested placement's) */
    if (PyTuple_Size(cfg.identity) != 3 || !PyUnicode_CheckExact(PyTuple_GetItem(cfg.identity, 0))
        || !PyUnicode_CheckExact(PyTuple_GetItem(cfg.identity, 1)) || !PyLong_CheckExact(PyTuple_GetItem(cfg.identity, 2))) {
        Py_RETURN_NONE;
    }
    cfg.placement_type = (PyTypeObject *)types[0];
    cfg.binding_type = (PyTypeObject *)types[1];
    cfg.attestation_type = (PyTypeObject *)types[2];
    cfg.manifest_type = (PyTypeObject *)types[3];
    cfg.rank_type = (PyTypeObject *)types[4];
    /* A private copy: the values' own methods (equality, the view callable) cannot resize it. */
    PyObject *items = PySequence_List(fragments);
    if (items == NULL) return NULL;
    Py_ssize_t n = PyList_Size(items);
    PyObject *keys = want_keys ? PyList_New(0) : Py_NewRef(Py_None), *routes = PyList_New(0);
    PyObject *runtime_ids = PyList_New(0);
    PyObject *attested = PyDict_New(), *entry_list = PyList_New(0), *held = PyList_New(0);
    rv_table entries = {NULL, NULL, 0};
    rf_memo memo = {{NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0}, NULL, 0, NULL, 0, 0};
    rf_proved proved = {{NULL}, 0, {NULL}, 0, {NULL, NULL}, 0, PyList_New(0), 0};
    cfg.proved = &proved;
    PyObject *result = NULL;
    if (n < 0 || keys == NULL || routes == NULL || runtime_ids == NULL || attested == NULL || entry_list == NULL
        || held == NULL || proved.read_placements == NULL || (size_t)n > SIZE_MAX / 4 || rv_table_init(&entries, 16) < 0
        || rf_memo_init(&memo.rank, (size_t)n) < 0 || rf_memo_init(&memo.key, (size_t)n) < 0
        || rf_memo_init(&memo.route, (size_t)n) < 0 || rf_memo_init(&memo.rank_object, (size_t)n) < 0) {
        if (n >= 0 && (size_t)n > SIZE_MAX / 4 && !PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    if (n >= RF_MEMO_MIN_FRAGMENTS) { /* at most one entry per fragment */
        memo.bases = PyMem_Calloc((size_t)n, sizeof(PyObject *));
        if (memo.bases == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        memo.n_bases = n;
    }
    int entered_all = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fragment = PyList_GetItem(items, i); /* borrowed; ``items`` holds it */
        if (fragment == NULL) goto done;
        if (n >= RF_MEMO_MIN_FRAGMENTS) {
            /* (``items`` is a list: its current size bounds the reads, no error is set) */
            const Py_ssize_t size = PyList_Size(items);
            if (i + RF_STAGE_FRAGMENT < size) rf_stage_hint(PyList_GetItem(items, i + RF_STAGE_FRAGMENT), 0);
            if (i + RF_STAGE_PARTS < size) rf_stage_hint(PyList_GetItem(items, i + RF_STAGE_PARTS), 1);
            if (i + RF_STAGE_PFID < size && cfg.attested_by_call) {
                rf_stage_hint(PyList_GetItem(items, i + RF_STAGE_PFID), 3); /* (no dict is probed) */
            }
            else if (i + RF_STAGE_PFID < size) {
                rf_stage_hint(PyList_GetItem(items, i + RF_STAGE_PFID), 2);
                rf_table_hint(&memo, &entries, PyList_GetItem(items, i + RF_STAGE_PFID));
            }
        }
        /* view calls only before any entry exists, then all at once (rf_enter_all) */
        int rc = rf_fragment(fragment, &cfg, &entries, entry_list, attested, held, keys, routes, runtime_ids, &memo,
                             !entered_all && PyList_Size(entry_list) == 0);
        if (rc == RF_CALLOUT && !entered_all) {
            entered_all = 1;
            rc = rf_enter_all(items, i, n, &cfg, &entries, entry_list, attested, held);
            rf_sides_reset(&memo); /* (view calls ran: a table built before may be stale) */
            /* (view calls ran after every entry's check: each dict is checked again,
             * rf_side_plain, its hits counted from its cursor now) */
            memo.recheck_below = PyList_Size(entry_list);
            for (Py_ssize_t k = 0; k < 2 * memo.n_sides; k++) {
                memo.sides[k].hits_from = memo.sides[k].cursor;
                memo.sides[k].checked = 0;
            }
            if (rc == RV_OK)
                rc = rf_fragment(fragment, &cfg, &entries, entry_list, attested, held, keys, routes, runtime_ids,
                                 &memo, 0);
        }
        if (rc == RF_CALLOUT) rc = RV_DECLINE; /* a view call needed after rf_enter_all */
        if (rc == RV_ERROR) goto done;
        if (rc == RV_DECLINE) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    /* every dict rf_enter_all's view calls left unchecked and no probe checked: plain, else the
     * rules decide (rf_side_plain); none with attested_by_call (no dict was probed, and the
     * caller probes none after the pass) */
    for (Py_ssize_t k = 0; !cfg.attested_by_call && k < memo.recheck_below; k++) {
        PyObject *entry = PyList_GetItem(entry_list, k); /* an exact 3-tuple of this call's */
        if (entry == NULL) goto done;
        for (int side = 0; side < 2; side++) {
            struct rf_side fresh = {0, 0, {0}, 0, 0}; /* (no side made: counted from the start) */
            struct rf_side *at = k < memo.n_sides ? &memo.sides[2 * k + side] : &fresh;
            if (!rf_side_plain(&memo, k, at, PyTuple_GetItem(entry, side))) {
                result = Py_NewRef(Py_None);
                goto done;
            }
        }
    }
    {
        const int rc = rf_identities(held, &cfg);
        if (rc == RV_ERROR) goto done;
        if (rc == RV_DECLINE) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    result = PyTuple_Pack(4, keys, routes, runtime_ids, attested);
done:
    rf_memo_free(&memo.rank);
    rf_memo_free(&memo.key);
    rf_memo_free(&memo.route);
    rf_memo_free(&memo.rank_object);
    rf_proved_reset(&proved);
    Py_XDECREF(proved.read_placements);
    if (memo.bases != NULL) {
        for (Py_ssize_t k = 0; k < memo.n_bases; k++) Py_XDECREF(memo.bases[k]);
        PyMem_Free(memo.bases);
    }
    if (memo.sides != NULL) rf_sides_reset(&memo);
    PyMem_Free(memo.sides);
    rv_table_free(&entries);
    Py_XDECREF(items);
    Py_XDECREF(keys);
    Py_XDECREF(routes);
    Py_XDECREF(runtime_ids);
    Py_XDECREF(attested);
    Py_XDECREF(entry_list);
    Py_XDECREF(held);
    return result;
}

/* --- revalidate_side -------------------------------------------------------------------- */

enum {
    RS_LEASE,
    RS_ATTESTATION,
    RS_PLACEMENT,
    RS_WORKER,
    RS_KEY_BASE,
    RS_PART_RANK,
    RS_SNAPSHOTS,
    RS_FRAGMENT_IDS,
    RS_OBJECTS,
    RS_IDS,
    RS_FRAGMENT_ID,
    RS_OBJECT_BY_PFID,
    RS_EXPECTED,
    RS_GENERATION,
    RS_LEASE_GENERATION,
    RS_PFID,
    RS_DP,
    RS_TP,
    RS_PP,
    RS_EP,
    RS_ROWS,
    RS_OBJECTS_BY_PFID_CACHE,
    RS_ROWS_CACHE,
    RS_ROWS_METHOD,
    RS_ATTESTED_PFIDS,
    RS_MRO,
    RS_DICT,
        RS_NNAMES
};

static const char *const rs_names[RS_NNAMES] = {
    "runtime_lease_id", "attestation", "placement", "worker_id", "key_base", "part_rank", "fragment_snapshots",
    "fragment_ids", "objects_by_worker", "ids_by_worker", "fragment_id", "object_by_pfid", "expected_by_pfid",
    "generation", "lease_generation", "placement_fragment_id", "dp", "tp", "pp", "ep", "rows_by_worker",
    "_objects_by_pfid", "_rows", "rows", "attested_pfids", "__mro__", "__dict__",
};

static PyObject *rs_keys[RS_NNAMES];

/* The RuntimeFragmentSnapshot field names in field order (an exact tuple of interned str, made
 * at init): a snapshot class stored in a C-owned layout (layout.h) of exactly these fields has
 * its fields read directly. */
#define RS_NSNAP 16
static const char *const rs_snap_names[RS_NSNAP] = {
    "placement_fragment_id", "fragment_id", "tensor_id", "global_offset", "local_shape", "address",
    "nbytes", "worker_id", "endpoint", "device", "itemsize", "strides_bytes", "storage_address",
    "storage_nbytes", "storage_offset_bytes", "lease_generation",
};
static PyObject *rs_snap_keys;
static PyObject *rs_snap_items[RS_NSNAP]; /* its items (borrowed: the tuple is kept for the process) */

/* The stored type of each snapshot field, in field order (bound_contracts._SNAPSHOT_TYPES):
 * an exact str, an exact int, or an exact tuple of exact ints. */
enum { RS_KIND_STR, RS_KIND_INT, RS_KIND_INTS };
static const unsigned char rs_snap_kinds[RS_NSNAP] = {
    RS_KIND_STR, RS_KIND_STR, RS_KIND_STR, RS_KIND_INTS, RS_KIND_INTS, RS_KIND_INT,
    RS_KIND_INT, RS_KIND_STR, RS_KIND_STR, RS_KIND_STR, RS_KIND_INT, RS_KIND_INTS,
    RS_KIND_INT, RS_KIND_INT, RS_KIND_INT, RS_KIND_INT,
};

/* 1 when ``value`` has exactly the stored type of a field of ``kind`` (``typed_value``: no
 * subclass, no bool, no float, a tuple's items exact ints), else 0. Runs no Python code. */
static inline int
rs_typed(PyObject *value, unsigned char kind)
{
    if (value == NULL) return 0;
    if (kind == RS_KIND_STR) return PyUnicode_CheckExact(value);
    if (kind == RS_KIND_INT) return PyLong_CheckExact(value);
    int typed = PyTuple_CheckExact(value);
    const Py_ssize_t n = typed ? PyTuple_Size(value) : 0;
    for (Py_ssize_t i = 0; typed && i < n; i++) {
        PyObject *item = PyTuple_GetItem(value, i); /* in range: never NULL */
        typed = item != NULL && PyLong_CheckExact(item);
    }
    if (n < 0) PyErr_Clear(); /* (an exact tuple has a size) */
    return typed && n >= 0;
}

/* 1 when every field of ``snapshot`` (exactly the class lc accepted, every field set) has its
 * exact stored type, 0 when not or unsure (another class, an emptied field). Runs no Python
 * code. The rules (``_require_typed_executor``) reject an executor holding a snapshot with a
 * field of another type before any comparison, so a fast path may accept a snapshot only when
 * this holds: equality alone would accept ``float(address)``, ``True`` for 1, subclasses. */
static int
rs_layout_typed(PyObject *snapshot, const mr_layout_class *lc)
{
    if (lc->cls == NULL || lc->n != RS_NSNAP) return 0;
    PyObject *const *fields = mr_layout_fields_set(snapshot, lc);
    if (fields == NULL) return 0;
    for (Py_ssize_t k = 0; k < RS_NSNAP; k++) {
        if (!rs_typed(fields[k], rs_snap_kinds[k])) return 0;
    }
    return 1;
}

/* ``rs_layout_typed`` for a snapshot read through its instance dict (a class lc did not
 * accept): 1 typed, 0 not or unsure (no dict, a field missing, extra keys), -1 with an error. */
static int
rs_dict_typed(PyObject *state)
{
    if (!PyDict_CheckExact(state) || PyDict_Size(state) != RS_NSNAP) return 0;
    for (Py_ssize_t k = 0; k < RS_NSNAP; k++) {
        PyObject *value = PyDict_GetItemWithError(state, PyTuple_GetItem(rs_snap_keys, k));
        if (value == NULL) return PyErr_Occurred() ? -1 : 0;
        if (!rs_typed(value, rs_snap_kinds[k])) return 0;
    }
    return 1;
}

/* ``rs_layout_typed`` / ``rs_dict_typed`` of any snapshot: 1, 0 (unsure), -1 with an error. */
static int
rs_snapshot_typed(PyObject *snapshot, const mr_layout_class *lc)
{
    if (lc->cls != NULL) return rs_layout_typed(snapshot, lc);
    PyObject *state = pd_instance_dict(snapshot);
    if (state == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    int typed = rs_dict_typed(state);
    Py_DECREF(state);
    return typed;
}

/* Python's ``bool(a <op> b)``: 1, 0, or -1 with an error set. */
static int
rs_compare(PyObject *a, PyObject *b, int op)
{
    PyObject *result = PyObject_RichCompare(a, b, op);
    if (result == NULL) return -1;
    int truth = PyObject_IsTrue(result);
    Py_DECREF(result);
    return truth;
}

/* Identity set of pointers (borrowed; their owners outlive the call). */
static int
rs_set_has(const rv_table *t, PyObject *object)
{
    size_t slot = mr_ptr_slot(object, t->mask);
    while (t->keys[slot] != NULL) {
        if (t->keys[slot] == object) return 1;
        slot = (slot + 1) & t->mask;
    }
    return 0;
}

/* Distinct attestation placements revalidate_side tracks in its ``active`` set. */
#define RS_ACTIVE_ROOM 8

static void
rs_set_add(rv_table *t, PyObject *object)
{
    size_t slot = mr_ptr_slot(object, t->mask);
    while (t->keys[slot] != NULL) {
        if (t->keys[slot] == object) return;
        slot = (slot + 1) & t->mask;
    }
    t->keys[slot] = object; /* (a set: its values, if any, are never read) */
}

/* ``_rank_key(rank)``: (dp, tp, pp, ep) of an exact ParallelRank, else the rank itself. */
static PyObject *
rs_rank_key(PyObject *rank, PyTypeObject *rank_type)
{
    if (Py_TYPE(rank) != rank_type) return Py_NewRef(rank);
    PyObject *values[4] = {NULL, NULL, NULL, NULL};
    PyObject *result = NULL;
    /* one check of its dict for the four reads (plain fields: no Python code runs between) */
    int safe = pd_getattr_safe(rank);
    if (safe <= 0) {
        if (safe == 0) pd_refuse();
        return NULL;
    }
    for (int k = 0; k < 4; k++) {
        values[k] = PyObject_GetAttr(rank, rs_keys[RS_DP + k]);
        if (values[k] == NULL) goto done;
    }
    result = PyTuple_Pack(4, values[0], values[1], values[2], values[3]);
done:
    for (int k = 0; k < 4; k++) Py_XDECREF(values[k]);
    return result;
}

/* An attribute; on failure the error stays set (the caller reports RV_ERROR). */
#define RS_GET(target, object, name)                                                                                   \
    do {                                                                                                               \
        (target) = pd_getattr((object), rs_keys[(name)]);                                                        \
        if ((target) == NULL) goto error;                                                                              \
    } while (0)

/* ``_snapshot_matches`` for a snapshot stored in the checked layout lc with every field set
 * and an exact-dict ``expected``: what comparing its instance dict with ``expected`` decides
 * (``dict == dict``: the sizes, then each field in field order, the value's own ``==`` after an
 * identity check), the dict being the fields in field order. 1 equal, 0 not, 2 unsure, -1
 * with an error set. */
static int
rs_layout_matches(PyObject *snapshot, PyObject *expected, const mr_layout_class *lc)
{
    Py_ssize_t size = PyDict_Size(expected);
    if (size < 0) return -1;
    if (size != lc->n) return 2; /* different sizes: not equal, and the sizes differ: unsure */
    /* The values of an ``expected`` that holds exactly the field names as its keys, in field
     * order (an attested field dict): taken in one walk (pd_ordered_values: the lookups' very
     * values), else each field's looked up below. */
    PyObject *taken[RS_NSNAP];
    int ordered = lc->n == RS_NSNAP && pd_ordered_values(expected, rs_snap_items, RS_NSNAP, taken);
    if (ordered) {
        /* As ``_typed_snapshot_matches``: every value of both exactly typed first (else unsure),
         * then the pairs compared. With all typed no comparison runs Python code, so the fields
         * read once here are the ones compared; an identical pair is equal (``==``'s identity
         * shortcut) and is not compared. */
        PyObject *const *fields = mr_layout_fields(snapshot, lc);
        if (fields == NULL) return 2;
        uint32_t differ = 0; /* bit k: the pair of field k is two objects */
        for (int k = 0; k < RS_NSNAP; k++) {
            PyObject *value = fields[k], *other = taken[k];
            if (!rs_typed(value, rs_snap_kinds[k])) return 2; /* (also an emptied field) */
            if (other != value) {
                if (!rs_typed(other, rs_snap_kinds[k])) return 2;
                differ |= (uint32_t)1 << k;
            }
        }
        for (int k = 0; differ != 0; k++, differ >>= 1) {
            if (!(differ & 1)) continue;
            int equal = PyObject_RichCompareBool(fields[k], taken[k], Py_EQ);
            if (equal <= 0) return equal;
        }
        return 1;
    }
    for (Py_ssize_t k = 0; k < lc->n; k++) {
        /* read again per field: a value's ``==`` may run code that forges the snapshot */
        PyObject *const *fields = mr_layout_fields(snapshot, lc);
        PyObject *value = fields == NULL ? NULL : fields[k];
        if (value == NULL) return 2; /* emptied meanwhile: Python decides */
        PyObject *other = PyDict_GetItemWithError(expected, PyTuple_GetItem(rs_snap_keys, k));
        if (other == NULL) return PyErr_Occurred() ? -1 : 0; /* a key missing, same sizes: not equal */
        /* Both exactly of the field's stored type, else unsure: the rules reject a snapshot
         * field of another type (equal or not) before comparing, and with both typed the
         * comparison below runs no Python code (nothing can forge the snapshot meanwhile). */
        if (!rs_typed(value, rs_snap_kinds[k]) || (other != value && !rs_typed(other, rs_snap_kinds[k]))) return 2;
        Py_INCREF(value);
        Py_INCREF(other);
        int equal = PyObject_RichCompareBool(value, other, Py_EQ);
        Py_DECREF(value);
        Py_DECREF(other);
        if (equal <= 0) return equal;
    }
    return 1;
}

/* ``_snapshot_matches(snapshot, expected)`` for an exact-dict ``expected``: 1 when the snapshot
 * is exactly ``snapshot_type`` with a field dict equal to ``expected``, 0 when not, 2 when
 * unsure (extra attributes beside the fields, an emptied field, no instance dict on a class
 * lc did not accept), -1 with an error set. lc: the per-call layout check of snapshot_type
 * (cls NULL: read the instance dict). */
static int
rs_snapshot_matches(PyObject *snapshot, PyObject *expected, PyTypeObject *snapshot_type, const mr_layout_class *lc)
{
    if (snapshot == NULL || expected == NULL) return -1;
    if (Py_TYPE(snapshot) != snapshot_type) return 0;
    if (!PyDict_CheckExact(expected)) return 2;
    if (lc->cls != NULL) {
        /* every field set: the dict would hold exactly the 16 fields in field order; an
         * emptied field (a missing key: sizes differ) is unsure, as below */
        if (mr_layout_fields_set(snapshot, lc) == NULL) return 2;
        return rs_layout_matches(snapshot, expected, lc);
    }
    PyObject *state = pd_instance_dict(snapshot);
    if (state == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear(); /* no instance dict (a layout class not accepted): Python decides */
        return 2;
    }
    /* Both dicts hold the 16 fields, each exactly of its stored type, else unsure (see
     * rs_layout_matches; the comparison then runs no Python code). */
    int typed = rs_dict_typed(state);
    if (typed == 1) typed = rs_dict_typed(expected);
    if (typed != 1) {
        Py_DECREF(state);
        return typed < 0 ? -1 : 2;
    }
    int equal = rs_compare(state, expected, Py_EQ);
    Py_ssize_t n_state = PyDict_Size(state);
    Py_DECREF(state);
    if (equal < 0) return -1;
    if (equal) return 1;
    return n_state == PyDict_Size(expected) ? 0 : 2;
}

/* ``snapshot_owner`` of the Python version (``_fast_side_consistent``) as one packed table:
 * exact str snapshot fragment id -> the snapshot stored under it, both held (strong references,
 * released by rs_owners_free). Open addressing on the str's own hash (exact str: hash and
 * equality are the str's, no Python code), at most three quarters full, 16 bytes per slot plus
 * one byte of metadata: 0 empty, else RS_META_FULL | six hash bits (probes compare the key only
 * when they match), RS_META_HIT once an operation's runtime id found the entry. Sized once for
 * the side's distinct fragments (``set(operation ids) == set(snapshot_owner)`` cannot hold with
 * more keys: an extra key declines). It replaces a dict, a list holding its pairs, an identity
 * index of the dict and an identity set of the snapshots found (86 to 155 bytes per fragment,
 * where this is 23 to 45: the target side's call held bind's traced peak). */
typedef struct {
    PyObject *fid;      /* exact str, held */
    PyObject *snapshot; /* held */
} rs_owner_slot;

typedef struct {
    rs_owner_slot *slots;
    unsigned char *meta;
    size_t mask;
    size_t count; /* keys stored */
    size_t room;  /* keys allowed */
    size_t hits;  /* keys found by an operation's runtime id */
} rs_owners;

#define RS_META_FULL 0x40
#define RS_META_HIT 0x80
#define RS_META_TAG 0x3f

static int
rs_owners_init(rs_owners *t, size_t room)
{
    size_t cap = 8;
    if (room > SIZE_MAX / 8) {
        PyErr_NoMemory();
        return -1;
    }
    while (cap < room + room / 3 + 1) cap *= 2; /* (room <= SIZE_MAX / 8: no overflow) */
    /* the slots are read only where the metadata marks them full: left uninitialised (a large
     * table's untouched pages stay unmapped) */
    t->slots = mr_alloc_array(cap, sizeof(rs_owner_slot));
    t->meta = t->slots == NULL ? NULL : mr_alloc_array(cap, 1);
    if (t->meta == NULL) {
        PyMem_Free(t->slots);
        t->slots = NULL;
        return -1;
    }
    memset(t->meta, 0, cap);
    t->mask = cap - 1;
    t->count = t->hits = 0;
    t->room = room;
    return 0;
}

static void
rs_owners_free(rs_owners *t)
{
    if (t->meta != NULL) {
        for (size_t k = 0; k <= t->mask; k++) {
            if (t->meta[k] == 0) continue;
            Py_DECREF(t->slots[k].fid);
            Py_DECREF(t->slots[k].snapshot);
        }
    }
    PyMem_Free(t->slots);
    PyMem_Free(t->meta);
    t->slots = NULL;
    t->meta = NULL;
}

/* The slot of the exact str ``fid`` (hash ``hash``): *found 1 and its slot, or *found 0 and the
 * empty slot where it belongs. -1 with an error set (none expected: both are exact str). */
static Py_ssize_t
rs_owners_find(const rs_owners *t, PyObject *fid, Py_hash_t hash, int *found)
{
    size_t h = (size_t)hash;
    unsigned char tag = (unsigned char)(RS_META_FULL | ((h >> (sizeof(size_t) * 8 - 6)) & RS_META_TAG));
    size_t slot = h & t->mask;
    for (;;) {
        unsigned char m = t->meta[slot];
        if (m == 0) {
            *found = 0;
            return (Py_ssize_t)slot;
        }
        if ((m & (RS_META_FULL | RS_META_TAG)) == tag) {
            PyObject *key = t->slots[slot].fid;
            if (key == fid) {
                *found = 1;
                return (Py_ssize_t)slot;
            }
            int order = PyUnicode_Compare(key, fid);
            if (order == -1 && PyErr_Occurred()) return -1;
            if (order == 0) {
                *found = 1;
                return (Py_ssize_t)slot;
            }
        }
        slot = (slot + 1) & t->mask;
    }
}

/* ``fid in snapshot_owner`` (0: the caller declines) else store fid -> snapshot (1; also 0 when
 * the table is at its room or fid is not an exact str: unsure). -1 with an error set. */
static int
rs_owners_add(rs_owners *t, PyObject *fid, PyObject *snapshot)
{
    if (!PyUnicode_CheckExact(fid) || t->count >= t->room) return 0;
    Py_hash_t hash = PyObject_Hash(fid);
    if (hash == -1) return -1;
    int found;
    Py_ssize_t slot = rs_owners_find(t, fid, hash, &found);
    if (slot < 0) return -1;
    if (found) return 0;
    size_t h = (size_t)hash;
    t->meta[slot] = (unsigned char)(RS_META_FULL | ((h >> (sizeof(size_t) * 8 - 6)) & RS_META_TAG));
    t->slots[slot].fid = Py_NewRef(fid);
    t->slots[slot].snapshot = Py_NewRef(snapshot);
    t->count++;
    return 1;
}

/* ``snapshot_owner.get(runtime_id)`` (borrowed; the table holds it), the entry marked found;
 * NULL with no error set when absent or runtime_id is not an exact str (unsure: declines). */
static PyObject *
rs_owners_take(rs_owners *t, PyObject *runtime_id)
{
    if (!PyUnicode_CheckExact(runtime_id)) return NULL;
    Py_hash_t hash = PyObject_Hash(runtime_id);
    if (hash == -1) return NULL;
    int found;
    Py_ssize_t slot = rs_owners_find(t, runtime_id, hash, &found);
    if (slot < 0 || !found) return NULL;
    if (!(t->meta[slot] & RS_META_HIT)) {
        t->meta[slot] |= RS_META_HIT;
        t->hits++;
    }
    return t->slots[slot].snapshot;
}

static void
rs_owners_prefetch(const rs_owners *t, PyObject *runtime_id)
{
    /* the str's cached hash (-1 until computed: then nothing is prefetched) */
    if (!PyUnicode_CheckExact(runtime_id)) return;
    Py_hash_t hash = PyObject_Hash(runtime_id);
    if (hash == -1) {
        PyErr_Clear();
        return;
    }
    size_t slot = (size_t)hash & t->mask;
    __builtin_prefetch(&t->meta[slot]);
    __builtin_prefetch(&t->slots[slot]);
}

/* The hashes of one view's compact ``attested_pfids`` (see rs_sorted_member): ``hashes`` in the
 * tuple's order, and when they are ascending and numerous a directory over their top bits
 * (``dir[b]``: the number of hashes whose top ``bits`` bits, sign flipped, are below b; b up to
 * 2**bits), which narrows each search to the few hashes sharing the key's top bits (the hashes
 * of str are uniform: a handful per bucket) instead of a binary search over all of them (one
 * cache miss per halving at 10^5 ids). Owned arrays; hashes NULL until read. */
struct rs_pfid_index {
    Py_hash_t *hashes;
    Py_ssize_t *dir; /* NULL: no directory (few hashes, or not ascending) */
    unsigned bits;
};

/* The per-call tables of ``revalidate_side``. Pointers in the identity tables are compared,
 * never dereferenced, except the entries, which ``attested`` (the caller's private dict,
 * unreachable from the values' own methods) holds. */
typedef struct {
    PyObject *attested;      /* {id(attestation): (placement_dict, binding_dict, view)} */
    rv_table entry_of;       /* attestation pointer -> index into entries */
    PyObject **entries;      /* borrowed from ``attested`` */
    rv_table proven;         /* snapshot pointer -> index into ``held`` (the attested state it equals) */
    Py_ssize_t proven_room;  /* insertions left (keeps the table at most half full) */
    PyObject *held;          /* list: the attested states proven equal, held for the call */
    PyTypeObject *attestation_type, *rank_type, *snapshot_type;
    mr_layout_class snapshot_layout; /* snapshot_type's layout check (cls NULL: instance dicts) */
    PyTypeObject *placement_type; /* PlacementFragment, or NULL (ids read as attributes) */
    /* Per entry, the view's attributes the per-fragment check reads, read once per call (owned;
     * NULL until read): RS_VIEW_NFIELDS slots per entry. The views are mutable objects a hook
     * can reach (the caller's frame), so the tables probed by key are checked plain before
     * their probes (rs_view_plain). */
    PyObject **view_fields;
    /* Per view field, the ``code_epoch`` at which it was last found plain (0: never); the epoch
     * grows at every point of the per-fragment check where Python code may run. */
    uint64_t *view_plain;
    uint64_t code_epoch;
    /* The view class last found inert (rs_view_inert) and the ``code_epoch`` it was found at:
     * its slot reads and writes of the view fields run no Python code. */
    PyTypeObject *inert_view_type;
    uint64_t inert_view_epoch;
    Py_ssize_t n_entries;
    rs_owners owned; /* ``snapshot_owner`` (see rs_owners) */
    /* Per entry, the hashes of its view's compact ``attested_pfids`` (a tuple in ai_hash_sorted's
     * form, held by ``view_fields``) in one array, read from the tuple's items on first use
     * (owned; NULL until read): the search reads them in place of the scattered str objects. */
    struct rs_pfid_index *pfid_index;
} rs_ctx;

enum { RS_VIEW_BY_PFID, RS_VIEW_ATTESTED_PFIDS, RS_VIEW_GENERATION, RS_VIEW_EXPECTED, RS_VIEW_NFIELDS };

/* Identity lookup (see rv_table); -1 when absent. */
static Py_ssize_t
rs_lookup(const rv_table *t, const void *object)
{
    size_t slot = mr_ptr_slot(object, t->mask);
    while (t->keys[slot] != NULL) {
        if ((const void *)t->keys[slot] == object) return t->values[slot];
        slot = (slot + 1) & t->mask;
    }
    return -1;
}

/* Insert or overwrite (the table has room: the caller bounds the number of keys). */
static void
rs_store(rv_table *t, PyObject *object, Py_ssize_t value)
{
    size_t slot = mr_ptr_slot(object, t->mask);
    while (t->keys[slot] != NULL && t->keys[slot] != object) slot = (slot + 1) & t->mask;
    t->keys[slot] = object;
    t->values[slot] = value;
}

/* Room for n_items in t (at most half full, as rv_table_init sizes it): the entries are moved
 * into a table sized for twice as many when t is too small. 0, or -1 with MemoryError (t is
 * unchanged). For tables whose final size is usually far below their bound (revalidate_coverage's
 * attestations: one per participant, bounded by the operations). */
static int
rv_table_reserve(rv_table *t, size_t n_items)
{
    if (n_items > SIZE_MAX / 8) {
        PyErr_NoMemory();
        return -1;
    }
    if (t->keys != NULL && n_items * 2 + 1 <= t->mask + 1) return 0;
    rv_table bigger;
    if (rv_table_init(&bigger, n_items * 2) < 0) return -1;
    if (t->keys != NULL) {
        for (size_t k = 0; k <= t->mask; k++) {
            if (t->keys[k] != NULL) rs_store(&bigger, t->keys[k], t->values[k]);
        }
    }
    rv_table_free(t);
    *t = bigger;
    return 0;
}

/* The entry ``attested[id(attestation)]`` (borrowed), NULL when absent. */
static PyObject *
rs_entry(const rs_ctx *ctx, PyObject *attestation)
{
    Py_ssize_t index = rs_lookup(&ctx->entry_of, attestation);
    return index < 0 ? NULL : ctx->entries[index];
}

/* Index the ``attested`` dict by attestation pointer; RV_OK, RV_DECLINE (odd keys or entries)
 * or RV_ERROR. */
static int
rs_ctx_init(rs_ctx *ctx, Py_ssize_t n_frags)
{
    Py_ssize_t n = PyDict_Size(ctx->attested);
    if (n < 0) return RV_ERROR;
    ctx->entries = mr_alloc_array((size_t)n + 1, sizeof(PyObject *));
    if (ctx->entries == NULL) return RV_ERROR;
    /* The entries are held (released by rs_ctx_free): Python code the pass runs (a view method,
     * another class's attribute) can replace the ``attested`` dict's values, which would free a
     * borrowed entry the pass reads again for the view's next fragment (AUDIT8). */
    memset(ctx->entries, 0, ((size_t)n + 1) * sizeof(PyObject *));
    if (rv_table_init(&ctx->entry_of, (size_t)n) < 0) return RV_ERROR;
    if ((size_t)n + 1 > SIZE_MAX / RS_VIEW_NFIELDS) {
        PyErr_NoMemory();
        return RV_ERROR;
    }
    ctx->view_fields = mr_alloc_array(((size_t)n + 1) * RS_VIEW_NFIELDS, sizeof(PyObject *));
    if (ctx->view_fields == NULL) return RV_ERROR;
    memset(ctx->view_fields, 0, ((size_t)n + 1) * RS_VIEW_NFIELDS * sizeof(PyObject *));
    ctx->view_plain = mr_alloc_array(((size_t)n + 1) * RS_VIEW_NFIELDS, sizeof(uint64_t));
    if (ctx->view_plain == NULL) return RV_ERROR;
    memset(ctx->view_plain, 0, ((size_t)n + 1) * RS_VIEW_NFIELDS * sizeof(uint64_t));
    ctx->code_epoch = 1;
    ctx->pfid_index = mr_alloc_array((size_t)n + 1, sizeof(struct rs_pfid_index));
    if (ctx->pfid_index == NULL) return RV_ERROR;
    memset(ctx->pfid_index, 0, ((size_t)n + 1) * sizeof(struct rs_pfid_index));
    ctx->n_entries = n;
    if ((size_t)n_frags > SIZE_MAX / 4) {
        PyErr_NoMemory();
        return RV_ERROR;
    }
    /* ``proven`` is allocated by the first rs_prove (a bound plan's executors carry the attested
     * snapshot objects themselves: nothing is proven, and the table would only add to bind's
     * peak); until then every lookup misses. */
    ctx->proven_room = n_frags;
    ctx->held = PyList_New(0);
    if (ctx->held == NULL) return RV_ERROR;
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *entry;
    while (PyDict_Next(ctx->attested, &pos, &key, &entry)) {
        if (i >= n || !PyLong_CheckExact(key) || !PyTuple_CheckExact(entry) || PyTuple_Size(entry) != 3) {
            return RV_DECLINE;
        }
        void *pointer = PyLong_AsVoidPtr(key);
        if (pointer == NULL) {
            if (PyErr_Occurred()) PyErr_Clear();
            return RV_DECLINE;
        }
        if (rs_lookup(&ctx->entry_of, pointer) >= 0) return RV_DECLINE;
        ctx->entries[i] = Py_NewRef(entry);
        rs_store(&ctx->entry_of, (PyObject *)pointer, i);
        i++;
    }
    return RV_OK;
}

static void
rs_ctx_free(rs_ctx *ctx)
{
    rv_table_free(&ctx->entry_of);
    rv_table_free(&ctx->proven);
    if (ctx->entries != NULL) {
        for (Py_ssize_t k = 0; k < ctx->n_entries; k++) Py_XDECREF(ctx->entries[k]);
        PyMem_Free(ctx->entries);
    }
    if (ctx->view_fields != NULL) {
        for (Py_ssize_t k = 0; k < ctx->n_entries * RS_VIEW_NFIELDS; k++) Py_XDECREF(ctx->view_fields[k]);
        PyMem_Free(ctx->view_fields);
    }
    PyMem_Free(ctx->view_plain);
    if (ctx->pfid_index != NULL) {
        for (Py_ssize_t k = 0; k < ctx->n_entries; k++) {
            PyMem_Free(ctx->pfid_index[k].hashes);
            PyMem_Free(ctx->pfid_index[k].dir);
        }
        PyMem_Free(ctx->pfid_index);
    }
    Py_XDECREF(ctx->held);
    rs_owners_free(&ctx->owned);
}

/* Remember that ``snapshot`` was proven equal to the attested ``state`` (held for the call). */
static int
rs_prove(rs_ctx *ctx, PyObject *snapshot, PyObject *state)
{
    if (ctx->proven_room <= 0) return 0; /* full: later checks compare again */
    if (ctx->proven.keys == NULL && rv_table_init(&ctx->proven, (size_t)ctx->proven_room) < 0) return -1;
    Py_ssize_t index = PyList_Size(ctx->held);
    if (index < 0 || PyList_Append(ctx->held, state) < 0) return -1;
    rs_store(&ctx->proven, snapshot, index);
    ctx->proven_room--;
    return 0;
}

/* ``key != view.key_base + (worker, _rank_key(part_rank))`` without building the right side:
 * the tuple comparison item by item (``==`` with the identity shortcut, in order). 1, 0, -1. */
static int
rs_key_differs(PyObject *key, PyObject *key_base, PyObject *worker, PyObject *part_rank, PyTypeObject *rank_type)
{
    Py_ssize_t n = PyTuple_Size(key_base);
    if (n < 0) return -1;
    if (PyTuple_Size(key) != n + 2) return 1; /* different lengths: unequal */
    for (Py_ssize_t k = 0; k < n; k++) {
        int equal = PyObject_RichCompareBool(PyTuple_GetItem(key, k), PyTuple_GetItem(key_base, k), Py_EQ);
        if (equal <= 0) return equal < 0 ? -1 : 1;
    }
    int equal = PyObject_RichCompareBool(PyTuple_GetItem(key, n), worker, Py_EQ);
    if (equal <= 0) return equal < 0 ? -1 : 1;
    PyObject *key_rank = PyTuple_GetItem(key, n + 1);
    if (key_rank == NULL) return -1;
    if (Py_TYPE(part_rank) == rank_type && PyTuple_CheckExact(key_rank)) {
        /* ``key_rank == (dp, tp, pp, ep)`` without building the tuple: the rank's values read
         * as rs_rank_key reads them, then what the exact tuple's ``==`` does with a fresh tuple
         * (never the same object): the items compared in order up to the shorter length (``==``
         * with the identity shortcut), stopping at the first unequal one; equal when all are and
         * the lengths match. */
        Py_INCREF(key_rank); /* held across the comparisons (they may run Python code) */
        PyObject *values[4] = {NULL, NULL, NULL, NULL};
        int differs = -1;
        int safe = pd_getattr_safe(part_rank);
        if (safe == 0) pd_refuse();
        for (int k = 0; k < 4 && safe > 0; k++) {
            values[k] = PyObject_GetAttr(part_rank, rs_keys[RS_DP + k]);
            if (values[k] == NULL) safe = -1;
        }
        if (safe > 0) {
            Py_ssize_t m = PyTuple_Size(key_rank);
            differs = m != 4;
            for (Py_ssize_t k = 0; k < m && k < 4; k++) {
                equal = PyObject_RichCompareBool(PyTuple_GetItem(key_rank, k), values[k], Py_EQ);
                if (equal <= 0) {
                    differs = equal < 0 ? -1 : 1;
                    break;
                }
            }
        }
        for (int k = 0; k < 4; k++) Py_XDECREF(values[k]);
        Py_DECREF(key_rank);
        return differs;
    }
    PyObject *rank_key = rs_rank_key(part_rank, rank_type);
    if (rank_key == NULL) return -1;
    equal = PyObject_RichCompareBool(key_rank, rank_key, Py_EQ);
    Py_DECREF(rank_key);
    return equal < 0 ? -1 : !equal;
}

/* Item ``which`` (0: expected_by_pfid, 1: rows_by_worker) of ``view.rows()``: the view's
 * ``_rows`` pair when built, else built by the method (``*called`` set to 1: Python code ran).
 * New reference; NULL with no error set when the pair is not an exact 2-tuple of exact dicts
 * (decline), NULL with an error set on failure. */
static PyObject *
rs_view_rows(PyObject *view, int which, int *called)
{
    PyObject *rows = pd_getattr(view, rs_keys[RS_ROWS_CACHE]);
    if (rows == Py_None) {
        Py_DECREF(rows);
        *called = 1;
        rows = PyObject_CallMethodObjArgs(view, rs_keys[RS_ROWS_METHOD], NULL);
    }
    if (rows == NULL) return NULL;
    PyObject *item = NULL;
    if (PyTuple_CheckExact(rows) && PyTuple_Size(rows) == 2) {
        item = PyTuple_GetItem(rows, which);
        if (item != NULL && PyDict_CheckExact(item)) Py_INCREF(item);
        else item = NULL;
    }
    Py_DECREF(rows);
    return item;
}

/* ``key in container`` for an exact dict or set: 1, 0 (also for any other container: the
 * caller declines), -1 with an error set. */
static int
rs_member(PyObject *container, PyObject *key)
{
    if (PyDict_CheckExact(container)) return PyDict_Contains(container, key);
    if (PyAnySet_CheckExact(container)) return PySet_Contains(container, key);
    return 0;
}

/* ``key in texts`` for entry ``index``'s compact ``attested_pfids`` (an exact tuple in
 * ai_hash_sorted's form: distinct exact str in hash order): 1, 0 (also when ``key`` or an item is
 * not an exact str: unsure, the caller declines), -1 with an error set. Only an item equal to
 * ``key`` gives 1 (a tuple in any other order can only miss, which declines). No Python code
 * runs. */
/* Hashes from which rs_pfid_build adds a directory (below: one binary search in a few lines). */
#define RS_PFID_DIR_MIN 64
/* Items ahead whose str object the hash loop prefetches (the tuple is in hash order: its items
 * lie scattered in memory). */
#define RS_PFID_AHEAD 16

/* The directory bucket of ``hash``: its top ``bits`` bits with the sign flipped (so that the
 * buckets ascend with the signed hashes). bits is 1..63. */
static size_t
rs_pfid_bucket(Py_hash_t hash, unsigned bits)
{
    return (size_t)(((uint64_t)hash ^ (UINT64_C(1) << 63)) >> (64 - bits));
}

/* Fills ``x`` for ``texts`` (n items); 1, 0 when an item is not an exact str (unsure: the caller
 * declines), -1 with an error set. No Python code runs (exact str hashes). */
static int
rs_pfid_build(struct rs_pfid_index *x, PyObject *texts, Py_ssize_t n)
{
    Py_hash_t *hashes = mr_alloc_array((size_t)n + 1, sizeof(Py_hash_t));
    if (hashes == NULL) return -1;
    int ascending = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i + RS_PFID_AHEAD < n) {
            PyObject *ahead = PyTuple_GetItem(texts, i + RS_PFID_AHEAD);
            if (ahead != NULL) __builtin_prefetch(ahead);
        }
        PyObject *item = PyTuple_GetItem(texts, i);
        Py_hash_t h = item != NULL && PyUnicode_CheckExact(item) ? PyObject_Hash(item) : -1;
        if (h == -1) {
            PyMem_Free(hashes);
            return PyErr_Occurred() ? -1 : 0;
        }
        if (i > 0 && h < hashes[i - 1]) ascending = 0;
        hashes[i] = h;
    }
    x->hashes = hashes;
    x->dir = NULL;
    x->bits = 0;
    if (!ascending || n < RS_PFID_DIR_MIN) return 1;
    unsigned bits = 1;
    while (bits < 40 && ((Py_ssize_t)1 << (bits + 3)) < n) bits++; /* ~8 hashes per bucket */
    size_t buckets = (size_t)1 << bits;
    Py_ssize_t *dir = mr_alloc_array(buckets + 1, sizeof(Py_ssize_t));
    if (dir == NULL) return -1; /* (x->hashes is kept: rs_ctx_free frees it) */
    size_t b = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t k = rs_pfid_bucket(hashes[i], bits);
        while (b <= k) dir[b++] = i;
    }
    while (b <= buckets) dir[b++] = n;
    x->dir = dir;
    x->bits = bits;
    return 1;
}

/* ``key in texts`` for entry ``index``'s compact ``attested_pfids`` (an exact tuple in
 * ai_hash_sorted's form: distinct exact str in hash order): 1, 0 (also when ``key`` or an item is
 * not an exact str: unsure, the caller declines), -1 with an error set. Only an item equal to
 * ``key`` gives 1 (a tuple in any other order can only miss, which declines). No Python code
 * runs. */
static int
rs_sorted_member(rs_ctx *ctx, Py_ssize_t index, PyObject *texts, PyObject *key)
{
    if (!PyUnicode_CheckExact(key) || index < 0 || index >= ctx->n_entries) return 0;
    Py_ssize_t n = PyTuple_Size(texts);
    if (n < 0) return -1;
    struct rs_pfid_index *x = &ctx->pfid_index[index];
    if (x->hashes == NULL) {
        int built = rs_pfid_build(x, texts, n); /* the tuple (immutable) is held by ``view_fields`` */
        if (built <= 0) return built;
    }
    const Py_hash_t *hashes = x->hashes;
    Py_hash_t hash = PyObject_Hash(key);
    if (hash == -1) return -1;
    Py_ssize_t lo = 0, hi = n;
    if (x->dir != NULL) { /* the hashes ascend: the key's bucket bounds its place */
        size_t b = rs_pfid_bucket(hash, x->bits);
        lo = x->dir[b];
        hi = x->dir[b + 1];
    }
    while (lo < hi) { /* the first item whose hash is not below ``hash`` */
        Py_ssize_t mid = lo + (Py_ssize_t)((size_t)(hi - lo) >> 1);
        if (hashes[mid] < hash) lo = mid + 1;
        else hi = mid;
    }
    for (Py_ssize_t i = lo; i < n && hashes[i] == hash; i++) {
        int order = PyUnicode_Compare(PyTuple_GetItem(texts, i), key); /* exact str (checked above) */
        if (order == -1 && PyErr_Occurred()) return -1;
        if (order == 0) return 1;
    }
    return 0;
}

/* 1 when a and b are exact tuples of the same length holding the very same objects in order
 * (``a == b`` then holds without calling any ``==``: the identity shortcut of every item), else
 * 0. Runs no Python code. */
static int
rs_same_items(PyObject *a, PyObject *b)
{
    if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b)) return 0;
    if (a == b) return 1;
    Py_ssize_t n = PyTuple_Size(a);
    if (n < 0 || PyTuple_Size(b) != n) {
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (PyTuple_GetItem(a, k) != PyTuple_GetItem(b, k)) return 0;
    }
    return 1;
}

/* Look-ahead distances (in snapshots) of rs_own_snapshots' staged hints. */
#define RS_SNAP_OBJECT 8
#define RS_SNAP_FIELDS 4
#define RS_SNAP_ITEMS 2

/* Hints for snapshot k of ``snapshots`` (an exact tuple; nothing decided, no Python code, nothing
 * held): stage 0 its object, 1 its fields' values, 2 the items of its tuple fields and its
 * fragment id's snapshot_owner slot. Only a snapshot of the checked layout class is read. */
static void
rs_snapshot_hint(const rs_ctx *ctx, PyObject *snapshots, Py_ssize_t k, int stage)
{
    PyObject *snapshot = rv_hint_item(snapshots, k);
    if (snapshot == NULL) return;
    if (stage == 0) {
        rv_prefetch_lines(snapshot, 3);
        return;
    }
    PyObject *const *fields = mr_layout_fields(snapshot, &ctx->snapshot_layout);
    if (fields == NULL || ctx->snapshot_layout.n != RS_NSNAP) return;
    for (Py_ssize_t f = 0; f < RS_NSNAP; f++) {
        PyObject *value = fields[f];
        if (value == NULL) continue;
        if (stage == 1) {
            __builtin_prefetch(value);
        }
        else if (rs_snap_kinds[f] == RS_KIND_INTS && PyTuple_CheckExact(value)) {
            Py_ssize_t m = PyTuple_Size(value);
            for (Py_ssize_t i = 0; i < m; i++) __builtin_prefetch(PyTuple_GetItem(value, i));
        }
    }
    if (stage == 2 && fields[1] != NULL) rs_owners_prefetch(&ctx->owned, fields[1]);
}

/* rs_executor's checks of an executor whose snapshots are the attested objects themselves, in
 * one pass: each snapshot exactly typed (rs_snapshot_typed), then its ``fragment_id`` (read from
 * its slot when its class is the checked layout, else as an attribute) added to
 * ``snapshot_owner`` (rs_owners_add: a repeated id declines). RV_OK, RV_DECLINE or RV_ERROR. */
static int
rs_own_snapshots(rs_ctx *ctx, PyObject *snapshots)
{
    Py_ssize_t n = PyTuple_Size(snapshots);
    if (n < 0) return RV_ERROR;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k + RS_SNAP_OBJECT < n) rs_snapshot_hint(ctx, snapshots, k + RS_SNAP_OBJECT, 0);
        if (k + RS_SNAP_FIELDS < n) rs_snapshot_hint(ctx, snapshots, k + RS_SNAP_FIELDS, 1);
        if (k + RS_SNAP_ITEMS < n) rs_snapshot_hint(ctx, snapshots, k + RS_SNAP_ITEMS, 2);
        PyObject *snapshot = PyTuple_GetItem(snapshots, k);
        if (snapshot == NULL) return RV_ERROR;
        int typed = rs_snapshot_typed(snapshot, &ctx->snapshot_layout);
        if (typed < 0) return RV_ERROR;
        if (!typed) return RV_DECLINE;
        Py_INCREF(snapshot);
        PyObject *const *fields = mr_layout_fields(snapshot, &ctx->snapshot_layout);
        PyObject *fid = fields != NULL && fields[1] != NULL ? Py_NewRef(fields[1])
                                                            : pd_getattr(snapshot, rs_keys[RS_FRAGMENT_ID]);
        if (fid == NULL) {
            Py_DECREF(snapshot);
            return RV_ERROR;
        }
        int added = rs_owners_add(&ctx->owned, fid, snapshot);
        Py_DECREF(snapshot);
        Py_DECREF(fid);
        if (added < 0) return RV_ERROR;
        if (!added) return RV_DECLINE;
    }
    return RV_OK;
}

/* One executor row of one side; *status is RV_OK, RV_DECLINE (unsure) or RV_ERROR. */
static int
rs_executor(PyObject *row, rs_ctx *ctx, const rv_table *active, PyObject *used)
{
    PyObject *rows_by_worker = NULL;
    PyObject *lease = NULL, *attestation = NULL, *placement = NULL, *view = NULL, *worker = NULL;
    PyObject *key_base = NULL, *part_rank = NULL, *snapshots = NULL;
    PyObject *fragment_ids = NULL, *objects = NULL, *ids_by_worker = NULL, *fid = NULL;
    int rc = RV_DECLINE;
    if (!PyTuple_CheckExact(row) || PyTuple_Size(row) != 3) goto done;
    PyObject *estate = PyTuple_GetItem(row, 0), *key = PyTuple_GetItem(row, 1), *bucket = PyTuple_GetItem(row, 2);
    if (estate == NULL || key == NULL || bucket == NULL) goto error;
    if (!PyDict_CheckExact(estate) || !PyList_CheckExact(bucket) || !PyTuple_CheckExact(key)) goto done;
    /* (an executor's instance dict from revalidate_views: checked again, code may have run since)
     * Its fields, all read right after the check (taken in its walk: pd_plain_values), before
     * any comparison: the key's comparison below runs the view's values' ``==`` (Python code
     * for a value that is not exact), after which no probe of the dict may follow
     * (plain_dict.h's rule). */
    enum { X_LEASE, X_ATTESTATION, X_WORKER, X_SNAPSHOTS, X_FRAGMENT_IDS, X_N };
    static const int x_names[X_N] = {RS_LEASE, RS_ATTESTATION, RS_WORKER, RS_SNAPSHOTS, RS_FRAGMENT_IDS};
    PyObject *taken[X_N];
    if (!pd_plain_values(estate, rs_keys, x_names, X_N, taken)) goto done;
    PyObject *x[X_N];
    for (int k = 0; k < X_N; k++) x[k] = taken[k] != NULL ? Py_NewRef(taken[k]) : rv_item(estate, rs_keys[x_names[k]]);
    lease = x[X_LEASE];
    attestation = x[X_ATTESTATION];
    worker = x[X_WORKER];
    snapshots = x[X_SNAPSHOTS];
    fragment_ids = x[X_FRAGMENT_IDS];
    if (PyErr_Occurred()) goto error; /* (a lookup of a plain dict: none expected) */
    if (lease == NULL || lease == Py_None) goto done;
    if (attestation == NULL || Py_TYPE(attestation) != ctx->attestation_type) goto done;
    RS_GET(placement, attestation, RS_PLACEMENT);
    if (!rs_set_has(active, placement)) goto done;
    {
        PyObject *entry = rs_entry(ctx, attestation); /* borrowed */
        if (entry == NULL) goto done;                 /* not a fragment's: unsure */
        view = Py_NewRef(PyTuple_GetItem(entry, 2));
    }
    if (worker == NULL) goto done;
    RS_GET(key_base, view, RS_KEY_BASE);
    RS_GET(part_rank, view, RS_PART_RANK);
    if (!PyTuple_CheckExact(key_base)) goto done;
    int differs = rs_key_differs(key, key_base, worker, part_rank, ctx->rank_type);
    if (differs < 0) goto error;
    if (differs) goto done;
    if (snapshots == NULL || fragment_ids == NULL || !PyTuple_CheckExact(snapshots)) goto done;
    /* Exactly typed as read now (the other fields, the fragment ids' items and the rank's
     * values were checked when revalidate_views read them: rw_side): the comparisons below
     * use ``==``, which a str subclass equal to the attested value would pass. */
    if (!PyUnicode_CheckExact(lease) || !PyUnicode_CheckExact(worker) || !PyTuple_CheckExact(fragment_ids)) goto done;
    RS_GET(objects, view, RS_OBJECTS);
    RS_GET(ids_by_worker, view, RS_IDS);
    if ((objects != Py_None && !PyDict_CheckExact(objects)) || !PyDict_CheckExact(ids_by_worker)) goto done;
    {
        PyObject *ids = PyDict_GetItemWithError(ids_by_worker, worker); /* borrowed */
        if (ids == NULL) goto done;
        Py_INCREF(ids);
        int every = rs_compare(fragment_ids, ids, Py_EQ);
        Py_DECREF(ids);
        if (every < 0) goto error;
        if (!every) goto done; /* a subset of the worker's attested rows: left to Python */
        if (objects != Py_None) {
            /* The attested snapshot objects themselves (equal tuples, usually identical).
             * Snapshot equality is ``==`` of the fields: each of the executor's snapshots must
             * first be exactly typed (rs_layout_typed: what the rules check before comparing). */
            PyObject *mine = PyDict_GetItemWithError(objects, worker); /* borrowed */
            if (mine == NULL) goto done;
            if (rs_same_items(mine, snapshots)) {
                /* The attested tuple's very items (the common case): equal without running any
                 * code, so the typed check, the fragment id read and the snapshot_owner entry
                 * are done in one pass over the snapshots, with staged hints. */
                int rc2 = rs_own_snapshots(ctx, snapshots);
                if (rc2 == RV_ERROR) goto error;
                if (rc2 == RV_DECLINE) goto done;
                goto owned_all;
            }
            for (Py_ssize_t k = 0; k < PyTuple_Size(snapshots); k++) {
                int typed = rs_snapshot_typed(PyTuple_GetItem(snapshots, k), &ctx->snapshot_layout);
                if (typed < 0) goto error;
                if (!typed) goto done;
            }
            Py_INCREF(mine);
            int mismatch = rs_compare(mine, snapshots, Py_NE);
            Py_DECREF(mine);
            if (mismatch < 0) goto error;
            if (mismatch) goto done;
        }
        else {
            /* The attested field dicts of the worker's fragments, compared snapshot by snapshot;
             * each proven pair is remembered (``proven`` of the Python version). */
            int called = 0; /* (rs_executor runs before the probes: see rs_view_plain) */
            rows_by_worker = rs_view_rows(view, 1, &called);
            if (rows_by_worker == NULL) goto done;
            PyObject *rows = PyDict_GetItemWithError(rows_by_worker, worker); /* borrowed */
            if (rows == NULL && PyErr_Occurred()) goto error;
            Py_ssize_t n_rows = rows == NULL ? 0 : (PyTuple_CheckExact(rows) ? PyTuple_Size(rows) : -1);
            if (n_rows != PyTuple_Size(snapshots)) goto done;
            Py_XINCREF(rows);
            int bad = 0;
            for (Py_ssize_t k = 0; k < n_rows && bad == 0; k++) {
                PyObject *pair = PyTuple_GetItem(rows, k);
                if (pair == NULL) {
                    bad = -1;
                    break;
                }
                if (!PyTuple_CheckExact(pair) || PyTuple_Size(pair) != 2) {
                    bad = 1;
                    break;
                }
                PyObject *snapshot = PyTuple_GetItem(snapshots, k), *state = PyTuple_GetItem(pair, 1);
                int match = rs_snapshot_matches(snapshot, state, ctx->snapshot_type, &ctx->snapshot_layout);
                if (match < 0) bad = -1;
                else if (match != 1) bad = 1;
                else if (rs_prove(ctx, snapshot, state) < 0) bad = -1;
            }
            Py_XDECREF(rows);
            if (bad < 0) goto error;
            if (bad) goto done;
        }
    }
    for (Py_ssize_t k = 0; k < PyTuple_Size(snapshots); k++) {
        PyObject *snapshot = PyTuple_GetItem(snapshots, k);
        if (snapshot == NULL) goto error;
        Py_INCREF(snapshot);
        /* (read from its slot when its class is the checked layout, as rs_own_snapshots reads it) */
        PyObject *const *fields = mr_layout_fields(snapshot, &ctx->snapshot_layout);
        fid = fields != NULL && fields[1] != NULL ? Py_NewRef(fields[1]) : pd_getattr(snapshot, rs_keys[RS_FRAGMENT_ID]);
        if (fid == NULL) {
            Py_DECREF(snapshot);
            goto error;
        }
        /* ``fid in snapshot_owner`` (decline) else store */
        int added = rs_owners_add(&ctx->owned, fid, snapshot);
        Py_DECREF(snapshot);
        Py_CLEAR(fid);
        if (added < 0) goto error;
        if (!added) goto done;
    }
owned_all:
    if (PyList_Size(bucket) > 0) {
        PyObject *estate_id = PyLong_FromVoidPtr(estate);
        if (estate_id == NULL) goto error;
        int added = PySet_Add(used, estate_id);
        Py_DECREF(estate_id);
        if (added < 0) goto error;
    }
    rc = RV_OK;
    goto done;
error:
    rc = RV_ERROR;
done:
    if (rc == RV_DECLINE && PyErr_Occurred()) rc = RV_ERROR;
    Py_XDECREF(lease);
    Py_XDECREF(attestation);
    Py_XDECREF(placement);
    Py_XDECREF(view);
    Py_XDECREF(worker);
    Py_XDECREF(key_base);
    Py_XDECREF(part_rank);
    Py_XDECREF(snapshots);
    Py_XDECREF(fragment_ids);
    Py_XDECREF(objects);
    Py_XDECREF(ids_by_worker);
    Py_XDECREF(fid);
    Py_XDECREF(rows_by_worker);
    return rc;
}

/* Hints for rs_objects_by_pfid's loop (nothing decided, no Python code, nothing held; another
 * class is skipped): snapshot k + 8 of ``snapshots`` (an exact tuple), and the placement
 * fragment id of snapshot k + 4 (the str the table is filled with). */
static void
rs_pfid_hint(PyObject *snapshots, Py_ssize_t k, const mr_layout_class *lc)
{
    Py_ssize_t n = PyTuple_Size(snapshots);
    if (n < 0) {
        PyErr_Clear();
        return;
    }
    if (k + 8 < n) __builtin_prefetch(PyTuple_GetItem(snapshots, k + 8));
    if (k + 4 < n && lc->n == RS_NSNAP) {
        PyObject *const *fields = mr_layout_fields(PyTuple_GetItem(snapshots, k + 4), lc);
        if (fields != NULL && fields[0] != NULL) __builtin_prefetch(fields[0]);
    }
}

/* ``view.object_by_pfid()`` for a view whose ``_objects_by_pfid`` cache is None: built here when
 * its ``objects_by_worker`` is None or an exact dict of exact tuples (the method's loop: every
 * snapshot by its ``placement_fragment_id``, later ones replacing earlier ones) and stored in
 * the cache as the method does, else by the method. New reference, NULL with an error set;
 * Py_None (decline) when a snapshot's placement fragment id is not an exact str: it is checked
 * before it is hashed (a str subclass's ``__hash__`` / ``__eq__`` would run in the insertion; the
 * table would be declined by rs_view_plain anyway). ``*ran`` set to 1 when Python code may have
 * run (the method, an attribute read of a snapshot of another class); with ``*ran`` left 0 the
 * table holds exact str keys only and nothing has run since it was made. */
static PyObject *
rs_objects_by_pfid(PyObject *view, const mr_layout_class *lc, int *ran)
{
    PyObject *objects = pd_getattr(view, rs_keys[RS_OBJECTS]);
    if (objects == NULL) return NULL;
    int plain = objects == Py_None || PyDict_CheckExact(objects);
    if (plain && objects != Py_None) {
        Py_ssize_t pos = 0;
        PyObject *worker, *snapshots;
        while (plain && PyDict_Next(objects, &pos, &worker, &snapshots)) plain = PyTuple_CheckExact(snapshots);
    }
    if (!plain) {
        Py_DECREF(objects);
        *ran = 1;
        return PyObject_CallMethodObjArgs(view, rs_keys[RS_OBJECT_BY_PFID], NULL);
    }
    PyObject *table = PyDict_New();
    /* A private list of the snapshot tuples: the attribute reads below may run Python code. */
    PyObject *groups = table == NULL ? NULL : (objects == Py_None ? PyList_New(0) : PyDict_Values(objects));
    Py_DECREF(objects);
    int failed = groups == NULL, inexact = 0;
    for (Py_ssize_t g = 0; !failed && !inexact && g < PyList_Size(groups); g++) {
        PyObject *snapshots = PyList_GetItem(groups, g);
        for (Py_ssize_t k = 0; !failed && !inexact && k < PyTuple_Size(snapshots); k++) {
            if (lc != NULL) rs_pfid_hint(snapshots, k, lc);
            PyObject *snapshot = PyTuple_GetItem(snapshots, k);
            /* a snapshot of the checked layout class: its slot is what the attribute read
             * returns (no code runs); an empty slot or any other class: the attribute */
            PyObject *const *fields = snapshot == NULL || lc == NULL ? NULL : mr_layout_fields(snapshot, lc);
            PyObject *pfid = NULL;
            if (snapshot != NULL && fields != NULL && fields[0] != NULL) {
                pfid = Py_NewRef(fields[0]);
            }
            else if (snapshot != NULL) {
                *ran = 1;
                pfid = pd_getattr(snapshot, rs_keys[RS_PFID]);
            }
            inexact = pfid != NULL && !PyUnicode_CheckExact(pfid);
            failed = pfid == NULL || (!inexact && PyDict_SetItem(table, pfid, snapshot) < 0);
            Py_XDECREF(pfid);
        }
    }
    Py_XDECREF(groups);
    if (!failed && inexact) { /* (the cache stays None: the rules decide) */
        Py_DECREF(table);
        return Py_NewRef(Py_None);
    }
    if (!failed) failed = PyObject_SetAttr(view, rs_keys[RS_OBJECTS_BY_PFID_CACHE], table) < 0;
    if (failed) Py_CLEAR(table);
    return table;
}

/* 1 when every key of the class dict behind the mapping proxy ``proxy`` is an exact str, 0 when
 * not (or anything odd; no error is left set). Iterates the proxy (a type's dict: an exact dict,
 * whose iterator runs no Python code) instead of building a list of its keys. */
static int
rs_proxy_plain(PyObject *proxy)
{
    PyObject *iter = PyObject_GetIter(proxy);
    if (iter == NULL) {
        PyErr_Clear();
        return 0;
    }
    int plain = 1;
    PyObject *key;
    while (plain && (key = PyIter_Next(iter)) != NULL) {
        plain = PyUnicode_CheckExact(key);
        Py_DECREF(key);
    }
    Py_DECREF(iter);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        plain = 0;
    }
    return plain;
}

/* Whether each of the attributes ``names[0..n)`` of instances of ``type`` is read without
 * running Python code, found by one walk of the MRO for all the names, each class dict read
 * through its mapping proxy after checking that all its keys are exact str (a str subclass key
 * could run its ``__eq__`` in the lookup); a class whose keys are not, met while a name is
 * still unresolved, fails the names. ``want``:
 * - RS_ATTR_SLOT: each name is a ``__slots__`` slot: the first class of the MRO whose dict holds
 *   it holds a member descriptor there (a data descriptor: a generic read or write of the
 *   attribute is its C getter or setter, and never probes the instance dict);
 * - RS_ATTR_PLAIN: no class of the MRO holds a descriptor under the name (absent, or first held
 *   as a value whose type has no ``__get__``): a generic read returns the instance dict's value
 *   (pd_getattr checks that dict plain) and runs no code.
 * Every class of the MRO must be of metaclass exactly type (for ``type`` itself: checked by the
 * caller). 1 when every name qualifies, else 0 (also for anything odd or a failure: no error is
 * left set). Runs no Python code. */
static int
rs_class_attrs_known(PyObject *type, PyObject *const *names, int n_names, int want, PyObject **plain_object);

static int
rs_class_attrs(PyObject *type, PyObject *const *names, int n_names, int want)
{
    return rs_class_attrs_known(type, names, n_names, want, NULL);
}

/* The MRO tuples (strong references: an address is never reused while held) whose every class
 * was found plain by one walk of all its keys (rs_mro_plain): of metaclass exactly type, a heap
 * class's own dict an exact dict of exact str keys, any other class's behind its proxy exact str
 * keys. That holds while the tuple is held (REVAL40): a heap class's dict is never replaced and
 * attribute assignment stores an exact, interned str key whatever it was given (the argument of
 * layout.h's mr_plain_mros), a static or immutable class's dict cannot be changed from Python, and
 * a class holding other keys enters an MRO only with a new MRO tuple. rs_class_attrs_known then
 * skips its per-call key walks for the tuple's classes (they would all pass), not the probes. */
enum { RS_PLAIN_MROS = 64 };
static PyObject *rs_plain_mros[RS_PLAIN_MROS];

static inline int
rs_plain_mro_known(PyObject *mro)
{
    for (int k = 0; k < RS_PLAIN_MROS && rs_plain_mros[k] != NULL; k++) {
        if (rs_plain_mros[k] == mro) return 1;
    }
    return 0;
}

/* 1 (and mro remembered, room permitting) when every class of the exact tuple mro is plain (see
 * rs_plain_mros), else 0 (no error left set). Runs no Python code. */
static int
rs_mro_plain(PyObject *mro)
{
    const Py_ssize_t n = PyTuple_Size(mro);
    int plain = n >= 0;
    for (Py_ssize_t k = 0; k < n && plain; k++) {
        PyObject *cls = PyTuple_GetItem(mro, k); /* borrowed; in range */
        if (cls == NULL || Py_TYPE(cls) != &PyType_Type) {
            plain = 0;
            break;
        }
        if (PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE) {
            PyObject *dict = PyObject_GenericGetDict(cls, NULL);
            plain = dict != NULL && pd_plain_keys(dict);
            Py_XDECREF(dict);
        }
        else {
            PyObject *proxy = PyObject_GetAttr(cls, rs_keys[RS_DICT]);
            plain = proxy != NULL && rs_proxy_plain(proxy);
            Py_XDECREF(proxy);
        }
    }
    PyErr_Clear();
    if (!plain) return 0;
    for (int k = 0; k < RS_PLAIN_MROS; k++) {
        if (rs_plain_mros[k] == NULL) {
            rs_plain_mros[k] = Py_NewRef(mro);
            break;
        }
    }
    return 1;
}

/* rs_class_attrs that, when ``plain_object`` is not NULL, skips the key walk of ``object``'s
 * dict when *plain_object is ``object`` (the caller found it plain with no Python code run
 * since), and sets *plain_object to ``object`` once that walk found it plain (the class in every
 * MRO: its 24 keys are most of a proof's walk). */
static int
rs_class_attrs_known(PyObject *type, PyObject *const *names, int n_names, int want, PyObject **plain_object)
{
    enum { RS_MAX_SLOT_NAMES = 8 };
    if (n_names > RS_MAX_SLOT_NAMES) return 0;
    PyObject *mro = PyObject_GetAttr(type, rs_keys[RS_MRO]);
    if (mro == NULL) {
        PyErr_Clear();
        return 0;
    }
    unsigned char done[RS_MAX_SLOT_NAMES] = {0};
    int left = n_names, ok = 1;
    Py_ssize_t n = PyTuple_CheckExact(mro) ? PyTuple_Size(mro) : -1;
    if (n < 0) ok = 0;
    /* every class's keys found plain with this tuple: the walks below are skipped (rs_plain_mros) */
    const int plain_mro = ok && (rs_plain_mro_known(mro) || rs_mro_plain(mro));
    for (Py_ssize_t k = 0; k < n && ok && left > 0; k++) {
        PyObject *cls = PyTuple_GetItem(mro, k);
        if (cls == NULL || Py_TYPE(cls) != &PyType_Type) { /* (not known to run no code) */
            ok = 0;
            break;
        }
        /* A heap class's own dict (a type's tp_dict, at its tp_dictoffset: what the proxy
         * wraps), walked and probed directly; any other class through its mapping proxy
         * (``object``'s walked once per code epoch when the caller keeps *plain_object). */
        PyObject *dict = NULL, *proxy = NULL;
        const int known = plain_object != NULL && cls == (PyObject *)&PyBaseObject_Type;
        if (PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE) {
            dict = PyObject_GenericGetDict(cls, NULL);
            if (dict != NULL && !(plain_mro ? PyDict_CheckExact(dict) : pd_plain_keys(dict))) {
                Py_DECREF(dict);
                ok = 0;
                break;
            }
        }
        if (dict == NULL) {
            PyErr_Clear();
            proxy = PyObject_GetAttr(cls, rs_keys[RS_DICT]);
            if (proxy == NULL || !(plain_mro || (known && *plain_object == cls) || rs_proxy_plain(proxy))) {
                Py_XDECREF(proxy);
                ok = 0;
                break;
            }
        }
        if (known) *plain_object = cls;
        for (int j = 0; j < n_names && ok; j++) {
            if (done[j]) continue;
            PyObject *attribute;
            if (dict != NULL) {
                attribute = Py_XNewRef(PyDict_GetItemWithError(dict, names[j])); /* (plain keys) */
                if (attribute == NULL) {
                    if (PyErr_Occurred()) ok = 0;
                    continue;
                }
            }
            else {
                /* (membership first: an absent name, the common case, raises no KeyError) */
                const int member = PySequence_Contains(proxy, names[j]);
                if (member <= 0) {
                    if (member < 0) ok = 0;
                    continue;
                }
                attribute = PyObject_GetItem(proxy, names[j]);
                if (attribute == NULL) {
                    if (!PyErr_ExceptionMatches(PyExc_KeyError)) ok = 0;
                    PyErr_Clear();
                    continue;
                }
            }
            if (want == RS_ATTR_SLOT) ok = Py_TYPE(attribute) == &PyMemberDescr_Type;
            else ok = PyType_GetSlot(Py_TYPE(attribute), Py_tp_descr_get) == NULL;
            Py_DECREF(attribute);
            done[j] = 1;
            left--;
        }
        Py_XDECREF(dict);
        Py_XDECREF(proxy);
    }
    PyErr_Clear(); /* (anything odd: not known to run no code) */
    Py_DECREF(mro);
    return ok && (left == 0 || want == RS_ATTR_PLAIN);
}

/* 1 when reading ``placement`` from an instance of ``type`` (the call's exact attestation_type,
 * a dict-backed dataclass) runs no Python code: metaclass exactly type, the generic attribute
 * lookup (no ``__getattribute__`` or ``__getattr__``), and no descriptor under that name in its
 * MRO (rs_class_attrs; a property planted on the class at run time is one). Else 0. Runs no
 * Python code. */
static int
rs_attestation_inert(PyTypeObject *type)
{
    if (Py_TYPE((PyObject *)type) != &PyType_Type
        || PyType_GetSlot(type, Py_tp_getattro) != (void *)PyObject_GenericGetAttr) {
        return 0;
    }
    PyObject *names[1] = {rs_keys[RS_PLACEMENT]};
    return rs_class_attrs((PyObject *)type, names, 1, RS_ATTR_PLAIN);
}

/* The view fields rs_view_field reads, and whether it writes them (rs_objects_by_pfid). */
static const struct {
    int name;
    int written;
} rs_view_slots[] = {{RS_OBJECTS_BY_PFID_CACHE, 1}, {RS_OBJECTS, 0}, {RS_ATTESTED_PFIDS, 0}, {RS_GENERATION, 0},
                     {RS_ROWS_CACHE, 0}};

/* 1 when rs_view_field's reads of ``view`` (and its write of the object table's cache) run no
 * Python code: the view's class is a heap class of metaclass exactly type with the generic
 * attribute lookup and assignment, and every field read is a slot (rs_class_attrs; the
 * ``_AttestedView`` class). Remembered for the call until Python code may have run (the class
 * can be edited then). 0 otherwise (the reads then move ``code_epoch``). Runs no Python code. */
static int
rs_view_inert(rs_ctx *ctx, PyObject *view)
{
    PyTypeObject *type = Py_TYPE(view);
    if (type == ctx->inert_view_type && ctx->inert_view_epoch == ctx->code_epoch) return 1;
    if (Py_TYPE(type) != &PyType_Type || !(PyType_GetFlags(type) & Py_TPFLAGS_HEAPTYPE)
        || PyType_GetSlot(type, Py_tp_getattro) != (void *)PyObject_GenericGetAttr
        || PyType_GetSlot(type, Py_tp_setattro) != (void *)PyObject_GenericSetAttr) {
        return 0;
    }
    enum { RS_N_VIEW_SLOTS = sizeof(rs_view_slots) / sizeof(rs_view_slots[0]) };
    PyObject *names[RS_N_VIEW_SLOTS];
    for (int k = 0; k < RS_N_VIEW_SLOTS; k++) names[k] = rs_keys[rs_view_slots[k].name];
    if (!rs_class_attrs((PyObject *)type, names, RS_N_VIEW_SLOTS, RS_ATTR_SLOT)) return 0;
    ctx->inert_view_type = type;
    ctx->inert_view_epoch = ctx->code_epoch;
    return 1;
}

/* The view attribute ``field`` (RS_VIEW_*) of entry ``index``, read once per call; borrowed
 * (the context holds it). NULL with no error set: decline; NULL with an error set: failure.
 * ``code_epoch`` moves unless the read ran no Python code: a view of an inert class
 * (rs_view_inert) whose fields are read from their slots, with no method called. An object
 * table built here with no Python code run is plain now (exact str keys): marked checked. */
static PyObject *
rs_view_field(rs_ctx *ctx, Py_ssize_t index, PyObject *view, int field)
{
    PyObject **slot = &ctx->view_fields[index * RS_VIEW_NFIELDS + field];
    if (*slot != NULL) return *slot;
    int ran = !rs_view_inert(ctx, view), built = 0;
    PyObject *value = NULL;
    switch (field) {
    case RS_VIEW_BY_PFID:
        /* ``view.object_by_pfid()``: its cached table when built, else the method builds it. */
        value = pd_getattr(view, rs_keys[RS_OBJECTS_BY_PFID_CACHE]);
        if (value == Py_None) {
            Py_DECREF(value);
            value = rs_objects_by_pfid(view, &ctx->snapshot_layout, &ran);
            built = 1;
        }
        break;
    case RS_VIEW_ATTESTED_PFIDS:
        value = pd_getattr(view, rs_keys[RS_ATTESTED_PFIDS]);
        break;
    case RS_VIEW_GENERATION:
        value = pd_getattr(view, rs_keys[RS_GENERATION]);
        break;
    default:
        value = rs_view_rows(view, 0, &ran);
        break;
    }
    *slot = value;
    if (ran || PyErr_Occurred()) {
        ctx->code_epoch++; /* the reads above may have run Python code (methods, a foreign view's attributes) */
    }
    else if (built && value != NULL && PyDict_CheckExact(value)) {
        ctx->view_plain[index * RS_VIEW_NFIELDS + field] = ctx->code_epoch;
    }
    return value;
}

/* 1 when every item of an exact set or frozenset is an exact str, else 0. Runs no Python code
 * (an exact set's iterator). -1 with an error set. */
static int
rs_plain_set(PyObject *set)
{
    PyObject *iter = PyObject_GetIter(set);
    if (iter == NULL) return -1;
    int plain = 1;
    PyObject *item;
    while (plain && (item = PyIter_Next(iter)) != NULL) {
        plain = PyUnicode_CheckExact(item);
        Py_DECREF(item);
    }
    Py_DECREF(iter);
    return PyErr_Occurred() ? -1 : plain;
}

/* Whether ``table``, view field ``field`` of entry ``index`` (an exact dict or set), may be
 * probed by key now: its keys all exact strs (plain_dict.h), checked when first probed and again
 * after any point of the call where Python code may have run (``ctx->code_epoch`` moved: a hook
 * there can plant a str subclass with a colliding hash, whose ``__eq__`` a probe would run).
 * 1, 0 (the caller declines: the rules decide), -1 with an error set. Runs no Python code. */
static int
rs_view_plain(rs_ctx *ctx, Py_ssize_t index, int field, PyObject *table)
{
    uint64_t *checked = &ctx->view_plain[index * RS_VIEW_NFIELDS + field];
    if (*checked == ctx->code_epoch) return 1;
    int plain = PyDict_CheckExact(table) ? pd_plain_keys(table) : PyAnySet_CheckExact(table) ? rs_plain_set(table) : 0;
    if (plain == 1) *checked = ctx->code_epoch;
    return plain;
}

/* The final per-fragment check of one side: the snapshot owned for the fragment is the
 * attested snapshot object itself, or was proven equal to the attested state by its
 * executor, or has a field dict equal to it (other cases: unsure). On RV_OK ``*owned_out``
 * is the owned snapshot (borrowed: ``ctx->owned`` holds it). */
static int
rs_fragment(PyObject *fragment, PyObject *runtime_id, rs_ctx *ctx, PyObject **owned_out)
{
    PyObject *state = NULL;
    PyObject *attestation = NULL, *view = NULL, *placement = NULL, *pfid = NULL;
    PyObject *lease_generation = NULL;
    PyObject *owned = NULL;
    int rc = RV_DECLINE;
    /* ``snapshot_owner.get(runtime_id)``, the entry marked found: borrowed, not held here
     * (``ctx->owned`` holds it until rs_ctx_free and never drops an entry before, whatever code
     * runs meanwhile; only its address is compared below unless it is not the attested object):
     * the snapshot object itself is not touched when it is the attested one (a cache miss per
     * fragment less) */
    owned = runtime_id == NULL ? NULL : rs_owners_take(&ctx->owned, runtime_id);
    if (owned == NULL) goto done;
    /* The fragment's attestation, placement and lease generation from one fetch of its
     * instance dict (read together; a missing one declines, as each read did). */
    {
        /* (or its layout's slots: rv_bound_item) */
        mr_layout_class lc;
        (void)mr_bound_layout(&rv_bound_memo, &lc, (PyObject *)Py_TYPE(fragment));
        attestation = rv_state_item(fragment, &lc, MR_BF_ATTESTATION, rs_keys[RS_ATTESTATION]);
        placement = attestation == NULL ? NULL : rv_state_item(fragment, &lc, MR_BF_PLACEMENT, rs_keys[RS_PLACEMENT]);
        lease_generation = placement == NULL ? NULL
                                             : rv_state_item(fragment, &lc, MR_BF_LEASE_GENERATION,
                                                             rs_keys[RS_LEASE_GENERATION]);
        if (PyErr_Occurred()) goto error;
        if (lease_generation == NULL) goto done;
    }
    Py_ssize_t index = rs_lookup(&ctx->entry_of, attestation);
    if (index < 0) goto done;
    view = Py_NewRef(PyTuple_GetItem(ctx->entries[index], 2));
    PyObject *by_pfid = rs_view_field(ctx, index, view, RS_VIEW_BY_PFID); /* borrowed */
    if (by_pfid == NULL) goto error;
    if (ctx->placement_type != NULL && Py_TYPE(placement) == ctx->placement_type) {
        /* exactly PlacementFragment (no descriptor for the field): the attribute is the
         * instance state's value (its layout slot: rv_pf_item); missing / empty declines */
        pfid = rv_pf_item(placement, MR_PF_PLACEMENT_FRAGMENT_ID, rs_keys[RS_PFID]);
        if (pfid == NULL) {
            if (PyErr_Occurred()) goto error;
            goto done;
        }
    }
    else {
        RS_GET(pfid, placement, RS_PFID);
        ctx->code_epoch++; /* (another class's attribute: may run Python code) */
    }
    /* the probes below run no Python code with an exact str (a subclass's __hash__ / __eq__) */
    if (!PyUnicode_CheckExact(pfid)) goto done;
    PyObject *attested_pfids = rs_view_field(ctx, index, view, RS_VIEW_ATTESTED_PFIDS); /* borrowed */
    if (attested_pfids == NULL) goto error;
    if (!PyDict_CheckExact(by_pfid)) goto done;
    /* a dict or set is probed only when plain now (a tuple: rs_sorted_member compares exact strs
     * only; any other container declines) */
    if (!PyTuple_CheckExact(attested_pfids)) {
        int plain = rs_view_plain(ctx, index, RS_VIEW_ATTESTED_PFIDS, attested_pfids);
        if (plain <= 0) goto done;
    }
    /* ``view.expected_by_pfid.get(pfid) is not None``: the placement fragment id has an
     * attested evidence fragment (its expected state is only needed for a comparison). */
    int attested = PyTuple_CheckExact(attested_pfids) ? rs_sorted_member(ctx, index, attested_pfids, pfid)
                                                      : rs_member(attested_pfids, pfid);
    if (attested < 0) goto error;
    if (!attested) goto done;
    PyObject *generation = rs_view_field(ctx, index, view, RS_VIEW_GENERATION); /* borrowed */
    if (generation == NULL) goto error;
    /* an exact int, as the constructor stores (True or 1.0 forged in place compare equal: the
     * rules refuse them) */
    if (!PyLong_CheckExact(lease_generation)) goto done;
    int same = rs_compare(lease_generation, generation, Py_EQ);
    if (!PyLong_CheckExact(generation)) ctx->code_epoch++; /* (its __eq__ may have run) */
    if (same < 0) goto error;
    if (!same) goto done;
    int plain = rs_view_plain(ctx, index, RS_VIEW_BY_PFID, by_pfid);
    if (plain <= 0) goto done;
    PyObject *attested_object = PyDict_GetItemWithError(by_pfid, pfid);
    if (attested_object == NULL && PyErr_Occurred()) goto error;
    if (attested_object != owned) {
        PyObject *expected_by_pfid = rs_view_field(ctx, index, view, RS_VIEW_EXPECTED); /* borrowed */
        if (expected_by_pfid == NULL) goto done;
        plain = rs_view_plain(ctx, index, RS_VIEW_EXPECTED, expected_by_pfid);
        if (plain <= 0) goto done;
        state = PyDict_GetItemWithError(expected_by_pfid, pfid); /* borrowed; held below */
        if (state == NULL || state == Py_None) goto done;
        Py_INCREF(state);
        Py_ssize_t proven = ctx->proven.keys == NULL ? -1 : rs_lookup(&ctx->proven, owned);
        if (proven < 0 || PyList_GetItem(ctx->held, proven) != state) {
            /* Not the attested object itself: its fields must equal the attested ones. */
            int match = rs_snapshot_matches(owned, state, ctx->snapshot_type, &ctx->snapshot_layout);
            if (match < 0) goto error;
            if (match != 1) goto done;
        }
    }
    *owned_out = owned;
    rc = RV_OK;
    goto done;
error:
    rc = RV_ERROR;
done:
    if (rc == RV_DECLINE && PyErr_Occurred()) rc = RV_ERROR;
    Py_XDECREF(attestation);
    Py_XDECREF(view);
    Py_XDECREF(placement);
    Py_XDECREF(pfid);
    Py_XDECREF(lease_generation);
    Py_XDECREF(state);
    return rc;
}

/* Prefetch distances (rows of the distinct-fragment loops) for the objects read per fragment:
 * the loops are memory-latency bound once the plan leaves the caches. */
#define RS_AHEAD_OBJECT 12
#define RS_AHEAD_DICT 6

/* A cursor over the positions a side reads (``seen``), for the staged look-ahead of
 * revalidate_side's last loop: rs_next gives the next read position after the cursor's (n when
 * none is left). */
typedef struct {
    const unsigned char *seen;
    Py_ssize_t n;
    Py_ssize_t at;
} rs_cursor;

static Py_ssize_t
rs_next(rs_cursor *c)
{
    if (c->at < c->n) c->at++;
    while (c->at < c->n && !c->seen[c->at]) c->at++;
    return c->at;
}

/* Distances (in read positions) of the look-ahead stages of that loop: each stage reads only
 * what the stage before brought into the cache and prefetches the next object of the chain
 * (fragment -> placement -> placement fragment id -> its directory bucket -> its hashes; runtime
 * id -> its snapshot_owner slot), so the misses of several fragments overlap instead of following
 * one another. The last two stages serve rs_sorted_member: its bucket and hash reads were two
 * dependent misses per fragment once the per-entry hash arrays leave the cache (42 % of the
 * pass's own samples at Kimi 20). */
#define RS_STAGE_FRAGMENT 24
#define RS_STAGE_PLACEMENT 12
#define RS_STAGE_PFID 6
#define RS_STAGE_BUCKET 4
#define RS_STAGE_HASHES 2
#define RS_NSTAGES 5
/* Fragments from which revalidate_side's loops give the hints above (and their prefetches): a
 * smaller plan's objects are in the cache, and the cursors cost more than they save. */
#define RS_HINTED_FRAGS 256

/* For the hints of stages 3 and 4: the search index of the attested pfids of the fragment's
 * entry (only once rs_sorted_member built it with a directory) and its placement fragment id's
 * hash (an exact str's: cached, or computed without Python code). 1, or 0 when anything is
 * missing or of another class (no error left set). */
static int
rs_hint_search(const rs_ctx *ctx, PyObject *fragment, const struct rs_pfid_index **x, Py_hash_t *hash)
{
    PyObject *placement = rv_hint_placement(fragment); /* (checks the fragment's class) */
    if (placement == NULL || rv_pf_memo.memo.cls == NULL || (PyObject *)Py_TYPE(placement) != rv_pf_memo.memo.cls)
        return 0;
    PyObject *attestation = ((mr_layout_object *)fragment)->fields[MR_BF_ATTESTATION];
    PyObject *pfid = ((mr_layout_object *)placement)->fields[MR_PF_PLACEMENT_FRAGMENT_ID];
    if (attestation == NULL || pfid == NULL || !PyUnicode_CheckExact(pfid) || ctx->entry_of.keys == NULL) return 0;
    Py_ssize_t index = rs_lookup(&ctx->entry_of, attestation);
    if (index < 0 || index >= ctx->n_entries || ctx->pfid_index == NULL) return 0;
    const struct rs_pfid_index *found = &ctx->pfid_index[index];
    if (found->hashes == NULL || found->dir == NULL) return 0;
    Py_hash_t h = PyObject_Hash(pfid);
    if (h == -1) {
        PyErr_Clear();
        return 0;
    }
    *x = found;
    *hash = h;
    return 1;
}

/* The staged hints for the fragment at position q (hints only: nothing is decided on them, no
 * Python code runs, nothing is held; an object of any other class is skipped). stage 0: the
 * fragment and its runtime id; 1: the fragment's placement and the runtime id's snapshot_owner
 * slot (the str's hash: cached, or computed without Python code for an exact str); 2: the
 * placement's placement fragment id; 3: that id's bucket of its entry's pfid directory; 4: the
 * hashes that bucket bounds (rs_sorted_member's reads). */
static void
rs_stage_hint(PyObject *frags, PyObject *runtime_ids, const rs_ctx *ctx, Py_ssize_t q, int stage)
{
    PyObject *fragment = rv_hint_item(frags, q);
    if (fragment == NULL) return;
    if (stage >= 3) {
        const struct rs_pfid_index *x = NULL;
        Py_hash_t hash = 0;
        if (!rs_hint_search(ctx, fragment, &x, &hash)) return;
        size_t b = rs_pfid_bucket(hash, x->bits);
        if (stage == 3) {
            __builtin_prefetch(&x->dir[b]);
            __builtin_prefetch(&x->dir[b + 1]);
            return;
        }
        /* (dir[b] <= dir[b + 1] <= n; hashes has n + 1 slots) */
        __builtin_prefetch(&x->hashes[x->dir[b]]);
        __builtin_prefetch(&x->hashes[x->dir[b + 1]]);
        return;
    }
    PyObject *runtime_id = rv_hint_item(runtime_ids, q);
    if (runtime_id == NULL) return;
    if (stage == 0) {
        rv_prefetch_lines(fragment, 2);
        __builtin_prefetch(runtime_id);
        return;
    }
    PyObject *placement = rv_hint_placement(fragment);
    if (placement == NULL) return;
    if (stage == 1) {
        rv_prefetch_lines(placement, 2);
        rs_owners_prefetch(&ctx->owned, runtime_id);
        return;
    }
    rv_hint_pfid(placement);
}

/* Per-operation positions (source_of / target_of / side_of) are a list of ints, or packed:
 * an exact bytes of one native int32 per operation (bound_contracts._packed_positions: 4 bytes
 * each where a list costs 8 and an int object per distinct position). 1 for either container, 0
 * for anything else (the callers' TypeError). */
static int
rs_positions_arg(PyObject *side_of)
{
    return PyList_Check(side_of) || PyBytes_CheckExact(side_of);
}

/* The number of positions: the list's length, or the packed count (-1 without an exception:
 * a packed size that is not a whole number of positions, which callers decline). */
static Py_ssize_t
rs_positions_size(PyObject *side_of)
{
    if (PyList_Check(side_of)) return PyList_Size(side_of);
    Py_ssize_t size = PyBytes_Size(side_of);
    if (size < 0) {
        PyErr_Clear();
        return -1;
    }
    return size % (Py_ssize_t)sizeof(int32_t) == 0 ? size / (Py_ssize_t)sizeof(int32_t) : -1;
}

/* A private list of the positions (a copy of the list, or the packed ones as ints). */
static PyObject *
rs_positions_list(PyObject *side_of)
{
    if (!PyBytes_CheckExact(side_of)) return PySequence_List(side_of);
    Py_ssize_t n = rs_positions_size(side_of);
    const char *raw = PyBytes_AsString(side_of);
    if (raw == NULL) return NULL;
    if (n < 0) return PyList_New(0); /* (a length no operation count matches: declines) */
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        int32_t p;
        memcpy(&p, raw + (size_t)i * sizeof(int32_t), sizeof(int32_t));
        PyObject *number = PyLong_FromLong((long)p);
        if (number == NULL) Py_CLEAR(list);
        else PyList_SetItem(list, i, number); /* steals; in range */
    }
    return list;
}

/* Position ``side_of[i]`` as an index into ``frags`` (0 <= p < n_frags); -1: decline. */
static Py_ssize_t
rs_position(PyObject *side_of, Py_ssize_t i, Py_ssize_t n_frags)
{
    if (PyBytes_CheckExact(side_of)) {
        Py_ssize_t size = PyBytes_Size(side_of);
        const char *raw = size < 0 ? NULL : PyBytes_AsString(side_of);
        if (raw == NULL) {
            PyErr_Clear();
            return -1;
        }
        if (i < 0 || i >= size / (Py_ssize_t)sizeof(int32_t)) return -1;
        int32_t p;
        memcpy(&p, raw + (size_t)i * sizeof(int32_t), sizeof(int32_t));
        return p >= 0 && (Py_ssize_t)p < n_frags ? (Py_ssize_t)p : -1;
    }
    PyObject *item = PyList_GetItem(side_of, i);
    if (item == NULL || !PyLong_CheckExact(item)) return -1;
    Py_ssize_t p = PyLong_AsSsize_t(item);
    if (p == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return p >= 0 && p < n_frags ? p : -1;
}

/* The boxes argument of revalidate_spaces / revalidate_coverage: the scan's list of
 * ``(overlap_offset, overlap_shape)`` tuples (read from a private copy), or the plan's
 * operations tuple itself, each operation's box then read from its own region fields (regions
 * in TransferRegion's C-owned layout, both fields set; anything else declines): the fast path
 * keeps no box tuple per operation (80 bytes each at bind's peak). */
typedef struct {
    PyObject *list;    /* owned: a private copy of the boxes list, or NULL */
    PyObject *regions; /* borrowed (the caller's argument): the operations tuple, or NULL */
    mr_layout_class rl; /* the regions' layout (mr_region_layout) */
} rv_boxes;

/* For n_ops operations: RV_OK, RV_DECLINE (another length, a region outside the accepted
 * layout) or RV_ERROR. Runs no Python code; rv_boxes_close frees it in every case. */
static int
rv_boxes_open(rv_boxes *b, PyObject *arg, Py_ssize_t n_ops)
{
    b->list = NULL;
    b->regions = NULL;
    b->rl.cls = NULL;
    b->rl.n = 0;
    if (PyList_Check(arg)) {
        b->list = PySequence_List(arg);
        if (b->list == NULL) return RV_ERROR;
        return PyList_Size(b->list) == n_ops ? RV_OK : RV_DECLINE;
    }
    if (!PyTuple_CheckExact(arg) || PyTuple_Size(arg) != n_ops) return RV_DECLINE;
    b->regions = arg;
    if (n_ops == 0) return RV_OK;
    static mr_layout_memo memo; /* the operations' class in TransferRegion's C-owned layout */
    PyObject *first = PyTuple_GetItem(arg, 0);
    if (first == NULL) return RV_ERROR;
    if (!mr_region_layout(&memo, &b->rl, (PyObject *)Py_TYPE(first))) return RV_DECLINE;
    for (Py_ssize_t i = 0; i < n_ops; i++) {
        PyObject *const *fields = mr_layout_fields(PyTuple_GetItem(arg, i), &b->rl);
        if (fields == NULL || fields[MR_RG_OVERLAP_OFFSET] == NULL || fields[MR_RG_OVERLAP_SHAPE] == NULL) {
            return RV_DECLINE;
        }
    }
    return RV_OK;
}

/* The boxes argument's accepted containers: a list, or an exact non-empty tuple whose first item
 * is an instance of a class in TransferRegion's C-owned layout (the operations; a tuple of box
 * tuples stays a TypeError). 1 or 0; runs no Python code, never raises. */
static int
rv_boxes_arg(PyObject *arg)
{
    if (PyList_Check(arg)) return 1;
    if (!PyTuple_CheckExact(arg) || PyTuple_Size(arg) < 1) return 0;
    static mr_layout_memo memo;
    mr_layout_class rl;
    return mr_region_layout(&memo, &rl, (PyObject *)Py_TYPE(PyTuple_GetItem(arg, 0)));
}

static void
rv_boxes_close(rv_boxes *b)
{
    Py_CLEAR(b->list);
    b->regions = NULL;
}

/* Borrowed: box i's item of the list, or operation i (its region) in the regions form. */
static PyObject *
rv_box_handle(const rv_boxes *b, Py_ssize_t i)
{
    return b->list != NULL ? PyList_GetItem(b->list, i) : PyTuple_GetItem(b->regions, i);
}

/* The box a handle stands for as (offset, shape), borrowed: an exact 2-tuple's items in the list
 * form (anything else: 0), the region's two fields in the regions form (the fields were checked
 * set by rv_boxes_open; the tuple holds the regions, no Python code runs in between: a NULL
 * field declines all the same). 1 or 0. */
static int
rv_box_parts(const rv_boxes *b, PyObject *handle, PyObject **offset, PyObject **shape)
{
    if (b->list != NULL) {
        if (!PyTuple_CheckExact(handle) || PyTuple_Size(handle) != 2) return 0;
        *offset = PyTuple_GetItem(handle, 0);
        *shape = PyTuple_GetItem(handle, 1);
        return 1;
    }
    PyObject *const *fields = mr_layout_fields(handle, &b->rl);
    if (fields == NULL || fields[MR_RG_OVERLAP_OFFSET] == NULL || fields[MR_RG_OVERLAP_SHAPE] == NULL) return 0;
    *offset = fields[MR_RG_OVERLAP_OFFSET];
    *shape = fields[MR_RG_OVERLAP_SHAPE];
    return 1;
}

/* Box i as a box object (new reference): the list's item, or a new (overlap_offset,
 * overlap_shape) tuple of operation i. NULL: an exception, or none set (decline). */
static PyObject *
rv_box_new(const rv_boxes *b, Py_ssize_t i)
{
    PyObject *handle = rv_box_handle(b, i);
    if (handle == NULL) return NULL;
    if (b->list != NULL) return Py_NewRef(handle);
    PyObject *offset = NULL, *shape = NULL;
    if (!rv_box_parts(b, handle, &offset, &shape)) return NULL;
    return PyTuple_Pack(2, offset, shape);
}

/* A loop memo of revalidate_side: an identity table from an object to a value, both held for
 * the call (in ``held``, a C array no Python code can reach), so no address in it can be reused
 * by another object. It never evicts and takes at most ``room`` entries in all (then the lookups
 * are made again, as without it): the keys and attestations of one side are one per executor
 * and per attestation (128 of each at Kimi 20, where 32 direct-mapped slots missed 88 % of the
 * time). */
typedef struct {
    rv_table table;  /* object -> index in ``held`` of its value */
    PyObject **held; /* owned: object, value, object, value, ... */
    Py_ssize_t n_held, room;
} rs_memo;

/* Room for ``room`` objects; the tables are allocated by the first rs_memo_put (a small plan's
 * call, whose keys are never memoized without ``row_of``, pays nothing for them). */
static void
rs_memo_init(rs_memo *m, Py_ssize_t room)
{
    m->room = room;
    m->n_held = 0;
    m->held = NULL;
    m->table = (rv_table){NULL, NULL, 0};
}

static void
rs_memo_free(rs_memo *m)
{
    rv_table_free(&m->table);
    m->table.keys = NULL;
    m->table.values = NULL;
    for (Py_ssize_t k = 0; k < m->n_held; k++) Py_DECREF(m->held[k]);
    PyMem_Free(m->held);
    m->held = NULL;
    m->n_held = 0;
}

/* The value memoized for ``object`` (borrowed: ``held`` holds it), or NULL. */
static PyObject *
rs_memo_get(const rs_memo *m, PyObject *object)
{
    if (m->table.keys == NULL) return NULL;
    Py_ssize_t at = rs_lookup(&m->table, object);
    return at < 0 ? NULL : m->held[at];
}

/* Memoize ``value`` for ``object`` while room is left. 0, or -1 with MemoryError (allocating the
 * tables at the first put). */
static int
rs_memo_put(rs_memo *m, PyObject *object, PyObject *value)
{
    if (m->n_held >= 2 * m->room) return 0;
    if (m->table.keys == NULL) {
        m->held = mr_alloc_array((size_t)m->room, 2 * sizeof(PyObject *));
        if (m->held == NULL || rv_table_init(&m->table, (size_t)m->room) < 0) {
            PyMem_Free(m->held);
            m->held = NULL;
            m->table = (rv_table){NULL, NULL, 0};
            return -1;
        }
    }
    m->held[m->n_held++] = Py_NewRef(object);
    m->held[m->n_held++] = Py_NewRef(value);
    rs_store(&m->table, object, m->n_held - 1);
    return 0;
}

/* Forget every entry (what it holds stays held until the call ends). */
static void
rs_memo_forget(rs_memo *m)
{
    if (m->table.keys != NULL) memset(m->table.keys, 0, (m->table.mask + 1) * sizeof(PyObject *));
}

/* 1 when hashing ``key`` and comparing it with ``==`` to a plain value runs no Python code: an
 * exact tuple whose items are exact str, exact int, or exact tuples of exact str / int (what
 * revalidate_fragments builds as a provenance key and revalidate_views as an executor's), else
 * 0. Runs no Python code. */
static int
rs_plain(PyObject *key)
{
    if (key == NULL || !PyTuple_CheckExact(key)) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t n = PyTuple_Size(key);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyTuple_GetItem(key, k);
        if (PyUnicode_CheckExact(item) || PyLong_CheckExact(item)) continue;
        if (!PyTuple_CheckExact(item)) return 0;
        Py_ssize_t m = PyTuple_Size(item);
        for (Py_ssize_t j = 0; j < m; j++) {
            PyObject *inner = PyTuple_GetItem(item, j);
            if (!PyUnicode_CheckExact(inner) && !PyLong_CheckExact(inner)) return 0;
        }
    }
    return 1;
}

/* 1 when ``key == plain`` is shown without running Python code, for ``plain`` an exact tuple
 * rs_plain accepts: ``key`` is it, or an exact tuple of the same length whose items are each
 * the same object as ``plain``'s or equal exact str / exact int / exact tuples of those (what
 * ``==`` decides for them, with no ``__eq__`` or ``__hash__`` of another class). Else 0 (unequal
 * or not shown: the caller looks the key up as before). ``key`` is then plain too, with the
 * hash of ``plain``. Runs no Python code. */
static int
rs_plain_equal(PyObject *key, PyObject *plain, int depth)
{
    if (key == plain) return 1;
    if (!PyTuple_CheckExact(key) || !PyTuple_CheckExact(plain)) return 0;
    Py_ssize_t n = PyTuple_Size(plain);
    if (n < 0 || PyTuple_Size(key) != n) {
        PyErr_Clear(); /* (none expected: exact tuples) */
        return 0;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *x = PyTuple_GetItem(key, k), *y = PyTuple_GetItem(plain, k);
        if (x == y) continue;
        if (x == NULL || y == NULL) return 0;
        if (PyUnicode_CheckExact(x) && PyUnicode_CheckExact(y)) {
            if (PyUnicode_Compare(x, y) != 0) { /* (exact strs: never fails) */
                PyErr_Clear();
                return 0;
            }
        }
        else if (PyLong_CheckExact(x) && PyLong_CheckExact(y)) {
            if (PyObject_RichCompareBool(x, y, Py_EQ) != 1) { /* (exact ints: no code, no error) */
                PyErr_Clear();
                return 0;
            }
        }
        else if (depth == 0 && PyTuple_CheckExact(y)) {
            if (!rs_plain_equal(x, y, 1)) return 0; /* a nested tuple of exact str / int */
        }
        else {
            return 0;
        }
    }
    return 1;
}

PyDoc_STRVAR(revalidate_side_doc,
"revalidate_side(frags, keys, runtime_ids, side_of, runtime, rows, attested, used,\n"
"                attestation_type, rank_type, snapshot_type, placement_type=None, row_of=None)\n"
"--\n\n"
"Executor consistency of one side of the TransferPlan revalidation fast path (spec §12.4),\n"
"for the common cases: every executor lists all its worker's attested fragments and carries\n"
"the attested snapshot objects themselves or snapshots of exactly ``snapshot_type`` whose\n"
"field dicts equal the attested ones.\n"
"The arguments are the fast path's own tables (``bound_contracts._fast_side_consistent``).\n"
"Returns ``True`` when the side passes (the ``id`` of every executor state owning operations\n"
"is then in ``used``), ``None`` when unsure (the Python version decides). ``TypeError`` for\n"
"wrong container types. ``placement_type`` (PlacementFragment): the placement fragment id of\n"
"an exact one is read from its instance dict. ``row_of``: this side's list appended by\n"
"revalidate_views (fragment position -> runtime row); a list of another length is ignored,\n"
"None at a used position makes the call unsure.\n"
"Positions may also be packed: an exact bytes of one native int32 per operation.");

static PyObject *
revalidate_side(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *frags, *keys, *runtime_ids, *side_of, *runtime, *rows, *attested, *used, *att_type, *rank_type;
    PyObject *snapshot_type, *placement_arg = Py_None, *row_of = Py_None;
    if (!mr_parse_vector(args, nargs, "O!O!O!OO!O!O!O!O!O!O!|OO:revalidate_side", &PyList_Type, &frags, &PyList_Type, &keys,
                          &PyList_Type, &runtime_ids, &side_of, &PyDict_Type, &runtime, &PyList_Type, &rows,
                          &PyDict_Type, &attested, &PySet_Type, &used, &PyType_Type, &att_type, &PyType_Type,
                          &rank_type, &PyType_Type, &snapshot_type, &placement_arg, &row_of)) {
        return NULL;
    }
    if (!rs_positions_arg(side_of)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_side: side_of must be a list or packed positions");
        return NULL;
    }
    if (placement_arg != Py_None && !PyType_Check(placement_arg)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_side: placement_type must be a type or None");
        return NULL;
    }
    if (row_of != Py_None && !PyList_CheckExact(row_of)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_side: row_of must be a list or None");
        return NULL;
    }
    PyObject *result = NULL, *by_key = NULL, *own_rows = NULL;
    rs_memo key_memo = {{NULL, NULL, 0}, NULL, 0, 0}, att_memo = {{NULL, NULL, 0}, NULL, 0, 0};
    int att_memo_used = 0, att_inert = -1; /* att_inert: rs_attestation_inert's answer, -1 unknown */
    rv_table active = {NULL, NULL, 0}, row_set = {NULL, NULL, 0};
    rs_ctx ctx = {.attested = attested,
                  .attestation_type = (PyTypeObject *)att_type,
                  .rank_type = (PyTypeObject *)rank_type,
                  .snapshot_type = (PyTypeObject *)snapshot_type,
                  .placement_type = placement_arg == Py_None ? NULL : (PyTypeObject *)placement_arg};
    /* once per call, through a memo (layout.h: the comparison mirrors the instance state) */
    static mr_layout_memo rs_snapshot_memo;
    (void)mr_layout_memo_check(&rs_snapshot_memo, &ctx.snapshot_layout, snapshot_type, rs_snap_keys);
    /* seen[p]: fragment p is read by an operation of this side. The distinct fragments are
     * visited in position order by scanning it (no array of them: bind's peak). */
    unsigned char *seen = NULL;
    Py_ssize_t n_unique = 0;
    size_t n_active = 0;
    /* A private copy of the rows (one per executor): the values' own methods cannot resize what
     * is iterated. ``frags`` and ``side_of`` (one item per fragment / operation) are the fast
     * path's own lists, read in place: ``side_of`` by a loop that runs no Python code, each
     * fragment held while it is read (a list resized meanwhile gives IndexError, a failure the
     * caller turns into the rules' decision). */
    own_rows = PySequence_List(rows);
    if (own_rows == NULL) goto done;
    Py_ssize_t n_frags = PyList_Size(frags), n_rows = PyList_Size(own_rows), n_ops = rs_positions_size(side_of);
    if (n_frags < 0 || n_rows < 0) goto done;
    if (n_ops < 0) {
        if (PyErr_Occurred()) goto done;
        goto decline; /* packed positions of no whole count */
    }
    if (PyList_Size(keys) != n_frags || PyList_Size(runtime_ids) != n_frags) goto decline;
    if (row_of != Py_None && PyList_Size(row_of) != n_frags) row_of = Py_None; /* not this side's */
    seen = mr_alloc_array((size_t)n_frags, 1);
    /* ``active`` holds the attestations' placements: one object in a bound or restored plan.
     * Sized for RS_ACTIVE_ROOM of them (a plan naming more declines below) instead of one slot
     * pair per fragment: this call holds bind's traced-memory peak. */
    if (seen == NULL || rv_table_init(&active, RS_ACTIVE_ROOM) < 0) goto done;
    memset(seen, 0, (size_t)n_frags);
    {
        int rc = rs_ctx_init(&ctx, n_frags);
        if (rc == RV_ERROR) goto done;
        if (rc == RV_DECLINE) goto decline;
    }
    for (Py_ssize_t i = 0; i < n_ops; i++) {
        Py_ssize_t p = rs_position(side_of, i, n_frags);
        if (p < 0) goto decline;
        if (!seen[p]) {
            seen[p] = 1;
            n_unique++;
        }
    }
    /* Distinct provenance keys, and every fragment's view owner has its fragment's key. */
    by_key = PyDict_New();
    if (by_key == NULL) goto done;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        PyObject *row = PyList_GetItem(own_rows, r);
        if (row == NULL) goto done;
        if (!PyTuple_CheckExact(row) || PyTuple_Size(row) != 3) goto decline;
        if (PyDict_SetItem(by_key, PyTuple_GetItem(row, 1), row) < 0) goto done;
    }
    if (PyDict_Size(by_key) != n_rows) goto decline;
    /* Loop-carried memos (see rs_plain, rs_memo): keys looked up in ``by_key`` with their rows,
     * and attestations with their placements, each held. A key is
     * kept when its lookup ran no Python code (the keys of ``by_key`` and the fragment's key
     * plain, its row read from ``row_of``): the same key object then finds the same row (the
     * keys are immutable, ``by_key`` is this call's own). An attestation is kept when it is
     * exactly ``attestation_type`` and that class's placement read runs no code
     * (rs_attestation_inert, checked at the first such read and after any point where code may
     * have run), and the memo is emptied
     * as soon as anything may have run code: its placement is then the same object. */
    int plain_rows = 1;
    for (Py_ssize_t r = 0; r < n_rows && plain_rows; r++) {
        PyObject *row = PyList_GetItem(own_rows, r); /* an exact 3-tuple (checked above) */
        plain_rows = row != NULL && rs_plain(PyTuple_GetItem(row, 1));
    }
    PyErr_Clear(); /* (none expected: in range) */
    if (n_rows > PY_SSIZE_T_MAX / 4 || ctx.n_entries > PY_SSIZE_T_MAX / 4) goto decline;
    /* The rows by address (those of ``by_key``: the private copy holds them): with distinct
     * plain keys, ``by_key[key] is row`` holds exactly when ``row`` is one of them and ``key ==
     * row[1]`` (a plain key equal to row[1] has its hash and equals no other key), shown without
     * hashing ``key`` by rs_plain_equal; a key it does not show equal is looked up as before. */
    if (plain_rows) {
        if (rv_table_init(&row_set, (size_t)n_rows) < 0) goto done;
        for (Py_ssize_t r = 0; r < n_rows; r++) rs_set_add(&row_set, PyList_GetItem(own_rows, r));
    }
    rs_memo_init(&key_memo, 2 * n_rows + 32);
    rs_memo_init(&att_memo, 2 * ctx.n_entries + 32);
    for (Py_ssize_t p = 0; p < n_frags; p++) {
        if (!seen[p]) continue;
        if (n_frags >= RS_HINTED_FRAGS && p + RS_AHEAD_OBJECT < n_frags) {
            rs_prefetch_item(frags, p + RS_AHEAD_OBJECT);
            if (row_of == Py_None) rs_prefetch_item(runtime_ids, p + RS_AHEAD_OBJECT);
            rs_prefetch_item(keys, p + RS_AHEAD_OBJECT);
        }
        if (n_frags >= RS_HINTED_FRAGS && p + RS_AHEAD_DICT < n_frags) rs_prefetch_dict(frags, p + RS_AHEAD_DICT);
        PyObject *key = PyList_GetItem(keys, p);
        if (key == NULL) goto done;
        /* ``runtime.get(runtime_ids[p])``: given by revalidate_views (``row_of``), which found
         * it by address, else looked up (borrowed either way: only its address is compared
         * with ``keyed`` below). */
        PyObject *row = row_of == Py_None ? NULL : PyList_GetItem(row_of, p);
        int pure = plain_rows && row != NULL;
        if (row == NULL) {
            PyErr_Clear(); /* (row_of None, or its item p: in range, the size was checked) */
            PyObject *runtime_id = PyList_GetItem(runtime_ids, p);
            if (runtime_id == NULL) goto done;
            row = PyDict_GetItemWithError(runtime, runtime_id);
        }
        if (row == NULL || row == Py_None) goto decline;
        /* ``by_key[key]`` from the memo when this key object was looked up before (a plain key:
         * its lookup ran no code, and the same lookup finds the same row) */
        PyObject *keyed = pure ? rs_memo_get(&key_memo, key) : NULL;
        if (keyed == NULL && plain_rows && rs_set_has(&row_set, row) && rs_plain_equal(key, PyTuple_GetItem(row, 1), 0)) {
            keyed = row; /* (an exact 3-tuple of own_rows; key plain: ``pure`` stands) */
        }
        if (keyed == NULL) {
            pure = pure && rs_plain(key);
            keyed = PyDict_GetItemWithError(by_key, key);
            if (pure && keyed != NULL && rs_memo_put(&key_memo, key, keyed) < 0) goto done;
        }
        if (!pure && att_memo_used) { /* code may have run */
            rs_memo_forget(&att_memo);
            att_memo_used = 0;
        }
        if (keyed != row) goto decline;
        PyObject *fragment = PyList_GetItem(frags, p);
        if (fragment == NULL) goto done;
        Py_INCREF(fragment);
        PyObject *attestation = rv_bound_item(fragment, MR_BF_ATTESTATION, rs_keys[RS_ATTESTATION]);
        Py_DECREF(fragment);
        if (attestation == NULL) goto decline;
        /* its placement from the memo when this attestation (exactly attestation_type, whose
         * placement attribute runs no code) was read before and nothing has run since */
        PyObject *placement = Py_XNewRef(rs_memo_get(&att_memo, attestation));
        if (placement == NULL) {
            /* exact: its class is attestation_type, checked inert (rs_attestation_inert) when
             * the memo may keep its answer (pure), and again once code may have run since (the
             * class may have been edited) */
            int exact = Py_TYPE(attestation) == ctx.attestation_type;
            if (!pure) att_inert = -1;
            else if (exact && att_inert < 0) att_inert = rs_attestation_inert(ctx.attestation_type);
            exact = exact && att_inert == 1;
            if (!exact && att_memo_used) { /* its read may run code */
                rs_memo_forget(&att_memo);
                att_memo_used = 0;
            }
            placement = pd_getattr(attestation, rs_keys[RS_PLACEMENT]);
            if (!exact) att_inert = -1; /* (its read may have run code) */
            if (placement != NULL && exact && pure) {
                if (rs_memo_put(&att_memo, attestation, placement) < 0) {
                    Py_DECREF(placement);
                    Py_DECREF(attestation);
                    goto done;
                }
                att_memo_used = 1;
            }
        }
        Py_DECREF(attestation);
        if (placement == NULL) goto decline;
        if (!rs_set_has(&active, placement)) {
            if (n_active == RS_ACTIVE_ROOM) {
                Py_DECREF(placement);
                goto decline; /* more distinct placements than the table holds: not decided here */
            }
            rs_set_add(&active, placement); /* alive: held by the attestation, held by the fragment */
            n_active++;
        }
        Py_DECREF(placement);
    }
    if (rs_owners_init(&ctx.owned, (size_t)n_unique) < 0) goto done;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        int rc = rs_executor(PyList_GetItem(own_rows, r), &ctx, &active, used);
        if (rc == RV_ERROR) goto done;
        if (rc == RV_DECLINE) goto decline;
    }
    /* The Python version's ``set(operation ids) == set(snapshot_owner)``: every operation's
     * runtime id is a key (its lookup below declines otherwise, marking the key found), and
     * as many distinct keys were found as there are keys. */
    rs_cursor ahead[RS_NSTAGES];
    static const int distance[RS_NSTAGES] = {RS_STAGE_FRAGMENT, RS_STAGE_PLACEMENT, RS_STAGE_PFID, RS_STAGE_BUCKET,
                                             RS_STAGE_HASHES};
    /* (hints only: a plan of few fragments is in the cache, its cursors would only cost) */
    const int hinted = n_frags >= RS_HINTED_FRAGS;
    for (int stage = 0; hinted && stage < RS_NSTAGES; stage++) {
        ahead[stage] = (rs_cursor){seen, n_frags, -1};
        for (int k = 0; k < distance[stage] - 1; k++) (void)rs_next(&ahead[stage]);
    }
    for (Py_ssize_t p = 0; p < n_frags; p++) {
        if (!seen[p]) continue;
        for (int stage = 0; hinted && stage < RS_NSTAGES; stage++) {
            Py_ssize_t q = rs_next(&ahead[stage]);
            if (q < n_frags) rs_stage_hint(frags, runtime_ids, &ctx, q, stage);
        }
        PyObject *owned = NULL;
        PyObject *fragment = PyList_GetItem(frags, p);
        if (fragment == NULL) goto done;
        Py_INCREF(fragment);
        int rc = rs_fragment(fragment, PyList_GetItem(runtime_ids, p), &ctx, &owned);
        Py_DECREF(fragment);
        if (rc == RV_ERROR) goto done;
        if (rc == RV_DECLINE) goto decline;
    }
    if (ctx.owned.hits != ctx.owned.count) goto decline;
    result = Py_NewRef(Py_True);
    goto done;
decline:
    if (!PyErr_Occurred()) result = Py_NewRef(Py_None);
done:
    rs_ctx_free(&ctx);
    rv_table_free(&active);
    rv_table_free(&row_set);
    PyMem_Free(seen);
    rs_memo_free(&key_memo);
    rs_memo_free(&att_memo);
    Py_XDECREF(by_key);
    Py_XDECREF(own_rows);
    return result;
}

/* --- revalidate_spaces ------------------------------------------------------------------ */

enum {
    RP_BINDING,
    RP_PLACEMENT,
    RP_INSTANCE,
    RP_WORKER,
    RP_DEVICE,
    RP_STORAGE_ADDRESS,
    RP_STORAGE_NBYTES,
    RP_ADDRESS,
    RP_NBYTES,
    RP_ALIASES,
    RP_OFFSET,
    RP_SHAPE,
    RP_NNAMES
};

static const char *const rp_names[RP_NNAMES] = {
    "binding", "placement", "instance_id", "worker_id", "device", "storage_address", "storage_nbytes",
    "address", "nbytes", "aliases", "global_offset", "local_shape",
};

static PyObject *rp_keys[RP_NNAMES];

typedef struct {
    size_t space;
    uint64_t begin;
    uint64_t end;
} rp_extent;

static int
rp_compare_extent(const void *a, const void *b)
{
    const rp_extent *x = a, *y = b;
    if (x->space != y->space) return x->space < y->space ? -1 : 1;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* The types whose instances revalidate_spaces reads through one fetch of their instance dict
 * (exact RuntimeBindingFragment / PlacementFragment: dataclasses without descriptors for the
 * fields read, so each attribute is the dict's value; a field missing from the dict declines,
 * as the attribute read of a missing field failed), and the space tuples of the call shared
 * by the very (instance, worker, device) objects they hold (equal tuples, fewer allocations). */
typedef struct {
    PyTypeObject *binding_type;   /* or NULL: attributes */
    PyTypeObject *placement_type; /* or NULL: attributes */
    rf_memo_table spaces;
    /* every space and allocation of the call so far held exact str, exact int or None items
     * only (no hash or comparison of them runs Python code, and hashing them cannot fail) */
    int plain;
} rp_config;

/* An item no hash or comparison runs Python code for. */
static int
rp_plain_item(PyObject *item)
{
    return PyUnicode_CheckExact(item) || PyLong_CheckExact(item) || item == Py_None;
}


/* ``getattr(object, name)`` (new reference, NULL with an error set), from ``dict`` (the
 * object's instance dict, exact type checked by the caller) when not NULL: a missing item
 * then declines (NULL, no error set). */
/* The runtime layout's slot (plus one; 0: not a runtime fragment field read here) of each name
 * rp_field reads from a binding's state: rv_item's own index of that name (mr_runtime_index),
 * without its search of the layout's names per read. */
static const Py_ssize_t rp_runtime_slot[RP_NNAMES] = {
    [RP_WORKER] = MR_RF_WORKER_ID + 1,
    [RP_DEVICE] = MR_RF_DEVICE + 1,
    [RP_STORAGE_ADDRESS] = MR_RF_STORAGE_ADDRESS + 1,
    [RP_STORAGE_NBYTES] = MR_RF_STORAGE_NBYTES + 1,
    [RP_ADDRESS] = MR_RF_ADDRESS + 1,
    [RP_NBYTES] = MR_RF_NBYTES + 1,
};

static PyObject *
rp_field(PyObject *object, PyObject *dict, int name)
{
    if (dict != NULL) {
        /* a binding of the runtime layout this file's readers accepted is its own state
         * (rv_runtime_state): its slot, as rv_item reads it */
        if (rp_runtime_slot[name] > 0 && rv_runtime_memo.memo.cls != NULL
            && (PyObject *)Py_TYPE(dict) == rv_runtime_memo.memo.cls) {
            return Py_XNewRef(((mr_layout_object *)dict)->fields[rp_runtime_slot[name] - 1]);
        }
        return rv_item(dict, rp_keys[name]);
    }
    return pd_getattr(object, rp_keys[name]);
}

/* The instance dict of ``object`` when it is exactly ``type`` (new reference), else NULL;
 * *failed on an error. */
static PyObject *
rp_exact_dict(PyObject *object, PyTypeObject *type, int *failed)
{
    *failed = 0;
    if (type == NULL || Py_TYPE(object) != type) return NULL;
    PyObject *dict = pd_instance_dict(object);
    if (dict == NULL) *failed = 1;
    return dict;
}

/* ``(fragment.instance_id, binding.worker_id, binding.device)`` and the binding, new refs;
 * *bdict: the binding's instance dict when exactly cfg->binding_type (new reference), else
 * NULL. */
static int
rp_space(PyObject *fragment, rp_config *cfg, PyObject **space, PyObject **binding, PyObject **bdict)
{
    PyObject *instance = NULL, *worker = NULL, *device = NULL;
    *space = NULL;
    *bdict = NULL;
    {
        /* (or its layout's slots: rv_bound_item) */
        mr_layout_class lc;
        (void)mr_bound_layout(&rv_bound_memo, &lc, (PyObject *)Py_TYPE(fragment));
        PyObject *const *ff = mr_layout_fields(fragment, &lc); /* (its slots, read in place) */
        *binding = ff != NULL ? Py_XNewRef(ff[MR_BF_BINDING]) : rv_state_item(fragment, &lc, MR_BF_BINDING, rp_keys[RP_BINDING]);
        instance = *binding == NULL ? NULL
                   : ff != NULL     ? Py_XNewRef(ff[MR_BF_INSTANCE_ID])
                                    : rv_state_item(fragment, &lc, MR_BF_INSTANCE_ID, rp_keys[RP_INSTANCE]);
    }
    if (*binding == NULL) return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    if (instance == NULL) goto fail;
    int failed = 0;
    if (cfg->binding_type != NULL && Py_TYPE(*binding) == cfg->binding_type) {
        *bdict = rv_runtime_state(*binding); /* its layout, or its instance dict (NULL: getattr) */
        failed = *bdict == NULL && PyErr_Occurred();
    }
    if (failed) goto fail;
    worker = rp_field(*binding, *bdict, RP_WORKER);
    if (worker == NULL) goto fail;
    device = rp_field(*binding, *bdict, RP_DEVICE);
    if (device == NULL) goto fail;
    if (cfg->plain && !(rp_plain_item(instance) && rp_plain_item(worker) && rp_plain_item(device))) cfg->plain = 0;
    PyObject *from[4] = {instance, worker, device, NULL};
    PyObject *shared = rf_memo_get(&cfg->spaces, from);
    if (shared != NULL) {
        *space = Py_NewRef(shared);
    }
    else {
        *space = PyTuple_Pack(3, instance, worker, device);
        if (*space != NULL) rf_memo_put(&cfg->spaces, from, *space);
    }
fail:
    Py_XDECREF(instance);
    Py_XDECREF(worker);
    Py_XDECREF(device);
    if (*space == NULL) {
        Py_CLEAR(*binding);
        Py_CLEAR(*bdict);
        return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    }
    return RV_OK;
}

/* ``binding.storage_address`` and ``binding.storage_nbytes`` as new references in *address and
 * *nbytes (cfg->plain cleared unless both are plain items): 0, 1 (a field missing from an exact
 * binding's dict), -1 (error). */
static int
rp_allocation_fields(PyObject *binding, PyObject *bdict, rp_config *cfg, PyObject **address, PyObject **nbytes)
{
    *address = rp_field(binding, bdict, RP_STORAGE_ADDRESS);
    if (*address == NULL) return PyErr_Occurred() ? -1 : 1;
    *nbytes = rp_field(binding, bdict, RP_STORAGE_NBYTES);
    if (*nbytes == NULL) {
        Py_CLEAR(*address);
        return PyErr_Occurred() ? -1 : 1;
    }
    if (cfg->plain && !(rp_plain_item(*address) && rp_plain_item(*nbytes))) cfg->plain = 0;
    return 0;
}

/* ``(binding.storage_address, binding.storage_nbytes)`` as a new tuple in *allocation: 0, 1 (a
 * field missing from an exact binding's dict), -1 (error). */
static int
rp_allocation(PyObject *binding, PyObject *bdict, rp_config *cfg, PyObject **allocation)
{
    *allocation = NULL;
    PyObject *address, *nbytes;
    int read = rp_allocation_fields(binding, bdict, cfg, &address, &nbytes);
    if (read != 0) return read;
    *allocation = PyTuple_Pack(2, address, nbytes);
    Py_DECREF(address);
    Py_DECREF(nbytes);
    return *allocation == NULL ? -1 : 0;
}

/* Add ``allocation`` to ``table[space]`` (a set, made on the space's first allocation). */
static int
rp_bucket_add(PyObject *table, PyObject *space, PyObject *allocation)
{
    PyObject *bucket = PyDict_GetItemWithError(table, space); /* borrowed */
    if (bucket != NULL) return PySet_Add(bucket, allocation);
    if (PyErr_Occurred()) return -1;
    bucket = PySet_New(NULL);
    if (bucket == NULL) return -1;
    int rc = PySet_Add(bucket, allocation) < 0 || PyDict_SetItem(table, space, bucket) < 0 ? -1 : 0;
    Py_DECREF(bucket);
    return rc;
}

/* Whether ``allocation`` is in ``sources[space]`` (*overlap = 1 when it is): 0, or -1 with an
 * exception. The hash first, as adding the tuple to a set fails first; of plain items (``plain``)
 * it cannot fail and runs no Python code: not taken twice then, PySet_Contains hashes it. */
static int
rp_bucket_find(PyObject *sources, PyObject *space, PyObject *allocation, int plain, int *overlap)
{
    if (!plain && PyObject_Hash(allocation) == -1) return -1;
    PyObject *bucket = PyDict_GetItemWithError(sources, space); /* borrowed */
    if (bucket == NULL) return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(bucket);
    int found = PySet_Contains(bucket, allocation);
    Py_DECREF(bucket);
    if (found > 0) *overlap = 1;
    return found < 0 ? -1 : 0;
}

/* Add ``(binding.storage_address, binding.storage_nbytes)`` to ``table[space]`` (a set). */
static int
rp_add_allocation(PyObject *table, PyObject *space, PyObject *binding, PyObject *bdict, rp_config *cfg)
{
    PyObject *allocation;
    int read = rp_allocation(binding, bdict, cfg, &allocation);
    if (read != 0) return read;
    int rc = rp_bucket_add(table, space, allocation);
    Py_DECREF(allocation);
    return rc;
}

/* A target fragment's ``(binding.storage_address, binding.storage_nbytes)`` (read as
 * rp_add_allocation reads it, the tuple hashed as adding it to a set would) looked up in
 * ``sources[space]``: *overlap set to 1 when the source allocations of its address space hold
 * it. The sets' intersection, one target allocation at a time: no set of every target
 * allocation is built (~100 B per target fragment of bind's traced peak). 0, 1 (a field missing
 * from an exact binding's dict), -1 (error). */
static int
rp_find_allocation(PyObject *sources, PyObject *space, PyObject *binding, PyObject *bdict, rp_config *cfg,
                   int *overlap)
{
    PyObject *allocation;
    int read = rp_allocation(binding, bdict, cfg, &allocation);
    if (read != 0) return read;
    int rc = rp_bucket_find(sources, space, allocation, cfg->plain, overlap);
    Py_DECREF(allocation);
    return rc;
}

/* A small identity cache of revalidate_spaces' space numbers: space tuple -> the number a dict
 * of the call gave it (both held, so an address cannot be reused meanwhile). Only spaces of
 * plain items are cached (rp_config.plain when it was put): looking such a tuple up in the dict
 * runs no Python code and gives the same number every time (the dict only gains keys, and a
 * tuple of plain items hashes and compares the same for the call), so a hit skips exactly a
 * lookup nothing could observe. The fragments share their space tuples (rp_space's shared tuples;
 * ~180 spaces at Kimi, interleaved): the lookup hashed the tuple per fragment. */
#define RP_IDS_BITS 9
#define RP_IDS (1 << RP_IDS_BITS)

typedef struct {
    PyObject **space; /* RP_IDS slots, each owned or NULL; NULL: no cache (a small call) */
    size_t *number;
} rp_ids;

/* The cache's slots (empty); 0, or -1 with MemoryError. */
static int
rp_ids_open(rp_ids *c)
{
    c->space = PyMem_Calloc(RP_IDS, sizeof(PyObject *));
    c->number = PyMem_Calloc(RP_IDS, sizeof(size_t));
    if (c->space != NULL && c->number != NULL) return 0;
    PyMem_Free(c->space);
    PyMem_Free(c->number);
    c->space = NULL;
    c->number = NULL;
    PyErr_NoMemory();
    return -1;
}

static size_t
rp_ids_slot(const PyObject *space)
{
    return (size_t)(((uint64_t)(uintptr_t)space * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - RP_IDS_BITS));
}

static int
rp_ids_get(const rp_ids *c, PyObject *space, size_t *number)
{
    if (c->space == NULL) return 0;
    size_t slot = rp_ids_slot(space);
    if (c->space[slot] != space) return 0;
    *number = c->number[slot];
    return 1;
}

static void
rp_ids_put(rp_ids *c, PyObject *space, size_t number)
{
    if (c->space == NULL) return;
    size_t slot = rp_ids_slot(space);
    PyObject *old = c->space[slot]; /* (a tuple of plain items: its release runs no Python code) */
    c->space[slot] = Py_NewRef(space);
    c->number[slot] = number;
    Py_XDECREF(old);
}

static void
rp_ids_clear(rp_ids *c)
{
    if (c->space == NULL) return;
    for (int k = 0; k < RP_IDS; k++) Py_CLEAR(c->space[k]);
    PyMem_Free(c->space);
    PyMem_Free(c->number);
    c->space = NULL;
    c->number = NULL;
}

/* The number ``ids`` gives ``space`` (a new one, its size, for a space not in it), through the
 * cache when ``plain`` (the space's items plain). 0, or -1 with an error set. */
static int
rp_space_number(PyObject *ids, rp_ids *cache, int plain, PyObject *space, size_t *number)
{
    if (plain && rp_ids_get(cache, space, number)) return 0;
    PyObject *found = PyDict_GetItemWithError(ids, space); /* borrowed */
    if (found == NULL) {
        if (PyErr_Occurred()) return -1;
        Py_ssize_t next = PyDict_Size(ids);
        if (next < 0) return -1;
        PyObject *fresh = PyLong_FromSsize_t(next);
        int failed = fresh == NULL || PyDict_SetItem(ids, space, fresh) < 0;
        Py_XDECREF(fresh);
        if (failed) return -1;
        *number = (size_t)next;
    }
    else {
        *number = PyLong_AsSize_t(found);
        if (*number == (size_t)-1 && PyErr_Occurred()) return -1;
    }
    if (plain) rp_ids_put(cache, space, *number);
    return 0;
}

/* The source allocations of revalidate_spaces in C while every space and allocation of the call
 * is plain (rp_config.plain) and every allocation is two exact ints of int64 range: each source
 * allocation is (space number, storage_address, storage_nbytes), the space numbered by equality
 * (a dict of the call's space tuples, plain items: no Python code), and a target's allocation is
 * looked up by its value. For exact ints, tuple equality of ``(address, nbytes)`` is equality of
 * the two int64 values, and spaces are equal exactly when their numbers are: the same verdict as
 * the sets of tuples (rp_add_allocation, rp_find_allocation), without a tuple and a set entry per
 * fragment (at 10^6 fragments the sets' random probes and the tuples' allocations were most of
 * the pass). On the first value outside that case the sets are built from the log, in the order
 * the sources came (the same sets, the same insertion order; the items equal exact ints), and
 * the pass goes on with them. */
#define RP_FAST_MIN_OPS 64

typedef struct {
    size_t space;
    unsigned long long address, nbytes; /* the values, as their two's complement when negative */
    unsigned char kinds;                /* bit 0 / 1: address / nbytes is above 2**63 - 1 */
} rp_alloc;

typedef struct {
    int active;          /* the C table decides (else the sets do) */
    rp_alloc *log;       /* the source allocations in the order they came */
    size_t n_log, room;
    uint64_t *slots;     /* open addressing: 1 + an index into log in the low 32 bits, the hash's
                          * high 32 bits above them (compared first: a probe past another entry
                          * reads no log line), 0 empty; a power of two */
    size_t mask;
    PyObject *numbers;   /* space tuple -> its number (exact int) */
    PyObject *spaces;    /* number -> space tuple (the first of its value) */
    rp_ids cache;
} rp_fast;

static void
rp_fast_free(rp_fast *f)
{
    PyMem_Free(f->log);
    PyMem_Free(f->slots);
    f->log = NULL;
    f->slots = NULL;
    f->n_log = f->room = f->mask = 0;
    Py_CLEAR(f->numbers);
    Py_CLEAR(f->spaces);
    rp_ids_clear(&f->cache);
    f->active = 0;
}

static uint64_t
rp_fast_hash(const rp_alloc *a)
{
    uint64_t h = (uint64_t)a->space * UINT64_C(0x9E3779B97F4A7C15);
    h ^= (uint64_t)a->address + UINT64_C(0x632BE59BD9B4E019) + (h << 6) + (h >> 2);
    h ^= (uint64_t)a->nbytes + UINT64_C(0x8CB92BA72F3D8DD7) + (h << 6) + (h >> 2);
    h ^= a->kinds;
    h ^= h >> 31;
    h *= UINT64_C(0xBF58476D1CE4E5B9);
    h ^= h >> 29;
    return h;
}

/* The slot of ``a`` (its own, or the empty one it would take), its hash given. At 10^6 logged
 * allocations each log line is a cache miss, so an occupied slot's log entry is read only when
 * its stored high hash bits match. */
static size_t
rp_fast_slot_hashed(const rp_fast *f, const rp_alloc *a, uint64_t h)
{
    size_t slot = (size_t)h & f->mask;
    const uint64_t tag = h >> 32 << 32;
    for (uint64_t s; (s = f->slots[slot]) != 0; slot = (slot + 1) & f->mask) {
        if ((s & ~(uint64_t)UINT32_MAX) != tag) continue;
        const rp_alloc *b = &f->log[(uint32_t)s - 1];
        if (b->space == a->space && b->address == a->address && b->nbytes == a->nbytes && b->kinds == a->kinds)
            break;
    }
    return slot;
}

/* The slot entry of log index k with hash h. */
static uint64_t
rp_fast_entry(size_t k, uint64_t h)
{
    return (h >> 32 << 32) | (uint64_t)(k + 1);
}

/* Room for one more logged allocation (the log doubled, the slots kept under half full). 0, or
 * -1 with MemoryError. */
static int
rp_fast_reserve(rp_fast *f)
{
    if (f->n_log >= (size_t)UINT32_MAX - 1) {
        PyErr_NoMemory();
        return -1;
    }
    if (f->n_log == f->room) {
        size_t room = f->room ? f->room * 2 : 1024;
        size_t bytes;
        if (__builtin_mul_overflow(room, sizeof(rp_alloc), &bytes)) {
            PyErr_NoMemory();
            return -1;
        }
        rp_alloc *log = PyMem_Realloc(f->log, bytes);
        if (log == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        f->log = log;
        f->room = room;
    }
    if (f->slots == NULL || 2 * (f->n_log + 1) > f->mask + 1) {
        size_t size = f->slots == NULL ? 2048 : 2 * (f->mask + 1);
        uint64_t *slots = mr_alloc_array(size, sizeof(uint64_t));
        if (slots == NULL) return -1;
        memset(slots, 0, size * sizeof(uint64_t));
        PyMem_Free(f->slots);
        f->slots = slots;
        f->mask = size - 1;
        /* (the logged allocations are distinct: each takes the first empty slot of its probe) */
        for (size_t k = 0; k < f->n_log; k++) {
            uint64_t h = rp_fast_hash(&f->log[k]);
            size_t slot = (size_t)h & f->mask;
            while (f->slots[slot] != 0) slot = (slot + 1) & f->mask;
            f->slots[slot] = rp_fast_entry(k, h);
        }
    }
    return 0;
}

/* The number of ``space`` (plain items: its hash and comparisons run no Python code), a new one
 * for a space not seen yet (listed in ``spaces``). 0, or -1 with an error set. */
static int
rp_fast_space(rp_fast *f, PyObject *space, size_t *number)
{
    Py_ssize_t before = PyDict_Size(f->numbers);
    if (rp_space_number(f->numbers, &f->cache, 1, space, number) < 0) return -1;
    if (PyDict_Size(f->numbers) != before && PyList_Append(f->spaces, space) < 0) return -1;
    return 0;
}

/* Leave the C table: every logged source allocation added to ``sources`` as
 * rp_add_allocation adds it, in the order they came. 0, or -1 with an error set. */
static int
rp_fast_leave(rp_fast *f, PyObject *sources)
{
    f->active = 0;
    for (size_t k = 0; k < f->n_log; k++) {
        const rp_alloc *a = &f->log[k];
        PyObject *space = PyList_GetItem(f->spaces, (Py_ssize_t)a->space); /* borrowed */
        if (space == NULL) return -1;
        /* (the values themselves: rp_fast_int's encoding undone) */
        PyObject *address = a->kinds & 1 ? PyLong_FromUnsignedLongLong(a->address)
                                         : PyLong_FromLongLong((long long)a->address);
        PyObject *nbytes = address == NULL ? NULL
                           : a->kinds & 2 ? PyLong_FromUnsignedLongLong(a->nbytes)
                                          : PyLong_FromLongLong((long long)a->nbytes);
        PyObject *allocation = nbytes == NULL ? NULL : PyTuple_Pack(2, address, nbytes);
        Py_XDECREF(address);
        Py_XDECREF(nbytes);
        if (allocation == NULL) return -1;
        int rc = rp_bucket_add(sources, space, allocation);
        Py_DECREF(allocation);
        if (rc < 0) return -1;
    }
    return 0;
}

/* An exact int in [-2**63, 2**64) into *out (its two's complement when negative) and *above
 * (1 when above 2**63 - 1: then *out is the value itself): 1, else 0 (no error left set). Two
 * such ints are equal exactly when their (*out, *above) are. */
static int
rp_fast_int(PyObject *value, unsigned long long *out, int *above)
{
    if (!PyLong_CheckExact(value)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (overflow == 0) {
        *out = (unsigned long long)x;
        *above = 0;
        return 1;
    }
    if (overflow < 0) return 0;
    unsigned long long u = PyLong_AsUnsignedLongLong(value);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = u;
    *above = 1;
    return 1;
}

/* rp_add_allocation (side 0) / rp_find_allocation (side 1) through the C table while it is
 * active (leaving it first, rp_fast_leave, for an allocation or space outside its case): 0, 1
 * (a field missing from an exact binding's dict), -1 (error). The fields are read once, in
 * rp_allocation's order. */
static int
rp_fast_allocation(rp_fast *f, int side, PyObject *sources, PyObject *space, PyObject *binding, PyObject *bdict,
                   rp_config *cfg, int *overlap)
{
    PyObject *address, *nbytes;
    int read = rp_allocation_fields(binding, bdict, cfg, &address, &nbytes);
    if (read != 0) return read;
    int rc = -1, above_address = 0, above_nbytes = 0;
    rp_alloc a;
    if (cfg->plain && rp_fast_int(address, &a.address, &above_address) && rp_fast_int(nbytes, &a.nbytes, &above_nbytes)) {
        a.kinds = (unsigned char)(above_address | (above_nbytes << 1));
        if (rp_fast_space(f, space, &a.space) < 0) goto done;
        uint64_t h = rp_fast_hash(&a);
        if (side == 0) {
            if (rp_fast_reserve(f) < 0) goto done;
            size_t slot = rp_fast_slot_hashed(f, &a, h);
            if (f->slots[slot] == 0) {
                f->log[f->n_log] = a;
                f->slots[slot] = rp_fast_entry(f->n_log, h);
                f->n_log++;
            }
        }
        else if (f->slots != NULL && f->slots[rp_fast_slot_hashed(f, &a, h)] != 0) {
            *overlap = 1;
        }
        rc = 0;
        goto done;
    }
    /* outside the table's case: the sets from here on, this allocation included */
    if (rp_fast_leave(f, sources) < 0) goto done;
    PyObject *allocation = PyTuple_Pack(2, address, nbytes);
    if (allocation == NULL) goto done;
    rc = side == 0 ? rp_bucket_add(sources, space, allocation)
                   : rp_bucket_find(sources, space, allocation, cfg->plain, overlap);
    Py_DECREF(allocation);
done:
    Py_DECREF(address);
    Py_DECREF(nbytes);
    return rc;
}

/* An exact non-negative int below 2**64; 0 with *ok = 0 for anything else. */
static int
rp_u64(PyObject *value, uint64_t *out, int *ok)
{
    *ok = 0;
    if (!PyLong_CheckExact(value)) return 0;
    unsigned long long x = PyLong_AsUnsignedLongLong(value);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return 0;
    }
    *out = (uint64_t)x;
    *ok = 1;
    return 0;
}

/* The quick §12.6 extent of one target operation: *ok = 1 with [*begin, *end) when the
 * operation writes its whole (alias-free) fragment at a representable address range. */
static int
rp_target_extent(PyObject *fragment, PyObject *binding, PyObject *bdict, const rp_config *cfg, const rv_boxes *boxes,
                 Py_ssize_t i, uint64_t *begin, uint64_t *end, int *ok)
{
    PyObject *placement = NULL, *aliases = NULL, *offset = NULL, *shape = NULL, *whole = NULL;
    PyObject *address = NULL, *nbytes = NULL, *pdict = NULL;
    int rc = -1;
    *ok = 0;
    placement = rv_bound_item(fragment, MR_BF_PLACEMENT, rp_keys[RP_PLACEMENT]);
    if (placement == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    int failed = 0;
    /* an exact placement in an accepted C-owned layout: its fields from its slots (an empty one
     * declines, as a key missing from the dict-backed class's state did) */
    int pf_slots = cfg->placement_type != NULL && Py_TYPE(placement) == cfg->placement_type
                   && mr_pf_fields(placement) != NULL;
    pdict = pf_slots ? NULL : rp_exact_dict(placement, cfg->placement_type, &failed);
    if (failed) goto done;
    aliases = pf_slots ? rv_pf_item(placement, MR_PF_ALIASES, rp_keys[RP_ALIASES]) : rp_field(placement, pdict, RP_ALIASES);
    if (aliases == NULL) { /* missing from an exact placement's dict: not the quick case */
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    int has_aliases = PyObject_IsTrue(aliases);
    if (has_aliases < 0) goto done;
    if (has_aliases) {
        rc = 0;
        goto done;
    }
    offset = pf_slots ? rv_pf_item(placement, MR_PF_GLOBAL_OFFSET, rp_keys[RP_OFFSET]) : rp_field(placement, pdict, RP_OFFSET);
    shape = offset == NULL ? NULL
            : pf_slots ? rv_pf_item(placement, MR_PF_LOCAL_SHAPE, rp_keys[RP_SHAPE])
                       : rp_field(placement, pdict, RP_SHAPE);
    if (shape == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    PyObject *box = rv_box_handle(boxes, i);
    if (box == NULL) goto done;
    int partial;
    if (boxes->list != NULL) { /* the box object itself, compared as it was */
        whole = PyTuple_Pack(2, offset, shape);
        if (whole == NULL) goto done;
        partial = rs_compare(box, whole, Py_NE);
    }
    else { /* what ``(overlap_offset, overlap_shape) != (offset, shape)`` compares: each item */
        PyObject *box_offset = NULL, *box_shape = NULL;
        if (!rv_box_parts(boxes, box, &box_offset, &box_shape)) {
            rc = 0;
            goto done;
        }
        Py_INCREF(box_offset); /* held across the comparisons (they may run Python code) */
        Py_INCREF(box_shape);
        partial = PyObject_RichCompareBool(box_offset, offset, Py_EQ); /* (the tuple's item rule) */
        if (partial == 1) partial = PyObject_RichCompareBool(box_shape, shape, Py_EQ);
        Py_DECREF(box_offset);
        Py_DECREF(box_shape);
        if (partial >= 0) partial = !partial;
    }
    if (partial < 0) goto done;
    if (partial) {
        rc = 0;
        goto done;
    }
    address = rp_field(binding, bdict, RP_ADDRESS);
    nbytes = address == NULL ? NULL : rp_field(binding, bdict, RP_NBYTES);
    if (nbytes == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    uint64_t a = 0, n = 0;
    int a_ok = 0, n_ok = 0;
    if (rp_u64(address, &a, &a_ok) < 0 || rp_u64(nbytes, &n, &n_ok) < 0) goto done;
    rc = 0;
    if (!a_ok || !n_ok || n == 0 || mr_add_u64(a, n, end) < 0) goto done;
    *begin = a;
    *ok = 1;
done:
    Py_XDECREF(pdict);
    Py_XDECREF(placement);
    Py_XDECREF(aliases);
    Py_XDECREF(offset);
    Py_XDECREF(shape);
    Py_XDECREF(whole);
    Py_XDECREF(address);
    Py_XDECREF(nbytes);
    return rc;
}

PyDoc_STRVAR(revalidate_spaces_doc,
"revalidate_spaces(frags, source_of, target_of, boxes, check_physical, binding_type=None,\n"
"                  placement_type=None)\n"
"--\n\n"
"Spec §12.5 (in-place protection) and the common case of §12.6 for the TransferPlan\n"
"revalidation fast path; the arguments are the fast path's own tables. Returns ``False``\n"
"when a source and a target allocation ``(storage_address, storage_nbytes)`` coincide in\n"
"one address space ``(instance_id, worker_id, device)`` or anything is unexpected (malformed\n"
"tables, a fragment without its binding or instance id: the fast path declines); otherwise\n"
"``True`` when\n"
"``check_physical`` is false or every operation writes a whole, alias-free target fragment\n"
"of its own with pairwise disjoint byte extents per address space (the physical sweep has\n"
"nothing to report), else ``None`` (the sweep must decide). ``TypeError`` for wrong\n"
"container types. ``binding_type`` / ``placement_type`` (RuntimeBindingFragment,\n"
"PlacementFragment): exact ones are read through their instance dicts (a field missing\n"
"there declines). ``boxes`` may also be the plan's operations tuple (non-empty, its first item\n"
"in TransferRegion's C-owned layout): each operation's box is then read from its region's own\n"
"fields (a region outside that layout, or an empty field, declines).\n"
"Positions may also be packed: an exact bytes of one native int32 per operation.");

static PyObject *
revalidate_spaces(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *frags_arg, *source_arg, *target_arg, *boxes_arg, *binding_arg = Py_None, *placement_arg = Py_None;
    int check_physical;
    if (!mr_parse_vector(args, nargs, "O!OOOp|OO:revalidate_spaces", &PyList_Type, &frags_arg, &source_arg, &target_arg,
                          &boxes_arg, &check_physical, &binding_arg, &placement_arg)) {
        return NULL;
    }
    if (!rs_positions_arg(source_arg) || !rs_positions_arg(target_arg)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_spaces: positions must be lists or packed positions");
        return NULL;
    }
    if (!rv_boxes_arg(boxes_arg)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_spaces: boxes must be a list or the operations tuple");
        return NULL;
    }
    if ((binding_arg != Py_None && !PyType_Check(binding_arg))
        || (placement_arg != Py_None && !PyType_Check(placement_arg))) {
        PyErr_SetString(PyExc_TypeError, "revalidate_spaces: binding_type and placement_type must be types or None");
        return NULL;
    }
    rp_config cfg = {binding_arg == Py_None ? NULL : (PyTypeObject *)binding_arg,
                     placement_arg == Py_None ? NULL : (PyTypeObject *)placement_arg,
                     {NULL, 0, 0},
                     1};
    PyObject *result = NULL, *sources = NULL, *space_ids = NULL;
    int overlap = 0; /* a target allocation is a source allocation of its address space */
    /* private copies of the position lists (packed positions are immutable: read in place);
     * ``frags`` (one item per fragment, the fast path's own list) is read in place, each
     * fragment held while it is read (a list resized meanwhile gives IndexError: an error, which
     * the caller turns into the rules' decision), as revalidate_side reads it: no copy at
     * bind's peak */
    PyObject *frags = Py_NewRef(frags_arg);
    PyObject *source_of = PyBytes_CheckExact(source_arg) ? Py_NewRef(source_arg) : PySequence_List(source_arg);
    PyObject *target_of = PyBytes_CheckExact(target_arg) ? Py_NewRef(target_arg) : PySequence_List(target_arg);
    rv_boxes boxes = {NULL, NULL, {NULL, 0}};
    rp_fast fast = {0, NULL, 0, 0, NULL, 0, NULL, NULL, {NULL, NULL}};
    rp_ids quick_ids = {NULL, NULL}; /* space_ids' cache (from RP_FAST_MIN_OPS operations) */
    unsigned char *seen = NULL;
    rp_extent *extents = NULL;
    PyObject *held = NULL; /* the fragment being read */
    if (frags == NULL || source_of == NULL || target_of == NULL) goto done;
    Py_ssize_t n_frags = PyList_Size(frags), n_ops = rs_positions_size(target_of);
    if (n_frags < 0 || PyErr_Occurred()) goto done;
    if (n_ops < 0) {
        result = Py_NewRef(Py_False); /* packed positions of no whole count: decline */
        goto done;
    }
    int opened = rv_boxes_open(&boxes, boxes_arg, n_ops);
    if (opened == RV_ERROR) goto done;
    if (rs_positions_size(source_of) != n_ops || opened == RV_DECLINE) {
        result = Py_NewRef(Py_False); /* unexpected: decline */
        goto done;
    }
    seen = mr_alloc_array((size_t)n_frags, 1);
    extents = mr_alloc_array((size_t)n_ops, sizeof(rp_extent));
    sources = PyDict_New();
    space_ids = PyDict_New();
    if (seen == NULL || extents == NULL || sources == NULL || space_ids == NULL) goto done;
    if (rf_memo_init(&cfg.spaces, (size_t)n_frags) < 0) goto done;
    /* (the C table from RP_FAST_MIN_OPS operations: a small plan's few sets cost less) */
    if (n_ops >= RP_FAST_MIN_OPS) {
        fast.numbers = PyDict_New();
        fast.spaces = PyList_New(0);
        if (fast.numbers == NULL || fast.spaces == NULL || rp_ids_open(&fast.cache) < 0 || rp_ids_open(&quick_ids) < 0)
            goto done;
        fast.active = 1;
    }
    int quick = check_physical;
    /* Sources (distinct fragments): allocations per address space; then targets, each looked up
     * in its space's source allocations. */
    for (int side = 0; side < 2; side++) {
        PyObject *side_of = side == 0 ? source_of : target_of;
        memset(seen, 0, (size_t)n_frags);
        for (Py_ssize_t i = 0; i < n_ops; i++) {
            Py_ssize_t p = rs_position(side_of, i, n_frags);
            if (p < 0) {
                result = Py_NewRef(Py_False); /* unexpected: decline */
                goto done;
            }
            if (seen[p]) {
                if (side == 1) quick = 0; /* one fragment written by two operations */
                continue;
            }
            seen[p] = 1;
            PyObject *fragment = PyList_GetItem(frags, p), *space = NULL, *binding = NULL, *bdict = NULL;
            if (fragment == NULL) goto done;
            Py_INCREF(fragment); /* held while it is read (released below, or at done) */
            held = fragment;
            int rc = rp_space(fragment, &cfg, &space, &binding, &bdict);
            if (rc == RV_ERROR) goto done;
            if (rc == RV_DECLINE) {
                result = Py_NewRef(Py_False); /* unexpected: decline */
                goto done;
            }
            int added = fast.active ? rp_fast_allocation(&fast, side, sources, space, binding, bdict, &cfg, &overlap)
                        : side == 0 ? rp_add_allocation(sources, space, binding, bdict, &cfg)
                                    : rp_find_allocation(sources, space, binding, bdict, &cfg, &overlap);
            int failed = added < 0;
            if (added > 0) { /* a field missing from an exact binding's dict: decline */
                Py_DECREF(space);
                Py_DECREF(binding);
                Py_XDECREF(bdict);
                result = Py_NewRef(Py_False);
                goto done;
            }
            if (!failed && side == 1 && quick) {
                int ok = 0;
                failed = rp_target_extent(fragment, binding, bdict, &cfg, &boxes, i, &extents[i].begin,
                                          &extents[i].end, &ok) < 0;
                if (!failed && !ok) quick = 0;
                if (!failed && ok) {
                    /* (cached while the call's spaces are plain: cfg.plain, read after this
                     * space's items were) */
                    failed = rp_space_number(space_ids, &quick_ids, cfg.plain, space, &extents[i].space) < 0;
                }
            }
            Py_DECREF(space);
            Py_DECREF(binding);
            Py_XDECREF(bdict);
            Py_CLEAR(held);
            if (failed) goto done;
        }
    }
    if (overlap) { /* a source and a target allocation shared in one address space */
        result = Py_NewRef(Py_False);
        goto done;
    }
    if (!check_physical) {
        result = Py_NewRef(Py_True);
        goto done;
    }
    if (quick && n_ops > 1) {
        qsort(extents, (size_t)n_ops, sizeof(rp_extent), rp_compare_extent);
        for (Py_ssize_t i = 1; i < n_ops && quick; i++) {
            if (extents[i].space == extents[i - 1].space && extents[i].begin < extents[i - 1].end) quick = 0;
        }
    }
    result = Py_NewRef(quick ? Py_True : Py_None);
done:
    rf_memo_free(&cfg.spaces);
    rp_fast_free(&fast);
    rp_ids_clear(&quick_ids);
    PyMem_Free(seen);
    PyMem_Free(extents);
    Py_XDECREF(sources);
    Py_XDECREF(space_ids);
    Py_XDECREF(held);
    Py_XDECREF(frags);
    Py_XDECREF(source_of);
    Py_XDECREF(target_of);
    rv_boxes_close(&boxes);
    return result;
}

/* --- revalidate_coverage ---------------------------------------------------------------- */

enum {
    RC_PARTS,
    RC_PARTICIPANT,
    RC_PLACEMENT,
    RC_EVIDENCE,
    RC_ATTESTATION,
    RC_PFID,
    RC_WORKER,
    RC_RANK,
    RC_PLACEMENT_ID,
    RC_DIGEST,
    RC_INSTANCE,
    RC_LEASE_ID,
    RC_RUNTIME_LEASE,
    RC_EVIDENCE_IDS,
    RC_FRAGMENT_IDS,
    RC_FRAGMENTS,
    RC_OFFSET,
    RC_SHAPE,
    RC_DIGEST_STATE,
    RC_NNAMES
};

static const char *const rc_names[RC_NNAMES] = {
    "parts", "participant_id", "placement", "evidence", "attestation", "placement_fragment_id", "worker_id",
    "rank", "placement_id", "digest", "instance_id", "lease_id", "runtime_lease_id", "evidence_ids_by_worker",
    "fragment_ids", "fragments", "global_offset", "local_shape", "placement_digest",
};

static PyObject *rc_keys[RC_NNAMES];

/* ``getattr(getattr(object, first), second)`` as a new reference (NULL with an error set). */
static PyObject *
rc_attr2(PyObject *object, int first, int second)
{
    PyObject *middle = pd_getattr(object, rc_keys[first]);
    if (middle == NULL) return NULL;
    PyObject *value = pd_getattr(middle, rc_keys[second]);
    Py_DECREF(middle);
    return value;
}

/* ``attestation.placement is placement or attestation.placement == placement``: 1, 0, -1. */
static int
rc_same_placement(PyObject *attestation, PyObject *placement)
{
    PyObject *attested = pd_getattr(attestation, rc_keys[RC_PLACEMENT]);
    if (attested == NULL) return -1;
    int same = attested == placement ? 1 : rs_compare(attested, placement, Py_EQ);
    Py_DECREF(attested);
    return same;
}

/* ``bool(a != b)`` for two new references, which it releases: 1, 0 or -1. */
static int
rc_differs(PyObject *a, PyObject *b)
{
    int differs = (a == NULL || b == NULL) ? -1 : rs_compare(a, b, Py_NE);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return differs;
}

/* Append ``value`` to ``table[key]`` (a list created on first use). */
static int
rc_append(PyObject *table, PyObject *key, PyObject *value)
{
    PyObject *bucket = PyDict_GetItemWithError(table, key); /* borrowed */
    if (bucket != NULL) return PyList_Append(bucket, value);
    if (PyErr_Occurred()) return -1;
    bucket = PyList_New(0);
    if (bucket == NULL) return -1;
    int rc = PyList_Append(bucket, value) < 0 || PyDict_SetItem(table, key, bucket) < 0 ? -1 : 0;
    Py_DECREF(bucket);
    return rc;
}

/* ``bool(a != b)`` for two ranks, as new references which it releases: 1, 0 or -1. When both
 * are exactly ``rank_type`` (the ParallelRank dataclass, whose ``__eq__`` compares the field
 * values dp, tp, pp, ep in order) with the four fields in their instance dicts as exact ints,
 * the field values are compared directly (ints: no identity or NaN subtlety, so the result is
 * the dataclass equality's); anything else goes through Python's ``!=``. */
static int
rc_rank_differs(PyObject *a, PyObject *b, PyTypeObject *rank_type, uint64_t *code_epoch)
{
    if (a == NULL || b == NULL || rank_type == NULL || Py_TYPE(a) != rank_type || Py_TYPE(b) != rank_type) {
        (*code_epoch)++; /* (Python's != may run Python code) */
        return rc_differs(a, b);
    }
    int differs = -2; /* undecided: the generic comparison decides */
    /* the four fields' values taken in the walks that check the dicts (pd_instance_values), the
     * ones not stored under the interned name itself looked up; one rank object (an executor
     * shares its part's) is walked once: the same dict, and no code runs in between */
    PyObject *taken_a[4], *taken_b[4];
    PyObject *da = pd_instance_values(a, rs_keys + RS_DP, NULL, 4, taken_a);
    PyObject *db = NULL;
    if (da != NULL && b == a) {
        db = Py_NewRef(da);
        for (int k = 0; k < 4; k++) taken_b[k] = taken_a[k];
    }
    else if (da != NULL) {
        db = pd_instance_values(b, rs_keys + RS_DP, NULL, 4, taken_b);
    }
    if (db != NULL) {
        differs = 0;
        for (int k = 0; k < 4 && differs == 0; k++) {
            PyObject *va = taken_a[k] != NULL ? taken_a[k] : PyDict_GetItemWithError(da, rs_keys[RS_DP + k]);
            PyObject *vb = va == NULL ? NULL
                           : taken_b[k] != NULL ? taken_b[k]
                                                : PyDict_GetItemWithError(db, rs_keys[RS_DP + k]); /* borrowed */
            if (vb == NULL || !PyLong_CheckExact(va) || !PyLong_CheckExact(vb)) {
                differs = PyErr_Occurred() ? -1 : -2;
                break;
            }
            int equal = PyObject_RichCompareBool(va, vb, Py_EQ);
            differs = equal < 0 ? -1 : !equal;
        }
    }
    else {
        differs = -1;
    }
    Py_XDECREF(da);
    Py_XDECREF(db);
    if (differs == -2) {
        (*code_epoch)++;
        return rc_differs(a, b);
    }
    Py_DECREF(a);
    Py_DECREF(b);
    return differs;
}

/* The code epoch of the executor rows. Each row reads an attestation's placement and evidence,
 * the evidence's participant, instance and lease ids, its part's rank and its view's
 * evidence_ids_by_worker. Read one at a time (pd_getattr: a plain-dict walk and a generic getattr
 * each), that is 11 dict walks per row. When an object's class is proved inert for the names
 * read (rc_class_inert: metaclass exactly type, the generic attribute lookup, no descriptor
 * under those names in the MRO, so the instance dict is the attribute's source), the object's
 * values are all taken in the one walk that checks its dict plain (rc_take), and used while no
 * Python code can have run since. ``code_epoch`` moves before every point of the rows where it
 * may: a comparison of operands not known inert (rc_inert_pair), a getattr of a class not proved
 * inert, a probe of a table not known to hold only exact keys. A proof, a table check or a taken
 * value of another epoch is made again (a hook run at such a point can patch a class, edit a dict
 * through ``__dict__`` or reach the call's own tables through the collector). */
enum { RC_ROLE_ATTESTATION, RC_ROLE_EVIDENCE, RC_ROLE_PART, RC_ROLE_VIEW, RC_NROLES };

typedef struct {
    uint64_t code_epoch;
    PyTypeObject *inert[RC_NROLES]; /* per role: the class last proved inert (compared, never read) */
    uint64_t inert_at[RC_NROLES];   /* ... and the code_epoch of that proof (0: none) */
    uint64_t parts_at;              /* code_epoch at which ``parts``' keys were found all exact strs */
    uint64_t attested_at;           /* ... ``attested``'s keys all exact ints */
    uint64_t used_at;               /* ... ``used``'s items all exact ints */
    uint64_t object_at;             /* ... ``object``'s dict found plain (rs_class_attrs_known) */
    uint64_t sets_at;               /* code_epoch at which ``seen`` and ``participants`` were made
                                     * (empty): the rows add only exact strs (pairs of them) to
                                     * them while the epoch has not moved */
} rc_ctx;

/* The names each role reads (rc_keys indices) and whether they are slots (RS_ATTR_SLOT). */
static const int rc_role_names[RC_NROLES][3] = {
    {RC_PLACEMENT, RC_EVIDENCE, -1},
    {RC_PARTICIPANT, RC_INSTANCE, RC_LEASE_ID},
    {RC_RANK, -1, -1},
    {RC_EVIDENCE_IDS, -1, -1},
};
static const int rc_role_count[RC_NROLES] = {2, 3, 1, 1};

/* 1 when reading the role's names from an instance of ``type`` runs no Python code and (plain
 * roles) returns the instance dict's value when it holds the name: metaclass exactly type, the
 * generic attribute lookup (no ``__getattribute__`` / ``__getattr__``), and rs_class_attrs over
 * the MRO (no descriptor under a plain name; a member slot for the view's name). Remembered for
 * the call while the epoch does not move. 0 otherwise. Runs no Python code. */
static int
rc_class_inert(rc_ctx *ctx, int role, PyTypeObject *type)
{
    if (ctx->inert[role] == type && ctx->inert_at[role] == ctx->code_epoch) return 1;
    if (Py_TYPE((PyObject *)type) != &PyType_Type
        || PyType_GetSlot(type, Py_tp_getattro) != (void *)PyObject_GenericGetAttr) {
        return 0;
    }
    PyObject *names[3];
    for (int k = 0; k < rc_role_count[role]; k++) names[k] = rc_keys[rc_role_names[role][k]];
    int want = role == RC_ROLE_VIEW ? RS_ATTR_SLOT : RS_ATTR_PLAIN;
    PyObject *plain_object = ctx->object_at == ctx->code_epoch ? (PyObject *)&PyBaseObject_Type : NULL;
    int inert = rs_class_attrs_known((PyObject *)type, names, rc_role_count[role], want, &plain_object);
    if (plain_object != NULL) ctx->object_at = ctx->code_epoch;
    if (!inert) return 0;
    ctx->inert[role] = type;
    ctx->inert_at[role] = ctx->code_epoch;
    return 1;
}

/* The role's attributes of ``obj`` (a plain role) as new references in values[]: 1 when taken
 * from its instance dict in the walk that checks it plain (class inert at this epoch, every name
 * stored), the same values a generic getattr returns, with no Python code; 0 when not taken (the
 * caller reads them as before: pd_getattr, moving the epoch), values all NULL; -1 with an error. */
static int
rc_take(rc_ctx *ctx, int role, PyObject *obj, PyObject **values)
{
    const int n = rc_role_count[role];
    for (int k = 0; k < n; k++) values[k] = NULL;
    if (obj == NULL || !rc_class_inert(ctx, role, Py_TYPE(obj))) return 0;
    PyObject *taken[3];
    PyObject *dict = pd_instance_values(obj, rc_keys, rc_role_names[role], n, taken);
    if (dict == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear(); /* (no plain dict: pd_getattr raises the same error) */
        return 0;
    }
    int rc = 1;
    for (int k = 0; k < n && rc == 1; k++) {
        /* a key equal to the name but another object: looked up (plain: no code) */
        PyObject *value = taken[k] != NULL ? taken[k] : PyDict_GetItemWithError(dict, rc_keys[rc_role_names[role][k]]);
        if (value == NULL) rc = PyErr_Occurred() ? -1 : 0; /* (not stored: a class value or AttributeError) */
        else values[k] = Py_NewRef(value);
    }
    Py_DECREF(dict);
    if (rc != 1) {
        for (int k = 0; k < n; k++) Py_CLEAR(values[k]);
    }
    return rc;
}

/* 1 when comparing a with b (==, !=) runs no Python code: both exact strs, exact ints or None,
 * or both exact tuples of such items. */
static int
rc_inert_scalar(PyObject *o)
{
    return PyUnicode_CheckExact(o) || PyLong_CheckExact(o) || o == Py_None;
}

static int
rc_inert_pair(PyObject *a, PyObject *b)
{
    if (a == NULL || b == NULL) return 1; /* (nothing compared) */
    if (rc_inert_scalar(a) && rc_inert_scalar(b)) return 1;
    if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b)) return 0;
    for (int t = 0; t < 2; t++) {
        PyObject *tuple = t == 0 ? a : b;
        for (Py_ssize_t k = 0; k < PyTuple_Size(tuple); k++) {
            if (!rc_inert_scalar(PyTuple_GetItem(tuple, k))) return 0;
        }
    }
    return 1;
}

/* rc_differs that moves the epoch unless the comparison runs no Python code. */
static int
rc_ne(rc_ctx *ctx, PyObject *a, PyObject *b)
{
    if (!rc_inert_pair(a, b)) ctx->code_epoch++;
    return rc_differs(a, b);
}

/* 1 when ``table`` is an exact dict whose keys are all exact strs (kind 0), all exact ints
 * (kind 1), or an exact set whose items are all exact ints (kind 2), found at this epoch (*at).
 * A probe of it with a key of that kind then compares exact values only: no Python code. 0 when
 * not (the caller moves the epoch). Runs no Python code. */
static int
rc_table_inert(rc_ctx *ctx, PyObject *table, int kind, uint64_t *at)
{
    if (*at == ctx->code_epoch) return 1;
    int inert = 1;
    if (kind == 2) {
        if (!PyAnySet_CheckExact(table)) return 0;
        PyObject *iter = PyObject_GetIter(table); /* (an exact set's iterator: no code) */
        if (iter == NULL) {
            PyErr_Clear();
            return 0;
        }
        PyObject *item;
        while (inert && (item = PyIter_Next(iter)) != NULL) {
            inert = PyLong_CheckExact(item);
            Py_DECREF(item);
        }
        Py_DECREF(iter);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            inert = 0;
        }
    }
    else {
        if (!PyDict_CheckExact(table)) return 0;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (inert && PyDict_Next(table, &pos, &key, &value)) {
            inert = kind == 0 ? PyUnicode_CheckExact(key) : PyLong_CheckExact(key);
        }
    }
    if (inert) *at = ctx->code_epoch;
    return inert;
}

/* One row's reads of its attestation (rc_row_*): the values taken at epoch ``at`` (owned;
 * usable while the epoch is still ``at``), each NULL when not taken. */
typedef struct {
    uint64_t at;
    PyObject *att[2]; /* placement, evidence */
    PyObject *ev[3];  /* participant_id, instance_id, lease_id */
    int ev_tried;
} rc_row;

static void
rc_row_clear(rc_row *r)
{
    for (int k = 0; k < 2; k++) Py_CLEAR(r->att[k]);
    for (int k = 0; k < 3; k++) Py_CLEAR(r->ev[k]);
}

/* ``attestation.placement is placement or attestation.placement == placement`` (1, 0, -1): the
 * taken value when there is one (the first read of the row: nothing ran since the walk), else
 * rc_same_placement (the epoch moved before it). */
static int
rc_row_same_placement(rc_ctx *ctx, rc_row *r, PyObject *attestation, PyObject *placement)
{
    if (r->att[0] == NULL || r->at != ctx->code_epoch) {
        ctx->code_epoch++;
        return rc_same_placement(attestation, placement);
    }
    if (r->att[0] == placement) return 1;
    ctx->code_epoch++; /* (the placements' __eq__) */
    return rs_compare(r->att[0], placement, Py_EQ);
}

/* ``attestation.evidence.<name>`` (k: 0 participant_id, 1 instance_id, 2 lease_id) as a new
 * reference: the values taken while the epoch has not moved since the attestation's walk, else
 * rc_attr2 (moving the epoch). */
static PyObject *
rc_row_evidence(rc_ctx *ctx, rc_row *r, PyObject *attestation, int k)
{
    static const int second[3] = {RC_PARTICIPANT, RC_INSTANCE, RC_LEASE_ID};
    if (r->att[1] != NULL && r->at == ctx->code_epoch) {
        if (!r->ev_tried) {
            r->ev_tried = 1;
            if (rc_take(ctx, RC_ROLE_EVIDENCE, r->att[1], r->ev) < 0) return NULL;
        }
        if (r->ev[k] != NULL) return Py_NewRef(r->ev[k]);
    }
    ctx->code_epoch++;
    return rc_attr2(attestation, RC_EVIDENCE, second[k]);
}

/* One executor row of the target side (spec §12.7 executor checks); RV_OK / RV_DECLINE / RV_ERROR. */
static int
rc_executor(rc_ctx *ctx, PyObject *row, PyObject *placement, PyObject *placement_id, PyObject *digest,
            PyObject *parts, PyObject *seen, PyObject *participants, PyObject *attested, PyObject *used,
            PyTypeObject *rank_type)
{
    /* the executor's fields, all read right after its instance dict is checked plain: the checks
     * below compare and hash them, which may run Python code (an operand that is not exact), and
     * no probe of that dict may follow such code (plain_dict.h) */
    enum { E_PARTICIPANT, E_WORKER, E_ATTESTATION, E_RANK, E_PLACEMENT_ID, E_DIGEST, E_INSTANCE, E_LEASE,
           E_FRAGMENT_IDS, E_N };
    static const int names[E_N] = {RC_PARTICIPANT, RC_WORKER,   RC_ATTESTATION,  RC_RANK,        RC_PLACEMENT_ID,
                                   RC_DIGEST_STATE, RC_INSTANCE, RC_RUNTIME_LEASE, RC_FRAGMENT_IDS};
    PyObject *field[E_N] = {NULL};
    PyObject *pair = NULL, *id = NULL, *ids = NULL, *part = NULL, *part_rank = NULL, *entry = NULL;
    rc_row reads = {0, {NULL, NULL}, {NULL, NULL, NULL}, 0};
    const uint64_t epoch_at_start = ctx->code_epoch;
    int rc = RV_DECLINE;
    if (!PyTuple_CheckExact(row) || PyTuple_Size(row) != 3) goto done;
    PyObject *estate = PyTuple_GetItem(row, 0);
    /* (an executor's instance dict from revalidate_views: checked again, code may have run since;
     * the fields' values taken in that walk, pd_plain_values, the others looked up) */
    PyObject *taken[E_N];
    if (estate == NULL || !pd_plain_values(estate, rc_keys, names, E_N, taken)) goto done;
    for (int k = 0; k < E_N; k++) {
        field[k] = taken[k] != NULL ? Py_NewRef(taken[k]) : rv_item(estate, rc_keys[names[k]]);
        if (field[k] == NULL && PyErr_Occurred()) goto done;
    }
    PyObject *participant = field[E_PARTICIPANT], *worker = field[E_WORKER];
    if (participant == NULL || worker == NULL) goto done;
    /* (the sets hold only exact strs while the epoch is the one they were made at) */
    int plain_ids = PyUnicode_CheckExact(participant) && PyUnicode_CheckExact(worker);
    if (!plain_ids || ctx->sets_at != ctx->code_epoch) ctx->code_epoch++;
    pair = PyTuple_Pack(2, participant, worker);
    if (pair == NULL) goto done;
    int present = PySet_Contains(seen, pair);
    if (present != 0 || PySet_Add(seen, pair) < 0 || PySet_Add(participants, participant) < 0) goto done;
    if (!plain_ids || !rc_table_inert(ctx, parts, 0, &ctx->parts_at)) ctx->code_epoch++;
    part = Py_XNewRef(PyDict_GetItemWithError(parts, participant));
    if (part == NULL) goto done;
    PyObject *attestation = field[E_ATTESTATION];
    if (attestation == NULL || attestation == Py_None) goto done;
    /* The checks of ``_validate_bound_target_coverage``, in its order (each rc_differs releases
     * one reference of each operand: the fields are passed as new ones). */
#define RC_FIELD(k) Py_XNewRef(field[(k)])
    int taken_rank = rc_take(ctx, RC_ROLE_PART, part, &part_rank);
    if (taken_rank < 0) goto done;
    if (taken_rank == 0) {
        ctx->code_epoch++; /* (a getattr of a class not proved inert) */
        part_rank = pd_getattr(part, rc_keys[RC_RANK]);
    }
    int bad = rc_rank_differs(RC_FIELD(E_RANK), Py_XNewRef(part_rank), rank_type, &ctx->code_epoch);
    if (bad == 0) bad = rc_ne(ctx, RC_FIELD(E_PLACEMENT_ID), Py_NewRef(placement_id));
    if (bad == 0) bad = rc_ne(ctx, RC_FIELD(E_DIGEST), Py_NewRef(digest));
    if (bad == 0) {
        /* the attestation's placement and evidence, and the evidence's ids, each taken in one walk
         * of its dict (rc_take) when its class is inert, while nothing runs in between */
        reads.at = ctx->code_epoch;
        if (rc_take(ctx, RC_ROLE_ATTESTATION, attestation, reads.att) < 0) goto done;
        int same = rc_row_same_placement(ctx, &reads, attestation, placement);
        bad = same < 0 ? -1 : !same;
    }
    if (bad == 0) bad = rc_ne(ctx, rc_row_evidence(ctx, &reads, attestation, 0), Py_NewRef(participant));
    if (bad == 0) bad = rc_ne(ctx, rc_row_evidence(ctx, &reads, attestation, 1), RC_FIELD(E_INSTANCE));
    if (bad == 0) bad = rc_ne(ctx, rc_row_evidence(ctx, &reads, attestation, 2), RC_FIELD(E_LEASE));
#undef RC_FIELD
    if (bad != 0) goto done;
    id = PyLong_FromVoidPtr(attestation);
    if (id == NULL) goto done;
    if (!rc_table_inert(ctx, attested, 1, &ctx->attested_at)) ctx->code_epoch++;
    entry = Py_XNewRef(PyDict_GetItemWithError(attested, id));
    if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_Size(entry) != 3) goto done;
    PyObject *view = PyTuple_GetItem(entry, 2);
    if (view == NULL) goto done;
    /* (a slot of a view class proved inert: its member getter, no code) */
    if (!rc_class_inert(ctx, RC_ROLE_VIEW, Py_TYPE(view))) ctx->code_epoch++;
    ids = pd_getattr(view, rc_keys[RC_EVIDENCE_IDS]);
    if (ids == NULL || !PyDict_CheckExact(ids)) goto done;
    if (!PyUnicode_CheckExact(worker) || !pd_plain_keys(ids)) ctx->code_epoch++;
    PyObject *expected = PyDict_GetItemWithError(ids, worker); /* borrowed */
    if (expected == NULL && PyErr_Occurred()) goto done;
    if (field[E_FRAGMENT_IDS] == NULL) goto done;
    PyObject *empty = expected == NULL ? PyTuple_New(0) : Py_NewRef(expected);
    if (rc_ne(ctx, Py_NewRef(field[E_FRAGMENT_IDS]), empty) != 0) goto done;
    Py_CLEAR(id);
    id = PyLong_FromVoidPtr(estate);
    if (id == NULL) goto done;
    if (!rc_table_inert(ctx, used, 2, &ctx->used_at)) ctx->code_epoch++;
    if (PySet_Contains(used, id) != 1) goto done;
    rc = RV_OK;
done:
    if (rc == RV_DECLINE && PyErr_Occurred()) rc = RV_ERROR;
    for (int k = 0; k < E_N; k++) Py_XDECREF(field[k]);
    rc_row_clear(&reads);
    Py_XDECREF(pair);
    Py_XDECREF(id);
    Py_XDECREF(ids);
    Py_XDECREF(part);
    Py_XDECREF(part_rank);
    Py_XDECREF(entry);
    /* Python code ran in this row (the epoch moved): it may have dropped the dicts' references
     * to values the row still held, so a release above may have run a finalizer */
    if (ctx->code_epoch != epoch_at_start) ctx->code_epoch++;
    return rc;
}

/* Every fragment of the executor participants' parts is one operation box equal to its own box
 * (the common case); RV_DECLINE when any is not (the exact cover check in Python decides). */
static int
rc_whole_fragments(PyObject *participants, PyObject *parts, PyObject *boxes_by_fragment)
{
    PyObject *ordered = PySequence_List(participants);
    if (ordered == NULL) return RV_ERROR;
    int rc = RV_ERROR;
    if (PyList_Sort(ordered) < 0) goto done;
    for (Py_ssize_t i = 0; i < PyList_Size(ordered); i++) {
        PyObject *participant = PyList_GetItem(ordered, i);
        PyObject *part = participant == NULL ? NULL : PyDict_GetItemWithError(parts, participant);
        if (part == NULL) goto done;
        PyObject *fragments = pd_getattr(part, rc_keys[RC_FRAGMENTS]);
        PyObject *list = fragments == NULL ? NULL : PySequence_List(fragments);
        Py_XDECREF(fragments);
        if (list == NULL) goto done;
        for (Py_ssize_t k = 0; k < PyList_Size(list); k++) {
            PyObject *fragment = PyList_GetItem(list, k);
            PyObject *offset = pd_getattr(fragment, rc_keys[RC_OFFSET]);
            PyObject *shape = offset == NULL ? NULL : pd_getattr(fragment, rc_keys[RC_SHAPE]);
            PyObject *pfid = shape == NULL ? NULL : pd_getattr(fragment, rc_keys[RC_PFID]);
            PyObject *member = pfid == NULL ? NULL : PyTuple_Pack(2, participant, pfid);
            int whole = -1;
            if (member != NULL) {
                PyObject *boxes = PyDict_GetItemWithError(boxes_by_fragment, member); /* borrowed */
                whole = 0;
                if (boxes == NULL) {
                    if (PyErr_Occurred()) whole = -1;
                }
                else if (boxes != Py_None) { /* the only box of the fragment (None: several) */
                    PyObject *box = boxes;
                    int truthy = PyObject_IsTrue(offset);
                    if (truthy < 0 || !PyTuple_CheckExact(box) || PyTuple_Size(box) != 2) {
                        whole = truthy < 0 ? -1 : 0;
                    }
                    else if (truthy) {
                        whole = rs_compare(PyTuple_GetItem(box, 0), offset, Py_EQ);
                        if (whole == 1) whole = rs_compare(PyTuple_GetItem(box, 1), shape, Py_EQ);
                    }
                }
            }
            Py_XDECREF(offset);
            Py_XDECREF(shape);
            Py_XDECREF(pfid);
            Py_XDECREF(member);
            if (whole != 1) {
                Py_DECREF(list);
                rc = whole < 0 ? RV_ERROR : RV_DECLINE;
                goto done;
            }
        }
        Py_DECREF(list);
    }
    rc = RV_OK;
done:
    Py_DECREF(ordered);
    return rc;
}

/* Identity keying of §12.7's per-fragment boxes (the common case; the string-keyed rule
 * above decides everything else).
 *
 * ``_validate_bound_target_coverage`` files every operation's box under the member
 * ``(participant, fragment.placement.placement_fragment_id)`` and then asks, for every fragment
 * F of every executor participant q's part, whether the member ``(q, F.placement_fragment_id)``
 * holds exactly one box, equal to F's own (a whole-fragment write). Here the boxes are filed
 * under the placement fragment OBJECT G of the operation's bound fragment instead (with the
 * operation participant and the count of boxes), and each F looks up its own object. That
 * decides what the string keys decide when, for every F met:
 *  - F is exactly ``fragment_type`` (PlacementFragment, a dataclass without descriptors for
 *    its fields: its ``global_offset``, ``local_shape`` and ``placement_fragment_id`` are
 *    its instance dict's values, read once; a subclass, a missing field, a non-str id
 *    declines to the string rule);
 *  - F's object was filed by exactly one operation, under a participant equal to q (exact
 *    strs; an object filed by two operations declines, whatever their participants);
 *  - the ids of the fragments met for one participant are distinct (exact strs, a set per
 *    participant: two distinct objects of one part forged to one id decline, as the string rule
 *    would merge their boxes);
 *  - every filed object is met by some F (a filed object no F is would, under the string keys,
 *    join the member of an F of the same participant and id; the count rules that out).
 * Then each member ``(q, F.id)`` of the string rule holds only the boxes filed under objects G
 * whose participant equals q and whose id equals F.id; every G is some met F' with q' == q,
 * and F'.id == F.id within one participant forces F' is F: the member holds F's single box.
 * Conversely a member the string rule finds whole is found whole here or the call declines
 * (the string rule then decides). Values are read once per object in this call, as the
 * earlier passes read them; the objects are held for the call (no address reused). */
enum { RC_ID_OK = 0, RC_ID_DECLINE = 1, RC_ID_FALLBACK = 2, RC_ID_ERROR = -1 };

/* One filed placement fragment object: everything the whole-fragment check reads of it in one
 * entry (32 bytes), found by the object's address through the table's index. */
typedef struct {
    PyObject *object;      /* owned */
    PyObject *participant; /* borrowed: the call's by_attestation pairs hold it */
    PyObject *box;         /* borrowed box handle (rv_box_handle): the call's boxes hold it */
    uint32_t count;        /* operations filed under the object, counted up to 2 (only "one" is read) */
    uint32_t met;          /* 1 once a part's fragment was this object */
} rc_slot;

/* The filed objects in filing order (entries), found through an open-addressing index of
 * entry numbers + 1 (0: an empty index slot) with 32 more bits of the object's address hash, a
 * power of two of them at most two thirds used: 8 bytes per index slot and one entry per object
 * instead of an entry per slot (this table drove bind's peak RSS at Kimi size: 40 MiB for 562k
 * operations, 22 with 4-byte slots, 26 now). A probe reads the entry of a slot only when the
 * tags match: the collisions of a probe sequence cost no entry read (a cache miss each, the
 * entries being in filing order and the lookups in part order). */
typedef struct {
    uint32_t entry; /* entry number + 1 (0: an empty slot) */
    uint32_t tag;   /* rc_tag of the entry's object: a probe reads an entry only on a tag match */
} rc_index_slot;

typedef struct {
    rc_index_slot *index;
    rc_slot *entries;
    size_t mask;
    Py_ssize_t n; /* objects filed */
} rc_filed;

/* 32 bits of an address's hash that are not its index slot's (mr_ptr_slot takes the low bits of
 * the same product; index tables stay below 2^32 slots). */
static inline uint32_t
rc_tag(const void *p)
{
    return (uint32_t)((((uintptr_t)p >> 4) * (uintptr_t)0x9E3779B97F4A7C15ULL) >> 32);
}

/* For at most n_ops objects: 0, or -1 with an exception (MemoryError; ValueError when n_ops
 * does not fit the 32-bit entry numbers: the caller then files by string instead). */
static int
rc_filed_init(rc_filed *f, Py_ssize_t n_ops)
{
    f->index = NULL;
    f->entries = NULL;
    f->mask = 0;
    f->n = 0;
    size_t cap = 8;
    if (n_ops < 0 || (uint64_t)n_ops >= (uint64_t)UINT32_MAX || (size_t)n_ops > SIZE_MAX / 4) {
        PyErr_SetString(PyExc_ValueError, "revalidate_coverage: too many operations for the identity table");
        return -1;
    }
    while (cap < (size_t)n_ops + (size_t)n_ops / 2 + 1) cap *= 2;
    f->index = mr_alloc_array(cap, sizeof(rc_index_slot));
    f->entries = f->index == NULL ? NULL : mr_alloc_array((size_t)n_ops + 1, sizeof(rc_slot));
    if (f->entries == NULL) {
        PyMem_Free(f->index);
        f->index = NULL;
        return -1;
    }
    memset(f->index, 0, cap * sizeof(rc_index_slot));
    f->mask = cap - 1;
    return 0;
}

static void
rc_filed_free(rc_filed *f)
{
    if (f->entries != NULL) {
        for (Py_ssize_t k = 0; k < f->n; k++) Py_DECREF(f->entries[k].object);
    }
    PyMem_Free(f->entries);
    PyMem_Free(f->index);
    f->entries = NULL;
    f->index = NULL;
}

/* The entry of ``object`` (NULL when it was not filed); *at: its index slot, or the empty one
 * where it would go. */
static rc_slot *
rc_find(const rc_filed *f, const void *object, size_t *at)
{
    size_t k = mr_ptr_slot(object, f->mask);
    const uint32_t tag = rc_tag(object);
    uint32_t e;
    while ((e = f->index[k].entry) != 0
           && (f->index[k].tag != tag || (const void *)f->entries[e - 1].object != object)) {
        k = (k + 1) & f->mask;
    }
    *at = k;
    return e == 0 ? NULL : &f->entries[e - 1];
}

/* Files a box under the placement fragment object (a new reference, which it takes) and its
 * participant. An object filed again only counts (its participant stays the first one's; a
 * count above one declines to the string rule, whatever the participants). The caller files
 * at most as many objects as it sized the table for. */
static void
rc_file(rc_filed *f, PyObject *object, PyObject *participant, PyObject *box)
{
    size_t at = 0;
    rc_slot *slot = rc_find(f, object, &at);
    if (slot != NULL) {
        Py_DECREF(object);
        if (slot->count < 2) slot->count++;
        return;
    }
    slot = &f->entries[f->n];
    slot->object = object;
    slot->participant = participant;
    slot->box = box;
    slot->count = 1;
    slot->met = 0;
    f->n++;
    f->index[at].entry = (uint32_t)f->n; /* entry number + 1 (n < UINT32_MAX: rc_filed_init) */
    f->index[at].tag = rc_tag(object);
}

/* 1 when two exact strs are equal (identical or same text), 0 when not, -1 (no error set):
 * anything else (the string rule decides). */
static int
rc_same_text(PyObject *a, PyObject *b)
{
    if (a == b) return 1;
    if (!PyUnicode_CheckExact(a) || !PyUnicode_CheckExact(b)) return -1;
    int order = PyUnicode_Compare(a, b);
    if (order == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return order == 0;
}

/* The distinct placement fragment ids met in one part (the string rule's members of one
 * participant): an open-addressing table of (hash, id) over the part's held ids, sized for
 * the part up front (at most half full), compared as a set of exact strs compares them (hash,
 * then identity or equal text: no Python code runs). */
typedef struct {
    Py_hash_t hash;
    PyObject *text; /* borrowed: rc_part's held ids hold it */
} rc_id_slot;

/* One part's working arrays (rc_whole_by_identity): per fragment of the part its filed entry
 * number + 1 (0: not filed), the ids read so far (owned), and the id table. */
typedef struct {
    uint32_t *entry_of;
    PyObject **held;
    Py_ssize_t n_held;
    rc_id_slot *ids;
    size_t ids_mask;
} rc_part;

static void
rc_part_free(rc_part *w)
{
    if (w->held != NULL) {
        for (Py_ssize_t k = 0; k < w->n_held; k++) Py_DECREF(w->held[k]);
    }
    PyMem_Free(w->entry_of);
    PyMem_Free(w->held);
    PyMem_Free(w->ids);
    w->entry_of = NULL;
    w->held = NULL;
    w->ids = NULL;
    w->n_held = 0;
    w->ids_mask = 0;
}

/* For a part of n fragments: 0, or -1 with MemoryError. */
static int
rc_part_init(rc_part *w, Py_ssize_t n)
{
    size_t cap = 8;
    w->entry_of = NULL;
    w->held = NULL;
    w->ids = NULL;
    w->n_held = 0;
    w->ids_mask = 0;
    if (n < 0 || (size_t)n > SIZE_MAX / 4 / sizeof(rc_id_slot)) {
        PyErr_NoMemory();
        return -1;
    }
    while (cap < 2 * (size_t)n) cap *= 2;
    w->entry_of = mr_alloc_array((size_t)n + 1, sizeof(uint32_t));
    w->held = w->entry_of == NULL ? NULL : mr_alloc_array((size_t)n + 1, sizeof(PyObject *));
    w->ids = w->held == NULL ? NULL : mr_alloc_array(cap, sizeof(rc_id_slot));
    if (w->ids == NULL) {
        rc_part_free(w);
        return -1;
    }
    memset(w->ids, 0, cap * sizeof(rc_id_slot));
    w->ids_mask = cap - 1;
    return 0;
}

/* Adds the exact str ``text`` (held by the caller's w->held) to the part's ids: 1 when it was
 * not there, 0 when an equal id was, -1 (no error set) when unsure (the string rule decides). */
static int
rc_part_add_id(rc_part *w, PyObject *text)
{
    Py_hash_t hash = PyObject_Hash(text); /* exact str: its own hash, no Python code */
    if (hash == -1) {
        PyErr_Clear();
        return -1;
    }
    size_t k = (size_t)hash & w->ids_mask;
    while (w->ids[k].text != NULL) {
        if (w->ids[k].hash == hash) {
            int same = rc_same_text(w->ids[k].text, text);
            if (same != 0) return same < 0 ? -1 : 0;
        }
        k = (k + 1) & w->ids_mask;
    }
    w->ids[k].hash = hash;
    w->ids[k].text = text;
    return 1;
}

/* The entry number + 1 of the first index slot on ``object``'s probe sequence whose tag is the
 * object's, 0 when none is (then the object was not filed). A candidate only: the caller checks
 * that entry's object (rc_entry_check). Reads the index only (no entry, not the object). */
static uint32_t
rc_entry_of(const rc_filed *f, const void *object)
{
    size_t k = mr_ptr_slot(object, f->mask);
    const uint32_t tag = rc_tag(object);
    uint32_t e;
    while ((e = f->index[k].entry) != 0 && f->index[k].tag != tag) k = (k + 1) & f->mask;
    return e;
}

/* The filed entry of ``object`` from rc_entry_of's candidate: the candidate's entry when it is
 * the object's, else rc_find's answer (another object with the same tag came first). NULL when
 * the object was not filed. */
static rc_slot *
rc_entry_check(const rc_filed *f, const void *object, uint32_t candidate)
{
    if (candidate == 0) return NULL;
    if ((const void *)f->entries[candidate - 1].object == object) return &f->entries[candidate - 1];
    size_t at = 0;
    return rc_find(f, object, &at);
}

/* Hints only (nothing is decided on them; no Python code runs): for the part's fragment
 * k + RC_AHEAD_FAR its object, for k + RC_AHEAD_MID the objects its check reads (offset, shape,
 * id) and its filed box, for k + RC_AHEAD_NEAR the box's offset and shape. */
#define RC_AHEAD_FAR 12
#define RC_AHEAD_MID 6
#define RC_AHEAD_NEAR 3
/* rc_whole_by_identity's first pass: index slots RC_AHEAD_INDEX ahead. */
#define RC_AHEAD_INDEX 16
static void
rc_prefetch_ahead(PyObject *list, Py_ssize_t k, Py_ssize_t n, const rc_filed *f, const rv_boxes *boxes,
                  const uint32_t *entry_of)
{
    if (k + RC_AHEAD_FAR < n) {
        PyObject *far = PyList_GetItem(list, k + RC_AHEAD_FAR);
        __builtin_prefetch(far);
        __builtin_prefetch((const char *)far + 64);
        if (entry_of[k + RC_AHEAD_FAR] != 0) __builtin_prefetch(&f->entries[entry_of[k + RC_AHEAD_FAR] - 1]);
    }
    if (k + RC_AHEAD_MID < n) {
        /* the fragment (in the cache now): its filed box, and when it is of the placement
         * layout class, the objects its check reads (offset, shape, id) */
        PyObject *near = PyList_GetItem(list, k + RC_AHEAD_MID);
        uint32_t e = entry_of[k + RC_AHEAD_MID];
        if (e != 0 && f->entries[e - 1].object == near) {
            PyObject *box = f->entries[e - 1].box;
            __builtin_prefetch(box);
            __builtin_prefetch((const char *)box + 64);
        }
        if (near != NULL && rv_pf_memo.memo.cls != NULL && (PyObject *)Py_TYPE(near) == rv_pf_memo.memo.cls) {
            PyObject *const *fields = (PyObject *const *)((mr_layout_object *)near)->fields;
            for (int k2 = 0; k2 < 3; k2++) {
                static const int which[3] = {MR_PF_GLOBAL_OFFSET, MR_PF_LOCAL_SHAPE, MR_PF_PLACEMENT_FRAGMENT_ID};
                if (fields[which[k2]] != NULL) __builtin_prefetch(fields[which[k2]]);
            }
        }
        else {
            rs_prefetch_dict(list, k + RC_AHEAD_MID);
        }
    }
    if (k + RC_AHEAD_NEAR < n && entry_of[k + RC_AHEAD_NEAR] != 0) {
        /* the box's region (in the cache now): its offset and shape */
        const rc_slot *slot = &f->entries[entry_of[k + RC_AHEAD_NEAR] - 1];
        if (slot->object == PyList_GetItem(list, k + RC_AHEAD_NEAR) && slot->box != NULL && boxes->list == NULL) {
            PyObject *const *fields = mr_layout_fields(slot->box, &boxes->rl);
            if (fields != NULL && fields[MR_RG_OVERLAP_OFFSET] != NULL) __builtin_prefetch(fields[MR_RG_OVERLAP_OFFSET]);
            if (fields != NULL && fields[MR_RG_OVERLAP_SHAPE] != NULL) __builtin_prefetch(fields[MR_RG_OVERLAP_SHAPE]);
        }
    }
}

/* ``rc_whole_fragments`` on the boxes filed by object (see above): RC_ID_OK, RC_ID_DECLINE (a
 * fragment not written whole by one box), RC_ID_FALLBACK (the string rule decides) or
 * RC_ID_ERROR. Per part: first every fragment's filed entry, by address in list order (the
 * index slots asked for ahead; nothing of the fragments read), then the checks in list order,
 * each fragment's as before (the entry table is this call's own memory: Python code run by a
 * comparison cannot change it). */
static int
rc_whole_by_identity(PyObject *participants, PyObject *parts, rc_filed *f, PyTypeObject *fragment_type,
                     const rv_boxes *boxes)
{
    PyObject *ordered = PySequence_List(participants);
    if (ordered == NULL) return RC_ID_ERROR;
    PyObject *list = NULL;
    rc_part w = {NULL, NULL, 0, NULL, 0};
    int rc = RC_ID_ERROR;
    Py_ssize_t met = 0;
    if (PyList_Sort(ordered) < 0) goto done;
    for (Py_ssize_t i = 0; i < PyList_Size(ordered); i++) {
        PyObject *participant = PyList_GetItem(ordered, i);
        PyObject *part = participant == NULL ? NULL : PyDict_GetItemWithError(parts, participant);
        if (part == NULL) goto done;
        PyObject *fragments = pd_getattr(part, rc_keys[RC_FRAGMENTS]);
        list = fragments == NULL ? NULL : PySequence_List(fragments);
        Py_XDECREF(fragments);
        if (list == NULL) goto done;
        const Py_ssize_t n = PyList_Size(list);
        rc_part_free(&w);
        if (n < 0 || rc_part_init(&w, n) < 0) goto done;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (k + RC_AHEAD_INDEX < n) {
                __builtin_prefetch(&f->index[mr_ptr_slot(PyList_GetItem(list, k + RC_AHEAD_INDEX), f->mask)]);
            }
            w.entry_of[k] = rc_entry_of(f, PyList_GetItem(list, k));
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *fragment = PyList_GetItem(list, k); /* borrowed; ``list`` holds it */
            if (fragment == NULL) goto done;
            rc_prefetch_ahead(list, k, n, f, boxes, w.entry_of);
            rc = RC_ID_FALLBACK;
            if (Py_TYPE(fragment) != fragment_type) goto done;
            rc_slot *slot = rc_entry_check(f, fragment, w.entry_of[k]);
            if (slot == NULL || slot->count != 1) goto done;
            if (rc_same_text(slot->participant, participant) != 1) goto done; /* the string rule decides */
            /* (its instance state: its layout's slots, rv_pf_item) */
            PyObject *offset = rv_pf_item(fragment, MR_PF_GLOBAL_OFFSET, rc_keys[RC_OFFSET]);
            PyObject *shape = offset == NULL ? NULL : rv_pf_item(fragment, MR_PF_LOCAL_SHAPE, rc_keys[RC_SHAPE]);
            PyObject *pfid = shape == NULL ? NULL : rv_pf_item(fragment, MR_PF_PLACEMENT_FRAGMENT_ID, rc_keys[RC_PFID]);
            if (PyErr_Occurred()) {
                Py_XDECREF(offset);
                Py_XDECREF(shape);
                Py_XDECREF(pfid);
                rc = RC_ID_ERROR;
                goto done;
            }
            int whole = -2; /* -2: fallback */
            if (pfid != NULL && PyUnicode_CheckExact(pfid)) {
                w.held[w.n_held++] = pfid; /* the part's ids hold it (at most n: one per fragment) */
                int added = rc_part_add_id(&w, pfid);
                pfid = NULL;
                if (added == 1) { /* an id not met before in this part */
                    PyObject *box_offset = NULL, *box_shape = NULL;
                    int truthy = PyObject_IsTrue(offset);
                    whole = 0;
                    if (truthy < 0 || !rv_box_parts(boxes, slot->box, &box_offset, &box_shape)) {
                        whole = truthy < 0 ? -1 : 0;
                    }
                    else if (truthy) {
                        Py_INCREF(box_offset); /* held across the comparisons */
                        Py_INCREF(box_shape);
                        whole = rs_compare(box_offset, offset, Py_EQ);
                        if (whole == 1) whole = rs_compare(box_shape, shape, Py_EQ);
                        Py_DECREF(box_offset);
                        Py_DECREF(box_shape);
                    }
                }
            }
            if (whole == -2 && PyErr_Occurred()) whole = -1;
            Py_XDECREF(offset);
            Py_XDECREF(shape);
            Py_XDECREF(pfid);
            if (whole != 1) {
                rc = whole == -1 ? RC_ID_ERROR : (whole == 0 ? RC_ID_DECLINE : RC_ID_FALLBACK);
                goto done;
            }
            /* (the slot is this call's memory, where it was: the comparisons' Python code
             * cannot reach it) */
            if (!slot->met) {
                slot->met = 1;
                met++;
            }
        }
        Py_CLEAR(list);
    }
    /* Every filed object met: no other object's boxes can share a member of a met fragment. */
    rc = met == f->n ? RC_ID_OK : RC_ID_FALLBACK;
done:
    if (rc != RC_ID_ERROR && PyErr_Occurred()) rc = RC_ID_ERROR;
    Py_XDECREF(list);
    rc_part_free(&w);
    Py_DECREF(ordered);
    return rc;
}

/* Hints for the operations loop of revalidate_coverage while it files by identity (nothing
 * decided, no Python code, nothing held; another class is skipped): the target fragment of
 * operation i + 16, and the identity table slot of the placement fragment of operation i + 8
 * (its bound fragment in the cache by then). */
static void
rc_ops_hint(PyObject *frags, PyObject *target_of, Py_ssize_t n_frags, Py_ssize_t n_ops, Py_ssize_t i,
            const rc_filed *f)
{
    if (i + 16 < n_ops) {
        Py_ssize_t q = rs_position(target_of, i + 16, n_frags);
        PyObject *fragment = q < 0 ? NULL : PyList_GetItem(frags, q);
        if (fragment != NULL) {
            __builtin_prefetch(fragment);
            __builtin_prefetch((const char *)fragment + 64); /* (its attestation slot) */
        }
        else if (q >= 0) {
            PyErr_Clear();
        }
    }
    if (i + 8 < n_ops) {
        Py_ssize_t q = rs_position(target_of, i + 8, n_frags);
        PyObject *fragment = q < 0 ? NULL : PyList_GetItem(frags, q);
        if (fragment == NULL) {
            PyErr_Clear();
            return;
        }
        PyObject *placement = rv_hint_placement(fragment);
        if (placement != NULL) {
            __builtin_prefetch(&f->index[mr_ptr_slot(placement, f->mask)]);
            __builtin_prefetch(placement, 1); /* (its reference count, taken when filed) */
        }
    }
}

PyDoc_STRVAR(revalidate_coverage_doc,
"revalidate_coverage(placement, frags, target_of, boxes, rows, attested, used, rank_type=None,\n"
"                    fragment_type=None)\n"
"--\n\n"
"Bound target coverage (spec §12.7) for the TransferPlan revalidation fast path, in the\n"
"common case where every fragment of the executor participants' parts is written by exactly\n"
"one operation box equal to the fragment's own box; the arguments are the fast path's own\n"
"tables (``bound_contracts._fast_target_coverage``, which it mirrors). Returns ``True`` when\n"
"the rule holds, ``None`` when unsure (the Python version decides). ``TypeError`` for wrong\n"
"container types. ``rank_type`` (ParallelRank) lets exact ranks be compared field by field;\n"
"``fragment_type`` (PlacementFragment) lets the boxes be filed by placement fragment object\n"
"(identity) instead of by ``(participant, placement_fragment_id)``, with the same answer.\n"
"``boxes`` may also be the plan's operations tuple (as revalidate_spaces).\n"
"Positions may also be packed: an exact bytes of one native int32 per operation.");

static PyObject *
revalidate_coverage(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *placement, *frags_arg, *target_arg, *boxes_arg, *rows_arg, *attested, *used, *rank_arg = Py_None;
    PyObject *fragment_arg = Py_None;
    if (!mr_parse_vector(args, nargs, "OO!OOO!O!O!|OO:revalidate_coverage", &placement, &PyList_Type, &frags_arg,
                          &target_arg, &boxes_arg, &PyList_Type, &rows_arg, &PyDict_Type, &attested, &PySet_Type,
                          &used, &rank_arg, &fragment_arg)) {
        return NULL;
    }
    if (!rs_positions_arg(target_arg)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_coverage: target_of must be a list or packed positions");
        return NULL;
    }
    if (!rv_boxes_arg(boxes_arg)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_coverage: boxes must be a list or the operations tuple");
        return NULL;
    }
    if (rank_arg != Py_None && !PyType_Check(rank_arg)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_coverage: rank_type must be a type or None");
        return NULL;
    }
    if (fragment_arg != Py_None && !PyType_Check(fragment_arg)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_coverage: fragment_type must be a type or None");
        return NULL;
    }
    PyTypeObject *rank_type = rank_arg == Py_None ? NULL : (PyTypeObject *)rank_arg;
    PyTypeObject *fragment_type = fragment_arg == Py_None ? NULL : (PyTypeObject *)fragment_arg;
    /* Boxes filed by placement fragment object (see rc_whole_by_identity) while by_identity. */
    int by_identity = fragment_type != NULL;
    rc_filed filed = {NULL, NULL, 0, 0};
    PyObject *result = NULL, *parts = NULL, *part_list = NULL, *boxes_by_fragment = NULL, *op_participants = NULL;
    PyObject *seen = NULL, *participants = NULL, *by_attestation = NULL, *placement_id = NULL, *digest = NULL;
    PyObject *frags = PySequence_List(frags_arg);
    PyObject *target_of = PyBytes_CheckExact(target_arg) ? Py_NewRef(target_arg) : PySequence_List(target_arg);
    PyObject *rows = PySequence_List(rows_arg);
    rv_boxes boxes = {NULL, NULL, {NULL, 0}};
    /* Attestation pointer -> index into by_attestation, a list of (attestation, participant)
     * pairs that holds both for the call. */
    rv_table attestation_of = {NULL, NULL, 0};
    int rc = RV_ERROR;
    if (frags == NULL || target_of == NULL || rows == NULL) goto done;
    Py_ssize_t n_frags = PyList_Size(frags), n_ops = rs_positions_size(target_of);
    if (PyErr_Occurred()) goto done;
    if (n_ops < 0) { /* packed positions of no whole count */
        rc = RV_DECLINE;
        goto done;
    }
    if ((size_t)n_ops > SIZE_MAX / 4) goto done;
    rc = rv_boxes_open(&boxes, boxes_arg, n_ops);
    if (rc != RV_OK) goto done;
    rc = RV_ERROR;
    /* sized for a few attestations, grown as they come (rv_table_reserve): one per participant,
     * not one per operation */
    if (rv_table_init(&attestation_of, 16) < 0) goto done;
    if (by_identity && (uint64_t)n_ops >= (uint64_t)UINT32_MAX) by_identity = 0; /* filed by string */
    if (by_identity && rc_filed_init(&filed, n_ops) < 0) goto done;
    parts = PyDict_New();
    boxes_by_fragment = PyDict_New();
    op_participants = PySet_New(NULL);
    by_attestation = PyList_New(0);
    if (parts == NULL || boxes_by_fragment == NULL || op_participants == NULL || by_attestation == NULL) {
        goto done;
    }
    {
        PyObject *seq = pd_getattr(placement, rc_keys[RC_PARTS]);
        part_list = seq == NULL ? NULL : PySequence_List(seq);
        Py_XDECREF(seq);
        if (part_list == NULL) goto done;
        for (Py_ssize_t k = 0; k < PyList_Size(part_list); k++) {
            PyObject *part = PyList_GetItem(part_list, k);
            PyObject *pid = part == NULL ? NULL : pd_getattr(part, rc_keys[RC_PARTICIPANT]);
            int failed = pid == NULL || PyDict_SetItem(parts, pid, part) < 0;
            Py_XDECREF(pid);
            if (failed) goto done;
        }
    }
    /* Operations: the participant of every target's attestation and the boxes per fragment
     * (by object while by_identity; by (participant, id) in the string pass). */
string_pass:
    for (Py_ssize_t i = 0; i < n_ops; i++) {
        if (by_identity) rc_ops_hint(frags, target_of, n_frags, n_ops, i, &filed);
        Py_ssize_t p = rs_position(target_of, i, n_frags);
        if (p < 0) {
            rc = RV_DECLINE;
            goto done;
        }
        PyObject *fragment = PyList_GetItem(frags, p);
        PyObject *attestation = rv_bound_item(fragment, MR_BF_ATTESTATION, rc_keys[RC_ATTESTATION]);
        if (attestation == NULL) {
            rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
            goto done;
        }
        PyObject *participant = NULL;
        Py_ssize_t known_at = rs_lookup(&attestation_of, attestation);
        if (known_at >= 0) {
            PyObject *pair = PyList_GetItem(by_attestation, known_at);
            participant = pair == NULL ? NULL : Py_NewRef(PyTuple_GetItem(pair, 1));
        }
        else {
            int same = rc_same_placement(attestation, placement);
            if (same == 1) {
                participant = rc_attr2(attestation, RC_EVIDENCE, RC_PARTICIPANT);
                int known = participant == NULL ? -1 : PyDict_Contains(parts, participant);
                PyObject *pair = known == 1 ? PyTuple_Pack(2, attestation, participant) : NULL;
                Py_ssize_t index = PyList_Size(by_attestation);
                /* every operation of this attestation has this participant: added once */
                if (pair == NULL || index < 0 || PyList_Append(by_attestation, pair) < 0
                    || PySet_Add(op_participants, participant) < 0) {
                    Py_CLEAR(participant);
                }
                else if (rv_table_reserve(&attestation_of, (size_t)index + 1) < 0) {
                    Py_CLEAR(participant); /* MemoryError */
                }
                else {
                    rs_store(&attestation_of, attestation, index); /* held by by_attestation */
                }
                Py_XDECREF(pair);
            }
        }
        Py_DECREF(attestation);
        if (participant == NULL) {
            rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
            goto done;
        }
        PyObject *placement_fragment = rv_bound_item(fragment, MR_BF_PLACEMENT, rc_keys[RC_PLACEMENT]);
        if (by_identity) {
            /* participant is held by its by_attestation pair for the call */
            if (placement_fragment != NULL) rc_file(&filed, placement_fragment, participant, rv_box_handle(&boxes, i));
            Py_DECREF(participant);
            if (placement_fragment == NULL) {
                rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
                goto done;
            }
            continue;
        }
        PyObject *pfid = placement_fragment == NULL ? NULL : pd_getattr(placement_fragment, rc_keys[RC_PFID]);
        PyObject *member = pfid == NULL ? NULL : PyTuple_Pack(2, participant, pfid);
        int failed = member == NULL;
        if (!failed) {
            /* ``boxes_by_fragment[member]``: the fragment's only box, or None for several. */
            int present = PyDict_Contains(boxes_by_fragment, member);
            PyObject *box = present == 0 ? rv_box_new(&boxes, i) : NULL;
            failed = present < 0 || (present == 0 && box == NULL)
                     || PyDict_SetItem(boxes_by_fragment, member, present ? Py_None : box) < 0;
            Py_XDECREF(box);
        }
        Py_DECREF(participant);
        Py_XDECREF(placement_fragment);
        Py_XDECREF(pfid);
        Py_XDECREF(member);
        if (failed) {
            rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
            goto done;
        }
    }
    if (placement_id != NULL) goto string_whole; /* the string pass after the identity one */
    placement_id = pd_getattr(placement, rc_keys[RC_PLACEMENT_ID]);
    digest = placement_id == NULL ? NULL : pd_getattr(placement, rc_keys[RC_DIGEST]);
    if (digest == NULL) goto done;
    /* (made here, after the digest property ran: see rc_ctx's sets_at) */
    seen = PySet_New(NULL);
    participants = PySet_New(NULL);
    if (seen == NULL || participants == NULL) goto done;
    rc_ctx ctx = {.code_epoch = 1};
    ctx.sets_at = ctx.code_epoch;
    for (Py_ssize_t r = 0; r < PyList_Size(rows); r++) {
        rc = rc_executor(&ctx, PyList_GetItem(rows, r), placement, placement_id, digest, parts, seen, participants,
                         attested, used, rank_type);
        if (rc != RV_OK) goto done;
    }
    rc = RV_DECLINE;
    int equal = rs_compare(participants, op_participants, Py_EQ);
    if (equal < 0) {
        rc = RV_ERROR;
        goto done;
    }
    if (!equal) goto done;
    if (by_identity) {
        int id_rc = rc_whole_by_identity(participants, parts, &filed, fragment_type, &boxes);
        if (id_rc != RC_ID_FALLBACK) {
            rc = id_rc == RC_ID_OK ? RV_OK : (id_rc == RC_ID_DECLINE ? RV_DECLINE : RV_ERROR);
            goto done;
        }
        by_identity = 0; /* the string pass files the boxes by (participant, id) */
        goto string_pass;
    }
string_whole:
    rc = rc_whole_fragments(participants, parts, boxes_by_fragment);
done:
    if (rc == RV_OK) {
        result = Py_NewRef(Py_True);
    }
    else if (rc == RV_DECLINE && !PyErr_Occurred()) {
        result = Py_NewRef(Py_None);
    }
    Py_XDECREF(parts);
    Py_XDECREF(part_list);
    Py_XDECREF(boxes_by_fragment);
    Py_XDECREF(op_participants);
    Py_XDECREF(seen);
    Py_XDECREF(participants);
    Py_XDECREF(by_attestation);
    rv_table_free(&attestation_of);
    rc_filed_free(&filed);
    Py_XDECREF(placement_id);
    Py_XDECREF(digest);
    Py_XDECREF(frags);
    Py_XDECREF(target_of);
    rv_boxes_close(&boxes);
    Py_XDECREF(rows);
    return result;
}

/* --- attested_index -------------------------------------------------------------------- */

/* An exact str item of an instance dict (new reference); NULL with no error set otherwise. */
static PyObject *
ai_text(PyObject *dict, PyObject *name)
{
    PyObject *value = rv_item(dict, name);
    if (value != NULL && !PyUnicode_CheckExact(value)) Py_CLEAR(value);
    return value;
}

/* Append ``value`` to the list ``table[key]`` (created on first use). */
static int
ai_append(PyObject *table, PyObject *key, PyObject *value)
{
    PyObject *bucket = PyDict_GetItemWithError(table, key); /* borrowed */
    if (bucket != NULL) return PyList_Append(bucket, value);
    if (PyErr_Occurred()) return -1;
    bucket = PyList_New(1);
    if (bucket == NULL) return -1;
    PyList_SetItem(bucket, 0, Py_NewRef(value)); /* a new list of one item: cannot fail */
    int rc = PyDict_SetItem(table, key, bucket);
    Py_DECREF(bucket);
    return rc;
}

/* Every list of ``table`` sorted (exact str items: no Python code runs) and replaced by a tuple. */
static int
ai_freeze(PyObject *table)
{
    Py_ssize_t pos = 0;
    PyObject *key, *bucket;
    while (PyDict_Next(table, &pos, &key, &bucket)) {
        if (PyList_Sort(bucket) < 0) return -1;
        PyObject *frozen = PyList_AsTuple(bucket);
        if (frozen == NULL) return -1;
        /* Replacing the value of an existing key does not resize the dict: iteration is safe. */
        int rc = PyDict_SetItem(table, key, frozen);
        Py_DECREF(frozen);
        if (rc < 0) return -1;
    }
    return 0;
}

PyDoc_STRVAR(attested_index_doc,
"attested_index(attestation_type, evidence_type, runtime_type, attestation)\n"
"--\n\n"
"The cheap part of an attested view (bound_contracts._python_attested_index is its\n"
"reference): ``(attested_pfids, ids_by_worker, evidence_ids_by_worker, complete)`` where\n"
"``attested_pfids`` is the set of placement fragment ids of the evidence fragments with an\n"
"entry in ``attestation._placement_dict``, ``ids_by_worker[worker]`` their runtime fragment ids\n"
"sorted, ``evidence_ids_by_worker[worker]`` the sorted ids of all the worker's evidence\n"
"fragments (the very ``ids_by_worker`` dict when ``complete``: every evidence fragment has its\n"
"entry). ``None`` unless the attestation, its evidence and every evidence fragment are exactly\n"
"the given types, ``_placement_dict`` is an exact dict, the evidence fragments an exact tuple,\n"
"and every id read is an exact str. ``TypeError`` when a type argument is not a type.");

typedef struct {
    Py_hash_t hash;
    PyObject *text; /* borrowed: the caller's list holds it */
} ai_hashed;

/* By hash, then by code points (exact str: PyUnicode_Compare runs no Python code and cannot
 * fail; the order of ``sorted(texts, key=lambda text: (hash(text), text))``). */
static int
ai_compare_hashed(const void *a, const void *b)
{
    const ai_hashed *x = a, *y = b;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    return PyUnicode_Compare(x->text, y->text);
}

/* From this many items ai_sort_hashed sorts by radix (below: ai_merge_sort). */
#define AI_RADIX_MIN 512
#define AI_RADIX_BITS 11

/* ai_compare_hashed(x, y) < 0, inline (a hash comparison decides all but equal hashes). */
static inline int
ai_hashed_less(const ai_hashed *x, const ai_hashed *y)
{
    if (x->hash != y->hash) return x->hash < y->hash;
    return PyUnicode_Compare(x->text, y->text) < 0;
}

/* Runs of this many items are insertion-sorted before ai_merge_sort merges them. */
#define AI_MERGE_RUN 16

/* items[0..n) in ai_compare_hashed's order (a stable merge sort; equal str keep their order, and
 * ai_hash_sorted keeps one of them: the same text), without qsort's indirect call per
 * comparison (a view's ~350 attested ids at Kimi: that qsort was about a quarter of ai_build's
 * instructions). tmp: room for n items. No Python code runs (exact str comparisons). */
static void
ai_merge_sort(ai_hashed *items, ai_hashed *tmp, size_t n)
{
    for (size_t start = 0; start < n; start += AI_MERGE_RUN) {
        size_t end = n - start < AI_MERGE_RUN ? n : start + AI_MERGE_RUN;
        for (size_t i = start + 1; i < end; i++) {
            ai_hashed item = items[i];
            size_t j = i;
            while (j > start && ai_hashed_less(&item, &items[j - 1])) {
                items[j] = items[j - 1];
                j--;
            }
            items[j] = item;
        }
    }
    ai_hashed *from = items, *to = tmp;
    for (size_t width = AI_MERGE_RUN; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = n - lo < width ? n : lo + width;
            size_t hi = n - mid < width ? n : mid + width;
            size_t a = lo, b = mid, k = lo;
            /* (stable: the left run's item first unless the right one is strictly less) */
            while (a < mid && b < hi) to[k++] = ai_hashed_less(&from[b], &from[a]) ? from[b++] : from[a++];
            while (a < mid) to[k++] = from[a++];
            while (b < hi) to[k++] = from[b++];
        }
        ai_hashed *swap = from;
        from = to;
        to = swap;
    }
    if (from != items) memcpy(items, from, n * sizeof(ai_hashed));
}

/* The order of ai_compare_hashed over items[0..n): an LSD radix sort on the hashes (sign bit
 * flipped: the signed order; stable, digits shared by every item skipped), then each run of
 * equal hashes ordered by code points (insertion sort, stable; qsort for a long run). The same
 * order as qsort with ai_compare_hashed, up to the order of equal str (ai_hash_sorted keeps one
 * of them: the same text). 0, or -1 with MemoryError (items unchanged). No Python code runs. */
static int
ai_sort_hashed(ai_hashed *items, size_t n)
{
    if (n < AI_RADIX_MIN) {
        if (n > 1) {
            ai_hashed *tmp = mr_alloc_array(n, sizeof(ai_hashed));
            if (tmp == NULL) return -1;
            ai_merge_sort(items, tmp, n);
            PyMem_Free(tmp);
        }
        return 0;
    }
    enum { RADIX = 1 << AI_RADIX_BITS, PASSES = (64 + AI_RADIX_BITS - 1) / AI_RADIX_BITS };
    ai_hashed *other = mr_alloc_array(n, sizeof(ai_hashed));
    size_t *counts = other == NULL ? NULL : mr_alloc_array((size_t)PASSES * RADIX, sizeof(size_t));
    if (counts == NULL) {
        PyMem_Free(other);
        return -1;
    }
    memset(counts, 0, (size_t)PASSES * RADIX * sizeof(size_t));
    const uint64_t flip = UINT64_C(1) << 63;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = (uint64_t)items[i].hash ^ flip;
        for (int d = 0; d < PASSES; d++) counts[(size_t)d * RADIX + ((key >> (d * AI_RADIX_BITS)) & (RADIX - 1))]++;
    }
    ai_hashed *from = items, *to = other;
    for (int d = 0; d < PASSES; d++) {
        size_t *count = counts + (size_t)d * RADIX;
        const uint64_t first = (((uint64_t)from[0].hash ^ flip) >> (d * AI_RADIX_BITS)) & (RADIX - 1);
        if (count[first] == n) continue; /* every item has this digit: the order stays */
        size_t sum = 0;
        for (size_t b = 0; b < RADIX; b++) {
            size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t digit = (((uint64_t)from[i].hash ^ flip) >> (d * AI_RADIX_BITS)) & (RADIX - 1);
            to[count[digit]++] = from[i];
        }
        ai_hashed *swap = from;
        from = to;
        to = swap;
    }
    if (from != items) memcpy(items, from, n * sizeof(ai_hashed));
    PyMem_Free(other);
    PyMem_Free(counts);
    for (size_t start = 0; start < n;) { /* runs of equal hashes, by code points */
        size_t end = start + 1;
        while (end < n && items[end].hash == items[start].hash) end++;
        if (end - start > 16) {
            qsort(items + start, end - start, sizeof(ai_hashed), ai_compare_hashed);
        }
        else {
            for (size_t i = start + 1; i < end; i++) {
                ai_hashed item = items[i];
                size_t j = i;
                while (j > start && PyUnicode_Compare(items[j - 1].text, item.text) > 0) {
                    items[j] = items[j - 1];
                    j--;
                }
                items[j] = item;
            }
        }
        start = end;
    }
    return 0;
}

/* The distinct items of ``texts`` (a list of exact str) as a tuple ordered by hash, then by
 * code points (``bound_contracts._compact_pfids``): the compact form of a view's
 * ``attested_pfids`` that rs_member searches (8 bytes per item where a set costs ~50). New
 * reference, NULL with an error set. No Python code runs (exact str hashes and comparisons). */
static PyObject *
ai_hash_sorted(PyObject *texts)
{
    Py_ssize_t n = PyList_Size(texts);
    if (n < 0) return NULL;
    ai_hashed *items = mr_alloc_array((size_t)n + 1, sizeof(ai_hashed));
    if (items == NULL) return NULL;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyList_GetItem(texts, i);
        if (text == NULL || !PyUnicode_CheckExact(text)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "ai_hash_sorted: exact str items expected");
            goto done;
        }
        items[i].text = text;
        items[i].hash = PyObject_Hash(text);
        if (items[i].hash == -1) goto done;
    }
    if (ai_sort_hashed(items, (size_t)n) < 0) goto done;
    /* distinct items: equal ones are adjacent now */
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (kept > 0 && items[kept - 1].hash == items[i].hash) {
            int order = PyUnicode_Compare(items[kept - 1].text, items[i].text);
            if (order == -1 && PyErr_Occurred()) goto done;
            if (order == 0) continue;
        }
        items[kept++] = items[i];
    }
    result = PyTuple_New(kept);
    for (Py_ssize_t i = 0; result != NULL && i < kept; i++) {
        if (PyTuple_SetItem(result, i, Py_NewRef(items[i].text)) < 0) Py_CLEAR(result);
    }
done:
    PyMem_Free(items);
    return result;
}

/* ``_python_attested_index`` of an attestation's ``evidence`` and ``_placement_dict`` (read by
 * the caller): the index tuple, None (new reference) when not decided here, NULL with an error.
 * ``compact``: the attested placement fragment ids as an ai_hash_sorted tuple instead of a set
 * (the same members; a view's private form, see av_slots). */
/* Hints for ai_build's loop over the evidence fragments (nothing decided, no Python code,
 * nothing held; a fragment of any other class than the runtime layout this file's readers
 * accepted is skipped): stage 0 runtime fragment ``runtime`` (an item of the exact evidence
 * tuple, NULL past its end), 1 its placement fragment id (the str the placement dict is searched
 * with). (Always inlined: GCC drops the calls to a static function whose only effects are
 * prefetches; see rf_stage_hint.) */
static inline __attribute__((always_inline)) void
ai_hint(PyObject *runtime, int stage)
{
    if (runtime == NULL) return;
    if (stage == 0) {
        rv_prefetch_lines(runtime, 3);
        return;
    }
    if (rv_runtime_memo.memo.cls == NULL || (PyObject *)Py_TYPE(runtime) != rv_runtime_memo.memo.cls) return;
    PyObject *pfid = ((mr_layout_object *)runtime)->fields[MR_RF_PLACEMENT_FRAGMENT_ID];
    if (pfid != NULL) __builtin_prefetch(pfid);
}

/* The bucket (list) of ``key`` in ``table``, created empty on first use: borrowed (``table``
 * holds it), NULL with an error set. (ai_append's, for ai_build's last-worker bucket.) */
static PyObject *
ai_bucket(PyObject *table, PyObject *key)
{
    PyObject *bucket = PyDict_GetItemWithError(table, key); /* borrowed */
    if (bucket != NULL || PyErr_Occurred()) return bucket;
    bucket = PyList_New(0);
    if (bucket == NULL) return NULL;
    int rc = PyDict_SetItem(table, key, bucket);
    Py_DECREF(bucket);
    return rc < 0 ? NULL : bucket;
}

/* ``everything`` of ai_build at its first fragment without a placement entry: a copy of
 * ``attested`` (every fragment before it had one, so both hold the same ids by worker, with the
 * workers in the same first-seen order and each list in evidence order). New reference, NULL
 * with an error set. */
static PyObject *
ai_everything(PyObject *attested)
{
    PyObject *everything = PyDict_New();
    if (everything == NULL) return NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *bucket;
    while (PyDict_Next(attested, &pos, &key, &bucket)) {
        PyObject *copy = PyList_GetSlice(bucket, 0, PY_SSIZE_T_MAX); /* (ai_append's lists) */
        int rc = copy == NULL ? -1 : PyDict_SetItem(everything, key, copy);
        Py_XDECREF(copy);
        if (rc < 0) {
            Py_DECREF(everything);
            return NULL;
        }
    }
    return everything;
}

/* 1 when every key of ``dict`` (an exact dict) from PyDict_Next's position ``pos`` on is an
 * exact str, else 0. Runs no Python code. */
static int
ai_keys_plain_from(PyObject *dict, Py_ssize_t pos)
{
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) return 0;
    }
    return 1;
}

static PyObject *
ai_build(PyObject *evidence, PyObject *pdict, PyTypeObject *ev_type, PyTypeObject *rf_type, int compact)
{
    PyObject *result = NULL, *edict = NULL, *fragments = NULL;
    PyObject *pfids = NULL, *attested = NULL, *everything = NULL;
    PyObject *last_worker = NULL, *last_bucket = NULL; /* held: the loop's last attested worker */
    int complete = 1;
    Py_ssize_t cursor = 0; /* pdict's (rf_cursor_item) */
    /* pdict is probed with each evidence fragment's id: a plain dict only (plain_dict.h; a key
     * planted in it would run its __eq__ in the probe). Checked in the walk the loop makes anyway
     * (FRAG43): a cursor hit is pdict's next live entry, whose key is the very exact str looked
     * for, so the live keys before the cursor are exact strs; the rest (ai_keys_plain_from) is
     * checked before the first probe, else when the loop ends (on every exit: a pdict not plain
     * gives None, as the check before everything gave; no Python code runs in between, so the
     * keys found are the ones the check would have found). */
    int plain = 1; /* 0: pdict's keys past the cursor not checked yet */
    if (Py_TYPE(evidence) != ev_type || !PyDict_CheckExact(pdict)) goto decline;
    plain = 0;
    edict = pd_instance_dict(evidence);
    if (edict == NULL) goto done;
    if (!PyDict_Check(edict)) goto decline;
    fragments = rv_item(edict, rc_keys[RC_FRAGMENTS]);
    if (fragments == NULL || !PyTuple_CheckExact(fragments)) goto decline;
    pfids = compact ? PyList_New(0) : PySet_New(NULL);
    attested = PyDict_New();
    /* ``everything`` (every evidence fragment's id by worker) only from the first fragment
     * without a placement entry on (ai_everything): until then it is exactly ``attested``,
     * which a complete attestation (the common case) returns for both. */
    if (pfids == NULL || attested == NULL) goto done;
    Py_ssize_t n = PyTuple_Size(fragments);
    if (n < 0) goto done;
    /* The runtime fragments' three ids from their layout's slots when their class is the runtime
     * layout this file's readers accepted (what rv_runtime_state and rv_item read for it). */
    const int slots = rv_runtime_memo.memo.cls != NULL && (PyObject *)rf_type == rv_runtime_memo.memo.cls;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* (an exact tuple: an index in range is read without an error) */
        ai_hint(i + 16 < n ? PyTuple_GetItem(fragments, i + 16) : NULL, 0);
        ai_hint(i + 6 < n ? PyTuple_GetItem(fragments, i + 6) : NULL, 1);
        PyObject *runtime = PyTuple_GetItem(fragments, i); /* borrowed; ``fragments`` holds it */
        if (runtime == NULL) goto done;
        if (Py_TYPE(runtime) != rf_type) goto decline;
        PyObject *pfid = NULL, *worker = NULL, *fid = NULL;
        if (slots) {
            PyObject *const *rf = (PyObject *const *)((mr_layout_object *)runtime)->fields;
            pfid = rf[MR_RF_PLACEMENT_FRAGMENT_ID];
            worker = rf[MR_RF_WORKER_ID];
            fid = rf[MR_RF_FRAGMENT_ID];
            /* (ai_text: an empty slot or another class than exact str declines) */
            if (pfid == NULL || worker == NULL || fid == NULL || !PyUnicode_CheckExact(pfid)
                || !PyUnicode_CheckExact(worker) || !PyUnicode_CheckExact(fid)) {
                goto decline;
            }
            Py_INCREF(pfid);
            Py_INCREF(worker);
            Py_INCREF(fid);
        }
        else {
            PyObject *rdict = rv_runtime_state(runtime); /* (its layout, or its instance dict) */
            if (rdict == NULL) {
                if (PyErr_Occurred()) goto done;
                goto decline;
            }
            pfid = ai_text(rdict, rf_keys[RF_PFID]);
            worker = pfid == NULL ? NULL : ai_text(rdict, rf_keys[RF_WORKER_ID]);
            fid = worker == NULL ? NULL : ai_text(rdict, rf_keys[RF_FRAGMENT_ID]);
            Py_DECREF(rdict);
        }
        int status = fid == NULL ? (PyErr_Occurred() ? RV_ERROR : RV_DECLINE) : RV_OK;
        if (status == RV_OK) {
            /* pdict in order first (rf_cursor_item: the evidence lists its fragments in the
             * placement dict's order when both come from one placement; a probe by hash costs two
             * misses once the dict leaves the cache), else the probe */
            PyObject *entry = rf_cursor_item(pdict, &cursor, pfid); /* borrowed */
            if (entry == NULL && !plain) {
                plain = ai_keys_plain_from(pdict, cursor); /* (before the first probe) */
                if (!plain) status = RV_DECLINE;
            }
            if (status != RV_OK) {
                /* (pdict not plain: declined below) */
            }
            else if (entry == NULL && (entry = PyDict_GetItemWithError(pdict, pfid)) == NULL && PyErr_Occurred()) {
                status = RV_ERROR;
            }
            else if (entry == NULL || entry == Py_None) { /* ``placement_dict.get(pfid) is None`` */
                complete = 0;
                if (everything == NULL && (everything = ai_everything(attested)) == NULL) status = RV_ERROR;
            }
            else if ((compact ? PyList_Append(pfids, pfid) : PySet_Add(pfids, pfid)) < 0) {
                status = RV_ERROR;
            }
            else {
                /* ai_append(attested, worker, fid), the last worker's bucket kept (a worker's
                 * evidence fragments come together): both held, so the address comparison
                 * stays exact, and ``attested`` only gains keys here (its buckets stay) */
                if (worker != last_worker) {
                    PyObject *bucket = ai_bucket(attested, worker);
                    if (bucket == NULL) {
                        status = RV_ERROR;
                    }
                    else {
                        Py_XDECREF(last_bucket);
                        last_bucket = Py_NewRef(bucket);
                        Py_XDECREF(last_worker);
                        last_worker = Py_NewRef(worker);
                    }
                }
                if (status == RV_OK && PyList_Append(last_bucket, fid) < 0) status = RV_ERROR;
            }
            if (status == RV_OK && everything != NULL && ai_append(everything, worker, fid) < 0) status = RV_ERROR;
        }
        Py_XDECREF(pfid);
        Py_XDECREF(worker);
        Py_XDECREF(fid);
        if (status == RV_ERROR) goto done;
        if (status == RV_DECLINE) goto decline;
    }
    if (ai_freeze(attested) < 0) goto done;
    if (compact) {
        PyObject *sorted = ai_hash_sorted(pfids);
        if (sorted == NULL) goto done;
        Py_DECREF(pfids);
        pfids = sorted;
    }
    if (complete) {
        Py_XDECREF(everything); /* (NULL: never built) */
        everything = Py_NewRef(attested);
    }
    else if (ai_freeze(everything) < 0) {
        goto done;
    }
    result = PyTuple_Pack(4, pfids, attested, everything, complete ? Py_True : Py_False);
    goto done;
decline:
    if (!PyErr_Occurred()) result = Py_NewRef(Py_None);
done:
    if (!plain && !ai_keys_plain_from(pdict, cursor)) {
        /* pdict not plain: None, whatever the loop found (the check before everything declined) */
        PyErr_Clear();
        Py_XDECREF(result); /* (this call's tuple of sets, lists and dicts of exact strs) */
        result = Py_NewRef(Py_None);
    }
    Py_XDECREF(last_worker);
    Py_XDECREF(last_bucket);
    Py_XDECREF(edict);
    Py_XDECREF(fragments);
    Py_XDECREF(pfids);
    Py_XDECREF(attested);
    Py_XDECREF(everything);
    return result;
}

static PyObject *
attested_index(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *att_type, *ev_type, *rf_type, *attestation;
    if (!PyArg_ParseTuple(args, "O!O!O!O:attested_index", &PyType_Type, &att_type, &PyType_Type, &ev_type,
                          &PyType_Type, &rf_type, &attestation)) {
        return NULL;
    }
    if (Py_TYPE(attestation) != (PyTypeObject *)att_type) Py_RETURN_NONE;
    PyObject *state = pd_instance_dict(attestation);
    if (state == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear(); /* not plain (plain_dict.h), or none: the Python index decides */
        Py_RETURN_NONE;
    }
    PyObject *evidence = NULL, *pdict = NULL, *result = NULL;
    if (PyDict_Check(state)) {
        evidence = rv_item(state, rf_keys[RF_EVIDENCE]);
        pdict = evidence == NULL ? NULL : rv_item(state, rf_keys[RF_PLACEMENT_DICT]);
    }
    if (pdict != NULL) {
        result = ai_build(evidence, pdict, (PyTypeObject *)ev_type, (PyTypeObject *)rf_type, 0);
    }
    else if (!PyErr_Occurred()) {
        result = Py_NewRef(Py_None);
    }
    Py_DECREF(state);
    Py_XDECREF(evidence);
    Py_XDECREF(pdict);
    if (result == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear(); /* an instance dict that is not plain (plain_dict.h): the Python index decides */
        return Py_NewRef(Py_None);
    }
    return result;
}

/* --- attested_view ---------------------------------------------------------------------- */

enum {
    AV_PLACEMENT,
    AV_EVIDENCE,
    AV_KEY_BASE,
    AV_PART_RANK,
    AV_GENERATION,
    AV_ATTESTED_PFIDS,
    AV_IDS,
    AV_EVIDENCE_IDS,
    AV_OBJECTS,
    AV_OBJECTS_BY_PFID,
    AV_ROWS,
    AV_PLACEMENT_DICT,
    AV_NSLOTS, /* the view's slots above, then other names */
    AV_PARTICIPANT = AV_NSLOTS,
    AV_INSTANCE,
    AV_PLACEMENT_ID,
    AV_DIGEST,
    AV_LEASE,
    AV_PART_INDEX_CACHE,
    AV_PARTS,
    AV_PART_INDEX,
    AV_RANK,
    AV_DERIVED_CACHE,
    AV_SNAPSHOTS_BY_WORKER,
    AV_ATTESTED_VIEW,
    AV_ATTESTED_ROWS,
    AV_NNAMES
};

static const char *const av_names[AV_NNAMES] = {
    "placement", "evidence", "key_base", "part_rank", "generation", "attested_pfids", "ids_by_worker",
    "evidence_ids_by_worker", "objects_by_worker", "_objects_by_pfid", "_rows", "_placement_dict",
    "participant_id", "instance_id", "placement_id", "digest", "lease_id", "_parts_by_participant", "parts", "_part_index",
    "rank", "_derived_cache", "snapshots_by_worker", "_attested_view", "attested_rows",
};

static PyObject *av_keys[AV_NNAMES];

/* ``object.__new__`` (the builtin ``getattr(object, "__new__")`` returns on every call; a
 * built-in type's attributes cannot be rebound), fetched once at module init: av_build calls
 * it as ``object.__new__(view_type)`` (its own checks, e.g. "is not safe", unchanged) without
 * the format parse and the attribute lookup per view. */
static PyObject *av_object_new;

/* The view's slot values (``_AttestedView.__init__``) into slots[AV_NSLOTS] (new references);
 * RV_OK, RV_DECLINE (the Python constructor decides) or RV_ERROR. */
static int
av_slots(PyObject *module, PyObject *attestation, PyObject *state, PyObject *const *types, PyObject *objects,
         PyObject **slots)
{
    PyObject *participant = NULL, *instance = NULL, *placement_id = NULL, *digest = NULL, *lease = NULL;
    PyObject *index = NULL;
    int rc = RV_DECLINE;
    PyObject *evidence = slots[AV_EVIDENCE] = rv_item(state, av_keys[AV_EVIDENCE]);
    PyObject *placement = slots[AV_PLACEMENT] = rv_item(state, av_keys[AV_PLACEMENT]);
    PyObject *pdict = slots[AV_PLACEMENT_DICT] = rv_item(state, av_keys[AV_PLACEMENT_DICT]);
    if (evidence == NULL || placement == NULL || pdict == NULL) goto done;
    if (Py_TYPE(evidence) != (PyTypeObject *)types[1] || Py_TYPE(placement) != (PyTypeObject *)types[3]
        || !PyDict_CheckExact(pdict)) {
        goto done;
    }
    rc = RV_ERROR;
    /* ``key_base``, attribute by attribute in the constructor's order. */
    /* (each instance dict walked before the first of consecutive reads of its object: a generic
     * read of the exact class's field from a plain dict runs no code, so the dict is the one found
     * plain at the second read; ``lease`` follows the digest property, Python code, so its
     * object's dict is walked again) */
    participant = pd_getattr(evidence, av_keys[AV_PARTICIPANT]);
    instance = participant == NULL ? NULL : PyObject_GetAttr(evidence, av_keys[AV_INSTANCE]);
    placement_id = instance == NULL ? NULL : pd_getattr(placement, av_keys[AV_PLACEMENT_ID]);
    digest = placement_id == NULL ? NULL : PyObject_GetAttr(placement, av_keys[AV_DIGEST]);
    lease = digest == NULL ? NULL : pd_getattr(evidence, av_keys[AV_LEASE]);
    if (lease == NULL) goto done;
    slots[AV_KEY_BASE] = PyTuple_Pack(5, instance, placement_id, participant, digest, lease);
    if (slots[AV_KEY_BASE] == NULL) goto done;
    /* ``placement._part_index().get(participant_id)``: the cached dict while it is exactly the
     * placement's parts (the method's own check, exact.c, with the exact part class), else the
     * method, which builds one from the parts (a cache edited in place is ignored there,
     * tests/test_lead29_part_index.py). */
    if (types[4] != NULL) {
        PyObject *pstate = pd_instance_dict(placement);
        if (pstate == NULL) goto done;
        PyObject *cached = rv_item(pstate, av_keys[AV_PART_INDEX_CACHE]);
        PyObject *parts = cached == NULL ? NULL : rv_item(pstate, av_keys[AV_PARTS]);
        Py_DECREF(pstate);
        int exact = parts == NULL ? 0 : mr_part_index_exact(parts, cached, types[4]);
        Py_XDECREF(parts);
        if (exact == 1) index = cached;
        else Py_XDECREF(cached);
        if (exact < 0 || (exact == 0 && PyErr_Occurred())) goto done;
    }
    int called = 0; /* Python code ran since the evidence's dict was walked (for ``lease``) */
    if (index == NULL) {
        called = 1;
        index = PyObject_CallMethodObjArgs(placement, av_keys[AV_PART_INDEX], NULL);
        if (index == NULL) goto done;
    }
    /* probed by key after the method's Python code ran: an exact str probed in a plain dict
     * (plain_dict.h), else the Python constructor decides */
    if (!PyDict_CheckExact(index) || !PyUnicode_CheckExact(participant) || !pd_plain_keys(index)) {
        rc = RV_DECLINE;
        goto done;
    }
    PyObject *part = PyDict_GetItemWithError(index, participant); /* borrowed; ``index`` holds it */
    if (part == NULL && PyErr_Occurred()) goto done;
    /* Without the method call no code ran since the evidence's dict was walked (``lease``) and
     * since mr_part_index_exact walked every part's dict (``part``, one of them: the index is
     * exactly the parts), so neither is walked again (as for ``instance`` above). */
    slots[AV_PART_RANK] = part == NULL ? Py_NewRef(Py_None)
                          : called    ? pd_getattr(part, av_keys[AV_RANK])
                                      : PyObject_GetAttr(part, av_keys[AV_RANK]);
    if (slots[AV_PART_RANK] == NULL) goto done;
    slots[AV_GENERATION] = called ? pd_getattr(evidence, av_keys[AV_GENERATION])
                                  : PyObject_GetAttr(evidence, av_keys[AV_GENERATION]);
    if (slots[AV_GENERATION] == NULL) goto done;
    /* The snapshot objects only when the caller gives them (binding's objects of this very call,
     * see ``bound_contracts._attested_view``); never read from the attestation: they could have
     * been edited in place since. Without them the expected field dicts are derived here. */
    slots[AV_OBJECTS] = Py_NewRef(objects);
    slots[AV_OBJECTS_BY_PFID] = Py_NewRef(Py_None);
    if (slots[AV_OBJECTS] != Py_None) {
        /* The cheap index; the expected field dicts on first use (``rows()``). */
        /* (``attested_pfids`` in its compact form: read only by revalidate_side's rs_member,
         * the view living as long as one revalidation; ~50 bytes per attested fragment less at
         * bind's peak) */
        PyObject *built = ai_build(evidence, pdict, (PyTypeObject *)types[1], (PyTypeObject *)types[2], 1);
        if (built == NULL) goto done;
        if (built == Py_None) {
            Py_DECREF(built);
            rc = RV_DECLINE;
            goto done;
        }
        slots[AV_ATTESTED_PFIDS] = Py_NewRef(PyTuple_GetItem(built, 0));
        slots[AV_IDS] = Py_NewRef(PyTuple_GetItem(built, 1));
        slots[AV_EVIDENCE_IDS] = Py_NewRef(PyTuple_GetItem(built, 2));
        slots[AV_ROWS] = Py_NewRef(Py_None);
        Py_DECREF(built);
    }
    else {
        /* ``_native.attested_rows`` (binder.c) for the rows; the index for the evidence ids
         * only when some evidence fragment has no placement entry. */
        PyObject *rows_fn = PyObject_GetAttr(module, av_keys[AV_ATTESTED_ROWS]);
        if (rows_fn == NULL) goto done;
        PyObject *rows = PyObject_CallFunctionObjArgs(rows_fn, types[0], types[1], types[2], attestation, NULL);
        Py_DECREF(rows_fn);
        if (rows == NULL) goto done;
        if (!PyTuple_CheckExact(rows) || PyTuple_Size(rows) != 4 || PyTuple_GetItem(rows, 3) != Py_True) {
            Py_DECREF(rows); /* None (not decided), or incomplete: the Python constructor decides */
            rc = RV_DECLINE;
            goto done;
        }
        slots[AV_ROWS] = PyTuple_Pack(2, PyTuple_GetItem(rows, 0), PyTuple_GetItem(rows, 1));
        slots[AV_ATTESTED_PFIDS] = Py_NewRef(PyTuple_GetItem(rows, 0));
        slots[AV_IDS] = Py_NewRef(PyTuple_GetItem(rows, 2));
        slots[AV_EVIDENCE_IDS] = Py_NewRef(PyTuple_GetItem(rows, 2));
        Py_DECREF(rows);
        if (slots[AV_ROWS] == NULL) goto done;
    }
    rc = RV_OK;
done:
    if (rc == RV_DECLINE && PyErr_Occurred()) rc = RV_ERROR;
    Py_XDECREF(participant);
    Py_XDECREF(instance);
    Py_XDECREF(placement_id);
    Py_XDECREF(digest);
    Py_XDECREF(lease);
    Py_XDECREF(index);
    return rc;
}

/* A new view of ``attestation`` built in C (never stored on the attestation), or None
 * (new reference) when the Python constructor must decide; NULL with an error set.
 * types: attestation, evidence, runtime fragment, placement manifest classes. */
static PyObject *
av_build(PyObject *module, PyObject *view_type, PyObject *attestation, PyObject *const *types, PyObject *objects)
{
    if (Py_TYPE(attestation) != (PyTypeObject *)types[0]) Py_RETURN_NONE;
    PyObject *state = pd_instance_dict(attestation);
    if (state == NULL) return NULL;
    PyObject *slots[AV_NSLOTS] = {NULL};
    PyObject *view = NULL;
    int rc = PyDict_CheckExact(state) ? av_slots(module, attestation, state, types, objects, slots) : RV_DECLINE;
    if (rc == RV_OK) {
        view = PyObject_CallFunctionObjArgs(av_object_new, view_type, NULL);
        for (int k = 0; view != NULL && k < AV_NSLOTS; k++) {
            if (PyObject_SetAttr(view, av_keys[k], slots[k]) < 0) Py_CLEAR(view);
        }
    }
    else if (rc == RV_DECLINE) {
        view = Py_NewRef(Py_None);
    }
    for (int k = 0; k < AV_NSLOTS; k++) Py_XDECREF(slots[k]);
    Py_DECREF(state);
    return view;
}

PyDoc_STRVAR(attested_view_doc,
"attested_view(view_type, attestation, attestation_type, evidence_type, runtime_type, manifest_type,\n"
"              objects=None, part_class=None)\n"
"--\n\n"
"``bound_contracts._AttestedView(attestation, objects)`` built in C from the attestation's\n"
"current values (never stored on it; snapshot objects only when given), when the\n"
"attestation, its evidence and placement are exactly the given types with an exact-dict\n"
"``_placement_dict``, the placement's part index is an exact dict, and the attested rows\n"
"(``attested_rows``, complete; without objects) or the cheap index (``attested_index``; with\n"
"objects: its ``attested_pfids`` then as the distinct ids in a tuple in ``(hash, text)`` order,\n"
"``bound_contracts._compact_pfids``) are decided in C. Otherwise ``None`` (the Python\n"
"constructor decides).\n"
"With part_class (the exact part class) the placement's cached part index is read when it is\n"
"exactly its parts (``part_index_exact``), else ``placement._part_index()`` is called.\n"
"Errors of the values' own attributes (e.g. ``placement.digest``) propagate.");

static PyObject *
attested_view(PyObject *module, PyObject *args)
{
    PyObject *view_type, *attestation, *types[5] = {NULL}, *objects = Py_None;
    if (!PyArg_ParseTuple(args, "O!OO!O!O!O!|OO!:attested_view", &PyType_Type, &view_type, &attestation,
                          &PyType_Type, &types[0], &PyType_Type, &types[1], &PyType_Type, &types[2], &PyType_Type,
                          &types[3], &objects, &PyType_Type, &types[4])) {
        return NULL;
    }
    PyObject *view = av_build(module, view_type, attestation, types, objects);
    if (view == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        /* (an instance dict that is not plain, plain_dict.h; or a missing attribute, which the
         * Python constructor raises again) */
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    return view;
}

/* --- rf_view_of: bound_contracts._attested_view's common paths in C --------------------- */

enum { VO_SCOPE, VO_BUILT_NOW, VO_HELD, VO_DIGEST_AHEAD, VO_NNAMES };
static const char *const vo_names[VO_NNAMES] = {"scope", "built_now", "held", "_digest_ahead"};
static PyObject *vo_keys[VO_NNAMES];

/* 1 when dict (an exact dict) has exact str and exact int keys only: probing it with an exact
 * str or int, or storing one, compares two strs (unicode_compare), two ints, or a str with an int
 * (both decline: unequal), so no Python code runs (plain_dict.h): ``_ViewState.scope`` (id()
 * keys; reachable, e.g. through gc.get_objects()) and the attestation's ``_derived_cache`` dict
 * (whose other keys are ints, binding's own). Runs no Python code. */
static int
vo_atom_keys(PyObject *dict)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) && !PyLong_CheckExact(key)) return 0;
    }
    return 1;
}

/* The attestation's instance dict when plain (new reference), NULL with no error set when it is
 * not or there is none, NULL with an error set on failure. */
static PyObject *
vo_plain_dict(PyObject *obj)
{
    PyObject *dict = pd_instance_dict(obj);
    if (dict == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
    return dict;
}

/* ``view_end(attestation, view, objects, scope, built_now, held)``: the rest of the wrapper. */
static PyObject *
vo_end(const rf_config *cfg, PyObject *attestation, PyObject *view, PyObject *objects, PyObject *scope,
       PyObject *built, PyObject *held)
{
    return PyObject_CallFunctionObjArgs(cfg->view_end, attestation, view, objects, scope, built, held, NULL);
}

/* ``bound_contracts._attested_view(attestation)`` (cfg->view_of) with its common paths in C:
 * a new reference to the view, NULL with an error set.
 *
 * Until the view is built nothing is changed and no Python code runs (the thread's _ViewState
 * attributes, the scope dict of exact int keys, plain instance dicts); anything else found there
 * (a scope entry that is not this attestation's, a ``_VIEW_KEY`` value, a dict that is not plain,
 * state of other types) calls ``view_of``, which then does exactly what the wrapper does. From
 * ``held.append`` on, the steps are the wrapper's, in its order: ``_native.attested_view``'s
 * build (av_build: the digest property, Python code, runs there), then the scope entry and the
 * first view's ``_VIEW_KEY = ()`` when both are stores no Python code can see (the scope's keys
 * still exact ints without this attestation's, its dict still plain without ``_VIEW_KEY`` or with
 * None there), else ``view_end`` with the values the wrapper holds at that point. */
static PyObject *
rf_view_of(PyObject *attestation, const rf_config *cfg)
{
    if (cfg->view_state == NULL || Py_TYPE(attestation) != cfg->attestation_type)
        return PyObject_CallFunctionObjArgs(cfg->view_of, attestation, NULL);
    PyObject *scope = NULL, *built = NULL, *held = NULL, *key = NULL, *state = NULL, *ahead = NULL;
    PyObject *objects = NULL, *view = NULL, *result = NULL, *found = NULL;
    int fallback = 1, append = 0;
    scope = PyObject_GetAttr(cfg->view_state, vo_keys[VO_SCOPE]);
    built = scope == NULL ? NULL : PyObject_GetAttr(cfg->view_state, vo_keys[VO_BUILT_NOW]);
    held = built == NULL ? NULL : PyObject_GetAttr(cfg->view_state, vo_keys[VO_HELD]);
    if (held == NULL) {
        PyErr_Clear(); /* (view_of reads them again and raises) */
        goto done;
    }
    if ((built != Py_True && built != Py_False) || (scope != Py_None && !PyDict_CheckExact(scope))
        || (held != Py_None && !PyList_CheckExact(held))) {
        goto done;
    }
    const int built_now = built == Py_True;
    if (scope != Py_None) {
        if (!vo_atom_keys(scope)) goto done;
        key = PyLong_FromVoidPtr(attestation); /* id(attestation) */
        if (key == NULL) goto error;
        PyObject *entry = PyDict_GetItemWithError(scope, key); /* borrowed */
        if (entry == NULL && PyErr_Occurred()) goto error;
        if (entry != NULL) {
            /* this attestation's view of this revalidation; anything else: the wrapper */
            if (PyTuple_CheckExact(entry) && PyTuple_Size(entry) == 2 && PyTuple_GetItem(entry, 0) == attestation)
                result = Py_NewRef(PyTuple_GetItem(entry, 1));
            goto done;
        }
    }
    state = vo_plain_dict(attestation);
    if (state == NULL) {
        if (PyErr_Occurred()) goto error;
        goto done;
    }
    /* (no _VIEW_KEY: the wrapper's cache check fails, and the first view records ``()``) */
    if (!built_now && PyDict_GetItemWithError(state, av_keys[AV_ATTESTED_VIEW]) != NULL) goto done;
    if (PyErr_Occurred()) goto error;
    PyObject *placement = PyDict_GetItemWithError(state, av_keys[AV_PLACEMENT]); /* borrowed */
    if (placement == NULL && PyErr_Occurred()) goto error;
    if (held != Py_None && placement != NULL && Py_TYPE(placement) == cfg->manifest_type) {
        PyObject *pstate = vo_plain_dict(placement);
        if (pstate == NULL) {
            if (PyErr_Occurred()) goto error;
            goto done;
        }
        ahead = PyDict_GetItemWithError(pstate, vo_keys[VO_DIGEST_AHEAD]);
        if (ahead == NULL && PyErr_Occurred()) {
            Py_DECREF(pstate);
            goto error;
        }
        ahead = Py_NewRef(ahead == NULL ? Py_None : ahead);
        Py_DECREF(pstate);
        append = 1;
    }
    if (built_now && scope != Py_None) {
        /* The snapshot objects binding derived from this attestation in this very call. */
        PyObject *cache = PyDict_GetItemWithError(state, av_keys[AV_DERIVED_CACHE]); /* borrowed */
        if (cache == NULL && PyErr_Occurred()) goto error;
        PyObject *evidence = PyDict_GetItemWithError(state, av_keys[AV_EVIDENCE]);
        if (evidence == NULL && PyErr_Occurred()) goto error;
        if (cache != NULL && PyTuple_CheckExact(cache) && PyTuple_Size(cache) == 3
            && PyTuple_GetItem(cache, 0) == (placement == NULL ? Py_None : placement)
            && PyTuple_GetItem(cache, 1) == (evidence == NULL ? Py_None : evidence)
            && PyDict_CheckExact(PyTuple_GetItem(cache, 2))) {
            PyObject *derived = PyTuple_GetItem(cache, 2);
            if (!vo_atom_keys(derived)) goto done;
            found = PyDict_GetItemWithError(derived, av_keys[AV_SNAPSHOTS_BY_WORKER]); /* borrowed */
            if (found == NULL && PyErr_Occurred()) goto error;
        }
    }
    objects = Py_NewRef(found == NULL ? Py_None : found);
    /* -- from here on the wrapper's steps (nothing falls back to view_of) -- */
    fallback = 0;
    if (append && PyList_Append(held, ahead) < 0) goto error;
    PyObject *types[5] = {(PyObject *)cfg->attestation_type, cfg->evidence_type, (PyObject *)cfg->binding_type,
                          (PyObject *)cfg->manifest_type, cfg->part_class};
    view = av_build(cfg->module, cfg->view_type, attestation, types, objects);
    if (view == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) goto error;
        PyErr_Clear(); /* (as attested_view: the Python constructor decides) */
        view = Py_NewRef(Py_None);
    }
    if (view == Py_None || scope == Py_None) {
        result = view == Py_None ? vo_end(cfg, attestation, view, objects, scope, built, held) : Py_NewRef(view);
        goto done;
    }
    /* Python code ran (the digest property): the stores only when still unseen by any */
    const int record = !built_now && objects == Py_None;
    PyObject *now = NULL;
    int plain = vo_atom_keys(scope);
    if (plain) {
        PyObject *entry = PyDict_GetItemWithError(scope, key);
        if (entry == NULL && PyErr_Occurred()) goto error;
        plain = entry == NULL;
    }
    if (plain && record) {
        now = vo_plain_dict(attestation);
        if (now == NULL && PyErr_Occurred()) goto error;
        PyObject *kept = now == NULL ? NULL : PyDict_GetItemWithError(now, av_keys[AV_ATTESTED_VIEW]);
        if (kept == NULL && PyErr_Occurred()) {
            Py_DECREF(now);
            goto error;
        }
        plain = now != NULL && (kept == NULL || kept == Py_None);
    }
    if (!plain) {
        Py_XDECREF(now);
        result = vo_end(cfg, attestation, view, objects, scope, built, held);
        goto done;
    }
    PyObject *pair = PyTuple_Pack(2, attestation, view);
    int rc = pair == NULL ? -1 : PyDict_SetItem(scope, key, pair); /* holds the attestation */
    Py_XDECREF(pair);
    if (rc == 0 && record) {
        PyObject *empty = PyTuple_New(0);
        rc = empty == NULL ? -1 : PyDict_SetItem(now, av_keys[AV_ATTESTED_VIEW], empty);
        Py_XDECREF(empty);
    }
    Py_XDECREF(now);
    if (rc < 0) goto error;
    result = Py_NewRef(view);
    goto done;
error:
    fallback = 0;
done:
    Py_XDECREF(scope);
    Py_XDECREF(built);
    Py_XDECREF(held);
    Py_XDECREF(key);
    Py_XDECREF(state);
    Py_XDECREF(ahead);
    Py_XDECREF(objects);
    Py_XDECREF(view);
    if (fallback && result == NULL && !PyErr_Occurred())
        return PyObject_CallFunctionObjArgs(cfg->view_of, attestation, NULL);
    return result;
}

/* --- revalidate_views ------------------------------------------------------------------- */

enum {
    RW_INSTANCE,
    RW_PLACEMENT_ID,
    RW_PARTICIPANT,
    RW_DIGEST,
    RW_LEASE,
    RW_WORKER,
    RW_RANK,
    RW_FRAGMENT_IDS,
    RW_NNAMES
};

static const char *const rw_names[RW_NNAMES] = {
    "instance_id", "placement_id", "participant_id", "placement_digest", "runtime_lease_id", "worker_id", "rank",
    "fragment_ids",
};

static PyObject *rw_keys[RW_NNAMES];

#define RW_AHEAD 16

/* rf_rank_tuple(rank, {rank_type}, no memo, out): the rank's (dp, tp, pp, ep) from its instance
 * dict (RV_DECLINE for another class or a missing value, RV_ERROR when the dict is not plain or
 * on failure), the values taken in the walk that checks the dict (pd_instance_values; a value not
 * taken is looked up right after it, before any Python code can run). */
static int
rw_rank_tuple(PyObject *rank, PyTypeObject *rank_type, PyObject **out)
{
    static const int dp_tp_pp_ep[4] = {RS_DP, RS_TP, RS_PP, RS_EP};
    if (Py_TYPE(rank) != rank_type) return RV_DECLINE;
    PyObject *values[4];
    PyObject *dict = pd_instance_values(rank, rs_keys, dp_tp_pp_ep, 4, values);
    if (dict == NULL) return RV_ERROR;
    for (int k = 0; k < 4; k++) {
        if (values[k] == NULL) values[k] = PyDict_GetItemWithError(dict, rs_keys[dp_tp_pp_ep[k]]); /* borrowed */
        if (values[k] == NULL) {
            Py_DECREF(dict);
            return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
        }
    }
    /* the values exact ints, else unsure (rw_side: the tuple is hashed and compared with ``==``;
     * tested here on the values rather than on the packed tuple's items: SHAPE38) */
    for (int k = 0; k < 4; k++) {
        if (!PyLong_CheckExact(values[k])) {
            Py_DECREF(dict);
            return RV_DECLINE;
        }
    }
    *out = PyTuple_Pack(4, values[0], values[1], values[2], values[3]);
    Py_DECREF(dict);
    return *out == NULL ? RV_ERROR : RV_OK;
}
#define RW_ROW_OF_MIN 4096 /* fragment positions from which revalidate_views returns ``row_of`` */

/* ``_fast_side_index`` of one side: fills runtime (fragment id -> row; NULL: none, see
 * revalidate_views' side_tables), rows and table (view key -> bucket). RV_OK, RV_DECLINE (a repeated view key, a non-exact rank, a missing field)
 * or RV_ERROR. Also fills ``ident`` (see rw_ident) from the exact str ids of exact-tuple
 * ``fragment_ids``, and appends to ``keep`` every row and every such tuple: whatever Python
 * code runs meanwhile (a field's ``__hash__``), the table's keys and buckets stay alive, so no
 * address in it can be reused by another object. */
static int
rw_side(PyObject *executors, PyTypeObject *rank_type, PyTypeObject *executor_type, PyObject *runtime, PyObject *rows,
        PyObject *table, rw_ident *ident, PyObject *keep)
{
    Py_ssize_t n = PyTuple_Size(executors);
    if (n < 0) return RV_ERROR;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *executor = PyTuple_GetItem(executors, i);
        if (executor == NULL) return RV_ERROR;
        if (executor_type != NULL && Py_TYPE(executor) != executor_type) return RV_DECLINE;
        /* (the fields' values taken in the walk that checks the dict: pd_instance_values) */
        PyObject *taken[RW_NNAMES];
        PyObject *estate = pd_instance_values(executor, rw_keys, NULL, RW_NNAMES, taken);
        if (estate == NULL) return RV_ERROR;
        PyObject *v[RW_NNAMES] = {NULL};
        PyObject *rank_tuple = NULL, *key = NULL, *bucket = NULL, *row = NULL, *view_key = NULL;
        int rc = RV_DECLINE;
        for (int k = 0; k < RW_NNAMES; k++) {
            v[k] = taken[k] != NULL ? Py_NewRef(taken[k]) : rv_item(estate, rw_keys[k]);
            if (v[k] == NULL) goto next;
            /* Exactly typed as ``_require_typed_executor`` checks (exact str; the fragment ids
             * an exact tuple, its items checked below; the rank's values by rf_rank_tuple),
             * else unsure: the keys below are hashed and compared with ``==``, which a str
             * subclass equal to the attested value would pass and the rules reject first. */
            if (k != RW_RANK && k != RW_FRAGMENT_IDS && !PyUnicode_CheckExact(v[k])) goto next;
        }
        /* its ids exact strs too: the view key below is hashed and compared with every item
         * (a str subclass's __hash__ / __eq__ would run inside the pass: AUDIT5 F1) */
        if (!rv_exact_str_tuple(v[RW_FRAGMENT_IDS])) goto next;
        /* (the rank's values, its instance dict's: exact ints, else unsure, see above) */
        rc = rw_rank_tuple(v[RW_RANK], rank_type, &rank_tuple);
        if (rc != RV_OK) goto next;
        rc = RV_ERROR;
        key = PyTuple_Pack(7, v[RW_INSTANCE], v[RW_PLACEMENT_ID], v[RW_PARTICIPANT], v[RW_DIGEST], v[RW_LEASE],
                           v[RW_WORKER], rank_tuple);
        bucket = PyList_New(0);
        if (key == NULL || bucket == NULL) goto next;
        row = PyTuple_Pack(3, estate, key, bucket);
        view_key = PyTuple_Pack(8, v[RW_INSTANCE], v[RW_PLACEMENT_ID], v[RW_PARTICIPANT], v[RW_DIGEST], v[RW_LEASE],
                                v[RW_WORKER], rank_tuple, v[RW_FRAGMENT_IDS]);
        if (row == NULL || view_key == NULL || PyList_Append(keep, row) < 0) goto next;
        if (PyDict_SetItem(table, view_key, bucket) < 0) goto next;
        if (PyDict_Size(table) != i + 1) { /* a repeated view key */
            rc = RV_DECLINE;
            goto next;
        }
        /* an exact tuple of exact strs (rv_exact_str_tuple above): its items read by index
         * (SHAPE38: no iterator), alive while ``keep`` holds the tuple */
        PyObject *ids = v[RW_FRAGMENT_IDS];
        if (PyList_Append(keep, ids) < 0) goto next;
        Py_ssize_t n_ids = PyTuple_Size(ids);
        if (n_ids < 0) goto next;
        for (Py_ssize_t at = 0; at < n_ids; at++) {
            PyObject *fragment_id = PyTuple_GetItem(ids, at);
            if (fragment_id == NULL) goto next;
            Py_INCREF(fragment_id);
            if (!PyUnicode_CheckExact(fragment_id)) { /* not exactly typed: unsure (see above) */
                Py_DECREF(fragment_id);
                rc = RV_DECLINE;
                goto next;
            }
            /* The str a few ids ahead (its hash is read by the lookup): the ids are scattered. */
            if (at + RW_AHEAD < n_ids) __builtin_prefetch(PyTuple_GetItem(ids, at + RW_AHEAD));
            /* ``runtime.setdefault(fragment_id, row)``: the first executor listing an id owns it.
             * (No runtime: its row, the first to list this object (rw_ident_put keeps the first).) */
            PyObject *owner = runtime == NULL ? row : PyDict_GetItemWithError(runtime, fragment_id); /* borrowed */
            int failed = 0;
            if (owner == NULL) {
                failed = PyErr_Occurred() != NULL || PyDict_SetItem(runtime, fragment_id, row) < 0;
                owner = row;
            }
            /* The owner is a row of this side (each is in ``keep``) unless Python code replaced
             * a value of this private dict: only an exact 3-tuple is indexed. */
            if (!failed && PyUnicode_CheckExact(fragment_id) && PyTuple_CheckExact(owner)
                && PyTuple_Size(owner) == 3) {
                failed = rw_ident_put(ident, fragment_id, owner) < 0;
            }
            Py_DECREF(fragment_id);
            if (failed) goto next;
        }
        if (PyErr_Occurred() || PyList_Append(rows, row) < 0) goto next;
        rc = RV_OK;
    next:
        if (rc == RV_DECLINE && PyErr_Occurred()) rc = RV_ERROR;
        for (int k = 0; k < RW_NNAMES; k++) Py_XDECREF(v[k]);
        Py_XDECREF(rank_tuple);
        Py_XDECREF(key);
        Py_XDECREF(bucket);
        Py_XDECREF(row);
        Py_XDECREF(view_key);
        Py_DECREF(estate);
        if (rc != RV_OK) return rc;
    }
    return RV_OK;
}

/* Append ``index`` to the bucket (third item) of ``runtime.get(runtime_id)`` when present. */
static int
rw_assign(PyObject *runtime, PyObject *runtime_id, PyObject *index)
{
    PyObject *row = PyDict_GetItemWithError(runtime, runtime_id); /* borrowed */
    if (row == NULL) return PyErr_Occurred() ? -1 : 0;
    return PyList_Append(PyTuple_GetItem(row, 2), index);
}

PyDoc_STRVAR(revalidate_views_doc,
"revalidate_views(source_executors, target_executors, runtime_ids, route_halves, source_of,\n"
"                 target_of, rank_type, executor_type=None, row_of=None, packed_indices=False,\n"
"                 side_tables=True)\n"
"--\n\n"
"Operation views (spec §11.9) of the TransferPlan revalidation fast path: per side\n"
"``(runtime, rows, table)`` as ``bound_contracts`` documents for its fast path (rows\n"
"``(state, provenance key, bucket)``, runtime fragment id -> the row of the first executor\n"
"listing it, view key -> bucket), every operation's index appended to its source and target\n"
"owner's bucket, and ``routes`` (route -> operation indices). Returns ``(s_runtime, s_rows,\n"
"s_table, t_runtime, t_rows, t_table, routes)``, or ``None`` for a repeated view key, a rank\n"
"that is not exactly ``rank_type`` or a missing field, and for an executor that is not\n"
"exactly ``executor_type`` (when given). ``TypeError`` for wrong container types.\n"
"``row_of`` (a list or None, optional): when the operations were assigned by address (every runtime\n"
"id object listed by an executor, plain route halves) and there are at least 4096 fragment\n"
"positions, two lists are appended to it: per\n"
"fragment position ``runtime.get(runtime_ids[p])`` of the source and of the target side\n"
"(None at positions the side has no operation for); else nothing (``revalidate_side``).\n"
"``packed_indices`` (optional, false): where the operations are assigned by address, each\n"
"bucket's indices are one bytes of native int64 instead of a list of ints (the tables' values;\n"
"a row's bucket list then holds that bytes as its one item); the general loop keeps lists.\n"
"Positions may also be packed: an exact bytes of one native int32 per operation.\n"
"``side_tables`` (optional, true): false for a caller that runs no revalidate_side (the runtime\n"
"maps' and ``row_of``'s only reader) and whose executors list each runtime fragment id once per\n"
"side (bind's step 6): the runtime maps are not built (None in the result), ``row_of`` is not\n"
"filled, each operation is assigned to the executor listing its runtime id object (the first\n"
"one), and an operation whose id object no executor lists declines. Every check is the same.");

/* A route half item whose hash and equality run no Python code and depend on its value
 * only: an exact int, an exact str or None. */
static int
rw_plain(PyObject *item)
{
    return PyLong_CheckExact(item) || PyUnicode_CheckExact(item) || item == Py_None;
}

/* An exact 2-tuple of plain items (rw_plain). */
static int
rw_plain_half(PyObject *half)
{
    return half != NULL && PyTuple_CheckExact(half) && PyTuple_Size(half) == 2 && rw_plain(PyTuple_GetItem(half, 0))
           && rw_plain(PyTuple_GetItem(half, 1));
}

/* --- revalidate_views' packed index tables (its packed_indices argument) ----------------------
 *
 * Instead of an int object per operation appended to three lists (its source row's bucket, its
 * target row's bucket, its route's bucket: 32 bytes for the int and 8 per list slot, alive
 * through bind's peak), each bucket's operation indices are written into one bytes of native
 * int64 (8 bytes per slot): a counting pass numbers the buckets (by identity, in order of first
 * use) and counts their operations, a second pass writes the indices in ascending order. Each
 * table value (view key -> bucket, route -> bucket) is then that bytes, and each row's bucket
 * list holds it as its one item (an executor owning operations keeps a non-empty bucket, which
 * is all revalidate_side and the Python side check read of it). */
typedef struct {
    rv_table numbers; /* bucket list -> number (borrowed: ``held`` holds them) */
    PyObject *held;   /* the numbered buckets, by number */
    Py_ssize_t *counts;
    size_t room;      /* counts' capacity */
} rw_numbering;

static void
rw_numbering_free(rw_numbering *nb)
{
    rv_table_free(&nb->numbers);
    Py_CLEAR(nb->held);
    PyMem_Free(nb->counts);
    nb->counts = NULL;
    nb->room = 0;
}

/* The number of bucket (an exact list); a new one while counting (its count 0), else -1 with
 * RuntimeError for a bucket the counting pass did not meet. -1 with an exception on error. */
static Py_ssize_t
rw_number(rw_numbering *nb, PyObject *bucket, int counting)
{
    Py_ssize_t k = nb->numbers.keys == NULL ? -1 : rs_lookup(&nb->numbers, bucket);
    if (k >= 0) return k;
    if (!counting || !PyList_CheckExact(bucket)) {
        PyErr_SetString(PyExc_RuntimeError, "revalidate_views: buckets changed");
        return -1;
    }
    k = PyList_Size(nb->held);
    if (k < 0 || PyList_Append(nb->held, bucket) < 0 || rv_table_reserve(&nb->numbers, (size_t)k + 1) < 0) return -1;
    rs_store(&nb->numbers, bucket, k);
    if ((size_t)k >= nb->room) {
        size_t room = nb->room < 16 ? 16 : nb->room * 2;
        if (room > SIZE_MAX / sizeof(Py_ssize_t)) {
            PyErr_NoMemory();
            return -1;
        }
        Py_ssize_t *grown = PyMem_Realloc(nb->counts, room * sizeof(Py_ssize_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(grown + nb->room, 0, (room - nb->room) * sizeof(Py_ssize_t));
        nb->counts = grown;
        nb->room = room;
    }
    return k;
}

/* The route bucket of an operation with positions s and t: ``routes[s_half + t_half]`` (a new
 * empty list stored there when missing and ``create``; else RuntimeError), cached while the two
 * half objects repeat (*last_s, *last_t, *last_bucket: owned). Borrowed; NULL with an
 * exception. The halves were checked plain (rw_plain_half): checked again when they change, as
 * building a route may run the collector. */
static PyObject *
rw_route_bucket(PyObject *halves, Py_ssize_t s, Py_ssize_t t, PyObject *routes, PyObject **last_s, PyObject **last_t,
                PyObject **last_bucket, int create)
{
    PyObject *s_half = PyList_GetItem(halves, s), *t_half = PyList_GetItem(halves, t);
    if (s_half == NULL || t_half == NULL) return NULL;
    if (s_half == *last_s && t_half == *last_t && *last_bucket != NULL) return *last_bucket;
    Py_XDECREF(*last_s);
    Py_XDECREF(*last_t);
    Py_CLEAR(*last_bucket);
    *last_s = Py_NewRef(s_half);
    *last_t = Py_NewRef(t_half);
    if (!rw_plain_half(s_half) || !rw_plain_half(t_half)) {
        PyErr_SetString(PyExc_RuntimeError, "revalidate_views: route halves changed");
        return NULL;
    }
    PyObject *route = PyTuple_Pack(4, PyTuple_GetItem(s_half, 0), PyTuple_GetItem(s_half, 1),
                                   PyTuple_GetItem(t_half, 0), PyTuple_GetItem(t_half, 1));
    if (route == NULL) return NULL;
    PyObject *bucket = PyDict_GetItemWithError(routes, route); /* borrowed; plain: no Python code */
    if (bucket != NULL) {
        Py_INCREF(bucket);
    }
    else if (!PyErr_Occurred()) {
        if (!create) {
            PyErr_SetString(PyExc_RuntimeError, "revalidate_views: route table changed");
        }
        else {
            bucket = PyList_New(0);
            if (bucket != NULL && PyDict_SetItem(routes, route, bucket) < 0) Py_CLEAR(bucket);
        }
    }
    Py_DECREF(route);
    *last_bucket = bucket; /* (the reference taken above: the cache holds it) */
    return bucket;
}

/* rw_fast's appends in the packed form (see above), for the n_ops operations whose positions
 * and rows rw_fast decided. 0, or -1 with an exception. */
static int
rw_packed(PyObject *source_of, PyObject *target_of, PyObject *halves, PyObject *const *s_row, PyObject *const *t_row,
          const unsigned char *used, Py_ssize_t n_ids, Py_ssize_t n_ops, PyObject *s_table, PyObject *t_table,
          PyObject *routes)
{
    rw_numbering nb = {{NULL, NULL, 0}, PyList_New(0), NULL, 0};
    PyObject *made = NULL, *last_s = NULL, *last_t = NULL, *last_bucket = NULL;
    Py_ssize_t *filled = NULL;
    char **at = NULL;
    int rc = -1;
    if (nb.held == NULL) goto done;
    for (int pass = 0; pass < 2; pass++) {
        int counting = pass == 0;
        Py_CLEAR(last_s);
        Py_CLEAR(last_t);
        Py_CLEAR(last_bucket);
        for (Py_ssize_t i = 0; i < n_ops; i++) {
            Py_ssize_t s = rs_position(source_of, i, n_ids), t = rs_position(target_of, i, n_ids);
            if (s < 0 || t < 0 || !(used[s] & 1) || !(used[t] & 2)) { /* (s_row / t_row set there only) */
                PyErr_SetString(PyExc_RuntimeError, "revalidate_views: positions changed");
                goto done;
            }
            PyObject *buckets[3] = {PyTuple_GetItem(s_row[s], 2), PyTuple_GetItem(t_row[t], 2), NULL};
            if (buckets[0] == NULL || buckets[1] == NULL) goto done;
            buckets[2] = rw_route_bucket(halves, s, t, routes, &last_s, &last_t, &last_bucket, counting);
            if (buckets[2] == NULL) goto done;
            for (int k = 0; k < 3; k++) {
                Py_ssize_t number = rw_number(&nb, buckets[k], counting);
                if (number < 0) goto done;
                if (counting) {
                    nb.counts[number]++;
                }
                else {
                    if (filled[number] >= nb.counts[number]) {
                        PyErr_SetString(PyExc_RuntimeError, "revalidate_views: buckets changed");
                        goto done;
                    }
                    int64_t index = (int64_t)i;
                    memcpy(at[number] + (size_t)filled[number] * sizeof(int64_t), &index, sizeof(int64_t));
                    filled[number]++;
                }
            }
        }
        if (!counting) break;
        /* one bytes per bucket, sized for its count */
        Py_ssize_t n_buckets = PyList_Size(nb.held);
        if (n_buckets < 0) goto done;
        made = PyList_New(n_buckets);
        filled = mr_alloc_array((size_t)n_buckets + 1, sizeof(Py_ssize_t));
        at = mr_alloc_array((size_t)n_buckets + 1, sizeof(char *));
        if (made == NULL || filled == NULL || at == NULL) goto done;
        for (Py_ssize_t k = 0; k < n_buckets; k++) {
            filled[k] = 0;
            if (nb.counts[k] > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(int64_t)) { /* (counts <= n_ops) */
                PyErr_NoMemory();
                goto done;
            }
            PyObject *packed = PyBytes_FromStringAndSize(NULL, nb.counts[k] * (Py_ssize_t)sizeof(int64_t));
            if (packed == NULL) goto done;
            PyList_SetItem(made, k, packed); /* steals; in range */
            at[k] = PyBytes_AsString(packed); /* a new bytes: written before anything reads it */
            if (at[k] == NULL) goto done;
        }
    }
    {
        Py_ssize_t n_buckets = PyList_Size(made);
        for (Py_ssize_t k = 0; k < n_buckets; k++) {
            if (filled[k] != nb.counts[k]) {
                PyErr_SetString(PyExc_RuntimeError, "revalidate_views: buckets changed");
                goto done;
            }
        }
        /* Each table's values: its bucket's bytes (only values change while iterating); each
         * numbered bucket list then holds its bytes as its one item. */
        PyObject *tables[3] = {s_table, t_table, routes};
        for (int k = 0; k < 3; k++) {
            Py_ssize_t pos = 0;
            PyObject *key, *value;
            while (nb.numbers.keys != NULL && PyDict_Next(tables[k], &pos, &key, &value)) {
                Py_ssize_t number = rs_lookup(&nb.numbers, value);
                if (number < 0) continue; /* an executor without operations: its empty list */
                if (PyDict_SetItem(tables[k], key, PyList_GetItem(made, number)) < 0) goto done;
            }
        }
        for (Py_ssize_t k = 0; k < n_buckets; k++) {
            if (PyList_Append(PyList_GetItem(nb.held, k), PyList_GetItem(made, k)) < 0) goto done;
        }
    }
    rc = 0;
done:
    rw_numbering_free(&nb);
    Py_XDECREF(made);
    Py_XDECREF(last_s);
    Py_XDECREF(last_t);
    Py_XDECREF(last_bucket);
    PyMem_Free(filled);
    PyMem_Free(at);
    return rc;
}

/* rc_append(routes, route, index) returning the bucket appended to (borrowed: routes holds
 * it), NULL with an error set. routes: a private dict, route: a tuple of plain items
 * (rw_plain_half: its hash and comparisons run no Python code). */
static PyObject *
rw_route_append(PyObject *routes, PyObject *route, PyObject *index)
{
    PyObject *bucket = PyDict_GetItemWithError(routes, route); /* borrowed */
    if (bucket != NULL) return PyList_Append(bucket, index) < 0 ? NULL : bucket;
    if (PyErr_Occurred()) return NULL;
    bucket = PyList_New(0);
    if (bucket == NULL) return NULL;
    int failed = PyList_Append(bucket, index) < 0 || PyDict_SetItem(routes, route, bucket) < 0;
    Py_DECREF(bucket); /* (routes holds it when stored) */
    return failed ? NULL : bucket;
}

/* The per-operation pass of revalidate_views for the common case, deciding exactly what the
 * loop of ``rw_loop`` does: every position is in range, every route half a plain 2-tuple
 * (rw_plain_half) and every operation's runtime fragment id object is one an executor listed
 * (a hit of the side's rw_ident, whose row is the one ``runtime.get`` returns). Anything
 * else returns RV_DECLINE before a single append, and the loop decides. Positions are read
 * from the lists (checked, then again by the appends), each used position's row is found once,
 * in position order (the
 * runtime id lists are read sequentially and the table slots prefetched ahead), and no key
 * object is read: the lookup is by address. The only Python objects built are the operation
 * indices, route tuples and route buckets, and a route tuple only when the pair of half
 * objects changes (the same two plain halves give an equal route, hence the same bucket;
 * the halves and that bucket are held while cached). Runs no Python code: the argument
 * lists are read without private copies until the last one is read. With ``row_of_out`` (a
 * list), the two per-position row lists are appended to it (see below). */
static int
rw_fast(PyObject *runtime_ids, PyObject *halves, PyObject *source_of, PyObject *target_of, rw_ident *s_ident,
        rw_ident *t_ident, PyObject *routes, PyObject *row_of_out, PyObject *s_table, PyObject *t_table)
{
    Py_ssize_t n_ids = PyList_Size(runtime_ids), n_ops = rs_positions_size(source_of);
    /* Per position its two rows and which sides use it (the operations' positions are read
     * from the lists again by the appending loop: no per-operation copy, 16 bytes each, is
     * alive while it allocates). */
    PyObject **s_row = mr_alloc_array((size_t)n_ids, 2 * sizeof(PyObject *));
    PyObject **t_row = s_row == NULL ? NULL : s_row + n_ids;
    unsigned char *used = mr_alloc_array((size_t)n_ids, 1);
    PyObject *last_s = NULL, *last_t = NULL, *last_row = NULL;
    int rc = RV_ERROR;
    if (s_row == NULL || used == NULL) goto done;
    memset(used, 0, (size_t)n_ids);
    rc = RV_DECLINE;
    for (Py_ssize_t i = 0; i < n_ops; i++) {
        Py_ssize_t s = rs_position(source_of, i, n_ids), t = rs_position(target_of, i, n_ids);
        if (s < 0 || t < 0) goto done;
        used[s] |= 1;
        used[t] |= 2;
    }
    for (Py_ssize_t p = 0; p < n_ids; p++) {
        if (p + RW_AHEAD < n_ids && used[p + RW_AHEAD]) {
            PyObject *ahead = PyList_GetItem(runtime_ids, p + RW_AHEAD);
            if (used[p + RW_AHEAD] & 1) rw_ident_prefetch(s_ident, ahead);
            if (used[p + RW_AHEAD] & 2) rw_ident_prefetch(t_ident, ahead);
        }
        if (!used[p]) continue;
        PyObject *runtime_id = PyList_GetItem(runtime_ids, p);
        if (!rw_plain_half(PyList_GetItem(halves, p))) goto done;
        if (used[p] & 1) {
            s_row[p] = rw_ident_get(s_ident, runtime_id);
            if (s_row[p] == NULL) goto done;
        }
        if (used[p] & 2) {
            t_row[p] = rw_ident_get(t_ident, runtime_id);
            if (t_row[p] == NULL) goto done;
        }
    }
    /* Decided: from here on every operation is appended (errors only from memory). The
     * identity tables are not read again: freed before the appends allocate. */
    PyMem_Free(s_ident->slots);
    PyMem_Free(t_ident->slots);
    s_ident->slots = t_ident->slots = NULL;
    rc = RV_ERROR;
    if (s_table != NULL && rw_packed(source_of, target_of, halves, s_row, t_row, used, n_ids, n_ops, s_table, t_table,
                                     routes) < 0) {
        goto done;
    }
    for (Py_ssize_t i = 0; s_table == NULL && i < n_ops; i++) {
        /* (the lists are unchanged: nothing below runs Python code before this read, and the
         * positions were checked in range above; a route built below may run the collector,
         * which changes no list it does not own) */
        Py_ssize_t s = rs_position(source_of, i, n_ids), t = rs_position(target_of, i, n_ids);
        if (s < 0 || t < 0 || !(used[s] & 1) || !(used[t] & 2)) { /* (s_row / t_row set there only) */
            PyErr_SetString(PyExc_RuntimeError, "revalidate_views: positions changed");
            goto done;
        }
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL) goto done;
        /* Rows are one per executor (few, hot); their buckets are exact lists (rw_side). */
        int failed = PyList_Append(PyTuple_GetItem(s_row[s], 2), index) < 0
                     || PyList_Append(PyTuple_GetItem(t_row[t], 2), index) < 0;
        if (!failed) {
            /* Read from the list now: a route built below may run the collector. */
            PyObject *s_half = PyList_GetItem(halves, s), *t_half = PyList_GetItem(halves, t);
            if (s_half == NULL || t_half == NULL) {
                failed = 1;
            } else if (s_half != last_s || t_half != last_t) {
                Py_XDECREF(last_s);
                Py_XDECREF(last_t);
                last_s = Py_NewRef(s_half);
                last_t = Py_NewRef(t_half);
                Py_CLEAR(last_row);
                if (!rw_plain_half(s_half) || !rw_plain_half(t_half)) { /* changed since checked */
                    PyErr_SetString(PyExc_RuntimeError, "revalidate_views: route halves changed");
                    failed = 1;
                } else {
                    PyObject *route = PyTuple_Pack(4, PyTuple_GetItem(s_half, 0), PyTuple_GetItem(s_half, 1),
                                                   PyTuple_GetItem(t_half, 0), PyTuple_GetItem(t_half, 1));
                    /* (the bucket rc_append appended to is what a lookup of the route in this
                     * private dict then finds: kept without that second lookup, SHAPE38) */
                    last_row = route == NULL ? NULL : rw_route_append(routes, route, index);
                    Py_XINCREF(last_row);
                    failed = last_row == NULL;
                    Py_XDECREF(route);
                }
            } else {
                failed = PyList_Append(last_row, index) < 0;
            }
        }
        Py_DECREF(index);
        if (failed && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "revalidate_views: route table changed");
        if (failed) goto done;
    }
    /* Per position its row on each side (None where the side has no operation): exactly
     * ``runtime.get(runtime_ids[p])`` of that side, for revalidate_side. Only for plans whose
     * runtime dicts leave the caches: below that the lookups cost less than the lists. */
    for (int side = 0; row_of_out != NULL && n_ids >= RW_ROW_OF_MIN && side < 2; side++) {
        PyObject *const *row_at = side == 0 ? s_row : t_row;
        PyObject *list = PyList_New(n_ids);
        if (list == NULL) goto done;
        for (Py_ssize_t p = 0; p < n_ids; p++) {
            PyObject *row = (used[p] & (1 << side)) ? row_at[p] : Py_None;
            PyList_SetItem(list, p, Py_NewRef(row)); /* steals; in range */
        }
        int failed = PyList_Append(row_of_out, list) < 0;
        Py_DECREF(list);
        if (failed) goto done;
    }
    rc = RV_OK;
done:
    PyMem_Free(s_row);
    PyMem_Free(used);
    Py_XDECREF(last_s);
    Py_XDECREF(last_t);
    Py_XDECREF(last_row);
    return rc;
}

/* The per-operation pass of revalidate_views for everything rw_fast declines (the original
 * loop, on private copies of the lists: the values' own methods may run). */
static int
rw_loop(PyObject *ids_arg, PyObject *halves_arg, PyObject *source_arg, PyObject *target_arg, PyObject *s_runtime,
        PyObject *t_runtime, PyObject *routes)
{
    PyObject *own[4] = {PySequence_List(ids_arg), PySequence_List(halves_arg), rs_positions_list(source_arg),
                        rs_positions_list(target_arg)};
    PyObject *runtime_ids = own[0], *halves = own[1], *source_of = own[2], *target_of = own[3];
    int rc = RV_ERROR;
    if (runtime_ids == NULL || halves == NULL || source_of == NULL || target_of == NULL) goto done;
    Py_ssize_t n_ids = PyList_Size(runtime_ids), n_ops = PyList_Size(source_of);
    if (PyList_Size(halves) != n_ids || PyList_Size(target_of) != n_ops) {
        rc = RV_DECLINE;
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_ops; i++) {
        Py_ssize_t s = rs_position(source_of, i, n_ids), t = rs_position(target_of, i, n_ids);
        if (s < 0 || t < 0) {
            rc = RV_DECLINE;
            goto done;
        }
        PyObject *s_half = PyList_GetItem(halves, s), *t_half = PyList_GetItem(halves, t);
        if (!PyTuple_CheckExact(s_half) || !PyTuple_CheckExact(t_half) || PyTuple_Size(s_half) != 2
            || PyTuple_Size(t_half) != 2) {
            rc = RV_DECLINE;
            goto done;
        }
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL) goto done;
        PyObject *route = PyTuple_Pack(4, PyTuple_GetItem(s_half, 0), PyTuple_GetItem(s_half, 1),
                                       PyTuple_GetItem(t_half, 0), PyTuple_GetItem(t_half, 1));
        int failed = route == NULL || rw_assign(s_runtime, PyList_GetItem(runtime_ids, s), index) < 0
                     || rw_assign(t_runtime, PyList_GetItem(runtime_ids, t), index) < 0
                     || rc_append(routes, route, index) < 0;
        Py_DECREF(index);
        Py_XDECREF(route);
        if (failed) goto done;
    }
    rc = RV_OK;
done:
    for (int k = 0; k < 4; k++) Py_XDECREF(own[k]);
    return rc;
}

static PyObject *
revalidate_views(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *source_executors, *target_executors, *ids_arg, *halves_arg, *source_arg, *target_arg, *rank_type;
    PyObject *executor_arg = Py_None, *row_of_out = NULL;
    int packed_indices = 0, side_tables = 1;
    if (!mr_parse_vector(args, nargs, "O!O!O!O!OOO!|OOpp:revalidate_views", &PyTuple_Type, &source_executors, &PyTuple_Type,
                          &target_executors, &PyList_Type, &ids_arg, &PyList_Type, &halves_arg, &source_arg,
                          &target_arg, &PyType_Type, &rank_type, &executor_arg, &row_of_out, &packed_indices,
                          &side_tables)) {
        return NULL;
    }
    /* row_of: a list, or None for a caller that does not run revalidate_side (its only reader) */
    if (row_of_out == Py_None) {
        row_of_out = NULL;
    }
    else if (row_of_out != NULL && !PyList_Check(row_of_out)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_views: row_of must be a list or None");
        return NULL;
    }
    if (!rs_positions_arg(source_arg) || !rs_positions_arg(target_arg)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_views: positions must be lists or packed positions");
        return NULL;
    }
    if (executor_arg != Py_None && !PyType_Check(executor_arg)) {
        PyErr_SetString(PyExc_TypeError, "revalidate_views: executor_type must be a type or None");
        return NULL;
    }
    PyTypeObject *executor_type = executor_arg == Py_None ? NULL : (PyTypeObject *)executor_arg;
    /* No side tables (side_tables false): no runtime dicts (None in the result) and no row_of;
     * the operations are assigned by address only (rw_fast), anything else declines. */
    if (!side_tables) row_of_out = NULL;
    PyObject *result = NULL, *s_runtime = side_tables ? PyDict_New() : NULL, *s_rows = PyList_New(0);
    PyObject *t_runtime = side_tables ? PyDict_New() : NULL, *t_rows = PyList_New(0), *s_table = PyDict_New();
    PyObject *t_table = PyDict_New(), *routes = PyDict_New();
    PyObject *keep = PyList_New(0);
    rw_ident s_ident = {NULL, 0, 0}, t_ident = {NULL, 0, 0};
    int rc = RV_ERROR;
    if ((side_tables && (s_runtime == NULL || t_runtime == NULL)) || s_rows == NULL || s_table == NULL || t_rows == NULL
        || t_table == NULL || routes == NULL || keep == NULL || rw_ident_init(&s_ident, 16) < 0
        || rw_ident_init(&t_ident, 16) < 0) {
        goto done;
    }
    rc = rw_side(source_executors, (PyTypeObject *)rank_type, executor_type, s_runtime, s_rows, s_table, &s_ident,
                 keep);
    if (rc == RV_OK) {
        rc = rw_side(target_executors, (PyTypeObject *)rank_type, executor_type, t_runtime, t_rows, t_table, &t_ident,
                     keep);
    }
    if (rc != RV_OK) goto done;
    /* The lists as they are now (rw_fast reads them without copies and runs no Python code). */
    Py_ssize_t n_ops = rs_positions_size(source_arg);
    if (PyErr_Occurred()) {
        rc = RV_ERROR;
        goto done;
    }
    if (PyList_Size(halves_arg) == PyList_Size(ids_arg) && n_ops >= 0 && rs_positions_size(target_arg) == n_ops) {
        rc = rw_fast(ids_arg, halves_arg, source_arg, target_arg, &s_ident, &t_ident, routes, row_of_out,
                     packed_indices ? s_table : NULL, packed_indices ? t_table : NULL);
        if (rc == RV_DECLINE && side_tables)
            rc = rw_loop(ids_arg, halves_arg, source_arg, target_arg, s_runtime, t_runtime, routes);
    } else {
        rc = RV_DECLINE;
    }
    if (rc != RV_OK) goto done;
    result = PyTuple_Pack(7, side_tables ? s_runtime : Py_None, s_rows, s_table, side_tables ? t_runtime : Py_None,
                          t_rows, t_table, routes);
done:
    if (rc == RV_DECLINE && !PyErr_Occurred()) result = Py_NewRef(Py_None);
    PyMem_Free(s_ident.slots);
    PyMem_Free(t_ident.slots);
    Py_XDECREF(keep);
    Py_XDECREF(s_runtime);
    Py_XDECREF(s_rows);
    Py_XDECREF(s_table);
    Py_XDECREF(t_runtime);
    Py_XDECREF(t_rows);
    Py_XDECREF(t_table);
    Py_XDECREF(routes);
    return result;
}

/* ------------------------------------------------------------------------------------------
 * restore_executors: the executors of a TransferPlan pickle record (bound_pickle) */

/* An exact tuple of n exact str (1), anything else (0). */
static int
rr_names(PyObject *names, Py_ssize_t n)
{
    if (!PyTuple_CheckExact(names) || PyTuple_Size(names) != n) return 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *name = PyTuple_GetItem(names, k);
        if (name == NULL) return -1;
        if (!PyUnicode_CheckExact(name)) return 0;
    }
    return 1;
}

/* A new instance of cls (a plain heap class with instance dicts; not called) whose own
 * key-sharing instance dict holds names[k] -> table[start + k] for k < n, stored in that order,
 * and in *dict a new reference to that dict (for further stores by the caller); NULL with an
 * exception (*dict NULL). The caller checked the bounds. */
static PyObject *
rr_object(PyObject *cls, PyObject *names, Py_ssize_t n, PyObject *table, Py_ssize_t start, PyObject **dict)
{
    PyObject *obj = mr_new_instance(cls, dict, "restore_executors");
    if (obj == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *name = PyTuple_GetItem(names, k);
        PyObject *value = name == NULL ? NULL : PyTuple_GetItem(table, start + k);
        if (value == NULL || PyDict_SetItem(*dict, name, value) < 0) {
            Py_CLEAR(*dict);
            Py_DECREF(obj);
            return NULL;
        }
    }
    return obj;
}

/* An exact int in [0, limit) into *out: RV_OK, RV_DECLINE (anything else). */
static int
rr_index(PyObject *value, Py_ssize_t limit, Py_ssize_t *out)
{
    if (!PyLong_CheckExact(value)) return RV_DECLINE;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0) return RV_DECLINE;
    if (x == -1 && PyErr_Occurred()) return RV_ERROR;
    if (x < 0 || x >= (long long)limit) return RV_DECLINE;
    *out = (Py_ssize_t)x;
    return RV_OK;
}

#define RR_HEAD 10 /* executor fields 0..7, attestation index, snapshot count */

PyDoc_STRVAR(restore_executors_doc,
"restore_executors(table, attestations, executor_cls, snapshot_cls, executor_fields, snapshot_fields)\n"
"--\n\n"
"The executors of a flat executor table of a TransferPlan pickle record (bound_pickle's\n"
"format: per executor its first 8 fields, its attestation index or None, the number k of its\n"
"snapshots, then k times the snapshot fields), built as bound_pickle._restore_executors\n"
"builds them (instance dicts in field order; executor_fields has 10 names, the 9th\n"
"'fragment_snapshots' and the 10th 'attestation'; attestations is a list). None when the\n"
"table is not exactly that shape (the Python version then raises its message).");

static PyObject *
restore_executors(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *table, *attestations, *executor_cls, *snapshot_cls, *executor_fields, *snapshot_fields;
    if (!PyArg_ParseTuple(args, "OOOOOO:restore_executors", &table, &attestations, &executor_cls, &snapshot_cls,
                          &executor_fields, &snapshot_fields))
        return NULL;
    PyObject *const classes[2] = {executor_cls, snapshot_cls};
    for (int k = 0; k < 2; k++) {
        if (!PyType_Check(classes[k]) || !(PyType_GetFlags((PyTypeObject *)classes[k]) & Py_TPFLAGS_HEAPTYPE)) {
            PyErr_SetString(PyExc_TypeError, "restore_executors: classes must be heap types");
            return NULL;
        }
    }
    int names_ok = rr_names(executor_fields, RR_HEAD);
    if (names_ok > 0) {
        names_ok = PyTuple_CheckExact(snapshot_fields) ? rr_names(snapshot_fields, PyTuple_Size(snapshot_fields)) : 0;
    }
    if (names_ok < 0) return NULL;
    if (names_ok == 0 || PyTuple_Size(snapshot_fields) < 1) {
        PyErr_SetString(PyExc_TypeError, "restore_executors: field names must be tuples of str");
        return NULL;
    }
    if (!PyTuple_CheckExact(table) || !PyList_CheckExact(attestations)) Py_RETURN_NONE;
    const Py_ssize_t size = PyTuple_Size(snapshot_fields);
    /* A snapshot class stored in a C-owned layout of exactly snapshot_fields (layout.h) is
     * built with its values stored directly, in field order: the instance its default pickling
     * restores (no __post_init__), untracked by the same rule; any other class through its
     * own instance dict (rr_object). */
    static mr_layout_memo memo; /* the class accepted last (layout.h: builders need no more) */
    mr_layout_class snapshot_layout;
    (void)mr_layout_memo_check(&memo, &snapshot_layout, snapshot_cls, snapshot_fields);
    const Py_ssize_t end = PyTuple_Size(table);
    PyObject *executors = PyList_New(0);
    if (executors == NULL) return NULL;
    PyObject *snapshots = NULL, *dict = NULL, *object = NULL;
    int status = RV_OK;
    Py_ssize_t position = 0;
    while (position < end && status == RV_OK) {
        status = RV_DECLINE;
        if (end - position < RR_HEAD) break;
        Py_ssize_t count = 0, start = position + RR_HEAD;
        int rc = rr_index(PyTuple_GetItem(table, position + 9), PY_SSIZE_T_MAX, &count);
        if (rc != RV_OK) {
            status = rc;
            break;
        }
        /* count * size <= end - start, without overflow */
        if (count > (end - start) / size) break;
        Py_ssize_t stop = start + count * size;
        PyObject *attestation = PyTuple_GetItem(table, position + 8); /* borrowed */
        if (attestation == NULL) {
            status = RV_ERROR;
            break;
        }
        if (attestation != Py_None) {
            Py_ssize_t index = 0;
            rc = rr_index(attestation, PyList_Size(attestations), &index);
            if (rc != RV_OK) {
                status = rc;
                break;
            }
            attestation = PyList_GetItem(attestations, index);
            if (attestation == NULL) {
                status = RV_ERROR;
                break;
            }
        }
        status = RV_ERROR;
        snapshots = mr_gc_hide(PyTuple_New(count)); /* out of the collector until full (gctrack.h) */
        if (snapshots == NULL) break;
        Py_ssize_t k = 0;
        for (Py_ssize_t offset = start; offset < stop; offset += size, k++) {
            if (snapshot_layout.cls != NULL) {
                PyObject *values[MR_LAYOUT_MAX_FIELDS];
                for (Py_ssize_t j = 0; j < size; j++) values[j] = PyTuple_GetItem(table, offset + j); /* in range */
                object = mr_layout_new(&snapshot_layout, values, size); /* GC: untracked when acyclic */
            }
            else {
                object = rr_object(snapshot_cls, snapshot_fields, size, table, offset, &dict);
                if (object != NULL) (void)mr_untrack_inert(object, dict); /* GC: when acyclic */
                else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
                    /* no instance dict (a layout class not accepted above): declined */
                    PyErr_Clear();
                    status = RV_DECLINE;
                }
            }
            Py_CLEAR(dict);
            if (object == NULL || PyTuple_SetItem(snapshots, k, object) < 0) {
                object = NULL; /* PyTuple_SetItem stole it even on failure */
                break;
            }
            object = NULL;
        }
        if (k != count) break;
        mr_gc_show(snapshots); /* full */
        object = rr_object(executor_cls, executor_fields, 8, table, position, &dict);
        if (object == NULL) break;
        if (PyDict_SetItem(dict, PyTuple_GetItem(executor_fields, 8), snapshots) < 0) break;
        if (PyDict_SetItem(dict, PyTuple_GetItem(executor_fields, 9), attestation) < 0) break;
        Py_CLEAR(snapshots);
        Py_CLEAR(dict);
        if (PyList_Append(executors, object) < 0) break;
        Py_CLEAR(object);
        position = stop;
        status = RV_OK;
    }
    Py_XDECREF(snapshots);
    Py_XDECREF(dict);
    Py_XDECREF(object);
    if (status != RV_OK) {
        Py_DECREF(executors);
        if (status == RV_ERROR) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *result = PyList_AsTuple(executors);
    Py_DECREF(executors);
    return result;
}

/* ------------------------------------------------------------------------------------------
 * restore_fragments: the bound fragments of a TransferPlan pickle record (bound_pickle) */

enum {
    RB_PLACEMENT,
    RB_BINDING,
    RB_INSTANCE_ID,
    RB_RUNTIME_LEASE_ID,
    RB_LEASE_GENERATION,
    RB_OWNER,
    RB_ATTESTATION,
    RB_PFID,
    RB_NBYTES,
    RB_PLACEMENT_DICT,
    RB_BINDING_DICT,
    RB_EVIDENCE,
    RB_LEASE_ID,
    RB_GENERATION,
    RB_NNAMES
};

static const char *const rb_names[RB_NNAMES] = {
    "placement", "binding", "instance_id", "runtime_lease_id", "lease_generation", "owner", "attestation",
    "placement_fragment_id", "nbytes", "_placement_dict", "_binding_dict", "evidence", "lease_id", "generation",
};

static PyObject *rb_keys[RB_NNAMES];

/* Item name of obj's instance dict (obj of an exact class the caller checked), new reference;
 * NULL without error when obj has no dict entry for name. */
static PyObject *
rb_field(PyObject *obj, int name)
{
    PyObject *dict = rv_plain_runtime_state(obj); /* (a runtime fragment's layout: itself) */
    if (dict == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
        return NULL;
    }
    PyObject *value = rv_item(dict, rb_keys[name]);
    Py_DECREF(dict);
    return value;
}

/* a == b for two exact str or two exact int (1), anything else (0), error (-1). */
static int
rb_equal_exact(PyObject *a, PyObject *b)
{
    if (a == NULL || b == NULL) return PyErr_Occurred() ? -1 : 0;
    int both_str = PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b);
    int both_int = PyLong_CheckExact(a) && PyLong_CheckExact(b);
    if (!both_str && !both_int) return 0;
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* A non-empty exact str (1), anything else (0). */
static int
rb_text(PyObject *value)
{
    return PyUnicode_CheckExact(value) && PyUnicode_GetLength(value) > 0;
}

/* The checks of BoundWeightFragment.__post_init__ for (placement, binding, instance_id,
 * lease_id, generation, owner None, attestation), decided only for the common case: exact
 * classes, the attestation's entries for the fragment id being these very objects. RV_OK when
 * every check passes, RV_DECLINE when not decided, RV_ERROR. */
static int
rb_fragment_ok(PyObject *const *row, PyObject *attestation, PyObject *const *classes)
{
    PyObject *placement = row[0], *binding = row[1], *instance_id = row[2], *lease_id = row[3];
    PyObject *generation = row[4];
    if ((PyObject *)Py_TYPE(placement) != classes[1] || (PyObject *)Py_TYPE(binding) != classes[2]) return RV_DECLINE;
    if (!rb_text(instance_id) || !rb_text(lease_id) || !PyLong_CheckExact(generation)) return RV_DECLINE;
    unsigned long long g = PyLong_AsUnsignedLongLong(generation);
    if (g == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return RV_ERROR;
        PyErr_Clear();
        return RV_DECLINE;
    }
    PyObject *values[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    int status = RV_DECLINE;
    values[0] = rv_pf_item(placement, MR_PF_PLACEMENT_FRAGMENT_ID, rb_keys[RB_PFID]); /* (its slots, or dict) */
    values[1] = values[0] == NULL ? NULL : rb_field(binding, RB_PFID);
    values[2] = values[1] == NULL ? NULL : rv_pf_item(placement, MR_PF_NBYTES, rb_keys[RB_NBYTES]);
    values[3] = values[2] == NULL ? NULL : rb_field(binding, RB_NBYTES);
    values[4] = values[3] == NULL ? NULL : rb_field(binding, RB_OWNER);
    if (values[4] == NULL) goto done;
    int same = rb_equal_exact(values[0], values[1]);
    if (same > 0 && !PyUnicode_CheckExact(values[0])) same = 0;
    if (same > 0) same = rb_equal_exact(values[2], values[3]);
    if (same <= 0) {
        status = same < 0 ? RV_ERROR : RV_DECLINE;
        goto done;
    }
    if (values[4] != Py_None) goto done; /* owner differs from None */
    if (attestation != Py_None) {
        if ((PyObject *)Py_TYPE(attestation) != classes[3]) goto done;
        PyObject *dict = pd_instance_dict(attestation);
        if (dict == NULL) {
            status = PyErr_ExceptionMatches(PyExc_AttributeError) ? RV_DECLINE : RV_ERROR;
            if (status == RV_DECLINE) PyErr_Clear(); /* not plain (plain_dict.h): the Python path decides */
            goto done;
        }
        PyObject *pdict = PyDict_GetItemWithError(dict, rb_keys[RB_PLACEMENT_DICT]); /* borrowed */
        PyObject *bdict = pdict == NULL ? NULL : PyDict_GetItemWithError(dict, rb_keys[RB_BINDING_DICT]);
        PyObject *evidence = bdict == NULL ? NULL : PyDict_GetItemWithError(dict, rb_keys[RB_EVIDENCE]);
        Py_XINCREF(pdict);
        Py_XINCREF(bdict);
        Py_XINCREF(evidence);
        Py_DECREF(dict);
        int ok = 0;
        if (evidence != NULL && PyDict_CheckExact(pdict) && PyDict_CheckExact(bdict) &&
            (PyObject *)Py_TYPE(evidence) == classes[4]) {
            PyObject *expected_placement = PyDict_GetItemWithError(pdict, values[0]); /* borrowed */
            PyObject *expected_binding =
                expected_placement == NULL ? NULL : PyDict_GetItemWithError(bdict, values[0]);
            /* validates(): the very objects (equal ones are left to the Python path) */
            ok = expected_placement == placement && expected_binding == binding;
            if (ok) {
                values[5] = rb_field(evidence, RB_INSTANCE_ID);
                int fence = rb_equal_exact(instance_id, values[5]);
                Py_CLEAR(values[5]);
                if (fence > 0) {
                    values[5] = rb_field(evidence, RB_LEASE_ID);
                    fence = rb_equal_exact(lease_id, values[5]);
                    Py_CLEAR(values[5]);
                }
                if (fence > 0) {
                    values[5] = rb_field(evidence, RB_GENERATION);
                    fence = rb_equal_exact(generation, values[5]);
                    Py_CLEAR(values[5]);
                }
                ok = fence;
            }
        }
        Py_XDECREF(pdict);
        Py_XDECREF(bdict);
        Py_XDECREF(evidence);
        if (ok < 0 || PyErr_Occurred()) {
            status = RV_ERROR;
            goto done;
        }
        if (!ok) goto done;
    }
    status = RV_OK;
done:
    for (int k = 0; k < 6; k++) Py_XDECREF(values[k]);
    if (status == RV_DECLINE && PyErr_Occurred()) status = RV_ERROR;
    return status;
}

PyDoc_STRVAR(restore_fragments_doc,
"restore_fragments(table, attestations, bound_cls, placement_fragment_cls, runtime_fragment_cls,\n"
"                  attestation_cls, evidence_cls)\n"
"--\n\n"
"The bound fragments of a flat fragment table of a TransferPlan pickle record (six items per\n"
"fragment: placement, binding, instance_id, runtime_lease_id, lease_generation, attestation\n"
"index or None; attestations a list of restored attestations), built as\n"
"BoundWeightFragment._restore builds them, when every fragment passes the constructor's checks\n"
"in the common case (exact classes, equal exact str ids and exact int byte sizes, non-empty\n"
"exact str instance and lease ids, a generation in [0, 2**64), no runtime owner, and the\n"
"attestation's entries for the fragment id being these very placement and binding objects with\n"
"an equal runtime fence). None when anything is not decided here.");

static PyObject *
restore_fragments(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *table, *attestations;
    PyObject *classes[5];
    if (!PyArg_ParseTuple(args, "OOOOOOO:restore_fragments", &table, &attestations, &classes[0], &classes[1],
                          &classes[2], &classes[3], &classes[4]))
        return NULL;
    for (int k = 0; k < 5; k++) {
        if (!PyType_Check(classes[k]) || !(PyType_GetFlags((PyTypeObject *)classes[k]) & Py_TPFLAGS_HEAPTYPE)) {
            PyErr_SetString(PyExc_TypeError, "restore_fragments: classes must be heap types");
            return NULL;
        }
    }
    if (!PyTuple_CheckExact(table) || !PyList_CheckExact(attestations)) Py_RETURN_NONE;
    const Py_ssize_t end = PyTuple_Size(table);
    if (end % 6 != 0) Py_RETURN_NONE;
    /* A bound class stored in a C-owned layout of BoundWeightFragment's fields is built with its
     * values stored directly, in field order (what _restore stores before __post_init__, whose
     * checks rb_fragment_ok made; untracked when every value is inert); another class through its
     * own instance dict, declined when its instances have none. */
    static mr_layout_memo bound_memo;
    mr_layout_class lc;
    if (!mr_bound_layout(&bound_memo, &lc, classes[0])) {
        int has_dict = mr_class_has_dict(classes[0]);
        if (has_dict < 0) return NULL;
        if (!has_dict) Py_RETURN_NONE;
    }
    PyObject *fragments = mr_gc_hide(PyTuple_New(end / 6)); /* out of the collector until full (gctrack.h) */
    if (fragments == NULL) return NULL;
    int status = RV_OK;
    for (Py_ssize_t position = 0; position < end && status == RV_OK; position += 6) {
        PyObject *row[6];
        for (int k = 0; k < 6; k++) row[k] = PyTuple_GetItem(table, position + k); /* borrowed */
        PyObject *attestation = row[5];
        if (attestation != Py_None) {
            Py_ssize_t index = 0;
            status = rr_index(attestation, PyList_Size(attestations), &index);
            if (status != RV_OK) break;
            attestation = PyList_GetItem(attestations, index);
            if (attestation == NULL) {
                status = RV_ERROR;
                break;
            }
        }
        status = rb_fragment_ok(row, attestation, classes);
        if (status != RV_OK) break;
        status = RV_ERROR;
        if (lc.cls != NULL) {
            PyObject *const values[MR_BF_N] = {row[0], row[1], row[2], row[3], row[4], Py_None, attestation};
            PyObject *fragment = mr_layout_new(&lc, values, MR_BF_N);
            if (fragment == NULL || PyTuple_SetItem(fragments, position / 6, fragment) < 0) break; /* steals */
            status = RV_OK;
            continue;
        }
        PyObject *dict = NULL;
        PyObject *fragment = mr_new_instance(classes[0], &dict, "restore_fragments");
        if (fragment == NULL) break;
        int failed = 0;
        for (int k = 0; k < 5 && !failed; k++) failed = PyDict_SetItem(dict, rb_keys[k], row[k]) < 0;
        if (!failed) failed = PyDict_SetItem(dict, rb_keys[RB_OWNER], Py_None) < 0;
        if (!failed) failed = PyDict_SetItem(dict, rb_keys[RB_ATTESTATION], attestation) < 0;
        Py_DECREF(dict);
        if (failed) Py_CLEAR(fragment);
        if (fragment == NULL || PyTuple_SetItem(fragments, position / 6, fragment) < 0) break;
        status = RV_OK;
    }
    if (status != RV_OK) {
        Py_DECREF(fragments);
        if (status == RV_ERROR) return NULL;
        Py_RETURN_NONE;
    }
    mr_gc_show(fragments); /* full */
    return fragments;
}

/* ------------------------------------------------------------------------------------------
 * restore_regions: the operations of a TransferPlan pickle record (bound_pickle) */

PyDoc_STRVAR(restore_regions_doc,
"restore_regions(table, fragments, region_cls, region_fields)\n"
"--\n\n"
"The TransferRegions of a flat operation table of a TransferPlan pickle record (per operation\n"
"its field values in field order, the 2nd and 3rd being indices into the tuple fragments),\n"
"built as bound_pickle._restore_transfer_plan builds them (instance dicts in field order, the\n"
"indices replaced by their fragments; region_fields a tuple of str). None when the table is\n"
"not exactly that shape (the Python version then raises its message).");

static PyObject *
restore_regions(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *table, *fragments, *region_cls, *names;
    if (!PyArg_ParseTuple(args, "OOOO:restore_regions", &table, &fragments, &region_cls, &names)) return NULL;
    if (!PyType_Check(region_cls) || !(PyType_GetFlags((PyTypeObject *)region_cls) & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "restore_regions: classes must be heap types");
        return NULL;
    }
    int names_ok = PyTuple_CheckExact(names) ? rr_names(names, PyTuple_Size(names)) : 0;
    if (names_ok < 0) return NULL;
    if (names_ok == 0 || PyTuple_Size(names) < 3) {
        PyErr_SetString(PyExc_TypeError, "restore_regions: field names must be a tuple of str");
        return NULL;
    }
    if (!PyTuple_CheckExact(table) || !PyTuple_CheckExact(fragments)) Py_RETURN_NONE;
    const Py_ssize_t size = PyTuple_Size(names);
    const Py_ssize_t end = PyTuple_Size(table);
    const Py_ssize_t count = PyTuple_Size(fragments);
    if (end % size != 0) Py_RETURN_NONE;
    PyObject *regions = mr_gc_hide(PyTuple_New(end / size)); /* out of the collector until full (gctrack.h) */
    if (regions == NULL) return NULL;
    /* region_cls in a C-owned layout of exactly these names (layout.h): built with the values
     * stored directly (what its default pickling's __setstate__ stores), untracked when inert */
    static mr_layout_memo restore_memo;
    mr_layout_class rl;
    (void)mr_layout_memo_check(&restore_memo, &rl, region_cls, names);
    int status = RV_OK;
    for (Py_ssize_t position = 0; position < end && status == RV_OK; position += size) {
        Py_ssize_t source = 0, target = 0;
        status = rr_index(PyTuple_GetItem(table, position + 1), count, &source);
        if (status == RV_OK) status = rr_index(PyTuple_GetItem(table, position + 2), count, &target);
        if (status != RV_OK) break;
        status = RV_ERROR;
        if (rl.cls != NULL && size <= MR_LAYOUT_MAX_FIELDS) {
            PyObject *values[MR_LAYOUT_MAX_FIELDS];
            for (Py_ssize_t j = 0; j < size; j++) values[j] = PyTuple_GetItem(table, position + j); /* in range */
            values[1] = PyTuple_GetItem(fragments, source);
            values[2] = PyTuple_GetItem(fragments, target);
            PyObject *region = mr_layout_new_gc(&rl, values, size, 0);
            if (region == NULL || PyTuple_SetItem(regions, position / size, region) < 0) break;
            status = RV_OK;
            continue;
        }
        PyObject *dict = NULL;
        PyObject *region = rr_object(region_cls, names, size, table, position, &dict);
        if (region == NULL) {
            if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
                /* no instance dict (a layout class not accepted above): declined */
                PyErr_Clear();
                status = RV_DECLINE;
            }
            break;
        }
        if (PyDict_SetItem(dict, PyTuple_GetItem(names, 1), PyTuple_GetItem(fragments, source)) < 0 ||
            PyDict_SetItem(dict, PyTuple_GetItem(names, 2), PyTuple_GetItem(fragments, target)) < 0) {
            Py_DECREF(dict);
            Py_DECREF(region);
            break;
        }
        Py_DECREF(dict);
        if (region == NULL || PyTuple_SetItem(regions, position / size, region) < 0) break;
        status = RV_OK;
    }
    if (status != RV_OK) {
        Py_DECREF(regions);
        if (status == RV_ERROR) return NULL;
        Py_RETURN_NONE;
    }
    mr_gc_show(regions); /* full */
    return regions;
}

/* ------------------------------------------------------------------------------------------
 * deps_unchanged: the exact check of an attested view cached on an attestation */

PyDoc_STRVAR(deps_unchanged_doc,
"deps_unchanged(deps, /)\n"
"--\n\n"
"``deps`` is a tuple ``(object0, snapshot0, object1, snapshot1, ...)`` where each snapshot is\n"
"a tuple ``(key0, value0, key1, value1, ...)`` of the object's instance dict (or of the object\n"
"itself when it is an exact dict) as recorded. True when every object still holds exactly\n"
"those keys and values, compared by pointer identity, in order, with the same size; False as\n"
"soon as one differs (or has no instance dict, or one that is not an exact dict). TypeError\n"
"when ``deps`` is not a tuple of even length or a snapshot is not a tuple.");

static PyObject *
deps_unchanged(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *deps = NULL;
    if (!PyArg_ParseTuple(args, "O:deps_unchanged", &deps)) return NULL;
    int same = dc_all_unchanged(deps, NULL);
    if (same < 0) return NULL;
    return PyBool_FromLong(same);
}

/* ------------------------------------------------------------------------------------------
 * operation_views: the per-operation loop of contracts.build_operation_views */

/* What the loop derives from one source fragment (new references; bucket NULL: none). */
typedef struct {
    PyObject *bucket;
    PyObject *pp;
    PyObject *stage;
} ov_source;

static void
ov_source_clear(ov_source *info)
{
    Py_CLEAR(info->bucket);
    Py_CLEAR(info->pp);
    Py_CLEAR(info->stage);
}

/* ``d[name]`` as a new reference: RV_OK, RV_DECLINE (missing), RV_ERROR. */
static int
ov_get(PyObject *dict, PyObject *name, PyObject **out)
{
    /* (dict: an instance dict, or a runtime fragment's state from rv_runtime_state) */
    *out = PyDict_Check(dict) ? PyDict_GetItemWithError(dict, name) : mr_runtime_state_get(&rv_runtime_memo, dict, name);
    if (*out != NULL) {
        Py_INCREF(*out);
        return RV_OK;
    }
    return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
}

/* ``table.get(key)`` as a new reference (NULL: missing); the bucket must be an exact list. */
static int
ov_bucket(PyObject *table, PyObject *key, PyObject **bucket)
{
    *bucket = PyDict_GetItemWithError(table, key);
    if (*bucket == NULL) return PyErr_Occurred() ? RV_ERROR : RV_OK;
    if (!PyList_CheckExact(*bucket)) {
        *bucket = NULL;
        return RV_DECLINE;
    }
    Py_INCREF(*bucket);
    return RV_OK;
}

/* ``(fragment.rank.pp, fragment.pipeline_stage_id)`` of an exact PlacementFragment (checked by
 * the caller) and, with ``pfid`` non-NULL, its placement_fragment_id: new references; the rank
 * an exact ParallelRank, pp an exact int, the stage an exact int or None, the id an exact str. */
static int
ov_placement(PyObject *fragment, PyTypeObject *rank_type, PyObject **pp, PyObject **stage, PyObject **pfid)
{
    *pp = NULL;
    *stage = NULL;
    if (pfid != NULL) *pfid = NULL;
    /* (its instance state: its layout's slots, rv_pf_item; missing / empty declines) */
    PyObject *rank = rv_pf_item(fragment, MR_PF_RANK, rf_keys[RF_RANK]), *rank_dict = NULL;
    int rc = rank != NULL ? RV_OK : PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    if (rc == RV_OK) {
        *stage = rv_pf_item(fragment, MR_PF_PIPELINE_STAGE_ID, rf_keys[RF_STAGE]);
        rc = *stage != NULL ? RV_OK : PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    }
    if (rc == RV_OK && *stage != Py_None && !PyLong_CheckExact(*stage)) rc = RV_DECLINE;
    if (rc == RV_OK && pfid != NULL) {
        *pfid = rv_pf_item(fragment, MR_PF_PLACEMENT_FRAGMENT_ID, rf_keys[RF_PFID]);
        rc = *pfid != NULL ? RV_OK : PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
        if (rc == RV_OK && !PyUnicode_CheckExact(*pfid)) rc = RV_DECLINE;
    }
    if (rc == RV_OK && Py_TYPE(rank) != rank_type) rc = RV_DECLINE;
    if (rc == RV_OK) {
        rank_dict = pd_instance_dict(rank);
        if (rank_dict == NULL) rc = RV_ERROR;
    }
    if (rc == RV_OK) rc = ov_get(rank_dict, rf_keys[RF_PP], pp);
    if (rc == RV_OK && !PyLong_CheckExact(*pp)) rc = RV_DECLINE;
    Py_XDECREF(rank_dict);
    Py_XDECREF(rank);
    if (rc != RV_OK) {
        Py_CLEAR(*pp);
        Py_CLEAR(*stage);
        if (pfid != NULL) Py_CLEAR(*pfid);
    }
    return rc;
}

typedef struct {
    PyTypeObject *region, *placement, *bound, *binding, *rank, *stored;
    PyObject *s_logical, *s_runtime, *t_logical, *t_runtime;
} ov_config;

/* Bucket (looked up in ``logical`` or ``runtime``) and route half of a placement or bound
 * fragment; a stored snapshot (``stored_ok``) has neither. */
static int
ov_fragment(PyObject *fragment, const ov_config *cfg, PyObject *logical, PyObject *runtime, int stored_ok,
            ov_source *info)
{
    PyTypeObject *type = Py_TYPE(fragment);
    int rc;
    if (stored_ok && type == cfg->stored) {
        info->pp = Py_NewRef(Py_None);
        info->stage = Py_NewRef(Py_None);
        return RV_OK;
    }
    if (type == cfg->placement) {
        PyObject *pfid = NULL;
        rc = ov_placement(fragment, cfg->rank, &info->pp, &info->stage, &pfid);
        if (rc == RV_OK) rc = ov_bucket(logical, pfid, &info->bucket);
        Py_XDECREF(pfid);
        return rc;
    }
    if (type != cfg->bound) return RV_DECLINE;
    /* BoundWeightFragment: bucket of binding.fragment_id, route half of its placement (its
     * layout's slots, or its instance dict: rv_bound_item). */
    PyObject *placement = NULL, *binding = NULL, *binding_dict = NULL, *fragment_id = NULL;
    placement = rv_bound_item(fragment, MR_BF_PLACEMENT, rf_keys[RF_PLACEMENT]);
    binding = placement == NULL ? NULL : rv_bound_item(fragment, MR_BF_BINDING, rf_keys[RF_BINDING]);
    rc = binding != NULL ? RV_OK : PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    if (rc == RV_OK && (Py_TYPE(placement) != cfg->placement || Py_TYPE(binding) != cfg->binding)) rc = RV_DECLINE;
    if (rc == RV_OK) {
        binding_dict = rv_runtime_state(binding); /* (its layout, or its instance dict) */
        if (binding_dict == NULL) rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    }
    if (rc == RV_OK) rc = ov_get(binding_dict, rf_keys[RF_FRAGMENT_ID], &fragment_id);
    if (rc == RV_OK && !PyUnicode_CheckExact(fragment_id)) rc = RV_DECLINE;
    if (rc == RV_OK) rc = ov_bucket(runtime, fragment_id, &info->bucket);
    if (rc == RV_OK) rc = ov_placement(placement, cfg->rank, &info->pp, &info->stage, NULL);
    Py_XDECREF(fragment_id);
    Py_XDECREF(binding_dict);
    Py_XDECREF(binding);
    Py_XDECREF(placement);
    if (rc != RV_OK) ov_source_clear(info);
    return rc;
}

/* Value equality of two route values, each an exact int or None: 1, 0, -1 on error. */
static int
ov_same(PyObject *a, PyObject *b)
{
    if (a == b) return 1;
    if (a == Py_None || b == Py_None) return 0;
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

PyDoc_STRVAR(operation_views_doc,
"operation_views(operations, s_logical, s_runtime, t_logical, t_runtime, region_type,\n"
"                placement_type, bound_type, binding_type, rank_type, stored_type)\n"
"--\n\n"
"The per-operation loop of ``contracts.build_operation_views``: appends each operation's index\n"
"to its source bucket (``s_logical[placement_fragment_id]`` of a placement source,\n"
"``s_runtime[binding.fragment_id]`` of a bound one, none for a stored snapshot) and to its\n"
"target bucket likewise (``t_logical``, ``t_runtime``), and returns the route table\n"
"``{(source pp, source stage, target pp, target stage): [indices]}`` (None for a stored\n"
"source's half). ``operations`` is a tuple; the four tables are dicts whose values are lists.\n"
"Returns ``None`` (\"not decided here\"; the buckets may then hold some of the indices) unless\n"
"every operation is exactly ``region_type`` with a source of the exact placement, bound or\n"
"stored type and a target of the exact placement or bound type, every field read is present,\n"
"a bound fragment's placement and binding and every rank have their exact classes, ids are\n"
"exact str, ``pp`` an exact int, stages exact ints or None and every bucket found an exact list.");

static PyObject *
operation_views(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *operations;
    ov_config cfg;
    PyObject *types[6];
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!O!O!O!O!:operation_views", &PyTuple_Type, &operations, &PyDict_Type,
                          &cfg.s_logical, &PyDict_Type, &cfg.s_runtime, &PyDict_Type, &cfg.t_logical, &PyDict_Type,
                          &cfg.t_runtime, &PyType_Type, &types[0], &PyType_Type, &types[1], &PyType_Type, &types[2],
                          &PyType_Type, &types[3], &PyType_Type, &types[4], &PyType_Type, &types[5])) {
        return NULL;
    }
    cfg.region = (PyTypeObject *)types[0];
    cfg.placement = (PyTypeObject *)types[1];
    cfg.bound = (PyTypeObject *)types[2];
    cfg.binding = (PyTypeObject *)types[3];
    cfg.rank = (PyTypeObject *)types[4];
    cfg.stored = (PyTypeObject *)types[5];
    Py_ssize_t n = PyTuple_Size(operations);
    if (n < 0) return NULL;
    if ((size_t)n > SIZE_MAX / 64) return PyErr_NoMemory();
    /* The four tables are probed with exact-str ids: plain dicts only, else a key forged into a
     * str subclass (an executor's placement_fragment_ids) runs its __eq__ in a probe (plain_dict.h;
     * AUDIT5 F5). The Python loop decides then. */
    if (!pd_plain_keys(cfg.s_logical) || !pd_plain_keys(cfg.s_runtime) || !pd_plain_keys(cfg.t_logical)
        || !pd_plain_keys(cfg.t_runtime))
        Py_RETURN_NONE;
    /* Source-info cache by fragment pointer (the operations keep every source alive; the
     * cache holds its own references to the values). */
    size_t cap = 8;
    while (cap < (size_t)n * 2 + 1) cap *= 2; /* n <= SIZE_MAX / 64: cannot overflow */
    PyObject **keys = mr_alloc_array(cap, sizeof(PyObject *));
    ov_source *values = keys == NULL ? NULL : mr_alloc_array(cap, sizeof(ov_source));
    size_t mask = cap - 1;
    PyObject *routes = values == NULL ? NULL : PyDict_New();
    PyObject *result = NULL;
    PyObject *last_key = NULL, *last_list = NULL;
    if (keys == NULL || values == NULL) goto done;
    memset(keys, 0, cap * sizeof(PyObject *));
    if (routes == NULL) goto done;
    static mr_layout_memo views_memo; /* cfg.region in TransferRegion's C-owned layout (layout.h) */
    mr_layout_class rl;
    (void)mr_region_layout(&views_memo, &rl, types[0]);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyTuple_GetItem(operations, i);
        if (op == NULL) goto done;
        if (Py_TYPE(op) != cfg.region) goto decline;
        PyObject *source = NULL, *target = NULL;
        int rc = RV_OK;
        PyObject *const *fields = mr_layout_fields(op, &rl);
        if (fields != NULL) {
            /* an empty field is a missing key (decline) */
            source = fields[MR_RG_SOURCE];
            target = fields[MR_RG_TARGET];
            if (source == NULL || target == NULL) goto decline;
            Py_INCREF(source);
            Py_INCREF(target);
        } else {
            PyObject *dict = pd_instance_dict(op);
            if (dict == NULL) {
                /* no instance dict (a layout class not accepted): the Python loop decides */
                if (!PyErr_ExceptionMatches(PyExc_AttributeError)) goto done;
                PyErr_Clear();
                goto decline;
            }
            rc = ov_get(dict, rv_keys[RV_SOURCE], &source);
            if (rc == RV_OK) rc = ov_get(dict, rv_keys[RV_TARGET], &target);
            Py_DECREF(dict);
        }
        const ov_source *info = NULL;
        if (rc == RV_OK) {
            size_t slot = mr_ptr_slot(source, mask);
            while (keys[slot] != NULL && keys[slot] != source) slot = (slot + 1) & mask;
            if (keys[slot] == NULL) {
                ov_source fresh = {NULL, NULL, NULL};
                rc = ov_fragment(source, &cfg, cfg.s_logical, cfg.s_runtime, 1, &fresh);
                if (rc == RV_OK) {
                    keys[slot] = source; /* alive in the operation (a reference is held below) */
                    values[slot] = fresh;
                    Py_INCREF(source);
                }
            }
            if (rc == RV_OK) info = &values[slot];
        }
        ov_source half = {NULL, NULL, NULL};
        if (rc == RV_OK) rc = ov_fragment(target, &cfg, cfg.t_logical, cfg.t_runtime, 0, &half);
        Py_XDECREF(source);
        Py_XDECREF(target);
        if (rc == RV_ERROR) goto done;
        if (rc == RV_DECLINE) goto decline;
        PyObject *index = PyLong_FromSsize_t(i);
        int failed = index == NULL || (info->bucket != NULL && PyList_Append(info->bucket, index) < 0)
                     || (half.bucket != NULL && PyList_Append(half.bucket, index) < 0);
        /* The route's bucket: the previous operation's when the route is equal. */
        int same = 0;
        if (!failed && last_key != NULL) {
            PyObject *route[4] = {info->pp, info->stage, half.pp, half.stage};
            same = 1;
            for (Py_ssize_t k = 0; k < 4 && same == 1; k++) same = ov_same(PyTuple_GetItem(last_key, k), route[k]);
            failed = same < 0;
        }
        if (!failed && !same) {
            PyObject *key = PyTuple_Pack(4, info->pp, info->stage, half.pp, half.stage);
            PyObject *list = key == NULL ? NULL : PyDict_GetItemWithError(routes, key);
            if (list != NULL) {
                Py_INCREF(list);
            } else if (key == NULL || PyErr_Occurred() || (list = PyList_New(0)) == NULL
                       || PyDict_SetItem(routes, key, list) < 0) {
                Py_XDECREF(list);
                Py_XDECREF(key);
                failed = 1;
            }
            if (!failed) {
                Py_XDECREF(last_key);
                Py_XDECREF(last_list);
                last_key = key;
                last_list = list;
            }
        }
        if (!failed) failed = PyList_Append(last_list, index) < 0;
        Py_XDECREF(index);
        ov_source_clear(&half);
        if (failed) goto done;
    }
    result = Py_NewRef(routes);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(last_key);
    Py_XDECREF(last_list);
    Py_XDECREF(routes);
    if (keys != NULL && values != NULL) {
        for (size_t slot = 0; slot <= mask; slot++) {
            if (keys[slot] == NULL) continue;
            ov_source_clear(&values[slot]);
            Py_DECREF(keys[slot]);
        }
    }
    PyMem_Free(keys);
    PyMem_Free(values);
    if (result == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear(); /* an instance dict that is not plain (plain_dict.h): the Python loop decides */
        result = Py_NewRef(Py_None);
    }
    return result;
}

/* --- revalidate_shapes ------------------------------------------------------------------ */

/* F4 (session 24): the field kinds of every attestation placement and evidence the fast path
 * trusts. The rules check them before they read the attestations
 * (bound_contracts._require_typed_attestations: field_types.evidence_shape_failure and
 * placement_shape_failure(declared_tensors=False); the plan's target placement likewise), and
 * refuse e.g. a descriptor whose tensor_id was replaced by a str subclass after construction
 * (object.__setattr__). The other passes of the fast path never read most of these fields (the
 * descriptors not at all), so without this check the fast path accepted what the rules refuse.
 * The accept set here is contained in the rules' (exact classes where the rules take
 * subclasses): anything else declines and the rules raise their first failure. */

enum {
    SH_MANIFEST,
    SH_PART,
    SH_TENSOR,
    SH_FRAGMENT,
    SH_EVIDENCE,
    SH_RUNTIME,
    SH_RANK,
    SH_SPLIT,
    SH_REPLICATED,
    SH_OWNERSHIP,
    SH_VIEW,
    SH_EXECUTOR,
    SH_ATTESTATION,
    SH_NCLASSES
};

enum {
    SHK_RESOURCE_ID,
    SHK_PLACEMENT_ID,
    SHK_REVISION,
    SHK_PLACEMENT_SET_ID,
    SHK_WEIGHT_GENERATION,
    SHK_DIGEST_CACHE,
    SHK_PARTS,
    SHK_PARTICIPANT_ID,
    SHK_RANK,
    SHK_TENSORS,
    SHK_FRAGMENTS,
    SHK_GLOBAL_SHAPE,
    SHK_TENSOR_ID,
    SHK_DTYPE,
    SHK_ITEMSIZE,
    SHK_SHARD_DIMS,
    SHK_PARALLEL_AXES,
    SHK_LAYER_ID,
    SHK_EXPERT_ID,
    SHK_LAYOUT_FINGERPRINT,
    SHK_KIND,
    SHK_DIM,
    SHK_PLACEMENT_DIGEST,
    SHK_INSTANCE_ID,
    SHK_LEASE_ID,
    SHK_GENERATION,
    SHK_DP,
    SHK_TP,
    SHK_PP,
    SHK_EP,
    SHK_PLACEMENT,
    SHK_EVIDENCE,
    SHK_ATTESTATION,
    SHK_N
};

static const char *const sh_names[SHK_N] = {
    "resource_id", "placement_id", "revision", "placement_set_id", "weight_generation", "_digest_cache", "parts",
    "participant_id", "rank", "tensors", "fragments", "global_shape", "tensor_id", "dtype", "itemsize",
    "shard_dims", "parallel_axes", "layer_id", "expert_id", "layout_fingerprint", "kind", "dim",
    "placement_digest", "instance_id", "lease_id", "generation", "dp", "tp", "pp", "ep", "placement", "evidence",
    "attestation",
};

static PyObject *sh_keys[SHK_N];

/* 1 when value is an exact tuple whose items are all of exactly item_type, else 0 (no error). */
static int
sh_tuple_of(PyObject *value, PyTypeObject *item_type)
{
    return mr_exact_tuple_of(value, item_type);
}

/* Kinds (field_types / _field_kinds.typed_value): 's' exact str, 'i' exact int, 'n' None or
 * exact int, 't' exact tuple of exact ints, 'S' exact tuple of exact strs. Inlined: every call
 * passes a constant kind, so only the test of that kind remains (SHAPE38: the calls were ~30 Ir
 * each, ~470 per replace). */
static inline __attribute__((always_inline)) int
sh_kind(PyObject *value, char kind)
{
    if (value == NULL) return 0;
    switch (kind) {
    case 's':
        return PyUnicode_CheckExact(value);
    case 'i':
        return PyLong_CheckExact(value);
    case 'n':
        return value == Py_None || PyLong_CheckExact(value);
    case 't':
        return sh_tuple_of(value, &PyLong_Type);
    case 'S':
        return sh_tuple_of(value, &PyUnicode_Type);
    default:
        return 0;
    }
}

typedef struct {
    PyTypeObject *cls[SH_NCLASSES];
    rv_table seen; /* descriptors, ranks, placements and evidences already checked */
    size_t n_seen;
    mr_layout_class pf;  /* PlacementFragment's C-owned layout (cls NULL: not one) */
    mr_layout_class rt;  /* RuntimeBindingFragment's */
} sh_state;

/* 1 when obj was seen before (else it is recorded: 0), -1 with MemoryError. */
static int
sh_seen(sh_state *st, PyObject *obj)
{
    rv_table *t = &st->seen;
    size_t slot = mr_ptr_slot(obj, t->mask);
    while (t->keys[slot] != NULL) {
        if (t->keys[slot] == obj) return 1;
        slot = (slot + 1) & t->mask;
    }
    /* (one probe: the empty slot found is where rs_set_add would store obj, unless it grows) */
    if ((st->n_seen + 1) * 2 + 1 <= t->mask + 1) t->keys[slot] = obj;
    else if (rv_table_reserve(t, st->n_seen + 1) < 0) return -1;
    else rs_set_add(t, obj);
    st->n_seen++;
    return 0;
}

/* The exact instance dict of obj (new reference), or NULL with no error set (decline):
 * pd_instance_values for n of its keys (sh_keys indexes; MEMO36: the values taken in the walk
 * that checks the keys, a lookup fewer per field). values[k]: borrowed, or NULL (sh_get looks
 * the name up). The pass runs no Python code between the walk and its reads. */
static PyObject *
sh_dict_read(PyObject *obj, const int *keys, int n, PyObject **values)
{
    PyObject *d = pd_instance_values(obj, sh_keys, keys, n, values);
    if (d == NULL) PyErr_Clear();
    return d;
}

/* The value of d's key sh_keys[key] (borrowed; the caller holds d): value when sh_dict_read took
 * it, else looked up; NULL with an error set or not (missing). */
static PyObject *
sh_get(PyObject *d, PyObject *value, int key)
{
    return value != NULL ? value : PyDict_GetItemWithError(d, sh_keys[key]);
}

/* d[key] of kind (value: sh_dict_read's, or NULL): RV_OK, RV_DECLINE or RV_ERROR. */
static inline __attribute__((always_inline)) int
sh_value(PyObject *d, PyObject *value, int key, char kind)
{
    value = sh_get(d, value, key);
    if (value == NULL) return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    return sh_kind(value, kind) ? RV_OK : RV_DECLINE;
}

/* sh_values for field k of a constant kind, written out at each call (no kinds table walk):
 * rc (RV_OK so far) becomes field k's outcome. */
#define SH_FIELD(rc, d, values, keys, k, kind)                                                      \
    do {                                                                                           \
        if ((rc) == RV_OK) (rc) = sh_value((d), (values)[k], (keys)[k], (kind));                   \
    } while (0)

/* An exact ParallelRank of four exact ints (typed_value "rank"), each distinct rank once. */
static int
sh_rank(sh_state *st, PyObject *rank)
{
    static const int keys[4] = {SHK_DP, SHK_TP, SHK_PP, SHK_EP};
    if (rank == NULL || Py_TYPE(rank) != st->cls[SH_RANK]) return RV_DECLINE;
    int seen = sh_seen(st, rank);
    if (seen != 0) return seen < 0 ? RV_ERROR : RV_OK;
    PyObject *values[4];
    PyObject *d = sh_dict_read(rank, keys, 4, values);
    if (d == NULL) return RV_DECLINE;
    int rc = RV_OK;
    SH_FIELD(rc, d, values, keys, 0, 'i');
    SH_FIELD(rc, d, values, keys, 1, 'i');
    SH_FIELD(rc, d, values, keys, 2, 'i');
    SH_FIELD(rc, d, values, keys, 3, 'i');
    Py_DECREF(d);
    return rc;
}

/* An exact TensorDescriptor with its fields' kinds (tensor_fields_failure), each once. */
static int
sh_tensor(sh_state *st, PyObject *tensor)
{
    static const int keys[9] = {SHK_GLOBAL_SHAPE, SHK_TENSOR_ID,  SHK_DTYPE,     SHK_ITEMSIZE,
                                SHK_SHARD_DIMS,   SHK_LAYER_ID,   SHK_EXPERT_ID, SHK_LAYOUT_FINGERPRINT,
                                SHK_PARALLEL_AXES};
    if (Py_TYPE(tensor) != st->cls[SH_TENSOR]) return RV_DECLINE;
    int seen = sh_seen(st, tensor);
    if (seen != 0) return seen < 0 ? RV_ERROR : RV_OK;
    PyObject *values[9];
    PyObject *d = sh_dict_read(tensor, keys, 9, values);
    if (d == NULL) return RV_DECLINE;
    int rc = RV_OK;
    SH_FIELD(rc, d, values, keys, 0, 't');
    SH_FIELD(rc, d, values, keys, 1, 's');
    SH_FIELD(rc, d, values, keys, 2, 's');
    SH_FIELD(rc, d, values, keys, 3, 'i');
    SH_FIELD(rc, d, values, keys, 4, 't');
    SH_FIELD(rc, d, values, keys, 5, 'n');
    SH_FIELD(rc, d, values, keys, 6, 'n');
    SH_FIELD(rc, d, values, keys, 7, 's');
    PyObject *axes = rc == RV_OK ? sh_get(d, values[8], SHK_PARALLEL_AXES) : NULL;
    if (rc == RV_OK && axes == NULL) rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    if (rc == RV_OK && !PyTuple_CheckExact(axes)) rc = RV_DECLINE;
    Py_ssize_t n = rc == RV_OK ? PyTuple_Size(axes) : 0;
    if (n < 0) rc = RV_ERROR;
    for (Py_ssize_t i = 0; rc == RV_OK && i < n; i++) {
        PyObject *axis = PyTuple_GetItem(axes, i);
        if (axis == NULL) {
            rc = RV_ERROR;
            break;
        }
        PyTypeObject *kind = Py_TYPE(axis);
        if (kind != st->cls[SH_SPLIT] && kind != st->cls[SH_REPLICATED] && kind != st->cls[SH_OWNERSHIP]) {
            rc = RV_DECLINE;
            break;
        }
        int seen_axis = sh_seen(st, axis); /* (descriptors share their axis objects) */
        if (seen_axis != 0) {
            if (seen_axis < 0) rc = RV_ERROR;
            continue;
        }
        static const int axis_keys[2] = {SHK_KIND, SHK_DIM};
        PyObject *axis_values[2];
        PyObject *ad = sh_dict_read(axis, axis_keys, 2, axis_values);
        if (ad == NULL) {
            rc = RV_DECLINE;
            break;
        }
        rc = sh_value(ad, axis_values[0], SHK_KIND, 's');
        if (rc == RV_OK && kind == st->cls[SH_SPLIT]) rc = sh_value(ad, axis_values[1], SHK_DIM, 'i');
        Py_DECREF(ad);
    }
    Py_DECREF(d);
    return rc;
}

/* An exact PlacementFragment (C-owned layout) with every field of its kind
 * (PLACEMENT_FRAGMENT_FIELDS). */
static int
sh_fragment(sh_state *st, PyObject *fragment)
{
    if (Py_TYPE(fragment) != st->cls[SH_FRAGMENT]) return RV_DECLINE;
    PyObject *const *f = mr_layout_fields(fragment, &st->pf);
    if (f == NULL) return RV_DECLINE;
    if (!sh_kind(f[MR_PF_GLOBAL_OFFSET], 't') || !sh_kind(f[MR_PF_LOCAL_SHAPE], 't') ||
        !sh_kind(f[MR_PF_TENSOR_ID], 's') || !sh_kind(f[MR_PF_NBYTES], 'i') ||
        !sh_kind(f[MR_PF_PIPELINE_STAGE_ID], 'n') || !sh_kind(f[MR_PF_ALIASES], 'S') ||
        !sh_kind(f[MR_PF_PLACEMENT_FRAGMENT_ID], 's'))
        return RV_DECLINE;
    return sh_rank(st, f[MR_PF_RANK]);
}

/* An exact RuntimeBindingFragment (C-owned layout) with every field of its kind
 * (RUNTIME_FRAGMENT_FIELDS). */
static int
sh_runtime(sh_state *st, PyObject *fragment)
{
    if (Py_TYPE(fragment) != st->cls[SH_RUNTIME]) return RV_DECLINE;
    PyObject *const *f = mr_layout_fields(fragment, &st->rt);
    if (f == NULL) return RV_DECLINE;
    /* (every field but owner, each test written out: constant kinds, no table walk) */
    if (!sh_kind(f[MR_RF_PLACEMENT_FRAGMENT_ID], 's') || !sh_kind(f[MR_RF_FRAGMENT_ID], 's') ||
        !sh_kind(f[MR_RF_ADDRESS], 'i') || !sh_kind(f[MR_RF_NBYTES], 'i') || !sh_kind(f[MR_RF_WORKER_ID], 's') ||
        !sh_kind(f[MR_RF_ENDPOINT], 's') || !sh_kind(f[MR_RF_DEVICE], 's') || !sh_kind(f[MR_RF_ITEMSIZE], 'i') ||
        !sh_kind(f[MR_RF_STORAGE_ADDRESS], 'i') || !sh_kind(f[MR_RF_STORAGE_NBYTES], 'i') ||
        !sh_kind(f[MR_RF_STORAGE_OFFSET_BYTES], 'i') || !sh_kind(f[MR_RF_LOCAL_SHAPE], 't') ||
        !sh_kind(f[MR_RF_STRIDES_BYTES], 't'))
        return RV_DECLINE;
    _Static_assert(MR_RF_N == 14, "every RuntimeBindingFragment field but owner is tested above");
    return RV_OK;
}

/* Hints only, for a tuple of C-owned layout fragments of lc's class (nfields fields): the
 * fragment 2 * SH_AHEAD further on, the field objects of the one SH_AHEAD further on. Nothing is
 * decided on them, nothing held, no Python code runs. */
#define SH_AHEAD 6

static inline __attribute__((always_inline)) void
sh_prefetch(PyObject *items, Py_ssize_t i, Py_ssize_t n, const mr_layout_class *lc, int nfields)
{
    if (i + 2 * SH_AHEAD < n) {
        const char *far = (const char *)PyTuple_GetItem(items, i + 2 * SH_AHEAD);
        if (far != NULL) {
            __builtin_prefetch(far);
            __builtin_prefetch(far + 64);
        }
    }
    if (i + SH_AHEAD < n) {
        PyObject *near = PyTuple_GetItem(items, i + SH_AHEAD);
        PyObject *const *f = near != NULL ? mr_layout_fields(near, lc) : NULL;
        for (int k = 0; f != NULL && k < nfields; k++) {
            if (f[k] != NULL) __builtin_prefetch(f[k]);
        }
    }
}

/* Each item of the exact tuple (or, with lists, list) seq through check; lc (or NULL): the items'
 * layout class, for the prefetch hints. */
static int
sh_items_hinted(sh_state *st, PyObject *seq, int lists, int (*check)(sh_state *, PyObject *),
                const mr_layout_class *lc, int nfields)
{
    if (seq == NULL) return PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
    if (!PyTuple_CheckExact(seq) && !(lists && PyList_CheckExact(seq))) return RV_DECLINE;
    /* (a list: a private copy, nothing below runs code that could resize it, but cheap insurance) */
    PyObject *items = PyTuple_CheckExact(seq) ? Py_NewRef(seq) : PySequence_Tuple(seq); /* (what it returns) */
    if (items == NULL) return RV_ERROR;
    Py_ssize_t n = PyTuple_Size(items);
    int rc = n < 0 ? RV_ERROR : RV_OK;
    for (Py_ssize_t i = 0; rc == RV_OK && i < n; i++) {
        if (lc != NULL) sh_prefetch(items, i, n, lc, nfields);
        else if (nfields == 0 && check == sh_tensor && i + SH_AHEAD < n) {
            /* a descriptor ahead, unless already checked (its lines only: hints) */
            PyObject *ahead = PyTuple_GetItem(items, i + SH_AHEAD);
            if (ahead != NULL && !rs_set_has(&st->seen, ahead)) __builtin_prefetch(ahead);
        }
        PyObject *item = PyTuple_GetItem(items, i);
        rc = item == NULL ? RV_ERROR : check(st, item);
    }
    Py_DECREF(items);
    return rc;
}

static int
sh_items(sh_state *st, PyObject *seq, int lists, int (*check)(sh_state *, PyObject *))
{
    return sh_items_hinted(st, seq, lists, check, NULL, 0);
}

/* An exact WeightPlacementPart: participant_id, rank, tensors, fragments (placement_shape_failure). */
static int
sh_part(sh_state *st, PyObject *part)
{
    if (Py_TYPE(part) != st->cls[SH_PART]) return RV_DECLINE;
    static const int keys[4] = {SHK_PARTICIPANT_ID, SHK_RANK, SHK_TENSORS, SHK_FRAGMENTS};
    PyObject *values[4];
    PyObject *d = sh_dict_read(part, keys, 4, values);
    if (d == NULL) return RV_DECLINE;
    int rc = sh_value(d, values[0], SHK_PARTICIPANT_ID, 's');
    if (rc == RV_OK) {
        PyObject *rank = sh_get(d, values[1], SHK_RANK);
        rc = rank == NULL ? (PyErr_Occurred() ? RV_ERROR : RV_DECLINE) : sh_rank(st, rank);
    }
    if (rc == RV_OK) rc = sh_items_hinted(st, sh_get(d, values[2], SHK_TENSORS), 0, sh_tensor, NULL, 0);
    if (rc == RV_OK)
        rc = sh_items_hinted(st, sh_get(d, values[3], SHK_FRAGMENTS), 0, sh_fragment, &st->pf, MR_PF_N);
    Py_DECREF(d);
    return rc;
}

/* An exact WeightPlacementManifest (placement_shape_failure(declared_tensors=False)), once. */
static int
sh_placement(sh_state *st, PyObject *placement)
{
    static const int keys[7] = {SHK_RESOURCE_ID,       SHK_PLACEMENT_ID,  SHK_REVISION, SHK_PLACEMENT_SET_ID,
                                SHK_WEIGHT_GENERATION, SHK_DIGEST_CACHE, SHK_PARTS};
    if (Py_TYPE(placement) != st->cls[SH_MANIFEST]) return RV_DECLINE;
    int seen = sh_seen(st, placement);
    if (seen != 0) return seen < 0 ? RV_ERROR : RV_OK;
    PyObject *values[7];
    PyObject *d = sh_dict_read(placement, keys, 7, values);
    if (d == NULL) return RV_DECLINE;
    int rc = RV_OK;
    SH_FIELD(rc, d, values, keys, 0, 's');
    SH_FIELD(rc, d, values, keys, 1, 's');
    SH_FIELD(rc, d, values, keys, 2, 's');
    SH_FIELD(rc, d, values, keys, 3, 's');
    SH_FIELD(rc, d, values, keys, 4, 'i');
    if (rc == RV_OK) {
        PyObject *digest = sh_get(d, values[5], SHK_DIGEST_CACHE);
        if (digest == NULL && PyErr_Occurred()) rc = RV_ERROR;
        else if (digest != NULL && digest != Py_None && !PyUnicode_CheckExact(digest)) rc = RV_DECLINE;
    }
    if (rc == RV_OK) rc = sh_items(st, sh_get(d, values[6], SHK_PARTS), 0, sh_part);
    Py_DECREF(d);
    return rc;
}

/* An exact RuntimeBindingEvidence (evidence_shape_failure), once. */
static int
sh_evidence(sh_state *st, PyObject *evidence)
{
    static const int keys[9] = {SHK_RESOURCE_ID,    SHK_REVISION, SHK_PLACEMENT_ID, SHK_PLACEMENT_DIGEST,
                                SHK_INSTANCE_ID,    SHK_PARTICIPANT_ID, SHK_LEASE_ID, SHK_GENERATION,
                                SHK_FRAGMENTS};
    if (Py_TYPE(evidence) != st->cls[SH_EVIDENCE]) return RV_DECLINE;
    int seen = sh_seen(st, evidence);
    if (seen != 0) return seen < 0 ? RV_ERROR : RV_OK;
    PyObject *values[9];
    PyObject *d = sh_dict_read(evidence, keys, 9, values);
    if (d == NULL) return RV_DECLINE;
    int rc = RV_OK;
    for (int k = 0; k < 7; k++) SH_FIELD(rc, d, values, keys, k, 's');
    SH_FIELD(rc, d, values, keys, 7, 'i');
    if (rc == RV_OK) rc = sh_items_hinted(st, sh_get(d, values[8], SHK_FRAGMENTS), 1, sh_runtime, &st->rt, MR_RF_N);
    Py_DECREF(d);
    return rc;
}

/* The placement and evidence of an attested entry's view (an exact _AttestedView: its slots),
 * read but not checked: out[0], out[1] new references (NULL when not read). RV_DECLINE (not
 * such an entry), RV_ERROR (a read failed: out[0] may hold the placement), else RV_OK. A read is
 * a generic getattr, which runs Python code when the class was given a descriptor for the name
 * (a class attribute set after import): revalidate_shapes reads every view before it checks
 * anything (SHAPE38), so such code cannot edit an object after the pass checked it. */
static int
sh_view_read(sh_state *st, PyObject *entry, PyObject **out)
{
    out[0] = out[1] = NULL;
    if (!PyTuple_CheckExact(entry) || PyTuple_Size(entry) < 3) return RV_DECLINE;
    PyObject *view = PyTuple_GetItem(entry, 2);
    if (view == NULL) return RV_ERROR;
    if (Py_TYPE(view) != st->cls[SH_VIEW]) return RV_DECLINE;
    out[0] = pd_getattr(view, sh_keys[SHK_PLACEMENT]);
    if (out[0] == NULL) return RV_ERROR;
    out[1] = pd_getattr(view, sh_keys[SHK_EVIDENCE]);
    return out[1] == NULL ? RV_ERROR : RV_OK;
}

/* The checks of the views sh_view_read read (n entries: pairs[2 * k], pairs[2 * k + 1], either
 * NULL when not read), in the order the pass took them before SHAPE38 (each view's placement,
 * then its evidence): RV_OK when every one read holds. */
static int
sh_views_check(sh_state *st, PyObject *const *pairs, Py_ssize_t n)
{
    int rc = RV_OK;
    for (Py_ssize_t k = 0; rc == RV_OK && k < n; k++) {
        if (pairs[2 * k] != NULL) rc = sh_placement(st, pairs[2 * k]);
        if (rc == RV_OK && pairs[2 * k + 1] != NULL) rc = sh_evidence(st, pairs[2 * k + 1]);
    }
    return rc;
}

/* The placement and evidence of an exact executor's attestation (exactly the attestation class). */
static int
sh_executor(sh_state *st, PyObject *executor)
{
    if (Py_TYPE(executor) != st->cls[SH_EXECUTOR]) return RV_DECLINE;
    static const int keys[1] = {SHK_ATTESTATION};
    static const int attestation_keys[2] = {SHK_PLACEMENT, SHK_EVIDENCE};
    PyObject *values[2];
    PyObject *d = sh_dict_read(executor, keys, 1, values);
    if (d == NULL) return RV_DECLINE;
    PyObject *attestation = sh_get(d, values[0], SHK_ATTESTATION);
    int rc = attestation == NULL ? (PyErr_Occurred() ? RV_ERROR : RV_DECLINE) : RV_OK;
    if (rc == RV_OK) {
        Py_INCREF(attestation);
        Py_DECREF(d);
        d = NULL;
        if (Py_TYPE(attestation) != st->cls[SH_ATTESTATION]) rc = RV_DECLINE;
        PyObject *ad = rc == RV_OK ? sh_dict_read(attestation, attestation_keys, 2, values) : NULL;
        if (rc == RV_OK && ad == NULL) rc = RV_DECLINE;
        Py_DECREF(attestation);
        if (rc == RV_OK) {
            PyObject *placement = sh_get(ad, values[0], SHK_PLACEMENT);
            PyObject *evidence = placement != NULL ? sh_get(ad, values[1], SHK_EVIDENCE) : NULL;
            if (evidence == NULL) rc = PyErr_Occurred() ? RV_ERROR : RV_DECLINE;
            if (rc == RV_OK) rc = sh_placement(st, placement);
            if (rc == RV_OK) rc = sh_evidence(st, evidence);
        }
        Py_XDECREF(ad);
    }
    Py_XDECREF(d);
    return rc;
}

PyDoc_STRVAR(revalidate_shapes_doc,
"revalidate_shapes(target_placement, attested, source_executors, target_executors, classes, /) -> bool\n"
"--\n\n"
"The fast path's form of bound_contracts._require_typed_attestations and of the target\n"
"placement's placement_shape_failure (F4): True when the target placement, the placement and\n"
"evidence of every view in ``attested`` (revalidate_fragments' dict: entries whose third item\n"
"is exactly an _AttestedView) and of every executor's attestation (executors exactly\n"
"ExecutorTransferPlan, attestations exactly RuntimeBindingAttestation) hold the exact types\n"
"their constructors store: each placement's identity strs, weight_generation, digest cache,\n"
"parts (participant_id, rank, tensor descriptors with their axes, placement fragments: every\n"
"field), each evidence's fields and runtime fragments (every field); each distinct object\n"
"once. False when not sure (the rules decide and raise their message). classes:\n"
"(WeightPlacementManifest, WeightPlacementPart, TensorDescriptor, PlacementFragment,\n"
"RuntimeBindingEvidence, RuntimeBindingFragment, ParallelRank, SplitAxis, ReplicatedAxis,\n"
"OwnershipAxis, _AttestedView, ExecutorTransferPlan, RuntimeBindingAttestation). Runs no Python\n"
"code of the values (exact classes, exact containers).");

static PyObject *
revalidate_shapes(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *target_placement, *attested, *source_executors, *target_executors, *classes;
    if (!mr_parse_vector(args, nargs, "OO!O!O!O!:revalidate_shapes", &target_placement, &PyDict_Type, &attested,
                          &PyTuple_Type, &source_executors, &PyTuple_Type, &target_executors, &PyTuple_Type, &classes))
        return NULL;
    if (PyTuple_Size(classes) != SH_NCLASSES) {
        PyErr_SetString(PyExc_TypeError, "revalidate_shapes: classes must be a tuple of 13 classes");
        return NULL;
    }
    sh_state st;
    memset(&st, 0, sizeof(st));
    for (int k = 0; k < SH_NCLASSES; k++) {
        PyObject *cls = PyTuple_GetItem(classes, k);
        if (cls == NULL) return NULL;
        if (!PyType_Check(cls)) {
            PyErr_SetString(PyExc_TypeError, "revalidate_shapes: classes must be a tuple of 13 classes");
            return NULL;
        }
        st.cls[k] = (PyTypeObject *)cls;
    }
    if (!PyDict_CheckExact(attested) || !PyTuple_CheckExact(source_executors) || !PyTuple_CheckExact(target_executors))
        Py_RETURN_FALSE;
    static mr_class_memo pf_memo, rt_memo;
    if (!mr_pf_layout(&pf_memo, &st.pf, (PyObject *)st.cls[SH_FRAGMENT]) ||
        !mr_runtime_layout(&rt_memo, &st.rt, (PyObject *)st.cls[SH_RUNTIME]))
        Py_RETURN_FALSE;
    /* a private copy of the entries: nothing below runs code that could change the dict */
    PyObject *entries = PyDict_Values(attested);
    if (entries == NULL) return NULL;
    /* (the contract's replace records ~40 objects: sized so that it never grows there) */
    if (rv_table_init(&st.seen, 48) < 0) {
        Py_DECREF(entries);
        return NULL;
    }
    /* No automatic collection during the walk: it would run gc callbacks and finalizers (user
     * code) at an allocation (PySequence_Tuple, a materialized instance dict) while borrowed
     * references are held and ``seen`` is keyed by address (AUDIT4; the Python caller pauses the
     * collector too). */
    const int collector_was_enabled = PyGC_Disable();
    /* Every view read first, then every check (sh_view_read: its reads may run Python code).
     * A view that stops the reads (declined, or a read that failed: its error kept meanwhile)
     * decides only when every check before it holds, as when each view was checked as read. */
    Py_ssize_t n_entries = PyList_Size(entries), n_read = 0;
    PyObject **pairs = n_entries >= 0 ? mr_alloc_array((size_t)n_entries + 1, 2 * sizeof(PyObject *)) : NULL;
    int rc = pairs == NULL ? RV_ERROR : RV_OK, stop = RV_OK;
    PyObject *error_type = NULL, *error_value = NULL, *error_tb = NULL;
    for (Py_ssize_t k = 0; pairs != NULL && k < n_entries; k++) {
        PyObject *entry = PyList_GetItem(entries, k); /* (a private list: alive) */
        stop = entry == NULL ? RV_ERROR : sh_view_read(&st, entry, &pairs[2 * n_read]);
        if (entry == NULL) pairs[2 * n_read] = pairs[2 * n_read + 1] = NULL;
        n_read++;
        if (stop != RV_OK) break;
    }
    if (stop == RV_ERROR) PyErr_Fetch(&error_type, &error_value, &error_tb);
    if (rc == RV_OK) rc = sh_placement(&st, target_placement);
    if (rc == RV_OK) rc = sh_views_check(&st, pairs, n_read);
    if (rc == RV_OK && stop != RV_OK) {
        rc = stop;
        if (stop == RV_ERROR) {
            PyErr_Restore(error_type, error_value, error_tb);
            error_type = error_value = error_tb = NULL;
        }
    }
    Py_XDECREF(error_type);
    Py_XDECREF(error_value);
    Py_XDECREF(error_tb);
    if (rc == RV_OK) rc = sh_items(&st, source_executors, 0, sh_executor);
    if (rc == RV_OK) rc = sh_items(&st, target_executors, 0, sh_executor);
    if (collector_was_enabled) PyGC_Enable();
    rv_table_free(&st.seen);
    for (Py_ssize_t k = 0; pairs != NULL && k < 2 * n_read; k++) Py_XDECREF(pairs[k]);
    PyMem_Free(pairs);
    Py_DECREF(entries);
    if (rc == RV_ERROR) return NULL;
    return PyBool_FromLong(rc == RV_OK);
}

/* Every pass runs with the automatic collector off (common.h MR_COLLECTOR_PAUSED). */
MR_COLLECTOR_PAUSED_VECTOR(revalidate_views)
MR_COLLECTOR_PAUSED_VECTOR(revalidate_coverage)
MR_COLLECTOR_PAUSED_VECTOR(revalidate_spaces)
MR_COLLECTOR_PAUSED_VECTOR(revalidate_side)
MR_COLLECTOR_PAUSED_VECTOR(revalidate_scan)
MR_COLLECTOR_PAUSED_VECTOR(revalidate_scan_carried)
MR_COLLECTOR_PAUSED_VECTOR(revalidate_fragments)
MR_VECTOR_ENTRY(revalidate_shapes)

/* ---- fields_unshadowed's compiled specs (REVAL40) ---------------------------------------------
 * The per-call proof (AUDIT39) for one specs tuple, the driver's ``_STATE_FIELDS``, without
 * re-reading what cannot change between calls. Decoded once per specs tuple (held, so its address
 * is never reused, and a tuple of tuples of str never changes): each spec's class, names, pins and
 * absent names in C arrays (borrowed from the held tuple). Per spec, the MRO tuple last found for
 * its class (held) with what mr_fields_unshadowed derives from that tuple alone: the classes it
 * walks (up to the layout base, or the whole MRO but ``object``), whether the class is
 * dict-backed, and that every walked class's dict held exact str keys only (mr_plain_mros'
 * argument: such a dict keeps that, and a class holding other keys enters an MRO only with a new
 * MRO tuple). A class's entry in an MRO keeps its metaclass (``__class__`` cannot be assigned on a
 * class), its flags and its module (set when the class is made), so the walk found for a tuple
 * holds while that tuple is the class's MRO. Everything else is read per call as
 * mr_fields_unshadowed reads it: metaclass exactly ``type``, the generic ``__getattribute__``,
 * ``cls.__mro__`` (through ``type``'s own ``__mro__`` member: what the generic type lookup calls
 * for a class of metaclass exactly ``type``; ``type`` is immutable), each walked class's dict and
 * every name probed in it. So the outcome is mr_fields_unshadowed's for each spec (a specs tuple
 * that does not decode, or a walk longer than FU_MAX_WALK, takes mr_fields_unshadowed itself). */
enum { FU_MAX_SPECS = 32, FU_MAX_NAMES = 512, FU_MAX_WALK = 8 };

typedef struct {
    PyObject *cls;            /* borrowed from the held specs */
    Py_ssize_t names_at;      /* fu_names[names_at .. names_at + n_names) */
    Py_ssize_t n_names;
    Py_ssize_t pins_at;       /* fu_names / fu_pin_values[pins_at .. pins_at + n_pins) */
    Py_ssize_t n_pins;
    Py_ssize_t absent_at;     /* fu_names[absent_at .. absent_at + n_absent) */
    Py_ssize_t n_absent;
    PyObject *mro;            /* strong: the MRO tuple the walk was found for, or NULL */
    PyObject *walk[FU_MAX_WALK]; /* borrowed from mro: the classes whose dicts are probed */
    int n_walk;
    int dict_backed;          /* no layout base in the MRO */
    int pins_first;           /* walk[0] is mro[0] (pins are probed in cls's own dict only) */
} fu_spec;

static PyObject *fu_specs;                  /* strong: the decoded specs tuple, or NULL */
static Py_ssize_t fu_n_specs;
static fu_spec fu_spec_of[FU_MAX_SPECS];
static PyObject *fu_names[FU_MAX_NAMES];      /* borrowed from fu_specs */
static PyObject *fu_pin_values[FU_MAX_NAMES]; /* borrowed from fu_specs */
/* MRO tuples a walk was found for, replaced since by a newer one (strong): released at the start
 * of the next call, before anything is proven (defensive: a release frees at most the tuple, as
 * each class it holds is held by its own MRO until the collector breaks that cycle, but nothing
 * that could run a finaliser happens mid-proof) */
static PyObject *fu_stale[FU_MAX_SPECS];
static PyObject *fu_mro_member;             /* strong: type.__dict__["__mro__"] (made at init) */
static descrgetfunc fu_mro_get;             /* its tp_descr_get */

/* cls.__mro__ (a new reference) for a class of metaclass exactly ``type``, NULL (no exception)
 * when it is not an exact tuple. */
static inline PyObject *
fu_class_mro(PyObject *cls)
{
    PyObject *mro = fu_mro_get != NULL ? fu_mro_get(fu_mro_member, cls, (PyObject *)&PyType_Type)
                                       : PyObject_GetAttr(cls, rs_keys[RS_MRO]);
    if (mro == NULL || !PyTuple_CheckExact(mro)) {
        Py_XDECREF(mro);
        PyErr_Clear();
        return NULL;
    }
    return mro;
}

/* Copies the exact str items of an exact tuple to fu_names[*at ..] (values: with pins, each item
 * an exact (str, value) pair). 1, or 0 when anything else (nothing raised). */
static int
fu_decode_names(PyObject *tuple, int pairs, Py_ssize_t *at, Py_ssize_t *count)
{
    if (!PyTuple_CheckExact(tuple)) return 0;
    const Py_ssize_t n = PyTuple_Size(tuple);
    if (n < 0 || n > FU_MAX_NAMES - *at) return 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *item = PyTuple_GetItem(tuple, j); /* borrowed; in range */
        PyObject *name = item, *value = NULL;
        if (pairs) {
            if (item == NULL || !PyTuple_CheckExact(item) || PyTuple_Size(item) != 2) return 0;
            name = PyTuple_GetItem(item, 0);
            value = PyTuple_GetItem(item, 1);
        }
        if (name == NULL || !PyUnicode_CheckExact(name) || (pairs && value == NULL)) return 0;
        fu_names[*at + j] = name;
        fu_pin_values[*at + j] = value;
    }
    *count = n;
    *at += n;
    return 1;
}

/* Releases the stale MRO tuples (fu_stale). Each slot is emptied before any is released: a
 * finaliser run by a release may call fields_unshadowed again. */
static void
fu_release_stale(void)
{
    PyObject *drop[FU_MAX_SPECS];
    for (int k = 0; k < FU_MAX_SPECS; k++) {
        drop[k] = fu_stale[k];
        fu_stale[k] = NULL;
    }
    for (int k = 0; k < FU_MAX_SPECS; k++) Py_XDECREF(drop[k]);
}

/* Empties the cache, then releases what it held (as fu_release_stale: emptied first). */
static void
fu_forget(void)
{
    PyObject *drop[FU_MAX_SPECS + 1];
    int n = 0;
    for (Py_ssize_t k = 0; k < fu_n_specs; k++) {
        drop[n++] = fu_spec_of[k].mro;
        fu_spec_of[k].mro = NULL;
    }
    drop[n++] = fu_specs;
    fu_specs = NULL;
    fu_n_specs = 0;
    for (int k = 0; k < n; k++) Py_XDECREF(drop[k]);
}

/* Decodes specs into the cache (see above). 1, or 0 (the cache emptied; nothing raised). */
static int
fu_decode(PyObject *specs)
{
    fu_forget();
    if (fu_specs != NULL) return 0; /* (a finaliser run by a release decoded others: decline) */
    const Py_ssize_t n = PyTuple_Size(specs);
    if (n < 0 || n > FU_MAX_SPECS) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *spec = PyTuple_GetItem(specs, k); /* borrowed; in range */
        const Py_ssize_t size = spec != NULL && PyTuple_CheckExact(spec) ? PyTuple_Size(spec) : -1;
        fu_spec *s = &fu_spec_of[k];
        memset(s, 0, sizeof(*s));
        s->names_at = at;
        int ok = (size == 2 || size == 4) && fu_decode_names(PyTuple_GetItem(spec, 1), 0, &at, &s->n_names);
        s->pins_at = at;
        ok = ok && (size == 2 || fu_decode_names(PyTuple_GetItem(spec, 2), 1, &at, &s->n_pins));
        s->absent_at = at;
        ok = ok && (size == 2 || fu_decode_names(PyTuple_GetItem(spec, 3), 0, &at, &s->n_absent));
        if (!ok) {
            PyErr_Clear();
            return 0;
        }
        s->cls = PyTuple_GetItem(spec, 0);
        if (s->cls == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    fu_specs = Py_NewRef(specs);
    fu_n_specs = n;
    return 1;
}

/* Finds spec s's walk for mro (a new tuple for its class; see above) and takes a reference to
 * mro. 1, 0 (the class is refused: mr_fields_unshadowed gives 0), -1 (more than FU_MAX_WALK
 * classes: let mr_fields_unshadowed decide). Nothing raised. */
static int
fu_walk_find(fu_spec *s, PyObject *mro)
{
    if (s->mro != NULL) {
        const Py_ssize_t at = s - fu_spec_of;
        if (fu_stale[at] != NULL) return -1; /* (not reached: one walk per spec and call) */
        fu_stale[at] = s->mro;
        s->mro = NULL;
    }
    s->n_walk = 0;
    s->dict_backed = 1;
    s->pins_first = 0;
    const Py_ssize_t size = PyTuple_Size(mro);
    for (Py_ssize_t k = 0; k < size; k++) {
        PyObject *entry = PyTuple_GetItem(mro, k); /* borrowed; in range */
        if (entry == NULL || !Py_IS_TYPE(entry, &PyType_Type)) return 0;
        if (entry == (PyObject *)&PyBaseObject_Type) continue;
        if (mr_layout_own_info(entry) != NULL) {
            s->dict_backed = 0;
            break;
        }
        const unsigned long flags = PyType_GetFlags((PyTypeObject *)entry);
        if (!(flags & Py_TPFLAGS_HEAPTYPE) || (flags & Py_TPFLAGS_IMMUTABLETYPE)) return 0;
        if (s->n_walk == FU_MAX_WALK) return -1;
        PyObject *dict = PyObject_GenericGetDict(entry, NULL); /* (a heap type's own dict) */
        if (dict == NULL || !PyDict_CheckExact(dict)) {
            Py_XDECREF(dict);
            PyErr_Clear();
            return 0;
        }
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        int plain = 1;
        while (plain && PyDict_Next(dict, &pos, &key, &value)) plain = PyUnicode_CheckExact(key);
        Py_DECREF(dict);
        if (!plain) return 0;
        if (k == 0) s->pins_first = 1;
        s->walk[s->n_walk++] = entry;
    }
    s->mro = Py_NewRef(mro);
    return 1;
}

/* mr_fields_unshadowed for decoded spec s (see above): 1 or 0 (an error possibly left set: the
 * caller clears it), or -1 (mr_fields_unshadowed decides). */
static int
fu_spec_holds(fu_spec *s)
{
    PyObject *cls = s->cls;
    if (!Py_IS_TYPE(cls, &PyType_Type)
        || PyType_GetSlot((PyTypeObject *)cls, Py_tp_getattro) != (void *)PyObject_GenericGetAttr) {
        return 0;
    }
    PyObject *mro = fu_class_mro(cls);
    if (mro == NULL) return 0;
    if (mro != s->mro) {
        const int found = fu_walk_find(s, mro);
        if (found <= 0) {
            Py_DECREF(mro);
            return found;
        }
    }
    int ok = 1;
    for (int w = 0; w < s->n_walk && ok; w++) {
        PyObject *dict = PyObject_GenericGetDict(s->walk[w], NULL); /* (a heap type's own dict) */
        if (dict == NULL || !PyDict_CheckExact(dict)) {
            Py_XDECREF(dict);
            ok = 0;
            break;
        }
        /* exact str keys only (fu_walk_find), exact str names: no probe runs Python code or can
         * fail; an error would still be found below, before the outcome is given */
        PyObject *const *name = &fu_names[s->names_at];
        for (Py_ssize_t j = 0; j < s->n_names && ok; j++) {
            PyObject *held = PyDict_GetItemWithError(dict, name[j]); /* borrowed */
            /* (a value under a field name: harmless only in a dict-backed class's MRO, and only
             * when it is no descriptor) */
            if (held != NULL) ok = s->dict_backed && PyType_GetSlot(Py_TYPE(held), Py_tp_descr_get) == NULL;
        }
        PyObject *const *absent = &fu_names[s->absent_at];
        for (Py_ssize_t j = 0; j < s->n_absent && ok; j++) {
            if (PyDict_GetItemWithError(dict, absent[j]) != NULL) ok = 0;
        }
        if (w == 0 && s->pins_first) {
            PyObject *const *pin = &fu_names[s->pins_at];
            PyObject *const *value = &fu_pin_values[s->pins_at];
            for (Py_ssize_t j = 0; j < s->n_pins && ok; j++) {
                if (PyDict_GetItemWithError(dict, pin[j]) != value[j]) ok = 0;
            }
        }
        Py_DECREF(dict);
        if (PyErr_Occurred()) ok = 0;
    }
    Py_DECREF(mro);
    return ok;
}

/* fields_unshadowed(specs): True when mr_fields_unshadowed(cls, names, pinned, absent) holds
 * for every ``(cls, names)`` or ``(cls, names, pinned, absent)`` of ``specs`` (an exact tuple of
 * exact tuples), else False (also for a malformed ``specs``). The fast revalidation's per-call proof (AUDIT39) that the value classes
 * whose fields its passes read from instance state still read them so as attributes (no
 * descriptor planted on a field since import): else the rules decide. Runs no Python code. */
static PyObject *
fields_unshadowed(PyObject *Py_UNUSED(module), PyObject *specs)
{
    if (!PyTuple_CheckExact(specs)) Py_RETURN_FALSE;
    fu_release_stale(); /* (before anything is proven: may run Python code) */
    if (specs == fu_specs || fu_decode(specs)) {
        for (Py_ssize_t k = 0; k < fu_n_specs; k++) {
            int holds = fu_spec_holds(&fu_spec_of[k]);
            if (holds < 0) {
                PyObject *spec = PyTuple_GetItem(specs, k); /* borrowed; in range (decoded) */
                const int full = PyTuple_Size(spec) == 4;
                holds = mr_fields_unshadowed(PyTuple_GetItem(spec, 0), PyTuple_GetItem(spec, 1),
                                             full ? PyTuple_GetItem(spec, 2) : NULL,
                                             full ? PyTuple_GetItem(spec, 3) : NULL, rs_keys[RS_MRO]);
            }
            if (!holds) {
                PyErr_Clear();
                Py_RETURN_FALSE;
            }
        }
        Py_RETURN_TRUE;
    }
    const Py_ssize_t n = PyTuple_Size(specs);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *spec = PyTuple_GetItem(specs, k); /* borrowed; in range */
        const Py_ssize_t size = spec != NULL && PyTuple_CheckExact(spec) ? PyTuple_Size(spec) : -1;
        if ((size != 2 && size != 4)
            || !mr_fields_unshadowed(PyTuple_GetItem(spec, 0), PyTuple_GetItem(spec, 1),
                                     size == 4 ? PyTuple_GetItem(spec, 2) : NULL,
                                     size == 4 ? PyTuple_GetItem(spec, 3) : NULL, rs_keys[RS_MRO])) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

static PyMethodDef revalidate_methods[] = {
    {"fields_unshadowed", (PyCFunction)fields_unshadowed, METH_O,
     "fields_unshadowed(specs): no (cls, names) pair's fields are shadowed by a class attribute (AUDIT39)."},
    {"revalidate_shapes", (PyCFunction)(void (*)(void))revalidate_shapes_vector, METH_FASTCALL | METH_KEYWORDS,
     revalidate_shapes_doc},
    {"operation_views", operation_views, METH_VARARGS, operation_views_doc},
    {"restore_regions", restore_regions, METH_VARARGS, restore_regions_doc},
    {"restore_fragments", restore_fragments, METH_VARARGS, restore_fragments_doc},
    {"restore_executors", restore_executors, METH_VARARGS, restore_executors_doc},
    {"revalidate_views", (PyCFunction)(void (*)(void))revalidate_views_paused, METH_FASTCALL | METH_KEYWORDS,
     revalidate_views_doc},
    {"revalidate_coverage", (PyCFunction)(void (*)(void))revalidate_coverage_paused, METH_FASTCALL | METH_KEYWORDS,
     revalidate_coverage_doc},
    {"revalidate_spaces", (PyCFunction)(void (*)(void))revalidate_spaces_paused, METH_FASTCALL | METH_KEYWORDS,
     revalidate_spaces_doc},
    {"revalidate_side", (PyCFunction)(void (*)(void))revalidate_side_paused, METH_FASTCALL | METH_KEYWORDS,
     revalidate_side_doc},
    {"revalidate_scan", (PyCFunction)(void (*)(void))revalidate_scan_paused, METH_FASTCALL | METH_KEYWORDS,
     revalidate_scan_doc},
    {"revalidate_scan_carried", (PyCFunction)(void (*)(void))revalidate_scan_carried_paused, METH_FASTCALL | METH_KEYWORDS,
     revalidate_scan_carried_doc},
    {"revalidate_fragments", (PyCFunction)(void (*)(void))revalidate_fragments_paused, METH_FASTCALL | METH_KEYWORDS,
     revalidate_fragments_doc},
    {"attested_index", attested_index, METH_VARARGS, attested_index_doc},
    {"attested_view", attested_view, METH_VARARGS, attested_view_doc},
    {"deps_unchanged", deps_unchanged, METH_VARARGS, deps_unchanged_doc},
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
    for (int k = 0; k < RW_NNAMES; k++) {
        if (rw_keys[k] != NULL) continue;
        rw_keys[k] = PyUnicode_InternFromString(rw_names[k]);
        if (rw_keys[k] == NULL) return -1;
    }
    for (int k = 0; k < RC_NNAMES; k++) {
        if (rc_keys[k] != NULL) continue;
        rc_keys[k] = PyUnicode_InternFromString(rc_names[k]);
        if (rc_keys[k] == NULL) return -1;
    }
    for (int k = 0; k < RP_NNAMES; k++) {
        if (rp_keys[k] != NULL) continue;
        rp_keys[k] = PyUnicode_InternFromString(rp_names[k]);
        if (rp_keys[k] == NULL) return -1;
    }
    for (int k = 0; k < AV_NNAMES; k++) {
        if (av_keys[k] != NULL) continue;
        av_keys[k] = PyUnicode_InternFromString(av_names[k]);
        if (av_keys[k] == NULL) return -1;
    }
    for (int k = 0; k < VO_NNAMES; k++) {
        if (vo_keys[k] != NULL) continue;
        vo_keys[k] = PyUnicode_InternFromString(vo_names[k]);
        if (vo_keys[k] == NULL) return -1;
    }
    if (av_object_new == NULL) {
        av_object_new = PyObject_GetAttrString((PyObject *)&PyBaseObject_Type, "__new__");
        if (av_object_new == NULL) return -1;
    }
    for (int k = 0; k < RS_NNAMES; k++) {
        if (rs_keys[k] != NULL) continue;
        rs_keys[k] = PyUnicode_InternFromString(rs_names[k]);
        if (rs_keys[k] == NULL) return -1;
    }
    if (rs_snap_keys == NULL) {
        PyObject *names = PyTuple_New(RS_NSNAP);
        if (names == NULL) return -1;
        for (int k = 0; k < RS_NSNAP; k++) {
            PyObject *name = PyUnicode_InternFromString(rs_snap_names[k]);
            if (name == NULL || PyTuple_SetItem(names, k, name) < 0) {
                Py_DECREF(names);
                return -1;
            }
        }
        rs_snap_keys = names;
    }
    for (int k = 0; k < RS_NSNAP; k++) rs_snap_items[k] = PyTuple_GetItem(rs_snap_keys, k);
    if (fu_mro_member == NULL) {
        PyObject *proxy = PyObject_GetAttr((PyObject *)&PyType_Type, rs_keys[RS_DICT]);
        if (proxy == NULL) return -1;
        fu_mro_member = PyObject_GetItem(proxy, rs_keys[RS_MRO]);
        Py_DECREF(proxy);
        if (fu_mro_member == NULL) return -1;
        fu_mro_get = (descrgetfunc)PyType_GetSlot(Py_TYPE(fu_mro_member), Py_tp_descr_get);
        if (fu_mro_get == NULL) PyErr_Clear(); /* (fu_class_mro reads the attribute then) */
    }
    for (int k = 0; k < RF_NNAMES; k++) {
        if (rf_keys[k] != NULL) continue;
        rf_keys[k] = PyUnicode_InternFromString(rf_names[k]);
        if (rf_keys[k] == NULL) return -1;
    }
    for (int k = 0; k < RB_NNAMES; k++) {
        if (rb_keys[k] != NULL) continue;
        rb_keys[k] = PyUnicode_InternFromString(rb_names[k]);
        if (rb_keys[k] == NULL) return -1;
    }
    for (int k = 0; k < SHK_N; k++) {
        if (sh_keys[k] != NULL) continue;
        sh_keys[k] = PyUnicode_InternFromString(sh_names[k]);
        if (sh_keys[k] == NULL) return -1;
    }
    return PyModule_AddFunctions(module, revalidate_methods);
}
