/* scan_carry: the carried revalidation-scan facts shared by bind_regions (binder.c, bd_carry)
 * and restore_regions_carried (restore_scan.c): what revalidate_scan would derive from regions a
 * call has just built, derived from the values it stored in them. The distinct fragments (first
 * appearance, source before target, by an identity table), each operation's source_of /
 * target_of positions and (overlap_offset, overlap_shape) box, each distinct fragment's largest
 * byte extent end, the largest segment count and the largest running total of segments, with
 * revalidate_scan's arithmetic (exact ints within int64, every step overflow-checked) in the
 * same order. Each caller keeps its own extras (binder.c: the carried canon proof; restore_scan.c:
 * the regions list) and its own result shape (sc_carry_result's extra item).
 *
 * Status codes: SC_OK, SC_DECLINE (a value revalidate_scan would decline: the carry is off, the
 * plain scan decides; no exception set), SC_ERROR (an exception is set).
 * Static inline only: included by each C file that uses it. */
#ifndef MOONCAKE_RESHARD_SCAN_CARRY_H
#define MOONCAKE_RESHARD_SCAN_CARRY_H
#include "common.h"
#include "gctrack.h"

#define SC_OK 0
#define SC_DECLINE 1
#define SC_ERROR (-1)

/* A region's values from its source field on, in TransferRegion's field order (borrowed). */
enum {
    SC_SOURCE,
    SC_TARGET,
    SC_OFFSET,
    SC_SHAPE,
    SC_SBASE,
    SC_TBASE,
    SC_INNER,
    SC_OUTER,
    SC_SSTRIDES,
    SC_TSTRIDES,
    SC_NVALUES
};

typedef struct {
    PyObject *frags;     /* owned list: distinct fragments, first appearance */
    PyObject *source_of; /* owned list of int positions, one per operation */
    PyObject *target_of;
    PyObject *boxes;  /* owned list of (overlap_offset, overlap_shape) */
    PyObject **keys;  /* identity table: fragment -> position (borrowed: frags holds them) */
    int32_t *values;  /* (positions beyond int32: the carry is off, sc_carry_place) */
    size_t mask;      /* capacity - 1; grown by doubling above load two thirds (sc_carry_place) */
    int64_t *ends; /* per distinct fragment: the largest byte extent end an operation needs */
    int64_t max_count, max_total, total;
} sc_carry;

/* Frees everything the carry holds; safe on a zeroed or already cleared carry. */
static inline void
sc_carry_clear(sc_carry *c)
{
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

/* Frees the identity table (no position is placed after this; sc_carry_result does not read it). */
static inline void
sc_carry_drop_table(sc_carry *c)
{
    PyMem_Free(c->keys);
    PyMem_Free(c->values);
    c->keys = NULL;
    c->values = NULL;
}

/* The identity table's first capacity: twice the first SC_TABLE_FIRST operations' fragments at
 * most (load at most one half), grown by doubling above load two thirds from there on
 * (sc_carry_place, sc_carry_grow), so a call's table is sized for the fragments it meets, not
 * for 2n of them at load one half (~1.1 fragments per operation in the Kimi-class bind: a
 * quarter of the slots of a table sized for 2n, 12 bytes each). */
#define SC_TABLE_FIRST 4096

/* For n operations (at most 2n distinct fragments), the running maximum starting at max_total
 * (each caller's own initial value), without the per-operation lists (source_of, target_of,
 * boxes stay NULL: a caller that records positions and boxes in its own arrays builds them at
 * the end): 0, or -1 with an exception (the carry then cleared). */
static inline int
sc_carry_init_core(sc_carry *c, Py_ssize_t n, int64_t max_total)
{
    size_t cap = 8;
    if (n < 0 || (size_t)n > SIZE_MAX / 8) {
        PyErr_NoMemory();
        return -1;
    }
    size_t first = (size_t)n < SC_TABLE_FIRST ? (size_t)n : SC_TABLE_FIRST;
    while (cap < first * 4 + 1) cap *= 2; /* load at most one half for those operations' fragments */
    c->frags = PyList_New(0);
    c->keys = c->frags == NULL ? NULL : mr_alloc_array(cap, sizeof(*c->keys));
    c->values = c->keys == NULL ? NULL : mr_alloc_array(cap, sizeof(*c->values));
    c->ends = c->values == NULL ? NULL : mr_alloc_array((size_t)n * 2 + 1, sizeof(*c->ends));
    if (c->ends == NULL) {
        sc_carry_clear(c);
        return -1;
    }
    memset(c->keys, 0, cap * sizeof(*c->keys));
    c->mask = cap - 1;
    c->max_count = INT64_MIN;
    c->max_total = max_total;
    c->total = 0;
    return 0;
}

/* sc_carry_init_core with the per-operation lists (n items each, filled by sc_carry_region). */
static inline int
sc_carry_init(sc_carry *c, Py_ssize_t n, int64_t max_total)
{
    if (sc_carry_init_core(c, n, max_total) < 0) return -1;
    /* out of the collector until full: sc_carry_result shows them (gctrack.h) */
    c->source_of = mr_gc_hide(PyList_New(n));
    c->target_of = mr_gc_hide(PyList_New(n));
    c->boxes = mr_gc_hide(PyList_New(n));
    if (c->source_of == NULL || c->target_of == NULL || c->boxes == NULL) {
        sc_carry_clear(c);
        return -1;
    }
    return 0;
}

/* The identity table's home slot of fragment: a full mix of the address (mr_ptr_mix_slot). The
 * fragments a bind places are allocated at fixed strides, which mr_ptr_slot's low product bits
 * spread over a fraction of the slots: long probe runs, a cache miss per line they cross at
 * 10^6 fragments. */
static inline size_t
sc_carry_home(const void *fragment, size_t mask)
{
    return mr_ptr_mix_slot(fragment, mask);
}

/* The identity table's slot for fragment (Python-free): its position, or -1 with *slot the empty
 * slot where it goes. */
static inline Py_ssize_t
sc_carry_find(const sc_carry *c, const PyObject *fragment, size_t *slot)
{
    size_t s = sc_carry_home(fragment, c->mask);
    while (c->keys[s] != NULL) {
        if (c->keys[s] == fragment) {
            *slot = s;
            return c->values[s];
        }
        s = (s + 1) & c->mask;
    }
    *slot = s;
    return -1;
}

/* The identity table doubled, every key placed again (Python-free): 0, or -1 with MemoryError
 * (the table unchanged). */
static inline int
sc_carry_grow(sc_carry *c)
{
    size_t old_cap = c->mask + 1;
    if (old_cap > SIZE_MAX / 2) {
        PyErr_NoMemory();
        return -1;
    }
    size_t cap = old_cap * 2, mask = cap - 1;
    PyObject **keys = mr_alloc_array(cap, sizeof(*keys));
    int32_t *values = keys == NULL ? NULL : mr_alloc_array(cap, sizeof(*values));
    if (values == NULL) {
        PyMem_Free(keys);
        return -1;
    }
    memset(keys, 0, cap * sizeof(*keys));
    for (size_t k = 0; k < old_cap; k++) {
        if (c->keys[k] == NULL) continue;
        size_t s = sc_carry_home(c->keys[k], mask);
        while (keys[s] != NULL) s = (s + 1) & mask;
        keys[s] = c->keys[k];
        values[s] = c->values[k];
    }
    PyMem_Free(c->keys);
    PyMem_Free(c->values);
    c->keys = keys;
    c->values = values;
    c->mask = mask;
    return 0;
}

/* Position of fragment (held by a region) in the distinct list, appended when new; its end
 * raised to at least end. SC_OK (*out set), SC_DECLINE (a new position beyond int32: the carry
 * is off), SC_ERROR. */
static inline int
sc_carry_place(sc_carry *c, PyObject *fragment, int64_t end, Py_ssize_t *out)
{
    size_t slot = 0;
    Py_ssize_t position = sc_carry_find(c, fragment, &slot);
    if (position < 0) {
        position = PyList_Size(c->frags);
        if (position < 0) return SC_ERROR;
        if (position >= INT32_MAX) return SC_DECLINE;
        /* load above two thirds: double, then the slot again (in uint64_t: position + 1 <=
         * INT32_MAX, and a capacity of more than 2**62 slots cannot be allocated) */
        if ((uint64_t)position * 3 + 3 > (uint64_t)(c->mask + 1) * 2) {
            if (sc_carry_grow(c) < 0) return SC_ERROR;
            (void)sc_carry_find(c, fragment, &slot);
        }
        if (PyList_Append(c->frags, fragment) < 0) return SC_ERROR;
        c->keys[slot] = fragment;
        c->values[slot] = (int32_t)position;
        c->ends[position] = end;
    } else if (end > c->ends[position]) {
        c->ends[position] = end;
    }
    *out = position;
    return SC_OK;
}

/* sc_carry_place, then the position stored as item i of list. SC_OK (*out set), SC_DECLINE,
 * SC_ERROR. */
static inline int
sc_carry_position(sc_carry *c, PyObject *fragment, int64_t end, PyObject *list, Py_ssize_t i, Py_ssize_t *out)
{
    Py_ssize_t position = -1;
    int rc = sc_carry_place(c, fragment, end, &position);
    if (rc != SC_OK) return rc;
    PyObject *number = PyLong_FromSsize_t(position);
    if (number == NULL || PyList_SetItem(list, i, number) < 0) return SC_ERROR; /* steals number */
    *out = position;
    return SC_OK;
}

/* An exact int within int64 (revalidate_scan's rule; NULL declines): SC_OK, SC_DECLINE, SC_ERROR. */
static inline int
sc_carry_int(PyObject *value, int64_t *out)
{
    if (value == NULL || !PyLong_CheckExact(value)) return SC_DECLINE;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0) return SC_DECLINE;
    if (x == -1 && PyErr_Occurred()) return SC_ERROR;
    *out = (int64_t)x;
    return SC_OK;
}

/* The int64 values sc_carry_extents converted (each an exact int within int64, the loop tuples
 * exact tuples of such ints, all three of length rank), for a caller that would convert the
 * same objects again (binder.c's carried proof): filled only on SC_OK, the loop values only
 * when rank <= cap (else rank -1). */
typedef struct {
    int64_t inner, s_base, t_base;
    Py_ssize_t cap, rank;
    int64_t *outer, *s_str, *t_str; /* cap entries each */
} sc_values;

/* revalidate_scan's per-operation rule on an operation's values v[SC_NVALUES] (borrowed; any NULL
 * declines), its fragments exact bound_cls, same arithmetic in the same order, the running
 * total and maxima updated; its source and target byte extent ends in *s_end_out, *t_end_out;
 * with vals (NULL: none), the values converted (sc_values). SC_OK, SC_DECLINE (the carry is
 * off), SC_ERROR. */
static inline int
sc_carry_extents(sc_carry *c, PyObject *bound_cls, PyObject *const *v, int64_t *s_end_out, int64_t *t_end_out,
                 sc_values *vals)
{
    for (int k = 0; k < SC_NVALUES; k++) {
        if (v[k] == NULL) return SC_DECLINE;
    }
    if ((PyObject *)Py_TYPE(v[SC_SOURCE]) != bound_cls || (PyObject *)Py_TYPE(v[SC_TARGET]) != bound_cls) {
        return SC_DECLINE;
    }
    PyObject *outer = v[SC_OUTER], *s_strides = v[SC_SSTRIDES], *t_strides = v[SC_TSTRIDES];
    if (!PyTuple_CheckExact(outer) || !PyTuple_CheckExact(s_strides) || !PyTuple_CheckExact(t_strides)) {
        return SC_DECLINE;
    }
    Py_ssize_t rank = PyTuple_Size(outer);
    if (rank < 0) return SC_ERROR;
    if (PyTuple_Size(s_strides) != rank || PyTuple_Size(t_strides) != rank) return SC_DECLINE;
    int64_t inner = 0, s_end = 0, t_end = 0, count = 1;
    int rc;
    if ((rc = sc_carry_int(v[SC_INNER], &inner)) != SC_OK) return rc;
    if ((rc = sc_carry_int(v[SC_SBASE], &s_end)) != SC_OK) return rc;
    if ((rc = sc_carry_int(v[SC_TBASE], &t_end)) != SC_OK) return rc;
    int keep = vals != NULL && rank <= vals->cap;
    if (vals != NULL) {
        vals->inner = inner;
        vals->s_base = s_end;
        vals->t_base = t_end;
        vals->rank = keep ? rank : -1;
    }
    if (mr_add_i64(s_end, inner, &s_end) < 0 || mr_add_i64(t_end, inner, &t_end) < 0) return SC_DECLINE;
    for (Py_ssize_t d = 0; d < rank; d++) {
        int64_t n = 0, ss = 0, ts = 0, minus, step;
        PyObject *items[3] = {PyTuple_GetItem(outer, d), PyTuple_GetItem(s_strides, d), PyTuple_GetItem(t_strides, d)};
        if (items[0] == NULL || items[1] == NULL || items[2] == NULL) return SC_ERROR;
        if ((rc = sc_carry_int(items[0], &n)) != SC_OK) return rc;
        if ((rc = sc_carry_int(items[1], &ss)) != SC_OK) return rc;
        if ((rc = sc_carry_int(items[2], &ts)) != SC_OK) return rc;
        if (keep) {
            vals->outer[d] = n;
            vals->s_str[d] = ss;
            vals->t_str[d] = ts;
        }
        if (__builtin_sub_overflow(n, (int64_t)1, &minus) || mr_mul_i64(minus, ss, &step) < 0
            || mr_add_i64(s_end, step, &s_end) < 0 || mr_mul_i64(minus, ts, &step) < 0
            || mr_add_i64(t_end, step, &t_end) < 0 || mr_mul_i64(count, n, &count) < 0) {
            return SC_DECLINE;
        }
    }
    /* revalidate_scan's running total: its largest prefix is what the budget must cover */
    if (mr_add_i64(c->total, count, &c->total) < 0) return SC_DECLINE;
    if (c->total > c->max_total) c->max_total = c->total;
    if (count > c->max_count) c->max_count = count;
    *s_end_out = s_end;
    *t_end_out = t_end;
    return SC_OK;
}

/* revalidate_scan's per-operation rule on operation i's values v[SC_NVALUES] (sc_carry_extents),
 * then its box and its fragments' positions (*s_pos, *t_pos) recorded in the carry's lists.
 * SC_OK, SC_DECLINE (the carry is off), SC_ERROR. */
static inline int
sc_carry_region(sc_carry *c, PyObject *bound_cls, PyObject *const *v, Py_ssize_t i, Py_ssize_t *s_pos,
                Py_ssize_t *t_pos)
{
    int64_t s_end = 0, t_end = 0;
    int rc = sc_carry_extents(c, bound_cls, v, &s_end, &t_end, NULL);
    if (rc != SC_OK) return rc;
    PyObject *box = PyTuple_Pack(2, v[SC_OFFSET], v[SC_SHAPE]);
    if (box == NULL || PyList_SetItem(c->boxes, i, box) < 0) return SC_ERROR; /* steals box */
    if ((rc = sc_carry_position(c, v[SC_SOURCE], s_end, c->source_of, i, s_pos)) != SC_OK) return rc;
    if ((rc = sc_carry_position(c, v[SC_TARGET], t_end, c->target_of, i, t_pos)) != SC_OK) return rc;
    return SC_OK;
}

/* (regions, fragments, source_of, target_of, boxes, ends, max_count, max_total), with extra as a
 * ninth item when not NULL: ends a bytes of one native int64 per distinct fragment. New reference,
 * or NULL with an exception. */
static inline PyObject *
sc_carry_result(const sc_carry *c, PyObject *regions, PyObject *extra)
{
    Py_ssize_t distinct = PyList_Size(c->frags);
    if (distinct < 0) return NULL;
    if ((size_t)distinct > (size_t)PY_SSIZE_T_MAX / sizeof(int64_t)) return PyErr_NoMemory();
    /* every operation recorded: the per-operation lists are full (made hidden, gctrack.h) */
    mr_gc_show(c->source_of);
    mr_gc_show(c->target_of);
    mr_gc_show(c->boxes);
    PyObject *ends = PyBytes_FromStringAndSize((const char *)c->ends, distinct * (Py_ssize_t)sizeof(int64_t));
    PyObject *max_count = PyLong_FromLongLong(c->max_count);
    PyObject *max_total = PyLong_FromLongLong(c->max_total);
    PyObject *result = NULL;
    if (ends != NULL && max_count != NULL && max_total != NULL) {
        result = extra == NULL ? PyTuple_Pack(8, regions, c->frags, c->source_of, c->target_of, c->boxes, ends,
                                              max_count, max_total)
                               : PyTuple_Pack(9, regions, c->frags, c->source_of, c->target_of, c->boxes, ends,
                                              max_count, max_total, extra);
    }
    Py_XDECREF(ends);
    Py_XDECREF(max_count);
    Py_XDECREF(max_total);
    return result;
}

#endif
