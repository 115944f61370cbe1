/* regioncheck: canonical-geometry recheck of transfer regions inside revalidated plans (issue 5).
 *
 * ``TransferRegion`` is restored by default dataclass pickling (spec §13), so a plan that is
 * unpickled, copied or replaced only re-runs ``validate_bounds()`` on its operations (spec §8.6
 * step 12, §9.6 step 7). ``regions_canonical`` proves, per operation, that every rule of spec §8.4
 * holds (the canonical geometry is derived again as spec §11.7 says); the first operation it cannot
 * prove is handed back to Python, which runs ``TransferRegion.__post_init__`` for the message.
 *
 * The kernel is Python-free (int64 arrays in, 1 = proven / 0 = not proven out) and uses checked
 * arithmetic only: an overflow is "not proven", never a wrapped value. The glue reads the
 * attributes with the stable ABI; anything that is not an exact ``int`` in int64 range, not an
 * exact ``tuple``, not an exact non-empty ``str`` tensor id, or longer than RC_MAX_NDIM
 * dimensions is "not proven" (Python then decides, with arbitrary-precision ints).
 */
#include "regioncheck.h"
#include "layout.h"
#include "region_kernels.h"
#include "layout.h"

/* The kernel (rc_region, rc_region_canonical): region_kernels.h. */

/* -- glue ---------------------------------------------------------------------------------- */

enum {
    RC_TENSOR_ID,
    RC_SOURCE,
    RC_TARGET,
    RC_OVERLAP_OFFSET,
    RC_OVERLAP_SHAPE,
    RC_SOURCE_BASE_OFFSET,
    RC_TARGET_BASE_OFFSET,
    RC_INNER_BYTES,
    RC_OUTER_LOOP_COUNTS,
    RC_SOURCE_STRIDES,
    RC_TARGET_STRIDES,
    RC_GLOBAL_OFFSET,
    RC_LOCAL_SHAPE,
    RC_NBYTES,
    RC_PLACEMENT,
    RC_BINDING,
    RC_NAME_COUNT
};

static const char *const rc_name_text[RC_NAME_COUNT] = {
    "tensor_id",        "source",           "target",         "overlap_offset",
    "overlap_shape",    "source_base_offset", "target_base_offset", "inner_bytes",
    "outer_loop_counts", "source_strides",  "target_strides", "global_offset",
    "local_shape",      "nbytes",           "placement",      "binding",
};

static PyObject *rc_names[RC_NAME_COUNT];

/* rc_get reads a region's slot at the index of its name: the region names first, in field order */
_Static_assert((int)RC_TENSOR_ID == (int)MR_RG_TENSOR_ID && (int)RC_SOURCE == (int)MR_RG_SOURCE && (int)RC_TARGET == (int)MR_RG_TARGET
                   && (int)RC_OVERLAP_OFFSET == (int)MR_RG_OVERLAP_OFFSET && (int)RC_OVERLAP_SHAPE == (int)MR_RG_OVERLAP_SHAPE
                   && (int)RC_SOURCE_BASE_OFFSET == (int)MR_RG_SOURCE_BASE_OFFSET
                   && (int)RC_TARGET_BASE_OFFSET == (int)MR_RG_TARGET_BASE_OFFSET && (int)RC_INNER_BYTES == (int)MR_RG_INNER_BYTES
                   && (int)RC_OUTER_LOOP_COUNTS == (int)MR_RG_OUTER_LOOP_COUNTS && (int)RC_SOURCE_STRIDES == (int)MR_RG_SOURCE_STRIDES
                   && (int)RC_TARGET_STRIDES == (int)MR_RG_TARGET_STRIDES && (int)RC_TARGET_STRIDES + 1 == (int)MR_RG_NFIELDS,
               "regioncheck: the region names come first in rc_names, in the layout's field order");

#define RC_MAX_PLAIN_TYPES 8

/* The caller's classes for one call: the bound fragment class and the plain dataclasses. */
typedef struct {
    PyObject *bound_cls;                        /* borrowed */
    mr_layout_class bound_layout;               /* bound_cls's layout check (cls NULL: not a layout) */
    PyObject *plain[RC_MAX_PLAIN_TYPES];        /* borrowed */
    Py_ssize_t nplain;
    mr_layout_class region;                     /* a plain class in TransferRegion's C-owned layout */
} rc_classes;

/* An object whose fields are read: through its instance dict when its exact type is one of the
 * caller's plain dataclasses (no class-level attribute shadows the fields read: pinned by the
 * tests), otherwise with PyObject_GetAttr. */
typedef struct {
    PyObject *obj;   /* borrowed */
    PyObject *dict;  /* owned, or NULL */
    PyObject *const *fields; /* or its fields (a region in the checked layout: layout.h), or NULL */
    PyObject *const *pf;     /* or its fields (a placement fragment in its C-owned layout), or NULL */
    PyObject *rt;            /* or itself (a runtime fragment in its accepted C-owned layout), or NULL */
} rc_reader;

/* This file's readers of runtime fragments: the memo of their class's layout check (layout.h
 * mr_runtime_layout). */
static mr_class_memo rc_runtime_memo;

/* 0 ok, -1 error. A plain class instance without an instance dict (a C-owned layout the call
 * did not check) is read with PyObject_GetAttr. */
static int
rc_open(PyObject *obj, const rc_classes *classes, rc_reader *reader)
{
    reader->obj = obj;
    reader->dict = NULL;
    reader->pf = NULL;
    reader->rt = NULL;
    reader->fields = mr_layout_fields(obj, &classes->region);
    if (reader->fields != NULL) return 0;
    for (Py_ssize_t i = 0; i < classes->nplain; i++) {
        if ((PyObject *)Py_TYPE(obj) == classes->plain[i]) {
            reader->pf = mr_pf_fields(obj); /* a placement fragment's slots (layout.h) */
            if (reader->pf != NULL) return 0;
            /* a runtime fragment in its accepted layout: its slots, as the other readers of
             * runtime fragments read them (mr_runtime_state_get), instead of an AttributeError
             * raised and cleared for its missing instance dict and a getattr per field */
            mr_layout_class lc;
            if (mr_runtime_layout(&rc_runtime_memo, &lc, (PyObject *)Py_TYPE(obj))) {
                reader->rt = obj;
                return 0;
            }
            reader->dict = PyObject_GenericGetDict(obj, NULL);
            if (reader->dict == NULL) {
                /* no instance dict (a C-owned layout): its attributes are read */
                if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
                PyErr_Clear();
                return 0;
            }
            if (!PyDict_CheckExact(reader->dict)) Py_CLEAR(reader->dict);
            return 0;
        }
    }
    return 0;
}

static void
rc_close(rc_reader *reader)
{
    Py_CLEAR(reader->dict);
}

/* Reads field rc_names[which] into *out (a new reference). 1 ok; 0 not proven (absent from the
 * instance dict, or an AttributeError, cleared: Python then decides); -1 error. */
static int
rc_get(const rc_reader *reader, int which, PyObject **out)
{
    PyObject *name = rc_names[which];
    if (reader->fields != NULL) {
        /* the region names come first in rc_names, in field order (the layout's): its slot by
         * index; any other name is what the instance dict would not hold */
        *out = which < MR_RG_NFIELDS ? reader->fields[which] : NULL;
        if (*out == NULL) return 0; /* an empty field: a missing key */
        Py_INCREF(*out);
        return 1;
    }
    if (reader->pf != NULL) {
        /* its slot (an empty one, or a name that is not a field: a missing key) */
        int found;
        *out = mr_pf_named(reader->pf, name, &found);
        if (*out == NULL) return 0;
        Py_INCREF(*out);
        return 1;
    }
    if (reader->rt != NULL) {
        /* its slot (an empty one, or a name that is not a field: a missing key) */
        *out = mr_runtime_state_get(&rc_runtime_memo, reader->rt, name);
        if (*out == NULL) return 0;
        Py_INCREF(*out);
        return 1;
    }
    if (reader->dict != NULL) {
        *out = PyDict_GetItemWithError(reader->dict, name); /* borrowed */
        if (*out != NULL) {
            Py_INCREF(*out);
            return 1;
        }
        return PyErr_Occurred() ? -1 : 0;
    }
    *out = PyObject_GetAttr(reader->obj, name);
    if (*out != NULL) return 1;
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* 1 ok, 0 not proven, -1 error. */
static int
rc_read_i64(PyObject *value, int64_t *out)
{
    int overflow = 0;
    long long v;
    if (!PyLong_CheckExact(value)) return 0;
    v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow != 0) return 0;
    *out = (int64_t)v;
    return 1;
}

/* Reads field rc_names[which] as an exact int in int64 range. 1 ok, 0 not proven, -1 error. */
static int
rc_field_i64(const rc_reader *reader, int which, int64_t *out)
{
    PyObject *value;
    int rc = rc_get(reader, which, &value);
    if (rc != 1) return rc;
    rc = rc_read_i64(value, out);
    Py_DECREF(value);
    return rc;
}

/* Reads field rc_names[which] as an exact tuple of exact int64 ints, at most RC_MAX_NDIM long.
 * 1 ok (*len set), 0 not proven, -1 error. */
static int
rc_field_tuple(const rc_reader *reader, int which, int64_t *out, Py_ssize_t *len)
{
    PyObject *value;
    Py_ssize_t n;
    int rc = rc_get(reader, which, &value);
    if (rc != 1) return rc;
    if (!PyTuple_CheckExact(value)) {
        Py_DECREF(value);
        return 0;
    }
    n = PyTuple_Size(value);
    if (n < 0) {
        Py_DECREF(value);
        return -1;
    }
    if (n > RC_MAX_NDIM) {
        Py_DECREF(value);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n && rc == 1; i++) {
        PyObject *item = PyTuple_GetItem(value, i); /* borrowed */
        rc = item == NULL ? -1 : rc_read_i64(item, &out[i]);
    }
    Py_DECREF(value);
    if (rc == 1) *len = n;
    return rc;
}

/* One side's fragment values: the tensor id (owned, may be NULL) and the destinations of its
 * box and byte size. */
typedef struct {
    PyObject *tensor_id;
    int64_t *off;
    int64_t *shape;
    int64_t *nbytes;
} rc_side;

/* Reads one side's fragment (tensor_id, global_offset, local_shape, nbytes). A fragment of exactly
 * `bound_cls` (``BoundWeightFragment``) is read as its properties do: the first three from its
 * ``placement``, nbytes from its ``binding`` (both loaded from its slots when bound_cls is the
 * checked C-owned layout: an empty one is not proven). 1 ok, 0 not proven, -1 error. */
static int
rc_read_side(PyObject *fragment, const rc_classes *classes, Py_ssize_t ndim, rc_side *side)
{
    rc_reader frag, box, sized;
    PyObject *placement = NULL, *binding = NULL;
    Py_ssize_t n = 0;
    int rc = 1;
    side->tensor_id = NULL;
    box.dict = sized.dict = NULL;
    PyObject *const *bf = mr_layout_fields(fragment, &classes->bound_layout);
    if (bf != NULL) {
        frag.obj = fragment;
        frag.dict = NULL;
    } else if (rc_open(fragment, classes, &frag) < 0) {
        return -1;
    }
    if ((PyObject *)Py_TYPE(fragment) == classes->bound_cls) {
        if (bf != NULL) {
            rc = bf[MR_BF_PLACEMENT] != NULL && bf[MR_BF_BINDING] != NULL;
            if (rc == 1) {
                placement = Py_NewRef(bf[MR_BF_PLACEMENT]);
                binding = Py_NewRef(bf[MR_BF_BINDING]);
            }
        } else {
            rc = rc_get(&frag, RC_PLACEMENT, &placement);
            if (rc == 1) rc = rc_get(&frag, RC_BINDING, &binding);
        }
        if (rc == 1 && rc_open(placement, classes, &box) < 0) rc = -1;
        if (rc == 1 && rc_open(binding, classes, &sized) < 0) rc = -1;
    } else {
        box = frag;
        sized = frag;
        frag.dict = NULL; /* box and sized borrow it; released once below */
        sized.dict = NULL;
    }
    if (rc == 1) rc = rc_get(&box, RC_TENSOR_ID, &side->tensor_id);
    if (rc == 1) {
        rc = rc_field_tuple(&box, RC_GLOBAL_OFFSET, side->off, &n);
        if (rc == 1 && n != ndim) rc = 0;
    }
    if (rc == 1) {
        rc = rc_field_tuple(&box, RC_LOCAL_SHAPE, side->shape, &n);
        if (rc == 1 && n != ndim) rc = 0;
    }
    if (rc == 1) {
        if (sized.obj == box.obj) sized.dict = box.dict; /* borrowed for this read */
        rc = rc_field_i64(&sized, RC_NBYTES, side->nbytes);
        if (sized.obj == box.obj) sized.dict = NULL;
    }
    rc_close(&frag);
    rc_close(&box);
    rc_close(&sized);
    Py_XDECREF(placement);
    Py_XDECREF(binding);
    return rc;
}

/* 1 when `value` is an exact str equal to the exact non-empty str `tensor_id`; 0 not proven;
 * -1 error. */
static int
rc_same_tensor(PyObject *tensor_id, PyObject *value)
{
    int cmp;
    if (!PyUnicode_CheckExact(value)) return 0;
    cmp = PyUnicode_Compare(tensor_id, value);
    if (cmp == -1 && PyErr_Occurred()) return -1;
    return cmp == 0;
}

/* Reads and checks one operation. 1 proven canonical, 0 not proven, -1 error. */
static int
rc_operation(PyObject *op, const rc_classes *classes, rc_region *r)
{
    rc_reader reader;
    PyObject *tensor_id = NULL, *source = NULL, *target = NULL;
    rc_side s_side = {NULL, r->s_off, r->s_shape, &r->s_nbytes};
    rc_side t_side = {NULL, r->t_off, r->t_shape, &r->t_nbytes};
    Py_ssize_t n1 = 0, n2 = 0, n3 = 0;
    int rc;

    if (rc_open(op, classes, &reader) < 0) return -1;
    rc = rc_get(&reader, RC_TENSOR_ID, &tensor_id);
    if (rc == 1 && !(PyUnicode_CheckExact(tensor_id) && PyUnicode_GetLength(tensor_id) > 0)) rc = 0;
    if (rc == 1) rc = rc_field_tuple(&reader, RC_OVERLAP_OFFSET, r->ov_off, &r->ndim);
    if (rc == 1) rc = rc_field_tuple(&reader, RC_OVERLAP_SHAPE, r->ov_shape, &n1);
    if (rc == 1 && (r->ndim == 0 || n1 != r->ndim)) rc = 0;
    if (rc == 1) rc = rc_field_i64(&reader, RC_SOURCE_BASE_OFFSET, &r->s_base);
    if (rc == 1) rc = rc_field_i64(&reader, RC_TARGET_BASE_OFFSET, &r->t_base);
    if (rc == 1) rc = rc_field_i64(&reader, RC_INNER_BYTES, &r->inner);
    if (rc == 1) rc = rc_field_tuple(&reader, RC_OUTER_LOOP_COUNTS, r->outer, &r->nloops);
    if (rc == 1) rc = rc_field_tuple(&reader, RC_SOURCE_STRIDES, r->s_str, &n2);
    if (rc == 1) rc = rc_field_tuple(&reader, RC_TARGET_STRIDES, r->t_str, &n3);
    if (rc == 1 && (n2 != r->nloops || n3 != r->nloops)) rc = 0;
    if (rc == 1) rc = rc_get(&reader, RC_SOURCE, &source);
    if (rc == 1) rc = rc_get(&reader, RC_TARGET, &target);
    if (rc == 1) rc = rc_read_side(source, classes, r->ndim, &s_side);
    if (rc == 1) rc = rc_same_tensor(tensor_id, s_side.tensor_id);
    if (rc == 1) rc = rc_read_side(target, classes, r->ndim, &t_side);
    if (rc == 1) rc = rc_same_tensor(tensor_id, t_side.tensor_id);
    if (rc == 1) rc = rc_region_canonical(r);
    rc_close(&reader);
    Py_XDECREF(s_side.tensor_id);
    Py_XDECREF(t_side.tensor_id);
    Py_XDECREF(source);
    Py_XDECREF(target);
    Py_XDECREF(tensor_id);
    return rc;
}

static PyObject *
regions_canonical(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *operations, *start_obj, *bound_cls, *plain_types;
    Py_ssize_t count, start, i;
    int overflow = 0;
    long long start_ll;
    rc_region region;
    rc_classes classes;

    if (!mr_parse_vector(args, nargs, "OOOO:regions_canonical", &operations, &start_obj, &bound_cls, &plain_types))
        return NULL;
    if (!PyTuple_CheckExact(operations)) {
        PyErr_SetString(PyExc_TypeError, "regions_canonical: operations must be a tuple");
        return NULL;
    }
    if (!PyLong_CheckExact(start_obj)) {
        PyErr_SetString(PyExc_TypeError, "regions_canonical: start must be an int");
        return NULL;
    }
    if (!PyType_Check(bound_cls)) {
        PyErr_SetString(PyExc_TypeError, "regions_canonical: bound_cls must be a type");
        return NULL;
    }
    if (!PyTuple_CheckExact(plain_types)) {
        PyErr_SetString(PyExc_TypeError, "regions_canonical: plain_types must be a tuple of types");
        return NULL;
    }
    classes.bound_cls = bound_cls;
    static mr_layout_memo bound_memo; /* (once per call; a hit is one pointer comparison) */
    (void)mr_bound_layout(&bound_memo, &classes.bound_layout, bound_cls);
    classes.nplain = PyTuple_Size(plain_types);
    if (classes.nplain < 0) return NULL;
    if (classes.nplain > RC_MAX_PLAIN_TYPES) {
        PyErr_SetString(PyExc_ValueError, "regions_canonical: too many plain_types");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < classes.nplain; k++) {
        PyObject *cls = PyTuple_GetItem(plain_types, k); /* borrowed; the tuple is held by the caller for the call */
        if (cls == NULL) return NULL;
        if (!PyType_Check(cls)) {
            PyErr_SetString(PyExc_TypeError, "regions_canonical: plain_types must be a tuple of types");
            return NULL;
        }
        classes.plain[k] = cls;
    }
    /* the first plain class in TransferRegion's C-owned layout (checked through a memo) */
    static mr_layout_memo region_memo;
    classes.region.cls = NULL;
    classes.region.n = 0;
    for (Py_ssize_t k = 0; k < classes.nplain; k++) {
        if (mr_region_layout(&region_memo, &classes.region, classes.plain[k])) break;
    }
    count = PyTuple_Size(operations);
    if (count < 0) return NULL;
    start_ll = PyLong_AsLongLongAndOverflow(start_obj, &overflow);
    if (start_ll == -1 && PyErr_Occurred()) return NULL;
    if (overflow != 0 || start_ll < 0 || start_ll > (long long)count) {
        PyErr_SetString(PyExc_ValueError, "regions_canonical: start is out of range");
        return NULL;
    }
    start = (Py_ssize_t)start_ll;
    for (i = start; i < count; i++) {
        PyObject *op = PyTuple_GetItem(operations, i); /* borrowed */
        int rc;
        if (op == NULL) return NULL;
        Py_INCREF(op);
        rc = rc_operation(op, &classes, &region);
        Py_DECREF(op);
        if (rc < 0) return NULL;
        if (rc == 0) break;
    }
    return PyLong_FromSsize_t(i);
}

/* Item `name` of an exact dict as a borrowed reference; NULL with no exception when absent. */
static PyObject *
rc_item(PyObject *dict, PyObject *name)
{
    /* (dict: an instance dict, or a runtime fragment's state from mr_runtime_state) */
    if (!PyDict_Check(dict)) return mr_runtime_state_get(&rc_runtime_memo, dict, name);
    return PyDict_GetItemWithError(dict, name);
}

/* 1 when `obj` (an exact `cls` instance) has an exact-dict instance dict whose items `names`
 * are exactly the objects `expected` (pointer identity); 0 otherwise; -1 error. When `held` is
 * not NULL, the items `held_names` are returned there as new references (NULL when absent). */
static int
rc_same_items(PyObject *obj, PyObject *cls, const int *names, PyObject *const *expected, int count,
              const int *held_names, PyObject **held, int nheld)
{
    if ((PyObject *)Py_TYPE(obj) != cls) return 0;
    PyObject *const *pf = mr_pf_fields(obj);
    if (pf != NULL) {
        /* a placement fragment's slots (layout.h): an empty one is a missing key */
        int rc = 1, found;
        for (int k = 0; k < count && rc == 1; k++) {
            if (mr_pf_named(pf, rc_names[names[k]], &found) != expected[k] || expected[k] == NULL) rc = 0;
        }
        for (int k = 0; k < nheld && rc == 1; k++) {
            PyObject *value = mr_pf_named(pf, rc_names[held_names[k]], &found);
            if (value == NULL) rc = 0;
            else held[k] = Py_NewRef(value);
        }
        return rc;
    }
    /* (a runtime fragment on its C-owned layout: its state is itself, read by name) */
    PyObject *dict = mr_runtime_state(&rc_runtime_memo, obj);
    if (dict == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear(); /* no instance dict (a C-owned layout not read here): not proven */
        return 0;
    }
    int rc = PyDict_CheckExact(dict) || (PyObject *)Py_TYPE(dict) == rc_runtime_memo.memo.cls ? 1 : 0;
    for (int k = 0; k < count && rc == 1; k++) {
        PyObject *value = rc_item(dict, rc_names[names[k]]);
        if (value == NULL) rc = PyErr_Occurred() ? -1 : 0;
        else if (value != expected[k]) rc = 0;
    }
    for (int k = 0; k < nheld && rc == 1; k++) {
        PyObject *value = rc_item(dict, rc_names[held_names[k]]);
        if (value == NULL) rc = PyErr_Occurred() ? -1 : 0;
        else held[k] = Py_NewRef(value);
    }
    Py_DECREF(dict);
    return rc;
}

PyDoc_STRVAR(regions_canonical_carried_doc,
"regions_canonical_carried(operations, carried, bound_cls, placement_cls, binding_cls, /) -> bool\n"
"--\n\n"
"True when regions_canonical(operations, 0, ...) == len(operations) is already established by\n"
"the proof bind_regions carried (``carried``: its fourth result, a 9-tuple whose last item is\n"
"the proof's facts list): ``operations`` are exactly the carried regions (this bind call's own\n"
"objects, whose fields it stored and nothing else has reached), and every distinct carried\n"
"fragment (an exact ``bound_cls``) still holds an exact ``placement_cls`` placement and an exact\n"
"``binding_cls`` binding whose tensor_id, global_offset, local_shape and nbytes are the very\n"
"objects the proof read (read again now: the adapter can edit them). False otherwise (the caller\n"
"then runs regions_canonical).");

/* Field names read again per distinct fragment. */
static const int rc_bound_fields[] = {RC_PLACEMENT, RC_BINDING};
static const int rc_box_fields[] = {RC_TENSOR_ID, RC_GLOBAL_OFFSET, RC_LOCAL_SHAPE};
static const int rc_size_fields[] = {RC_NBYTES};

/* A hint: the cache lines of obj and the 32 bytes before it (where CPython keeps an instance's
 * dict pointer and collector header). Only addresses are computed; nothing is read. */
static inline void
rc_prefetch_object(const PyObject *obj)
{
    __builtin_prefetch((const void *)((uintptr_t)obj - 32));
    __builtin_prefetch(obj);
}

/* A hint for a carried fragment read a few steps on: its placement and binding objects (read
 * from its own dict as rc_same_items reads them; an exact dict with str keys: no code runs).
 * Nothing is decided here: any unexpected state leaves the hint out (an error is cleared: the
 * read in turn meets the same state and decides). */
static void
rc_prefetch_held(PyObject *fragment, PyObject *bound_cls, const mr_layout_class *blc)
{
    if (fragment == NULL || (PyObject *)Py_TYPE(fragment) != bound_cls) return;
    PyObject *const *bf = mr_layout_fields(fragment, blc);
    if (bf != NULL) {
        /* its slots (the C-owned layout) */
        if (bf[MR_BF_PLACEMENT] != NULL) rc_prefetch_object(bf[MR_BF_PLACEMENT]);
        if (bf[MR_BF_BINDING] != NULL) rc_prefetch_object(bf[MR_BF_BINDING]);
        return;
    }
    PyObject *dict = PyObject_GenericGetDict(fragment, NULL);
    if (dict == NULL) {
        PyErr_Clear();
        return;
    }
    if (PyDict_CheckExact(dict)) {
        for (int k = 0; k < 2; k++) {
            PyObject *value = rc_item(dict, rc_names[rc_bound_fields[k]]); /* borrowed, address only */
            if (value != NULL) rc_prefetch_object(value);
        }
    }
    if (PyErr_Occurred()) PyErr_Clear();
    Py_DECREF(dict);
}

static PyObject *
regions_canonical_carried(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *operations, *carried, *bound_cls, *placement_cls, *binding_cls;
    if (!mr_parse_vector(args, nargs, "O!O!O!O!O!:regions_canonical_carried", &PyTuple_Type, &operations, &PyTuple_Type,
                          &carried, &PyType_Type, &bound_cls, &PyType_Type, &placement_cls, &PyType_Type,
                          &binding_cls)) {
        return NULL;
    }
    if (PyTuple_Size(carried) != 9) Py_RETURN_FALSE;
    /* bound_cls stored in a C-owned layout of BoundWeightFragment's fields: its fragments'
     * placement and binding are loaded from their slots (what their instance dict held) */
    static mr_layout_memo bound_memo;
    mr_layout_class blc;
    (void)mr_bound_layout(&bound_memo, &blc, bound_cls);
    PyObject *regions = PyTuple_GetItem(carried, 0), *frags = PyTuple_GetItem(carried, 1);
    PyObject *facts = PyTuple_GetItem(carried, 8);
    if (regions == NULL || frags == NULL || facts == NULL) return NULL;
    if (!PyList_CheckExact(regions) || !PyList_CheckExact(frags) || !PyList_CheckExact(facts)) Py_RETURN_FALSE;
    Py_ssize_t n = PyTuple_Size(operations), distinct = PyList_Size(frags), nfacts = PyList_Size(facts);
    if (n < 0 || distinct < 0 || nfacts < 0) return NULL;
    if (n == 0 || PyList_Size(regions) != n || distinct > PY_SSIZE_T_MAX / 4 || nfacts != distinct * 4)
        Py_RETURN_FALSE;
    /* Case "this call's own objects": the operations are the carried regions themselves
     * (pointers only); their fields are the immutable values bind_regions stored and proved. */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyTuple_GetItem(operations, i), *region = PyList_GetItem(regions, i);
        if (op == NULL || region == NULL) return NULL;
        if (op != region) Py_RETURN_FALSE;
    }
    /* Case "the adapter can edit it": each distinct fragment's placement and binding values the
     * proof used are read again here and must be those very objects (the facts list holds them,
     * so a replaced value cannot share an address with the one proven). The fragment itself is
     * this call's own bound fragment (exact bound_cls), read again as cheap. */
    for (Py_ssize_t p = 0; p < distinct; p++) {
        PyObject *fragment = PyList_GetItem(frags, p);
        if (fragment == NULL) return NULL;
        /* hints: the fragment eight on, the placement and binding of the one four on */
        if (p + 8 < distinct) rc_prefetch_object(PyList_GetItem(frags, p + 8));
        if (p + 4 < distinct) rc_prefetch_held(PyList_GetItem(frags, p + 4), bound_cls, &blc);
        PyObject *held[2] = {NULL, NULL};
        PyObject *const *bf = mr_layout_fields(fragment, &blc);
        int rc;
        if (bf == NULL) {
            rc = rc_same_items(fragment, bound_cls, NULL, NULL, 0, rc_bound_fields, held, 2);
        } else {
            rc = bf[MR_BF_PLACEMENT] != NULL && bf[MR_BF_BINDING] != NULL; /* empty: a missing key */
            if (rc == 1) {
                held[0] = Py_NewRef(bf[MR_BF_PLACEMENT]);
                held[1] = Py_NewRef(bf[MR_BF_BINDING]);
            }
        }
        PyObject *expected[4];
        for (int k = 0; k < 4 && rc == 1; k++) {
            expected[k] = PyList_GetItem(facts, p * 4 + k);
            if (expected[k] == NULL) rc = -1;
        }
        if (rc == 1) rc = rc_same_items(held[0], placement_cls, rc_box_fields, expected, 3, NULL, NULL, 0);
        if (rc == 1) rc = rc_same_items(held[1], binding_cls, rc_size_fields, expected + 3, 1, NULL, NULL, 0);
        Py_XDECREF(held[0]);
        Py_XDECREF(held[1]);
        if (rc < 0) return NULL;
        if (rc == 0) Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* Both run after the revalidation passes, with the collector off as they are (common.h). */
MR_COLLECTOR_PAUSED_VECTOR(regions_canonical_carried)
MR_COLLECTOR_PAUSED_VECTOR(regions_canonical)

static PyMethodDef regioncheck_methods[] = {
    {"regions_canonical_carried", (PyCFunction)(void (*)(void))regions_canonical_carried_paused, METH_FASTCALL | METH_KEYWORDS,
     regions_canonical_carried_doc},
    {"regions_canonical", (PyCFunction)(void (*)(void))regions_canonical_paused, METH_FASTCALL | METH_KEYWORDS,
     "regions_canonical(operations, start, bound_cls, plain_types, /) -> int\n\n"
     "Index of the first operation at or after start (an exact tuple) not proven to satisfy\n"
     "every TransferRegion rule of spec 8.4, or len(operations)."},
    {NULL, NULL, 0, NULL},
};

int
Init_RegionCheck(PyObject *module)
{
    for (int i = 0; i < RC_NAME_COUNT; i++) {
        if (rc_names[i] == NULL) {
            rc_names[i] = PyUnicode_InternFromString(rc_name_text[i]);
            if (rc_names[i] == NULL) return -1;
        }
    }
    return PyModule_AddFunctions(module, regioncheck_methods);
}
