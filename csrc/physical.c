/* physical: target physical-range conflict detection for bound plans (spec §12.6).
 *
 * The Python layer groups bound operations by target address space and target
 * fragment ("groups": the fragment's byte extent and whether the group's regions
 * have pairwise disjoint logical boxes), and hands this file one flat description
 * of "segment streams": a stream is either one whole fragment (a single segment,
 * free of charge) or one operation's strided segments (base, inner bytes, loop
 * counts, strides), charged one budget unit each.
 *
 * Per address space, a structural proof (streams inside their fragment extents,
 * extents pairwise disjoint, boxes disjoint within each group) shows that no two
 * segments overlap; the space then only compares its segment count with the
 * budget. Otherwise the streams are expanded lazily, k-way merged in (begin, end,
 * operation index) order and swept; the first overlap that is not a tolerated
 * declared alias is reported, or the budget runs out first.
 *
 * The kernel (mr_physical_sweep) is Python-free: plain C arrays in, a status
 * code out. The glue (physical_sweep) converts and range-checks the inputs. */
#include "physical.h"
#include "physical_kernels.h"

/* Kernel status codes. */
#define MR_PHYS_OK 0
#define MR_PHYS_CONFLICT 1
#define MR_PHYS_BUDGET 2
#define MR_PHYS_OVERFLOW 3
#define MR_PHYS_NOMEM (-1)

/* Maximum loop rank accepted for one stream (real tensors have a handful). */
#define MR_PHYS_MAX_RANK 64

typedef struct {
    uint64_t base;      /* absolute address of the first segment */
    uint64_t inner;     /* bytes per segment (>= 1) */
    uint64_t offset;    /* current offset from base */
    uint64_t begin;     /* current segment [begin, end) */
    uint64_t end;
    int64_t op;         /* operation index, the merge tie-breaker */
    size_t space;       /* address-space id, dense from 0 (its group's space) */
    size_t group;       /* target-fragment group */
    size_t loop_off;    /* first loop in the counts/strides/cursor arrays */
    size_t rank;        /* number of outer loops */
    int charged;        /* 1: each segment costs one budget unit */
} mr_stream;

/* Strict (begin, end, op) ordering of the current segments of two streams. */
static int
stream_less(const mr_stream *a, const mr_stream *b)
{
    if (a->begin != b->begin) return a->begin < b->begin;
    if (a->end != b->end) return a->end < b->end;
    return a->op < b->op;
}

static void
heap_sift_down(size_t *heap, size_t n, size_t pos, const mr_stream *streams)
{
    for (;;) {
        size_t left = 2 * pos + 1;
        size_t best = pos;
        if (left < n && stream_less(&streams[heap[left]], &streams[heap[best]])) best = left;
        if (left + 1 < n && stream_less(&streams[heap[left + 1]], &streams[heap[best]])) best = left + 1;
        if (best == pos) return;
        size_t tmp = heap[pos];
        heap[pos] = heap[best];
        heap[best] = tmp;
        pos = best;
    }
}

static void
heap_sift_up(size_t *heap, size_t pos, const mr_stream *streams)
{
    while (pos > 0) {
        size_t parent = (pos - 1) / 2;
        if (!stream_less(&streams[heap[pos]], &streams[heap[parent]])) return;
        size_t tmp = heap[pos];
        heap[pos] = heap[parent];
        heap[parent] = tmp;
        pos = parent;
    }
}

/* Set [begin, end) from base + offset; 0 or MR_PHYS_OVERFLOW. */
static int
stream_locate(mr_stream *s)
{
    if (mr_add_u64(s->base, s->offset, &s->begin) < 0) return MR_PHYS_OVERFLOW;
    if (mr_add_u64(s->begin, s->inner, &s->end) < 0) return MR_PHYS_OVERFLOW;
    return MR_PHYS_OK;
}

/* Advance to the next segment in row-major mixed-radix order (last loop fastest).
 * Returns 1 when a segment follows, 0 when exhausted, or MR_PHYS_OVERFLOW (negated). */
static int
stream_advance(mr_stream *s, const uint64_t *counts, const uint64_t *strides, uint64_t *cursor)
{
    size_t d = s->rank;
    while (d > 0) {
        d--;
        size_t k = s->loop_off + d;
        if (cursor[k] + 1 < counts[k]) {
            cursor[k]++;
            if (mr_add_u64(s->offset, strides[k], &s->offset) < 0) return -MR_PHYS_OVERFLOW;
            return 1;
        }
        /* Wrap this loop: remove exactly what was added while walking it. */
        s->offset -= cursor[k] * strides[k];
        cursor[k] = 0;
    }
    return 0;
}

static int
alias_tolerated(int64_t previous, int64_t current, const int64_t *alias_class, const int64_t *tensor_key)
{
    if (alias_class == NULL || tensor_key == NULL) return 0;
    int64_t cls = alias_class[previous];
    return cls >= 0 && cls == alias_class[current] && tensor_key[previous] != tensor_key[current];
}

/* Sweep the streams of one address space (indices members[0..n)).
 * On conflict, *bad_op and *prev_op name the current and previous operations. */
static int
sweep_space(mr_stream *streams, const size_t *members, size_t n, const uint64_t *counts,
            const uint64_t *strides, uint64_t *cursor, const int64_t *alias_class,
            const int64_t *tensor_key, uint64_t budget, size_t *heap, int64_t *bad_op,
            int64_t *prev_op)
{
    uint64_t used = 0;
    size_t heap_len = 0;
    /* Prime: the first segment of every stream, in the given order. */
    for (size_t i = 0; i < n; i++) {
        mr_stream *s = &streams[members[i]];
        if (s->charged) {
            if (used >= budget) return MR_PHYS_BUDGET;
            used++;
        }
        int rc = stream_locate(s);
        if (rc != MR_PHYS_OK) {
            *bad_op = s->op;
            return rc;
        }
        heap[heap_len] = members[i];
        heap_sift_up(heap, heap_len, streams);
        heap_len++;
    }
    int have_previous = 0;
    uint64_t previous_begin = 0, previous_end = 0;
    int64_t previous_op = -1;
    while (heap_len > 0) {
        mr_stream *s = &streams[heap[0]];
        if (have_previous && s->begin < previous_end) {
            if (!(s->begin == previous_begin && s->end == previous_end
                  && alias_tolerated(previous_op, s->op, alias_class, tensor_key))) {
                *bad_op = s->op;
                *prev_op = previous_op;
                return MR_PHYS_CONFLICT;
            }
        }
        else {
            have_previous = 1;
            previous_begin = s->begin;
            previous_end = s->end > previous_end ? s->end : previous_end;
            previous_op = s->op;
        }
        int more = stream_advance(s, counts, strides, cursor);
        if (more < 0) {
            *bad_op = s->op;
            return -more;
        }
        if (more == 0) {
            heap_len--;
            heap[0] = heap[heap_len];
        }
        else {
            if (s->charged) {
                if (used >= budget) return MR_PHYS_BUDGET;
                used++;
            }
            int rc = stream_locate(s);
            if (rc != MR_PHYS_OK) {
                *bad_op = s->op;
                return rc;
            }
        }
        heap_sift_down(heap, heap_len, 0, streams);
    }
    return MR_PHYS_OK;
}

typedef struct {
    uint64_t address;   /* target fragment extent [address, address + nbytes) */
    uint64_t nbytes;
    size_t space;
    int disjoint;       /* 1: the group's regions have pairwise disjoint logical boxes */
} mr_group;

typedef struct {
    uint64_t begin;
    uint64_t end;
} mr_extent;

static int
compare_extent(const void *a, const void *b)
{
    const mr_extent *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* End of the last byte a stream writes, checked; 0 on success, -1 on overflow. */
static int
stream_extent_end(const mr_stream *s, const uint64_t *counts, const uint64_t *strides, uint64_t *end)
{
    uint64_t span = s->inner;
    for (size_t d = 0; d < s->rank; d++) {
        uint64_t step;
        if (mr_mul_u64(counts[s->loop_off + d] - 1, strides[s->loop_off + d], &step) < 0) return -1;
        if (mr_add_u64(span, step, &span) < 0) return -1;
    }
    return mr_add_u64(s->base, span, end);
}

/* Number of segments a stream emits (saturating at UINT64_MAX). */
static uint64_t
stream_segments(const mr_stream *s, const uint64_t *counts)
{
    uint64_t total = 1;
    for (size_t d = 0; d < s->rank; d++) {
        if (mr_mul_u64(total, counts[s->loop_off + d], &total) < 0) return UINT64_MAX;
    }
    return total;
}

/* Structural proof that a space has no physical overlap at all: every stream stays inside its
 * group's fragment extent, the extents of the space's groups are pairwise disjoint, and within
 * each group the regions' logical boxes are pairwise disjoint (the canonical row-major layout of
 * a fragment maps distinct elements to distinct bytes; regions of one group share a tensor, so
 * an overlap there is never a tolerated alias). Returns 1 when proven, 0 when the exact sweep
 * must decide. ``extents`` is scratch for the space's groups. */
static int
space_provably_disjoint(const mr_stream *streams, const size_t *members, size_t n, const uint64_t *counts,
                        const uint64_t *strides, const mr_group *groups, const size_t *space_groups,
                        size_t n_space_groups, mr_extent *extents)
{
    for (size_t i = 0; i < n; i++) {
        const mr_stream *s = &streams[members[i]];
        const mr_group *g = &groups[s->group];
        uint64_t end, extent_end;
        if (!g->disjoint || s->base < g->address) return 0;
        if (stream_extent_end(s, counts, strides, &end) < 0) return 0;
        if (mr_add_u64(g->address, g->nbytes, &extent_end) < 0) return 0;
        if (end > extent_end) return 0;
    }
    for (size_t i = 0; i < n_space_groups; i++) {
        const mr_group *g = &groups[space_groups[i]];
        extents[i].begin = g->address;
        if (mr_add_u64(g->address, g->nbytes, &extents[i].end) < 0) return 0;
    }
    if (n_space_groups > 1) qsort(extents, n_space_groups, sizeof(mr_extent), compare_extent);
    for (size_t i = 1; i < n_space_groups; i++) {
        if (extents[i].begin < extents[i - 1].end) return 0;
    }
    return 1;
}

/* Kernel: check every address space in id order, each with its own budget. A space whose
 * disjointness is proven structurally only needs its segment count compared with the budget
 * (with no overlap anywhere, the lazy sweep would consume every segment); any other space is
 * decided by the exact lazy k-way merge and sweep.
 * Returns a status code; MR_PHYS_NOMEM when scratch memory cannot be obtained. */
static int
mr_physical_sweep(mr_stream *streams, size_t n_streams, const mr_group *groups, size_t n_groups,
                  size_t n_spaces, const uint64_t *counts, const uint64_t *strides, size_t n_loops,
                  const int64_t *alias_class, const int64_t *tensor_key, uint64_t budget, int64_t *bad_op,
                  int64_t *prev_op)
{
    int status = MR_PHYS_NOMEM;
    size_t *order = NULL, *start = NULL, *heap = NULL, *group_order = NULL, *group_start = NULL, *fill = NULL;
    uint64_t *cursor = NULL;
    mr_extent *extents = NULL;
    size_t space_slots;
    if (__builtin_add_overflow(n_spaces, (size_t)1, &space_slots)) return MR_PHYS_NOMEM;
    if (n_streams > SIZE_MAX / sizeof(size_t) || space_slots > SIZE_MAX / sizeof(size_t)
        || n_loops > SIZE_MAX / sizeof(uint64_t) || n_groups > SIZE_MAX / sizeof(mr_extent)) {
        return MR_PHYS_NOMEM;
    }
    order = malloc((n_streams ? n_streams : 1) * sizeof(size_t));
    heap = malloc((n_streams ? n_streams : 1) * sizeof(size_t));
    group_order = malloc((n_groups ? n_groups : 1) * sizeof(size_t));
    extents = malloc((n_groups ? n_groups : 1) * sizeof(mr_extent));
    start = calloc(space_slots, sizeof(size_t));
    group_start = calloc(space_slots, sizeof(size_t));
    fill = calloc(space_slots, sizeof(size_t));
    cursor = calloc(n_loops ? n_loops : 1, sizeof(uint64_t));
    if (order == NULL || heap == NULL || group_order == NULL || extents == NULL || start == NULL
        || group_start == NULL || fill == NULL || cursor == NULL) {
        goto done;
    }
    /* Counting sorts of the streams and of the groups by space, stable within a space. */
    for (size_t i = 0; i < n_streams; i++) start[streams[i].space + 1]++;
    for (size_t i = 0; i < n_groups; i++) group_start[groups[i].space + 1]++;
    for (size_t k = 0; k < n_spaces; k++) {
        start[k + 1] += start[k];
        group_start[k + 1] += group_start[k];
    }
    for (size_t k = 0; k < n_spaces; k++) fill[k] = start[k];
    for (size_t i = 0; i < n_streams; i++) order[fill[streams[i].space]++] = i;
    for (size_t k = 0; k < n_spaces; k++) fill[k] = group_start[k];
    for (size_t i = 0; i < n_groups; i++) group_order[fill[groups[i].space]++] = i;
    status = MR_PHYS_OK;
    for (size_t k = 0; k < n_spaces && status == MR_PHYS_OK; k++) {
        const size_t *members = order + start[k];
        size_t n = start[k + 1] - start[k];
        if (space_provably_disjoint(streams, members, n, counts, strides, groups, group_order + group_start[k],
                                    group_start[k + 1] - group_start[k], extents)) {
            uint64_t total = 0;
            for (size_t i = 0; i < n; i++) {
                const mr_stream *s = &streams[members[i]];
                if (s->charged && mr_add_u64(total, stream_segments(s, counts), &total) < 0) total = UINT64_MAX;
            }
            if (total > budget) status = MR_PHYS_BUDGET;
            continue;
        }
        status = sweep_space(streams, members, n, counts, strides, cursor, alias_class, tensor_key, budget, heap,
                             bad_op, prev_op);
    }
done:
    free(order);
    free(heap);
    free(group_order);
    free(extents);
    free(start);
    free(group_start);
    free(fill);
    free(cursor);
    return status;
}

/* ---------------------------------------------------------------------------
 * Glue */

/* Read item i of a list as an unsigned 64-bit integer in [minimum, maximum]. */
static int
list_u64(PyObject *list, Py_ssize_t i, uint64_t minimum, uint64_t maximum, const char *what,
         uint64_t *out)
{
    PyObject *item = PyList_GetItem(list, i); /* borrowed */
    if (item == NULL) return -1;
    if (!PyLong_Check(item)) {
        PyErr_Format(PyExc_TypeError, "physical_sweep: %s must be an integer", what);
        return -1;
    }
    unsigned long long value = PyLong_AsUnsignedLongLong(item);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "physical_sweep: %s is outside the unsigned 64-bit range", what);
        return -1;
    }
    if ((uint64_t)value < minimum || (uint64_t)value > maximum) {
        PyErr_Format(PyExc_ValueError, "physical_sweep: %s is out of range", what);
        return -1;
    }
    *out = (uint64_t)value;
    return 0;
}

/* Convert an optional list of n signed keys (each >= -1) into a new array. */
static int
convert_keys(PyObject *obj, size_t n, const char *what, int64_t **out)
{
    *out = NULL;
    if (obj == Py_None) return 0;
    if (!PyList_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "physical_sweep: %s must be a list or None", what);
        return -1;
    }
    if ((size_t)PyList_Size(obj) != n) {
        PyErr_Format(PyExc_ValueError, "physical_sweep: %s must have one entry per operation", what);
        return -1;
    }
    int64_t *keys = mr_alloc_array(n, sizeof(int64_t));
    if (keys == NULL) return -1;
    for (size_t i = 0; i < n; i++) {
        PyObject *item = PyList_GetItem(obj, (Py_ssize_t)i);
        if (item == NULL) goto fail;
        if (!PyLong_Check(item)) {
            PyErr_Format(PyExc_TypeError, "physical_sweep: %s must contain integers", what);
            goto fail;
        }
        long long value = PyLong_AsLongLong(item);
        if (value == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "physical_sweep: %s is outside the 64-bit range", what);
            goto fail;
        }
        if (value < -1) {
            PyErr_Format(PyExc_ValueError, "physical_sweep: %s must be at least -1", what);
            goto fail;
        }
        keys[i] = (int64_t)value;
    }
    *out = keys;
    return 0;
fail:
    PyMem_Free(keys);
    return -1;
}

PyDoc_STRVAR(physical_sweep_doc,
"physical_sweep(streams, groups, n_spaces, n_ops, alias_class, tensor_key, budget)\n"
"--\n\n"
"Sweep target segment streams for physical-range conflicts (spec 12.6).\n\n"
"``groups`` is a flat list of ints, per target-fragment group ``space, address, nbytes,\n"
"disjoint``. ``streams`` is a flat list of ints; each stream is ``group, op, charged, base,\n"
"inner, rank`` followed by ``rank`` loop counts and ``rank`` strides. Returns None when no\n"
"conflict exists, else ``(status, op, previous_op)`` with status 1 (conflict),\n"
"2 (segment budget exceeded) or 3 (address arithmetic overflow).");

static PyObject *
physical_sweep(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *streams_obj, *groups_obj, *alias_obj, *tensor_obj, *budget_obj;
    Py_ssize_t n_spaces_arg, n_ops_arg;
    if (!PyArg_ParseTuple(args, "O!O!nnOOO:physical_sweep", &PyList_Type, &streams_obj, &PyList_Type,
                          &groups_obj, &n_spaces_arg, &n_ops_arg, &alias_obj, &tensor_obj, &budget_obj)) {
        return NULL;
    }
    if (n_spaces_arg < 0 || n_ops_arg < 0) {
        PyErr_SetString(PyExc_ValueError, "physical_sweep: counts must be non-negative");
        return NULL;
    }
    if (!PyLong_Check(budget_obj)) {
        PyErr_SetString(PyExc_TypeError, "physical_sweep: budget must be an integer");
        return NULL;
    }
    unsigned long long budget_value = PyLong_AsUnsignedLongLong(budget_obj);
    if (budget_value == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "physical_sweep: budget is outside the unsigned 64-bit range");
        return NULL;
    }
    size_t n_spaces = (size_t)n_spaces_arg;
    size_t n_ops = (size_t)n_ops_arg;
    PyObject *result = NULL;
    mr_stream *streams = NULL;
    mr_group *groups = NULL;
    uint64_t *counts = NULL, *strides = NULL;
    int64_t *alias_class = NULL, *tensor_key = NULL;
    Py_ssize_t total = PyList_Size(streams_obj);
    if (total < 0) return NULL;
    Py_ssize_t group_items = PyList_Size(groups_obj);
    if (group_items < 0) return NULL;
    if (group_items % 4 != 0) {
        PyErr_SetString(PyExc_ValueError, "physical_sweep: groups must hold four integers per group");
        return NULL;
    }
    size_t n_groups = (size_t)(group_items / 4);

    /* Pass 1: count streams and loops, validating the framing. */
    size_t n_streams = 0, n_loops = 0;
    for (Py_ssize_t pos = 0; pos < total;) {
        uint64_t rank;
        if (total - pos < 6) {
            PyErr_SetString(PyExc_ValueError, "physical_sweep: truncated stream header");
            return NULL;
        }
        if (list_u64(streams_obj, pos + 5, 0, MR_PHYS_MAX_RANK, "loop rank", &rank) < 0) return NULL;
        if ((uint64_t)(total - pos - 6) < 2 * rank) {
            PyErr_SetString(PyExc_ValueError, "physical_sweep: truncated stream loops");
            return NULL;
        }
        pos += 6 + (Py_ssize_t)(2 * rank);
        n_streams++;
        n_loops += (size_t)rank;
    }
    streams = mr_alloc_array(n_streams, sizeof(mr_stream));
    groups = mr_alloc_array(n_groups, sizeof(mr_group));
    counts = mr_alloc_array(n_loops, sizeof(uint64_t));
    strides = mr_alloc_array(n_loops, sizeof(uint64_t));
    if (streams == NULL || groups == NULL || counts == NULL || strides == NULL) goto done;
    {
        uint64_t space_max = n_spaces ? (uint64_t)(n_spaces - 1) : 0;
        for (size_t g = 0; g < n_groups; g++) {
            Py_ssize_t pos = (Py_ssize_t)(4 * g);
            uint64_t space, disjoint;
            if (n_spaces == 0) {
                PyErr_SetString(PyExc_ValueError, "physical_sweep: group without address space");
                goto done;
            }
            if (list_u64(groups_obj, pos, 0, space_max, "group space", &space) < 0) goto done;
            if (list_u64(groups_obj, pos + 1, 0, UINT64_MAX, "group address", &groups[g].address) < 0) goto done;
            if (list_u64(groups_obj, pos + 2, 0, UINT64_MAX, "group nbytes", &groups[g].nbytes) < 0) goto done;
            if (list_u64(groups_obj, pos + 3, 0, 1, "group disjoint flag", &disjoint) < 0) goto done;
            groups[g].space = (size_t)space;
            groups[g].disjoint = (int)disjoint;
        }
    }
    if (convert_keys(alias_obj, n_ops, "alias_class", &alias_class) < 0) goto done;
    if (convert_keys(tensor_obj, n_ops, "tensor_key", &tensor_key) < 0) goto done;
    if ((alias_class == NULL) != (tensor_key == NULL)) {
        PyErr_SetString(PyExc_ValueError, "physical_sweep: alias_class and tensor_key go together");
        goto done;
    }

    /* Pass 2: convert. */
    {
        Py_ssize_t pos = 0;
        size_t loop = 0;
        uint64_t group_max = n_groups ? (uint64_t)(n_groups - 1) : 0;
        uint64_t op_max = n_ops ? (uint64_t)(n_ops - 1) : 0;
        for (size_t i = 0; i < n_streams; i++) {
            mr_stream *s = &streams[i];
            uint64_t group, op, charged, rank;
            if (n_groups == 0 || n_ops == 0) {
                PyErr_SetString(PyExc_ValueError, "physical_sweep: stream without group or operation");
                goto done;
            }
            if (list_u64(streams_obj, pos, 0, group_max, "group", &group) < 0) goto done;
            if (list_u64(streams_obj, pos + 1, 0, op_max, "operation index", &op) < 0) goto done;
            if (list_u64(streams_obj, pos + 2, 0, 1, "charged flag", &charged) < 0) goto done;
            if (list_u64(streams_obj, pos + 3, 0, UINT64_MAX, "base address", &s->base) < 0) goto done;
            if (list_u64(streams_obj, pos + 4, 1, UINT64_MAX, "inner bytes", &s->inner) < 0) goto done;
            if (list_u64(streams_obj, pos + 5, 0, MR_PHYS_MAX_RANK, "loop rank", &rank) < 0) goto done;
            s->group = (size_t)group;
            s->space = groups[group].space;
            s->op = (int64_t)op;
            s->charged = (int)charged;
            s->rank = (size_t)rank;
            s->loop_off = loop;
            s->offset = 0;
            s->begin = 0;
            s->end = 0;
            pos += 6;
            for (size_t d = 0; d < s->rank; d++) {
                if (list_u64(streams_obj, pos + (Py_ssize_t)d, 1, UINT64_MAX, "loop count", &counts[loop + d]) < 0)
                    goto done;
                if (list_u64(streams_obj, pos + (Py_ssize_t)(s->rank + d), 0, UINT64_MAX, "stride",
                             &strides[loop + d]) < 0)
                    goto done;
                /* The walk adds up to (count - 1) * stride for this loop; it must be representable. */
                uint64_t span;
                if (mr_mul_u64(counts[loop + d] - 1, strides[loop + d], &span) < 0) {
                    PyErr_SetString(PyExc_ValueError, "physical_sweep: loop span overflows 64 bits");
                    goto done;
                }
            }
            pos += (Py_ssize_t)(2 * s->rank);
            loop += s->rank;
        }
    }

    {
        int64_t bad_op = -1, prev_op = -1;
        int status;
        Py_BEGIN_ALLOW_THREADS
        status = mr_physical_sweep(streams, n_streams, groups, n_groups, n_spaces, counts, strides, n_loops,
                                   alias_class, tensor_key, (uint64_t)budget_value, &bad_op, &prev_op);
        Py_END_ALLOW_THREADS
        if (status == MR_PHYS_NOMEM) {
            PyErr_NoMemory();
            goto done;
        }
        if (status == MR_PHYS_OK) {
            result = Py_NewRef(Py_None);
        }
        else {
            result = Py_BuildValue("(iLL)", status, (long long)bad_op, (long long)prev_op);
        }
    }
done:
    PyMem_Free(streams);
    PyMem_Free(groups);
    PyMem_Free(counts);
    PyMem_Free(strides);
    PyMem_Free(alias_class);
    PyMem_Free(tensor_key);
    return result;
}

/* ---------------------------------------------------------------------------
 * Fast accept path: whole, alias-free target fragments with disjoint extents.
 *
 * The common bound plan writes every target fragment completely, once, with no declared
 * aliases. Then every group of _check_target_physical_ranges is one operation, one free
 * segment [address, address + nbytes), and the sweep reports nothing exactly when those
 * extents are pairwise disjoint within each address space (the structural proof of
 * mr_physical_sweep, with nothing charged against the budget). physical_whole_targets reads
 * the regions (exact classes, exact str / int / tuple values: no user code runs) and accepts
 * only that case; anything else declines and the Python grouping and the sweep decide. */

enum {
    PQ_TARGET,
    PQ_OVERLAP_OFFSET,
    PQ_OVERLAP_SHAPE,
    PQ_BINDING,
    PQ_PLACEMENT,
    PQ_INSTANCE_ID,
    PQ_LEASE_GENERATION,
    PQ_WORKER_ID,
    PQ_DEVICE,
    PQ_FRAGMENT_ID,
    PQ_ADDRESS,
    PQ_NBYTES,
    PQ_TENSOR_ID,
    PQ_ALIASES,
    PQ_GLOBAL_OFFSET,
    PQ_LOCAL_SHAPE,
    PQ_NNAMES
};

static const char *const pq_spellings[PQ_NNAMES] = {
    "target", "overlap_offset", "overlap_shape", "binding", "placement", "instance_id", "lease_generation",
    "worker_id", "device", "fragment_id", "address", "nbytes", "tensor_id", "aliases", "global_offset",
    "local_shape",
};

static PyObject *pq_names[PQ_NNAMES];

#define PQ_ACCEPT 1
#define PQ_DECLINE 0
#define PQ_ERROR (-1)

/* *out = new reference to obj.<name>; PQ_DECLINE when the attribute is missing. */
static int
pq_get(PyObject *obj, int name, PyObject **out)
{
    *out = PyObject_GetAttr(obj, pq_names[name]);
    if (*out != NULL) return PQ_ACCEPT;
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return PQ_DECLINE;
    }
    return PQ_ERROR;
}

/* An exact tuple of exact ints. */
static int
pq_int_tuple(PyObject *value)
{
    return mr_exact_tuple_of(value, &PyLong_Type);
}

/* Equal exact tuples of exact ints (no user code): PQ_ACCEPT, PQ_DECLINE otherwise. */
static int
pq_same_box(PyObject *a, PyObject *b)
{
    if (!pq_int_tuple(a) || !pq_int_tuple(b)) return PQ_DECLINE;
    int same = PyObject_RichCompareBool(a, b, Py_EQ);
    if (same < 0) return PQ_ERROR;
    return same ? PQ_ACCEPT : PQ_DECLINE;
}

/* An exact int in [0, 2**64): PQ_ACCEPT with *out, PQ_DECLINE otherwise. */
static int
pq_u64(PyObject *value, uint64_t *out)
{
    if (!PyLong_CheckExact(value)) return PQ_DECLINE;
    unsigned long long x = PyLong_AsUnsignedLongLong(value);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return PQ_ERROR;
        PyErr_Clear();
        return PQ_DECLINE;
    }
    *out = (uint64_t)x;
    return PQ_ACCEPT;
}

/* One operation: its target (borrowed into *target_out: the operation holds it while the
 * caller's sequence does), its address space key (*space_out, new reference) and extent. */
static int
pq_operation(PyObject *op, PyObject *region_cls, PyObject *bound_cls, PyObject **target_out, PyObject **space_out,
             pq_extent *extent)
{
    enum { V_TARGET, V_OFFSET, V_SHAPE, V_BINDING, V_PLACEMENT, V_INSTANCE, V_GENERATION, V_WORKER, V_DEVICE,
           V_FRAGMENT, V_ADDRESS, V_NBYTES, V_TENSOR, V_ALIASES, V_GLOBAL_OFFSET, V_LOCAL_SHAPE, V_COUNT };
    PyObject *v[V_COUNT] = {NULL};
    int rc = PQ_DECLINE;
    *space_out = NULL;
    if ((PyObject *)Py_TYPE(op) != region_cls) goto done;
    if ((rc = pq_get(op, PQ_TARGET, &v[V_TARGET])) != PQ_ACCEPT) goto done;
    rc = PQ_DECLINE;
    if ((PyObject *)Py_TYPE(v[V_TARGET]) != bound_cls) goto done;
    /* operation and target fields, in the order the Python grouping reads them */
    static const int target_fields[] = {PQ_BINDING, PQ_PLACEMENT, PQ_INSTANCE_ID, PQ_LEASE_GENERATION};
    for (int k = 0; k < 4; k++) {
        if ((rc = pq_get(v[V_TARGET], target_fields[k], &v[V_BINDING + k])) != PQ_ACCEPT) goto done;
    }
    static const int binding_fields[] = {PQ_WORKER_ID, PQ_DEVICE, PQ_FRAGMENT_ID, PQ_ADDRESS, PQ_NBYTES};
    for (int k = 0; k < 5; k++) {
        if ((rc = pq_get(v[V_BINDING], binding_fields[k], &v[V_WORKER + k])) != PQ_ACCEPT) goto done;
    }
    static const int placement_fields[] = {PQ_TENSOR_ID, PQ_ALIASES, PQ_GLOBAL_OFFSET, PQ_LOCAL_SHAPE};
    for (int k = 0; k < 4; k++) {
        if ((rc = pq_get(v[V_PLACEMENT], placement_fields[k], &v[V_TENSOR + k])) != PQ_ACCEPT) goto done;
    }
    if ((rc = pq_get(op, PQ_OVERLAP_OFFSET, &v[V_OFFSET])) != PQ_ACCEPT) goto done;
    if ((rc = pq_get(op, PQ_OVERLAP_SHAPE, &v[V_SHAPE])) != PQ_ACCEPT) goto done;
    rc = PQ_DECLINE;
    /* hashable, comparable values without user code: exact str and int */
    if (!PyUnicode_CheckExact(v[V_INSTANCE]) || !PyUnicode_CheckExact(v[V_WORKER])
        || !PyUnicode_CheckExact(v[V_DEVICE]) || !PyUnicode_CheckExact(v[V_FRAGMENT])
        || !PyUnicode_CheckExact(v[V_TENSOR]) || !PyLong_CheckExact(v[V_GENERATION])) {
        goto done;
    }
    /* no declared alias */
    if (!PyTuple_CheckExact(v[V_ALIASES]) || PyTuple_Size(v[V_ALIASES]) != 0) goto done;
    /* the operation writes the whole fragment */
    if ((rc = pq_same_box(v[V_OFFSET], v[V_GLOBAL_OFFSET])) != PQ_ACCEPT) goto done;
    if ((rc = pq_same_box(v[V_SHAPE], v[V_LOCAL_SHAPE])) != PQ_ACCEPT) goto done;
    uint64_t address = 0, nbytes = 0, end = 0;
    if ((rc = pq_u64(v[V_ADDRESS], &address)) != PQ_ACCEPT) goto done;
    if ((rc = pq_u64(v[V_NBYTES], &nbytes)) != PQ_ACCEPT) goto done;
    rc = PQ_DECLINE;
    if (nbytes == 0 || mr_add_u64(address, nbytes, &end) < 0) goto done;
    *space_out = PyTuple_Pack(3, v[V_INSTANCE], v[V_WORKER], v[V_DEVICE]);
    if (*space_out == NULL) {
        rc = PQ_ERROR;
        goto done;
    }
    extent->begin = address;
    extent->end = end;
    *target_out = v[V_TARGET];
    rc = PQ_ACCEPT;
done:
    for (int k = 0; k < V_COUNT; k++) Py_XDECREF(v[k]);
    return rc;
}

PyDoc_STRVAR(physical_whole_targets_doc,
"physical_whole_targets(operations, region_cls, bound_cls, budget)\n"
"--\n\n"
"The fast accept path of the spec 12.6 check (_check_target_physical_ranges). ``True`` when\n"
"``operations`` (a tuple or list) are exact ``region_cls`` regions with distinct exact\n"
"``bound_cls`` targets, each writing its whole target fragment (overlap box equal to the\n"
"fragment's global offset and local shape, exact tuples of ints), no fragment declaring\n"
"aliases, address and nbytes ints with 0 < nbytes and address + nbytes < 2**64, and the\n"
"extents pairwise disjoint per address space (instance_id, worker_id, device; exact str),\n"
"and ``budget`` a non-negative int: then the check has nothing to report. Otherwise ``None``\n"
"(the Python grouping and the sweep decide). ``TypeError`` for a wrong container or class.");

static PyObject *
physical_whole_targets(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *operations, *region_cls, *bound_cls, *budget;
    if (!PyArg_ParseTuple(args, "OO!O!O:physical_whole_targets", &operations, &PyType_Type, &region_cls,
                          &PyType_Type, &bound_cls, &budget)) {
        return NULL;
    }
    if (!PyTuple_CheckExact(operations) && !PyList_CheckExact(operations)) {
        PyErr_SetString(PyExc_TypeError, "physical_whole_targets: operations must be a tuple or list");
        return NULL;
    }
    if (!PyLong_CheckExact(budget)) Py_RETURN_NONE;
    int overflow = 0;
    long long budget_value = PyLong_AsLongLongAndOverflow(budget, &overflow);
    if (budget_value == -1 && overflow == 0 && PyErr_Occurred()) return NULL;
    if (overflow < 0 || (overflow == 0 && budget_value < 0)) Py_RETURN_NONE;
    /* a snapshot of the sequence (a list could change size while attributes are read) */
    PyObject *ops = PySequence_Tuple(operations);
    if (ops == NULL) return NULL;
    Py_ssize_t n_ops = PyTuple_Size(ops);
    PyObject *result = NULL, *spaces = NULL;
    pq_extent *extents = NULL;
    uintptr_t *targets = NULL;
    int rc = PQ_ERROR;
    if (n_ops < 0) goto done;
    extents = mr_alloc_array((size_t)n_ops, sizeof(pq_extent));
    targets = mr_alloc_array((size_t)n_ops, sizeof(uintptr_t));
    spaces = PyDict_New();
    if (extents == NULL || targets == NULL || spaces == NULL) goto done;
    rc = PQ_ACCEPT;
    for (Py_ssize_t i = 0; i < n_ops && rc == PQ_ACCEPT; i++) {
        PyObject *op = PyTuple_GetItem(ops, i), *target = NULL, *space = NULL;
        if (op == NULL) {
            rc = PQ_ERROR;
            break;
        }
        rc = pq_operation(op, region_cls, bound_cls, &target, &space, &extents[i]);
        if (rc != PQ_ACCEPT) break;
        targets[i] = (uintptr_t)target;
        PyObject *number = PyDict_GetItemWithError(spaces, space); /* borrowed */
        if (number == NULL) {
            if (PyErr_Occurred()) {
                rc = PQ_ERROR;
            }
            else {
                Py_ssize_t next = PyDict_Size(spaces);
                number = next < 0 ? NULL : PyLong_FromSsize_t(next);
                if (number == NULL || PyDict_SetItem(spaces, space, number) < 0) rc = PQ_ERROR;
                Py_XDECREF(number); /* the dict holds it */
                if (rc == PQ_ACCEPT) extents[i].space = (size_t)next;
            }
        }
        else {
            Py_ssize_t id = PyLong_AsSsize_t(number);
            if (id < 0) rc = PQ_ERROR; /* the dict's own non-negative ids */
            else extents[i].space = (size_t)id;
        }
        Py_DECREF(space);
    }
    if (rc == PQ_ACCEPT) {
        int distinct, disjoint;
        Py_BEGIN_ALLOW_THREADS
        distinct = mr_pointers_distinct(targets, (size_t)n_ops);
        disjoint = distinct && mr_extents_disjoint(extents, (size_t)n_ops);
        Py_END_ALLOW_THREADS
        rc = disjoint ? PQ_ACCEPT : PQ_DECLINE;
    }
done:
    if (rc == PQ_ACCEPT) result = Py_NewRef(Py_True);
    else if (rc == PQ_DECLINE) result = Py_NewRef(Py_None);
    if (rc == PQ_ERROR && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "physical_whole_targets failed");
    PyMem_Free(extents);
    PyMem_Free(targets);
    Py_XDECREF(spaces);
    Py_DECREF(ops);
    return result;
}

static PyMethodDef physical_methods[] = {
    {"physical_sweep", physical_sweep, METH_VARARGS, physical_sweep_doc},
    {"physical_whole_targets", physical_whole_targets, METH_VARARGS, physical_whole_targets_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_Physical(PyObject *module)
{
    for (int k = 0; k < PQ_NNAMES; k++) {
        if (pq_names[k] == NULL) {
            pq_names[k] = PyUnicode_InternFromString(pq_spellings[k]);
            if (pq_names[k] == NULL) return -1;
        }
    }
    return PyModule_AddFunctions(module, physical_methods);
}
