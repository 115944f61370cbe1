/* A pass's memo of its last lookup in a str-keyed index (tensor id -> position).
 *
 * assembly_columns and FragmentTable.pack_objects look every fragment's tensor id up in the
 * caller's {tensor id: position} dict. A tensor's fragments come one after another in a
 * placement's input order and share its id object, so most lookups repeat the previous one; at
 * 10^6 fragments each lookup is a chain of cache misses (the id's hash, the dict's index slot,
 * its entry, the value), a large part of both passes (perf, session 31).
 *
 * A lookup done again gives what the last one gave while (1) it is the same key object (the memo
 * holds it: its address is not reused), (2) the dict has not changed and (3) neither lookup ran
 * Python code. (2) holds while no Python code has run since the last lookup: the pass calls
 * mr_str_memo_code before (or right after) every step that may run some (a rank's __hash__, an
 * attribute hook, an __index__, a release), which forgets the memo. (3) holds when every key of
 * the dict is an exact str (a lookup of an exact str then compares exact strs only); a key of
 * another type runs its own __eq__ inside a lookup. So the memo is used only after a check of
 * every key made since the last such step. The check reads every key, so it is made only after
 * min_run lookups without a step that may run code (then at most 8 key reads per lookup of the
 * pass, however often such steps come: in a placement they come at the first fragments of each
 * rank, so the check is made about once); a failed check turns the memo off for the pass. Until
 * the check every fragment is looked up, in the caller's dict, as without the memo. */
#ifndef MOONCAKE_RESHARD_STR_INDEX_H
#define MOONCAKE_RESHARD_STR_INDEX_H

#include "common.h"

typedef struct {
    PyObject *dict;     /* borrowed: the caller's index (held by the pass's arguments) */
    Py_ssize_t min_run; /* lookups after a step that may run code before the keys are checked */
    Py_ssize_t run;     /* lookups since the last such step; -1: the memo is off for the pass */
    int checked;        /* every key an exact str, checked since the last such step */
    PyObject *key;      /* strong, or NULL: the last key looked up since the check */
    PyObject *value;    /* what it found (borrowed from dict: unchanged while checked) */
    int64_t at;         /* the pass's reading of value */
} mr_str_memo;

static inline void
mr_str_memo_init(mr_str_memo *m, PyObject *dict, Py_ssize_t nkeys)
{
    m->dict = dict;
    m->min_run = nkeys / 8 > 16 ? nkeys / 8 : 16;
    m->run = 0;
    m->checked = 0;
    m->key = m->value = NULL;
    m->at = 0;
}

/* A step that may run Python code follows (or has just run): forget the memo and the check. */
static inline void
mr_str_memo_code(mr_str_memo *m)
{
    PyObject *old = m->key;
    m->key = m->value = NULL;
    m->checked = 0;
    if (m->run > 0) m->run = 0;
    Py_XDECREF(old); /* an exact str: its release runs no Python code */
}

/* The memo's value when key is its key (a pointer comparison), else NULL. */
static inline PyObject *
mr_str_memo_get(const mr_str_memo *m, PyObject *key, int64_t *at)
{
    if (m->key == NULL || m->key != key) return NULL;
    *at = m->at;
    return m->value;
}

/* Before a lookup of an exact str in m->dict (not answered by the memo): whether its result may
 * be remembered (the keys are checked, so it runs no Python code). Checks the keys (no Python
 * code: PyDict_Next and type reads) once min_run lookups have gone by since the last step that
 * may run code. */
static inline int
mr_str_memo_will_keep(mr_str_memo *m)
{
    if (m->checked) return 1;
    if (m->run < 0 || ++m->run < m->min_run) return 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(m->dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            m->run = -1;
            return 0;
        }
    }
    m->checked = 1;
    return 1;
}

/* Remember key -> value (found by a lookup mr_str_memo_will_keep allowed to keep). */
static inline void
mr_str_memo_put(mr_str_memo *m, PyObject *key, PyObject *value, int64_t at)
{
    PyObject *old = m->key;
    m->key = Py_NewRef(key);
    m->value = value;
    m->at = at;
    Py_XDECREF(old); /* an exact str: its release runs no Python code */
}

static inline void
mr_str_memo_clear(mr_str_memo *m)
{
    Py_CLEAR(m->key);
    m->value = NULL;
}

#endif
