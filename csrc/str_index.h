/* A pass's table of a str-keyed index (tensor id -> position) by key object identity.
 *
 * assembly_columns and FragmentTable.pack_objects look every fragment's tensor id up in the
 * caller's {tensor id: position} dict. At 10^6 fragments the first lookup of each tensor is a
 * chain of cache misses that cannot be asked for ahead (the dict's index slot, its entry: a
 * probe at a random place of a table the passes' object reads keep out of the caches; perf,
 * session 31: unicodekeys_lookup_unicode 13 % of assemble). Fragments hold their tensor's id
 * object itself (the id the caller's dict was built from), so the pass builds, from one
 * sequential read of the dict, a table from each key object's address to its value; a fragment's
 * slot is asked for some fragments ahead (mr_str_memo_prefetch), and a hit answers the lookup.
 *
 * A hit gives what the lookup gives while (1) it is the same key object as the dict's entry (an
 * address in the table is a key the dict holds, alive while the dict is unchanged), (2) the dict
 * has not changed since the table was built and (3) the lookup runs no Python code. (2) holds
 * while no Python code has run since: the pass calls mr_str_memo_code before (or right after)
 * every step that may run some (a rank's __hash__, an attribute hook, an __index__), which drops
 * the table. (3) holds when every key of the dict is an exact str (a lookup of an exact str then
 * compares exact strs only; a key of another type runs its own __eq__): checked while building.
 * Only values that are exact ints in [0, limit) are entered (anything else is looked up, and
 * declines or raises as before). The table is built after min_run lookups without a step that
 * may run code (so at most 8 key reads per lookup of the pass, however often such steps come:
 * in a placement they come at the first fragments of each rank, so it is built about once); a key
 * that is not an exact str turns it off for the pass. Until then, and for ids not in the table
 * (an equal but distinct str), every fragment is looked up in the caller's dict, as before. */
#ifndef MOONCAKE_RESHARD_STR_INDEX_H
#define MOONCAKE_RESHARD_STR_INDEX_H

#include "common.h"
#include "coverage_kernels.h"

typedef struct {
    PyObject *key;   /* borrowed (the dict's key object), NULL: empty */
    PyObject *value; /* borrowed (the dict's value) */
    int64_t at;      /* its int value, in [0, limit) */
} mr_str_slot;

typedef struct {
    PyObject *dict;     /* borrowed: the caller's index (held by the pass's arguments); with a
                         * pair (below) NULL until the first lookup the table cannot answer */
    int64_t limit;      /* values entered: exact ints in [0, limit) */
    Py_ssize_t min_run; /* lookups after a step that may run code before the table is built */
    Py_ssize_t run;     /* lookups since the last such step; -1: the table is off for the pass */
    int built;          /* the table holds dict as it is (no Python code ran since it was built) */
    mr_str_slot *slots; /* cap slots (a power of two), or NULL */
    size_t cap;
    PyObject *pair;     /* borrowed: the (ids, positions) pair (mr_str_memo_init_pair), or NULL */
    PyObject *own_dict; /* strong: the pair's dict, made at the first need, or NULL */
    int fixed;          /* a pair's table: built once, never dropped (tuples, strs and ints do
                         * not change, so no Python code can make it stale) */
    mr_kv *by_addr;     /* a pair's table: (key address, pair index) by increasing address */
    int64_t *at_of;     /* a pair's positions as C ints, by pair index */
    size_t nby;         /* entries of by_addr */
    size_t hint;        /* the entry of the last hit */
} mr_str_memo;

static inline void
mr_str_memo_init(mr_str_memo *m, PyObject *dict, Py_ssize_t nkeys, int64_t limit)
{
    m->dict = dict;
    m->limit = limit;
    m->min_run = nkeys / 8 > 16 ? nkeys / 8 : 16;
    m->run = 0;
    m->built = 0;
    m->slots = NULL;
    m->cap = 0;
    m->pair = NULL;
    m->own_dict = NULL;
    m->fixed = 0;
    m->by_addr = NULL;
    m->at_of = NULL;
    m->nby = 0;
    m->hint = 0;
}

static inline size_t
mr_str_home(const void *key, size_t cap)
{
    return mr_ptr_mix_slot(key, cap - 1);
}

/* A step that may run Python code follows (or has just run): drop the table. */
static inline void
mr_str_memo_code(mr_str_memo *m)
{
    if (m->fixed) return;
    m->built = 0;
    if (m->run > 0) m->run = 0;
}

/* A hint: the slot key will be looked up at. */
static inline void
mr_str_memo_prefetch(const mr_str_memo *m, const PyObject *key)
{
    if (m->built && m->slots != NULL) __builtin_prefetch(&m->slots[mr_str_home(key, m->cap)]);
}

static inline PyObject *mr_str_pair_get(mr_str_memo *m, PyObject *key, int64_t *at);

/* The dict's value for key when key is one of its key objects in the table, else NULL. */
static inline PyObject *
mr_str_memo_get(mr_str_memo *m, PyObject *key, int64_t *at)
{
    if (!m->built) return NULL;
    if (m->by_addr != NULL) return mr_str_pair_get(m, key, at);
    for (size_t i = mr_str_home(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        const mr_str_slot *s = &m->slots[i];
        if (s->key == key) {
            *at = s->at;
            return s->value;
        }
        if (s->key == NULL) return NULL;
    }
}

/* After a lookup the table did not answer: builds the table once min_run lookups have gone by
 * since the last step that may run code (no Python code: PyDict_Next, type and int reads).
 * Without memory, or with a key that is not an exact str, the table is off for the pass. */
static inline void
mr_str_memo_missed(mr_str_memo *m)
{
    if (m->fixed || m->built || m->run < 0 || ++m->run < m->min_run) return;
    Py_ssize_t nkeys = PyDict_Size(m->dict);
    size_t cap = 16;
    while (nkeys > 0 && cap < (size_t)nkeys * 2) {
        if (cap > ((size_t)PY_SSIZE_T_MAX) / (4 * sizeof(mr_str_slot))) {
            m->run = -1;
            return;
        }
        cap *= 2;
    }
    if (cap != m->cap) {
        PyMem_Free(m->slots);
        m->slots = PyMem_Malloc(cap * sizeof(mr_str_slot));
        m->cap = m->slots == NULL ? 0 : cap;
        if (m->slots == NULL) {
            m->run = -1;
            return;
        }
    }
    memset(m->slots, 0, cap * sizeof(mr_str_slot));
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(m->dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            m->run = -1;
            return;
        }
        if (!PyLong_CheckExact(value)) continue;
        int overflow = 0;
        long long at = PyLong_AsLongLongAndOverflow(value, &overflow); /* an exact int: no code */
        if (overflow || at < 0 || at >= m->limit) continue;
        size_t i = mr_str_home(key, cap);
        while (m->slots[i].key != NULL) i = (i + 1) & (cap - 1);
        m->slots[i].key = key;
        m->slots[i].value = value;
        m->slots[i].at = (int64_t)at;
    }
    m->built = 1;
}

static inline void
mr_str_memo_clear(mr_str_memo *m)
{
    free(m->by_addr);
    m->by_addr = NULL;
    PyMem_Free(m->at_of);
    m->at_of = NULL;
    PyMem_Free(m->slots);
    m->slots = NULL;
    m->cap = 0;
    m->built = 0;
    Py_CLEAR(m->own_dict);
}

/* ---- the pair form: (ids, positions), two tuples of equal length, ids exact strs that are
 * pairwise distinct (the caller's sort has checked it: sorted_by_str_keys(..., index=True)),
 * positions exact ints in [0, limit): the index {ids[i]: positions[i]} without a dict. Building
 * that dict (dict(zip(ids, rows))) at 10^6 fragments missed on other keys' str objects at every
 * collision (a str-keyed dict keeps the hashes in the keys) and at every resize; the table below
 * reads the tuples only (the keys' addresses, not the keys). The dict is made only when a lookup
 * needs one (a fragment's id an equal but distinct str, or an unknown id): mr_str_memo_dict. */

/* 1 when index is a pair (a 2-tuple): the caller then inits with mr_str_memo_init_pair. */
static inline int
mr_str_is_pair(PyObject *index)
{
    return PyTuple_CheckExact(index) && PyTuple_Size(index) == 2;
}

/* The pair's length after checking its form (ValueError when malformed: positions must lie in
 * [0, limit), or with a negative limit in [0, the pair's length)), or -1. */
static inline Py_ssize_t
mr_str_pair_size(PyObject *pair, int64_t limit)
{
    PyObject *ids = PyTuple_GetItem(pair, 0), *positions = PyTuple_GetItem(pair, 1);
    if (ids == NULL || positions == NULL) return -1;
    Py_ssize_t n = PyTuple_CheckExact(ids) ? PyTuple_Size(ids) : -1;
    if (n < 0 || !PyTuple_CheckExact(positions) || PyTuple_Size(positions) != n) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "tensor index pair must be two tuples of one length");
        return -1;
    }
    if (limit < 0) limit = (int64_t)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyTuple_GetItem(ids, i), *value = PyTuple_GetItem(positions, i);
        if (key == NULL || value == NULL) return -1;
        int overflow = 0;
        long long at = PyLong_CheckExact(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : -1;
        if (!PyUnicode_CheckExact(key) || overflow || at < 0 || at >= limit) {
            if (PyErr_Occurred()) return -1;
            PyErr_SetString(PyExc_ValueError, "tensor index pair must map exact strs to ints in range");
            return -1;
        }
    }
    return n;
}

/* Init m for a pair already checked by mr_str_pair_size: the table built at once, reading only
 * the tuples. It is the pair's (key address, index) entries sorted by address, not a hash table:
 * the ids lie in memory in the order they were made, and fragments, made in about that order,
 * look them up in increasing address order, so a lookup is mostly the last hit's entry or the
 * next one (a hash table's slots are random: at 10^6 fragments a miss at each of its ~10^5
 * inserts and at each tensor's first lookup). Without memory every lookup goes to the dict. */
static inline void
mr_str_memo_init_pair(mr_str_memo *m, PyObject *pair, Py_ssize_t n, int64_t limit)
{
    mr_str_memo_init(m, NULL, n, limit);
    m->pair = pair;
    m->fixed = 1;
    size_t un = (size_t)n;
    mr_kv *kv = mr_kalloc(un ? un : 1, sizeof(mr_kv));
    int64_t *at_of = mr_alloc_array(un ? un : 1, sizeof(int64_t));
    if (kv == NULL || at_of == NULL) {
        PyErr_Clear(); /* (mr_alloc_array sets MemoryError): the dict answers instead */
        free(kv);
        PyMem_Free(at_of);
        return;
    }
    PyObject *ids = PyTuple_GetItem(pair, 0), *positions = PyTuple_GetItem(pair, 1);
    int increasing = 1;
    for (size_t i = 0; i < un; i++) {
        kv[i].key = (uint64_t)(uintptr_t)PyTuple_GetItem(ids, (Py_ssize_t)i);
        kv[i].idx = i;
        at_of[i] = (int64_t)PyLong_AsLongLong(PyTuple_GetItem(positions, (Py_ssize_t)i)); /* checked */
        if (i > 0 && kv[i].key <= kv[i - 1].key) increasing = 0;
    }
    if (!increasing && mr_radix_sort(kv, un) != 0) {
        free(kv);
        PyMem_Free(at_of);
        return;
    }
    /* the same object twice (a caller's pair with a repeated id): its last entry, as in a dict
     * (the sort is stable) */
    size_t kept = 0;
    for (size_t i = 0; i < un; i++) {
        if (kept > 0 && kv[kept - 1].key == kv[i].key) kept--;
        kv[kept++] = kv[i];
    }
    m->by_addr = kv;
    m->at_of = at_of;
    m->nby = kept;
    m->built = 1;
}

/* A pair's lookup by key address: the last hit's entry, the next one, else a binary search. */
static inline PyObject *
mr_str_pair_get(mr_str_memo *m, PyObject *key, int64_t *at)
{
    uint64_t k = (uint64_t)(uintptr_t)key;
    const mr_kv *kv = m->by_addr;
    size_t h = m->hint, found = m->nby;
    if (h < m->nby && kv[h].key == k) found = h;
    else if (h + 1 < m->nby && kv[h + 1].key == k) found = h + 1;
    else {
        size_t lo = 0, hi = m->nby;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (kv[mid].key < k) lo = mid + 1;
            else hi = mid;
        }
        if (lo < m->nby && kv[lo].key == k) found = lo;
    }
    if (found == m->nby) return NULL;
    m->hint = found;
    size_t i = kv[found].idx;
    *at = m->at_of[i];
    return PyTuple_GetItem(PyTuple_GetItem(m->pair, 1), (Py_ssize_t)i); /* in range */
}

/* The dict of a pair: {ids[i]: positions[i]} (a new dict), or NULL with an exception. Exact strs
 * and ints only: no Python code runs. */
static inline PyObject *
mr_str_pair_dict(PyObject *pair)
{
    PyObject *ids = PyTuple_GetItem(pair, 0), *positions = PyTuple_GetItem(pair, 1);
    if (ids == NULL || positions == NULL) return NULL;
    Py_ssize_t n = PyTuple_Size(ids);
    PyObject *dict = n < 0 ? NULL : PyDict_New();
    for (Py_ssize_t i = 0; dict != NULL && i < n; i++) {
        PyObject *key = PyTuple_GetItem(ids, i), *value = PyTuple_GetItem(positions, i);
        if (key == NULL || value == NULL || PyDict_SetItem(dict, key, value) < 0) Py_CLEAR(dict);
    }
    return dict;
}

/* The dict to look a key up in when the table does not answer (borrowed; a pair's made at the
 * first call), or NULL with an exception. */
static inline PyObject *
mr_str_memo_dict(mr_str_memo *m)
{
    if (m->dict == NULL && m->pair != NULL) m->dict = m->own_dict = mr_str_pair_dict(m->pair);
    return m->dict;
}

#endif
