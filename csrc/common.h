/* Shared helpers for the C core: Python.h under the limited API, checked
 * arithmetic. Everything here is static inline. */
#ifndef MOONCAKE_RESHARD_COMMON_H
#define MOONCAKE_RESHARD_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>

/* Checked arithmetic: return 0 on success, -1 on overflow. */
static inline int
mr_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int
mr_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

static inline int
mr_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int
mr_add_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* A hint: the head of a small object (a str's header and first characters, an int's size and
 * first digits, a short tuple's items): the lines of obj and obj + 47. pymalloc places blocks at
 * 16-byte steps after a 48-byte pool header, so the 128- and 64-byte size classes (the 71-char
 * placement fragment ids, short fragment ids) always start 48 bytes into a line: the line of obj
 * holds only the reference count and type, the length, hash and characters are on the next
 * (ATTEST43: a hint on obj alone left PyUnicode_GetLength waiting there). obj + 47 is that next
 * line when obj starts 32 or 48 bytes in, else obj's own line (an int of the 32-byte class that
 * starts 16 bytes in ends in it). Only addresses are computed; nothing is read. */
static inline __attribute__((always_inline)) void
mr_prefetch_head(const void *obj, int rw)
{
    if (rw) {
        __builtin_prefetch(obj, 1);
        __builtin_prefetch((const void *)((uintptr_t)obj + 47), 1);
    } else {
        __builtin_prefetch(obj);
        __builtin_prefetch((const void *)((uintptr_t)obj + 47));
    }
}

/* 1 when value is an exact tuple whose items are all exactly of item_type, else 0. Never fails
 * (an exact tuple's items are read in range). */
static inline int
mr_exact_tuple_of(PyObject *value, PyTypeObject *item_type)
{
    if (!PyTuple_CheckExact(value)) return 0;
    const Py_ssize_t n = PyTuple_Size(value);
    for (Py_ssize_t k = 0; k < n; k++) {
        if (Py_TYPE(PyTuple_GetItem(value, k)) != item_type) return 0;
    }
    return 1;
}

/* Home slot of an object pointer in an open-addressing identity table of mask + 1 slots (a
 * power of two). Objects are at least 16-byte aligned, so the low four bits carry nothing; a
 * Fibonacci multiply spreads the rest. One definition for every identity table of the core. */
static inline size_t
mr_ptr_slot(const void *p, size_t mask)
{
    return (size_t)(((uintptr_t)p >> 4) * (uintptr_t)0x9E3779B97F4A7C15ULL) & mask;
}

/* Home slot of an object pointer by a full 64-bit mix (xor-shift, multiply, xor-shift): for
 * tables whose keys' addresses cluster in the low bits a multiply alone leaves unspread. */
static inline size_t
mr_ptr_mix_slot(const void *p, size_t mask)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    return (size_t)x & mask;
}

/* New reference to seq[i]: the list and tuple items directly, anything else through
 * PySequence_GetItem. NULL with an exception (IndexError out of range). */
static inline PyObject *
mr_seq_item(PyObject *seq, Py_ssize_t i)
{
    PyObject *item;
    if (PyList_Check(seq)) item = PyList_GetItem(seq, i);
    else if (PyTuple_Check(seq)) item = PyTuple_GetItem(seq, i);
    else return PySequence_GetItem(seq, i);
    Py_XINCREF(item);
    return item;
}

/* Allocation of n elements of size sz with overflow check; sets MemoryError. */
static inline void *
mr_alloc_array(size_t n, size_t sz)
{
    size_t total;
    if (__builtin_mul_overflow(n, sz, &total)) {
        PyErr_NoMemory();
        return NULL;
    }
    void *p = PyMem_Malloc(total ? total : 1);
    if (p == NULL) PyErr_NoMemory();
    return p;
}

/* n rows of sz bytes starting on a 64-byte (cache line) boundary, zeroed when zero: rows whose
 * size divides 64 then never straddle two lines (a row written or read at random costs one
 * miss, and one prefetch asks for all of it; the allocator's own blocks start 16 bytes into a
 * line). *raw is the block to PyMem_Free (NULL on failure). NULL with MemoryError. */
static inline void *
mr_alloc_lines(size_t n, size_t sz, int zero, void **raw)
{
    size_t total;
    *raw = NULL;
    if (__builtin_mul_overflow(n, sz, &total) || __builtin_add_overflow(total, (size_t)64, &total)) {
        PyErr_NoMemory();
        return NULL;
    }
    void *p = zero ? PyMem_Calloc(1, total) : PyMem_Malloc(total);
    if (p == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    *raw = p;
    return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* A new instance of the heap class cls as the slot of ``object.__new__(cls)`` makes it: the
 * class's tp_alloc, then (CPython >= 3.11) the instance's attribute values laid out for the
 * class's shared keys (cls's own __new__ and __init__ are not called); NULL with an exception
 * (`who` names the caller). Abstract classes, which object.__new__ refuses, are allocated with
 * their tp_alloc alone. Attributes stored with PyObject_GenericSetAttr in the class's field
 * order stay in the key-sharing storage (no per-instance key table). */
static inline PyObject *
mr_new_object(PyObject *cls, const char *who)
{
    if (!PyType_Check(cls)) {
        PyErr_Format(PyExc_TypeError, "%s: class expected", who);
        return NULL;
    }
    if (PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_IS_ABSTRACT) {
        allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
        if (alloc == NULL) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s: class has no allocator", who);
            return NULL;
        }
        return alloc((PyTypeObject *)cls, 0);
    }
    newfunc make = (newfunc)PyType_GetSlot(&PyBaseObject_Type, Py_tp_new);
    if (make == NULL) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_SystemError, "%s: object has no tp_new", who);
        return NULL;
    }
    PyObject *no_args = PyTuple_New(0);
    if (no_args == NULL) return NULL;
    PyObject *obj = make((PyTypeObject *)cls, no_args, NULL);
    Py_DECREF(no_args);
    return obj;
}

/* mr_new_object(cls) and, in *dict, a new reference to the instance's own, still empty
 * instance dict (PyObject_GenericGetDict); NULL with an exception (*dict NULL).
 *
 * That dict is a key-sharing ("split") dict using the class's cached keys: filled with
 * PyDict_SetItem in the class's field order (the order the dataclass __init__ stores them, so
 * the order the shared keys hold) it costs about half of a dict built apart and installed as
 * __dict__ (a combined dict; measured on CPython 3.11: 200 against 464 bytes for 16 fields),
 * and filling it directly is faster than building a temporary dict (no key table to build or
 * free). Other orders or extra keys still give exactly the items stored, in store order. */
static inline PyObject *
mr_new_instance(PyObject *cls, PyObject **dict, const char *who)
{
    *dict = NULL;
    PyObject *obj = mr_new_object(cls, who);
    if (obj == NULL) return NULL;
    PyObject *own = PyObject_GenericGetDict(obj, NULL);
    if (own == NULL) {
        Py_DECREF(obj);
        return NULL;
    }
    if (!PyDict_Check(own)) {
        PyErr_Format(PyExc_TypeError, "%s: instance __dict__ is not a dict", who);
        Py_DECREF(own);
        Py_DECREF(obj);
        return NULL;
    }
    *dict = own;
    return obj;
}

/* A new instance of the heap class cls whose instance dict is dict (``object.__new__(cls)``
 * then ``__dict__ = dict``: dict itself becomes the instance dict, with its own key table);
 * NULL with an exception (`who` names the caller). mr_new_instance gives smaller instances:
 * copying dict into the instance's own dict item by item costs more than building the values
 * there directly (about 17 ns a field on CPython 3.11, a 7-12 % slower contract binding), so
 * this helper keeps the installed dict and callers that care about size fill mr_new_instance's
 * dict instead. */
static inline PyObject *
mr_instance_with_dict(PyObject *cls, PyObject *dict, const char *who)
{
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s: class has no allocator", who);
        return NULL;
    }
    PyObject *obj = alloc((PyTypeObject *)cls, 0);
    if (obj == NULL) return NULL;
    if (PyObject_GenericSetDict(obj, dict, NULL) < 0) {
        Py_DECREF(obj);
        return NULL;
    }
    return obj;
}

/* ---- Keeping acyclic library objects out of the cyclic garbage collector ------------------
 *
 * CPython's cyclic collector scans every tracked container on each full collection; the
 * planner and binder create millions of frozen instances that can never be part of a cycle,
 * and scanning them dominated whole pipelines (measured: 8.6 of 11.8 s of one stage at
 * Kimi size). An instance whose field values are all "inert" is untracked once filled.
 *
 * A value is inert when no reference path from it can lead back to an object holding it
 * without forging (object.__setattr__ on a frozen instance):
 *   - an object of a type without GC support (int, str, bytes, float, None, bool, ...);
 *   - an exact tuple whose items are all inert (a tracked one is untracked here: CPython does
 *     the same at its first collection of the tuple);
 *   - any other untracked object except a dict: our untracked instances (inert fields, frozen
 *     classes), tuples, and objects of C types that never track them (a cycle through those
 *     is never collectable anyway). A dict re-tracks itself when a tracked value is inserted,
 *     so an untracked dict (atomic content so far) may still take part in a cycle later.
 * Everything else (lists, sets, dicts, tracked instances, user objects) is not inert.
 *
 * Forging a cycle through an untracked instance (object.__setattr__) makes it uncollectable
 * (a leak, never a crash): the collector treats references from untracked objects as
 * external. Callers untrack only exact library classes they built, never user subclasses. */
#define MR_INERT_DEPTH 4

/* Bulk builders (planned regions, restored pickles) untrack their results only from this many
 * objects on: a smaller result costs the collector little, and checking its fields would cost
 * more than the collections it saves (measured on the contract benchmark: 2-5 % of planning and
 * restore for 8-operation plans). */
#define MR_GC_BULK_MIN 1024

static inline int mr_gc_inert(PyObject *value, int depth);

/* Items of an exact tuple all inert (then the tuple is untracked): 1, else 0. Never fails. */
static inline int
mr_gc_inert_tuple(PyObject *tuple, int depth)
{
    if (!PyObject_GC_IsTracked(tuple)) return 1;
    if (depth <= 0) return 0;
    Py_ssize_t n = PyTuple_Size(tuple);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(tuple, i); /* borrowed; in range */
        if (item == NULL) {
            PyErr_Clear();
            return 0;
        }
        if (!mr_gc_inert(item, depth - 1)) return 0;
    }
    PyObject_GC_UnTrack(tuple);
    return 1;
}

/* 1 when value is inert (see above), else 0. Runs no Python code; never fails. */
static inline int
mr_gc_inert(PyObject *value, int depth)
{
    PyTypeObject *type = Py_TYPE(value);
    /* the usual field values first, by type identity (no call) */
    if (type == &PyUnicode_Type || type == &PyLong_Type || value == Py_None) return 1;
    if (type == &PyTuple_Type) return mr_gc_inert_tuple(value, depth);
    if (!(PyType_GetFlags(type) & Py_TPFLAGS_HAVE_GC)) return 1;
    if (PyDict_Check(value)) return 0;
    return !PyObject_GC_IsTracked(value);
}

/* Untrack obj, a frozen instance of an exact library class the caller built and filled,
 * and dict, its instance dict (may be NULL when none was materialized), when every value in
 * dict is inert (tuples among them are untracked on the way); otherwise leave both tracked.
 * Call it after the last field is stored: a dict re-tracks itself when a tracked value is
 * inserted. Returns 1 untracked, 0 left tracked; runs no Python code, never fails. */
static inline int
mr_untrack_inert(PyObject *obj, PyObject *dict)
{
    if (dict != NULL) {
        if (!PyDict_Check(dict)) return 0;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(dict, &pos, &key, &value)) {
            if (!mr_gc_inert(value, MR_INERT_DEPTH)) return 0;
        }
        PyObject_GC_UnTrack(dict);
    }
    /* (PyObject_GC_UnTrack itself must only see objects of GC types) */
    if (PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    return 1;
}

/* mr_untrack_inert for an instance whose n field values (values) the caller has just stored,
 * reading them from values instead of the dict. dict is the instance dict, or NULL when none
 * was materialized: then, when a value is a collector-type object other than a tuple, the dict
 * is materialized here and untracked too (a dict made later from such values would be born
 * tracked); with only atomic values and untracked tuples a later dict is born untracked.
 * An instance without a __dict__ (a C-owned layout) is judged by its values alone.
 * Returns 1 untracked, 0 left tracked, -1 with an exception (materializing failed). */
static inline int
mr_untrack_values(PyObject *obj, PyObject *dict, PyObject *const *values, Py_ssize_t n)
{
    int containers = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *value = values[k];
        if (!mr_gc_inert(value, MR_INERT_DEPTH)) return 0;
        PyTypeObject *type = Py_TYPE(value);
        if (type != &PyUnicode_Type && type != &PyLong_Type && type != &PyTuple_Type && value != Py_None
            && (PyType_GetFlags(type) & Py_TPFLAGS_HAVE_GC))
            containers = 1;
    }
    if (dict != NULL) {
        PyObject_GC_UnTrack(dict);
    } else if (containers) {
        PyObject *own = PyObject_GenericGetDict(obj, NULL);
        if (own == NULL) {
            /* an instance without a __dict__ (a C-owned layout, layout.h): its fields are all
             * there is, judged above */
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
        } else {
            if (PyDict_Check(own)) PyObject_GC_UnTrack(own);
            Py_DECREF(own);
        }
    }
    if (PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    return 1;
}

/* ---- Bound plans (binder.c bind_regions) ------------------------------------------------
 *
 * An attestation stays tracked: the library caches values derived from it on it
 * (``_derived_cache``: executors holding the attestation, and on binding's per-part path the
 * bound rows, whose bound fragments hold it), so it can be on legitimate cycles. A bound
 * fragment is on no cycle when nothing its attestation reaches holds it: the attestation's
 * instance dict has only its known keys, its placement and evidence are untracked (built
 * inert: nothing a user can mutate below them) and its derived cache holds no bound row.
 * Then the bound fragment (placement, binding and fences inert, owner None or inert) is
 * untracked, and a region whose source and target are untracked (or inert) is untracked too:
 * an object holding them can reach itself through them only if the attestation's closure
 * held that object, which only forging (object.__setattr__, editing __dict__) achieves. */
#define MR_ATT_MEMO 4096

typedef struct {
    const void *key[MR_ATT_MEMO];
    signed char closed[MR_ATT_MEMO];
} mr_att_memo;

/* 1 when the attestation's closure holds no bound fragment of bound_cls (see above), else 0. */
static inline int
mr_attestation_closed(PyObject *attestation, PyObject *bound_cls)
{
    static const char *const known[] = {"placement", "evidence", "_placement_by_id", "_binding_by_id",
                                        "_placement_dict", "_binding_dict", "_derived_cache", "_attested_view"};
    PyObject *state = PyObject_GenericGetDict(attestation, NULL);
    if (state == NULL) {
        PyErr_Clear();
        return 0;
    }
    int closed = PyDict_CheckExact(state);
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    int seen_placement = 0, seen_evidence = 0;
    while (closed && PyDict_Next(state, &pos, &key, &value)) {
        int which = -1;
        if (PyUnicode_CheckExact(key)) {
            for (int k = 0; k < 8 && which < 0; k++) {
                if (PyUnicode_CompareWithASCIIString(key, known[k]) == 0) which = k;
            }
        }
        if (which < 0) {
            closed = 0;
        } else if (which <= 1) {
            /* placement / evidence: an untracked instance (never a dict) */
            if (PyDict_Check(value) || !(PyType_GetFlags(Py_TYPE(value)) & Py_TPFLAGS_HAVE_GC) ||
                PyObject_GC_IsTracked(value))
                closed = 0;
            if (which == 0) seen_placement = 1;
            else seen_evidence = 1;
        } else if (which == 6) {
            /* (placement, evidence, {name: derived value}): no value may be bound rows */
            PyObject *values = PyTuple_CheckExact(value) && PyTuple_Size(value) == 3 ? PyTuple_GetItem(value, 2) : NULL;
            if (values == NULL || !PyDict_CheckExact(values)) {
                closed = 0;
                continue;
            }
            Py_ssize_t at = 0;
            PyObject *name, *derived;
            while (closed && PyDict_Next(values, &at, &name, &derived)) {
                /* a tuple of tuples (rows), or a dict of them (snapshots by worker): no item of
                 * a row may be a bound fragment; anything else is not accepted */
                Py_ssize_t group = 0;
                PyObject *group_key, *rows = derived;
                if (PyDict_CheckExact(derived) && !PyDict_Next(derived, &group, &group_key, &rows)) continue;
                for (;;) {
                    if (!PyTuple_CheckExact(rows)) {
                        closed = 0;
                        break;
                    }
                    Py_ssize_t n = PyTuple_Size(rows);
                    for (Py_ssize_t i = 0; i < n && closed; i++) {
                        PyObject *row = PyTuple_GetItem(rows, i);
                        if (row == NULL || (PyObject *)Py_TYPE(row) == bound_cls) {
                            closed = 0;
                        } else if (PyTuple_CheckExact(row)) {
                            Py_ssize_t width = PyTuple_Size(row);
                            for (Py_ssize_t j = 0; j < width; j++) {
                                PyObject *item = PyTuple_GetItem(row, j);
                                if (item == NULL || (PyObject *)Py_TYPE(item) == bound_cls) closed = 0;
                            }
                        }
                    }
                    if (!closed || !PyDict_CheckExact(derived) || !PyDict_Next(derived, &group, &group_key, &rows))
                        break;
                }
            }
        }
    }
    Py_DECREF(state);
    PyErr_Clear();
    return closed && seen_placement && seen_evidence;
}

/* The field array of an instance of a C-owned value layout (layout.h mr_layout_object: the
 * object header, then one pointer per field; layout.h asserts the offset). Only for an object
 * whose exact class a layout check accepted. */
static inline PyObject *const *
mr_layout_slots(PyObject *obj)
{
    return (PyObject *const *)(void *)((char *)obj + sizeof(PyObject));
}

/* BoundWeightFragment's field count and its attestation's index in its C-owned layout (layout.h
 * MR_BF_N, MR_BF_ATTESTATION). */
#define MR_BOUND_NFIELDS 7
#define MR_BOUND_ATTESTATION 6

/* mr_attestation_closed(attestation, bound_cls), decided once per attestation pointer in the pass
 * memo serves (see mr_untrack_bound; memo zeroed when the pass begins). An attestation is kept in
 * the first free or own slot of the MR_ATT_WAYS from its home, else replaces its home entry:
 * direct-mapped, the few attestations sharing a slot took turns there (Kimi 6: 176 attestations,
 * 3,622 decisions, each a scan of the attestation's dict). */
#define MR_ATT_WAYS 4

static inline int
mr_att_memo_closed(mr_att_memo *memo, PyObject *attestation, PyObject *bound_cls)
{
    size_t home = ((uintptr_t)attestation >> 4) % MR_ATT_MEMO, slot = home;
    for (int k = 0; k < MR_ATT_WAYS; k++) {
        size_t at = (home + (size_t)k) % MR_ATT_MEMO;
        if (memo->key[at] == attestation) return memo->closed[at];
        if (memo->key[at] == NULL) {
            slot = at;
            break;
        }
    }
    memo->key[slot] = attestation;
    memo->closed[slot] = (signed char)mr_attestation_closed(attestation, bound_cls);
    return memo->closed[slot];
}

/* Untracks bound (exactly bound_cls) when its fields are inert but for its attestation, whose
 * closure must hold no bound fragment (memo: per attestation pointer, valid for one pass over
 * objects kept alive by the caller). layout: nonzero when bound_cls is a C-owned layout of
 * BoundWeightFragment's fields (layout.h mr_bound_layout accepted it): its fields are read from
 * the instance (an empty attestation is a missing key: stays tracked), else from its instance
 * dict (none: stays tracked). */
static inline void
mr_untrack_bound(PyObject *bound, PyObject *bound_cls, int layout, PyObject *attestation_name, mr_att_memo *memo)
{
    if ((PyObject *)Py_TYPE(bound) != bound_cls || !PyObject_GC_IsTracked(bound)) return;
    if (layout) {
        PyObject *const *fields = mr_layout_slots(bound);
        PyObject *attestation = fields[MR_BOUND_ATTESTATION];
        int inert = attestation != NULL;
        if (inert && attestation != Py_None) inert = mr_att_memo_closed(memo, attestation, bound_cls);
        for (Py_ssize_t k = 0; inert && k < MR_BOUND_NFIELDS; k++) {
            PyObject *value = fields[k];
            if (value != NULL && value != attestation && !mr_gc_inert(value, MR_INERT_DEPTH)) inert = 0;
        }
        if (inert) PyObject_GC_UnTrack(bound);
        return;
    }
    PyObject *dict = PyObject_GenericGetDict(bound, NULL);
    if (dict == NULL) {
        PyErr_Clear();
        return;
    }
    PyObject *attestation = PyDict_CheckExact(dict) ? PyDict_GetItemWithError(dict, attestation_name) : NULL;
    int inert = attestation != NULL;
    /* the attestation first: on binding's per-part path (rows cached) every bound fragment of
     * the attestation stays tracked, decided once */
    if (inert && attestation != Py_None) inert = mr_att_memo_closed(memo, attestation, bound_cls);
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (inert && PyDict_Next(dict, &pos, &key, &value)) {
        if (value != attestation && !mr_gc_inert(value, MR_INERT_DEPTH)) inert = 0;
    }
    if (inert) {
        PyObject_GC_UnTrack(dict);
        PyObject_GC_UnTrack(bound);
    }
    Py_DECREF(dict);
    PyErr_Clear();
}

/* The untracking passes over a plan's regions: the count n of regions (an exact list, *list
 * set, or tuple of at least MR_GC_BULK_MIN items: as the other bulk builders, a smaller plan
 * costs the collector less than the pass) with *memo a zeroed attestation memo to PyMem_Free
 * after the pass; 0 (and *memo NULL) when there is nothing to do. Never fails (an error, never
 * expected, is cleared). */
static inline Py_ssize_t
mr_untrack_regions_begin(PyObject *regions, PyObject *bound_cls, int *list, mr_att_memo **memo)
{
    *memo = NULL;
    *list = PyList_CheckExact(regions);
    if (bound_cls == NULL || (!*list && !PyTuple_CheckExact(regions))) return 0;
    Py_ssize_t n = *list ? PyList_Size(regions) : PyTuple_Size(regions);
    if (n < MR_GC_BULK_MIN) return 0;
    *memo = PyMem_Calloc(1, sizeof(mr_att_memo));
    if (*memo == NULL) {
        PyErr_Clear();
        return 0;
    }
    return n;
}

/* One untracking pass over a plan's regions (mr_untrack_bound_regions, layout.h
 * mr_untrack_layout_regions): mr_region_pass_begin, mr_region_pass_next until it gives NULL,
 * mr_region_pass_end. */
typedef struct {
    PyObject *regions; /* borrowed: held by the caller for the pass */
    Py_ssize_t n, i;
    int list;
    mr_att_memo *memo;
} mr_region_pass;

/* The pass over mr_untrack_regions_begin's count of regions (none: nothing to do). */
static inline void
mr_region_pass_begin(mr_region_pass *pass, PyObject *regions, PyObject *bound_cls)
{
    pass->regions = regions;
    pass->i = 0;
    pass->n = mr_untrack_regions_begin(regions, bound_cls, &pass->list, &pass->memo);
}

/* The next region (borrowed), or NULL after the last one or on an error (never expected; the
 * list shrank: mr_region_pass_end clears it). */
static inline PyObject *
mr_region_pass_next(mr_region_pass *pass)
{
    if (pass->i >= pass->n) return NULL;
    Py_ssize_t i = pass->i++;
    return pass->list ? PyList_GetItem(pass->regions, i) : PyTuple_GetItem(pass->regions, i);
}

static inline void
mr_region_pass_end(mr_region_pass *pass)
{
    PyMem_Free(pass->memo);
    pass->memo = NULL;
    PyErr_Clear();
}

/* A region's bound source and target (borrowed) offered to mr_untrack_bound, each held for
 * the call. */
static inline void
mr_untrack_bound_pair(PyObject *source, PyObject *target, PyObject *bound_cls, int bound_layout,
                      PyObject *attestation_name, mr_att_memo *memo)
{
    Py_INCREF(source);
    Py_INCREF(target);
    mr_untrack_bound(source, bound_cls, bound_layout, attestation_name, memo);
    mr_untrack_bound(target, bound_cls, bound_layout, attestation_name, memo);
    Py_DECREF(source);
    Py_DECREF(target);
}

/* bind_regions' regions (a list it built and holds; or a restored plan's tuple): untrack each region's bound source and
 * target (see mr_untrack_bound; bound_layout: its layout), then the region when all its fields are inert. Runs no
 * Python code; never fails (errors, never expected, are cleared and stop nothing but untracking). */
static inline void
mr_untrack_bound_regions(PyObject *regions, PyObject *bound_cls, int bound_layout, PyObject *source_name,
                         PyObject *target_name, PyObject *attestation_name)
{
    if (PyErr_Occurred()) return;
    mr_region_pass pass;
    mr_region_pass_begin(&pass, regions, bound_cls);
    PyObject *region;
    while ((region = mr_region_pass_next(&pass)) != NULL) {
        PyObject *dict = PyObject_GenericGetDict(region, NULL);
        if (dict == NULL) {
            /* no instance dict (a C-owned layout: layout.h mr_untrack_layout_regions) */
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) break;
            PyErr_Clear();
            continue;
        }
        if (PyDict_CheckExact(dict)) {
            PyObject *source = PyDict_GetItemWithError(dict, source_name);
            PyObject *target = source == NULL ? NULL : PyDict_GetItemWithError(dict, target_name);
            if (target != NULL) {
                mr_untrack_bound_pair(source, target, bound_cls, bound_layout, attestation_name, pass.memo);
                (void)mr_untrack_inert(region, dict);
            }
        }
        Py_DECREF(dict);
        if (PyErr_Occurred()) break;
    }
    mr_region_pass_end(&pass);
}

/* A module function (METH_VARARGS) run with the automatic collector off, whatever the caller's
 * pause became: a C pass holding borrowed references across allocations must not run gc
 * callbacks or finalizers (user code), and a profile or trace hook can call gc.enable() between
 * two passes (AUDIT5 F8, tests/test_audit25_collector.py). Defines ``pass##_paused``; restores
 * the state it found. */
#define MR_COLLECTOR_PAUSED(pass)                                       \
    static PyObject *pass##_paused(PyObject *module, PyObject *args)    \
    {                                                                   \
        const int collector_was_enabled = PyGC_Disable();               \
        PyObject *result = pass(module, args);                          \
        if (collector_was_enabled) PyGC_Enable();                       \
        return result;                                                  \
    }

/* MR_COLLECTOR_PAUSED for a METH_VARARGS pass called as METH_FASTCALL: defines
 * ``pass##_paused_fast``, which pauses the collector before the argument tuple exists and then
 * builds it. A METH_VARARGS call allocates that tuple after a profile hook's c_call event and
 * before the pass's pause, and a fresh tuple (none on the free list) can run the collector there:
 * inside the call as a profiler sees it (tests/test_lead29_collector_memos.py). */
#define MR_COLLECTOR_PAUSED_FAST(pass)                                                              \
    static PyObject *pass##_paused_fast(PyObject *module, PyObject *const *args, Py_ssize_t nargs) \
    {                                                                                              \
        const int collector_was_enabled = PyGC_Disable();                                          \
        PyObject *result = NULL;                                                                   \
        PyObject *tuple = PyTuple_New(nargs);                                                      \
        if (tuple != NULL) {                                                                       \
            int filled = 1;                                                                        \
            for (Py_ssize_t i = 0; i < nargs && filled; i++)                                       \
                filled = PyTuple_SetItem(tuple, i, Py_NewRef(args[i])) == 0;                       \
            if (filled) result = pass(module, tuple);                                              \
            Py_DECREF(tuple);                                                                      \
        }                                                                                          \
        if (collector_was_enabled) PyGC_Enable();                                                  \
        return result;                                                                             \
    }

/* PyArg_ParseTuple for a METH_FASTCALL pass's positional arguments, for formats of 'O', 'O!',
 * 'p', '|' and a ':name' end only. When every argument is plainly accepted (a count within the
 * format's range, each 'O!' argument of its type or a subtype, each 'p' argument exactly True or
 * False: no conversion that can run Python code) the outputs are stored here, without the
 * argument tuple and PyArg_ParseTuple's general machinery; otherwise the tuple is built and
 * PyArg_VaParse converts (or raises) exactly as the METH_VARARGS pass did. Borrowed outputs
 * stay alive: the caller holds the vector's references for the call. */
static inline int
mr_parse_vector(PyObject *const *args, Py_ssize_t nargs, const char *format, ...)
{
    Py_ssize_t min_args = -1, max_args = 0;
    for (const char *f = format; *f != '\0' && *f != ':'; f++) {
        if (*f == '|') min_args = max_args;
        else if (*f == 'O' || *f == 'p') max_args++;
    }
    if (min_args < 0) min_args = max_args;
    va_list va;
    int plain = nargs >= min_args && nargs <= max_args;
    if (plain) {
        va_start(va, format);
        Py_ssize_t i = 0;
        for (const char *f = format; plain && i < nargs && *f != '\0' && *f != ':'; f++) {
            if (*f == 'O') {
                if (f[1] == '!') {
                    PyTypeObject *type = va_arg(va, PyTypeObject *);
                    PyObject **out = va_arg(va, PyObject **);
                    f++;
                    if (Py_TYPE(args[i]) == type || PyType_IsSubtype(Py_TYPE(args[i]), type)) *out = args[i];
                    else plain = 0;
                }
                else {
                    PyObject **out = va_arg(va, PyObject **);
                    *out = args[i];
                }
                i++;
            }
            else if (*f == 'p') {
                int *out = va_arg(va, int *);
                if (args[i] == Py_True) *out = 1;
                else if (args[i] == Py_False) *out = 0;
                else plain = 0;
                i++;
            }
            else if (*f != '|') {
                plain = 0; /* a format this helper does not convert */
            }
        }
        va_end(va);
        if (plain) return 1;
    }
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL) return 0;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (PyTuple_SetItem(tuple, i, Py_NewRef(args[i])) != 0) {
            Py_DECREF(tuple);
            return 0;
        }
    }
    va_start(va, format);
    const int parsed = PyArg_VaParse(tuple, format, va);
    va_end(va);
    Py_DECREF(tuple);
    return parsed;
}

/* A METH_FASTCALL | METH_KEYWORDS entry for a pass that was METH_VARARGS (arguments by
 * mr_parse_vector): keywords are refused with METH_VARARGS' message (a plain METH_FASTCALL
 * function names itself by its qualified name there). */
static inline int
mr_refuse_keywords(const char *name, PyObject *kwnames)
{
    if (kwnames == NULL || PyTuple_Size(kwnames) == 0) return 0;
    PyErr_Format(PyExc_TypeError, "%.200s() takes no keyword arguments", name);
    return -1;
}

/* MR_COLLECTOR_PAUSED for such a pass: defines ``pass##_paused`` (the keywords refused first, as
 * the METH_VARARGS call did, before the pause). */
#define MR_COLLECTOR_PAUSED_VECTOR(pass)                                                       \
    static PyObject *pass##_paused(PyObject *module, PyObject *const *args, Py_ssize_t nargs, \
                                   PyObject *kwnames)                                         \
    {                                                                                          \
        if (mr_refuse_keywords(#pass, kwnames) < 0) return NULL;                               \
        const int collector_was_enabled = PyGC_Disable();                                      \
        PyObject *result = pass(module, args, nargs);                                            \
        if (collector_was_enabled) PyGC_Enable();                                              \
        return result;                                                                         \
    }

/* The same entry without the pause: defines ``pass##_vector``. */
#define MR_VECTOR_ENTRY(pass)                                                                  \
    static PyObject *pass##_vector(PyObject *module, PyObject *const *args, Py_ssize_t nargs, \
                                   PyObject *kwnames)                                         \
    {                                                                                          \
        if (mr_refuse_keywords(#pass, kwnames) < 0) return NULL;                               \
        return pass(module, args, nargs);                                                      \
    }

/* MR_COLLECTOR_PAUSED for a METH_VARARGS | METH_KEYWORDS function: defines ``pass##_paused``. */
#define MR_COLLECTOR_PAUSED_KW(pass)                                                   \
    static PyObject *pass##_paused(PyObject *module, PyObject *args, PyObject *kwargs) \
    {                                                                                  \
        const int collector_was_enabled = PyGC_Disable();                              \
        PyObject *result = pass(module, args, kwargs);                                 \
        if (collector_was_enabled) PyGC_Enable();                                      \
        return result;                                                                 \
    }

#endif
