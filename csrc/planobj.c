/* planobj: trusted construction of the logical planner's result objects (issue 5).
 *
 * The overlap kernel (overlap.c) proves every invariant of a region; what is left per region
 * is building the frozen TransferRegion instance itself. build_regions allocates each
 * instance as object.__new__ does (no __init__ / __post_init__: nothing left to check) and
 * stores the fields in field order into the instance's own key-sharing dict
 * (mr_new_instance), so a planner-built region costs no Python-level constructor call and
 * no private key table. The records come from plan_overlaps. */
#include "planobj.h"
#include "layout.h"
#include "coverage_kernels.h"
#include "plain_dict.h"
#include "gctrack.h"
#include "rank_memo.h"

/* New references to the interned strings of src[0..n) in out[0..n), from a per-table cache
 * filled on first use (under the GIL; the cache keeps its references for the process).
 * 0, or -1 with an exception set (out[k] already filled hold references; the rest stay). */
static int
po_names(PyObject **cache, const char *const *src, int n, PyObject **out)
{
    for (int k = 0; k < n; k++) {
        if (cache[k] == NULL) {
            cache[k] = PyUnicode_InternFromString(src[k]);
            if (cache[k] == NULL) return -1;
        }
        Py_INCREF(cache[k]);
        out[k] = cache[k];
    }
    return 0;
}

/* A new empty dict that keeps each key's hash in its entries (CPython's "general" key table:
 * a dict that has held a key other than an exact str). Large maps keyed by scattered str ids
 * are built faster so: an exact-str-only table keeps no hashes, so every probe that meets
 * another key and every resize re-reads that key's hash from its own str object, a cache miss
 * each once the ids no longer fit in the cache. The dict is an ordinary dict (same order,
 * lookups, equality, iteration); the one key stored and deleted here (None: hash and equality
 * run no Python code) leaves no entry. NULL with an exception on failure. */
static PyObject *
po_hashed_dict(void)
{
    PyObject *d = PyDict_New();
    if (d != NULL && (PyDict_SetItem(d, Py_None, Py_None) < 0 || PyDict_DelItem(d, Py_None) < 0)) Py_CLEAR(d);
    return d;
}

#define PO_NFIELDS 11
#define PO_RECORD_LEN 11

static const char *const po_field_names[PO_NFIELDS] = {
    "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset",
    "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
};

static void
po_release_keys(PyObject **keys)
{
    for (int k = 0; k < PO_NFIELDS; k++) {
        Py_XDECREF(keys[k]);
        keys[k] = NULL;
    }
}

/* The list index held by item (a Python int in [0, bound)), or -1 with ValueError set. */
static Py_ssize_t
po_index(PyObject *item, Py_ssize_t bound)
{
    if (!PyLong_Check(item)) {
        PyErr_SetString(PyExc_ValueError, "region record index must be an int");
        return -1;
    }
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (value == -1 && PyErr_Occurred()) return -1;
    if (overflow != 0 || value < 0 || value >= (long long)bound) {
        PyErr_SetString(PyExc_ValueError, "region record index out of range");
        return -1;
    }
    return (Py_ssize_t)value;
}

/* One region instance of cls from record (a tuple of PO_RECORD_LEN items). */
static PyObject *
po_region(PyObject *cls, const mr_layout_class *lc, int untrack, PyObject *const *keys, PyObject *tensor_key,
          PyObject *record, PyObject *sources, Py_ssize_t nsources, PyObject *targets, Py_ssize_t ntargets)
{
    if (!PyTuple_Check(record) || PyTuple_Size(record) != PO_RECORD_LEN) {
        PyErr_SetString(PyExc_ValueError, "region record must be a tuple of 11 items");
        return NULL;
    }
    PyObject *item = PyTuple_GetItem(record, 0);
    if (item == NULL) return NULL;
    Py_ssize_t si = po_index(item, nsources);
    if (si < 0) return NULL;
    item = PyTuple_GetItem(record, 1);
    if (item == NULL) return NULL;
    Py_ssize_t ti = po_index(item, ntargets);
    if (ti < 0) return NULL;
    PyObject *source = PyList_GetItem(sources, si); /* borrowed */
    if (source == NULL) return NULL;
    PyObject *target = PyList_GetItem(targets, ti); /* borrowed */
    if (target == NULL) return NULL;
    /* held: reading tensor_id may run Python code that edits the lists */
    Py_INCREF(source);
    Py_INCREF(target);
    PyObject *dict = NULL, *region = NULL;
    PyObject *tensor_id = PyObject_GetAttr(target, tensor_key);
    if (tensor_id == NULL) goto done;
    if (lc->cls != NULL) {
        /* TransferRegion's C-owned layout (layout.h): the fields stored directly in field order */
        PyObject *values[PO_NFIELDS] = {tensor_id, source, target};
        for (Py_ssize_t k = 3; k < PO_NFIELDS; k++) {
            values[k] = PyTuple_GetItem(record, k - 1);
            if (values[k] == NULL) goto done;
        }
        region = mr_layout_new_gc(lc, values, PO_NFIELDS, untrack);
        goto done;
    }
    /* The fields stored in field order straight into the instance's own (key-sharing) dict. */
    region = mr_new_instance(cls, &dict, "build_regions");
    if (region == NULL) goto done;
    if (PyDict_SetItem(dict, keys[0], tensor_id) < 0 || PyDict_SetItem(dict, keys[1], source) < 0
        || PyDict_SetItem(dict, keys[2], target) < 0) {
        Py_CLEAR(region);
        goto done;
    }
    for (Py_ssize_t k = 3; k < PO_NFIELDS; k++) {
        item = PyTuple_GetItem(record, k - 1);
        if (item == NULL || PyDict_SetItem(dict, keys[k], item) < 0) {
            Py_CLEAR(region);
            goto done;
        }
    }
done:
    Py_XDECREF(tensor_id);
    Py_XDECREF(dict);
    Py_DECREF(source);
    Py_DECREF(target);
    return region;
}

PyDoc_STRVAR(build_regions_doc,
"build_regions(cls, records, sources, targets)\n"
"--\n\n"
"Instances of cls (a heap type whose instances have a __dict__) built from plan_overlaps\n"
"records, without calling cls: record (si, ti, overlap_offset, overlap_shape, source_base,\n"
"target_base, inner_bytes, outer_loop_counts, source_strides, target_strides, segments)\n"
"gives the fields tensor_id=targets[ti].tensor_id, source=sources[si], target=targets[ti]\n"
"and the geometry in order (the segment count is not stored). sources and targets are lists.\n"
"Returns a tuple.");

static PyObject *
po_build_regions(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *cls, *records, *sources, *targets;
    if (!PyArg_ParseTuple(args, "OOOO:build_regions", &cls, &records, &sources, &targets)) return NULL;
    if (!PyType_Check(cls) || !(PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "build_regions: cls must be a heap type");
        return NULL;
    }
    if (!PyList_Check(records) || !PyList_Check(sources) || !PyList_Check(targets)) {
        PyErr_SetString(PyExc_TypeError, "build_regions: records, sources and targets must be lists");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "build_regions: cls has no allocator");
        return NULL;
    }
    PyObject *keys[PO_NFIELDS] = {NULL};
    PyObject *tensor_key = NULL;
    PyObject *result = NULL;
    static PyObject *cache[PO_NFIELDS];
    if (po_names(cache, po_field_names, PO_NFIELDS, keys) < 0) goto done;
    tensor_key = keys[0];
    static mr_layout_memo region_memo; /* cls in TransferRegion's C-owned layout (layout.h) */
    mr_layout_class lc;
    (void)mr_region_layout(&region_memo, &lc, cls);
    {
        Py_ssize_t n = PyList_Size(records);
        Py_ssize_t nsources = PyList_Size(sources);
        Py_ssize_t ntargets = PyList_Size(targets);
        if (n < 0 || nsources < 0 || ntargets < 0) goto done;
        result = mr_gc_hide(PyTuple_New(n)); /* out of the collector until full (gctrack.h) */
        if (result == NULL) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *record = PyList_GetItem(records, i); /* borrowed */
            if (record == NULL) goto fail;
            /* The lists may change under hostile attribute hooks: re-read their sizes. */
            nsources = PyList_Size(sources);
            ntargets = PyList_Size(targets);
            if (nsources < 0 || ntargets < 0) goto fail;
            Py_INCREF(record);
            PyObject *region = po_region(cls, &lc, n >= MR_GC_BULK_MIN, keys, tensor_key, record, sources, nsources,
                                         targets, ntargets);
            Py_DECREF(record);
            if (region == NULL) goto fail;
            if (lc.cls == NULL && n >= MR_GC_BULK_MIN) { /* out of the cyclic collector when acyclic (common.h) */
                PyObject *own = PyObject_GenericGetDict(region, NULL);
                if (own == NULL) {
                    Py_DECREF(region);
                    goto fail;
                }
                (void)mr_untrack_inert(region, own);
                Py_DECREF(own);
            }
            if (PyTuple_SetItem(result, i, region) < 0) goto fail; /* steals region */
        }
    }
    mr_gc_show(result); /* full */
    if (PyTuple_Size(result) >= MR_GC_BULK_MIN) (void)mr_gc_inert(result, 1); /* when every region is */
    goto done;
fail:
    Py_CLEAR(result);
done:
    po_release_keys(keys);
    return result;
}

/* ---- pack_targets: one C pass over the planner's target fragments ------------------------ */

/* A key and its value side by side: a probe reads one cache line, not one in each of two
 * arrays (the tables below are probed at random and outgrow the cache at scale). */
typedef struct {
    int64_t key; /* slot key, -1 = empty */
    int64_t id;  /* cover id of the key */
} po_slot;

typedef struct {
    po_slot *e;
    size_t mask;
} po_map;

/* n empty slots of a po_map (key -1), or NULL with MemoryError. */
static po_slot *
po_map_slots(size_t n)
{
    po_slot *e = mr_alloc_array(n, sizeof(po_slot));
    if (e != NULL)
        for (size_t i = 0; i < n; i++) e[i].key = -1;
    return e;
}

/* pack_targets' cover ids: by key directly (ids[key], -1 = none yet) when the key range is small
 * (a few entries a fragment: a compact array instead of a hash table twice the fragment count,
 * whose random probes miss the cache once it outgrows it), else a po_map. */
typedef struct {
    int64_t *ids;  /* span entries, or NULL: use map */
    int64_t span;
    po_map map;
} po_covers;

/* Per-tensor tables from this many bytes on outgrow a core's L2 (1 MiB): only then do the
 * passes that index them by tensor at random ask for their entries ahead (below it the extra
 * work of the hints costs more than the misses they save). */
#define PO_TABLES_BIG ((size_t)1 << 20)

static uint64_t
po_hash(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33;
    return x;
}

/* Cover id of key (>= 0), assigning the next id (*count) on first appearance. */
static int64_t
po_map_claim(po_map *m, int64_t key, int64_t *count)
{
    size_t i = (size_t)po_hash((uint64_t)key) & m->mask;
    while (m->e[i].key != -1) {
        if (m->e[i].key == key) return m->e[i].id;
        i = (i + 1) & m->mask;
    }
    m->e[i].key = key;
    m->e[i].id = (*count)++;
    return m->e[i].id;
}

/* Cover id of key (>= 0), as po_map_claim; -1 for a key outside a direct table's range. */
static int64_t
po_covers_claim(po_covers *c, int64_t key, int64_t *count)
{
    if (c->ids == NULL) return po_map_claim(&c->map, key, count);
    if (key < 0 || key >= c->span) return -1;
    if (c->ids[key] < 0) c->ids[key] = (*count)++;
    return c->ids[key];
}

/* Bytes of n int64 values; NULL with an exception set on error. */
static const int64_t *
po_i64s(PyObject *obj, Py_ssize_t n, const char *what)
{
    char *data;
    Py_ssize_t size;
    if (!PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "pack_targets: %s must be bytes", what);
        return NULL;
    }
    if (PyBytes_AsStringAndSize(obj, &data, &size) < 0) return NULL;
    if (n < 0 || size != n * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "pack_targets: %s has the wrong length", what);
        return NULL;
    }
    return (const int64_t *)(const void *)data;
}

/* Growable int64 buffer. With bytes (po_reserve), v is that bytes object's own storage: the
 * result handed out without a copy when the buffer is filled exactly (po_buf_take). */
typedef struct {
    int64_t *v;
    size_t n, cap;
    PyObject *bytes; /* strong, or NULL: v is a PyMem block */
} po_buf;

static int po_push_grow(po_buf *b, int64_t x);

static inline int
po_push(po_buf *b, int64_t x)
{
    if (b->n == b->cap) return po_push_grow(b, x);
    b->v[b->n++] = x;
    return 0;
}

/* po_push into a full buffer: twice the room (64 values at first), then x. */
static int
po_push_grow(po_buf *b, int64_t x)
{
    {
        size_t cap = b->cap ? b->cap : 64;
        if (cap > ((size_t)PY_SSIZE_T_MAX / sizeof(int64_t)) / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
        int64_t *v;
        if (b->bytes != NULL) { /* out of a reserved bytes object (more pushed than reserved) */
            v = mr_alloc_array(cap, sizeof(int64_t));
            if (v == NULL) return -1;
            memcpy(v, b->v, b->n * sizeof(int64_t));
            Py_CLEAR(b->bytes);
        }
        else {
            v = PyMem_Realloc(b->v, cap * sizeof(int64_t));
            if (v == NULL) {
                PyErr_NoMemory();
                return -1;
            }
        }
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
    return 0;
}

/* Release b's storage (either kind); b is left empty. */
static void
po_buf_free(po_buf *b)
{
    if (b->bytes != NULL) Py_CLEAR(b->bytes);
    else PyMem_Free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

/* Room for cap values in b (empty): one allocation sized to what the caller will push, so the
 * buffer never grows by copies (each a fresh, page-faulting block at scale). The room is a new
 * bytes object of exactly cap values, not yet shared: filled exactly, it is the result itself
 * (po_buf_take), not copied into a second fresh block. 0, or -1 with an exception. */
static int
po_reserve(po_buf *b, size_t cap)
{
    if (cap == 0) return 0;
    if (cap > (size_t)PY_SSIZE_T_MAX / sizeof(int64_t)) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(cap * sizeof(int64_t)));
    if (bytes == NULL) return -1;
    char *data = PyBytes_AsString(bytes);
    if (data == NULL) {
        Py_DECREF(bytes);
        return -1;
    }
    po_buf_free(b);
    b->bytes = bytes;
    b->v = (int64_t *)(void *)data; /* the bytes' storage: 8-aligned (an object's, at a fixed offset) */
    b->n = 0;
    b->cap = cap;
    return 0;
}

/* The values pushed as a new bytes object (b's own reserved bytes when exactly filled, else a
 * copy); b is left empty either way. NULL with an exception on error. */
static PyObject *
po_buf_take(po_buf *b)
{
    PyObject *result;
    if (b->bytes != NULL && b->n == b->cap) {
        result = b->bytes; /* the reference b held */
        b->bytes = NULL;
        b->v = NULL;
        b->n = b->cap = 0;
        return result;
    }
    result = PyBytes_FromStringAndSize((const char *)b->v, (Py_ssize_t)(b->n * sizeof(int64_t)));
    po_buf_free(b);
    return result;
}

/* Per-pass memo of offset and shape tuples' coordinates: a placement's fragments share a few
 * tuple objects (a tensor's offsets, one shape per kind of shard). Only exact tuples of exact
 * ints are kept: they cannot change, and a slot holds a strong reference, so no address is
 * reused while the pass runs; a hit gives the values a read gives. */
#define PO_TUPLE_MEMO 16
#define PO_TUPLE_MEMO_D 8 /* coordinates a slot keeps */
typedef struct {
    PyObject *tuple; /* strong; NULL: empty */
    Py_ssize_t n;
    int64_t v[PO_TUPLE_MEMO_D];
} po_tuple_slot;

/* The coordinates of tuple t into out[0..nd) when every item is an int fitting int64: 1; 0 when
 * not (not a tuple of nd items, non-int, out of range); -1 with an exception. */
static int
po_coords(PyObject *t, Py_ssize_t nd, int64_t *out)
{
    if (!PyTuple_Check(t) || PyTuple_Size(t) != nd) return 0;
    for (Py_ssize_t k = 0; k < nd; k++) {
        PyObject *item = PyTuple_GetItem(t, k);
        if (item == NULL) return -1;
        if (!PyLong_Check(item)) return 0;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (overflow != 0) return 0;
        out[k] = (int64_t)v;
    }
    return 1;
}

/* po_coords through the memo m (PO_TUPLE_MEMO slots). */
static int
po_coords_memo(po_tuple_slot *m, PyObject *t, Py_ssize_t nd, int64_t *out)
{
    po_tuple_slot *slot = NULL;
    if (PyTuple_CheckExact(t) && nd >= 0 && nd <= PO_TUPLE_MEMO_D) {
        uintptr_t a = (uintptr_t)t;
        slot = &m[((a >> 4) ^ (a >> 10)) & (PO_TUPLE_MEMO - 1)];
        if (slot->tuple == t && slot->n == nd) {
            memcpy(out, slot->v, (size_t)nd * sizeof(int64_t));
            return 1;
        }
    }
    int rc = po_coords(t, nd, out);
    if (rc != 1 || slot == NULL) return rc;
    for (Py_ssize_t k = 0; k < nd; k++) {
        PyObject *item = PyTuple_GetItem(t, k); /* in range: po_coords read nd items */
        if (item == NULL || !PyLong_CheckExact(item)) {
            PyErr_Clear();
            return rc;
        }
    }
    PyObject *old = slot->tuple;
    slot->tuple = Py_NewRef(t);
    slot->n = nd;
    memcpy(slot->v, out, (size_t)nd * sizeof(int64_t));
    Py_XDECREF(old); /* an exact tuple of exact ints: its release runs no Python code */
    return rc;
}

static void
po_tuple_memo_free(po_tuple_slot *m)
{
    for (int k = 0; k < PO_TUPLE_MEMO; k++) Py_CLEAR(m[k].tuple);
}

/* Append the items of tuple t (exactly nd Python ints fitting int64) to b.
 * 1 = done, 0 = not usable here (caller falls back), -1 = error. */
static int
po_push_coords(po_buf *b, PyObject *t, int64_t nd)
{
    if (!PyTuple_Check(t) || PyTuple_Size(t) != nd) return 0;
    for (Py_ssize_t k = 0; k < nd; k++) {
        PyObject *item = PyTuple_GetItem(t, k);
        if (item == NULL) return -1;
        if (!PyLong_Check(item)) return 0;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (overflow != 0) return 0; /* the exact path reports it in its rule order */
        if (po_push(b, (int64_t)v) < 0) return -1;
    }
    return 1;
}

/* po_push_coords through the memo m: the same answer (on 0 nothing is pushed; the callers then
 * decline). */
static int
po_push_coords_memo(po_tuple_slot *m, po_buf *b, PyObject *t, int64_t nd)
{
    if (nd < 0 || nd > PO_TUPLE_MEMO_D) return po_push_coords(b, t, nd);
    int64_t v[PO_TUPLE_MEMO_D];
    int rc = po_coords_memo(m, t, (Py_ssize_t)nd, v);
    for (int64_t k = 0; k < nd && rc == 1; k++)
        if (po_push(b, v[k]) < 0) rc = -1;
    return rc;
}

/* nbytes as the kernel wants it: the value when in (0, 2**64), else 0 (inconsistent). */
static int
po_nbytes(PyObject *value, int64_t *out)
{
    if (!PyLong_Check(value)) return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        v = 0;
    }
    uint64_t u = (uint64_t)v;
    memcpy(out, &u, sizeof u);
    return 1;
}

enum { PK_TENSOR, PK_RANK, PK_OFFSET, PK_SHAPE, PK_NBYTES, PK_DP, PK_N };
static const char *const pk_names[PK_N] = {"tensor_id", "rank", "global_offset", "local_shape", "nbytes", "dp"};

/* *t = tensor_index[tid] when it is an int in [0, ntensors): 1; 0 when absent or not such an
 * int (the caller falls back); -1 with an exception. */
static int
po_tensor_of(PyObject *tensor_index, PyObject *tid, Py_ssize_t ntensors, Py_ssize_t *t)
{
    PyObject *index = PyDict_GetItemWithError(tensor_index, tid); /* borrowed */
    if (index == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyLong_Check(index)) return 0;
    int t_overflow = 0;
    long long t_value = PyLong_AsLongLongAndOverflow(index, &t_overflow);
    if (t_value == -1 && PyErr_Occurred()) return -1;
    if (t_overflow != 0 || t_value < 0 || t_value >= (long long)ntensors) return 0;
    *t = (Py_ssize_t)t_value;
    return 1;
}

/* Tensor index by tensor-id object (exact str only: equal pointers, equal lookups), so
 * each distinct id object is hashed and looked up once (open addressing, no removal). */
typedef struct {
    PyObject *key; /* borrowed; NULL = empty */
    Py_ssize_t t;
} po_tslot;

typedef struct {
    po_tslot *e; /* key and value side by side (one cache line a probe) */
    size_t mask;
} po_tmap;

/* An empty po_tmap of cap (a power of two) slots: 1, or 0 with MemoryError. */
static int
po_tmap_init(po_tmap *m, size_t cap)
{
    m->e = PyMem_Calloc(cap, sizeof(po_tslot)); /* NULL keys */
    if (m->e == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    m->mask = cap - 1;
    return 1;
}

#define PO_AHEAD 24 /* targets between a prefetch of a tensor-id object and its use */

/* The slot of key in a pointer-keyed table grown as it fills (kept at most half full): sized by the distinct
 * keys met rather than by the fragment count, it stays small enough for the cache. *used counts
 * the keys; NULL with MemoryError when growing fails. */
static Py_ssize_t *
po_tmap_slot_grow(po_tmap *m, size_t *used, PyObject *key)
{
    size_t i = (size_t)po_hash((uint64_t)(uintptr_t)key) & m->mask;
    while (m->e[i].key != NULL && m->e[i].key != key) i = (i + 1) & m->mask;
    if (m->e[i].key == key) return &m->e[i].t;
    if ((*used + 1) * 2 > m->mask + 1) {
        size_t cap = (m->mask + 1) * 2;
        po_tslot *e = mr_alloc_array(cap, sizeof(po_tslot));
        if (e == NULL) return NULL;
        for (size_t k = 0; k < cap; k++) e[k].key = NULL;
        for (size_t k = 0; k <= m->mask; k++) {
            if (m->e[k].key == NULL) continue;
            size_t j = (size_t)po_hash((uint64_t)(uintptr_t)m->e[k].key) & (cap - 1);
            while (e[j].key != NULL) j = (j + 1) & (cap - 1);
            e[j] = m->e[k];
        }
        PyMem_Free(m->e);
        m->e = e;
        m->mask = cap - 1;
        i = (size_t)po_hash((uint64_t)(uintptr_t)key) & m->mask;
        while (m->e[i].key != NULL) i = (i + 1) & m->mask;
    }
    m->e[i].key = key;
    m->e[i].t = -1;
    (*used)++;
    return &m->e[i].t;
}

/* The entry of key in the pointer-keyed map m, or NULL when absent. */
static const Py_ssize_t *
po_tmap_get(const po_tmap *m, PyObject *key)
{
    if (m->e == NULL) return NULL;
    size_t i = (size_t)po_hash((uint64_t)(uintptr_t)key) & m->mask;
    while (m->e[i].key != NULL) {
        if (m->e[i].key == key) return &m->e[i].t;
        i = (i + 1) & m->mask;
    }
    return NULL;
}

/* Geometry of the targets already read by fragment_columns (list order): per fragment its
 * dimension count, coordinates at a running position of offsets / shapes, and nbytes as
 * po_nbytes gives it. Only values that fit this path are ever packed there. */
typedef struct {
    const int64_t *ndim;
    const int64_t *offsets;
    const int64_t *shapes;
    const int64_t *nbytes;
    size_t at; /* running coordinate position of the next fragment */
    size_t coords; /* coordinates of the first n fragments (per kind) */
} po_geom;

/* One fragment into the buffers; 1 done, 0 fall back, -1 error. With g, fragment i's
 * geometry comes from g (its offsets, shapes and nbytes are not read again). */
static int
po_pack_one(PyObject *fragment, PyObject *known_tid, PyObject *known_dp, PyObject *const *names, PyObject *tensor_index,
            Py_ssize_t ntensors, const int64_t *tensor_ndim, const int64_t *routed, int64_t replicas, po_covers *map,
            int64_t *ncovers, po_buf *tensor, po_buf *cover, po_buf *offsets, po_buf *shapes, po_buf *nbytes,
            po_geom *g, Py_ssize_t i, Py_ssize_t known_t)
{
    int result = -1;
    PyObject *v[PK_N] = {NULL};
    for (int k = PK_TENSOR; k <= PK_NBYTES; k++) {
        if (k == PK_TENSOR && known_t >= 0) continue; /* tensor_index[known_tid], looked up by the caller */
        /* The caller's tensor id and DP rank (already read), when given, replace the reads. */
        if (k == PK_TENSOR && known_tid != NULL) {
            Py_INCREF(known_tid);
            v[k] = known_tid;
            continue;
        }
        if (k == PK_RANK && known_dp != NULL) continue;
        if (g != NULL && k != PK_TENSOR) continue; /* known_dp is given with g */
        v[k] = PyObject_GetAttr(fragment, names[k]);
        if (v[k] == NULL) goto done;
    }
    Py_ssize_t t = known_t;
    if (t < 0) {
        int found = po_tensor_of(tensor_index, v[PK_TENSOR], ntensors, &t);
        if (found <= 0) {
            result = found;
            goto done;
        }
    }
    int64_t slot = replicas; /* routed by owner */
    if (!routed[t]) {
        if (known_dp != NULL) {
            Py_INCREF(known_dp);
            v[PK_DP] = known_dp;
        } else {
            v[PK_DP] = PyObject_GetAttr(v[PK_RANK], names[PK_DP]);
        }
        if (v[PK_DP] == NULL) goto done;
        if (!PyLong_Check(v[PK_DP]) || replicas <= 0) {
            result = 0;
            goto done;
        }
        int overflow = 0;
        long long dp = PyLong_AsLongLongAndOverflow(v[PK_DP], &overflow);
        if (dp == -1 && PyErr_Occurred()) goto done;
        if (overflow != 0 || dp < 0) {
            result = 0;
            goto done;
        }
        slot = (int64_t)(dp % replicas);
    }
    int64_t key; /* t * (replicas + 1) + slot, checked */
    if (mr_mul_i64((int64_t)t, replicas + 1, &key) < 0 || mr_add_i64(key, slot, &key) < 0) {
        result = 0;
        goto done;
    }
    int64_t nb;
    int rc;
    size_t off_mark = offsets->n, shp_mark = shapes->n;
    if (g != NULL) {
        int64_t nd = g->ndim[i];
        if (nd != tensor_ndim[t]) {
            result = 0; /* as po_push_coords: a tuple of another length */
            goto done;
        }
        nb = g->nbytes[i];
        rc = 1;
        for (int64_t k = 0; k < nd && rc == 1; k++)
            if (po_push(offsets, g->offsets[g->at + (size_t)k]) < 0 || po_push(shapes, g->shapes[g->at + (size_t)k]) < 0)
                rc = -1;
        g->at += (size_t)nd;
    }
    else {
        rc = po_nbytes(v[PK_NBYTES], &nb);
        if (rc <= 0) {
            result = rc;
            goto done;
        }
        rc = po_push_coords(offsets, v[PK_OFFSET], tensor_ndim[t]);
        if (rc == 1) rc = po_push_coords(shapes, v[PK_SHAPE], tensor_ndim[t]);
    }
    if (rc <= 0) {
        offsets->n = off_mark;
        shapes->n = shp_mark;
        result = rc;
        goto done;
    }
    int64_t id = po_covers_claim(map, key, ncovers);
    if (id < 0) { /* cannot happen: t < ntensors and slot <= replicas bound the key */
        offsets->n = off_mark;
        shapes->n = shp_mark;
        result = 0;
        goto done;
    }
    if (po_push(tensor, (int64_t)t) < 0 || po_push(cover, id) < 0 || po_push(nbytes, nb) < 0)
        goto done;
    result = 1;
done:
    for (int k = 0; k < PK_N; k++) Py_XDECREF(v[k]);
    return result;
}

/* geometry = (ndim, offsets, shapes, nbytes), bytes of native int64 as fragment_columns returns
 * them, covering at least the first n fragments: every ndim in [0, 2**31), and offsets / shapes
 * holding at least the coordinates of the first n. 0, or -1 with ValueError / TypeError. The
 * borrowed byte buffers stay valid: the tuple holds them and the caller holds the tuple. */
static int
po_geom_from(PyObject *geometry, Py_ssize_t n, po_geom *g)
{
    if (!PyTuple_Check(geometry) || PyTuple_Size(geometry) != 4) {
        PyErr_SetString(PyExc_TypeError, "pack_targets: geometry must be a 4-tuple of bytes");
        return -1;
    }
    const char *data[4];
    Py_ssize_t size[4];
    for (Py_ssize_t k = 0; k < 4; k++) {
        PyObject *item = PyTuple_GetItem(geometry, k);
        if (item == NULL) return -1;
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "pack_targets: geometry must be a 4-tuple of bytes");
            return -1;
        }
        char *p;
        if (PyBytes_AsStringAndSize(item, &p, &size[k]) < 0) return -1;
        data[k] = p;
        if (size[k] % (Py_ssize_t)sizeof(int64_t) != 0) {
            PyErr_SetString(PyExc_ValueError, "pack_targets: geometry has the wrong length");
            return -1;
        }
        size[k] /= (Py_ssize_t)sizeof(int64_t);
    }
    if (size[0] < n || size[3] < n || size[1] != size[2]) {
        PyErr_SetString(PyExc_ValueError, "pack_targets: geometry has the wrong length");
        return -1;
    }
    g->ndim = (const int64_t *)(const void *)data[0];
    g->offsets = (const int64_t *)(const void *)data[1];
    g->shapes = (const int64_t *)(const void *)data[2];
    g->nbytes = (const int64_t *)(const void *)data[3];
    g->at = 0;
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (g->ndim[i] < 0 || g->ndim[i] > INT32_MAX || mr_add_i64(total, g->ndim[i], &total) < 0) {
            PyErr_SetString(PyExc_ValueError, "pack_targets: geometry ndim out of range");
            return -1;
        }
    }
    if (total > (int64_t)size[1]) {
        PyErr_SetString(PyExc_ValueError, "pack_targets: geometry has the wrong length");
        return -1;
    }
    g->coords = (size_t)total;
    return 0;
}

PyDoc_STRVAR(pack_targets_doc,
"pack_targets(fragments, tensor_index, tensor_ndim, routed, replicas, tensor_ids=None, dps=None)\n"
"--\n\n"
"The planner's target packing in one pass. fragments: a list or tuple of placement fragments;\n"
"tensor_index: tensor id -> kernel tensor index; tensor_ndim and routed: bytes of int64 per\n"
"tensor (routed != 0: the cover is the tensor's owner, else target dp % replicas selects the\n"
"replica slot). Returns (tensor, cover, offsets, shapes, nbytes, cover_keys): bytes of int64\n"
"(nbytes as uint64, 0 when outside (0, 2**64)) and, per cover id in order of first\n"
"appearance, its key tensor * (replicas + 1) + slot (slot == replicas: routed). Returns None\n"
"when some fragment does not fit this path (unknown tensor, rank count mismatch, non-int or\n"
"out-of-int64 values): the caller then packs exactly as before and reports in rule order.\n"
"tensor_ids and dps (lists parallel to fragments), when given, are the fragments'\n"
"tensor_id and rank.dp values already read by the caller (they are not read again).\n"
"geometry (with tensor_ids and dps): the 5th item of fragment_columns(fragments, ...) for\n"
"these fragments in this order (or a longer list they start): their offsets, shapes and\n"
"nbytes are then taken from it, not read again.");

static PyObject *
po_pack_targets(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *fragments, *tensor_index, *ndim_obj, *routed_obj;
    PyObject *tids = Py_None, *dps = Py_None, *geometry = Py_None;
    long long replicas_ll;
    if (!PyArg_ParseTuple(args, "OOOOL|OOO:pack_targets", &fragments, &tensor_index, &ndim_obj, &routed_obj,
                          &replicas_ll, &tids, &dps, &geometry))
        return NULL;
    int frags_list = PyList_Check(fragments);
    if (!(frags_list || PyTuple_CheckExact(fragments)) || !PyDict_Check(tensor_index)) {
        PyErr_SetString(PyExc_TypeError, "pack_targets: fragments must be a list or tuple and tensor_index a dict");
        return NULL;
    }
    if ((tids != Py_None && !PyList_Check(tids)) || (dps != Py_None && !PyList_Check(dps))) {
        PyErr_SetString(PyExc_TypeError, "pack_targets: tensor_ids and dps must be lists or None");
        return NULL;
    }
    if (replicas_ll < 0 || replicas_ll > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "pack_targets: replicas out of range");
        return NULL;
    }
    int64_t replicas = (int64_t)replicas_ll;
    if (!PyBytes_Check(ndim_obj)) {
        PyErr_SetString(PyExc_TypeError, "pack_targets: tensor_ndim must be bytes");
        return NULL;
    }
    Py_ssize_t ntensors = PyBytes_Size(ndim_obj);
    if (ntensors < 0) return NULL;
    ntensors /= (Py_ssize_t)sizeof(int64_t);
    const int64_t *tensor_ndim = po_i64s(ndim_obj, ntensors, "tensor_ndim");
    if (tensor_ndim == NULL) return NULL;
    const int64_t *routed = po_i64s(routed_obj, ntensors, "routed");
    if (routed == NULL) return NULL;
    for (Py_ssize_t t = 0; t < ntensors; t++) {
        if (tensor_ndim[t] < 0 || tensor_ndim[t] > PY_SSIZE_T_MAX / 2) {
            PyErr_SetString(PyExc_ValueError, "pack_targets: tensor_ndim out of range");
            return NULL;
        }
    }
    Py_ssize_t n = frags_list ? PyList_Size(fragments) : PyTuple_Size(fragments);
    if (n < 0) return NULL;
    po_geom geom_value, *geom = NULL;
    if (geometry != Py_None) {
        if (tids == Py_None || dps == Py_None) {
            PyErr_SetString(PyExc_TypeError, "pack_targets: geometry needs tensor_ids and dps");
            return NULL;
        }
        if (po_geom_from(geometry, n, &geom_value) < 0) return NULL;
        geom = &geom_value;
    }
    PyObject *names[PK_N] = {NULL};
    PyObject *result = NULL;
    po_buf tensor = {0}, cover = {0}, offsets = {0}, shapes = {0}, nbytes = {0};
    po_covers map = {NULL, 0, {NULL, 0}};
    po_tmap tmap = {NULL, 0};
    int64_t ncovers = 0;
    static PyObject *cache[PK_N];
    if (po_names(cache, pk_names, PK_N, names) < 0) goto done;
    int64_t span;
    if (mr_mul_i64((int64_t)ntensors, replicas + 1, &span) == 0 && span <= 2 * (int64_t)n + 64) {
        map.ids = mr_alloc_array(span ? (size_t)span : 1, sizeof(int64_t));
        if (map.ids == NULL) goto done;
        for (int64_t k = 0; k < span; k++) map.ids[k] = -1;
        map.span = span;
    }
    else {
        size_t cap = 16;
        while (cap < (size_t)n * 2) {
            if (cap > ((size_t)PY_SSIZE_T_MAX / sizeof(int64_t)) / 4) {
                PyErr_NoMemory();
                goto done;
            }
            cap *= 2;
        }
        map.map.e = po_map_slots(cap);
        if (map.map.e == NULL) goto done;
        map.map.mask = cap - 1;
    }
    size_t tused = 0;
    if (geom != NULL) {
        /* grown as distinct tensor-id objects come (usually one per tensor) */
        size_t tcap = 64;
        while (tcap < (size_t)ntensors * 2 && tcap < (size_t)n * 2) tcap *= 2;
        if (!po_tmap_init(&tmap, tcap)) goto done;
        /* seeded with tensor_index's exact str keys (the targets' tensor-id objects, usually:
         * the planner's index is made from them), each read once here: a target whose id
         * object is one of them is then known to be an exact str with its tensor, by pointer,
         * without reading the object (as the lookup would find it, by identity) */
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(tensor_index, &pos, &key, &value)) { /* no Python code runs */
            if (!PyUnicode_CheckExact(key) || !PyLong_Check(value)) continue; /* the lookup decides */
            int overflow = 0;
            long long tv = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (tv == -1 && PyErr_Occurred()) goto done;
            if (overflow != 0 || tv < 0 || tv >= (long long)ntensors) continue;
            Py_ssize_t *slot = po_tmap_slot_grow(&tmap, &tused, key);
            if (slot == NULL) goto done;
            *slot = (Py_ssize_t)tv;
        }
    }
    /* routed, tensor_ndim and the direct cover ids (when used) of every tensor */
    int tables_big = (size_t)ntensors * 2 * sizeof(int64_t) + (map.ids != NULL ? (size_t)map.span * sizeof(int64_t) : 0)
                     >= PO_TABLES_BIG;
    /* every fragment packed pushes one tensor, cover and nbytes value and its coordinates
     * (those of the geometry, with g): the buffers sized to that at once */
    if (po_reserve(&tensor, (size_t)n) < 0 || po_reserve(&cover, (size_t)n) < 0 || po_reserve(&nbytes, (size_t)n) < 0)
        goto done;
    if (geom != NULL && (po_reserve(&offsets, geom->coords) < 0 || po_reserve(&shapes, geom->coords) < 0)) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fragment = frags_list ? PyList_GetItem(fragments, i) : PyTuple_GetItem(fragments, i); /* borrowed */
        if (fragment == NULL) goto done;
        /* The lists may change under hostile attribute hooks: index them afresh (IndexError). */
        PyObject *tid = tids == Py_None ? NULL : PyList_GetItem(tids, i);
        PyObject *dp = dps == Py_None ? NULL : PyList_GetItem(dps, i);
        if ((tids != Py_None && tid == NULL) || (dps != Py_None && dp == NULL)) goto done;
        if (tid != NULL && i + PO_AHEAD < PyList_Size(tids)) {
            /* the targets come in id order, their tensor-id objects in tensor order: without
             * the map (no geometry) ask for the one PO_AHEAD further on now (a hint: a pointer,
             * not read); with it, for the home slot of the one PO_AHEAD / 2 further on (its
             * pointer hashed, not read; the map is as large as the tensors are many) */
            if (geom == NULL) {
                PyObject *ahead = PyList_GetItem(tids, i + PO_AHEAD);
                if (ahead != NULL) __builtin_prefetch(ahead);
            }
            PyObject *near = geom != NULL ? PyList_GetItem(tids, i + PO_AHEAD / 2) : NULL;
            if (near != NULL) {
                size_t slot = (size_t)po_hash((uint64_t)(uintptr_t)near) & tmap.mask;
                __builtin_prefetch(&tmap.e[slot]);
            }
            /* and, its map slot asked for PO_AHEAD / 4 targets ago, the per-tensor entries the
             * one PO_AHEAD / 4 further on reads (tensors come at random): routed, tensor_ndim
             * and its cover ids (a tensor index the map already holds; hints only) */
            PyObject *close = geom != NULL && tables_big ? PyList_GetItem(tids, i + PO_AHEAD / 4) : NULL;
            const Py_ssize_t *known = close != NULL ? po_tmap_get(&tmap, close) : NULL;
            if (known != NULL && *known >= 0 && *known < ntensors) {
                __builtin_prefetch(&routed[*known]);
                __builtin_prefetch(&tensor_ndim[*known]);
                if (map.ids != NULL) __builtin_prefetch(&map.ids[*known * (replicas + 1)]);
            }
        }
        int rc;
        /* every key in the map is an exact str (seeded ones checked, the others before their
         * insertion below): a hit needs no read of the id object */
        Py_ssize_t *hit = geom != NULL && tid != NULL ? (Py_ssize_t *)po_tmap_get(&tmap, tid) : NULL;
        if (geom != NULL && (hit != NULL || PyUnicode_CheckExact(tid)) && PyLong_CheckExact(dp)) {
            /* Nothing below runs Python code (exact str keys and ints): the fragment is not
             * touched at all, and the lists (held by the caller) keep tid and dp alive. */
            Py_ssize_t *t = hit != NULL ? hit : po_tmap_slot_grow(&tmap, &tused, tid);
            if (t == NULL) goto done;
            if (*t < 0) {
                rc = po_tensor_of(tensor_index, tid, ntensors, t);
                if (rc <= 0) *t = -1;
                if (rc < 0) goto done;
            }
            if (*t < 0) rc = 0;
            else
                rc = po_pack_one(fragment, tid, dp, names, tensor_index, ntensors, tensor_ndim, routed, replicas,
                                 &map, &ncovers, &tensor, &cover, &offsets, &shapes, &nbytes, geom, i, *t);
        }
        else {
            Py_INCREF(fragment);
            Py_XINCREF(tid);
            Py_XINCREF(dp);
            rc = po_pack_one(fragment, tid, dp, names, tensor_index, ntensors, tensor_ndim, routed, replicas, &map,
                             &ncovers, &tensor, &cover, &offsets, &shapes, &nbytes, geom, i, -1);
            Py_XDECREF(dp);
            Py_XDECREF(tid);
            Py_DECREF(fragment);
        }
        if (rc < 0) goto done;
        if (rc == 0) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    {
        PyObject *keys = PyList_New((Py_ssize_t)ncovers);
        if (keys == NULL) goto done;
        if (map.ids != NULL) {
            for (int64_t k = 0; k < map.span; k++) {
                if (map.ids[k] < 0) continue;
                PyObject *key = PyLong_FromLongLong((long long)k);
                if (key == NULL || PyList_SetItem(keys, (Py_ssize_t)map.ids[k], key) < 0) {
                    Py_DECREF(keys);
                    goto done;
                }
            }
        }
        for (size_t i = 0; map.ids == NULL && i <= map.map.mask; i++) {
            if (map.map.e[i].key == -1) continue;
            PyObject *key = PyLong_FromLongLong((long long)map.map.e[i].key);
            if (key == NULL || PyList_SetItem(keys, (Py_ssize_t)map.map.e[i].id, key) < 0) {
                Py_DECREF(keys);
                goto done;
            }
        }
        PyObject *parts[5] = {po_buf_take(&tensor), po_buf_take(&cover), po_buf_take(&offsets),
                              po_buf_take(&shapes), po_buf_take(&nbytes)};
        if (parts[0] != NULL && parts[1] != NULL && parts[2] != NULL && parts[3] != NULL && parts[4] != NULL)
            result = PyTuple_Pack(6, parts[0], parts[1], parts[2], parts[3], parts[4], keys);
        for (int k = 0; k < 5; k++) Py_XDECREF(parts[k]);
        Py_DECREF(keys);
    }
done:
    for (int k = 0; k < PK_N; k++) Py_XDECREF(names[k]);
    po_buf_free(&tensor);
    po_buf_free(&cover);
    po_buf_free(&offsets);
    po_buf_free(&shapes);
    po_buf_free(&nbytes);
    PyMem_Free(map.ids);
    PyMem_Free(map.map.e);
    PyMem_Free(tmap.e);
    return result;
}

/* ---- select_sources: step 4 (source selection) and the source packing in one C pass ----- */

enum { SS_TENSOR, SS_RANK, SS_OFFSET, SS_SHAPE, SS_NBYTES, SS_ID, SS_DP, SS_TP, SS_PP, SS_EP, SS_N };
static const char *const ss_names[SS_N] = {"tensor_id", "rank", "global_offset", "local_shape", "nbytes",
                                           "placement_fragment_id", "dp", "tp", "pp", "ep"};

/* A copy of bytes obj as n int64 values (n < 0: any multiple of 8, returned in *count).
 * NULL with an exception set on error (the caller frees the copy with PyMem_Free). */
static int64_t *
po_copy_i64(PyObject *obj, Py_ssize_t n, Py_ssize_t *count, const char *what)
{
    char *data;
    Py_ssize_t size;
    if (!PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "select_sources: %s must be bytes", what);
        return NULL;
    }
    if (PyBytes_AsStringAndSize(obj, &data, &size) < 0) return NULL;
    if (size % (Py_ssize_t)sizeof(int64_t) != 0 || (n >= 0 && size / (Py_ssize_t)sizeof(int64_t) != n)) {
        PyErr_Format(PyExc_ValueError, "select_sources: %s has the wrong length", what);
        return NULL;
    }
    Py_ssize_t m = size / (Py_ssize_t)sizeof(int64_t);
    int64_t *out = mr_alloc_array((size_t)m, sizeof(int64_t));
    if (out == NULL) return NULL;
    if (size > 0) memcpy(out, data, (size_t)size);
    if (count != NULL) *count = m;
    return out;
}

/* value (a new reference, stolen; NULL: the read failed) as an int fitting int64: 1 done,
 * 0 not usable (caller falls back), -1 error. */
static int
po_value_i64(PyObject *value, int64_t *out)
{
    if (value == NULL) return -1;
    int result = 0;
    if (PyLong_Check(value)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            result = -1;
        } else if (overflow == 0) {
            *out = (int64_t)v;
            result = 1;
        }
    }
    Py_DECREF(value);
    return result;
}

/* An int attribute of obj that fits int64: 1 done, 0 not usable (caller falls back), -1 error. */
static int
po_attr_i64(PyObject *obj, PyObject *name, int64_t *out)
{
    return po_value_i64(PyObject_GetAttr(obj, name), out);
}

/* New references v[k] = state[names[k]] (k < n) from one scan of the state's entries, matching
 * the interned names by identity (no hashing, no Python code; as canonical.c's scan): exact when
 * every key met is an exact str (no two keys are then equal). A name not met leaves v[k] NULL;
 * all stay NULL (no exception) when state is NULL or not a dict, or holds a key that is not an
 * exact str. Any exception of the state read is cleared (the caller reads attributes then).
 * Returns 1 when state is a plain dict (plain_dict.h pd_plain_keys: an attribute read of it runs
 * no Python code), else 0. */
static int
po_scan_state(PyObject *state, PyObject *const *names, int n, PyObject **v)
{
    for (int k = 0; k < n; k++) v[k] = NULL;
    if (state == NULL || !PyDict_Check(state)) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(state, &pos, &key, &value)) {
        int k = 0;
        while (k < n && key != names[k]) k++;
        if (k < n) v[k] = value;
        else if (!PyUnicode_CheckExact(key)) {
            for (k = 0; k < n; k++) v[k] = NULL;
            return 0;
        }
    }
    for (int k = 0; k < n; k++) Py_XINCREF(v[k]);
    return PyDict_CheckExact(state);
}

/* Field name of obj as a new reference: *met (taken; from the state scan) when not NULL, else
 * the attribute read (NULL with an exception on error). */
static PyObject *
po_take_field(PyObject *obj, PyObject **met, PyObject *name)
{
    PyObject *value = *met;
    *met = NULL;
    return value != NULL ? value : PyObject_GetAttr(obj, name);
}

/* Lists made with n empty (NULL) slots are out of the collector while they are filled: Python
 * code run by an attribute read in between would otherwise find them (gc.get_objects()) and
 * read a NULL item (a crash). po_lists_track puts them back (each at most once) when filled. */
static void
po_lists_untrack(PyObject *const *lists, int n)
{
    for (int k = 0; k < n; k++)
        if (lists[k] != NULL && PyObject_GC_IsTracked(lists[k])) PyObject_GC_UnTrack(lists[k]);
}

static void
po_lists_track(PyObject *const *lists, int n)
{
    for (int k = 0; k < n; k++)
        if (lists[k] != NULL && !PyObject_GC_IsTracked(lists[k])) PyObject_GC_Track(lists[k]);
}

typedef struct {
    PyObject *obj;  /* strong reference */
    int64_t t;      /* kernel tensor index */
    int64_t rank[4]; /* dp, tp, pp, ep */
    size_t coord;   /* start of 2 * ndim values (offsets, then shapes) in the coordinate buffer */
    size_t at;      /* the fragment's position in the input */
} ss_row;

typedef struct {
    int64_t cover;
    int64_t position;
    size_t row;
} ss_pick;

/* Order key (rank.dp, rank.pp, rank.ep, rank.tp) of two rows: <0, 0, >0. */
static int
ss_rank_cmp(const ss_row *a, const ss_row *b)
{
    static const int order[4] = {0, 2, 3, 1};
    for (int k = 0; k < 4; k++) {
        int64_t x = a->rank[order[k]], y = b->rank[order[k]];
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

static uint64_t
ss_geometry_hash(int64_t t, const int64_t *c, int64_t nd)
{
    uint64_t h = po_hash((uint64_t)t + 0x9E3779B97F4A7C15ULL);
    for (int64_t k = 0; k < 2 * nd; k++) h = po_hash(h ^ (uint64_t)c[k]);
    return h;
}

static uint64_t
ss_row_hash(const ss_row *row, const int64_t *coords, int64_t nd)
{
    return ss_geometry_hash(row->t, &coords[row->coord], nd);
}

/* Position (first-occurrence number of the row's (tensor, offset, shape)); slots hold row + 1. */
static int64_t
ss_position(size_t *slots, size_t mask, const ss_row *rows, size_t r, const int64_t *coords,
            const int64_t *tensor_ndim, int64_t *positions, int64_t *npositions)
{
    const ss_row *row = &rows[r];
    int64_t nd = tensor_ndim[row->t];
    size_t i = (size_t)ss_row_hash(row, coords, nd) & mask;
    while (slots[i] != 0) {
        const ss_row *other = &rows[slots[i] - 1];
        if (other->t == row->t
            && memcmp(&coords[other->coord], &coords[row->coord], (size_t)(2 * nd) * sizeof(int64_t)) == 0)
            return positions[slots[i] - 1];
        i = (i + 1) & mask;
    }
    slots[i] = r + 1;
    positions[r] = (*npositions)++;
    return positions[r];
}

/* 1 when the fragment of row a sorts strictly before that of row b by placement_fragment_id
 * (after equal rank keys), 0 when not, 2 when an id is not an exact str (fall back), -1 error. */
static int
ss_id_less(PyObject *a, PyObject *b, PyObject *name)
{
    PyObject *x = PyObject_GetAttr(a, name);
    if (x == NULL) return -1;
    PyObject *y = PyObject_GetAttr(b, name);
    if (y == NULL) {
        Py_DECREF(x);
        return -1;
    }
    int result = 2;
    if (PyUnicode_CheckExact(x) && PyUnicode_CheckExact(y)) result = PyObject_RichCompareBool(x, y, Py_LT);
    Py_DECREF(x);
    Py_DECREF(y);
    return result;
}

/* ss_id_less of two ids already read (no attribute read): 1, 0, 2 when either is not an exact
 * str, -1 error. */
static int
ss_str_less(PyObject *x, PyObject *y)
{
    if (!PyUnicode_CheckExact(x) || !PyUnicode_CheckExact(y)) return 2;
    return PyObject_RichCompareBool(x, y, Py_LT); /* exact str: no Python code runs */
}

static size_t
ss_capacity(size_t n)
{
    size_t cap = 16;
    while (cap < n * 2 && cap <= ((size_t)PY_SSIZE_T_MAX / sizeof(int64_t)) / 4) cap *= 2;
    return cap;
}

/* Axis code (0=dp 1=tp 2=pp 3=ep) of an exact str kind, or -1. */
static int
ss_axis_code(PyObject *kind)
{
    static const char *const axis[4] = {"dp", "tp", "pp", "ep"};
    if (!PyUnicode_CheckExact(kind)) return -1;
    for (int a = 0; a < 4; a++) {
        if (PyUnicode_CompareWithASCIIString(kind, axis[a]) == 0) return a;
    }
    return -1;
}

/* The values of owner (an exact tuple of exact (kind, int) pairs over exactly the exact-str
 * kinds) into out[0..3], zero padded: 1 done, 0 not usable here (fall back), -1 error. */
static int
ss_owner_values(PyObject *owner, PyObject *kinds, Py_ssize_t nk, int64_t *out)
{
    if (!PyTuple_CheckExact(owner) || PyTuple_Size(owner) != nk) return 0;
    for (Py_ssize_t k = 0; k < 4; k++) out[k] = 0;
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *pair = PyTuple_GetItem(owner, k);
        if (pair == NULL) return -1;
        if (!PyTuple_CheckExact(pair) || PyTuple_Size(pair) != 2) return 0;
        PyObject *kind = PyTuple_GetItem(pair, 0);
        PyObject *value = PyTuple_GetItem(pair, 1);
        PyObject *expected = PyTuple_GetItem(kinds, k);
        if (kind == NULL || value == NULL || expected == NULL) return -1;
        if (!PyUnicode_CheckExact(kind)) return 0;
        int cmp = PyUnicode_Compare(kind, expected); /* both exact str: no Python code runs */
        if (cmp == -1 && PyErr_Occurred()) return -1;
        if (cmp != 0 || !PyLong_Check(value)) return 0;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (overflow != 0) return 0;
        out[k] = (int64_t)v;
    }
    return 1;
}

/* The pre-read's tensor-id map (met) holds, per id object, the tensor index t of an object read
 * on some fragment (an exact str; -1: not a needed tensor), and SS_MET_SEEDED(t) (<= -2) for a
 * key of tensor_index no fragment had (its type not read). */
#define SS_MET_SEEDED(t) (-2 - (Py_ssize_t)(t))

/* The chosen owners of the complete replicas (slots 0..R-1) of the tensors not routed by a DP
 * owner, as ss_build_tables' lookups chosen[tids[t]] give them, but each chosen dict read in
 * its own order: an entry whose key object is one the pre-read met (met: tensor-id object ->
 * tensor index, by value through tensor_index) belongs to that tensor (an exact str equal to
 * tids[t]: the one key the lookup finds), without hashing the key or probing the dict for it.
 * A (tensor, slot) no entry filled that way (its key another object of that value, or none)
 * is then looked up as before. 1 done, 0 fall back, -1 error.
 *
 * The entries come in each dict's order, their tensors at random (the dicts follow the source
 * fragments, the tensor index the targets): the per-tensor tables (routed, tids, valid, kinds,
 * owners) would be read once per entry at random. So the entries are first gathered in order
 * (key and owner pointers, then each key's tensor through met, its slot asked for a few entries
 * ahead), sorted by (tensor, slot) (a stable radix sort: a (tensor, slot) met twice keeps the
 * dict order, the first filling it as before) and only then applied, in tensor order. Nothing
 * in between runs Python code (pointer reads, exact-type tests; exact str compares in
 * ss_owner_values), and the call holds the dicts, so the owners read are still theirs. */
#define SR_AHEAD 16 /* entries between the prefetch of a key's met slot and its lookup */

static int
ss_replica_owners(Py_ssize_t ntensors, PyObject *kinds_list, PyObject *slot_list, Py_ssize_t nreplicas,
                  PyObject **tids, const int64_t *routed, int64_t *owners, int64_t *valid, const po_tmap *met)
{
    Py_ssize_t nslots = nreplicas + 1;
    size_t total = 0;
    for (Py_ssize_t s = 0; s < nreplicas; s++) {
        PyObject *chosen = PyList_GetItem(slot_list, s);
        if (chosen == NULL) return -1;
        if (!PyDict_Check(chosen)) return 0;
        Py_ssize_t size = PyDict_Size(chosen);
        if (size < 0) return -1;
        if (__builtin_add_overflow(total, (size_t)size, &total)) {
            PyErr_NoMemory();
            return -1;
        }
    }
    /* the dicts held while their borrowed owners are in use (slot_list is the caller's list) */
    PyObject **held = mr_alloc_array(nreplicas ? (size_t)nreplicas : 1, sizeof(PyObject *));
    PyObject **keys = mr_alloc_array(total ? total : 1, sizeof(PyObject *));
    PyObject **values = mr_alloc_array(total ? total : 1, sizeof(PyObject *));
    mr_kv *order = mr_alloc_array(total ? total : 1, sizeof(mr_kv));
    Py_ssize_t nheld = 0;
    int rc = -1;
    if (held == NULL || keys == NULL || values == NULL || order == NULL) goto done;
    size_t m = 0; /* entries with a tensor, in order */
    for (Py_ssize_t s = 0; s < nreplicas; s++) {
        PyObject *chosen = PyList_GetItem(slot_list, s); /* a dict (checked above) */
        if (chosen == NULL) goto done;
        Py_INCREF(chosen);
        held[nheld++] = chosen;
        /* the entries' pointers, in order (a sequential read of the dict's table) */
        size_t n = 0;
        Py_ssize_t pos = 0;
        PyObject *key, *owner;
        while (PyDict_Next(chosen, &pos, &key, &owner)) { /* no Python code runs */
            if (n == total - m) break; /* cannot happen: sizes counted above, nothing changed */
            keys[m + n] = key;
            values[m + n] = owner;
            n++;
        }
        /* their tensors (met's slots asked for SR_AHEAD entries ahead: pointers hashed, not read);
         * kept compacted at m */
        size_t kept = m;
        for (size_t e = m; e < m + n; e++) {
            if (e + SR_AHEAD < m + n && met->e != NULL)
                __builtin_prefetch(&met->e[(size_t)po_hash((uint64_t)(uintptr_t)keys[e + SR_AHEAD]) & met->mask]);
            PyObject *k = keys[e];
            /* only an exact str key (another key, e.g. a str subclass the map was seeded with
             * from tensor_index, is looked up by value below, as before); a key the pre-read
             * met on a fragment was an exact str there (see SS_MET_SEEDED): not read again.
             * A key it did not meet is read: the dicts are probed below, so an inexact key (its
             * __eq__ would run in a probe: AUDIT5 F4) falls back. */
            const Py_ssize_t *found = po_tmap_get(met, k);
            if (found == NULL && !PyUnicode_CheckExact(k)) {
                rc = 0;
                goto done;
            }
            Py_ssize_t t = found == NULL ? -1 : *found;
            if (t <= SS_MET_SEEDED(0)) { /* a seeded tensor_index key no fragment had */
                if (!PyUnicode_CheckExact(k)) continue;
                t = SS_MET_SEEDED(0) - t;
            }
            if (t < 0 || t >= ntensors) continue;
            values[kept] = values[e];
            order[kept].key = (uint64_t)t * (uint64_t)nslots + (uint64_t)s; /* < ntensors * nslots */
            order[kept].idx = kept;
            kept++;
        }
        m = kept;
    }
    if (mr_radix_sort(order, m) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    /* the last owner decoded over the last kinds (the chosen owners are usually shared tuples):
     * both immutable and held while this loop runs no Python code */
    PyObject *memo_owner = NULL, *memo_kinds = NULL;
    int64_t memo[4] = {0, 0, 0, 0};
    rc = 1;
    for (size_t j = 0; rc == 1 && j < m; j++) {
        size_t key = (size_t)order[j].key;
        Py_ssize_t t = (Py_ssize_t)(key / (size_t)nslots);
        if (routed[t] || tids[t] == NULL || valid[key]) continue;
        PyObject *kinds = PyList_GetItem(kinds_list, t);
        if (kinds == NULL) {
            rc = -1;
            break;
        }
        PyObject *owner = values[order[j].idx];
        int64_t *out = &owners[key * 4];
        if (owner == memo_owner && kinds == memo_kinds) {
            memcpy(out, memo, sizeof memo);
            valid[key] = 1;
            continue;
        }
        Py_ssize_t nk = PyTuple_Size(kinds); /* an exact tuple of at most 4 (ss_build_tables) */
        if (nk < 0) {
            rc = -1;
            break;
        }
        rc = ss_owner_values(owner, kinds, nk, out);
        valid[key] = rc == 1;
        if (rc == 1) {
            memo_owner = owner;
            memo_kinds = kinds;
            memcpy(memo, out, sizeof memo);
        }
    }
done:
    for (Py_ssize_t k = 0; k < nheld; k++) Py_DECREF(held[k]);
    PyMem_Free(held);
    PyMem_Free(keys);
    PyMem_Free(values);
    PyMem_Free(order);
    if (rc != 1) return rc;
    for (Py_ssize_t t = 0; t < ntensors; t++) {
        if (routed[t] || tids[t] == NULL) continue;
        for (Py_ssize_t s = 0; s < nreplicas; s++) {
            if (valid[t * nslots + s]) continue;
            PyObject *chosen = PyList_GetItem(slot_list, s); /* a dict (checked above) */
            PyObject *kinds = PyList_GetItem(kinds_list, t);
            if (chosen == NULL || kinds == NULL) return -1;
            Py_ssize_t nk = PyTuple_Size(kinds);
            if (nk < 0) return -1;
            Py_INCREF(chosen);
            rc = 1;
            PyObject *owner = PyDict_GetItemWithError(chosen, tids[t]); /* borrowed */
            if (owner == NULL) {
                rc = PyErr_Occurred() ? -1 : 1; /* no chosen owner: slot stays invalid */
            } else {
                Py_INCREF(owner);
                rc = ss_owner_values(owner, kinds, nk, &owners[(t * nslots + s) * 4]);
                valid[t * nslots + s] = rc == 1;
                Py_DECREF(owner);
            }
            Py_DECREF(chosen);
            if (rc != 1) return rc;
        }
    }
    return 1;
}

/* tids[t] := a strong reference to the key of tensor_index whose value is t (NULL when
 * tensor_index names no tensor t), in one pass over the dict's entries. 1 done; 0 fall back
 * (a value not an int in range(ntensors), or two keys of one index); -1 error. */
static int
ss_tensor_ids(PyObject *tensor_index, Py_ssize_t ntensors, PyObject **tids)
{
    /* the entries' pointers first (a sequential read of the dict's table), then the keys and
     * values they point to, each asked for a few entries ahead (scattered objects); the dict
     * is the caller's and no Python code runs in between, so the pointers stay its entries' */
    Py_ssize_t size = PyDict_Size(tensor_index);
    if (size < 0) return -1;
    PyObject **kv = mr_alloc_array(size ? 2 * (size_t)size : 1, sizeof(PyObject *));
    if (kv == NULL) return -1;
    size_t m = 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (m < (size_t)size && PyDict_Next(tensor_index, &pos, &key, &value)) {
        kv[2 * m] = key;
        kv[2 * m + 1] = value;
        m++;
    }
    int rc = 1;
    for (size_t j = 0; j < m && rc == 1; j++) {
        if (j + 16 < m) {
            __builtin_prefetch(kv[2 * (j + 16)]);
            __builtin_prefetch(kv[2 * (j + 16) + 1]);
        }
        key = kv[2 * j];
        value = kv[2 * j + 1];
        /* the pass probes tensor_index with exact-str ids: its keys exact strs too, so that no
         * probe runs Python code (plain_dict.h; AUDIT5 F4) */
        if (!PyLong_Check(value) || !PyUnicode_CheckExact(key)) {
            rc = 0;
            break;
        }
        int overflow = 0;
        long long t = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (t == -1 && PyErr_Occurred()) rc = -1;
        else if (overflow != 0 || t < 0 || t >= (long long)ntensors || tids[t] != NULL) rc = 0;
        else tids[t] = Py_NewRef(key);
    }
    PyMem_Free(kv);
    return rc;
}

/* The owner tables of select_sources from the planner's values. tids: ss_tensor_ids'. Per tensor t:
 * routed[t], axes[t*4..], and per slot s (R complete replicas, then the DP owner's slot R)
 * valid[t*(R+1)+s] and owners[(t*(R+1)+s)*4..]. With met (the pre-read's tensor-id map), the
 * complete replicas' owners come from ss_replica_owners. 1 done, 0 fall back, -1 error. */
static int
ss_build_tables(Py_ssize_t ntensors, PyObject *kinds_list, PyObject *owner_list,
                PyObject *slot_list, Py_ssize_t nreplicas, PyObject **tids, int64_t *routed, int64_t *axes,
                int64_t *owners, int64_t *valid, const po_tmap *met)
{
    Py_ssize_t nslots = nreplicas + 1;
    /* without met the chosen dicts are probed below: plain ones only (plain_dict.h, AUDIT5 F4;
     * with met, ss_replica_owners reads every key) */
    for (Py_ssize_t s = 0; met == NULL && s < nreplicas; s++) {
        PyObject *chosen = PyList_GetItem(slot_list, s);
        if (chosen == NULL) return -1;
        if (!pd_plain_keys(chosen)) return 0;
    }
    for (Py_ssize_t t = 0; t < ntensors; t++) {
        PyObject *kinds = PyList_GetItem(kinds_list, t);
        PyObject *dp_owner = PyList_GetItem(owner_list, t);
        if (kinds == NULL || dp_owner == NULL) return -1;
        if (!PyTuple_CheckExact(kinds)) return 0;
        Py_ssize_t nk = PyTuple_Size(kinds);
        if (nk < 0) return -1;
        if (nk > 4) return 0;
        for (Py_ssize_t k = 0; k < 4; k++) {
            int code = -1;
            if (k < nk) {
                PyObject *kind = PyTuple_GetItem(kinds, k);
                if (kind == NULL) return -1;
                code = ss_axis_code(kind);
                if (code < 0) return 0;
            }
            axes[t * 4 + k] = code;
        }
        int64_t *row_valid = &valid[t * nslots];
        int64_t *row_owners = &owners[t * nslots * 4];
        for (Py_ssize_t s = 0; s < nslots; s++) row_valid[s] = 0;
        for (Py_ssize_t k = 0; k < nslots * 4; k++) row_owners[k] = 0;
        Py_INCREF(kinds);
        Py_INCREF(dp_owner);
        int rc = 1;
        if (dp_owner != Py_None) {
            routed[t] = 1;
            rc = ss_owner_values(dp_owner, kinds, nk, &row_owners[nreplicas * 4]);
            row_valid[nreplicas] = rc == 1;
        } else {
            routed[t] = 0;
            for (Py_ssize_t s = 0; rc == 1 && met == NULL && s < nreplicas && tids[t] != NULL; s++) {
                PyObject *chosen = PyList_GetItem(slot_list, s);
                if (chosen == NULL) {
                    rc = -1;
                    break;
                }
                if (!PyDict_Check(chosen)) {
                    rc = 0;
                    break;
                }
                Py_INCREF(chosen);
                PyObject *owner = PyDict_GetItemWithError(chosen, tids[t]); /* borrowed */
                if (owner == NULL) {
                    rc = PyErr_Occurred() ? -1 : 1; /* no chosen owner: slot stays invalid */
                } else {
                    Py_INCREF(owner);
                    rc = ss_owner_values(owner, kinds, nk, &row_owners[s * 4]);
                    row_valid[s] = rc == 1;
                    Py_DECREF(owner);
                }
                Py_DECREF(chosen);
            }
        }
        Py_DECREF(kinds);
        Py_DECREF(dp_owner);
        if (rc != 1) return rc;
    }
    return met == NULL ? 1 : ss_replica_owners(ntensors, kinds_list, slot_list, nreplicas, tids, routed, owners, valid, met);
}

/* select_sources' per-tensor tables (ss_build_tables) and cover map, read by ss_cover_of. */
typedef struct {
    const int64_t *routed, *axes, *owners, *valid, *dps;
    Py_ssize_t nreplicas;
    int64_t nslots;
    const po_map *covers;
} ss_tables;

/* The key t * nslots + slot of a fragment of tensor t with rank coordinates rank, or -1 when
 * its rank.dp is no complete replica's (a tensor not routed by a DP owner). */
static int64_t
ss_cover_key(const ss_tables *tb, int64_t t, const int64_t *rank)
{
    int64_t slot = (int64_t)tb->nreplicas;
    if (!tb->routed[t]) {
        Py_ssize_t lo = 0, hi = tb->nreplicas;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (tb->dps[mid] < rank[0]) lo = mid + 1;
            else hi = mid;
        }
        if (lo == tb->nreplicas || tb->dps[lo] != rank[0]) return -1;
        slot = (int64_t)lo;
    }
    return t * tb->nslots + slot;
}

/* The home slot of ss_cover_of's probe for that fragment (a prefetch hint; never read). */
static const void *
ss_cover_slot(const ss_tables *tb, int64_t t, const int64_t *rank)
{
    int64_t key = ss_cover_key(tb, t, rank);
    if (key < 0) return tb->covers->e;
    return &tb->covers->e[(size_t)po_hash((uint64_t)key) & tb->covers->mask];
}

/* The cover a fragment of tensor t with rank coordinates rank (dp, tp, pp, ep) is eligible
 * for: its slot (the DP owner's for a routed tensor, else its complete replica's, found by
 * rank.dp) must be valid, its owner coordinates the slot's owner and some target must need
 * the (tensor, slot) cover. The cover id, or -1 when the fragment is not eligible. */
static int64_t
ss_cover_of(const ss_tables *tb, int64_t t, const int64_t *rank)
{
    int64_t key = ss_cover_key(tb, t, rank);
    if (key < 0) return -1;
    if (!tb->valid[key]) return -1;
    for (int k = 0; k < 4; k++) {
        int64_t a = tb->axes[t * 4 + k];
        if (a >= 0 && rank[a] != tb->owners[key * 4 + k]) return -1;
    }
    const po_map *covers = tb->covers;
    size_t ci = (size_t)po_hash((uint64_t)key) & covers->mask;
    while (covers->e[ci].key != -1 && covers->e[ci].key != key) ci = (ci + 1) & covers->mask;
    return covers->e[ci].key == -1 ? -1 : covers->e[ci].id; /* -1: no target needs this cover */
}

/* What select_sources reads of fragment i, read beforehand in address order (ss_preread):
 * one cache line (written at random in list order: one miss a row, all of it asked for by the
 * prefetch a row ahead; its nbytes is kept after its coordinates, written in order). */
typedef struct {
    int64_t t;       /* kernel tensor index; -1: not a needed tensor */
    int64_t rank[4]; /* dp, tp, pp, ep */
    size_t coord;    /* its offsets then shape: 2 * ndim values at the pre-read coordinates, then
                      * its nbytes as po_nbytes gives it (when nbytes_ok) */
    PyObject *id;    /* strong; needed fragments only */
    int nbytes_ok;   /* 0: po_nbytes would fall back (a non-int) */
} ss_pre;
_Static_assert(sizeof(ss_pre) == 64, "an ss_pre fills one cache line");

/* Frees n rows pre of mr_alloc_lines' block. */
static void
ss_pre_free(ss_pre *pre, size_t n, void *block)
{
    if (pre != NULL)
        for (size_t i = 0; i < n; i++) Py_XDECREF(pre[i].id);
    PyMem_Free(block);
}

/* Reads, in the objects' address order, everything select_sources' loop reads of each of the
 * n fragments (exactly ftype, ranks exactly rtype): the tensor index, and for needed tensors
 * the rank coordinates, offsets and shape (po_push_coords into pc), nbytes and the id. The
 * tensor index of every tensor-id object met is left in *tmap_out (the caller frees its
 * arrays; the objects are borrowed from the fragments, which the caller holds).
 * Returns the rows (the caller frees them with ss_pre_free, *block_out their block), or NULL
 * with no exception set
 * when anything is unusual (another type, a failed read, a value the loop would not accept):
 * the loop then reads the objects itself, in order, exactly as without this. Nothing here
 * runs Python code: exact types, instance-dict reads, exact str dict keys. */
static ss_pre *
ss_preread(PyObject *fragments, int is_list, Py_ssize_t n, PyObject *ftype, PyObject *rtype, PyObject *const *names,
           PyObject *tensor_index, PyObject *const *tids, Py_ssize_t ntensors, const int64_t *tensor_ndim, po_buf *pc,
           po_tmap *tmap_out, void **block_out)
{
    size_t count = (size_t)n;
    mr_kv *order = mr_alloc_array(count ? count : 1, sizeof(mr_kv));
    void *block = NULL;
    ss_pre *pre = mr_alloc_lines(count ? count : 1, sizeof(ss_pre), 1, &block); /* zeroed */
    po_tmap tmap = {NULL, 0};
    PyObject *v[SS_ID + 1] = {NULL}, *rv[4] = {NULL}; /* fields from the state scans (new references) */
    /* the rank objects read and their coordinates (the fragments share a few ranks, visited
     * interleaved): rank_memo.h */
    rm_memo ranks = {NULL, 0, 0, 0};
    po_tuple_slot tuples[PO_TUPLE_MEMO]; /* the offset and shape tuples read */
    memset(tuples, 0, sizeof tuples);
    int ok = 0;
    if (order == NULL || pre == NULL) goto done;
    size_t tused = 0;
    {
        /* sized by the tensors (grown as distinct id objects come), not by the fragments: a
         * table twice the fragment count is probed at random and leaves the cache */
        size_t tcap = 64;
        while (tcap < (size_t)ntensors * 2 + 64 && tcap < count * 2 && tcap < ((size_t)1 << 24)) tcap *= 2;
        if (!po_tmap_init(&tmap, tcap)) goto done;
        /* seeded with tensor_index's own key objects (tids: ss_tensor_ids read them from its
         * entries, the keys not read): a fragment whose tensor-id object is one of them finds
         * its tensor by pointer, as the lookup would by identity (an exact str: its hash is its
         * value's) */
        for (Py_ssize_t tv = 0; tv < ntensors; tv++) {
            if (tids[tv] == NULL) continue;
            Py_ssize_t *slot = po_tmap_slot_grow(&tmap, &tused, tids[tv]);
            if (slot == NULL) goto done;
            *slot = SS_MET_SEEDED(tv);
        }
    }
    for (size_t i = 0; i < count; i++) {
        PyObject *item = is_list ? PyList_GetItem(fragments, (Py_ssize_t)i) : PyTuple_GetItem(fragments, (Py_ssize_t)i);
        if (item == NULL) goto done;
        order[i].key = (uint64_t)(uintptr_t)item;
        order[i].idx = i;
    }
    if (mr_radix_sort(order, count) < 0) goto done;
    for (size_t k = 0; k < count; k++) {
        for (int f = 0; f <= SS_ID; f++) Py_CLEAR(v[f]);
        if (k + 16 < count) __builtin_prefetch((const void *)(uintptr_t)order[k + 16].key); /* a hint only */
        if (k + 8 < count) {
            __builtin_prefetch(&pre[order[k + 8].idx], 1);
            /* hints only: the tensor-id and id objects of the fragment 8 ahead (asked for 16
             * ahead, so its field slots are at hand) and the map slot its tensor-id pointer
             * hashes to (pointers read from its C-owned slots, not the objects they point to) */
            PyObject *const *f = mr_pf_fields((PyObject *)(uintptr_t)order[k + 8].key);
            if (f != NULL) {
                int found = 0;
                PyObject *ahead = mr_pf_named(f, names[SS_TENSOR], &found);
                if (ahead != NULL) {
                    __builtin_prefetch(ahead);
                    __builtin_prefetch(&tmap.e[(size_t)po_hash((uint64_t)(uintptr_t)ahead) & tmap.mask]);
                }
                ahead = mr_pf_named(f, names[SS_ID], &found);
                if (ahead != NULL) __builtin_prefetch(ahead, 1);
            }
        }
        PyObject *item = (PyObject *)(uintptr_t)order[k].key; /* held by fragments (no Python code runs) */
        ss_pre *p = &pre[order[k].idx];
        if ((PyObject *)Py_TYPE(item) != ftype) goto done;
        {
            /* the fields from one scan of the state dict, as the attribute reads of an exact
             * ftype instance give them (or its C-owned layout's slots: layout.h mr_pf_scan);
             * a field not met is read as an attribute below */
            if (!mr_pf_scan(item, names, SS_ID + 1, v)) {
                /* a field not met is read as an attribute: only from a plain instance dict
                 * (plain_dict.h), else the generic path decides (see the rank's read below) */
                rm_may_run_code(&ranks); /* (its dict may be made here: an allocation) */
                if (pd_getattr_safe(item) <= 0) goto done;
                PyObject *state = PyObject_GenericGetDict(item, NULL);
                po_scan_state(state, names, SS_ID + 1, v);
                Py_XDECREF(state);
            }
        }
        PyObject *tid = po_take_field(item, &v[SS_TENSOR], names[SS_TENSOR]);
        if (tid == NULL) goto done;
        if (!PyUnicode_CheckExact(tid)) {
            Py_DECREF(tid);
            goto done;
        }
        Py_ssize_t t = -1;
        Py_ssize_t *known = (Py_ssize_t *)po_tmap_get(&tmap, tid); /* the map is this call's */
        if (known != NULL) {
            t = *known;
            if (t <= SS_MET_SEEDED(0)) *known = t = SS_MET_SEEDED(0) - t; /* tid: an exact str */
        }
        else {
            PyObject *index = PyDict_GetItemWithError(tensor_index, tid); /* exact str: no Python code */
            if (index == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(tid);
                    goto done;
                }
                t = -1; /* not a needed tensor */
            }
            else {
                if (!PyLong_Check(index)) {
                    Py_DECREF(tid);
                    goto done;
                }
                int overflow = 0;
                long long tv = PyLong_AsLongLongAndOverflow(index, &overflow);
                if ((tv == -1 && PyErr_Occurred()) || overflow != 0 || tv < 0 || tv >= (long long)ntensors) {
                    Py_DECREF(tid);
                    goto done;
                }
                t = (Py_ssize_t)tv;
            }
            Py_ssize_t *slot = po_tmap_slot_grow(&tmap, &tused, tid);
            if (slot == NULL) {
                Py_DECREF(tid);
                goto done;
            }
            *slot = t;
        }
        /* the tid object stays alive: the fragment holds it, and the map compares pointers
         * only while every fragment is alive (this call) */
        Py_DECREF(tid);
        p->t = (int64_t)t;
        if (t < 0) continue;
        PyObject *rank = po_take_field(item, &v[SS_RANK], names[SS_RANK]);
        if (rank == NULL) goto done;
        rm_slot *slot = rm_find(&ranks, rank);
        if (rm_fresh(&ranks, slot)) { /* read in this epoch (an exact rtype): the same values */
            Py_DECREF(rank);
            memcpy(p->rank, slot->v, 4 * sizeof(int64_t));
            goto have_rank;
        }
        int rc = (PyObject *)Py_TYPE(rank) == rtype;
        if (rc == 1 && slot == NULL) rm_may_run_code(&ranks); /* a first read may make its dict */
        if (rc == 1) {
            /* the rank's values from a plain instance dict only (plain_dict.h): a key that is
             * not an exact str would send the reads below to a generic getattr, which runs its
             * __eq__ (Python code) while the order holds borrowed fragments (of the caller's
             * list) and the pass reads them out of list order; else the generic path decides */
            PyObject *state = PyObject_GenericGetDict(rank, NULL);
            if (!po_scan_state(state, &names[SS_DP], 4, rv) && state != NULL) rc = 0; /* (one walk) */
            Py_XDECREF(state);
        }
        for (int a = 0; a < 4 && rc == 1; a++)
            rc = po_value_i64(po_take_field(rank, &rv[a], names[SS_DP + a]), &p->rank[a]);
        for (int a = 0; a < 4; a++) Py_CLEAR(rv[a]);
        if (rc != 1) {
            Py_DECREF(rank);
            goto done;
        }
        rm_store(&ranks, slot, rank, NULL, p->rank, 4);
        Py_DECREF(rank); /* (this fragment holds it) */
    have_rank:
        p->coord = pc->n;
        PyObject *offset = po_take_field(item, &v[SS_OFFSET], names[SS_OFFSET]);
        if (offset == NULL) goto done;
        rc = po_push_coords_memo(tuples, pc, offset, tensor_ndim[t]);
        Py_DECREF(offset);
        if (rc != 1) goto done;
        PyObject *shape = po_take_field(item, &v[SS_SHAPE], names[SS_SHAPE]);
        if (shape == NULL) goto done;
        rc = po_push_coords_memo(tuples, pc, shape, tensor_ndim[t]);
        Py_DECREF(shape);
        if (rc != 1) goto done;
        PyObject *value = po_take_field(item, &v[SS_NBYTES], names[SS_NBYTES]);
        if (value == NULL) goto done;
        int64_t nb = 0;
        rc = po_nbytes(value, &nb);
        Py_DECREF(value);
        if (rc < 0 || po_push(pc, nb) < 0) goto done;
        if (nb == 0) rm_may_run_code(&ranks); /* (an overflow error may have been made and cleared) */
        p->nbytes_ok = rc;
        p->id = po_take_field(item, &v[SS_ID], names[SS_ID]);
        if (p->id == NULL) goto done;
    }
    ok = 1;
done:
    rm_free(&ranks);
    po_tuple_memo_free(tuples);
    for (int f = 0; f <= SS_ID; f++) Py_XDECREF(v[f]);
    for (int a = 0; a < 4; a++) Py_XDECREF(rv[a]);
    if (PyErr_Occurred()) PyErr_Clear();
    PyMem_Free(order);
    if (!ok) {
        PyMem_Free(tmap.e);
        ss_pre_free(pre, count, block);
        return NULL;
    }
    *tmap_out = tmap;
    *block_out = block;
    return pre;
}

PyDoc_STRVAR(select_sources_doc,
"select_sources(fragments, tensor_index, tensor_ndim, kinds, dp_owners, slots, replica_dps,\n"
"               cover_keys)\n"
"--\n\n"
"Spec §11.1 step 4 for placement sources, and the packing of the chosen fragments, in one\n"
"pass. fragments: list or tuple of placement fragments; tensor_index: tensor id -> kernel\n"
"tensor index t in range(len(kinds)) (fragments of other tensors are not needed); per t:\n"
"tensor_ndim[t] (int64 bytes), kinds[t] (the owner kinds, a tuple of 'dp'/'tp'/'pp'/'ep'),\n"
"dp_owners[t] (the DP owner ((kind, value), ...) of a DP-owned tensor, else None); slots: the\n"
"R dicts tensor id -> chosen owner of the complete replicas whose DP ranks replica_dps (int64\n"
"bytes) lists increasing; cover_keys (int64 bytes): key t*(R+1)+slot of each cover id (slot R:\n"
"the DP owner's; else the index of the fragment's rank.dp in replica_dps). A fragment is\n"
"eligible when its owner equals its slot's. Per (cover, geometry in first-occurrence order)\n"
"the eligible fragment with the least (dp, pp, ep, tp, placement_fragment_id) is chosen (the\n"
"first on a tie). Returns (objects, tensor, offsets, shapes, nbytes, cover_start,\n"
"cover_members, ids): the chosen fragments by (cover, geometry), int64 bytes (nbytes as\n"
"uint64, 0 outside (0, 2**64)) and their placement_fragment_id values; None when a value does\n"
"not fit this path (non-int or out-of-int64 value, rank count mismatch, unusual owner or kind,\n"
"non-str id on a tie): the caller then selects exactly in Python.");

static PyObject *
po_select_sources(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *fragments, *tensor_index, *ndim_obj, *kinds_list, *owner_list, *slot_list, *dps_obj, *keys_obj;
    PyObject *ftype = Py_None, *rtype = Py_None;
    if (!PyArg_ParseTuple(args, "OO!OO!O!O!OO|OO:select_sources", &fragments, &PyDict_Type, &tensor_index, &ndim_obj,
                          &PyList_Type, &kinds_list, &PyList_Type, &owner_list, &PyList_Type, &slot_list, &dps_obj,
                          &keys_obj, &ftype, &rtype))
        return NULL;
    int is_list = PyList_Check(fragments);
    if (!is_list && !PyTuple_Check(fragments)) {
        PyErr_SetString(PyExc_TypeError, "select_sources: fragments must be a list or tuple");
        return NULL;
    }
    int want_pre = ftype != Py_None || rtype != Py_None;
    if (want_pre && (!PyType_Check(ftype) || !PyType_Check(rtype))) {
        PyErr_SetString(PyExc_TypeError, "select_sources: fragment_type and rank_type must be classes");
        return NULL;
    }
    ss_pre *pre = NULL;
    void *pre_block = NULL; /* pre's allocation (mr_alloc_lines) */
    po_tmap met = {NULL, 0}; /* the pre-read's tensor-id objects -> tensor index */
    po_buf pc = {0};
    Py_ssize_t npre = 0;
    PyObject *names[SS_N] = {NULL};
    PyObject *result = NULL;
    PyObject **tids = NULL;
    int64_t *tensor_ndim = NULL, *routed = NULL, *axes = NULL, *owners = NULL, *valid = NULL, *dps = NULL,
            *cover_keys = NULL;
    ss_row *rows = NULL;
    size_t nrows = 0;
    int rows_borrowed = 0; /* rows[].obj borrowed from fragments (the pre path) rather than held */
    po_buf coords = {0};
    size_t *pos_slots = NULL;
    int64_t *positions = NULL;
    po_map covers = {NULL, 0};
    po_map picks = {NULL, 0};
    size_t *pick_row = NULL;
    ss_pick *order = NULL;
    Py_ssize_t ntensors = 0, nreplicas = 0, ncovers = 0;
    int fallback = 0;

    static PyObject *cache[SS_N];
    if (po_names(cache, ss_names, SS_N, names) < 0) goto done;
    tensor_ndim = po_copy_i64(ndim_obj, -1, &ntensors, "tensor_ndim");
    if (tensor_ndim == NULL) goto done;
    dps = po_copy_i64(dps_obj, -1, &nreplicas, "replica_dps");
    if (dps == NULL) goto done;
    if (PyList_Size(kinds_list) != ntensors || PyList_Size(owner_list) != ntensors
        || PyList_Size(slot_list) != nreplicas) {
        PyErr_SetString(PyExc_ValueError, "select_sources: kinds, dp_owners or slots has the wrong length");
        goto done;
    }
    if (nreplicas > INT32_MAX || ntensors > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "select_sources: too many tensors or replicas");
        goto done;
    }
    int64_t nslots = (int64_t)nreplicas + 1, nkeys, nowners;
    if (mr_mul_i64((int64_t)ntensors, nslots, &nkeys) < 0 || mr_mul_i64(nkeys, 4, &nowners) < 0
        || nowners > PY_SSIZE_T_MAX / 8) {
        PyErr_SetString(PyExc_ValueError, "select_sources: too many tensors or replicas");
        goto done;
    }
    tids = PyMem_Calloc((size_t)ntensors + 1, sizeof(PyObject *));
    routed = mr_alloc_array((size_t)ntensors, sizeof(int64_t));
    axes = mr_alloc_array((size_t)ntensors * 4, sizeof(int64_t));
    owners = mr_alloc_array((size_t)nowners, sizeof(int64_t));
    valid = mr_alloc_array((size_t)nkeys, sizeof(int64_t));
    if (tids == NULL || routed == NULL || axes == NULL || owners == NULL || valid == NULL) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    cover_keys = po_copy_i64(keys_obj, -1, &ncovers, "cover_keys");
    if (cover_keys == NULL) goto done;
    for (Py_ssize_t t = 0; t < ntensors; t++) {
        if (tensor_ndim[t] < 0 || tensor_ndim[t] > 4096) {
            PyErr_SetString(PyExc_ValueError, "select_sources: tensor_ndim out of range");
            goto done;
        }
    }
    for (Py_ssize_t r = 1; r < nreplicas; r++) {
        if (dps[r - 1] >= dps[r]) {
            PyErr_SetString(PyExc_ValueError, "select_sources: replica_dps must increase");
            goto done;
        }
    }
    Py_ssize_t n = is_list ? PyList_Size(fragments) : PyTuple_Size(fragments);
    if (n < 0) goto done;
    {
        int rc = ss_tensor_ids(tensor_index, ntensors, tids);
        if (rc < 0) goto done;
        if (rc == 0) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    if (want_pre) {
        pre = ss_preread(fragments, is_list, n, ftype, rtype, names, tensor_index, tids, ntensors, tensor_ndim, &pc,
                         &met, &pre_block);
        if (pre != NULL) npre = n;
    }
    {
        int rc = ss_build_tables(ntensors, kinds_list, owner_list, slot_list, nreplicas, tids, routed,
                                 axes, owners, valid, pre != NULL ? &met : NULL);
        if (rc < 0) goto done;
        if (rc == 0) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    {
        size_t cap = ss_capacity((size_t)ncovers);
        covers.e = po_map_slots(cap);
        if (covers.e == NULL) goto done;
        covers.mask = cap - 1;
        int64_t count = 0;
        for (Py_ssize_t c = 0; c < ncovers; c++) {
            if (cover_keys[c] < 0 || cover_keys[c] >= nkeys) {
                PyErr_SetString(PyExc_ValueError, "select_sources: cover key out of range");
                goto done;
            }
            if (po_map_claim(&covers, cover_keys[c], &count) != (int64_t)c) {
                PyErr_SetString(PyExc_ValueError, "select_sources: duplicate cover key");
                goto done;
            }
        }
    }
    rows = mr_alloc_array((size_t)n, sizeof(ss_row));
    positions = mr_alloc_array((size_t)n, sizeof(int64_t));
    if (rows == NULL || positions == NULL) goto done;
    size_t pcap = ss_capacity((size_t)n);
    pos_slots = PyMem_Calloc(pcap, sizeof(size_t));
    picks.e = po_map_slots(pcap);
    pick_row = mr_alloc_array((size_t)n, sizeof(size_t));
    if (pos_slots == NULL || picks.e == NULL || pick_row == NULL) {
        if (pos_slots == NULL && !PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    picks.mask = pcap - 1;
    size_t pos_mask = pcap - 1;
    int64_t npositions = 0, npicks = 0;
    ss_tables tb = {routed, axes, owners, valid, dps, nreplicas, nslots, &covers};
    /* With the pre-read values nothing in the loop below runs Python code (no attribute read,
     * no comparison but of exact str), and an exact tuple never changes (the call holds it):
     * the rows then borrow their fragments from it instead of holding (touching) every
     * scattered object; the chosen ones are taken for the result below, still held by it. */
    rows_borrowed = pre != NULL && PyTuple_CheckExact(fragments);
    /* the rows' coordinates: with the pre-read, its buffer (complete and no longer pushed to:
     * not copied into a second one); otherwise the loop's own, read afresh as it grows */
    const po_buf *cv = pre != NULL ? &pc : &coords;
    size_t ahead_slot[16] = {0}; /* pre path: the position slot of fragment i, taken at i - 16 */
    /* pre path: the cover of fragment i, found at i - 4 (ahead_cover[i & 15] for i when
     * ahead_at[i & 15] == i + 1; else found at i) */
    int64_t ahead_cover[16];
    size_t ahead_at[16] = {0};
    /* ss_cover_of's tables (routed, axes, then valid and owners per slot, and the covers map;
     * nowners = ntensors * nslots * 4 was bounded above) */
    int tables_big = (size_t)ntensors * 5 * sizeof(int64_t) + (size_t)nowners * sizeof(int64_t)
                     + (size_t)nkeys * sizeof(int64_t) + (covers.mask + 1) * sizeof(po_slot) >= PO_TABLES_BIG;

    for (Py_ssize_t i = 0; i < n && !fallback; i++) {
        /* The sequence may change under hostile attribute hooks: re-read its size. */
        Py_ssize_t size = is_list ? PyList_Size(fragments) : PyTuple_Size(fragments);
        if (size < 0) goto done;
        if (i >= size) break;
        if (pre != NULL) {
            /* hints only (the loop's reads below decide): the position slot (taken 16 ahead)
             * and the row it held (8 ahead) of later fragments; the rows come in list order,
             * their slots and first rows are scattered */
            /* (the coordinates it hashes and its tensor's ndim, 24 ahead: the coordinates were
             * pushed in address order, the tensors come at random) */
            if (i + 24 < npre && pre[i + 24].t >= 0 && pre[i + 24].coord < pc.n) {
                __builtin_prefetch(&pc.v[pre[i + 24].coord]);
                if (pre[i + 24].t < ntensors) __builtin_prefetch(&tensor_ndim[pre[i + 24].t]);
            }
            if (i + 16 < npre && pre[i + 16].t >= 0 && pc.v != NULL) {
                const ss_pre *q = &pre[i + 16];
                size_t at = (size_t)ss_geometry_hash(q->t, &pc.v[q->coord], tensor_ndim[q->t]) & pos_mask;
                ahead_slot[(i + 16) & 15] = at;
                __builtin_prefetch(&pos_slots[at]);
            }
            if (i + 8 < npre && pre[i + 8].t >= 0) {
                size_t held = pos_slots[ahead_slot[(i + 8) & 15]];
                if (held != 0 && held <= nrows) {
                    __builtin_prefetch(&rows[held - 1]);
                    __builtin_prefetch(&positions[held - 1]);
                }
            }
            /* 4 ahead (the row and the tables asked for above are at hand): that fragment's
             * cover, kept for its turn, and for a geometry met before (its row held) the row's
             * coordinates, which ss_position compares, and the pick slot of (cover, position);
             * scattered, the misses the loop would otherwise wait for in turn */
            if (i + 4 < npre && pre[i + 4].t >= 0) {
                const ss_pre *q = &pre[i + 4];
                int64_t c4 = ss_cover_of(&tb, q->t, q->rank);
                ahead_cover[(i + 4) & 15] = c4;
                ahead_at[(i + 4) & 15] = (size_t)i + 5;
                size_t held = pos_slots[ahead_slot[(i + 4) & 15]];
                if (held != 0 && held <= nrows) {
                    const ss_row *other = &rows[held - 1];
                    if (other->coord < cv->n) __builtin_prefetch(&cv->v[other->coord]);
                    int64_t key;
                    if (c4 >= 0 && mr_mul_i64(c4, (int64_t)n, &key) == 0
                        && mr_add_i64(key, positions[held - 1], &key) == 0)
                        __builtin_prefetch(&picks.e[(size_t)po_hash((uint64_t)key) & picks.mask]);
                }
            }
            /* and ss_cover_of's tables of later fragments (indexed by tensor, which come in
             * id order, at random): the tensor's rows 16 ahead, its cover slot 8 ahead */
            if (tables_big && i + 16 < npre && pre[i + 16].t >= 0) {
                int64_t t16 = pre[i + 16].t;
                __builtin_prefetch(&routed[t16]);
                __builtin_prefetch(&axes[t16 * 4]);
                __builtin_prefetch(&valid[t16 * nslots]);
                __builtin_prefetch(&owners[t16 * nslots * 4]);
                __builtin_prefetch(&owners[t16 * nslots * 4 + nslots * 4 - 1]);
            }
            if (tables_big && i + 8 < npre && pre[i + 8].t >= 0)
                __builtin_prefetch(ss_cover_slot(&tb, pre[i + 8].t, pre[i + 8].rank));
        }
        PyObject *fragment = is_list ? PyList_GetItem(fragments, i) : PyTuple_GetItem(fragments, i);
        if (fragment == NULL) goto done;
        if (!rows_borrowed) Py_INCREF(fragment);
        PyObject *rank = NULL;
        int rc = -1;
        int64_t cover = -1;
        if (pre != NULL) { /* the same values, read beforehand; nothing below runs Python code */
            const ss_pre *p = &pre[i];
            if (p->t < 0) {
                rc = 1; /* not a needed tensor */
                goto row_done;
            }
            ss_row *row = &rows[nrows];
            row->t = p->t;
            memcpy(row->rank, p->rank, sizeof row->rank);
            row->coord = p->coord; /* its coordinates stay in the pre-read's buffer (cv) */
            cover = ahead_at[i & 15] == (size_t)i + 1 ? ahead_cover[i & 15] : ss_cover_of(&tb, p->t, row->rank);
            goto have_row;
        }
        PyObject *tensor_id = PyObject_GetAttr(fragment, names[SS_TENSOR]);
        if (tensor_id == NULL) goto row_done;
        if (!PyUnicode_CheckExact(tensor_id)) { /* its hash would run in the probe: fall back */
            Py_DECREF(tensor_id);
            rc = 0;
            goto row_done;
        }
        PyObject *index = PyDict_GetItemWithError(tensor_index, tensor_id); /* borrowed */
        Py_DECREF(tensor_id);
        if (index == NULL) {
            rc = PyErr_Occurred() ? -1 : 1; /* not a needed tensor */
            goto row_done;
        }
        rc = 0;
        if (!PyLong_Check(index)) goto row_done;
        int overflow = 0;
        long long tv = PyLong_AsLongLongAndOverflow(index, &overflow);
        if (tv == -1 && PyErr_Occurred()) {
            rc = -1;
            goto row_done;
        }
        if (overflow != 0 || tv < 0 || tv >= (long long)ntensors) goto row_done;
        Py_ssize_t t = (Py_ssize_t)tv;
        ss_row *row = &rows[nrows];
        row->t = (int64_t)t;
        rank = PyObject_GetAttr(fragment, names[SS_RANK]);
        if (rank == NULL) {
            rc = -1;
            goto row_done;
        }
        for (int a = 0; a < 4; a++) {
            rc = po_attr_i64(rank, names[SS_DP + a], &row->rank[a]);
            if (rc <= 0) goto row_done;
        }
        row->coord = coords.n;
        PyObject *offset = PyObject_GetAttr(fragment, names[SS_OFFSET]);
        if (offset == NULL) {
            rc = -1;
            goto row_done;
        }
        rc = po_push_coords(&coords, offset, tensor_ndim[t]);
        Py_DECREF(offset);
        if (rc <= 0) goto row_done;
        PyObject *shape = PyObject_GetAttr(fragment, names[SS_SHAPE]);
        if (shape == NULL) {
            rc = -1;
            goto row_done;
        }
        rc = po_push_coords(&coords, shape, tensor_ndim[t]);
        Py_DECREF(shape);
        if (rc <= 0) goto row_done;
        cover = ss_cover_of(&tb, (int64_t)t, row->rank);
    have_row:
        /* both paths: rows[nrows] filled (t, rank, coordinates), cover its eligible cover */
        row = &rows[nrows];
        t = (Py_ssize_t)row->t;
        row->at = (size_t)i;
        rc = 1;
        row->obj = fragment;
        if (!rows_borrowed) Py_INCREF(fragment);
        size_t r = nrows++;
        int64_t position = ss_position(pos_slots, pos_mask, rows, r, cv->v, tensor_ndim, positions,
                                       &npositions);
        if (cover < 0) goto row_done; /* not eligible (rc == 1) */
        {
            int64_t pick_key;
            if (mr_mul_i64(cover, (int64_t)n, &pick_key) < 0 || mr_add_i64(pick_key, position, &pick_key) < 0) {
                rc = 0;
                goto row_done;
            }
            int64_t before = npicks;
            int64_t id = po_map_claim(&picks, pick_key, &npicks);
            if (npicks != before) {
                pick_row[id] = r;
            } else {
                const ss_row *best = &rows[pick_row[id]];
                int cmp = ss_rank_cmp(row, best);
                if (cmp == 0) {
                    if (pre != NULL) /* the pre-read ids (both needed: strong references) */
                        cmp = ss_str_less(pre[row->at].id, pre[best->at].id);
                    else
                        cmp = ss_id_less(row->obj, best->obj, names[SS_ID]);
                    if (cmp < 0) {
                        rc = -1;
                        goto row_done;
                    }
                    if (cmp == 2) {
                        rc = 0;
                        goto row_done;
                    }
                    cmp = cmp ? -1 : 1;
                }
                if (cmp < 0) pick_row[id] = r;
            }
        }
    row_done:
        Py_XDECREF(rank);
        if (!rows_borrowed) Py_DECREF(fragment);
        if (rc < 0) goto done;
        if (rc == 0) fallback = 1;
    }
    if (fallback) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    order = mr_alloc_array(npicks ? (size_t)npicks : 1, sizeof(ss_pick));
    if (order == NULL) goto done;
    {
        /* (cover, position) order is the order of the pick keys cover * n + position (0 <=
         * position < n, keys >= 0 and distinct): one radix sort of the keys, no comparisons */
        mr_kv *keyed = mr_alloc_array(npicks ? (size_t)npicks : 1, sizeof(mr_kv));
        if (keyed == NULL) goto done;
        size_t m = 0;
        for (size_t i = 0; i <= picks.mask; i++) {
            if (picks.e[i].key == -1) continue;
            keyed[m].key = (uint64_t)picks.e[i].key;
            keyed[m].idx = (size_t)picks.e[i].id;
            m++;
        }
        if (mr_radix_sort(keyed, m) < 0) {
            PyMem_Free(keyed);
            PyErr_NoMemory();
            goto done;
        }
        for (size_t j = 0; j < m; j++) {
            ss_pick *p = &order[j];
            p->cover = (int64_t)keyed[j].key / (int64_t)n;
            p->position = (int64_t)keyed[j].key % (int64_t)n;
            p->row = pick_row[keyed[j].idx];
        }
        PyMem_Free(keyed);
    }
    {
        po_buf tensor = {0}, offs = {0}, shps = {0}, nbytes = {0}, starts = {0}, members = {0};
        PyObject *objects = PyList_New((Py_ssize_t)npicks);
        PyObject *ids = PyList_New((Py_ssize_t)npicks);
        int ok = objects != NULL && ids != NULL;
        PyObject *lists[2] = {objects, ids};
        po_lists_untrack(lists, 2); /* the generic path's attribute reads below may run Python code */
        /* the buffers sized to what the loop below pushes at most: one tensor, member and
         * nbytes value per pick, ncovers + 1 starts, at most npicks * (largest ndim)
         * coordinates of each kind (tensor_ndim checked in [0, 4096] above) */
        int64_t maxnd = 0, ncoords = 0;
        for (Py_ssize_t t = 0; t < ntensors; t++)
            if (tensor_ndim[t] > maxnd) maxnd = tensor_ndim[t];
        if (ok && npicks >= 0 && ncovers >= 0) {
            ok = po_reserve(&tensor, (size_t)npicks) == 0 && po_reserve(&members, (size_t)npicks) == 0 &&
                 po_reserve(&nbytes, (size_t)npicks) == 0 && po_reserve(&starts, (size_t)ncovers + 1) == 0;
            /* (a product past int64 cannot happen with these bounds: then no reservation, the
             * pushes grow the buffers as before) */
            if (ok && mr_mul_i64(npicks, maxnd, &ncoords) == 0)
                ok = po_reserve(&offs, (size_t)ncoords) == 0 && po_reserve(&shps, (size_t)ncoords) == 0;
        }
        int64_t c = 0;
        for (int64_t j = 0; ok && j < npicks; j++) {
            /* hints only: the picks come in (cover, position) order, their rows, pre-read
             * records and objects are scattered: each is prefetched a step after its parent */
            if (j + 24 < npicks) __builtin_prefetch(&rows[order[j + 24].row]);
            if (pre != NULL && j + 16 < npicks) {
                size_t at = rows[order[j + 16].row].at;
                if (at < (size_t)npre) __builtin_prefetch(&pre[at]);
            }
            if (j + 8 < npicks) {
                const ss_row *next = &rows[order[j + 8].row];
                __builtin_prefetch(next->obj, 1);
                if (cv->v != NULL) __builtin_prefetch(&cv->v[next->coord]);
                if (pre != NULL && next->at < (size_t)npre) __builtin_prefetch(pre[next->at].id, 1);
            }
            const ss_row *row = &rows[order[j].row];
            while (ok && c <= order[j].cover) {
                ok = po_push(&starts, j) == 0;
                c++;
            }
            if (!ok) break;
            int64_t nd = tensor_ndim[row->t];
            ok = po_push(&tensor, row->t) == 0 && po_push(&members, j) == 0;
            for (int64_t k = 0; ok && k < nd; k++) ok = po_push(&offs, cv->v[row->coord + (size_t)k]) == 0;
            for (int64_t k = 0; ok && k < nd; k++)
                ok = po_push(&shps, cv->v[row->coord + (size_t)(nd + k)]) == 0;
            if (!ok) break;
            int64_t nb = 0;
            int rc;
            if (pre != NULL && row->at < (size_t)npre) {
                nb = cv->v[row->coord + (size_t)(2 * nd)]; /* after its coordinates (ss_pre) */
                rc = pre[row->at].nbytes_ok;
            }
            else {
                PyObject *value = PyObject_GetAttr(row->obj, names[SS_NBYTES]);
                if (value == NULL) {
                    ok = 0;
                    break;
                }
                rc = po_nbytes(value, &nb);
                Py_DECREF(value);
            }
            if (rc <= 0) {
                if (rc == 0) fallback = 1;
                ok = 0;
                break;
            }
            ok = po_push(&nbytes, nb) == 0;
            if (!ok) break;
            PyObject *id = pre != NULL && row->at < (size_t)npre ? Py_NewRef(pre[row->at].id)
                                                                 : PyObject_GetAttr(row->obj, names[SS_ID]);
            if (id == NULL) {
                ok = 0;
                break;
            }
            PyList_SetItem(ids, (Py_ssize_t)j, id); /* steals id; index in range */
            Py_INCREF(row->obj);
            PyList_SetItem(objects, (Py_ssize_t)j, row->obj);
        }
        while (ok && c <= (int64_t)ncovers) {
            ok = po_push(&starts, npicks) == 0;
            c++;
        }
        if (ok) {
            po_lists_track(lists, 2); /* filled */
            PyObject *parts[6] = {po_buf_take(&tensor), po_buf_take(&offs), po_buf_take(&shps),
                                  po_buf_take(&nbytes), po_buf_take(&starts), po_buf_take(&members)};
            if (parts[0] != NULL && parts[1] != NULL && parts[2] != NULL && parts[3] != NULL && parts[4] != NULL
                && parts[5] != NULL)
                result = PyTuple_Pack(8, objects, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], ids);
            for (int k = 0; k < 6; k++) Py_XDECREF(parts[k]);
        } else if (fallback && !PyErr_Occurred()) {
            result = Py_None;
            Py_INCREF(result);
        }
        Py_XDECREF(objects);
        Py_XDECREF(ids);
        po_buf_free(&tensor);
        po_buf_free(&offs);
        po_buf_free(&shps);
        po_buf_free(&nbytes);
        po_buf_free(&starts);
        po_buf_free(&members);
    }
done:
    ss_pre_free(pre, (size_t)npre, pre_block);
    PyMem_Free(met.e);
    po_buf_free(&pc);
    for (int k = 0; k < SS_N; k++) Py_XDECREF(names[k]);
    if (tids != NULL) {
        for (Py_ssize_t t = 0; t < ntensors; t++) Py_XDECREF(tids[t]);
    }
    PyMem_Free(tids);
    if (rows != NULL && !rows_borrowed) {
        for (size_t r = 0; r < nrows; r++) Py_DECREF(rows[r].obj);
    }
    PyMem_Free(rows);
    PyMem_Free(positions);
    PyMem_Free(pos_slots);
    po_buf_free(&coords);
    PyMem_Free(covers.e);
    PyMem_Free(picks.e);
    PyMem_Free(pick_row);
    PyMem_Free(order);
    PyMem_Free(tensor_ndim);
    PyMem_Free(routed);
    PyMem_Free(axes);
    PyMem_Free(owners);
    PyMem_Free(valid);
    PyMem_Free(dps);
    PyMem_Free(cover_keys);
    return result;
}

/* ---- project_executors: executor projections of one side (spec §11.1 step 7) ------------- */

enum { PE_PARTICIPANT, PE_FRAGMENTS, PE_FRAGMENT_ID, PE_RANK, PE_PLACEMENT_ID, PE_FRAGMENT_IDS, PE_DP, PE_PP,
       PE_EP, PE_TP, PE_N };
static const char *const pe_names[PE_N] = {"participant_id", "fragments", "placement_fragment_id", "rank",
                                           "placement_id", "placement_fragment_ids", "dp", "pp", "ep", "tp"};

/* One part's (rank key, executor) pair, Py_None when the part is not projected, NULL on error. */

/* ---- order of exact-str ids from their heads ---------------------------------------------- */

enum { PO_NOT_STR, PO_STR, PO_HEAD };

/* The first 16 UTF-8 bytes of an id, big-endian, zero padded (kind PO_HEAD); PO_STR for an
 * exact str that cannot be encoded (a lone surrogate), PO_NOT_STR for anything else. */
typedef struct {
    uint64_t w[2];
    int kind;
} po_head;

/* *h for id: read by the address-order passes where they visit the fragment (its id object was
 * allocated beside it, usually), so that the order checks do not visit the scattered id
 * objects again in list order. Runs no Python code. */
static void
po_str_head(PyObject *id, po_head *h)
{
    h->kind = PO_NOT_STR;
    if (!PyUnicode_CheckExact(id)) return;
    h->kind = PO_STR;
    Py_ssize_t len = 0;
    const char *s = PyUnicode_AsUTF8AndSize(id, &len);
    if (s == NULL) { /* not encodable: compared as str objects */
        PyErr_Clear();
        return;
    }
    for (int w = 0; w < 2; w++) {
        uint64_t x = 0;
        for (Py_ssize_t k = 8 * w; k < 8 * w + 8; k++) x = (x << 8) | (k < len ? (unsigned char)s[k] : 0u);
        h->w[w] = x;
    }
    h->kind = PO_HEAD;
}

/* Whether the exact-str ids (the list ids, or the array arr when not NULL; ids[i]'s head at
 * base + i * stride) are in
 * non-decreasing order: 1, 0, -1 when some head is PO_NOT_STR, -2 with an exception. Two heads
 * that differ order their ids as PyUnicode_Compare does (UTF-8 byte order is code point order;
 * a zero pad differs only from a byte past the shorter id's end, which then sorts first), so
 * the str objects are compared only when a head is missing or two heads are equal. */
static int
po_heads_order(const char *base, size_t stride, PyObject *ids, Py_ssize_t n, PyObject *const *arr)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (((const po_head *)(const void *)(base + (size_t)i * stride))->kind == PO_NOT_STR) return -1;
    for (Py_ssize_t i = 1; i < n; i++) {
        const po_head *a = (const po_head *)(const void *)(base + (size_t)(i - 1) * stride);
        const po_head *b = (const po_head *)(const void *)(base + (size_t)i * stride);
        if (a->kind == PO_HEAD && b->kind == PO_HEAD && (a->w[0] != b->w[0] || a->w[1] != b->w[1])) {
            if (a->w[0] > b->w[0] || (a->w[0] == b->w[0] && a->w[1] > b->w[1])) return 0;
            continue;
        }
        PyObject *x = arr != NULL ? arr[i - 1] : PyList_GetItem(ids, i - 1);
        PyObject *y = arr != NULL ? arr[i] : PyList_GetItem(ids, i);
        if (x == NULL || y == NULL) return -2;
        int cmp = PyUnicode_Compare(x, y);
        if (cmp == -1 && PyErr_Occurred()) return -2;
        if (cmp > 0) return 0;
    }
    return 1;
}

/* The ids of the fragments in the private list items (n of them), read in address order when
 * every fragment is exactly ftype and every id an exact str: then items[i] is replaced by the
 * id of fragment i and 1 is returned. 0 (items untouched, no exception set) otherwise. */
static int
pe_ids_address_order(PyObject *items, Py_ssize_t n, PyObject *ftype, PyObject *name)
{
    size_t count = (size_t)n;
    mr_kv *order = mr_alloc_array(count ? count : 1, sizeof(mr_kv));
    PyObject **ids = PyMem_Calloc(count ? count : 1, sizeof(PyObject *));
    int ok = 0;
    if (order == NULL || ids == NULL) goto done;
    for (size_t i = 0; i < count; i++) {
        PyObject *item = PyList_GetItem(items, (Py_ssize_t)i);
        if (item == NULL) goto done;
        order[i].key = (uint64_t)(uintptr_t)item;
        order[i].idx = i;
    }
    if (mr_radix_sort(order, count) < 0) goto done;
    for (size_t k = 0; k < count; k++) {
        PyObject *item = (PyObject *)(uintptr_t)order[k].key; /* held by items (no Python code runs) */
        if ((PyObject *)Py_TYPE(item) != ftype) goto done;
        /* read only from a plain instance dict, or none (plain_dict.h; PlacementFragment has
         * none): a str-subclass key's __eq__ would run out of list order while the order holds
         * the fragments borrowed; else the in-order loop reads them */
        if (pd_getattr_safe(item) <= 0) goto done;
        PyObject *id = PyObject_GetAttr(item, name);
        if (id == NULL) goto done;
        ids[order[k].idx] = id;
        if (!PyUnicode_CheckExact(id)) goto done;
    }
    for (size_t i = 0; i < count; i++) {
        PyList_SetItem(items, (Py_ssize_t)i, ids[i]); /* steals the id, releases the fragment */
        ids[i] = NULL;
    }
    ok = 1;
done:
    if (PyErr_Occurred()) PyErr_Clear();
    if (ids != NULL)
        for (size_t i = 0; i < count; i++) Py_XDECREF(ids[i]);
    PyMem_Free(ids);
    PyMem_Free(order);
    return ok;
}

/* The ids of a part's fragments, an exact tuple of n > 0 (which cannot change; the caller
 * holds it), read in address order when every fragment is exactly ftype and every id an exact
 * str: then *ids_out holds the n ids (new references, the caller's), *heads_out their heads and
 * *order_out the address order (arrays the caller frees), and 1 is returned. 0 (nothing kept,
 * no exception set) otherwise. Unlike pe_ids_address_order no private list is made: the
 * fragments are not held again (a touch of every scattered object in id order), and the ids
 * can go straight into the executor's tuple. */
#define PE_SLOTS_MIN 512 /* fragments of a part from which pe_tuple_ids reads ids from the slots */
#define PE_IDS_AHEAD_MIN 4096 /* ... and asks for the id objects ahead (smaller parts stay cached) */

static int
pe_tuple_ids(PyObject *fragments, Py_ssize_t n, PyObject *ftype, PyObject *name, PyObject ***ids_out,
             po_head **heads_out, mr_kv **order_out)
{
    size_t count = (size_t)n;
    mr_kv *order = mr_alloc_array(count, sizeof(mr_kv));
    PyObject **ids = PyMem_Calloc(count, sizeof(PyObject *));
    po_head *heads = mr_alloc_array(count, sizeof(po_head));
    int ok = 0, sorted = 0;
    if (order == NULL || ids == NULL || heads == NULL) goto done;
    for (size_t i = 0; i < count; i++) {
        PyObject *item = PyTuple_GetItem(fragments, (Py_ssize_t)i);
        if (item == NULL) goto done;
        order[i].key = (uint64_t)(uintptr_t)item;
        order[i].idx = i;
    }
    if (mr_radix_sort(order, count) < 0) goto done;
    sorted = 1; /* from here order[] is a permutation of 0..n-1 */
    /* ftype a C-owned PlacementFragment layout that getattr reads from (checked now, in full:
     * no class attribute shadows a field, generic getattr): the id is the slot's value, loaded
     * directly; an empty slot takes getattr (which raises, and the call declines). Only for
     * parts of PE_SLOTS_MIN fragments on: the check walks the class's MRO (microseconds, as
     * much as a small plan's whole projection) */
    mr_layout_class lc;
    PyObject *field = mr_pf_name_ptrs[MR_PF_PLACEMENT_FRAGMENT_ID];
    int slots = count >= PE_SLOTS_MIN && field != NULL && PyUnicode_CheckExact(name)
                && (name == field || PyUnicode_Compare(name, field) == 0) /* exact str: no code runs */
                && mr_layout_check_fields(&lc, ftype, MR_PF_N, mr_pf_names());
    if (PyErr_Occurred()) goto done;
    for (size_t k = 0; k < count; k++) {
        /* hints only: the fragment 16 ahead, then (its slots at hand) the id object of the one
         * 8 ahead, whose pointer is read from its slot (an exact ftype: the slots' layout) */
        size_t far = slots && count >= PE_IDS_AHEAD_MIN ? 16 : 8; /* (8: as before, without the ids) */
        if (k + far < count) __builtin_prefetch((const void *)(uintptr_t)order[k + far].key);
        if (far == 16 && k + 8 < count) {
            PyObject *ahead = (PyObject *)(uintptr_t)order[k + 8].key;
            PyObject *const *f = (PyObject *)Py_TYPE(ahead) == ftype ? mr_layout_fields(ahead, &lc) : NULL;
            if (f != NULL && f[MR_PF_PLACEMENT_FRAGMENT_ID] != NULL) mr_prefetch_head(f[MR_PF_PLACEMENT_FRAGMENT_ID], 1);
        }
        PyObject *item = (PyObject *)(uintptr_t)order[k].key; /* held by the tuple (no Python code runs) */
        if ((PyObject *)Py_TYPE(item) != ftype) goto done;
        PyObject *id = slots ? mr_layout_fields(item, &lc)[MR_PF_PLACEMENT_FRAGMENT_ID] : NULL;
        /* a getattr only of a plain instance dict, or none (plain_dict.h; as pe_ids_address_order) */
        if (id == NULL && pd_getattr_safe(item) <= 0) goto done;
        id = id != NULL ? Py_NewRef(id) : PyObject_GetAttr(item, name);
        if (id == NULL) goto done;
        ids[order[k].idx] = id;
        if (!PyUnicode_CheckExact(id)) goto done;
        po_str_head(id, &heads[order[k].idx]);
    }
    ok = 1;
done:
    if (PyErr_Occurred()) PyErr_Clear();
    if (!ok) {
        if (sorted) /* released in address order, as they were read (none before the sort) */
            for (size_t k = 0; k < count; k++) Py_XDECREF(ids[order[k].idx]);
        PyMem_Free(ids);
        PyMem_Free(heads);
        PyMem_Free(order);
        return 0;
    }
    *ids_out = ids;
    *heads_out = heads;
    *order_out = order;
    return 1;
}

/* 1 when every item of the list is an exact str and they do not decrease (then sorting is the
 * identity), 0 when not or unknown; -1 with an exception. */
static int
pe_sorted_strs(PyObject *items, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyList_GetItem(items, i);
        if (id == NULL) return -1;
        if (!PyUnicode_CheckExact(id)) return 0;
        if (i + 8 < n) { /* scattered in memory: ask for the header and text ahead */
            const char *ahead = (const char *)PyList_GetItem(items, i + 8);
            if (ahead != NULL) {
                __builtin_prefetch(ahead);
                __builtin_prefetch(ahead + 64);
            }
        }
        if (i > 0) {
            int cmp = PyUnicode_Compare(PyList_GetItem(items, i - 1), id);
            if (cmp == -1 && PyErr_Occurred()) return -1;
            if (cmp > 0) return 0;
        }
    }
    return 1;
}

/* The used ids of project_executors: a set (value membership, as given), or a list of ids
 * whose item pointers (recorded with their positions when the pass starts) are looked up first
 * (no id object is read, where building a set reads every scattered str for its hash). The
 * first lookups scan the recorded pointers (a part's first id is usually used: a handful of
 * lookups, each one sequential read, where sorting them for a binary search read and moved them
 * a dozen times); past a budget of PE_SCAN_BUDGET reads per item they are sorted once and
 * searched. Both find the same recorded positions. A pointer hit counts only while the list
 * still holds that very object at a recorded position (so it is alive and equal to itself);
 * anything else takes the set of the list's values, built once on demand and used for every
 * lookup after it (a part without used ids would otherwise pay a search per id): membership
 * is always that of set(list). */
#define PE_SCAN_BUDGET 4
typedef struct {
    PyObject *given; /* borrowed: the argument (a set or a list) */
    PyObject *set;   /* strong: the set of a list's values once built; NULL before */
    PyObject **items; /* list: its item pointers when the pass started (compared, never read) */
    mr_kv *ptrs;      /* list: items' pointers (key) and positions (idx), by pointer, once sorted */
    size_t n;
    int is_list;
    size_t scanned; /* list items read by the scans so far */
} pe_used;

/* 1 when every item of the exact set, frozenset or list c is an exact str (their hashes and
 * compares in a set run no Python code), else 0; -1 with an exception. Iterating an exact set
 * runs no Python code. */
static int
pe_exact_strs(PyObject *c)
{
    if (PyList_CheckExact(c)) {
        for (Py_ssize_t i = 0; i < PyList_Size(c); i++)
            if (!PyUnicode_CheckExact(PyList_GetItem(c, i))) return 0; /* (in range) */
        return 1;
    }
    if (!PySet_CheckExact(c) && !PyFrozenSet_CheckExact(c)) return 0;
    PyObject *it = PyObject_GetIter(c), *item;
    if (it == NULL) return -1;
    int ok = 1;
    while (ok && (item = PyIter_Next(it)) != NULL) {
        ok = PyUnicode_CheckExact(item);
        Py_DECREF(item);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : ok;
}

static int
pe_used_init(pe_used *u, PyObject *used)
{
    u->given = used;
    u->set = NULL;
    u->ptrs = NULL;
    u->n = 0;
    u->items = NULL;
    u->is_list = 0;
    u->scanned = 0;
    if (PyAnySet_Check(used)) return 0;
    if (!PyList_CheckExact(used)) {
        PyErr_SetString(PyExc_TypeError, "project_executors: used must be a set or a list");
        return -1;
    }
    Py_ssize_t n = PyList_Size(used);
    if (n < 0) return -1;
    u->items = mr_alloc_array(n ? (size_t)n : 1, sizeof(PyObject *));
    if (u->items == NULL) return -1;
    for (Py_ssize_t i = 0; i < n; i++) u->items[i] = PyList_GetItem(used, i); /* in range: no failure */
    u->n = (size_t)n;
    u->is_list = 1;
    return 0;
}

/* u's sorted pointer table, made from the recorded items. 0, or -1 with an exception. */
static int
pe_used_sort(pe_used *u)
{
    u->ptrs = mr_alloc_array(u->n ? u->n : 1, sizeof(mr_kv));
    if (u->ptrs == NULL) return -1;
    for (size_t i = 0; i < u->n; i++) {
        u->ptrs[i].key = (uint64_t)(uintptr_t)u->items[i];
        u->ptrs[i].idx = i;
    }
    if (mr_radix_sort(u->ptrs, u->n) < 0) {
        PyMem_Free(u->ptrs);
        u->ptrs = NULL;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
pe_used_free(pe_used *u)
{
    Py_CLEAR(u->set);
    PyMem_Free(u->ptrs);
    u->ptrs = NULL;
    PyMem_Free(u->items);
    u->items = NULL;
}

/* set(used) for the list used: PySet_New's adds (each item in list order, the list's size read
 * afresh after each), with the item a few further on asked for ahead (a hint: the list's strs
 * are scattered and each add reads its hash). Only exact strs are added (their hash and equality
 * run no Python code): at the first other item, NULL with *declined set and no exception (AUDIT5
 * F4: the caller's Python form decides). NULL with an exception on error. */
#define PE_SET_AHEAD 8
static PyObject *
pe_used_set(PyObject *used, int *declined)
{
    PyObject *set = PySet_New(NULL);
    if (set == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_Size(used); i++) {
        if (i + PE_SET_AHEAD < PyList_Size(used)) __builtin_prefetch(PyList_GetItem(used, i + PE_SET_AHEAD));
        PyObject *item = PyList_GetItem(used, i);
        if (item == NULL) break; /* (cannot happen: i < its size) */
        if (!PyUnicode_CheckExact(item)) {
            *declined = 1;
            Py_DECREF(set);
            return NULL;
        }
        Py_INCREF(item);
        int rc = PySet_Add(set, item);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(set);
            return NULL;
        }
    }
    if (PyErr_Occurred()) Py_CLEAR(set);
    return set;
}

/* 1 when id (an exact str) is in the used ids, 0 when not, -1 with an exception, -2 when a used
 * id is not an exact str (not decided here: its __eq__ would run in the set). */
static int
pe_used_contains(pe_used *u, PyObject *id)
{
    if (u->set != NULL) return PySet_Contains(u->set, id); /* a miss built it: values from then on */
    if (!u->is_list) return PySet_Contains(u->given, id);
    if (u->ptrs == NULL) {
        /* (the budget counts the items read: size_t arithmetic on a list's size, far from
         * wrapping; a scan stops at its hit, which for a part's first id is usually early) */
        if (u->scanned + u->n <= (size_t)PE_SCAN_BUDGET * (u->n + 16)) {
            for (size_t i = 0; i < u->n; i++) { /* no Python code runs in this loop */
                if (u->items[i] != id) continue;
                /* the list may have changed since (it is the caller's): as below */
                if ((size_t)PyList_Size(u->given) > i && PyList_GetItem(u->given, (Py_ssize_t)i) == id) {
                    u->scanned += i + 1;
                    return 1;
                }
            }
            u->scanned += u->n;
            goto miss;
        }
        if (pe_used_sort(u) < 0) return -1;
    }
    uint64_t key = (uint64_t)(uintptr_t)id;
    size_t lo = 0, hi = u->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->ptrs[mid].key < key) lo = mid + 1;
        else hi = mid;
    }
    /* the list may have changed since (it is the caller's): trust a pointer only where the list
     * still holds it */
    for (; lo < u->n && u->ptrs[lo].key == key; lo++) {
        if ((size_t)PyList_Size(u->given) > u->ptrs[lo].idx &&
            PyList_GetItem(u->given, (Py_ssize_t)u->ptrs[lo].idx) == id)
            return 1;
    }
miss:
    if (u->set == NULL) {
        int declined = 0;
        u->set = pe_used_set(u->given, &declined);
        if (u->set == NULL) return declined ? -2 : -1;
    }
    return PySet_Contains(u->set, id);
}

static PyObject *pe_executor(PyObject *cls, PyObject *const *names, PyObject *placement_id, PyObject *participant,
                             PyObject *rank, PyObject *key, PyObject *sorted_ids);

/* part.rank into *rank and its key (rank.dp, rank.pp, rank.ep, rank.tp) into *key (new
 * references, each left NULL when not made): the reads both pe_part paths make, in that order.
 * 0, or -1 with an exception (the caller releases what was made). */
static int
pe_rank_key(PyObject *const *names, PyObject *part, PyObject **rank, PyObject **key)
{
    *rank = PyObject_GetAttr(part, names[PE_RANK]);
    if (*rank == NULL) return -1;
    *key = PyTuple_New(4);
    if (*key == NULL) return -1;
    /* out of the collector until full: the reads may run Python code, which must not find a
     * tuple with empty slots (gc.get_objects()) */
    PyObject_GC_UnTrack(*key);
    for (int a = 0; a < 4; a++) {
        PyObject *value = PyObject_GetAttr(*rank, names[PE_DP + a]);
        if (value == NULL || PyTuple_SetItem(*key, a, value) < 0) return -1;
    }
    PyObject_GC_Track(*key);
    return 0;
}

/* The two pe_part paths' step after the ids are read: none of them used (any 0): *none set to
 * a new reference to None (the part has no executor); else the part's rank and key read
 * (pe_rank_key). 0, or -1 with an exception set. */
static int
pe_rank_key_if_used(PyObject *const *names, PyObject *part, int any, PyObject **none, PyObject **rank, PyObject **key)
{
    if (!any) {
        *none = Py_NewRef(Py_None);
        return 0;
    }
    return pe_rank_key(names, part, rank, key);
}

/* pe_part on the ids pe_tuple_ids read (arr: n new references, all moved into the executor's
 * tuple or released here; heads and order as it made them): the same reads of the part and
 * its rank in the same order, the same result. The ids are exact str, so the membership tests
 * and the order check run no Python code; ids already in order (a placement part's are) become
 * the tuple without touching any of them again. */
static PyObject *
pe_part_tuple(PyObject *cls, PyObject *const *names, PyObject *placement_id, PyObject *part, PyObject *participant,
              pe_used *used, PyObject **arr, const po_head *heads, const mr_kv *order, Py_ssize_t n, int *declined)
{
    PyObject *result = NULL, *rank = NULL, *key = NULL, *sorted_ids = NULL, *list = NULL;
    int any = 0;
    for (Py_ssize_t i = 0; i < n && !any; i++) {
        /* a hint only: the id a few further on (scattered; a value lookup reads its hash) */
        if (i + PE_SET_AHEAD < n) __builtin_prefetch(arr[i + PE_SET_AHEAD]);
        int rc = pe_used_contains(used, arr[i]);
        if (rc == -2) *declined = 1;
        if (rc < 0) goto done;
        any = rc;
    }
    if (pe_rank_key_if_used(names, part, any, &result, &rank, &key) < 0 || result != NULL) goto done;
    {
        int in_order = po_heads_order((const char *)heads, sizeof(po_head), NULL, n, arr);
        if (in_order == -2) goto done;
        if (in_order == 1) { /* the ids' references move into the tuple */
            sorted_ids = PyTuple_New(n);
            if (sorted_ids == NULL) goto done;
            for (Py_ssize_t i = 0; i < n; i++) {
                PyTuple_SetItem(sorted_ids, i, arr[i]); /* steals; index in range */
                arr[i] = NULL;
            }
            /* exact strs only (pe_tuple_ids): inert, so out of the collector now, and the
             * executor's inert check (mr_untrack_inert) stops at the tuple instead of reading
             * every id's type again, a miss each for a large part */
            PyObject_GC_UnTrack(sorted_ids);
        } else {
            list = PyList_New(n);
            if (list == NULL) goto done;
            for (Py_ssize_t i = 0; i < n; i++) {
                PyList_SetItem(list, i, arr[i]); /* steals; index in range */
                arr[i] = NULL;
            }
            if (PyList_Sort(list) < 0) goto done;
            sorted_ids = PyList_AsTuple(list);
            if (sorted_ids == NULL) goto done;
            PyObject_GC_UnTrack(sorted_ids); /* (exact strs only, as above) */
        }
    }
    result = pe_executor(cls, names, placement_id, participant, rank, key, sorted_ids);
done:
    for (Py_ssize_t k = 0; k < n; k++) Py_XDECREF(arr[order[k].idx]); /* those not moved, in address order */
    Py_XDECREF(list);
    Py_XDECREF(sorted_ids);
    Py_XDECREF(rank);
    Py_XDECREF(key);
    return result;
}

/* One part's pair. NULL with *declined set (no exception): a value this pass does not decide
 * without running Python code (AUDIT5 F4: a participant or fragment id that is not an exact str,
 * fragments not an exact tuple or list); the caller's Python form decides then. */
static PyObject *
pe_part(PyObject *cls, PyObject *const *names, PyObject *placement_id, PyObject *part,
        pe_used *used, PyObject *participants, PyObject *ftype, int *declined)
{
    PyObject *participant = PyObject_GetAttr(part, names[PE_PARTICIPANT]);
    if (participant == NULL) return NULL;
    PyObject *result = NULL, *fragments = NULL, *ids = NULL, *rank = NULL, *key = NULL;
    if (!PyUnicode_CheckExact(participant)) { /* hashed in participants, stored in the executor */
        *declined = 1;
        goto done;
    }
    if (participants != Py_None) {
        int rc = PySequence_Contains(participants, participant);
        if (rc < 0) goto done;
        if (rc == 0) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    fragments = PyObject_GetAttr(part, names[PE_FRAGMENTS]);
    if (fragments == NULL) goto done;
    if (!PyTuple_CheckExact(fragments) && !PyList_CheckExact(fragments)) { /* (its __iter__, __len__) */
        *declined = 1;
        goto done;
    }
    if (ftype != Py_None && PyTuple_CheckExact(fragments) && PyTuple_Size(fragments) > 0) {
        PyObject **arr = NULL;
        po_head *heads = NULL;
        mr_kv *order = NULL;
        Py_ssize_t n = PyTuple_Size(fragments);
        if (pe_tuple_ids(fragments, n, ftype, names[PE_FRAGMENT_ID], &arr, &heads, &order)) {
            result = pe_part_tuple(cls, names, placement_id, part, participant, used, arr, heads, order, n, declined);
            PyMem_Free(arr); /* every reference moved or released */
            PyMem_Free(heads);
            PyMem_Free(order);
            goto done;
        }
    }
    ids = PySequence_List(fragments); /* a private list: hostile hooks cannot resize it */
    if (ids == NULL) goto done;
    Py_ssize_t n = PyList_Size(ids);
    if (n < 0) goto done;
    int any = 0;
    if (ftype != Py_None && pe_ids_address_order(ids, n, ftype, names[PE_FRAGMENT_ID])) {
        /* exact str ids: the membership tests run no Python code, so after all the reads */
        for (Py_ssize_t i = 0; i < n && !any; i++) {
            PyObject *id = PyList_GetItem(ids, i);
            if (id == NULL) goto done;
            int rc = pe_used_contains(used, id);
            if (rc == -2) *declined = 1;
            if (rc < 0) goto done;
            any = rc;
        }
    }
    else {
        for (Py_ssize_t i = 0; i < n; i++) {
            /* held while it is read (its read may run Python code that empties ids); replaced below */
            PyObject *fragment = Py_XNewRef(PyList_GetItem(ids, i));
            if (fragment == NULL) goto done;
            PyObject *id = PyObject_GetAttr(fragment, names[PE_FRAGMENT_ID]);
            Py_DECREF(fragment);
            if (id == NULL) goto done;
            if (PyList_SetItem(ids, i, id) < 0) goto done; /* steals id, releases fragment */
            if (!PyUnicode_CheckExact(id)) { /* hashed in the used set, sorted below */
                *declined = 1;
                goto done;
            }
            if (!any) {
                int rc = pe_used_contains(used, id);
                if (rc == -2) *declined = 1;
                if (rc < 0) goto done;
                any = rc;
            }
        }
    }
    if (pe_rank_key_if_used(names, part, any, &result, &rank, &key) < 0 || result != NULL) goto done;
    {
        int in_order = pe_sorted_strs(ids, n); /* a placement part's ids already are */
        if (in_order < 0 || (in_order == 0 && PyList_Sort(ids) < 0)) goto done;
    }
    PyObject *sorted_ids = PyList_AsTuple(ids);
    if (sorted_ids == NULL) goto done;
    result = pe_executor(cls, names, placement_id, participant, rank, key, sorted_ids);
    Py_DECREF(sorted_ids);
done:
    Py_DECREF(participant);
    Py_XDECREF(fragments);
    Py_XDECREF(ids);
    Py_XDECREF(rank);
    Py_XDECREF(key);
    return result;
}

/* The pair (key, executor) of pe_part: the fields stored in field order straight into the
 * instance's own (key-sharing) dict. NULL with an exception on error. */
static PyObject *
pe_executor(PyObject *cls, PyObject *const *names, PyObject *placement_id, PyObject *participant, PyObject *rank,
            PyObject *key, PyObject *sorted_ids)
{
    PyObject *dict = NULL, *result = NULL;
    PyObject *executor = mr_new_instance(cls, &dict, "project_executors");
    if (executor == NULL) goto done;
    int rc = PyDict_SetItem(dict, names[PE_PLACEMENT_ID], placement_id);
    if (rc == 0) rc = PyDict_SetItem(dict, names[PE_PARTICIPANT], participant);
    if (rc == 0) rc = PyDict_SetItem(dict, names[PE_RANK], rank);
    if (rc == 0) rc = PyDict_SetItem(dict, names[PE_FRAGMENT_IDS], sorted_ids);
    if (rc < 0) goto done;
    (void)mr_untrack_inert(executor, dict); /* out of the cyclic collector when acyclic */
    result = PyTuple_Pack(2, key, executor);
done:
    Py_XDECREF(executor);
    Py_XDECREF(dict);
    return result;
}

PyDoc_STRVAR(project_executors_doc,
"project_executors(cls, placement_id, parts, used, participants)\n"
"--\n\n"
"Executor projections of one side without calling cls (a heap type with instance\n"
"__dict__): for every part (in order) whose participant_id is in participants (None: every\n"
"part) and whose fragments include a placement_fragment_id in used (a set, or a list standing\n"
"for set(used)), the pair\n"
"((rank.dp, rank.pp, rank.ep, rank.tp), executor) with the executor's field dict\n"
"placement_id, participant_id, rank and placement_fragment_ids (the part's ids, sorted).\n"
"Returns the list of pairs; the caller checks rank uniqueness and orders them. None when a\n"
"value is not of the exact kind this pass reads without running Python code (parts or a part's\n"
"fragments not an exact tuple or list, an id or participant id not an exact str, used or\n"
"participants not an exact set of exact strs): the caller's Python form decides.");

static PyObject *
po_project_executors(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *cls, *placement_id, *parts, *used, *participants, *ftype = Py_None;
    if (!PyArg_ParseTuple(args, "OOOOO|O:project_executors", &cls, &placement_id, &parts, &used, &participants,
                          &ftype))
        return NULL;
    if (ftype != Py_None && !PyType_Check(ftype)) {
        PyErr_SetString(PyExc_TypeError, "project_executors: fragment_type must be a class");
        return NULL;
    }
    if (!PyType_Check(cls) || !(PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "project_executors: cls must be a heap type");
        return NULL;
    }
    if (!PyAnySet_Check(used) && !PyList_CheckExact(used)) {
        PyErr_SetString(PyExc_TypeError, "project_executors: used must be a set or a list");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "project_executors: cls has no allocator");
        return NULL;
    }
    PyObject *names[PE_N] = {NULL};
    PyObject *result = NULL, *items = NULL;
    pe_used lookup = {used, NULL, NULL, NULL, 0, 0, 0};
    static PyObject *cache[PE_N];
    if (po_names(cache, pe_names, PE_N, names) < 0) goto done;
    if (pe_used_init(&lookup, used) < 0) goto done;
    /* exact containers of exact-str ids only: the parts are iterated, the used set and the
     * participants probed with each id (AUDIT5 F4; a list of used ids is checked when its set is
     * built, pe_used_contains) */
    int declined = 0;
    if (!PyTuple_CheckExact(parts) && !PyList_CheckExact(parts)) declined = 1;
    if (!declined && !PyList_CheckExact(used)) {
        int exact = pe_exact_strs(used);
        if (exact < 0) goto done;
        declined = !exact;
    }
    if (!declined && participants != Py_None) {
        int exact = pe_exact_strs(participants);
        if (exact < 0) goto done;
        declined = !exact;
    }
    if (declined) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    items = PySequence_List(parts);
    if (items == NULL) goto done;
    result = PyList_New(0);
    if (result == NULL) goto done;
    Py_ssize_t n = PyList_Size(items);
    if (n < 0) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* held while it is read: its attribute reads may run Python code (a property, a key's
         * __eq__) that empties the private list (gc.get_objects() finds it) */
        PyObject *part = Py_XNewRef(PyList_GetItem(items, i));
        if (part == NULL) goto fail;
        PyObject *pair = pe_part(cls, names, placement_id, part, &lookup, participants, ftype, &declined);
        Py_DECREF(part);
        if (pair == NULL && declined && !PyErr_Occurred()) {
            Py_DECREF(result);
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (pair == NULL) goto fail;
        int rc = pair == Py_None ? 0 : PyList_Append(result, pair);
        Py_DECREF(pair);
        if (rc < 0) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    pe_used_free(&lookup);
    for (int k = 0; k < PE_N; k++) Py_XDECREF(names[k]);
    Py_XDECREF(items);
    return result;
}

/* ---- owner_minimums: the least owner per (tensor, DP rank) (spec §11.2) ------------------ */

PyDoc_STRVAR(owner_minimums_doc,
"owner_minimums(fragments, kinds, fragment_type=None, rank_type=None, grouped=False)\n"
"--\n\n"
"{(fragment.tensor_id, fragment.rank.dp): least tuple(getattr(fragment.rank, kind) for kind\n"
"in kinds)} over fragments (a list or tuple), comparing the tuples with <. With grouped (and the\n"
"types, when every fragment is exactly fragment_type with an exact str tensor id and a rank\n"
"exactly rank_type whose values are exact ints in int64) the same minimums come back grouped:\n"
"({dp: {tensor_id: tuple(zip(kinds, least))}}, number of keys), in first-appearance order; on\n"
"any other input the plain dict. None when a tensor id is not an exact str or a rank value not\n"
"an exact int (the caller's Python form decides: no Python code runs in this pass).");

/* owner_minimums over exact fragment and rank instances whose values are exact str tensor ids
 * and ints fitting int64: the fragments are read in address order into rows, then combined in
 * list order (same keys, same first-appearance order, same minimums, equal values). NULL with
 * no exception set: not this path (the caller's in-order loop decides); NULL with an
 * exception: no memory. */
#define OM_MAX_KINDS 8 /* RM_VALUES - 1 (rank_memo.h: dp and the kinds) */
_Static_assert(OM_MAX_KINDS + 1 <= RM_VALUES, "a rank memo slot keeps dp and every kind");
/* A row is as long as its kinds need (om_stride): the rows are written at random (address
 * order) and probed at random (by key), a miss or two a row once they outgrow the cache. */
typedef struct {
    PyObject *tid; /* borrowed: the fragment holds it (no Python code runs here) */
    Py_hash_t hash;
    int64_t dp;
    int64_t v[]; /* nkinds values */
} om_row;

/* Bytes of a row of nkinds values (at most OM_MAX_KINDS): rounded up to 32 or 64 when that
 * much or less, so that on mr_alloc_lines' rows none straddles two cache lines. */
static size_t
om_stride(Py_ssize_t nkinds)
{
    size_t bytes = sizeof(om_row) + (size_t)nkinds * sizeof(int64_t);
    return bytes <= 32 ? 32 : bytes <= 64 ? 64 : bytes;
}

/* Row i of rows of stride bytes. */
static inline om_row *
om_at(const void *rows, size_t stride, size_t i)
{
    return (om_row *)(uintptr_t)((const char *)rows + i * stride);
}

#define OM_MEMO 64 /* owners remembered by om_grouped, by their least values */
typedef struct {
    int64_t v[OM_MAX_KINDS];
    PyObject *owner; /* borrowed from om_grouped's owners map; NULL: empty */
} om_memo;

static PyObject *om_grouped(const void *rows, size_t stride, const size_t *best, const size_t *firsts, size_t nkeys,
                            PyObject *kinds, Py_ssize_t nkinds);

/* The first slot om_address_order probes for row's (tensor id, dp) key (cap a power of two). */
static inline size_t
om_slot(const om_row *row, size_t cap)
{
    uint64_t h = (uint64_t)row->hash * 0x9E3779B97F4A7C15ULL ^ po_hash((uint64_t)row->dp);
    return (size_t)po_hash(h) & (cap - 1);
}

static PyObject *
om_address_order(PyObject *fragments, int is_list, PyObject *kinds, Py_ssize_t nkinds, PyObject *ftype,
                 PyObject *rtype, int grouped)
{
    if (nkinds > OM_MAX_KINDS) return NULL;
    for (Py_ssize_t k = 0; k < nkinds; k++) {
        PyObject *kind = PyTuple_GetItem(kinds, k);
        if (kind == NULL || !PyUnicode_CheckExact(kind)) {
            PyErr_Clear();
            return NULL;
        }
    }
    static PyObject *cache[3];
    static const char *const om_names[3] = {"tensor_id", "rank", "dp"};
    PyObject *names[3] = {NULL, NULL, NULL};
    if (po_names(cache, om_names, 3, names) < 0) return NULL;
    Py_ssize_t n = is_list ? PyList_Size(fragments) : PyTuple_Size(fragments);
    size_t count = n < 0 ? 0 : (size_t)n;
    mr_kv *order = mr_alloc_array(count ? count : 1, sizeof(mr_kv));
    size_t stride = om_stride(nkinds);
    void *rows_block = NULL;
    void *rows = mr_alloc_lines(count ? count : 1, stride, 0, &rows_block);
    size_t cap = 16;
    while (cap < count * 2) cap *= 2; /* count * stride (>= 32) was allocated: no overflow */
    size_t *slots = PyMem_Calloc(cap, sizeof(size_t)); /* 1 + index of the first row of a key; 0 empty */
    size_t *best = mr_alloc_array(count ? count : 1, sizeof(size_t));  /* per key (by first row): its least row */
    size_t *firsts = mr_alloc_array(count ? count : 1, sizeof(size_t)); /* keys in order of first appearance */
    size_t nkeys = 0;
    PyObject *result = NULL;
    int declined = 0;
    if (n < 0 || order == NULL || rows == NULL || slots == NULL || best == NULL || firsts == NULL) {
        if (slots == NULL && !PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        PyObject *item = is_list ? PyList_GetItem(fragments, (Py_ssize_t)i) : PyTuple_GetItem(fragments, (Py_ssize_t)i);
        if (item == NULL) goto done;
        order[i].key = (uint64_t)(uintptr_t)item;
        order[i].idx = i;
    }
    if (mr_radix_sort(order, count) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    /* the rank objects read and their values (the fragments share a few ranks, visited
     * interleaved): rank_memo.h, dp in v[0] and the kinds' values after it */
    rm_memo ranks = {NULL, 0, 0, 0};
    for (size_t k = 0; k < count && !declined; k++) {
        if (k + 16 < count) __builtin_prefetch((const void *)(uintptr_t)order[k + 16].key); /* a hint only */
        if (k + 8 < count) {
            __builtin_prefetch(om_at(rows, stride, order[k + 8].idx), 1);
            /* hints only: the tensor-id object of the fragment 8 ahead (asked for 16 ahead, so
             * its C-owned field slots are at hand; the pointer is read, not the object) */
            PyObject *const *f = mr_pf_fields((PyObject *)(uintptr_t)order[k + 8].key);
            if (f != NULL) {
                int found = 0;
                PyObject *ahead = mr_pf_named(f, names[0], &found);
                if (ahead != NULL) __builtin_prefetch(ahead);
            }
        }
        PyObject *item = (PyObject *)(uintptr_t)order[k].key;
        om_row *row = om_at(rows, stride, order[k].idx);
        if ((PyObject *)Py_TYPE(item) != ftype) {
            declined = 1;
            break;
        }
        /* both fields from the C-owned layout's slots when it has them (layout.h mr_pf_scan:
         * the values the attribute reads give), else (or where a slot is empty) read as
         * attributes */
        PyObject *field[2] = {NULL, NULL};
        if (!mr_pf_scan(item, names, 2, field)) {
            field[0] = field[1] = NULL;
            rm_may_run_code(&ranks); /* read as attributes below (a foreign class's) */
        }
        PyObject *tid = po_take_field(item, &field[0], names[0]);
        PyObject *rank = tid == NULL ? NULL : po_take_field(item, &field[1], names[1]);
        Py_XDECREF(field[1]); /* not taken when the tid read failed */
        declined = rank == NULL || !PyUnicode_CheckExact(tid) || (PyObject *)Py_TYPE(rank) != rtype;
        if (!declined) {
            row->tid = tid;
            row->hash = PyObject_Hash(tid); /* exact str: cached, never -1 without an error */
            declined = row->hash == -1;
        }
        rm_slot *slot = declined ? NULL : rm_find(&ranks, rank);
        if (!declined && rm_fresh(&ranks, slot)) { /* read in this epoch: the same values */
            row->dp = slot->v[0];
            memcpy(row->v, slot->v + 1, (size_t)nkinds * sizeof(int64_t));
            Py_DECREF(rank);
            Py_DECREF(tid); /* the fragment keeps it alive */
            continue;
        }
        /* the rank's attributes are read from its instance dict: only a plain one (plain_dict.h),
         * so that no read runs Python code (a str-subclass key's __eq__) while the rows hold
         * borrowed tensor ids and the order borrowed fragments. Else the pass declines and the
         * caller's in-order loop reads the fragments as the rules do. */
        if (!declined) {
            if (slot == NULL) rm_may_run_code(&ranks); /* a first check may make its dict */
            if (pd_getattr_safe(rank) <= 0) declined = 1;
        }
        for (Py_ssize_t a = -1; a < nkinds && !declined; a++) {
            PyObject *name = a < 0 ? names[2] : PyTuple_GetItem(kinds, a);
            /* the in-order loop accepts any value; here only exact ints within int64 */
            PyObject *value = name == NULL ? NULL : PyObject_GetAttr(rank, name);
            int overflow = 1;
            long long v = value != NULL && PyLong_CheckExact(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : 0;
            Py_XDECREF(value);
            declined = overflow != 0 || (v == -1 && PyErr_Occurred());
            if (!declined) *(a < 0 ? &row->dp : &row->v[a]) = (int64_t)v;
        }
        if (!declined) {
            int64_t values[RM_VALUES]; /* nkinds <= OM_MAX_KINDS == RM_VALUES - 1 */
            values[0] = row->dp;
            memcpy(values + 1, row->v, (size_t)nkinds * sizeof(int64_t));
            rm_store(&ranks, slot, rank, NULL, values, 1 + (size_t)nkinds);
        }
        Py_XDECREF(rank);
        Py_XDECREF(tid); /* the fragment keeps it alive */
    }
    rm_free(&ranks);
    if (declined) {
        PyErr_Clear();
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        /* hints only: the rows come in list order, their keys' slots and the rows those hold
         * (and the tensor-id objects compared) are scattered: the slot of row i + 16, then the
         * row its slot held at i + 8 (the slot was asked for a round earlier) */
        if (i + 16 < count) __builtin_prefetch(&slots[om_slot(om_at(rows, stride, i + 16), cap)]);
        if (i + 8 < count) {
            size_t held = slots[om_slot(om_at(rows, stride, i + 8), cap)];
            if (held != 0 && held <= count) {
                __builtin_prefetch(om_at(rows, stride, held - 1));
                __builtin_prefetch(om_at(rows, stride, held - 1)->tid);
            }
        }
        const om_row *row = om_at(rows, stride, i);
        size_t j = om_slot(row, cap);
        for (;;) {
            if (slots[j] == 0) {
                slots[j] = i + 1;
                best[i] = i;
                firsts[nkeys++] = i;
                break;
            }
            const om_row *first = om_at(rows, stride, slots[j] - 1);
            int same = first->dp == row->dp && first->hash == row->hash
                       && (first->tid == row->tid || PyUnicode_Compare(first->tid, row->tid) == 0);
            if (same) {
                const om_row *least = om_at(rows, stride, best[slots[j] - 1]);
                int less = 0;
                for (Py_ssize_t a = 0; a < nkinds; a++) {
                    if (row->v[a] != least->v[a]) {
                        less = row->v[a] < least->v[a];
                        break;
                    }
                }
                if (less) best[slots[j] - 1] = i;
                break;
            }
            j = (j + 1) & (cap - 1);
        }
    }
    if (grouped) {
        result = om_grouped(rows, stride, best, firsts, nkeys, kinds, nkinds);
        goto done;
    }
    result = PyDict_New();
    for (size_t e = 0; result != NULL && e < nkeys; e++) {
        const om_row *first = om_at(rows, stride, firsts[e]), *least = om_at(rows, stride, best[firsts[e]]);
        PyObject *dp = PyLong_FromLongLong(first->dp);
        PyObject *key = dp == NULL ? NULL : PyTuple_Pack(2, first->tid, dp);
        Py_XDECREF(dp);
        PyObject *values = key == NULL ? NULL : PyTuple_New(nkinds);
        for (Py_ssize_t a = 0; values != NULL && a < nkinds; a++) {
            PyObject *x = PyLong_FromLongLong(least->v[a]);
            if (x == NULL || PyTuple_SetItem(values, a, x) < 0) Py_CLEAR(values);
        }
        if (values == NULL || PyDict_SetItem(result, key, values) < 0) Py_CLEAR(result);
        Py_XDECREF(key);
        Py_XDECREF(values);
    }
done:
    for (int k = 0; k < 3; k++) Py_XDECREF(names[k]);
    PyMem_Free(order);
    PyMem_Free(rows_block);
    PyMem_Free(slots);
    PyMem_Free(best);
    PyMem_Free(firsts);
    return result;
}

/* The minimums grouped by DP rank, as complete_parallel_source_replicas groups them:
 * ({dp: {tensor_id: owner}}, number of (tensor_id, dp) keys), dps and each dp's tensor ids in
 * first-appearance order of their keys, owner = tuple(zip(kinds, least values)), one tuple
 * shared by equal values. NULL with an exception on failure (no memory). */
static PyObject *
om_grouped(const void *rows, size_t stride, const size_t *best, const size_t *firsts, size_t nkeys, PyObject *kinds,
           Py_ssize_t nkinds)
{
    PyObject *by_dp = PyDict_New();
    PyObject *owners = PyDict_New(); /* least values tuple -> owner tuple */
    PyObject *result = NULL;
    PyObject *chosen = NULL;         /* borrowed from by_dp: the dict of chosen_dp */
    int64_t chosen_dp = 0;
    om_memo memo[OM_MEMO];
    for (size_t k = 0; k < OM_MEMO; k++) memo[k].owner = NULL;
    if (by_dp == NULL || owners == NULL) goto done;
    for (size_t e = 0; e < nkeys; e++) {
        /* hints only: the keys' first rows and least rows, and the tensor-id objects the dict
         * insert reads (their cached hash), are scattered: asked for 16 and 8 keys ahead */
        if (e + 16 < nkeys) {
            __builtin_prefetch(om_at(rows, stride, firsts[e + 16]));
            __builtin_prefetch(&best[firsts[e + 16]]);
        }
        if (e + 8 < nkeys) {
            __builtin_prefetch(om_at(rows, stride, firsts[e + 8])->tid);
            __builtin_prefetch(om_at(rows, stride, best[firsts[e + 8]]));
        }
        const om_row *first = om_at(rows, stride, firsts[e]), *least = om_at(rows, stride, best[firsts[e]]);
        if (chosen == NULL || first->dp != chosen_dp) {
            PyObject *dp = PyLong_FromLongLong(first->dp);
            if (dp == NULL) goto done;
            chosen = PyDict_GetItemWithError(by_dp, dp); /* borrowed */
            if (chosen == NULL && !PyErr_Occurred()) {
                PyObject *fresh = po_hashed_dict(); /* one entry per tensor: po_hashed_dict */
                if (fresh != NULL && PyDict_SetItem(by_dp, dp, fresh) == 0) chosen = fresh; /* by_dp holds it */
                Py_XDECREF(fresh);
            }
            Py_DECREF(dp);
            if (chosen == NULL) goto done;
            chosen_dp = first->dp;
        }
        /* the owner of these least values met last time, when they are the same values (a
         * handful of distinct owners, met over and over): the same owner object the map gives */
        uint64_t memo_hash = 0x9E3779B97F4A7C15ULL;
        for (Py_ssize_t a = 0; a < nkinds; a++) memo_hash = po_hash(memo_hash ^ (uint64_t)least->v[a]);
        size_t memo_at = (size_t)(memo_hash & (OM_MEMO - 1));
        om_memo *m = &memo[memo_at];
        if (m->owner != NULL && memcmp(m->v, least->v, (size_t)nkinds * sizeof(int64_t)) == 0) {
            int rc = PyDict_SetItem(chosen, first->tid, m->owner); /* owners holds it */
            if (rc < 0) goto done;
            continue;
        }
        PyObject *values = PyTuple_New(nkinds);
        for (Py_ssize_t a = 0; values != NULL && a < nkinds; a++) {
            PyObject *x = PyLong_FromLongLong(least->v[a]);
            if (x == NULL || PyTuple_SetItem(values, a, x) < 0) Py_CLEAR(values);
        }
        if (values == NULL) goto done;
        PyObject *owner = PyDict_GetItemWithError(owners, values); /* borrowed */
        if (owner != NULL) {
            Py_INCREF(owner);
        } else if (!PyErr_Occurred()) {
            owner = mr_gc_hide(PyTuple_New(nkinds)); /* until full: the pairs' allocations may collect */
            for (Py_ssize_t a = 0; owner != NULL && a < nkinds; a++) {
                PyObject *kind = PyTuple_GetItem(kinds, a);  /* borrowed; in range */
                PyObject *value = PyTuple_GetItem(values, a); /* borrowed; in range */
                PyObject *pair = kind == NULL || value == NULL ? NULL : PyTuple_Pack(2, kind, value);
                if (pair == NULL || PyTuple_SetItem(owner, a, pair) < 0) Py_CLEAR(owner);
            }
            mr_gc_show(owner); /* full (or NULL) */
            if (owner != NULL && PyDict_SetItem(owners, values, owner) < 0) Py_CLEAR(owner);
        }
        Py_DECREF(values);
        if (owner == NULL) goto done;
        memcpy(m->v, least->v, (size_t)nkinds * sizeof(int64_t));
        m->owner = owner; /* borrowed: owners holds it until the end */
        int rc = PyDict_SetItem(chosen, first->tid, owner);
        Py_DECREF(owner);
        if (rc < 0) goto done;
    }
    {
        PyObject *count = PyLong_FromSize_t(nkeys);
        if (count != NULL) result = PyTuple_Pack(2, by_dp, count);
        Py_XDECREF(count);
    }
done:
    Py_XDECREF(by_dp);
    Py_XDECREF(owners);
    return result;
}

static PyObject *
po_owner_minimums(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *fragments, *kinds, *ftype = Py_None, *rtype = Py_None;
    int grouped = 0;
    if (!PyArg_ParseTuple(args, "OO!|OOp:owner_minimums", &fragments, &PyTuple_Type, &kinds, &ftype, &rtype,
                          &grouped))
        return NULL;
    int is_list = PyList_Check(fragments);
    if (!is_list && !PyTuple_Check(fragments)) {
        PyErr_SetString(PyExc_TypeError, "owner_minimums: fragments must be a list or tuple");
        return NULL;
    }
    if ((ftype != Py_None || rtype != Py_None) && (!PyType_Check(ftype) || !PyType_Check(rtype))) {
        PyErr_SetString(PyExc_TypeError, "owner_minimums: fragment_type and rank_type must be classes");
        return NULL;
    }
    Py_ssize_t nkinds = PyTuple_Size(kinds);
    if (nkinds < 0) return NULL;
    if (ftype != Py_None) {
        PyObject *fast = om_address_order(fragments, is_list, kinds, nkinds, ftype, rtype, grouped);
        if (fast != NULL || PyErr_Occurred()) return fast;
    }
    static const char *const om_names[3] = {"tensor_id", "rank", "dp"};
    static PyObject *cache[3];
    PyObject *names[3] = {NULL, NULL, NULL};
    PyObject *result = NULL;
    if (po_names(cache, om_names, 3, names) < 0) goto fail;
    PyObject *tensor_name = names[0], *rank_name = names[1], *dp_name = names[2];
    result = PyDict_New();
    if (result == NULL) goto fail;
    for (Py_ssize_t i = 0;; i++) {
        Py_ssize_t n = is_list ? PyList_Size(fragments) : PyTuple_Size(fragments);
        if (n < 0) goto fail;
        if (i >= n) break;
        PyObject *fragment = is_list ? PyList_GetItem(fragments, i) : PyTuple_GetItem(fragments, i);
        if (fragment == NULL) goto fail;
        Py_INCREF(fragment);
        PyObject *tensor_id = NULL, *rank = NULL, *key = NULL, *values = NULL;
        int ok = 0;
        tensor_id = PyObject_GetAttr(fragment, tensor_name);
        if (tensor_id == NULL) goto next;
        rank = PyObject_GetAttr(fragment, rank_name);
        if (rank == NULL) goto next;
        PyObject *dp = PyObject_GetAttr(rank, dp_name);
        if (dp == NULL) goto next;
        /* the key is hashed and compared, the values compared with <: exact kinds only, else
         * the Python form decides (a forged str or int subclass's dunders would run inside the
         * pass: AUDIT5 F4) */
        if (!PyUnicode_CheckExact(tensor_id) || !PyLong_CheckExact(dp)) {
            Py_DECREF(dp);
            goto undecided;
        }
        key = PyTuple_Pack(2, tensor_id, dp);
        Py_DECREF(dp);
        if (key == NULL) goto next;
        values = PyTuple_New(nkinds);
        if (values == NULL) goto next;
        /* out of the collector until full: the reads may run Python code, which must not find a
         * tuple with empty slots (gc.get_objects()) */
        PyObject_GC_UnTrack(values);
        for (Py_ssize_t k = 0; k < nkinds; k++) {
            PyObject *kind = PyTuple_GetItem(kinds, k); /* borrowed; kinds is a tuple */
            if (kind == NULL) goto next;
            PyObject *value = PyObject_GetAttr(rank, kind);
            if (value == NULL || PyTuple_SetItem(values, k, value) < 0) goto next;
            if (!PyLong_CheckExact(value)) goto undecided;
        }
        PyObject_GC_Track(values);
        PyObject *best = PyDict_GetItemWithError(result, key); /* borrowed */
        if (best == NULL) {
            if (PyErr_Occurred()) goto next;
            ok = PyDict_SetItem(result, key, values) == 0;
        } else {
            Py_INCREF(best);
            int less = PyObject_RichCompareBool(values, best, Py_LT);
            Py_DECREF(best);
            if (less < 0) goto next;
            ok = less == 0 || PyDict_SetItem(result, key, values) == 0;
        }
        if (0) {
        undecided:
            Py_CLEAR(result); /* (ok stays 0; no exception set) */
        }
    next:
        Py_XDECREF(values);
        Py_XDECREF(key);
        Py_XDECREF(rank);
        Py_XDECREF(tensor_id);
        Py_DECREF(fragment);
        if (!ok) goto fail;
    }
    for (int k = 0; k < 3; k++) Py_DECREF(names[k]);
    return result;
fail:
    for (int k = 0; k < 3; k++) Py_XDECREF(names[k]);
    Py_XDECREF(result);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE; /* undecided: the caller's Python form decides */
}

/* ---- fragment_columns: the planner's first pass over the target fragments --------------- */

PyDoc_STRVAR(fragment_columns_doc,
"fragment_columns(fragments, fragment_type=None, rank_type=None)\n"
"--\n\n"
"(ids, tensor_ids, dps, order) for fragments (a list or tuple): the lists of\n"
"placement_fragment_id, tensor_id and rank.dp values in order, and order = 1 when the ids are\n"
"exact str in non-decreasing order, 0 when they are exact str and not, -1 when some id is not\n"
"an exact str (the caller decides with ids == sorted(ids)).\n"
"With fragment_type and rank_type (classes), a 5th item: the geometry (ndim, offsets, shapes,\n"
"nbytes) as native int64 bytes in list order (per fragment len(global_offset), the offsets,\n"
"the local_shape values and nbytes as uint64, 0 outside (0, 2**64)), or None when some value\n"
"does not fit (not a tuple, offset and shape of different lengths, a non-int or a coordinate\n"
"outside int64, a non-int nbytes). When every fragment is exactly of fragment_type and its\n"
"rank exactly of rank_type, the objects are read in address order (the order they were\n"
"allocated in, usually; reading them in id order misses the cache several times each):\n"
"plain instance-dict reads, the same values; on any failure the in-order loop runs, so an\n"
"error raised is the first in list order.");

enum { FC_ID, FC_TENSOR, FC_RANK, FC_DP, FC_OFFSET, FC_SHAPE, FC_NBYTES, FC_N };
static const char *const fc_names[FC_N] = {"placement_fragment_id", "tensor_id", "rank", "dp", "global_offset",
                                           "local_shape", "nbytes"};



/* What the address-order pass keeps of fragment i (strong references until moved): one cache
 * line (the rows are written in address order, at random in list order: one miss a row, and
 * the prefetch a row ahead asks for all of it; nbytes is kept in the scratch, written in
 * order). */
typedef struct {
    PyObject *id, *tid, *dp;
    int64_t ndim;
    size_t at; /* its offsets at scratch[at], then its shape, then its nbytes */
    po_head head; /* of the id */
} fc_row;
_Static_assert(sizeof(fc_row) == 64, "an fc_row fills one cache line");

/* Item i of fragment_columns' items (an exact tuple or a private list), borrowed. */
static PyObject *
fc_at(PyObject *items, Py_ssize_t i)
{
    return PyTuple_CheckExact(items) ? PyTuple_GetItem(items, i) : PyList_GetItem(items, i);
}

/* fragment_columns' order flag from the address pass's rows (ids[i] is rows[i].id's object). */
static int
fc_order_rows(const fc_row *rows, PyObject *ids, Py_ssize_t n)
{
    return po_heads_order((const char *)&rows[0].head, sizeof(fc_row), ids, n, NULL);
}

/* The address-order pass of fragment_columns over the private list items (n > 0): every item
 * and its rank must be exactly of the given types (checked as they are visited). Fills ids,
 * tids and dps (new lists of n empty slots) and *geometry (a new reference: the 4-tuple, or
 * None when some value does not fit). 1 done; 0 declined with no exception set (a failed
 * read, no memory, another type): the caller then runs the in-order loop on fresh lists.
 * Values land in one row per fragment (one scattered write each), moved into the lists in
 * order afterwards. */
static int
fc_address_pass(PyObject *items, Py_ssize_t n, PyObject *ftype, PyObject *rtype, PyObject *const *names,
                PyObject *ids, PyObject *tids, PyObject *dps, PyObject **geometry, int *order_out)
{
    size_t count = (size_t)n;
    /* the fragment's own field names (every name but the rank's dp), in fc_names order */
    PyObject *fc_state_names[FC_N - 1];
    for (int f = 0, j = 0; f < FC_N; f++)
        if (f != FC_DP) fc_state_names[j++] = names[f];
    mr_kv *order = mr_alloc_array(count, sizeof(mr_kv));
    /* zeroed by the allocator (fresh pages come zeroed: no pass of its own over 64 bytes a
     * row), each row on a line of its own */
    void *rows_block = NULL;
    fc_row *rows = mr_alloc_lines(count, sizeof(fc_row), 1, &rows_block);
    rm_memo ranks = {NULL, 0, 0, 0}; /* the ranks' dp values read (rank_memo.h) */
    po_tuple_slot tuples[PO_TUPLE_MEMO];
    memset(tuples, 0, sizeof tuples);
    int64_t *scratch = NULL;
    size_t used = 0, cap = 0, filled = 0, coords = 0; /* coords: offsets (and shape values) kept */
    int ok = 0, fits = 1;
    if (order == NULL || rows == NULL) goto done;
    for (size_t i = 0; i < count; i++) {
        PyObject *item = fc_at(items, (Py_ssize_t)i); /* borrowed from the tuple or the private list */
        if (item == NULL) goto done;
        order[i].key = (uint64_t)(uintptr_t)item;
        order[i].idx = i;
    }
    if (mr_radix_sort(order, count) < 0) goto done;
    for (size_t k = 0; k < count; k++) {
        if (k + 8 < count) __builtin_prefetch(&rows[order[k + 8].idx], 1);
        size_t i = order[k].idx;
        PyObject *item = (PyObject *)(uintptr_t)order[k].key; /* held by the private list */
        if ((PyObject *)Py_TYPE(item) != ftype) goto done;
        PyObject *v[FC_N] = {NULL};
        int rc = 0;
        /* the fragment's fields from one scan of its state dict, as the attribute reads of an
         * exact ftype instance give them (as select_sources' pre-read takes them); a field not
         * met is read as an attribute */
        PyObject *met[FC_N] = {NULL};
        if (!mr_pf_scan(item, fc_state_names, FC_N - 1, met)) { /* (or its layout's slots) */
            /* a field not met is read as an attribute: only from a plain instance dict
             * (plain_dict.h), else the in-order loop decides (see the rank's read below) */
            rm_may_run_code(&ranks); /* (its dict may be made here: an allocation) */
            if (pd_getattr_safe(item) <= 0) goto done;
            PyObject *state = PyObject_GenericGetDict(item, NULL);
            po_scan_state(state, fc_state_names, FC_N - 1, met);
            Py_XDECREF(state);
        }
        for (int f = 0; f < FC_N && rc == 0; f++) {
            if (f == FC_DP) {
                /* rank.dp is read from the rank's instance dict: only a plain one (plain_dict.h),
                 * so that no read runs Python code (a str-subclass key's __eq__) while the order
                 * holds borrowed fragments and the pass reads them out of list order; else the
                 * in-order loop decides. A rank checked and read in the current epoch (no step
                 * since could run Python code: rank_memo.h) is still plain and its dp the same
                 * object: the memo gives it without a read. */
                PyObject *rank = v[FC_RANK];
                if ((PyObject *)Py_TYPE(rank) != rtype) rc = -1;
                else {
                    rm_slot *slot = rm_find(&ranks, rank);
                    if (rm_fresh(&ranks, slot)) v[f] = Py_NewRef(slot->obj);
                    else {
                        if (slot == NULL) rm_may_run_code(&ranks); /* a first check may make its dict */
                        if (pd_getattr_safe(rank) <= 0) rc = -1;
                        else if ((v[f] = PyObject_GetAttr(rank, names[f])) != NULL)
                            rm_store(&ranks, slot, rank, v[f], NULL, 0);
                    }
                }
            }
            else v[f] = po_take_field(item, &met[f < FC_DP ? f : f - 1], names[f]);
            if (v[f] == NULL) rc = -1;
        }
        for (int f = 0; f < FC_N - 1; f++) Py_XDECREF(met[f]); /* those not taken (a failed read) */
        fc_row *row = &rows[i];
        if (rc == 0) {
            po_str_head(v[FC_ID], &row->head);
            if (row->head.kind == PO_STR) rm_may_run_code(&ranks); /* an encoding error was made and cleared */
            row->id = v[FC_ID];
            row->tid = v[FC_TENSOR];
            row->dp = v[FC_DP];
            v[FC_ID] = v[FC_TENSOR] = v[FC_DP] = NULL;
            filled++;
        }
        if (rc == 0 && fits) {
            Py_ssize_t nd = PyTuple_Check(v[FC_OFFSET]) ? PyTuple_Size(v[FC_OFFSET]) : -1;
            if (nd < 0 || nd > INT32_MAX || !PyLong_Check(v[FC_NBYTES])) fits = 0;
            else {
                int64_t nb = 0;
                rc = po_nbytes(v[FC_NBYTES], &nb) < 0 ? -1 : 0;
                if (nb == 0) rm_may_run_code(&ranks); /* (an overflow error may have been made and cleared) */
                row->ndim = (int64_t)nd;
                size_t need = used + 2 * (size_t)nd + 1; /* nd < 2**31: no overflow before the check below */
                if (rc == 0 && need > cap) {
                    /* at first room for two dimensions and nbytes a fragment (pages never
                     * written cost nothing), then doubled */
                    size_t grown = cap ? cap : (count < ((size_t)1 << 40) ? 5 * count : 1024);
                    while (grown < need) {
                        if (grown > ((size_t)PY_SSIZE_T_MAX / sizeof(int64_t)) / 2) {
                            rc = -1;
                            break;
                        }
                        grown *= 2;
                    }
                    if (rc == 0) {
                        int64_t *bigger = PyMem_Realloc(scratch, grown * sizeof(int64_t));
                        if (bigger == NULL) rc = -1;
                        else {
                            scratch = bigger;
                            cap = grown;
                        }
                    }
                }
                if (rc == 0) {
                    row->at = used;
                    int c1 = po_coords_memo(tuples, v[FC_OFFSET], nd, scratch + used);
                    int c2 = c1 == 1 ? po_coords_memo(tuples, v[FC_SHAPE], nd, scratch + used + nd) : c1;
                    if (c1 < 0 || c2 < 0) rc = -1;
                    else if (c1 == 0 || c2 == 0) fits = 0;
                    else {
                        scratch[used + 2 * (size_t)nd] = nb;
                        used = need;
                        coords += (size_t)nd;
                    }
                }
            }
        }
        for (int f = 0; f < FC_N; f++) Py_XDECREF(v[f]);
        if (rc < 0) goto done;
    }
    rm_free(&ranks);
    po_tuple_memo_free(tuples);
    /* every row is filled: move the values into the lists, in order */
    for (size_t i = 0; i < count; i++) {
        PyList_SetItem(ids, (Py_ssize_t)i, rows[i].id); /* steal; index in range */
        PyList_SetItem(tids, (Py_ssize_t)i, rows[i].tid);
        PyList_SetItem(dps, (Py_ssize_t)i, rows[i].dp);
        rows[i].id = rows[i].tid = rows[i].dp = NULL;
    }
    filled = 0;
    if ((*order_out = fc_order_rows(rows, ids, n)) == -2) goto done; /* (cannot fail: exact str ids) */
    if (!fits) {
        Py_INCREF(Py_None);
        *geometry = Py_None;
        ok = 1;
        goto done;
    }
    {
        /* the four columns written straight into fresh bytes objects (their buffers are ours
         * to fill until they are shared), in list order */
        size_t half = coords; /* coordinates per kind (< used <= PY_SSIZE_T_MAX / 8: allocated) */
        PyObject *parts[4] = {
            PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * sizeof(int64_t))),
            PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(half * sizeof(int64_t))),
            PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(half * sizeof(int64_t))),
            PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * sizeof(int64_t)))};
        char *data[4] = {NULL, NULL, NULL, NULL};
        int made = 1;
        for (int k = 0; k < 4 && made; k++) made = parts[k] != NULL && (data[k] = PyBytes_AsString(parts[k])) != NULL;
        if (made) {
            size_t pos = 0;
            for (size_t i = 0; i < count; i++) {
                size_t nd = (size_t)rows[i].ndim;
                memcpy(data[1] + pos * sizeof(int64_t), scratch + rows[i].at, nd * sizeof(int64_t));
                memcpy(data[2] + pos * sizeof(int64_t), scratch + rows[i].at + nd, nd * sizeof(int64_t));
                pos += nd;
                memcpy(data[0] + i * sizeof(int64_t), &rows[i].ndim, sizeof(int64_t));
                memcpy(data[3] + i * sizeof(int64_t), scratch + rows[i].at + 2 * nd, sizeof(int64_t));
            }
            *geometry = PyTuple_Pack(4, parts[0], parts[1], parts[2], parts[3]);
        }
        for (int k = 0; k < 4; k++) Py_XDECREF(parts[k]);
        ok = *geometry != NULL;
    }
done:
    if (!ok && PyErr_Occurred()) PyErr_Clear();
    if (filled && rows != NULL) {
        for (size_t i = 0; i < count; i++) {
            Py_XDECREF(rows[i].id);
            Py_XDECREF(rows[i].tid);
            Py_XDECREF(rows[i].dp);
        }
    }
    rm_free(&ranks);
    po_tuple_memo_free(tuples);
    PyMem_Free(order);
    PyMem_Free(rows_block);
    PyMem_Free(scratch);
    return ok;
}

static PyObject *
po_fragment_columns(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *arg, *ftype = Py_None, *rtype = Py_None;
    if (!PyArg_ParseTuple(args, "O|OO:fragment_columns", &arg, &ftype, &rtype)) return NULL;
    int is_list = PyList_Check(arg);
    if (!is_list && !PyTuple_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "fragment_columns: fragments must be a list or tuple");
        return NULL;
    }
    int want_geometry = ftype != Py_None || rtype != Py_None;
    if (want_geometry && (!PyType_Check(ftype) || !PyType_Check(rtype))) {
        PyErr_SetString(PyExc_TypeError, "fragment_columns: fragment_type and rank_type must be classes");
        return NULL;
    }
    static PyObject *cache[FC_N];
    PyObject *names[FC_N] = {NULL};
    PyObject *ids = NULL, *tids = NULL, *dps = NULL, *result = NULL, *geometry = NULL;
    if (po_names(cache, fc_names, FC_N, names) < 0) goto done;
    /* An exact tuple as it is (nothing can resize it), else a private copy: attribute hooks
     * cannot resize what is iterated. */
    PyObject *items = PyTuple_CheckExact(arg) ? Py_NewRef(arg) : PySequence_List(arg);
    if (items == NULL) goto done;
    Py_ssize_t n = PyTuple_CheckExact(items) ? PyTuple_Size(items) : PyList_Size(items);
    ids = PyList_New(n);
    tids = PyList_New(n);
    dps = PyList_New(n);
    int order = 1;
    if (n < 0 || ids == NULL || tids == NULL || dps == NULL) goto fail;
    PyObject *lists[3] = {ids, tids, dps};
    po_lists_untrack(lists, 3);
    if (want_geometry && n > 0 && fc_address_pass(items, n, ftype, rtype, names, ids, tids, dps, &geometry, &order)) {
        po_lists_track(lists, 3);
        result = Py_BuildValue("(OOOiO)", ids, tids, dps, order, geometry);
        goto fail;
    }
    if (want_geometry) { /* the in-order loop fills fresh lists; the geometry stays None */
        Py_INCREF(Py_None);
        geometry = Py_None;
        Py_DECREF(ids);
        Py_DECREF(tids);
        Py_DECREF(dps);
        ids = PyList_New(n);
        tids = PyList_New(n);
        dps = PyList_New(n);
        if (ids == NULL || tids == NULL || dps == NULL) goto fail;
        lists[0] = ids, lists[1] = tids, lists[2] = dps;
        po_lists_untrack(lists, 3);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* held while it is read: an attribute read may run Python code (a property, a key's
         * __eq__) that empties the private list (gc.get_objects() finds it) */
        PyObject *fragment = Py_XNewRef(fc_at(items, i));
        if (fragment == NULL) goto fail;
        PyObject *id = PyObject_GetAttr(fragment, names[0]);
        PyObject *tid = id == NULL ? NULL : PyObject_GetAttr(fragment, names[1]);
        PyObject *rank = tid == NULL ? NULL : PyObject_GetAttr(fragment, names[2]);
        Py_DECREF(fragment);
        if (id != NULL) PyList_SetItem(ids, i, id); /* steals; index in range */
        if (tid != NULL) PyList_SetItem(tids, i, tid);
        if (rank == NULL) goto fail;
        PyObject *dp = PyObject_GetAttr(rank, names[3]);
        Py_DECREF(rank);
        if (dp == NULL) goto fail;
        PyList_SetItem(dps, i, dp);
        if (order >= 0) {
            if (!PyUnicode_CheckExact(id)) {
                order = -1;
            } else if (order == 1 && i > 0) {
                PyObject *prev = PyList_GetItem(ids, i - 1); /* an exact str (checked before) */
                if (prev == NULL) goto fail;
                int cmp = PyUnicode_Compare(prev, id);
                if (cmp == -1 && PyErr_Occurred()) goto fail;
                if (cmp > 0) order = 0;
            }
        }
    }
    po_lists_track(lists, 3);
    result = want_geometry ? Py_BuildValue("(OOOiO)", ids, tids, dps, order, geometry)
                           : Py_BuildValue("(OOOi)", ids, tids, dps, order);
fail:
    Py_DECREF(items);
done:
    for (int k = 0; k < FC_N; k++) Py_XDECREF(names[k]);
    Py_XDECREF(geometry);
    Py_XDECREF(ids);
    Py_XDECREF(tids);
    Py_XDECREF(dps);
    return result;
}

/* ---- owner_signatures: (owner kinds, DP-owned) of every tensor (spec §11.2) --------------- */

PyDoc_STRVAR(owner_signatures_doc,
"owner_signatures(tensors, ownership_type, shared_only=False)\n"
"--\n\n"
"{tensor_id: (kinds, 'dp' in kinds)} for the dict tensors (tensor id -> descriptor), where\n"
"kinds = tuple(axis.kind for axis in descriptor.parallel_axes if isinstance(axis,\n"
"ownership_type)), in the dict's order. None when some parallel_axes is not a tuple or\n"
"tensors is a dict subclass (the caller then derives the signatures in Python). With\n"
"shared_only true, when every tensor has one signature and every key is an exact str:\n"
"(signature, keys) instead of the map, keys a private copy of tensors (the map is\n"
"dict.fromkeys(keys, signature)).");

/* 1 when every item of the tuple t is an exact str. */
static int
po_all_exact_strs(PyObject *t)
{
    Py_ssize_t n = PyTuple_Size(t);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GetItem(t, i);
        if (x == NULL) {
            PyErr_Clear();
            return 0;
        }
        if (!PyUnicode_CheckExact(x)) return 0;
    }
    return n >= 0;
}

#define OS_MAX 16 /* parallel axes of a tensor gathered without a list */

/* 1 when the tuple a (exact strs only, checked when it was kept) and kinds[0:n] hold equal
 * exact strs in the same order (no Python code runs; no tuple is built); 0 otherwise. */
static int
po_same_kinds(PyObject *a, PyObject *const *kinds, Py_ssize_t n)
{
    if (PyTuple_Size(a) != n) {
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GetItem(a, i), *y = kinds[i];
        if (x == NULL) {
            PyErr_Clear();
            return 0;
        }
        if (x == y) continue;
        if (!PyUnicode_CheckExact(y) || PyUnicode_Compare(x, y) != 0) {
            PyErr_Clear(); /* never set for two exact strs */
            return 0;
        }
    }
    return 1;
}

static PyObject *
po_owner_signatures(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *tensors, *ownership;
    int shared_only = 0;
    if (!PyArg_ParseTuple(args, "O!O|p:owner_signatures", &PyDict_Type, &tensors, &ownership, &shared_only))
        return NULL;
    static const char *const os_names[3] = {"parallel_axes", "kind", "dp"};
    static PyObject *cache[3];
    PyObject *names[3] = {NULL, NULL, NULL};
    PyObject *items = NULL, *result = NULL;
    /* the previous signature, reused (a new reference stored) when the next tensor's kinds are
     * equal: the same value, one tuple pair less per tensor */
    PyObject *last_kinds = NULL, *last_signature = NULL; /* strong */
    PyObject *shared = NULL; /* strong: the one signature of every tensor so far (see below) */
    if (po_names(cache, os_names, 3, names) < 0) goto done;
    /* A private copy (strong references to every key and descriptor; an exact dict copies
     * without running Python code): hooks cannot change what is iterated, and no (key, value)
     * tuple is made per tensor. */
    items = PyDict_CheckExact(tensors) ? PyDict_Copy(tensors) : NULL;
    if (items == NULL) {
        if (PyErr_Occurred()) goto done;
        result = Py_None; /* a dict subclass: the caller derives the signatures in Python */
        Py_INCREF(result);
        goto done;
    }
    /* ... and out of the collector's lists: the attribute reads below may run Python code, which
     * must not reach the copy (gc.get_objects) and clear it under the borrowed keys and
     * descriptors (tests/test_audit23_planner_signatures.py). Nothing is inserted into it, so it
     * stays untracked; it is in no cycle (its keys and values do not refer to it). */
    PyObject_GC_UnTrack(items);
    /* While every tensor so far has the one signature object `shared` (the usual case: equal
     * kinds reuse the previous signature), nothing is stored: the map is then made at the end
     * by dict.fromkeys(items, shared), which sizes its table once for all the keys and inserts
     * each with the hash the copy holds, rather than growing a table insert by insert (every
     * growth reads each scattered key object again for its hash). The same keys in the same
     * order, the same value: the same map. At the first other signature the map is made as
     * before: the `nshared` keys before it inserted with `shared`, then on insert by insert. */
    Py_ssize_t nshared = 0;
    Py_ssize_t pos = 0;
    PyObject *key, *tensor; /* borrowed from the private copy */
    while (PyDict_Next(items, &pos, &key, &tensor)) {
        PyObject *axes = PyObject_GetAttr(tensor, names[0]);
        if (axes == NULL) goto fail;
        if (!PyTuple_Check(axes)) {
            Py_DECREF(axes);
            Py_CLEAR(result);
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        Py_ssize_t naxes = PyTuple_Size(axes);
        if (naxes < 0) {
            Py_DECREF(axes);
            goto fail;
        }
        /* The kinds gathered into kbuf (strong references; at most naxes <= OS_MAX of them):
         * when they equal the previous tensor's, its signature is reused and no kinds tuple is
         * built; more axes than OS_MAX take a list as before. */
        PyObject *kbuf[OS_MAX];
        Py_ssize_t nk = 0;
        PyObject *kinds = naxes > OS_MAX ? PyList_New(0) : NULL;
        int ok = naxes <= OS_MAX || kinds != NULL;
        for (Py_ssize_t a = 0; ok && a < naxes; a++) {
            PyObject *axis = PyTuple_GetItem(axes, a);
            if (axis == NULL) {
                ok = 0;
                break;
            }
            int is_owner = PyObject_IsInstance(axis, ownership);
            if (is_owner < 0) {
                ok = 0;
                break;
            }
            if (!is_owner) continue;
            PyObject *kind = PyObject_GetAttr(axis, names[1]);
            if (kind == NULL) {
                ok = 0;
            } else if (kinds != NULL) {
                ok = PyList_Append(kinds, kind) == 0;
                Py_DECREF(kind);
            } else {
                kbuf[nk++] = kind; /* nk <= naxes <= OS_MAX */
            }
        }
        Py_DECREF(axes);
        PyObject *kinds_tuple = NULL;
        PyObject *signature = NULL;
        if (ok && kinds == NULL && last_kinds != NULL && po_same_kinds(last_kinds, kbuf, nk)) {
            signature = Py_NewRef(last_signature);
        } else if (ok) {
            kinds_tuple = kinds != NULL ? PyList_AsTuple(kinds) : PyTuple_New(nk);
            for (Py_ssize_t k = 0; kinds == NULL && kinds_tuple != NULL && k < nk; k++) {
                PyTuple_SetItem(kinds_tuple, k, kbuf[k]); /* steals; a fresh tuple: cannot fail */
                kbuf[k] = NULL;
            }
        }
        for (Py_ssize_t k = 0; kinds == NULL && k < nk; k++) Py_XDECREF(kbuf[k]);
        Py_XDECREF(kinds);
        if (signature == NULL && kinds_tuple == NULL) goto fail;
        if (signature == NULL) {
            int owned = PySequence_Contains(kinds_tuple, names[2]);
            signature = owned < 0 ? NULL : Py_BuildValue("(OO)", kinds_tuple, owned ? Py_True : Py_False);
            if (signature != NULL && po_all_exact_strs(kinds_tuple)) {
                Py_XDECREF(last_kinds);
                Py_XDECREF(last_signature);
                last_kinds = Py_NewRef(kinds_tuple);
                last_signature = Py_NewRef(signature);
            }
        }
        Py_XDECREF(kinds_tuple);
        if (signature == NULL) goto fail;
        if (result == NULL && (shared == NULL || signature == shared)) {
            if (shared == NULL) shared = Py_NewRef(signature);
            nshared++;
            Py_DECREF(signature);
            continue;
        }
        if (result == NULL) { /* the first other signature: the map so far, then on as before */
            Py_INCREF(key); /* held: inserting may compare keys (equal hashes), which runs code */
            result = PyDict_New();
            Py_ssize_t again = 0;
            PyObject *done_key, *done_tensor;
            for (Py_ssize_t k = 0; result != NULL && k < nshared; k++) {
                if (!PyDict_Next(items, &again, &done_key, &done_tensor)) {
                    PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
                    Py_CLEAR(result);
                } else if (PyDict_SetItem(result, done_key, shared) < 0) {
                    Py_CLEAR(result);
                }
            }
            if (result == NULL) {
                Py_DECREF(key);
                Py_DECREF(signature);
                goto fail;
            }
            int rc = PyDict_SetItem(result, key, signature);
            Py_DECREF(key);
            Py_DECREF(signature);
            if (rc < 0) goto fail;
            continue;
        }
        int rc = PyDict_SetItem(result, key, signature);
        Py_DECREF(signature);
        if (rc < 0) goto fail;
    }
    if (PyErr_Occurred()) goto fail;
    if (result == NULL && shared != NULL && shared_only) {
        /* every signature is `shared`: (shared, items) when every key is an exact str (then
         * dict.fromkeys(items, shared), made later or never, hashes and compares no key by
         * Python code, so not making it now changes nothing observable); else the map now */
        Py_ssize_t at = 0;
        PyObject *k, *v;
        int exact = 1;
        while (exact && PyDict_Next(items, &at, &k, &v)) exact = PyUnicode_CheckExact(k);
        if (exact) {
            result = PyTuple_Pack(2, shared, items);
            goto done;
        }
    }
    if (result == NULL) /* every signature is `shared` (or no tensor) */
        result = shared == NULL ? PyDict_New()
                                : PyObject_CallMethod((PyObject *)&PyDict_Type, "fromkeys", "OO", items, shared);
    goto done;
fail:
    Py_CLEAR(result);
done:
    Py_XDECREF(shared);
    Py_XDECREF(last_kinds);
    Py_XDECREF(last_signature);
    for (int k = 0; k < 3; k++) Py_XDECREF(names[k]);
    Py_XDECREF(items);
    return result;
}

/* ---- tensor_columns: the planner's per-tensor pass (spec §11.1 step 5 compatibility) ------ */

enum { TC_LAYOUT, TC_SHAPE, TC_DTYPE, TC_ITEMSIZE, TC_LAYER, TC_EXPERT, TC_N };
static const char *const tc_names[TC_N] = {"layout_fingerprint", "global_shape", "dtype", "itemsize", "layer_id",
                                           "expert_id"};

/* 1 when v is a field value tc_differ compares without running Python code: None, an exact str
 * or int, or an exact tuple of exact ints (a validated descriptor's kinds; a value forged after
 * construction, e.g. a str subclass stored with object.__setattr__, would run its __ne__ or
 * __eq__ inside the pass: AUDIT5 F4). */
static int
tc_plain(PyObject *v)
{
    if (v == Py_None || PyUnicode_CheckExact(v) || PyLong_CheckExact(v)) return 1;
    if (!PyTuple_CheckExact(v)) return 0;
    for (Py_ssize_t k = 0, n = PyTuple_Size(v); k < n; k++)
        if (!PyLong_CheckExact(PyTuple_GetItem(v, k))) return 0; /* (in range) */
    return 1;
}

/* 1 when the descriptors differ in one of the compared fields, 0 when not, 2 when some value is
 * not plain (tc_plain: the Python loop decides from this tensor on), -1 error. */
static int
tc_differ(PyObject *a, PyObject *b, PyObject *const *names)
{
    for (int k = 0; k < TC_N; k++) {
        PyObject *x = PyObject_GetAttr(a, names[k]);
        if (x == NULL) return -1;
        PyObject *y = PyObject_GetAttr(b, names[k]);
        if (y == NULL) {
            Py_DECREF(x);
            return -1;
        }
        /* (the same object compares equal without running any code: checked only otherwise,
         * so the values a validated pair shares are not visited) */
        if (x != y && (!tc_plain(x) || !tc_plain(y))) {
            Py_DECREF(x);
            Py_DECREF(y);
            return 2;
        }
        int ne = PyObject_RichCompareBool(x, y, Py_NE);
        Py_DECREF(x);
        Py_DECREF(y);
        if (ne != 0) return ne; /* 1 differs, -1 error */
    }
    return 0;
}

PyDoc_STRVAR(tensor_columns_doc,
"tensor_columns(tensor_ids, source_tensors, target_tensors, signatures)\n"
"--\n\n"
"For the tensor ids (a list, in order) up to the first that cannot be planned: (ndims,\n"
"itemsizes, routed, stop) where ndims[i] = len(target.global_shape), itemsizes[i] =\n"
"target.itemsize, routed[i] = bool(signatures[id][1]) and stop is the index of the first id\n"
"whose source descriptor is missing or differs from the target's in layout_fingerprint,\n"
"global_shape, dtype, itemsize, layer_id or expert_id (compared with !=), or len(tensor_ids).\n"
"The pass also stops at the first id it does not decide without running Python code (an id or\n"
"a compared value not of its exact kind, a map with a key that is not an exact str): the\n"
"caller's loop decides from stop on.\n"
"target_tensors[id] must exist (KeyError otherwise). The ids (and, when read by position,\n"
"the three maps' entries) are read at the start of the call.");

/* Phase 1 of tensor_columns: the n values each of the maps dicts[0:nd] gives to ids[0:n]
 * (ids: the call's private list), read by position rather than looked up, when that is
 * provably the same: each map an exact dict of exactly n entries whose entry i has a key
 * that is ids[i] or an exact str equal to it, every id an exact str. Then every key is an exact
 * str (hashed and compared without Python code) and they are distinct (dict keys; so the ids
 * are distinct), so looking ids[i] up finds entry i and only it. out[m * n + i] := a new
 * reference to map m's value for ids[i]. 1 done; 0 not provable (nothing held, no exception);
 * -1 error. Only pointer reads, exact-type tests and exact-str compares: no Python code runs,
 * so nothing can change the maps between these reads (and the values stay held after). */
static int
tc_by_position(PyObject *ids, Py_ssize_t n, PyObject *const *dicts, int nd, PyObject **out)
{
    Py_ssize_t pos[3] = {0, 0, 0};
    for (int m = 0; m < nd; m++)
        if (!PyDict_CheckExact(dicts[m]) || PyDict_Size(dicts[m]) != n) return 0;
    Py_ssize_t i = 0;
    int ok = 1;
    for (; ok && i < n; i++) {
        PyObject *id = PyList_GetItem(ids, i); /* the private copy: in range */
        if (id == NULL || !PyUnicode_CheckExact(id)) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        for (int m = 0; m < nd; m++) {
            PyObject *key, *value;
            if (!PyDict_Next(dicts[m], &pos[m], &key, &value)) { /* (sizes checked: cannot happen) */
                ok = 0;
                break;
            }
            if (key != id && (!PyUnicode_CheckExact(key) || PyUnicode_Compare(key, id) != 0)) {
                PyErr_Clear(); /* (never set for two exact strs) */
                ok = 0;
                break;
            }
            out[(size_t)m * (size_t)n + (size_t)i] = value; /* borrowed until the loop ends */
        }
    }
    if (!ok) return 0;
    for (int m = 0; m < nd; m++)
        for (Py_ssize_t k = 0; k < n; k++) Py_INCREF(out[(size_t)m * (size_t)n + (size_t)k]);
    return 1;
}

static PyObject *
po_tensor_columns(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *ids_arg, *sources, *targets, *signatures;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:tensor_columns", &PyList_Type, &ids_arg, &PyDict_Type, &sources,
                          &PyDict_Type, &targets, &PyDict_Type, &signatures))
        return NULL;
    static PyObject *cache[TC_N];
    PyObject *names[TC_N] = {NULL};
    PyObject *ids = NULL, *ndims = NULL, *itemsizes = NULL, *routed = NULL, *result = NULL;
    PyObject **held = NULL; /* by position: sources, targets, signatures (n each), strong */
    Py_ssize_t nheld = 0;
    /* the id of the tensor at hand, held: the attribute reads between its lookups may run Python
     * code that empties the private copy of the ids (gc.get_objects() finds it) */
    PyObject *tid = NULL;
    if (po_names(cache, tc_names, TC_N, names) < 0) goto done;
    ids = PySequence_List(ids_arg); /* a private copy */
    ndims = PyList_New(0);
    itemsizes = PyList_New(0);
    routed = PyList_New(0);
    if (ids == NULL || ndims == NULL || itemsizes == NULL || routed == NULL) goto done;
    Py_ssize_t n = PyList_Size(ids), stop = n;
    if (n < 0) goto done;
    /* the maps' entries by position when that is provably what the lookups find (the usual
     * case: ids in the catalog order the maps were built in), rather than three scattered hash
     * probes per tensor */
    if (n > 0) {
        PyObject *maps[3] = {sources, targets, signatures};
        held = mr_alloc_array((size_t)n * 3, sizeof(PyObject *)); /* n < PY_SSIZE_T_MAX / 8 (a list) */
        if (held == NULL) goto done;
        int by_position = tc_by_position(ids, n, maps, 3, held);
        if (by_position < 0) goto done;
        if (by_position) nheld = n;
        else {
            PyMem_Free(held); /* nothing held */
            held = NULL;
            /* the maps are probed by key below: plain ones only (their keys exact strs, which
             * tc_by_position proved on its path; plain_dict.h), and exact-str ids, else the
             * Python loop decides (a forged key's __eq__ or id's __hash__ would run in a probe:
             * AUDIT5 F4) */
            for (int m = 0; m < 3 && stop > 0; m++)
                if (!pd_plain_keys(maps[m])) stop = 0;
        }
    }
    for (Py_ssize_t i = 0; i < stop; i++) {
        Py_XDECREF(tid);
        tid = Py_XNewRef(PyList_GetItem(ids, i));
        if (tid == NULL) goto done;
        if (!nheld && !PyUnicode_CheckExact(tid)) {
            stop = i;
            break;
        }
        PyObject *target, *source, *signature;
        if (nheld) { /* the values the lookups below find (tc_by_position); references held */
            source = Py_NewRef(held[i]);
            target = Py_NewRef(held[(size_t)n + (size_t)i]);
            signature = Py_NewRef(held[2 * (size_t)n + (size_t)i]);
        } else {
            /* the id 8 further on (held by the private copy; a hint only): the ids are
             * scattered and each lookup reads its hash first */
            if (i + 8 < n) __builtin_prefetch(PyList_GetItem(ids, i + 8));
            /* The same order as the Python loop: target_tensors[id] first (KeyError), then the
             * source descriptor (missing: stop), then the signature. */
            target = PyDict_GetItemWithError(targets, tid);
            if (target == NULL) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, tid);
                goto done;
            }
            Py_INCREF(target);
            source = PyDict_GetItemWithError(sources, tid);
            if (source == NULL) {
                Py_DECREF(target);
                if (PyErr_Occurred()) goto done;
                stop = i;
                break;
            }
            Py_INCREF(source);
            signature = NULL; /* looked up after the comparison, as the Python loop */
        }
        int differ = tc_differ(source, target, names);
        Py_DECREF(source);
        if (differ != 0) {
            Py_DECREF(target);
            Py_XDECREF(signature);
            if (differ < 0) goto done;
            stop = i;
            break;
        }
        if (signature == NULL) {
            signature = PyDict_GetItemWithError(signatures, tid);
            if (signature == NULL) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, tid);
                Py_DECREF(target);
                goto done;
            }
            Py_INCREF(signature);
        }
        PyObject *owned = PySequence_GetItem(signature, 1);
        Py_DECREF(signature);
        int is_routed = owned == NULL ? -1 : PyObject_IsTrue(owned);
        Py_XDECREF(owned);
        PyObject *shape = is_routed < 0 ? NULL : PyObject_GetAttr(target, names[TC_SHAPE]);
        if (shape != NULL && !PyTuple_CheckExact(shape)) { /* (its __len__: the Python loop) */
            Py_DECREF(shape);
            Py_DECREF(target);
            stop = i;
            break;
        }
        Py_ssize_t nd = shape == NULL ? -1 : PyObject_Size(shape);
        Py_XDECREF(shape);
        PyObject *itemsize = nd < 0 ? NULL : PyObject_GetAttr(target, names[TC_ITEMSIZE]);
        Py_DECREF(target);
        if (itemsize == NULL) goto done;
        PyObject *nd_obj = PyLong_FromSsize_t(nd);
        int rc = nd_obj == NULL ? -1 : PyList_Append(ndims, nd_obj);
        Py_XDECREF(nd_obj);
        if (rc == 0) rc = PyList_Append(itemsizes, itemsize);
        Py_DECREF(itemsize);
        if (rc == 0) rc = PyList_Append(routed, is_routed ? Py_True : Py_False);
        if (rc < 0) goto done;
    }
    result = Py_BuildValue("(OOOn)", ndims, itemsizes, routed, stop);
done:
    Py_XDECREF(tid);
    if (held != NULL) {
        for (Py_ssize_t k = 0; k < 3 * nheld; k++) Py_DECREF(held[k]);
        PyMem_Free(held);
    }
    for (int k = 0; k < TC_N; k++) Py_XDECREF(names[k]);
    Py_XDECREF(ids);
    Py_XDECREF(ndims);
    Py_XDECREF(itemsizes);
    Py_XDECREF(routed);
    return result;
}

/* ---- distinct_objects: first occurrences by identity --------------------------------------- */

PyDoc_STRVAR(distinct_objects_doc,
"distinct_objects(items)\n"
"--\n\n"
"The items of the list items without repeats of the same object, in order of first\n"
"appearance (a new list). Objects are compared by identity only: no item is read (no hash,\n"
"no __eq__), so list(dict.fromkeys(distinct_objects(items))) == list(dict.fromkeys(items))\n"
"with the same key objects, reading each distinct object once instead of every item.");

/* Positions of the first occurrence of each distinct object of items[0:n] (item pointers,
 * never dereferenced) into first[0:*count]; 0, or -1 with MemoryError. */
static int
po_first_positions(PyObject *items, Py_ssize_t n, Py_ssize_t *first, Py_ssize_t *count)
{
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2; /* n <= PY_SSIZE_T_MAX / sizeof(PyObject *): no overflow */
    uintptr_t *slots = PyMem_Calloc(cap, sizeof(uintptr_t)); /* 0: empty */
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uintptr_t key = (uintptr_t)PyList_GetItem(items, i); /* in range: never NULL */
        size_t mask = cap - 1, j = (size_t)po_hash((uint64_t)key) & mask;
        while (slots[j] != 0 && slots[j] != key) j = (j + 1) & mask;
        if (slots[j] == key) continue;
        slots[j] = key;
        first[k++] = i;
    }
    PyMem_Free(slots);
    *count = k;
    return 0;
}

static PyObject *
po_distinct_objects(PyObject *Py_UNUSED(self), PyObject *items)
{
    if (!PyList_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "distinct_objects: items must be a list");
        return NULL;
    }
    Py_ssize_t n = PyList_Size(items), k = 0;
    if (n < 0) return NULL;
    Py_ssize_t *first = mr_alloc_array(n ? (size_t)n : 1, sizeof(Py_ssize_t));
    PyObject **seen = NULL;
    PyObject *out = NULL;
    if (first == NULL) return NULL;
    /* no Python code runs (and nothing allocates through Python) while the pointers are read */
    if (po_first_positions(items, n, first, &k) < 0) goto done;
    seen = mr_alloc_array(k ? (size_t)k : 1, sizeof(PyObject *));
    if (seen == NULL) goto done;
    for (Py_ssize_t r = 0; r < k; r++) seen[r] = PyList_GetItem(items, first[r]);
    out = PyList_New(k); /* may collect, so run finalizers: check the list is unchanged after */
    if (out == NULL) goto done;
    int same = PyList_Size(items) == n;
    for (Py_ssize_t r = 0; same && r < k; r++) same = PyList_GetItem(items, first[r]) == seen[r];
    if (!same) {
        /* changed meanwhile: again over a private copy, which holds every item */
        Py_CLEAR(out);
        PyObject *copy = PyList_GetSlice(items, 0, PyList_Size(items));
        if (copy != NULL) {
            out = po_distinct_objects(NULL, copy);
            Py_DECREF(copy);
        }
        goto done;
    }
    /* the list still holds them all (nothing ran since the check): take new references */
    for (Py_ssize_t r = 0; r < k; r++) PyList_SetItem(out, r, Py_NewRef(seen[r])); /* in range */
done:
    PyMem_Free(first);
    PyMem_Free(seen);
    return out;
}

/* ---- all_instances: all(isinstance(item, cls) for item in items), prefetching ahead ------- */

PyDoc_STRVAR(all_instances_doc,
"all_instances(items, cls, /)\n"
"--\n\n"
"all(map(isinstance, items, itertools.repeat(cls))) for a list or tuple items: True when every\n"
"item is an instance of cls (an item of exactly type cls is one without a call; any other\n"
"item is asked through isinstance's own C function, in order, stopping at the first that is\n"
"not). Reads the items' types a few items ahead, so scattered objects cost less than one\n"
"memory round trip each. None when items is neither a list nor a tuple.");

#define AI_AHEAD 16 /* items between a prefetch of an object's header and its type test */

static PyObject *
po_all_instances(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "all_instances takes exactly 2 arguments");
        return NULL;
    }
    PyObject *items = args[0], *cls = args[1];
    int is_list = PyList_CheckExact(items);
    if (!is_list && !PyTuple_CheckExact(items)) Py_RETURN_NONE;
    /* A list may change while isinstance runs Python code (a __class__ property, an
     * __instancecheck__ of a metaclass): like all() over its iterator, the length is read
     * again at every step and the item held while it is tested. */
    for (Py_ssize_t i = 0;; i++) {
        Py_ssize_t n = is_list ? PyList_Size(items) : PyTuple_Size(items);
        if (n < 0) return NULL;
        if (i >= n) break;
        if (i + AI_AHEAD < n) {
            PyObject *ahead = is_list ? PyList_GetItem(items, i + AI_AHEAD) : PyTuple_GetItem(items, i + AI_AHEAD);
            if (ahead == NULL) return NULL; /* in range: cannot happen */
            __builtin_prefetch(ahead, 0);
        }
        PyObject *item = is_list ? PyList_GetItem(items, i) : PyTuple_GetItem(items, i);
        if (item == NULL) return NULL;
        if ((PyObject *)Py_TYPE(item) == cls) continue; /* isinstance's own first test */
        Py_INCREF(item);
        int r = PyObject_IsInstance(item, cls);
        Py_DECREF(item);
        if (r < 0) return NULL;
        if (r == 0) Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* ---- same_items: identity of two sequences' items, no item read ---------------------------- */

PyDoc_STRVAR(same_items_doc,
"same_items(first, second, /)\n"
"--\n\n"
"all(map(operator.is_, first, second)) for two lists or tuples (exact types, in any mix) of\n"
"the same length; for two exact dicts, len(first) == len(second) and the same test over their\n"
"keys in order. Compares pointers only: no item is read, hashed or compared, no Python code\n"
"runs. None for any other arguments (another type, a subclass, lists or tuples of different\n"
"lengths): the caller then decides by its own rule.");

static PyObject *
po_same_items(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "same_items takes exactly 2 arguments");
        return NULL;
    }
    PyObject *a = args[0], *b = args[1];
    if (PyDict_CheckExact(a) && PyDict_CheckExact(b)) {
        if (PyDict_Size(a) != PyDict_Size(b)) Py_RETURN_FALSE;
        /* both walked in step; nothing here runs Python code, so neither changes */
        Py_ssize_t pa = 0, pb = 0;
        PyObject *ka, *va, *kb, *vb;
        while (PyDict_Next(a, &pa, &ka, &va)) {
            if (!PyDict_Next(b, &pb, &kb, &vb) || ka != kb) Py_RETURN_FALSE;
        }
        Py_RETURN_TRUE;
    }
    int a_list = PyList_CheckExact(a), b_list = PyList_CheckExact(b);
    if ((!a_list && !PyTuple_CheckExact(a)) || (!b_list && !PyTuple_CheckExact(b))) Py_RETURN_NONE;
    Py_ssize_t n = a_list ? PyList_Size(a) : PyTuple_Size(a);
    Py_ssize_t m = b_list ? PyList_Size(b) : PyTuple_Size(b);
    if (n < 0 || m < 0) return NULL;
    if (n != m) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = a_list ? PyList_GetItem(a, i) : PyTuple_GetItem(a, i);
        PyObject *y = b_list ? PyList_GetItem(b, i) : PyTuple_GetItem(b, i);
        if (x == NULL || y == NULL) return NULL; /* in range: cannot happen */
        if (x != y) Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* ---- tensor catalogs: the planner's id -> descriptor map and its check -------------------- */

PyDoc_STRVAR(catalog_map_doc,
"catalog_map(catalog, /)\n"
"--\n\n"
"{descriptor.tensor_id: descriptor for descriptor in catalog} for a tuple catalog (each id read\n"
"once, then stored, in order, exactly as the comprehension does), reading the descriptors a few\n"
"items ahead. None when catalog is not a tuple or an id is not an exact str.");

#define CM_AHEAD 8 /* descriptors between a prefetch of one and its id read */

static PyObject *
po_catalog_map(PyObject *Py_UNUSED(self), PyObject *catalog)
{
    static PyObject *cache[1];
    static const char *const cm_names[1] = {"tensor_id"};
    PyObject *names[1] = {NULL};
    if (!PyTuple_CheckExact(catalog)) Py_RETURN_NONE;
    if (po_names(cache, cm_names, 1, names) < 0) return NULL;
    Py_ssize_t n = PyTuple_Size(catalog);
    PyObject *out = n < 0 ? NULL : po_hashed_dict(); /* one entry per tensor: po_hashed_dict */
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        if (i + CM_AHEAD < n) {
            PyObject *ahead = PyTuple_GetItem(catalog, i + CM_AHEAD);
            if (ahead != NULL) __builtin_prefetch(ahead, 0);
        }
        PyObject *tensor = PyTuple_GetItem(catalog, i); /* borrowed: the tuple holds it */
        PyObject *tid = tensor == NULL ? NULL : PyObject_GetAttr(tensor, names[0]);
        if (tid != NULL && !PyUnicode_CheckExact(tid)) { /* its hash is user code (AUDIT5 F4) */
            Py_DECREF(tid);
            Py_DECREF(out);
            Py_DECREF(names[0]);
            Py_RETURN_NONE; /* the comprehension decides */
        }
        if (tid == NULL || PyDict_SetItem(out, tid, tensor) < 0) Py_CLEAR(out);
        Py_XDECREF(tid);
    }
    Py_DECREF(names[0]);
    return out;
}

PyDoc_STRVAR(catalog_matches_doc,
"catalog_matches(tensors, catalog, /)\n"
"--\n\n"
"For an exact dict tensors and a tuple catalog of the same length: all(map(is_,\n"
"tensors.values(), catalog)) and all(map(is_, tensors, map(attrgetter('tensor_id'), catalog)))\n"
"and all(map(is_, map(type, tensors), repeat(str))), evaluated in that order with the same\n"
"short-circuits (the ids are read in order up to the first that is not its key). None when the\n"
"arguments are not of those types or lengths.");

static PyObject *
po_catalog_matches(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "catalog_matches takes exactly 2 arguments");
        return NULL;
    }
    PyObject *tensors = args[0], *catalog = args[1];
    if (!PyDict_CheckExact(tensors) || !PyTuple_CheckExact(catalog)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_Size(catalog);
    if (n < 0) return NULL;
    if (PyDict_Size(tensors) != n) Py_RETURN_NONE;
    static PyObject *cache[1];
    static const char *const cm_names[1] = {"tensor_id"};
    PyObject *names[1] = {NULL};
    /* A private copy of the keys in order: reading an id may run code that changes the dict.
     * The Python form iterates the live dict: a change of its size made while reading an id
     * that matched its key raises at the next step (RuntimeError), as here; the planner's map
     * is its own (built by the planner, reached by no other code), so nothing else can change
     * it, and the check goes on over the keys it started with. */
    PyObject *keys = mr_gc_hide(PyDict_Keys(tensors)); /* out of reach of the code an id read runs */
    if (keys == NULL) return NULL;
    PyObject *result = NULL;
    int same = PyList_Size(keys) == n;
    int all_str = 1; /* every key met in 2 is an exact str */
    /* 1: every value is its catalog descriptor (pointers only: no code runs) */
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (same && PyDict_Next(tensors, &pos, &key, &value)) same = value == PyTuple_GetItem(catalog, i++);
    if (same && i != n) same = 0;
    if (PyErr_Occurred()) goto done;
    /* 2: each descriptor's id (read in order, stopping at the first miss) is its key object */
    if (same && po_names(cache, cm_names, 1, names) < 0) goto done;
    for (i = 0; same && i < n; i++) {
        if (i + CM_AHEAD < n) {
            PyObject *ahead = PyTuple_GetItem(catalog, i + CM_AHEAD);
            if (ahead != NULL) __builtin_prefetch(ahead, 0);
        }
        PyObject *tensor = PyTuple_GetItem(catalog, i);
        if (tensor == NULL) goto done;
        Py_INCREF(tensor);
        PyObject *tid = PyObject_GetAttr(tensor, names[0]);
        Py_DECREF(tensor);
        if (tid == NULL) goto done;
        PyObject *expected = PyList_GetItem(keys, i); /* (the list is private: never NULL) */
        same = expected != NULL && tid == expected;
        /* 3's type test of this key, made now that it is at hand (it is tid): 3 runs only when
         * every id is its key, and an object's exact str type (or not) never changes */
        if (same && !PyUnicode_CheckExact(tid)) all_str = 0;
        Py_DECREF(tid);
        if (expected == NULL) goto done; /* never a result with an exception set */
        if (same && PyDict_Size(tensors) != n) {
            PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
            goto done;
        }
    }
    /* 3: every key is an exact str (types only: no code runs; read in 2) */
    same = same && all_str;
    result = Py_NewRef(same ? Py_True : Py_False);
done:
    Py_XDECREF(names[0]);
    Py_DECREF(keys);
    return result;
}

static PyMethodDef planobj_methods[] = {
    {"build_regions", po_build_regions, METH_VARARGS, build_regions_doc},
    {"pack_targets", po_pack_targets, METH_VARARGS, pack_targets_doc},
    {"select_sources", po_select_sources, METH_VARARGS, select_sources_doc},
    {"project_executors", po_project_executors, METH_VARARGS, project_executors_doc},
    {"owner_minimums", po_owner_minimums, METH_VARARGS, owner_minimums_doc},
    {"fragment_columns", po_fragment_columns, METH_VARARGS, fragment_columns_doc},
    {"owner_signatures", po_owner_signatures, METH_VARARGS, owner_signatures_doc},
    {"tensor_columns", po_tensor_columns, METH_VARARGS, tensor_columns_doc},
    {"distinct_objects", po_distinct_objects, METH_O, distinct_objects_doc},
    {"all_instances", (PyCFunction)(void (*)(void))po_all_instances, METH_FASTCALL, all_instances_doc},
    {"same_items", (PyCFunction)(void (*)(void))po_same_items, METH_FASTCALL, same_items_doc},
    {"catalog_map", po_catalog_map, METH_O, catalog_map_doc},
    {"catalog_matches", (PyCFunction)(void (*)(void))po_catalog_matches, METH_FASTCALL, catalog_matches_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_PlanObjects(PyObject *module)
{
    return PyModule_AddFunctions(module, planobj_methods);
}
