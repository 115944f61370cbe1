/* overlap: the logical planner kernel (spec §11.1 steps 5-9, §11.7) and the
 * exact-cover check used by the logical plan self-checks (§11.6).
 *
 * Layout: a Python-free kernel section (plain C types in, status code out;
 * runs with the GIL released) followed by the glue that converts the packed
 * inputs, calls the kernel and builds the Python results.
 *
 * Inputs cross the boundary as bytes objects holding native int64 / uint64
 * arrays (the Python layer packs them with the array module, which already
 * rejects out-of-range values); the glue reads them in place (ov_i64_view) and
 * range-checks every value before the kernel sees it. */
#include "overlap.h"
#include "layout.h"
#include "gctrack.h"

/* ------------------------------------------------------------------------ */
/* Kernel                                                                   */
/* ------------------------------------------------------------------------ */

enum {
    OV_OK = 0,
    OV_NOMEM = 1,
    OV_REGIONS_LIMIT = 2,   /* a = limit */
    OV_NOT_COVERED = 3,     /* index = target */
    OV_ITEMSIZE = 4,        /* index = target */
    OV_SEG_REGION = 5,      /* index = target, a = segment count, b = limit */
    OV_SEG_TOTAL = 6,       /* index = target, a = running total, b = limit */
    OV_BUDGET = 7,          /* pairwise comparison budget exhausted */
    OV_OVERFLOW = 8,        /* byte arithmetic does not fit 64 bits */
};

#define OV_PAIR_BUDGET 1000000LL
#define OV_GRID_MAX_RANK 64

typedef struct {
    int64_t b;
    int64_t e;
} ov_ival;

static void *
ov_raw_array(size_t n, size_t sz)
{
    size_t total;
    if (__builtin_mul_overflow(n, sz, &total)) return NULL;
    return malloc(total ? total : 1);
}

static void *
ov_raw_calloc(size_t n, size_t sz)
{
    return calloc(n ? n : 1, sz ? sz : 1);
}

/* A growable buffer of fixed-size elements. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
    size_t elem;
} ov_vec;

static int
ov_vec_reserve(ov_vec *v, size_t extra)
{
    size_t need;
    if (__builtin_add_overflow(v->len, extra, &need)) return -1;
    if (need <= v->cap) return 0;
    size_t cap = v->cap ? v->cap : 16;
    while (cap < need) {
        if (__builtin_mul_overflow(cap, (size_t)2, &cap)) return -1;
    }
    size_t bytes;
    if (__builtin_mul_overflow(cap, v->elem, &bytes)) return -1;
    char *p = realloc(v->data, bytes);
    if (p == NULL) return -1;
    v->data = p;
    v->cap = cap;
    return 0;
}

static void
ov_vec_free(ov_vec *v)
{
    free(v->data);
    v->data = NULL;
    v->len = v->cap = 0;
}

static int
ov_ival_cmp(const void *pa, const void *pb)
{
    const ov_ival *a = pa, *b = pb;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    if (a->e != b->e) return a->e < b->e ? -1 : 1;
    return 0;
}

/* Sorts ivals[0..n) and removes duplicates; returns the unique count. */
static size_t
ov_unique_ivals(ov_ival *iv, size_t n)
{
    if (n == 0) return 0;
    qsort(iv, n, sizeof(ov_ival), ov_ival_cmp);
    size_t u = 1;
    for (size_t i = 1; i < n; i++) {
        if (iv[i].b != iv[u - 1].b || iv[i].e != iv[u - 1].e) iv[u++] = iv[i];
    }
    return u;
}

/* Sorted unique intervals are pairwise disjoint. */
static int
ov_ivals_disjoint(const ov_ival *iv, size_t u)
{
    for (size_t i = 1; i < u; i++) {
        if (iv[i].b < iv[i - 1].e) return 0;
    }
    return 1;
}

/* First index whose end > x, over disjoint sorted intervals (ends ascending). */
static size_t
ov_first_end_after(const ov_ival *iv, size_t u, int64_t x)
{
    size_t lo = 0, hi = u;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (iv[mid].e > x) hi = mid; else lo = mid + 1;
    }
    return lo;
}

/* First index whose begin >= x. */
static size_t
ov_first_begin_at(const ov_ival *iv, size_t u, int64_t x)
{
    size_t lo = 0, hi = u;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (iv[mid].b >= x) hi = mid; else lo = mid + 1;
    }
    return lo;
}

/* ---- disjointness of a set of boxes (all of one rank) -------------------- */

typedef struct {
    const int64_t *off;   /* nd coordinates */
    const int64_t *shp;   /* nd extents */
} ov_box;

typedef struct {
    const int64_t *off;
    const int64_t *shp;
    int nd;
} ov_box_nd;

static int
ov_box_nd_cmp(const void *pa, const void *pb)
{
    const ov_box_nd *a = pa, *b = pb;
    for (int d = 0; d < a->nd; d++) {
        if (a->off[d] != b->off[d]) return a->off[d] < b->off[d] ? -1 : 1;
    }
    for (int d = 0; d < a->nd; d++) {
        if (a->shp[d] != b->shp[d]) return a->shp[d] < b->shp[d] ? -1 : 1;
    }
    return 0;
}

typedef struct {
    int64_t key;
    size_t idx;
} ov_keyed;

static int
ov_keyed_cmp(const void *pa, const void *pb)
{
    const ov_keyed *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->idx != b->idx) return a->idx < b->idx ? -1 : 1;
    return 0;
}

static int
ov_boxes_intersect(const ov_box *a, const ov_box *b, int nd)
{
    for (int d = 0; d < nd; d++) {
        int64_t lo = a->off[d] > b->off[d] ? a->off[d] : b->off[d];
        int64_t ae = a->off[d] + a->shp[d];
        int64_t be = b->off[d] + b->shp[d];
        int64_t hi = ae < be ? ae : be;
        if (hi <= lo) return 0;
    }
    return 1;
}

/* Returns 1 when the boxes are pairwise disjoint, 0 when two intersect, or a
 * negative OV_ status (as -status) on failure. Fast path: when, on every
 * dimension, the distinct intervals are pairwise disjoint, boxes are disjoint
 * exactly when no two are identical. Otherwise a sweep on the dimension with
 * the most distinct intervals compares each box with the active ones; for
 * three or more dimensions the comparisons are budgeted like the reference. */
static int
ov_boxes_disjoint(const ov_box *boxes, size_t k, int nd)
{
    if (k < 2) return 1;
    ov_ival *iv = ov_raw_array(k, sizeof(ov_ival));
    if (iv == NULL) return -OV_NOMEM;
    int grid = 1;
    int best_dim = 0;
    size_t best_count = 0;
    for (int d = 0; d < nd; d++) {
        for (size_t i = 0; i < k; i++) {
            iv[i].b = boxes[i].off[d];
            iv[i].e = boxes[i].off[d] + boxes[i].shp[d];
        }
        size_t u = ov_unique_ivals(iv, k);
        if (!ov_ivals_disjoint(iv, u)) grid = 0;
        if (u > best_count) {
            best_count = u;
            best_dim = d;
        }
    }
    free(iv);

    if (grid) {
        /* identical boxes are the only possible intersections: sort whole
         * boxes and compare neighbours. */
        ov_box_nd *sorted = ov_raw_array(k, sizeof(ov_box_nd));
        if (sorted == NULL) return -OV_NOMEM;
        for (size_t i = 0; i < k; i++) {
            sorted[i].off = boxes[i].off;
            sorted[i].shp = boxes[i].shp;
            sorted[i].nd = nd;
        }
        qsort(sorted, k, sizeof(ov_box_nd), ov_box_nd_cmp);
        int distinct = 1;
        for (size_t i = 1; i < k && distinct; i++) {
            if (ov_box_nd_cmp(&sorted[i - 1], &sorted[i]) == 0) distinct = 0;
        }
        free(sorted);
        return distinct;
    }
    ov_keyed *keys = ov_raw_array(k, sizeof(ov_keyed));
    if (keys == NULL) return -OV_NOMEM;
    int result = 1;

    for (size_t i = 0; i < k; i++) {
        keys[i].key = boxes[i].off[best_dim];
        keys[i].idx = i;
    }
    qsort(keys, k, sizeof(ov_keyed), ov_keyed_cmp);
    size_t *active = ov_raw_array(k, sizeof(size_t));
    if (active == NULL) {
        free(keys);
        return -OV_NOMEM;
    }
    size_t nactive = 0;
    long long comparisons = 0;
    for (size_t s = 0; s < k && result == 1; s++) {
        const ov_box *cur = &boxes[keys[s].idx];
        int64_t begin = cur->off[best_dim];
        size_t w = 0;
        for (size_t a = 0; a < nactive; a++) {
            const ov_box *o = &boxes[active[a]];
            if (o->off[best_dim] + o->shp[best_dim] > begin) active[w++] = active[a];
        }
        nactive = w;
        for (size_t a = 0; a < nactive; a++) {
            if (nd >= 3) {
                if (comparisons >= OV_PAIR_BUDGET) {
                    result = -OV_BUDGET;
                    break;
                }
                comparisons++;
            }
            if (ov_boxes_intersect(cur, &boxes[active[a]], nd)) {
                result = 0;
                break;
            }
        }
        active[nactive++] = keys[s].idx;
    }
    free(active);
    free(keys);
    return result;
}

/* Exact cover of a container by boxes: non-empty, every box inside, volumes
 * sum to the container volume (checked), pairwise disjoint. Returns 1/0 or a
 * negative status. */
static int
ov_exact_cover(const int64_t *coff, const int64_t *cshp, const ov_box *boxes, size_t k, int nd)
{
    if (k == 0) return 0;
    uint64_t cvol = 1;
    for (int d = 0; d < nd; d++) {
        if (__builtin_mul_overflow(cvol, (uint64_t)cshp[d], &cvol)) return -OV_OVERFLOW;
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < k; i++) {
        uint64_t vol = 1;
        for (int d = 0; d < nd; d++) {
            int64_t b = boxes[i].off[d], e = boxes[i].off[d] + boxes[i].shp[d];
            if (b < coff[d] || e > coff[d] + cshp[d]) return 0;
            if (__builtin_mul_overflow(vol, (uint64_t)boxes[i].shp[d], &vol)) return 0;
        }
        if (__builtin_add_overflow(sum, vol, &sum)) return 0;
        if (sum > cvol) return 0;
    }
    if (sum != cvol) return 0;
    return ov_boxes_disjoint(boxes, k, nd);
}

/* ---- fragment tables and covers ------------------------------------------ */

/* The packed input arrays are read where they lie (ov_i64_view): const, never written. */
typedef struct {
    size_t n;
    const int64_t *tensor;
    int64_t *start;       /* coordinate start per fragment */
    const int64_t *off;   /* flat coordinates */
    const int64_t *shape; /* flat extents */
    const uint64_t *nbytes;
    const int64_t *order; /* fragment id rank (sources) */
    uint64_t *strides;    /* flat row-major byte strides (valid when ok) */
    unsigned char *ok;    /* nbytes == volume * itemsize */
} ov_frags;

typedef struct {
    size_t m;
    const int64_t *members;    /* source fragment indices */
    int nd;
    int built;
    int grid;
    /* grid */
    size_t *cnt;
    ov_ival **ivals;
    int64_t *cells;
    /* interval index */
    int dim;
    int64_t *sorted;           /* member fragment indices sorted by begin on dim */
    int64_t *prefmax;
} ov_cover;

static void
ov_cover_free(ov_cover *c)
{
    if (c->ivals != NULL) {
        for (int d = 0; d < c->nd; d++) free(c->ivals[d]);
    }
    free(c->ivals);
    free(c->cnt);
    free(c->cells);
    free(c->sorted);
    free(c->prefmax);
    c->ivals = NULL;
    c->cnt = NULL;
    c->cells = NULL;
    c->sorted = NULL;
    c->prefmax = NULL;
}

static size_t
ov_find_ival(const ov_ival *iv, size_t u, int64_t b)
{
    size_t lo = 0, hi = u;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (iv[mid].b < b) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static int
ov_cover_build(ov_cover *c, const ov_frags *src)
{
    c->built = 1;
    size_t m = c->m;
    int nd = c->nd;
    if (m == 0) return OV_OK;
    c->cnt = ov_raw_calloc((size_t)nd, sizeof(size_t));
    c->ivals = ov_raw_calloc((size_t)nd, sizeof(ov_ival *));
    if (c->cnt == NULL || c->ivals == NULL) return OV_NOMEM;
    int grid = 1;
    size_t best = 0;
    int best_dim = 0;
    uint64_t cells = 1;
    for (int d = 0; d < nd; d++) {
        ov_ival *iv = ov_raw_array(m, sizeof(ov_ival));
        if (iv == NULL) return OV_NOMEM;
        c->ivals[d] = iv;
        for (size_t i = 0; i < m; i++) {
            int64_t f = c->members[i];
            int64_t p = src->start[f] + d;
            iv[i].b = src->off[p];
            iv[i].e = src->off[p] + src->shape[p];
        }
        size_t u = ov_unique_ivals(iv, m);
        c->cnt[d] = u;
        if (u > best) {
            best = u;
            best_dim = d;
        }
        if (!ov_ivals_disjoint(iv, u)) grid = 0;
        if (grid && __builtin_mul_overflow(cells, (uint64_t)u, &cells)) grid = 0;
    }
    /* the grid query walks per-dimension index arrays of fixed size OV_GRID_MAX_RANK */
    if (grid && (cells > (uint64_t)m * 2u + 64u || nd > OV_GRID_MAX_RANK)) grid = 0;
    if (grid) {
        c->cells = ov_raw_array((size_t)cells, sizeof(int64_t));
        if (c->cells == NULL) return OV_NOMEM;
        for (uint64_t i = 0; i < cells; i++) c->cells[i] = -1;
        for (size_t i = 0; i < m && grid; i++) {
            int64_t f = c->members[i];
            uint64_t cell = 0;
            for (int d = 0; d < nd; d++) {
                int64_t p = src->start[f] + d;
                size_t at = ov_find_ival(c->ivals[d], c->cnt[d], src->off[p]);
                cell = cell * (uint64_t)c->cnt[d] + (uint64_t)at;
            }
            if (c->cells[cell] != -1) grid = 0; else c->cells[cell] = f;
        }
        if (grid) {
            c->grid = 1;
            return OV_OK;
        }
        free(c->cells);
        c->cells = NULL;
    }
    c->grid = 0;
    c->dim = best_dim;
    ov_keyed *keys = ov_raw_array(m, sizeof(ov_keyed));
    c->sorted = ov_raw_array(m, sizeof(int64_t));
    c->prefmax = ov_raw_array(m, sizeof(int64_t));
    if (keys == NULL || c->sorted == NULL || c->prefmax == NULL) {
        free(keys);
        return OV_NOMEM;
    }
    for (size_t i = 0; i < m; i++) {
        int64_t f = c->members[i];
        keys[i].key = src->off[src->start[f] + best_dim];
        keys[i].idx = i;
    }
    qsort(keys, m, sizeof(ov_keyed), ov_keyed_cmp);
    int64_t run = INT64_MIN;
    for (size_t i = 0; i < m; i++) {
        int64_t f = c->members[keys[i].idx];
        int64_t p = src->start[f] + best_dim;
        int64_t e = src->off[p] + src->shape[p];
        c->sorted[i] = f;
        if (e > run) run = e;
        c->prefmax[i] = run;
    }
    free(keys);
    return OV_OK;
}

/* One overlap of a target with a source fragment, before geometry. */
typedef struct {
    int64_t src;
    size_t coord;         /* position in the scratch coordinate buffer (2*nd values) */
    size_t rank1;         /* position in the (offset, shape, source id) order */
    uint64_t src_base;
    uint64_t tgt_base;
} ov_hit;

/* A finished region. */
typedef struct {
    int64_t src;
    int64_t tgt;
    size_t coord;         /* position in the output coordinate buffer (2*nd values) */
    int nd;
    int suffix;
    uint64_t src_base;
    uint64_t tgt_base;
    uint64_t inner;
} ov_region;

typedef struct {
    const int64_t *coords;   /* scratch coordinates */
    int nd;
    const int64_t *order;    /* source fragment id ranks */
} ov_sort_ctx;

/* Sort of hits by (overlap_offset, overlap_shape, source id rank): hits carry
 * everything the comparison needs through this small context struct array. */
typedef struct {
    ov_hit hit;
    const ov_sort_ctx *ctx;
} ov_hit_sortable;

static int
ov_hit_cmp1(const void *pa, const void *pb)
{
    const ov_hit_sortable *a = pa, *b = pb;
    const ov_sort_ctx *ctx = a->ctx;
    const int64_t *x = ctx->coords + a->hit.coord;
    const int64_t *y = ctx->coords + b->hit.coord;
    for (int d = 0; d < 2 * ctx->nd; d++) {
        if (x[d] != y[d]) return x[d] < y[d] ? -1 : 1;
    }
    int64_t ra = ctx->order[a->hit.src], rb = ctx->order[b->hit.src];
    if (ra != rb) return ra < rb ? -1 : 1;
    return 0;
}

static int
ov_hit_cmp2(const void *pa, const void *pb)
{
    const ov_hit_sortable *a = pa, *b = pb;
    const ov_sort_ctx *ctx = a->ctx;
    if (a->hit.tgt_base != b->hit.tgt_base) return a->hit.tgt_base < b->hit.tgt_base ? -1 : 1;
    int64_t ra = ctx->order[a->hit.src], rb = ctx->order[b->hit.src];
    if (ra != rb) return ra < rb ? -1 : 1;
    if (a->hit.src_base != b->hit.src_base) return a->hit.src_base < b->hit.src_base ? -1 : 1;
    if (a->hit.rank1 != b->hit.rank1) return a->hit.rank1 < b->hit.rank1 ? -1 : 1;
    return 0;
}

/* Copies ov_i64_view made of packed arrays it could not read in place (freed with the plan). */
#define OV_MAX_OWNED 16
typedef struct {
    void *buf[OV_MAX_OWNED];
    int n;
} ov_owned;

typedef struct {
    /* inputs */
    size_t ntensors;
    const int64_t *tensor_nd;
    const int64_t *tensor_itemsize;
    ov_frags src;
    ov_frags tgt;
    size_t ncovers;
    const int64_t *cover_start;
    const int64_t *cover_members;
    const int64_t *tgt_cover;
    ov_owned owned;
    size_t nprocess;
    uint64_t max_regions;
    uint64_t max_seg_region;
    uint64_t max_seg_total;
    /* outputs */
    ov_vec regions;          /* ov_region */
    ov_vec coords;           /* int64 */
    int64_t err_index;
    uint64_t err_a;
    uint64_t err_b;
} ov_plan;

/* Per-fragment volume check and row-major byte strides. */
static int
ov_prepare_frags(ov_frags *f, const int64_t *tensor_nd, const int64_t *tensor_itemsize)
{
    for (size_t i = 0; i < f->n; i++) {
        int64_t t = f->tensor[i];
        int nd = (int)tensor_nd[t];
        uint64_t it = (uint64_t)tensor_itemsize[t];
        int64_t s = f->start[i];
        uint64_t acc = it;
        int ok = 1;
        for (int d = nd - 1; d >= 0; d--) {
            f->strides[s + d] = ok ? acc : 0;
            if (ok && __builtin_mul_overflow(acc, (uint64_t)f->shape[s + d], &acc)) ok = 0;
        }
        f->ok[i] = (unsigned char)(ok && acc == f->nbytes[i]);
    }
    return OV_OK;
}

/* Targets come in fragment-id order, their tensors, covers and covers' first sources in
 * another (first appearance, cover order): at scale each target's reads of them are cache
 * misses in a dependent chain (tensor -> cover start -> member -> source start -> coordinates).
 * Before target ti is planned, ask for the next links of the targets OV_PF_FAR, OV_PF_MID,
 * OV_PF_NEAR and OV_PF_NEXT further on, each stage reading only lines an earlier stage asked
 * for. Hints only: every index read here was range-checked by ov_plan_from_args (tensor
 * indices, covers, members), and nothing is written or decided. Always inlined: GCC 12 at -O3
 * otherwise drops the calls (a function with no effect but prefetches; objdump showed none). */
enum { OV_PF_FAR = 24, OV_PF_MID = 16, OV_PF_NEAR = 8, OV_PF_NEXT = 4 };

/* The first member of target j's cover, or -1 (no cover, or an empty one). */
static inline int64_t
ov_pf_member(const ov_plan *P, size_t j)
{
    int64_t c = P->tgt_cover[j];
    if (c < 0) return -1;
    int64_t at = P->cover_start[c];
    return P->cover_start[c + 1] > at ? P->cover_members[at] : -1;
}

static inline __attribute__((always_inline)) void
ov_plan_prefetch(const ov_plan *P, size_t ti)
{
    const ov_frags *S = &P->src, *T = &P->tgt;
    size_t n = P->nprocess;
    if (ti + OV_PF_FAR < n) {
        size_t j = ti + OV_PF_FAR;
        int64_t c = P->tgt_cover[j];
        __builtin_prefetch(&P->tensor_nd[T->tensor[j]]);
        __builtin_prefetch(&P->tensor_itemsize[T->tensor[j]]);
        if (c >= 0) __builtin_prefetch(&P->cover_start[c]);
    }
    if (ti + OV_PF_MID < n) {
        int64_t c = P->tgt_cover[ti + OV_PF_MID];
        if (c >= 0) __builtin_prefetch(&P->cover_members[P->cover_start[c]]);
    }
    if (ti + OV_PF_NEAR < n) {
        int64_t f = ov_pf_member(P, ti + OV_PF_NEAR);
        if (f >= 0) {
            __builtin_prefetch(&S->start[f]);
            __builtin_prefetch(&S->ok[f]);
            if (S->order != NULL) __builtin_prefetch(&S->order[f]);
        }
    }
    if (ti + OV_PF_NEXT < n) {
        int64_t f = ov_pf_member(P, ti + OV_PF_NEXT);
        if (f >= 0) {
            int64_t s = S->start[f];
            __builtin_prefetch(&S->off[s]);
            __builtin_prefetch(&S->shape[s]);
            __builtin_prefetch(&S->strides[s]);
        }
    }
}

#define OV_RESERVE_MIN 65536 /* processed targets from which ov_plan_run reserves its outputs */

static int
ov_plan_run(ov_plan *P)
{
    int status = OV_OK;
    ov_cover *covers = ov_raw_calloc(P->ncovers, sizeof(ov_cover));
    ov_vec hits = {NULL, 0, 0, sizeof(ov_hit_sortable)};
    ov_vec scratch = {NULL, 0, 0, sizeof(int64_t)};
    ov_box *boxes = NULL;
    size_t boxes_cap = 0;
    uint64_t total_regions = 0;
    uint64_t total_segments = 0;
    if (covers == NULL) return OV_NOMEM;
    for (size_t c = 0; c < P->ncovers; c++) {
        covers[c].members = P->cover_members + P->cover_start[c];
        covers[c].m = (size_t)(P->cover_start[c + 1] - P->cover_start[c]);
    }
    ov_prepare_frags(&P->src, P->tensor_nd, P->tensor_itemsize);
    ov_prepare_frags(&P->tgt, P->tensor_nd, P->tensor_itemsize);
    /* A planned target has at least one region (2 * nd coordinates each): the outputs are
     * reserved for one region per processed target up front (one allocation each rather than
     * a doubling series of copies; more regions grow them as before). Only past a size where
     * the copies add up; a failing reservation is not an error here (the pushes decide). */
    if (P->nprocess >= OV_RESERVE_MIN) {
        size_t ncoords = 0;
        int fits = 1;
        for (size_t ti = 0; fits && ti < P->nprocess; ti++) {
            /* T->tensor[ti] < ntensors, tensor_nd in [1, 2^20]: checked when loaded */
            fits = !__builtin_add_overflow(ncoords, (size_t)(2 * P->tensor_nd[P->tgt.tensor[ti]]), &ncoords);
        }
        if (fits && ov_vec_reserve(&P->regions, P->nprocess) == 0) (void)ov_vec_reserve(&P->coords, ncoords);
    }

    for (size_t ti = 0; ti < P->nprocess && status == OV_OK; ti++) {
        const ov_frags *S = &P->src, *T = &P->tgt;
        ov_plan_prefetch(P, ti);
        int64_t t = T->tensor[ti];
        int nd = (int)P->tensor_nd[t];
        const int64_t *toff = T->off + T->start[ti];
        const int64_t *tshp = T->shape + T->start[ti];
        hits.len = 0;
        scratch.len = 0;
        int64_t cid = P->tgt_cover[ti];
        /* A cover of one source fragment (one replica's fragment per tensor: the usual case)
         * takes no index. Built, its grid index (one interval per dimension is disjoint and one
         * cell fits, so a one-member cover gets the grid whenever nd <= OV_GRID_MAX_RANK) would
         * yield that member exactly when its intervals meet the target's in every dimension,
         * and the box loop below drops any candidate whose overlap is empty in some dimension:
         * offering the member unconditionally gives the same hits. Coverage is then decided by
         * volumes, as for a grid cover. Skips the per-cover allocations and the scattered reads
         * of the cover table (targets in id order visit the covers at random). */
        int single = cid >= 0 && nd <= OV_GRID_MAX_RANK && P->cover_start[cid + 1] - P->cover_start[cid] == 1;
        ov_cover *cv = cid >= 0 && !single ? &covers[cid] : NULL;
        if (cv != NULL && !cv->built) {
            cv->nd = nd;
            status = ov_cover_build(cv, S);
            if (status != OV_OK) break;
        }
        ov_sort_ctx ctx = {NULL, nd, S->order};

        /* enumerate candidate source fragments overlapping the target box */
        if (single || (cv != NULL && cv->m > 0)) {
            size_t lo[OV_GRID_MAX_RANK], hi[OV_GRID_MAX_RANK], idx[OV_GRID_MAX_RANK];
            int use_grid = single ? 0 : cv->grid;
            size_t ncand_iter = 0;
            int done = 0;
            if (single) {
                /* the one member, offered once below */
            } else if (use_grid) {
                for (int d = 0; d < nd; d++) {
                    lo[d] = ov_first_end_after(cv->ivals[d], cv->cnt[d], toff[d]);
                    hi[d] = ov_first_begin_at(cv->ivals[d], cv->cnt[d], toff[d] + tshp[d]);
                    if (lo[d] >= hi[d]) done = 1;
                    idx[d] = lo[d];
                }
            } else {
                int64_t qb = toff[cv->dim];
                size_t a = 0, b = cv->m;
                while (a < b) {
                    size_t mid = a + (b - a) / 2;
                    if (cv->prefmax[mid] > qb) b = mid; else a = mid + 1;
                }
                ncand_iter = a;
            }
            while (!done && status == OV_OK) {
                int64_t f;
                if (single) {
                    f = P->cover_members[P->cover_start[cid]];
                    done = 1;
                } else if (use_grid) {
                    uint64_t cell = 0;
                    for (int d = 0; d < nd; d++) cell = cell * (uint64_t)cv->cnt[d] + (uint64_t)idx[d];
                    f = cv->cells[cell];
                    /* advance the mixed-radix counter (last dimension fastest) */
                    int d = nd - 1;
                    while (d >= 0) {
                        idx[d]++;
                        if (idx[d] < hi[d]) break;
                        idx[d] = lo[d];
                        d--;
                    }
                    if (d < 0) done = 1;
                    if (f < 0) continue;
                } else {
                    if (ncand_iter >= cv->m) break;
                    f = cv->sorted[ncand_iter++];
                    int64_t p = S->start[f] + cv->dim;
                    if (S->off[p] >= toff[cv->dim] + tshp[cv->dim]) break;
                }
                const int64_t *soff = S->off + S->start[f];
                const int64_t *sshp = S->shape + S->start[f];
                int empty = 0;
                if (ov_vec_reserve(&scratch, (size_t)(2 * nd)) < 0) {
                    status = OV_NOMEM;
                    break;
                }
                int64_t *box = (int64_t *)scratch.data + scratch.len;
                for (int d = 0; d < nd; d++) {
                    int64_t b = soff[d] > toff[d] ? soff[d] : toff[d];
                    int64_t se = soff[d] + sshp[d], te = toff[d] + tshp[d];
                    int64_t e = se < te ? se : te;
                    if (e <= b) {
                        empty = 1;
                        break;
                    }
                    box[d] = b;
                    box[nd + d] = e - b;
                }
                if (empty) continue;
                /* region budget before anything is materialised */
                if (total_regions + hits.len + 1 > P->max_regions) {
                    status = OV_REGIONS_LIMIT;
                    P->err_index = (int64_t)ti;
                    P->err_a = P->max_regions;
                    break;
                }
                if (ov_vec_reserve(&hits, 1) < 0) {
                    status = OV_NOMEM;
                    break;
                }
                ov_hit_sortable *h = (ov_hit_sortable *)hits.data + hits.len;
                memset(h, 0, sizeof(*h));
                h->hit.src = f;
                h->hit.coord = scratch.len;
                h->ctx = &ctx;
                scratch.len += (size_t)(2 * nd);
                hits.len++;
            }
        }
        if (status != OV_OK) break;
        ctx.coords = (const int64_t *)scratch.data;
        ov_hit_sortable *hv = (ov_hit_sortable *)hits.data;
        size_t k = hits.len;
        for (size_t i = 0; i < k; i++) hv[i].ctx = &ctx;
        if (k > 1) qsort(hv, k, sizeof(ov_hit_sortable), ov_hit_cmp1);

        /* exact cover of the target box by the overlaps */
        if (k > boxes_cap) {
            free(boxes);
            boxes = ov_raw_array(k, sizeof(ov_box));
            if (boxes == NULL) {
                boxes_cap = 0;
                status = OV_NOMEM;
                break;
            }
            boxes_cap = k;
        }
        for (size_t i = 0; i < k; i++) {
            boxes[i].off = ctx.coords + hv[i].hit.coord;
            boxes[i].shp = ctx.coords + hv[i].hit.coord + nd;
        }
        int covered;
        if (k == 0) {
            covered = 0;
        } else if (single || (cv != NULL && cv->grid)) {
            /* overlaps with pairwise disjoint grid cells are disjoint: volumes decide */
            uint64_t tvol = 1, sum = 0;
            covered = 1;
            for (int d = 0; d < nd; d++) {
                if (__builtin_mul_overflow(tvol, (uint64_t)tshp[d], &tvol)) covered = 0;
            }
            for (size_t i = 0; i < k && covered; i++) {
                uint64_t vol = 1;
                for (int d = 0; d < nd; d++) {
                    if (__builtin_mul_overflow(vol, (uint64_t)boxes[i].shp[d], &vol)) covered = 0;
                }
                if (__builtin_add_overflow(sum, vol, &sum)) covered = 0;
            }
            if (covered && sum != tvol) covered = 0;
        } else {
            covered = ov_exact_cover(toff, tshp, boxes, k, nd);
            if (covered < 0) {
                status = -covered;
                P->err_index = (int64_t)ti;
                break;
            }
        }
        if (!covered) {
            status = OV_NOT_COVERED;
            P->err_index = (int64_t)ti;
            break;
        }

        /* region geometry (§11.7), itemsize and segment budgets, in order */
        for (size_t i = 0; i < k && status == OV_OK; i++) {
            ov_hit *h = &hv[i].hit;
            int64_t f = h->src;
            h->rank1 = i;
            if (!S->ok[f] || !T->ok[ti] || P->tensor_itemsize[t] <= 0) {
                status = OV_ITEMSIZE;
                P->err_index = (int64_t)ti;
                break;
            }
            const int64_t *box = ctx.coords + h->coord;
            const int64_t *soff = S->off + S->start[f];
            const uint64_t *SS = S->strides + S->start[f];
            const uint64_t *TS = T->strides + T->start[ti];
            uint64_t sb = 0, tb = 0, term;
            for (int d = 0; d < nd && status == OV_OK; d++) {
                if (__builtin_mul_overflow((uint64_t)(box[d] - soff[d]), SS[d], &term)
                    || __builtin_add_overflow(sb, term, &sb)
                    || __builtin_mul_overflow((uint64_t)(box[d] - toff[d]), TS[d], &term)
                    || __builtin_add_overflow(tb, term, &tb)) {
                    status = OV_OVERFLOW;
                }
            }
            if (status != OV_OK) break;
            h->src_base = sb;
            h->tgt_base = tb;
            uint64_t inner;
            if (__builtin_mul_overflow((uint64_t)box[nd + nd - 1], (uint64_t)P->tensor_itemsize[t], &inner)) {
                status = OV_OVERFLOW;
                break;
            }
            int suffix = nd - 1;
            for (int d = nd - 2; d >= 0; d--) {
                if (SS[d] == inner && TS[d] == inner) {
                    if (__builtin_mul_overflow(inner, (uint64_t)box[nd + d], &inner)) {
                        status = OV_OVERFLOW;
                        break;
                    }
                    suffix = d;
                } else {
                    break;
                }
            }
            if (status != OV_OK) break;
            uint64_t seg = 1;
            for (int d = 0; d < suffix; d++) {
                if (__builtin_mul_overflow(seg, (uint64_t)box[nd + d], &seg)) {
                    status = OV_OVERFLOW;
                    break;
                }
            }
            if (status != OV_OK) break;
            if (seg > P->max_seg_region) {
                status = OV_SEG_REGION;
                P->err_index = (int64_t)ti;
                P->err_a = seg;
                P->err_b = P->max_seg_region;
                break;
            }
            if (__builtin_add_overflow(total_segments, seg, &total_segments)
                || total_segments > P->max_seg_total) {
                status = OV_SEG_TOTAL;
                P->err_index = (int64_t)ti;
                P->err_a = total_segments;
                P->err_b = P->max_seg_total;
                break;
            }
            /* stash inner and suffix through the hit: reuse src_base/tgt_base fields and
             * recompute nothing later */
            hv[i].hit.rank1 = i;
            hv[i].hit.src_base = sb;
            hv[i].hit.tgt_base = tb;
            /* keep inner/suffix alongside in the region emitted below */
            if (ov_vec_reserve(&P->regions, 1) < 0 || ov_vec_reserve(&P->coords, (size_t)(2 * nd)) < 0) {
                status = OV_NOMEM;
                break;
            }
            ov_region *r = (ov_region *)P->regions.data + P->regions.len;
            r->src = f;
            r->tgt = (int64_t)ti;
            r->coord = P->coords.len;
            r->nd = nd;
            r->suffix = suffix;
            r->src_base = sb;
            r->tgt_base = tb;
            r->inner = inner;
            memcpy((int64_t *)P->coords.data + P->coords.len, box, (size_t)(2 * nd) * sizeof(int64_t));
            P->coords.len += (size_t)(2 * nd);
            P->regions.len++;
        }
        if (status != OV_OK) break;
        /* final order within the target: (target base, source id, source base) */
        if (k > 1) {
            size_t first = P->regions.len - k;
            ov_region *rv = (ov_region *)P->regions.data + first;
            /* sort the hits by the final key, then permute the emitted regions */
            for (size_t i = 0; i < k; i++) hv[i].hit.rank1 = i;
            qsort(hv, k, sizeof(ov_hit_sortable), ov_hit_cmp2);
            ov_region *tmp = ov_raw_array(k, sizeof(ov_region));
            if (tmp == NULL) {
                status = OV_NOMEM;
                break;
            }
            for (size_t i = 0; i < k; i++) tmp[i] = rv[hv[i].hit.rank1];
            memcpy(rv, tmp, k * sizeof(ov_region));
            free(tmp);
        }
        total_regions += k;
    }

    for (size_t c = 0; c < P->ncovers; c++) ov_cover_free(&covers[c]);
    free(covers);
    ov_vec_free(&hits);
    ov_vec_free(&scratch);
    free(boxes);
    return status;
}

/* ------------------------------------------------------------------------ */
/* Glue                                                                     */
/* ------------------------------------------------------------------------ */

/* The native int64 values of a bytes object, read in place: no copy of arrays that are tens of
 * MB at 10^6 fragments (fresh pages and a memcpy each). Sound because a bytes object cannot
 * change and the caller's argument tuple keeps it alive for the whole call, the kernel's
 * GIL-free part included. Its buffer lies at a fixed offset in an aligned allocation on CPython
 * (8-byte aligned); should it not be, the values are copied into a buffer owned by owned (freed
 * with ov_owned_free). NULL with an exception. */
static const int64_t *
ov_i64_view(PyObject *obj, const char *name, size_t *count, ov_owned *owned)
{
    char *data;
    Py_ssize_t size;
    if (!PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes", name);
        return NULL;
    }
    if (PyBytes_AsStringAndSize(obj, &data, &size) < 0) return NULL;
    if (size % (Py_ssize_t)sizeof(int64_t) != 0) {
        PyErr_Format(PyExc_ValueError, "%s has a partial 64-bit element", name);
        return NULL;
    }
    size_t n = (size_t)size / sizeof(int64_t);
    *count = n;
    if ((uintptr_t)data % _Alignof(int64_t) == 0) return (const int64_t *)(const void *)data;
    if (owned->n >= OV_MAX_OWNED) {
        PyErr_SetString(PyExc_SystemError, "ov_i64_view: too many copies");
        return NULL;
    }
    int64_t *copy = mr_alloc_array(n, sizeof(int64_t));
    if (copy == NULL) return NULL;
    if (n) memcpy(copy, data, n * sizeof(int64_t));
    owned->buf[owned->n++] = copy;
    return copy;
}

static void
ov_owned_free(ov_owned *owned)
{
    for (int i = 0; i < owned->n; i++) PyMem_Free(owned->buf[i]);
    owned->n = 0;
}

static int
ov_u64_limit(PyObject *obj, const char *name, uint64_t *out)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int", name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow > 0) {
        *out = UINT64_MAX;   /* above every reachable count */
        return 0;
    }
    if (overflow < 0 || v <= 0) {
        PyErr_Format(PyExc_ValueError, "%s must be a positive integer", name);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static void
ov_frags_free(ov_frags *f)
{
    PyMem_Free(f->start);
    PyMem_Free(f->strides);
    PyMem_Free(f->ok);
    memset(f, 0, sizeof(*f));
}

/* Loads one fragment side; validates tensor indices, coordinates and sizes. */
static int
ov_frags_load(ov_frags *f, const char *side, size_t ntensors, const int64_t *tensor_nd, ov_owned *owned,
              PyObject *tensor, PyObject *off, PyObject *shape, PyObject *nbytes, PyObject *order)
{
    size_t n, noff, nshape, nnb, nord = 0;
    memset(f, 0, sizeof(*f));
    f->tensor = ov_i64_view(tensor, "fragment tensors", &n, owned);
    if (f->tensor == NULL) return -1;
    f->n = n;
    f->off = ov_i64_view(off, "fragment offsets", &noff, owned);
    if (f->off == NULL) return -1;
    f->shape = ov_i64_view(shape, "fragment shapes", &nshape, owned);
    if (f->shape == NULL) return -1;
    f->nbytes = (const uint64_t *)ov_i64_view(nbytes, "fragment nbytes", &nnb, owned);
    if (f->nbytes == NULL) return -1;
    if (order != NULL) {
        f->order = ov_i64_view(order, "fragment order", &nord, owned);
        if (f->order == NULL) return -1;
    }
    if (nnb != n || (order != NULL && nord != n) || noff != nshape) {
        PyErr_Format(PyExc_ValueError, "%s fragment arrays have inconsistent lengths", side);
        return -1;
    }
    f->start = mr_alloc_array(n, sizeof(int64_t));
    if (f->start == NULL) return -1;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t t = f->tensor[i];
        if (t < 0 || (uint64_t)t >= (uint64_t)ntensors) {
            PyErr_Format(PyExc_ValueError, "%s fragment tensor index is out of range", side);
            return -1;
        }
        f->start[i] = (int64_t)pos;
        size_t nd = (size_t)tensor_nd[t];
        if (nd > noff - pos || pos > noff) {
            PyErr_Format(PyExc_ValueError, "%s fragment coordinates are truncated", side);
            return -1;
        }
        for (size_t d = 0; d < nd; d++) {
            int64_t o = f->off[pos + d], s = f->shape[pos + d], e;
            if (o < 0 || s < 1 || __builtin_add_overflow(o, s, &e)) {
                PyErr_Format(PyExc_ValueError,
                             "%s fragment box must fit in a signed 64-bit integer", side);
                return -1;
            }
        }
        pos += nd;
    }
    if (pos != noff) {
        PyErr_Format(PyExc_ValueError, "%s fragment coordinates have trailing values", side);
        return -1;
    }
    f->strides = mr_alloc_array(pos, sizeof(uint64_t));
    f->ok = mr_alloc_array(n, 1);
    if (f->strides == NULL || f->ok == NULL) return -1;
    return 0;
}

/* Tuples of ints cannot take part in reference cycles: they are untracked at once (as the
 * collector would do on its first pass), so a large plan adds no collector work per region. */
static PyObject *
ov_tuple_i64(const int64_t *v, int n)
{
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL || PyTuple_SetItem(t, i, x) < 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    PyObject_GC_UnTrack(t);
    return t;
}

static PyObject *
ov_tuple_u64(const uint64_t *v, int n)
{
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromUnsignedLongLong(v[i]);
        if (x == NULL || PyTuple_SetItem(t, i, x) < 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    PyObject_GC_UnTrack(t);
    return t;
}

/* ---- shared coordinate tuples of one plan_regions call ------------------------------ *
 * Regions of one plan repeat a few shapes, loop counts and strides many times: each distinct
 * tuple is built once and shared (tuples of ints are immutable; equal values, equal pickles).
 * Up to half the table's slots are kept; beyond, fresh values are built. */
#define OV_INTERN_SLOTS ((size_t)1 << 18)

typedef struct {
    PyObject *obj; /* strong; NULL = empty slot */
    uint64_t hash;
    size_t at;     /* its values: vals[at : at + n] */
    int n;
    int is_signed;
} ov_intern_slot;

typedef struct {
    ov_intern_slot *slots; /* nslots of them, or NULL: no sharing */
    uint64_t *vals;
    size_t nslots, max_slots, nvals, cap, used;
} ov_intern;

/* A table for the values of about nregions regions: at most two slots per region, a power of
 * two up to OV_INTERN_SLOTS (its limit, max_slots), kept at most half full. It starts small and
 * grows by four as values come: a plan's regions usually repeat a few dozen distinct values,
 * whose slots then stay in the near caches, where a table sized for the limit at once (several
 * MB at 10^5+ regions) spreads them over as many pages and makes every probe a miss. The values
 * shared are the same either way: the first max_slots / 2 distinct ones. */
#define OV_INTERN_FIRST_SLOTS ((size_t)1 << 10)

static void
ov_intern_init(ov_intern *c, size_t nregions)
{
    size_t limit = 64;
    while (limit < OV_INTERN_SLOTS && limit / 2 < nregions) limit *= 2;
    size_t nslots = limit < OV_INTERN_FIRST_SLOTS ? limit : OV_INTERN_FIRST_SLOTS;
    c->slots = PyMem_Calloc(nslots, sizeof(ov_intern_slot)); /* NULL: every value fresh */
    c->nslots = c->slots == NULL ? 0 : nslots;
    c->max_slots = limit;
    c->vals = NULL;
    c->nvals = c->cap = c->used = 0;
}

/* Four times the slots (at most max_slots), every entry moved by its kept hash; 0, or -1 when
 * the larger table cannot be had (the table is then left as it was). */
static int
ov_intern_grow(ov_intern *c)
{
    size_t nslots = c->nslots * 4 < c->max_slots ? c->nslots * 4 : c->max_slots;
    ov_intern_slot *slots = PyMem_Calloc(nslots, sizeof(ov_intern_slot));
    if (slots == NULL) return -1;
    size_t mask = nslots - 1;
    for (size_t k = 0; k < c->nslots; k++) {
        if (c->slots[k].obj == NULL) continue;
        size_t i = (size_t)c->slots[k].hash & mask;
        while (slots[i].obj != NULL) i = (i + 1) & mask;
        slots[i] = c->slots[k];
    }
    PyMem_Free(c->slots);
    c->slots = slots;
    c->nslots = nslots;
    return 0;
}

static void
ov_intern_free(ov_intern *c)
{
    if (c->slots != NULL)
        for (size_t i = 0; i < c->nslots; i++) Py_XDECREF(c->slots[i].obj);
    PyMem_Free(c->slots);
    PyMem_Free(c->vals);
    c->slots = NULL;
    c->vals = NULL;
}

#define OV_INTERN_INT 2 /* kind of a single uint64 int (not a tuple) */

static PyObject *
ov_intern_make(const void *v, int n, int is_signed)
{
    if (is_signed == OV_INTERN_INT) return PyLong_FromUnsignedLongLong(*(const uint64_t *)v);
    return is_signed ? ov_tuple_i64((const int64_t *)v, n) : ov_tuple_u64((const uint64_t *)v, n);
}

static inline uint64_t
ov_intern_hash(const uint64_t *u, int n, int is_signed)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n ^ ((uint64_t)is_signed << 40);
    for (int i = 0; i < n; i++) {
        h ^= u[i];
        h *= 0xFF51AFD7ED558CCDULL;
        h ^= h >> 29;
    }
    return h;
}

/* Ask for the slot ov_intern_tuple(c, v, n, is_signed) probes first (a hint: a plan with many
 * distinct values grows the table to several MB, and each probe is then a cache miss). */
static inline void
ov_intern_prefetch(const ov_intern *c, const void *v, int n, int is_signed)
{
    if (c->slots == NULL || n <= 0) return;
    __builtin_prefetch(&c->slots[(size_t)ov_intern_hash((const uint64_t *)v, n, is_signed) & (c->nslots - 1)]);
}

/* ov_intern_tuple's miss: the value v[0:n] (hash h), not in the table, whose probe ended at the
 * empty slot i; built, and kept while the table has room. Out of line: most lookups hit. */
static __attribute__((noinline)) PyObject *
ov_intern_insert(ov_intern *c, const uint64_t *u, int n, int is_signed, uint64_t h, size_t i)
{
    PyObject *t = ov_intern_make(u, n, is_signed);
    if (t == NULL) return t;
    if (c->used >= c->nslots / 2) {
        if (c->nslots >= c->max_slots || ov_intern_grow(c) < 0) return t; /* no sharing for this one */
        size_t mask = c->nslots - 1;
        i = (size_t)h & mask;
        while (c->slots[i].obj != NULL) i = (i + 1) & mask; /* not there: it was not found before */
    }
    if (c->nvals + (size_t)n > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->nvals + (size_t)n) {
            if (cap > ((size_t)PY_SSIZE_T_MAX / sizeof(uint64_t)) / 2) return t; /* no sharing for this one */
            cap *= 2;
        }
        uint64_t *bigger = PyMem_Realloc(c->vals, cap * sizeof(uint64_t));
        if (bigger == NULL) return t; /* no sharing for this one */
        c->vals = bigger;
        c->cap = cap;
    }
    memcpy(c->vals + c->nvals, u, (size_t)n * sizeof(uint64_t));
    ov_intern_slot *e = &c->slots[i];
    e->obj = Py_NewRef(t);
    e->hash = h;
    e->at = c->nvals;
    e->n = n;
    e->is_signed = is_signed;
    c->nvals += (size_t)n;
    c->used++;
    return t;
}

/* A new reference to the tuple of v[0:n] (int64 when is_signed is 1, else uint64), or with
 * is_signed == OV_INTERN_INT (n == 1) to the int of the uint64 v[0], shared when kept.
 * Inlined into each field of ov_region_object (a region asks up to eight times): the hash, the
 * probe and the comparison of a few values, no call on a hit. */
static inline __attribute__((always_inline)) PyObject *
ov_intern_tuple(ov_intern *c, const void *v, int n, int is_signed)
{
    const uint64_t *u = (const uint64_t *)v; /* same size and representation for both kinds */
    if (c->slots == NULL || n <= 0) return ov_intern_make(v, n, is_signed);
    uint64_t h = ov_intern_hash(u, n, is_signed);
    size_t mask = c->nslots - 1, i = (size_t)h & mask;
    for (;;) {
        const ov_intern_slot *e = &c->slots[i];
        if (e->obj == NULL) return ov_intern_insert(c, u, n, is_signed, h, i);
        if (e->hash == h && e->n == n && e->is_signed == is_signed) {
            const uint64_t *kept = c->vals + e->at;
            int k = 0;
            while (k < n && kept[k] == u[k]) k++;
            if (k == n) return Py_NewRef(e->obj);
        }
        i = (i + 1) & mask;
    }
}

/* Builds (src, tgt, overlap_offset, overlap_shape, source_base, target_base,
 * inner_bytes, outer_loop_counts, source_strides, target_strides, segments). */
static PyObject *
ov_region_tuple(const ov_plan *P, const ov_region *r, PyObject *empty)
{
    const int64_t *box = (const int64_t *)P->coords.data + r->coord;
    int nd = r->nd;
    uint64_t seg = 1;
    for (int d = 0; d < r->suffix; d++) seg *= (uint64_t)box[nd + d];
    PyObject *items[11] = {NULL};
    PyObject *out = NULL;
    items[0] = PyLong_FromLongLong(r->src);
    items[1] = PyLong_FromLongLong(r->tgt);
    items[2] = ov_tuple_i64(box, nd);
    items[3] = ov_tuple_i64(box + nd, nd);
    items[4] = PyLong_FromUnsignedLongLong(r->src_base);
    items[5] = PyLong_FromUnsignedLongLong(r->tgt_base);
    items[6] = PyLong_FromUnsignedLongLong(r->inner);
    if (r->suffix == 0) {
        items[7] = Py_NewRef(empty);
        items[8] = Py_NewRef(empty);
        items[9] = Py_NewRef(empty);
    } else {
        items[7] = ov_tuple_i64(box + nd, r->suffix);
        items[8] = ov_tuple_u64(P->src.strides + P->src.start[r->src], r->suffix);
        items[9] = ov_tuple_u64(P->tgt.strides + P->tgt.start[r->tgt], r->suffix);
    }
    items[10] = PyLong_FromUnsignedLongLong(seg);
    for (int i = 0; i < 11; i++) {
        if (items[i] == NULL) goto done;
    }
    out = PyTuple_New(11);
    if (out == NULL) goto done;
    for (int i = 0; i < 11; i++) {
        PyTuple_SetItem(out, i, items[i]);   /* steals; cannot fail on a fresh tuple */
        items[i] = NULL;
    }
    PyObject_GC_UnTrack(out); /* ints and untracked int tuples only */
done:
    for (int i = 0; i < 11; i++) Py_XDECREF(items[i]);
    return out;
}

PyDoc_STRVAR(plan_overlaps_doc,
"plan_overlaps(tensor_ndim, tensor_itemsize, src_tensor, src_offsets, src_shapes, src_nbytes,\n"
"              src_order, cover_start, cover_members, tgt_tensor, tgt_offsets, tgt_shapes,\n"
"              tgt_nbytes, tgt_cover, nprocess, max_regions, max_segments_per_region,\n"
"              max_total_segments)\n"
"--\n\n"
"Enumerate the overlaps of each target fragment with its selected source cover (spec\n"
"§11.1 steps 5-9). Every array argument is a bytes object of native int64 values\n"
"(nbytes: uint64). Returns a list of region tuples on success or an error tuple\n"
"(code, target_index, a, b) when a fail-closed rule fires.");

static void
ov_plan_free(ov_plan *P)
{
    ov_frags_free(&P->src);
    ov_frags_free(&P->tgt);
    ov_owned_free(&P->owned);
    ov_vec_free(&P->regions);
    ov_vec_free(&P->coords);
}

/* Parse the 18 plan_overlaps arguments of args, check them and run the kernel (GIL released).
 * Returns the kernel status (>= 0; P filled, free it with ov_plan_free) or -1 with an
 * exception set (P freed). */
static int
ov_plan_from_args(PyObject *args, const char *fname, ov_plan *Pp)
{
    PyObject *a_nd, *a_it, *s_t, *s_o, *s_s, *s_n, *s_r, *c_s, *c_m, *t_t, *t_o, *t_s, *t_n, *t_c;
    PyObject *lim_r, *lim_s, *lim_t;
    Py_ssize_t nprocess;
    memset(Pp, 0, sizeof(*Pp));
    Pp->regions.elem = sizeof(ov_region);
    Pp->coords.elem = sizeof(int64_t);
    char format[64];
    snprintf(format, sizeof format, "OOOOOOOOOOOOOOnOOO:%s", fname);
    if (!PyArg_ParseTuple(args, format, &a_nd, &a_it, &s_t, &s_o, &s_s, &s_n, &s_r, &c_s, &c_m, &t_t, &t_o,
                          &t_s, &t_n, &t_c, &nprocess, &lim_r, &lim_s, &lim_t)) {
        return -1;
    }
    size_t nt, nit, ncs, ncm, ntc;
    int status;

    if (ov_u64_limit(lim_r, "max_transfer_regions", &Pp->max_regions) < 0
        || ov_u64_limit(lim_s, "max_segments_per_region", &Pp->max_seg_region) < 0
        || ov_u64_limit(lim_t, "max_total_lowered_segments", &Pp->max_seg_total) < 0) {
        goto fail;
    }
    Pp->tensor_nd = ov_i64_view(a_nd, "tensor ndim", &nt, &Pp->owned);
    if (Pp->tensor_nd == NULL) goto fail;
    Pp->tensor_itemsize = ov_i64_view(a_it, "tensor itemsize", &nit, &Pp->owned);
    if (Pp->tensor_itemsize == NULL) goto fail;
    if (nit != nt) {
        PyErr_SetString(PyExc_ValueError, "tensor arrays have inconsistent lengths");
        goto fail;
    }
    Pp->ntensors = nt;
    for (size_t i = 0; i < nt; i++) {
        if (Pp->tensor_nd[i] < 1 || Pp->tensor_nd[i] > (1 << 20) || Pp->tensor_itemsize[i] < 1) {
            PyErr_SetString(PyExc_ValueError, "tensor rank must be 1..1048576 and itemsize positive");
            goto fail;
        }
    }
    if (ov_frags_load(&Pp->src, "source", nt, Pp->tensor_nd, &Pp->owned, s_t, s_o, s_s, s_n, s_r) < 0) goto fail;
    if (ov_frags_load(&Pp->tgt, "target", nt, Pp->tensor_nd, &Pp->owned, t_t, t_o, t_s, t_n, NULL) < 0) goto fail;
    Pp->cover_start = ov_i64_view(c_s, "cover starts", &ncs, &Pp->owned);
    if (Pp->cover_start == NULL) goto fail;
    Pp->cover_members = ov_i64_view(c_m, "cover members", &ncm, &Pp->owned);
    if (Pp->cover_members == NULL) goto fail;
    Pp->tgt_cover = ov_i64_view(t_c, "target covers", &ntc, &Pp->owned);
    if (Pp->tgt_cover == NULL) goto fail;
    if (ncs < 1 || Pp->cover_start[0] != 0 || (uint64_t)Pp->cover_start[ncs - 1] != (uint64_t)ncm
        || ntc != Pp->tgt.n || nprocess < 0 || (size_t)nprocess > Pp->tgt.n) {
        PyErr_SetString(PyExc_ValueError, "cover arrays are inconsistent");
        goto fail;
    }
    Pp->ncovers = ncs - 1;
    Pp->nprocess = (size_t)nprocess;
    for (size_t c = 0; c < Pp->ncovers; c++) {
        if (Pp->cover_start[c + 1] < Pp->cover_start[c]) {
            PyErr_SetString(PyExc_ValueError, "cover starts must be non-decreasing");
            goto fail;
        }
    }
    /* members of a cover are source fragments of one tensor, used by targets of that tensor */
    for (size_t i = 0; i < ncm; i++) {
        if (Pp->cover_members[i] < 0 || (uint64_t)Pp->cover_members[i] >= (uint64_t)Pp->src.n) {
            PyErr_SetString(PyExc_ValueError, "cover member is out of range");
            goto fail;
        }
    }
    for (size_t i = 0; i < Pp->tgt.n; i++) {
        int64_t c = Pp->tgt_cover[i];
        if (c < -1 || (c >= 0 && (uint64_t)c >= (uint64_t)Pp->ncovers)) {
            PyErr_SetString(PyExc_ValueError, "target cover index is out of range");
            goto fail;
        }
        if (c >= 0) {
            for (int64_t j = Pp->cover_start[c]; j < Pp->cover_start[c + 1]; j++) {
                if (Pp->src.tensor[Pp->cover_members[j]] != Pp->tgt.tensor[i]) {
                    PyErr_SetString(PyExc_ValueError, "cover member belongs to another tensor");
                    goto fail;
                }
            }
        }
    }

    Py_BEGIN_ALLOW_THREADS
    status = ov_plan_run(Pp);
    Py_END_ALLOW_THREADS
    return status;
fail:
    ov_plan_free(Pp);
    return -1;
}

static PyObject *
ov_plan_overlaps(PyObject *Py_UNUSED(self), PyObject *args)
{
    ov_plan P;
    PyObject *result = NULL;
    int status = ov_plan_from_args(args, "plan_overlaps", &P);
    if (status < 0) return NULL;
    if (status == OV_NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (status != OV_OK) {
        result = Py_BuildValue("(iLKK)", status, (long long)P.err_index,
                               (unsigned long long)P.err_a, (unsigned long long)P.err_b);
        goto done;
    }
    {
        PyObject *empty = PyTuple_New(0);
        if (empty == NULL) goto done;
        PyObject *list = mr_gc_hide(PyList_New((Py_ssize_t)P.regions.len)); /* until full (gctrack.h) */
        if (list == NULL) {
            Py_DECREF(empty);
            goto done;
        }
        for (size_t i = 0; i < P.regions.len; i++) {
            PyObject *rt = ov_region_tuple(&P, (ov_region *)P.regions.data + i, empty);
            if (rt == NULL) {
                Py_DECREF(list);
                Py_DECREF(empty);
                goto done;
            }
            PyList_SetItem(list, (Py_ssize_t)i, rt);
        }
        Py_DECREF(empty);
        mr_gc_show(list);
        result = list;
    }
done:
    ov_plan_free(&P);
    return result;
}

/* ---- plan_regions: the kernel plus the TransferRegion instances, without record tuples ---- */

#define OV_NFIELDS 11
#define OV_AHEAD 8 /* regions between a prefetch of a region's objects and their use */
static const char *const ov_field_names[OV_NFIELDS] = {
    "tensor_id", "source", "target", "overlap_offset", "overlap_shape", "source_base_offset",
    "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides", "target_strides",
};

/* One instance of cls for region r (fields as build_regions sets them), NULL on error. */
static PyObject *
ov_region_object(const ov_plan *P, const ov_region *r, PyObject *cls, const mr_layout_class *lc, PyObject *const *keys,
                 PyObject *template, PyObject *source, PyObject *target, PyObject *tensor_id, PyObject *empty,
                 int empty_inert, ov_intern *shared)
{
    const int64_t *box = (const int64_t *)P->coords.data + r->coord;
    int nd = r->nd;
    PyObject *values[OV_NFIELDS] = {NULL};
    PyObject *region = NULL;
    PyObject *dict = NULL;
    /* The target's tensor id as the caller read it (else read here). */
    values[0] = tensor_id != NULL ? Py_NewRef(tensor_id) : PyObject_GetAttr(target, keys[0]);
    values[1] = Py_NewRef(source);
    values[2] = Py_NewRef(target);
    values[3] = ov_intern_tuple(shared, box, nd, 1);
    values[4] = ov_intern_tuple(shared, box + nd, nd, 1);
    values[5] = ov_intern_tuple(shared, &r->src_base, 1, OV_INTERN_INT);
    values[6] = ov_intern_tuple(shared, &r->tgt_base, 1, OV_INTERN_INT);
    values[7] = ov_intern_tuple(shared, &r->inner, 1, OV_INTERN_INT);
    if (r->suffix == 0) {
        values[8] = Py_NewRef(empty);
        values[9] = Py_NewRef(empty);
        values[10] = Py_NewRef(empty);
    } else {
        values[8] = ov_intern_tuple(shared, box + nd, r->suffix, 1);
        values[9] = ov_intern_tuple(shared, P->src.strides + P->src.start[r->src], r->suffix, 0);
        values[10] = ov_intern_tuple(shared, P->tgt.strides + P->tgt.start[r->tgt], r->suffix, 0);
    }
    for (int k = 0; k < OV_NFIELDS; k++) {
        if (values[k] == NULL) goto done;
    }
    /* The fields stored as object.__setattr__ stores them (the dataclass constructor's way):
     * in field order, into the instance's own attribute storage, which shares its keys with
     * every other instance (about 180 bytes a region instead of a 530-byte private dict). The
     * instance is made as object.__new__ makes it (mr_new_object): on CPython 3.11 that lays
     * out its attribute values for the class's shared keys and trims the values array of the
     * next instances to the keys in use (304 -> 160 bytes a region dict, once materialized,
     * than a bare tp_alloc). */
    (void)template;
    if (lc->cls != NULL) {
        /* a C-owned layout (layout.h): the values stored directly, in field order (what the
         * dataclass __init__ stores), untracked under the same rule and threshold as below */
        region = mr_layout_new_gc(lc, values, OV_NFIELDS, 0);
        /* Untracked under the same rule (every field inert, common.h) and threshold as below,
         * judging only the fields that can be collector objects: the coordinate fields are ints
         * or tuples of ints from ov_intern_tuple, untracked when made (ov_tuple_i64 / _u64;
         * nothing tracks a tuple again), and empty was judged once (empty_inert). */
        if (region != NULL && P->regions.len >= MR_GC_BULK_MIN && empty_inert && mr_gc_inert(values[0], MR_INERT_DEPTH)
            && mr_gc_inert(source, MR_INERT_DEPTH) && mr_gc_inert(target, MR_INERT_DEPTH))
            (void)mr_untrack_inert(region, NULL);
        goto done;
    }
    if (P->regions.len >= MR_GC_BULK_MIN) {
        /* Large plans materialize every region's dict anyway (to untrack it, below): it is made
         * first (mr_new_instance: the class's shared keys, still empty) and filled in field
         * order, which keeps the key sharing (same 280 bytes a region, measured) and skips the
         * class lookup GenericSetAttr makes per field (no data descriptor among the fields).
         * Then untracked like the other path's dict. */
        region = mr_new_instance(cls, &dict, "plan_regions");
        if (region == NULL) goto done;
        for (int k = 0; k < OV_NFIELDS; k++) {
            if (PyDict_SetItem(dict, keys[k], values[k]) < 0) {
                Py_CLEAR(region);
                goto done;
            }
        }
        if (mr_untrack_values(region, dict, values, OV_NFIELDS) < 0) Py_CLEAR(region);
        goto done;
    }
    region = mr_new_object(cls, "plan_regions");
    if (region == NULL) goto done;
    for (int k = 0; k < OV_NFIELDS; k++) {
        if (PyObject_GenericSetAttr(region, keys[k], values[k]) < 0) {
            Py_CLEAR(region);
            goto done;
        }
    }
    /* Out of the cyclic collector when its fields are inert (common.h): with its instance
     * dict, materialized there (binding reads it anyway; a dict made later from the values
     * would be born tracked: the fragments are collector-type objects). */
    if (P->regions.len >= MR_GC_BULK_MIN && mr_untrack_values(region, NULL, values, OV_NFIELDS) < 0)
        Py_CLEAR(region);
done:
    Py_XDECREF(dict);
    for (int k = 0; k < OV_NFIELDS; k++) Py_XDECREF(values[k]);
    return region;
}

/* A list or exact tuple to index: a new reference to the tuple itself, or to a private copy of
 * the list (NULL with an exception). */
static PyObject *
ov_items(PyObject *seq)
{
    return PyTuple_CheckExact(seq) ? Py_NewRef(seq) : PySequence_List(seq);
}

/* Length and borrowed item i of ov_items' result (a list or an exact tuple). */
static Py_ssize_t
ov_size(PyObject *items)
{
    return PyTuple_CheckExact(items) ? PyTuple_Size(items) : PyList_Size(items);
}

static PyObject *
ov_at(PyObject *items, Py_ssize_t i)
{
    return PyTuple_CheckExact(items) ? PyTuple_GetItem(items, i) : PyList_GetItem(items, i);
}

/* The n items of ov_items' result (or of a private list copy) as a C array of borrowed
 * references, for indexing in region order (a random order over the sources: a cache miss per
 * item that a C array lets the loop ask for ahead, which a list's item array does not under the
 * limited API). The references stay valid while items lives and keeps them: an exact tuple cannot
 * change, and a private list copy is untracked here, so no Python code (a gc callback or a
 * finalizer run by a collection inside the loop) can reach it through the collector
 * (gc.get_objects, gc.get_referrers) to change it; nothing else refers to it. NULL with
 * MemoryError. */
static PyObject **
ov_item_array(PyObject *items, Py_ssize_t n)
{
    PyObject **out = mr_alloc_array(n ? (size_t)n : 1, sizeof(PyObject *));
    if (out == NULL) return NULL;
    if (!PyTuple_CheckExact(items)) PyObject_GC_UnTrack(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = ov_at(items, i);
        if (out[i] == NULL) {
            PyMem_Free(out);
            return NULL;
        }
    }
    return out;
}

/* A sorted list of the distinct values of the region field at offset (src or tgt), each < n. */
static PyObject *
ov_used_indices(const ov_plan *P, int use_src, size_t n)
{
    unsigned char *seen = PyMem_Calloc(n ? n : 1, 1);
    if (seen == NULL) return PyErr_NoMemory();
    const ov_region *regions = (const ov_region *)P->regions.data;
    for (size_t i = 0; i < P->regions.len; i++) {
        int64_t v = use_src ? regions[i].src : regions[i].tgt;
        if (v >= 0 && (uint64_t)v < (uint64_t)n) seen[v] = 1;
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += seen[i];
    if (count == n) {
        /* every index used (the usual case): range(n), the same increasing sequence without an
         * int object per index (the caller reads its length, or indexes with it) */
        PyMem_Free(seen);
        return PyObject_CallFunction((PyObject *)&PyRange_Type, "n", (Py_ssize_t)n);
    }
    /* the list made at its final length (count <= n, itself a Py_ssize_t: no append growth) */
    PyObject *out = PyList_New((Py_ssize_t)count);
    for (size_t i = 0, k = 0; out != NULL && i < n; i++) {
        if (!seen[i]) continue;
        PyObject *x = PyLong_FromSize_t(i);
        if (x == NULL) Py_CLEAR(out);
        else PyList_SetItem(out, (Py_ssize_t)k++, x); /* steals x; k < count: in range */
    }
    PyMem_Free(seen);
    return out;
}

PyDoc_STRVAR(plan_regions_doc,
"plan_regions(cls, sources, targets, target_tensor_ids, *plan_overlaps_arguments)\n"
"--\n\n"
"plan_overlaps, and on success the regions built directly as instances of cls (a heap type\n"
"whose instances have a __dict__; cls is not called): per region a fresh field dict\n"
"tensor_id=targets[t].tensor_id, source=sources[s], target=targets[t] and the geometry in field\n"
"order (as build_regions from the records; tensor_id from target_tensor_ids[t] when that\n"
"list, parallel to targets, is given instead of None). sources and targets are lists or tuples indexed like the\n"
"packed source and target arrays. Returns (regions tuple, used source indices, used target\n"
"indices) (sorted lists; range(n) when every one of the n is used), or plan_overlaps' error\n"
"tuple (code, target_index, a, b).");

static PyObject *
ov_plan_regions(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_ssize_t nargs = PyTuple_Size(args);
    if (nargs < 0) return NULL;
    if (nargs != 22) {
        PyErr_SetString(PyExc_TypeError, "plan_regions takes 22 arguments");
        return NULL;
    }
    PyObject *cls = PyTuple_GetItem(args, 0);
    PyObject *sources = PyTuple_GetItem(args, 1);
    PyObject *targets = PyTuple_GetItem(args, 2);
    PyObject *tids_arg = PyTuple_GetItem(args, 3);
    if (cls == NULL || sources == NULL || targets == NULL || tids_arg == NULL) return NULL;
    if (tids_arg != Py_None && !PyList_Check(tids_arg)) {
        PyErr_SetString(PyExc_TypeError, "plan_regions: target_tensor_ids must be a list or None");
        return NULL;
    }
    if (!PyType_Check(cls) || !(PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "plan_regions: cls must be a heap type");
        return NULL;
    }
    if (!(PyList_Check(sources) || PyTuple_CheckExact(sources)) || !(PyList_Check(targets) || PyTuple_CheckExact(targets))) {
        PyErr_SetString(PyExc_TypeError, "plan_regions: sources and targets must be lists or tuples");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "plan_regions: cls has no allocator");
        return NULL;
    }
    /* Private copies of lists: hostile hooks cannot resize what the indices point into. A
     * tuple cannot change: it is used as it is (no reference taken per item: copying a large
     * placement's scattered fragments touches each of them twice, here and when freed). */
    PyObject *src_items = ov_items(sources);
    PyObject *tgt_items = src_items == NULL ? NULL : ov_items(targets);
    PyObject *tid_items = tgt_items == NULL ? NULL : (tids_arg == Py_None ? Py_NewRef(Py_None) : PySequence_List(tids_arg));
    PyObject *rest = tid_items == NULL ? NULL : PyTuple_GetSlice(args, 4, nargs);
    if (rest == NULL) {
        Py_XDECREF(src_items);
        Py_XDECREF(tgt_items);
        Py_XDECREF(tid_items);
        return NULL;
    }
    ov_plan P;
    int status = ov_plan_from_args(rest, "plan_regions", &P);
    Py_DECREF(rest);
    if (status < 0) {
        Py_DECREF(src_items);
        Py_DECREF(tgt_items);
        Py_DECREF(tid_items);
        return NULL;
    }
    static PyObject *keys[OV_NFIELDS];
    PyObject *result = NULL, *template = NULL, *empty = NULL, *regions = NULL, *used_s = NULL, *used_t = NULL;
    ov_intern shared = {NULL, NULL, 0, 0, 0, 0, 0};
    PyObject **src_v = NULL, **tgt_v = NULL, **tid_v = NULL; /* borrowed items (ov_item_array) */
    if (status == OV_NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (status != OV_OK) {
        result = Py_BuildValue("(iLKK)", status, (long long)P.err_index, (unsigned long long)P.err_a,
                               (unsigned long long)P.err_b);
        goto done;
    }
    Py_ssize_t nsrc = ov_size(src_items), ntgt = ov_size(tgt_items);
    if (nsrc < 0 || ntgt < 0) goto done;
    if ((size_t)nsrc != P.src.n || (size_t)ntgt < P.nprocess
        || (tid_items != Py_None && PyList_Size(tid_items) != ntgt)) {
        PyErr_SetString(PyExc_ValueError, "plan_regions: sources or targets do not match the packed arrays");
        goto done;
    }
    for (int k = 0; k < OV_NFIELDS; k++) {
        if (keys[k] == NULL) {
            keys[k] = PyUnicode_InternFromString(ov_field_names[k]);
            if (keys[k] == NULL) goto done;
        }
    }
    template = PyDict_New();
    empty = PyTuple_New(0);
    if (template == NULL || empty == NULL) goto done;
    for (int k = 0; k < OV_NFIELDS; k++) {
        if (PyDict_SetItem(template, keys[k], Py_None) < 0) goto done;
    }
    regions = mr_gc_hide(PyTuple_New((Py_ssize_t)P.regions.len)); /* out of the collector until full (gctrack.h) */
    if (regions == NULL) goto done;
    /* cls stored in TransferRegion's C-owned layout: regions built with direct stores */
    static mr_layout_memo region_memo;
    mr_layout_class lc;
    (void)mr_region_layout(&region_memo, &lc, cls);
    ov_intern_init(&shared, P.regions.len);
    const int empty_inert = mr_gc_inert(empty, MR_INERT_DEPTH);
    src_v = ov_item_array(src_items, nsrc);
    tgt_v = src_v == NULL ? NULL : ov_item_array(tgt_items, ntgt);
    tid_v = tgt_v == NULL || tid_items == Py_None ? NULL : ov_item_array(tid_items, ntgt);
    if (tgt_v == NULL || (tid_items != Py_None && tid_v == NULL)) goto done;
    /* every region built so far untracked (read from each new region's own header while it is
     * in the cache): then the tuple of them is inert and is untracked without walking them */
    int regions_untracked = 1;
    for (size_t i = 0; i < P.regions.len; i++) {
        const ov_region *r = (const ov_region *)P.regions.data + i;
        /* The regions come in target order while the fragments (and their tensor ids) lie in
         * creation order: taking each region's source, target and tensor id is a cache miss
         * on each, and on its entry of the item arrays. Ask for the entries of a region
         * 2 * OV_AHEAD further now, and for the objects (and their first interned values'
         * slots) of a region OV_AHEAD further (hints: pointers only). */
        if (i + 2 * OV_AHEAD < P.regions.len) {
            const ov_region *far = r + 2 * OV_AHEAD;
            if ((uint64_t)far->src < (uint64_t)nsrc && (uint64_t)far->tgt < (uint64_t)ntgt) {
                __builtin_prefetch(&src_v[far->src]);
                __builtin_prefetch(&tgt_v[far->tgt]);
                if (tid_v != NULL) __builtin_prefetch(&tid_v[far->tgt]);
            }
        }
        if (i + OV_AHEAD < P.regions.len) {
            const ov_region *ahead = r + OV_AHEAD;
            int in_range = (uint64_t)ahead->src < (uint64_t)nsrc && (uint64_t)ahead->tgt < (uint64_t)ntgt;
            PyObject *hint[3] = {in_range ? src_v[ahead->src] : NULL, in_range ? tgt_v[ahead->tgt] : NULL,
                                 in_range && tid_v != NULL ? tid_v[ahead->tgt] : NULL};
            for (int k = 0; k < 3; k++) {
                if (hint[k] != NULL) __builtin_prefetch(hint[k], 1);
            }
            /* and the collector's header just before a source's and a target's object (two
             * pointers on CPython, read by the inert check, often on the line before); a hint
             * only, never dereferenced here */
            for (int k = 0; k < 2; k++) {
                if (hint[k] != NULL) __builtin_prefetch((const void *)((uintptr_t)hint[k] - 2 * sizeof(void *)), 0);
            }
            const int64_t *abox = (const int64_t *)P.coords.data + ahead->coord;
            ov_intern_prefetch(&shared, abox, ahead->nd, 1);
            ov_intern_prefetch(&shared, abox + ahead->nd, ahead->nd, 1);
            ov_intern_prefetch(&shared, &ahead->src_base, 1, OV_INTERN_INT);
            ov_intern_prefetch(&shared, &ahead->tgt_base, 1, OV_INTERN_INT);
            ov_intern_prefetch(&shared, &ahead->inner, 1, OV_INTERN_INT);
        }
        /* region indices come from the checked packed arrays: src < P.src.n == nsrc,
         * tgt < nprocess <= ntgt */
        if ((uint64_t)r->src >= (uint64_t)nsrc || (uint64_t)r->tgt >= (uint64_t)ntgt) {
            PyErr_SetString(PyExc_SystemError, "plan_regions: region index out of range");
            goto done;
        }
        PyObject *source = src_v[r->src];
        PyObject *target = tgt_v[r->tgt];
        PyObject *tensor_id = tid_v == NULL ? NULL : tid_v[r->tgt];
        PyObject *region = ov_region_object(&P, r, cls, &lc, keys, template, source, target, tensor_id, empty,
                                            empty_inert, &shared);
        if (region == NULL || PyTuple_SetItem(regions, (Py_ssize_t)i, region) < 0) goto done;
        if (regions_untracked && PyObject_GC_IsTracked(region)) regions_untracked = 0;
    }
    mr_gc_show(regions); /* full */
    /* untracked when every region is (what mr_gc_inert(regions, 1) decided by reading every
     * region's header again, a miss each at scale; the regions are instances of cls, neither
     * dicts nor tuples, and no code has run since each was read: only an object's creation
     * tracks it, and the collector only ever untracks) */
    if (P.regions.len >= MR_GC_BULK_MIN && regions_untracked) PyObject_GC_UnTrack(regions);
    used_s = ov_used_indices(&P, 1, P.src.n);
    used_t = used_s == NULL ? NULL : ov_used_indices(&P, 0, (size_t)ntgt);
    if (used_t == NULL) goto done;
    result = PyTuple_Pack(3, regions, used_s, used_t);
done:
    PyMem_Free(src_v);
    PyMem_Free(tgt_v);
    PyMem_Free(tid_v);
    ov_intern_free(&shared);
    ov_plan_free(&P);
    Py_XDECREF(template);
    Py_XDECREF(empty);
    Py_XDECREF(regions);
    Py_XDECREF(used_s);
    Py_XDECREF(used_t);
    Py_DECREF(src_items);
    Py_DECREF(tgt_items);
    Py_DECREF(tid_items);
    return result;
}

PyDoc_STRVAR(exact_cover_batch_doc,
"exact_cover_batch(container_ndim, container_offsets, container_shapes, box_start,\n"
"                  box_offsets, box_shapes)\n"
"--\n\n"
"For each container (a box of rank container_ndim[i]) check that its boxes\n"
"(CSR ranges box_start[i]..box_start[i+1], same rank) exactly cover it: non-empty,\n"
"inside, volumes sum to its volume and pairwise disjoint. Returns the index of the\n"
"first container that is not exactly covered, or -1. All arguments are bytes of\n"
"native int64 values.");

static PyObject *
ov_exact_cover_batch(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *a_nd, *a_co, *a_cs, *a_bs, *a_bo, *a_bsh;
    if (!PyArg_ParseTuple(args, "OOOOOO:exact_cover_batch", &a_nd, &a_co, &a_cs, &a_bs, &a_bo, &a_bsh)) {
        return NULL;
    }
    const int64_t *nd = NULL, *co = NULL, *cs = NULL, *bs = NULL, *bo = NULL, *bsh = NULL;
    ov_owned owned = {.n = 0}; /* (copies ov_i64_view had to make) */
    ov_box *boxes = NULL;
    size_t n, nco, ncs, nbs, nbo, nbsh;
    PyObject *result = NULL;
    long long first_bad = -1;
    int status = OV_OK;
    nd = ov_i64_view(a_nd, "container ndim", &n, &owned);
    if (nd == NULL) goto done;
    co = ov_i64_view(a_co, "container offsets", &nco, &owned);
    if (co == NULL) goto done;
    cs = ov_i64_view(a_cs, "container shapes", &ncs, &owned);
    if (cs == NULL) goto done;
    bs = ov_i64_view(a_bs, "box starts", &nbs, &owned);
    if (bs == NULL) goto done;
    bo = ov_i64_view(a_bo, "box offsets", &nbo, &owned);
    if (bo == NULL) goto done;
    bsh = ov_i64_view(a_bsh, "box shapes", &nbsh, &owned);
    if (bsh == NULL) goto done;
    if (nco != ncs || nbo != nbsh || nbs != n + 1 || bs[0] != 0) {
        PyErr_SetString(PyExc_ValueError, "exact cover arrays are inconsistent");
        goto done;
    }
    {
        /* validate ranks, CSR ranges and coordinates */
        size_t cpos = 0, bpos = 0;
        size_t maxk = 0;
        for (size_t i = 0; i < n; i++) {
            if (nd[i] < 1 || nd[i] > (1 << 20) || bs[i + 1] < bs[i]) {
                PyErr_SetString(PyExc_ValueError, "exact cover arrays are inconsistent");
                goto done;
            }
            size_t k = (size_t)(bs[i + 1] - bs[i]);
            size_t r = (size_t)nd[i];
            if (k > maxk) maxk = k;
            size_t need;
            if (cpos > nco || r > nco - cpos || __builtin_mul_overflow(k, r, &need)
                || bpos > nbo || need > nbo - bpos) {
                PyErr_SetString(PyExc_ValueError, "exact cover arrays are truncated");
                goto done;
            }
            for (size_t j = 0; j < r; j++) {
                int64_t e;
                if (co[cpos + j] < 0 || cs[cpos + j] < 1 || __builtin_add_overflow(co[cpos + j], cs[cpos + j], &e)) {
                    PyErr_SetString(PyExc_ValueError, "exact cover box must fit in a signed 64-bit integer");
                    goto done;
                }
            }
            for (size_t j = 0; j < need; j++) {
                int64_t e;
                if (bo[bpos + j] < 0 || bsh[bpos + j] < 1 || __builtin_add_overflow(bo[bpos + j], bsh[bpos + j], &e)) {
                    PyErr_SetString(PyExc_ValueError, "exact cover box must fit in a signed 64-bit integer");
                    goto done;
                }
            }
            cpos += r;
            bpos += need;
        }
        if (cpos != nco || bpos != nbo) {
            PyErr_SetString(PyExc_ValueError, "exact cover arrays have trailing values");
            goto done;
        }
        boxes = mr_alloc_array(maxk, sizeof(ov_box));
        if (boxes == NULL) goto done;
        Py_BEGIN_ALLOW_THREADS
        cpos = 0;
        bpos = 0;
        for (size_t i = 0; i < n; i++) {
            size_t k = (size_t)(bs[i + 1] - bs[i]);
            int r = (int)nd[i];
            for (size_t j = 0; j < k; j++) {
                boxes[j].off = bo + bpos + j * (size_t)r;
                boxes[j].shp = bsh + bpos + j * (size_t)r;
            }
            int ok = ov_exact_cover(co + cpos, cs + cpos, boxes, k, r);
            if (ok < 0 && ok != -OV_OVERFLOW) {
                status = -ok;
                break;
            }
            if (ok != 1) {
                first_bad = (long long)i;
                break;
            }
            cpos += (size_t)r;
            bpos += k * (size_t)r;
        }
        Py_END_ALLOW_THREADS
    }
    if (status == OV_NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (status == OV_BUDGET) {
        PyErr_SetString(PyExc_ValueError, "high-dimensional overlap budget exceeded before validation");
        goto done;
    }
    result = PyLong_FromLongLong(first_bad);
done:
    ov_owned_free(&owned);
    PyMem_Free(boxes);
    return result;
}

static PyMethodDef overlap_methods[] = {
    {"plan_overlaps", ov_plan_overlaps, METH_VARARGS, plan_overlaps_doc},
    {"plan_regions", ov_plan_regions, METH_VARARGS, plan_regions_doc},
    {"exact_cover_batch", ov_exact_cover_batch, METH_VARARGS, exact_cover_batch_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_Overlap(PyObject *module)
{
    return PyModule_AddFunctions(module, overlap_methods);
}
