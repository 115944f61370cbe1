/* Python-free kernel of spec 8.4's canonical-region proof, shared by regioncheck.c
 * (regions_canonical) and binder.c (bind_regions' carried proof for the regions it builds).
 * Everything is static inline: no exported symbol. Checked int64 arithmetic only: an overflow is
 * "not proven", never a wrapped value. */
#ifndef MOONCAKE_RESHARD_REGION_KERNELS_H
#define MOONCAKE_RESHARD_REGION_KERNELS_H

#include "common.h"

#define RC_MAX_NDIM 32

typedef struct {
    Py_ssize_t ndim;  /* overlap rank; every box array below has ndim entries */
    int64_t ov_off[RC_MAX_NDIM];
    int64_t ov_shape[RC_MAX_NDIM];
    int64_t s_off[RC_MAX_NDIM];
    int64_t s_shape[RC_MAX_NDIM];
    int64_t t_off[RC_MAX_NDIM];
    int64_t t_shape[RC_MAX_NDIM];
    Py_ssize_t nloops;  /* common length of the three loop tuples */
    int64_t outer[RC_MAX_NDIM];
    int64_t s_str[RC_MAX_NDIM];
    int64_t t_str[RC_MAX_NDIM];
    int64_t s_base;
    int64_t t_base;
    int64_t inner;
    int64_t s_nbytes;
    int64_t t_nbytes;
} rc_region;

/* -- kernel (Python-free) ------------------------------------------------------------------ */

/* Spec §8.4 step 6: the overlap box lies inside the fragment box. */
static inline int
rc_box_inside(const int64_t *f_off, const int64_t *f_shape, const int64_t *off, const int64_t *shape,
              Py_ssize_t ndim)
{
    for (Py_ssize_t d = 0; d < ndim; d++) {
        int64_t f_end, end;
        if (off[d] < f_off[d]) return 0;
        if (mr_add_i64(f_off[d], f_shape[d], &f_end) < 0) return 0;
        if (mr_add_i64(off[d], shape[d], &end) < 0) return 0;
        if (end > f_end) return 0;
    }
    return 1;
}

/* Spec §8.4 step 11 (stricter: every extent must be positive): the itemsize, or 0. */
static inline int64_t
rc_itemsize(int64_t nbytes, const int64_t *shape, Py_ssize_t ndim)
{
    int64_t volume = 1;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        if (shape[d] <= 0) return 0;
        if (mr_mul_i64(volume, shape[d], &volume) < 0) return 0;
    }
    if (nbytes <= 0 || nbytes % volume != 0) return 0;
    return nbytes / volume;
}

/* Row-major byte strides of the full local shape (spec §11.7); -1 on overflow. */
static inline int
rc_strides(const int64_t *shape, Py_ssize_t ndim, int64_t itemsize, int64_t *out)
{
    int64_t acc = itemsize;
    for (Py_ssize_t d = ndim - 1; d >= 0; d--) {
        out[d] = acc;
        if (d > 0 && mr_mul_i64(acc, shape[d], &acc) < 0) return -1;
    }
    return 0;
}

/* Σ (ov_off[d] - f_off[d]) * strides[d]; -1 on overflow. */
static inline int
rc_base(const int64_t *ov_off, const int64_t *f_off, const int64_t *strides, Py_ssize_t ndim,
        int64_t *out)
{
    int64_t base = 0;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        int64_t diff, term;
        if (__builtin_sub_overflow(ov_off[d], f_off[d], &diff)) return -1;
        if (mr_mul_i64(diff, strides[d], &term) < 0) return -1;
        if (mr_add_i64(base, term, &base) < 0) return -1;
    }
    *out = base;
    return 0;
}

/* Spec §8.4 step 13 for one side. */
static inline int
rc_strides_disjoint(const rc_region *r, const int64_t *strides)
{
    int64_t span = r->inner;
    for (Py_ssize_t i = r->nloops - 1; i >= 0; i--) {
        int64_t grow;
        if (r->outer[i] > 1 && strides[i] < span) return 0;
        if (mr_mul_i64(r->outer[i] - 1, strides[i], &grow) < 0) return 0;
        if (mr_add_i64(span, grow, &span) < 0) return 0;
    }
    return 1;
}

/* Spec §8.4 step 14 (``validate_bounds``) for one side. */
static inline int
rc_within(const rc_region *r, int64_t base, const int64_t *strides, int64_t nbytes)
{
    int64_t end;
    if (mr_add_i64(base, r->inner, &end) < 0) return 0;
    for (Py_ssize_t i = 0; i < r->nloops; i++) {
        int64_t grow;
        if (mr_mul_i64(r->outer[i] - 1, strides[i], &grow) < 0) return 0;
        if (mr_add_i64(end, grow, &end) < 0) return 0;
    }
    return end <= nbytes;
}

/* 1 when every rule of spec §8.4 steps 4-14 provably holds for r, else 0. (Steps 1-3, the
 * tuple/int types and the tensor ids, are established by the glue.) */
static inline int
rc_region_canonical(const rc_region *r)
{
    const Py_ssize_t ndim = r->ndim;
    int64_t s_strides[RC_MAX_NDIM], t_strides[RC_MAX_NDIM];
    int64_t itemsize, s_base, t_base, inner, volume, total;
    Py_ssize_t suffix;

    if (ndim <= 0 || ndim > RC_MAX_NDIM || r->nloops < 0 || r->nloops > RC_MAX_NDIM) return 0;
    for (Py_ssize_t d = 0; d < ndim; d++) {                                         /* step 5 */
        if (r->ov_off[d] < 0 || r->ov_shape[d] <= 0) return 0;
    }
    if (!rc_box_inside(r->s_off, r->s_shape, r->ov_off, r->ov_shape, ndim)) return 0; /* step 6 */
    if (!rc_box_inside(r->t_off, r->t_shape, r->ov_off, r->ov_shape, ndim)) return 0;
    if (r->s_base < 0 || r->t_base < 0 || r->inner <= 0) return 0;                  /* step 8 */
    for (Py_ssize_t i = 0; i < r->nloops; i++) {                                    /* step 10 */
        if (r->outer[i] <= 0 || r->s_str[i] < 0 || r->t_str[i] < 0) return 0;
    }
    itemsize = rc_itemsize(r->s_nbytes, r->s_shape, ndim);                          /* step 11 */
    if (itemsize <= 0 || itemsize != rc_itemsize(r->t_nbytes, r->t_shape, ndim)) return 0;
    /* step 12: the canonical geometry of spec §11.7 */
    if (rc_strides(r->s_shape, ndim, itemsize, s_strides) < 0) return 0;
    if (rc_strides(r->t_shape, ndim, itemsize, t_strides) < 0) return 0;
    if (rc_base(r->ov_off, r->s_off, s_strides, ndim, &s_base) < 0) return 0;
    if (rc_base(r->ov_off, r->t_off, t_strides, ndim, &t_base) < 0) return 0;
    if (mr_mul_i64(r->ov_shape[ndim - 1], itemsize, &inner) < 0) return 0;
    suffix = ndim - 1;
    for (Py_ssize_t d = ndim - 2; d >= 0; d--) {
        if (s_strides[d] != inner || t_strides[d] != inner) break;
        if (mr_mul_i64(inner, r->ov_shape[d], &inner) < 0) return 0;
        suffix = d;
    }
    volume = itemsize;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        if (mr_mul_i64(volume, r->ov_shape[d], &volume) < 0) return 0;
    }
    total = r->inner;
    for (Py_ssize_t i = 0; i < r->nloops; i++) {
        if (mr_mul_i64(total, r->outer[i], &total) < 0) return 0;
    }
    if (total != volume) return 0;
    if (r->s_base != s_base || r->t_base != t_base) return 0;
    if (r->inner != inner || r->nloops != suffix) return 0;
    for (Py_ssize_t i = 0; i < suffix; i++) {
        if (r->outer[i] != r->ov_shape[i] || r->s_str[i] != s_strides[i] || r->t_str[i] != t_strides[i])
            return 0;
    }
    if (!rc_strides_disjoint(r, r->s_str) || !rc_strides_disjoint(r, r->t_str)) return 0; /* 13 */
    if (!rc_within(r, r->s_base, r->s_str, r->s_nbytes)) return 0;                   /* step 14 */
    if (!rc_within(r, r->t_base, r->t_str, r->t_nbytes)) return 0;
    return 1;
}

#endif
