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

#define RC_MAX_NDIM 32

typedef struct {
    Py_ssize_t ndim;  /* overlap rank; every box array below has ndim entries */
    int64_t ov_off[RC_MAX_NDIM];
    int64_t ov_shape[RC_MAX_NDIM];
    int64_t s_off[RC_MAX_NDIM];
    int64_t s_shape[RC_MAX_NDIM];
    int64_t t_off[RC_MAX_NDIM];
    int64_t t_shape[RC_MAX_NDIM];
    Py_ssize_t nloops;  /* common length of the three loop tuples */
    int64_t outer[RC_MAX_NDIM];
    int64_t s_str[RC_MAX_NDIM];
    int64_t t_str[RC_MAX_NDIM];
    int64_t s_base;
    int64_t t_base;
    int64_t inner;
    int64_t s_nbytes;
    int64_t t_nbytes;
} rc_region;

/* -- kernel (Python-free) ------------------------------------------------------------------ */

/* Spec §8.4 step 6: the overlap box lies inside the fragment box. */
static int
rc_box_inside(const int64_t *f_off, const int64_t *f_shape, const int64_t *off, const int64_t *shape,
              Py_ssize_t ndim)
{
    for (Py_ssize_t d = 0; d < ndim; d++) {
        int64_t f_end, end;
        if (off[d] < f_off[d]) return 0;
        if (mr_add_i64(f_off[d], f_shape[d], &f_end) < 0) return 0;
        if (mr_add_i64(off[d], shape[d], &end) < 0) return 0;
        if (end > f_end) return 0;
    }
    return 1;
}

/* Spec §8.4 step 11 (stricter: every extent must be positive): the itemsize, or 0. */
static int64_t
rc_itemsize(int64_t nbytes, const int64_t *shape, Py_ssize_t ndim)
{
    int64_t volume = 1;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        if (shape[d] <= 0) return 0;
        if (mr_mul_i64(volume, shape[d], &volume) < 0) return 0;
    }
    if (nbytes <= 0 || nbytes % volume != 0) return 0;
    return nbytes / volume;
}

/* Row-major byte strides of the full local shape (spec §11.7); -1 on overflow. */
static int
rc_strides(const int64_t *shape, Py_ssize_t ndim, int64_t itemsize, int64_t *out)
{
    int64_t acc = itemsize;
    for (Py_ssize_t d = ndim - 1; d >= 0; d--) {
        out[d] = acc;
        if (d > 0 && mr_mul_i64(acc, shape[d], &acc) < 0) return -1;
    }
    return 0;
}

/* Σ (ov_off[d] - f_off[d]) * strides[d]; -1 on overflow. */
static int
rc_base(const int64_t *ov_off, const int64_t *f_off, const int64_t *strides, Py_ssize_t ndim,
        int64_t *out)
{
    int64_t base = 0;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        int64_t diff, term;
        if (__builtin_sub_overflow(ov_off[d], f_off[d], &diff)) return -1;
        if (mr_mul_i64(diff, strides[d], &term) < 0) return -1;
        if (mr_add_i64(base, term, &base) < 0) return -1;
    }
    *out = base;
    return 0;
}

/* Spec §8.4 step 13 for one side. */
static int
rc_strides_disjoint(const rc_region *r, const int64_t *strides)
{
    int64_t span = r->inner;
    for (Py_ssize_t i = r->nloops - 1; i >= 0; i--) {
        int64_t grow;
        if (r->outer[i] > 1 && strides[i] < span) return 0;
        if (mr_mul_i64(r->outer[i] - 1, strides[i], &grow) < 0) return 0;
        if (mr_add_i64(span, grow, &span) < 0) return 0;
    }
    return 1;
}

/* Spec §8.4 step 14 (``validate_bounds``) for one side. */
static int
rc_within(const rc_region *r, int64_t base, const int64_t *strides, int64_t nbytes)
{
    int64_t end;
    if (mr_add_i64(base, r->inner, &end) < 0) return 0;
    for (Py_ssize_t i = 0; i < r->nloops; i++) {
        int64_t grow;
        if (mr_mul_i64(r->outer[i] - 1, strides[i], &grow) < 0) return 0;
        if (mr_add_i64(end, grow, &end) < 0) return 0;
    }
    return end <= nbytes;
}

/* 1 when every rule of spec §8.4 steps 4-14 provably holds for r, else 0. (Steps 1-3, the
 * tuple/int types and the tensor ids, are established by the glue.) */
static int
rc_region_canonical(const rc_region *r)
{
    const Py_ssize_t ndim = r->ndim;
    int64_t s_strides[RC_MAX_NDIM], t_strides[RC_MAX_NDIM];
    int64_t itemsize, s_base, t_base, inner, volume, total;
    Py_ssize_t suffix;

    if (ndim <= 0 || ndim > RC_MAX_NDIM || r->nloops < 0 || r->nloops > RC_MAX_NDIM) return 0;
    for (Py_ssize_t d = 0; d < ndim; d++) {                                         /* step 5 */
        if (r->ov_off[d] < 0 || r->ov_shape[d] <= 0) return 0;
    }
    if (!rc_box_inside(r->s_off, r->s_shape, r->ov_off, r->ov_shape, ndim)) return 0; /* step 6 */
    if (!rc_box_inside(r->t_off, r->t_shape, r->ov_off, r->ov_shape, ndim)) return 0;
    if (r->s_base < 0 || r->t_base < 0 || r->inner <= 0) return 0;                  /* step 8 */
    for (Py_ssize_t i = 0; i < r->nloops; i++) {                                    /* step 10 */
        if (r->outer[i] <= 0 || r->s_str[i] < 0 || r->t_str[i] < 0) return 0;
    }
    itemsize = rc_itemsize(r->s_nbytes, r->s_shape, ndim);                          /* step 11 */
    if (itemsize <= 0 || itemsize != rc_itemsize(r->t_nbytes, r->t_shape, ndim)) return 0;
    /* step 12: the canonical geometry of spec §11.7 */
    if (rc_strides(r->s_shape, ndim, itemsize, s_strides) < 0) return 0;
    if (rc_strides(r->t_shape, ndim, itemsize, t_strides) < 0) return 0;
    if (rc_base(r->ov_off, r->s_off, s_strides, ndim, &s_base) < 0) return 0;
    if (rc_base(r->ov_off, r->t_off, t_strides, ndim, &t_base) < 0) return 0;
    if (mr_mul_i64(r->ov_shape[ndim - 1], itemsize, &inner) < 0) return 0;
    suffix = ndim - 1;
    for (Py_ssize_t d = ndim - 2; d >= 0; d--) {
        if (s_strides[d] != inner || t_strides[d] != inner) break;
        if (mr_mul_i64(inner, r->ov_shape[d], &inner) < 0) return 0;
        suffix = d;
    }
    volume = itemsize;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        if (mr_mul_i64(volume, r->ov_shape[d], &volume) < 0) return 0;
    }
    total = r->inner;
    for (Py_ssize_t i = 0; i < r->nloops; i++) {
        if (mr_mul_i64(total, r->outer[i], &total) < 0) return 0;
    }
    if (total != volume) return 0;
    if (r->s_base != s_base || r->t_base != t_base) return 0;
    if (r->inner != inner || r->nloops != suffix) return 0;
    for (Py_ssize_t i = 0; i < suffix; i++) {
        if (r->outer[i] != r->ov_shape[i] || r->s_str[i] != s_strides[i] || r->t_str[i] != t_strides[i])
            return 0;
    }
    if (!rc_strides_disjoint(r, r->s_str) || !rc_strides_disjoint(r, r->t_str)) return 0; /* 13 */
    if (!rc_within(r, r->s_base, r->s_str, r->s_nbytes)) return 0;                   /* step 14 */
    if (!rc_within(r, r->t_base, r->t_str, r->t_nbytes)) return 0;
    return 1;
}

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

#define RC_MAX_PLAIN_TYPES 8

/* The caller's classes for one call: the bound fragment class and the plain dataclasses. */
typedef struct {
    PyObject *bound_cls;                        /* borrowed */
    PyObject *plain[RC_MAX_PLAIN_TYPES];        /* borrowed */
    Py_ssize_t nplain;
} rc_classes;

/* An object whose fields are read: through its instance dict when its exact type is one of the
 * caller's plain dataclasses (no class-level attribute shadows the fields read: pinned by the
 * tests), otherwise with PyObject_GetAttr. */
typedef struct {
    PyObject *obj;   /* borrowed */
    PyObject *dict;  /* owned, or NULL */
} rc_reader;

/* 0 ok, -1 error. */
static int
rc_open(PyObject *obj, const rc_classes *classes, rc_reader *reader)
{
    reader->obj = obj;
    reader->dict = NULL;
    for (Py_ssize_t i = 0; i < classes->nplain; i++) {
        if ((PyObject *)Py_TYPE(obj) == classes->plain[i]) {
            reader->dict = PyObject_GenericGetDict(obj, NULL);
            if (reader->dict == NULL) return -1;
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

/* Reads field `name` into *out (a new reference). 1 ok; 0 not proven (absent from the instance
 * dict, or an AttributeError, cleared: Python then decides); -1 error. */
static int
rc_get(const rc_reader *reader, PyObject *name, PyObject **out)
{
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

/* Reads field `name` as an exact int in int64 range. 1 ok, 0 not proven, -1 error. */
static int
rc_field_i64(const rc_reader *reader, PyObject *name, int64_t *out)
{
    PyObject *value;
    int rc = rc_get(reader, name, &value);
    if (rc != 1) return rc;
    rc = rc_read_i64(value, out);
    Py_DECREF(value);
    return rc;
}

/* Reads field `name` as an exact tuple of exact int64 ints, at most RC_MAX_NDIM long.
 * 1 ok (*len set), 0 not proven, -1 error. */
static int
rc_field_tuple(const rc_reader *reader, PyObject *name, int64_t *out, Py_ssize_t *len)
{
    PyObject *value;
    Py_ssize_t n;
    int rc = rc_get(reader, name, &value);
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
 * ``placement``, nbytes from its ``binding``. 1 ok, 0 not proven, -1 error. */
static int
rc_read_side(PyObject *fragment, const rc_classes *classes, Py_ssize_t ndim, rc_side *side)
{
    rc_reader frag, box, sized;
    PyObject *placement = NULL, *binding = NULL;
    Py_ssize_t n = 0;
    int rc = 1;
    side->tensor_id = NULL;
    box.dict = sized.dict = NULL;
    if (rc_open(fragment, classes, &frag) < 0) return -1;
    if ((PyObject *)Py_TYPE(fragment) == classes->bound_cls) {
        rc = rc_get(&frag, rc_names[RC_PLACEMENT], &placement);
        if (rc == 1) rc = rc_get(&frag, rc_names[RC_BINDING], &binding);
        if (rc == 1 && rc_open(placement, classes, &box) < 0) rc = -1;
        if (rc == 1 && rc_open(binding, classes, &sized) < 0) rc = -1;
    } else {
        box = frag;
        sized = frag;
        frag.dict = NULL; /* box and sized borrow it; released once below */
        sized.dict = NULL;
    }
    if (rc == 1) rc = rc_get(&box, rc_names[RC_TENSOR_ID], &side->tensor_id);
    if (rc == 1) {
        rc = rc_field_tuple(&box, rc_names[RC_GLOBAL_OFFSET], side->off, &n);
        if (rc == 1 && n != ndim) rc = 0;
    }
    if (rc == 1) {
        rc = rc_field_tuple(&box, rc_names[RC_LOCAL_SHAPE], side->shape, &n);
        if (rc == 1 && n != ndim) rc = 0;
    }
    if (rc == 1) {
        if (sized.obj == box.obj) sized.dict = box.dict; /* borrowed for this read */
        rc = rc_field_i64(&sized, rc_names[RC_NBYTES], side->nbytes);
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
    rc = rc_get(&reader, rc_names[RC_TENSOR_ID], &tensor_id);
    if (rc == 1 && !(PyUnicode_CheckExact(tensor_id) && PyUnicode_GetLength(tensor_id) > 0)) rc = 0;
    if (rc == 1) rc = rc_field_tuple(&reader, rc_names[RC_OVERLAP_OFFSET], r->ov_off, &r->ndim);
    if (rc == 1) rc = rc_field_tuple(&reader, rc_names[RC_OVERLAP_SHAPE], r->ov_shape, &n1);
    if (rc == 1 && (r->ndim == 0 || n1 != r->ndim)) rc = 0;
    if (rc == 1) rc = rc_field_i64(&reader, rc_names[RC_SOURCE_BASE_OFFSET], &r->s_base);
    if (rc == 1) rc = rc_field_i64(&reader, rc_names[RC_TARGET_BASE_OFFSET], &r->t_base);
    if (rc == 1) rc = rc_field_i64(&reader, rc_names[RC_INNER_BYTES], &r->inner);
    if (rc == 1) rc = rc_field_tuple(&reader, rc_names[RC_OUTER_LOOP_COUNTS], r->outer, &r->nloops);
    if (rc == 1) rc = rc_field_tuple(&reader, rc_names[RC_SOURCE_STRIDES], r->s_str, &n2);
    if (rc == 1) rc = rc_field_tuple(&reader, rc_names[RC_TARGET_STRIDES], r->t_str, &n3);
    if (rc == 1 && (n2 != r->nloops || n3 != r->nloops)) rc = 0;
    if (rc == 1) rc = rc_get(&reader, rc_names[RC_SOURCE], &source);
    if (rc == 1) rc = rc_get(&reader, rc_names[RC_TARGET], &target);
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
regions_canonical(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *operations, *start_obj, *bound_cls, *plain_types;
    Py_ssize_t count, start, i;
    int overflow = 0;
    long long start_ll;
    rc_region region;
    rc_classes classes;

    if (!PyArg_ParseTuple(args, "OOOO:regions_canonical", &operations, &start_obj, &bound_cls, &plain_types))
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
    classes.nplain = PyTuple_Size(plain_types);
    if (classes.nplain < 0) return NULL;
    if (classes.nplain > RC_MAX_PLAIN_TYPES) {
        PyErr_SetString(PyExc_ValueError, "regions_canonical: too many plain_types");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < classes.nplain; k++) {
        PyObject *cls = PyTuple_GetItem(plain_types, k); /* borrowed; the tuple is held by args */
        if (cls == NULL) return NULL;
        if (!PyType_Check(cls)) {
            PyErr_SetString(PyExc_TypeError, "regions_canonical: plain_types must be a tuple of types");
            return NULL;
        }
        classes.plain[k] = cls;
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

static PyMethodDef regioncheck_methods[] = {
    {"regions_canonical", regions_canonical, METH_VARARGS,
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
