/* graph_typecheck: the type check of a packed plan record's placement graph, in one C walk
 * (session 18, PACKCHK).
 *
 * graph_typed(placements, classes) is the fast path of placement.typed_graphs for the
 * placements graph_unpack built by field dict (bound_pickle._require_typed_placements): True
 * when every placement, its topology, participants and their ranks, its tensor descriptors
 * and their axes, its fragments and its parts hold exactly the classes the constructors store
 * and every part names its placement's identity and topology, its descriptors among the
 * placement's own (by identity) and a typed rank. False otherwise (declines: the Python
 * typed_graphs / restored_graph_failure then decide and raise, as before).
 *
 * The accept set is contained in typed_graphs' (it is the same condition, read field by field
 * with exact-type tests; the axis classes are accepted exactly, where tensor_fields_failure
 * accepts subclasses: a subclass declines here). Anything unexpected (a missing field, a
 * failed read, an empty parts or participants tuple, which typed_graphs refuses too) declines.
 *
 * classes: (WeightPlacementManifest, ParallelTopology, TopologyParticipant, ParallelRank,
 *           WeightPlacementPart, TensorDescriptor, PlacementFragment, SplitAxis,
 *           ReplicatedAxis, OwnershipAxis), exact types.
 *
 * Only exact dicts, tuples, strs and ints are read, and only instances of the exact listed
 * classes have their __dict__ taken: no Python code of the record runs. Every value read from
 * a dict is held (a new reference) while it is read below. */
#include "graph_typecheck.h"

enum {
    GT_PLACEMENT,
    GT_TOPOLOGY,
    GT_PARTICIPANT,
    GT_RANK,
    GT_PART,
    GT_TENSOR,
    GT_FRAGMENT,
    GT_SPLIT,
    GT_REPLICATED,
    GT_OWNERSHIP,
    GT_NCLASSES
};

/* interned field names */
enum {
    K_RESOURCE_ID,
    K_PLACEMENT_ID,
    K_REVISION,
    K_WEIGHT_GENERATION,
    K_PLACEMENT_SET_ID,
    K_TOPOLOGY,
    K_PARTS,
    K_TENSORS,
    K_FRAGMENTS,
    K_DIGEST_CACHE,
    K_TP_SIZE,
    K_PP_SIZE,
    K_EP_SIZE,
    K_DP_SIZE,
    K_PARTICIPANTS,
    K_TOPOLOGY_ID,
    K_PARTICIPANT_ID,
    K_RANK,
    K_DP,
    K_TP,
    K_PP,
    K_EP,
    K_TENSOR_ID,
    K_GLOBAL_SHAPE,
    K_DTYPE,
    K_ITEMSIZE,
    K_SHARD_DIMS,
    K_LAYOUT_FINGERPRINT,
    K_PARALLEL_AXES,
    K_LAYER_ID,
    K_EXPERT_ID,
    K_KIND,
    K_DIM,
    K_NKEYS
};

static const char *const gt_key_names[K_NKEYS] = {
    "resource_id", "placement_id", "revision",     "weight_generation", "placement_set_id",
    "topology",    "parts",       "tensors",      "fragments",    "_digest_cache",     "tp_size",
    "pp_size",     "ep_size",     "dp_size",      "participants", "topology_id",       "participant_id",
    "rank",        "dp",          "tp",           "pp",           "ep",                "tensor_id",
    "global_shape", "dtype",      "itemsize",     "shard_dims",   "layout_fingerprint", "parallel_axes",
    "layer_id",    "expert_id",   "kind",         "dim",
};

static PyObject *gt_keys[K_NKEYS];

#define GT_OK 1
#define GT_DECLINE 0
#define GT_ERROR (-1)

typedef struct {
    PyTypeObject *cls[GT_NCLASSES];
    const void **own; /* the current placement's descriptors, sorted by address */
    Py_ssize_t nown;
} gt_state;

/* The instance dict of obj (a new reference) when it is an exact dict; NULL (no error set)
 * otherwise. obj is an instance of one of the exact listed classes (every caller checked its
 * class), whose __dict__ descriptor is the generic one: read without the attribute lookup. */
static PyObject *
gt_dict(PyObject *obj)
{
    PyObject *d = PyObject_GenericGetDict(obj, NULL);
    if (d == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyDict_CheckExact(d)) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* d[key] as a new reference; NULL (no error set) when absent or on a failed lookup. */
static PyObject *
gt_get(PyObject *d, int key)
{
    PyObject *v = PyDict_GetItemWithError(d, gt_keys[key]);
    if (v == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(v);
    return v;
}

/* d[key] is present and an exact str (kind 's'), exact int ('i'), None or an exact int ('n'),
 * an exact tuple of exact ints ('t'). */
static int
gt_field_is(PyObject *d, int key, char kind)
{
    PyObject *v = gt_get(d, key);
    if (v == NULL) return 0;
    int ok = 0;
    switch (kind) {
    case 's':
        ok = PyUnicode_CheckExact(v);
        break;
    case 'i':
        ok = PyLong_CheckExact(v);
        break;
    case 'n':
        ok = v == Py_None || PyLong_CheckExact(v);
        break;
    case 't':
        if (PyTuple_CheckExact(v)) {
            Py_ssize_t n = PyTuple_Size(v);
            ok = n >= 0;
            for (Py_ssize_t i = 0; ok && i < n; i++) {
                PyObject *item = PyTuple_GetItem(v, i);
                ok = item != NULL && PyLong_CheckExact(item);
            }
            if (!ok) PyErr_Clear();
        }
        break;
    default:
        break;
    }
    Py_DECREF(v);
    return ok;
}

/* Every item of the exact tuple t is exactly of class cls (an empty tuple: nonempty decides). */
static int
gt_items_are(PyObject *t, PyTypeObject *cls, int nonempty)
{
    if (!PyTuple_CheckExact(t)) return 0;
    Py_ssize_t n = PyTuple_Size(t);
    if (n < 0) {
        PyErr_Clear();
        return 0;
    }
    if (nonempty && n == 0) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(t, i);
        if (item == NULL) {
            PyErr_Clear();
            return 0;
        }
        if (Py_TYPE(item) != cls) return 0;
    }
    return 1;
}

/* An exact ParallelRank whose dp, tp, pp, ep are exact ints (typed_rank's common case). */
static int
gt_rank(gt_state *st, PyObject *rank)
{
    if (Py_TYPE(rank) != st->cls[GT_RANK]) return 0;
    PyObject *d = gt_dict(rank);
    if (d == NULL) return 0;
    int ok = gt_field_is(d, K_DP, 'i') && gt_field_is(d, K_TP, 'i') && gt_field_is(d, K_PP, 'i') &&
             gt_field_is(d, K_EP, 'i');
    Py_DECREF(d);
    return ok;
}

/* An exact TensorDescriptor passing tensor_fields_failure (its axes of the exact classes). */
static int
gt_tensor(gt_state *st, PyObject *tensor)
{
    if (Py_TYPE(tensor) != st->cls[GT_TENSOR]) return 0;
    PyObject *d = gt_dict(tensor);
    if (d == NULL) return 0;
    int ok = gt_field_is(d, K_GLOBAL_SHAPE, 't') && gt_field_is(d, K_TENSOR_ID, 's') &&
             gt_field_is(d, K_DTYPE, 's') && gt_field_is(d, K_ITEMSIZE, 'i') && gt_field_is(d, K_SHARD_DIMS, 't') &&
             gt_field_is(d, K_LAYER_ID, 'n') && gt_field_is(d, K_EXPERT_ID, 'n') &&
             gt_field_is(d, K_LAYOUT_FINGERPRINT, 's');
    PyObject *axes = ok ? gt_get(d, K_PARALLEL_AXES) : NULL;
    Py_DECREF(d);
    if (axes == NULL) return 0;
    ok = PyTuple_CheckExact(axes);
    Py_ssize_t n = ok ? PyTuple_Size(axes) : 0;
    if (n < 0) {
        PyErr_Clear();
        ok = 0;
    }
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *axis = PyTuple_GetItem(axes, i);
        if (axis == NULL) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        PyTypeObject *kind = Py_TYPE(axis);
        if (kind != st->cls[GT_SPLIT] && kind != st->cls[GT_REPLICATED] && kind != st->cls[GT_OWNERSHIP]) {
            ok = 0;
            break;
        }
        Py_INCREF(axis);
        PyObject *ad = gt_dict(axis);
        Py_DECREF(axis);
        if (ad == NULL) {
            ok = 0;
            break;
        }
        ok = gt_field_is(ad, K_KIND, 's') &&
             (!PyType_IsSubtype(kind, st->cls[GT_SPLIT]) || gt_field_is(ad, K_DIM, 'i'));
        Py_DECREF(ad);
    }
    Py_DECREF(axes);
    return ok;
}

/* a == b for two exact strs or two exact ints (no Python code runs); 0 on a failed compare. */
static int
gt_equal(PyObject *a, PyObject *b)
{
    if (a == b) return 1;
    int r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0) {
        PyErr_Clear();
        return 0;
    }
    return r;
}

static int
gt_ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

/* The topology's fields and participants: GT_OK / GT_DECLINE; *topology_id a new reference. */
static int
gt_topology(gt_state *st, PyObject *topology, PyObject **topology_id)
{
    *topology_id = NULL;
    if (Py_TYPE(topology) != st->cls[GT_TOPOLOGY]) return GT_DECLINE;
    PyObject *d = gt_dict(topology);
    if (d == NULL) return GT_DECLINE;
    int ok = gt_field_is(d, K_TP_SIZE, 'i') && gt_field_is(d, K_PP_SIZE, 'i') && gt_field_is(d, K_EP_SIZE, 'i') &&
             gt_field_is(d, K_DP_SIZE, 'i') && gt_field_is(d, K_TOPOLOGY_ID, 's');
    PyObject *participants = ok ? gt_get(d, K_PARTICIPANTS) : NULL;
    PyObject *tid = participants != NULL ? gt_get(d, K_TOPOLOGY_ID) : NULL;
    Py_DECREF(d);
    if (participants == NULL || tid == NULL) {
        Py_XDECREF(participants);
        Py_XDECREF(tid);
        return GT_DECLINE;
    }
    ok = PyUnicode_CheckExact(tid) && gt_items_are(participants, st->cls[GT_PARTICIPANT], 1);
    Py_ssize_t n = ok ? PyTuple_Size(participants) : 0;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *participant = PyTuple_GetItem(participants, i); /* (checked above) */
        if (participant == NULL) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        PyObject *pd = gt_dict(participant);
        if (pd == NULL) {
            ok = 0;
            break;
        }
        ok = gt_field_is(pd, K_PARTICIPANT_ID, 's');
        PyObject *rank = ok ? gt_get(pd, K_RANK) : NULL;
        Py_DECREF(pd);
        ok = rank != NULL && gt_rank(st, rank);
        Py_XDECREF(rank);
    }
    Py_DECREF(participants);
    if (!ok) {
        Py_DECREF(tid);
        return GT_DECLINE;
    }
    *topology_id = tid;
    return GT_OK;
}

/* One part against its placement's identity (values: resource_id, revision, weight_generation,
 * placement_set_id, topology_id). */
static int
gt_part(gt_state *st, PyObject *part, PyObject *const identity[5])
{
    static const int identity_keys[5] = {K_RESOURCE_ID, K_REVISION, K_WEIGHT_GENERATION, K_PLACEMENT_SET_ID,
                                         K_TOPOLOGY_ID};
    static const char identity_kinds[5] = {'s', 's', 'i', 's', 's'};
    if (Py_TYPE(part) != st->cls[GT_PART]) return 0;
    PyObject *d = gt_dict(part);
    if (d == NULL) return 0;
    int ok = gt_field_is(d, K_PARTICIPANT_ID, 's');
    for (int k = 0; ok && k < 5; k++) {
        PyObject *v = gt_get(d, identity_keys[k]);
        if (v == NULL) {
            ok = 0;
            break;
        }
        ok = (identity_kinds[k] == 's' ? PyUnicode_CheckExact(v) : PyLong_CheckExact(v)) &&
             gt_equal(v, identity[k]);
        Py_DECREF(v);
    }
    PyObject *rank = ok ? gt_get(d, K_RANK) : NULL;
    PyObject *tensors = rank != NULL ? gt_get(d, K_TENSORS) : NULL;
    PyObject *fragments = tensors != NULL ? gt_get(d, K_FRAGMENTS) : NULL;
    Py_DECREF(d);
    ok = fragments != NULL && gt_rank(st, rank) && gt_items_are(fragments, st->cls[GT_FRAGMENT], 0) &&
         PyTuple_CheckExact(tensors);
    Py_ssize_t n = ok ? PyTuple_Size(tensors) : 0;
    if (n < 0) {
        PyErr_Clear();
        ok = 0;
    }
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *tensor = PyTuple_GetItem(tensors, i);
        if (tensor == NULL) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        const void *key = tensor;
        ok = st->nown > 0 && bsearch(&key, st->own, (size_t)st->nown, sizeof(*st->own), gt_ptr_cmp) != NULL;
    }
    Py_XDECREF(rank);
    Py_XDECREF(tensors);
    Py_XDECREF(fragments);
    return ok;
}

/* One placement: GT_OK, GT_DECLINE or GT_ERROR (MemoryError). */
static int
gt_placement(gt_state *st, PyObject *placement)
{
    static const int str_keys[4] = {K_RESOURCE_ID, K_PLACEMENT_ID, K_REVISION, K_PLACEMENT_SET_ID};
    if (Py_TYPE(placement) != st->cls[GT_PLACEMENT]) return GT_DECLINE;
    PyObject *d = gt_dict(placement);
    if (d == NULL) return GT_DECLINE;
    int ok = gt_field_is(d, K_WEIGHT_GENERATION, 'i');
    for (int k = 0; ok && k < 4; k++) ok = gt_field_is(d, str_keys[k], 's');
    if (ok) {
        PyObject *digest = PyDict_GetItemWithError(d, gt_keys[K_DIGEST_CACHE]);
        if (digest == NULL && PyErr_Occurred()) {
            PyErr_Clear();
            ok = 0;
        }
        else if (digest != NULL && digest != Py_None && !PyUnicode_CheckExact(digest)) {
            ok = 0;
        }
    }
    /* identity: resource_id, revision, weight_generation, placement_set_id (+ topology_id) */
    PyObject *identity[5] = {NULL, NULL, NULL, NULL, NULL};
    PyObject *topology = NULL, *parts = NULL, *tensors = NULL, *fragments = NULL;
    if (ok) {
        identity[0] = gt_get(d, K_RESOURCE_ID);
        identity[1] = gt_get(d, K_REVISION);
        identity[2] = gt_get(d, K_WEIGHT_GENERATION);
        identity[3] = gt_get(d, K_PLACEMENT_SET_ID);
        topology = gt_get(d, K_TOPOLOGY);
        parts = gt_get(d, K_PARTS);
        tensors = gt_get(d, K_TENSORS);
        fragments = gt_get(d, K_FRAGMENTS);
    }
    Py_DECREF(d);
    int rc = GT_DECLINE;
    const void **own = NULL;
    if (!ok || identity[0] == NULL || identity[1] == NULL || identity[2] == NULL || identity[3] == NULL ||
        topology == NULL || parts == NULL || tensors == NULL || fragments == NULL)
        goto done;
    if (gt_topology(st, topology, &identity[4]) != GT_OK) goto done;
    if (!gt_items_are(tensors, st->cls[GT_TENSOR], 0) || !gt_items_are(fragments, st->cls[GT_FRAGMENT], 0) ||
        !gt_items_are(parts, st->cls[GT_PART], 1))
        goto done;
    Py_ssize_t ntensors = PyTuple_Size(tensors);
    if (ntensors < 0) {
        PyErr_Clear();
        goto done;
    }
    own = mr_alloc_array((size_t)ntensors, sizeof(*own));
    if (own == NULL) {
        rc = GT_ERROR;
        goto done;
    }
    for (Py_ssize_t i = 0; i < ntensors; i++) {
        PyObject *tensor = PyTuple_GetItem(tensors, i);
        if (tensor == NULL) {
            PyErr_Clear();
            goto done;
        }
        if (!gt_tensor(st, tensor)) goto done;
        own[i] = tensor;
    }
    qsort(own, (size_t)ntensors, sizeof(*own), gt_ptr_cmp);
    st->own = own;
    st->nown = ntensors;
    Py_ssize_t nparts = PyTuple_Size(parts);
    if (nparts < 0) {
        PyErr_Clear();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nparts; i++) {
        PyObject *part = PyTuple_GetItem(parts, i);
        if (part == NULL) {
            PyErr_Clear();
            goto done;
        }
        if (!gt_part(st, part, identity)) goto done;
    }
    rc = GT_OK;
done:
    st->own = NULL;
    st->nown = 0;
    PyMem_Free(own);
    for (int k = 0; k < 5; k++) Py_XDECREF(identity[k]);
    Py_XDECREF(topology);
    Py_XDECREF(parts);
    Py_XDECREF(tensors);
    Py_XDECREF(fragments);
    return rc;
}

PyDoc_STRVAR(graph_typed_doc,
"graph_typed(placements, classes, /) -> bool\n"
"\n"
"True when every placement of the list or tuple (and its topology, participants, ranks,\n"
"descriptors, axes, fragments and parts) holds exactly the classes the constructors store and\n"
"every part names its placement's identity, topology and descriptors (placement.typed_graphs'\n"
"accept condition, exact classes only); False when not sure (the Python rules decide).");

static PyObject *
graph_typed(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *placements, *classes;
    if (!PyArg_ParseTuple(args, "OO!:graph_typed", &placements, &PyTuple_Type, &classes)) return NULL;
    if (PyTuple_Size(classes) != GT_NCLASSES) {
        PyErr_SetString(PyExc_TypeError, "graph_typed: classes must be a tuple of 10 classes");
        return NULL;
    }
    gt_state st = {.own = NULL, .nown = 0};
    for (int k = 0; k < GT_NCLASSES; k++) {
        PyObject *cls = PyTuple_GetItem(classes, k);
        if (cls == NULL) return NULL;
        if (!PyType_Check(cls)) {
            PyErr_SetString(PyExc_TypeError, "graph_typed: classes must be a tuple of 10 classes");
            return NULL;
        }
        st.cls[k] = (PyTypeObject *)cls;
    }
    if (!PyList_CheckExact(placements) && !PyTuple_CheckExact(placements)) Py_RETURN_FALSE;
    /* a private tuple: the list cannot change under the walk */
    PyObject *items = PySequence_Tuple(placements);
    if (items == NULL) return NULL;
    Py_ssize_t n = PyTuple_Size(items);
    int rc = n < 0 ? GT_ERROR : GT_OK;
    for (Py_ssize_t i = 0; rc == GT_OK && i < n; i++) {
        PyObject *placement = PyTuple_GetItem(items, i);
        rc = placement == NULL ? GT_ERROR : gt_placement(&st, placement);
    }
    Py_DECREF(items);
    if (rc == GT_ERROR) return NULL;
    return PyBool_FromLong(rc == GT_OK);
}

static PyMethodDef graph_typecheck_methods[] = {
    {"graph_typed", graph_typed, METH_VARARGS, graph_typed_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_GraphTypecheck(PyObject *module)
{
    for (int k = 0; k < K_NKEYS; k++) {
        if (gt_keys[k] == NULL) {
            gt_keys[k] = PyUnicode_InternFromString(gt_key_names[k]);
            if (gt_keys[k] == NULL) return -1;
        }
    }
    return PyModule_AddFunctions(module, graph_typecheck_methods);
}
