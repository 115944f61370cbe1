/* planobj: trusted construction of the logical planner's result objects (issue 5).
 *
 * The overlap kernel (overlap.c) proves every invariant of a region; what is left per region
 * is building the frozen TransferRegion instance itself. build_regions allocates each
 * instance with the class's tp_alloc (no __init__ / __post_init__: nothing left to check)
 * and installs one fresh field dict, so a planner-built region costs one allocation and one
 * dict instead of a Python-level constructor call. The records come from plan_overlaps. */
#include "planobj.h"

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
po_region(PyObject *cls, allocfunc alloc, PyObject *const *keys, PyObject *tensor_key, PyObject *template,
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
    /* A copy of the all-keys template is sized once; the stores below only replace values. */
    PyObject *dict = PyDict_Copy(template);
    if (dict == NULL) return NULL;
    PyObject *tensor_id = PyObject_GetAttr(target, tensor_key);
    if (tensor_id == NULL) goto fail;
    int rc = PyDict_SetItem(dict, keys[0], tensor_id);
    Py_DECREF(tensor_id);
    if (rc < 0) goto fail;
    if (PyDict_SetItem(dict, keys[1], source) < 0) goto fail;
    if (PyDict_SetItem(dict, keys[2], target) < 0) goto fail;
    for (Py_ssize_t k = 3; k < PO_NFIELDS; k++) {
        item = PyTuple_GetItem(record, k - 1);
        if (item == NULL || PyDict_SetItem(dict, keys[k], item) < 0) goto fail;
    }
    PyObject *region = alloc((PyTypeObject *)cls, 0);
    if (region == NULL) goto fail;
    if (PyObject_GenericSetDict(region, dict, NULL) < 0) {
        Py_DECREF(region);
        goto fail;
    }
    Py_DECREF(dict);
    return region;
fail:
    Py_DECREF(dict);
    return NULL;
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
    PyObject *template = NULL;
    PyObject *result = NULL;
    for (int k = 0; k < PO_NFIELDS; k++) {
        keys[k] = PyUnicode_InternFromString(po_field_names[k]);
        if (keys[k] == NULL) goto done;
    }
    tensor_key = keys[0];
    template = PyDict_New();
    if (template == NULL) goto done;
    for (int k = 0; k < PO_NFIELDS; k++) {
        if (PyDict_SetItem(template, keys[k], Py_None) < 0) goto done;
    }
    {
        Py_ssize_t n = PyList_Size(records);
        Py_ssize_t nsources = PyList_Size(sources);
        Py_ssize_t ntargets = PyList_Size(targets);
        if (n < 0 || nsources < 0 || ntargets < 0) goto done;
        result = PyTuple_New(n);
        if (result == NULL) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *record = PyList_GetItem(records, i); /* borrowed */
            if (record == NULL) goto fail;
            /* The lists may change under hostile attribute hooks: re-read their sizes. */
            nsources = PyList_Size(sources);
            ntargets = PyList_Size(targets);
            if (nsources < 0 || ntargets < 0) goto fail;
            Py_INCREF(record);
            PyObject *region =
                po_region(cls, alloc, keys, tensor_key, template, record, sources, nsources, targets, ntargets);
            Py_DECREF(record);
            if (region == NULL) goto fail;
            if (PyTuple_SetItem(result, i, region) < 0) goto fail; /* steals region */
        }
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    Py_XDECREF(template);
    po_release_keys(keys);
    return result;
}

/* ---- pack_targets: one C pass over the planner's target fragments ------------------------ */

typedef struct {
    int64_t *key;  /* slot keys, -1 = empty */
    int64_t *id;   /* cover id of the key */
    size_t mask;
} po_map;

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
    while (m->key[i] != -1) {
        if (m->key[i] == key) return m->id[i];
        i = (i + 1) & m->mask;
    }
    m->key[i] = key;
    m->id[i] = (*count)++;
    return m->id[i];
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

/* Growable int64 buffer. */
typedef struct {
    int64_t *v;
    size_t n, cap;
} po_buf;

static int
po_push(po_buf *b, int64_t x)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        if (cap > ((size_t)PY_SSIZE_T_MAX / sizeof(int64_t)) / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
        int64_t *v = PyMem_Realloc(b->v, cap * sizeof(int64_t));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
    return 0;
}

static PyObject *
po_buf_bytes(const po_buf *b)
{
    return PyBytes_FromStringAndSize((const char *)b->v, (Py_ssize_t)(b->n * sizeof(int64_t)));
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

/* One fragment into the buffers; 1 done, 0 fall back, -1 error. */
static int
po_pack_one(PyObject *fragment, PyObject *const *names, PyObject *tensor_index, Py_ssize_t ntensors,
            const int64_t *tensor_ndim, const int64_t *routed, int64_t replicas, po_map *map, int64_t *ncovers,
            po_buf *tensor, po_buf *cover, po_buf *offsets, po_buf *shapes, po_buf *nbytes)
{
    int result = -1;
    PyObject *v[PK_N] = {NULL};
    for (int k = PK_TENSOR; k <= PK_NBYTES; k++) {
        v[k] = PyObject_GetAttr(fragment, names[k]);
        if (v[k] == NULL) goto done;
    }
    PyObject *index = PyDict_GetItemWithError(tensor_index, v[PK_TENSOR]); /* borrowed */
    if (index == NULL) {
        result = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    if (!PyLong_Check(index)) {
        result = 0;
        goto done;
    }
    Py_ssize_t t = PyLong_AsSsize_t(index);
    if (t == -1 && PyErr_Occurred()) goto done;
    if (t < 0 || t >= ntensors) {
        result = 0;
        goto done;
    }
    int64_t slot = replicas; /* routed by owner */
    if (!routed[t]) {
        v[PK_DP] = PyObject_GetAttr(v[PK_RANK], names[PK_DP]);
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
    int rc = po_nbytes(v[PK_NBYTES], &nb);
    if (rc <= 0) {
        result = rc;
        goto done;
    }
    size_t off_mark = offsets->n, shp_mark = shapes->n;
    rc = po_push_coords(offsets, v[PK_OFFSET], tensor_ndim[t]);
    if (rc == 1) rc = po_push_coords(shapes, v[PK_SHAPE], tensor_ndim[t]);
    if (rc <= 0) {
        offsets->n = off_mark;
        shapes->n = shp_mark;
        result = rc;
        goto done;
    }
    if (po_push(tensor, (int64_t)t) < 0 || po_push(cover, po_map_claim(map, key, ncovers)) < 0
        || po_push(nbytes, nb) < 0)
        goto done;
    result = 1;
done:
    for (int k = 0; k < PK_N; k++) Py_XDECREF(v[k]);
    return result;
}

PyDoc_STRVAR(pack_targets_doc,
"pack_targets(fragments, tensor_index, tensor_ndim, routed, replicas)\n"
"--\n\n"
"The planner's target packing in one pass. fragments: a list of placement fragments;\n"
"tensor_index: tensor id -> kernel tensor index; tensor_ndim and routed: bytes of int64 per\n"
"tensor (routed != 0: the cover is the tensor's owner, else target dp % replicas selects the\n"
"replica slot). Returns (tensor, cover, offsets, shapes, nbytes, cover_keys): bytes of int64\n"
"(nbytes as uint64, 0 when outside (0, 2**64)) and, per cover id in order of first\n"
"appearance, its key tensor * (replicas + 1) + slot (slot == replicas: routed). Returns None\n"
"when some fragment does not fit this path (unknown tensor, rank count mismatch, non-int or\n"
"out-of-int64 values): the caller then packs exactly as before and reports in rule order.");

static PyObject *
po_pack_targets(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *fragments, *tensor_index, *ndim_obj, *routed_obj;
    long long replicas_ll;
    if (!PyArg_ParseTuple(args, "OOOOL:pack_targets", &fragments, &tensor_index, &ndim_obj, &routed_obj,
                          &replicas_ll))
        return NULL;
    if (!PyList_Check(fragments) || !PyDict_Check(tensor_index)) {
        PyErr_SetString(PyExc_TypeError, "pack_targets: fragments must be a list and tensor_index a dict");
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
    Py_ssize_t n = PyList_Size(fragments);
    if (n < 0) return NULL;
    PyObject *names[PK_N] = {NULL};
    PyObject *result = NULL;
    po_buf tensor = {0}, cover = {0}, offsets = {0}, shapes = {0}, nbytes = {0};
    po_map map = {NULL, NULL, 0};
    int64_t ncovers = 0;
    for (int k = 0; k < PK_N; k++) {
        names[k] = PyUnicode_InternFromString(pk_names[k]);
        if (names[k] == NULL) goto done;
    }
    {
        size_t cap = 16;
        while (cap < (size_t)n * 2) {
            if (cap > ((size_t)PY_SSIZE_T_MAX / sizeof(int64_t)) / 4) {
                PyErr_NoMemory();
                goto done;
            }
            cap *= 2;
        }
        map.key = mr_alloc_array(cap, sizeof(int64_t));
        if (map.key == NULL) goto done;
        map.id = mr_alloc_array(cap, sizeof(int64_t));
        if (map.id == NULL) goto done;
        for (size_t i = 0; i < cap; i++) map.key[i] = -1;
        map.mask = cap - 1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fragment = PyList_GetItem(fragments, i); /* borrowed */
        if (fragment == NULL) goto done;
        Py_INCREF(fragment);
        int rc = po_pack_one(fragment, names, tensor_index, ntensors, tensor_ndim, routed, replicas, &map, &ncovers,
                             &tensor, &cover, &offsets, &shapes, &nbytes);
        Py_DECREF(fragment);
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
        for (size_t i = 0; i <= map.mask; i++) {
            if (map.key[i] == -1) continue;
            PyObject *key = PyLong_FromLongLong((long long)map.key[i]);
            if (key == NULL || PyList_SetItem(keys, (Py_ssize_t)map.id[i], key) < 0) {
                Py_DECREF(keys);
                goto done;
            }
        }
        PyObject *parts[5] = {po_buf_bytes(&tensor), po_buf_bytes(&cover), po_buf_bytes(&offsets),
                              po_buf_bytes(&shapes), po_buf_bytes(&nbytes)};
        if (parts[0] != NULL && parts[1] != NULL && parts[2] != NULL && parts[3] != NULL && parts[4] != NULL)
            result = PyTuple_Pack(6, parts[0], parts[1], parts[2], parts[3], parts[4], keys);
        for (int k = 0; k < 5; k++) Py_XDECREF(parts[k]);
        Py_DECREF(keys);
    }
done:
    for (int k = 0; k < PK_N; k++) Py_XDECREF(names[k]);
    PyMem_Free(tensor.v);
    PyMem_Free(cover.v);
    PyMem_Free(offsets.v);
    PyMem_Free(shapes.v);
    PyMem_Free(nbytes.v);
    PyMem_Free(map.key);
    PyMem_Free(map.id);
    return result;
}

static PyMethodDef planobj_methods[] = {
    {"build_regions", po_build_regions, METH_VARARGS, build_regions_doc},
    {"pack_targets", po_pack_targets, METH_VARARGS, pack_targets_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_PlanObjects(PyObject *module)
{
    return PyModule_AddFunctions(module, planobj_methods);
}
