/* libFuzzer target: rc_region_canonical of csrc/regioncheck.c (the canonical-geometry recheck of
 * plan regions), compiled by #include-ing the C file. Inputs respect the glue's preconditions
 * (1 <= ndim <= 32, 0 <= loop count <= 32, all fields int64). Most cases start from a canonical
 * region derived by the oracle and then get a few forged fields; the rest are random.
 * Oracle: spec §8.4 steps 4-14 with the §11.7 derivation, in saturating 128-bit arithmetic, plus
 * the kernel's documented extra rule (every fragment extent positive). Every field of a valid
 * region's byte quantities are bounded by the fragment byte sizes, so the kernel must agree with
 * the oracle exactly: it may never prove a forged region, and it must prove every valid one whose
 * box ends (offset + extent) fit int64 (beyond that it may decline and leave it to Python). */
#include "../../csrc/regioncheck.c"
#include "../../csrc/layout.c" /* mr_region_names, which layout.h's region check calls */
#include "fuzz_input.h"

#define MAXD 4
#define SAT ((__int128)1 << 120)

typedef __int128 i128;

static i128
sat_mul(i128 a, i128 b)
{
    i128 r;
    if (__builtin_mul_overflow(a, b, &r) || r > SAT || r < -SAT) return SAT;
    return r;
}

static i128
sat_add(i128 a, i128 b)
{
    i128 r = a + b; /* |a|, |b| <= SAT: no overflow */
    return r > SAT ? SAT : (r < -SAT ? -SAT : r);
}

static i128
volume128(const int64_t *shape, Py_ssize_t n)
{
    i128 v = 1;
    for (Py_ssize_t d = 0; d < n; d++) v = sat_mul(v, shape[d]);
    return v;
}

/* Row-major byte strides of the full local shape. */
static void
strides128(const int64_t *shape, Py_ssize_t n, i128 it, i128 *out)
{
    i128 acc = it;
    for (Py_ssize_t d = n - 1; d >= 0; d--) {
        out[d] = acc;
        acc = sat_mul(acc, shape[d]);
    }
}

/* The canonical geometry of §11.7 for the boxes of r (itemsize it): fills base offsets, inner,
 * loop count and loops of *g. */
static void
derive(const rc_region *r, i128 it, i128 *s_base, i128 *t_base, i128 *inner, Py_ssize_t *suffix,
       i128 *S, i128 *T)
{
    Py_ssize_t n = r->ndim;
    strides128(r->s_shape, n, it, S);
    strides128(r->t_shape, n, it, T);
    *s_base = 0;
    *t_base = 0;
    for (Py_ssize_t d = 0; d < n; d++) {
        *s_base = sat_add(*s_base, sat_mul((i128)r->ov_off[d] - r->s_off[d], S[d]));
        *t_base = sat_add(*t_base, sat_mul((i128)r->ov_off[d] - r->t_off[d], T[d]));
    }
    *inner = sat_mul(r->ov_shape[n - 1], it);
    *suffix = n - 1;
    for (Py_ssize_t d = n - 2; d >= 0; d--) {
        if (S[d] != *inner || T[d] != *inner) break;
        *inner = sat_mul(*inner, r->ov_shape[d]);
        *suffix = d;
    }
}

static i128
itemsize128(int64_t nbytes, const int64_t *shape, Py_ssize_t n)
{
    for (Py_ssize_t d = 0; d < n; d++)
        if (shape[d] <= 0) return 0; /* the kernel's extra rule */
    i128 v = volume128(shape, n);
    if (v >= SAT || nbytes % v != 0) return 0;
    return nbytes / v;
}

static int
oracle(const rc_region *r)
{
    Py_ssize_t n = r->ndim, suffix;
    i128 S[MAXD], T[MAXD], sb, tb, inner, it;
    for (Py_ssize_t d = 0; d < n; d++) {
        if (r->ov_off[d] < 0 || r->ov_shape[d] <= 0) return 0;                     /* step 5 */
        if (r->ov_off[d] < r->s_off[d] || r->ov_off[d] < r->t_off[d]) return 0;    /* step 6 */
        if ((i128)r->ov_off[d] + r->ov_shape[d] > (i128)r->s_off[d] + r->s_shape[d]) return 0;
        if ((i128)r->ov_off[d] + r->ov_shape[d] > (i128)r->t_off[d] + r->t_shape[d]) return 0;
    }
    if (r->s_base < 0 || r->t_base < 0 || r->inner <= 0) return 0;                  /* step 8 */
    for (Py_ssize_t i = 0; i < r->nloops; i++)                                      /* step 10 */
        if (r->outer[i] <= 0 || r->s_str[i] < 0 || r->t_str[i] < 0) return 0;
    it = itemsize128(r->s_nbytes, r->s_shape, n);                                   /* step 11 */
    if (it <= 0 || it != itemsize128(r->t_nbytes, r->t_shape, n)) return 0;
    derive(r, it, &sb, &tb, &inner, &suffix, S, T);                                 /* step 12 */
    i128 total = r->inner;
    for (Py_ssize_t i = 0; i < r->nloops; i++) total = sat_mul(total, r->outer[i]);
    if (total != sat_mul(volume128(r->ov_shape, n), it)) return 0;
    if (sb != r->s_base || tb != r->t_base) return 0;
    if (inner != r->inner || suffix != r->nloops) return 0;
    for (Py_ssize_t i = 0; i < suffix; i++)
        if (r->outer[i] != r->ov_shape[i] || r->s_str[i] != S[i] || r->t_str[i] != T[i]) return 0;
    for (int side = 0; side < 2; side++) {                                          /* step 13 */
        const int64_t *st = side ? r->t_str : r->s_str;
        i128 span = r->inner;
        for (Py_ssize_t i = r->nloops - 1; i >= 0; i--) {
            if (r->outer[i] > 1 && st[i] < span) return 0;
            span = sat_add(span, sat_mul((i128)r->outer[i] - 1, st[i]));
        }
    }
    for (int side = 0; side < 2; side++) {                                          /* step 14 */
        const int64_t *st = side ? r->t_str : r->s_str;
        i128 end = sat_add(side ? r->t_base : r->s_base, r->inner);
        for (Py_ssize_t i = 0; i < r->nloops; i++) end = sat_add(end, sat_mul((i128)r->outer[i] - 1, st[i]));
        if (end > (side ? r->t_nbytes : r->s_nbytes)) return 0;
    }
    return 1;
}

static int64_t
clamp64(i128 v)
{
    return v > INT64_MAX ? INT64_MAX : (v < INT64_MIN ? INT64_MIN : (int64_t)v);
}

/* A forged value for one int64 field: a small step, a random value or an edge. */
static int64_t
forge(fz_in *in, int64_t v)
{
    switch (fz_u8(in) % 6) {
    case 0: return v == INT64_MAX ? v : v + 1;
    case 1: return v == INT64_MIN ? v : v - 1;
    case 2: return -1;
    case 3: return 0;
    case 4: return fz_coord(in, INT64_MIN, INT64_MAX);
    default: return (int64_t)((uint64_t)v * 2u); /* wraps like a forged huge value */
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size, 0};
    rc_region r;
    memset(&r, 0, sizeof r);
    uint8_t mode = fz_u8(&in);
    r.ndim = 1 + (Py_ssize_t)fz_below(&in, MAXD);
    int64_t it = 1 << fz_below(&in, 4);
    int big = (mode & 1) != 0;
    for (Py_ssize_t d = 0; d < r.ndim; d++) {
        /* source and target boxes over one global extent, the overlap inside both */
        int64_t s_off = big ? fz_coord(&in, 0, (int64_t)1 << 40) : (int64_t)fz_below(&in, 6);
        int64_t s_shape = 1 + (int64_t)fz_below(&in, big ? 1u << 20 : 9);
        int64_t t_off = s_off + (int64_t)fz_below(&in, (uint64_t)s_shape);
        int64_t t_shape = 1 + (int64_t)fz_below(&in, 9);
        int64_t lo = s_off > t_off ? s_off : t_off;
        int64_t hi_s = s_off + s_shape, hi_t = t_off + t_shape;
        int64_t hi = hi_s < hi_t ? hi_s : hi_t;
        r.s_off[d] = s_off; r.s_shape[d] = s_shape; r.t_off[d] = t_off; r.t_shape[d] = t_shape;
        r.ov_off[d] = lo + (int64_t)fz_below(&in, (uint64_t)(hi - lo));
        r.ov_shape[d] = 1 + (int64_t)fz_below(&in, (uint64_t)(hi - r.ov_off[d]));
    }
    i128 sv = volume128(r.s_shape, r.ndim), tv = volume128(r.t_shape, r.ndim);
    r.s_nbytes = clamp64(sat_mul(sv, it));
    r.t_nbytes = clamp64(sat_mul(tv, it));
    {
        i128 S[MAXD], T[MAXD], sb, tb, inner;
        Py_ssize_t suffix;
        derive(&r, it, &sb, &tb, &inner, &suffix, S, T);
        r.s_base = clamp64(sb); r.t_base = clamp64(tb); r.inner = clamp64(inner); r.nloops = suffix;
        for (Py_ssize_t i = 0; i < suffix; i++) {
            r.outer[i] = r.ov_shape[i]; r.s_str[i] = clamp64(S[i]); r.t_str[i] = clamp64(T[i]);
        }
    }
    /* forge a few fields (none in about a quarter of the cases) */
    size_t edits = fz_below(&in, 4);
    for (size_t e = 0; e < edits; e++) {
        Py_ssize_t d = (Py_ssize_t)fz_below(&in, (uint64_t)r.ndim);
        Py_ssize_t l = r.nloops ? (Py_ssize_t)fz_below(&in, (uint64_t)r.nloops) : 0;
        switch (fz_u8(&in) % 16) {
        case 0: r.ov_off[d] = forge(&in, r.ov_off[d]); break;
        case 1: r.ov_shape[d] = forge(&in, r.ov_shape[d]); break;
        case 2: r.s_off[d] = forge(&in, r.s_off[d]); break;
        case 3: r.s_shape[d] = forge(&in, r.s_shape[d]); break;
        case 4: r.t_off[d] = forge(&in, r.t_off[d]); break;
        case 5: r.t_shape[d] = forge(&in, r.t_shape[d]); break;
        case 6: r.s_base = forge(&in, r.s_base); break;
        case 7: r.t_base = forge(&in, r.t_base); break;
        case 8: r.inner = forge(&in, r.inner); break;
        case 9: r.s_nbytes = forge(&in, r.s_nbytes); break;
        case 10: r.t_nbytes = forge(&in, r.t_nbytes); break;
        case 11: if (r.nloops) r.outer[l] = forge(&in, r.outer[l]); break;
        case 12: if (r.nloops) r.s_str[l] = forge(&in, r.s_str[l]); break;
        case 13: if (r.nloops) r.t_str[l] = forge(&in, r.t_str[l]); break;
        case 14: /* one loop fewer or more (the glue guarantees equal tuple lengths) */
            if (r.nloops && fz_u8(&in) & 1) r.nloops--;
            else if (r.nloops < MAXD - 1) {
                r.outer[r.nloops] = fz_coord(&in, -2, 64);
                r.s_str[r.nloops] = fz_coord(&in, -2, 1 << 20);
                r.t_str[r.nloops] = fz_coord(&in, -2, 1 << 20);
                r.nloops++;
            }
            break;
        default: /* swap the two sides' strides */
            for (Py_ssize_t i = 0; i < r.nloops; i++) { int64_t t = r.s_str[i]; r.s_str[i] = r.t_str[i]; r.t_str[i] = t; }
            break;
        }
    }
    int got = rc_region_canonical(&r), want = oracle(&r);
    /* Global coordinates are not bounded by the byte sizes: a valid region whose box end does
     * not fit int64 may be left unproven (Python then decides with its big ints). */
    int ends_fit = 1;
    for (Py_ssize_t d = 0; d < r.ndim; d++) {
        ends_fit &= (i128)r.ov_off[d] + r.ov_shape[d] <= INT64_MAX;
        ends_fit &= (i128)r.s_off[d] + r.s_shape[d] <= INT64_MAX;
        ends_fit &= (i128)r.t_off[d] + r.t_shape[d] <= INT64_MAX;
    }
    FZ_CHECK(got == want || (got == 0 && !ends_fit), "kernel %d, oracle %d (ndim %zd, loops %zd, inner %lld, bases %lld/%lld)", got, want,
             r.ndim, r.nloops, (long long)r.inner, (long long)r.s_base, (long long)r.t_base);
    return 0;
}
