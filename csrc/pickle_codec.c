/* pickle_codec: the packed object graph of a TransferPlan pickle record (issue 5).
 *
 * graph_pack(root, registry) flattens an object graph into (codes, values): ``codes`` is a
 * bytes string of opcodes (None and ints within int64 are written there, as are repeated
 * occurrences of one str object), ``values`` a flat tuple of the other leaves (each str object
 * once, ints beyond int64, floats, bytes, bools, and any object the codec does not describe,
 * which pickle then writes itself).
 * The graph may contain exact tuples and instances of the registry's classes whose instance
 * dict has the registered shape; each distinct tuple and instance is written once, later
 * occurrences refer to it (identity is kept, as pickle's memo keeps it). Pickle then writes a
 * bytes string and a flat tuple instead of calling ``__reduce_ex__`` on every object.
 *
 * graph_unpack(codes, values, registry) rebuilds the graph. It only ever creates exact tuples
 * and instances of the registry's classes: a class of mode 0 or 1 as its default pickling
 * restores it (a new instance whose dict holds the field values, no ``__post_init__``);
 * mode 2 (``RuntimeBindingFragment``) as its own pickling does, through its constructor's
 * checks: decided here when every check of the constructor visibly holds on values it keeps
 * unchanged, otherwise by calling the class, which raises its own message. A stream that is
 * not exactly one well-formed graph (a hostile payload) returns None; the caller raises its
 * format's message. Everything the stream carries is range-checked: counts against the bytes
 * left, class and back-reference indices against their tables, every read against the end.
 *
 * Registry: an exact tuple of at most PC_MAX_CLASSES exact tuples ``(cls, names, mode)``:
 * a heap type, an exact tuple of 1..PC_MAX_FIELDS exact str, and
 *   mode 0: the instance dict holds exactly ``names`` (default dataclass pickling);
 *   mode 1: it holds every name and otherwise only ``_``-prefixed str keys (derived caches,
 *           dropped like ``WeightPlacementManifest.__getstate__`` drops them);
 *   mode 2: ``names`` are the 13 constructor arguments of ``RuntimeBindingFragment`` then
 *           ``owner``: the 13 are written (owner and other keys dropped, as its ``__reduce__``
 *           does), the restored instance has ``owner`` None.
 * An instance of a registered class of another shape is written as a leaf (pickle's own
 * path). */
#include "pickle_codec.h"
#include "layout.h"
#include "gctrack.h"

#define PC_MAX_CLASSES 32
#define PC_MAX_FIELDS 16
#define PC_MAX_DEPTH 64
#define PC_RBF_ARGS 13

/* Opcodes: the next value of ``values``; a tuple of n items; an instance of registry class k;
 * the m-th completed tuple/instance; an int within int64 (zigzag varint); the m-th value again
 * (a str met before); None. */
enum { PC_VALUE = 0, PC_TUPLE = 1, PC_OBJECT = 2, PC_REF = 3, PC_INT = 4, PC_VREF = 5, PC_NONE = 6 };

/* Step outcomes of the encoder: go on, abort (None: a cycle), error (exception set). */
#define PC_OK 0
#define PC_ABORT 1
#define PC_ERROR (-1)

typedef struct {
    Py_ssize_t n;
    PyObject *cls[PC_MAX_CLASSES];      /* borrowed from the registry tuple */
    PyObject *names[PC_MAX_CLASSES];    /* borrowed exact tuple of exact str */
    Py_ssize_t nnames[PC_MAX_CLASSES];  /* names in the tuple */
    Py_ssize_t nvalues[PC_MAX_CLASSES]; /* values written per instance */
    Py_ssize_t npublic[PC_MAX_CLASSES]; /* names not starting with '_' (mode 1) */
    int mode[PC_MAX_CLASSES];
} pc_registry;

/* 1 when the exact str s starts with '_', 0 otherwise, -1 on error. */
static int
pc_private(PyObject *s)
{
    Py_ssize_t length = PyUnicode_GetLength(s);
    if (length < 0) return -1;
    if (length == 0) return 0;
    Py_UCS4 first = PyUnicode_ReadChar(s, 0);
    if (first == (Py_UCS4)-1 && PyErr_Occurred()) return -1;
    return first == '_';
}

static int
pc_parse_registry(PyObject *registry, pc_registry *reg)
{
    if (!PyTuple_CheckExact(registry)) {
        PyErr_SetString(PyExc_TypeError, "pickle codec registry must be a tuple");
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(registry);
    if (n < 0) return -1;
    if (n > PC_MAX_CLASSES) {
        PyErr_SetString(PyExc_TypeError, "pickle codec registry has too many classes");
        return -1;
    }
    reg->n = n;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *entry = PyTuple_GetItem(registry, k);
        if (entry == NULL) return -1;
        if (!PyTuple_CheckExact(entry) || PyTuple_Size(entry) != 3) goto bad;
        PyObject *cls = PyTuple_GetItem(entry, 0);
        PyObject *names = PyTuple_GetItem(entry, 1);
        PyObject *mode = PyTuple_GetItem(entry, 2);
        if (cls == NULL || names == NULL || mode == NULL) return -1;
        if (!PyType_Check(cls) || !(PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE)) goto bad;
        if (!PyTuple_CheckExact(names) || !PyLong_CheckExact(mode)) goto bad;
        Py_ssize_t count = PyTuple_Size(names);
        if (count < 1 || count > PC_MAX_FIELDS) goto bad;
        int overflow = 0;
        long m = PyLong_AsLongAndOverflow(mode, &overflow);
        if (m == -1 && PyErr_Occurred()) return -1;
        if (overflow != 0 || m < 0 || m > 2) goto bad;
        if (m == 2 && count != PC_RBF_ARGS + 1) goto bad;
        Py_ssize_t public = 0;
        for (Py_ssize_t j = 0; j < count; j++) {
            PyObject *name = PyTuple_GetItem(names, j);
            if (name == NULL) return -1;
            if (!PyUnicode_CheckExact(name)) goto bad;
            int private = pc_private(name);
            if (private < 0) return -1;
            if (!private) public++;
        }
        for (Py_ssize_t j = 0; j < k; j++) {
            if (reg->cls[j] == cls) goto bad;
        }
        reg->cls[k] = cls;
        reg->names[k] = names;
        reg->nnames[k] = count;
        reg->nvalues[k] = m == 2 ? PC_RBF_ARGS : count;
        reg->npublic[k] = public;
        reg->mode[k] = (int)m;
    }
    return 0;
bad:
    PyErr_SetString(PyExc_TypeError, "pickle codec registry entry is invalid");
    return -1;
}

/* ------------------------------------------------------------------------------------------
 * Pointer -> index table (open addressing; identity of the objects met while packing). */

/* Key and value side by side in one slot: a lookup at 10^6 objects is a cache miss on its slot,
 * and with parallel key and value arrays a hit (and the insert after a miss) took a second miss
 * on the value's line (pc_table_get was a third of dump's time at 10^6, GROWTH40). */
typedef struct {
    const void *key; /* NULL: empty */
    Py_ssize_t val;
} pc_slot;

typedef struct {
    pc_slot *slots;
    size_t mask; /* capacity - 1, capacity a power of two */
    size_t used;
} pc_table;

static size_t
pc_hash(const void *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p;
    h ^= h >> 29;
    h *= 0x9E3779B97F4A7C15ULL;
    h ^= h >> 32;
    return (size_t)h;
}

static int
pc_table_init(pc_table *t, size_t capacity)
{
    t->slots = mr_alloc_array(capacity, sizeof(*t->slots));
    if (t->slots == NULL) return -1;
    memset(t->slots, 0, capacity * sizeof(*t->slots));
    t->mask = capacity - 1;
    t->used = 0;
    return 0;
}

static void
pc_table_free(pc_table *t)
{
    PyMem_Free(t->slots);
    t->slots = NULL;
}

/* Slot of key p (its own or the empty one where it belongs). */
static size_t
pc_table_slot(const pc_table *t, const void *p)
{
    size_t i = pc_hash(p) & t->mask;
    while (t->slots[i].key != NULL && t->slots[i].key != p) i = (i + 1) & t->mask;
    return i;
}

static int
pc_table_grow(pc_table *t)
{
    size_t capacity = t->mask + 1;
    if (capacity > ((size_t)-1) / 4) {
        PyErr_NoMemory();
        return -1;
    }
    pc_table bigger;
    if (pc_table_init(&bigger, capacity * 2) < 0) return -1;
    for (size_t i = 0; i < capacity; i++) {
        if (t->slots[i].key == NULL) continue;
        bigger.slots[pc_table_slot(&bigger, t->slots[i].key)] = t->slots[i];
    }
    bigger.used = t->used;
    pc_table_free(t);
    *t = bigger;
    return 0;
}

/* Set p -> value (inserting when absent). */
static int
pc_table_set(pc_table *t, const void *p, Py_ssize_t value)
{
    size_t i = pc_table_slot(t, p);
    if (t->slots[i].key == NULL) {
        if ((t->used + 1) * 2 > t->mask + 1) {
            if (pc_table_grow(t) < 0) return -1;
            i = pc_table_slot(t, p);
        }
        t->slots[i].key = p;
        t->used++;
    }
    t->slots[i].val = value;
    return 0;
}

/* 1 and *value when p is present, else 0. */
static int
pc_table_get(const pc_table *t, const void *p, Py_ssize_t *value)
{
    size_t i = pc_table_slot(t, p);
    if (t->slots[i].key == NULL) return 0;
    *value = t->slots[i].val;
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * A growing array of owned references that becomes an exact tuple by handing its references
 * over (PyTuple_SetItem steals them). A list would do the same job, but PyList_AsTuple takes a
 * new reference to every item and freeing the list drops it again: two more writes to every
 * object of the record's tables (millions of objects anywhere in memory at Kimi size). */

typedef struct {
    PyObject **items;
    Py_ssize_t n;
    Py_ssize_t capacity;
} pc_vec;

static void
pc_vec_free(pc_vec *v)
{
    for (Py_ssize_t j = 0; j < v->n; j++) Py_DECREF(v->items[j]);
    PyMem_Free(v->items);
    v->items = NULL;
    v->n = v->capacity = 0;
}

/* Append a new reference to value: 0, or -1 with MemoryError. */
static int
pc_vec_push(pc_vec *v, PyObject *value)
{
    if (v->n == v->capacity) {
        Py_ssize_t capacity = v->capacity < 64 ? 64 : v->capacity;
        if (capacity > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        capacity *= 2;
        size_t bytes;
        if (__builtin_mul_overflow((size_t)capacity, sizeof(PyObject *), &bytes)) {
            PyErr_NoMemory();
            return -1;
        }
        PyObject **grown = PyMem_Realloc(v->items, bytes);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        v->items = grown;
        v->capacity = capacity;
    }
    v->items[v->n++] = Py_NewRef(value);
    return 0;
}

/* Append new references to the n items of a C array. */
static int
pc_vec_extend(pc_vec *v, PyObject *const *items, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        if (pc_vec_push(v, items[j]) < 0) return -1;
    }
    return 0;
}

/* Append a new int of value index. */
static int
pc_vec_push_index(pc_vec *v, Py_ssize_t index)
{
    PyObject *number = PyLong_FromSsize_t(index);
    if (number == NULL) return -1;
    int rc = pc_vec_push(v, number);
    Py_DECREF(number);
    return rc;
}

/* The items as a new exact tuple, the vector left empty (its references handed over); NULL on
 * error (the vector then still holds them). */
static PyObject *
pc_vec_tuple(pc_vec *v)
{
    PyObject *tuple = PyTuple_New(v->n);
    if (tuple == NULL) return NULL;
    for (Py_ssize_t j = 0; j < v->n; j++) {
        if (PyTuple_SetItem(tuple, j, v->items[j]) < 0) {
            /* not reached (an exact new tuple, j in range): the reference was consumed */
            for (Py_ssize_t k = j + 1; k < v->n; k++) Py_DECREF(v->items[k]);
            v->n = 0;
            Py_DECREF(tuple);
            return NULL;
        }
    }
    v->n = 0;
    return tuple;
}

/* ------------------------------------------------------------------------------------------
 * graph_pack */

typedef struct {
    unsigned char *codes;
    size_t length;
    size_t capacity;
    pc_vec values;    /* the leaves */
    PyObject *keep;   /* list: every object of memo */
    pc_table memo;    /* object -> index once complete; -1 while its children are written */
    pc_table strings; /* str leaf -> its index in values */
    Py_ssize_t next;  /* index of the next completed tuple/instance */
    const pc_registry *reg;
} pc_encoder;

static int
pc_emit(pc_encoder *e, int op, int with_arg, uint64_t arg)
{
    if (e->capacity - e->length < 11) {
        if (e->capacity > ((size_t)PY_SSIZE_T_MAX) / 2) {
            PyErr_NoMemory();
            return -1;
        }
        size_t capacity = e->capacity * 2;
        unsigned char *grown = PyMem_Realloc(e->codes, capacity);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        e->codes = grown;
        e->capacity = capacity;
    }
    e->codes[e->length++] = (unsigned char)op;
    if (with_arg) {
        do {
            unsigned char byte = (unsigned char)(arg & 0x7F);
            arg >>= 7;
            e->codes[e->length++] = arg ? (unsigned char)(byte | 0x80) : byte;
        } while (arg);
    }
    return 0;
}

static int
pc_leaf(pc_encoder *e, PyObject *value)
{
    if (pc_emit(e, PC_VALUE, 0, 0) < 0) return PC_ERROR;
    return pc_vec_push(&e->values, value) < 0 ? PC_ERROR : PC_OK;
}

/* None, an int within int64 and a str met before are written into codes; other leaves (and
 * the first occurrence of each str object) into values. */
static int
pc_scalar(pc_encoder *e, PyObject *value)
{
    if (value == Py_None) return pc_emit(e, PC_NONE, 0, 0) < 0 ? PC_ERROR : PC_OK;
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (x == -1 && PyErr_Occurred()) return PC_ERROR;
        if (overflow != 0) return pc_leaf(e, value);
        uint64_t zigzag = x < 0 ? ((~(uint64_t)x) << 1) | 1u : (uint64_t)x << 1;
        return pc_emit(e, PC_INT, 1, zigzag) < 0 ? PC_ERROR : PC_OK;
    }
    if (PyUnicode_CheckExact(value)) {
        Py_ssize_t index;
        if (pc_table_get(&e->strings, value, &index)) {
            return pc_emit(e, PC_VREF, 1, (uint64_t)index) < 0 ? PC_ERROR : PC_OK;
        }
        index = e->values.n;
        if (pc_table_set(&e->strings, value, index) < 0) return PC_ERROR;
    }
    return pc_leaf(e, value);
}

/* Registry index of the exact class of obj, or -1. */
static Py_ssize_t
pc_class_index(const pc_registry *reg, PyObject *obj)
{
    PyObject *type = (PyObject *)Py_TYPE(obj);
    for (Py_ssize_t k = 0; k < reg->n; k++) {
        if (reg->cls[k] == type) return k;
    }
    return -1;
}

/* New references to the n items of out. */
static void
pc_hold(PyObject **out, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++) Py_INCREF(out[j]);
}

static void
pc_release(PyObject **out, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++) Py_DECREF(out[j]);
}

/* This file's readers and builders of runtime fragments: the memo of their class's layout check,
 * and the last registry names tuple found to be the runtime layout's names in order. */
static mr_class_memo pc_runtime_memo;
static PyObject *pc_runtime_names_seen = NULL;

/* The slots of obj when it is exactly registry class k (of mode 2), a C-owned layout of
 * RuntimeBindingFragment's fields (layout.h mr_runtime_layout) whose registered names are those
 * fields in order (the same interned str objects); else NULL (the instance-dict path). */
static PyObject *const *
pc_runtime_fields(const pc_registry *reg, Py_ssize_t k, PyObject *obj)
{
    mr_layout_class lc;
    if (reg->mode[k] != 2 || (PyObject *)Py_TYPE(obj) != reg->cls[k] || reg->nnames[k] != MR_RF_N) return NULL;
    if (!mr_runtime_layout(&pc_runtime_memo, &lc, reg->cls[k])) return NULL;
    if (reg->names[k] != pc_runtime_names_seen) {
        for (Py_ssize_t j = 0; j < MR_RF_N; j++) {
            if (PyTuple_GetItem(reg->names[k], j) != mr_runtime_name_ptrs[j]) {
                PyErr_Clear();
                return NULL;
            }
        }
        /* (held: the address is never reused while remembered) */
        PyObject *old = pc_runtime_names_seen;
        pc_runtime_names_seen = Py_NewRef(reg->names[k]);
        Py_XDECREF(old);
    }
    return mr_layout_fields(obj, &lc);
}

/* 1 with the written values of obj in out (new references: code run by a collection while
 * the caller allocates cannot free them) when it has the registered shape of class k; 0 when
 * it does not (the object is then a leaf); -1 on error. */
static int
pc_instance_values(const pc_registry *reg, Py_ssize_t k, PyObject *obj, PyObject **out)
{
    if (reg->mode[k] == 2) {
        /* a runtime fragment on its C-owned layout: the 13 constructor arguments are its first
         * 13 slots (what its __reduce__ reads); an empty one: a leaf (pickle's own path) */
        PyObject *const *fields = pc_runtime_fields(reg, k, obj);
        if (fields != NULL) {
            for (Py_ssize_t j = 0; j < PC_RBF_ARGS; j++) {
                if (fields[j] == NULL) return 0;
            }
            for (Py_ssize_t j = 0; j < PC_RBF_ARGS; j++) out[j] = fields[j];
            pc_hold(out, PC_RBF_ARGS);
            return 1;
        }
    }
    if (reg->mode[k] == 0 && reg->nvalues[k] == MR_PF_N) {
        /* a placement fragment in its C-owned layout (layout.h): described when every field is
         * set (its dict-backed state then held exactly the names, in order) and the registered
         * names are its fields in order; an emptied field is a missing key (a leaf) */
        PyObject *const *f = mr_pf_fields(obj);
        if (f != NULL) {
            if (!mr_layout_all_set(f, MR_PF_N) || !mr_pf_same_names(reg->names[k])) return 0;
            for (Py_ssize_t j = 0; j < MR_PF_N; j++) out[j] = f[j];
            pc_hold(out, MR_PF_N);
            return 1;
        }
    }
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    if (!PyDict_CheckExact(dict)) goto leaf;
    Py_ssize_t size = PyDict_Size(dict);
    if (size < 0) goto error;
    int mode = reg->mode[k];
    if (mode == 0 && size != reg->nnames[k]) goto leaf;
    Py_ssize_t n = reg->nvalues[k];
    if (size >= n) {
        /* Usual case: the dict starts with the names in order (the same interned str objects):
         * read the values in one pass; any other layout takes the lookups below. */
        Py_ssize_t position = 0, j = 0;
        PyObject *key, *value;
        while (j < n && PyDict_Next(dict, &position, &key, &value)) {
            if (key != PyTuple_GetItem(reg->names[k], j)) break;
            out[j++] = value;
        }
        if (j == n) {
            if (mode == 1) {
                /* every other key must be a private str key */
                while (PyDict_Next(dict, &position, &key, &value)) {
                    if (!PyUnicode_CheckExact(key)) goto leaf;
                    int private = pc_private(key);
                    if (private < 0) goto error;
                    if (!private) goto leaf;
                }
            }
            goto described;
        }
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *value = PyDict_GetItemWithError(dict, PyTuple_GetItem(reg->names[k], j));
        if (value == NULL) {
            if (PyErr_Occurred()) goto error;
            goto leaf;
        }
        out[j] = value;
    }
    if (mode == 1) {
        /* Every name is present; the other keys must all be private str keys: count the
         * public ones, which can then only be the public names. */
        Py_ssize_t position = 0, public = 0;
        PyObject *key, *value;
        while (PyDict_Next(dict, &position, &key, &value)) {
            if (!PyUnicode_CheckExact(key)) goto leaf;
            int private = pc_private(key);
            if (private < 0) goto error;
            if (!private) public++;
        }
        if (public != reg->npublic[k]) goto leaf;
    }
described:
    pc_hold(out, n);
    Py_DECREF(dict);
    return 1;
leaf:
    Py_DECREF(dict);
    return 0;
error:
    Py_DECREF(dict);
    return -1;
}

#define PC_AHEAD 16 /* children between a prefetch of a child's object and its encoding */

/* Hint: the slot obj will be looked up in (strings for an exact str, memo for an exact tuple
 * or an instance; nothing for the other scalars, written inline). Reads obj's type only. */
static inline void
pc_prefetch_slot(const pc_encoder *e, PyObject *obj)
{
    if (obj == Py_None || PyLong_CheckExact(obj)) return;
    const pc_table *t = PyUnicode_CheckExact(obj) ? &e->strings : &e->memo;
    __builtin_prefetch(&t->slots[pc_hash(obj) & t->mask]);
}

static int
pc_encode(pc_encoder *e, PyObject *obj, int depth)
{
    if (obj == Py_None || PyUnicode_CheckExact(obj) || PyLong_CheckExact(obj) || PyBool_Check(obj)
        || PyFloat_CheckExact(obj) || PyBytes_CheckExact(obj)) {
        return pc_scalar(e, obj);
    }
    int is_tuple = PyTuple_CheckExact(obj);
    Py_ssize_t k = is_tuple ? -1 : pc_class_index(e->reg, obj);
    if ((!is_tuple && k < 0) || depth >= PC_MAX_DEPTH) return pc_leaf(e, obj);
    Py_ssize_t count = 0;
    if (is_tuple) {
        count = PyTuple_Size(obj);
        if (count < 0) return PC_ERROR;
        if (count == 0) return pc_emit(e, PC_TUPLE, 1, 0) < 0 ? PC_ERROR : PC_OK;
    }
    Py_ssize_t seen;
    if (pc_table_get(&e->memo, obj, &seen)) {
        if (seen < 0) return PC_ABORT; /* a cycle: pickle's own path decides */
        return pc_emit(e, PC_REF, 1, (uint64_t)seen) < 0 ? PC_ERROR : PC_OK;
    }
    PyObject *fields[PC_MAX_FIELDS];
    Py_ssize_t held = 0;
    if (!is_tuple) {
        int described = pc_instance_values(e->reg, k, obj, fields);
        if (described < 0) return PC_ERROR;
        if (!described) return pc_leaf(e, obj);
        count = held = e->reg->nvalues[k];
        /* the fields' objects now, their slots (in either table: the hash needs the pointer
         * only) as well, before the first of them is encoded */
        for (Py_ssize_t j = 0; j < count; j++) {
            PyObject *field = fields[j];
            if (field == Py_None) continue;
            __builtin_prefetch(field);
            __builtin_prefetch(&e->memo.slots[pc_hash(field) & e->memo.mask]);
            __builtin_prefetch(&e->strings.slots[pc_hash(field) & e->strings.mask]);
        }
    }
    int rc = PC_ERROR;
    /* The memo's objects stay alive (their addresses are its keys). */
    if (PyList_Append(e->keep, obj) < 0 || pc_table_set(&e->memo, obj, -1) < 0) goto done;
    if (pc_emit(e, is_tuple ? PC_TUPLE : PC_OBJECT, 1, is_tuple ? (uint64_t)count : (uint64_t)k) < 0) goto done;
    /* The record's flat tables hold millions of children scattered over the heap, each looked
     * up in a table of millions of slots: at 10^6 fragments both are cache misses, and the pack
     * grew 15x per decade (GROWTH40). Ask for a child's object PC_AHEAD children ahead, and
     * for the table slot it will be looked up in (its type read from the now cached header)
     * PC_AHEAD / 2 ahead: hints only (a table that grows in between makes a useless hint). */
    const int ahead = is_tuple && count > PC_AHEAD;
    for (Py_ssize_t j = 0; j < count; j++) {
        if (ahead) {
            if (j + PC_AHEAD < count) {
                PyObject *far = PyTuple_GetItem(obj, j + PC_AHEAD);
                if (far != NULL) __builtin_prefetch(far);
            }
            if (j + PC_AHEAD / 2 < count) {
                PyObject *near = PyTuple_GetItem(obj, j + PC_AHEAD / 2);
                if (near != NULL) pc_prefetch_slot(e, near);
            }
        }
        PyObject *child = is_tuple ? PyTuple_GetItem(obj, j) : fields[j];
        if (child == NULL) goto done;
        rc = pc_encode(e, child, depth + 1);
        if (rc != PC_OK) goto done;
        rc = PC_ERROR;
    }
    if (pc_table_set(&e->memo, obj, e->next) < 0) goto done;
    e->next++;
    rc = PC_OK;
done:
    pc_release(fields, held);
    return rc;
}

PyDoc_STRVAR(graph_pack_doc,
"graph_pack(root, registry)\n"
"--\n\n"
"``(codes, values)``: the object graph of root packed as described at the top of\n"
"csrc/pickle_codec.c (exact tuples and registered instances as opcodes, everything else as\n"
"leaves in the flat tuple values), or None when the graph has a cycle.");

static PyObject *
graph_pack(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *root, *registry;
    if (!PyArg_ParseTuple(args, "OO:graph_pack", &root, &registry)) return NULL;
    pc_registry reg;
    if (pc_parse_registry(registry, &reg) < 0) return NULL;
    pc_encoder e;
    memset(&e, 0, sizeof(e));
    e.reg = &reg;
    e.capacity = 1024;
    e.codes = PyMem_Malloc(e.capacity);
    if (e.codes == NULL) return PyErr_NoMemory();
    PyObject *result = NULL;
    e.keep = PyList_New(0);
    if (e.keep == NULL) goto done;
    if (pc_table_init(&e.memo, 256) < 0) goto done;
    if (pc_table_init(&e.strings, 256) < 0) goto done;
    int rc = pc_encode(&e, root, 0);
    if (rc == PC_ABORT) {
        result = Py_NewRef(Py_None);
    } else if (rc == PC_OK) {
        PyObject *codes = PyBytes_FromStringAndSize((const char *)e.codes, (Py_ssize_t)e.length);
        PyObject *values = codes == NULL ? NULL : pc_vec_tuple(&e.values);
        if (values != NULL) result = PyTuple_Pack(2, codes, values);
        Py_XDECREF(codes);
        Py_XDECREF(values);
    }
done:
    PyMem_Free(e.codes);
    pc_vec_free(&e.values);
    Py_XDECREF(e.keep);
    pc_table_free(&e.memo);
    pc_table_free(&e.strings);
    return result;
}

/* ------------------------------------------------------------------------------------------
 * graph_unpack */

typedef struct {
    const unsigned char *codes;
    Py_ssize_t length;
    Py_ssize_t position;
    PyObject *values; /* exact tuple */
    Py_ssize_t nvalues;
    Py_ssize_t next_value;
    pc_vec memo; /* owned references to the completed tuples and instances */
    const pc_registry *reg;
    PyObject *no_args; /* () for tp_new */
    int malformed; /* set, without an exception, when the stream is not well formed */
    int untrack;   /* untrack inert instances and tuples (a large graph: see graph_unpack) */
    /* Ints decoded so far, by value (open addressing; owned references; NULL = empty slot):
     * every occurrence of one value in the stream is the same int object, as an int read
     * from one field and stored in several objects is in a live plan (at 74k operations,
     * 1.06M int objects for 157k distinct values without it). Ints are immutable and
     * compared by value everywhere, so sharing them changes no result. */
    int64_t *int_keys;
    PyObject **int_values;
    size_t int_mask; /* capacity - 1 (a power of two); 0 with no table */
    size_t int_used;
    /* Lookahead cursors (prefetch hints only, see pc_lookahead): positions of the opcode FAR and
     * NEAR opcodes ahead of the decoder (stopped at the end or at bytes that are no opcode). */
    Py_ssize_t far;
    Py_ssize_t near;
} pc_decoder;

/* Largest int cache (slots): beyond it new values are created without being cached. */
#define PC_INT_CACHE_MAX ((size_t)1 << 24)

static size_t
pc_int_hash(int64_t x)
{
    uint64_t h = (uint64_t)x;
    h ^= h >> 31;
    h *= 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
    return (size_t)h;
}

static void
pc_int_cache_free(pc_decoder *d)
{
    if (d->int_values != NULL) {
        for (size_t i = 0; i <= d->int_mask; i++) Py_XDECREF(d->int_values[i]);
    }
    PyMem_Free(d->int_keys);
    PyMem_Free(d->int_values);
    d->int_keys = NULL;
    d->int_values = NULL;
    d->int_mask = 0;
    d->int_used = 0;
}

/* A table of capacity slots (a power of two) holding the entries of the current one:
 * 0, or -1 with MemoryError (the current table is kept). */
static int
pc_int_cache_resize(pc_decoder *d, size_t capacity)
{
    int64_t *keys = mr_alloc_array(capacity, sizeof(*keys));
    if (keys == NULL) return -1;
    PyObject **values = mr_alloc_array(capacity, sizeof(*values));
    if (values == NULL) {
        PyMem_Free(keys);
        return -1;
    }
    memset(values, 0, capacity * sizeof(*values));
    size_t mask = capacity - 1;
    if (d->int_values != NULL) {
        for (size_t i = 0; i <= d->int_mask; i++) {
            if (d->int_values[i] == NULL) continue;
            size_t j = pc_int_hash(d->int_keys[i]) & mask;
            while (values[j] != NULL) j = (j + 1) & mask;
            keys[j] = d->int_keys[i];
            values[j] = d->int_values[i];
        }
    }
    PyMem_Free(d->int_keys);
    PyMem_Free(d->int_values);
    d->int_keys = keys;
    d->int_values = values;
    d->int_mask = mask;
    return 0;
}

/* A new reference to an int of value x: the one decoded before for that value when cached. */
static PyObject *
pc_int(pc_decoder *d, int64_t x)
{
    if (x >= -5 && x <= 256) return PyLong_FromLongLong((long long)x); /* CPython's shared small ints */
    size_t slot = 0;
    if (d->int_values != NULL) {
        slot = pc_int_hash(x) & d->int_mask;
        while (d->int_values[slot] != NULL) {
            if (d->int_keys[slot] == x) return Py_NewRef(d->int_values[slot]);
            slot = (slot + 1) & d->int_mask;
        }
    }
    PyObject *obj = PyLong_FromLongLong((long long)x);
    if (obj == NULL) return NULL;
    size_t capacity = d->int_values == NULL ? 0 : d->int_mask + 1;
    if ((d->int_used + 1) * 2 > capacity) {
        /* grow (or start) the table; at the cap, or without memory for it, the value is
         * simply not cached */
        if (capacity >= PC_INT_CACHE_MAX) return obj;
        if (pc_int_cache_resize(d, capacity ? capacity * 2 : 64) < 0) {
            PyErr_Clear();
            return obj;
        }
        slot = pc_int_hash(x) & d->int_mask;
        while (d->int_values[slot] != NULL) slot = (slot + 1) & d->int_mask;
    }
    d->int_keys[slot] = x;
    d->int_values[slot] = Py_NewRef(obj);
    d->int_used++;
    return obj;
}

/* Lookahead (hints only: nothing is decided on them). The opcode stream is linear (each opcode
 * then at most one varint), so a cursor can read the opcodes ahead of the decoder without
 * following the nesting. The objects the decoder takes again (a cached int of the int cache, a
 * str of values met before, a memo entry of PC_REF) lie anywhere in memory and the int cache is
 * large: each took a cache miss on its slot, then on the object whose count it increments. Before
 * each item of a tuple of at least PC_LOOKAHEAD_ITEMS items (the record's flat tables and the
 * placements' parts; a smaller graph has none and runs no cursor), the far cursor is brought
 * PC_FAR bytes ahead of the decoder, fetching the int cache slot of each int it passes; the near
 * cursor, PC_NEAR bytes ahead, finds the cached int there (its slot now in the cache), the str of
 * a PC_VREF or the memo entry of a PC_REF, and fetches the object. A cursor stops at the end of
 * the stream or at anything that is not an opcode; one left behind restarts at the decoder's
 * position (an item's first opcode). */
#define PC_FAR 128
#define PC_NEAR 64
#define PC_LOOKAHEAD_ITEMS 1024

/* The opcode at *position and its argument (0 without one): 1 and the cursor moved past it; 0
 * at the end or for bytes that are no opcode (the cursor is then set to the end). */
static inline int
pc_peek(const pc_decoder *d, Py_ssize_t *position, int *op, uint64_t *arg)
{
    Py_ssize_t p = *position;
    if (p >= d->length) return 0;
    int code = d->codes[p++];
    uint64_t value = 0;
    if (code == PC_TUPLE || code == PC_OBJECT || code == PC_REF || code == PC_INT || code == PC_VREF) {
        int shift = 0;
        for (;;) {
            if (p >= d->length || shift > 63) {
                *position = d->length;
                return 0;
            }
            unsigned char byte = d->codes[p++];
            value |= (uint64_t)(byte & 0x7F) << shift;
            if (!(byte & 0x80)) break;
            shift += 7;
        }
    } else if (code != PC_VALUE && code != PC_NONE) {
        *position = d->length;
        return 0;
    }
    *position = p;
    *op = code;
    *arg = value;
    return 1;
}

static inline int64_t
pc_unzigzag(uint64_t value)
{
    return (value & 1) ? -1 - (int64_t)(value >> 1) : (int64_t)(value >> 1);
}

/* Bring both cursors ahead of the decoder (at an item's first opcode) and prefetch. Not inlined:
 * the decoding loops stay as they were for the tuples that do not run it. */
static __attribute__((noinline)) void
pc_lookahead(pc_decoder *d)
{
    int op;
    uint64_t arg;
    if (d->far < d->position) d->far = d->position;
    if (d->near < d->position) d->near = d->position;
    while (d->far - d->position < PC_FAR && pc_peek(d, &d->far, &op, &arg)) {
        if (op == PC_INT && d->int_values != NULL) {
            size_t slot = pc_int_hash(pc_unzigzag(arg)) & d->int_mask;
            __builtin_prefetch(&d->int_keys[slot]);
            __builtin_prefetch(&d->int_values[slot]);
        }
    }
    while (d->near - d->position < PC_NEAR && pc_peek(d, &d->near, &op, &arg)) {
        if (op == PC_INT && d->int_values != NULL) {
            int64_t x = pc_unzigzag(arg);
            if (x >= -5 && x <= 256) continue;
            size_t slot = pc_int_hash(x) & d->int_mask;
            for (int probes = 0; probes < 4 && d->int_values[slot] != NULL; probes++) {
                if (d->int_keys[slot] == x) {
                    __builtin_prefetch(d->int_values[slot], 1);
                    break;
                }
                slot = (slot + 1) & d->int_mask;
            }
        } else if (op == PC_REF && arg < (uint64_t)d->memo.n) {
            __builtin_prefetch(d->memo.items[arg], 1);
        } else if (op == PC_VREF && arg < (uint64_t)d->nvalues) {
            /* a str met before: one of the values, anywhere in memory */
            PyObject *value = PyTuple_GetItem(d->values, (Py_ssize_t)arg);
            if (value == NULL) {
                PyErr_Clear(); /* not reached: arg is within the exact tuple */
                return;
            }
            __builtin_prefetch(value, 1);
        }
    }
}

/* An unsigned LEB128 count/index into *out (at most PY_SSIZE_T_MAX); 0, or -1 when malformed. */
static int
pc_read_arg(pc_decoder *d, Py_ssize_t *out)
{
    uint64_t value = 0;
    for (int shift = 0; shift < 63; shift += 7) {
        if (d->position >= d->length) break;
        unsigned char byte = d->codes[d->position++];
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            if (value > (uint64_t)PY_SSIZE_T_MAX) break;
            *out = (Py_ssize_t)value;
            return 0;
        }
    }
    d->malformed = 1;
    return -1;
}

/* A zigzag varint int64 (at most 10 bytes) into *out: 0, or -1 when malformed. */
static int
pc_read_int(pc_decoder *d, int64_t *out)
{
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (d->position >= d->length) break;
        unsigned char byte = d->codes[d->position++];
        if (shift == 63 && byte > 1) break;
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *out = (value & 1) ? -1 - (int64_t)(value >> 1) : (int64_t)(value >> 1);
            return 0;
        }
    }
    d->malformed = 1;
    return -1;
}

static int
pc_memo_push(pc_decoder *d, PyObject *obj)
{
    return pc_vec_push(&d->memo, obj);
}

/* An exact int in [0, 2**64) into *out: 1; 0 for anything else; -1 on error. */
static int
pc_u64(PyObject *value, uint64_t *out)
{
    if (!PyLong_CheckExact(value)) return 0;
    unsigned long long x = PyLong_AsUnsignedLongLong(value);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return 0;
    }
    *out = (uint64_t)x;
    return 1;
}

/* An exact non-empty str: 1; 0 otherwise; -1 on error. */
static int
pc_nonempty_str(PyObject *value)
{
    if (!PyUnicode_CheckExact(value)) return 0;
    Py_ssize_t length = PyUnicode_GetLength(value);
    if (length < 0) return -1;
    return length > 0;
}

/* 1 when RuntimeBindingFragment(*args) accepts the 13 arguments and keeps every one unchanged
 * (its fast path: exact types, no singleton dimension), 0 when not decided here, -1 on error. */
static int
pc_runtime_fragment_ok(PyObject *const *args)
{
    static const int strings[] = {0, 1, 4, 5, 6};
    for (size_t j = 0; j < sizeof(strings) / sizeof(strings[0]); j++) {
        int rc = pc_nonempty_str(args[strings[j]]);
        if (rc <= 0) return rc;
    }
    uint64_t address, nbytes, itemsize, storage_address, storage_nbytes, offset;
    int rc;
    if ((rc = pc_u64(args[2], &address)) <= 0) return rc;
    if ((rc = pc_u64(args[3], &nbytes)) <= 0) return rc;
    if (address < 1 || nbytes < 1 || nbytes > UINT64_MAX - address) return 0;
    if ((rc = pc_u64(args[7], &itemsize)) <= 0) return rc;
    if (itemsize < 1) return 0;
    PyObject *shape = args[8], *strides = args[9];
    if (!PyTuple_CheckExact(shape) || !PyTuple_CheckExact(strides)) return 0;
    Py_ssize_t rank = PyTuple_Size(shape);
    if (rank < 0) return -1;
    if (PyTuple_Size(strides) != rank) return 0;
    for (Py_ssize_t j = 0; j < rank; j++) {
        uint64_t extent, stride;
        PyObject *e = PyTuple_GetItem(shape, j), *s = PyTuple_GetItem(strides, j);
        if (e == NULL || s == NULL) return -1;
        if ((rc = pc_u64(e, &extent)) <= 0) return rc;
        if ((rc = pc_u64(s, &stride)) <= 0) return rc;
        if (extent <= 1 || extent > (uint64_t)INT64_MAX || stride < 1) return 0;
    }
    if ((rc = pc_u64(args[10], &storage_address)) <= 0) return rc;
    if ((rc = pc_u64(args[11], &storage_nbytes)) <= 0) return rc;
    if (storage_address < 1 || storage_nbytes < 1 || storage_nbytes > UINT64_MAX - storage_address) return 0;
    if ((rc = pc_u64(args[12], &offset)) <= 0) return rc;
    if (offset > UINT64_MAX - storage_address) return 0;
    if (address != storage_address + offset) return 0;
    if (storage_nbytes < nbytes || offset > storage_nbytes - nbytes) return 0;
    return 1;
}

/* A new instance of the registered class k holding names[j] -> values[j] for the first n names,
 * then (mode 2) owner None: ``object.__new__(cls)`` (the class's own tp_new, which lays out the
 * instance attributes as every instance of the class) and generic attribute stores, i.e. the
 * instance dict written as default pickling writes it (the registered classes define no data
 * descriptor under a field name; their frozen ``__setattr__`` is bypassed). */
static PyObject *
pc_instance(const pc_registry *reg, Py_ssize_t k, PyObject *const *values, Py_ssize_t n, PyObject *no_args)
{
    PyTypeObject *cls = (PyTypeObject *)reg->cls[k];
    mr_layout_class lc;
    if (reg->mode[k] == 2 && n == PC_RBF_ARGS && reg->nnames[k] == MR_RF_N
        && mr_runtime_layout(&pc_runtime_memo, &lc, (PyObject *)cls)) {
        /* a C-owned runtime layout: the 13 values and owner None stored directly (the slots the
         * generic stores below would write through the layout's member descriptors) */
        PyObject *items[MR_RF_N];
        for (Py_ssize_t j = 0; j < PC_RBF_ARGS; j++) items[j] = values[j];
        items[MR_RF_OWNER] = Py_None;
        return mr_layout_new_gc(&lc, items, MR_RF_N, 0); /* (the caller untracks) */
    }
    newfunc make = (newfunc)PyType_GetSlot(cls, Py_tp_new);
    if (make == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "graph_unpack: class has no constructor");
        return NULL;
    }
    PyObject *obj = make(cls, no_args, NULL);
    if (obj == NULL) return NULL;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (PyObject_GenericSetAttr(obj, PyTuple_GetItem(reg->names[k], j), values[j]) < 0) goto error;
    }
    if (reg->mode[k] == 2 && PyObject_GenericSetAttr(obj, PyTuple_GetItem(reg->names[k], n), Py_None) < 0) goto error;
    return obj;
error:
    Py_DECREF(obj);
    return NULL;
}

static PyObject *pc_decode(pc_decoder *d, int depth);

static PyObject *
pc_decode_object(pc_decoder *d, int depth)
{
    Py_ssize_t k;
    if (pc_read_arg(d, &k) < 0) return NULL;
    if (k >= d->reg->n) {
        d->malformed = 1;
        return NULL;
    }
    Py_ssize_t n = d->reg->nvalues[k];
    PyObject *values[PC_MAX_FIELDS];
    Py_ssize_t have = 0;
    PyObject *obj = NULL;
    for (; have < n; have++) {
        values[have] = pc_decode(d, depth + 1);
        if (values[have] == NULL) goto done;
    }
    if (d->reg->mode[k] == 2) {
        int ok = pc_runtime_fragment_ok(values);
        if (ok < 0) goto done;
        if (!ok) {
            /* The constructor decides (and raises its own message). */
            PyObject *arguments = PyTuple_New(n);
            if (arguments == NULL) goto done;
            for (Py_ssize_t j = 0; j < n; j++) {
                if (PyTuple_SetItem(arguments, j, Py_NewRef(values[j])) < 0) {
                    Py_DECREF(arguments);
                    goto done;
                }
            }
            obj = PyObject_CallObject(d->reg->cls[k], arguments);
            Py_DECREF(arguments);
            goto done;
        }
    }
    if (d->reg->mode[k] == 0 && n == MR_PF_N) {
        /* a class accepted as PlacementFragment's C-owned layout, registered with its field
         * names in order: built with direct stores (what the generic stores below write into its
         * slots), untracked as below when the fields are inert */
        mr_layout_class lc;
        if (mr_pf_class(d->reg->cls[k], &lc) && mr_pf_same_names(d->reg->names[k])) {
            obj = mr_layout_new_gc(&lc, values, n, d->untrack);
            goto done;
        }
    }
    obj = pc_instance(d->reg, k, values, n, d->no_args);
    /* Out of the cyclic collector when its fields are inert (common.h; mode 2's owner None is). */
    if (obj != NULL && d->untrack && mr_untrack_values(obj, NULL, values, n) < 0) Py_CLEAR(obj);
done:
    for (Py_ssize_t j = 0; j < have; j++) Py_DECREF(values[j]);
    return obj;
}

/* The n items of the new tuple obj (a tuple of at least PC_LOOKAHEAD_ITEMS items), each decoded
 * after the lookahead cursors moved on; *inert cleared when an item is not inert. 0, or -1 (the
 * caller frees obj). Apart from the cursors, the loop of pc_decode's PC_TUPLE; kept out of it so
 * that loop is unchanged for the tuples of small graphs. */
static __attribute__((noinline)) int
pc_decode_long_items(pc_decoder *d, PyObject *obj, Py_ssize_t n, int depth, int *inert)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        pc_lookahead(d);
        PyObject *item = pc_decode(d, depth + 1);
        if (item != NULL && *inert) *inert = mr_gc_inert(item, 0);
        if (item == NULL || PyTuple_SetItem(obj, j, item) < 0) return -1;
    }
    return 0;
}

static PyObject *
pc_decode(pc_decoder *d, int depth)
{
    if (d->position >= d->length) {
        d->malformed = 1;
        return NULL;
    }
    int op = d->codes[d->position++];
    if ((op == PC_TUPLE || op == PC_OBJECT) && depth >= PC_MAX_DEPTH) {
        d->malformed = 1; /* the packer writes deeper containers as leaves */
        return NULL;
    }
    Py_ssize_t arg;
    PyObject *obj;
    switch (op) {
    case PC_VALUE:
        if (d->next_value >= d->nvalues) {
            d->malformed = 1;
            return NULL;
        }
        obj = PyTuple_GetItem(d->values, d->next_value++);
        return obj == NULL ? NULL : Py_NewRef(obj);
    case PC_NONE:
        return Py_NewRef(Py_None);
    case PC_INT: {
        int64_t number;
        if (pc_read_int(d, &number) < 0) return NULL;
        return pc_int(d, number);
    }
    case PC_VREF:
        if (pc_read_arg(d, &arg) < 0) return NULL;
        if (arg >= d->next_value) {
            d->malformed = 1;
            return NULL;
        }
        obj = PyTuple_GetItem(d->values, arg);
        return obj == NULL ? NULL : Py_NewRef(obj);
    case PC_REF:
        if (pc_read_arg(d, &arg) < 0) return NULL;
        if (arg >= d->memo.n) {
            d->malformed = 1;
            return NULL;
        }
        return Py_NewRef(d->memo.items[arg]);
    case PC_TUPLE:
        if (pc_read_arg(d, &arg) < 0) return NULL;
        /* every item takes at least one code byte */
        if (arg > d->length - d->position) {
            d->malformed = 1;
            return NULL;
        }
        obj = mr_gc_hide(PyTuple_New(arg)); /* until full: decoding items allocates (may collect), gctrack.h */
        if (obj == NULL) return NULL;
        int inert = 1; /* every item inert (common.h): items were decoded (and untracked) first */
        if (arg >= PC_LOOKAHEAD_ITEMS) {
            if (pc_decode_long_items(d, obj, arg, depth, &inert) < 0) {
                Py_DECREF(obj);
                return NULL;
            }
        } else {
            for (Py_ssize_t j = 0; j < arg; j++) {
                PyObject *item = pc_decode(d, depth + 1);
                if (item != NULL && inert) inert = mr_gc_inert(item, 0);
                if (item == NULL || PyTuple_SetItem(obj, j, item) < 0) {
                    Py_DECREF(obj);
                    return NULL;
                }
            }
        }
        if (!(inert && d->untrack)) mr_gc_show(obj); /* full; left untracked when inert */
        if (arg > 0 && pc_memo_push(d, obj) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
        return obj;
    case PC_OBJECT:
        obj = pc_decode_object(d, depth);
        if (obj != NULL && pc_memo_push(d, obj) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
        return obj;
    default:
        d->malformed = 1;
        return NULL;
    }
}

PyDoc_STRVAR(graph_unpack_doc,
"graph_unpack(codes, values, registry)\n"
"--\n\n"
"The object graph packed by graph_pack (bytes codes, exact tuple values), rebuilt as\n"
"described at the top of csrc/pickle_codec.c; None when the stream is not exactly one\n"
"well-formed graph using every value once. Exceptions of a runtime fragment constructor\n"
"propagate.");

static PyObject *
graph_unpack(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *codes, *values, *registry;
    if (!PyArg_ParseTuple(args, "OOO:graph_unpack", &codes, &values, &registry)) return NULL;
    pc_registry reg;
    if (pc_parse_registry(registry, &reg) < 0) return NULL;
    if (!PyBytes_CheckExact(codes) || !PyTuple_CheckExact(values)) Py_RETURN_NONE;
    pc_decoder d;
    memset(&d, 0, sizeof(d));
    char *buffer;
    if (PyBytes_AsStringAndSize(codes, &buffer, &d.length) < 0) return NULL;
    d.codes = (const unsigned char *)buffer;
    d.values = values;
    d.nvalues = PyTuple_Size(values);
    if (d.nvalues < 0) return NULL;
    d.reg = &reg;
    /* A large graph only (common.h MR_GC_BULK_MIN): the codes of an instance take about 10-30
     * bytes (the contract benchmark's 8-operation plan: 3.4 KB), so 64 bytes an object is a
     * generous estimate; the objects of smaller graphs stay tracked. */
    d.untrack = d.length / 64 >= MR_GC_BULK_MIN;
    d.no_args = PyTuple_New(0);
    if (d.no_args == NULL) return NULL;
    Py_INCREF(codes);
    PyObject *root = pc_decode(&d, 0);
    Py_DECREF(d.no_args);
    if (root != NULL && (d.position != d.length || d.next_value != d.nvalues)) d.malformed = 1;
    pc_vec_free(&d.memo);
    pc_int_cache_free(&d);
    Py_DECREF(codes);
    if (d.malformed) {
        Py_XDECREF(root);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    return root;
}

/* ------------------------------------------------------------------------------------------
 * encode_record: the tables of the compact TransferPlan record (bound_pickle._encode) */

static PyObject *pc_key_placement; /* interned "placement" / "evidence" (Init_PickleCodec) */
static PyObject *pc_key_evidence;

/* 1 with the values of obj in out (new references) when it is an exact instance of cls whose
 * dict holds exactly the n names; 0 for anything else; -1 on error. */
static int
pc_exact_values(PyObject *obj, PyObject *cls, PyObject *names, Py_ssize_t n, PyObject **out)
{
    if ((PyObject *)Py_TYPE(obj) != cls) return 0;
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    int rc = 0;
    if (!PyDict_CheckExact(dict)) goto done;
    Py_ssize_t size = PyDict_Size(dict);
    if (size < 0) {
        rc = -1;
        goto done;
    }
    if (size != n) goto done;
    Py_ssize_t position = 0, j = 0;
    PyObject *key, *value;
    while (j < n && PyDict_Next(dict, &position, &key, &value)) {
        if (key != PyTuple_GetItem(names, j)) break;
        out[j++] = value;
    }
    for (; j < n; j++) {
        value = PyDict_GetItemWithError(dict, PyTuple_GetItem(names, j));
        if (value == NULL) {
            rc = PyErr_Occurred() ? -1 : 0;
            goto done;
        }
        out[j] = value;
    }
    pc_hold(out, n);
    rc = 1;
done:
    Py_DECREF(dict);
    return rc;
}

/* pc_exact_values for a class stored in a C-owned layout (layout.h) that lc accepted with
 * exactly the n names: 1 with the n field values in out (new references) when obj is exactly
 * that class with every field set (what its instance dict would then hold: exactly the names,
 * in order), 0 otherwise (an emptied field is a missing key). Never fails. */
static int
pc_layout_values(PyObject *obj, const mr_layout_class *lc, Py_ssize_t n, PyObject **out)
{
    PyObject *const *fields = mr_layout_fields_set(obj, lc);
    if (fields == NULL || lc->n != n) return 0;
    for (Py_ssize_t j = 0; j < n; j++) out[j] = fields[j];
    pc_hold(out, n);
    return 1;
}

#define PC_REGION_FIELDS 11
#define PC_BOUND_FIELDS 7
#define PC_EXECUTOR_FIELDS 10
#define PC_SNAPSHOT_FIELDS 16

typedef struct {
    PyObject *region_cls, *bound_cls, *executor_cls, *snapshot_cls, *attestation_cls;
    PyObject *region_names, *bound_names, *executor_names, *snapshot_names;
    mr_layout_class snapshot_layout; /* snapshot_cls's layout check (cls NULL: instance dicts) */
    mr_layout_class bound_layout;    /* bound_cls's layout check (cls NULL: instance dicts) */
    mr_layout_class region_layout;   /* region_cls's layout check (cls NULL: instance dicts) */
    pc_vec attestations;    /* placement, evidence per attestation */
    pc_vec fragments;       /* 6 items per bound fragment */
    PyObject *keep;         /* list: the attestations and fragments of the two tables */
    pc_table attestation_index;
    pc_table fragment_index;
} pc_record;

/* The attestation table index of attestation (appended when new; -1 for None) into *out:
 * PC_OK, PC_ABORT (not described: not an exact attestation, no placement/evidence), PC_ERROR. */
static int
pc_attestation_position(pc_record *r, PyObject *attestation, Py_ssize_t *out)
{
    if (attestation == Py_None) {
        *out = -1;
        return PC_OK;
    }
    if (pc_table_get(&r->attestation_index, attestation, out)) return PC_OK;
    if ((PyObject *)Py_TYPE(attestation) != r->attestation_cls) return PC_ABORT;
    PyObject *dict = PyObject_GenericGetDict(attestation, NULL);
    if (dict == NULL) return PC_ERROR;
    int rc = PC_ABORT;
    PyObject *items[2] = {NULL, NULL};
    if (PyDict_CheckExact(dict)) {
        items[0] = PyDict_GetItemWithError(dict, pc_key_placement);
        items[1] = items[0] == NULL ? NULL : PyDict_GetItemWithError(dict, pc_key_evidence);
        if (PyErr_Occurred()) {
            rc = PC_ERROR;
        } else if (items[1] != NULL) {
            pc_hold(items, 2);
            Py_ssize_t index = r->attestations.n / 2;
            rc = PC_ERROR;
            if (pc_vec_extend(&r->attestations, items, 2) == 0 && PyList_Append(r->keep, attestation) == 0
                && pc_table_set(&r->attestation_index, attestation, index) == 0) {
                *out = index;
                rc = PC_OK;
            }
            pc_release(items, 2);
        }
    }
    Py_DECREF(dict);
    return rc;
}

static int
pc_append_position(pc_vec *rows, Py_ssize_t position)
{
    if (position < 0) return pc_vec_push(rows, Py_None);
    return pc_vec_push_index(rows, position);
}

/* The fragment table index of the bound fragment (its row appended when new) into *out. */
static int
pc_fragment_position(pc_record *r, PyObject *fragment, Py_ssize_t *out)
{
    if (pc_table_get(&r->fragment_index, fragment, out)) return PC_OK;
    PyObject *values[PC_BOUND_FIELDS];
    int described = r->bound_layout.cls != NULL
                        ? pc_layout_values(fragment, &r->bound_layout, PC_BOUND_FIELDS, values)
                        : pc_exact_values(fragment, r->bound_cls, r->bound_names, PC_BOUND_FIELDS, values);
    if (described <= 0) return described < 0 ? PC_ERROR : PC_ABORT;
    Py_ssize_t position;
    int rc = PC_ABORT; /* an owner is never pickled: fallback */
    if (values[5] == Py_None) rc = pc_attestation_position(r, values[6], &position);
    if (rc == PC_OK) {
        Py_ssize_t index = r->fragments.n / 6;
        rc = PC_ERROR;
        if (pc_vec_extend(&r->fragments, values, 5) == 0 && pc_append_position(&r->fragments, position) == 0
            && PyList_Append(r->keep, fragment) == 0 && pc_table_set(&r->fragment_index, fragment, index) == 0) {
            *out = index;
            rc = PC_OK;
        }
    }
    pc_release(values, PC_BOUND_FIELDS);
    return rc;
}

static int
pc_encode_operations(pc_record *r, PyObject *operations, pc_vec *rows)
{
    Py_ssize_t count = PyTuple_Size(operations);
    if (count < 0) return PC_ERROR;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *operation = PyTuple_GetItem(operations, i);
        if (operation == NULL) return PC_ERROR;
        PyObject *values[PC_REGION_FIELDS];
        int described = r->region_layout.cls != NULL
                            ? pc_layout_values(operation, &r->region_layout, PC_REGION_FIELDS, values)
                            : pc_exact_values(operation, r->region_cls, r->region_names, PC_REGION_FIELDS, values);
        if (described <= 0) return described < 0 ? PC_ERROR : PC_ABORT;
        Py_ssize_t source, target;
        int rc = pc_fragment_position(r, values[1], &source);
        if (rc == PC_OK) rc = pc_fragment_position(r, values[2], &target);
        if (rc == PC_OK) {
            rc = PC_ERROR;
            if (pc_vec_push(rows, values[0]) == 0 && pc_vec_push_index(rows, source) == 0
                && pc_vec_push_index(rows, target) == 0 && pc_vec_extend(rows, values + 3, PC_REGION_FIELDS - 3) == 0) {
                rc = PC_OK;
            }
        }
        pc_release(values, PC_REGION_FIELDS);
        if (rc != PC_OK) return rc;
    }
    return PC_OK;
}

static int
pc_encode_executors(pc_record *r, PyObject *executors, pc_vec *rows)
{
    Py_ssize_t count = PyTuple_Size(executors);
    if (count < 0) return PC_ERROR;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *executor = PyTuple_GetItem(executors, i);
        if (executor == NULL) return PC_ERROR;
        PyObject *values[PC_EXECUTOR_FIELDS];
        int described = pc_exact_values(executor, r->executor_cls, r->executor_names, PC_EXECUTOR_FIELDS, values);
        if (described <= 0) return described < 0 ? PC_ERROR : PC_ABORT;
        int rc = PC_ABORT;
        PyObject *snapshots = values[8];
        if (!PyTuple_CheckExact(snapshots)) goto next;
        rc = PC_ERROR;
        Py_ssize_t nsnapshots = PyTuple_Size(snapshots);
        Py_ssize_t head = rows->n;
        if (nsnapshots < 0) goto next;
        if (pc_vec_extend(rows, values, 8) < 0 || pc_vec_push(rows, Py_None) < 0
            || pc_vec_push_index(rows, nsnapshots) < 0) {
            goto next;
        }
        for (Py_ssize_t j = 0; j < nsnapshots; j++) {
            PyObject *snapshot = PyTuple_GetItem(snapshots, j);
            if (snapshot == NULL) goto next;
            PyObject *fields[PC_SNAPSHOT_FIELDS];
            int found = r->snapshot_layout.cls != NULL
                            ? pc_layout_values(snapshot, &r->snapshot_layout, PC_SNAPSHOT_FIELDS, fields)
                            : pc_exact_values(snapshot, r->snapshot_cls, r->snapshot_names, PC_SNAPSHOT_FIELDS, fields);
            if (found <= 0) {
                if (found == 0) rc = PC_ABORT;
                goto next;
            }
            int failed = pc_vec_extend(rows, fields, PC_SNAPSHOT_FIELDS);
            pc_release(fields, PC_SNAPSHOT_FIELDS);
            if (failed) goto next;
        }
        Py_ssize_t position;
        rc = pc_attestation_position(r, values[9], &position);
        if (rc != PC_OK) goto next;
        rc = PC_ERROR;
        if (position >= 0) {
            PyObject *number = PyLong_FromSsize_t(position);
            if (number == NULL) goto next;
            /* the None pushed at head + 8 above */
            PyObject *placeholder = rows->items[head + 8];
            rows->items[head + 8] = number;
            Py_DECREF(placeholder);
        }
        rc = PC_OK;
    next:
        pc_release(values, PC_EXECUTOR_FIELDS);
        if (rc != PC_OK) return rc;
    }
    return PC_OK;
}

/* An exact tuple of n exact str (1), anything else (0). */
static int
pc_names(PyObject *names, Py_ssize_t n)
{
    if (!PyTuple_CheckExact(names) || PyTuple_Size(names) != n) return 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *name = PyTuple_GetItem(names, k);
        if (name == NULL || !PyUnicode_CheckExact(name)) return 0;
    }
    return 1;
}

PyDoc_STRVAR(encode_record_doc,
"encode_record(operations, source_executors, target_executors, region_cls, bound_cls,\n"
"              executor_cls, snapshot_cls, attestation_cls, region_fields, bound_fields,\n"
"              executor_fields, snapshot_fields)\n"
"--\n\n"
"``(attestations, fragments, operations, source_executors, target_executors)``: the five flat\n"
"tables of the compact TransferPlan pickle record, exactly as bound_pickle._encode builds\n"
"them from the three exact tuples; None when an object is not of the record's shape (exact\n"
"classes whose instance dicts hold exactly the fields, owner-free bound fragments, exact\n"
"snapshot tuples, attestations with placement and evidence): _encode then decides.");

static PyObject *
encode_record(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *operations, *source_executors, *target_executors;
    pc_record r;
    memset(&r, 0, sizeof(r));
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO:encode_record", &operations, &source_executors, &target_executors,
                          &r.region_cls, &r.bound_cls, &r.executor_cls, &r.snapshot_cls, &r.attestation_cls,
                          &r.region_names, &r.bound_names, &r.executor_names, &r.snapshot_names)) {
        return NULL;
    }
    if (!pc_names(r.region_names, PC_REGION_FIELDS) || !pc_names(r.bound_names, PC_BOUND_FIELDS)
        || !pc_names(r.executor_names, PC_EXECUTOR_FIELDS) || !pc_names(r.snapshot_names, PC_SNAPSHOT_FIELDS)) {
        PyErr_SetString(PyExc_TypeError, "encode_record: field names of the wrong shape");
        return NULL;
    }
    if (!PyTuple_CheckExact(operations) || !PyTuple_CheckExact(source_executors)
        || !PyTuple_CheckExact(target_executors)) {
        Py_RETURN_NONE;
    }
    /* once per call, through a memo (layout.h: the record holds the instance state) */
    static mr_layout_memo snapshot_memo;
    (void)mr_layout_memo_check(&snapshot_memo, &r.snapshot_layout, r.snapshot_cls, r.snapshot_names);
    static mr_layout_memo bound_memo;
    (void)mr_layout_memo_check(&bound_memo, &r.bound_layout, r.bound_cls, r.bound_names);
    static mr_layout_memo region_memo;
    (void)mr_layout_memo_check(&region_memo, &r.region_layout, r.region_cls, r.region_names);
    PyObject *result = NULL;
    pc_vec operation_rows = {NULL, 0, 0}, source_rows = {NULL, 0, 0}, target_rows = {NULL, 0, 0};
    if (pc_table_init(&r.attestation_index, 64) < 0) return NULL;
    if (pc_table_init(&r.fragment_index, 64) < 0) goto done;
    r.keep = PyList_New(0);
    if (r.keep == NULL) goto done;
    int rc = pc_encode_operations(&r, operations, &operation_rows);
    if (rc == PC_OK) rc = pc_encode_executors(&r, source_executors, &source_rows);
    if (rc == PC_OK) rc = pc_encode_executors(&r, target_executors, &target_rows);
    if (rc == PC_ABORT) {
        result = Py_NewRef(Py_None);
    } else if (rc == PC_OK) {
        PyObject *tables[5] = {NULL, NULL, NULL, NULL, NULL};
        pc_vec *vectors[5] = {&r.attestations, &r.fragments, &operation_rows, &source_rows, &target_rows};
        int failed = 0;
        for (int k = 0; k < 5 && !failed; k++) {
            tables[k] = pc_vec_tuple(vectors[k]);
            failed = tables[k] == NULL;
        }
        if (!failed) result = PyTuple_Pack(5, tables[0], tables[1], tables[2], tables[3], tables[4]);
        for (int k = 0; k < 5; k++) Py_XDECREF(tables[k]);
    }
done:
    pc_vec_free(&r.attestations);
    pc_vec_free(&r.fragments);
    Py_XDECREF(r.keep);
    pc_vec_free(&operation_rows);
    pc_vec_free(&source_rows);
    pc_vec_free(&target_rows);
    pc_table_free(&r.attestation_index);
    pc_table_free(&r.fragment_index);
    return result;
}

static PyMethodDef pickle_codec_methods[] = {
    {"graph_pack", graph_pack, METH_VARARGS, graph_pack_doc},
    {"graph_unpack", graph_unpack, METH_VARARGS, graph_unpack_doc},
    {"encode_record", encode_record, METH_VARARGS, encode_record_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_PickleCodec(PyObject *module)
{
    if (pc_key_placement == NULL) {
        pc_key_placement = PyUnicode_InternFromString("placement");
        if (pc_key_placement == NULL) return -1;
    }
    if (pc_key_evidence == NULL) {
        pc_key_evidence = PyUnicode_InternFromString("evidence");
        if (pc_key_evidence == NULL) return -1;
    }
    return PyModule_AddFunctions(module, pickle_codec_methods);
}
