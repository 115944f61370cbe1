/* A pass's memo of rank objects' values (the planner's address-order passes: fragment_columns'
 * rank.dp, owner_minimums' dp and owner kinds).
 *
 * A placement's fragments share a few rank objects (one per participant), and the address-order
 * passes visit the fragments of different ranks interleaved: a memo of the last rank read alone
 * misses at nearly every fragment. This one keeps every rank read in the pass (strong
 * references, so no address is reused while the pass runs), with the values read.
 *
 * A value read earlier is the value a read now gives only while no Python code has run since:
 * Python code could assign the rank's attribute (``vars(rank)["dp"] = ...``). The passes run
 * none of their own, but an allocation of a collected object (a rank's instance dict made on its
 * first check: CPython >= 3.11 keeps attributes inline until ``__dict__`` is asked for) may run
 * the collector, whose callbacks and finalizers are Python code. So every step of a pass that may
 * allocate such an object starts a new epoch (rm_may_run_code), and a slot answers only for the
 * epoch it was read in (rm_fresh); an older slot is read again (its rank checked as at its first
 * read) and refreshed. A rank already checked in the pass has its dict made: checking it again
 * and reading an attribute it holds allocate nothing, so they start no epoch (an attribute it
 * lacks raises, and the pass declines). A memo that cannot grow stores nothing more: its ranks
 * are then read at every visit, as without it. */
#ifndef MOONCAKE_RESHARD_RANK_MEMO_H
#define MOONCAKE_RESHARD_RANK_MEMO_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "common.h"

#define RM_VALUES 9        /* int64 values a slot keeps (owner_minimums: dp and up to 8 kinds) */
#define RM_MAX_SLOTS 8192  /* the table's largest size (half of it filled at most) */

typedef struct {
    PyObject *rank;    /* strong; NULL: an empty slot */
    PyObject *obj;     /* strong or NULL: a value kept as an object (fragment_columns' dp) */
    uint64_t epoch;    /* the memo's epoch when the values were read */
    int64_t v[RM_VALUES];
} rm_slot;

typedef struct {
    rm_slot *slots;
    size_t cap, used; /* cap: 0 or a power of two */
    uint64_t epoch;
} rm_memo;

static inline size_t
rm_home(const void *rank, size_t mask)
{
    return mr_ptr_mix_slot(rank, mask);
}

/* The slot of rank (whatever its epoch), or NULL. */
static inline rm_slot *
rm_find(rm_memo *m, const PyObject *rank)
{
    if (m->cap == 0) return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = rm_home(rank, mask);; i = (i + 1) & mask) {
        if (m->slots[i].rank == rank) return &m->slots[i];
        if (m->slots[i].rank == NULL) return NULL;
    }
}

/* Whether slot's values were read in the current epoch (no Python code can have run since). */
static inline int
rm_fresh(const rm_memo *m, const rm_slot *slot)
{
    return slot != NULL && slot->epoch == m->epoch;
}

/* A step that may run Python code follows: every slot read so far is to be read again. */
static inline void
rm_may_run_code(rm_memo *m)
{
    m->epoch++;
}

/* Doubles the table (pointers moved, no Python code): 0, or -1 (no memory; nothing changed). */
static inline int
rm_grow(rm_memo *m)
{
    size_t cap = m->cap ? 2 * m->cap : 64;
    rm_slot *slots = PyMem_Calloc(cap, sizeof(rm_slot));
    if (slots == NULL) return -1;
    for (size_t k = 0; k < m->cap; k++) {
        if (m->slots[k].rank == NULL) continue;
        size_t i = rm_home(m->slots[k].rank, cap - 1);
        while (slots[i].rank != NULL) i = (i + 1) & (cap - 1);
        slots[i] = m->slots[k];
    }
    PyMem_Free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

/* Records rank's values read now: obj (a new reference is taken; NULL for none) and v[0:nv]
 * (nv <= RM_VALUES), in slot when given (rank's own, from rm_find), else in a new slot when
 * there is room. Never fails: a value not kept is read again at the next visit. */
static inline void
rm_store(rm_memo *m, rm_slot *slot, PyObject *rank, PyObject *obj, const int64_t *v, size_t nv)
{
    if (slot == NULL) {
        if (2 * (m->used + 1) > m->cap && (m->cap >= RM_MAX_SLOTS || rm_grow(m) < 0)) return;
        size_t mask = m->cap - 1, i = rm_home(rank, mask);
        while (m->slots[i].rank != NULL) i = (i + 1) & mask;
        slot = &m->slots[i];
        slot->rank = Py_NewRef(rank);
        m->used++;
    }
    if (nv > 0) memcpy(slot->v, v, nv * sizeof(int64_t));
    slot->epoch = m->epoch;
    PyObject *old = slot->obj;
    slot->obj = Py_XNewRef(obj);
    if (old != NULL && old != obj) {
        /* the rank's value changed since it was kept (Python code ran): the old one may be
         * released here for good, and its finalizer run */
        Py_DECREF(old);
        rm_may_run_code(m);
    }
    else Py_XDECREF(old); /* (obj itself: still held) */
}

/* Releases the memo's references (at the end of the pass). */
static inline void
rm_free(rm_memo *m)
{
    for (size_t k = 0; k < m->cap; k++) {
        Py_XDECREF(m->slots[k].obj);
        Py_XDECREF(m->slots[k].rank);
    }
    PyMem_Free(m->slots);
    m->slots = NULL;
    m->cap = m->used = 0;
}

#endif
