/* libFuzzer target: the FragmentTable kernels of csrc/table.c (tbl_first_duplicate,
 * tbl_check_groups for the rank-group overlap check, the axis-keyed and caller-keyed coverage
 * groups with and without collapsing, tbl_first_bad_geometry), compiled by #include-ing the C
 * file. The table is filled exactly like tbl_fill does (common stride, trailing dimensions padded
 * with [0, 1), tensor shapes padded with 1); the kernels never touch the object header.
 * Oracle: naive grouping in first-appearance / increasing-id order, pairwise overlap, containment
 * plus 128-bit volume cover, and the literal spec 4.5 geometry rules. */
#include "../../csrc/table.c"
#include "../../csrc/layout.c" /* mr_pf_names / mr_pf_name_ptrs, which layout.h's placement readers use */
#include "fuzz_input.h"

#define MAXN 40
#define MAXT 3
#define MAXD 4

static FragmentTable T;
static uint32_t f_tensor[MAXN], f_ndim[MAXN], t_ndim[MAXT];
static int64_t f_rank[MAXN * 4], f_begin[MAXN * MAXD], f_end[MAXN * MAXD], t_shape[MAXT * MAXD];
static uint64_t f_nbytes[MAXN], t_itemsize[MAXT];

static int
same_box(size_t i, size_t j, size_t d)
{
    size_t st = T.stride;
    for (size_t k = 0; k < d; k++)
        if (T.begin[i * st + k] != T.begin[j * st + k] || T.end[i * st + k] != T.end[j * st + k]) return 0;
    return 1;
}

static int
intersect(size_t i, size_t j, size_t d)
{
    size_t st = T.stride;
    for (size_t k = 0; k < d; k++) {
        int64_t lo = T.begin[i * st + k] > T.begin[j * st + k] ? T.begin[i * st + k] : T.begin[j * st + k];
        int64_t hi = T.end[i * st + k] < T.end[j * st + k] ? T.end[i * st + k] : T.end[j * st + k];
        if (hi <= lo) return 0;
    }
    return 1;
}

/* 1 covered, 0 not (volume overflow beyond 128 bits counts as not covered, as documented). */
static int
naive_cover(const size_t *m, size_t cnt, size_t d, uint32_t tensor)
{
    if (cnt == 0) return 0;
    size_t st = T.stride;
    const int64_t *sh = &T.tshape[(size_t)tensor * st];
    unsigned __int128 cvol = 1, sum = 0;
    for (size_t k = 0; k < d; k++)
        if (__builtin_mul_overflow(cvol, (unsigned __int128)(uint64_t)sh[k], &cvol)) return 0;
    for (size_t p = 0; p < cnt; p++) {
        unsigned __int128 v = 1;
        for (size_t k = 0; k < d; k++) {
            if (T.begin[m[p] * st + k] < 0 || T.end[m[p] * st + k] > sh[k]) return 0;
            if (__builtin_mul_overflow(v, (unsigned __int128)(uint64_t)(T.end[m[p] * st + k] - T.begin[m[p] * st + k]), &v))
                return 0;
        }
        if (__builtin_add_overflow(sum, v, &sum)) return 0;
    }
    if (sum != cvol) return 0;
    for (size_t p = 0; p < cnt; p++)
        for (size_t q = 0; q < p; q++)
            if (intersect(m[p], m[q], d)) return 0;
    return 1;
}

static uint64_t
key_of(size_t i, const int *cols, size_t ncols, const int64_t *ext, size_t c)
{
    (void)ncols;
    return tbl_col(&T, ext, cols[c], i);
}

/* Oracle for tbl_check_groups. Returns the status; *frag is the failing group's first fragment. */
static int
oracle_groups(const int64_t *ext, const int *cols, size_t ncols, tbl_check check, int collapse, size_t *frag)
{
    size_t n = T.n;
    *frag = n;
    int seen[MAXN] = {0};
    size_t order[MAXN], norder = 0;
    /* group heads in visiting order */
    if (ext == NULL) {
        for (size_t i = 0; i < n; i++) order[norder++] = i;
    }
    else {
        /* increasing id, ids < 0 skipped; head = smallest index with that id */
        for (;;) {
            size_t best = n;
            for (size_t i = 0; i < n; i++)
                if (!seen[i] && ext[i] >= 0 && (best == n || ext[i] < ext[best])) best = i;
            if (best == n) break;
            order[norder++] = best;
            for (size_t i = 0; i < n; i++)
                if (ext[i] == ext[best]) seen[i] = 1;
        }
        memset(seen, 0, sizeof(seen));
    }
    for (size_t h = 0; h < norder; h++) {
        size_t head = order[h];
        if (seen[head]) continue;
        size_t m[MAXN], cnt = 0;
        for (size_t i = 0; i < n; i++) {
            int same = 1;
            for (size_t c = 0; c < ncols && same; c++)
                if (key_of(i, cols, ncols, ext, c) != key_of(head, cols, ncols, ext, c)) same = 0;
            if (same) { m[cnt++] = i; seen[i] = 1; }
        }
        if (check == CHECK_OVERLAP) {
            size_t d = T.ndim[head];
            for (size_t p = 0; p < cnt; p++)
                if (T.ndim[m[p]] != d) return TBL_ENDIM;
            int hit = 0;
            for (size_t p = 0; p < cnt && !hit; p++)
                for (size_t q = 0; q < p && !hit; q++)
                    if (d == 0 || intersect(m[p], m[q], d)) hit = 1;
            if (hit) { *frag = head; return 0; }
        }
        else {
            uint32_t tensor = T.tensor[head];
            size_t d = T.tndim[tensor];
            for (size_t p = 0; p < cnt; p++) {
                if (T.tensor[m[p]] != tensor) return TBL_EMIXED;
                if (T.ndim[m[p]] != d) return TBL_ENDIM;
            }
            if (collapse) {
                size_t out = 0;
                for (size_t p = 0; p < cnt; p++) {
                    int dup = 0;
                    for (size_t q = 0; q < out && !dup; q++)
                        if (same_box(m[p], m[q], d)) dup = 1;
                    if (!dup) m[out++] = m[p];
                }
                cnt = out;
            }
            if (!naive_cover(m, cnt, d, tensor)) { *frag = head; return 0; }
        }
    }
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size, 0};
    size_t nt = 1 + fz_below(&in, MAXT), n = fz_below(&in, MAXN + 1);
    uint8_t mode = fz_u8(&in);
    size_t stride = 1;
    for (size_t t = 0; t < nt; t++) {
        t_ndim[t] = (uint32_t)fz_below(&in, MAXD + 1);
        t_itemsize[t] = 1 + fz_below(&in, 4);
        if (t_ndim[t] > stride) stride = t_ndim[t];
    }
    for (size_t t = 0; t < nt; t++)
        for (size_t k = 0; k < MAXD; k++) t_shape[t * MAXD + k] = (int64_t)(1 + fz_below(&in, 6));
    if (mode & 1) t_shape[0] = (int64_t)1 << (40 + fz_below(&in, 22));
    for (size_t i = 0; i < n; i++) {
        f_tensor[i] = (uint32_t)fz_below(&in, nt);
        f_ndim[i] = (fz_u8(&in) < 16) ? (uint32_t)fz_below(&in, MAXD + 1) : t_ndim[f_tensor[i]];
    }
    for (size_t i = 0; i < n; i++)
        if (f_ndim[i] > stride) stride = f_ndim[i];
    /* tensor shapes at the final stride, padded with 1 (as tbl_fill does) */
    static int64_t tshape[MAXT * MAXD];
    for (size_t t = 0; t < nt; t++)
        for (size_t k = 0; k < stride; k++) tshape[t * stride + k] = k < t_ndim[t] ? t_shape[t * MAXD + k] : 1;
    for (size_t i = 0; i < n; i++) {
        int64_t *b = &f_begin[i * stride], *e = &f_end[i * stride];
        uint32_t t = f_tensor[i];
        unsigned __int128 vol = t_itemsize[t];
        for (size_t k = 0; k < stride; k++) {
            if (k < f_ndim[i]) {
                int64_t ext = k < t_ndim[t] ? tshape[t * stride + k] : 3;
                b[k] = (mode & 2) && fz_u8(&in) < 8 ? fz_coord(&in, INT64_MIN / 2, INT64_MAX / 2)
                                                    : (int64_t)fz_below(&in, (uint64_t)(ext < 6 ? ext : 6));
                int64_t len = (int64_t)fz_below(&in, 4) + (fz_u8(&in) < 200);
                if (ext > 64 && fz_u8(&in) < 64) len = ext - b[k];
                e[k] = b[k] + len;
                vol *= (unsigned __int128)(uint64_t)len;
            }
            else {
                b[k] = 0;
                e[k] = 1;
            }
        }
        f_nbytes[i] = (fz_u8(&in) < 32 || vol > UINT64_MAX) ? fz_u64(&in) : (uint64_t)vol;
        for (int a = 0; a < 4; a++)
            f_rank[i * 4 + a] = (mode & 4) && fz_u8(&in) < 8 ? (int64_t)fz_u64(&in) : (int64_t)fz_below(&in, 2);
    }
    memset(&T, 0, sizeof(T));
    T.n = n;
    T.ntensors = nt;
    T.stride = stride;
    T.tensor = f_tensor;
    T.ndim = f_ndim;
    T.rank = f_rank;
    T.nbytes = f_nbytes;
    T.begin = f_begin;
    T.end = f_end;
    T.tndim = t_ndim;
    T.tshape = tshape;

    /* duplicates */
    int status;
    size_t got = tbl_first_duplicate(&T, &status);
    size_t want = n;
    for (size_t i = 0; i < n && want == n; i++)
        for (size_t j = 0; j < i; j++)
            if (f_tensor[i] == f_tensor[j] && f_ndim[i] == f_ndim[j]
                && memcmp(&f_rank[i * 4], &f_rank[j * 4], 32) == 0 && same_box(i, j, f_ndim[i])) {
                want = i;
                break;
            }
    FZ_CHECK(status == 0 && got == want, "first duplicate %zu != oracle %zu (n=%zu)", got, want, n);

    /* geometry */
    got = tbl_first_bad_geometry(&T, t_itemsize);
    want = n;
    for (size_t i = 0; i < n && want == n; i++) {
        uint32_t t = f_tensor[i];
        if (f_ndim[i] != t_ndim[t]) { want = i; break; }
        unsigned __int128 vol = t_itemsize[t];
        int bad = 0;
        for (size_t k = 0; k < f_ndim[i]; k++) {
            int64_t b = f_begin[i * stride + k], e = f_end[i * stride + k];
            if (b < 0 || e <= b || e > tshape[t * stride + k]) bad = 1;
            else if (__builtin_mul_overflow(vol, (unsigned __int128)(uint64_t)(e - b), &vol)) bad = 1;
        }
        if (bad || vol != (unsigned __int128)f_nbytes[i]) want = i;
    }
    FZ_CHECK(got == want, "first bad geometry %zu != oracle %zu", got, want);

    /* rank-group overlap */
    static const int ocols[] = {COL_TENSOR, COL_DP, COL_TP, COL_PP, COL_EP};
    size_t frag, wfrag;
    int64_t key;
    int rc = tbl_check_groups(&T, NULL, ocols, 5, CHECK_OVERLAP, 0, &frag, &key);
    int wrc = oracle_groups(NULL, ocols, 5, CHECK_OVERLAP, 0, &wfrag);
    FZ_CHECK(rc == wrc && (rc < 0 || frag == wfrag), "overlap groups (%d, %zu) != oracle (%d, %zu)", rc, frag, wrc,
             wfrag);

    /* axis-keyed coverage */
    int ccols[5] = {COL_TENSOR};
    size_t ncols = 1;
    uint8_t axes = fz_u8(&in);
    for (int a = 0; a < 4; a++)
        if (axes & (1 << a)) ccols[ncols++] = a;
    int collapse = (axes >> 4) & 1;
    rc = tbl_check_groups(&T, NULL, ccols, ncols, CHECK_COVER, collapse, &frag, &key);
    wrc = oracle_groups(NULL, ccols, ncols, CHECK_COVER, collapse, &wfrag);
    FZ_CHECK(rc == wrc && (rc < 0 || frag == wfrag), "cover groups (%d, %zu) != oracle (%d, %zu) cols=%zu collapse=%d",
             rc, frag, wrc, wfrag, ncols, collapse);

    /* caller-keyed coverage */
    int64_t ext[MAXN];
    for (size_t i = 0; i < n; i++) ext[i] = (int64_t)fz_below(&in, 4) - 1;
    static const int xcols[] = {COL_EXTERNAL};
    rc = tbl_check_groups(&T, ext, xcols, 1, CHECK_COVER, collapse, &frag, &key);
    wrc = oracle_groups(ext, xcols, 1, CHECK_COVER, collapse, &wfrag);
    FZ_CHECK(rc == wrc && (rc < 0 || frag == wfrag), "external groups (%d, %zu) != oracle (%d, %zu)", rc, frag, wrc,
             wfrag);
    if (rc == 0 && frag < n) FZ_CHECK(key == ext[frag], "failing key %lld != %lld", (long long)key, (long long)ext[frag]);
    return 0;
}
