/* Python-free kernels of the spec §12.6 whole-target accept path, shared by physical.c
 * (physical_whole_targets) and binder.c (bind_regions, which derives the same decision in the
 * pass that builds the bound operations). Everything is static inline: no exported symbol. */
#ifndef MOONCAKE_RESHARD_PHYSICAL_KERNELS_H
#define MOONCAKE_RESHARD_PHYSICAL_KERNELS_H

#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

/* One target's byte extent [begin, end) (begin < end) in address space `space`. */
typedef struct {
    size_t space;
    uint64_t begin;
    uint64_t end;
} pq_extent;

static inline int
pq_compare_extent(const void *a, const void *b)
{
    const pq_extent *x = a, *y = b;
    if (x->space != y->space) return x->space < y->space ? -1 : 1;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static inline int
pq_compare_pointer(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}

/* 1 when the extents are pairwise disjoint within each space, else 0 (sorts them). */
static inline int
mr_extents_disjoint(pq_extent *extents, size_t n)
{
    if (n > 1) qsort(extents, n, sizeof(pq_extent), pq_compare_extent);
    for (size_t i = 1; i < n; i++) {
        if (extents[i].space == extents[i - 1].space && extents[i].begin < extents[i - 1].end) return 0;
    }
    return 1;
}

/* 1 when no pointer occurs twice (sorts them). */
static inline int
mr_pointers_distinct(uintptr_t *pointers, size_t n)
{
    if (n > 1) qsort(pointers, n, sizeof(uintptr_t), pq_compare_pointer);
    for (size_t i = 1; i < n; i++) {
        if (pointers[i] == pointers[i - 1]) return 0;
    }
    return 1;
}

#endif
