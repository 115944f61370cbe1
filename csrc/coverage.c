/* coverage: N-D box overlap and exact-cover (spec §11.3). Python glue over the
 * Python-free kernels of coverage_kernels.h: converts the box sequences to int64
 * arrays (range-checked), releases the GIL, maps status codes to exceptions. */
#include "coverage.h"
#include "coverage_kernels.h"

static const char MSG_BUDGET[] = "high-dimensional overlap budget exceeded before validation";
static const char MSG_NDIM[] = "zip() arguments have different lengths";

static Py_ssize_t
cov_len(PyObject *seq)
{
    if (PyList_Check(seq)) return PyList_Size(seq);
    if (PyTuple_Check(seq)) return PyTuple_Size(seq);
    if (PyUnicode_Check(seq) || PyBytes_Check(seq) || PyByteArray_Check(seq) || !PySequence_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "boxes must be given as sequences of integers");
        return -1;
    }
    return PySequence_Size(seq);
}

static int
cov_int64(PyObject *v, int64_t *out)
{
    PyObject *num = PyLong_Check(v) ? (Py_INCREF(v), v) : PyNumber_Index(v);
    if (num == NULL) return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(num, &overflow);
    Py_DECREF(num);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        PyErr_SetString(PyExc_ValueError, "box coordinates must fit in a signed 64-bit integer");
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

/* Read an int sequence of length d (d < 0: any length, stored in *d) into out. */
static int
cov_vector(PyObject *seq, Py_ssize_t *d, int64_t *out, Py_ssize_t cap)
{
    Py_ssize_t n = cov_len(seq);
    if (n < 0) return -1;
    if (*d >= 0 && n != *d) {
        PyErr_SetString(PyExc_ValueError, MSG_NDIM);
        return -1;
    }
    if (n > cap) {
        PyErr_SetString(PyExc_ValueError, MSG_NDIM);
        return -1;
    }
    *d = n;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = mr_seq_item(seq, k);
        if (v == NULL) return -1;
        int rc = cov_int64(v, &out[k]);
        Py_DECREF(v);
        if (rc < 0) return -1;
    }
    return 0;
}

typedef struct {
    size_t n, d;
    int64_t *begin; /* n*d, PyMem */
    int64_t *end;
    int end_overflow; /* some offset + shape exceeds int64 */
} cov_boxes;

static void
cov_boxes_free(cov_boxes *b)
{
    PyMem_Free(b->begin);
    PyMem_Free(b->end);
    b->begin = b->end = NULL;
}

/* end = offset + shape with shape >= 0 checked; overflow recorded, end saturated. */
static int
cov_make_end(int64_t off, int64_t shape, int64_t *end, int *overflow)
{
    if (shape < 0) {
        PyErr_SetString(PyExc_ValueError, "box shape must not be negative");
        return -1;
    }
    if (__builtin_add_overflow(off, shape, end)) {
        *end = INT64_MAX;
        *overflow = 1;
    }
    return 0;
}

static int
cov_parse_boxes(PyObject *offsets, PyObject *shapes, cov_boxes *out)
{
    memset(out, 0, sizeof(*out));
    Py_ssize_t n = cov_len(offsets);
    if (n < 0) return -1;
    Py_ssize_t ns = cov_len(shapes);
    if (ns < 0) return -1;
    if (n != ns) {
        PyErr_SetString(PyExc_ValueError, "offsets and shapes must have the same length");
        return -1;
    }
    if (n == 0) return 0;
    PyObject *first = mr_seq_item(offsets, 0);
    if (first == NULL) return -1;
    Py_ssize_t d = cov_len(first);
    Py_DECREF(first);
    if (d < 0) return -1;
    out->n = (size_t)n;
    out->d = (size_t)d;
    size_t total;
    if (__builtin_mul_overflow((size_t)n, (size_t)d, &total)) {
        PyErr_NoMemory();
        return -1;
    }
    out->begin = mr_alloc_array(total, sizeof(int64_t));
    out->end = mr_alloc_array(total, sizeof(int64_t));
    if (out->begin == NULL || out->end == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t *b = out->begin + (size_t)i * (size_t)d;
        int64_t *e = out->end + (size_t)i * (size_t)d;
        PyObject *o = mr_seq_item(offsets, i);
        if (o == NULL) goto fail;
        Py_ssize_t dd = d;
        int rc = cov_vector(o, &dd, b, d);
        Py_DECREF(o);
        if (rc < 0) goto fail;
        PyObject *s = mr_seq_item(shapes, i);
        if (s == NULL) goto fail;
        dd = d;
        rc = cov_vector(s, &dd, e, d);
        Py_DECREF(s);
        if (rc < 0) goto fail;
        for (Py_ssize_t k = 0; k < d; k++)
            if (cov_make_end(b[k], e[k], &e[k], &out->end_overflow) < 0) goto fail;
    }
    return 0;
fail:
    cov_boxes_free(out);
    return -1;
}

static PyObject *
cov_status_error(int rc)
{
    if (rc == MR_EBUDGET) PyErr_SetString(PyExc_ValueError, MSG_BUDGET);
    else PyErr_NoMemory();
    return NULL;
}

static PyObject *
py_boxes_overlap(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"offsets", "shapes", NULL};
    PyObject *offsets, *shapes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:boxes_overlap", kwlist, &offsets, &shapes)) return NULL;
    cov_boxes bx;
    if (cov_parse_boxes(offsets, shapes, &bx) < 0) return NULL;
    if (bx.end_overflow) {
        cov_boxes_free(&bx);
        PyErr_SetString(PyExc_ValueError, "box end must fit in a signed 64-bit integer");
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mr_boxes_overlap_kernel(bx.n, bx.d, bx.d, NULL, bx.begin, bx.end, MR_OVERLAP_BUDGET);
    Py_END_ALLOW_THREADS
    cov_boxes_free(&bx);
    if (rc < 0) return cov_status_error(rc);
    return PyBool_FromLong(rc == MR_YES);
}

static PyObject *
py_boxes_exactly_cover(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"container_offset", "container_shape", "offsets", "shapes", NULL};
    PyObject *coff, *cshape, *offsets, *shapes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO:boxes_exactly_cover", kwlist, &coff, &cshape, &offsets,
                                     &shapes))
        return NULL;
    cov_boxes bx;
    if (cov_parse_boxes(offsets, shapes, &bx) < 0) return NULL;
    PyObject *result = NULL;
    int64_t *cb = NULL, *ce = NULL;
    if (bx.n == 0) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    cb = mr_alloc_array(bx.d ? bx.d : 1, sizeof(int64_t));
    ce = mr_alloc_array(bx.d ? bx.d : 1, sizeof(int64_t));
    if (cb == NULL || ce == NULL) goto done;
    Py_ssize_t d = (Py_ssize_t)bx.d;
    if (cov_vector(coff, &d, cb, d) < 0) goto done;
    d = (Py_ssize_t)bx.d;
    if (cov_vector(cshape, &d, ce, d) < 0) goto done;
    int container_overflow = 0;
    for (size_t k = 0; k < bx.d; k++)
        if (cov_make_end(cb[k], ce[k], &ce[k], &container_overflow) < 0) goto done;
    if (container_overflow || bx.end_overflow) {
        /* an end beyond int64: outside any representable container, or a container
         * whose volume we refuse to reason about: not covered */
        result = Py_NewRef(Py_False);
        goto done;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mr_boxes_exactly_cover_kernel(bx.d, bx.d, cb, ce, bx.n, NULL, bx.begin, bx.end, MR_OVERLAP_BUDGET);
    Py_END_ALLOW_THREADS
    if (rc < 0) cov_status_error(rc);
    else result = PyBool_FromLong(rc == MR_YES);
done:
    PyMem_Free(cb);
    PyMem_Free(ce);
    cov_boxes_free(&bx);
    return result;
}

static PyMethodDef coverage_methods[] = {
    {"boxes_overlap", (PyCFunction)(void (*)(void))py_boxes_overlap, METH_VARARGS | METH_KEYWORDS,
     "True when two of the boxes intersect on every dimension (spec 11.3)."},
    {"boxes_exactly_cover", (PyCFunction)(void (*)(void))py_boxes_exactly_cover, METH_VARARGS | METH_KEYWORDS,
     "True when the boxes are non-empty, inside the container, sum to its volume and do not overlap."},
    {NULL, NULL, 0, NULL},
};

int
Init_Coverage(PyObject *module)
{
    return PyModule_AddFunctions(module, coverage_methods);
}
