/* libFuzzer target: mr_physical_sweep, the Python-free kernel of csrc/physical.c (spec 12.6),
 * compiled by #include-ing the C file (the glue needs libpython at link time only).
 *
 * Inputs respect the glue's preconditions: dense space and group ids, an operation index per
 * stream (unique, as the Python layer emits them), inner >= 1, counts >= 1, each loop's
 * (count - 1) * stride representable, rank <= 64. A group's ``disjoint`` flag is a claim made by
 * the Python layer (its regions' logical boxes are pairwise disjoint, hence so are their bytes):
 * the target only sets it when the group's segments really are pairwise byte-disjoint.
 *
 * Oracle: a direct, unoptimized simulation of the spec: per space (own budget) prime every
 * stream's first segment in order (charging), then repeatedly take the smallest current
 * (begin, end, op) by linear scan, sweep it, and advance that stream (charging before locating,
 * address overflow reported where the kernel reports it). */
#include "../../csrc/physical.c"
#include "fuzz_input.h"

#define MAXS 12
#define MAXR 3
#define MAXSEG 64

typedef struct {
    size_t group, rank;
    int64_t op;
    int charged;
    uint64_t base, inner, counts[MAXR], strides[MAXR];
} fz_stream;

/* Expand a stream's segment begins with 128-bit arithmetic (row-major, last loop fastest). */
static size_t
expand(const fz_stream *s, unsigned __int128 *begins)
{
    size_t n = 1;
    for (size_t d = 0; d < s->rank; d++) n *= (size_t)s->counts[d];
    for (size_t idx = 0; idx < n; idx++) {
        size_t rest = idx;
        unsigned __int128 off = 0;
        for (size_t d = s->rank; d-- > 0;) {
            off += (unsigned __int128)(rest % s->counts[d]) * s->strides[d];
            rest /= s->counts[d];
        }
        begins[idx] = (unsigned __int128)s->base + off;
    }
    return n;
}

typedef struct {
    int status;
    int64_t bad, prev;
} verdict;

static verdict
oracle(const fz_stream *st, size_t ns, size_t n_spaces, const size_t *space_of_group, const int64_t *alias,
       const int64_t *tkey, uint64_t budget)
{
    static unsigned __int128 seg[MAXS][MAXSEG];
    size_t count[MAXS], pos[MAXS];
    verdict v = {MR_PHYS_OK, -1, -1};
    for (size_t i = 0; i < ns; i++) {
        count[i] = expand(&st[i], seg[i]);
        pos[i] = 0;
    }
    const unsigned __int128 MAX = (unsigned __int128)UINT64_MAX;
    for (size_t k = 0; k < n_spaces; k++) {
        uint64_t used = 0;
        int live[MAXS];
        for (size_t i = 0; i < ns; i++) {
            live[i] = space_of_group[st[i].group] == k;
            if (!live[i]) continue;
            if (st[i].charged) {
                if (used >= budget) { v.status = MR_PHYS_BUDGET; return v; }
                used++;
            }
            if (seg[i][0] > MAX || seg[i][0] + st[i].inner > MAX) {
                v.status = MR_PHYS_OVERFLOW; v.bad = st[i].op; return v;
            }
        }
        int have = 0;
        unsigned __int128 pb = 0, pe = 0;
        int64_t pop = -1;
        for (;;) {
            size_t best = MAXS;
            for (size_t i = 0; i < ns; i++) {
                if (!live[i]) continue;
                if (best == MAXS) { best = i; continue; }
                unsigned __int128 bi = seg[i][pos[i]], bb = seg[best][pos[best]];
                unsigned __int128 ei = bi + st[i].inner, eb = bb + st[best].inner;
                if (bi < bb || (bi == bb && (ei < eb || (ei == eb && st[i].op < st[best].op)))) best = i;
            }
            if (best == MAXS) break;
            const fz_stream *s = &st[best];
            unsigned __int128 b = seg[best][pos[best]], e = b + s->inner;
            if (have && b < pe) {
                int tolerated = alias && alias[pop] >= 0 && alias[pop] == alias[s->op] && tkey[pop] != tkey[s->op];
                if (!(b == pb && e == pe && tolerated)) {
                    v.status = MR_PHYS_CONFLICT; v.bad = s->op; v.prev = pop; return v;
                }
            }
            else {
                have = 1; pb = b; if (e > pe) pe = e; pop = s->op;
            }
            pos[best]++;
            if (pos[best] == count[best]) { live[best] = 0; continue; }
            /* the kernel's walk: the offset itself must fit 64 bits (checked before charging) */
            if (seg[best][pos[best]] - s->base > MAX) { v.status = MR_PHYS_OVERFLOW; v.bad = s->op; return v; }
            if (s->charged) {
                if (used >= budget) { v.status = MR_PHYS_BUDGET; return v; }
                used++;
            }
            if (seg[best][pos[best]] > MAX || seg[best][pos[best]] + s->inner > MAX) {
                v.status = MR_PHYS_OVERFLOW; v.bad = s->op; return v;
            }
        }
    }
    return v;
}

/* Pairwise byte-disjointness of the segments of a group's streams (and within each stream). */
static int
group_bytes_disjoint(const fz_stream *st, size_t ns, size_t g)
{
    static unsigned __int128 b[MAXS * MAXSEG];
    static uint64_t len[MAXS * MAXSEG];
    static unsigned __int128 tmp[MAXSEG];
    size_t m = 0;
    for (size_t i = 0; i < ns; i++) {
        if (st[i].group != g) continue;
        size_t c = expand(&st[i], tmp);
        for (size_t j = 0; j < c; j++) { b[m] = tmp[j]; len[m] = st[i].inner; m++; }
    }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < i; j++)
            if (b[i] < b[j] + len[j] && b[j] < b[i] + len[i]) return 0;
    return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size, 0};
    size_t n_spaces = 1 + fz_below(&in, 3);
    size_t n_groups = 1 + fz_below(&in, 4);
    size_t ns = fz_below(&in, MAXS + 1);
    uint8_t mode = fz_u8(&in);
    int near_top = (mode & 3) == 3;
    uint64_t top = near_top ? UINT64_MAX - 256 : 0;
    mr_group groups[4];
    size_t space_of_group[4];
    for (size_t g = 0; g < n_groups; g++) {
        groups[g].space = space_of_group[g] = fz_below(&in, n_spaces);
        groups[g].address = top + fz_below(&in, 128);
        groups[g].nbytes = fz_below(&in, 128);
        if (near_top && fz_u8(&in) < 16) groups[g].nbytes = fz_u64(&in);
        groups[g].disjoint = 0;
    }
    fz_stream st[MAXS];
    int64_t perm[MAXS];
    for (size_t i = 0; i < ns; i++) perm[i] = (int64_t)i;
    for (size_t i = ns; i > 1; i--) { size_t j = fz_below(&in, i); int64_t t = perm[i - 1]; perm[i - 1] = perm[j]; perm[j] = t; }
    for (size_t i = 0; i < ns; i++) {
        fz_stream *s = &st[i];
        s->group = fz_below(&in, n_groups);
        s->op = perm[i];
        s->charged = fz_u8(&in) & 1;
        s->base = groups[s->group].address + fz_below(&in, 32);
        if (near_top && fz_u8(&in) < 32) s->base = UINT64_MAX - fz_below(&in, 64);
        s->inner = 1 + fz_below(&in, 8);
        s->rank = fz_below(&in, MAXR + 1);
        size_t segs = 1;
        for (size_t d = 0; d < s->rank; d++) {
            s->counts[d] = 1 + fz_below(&in, 4);
            if (segs * s->counts[d] > MAXSEG) s->counts[d] = 1;
            segs *= s->counts[d];
        }
        /* TransferRegion stride sanity (spec 8.4 step 13), innermost loop first: a loop with
         * count > 1 steps at least over everything inside it, so a stream's segments ascend
         * and never overlap each other (the order the k-way merge relies on). */
        uint64_t span = s->inner;
        for (size_t d = s->rank; d-- > 0;) {
            uint64_t extra = fz_below(&in, 8);
            s->strides[d] = span > UINT64_MAX - extra ? UINT64_MAX : span + extra;
            if (fz_u8(&in) < 8) s->strides[d] = UINT64_MAX / (s->counts[d] > 1 ? s->counts[d] - 1 : 1);
            unsigned __int128 grown = (unsigned __int128)span + (unsigned __int128)(s->counts[d] - 1) * s->strides[d];
            span = grown > UINT64_MAX ? UINT64_MAX : (uint64_t)grown;
        }
    }
    for (size_t g = 0; g < n_groups; g++)
        if ((fz_u8(&in) & 1) && group_bytes_disjoint(st, ns, g)) groups[g].disjoint = 1;
    int64_t alias[MAXS], tkey[MAXS];
    int with_alias = fz_u8(&in) & 1;
    for (size_t i = 0; i < MAXS; i++) {
        alias[i] = (int64_t)fz_below(&in, 3) - 1;
        tkey[i] = (int64_t)fz_below(&in, 3);
    }
    uint64_t total = 0;
    for (size_t i = 0; i < ns; i++) {
        uint64_t c = 1;
        for (size_t d = 0; d < st[i].rank; d++) c *= st[i].counts[d];
        total += c;
    }
    uint64_t budget = (fz_u8(&in) < 128) ? fz_below(&in, total + 2) : (fz_u8(&in) & 1 ? UINT64_MAX : 1000000);

    /* kernel input */
    mr_stream ks[MAXS];
    uint64_t counts[MAXS * MAXR], strides[MAXS * MAXR];
    size_t loop = 0;
    for (size_t i = 0; i < ns; i++) {
        memset(&ks[i], 0, sizeof(ks[i]));
        ks[i].base = st[i].base;
        ks[i].inner = st[i].inner;
        ks[i].op = st[i].op;
        ks[i].group = st[i].group;
        ks[i].space = groups[st[i].group].space;
        ks[i].loop_off = loop;
        ks[i].rank = st[i].rank;
        ks[i].charged = st[i].charged;
        for (size_t d = 0; d < st[i].rank; d++) {
            counts[loop + d] = st[i].counts[d];
            strides[loop + d] = st[i].strides[d];
        }
        loop += st[i].rank;
    }
    if (getenv("FZ_DEBUG")) {
        fprintf(stderr, "spaces %zu budget %llu alias %d\n", n_spaces, (unsigned long long)budget, with_alias);
        for (size_t g = 0; g < n_groups; g++)
            fprintf(stderr, "group %zu: space %zu address %llu nbytes %llu disjoint %d\n", g, groups[g].space,
                    (unsigned long long)groups[g].address, (unsigned long long)groups[g].nbytes, groups[g].disjoint);
        for (size_t i = 0; i < ns; i++) {
            fprintf(stderr, "stream %zu: group %zu op %lld charged %d base %llu inner %llu loops", i, st[i].group,
                    (long long)st[i].op, st[i].charged, (unsigned long long)st[i].base,
                    (unsigned long long)st[i].inner);
            for (size_t d = 0; d < st[i].rank; d++)
                fprintf(stderr, " %llux%llu", (unsigned long long)st[i].counts[d], (unsigned long long)st[i].strides[d]);
            fprintf(stderr, "\n");
        }
    }
    int64_t bad = -1, prev = -1;
    int status = mr_physical_sweep(ks, ns, groups, n_groups, n_spaces, counts, strides, loop,
                                   with_alias ? alias : NULL, with_alias ? tkey : NULL, budget, &bad, &prev);
    verdict want = oracle(st, ns, n_spaces, space_of_group, with_alias ? alias : NULL, with_alias ? tkey : NULL,
                          budget);
    FZ_CHECK(status != MR_PHYS_NOMEM, "out of memory");
    FZ_CHECK(status == want.status, "status %d != oracle %d (streams %zu, budget %llu)", status, want.status, ns,
             (unsigned long long)budget);
    if (status == MR_PHYS_CONFLICT) {
        FZ_CHECK(bad == want.bad && prev == want.prev, "conflict ops (%lld, %lld) != oracle (%lld, %lld)",
                 (long long)bad, (long long)prev, (long long)want.bad, (long long)want.prev);
    }
    if (status == MR_PHYS_OVERFLOW) {
        FZ_CHECK(bad == want.bad, "overflow op %lld != oracle %lld", (long long)bad, (long long)want.bad);
    }
    return 0;
}
