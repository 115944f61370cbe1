/* table: the packed fragment table (issue 2). A manifest's fragments are converted
 * once into flat C arrays (tensor index, rank, global offset / end, bytes) held by a
 * FragmentTable, which the Python layer caches on the manifest and reuses for the bulk
 * checks of spec §11.4 #3 and #7 and the grouped exact-cover tests of §11.2 / §11.5.
 *
 * Boxes are stored row-major with one stride (the largest dimension count seen); the
 * unused trailing dimensions are padded with the extent [0, 1), which changes neither
 * overlap nor volume. Each fragment keeps its own dimension count. */
#include "table.h"
#include "coverage_kernels.h"
#include "layout.h"
#include "gctrack.h"
#include "str_index.h"

enum {
    TBL_ENDIM = -3,  /* fragments of one group with different dimension counts */
    TBL_EMIXED = -4, /* a coverage group holding fragments of several tensors */
};

typedef struct {
    PyObject_HEAD
    size_t n;        /* fragments */
    size_t ntensors; /* tensors */
    size_t stride;   /* max dimension count, >= 1 */
    uint32_t *tensor; /* n: tensor index */
    uint32_t *ndim;   /* n */
    int64_t *rank;    /* n*4: dp, tp, pp, ep */
    uint64_t *nbytes; /* n */
    int64_t *begin;   /* n*stride */
    int64_t *end;     /* n*stride */
    uint32_t *tndim;  /* ntensors */
    int64_t *tshape;  /* ntensors*stride, padded with 1 */
} FragmentTable;

/* ---- kernels (no Python) ----------------------------------------------------------- */

static uint64_t
tbl_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 29;
    return h;
}

static int
tbl_same_logical(const FragmentTable *t, size_t i, size_t j)
{
    if (t->tensor[i] != t->tensor[j] || t->ndim[i] != t->ndim[j]) return 0;
    if (memcmp(&t->rank[i * 4], &t->rank[j * 4], 4 * sizeof(int64_t)) != 0) return 0;
    size_t d = t->ndim[i], st = t->stride;
    return memcmp(&t->begin[i * st], &t->begin[j * st], d * sizeof(int64_t)) == 0 &&
           memcmp(&t->end[i * st], &t->end[j * st], d * sizeof(int64_t)) == 0;
}

/* Index of the first fragment (in input order) repeating an earlier one's
 * (tensor, rank, offset, shape); n when none; MR_ENOMEM via *status. */
static size_t
tbl_first_duplicate(const FragmentTable *t, int *status)
{
    size_t n = t->n, st = t->stride, best = n;
    *status = 0;
    if (n < 2) return n;
    mr_kv *kv = mr_kalloc(n, sizeof(mr_kv));
    if (kv == NULL) {
        *status = MR_ENOMEM;
        return n;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t h = tbl_mix(0x1234567ULL, t->tensor[i]);
        h = tbl_mix(h, t->ndim[i]);
        for (size_t a = 0; a < 4; a++) h = tbl_mix(h, (uint64_t)t->rank[i * 4 + a]);
        for (size_t k = 0; k < t->ndim[i]; k++) {
            h = tbl_mix(h, (uint64_t)t->begin[i * st + k]);
            h = tbl_mix(h, (uint64_t)t->end[i * st + k]);
        }
        /* the hash's top 33 bits: three 11-bit digit passes of the radix sort, not six.
         * Equal rows still share a key; rows that merely share one (about n^2 / 2^34 pairs,
         * 18 at 562k rows) are told apart by tbl_same_logical in the run below */
        kv[i].key = h >> 31;
        kv[i].idx = i;
    }
    if (mr_radix_sort(kv, n) < 0) {
        free(kv);
        *status = MR_ENOMEM;
        return n;
    }
    /* runs of equal key are in input order (stable sort): the first member that
     * equals an earlier member of its run is that run's first repeat */
    for (size_t s = 0; s < n;) {
        size_t e = s + 1;
        while (e < n && kv[e].key == kv[s].key) e++;
        for (size_t j = s + 1; j < e && kv[j].idx < best; j++) {
            int found = 0;
            for (size_t i = s; i < j; i++)
                if (tbl_same_logical(t, kv[i].idx, kv[j].idx)) {
                    found = 1;
                    break;
                }
            if (found) {
                best = kv[j].idx;
                break;
            }
        }
        s = e;
    }
    free(kv);
    return best;
}

/* Column values used for grouping. */
enum { COL_DP = 0, COL_TP = 1, COL_PP = 2, COL_EP = 3, COL_TENSOR = 4, COL_EXTERNAL = 5 };

static uint64_t
tbl_col(const FragmentTable *t, const int64_t *external, int col, size_t i)
{
    if (col == COL_TENSOR) return t->tensor[i];
    if (col == COL_EXTERNAL) return mr_bias(external[i]);
    return mr_bias(t->rank[i * 4 + (size_t)col]);
}

/* order[0:n] := fragment indices sorted (stably) by the given columns, lexicographic. When the
 * columns' value ranges fit one 64-bit composite key, *composite := 1 and kv[p].key is row
 * order[p]'s composite key (equal keys exactly when every column is equal); else 0. */
static int
tbl_sort_by(const FragmentTable *t, const int64_t *external, const int *cols, size_t ncols, size_t *order,
            mr_kv *kv, int *composite)
{
    size_t n = t->n;
    *composite = 0;
    for (size_t p = 0; p < n; p++) order[p] = p;
    /* one pass on a composite key when the columns' value ranges fit in 64 bits */
    uint64_t lo[8], width[8];
    unsigned bits_total = 0;
    for (size_t c = 0; c < ncols && ncols <= 8; c++) {
        uint64_t mn = UINT64_MAX, mx = 0;
        for (size_t p = 0; p < n; p++) {
            uint64_t v = tbl_col(t, external, cols[c], p);
            if (v < mn) mn = v;
            if (v > mx) mx = v;
        }
        unsigned b = 0;
        while (b < 64 && ((mx - mn) >> b) != 0) b++;
        lo[c] = mn;
        width[c] = b;
        bits_total += b;
    }
    if (ncols <= 8 && bits_total <= 64) {
        for (size_t p = 0; p < n; p++) {
            uint64_t key = 0;
            for (size_t c = 0; c < ncols; c++) {
                if (width[c] == 0) continue;
                key = (width[c] == 64 ? 0 : key << width[c]) | (tbl_col(t, external, cols[c], p) - lo[c]);
            }
            kv[p].key = key;
            kv[p].idx = p;
        }
        if (mr_radix_sort(kv, n) < 0) return MR_ENOMEM;
        for (size_t p = 0; p < n; p++) order[p] = kv[p].idx;
        *composite = 1;
        return 0;
    }
    for (size_t c = ncols; c-- > 0;) {
        for (size_t p = 0; p < n; p++) {
            kv[p].key = tbl_col(t, external, cols[c], order[p]);
            kv[p].idx = order[p];
        }
        if (mr_radix_sort(kv, n) < 0) return MR_ENOMEM;
        for (size_t p = 0; p < n; p++) order[p] = kv[p].idx;
    }
    return 0;
}

static int
tbl_same_key(const FragmentTable *t, const int64_t *external, const int *cols, size_t ncols, size_t i, size_t j)
{
    for (size_t c = 0; c < ncols; c++)
        if (tbl_col(t, external, cols[c], i) != tbl_col(t, external, cols[c], j)) return 0;
    return 1;
}

/* Collapse identical boxes of members[0:cnt] in place; returns the new count or
 * (size_t)-1 on allocation failure. */
static size_t
tbl_collapse(const FragmentTable *t, size_t *members, size_t cnt, size_t d)
{
    if (cnt < 2) return cnt;
    size_t st = t->stride;
    mr_kv *kv = mr_kalloc(cnt, sizeof(mr_kv));
    if (kv == NULL) return (size_t)-1;
    for (size_t k = 2 * d; k-- > 0;) {
        const int64_t *col = (k & 1) ? t->end : t->begin;
        size_t dim = k / 2;
        for (size_t p = 0; p < cnt; p++) {
            kv[p].key = mr_bias(col[members[p] * st + dim]);
            kv[p].idx = members[p];
        }
        if (mr_radix_sort(kv, cnt) < 0) {
            free(kv);
            return (size_t)-1;
        }
        for (size_t p = 0; p < cnt; p++) members[p] = kv[p].idx;
    }
    free(kv);
    size_t out = 1;
    for (size_t p = 1; p < cnt; p++) {
        size_t a = members[out - 1], b = members[p];
        if (memcmp(&t->begin[a * st], &t->begin[b * st], d * sizeof(int64_t)) == 0 &&
            memcmp(&t->end[a * st], &t->end[b * st], d * sizeof(int64_t)) == 0)
            continue;
        members[out++] = b;
    }
    return out;
}

/* MR_YES when members exactly cover their tensor's box; MR_NO, or an error status. */
static int
tbl_group_covers(const FragmentTable *t, size_t *members, size_t cnt, int collapse, const int64_t *zeros)
{
    uint32_t tensor = t->tensor[members[0]];
    size_t d = t->tndim[tensor];
    for (size_t p = 0; p < cnt; p++) {
        if (t->tensor[members[p]] != tensor) return TBL_EMIXED;
        if (t->ndim[members[p]] != d) return TBL_ENDIM;
    }
    if (collapse) {
        cnt = tbl_collapse(t, members, cnt, d);
        if (cnt == (size_t)-1) return MR_ENOMEM;
    }
    return mr_boxes_exactly_cover_kernel(d, t->stride, zeros, &t->tshape[(size_t)tensor * t->stride], cnt, members,
                                         t->begin, t->end, MR_OVERLAP_BUDGET);
}

typedef enum { CHECK_OVERLAP, CHECK_COVER } tbl_check;

#define TBL_PF 16 /* rows between a prefetch and its use in tbl_check_groups */

/* Hint (no effect on results): the grouping columns of row i. */
static inline void
tbl_prefetch_key(const FragmentTable *t, const int64_t *external, size_t i)
{
    __builtin_prefetch(&t->rank[i * 4]);
    __builtin_prefetch(&t->tensor[i]);
    if (external != NULL) __builtin_prefetch(&external[i]);
}

/* Hint (no effect on results): everything a group check reads of row i. */
static inline void
tbl_prefetch_box(const FragmentTable *t, size_t i)
{
    __builtin_prefetch(&t->tensor[i]);
    __builtin_prefetch(&t->ndim[i]);
    __builtin_prefetch(&t->begin[i * t->stride]);
    __builtin_prefetch(&t->end[i * t->stride]);
}

/* Group fragments by cols; visit groups in first-appearance order (external == NULL)
 * or increasing external id (external != NULL, ids < 0 skipped). Returns the position
 * of the first failing group through *fail_frag (its first fragment) and *fail_key (its
 * external id), or leaves them at n / -1. Status: 0 or an MR_ / TBL_ error.
 *
 * The rows (in fragment id order) are grouped by a sort; a group's rows are scattered over
 * the table. They are copied once, in group order, into a private table g (tensor, ndim and
 * box of each, the row TBL_PF further on asked for ahead), so the checks read memory in
 * sequence; g's row p is table row order[p] and each group is a run of g's rows holding its
 * table rows in increasing order, as before (the same boxes in the same order reach the
 * kernels). Groups are checked in g's order; "the first group in first-appearance order that
 * fails or errs" is then the one with the smallest first row among those that fail or err
 * (each group's outcome depends on its own rows only), and groups whose first row is past
 * the best one found are skipped. */
static int
tbl_check_groups(const FragmentTable *t, const int64_t *external, const int *cols, size_t ncols, tbl_check check,
                 int collapse, size_t *fail_frag, int64_t *fail_key)
{
    size_t n = t->n, st = t->stride;
    *fail_frag = n;
    *fail_key = -1;
    if (n == 0) return 0;
    int rc = MR_ENOMEM, composite = 0;
    size_t nbox;
    FragmentTable g = *t; /* the private copy: tndim, tshape, stride, n as t */
    g.tensor = NULL;
    g.ndim = NULL;
    g.rank = NULL;
    g.nbytes = NULL;
    g.begin = NULL;
    g.end = NULL;
    /* The overlap check reads no box of a group of one (no pair), and most groups are of one
     * (a fragment per tensor and rank): it reads a larger group's boxes from the table itself,
     * through order (the same boxes in the same order as the copy's rows would give), and makes
     * no copy. */
    const int gather = check != CHECK_OVERLAP;
    size_t *order = mr_kalloc(n, sizeof(size_t));
    size_t *members = gather ? mr_kalloc(n, sizeof(size_t)) : NULL; /* members[p] = p, reordered per group by collapse */
    mr_kv *kv = mr_kalloc(n, sizeof(mr_kv));
    int64_t *zeros = calloc(st, sizeof(int64_t));
    if (gather && !__builtin_mul_overflow(n, st, &nbox)) {
        g.tensor = mr_kalloc(n, sizeof(uint32_t));
        g.ndim = mr_kalloc(n, sizeof(uint32_t));
        g.begin = mr_kalloc(nbox, sizeof(int64_t));
        g.end = mr_kalloc(nbox, sizeof(int64_t));
    }
    if (order == NULL || kv == NULL || zeros == NULL ||
        (gather && (members == NULL || g.tensor == NULL || g.ndim == NULL || g.begin == NULL || g.end == NULL)))
        goto done;
    if (tbl_sort_by(t, external, cols, ncols, order, kv, &composite) < 0) goto done;
    for (size_t p = 0; gather && p < n; p++) {
        if (p + TBL_PF < n) tbl_prefetch_box(t, order[p + TBL_PF]);
        size_t i = order[p];
        g.tensor[p] = t->tensor[i];
        g.ndim[p] = t->ndim[i];
        memcpy(&g.begin[p * st], &t->begin[i * st], st * sizeof(int64_t));
        memcpy(&g.end[p * st], &t->end[i * st], st * sizeof(int64_t));
        members[p] = p;
    }
    rc = 0;
    size_t best = n; /* smallest first row of a group that failed or erred so far */
    int best_rc = 0;
    for (size_t s = 0; s < n;) {
        /* the run of equal keys from s: by the composite key (in sequence) when the sort made
         * one, else by the columns of the rows (scattered; the key TBL_PF on asked for ahead) */
        size_t e = s + 1;
        if (composite) {
            while (e < n && kv[e].key == kv[s].key) e++;
        }
        else {
            while (e < n) {
                if (e + TBL_PF < n) tbl_prefetch_key(t, external, order[e + TBL_PF]);
                if (!tbl_same_key(t, external, cols, ncols, order[s], order[e])) break;
                e++;
            }
        }
        size_t first = order[s]; /* the group's smallest row (stable sort) */
        if ((external != NULL && external[first] < 0) || (external == NULL && first > best)) {
            s = e;
            continue;
        }
        int res, failed = 0;
        if (check == CHECK_OVERLAP) {
            /* a group of one: no pair (the kernel's answer for n < 2, MR_NO, without a read) */
            res = MR_NO;
            if (e - s > 1) {
                for (size_t p = s; p < e; p++) tbl_prefetch_box(t, order[p]);
                size_t d = t->ndim[order[s]];
                for (size_t p = s; p < e; p++)
                    if (t->ndim[order[p]] != d) res = TBL_ENDIM;
                if (res == MR_NO)
                    res = mr_boxes_overlap_kernel(e - s, d, st, &order[s], t->begin, t->end, MR_OVERLAP_BUDGET);
            }
            failed = (res == MR_YES);
        }
        else {
            res = tbl_group_covers(&g, &members[s], e - s, collapse, zeros);
            failed = (res == MR_NO);
        }
        if (res < 0 || failed) {
            if (external != NULL) { /* groups in increasing external id: this one is the first */
                if (res < 0) rc = res;
                else {
                    *fail_frag = first;
                    *fail_key = external[first];
                }
                goto done;
            }
            best = first; /* first < best: a later group with a larger first row was skipped */
            best_rc = res < 0 ? res : 0;
        }
        s = e;
    }
    if (best < n) {
        if (best_rc < 0) rc = best_rc;
        else *fail_frag = best;
    }
done:
    free(order);
    free(members);
    free(kv);
    free(zeros);
    free(g.tensor);
    free(g.ndim);
    free(g.begin);
    free(g.end);
    return rc;
}

/* Rows a and b hold the same (hash, rank, box). */
static inline int
tbl_same_row(const FragmentTable *t, const uint64_t *fh, size_t a, size_t b)
{
    size_t st = t->stride, d = t->ndim[a];
    return fh[a] == fh[b] && d == t->ndim[b] && memcmp(&t->rank[a * 4], &t->rank[b * 4], 4 * sizeof(int64_t)) == 0 &&
           memcmp(&t->begin[a * st], &t->begin[b * st], d * sizeof(int64_t)) == 0 &&
           memcmp(&t->end[a * st], &t->end[b * st], d * sizeof(int64_t)) == 0;
}

/* Fragments of tensors u and w (hord ranges, each sorted by fragment hash) are the same
 * set of (rank, box): element-wise identical after the hash sort. A hash tie inside a
 * tensor can only make this answer "different", which is the safe answer. */
static int
tbl_same_problem(const FragmentTable *t, const size_t *start, const size_t *hord, const uint64_t *fh, size_t u,
                 size_t w)
{
    size_t cnt = start[u + 1] - start[u];
    if (cnt == 0 || cnt != start[w + 1] - start[w]) return 0;
    for (size_t p = 0; p < cnt; p++) {
        if (!tbl_same_row(t, fh, hord[start[u] + p], hord[start[w] + p])) return 0;
    }
    return 1;
}

#define TBL_MAX_REPS_PER_HASH 8

/* tensor_classes reads its fragments tensor by tensor, and a tensor's fragments lie at scattered
 * rows (the table is in fragment id order): hints for the rows a few tensors on. */
#define TBL_CLASS_AHEAD 32        /* hord entries between asking for a row's hash and reading it */
#define TBL_CLASS_TENSORS_AHEAD 4 /* tensors between asking for a tensor's rows and comparing them */

/* Ask for fh[hord[q]] for q in [from, min(to, n)); returns where the next call starts. */
static inline size_t
tbl_prefetch_hashes(const uint64_t *fh, const size_t *hord, size_t n, size_t from, size_t to)
{
    if (to > n) to = n;
    for (; from < to; from++) __builtin_prefetch(&fh[hord[from]]);
    return from;
}

/* Ask for what tbl_same_problem reads of tensor u's first rows (hints only). */
static inline void
tbl_prefetch_problem(const FragmentTable *t, const size_t *start, const size_t *hord, const uint64_t *fh, size_t u)
{
    size_t end = start[u + 1], st = t->stride;
    if (end > start[u] + 8) end = start[u] + 8;
    for (size_t q = start[u]; q < end; q++) {
        size_t row = hord[q];
        __builtin_prefetch(&fh[row]);
        __builtin_prefetch(&t->ndim[row]);
        __builtin_prefetch(&t->rank[row * 4]);
        __builtin_prefetch(&t->begin[row * st]);
        __builtin_prefetch(&t->end[row * st]);
    }
}
#define TBL_SMALL_GROUP 32 /* tensors of at most this many fragments sort their hashes in place */

#define TBL_LEAD_AHEAD 16 /* rows between asking for a row's tensor's lead and reading it */

/* For each run of equal keys in tk[0:nt] (tensors sorted stably by problem hash), led by its
 * first tensor f: bad[f] = 0 when every member u has f's class, f's non-zero fragment count and
 * tbl_same_problem(u, f), else 1 (bad[u] of the other members is not set). lead[nt] and
 * place[n] are scratch: lead[u] = f (u itself when its run is not checked this way), place[r] =
 * row r's position in its tensor's hord range. The members' rows are compared with f's in
 * table order. */
static void
tbl_verify_runs(const FragmentTable *t, const int64_t *cls, const size_t *start, const size_t *hord,
                const uint64_t *fh, const mr_kv *tk, size_t *lead, size_t *place, unsigned char *bad)
{
    size_t nt = t->ntensors, n = t->n;
    int any = 0;
    for (size_t s = 0; s < nt;) {
        size_t f = tk[s].idx, cnt = start[f + 1] - start[f], e = s + 1;
        int simple = cnt != 0;
        while (e < nt && tk[e].key == tk[s].key) {
            size_t u = tk[e].idx;
            if (cls[u] != cls[f] || start[u + 1] - start[u] != cnt) simple = 0;
            e++;
        }
        bad[f] = (unsigned char)!simple;
        for (size_t p = s; p < e; p++) lead[tk[p].idx] = simple ? f : tk[p].idx;
        if (simple && e - s > 1) any = 1;
        s = e;
    }
    if (!any) return;
    for (size_t u = 0; u < nt; u++) {
        if (lead[u] == u) continue;
        for (size_t q = start[u]; q < start[u + 1]; q++) place[hord[q]] = q - start[u];
    }
    for (size_t a = 0; a < n; a++) {
        if (a + TBL_LEAD_AHEAD < n) __builtin_prefetch(&lead[t->tensor[a + TBL_LEAD_AHEAD]]); /* a hint */
        size_t u = t->tensor[a], f = lead[u];
        /* a member's rows: its count is f's, so place[a] < that count */
        if (f != u && !bad[f] && !tbl_same_row(t, fh, a, hord[start[f] + place[a]])) bad[f] = 1;
    }
}

/* Kernel: group fragments by tensor and find tensors repeating an earlier tensor's
 * coverage problem: same caller class cls[] (shape and axes) and the same set of
 * (rank, offset, shape). Outputs start[ntensors + 1] and members[n] (each tensor's
 * fragments in input order) and rep[ntensors] (an earlier tensor with the same problem,
 * or the tensor itself). Returns 0 or MR_ENOMEM. */
static int
tbl_tensor_classes(const FragmentTable *t, const int64_t *cls, size_t *start, size_t *members, size_t *rep)
{
    size_t n = t->n, nt = t->ntensors, st = t->stride;
    int rc = MR_ENOMEM;
    size_t *fill = mr_kalloc(nt ? nt : 1, sizeof(size_t));
    size_t *hord = mr_kalloc(n ? n : 1, sizeof(size_t));
    uint64_t *fh = mr_kalloc(n ? n : 1, sizeof(uint64_t));
    mr_kv *kv = mr_kalloc(n ? n : 1, sizeof(mr_kv));
    mr_kv *tk = mr_kalloc(nt ? nt : 1, sizeof(mr_kv));
    if (fill == NULL || hord == NULL || fh == NULL || kv == NULL || tk == NULL) goto done;
    memset(start, 0, (nt + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++) start[t->tensor[i] + 1]++;
    for (size_t u = 0; u < nt; u++) start[u + 1] += start[u];
    memcpy(fill, start, nt * sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        if (i + TBL_LEAD_AHEAD < n) __builtin_prefetch(&fill[t->tensor[i + TBL_LEAD_AHEAD]], 1); /* a hint */
        members[fill[t->tensor[i]]++] = i;
    }
    size_t widest = 0;
    for (size_t u = 0; u < nt; u++)
        if (start[u + 1] - start[u] > widest) widest = start[u + 1] - start[u];
    for (size_t i = 0; i < n; i++) {
        uint64_t h = tbl_mix(0x51ED270B27D0A1F3ULL, t->ndim[i]);
        for (size_t k = 0; k < 4; k++) h = tbl_mix(h, (uint64_t)t->rank[i * 4 + k]);
        for (size_t k = 0; k < t->ndim[i]; k++) {
            h = tbl_mix(h, (uint64_t)t->begin[i * st + k]);
            h = tbl_mix(h, (uint64_t)t->end[i * st + k]);
        }
        fh[i] = h;
    }
    /* hord: each tensor's fragments ordered by (hash, index) */
    if (widest <= TBL_SMALL_GROUP) {
        /* few fragments per tensor: each tensor's members (increasing index) sorted in place by
         * hash, stably (an insertion sort), instead of one sort of every fragment */
        memcpy(hord, members, n * sizeof(size_t));
        size_t ahead = 0; /* hord entries whose hashes were asked for (hints: rows are scattered) */
        for (size_t u = 0; u < nt; u++) {
            ahead = tbl_prefetch_hashes(fh, hord, n, ahead, start[u + 1] + TBL_CLASS_AHEAD);
            size_t *m = hord + start[u], cnt = start[u + 1] - start[u];
            for (size_t p = 1; p < cnt; p++) {
                size_t x = m[p], q = p;
                uint64_t hx = fh[x];
                while (q > 0 && fh[m[q - 1]] > hx) {
                    m[q] = m[q - 1];
                    q--;
                }
                m[q] = x;
            }
        }
    }
    else {
        for (size_t i = 0; i < n; i++) {
            kv[i].key = fh[i];
            kv[i].idx = i;
        }
        if (mr_radix_sort(kv, n) < 0) goto done;
        memcpy(fill, start, nt * sizeof(size_t));
        for (size_t p = 0; p < n; p++) {
            size_t i = kv[p].idx;
            hord[fill[t->tensor[i]]++] = i;
        }
    }
    size_t ahead = 0;
    for (size_t u = 0; u < nt; u++) {
        ahead = tbl_prefetch_hashes(fh, hord, n, ahead, start[u + 1] + TBL_CLASS_AHEAD);
        uint64_t h = tbl_mix(tbl_mix(0x2545F4914F6CDD1DULL, (uint64_t)cls[u]), start[u + 1] - start[u]);
        for (size_t p = start[u]; p < start[u + 1]; p++) h = tbl_mix(h, fh[hord[p]]);
        tk[u].key = h;
        tk[u].idx = u;
        rep[u] = u;
    }
    if (mr_radix_sort(tk, nt) < 0) goto done;
    /* The usual run of equal problem hashes: one class, one fragment count, one problem. Its
     * first tensor f (the lowest index: the sort is stable) is then every member's rep, as the
     * loop below finds. That is proved row by row in table order (tbl_verify_runs: the rows of
     * the members are read in sequence, f's few rows stay in cache) instead of tensor by tensor
     * over rows scattered through the table; a run it cannot prove takes the loop. fill (dead
     * from here) holds each tensor's run first, kv (dead) each row's place in its tensor. */
    unsigned char *bad = mr_kalloc(nt ? nt : 1, 1);
    if (bad == NULL) goto done;
    tbl_verify_runs(t, cls, start, hord, fh, tk, fill, (size_t *)(void *)kv, bad);
    for (size_t s = 0; s < nt;) {
        size_t e = s + 1;
        while (e < nt && tk[e].key == tk[s].key) e++;
        if (!bad[tk[s].idx]) { /* proved: f's problem is each member's */
            for (size_t p = s; p < e; p++) rep[tk[p].idx] = tk[s].idx;
            s = e;
            continue;
        }
        size_t reps[TBL_MAX_REPS_PER_HASH], nreps = 0;
        for (size_t p = s; p < e; p++) { /* stable sort: increasing tensor index */
            if (p + TBL_CLASS_TENSORS_AHEAD < e) tbl_prefetch_problem(t, start, hord, fh, tk[p + TBL_CLASS_TENSORS_AHEAD].idx);
            size_t u = tk[p].idx;
            for (size_t r = 0; r < nreps; r++) {
                if (cls[reps[r]] == cls[u] && tbl_same_problem(t, start, hord, fh, reps[r], u)) {
                    rep[u] = reps[r];
                    break;
                }
            }
            if (rep[u] == u && nreps < TBL_MAX_REPS_PER_HASH) reps[nreps++] = u;
        }
        s = e;
    }
    free(bad);
    rc = 0;
done:
    free(fill);
    free(hord);
    free(fh);
    free(kv);
    free(tk);
    return rc;
}

/* Index of the first fragment (input order) whose dimension count differs from its
 * tensor's, whose end exceeds the tensor shape, or whose nbytes is not its volume
 * times its tensor's itemsize (exact 128-bit arithmetic; overflow is a mismatch);
 * n when none. Spec §4.5 / §11.4 geometry. */
#define TBL_GEOMETRY_AHEAD 16 /* rows between a prefetch of a row's tensor and its use */
static size_t
tbl_first_bad_geometry(const FragmentTable *t, const uint64_t *itemsize)
{
    size_t st = t->stride;
    for (size_t i = 0; i < t->n; i++) {
        if (i + TBL_GEOMETRY_AHEAD < t->n) {
            /* rows come in fragment id order, their tensors in no order: ask for the tensor of
             * the row TBL_GEOMETRY_AHEAD further on now (its arrays outgrow the caches at 10^5
             * tensors; a hint only, the index is in range) */
            size_t ahead = t->tensor[i + TBL_GEOMETRY_AHEAD];
            __builtin_prefetch(&t->tshape[ahead * st]);
            __builtin_prefetch(&itemsize[ahead]);
            __builtin_prefetch(&t->tndim[ahead]);
        }
        uint32_t tix = t->tensor[i];
        uint32_t d = t->ndim[i];
        if (d != t->tndim[tix]) return i;
        const int64_t *b = &t->begin[i * st], *e = &t->end[i * st], *sh = &t->tshape[(size_t)tix * st];
        unsigned __int128 vol = itemsize[tix];
        for (uint32_t k = 0; k < d; k++) {
            if (b[k] < 0 || e[k] <= b[k] || e[k] > sh[k]) return i;
            vol *= (uint64_t)(e[k] - b[k]);
            if (vol > (unsigned __int128)UINT64_MAX) return i;
        }
        if (vol != (unsigned __int128)t->nbytes[i]) return i;
    }
    return t->n;
}

/* ---- Python glue ------------------------------------------------------------------- */

static Py_ssize_t
tbl_len(PyObject *seq, const char *name)
{
    if (PyList_Check(seq)) return PyList_Size(seq);
    if (PyTuple_Check(seq)) return PyTuple_Size(seq);
    if (PyUnicode_Check(seq) || PyBytes_Check(seq) || PyByteArray_Check(seq) || !PySequence_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s must be a sequence", name);
        return -1;
    }
    return PySequence_Size(seq);
}

static int
tbl_int64(PyObject *v, int64_t min, int64_t *out, const char *name)
{
    PyObject *num = PyLong_Check(v) ? (Py_INCREF(v), v) : PyNumber_Index(v);
    if (num == NULL) return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(num, &overflow);
    Py_DECREF(num);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        PyErr_Format(PyExc_ValueError, "%s must fit in a signed 64-bit integer", name);
        return -1;
    }
    if (x < min) {
        PyErr_Format(PyExc_ValueError, "%s must be at least %lld", name, (long long)min);
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

/* Length of seq[i] (a nested sequence). */
static Py_ssize_t
tbl_inner_len(PyObject *seq, Py_ssize_t i, const char *name)
{
    PyObject *inner = mr_seq_item(seq, i);
    if (inner == NULL) return -1;
    Py_ssize_t n = tbl_len(inner, name);
    Py_DECREF(inner);
    return n;
}

/* Read seq[i] (length d) into out[0:d] as ints >= min. */
static int
tbl_inner_read(PyObject *seq, Py_ssize_t i, Py_ssize_t d, int64_t min, int64_t *out, const char *name)
{
    PyObject *inner = mr_seq_item(seq, i);
    if (inner == NULL) return -1;
    int rc = 0;
    Py_ssize_t n = tbl_len(inner, name);
    if (n < 0) rc = -1;
    else if (n != d) {
        PyErr_SetString(PyExc_ValueError, "zip() arguments have different lengths");
        rc = -1;
    }
    for (Py_ssize_t k = 0; rc == 0 && k < d; k++) {
        PyObject *v = mr_seq_item(inner, k);
        if (v == NULL) rc = -1;
        else {
            rc = tbl_int64(v, min, &out[k], name);
            Py_DECREF(v);
        }
    }
    Py_DECREF(inner);
    return rc;
}

static void
tbl_free_arrays(FragmentTable *t)
{
    PyMem_Free(t->tensor);
    PyMem_Free(t->ndim);
    PyMem_Free(t->rank);
    PyMem_Free(t->nbytes);
    PyMem_Free(t->begin);
    PyMem_Free(t->end);
    PyMem_Free(t->tndim);
    PyMem_Free(t->tshape);
    t->tensor = t->ndim = t->tndim = NULL;
    t->rank = t->begin = t->end = t->tshape = NULL;
    t->nbytes = NULL;
}

/* The part of a table both fill paths share: sizes (range-checked), the per-tensor and
 * per-fragment index arrays, and every tensor's dimension count. *stride receives the
 * largest tensor rank (at least 1). Returns 0, or -1 with an exception set. */
static int
tbl_init_header(FragmentTable *t, PyObject *tensor_shapes, Py_ssize_t nt, Py_ssize_t n, size_t *stride)
{
    if ((uint64_t)nt > UINT32_MAX || (uint64_t)n > (uint64_t)(SIZE_MAX / 64)) {
        PyErr_SetString(PyExc_ValueError, "too many tensors or fragments for a fragment table");
        return -1;
    }
    t->n = (size_t)n;
    t->ntensors = (size_t)nt;
    t->tndim = mr_alloc_array(t->ntensors ? t->ntensors : 1, sizeof(uint32_t));
    t->ndim = mr_alloc_array(t->n ? t->n : 1, sizeof(uint32_t));
    t->tensor = mr_alloc_array(t->n ? t->n : 1, sizeof(uint32_t));
    if (t->tndim == NULL || t->ndim == NULL || t->tensor == NULL) return -1;
    *stride = 1;
    for (Py_ssize_t i = 0; i < nt; i++) {
        Py_ssize_t d = tbl_inner_len(tensor_shapes, i, "tensor_shapes");
        if (d < 0) return -1;
        if ((uint64_t)d > 4096) {
            PyErr_SetString(PyExc_ValueError, "too many dimensions for a fragment table");
            return -1;
        }
        t->tndim[i] = (uint32_t)d;
        if ((size_t)d > *stride) *stride = (size_t)d;
    }
    return 0;
}

static int
tbl_fill(FragmentTable *t, PyObject *tensor_shapes, PyObject *tensor_index, PyObject *offsets, PyObject *shapes,
         PyObject *ranks, PyObject *nbytes)
{
    Py_ssize_t nt = tbl_len(tensor_shapes, "tensor_shapes");
    if (nt < 0) return -1;
    Py_ssize_t n = tbl_len(tensor_index, "tensor_index");
    if (n < 0) return -1;
    Py_ssize_t lens[4];
    PyObject *cols[4] = {offsets, shapes, ranks, nbytes};
    const char *names[4] = {"offsets", "shapes", "ranks", "nbytes"};
    for (int c = 0; c < 4; c++) {
        lens[c] = tbl_len(cols[c], names[c]);
        if (lens[c] < 0) return -1;
        if (lens[c] != n) {
            PyErr_SetString(PyExc_ValueError, "fragment columns must have the same length");
            return -1;
        }
    }
    /* pass 1: dimension counts and the common stride */
    size_t stride;
    if (tbl_init_header(t, tensor_shapes, nt, n, &stride) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t d = tbl_inner_len(offsets, i, "offsets");
        if (d < 0) return -1;
        if ((uint64_t)d > 4096) {
            PyErr_SetString(PyExc_ValueError, "too many dimensions for a fragment table");
            return -1;
        }
        t->ndim[i] = (uint32_t)d;
        if ((size_t)d > stride) stride = (size_t)d;
    }
    t->stride = stride;
    size_t cells;
    if (__builtin_mul_overflow(t->n ? t->n : 1, stride, &cells)) {
        PyErr_NoMemory();
        return -1;
    }
    t->begin = mr_alloc_array(cells, sizeof(int64_t));
    t->end = mr_alloc_array(cells, sizeof(int64_t));
    t->rank = mr_alloc_array(t->n ? t->n : 1, 4 * sizeof(int64_t));
    t->nbytes = mr_alloc_array(t->n ? t->n : 1, sizeof(uint64_t));
    size_t tcells;
    if (__builtin_mul_overflow(t->ntensors ? t->ntensors : 1, stride, &tcells)) {
        PyErr_NoMemory();
        return -1;
    }
    t->tshape = mr_alloc_array(tcells, sizeof(int64_t));
    if (t->begin == NULL || t->end == NULL || t->rank == NULL || t->nbytes == NULL || t->tshape == NULL) return -1;
    /* pass 2: values */
    for (Py_ssize_t i = 0; i < nt; i++) {
        int64_t *row = &t->tshape[(size_t)i * stride];
        if (tbl_inner_read(tensor_shapes, i, (Py_ssize_t)t->tndim[i], 0, row, "tensor_shapes") < 0) return -1;
        for (size_t k = t->tndim[i]; k < stride; k++) row[k] = 1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t base = (size_t)i * stride;
        Py_ssize_t d = (Py_ssize_t)t->ndim[i];
        int64_t v;
        PyObject *item = mr_seq_item(tensor_index, i);
        if (item == NULL) return -1;
        int rc = tbl_int64(item, 0, &v, "tensor_index");
        Py_DECREF(item);
        if (rc < 0) return -1;
        if ((uint64_t)v >= t->ntensors) {
            PyErr_SetString(PyExc_ValueError, "tensor_index out of range");
            return -1;
        }
        t->tensor[i] = (uint32_t)v;
        if (tbl_inner_read(offsets, i, d, INT64_MIN, &t->begin[base], "offsets") < 0) return -1;
        if (tbl_inner_read(shapes, i, d, 0, &t->end[base], "shapes") < 0) return -1;
        for (Py_ssize_t k = 0; k < d; k++) {
            if (__builtin_add_overflow(t->begin[base + (size_t)k], t->end[base + (size_t)k],
                                       &t->end[base + (size_t)k])) {
                PyErr_SetString(PyExc_ValueError, "fragment end must fit in a signed 64-bit integer");
                return -1;
            }
        }
        for (size_t k = (size_t)d; k < stride; k++) {
            t->begin[base + k] = 0;
            t->end[base + k] = 1;
        }
        if (tbl_inner_read(ranks, i, 4, INT64_MIN, &t->rank[(size_t)i * 4], "ranks") < 0) return -1;
        item = mr_seq_item(nbytes, i);
        if (item == NULL) return -1;
        PyObject *num = PyLong_Check(item) ? (Py_INCREF(item), item) : PyNumber_Index(item);
        Py_DECREF(item);
        if (num == NULL) return -1;
        unsigned long long nb = PyLong_AsUnsignedLongLong(num);
        Py_DECREF(num);
        if (nb == (unsigned long long)-1 && PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError, "nbytes must fit in an unsigned 64-bit integer");
            }
            return -1;
        }
        t->nbytes[i] = (uint64_t)nb;
    }
    return 0;
}

static PyObject *
tbl_pack(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"tensor_shapes", "tensor_index", "offsets", "shapes", "ranks", "nbytes", NULL};
    PyObject *tensor_shapes, *tensor_index, *offsets, *shapes, *ranks, *nbytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOO:pack_fragments", kwlist, &tensor_shapes, &tensor_index,
                                     &offsets, &shapes, &ranks, &nbytes))
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "FragmentTable has no tp_alloc");
        return NULL;
    }
    PyObject *self = alloc((PyTypeObject *)cls, 0);
    if (self == NULL) return NULL;
    if (tbl_fill((FragmentTable *)self, tensor_shapes, tensor_index, offsets, shapes, ranks, nbytes) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

enum { TOK_DICT, TOK_TENSOR, TOK_OFFSET, TOK_SHAPE, TOK_NBYTES, TOK_RANK, TOK_ID, TOK_ALIASES,
       TOK_DP, TOK_TP, TOK_PP, TOK_EP, TOK_N };
static const char *const tok_names[TOK_N] = {"__dict__", "tensor_id", "global_offset", "local_shape", "nbytes",
                                             "rank", "placement_fragment_id", "aliases", "dp", "tp", "pp", "ep"};

/* Columns of pack_fragments read from fragment objects' state: cols[0..4] = tensor_index,
 * offsets, shapes, ranks, nbytes (new lists). Also: *increasing = every
 * placement_fragment_id is a str greater than the previous one; *any_aliases = some
 * fragment's aliases is truthy. */
static int
tbl_columns_from_objects(PyObject *tensor_index, PyObject *fragments, PyObject *cols[5], int *increasing,
                         int *any_aliases)
{
    PyObject *prev_id = NULL; /* strong reference */
    *increasing = 1;
    *any_aliases = 0;
    PyObject *keys[TOK_N];
    int nkeys = 0, rc = -1;
    for (int c = 0; c < 5; c++) cols[c] = NULL;
    for (; nkeys < TOK_N; nkeys++) {
        keys[nkeys] = PyUnicode_InternFromString(tok_names[nkeys]);
        if (keys[nkeys] == NULL) goto done;
    }
    Py_ssize_t n = tbl_len(fragments, "fragments");
    if (n < 0) goto done;
    for (int c = 0; c < 5; c++) {
        cols[c] = mr_gc_hide(PyList_New(n)); /* out of the collector until full (gctrack.h) */
        if (cols[c] == NULL) goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fragment = mr_seq_item(fragments, i);
        if (fragment == NULL) goto done;
        PyObject *state = mr_pf_state_dict(fragment, keys[TOK_DICT]);
        Py_DECREF(fragment);
        if (state == NULL) goto done;
        /* strong references throughout: attribute lookups below may run Python code */
        PyObject *v[TOK_ALIASES + 1] = {NULL};
        int ok = 1;
        for (int k = TOK_TENSOR; k <= TOK_ALIASES && ok; k++) {
            v[k] = mr_dict_item(state, keys[k]);
            if (v[k] == NULL) ok = 0;
            else Py_INCREF(v[k]);
        }
        PyObject *index = NULL, *rank_state = NULL, *row = NULL;
        if (ok && *increasing) {
            if (!PyUnicode_CheckExact(v[TOK_ID])) *increasing = 0;
            else if (prev_id != NULL) {
                int cmp = PyUnicode_Compare(v[TOK_ID], prev_id);
                if (cmp == -1 && PyErr_Occurred()) ok = 0;
                else if (cmp <= 0) *increasing = 0;
            }
            Py_INCREF(v[TOK_ID]);
            Py_XDECREF(prev_id);
            prev_id = v[TOK_ID];
        }
        /* aliases other than an exact tuple count as aliases (no __bool__ is called) */
        if (ok && !*any_aliases && (!PyTuple_CheckExact(v[TOK_ALIASES]) || PyTuple_Size(v[TOK_ALIASES]) != 0))
            *any_aliases = 1;
        if (ok && !PyUnicode_CheckExact(v[TOK_TENSOR])) {
            PyErr_SetString(PyExc_TypeError, "tensor_id must be a str");
            ok = 0;
        }
        if (ok) {
            index = PyDict_GetItemWithError(tensor_index, v[TOK_TENSOR]);
            if (index == NULL) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, v[TOK_TENSOR]);
                ok = 0;
            }
            else Py_INCREF(index);
        }
        if (ok) {
            rank_state = mr_pf_state_dict(v[TOK_RANK], keys[TOK_DICT]);
            if (rank_state == NULL) ok = 0;
        }
        if (ok) {
            PyObject *r[4];
            for (int k = 0; k < 4 && ok; k++) {
                r[k] = mr_dict_item(rank_state, keys[TOK_DP + k]);
                if (r[k] == NULL) ok = 0;
            }
            if (ok) {
                row = PyTuple_Pack(4, r[0], r[1], r[2], r[3]);
                if (row == NULL) ok = 0;
            }
        }
        if (ok) {
            PyObject *vals[5] = {index, v[TOK_OFFSET], v[TOK_SHAPE], row, v[TOK_NBYTES]};
            index = NULL;
            row = NULL;
            for (int c = 0; c < 5; c++) {
                if (c == 1 || c == 2 || c == 4) Py_INCREF(vals[c]);
                if (PyList_SetItem(cols[c], i, vals[c]) < 0) ok = 0; /* steals */
            }
        }
        Py_XDECREF(index);
        Py_XDECREF(row);
        for (int k = TOK_TENSOR; k <= TOK_ALIASES; k++) Py_XDECREF(v[k]);
        Py_XDECREF(rank_state);
        Py_DECREF(state);
        if (!ok) goto done;
    }
    rc = 0;
    for (int c = 0; c < 5; c++) mr_gc_show(cols[c]); /* full */
done:
    Py_XDECREF(prev_id);
    for (int k = 0; k < nkeys; k++) Py_DECREF(keys[k]);
    if (rc < 0)
        for (int c = 0; c < 5; c++) Py_CLEAR(cols[c]);
    return rc;
}

/* Read the sequence inner (length d) into out[0:d] as ints >= min. */
static int
tbl_read_seq(PyObject *inner, Py_ssize_t d, int64_t min, int64_t *out, const char *name)
{
    Py_ssize_t n = tbl_len(inner, name);
    if (n < 0) return -1;
    if (n != d) {
        PyErr_SetString(PyExc_ValueError, "zip() arguments have different lengths");
        return -1;
    }
    for (Py_ssize_t k = 0; k < d; k++) {
        PyObject *v = mr_seq_item(inner, k);
        if (v == NULL) return -1;
        int rc = tbl_int64(v, min, &out[k], name);
        Py_DECREF(v);
        if (rc < 0) return -1;
    }
    return 0;
}

/* Per-call memo of the int64 values of exact int tuples (offsets, shapes): a placement's
 * fragments share a few offset and shape tuple objects. A small direct-mapped table by the
 * tuple's address and the lower bound read with; a slot holds a strong reference (no address is
 * reused while the call runs) and only an exact tuple of exact ints is remembered: it and its
 * items cannot change, so the values read once are the values any later read gives, and
 * reading them ran no Python code (so neither does a hit, which skips the read). */
#define TBL_SEQ_MEMO 16
#define TBL_SEQ_MEMO_D 8
typedef struct {
    PyObject *seq; /* strong; NULL: empty */
    int64_t min;
    Py_ssize_t n;
    int64_t v[TBL_SEQ_MEMO_D];
} tbl_seq_slot;

static void
tbl_seq_memo_free(tbl_seq_slot *m)
{
    if (m == NULL) return;
    for (int k = 0; k < TBL_SEQ_MEMO; k++) Py_XDECREF(m[k].seq); /* exact int tuples: no Python code */
    PyMem_Free(m);
}

/* tbl_read_seq through the memo m (NULL: none). */
static int
tbl_read_seq_memo(tbl_seq_slot *m, PyObject *inner, Py_ssize_t d, int64_t min, int64_t *out, const char *name)
{
    tbl_seq_slot *slot = NULL;
    if (m != NULL && PyTuple_CheckExact(inner)) {
        uintptr_t a = (uintptr_t)inner;
        slot = &m[((a >> 4) ^ (a >> 10)) & (TBL_SEQ_MEMO - 1)]; /* one slot per tuple, whatever min */
        if (slot->seq == inner && slot->min == min && slot->n == d) {
            memcpy(out, slot->v, (size_t)d * sizeof(int64_t));
            return 0;
        }
    }
    if (tbl_read_seq(inner, d, min, out, name) < 0) return -1;
    if (slot == NULL || d > TBL_SEQ_MEMO_D) return 0;
    for (Py_ssize_t k = 0; k < d; k++) {
        PyObject *item = PyTuple_GetItem(inner, k); /* in range: the read above took d items */
        if (item == NULL || !PyLong_CheckExact(item)) {
            PyErr_Clear();
            return 0;
        }
    }
    PyObject *old = slot->seq;
    slot->seq = Py_NewRef(inner);
    slot->min = min;
    slot->n = d;
    memcpy(slot->v, out, (size_t)d * sizeof(int64_t));
    Py_XDECREF(old); /* an exact tuple of exact ints: its release runs no Python code */
    return 0;
}

/* Whether seq is an exact tuple of exact ints (reading it ran no Python code). */
static int
tbl_exact_ints(PyObject *seq)
{
    if (!PyTuple_CheckExact(seq)) return 0;
    Py_ssize_t n = PyTuple_Size(seq);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyTuple_GetItem(seq, k);
        if (item == NULL || !PyLong_CheckExact(item)) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* Per-call memo of fragment rank objects' (dp, tp, pp, ep): a placement's fragments share a
 * few rank objects, read once per call each. A slot holds a strong reference, so no address
 * is reused while the call runs. */
typedef struct {
    PyObject *rank; /* strong; NULL: empty */
    int64_t v[4];
} tbl_rank_slot;

typedef struct {
    tbl_rank_slot *slots;
    size_t cap, used; /* cap: 0 or a power of two */
} tbl_rank_memo;

static size_t
tbl_rank_slot_of(const tbl_rank_memo *m, const PyObject *rank)
{
    uint64_t x = (uint64_t)(uintptr_t)rank;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    size_t mask = m->cap - 1, i = (size_t)x & mask;
    while (m->slots[i].rank != NULL && m->slots[i].rank != rank) i = (i + 1) & mask;
    return i;
}

static void
tbl_rank_memo_free(tbl_rank_memo *m)
{
    for (size_t i = 0; i < m->cap; i++) Py_XDECREF(m->slots[i].rank);
    PyMem_Free(m->slots);
    m->slots = NULL;
    m->cap = m->used = 0;
}

/* Remember rank -> v (best effort: nothing is remembered when memory is short). */
static void
tbl_rank_memo_put(tbl_rank_memo *m, PyObject *rank, const int64_t *v)
{
    if (m->cap == 0 || (m->used + 1) * 2 > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        if (cap > ((size_t)PY_SSIZE_T_MAX) / sizeof(tbl_rank_slot)) return;
        tbl_rank_slot *slots = PyMem_Malloc(cap * sizeof(tbl_rank_slot));
        if (slots == NULL) return;
        for (size_t i = 0; i < cap; i++) slots[i].rank = NULL;
        tbl_rank_memo grown = {slots, cap, m->used};
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].rank != NULL) grown.slots[tbl_rank_slot_of(&grown, m->slots[i].rank)] = m->slots[i];
        PyMem_Free(m->slots);
        *m = grown;
    }
    tbl_rank_slot *slot = &m->slots[tbl_rank_slot_of(m, rank)];
    if (slot->rank != NULL) return;
    Py_INCREF(rank);
    slot->rank = rank;
    memcpy(slot->v, v, sizeof(slot->v));
    m->used++;
}

/* The first 16 UTF-8 bytes of a str (zero padded), for deciding most order comparisons of
 * ids without reading the strings again: when two padded prefixes differ, their memcmp
 * order is the strings' code point order. ok = 0 when the str has no UTF-8 form. */
typedef struct {
    unsigned char b[16];
    int ok;
} tbl_prefix;

static void
tbl_prefix_of(PyObject *str, tbl_prefix *p)
{
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(str, &n);
    memset(p->b, 0, sizeof(p->b));
    p->ok = s != NULL;
    if (s == NULL) {
        PyErr_Clear();
        return;
    }
    memcpy(p->b, s, n < 16 ? (size_t)n : 16);
}

/* Direct fill of t from fragment objects (one pass, no intermediate column lists); the
 * values, checks and errors are those of tbl_columns_from_objects + tbl_fill. Returns 0,
 * -1 with an exception, or 1 (nothing raised) when some fragment has more dimensions than
 * every tensor: the caller then takes the column path, which sizes the stride from the
 * fragments too. With rows (a permutation of range(n), checked by the caller), fragments[i]
 * becomes row rows[i] and *increasing is judged in row order; ids: n slots (NULL-initialised)
 * that receive strong references to the ids by row, released by the caller. */
#define TBL_AHEAD 8 /* fragments between a prefetch of a row and its use */

/* Borrowed state[keys[k]] for k in TOK_TENSOR..TOK_ALIASES (v[k]) from one scan of an exact
 * fragment's state, matching the interned names by identity (no hashing, no Python code). When
 * every key met is an exact str no two keys are equal, so state[name] is the entry whose key is
 * name, or one equal to it: a slot the scan leaves NULL is then looked up by the caller, in
 * order, as before. -1 (v cleared) when a key is not an exact str: every field is looked up. */
static int
tbl_scan_fields(PyObject *state, PyObject *const *keys, PyObject **v)
{
    for (int k = TOK_TENSOR; k <= TOK_ALIASES; k++) v[k] = NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(state, &pos, &key, &value)) {
        int k = TOK_TENSOR;
        while (k <= TOK_ALIASES && key != keys[k]) k++;
        if (k <= TOK_ALIASES) v[k] = value;
        else if (!PyUnicode_CheckExact(key)) {
            for (k = TOK_TENSOR; k <= TOK_ALIASES; k++) v[k] = NULL;
            return -1;
        }
    }
    return 0;
}

static int
tbl_fill_objects(FragmentTable *t, PyObject *tensor_shapes, PyObject *tensor_index, PyObject *fragments,
                 const size_t *rows, PyObject **ids, PyObject *const *keys, int *increasing, int *any_aliases,
                 PyObject *fragment_type)
{
    *increasing = 1;
    *any_aliases = 0;
    Py_ssize_t n = tbl_len(fragments, "fragments");
    if (n < 0) return -1;
    Py_ssize_t nt = tbl_len(tensor_shapes, "tensor_shapes");
    if (nt < 0) return -1;
    size_t stride;
    if (tbl_init_header(t, tensor_shapes, nt, n, &stride) < 0) return -1;
    t->stride = stride;
    size_t cells, tcells;
    if (__builtin_mul_overflow(t->n ? t->n : 1, stride, &cells) ||
        __builtin_mul_overflow(t->ntensors ? t->ntensors : 1, stride, &tcells)) {
        PyErr_NoMemory();
        return -1;
    }
    t->begin = mr_alloc_array(cells, sizeof(int64_t));
    t->end = mr_alloc_array(cells, sizeof(int64_t));
    t->rank = mr_alloc_array(t->n ? t->n : 1, 4 * sizeof(int64_t));
    t->nbytes = mr_alloc_array(t->n ? t->n : 1, sizeof(uint64_t));
    t->tshape = mr_alloc_array(tcells, sizeof(int64_t));
    if (t->begin == NULL || t->end == NULL || t->rank == NULL || t->nbytes == NULL || t->tshape == NULL) return -1;
    for (Py_ssize_t i = 0; i < nt; i++) {
        int64_t *row = &t->tshape[(size_t)i * stride];
        if (tbl_inner_read(tensor_shapes, i, (Py_ssize_t)t->tndim[i], 0, row, "tensor_shapes") < 0) return -1;
        for (size_t k = t->tndim[i]; k < stride; k++) row[k] = 1;
    }
    PyObject *prev_id = NULL; /* strong reference */
    int rc = 0;
    tbl_rank_memo memo = {NULL, 0, 0};
    mr_str_memo last; /* the tensor ids' table by identity (str_index.h) */
    if (!mr_str_is_pair(tensor_index)) mr_str_memo_init(&last, tensor_index, PyDict_Size(tensor_index), (int64_t)t->ntensors);
    else {
        Py_ssize_t nkeys = mr_str_pair_size(tensor_index, (int64_t)t->ntensors);
        if (nkeys < 0) return -1;
        mr_str_memo_init_pair(&last, tensor_index, nkeys, (int64_t)t->ntensors);
    }
    tbl_seq_slot *seq_memo = PyMem_Calloc(TBL_SEQ_MEMO, sizeof(tbl_seq_slot)); /* NULL: no memo */
    tbl_prefix *prefix = NULL; /* with rows: prefix[r] of row r's id (ids[i] of row rows[i]) */
    if (rows != NULL && (prefix = mr_alloc_array(n ? (size_t)n : 1, sizeof(tbl_prefix))) == NULL) {
        tbl_seq_memo_free(seq_memo);
        return -1;
    }
    /* fragment_type accepted as a C-owned layout of PlacementFragment's fields (layout.h): an
     * exact instance's fields are loaded from it (an empty one raises KeyError, as a missing
     * key of the dict-backed class's state did) */
    static mr_class_memo pf_memo;
    mr_layout_class pf_lc = {NULL, 0};
    int pf_ok = fragment_type != NULL && mr_pf_layout(&pf_memo, &pf_lc, fragment_type);
    static const int tok_of_pf[TOK_ALIASES + 1] = {-1,
                                                   MR_PF_TENSOR_ID,
                                                   MR_PF_GLOBAL_OFFSET,
                                                   MR_PF_LOCAL_SHAPE,
                                                   MR_PF_NBYTES,
                                                   MR_PF_RANK,
                                                   MR_PF_PLACEMENT_FRAGMENT_ID,
                                                   MR_PF_ALIASES};
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        if (rows != NULL && i + TBL_AHEAD < n) {
            /* the fragments come in input order and their rows are scattered over the arrays:
             * ask for the row of the fragment TBL_AHEAD further on now (a hint, for writing) */
            size_t ahead = rows[i + TBL_AHEAD];
            __builtin_prefetch(&t->begin[ahead * stride], 1);
            __builtin_prefetch(&t->end[ahead * stride], 1);
            __builtin_prefetch(&t->rank[ahead * 4], 1);
            __builtin_prefetch(&t->nbytes[ahead], 1);
            __builtin_prefetch(&t->tensor[ahead], 1);
            __builtin_prefetch(&t->ndim[ahead], 1);
            __builtin_prefetch(&prefix[ahead], 1);
        }
        if (pf_ok) {
            mr_pf_prefetch_ahead(fragments, i, n, &pf_lc, TBL_AHEAD);
            int list = PyList_Check(fragments);
            PyObject *near = i + TBL_AHEAD >= n || (!list && !PyTuple_Check(fragments)) ? NULL
                             : list ? PyList_GetItem(fragments, i + TBL_AHEAD)
                                    : PyTuple_GetItem(fragments, i + TBL_AHEAD);
            PyObject *const *nf = near != NULL ? mr_layout_fields(near, &pf_lc) : NULL;
            if (near == NULL) PyErr_Clear(); /* (a list that shrank: a hint only) */
            if (nf != NULL && nf[MR_PF_TENSOR_ID] != NULL) mr_str_memo_prefetch(&last, nf[MR_PF_TENSOR_ID]);
        }
        PyObject *fragment = mr_seq_item(fragments, i);
        if (fragment == NULL) {
            rc = -1;
            break;
        }
        /* an exact fragment_type instance: its __dict__ attribute is its own state dict
         * (PyObject_GenericGetDict, what the class's __dict__ descriptor returns), read without
         * the attribute lookup; its fields from one identity scan (tbl_scan_fields) */
        int exact = fragment_type != NULL && (PyObject *)Py_TYPE(fragment) == fragment_type;
        PyObject *const *lf = exact && pf_ok ? mr_layout_fields(fragment, &pf_lc) : NULL;
        if (exact && !pf_ok && mr_pf_derived(fragment_type)) exact = 0; /* a layout not accepted: its state */
        if (lf == NULL) mr_str_memo_code(&last); /* the state reads below may run Python code */
        PyObject *state = lf != NULL ? NULL
                          : exact    ? PyObject_GenericGetDict(fragment, NULL)
                                     : mr_pf_state_dict(fragment, keys[TOK_DICT]);
        if (lf == NULL) Py_DECREF(fragment); /* (else held until its fields are) */
        if (state != NULL && exact && !PyDict_Check(state)) {
            Py_CLEAR(state);
            PyErr_SetString(PyExc_TypeError, "fragment state must be a dict");
        }
        if (state == NULL && lf == NULL) {
            rc = -1;
            break;
        }
        size_t r = rows != NULL ? rows[i] : (size_t)i;
        /* strong references throughout: lookups below may run Python code */
        PyObject *v[TOK_ALIASES + 1] = {NULL};
        if (lf != NULL) {
            for (int k = TOK_TENSOR; k <= TOK_ALIASES && rc == 0; k++) {
                v[k] = lf[tok_of_pf[k]];
                if (v[k] == NULL) {
                    PyErr_SetObject(PyExc_KeyError, keys[k]);
                    rc = -1;
                }
            }
            for (int k = TOK_TENSOR; k <= TOK_ALIASES; k++) Py_XINCREF(v[k]);
            Py_DECREF(fragment);
        }
        else if (exact) {
            (void)tbl_scan_fields(state, keys, v);
            for (int k = TOK_TENSOR; k <= TOK_ALIASES; k++) Py_XINCREF(v[k]);
        }
        for (int k = TOK_TENSOR; k <= TOK_ALIASES && rc == 0 && lf == NULL; k++) {
            if (v[k] != NULL) continue;
            v[k] = mr_dict_item(state, keys[k]);
            if (v[k] == NULL) rc = -1;
            else Py_INCREF(v[k]);
        }
        if (rc == 0 && rows != NULL) {
            /* ids by input position (written in sequence), their prefixes at their rows (as
             * the row's other columns), judged in row order after the loop */
            if (!PyUnicode_CheckExact(v[TOK_ID])) *increasing = 0;
            else if (*increasing && ids[i] == NULL) {
                Py_INCREF(v[TOK_ID]);
                ids[i] = v[TOK_ID];
                tbl_prefix_of(v[TOK_ID], &prefix[r]);
            }
        }
        else if (rc == 0 && *increasing) {
            if (!PyUnicode_CheckExact(v[TOK_ID])) *increasing = 0;
            else if (prev_id != NULL) {
                int cmp = PyUnicode_Compare(v[TOK_ID], prev_id);
                if (cmp == -1 && PyErr_Occurred()) rc = -1;
                else if (cmp <= 0) *increasing = 0;
            }
            Py_INCREF(v[TOK_ID]);
            Py_XDECREF(prev_id);
            prev_id = v[TOK_ID];
        }
        if (rc == 0 && !*any_aliases && (!PyTuple_CheckExact(v[TOK_ALIASES]) || PyTuple_Size(v[TOK_ALIASES]) != 0))
            *any_aliases = 1;
        if (rc == 0 && !PyUnicode_CheckExact(v[TOK_TENSOR])) {
            PyErr_SetString(PyExc_TypeError, "tensor_id must be a str");
            rc = -1;
        }
        int64_t known;
        if (rc == 0 && mr_str_memo_get(&last, v[TOK_TENSOR], &known) != NULL)
            t->tensor[r] = (uint32_t)known; /* in range: only such values are in the table */
        else if (rc == 0) {
            /* an exact str key: a key of the dict that is not an exact str may run its __eq__ */
            PyObject *lookup = mr_str_memo_dict(&last);
            PyObject *index = lookup == NULL ? NULL : PyDict_GetItemWithError(lookup, v[TOK_TENSOR]);
            mr_str_memo_missed(&last);
            if (index == NULL) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, v[TOK_TENSOR]);
                rc = -1;
            }
            else {
                int64_t x;
                if (!PyLong_CheckExact(index)) mr_str_memo_code(&last); /* its __index__ may run */
                Py_INCREF(index);
                rc = tbl_int64(index, 0, &x, "tensor_index");
                Py_DECREF(index);
                if (rc == 0 && (uint64_t)x >= t->ntensors) {
                    PyErr_SetString(PyExc_ValueError, "tensor_index out of range");
                    rc = -1;
                }
                if (rc == 0) t->tensor[r] = (uint32_t)x;
            }
        }
        size_t base = r * stride;
        Py_ssize_t d = 0;
        int rank_hit = 0;
        if (rc == 0) {
            d = tbl_len(v[TOK_OFFSET], "offsets");
            if (d < 0) rc = -1;
            else if ((size_t)d > stride) rc = 1; /* more dimensions than every tensor */
            else t->ndim[r] = (uint32_t)d;
        }
        if (rc == 0) rc = tbl_read_seq_memo(seq_memo, v[TOK_OFFSET], d, INT64_MIN, &t->begin[base], "offsets");
        if (rc == 0) rc = tbl_read_seq_memo(seq_memo, v[TOK_SHAPE], d, 0, &t->end[base], "shapes");
        for (Py_ssize_t k = 0; rc == 0 && k < d; k++) {
            if (__builtin_add_overflow(t->begin[base + (size_t)k], t->end[base + (size_t)k],
                                       &t->end[base + (size_t)k])) {
                PyErr_SetString(PyExc_ValueError, "fragment end must fit in a signed 64-bit integer");
                rc = -1;
            }
        }
        if (rc == 0) {
            for (size_t k = (size_t)d; k < stride; k++) {
                t->begin[base + k] = 0;
                t->end[base + k] = 1;
            }
            const tbl_rank_slot *hit = NULL;
            if (memo.cap != 0) {
                hit = &memo.slots[tbl_rank_slot_of(&memo, v[TOK_RANK])];
                if (hit->rank != v[TOK_RANK]) hit = NULL;
            }
            rank_hit = hit != NULL;
            if (hit != NULL) memcpy(&t->rank[r * 4], hit->v, sizeof(hit->v));
            else {
                PyObject *rank_state = mr_pf_state_dict(v[TOK_RANK], keys[TOK_DICT]);
                if (rank_state == NULL) rc = -1;
                for (int k = 0; k < 4 && rc == 0; k++) {
                    PyObject *rv = mr_dict_item(rank_state, keys[TOK_DP + k]);
                    if (rv == NULL) rc = -1;
                    else {
                        Py_INCREF(rv);
                        rc = tbl_int64(rv, INT64_MIN, &t->rank[r * 4 + (size_t)k], "ranks");
                        Py_DECREF(rv);
                    }
                }
                Py_XDECREF(rank_state);
                if (rc == 0) tbl_rank_memo_put(&memo, v[TOK_RANK], &t->rank[r * 4]);
            }
        }
        if (rc == 0) {
            PyObject *item = v[TOK_NBYTES];
            PyObject *num = PyLong_Check(item) ? (Py_INCREF(item), item) : PyNumber_Index(item);
            if (num == NULL) rc = -1;
            else {
                unsigned long long nb = PyLong_AsUnsignedLongLong(num);
                Py_DECREF(num);
                if (nb == (unsigned long long)-1 && PyErr_Occurred()) {
                    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
                        PyErr_Clear();
                        PyErr_SetString(PyExc_ValueError, "nbytes must fit in an unsigned 64-bit integer");
                    }
                    rc = -1;
                }
                else t->nbytes[r] = (uint64_t)nb;
            }
        }
        /* the reads after the lookup ran no Python code only when each was of an exact type
         * (no __index__, no sequence protocol) and the rank was remembered (a rank read may run
         * code): else the next lookup is not answered by the memo */
        if (rc == 0 && !(lf != NULL && rank_hit && PyLong_CheckExact(v[TOK_NBYTES]) &&
                         tbl_exact_ints(v[TOK_OFFSET]) && tbl_exact_ints(v[TOK_SHAPE])))
            mr_str_memo_code(&last);
        for (int k = TOK_TENSOR; k <= TOK_ALIASES; k++) Py_XDECREF(v[k]);
        Py_XDECREF(state);
    }
    Py_XDECREF(prev_id);
    tbl_rank_memo_free(&memo);
    tbl_seq_memo_free(seq_memo);
    mr_str_memo_clear(&last);
    /* rows: ids strictly increasing in row order (ids[i] is row rows[i]'s), decided by the
     * prefixes read in sequence; the ids themselves (through input_of, made at the first
     * need) only where two prefixes tie or one is missing */
    if (rc == 0 && rows != NULL && *increasing && t->n > 1) {
        size_t *input_of = NULL;
        for (size_t r = 1; rc == 0 && *increasing && r < t->n; r++) {
            int cmp = 0;
            if (prefix[r - 1].ok && prefix[r].ok) cmp = memcmp(prefix[r].b, prefix[r - 1].b, sizeof(prefix[r].b));
            if (cmp == 0) {
                if (input_of == NULL) {
                    input_of = mr_alloc_array(t->n, sizeof(size_t));
                    if (input_of == NULL) {
                        rc = -1;
                        break;
                    }
                    for (size_t i = 0; i < t->n; i++) input_of[rows[i]] = i;
                }
                size_t a = input_of[r - 1], b = input_of[r];
                cmp = PyUnicode_Compare(ids[b], ids[a]);
                if (cmp == -1 && PyErr_Occurred()) rc = -1;
            }
            if (rc == 0 && cmp <= 0) *increasing = 0;
        }
        PyMem_Free(input_of);
    }
    PyMem_Free(prefix);
    return rc;
}

/* rows argument of pack_objects: a list, or bytes of native int64 (array("q")'s layout, what
 * sorted_groups(..., packed=True) returns), that is a permutation of range(n), as size_t[n]. */
static size_t *
tbl_rows(PyObject *list, Py_ssize_t n)
{
    size_t packed_size = 0;
    int packed = PyBytes_Check(list);
    if (packed && __builtin_mul_overflow(n ? (size_t)n : 0, sizeof(int64_t), &packed_size)) packed = -1;
    if (packed ? packed < 0 || (size_t)PyBytes_Size(list) != packed_size
               : !PyList_Check(list) || PyList_Size(list) != n) {
        PyErr_SetString(PyExc_ValueError, "rows must be a list with one row per fragment");
        return NULL;
    }
    const char *bytes = packed ? PyBytes_AsString(list) : NULL;
    if (packed && bytes == NULL) return NULL;
    size_t *rows = mr_alloc_array(n ? (size_t)n : 1, sizeof(size_t));
    unsigned char *seen = mr_alloc_array(n ? (size_t)n : 1, 1);
    if (rows == NULL || seen == NULL) {
        PyMem_Free(rows);
        PyMem_Free(seen);
        return NULL;
    }
    memset(seen, 0, n ? (size_t)n : 1);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v = -1;
        if (bytes != NULL) {
            memcpy(&v, bytes + (size_t)i * sizeof(int64_t), sizeof(v));
            if (v < 0 || v >= (int64_t)n || seen[v]) {
                PyErr_SetString(PyExc_ValueError, "rows must be a permutation of range(n)");
                PyMem_Free(rows);
                PyMem_Free(seen);
                return NULL;
            }
            seen[v] = 1;
            rows[i] = (size_t)v;
            continue;
        }
        PyObject *item = PyList_GetItem(list, i);
        if (item == NULL || !PyLong_CheckExact(item) || tbl_int64(item, 0, &v, "rows") < 0 || v >= (int64_t)n ||
            seen[v]) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "rows must be a permutation of range(n)");
            PyMem_Free(rows);
            PyMem_Free(seen);
            return NULL;
        }
        seen[v] = 1;
        rows[i] = (size_t)v;
    }
    PyMem_Free(seen);
    return rows;
}

static PyObject *
tbl_pack_objects(PyObject *cls, PyObject *args)
{
    PyObject *tensor_shapes, *tensor_index, *fragments, *rows_arg = Py_None, *fragment_type = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|OO:pack_placement_fragments", &tensor_shapes, &tensor_index, &fragments,
                          &rows_arg, &fragment_type))
        return NULL;
    if (!PyDict_Check(tensor_index) && !mr_str_is_pair(tensor_index)) {
        PyErr_SetString(PyExc_TypeError, "tensor_index must be a dict or an (ids, positions) pair");
        return NULL;
    }
    if (fragment_type != Py_None && !PyType_Check(fragment_type)) {
        PyErr_SetString(PyExc_TypeError, "fragment_type must be a class or None");
        return NULL;
    }
    size_t *rows = NULL;
    PyObject **ids = NULL;
    Py_ssize_t nrows = 0;
    if (rows_arg != Py_None) {
        nrows = tbl_len(fragments, "fragments");
        if (nrows < 0) return NULL;
        rows = tbl_rows(rows_arg, nrows);
        if (rows == NULL) return NULL;
        ids = mr_alloc_array(nrows ? (size_t)nrows : 1, sizeof(PyObject *));
        if (ids == NULL) {
            PyMem_Free(rows);
            return NULL;
        }
        for (Py_ssize_t k = 0; k < nrows; k++) ids[k] = NULL;
    }
    int increasing, any_aliases;
    PyObject *table = NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "FragmentTable has no tp_alloc");
        return NULL;
    }
    PyObject *keys[TOK_N];
    int nkeys = 0, rc = -1;
    for (; nkeys < TOK_N; nkeys++) {
        keys[nkeys] = PyUnicode_InternFromString(tok_names[nkeys]);
        if (keys[nkeys] == NULL) break;
    }
    if (nkeys == TOK_N) {
        table = alloc((PyTypeObject *)cls, 0);
        if (table != NULL) {
            rc = tbl_fill_objects((FragmentTable *)table, tensor_shapes, tensor_index, fragments, rows, ids, keys,
                                  &increasing, &any_aliases, fragment_type == Py_None ? NULL : fragment_type);
            if (rc != 0) Py_CLEAR(table);
        }
    }
    for (int k = 0; k < nkeys; k++) Py_DECREF(keys[k]);
    PyObject *permuted = NULL;
    if (rc > 0 && rows != NULL) {
        /* the column path reads the fragments in row order */
        permuted = mr_gc_hide(PyList_New(nrows)); /* until full: an item read may run code (gctrack.h) */
        for (Py_ssize_t i = 0; permuted != NULL && i < nrows; i++) {
            PyObject *item = mr_seq_item(fragments, i);
            if (item == NULL || PyList_SetItem(permuted, (Py_ssize_t)rows[i], item) < 0) Py_CLEAR(permuted);
        }
        mr_gc_show(permuted);
        if (permuted == NULL) rc = -1;
        else fragments = permuted;
    }
    if (ids != NULL)
        for (Py_ssize_t k = 0; k < nrows; k++) Py_XDECREF(ids[k]);
    PyMem_Free(ids);
    PyMem_Free(rows);
    if (rc < 0) return NULL;
    if (rc > 0) {
        /* a fragment with more dimensions than every tensor: the column path */
        PyObject *cols[5];
        PyObject *index_dict = mr_str_is_pair(tensor_index) ? mr_str_pair_dict(tensor_index) : Py_NewRef(tensor_index);
        int crc = index_dict == NULL ? -1 : tbl_columns_from_objects(index_dict, fragments, cols, &increasing, &any_aliases);
        Py_XDECREF(index_dict);
        Py_XDECREF(permuted);
        if (crc < 0) return NULL;
        PyObject *pargs = Py_BuildValue("(OOOOOO)", tensor_shapes, cols[0], cols[1], cols[2], cols[3], cols[4]);
        for (int c = 0; c < 5; c++) Py_DECREF(cols[c]);
        if (pargs == NULL) return NULL;
        table = tbl_pack(cls, pargs, NULL);
        Py_DECREF(pargs);
        if (table == NULL) return NULL;
    }
    PyObject *res = Py_BuildValue("(OOO)", table, increasing ? Py_True : Py_False, any_aliases ? Py_True : Py_False);
    Py_DECREF(table);
    return res;
}

static PyObject *
tbl_status_error(int rc)
{
    if (rc == MR_EBUDGET) PyErr_SetString(PyExc_ValueError, "high-dimensional overlap budget exceeded before validation");
    else if (rc == TBL_ENDIM) PyErr_SetString(PyExc_ValueError, "zip() arguments have different lengths");
    else if (rc == TBL_EMIXED) PyErr_SetString(PyExc_ValueError, "a coverage group must hold fragments of one tensor");
    else PyErr_NoMemory();
    return NULL;
}

static PyObject *
tbl_bad_geometry(PyObject *self, PyObject *itemsizes)
{
    const FragmentTable *t = (const FragmentTable *)self;
    Py_ssize_t nt = tbl_len(itemsizes, "itemsizes");
    if (nt < 0) return NULL;
    if ((size_t)nt != t->ntensors) {
        PyErr_SetString(PyExc_ValueError, "itemsizes must have one entry per tensor");
        return NULL;
    }
    uint64_t *items = mr_alloc_array(t->ntensors ? t->ntensors : 1, sizeof(uint64_t));
    if (items == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nt; i++) {
        int64_t v;
        PyObject *item = mr_seq_item(itemsizes, i);
        if (item == NULL) {
            PyMem_Free(items);
            return NULL;
        }
        int rc = tbl_int64(item, 1, &v, "itemsizes");
        Py_DECREF(item);
        if (rc < 0) {
            PyMem_Free(items);
            return NULL;
        }
        items[i] = (uint64_t)v;
    }
    size_t idx;
    Py_BEGIN_ALLOW_THREADS
    idx = tbl_first_bad_geometry(t, items);
    Py_END_ALLOW_THREADS
    PyMem_Free(items);
    return PyLong_FromSsize_t(idx == t->n ? -1 : (Py_ssize_t)idx);
}

static PyObject *
tbl_size_list(const size_t *v, size_t n)
{
    if (n > (size_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (list == NULL) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromSize_t(v[i]);
        if (x == NULL || PyList_SetItem(list, (Py_ssize_t)i, x) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

/* tensor_classes' result in the form _coverage's check reads, (empty, checks): empty, the first
 * tensor without fragments (-1 when none); checks, [(t, members of t)] for each tensor t that is
 * its own rep, in tensor order, up to empty (not included): the tensors the check visits, and
 * only their members as int objects (the three full lists made one each per fragment and tensor,
 * read only at these). */
static PyObject *
tbl_class_checks(size_t nt, const size_t *start, const size_t *members, const size_t *rep)
{
    size_t empty = nt;
    for (size_t u = 0; u < nt; u++)
        if (start[u] == start[u + 1]) {
            empty = u;
            break;
        }
    PyObject *checks = PyList_New(0), *result = NULL;
    if (checks == NULL) return NULL;
    for (size_t u = 0; u < empty; u++) {
        if (rep[u] != u) continue;
        PyObject *pos = PyLong_FromSize_t(u);
        PyObject *group = pos == NULL ? NULL : tbl_size_list(members + start[u], start[u + 1] - start[u]);
        PyObject *pair = group == NULL ? NULL : PyTuple_Pack(2, pos, group);
        Py_XDECREF(pos);
        Py_XDECREF(group);
        int rc = pair == NULL ? -1 : PyList_Append(checks, pair);
        Py_XDECREF(pair);
        if (rc < 0) {
            Py_DECREF(checks);
            return NULL;
        }
    }
    result = Py_BuildValue("(nO)", empty == nt ? (Py_ssize_t)-1 : (Py_ssize_t)empty, checks);
    Py_DECREF(checks);
    return result;
}

static PyObject *
tbl_tensor_classes_form(PyObject *self, PyObject *classes, int checks)
{
    const FragmentTable *t = (const FragmentTable *)self;
    Py_ssize_t nt = tbl_len(classes, "classes");
    if (nt < 0) return NULL;
    if ((size_t)nt != t->ntensors) {
        PyErr_SetString(PyExc_ValueError, "classes must have one entry per tensor");
        return NULL;
    }
    PyObject *result = NULL;
    int64_t *cls = mr_alloc_array(t->ntensors ? t->ntensors : 1, sizeof(int64_t));
    size_t *start = mr_alloc_array(t->ntensors + 1, sizeof(size_t));
    size_t *members = mr_alloc_array(t->n ? t->n : 1, sizeof(size_t));
    size_t *rep = mr_alloc_array(t->ntensors ? t->ntensors : 1, sizeof(size_t));
    if (cls == NULL || start == NULL || members == NULL || rep == NULL) goto done;
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *item = mr_seq_item(classes, i);
        if (item == NULL) goto done;
        int rc = tbl_int64(item, 0, &cls[i], "classes");
        Py_DECREF(item);
        if (rc < 0) goto done;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tbl_tensor_classes(t, cls, start, members, rep);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        tbl_status_error(rc);
        goto done;
    }
    if (checks) {
        result = tbl_class_checks(t->ntensors, start, members, rep);
        goto done;
    }
    PyObject *a = tbl_size_list(rep, t->ntensors);
    PyObject *b = a ? tbl_size_list(start, t->ntensors + 1) : NULL;
    PyObject *c = b ? tbl_size_list(members, t->n) : NULL;
    if (c != NULL) result = PyTuple_Pack(3, a, b, c);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
done:
    PyMem_Free(cls);
    PyMem_Free(start);
    PyMem_Free(members);
    PyMem_Free(rep);
    return result;
}

static PyObject *
tbl_tensor_classes_py(PyObject *self, PyObject *classes)
{
    return tbl_tensor_classes_form(self, classes, 0);
}

static PyObject *
tbl_tensor_class_checks(PyObject *self, PyObject *classes)
{
    return tbl_tensor_classes_form(self, classes, 1);
}

static PyObject *
tbl_duplicate_logical_fragment(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    const FragmentTable *t = (const FragmentTable *)self;
    int status;
    size_t idx;
    Py_BEGIN_ALLOW_THREADS
    idx = tbl_first_duplicate(t, &status);
    Py_END_ALLOW_THREADS
    if (status < 0) return tbl_status_error(status);
    return PyLong_FromSsize_t(idx == t->n ? -1 : (Py_ssize_t)idx);
}

static PyObject *
tbl_overlapping_rank_group(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    const FragmentTable *t = (const FragmentTable *)self;
    static const int cols[] = {COL_TENSOR, COL_DP, COL_TP, COL_PP, COL_EP};
    size_t frag;
    int64_t key;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tbl_check_groups(t, NULL, cols, 5, CHECK_OVERLAP, 0, &frag, &key);
    Py_END_ALLOW_THREADS
    if (rc < 0) return tbl_status_error(rc);
    return PyLong_FromSsize_t(frag == t->n ? -1 : (Py_ssize_t)frag);
}

static PyObject *
tbl_uncovered_group(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"axes", "collapse", NULL};
    PyObject *axes;
    int collapse = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:uncovered_group", kwlist, &axes, &collapse)) return NULL;
    const FragmentTable *t = (const FragmentTable *)self;
    int cols[5] = {COL_TENSOR, 0, 0, 0, 0};
    size_t ncols = 1;
    Py_ssize_t na = tbl_len(axes, "axes");
    if (na < 0) return NULL;
    if (na > 4) {
        PyErr_SetString(PyExc_ValueError, "axes must name distinct kinds among dp, tp, pp, ep");
        return NULL;
    }
    for (Py_ssize_t a = 0; a < na; a++) {
        PyObject *name = mr_seq_item(axes, a);
        if (name == NULL) return NULL;
        int col = -1;
        if (PyUnicode_Check(name)) {
            if (PyUnicode_CompareWithASCIIString(name, "dp") == 0) col = COL_DP;
            else if (PyUnicode_CompareWithASCIIString(name, "tp") == 0) col = COL_TP;
            else if (PyUnicode_CompareWithASCIIString(name, "pp") == 0) col = COL_PP;
            else if (PyUnicode_CompareWithASCIIString(name, "ep") == 0) col = COL_EP;
        }
        Py_DECREF(name);
        for (size_t c = 1; c < ncols; c++)
            if (cols[c] == col) col = -1;
        if (col < 0) {
            PyErr_SetString(PyExc_ValueError, "axes must name distinct kinds among dp, tp, pp, ep");
            return NULL;
        }
        cols[ncols++] = col;
    }
    size_t frag;
    int64_t key;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tbl_check_groups(t, NULL, cols, ncols, CHECK_COVER, collapse, &frag, &key);
    Py_END_ALLOW_THREADS
    if (rc < 0) return tbl_status_error(rc);
    return PyLong_FromSsize_t(frag == t->n ? -1 : (Py_ssize_t)frag);
}

static PyObject *
tbl_first_uncovered_group(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"group_of", "collapse", NULL};
    PyObject *group_of;
    int collapse = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:first_uncovered_group", kwlist, &group_of, &collapse))
        return NULL;
    const FragmentTable *t = (const FragmentTable *)self;
    Py_ssize_t n = tbl_len(group_of, "group_of");
    if (n < 0) return NULL;
    if ((size_t)n != t->n) {
        PyErr_SetString(PyExc_ValueError, "group_of must have one entry per fragment");
        return NULL;
    }
    int64_t *ids = mr_alloc_array(t->n ? t->n : 1, sizeof(int64_t));
    if (ids == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = mr_seq_item(group_of, i);
        int rc = (v == NULL) ? -1 : tbl_int64(v, -1, &ids[i], "group_of");
        Py_XDECREF(v);
        if (rc < 0) {
            PyMem_Free(ids);
            return NULL;
        }
    }
    static const int cols[] = {COL_EXTERNAL};
    size_t frag;
    int64_t key;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tbl_check_groups(t, ids, cols, 1, CHECK_COVER, collapse, &frag, &key);
    Py_END_ALLOW_THREADS
    PyMem_Free(ids);
    if (rc < 0) return tbl_status_error(rc);
    return PyLong_FromLongLong(frag == t->n ? -1 : (long long)key);
}

/* 0 when lst is an exact list of len items; -1 with TypeError / ValueError naming what. */
static int
tbl_list_arg(PyObject *lst, size_t len, const char *what)
{
    if (!PyList_CheckExact(lst)) {
        PyErr_Format(PyExc_TypeError, "first_tensors: %s must be a list", what);
        return -1;
    }
    Py_ssize_t n = PyList_Size(lst);
    if (n < 0) return -1;
    if ((size_t)n != len) {
        PyErr_Format(PyExc_ValueError, "first_tensors: %s has the wrong length", what);
        return -1;
    }
    return 0;
}

/* [lst[idx[j]] for j in range(m)] (indices in range: checked by the caller). */
static PyObject *
tbl_gather(PyObject *lst, const size_t *idx, size_t m)
{
    PyObject *out = PyList_New((Py_ssize_t)m);
    if (out == NULL) return NULL;
    for (size_t j = 0; j < m; j++) {
        PyObject *item = PyList_GetItem(lst, (Py_ssize_t)idx[j]); /* borrowed */
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        Py_INCREF(item);
        PyList_SetItem(out, (Py_ssize_t)j, item); /* steals; a fresh list: cannot fail */
    }
    return out;
}

/* first_tensors(per_fragment, *per_tensor): the tensors that have fragments, in the order of their
 * first appearance among the fragments (rows), as items of the given lists: per_fragment (one
 * item per fragment, or None) taken at each tensor's first row (increasing rows), each
 * per_tensor list (one item per tensor, in tensor index order) at the tensor's index. One
 * sequential pass over the tensor column; items are copied by reference, never read. */
static PyObject *
tbl_first_tensors(PyObject *self, PyObject *args)
{
    const FragmentTable *t = (const FragmentTable *)self;
    Py_ssize_t nargs = PyTuple_Size(args);
    if (nargs < 0) return NULL;
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "first_tensors: per_fragment (a list or None) is required");
        return NULL;
    }
    for (Py_ssize_t a = 0; a < nargs; a++) {
        PyObject *lst = PyTuple_GetItem(args, a);
        if (lst == NULL) return NULL;
        if (a == 0 && lst == Py_None) continue;
        if (tbl_list_arg(lst, a == 0 ? t->n : t->ntensors, a == 0 ? "per_fragment" : "per_tensor") < 0)
            return NULL;
    }
    size_t nt = t->ntensors, m = 0;
    unsigned char *seen = mr_alloc_array(nt ? nt : 1, 1);
    size_t *pos = mr_alloc_array(nt ? nt : 1, sizeof(size_t));
    size_t *row = mr_alloc_array(nt ? nt : 1, sizeof(size_t));
    PyObject *result = NULL;
    if (seen == NULL || pos == NULL || row == NULL) goto done;
    memset(seen, 0, nt ? nt : 1);
    for (size_t i = 0; i < t->n && m < nt; i++) {
        uint32_t k = t->tensor[i]; /* < ntensors: checked when the table was packed */
        if (!seen[k]) {
            seen[k] = 1;
            pos[m] = k;
            row[m++] = i;
        }
    }
    result = mr_gc_hide(PyTuple_New(nargs)); /* until full: the lists' allocations may collect (gctrack.h) */
    if (result == NULL) goto done;
    for (Py_ssize_t a = 0; a < nargs; a++) {
        PyObject *lst = PyTuple_GetItem(args, a);
        PyObject *out = NULL;
        if (lst == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        if (lst == Py_None) out = Py_NewRef(Py_None); /* only the first argument can be None */
        else out = tbl_gather(lst, a == 0 ? row : pos, m);
        if (out == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SetItem(result, a, out); /* steals; a fresh tuple: cannot fail */
    }
    mr_gc_show(result); /* full */
done:
    PyMem_Free(seen);
    PyMem_Free(pos);
    PyMem_Free(row);
    return result;
}

static PyObject *
tbl_total_nbytes(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    const FragmentTable *t = (const FragmentTable *)self;
    unsigned __int128 sum = 0;
    for (size_t i = 0; i < t->n; i++) sum += t->nbytes[i]; /* n < 2^64: cannot overflow 128 bits */
    PyObject *hi = PyLong_FromUnsignedLongLong((unsigned long long)(sum >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)sum);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *res = NULL, *tmp = NULL;
    if (hi != NULL && lo != NULL && shift != NULL) {
        tmp = PyNumber_Lshift(hi, shift);
        if (tmp != NULL) res = PyNumber_Or(tmp, lo);
    }
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    Py_XDECREF(tmp);
    return res;
}

static Py_ssize_t
tbl_length(PyObject *self)
{
    return (Py_ssize_t)((FragmentTable *)self)->n;
}

static int
tbl_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static void
tbl_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    tbl_free_arrays((FragmentTable *)self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* With the automatic collector off (the class in the module's place): the pass's rank memo
 * (tbl_rank_memo) holds a rank's values for the whole call, and the first read of a rank whose
 * attributes are still inline makes its dict, an allocation that could otherwise run gc callbacks
 * (Python code that could change a rank already read; tests/test_lead29_collector_memos.py). */
MR_COLLECTOR_PAUSED_FAST(tbl_pack_objects)

static PyMethodDef tbl_methods[] = {
    {"pack", (PyCFunction)(void (*)(void))tbl_pack, METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "Build a FragmentTable from per-fragment columns (see pack_fragments)."},
    {"pack_objects", (PyCFunction)(void (*)(void))tbl_pack_objects_paused_fast, METH_CLASS | METH_FASTCALL,
     "pack_objects(tensor_shapes, tensor_index, fragments, rows=None, fragment_type=None): (table, ids strictly "
     "increasing, any aliases) over placement fragment objects' state; an exact fragment_type instance's state "
     "is read without the attribute lookup (same values). rows: a list of ints or bytes of native int64."},
    {"duplicate_logical_fragment", tbl_duplicate_logical_fragment, METH_NOARGS,
     "Index of the first fragment repeating an earlier (tensor, rank, offset, shape), or -1."},
    {"overlapping_rank_group", tbl_overlapping_rank_group, METH_NOARGS,
     "First fragment of the first (tensor, rank) group whose boxes overlap, or -1."},
    {"uncovered_group", (PyCFunction)(void (*)(void))tbl_uncovered_group, METH_VARARGS | METH_KEYWORDS,
     "First fragment of the first (tensor, *axes) group not exactly covering its tensor, or -1."},
    {"first_uncovered_group", (PyCFunction)(void (*)(void))tbl_first_uncovered_group,
     METH_VARARGS | METH_KEYWORDS, "Smallest caller-given group id not exactly covering its tensor, or -1."},
    {"tensor_classes", tbl_tensor_classes_py, METH_O,
     "(rep, start, members): per-tensor fragment groups and tensors repeating an earlier coverage problem."},
    {"tensor_class_checks", tbl_tensor_class_checks, METH_O,
     "(empty, [(t, members of t)]): the first tensor without fragments (-1 if none) and, before it, each tensor "
     "t with rep[t] == t (tensor_classes) and its fragments, in tensor order."},
    {"bad_geometry", tbl_bad_geometry, METH_O,
     "Index of the first fragment whose rank, bounds or nbytes disagree with its tensor, or -1."},
    {"first_tensors", tbl_first_tensors, METH_VARARGS,
     "first_tensors(per_fragment, *per_tensor): the tensors having fragments, in first-appearance order: "
     "per_fragment (a list, one item per fragment, or None) at each one's first row, each per_tensor list "
     "(one item per tensor) at its index."},
    {"total_nbytes", tbl_total_nbytes, METH_NOARGS, "Sum of the fragments' nbytes."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot tbl_slots[] = {
    {Py_tp_doc, (void *)"Packed, immutable C arrays of a manifest's fragments (built by pack_fragments)."},
    {Py_tp_dealloc, (void *)tbl_dealloc},
    {Py_tp_traverse, (void *)tbl_traverse},
    {Py_tp_methods, (void *)tbl_methods},
    {Py_sq_length, (void *)tbl_length},
    {0, NULL},
};

static PyType_Spec tbl_spec = {
    .name = "mooncake.reshard._native.FragmentTable",
    .basicsize = sizeof(FragmentTable),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = tbl_slots,
};

int
Init_Table(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &tbl_spec, NULL);
    if (type == NULL) return -1;
    int rc = PyModule_AddType(module, (PyTypeObject *)type);
    if (rc == 0) {
        PyObject *pack = PyObject_GetAttrString(type, "pack");
        if (pack == NULL) rc = -1;
        else {
            rc = PyModule_AddObjectRef(module, "pack_fragments", pack);
            Py_DECREF(pack);
        }
    }
    Py_DECREF(type);
    return rc;
}
