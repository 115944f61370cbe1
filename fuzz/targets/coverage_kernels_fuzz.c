/* libFuzzer target: the Python-free N-D box kernels of csrc/coverage_kernels.h
 * (mr_boxes_overlap_kernel, mr_boxes_exactly_cover_kernel), differential against a naive
 * pairwise oracle (spec 11.3). Inputs respect the glue's preconditions (coverage.c/table.c):
 * begin and end fit int64, shapes >= 0. Checks: no crash / UB / leak (sanitizers), identical
 * verdicts, and the budget status only from the 3-D+ sweep when the budget is below the
 * number of pairs. */
#include "../../csrc/coverage_kernels.h"
#include "fuzz_input.h"

#define MAXN 48
#define MAXD 5

static int
naive_intersect(size_t d, const int64_t *ba, const int64_t *ea, const int64_t *bb, const int64_t *eb)
{
    for (size_t k = 0; k < d; k++) {
        int64_t lo = ba[k] > bb[k] ? ba[k] : bb[k];
        int64_t hi = ea[k] < eb[k] ? ea[k] : eb[k];
        if (hi <= lo) return 0;
    }
    return 1;
}

static int
naive_overlap(size_t n, size_t d, const int64_t *b, const int64_t *e)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (naive_intersect(d, &b[i * d], &e[i * d], &b[j * d], &e[j * d])) return 1;
    return 0;
}

/* 1 covered, 0 not, -1 volume arithmetic beyond 128 bits (the kernel documents "not covered"). */
static int
naive_cover(size_t n, size_t d, const int64_t *cb, const int64_t *ce, const int64_t *b, const int64_t *e)
{
    if (n == 0) return 0;
    unsigned __int128 cvol = 1, sum = 0;
    int overflow = 0;
    for (size_t k = 0; k < d; k++)
        if (__builtin_mul_overflow(cvol, (unsigned __int128)((uint64_t)ce[k] - (uint64_t)cb[k]), &cvol)) overflow = 1;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < d; k++)
            if (b[i * d + k] < cb[k] || e[i * d + k] > ce[k]) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned __int128 v = 1;
        for (size_t k = 0; k < d; k++)
            if (__builtin_mul_overflow(v, (unsigned __int128)((uint64_t)e[i * d + k] - (uint64_t)b[i * d + k]), &v))
                overflow = 1;
        if (__builtin_add_overflow(sum, v, &sum)) overflow = 1;
    }
    if (overflow) return -1;
    if (sum != cvol) return 0;
    return !naive_overlap(n, d, b, e);
}

/* Split [lo, hi) into up to `pieces` cuts; returns the number of intervals written. */
static size_t
cuts(fz_in *in, int64_t lo, int64_t hi, size_t pieces, int64_t *cb, int64_t *ce)
{
    size_t m = 0;
    int64_t at = lo;
    while (m + 1 < pieces && at < hi) {
        uint64_t room = (uint64_t)hi - (uint64_t)at;
        int64_t step = (int64_t)(1 + fz_below(in, room < 8 ? room : 8));
        if ((uint64_t)step >= room) break;
        cb[m] = at;
        ce[m] = at + step;
        at += step;
        m++;
    }
    cb[m] = at;
    ce[m] = hi;
    return m + 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size, 0};
    static int64_t b[MAXN * MAXD], e[MAXN * MAXD];
    int64_t cb[MAXD], ce[MAXD];
    size_t d = fz_below(&in, MAXD + 1);
    size_t n = 0;
    uint8_t mode = fz_u8(&in);
    for (size_t k = 0; k < d; k++) {
        cb[k] = fz_coord(&in, INT64_MIN, INT64_MAX - 64);
        ce[k] = cb[k] + (int64_t)fz_below(&in, 12) + (mode & 1); /* the container may be empty */
    }
    if (mode < 128 && d > 0) {
        /* a grid tiling of the container, then a few damaging edits */
        int64_t kb[MAXD][8], ke[MAXD][8];
        size_t cnt[MAXD];
        size_t total = 1;
        for (size_t k = 0; k < d; k++) {
            cnt[k] = cuts(&in, cb[k], ce[k], 1 + fz_below(&in, 4), kb[k], ke[k]);
            total *= cnt[k];
        }
        if (total > MAXN) total = MAXN;
        for (size_t c = 0; c < total; c++) {
            size_t rest = c;
            for (size_t k = 0; k < d; k++) {
                size_t idx = rest % cnt[k];
                rest /= cnt[k];
                b[c * d + k] = kb[k][idx];
                e[c * d + k] = ke[k][idx];
            }
        }
        n = total;
        size_t edits = fz_below(&in, 3);
        for (size_t t = 0; t < edits && n > 0; t++) {
            size_t i = fz_below(&in, n), k = fz_below(&in, d);
            switch (fz_u8(&in) % 4) {
            case 0: if (b[i * d + k] > INT64_MIN) b[i * d + k]--; break;
            case 1: if (e[i * d + k] < INT64_MAX) e[i * d + k]++; break;
            case 2: if (n < MAXN) { memcpy(&b[n * d], &b[i * d], d * 8); memcpy(&e[n * d], &e[i * d], d * 8); n++; } break;
            default: memmove(&b[i * d], &b[(i + 1) * d], (n - i - 1) * d * 8);
                     memmove(&e[i * d], &e[(i + 1) * d], (n - i - 1) * d * 8); n--; break;
            }
        }
    }
    else {
        n = fz_below(&in, MAXN + 1);
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < d; k++) {
                int64_t lo = (mode & 2) ? fz_coord(&in, INT64_MIN, INT64_MAX) : (int64_t)fz_below(&in, 12);
                uint64_t room = (uint64_t)INT64_MAX - (uint64_t)lo;
                uint64_t len = (mode & 4) ? fz_below(&in, room < 8 ? room + 1 : 8)
                               : (room == UINT64_MAX ? fz_u64(&in) : fz_u64(&in) % (room + 1));
                b[i * d + k] = lo;
                e[i * d + k] = (int64_t)((uint64_t)lo + len);
            }
    }
    uint64_t pairs = (uint64_t)n * (n ? n - 1 : 0) / 2;
    uint64_t budget = (fz_u8(&in) < 32) ? fz_below(&in, pairs + 2) : MR_OVERLAP_BUDGET;

    int got = mr_boxes_overlap_kernel(n, d, d ? d : 1, NULL, b, e, budget);
    int want = naive_overlap(n, d, b, e);
    if (got == MR_EBUDGET) {
        FZ_CHECK(d >= 3 && budget < pairs, "budget status outside the 3-D+ sweep: n=%zu d=%zu budget=%llu", n, d,
                 (unsigned long long)budget);
    }
    else {
        FZ_CHECK(got == want, "overlap verdict %d != oracle %d (n=%zu d=%zu)", got, want, n, d);
    }

    /* a subset (every other box) through the subset path */
    size_t subset[MAXN], m = 0;
    for (size_t i = 0; i < n; i += 2) subset[m++] = i;
    static int64_t sb[MAXN * MAXD], se[MAXN * MAXD];
    for (size_t p = 0; p < m; p++) {
        memcpy(&sb[p * d], &b[subset[p] * d], d * 8);
        memcpy(&se[p * d], &e[subset[p] * d], d * 8);
    }
    got = mr_boxes_overlap_kernel(m, d, d ? d : 1, subset, b, e, MR_OVERLAP_BUDGET);
    FZ_CHECK(got == naive_overlap(m, d, sb, se), "subset overlap verdict %d differs (m=%zu d=%zu)", got, m, d);

    got = mr_boxes_exactly_cover_kernel(d, d ? d : 1, cb, ce, n, NULL, b, e, budget);
    want = naive_cover(n, d, cb, ce, b, e);
    if (got == MR_EBUDGET) {
        FZ_CHECK(d >= 3 && budget < pairs, "cover budget status outside the 3-D+ sweep");
    }
    else if (want >= 0) {
        FZ_CHECK(got == want, "cover verdict %d != oracle %d (n=%zu d=%zu)", got, want, n, d);
    }
    else {
        FZ_CHECK(got == MR_NO, "cover with 128-bit volume overflow must be 'not covered', got %d", got);
    }
    return 0;
}
