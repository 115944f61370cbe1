/* binder: runtime binding and executor projection kernels (issue 5).
 *
 * Three accelerators of _planner/binding.py and weight/binding.py. Each one either returns the
 * exact value the Python code it replaces would produce, or None ("not decided here"): the
 * caller then runs that Python code, which raises the contract's message for the first
 * failure in its own order. So C never decides a rejection, never reorders checks, and never
 * runs user code: it accepts only exact classes (given by the caller), exact str and int
 * values and exact tuples and dicts, and anything else falls back.
 *
 * - bind_views: the per-fragment checks of one binding against its placement part
 *   (positional pairing, byte size, local shape, itemsize, canonical strides) and its views.
 * - attest: a RuntimeBindingAttestation (with its owner-free evidence) of a binding that
 *   validate_runtime_binding has just accepted.
 * - attested_executors: the attested snapshots per worker and one executor per worker.
 * - bound_fragments: the bound fragments of an attested part (binding step 7).
 * - bound_fragments_ordered: those of every attested part of a side, allocated in the order the
 *   operations first use them (the later passes follow op.target / op.source in that order).
 * - bind_regions: the bound operations of a logical plan (binding step 8).
 * - address_ranges_clear: the runtime address-range rule when no view overlaps (§11.8).
 * - attest_binding: validate_runtime_binding then attest, in one call (bind_views, the range
 *   rule and attest on an exact binding whose identity equals its placement's).
 * - attested_rows: the expected snapshot states of an attestation (offered to the revalidation's
 *   attested views).
 *
 * Instances are allocated through the class's tp_alloc and receive one fresh field dict, as
 * planobj.c does for regions: the classes are frozen dataclasses whose __post_init__ checks
 * the caller has just proven (or which have none).
 *
 * The functions are bound to a capsule (their `self`) holding the interned attribute names and
 * field-dict templates, created once per module object at init: no global PyObject. */
#include "binder.h"
#include "layout.h"
#include "plain_dict.h"
#include "gctrack.h"
#include "physical_kernels.h"
#include "region_kernels.h"
#include "scan_carry.h"

enum {
    /* RuntimeFragmentSnapshot fields, in field order (BD_NSNAP of them). */
    N_PFID,
    N_FID,
    N_TENSOR_ID,
    N_GLOBAL_OFFSET,
    N_LOCAL_SHAPE,
    N_ADDRESS,
    N_NBYTES,
    N_WORKER_ID,
    N_ENDPOINT,
    N_DEVICE,
    N_ITEMSIZE,
    N_STRIDES,
    N_STORAGE_ADDRESS,
    N_STORAGE_NBYTES,
    N_STORAGE_OFFSET,
    N_LEASE_GENERATION,
    /* RuntimeBindingEvidence fields, in field order (fragments last). */
    N_RESOURCE_ID,
    N_REVISION,
    N_PLACEMENT_ID,
    N_PLACEMENT_DIGEST,
    N_INSTANCE_ID,
    N_PARTICIPANT_ID,
    N_GENERATION,
    N_LEASE_ID,
    N_FRAGMENTS,
    /* RuntimeBindingAttestation state. */
    N_PLACEMENT,
    N_EVIDENCE,
    N_PLACEMENT_BY_ID,
    N_BINDING_BY_ID,
    N_PLACEMENT_DICT,
    N_BINDING_DICT,
    /* ExecutorTransferPlan fields not named above. */
    N_RUNTIME_LEASE_ID,
    N_RANK,
    N_FRAGMENT_IDS,
    N_FRAGMENT_SNAPSHOTS,
    N_ATTESTATION,
    /* TransferRegion fields not named above (tensor_id first, then source and target). */
    N_SOURCE,
    N_TARGET,
    N_OVERLAP_OFFSET,
    N_OVERLAP_SHAPE,
    N_SOURCE_BASE_OFFSET,
    N_TARGET_BASE_OFFSET,
    N_INNER_BYTES,
    N_OUTER_LOOP_COUNTS,
    N_SOURCE_STRIDES,
    N_TARGET_STRIDES,
    /* BoundWeightFragment fields not named above. */
    N_BINDING,
    /* Others. */
    N_OWNER,
    /* logical_target_cover: placement part, executor and rank fields not named above. */
    N_TENSORS,
    N_PLACEMENT_FRAGMENT_IDS,
    N_DP,
    N_TP,
    N_PP,
    N_EP,
    /* bind_regions' spec 12.6 accept path: placement fragment field not named above. */
    N_ALIASES,
    /* logical_routes_plain: placement fragment field not named above. */
    N_PIPELINE_STAGE_ID,
    N_COUNT
};

#define BD_NSNAP 16

/* previous = value, releasing the old reference (Py_XSETREF is not in the limited API). */
#define BD_SETREF(target, value)  \
    do {                          \
        PyObject *old_ = (target); \
        (target) = (value);       \
        Py_XDECREF(old_);         \
    } while (0)

static const char *const bd_names[N_COUNT] = {
    "placement_fragment_id", "fragment_id", "tensor_id", "global_offset", "local_shape", "address",
    "nbytes", "worker_id", "endpoint", "device", "itemsize", "strides_bytes", "storage_address",
    "storage_nbytes", "storage_offset_bytes", "lease_generation",
    "resource_id", "revision", "placement_id", "placement_digest", "instance_id", "participant_id",
    "generation", "lease_id", "fragments",
    "placement", "evidence", "_placement_by_id", "_binding_by_id", "_placement_dict", "_binding_dict",
    "runtime_lease_id", "rank", "fragment_ids", "fragment_snapshots", "attestation",
    "source", "target", "overlap_offset", "overlap_shape", "source_base_offset", "target_base_offset",
    "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
    "binding",
    "owner",
    "tensors", "placement_fragment_ids", "dp", "tp", "pp", "ep",
    "aliases",
    "pipeline_stage_id",
};

/* Field dicts of the instances built here are copies of presized templates (keys in field
 * order, values None) whose values are then replaced: one allocation, no resize. */
enum { T_SNAPSHOT, T_EVIDENCE, T_ATTESTATION, T_EXECUTOR, T_BOUND, T_REGION, BD_NTEMPLATES };

#define BD_MAX_TEMPLATE_KEYS 16

static const int bd_template_keys[BD_NTEMPLATES][BD_MAX_TEMPLATE_KEYS + 1] = {
    /* -1 terminated */
    [T_SNAPSHOT] = {N_PFID, N_FID, N_TENSOR_ID, N_GLOBAL_OFFSET, N_LOCAL_SHAPE, N_ADDRESS, N_NBYTES, N_WORKER_ID,
                    N_ENDPOINT, N_DEVICE, N_ITEMSIZE, N_STRIDES, N_STORAGE_ADDRESS, N_STORAGE_NBYTES,
                    N_STORAGE_OFFSET, N_LEASE_GENERATION, -1},
    [T_EVIDENCE] = {N_RESOURCE_ID, N_REVISION, N_PLACEMENT_ID, N_PLACEMENT_DIGEST, N_INSTANCE_ID, N_PARTICIPANT_ID,
                    N_GENERATION, N_LEASE_ID, N_FRAGMENTS, -1},
    [T_ATTESTATION] = {N_PLACEMENT, N_EVIDENCE, N_PLACEMENT_BY_ID, N_BINDING_BY_ID, N_PLACEMENT_DICT,
                       N_BINDING_DICT, -1},
    [T_EXECUTOR] = {N_INSTANCE_ID, N_PLACEMENT_ID, N_PARTICIPANT_ID, N_PLACEMENT_DIGEST, N_RUNTIME_LEASE_ID,
                    N_WORKER_ID, N_RANK, N_FRAGMENT_IDS, N_FRAGMENT_SNAPSHOTS, N_ATTESTATION, -1},
    [T_BOUND] = {N_PLACEMENT, N_BINDING, N_INSTANCE_ID, N_RUNTIME_LEASE_ID, N_LEASE_GENERATION, N_OWNER,
                 N_ATTESTATION, -1},
    [T_REGION] = {N_TENSOR_ID, N_SOURCE, N_TARGET, N_OVERLAP_OFFSET, N_OVERLAP_SHAPE, N_SOURCE_BASE_OFFSET,
                  N_TARGET_BASE_OFFSET, N_INNER_BYTES, N_OUTER_LOOP_COUNTS, N_SOURCE_STRIDES, N_TARGET_STRIDES, -1},
};

static Py_ssize_t
bd_template_size(int which)
{
    Py_ssize_t n = 0;
    while (n < BD_MAX_TEMPLATE_KEYS && bd_template_keys[which][n] >= 0) n++;
    return n;
}

/* The per-module table bound to the functions (their `self`, a capsule): the interned field
 * names and the field-dict templates, owned by the capsule. */
typedef struct {
    PyObject *nm[N_COUNT];
    PyObject *templates[BD_NTEMPLATES];
} bd_table;

#define BD_TABLE_CAPSULE "mooncake.reshard._native.binder_table"

static void
bd_table_free(bd_table *table)
{
    for (int k = 0; k < N_COUNT; k++) Py_CLEAR(table->nm[k]);
    for (int k = 0; k < BD_NTEMPLATES; k++) Py_CLEAR(table->templates[k]);
    PyMem_Free(table);
}

static void
bd_table_capsule_destructor(PyObject *capsule)
{
    bd_table *table = PyCapsule_GetPointer(capsule, BD_TABLE_CAPSULE);
    if (table == NULL) {
        PyErr_Clear(); /* a destructor cannot raise */
        return;
    }
    bd_table_free(table);
}

/* The table bound to the function (copied into *table: borrowed references held by the
 * capsule for the call); -1 with an exception if self is not the table. */
static int
bd_load_table(PyObject *self, bd_table *table)
{
    const bd_table *stored = PyCapsule_GetPointer(self, BD_TABLE_CAPSULE);
    if (stored == NULL) return -1;
    *table = *stored;
    return 0;
}

/* A new field dict for template `which` (its values are set by the caller). */
static PyObject *
bd_field_dict(const bd_table *table, int which)
{
    return PyDict_Copy(table->templates[which]);
}

/* After the caller set every key of template `which`: the dict must hold exactly those keys (a
 * template (private to the capsule) never adds fields: a defensive check). 0, or -1 with an error. */
static int
bd_check_field_dict(PyObject *dict, int which)
{
    Py_ssize_t size = PyDict_Size(dict);
    if (size < 0) return -1;
    if (size != bd_template_size(which)) {
        PyErr_SetString(PyExc_RuntimeError, "binder: field template is corrupt");
        return -1;
    }
    return 0;
}

/* Outcome of a step: decided (1), not decided here (0, no exception), error (-1). */
#define BD_OK 1
#define BD_FALLBACK 0
#define BD_ERROR (-1)

/* *out = new reference to obj.name. A missing attribute is a fallback (the Python code reads
 * it in its own order and raises there). */
static int
bd_get(PyObject *obj, PyObject *name, PyObject **out)
{
    *out = PyObject_GetAttr(obj, name);
    if (*out != NULL) return BD_OK;
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return BD_FALLBACK;
    }
    return BD_ERROR;
}

/* bd_get of an object whose exact class the caller checked, read by a pass the fast revalidation
 * reaches (attested_rows, through _AttestedView): a fallback when its instance dict is not plain
 * (plain_dict.h: a generic getattr probes it). */
static int
bd_plain_get(PyObject *obj, PyObject *name, PyObject **out)
{
    *out = NULL;
    int safe = pd_getattr_safe(obj);
    if (safe <= 0) return safe < 0 ? BD_ERROR : BD_FALLBACK;
    return bd_get(obj, name, out);
}

/* A read's status rc with *out (set when BD_OK) required to be an exact, non-empty str: else
 * *out cleared and BD_FALLBACK. */
static inline __attribute__((always_inline)) int
bd_nonempty_str(int rc, PyObject **out)
{
    if (rc != BD_OK) return rc;
    if (!PyUnicode_CheckExact(*out) || PyUnicode_GetLength(*out) < 1) {
        Py_CLEAR(*out);
        return BD_FALLBACK;
    }
    return BD_OK;
}

/* obj.name must be an exact, non-empty str; *out a new reference. */
static int
bd_get_str(PyObject *obj, PyObject *name, PyObject **out)
{
    return bd_nonempty_str(bd_get(obj, name, out), out);
}

/* The instance __dict__ of obj (*out, new reference), for objects of the exact dataclasses the
 * caller checked: their field names have no data descriptor on the class, so reading a field
 * from the dict is what getattr does. A missing or non-dict __dict__ is a fallback. */
static int
bd_dict_of(PyObject *obj, PyObject **out)
{
    *out = PyObject_GenericGetDict(obj, NULL);
    if (*out != NULL) {
        /* (probed by key: only a plain dict runs no Python code in a probe, plain_dict.h) */
        if (pd_plain_keys(*out)) return BD_OK;
        Py_CLEAR(*out);
        return BD_FALLBACK;
    }
    if (PyErr_ExceptionMatches(PyExc_AttributeError) || PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        return BD_FALLBACK;
    }
    return BD_ERROR;
}

/* obj.name as bd_get reads it, from state (NULL: none) when it holds the name: state is obj's
 * plain instance dict (bd_dict_of), obj of an exact dataclass the caller checked, whose field
 * names have no data descriptor on the class, so the dict's value is what getattr returns; a
 * name the dict lacks takes getattr (a class default, or the AttributeError fallback). */
static inline __attribute__((always_inline)) int
bd_fget(PyObject *obj, PyObject *state, PyObject *name, PyObject **out)
{
    if (state != NULL) {
        PyObject *value = PyDict_GetItemWithError(state, name);
        if (value != NULL) {
            *out = Py_NewRef(value);
            return BD_OK;
        }
        if (PyErr_Occurred()) {
            *out = NULL;
            return BD_ERROR;
        }
    }
    return bd_get(obj, name, out);
}

/* bd_fget of an exact, non-empty str (as bd_get_str). */
static int
bd_fget_str(PyObject *obj, PyObject *state, PyObject *name, PyObject **out)
{
    return bd_nonempty_str(bd_fget(obj, state, name, out), out);
}

/* This file's readers of runtime fragments: the memo of their exact class's layout check
 * (layout.h mr_runtime_layout). */
static mr_class_memo bd_runtime_memo;

/* The state of an exact runtime fragment (*out, new reference; layout.h mr_runtime_state): the
 * fragment itself when its class is a C-owned runtime layout, else its instance dict (as
 * bd_dict_of). bd_dget reads either. */
static int
bd_runtime_state(PyObject *obj, PyObject **out)
{
    mr_layout_class lc;
    if (mr_runtime_layout(&bd_runtime_memo, &lc, (PyObject *)Py_TYPE(obj))) {
        *out = Py_NewRef(obj);
        return BD_OK;
    }
    return bd_dict_of(obj, out);
}

/* *out = new reference to dict[name] (dict: an instance dict, or a runtime fragment's state
 * from bd_runtime_state); a missing field is a fallback. */
static int
bd_dget(PyObject *dict, PyObject *name, PyObject **out)
{
    *out = PyDict_CheckExact(dict) ? PyDict_GetItemWithError(dict, name)
                                   : mr_runtime_state_get(&bd_runtime_memo, dict, name);
    if (*out != NULL) {
        Py_INCREF(*out);
        return BD_OK;
    }
    return PyErr_Occurred() ? BD_ERROR : BD_FALLBACK;
}

/* The layout index (layout.h MR_PF_*) of the placement-fragment field named bd_names[name], or -1
 * when it is not one. */
static int
bd_pf_index(int name)
{
    switch (name) {
    case N_TENSOR_ID: return MR_PF_TENSOR_ID;
    case N_GLOBAL_OFFSET: return MR_PF_GLOBAL_OFFSET;
    case N_LOCAL_SHAPE: return MR_PF_LOCAL_SHAPE;
    case N_NBYTES: return MR_PF_NBYTES;
    case N_RANK: return MR_PF_RANK;
    case N_PIPELINE_STAGE_ID: return MR_PF_PIPELINE_STAGE_ID;
    case N_ALIASES: return MR_PF_ALIASES;
    case N_PFID: return MR_PF_PLACEMENT_FRAGMENT_ID;
    default: return -1;
    }
}

/* When obj is exactly a class accepted as PlacementFragment's C-owned layout (layout.h
 * mr_pf_fields: its slots hold what the dict-backed class's instance dict held): its fields
 * bd_names[names[k]] for k < count in out[k] (borrowed: obj holds them; NULL where the slot is
 * empty, as for a key missing from the dict), and 1. Otherwise 0 and nothing read (the
 * caller's instance-dict path). Runs no Python code; never raises. */
static int
bd_pf_slots(PyObject *obj, const int *names, int count, PyObject **out)
{
    PyObject *const *f = mr_pf_fields(obj);
    if (f == NULL) return 0;
    for (int k = 0; k < count; k++) {
        int at = bd_pf_index(names[k]);
        out[k] = at < 0 ? NULL : f[at];
    }
    return 1;
}

/* out = a new reference to a borrowed slot value (BD_OK), or BD_FALLBACK when it is empty (a
 * key missing from an instance dict). */
static int
bd_slot_get(PyObject *value, PyObject **out)
{
    *out = value;
    if (value == NULL) return BD_FALLBACK;
    Py_INCREF(value);
    return BD_OK;
}

/* bd_slot_get, also requiring an exact non-empty str (as bd_dget_str). */
static int
bd_slot_str(PyObject *value, PyObject **out)
{
    int rc = bd_slot_get(value, out);
    if (rc != BD_OK) return rc;
    if (!PyUnicode_CheckExact(*out) || PyUnicode_GetLength(*out) < 1) {
        Py_CLEAR(*out);
        return BD_FALLBACK;
    }
    return BD_OK;
}

static int bd_dget(PyObject *dict, PyObject *name, PyObject **out);
static int bd_dget_str(PyObject *dict, PyObject *name, PyObject **out);
static inline __attribute__((always_inline)) int bd_rget(PyObject *const *nm, PyObject *state, int name,
                                                       PyObject **out);
static int bd_rget_str(PyObject *const *nm, PyObject *state, int name, PyObject **out);

/* Field bd_names[name] of a placement fragment: from its layout's slots pf (mr_pf_fields) when
 * not NULL (bd_slot_get), else from its instance dict (bd_dget). */
static int
bd_pf_get(PyObject *const *nm, PyObject *const *pf, PyObject *dict, int name, PyObject **out)
{
    if (pf != NULL) {
        int at = bd_pf_index(name);
        if (at < 0) {
            *out = NULL;
            return BD_FALLBACK;
        }
        return bd_slot_get(pf[at], out);
    }
    return bd_dget(dict, nm[name], out);
}

/* bd_pf_get of an exact non-empty str (as bd_slot_str / bd_dget_str). */
static int
bd_pf_get_str(PyObject *const *nm, PyObject *const *pf, PyObject *dict, int name, PyObject **out)
{
    int rc = bd_pf_get(nm, pf, dict, name, out);
    if (rc != BD_OK) return rc;
    if (!PyUnicode_CheckExact(*out) || PyUnicode_GetLength(*out) < 1) {
        Py_CLEAR(*out);
        return BD_FALLBACK;
    }
    return BD_OK;
}

/* dict[name] must be an exact, non-empty str; *out a new reference. */
static int
bd_dget_str(PyObject *dict, PyObject *name, PyObject **out)
{
    int rc = bd_dget(dict, name, out);
    if (rc != BD_OK) return rc;
    if (!PyUnicode_CheckExact(*out) || PyUnicode_GetLength(*out) < 1) {
        Py_CLEAR(*out);
        return BD_FALLBACK;
    }
    return BD_OK;
}

/* Three-way comparison of two exact str (no user code). -2 with an exception on error. */
static int
bd_compare(PyObject *a, PyObject *b)
{
    int cmp = PyUnicode_Compare(a, b);
    if (cmp == -1 && PyErr_Occurred()) return -2;
    return cmp < 0 ? -1 : (cmp > 0 ? 1 : 0);
}

/* Equality of two exact ints: 1 equal, 0 different or not both exact int, -1 error. */
static int
bd_int_equal(PyObject *a, PyObject *b)
{
    if (!PyLong_CheckExact(a) || !PyLong_CheckExact(b)) return 0;
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* value as int64 when it is an exact int in range: 1, else 0 (no exception), -1 error. */
static int
bd_as_i64(PyObject *value, int64_t *out)
{
    if (!PyLong_CheckExact(value)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow != 0) return 0;
    *out = (int64_t)v;
    return 1;
}

/* A lowercase 64-digit hex str. 1 yes, 0 no, -1 error. */
static int
bd_is_digest(PyObject *value)
{
    if (!PyUnicode_CheckExact(value)) return 0;
    Py_ssize_t size = 0;
    const char *text = PyUnicode_AsUTF8AndSize(value, &size);
    if (text == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    if (size != 64) return 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        char c = text[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
    }
    return 1;
}

/* A new instance of cls (a heap type, not called) and, in *dict, its own empty instance dict
 * (key-sharing: about half the size of a template copy installed as __dict__) for the caller
 * to fill in template order, then bd_finish; NULL with an exception. */
static PyObject *
bd_new(PyObject *cls, PyObject **dict)
{
    return mr_new_instance(cls, dict, "binder");
}

/* After the fill: releases *dict and returns obj when it holds exactly the template's keys;
 * otherwise releases obj too and returns NULL with an error. */
static PyObject *
bd_finish(PyObject *obj, PyObject **dict, int which)
{
    int rc = bd_check_field_dict(*dict, which);
    if (rc >= 0 && (which == T_SNAPSHOT || which == T_EVIDENCE)) (void)mr_untrack_inert(obj, *dict); /* GC */
    Py_CLEAR(*dict);
    if (rc < 0) {
        Py_DECREF(obj);
        return NULL;
    }
    return obj;
}

static int
bd_check_heap_types(PyObject *const *classes, Py_ssize_t n)
{
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *cls = classes[k];
        if (!PyType_Check(cls) || !(PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE)) {
            PyErr_SetString(PyExc_TypeError, "binder: classes must be heap types");
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Kernel: canonical row-major byte strides. Python-free. 0 ok, -1 on int64 overflow or a
 * negative extent/itemsize (the caller falls back to the Python computation). */
static int
bd_canonical_strides(const int64_t *shape, Py_ssize_t rank, int64_t itemsize, int64_t *strides)
{
    if (itemsize < 0) return -1;
    int64_t stride = itemsize;
    for (Py_ssize_t dim = rank - 1; dim >= 0; dim--) {
        if (shape[dim] < 0) return -1;
        strides[dim] = stride;
        if (mr_mul_i64(stride, shape[dim], &stride) < 0) {
            /* Only an error if a further (outer) stride needs the product. */
            if (dim > 0) return -1;
        }
    }
    return 0;
}

#define BD_MAX_RANK 64

/* The last placement local shape and itemsize whose canonical strides a pass computed
 * (bd_strides_canonical_with): new references (NULL: none), and the strides for them. */
typedef struct {
    PyObject *shape, *itemsize;
    Py_ssize_t rank;
    int64_t expected[BD_MAX_RANK];
} bd_strides_memo;

static void
bd_strides_memo_clear(bd_strides_memo *memo)
{
    Py_CLEAR(memo->shape);
    Py_CLEAR(memo->itemsize);
    memo->rank = 0;
}

/* Does the exact tuple `strides` equal the canonical strides of the exact tuple `shape` (of
 * exact ints) for `itemsize`? 1 yes, 0 not decided / no, -1 error.
 * memo (NULL: none): when shape and itemsize are the very objects of the memo, their canonical
 * strides are the memo's (ATTEST43: a part's fragments of one tensor share one local shape
 * tuple, so the pair loop read its dims and the itemsize again for every fragment). The memo
 * holds them, and an exact tuple of exact ints and an exact int are immutable: the same values,
 * so the same rank, the same outcome of the reads and of bd_canonical_strides (both passed when
 * the memo was set: it is set only then), the same strides. The checks that read `strides`
 * (exact tuple, its size against the rank) run in both ways and decline (0) alike; the shape
 * reads before them cannot fail on those objects. Same result, same errors. */
static int
bd_strides_canonical_with(PyObject *shape, PyObject *strides, PyObject *itemsize, bd_strides_memo *memo)
{
    if (!PyTuple_CheckExact(shape) || !PyTuple_CheckExact(strides)) return 0;
    Py_ssize_t rank;
    int64_t computed[BD_MAX_RANK];
    const int64_t *expected = computed;
    if (memo != NULL && memo->shape == shape && memo->itemsize == itemsize) {
        rank = memo->rank;
        if (PyTuple_Size(strides) != rank) return 0;
        expected = memo->expected;
    } else {
        rank = PyTuple_Size(shape);
        if (rank < 0) return -1;
        if (rank > BD_MAX_RANK || PyTuple_Size(strides) != rank) return 0;
        int64_t dims[BD_MAX_RANK];
        int64_t item = 0;
        int rc = bd_as_i64(itemsize, &item);
        if (rc <= 0) return rc;
        for (Py_ssize_t d = 0; d < rank; d++) {
            PyObject *value = PyTuple_GetItem(shape, d);
            if (value == NULL) return -1;
            rc = bd_as_i64(value, &dims[d]);
            if (rc <= 0) return rc;
        }
        if (bd_canonical_strides(dims, rank, item, computed) < 0) return 0;
        if (memo != NULL) {
            BD_SETREF(memo->shape, Py_NewRef(shape));
            BD_SETREF(memo->itemsize, Py_NewRef(itemsize));
            memo->rank = rank;
            memcpy(memo->expected, computed, (size_t)rank * sizeof(int64_t));
        }
    }
    for (Py_ssize_t d = 0; d < rank; d++) {
        PyObject *value = PyTuple_GetItem(strides, d);
        if (value == NULL) return -1;
        int64_t got = 0;
        int rc = bd_as_i64(value, &got);
        if (rc <= 0) return rc;
        if (got != expected[d]) return 0;
    }
    return 1;
}

/* An exact tuple of exact ints (1), anything else (0), error (-1). */
static int
bd_int_tuple(PyObject *value)
{
    if (!PyTuple_CheckExact(value)) return 0;
    Py_ssize_t n = PyTuple_Size(value);
    if (n < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(value, i);
        if (item == NULL) return -1;
        if (!PyLong_CheckExact(item)) return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * bind_views */

/* A hint: the cache lines of obj and the 32 bytes before it (where CPython keeps an instance's
 * dict pointer and collector header). Only addresses are computed; nothing is read. */
static inline void
bd_prefetch_object(const PyObject *obj)
{
    __builtin_prefetch((const void *)((uintptr_t)obj - 32));
    __builtin_prefetch(obj);
}

/* bd_prefetch_object, and the lines of the next 128 bytes (a C-owned layout's fields: a runtime
 * fragment's fourteen span up to three cache lines). Only addresses are computed. */
static inline void
bd_prefetch_whole(const PyObject *obj)
{
    bd_prefetch_object(obj);
    __builtin_prefetch((const void *)((uintptr_t)obj + 64));
    __builtin_prefetch((const void *)((uintptr_t)obj + 127));
}

/* A hint: the head of the placement fragment id str of obj (mr_prefetch_head: the line of its
 * type and the one of its length, hash and first characters, which the readers check and
 * compare; a hint on the first alone left logical_target_cover's PyUnicode_GetLength waiting on
 * the second) when obj is a placement fragment in its C-owned layout (its slot read: obj should
 * be in the cache by now), else nothing. Never raises. */
static inline void
bd_prefetch_pfid(PyObject *obj)
{
    PyObject *const *pf = mr_pf_fields(obj);
    if (pf != NULL && pf[MR_PF_PLACEMENT_FRAGMENT_ID] != NULL) mr_prefetch_head(pf[MR_PF_PLACEMENT_FRAGMENT_ID], 0);
}

/* Kernel: an identity table whose slots hold their key (one cache line per probe, where a slot
 * index into a key array costs a second one): capacity a power of two, at least twice the
 * count; key 0 empty (no object lives at 0). Homed by bd_idtab_home. Python-free. */
typedef struct {
    uintptr_t key;
    Py_ssize_t value;
} bd_idslot;

/* The home slot of key: a full mix of the address (mr_ptr_mix_slot). The keys are objects of one
 * class allocated at a fixed stride (fragments, tensors, sources), whose addresses mr_ptr_slot's
 * low product bits spread over a fraction of the slots: at Kimi 2 the probe loop took 5.1M
 * instructions of the bind stage, the heads table of 128 parts 92 per move (BIND39). */
static inline size_t
bd_idtab_home(const void *key, size_t mask)
{
    return mr_ptr_mix_slot(key, mask);
}

/* logical_target_cover's proven-source bits */
#define BD_SRC_ROUTE 1
#define BD_SRC_SNAP 2

/* A zeroed table for up to count keys (*mask its capacity - 1); NULL with MemoryError. */
static bd_idslot *
bd_idtab_new(size_t count, size_t *mask)
{
    size_t capacity = 16;
    while (capacity < 2 * count + 2) {
        if (capacity > SIZE_MAX / 4 / sizeof(bd_idslot)) {
            PyErr_NoMemory();
            return NULL;
        }
        capacity *= 2;
    }
    bd_idslot *table = mr_alloc_array(capacity, sizeof(bd_idslot));
    if (table != NULL) memset(table, 0, capacity * sizeof(bd_idslot));
    *mask = capacity - 1;
    return table;
}

/* The slot holding key, or the empty slot where it goes. */
static bd_idslot *
bd_idtab_find(bd_idslot *table, size_t mask, const void *key)
{
    size_t i = bd_idtab_home(key, mask);
    while (table[i].key != 0 && table[i].key != (uintptr_t)key) i = (i + 1) & mask;
    return &table[i];
}

/* The value stored for key, or -1. */
static Py_ssize_t
bd_idtab_get(bd_idslot *table, size_t mask, const void *key)
{
    const bd_idslot *slot = bd_idtab_find(table, mask, key);
    return slot->key != 0 ? slot->value : -1;
}

/* Empties the occupied slot of table (backward-shift deletion: every later key of the probe run
 * that may move back does, so bd_idtab_find still finds each remaining key). */
static void
bd_idtab_remove(bd_idslot *table, size_t mask, bd_idslot *slot)
{
    size_t i = (size_t)(slot - table), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (table[j].key == 0) break;
        size_t home = bd_idtab_home((const void *)table[j].key, mask);
        /* table[j] may fill the hole at i unless its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            table[i] = table[j];
            i = j;
        }
    }
    table[i].key = 0;
    table[i].value = 0;
}

/* The next fragment of each of many parts by address (heads of a merge, more parts than a
 * linear scan of the heads suits): key an object, value its part. bd_heads_put: 1 stored, 0 the
 * object is another part's head already (the caller then stops using the table). */
static int
bd_heads_put(bd_idslot *table, size_t mask, PyObject *head, Py_ssize_t part)
{
    bd_idslot *slot = bd_idtab_find(table, mask, head);
    if (slot->key != 0) return 0;
    slot->key = (uintptr_t)head;
    slot->value = part;
    return 1;
}

/* Moves part's head from old to head (either NULL: none) in the heads table: 1, or 0 when head
 * is another part's head already (as bd_heads_put). */
static int
bd_heads_move(bd_idslot *table, size_t mask, PyObject *old, PyObject *head, Py_ssize_t part)
{
    if (old != NULL) {
        bd_idslot *slot = bd_idtab_find(table, mask, old);
        if (slot->key != 0 && slot->value == part) bd_idtab_remove(table, mask, slot);
    }
    return head == NULL ? 1 : bd_heads_put(table, mask, head, part);
}

/* Index of the tensor whose id equals tensor_id in the strictly increasing ids[0..n), or -1. */
static Py_ssize_t
bd_find_tensor(PyObject *const *ids, Py_ssize_t n, PyObject *tensor_id, int *error)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        int cmp = bd_compare(ids[mid], tensor_id);
        if (cmp == -2) {
            *error = 1;
            return -1;
        }
        if (cmp == 0) return mid;
        if (cmp < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* A part's tensors loaded for the pair checks: items (borrowed: the tensors tuple holds them)
 * and their ids (new references), strictly increasing; tab: the ids by address (NULL until a
 * lookup needs it, and never below BD_ID_TABLE_MIN tensors or pairs); cursor: the position after
 * the last tensor found; itemsizes: each tensor's itemsize as getattr reads it, read in the load
 * pass (new references; NULL where that read failed: bd_tensor_itemsize reads it again). */
typedef struct {
    PyObject **items, **ids, **itemsizes;
    Py_ssize_t n, loaded, cursor;
    int tabled;
    bd_idslot *tab;
    size_t mask;
    bd_strides_memo strides; /* bd_check_pair's (see bd_strides_canonical_with) */
} bd_tensors;

#define BD_ID_TABLE_MIN 16

/* The tensors one attest_many call has loaded (bd_tensors_load), in load order: a part's tensors
 * are mostly the other parts' tensor objects too (a tensor split over several participants), so
 * a later binding of the same call takes their id and itemsize from here instead of two getattr
 * calls each (the same objects getattr would return: the tensors are exact td_cls objects,
 * frozen placement values, and no Python code runs in the call between the reads; bind runs
 * with the collector paused). keys: the tensors (new references: an address stays its tensor's
 * for the whole call); ids / itemsizes: new references (an itemsize NULL where its read failed:
 * the pair that needs it reads it again, as without the memo); ordered[v]: entry v was loaded
 * right after entry v - 1 in one part's tensors and its id compared greater (the same str
 * objects compare the same way again).
 * Found by a cursor first: parts that share tensors list them in the same (id) order, so the
 * entry after the last one found is usually the next one (one sequential read instead of a
 * random probe); else at one of the last BD_MEMO_STARTS loads' first entries; else in tab
 * (address -> index, at most half full), which holds entries [0, indexed) and is built only
 * when a lookup gets that far (the entries a load added before it, sized for twice as many). */
#define BD_MEMO_STARTS 16

typedef struct {
    bd_idslot *tab;
    size_t mask, indexed, count, cap;
    PyObject **keys, **ids, **itemsizes;
    unsigned char *ordered;
    size_t starts[BD_MEMO_STARTS], nstarts, loads; /* the last loads' first entries (a ring) */
    /* tensors found here so far, bindings loaded so far; off: not used any more (the parts do
     * not share tensors: BD_MEMO_TRIAL bindings without a hit), the entries kept stay valid */
    size_t hits, bindings;
    int off;
} bd_tensor_memo;

#define BD_MEMO_TRIAL 8

static void
bd_tensor_memo_free(bd_tensor_memo *memo)
{
    for (size_t k = 0; k < memo->count; k++) {
        if (k + 8 < memo->count) __builtin_prefetch(memo->keys[k + 8], 1); /* a hint */
        Py_DECREF(memo->keys[k]);
        Py_DECREF(memo->ids[k]);
        Py_XDECREF(memo->itemsizes[k]);
    }
    PyMem_Free(memo->tab);
    PyMem_Free(memo->keys);
    PyMem_Free(memo->ids);
    PyMem_Free(memo->itemsizes);
    PyMem_Free(memo->ordered);
    memset(memo, 0, sizeof(*memo));
}

/* Room for one more entry in memo's arrays (grown by doubling; the table is not touched): 0, or
 * -1 with MemoryError (the memo is left as it was). */
static int
bd_tensor_memo_reserve(bd_tensor_memo *memo)
{
    if (memo->count < memo->cap) return 0;
    size_t cap = memo->cap ? memo->cap : 64;
    while (cap <= memo->count) {
        if (cap > SIZE_MAX / 4 / sizeof(PyObject *)) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    PyObject **keys = mr_alloc_array(cap, sizeof(PyObject *));
    PyObject **ids = keys == NULL ? NULL : mr_alloc_array(cap, sizeof(PyObject *));
    PyObject **itemsizes = ids == NULL ? NULL : mr_alloc_array(cap, sizeof(PyObject *));
    unsigned char *ordered = itemsizes == NULL ? NULL : mr_alloc_array(cap, 1);
    if (ordered == NULL) {
        PyMem_Free(keys);
        PyMem_Free(ids);
        PyMem_Free(itemsizes);
        return -1;
    }
    if (memo->count > 0) {
        memcpy(keys, memo->keys, memo->count * sizeof(PyObject *));
        memcpy(ids, memo->ids, memo->count * sizeof(PyObject *));
        memcpy(itemsizes, memo->itemsizes, memo->count * sizeof(PyObject *));
        memcpy(ordered, memo->ordered, memo->count);
    }
    PyMem_Free(memo->keys);
    PyMem_Free(memo->ids);
    PyMem_Free(memo->itemsizes);
    PyMem_Free(memo->ordered);
    memo->keys = keys;
    memo->ids = ids;
    memo->itemsizes = itemsizes;
    memo->ordered = ordered;
    memo->cap = cap;
    return 0;
}

/* memo's table holding entries [0, upto) (upto <= count): the entries from memo->indexed on
 * added, or, when the table would be more than half full, a table sized for 2 * upto built
 * from all of them (once per such growth, not per doubling of the entries). 0, or -1 with
 * MemoryError (the memo is left as it was). */
static int
bd_tensor_memo_index(bd_tensor_memo *memo, size_t upto)
{
    if (memo->indexed >= upto) return 0;
    if (memo->tab == NULL || 2 * upto + 2 > memo->mask) {
        if (upto > SIZE_MAX / 8 / sizeof(bd_idslot)) {
            PyErr_NoMemory();
            return -1;
        }
        size_t mask = 0;
        bd_idslot *tab = bd_idtab_new(2 * upto, &mask);
        if (tab == NULL) return -1;
        PyMem_Free(memo->tab);
        memo->tab = tab;
        memo->mask = mask;
        memo->indexed = 0;
    }
    for (size_t v = memo->indexed; v < upto; v++) {
        bd_idslot *slot = bd_idtab_find(memo->tab, memo->mask, memo->keys[v]);
        if (slot->key != 0) continue; /* an earlier entry of the same tensor (kept: same values) */
        slot->key = (uintptr_t)memo->keys[v];
        slot->value = (Py_ssize_t)v;
    }
    memo->indexed = upto;
    return 0;
}

/* entry is the first of a load: one of the places bd_tensor_memo_find looks at. */
static void
bd_tensor_memo_started(bd_tensor_memo *memo, size_t entry)
{
    memo->starts[memo->loads % BD_MEMO_STARTS] = entry;
    memo->loads++;
    if (memo->nstarts < BD_MEMO_STARTS) memo->nstarts++;
}

/* The entry of tensor in memo (found by the cursor *cursor, the recent loads' first entries or,
 * past entries [0, start) all indexed, the table), or -1; -2 with MemoryError. *cursor: the
 * entry after the one found. */
static Py_ssize_t
bd_tensor_memo_find(bd_tensor_memo *memo, PyObject *tensor, size_t start, size_t *cursor)
{
    size_t c = *cursor;
    Py_ssize_t v = -1;
    if (c < memo->count && memo->keys[c] == tensor) v = (Py_ssize_t)c;
    for (size_t s = 0; v < 0 && s < memo->nstarts; s++) {
        size_t at = memo->starts[s];
        if (at < memo->count && memo->keys[at] == tensor) v = (Py_ssize_t)at;
    }
    if (v < 0 && start > 0) {
        if (bd_tensor_memo_index(memo, start) < 0) return -2;
        const bd_idslot *slot = bd_idtab_find(memo->tab, memo->mask, tensor);
        if (slot->key != 0) v = slot->value;
    }
    if (v >= 0) *cursor = (size_t)v + 1;
    return v;
}

static void
bd_tensors_free(bd_tensors *ts)
{
    for (Py_ssize_t k = 0; k < ts->loaded; k++) Py_XDECREF(ts->ids[k]);
    if (ts->itemsizes != NULL) {
        for (Py_ssize_t k = 0; k < ts->n; k++) Py_XDECREF(ts->itemsizes[k]);
    }
    PyMem_Free(ts->ids);
    PyMem_Free(ts->items);
    PyMem_Free(ts->itemsizes);
    PyMem_Free(ts->tab);
    bd_strides_memo_clear(&ts->strides);
    ts->ids = ts->items = ts->itemsizes = NULL;
    ts->tab = NULL;
    ts->loaded = 0;
}

/* Load the exact tuple tensors of exact td_cls objects with exact, non-empty, strictly
 * increasing str ids (BD_OK), else BD_FALLBACK / BD_ERROR; *ts is freed by the caller either
 * way. tabled: a table by address may be built (npairs and the tensor count large enough). */
static int
bd_tensors_load(const bd_table *tb, PyObject *tensors, PyObject *td_cls, Py_ssize_t npairs, bd_tensors *ts,
                bd_tensor_memo *memo)
{
    memset(ts, 0, sizeof(*ts));
    if (memo != NULL && memo->off) memo = NULL;
    Py_ssize_t ntensors = PyTuple_Size(tensors);
    if (ntensors < 0) return BD_ERROR;
    ts->n = ntensors;
    ts->items = mr_alloc_array((size_t)ntensors, sizeof(PyObject *));
    if (ts->items == NULL) return BD_ERROR;
    ts->ids = mr_alloc_array((size_t)ntensors, sizeof(PyObject *));
    if (ts->ids == NULL) return BD_ERROR;
    ts->itemsizes = mr_alloc_array((size_t)ntensors, sizeof(PyObject *));
    if (ts->itemsizes == NULL) return BD_ERROR;
    for (Py_ssize_t k = 0; k < ntensors; k++) ts->itemsizes[k] = NULL;
    int status = BD_OK;
    /* with memo: where this load's entries start, the cursor, the entry of the previous tensor */
    size_t start = memo != NULL ? memo->count : 0, cursor = 0;
    Py_ssize_t previous_entry = -1;
    int probing = 1; /* the last lookup was not the cursor's */
    for (; ts->loaded < ntensors; ts->loaded++) {
        Py_ssize_t k = ts->loaded;
        PyObject *tensor = PyTuple_GetItem(tensors, k);
        if (tensor == NULL) return BD_ERROR;
        if (k + 4 < ntensors) { /* a hint, unless the cursor will find it (its object not read) */
            PyObject *ahead = PyTuple_GetItem(tensors, k + 4);
            if (memo == NULL || cursor + 4 >= memo->count || memo->keys[cursor + 4] != ahead) bd_prefetch_object(ahead);
        }
        if (memo != NULL && memo->tab != NULL && probing && k + 8 < ntensors) {
            /* and the table slot 8 on while the cursor finds nothing (by address) */
            __builtin_prefetch(&memo->tab[bd_idtab_home(PyTuple_GetItem(tensors, k + 8), memo->mask)]);
        }
        Py_ssize_t entry = -1;
        if (memo != NULL) {
            size_t before = cursor;
            entry = bd_tensor_memo_find(memo, tensor, start, &cursor);
            if (entry == -2) return BD_ERROR;
            probing = !(entry >= 0 && (size_t)entry == before);
            if (k == 0 && entry >= 0) bd_tensor_memo_started(memo, (size_t)entry);
        }
        if (entry >= 0) {
            /* loaded for an earlier binding of this call (bd_tensor_memo): the values read then,
             * of this very object (held by the memo), whose class was checked then */
            ts->items[k] = tensor;
            memo->hits++;
            ts->ids[k] = Py_NewRef(memo->ids[entry]);
            ts->itemsizes[k] = Py_XNewRef(memo->itemsizes[entry]);
        } else {
            if ((PyObject *)Py_TYPE(tensor) != td_cls) return BD_FALLBACK;
            ts->items[k] = tensor;
            status = bd_get_str(tensor, tb->nm[N_TENSOR_ID], &ts->ids[k]);
            if (status != BD_OK) return status;
            /* its itemsize now, while the object is in the cache (the pairs visit the tensors in
             * their fragments' id order); a failed read is left to the pair that needs it, which
             * reads it again and fails there as before */
            ts->itemsizes[k] = PyObject_GetAttr(tensor, tb->nm[N_ITEMSIZE]);
            if (ts->itemsizes[k] == NULL) PyErr_Clear();
            if (memo != NULL) {
                if (bd_tensor_memo_reserve(memo) < 0) {
                    Py_CLEAR(ts->ids[k]);
                    return BD_ERROR;
                }
                entry = (Py_ssize_t)memo->count;
                memo->keys[entry] = Py_NewRef(tensor);
                memo->ids[entry] = Py_NewRef(ts->ids[k]);
                memo->itemsizes[entry] = Py_XNewRef(ts->itemsizes[k]);
                memo->ordered[entry] = 0;
                memo->count++;
                if (k == 0) bd_tensor_memo_started(memo, (size_t)entry);
            }
        }
        /* strictly increasing ids; known for two entries loaded in a row before (ordered) */
        if (k > 0 && !(entry > 0 && entry == previous_entry + 1 && memo->ordered[entry])) {
            int cmp = bd_compare(ts->ids[k - 1], ts->ids[k]);
            if (cmp == -2 || cmp >= 0) {
                Py_CLEAR(ts->ids[k]);
                return cmp == -2 ? BD_ERROR : BD_FALLBACK;
            }
            if (entry > 0 && entry == previous_entry + 1) memo->ordered[entry] = 1;
        }
        previous_entry = entry;
    }
    ts->tabled = npairs >= BD_ID_TABLE_MIN && ntensors >= BD_ID_TABLE_MIN;
    return BD_OK;
}

/* Index of the tensor whose id equals tid, or -1 (*error set on an error). The ids are strictly
 * increasing, so an identical one is the only equal one, the search's answer: the one at the
 * cursor or just before it (fragments of one part follow their tensors' order), else the one
 * of that address in the table (built at the first such miss), else the search decides. */
static Py_ssize_t
bd_tensors_find(bd_tensors *ts, PyObject *tid, int *error)
{
    Py_ssize_t c = ts->cursor, t = -1;
    if (c < ts->n && ts->ids[c] == tid) t = c;
    else if (c > 0 && ts->ids[c - 1] == tid) t = c - 1;
    else {
        if (ts->tabled && ts->tab == NULL) {
            ts->tab = bd_idtab_new((size_t)ts->n, &ts->mask);
            if (ts->tab == NULL) {
                *error = 1;
                return -1;
            }
            for (Py_ssize_t k = 0; k < ts->n; k++) {
                bd_idslot *slot = bd_idtab_find(ts->tab, ts->mask, ts->ids[k]);
                slot->key = (uintptr_t)ts->ids[k]; /* distinct (strictly increasing) */
                slot->value = k;
            }
        }
        if (ts->tab != NULL) t = bd_idtab_get(ts->tab, ts->mask, tid);
        if (t < 0 || t >= ts->n) t = bd_find_tensor(ts->ids, ts->n, tid, error);
    }
    if (t >= 0) ts->cursor = t + 1;
    return t;
}

/* Tensor t's itemsize (*out, new reference) as bd_get reads it: the value the load pass read
 * (the tensors are exact td_cls objects, read by getattr, and no Python code runs in the call
 * between the reads, so a second getattr would return the same object; the pairs visit a part's
 * tensors in their fragments' id order, so a read per pair was a random access), else read now.
 * BD_OK, or bd_get's BD_FALLBACK / BD_ERROR (then nothing is kept). */
static int
bd_tensor_itemsize(PyObject *const *nm, bd_tensors *ts, Py_ssize_t t, PyObject **out)
{
    if (ts->itemsizes[t] == NULL) {
        int rc = bd_get(ts->items[t], nm[N_ITEMSIZE], &ts->itemsizes[t]);
        if (rc != BD_OK) {
            ts->itemsizes[t] = NULL;
            return rc;
        }
    }
    *out = Py_NewRef(ts->itemsizes[t]);
    return BD_OK;
}

/* What the fused attest path keeps of a checked pair (new references): the runtime
 * fragment's dict and the placement fragment's id. */
typedef struct {
    PyObject *rdict, *lpfid;
} bd_pair_kept;

/* One fragment pair: BD_OK (view appended to views; or, views NULL, *kept filled), BD_FALLBACK
 * or BD_ERROR. */
static int
bd_check_pair(PyObject *const *nm, PyObject *logical, PyObject *runtime, bd_tensors *ts, PyObject *previous,
              PyObject **pfid_out, PyObject *instance_id, PyObject *views, bd_pair_kept *kept)
{
    PyObject *rpfid = NULL, *lpfid = NULL, *tid = NULL, *a = NULL, *b = NULL, *itemsize = NULL;
    PyObject *rdict = NULL, *ldict = NULL;
    int result = BD_FALLBACK;
    int rc = bd_runtime_state(runtime, &rdict);
    if (rc != BD_OK) { result = rc; goto done; }
    PyObject *const *lf = mr_pf_fields(logical); /* its layout's slots, else its dict */
    if (lf == NULL) {
        rc = bd_dict_of(logical, &ldict);
        if (rc != BD_OK) { result = rc; goto done; }
    }
    rc = bd_rget_str(nm, rdict, N_PFID, &rpfid);
    if (rc != BD_OK) { result = rc; goto done; }
    rc = bd_pf_get_str(nm, lf, ldict, N_PFID, &lpfid);
    if (rc != BD_OK) { result = rc; goto done; }
    if (previous != NULL) {
        int cmp = bd_compare(rpfid, previous);
        if (cmp == -2) { result = BD_ERROR; goto done; }
        if (cmp <= 0) goto done;
    }
    int cmp = bd_compare(rpfid, lpfid);
    if (cmp == -2) { result = BD_ERROR; goto done; }
    if (cmp != 0) goto done;
    rc = bd_pf_get_str(nm, lf, ldict, N_TENSOR_ID, &tid);
    if (rc != BD_OK) { result = rc; goto done; }
    int error = 0;
    Py_ssize_t t = bd_tensors_find(ts, tid, &error);
    if (error) { result = BD_ERROR; goto done; }
    if (t < 0) goto done;
    /* nbytes */
    rc = bd_rget(nm, rdict, N_NBYTES, &a);
    if (rc != BD_OK) { result = rc; goto done; }
    rc = bd_pf_get(nm, lf, ldict, N_NBYTES, &b);
    if (rc != BD_OK) { result = rc; goto done; }
    rc = bd_int_equal(a, b);
    if (rc < 0) { result = BD_ERROR; goto done; }
    if (rc == 0) goto done;
    Py_CLEAR(a);
    Py_CLEAR(b);
    /* local_shape */
    rc = bd_rget(nm, rdict, N_LOCAL_SHAPE, &a);
    if (rc != BD_OK) { result = rc; goto done; }
    rc = bd_pf_get(nm, lf, ldict, N_LOCAL_SHAPE, &b);
    if (rc != BD_OK) { result = rc; goto done; }
    rc = bd_int_tuple(a);
    if (rc <= 0) { result = rc < 0 ? BD_ERROR : BD_FALLBACK; goto done; }
    rc = b == a ? 1 : bd_int_tuple(b); /* the very tuple just checked (immutable): 1 again */
    if (rc <= 0) { result = rc < 0 ? BD_ERROR : BD_FALLBACK; goto done; }
    rc = PyObject_RichCompareBool(a, b, Py_EQ);
    if (rc < 0) { result = BD_ERROR; goto done; }
    if (rc == 0) goto done;
    Py_CLEAR(a); /* keep b: the placement local shape */
    /* itemsize */
    rc = bd_rget(nm, rdict, N_ITEMSIZE, &a);
    if (rc != BD_OK) { result = rc; goto done; }
    rc = bd_tensor_itemsize(nm, ts, t, &itemsize);
    if (rc != BD_OK) { result = rc; goto done; }
    rc = bd_int_equal(a, itemsize);
    if (rc < 0) { result = BD_ERROR; goto done; }
    if (rc == 0) goto done;
    Py_CLEAR(a);
    /* strides */
    rc = bd_rget(nm, rdict, N_STRIDES, &a);
    if (rc != BD_OK) { result = rc; goto done; }
    rc = bd_strides_canonical_with(b, a, itemsize, &ts->strides);
    if (rc < 0) { result = BD_ERROR; goto done; }
    if (rc == 0) goto done;
    if (views != NULL) {
        PyObject *view = PyTuple_Pack(4, instance_id, runtime, logical, ts->items[t]);
        if (view == NULL) { result = BD_ERROR; goto done; }
        rc = PyList_Append(views, view);
        Py_DECREF(view);
        if (rc < 0) { result = BD_ERROR; goto done; }
    } else {
        kept->rdict = rdict;
        kept->lpfid = lpfid;
        rdict = lpfid = NULL;
    }
    *pfid_out = rpfid;
    rpfid = NULL;
    result = BD_OK;
done:
    Py_XDECREF(rdict);
    Py_XDECREF(ldict);
    Py_XDECREF(rpfid);
    Py_XDECREF(lpfid);
    Py_XDECREF(tid);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(itemsize);
    return result;
}

PyDoc_STRVAR(bind_views_doc,
"bind_views(instance_id, logical, runtime, tensors, placement_fragment_cls, runtime_fragment_cls,\n"
"           tensor_cls)\n"
"--\n\n"
"The views [(instance_id, runtime[i], logical[i], tensor)] of weight/binding.py _binding_views\n"
"when every check there passes with the positional pairing of the exact tuples logical (a\n"
"part's fragments) and runtime (a binding's fragments): equal, strictly increasing placement\n"
"fragment ids; equal nbytes, local_shape and itemsize (of the tensor of that id in the\n"
"strictly sorted tuple tensors); canonical strides. None when that is not decided here.");

/* The views of bind_views (*out, a new list) or BD_FALLBACK / BD_ERROR. classes: placement
 * fragment, runtime fragment and tensor classes (checked heap types). */
static int
bd_views_core(const bd_table *tb, PyObject *instance_id, PyObject *logical, PyObject *runtime, PyObject *tensors,
              PyObject *const *classes, PyObject **out)
{
    PyObject *const *nm = tb->nm;
    PyObject *pf_cls = classes[0], *rf_cls = classes[1], *td_cls = classes[2];
    if (!PyTuple_CheckExact(logical) || !PyTuple_CheckExact(runtime) || !PyTuple_CheckExact(tensors)) {
        return BD_FALLBACK;
    }
    Py_ssize_t n = PyTuple_Size(logical);
    if (n < 0) return BD_ERROR;
    if (PyTuple_Size(runtime) != n) return BD_FALLBACK;
    bd_tensors ts;
    PyObject *views = NULL, *previous = NULL, *result = NULL;
    int status = bd_tensors_load(tb, tensors, td_cls, n, &ts, NULL);
    if (status != BD_OK) goto done;
    views = PyList_New(0);
    if (views == NULL) { status = BD_ERROR; goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *l = PyTuple_GetItem(logical, i);
        PyObject *r = PyTuple_GetItem(runtime, i);
        if (l == NULL || r == NULL) { status = BD_ERROR; goto done; }
        if ((PyObject *)Py_TYPE(l) != pf_cls || (PyObject *)Py_TYPE(r) != rf_cls) {
            status = BD_FALLBACK;
            goto done;
        }
        PyObject *pfid = NULL;
        status = bd_check_pair(nm, l, r, &ts, previous, &pfid, instance_id, views, NULL);
        if (status != BD_OK) goto done;
        BD_SETREF(previous, pfid);
    }
    result = views;
    views = NULL;
done:
    bd_tensors_free(&ts);
    Py_XDECREF(previous);
    Py_XDECREF(views);
    if (status != BD_OK) {
        Py_XDECREF(result);
        return status;
    }
    *out = result;
    return BD_OK;
}

static PyObject *
bd_bind_views(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "bind_views expects 7 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args + 4, 3) < 0) return NULL;
    PyObject *views = NULL;
    int status = bd_views_core(&tb, args[0], args[1], args[2], args[3], args + 4, &views);
    if (status == BD_ERROR) return NULL;
    if (status == BD_FALLBACK) Py_RETURN_NONE;
    return views;
}

/* ------------------------------------------------------------------------------------------
 * attest */

/* Copy obj.<names[k]> into dict for k in [first, last). */
static int
bd_copy_fields(PyObject *const *nm, int first, int last, PyObject *obj, PyObject *dict)
{
    for (int k = first; k < last; k++) {
        PyObject *value = NULL;
        int rc = bd_get(obj, nm[k], &value);
        if (rc != BD_OK) return rc;
        rc = PyDict_SetItem(dict, nm[k], value);
        Py_DECREF(value);
        if (rc < 0) return BD_ERROR;
    }
    return BD_OK;
}

/* The scalar checks of attestation._valid_scalars on binding (its fields read through
 * bd_fget with state: NULL, or its plain instance dict). */
static int
bd_valid_scalars(PyObject *const *nm, PyObject *binding, PyObject *state)
{
    static const int text_fields[] = {N_RESOURCE_ID, N_PLACEMENT_ID, N_INSTANCE_ID, N_LEASE_ID, N_REVISION,
                                      N_PARTICIPANT_ID};
    for (size_t k = 0; k < sizeof(text_fields) / sizeof(text_fields[0]); k++) {
        PyObject *value = NULL;
        int rc = bd_fget_str(binding, state, nm[text_fields[k]], &value);
        if (rc != BD_OK) return rc;
        Py_DECREF(value);
    }
    PyObject *value = NULL;
    int rc = bd_fget(binding, state, nm[N_PLACEMENT_DIGEST], &value);
    if (rc != BD_OK) return rc;
    rc = bd_is_digest(value);
    Py_DECREF(value);
    if (rc <= 0) return rc < 0 ? BD_ERROR : BD_FALLBACK;
    rc = bd_fget(binding, state, nm[N_GENERATION], &value);
    if (rc != BD_OK) return rc;
    if (!PyLong_CheckExact(value)) {
        Py_DECREF(value);
        return BD_FALLBACK;
    }
    unsigned long long generation = PyLong_AsUnsignedLongLong(value);
    Py_DECREF(value);
    if (generation == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return BD_ERROR;
        PyErr_Clear();
        return BD_FALLBACK; /* negative or above 2**64 - 1 */
    }
    return BD_OK;
}

/* binding_by_id of an exact tuple of exact rf_cls fragments with exact str ids, placement ids
 * strictly increasing, runtime ids distinct, no owner. */
static int
bd_binding_map(PyObject *const *nm, PyObject *fragments, PyObject *rf_cls, PyObject *map)
{
    Py_ssize_t n = PyTuple_Size(fragments);
    if (n < 0) return BD_ERROR;
    PyObject *seen = PySet_New(NULL);
    if (seen == NULL) return BD_ERROR;
    PyObject *previous = NULL;
    int status = BD_OK;
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *fragment = PyTuple_GetItem(fragments, i);
        if (fragment == NULL) { status = BD_ERROR; break; }
        if ((PyObject *)Py_TYPE(fragment) != rf_cls) { status = BD_FALLBACK; break; }
        PyObject *pfid = NULL, *fid = NULL, *owner = NULL, *fdict = NULL;
        status = bd_runtime_state(fragment, &fdict);
        if (status != BD_OK) break;
        status = bd_rget_str(nm, fdict, N_PFID, &pfid);
        if (status != BD_OK) {
            Py_DECREF(fdict);
            break;
        }
        if (previous != NULL) {
            int cmp = bd_compare(pfid, previous);
            if (cmp == -2 || cmp <= 0) {
                status = cmp == -2 ? BD_ERROR : BD_FALLBACK;
                Py_DECREF(pfid);
                Py_DECREF(fdict);
                break;
            }
        }
        BD_SETREF(previous, pfid);
        status = bd_rget_str(nm, fdict, N_FID, &fid);
        if (status == BD_OK) {
            int contains = PySet_Contains(seen, fid);
            if (contains != 0 || PySet_Add(seen, fid) < 0) status = contains > 0 ? BD_FALLBACK : BD_ERROR;
            Py_DECREF(fid);
        }
        if (status == BD_OK) status = bd_rget(nm, fdict, N_OWNER, &owner);
        Py_DECREF(fdict);
        if (status != BD_OK) break;
        int has_owner = owner != Py_None;
        Py_DECREF(owner);
        if (has_owner) { status = BD_FALLBACK; break; }
        if (PyDict_SetItem(map, pfid, fragment) < 0) status = BD_ERROR;
    }
    Py_XDECREF(previous);
    Py_DECREF(seen);
    return status;
}

/* placement_by_id of part fragments (None: empty); exact str ids. */
static int
bd_placement_map(PyObject *const *nm, PyObject *part_fragments, PyObject *map)
{
    if (part_fragments == Py_None) return BD_OK;
    if (!PyTuple_CheckExact(part_fragments)) return BD_FALLBACK;
    Py_ssize_t n = PyTuple_Size(part_fragments);
    if (n < 0) return BD_ERROR;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fragment = PyTuple_GetItem(part_fragments, i);
        if (fragment == NULL) return BD_ERROR;
        PyObject *pfid = NULL;
        int rc = bd_get_str(fragment, nm[N_PFID], &pfid);
        if (rc != BD_OK) return rc;
        rc = PyDict_SetItem(map, pfid, fragment);
        Py_DECREF(pfid);
        if (rc < 0) return BD_ERROR;
    }
    return BD_OK;
}

static int bd_attest_core(const bd_table *tb, PyObject *const *classes, PyObject *placement, PyObject *binding,
                          PyObject *part_fragments, PyObject *const *maps, PyObject *evidence_as_is,
                          PyObject *binding_state, PyObject **out);

PyDoc_STRVAR(attest_doc,
"attest(attestation_cls, evidence_cls, runtime_fragment_cls, placement, binding, part_fragments)\n"
"--\n\n"
"The RuntimeBindingAttestation of a binding validate_runtime_binding has accepted, built like\n"
"attestation._fast_validated_state (evidence with the binding's field values and fragments;\n"
"the placement fragments of part_fragments (a tuple, or None) and the binding fragments by\n"
"placement fragment id, as dicts and read-only proxies), when the binding has the exact\n"
"normalised, owner-free, valid shape. None when that is not decided here.");

static PyObject *
bd_attest(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "attest expects 6 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args, 3) < 0) return NULL;
    PyObject *result = NULL;
    int status = bd_attest_core(&tb, args, args[3], args[4], args[5], NULL, NULL, NULL, &result);
    if (status == BD_OK) return result;
    if (status == BD_ERROR) return NULL;
    Py_RETURN_NONE;
}

/* The attestation of attest (*out) or BD_FALLBACK / BD_ERROR. classes: attestation, evidence and
 * runtime fragment classes (checked heap types). maps (NULL: built here): the binding and
 * placement maps bd_binding_map and bd_placement_map would build from the binding's fragments
 * and part_fragments, already built and checked by the caller (bd_fused_views).
 * evidence_as_is (NULL: none): binding itself, an exact evidence_cls instance (the restore's
 * unpickled evidence, which the restore stores in the attestation in place of the copy): stored
 * as the evidence instead of a new evidence built from binding's fields. The copy's field reads
 * cannot decide anything then: bd_valid_scalars has read those eight fields just before (no
 * code runs in between), and fragments is binding's own. binding_state (NULL: none): binding's
 * plain instance dict, its fields read from it (bd_fget). */
static int
bd_attest_core(const bd_table *tb, PyObject *const *classes, PyObject *placement, PyObject *binding,
               PyObject *part_fragments, PyObject *const *maps, PyObject *evidence_as_is, PyObject *binding_state,
               PyObject **out)
{
    PyObject *const *nm = tb->nm;
    PyObject *att_cls = classes[0], *ev_cls = classes[1], *rf_cls = classes[2];
    PyObject *fragments = NULL, *binding_map = NULL, *placement_map = NULL, *ev_dict = NULL;
    PyObject *evidence = NULL, *state = NULL, *proxy = NULL, *result = NULL;
    /* binding_state was checked plain by the caller before its views passes ran: checked again
     * here, right before the probes below (plain_dict.h: no pass between the check and the
     * probe), else read through getattr */
    if (binding_state != NULL && !pd_plain_keys(binding_state)) binding_state = NULL;
    int status = bd_fget(binding, binding_state, nm[N_FRAGMENTS], &fragments);
    if (status != BD_OK) goto done;
    if (!PyTuple_CheckExact(fragments)) { status = BD_FALLBACK; goto done; }
    status = bd_valid_scalars(nm, binding, binding_state);
    if (status != BD_OK) goto done;
    status = BD_ERROR;
    binding_map = maps != NULL ? Py_NewRef(maps[0]) : PyDict_New();
    placement_map = maps != NULL ? Py_NewRef(maps[1]) : PyDict_New();
    if (binding_map == NULL || placement_map == NULL) goto done;
    status = maps != NULL ? BD_OK : bd_binding_map(nm, fragments, rf_cls, binding_map);
    if (status != BD_OK) goto done;
    status = BD_ERROR;
    if (evidence_as_is != NULL) {
        if (evidence_as_is != binding || (PyObject *)Py_TYPE(binding) != ev_cls) {
            PyErr_SetString(PyExc_SystemError, "bd_attest_core: evidence_as_is must be the evidence binding");
            goto done;
        }
        status = maps != NULL ? BD_OK : bd_placement_map(nm, part_fragments, placement_map);
        if (status != BD_OK) goto done;
        status = BD_ERROR;
        evidence = Py_NewRef(evidence_as_is);
    } else {
        evidence = bd_new(ev_cls, &ev_dict);
        if (evidence == NULL) goto done;
        status = bd_copy_fields(nm, N_RESOURCE_ID, N_FRAGMENTS, binding, ev_dict);
        if (status != BD_OK) goto done;
        status = BD_ERROR;
        if (PyDict_SetItem(ev_dict, nm[N_FRAGMENTS], fragments) < 0) goto done;
        status = maps != NULL ? BD_OK : bd_placement_map(nm, part_fragments, placement_map);
        if (status != BD_OK) goto done;
        status = BD_ERROR;
        evidence = bd_finish(evidence, &ev_dict, T_EVIDENCE);
        if (evidence == NULL) goto done;
    }
    /* the id maps hold str keys and inert fragments: out of the collector now rather than at its
     * first scan of them (gctrack.h) */
    mr_gc_untrack_atomic_dict(placement_map);
    mr_gc_untrack_atomic_dict(binding_map);
    result = bd_new(att_cls, &state);
    if (result == NULL) goto done;
    if (PyDict_SetItem(state, nm[N_PLACEMENT], placement) < 0) goto done;
    if (PyDict_SetItem(state, nm[N_EVIDENCE], evidence) < 0) goto done;
    proxy = PyDictProxy_New(placement_map);
    if (proxy == NULL || PyDict_SetItem(state, nm[N_PLACEMENT_BY_ID], proxy) < 0) goto done;
    Py_CLEAR(proxy);
    proxy = PyDictProxy_New(binding_map);
    if (proxy == NULL || PyDict_SetItem(state, nm[N_BINDING_BY_ID], proxy) < 0) goto done;
    if (PyDict_SetItem(state, nm[N_PLACEMENT_DICT], placement_map) < 0) goto done;
    if (PyDict_SetItem(state, nm[N_BINDING_DICT], binding_map) < 0) goto done;
    result = bd_finish(result, &state, T_ATTESTATION);
    if (result != NULL) status = BD_OK;
done:
    Py_XDECREF(fragments);
    Py_XDECREF(binding_map);
    Py_XDECREF(placement_map);
    Py_XDECREF(ev_dict);
    Py_XDECREF(evidence);
    Py_XDECREF(state);
    Py_XDECREF(proxy);
    if (status == BD_OK) {
        *out = result;
        return BD_OK;
    }
    Py_XDECREF(result);
    return status;
}

/* ------------------------------------------------------------------------------------------
 * attested_executors */

/* The snapshot field values of (placement fragment, runtime fragment dict, generation): new
 * references in values[0 .. BD_NSNAP-1], in field order (bd_snapshot_values; all NULL unless
 * BD_OK), or stored in that order into a field dict (bd_snapshot_fill); bd_snapshot_dict gives
 * that dict (*out, checked to hold exactly the snapshot fields); BD_* status.
 *
 * pf_cls (NULL: not given) is the PlacementFragment class: a placement fragment of exactly that
 * class has its four fields read from its own instance dict (one dict fetch instead of four
 * generic getattr calls). That is what getattr returns: the exact class (and object) define no
 * attribute of those names, so no descriptor precedes the instance dict. A field missing from
 * the dict, or a missing / non-dict __dict__, takes today's getattr read of that field, and
 * any other class takes getattr for every field: the values (hence the snapshots) are the very
 * objects getattr returns. */
/* The runtime layout's field index of snapshot field name k (mr_runtime_index of bd_names[k],
 * fixed by the names' text: found once per process), or -1 when it is not a runtime field.
 * Always inlined: bd_snapshot_values reads every field through it. */
static inline __attribute__((always_inline)) Py_ssize_t
bd_snapshot_rf_index(PyObject *const *nm, int k)
{
    static Py_ssize_t known[N_COUNT];
    static int filled[N_COUNT];
    if (k < 0 || k >= N_COUNT) return -1;
    if (!filled[k]) {
        if (mr_runtime_names() == NULL) return mr_runtime_index(nm[k]); /* (before Init_Layout: not kept) */
        known[k] = mr_runtime_index(nm[k]);
        filled[k] = 1;
    }
    return known[k];
}

/* bd_dget(state, nm[name], out) for a runtime fragment's state (bd_runtime_state): a C-owned
 * layout state's slot of that name read directly (the index mr_runtime_state_get finds for it,
 * kept by bd_snapshot_rf_index), anything else through bd_dget. Always inlined: called about
 * 40 times per fragment pair at Kimi scale, where the call itself was half its cost (BIND39). */
static inline __attribute__((always_inline)) int
bd_rget(PyObject *const *nm, PyObject *state, int name, PyObject **out)
{
    if (!PyDict_CheckExact(state) && bd_runtime_memo.memo.cls != NULL
        && (PyObject *)Py_TYPE(state) == bd_runtime_memo.memo.cls) {
        Py_ssize_t at = bd_snapshot_rf_index(nm, name);
        if (at >= 0 && at < MR_RF_N) return bd_slot_get(((mr_layout_object *)state)->fields[at], out);
    }
    return bd_dget(state, nm[name], out);
}

/* bd_rget of an exact non-empty str (as bd_dget_str). */
static int
bd_rget_str(PyObject *const *nm, PyObject *state, int name, PyObject **out)
{
    return bd_nonempty_str(bd_rget(nm, state, name, out), out);
}

static int
bd_snapshot_values(const bd_table *tb, PyObject *pf_cls, PyObject *placement_fragment, PyObject *runtime_dict,
                   PyObject *generation, PyObject **values)
{
    static const int from_placement[] = {N_PFID, N_TENSOR_ID, N_GLOBAL_OFFSET, N_LOCAL_SHAPE};
    PyObject *const *nm = tb->nm;
    PyObject *pdict = NULL;
    PyObject *slots[4] = {NULL, NULL, NULL, NULL}; /* its C-owned layout's (from_placement order) */
    int in_slots = 0;
    int status = BD_OK;
    for (int k = 0; k < BD_NSNAP; k++) values[k] = NULL;
    /* a runtime fragment state that is the fragment in its C-owned layout (bd_runtime_state):
     * its slots, read as bd_dget reads them */
    PyObject *const *rf = NULL;
    if (!PyDict_Check(runtime_dict) && bd_runtime_memo.memo.cls != NULL
        && (PyObject *)Py_TYPE(runtime_dict) == bd_runtime_memo.memo.cls) {
        rf = (PyObject *const *)((mr_layout_object *)runtime_dict)->fields;
    }
    if (pf_cls != NULL && (PyObject *)Py_TYPE(placement_fragment) == pf_cls) {
        in_slots = bd_pf_slots(placement_fragment, from_placement, 4, slots);
        if (!in_slots) {
            status = bd_dict_of(placement_fragment, &pdict); /* BD_FALLBACK: pdict NULL, getattr */
            if (status == BD_ERROR) return BD_ERROR;
            status = BD_OK;
        }
    }
    /* Field order: placement_fragment_id, fragment_id, tensor_id, global_offset, local_shape,
     * then the runtime fields, then lease_generation. */
    for (int k = 0; k < N_LEASE_GENERATION && status == BD_OK; k++) {
        int placement_side = 0;
        PyObject *slot = NULL;
        for (size_t j = 0; j < sizeof(from_placement) / sizeof(from_placement[0]); j++) {
            if (from_placement[j] == k) {
                placement_side = 1;
                slot = slots[j];
            }
        }
        PyObject *value = NULL;
        if (!placement_side && rf != NULL) {
            /* bd_dget on a runtime layout state: the slot of that name (mr_runtime_state_get) */
            Py_ssize_t at = bd_snapshot_rf_index(nm, k);
            status = bd_slot_get(at < 0 ? NULL : rf[at], &value);
        }
        else if (!placement_side) {
            status = bd_dget(runtime_dict, nm[k], &value);
        }
        else if (in_slots && slot != NULL) {
            value = Py_NewRef(slot);
        }
        else if (pdict != NULL && (value = PyDict_GetItemWithError(pdict, nm[k])) != NULL) {
            Py_INCREF(value);
        }
        else {
            status = PyErr_Occurred() ? BD_ERROR : bd_get(placement_fragment, nm[k], &value);
        }
        values[k] = value;
    }
    Py_XDECREF(pdict);
    if (status == BD_OK) values[N_LEASE_GENERATION] = Py_NewRef(generation);
    if (status != BD_OK) {
        for (int k = 0; k < BD_NSNAP; k++) Py_CLEAR(values[k]);
    }
    return status;
}

static int
bd_snapshot_fill(const bd_table *tb, PyObject *pf_cls, PyObject *placement_fragment, PyObject *runtime_dict,
                 PyObject *generation, PyObject *dict)
{
    PyObject *values[BD_NSNAP];
    int status = bd_snapshot_values(tb, pf_cls, placement_fragment, runtime_dict, generation, values);
    if (status != BD_OK) return status;
    for (int k = 0; k < BD_NSNAP; k++) {
        if (status == BD_OK && PyDict_SetItem(dict, tb->nm[k], values[k]) < 0) status = BD_ERROR;
        Py_DECREF(values[k]);
    }
    return status;
}

static int
bd_snapshot_dict(const bd_table *tb, PyObject *placement_fragment, PyObject *runtime_dict, PyObject *generation,
                 PyObject **out)
{
    PyObject *dict = bd_field_dict(tb, T_SNAPSHOT);
    if (dict == NULL) return BD_ERROR;
    int status = bd_snapshot_fill(tb, NULL, placement_fragment, runtime_dict, generation, dict);
    if (status == BD_OK && bd_check_field_dict(dict, T_SNAPSHOT) < 0) status = BD_ERROR;
    if (status != BD_OK) {
        Py_DECREF(dict);
        return status;
    }
    *out = dict;
    return BD_OK;
}

/* Per call: *lc accepts snap_cls when it is a C-owned value layout (layout.h) of exactly the
 * BD_NSNAP snapshot field names in field order, else is cleared (snapshots are then built
 * through an instance dict, as for a dict-backed class). Checked through a memo of the class
 * accepted last (mr_layout_memo: a builder needs only the layout, fixed for a class). -1 with
 * an exception on error. */
static int
bd_snapshot_layout(const bd_table *tb, PyObject *snap_cls, mr_layout_class *lc)
{
    static mr_layout_memo memo; /* the class accepted last (layout.h: builders need no more) */
    if (mr_layout_memo_hit(&memo, lc, snap_cls, tb->nm, BD_NSNAP)) return 0;
    PyObject *names = PyTuple_New(BD_NSNAP);
    if (names == NULL) return -1;
    for (int k = 0; k < BD_NSNAP; k++) {
        if (PyTuple_SetItem(names, k, Py_NewRef(tb->nm[k])) < 0) {
            Py_DECREF(names);
            return -1;
        }
    }
    (void)mr_layout_memo_check(&memo, lc, snap_cls, names);
    Py_DECREF(names);
    return 0;
}

/* The snapshot (an instance of snap_cls) of (placement fragment, runtime fragment dict,
 * generation); BD_* status. When lc accepted snap_cls, the instance is built with the values
 * stored directly in its layout (mr_layout_new: what the dataclass __init__ stores, without
 * running it: the class has no checks; untracked when every value is inert, as bd_finish
 * untracks a dict-backed snapshot); otherwise through its own instance dict. */
static int
bd_snapshot(const bd_table *tb, const mr_layout_class *lc, PyObject *snap_cls, PyObject *pf_cls,
            PyObject *placement_fragment, PyObject *runtime_dict, PyObject *generation, PyObject **out)
{
    if (lc->cls != NULL && lc->cls == snap_cls) {
        PyObject *values[BD_NSNAP];
        int status = bd_snapshot_values(tb, pf_cls, placement_fragment, runtime_dict, generation, values);
        if (status != BD_OK) return status;
        *out = mr_layout_new(lc, values, BD_NSNAP);
        for (int k = 0; k < BD_NSNAP; k++) Py_DECREF(values[k]);
        return *out == NULL ? BD_ERROR : BD_OK;
    }
    PyObject *dict = NULL;
    PyObject *obj = bd_new(snap_cls, &dict);
    if (obj == NULL) {
        /* no instance dict (a layout class lc did not accept): the Python path decides */
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return BD_ERROR;
        PyErr_Clear();
        return BD_FALLBACK;
    }
    int status = bd_snapshot_fill(tb, pf_cls, placement_fragment, runtime_dict, generation, dict);
    if (status != BD_OK) {
        Py_DECREF(dict);
        Py_DECREF(obj);
        return status;
    }
    *out = bd_finish(obj, &dict, T_SNAPSHOT);
    return *out == NULL ? BD_ERROR : BD_OK;
}

/* Sorts the (fragment_id, position, snapshot) entries of each worker and returns the table
 * worker -> tuple of snapshots in a new dict (*table). */
static int
bd_sorted_table(PyObject *groups, PyObject **table)
{
    *table = PyDict_New();
    if (*table == NULL) return BD_ERROR;
    Py_ssize_t pos = 0;
    PyObject *worker, *entries;
    while (PyDict_Next(groups, &pos, &worker, &entries)) {
        if (PyList_Sort(entries) < 0) return BD_ERROR;
        Py_ssize_t n = PyList_Size(entries);
        if (n < 0) return BD_ERROR;
        PyObject *snapshots = PyTuple_New(n);
        if (snapshots == NULL) return BD_ERROR;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *entry = PyList_GetItem(entries, i);
            PyObject *snapshot = entry == NULL ? NULL : PyTuple_GetItem(entry, 2);
            if (snapshot == NULL) {
                Py_DECREF(snapshots);
                return BD_ERROR;
            }
            Py_INCREF(snapshot);
            if (PyTuple_SetItem(snapshots, i, snapshot) < 0) {
                Py_DECREF(snapshots);
                return BD_ERROR;
            }
        }
        int rc = PyDict_SetItem(*table, worker, snapshots);
        Py_DECREF(snapshots);
        if (rc < 0) return BD_ERROR;
    }
    return BD_OK;
}

/* One executor of worker_id over snapshots; BD_FALLBACK when a __post_init__ check of
 * ExecutorTransferPlan is not visibly satisfied (the caller's Python path raises). */
static int
bd_executor(const bd_table *tb, PyObject *ex_cls, PyObject *const *values, PyObject *worker_id,
            PyObject *snapshots, PyObject *attestation, PyObject **out)
{
    /* values: instance_id, placement_id, participant_id, placement_digest, runtime_lease_id, rank */
    PyObject *const *nm = tb->nm;
    Py_ssize_t n = PyTuple_Size(snapshots);
    if (n < 0) return BD_ERROR;
    if (n == 0) return BD_FALLBACK;
    PyObject *ids = mr_gc_hide(PyTuple_New(n)); /* out of the collector until full (gctrack.h) */
    if (ids == NULL) return BD_ERROR;
    /* The ids distinct: strictly increasing as long as they are (the snapshots come sorted by
     * id from bd_sorted_table: then no set), each one after the first that is not also in seen
     * (the set of those before it, built then). */
    PyObject *seen = NULL, *previous = NULL;
    PyObject *dict = NULL, *executor = NULL;
    /* snapshots in their C-owned layout (bd_snapshot_layout accepted their class): the id is
     * its slot, what getattr returns (an empty slot: getattr's AttributeError, a decline) */
    mr_layout_class lc = {0};
    PyObject *first = PyTuple_GetItem(snapshots, 0);
    if (first == NULL || bd_snapshot_layout(tb, (PyObject *)Py_TYPE(first), &lc) < 0) {
        Py_DECREF(ids);
        return BD_ERROR;
    }
    int status = BD_OK;
    /* GC: ids of exact str only, and snapshots (an exact tuple) of inert snapshots only (as bind
     * builds them: untracked), are inert tuples (common.h mr_gc_inert): never on a cycle, left
     * out of the collector here, judged in this pass (at 10^6 fragments the first collection
     * after bind walked them all) */
    int ids_inert = 1, snapshots_inert = PyTuple_CheckExact(snapshots);
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *snapshot = PyTuple_GetItem(snapshots, i);
        PyObject *fid = NULL;
        if (snapshot == NULL) { status = BD_ERROR; break; }
        if (snapshots_inert && !mr_gc_inert(snapshot, 0)) snapshots_inert = 0;
        PyObject *const *sf = mr_layout_fields(snapshot, &lc);
        status = sf != NULL ? bd_slot_get(sf[N_FID], &fid) : bd_get(snapshot, nm[N_FID], &fid);
        if (status != BD_OK) break;
        if (!PyUnicode_CheckExact(fid)) ids_inert = 0;
        if (seen == NULL && previous != NULL) {
            int cmp = PyUnicode_CheckExact(previous) && PyUnicode_CheckExact(fid) ? bd_compare(previous, fid) : 0;
            if (cmp == -2) {
                Py_DECREF(fid);
                status = BD_ERROR;
                break;
            }
            if (cmp >= 0) {
                /* not increasing (or not both exact str): the set of the ids so far decides */
                seen = PySet_New(NULL);
                for (Py_ssize_t k = 0; seen != NULL && k < i; k++) {
                    if (PySet_Add(seen, PyTuple_GetItem(ids, k)) < 0) Py_CLEAR(seen);
                }
                if (seen == NULL) {
                    Py_DECREF(fid);
                    status = BD_ERROR;
                    break;
                }
            }
        }
        if (seen != NULL) {
            int contains = PySet_Contains(seen, fid);
            if (contains != 0 || PySet_Add(seen, fid) < 0) {
                status = contains > 0 ? BD_FALLBACK : BD_ERROR;
                Py_DECREF(fid);
                break;
            }
        }
        previous = fid; /* held by ids */
        if (PyTuple_SetItem(ids, i, fid) < 0) status = BD_ERROR; /* steals fid */
    }
    if (status != BD_OK) goto done;
    if (!ids_inert) mr_gc_show(ids); /* full (before bd_finish judges the values inert) */
    if (snapshots_inert && PyObject_GC_IsTracked(snapshots)) PyObject_GC_UnTrack(snapshots);
    status = BD_ERROR;
    executor = bd_new(ex_cls, &dict);
    if (executor == NULL) goto done;
    if (PyDict_SetItem(dict, nm[N_INSTANCE_ID], values[0]) < 0) goto done;
    if (PyDict_SetItem(dict, nm[N_PLACEMENT_ID], values[1]) < 0) goto done;
    if (PyDict_SetItem(dict, nm[N_PARTICIPANT_ID], values[2]) < 0) goto done;
    if (PyDict_SetItem(dict, nm[N_PLACEMENT_DIGEST], values[3]) < 0) goto done;
    if (PyDict_SetItem(dict, nm[N_RUNTIME_LEASE_ID], values[4]) < 0) goto done;
    if (PyDict_SetItem(dict, nm[N_WORKER_ID], worker_id) < 0) goto done;
    if (PyDict_SetItem(dict, nm[N_RANK], values[5]) < 0) goto done;
    if (PyDict_SetItem(dict, nm[N_FRAGMENT_IDS], ids) < 0) goto done;
    if (PyDict_SetItem(dict, nm[N_FRAGMENT_SNAPSHOTS], snapshots) < 0) goto done;
    if (PyDict_SetItem(dict, nm[N_ATTESTATION], attestation) < 0) goto done;
    *out = bd_finish(executor, &dict, T_EXECUTOR);
    executor = NULL;
    if (*out != NULL) status = BD_OK;
done:
    Py_XDECREF(executor);
    Py_XDECREF(dict);
    Py_XDECREF(seen);
    Py_DECREF(ids);
    return status;
}

static int bd_same_str(PyObject *a, PyObject *b);

/* pd_plain_keys' walk of an exact dict from the PyDict_Next cursor pos on: 1 when every key
 * there is an exact str, else 0. Runs no Python code. */
static int
bd_keys_plain_from(PyObject *dict, Py_ssize_t pos)
{
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) return 0;
    }
    return 1;
}

/* dict[key] read as the dict's next entry: when the entry after *pos (PyDict_Next) has a key that
 * is key, or an exact str equal to the exact str key, that entry is the one dict[key] finds (the
 * keys of a dict are distinct): 1 with *value its value (borrowed) and *pos advanced. 0 when
 * that is not so (the caller looks key up), -1 with an exception. Runs no Python code. */
static int
bd_dict_step(PyObject *dict, Py_ssize_t *pos, PyObject *key, PyObject **value)
{
    PyObject *k = NULL, *v = NULL;
    if (!PyDict_Next(dict, pos, &k, &v)) return 0;
    if (k != key) {
        int same = bd_same_str(k, key);
        if (same <= 0) return same;
    }
    *value = v;
    return 1;
}

/* The attested placement dict of one attested_executors call as a C array of its entries, read
 * in one PyDict_Next walk that reads no key or value (the walk attest_many's dict order makes
 * the common case): the evidence loops look their placement fragments up in it (bd_pdict_get)
 * and take their hints from it, instead of three more cursor walks and a plain-keys walk.
 *
 * Plain keys (plain_dict.h; a key forged into a str subclass would run its __eq__ in a probe,
 * AUDIT5 F5) are checked lazily, with the same verdict as pd_plain_keys before the pass: an
 * aligned read takes entry `cursor` only when its key is the exact-str id itself or an exact str
 * equal to it, which proves that key exact (`proven`: a prefix, as the aligned reads go in
 * order); the keys not proven so are checked before the first probe (bd_pdict_plain), or at the
 * end (bd_pdict_end). The entries are borrowed from the dict, which the caller holds, and the
 * evidence loops run with the collector off and no Python code, so nothing can change the dict
 * while they are read. */
typedef struct {
    PyObject *dict;             /* borrowed (the caller holds it) */
    PyObject **entries;         /* key, value pairs in dict order (borrowed) */
    Py_ssize_t n;               /* entries */
    Py_ssize_t cursor;          /* the next entry an aligned read takes */
    Py_ssize_t proven;          /* entries [0, proven) have exact-str keys */
    int aligned;                /* every read so far took its entry at the cursor */
    int plain;                  /* every key is known to be an exact str */
} bd_pdict;

/* bd_pdict of an exact dict: BD_OK, BD_FALLBACK (not an exact dict), BD_ERROR. */
static int
bd_pdict_load(PyObject *dict, bd_pdict *pd)
{
    memset(pd, 0, sizeof(*pd));
    if (!PyDict_CheckExact(dict)) return BD_FALLBACK;
    pd->dict = dict;
    pd->aligned = 1;
    Py_ssize_t size = PyDict_Size(dict);
    if (size < 0) return BD_ERROR;
    pd->entries = mr_alloc_array((size_t)size + 1, 2 * sizeof(PyObject *));
    if (pd->entries == NULL) return BD_ERROR;
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    while (k < size && PyDict_Next(dict, &pos, &key, &value)) {
        pd->entries[2 * k] = key;
        pd->entries[2 * k + 1] = value;
        k++;
    }
    pd->n = k;
    return BD_OK;
}

static void
bd_pdict_free(bd_pdict *pd)
{
    PyMem_Free(pd->entries);
    pd->entries = NULL;
    pd->n = 0;
}

/* Every key of the dict an exact str (the keys not proven by an aligned read are checked): 1,
 * else 0 (the pass declines, as pd_plain_keys before it did). Runs no Python code. */
static int
bd_pdict_plain(bd_pdict *pd)
{
    if (pd->plain) return 1;
    if (PyDict_Size(pd->dict) != pd->n) return 0; /* (cannot change: no code runs) */
    for (Py_ssize_t k = pd->proven; k < pd->n; k++) {
        if (!PyUnicode_CheckExact(pd->entries[2 * k])) return 0;
    }
    pd->plain = 1;
    return 1;
}

/* The evidence loops read the entries again from the first (bd_group_snapshots after
 * bd_group_snapshots_one declined its shape): the proven keys stay proven. */
static void
bd_pdict_rewind(bd_pdict *pd)
{
    pd->cursor = 0;
    pd->aligned = 1;
}

/* dict[pfid] (pfid an exact str): 1 with *value (borrowed), 0 when missing, BD_FALLBACK as -2
 * when the dict is not plain and a probe is needed, -1 with an exception. */
static int
bd_pdict_get(bd_pdict *pd, PyObject *pfid, PyObject **value)
{
    if (pd->aligned && pd->cursor < pd->n) {
        PyObject *key = pd->entries[2 * pd->cursor];
        int same = key == pfid ? 1 : bd_same_str(key, pfid); /* pfid is an exact str */
        if (same < 0) return -1;
        if (same) {
            *value = pd->entries[2 * pd->cursor + 1];
            pd->cursor++;
            if (pd->cursor > pd->proven) pd->proven = pd->cursor;
            return 1;
        }
    }
    pd->aligned = 0;
    if (!bd_pdict_plain(pd)) return -2;
    *value = PyDict_GetItemWithError(pd->dict, pfid);
    if (*value != NULL) return 1;
    return PyErr_Occurred() ? -1 : 0;
}

/* The snapshot of evidence fragment runtime for bd_group_snapshots and bd_group_snapshots_one:
 * out[0] its worker, out[1] its runtime fragment id (exact non-empty str) and out[2] its
 * snapshot (new references), or all NULL when it has no attested placement fragment (no
 * snapshot). The placement fragment is read from pd (bd_pdict_get: attest builds the dict in
 * the evidence fragments' order, so each lookup is first tried as its next entry; the lookups
 * decide from the first mismatch on). BD_OK, BD_FALLBACK, BD_ERROR (nothing kept). */
static int
bd_evidence_snapshot(const bd_table *tb, const mr_layout_class *lc, PyObject *snap_cls, PyObject *rf_cls,
                     PyObject *pf_cls, PyObject *runtime, bd_pdict *pd, PyObject *generation, PyObject **out)
{
    PyObject *const *nm = tb->nm;
    out[0] = out[1] = out[2] = NULL;
    if ((PyObject *)Py_TYPE(runtime) != rf_cls) return BD_FALLBACK;
    PyObject *pfid = NULL, *rdict = NULL;
    int status = bd_runtime_state(runtime, &rdict);
    if (status != BD_OK) return status;
    status = bd_rget_str(nm, rdict, N_PFID, &pfid);
    if (status != BD_OK) {
        Py_DECREF(rdict);
        return status;
    }
    PyObject *placement_fragment = NULL; /* borrowed */
    int found = bd_pdict_get(pd, pfid, &placement_fragment);
    Py_DECREF(pfid);
    if (found <= 0) {
        Py_DECREF(rdict);
        return found == 0 ? BD_OK : found == -2 ? BD_FALLBACK : BD_ERROR; /* 0: not in the attested part */
    }
    Py_INCREF(placement_fragment);
    status = bd_rget_str(nm, rdict, N_WORKER_ID, &out[0]);
    if (status == BD_OK) status = bd_rget_str(nm, rdict, N_FID, &out[1]);
    if (status == BD_OK) status = bd_snapshot(tb, lc, snap_cls, pf_cls, placement_fragment, rdict, generation, &out[2]);
    Py_DECREF(placement_fragment);
    Py_DECREF(rdict);
    if (status != BD_OK) {
        for (int k = 0; k < 3; k++) Py_CLEAR(out[k]);
    }
    return status;
}

/* Hints for the evidence loops (bd_group_snapshots*), which read, per evidence fragment, the
 * runtime fragment, every field object of it (the snapshot holds them: their reference counts
 * are written), its placement fragment from the attested placement dict (whose entries follow
 * the evidence order: attest builds it so) and that fragment's fields. At scale each is a cache
 * miss. Before fragment i: the runtime fragment 2 * BD_EV_AHEAD on and the field objects of the
 * one BD_EV_AHEAD on (its slots asked for a round earlier); the placement fragment of the dict
 * entry 2 * BD_EV_AHEAD on and the key and field objects of the one BD_EV_AHEAD on (from pd's
 * array of the entries). Hints only: borrowed pointers, nothing kept or decided, no Python code
 * runs. */
#define BD_EV_AHEAD 4

static inline __attribute__((always_inline)) void
bd_evidence_prefetch(PyObject *fragments, Py_ssize_t i, Py_ssize_t n, const bd_pdict *pd)
{
    if (i + 2 * BD_EV_AHEAD < n) {
        PyObject *far = PyTuple_GetItem(fragments, i + 2 * BD_EV_AHEAD);
        if (far != NULL) bd_prefetch_whole(far);
    }
    if (i + BD_EV_AHEAD < n) {
        PyObject *near = PyTuple_GetItem(fragments, i + BD_EV_AHEAD);
        if (near != NULL && bd_runtime_memo.memo.cls != NULL && (PyObject *)Py_TYPE(near) == bd_runtime_memo.memo.cls) {
            PyObject *const *f = (PyObject *const *)((mr_layout_object *)near)->fields;
            for (int k = 0; k < MR_RF_N; k++) {
                if (f[k] != NULL) mr_prefetch_head(f[k], 1);
            }
        }
    }
    /* the placement entries (pd's array: indices checked against its count) */
    if (i + 2 * BD_EV_AHEAD < pd->n) bd_prefetch_object(pd->entries[2 * (i + 2 * BD_EV_AHEAD) + 1]);
    if (i + BD_EV_AHEAD < pd->n) {
        mr_prefetch_head(pd->entries[2 * (i + BD_EV_AHEAD)], 0);
        PyObject *const *pf = mr_pf_fields(pd->entries[2 * (i + BD_EV_AHEAD) + 1]);
        for (int k = 0; pf != NULL && k < MR_PF_N; k++) {
            if (pf[k] != NULL) mr_prefetch_head(pf[k], 1);
        }
    }
}

/* Snapshots of the evidence fragments grouped by worker in `groups` (worker -> list of
 * (fragment_id, position, snapshot)). */
static int
bd_group_snapshots(const bd_table *tb, PyObject *snap_cls, PyObject *rf_cls, PyObject *pf_cls,
                   PyObject *fragments, bd_pdict *pd, PyObject *generation, PyObject *groups)
{
    mr_layout_class lc;
    if (bd_snapshot_layout(tb, snap_cls, &lc) < 0) return BD_ERROR;
    Py_ssize_t n = PyTuple_Size(fragments);
    if (n < 0) return BD_ERROR;
    bd_pdict_rewind(pd);
    for (Py_ssize_t i = 0; i < n; i++) {
        bd_evidence_prefetch(fragments, i, n, pd);
        PyObject *runtime = PyTuple_GetItem(fragments, i);
        if (runtime == NULL) return BD_ERROR;
        PyObject *read[3]; /* worker, fid, snapshot */
        int status = bd_evidence_snapshot(tb, &lc, snap_cls, rf_cls, pf_cls, runtime, pd, generation, read);
        if (status != BD_OK) return status;
        if (read[2] == NULL) continue; /* not in the attested part: no snapshot */
        PyObject *worker = read[0], *fid = read[1], *snapshot = read[2];
        {
            status = BD_ERROR;
            PyObject *position = PyLong_FromSsize_t(i);
            PyObject *entry = position == NULL ? NULL : PyTuple_Pack(3, fid, position, snapshot);
            Py_XDECREF(position);
            if (entry != NULL) {
                PyObject *bucket = PyDict_GetItemWithError(groups, worker); /* borrowed */
                if (bucket != NULL) {
                    if (PyList_Append(bucket, entry) == 0) status = BD_OK;
                } else if (!PyErr_Occurred()) {
                    bucket = PyList_New(1);
                    if (bucket != NULL) {
                        Py_INCREF(entry);
                        if (PyList_SetItem(bucket, 0, entry) == 0 && PyDict_SetItem(groups, worker, bucket) == 0) {
                            status = BD_OK;
                        }
                        Py_DECREF(bucket);
                    }
                }
                Py_DECREF(entry);
            }
        }
        Py_XDECREF(worker);
        Py_XDECREF(fid);
        Py_XDECREF(snapshot);
        if (status != BD_OK) return status;
    }
    return BD_OK;
}

/* bd_compare for bd_sort_by_str: an error (none for ready exact str objects) sets *error and
 * counts as equal (the caller then discards the order). */
static inline int
bd_sort_compare(PyObject *a, PyObject *b, int *error)
{
    int cmp = bd_compare(a, b);
    if (cmp == -2) {
        *error = 1;
        return 0;
    }
    return cmp;
}

/* Sort keys of exact str ids for bd_sort_by_str: every id of at most BD_SORTKEY_CHARS code points
 * shares a prefix of L code points with the others of that size (the longest such L); its key
 * packs its next eight code points big-endian, one byte each, 0 past its end, and exists (ok)
 * when each of them is below 256. Two ids with keys that differ compare as their keys: with
 * the prefix equal, the first differing byte is either two code points (the order of the ids)
 * or a 0 past the end of the shorter id against a code point of the longer (the prefix order:
 * the shorter first). Equal keys, or an id without a key, compare in full (bd_compare). Most
 * comparisons of a part's ids (e.g. "dst-5-123") are then one integer comparison instead of a
 * PyUnicode_Compare call. */
#define BD_SORTKEY_CHARS 64

typedef struct {
    uint64_t *key;
    unsigned char *ok;
} bd_sortkeys;

/* Fills sk for strs[0..n): 0, -1 with an exception. Runs no Python code. The ids' code points
 * are copied once into one temporary array (PyUnicode_AsUCS4; the key array holds each id's
 * offset there until its key replaces it). */
static int
bd_sortkeys_fill(PyObject *const *strs, Py_ssize_t n, bd_sortkeys *sk)
{
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len = PyUnicode_GetLength(strs[i]);
        if (len < 0) return -1;
        sk->key[i] = (uint64_t)total;
        if (len <= BD_SORTKEY_CHARS) total += (size_t)len; /* (at most 64 * n: no overflow) */
    }
    Py_UCS4 *chars = mr_alloc_array(total + 1, sizeof(Py_UCS4));
    if (chars == NULL) return -1;
    Py_ssize_t first = -1, prefix = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* the copies, and the prefix the keyed ids share */
        Py_ssize_t len = PyUnicode_GetLength(strs[i]);
        if (len < 0 || len > BD_SORTKEY_CHARS) continue;
        Py_UCS4 *own = chars + sk->key[i];
        if (len > 0 && PyUnicode_AsUCS4(strs[i], own, len, 0) == NULL) {
            PyMem_Free(chars);
            return -1;
        }
        if (first < 0) {
            first = i;
            prefix = len;
            continue;
        }
        const Py_UCS4 *base = chars + sk->key[first];
        Py_ssize_t m = len < prefix ? len : prefix, j = 0;
        while (j < m && own[j] == base[j]) j++;
        prefix = j;
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* the keys */
        Py_ssize_t len = PyUnicode_GetLength(strs[i]);
        const Py_UCS4 *own = chars + sk->key[i];
        sk->ok[i] = 0;
        sk->key[i] = 0;
        if (len < 0 || len > BD_SORTKEY_CHARS) continue;
        uint64_t key = 0;
        int ok = 1;
        for (Py_ssize_t p = prefix; p < prefix + 8; p++) {
            Py_UCS4 c = p < len ? own[p] : 0;
            if (c > 255) ok = 0;
            key = (key << 8) | (uint64_t)(c & 0xFF);
        }
        sk->key[i] = key;
        sk->ok[i] = (unsigned char)ok;
    }
    PyMem_Free(chars);
    return 0;
}

/* ids a and b (positions) in bd_sort_by_str's order: their keys when both have one and they
 * differ, else bd_sort_compare. */
static inline int
bd_sort_idx_compare(Py_ssize_t a, Py_ssize_t b, PyObject *const *keys, const bd_sortkeys *sk, int *error)
{
    if (sk != NULL && sk->ok[a] && sk->ok[b] && sk->key[a] != sk->key[b]) return sk->key[a] < sk->key[b] ? -1 : 1;
    return bd_sort_compare(keys[a], keys[b], error);
}

/* Sorts idx[0..n) (positions into keys, exact str) stably by keys[idx[k]] in code point order
 * (bd_compare, or the sort keys sk when not NULL: no Python code runs); tmp: room for n
 * positions. A top-down merge sort that skips the merge of two halves already in order (runs of
 * increasing ids stay cheap). *error set when a comparison failed. */
static void
bd_sort_by_str(Py_ssize_t *idx, Py_ssize_t *tmp, Py_ssize_t n, PyObject *const *keys, const bd_sortkeys *sk,
               int *error)
{
    if (n < 2) return;
    if (n <= 8) { /* insertion sort: stable */
        for (Py_ssize_t i = 1; i < n; i++) {
            Py_ssize_t v = idx[i], j = i;
            while (j > 0 && bd_sort_idx_compare(idx[j - 1], v, keys, sk, error) > 0) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = v;
        }
        return;
    }
    Py_ssize_t half = n / 2;
    bd_sort_by_str(idx, tmp, half, keys, sk, error);
    bd_sort_by_str(idx + half, tmp, n - half, keys, sk, error);
    if (bd_sort_idx_compare(idx[half - 1], idx[half], keys, sk, error) <= 0) return; /* in order */
    Py_ssize_t i = 0, j = half, k = 0;
    while (i < half && j < n) {
        /* the left one first on equal keys (stable) */
        if (bd_sort_idx_compare(idx[j], idx[i], keys, sk, error) < 0) tmp[k++] = idx[j++];
        else tmp[k++] = idx[i++];
    }
    while (i < half) tmp[k++] = idx[i++];
    /* the rest of the right half is in place already */
    for (Py_ssize_t m = 0; m < k; m++) idx[m] = tmp[m];
}

/* The table of bd_group_snapshots_one from its snapshots and their ids in evidence order
 * (borrowed; count of them, every one of worker worker0, NULL when count is 0): *table a new
 * dict {worker0: the snapshots sorted by id, stably} (empty when count is 0); increasing: the
 * ids strictly increase (their order is the sorted one). BD_OK, or BD_ERROR (*table NULL).
 * Shared with attest_many's pair loop (bd_pair_snaps), which collects the same arrays. */
static int
bd_one_worker_table(PyObject *const *snaps, PyObject *const *fids, Py_ssize_t count, PyObject *worker0,
                    int increasing, PyObject **table)
{
    int status = BD_ERROR;
    *table = NULL;
    Py_ssize_t *idx = NULL, *tmp = NULL;
    bd_sortkeys sk = {NULL, NULL};
    if (!increasing) {
        idx = mr_alloc_array((size_t)count, sizeof(Py_ssize_t));
        tmp = idx == NULL ? NULL : mr_alloc_array((size_t)count, sizeof(Py_ssize_t));
        sk.key = tmp == NULL ? NULL : mr_alloc_array((size_t)count, sizeof(uint64_t));
        sk.ok = sk.key == NULL ? NULL : mr_alloc_array((size_t)count, 1);
    }
    PyObject *items = increasing || sk.ok != NULL ? PyTuple_New(count) : NULL;
    if (items != NULL) {
        int error = 0;
        if (!increasing) {
            for (Py_ssize_t k = 0; k < count; k++) idx[k] = k;
            if (bd_sortkeys_fill(fids, count, &sk) < 0) error = 1;
            else bd_sort_by_str(idx, tmp, count, fids, &sk, &error);
        }
        for (Py_ssize_t k = 0; k < count && !error; k++) {
            PyObject *snapshot = snaps[increasing ? k : idx[k]];
            if (PyTuple_SetItem(items, k, Py_NewRef(snapshot)) < 0) error = 1; /* steals */
        }
        *table = error ? NULL : PyDict_New();
        if (*table != NULL && (worker0 == NULL || PyDict_SetItem(*table, worker0, items) == 0)) status = BD_OK;
        else Py_CLEAR(*table);
        Py_DECREF(items);
    }
    PyMem_Free(idx);
    PyMem_Free(tmp);
    PyMem_Free(sk.key);
    PyMem_Free(sk.ok);
    return status;
}

/* bd_group_snapshots then bd_sorted_table, for evidence whose snapshotted fragments all have one
 * worker (equal exact str): the table {worker: snapshots sorted by runtime fragment id, stably}
 * is built directly, with no (id, position, snapshot) entry, position int or list sort: the
 * entries the general path sorts by (id, position) have distinct positions increasing in
 * evidence order, so their order is the stable order by id, which bd_sort_by_str gives (ids
 * strictly increasing in evidence order, the common case of sorted ids, need no sort at all).
 * *table a new dict (BD_OK), or NULL with BD_OK when that shape is not met (nothing kept: the
 * caller runs the general path, which reads the same values again and decides), or
 * BD_FALLBACK / BD_ERROR: the general path's status for the first fragment that has one (the
 * same reads in the same order up to there). The ids are exact str (bd_dget_str): comparing
 * them runs no Python code and cannot fail, as in the general path's sort. */
static int
bd_group_snapshots_one(const bd_table *tb, PyObject *snap_cls, PyObject *rf_cls, PyObject *pf_cls,
                       PyObject *fragments, bd_pdict *pd, PyObject *generation, PyObject **table)
{
    *table = NULL;
    mr_layout_class lc;
    if (bd_snapshot_layout(tb, snap_cls, &lc) < 0) return BD_ERROR;
    Py_ssize_t n = PyTuple_Size(fragments);
    if (n < 0) return BD_ERROR;
    /* the snapshots and their ids in evidence order (new references; count of them kept) */
    PyObject **snaps = mr_alloc_array((size_t)n, sizeof(PyObject *));
    PyObject **fids = snaps == NULL ? NULL : mr_alloc_array((size_t)n, sizeof(PyObject *));
    if (fids == NULL) {
        PyMem_Free(snaps);
        return BD_ERROR;
    }
    Py_ssize_t count = 0;
    PyObject *worker0 = NULL; /* owned */
    int status = BD_OK, shaped = 1, increasing = 1;
    bd_pdict_rewind(pd);
    for (Py_ssize_t i = 0; i < n && status == BD_OK && shaped; i++) {
        bd_evidence_prefetch(fragments, i, n, pd);
        PyObject *runtime = PyTuple_GetItem(fragments, i);
        if (runtime == NULL) { status = BD_ERROR; break; }
        PyObject *read[3]; /* worker, fid, snapshot */
        status = bd_evidence_snapshot(tb, &lc, snap_cls, rf_cls, pf_cls, runtime, pd, generation, read);
        if (status != BD_OK) break;
        if (read[2] == NULL) continue; /* not in the attested part: no snapshot */
        PyObject *worker = read[0];
        /* the shape: one worker (exact str, read as exact non-empty str) */
        if (worker0 == NULL) {
            worker0 = Py_NewRef(worker);
        } else if (worker != worker0) {
            int same = bd_same_str(worker, worker0);
            if (same < 0) status = BD_ERROR;
            else if (!same) shaped = 0;
        }
        Py_DECREF(worker);
        if (status != BD_OK || !shaped) {
            Py_DECREF(read[1]);
            Py_DECREF(read[2]);
            break;
        }
        if (increasing && count > 0) {
            int cmp = bd_compare(fids[count - 1], read[1]);
            if (cmp == -2) status = BD_ERROR;
            else if (cmp >= 0) increasing = 0;
        }
        fids[count] = read[1];
        snaps[count] = read[2];
        count++;
    }
    if (status == BD_OK && shaped) status = bd_one_worker_table(snaps, fids, count, worker0, increasing, table);
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_DECREF(fids[k]);
        Py_DECREF(snaps[k]);
    }
    PyMem_Free(fids);
    PyMem_Free(snaps);
    Py_XDECREF(worker0);
    return status;
}

/* The attested snapshots of an attestation's evidence fragments (`fragments`, an exact tuple)
 * per worker, sorted by runtime fragment id, in a new dict *table (worker -> tuple): one worker
 * directly (bd_group_snapshots_one), else grouped and sorted. placement_dict: the attestation's
 * _placement_dict, an exact dict. The loops borrow the placement dict's entries (bd_pdict): the
 * collector is off for them, so no gc callback or finalizer runs (nor can change the dict) while
 * they are read. BD_OK, BD_FALLBACK, BD_ERROR (*table NULL unless BD_OK). */
static int
bd_attested_table(const bd_table *tb, PyObject *snap_cls, PyObject *rf_cls, PyObject *pf_cls,
                  PyObject *placement_dict, PyObject *fragments, PyObject *generation, PyObject **table)
{
    PyObject *groups = NULL;
    *table = NULL;
    const int collector_was_enabled = PyGC_Disable();
    bd_pdict pd;
    int status = bd_pdict_load(placement_dict, &pd);
    if (status == BD_OK) {
        status = bd_group_snapshots_one(tb, snap_cls, rf_cls, pf_cls, fragments, &pd, generation, table);
    }
    if (status == BD_OK && *table == NULL) {
        status = BD_ERROR;
        groups = PyDict_New();
        if (groups != NULL) {
            status = bd_group_snapshots(tb, snap_cls, rf_cls, pf_cls, fragments, &pd, generation, groups);
        }
        if (status == BD_OK) status = bd_sorted_table(groups, table);
    }
    /* the keys no aligned read proved and no probe needed checked now: the verdict of
     * pd_plain_keys before the loops */
    if (status == BD_OK && !bd_pdict_plain(&pd)) status = BD_FALLBACK;
    bd_pdict_free(&pd);
    if (collector_was_enabled) PyGC_Enable();
    Py_XDECREF(groups);
    if (status != BD_OK) Py_CLEAR(*table);
    return status;
}

/* The attestation's evidence, placement dict, evidence fragments and generation as
 * attested_executors reads them (new references in v[0..3]), checked: exact att_cls / ev_cls,
 * an exact dict, an exact tuple. BD_OK, BD_FALLBACK, BD_ERROR (nothing kept unless BD_OK). */
static int
bd_attested_inputs(const bd_table *tb, PyObject *att_cls, PyObject *ev_cls, PyObject *attestation, PyObject **v)
{
    PyObject *const *nm = tb->nm;
    v[0] = v[1] = v[2] = v[3] = NULL;
    int status = BD_FALLBACK;
    if ((PyObject *)Py_TYPE(attestation) != att_cls) goto done;
    status = bd_get(attestation, nm[N_EVIDENCE], &v[0]);
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    if ((PyObject *)Py_TYPE(v[0]) != ev_cls) goto done;
    status = bd_get(attestation, nm[N_PLACEMENT_DICT], &v[1]);
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    /* probed with each evidence fragment's id: a plain dict only (plain_dict.h; a key forged
     * into a str subclass would run its __eq__ in the probe: AUDIT5 F5), checked lazily by the
     * evidence loops through bd_pdict (before their first probe, else at their end) */
    if (!PyDict_CheckExact(v[1])) goto done;
    status = bd_get(v[0], nm[N_FRAGMENTS], &v[2]);
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    if (!PyTuple_CheckExact(v[2])) goto done;
    status = bd_get(v[0], nm[N_GENERATION], &v[3]);
done:
    if (status != BD_OK) {
        for (int k = 0; k < 4; k++) Py_CLEAR(v[k]);
    }
    return status;
}

PyDoc_STRVAR(attested_executors_doc,
"attested_executors(executor_cls, snapshot_cls, attestation_cls, evidence_cls,\n"
"                   runtime_fragment_cls, attestation, placement_id, participant_id,\n"
"                   placement_digest, rank, placement_fragment_cls=None)\n"
"--\n\n"
"(table, rows): table maps each worker of the attestation's evidence fragments that have an\n"
"attested placement fragment (attestation._placement_dict) to their snapshots sorted by\n"
"runtime fragment id; rows holds (worker_id, snapshots, executor) per worker in worker order,\n"
"the executor built like ExecutorTransferPlan(...) over those snapshots. None when not decided\n"
"here (a check of ExecutorTransferPlan.__post_init__ not visibly satisfied, inexact types).\n"
"placement_fragment_cls (optional, None: not given): placement fragments of exactly that class\n"
"have their fields read from their instance dict (the same values getattr returns).");

static PyObject *bd_attested_executors_with(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                            PyObject *carried);

static PyObject *
bd_attested_executors(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return bd_attested_executors_with(self, args, nargs, NULL);
}

/* attested_executors; carried (borrowed, or NULL): the table bd_attested_table built for this
 * attestation in attest_many (see bd_carrier), used instead of building it again. */
static PyObject *
bd_attested_executors_with(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *carried)
{
    bd_table tb;
    if (nargs != 10 && nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "attested_executors expects 10 or 11 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    PyObject *const *nm = tb.nm;
    if (bd_check_heap_types(args, 5) < 0) return NULL;
    PyObject *ex_cls = args[0], *snap_cls = args[1], *att_cls = args[2], *ev_cls = args[3], *rf_cls = args[4];
    PyObject *pf_cls = nargs == 11 && args[10] != Py_None ? args[10] : NULL;
    if (pf_cls != NULL && bd_check_heap_types(&pf_cls, 1) < 0) return NULL;
    PyObject *attestation = args[5];
    /* instance_id, placement_id, participant_id, placement_digest, runtime_lease_id, rank */
    PyObject *values[6] = {NULL, args[6], args[7], args[8], NULL, args[9]};
    PyObject *inputs[4] = {NULL, NULL, NULL, NULL}; /* evidence, placement dict, fragments, generation */
    PyObject *table = NULL, *workers = NULL, *rows = NULL, *result = NULL;
    int status = bd_attested_inputs(&tb, att_cls, ev_cls, attestation, inputs);
    if (status != BD_OK) goto done;
    PyObject *evidence = inputs[0], *placement_dict = inputs[1], *fragments = inputs[2], *generation = inputs[3];
    /* The executor's identifiers: exact non-empty str, a SHA-256 digest. */
    status = bd_get_str(evidence, nm[N_INSTANCE_ID], &values[0]);
    if (status != BD_OK) goto done;
    status = bd_get_str(evidence, nm[N_LEASE_ID], &values[4]);
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    for (int k = 1; k <= 2; k++) {
        if (!PyUnicode_CheckExact(values[k]) || PyUnicode_GetLength(values[k]) < 1) goto done;
    }
    int digest = bd_is_digest(values[3]);
    if (digest <= 0) {
        status = digest < 0 ? BD_ERROR : BD_FALLBACK;
        goto done;
    }
    /* the table: carried from attest_many (bd_carrier_table: built there by bd_attested_table
     * from this very attestation, in a call whose caller vouches that nothing changed since),
     * else built now */
    if (carried != NULL) {
        table = Py_NewRef(carried);
    } else {
        status = bd_attested_table(&tb, snap_cls, rf_cls, pf_cls, placement_dict, fragments, generation, &table);
        if (status != BD_OK) goto done;
    }
    status = BD_ERROR;
    workers = PyDict_Keys(table);
    if (workers == NULL || PyList_Sort(workers) < 0) goto done;
    Py_ssize_t nworkers = PyList_Size(workers);
    if (nworkers < 0) goto done;
    rows = mr_gc_hide(PyTuple_New(nworkers)); /* out of the collector until full (gctrack.h) */
    if (rows == NULL) goto done;
    for (Py_ssize_t w = 0; w < nworkers; w++) {
        PyObject *worker = PyList_GetItem(workers, w);
        PyObject *snapshots = worker == NULL ? NULL : PyDict_GetItemWithError(table, worker);
        if (snapshots == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "binder: worker table changed");
            status = BD_ERROR;
            goto done;
        }
        PyObject *executor = NULL;
        status = bd_executor(&tb, ex_cls, values, worker, snapshots, attestation, &executor);
        if (status != BD_OK) goto done;
        PyObject *row = PyTuple_Pack(3, worker, snapshots, executor);
        Py_DECREF(executor);
        if (row == NULL || PyTuple_SetItem(rows, w, row) < 0) {
            status = BD_ERROR;
            goto done;
        }
    }
    mr_gc_show(rows); /* full */
    result = PyTuple_Pack(2, table, rows);
    status = result == NULL ? BD_ERROR : BD_OK;
done:
    for (int k = 0; k < 4; k++) Py_XDECREF(inputs[k]);
    Py_XDECREF(values[0]);
    Py_XDECREF(values[4]);
    Py_XDECREF(table);
    Py_XDECREF(workers);
    Py_XDECREF(rows);
    if (status == BD_OK) return result;
    Py_XDECREF(result);
    if (status == BD_ERROR) return NULL;
    Py_RETURN_NONE;
}


/* ------------------------------------------------------------------------------------------
 * bound_fragments */

/* The bound fragments' builders' memo (bound_fragments, bound_fragments_ordered): see
 * bd_bound_check. */
static mr_layout_memo bd_bound_memo;

/* Per call: *lc accepts bound_cls when it is a C-owned layout of BoundWeightFragment's fields
 * (layout.h mr_bound_layout; bound fragments are then built with direct stores), else is
 * cleared (built through their instance dict). BD_OK, BD_FALLBACK for a class whose instances
 * have no __dict__ that lc did not accept (nothing is built: the Python path decides), BD_ERROR. */
static int
bd_bound_check(PyObject *bound_cls, mr_layout_class *lc)
{
    if (mr_bound_layout(&bd_bound_memo, lc, bound_cls)) return BD_OK;
    int has_dict = mr_class_has_dict(bound_cls);
    return has_dict < 0 ? BD_ERROR : has_dict ? BD_OK : BD_FALLBACK;
}

/* One trusted bound fragment: the bound_cls instance of (placement fragment, runtime fragment,
 * fences: instance_id, lease_id, generation), no owner and the attestation, stored directly in
 * its layout when lc accepted bound_cls (mr_layout_new: what __init__ stores, without the checks
 * the caller has proven; tracked unless every value is inert, judged only when judge is
 * non-zero: a caller that offers it to mr_untrack_bound right after passes 0, since an
 * attestation (tracked: it holds its caches) fails mr_layout_new's rule after every other field
 * was judged, and mr_untrack_bound judges them again), else its dict filled in field order. New
 * reference, NULL with an exception. */
static PyObject *
bd_bound_new(PyObject *const *nm, const mr_layout_class *lc, const mr_layout_alloc *la, PyObject *bound_cls,
             PyObject *placement_fragment, PyObject *runtime, PyObject *const *fences, PyObject *attestation, int judge)
{
    if (lc->cls != NULL && lc->cls == bound_cls) {
        PyObject *const values[MR_BF_N] = {placement_fragment, runtime, fences[0], fences[1], fences[2], Py_None,
                                           attestation};
        return mr_layout_new_with(la, lc, values, MR_BF_N, judge);
    }
    PyObject *dict = NULL, *bound = bd_new(bound_cls, &dict);
    if (bound != NULL && PyDict_SetItem(dict, nm[N_PLACEMENT], placement_fragment) == 0 &&
        PyDict_SetItem(dict, nm[N_BINDING], runtime) == 0 &&
        PyDict_SetItem(dict, nm[N_INSTANCE_ID], fences[0]) == 0 &&
        PyDict_SetItem(dict, nm[N_RUNTIME_LEASE_ID], fences[1]) == 0 &&
        PyDict_SetItem(dict, nm[N_LEASE_GENERATION], fences[2]) == 0 &&
        PyDict_SetItem(dict, nm[N_OWNER], Py_None) == 0 &&
        PyDict_SetItem(dict, nm[N_ATTESTATION], attestation) == 0) {
        bound = bd_finish(bound, &dict, T_BOUND);
    } else {
        Py_CLEAR(bound);
    }
    Py_XDECREF(dict);
    return bound;
}

/* The row (pfid, bound) of one trusted bound fragment (bd_bound_new). New reference, NULL with an
 * exception. */
static PyObject *
bd_bound_row(PyObject *const *nm, const mr_layout_class *lc, PyObject *bound_cls, PyObject *placement_fragment,
             PyObject *runtime, PyObject *pfid, PyObject *const *fences, PyObject *attestation)
{
    PyObject *bound = bd_bound_new(nm, lc, NULL, bound_cls, placement_fragment, runtime, fences, attestation, 1);
    PyObject *row = bound == NULL ? NULL : PyTuple_Pack(2, pfid, bound);
    Py_XDECREF(bound);
    return row;
}

PyDoc_STRVAR(bound_fragments_doc,
"bound_fragments(bound_cls, attestation_cls, part_fragments, attestation)\n"
"--\n\n"
"((placement_fragment_id, bound), ...) as _planner/binding.py _attested_bound_fragments builds\n"
"them on its trusted path: for each fragment of the exact tuple part_fragments, the attested\n"
"evidence fragment of its id (attestation._binding_dict) joined with the evidence fences and\n"
"the attestation, no owner, when attestation._placement_dict holds that very placement\n"
"fragment. None when not decided here (a fragment off the trusted path, inexact types).");

static PyObject *
bd_bound_fragments(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "bound_fragments expects 4 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    PyObject *const *nm = tb.nm;
    if (bd_check_heap_types(args, 2) < 0) return NULL;
    PyObject *bound_cls = args[0], *att_cls = args[1], *part_fragments = args[2], *attestation = args[3];
    PyObject *evidence = NULL, *binding_dict = NULL, *placement_dict = NULL;
    PyObject *fences[3] = {NULL, NULL, NULL}; /* instance_id, lease_id, generation */
    PyObject *rows = NULL;
    mr_layout_class lc;
    int status = bd_bound_check(bound_cls, &lc);
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    if ((PyObject *)Py_TYPE(attestation) != att_cls || !PyTuple_CheckExact(part_fragments)) goto done;
    status = bd_get(attestation, nm[N_EVIDENCE], &evidence);
    if (status == BD_OK) status = bd_get(attestation, nm[N_BINDING_DICT], &binding_dict);
    if (status == BD_OK) status = bd_get(attestation, nm[N_PLACEMENT_DICT], &placement_dict);
    if (status == BD_OK) status = bd_get(evidence, nm[N_INSTANCE_ID], &fences[0]);
    if (status == BD_OK) status = bd_get(evidence, nm[N_LEASE_ID], &fences[1]);
    if (status == BD_OK) status = bd_get(evidence, nm[N_GENERATION], &fences[2]);
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    /* both probed with each fragment's id: plain dicts only (plain_dict.h, AUDIT5 F5) */
    if (!pd_plain_keys(binding_dict) || !pd_plain_keys(placement_dict)) goto done;
    Py_ssize_t n = PyTuple_Size(part_fragments);
    if (n < 0) { status = BD_ERROR; goto done; }
    rows = mr_gc_hide(PyTuple_New(n)); /* out of the collector until full (gctrack.h) */
    if (rows == NULL) { status = BD_ERROR; goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *placement_fragment = PyTuple_GetItem(part_fragments, i);
        if (placement_fragment == NULL) { status = BD_ERROR; goto done; }
        PyObject *pfid = NULL;
        status = bd_get_str(placement_fragment, nm[N_PFID], &pfid);
        if (status != BD_OK) goto done;
        PyObject *runtime = PyDict_GetItemWithError(binding_dict, pfid); /* borrowed */
        PyObject *attested = runtime == NULL ? NULL : PyDict_GetItemWithError(placement_dict, pfid);
        if (attested != placement_fragment) {
            Py_DECREF(pfid);
            status = PyErr_Occurred() ? BD_ERROR : BD_FALLBACK;
            goto done;
        }
        status = BD_ERROR;
        PyObject *row = bd_bound_row(nm, &lc, bound_cls, placement_fragment, runtime, pfid, fences, attestation);
        Py_DECREF(pfid);
        if (row == NULL || PyTuple_SetItem(rows, i, row) < 0) goto done;
        status = BD_OK;
    }
    status = BD_OK;
done:
    Py_XDECREF(evidence);
    Py_XDECREF(binding_dict);
    Py_XDECREF(placement_dict);
    for (int k = 0; k < 3; k++) Py_XDECREF(fences[k]);
    if (status == BD_OK) {
        mr_gc_show(rows); /* full */
        return rows;
    }
    Py_XDECREF(rows);
    if (status == BD_ERROR) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------
 * bound_fragments_ordered */

PyDoc_STRVAR(bound_fragments_ordered_doc,
"bound_fragments_ordered(bound_cls, attestation_cls, region_cls, parts, attestations, operations,\n"
"                        which, as_map=False)\n"
"--\n\n"
"(rows_0, rows_1, ...) where rows_k is what bound_fragments(bound_cls, attestation_cls, parts[k],\n"
"attestations[k]) returns (the same rows, values and order), with every bound fragment allocated\n"
"in the order the operations first name its placement fragment object (the field target for\n"
"which 0, source for 1, of the exact region_cls operations of the exact tuple operations, matched\n"
"by identity and never dereferenced; any other operation gives no hint), the remaining ones after\n"
"them in part order: the later passes that follow op.target / op.source then read them in memory\n"
"order. None when not decided here: parts or attestations not exact tuples of one length, or a\n"
"part bound_fragments would not decide.\n\n"
"With as_map True, the same bound fragments (same allocation order) are returned as the dict\n"
"{placement_fragment_id: bound} that _planner/binding.py _bound_fragments builds from those rows\n"
"(keys inserted in part order, then row order; no row tuple is built); a placement fragment id\n"
"met twice raises its ValueError('duplicate bound target|source placement fragment: <id>').");

typedef struct {
    PyObject *placement; /* strong references */
    PyObject *runtime;
    PyObject *pfid;
    PyObject *bound; /* as_map: the bound fragment once made (strong reference) */
    Py_ssize_t part;
    Py_ssize_t pos;
    Py_ssize_t q; /* its place in the walk's queue once queued (positional form) */
    int made; /* made, or queued to be made in walk order (bound_fragments_ordered) */
} bd_pending;

/* The positional form of one side's bound map (bind_regions_ordered: built and read within one
 * C call, in which no Python code runs): made[q] the bound fragment queued q-th by the operation
 * walk (strong references, first-use order), op_q[j] the queue position of the bound fragment of
 * operation j's field (target for side 0, source for 1), or -1 when that field is not one of the
 * parts' placement fragment objects (or operation j is not an exact region). Built only when the
 * side's placement fragment ids are pairwise distinct, so that bound fragment is what the map
 * {placement_fragment_id: bound} holds under that field's id. */
typedef struct {
    PyObject **made;
    Py_ssize_t n_made;
    int32_t *op_q;
    /* (targets only) the operations name every fragment of the parts, and each part's attested
     * evidence lists as many runtime fragments as the part has fragments: see bd_ordered_build */
    int complete;
} bd_side_pos;

static void
bd_side_pos_clear(bd_side_pos *pos)
{
    for (Py_ssize_t q = 0; pos->made != NULL && q < pos->n_made; q++) Py_XDECREF(pos->made[q]);
    PyMem_Free(pos->made);
    PyMem_Free(pos->op_q);
    pos->made = NULL;
    pos->op_q = NULL;
    pos->n_made = 0;
    pos->complete = 0;
}


/* The parts' next fragments for bound_fragments_ordered's operation walk: per part the first
 * entry of pending not yet made (next[p], up to end[p]) and its placement fragment (obj[p], NULL
 * past the end); hits and misses decide when the heads stop being tried. Up to BD_HEADS_LINEAR
 * parts the heads are scanned in part order (the first part whose head it is); more parts keep
 * them by address as well (tab: head -> part, where no object is two parts' head: once one is,
 * the heads are no longer tried and the caller's table decides, as it does for every lookup
 * with n 0). */
#define BD_HEADS_LINEAR 32

typedef struct {
    Py_ssize_t n, last, hits, misses;
    Py_ssize_t *next, *end;
    PyObject **obj;
    bd_idslot *tab;
    size_t mask;
    Py_ssize_t next_local[BD_HEADS_LINEAR], end_local[BD_HEADS_LINEAR];
    PyObject *obj_local[BD_HEADS_LINEAR];
} bd_heads;

static void
bd_heads_free(bd_heads *h)
{
    if (h->next != h->next_local) PyMem_Free(h->next);
    if (h->end != h->end_local) PyMem_Free(h->end);
    if (h->obj != h->obj_local) PyMem_Free(h->obj);
    PyMem_Free(h->tab);
    h->next = h->next_local;
    h->end = h->end_local;
    h->obj = h->obj_local;
    h->tab = NULL;
    h->n = 0;
}

static void
bd_heads_advance(bd_heads *h, const bd_pending *pending, Py_ssize_t p)
{
    PyObject *old = h->obj[p];
    while (h->next[p] < h->end[p] && pending[h->next[p]].made) h->next[p]++;
    h->obj[p] = h->next[p] < h->end[p] ? pending[h->next[p]].placement : NULL;
    /* a hint: the part's entry after it, read when this head is taken (with many parts, one
     * line per part: the parts' runs are too many streams for the hardware's prefetcher) */
    if (h->next[p] + 1 < h->end[p]) __builtin_prefetch(&pending[h->next[p] + 1]);
    if (h->tab != NULL && old != h->obj[p] && !bd_heads_move(h->tab, h->mask, old, h->obj[p], p)) {
        bd_heads_free(h); /* an object two parts' head: the table alone from now on */
    }
}

/* pending[0 .. count) in part order, each entry's part among m (0: no heads, the table alone).
 * Never raises (no memory for the heads of many parts: none, the table alone). */
static void
bd_heads_init(bd_heads *h, const bd_pending *pending, Py_ssize_t count, Py_ssize_t m)
{
    h->next = h->next_local;
    h->end = h->end_local;
    h->obj = h->obj_local;
    h->tab = NULL;
    h->mask = 0;
    h->n = m;
    h->last = 0;
    h->hits = h->misses = 0;
    if (m > BD_HEADS_LINEAR) {
        h->next = mr_alloc_array((size_t)m, sizeof(Py_ssize_t));
        h->end = mr_alloc_array((size_t)m, sizeof(Py_ssize_t));
        h->obj = mr_alloc_array((size_t)m, sizeof(PyObject *));
        h->tab = bd_idtab_new((size_t)m, &h->mask);
        if (h->next == NULL || h->end == NULL || h->obj == NULL || h->tab == NULL) {
            PyErr_Clear();
            if (h->next == NULL) h->next = h->next_local;
            if (h->end == NULL) h->end = h->end_local;
            if (h->obj == NULL) h->obj = h->obj_local;
            bd_heads_free(h);
            return;
        }
    }
    for (Py_ssize_t p = 0; p < h->n; p++) {
        h->next[p] = h->end[p] = 0;
        h->obj[p] = NULL;
    }
    for (Py_ssize_t g = count - 1; g >= 0 && h->n > 0; g--) h->next[pending[g].part] = g; /* first entry */
    for (Py_ssize_t g = 0; g < count && h->n > 0; g++) h->end[pending[g].part] = g + 1;
    for (Py_ssize_t p = 0; p < h->n; p++) {
        if (h->end[p] == 0) h->next[p] = 0; /* an empty part */
        bd_heads_advance(h, pending, p);
    }
}

/* The entry of fragment when it is some part's next fragment (the first such part), advanced
 * past; else -1 (the caller's table decides). */
static Py_ssize_t
bd_heads_take(bd_heads *h, const bd_pending *pending, PyObject *fragment)
{
    if (h->n == 0) return -1;
    Py_ssize_t p = h->last;
    if (h->obj[p] != fragment) {
        if (h->tab != NULL) {
            p = bd_idtab_get(h->tab, h->mask, fragment); /* the only part whose head it is */
            if (p < 0) p = h->n;
        } else {
            for (p = 0; p < h->n && h->obj[p] != fragment; p++) {
            }
        }
        if (p == h->n) {
            /* mostly elsewhere: the table alone from now on */
            if (++h->misses > 64 && h->misses > 4 * h->hits) bd_heads_free(h);
            return -1;
        }
    }
    h->hits++;
    h->last = p;
    Py_ssize_t g = h->next[p];
    h->next[p]++;
    bd_heads_advance(h, pending, p);
    return g;
}

/* Builds entry's row into its part's rows tuple (an entry of result), or with result NULL (as_map)
 * only its bound fragment into entry->bound (judged for the collector unless offered: the caller
 * offers it to mr_untrack_bound at once, see bd_bound_new). 0 ok, -1 error. */
static int
bd_make_pending(PyObject *const *nm, const mr_layout_class *lc, const mr_layout_alloc *la, PyObject *bound_cls,
                bd_pending *entry, PyObject *const *fences, PyObject *attestations, PyObject *result, int offered)
{
    PyObject *attestation = PyTuple_GetItem(attestations, entry->part);
    if (attestation == NULL) return -1;
    if (result == NULL) {
        entry->bound = bd_bound_new(nm, lc, la, bound_cls, entry->placement, entry->runtime, fences + 3 * entry->part,
                                    attestation, !offered);
        if (entry->bound == NULL) return -1;
        entry->made = 1;
        return 0;
    }
    PyObject *rows = PyTuple_GetItem(result, entry->part);
    if (rows == NULL) return -1;
    PyObject *row = bd_bound_row(nm, lc, bound_cls, entry->placement, entry->runtime, entry->pfid,
                                 fences + 3 * entry->part, attestation);
    if (row == NULL || PyTuple_SetItem(rows, entry->pos, row) < 0) return -1; /* steals row */
    entry->made = 1;
    return 0;
}

/* From this many objects of one class a bulk builder describes the class for mr_layout_new_with
 * (its three attribute reads cost about what 20 allocations save). */
#define BD_BULK_ALLOC_MIN 256

/* bound_fragments_ordered makes its queued entries with hints for the placement and runtime
 * fragments of the entry this many on (and for that entry, twice as far). */
#define BD_MAKE_AHEAD 4

/* For the operation walk's hints: op's target (side 0) or source field, read from its slots when
 * op is an exact region_cls in the checked layout (rl); else NULL. Never raises (NULL op: NULL). */
static inline PyObject *
bd_walk_field(PyObject *op, PyObject *region_cls, const mr_layout_class *rl, long side)
{
    if (op == NULL || (PyObject *)Py_TYPE(op) != region_cls) return NULL;
    PyObject *const *fields = mr_layout_fields(op, rl);
    return fields == NULL ? NULL : fields[side == 0 ? MR_RG_TARGET : MR_RG_SOURCE];
}

/* Forward: the placement fragment ids of pending[0 .. count) pairwise distinct (BD_OK), else
 * BD_FALLBACK, or BD_ERROR (defined with logical_target_cover's id table below). */
static int bd_pending_distinct(const bd_pending *pending, Py_ssize_t count);

/* bound_fragments_ordered's work for one side (side 0 target, 1 source): with pos NULL, *out its
 * result (a new reference: the rows tuple, or with as_map the map); with pos, the side's
 * positional form (bd_side_pos) instead of a map, only the bound fragments the operations name
 * made (the map's others are never read), and BD_FALLBACK where the map would have raised its
 * duplicate error (ids not pairwise distinct); with att (bind_regions' untracking memo), each one
 * made is offered to the collector check (mr_untrack_bound) there, while its fields are in the
 * cache: bind_regions would offer it when it meets it, with nothing changed in between (one C
 * call: no Python code runs, and nothing is cached on the attestations), so it decides the same
 * (and then finds it untracked, or decides again the same). BD_OK, BD_FALLBACK, BD_ERROR.
 *
 * The positional targets are complete (pos->complete) when every entry was queued (the
 * operations name every fragment of the parts) and each part's attestation's evidence lists
 * exactly as many fragments as the part. Then the runtime fragments the bound targets hold are
 * every one of those evidence fragments: each entry's runtime fragment is the part's
 * _binding_dict[pfid], a dict built as {f.placement_fragment_id: f for f in evidence.fragments}
 * (attest and the pure-Python attestation alike); the n pairwise distinct ids of a part's n
 * fragments were all found in it, so it has n keys, and n keys from n evidence fragments are one
 * per fragment. Step 11's target selection, the ids of the bound targets' runtime fragments, is
 * then the ids of every evidence fragment of these parts, which is what projecting them without a
 * selection emits (bind takes it so only while no code but the package's ran since, with every
 * id checked an exact str: see bd_bind_regions_with and binding.py's step 11). */
static int
bd_ordered_build(const bd_table *tb, PyObject *bound_cls, PyObject *att_cls, PyObject *region_cls, PyObject *parts,
                 PyObject *attestations, PyObject *operations, long side, int as_map, bd_side_pos *pos,
                 mr_att_memo *att, PyObject **out)
{
    PyObject *const *nm = tb->nm;
    *out = NULL;
    PyObject *field = nm[side == 0 ? N_TARGET : N_SOURCE];
    mr_layout_class lc;
    int checked = bd_bound_check(bound_cls, &lc);
    if (checked != BD_OK) return checked;
    if (!PyTuple_CheckExact(parts) || !PyTuple_CheckExact(attestations)) return BD_FALLBACK;
    Py_ssize_t m = PyTuple_Size(parts);
    if (m < 0) return BD_ERROR;
    if (PyTuple_Size(attestations) != m) return BD_FALLBACK;
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        PyObject *part_fragments = PyTuple_GetItem(parts, k);
        if (part_fragments == NULL) return BD_ERROR;
        if (!PyTuple_CheckExact(part_fragments)) return BD_FALLBACK;
        Py_ssize_t n = PyTuple_Size(part_fragments);
        if (n < 0) return BD_ERROR;
        if (__builtin_add_overflow(total, n, &total)) return BD_FALLBACK;
    }
    if (total > PY_SSIZE_T_MAX / 4) {
        PyErr_NoMemory();
        return BD_ERROR;
    }
    /* the bound fragments' class described once for bulk allocation (mr_layout_alloc: the same
     * objects; a few attribute reads, not worth it for a few fragments) */
    mr_layout_alloc la;
    la.cls = NULL;
    if (total >= BD_BULK_ALLOC_MIN) mr_layout_alloc_init(&la, &lc);
    size_t n_fences = 0;
    if (__builtin_mul_overflow((size_t)m, (size_t)3, &n_fences)) {
        PyErr_NoMemory();
        return BD_ERROR;
    }
    PyObject **fences = mr_alloc_array(n_fences, sizeof(PyObject *));
    for (size_t f = 0; fences != NULL && f < n_fences; f++) fences[f] = NULL;
    bd_pending *pending = fences == NULL ? NULL : mr_alloc_array((size_t)total, sizeof(bd_pending));
    /* the parts' placement fragments by address (an identity table holding its keys; built
     * when an operation needs it) */
    size_t mask = 0;
    bd_idslot *slots = NULL;
    /* result: the rows tuple, or with as_map the map (built at the end from pending); none in
     * the positional form. */
    PyObject *result = pending == NULL || pos != NULL ? NULL : as_map ? PyDict_New() : mr_gc_hide(PyTuple_New(m));
    PyObject *rows_of = as_map ? NULL : result; /* where bd_make_pending stores rows */
    PyObject *evidence = NULL, *binding_dict = NULL, *placement_dict = NULL;
    Py_ssize_t count = 0; /* entries of pending holding references */
    int status = BD_ERROR;
    /* (positional targets) every part's evidence lists as many fragments as the part */
    int evidence_full = 1;
    bd_heads heads; /* (set up for the operation walk below) */
    bd_heads_init(&heads, NULL, 0, 0);
    Py_ssize_t *order = NULL, queued = 0; /* (the walk's queue) */
    if (pending == NULL || (pos == NULL && result == NULL)) goto done;
    /* Every part as bound_fragments checks it (its rows left empty). */
    for (Py_ssize_t k = 0; k < m; k++) {
        PyObject *attestation = PyTuple_GetItem(attestations, k);
        PyObject *part_fragments = PyTuple_GetItem(parts, k);
        if (attestation == NULL || part_fragments == NULL) { status = BD_ERROR; goto done; }
        status = BD_FALLBACK;
        if ((PyObject *)Py_TYPE(attestation) != att_cls) goto done;
        status = bd_get(attestation, nm[N_EVIDENCE], &evidence);
        if (status == BD_OK) status = bd_get(attestation, nm[N_BINDING_DICT], &binding_dict);
        if (status == BD_OK) status = bd_get(attestation, nm[N_PLACEMENT_DICT], &placement_dict);
        if (status == BD_OK) status = bd_get(evidence, nm[N_INSTANCE_ID], &fences[3 * k]);
        if (status == BD_OK) status = bd_get(evidence, nm[N_LEASE_ID], &fences[3 * k + 1]);
        if (status == BD_OK) status = bd_get(evidence, nm[N_GENERATION], &fences[3 * k + 2]);
        if (status != BD_OK) goto done;
        status = BD_FALLBACK;
        /* Both probed with each fragment's id: plain dicts only (plain_dict.h, AUDIT5 F5), with
         * pd_plain_keys' verdict: exact dicts now; their keys walked before the first probe or
         * getattr (nothing before it runs Python code: the dicts are as they are here), or, when
         * every read took its entry aligned, only the entries past the two cursors (each one
         * taken was the exact-str id itself or an exact str equal to it), at the part's end. */
        if (!PyDict_CheckExact(binding_dict) || !PyDict_CheckExact(placement_dict)) goto done;
        int keys_plain = 0;
        Py_ssize_t n = PyTuple_Size(part_fragments);
        if (n < 0) { status = BD_ERROR; goto done; }
        if (pos != NULL && side == 0 && evidence_full) {
            /* (read like the fences above; anything unexpected only leaves the side incomplete) */
            PyObject *evidence_fragments = NULL;
            int read = bd_get(evidence, nm[N_FRAGMENTS], &evidence_fragments);
            if (read == BD_ERROR) { status = BD_ERROR; goto done; }
            evidence_full = read == BD_OK && PyTuple_CheckExact(evidence_fragments)
                            && PyTuple_Size(evidence_fragments) == n;
            Py_XDECREF(evidence_fragments);
        }
        if (!as_map && pos == NULL) {
            PyObject *rows = mr_gc_hide(PyTuple_New(n)); /* (both out of the collector until full: gctrack.h) */
            if (rows == NULL || PyTuple_SetItem(result, k, rows) < 0) { status = BD_ERROR; goto done; } /* steals */
        }
        /* The attestation's two dicts hold the part's fragments in part order (attest inserts
         * them pair by pair): each lookup is first tried as the dicts' next entries (bd_dict_step);
         * from the first entry that is not that fragment's on, the lookups decide. */
        Py_ssize_t binding_pos = 0, placement_pos = 0;
        int aligned = 1;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (count >= total) { status = BD_FALLBACK; goto done; } /* never: tuples are immutable */
            PyObject *placement_fragment = PyTuple_GetItem(part_fragments, i);
            if (placement_fragment == NULL) { status = BD_ERROR; goto done; }
            /* hints: the fragment eight on, the id of the one four on */
            if (i + 8 < n) bd_prefetch_object(PyTuple_GetItem(part_fragments, i + 8));
            if (i + 4 < n) bd_prefetch_pfid(PyTuple_GetItem(part_fragments, i + 4));
            PyObject *pfid = NULL;
            PyObject *const *pf = mr_pf_fields(placement_fragment); /* the C-owned layout's slots: getattr's values */
            if (pf == NULL && !keys_plain) { /* (getattr may run Python code) */
                if (!pd_plain_keys(binding_dict) || !pd_plain_keys(placement_dict)) goto done;
                keys_plain = 1;
            }
            status = pf != NULL ? bd_pf_get_str(nm, pf, NULL, N_PFID, &pfid)
                                : bd_get_str(placement_fragment, nm[N_PFID], &pfid);
            if (status != BD_OK) goto done;
            PyObject *runtime = NULL, *attested = NULL;
            if (aligned) {
                PyObject *value = NULL;
                int step = bd_dict_step(binding_dict, &binding_pos, pfid, &value);
                if (step > 0) {
                    runtime = value; /* borrowed */
                    step = bd_dict_step(placement_dict, &placement_pos, pfid, &attested);
                }
                if (step < 0) {
                    Py_DECREF(pfid);
                    status = BD_ERROR;
                    goto done;
                }
                if (step == 0) aligned = 0;
            }
            if (!aligned) {
                if (!keys_plain) {
                    if (!pd_plain_keys(binding_dict) || !pd_plain_keys(placement_dict)) {
                        Py_DECREF(pfid);
                        status = BD_FALLBACK;
                        goto done;
                    }
                    keys_plain = 1;
                }
                runtime = PyDict_GetItemWithError(binding_dict, pfid); /* borrowed */
                attested = runtime == NULL ? NULL : PyDict_GetItemWithError(placement_dict, pfid);
            }
            Py_XINCREF(runtime);
            if (attested != placement_fragment) {
                Py_DECREF(pfid);
                Py_XDECREF(runtime);
                status = PyErr_Occurred() ? BD_ERROR : BD_FALLBACK;
                goto done;
            }
            bd_pending *entry = &pending[count];
            entry->placement = Py_NewRef(placement_fragment);
            entry->runtime = runtime;
            entry->pfid = pfid;
            entry->bound = NULL;
            entry->part = k;
            entry->pos = i;
            entry->made = 0;
            count++;
        }
        if (!keys_plain) {
            /* (aligned throughout: the keys before the cursors are exact strs) */
            status = BD_FALLBACK;
            if (!bd_keys_plain_from(binding_dict, binding_pos) || !bd_keys_plain_from(placement_dict, placement_pos)) {
                goto done;
            }
        }
        Py_CLEAR(evidence);
        Py_CLEAR(binding_dict);
        Py_CLEAR(placement_dict);
    }
    status = BD_ERROR;
    /* Allocation in first-use order along the operations: an operation field that is one of the
     * parts' placement fragment objects (by address, not dereferenced) gives the next one. */
    if (pos != NULL && !PyTuple_CheckExact(operations)) {
        status = BD_FALLBACK;
        goto done;
    }
    if (PyTuple_CheckExact(operations)) {
        Py_ssize_t n_ops = PyTuple_Size(operations);
        if (n_ops < 0) goto done;
        if (pos != NULL) {
            /* (queue positions and operation indexes fit an int32: bind_regions_ordered) */
            if (n_ops > INT32_MAX || count > INT32_MAX) {
                status = BD_FALLBACK;
                goto done;
            }
            pos->op_q = mr_alloc_array((size_t)n_ops + 1, sizeof(int32_t));
            if (pos->op_q == NULL) goto done;
        }
        /* region_cls in TransferRegion's C-owned layout: the field read directly (layout.h) */
        static mr_layout_memo ordered_memo;
        mr_layout_class rl;
        (void)mr_region_layout(&ordered_memo, &rl, region_cls);
        /* Where the operations name the parts' fragments in a merge of the parts' orders (the
         * targets of operations sorted by target id: each part lists its fragments by id), the
         * next one named is the next not yet made fragment of some part (heads, by identity):
         * found there without a table. Any other one is looked up in the table by address
         * (slots, built at the first such operation: a fragment met again keeps its first
         * entry), and once those are most of them the heads are no longer tried. Sources (in
         * the targets' order, not their own) take the table alone. */
        bd_heads_init(&heads, pending, count, side == 0 ? m : 0); /* sources: the table */
        /* The entries in the order the walk meets them, made after the walk in that order (the
         * same allocation order as making each when met: the walk reads only the operations'
         * fields and addresses, and an entry's made flag, which queuing sets), with hints for
         * the objects each one's making reads a few entries ahead. Without memory for the queue,
         * each is made when met. */
        order = mr_alloc_array((size_t)count + 1, sizeof(Py_ssize_t));
        if (order == NULL) {
            if (pos != NULL) goto done; /* (the positional form needs the queue) */
            PyErr_Clear();
        }
        PyObject *last = NULL; /* the fragment the previous operation named: done with */
        int32_t last_q = -1;   /* its queue position (-1: none) */
        for (Py_ssize_t j = 0; j < n_ops; j++) {
            PyObject *op = PyTuple_GetItem(operations, j);
            if (op == NULL) goto done;
            if (slots != NULL && heads.n == 0) {
                /* the table alone (the sources): hints for the operation 16 on, the table slot of
                 * the fragment of the one 8 on, and the entry of the one 4 on (their field read
                 * as below when in the checked layout, else no hint; addresses only) */
                if (j + 16 < n_ops) bd_prefetch_object(PyTuple_GetItem(operations, j + 16));
                PyObject *ahead8 = j + 8 < n_ops ? bd_walk_field(PyTuple_GetItem(operations, j + 8), region_cls, &rl, side)
                                                 : NULL;
                if (ahead8 != NULL) __builtin_prefetch(&slots[bd_idtab_home(ahead8, mask)]);
                PyObject *ahead4 = j + 4 < n_ops ? bd_walk_field(PyTuple_GetItem(operations, j + 4), region_cls, &rl, side)
                                                 : NULL;
                Py_ssize_t e = ahead4 != NULL ? bd_idtab_get(slots, mask, ahead4) : -1;
                if (e >= 0) __builtin_prefetch(&pending[e]);
            } else if (j + 8 < n_ops) {
                bd_prefetch_object(PyTuple_GetItem(operations, j + 8)); /* a hint */
            }
            if (pos != NULL) pos->op_q[j] = -1;
            if ((PyObject *)Py_TYPE(op) != region_cls) continue;
            PyObject *const *op_fields = mr_layout_fields(op, &rl);
            PyObject *fragment = NULL; /* address only */
            if (op_fields != NULL) {
                fragment = op_fields[side == 0 ? MR_RG_TARGET : MR_RG_SOURCE];
            } else {
                PyObject *op_dict = NULL;
                int rc = bd_dict_of(op, &op_dict);
                if (rc == BD_ERROR) goto done;
                if (rc != BD_OK) continue;
                fragment = PyDict_GetItemWithError(op_dict, field); /* borrowed */
                Py_DECREF(op_dict);
                if (fragment == NULL && PyErr_Occurred()) goto done;
            }
            if (fragment == NULL) continue;
            if (fragment == last) {
                if (pos != NULL) pos->op_q[j] = last_q;
                continue;
            }
            last = fragment;
            last_q = -1;
            Py_ssize_t g = bd_heads_take(&heads, pending, fragment);
            if (g < 0) {
                if (slots == NULL) {
                    slots = bd_idtab_new((size_t)count, &mask);
                    if (slots == NULL) goto done;
                    for (Py_ssize_t e = 0; e < count; e++) {
                        /* held by entry e: the address stays its own */
                        bd_idslot *slot = bd_idtab_find(slots, mask, pending[e].placement);
                        if (slot->key == 0) {
                            slot->key = (uintptr_t)pending[e].placement;
                            slot->value = e;
                        }
                    }
                }
                g = bd_idtab_get(slots, mask, fragment);
            }
            if (g < 0) continue;
            if (pending[g].made) {
                /* (queued already: in the positional form every entry made is queued) */
                if (pos != NULL) pos->op_q[j] = last_q = (int32_t)pending[g].q;
                continue;
            }
            if (order != NULL) {
                if (pos != NULL) pos->op_q[j] = last_q = (int32_t)queued;
                pending[g].q = queued;
                order[queued++] = g;
                pending[g].made = 1;
                continue;
            }
            if (bd_make_pending(nm, &lc, &la, bound_cls, &pending[g], fences, attestations, rows_of, 0) < 0) goto done;
        }
    }
    /* The positional form: the bound fragments made, in queue order, and whether the ids are
     * strictly increasing along it (then, with every entry queued, pairwise distinct). */
    int increasing = 1;
    if (pos != NULL) {
        pos->made = mr_alloc_array((size_t)queued + 1, sizeof(PyObject *));
        if (pos->made == NULL) goto done;
    }
    for (Py_ssize_t q = 0; q < queued; q++) {
        if (q + BD_MAKE_AHEAD < queued) {
            const bd_pending *next = &pending[order[q + BD_MAKE_AHEAD]];
            bd_prefetch_object(next->placement);
            bd_prefetch_object(next->runtime);
            if (pos != NULL) {
                /* (compared below: its header and the line its first characters are on) */
                __builtin_prefetch(next->pfid);
                __builtin_prefetch((const char *)next->pfid + 63);
            }
        }
        if (q + 2 * BD_MAKE_AHEAD < queued) __builtin_prefetch(&pending[order[q + 2 * BD_MAKE_AHEAD]]);
        bd_pending *entry = &pending[order[q]];
        entry->made = 0; /* (queued: made now) */
        /* (offered to mr_untrack_bound below when in the positional form with att) */
        if (bd_make_pending(nm, &lc, &la, bound_cls, entry, fences, attestations, rows_of, pos != NULL && att != NULL) < 0) {
            goto done;
        }
        if (pos == NULL) continue;
        pos->made[q] = entry->bound; /* (the reference moves) */
        entry->bound = NULL;
        pos->n_made = q + 1;
        if (att != NULL) {
            mr_untrack_bound(pos->made[q], bound_cls, lc.cls != NULL && lc.cls == bound_cls, nm[N_ATTESTATION], att);
        }
        if (increasing && q > 0) {
            int cmp = bd_compare(pending[order[q - 1]].pfid, entry->pfid);
            if (cmp == -2) goto done;
            if (cmp >= 0) increasing = 0;
        }
    }
    for (Py_ssize_t g = 0; g < count && pos == NULL; g++) {
        if (!pending[g].made && bd_make_pending(nm, &lc, &la, bound_cls, &pending[g], fences, attestations, rows_of, 0) < 0) {
            goto done;
        }
    }
    if (count != total) {
        status = BD_FALLBACK;
        goto done;
    }
    if (pos != NULL) {
        /* The map would hold every entry under its id, and raise at an id met twice. */
        status = increasing && queued == count ? BD_OK : bd_pending_distinct(pending, count);
        pos->complete = side == 0 && status == BD_OK && evidence_full && queued == count;
        goto done;
    }
    /* The map in pending order (part order, then row order: _bound_fragments' loop), the first
     * id met twice raising its duplicate error, as that loop does. */
    for (Py_ssize_t g = 0; as_map && g < count; g++) {
        if (g + 8 < count) {
            /* hints: the id whose hash the insert reads and the bound fragment it holds (made in
             * first-use order, not in this one) */
            __builtin_prefetch(pending[g + 8].pfid);
            __builtin_prefetch(pending[g + 8].bound, 1);
        }
        /* A key already there leaves the size unchanged (the map is then dropped). */
        if (PyDict_SetItem(result, pending[g].pfid, pending[g].bound) < 0) goto done;
        Py_ssize_t size = PyDict_Size(result);
        if (size < 0) goto done;
        if (size != g + 1) {
            PyErr_Format(PyExc_ValueError, "duplicate bound %s placement fragment: %U",
                         side == 0 ? "target" : "source", pending[g].pfid);
            goto done;
        }
    }
    status = BD_OK;
done:
    Py_XDECREF(evidence);
    Py_XDECREF(binding_dict);
    Py_XDECREF(placement_dict);
    for (Py_ssize_t g = 0; g < count; g++) {
        Py_DECREF(pending[g].placement);
        Py_DECREF(pending[g].runtime);
        Py_DECREF(pending[g].pfid);
        Py_XDECREF(pending[g].bound);
    }
    for (size_t f = 0; fences != NULL && f < n_fences; f++) Py_XDECREF(fences[f]);
    PyMem_Free(fences);
    PyMem_Free(pending);
    PyMem_Free(slots);
    PyMem_Free(order);
    bd_heads_free(&heads);
    if (status == BD_OK && rows_of != NULL) { /* full: each part's rows, then the tuple */
        for (Py_ssize_t k = 0; k < m; k++) mr_gc_show(PyTuple_GetItem(rows_of, k));
        mr_gc_show(rows_of);
    }
    if (status == BD_OK) *out = result;
    else Py_XDECREF(result);
    if (status != BD_OK && pos != NULL) bd_side_pos_clear(pos);
    return status;
}

static PyObject *
bd_bound_fragments_ordered(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 7 && nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "bound_fragments_ordered expects 7 or 8 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args, 3) < 0) return NULL;
    PyObject *which = args[6];
    if (!PyLong_CheckExact(which)) {
        PyErr_SetString(PyExc_TypeError, "bound_fragments_ordered: which must be an int");
        return NULL;
    }
    int overflow = 0;
    long side = PyLong_AsLongAndOverflow(which, &overflow);
    if (side == -1 && PyErr_Occurred()) return NULL;
    if (overflow != 0 || (side != 0 && side != 1)) {
        PyErr_SetString(PyExc_ValueError, "bound_fragments_ordered: which must be 0 (target) or 1 (source)");
        return NULL;
    }
    int as_map = 0;
    if (nargs == 8) {
        if (!PyBool_Check(args[7])) {
            PyErr_SetString(PyExc_TypeError, "bound_fragments_ordered: as_map must be a bool");
            return NULL;
        }
        as_map = args[7] == Py_True;
    }
    PyObject *result = NULL;
    int status = bd_ordered_build(&tb, args[0], args[1], args[2], args[3], args[4], args[5], side, as_map, NULL, NULL,
                                  &result);
    if (status == BD_OK) return result;
    if (status == BD_ERROR) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------
 * bind_regions */

/* The bound operation of op (BD_* status). */
/* Forward: step 11's id of one bound fragment (defined with bound_fragment_ids below). */
static int bd_add_bound_id(PyObject *const *nm, PyObject *fragment, PyObject *ids);

/* The placement fragment id of an exact placement-fragment-class object (read from its instance
 * dict: the class defines no data descriptor for it, so that is what getattr returns; a missing
 * or non-dict __dict__ or field is a fallback): an exact non-empty str, new reference. */
static int
bd_pfid_of(PyObject *const *nm, PyObject *fragment, PyObject **pfid)
{
    PyObject *dict = NULL, *slot = NULL;
    static const int pfid_name[1] = {N_PFID};
    if (bd_pf_slots(fragment, pfid_name, 1, &slot)) return bd_slot_str(slot, pfid); /* its layout's slot */
    int status = bd_dict_of(fragment, &dict);
    if (status != BD_OK) return status;
    status = bd_dget_str(dict, nm[N_PFID], pfid);
    Py_DECREF(dict);
    return status;
}

/* bind_regions' kept values of one region (borrowed, held by the region's dict): its fields in
 * field order from source, then its tensor id. */
#define BD_KEPT_TENSOR (N_TARGET_STRIDES - N_SOURCE + 1)
#define BD_KEPT (BD_KEPT_TENSOR + 1)

/* The dict order of a region's fields (TransferRegion's field order) and, for each, its index in
 * bind_regions' kept values. */
static const int bd_region_names[BD_KEPT] = {N_TENSOR_ID, N_SOURCE, N_TARGET, N_OVERLAP_OFFSET, N_OVERLAP_SHAPE,
                                             N_SOURCE_BASE_OFFSET, N_TARGET_BASE_OFFSET, N_INNER_BYTES,
                                             N_OUTER_LOOP_COUNTS, N_SOURCE_STRIDES, N_TARGET_STRIDES};

static inline int
bd_region_slot(int name)
{
    return name == N_TENSOR_ID ? BD_KEPT_TENSOR : name - N_SOURCE;
}

/* Kept order from field order and back, written out (the loops through bd_region_slot cost
 * ~270 instructions per operation): field 0 is the tensor id (kept last), field k + 1 kept k. */
_Static_assert(N_TARGET == N_SOURCE + 1 && N_OVERLAP_OFFSET == N_SOURCE + 2 && N_OVERLAP_SHAPE == N_SOURCE + 3
                   && N_SOURCE_BASE_OFFSET == N_SOURCE + 4 && N_TARGET_BASE_OFFSET == N_SOURCE + 5
                   && N_INNER_BYTES == N_SOURCE + 6 && N_OUTER_LOOP_COUNTS == N_SOURCE + 7
                   && N_SOURCE_STRIDES == N_SOURCE + 8 && N_TARGET_STRIDES == N_SOURCE + 9,
               "bd_region_names: the tensor id, then source .. target_strides in enum order");
_Static_assert(BD_KEPT == 11 && BD_KEPT_TENSOR == 10, "kept: ten fields from source, then the tensor id");

static inline void
bd_kept_from_fields(PyObject *const *fields, PyObject **v)
{
    v[0] = fields[1], v[1] = fields[2], v[2] = fields[3], v[3] = fields[4], v[4] = fields[5];
    v[5] = fields[6], v[6] = fields[7], v[7] = fields[8], v[8] = fields[9], v[9] = fields[10];
    v[BD_KEPT_TENSOR] = fields[0];
}

static inline void
bd_fields_from_kept(PyObject *const *v, PyObject **fields)
{
    fields[0] = v[BD_KEPT_TENSOR];
    fields[1] = v[0], fields[2] = v[1], fields[3] = v[2], fields[4] = v[3], fields[5] = v[4];
    fields[6] = v[5], fields[7] = v[6], fields[8] = v[7], fields[9] = v[8], fields[10] = v[9];
}

/* The field values of an operation (its instance dict op_dict) in kept order (v[BD_KEPT], borrowed:
 * held by op_dict, which the operation holds; no Python code runs while they are used). One scan of
 * the dict matches its keys to the interned field names by identity (a key identical to a name is
 * the entry a lookup of that name finds: dict keys are distinct); a field the scan does not meet is
 * looked up (an equal key that is not the interned name; missing: BD_FALLBACK). A key that is not an
 * exact str declines (BD_FALLBACK) before any lookup: with exact str keys only, no lookup runs user
 * code, so the values are what the lookups in any order return. */
static int
bd_op_values(PyObject *const *nm, PyObject *op_dict, PyObject **v)
{
    for (int k = 0; k < BD_KEPT; k++) v[k] = NULL;
    Py_ssize_t pos = 0, at = 0;
    PyObject *key = NULL, *value = NULL;
    while (PyDict_Next(op_dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) return BD_FALLBACK;
        int slot = -1;
        if (at < BD_KEPT && key == nm[bd_region_names[at]]) {
            slot = bd_region_slot(bd_region_names[at]); /* the usual case: field order */
        } else {
            for (int k = 0; k < BD_KEPT && slot < 0; k++) {
                if (key == nm[bd_region_names[k]]) slot = bd_region_slot(bd_region_names[k]);
            }
        }
        if (slot >= 0) v[slot] = value;
        at++;
    }
    for (int k = 0; k < BD_KEPT; k++) {
        int slot = bd_region_slot(bd_region_names[k]);
        if (v[slot] != NULL) continue;
        v[slot] = PyDict_GetItemWithError(op_dict, nm[bd_region_names[k]]);
        if (v[slot] == NULL) return PyErr_Occurred() ? BD_ERROR : BD_FALLBACK;
    }
    return BD_OK;
}

/* The bound fragment bound_map[fragment's placement fragment id] (*out, borrowed: held by the map,
 * which the caller holds) of an exact placement-fragment-class fragment. BD_* status. */
static int
bd_bound_of(PyObject *const *nm, PyObject *fragment, PyObject *bound_map, PyObject **out)
{
    PyObject *pfid = NULL;
    int status = bd_pfid_of(nm, fragment, &pfid);
    if (status != BD_OK) return status;
    *out = PyDict_GetItemWithError(bound_map, pfid);
    Py_DECREF(pfid);
    if (*out == NULL) return PyErr_Occurred() ? BD_ERROR : BD_FALLBACK;
    return BD_OK;
}

/* bd_bound_of in bind_regions_ordered, from one side's positional form (pos, built earlier in
 * the same C call, where no Python code runs: bd_side_pos) for operation index's field fragment
 * (an exact placement-fragment-class object): the bound fragment the map would hold under its id.
 * bd_bound_of's id read decides its fallback first: for a fragment in the C-owned layout that is
 * the very slot the ordered walk read (with the same check) of this very object when it found it
 * among the parts' fragments; otherwise it is read here. A fragment the walk did not find is a
 * fallback (the map might hold an equal id: the whole call declines, and the maps decide). */
static int
bd_pos_bound(PyObject *const *nm, const bd_side_pos *pos, Py_ssize_t index, PyObject *fragment, PyObject **out)
{
    if (mr_pf_fields(fragment) == NULL) {
        PyObject *pfid = NULL;
        int status = bd_pfid_of(nm, fragment, &pfid);
        if (status != BD_OK) return status;
        Py_DECREF(pfid);
    }
    int32_t q = pos->op_q[index];
    if (q < 0 || q >= pos->n_made) return BD_FALLBACK;
    *out = pos->made[q];
    return BD_OK;
}


/* bind_regions reads each operation's instance dict BD_AHEAD operations ahead of building its
 * region, its field values BD_AHEAD / 2 ahead (asking for every field object), its fragments'
 * placement fragment id slots 3 * BD_AHEAD / 8 ahead (asking for the strs), the ids
 * BD_AHEAD / 4 ahead and their bound fragments up to BD_AHEAD / 4 ahead (the lookups of the
 * operations whose ids were read, back to back, when the current one's is due: their cache
 * misses overlap), asking for the next objects each step reads (hints only; nothing read ahead runs Python code or changes anything, so
 * reading ahead decides what reading in turn would, and a status met ahead is acted on in turn). */
#define BD_AHEAD 16

/* bd_ahead.found[side] before its lookup ran */
#define BD_NOT_READ 2

typedef struct {
    PyObject *dict; /* the operation's instance dict (owned), or NULL */
    PyObject *const *fields; /* or its fields (a region class in a C-owned layout), or NULL */
    Py_ssize_t index; /* the operation's index */
    int status;     /* BD_OK so far, else the first step's status */
    PyObject *v[BD_KEPT]; /* the field values in kept order (borrowed from dict) */
    /* per side (0 source, 1 target): the fragment's placement fragment id (owned, or NULL) and
     * the bound fragment of that id (borrowed: the map holds it) with the lookup's status
     * (bd_bound_of's: BD_OK, BD_FALLBACK; BD_NOT_READ when not looked up ahead) */
    PyObject *pfid[2];
    PyObject *bound[2];
    int found[2];
    /* the source's memo entry when bd_ahead_ids found it there (its carry position and facts'
     * conversions slot, -1 when none): hints only, for the carry's arrays read at its region */
    int32_t met_position, met_fc;
} bd_ahead;

/* Frees what a slot holds. */
static void
bd_ahead_clear(bd_ahead *slot)
{
    Py_CLEAR(slot->dict);
    Py_CLEAR(slot->pfid[0]);
    Py_CLEAR(slot->pfid[1]);
}

/* Step 1 ahead: op's instance dict when op is an exact region_cls (status BD_FALLBACK otherwise);
 * when rl accepted region_cls (a C-owned layout, layout.h), its field array instead, and a hint
 * for the fields read in step 2. */
static void
bd_ahead_dict(bd_ahead *slot, PyObject *op, Py_ssize_t index, PyObject *region_cls, const mr_layout_class *rl)
{
    slot->index = index;
    slot->dict = NULL;
    slot->fields = NULL;
    slot->pfid[0] = slot->pfid[1] = NULL;
    slot->bound[0] = slot->bound[1] = NULL;
    slot->found[0] = slot->found[1] = BD_NOT_READ;
    slot->met_position = slot->met_fc = -1;
    if ((PyObject *)Py_TYPE(op) != region_cls) {
        slot->status = BD_FALLBACK;
        return;
    }
    slot->fields = mr_layout_fields(op, rl);
    if (slot->fields != NULL) {
        slot->status = BD_OK;
        __builtin_prefetch(slot->fields);
        __builtin_prefetch((const char *)slot->fields + 64);
        return;
    }
    slot->status = bd_dict_of(op, &slot->dict);
}

/* bd_op_values for a region in the checked layout: its fields (borrowed: held by the
 * operation) in kept order; an empty field is a missing key (BD_FALLBACK). */
static int
bd_op_layout_values(PyObject *const *fields, PyObject **v)
{
    /* (field order: k is the field's layout index, bd_region_names[k] its name) */
    bd_kept_from_fields(fields, v);
    for (int k = 0; k < BD_KEPT; k++) {
        if (v[k] == NULL) return BD_FALLBACK;
    }
    return BD_OK;
}

/* Step 2 ahead: the field values (bd_op_values), then a hint for the fragments read next. */
static void
bd_ahead_values(const bd_table *tb, bd_ahead *slot)
{
    if (slot->status != BD_OK) return;
    slot->status = slot->fields != NULL ? bd_op_layout_values(slot->fields, slot->v)
                                        : bd_op_values(tb->nm, slot->dict, slot->v);
    if (slot->status != BD_OK) return;
    /* the fragments (their placement fragment id slot may sit on the next line), and the other
     * field objects, which the region built in turn holds (their reference counts written) and
     * the collector check and carried proof read */
    for (int k = 0; k < BD_KEPT; k++) {
        if (k == 0 || k == N_TARGET - N_SOURCE) {
            bd_prefetch_object(slot->v[k]);
            __builtin_prefetch((const char *)slot->v[k] + 64);
        } else if (k == BD_KEPT_TENSOR) {
            mr_prefetch_head(slot->v[k], 1); /* (bd_canon_region reads its length too) */
        } else {
            __builtin_prefetch(slot->v[k], 1);
        }
    }
}

/* Step 2b ahead: a hint for the placement fragment id strs step 3 reads (bd_prefetch_pfid: the
 * fragments were asked for in step 2). Nothing is decided here. */
static void
bd_ahead_pfids(bd_ahead *slot)
{
    if (slot->status != BD_OK) return;
    bd_prefetch_pfid(slot->v[N_TARGET - N_SOURCE]);
    bd_prefetch_pfid(slot->v[0]);
}

/* Step 4 ahead: the bound fragment of each id read in step 3, then a hint for it. BD_OK or BD_ERROR. */
static int
bd_ahead_bound(bd_ahead *slot, PyObject *const *maps)
{
    for (int side = 0; side < 2; side++) {
        if (slot->pfid[side] == NULL) continue;
        slot->bound[side] = PyDict_GetItemWithError(maps[side], slot->pfid[side]);
        Py_CLEAR(slot->pfid[side]);
        if (slot->bound[side] == NULL) {
            if (PyErr_Occurred()) return BD_ERROR;
            slot->found[side] = BD_FALLBACK;
        } else {
            slot->found[side] = BD_OK;
            bd_prefetch_object(slot->bound[side]);
        }
    }
    return BD_OK;
}

/* The bound region of one logical operation (*out, new reference) from its field values v (kept
 * order; read by bd_ahead_*), with the region's values in kept order (kept, borrowed: the
 * region's dict holds them). known_source: the bound source an earlier operation of this call
 * with this very source object got (NULL: looked up here; within one call no Python code runs,
 * so the lookup would return it again). att: bind_regions' untracking memo (NULL: the region
 * alone is offered to mr_untrack_inert): then its bound source (when untrack_source) and target
 * are untracked first (mr_untrack_bound), as mr_untrack_bound_regions would after the pass
 * (bound_layout: classes[6] is a C-owned layout mr_bound_layout accepted). */
static int
bd_bound_region(const bd_table *tb, PyObject *const *classes, const mr_layout_class *rl, const mr_layout_alloc *ra,
                bd_ahead *slot, PyObject *bound_targets, PyObject *bound_sources, const bd_side_pos *pos,
                PyObject *known_source,
                mr_att_memo *att, int untrack_source, PyObject **out, PyObject **kept, int bound_layout)
{
    PyObject *const *nm = tb->nm;
    PyObject *region_cls = classes[0], *pf_cls = classes[1], *stored_cls = classes[2];
    PyObject **v = slot->v;
    PyObject *dict = NULL;
    PyObject *bound_target = NULL, *bound_source = NULL; /* borrowed (the maps hold them) */
    PyObject *target = v[N_TARGET - N_SOURCE], *source = v[0];
    int status = BD_FALLBACK;
    if ((PyObject *)Py_TYPE(target) != pf_cls) goto done;
    /* bd_bound_of, or its statuses and result read ahead (steps 3 and 4) */
    status = slot->found[1];
    if (status == BD_NOT_READ) {
        status = pos != NULL ? bd_pos_bound(nm, &pos[1], slot->index, target, &slot->bound[1])
                             : bd_bound_of(nm, target, bound_targets, &slot->bound[1]);
    }
    bound_target = slot->bound[1];
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    if (known_source != NULL) {
        bound_source = known_source; /* (its source passed the checks below when first met) */
    } else if ((PyObject *)Py_TYPE(source) == pf_cls) {
        status = slot->found[0];
        if (status == BD_NOT_READ) {
            status = pos != NULL ? bd_pos_bound(nm, &pos[0], slot->index, source, &slot->bound[0])
                                 : bd_bound_of(nm, source, bound_sources, &slot->bound[0]);
        }
        bound_source = slot->bound[0];
        if (status != BD_OK) goto done;
    } else if ((PyObject *)Py_TYPE(source) == stored_cls) {
        bound_source = source;
    } else {
        goto done;
    }
    /* The region as object.__new__(region_cls) whose own instance dict is filled in field order
     * (a key-sharing dict: about half the memory of a separate dict, and fewer cache lines for
     * every later pass that reads the region's fields). */
    status = BD_ERROR;
    v[0] = bound_source;
    v[N_TARGET - N_SOURCE] = bound_target;
    if (rl->cls != NULL && rl->cls == region_cls) {
        /* a C-owned layout (layout.h): the values stored directly in field order; its bound
         * fragments offered to the collector first, then the region (mr_layout_new: untracked
         * when every value is inert, as mr_untrack_inert decides for a dict-backed one) */
        if (att != NULL) {
            if (untrack_source) mr_untrack_bound(bound_source, classes[6], bound_layout, nm[N_ATTESTATION], att);
            mr_untrack_bound(bound_target, classes[6], bound_layout, nm[N_ATTESTATION], att);
        }
        _Static_assert(MR_RG_NFIELDS == BD_KEPT && MR_RG_TENSOR_ID == 0 && MR_RG_SOURCE == 1
                           && MR_RG_TARGET_STRIDES == 10, "the layout's field order is bd_region_names'");
        PyObject *values[MR_RG_NFIELDS];
        bd_fields_from_kept(v, values);
        PyObject *region = mr_layout_new_with(ra, rl, values, MR_RG_NFIELDS, 1);
        if (region == NULL) goto done;
        for (int k = 0; k < BD_KEPT; k++) kept[k] = v[k]; /* borrowed: the region holds them */
        *out = region;
        status = BD_OK;
        goto done;
    }
    PyObject *region = mr_new_instance(region_cls, &dict, "bind_regions");
    if (region == NULL) goto done;
    for (int k = 0; k < BD_KEPT; k++) {
        int name = bd_region_names[k];
        if (PyDict_SetItem(dict, nm[name], v[bd_region_slot(name)]) < 0) {
            Py_DECREF(region);
            goto done;
        }
    }
    if (bd_check_field_dict(dict, T_REGION) < 0) {
        Py_DECREF(region);
        goto done;
    }
    if (att != NULL) {
        /* GC: what mr_untrack_bound_regions does for this region after the pass (bound_cls =
         * classes[6]): nothing it reads changes within the call, so doing it here decides the
         * same; a source met before was offered when first met (untracked then or never). */
        if (untrack_source) mr_untrack_bound(bound_source, classes[6], bound_layout, nm[N_ATTESTATION], att);
        mr_untrack_bound(bound_target, classes[6], bound_layout, nm[N_ATTESTATION], att);
    }
    (void)mr_untrack_inert(region, dict); /* GC: common.h (untracked only when source and target are) */
    for (int k = 0; k < BD_KEPT; k++) kept[k] = v[k]; /* borrowed: the region's dict holds them */
    *out = region;
    status = BD_OK;
done:
    Py_XDECREF(dict);
    return status;
}

/* bind_regions' memo of the operations' source objects (pointer keys: the operations hold them;
 * one call, in which no Python code runs, so what was read of a source object is what reading
 * it again would return): its bound source, the two values its view read (bd_bound_view with
 * all = 0: its binding and that binding's fragment_id), and its carry position (-1 none yet).
 * Open addressing, load at most one half, grown by doubling. */
typedef struct {
    const void *key; /* NULL: empty */
    PyObject *bound, *binding, *fid; /* borrowed (the maps / the dicts read hold them) */
    int32_t position; /* (below the carry's distinct count, at most 2n <= INT32_MAX: bd_carry_fits) */
    int32_t fc;       /* its carried facts' conversions in the carry's fc (bd_fc_slot), or -1 */
} bd_memo_slot;

typedef struct {
    bd_memo_slot *slots;
    size_t mask, count;
    int bits; /* capacity 2**bits */
} bd_memo;

/* The slot of key (its entry, or the empty slot where it goes). Homed by the product's top bits
 * (Fibonacci hashing, as bd_tc_slot_of): the sources are allocated at a fixed stride, and
 * mr_ptr_slot's low product bits then reach only a fraction of the slots (at Kimi 6, 6,912
 * sources at load 0.42 took 9.8 extra probes per lookup; the top bits 0.4). */
static bd_memo_slot *
bd_memo_slot_of(const bd_memo *m, const void *key)
{
    size_t i = (size_t)(((uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ULL) >> (64 - m->bits));
    while (m->slots[i].key != NULL && m->slots[i].key != key) i = (i + 1) & m->mask;
    return &m->slots[i];
}

/* A hint for the home slot of key (where bd_memo_slot_of starts its probe). Reads nothing. */
static inline void
bd_memo_prefetch(const bd_memo *m, const void *key)
{
    if (m->slots == NULL) return;
    size_t i = (size_t)(((uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ULL) >> (64 - m->bits));
    __builtin_prefetch(&m->slots[i]);
}

/* The table moved to capacity zeroed slots (a power of two, above twice the count), its entries
 * re-homed (none in a new table: slots NULL). 0, or -1 with MemoryError (the table unchanged). */
static int
bd_memo_resize(bd_memo *m, size_t capacity)
{
    bd_memo_slot *slots = mr_alloc_array(capacity, sizeof(bd_memo_slot));
    if (slots == NULL) return -1;
    memset(slots, 0, capacity * sizeof(bd_memo_slot));
    bd_memo old = *m;
    m->slots = slots;
    m->mask = capacity - 1;
    m->bits = 0;
    while (((size_t)1 << m->bits) < capacity) m->bits++;
    for (size_t k = 0; old.slots != NULL && k <= old.mask; k++) {
        if (old.slots[k].key != NULL) *bd_memo_slot_of(m, old.slots[k].key) = old.slots[k];
    }
    PyMem_Free(old.slots);
    return 0;
}

/* The entry of key: found (*hit 1) or inserted empty (*hit 0; key set, position -1); the table
 * grown first when full. NULL with MemoryError. The pointer stays valid until the next call. */
static bd_memo_slot *
bd_memo_get(bd_memo *m, const void *key, int *hit)
{
    bd_memo_slot *slot = bd_memo_slot_of(m, key);
    *hit = slot->key != NULL;
    if (*hit) return slot;
    if ((m->count + 1) * 2 > m->mask + 1) {
        if (m->mask + 1 > SIZE_MAX / 2 / sizeof(bd_memo_slot)) {
            PyErr_NoMemory();
            return NULL;
        }
        if (bd_memo_resize(m, (m->mask + 1) * 2) < 0) return NULL;
        slot = bd_memo_slot_of(m, key);
    }
    slot->key = key;
    slot->bound = slot->binding = slot->fid = NULL;
    slot->position = -1;
    slot->fc = -1;
    m->count++;
    return slot;
}

/* Whether memo holds source (a source met before), noting its entry's carry position and facts'
 * conversions slot in slot (hints for bind_regions' loop; nothing is decided from them). */
static inline int
bd_ahead_met(const bd_memo *memo, bd_ahead *slot, const void *source)
{
    if (memo->slots == NULL) return 0;
    const bd_memo_slot *met = bd_memo_slot_of(memo, source);
    if (met->key == NULL) return 0;
    slot->met_position = met->position;
    slot->met_fc = met->fc;
    return 1;
}

/* Step 3 ahead: the placement fragment id of each exact placement-fragment-class fragment, the
 * target's first (as bd_bound_region reads them; the source not when the target's read falls
 * back, nor when memo, bind_regions' memo of sources met before, holds it). BD_OK, or BD_ERROR
 * (an exception); a fallback is kept in the slot and acted on in turn, where bd_bound_region
 * meets it. */
static int
bd_ahead_ids(const bd_table *tb, bd_ahead *slot, PyObject *pf_cls, const bd_memo *memo, const bd_side_pos *pos)
{
    if (slot->status != BD_OK) return BD_OK;
    PyObject *target = slot->v[N_TARGET - N_SOURCE], *source = slot->v[0];
    if ((PyObject *)Py_TYPE(target) != pf_cls) return BD_OK; /* (bd_bound_region falls back) */
    if (pos != NULL) {
        /* bind_regions_ordered: the bound fragments from the positional forms (no id, no map) */
        int status = bd_pos_bound(tb->nm, &pos[1], slot->index, target, &slot->bound[1]);
        if (status == BD_ERROR) return BD_ERROR;
        slot->found[1] = status;
        if (status != BD_OK) return BD_OK;
        bd_prefetch_object(slot->bound[1]);
        if ((PyObject *)Py_TYPE(source) != pf_cls) return BD_OK;
        if (bd_ahead_met(memo, slot, source)) return BD_OK;
        status = bd_pos_bound(tb->nm, &pos[0], slot->index, source, &slot->bound[0]);
        if (status == BD_ERROR) return BD_ERROR;
        slot->found[0] = status;
        if (status == BD_OK) bd_prefetch_object(slot->bound[0]);
        return BD_OK;
    }
    int status = bd_pfid_of(tb->nm, target, &slot->pfid[1]);
    if (status == BD_ERROR) return BD_ERROR;
    if (status != BD_OK) {
        slot->found[1] = status;
        return BD_OK;
    }
    bd_prefetch_object(slot->pfid[1]);
    if ((PyObject *)Py_TYPE(source) != pf_cls) return BD_OK;
    if (bd_ahead_met(memo, slot, source)) return BD_OK;
    status = bd_pfid_of(tb->nm, source, &slot->pfid[0]);
    if (status == BD_ERROR) return BD_ERROR;
    if (status != BD_OK) slot->found[0] = status;
    else bd_prefetch_object(slot->pfid[0]);
    return BD_OK;
}

/* What bind_regions' later steps read of a bound fragment, read once (borrowed: the fragment's and
 * its binding's and placement's instance dicts hold them; NULL where not read): its binding (and,
 * with all, its placement, instance_id and lease_generation) when it is an exact bound_cls; its
 * binding's fragment_id (with all, also worker_id, device, address and nbytes) when that is an
 * exact runtime_cls; with all, its placement's tensor_id, aliases, global_offset and local_shape
 * when that is an exact placement_fragment_cls. Those classes define no data descriptor for these
 * fields: the dicts hold what getattr returns. Each reader checks what it needs and otherwise
 * takes its own reads (which then decide exactly as before). */
enum { BV_BINDING, BV_PLACEMENT, BV_INSTANCE, BV_GENERATION, BV_FID, BV_WORKER, BV_DEVICE, BV_ADDRESS, BV_NBYTES,
       BV_TENSOR, BV_ALIASES, BV_GOFF, BV_LSHAPE, BV_COUNT };

/* dict[nm[names[k]]] into out[k] for k < count (borrowed, NULL when missing): 0, or -1 with an error. */
static int
bd_dict_fields(PyObject *const *nm, PyObject *dict, const int *names, int count, PyObject **out)
{
    for (int k = 0; k < count; k++) {
        /* (a runtime fragment's state from bd_runtime_state: its slots) */
        out[k] = PyDict_CheckExact(dict) ? PyDict_GetItemWithError(dict, nm[names[k]])
                                         : mr_runtime_state_get(&bd_runtime_memo, dict, nm[names[k]]);
        if (out[k] == NULL && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* The instance dict of obj (borrowed: obj holds it), NULL when not a dict (*error set on error). */
static PyObject *
bd_dict_borrowed(PyObject *obj, int *error)
{
    PyObject *dict = NULL;
    int status = bd_dict_of(obj, &dict);
    if (status == BD_ERROR) *error = 1;
    if (status != BD_OK) return NULL;
    Py_DECREF(dict); /* the object holds its dict */
    return dict;
}

static int
bd_bound_view(const bd_table *tb, PyObject *const *cls, const mr_layout_class *blc, PyObject *bound, int all,
              PyObject **v)
{
    /* cls: bound_cls, runtime_cls (NULL: none), placement_fragment_cls; blc: bound_cls's layout
     * check (cls NULL: instance dicts) */
    PyObject *const *nm = tb->nm;
    for (int k = 0; k < BV_COUNT; k++) v[k] = NULL;
    if ((PyObject *)Py_TYPE(bound) != cls[0]) return BD_OK;
    int error = 0;
    PyObject *dict = NULL;
    PyObject *const *bf = mr_layout_fields(bound, blc);
    if (bf != NULL) {
        /* its slots hold what its instance dict held (an empty one: a missing key) */
        v[BV_BINDING] = bf[MR_BF_BINDING];
        if (all) {
            v[BV_PLACEMENT] = bf[MR_BF_PLACEMENT];
            v[BV_INSTANCE] = bf[MR_BF_INSTANCE_ID];
            v[BV_GENERATION] = bf[MR_BF_LEASE_GENERATION];
        }
    } else {
        dict = bd_dict_borrowed(bound, &error);
        if (dict == NULL) return error ? BD_ERROR : BD_OK;
        static const int bound_fields[] = {N_BINDING, N_PLACEMENT, N_INSTANCE_ID, N_LEASE_GENERATION};
        if (bd_dict_fields(nm, dict, bound_fields, all ? 4 : 1, v) < 0) return BD_ERROR;
    }
    PyObject *binding = v[BV_BINDING], *placement = v[BV_PLACEMENT];
    mr_layout_class rtl;
    if (binding != NULL && cls[1] != NULL && (PyObject *)Py_TYPE(binding) == cls[1]
        && mr_runtime_layout(&bd_runtime_memo, &rtl, cls[1])) {
        /* its C-owned layout: the slots mr_runtime_state_get reads for these names (an empty
         * one: NULL, a missing key) */
        PyObject *const *rf = ((mr_layout_object *)binding)->fields;
        v[BV_FID] = rf[MR_RF_FRAGMENT_ID];
        if (all) {
            v[BV_WORKER] = rf[MR_RF_WORKER_ID];
            v[BV_DEVICE] = rf[MR_RF_DEVICE];
            v[BV_ADDRESS] = rf[MR_RF_ADDRESS];
            v[BV_NBYTES] = rf[MR_RF_NBYTES];
        }
    } else if (binding != NULL && cls[1] != NULL && (PyObject *)Py_TYPE(binding) == cls[1]) {
        dict = bd_runtime_state(binding, &dict) == BD_OK ? dict : NULL; /* (or its layout: itself) */
        if (dict == NULL && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return BD_ERROR;
            PyErr_Clear();
        }
        Py_XDECREF(dict); /* borrowed: the binding holds its dict (or is the state) */
        static const int binding_fields[] = {N_FID, N_WORKER_ID, N_DEVICE, N_ADDRESS, N_NBYTES};
        if (dict != NULL && bd_dict_fields(nm, dict, binding_fields, all ? 5 : 1, &v[BV_FID]) < 0) return BD_ERROR;
        if (error) return BD_ERROR;
    }
    if (all && placement != NULL && (PyObject *)Py_TYPE(placement) == cls[2]) {
        static const int placement_fields[] = {N_TENSOR_ID, N_ALIASES, N_GLOBAL_OFFSET, N_LOCAL_SHAPE};
        if (bd_pf_slots(placement, placement_fields, 4, &v[BV_TENSOR])) return BD_OK; /* its layout's slots */
        dict = bd_dict_borrowed(placement, &error);
        if (dict != NULL && bd_dict_fields(nm, dict, placement_fields, 4, &v[BV_TENSOR]) < 0) return BD_ERROR;
        if (error) return BD_ERROR;
    }
    return BD_OK;
}

/* bind_regions' step 11 adds, in operation order, batched: an id its view read (an exact
 * runtime binding's fragment_id slot or dict entry) is asked for when read and added a few
 * operations later, by when its str has arrived (the add reads its type, length and hash). The
 * adds run in the order the pass met them and nothing between changes the ids (no Python code
 * runs; the regions hold the ids: borrowed), so the sets are what adding each in turn builds. An
 * id that is not an exact non-empty str makes the selections undecided (BD_FALLBACK) without
 * the attribute reads bd_add_bound_id would take: those read the same exact classes' state the
 * view read, so they would return that very object, and bd_get_str would refuse it. An add
 * without a view id flushes the batch first (bd_add_bound_id's reads stay in order). */
#define BD_IDS_BATCH 16

typedef struct {
    PyObject *fid[BD_IDS_BATCH]; /* borrowed */
    unsigned char side[BD_IDS_BATCH];
    int count;
} bd_id_batch;

/* The batch's adds in order: BD_OK, BD_FALLBACK at the first id refused (the rest dropped),
 * BD_ERROR. The batch is left empty. A side without a set (ids[side] NULL: the targets when
 * bind_regions_ordered found them complete) has its ids checked as an add checks them, and not
 * added. */
static int
bd_ids_flush(bd_id_batch *b, PyObject *const *ids)
{
    int status = BD_OK;
    for (int k = 0; k < b->count && status == BD_OK; k++) {
        PyObject *fid = b->fid[k];
        if (!PyUnicode_CheckExact(fid)) status = BD_FALLBACK;
        else {
            Py_ssize_t length = PyUnicode_GetLength(fid);
            if (length < 0) status = BD_ERROR;
            else if (length == 0) status = BD_FALLBACK;
            else if (ids[b->side[k]] != NULL && PySet_Add(ids[b->side[k]], fid) < 0) status = BD_ERROR;
        }
    }
    b->count = 0;
    return status;
}

/* Step 11's id of fragment (side 0 source, 1 target; its view v) added to ids[side]: batched
 * when its view read it (see bd_id_batch), else, the batch flushed first, by bd_add_bound_id. */
static int
bd_ids_add(PyObject *const *nm, bd_id_batch *b, int side, PyObject *fragment, PyObject *const *v, PyObject *const *ids)
{
    PyObject *fid = v[BV_FID];
    if (fid == NULL) {
        int status = bd_ids_flush(b, ids);
        if (status == BD_OK && ids[side] == NULL) return BD_FALLBACK; /* (not read here: undecided) */
        return status != BD_OK ? status : bd_add_bound_id(nm, fragment, ids[side]);
    }
    mr_prefetch_head(fid, 0); /* (the add reads its type, then its length and hash: two lines) */
    b->fid[b->count] = fid;
    b->side[b->count] = (unsigned char)side;
    if (++b->count < BD_IDS_BATCH) return BD_OK;
    return bd_ids_flush(b, ids);
}

/* bind_regions' memo of converted int tuples (one call's): direct-mapped by address, each entry
 * an exact tuple of at most BD_TC_MAX exact ints within int64 that bd_canon_tuple converted
 * (owned: a strong reference, so no other object can take its address while the memo holds it),
 * its length and values. Tuples and exact ints are immutable, so a hit gives what converting
 * the tuple again would; only such tuples are kept (releasing one runs no Python code). The
 * planner shares its box and stride tuples (a handful of distinct objects per plan), so
 * nearly every conversion of bind_regions' proofs is a hit. */
#define BD_TC_MAX 8
#define BD_TC_BITS 7
#define BD_TC_SLOTS (1 << BD_TC_BITS)

typedef struct {
    PyObject *key; /* owned, or NULL */
    Py_ssize_t n;
    int64_t v[BD_TC_MAX];
} bd_tc_slot;

typedef struct {
    bd_tc_slot s[BD_TC_SLOTS];
} bd_tcache;

/* The memo slot of an address among 2**BD_TC_BITS (Fibonacci hashing: the product's top bits,
 * which every address bit reaches; CPython's allocator aligns small objects to their size
 * class, so the low bits mr_ptr_slot keeps would leave most slots unused). */
static inline size_t
bd_tc_slot_of(uintptr_t p)
{
    return (size_t)(((uint64_t)p * 0x9E3779B97F4A7C15ULL) >> (64 - BD_TC_BITS));
}

static void
bd_tc_clear(bd_tcache *tc)
{
    for (int k = 0; tc != NULL && k < BD_TC_SLOTS; k++) Py_CLEAR(tc->s[k].key);
}

static int bd_canon_tuple(PyObject *value, int64_t *out, Py_ssize_t *len);

/* bd_canon_tuple(value, out, len) through the memo tc (NULL: none): 1 (*len values in out), 0
 * (not an exact tuple of at most RC_MAX_NDIM exact int64 ints), -1 with an exception. */
static int
bd_tc_tuple(bd_tcache *tc, PyObject *value, int64_t *out, Py_ssize_t *len)
{
    if (tc == NULL || !PyTuple_CheckExact(value)) return bd_canon_tuple(value, out, len);
    /* two ways: a pair of slots, the last one used first */
    size_t at = bd_tc_slot_of((uintptr_t)value) & ~(size_t)1;
    bd_tc_slot *slot = &tc->s[at], *pair = &tc->s[at + 1];
    if (slot->key != value && pair->key == value) {
        bd_tc_slot swap = *slot;
        *slot = *pair;
        *pair = swap;
    }
    if (slot->key == value) {
        for (Py_ssize_t d = 0; d < slot->n; d++) out[d] = slot->v[d];
        *len = slot->n;
        return 1;
    }
    int rc = bd_canon_tuple(value, out, len);
    if (rc != 1 || *len > BD_TC_MAX) return rc;
    PyObject *old = pair->key; /* the pair's entry leaves, the slot's moves there */
    *pair = *slot;
    slot->key = Py_NewRef(value);
    slot->n = *len;
    for (Py_ssize_t d = 0; d < *len; d++) slot->v[d] = out[d];
    Py_XDECREF(old); /* (an exact tuple of exact ints: no Python code runs) */
    return 1;
}

/* One region's values converted once and shared by the steps that read them (bind_regions'
 * loop; valid for that region only): the scan rule's (vals: sc_carry_extents), the carried
 * proof's (r), and whether the proof set r's overlap box and its target's box and from which
 * target objects (boxes, t_box: bd_canon_region), which the physical path's same-box checks
 * then decide from (bd_phys_region). */
typedef struct {
    rc_region r;
    sc_values vals;
    int boxes;
    PyObject *t_box[2]; /* borrowed: the target's global_offset and local_shape r.t_off, r.t_shape hold */
} bd_conv;

/* The spec 12.6 accept path of physical_whole_targets (physical.c), derived in the pass that
 * builds the bound operations: every region writes its whole target fragment (overlap box equal
 * to the target's global offset and local shape), targets are distinct exact bound fragments
 * whose binding and placement are exact runtime / placement fragments (read with getattr, as
 * physical_whole_targets reads them: no user code runs, so reading while building the regions
 * decides exactly what reading them afterwards would), no declared alias, address and nbytes
 * ints with 0 < nbytes and address + nbytes < 2**64, extents pairwise disjoint per address space
 * (instance_id, worker_id, device; exact str). Anything else only turns the accept path off
 * (the Python check then runs on the regions, as before). */
typedef struct {
    PyObject *key[3]; /* owned, or NULL: empty */
    size_t space;
} bd_space_slot;

typedef struct {
    PyObject *runtime_cls, *pf_cls, *bound_cls; /* borrowed: the caller's arguments */
    pq_extent *extents;
    uintptr_t *targets;
    PyObject *spaces;  /* (instance_id, worker_id, device) -> space number */
    PyObject *last[3]; /* owned: the previous region's space key parts (identity shortcut) */
    size_t last_space;
    int active;
    bd_tcache *tc;     /* bind_regions' tuple memo (borrowed; NULL: none) */
    /* the spaces met, by the identity of their key parts (owned; open addressing, load at most
     * one half, grown by doubling): the same (immutable) str objects make the same key, so the
     * number spaces holds for it. (It was direct-mapped with 128 slots: the Kimi-class plans'
     * 128 spaces collided there, and 23k of 55k operations at Kimi 6 took the tuple and dict
     * lookup.) */
    bd_space_slot *memo;
    size_t memo_count;
    int memo_bits; /* capacity 2**memo_bits (0: none yet) */
} bd_phys;

static void
bd_phys_clear(bd_phys *ph)
{
    PyMem_Free(ph->extents);
    PyMem_Free(ph->targets);
    ph->extents = NULL;
    ph->targets = NULL;
    Py_CLEAR(ph->spaces);
    for (int k = 0; k < 3; k++) Py_CLEAR(ph->last[k]);
    for (size_t m = 0; ph->memo != NULL && m < ((size_t)1 << ph->memo_bits); m++) {
        for (int k = 0; k < 3; k++) Py_CLEAR(ph->memo[m].key[k]);
    }
    PyMem_Free(ph->memo);
    ph->memo = NULL;
    ph->memo_count = 0;
    ph->memo_bits = 0;
}

/* The space memo's slot of key (its entry, or the empty slot where it goes); memo_bits > 0.
 * Homed by the product's top bits (bd_tc_slot_of's Fibonacci hashing). Python-free. */
static bd_space_slot *
bd_space_slot_of(bd_space_slot *memo, int bits, PyObject *const *key)
{
    uint64_t mixed = (uint64_t)(uintptr_t)key[0] ^ ((uint64_t)(uintptr_t)key[1] * 3) ^ ((uint64_t)(uintptr_t)key[2] * 5);
    size_t mask = ((size_t)1 << bits) - 1;
    size_t i = (size_t)((mixed * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
    while (memo[i].key[0] != NULL && (memo[i].key[0] != key[0] || memo[i].key[1] != key[1] || memo[i].key[2] != key[2]))
        i = (i + 1) & mask;
    return &memo[i];
}

/* The memo grown to 2**bits zeroed slots (from none: 2**6), its entries (references moved)
 * placed again. 0, or -1 with MemoryError (the memo unchanged). Python-free. */
static int
bd_space_memo_grow(bd_phys *ph)
{
    int bits = ph->memo_bits == 0 ? 6 : ph->memo_bits + 1;
    if (bits > 40) {
        PyErr_NoMemory();
        return -1;
    }
    size_t cap = (size_t)1 << bits;
    bd_space_slot *memo = mr_alloc_array(cap, sizeof(bd_space_slot));
    if (memo == NULL) return -1;
    memset(memo, 0, cap * sizeof(bd_space_slot));
    for (size_t m = 0; ph->memo != NULL && m < ((size_t)1 << ph->memo_bits); m++) {
        if (ph->memo[m].key[0] != NULL) *bd_space_slot_of(memo, bits, ph->memo[m].key) = ph->memo[m];
    }
    PyMem_Free(ph->memo);
    ph->memo = memo;
    ph->memo_bits = bits;
    return 0;
}

/* Equal exact tuples of exact ints (no user code). BD_OK, BD_FALLBACK, BD_ERROR. */
static int
bd_phys_same_box(PyObject *a, PyObject *b)
{
    PyObject *pair[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        if (!PyTuple_CheckExact(pair[k])) return BD_FALLBACK;
        Py_ssize_t n = PyTuple_Size(pair[k]);
        if (n < 0) return BD_ERROR;
        for (Py_ssize_t d = 0; d < n; d++) {
            PyObject *item = PyTuple_GetItem(pair[k], d);
            if (item == NULL) return BD_ERROR;
            if (!PyLong_CheckExact(item)) return BD_FALLBACK;
        }
    }
    int same = PyObject_RichCompareBool(a, b, Py_EQ);
    if (same < 0) return BD_ERROR;
    return same ? BD_OK : BD_FALLBACK;
}

/* bd_phys_same_box, decided from the memo's conversions when both convert (exact tuples of
 * exact int64 ints: equal exactly when their lengths and values are); otherwise as it decides. */
static int
bd_phys_same_box_tc(bd_tcache *tc, PyObject *a, PyObject *b)
{
    if (tc != NULL) {
        int64_t x[RC_MAX_NDIM], y[RC_MAX_NDIM];
        Py_ssize_t nx = 0, ny = 0;
        int ra = bd_tc_tuple(tc, a, x, &nx);
        int rb = ra == 1 ? bd_tc_tuple(tc, b, y, &ny) : 0;
        if (ra < 0 || rb < 0) return BD_ERROR;
        if (ra == 1 && rb == 1) return nx == ny && memcmp(x, y, (size_t)nx * sizeof(int64_t)) == 0 ? BD_OK : BD_FALLBACK;
    }
    return bd_phys_same_box(a, b);
}

/* An exact int's value when it lies in [0, 2**63): 1 with *out; 0 otherwise (negative, or at
 * least 2**63: the caller's general read decides); -1 with an exception. PyLong_AsLongLongAndOverflow
 * works on the digits, where PyLong_AsUnsignedLongLong goes through _PyLong_AsByteArray (about
 * 170 instructions for an address). */
static inline int
bd_u63(PyObject *value, uint64_t *out)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (x == -1 && overflow == 0 && PyErr_Occurred()) return -1;
    if (overflow != 0 || x < 0) return 0;
    *out = (uint64_t)x;
    return 1;
}

/* An exact int in [0, 2**64): BD_OK with *out, BD_FALLBACK otherwise. */
static int
bd_phys_u64(PyObject *value, uint64_t *out)
{
    if (!PyLong_CheckExact(value)) return BD_FALLBACK;
    int fast = bd_u63(value, out);
    if (fast != 0) return fast > 0 ? BD_OK : BD_ERROR;
    unsigned long long x = PyLong_AsUnsignedLongLong(value);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return BD_ERROR;
        PyErr_Clear();
        return BD_FALLBACK;
    }
    *out = (uint64_t)x;
    return BD_OK;
}

/* The space number of (instance, worker, device) (exact str each). */
static int
bd_phys_space(bd_phys *ph, PyObject *const *key, size_t *out)
{
    if (ph->last[0] == key[0] && ph->last[1] == key[1] && ph->last[2] == key[2]) {
        *out = ph->last_space; /* the very same (immutable) str objects: the same key */
        return BD_OK;
    }
    if (ph->memo != NULL) {
        bd_space_slot *met = bd_space_slot_of(ph->memo, ph->memo_bits, key);
        if (met->key[0] != NULL) {
            for (int k = 0; k < 3; k++) BD_SETREF(ph->last[k], Py_NewRef(key[k]));
            ph->last_space = met->space;
            *out = ph->last_space;
            return BD_OK;
        }
    }
    PyObject *space = PyTuple_Pack(3, key[0], key[1], key[2]);
    if (space == NULL) return BD_ERROR;
    int status = BD_OK;
    PyObject *number = PyDict_GetItemWithError(ph->spaces, space); /* borrowed */
    Py_ssize_t id = -1;
    if (number == NULL) {
        if (PyErr_Occurred()) {
            status = BD_ERROR;
        }
        else {
            id = PyDict_Size(ph->spaces);
            number = id < 0 ? NULL : PyLong_FromSsize_t(id);
            if (number == NULL || PyDict_SetItem(ph->spaces, space, number) < 0) status = BD_ERROR;
            Py_XDECREF(number); /* the dict holds it */
        }
    }
    else {
        id = PyLong_AsSsize_t(number);
        if (id < 0) status = BD_ERROR; /* the dict's own non-negative numbers */
    }
    Py_DECREF(space);
    if (status != BD_OK) return status;
    for (int k = 0; k < 3; k++) BD_SETREF(ph->last[k], Py_NewRef(key[k])); /* (exact str: no code runs) */
    if (ph->memo == NULL || (ph->memo_count + 1) * 2 > ((size_t)1 << ph->memo_bits)) {
        if (bd_space_memo_grow(ph) < 0) return BD_ERROR;
    }
    bd_space_slot *slot = bd_space_slot_of(ph->memo, ph->memo_bits, key); /* (empty: a miss above) */
    for (int k = 0; k < 3; k++) slot->key[k] = Py_NewRef(key[k]);
    slot->space = (size_t)id;
    ph->memo_count++;
    ph->last_space = (size_t)id;
    *out = (size_t)id;
    return BD_OK;
}

/* Fields of an object of an exact class checked by the caller, read from its instance dict
 * (those classes define no data descriptor for the fields read: the dict holds what getattr
 * returns; a missing field or dict turns the accept path off). */
static int
bd_phys_fields(PyObject *const *nm, PyObject *obj, const int *names, int count, PyObject **out)
{
    PyObject *dict = NULL, *slots[8];
    if (count <= 8 && bd_pf_slots(obj, names, count, slots)) { /* a placement fragment's layout slots */
        int status = BD_OK;
        for (int k = 0; k < count && status == BD_OK; k++) status = bd_slot_get(slots[k], &out[k]);
        return status;
    }
    int status = bd_dict_of(obj, &dict);
    for (int k = 0; k < count && status == BD_OK; k++) status = bd_dget(dict, nm[names[k]], &out[k]);
    Py_XDECREF(dict);
    return status;
}

/* Region i's extent (a region just built by bind_regions, whose target, overlap offset and
 * overlap shape the caller passes: the values it has just stored in the region's dict; v the
 * target's view, read with all; cv the region's conversions, or NULL). BD_OK recorded,
 * BD_FALLBACK (the accept path is off), BD_ERROR. */
static int
bd_phys_region(bd_phys *ph, PyObject *target, PyObject *const *v, PyObject *offset, PyObject *shape, Py_ssize_t i,
               const bd_conv *cv)
{
    /* physical_whole_targets' reads: every one the view must hold (a missing field, or a binding or
     * placement of another class, turns the accept path off, as reading them here did) */
    if ((PyObject *)Py_TYPE(target) != ph->bound_cls) return BD_FALLBACK;
    for (int k = 0; k < BV_COUNT; k++) {
        if (v[k] == NULL) return BD_FALLBACK;
    }
    if ((PyObject *)Py_TYPE(v[BV_BINDING]) != ph->runtime_cls || (PyObject *)Py_TYPE(v[BV_PLACEMENT]) != ph->pf_cls) {
        return BD_FALLBACK;
    }
    if (!PyUnicode_CheckExact(v[BV_INSTANCE]) || !PyUnicode_CheckExact(v[BV_WORKER])
        || !PyUnicode_CheckExact(v[BV_DEVICE]) || !PyUnicode_CheckExact(v[BV_FID])
        || !PyUnicode_CheckExact(v[BV_TENSOR]) || !PyLong_CheckExact(v[BV_GENERATION])) {
        return BD_FALLBACK;
    }
    if (!PyTuple_CheckExact(v[BV_ALIASES]) || PyTuple_Size(v[BV_ALIASES]) != 0) return BD_FALLBACK;
    int status;
    if (cv != NULL && cv->boxes && cv->t_box[0] == v[BV_GOFF] && cv->t_box[1] == v[BV_LSHAPE]) {
        /* the carried proof converted these very four objects (offset and shape: the caller's,
         * the proof's kept[V_OFFSET] and kept[V_SHAPE]), each to r.ndim values: what
         * bd_phys_same_box_tc decides from the same conversions */
        size_t bytes = (size_t)cv->r.ndim * sizeof(int64_t);
        if (memcmp(cv->r.ov_off, cv->r.t_off, bytes) != 0 || memcmp(cv->r.ov_shape, cv->r.t_shape, bytes) != 0)
            return BD_FALLBACK;
    } else {
        if ((status = bd_phys_same_box_tc(ph->tc, offset, v[BV_GOFF])) != BD_OK) return status;
        if ((status = bd_phys_same_box_tc(ph->tc, shape, v[BV_LSHAPE])) != BD_OK) return status;
    }
    uint64_t address = 0, nbytes = 0, end = 0;
    if ((status = bd_phys_u64(v[BV_ADDRESS], &address)) != BD_OK) return status;
    if ((status = bd_phys_u64(v[BV_NBYTES], &nbytes)) != BD_OK) return status;
    if (nbytes == 0 || mr_add_u64(address, nbytes, &end) < 0) return BD_FALLBACK;
    PyObject *key[3] = {v[BV_INSTANCE], v[BV_WORKER], v[BV_DEVICE]};
    size_t space = 0;
    status = bd_phys_space(ph, key, &space);
    if (status != BD_OK) return status;
    ph->extents[i].space = space;
    ph->extents[i].begin = address;
    ph->extents[i].end = end;
    ph->targets[i] = (uintptr_t)target; /* alive in the region (held by the result list) */
    return BD_OK;
}

/* mr_pointers_distinct's decision with a radix sort (LSD, BD_RADIX_BITS-bit digits over the low
 * bits up to the highest one where the pointers differ) in place of qsort: the same sorted order,
 * so the same answer. tmp: scratch of n. Python-free. */
#define BD_RADIX_BITS 11

static int
bd_pointers_distinct(uintptr_t *a, uintptr_t *tmp, size_t n)
{
    if (n < 2) return 1;
    uintptr_t diff = 0;
    for (size_t i = 1; i < n; i++) diff |= a[i] ^ a[0];
    int bits = 0;
    while (bits < (int)(8 * sizeof(uintptr_t)) && (diff >> bits) != 0) bits++;
    size_t count[1 << BD_RADIX_BITS]; /* (16 KiB of stack: this runs without the GIL, so no static) */
    uintptr_t *src = a, *dst = tmp;
    for (int shift = 0; shift < bits; shift += BD_RADIX_BITS) {
        memset(count, 0, sizeof(count));
        for (size_t i = 0; i < n; i++) count[(src[i] >> shift) & ((1u << BD_RADIX_BITS) - 1)]++;
        size_t sum = 0;
        for (size_t b = 0; b < ((size_t)1 << BD_RADIX_BITS); b++) {
            size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & ((1u << BD_RADIX_BITS) - 1)]++] = src[i];
        uintptr_t *t = src;
        src = dst;
        dst = t;
    }
    for (size_t i = 1; i < n; i++) {
        if (src[i] == src[i - 1]) return 0;
    }
    return 1;
}

/* mr_extents_disjoint's decision without sorting when each address space's extents come in
 * pq_compare_extent order (bind_regions meets each space's targets in address order at scale):
 * one pass keeping each space's previous extent (last, nspaces zeroed entries; spaces at or
 * above nspaces, or a space out of order: mr_extents_disjoint sorts and decides). In order, an
 * extent beginning before its space's previous one ends overlaps it, and with none such a
 * space's extents are pairwise disjoint: what the sorted scan decides. An overlap found before
 * an out-of-order extent is a real one, which the sorted scan also finds (sorted by begin, an
 * extent overlapping any other overlaps its successor). Python-free. */
typedef struct {
    uint64_t begin, end;
    int seen;
} bd_space_last;

static int
bd_extents_disjoint(pq_extent *e, bd_space_last *last, size_t n, size_t nspaces)
{
    for (size_t i = 0; i < n; i++) {
        size_t space = e[i].space;
        if (space >= nspaces) return mr_extents_disjoint(e, n);
        bd_space_last *l = &last[space];
        if (l->seen) {
            if (l->begin > e[i].begin || (l->begin == e[i].begin && l->end > e[i].end)) {
                return mr_extents_disjoint(e, n); /* out of order */
            }
            if (e[i].begin < l->end) return 0;
        }
        l->begin = e[i].begin;
        l->end = e[i].end;
        l->seen = 1;
    }
    return 1;
}

/* The carried scan facts of bind_regions (10 arguments): what revalidate_scan derives from the
 * regions bind_regions has just built, derived in the same pass from the values it has just
 * stored in each region's dict (those regions and their bound fragments were created by this
 * bind call; nothing reaches them before the call returns the plan). The adapter's bindings are
 * not read here: revalidate_scan_carried re-reads every fragment's binding.nbytes. Anything
 * unusual only turns the carry off (the new plan's revalidation then runs revalidate_scan). */
/* The carried proof's conversions of one distinct source fragment's facts (bd_canon_side), one
 * entry per source object in first-use order (the carry's fc, found through the source's memo
 * slot: bd_memo_slot.fc): its position, the tensor id and box objects it read (borrowed: the
 * facts list holds them, and a position's four entries never change once appended), the box's
 * length and values and the size. Only facts that converted in full are kept (an exact str tensor
 * id, two exact tuples of one common length of at most BD_FC_MAX exact int64 ints, an exact int64
 * size): tuples, ints and strs are immutable, so a hit gives what converting the same objects
 * again would, and leaves only the region's own checks (its tensor id equal, its rank the box's).
 * The Kimi-class plans name each source fragment in several operations. */
#define BD_FC_MAX 4

typedef struct {
    Py_ssize_t position; /* -1: empty */
    PyObject *tensor, *box[2];
    Py_ssize_t ndim;
    int64_t nbytes;
    int64_t off[BD_FC_MAX], shape[BD_FC_MAX];
} bd_fc_slot;

typedef struct {
    PyObject *bound_cls; /* borrowed */
    mr_layout_class bound_layout; /* bound_cls's layout check (cls NULL: instance dicts) */
    sc_carry sc;         /* the shared core (scan_carry.h): distinct fragments, ends, maxima (no lists) */
    int active;
    /* Per operation, recorded in C: its source and target positions as native int32, written
     * straight into the two bytes the result carries above BD_COMPACT_MIN operations (the
     * compact form of bound_contracts._compact_carried: no int object, list slot or box tuple
     * per operation); for smaller calls, turned into the result's lists by bd_carry_lists once
     * every region is built, with the (overlap_offset, overlap_shape) values of each box
     * (box_parts, borrowed: the region's dict holds them; NULL in the compact form). */
    PyObject *packed[2]; /* owned: new bytes of n native int32 (source_of, target_of) */
    int32_t *positions[2]; /* their buffers (written before the bytes is shared) */
    PyObject **box_parts; /* 2 per operation, or NULL (compact) */
    /* The carried spec 8.4 proof (regions_canonical_carried): every region built was proven
     * canonical (region_kernels.h) from its own stored values and its fragments' box and size,
     * read once per distinct fragment; facts holds, per distinct fragment in position order, the
     * four adapter values the proof used (placement tensor_id, global_offset, local_shape,
     * binding nbytes; strong references, so a replaced value never shares an address with the
     * one proven). canon is cleared (the proof is not carried) on anything unusual or unproven. */
    PyObject *pf_cls, *runtime_cls; /* borrowed: the caller's arguments */
    PyObject *facts;                /* owned list */
    int canon;
    bd_tcache *tc;                  /* bind_regions' tuple memo (borrowed; NULL: none) */
    bd_fc_slot *fc;                 /* the sources' facts' conversions (owned; NULL: none yet) */
    size_t fc_count, fc_cap;
} bd_carry;

static void
bd_carry_clear(bd_carry *c)
{
    sc_carry_clear(&c->sc);
    Py_CLEAR(c->facts);
    Py_CLEAR(c->packed[0]);
    Py_CLEAR(c->packed[1]);
    c->positions[0] = c->positions[1] = NULL;
    PyMem_Free(c->box_parts);
    c->box_parts = NULL;
    PyMem_Free(c->fc);
    c->fc = NULL;
    c->fc_count = c->fc_cap = 0;
}

/* Operation counts above which the carried positions are returned packed and the boxes None
 * (bound_contracts._COMPACT_MIN: the contract benchmark's small plans keep their lists, which
 * cost less to read there than packing saves). */
#define BD_COMPACT_MIN 257

/* Whether n operations' carried positions fit the packed form: every position is below the
 * distinct fragment count, at most 2n, which must fit a native int32 (what array("i") holds,
 * which revalidate.c reads; a C int of another width: the carry is off). */
static int
bd_carry_fits(Py_ssize_t n)
{
    return sizeof(int) == sizeof(int32_t) && n >= 0 && n <= (Py_ssize_t)(INT32_MAX / 2);
}

static int
bd_carry_init(bd_carry *c, Py_ssize_t n)
{
    if (sc_carry_init_core(&c->sc, n, 0) < 0) return -1;
    /* (n <= INT32_MAX / 2: checked by the caller, bd_carry_fits) */
    for (int side = 0; side < 2; side++) {
        c->packed[side] = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
        if (c->packed[side] == NULL) return -1;
        c->positions[side] = (int32_t *)PyBytes_AsString(c->packed[side]);
        if (c->positions[side] == NULL) return -1;
    }
    if (n <= BD_COMPACT_MIN) {
        c->box_parts = mr_alloc_array((size_t)n * 2 + 1, sizeof(*c->box_parts));
        if (c->box_parts == NULL) return -1;
    }
    if (c->canon) {
        c->facts = PyList_New(0);
        if (c->facts == NULL) return -1;
    }
    return 0;
}

/* The carry's per-operation items, for n operations (all recorded), stored in c->sc for
 * sc_carry_result. Above BD_COMPACT_MIN operations the compact form: the two packed bytes as
 * source_of and target_of, None as boxes. Else lists: source_of and target_of (one int object per
 * distinct position, shared by the operations naming it) and boxes (a new (overlap_offset,
 * overlap_shape) tuple per operation). 0, or -1 with an exception. */
static int
bd_carry_lists(bd_carry *c, Py_ssize_t n)
{
    Py_ssize_t distinct = PyList_Size(c->sc.frags);
    if (distinct < 0) return -1;
    if (c->box_parts == NULL) {
        c->sc.source_of = c->packed[0];
        c->sc.target_of = c->packed[1];
        c->packed[0] = c->packed[1] = NULL;
        c->positions[0] = c->positions[1] = NULL;
        c->sc.boxes = Py_NewRef(Py_None);
        return 0;
    }
    PyObject **numbers = mr_alloc_array((size_t)distinct + 1, sizeof(PyObject *));
    if (numbers == NULL) return -1;
    int status = 0;
    Py_ssize_t made = 0;
    for (; made < distinct; made++) {
        numbers[made] = PyLong_FromSsize_t(made);
        if (numbers[made] == NULL) {
            status = -1;
            break;
        }
    }
    /* out of the collector until full: sc_carry_result shows them (gctrack.h) */
    c->sc.source_of = status < 0 ? NULL : mr_gc_hide(PyList_New(n));
    c->sc.target_of = c->sc.source_of == NULL ? NULL : mr_gc_hide(PyList_New(n));
    if (c->sc.target_of == NULL) status = -1;
    const int32_t *const positions[2] = {c->positions[0], c->positions[1]};
    PyObject *const lists[2] = {c->sc.source_of, c->sc.target_of};
    for (int side = 0; side < 2 && status == 0; side++) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t p = positions[side][i];
            if (p < 0 || p >= distinct) { /* recorded by bd_carry_region for every operation */
                PyErr_SetString(PyExc_SystemError, "bind_regions: carried position out of range");
                status = -1;
                break;
            }
            if (PyList_SetItem(lists[side], i, Py_NewRef(numbers[p])) < 0) { /* steals the new reference */
                status = -1;
                break;
            }
        }
    }
    for (Py_ssize_t k = 0; k < made; k++) Py_DECREF(numbers[k]); /* the lists hold the ones used */
    PyMem_Free(numbers);
    if (status == 0) {
        c->sc.boxes = mr_gc_hide(PyList_New(n));
        if (c->sc.boxes == NULL) status = -1;
    }
    for (Py_ssize_t i = 0; i < n && status == 0; i++) {
        PyObject *box = PyTuple_Pack(2, c->box_parts[2 * i], c->box_parts[2 * i + 1]);
        if (box == NULL || PyList_SetItem(c->sc.boxes, i, box) < 0) status = -1; /* steals box */
    }
    return status;
}

/* An exact int within int64 for the carried proof: 1, 0 (not proven), -1 (error). */
static int
bd_canon_i64(PyObject *value, int64_t *out)
{
    if (!PyLong_CheckExact(value)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (x == -1 && overflow == 0 && PyErr_Occurred()) return -1;
    if (overflow != 0) return 0;
    *out = (int64_t)x;
    return 1;
}

/* An exact tuple of exact int64 ints, at most RC_MAX_NDIM long: 1 (*len set), 0, -1. */
static int
bd_canon_tuple(PyObject *value, int64_t *out, Py_ssize_t *len)
{
    if (!PyTuple_CheckExact(value)) return 0;
    Py_ssize_t n = PyTuple_Size(value);
    if (n < 0) return -1;
    if (n > RC_MAX_NDIM) return 0;
    for (Py_ssize_t d = 0; d < n; d++) {
        PyObject *item = PyTuple_GetItem(value, d);
        if (item == NULL) return -1;
        int rc = bd_canon_i64(item, &out[d]);
        if (rc != 1) return rc;
    }
    *len = n;
    return 1;
}

/* The four adapter values of the bound fragment at position (new: read from the fragment's
 * placement and binding and appended to c->facts). The fragment is this call's own (exact
 * bound_cls, checked by the caller); its placement and binding must be exact placement / runtime
 * fragments, whose fields are read from their instance dicts (no data descriptor shadows them:
 * what getattr, and regions_canonical, read). BD_OK, BD_FALLBACK, BD_ERROR. */
static int
bd_canon_facts(const bd_table *tb, bd_carry *c, PyObject *fragment, PyObject *const *view, Py_ssize_t position,
               PyObject **fresh)
{
    PyObject *const *nm = tb->nm;
    fresh[0] = NULL; /* (set to the four values when appended here) */
    Py_ssize_t have = PyList_Size(c->facts);
    if (have < 0) return BD_ERROR;
    if (have / 4 > position) return BD_OK; /* read when the fragment was first seen */
    if (have / 4 != position || have % 4 != 0) return BD_FALLBACK;
    if (view[BV_PLACEMENT] != NULL && (PyObject *)Py_TYPE(view[BV_PLACEMENT]) == c->pf_cls
        && view[BV_BINDING] != NULL && (PyObject *)Py_TYPE(view[BV_BINDING]) == c->runtime_cls
        && view[BV_TENSOR] != NULL && view[BV_GOFF] != NULL && view[BV_LSHAPE] != NULL && view[BV_NBYTES] != NULL) {
        /* the fragment's view (bd_bound_view) read these very fields from the same dicts */
        PyObject *const facts[4] = {view[BV_TENSOR], view[BV_GOFF], view[BV_LSHAPE], view[BV_NBYTES]};
        for (int k = 0; k < 4; k++) {
            if (PyList_Append(c->facts, facts[k]) < 0) return BD_ERROR;
        }
        for (int k = 0; k < 4; k++) fresh[k] = facts[k]; /* (the list holds them now) */
        return BD_OK;
    }
    PyObject *held[2] = {NULL, NULL}, *v[4] = {NULL, NULL, NULL, NULL};
    static const int bound_fields[] = {N_PLACEMENT, N_BINDING};
    static const int placement_fields[] = {N_TENSOR_ID, N_GLOBAL_OFFSET, N_LOCAL_SHAPE};
    int status = BD_OK;
    PyObject *const *bf = mr_layout_fields(fragment, &c->bound_layout);
    if (bf == NULL) {
        status = bd_phys_fields(nm, fragment, bound_fields, 2, held);
    } else if (bf[MR_BF_PLACEMENT] == NULL || bf[MR_BF_BINDING] == NULL) {
        status = BD_FALLBACK; /* an empty field: a missing key */
    } else {
        held[0] = Py_NewRef(bf[MR_BF_PLACEMENT]);
        held[1] = Py_NewRef(bf[MR_BF_BINDING]);
    }
    if (status == BD_OK && ((PyObject *)Py_TYPE(held[0]) != c->pf_cls || (PyObject *)Py_TYPE(held[1]) != c->runtime_cls))
        status = BD_FALLBACK;
    if (status == BD_OK) status = bd_phys_fields(nm, held[0], placement_fields, 3, v);
    static const int binding_fields[] = {N_NBYTES};
    if (status == BD_OK) {
        /* (the exact runtime fragment's state: its layout, else its instance dict) */
        PyObject *state = NULL;
        status = bd_runtime_state(held[1], &state);
        if (status == BD_OK) status = bd_rget(nm, state, binding_fields[0], &v[3]);
        Py_XDECREF(state);
    }
    for (int k = 0; k < 4 && status == BD_OK; k++) {
        if (PyList_Append(c->facts, v[k]) < 0) status = BD_ERROR;
    }
    for (int k = 0; k < 4; k++) Py_XDECREF(v[k]);
    Py_XDECREF(held[0]);
    Py_XDECREF(held[1]);
    return status;
}

/* A new entry of c->fc (grown by doubling): its index, or -1 with no memory left (no exception:
 * the caller converts without keeping). */
static Py_ssize_t
bd_fc_new(bd_carry *c)
{
    if (c->fc_count == c->fc_cap) {
        size_t cap = c->fc_cap == 0 ? 64 : c->fc_cap * 2;
        if (cap > (size_t)INT32_MAX || cap > PY_SSIZE_T_MAX / sizeof(bd_fc_slot)) return -1;
        bd_fc_slot *grown = PyMem_Realloc(c->fc, cap * sizeof(bd_fc_slot));
        if (grown == NULL) return -1;
        c->fc = grown;
        c->fc_cap = cap;
    }
    return (Py_ssize_t)c->fc_count++;
}

/* One side's box and size from its carried facts (borrowed from c->facts; fresh: the four just
 * appended for this position, or fresh[0] NULL) into the kernel's arrays; the tensor id must
 * equal the region's. kept (a source's memo slot's fc, or NULL): the index of the entry of c->fc
 * holding this position's conversions, -1 when none yet (then one is made, when the facts
 * converted in full). 1, 0 (not proven), -1. */
static int
bd_canon_side(bd_carry *c, Py_ssize_t position, PyObject *const *fresh, int32_t *kept, PyObject *tensor_id,
              Py_ssize_t ndim, int64_t *off, int64_t *shape, int64_t *nbytes, PyObject **box)
{
    bd_fc_slot *e = kept != NULL && *kept >= 0 && (size_t)*kept < c->fc_count ? &c->fc[*kept] : NULL;
    if (e == NULL || e->position != position) {
        PyObject *v[4];
        for (int k = 0; k < 4; k++) {
            v[k] = fresh[0] != NULL ? fresh[k] : PyList_GetItem(c->facts, position * 4 + k);
            if (v[k] == NULL) return -1;
        }
        if (!PyUnicode_CheckExact(v[0])) return 0;
        Py_ssize_t n = 0, n2 = 0;
        int64_t size = 0;
        int rc = bd_tc_tuple(c->tc, v[1], off, &n);
        if (rc == 1) rc = bd_tc_tuple(c->tc, v[2], shape, &n2);
        if (rc == 1) rc = bd_canon_i64(v[3], &size);
        if (rc != 1) return rc;
        if (n != n2) return 0;
        Py_ssize_t at = kept != NULL && n <= BD_FC_MAX ? bd_fc_new(c) : -1;
        if (at < 0) {
            /* (not kept: the region's checks on the values just converted) */
            if (v[0] != tensor_id) { /* (the same exact str: equal) */
                int cmp = PyUnicode_Compare(tensor_id, v[0]);
                if (cmp == -1 && PyErr_Occurred()) return -1;
                if (cmp != 0) return 0;
            }
            if (n != ndim) return 0;
            box[0] = v[1];
            box[1] = v[2];
            *nbytes = size;
            return 1;
        }
        e = &c->fc[at];
        *kept = (int32_t)at; /* (below fc_cap <= INT32_MAX) */
        e->position = position;
        e->tensor = v[0];
        e->box[0] = v[1];
        e->box[1] = v[2];
        e->ndim = n;
        e->nbytes = size;
        for (Py_ssize_t d = 0; d < n; d++) {
            e->off[d] = off[d];
            e->shape[d] = shape[d];
        }
    }
    if (e->tensor != tensor_id) { /* (the same exact str: equal) */
        int cmp = PyUnicode_Compare(tensor_id, e->tensor);
        if (cmp == -1 && PyErr_Occurred()) return -1;
        if (cmp != 0) return 0;
    }
    if (e->ndim != ndim) return 0;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        off[d] = e->off[d];
        shape[d] = e->shape[d];
    }
    box[0] = e->box[0];
    box[1] = e->box[1];
    *nbytes = e->nbytes;
    return 1;
}

/* Region i's spec 8.4 proof (regions_canonical's reads and kernel on the values just stored in
 * the region, kept[], and its fragments' carried facts), in cv->r. The scan rule's conversions
 * of the same objects (cv->vals, filled by sc_carry_extents for this region) are used instead
 * of converting them again: the scan rule accepted each as an exact int within int64 and each
 * loop tuple as an exact tuple of such ints of one common length, which is all that converting
 * them here checks (a length above RC_MAX_NDIM: not kept, converted here and refused as before).
 * On BD_OK, cv->boxes: r's overlap box (from kept[V_OFFSET], kept[V_SHAPE]) and the target's
 * box (from the objects cv->t_box, borrowed: c->facts holds them) are set, for the physical
 * path (bd_phys_region). BD_OK proven, BD_FALLBACK (the proof is not carried), BD_ERROR. */
static int
bd_canon_region(const bd_table *tb, bd_carry *c, PyObject *const *kept, PyObject *const *const *views,
                Py_ssize_t s_pos, Py_ssize_t t_pos, int32_t *s_fc, bd_conv *cv)
{
    enum { V_SOURCE, V_TARGET, V_OFFSET, V_SHAPE, V_SBASE, V_TBASE, V_INNER, V_OUTER, V_SSTRIDES, V_TSTRIDES };
    rc_region *const rp = &cv->r;
#define r (*rp)
    Py_ssize_t n1 = 0, n2 = 0, n3 = 0;
    PyObject *s_box[2], *t_box[2], *s_fresh[4], *t_fresh[4];
    int status = bd_canon_facts(tb, c, kept[V_SOURCE], views[0], s_pos, s_fresh);
    if (status == BD_OK) status = bd_canon_facts(tb, c, kept[V_TARGET], views[1], t_pos, t_fresh);
    if (status != BD_OK) return status;
    PyObject *tensor_id = kept[BD_KEPT_TENSOR];
    if (tensor_id == NULL || !PyUnicode_CheckExact(tensor_id)) return BD_FALLBACK;
    Py_ssize_t length = PyUnicode_GetLength(tensor_id);
    if (length < 0) return BD_ERROR;
    int rc = length > 0 ? 1 : 0;
    if (rc == 1) rc = bd_tc_tuple(c->tc, kept[V_OFFSET], r.ov_off, &r.ndim);
    if (rc == 1) rc = bd_tc_tuple(c->tc, kept[V_SHAPE], r.ov_shape, &n1);
    if (rc == 1 && (r.ndim == 0 || n1 != r.ndim)) rc = 0;
    if (rc == 1 && cv->vals.rank >= 0) {
        /* (the loop arrays are r's own: sc_values points at them) */
        r.s_base = cv->vals.s_base;
        r.t_base = cv->vals.t_base;
        r.inner = cv->vals.inner;
        r.nloops = cv->vals.rank;
    } else {
        if (rc == 1) rc = bd_canon_i64(kept[V_SBASE], &r.s_base);
        if (rc == 1) rc = bd_canon_i64(kept[V_TBASE], &r.t_base);
        if (rc == 1) rc = bd_canon_i64(kept[V_INNER], &r.inner);
        if (rc == 1) rc = bd_tc_tuple(c->tc, kept[V_OUTER], r.outer, &r.nloops);
        if (rc == 1) rc = bd_tc_tuple(c->tc, kept[V_SSTRIDES], r.s_str, &n2);
        if (rc == 1) rc = bd_tc_tuple(c->tc, kept[V_TSTRIDES], r.t_str, &n3);
        if (rc == 1 && (n2 != r.nloops || n3 != r.nloops)) rc = 0;
    }
    if (rc == 1) rc = bd_canon_side(c, s_pos, s_fresh, s_fc, tensor_id, r.ndim, r.s_off, r.s_shape, &r.s_nbytes, s_box);
    if (rc == 1) rc = bd_canon_side(c, t_pos, t_fresh, NULL, tensor_id, r.ndim, r.t_off, r.t_shape, &r.t_nbytes, t_box);
    if (rc == 1) rc = rc_region_canonical(&r);
#undef r
    if (rc == 1) {
        cv->boxes = 1;
        cv->t_box[0] = t_box[0];
        cv->t_box[1] = t_box[1];
    }
    return rc < 0 ? BD_ERROR : rc == 1 ? BD_OK : BD_FALLBACK;
}

/* Region i (just built by bind_regions): revalidate_scan's per-operation rule on its fields
 * (scan_carry.h, the same arithmetic and order as sc_carry_region), its positions and box parts
 * recorded, then the carried proof. known_source: the source's position when an earlier
 * operation of this call placed that very fragment (-1 otherwise; the identity table would
 * return it, and its end is raised the same way); *s_out its position. BD_OK recorded,
 * BD_FALLBACK (the carry is off), BD_ERROR. */
static int
bd_carry_region(const bd_table *tb, bd_carry *c, PyObject *const *v, PyObject *const *const *views, Py_ssize_t i,
                Py_ssize_t known_source, Py_ssize_t *s_out, int32_t *s_fc, bd_conv *cv)
{
    /* v: the values region i's dict holds, in field order from source (borrowed) */
    _Static_assert((int)SC_NVALUES == (int)N_TARGET_STRIDES - (int)N_SOURCE + 1, "region fields from source");
    Py_ssize_t s_pos = -1, t_pos = -1;
    int64_t s_end = 0, t_end = 0;
    cv->vals.cap = RC_MAX_NDIM;
    cv->vals.outer = cv->r.outer;
    cv->vals.s_str = cv->r.s_str;
    cv->vals.t_str = cv->r.t_str;
    int rc = sc_carry_extents(&c->sc, c->bound_cls, v, &s_end, &t_end, &cv->vals);
    if (rc != SC_OK) return rc == SC_DECLINE ? BD_FALLBACK : BD_ERROR;
    if (known_source >= 0) {
        s_pos = known_source;
        if (s_end > c->sc.ends[s_pos]) c->sc.ends[s_pos] = s_end;
    } else if ((rc = sc_carry_place(&c->sc, v[SC_SOURCE], s_end, &s_pos)) != SC_OK) {
        return rc == SC_DECLINE ? BD_FALLBACK : BD_ERROR;
    }
    if ((rc = sc_carry_place(&c->sc, v[SC_TARGET], t_end, &t_pos)) != SC_OK) {
        return rc == SC_DECLINE ? BD_FALLBACK : BD_ERROR;
    }
    /* (positions below the distinct count, at most 2n <= INT32_MAX: bd_carry_fits) */
    c->positions[0][i] = (int32_t)s_pos;
    c->positions[1][i] = (int32_t)t_pos;
    if (c->box_parts != NULL) {
        c->box_parts[2 * i] = v[SC_OFFSET];
        c->box_parts[2 * i + 1] = v[SC_SHAPE];
    }
    *s_out = s_pos;
    if (c->canon) {
        int status = bd_canon_region(tb, c, v, views, s_pos, t_pos, s_fc, cv);
        if (status == BD_ERROR) return BD_ERROR;
        if (status == BD_FALLBACK) {
            c->canon = 0;
            Py_CLEAR(c->facts);
        }
    }
    return BD_OK;
}

PyDoc_STRVAR(bind_regions_doc,
"bind_regions(region_cls, placement_fragment_cls, stored_fragment_cls, operations,\n"
"             bound_targets, bound_sources[, bound_cls[, runtime_cls, budget]])\n"
"--\n\n"
"Step 8 of bind_logical_transfer_plan: for each exact region_cls operation of the exact tuple\n"
"operations, the region with the same fields whose target is bound_targets[target id] and\n"
"whose source is bound_sources[source id] (a placement fragment source) or the source itself\n"
"(an exact stored fragment snapshot). A list; None when not decided here (a missing binding,\n"
"an inexact type: the Python loop raises its message).\n\n"
"With bound_cls (a class), returns (regions, selections) instead of the list, where\n"
"selections is exactly what bound_fragment_ids(regions, region_cls, bound_cls,\n"
"stored_fragment_cls) returns (step 11's source and target fragment id sets, derived in the\n"
"same pass), or None where that would return None; still None alone when the regions are not\n"
"decided here.\n\n"
"With runtime_cls and budget as well (9 arguments), returns (regions, selections, physical):\n"
"physical is True exactly when budget is an exact int > 0 and physical_whole_targets(regions,\n"
"region_cls, bound_cls, budget) would return True with every target's binding an exact\n"
"runtime_cls and placement an exact placement_fragment_cls (derived in the same pass, nothing\n"
"else read), else None (the Python check then decides).\n\n"
"With carry (10 arguments) True as well, returns (regions, selections, physical, carried):\n"
"carried is None, or the facts revalidate_scan would derive from these regions (for\n"
"revalidate_scan_carried: the new plan's revalidation within the same bind call), derived in\n"
"the same pass: (regions, fragments, source_of, target_of, boxes, ends, max_count,\n"
"max_total, facts), ends one native int64 per distinct fragment (the largest byte extent end\n"
"of its operations), max_count the largest segment count, max_total the largest running total.\n"
"Above 257 operations source_of and target_of are bytes of one native int32 per operation and\n"
"boxes is None (the compact form of bound_contracts._compact_carried); lists at most 257. With\n"
"more than 2**30 operations, carried is None.\n"
"facts is None unless prove (11 arguments, a bool) is True as well: then, when every region\n"
"built was proven canonical (regions_canonical's kernel, region_kernels.h) from the values it\n"
"stored and each distinct fragment's placement tensor_id, global_offset, local_shape and\n"
"binding nbytes (read once per fragment), the list of those four objects per distinct\n"
"fragment (for regions_canonical_carried), else None.");

/* bind_regions; with pos (bind_regions_ordered: nargs 11, args[4] and args[5] unused), each
 * operation's bound fragments from the two sides' positional forms (pos[0] sources, pos[1]
 * targets: bd_side_pos) instead of the maps. */
static PyObject *
bd_bind_regions_with(PyObject *self, PyObject *const *args, Py_ssize_t nargs, const bd_side_pos *pos)
{
    bd_table tb;
    if (nargs != 6 && nargs != 7 && nargs != 9 && nargs != 10 && nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "bind_regions expects 6, 7, 9, 10 or 11 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args, 3) < 0) return NULL;
    PyObject *bound_cls = NULL;
    if (nargs >= 7) {
        if (bd_check_heap_types(args + 6, nargs >= 9 ? 2 : 1) < 0) return NULL;
        bound_cls = args[6];
    }
    bd_phys ph = {.active = 0}; /* (every other member zero: NULL pointers, no memo entry) */
    if (nargs >= 9 && PyLong_CheckExact(args[8])) {
        /* the budget: a positive int (any size) turns the accept path on */
        int overflow = 0;
        long long budget = PyLong_AsLongLongAndOverflow(args[8], &overflow);
        if (budget == -1 && overflow == 0 && PyErr_Occurred()) return NULL;
        ph.active = overflow > 0 || (overflow == 0 && budget > 0);
        ph.runtime_cls = args[7];
        ph.pf_cls = args[1];
        ph.bound_cls = bound_cls;
    }
    PyObject *operations = args[3], *bound_targets = args[4], *bound_sources = args[5];
    if (!PyTuple_CheckExact(operations)
        || (pos == NULL && (!PyDict_CheckExact(bound_targets) || !PyDict_CheckExact(bound_sources)))) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyTuple_Size(operations);
    if (n < 0) return NULL;
    PyObject *regions = mr_gc_hide(PyList_New(n)); /* out of the collector until full (gctrack.h) */
    if (regions == NULL) return NULL;
    bd_ahead ahead[BD_AHEAD];
    for (int k = 0; k < BD_AHEAD; k++) ahead[k].dict = ahead[k].pfid[0] = ahead[k].pfid[1] = NULL;
    /* args[0] in TransferRegion's C-owned layout: operations read and regions built directly */
    static mr_layout_memo regions_memo;
    mr_layout_class rl;
    (void)mr_region_layout(&regions_memo, &rl, args[0]);
    mr_layout_alloc ra; /* (for bulk allocation: mr_layout_alloc) */
    ra.cls = NULL;
    if (n >= BD_BULK_ALLOC_MIN) mr_layout_alloc_init(&ra, &rl);
    PyObject *ids[2] = {NULL, NULL};
    int undecided = 0;
    bd_carry carry = {.bound_cls = bound_cls};
    /* bound_cls stored in a C-owned layout of BoundWeightFragment's fields: its instances' fields
     * are read from their slots (bd_bound_view, bd_canon_facts, mr_untrack_bound) */
    static mr_layout_memo bound_memo;
    int bound_layout = bound_cls != NULL && mr_bound_layout(&bound_memo, &carry.bound_layout, bound_cls);
    bd_memo memo = {NULL, 0, 0, 0};
    bd_id_batch id_batch = {.count = 0}; /* step 11's adds not yet made (bd_ids_add) */
    mr_att_memo *att = NULL;
    bd_tcache *tc = NULL;
    bd_conv cv; /* the current region's conversions (bd_conv; boxes cleared per region) */
    if (nargs >= 10 && (!PyBool_Check(args[9]) || (nargs == 11 && !PyBool_Check(args[10])))) {
        PyErr_SetString(PyExc_TypeError, "bind_regions' carry and prove arguments must be bools");
        goto fail;
    }
    if (nargs >= 10 && args[9] == Py_True) {
        carry.pf_cls = args[1];
        carry.runtime_cls = args[7];
        carry.canon = nargs == 11 && args[10] == Py_True;
        if (bd_carry_fits(n)) { /* (else the carry is off: the plain scan decides) */
            if (bd_carry_init(&carry, n) < 0) goto fail;
            carry.active = 1;
        }
    }
    /* The targets found complete by bind_regions_ordered (bd_ordered_build): their selection is
     * returned as None, "every runtime fragment the target parts' attestations list", which is
     * what the set would hold (see bd_ordered_build), and is not built; each id is still checked
     * an exact non-empty str as it would be added. */
    int targets_complete = pos != NULL && pos[1].complete;
    if (bound_cls != NULL) {
        ids[0] = PyFrozenSet_New(NULL);
        ids[1] = ids[0] == NULL || targets_complete ? NULL : PyFrozenSet_New(NULL);
        if (ids[0] == NULL || (!targets_complete && ids[1] == NULL) || bd_memo_resize(&memo, 64) < 0) goto fail;
        /* GC: the regions and their bound fragments are offered for untracking as they are built
         * (what mr_untrack_bound_regions did after the pass; same size threshold) */
        if (n >= MR_GC_BULK_MIN) {
            att = PyMem_Calloc(1, sizeof(mr_att_memo));
            if (att == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
        }
    }
    if (bound_cls != NULL && (ph.active || carry.active)) {
        /* the tuple memo of the physical accept path and the carried proof */
        tc = PyMem_Calloc(1, sizeof(bd_tcache));
        if (tc == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        ph.tc = carry.tc = tc;
    }
    if (ph.active) {
        ph.extents = mr_alloc_array((size_t)n, sizeof(pq_extent));
        ph.targets = mr_alloc_array((size_t)n, sizeof(uintptr_t));
        ph.spaces = PyDict_New();
        if (ph.extents == NULL || ph.targets == NULL || ph.spaces == NULL) goto fail;
    }
    /* the bound fragments' classes for bd_bound_view: bound_cls, runtime_cls (none with 7
     * arguments), placement_fragment_cls */
    PyObject *view_cls[3] = {bound_cls, nargs >= 9 ? args[7] : NULL, args[1]};
    /* the next operations whose dict / values / ids / bound fragments are read ahead */
    Py_ssize_t dict_at = 0, values_at = 0, pfids_at = 0, ids_at = 0, bound_at = 0;
    PyObject *const maps[2] = {bound_sources, bound_targets};
    for (Py_ssize_t i = 0; i < n; i++) {
        for (; dict_at < n && dict_at < i + BD_AHEAD; dict_at++) {
            if (dict_at + BD_AHEAD < n) {
                PyObject *far = PyTuple_GetItem(operations, dict_at + BD_AHEAD);
                if (far == NULL) goto fail;
                bd_prefetch_object(far);
            }
            PyObject *next = PyTuple_GetItem(operations, dict_at);
            if (next == NULL) goto fail;
            bd_ahead_dict(&ahead[dict_at % BD_AHEAD], next, dict_at, args[0], &rl);
            if (ahead[dict_at % BD_AHEAD].status == BD_ERROR) goto fail;
        }
        for (; values_at < n && values_at < i + BD_AHEAD / 2; values_at++) {
            bd_ahead_values(&tb, &ahead[values_at % BD_AHEAD]);
            if (ahead[values_at % BD_AHEAD].status == BD_ERROR) goto fail;
            /* a hint for its source's memo slot (probed by bd_ahead_ids and bd_memo_get) */
            if (ahead[values_at % BD_AHEAD].status == BD_OK) bd_memo_prefetch(&memo, ahead[values_at % BD_AHEAD].v[0]);
        }
        /* (positional: no id is read) */
        for (; pos == NULL && pfids_at < n && pfids_at < i + BD_AHEAD * 3 / 8; pfids_at++) {
            bd_ahead_pfids(&ahead[pfids_at % BD_AHEAD]);
        }
        for (; ids_at < n && ids_at < i + BD_AHEAD / 4; ids_at++) {
            bd_ahead *read = &ahead[ids_at % BD_AHEAD];
            if (bd_ahead_ids(&tb, read, args[1], &memo, pos) == BD_ERROR) goto fail;
            /* a source met before: hints for its carry end and its facts' conversions, which its
             * region reads and writes (indexed by the source's first region: scattered lines at
             * 10^6 fragments). Addresses only, each index checked against its array's extent. */
            if (carry.active && read->met_position >= 0 && (size_t)read->met_position < 2 * (size_t)n) {
                __builtin_prefetch(&carry.sc.ends[read->met_position], 1);
            }
            if (carry.active && carry.canon && read->met_fc >= 0 && (size_t)read->met_fc < carry.fc_count) {
                const bd_fc_slot *fc = &carry.fc[read->met_fc];
                __builtin_prefetch(fc);
                __builtin_prefetch((const char *)fc + sizeof(*fc) - 1);
            }
            /* and the home slots of its bound fragments in the carry's identity table, which
             * sc_carry_place probes (the region's target and source: the bound ones; the
             * source's when not met). In the positional form they are known here; the table may
             * grow before then (a missed hint). */
            for (int side = 1; carry.active && side >= 0; side--) {
                if (read->found[side] != BD_OK || read->bound[side] == NULL) continue;
                if (side == 0 && read->met_position >= 0) continue;
                size_t home = sc_carry_home(read->bound[side], carry.sc.mask);
                __builtin_prefetch(&carry.sc.keys[home], 1);
                __builtin_prefetch(&carry.sc.values[home], 1);
            }
        }
        /* the bound fragments of every operation whose ids were read, back to back once the
         * next one is due (up to BD_AHEAD / 4 lookups whose cache misses can overlap) */
        if (bound_at <= i) { /* (ids_at > i: read above) */
            for (; bound_at < ids_at; bound_at++) {
                if (bd_ahead_bound(&ahead[bound_at % BD_AHEAD], maps) == BD_ERROR) goto fail;
            }
        }
        /* bind_regions_ordered: the binding and placement fragments of the bound fragments of
         * the operation BD_AHEAD / 8 on (found by bd_ahead_ids, which asked for their headers
         * BD_AHEAD / 8 operations ago): bd_bound_view and the carried proof read them at its
         * region, cache misses at 10^6 fragments otherwise. Hints only: addresses are read from
         * the bound fragments' slots (C-owned layout), nothing is dereferenced. */
        if (pos != NULL && bound_layout && i + BD_AHEAD / 8 < ids_at) {
            const bd_ahead *next = &ahead[(i + BD_AHEAD / 8) % BD_AHEAD];
            for (int side = 0; side < 2 && next->status == BD_OK; side++) {
                PyObject *const *bf =
                    next->found[side] == BD_OK && next->bound[side] != NULL
                        ? mr_layout_fields(next->bound[side], &carry.bound_layout) : NULL;
                if (bf == NULL) continue;
                if (bf[MR_BF_BINDING] != NULL) bd_prefetch_whole(bf[MR_BF_BINDING]);
                if (bf[MR_BF_PLACEMENT] != NULL) bd_prefetch_whole(bf[MR_BF_PLACEMENT]);
            }
        }
        /* and, the binding fragments of the operation one on asked for a round ago, the head of
         * their address (an int of each fragment's own, bd_phys_region reads its digits) */
        if (pos != NULL && bound_layout && i + 1 < ids_at && bd_runtime_memo.memo.cls != NULL) {
            const bd_ahead *next = &ahead[(i + 1) % BD_AHEAD];
            for (int side = 0; side < 2 && next->status == BD_OK; side++) {
                PyObject *const *bf =
                    next->found[side] == BD_OK && next->bound[side] != NULL
                        ? mr_layout_fields(next->bound[side], &carry.bound_layout) : NULL;
                PyObject *binding = bf != NULL ? bf[MR_BF_BINDING] : NULL;
                if (binding == NULL || (PyObject *)Py_TYPE(binding) != bd_runtime_memo.memo.cls) continue;
                PyObject *address = ((mr_layout_object *)binding)->fields[MR_RF_ADDRESS];
                if (address != NULL) mr_prefetch_head(address, 0);
            }
        }
        bd_ahead *slot = &ahead[i % BD_AHEAD];
        PyObject *region = NULL;
        PyObject *kept[BD_KEPT] = {NULL};
        int status = slot->status;
        /* the memo entry of this operation's source object (bound_cls given) */
        bd_memo_slot *met = NULL;
        int hit = 0;
        if (status == BD_OK && memo.slots != NULL) {
            met = bd_memo_get(&memo, slot->v[0], &hit);
            if (met == NULL) goto fail;
        }
        if (status == BD_OK) {
            status = bd_bound_region(&tb, args, &rl, &ra, slot, bound_targets, bound_sources, pos, hit ? met->bound : NULL,
                                     att, !hit, &region, kept, bound_layout);
        }
        bd_ahead_clear(slot); /* (the operation holds its dict: kept stays valid) */
        if (status != BD_OK || PyList_SetItem(regions, i, region) < 0) {
            if (status == BD_FALLBACK) {
                for (int k = 0; k < BD_AHEAD; k++) bd_ahead_clear(&ahead[k]);
                Py_DECREF(regions);
                Py_XDECREF(ids[0]);
                Py_XDECREF(ids[1]);
                bd_phys_clear(&ph);
                bd_carry_clear(&carry);
                bd_tc_clear(tc);
                PyMem_Free(tc);
                PyMem_Free(memo.slots);
                PyMem_Free(att);
                Py_RETURN_NONE;
            }
            goto fail;
        }
        if (bound_cls == NULL) continue;
        /* The region is held by the list (no user code runs until the list is returned); kept
         * holds the values just stored in its dict. Its bound fragments' fields read by the steps
         * below, read once (the source's binding id only; all the target's when the physical
         * accept path or the carried proof reads them). */
        PyObject *bound_source = kept[0], *bound_target = kept[N_TARGET - N_SOURCE];
        PyObject *views[2][BV_COUNT];
        if (hit) {
            /* what bd_bound_view(all = 0) read of this very bound source when first met */
            for (int k = 0; k < BV_COUNT; k++) views[0][k] = NULL;
            views[0][BV_BINDING] = met->binding;
            views[0][BV_FID] = met->fid;
        } else {
            status = bd_bound_view(&tb, view_cls, &carry.bound_layout, bound_source, 0, views[0]);
            if (status != BD_OK) goto fail;
            met->bound = bound_source;
            met->binding = views[0][BV_BINDING];
            met->fid = views[0][BV_FID];
        }
        status = bd_bound_view(&tb, view_cls, &carry.bound_layout, bound_target,
                               ph.active || (carry.active && carry.canon), views[1]);
        if (status != BD_OK) goto fail;
        if (!undecided) {
            /* bound_fragment_ids on this region: its target must be an exact bound_cls, its source
             * an exact bound_cls (whose id is added: once, when first met; adding it again would
             * leave the set as it is) or stored_cls. */
            int added = BD_OK;
            if ((PyObject *)Py_TYPE(bound_target) != bound_cls) added = BD_FALLBACK;
            else if ((PyObject *)Py_TYPE(bound_source) == bound_cls) {
                if (!hit) added = bd_ids_add(tb.nm, &id_batch, 0, bound_source, views[0], ids);
            }
            else if ((PyObject *)Py_TYPE(bound_source) != args[2]) added = BD_FALLBACK;
            if (added == BD_OK) added = bd_ids_add(tb.nm, &id_batch, 1, bound_target, views[1], ids);
            if (added == BD_ERROR) goto fail;
            if (added == BD_FALLBACK) undecided = 1;
        }
        /* the carry first: the physical path's same-box checks reuse its proof's conversions
         * (cv.boxes; each step decides on its own, so the order changes no outcome) */
        cv.boxes = 0;
        if (carry.active) {
            PyObject *const *const side_views[2] = {views[0], views[1]};
            Py_ssize_t s_pos = -1;
            status = bd_carry_region(&tb, &carry, kept, side_views, i, met->position, &s_pos, &met->fc, &cv);
            if (status == BD_ERROR) goto fail;
            met->position = (int32_t)s_pos; /* (bd_carry_fits) */
            if (status == BD_FALLBACK) {
                carry.active = 0;
                bd_carry_clear(&carry);
            }
        }
        if (ph.active) {
            /* (cv.boxes only while the proof is carried: its facts list holds cv.t_box) */
            status = bd_phys_region(&ph, bound_target, views[1], kept[N_OVERLAP_OFFSET - N_SOURCE],
                                    kept[N_OVERLAP_SHAPE - N_SOURCE], i, carry.active && carry.canon ? &cv : NULL);
            if (status == BD_ERROR) goto fail;
            if (status == BD_FALLBACK) ph.active = 0;
        }
    }
    mr_gc_show(regions); /* full */
    if (bound_cls == NULL) return regions;
    if (!undecided) {
        int added = bd_ids_flush(&id_batch, ids); /* the last adds */
        if (added == BD_ERROR) goto fail;
        if (added == BD_FALLBACK) undecided = 1;
    }
    PyMem_Free(memo.slots);
    PyMem_Free(att);
    memo.slots = NULL;
    att = NULL;
    PyObject *physical = Py_None;
    if (nargs >= 9 && ph.active) {
        int disjoint;
        /* the spaces' previous extents, then the extents' array as the radix sort's scratch
         * (none: the qsort kernels decide) */
        Py_ssize_t nspaces = PyDict_Size(ph.spaces);
        if (nspaces < 0) goto fail;
        bd_space_last *last = PyMem_Calloc((size_t)nspaces + 1, sizeof(bd_space_last));
        Py_BEGIN_ALLOW_THREADS
        if (last != NULL) {
            _Static_assert(sizeof(pq_extent) >= sizeof(uintptr_t), "pointer scratch fits");
            disjoint = bd_extents_disjoint(ph.extents, last, (size_t)n, (size_t)nspaces)
                       && bd_pointers_distinct(ph.targets, (uintptr_t *)(void *)ph.extents, (size_t)n);
        } else {
            disjoint = mr_pointers_distinct(ph.targets, (size_t)n) && mr_extents_disjoint(ph.extents, (size_t)n);
        }
        Py_END_ALLOW_THREADS
        PyMem_Free(last);
        if (disjoint) physical = Py_True;
    }
    bd_phys_clear(&ph);
    sc_carry_drop_table(&carry.sc); /* (read by no step below) */
    PyObject *result;
    PyObject *selections = undecided ? Py_NewRef(Py_None)
                                     : PyTuple_Pack(2, ids[0], ids[1] != NULL ? ids[1] : Py_None);
    if (selections == NULL) result = NULL;
    else if (nargs >= 10) {
        /* (regions, fragments, source_of, target_of, boxes, ends, max_count, max_total, facts):
         * facts the carried proof's list (or None) */
        PyObject *carried = NULL;
        if (!carry.active) carried = Py_NewRef(Py_None);
        else if (bd_carry_lists(&carry, n) == 0)
            carried = sc_carry_result(&carry.sc, regions, carry.canon ? carry.facts : Py_None);
        result = carried == NULL ? NULL : PyTuple_Pack(4, regions, selections, physical, carried);
        Py_XDECREF(carried);
    }
    else if (nargs == 9) result = PyTuple_Pack(3, regions, selections, physical);
    else result = PyTuple_Pack(2, regions, selections);
    bd_carry_clear(&carry);
    bd_tc_clear(tc);
    PyMem_Free(tc);
    Py_XDECREF(selections);
    Py_DECREF(regions);
    Py_XDECREF(ids[0]);
    Py_XDECREF(ids[1]);
    return result;
fail:
    for (int k = 0; k < BD_AHEAD; k++) bd_ahead_clear(&ahead[k]);
    Py_DECREF(regions);
    Py_XDECREF(ids[0]);
    Py_XDECREF(ids[1]);
    bd_phys_clear(&ph);
    bd_carry_clear(&carry);
    bd_tc_clear(tc);
    PyMem_Free(tc);
    PyMem_Free(memo.slots);
    PyMem_Free(att);
    return NULL;
}


static PyObject *
bd_bind_regions(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return bd_bind_regions_with(self, args, nargs, NULL);
}

PyDoc_STRVAR(bind_regions_ordered_doc,
"bind_regions_ordered(region_cls, placement_fragment_cls, stored_fragment_cls, operations,\n"
"                     target_parts, target_attestations, source_parts, source_attestations,\n"
"                     attestation_cls, bound_cls, runtime_cls, budget, carry, prove)\n"
"--\n\n"
"Binding steps 7 and 8 in one call: what\n"
"bind_regions(region_cls, placement_fragment_cls, stored_fragment_cls, operations, T, S,\n"
"bound_cls, runtime_cls, budget, carry, prove) returns for the maps\n"
"T = bound_fragments_ordered(bound_cls, attestation_cls, region_cls, target_parts,\n"
"target_attestations, operations, 0, True) and S the same of the source parts and attestations\n"
"with 1 (the bound fragments allocated in the same order), without building the maps: each\n"
"operation's bound fragments are the ones the two operation walks queued for its target and\n"
"source objects, read by position (one C call: nothing changes between the walks and the\n"
"regions). None when not decided here: either map not decided or raising its duplicate error\n"
"(ids not pairwise distinct), an operation field that is not one of the parts' fragment\n"
"objects, or bind_regions returning None; the caller then runs the two calls and bind_regions.\n"
"One difference: when the operations name every fragment of the target parts and each target\n"
"attestation's evidence lists as many fragments as its part, the target selection is None\n"
"(complete: the ids of every evidence fragment of those attestations; each id checked an exact\n"
"non-empty str) instead of that frozenset.");

static PyObject *
bd_bind_regions_ordered(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "bind_regions_ordered expects 14 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args, 3) < 0 || bd_check_heap_types(args + 8, 3) < 0) return NULL;
    if (!PyBool_Check(args[12]) || !PyBool_Check(args[13])) {
        PyErr_SetString(PyExc_TypeError, "bind_regions' carry and prove arguments must be bools");
        return NULL;
    }
    /* bind_regions' side numbering: pos[0] the sources (which 1), pos[1] the targets (which 0);
     * the targets' bound fragments made first, as the two calls make them */
    bd_side_pos pos[2] = {{NULL, 0, NULL, 0}, {NULL, 0, NULL, 0}};
    PyObject *unused = NULL;
    /* bind_regions' untracking memo when it untracks (bound_cls given, from MR_GC_BULK_MIN
     * operations): the bound fragments are offered as they are made */
    Py_ssize_t n_ops = PyTuple_CheckExact(args[3]) ? PyTuple_Size(args[3]) : 0;
    mr_att_memo *att = n_ops >= MR_GC_BULK_MIN ? PyMem_Calloc(1, sizeof(mr_att_memo)) : NULL;
    if (n_ops >= MR_GC_BULK_MIN && att == NULL) return PyErr_NoMemory();
    int status = bd_ordered_build(&tb, args[9], args[8], args[0], args[4], args[5], args[3], 0, 0, &pos[1], att,
                                  &unused);
    if (status == BD_OK) {
        status = bd_ordered_build(&tb, args[9], args[8], args[0], args[6], args[7], args[3], 1, 0, &pos[0], att,
                                  &unused);
    }
    PyMem_Free(att);
    PyObject *result = NULL;
    if (status == BD_OK) {
        PyObject *const core[11] = {args[0], args[1], args[2], args[3], Py_None, Py_None,
                                    args[9], args[10], args[11], args[12], args[13]};
        result = bd_bind_regions_with(self, core, 11, pos);
    }
    bd_side_pos_clear(&pos[0]);
    bd_side_pos_clear(&pos[1]);
    if (status == BD_ERROR) return NULL;
    if (status == BD_FALLBACK) Py_RETURN_NONE;
    return result;
}


/* ------------------------------------------------------------------------------------------
 * address_ranges_clear */

typedef struct {
    uint64_t space;
    uint64_t start, size, end;                 /* the view */
    uint64_t storage, storage_size, storage_end; /* its allocation */
} bd_range;

static int
bd_cmp_view(const void *pa, const void *pb)
{
    const bd_range *a = pa, *b = pb;
    if (a->space != b->space) return a->space < b->space ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    return 0;
}

static int
bd_cmp_storage(const void *pa, const void *pb)
{
    const bd_range *a = pa, *b = pb;
    if (a->space != b->space) return a->space < b->space ? -1 : 1;
    if (a->storage != b->storage) return a->storage < b->storage ? -1 : 1;
    if (a->storage_size != b->storage_size) return a->storage_size < b->storage_size ? -1 : 1;
    return 0;
}

/* Kernel: ranges sorted by cmp already (each one not after the next). */
static int
bd_ranges_sorted(const bd_range *ranges, size_t n, int (*cmp)(const void *, const void *))
{
    for (size_t i = 1; i < n; i++) {
        if (cmp(&ranges[i - 1], &ranges[i]) > 0) return 0;
    }
    return 1;
}

/* Kernel (Python-free): 1 when, within every address space, no two views overlap and any two
 * allocations are identical or disjoint (the rule _address_ranges.py checks, without its
 * declared-alias exception); 0 otherwise. Sorts ranges in place, each sort skipped when they are
 * in that order already (a binding's fragments laid out in address order): the scans read only
 * the fields the order compares (and the ends they determine), so ranges that compare equal
 * are interchangeable and any sorted order decides the same. */
static int
bd_ranges_clear(bd_range *ranges, size_t n)
{
    if (n < 2) return 1;
    if (!bd_ranges_sorted(ranges, n, bd_cmp_view)) qsort(ranges, n, sizeof(bd_range), bd_cmp_view);
    for (size_t i = 1; i < n;) {
        /* one space: ranges[first .. i) */
        size_t first = i - 1;
        uint64_t reach = ranges[first].end;
        while (i < n && ranges[i].space == ranges[first].space) {
            if (ranges[i].start < reach) return 0; /* an earlier view is still active */
            if (ranges[i].end > reach) reach = ranges[i].end;
            i++;
        }
        i++;
    }
    if (!bd_ranges_sorted(ranges, n, bd_cmp_storage)) qsort(ranges, n, sizeof(bd_range), bd_cmp_storage);
    for (size_t i = 1; i < n;) {
        size_t first = i - 1;
        uint64_t reach_start = ranges[first].storage, reach_end = ranges[first].storage_end;
        while (i < n && ranges[i].space == ranges[first].space) {
            uint64_t start = ranges[i].storage, end = ranges[i].storage_end;
            if (!(start == reach_start && end == reach_end)) {
                if (start < reach_end) return 0;
                reach_start = start;
                reach_end = end;
            }
            i++;
        }
        i++;
    }
    return 1;
}

/* An exact int in [0, 2**64): 1 (stored), 0 not decided, -1 error. */
static int
bd_as_u64(PyObject *value, uint64_t *out)
{
    if (!PyLong_CheckExact(value)) return 0;
    int fast = bd_u63(value, out);
    if (fast != 0) return fast;
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

/* Fill one range from view (instance_id, runtime, ...); BD_* status. */
/* bd_view_range's previous key and its space (borrowed pointers, compared by address). */
typedef struct {
    PyObject *instance, *worker, *device;
    uint64_t space;
} bd_last_space;

static int bd_range_fill(PyObject *const *nm, PyObject *instance, PyObject *rdict, PyObject *spaces,
                         bd_range *range, bd_last_space *last);

static int
bd_view_range(PyObject *const *nm, PyObject *view, PyObject *rf_cls, PyObject *spaces, bd_range *range,
              bd_last_space *last)
{
    if (!PyTuple_CheckExact(view) || PyTuple_Size(view) != 4) return BD_FALLBACK;
    PyObject *instance = PyTuple_GetItem(view, 0);
    PyObject *runtime = PyTuple_GetItem(view, 1);
    if (instance == NULL || runtime == NULL) return BD_ERROR;
    if (!PyUnicode_CheckExact(instance) || (PyObject *)Py_TYPE(runtime) != rf_cls) return BD_FALLBACK;
    /* The fields from the exact runtime fragment's own dict (what getattr reads: the class
     * defines no descriptor for them; a missing one declines). */
    PyObject *rdict = NULL;
    int status = bd_runtime_state(runtime, &rdict);
    if (status != BD_OK) return status;
    status = bd_range_fill(nm, instance, rdict, spaces, range, last);
    Py_DECREF(rdict);
    return status;
}

/* One range from the exact str instance and the dict rdict of an exact runtime fragment (its
 * worker_id, device, address, nbytes, storage_address, storage_nbytes); BD_* status. */
static int
bd_range_fill(PyObject *const *nm, PyObject *instance, PyObject *rdict, PyObject *spaces, bd_range *range,
              bd_last_space *last)
{
    PyObject *worker = NULL, *device = NULL, *key = NULL;
    int status = bd_rget(nm, rdict, N_WORKER_ID, &worker);
    if (status == BD_OK) status = bd_rget(nm, rdict, N_DEVICE, &device);
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    if (!PyUnicode_CheckExact(worker) || !PyUnicode_CheckExact(device)) goto done;
    static const int fields[4] = {N_ADDRESS, N_NBYTES, N_STORAGE_ADDRESS, N_STORAGE_NBYTES};
    uint64_t values[4];
    for (int k = 0; k < 4; k++) {
        PyObject *value = NULL;
        status = bd_rget(nm, rdict, fields[k], &value);
        if (status != BD_OK) goto done;
        int rc = bd_as_u64(value, &values[k]);
        Py_DECREF(value);
        if (rc <= 0) {
            status = rc < 0 ? BD_ERROR : BD_FALLBACK;
            goto done;
        }
    }
    status = BD_FALLBACK;
    if (mr_add_u64(values[0], values[1], &range->end) < 0) goto done;
    if (mr_add_u64(values[2], values[3], &range->storage_end) < 0) goto done;
    range->start = values[0];
    range->size = values[1];
    range->storage = values[2];
    range->storage_size = values[3];
    /* The previous view's very (instance, worker, device) objects: its space (the same key;
     * borrowed pointers, alive in the views, compared by address only). */
    if (last->instance == instance && last->worker == worker && last->device == device) {
        range->space = last->space;
        status = BD_OK;
        goto done;
    }
    status = BD_ERROR;
    key = PyTuple_Pack(3, instance, worker, device);
    if (key == NULL) goto done;
    PyObject *known = PyDict_GetItemWithError(spaces, key); /* borrowed */
    if (known == NULL) {
        if (PyErr_Occurred()) goto done;
        Py_ssize_t next = PyDict_Size(spaces);
        if (next < 0) goto done;
        PyObject *number = PyLong_FromSsize_t(next);
        if (number == NULL) goto done;
        int rc = PyDict_SetItem(spaces, key, number);
        Py_DECREF(number);
        if (rc < 0) goto done;
        range->space = (uint64_t)next;
    } else {
        Py_ssize_t number = PyLong_AsSsize_t(known);
        if (number < 0) goto done; /* our own non-negative ints: cannot happen */
        range->space = (uint64_t)number;
    }
    last->instance = instance;
    last->worker = worker;
    last->device = device;
    last->space = range->space;
    status = BD_OK;
done:
    Py_XDECREF(worker);
    Py_XDECREF(device);
    Py_XDECREF(key);
    return status;
}

PyDoc_STRVAR(address_ranges_clear_doc,
"address_ranges_clear(views, runtime_fragment_cls)\n"
"--\n\n"
"True when the exact list of runtime views (instance_id, runtime fragment, ...) passes\n"
"_address_ranges.py validate_runtime_address_ranges without needing its declared-alias\n"
"exception: within each (instance_id, worker_id, device) no two views overlap, and any two\n"
"allocations are identical or disjoint (exact str keys, exact runtime_fragment_cls fragments,\n"
"exact ints whose ranges end below 2**64). False when that is not decided here.");

/* address_ranges_clear on the exact list views: BD_OK clear, BD_FALLBACK not decided, BD_ERROR. */
static int
bd_ranges_core(const bd_table *tb, PyObject *views, PyObject *rf_cls)
{
    if (!PyList_CheckExact(views)) return BD_FALLBACK;
    Py_ssize_t n = PyList_Size(views);
    if (n < 0) return BD_ERROR;
    bd_range *ranges = mr_alloc_array((size_t)n, sizeof(bd_range));
    if (ranges == NULL) return BD_ERROR;
    PyObject *spaces = PyDict_New();
    int status = spaces == NULL ? BD_ERROR : BD_OK;
    bd_last_space last = {NULL, NULL, NULL, 0};
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *view = PyList_GetItem(views, i);
        if (i + 4 < n) { /* a hint: the runtime fragment read four views on */
            PyObject *ahead = PyList_GetItem(views, i + 4);
            if (ahead != NULL && PyTuple_CheckExact(ahead) && PyTuple_Size(ahead) == 4) {
                bd_prefetch_object(PyTuple_GetItem(ahead, 1));
            }
        }
        status = view == NULL ? BD_ERROR : bd_view_range(tb->nm, view, rf_cls, spaces, &ranges[i], &last);
    }
    /* The kernel only sees the C array. */
    if (status == BD_OK && !bd_ranges_clear(ranges, (size_t)n)) status = BD_FALLBACK;
    PyMem_Free(ranges);
    Py_XDECREF(spaces);
    return status;
}

static PyObject *
bd_address_ranges_clear(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "address_ranges_clear expects 2 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args + 1, 1) < 0) return NULL;
    int status = bd_ranges_core(&tb, args[0], args[1]);
    if (status == BD_ERROR) return NULL;
    return PyBool_FromLong(status == BD_OK);
}


/* ------------------------------------------------------------------------------------------
 * attest_binding */

/* a == b for two exact str (1), anything else (0), error (-1). */
static int
bd_same_str(PyObject *a, PyObject *b)
{
    if (!PyUnicode_CheckExact(a) || !PyUnicode_CheckExact(b)) return 0;
    int cmp = bd_compare(a, b);
    if (cmp == -2) return -1;
    return cmp == 0;
}

/* A set of exact str by value (hash, then identity or equality: no user code), for a
 * distinctness check without a dict entry and an int object per key: capacity a power of two,
 * at least twice the count; str NULL empty. */
typedef struct {
    Py_hash_t hash;
    PyObject *str; /* borrowed: the caller keeps it alive for the table's life */
} bd_strslot;

/* Adds the exact str s: 1 added, 0 an equal str is there, -1 error. */
static int
bd_strtab_add(bd_strslot *table, size_t mask, PyObject *s)
{
    Py_hash_t hash = PyObject_Hash(s);
    if (hash == -1) return -1;
    size_t i = (size_t)hash & mask; /* str hashes are spread (SipHash) */
    while (table[i].str != NULL) {
        if (table[i].hash == hash) {
            if (table[i].str == s) return 0;
            int cmp = bd_compare(table[i].str, s);
            if (cmp == -2) return -1;
            if (cmp == 0) return 0;
        }
        i = (i + 1) & mask;
    }
    table[i].hash = hash;
    table[i].str = s;
    return 1;
}

/* A table of capacity for n exact str (bd_strtab_add): *mask its capacity - 1. NULL with
 * MemoryError. */
static bd_strslot *
bd_strtab_new(Py_ssize_t n, size_t *mask)
{
    size_t capacity = 16;
    while (capacity < 2 * (size_t)n + 2 && capacity <= SIZE_MAX / 4 / sizeof(bd_strslot)) capacity *= 2;
    if (capacity < 2 * (size_t)n + 2) {
        PyErr_NoMemory();
        return NULL;
    }
    bd_strslot *table = mr_alloc_array(capacity, sizeof(bd_strslot));
    if (table == NULL) return NULL;
    memset(table, 0, capacity * sizeof(bd_strslot));
    *mask = capacity - 1;
    return table;
}

/* 1 when an exact str equal to s (as bd_strtab_add compares) is in the table, else 0 (also on
 * an error, which is cleared: a hash of an exact str does not fail). */
static int
bd_strtab_has(const bd_strslot *table, size_t mask, PyObject *s)
{
    Py_hash_t hash = PyObject_Hash(s);
    if (hash == -1) {
        PyErr_Clear();
        return 0;
    }
    for (size_t i = (size_t)hash & mask; table[i].str != NULL; i = (i + 1) & mask) {
        if (table[i].hash != hash) continue;
        if (table[i].str == s) return 1;
        int cmp = bd_compare(table[i].str, s);
        if (cmp == -2) PyErr_Clear();
        else if (cmp == 0) return 1;
    }
    return 0;
}

/* A hint: the home slot of s (an exact str: its hash is computed if not cached, no code runs)
 * in the table. Only an address is computed from the table. */
static inline void
bd_strtab_prefetch(const bd_strslot *table, size_t mask, PyObject *s)
{
    if (s == NULL || !PyUnicode_CheckExact(s)) return;
    Py_hash_t hash = PyObject_Hash(s);
    if (hash == -1) {
        PyErr_Clear();
        return;
    }
    __builtin_prefetch(&table[(size_t)hash & mask], 1);
}

/* Strong references kept in C memory (no Python code can reach them, as it could a list through
 * the collector): what keeps alive the objects a pass borrows from them. */
typedef struct {
    PyObject **items;
    size_t n, cap;
} bd_held;

/* Holds a new reference to obj: 0, or -1 with MemoryError. */
static int
bd_held_push(bd_held *h, PyObject *obj)
{
    if (h->n == h->cap) {
        size_t grown = h->cap ? 2 * h->cap : 64, bytes;
        if (__builtin_mul_overflow(grown, sizeof(PyObject *), &bytes)) {
            PyErr_NoMemory();
            return -1;
        }
        PyObject **larger = PyMem_Realloc(h->items, bytes);
        if (larger == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        h->items = larger;
        h->cap = grown;
    }
    h->items[h->n++] = Py_NewRef(obj);
    return 0;
}

static void
bd_held_clear(bd_held *h)
{
    for (size_t k = 0; k < h->n; k++) Py_DECREF(h->items[k]);
    PyMem_Free(h->items);
    h->items = NULL;
    h->n = h->cap = 0;
}

/* From this many fragment pairs on, attest_binding takes the fused pass (bd_fused_views; below
 * it the three steps run as before: a part that small stays in the CPU caches). */
#define BD_FUSED_MIN 16

/* A hint for bd_fused_views: the field objects of a logical / runtime fragment pair in their
 * C-owned layouts (each read, many of their reference counts written, when the pair is checked;
 * scattered at scale). Borrowed pointers, nothing kept or decided; never raises. */
static inline __attribute__((always_inline)) void
bd_pair_prefetch_fields(PyObject *logical, PyObject *runtime)
{
    if (runtime != NULL && bd_runtime_memo.memo.cls != NULL && (PyObject *)Py_TYPE(runtime) == bd_runtime_memo.memo.cls) {
        PyObject *const *f = (PyObject *const *)((mr_layout_object *)runtime)->fields;
        for (int k = 0; k < MR_RF_N; k++) {
            if (f[k] != NULL) mr_prefetch_head(f[k], 1);
        }
    }
    PyObject *const *pf = logical != NULL ? mr_pf_fields(logical) : NULL;
    for (int k = 0; pf != NULL && k < MR_PF_N; k++) {
        if (pf[k] != NULL) mr_prefetch_head(pf[k], 1);
    }
}

/* Hints for bd_fused_views once bd_tensors_find has built its table (the fragments of a part
 * do not follow its tensors' order): the table slot of the tensor id of pair i + 4 (that
 * placement fragment asked for 4 pairs ago), and the id and itemsize entries of the tensor of
 * pair i + 1 (its slot asked for 3 pairs ago). The tensor id is a slot of the placement
 * fragment's C-owned layout (else nothing is asked); the table is read as bd_tensors_find reads
 * it, nothing is kept or decided, nothing raises. */
static inline __attribute__((always_inline)) void
bd_pair_prefetch_tensor(const bd_tensors *ts, PyObject *logical, Py_ssize_t i, Py_ssize_t n)
{
    if (i + 4 < n) {
        PyObject *const *pf = mr_pf_fields(PyTuple_GetItem(logical, i + 4));
        if (pf != NULL && pf[MR_PF_TENSOR_ID] != NULL) {
            __builtin_prefetch(&ts->tab[bd_idtab_home(pf[MR_PF_TENSOR_ID], ts->mask)]);
        }
    }
    if (i + 1 < n) {
        PyObject *const *pf = mr_pf_fields(PyTuple_GetItem(logical, i + 1));
        if (pf != NULL && pf[MR_PF_TENSOR_ID] != NULL) {
            Py_ssize_t t = bd_idtab_get(ts->tab, ts->mask, pf[MR_PF_TENSOR_ID]);
            if (t >= 0 && t < ts->n) {
                __builtin_prefetch(&ts->ids[t]);
                __builtin_prefetch(&ts->itemsizes[t]);
            }
        }
    }
}

/* attest_many's carried table (bd_carrier), built in bd_fused_views' pair loop where each pair's
 * placement fragment and runtime fragment state are at hand, instead of from the attestation
 * afterwards (bd_attested_table: a second walk of the fragments, the placement dict's entries
 * and a probe or aligned read per fragment). Per checked pair: its worker, id and snapshot;
 * bd_pair_snaps_table then makes bd_group_snapshots_one's table of them (bd_one_worker_table).
 * Why it is that table (ATTEST11): in the attestation bd_attest_core then builds, the placement
 * dict is the loop's placement map, keyed by each pair's placement fragment id (exact
 * non-empty str, strictly increasing, so distinct, and equal to its runtime fragment's): the
 * lookup of evidence fragment i (the binding's fragment i) is its aligned entry, placement
 * fragment i, and every key is an exact str; the evidence fragments and generation are the
 * very objects read here (checked by identity after the attestation is built), and no code
 * runs from the pair reads to then (collector off; the reads are slots, see bd_pair_snap).
 * So each snapshot is bd_snapshot of the same arguments, the ids and workers the same objects,
 * in evidence order. Anything else (a second worker, a dict-state fragment, a slot empty, a
 * check failing) stops the build (on = 0) and attest_many builds the table as before. */
typedef struct {
    PyObject *snap_cls;      /* borrowed (the carrier holds it); NULL: no build */
    PyObject *generation;    /* owned: the binding's generation read before the pass */
    mr_layout_class lc;      /* snap_cls's layout (bd_snapshot_layout); the build needs one */
    PyObject **snaps, **fids; /* owned, count of each, in pair order */
    Py_ssize_t count, cap;
    PyObject *worker0;       /* owned: the first pair's worker */
    int on, increasing;
    PyObject *table;         /* owned: the table, once built (bd_pair_snaps_table) */
    /* per call (bd_pair_snaps_direct): rf_at[k] is snapshot field k's runtime layout slot
     * (bd_snapshot_rf_index), -1 for the placement fields and the generation; direct: every
     * runtime field has a slot in range, so bd_pair_snap copies the slots itself */
    Py_ssize_t rf_at[BD_NSNAP];
    int direct;
} bd_pair_snaps;

/* Per attest_many call: sb->rf_at and sb->direct (see bd_pair_snaps). */
static void
bd_pair_snaps_direct(const bd_table *tb, bd_pair_snaps *sb)
{
    sb->direct = 1;
    for (int k = 0; k < BD_NSNAP; k++) {
        int placement_side = k == N_PFID || k == N_TENSOR_ID || k == N_GLOBAL_OFFSET || k == N_LOCAL_SHAPE;
        sb->rf_at[k] = placement_side || k == N_LEASE_GENERATION ? -1 : bd_snapshot_rf_index(tb->nm, k);
        if (!placement_side && k != N_LEASE_GENERATION && (sb->rf_at[k] < 0 || sb->rf_at[k] >= MR_RF_N)) {
            sb->direct = 0;
        }
    }
}

/* bd_snapshot(tb, &sb->lc, sb->snap_cls, pf_cls, l, rdict, sb->generation, out) for a pair
 * bd_pair_snap has checked (sb->direct; pslots: l's four layout slots in from_placement order,
 * all filled; rdict: exactly the runtime layout class, not a dict), without bd_snapshot_values'
 * generic loop. Why the values are the same objects in the same places: with those inputs
 * bd_snapshot_values takes, for every field k < N_LEASE_GENERATION, the placement slot of k's
 * name when k is one of its four from_placement fields (in_slots, slot filled), else the runtime
 * slot rf[bd_snapshot_rf_index(nm, k)] (rf set: rdict is the layout, not a dict), BD_FALLBACK
 * when that slot is empty (as here), and the generation last; sb->rf_at holds those indices,
 * found by the same function. Then the same mr_layout_new (same values: the same collector
 * decision). BD_OK, BD_FALLBACK (a runtime slot empty: the build stops) or BD_ERROR. */
static int
bd_pair_snapshot(const bd_pair_snaps *sb, PyObject *const *pslots, PyObject *rdict, PyObject **out)
{
    PyObject *const *rf = (PyObject *const *)((mr_layout_object *)rdict)->fields;
    PyObject *values[BD_NSNAP]; /* borrowed: l, rdict and sb hold them; no code runs here */
    for (int k = 0; k < N_LEASE_GENERATION; k++) {
        Py_ssize_t at = sb->rf_at[k];
        values[k] = at < 0 ? NULL : rf[at];
        if (at >= 0 && values[k] == NULL) return BD_FALLBACK;
    }
    values[N_PFID] = pslots[0];
    values[N_TENSOR_ID] = pslots[1];
    values[N_GLOBAL_OFFSET] = pslots[2];
    values[N_LOCAL_SHAPE] = pslots[3];
    values[N_LEASE_GENERATION] = sb->generation;
    *out = mr_layout_new(&sb->lc, values, BD_NSNAP);
    return *out == NULL ? BD_ERROR : BD_OK;
}

static void
bd_pair_snaps_clear(bd_pair_snaps *sb)
{
    for (Py_ssize_t k = 0; k < sb->count; k++) {
        Py_DECREF(sb->snaps[k]);
        Py_DECREF(sb->fids[k]);
    }
    PyMem_Free(sb->snaps);
    PyMem_Free(sb->fids);
    sb->snaps = sb->fids = NULL;
    sb->count = sb->cap = 0;
    Py_CLEAR(sb->worker0);
    Py_CLEAR(sb->generation);
    Py_CLEAR(sb->table);
    sb->on = 0;
}

/* Room for n pairs (sb->on already decided by the caller): 0, -1 with an exception. */
static int
bd_pair_snaps_start(bd_pair_snaps *sb, Py_ssize_t n)
{
    sb->count = 0;
    sb->increasing = 1;
    sb->snaps = mr_alloc_array((size_t)n, sizeof(PyObject *));
    sb->fids = sb->snaps == NULL ? NULL : mr_alloc_array((size_t)n, sizeof(PyObject *));
    if (sb->fids == NULL) return -1;
    sb->cap = n;
    return 0;
}

/* One checked pair (l: an exact pf_cls placement fragment; rdict: its runtime fragment's state;
 * fid: that fragment's id, an exact non-empty str read from rdict): BD_OK (added, or the build
 * stopped: sb->on 0) or BD_ERROR. Only slot reads: the runtime state must be the fragment's
 * C-owned layout and the four placement fields bd_snapshot_values reads must be filled, so
 * bd_snapshot reads slots only (no getattr, no dict probe: no Python code runs while the pass
 * borrows). */
static int
bd_pair_snap(const bd_table *tb, bd_pair_snaps *sb, PyObject *pf_cls, PyObject *l, PyObject *rdict, PyObject *fid)
{
    static const int from_placement[] = {N_PFID, N_TENSOR_ID, N_GLOBAL_OFFSET, N_LOCAL_SHAPE};
    PyObject *slots[4] = {NULL, NULL, NULL, NULL};
    if (sb->count >= sb->cap || bd_runtime_memo.memo.cls == NULL || PyDict_Check(rdict)
        || (PyObject *)Py_TYPE(rdict) != bd_runtime_memo.memo.cls || (PyObject *)Py_TYPE(l) != pf_cls
        || !bd_pf_slots(l, from_placement, 4, slots)
        || slots[0] == NULL || slots[1] == NULL || slots[2] == NULL || slots[3] == NULL) {
        sb->on = 0;
        return BD_OK;
    }
    PyObject *worker = NULL, *snapshot = NULL;
    int status = bd_rget_str(tb->nm, rdict, N_WORKER_ID, &worker);
    if (status == BD_OK && sb->worker0 != NULL && worker != sb->worker0) {
        int same = bd_same_str(worker, sb->worker0);
        if (same <= 0) status = same < 0 ? BD_ERROR : BD_FALLBACK; /* a second worker */
    }
    if (status == BD_OK && sb->increasing && sb->count > 0) {
        int cmp = bd_compare(sb->fids[sb->count - 1], fid);
        if (cmp == -2) status = BD_ERROR;
        else if (cmp >= 0) sb->increasing = 0;
    }
    if (status == BD_OK && sb->direct) status = bd_pair_snapshot(sb, slots, rdict, &snapshot);
    else if (status == BD_OK) status = bd_snapshot(tb, &sb->lc, sb->snap_cls, pf_cls, l, rdict, sb->generation, &snapshot);
    if (status == BD_OK) {
        if (sb->worker0 == NULL) sb->worker0 = Py_NewRef(worker);
        sb->fids[sb->count] = Py_NewRef(fid);
        sb->snaps[sb->count] = snapshot;
        sb->count++;
    }
    Py_XDECREF(worker);
    if (status == BD_FALLBACK) {
        sb->on = 0;
        status = BD_OK;
    }
    return status;
}

/* After bd_attest_core built `attestation` from the pass of `runtime` (n pairs) whose placement
 * map is placement_map: sb->table = the table bd_attested_table would build from it now, when
 * the build ran to the end and the attestation holds the very placement map, evidence
 * fragments and generation the pairs were read with (else sb->table stays NULL: the caller
 * builds it from the attestation). 0, -1 with an exception. */
static int
bd_pair_snaps_table(const bd_table *tb, bd_pair_snaps *sb, PyObject *const *classes, PyObject *attestation,
                    PyObject *runtime, PyObject *placement_map)
{
    if (!sb->on || sb->count < 1 || sb->count != PyTuple_Size(runtime)
        || PyDict_Size(placement_map) != sb->count) {
        return 0;
    }
    PyObject *inputs[4]; /* evidence, placement dict, evidence fragments, generation */
    int status = bd_attested_inputs(tb, classes[0], classes[1], attestation, inputs);
    if (status == BD_ERROR) return -1;
    if (status == BD_OK && inputs[1] == placement_map && inputs[2] == runtime && inputs[3] == sb->generation) {
        status = bd_one_worker_table(sb->snaps, sb->fids, sb->count, sb->worker0, sb->increasing, &sb->table);
    }
    for (int k = 0; k < 4; k++) Py_XDECREF(inputs[k]);
    return status == BD_ERROR ? -1 : 0;
}

/* attest_binding's bind_views, address_ranges_clear and bd_attest_core's two maps in one pass
 * over the fragment pairs: each runtime fragment's dict read once, no view tuple or list built.
 * BD_OK with maps[0] (the binding map) and maps[1] (the placement map), new dicts, or
 * BD_FALLBACK / BD_ERROR. Exactly the checks of the three steps, on the same values:
 * - the pairs: bd_views_core's (bd_check_pair on each pair, in order);
 * - the ranges: bd_ranges_core's on the views those pairs make (an exact str instance_id, the
 *   runtime fragment's fields read by bd_range_fill from the very dict bd_view_range reads, then
 *   the same kernel; n >= BD_FUSED_MIN, so there are at least two views, when it runs);
 * - bd_binding_map's over the binding's fragments (this runtime tuple: exact rf_cls fragments,
 *   strictly increasing exact str placement fragment ids, checked by bd_check_pair; distinct
 *   exact str fragment ids; owner None), keyed by the very id objects it reads;
 * - bd_placement_map's over part_fragments (this logical tuple): key the placement fragment's
 *   id, read from the exact pf_cls instance's dict (what its getattr reads: the class defines
 *   no descriptor of that name), an exact non-empty str as bd_get_str requires.
 * Every check that fails declines (BD_FALLBACK) and the whole call returns None, whichever
 * failed first, as the steps run in order do; BD_ERROR only for a memory error.
 * sb (NULL: none): each checked pair's snapshot is collected there too (bd_pair_snap; it decides
 * nothing of the pass). */
static int
bd_fused_views(const bd_table *tb, PyObject *instance_id, PyObject *logical, PyObject *runtime, PyObject *tensors,
               PyObject *const *classes, PyObject **maps, bd_tensor_memo *memo, bd_pair_snaps *sb)
{
    PyObject *const *nm = tb->nm;
    PyObject *pf_cls = classes[0], *rf_cls = classes[1], *td_cls = classes[2];
    maps[0] = maps[1] = NULL;
    if (!PyTuple_CheckExact(logical) || !PyTuple_CheckExact(runtime) || !PyTuple_CheckExact(tensors)) {
        return BD_FALLBACK;
    }
    Py_ssize_t n = PyTuple_Size(logical);
    if (n < 0) return BD_ERROR;
    if (PyTuple_Size(runtime) != n || !PyUnicode_CheckExact(instance_id)) return BD_FALLBACK;
    bd_tensors ts;
    bd_range *ranges = NULL;
    PyObject *previous = NULL, *spaces = NULL, *binding_map = NULL, *placement_map = NULL;
    bd_last_space last = {NULL, NULL, NULL, 0};
    /* The runtime fragment ids seen, by value (bd_strtab_add decides as a set of exact str:
     * hash, then identity or equality). Borrowed: each is held by its fragment, held by runtime
     * (held by the caller); with the collector off no gc callback or finalizer runs in the pass,
     * so no code can replace a fragment's id while the table points at it. */
    bd_strslot *seen = NULL;
    size_t seen_mask = 0;
    const int collector_was_enabled = PyGC_Disable();
    int status = bd_tensors_load(tb, tensors, td_cls, n, &ts, memo);
    if (status != BD_OK) goto done;
    /* The loop reads no attribute by getattr (which could run Python code while the id table
     * borrows): a tensor whose itemsize the load could not read declines here, where a pair
     * needing it would read it again (and decline or fail; the rule path decides either way). */
    for (Py_ssize_t k = 0; k < ts.n; k++) {
        if (ts.itemsizes[k] == NULL) {
            status = BD_FALLBACK;
            goto done;
        }
    }
    status = BD_ERROR;
    ranges = mr_alloc_array((size_t)n, sizeof(bd_range));
    if (ranges == NULL) goto done;
    spaces = PyDict_New();
    seen = bd_strtab_new(n, &seen_mask);
    binding_map = PyDict_New();
    placement_map = PyDict_New();
    if (spaces == NULL || seen == NULL || binding_map == NULL || placement_map == NULL) goto done;
    if (sb != NULL && sb->on && bd_pair_snaps_start(sb, n) < 0) goto done;
    /* Whether both maps may leave the collector (mr_gc_untrack_atomic_dict's rule: exact str
     * keys, every value an untracked object that is not a tuple), decided from the headers the
     * pass reads anyway (each fragment's own, asked for eight pairs ahead): the untrack walk
     * after the pass would read every key and value again, scattered at 10^6. */
    int atomic = 1;
    status = BD_OK;
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *l = PyTuple_GetItem(logical, i);
        PyObject *r = PyTuple_GetItem(runtime, i);
        if (l == NULL || r == NULL) {
            status = BD_ERROR;
            break;
        }
        if (i + 8 < n) { /* hints: the pair eight on (all of the runtime fragment's fields; the
                           * placement fragment's eight fields span two or three lines) */
            PyObject *ahead = PyTuple_GetItem(logical, i + 8);
            bd_prefetch_object(ahead);
            __builtin_prefetch((const void *)((uintptr_t)ahead + 64));
            __builtin_prefetch((const void *)((uintptr_t)ahead + 79));
            bd_prefetch_whole(PyTuple_GetItem(runtime, i + 8));
        }
        if (i + 4 < n) { /* and the field objects of the pair four on (asked for a round earlier) */
            bd_pair_prefetch_fields(PyTuple_GetItem(logical, i + 4), PyTuple_GetItem(runtime, i + 4));
        }
        if (i + 2 < n) { /* and the id table's slot for the fragment id two on (its str asked for) */
            PyObject *ahead = PyTuple_GetItem(runtime, i + 2);
            if (ahead != NULL && bd_runtime_memo.memo.cls != NULL
                && (PyObject *)Py_TYPE(ahead) == bd_runtime_memo.memo.cls) {
                PyObject *const *f = (PyObject *const *)((mr_layout_object *)ahead)->fields;
                bd_strtab_prefetch(seen, seen_mask, f[MR_RF_FRAGMENT_ID]);
            }
        }
        if (ts.tab != NULL) bd_pair_prefetch_tensor(&ts, logical, i, n);
        if ((PyObject *)Py_TYPE(l) != pf_cls || (PyObject *)Py_TYPE(r) != rf_cls) {
            status = BD_FALLBACK;
            break;
        }
        PyObject *pfid = NULL, *fid = NULL, *owner = NULL;
        bd_pair_kept kept = {NULL, NULL};
        status = bd_check_pair(nm, l, r, &ts, previous, &pfid, instance_id, NULL, &kept);
        if (status != BD_OK) break;
        BD_SETREF(previous, pfid); /* previous holds pfid */
        status = bd_range_fill(nm, instance_id, kept.rdict, spaces, &ranges[i], &last);
        if (status == BD_OK) status = bd_rget_str(nm, kept.rdict, N_FID, &fid);
        if (status == BD_OK) {
            int added = bd_strtab_add(seen, seen_mask, fid); /* (fid held by its fragment) */
            if (added <= 0) status = added < 0 ? BD_ERROR : BD_FALLBACK;
        }
        if (status == BD_OK) status = bd_rget(nm, kept.rdict, N_OWNER, &owner);
        if (status == BD_OK && owner != Py_None) status = BD_FALLBACK;
        if (status == BD_OK
            && (PyDict_SetItem(binding_map, pfid, r) < 0 || PyDict_SetItem(placement_map, kept.lpfid, l) < 0)) {
            status = BD_ERROR;
        }
        /* (keys: pfid and kept.lpfid are exact str, checked by bd_check_pair; values: l and r
         * are exact instances of the layout classes, GC types that are not tuples) */
        if (atomic && (PyObject_GC_IsTracked(l) || PyObject_GC_IsTracked(r))) atomic = 0;
        if (status == BD_OK && sb != NULL && sb->on) status = bd_pair_snap(tb, sb, pf_cls, l, kept.rdict, fid);
        Py_XDECREF(fid);
        Py_XDECREF(owner);
        Py_XDECREF(kept.rdict);
        Py_XDECREF(kept.lpfid);
    }
    /* The kernel only sees the C array. */
    if (status == BD_OK && !bd_ranges_clear(ranges, (size_t)n)) status = BD_FALLBACK;
    if (status == BD_OK) {
        if (atomic) { /* (insertdict tracks a dict again when a tracked value is added later) */
            mr_gc_hide(binding_map);
            mr_gc_hide(placement_map);
        }
        maps[0] = binding_map;
        maps[1] = placement_map;
        binding_map = placement_map = NULL;
    }
done:
    bd_tensors_free(&ts);
    PyMem_Free(ranges);
    Py_XDECREF(previous);
    Py_XDECREF(spaces);
    PyMem_Free(seen);
    Py_XDECREF(binding_map);
    Py_XDECREF(placement_map);
    if (collector_was_enabled) PyGC_Enable();
    return status;
}

PyDoc_STRVAR(attest_binding_doc,
"attest_binding(attestation_cls, evidence_cls, runtime_fragment_cls, placement_fragment_cls,\n"
"               tensor_cls, placement, binding, part_fragments, part_tensors, resource_id,\n"
"               placement_id, placement_digest, revision)\n"
"--\n\n"
"validate_runtime_binding(placement, binding) then attest, in one call, for an exact\n"
"WeightRuntimeBindingManifest binding of the placement part (part_fragments, part_tensors):\n"
"the binding's resource_id, placement_id, placement_digest and revision equal the given\n"
"placement values (exact str), bind_views decides the fragments, address_ranges_clear their\n"
"views, and attest builds the attestation. None when any of them is not decided here.");

/* attest_binding with memo (NULL: none): the tensors an earlier binding of the same C call
 * loaded (bd_tensor_memo; attest_many shares one over its bindings); sb (NULL: none; else
 * sb->on set and sb->snap_cls / sb->lc filled by attest_many, for an exact binding_cls
 * binding): the attestation's carried table, built in the fused pass when it can be
 * (bd_pair_snaps; sb->table, else NULL). */
static PyObject *
bd_attest_binding_with(PyObject *self, PyObject *const *args, Py_ssize_t nargs, bd_tensor_memo *memo,
                       bd_pair_snaps *sb, int restore)
{
    bd_table tb;
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, restore ? "attest_restored expects 13 arguments"
                                                 : "attest_binding expects 13 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args, 5) < 0) return NULL;
    PyObject *const *nm = tb.nm;
    PyObject *placement = args[5], *binding = args[6];
    /* binding field -> the placement value it must equal */
    static const int identity[4] = {N_RESOURCE_ID, N_PLACEMENT_ID, N_PLACEMENT_DIGEST, N_REVISION};
    PyObject *instance_id = NULL, *fragments = NULL, *views = NULL, *result = NULL;
    /* attest_restored: binding is stored as the evidence when it is an exact evidence (else the
     * copy is built, as attest_binding does), and its fields are read from its instance dict
     * when that is plain (bd_fget: what getattr reads; NULL: getattr) */
    PyObject *evidence_as_is = restore && Py_TYPE(binding) == (PyTypeObject *)args[1] ? binding : NULL;
    PyObject *state = NULL;
    if (evidence_as_is != NULL && bd_dict_of(binding, &state) == BD_ERROR) return NULL;
    int status = BD_OK;
    for (int k = 0; k < 4 && status == BD_OK; k++) {
        PyObject *value = NULL;
        status = bd_fget(binding, state, nm[identity[k]], &value);
        if (status != BD_OK) break;
        int same = bd_same_str(value, args[9 + k]);
        Py_DECREF(value);
        if (same <= 0) status = same < 0 ? BD_ERROR : BD_FALLBACK;
    }
    if (status == BD_OK) status = bd_fget(binding, state, nm[N_INSTANCE_ID], &instance_id);
    if (status == BD_OK) status = bd_fget(binding, state, nm[N_FRAGMENTS], &fragments);
    /* (placement fragment, runtime fragment, tensor) classes */
    PyObject *const view_classes[3] = {args[3], args[2], args[4]};
    Py_ssize_t pairs = status == BD_OK && PyTuple_CheckExact(args[7]) ? PyTuple_Size(args[7]) : 0;
    if (pairs >= BD_FUSED_MIN) {
        /* the three steps below in one pass (the same checks: see bd_fused_views) */
        PyObject *maps[2] = {NULL, NULL};
        /* with sb: the collector off from the pair reads to the table (no code runs in between) */
        const int collector_was_enabled = sb != NULL && sb->on ? PyGC_Disable() : 0;
        if (status == BD_OK && sb != NULL && sb->on) {
            /* (read again by bd_attest_core, which decides: a failed read only stops the build) */
            if (bd_get(binding, nm[N_GENERATION], &sb->generation) != BD_OK) {
                PyErr_Clear();
                sb->on = 0;
            }
        }
        if (status == BD_OK) status = bd_fused_views(&tb, instance_id, args[7], fragments, args[8], view_classes, maps, memo, sb);
        if (status == BD_OK) status = bd_attest_core(&tb, args, placement, binding, args[7], maps, evidence_as_is, state, &result);
        if (status == BD_OK && sb != NULL && bd_pair_snaps_table(&tb, sb, args, result, fragments, maps[1]) < 0) {
            status = BD_ERROR;
        }
        if (collector_was_enabled) PyGC_Enable();
        Py_XDECREF(maps[0]);
        Py_XDECREF(maps[1]);
    } else {
        if (status == BD_OK) status = bd_views_core(&tb, instance_id, args[7], fragments, args[8], view_classes, &views);
        if (status == BD_OK && PyList_Size(views) > 1) status = bd_ranges_core(&tb, views, args[2]);
        if (status == BD_OK) status = bd_attest_core(&tb, args, placement, binding, args[7], NULL, evidence_as_is, state, &result);
    }
    Py_XDECREF(state);
    Py_XDECREF(instance_id);
    Py_XDECREF(fragments);
    Py_XDECREF(views);
    if (status == BD_OK) return result;
    if (status == BD_ERROR) return NULL;
    Py_RETURN_NONE;
}

static PyObject *
bd_attest_binding(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return bd_attest_binding_with(self, args, nargs, NULL, NULL, 0);
}

PyDoc_STRVAR(attest_restored_doc,
"attest_restored(attestation_cls, evidence_cls, runtime_fragment_cls, placement_fragment_cls,\n"
"                tensor_cls, placement, evidence, part_fragments, part_tensors, resource_id,\n"
"                placement_id, placement_digest, revision)\n"
"--\n\n"
"attest_binding for a restore, whose binding is the unpickled evidence: the same checks and\n"
"the same attestation, except that an exact evidence_cls evidence is stored in it as is (the\n"
"object the restore would store over the copy attest_binding builds). None when not decided.");

static PyObject *
bd_attest_restored(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return bd_attest_binding_with(self, args, nargs, NULL, NULL, 1);
}


/* ------------------------------------------------------------------------------------------
 * attested_rows */

PyDoc_STRVAR(attested_rows_doc,
"attested_rows(attestation_cls, evidence_cls, runtime_fragment_cls, attestation)\n"
"--\n\n"
"(expected_by_pfid, rows_by_worker, ids_by_worker, complete) as bound_contracts._AttestedView\n"
"derives them from the attestation: for each evidence fragment whose placement fragment id is\n"
"in attestation._placement_dict, its expected snapshot field dict (a new dict per call, the\n"
"16 RuntimeFragmentSnapshot fields in order, lease_generation = evidence.generation);\n"
"rows_by_worker[worker] the (runtime fragment id, expected) pairs sorted by runtime fragment\n"
"id (stable), ids_by_worker[worker] their ids; complete is False when some evidence fragment\n"
"has no placement entry. None when not decided here (inexact classes or ids).");

static PyObject *
bd_attested_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "attested_rows expects 4 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args, 3) < 0) return NULL;
    PyObject *const *nm = tb.nm;
    PyObject *att_cls = args[0], *ev_cls = args[1], *rf_cls = args[2], *attestation = args[3];
    PyObject *evidence = NULL, *placement_dict = NULL, *fragments = NULL, *generation = NULL;
    PyObject *expected_by_pfid = NULL, *groups = NULL, *rows_by_worker = NULL, *ids_by_worker = NULL;
    PyObject *result = NULL;
    int complete = 1;
    int status = BD_FALLBACK;
    if ((PyObject *)Py_TYPE(attestation) != att_cls) goto done;
    /* (each object's dict walked once: the second read of an object follows the first with no
     * code run between, a generic read of the exact class's field from a plain dict running
     * none, as bd_plain_get's readers take; the dict is the one just found plain) */
    status = bd_plain_get(attestation, nm[N_EVIDENCE], &evidence);
    if (status == BD_OK) status = bd_get(attestation, nm[N_PLACEMENT_DICT], &placement_dict);
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    /* placement_dict is probed with each evidence fragment's id: a plain dict only (plain_dict.h) */
    if ((PyObject *)Py_TYPE(evidence) != ev_cls || !pd_plain_keys(placement_dict)) goto done;
    status = bd_plain_get(evidence, nm[N_FRAGMENTS], &fragments);
    if (status == BD_OK) status = bd_get(evidence, nm[N_GENERATION], &generation);
    if (status != BD_OK) goto done;
    status = BD_FALLBACK;
    if (!PyTuple_CheckExact(fragments)) goto done;
    status = BD_ERROR;
    expected_by_pfid = PyDict_New();
    groups = PyDict_New();
    rows_by_worker = PyDict_New();
    ids_by_worker = PyDict_New();
    if (expected_by_pfid == NULL || groups == NULL || rows_by_worker == NULL || ids_by_worker == NULL) goto done;
    Py_ssize_t n = PyTuple_Size(fragments);
    if (n < 0) goto done;
    status = BD_OK;
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *runtime = PyTuple_GetItem(fragments, i);
        PyObject *rdict = NULL, *pfid = NULL, *worker = NULL, *fid = NULL, *expected = NULL;
        if (runtime == NULL) {
            status = BD_ERROR;
            break;
        }
        if ((PyObject *)Py_TYPE(runtime) != rf_cls) {
            status = BD_FALLBACK;
            break;
        }
        status = bd_runtime_state(runtime, &rdict);
        if (status == BD_OK) status = bd_rget_str(nm, rdict, N_PFID, &pfid);
        PyObject *placement_fragment = NULL; /* borrowed */
        if (status == BD_OK) {
            placement_fragment = PyDict_GetItemWithError(placement_dict, pfid);
            if (placement_fragment == NULL && PyErr_Occurred()) status = BD_ERROR;
        }
        if (status == BD_OK && placement_fragment == NULL) {
            complete = 0;
        } else if (status == BD_OK) {
            Py_INCREF(placement_fragment);
            status = bd_rget_str(nm, rdict, N_WORKER_ID, &worker);
            if (status == BD_OK) status = bd_rget_str(nm, rdict, N_FID, &fid);
            if (status == BD_OK) status = bd_snapshot_dict(&tb, placement_fragment, rdict, generation, &expected);
            Py_DECREF(placement_fragment);
            if (status == BD_OK) {
                status = BD_ERROR;
                PyObject *position = PyLong_FromSsize_t(i);
                PyObject *entry = position == NULL ? NULL : PyTuple_Pack(3, fid, position, expected);
                Py_XDECREF(position);
                if (entry != NULL && PyDict_SetItem(expected_by_pfid, pfid, expected) == 0) {
                    PyObject *bucket = PyDict_GetItemWithError(groups, worker); /* borrowed */
                    if (bucket != NULL) {
                        if (PyList_Append(bucket, entry) == 0) status = BD_OK;
                    } else if (!PyErr_Occurred()) {
                        bucket = PyList_New(0);
                        if (bucket != NULL) {
                            if (PyList_Append(bucket, entry) == 0 && PyDict_SetItem(groups, worker, bucket) == 0) {
                                status = BD_OK;
                            }
                            Py_DECREF(bucket);
                        }
                    }
                }
                Py_XDECREF(entry);
            }
        }
        Py_XDECREF(rdict);
        Py_XDECREF(pfid);
        Py_XDECREF(worker);
        Py_XDECREF(fid);
        Py_XDECREF(expected);
    }
    if (status != BD_OK) goto done;
    status = BD_ERROR;
    Py_ssize_t pos = 0;
    PyObject *worker, *entries;
    while (PyDict_Next(groups, &pos, &worker, &entries)) {
        if (PyList_Sort(entries) < 0) goto done;
        Py_ssize_t count = PyList_Size(entries);
        if (count < 0) goto done;
        /* both out of the collector until full (the pairs' allocations may collect: gctrack.h) */
        PyObject *rows = mr_gc_hide(PyTuple_New(count));
        PyObject *ids = rows == NULL ? NULL : mr_gc_hide(PyTuple_New(count));
        if (ids == NULL) {
            Py_XDECREF(rows);
            goto done;
        }
        int ok = 1;
        for (Py_ssize_t k = 0; k < count && ok; k++) {
            PyObject *entry = PyList_GetItem(entries, k);
            PyObject *fid = entry == NULL ? NULL : PyTuple_GetItem(entry, 0);
            PyObject *expected = entry == NULL ? NULL : PyTuple_GetItem(entry, 2);
            PyObject *pair = (fid == NULL || expected == NULL) ? NULL : PyTuple_Pack(2, fid, expected);
            if (pair == NULL || PyTuple_SetItem(rows, k, pair) < 0) {
                ok = 0;
                break;
            }
            Py_INCREF(fid);
            if (PyTuple_SetItem(ids, k, fid) < 0) ok = 0;
        }
        if (ok) {
            mr_gc_show(rows);
            mr_gc_show(ids);
        }
        if (ok && (PyDict_SetItem(rows_by_worker, worker, rows) < 0 || PyDict_SetItem(ids_by_worker, worker, ids) < 0)) {
            ok = 0;
        }
        Py_DECREF(rows);
        Py_DECREF(ids);
        if (!ok) goto done;
    }
    result = Py_BuildValue("(OOOO)", expected_by_pfid, rows_by_worker, ids_by_worker, complete ? Py_True : Py_False);
    status = result == NULL ? BD_ERROR : BD_OK;
done:
    Py_XDECREF(evidence);
    Py_XDECREF(placement_dict);
    Py_XDECREF(fragments);
    Py_XDECREF(generation);
    Py_XDECREF(expected_by_pfid);
    Py_XDECREF(groups);
    Py_XDECREF(rows_by_worker);
    Py_XDECREF(ids_by_worker);
    if (status == BD_OK) return result;
    Py_XDECREF(result);
    if (status == BD_ERROR) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------
 * logical_target_cover: the accept path of validation.validate_logical_target_coverage */

/* Boxes per target fragment decided here (pairwise, as the Python exact cover does exactly
 * for so few boxes); more decline. */
#define BD_COVER_MAX_BOXES 64

/* Fields of a fragment and of an operation read by one scan of its instance dict (bd_scan_fields). */
enum { CF_PFID, CF_GOFF, CF_LSHAPE, CF_RANK, CF_STAGE, CF_COUNT };
enum { CO_TARGET, CO_SOURCE, CO_OFFSET, CO_SHAPE, CO_COUNT };

typedef struct {
    PyObject *fragment; /* borrowed: the part's fragments tuple (held in parts_fragments) holds it */
    Py_ssize_t part;
    Py_ssize_t count;   /* operations targeting it */
    Py_ssize_t start;   /* first of them in the CSR order */
    int plain;          /* with the fused route check: its route half is plain (BD_OK) */
    PyObject *pfid;     /* its placement fragment id (borrowed from its dict: v[CF_PFID]) */
    PyObject *v[CF_COUNT]; /* its fields read by bd_scan_fields (borrowed; NULL: read as before) */
} bd_cover_frag;

/* Fields of an exact library-class instance from one scan of its instance dict: out[k] the
 * value under the key identical to the interned nm[names[k]] (a key identical to the name is the
 * entry a lookup of it finds: dict keys are distinct), else looked up (an equal key that is not
 * the interned name), else NULL (missing). Every out[k] is NULL when the object has no exact
 * dict or its dict holds a key that is not an exact str (then no lookup runs: with exact str
 * keys only, none runs Python code). Borrowed values: the dict holds them, and no Python code
 * runs in the callers. A NULL field is read by the caller's original read (getattr), which
 * decides exactly as before; a non-NULL one is what that read returns (the classes define no
 * data descriptor for these fields). 0, or -1 with an exception. */
static int
bd_scan_fields(PyObject *const *nm, PyObject *obj, const int *names, int count, PyObject **out)
{
    for (int k = 0; k < count; k++) out[k] = NULL;
    if (bd_pf_slots(obj, names, count, out)) return 0; /* a placement fragment's layout slots */
    PyObject *dict = NULL;
    int status = bd_dict_of(obj, &dict);
    if (status != BD_OK) return status == BD_ERROR ? -1 : 0;
    Py_DECREF(dict); /* the object holds its dict */
    Py_ssize_t pos = 0;
    PyObject *key = NULL, *value = NULL;
    int met = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            for (int k = 0; k < count; k++) out[k] = NULL;
            return 0;
        }
        for (int k = 0; k < count; k++) {
            if (key == nm[names[k]]) {
                out[k] = value;
                met++;
                break;
            }
        }
    }
    for (int k = 0; k < count && met < count; k++) {
        if (out[k] != NULL) continue;
        out[k] = PyDict_GetItemWithError(dict, nm[names[k]]);
        if (out[k] == NULL && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* obj.name (*out, new reference) from a scanned field when read (non-NULL), else by bd_get. */
static int
bd_get_scanned(PyObject *obj, PyObject *name, PyObject *scanned, PyObject **out)
{
    if (scanned != NULL) {
        *out = Py_NewRef(scanned);
        return BD_OK;
    }
    return bd_get(obj, name, out);
}

/* Forward: logical_routes_plain's check of one route half (defined with it below). */
static int bd_route_half_plain(PyObject *const *nm, PyObject *fragment, PyObject *fragment_cls, PyObject *rank_cls);
/* bd_route_half_scanned's memo of the rank it last checked (rank NULL: none), valid while no
 * Python code runs (its caller clears it where a read could run some). */
typedef struct {
    PyObject *rank; /* borrowed: the fragment read holds it (address only) */
    int status;     /* its verdict (BD_OK or BD_FALLBACK) */
} bd_rank_memo;
static int bd_route_half_scanned(PyObject *const *nm, PyObject *fragment, PyObject *fragment_cls, PyObject *const *v,
                                 PyObject *rank_cls, bd_rank_memo *memo);

/* Kernel: boxes (n of rank r: offsets bo, shapes bs, row-major) exactly cover the container
 * (co, cs) with every coordinate >= 0, every extent >= 1, ends and volumes representable:
 * every box inside, u64 volumes summing to the container's, pairwise disjoint. 1 yes, 0 not
 * decided here. Python-free. */
static int
bd_cover_kernel(size_t r, const int64_t *co, const int64_t *cs, size_t n, const int64_t *bo, const int64_t *bs)
{
    uint64_t cvol = 1, sum = 0;
    for (size_t d = 0; d < r; d++) {
        if (mr_mul_u64(cvol, (uint64_t)cs[d], &cvol) < 0) return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t vol = 1;
        for (size_t d = 0; d < r; d++) {
            int64_t b = bo[i * r + d], e = b + bs[i * r + d]; /* checked by the caller */
            if (b < co[d] || e > co[d] + cs[d]) return 0;
            if (mr_mul_u64(vol, (uint64_t)bs[i * r + d], &vol) < 0) return 0;
        }
        if (mr_add_u64(sum, vol, &sum) < 0) return 0;
    }
    if (sum != cvol) return 0;
    for (size_t i = 1; i < n; i++) {
        for (size_t j = 0; j < i; j++) {
            int meet = 1;
            for (size_t d = 0; d < r && meet; d++) {
                int64_t bi = bo[i * r + d], ei = bi + bs[i * r + d];
                int64_t bj = bo[j * r + d], ej = bj + bs[j * r + d];
                meet = bi < ej && bj < ei;
            }
            if (meet) return 0;
        }
    }
    return 1;
}

/* value (an exact tuple of exact ints) of rank r (r == -1: any rank >= 1, stored in *r) into
 * out[0..r) (grown scratch: *out of *cap elements, offset at): each >= minimum, and
 * value + extent representable later. BD_OK, BD_FALLBACK, BD_ERROR. */
static int
bd_cover_coords(PyObject *value, Py_ssize_t *r, int64_t minimum, int64_t **out, size_t *cap, size_t at)
{
    if (!PyTuple_CheckExact(value)) return BD_FALLBACK;
    Py_ssize_t n = PyTuple_Size(value);
    if (n < 0) return BD_ERROR;
    if (*r < 0) {
        if (n < 1) return BD_FALLBACK;
        *r = n;
    }
    if (n != *r) return BD_FALLBACK;
    size_t need;
    if (__builtin_add_overflow(at, (size_t)n, &need)) return BD_FALLBACK;
    if (need > *cap) {
        size_t grown = *cap ? *cap : 64;
        while (grown < need) {
            if (__builtin_mul_overflow(grown, (size_t)2, &grown)) return BD_FALLBACK;
        }
        size_t bytes;
        if (__builtin_mul_overflow(grown, sizeof(int64_t), &bytes)) return BD_FALLBACK;
        int64_t *larger = PyMem_Realloc(*out, bytes);
        if (larger == NULL) {
            PyErr_NoMemory();
            return BD_ERROR;
        }
        *out = larger;
        *cap = grown;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyTuple_GetItem(value, k);
        if (item == NULL) return BD_ERROR;
        int64_t v = 0;
        int rc = bd_as_i64(item, &v);
        if (rc <= 0) return rc < 0 ? BD_ERROR : BD_FALLBACK;
        if (v < minimum) return BD_FALLBACK;
        (*out)[at + (size_t)k] = v;
    }
    return BD_OK;
}

/* Offsets at[0..r) and extents at[r..2r) of scratch: every end representable in int64. */
static int
bd_cover_ends_fit(const int64_t *offsets, const int64_t *extents, Py_ssize_t r)
{
    for (Py_ssize_t d = 0; d < r; d++) {
        int64_t end;
        if (__builtin_add_overflow(offsets[d], extents[d], &end)) return 0;
    }
    return 1;
}

/* Equal exact ParallelRank-like values: identity, or both exact rank_cls with equal exact int
 * fields dp, tp, pp, ep. BD_OK, BD_FALLBACK, BD_ERROR. */
static int
bd_same_rank(PyObject *const *nm, PyObject *a, PyObject *b, PyObject *rank_cls)
{
    if (a == b) return BD_OK;
    if ((PyObject *)Py_TYPE(a) != rank_cls || (PyObject *)Py_TYPE(b) != rank_cls) return BD_FALLBACK;
    static const int fields[4] = {N_DP, N_TP, N_PP, N_EP};
    for (int k = 0; k < 4; k++) {
        PyObject *x = NULL, *y = NULL;
        int rc = bd_get(a, nm[fields[k]], &x);
        if (rc != BD_OK) return rc;
        rc = bd_get(b, nm[fields[k]], &y);
        if (rc != BD_OK) {
            Py_DECREF(x);
            return rc;
        }
        int same = bd_int_equal(x, y);
        Py_DECREF(x);
        Py_DECREF(y);
        if (same <= 0) return same < 0 ? BD_ERROR : BD_FALLBACK;
    }
    return BD_OK;
}

/* *out = the int stored in dict[key] (a dict of str -> int built here), or -1 when missing. */
static int
bd_index_of(PyObject *dict, PyObject *key, Py_ssize_t *out)
{
    PyObject *value = PyDict_GetItemWithError(dict, key); /* borrowed */
    if (value == NULL) {
        if (PyErr_Occurred()) return BD_ERROR;
        *out = -1;
        return BD_OK;
    }
    *out = PyLong_AsSsize_t(value);
    return *out == -1 && PyErr_Occurred() ? BD_ERROR : BD_OK;
}

static int
bd_index_put(PyObject *dict, PyObject *key, Py_ssize_t index)
{
    PyObject *value = PyLong_FromSsize_t(index);
    if (value == NULL) return BD_ERROR;
    int rc = PyDict_SetItem(dict, key, value);
    Py_DECREF(value);
    return rc < 0 ? BD_ERROR : BD_OK;
}

/* The index {f.placement_fragment_id: f for f in fragments} into the empty dict index, as the
 * comprehension builds it for exact fragment_cls fragments with exact str ids (no user code; the
 * last one wins): BD_OK, BD_FALLBACK (another class or id), BD_ERROR. */
static int
bd_source_index(PyObject *const *nm, PyObject *fragments, PyObject *fragment_cls, PyObject *index)
{
    Py_ssize_t n = PyTuple_Size(fragments);
    if (n < 0) return BD_ERROR;
    int status = BD_OK;
    for (Py_ssize_t k = 0; k < n && status == BD_OK; k++) {
        PyObject *item = PyTuple_GetItem(fragments, k), *pfid = NULL;
        if (item == NULL) return BD_ERROR;
        if (k + 4 < n) bd_prefetch_object(PyTuple_GetItem(fragments, k + 4)); /* a hint */
        if ((PyObject *)Py_TYPE(item) != fragment_cls) return BD_FALLBACK;
        status = bd_get_str(item, nm[N_PFID], &pfid);
        if (status == BD_OK && PyDict_SetItem(index, pfid, item) < 0) status = BD_ERROR;
        Py_XDECREF(pfid);
    }
    return status;
}

/* bd_source_index's reads without the dict: *snap BD_FALLBACK where it declines (another class,
 * an id that is not an exact non-empty str: the same reads in the same order, through the
 * C-owned layout's slot when the fragment has one, what getattr returns), else unchanged, and
 * *sorted 1 when the ids are strictly increasing (then distinct: the dict would hold every
 * fragment as its own entry). BD_OK, or BD_ERROR. */
static int
bd_source_ids_sorted(PyObject *const *nm, PyObject *fragments, PyObject *fragment_cls, int *snap, int *sorted)
{
    Py_ssize_t n = PyTuple_Size(fragments);
    if (n < 0) return BD_ERROR;
    PyObject *previous = NULL;
    int status = BD_OK;
    for (Py_ssize_t k = 0; k < n && *snap == BD_OK; k++) {
        PyObject *item = PyTuple_GetItem(fragments, k), *pfid = NULL;
        if (item == NULL) { status = BD_ERROR; break; }
        /* hints: the fragment eight on, the id of the one four on */
        if (k + 8 < n) bd_prefetch_object(PyTuple_GetItem(fragments, k + 8));
        if (k + 4 < n) bd_prefetch_pfid(PyTuple_GetItem(fragments, k + 4));
        if ((PyObject *)Py_TYPE(item) != fragment_cls) { *snap = BD_FALLBACK; break; }
        PyObject *const *pf = mr_pf_fields(item);
        int rc = pf != NULL ? bd_pf_get_str(nm, pf, NULL, N_PFID, &pfid) : bd_get_str(item, nm[N_PFID], &pfid);
        if (rc != BD_OK) {
            if (rc == BD_ERROR) status = BD_ERROR;
            else *snap = BD_FALLBACK;
            break;
        }
        if (previous != NULL && *sorted) {
            int cmp = bd_compare(previous, pfid);
            if (cmp == -2) {
                Py_DECREF(pfid);
                status = BD_ERROR;
                break;
            }
            if (cmp >= 0) *sorted = 0;
        }
        BD_SETREF(previous, pfid);
    }
    Py_XDECREF(previous);
    return status;
}

/* logical_target_cover matches the placement's fragments tuple against the parts' fragments by a
 * merge (bd_cover_merge) instead of tables by address and id; up to this many parts the merge
 * scans the parts' next fragments in part order, more parts keep them by address too. */
#define BD_MERGE_LINEAR_PARTS 32

/* 1 when target_fragments (an exact tuple) lists exactly the n_frags fragments of the parts
 * (part_fragments[p], exact tuples; numbered from 0 in part order, then tuple order), each
 * entry the next not yet listed fragment of some part (by identity; nothing is dereferenced):
 * f_at[k] the number of item k and pos_of[f] the position of fragment f. Every fragment of the
 * parts is then one of its entries and each entry one of them (an object in two parts, or two
 * entries of one object, would need its id twice in the strictly increasing order the caller
 * then checks). 0 when that is not so (nothing proven: the caller's tables decide); also 0,
 * with more than BD_MERGE_LINEAR_PARTS parts, when an object is two parts' next fragment at
 * once or the heads' memory is not there. Never raises. */
static int
bd_cover_merge(PyObject *const *part_fragments, Py_ssize_t n_parts, PyObject *target_fragments, Py_ssize_t n_frags,
               Py_ssize_t *f_at, Py_ssize_t *pos_of)
{
    PyObject *head_local[BD_MERGE_LINEAR_PARTS];
    Py_ssize_t next_local[BD_MERGE_LINEAR_PARTS], count_local[BD_MERGE_LINEAR_PARTS];
    Py_ssize_t first_local[BD_MERGE_LINEAR_PARTS];
    PyObject **head = head_local;
    Py_ssize_t *next = next_local, *count = count_local, *first = first_local;
    bd_idslot *tab = NULL; /* more parts: head -> part */
    size_t mask = 0;
    Py_ssize_t total = 0, last = 0;
    int merged = 0;
    if (n_parts < 1 || PyTuple_Size(target_fragments) != n_frags) {
        PyErr_Clear();
        return 0;
    }
    if (n_parts > BD_MERGE_LINEAR_PARTS) {
        head = mr_alloc_array((size_t)n_parts, sizeof(PyObject *));
        next = mr_alloc_array((size_t)n_parts, sizeof(Py_ssize_t));
        count = mr_alloc_array((size_t)n_parts, sizeof(Py_ssize_t));
        first = mr_alloc_array((size_t)n_parts, sizeof(Py_ssize_t));
        tab = bd_idtab_new((size_t)n_parts, &mask);
        if (head == NULL || next == NULL || count == NULL || first == NULL || tab == NULL) goto done;
    }
    for (Py_ssize_t p = 0; p < n_parts; p++) {
        count[p] = PyTuple_Size(part_fragments[p]);
        if (count[p] < 0 || __builtin_add_overflow(total, count[p], &first[p])) goto done;
        first[p] = total;
        total += count[p];
        next[p] = 0;
        head[p] = count[p] > 0 ? PyTuple_GetItem(part_fragments[p], 0) : NULL;
        if (count[p] > 0 && head[p] == NULL) goto done;
        if (tab != NULL && head[p] != NULL && !bd_heads_put(tab, mask, head[p], p)) goto done;
    }
    if (total != n_frags) goto done;
    for (Py_ssize_t k = 0; k < n_frags; k++) {
        PyObject *item = PyTuple_GetItem(target_fragments, k);
        if (item == NULL) goto done;
        Py_ssize_t p = last;
        if (head[p] != item) {
            if (tab != NULL) {
                p = bd_idtab_get(tab, mask, item); /* the only part whose head it is */
                if (p < 0) goto done;
            } else {
                for (p = 0; p < n_parts && head[p] != item; p++) {
                }
                if (p == n_parts) goto done;
            }
        }
        last = p;
        Py_ssize_t f = first[p] + next[p];
        f_at[k] = f;
        pos_of[f] = k;
        next[p]++;
        PyObject *old = head[p];
        head[p] = NULL;
        if (next[p] < count[p]) {
            head[p] = PyTuple_GetItem(part_fragments[p], next[p]);
            if (head[p] == NULL) goto done;
        }
        if (tab != NULL && !bd_heads_move(tab, mask, old, head[p], p)) goto done;
    }
    merged = 1;
done:
    if (!merged) PyErr_Clear(); /* (nothing proven: the caller's tables decide) */
    if (head != head_local) PyMem_Free(head);
    if (next != next_local) PyMem_Free(next);
    if (count != count_local) PyMem_Free(count);
    if (first != first_local) PyMem_Free(first);
    PyMem_Free(tab);
    return merged;
}

/* The placement-wide distinctness check of logical_target_cover's fragment pass over frags[0 ..
 * n) (bd_strtab_add in pass order): BD_OK when no id is there twice, BD_FALLBACK at the first
 * repeat, BD_ERROR. */
static int
bd_cover_distinct(const bd_cover_frag *frags, Py_ssize_t n)
{
    size_t mask = 0;
    bd_strslot *table = bd_strtab_new(n, &mask);
    if (table == NULL) return BD_ERROR;
    int status = BD_OK;
    for (Py_ssize_t f = 0; f < n && status == BD_OK; f++) {
        int added = bd_strtab_add(table, mask, frags[f].pfid);
        if (added <= 0) status = added < 0 ? BD_ERROR : BD_FALLBACK;
    }
    PyMem_Free(table);
    return status;
}

/* bd_pending_distinct (declared with bound_fragments_ordered): the ids by value in a table. */
static int
bd_pending_distinct(const bd_pending *pending, Py_ssize_t count)
{
    size_t mask = 0;
    bd_strslot *table = bd_strtab_new(count, &mask);
    if (table == NULL) return BD_ERROR;
    int status = BD_OK;
    for (Py_ssize_t g = 0; g < count && status == BD_OK; g++) {
        if (g + 8 < count) __builtin_prefetch(pending[g + 8].pfid); /* a hint: its hash is read */
        int added = bd_strtab_add(table, mask, pending[g].pfid); /* (held by the entry) */
        if (added <= 0) status = added < 0 ? BD_ERROR : BD_FALLBACK;
    }
    PyMem_Free(table);
    return status;
}

/* A hint: the lines of a bd_cover_frag the operation passes read (fragment, part, count, start,
 * plain: its first 40 bytes, which may straddle two lines). Only addresses are computed. */
static inline void
bd_prefetch_cover_frag(const bd_cover_frag *fr)
{
    __builtin_prefetch(fr, 1);
    __builtin_prefetch((const char *)fr + offsetof(bd_cover_frag, pfid), 1);
}

/* Hints for logical_target_cover's operation pass before operation i (nothing read is decided
 * on; borrowed pointers: operations holds the operations, they hold their fields, and no code
 * runs in the call): the operation 8 on; with frags (the operations follow the placement's
 * order, f_at non-NULL) the fragment entry 8 placement positions past the cursor, which frags'
 * part order scatters, and its pos_of entry; with src_tab, the slot and the object of the source
 * of the operation 4 on (in TransferRegion's C-owned layout: its object was asked for a round
 * earlier). */
static inline __attribute__((always_inline)) void
bd_cover_ahead(PyObject *operations, Py_ssize_t i, Py_ssize_t n_ops, const mr_layout_class *rl,
               const bd_cover_frag *frags, const Py_ssize_t *f_at, const Py_ssize_t *pos_of, Py_ssize_t cursor,
               Py_ssize_t n_frags, const bd_idslot *src_tab, size_t src_mask)
{
    if (i + 8 < n_ops) {
        PyObject *op = PyTuple_GetItem(operations, i + 8);
        bd_prefetch_object(op);
        __builtin_prefetch((const void *)((uintptr_t)op + 56)); /* (its fields up to overlap_shape) */
    }
    if (frags != NULL && f_at != NULL && cursor + 8 < n_frags) {
        Py_ssize_t f = f_at[cursor + 8];
        if (f >= 0 && f < n_frags) {
            bd_prefetch_cover_frag(&frags[f]);
            __builtin_prefetch(&pos_of[f]);
        }
    }
    if (src_tab != NULL && i + 4 < n_ops) {
        PyObject *op = PyTuple_GetItem(operations, i + 4);
        PyObject *const *ahead = op != NULL ? mr_layout_fields(op, rl) : NULL;
        if (ahead != NULL && ahead[MR_RG_SOURCE] != NULL) {
            __builtin_prefetch(&src_tab[bd_idtab_home(ahead[MR_RG_SOURCE], src_mask)]);
            bd_prefetch_object(ahead[MR_RG_SOURCE]);
        }
    }
}

PyDoc_STRVAR(logical_target_cover_doc,
"logical_target_cover(operations, parts, executors, target_tensors, placement_id, region_cls,\n"
"                     fragment_cls, part_cls, executor_cls, rank_cls, tensor_cls)\n"
"--\n\n"
"The target-side logical self-checks of spec 11.6 (validation.validate_logical_target_coverage)\n"
"except the per-executor operation index check, decided over flat arrays: True when every\n"
"check passes with exact classes, exact str ids (placement fragment, participant, tensor ids\n"
"distinct), operation targets that are the placement's own fragment objects, executor ranks\n"
"identical or equal exact ranks, executor fragment ids exactly the part's sorted ids, tensors\n"
"identical objects, and every selected fragment exactly covered by its operations' boxes (one\n"
"box equal to it, or at most 64 boxes, non-negative offsets, positive extents, representable\n"
"ends and volumes). None when that is not decided here: the Python checks then run and raise\n"
"the first failure. TypeError when a class is not a heap type.\n\n"
"With stored_cls (a twelfth argument, a class) it also decides, in the same pass over the\n"
"fragments and operations (one C call: every read observes the same state),\n"
"logical_routes_plain(operations, region_cls, fragment_cls, stored_cls, rank_cls): it then\n"
"returns True when the checks pass and the routes are plain, False when the checks pass and\n"
"logical_routes_plain would return None, and None when the checks are not decided here.\n\n"
"With target_fragments and source_fragments as well (14 arguments: the target and the source\n"
"placement's fragments fields), it returns None when the checks are not decided here, else\n"
"(routes, snapshots): routes the twelve-argument answer, snapshots True only when\n"
"operations_snapshots(operations, region_cls, fragment_cls, target_index, source_index)\n"
"would return True for the indexes {f.placement_fragment_id: f for f in <fragments>}\n"
"(binding step 5, decided in the same passes): target_fragments must hold exactly the parts'\n"
"fragment objects, each once, and every source fragment must be exact with an exact str id;\n"
"anything else is False (binding then runs step 5 itself).");

static PyObject *
bd_logical_target_cover(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 11 && nargs != 12 && nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "logical_target_cover expects 11, 12 or 14 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args + 5, (nargs > 12 ? 12 : nargs) - 5) < 0) return NULL;
    /* The fused logical_routes_plain (12 arguments): routes stays BD_OK while every route half
     * read is plain; BD_FALLBACK once one is not (only the answer changes: the checks go on). */
    PyObject *stored_cls = nargs >= 12 ? args[11] : NULL;
    int routes = stored_cls != NULL ? BD_OK : BD_FALLBACK;
    PyObject *last_source = NULL; /* borrowed: the previous operation's plain source (alive in it) */
    /* The fused binding step 5 (14 arguments: the target and the source placement's fragments
     * tuples): snap stays BD_OK while operations_snapshots(operations, region_cls, fragment_cls,
     * target_index, source_index) would return True, the indexes being {f.placement_fragment_id:
     * f for f in <fragments>} (only the answer changes: the checks go on). */
    PyObject *target_fragments = nargs == 14 ? args[12] : NULL, *source_fragments = nargs == 14 ? args[13] : NULL;
    int snap = nargs == 14 ? BD_OK : BD_FALLBACK;
    PyObject *source_index = NULL;
    int built_index = 0; /* source_index holds the comprehension's entries (else still empty) */
    PyObject *last_snap = NULL; /* borrowed: the previous operation's indexed source (alive in it) */
    unsigned char *listed = NULL;
    PyObject *const *nm = tb.nm;
    PyObject *operations = args[0], *parts = args[1], *executors = args[2], *target_tensors = args[3];
    PyObject *placement_id = args[4];
    PyObject *region_cls = args[5], *fragment_cls = args[6], *part_cls = args[7], *executor_cls = args[8];
    PyObject *rank_cls = args[9], *tensor_cls = args[10];
    static mr_layout_memo cover_memo; /* region_cls in TransferRegion's C-owned layout (layout.h) */
    mr_layout_class rl;
    (void)mr_region_layout(&cover_memo, &rl, region_cls);
    if (!PyTuple_CheckExact(operations) || !PyTuple_CheckExact(parts) || !PyTuple_CheckExact(executors)
        || !PyTuple_CheckExact(target_tensors) || !PyUnicode_CheckExact(placement_id)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n_parts = PyTuple_Size(parts), n_ops = PyTuple_Size(operations);
    Py_ssize_t n_exec = PyTuple_Size(executors);
    if (n_parts < 0 || n_ops < 0 || n_exec < 0) return NULL;
    if (n_exec == 0) Py_RETURN_NONE; /* "logical plan has no target executor metadata" */
    int status = BD_ERROR;
    PyObject **part_fragments = NULL, **part_tensors = NULL, **part_ranks = NULL;
    PyObject *participants = NULL;
    /* the target tensor catalog's objects by address (their catalog index), and which of them a
     * selected part lists */
    bd_idslot *cat_tab = NULL;
    size_t cat_mask = 0;
    unsigned char *cat_seen = NULL;
    Py_ssize_t n_catalog = 0, n_seen = 0;
    PyObject *owned = NULL; /* ids read through getattr (not from a scanned dict): held here */
    bd_cover_frag *frags = NULL;
    Py_ssize_t *op_frag = NULL, *order = NULL, *exec_parts = NULL, *exec_first = NULL, *part_first = NULL;
    PyObject **op_fields = NULL; /* per operation, its CO_COUNT scanned fields (borrowed; NULL: read as before) */
    /* Fragments by address (their index), placement fragment ids by value (distinctness), and
     * the operation sources already proven (bits: BD_SRC_ROUTE, BD_SRC_SNAP). */
    bd_idslot *frag_tab = NULL, *src_tab = NULL;
    bd_strslot *pfid_tab = NULL;
    size_t frag_mask = 0, pfid_mask = 0, src_mask = 0, src_count = 0;
    /* The placement's fragments merged with the parts' (bd_cover_merge; 14 arguments): merged,
     * f_at / pos_of (placement position <-> fragment number), pfid_at (ids in placement order,
     * borrowed as frags[f].pfid), pfid_upto (fragments passed the point of the per-fragment
     * check), distinct_ids (1: ids strictly increasing in placement order). cursor, last_target
     * and last_f follow the operations along that order. */
    int merged = 0, distinct_ids = 0;
    Py_ssize_t *f_at = NULL, *pos_of = NULL, pfid_upto = 0, cursor = 0, last_f = -1;
    PyObject **pfid_at = NULL, *last_target = NULL;
    unsigned char *part_has_op = NULL, *part_selected = NULL;
    int64_t *coords = NULL;
    size_t coords_cap = 0;
    Py_ssize_t n_frags = 0;
    part_fragments = mr_alloc_array((size_t)n_parts, sizeof(PyObject *));
    part_tensors = mr_alloc_array((size_t)n_parts, sizeof(PyObject *));
    part_ranks = mr_alloc_array((size_t)n_parts, sizeof(PyObject *));
    if (part_fragments == NULL || part_tensors == NULL || part_ranks == NULL) goto done;
    for (Py_ssize_t p = 0; p < n_parts; p++) part_fragments[p] = part_tensors[p] = part_ranks[p] = NULL;
    part_has_op = mr_alloc_array((size_t)n_parts, 1);
    part_selected = mr_alloc_array((size_t)n_parts, 1);
    op_frag = mr_alloc_array((size_t)n_ops, sizeof(Py_ssize_t));
    order = mr_alloc_array((size_t)n_ops, sizeof(Py_ssize_t));
    op_fields = (size_t)n_ops > SIZE_MAX / CO_COUNT ? NULL : mr_alloc_array((size_t)n_ops * CO_COUNT, sizeof(PyObject *));
    exec_parts = mr_alloc_array((size_t)n_exec, sizeof(Py_ssize_t));
    exec_first = mr_alloc_array((size_t)n_exec, sizeof(Py_ssize_t));
    part_first = mr_alloc_array((size_t)n_parts, sizeof(Py_ssize_t));
    participants = PyDict_New();
    if (part_fragments == NULL || part_tensors == NULL || part_ranks == NULL || part_has_op == NULL
        || part_selected == NULL || op_frag == NULL || order == NULL || op_fields == NULL || exec_parts == NULL
        || exec_first == NULL
        || part_first == NULL || participants == NULL) {
        goto done;
    }
    memset(part_has_op, 0, (size_t)n_parts);
    memset(part_selected, 0, (size_t)n_parts);
    /* Parts: participant ids distinct, fragments exact tuples of exact fragments. */
    status = BD_OK;
    for (Py_ssize_t p = 0; p < n_parts && status == BD_OK; p++) {
        PyObject *part = PyTuple_GetItem(parts, p), *pid = NULL;
        if (part == NULL) { status = BD_ERROR; break; }
        if ((PyObject *)Py_TYPE(part) != part_cls) { status = BD_FALLBACK; break; }
        status = bd_get_str(part, nm[N_PARTICIPANT_ID], &pid);
        if (status != BD_OK) break;
        Py_ssize_t known = 0;
        status = bd_index_of(participants, pid, &known);
        if (status == BD_OK && known >= 0) status = BD_FALLBACK;
        if (status == BD_OK) status = bd_index_put(participants, pid, p);
        Py_DECREF(pid);
        if (status == BD_OK) status = bd_get(part, nm[N_FRAGMENTS], &part_fragments[p]);
        if (status == BD_OK) status = bd_get(part, nm[N_TENSORS], &part_tensors[p]);
        if (status == BD_OK) status = bd_get(part, nm[N_RANK], &part_ranks[p]);
        if (status != BD_OK) break;
        if (!PyTuple_CheckExact(part_fragments[p]) || !PyTuple_CheckExact(part_tensors[p])) {
            status = BD_FALLBACK;
            break;
        }
        Py_ssize_t count = PyTuple_Size(part_fragments[p]);
        if (count < 0 || __builtin_add_overflow(n_frags, count, &n_frags)) status = count < 0 ? BD_ERROR : BD_FALLBACK;
    }
    if (status != BD_OK) goto done;
    status = BD_ERROR;
    frags = mr_alloc_array((size_t)n_frags, sizeof(bd_cover_frag));
    if (frags == NULL) goto done;
    /* With the placement's fragments (14 arguments): its tuple merged with the
     * parts' (bd_cover_merge). Then the fragment pass keeps each id at its placement position
     * (pfid_at) and the ids' distinctness is checked after it, in that order (strictly
     * increasing: distinct, so distinct objects too), where the ids sit sorted: no table by id
     * and none by address (the operations' targets are then found along that order). */
    if (nargs == 14 && PyTuple_CheckExact(target_fragments) && n_frags > 0) {
        f_at = mr_alloc_array((size_t)n_frags, sizeof(Py_ssize_t));
        pos_of = mr_alloc_array((size_t)n_frags, sizeof(Py_ssize_t));
        pfid_at = mr_alloc_array((size_t)n_frags, sizeof(PyObject *));
        if (f_at == NULL || pos_of == NULL || pfid_at == NULL) goto done;
        merged = bd_cover_merge(part_fragments, n_parts, target_fragments, n_frags, f_at, pos_of);
    }
    pfid_tab = merged ? NULL : bd_strtab_new(n_frags, &pfid_mask);
    if (!merged && pfid_tab == NULL) goto done;
    status = BD_OK;
    {
        Py_ssize_t f = 0;
        bd_rank_memo rank_memo = {NULL, BD_FALLBACK}; /* (bd_route_half_scanned) */
        for (Py_ssize_t p = 0; p < n_parts && status == BD_OK; p++) {
            Py_ssize_t count = PyTuple_Size(part_fragments[p]);
            part_first[p] = f;
            for (Py_ssize_t k = 0; k < count && status == BD_OK; k++, f++) {
                PyObject *fragment = PyTuple_GetItem(part_fragments[p], k), *pfid = NULL;
                if (fragment == NULL) { status = BD_ERROR; break; }
                /* hints: the fragment four on, the id of the one two on */
                if (k + 4 < count) { /* (its eight fields span two or three lines) */
                    PyObject *ahead = PyTuple_GetItem(part_fragments[p], k + 4);
                    bd_prefetch_object(ahead);
                    __builtin_prefetch((const void *)((uintptr_t)ahead + 64));
                    __builtin_prefetch((const void *)((uintptr_t)ahead + 79));
                }
                if (k + 2 < count) bd_prefetch_pfid(PyTuple_GetItem(part_fragments[p], k + 2));
                if ((PyObject *)Py_TYPE(fragment) != fragment_cls) { status = BD_FALLBACK; break; }
                static const int fields[CF_COUNT] = {N_PFID, N_GLOBAL_OFFSET, N_LOCAL_SHAPE, N_RANK, N_PIPELINE_STAGE_ID};
                if (bd_scan_fields(nm, fragment, fields, CF_COUNT, frags[f].v) < 0) { status = BD_ERROR; break; }
                /* The id as read from the fragment's own dict (held there; no code runs in this
                 * call that could drop it), else as getattr reads it (then held by owned). */
                if (frags[f].v[CF_PFID] == NULL) rank_memo.rank = NULL; /* (a getattr below) */
                status = bd_get_scanned(fragment, nm[N_PFID], frags[f].v[CF_PFID], &pfid);
                if (status == BD_OK && frags[f].v[CF_PFID] == NULL) {
                    if (owned == NULL) owned = PyList_New(0);
                    if (owned == NULL || PyList_Append(owned, pfid) < 0) status = BD_ERROR;
                }
                Py_XDECREF(pfid); /* held by the dict, or by owned */
                if (status != BD_OK) break;
                if (!PyUnicode_CheckExact(pfid) || PyUnicode_GetLength(pfid) < 1) {
                    status = BD_FALLBACK; /* as bd_get_str */
                    break;
                }
                /* Placement fragment ids distinct placement-wide (pfid_tab), and each part's in
                 * strictly increasing order, as placements build them (the executor check below
                 * compares with them in that order; another order declines). */
                if (merged) {
                    /* checked after this pass, in placement order (see merged); an error met in
                     * this pass first asks whether the check would have declined by now */
                    pfid_at[pos_of[f]] = pfid;
                    pfid_upto = f + 1;
                } else {
                    int added = bd_strtab_add(pfid_tab, pfid_mask, pfid);
                    if (added <= 0) status = added < 0 ? BD_ERROR : BD_FALLBACK; /* a placement fragment id twice */
                }
                if (status == BD_OK && k > 0) {
                    int cmp = bd_compare(frags[f - 1].pfid, pfid);
                    if (cmp == -2 || cmp >= 0) status = cmp == -2 ? BD_ERROR : BD_FALLBACK;
                }
                frags[f].pfid = pfid;
                frags[f].fragment = fragment;
                frags[f].part = p;
                frags[f].count = 0;
                frags[f].start = 0;
                frags[f].plain = BD_FALLBACK;
                if (status == BD_OK && routes == BD_OK) {
                    /* its route half, read now: an operation targeting it reads this very object */
                    frags[f].plain = bd_route_half_scanned(nm, fragment, fragment_cls, frags[f].v, rank_cls, &rank_memo);
                    if (frags[f].plain == BD_ERROR) status = BD_ERROR;
                }
            }
        }
    }
    if (merged && status == BD_ERROR) {
        /* The check run per fragment would have declined before this error when an id was
         * twice among the fragments passed by then: that answer, not the error. */
        PyObject *type = NULL, *value = NULL, *traceback = NULL;
        PyErr_Fetch(&type, &value, &traceback);
        int before = bd_cover_distinct(frags, pfid_upto);
        if (before == BD_FALLBACK) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            status = BD_FALLBACK;
        } else if (before == BD_OK) {
            PyErr_Restore(type, value, traceback);
        } else {
            Py_XDECREF(type); /* a memory error of the check itself is the error raised */
            Py_XDECREF(value);
            Py_XDECREF(traceback);
        }
    }
    if (status != BD_OK) goto done;
    if (merged) {
        /* Distinct ids: strictly increasing in placement order; else the per-fragment check's
         * answer (in pass order, as it runs above without the merge). */
        for (Py_ssize_t k = 1; k < n_frags && distinct_ids == 0; k++) {
            if (k + 8 < n_frags) { /* a hint: the id 8 on (scattered in placement order), its text */
                __builtin_prefetch(pfid_at[k + 8]);
                __builtin_prefetch((const void *)((uintptr_t)pfid_at[k + 8] + 64));
            }
            int cmp = bd_compare(pfid_at[k - 1], pfid_at[k]);
            if (cmp == -2) {
                status = BD_ERROR;
                goto done;
            }
            if (cmp >= 0) distinct_ids = -1;
        }
        if (distinct_ids == 0) {
            distinct_ids = 1;
        } else {
            distinct_ids = 0;
            status = bd_cover_distinct(frags, n_frags);
            if (status != BD_OK) goto done;
        }
    }
    /* Operations: exact regions whose targets are the placement's own fragment objects (found
     * by address: a target that is not one of those objects declines). With distinct_ids the
     * fragments are distinct objects, found along the placement's order (f_at) while the
     * operations follow it, else by address (frag_tab, built at the first operation that does
     * not follow it). */
    if (!distinct_ids) {
        frag_tab = bd_idtab_new((size_t)n_frags, &frag_mask);
        if (frag_tab == NULL) {
            status = BD_ERROR;
            goto done;
        }
    }
    for (Py_ssize_t f = 0; f < n_frags && !distinct_ids; f++) {
        bd_idslot *slot = bd_idtab_find(frag_tab, frag_mask, frags[f].fragment);
        if (slot->key != 0) {
            status = BD_FALLBACK; /* the same object twice */
            goto done;
        }
        slot->key = (uintptr_t)frags[f].fragment;
        slot->value = f;
    }
    if (routes == BD_OK || snap == BD_OK) {
        /* the sources proven plain / indexed so far (at most half full: then no more are kept) */
        size_t expected = nargs == 14 && PyTuple_CheckExact(source_fragments) ? (size_t)PyTuple_Size(source_fragments)
                                                                                 : (size_t)n_frags;
        src_tab = bd_idtab_new(expected, &src_mask);
        if (src_tab == NULL) {
            status = BD_ERROR;
            goto done;
        }
    }
    if (snap == BD_OK) {
        /* The target index: target_fragments holds exactly the parts' fragment objects, each
         * once (found by address; their ids, read above, are distinct), so the index maps each
         * one's id to that very object. The source index: built here as the dict comprehension
         * builds it (exact fragments with exact str ids: no user code; the last one wins). */
        if (!PyTuple_CheckExact(target_fragments) || !PyTuple_CheckExact(source_fragments)
            || PyTuple_Size(target_fragments) != n_frags) {
            snap = BD_FALLBACK;
        }
        if (snap == BD_OK) {
            listed = mr_alloc_array((size_t)n_frags + 1, 1);
            source_index = PyDict_New();
            if (listed == NULL || source_index == NULL) {
                status = BD_ERROR;
                goto done;
            }
            memset(listed, 0, (size_t)n_frags + 1);
        }
        /* distinct_ids: the merge proved it (target_fragments lists each of the parts'
         * fragments once, and nothing else) */
        for (Py_ssize_t k = 0; k < n_frags && snap == BD_OK && !distinct_ids; k++) {
            PyObject *item = PyTuple_GetItem(target_fragments, k);
            if (item == NULL) { status = BD_ERROR; goto done; }
            Py_ssize_t f = bd_idtab_get(frag_tab, frag_mask, item);
            if (f < 0 || f >= n_frags || frags[f].fragment != item || listed[f]) snap = BD_FALLBACK;
            else listed[f] = 1;
        }
        Py_ssize_t n_source = snap == BD_OK ? PyTuple_Size(source_fragments) : 0;
        /* A source placement lists its fragments in strictly increasing id order (placements
         * are built sorted by id): checked here in one sequential pass over the ids, which then
         * are distinct, so the index the dict comprehension builds has every fragment as its
         * own entry (n_indexed == n_source below) without building it. Any other order builds
         * the dict as before (bd_source_index); so does an operation whose source is not one
         * of these objects (below), and both decide exactly as the dict does. */
        int sorted = 1;
        if (snap == BD_OK) status = bd_source_ids_sorted(nm, source_fragments, fragment_cls, &snap, &sorted);
        if (status != BD_OK) goto done;
        if (snap == BD_OK && !sorted) {
            snap = bd_source_index(nm, source_fragments, fragment_cls, source_index);
            if (snap == BD_ERROR) { status = BD_ERROR; goto done; }
            built_index = 1;
        }
        /* No id twice among them (as many entries as fragments): each source fragment is its
         * own index entry, so an operation whose source is one of these very objects (found by
         * address) passes the check below as it would read it (an exact fragment_cls with an
         * exact str id whose entry is itself; no user code runs in this call). */
        Py_ssize_t n_indexed = snap != BD_OK ? -1 : built_index ? PyDict_Size(source_index) : n_source;
        if (n_indexed < 0 && PyErr_Occurred()) { status = BD_ERROR; goto done; }
        for (Py_ssize_t k = 0; n_indexed == n_source && k < n_source; k++) {
            PyObject *item = PyTuple_GetItem(source_fragments, k);
            if (item == NULL) { status = BD_ERROR; goto done; }
            bd_idslot *slot = bd_idtab_find(src_tab, src_mask, item);
            if (slot->key == 0 && 2 * (src_count + 1) <= src_mask) {
                slot->key = (uintptr_t)item;
                slot->value = BD_SRC_SNAP;
                src_count++;
            }
        }
    }
    for (Py_ssize_t i = 0; i < n_ops && status == BD_OK; i++) {
        PyObject *op = PyTuple_GetItem(operations, i), *target = NULL;
        if (op == NULL) { status = BD_ERROR; break; }
        bd_cover_ahead(operations, i, n_ops, &rl, distinct_ids ? frags : NULL, f_at, pos_of, cursor, n_frags,
                       src_tab, src_mask);
        if ((PyObject *)Py_TYPE(op) != region_cls) { status = BD_FALLBACK; break; }
        PyObject **ov = &op_fields[CO_COUNT * i];
        static const int op_names[CO_COUNT] = {N_TARGET, N_SOURCE, N_OVERLAP_OFFSET, N_OVERLAP_SHAPE};
        PyObject *const *layout_fields = mr_layout_fields(op, &rl);
        if (layout_fields != NULL) {
            /* TransferRegion's C-owned layout (layout.h): an empty field is one the scan did not
             * meet (NULL: read by getattr below, which raises as a missing key's getattr did) */
            static const int op_layout[CO_COUNT] = {MR_RG_TARGET, MR_RG_SOURCE, MR_RG_OVERLAP_OFFSET,
                                                    MR_RG_OVERLAP_SHAPE};
            for (int k = 0; k < CO_COUNT; k++) ov[k] = layout_fields[op_layout[k]];
        } else if (bd_scan_fields(nm, op, op_names, CO_COUNT, ov) < 0) {
            status = BD_ERROR;
            break;
        }
        /* the target is compared by address only: a scanned one is not touched (borrowed) */
        status = ov[CO_TARGET] != NULL ? BD_OK : bd_get(op, nm[N_TARGET], &target);
        if (status != BD_OK) break;
        PyObject *op_target = ov[CO_TARGET] != NULL ? ov[CO_TARGET] : target;
        Py_ssize_t f = -1;
        if (!distinct_ids) {
            f = bd_idtab_get(frag_tab, frag_mask, op_target);
        } else if (op_target == last_target) {
            f = last_f;
        } else {
            PyObject *expected = cursor < n_frags ? PyTuple_GetItem(target_fragments, cursor) : NULL;
            if (expected == NULL && cursor < n_frags) { status = BD_ERROR; break; }
            if (expected == op_target) {
                f = f_at[cursor];
            } else {
                if (frag_tab == NULL) {
                    /* distinct objects (distinct_ids): every address once */
                    frag_tab = bd_idtab_new((size_t)n_frags, &frag_mask);
                    if (frag_tab == NULL) { status = BD_ERROR; break; }
                    for (Py_ssize_t g = 0; g < n_frags; g++) {
                        bd_idslot *slot = bd_idtab_find(frag_tab, frag_mask, frags[g].fragment);
                        slot->key = (uintptr_t)frags[g].fragment;
                        slot->value = g;
                    }
                }
                f = bd_idtab_get(frag_tab, frag_mask, op_target);
            }
            if (f >= 0 && f < n_frags) cursor = pos_of[f] + 1; /* the placement's next one follows */
            last_target = op_target;
            last_f = f;
        }
        if (f < 0 || f >= n_frags || frags[f].fragment != op_target) status = BD_FALLBACK;
        Py_CLEAR(target);
        if (status != BD_OK) break;
        if (routes == BD_OK || snap == BD_OK) {
            /* logical_routes_plain on this operation: its target (one of the fragments read
             * above) and its source; operations_snapshots on it: its target is one of the parts'
             * fragments (so the target index's entry), its source must be the source index's
             * entry for its id. No user code runs in this call: the same object still has the
             * values read. */
            /* a scanned source is borrowed (held by op, held by operations: no code runs in this
             * call), so a source proven for an earlier operation is not touched again; else read
             * by getattr as before (held in read_source) */
            PyObject *source = ov[CO_SOURCE], *read_source = NULL;
            int got = BD_OK;
            if (source == NULL) {
                got = bd_get(op, nm[N_SOURCE], &read_source);
                source = read_source;
            }
            /* A source proven plain (indexed) for an earlier operation is that very object,
             * unchanged (no user code runs in this call): its answer stands (src_tab, by address;
             * held by that operation, held by operations). */
            bd_idslot *known = got == BD_OK ? bd_idtab_find(src_tab, src_mask, source) : NULL;
            Py_ssize_t proven = known != NULL && known->key != 0 ? known->value : 0;
            if (routes == BD_OK) {
                routes = frags[f].plain;
                if (routes == BD_OK) routes = got;
                if (routes == BD_OK && source != last_source && !(proven & BD_SRC_ROUTE)
                    && (PyObject *)Py_TYPE(source) != stored_cls) {
                    routes = bd_route_half_plain(nm, source, fragment_cls, rank_cls);
                    if (routes == BD_OK) {
                        last_source = source; /* held by op, held by operations */
                        proven |= BD_SRC_ROUTE;
                    }
                }
            }
            if (snap == BD_OK) {
                snap = got;
                if (snap == BD_OK && (source == last_snap || (proven & BD_SRC_SNAP))) {
                    /* proven for an earlier operation */
                }
                else if (snap == BD_OK) {
                    PyObject *pfid = NULL;
                    if ((PyObject *)Py_TYPE(source) != fragment_cls) snap = BD_FALLBACK;
                    if (snap == BD_OK) snap = bd_get_str(source, nm[N_PFID], &pfid);
                    if (snap == BD_OK && !built_index) {
                        /* the index not built yet (the sorted ids proved it): built now, as before */
                        snap = bd_source_index(nm, source_fragments, fragment_cls, source_index);
                        built_index = 1;
                    }
                    if (snap == BD_OK) {
                        PyObject *indexed = PyDict_GetItemWithError(source_index, pfid); /* borrowed */
                        if (indexed != source) snap = indexed == NULL && PyErr_Occurred() ? BD_ERROR : BD_FALLBACK;
                    }
                    Py_XDECREF(pfid);
                    if (snap == BD_OK) {
                        last_snap = source; /* held by op, held by operations */
                        proven |= BD_SRC_SNAP;
                    }
                }
            }
            if (known != NULL && proven != 0 && (known->key != 0 || 2 * (src_count + 1) <= src_mask)) {
                src_count += known->key == 0;
                known->key = (uintptr_t)source;
                known->value = proven;
            }
            Py_XDECREF(read_source);
            if (got == BD_ERROR || routes == BD_ERROR || snap == BD_ERROR) {
                status = BD_ERROR;
                break;
            }
        }
        op_frag[i] = f;
        frags[f].count++;
        part_has_op[frags[f].part] = 1;
    }
    if (status != BD_OK) goto done;
    /* The catalog's tensors: exact tensor_cls objects with exact str ids, strictly increasing;
     * by address in cat_tab (the executor loop finds each part tensor there). */
    n_catalog = PyTuple_Size(target_tensors);
    if (n_catalog < 0) { status = BD_ERROR; goto done; }
    cat_tab = bd_idtab_new((size_t)n_catalog, &cat_mask);
    cat_seen = cat_tab == NULL ? NULL : mr_alloc_array((size_t)n_catalog + 1, 1);
    if (cat_seen == NULL) { status = BD_ERROR; goto done; }
    memset(cat_seen, 0, (size_t)n_catalog + 1);
    {
        PyObject *previous = NULL;
        for (Py_ssize_t k = 0; k < n_catalog && status == BD_OK; k++) {
            PyObject *tensor = PyTuple_GetItem(target_tensors, k), *tid = NULL;
            if (tensor == NULL) { status = BD_ERROR; break; }
            if (k + 4 < n_catalog) bd_prefetch_object(PyTuple_GetItem(target_tensors, k + 4)); /* a hint */
            if ((PyObject *)Py_TYPE(tensor) != tensor_cls) { status = BD_FALLBACK; break; }
            status = bd_get_str(tensor, nm[N_TENSOR_ID], &tid);
            if (status != BD_OK) break;
            if (previous != NULL) {
                int cmp = bd_compare(previous, tid);
                if (cmp == -2 || cmp >= 0) status = cmp == -2 ? BD_ERROR : BD_FALLBACK;
            }
            BD_SETREF(previous, tid);
            if (status != BD_OK) break;
            /* distinct ids, so distinct objects (an object read twice gives its one id) */
            bd_idslot *slot = bd_idtab_find(cat_tab, cat_mask, tensor);
            if (slot->key != 0) { status = BD_FALLBACK; break; }
            slot->key = (uintptr_t)tensor;
            slot->value = k;
        }
        Py_XDECREF(previous);
    }
    if (status != BD_OK) goto done;
    /* Executors (_check_executors): placement, distinct known participants, ranks, fragment ids,
     * and the tensors of the selected parts. */
    for (Py_ssize_t e = 0; e < n_exec && status == BD_OK; e++) {
        PyObject *executor = PyTuple_GetItem(executors, e), *value = NULL;
        if (executor == NULL) { status = BD_ERROR; break; }
        if ((PyObject *)Py_TYPE(executor) != executor_cls) { status = BD_FALLBACK; break; }
        status = bd_get_str(executor, nm[N_PLACEMENT_ID], &value);
        if (status != BD_OK) break;
        int same = bd_same_str(value, placement_id);
        Py_CLEAR(value);
        if (same <= 0) { status = same < 0 ? BD_ERROR : BD_FALLBACK; break; }
        status = bd_get_str(executor, nm[N_PARTICIPANT_ID], &value);
        Py_ssize_t p = -1;
        if (status == BD_OK) status = bd_index_of(participants, value, &p);
        Py_CLEAR(value);
        if (status == BD_OK && (p < 0 || p >= n_parts || part_selected[p])) status = BD_FALLBACK;
        if (status != BD_OK) break;
        part_selected[p] = 1;
        exec_parts[e] = p;
        exec_first[e] = part_first[p];
        status = bd_get(executor, nm[N_RANK], &value);
        if (status == BD_OK) status = bd_same_rank(nm, part_ranks[p], value, rank_cls);
        Py_CLEAR(value);
        if (status != BD_OK) break;
        /* fragment ids: an exact tuple, strictly increasing, each a fragment of this part, as
         * many as the part has (ids are distinct placement-wide): the part's sorted ids. The
         * part's ids are distinct and in strictly increasing order (proven above), so that is
         * the tuple equal, item by item, to the part's ids in part order (a strictly increasing
         * run of `count` members of a `count`-member set is its sorted order): compared by
         * identity (the planner lists the fragments' own id objects), else as exact str. */
        status = bd_get(executor, nm[N_PLACEMENT_FRAGMENT_IDS], &value);
        if (status != BD_OK) break;
        Py_ssize_t count = PyTuple_Size(part_fragments[p]);
        if (!PyTuple_CheckExact(value) || PyTuple_Size(value) != count) status = BD_FALLBACK;
        for (Py_ssize_t k = 0; k < count && status == BD_OK; k++) {
            PyObject *id = PyTuple_GetItem(value, k);
            if (id == NULL) { status = BD_ERROR; break; }
            Py_ssize_t f = part_first[p] + k;
            if (f < 0 || f >= n_frags || frags[f].part != p) { status = BD_FALLBACK; break; }
            /* the fragment's own id object: an exact str (checked in the fragment pass; no code
             * runs in this call), so its header is not read again (a cache miss per id at
             * scale); any other object is checked as before */
            if (id != frags[f].pfid) {
                if (!PyUnicode_CheckExact(id)) { status = BD_FALLBACK; break; }
                int equal = bd_same_str(id, frags[f].pfid);
                if (equal <= 0) status = equal < 0 ? BD_ERROR : BD_FALLBACK;
            }
        }
        Py_CLEAR(value);
        if (status != BD_OK) break;
        /* Each tensor one of the catalog's objects (by address; see the catalog pass above). */
        Py_ssize_t n_tensors = PyTuple_Size(part_tensors[p]);
        for (Py_ssize_t k = 0; k < n_tensors && status == BD_OK; k++) {
            PyObject *tensor = PyTuple_GetItem(part_tensors[p], k);
            if (tensor == NULL) { status = BD_ERROR; break; }
            if ((PyObject *)Py_TYPE(tensor) != tensor_cls) { status = BD_FALLBACK; break; }
            Py_ssize_t c = bd_idtab_get(cat_tab, cat_mask, tensor);
            if (c < 0 || c >= n_catalog) { status = BD_FALLBACK; break; }
            if (!cat_seen[c]) {
                cat_seen[c] = 1;
                n_seen++;
            }
        }
    }
    if (status != BD_OK) goto done;
    /* Executor participants are exactly the operations' participants. */
    {
        Py_ssize_t with_ops = 0;
        for (Py_ssize_t p = 0; p < n_parts; p++) {
            if (part_has_op[p]) {
                with_ops++;
                if (!part_selected[p]) status = BD_FALLBACK;
            }
        }
        if (with_ops != n_exec) status = BD_FALLBACK;
    }
    if (status != BD_OK) goto done;
    /* The target tensor catalog: the selected parts' tensors (the very objects) sorted by id:
     * every selected part's tensor is one of the catalog's objects (the executor loop above) and
     * every catalog object is one of them (n_seen). With the catalog's ids strictly increasing
     * (so distinct) that is what the dict of the parts' tensors by id decided (each id one
     * object, the catalog exactly those objects in id order), without reading each part
     * tensor's id: its object is found by address. */
    if (n_seen != n_catalog) { status = BD_FALLBACK; goto done; }
    /* Exact cover of every selected fragment by its operations' boxes (operations in order). */
    {
        Py_ssize_t running = 0;
        for (Py_ssize_t f = 0; f < n_frags; f++) {
            frags[f].start = running;
            running += frags[f].count;
            frags[f].count = 0;
        }
        for (Py_ssize_t i = 0; i < n_ops; i++) {
            /* hints: the entry of the operation 16 on, the order slot of the one 8 on (the
             * operations follow the placement's order, frags and order the parts': scattered) */
            if (i + 16 < n_ops) bd_prefetch_cover_frag(&frags[op_frag[i + 16]]);
            if (i + 8 < n_ops) __builtin_prefetch(&order[frags[op_frag[i + 8]].start], 1);
            bd_cover_frag *fr = &frags[op_frag[i]];
            order[fr->start + fr->count++] = i;
        }
    }
    for (Py_ssize_t e = 0; e < n_exec && status == BD_OK; e++) {
        Py_ssize_t p = exec_parts[e];
        Py_ssize_t count = PyTuple_Size(part_fragments[p]);
        for (Py_ssize_t k = 0; k < count && status == BD_OK; k++) {
            PyObject *fragment = PyTuple_GetItem(part_fragments[p], k), *value = NULL;
            if (fragment == NULL) { status = BD_ERROR; break; }
            Py_ssize_t f = exec_first[e] + k; /* the part's fragments are numbered in order */
            if (f < 0 || f >= n_frags || frags[f].fragment != fragment) { status = BD_FALLBACK; break; }
            Py_ssize_t n_boxes = frags[f].count;
            if (n_boxes < 1 || n_boxes > BD_COVER_MAX_BOXES) { status = BD_FALLBACK; break; }
            /* coords: container offset [0, r), extent [r, 2r), then per box offset and extent */
            Py_ssize_t r = -1;
            status = bd_get_scanned(fragment, nm[N_GLOBAL_OFFSET], frags[f].v[CF_GOFF], &value);
            if (status == BD_OK) status = bd_cover_coords(value, &r, 0, &coords, &coords_cap, 0);
            Py_CLEAR(value);
            if (status == BD_OK) status = bd_get_scanned(fragment, nm[N_LOCAL_SHAPE], frags[f].v[CF_LSHAPE], &value);
            if (status == BD_OK) status = bd_cover_coords(value, &r, 1, &coords, &coords_cap, (size_t)r);
            Py_CLEAR(value);
            if (status != BD_OK) break;
            if (!bd_cover_ends_fit(coords, coords + r, r)) { status = BD_FALLBACK; break; }
            size_t base = 2 * (size_t)r; /* box b: offsets at base + b*r, extents at base + (n+b)*r */
            if (k + 8 < count && f + 8 < n_frags) { /* a hint: the fields of the first box 8 fragments on */
                Py_ssize_t ahead = frags[f + 8].start;
                if (ahead >= 0 && ahead < n_ops) __builtin_prefetch(&op_fields[CO_COUNT * order[ahead]]);
            }
            for (Py_ssize_t b = 0; b < n_boxes && status == BD_OK; b++) {
                Py_ssize_t at_op = order[frags[f].start + b];
                PyObject *const *ov = &op_fields[CO_COUNT * at_op];
                /* the operation itself only when a field was not scanned (read by getattr); a
                 * scanned one is borrowed from it, held by operations (no code runs here) */
                PyObject *op = ov[CO_OFFSET] != NULL && ov[CO_SHAPE] != NULL ? NULL
                                                                             : PyTuple_GetItem(operations, at_op);
                if (op == NULL && (ov[CO_OFFSET] == NULL || ov[CO_SHAPE] == NULL)) { status = BD_ERROR; break; }
                size_t at_offset = base + (size_t)b * (size_t)r;
                size_t at_shape = base + (size_t)(n_boxes + b) * (size_t)r;
                status = bd_get_scanned(op, nm[N_OVERLAP_OFFSET], ov[CO_OFFSET], &value);
                if (status == BD_OK) status = bd_cover_coords(value, &r, 0, &coords, &coords_cap, at_offset);
                Py_CLEAR(value);
                if (status == BD_OK) status = bd_get_scanned(op, nm[N_OVERLAP_SHAPE], ov[CO_SHAPE], &value);
                if (status == BD_OK) status = bd_cover_coords(value, &r, 1, &coords, &coords_cap, at_shape);
                Py_CLEAR(value);
                if (status == BD_OK && !bd_cover_ends_fit(coords + at_offset, coords + at_shape, r)) {
                    status = BD_FALLBACK;
                }
            }
            if (status != BD_OK) break;
            /* offsets of all boxes then extents of all boxes: repack as the kernel's (bo, bs) */
            const int64_t *bo = coords + base, *bs = coords + base + (size_t)n_boxes * (size_t)r;
            if (!bd_cover_kernel((size_t)r, coords, coords + r, (size_t)n_boxes, bo, bs)) status = BD_FALLBACK;
        }
    }
done:
    if (part_fragments != NULL && part_tensors != NULL && part_ranks != NULL) {
        for (Py_ssize_t p = 0; p < n_parts; p++) {
            Py_XDECREF(part_fragments[p]);
            Py_XDECREF(part_tensors[p]);
            Py_XDECREF(part_ranks[p]);
        }
    }
    PyMem_Free(part_fragments);
    PyMem_Free(part_tensors);
    PyMem_Free(part_ranks);
    PyMem_Free(part_has_op);
    PyMem_Free(part_selected);
    PyMem_Free(op_frag);
    PyMem_Free(order);
    PyMem_Free(op_fields);
    PyMem_Free(exec_parts);
    PyMem_Free(exec_first);
    PyMem_Free(part_first);
    PyMem_Free(frag_tab);
    PyMem_Free(pfid_tab);
    PyMem_Free(f_at);
    PyMem_Free(pos_of);
    PyMem_Free(pfid_at);
    PyMem_Free(src_tab);
    PyMem_Free(frags);
    PyMem_Free(coords);
    PyMem_Free(listed);
    Py_XDECREF(source_index);
    Py_XDECREF(participants);
    PyMem_Free(cat_tab);
    PyMem_Free(cat_seen);
    Py_XDECREF(owned);
    if (status == BD_OK) {
        if (nargs == 14) return PyTuple_Pack(2, routes == BD_OK ? Py_True : Py_False, snap == BD_OK ? Py_True : Py_False);
        if (stored_cls != NULL && routes != BD_OK) Py_RETURN_FALSE;
        Py_RETURN_TRUE;
    }
    if (status == BD_ERROR) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "logical_target_cover failed");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------
 * project_attested: the attested-part loop of binding._build_executor_plans_with */

typedef struct {
    int64_t key[4]; /* executor rank (dp, pp, ep, tp) */
    Py_ssize_t index;
    PyObject *worker; /* borrowed: the executor row holds it */
} bd_exec_order;

static int
bd_compare_exec_order(const void *a, const void *b)
{
    const bd_exec_order *x = a, *y = b;
    for (int k = 0; k < 4; k++) {
        if (x->key[k] != y->key[k]) return x->key[k] < y->key[k] ? -1 : 1;
    }
    return x->index < y->index ? -1 : (x->index > y->index ? 1 : 0); /* stable */
}

/* The fields (dp, tp, pp, ep) of an exact rank_cls with exact int64 fields: BD_OK, else
 * BD_FALLBACK / BD_ERROR. */
static int
bd_rank_fields(PyObject *const *nm, PyObject *rank, PyObject *rank_cls, int64_t *fields)
{
    if ((PyObject *)Py_TYPE(rank) != rank_cls) return BD_FALLBACK;
    static const int names[4] = {N_DP, N_TP, N_PP, N_EP};
    for (int k = 0; k < 4; k++) {
        PyObject *value = NULL;
        int rc = bd_get(rank, nm[names[k]], &value);
        if (rc != BD_OK) return rc;
        rc = bd_as_i64(value, &fields[k]);
        Py_DECREF(value);
        if (rc <= 0) return rc < 0 ? BD_ERROR : BD_FALLBACK;
    }
    return BD_OK;
}

/* 1 when no runtime fragment id of the exact tuple `items` (of objects with an exact str
 * fragment_id) is in `selected`, 0 when some is, with *all set when every one is; BD_FALLBACK
 * (as -2) for unexpected values, -1 on error. */
static int
bd_selection(PyObject *const *nm, PyObject *items, PyObject *selected, int *all, PyObject *rf_cls)
{
    if (!PyTuple_CheckExact(items)) return -2;
    Py_ssize_t n = PyTuple_Size(items), hits = 0;
    if (n < 0) return -1;
    /* rf_cls (NULL: none) in its C-owned runtime layout: an exact instance's fragment_id is its
     * slot, what getattr returns (an empty slot: the AttributeError getattr raises) */
    mr_layout_class rl = {0};
    if (rf_cls != NULL && !mr_runtime_layout(&bd_runtime_memo, &rl, rf_cls)) rl.cls = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(items, i), *fid = NULL;
        if (item == NULL) return -1;
        /* hints (at scale each item, its id str and the set's slot are a chain of misses; the
         * slot cannot be hinted): the item 8 on, the id str of the one 4 on (its slot asked for
         * a round earlier). Borrowed pointers from range-checked positions; nothing decided. */
        if (i + 8 < n) bd_prefetch_whole(PyTuple_GetItem(items, i + 8));
        if (i + 4 < n) {
            PyObject *const *ahead = mr_layout_fields(PyTuple_GetItem(items, i + 4), &rl);
            if (ahead != NULL && ahead[MR_RF_FRAGMENT_ID] != NULL) mr_prefetch_head(ahead[MR_RF_FRAGMENT_ID], 0);
        }
        PyObject *const *rf = mr_layout_fields(item, &rl);
        int rc = rf != NULL ? bd_slot_str(rf[MR_RF_FRAGMENT_ID], &fid) : bd_get_str(item, nm[N_FID], &fid);
        if (rc != BD_OK) return rc == BD_ERROR ? -1 : -2;
        int in = PySet_Contains(selected, fid);
        Py_DECREF(fid);
        if (in < 0) return -1;
        hits += in;
    }
    *all = hits == n;
    return hits == 0 ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------
 * The attested tables carried from step 6 (attest_many) to step 11 (project_attested)
 *
 * attest_many with a snapshot class also builds, right after each attestation (its runtime and
 * placement fragments still in the caches), the table attested_executors builds from it at
 * step 11 (bd_attested_table: the evidence snapshots per worker, sorted), and returns them in a
 * carrier: a capsule holding, in C memory, (attestation, table) per decided binding and the
 * classes they were built with. Python code cannot reach or change what it holds (a capsule is
 * not tracked by the collector and exposes nothing; gc.get_referents of it is empty): only the
 * capsule itself can be dropped or replaced, and project_attested takes a table from it only for
 * the very attestation (by identity: the carrier holds it) and the same classes. What the
 * carrier cannot know is whether a runtime fragment or the attestation changed since: the
 * caller passes it to project_attested only when no code but the package's can have run in
 * between (binding._carried_tables: the sealed call's conditions, checked at step 11). */

#define BD_CARRIER_CAPSULE "mooncake_reshard._native.attested_tables"

typedef struct {
    PyObject *classes[3]; /* snapshot, runtime fragment, placement fragment (or NULL) classes */
    Py_ssize_t n, cap, cursor;
    PyObject **att;   /* attestation (owned) */
    PyObject **table; /* its table (owned) */
} bd_carrier;

static void
bd_carrier_free(bd_carrier *c)
{
    if (c == NULL) return;
    for (Py_ssize_t i = 0; i < c->n; i++) {
        Py_XDECREF(c->att[i]);
        Py_XDECREF(c->table[i]);
    }
    for (int k = 0; k < 3; k++) Py_XDECREF(c->classes[k]);
    PyMem_Free(c->att);
    PyMem_Free(c->table);
    PyMem_Free(c);
}

static void
bd_carrier_capsule_destructor(PyObject *capsule)
{
    bd_carrier_free(PyCapsule_GetPointer(capsule, BD_CARRIER_CAPSULE));
}

/* A new carrier for at most cap tables (NULL with an exception). */
static bd_carrier *
bd_carrier_new(Py_ssize_t cap, PyObject *snap_cls, PyObject *rf_cls, PyObject *pf_cls)
{
    bd_carrier *c = PyMem_Calloc(1, sizeof(bd_carrier));
    if (c == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    size_t n = cap > 0 ? (size_t)cap : 1;
    c->att = mr_alloc_array(n, sizeof(PyObject *));
    c->table = c->att == NULL ? NULL : mr_alloc_array(n, sizeof(PyObject *));
    if (c->table == NULL) {
        bd_carrier_free(c);
        return NULL;
    }
    c->cap = (Py_ssize_t)n;
    c->classes[0] = Py_NewRef(snap_cls);
    c->classes[1] = Py_NewRef(rf_cls);
    c->classes[2] = Py_XNewRef(pf_cls);
    return c;
}

/* Keeps (attestation, table): a new reference to the attestation, the table stolen (dropped when
 * the carrier is full: not carried). */
static void
bd_carrier_put(bd_carrier *c, PyObject *attestation, PyObject *table)
{
    if (c->n >= c->cap) {
        Py_DECREF(table);
        return;
    }
    c->att[c->n] = Py_NewRef(attestation);
    c->table[c->n] = table;
    c->n++;
}

/* attest_many's step: the table of a just-built attestation (of exactly att_cls), kept with it.
 * A table not decided there (BD_FALLBACK) is simply not carried: step 11 builds it. 0, or -1
 * with an exception. */
static int
bd_carrier_add(const bd_table *tb, bd_carrier *c, PyObject *att_cls, PyObject *ev_cls, PyObject *attestation)
{
    if (c->n >= c->cap) return 0;
    PyObject *inputs[4];
    int status = bd_attested_inputs(tb, att_cls, ev_cls, attestation, inputs);
    PyObject *table = NULL;
    if (status == BD_OK) {
        status = bd_attested_table(tb, c->classes[0], c->classes[1], c->classes[2], inputs[1], inputs[2],
                                   inputs[3], &table);
    }
    for (int k = 0; k < 4; k++) Py_XDECREF(inputs[k]);
    if (status == BD_ERROR) return -1;
    if (status != BD_OK) return 0;
    bd_carrier_put(c, attestation, table);
    return 0;
}

/* The carried table of `attestation` built with these classes (borrowed; held by the carrier),
 * or NULL. Parts are asked in about the bindings' order: the search starts after the last hit. */
static PyObject *
bd_carrier_table(bd_carrier *c, PyObject *attestation, PyObject *snap_cls, PyObject *rf_cls, PyObject *pf_cls)
{
    if (c == NULL || c->n == 0 || c->classes[0] != snap_cls || c->classes[1] != rf_cls || c->classes[2] != pf_cls) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < c->n; k++) {
        Py_ssize_t i = (c->cursor + k) % c->n;
        if (c->att[i] == attestation) {
            c->cursor = (i + 1) % c->n;
            return c->table[i];
        }
    }
    return NULL;
}

PyDoc_STRVAR(project_attested_doc,
"project_attested(executor_cls, snapshot_cls, attestation_cls, evidence_cls, runtime_fragment_cls,\n"
"                 rank_cls, attestation_values, placement, parts, part_index, by_key,\n"
"                 attestations, placement_id, placement_digest, selected,\n"
"                 placement_fragment_cls=None, carried=None)\n"
"--\n\n"
"The executors of binding._build_executor_plans_with((placement,), ...) when every bound part\n"
"takes its attested single-worker path: per part of ``parts`` with a binding in ``by_key``\n"
"(keys (placement_id, participant_id)), its attestation (in ``attestations``) is of this\n"
"placement and part, the attested executors (cached in ``attestation_values(attestation)``\n"
"under id(part), else built as attested_executors does and cached) are one worker's, selected\n"
"wholly or not at all by ``selected`` (an exact frozenset, or None), ranks exact rank_cls with\n"
"int64 fields and no (rank, worker) twice; sorted by (dp, pp, ep, tp), stable; every selected id\n"
"emitted. A tuple of the executors, or None when that is not decided here (the Python loop\n"
"then runs and raises the first failure). placement_fragment_cls (optional, None: not given)\n"
"is passed on to attested_executors. carried (optional): the carrier attest_many returned;\n"
"a table it holds for an attestation (built from it at that call, with these classes) is\n"
"used instead of building it again. Pass it only when neither the attestations nor their\n"
"runtime fragments can have changed since (no code but the package's ran in between).");

static PyObject *
bd_project_attested(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs < 15 || nargs > 17) {
        PyErr_SetString(PyExc_TypeError, "project_attested expects 15 to 17 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args, 6) < 0) return NULL;
    PyObject *pf_cls = nargs >= 16 ? args[15] : Py_None;
    if (pf_cls != Py_None && bd_check_heap_types(&pf_cls, 1) < 0) return NULL;
    bd_carrier *carrier = NULL;
    if (nargs == 17 && args[16] != Py_None) {
        carrier = PyCapsule_GetPointer(args[16], BD_CARRIER_CAPSULE); /* TypeError/ValueError otherwise */
        if (carrier == NULL) return NULL;
    }
    PyObject *const *nm = tb.nm;
    PyObject *rank_cls = args[5], *values_of = args[6], *placement = args[7], *parts = args[8];
    PyObject *part_index = args[9], *by_key = args[10], *attestations = args[11], *placement_id = args[12];
    PyObject *digest = args[13], *selected = args[14];
    if (!PyCallable_Check(values_of)) {
        PyErr_SetString(PyExc_TypeError, "project_attested: attestation_values must be callable");
        return NULL;
    }
    if (!PyTuple_CheckExact(parts) || !PyDict_CheckExact(part_index) || !PyDict_CheckExact(by_key)
        || !PyDict_CheckExact(attestations) || !PyUnicode_CheckExact(placement_id)
        || (selected != Py_None && !PyFrozenSet_CheckExact(selected))) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n_parts = PyTuple_Size(parts);
    if (n_parts < 0) return NULL;
    int status = BD_ERROR;
    PyObject *out = PyList_New(0), *result = NULL;
    PyObject *snapshots_key = PyUnicode_InternFromString("snapshots_by_worker");
    bd_exec_order *order = NULL;
    size_t n_order = 0, order_cap = 0;
    /* every executor emitted so far has only ids already found in selected (see below) */
    int emitted_selected = 1;
    /* The emitted ids (only read with selected): by value in a C table (bd_strtab_add decides as
     * a set of exact str does) with room for as many as selected holds; more distinct ids than
     * that cannot be exactly the selection (the final check declines: none are added past it).
     * The ids are borrowed from the executors' fragment_ids tuples, each held in `held` (C-owned:
     * no Python code can reach it; attestation_values, Python, runs in this call, and a tuple
     * cannot change, so the ids stay alive). */
    bd_strslot *emitted = NULL;
    size_t emitted_mask = 0;
    Py_ssize_t n_selected = 0, n_emitted = 0;
    int emitted_over = 0;
    bd_held held = {NULL, 0, 0};
    if (out == NULL || snapshots_key == NULL) goto done;
    if (selected != Py_None) {
        n_selected = PySet_Size(selected);
        if (n_selected < 0) goto done;
        /* at most n_selected entries: room for 3/4 of them at bd_strtab_new's half load is a
         * table at most 2/3 full (half the size of a half-full one at Kimi 61: 16 MiB there) */
        emitted = bd_strtab_new(n_selected - n_selected / 4, &emitted_mask);
        if (emitted == NULL) goto done;
    }
    status = BD_OK;
    for (Py_ssize_t p = 0; p < n_parts && status == BD_OK; p++) {
        PyObject *part = PyTuple_GetItem(parts, p);
        PyObject *participant = NULL, *key = NULL, *attestation = NULL, *fragments = NULL, *state = NULL;
        PyObject *values = NULL, *part_id = NULL, *rows = NULL, *built = NULL, *rank = NULL;
        PyObject *evidence = NULL, *evidence_fragments = NULL, *fragment_ids = NULL, *exec_rank = NULL;
        if (part == NULL) { status = BD_ERROR; break; }
        /* every evidence fragment's id is in selected (the first selection check below) */
        int evidence_selected = 0;
        status = bd_get_str(part, nm[N_PARTICIPANT_ID], &participant);
        if (status != BD_OK) goto next;
        key = PyTuple_Pack(2, placement_id, participant);
        if (key == NULL) { status = BD_ERROR; goto next; }
        PyObject *binding = PyDict_GetItemWithError(by_key, key); /* borrowed */
        if (binding == NULL) {
            status = PyErr_Occurred() ? BD_ERROR : BD_OK; /* no binding of this part: skipped */
            goto next;
        }
        attestation = PyDict_GetItemWithError(attestations, key); /* borrowed */
        if (attestation == NULL) {
            status = PyErr_Occurred() ? BD_ERROR : BD_FALLBACK; /* validated in Python */
            goto next;
        }
        Py_INCREF(attestation);
        status = bd_get(part, nm[N_FRAGMENTS], &fragments);
        if (status != BD_OK) goto next;
        if (!PyTuple_CheckExact(fragments)) { status = BD_FALLBACK; goto next; }
        if (PyTuple_Size(fragments) == 0) goto next; /* nothing to project */
        if ((PyObject *)Py_TYPE(attestation) != args[2]) { status = BD_FALLBACK; goto next; }
        status = bd_dict_of(attestation, &state);
        if (status != BD_OK) goto next;
        PyObject *attested_placement = PyDict_GetItemWithError(state, nm[N_PLACEMENT]); /* borrowed */
        PyObject *indexed = attested_placement == NULL ? NULL : PyDict_GetItemWithError(part_index, participant);
        if (PyErr_Occurred()) { status = BD_ERROR; goto next; }
        if (attested_placement != placement || indexed != part) { status = BD_FALLBACK; goto next; }
        if (selected != Py_None) {
            status = bd_dget(state, nm[N_EVIDENCE], &evidence);
            if (status == BD_OK) status = bd_get(evidence, nm[N_FRAGMENTS], &evidence_fragments);
            if (status != BD_OK) goto next;
            int all = 0;
            int none = bd_selection(nm, evidence_fragments, selected, &all, args[4]);
            if (none < 0) { status = none == -1 ? BD_ERROR : BD_FALLBACK; goto next; }
            if (none) goto next; /* no attested snapshot of this part is selected */
            evidence_selected = all;
        }
        /* The attested rows: cached under id(part), else built and cached. */
        values = PyObject_CallFunctionObjArgs(values_of, attestation, NULL);
        if (values == NULL) { status = BD_ERROR; goto next; }
        if (!PyDict_CheckExact(values)) { status = BD_FALLBACK; goto next; }
        part_id = PyLong_FromVoidPtr(part);
        if (part_id == NULL) { status = BD_ERROR; goto next; }
        rows = PyDict_GetItemWithError(values, part_id); /* borrowed */
        if (rows != NULL) {
            Py_INCREF(rows);
        }
        else {
            if (PyErr_Occurred()) { status = BD_ERROR; goto next; }
            int known = PyDict_Contains(values, snapshots_key);
            if (known != 0) { status = known < 0 ? BD_ERROR : BD_FALLBACK; goto next; }
            status = bd_get(part, nm[N_RANK], &rank);
            if (status != BD_OK) goto next;
            PyObject *const call[11] = {args[0], args[1], args[2], args[3], args[4], attestation,
                                        placement_id, participant, digest, rank, pf_cls};
            PyObject *carried = bd_carrier_table(carrier, attestation, args[1], args[4],
                                                 pf_cls == Py_None ? NULL : pf_cls); /* borrowed */
            built = bd_attested_executors_with(self, call, 11, carried);
            if (built == NULL) { status = BD_ERROR; goto next; }
            if (built == Py_None || !PyTuple_CheckExact(built) || PyTuple_Size(built) != 2) {
                status = BD_FALLBACK;
                goto next;
            }
            rows = PyTuple_GetItem(built, 1);
            if (rows == NULL) { status = BD_ERROR; goto next; }
            Py_INCREF(rows);
            if (PyDict_SetItem(values, snapshots_key, PyTuple_GetItem(built, 0)) < 0
                || PyDict_SetItem(values, part_id, rows) < 0) {
                status = BD_ERROR;
                goto next;
            }
        }
        if (!PyTuple_CheckExact(rows) || PyTuple_Size(rows) != 1) { status = BD_FALLBACK; goto next; }
        PyObject *row = PyTuple_GetItem(rows, 0);
        if (row == NULL) { status = BD_ERROR; goto next; }
        if (!PyTuple_CheckExact(row) || PyTuple_Size(row) != 3) { status = BD_FALLBACK; goto next; }
        PyObject *worker = PyTuple_GetItem(row, 0), *all_snapshots = PyTuple_GetItem(row, 1);
        PyObject *executor = PyTuple_GetItem(row, 2);
        if (worker == NULL || all_snapshots == NULL || executor == NULL) { status = BD_ERROR; goto next; }
        if (!PyUnicode_CheckExact(worker) || (PyObject *)Py_TYPE(executor) != args[0]) {
            status = BD_FALLBACK;
            goto next;
        }
        /* Rows built in this call from this evidence (built) when every evidence fragment's id
         * is in selected: the snapshots (at least one: attested_executors builds no empty
         * executor) and the executor's fragment ids are the ids of some of those very evidence
         * fragments, read in this call (no Python code runs in it), so all of them are in
         * selected: the check below would find them all. Cached rows are checked as before. */
        int rows_selected = built != NULL && evidence_selected;
        if (selected != Py_None && !rows_selected) {
            int all = 0;
            int none = bd_selection(nm, all_snapshots, selected, &all, NULL);
            if (none < 0) { status = none == -1 ? BD_ERROR : BD_FALLBACK; goto next; }
            if (none) goto next; /* nothing selected on this worker */
            if (!all) { status = BD_FALLBACK; goto next; } /* a partial selection: Python */
        }
        /* The executor's rank is the part's (its (rank, worker) key and its sort key are then
         * one value; a rank swapped since the rows were cached declines). */
        if (rank == NULL) {
            status = bd_get(part, nm[N_RANK], &rank);
            if (status != BD_OK) goto next;
        }
        status = bd_get(executor, nm[N_RANK], &exec_rank);
        if (status != BD_OK) goto next;
        if (exec_rank != rank) { status = BD_FALLBACK; goto next; }
        {
            bd_exec_order entry = {{0, 0, 0, 0}, 0, worker};
            int64_t fields[4] = {0, 0, 0, 0};
            status = bd_rank_fields(nm, rank, rank_cls, fields);
            if (status != BD_OK) goto next;
            entry.key[0] = fields[0]; /* dp */
            entry.key[1] = fields[2]; /* pp */
            entry.key[2] = fields[3]; /* ep */
            entry.key[3] = fields[1]; /* tp */
            if (n_order == order_cap) {
                size_t grown = order_cap ? 2 * order_cap : 16;
                size_t bytes;
                if (__builtin_mul_overflow(grown, sizeof(bd_exec_order), &bytes)) {
                    PyErr_NoMemory();
                    status = BD_ERROR;
                    goto next;
                }
                bd_exec_order *larger = PyMem_Realloc(order, bytes);
                if (larger == NULL) {
                    PyErr_NoMemory();
                    status = BD_ERROR;
                    goto next;
                }
                order = larger;
                order_cap = grown;
            }
            entry.index = (Py_ssize_t)n_order;
            order[n_order] = entry;
        }
        /* emitted ids: the executor's own (exact str) */
        status = bd_get(executor, nm[N_FRAGMENT_IDS], &fragment_ids);
        if (status != BD_OK) goto next;
        if (!PyTuple_CheckExact(fragment_ids)) { status = BD_FALLBACK; goto next; }
        if (emitted != NULL && bd_held_push(&held, fragment_ids) < 0) { status = BD_ERROR; goto next; }
        for (Py_ssize_t k = 0; k < PyTuple_Size(fragment_ids) && status == BD_OK; k++) {
            PyObject *fid = PyTuple_GetItem(fragment_ids, k);
            if (fid == NULL) status = BD_ERROR;
            else if (!PyUnicode_CheckExact(fid)) status = BD_FALLBACK;
            else if (emitted != NULL && !emitted_over) {
                if (k + 8 < PyTuple_Size(fragment_ids)) { /* hints: the head of the id 12 on (its hash
                                                           * is read 4 rounds later), the slot of the id 8 on */
                    if (k + 12 < PyTuple_Size(fragment_ids)) mr_prefetch_head(PyTuple_GetItem(fragment_ids, k + 12), 0);
                    bd_strtab_prefetch(emitted, emitted_mask, PyTuple_GetItem(fragment_ids, k + 8));
                }
                int added = n_emitted < n_selected ? bd_strtab_add(emitted, emitted_mask, fid)
                                                   : bd_strtab_has(emitted, emitted_mask, fid) ? 0 : 2;
                if (added < 0) status = BD_ERROR;
                else if (added == 2) emitted_over = 1; /* a distinct id past the selection's size */
                else n_emitted += added;
            }
        }
        if (status == BD_OK && PyList_Append(out, executor) < 0) status = BD_ERROR;
        if (status == BD_OK) n_order++;
        if (!rows_selected) emitted_selected = 0;
    next:
        Py_XDECREF(participant);
        Py_XDECREF(key);
        Py_XDECREF(attestation);
        Py_XDECREF(fragments);
        Py_XDECREF(state);
        Py_XDECREF(values);
        Py_XDECREF(part_id);
        Py_XDECREF(rows);
        Py_XDECREF(built);
        Py_XDECREF(rank);
        Py_XDECREF(evidence);
        Py_XDECREF(evidence_fragments);
        Py_XDECREF(fragment_ids);
        Py_XDECREF(exec_rank);
    }
    if (status != BD_OK) goto done;
    /* every selected id emitted (emitted ids are a subset of the selection here) */
    if (selected != Py_None && (emitted_over || n_emitted != n_selected)) { status = BD_FALLBACK; goto done; }
    /* each emitted id found in selected already (emitted_selected): as many as selected holds
     * is every one of them; else each is looked up (held by `held`; a lookup may run the __eq__
     * of a selected item that is not an exact str) */
    if (selected != Py_None && !emitted_selected) {
        for (size_t slot = 0; slot <= emitted_mask && status == BD_OK; slot++) {
            if (emitted[slot].str == NULL) continue;
            int in = PySet_Contains(selected, emitted[slot].str);
            if (in <= 0) status = in < 0 ? BD_ERROR : BD_FALLBACK;
        }
        if (status != BD_OK) goto done;
    }
    /* sorted by rank (dp, pp, ep, tp), stable; no (rank, worker) twice (equal ranks are
     * adjacent once sorted) */
    {
        Py_ssize_t n = PyList_Size(out);
        if (n < 0) { status = BD_ERROR; goto done; }
        if ((size_t)n != n_order) {
            PyErr_SetString(PyExc_RuntimeError, "project_attested: executor table changed");
            status = BD_ERROR;
            goto done;
        }
        if (n > 1) qsort(order, (size_t)n, sizeof(bd_exec_order), bd_compare_exec_order);
        for (Py_ssize_t i = 1; i < n && status == BD_OK; i++) {
            for (Py_ssize_t j = i - 1; j >= 0 && status == BD_OK; j--) {
                if (memcmp(order[j].key, order[i].key, sizeof(order[i].key)) != 0) break;
                int cmp = bd_compare(order[j].worker, order[i].worker);
                if (cmp == -2) status = BD_ERROR;
                else if (cmp == 0) status = BD_FALLBACK; /* a duplicate executor: Python raises */
            }
        }
        if (status != BD_OK) goto done;
        status = BD_ERROR;
        result = PyTuple_New(n);
        if (result == NULL) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *executor = PyList_GetItem(out, order[i].index);
            if (executor == NULL) goto done;
            Py_INCREF(executor);
            if (PyTuple_SetItem(result, i, executor) < 0) goto done;
        }
        status = BD_OK;
    }
done:
    PyMem_Free(order);
    Py_XDECREF(out);
    PyMem_Free(emitted);
    bd_held_clear(&held);
    Py_XDECREF(snapshots_key);
    if (status == BD_OK) return result;
    Py_XDECREF(result);
    if (status == BD_ERROR) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "project_attested failed");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------
 * attest_many: attest_binding over one side's bindings (nothing is remembered on them) */

PyDoc_STRVAR(attest_many_doc,
"attest_many(attestation_cls, evidence_cls, runtime_fragment_cls, placement_fragment_cls,\n"
"            tensor_cls, binding_cls, placement, part_index, bindings, resource_id, placement_id,\n"
"            placement_digest, revision, snapshot_cls=None, part_cls=None)\n"
"--\n\n"
"attestation._attest_many's fused path over a tuple of bindings in one call: per binding, its\n"
"attestation when the binding is an exact binding_cls, its participant has a part in\n"
"``part_index`` and attest_binding decides it with the part's fragments and tensors (every\n"
"binding is validated on every call: nothing is read from or written to the bindings).\n"
"With part_cls (a class, not None), a part must be exactly of it, its fragments and tensors read from\n"
"its plain instance dict (no Python code runs between the bindings), and the bindings share\n"
"the tensors loaded so far; without it they are read by getattr, which may run code, and\n"
"each binding loads its tensors itself.\n"
"None in the list for every binding not decided here (the caller attests it in Python, in\n"
"order, so the first failure is raised there). None instead of a list for a bindings value\n"
"that is not a tuple, or a part_index that is not a dict. With snapshot_cls (not None), a pair\n"
"(that list, carrier): per decided attestation the carrier holds the table attested_executors\n"
"would build from it (snapshots of that class), built while its fragments are in the caches,\n"
"for project_attested's ``carried`` (see there when it may be passed).");

static PyObject *
bd_attest_many(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs < 13 || nargs > 15) {
        PyErr_SetString(PyExc_TypeError, "attest_many expects 13 to 15 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args, 6) < 0) return NULL;
    PyObject *const *nm = tb.nm;
    PyObject *binding_cls = args[5], *placement = args[6], *part_index = args[7], *bindings = args[8];
    PyObject *snap_cls = nargs >= 14 && args[13] != Py_None ? args[13] : NULL;
    if (snap_cls != NULL && bd_check_heap_types(&snap_cls, 1) < 0) return NULL;
    PyObject *part_cls = nargs == 15 && args[14] != Py_None ? args[14] : NULL;
    if (part_cls != NULL && bd_check_heap_types(&part_cls, 1) < 0) return NULL;
    /* part_index is probed with each binding's participant id: a plain dict only, and the ids
     * exact strs (below), so that no probe runs Python code (plain_dict.h; AUDIT5 F5) */
    if (!PyTuple_CheckExact(bindings) || !pd_plain_keys(part_index)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_Size(bindings);
    if (n < 0) return NULL;
    bd_carrier *carrier = NULL;
    if (snap_cls != NULL) {
        carrier = bd_carrier_new(n, snap_cls, args[2], args[3]);
        if (carrier == NULL) return NULL;
    }
    PyObject *out = mr_gc_hide(PyList_New(n)); /* out of the collector until full (gctrack.h) */
    if (out == NULL) {
        bd_carrier_free(carrier);
        return NULL;
    }
    /* the tensors loaded so far, shared by the bindings' attest_binding (bd_tensor_memo); only
     * with part_cls: without it a part's getattr may run code between two bindings (a property
     * of a part subclass), which could edit a tensor the memo has loaded */
    bd_tensor_memo memo;
    memset(&memo, 0, sizeof(memo));
    memo.off = part_cls == NULL;
    /* the carried tables, built in each binding's pair loop where they can be (bd_pair_snaps) */
    bd_pair_snaps sb;
    memset(&sb, 0, sizeof(sb));
    sb.snap_cls = snap_cls;
    if (snap_cls != NULL && bd_snapshot_layout(&tb, snap_cls, &sb.lc) < 0) {
        bd_carrier_free(carrier);
        Py_DECREF(out);
        return NULL;
    }
    bd_pair_snaps_direct(&tb, &sb);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *binding = PyTuple_GetItem(bindings, i);
        PyObject *state = NULL, *participant = NULL, *fragments = NULL, *tensors = NULL, *fused = NULL;
        int status = BD_FALLBACK;
        if (binding == NULL) goto fail;
        if ((PyObject *)Py_TYPE(binding) != binding_cls) goto next;
        status = bd_dict_of(binding, &state);
        if (status != BD_OK) goto next;
        status = bd_dget(state, nm[N_PARTICIPANT_ID], &participant);
        if (status != BD_OK) goto next;
        status = BD_FALLBACK;
        if (!PyUnicode_CheckExact(participant)) goto next;
        PyObject *part = PyDict_GetItemWithError(part_index, participant); /* borrowed */
        if (part == NULL) {
            status = PyErr_Occurred() ? BD_ERROR : BD_FALLBACK;
            goto next;
        }
        Py_INCREF(part);
        if (part_cls == NULL) {
            status = bd_get(part, nm[N_FRAGMENTS], &fragments);
            if (status == BD_OK) status = bd_get(part, nm[N_TENSORS], &tensors);
        } else if ((PyObject *)Py_TYPE(part) == part_cls) {
            /* its own plain dict, as the binding's (a part of another class: attested in Python) */
            PyObject *part_state = NULL;
            status = bd_dict_of(part, &part_state);
            if (status == BD_OK) status = bd_dget(part_state, nm[N_FRAGMENTS], &fragments);
            if (status == BD_OK) status = bd_dget(part_state, nm[N_TENSORS], &tensors);
            Py_XDECREF(part_state);
        }
        Py_DECREF(part);
        if (status != BD_OK) goto next;
        {
            PyObject *const call[13] = {args[0], args[1], args[2], args[3], args[4], placement, binding,
                                        fragments, tensors, args[9], args[10], args[11], args[12]};
            bd_pair_snaps_clear(&sb);
            sb.on = carrier != NULL && sb.lc.cls != NULL && sb.lc.cls == snap_cls;
            fused = bd_attest_binding_with(self, call, 13, &memo, carrier != NULL ? &sb : NULL, 0);
            memo.bindings++;
            if (memo.bindings >= BD_MEMO_TRIAL && memo.hits == 0) memo.off = 1;
        }
        if (fused == NULL) {
            status = BD_ERROR;
            goto next;
        }
        if (fused == Py_None) {
            status = BD_FALLBACK;
            goto next;
        }
        status = BD_OK;
        if (carrier != NULL && sb.table != NULL) { /* built in the pair loop */
            bd_carrier_put(carrier, fused, sb.table);
            sb.table = NULL;
        } else if (carrier != NULL && bd_carrier_add(&tb, carrier, args[0], args[1], fused) < 0) {
            status = BD_ERROR;
        }
    next:
        Py_XDECREF(state);
        Py_XDECREF(participant);
        Py_XDECREF(fragments);
        Py_XDECREF(tensors);
        if (status == BD_ERROR) {
            Py_XDECREF(fused);
            goto fail;
        }
        if (status != BD_OK) {
            Py_XDECREF(fused);
            fused = Py_NewRef(Py_None); /* attested in Python */
        }
        PyList_SetItem(out, i, fused); /* steals; the slot is empty */
    }
    bd_tensor_memo_free(&memo);
    bd_pair_snaps_clear(&sb);
    mr_gc_show(out); /* full */
    if (carrier == NULL) return out;
    {
        PyObject *capsule = PyCapsule_New(carrier, BD_CARRIER_CAPSULE, bd_carrier_capsule_destructor);
        if (capsule == NULL) {
            bd_carrier_free(carrier);
            Py_DECREF(out);
            return NULL;
        }
        PyObject *pair = PyTuple_Pack(2, out, capsule);
        Py_DECREF(out);
        Py_DECREF(capsule);
        return pair;
    }
fail:
    bd_tensor_memo_free(&memo);
    bd_pair_snaps_clear(&sb);
    Py_DECREF(out);
    bd_carrier_free(carrier);
    return NULL;
}

/* ------------------------------------------------------------------------------------------
 * bind_side_ids: binding step 6's identity loop over one side's given bindings */

PyDoc_STRVAR(bind_side_ids_doc,
"bind_side_ids(binding_cls, runtime_fragment_cls, given)\n"
"--\n\n"
"binding._bind_side's loop over a tuple of given bindings in one call: the set of their\n"
"participant ids when every binding is an exact binding_cls whose placement_id and\n"
"participant_id (read from its own dict) are exact str, no two bindings share the pair\n"
"(placement_id, participant_id), every fragments value is an exact tuple of exact\n"
"runtime_fragment_cls objects with exact str fragment_id, and no fragment_id repeats across\n"
"the side. None when not decided here (the Python loop runs and raises the first failure).");

/* bind_side_ids' fragment ids met so far (the Python loop's set, which only tells whether an id
 * repeats): exact strs by hash (open addressing, load at most two thirds as the set's, grown by
 * doubling), sized for the side's fragment count up front, where the set would be rehashed about
 * log2(n) times (at 10^6 fragments each move a cache miss). The keys are borrowed: the call runs with the
 * collector paused and no Python code, so the runtime fragments (held by the given bindings)
 * keep their ids. */
typedef struct {
    Py_hash_t hash;
    PyObject *key; /* NULL: empty */
} bd_idset_slot;

typedef struct {
    bd_idset_slot *slots;
    size_t mask, count;
} bd_idset;

/* Zeroed slots for capacity (a power of two), the entries placed again; 0, or -1 with MemoryError. */
static int
bd_idset_resize(bd_idset *set, size_t capacity)
{
    bd_idset_slot *slots = mr_alloc_array(capacity, sizeof(bd_idset_slot));
    if (slots == NULL) return -1;
    memset(slots, 0, capacity * sizeof(bd_idset_slot));
    size_t mask = capacity - 1;
    for (size_t k = 0; set->slots != NULL && k <= set->mask; k++) {
        if (set->slots[k].key == NULL) continue;
        size_t i = (size_t)set->slots[k].hash & mask;
        while (slots[i].key != NULL) i = (i + 1) & mask;
        slots[i] = set->slots[k];
    }
    PyMem_Free(set->slots);
    set->slots = slots;
    set->mask = mask;
    return 0;
}

/* An empty set for about expected ids; 0, or -1 with MemoryError. */
static int
bd_idset_init(bd_idset *set, size_t expected)
{
    size_t capacity = 64;
    while ((capacity / 3) * 2 < expected + 1) {
        if (capacity > SIZE_MAX / 4 / sizeof(bd_idset_slot)) {
            PyErr_NoMemory();
            return -1;
        }
        capacity *= 2;
    }
    set->slots = NULL;
    set->mask = 0;
    set->count = 0;
    return bd_idset_resize(set, capacity);
}

/* Adds the exact str id: 1 added, 0 an equal str is there (the set's add would leave it as it
 * is: same hash and ==, which for two exact strs runs no code), -1 error. */
static int
bd_idset_add(bd_idset *set, PyObject *id)
{
    Py_hash_t hash = PyObject_Hash(id);
    if (hash == -1) return -1;
    if (set->count + 1 > ((set->mask + 1) / 3) * 2) {
        if (set->mask + 1 > SIZE_MAX / 4 / sizeof(bd_idset_slot)) {
            PyErr_NoMemory();
            return -1;
        }
        if (bd_idset_resize(set, (set->mask + 1) * 2) < 0) return -1;
    }
    size_t i = (size_t)hash & set->mask;
    while (set->slots[i].key != NULL) {
        if (set->slots[i].key == id) return 0;
        if (set->slots[i].hash == hash) {
            int cmp = bd_compare(set->slots[i].key, id);
            if (cmp == -2) return -1;
            if (cmp == 0) return 0;
        }
        i = (i + 1) & set->mask;
    }
    set->slots[i].hash = hash;
    set->slots[i].key = id;
    set->count++;
    return 1;
}

/* A hint: the number of fragments of the given bindings that are exact binding_cls objects with
 * an exact tuple fragments value (read as bd_side_binding reads them), counted up to the first
 * other one. Nothing is decided here: an error is cleared (the read in turn meets the same state
 * and decides). */
static size_t
bd_side_count(PyObject *const *nm, PyObject *given, Py_ssize_t n, PyObject *binding_cls)
{
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *binding = PyTuple_GetItem(given, i), *dict = NULL, *fragments = NULL;
        if (binding == NULL || (PyObject *)Py_TYPE(binding) != binding_cls) break;
        int status = bd_dict_of(binding, &dict);
        if (status == BD_OK) status = bd_dget(dict, nm[N_FRAGMENTS], &fragments);
        Py_XDECREF(dict);
        if (status == BD_OK && PyTuple_CheckExact(fragments)) total += (size_t)PyTuple_Size(fragments);
        else status = BD_FALLBACK;
        Py_XDECREF(fragments);
        if (status != BD_OK) break;
    }
    if (PyErr_Occurred()) PyErr_Clear();
    return total;
}

/* Hints for bd_side_binding's fragment loop before fragment i, in three stages so that each read
 * finds its line asked for a few fragments earlier: the lines of fragment i + 12 that the loop
 * reads (its header and fragment id slot: only addresses computed); the fragment id str of
 * fragment i + 6 (its slot read when it is an exact runtime fragment in its C-owned layout, whose
 * header was asked for six fragments ago); the ids table's home slot of the fragment id of
 * fragment i + 3 (its hash: cached on the str, or computed from it as bd_idset_add would; an
 * exact str, no code runs). Borrowed pointers, nothing kept or decided; never raises. */
static inline __attribute__((always_inline)) void
bd_side_prefetch(PyObject *fragments, Py_ssize_t i, Py_ssize_t n, const bd_idset *ids)
{
    if (i + 12 < n) {
        const PyObject *far = PyTuple_GetItem(fragments, i + 12);
        __builtin_prefetch(far);
        __builtin_prefetch((const void *)((uintptr_t)far + offsetof(mr_layout_object, fields)
                                          + (MR_RF_FRAGMENT_ID + 1) * sizeof(PyObject *) - 1));
    }
    PyObject *memo_cls = bd_runtime_memo.memo.cls;
    if (memo_cls == NULL) return;
    if (i + 6 < n) {
        PyObject *near = PyTuple_GetItem(fragments, i + 6);
        if (near != NULL && (PyObject *)Py_TYPE(near) == memo_cls) {
            PyObject *fid = ((mr_layout_object *)near)->fields[MR_RF_FRAGMENT_ID];
            if (fid != NULL) mr_prefetch_head(fid, 0);
        }
    }
    if (i + 3 < n) {
        PyObject *next = PyTuple_GetItem(fragments, i + 3);
        if (next != NULL && (PyObject *)Py_TYPE(next) == memo_cls) {
            PyObject *fid = ((mr_layout_object *)next)->fields[MR_RF_FRAGMENT_ID];
            if (fid != NULL && PyUnicode_CheckExact(fid)) {
                Py_hash_t hash = PyObject_Hash(fid);
                if (hash == -1) PyErr_Clear();
                else __builtin_prefetch(&ids->slots[(size_t)hash & ids->mask], 1);
            }
        }
    }
}

/* One binding of bind_side_ids: its key and participant added, its fragment ids added to ids;
 * BD_FALLBACK at anything the Python loop would read differently or reject. */
static int
bd_side_binding(PyObject *const *nm, PyObject *binding, PyObject *binding_cls, PyObject *rf_cls, PyObject *keys,
                PyObject *participants, bd_idset *ids)
{
    if ((PyObject *)Py_TYPE(binding) != binding_cls) return BD_FALLBACK;
    PyObject *dict = NULL, *placement_id = NULL, *participant_id = NULL, *fragments = NULL, *key = NULL;
    int status = bd_dict_of(binding, &dict);
    /* Exact str values: their hash and equality run no user code (the set operations below
     * decide what the Python loop's set operations do). */
    if (status == BD_OK) status = bd_dget(dict, nm[N_PARTICIPANT_ID], &participant_id);
    if (status == BD_OK && !PyUnicode_CheckExact(participant_id)) status = BD_FALLBACK;
    if (status == BD_OK) status = bd_dget(dict, nm[N_PLACEMENT_ID], &placement_id);
    if (status == BD_OK && !PyUnicode_CheckExact(placement_id)) status = BD_FALLBACK;
    if (status == BD_OK) status = bd_dget(dict, nm[N_FRAGMENTS], &fragments);
    if (status == BD_OK && !PyTuple_CheckExact(fragments)) status = BD_FALLBACK;
    if (status == BD_OK) {
        key = PyTuple_Pack(2, placement_id, participant_id);
        int seen = key == NULL ? -1 : PySet_Contains(keys, key);
        if (seen != 0) status = seen > 0 ? BD_FALLBACK : BD_ERROR;
        else if (PySet_Add(keys, key) < 0 || PySet_Add(participants, participant_id) < 0) status = BD_ERROR;
    }
    Py_ssize_t n = status == BD_OK ? PyTuple_Size(fragments) : 0;
    if (n < 0) status = BD_ERROR;
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *fragment = PyTuple_GetItem(fragments, i);
        if (fragment == NULL) {
            status = BD_ERROR;
            break;
        }
        bd_side_prefetch(fragments, i, n, ids); /* hints */
        if ((PyObject *)Py_TYPE(fragment) != rf_cls) {
            status = BD_FALLBACK;
            break;
        }
        PyObject *fdict = NULL, *fid = NULL;
        status = bd_runtime_state(fragment, &fdict);
        if (status == BD_OK) status = bd_rget(nm, fdict, N_FID, &fid);
        Py_XDECREF(fdict);
        if (status != BD_OK) break;
        if (!PyUnicode_CheckExact(fid)) status = BD_FALLBACK;
        else {
            int added = bd_idset_add(ids, fid); /* (borrowed: bd_idset) */
            if (added < 0) status = BD_ERROR;
            else if (added == 0) status = BD_FALLBACK; /* a repeated id */
        }
        Py_DECREF(fid);
    }
    Py_XDECREF(dict);
    Py_XDECREF(placement_id);
    Py_XDECREF(participant_id);
    Py_XDECREF(fragments);
    Py_XDECREF(key);
    return status;
}

static PyObject *
bd_bind_side_ids(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "bind_side_ids expects 3 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args, 2) < 0) return NULL;
    PyObject *given = args[2];
    if (!PyTuple_CheckExact(given)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_Size(given);
    if (n < 0) return NULL;
    /* the collector paused: no Python code runs while ids borrows its keys (bd_idset) */
    const int collector_was_enabled = PyGC_Disable();
    bd_idset ids = {NULL, 0, 0};
    PyObject *keys = PySet_New(NULL), *participants = PySet_New(NULL);
    int status = keys == NULL || participants == NULL ? BD_ERROR : BD_OK;
    if (status == BD_OK && bd_idset_init(&ids, bd_side_count(tb.nm, given, n, args[0])) < 0) {
        PyErr_Clear(); /* (the count is a hint: a small set, grown as the ids come) */
        if (bd_idset_init(&ids, 0) < 0) status = BD_ERROR;
    }
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *binding = PyTuple_GetItem(given, i);
        status = binding == NULL ? BD_ERROR
                                 : bd_side_binding(tb.nm, binding, args[0], args[1], keys, participants, &ids);
    }
    PyMem_Free(ids.slots);
    Py_XDECREF(keys);
    if (collector_was_enabled) PyGC_Enable();
    if (status == BD_OK) return participants;
    Py_XDECREF(participants);
    if (status == BD_ERROR) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------
 * operations_snapshots / bound_fragment_ids: binding steps 5 and 11 over the operations */

/* fragment (the op's field `which`) is an exact fragment_cls whose placement fragment id (exact
 * str) maps to this very object in index: BD_OK, else BD_FALLBACK / BD_ERROR. */
static int
bd_indexed_same(PyObject *const *nm, PyObject *op, int which, PyObject *fragment_cls, PyObject *index)
{
    PyObject *fragment = NULL, *pfid = NULL;
    int status = bd_get(op, nm[which], &fragment);
    if (status != BD_OK) return status;
    if ((PyObject *)Py_TYPE(fragment) != fragment_cls) status = BD_FALLBACK;
    if (status == BD_OK) status = bd_get_str(fragment, nm[N_PFID], &pfid);
    if (status == BD_OK) {
        PyObject *indexed = PyDict_GetItemWithError(index, pfid); /* borrowed */
        if (indexed != fragment) status = indexed == NULL && PyErr_Occurred() ? BD_ERROR : BD_FALLBACK;
    }
    Py_XDECREF(pfid);
    Py_DECREF(fragment);
    return status;
}

PyDoc_STRVAR(operations_snapshots_doc,
"operations_snapshots(operations, region_cls, fragment_cls, target_index, source_index)\n"
"--\n\n"
"Binding step 5 for a placement-sourced plan: True when every operation of the tuple is an\n"
"exact region_cls whose target and source are exact fragment_cls objects that are the very\n"
"entries of target_index and source_index (dicts by placement fragment id, exact str ids), so\n"
"every snapshot check passes. None when that is not decided here (the Python loop then runs\n"
"and raises the first failure).");

static PyObject *
bd_operations_snapshots(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "operations_snapshots expects 5 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args + 1, 2) < 0) return NULL;
    PyObject *operations = args[0], *region_cls = args[1], *fragment_cls = args[2];
    PyObject *target_index = args[3], *source_index = args[4];
    if (!PyTuple_CheckExact(operations) || !PyDict_CheckExact(target_index) || !PyDict_CheckExact(source_index)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyTuple_Size(operations);
    if (n < 0) return NULL;
    int status = BD_OK;
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *op = PyTuple_GetItem(operations, i);
        if (op == NULL) return NULL;
        if ((PyObject *)Py_TYPE(op) != region_cls) Py_RETURN_NONE;
        status = bd_indexed_same(tb.nm, op, N_TARGET, fragment_cls, target_index);
        if (status == BD_OK) status = bd_indexed_same(tb.nm, op, N_SOURCE, fragment_cls, source_index);
    }
    if (status == BD_ERROR) return NULL;
    if (status == BD_FALLBACK) Py_RETURN_NONE;
    Py_RETURN_TRUE;
}

/* Add fragment.binding.fragment_id (exact str) to ids: BD_OK, else BD_FALLBACK / BD_ERROR. */
static int
bd_add_bound_id(PyObject *const *nm, PyObject *fragment, PyObject *ids)
{
    PyObject *binding = NULL, *fid = NULL;
    int status = bd_get(fragment, nm[N_BINDING], &binding);
    if (status == BD_OK) status = bd_get_str(binding, nm[N_FID], &fid);
    if (status == BD_OK && PySet_Add(ids, fid) < 0) status = BD_ERROR;
    Py_XDECREF(binding);
    Py_XDECREF(fid);
    return status;
}

PyDoc_STRVAR(bound_fragment_ids_doc,
"bound_fragment_ids(operations, region_cls, bound_cls, stored_cls)\n"
"--\n\n"
"Binding step 11's selections over a list or tuple of exact region_cls operations with exact\n"
"bound_cls targets and exact bound_cls or stored_cls sources: (frozenset of\n"
"op.source.binding.fragment_id for the bound sources, frozenset of\n"
"op.target.binding.fragment_id), exact str ids. None when that is not decided here (another\n"
"class, a missing field).");

static PyObject *
bd_bound_fragment_ids(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "bound_fragment_ids expects 4 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args + 1, 3) < 0) return NULL;
    PyObject *region_cls = args[1], *bound_cls = args[2], *stored_cls = args[3];
    if (!PyTuple_CheckExact(args[0]) && !PyList_CheckExact(args[0])) Py_RETURN_NONE;
    PyObject *operations = PySequence_Tuple(args[0]); /* a list could change while fields are read */
    if (operations == NULL) return NULL;
    PyObject *sources = PyFrozenSet_New(NULL), *targets = PyFrozenSet_New(NULL), *result = NULL;
    Py_ssize_t n = PyTuple_Size(operations);
    int status = sources == NULL || targets == NULL || n < 0 ? BD_ERROR : BD_OK;
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *op = PyTuple_GetItem(operations, i), *source = NULL, *target = NULL;
        if (op == NULL) { status = BD_ERROR; break; }
        if ((PyObject *)Py_TYPE(op) != region_cls) { status = BD_FALLBACK; break; }
        status = bd_get(op, tb.nm[N_SOURCE], &source);
        if (status == BD_OK) status = bd_get(op, tb.nm[N_TARGET], &target);
        if (status == BD_OK) {
            if ((PyObject *)Py_TYPE(target) != bound_cls) status = BD_FALLBACK;
            else if ((PyObject *)Py_TYPE(source) == bound_cls) status = bd_add_bound_id(tb.nm, source, sources);
            else if ((PyObject *)Py_TYPE(source) != stored_cls) status = BD_FALLBACK; /* Python decides */
        }
        if (status == BD_OK) status = bd_add_bound_id(tb.nm, target, targets);
        Py_XDECREF(source);
        Py_XDECREF(target);
    }
    if (status == BD_OK) {
        result = PyTuple_Pack(2, sources, targets);
        if (result == NULL) status = BD_ERROR;
    }
    Py_DECREF(operations);
    Py_XDECREF(sources);
    Py_XDECREF(targets);
    if (status == BD_OK) return result;
    if (status == BD_ERROR) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------
 * logical_routes_plain: the route halves build_operation_views derives, without building them */

/* One operation fragment's route half is plain: an exact fragment_cls with an exact non-empty
 * str placement fragment id, whose rank is an exact rank_cls with an exact int pp and whose
 * pipeline_stage_id is an exact int or None (read from the instance dicts: these dataclasses
 * define no descriptor for those fields). */
static int
bd_route_half_plain(PyObject *const *nm, PyObject *fragment, PyObject *fragment_cls, PyObject *rank_cls)
{
    PyObject *dict = NULL, *rank = NULL, *stage = NULL, *rank_dict = NULL, *pp = NULL, *pfid = NULL;
    if ((PyObject *)Py_TYPE(fragment) != fragment_cls) return BD_FALLBACK;
    static const int route_names[3] = {N_PFID, N_RANK, N_PIPELINE_STAGE_ID};
    PyObject *slots[3];
    int status;
    if (bd_pf_slots(fragment, route_names, 3, slots)) { /* its layout's slots */
        status = bd_slot_str(slots[0], &pfid);
        if (status == BD_OK) status = bd_slot_get(slots[1], &rank);
        if (status == BD_OK) status = bd_slot_get(slots[2], &stage);
    } else {
        status = bd_dict_of(fragment, &dict);
        if (status == BD_OK) status = bd_dget_str(dict, nm[N_PFID], &pfid); /* its bucket's (hashable) key */
        if (status == BD_OK) status = bd_dget(dict, nm[N_RANK], &rank);
        if (status == BD_OK) status = bd_dget(dict, nm[N_PIPELINE_STAGE_ID], &stage);
    }
    if (status == BD_OK && !(stage == Py_None || PyLong_CheckExact(stage))) status = BD_FALLBACK;
    if (status == BD_OK && (PyObject *)Py_TYPE(rank) != rank_cls) status = BD_FALLBACK;
    if (status == BD_OK) status = bd_dict_of(rank, &rank_dict);
    if (status == BD_OK) status = bd_dget(rank_dict, nm[N_PP], &pp);
    if (status == BD_OK && !PyLong_CheckExact(pp)) status = BD_FALLBACK;
    Py_XDECREF(dict);
    Py_XDECREF(rank);
    Py_XDECREF(stage);
    Py_XDECREF(rank_dict);
    Py_XDECREF(pp);
    Py_XDECREF(pfid);
    return status;
}

/* bd_route_half_plain on a fragment whose placement_fragment_id, rank and pipeline_stage_id
 * were scanned (v, bd_cover_frag's fields; the same dict reads): when one is NULL, the original
 * reads decide. memo: the rank checked last and its verdict. The fragments of a part share their
 * rank object, and its check (a plain-keys walk of its instance dict, the pp lookup) reads only
 * that dict, which no C code here changes: while no Python code runs (the caller clears the memo
 * where a read could run some), the same rank gets the same verdict (BD_ERROR is never kept). */
static int
bd_route_half_scanned(PyObject *const *nm, PyObject *fragment, PyObject *fragment_cls, PyObject *const *v,
                      PyObject *rank_cls, bd_rank_memo *memo)
{
    PyObject *pfid = v[CF_PFID], *rank = v[CF_RANK], *stage = v[CF_STAGE];
    if ((PyObject *)Py_TYPE(fragment) != fragment_cls) return BD_FALLBACK;
    if (pfid == NULL || rank == NULL || stage == NULL) {
        memo->rank = NULL; /* (the original reads: getattrs) */
        return bd_route_half_plain(nm, fragment, fragment_cls, rank_cls);
    }
    if (!PyUnicode_CheckExact(pfid) || PyUnicode_GetLength(pfid) < 1) return BD_FALLBACK;
    if (!(stage == Py_None || PyLong_CheckExact(stage))) return BD_FALLBACK;
    if ((PyObject *)Py_TYPE(rank) != rank_cls) return BD_FALLBACK;
    if (rank == memo->rank) return memo->status;
    PyObject *rank_dict = NULL, *pp = NULL;
    int status = bd_dict_of(rank, &rank_dict);
    if (status == BD_OK) status = bd_dget(rank_dict, nm[N_PP], &pp);
    if (status == BD_OK && !PyLong_CheckExact(pp)) status = BD_FALLBACK;
    Py_XDECREF(rank_dict);
    Py_XDECREF(pp);
    memo->rank = status == BD_ERROR ? NULL : rank;
    memo->status = status;
    return status;
}

PyDoc_STRVAR(logical_routes_plain_doc,
"logical_routes_plain(operations, region_cls, fragment_cls, stored_cls, rank_cls)\n"
"--\n\n"
"True when every operation of the exact tuple operations is an exact region_cls whose target\n"
"is an exact fragment_cls and whose source is an exact fragment_cls or stored_cls, every such\n"
"fragment's placement_fragment_id an exact non-empty str, its rank an exact rank_cls with an\n"
"exact int pp and its pipeline_stage_id an exact int or None (fields read from the instance\n"
"dicts): then build_operation_views derives and sorts every route of these operations\n"
"without user code or an exception. None otherwise.\n"
"TypeError when a class is not a heap type.");

static PyObject *
bd_logical_routes_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bd_table tb;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "logical_routes_plain expects 5 arguments");
        return NULL;
    }
    if (bd_load_table(self, &tb) < 0) return NULL;
    if (bd_check_heap_types(args + 1, 4) < 0) return NULL;
    PyObject *operations = args[0], *region_cls = args[1], *fragment_cls = args[2], *stored_cls = args[3];
    PyObject *rank_cls = args[4];
    if (!PyTuple_CheckExact(operations)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_Size(operations);
    if (n < 0) return NULL;
    int status = BD_OK;
    static mr_layout_memo routes_memo; /* region_cls in TransferRegion's C-owned layout (layout.h) */
    mr_layout_class rl;
    (void)mr_region_layout(&routes_memo, &rl, region_cls);
    PyObject *last_source = NULL; /* borrowed: the previous operation's plain source (alive in it) */
    for (Py_ssize_t i = 0; i < n && status == BD_OK; i++) {
        PyObject *op = PyTuple_GetItem(operations, i), *dict = NULL, *source = NULL, *target = NULL;
        if (op == NULL) return NULL;
        if ((PyObject *)Py_TYPE(op) != region_cls) {
            status = BD_FALLBACK;
            break;
        }
        PyObject *const *fields = mr_layout_fields(op, &rl);
        if (fields != NULL) {
            /* an empty field is a missing key (BD_FALLBACK) */
            source = fields[MR_RG_SOURCE];
            target = fields[MR_RG_TARGET];
            if (source == NULL || target == NULL) {
                status = BD_FALLBACK;
                break;
            }
            Py_INCREF(source);
            Py_INCREF(target);
        } else {
            status = bd_dict_of(op, &dict);
            if (status == BD_OK) status = bd_dget(dict, tb.nm[N_SOURCE], &source);
            if (status == BD_OK) status = bd_dget(dict, tb.nm[N_TARGET], &target);
        }
        if (status == BD_OK && source != last_source && (PyObject *)Py_TYPE(source) != stored_cls) {
            /* (no user code runs in this loop: the same object still has the values read) */
            status = bd_route_half_plain(tb.nm, source, fragment_cls, rank_cls);
            if (status == BD_OK) last_source = source;
        }
        if (status == BD_OK) status = bd_route_half_plain(tb.nm, target, fragment_cls, rank_cls);
        Py_XDECREF(dict);
        Py_XDECREF(source);
        Py_XDECREF(target);
    }
    if (status == BD_ERROR) return NULL;
    if (status == BD_FALLBACK) Py_RETURN_NONE;
    Py_RETURN_TRUE;
}

/* ------------------------------------------------------------------------------------------ */

static PyMethodDef binder_methods[] = {
    {"bind_views", (PyCFunction)(void (*)(void))bd_bind_views, METH_FASTCALL, bind_views_doc},
    {"attest", (PyCFunction)(void (*)(void))bd_attest, METH_FASTCALL, attest_doc},
    {"attested_executors", (PyCFunction)(void (*)(void))bd_attested_executors, METH_FASTCALL,
     attested_executors_doc},
    {"bound_fragments", (PyCFunction)(void (*)(void))bd_bound_fragments, METH_FASTCALL, bound_fragments_doc},
    {"bound_fragments_ordered", (PyCFunction)(void (*)(void))bd_bound_fragments_ordered, METH_FASTCALL,
     bound_fragments_ordered_doc},
    {"bind_regions", (PyCFunction)(void (*)(void))bd_bind_regions, METH_FASTCALL, bind_regions_doc},
    {"bind_regions_ordered", (PyCFunction)(void (*)(void))bd_bind_regions_ordered, METH_FASTCALL,
     bind_regions_ordered_doc},
    {"address_ranges_clear", (PyCFunction)(void (*)(void))bd_address_ranges_clear, METH_FASTCALL,
     address_ranges_clear_doc},
    {"attest_binding", (PyCFunction)(void (*)(void))bd_attest_binding, METH_FASTCALL, attest_binding_doc},
    {"attest_restored", (PyCFunction)(void (*)(void))bd_attest_restored, METH_FASTCALL, attest_restored_doc},
    {"attested_rows", (PyCFunction)(void (*)(void))bd_attested_rows, METH_FASTCALL, attested_rows_doc},
    {"logical_target_cover", (PyCFunction)(void (*)(void))bd_logical_target_cover, METH_FASTCALL,
     logical_target_cover_doc},
    {"project_attested", (PyCFunction)(void (*)(void))bd_project_attested, METH_FASTCALL,
     project_attested_doc},
    {"attest_many", (PyCFunction)(void (*)(void))bd_attest_many, METH_FASTCALL, attest_many_doc},
    {"bind_side_ids", (PyCFunction)(void (*)(void))bd_bind_side_ids, METH_FASTCALL, bind_side_ids_doc},
    {"operations_snapshots", (PyCFunction)(void (*)(void))bd_operations_snapshots, METH_FASTCALL,
     operations_snapshots_doc},
    {"bound_fragment_ids", (PyCFunction)(void (*)(void))bd_bound_fragment_ids, METH_FASTCALL,
     bound_fragment_ids_doc},
    {"logical_routes_plain", (PyCFunction)(void (*)(void))bd_logical_routes_plain, METH_FASTCALL,
     logical_routes_plain_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_Binder(PyObject *module)
{
    bd_table *table = mr_alloc_array(1, sizeof(bd_table));
    if (table == NULL) return -1;
    memset(table, 0, sizeof(bd_table));
    for (int k = 0; k < N_COUNT; k++) {
        table->nm[k] = PyUnicode_InternFromString(bd_names[k]);
        if (table->nm[k] == NULL) {
            bd_table_free(table);
            return -1;
        }
    }
    for (int which = 0; which < BD_NTEMPLATES; which++) {
        PyObject *dict = PyDict_New();
        table->templates[which] = dict;
        if (dict == NULL) {
            bd_table_free(table);
            return -1;
        }
        for (int k = 0; k < BD_MAX_TEMPLATE_KEYS && bd_template_keys[which][k] >= 0; k++) {
            if (PyDict_SetItem(dict, table->nm[bd_template_keys[which][k]], Py_None) < 0) {
                bd_table_free(table);
                return -1;
            }
        }
    }
    PyObject *capsule = PyCapsule_New(table, BD_TABLE_CAPSULE, bd_table_capsule_destructor);
    if (capsule == NULL) {
        bd_table_free(table);
        return -1;
    }
    PyObject *module_name = PyModule_GetNameObject(module);
    if (module_name == NULL) {
        Py_DECREF(capsule);
        return -1;
    }
    int rc = 0;
    for (PyMethodDef *def = binder_methods; def->ml_name != NULL; def++) {
        PyObject *function = PyCFunction_NewEx(def, capsule, module_name);
        if (function == NULL) {
            rc = -1;
            break;
        }
        rc = PyModule_AddObjectRef(module, def->ml_name, function);
        Py_DECREF(function);
        if (rc < 0) break;
    }
    Py_DECREF(module_name);
    Py_DECREF(capsule);
    return rc;
}
