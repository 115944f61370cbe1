/* Python-free N-D box geometry kernels (spec §11.3, DESIGN.md §5).
 *
 * Boxes are half-open: box i occupies [begin[i*d+k], end[i*d+k]) on dimension k,
 * row-major arrays of n*d int64. Two boxes overlap when they intersect on every
 * dimension (touching is not overlap); a box that is empty on some dimension
 * overlaps nothing. Kernels allocate with malloc (they run without the GIL) and
 * return an MR_* status; the Python glue maps it to an exception.
 *
 * Everything is static inline so coverage.c and table.c can both use it without
 * exporting symbols from the extension. */
#ifndef MOONCAKE_RESHARD_COVERAGE_KERNELS_H
#define MOONCAKE_RESHARD_COVERAGE_KERNELS_H

#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum {
    MR_NO = 0,
    MR_YES = 1,
    MR_ENOMEM = -1,
    MR_EBUDGET = -2, /* high-dimensional overlap budget exceeded */
};

/* The reference's fail-closed budget of pairwise comparisons (3-D+ general sweep). */
#define MR_OVERLAP_BUDGET ((uint64_t)1000000)

static inline void *
mr_kalloc(size_t n, size_t sz)
{
    size_t total;
    if (__builtin_mul_overflow(n, sz, &total)) return NULL;
    return malloc(total ? total : 1);
}

static inline uint64_t
mr_bias(int64_t v)
{
    return (uint64_t)v ^ ((uint64_t)1 << 63);
}

typedef struct {
    uint64_t key;
    size_t idx;
} mr_kv;

/* From this many records on, mr_radix_sort takes 11-bit digits (six passes at most for 64-bit
 * keys, against eight of 8 bits): each pass reads and scatters every record, which at 10^5
 * records and more costs more than the larger counting tables (2048 counters a digit, where the
 * 8-bit digits' 256 cost less below; crossover measured between 2k and 8k records). */
#define MR_RADIX_WIDE_MIN 16384

/* mr_radix_sort's passes with digits of `bits` bits (digits * bits >= 64). Always inlined, so
 * each call's digit width is a constant its loops are compiled for. */
static inline __attribute__((always_inline)) int
mr_radix_sort_digits(mr_kv *a, size_t n, unsigned bits, unsigned digits)
{
    const size_t radix = (size_t)1 << bits;
    const uint64_t mask = radix - 1;
    mr_kv *tmp = mr_kalloc(n, sizeof(mr_kv));
    size_t *counts = calloc((size_t)digits * radix, sizeof(size_t)); /* (may run without the GIL: malloc) */
    if (tmp == NULL || counts == NULL) {
        free(tmp);
        free(counts);
        return MR_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t k = a[i].key;
        for (unsigned d = 0; d < digits; d++) counts[d * radix + ((k >> (bits * d)) & mask)]++;
    }
    mr_kv *src = a, *dst = tmp;
    for (unsigned d = 0; d < digits; d++) {
        size_t *c = counts + d * radix;
        unsigned shift = bits * d;
        /* the passes move records, not keys: the multiset of digits, and so every count, holds */
        if (c[(src[0].key >> shift) & mask] == n) continue;
        size_t sum = 0;
        for (size_t b = 0; b < radix; b++) {
            size_t x = c[b];
            c[b] = sum;
            sum += x;
        }
        for (size_t i = 0; i < n; i++) dst[c[(src[i].key >> shift) & mask]++] = src[i];
        mr_kv *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, n * sizeof(mr_kv));
    free(tmp);
    free(counts);
    return 0;
}

/* Stable LSD radix sort of a[0:n] by key; skips digit passes where every key shares
 * the digit. Returns 0 or MR_ENOMEM. The counts of all digits come from one read of
 * the keys (a counting pass per digit would read the n records once per digit: at 10^6
 * records, 16 MB each, out of cache); the records are only moved for the digits that differ.
 * 8-bit digits below MR_RADIX_WIDE_MIN records, 11-bit digits from there on. */
static inline int
mr_radix_sort(mr_kv *a, size_t n)
{
    if (n < 2) return 0;
    if (n <= 32) { /* insertion sort: stable */
        for (size_t i = 1; i < n; i++) {
            mr_kv v = a[i];
            size_t j = i;
            while (j > 0 && a[j - 1].key > v.key) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = v;
        }
        return 0;
    }
    if (n < MR_RADIX_WIDE_MIN) return mr_radix_sort_digits(a, n, 8, 8);
    return mr_radix_sort_digits(a, n, 11, 6);
}

static inline int
mr_boxes_intersect(size_t d, const int64_t *ba, const int64_t *ea, const int64_t *bb, const int64_t *eb)
{
    for (size_t k = 0; k < d; k++) {
        int64_t lo = ba[k] > bb[k] ? ba[k] : bb[k];
        int64_t hi = ea[k] < eb[k] ? ea[k] : eb[k];
        if (lo >= hi) return 0;
    }
    return 1;
}

/* ---- 1-D: sort by begin, scan with the running maximum end --------------------- */
static inline int
mr_overlap_1d(size_t m, size_t st, const size_t *live, const int64_t *begin, const int64_t *end)
{
    mr_kv *kv = mr_kalloc(m, sizeof(mr_kv));
    if (kv == NULL) return MR_ENOMEM;
    for (size_t p = 0; p < m; p++) {
        kv[p].key = mr_bias(begin[live[p] * st]);
        kv[p].idx = live[p];
    }
    int rc = mr_radix_sort(kv, m);
    if (rc == 0) {
        rc = MR_NO;
        int64_t max_end = end[kv[0].idx * st];
        for (size_t p = 1; p < m; p++) {
            size_t i = kv[p].idx;
            if (begin[i * st] < max_end) {
                rc = MR_YES;
                break;
            }
            if (end[i * st] > max_end) max_end = end[i * st];
        }
    }
    free(kv);
    return rc;
}

/* ---- regular grids: per-dimension extents pairwise disjoint or identical ------- */

/* Returns MR_YES/MR_NO when the live boxes form a regular grid (answer exact),
 * 2 when they do not, or MR_ENOMEM. */
static inline int
mr_overlap_grid(size_t m, size_t d, size_t st, const size_t *live, const int64_t *begin, const int64_t *end)
{
    int rc = MR_ENOMEM;
    mr_kv *kv = mr_kalloc(m, sizeof(mr_kv));
    uint32_t *rank = mr_kalloc(m, d * sizeof(uint32_t)); /* d*m fits: caller allocated n*d int64 */
    size_t *order = mr_kalloc(m, sizeof(size_t));
    size_t *order2 = mr_kalloc(m, sizeof(size_t));
    size_t *groups = NULL;
    size_t *ngroups = mr_kalloc(d, sizeof(size_t));
    if (kv == NULL || rank == NULL || order == NULL || order2 == NULL || ngroups == NULL) goto done;
    for (size_t k = 0; k < d; k++) {
        for (size_t p = 0; p < m; p++) {
            kv[p].key = mr_bias(begin[live[p] * st + k]);
            kv[p].idx = p;
        }
        if (mr_radix_sort(kv, m) < 0) goto done;
        size_t g = 0;
        int64_t gb = 0, ge = 0;
        for (size_t q = 0; q < m; q++) {
            size_t i = live[kv[q].idx];
            int64_t b = begin[i * st + k], e = end[i * st + k];
            if (q == 0 || b != gb) {
                if (q != 0 && ge > b) { /* distinct extents overlap: not a grid */
                    rc = 2;
                    goto done;
                }
                if (q != 0) g++;
                gb = b;
                ge = e;
            }
            else if (e != ge) {
                rc = 2;
                goto done;
            }
            if (g > UINT32_MAX - 1) {
                rc = 2;
                goto done;
            }
            rank[kv[q].idx * d + k] = (uint32_t)g;
        }
        ngroups[k] = g + 1;
    }
    /* LSD counting sort of the rank tuples, last dimension first; equal adjacent
     * tuples are two boxes on the same cell, i.e. an overlap. */
    {
        size_t maxg = 0;
        for (size_t k = 0; k < d; k++)
            if (ngroups[k] > maxg) maxg = ngroups[k];
        groups = mr_kalloc(maxg + 1, sizeof(size_t));
        if (groups == NULL) goto done;
        for (size_t p = 0; p < m; p++) order[p] = p;
        for (size_t kk = d; kk-- > 0;) {
            size_t ng = ngroups[kk];
            memset(groups, 0, (ng + 1) * sizeof(size_t));
            for (size_t p = 0; p < m; p++) groups[rank[order[p] * d + kk] + 1]++;
            for (size_t b = 1; b <= ng; b++) groups[b] += groups[b - 1];
            for (size_t p = 0; p < m; p++) order2[groups[rank[order[p] * d + kk]]++] = order[p];
            size_t *t = order;
            order = order2;
            order2 = t;
        }
        rc = MR_NO;
        for (size_t p = 1; p < m; p++) {
            if (memcmp(&rank[order[p] * d], &rank[order[p - 1] * d], d * sizeof(uint32_t)) == 0) {
                rc = MR_YES;
                break;
            }
        }
    }
done:
    free(kv);
    free(rank);
    free(order);
    free(order2);
    free(groups);
    free(ngroups);
    return rc;
}

/* ---- 2-D general: sweep on dim 0, segment tree (range add, range max) on dim 1 --- */

typedef struct {
    int64_t *mx;
    int64_t *lz;
} mr_segtree;

static inline void
mr_seg_add(mr_segtree *t, size_t node, size_t lo, size_t hi, size_t a, size_t b, int64_t v)
{
    /* node covers [lo, hi); add v over [a, b) */
    if (b <= lo || hi <= a) return;
    if (a <= lo && hi <= b) {
        t->mx[node] += v;
        t->lz[node] += v;
        return;
    }
    size_t mid = lo + (hi - lo) / 2;
    mr_seg_add(t, 2 * node, lo, mid, a, b, v);
    mr_seg_add(t, 2 * node + 1, mid, hi, a, b, v);
    int64_t l = t->mx[2 * node], r = t->mx[2 * node + 1];
    t->mx[node] = (l > r ? l : r) + t->lz[node];
}

static inline int64_t
mr_seg_max(const mr_segtree *t, size_t node, size_t lo, size_t hi, size_t a, size_t b)
{
    if (b <= lo || hi <= a) return INT64_MIN;
    if (a <= lo && hi <= b) return t->mx[node];
    size_t mid = lo + (hi - lo) / 2;
    int64_t l = mr_seg_max(t, 2 * node, lo, mid, a, b);
    int64_t r = mr_seg_max(t, 2 * node + 1, mid, hi, a, b);
    int64_t best = l > r ? l : r;
    return best == INT64_MIN ? best : best + t->lz[node];
}

static inline size_t
mr_lower_bound(const int64_t *a, size_t n, int64_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static inline int
mr_overlap_2d(size_t m, size_t st, const size_t *live, const int64_t *begin, const int64_t *end)
{
    int rc = MR_ENOMEM;
    size_t m2;
    if (__builtin_mul_overflow(m, (size_t)2, &m2)) return MR_ENOMEM;
    mr_kv *ev = mr_kalloc(m2, sizeof(mr_kv));
    int64_t *ys = mr_kalloc(m2, sizeof(int64_t));
    mr_kv *ykv = mr_kalloc(m2, sizeof(mr_kv));
    size_t *y0 = mr_kalloc(m, sizeof(size_t));
    size_t *y1 = mr_kalloc(m, sizeof(size_t));
    mr_segtree t = {NULL, NULL};
    if (ev == NULL || ys == NULL || ykv == NULL || y0 == NULL || y1 == NULL) goto done;
    /* coordinate compression of dim-1 endpoints */
    for (size_t p = 0; p < m; p++) {
        size_t i = live[p];
        ykv[2 * p].key = mr_bias(begin[i * st + 1]);
        ykv[2 * p].idx = 0;
        ykv[2 * p + 1].key = mr_bias(end[i * st + 1]);
        ykv[2 * p + 1].idx = 0;
    }
    if (mr_radix_sort(ykv, m2) < 0) goto done;
    size_t ny = 0;
    for (size_t q = 0; q < m2; q++) {
        int64_t v = (int64_t)(ykv[q].key ^ ((uint64_t)1 << 63));
        if (ny == 0 || ys[ny - 1] != v) ys[ny++] = v;
    }
    size_t nleaf = ny - 1; /* >= 1: every live box is non-empty */
    for (size_t p = 0; p < m; p++) {
        size_t i = live[p];
        y0[p] = mr_lower_bound(ys, ny, begin[i * st + 1]);
        y1[p] = mr_lower_bound(ys, ny, end[i * st + 1]);
    }
    size_t tsz;
    if (__builtin_mul_overflow(nleaf, (size_t)4, &tsz)) goto done;
    t.mx = calloc(tsz, sizeof(int64_t));
    t.lz = calloc(tsz, sizeof(int64_t));
    if (t.mx == NULL || t.lz == NULL) goto done;
    /* events: ends first in the array so the stable sort keeps them before starts */
    for (size_t p = 0; p < m; p++) {
        ev[p].key = mr_bias(end[live[p] * st]);
        ev[p].idx = p;                        /* end event */
        ev[m + p].key = mr_bias(begin[live[p] * st]);
        ev[m + p].idx = p | ((size_t)1 << (sizeof(size_t) * 8 - 1)); /* start event */
    }
    if (mr_radix_sort(ev, m2) < 0) goto done;
    rc = MR_NO;
    const size_t start_bit = (size_t)1 << (sizeof(size_t) * 8 - 1);
    for (size_t q = 0; q < m2; q++) {
        size_t p = ev[q].idx & ~start_bit;
        if (ev[q].idx & start_bit) {
            if (mr_seg_max(&t, 1, 0, nleaf, y0[p], y1[p]) > 0) {
                rc = MR_YES;
                break;
            }
            mr_seg_add(&t, 1, 0, nleaf, y0[p], y1[p], 1);
        }
        else {
            mr_seg_add(&t, 1, 0, nleaf, y0[p], y1[p], -1);
        }
    }
done:
    free(ev);
    free(ys);
    free(ykv);
    free(y0);
    free(y1);
    free(t.mx);
    free(t.lz);
    return rc;
}

/* ---- 3-D+ general: the reference sweep with its comparison budget ------------- */

static inline int
mr_overlap_sweep(size_t m, size_t d, size_t st, const size_t *live, const int64_t *begin, const int64_t *end,
                 uint64_t budget)
{
    int rc = MR_ENOMEM;
    mr_kv *kv = mr_kalloc(m, sizeof(mr_kv));
    size_t *heap = mr_kalloc(m, sizeof(size_t));
    if (kv == NULL || heap == NULL) goto done;
    /* sweep dimension: most distinct (begin, end) pairs; first one on ties */
    size_t best_dim = 0, best_count = 0;
    for (size_t k = 0; k < d; k++) {
        for (size_t p = 0; p < m; p++) {
            kv[p].key = mr_bias(end[live[p] * st + k]);
            kv[p].idx = live[p];
        }
        if (mr_radix_sort(kv, m) < 0) goto done;
        for (size_t p = 0; p < m; p++) kv[p].key = mr_bias(begin[kv[p].idx * st + k]);
        if (mr_radix_sort(kv, m) < 0) goto done;
        size_t count = 1;
        for (size_t p = 1; p < m; p++) {
            size_t i = kv[p].idx, j = kv[p - 1].idx;
            if (begin[i * st + k] != begin[j * st + k] || end[i * st + k] != end[j * st + k]) count++;
        }
        if (count > best_count) {
            best_count = count;
            best_dim = k;
        }
    }
    const size_t s = best_dim;
    for (size_t p = 0; p < m; p++) {
        kv[p].key = mr_bias(begin[live[p] * st + s]);
        kv[p].idx = live[p];
    }
    if (mr_radix_sort(kv, m) < 0) goto done;
    size_t hn = 0;
    uint64_t used = 0;
    rc = MR_NO;
    for (size_t q = 0; q < m && rc == MR_NO; q++) {
        size_t i = kv[q].idx;
        int64_t b = begin[i * st + s];
        /* expire active boxes with end <= begin (min-heap on end along s) */
        while (hn > 0 && end[heap[0] * st + s] <= b) {
            heap[0] = heap[--hn];
            size_t x = 0;
            for (;;) {
                size_t l = 2 * x + 1, r = l + 1, sm = x;
                if (l < hn && end[heap[l] * st + s] < end[heap[sm] * st + s]) sm = l;
                if (r < hn && end[heap[r] * st + s] < end[heap[sm] * st + s]) sm = r;
                if (sm == x) break;
                size_t t = heap[x];
                heap[x] = heap[sm];
                heap[sm] = t;
                x = sm;
            }
        }
        for (size_t a = 0; a < hn; a++) {
            if (used >= budget) {
                rc = MR_EBUDGET;
                break;
            }
            used++;
            size_t j = heap[a];
            if (mr_boxes_intersect(d, &begin[j * st], &end[j * st], &begin[i * st], &end[i * st])) {
                rc = MR_YES;
                break;
            }
        }
        if (rc != MR_NO) break;
        size_t x = hn++;
        heap[x] = i;
        while (x > 0) {
            size_t parent = (x - 1) / 2;
            if (end[heap[parent] * st + s] <= end[heap[x] * st + s]) break;
            size_t t = heap[x];
            heap[x] = heap[parent];
            heap[parent] = t;
            x = parent;
        }
    }
done:
    free(kv);
    free(heap);
    return rc;
}

/* ---- entry points ------------------------------------------------------------- */

/* Overlap among the n boxes (row-major begin/end, d dims). `subset`, when not NULL,
 * restricts the check to boxes subset[0:n] (indices into begin/end). Budget applies to
 * the general 3-D+ sweep only. */
static inline int
mr_boxes_overlap_kernel(size_t n, size_t d, size_t st, const size_t *subset, const int64_t *begin,
                        const int64_t *end,
                        uint64_t budget)
{
    if (n < 2) return MR_NO;
    if (d == 0) return MR_YES; /* two points of a 0-D space coincide */
    if (n <= 16) {
        /* small inputs: exact pairwise test, no allocation (at most 120 comparisons, far
         * below the budget, so the budgeted sweep could not have failed either) */
        for (size_t p = 1; p < n; p++) {
            size_t i = subset ? subset[p] : p;
            for (size_t q = 0; q < p; q++) {
                size_t j = subset ? subset[q] : q;
                if (mr_boxes_intersect(d, &begin[i * st], &end[i * st], &begin[j * st], &end[j * st]))
                    return MR_YES;
            }
        }
        return MR_NO;
    }
    size_t *live = mr_kalloc(n, sizeof(size_t));
    if (live == NULL) return MR_ENOMEM;
    size_t m = 0;
    for (size_t p = 0; p < n; p++) {
        size_t i = subset ? subset[p] : p;
        int empty = 0;
        for (size_t k = 0; k < d; k++)
            if (end[i * st + k] <= begin[i * st + k]) {
                empty = 1;
                break;
            }
        if (!empty) live[m++] = i;
    }
    int rc;
    if (m < 2) rc = MR_NO;
    else if (d == 1) rc = mr_overlap_1d(m, st, live, begin, end);
    else {
        rc = mr_overlap_grid(m, d, st, live, begin, end);
        if (rc == 2) rc = (d == 2) ? mr_overlap_2d(m, st, live, begin, end)
                                   : mr_overlap_sweep(m, d, st, live, begin, end, budget);
    }
    free(live);
    return rc;
}

/* Volume of a box as unsigned 128-bit; returns -1 on overflow (shapes are >= 0). */
static inline int
mr_box_volume(size_t d, const int64_t *b, const int64_t *e, unsigned __int128 *out)
{
    unsigned __int128 v = 1;
    for (size_t k = 0; k < d; k++) {
        unsigned __int128 len = (unsigned __int128)((uint64_t)e[k] - (uint64_t)b[k]); /* e >= b */
        if (__builtin_mul_overflow(v, len, &v)) return -1;
    }
    *out = v;
    return 0;
}

/* Exact cover of the container [cb, ce) by boxes (subset as in the overlap kernel):
 * non-empty, every box inside, volume sum equal (overflow: not covered), no overlap. */
static inline int
mr_boxes_exactly_cover_kernel(size_t d, size_t st, const int64_t *cb, const int64_t *ce, size_t n,
                              const size_t *subset,
                              const int64_t *begin, const int64_t *end, uint64_t budget)
{
    if (n == 0) return MR_NO;
    unsigned __int128 cvol, sum = 0;
    if (mr_box_volume(d, cb, ce, &cvol) < 0) return MR_NO;
    for (size_t p = 0; p < n; p++) {
        size_t i = subset ? subset[p] : p;
        for (size_t k = 0; k < d; k++)
            if (begin[i * st + k] < cb[k] || end[i * st + k] > ce[k]) return MR_NO;
    }
    for (size_t p = 0; p < n; p++) {
        size_t i = subset ? subset[p] : p;
        unsigned __int128 v;
        if (mr_box_volume(d, &begin[i * st], &end[i * st], &v) < 0) return MR_NO;
        if (__builtin_add_overflow(sum, v, &sum)) return MR_NO;
    }
    if (sum != cvol) return MR_NO;
    int rc = mr_boxes_overlap_kernel(n, d, st, subset, begin, end, budget);
    if (rc < 0) return rc;
    return rc == MR_YES ? MR_NO : MR_YES;
}

#endif
