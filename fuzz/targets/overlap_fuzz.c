/* libFuzzer target: the exact-cover kernel of csrc/overlap.c (ov_exact_cover and its
 * ov_boxes_disjoint: grid fast path and budgeted sweep), compiled by #include-ing the C file.
 * Inputs respect the glue's preconditions (exact_cover_batch): rank 1..64, offsets >= 0,
 * extents >= 1, offset + extent fits int64. Oracle: naive pairwise disjointness plus
 * containment and a 128-bit volume sum; the kernel reports a container volume beyond 64 bits as
 * OV_OVERFLOW (the glue treats it as "not covered"). */
#include "../../csrc/overlap.c"
#include "../../csrc/layout.c" /* mr_region_names, which layout.h's region check calls */
#include "fuzz_input.h"

#define MAXN 48
#define MAXD 5

static int
naive_disjoint(size_t n, size_t d, const int64_t *o, const int64_t *s)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++) {
            int hit = 1;
            for (size_t k = 0; k < d && hit; k++) {
                int64_t lo = o[i * d + k] > o[j * d + k] ? o[i * d + k] : o[j * d + k];
                int64_t ei = o[i * d + k] + s[i * d + k], ej = o[j * d + k] + s[j * d + k];
                int64_t hi = ei < ej ? ei : ej;
                if (hi <= lo) hit = 0;
            }
            if (hit) return 0;
        }
    return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size, 0};
    static int64_t off[MAXN * MAXD], shp[MAXN * MAXD];
    int64_t co[MAXD], cs[MAXD];
    size_t d = 1 + fz_below(&in, MAXD);
    uint8_t mode = fz_u8(&in);
    size_t n = 0;
    for (size_t k = 0; k < d; k++) {
        co[k] = (mode & 2) ? fz_coord(&in, 0, INT64_MAX - 64) : (int64_t)fz_below(&in, 8);
        cs[k] = 1 + (int64_t)fz_below(&in, 10);
        if ((mode & 4) && fz_u8(&in) < 40) cs[k] = (int64_t)1 << (31 + fz_below(&in, 31));
        if (cs[k] > INT64_MAX - co[k]) cs[k] = INT64_MAX - co[k];
        if (cs[k] < 1) { co[k] = 0; cs[k] = 1; }
    }
    if (mode < 160) {
        /* grid tiling of the container with a few edits */
        int64_t kb[MAXD][6], ks[MAXD][6];
        size_t cnt[MAXD], total = 1;
        for (size_t k = 0; k < d; k++) {
            size_t pieces = 1 + fz_below(&in, 4);
            int64_t at = co[k], end = co[k] + cs[k];
            size_t m = 0;
            while (m + 1 < pieces) {
                uint64_t room = (uint64_t)(end - at);
                if (room < 2) break;
                int64_t step = 1 + (int64_t)fz_below(&in, room - 1 < 6 ? room - 1 : 6);
                kb[k][m] = at; ks[k][m] = step; at += step; m++;
            }
            kb[k][m] = at; ks[k][m] = end - at; m++;
            cnt[k] = m;
            total *= m;
        }
        if (total > MAXN) total = MAXN;
        for (size_t c = 0; c < total; c++) {
            size_t rest = c;
            for (size_t k = 0; k < d; k++) {
                off[c * d + k] = kb[k][rest % cnt[k]];
                shp[c * d + k] = ks[k][rest % cnt[k]];
                rest /= cnt[k];
            }
        }
        n = total;
        size_t edits = fz_below(&in, 3);
        for (size_t t = 0; t < edits && n > 0; t++) {
            size_t i = fz_below(&in, n), k = fz_below(&in, d);
            switch (fz_u8(&in) % 4) {
            case 0: if (off[i * d + k] > 0) off[i * d + k]--; break;
            case 1: if (shp[i * d + k] < INT64_MAX - off[i * d + k]) shp[i * d + k]++; break;
            case 2: if (n < MAXN) { memcpy(&off[n * d], &off[i * d], d * 8); memcpy(&shp[n * d], &shp[i * d], d * 8); n++; } break;
            default: memmove(&off[i * d], &off[(i + 1) * d], (n - i - 1) * d * 8);
                     memmove(&shp[i * d], &shp[(i + 1) * d], (n - i - 1) * d * 8); n--; break;
            }
        }
    }
    else {
        n = fz_below(&in, MAXN + 1);
        for (size_t i = 0; i < n * d; i++) {
            off[i] = (mode & 8) ? fz_coord(&in, 0, INT64_MAX - 1) : (int64_t)fz_below(&in, 12);
            shp[i] = 1 + (int64_t)fz_below(&in, 6);
            if (shp[i] > INT64_MAX - off[i]) shp[i] = INT64_MAX - off[i];
        }
    }
    ov_box boxes[MAXN];
    for (size_t i = 0; i < n; i++) {
        boxes[i].off = &off[i * d];
        boxes[i].shp = &shp[i * d];
    }
    int got = ov_boxes_disjoint(boxes, n, (int)d);
    FZ_CHECK(got == naive_disjoint(n, d, off, shp), "disjoint verdict %d differs (n=%zu d=%zu)", got, n, d);

    unsigned __int128 cvol = 1, sum = 0;
    int cvol_over64 = 0, inside = 1;
    for (size_t k = 0; k < d; k++) cvol *= (unsigned __int128)cs[k];
    for (size_t k = 0; k < d; k++) (void)k;
    {
        uint64_t v = 1;
        for (size_t k = 0; k < d; k++)
            if (__builtin_mul_overflow(v, (uint64_t)cs[k], &v)) cvol_over64 = 1;
    }
    int vol_overflow = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned __int128 v = 1;
        for (size_t k = 0; k < d; k++) {
            if (off[i * d + k] < co[k] || off[i * d + k] + shp[i * d + k] > co[k] + cs[k]) inside = 0;
            if (__builtin_mul_overflow(v, (unsigned __int128)shp[i * d + k], &v)) vol_overflow = 1;
        }
        if (__builtin_add_overflow(sum, v, &sum)) vol_overflow = 1;
    }
    got = ov_exact_cover(co, cs, boxes, n, (int)d);
    if (n == 0) {
        FZ_CHECK(got == 0, "empty cover must be 0, got %d", got);
    }
    else if (cvol_over64) {
        FZ_CHECK(got == -OV_OVERFLOW, "container volume beyond 64 bits must report overflow, got %d", got);
    }
    else if (!vol_overflow) {
        int want = inside && sum == cvol && naive_disjoint(n, d, off, shp);
        FZ_CHECK(got == want, "cover verdict %d != oracle %d (n=%zu d=%zu)", got, want, n, d);
    }
    else {
        FZ_CHECK(got == 0, "cover with box volume overflow must be 0, got %d", got);
    }
    return 0;
}
