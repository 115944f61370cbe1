/* Exact-class scans for _planner/exactness.py: whether reading a placement's members can run
 * user code (a subclass's __eq__, __hash__, property or __getattribute__). The Python version
 * (exactness.placement_members, kept as this function's oracle in the tests) chained every
 * member through several map/set passes: ~180 ms per bind at 230k fragments. Here one pass per
 * tuple, each item's class and its attribute's class read once. No Python code runs: an item's
 * attribute is read only when the item's class is exactly one of the allowed ones. */
#include "exact.h"
#include "layout.h"
#include "plain_dict.h"

/* (layout.h: mr_layout_object) */
typedef mr_layout_object mr_layout_object_view;

PyDoc_STRVAR(classes_within_doc,
"classes_within(items, allowed, name, name_allowed)\n"
"--\n\n"
"True when items (an exact tuple) holds only objects whose class is exactly one of allowed (a\n"
"tuple of classes) and, when name is a str, whose attribute name is an object whose class is\n"
"exactly one of name_allowed (a tuple of classes); False otherwise (also when an item lacks the\n"
"attribute). The attribute is read only from an item of an allowed class, so no Python code\n"
"runs when allowed holds only classes whose attribute reads run none.");

/* The index of Py_TYPE(obj) among the n classes, else -1. */
static Py_ssize_t
ex_class_at(PyObject *obj, PyObject *const *classes, Py_ssize_t n)
{
    PyObject *cls = (PyObject *)Py_TYPE(obj);
    for (Py_ssize_t k = 0; k < n; k++) {
        if (classes[k] == cls) return k;
    }
    return -1;
}

/* 1 when Py_TYPE(obj) is one of the n classes, else 0. */
static int
ex_class_in(PyObject *obj, PyObject *const *classes, Py_ssize_t n)
{
    return ex_class_at(obj, classes, n) >= 0;
}

/* Per allowed class, the slot of the attribute name in its instances' C-owned layout when that
 * class is one PlacementFragment layout check accepts (layout.h mr_pf_class: instances of
 * exactly it are read with direct loads, no descriptor shadows a field, attribute access is the
 * generic one) and name is one of its field names (by identity: interned), else -1 (getattr).
 * For such a class the slot is what getattr returns, an empty slot the AttributeError it raises. */
static void
ex_layout_slots(PyObject *const *classes, Py_ssize_t n, PyObject *name, Py_ssize_t *slot)
{
    for (Py_ssize_t k = 0; k < n; k++) {
        slot[k] = -1;
        mr_layout_class lc;
        if (!mr_pf_class(classes[k], &lc)) continue;
        for (Py_ssize_t j = 0; j < MR_PF_N; j++) {
            if (mr_pf_name_ptrs[j] == name) slot[k] = j;
        }
    }
}

/* The items of ``classes`` (an exact tuple of classes) into ``out`` (at most 8), or -1 with an
 * error set. */
static Py_ssize_t
ex_classes(PyObject *classes, PyObject **out, const char *what)
{
    if (!PyTuple_CheckExact(classes)) {
        PyErr_Format(PyExc_TypeError, "classes_within: %s must be a tuple", what);
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(classes);
    if (n < 0) return -1;
    if (n > 8) {
        PyErr_Format(PyExc_ValueError, "classes_within: at most 8 %s classes", what);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *cls = PyTuple_GetItem(classes, k);
        if (cls == NULL) return -1;
        if (!PyType_Check(cls)) {
            PyErr_Format(PyExc_TypeError, "classes_within: %s must hold classes", what);
            return -1;
        }
        out[k] = cls;
    }
    return n;
}

/* The allowed classes (and, with a name, the attribute's allowed classes and the layout slots)
 * classes_within checks items against. */
typedef struct {
    PyObject *allowed[8];
    Py_ssize_t n_allowed;
    int with_name;
    PyObject *name;
    PyObject *name_allowed[8];
    Py_ssize_t n_name_allowed;
    Py_ssize_t slot[8];
} ex_within;

/* Parses (allowed, name, name_allowed) into *w: 0, or -1 with an error set. */
static int
ex_within_load(ex_within *w, PyObject *allowed, PyObject *name, PyObject *name_allowed)
{
    w->n_allowed = ex_classes(allowed, w->allowed, "allowed");
    if (w->n_allowed < 0) return -1;
    w->n_name_allowed = 0;
    w->name = name;
    w->with_name = PyUnicode_CheckExact(name);
    if (w->with_name) {
        w->n_name_allowed = ex_classes(name_allowed, w->name_allowed, "name_allowed");
        if (w->n_name_allowed < 0) return -1;
        ex_layout_slots(w->allowed, w->n_allowed, name, w->slot);
    } else if (name != Py_None) {
        PyErr_SetString(PyExc_TypeError, "classes_within: name must be a str or None");
        return -1;
    }
    return 0;
}

#define EX_AHEAD 32

/* classes_within's verdict for items: 1 (True), 0 (False), -1 with an error set. */
static int
ex_items_within(PyObject *items, const ex_within *w)
{
    if (!PyTuple_CheckExact(items)) return 0;
    Py_ssize_t n = PyTuple_Size(items);
    if (n < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(items, i); /* borrowed; the tuple is immutable */
        if (item == NULL) return -1;
        /* Hints far enough ahead for a loop this short: at 10^6 the items lie scattered and
         * each is a miss (~125 ns) where an iteration takes a few ns, so only many misses in
         * flight keep it from waiting on each (EX_AHEAD items on; the attribute of the item
         * EX_AHEAD / 2 on, whose own line was asked for that many items ago). */
        if (i + EX_AHEAD < n) {
            PyObject *ahead = PyTuple_GetItem(items, i + EX_AHEAD);
            if (ahead != NULL) __builtin_prefetch(ahead);
        }
        if (w->with_name && i + EX_AHEAD / 2 < n) {
            /* (only its class and one slot are read) */
            PyObject *ahead = PyTuple_GetItem(items, i + EX_AHEAD / 2);
            Py_ssize_t at = ahead == NULL ? -1 : ex_class_at(ahead, w->allowed, w->n_allowed);
            if (at >= 0 && w->slot[at] >= 0) __builtin_prefetch(((mr_layout_object *)ahead)->fields[w->slot[at]]);
        }
        Py_ssize_t at = ex_class_at(item, w->allowed, w->n_allowed);
        if (at < 0) return 0;
        if (!w->with_name) continue;
        if (w->slot[at] >= 0) {
            /* the slot getattr reads (an exact class the layout check accepted) */
            PyObject *held = ((mr_layout_object *)item)->fields[w->slot[at]];
            if (held == NULL || !ex_class_in(held, w->name_allowed, w->n_name_allowed)) return 0;
            continue;
        }
        PyObject *value = PyObject_GetAttr(item, w->name);
        if (value == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            return 0;
        }
        int ok = ex_class_in(value, w->name_allowed, w->n_name_allowed);
        Py_DECREF(value);
        if (!ok) return 0;
    }
    return 1;
}

static PyObject *
ex_classes_within(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "classes_within expects 4 arguments (items, allowed, name, name_allowed)");
        return NULL;
    }
    if (!PyTuple_CheckExact(args[0])) Py_RETURN_FALSE;
    ex_within w;
    if (ex_within_load(&w, args[1], args[2], args[3]) < 0) return NULL;
    int rc = ex_items_within(args[0], &w);
    if (rc < 0) return NULL;
    return PyBool_FromLong(rc);
}

PyDoc_STRVAR(parts_members_within_doc,
"parts_members_within(parts, tensor_allowed, fragment_allowed, name, name_allowed)\n"
"--\n\n"
"For each item of parts (an exact tuple), in order: classes_within(part.tensors, tensor_allowed,\n"
"None, ()) and then classes_within(part.fragments, fragment_allowed, name, name_allowed); False\n"
"at the first that is False (or when a part lacks either attribute), else True. The caller\n"
"checked the parts' classes (their attribute reads run no Python code).");

static PyObject *
ex_parts_members_within(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "parts_members_within expects 5 arguments (parts, tensor_allowed, fragment_allowed, name, "
                        "name_allowed)");
        return NULL;
    }
    PyObject *parts = args[0];
    if (!PyTuple_CheckExact(parts)) {
        PyErr_SetString(PyExc_TypeError, "parts_members_within: parts must be a tuple");
        return NULL;
    }
    ex_within tensors_w, fragments_w;
    if (ex_within_load(&tensors_w, args[1], Py_None, NULL) < 0) return NULL;
    if (ex_within_load(&fragments_w, args[2], args[3], args[4]) < 0) return NULL;
    static PyObject *names[2]; /* interned once, kept for the process (as the other keys here) */
    static const char *const spelled[2] = {"tensors", "fragments"};
    for (int k = 0; k < 2; k++) {
        if (names[k] == NULL) {
            names[k] = PyUnicode_InternFromString(spelled[k]);
            if (names[k] == NULL) return NULL;
        }
    }
    const ex_within *checks[2] = {&tensors_w, &fragments_w};
    int rc = 1;
    Py_ssize_t n = PyTuple_Size(parts);
    if (n < 0) rc = -1;
    for (Py_ssize_t i = 0; rc == 1 && i < n; i++) {
        PyObject *part = PyTuple_GetItem(parts, i); /* borrowed; the tuple is immutable */
        if (part == NULL) {
            rc = -1;
            break;
        }
        for (int k = 0; rc == 1 && k < 2; k++) {
            PyObject *members = PyObject_GetAttr(part, names[k]);
            if (members == NULL) {
                if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
                    PyErr_Clear();
                    rc = 0;
                } else {
                    rc = -1;
                }
                break;
            }
            rc = ex_items_within(members, checks[k]);
            Py_DECREF(members);
        }
    }
    if (rc < 0) return NULL;
    return PyBool_FromLong(rc);
}


/* ---- inert_graph ---------------------------------------------------------------------------
 * Whether every object reachable from the roots is one whose reading, comparing and hashing runs
 * no Python code: None, bool, exact int / float / str / bytes, exact tuple / list / dict /
 * frozenset of such objects, or an instance of exactly one of the given package classes whose
 * state holds only such objects (a C layout's field slots, or an exact instance dict keyed by
 * exact strs), or of an opaque class (C-owned contents). The sealed gate (binding._sealed) needs
 * this beside the class checks: a str subclass stored in a frozen field with object.__setattr__,
 * or an instance dict replaced by a dict subclass, runs user code wherever the package compares
 * or hashes it (tests/test_audit23_sealed_gate.py).
 *
 * No Python code runs: types are compared by pointer, dicts are read with PyDict_Next, exact
 * frozensets iterated, and an instance dict is fetched only from an exact package class (whose
 * __dict__ descriptor is the generic one). Every object is walked once (pointer set; REVAL41:
 * until session 40 only dict-backed instances were, the rest each time it was reached), within a
 * work budget granted per dict-backed instance and per item of the roots and of the instances'
 * collections, so a forged fan-out ends the walk (False: not inert) instead of running long. */

#define IG_MAX_CLASSES 64
#define IG_GRANT 256 /* work units granted per dict-backed instance and collection item */
#define IG_SEEN_START 512 /* the pointer set's first capacity (a power of two) */

typedef struct {
    PyObject *cls;
    Py_ssize_t kind; /* >= 0: a layout with this many fields; -1: dict-backed; -2: opaque */
} ig_class;

typedef struct {
    PyObject **items;
    Py_ssize_t size;
    Py_ssize_t capacity;
} ig_stack;

/* Layout classes whose ``__basicsize__`` was found to hold a kind's fields, kept for the process
 * (held: the address stays theirs), so a call does not read the attribute again (~870
 * instructions a class, five classes a call). Only classes of metaclass exactly ``type``: their
 * ``__basicsize__`` is the type's own size, fixed when the class was created (a read-only
 * member); another metaclass could answer anything, so it is asked every time. */
#define IG_SIZED_MAX 16
static struct {
    PyObject *cls;
    Py_ssize_t kind;
} ig_sized[IG_SIZED_MAX];

/* 1 when cls was found large enough for at least ``kind`` fields, else 0. */
static int
ig_sized_known(PyObject *cls, Py_ssize_t kind)
{
    for (int k = 0; k < IG_SIZED_MAX && ig_sized[k].cls != NULL; k++) {
        if (ig_sized[k].cls == cls) return ig_sized[k].kind >= kind;
    }
    return 0;
}

/* Records that cls (its size just checked) holds ``kind`` fields; nothing when the table is full
 * or cls's metaclass is not exactly type. */
static void
ig_sized_add(PyObject *cls, Py_ssize_t kind)
{
    if (Py_TYPE(cls) != &PyType_Type) return;
    for (int k = 0; k < IG_SIZED_MAX; k++) {
        if (ig_sized[k].cls == cls) {
            if (ig_sized[k].kind < kind) ig_sized[k].kind = kind;
            return;
        }
        if (ig_sized[k].cls == NULL) {
            ig_sized[k].cls = Py_NewRef(cls);
            ig_sized[k].kind = kind;
            return;
        }
    }
}

typedef struct {
    uintptr_t *slots; /* 0: empty */
    size_t mask;
    size_t used;
} ig_set;

static int
ig_push(ig_stack *stack, PyObject *obj)
{
    if (stack->size == stack->capacity) {
        Py_ssize_t capacity = stack->capacity ? stack->capacity : 1024;
        if (capacity > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)sizeof(PyObject *)) {
            PyErr_NoMemory();
            return -1;
        }
        capacity *= 2;
        PyObject **items = PyMem_Realloc(stack->items, (size_t)capacity * sizeof(PyObject *));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        stack->items = items;
        stack->capacity = capacity;
    }
    stack->items[stack->size++] = obj;
    return 0;
}

static inline size_t
ig_hash(uintptr_t key, size_t mask)
{
    return (size_t)(((uint64_t)key >> 4) * UINT64_C(0x9E3779B97F4A7C15) >> 17) & mask;
}

/* 1 when key was added, 0 when it was there, -1 with an error set. */
static int
ig_add(ig_set *set, uintptr_t key)
{
    if ((set->used + 1) * 2 > set->mask + 1) {
        size_t capacity = (set->mask + 1) * 2;
        if (capacity > SIZE_MAX / sizeof(uintptr_t)) {
            PyErr_NoMemory();
            return -1;
        }
        uintptr_t *slots = PyMem_Calloc(capacity, sizeof(uintptr_t));
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        size_t mask = capacity - 1;
        for (size_t i = 0; i <= set->mask; i++) {
            uintptr_t old = set->slots[i];
            if (old == 0) continue;
            size_t j = ig_hash(old, mask);
            while (slots[j] != 0) j = (j + 1) & mask;
            slots[j] = old;
        }
        PyMem_Free(set->slots);
        set->slots = slots;
        set->mask = mask;
    }
    size_t j = ig_hash(key, set->mask);
    while (set->slots[j] != 0) {
        if (set->slots[j] == key) return 0;
        j = (j + 1) & set->mask;
    }
    set->slots[j] = key;
    set->used++;
    return 1;
}

static const ig_class *
ig_find(const ig_class *classes, Py_ssize_t n, PyObject *cls)
{
    for (Py_ssize_t k = 0; k < n; k++) {
        if (classes[k].cls == cls) return &classes[k];
    }
    return NULL;
}

/* The scalar classes compared by pointer, the most frequent first (exact int and str: most of a
 * record's values). */
static inline int
ig_scalar(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    return type == &PyLong_Type || type == &PyUnicode_Type || obj == Py_None || type == &PyBool_Type
           || type == &PyFloat_Type || type == &PyBytes_Type;
}

/* Pushes the items of an exact tuple or list (granting budget when grant), or of an exact dict
 * (keys and values) or frozenset; returns 1 when obj was such a collection, 0 when it is not, -1
 * with an error set. */
static int
ig_push_collection(ig_stack *stack, PyObject *obj, int grant, Py_ssize_t *budget)
{
    int is_tuple = PyTuple_CheckExact(obj);
    if (is_tuple || PyList_CheckExact(obj)) {
        Py_ssize_t n = is_tuple ? PyTuple_Size(obj) : PyList_Size(obj);
        if (n < 0) return -1;
        if (grant) *budget = n > (PY_SSIZE_T_MAX - *budget) / IG_GRANT ? PY_SSIZE_T_MAX : *budget + n * IG_GRANT;
        if (is_tuple) {
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *item = PyTuple_GetItem(obj, i);
                if (item == NULL) return -1;
                if (ig_scalar(item)) continue; /* most items: no push */
                if (ig_push(stack, item) < 0) return -1;
            }
            return 1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyList_GetItem(obj, i);
            if (item == NULL) return -1;
            if (ig_scalar(item)) continue;
            if (ig_push(stack, item) < 0) return -1;
        }
        return 1;
    }
    if (PyDict_CheckExact(obj)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(obj, &pos, &key, &value)) {
            if (!ig_scalar(key) && ig_push(stack, key) < 0) return -1;
            if (!ig_scalar(value) && ig_push(stack, value) < 0) return -1;
        }
        return 1;
    }
    if (PyFrozenSet_CheckExact(obj)) {
        PyObject *iterator = PyObject_GetIter(obj);
        if (iterator == NULL) return -1;
        PyObject *item;
        while ((item = PyIter_Next(iterator)) != NULL) {
            /* borrowed below: the frozenset holds it */
            int failed = !ig_scalar(item) && ig_push(stack, item) < 0;
            Py_DECREF(item);
            if (failed) {
                Py_DECREF(iterator);
                return -1;
            }
        }
        Py_DECREF(iterator);
        return PyErr_Occurred() ? -1 : 1;
    }
    return 0;
}

/* 1: inert; 0: not; -1: error set. */
static int
ig_walk(PyObject *roots, const ig_class *classes, Py_ssize_t n_classes, ig_stack *stack, ig_set *seen)
{
    Py_ssize_t budget = 0;
    if (ig_push_collection(stack, roots, 1, &budget) < 0) return -1;
    while (stack->size > 0) {
        /* only non-scalars are pushed (every push above and below tests ig_scalar first) */
        PyObject *obj = stack->items[--stack->size];
        if (--budget < 0) return 0;
        /* Each object is walked once (REVAL41): what it holds cannot change during the walk (no
         * code runs), so a second reach would only repeat the first one's verdict. A restore's
         * record reaches its shared ranks, fragments and tuples ~3 times each. */
        int added = ig_add(seen, (uintptr_t)obj);
        if (added < 0) return -1;
        if (!added) continue;
        int pushed = ig_push_collection(stack, obj, 0, &budget);
        if (pushed < 0) return -1;
        if (pushed) continue;
        const ig_class *cls = ig_find(classes, n_classes, (PyObject *)Py_TYPE(obj));
        if (cls == NULL) return 0;
        if (cls->kind == -2) continue;
        if (cls->kind >= 0) {
            PyObject **fields = ((mr_layout_object_view *)obj)->fields;
            for (Py_ssize_t i = 0; i < cls->kind; i++) {
                PyObject *value = fields[i];
                if (value == NULL) return 0; /* an unset slot: reading it raises */
                if (!ig_scalar(value) && ig_push(stack, value) < 0) return -1;
            }
            continue;
        }
        budget = budget > PY_SSIZE_T_MAX - IG_GRANT ? PY_SSIZE_T_MAX : budget + IG_GRANT;
        PyObject *state = PyObject_GenericGetDict(obj, NULL);
        if (state == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            return 0;
        }
        int ok = PyDict_CheckExact(state);
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (ok && PyDict_Next(state, &pos, &key, &value)) {
            if (!PyUnicode_CheckExact(key)) {
                ok = 0;
                break;
            }
            if (ig_scalar(value)) continue;
            /* the instance's own collections are granted budget per item */
            if (PyTuple_CheckExact(value) || PyList_CheckExact(value)) {
                if (ig_push_collection(stack, value, 1, &budget) < 0) {
                    Py_DECREF(state);
                    return -1;
                }
                continue;
            }
            if (ig_push(stack, value) < 0) {
                Py_DECREF(state);
                return -1;
            }
        }
        /* the instance holds its dict, and no code runs during the walk: the borrowed items
         * pushed above stay alive */
        Py_DECREF(state);
        if (!ok) return 0;
    }
    return 1;
}

PyDoc_STRVAR(inert_graph_doc,
"inert_graph(roots, classes)\n"
"--\n\n"
"True when every object reachable from roots (an exact tuple) is None, a bool, an exact int,\n"
"float, str or bytes, an exact tuple, list, dict or frozenset of such objects, or an instance of\n"
"exactly one class of classes (a tuple of (class, kind) pairs; kind >= 0: a C layout with that\n"
"many fields, whose slots are walked; -1: dict-backed, whose instance dict must be an exact dict\n"
"keyed by exact strs, its values walked; -2: opaque, accepted as is). False otherwise, also when\n"
"the walk exceeds its work budget (a forged fan-out). Each object is walked once. Runs no Python\n"
"code.");

static PyObject *
ex_inert_graph(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "inert_graph expects 2 arguments (roots, classes)");
        return NULL;
    }
    PyObject *roots = args[0];
    PyObject *spec = args[1];
    if (!PyTuple_CheckExact(roots) || !PyTuple_CheckExact(spec)) {
        PyErr_SetString(PyExc_TypeError, "inert_graph: roots and classes must be tuples");
        return NULL;
    }
    Py_ssize_t n_classes = PyTuple_Size(spec);
    if (n_classes < 0) return NULL;
    if (n_classes > IG_MAX_CLASSES) {
        PyErr_Format(PyExc_ValueError, "inert_graph: at most %d classes", IG_MAX_CLASSES);
        return NULL;
    }
    ig_class classes[IG_MAX_CLASSES];
    for (Py_ssize_t k = 0; k < n_classes; k++) {
        PyObject *pair = PyTuple_GetItem(spec, k);
        if (pair == NULL) return NULL;
        if (!PyTuple_CheckExact(pair) || PyTuple_Size(pair) != 2 || !PyType_Check(PyTuple_GetItem(pair, 0))
            || !PyLong_CheckExact(PyTuple_GetItem(pair, 1))) {
            PyErr_SetString(PyExc_TypeError, "inert_graph: classes must hold (class, kind) pairs");
            return NULL;
        }
        Py_ssize_t kind = PyLong_AsSsize_t(PyTuple_GetItem(pair, 1));
        if (kind == -1 && PyErr_Occurred()) return NULL;
        if (kind < -2 || kind > MR_LAYOUT_MAX_FIELDS) {
            PyErr_SetString(PyExc_ValueError, "inert_graph: a kind must be -2, -1 or a field count");
            return NULL;
        }
        PyObject *cls = PyTuple_GetItem(pair, 0);
        if (kind >= 0 && !ig_sized_known(cls, kind)) {
            /* the slots read must lie inside the instance */
            PyObject *size_obj = PyObject_GetAttrString(cls, "__basicsize__");
            if (size_obj == NULL) return NULL;
            Py_ssize_t basicsize = PyLong_AsSsize_t(size_obj);
            Py_DECREF(size_obj);
            if (basicsize == -1 && PyErr_Occurred()) return NULL;
            if ((size_t)basicsize < sizeof(PyObject) + (size_t)kind * sizeof(PyObject *)) {
                PyErr_SetString(PyExc_ValueError, "inert_graph: a layout class is smaller than its field count");
                return NULL;
            }
            ig_sized_add(cls, kind);
        }
        classes[k].cls = cls;
        classes[k].kind = kind;
    }
    ig_stack stack = {NULL, 0, 0};
    /* small at first (a restore's record holds about 200 distinct objects); ig_add grows it */
    ig_set seen = {NULL, IG_SEEN_START - 1, 0};
    seen.slots = PyMem_Calloc(IG_SEEN_START, sizeof(uintptr_t));
    if (seen.slots == NULL) return PyErr_NoMemory();
    int result = ig_walk(roots, classes, n_classes, &stack, &seen);
    PyMem_Free(stack.items);
    PyMem_Free(seen.slots);
    if (result < 0) return NULL;
    return PyBool_FromLong(result);
}

/* ---- CodeSet, CodeWatch -------------------------------------------------------------------
 * A large bind call is sealed (binding._sealed) when no code but the package's ran during it.
 * Checking every value it reads for inertness (inert_graph) costs in proportion to the
 * fragments, while the Python frames a sealed call runs are few (its Python layer works per
 * part and binding, the per-fragment loops are C): a CodeWatch, installed with sys.setprofile
 * for the call, sees every Python frame that starts in this thread (a subclass's __eq__ or
 * __hash__, a dict subclass's get, an audit hook written in Python, a generator resumed) and
 * trips on the first whose code object is not one of the package's (a CodeSet, collected once
 * from the package's modules and classes). Other events (C calls, returns) are ignored. */

typedef struct {
    PyObject_HEAD
    PyObject *codes;  /* the tuple of code objects (holds them: their addresses stay unique) */
    uintptr_t *slots; /* open addressing over their addresses; 0: empty */
    size_t mask;
    PyObject *files;       /* a list holding their co_filename objects but "<...>" ones */
    uintptr_t *file_slots; /* open addressing over those objects' addresses */
    size_t file_mask;
} cs_object;

typedef struct {
    PyObject_HEAD
    PyObject *set;     /* a CodeSet */
    PyObject *tripper; /* the first foreign code object seen, or NULL */
    int tripped;
} cw_object;

static PyObject *cs_type;
static PyObject *cw_type;
static PyObject *cw_frame_type; /* type(sys._getframe()) */
static PyObject *cw_code_type;  /* type(sys._getframe().f_code) */

static int
cs_probe(const uintptr_t *slots, size_t mask, uintptr_t key)
{
    size_t j = ig_hash(key, mask);
    while (slots[j] != 0) {
        if (slots[j] == key) return 1;
        j = (j + 1) & mask;
    }
    return 0;
}

/* Adds key unless there; slots has room (sized for every key at most half full). */
static void
cs_insert(uintptr_t *slots, size_t mask, uintptr_t key)
{
    size_t j = ig_hash(key, mask);
    while (slots[j] != 0 && slots[j] != key) j = (j + 1) & mask;
    slots[j] = key;
}

/* 1 when code is one of the set's, or was compiled from the same file object as one of them
 * (a function the set was collected without, e.g. monkeypatched out at the time); 0 if not;
 * -1 with an error set. */
static int
cs_contains(const cs_object *set, PyObject *code)
{
    if (cs_probe(set->slots, set->mask, (uintptr_t)code)) return 1;
    PyObject *file = PyObject_GetAttrString(code, "co_filename");
    if (file == NULL) return -1;
    int found = cs_probe(set->file_slots, set->file_mask, (uintptr_t)file);
    Py_DECREF(file);
    return found;
}

/* The capacity (a power of two) that keeps n keys at most half full, or 0 on overflow. */
static size_t
cs_capacity(Py_ssize_t n)
{
    size_t capacity = 64;
    while (capacity < (size_t)n * 2 + 2) {
        if (capacity > SIZE_MAX / 2 / sizeof(uintptr_t)) return 0;
        capacity *= 2;
    }
    return capacity;
}

static PyObject *
cs_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *codes;
    if (kwds != NULL && PyDict_Size(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "CodeSet takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "CodeSet", 1, 1, &codes)) return NULL;
    if (!PyTuple_CheckExact(codes)) {
        PyErr_SetString(PyExc_TypeError, "CodeSet: codes must be a tuple of code objects");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(codes);
    if (n < 0) return NULL;
    size_t capacity = cs_capacity(n);
    if (capacity == 0) return PyErr_NoMemory();
    uintptr_t *slots = PyMem_Calloc(capacity, sizeof(uintptr_t));
    uintptr_t *file_slots = PyMem_Calloc(capacity, sizeof(uintptr_t));
    PyObject *files = PyList_New(0);
    if (slots == NULL || file_slots == NULL || files == NULL) {
        if (files != NULL || !PyErr_Occurred()) PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *code = PyTuple_GetItem(codes, i);
        if (code == NULL) goto fail;
        if (!Py_IS_TYPE(code, (PyTypeObject *)cw_code_type)) {
            PyErr_SetString(PyExc_TypeError, "CodeSet: codes must be a tuple of code objects");
            goto fail;
        }
        cs_insert(slots, capacity - 1, (uintptr_t)code);
        PyObject *file = PyObject_GetAttrString(code, "co_filename");
        if (file == NULL) goto fail;
        /* generated code ("<string>": dataclass methods) only by its own code object */
        int generated = !PyUnicode_CheckExact(file) || PyUnicode_GetLength(file) == 0
                        || PyUnicode_ReadChar(file, 0) == '<';
        if (!generated && !cs_probe(file_slots, capacity - 1, (uintptr_t)file)) {
            if (PyList_Append(files, file) < 0) {
                Py_DECREF(file);
                goto fail;
            }
            cs_insert(file_slots, capacity - 1, (uintptr_t)file);
        }
        Py_DECREF(file);
        if (PyErr_Occurred()) goto fail;
    }
    cs_object *self = (cs_object *)PyType_GenericAlloc(type, 0);
    if (self == NULL) goto fail;
    self->codes = Py_NewRef(codes);
    self->slots = slots;
    self->mask = capacity - 1;
    self->files = files;
    self->file_slots = file_slots;
    self->file_mask = capacity - 1;
    return (PyObject *)self;
fail:
    PyMem_Free(slots);
    PyMem_Free(file_slots);
    Py_XDECREF(files);
    return NULL;
}

static void
cs_dealloc(PyObject *obj)
{
    cs_object *self = (cs_object *)obj;
    PyTypeObject *type = Py_TYPE(obj);
    Py_CLEAR(self->codes);
    Py_CLEAR(self->files);
    PyMem_Free(self->slots);
    PyMem_Free(self->file_slots);
    self->slots = NULL;
    self->file_slots = NULL;
    freefunc free_slot = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_slot(obj);
    Py_DECREF(type);
}

static int
cs_sq_contains(PyObject *obj, PyObject *code)
{
    if (!Py_IS_TYPE(code, (PyTypeObject *)cw_code_type)) return 0;
    return cs_contains((cs_object *)obj, code);
}

static Py_ssize_t
cs_length(PyObject *obj)
{
    return PyTuple_Size(((cs_object *)obj)->codes);
}

static PyType_Slot cs_slots[] = {
    {Py_tp_new, cs_new},
    {Py_tp_dealloc, cs_dealloc},
    {Py_sq_contains, cs_sq_contains},
    {Py_sq_length, cs_length},
    {Py_tp_doc, "CodeSet(codes)\n--\n\nA fixed set of code objects (a tuple), held, looked up by address."},
    {0, NULL},
};

static PyType_Spec cs_spec = {
    .name = "mooncake.reshard._native.CodeSet",
    .basicsize = sizeof(cs_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = cs_slots,
};

static PyObject *
cw_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *set;
    if (kwds != NULL && PyDict_Size(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "CodeWatch takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "CodeWatch", 1, 1, &set)) return NULL;
    if (!Py_IS_TYPE(set, (PyTypeObject *)cs_type)) {
        PyErr_SetString(PyExc_TypeError, "CodeWatch: expects a CodeSet");
        return NULL;
    }
    cw_object *self = (cw_object *)PyType_GenericAlloc(type, 0);
    if (self == NULL) return NULL;
    self->set = Py_NewRef(set);
    self->tripper = NULL;
    self->tripped = 0;
    return (PyObject *)self;
}

static void
cw_dealloc(PyObject *obj)
{
    cw_object *self = (cw_object *)obj;
    PyTypeObject *type = Py_TYPE(obj);
    Py_CLEAR(self->set);
    Py_CLEAR(self->tripper);
    freefunc free_slot = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_slot(obj);
    Py_DECREF(type);
}

/* The profile function: (frame, event, arg). */
static PyObject *
cw_call(PyObject *obj, PyObject *args, PyObject *kwds)
{
    cw_object *self = (cw_object *)obj;
    if ((kwds != NULL && PyDict_Size(kwds) != 0) || !PyTuple_CheckExact(args) || PyTuple_Size(args) != 3) {
        PyErr_SetString(PyExc_TypeError, "CodeWatch expects (frame, event, arg)");
        return NULL;
    }
    PyObject *frame = PyTuple_GetItem(args, 0);
    PyObject *event = PyTuple_GetItem(args, 1);
    if (frame == NULL || event == NULL) return NULL;
    if (!PyUnicode_CheckExact(event)) {
        PyErr_SetString(PyExc_TypeError, "CodeWatch: event must be a str");
        return NULL;
    }
    if (PyUnicode_CompareWithASCIIString(event, "call") != 0) Py_RETURN_NONE;
    if (!Py_IS_TYPE(frame, (PyTypeObject *)cw_frame_type)) {
        PyErr_SetString(PyExc_TypeError, "CodeWatch: a call event's frame must be a frame");
        return NULL;
    }
    PyCodeObject *code = PyFrame_GetCode((PyFrameObject *)frame);
    if (code == NULL) return NULL;
    int known = self->tripped ? 1 : cs_contains((cs_object *)self->set, (PyObject *)code);
    if (known < 0) {
        Py_DECREF(code);
        return NULL;
    }
    if (!known) {
        self->tripped = 1;
        self->tripper = (PyObject *)code; /* the reference PyFrame_GetCode returned */
        Py_RETURN_NONE;
    }
    Py_DECREF(code);
    Py_RETURN_NONE;
}

static PyObject *
cw_get_tripped(PyObject *obj, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((cw_object *)obj)->tripped);
}

static PyObject *
cw_get_tripper(PyObject *obj, void *Py_UNUSED(closure))
{
    PyObject *tripper = ((cw_object *)obj)->tripper;
    return Py_NewRef(tripper != NULL ? tripper : Py_None);
}

static PyGetSetDef cw_getset[] = {
    {"tripped", cw_get_tripped, NULL, "Whether a frame of code outside the set started since creation.", NULL},
    {"tripper", cw_get_tripper, NULL, "The code object of the first such frame, or None (diagnostics).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot cw_slots[] = {
    {Py_tp_new, cw_new},
    {Py_tp_dealloc, cw_dealloc},
    {Py_tp_call, cw_call},
    {Py_tp_getset, cw_getset},
    {Py_tp_doc, "CodeWatch(code_set)\n--\n\nA profile function (sys.setprofile) that trips on the first Python frame whose code is not in code_set."},
    {0, NULL},
};

static PyType_Spec cw_spec = {
    .name = "mooncake.reshard._native.CodeWatch",
    .basicsize = sizeof(cw_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = cw_slots,
};

PyDoc_STRVAR(part_index_exact_doc,
"part_index_exact(parts, index, part_class)\n"
"--\n\n"
"True when index is exactly the parts keyed by participant id: parts an exact tuple of objects of\n"
"class exactly part_class, each with a plain instance dict (exact str keys) holding an exact str\n"
"participant_id; index an exact dict of exact str keys with one entry per part, each id naming\n"
"its own part object. False otherwise. Runs no Python code (placement.part_index_matches is its\n"
"oracle in the tests).");

static PyObject *ex_participant_id_key; /* interned "participant_id", kept for the process */

/* 1 when parts[i]'s id names parts[i] in index, 0 when not, -1 on error. */
static int
ex_part_indexed(PyObject *part, PyObject *index, PyObject *part_class)
{
    if ((PyObject *)Py_TYPE(part) != part_class) return 0;
    PyObject *state = PyObject_GenericGetDict(part, NULL);
    if (state == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    int found = 0;
    PyObject *id = NULL;
    /* (the id taken in the walk that checks the keys: pd_plain_values; an equal key that is not
     * the interned name itself is looked up) */
    if (pd_plain_values(state, &ex_participant_id_key, NULL, 1, &id)) {
        /* plain keys on both sides: the probes compare exact strs only */
        if (id == NULL) id = PyDict_GetItemWithError(state, ex_participant_id_key); /* borrowed */
        if (id != NULL && PyUnicode_CheckExact(id)) {
            PyObject *named = PyDict_GetItemWithError(index, id); /* borrowed */
            found = named == part;
        }
        if (PyErr_Occurred()) found = -1;
    }
    Py_DECREF(state);
    return found;
}

static int
ex_pointer_order(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(PyObject *const *)a, y = (uintptr_t)*(PyObject *const *)b;
    return (x > y) - (x < y);
}

/* 1 when the n entries of index (an exact dict of exact str keys, n of them), in its order, are
 * parts[i]'s own id mapped to parts[i], with every part of exactly part_class and a plain
 * instance dict; 0 otherwise (the caller's full check decides), -1 on error. The index the
 * placement builds (``{part.participant_id: part for part in parts}``) is in that order, so the
 * common case needs no probe of index and no sort: each id names its own part (the entry holding
 * an equal key holds that part), and the keys of a dict are distinct, so the ids are distinct and
 * the parts distinct objects (one object read twice gives one id). Exactly what the full check
 * accepts then. No Python code runs (exact str comparisons). */
static int
ex_part_index_in_order(PyObject *parts, PyObject *index, PyObject *part_class, Py_ssize_t n)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyDict_Next(index, &pos, &key, &value)) return 0;
        PyObject *part = PyTuple_GetItem(parts, i); /* borrowed; in range of an exact tuple */
        if (part == NULL) return -1;
        if (value != part || (PyObject *)Py_TYPE(part) != part_class) return 0;
        PyObject *state = PyObject_GenericGetDict(part, NULL);
        if (state == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            return 0;
        }
        int same = 0;
        PyObject *id = NULL;
        /* (taken in the walk that checks the keys, as in ex_part_indexed) */
        if (pd_plain_values(state, &ex_participant_id_key, NULL, 1, &id)) {
            if (id == NULL) id = PyDict_GetItemWithError(state, ex_participant_id_key); /* borrowed */
            if (id != NULL && PyUnicode_CheckExact(id)) {
                /* (key: an exact str, pd_plain_keys(index)) */
                same = id == key || PyUnicode_Compare(id, key) == 0;
            }
            if (PyErr_Occurred()) same = -1;
        }
        Py_DECREF(state);
        if (same != 1) return same;
    }
    return 1;
}

int
mr_part_index_exact(PyObject *parts, PyObject *index, PyObject *part_class)
{
    if (!PyTuple_CheckExact(parts) || !PyDict_CheckExact(index)) return 0;
    Py_ssize_t n = PyTuple_Size(parts);
    if (n < 0) return -1;
    if (PyDict_Size(index) != n || !pd_plain_keys(index)) return 0;
    if (ex_participant_id_key == NULL) {
        ex_participant_id_key = PyUnicode_InternFromString("participant_id");
        if (ex_participant_id_key == NULL) return -1;
    }
    /* Each part named by its own id, and the parts distinct objects (then their ids are distinct:
     * one key names one object), so the n entries are the parts and nothing else. A part listed
     * twice is refused (the dict built from such parts has fewer entries). No Python code runs
     * in the loop, so the borrowed items stay. */
    int in_order = ex_part_index_in_order(parts, index, part_class, n);
    if (in_order != 0) return in_order;
    if ((size_t)n > SIZE_MAX / sizeof(PyObject *)) return 0;
    PyObject **seen = PyMem_Malloc(n > 0 ? (size_t)n * sizeof(PyObject *) : 1);
    if (seen == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int result = 1;
    for (Py_ssize_t i = 0; i < n && result == 1; i++) {
        seen[i] = PyTuple_GetItem(parts, i);
        result = ex_part_indexed(seen[i], index, part_class);
    }
    if (result == 1 && n > 1) {
        qsort(seen, (size_t)n, sizeof(PyObject *), ex_pointer_order);
        for (Py_ssize_t i = 1; i < n && result == 1; i++) {
            if (seen[i] == seen[i - 1]) result = 0;
        }
    }
    PyMem_Free(seen);
    return result;
}

static PyObject *
ex_part_index_exact(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "part_index_exact expects (parts, index, part_class)");
        return NULL;
    }
    if (!PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "part_index_exact: part_class must be a class");
        return NULL;
    }
    int result = mr_part_index_exact(args[0], args[1], args[2]);
    if (result < 0) return NULL;
    return PyBool_FromLong(result);
}

PyDoc_STRVAR(part_ranks_exact_doc,
"part_ranks_exact(parts, part_class, fragment_class, rank_class)\n"
"--\n\n"
"True when every fragment of every part has its part's rank: parts an exact tuple of objects of\n"
"class exactly part_class, each with a plain instance dict holding a rank of class exactly\n"
"rank_class and an exact tuple of fragments, each of class exactly fragment_class in\n"
"PlacementFragment's C-owned layout, whose rank is the part's rank object itself or another\n"
"rank_class instance whose dp, tp, pp and ep (plain instance dicts) are exact ints equal to the\n"
"part rank's. False otherwise. Runs no Python code (the sealed bind's side-check skip:\n"
"bound_contracts._sealed_side_holds).");

/* interned "rank", "fragments", "dp", "tp", "pp", "ep", kept for the process */
static PyObject *ex_rank_keys[6];

/* 1 when rank (exactly rank_class) has a plain instance dict whose four fields are exact ints
 * equal to those of part_rank (also exactly rank_class, plain), else 0; -1 with an error. */
static int
ex_rank_fields_equal(PyObject *rank, PyObject *part_rank, PyObject *rank_class)
{
    if ((PyObject *)Py_TYPE(rank) != rank_class || (PyObject *)Py_TYPE(part_rank) != rank_class) return 0;
    PyObject *a = PyObject_GenericGetDict(rank, NULL), *b = a == NULL ? NULL : PyObject_GenericGetDict(part_rank, NULL);
    int equal = a != NULL && b != NULL && pd_plain_keys(a) && pd_plain_keys(b);
    for (int k = 2; equal == 1 && k < 6; k++) {
        PyObject *x = PyDict_GetItemWithError(a, ex_rank_keys[k]), *y = PyDict_GetItemWithError(b, ex_rank_keys[k]);
        if (x == NULL || y == NULL || !PyLong_CheckExact(x) || !PyLong_CheckExact(y)) equal = 0;
        else equal = PyObject_RichCompareBool(x, y, Py_EQ); /* exact ints: no Python code */
    }
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear(); /* (no instance dict: not a plain rank) */
        return 0;
    }
    return equal;
}

/* 1 when every fragment of part has the part's rank (see the doc), 0 when not, -1 on error. */
static int
ex_part_ranks(PyObject *part, PyObject *part_class, PyObject *fragment_class, PyObject *rank_class)
{
    if ((PyObject *)Py_TYPE(part) != part_class) return 0;
    PyObject *state = PyObject_GenericGetDict(part, NULL);
    if (state == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    int holds = 0;
    if (pd_plain_keys(state)) {
        /* borrowed from the part's dict (held: no Python code runs below) */
        PyObject *rank = PyDict_GetItemWithError(state, ex_rank_keys[0]);
        PyObject *fragments = rank == NULL ? NULL : PyDict_GetItemWithError(state, ex_rank_keys[1]);
        holds = fragments != NULL && (PyObject *)Py_TYPE(rank) == rank_class && PyTuple_CheckExact(fragments);
        Py_ssize_t n = holds ? PyTuple_Size(fragments) : 0;
        for (Py_ssize_t i = 0; holds == 1 && i < n; i++) {
            PyObject *fragment = PyTuple_GetItem(fragments, i);
            PyObject *const *fields = (PyObject *)Py_TYPE(fragment) == fragment_class ? mr_pf_fields(fragment) : NULL;
            PyObject *own = fields == NULL ? NULL : fields[MR_PF_RANK];
            holds = own == NULL ? 0 : own == rank ? 1 : ex_rank_fields_equal(own, rank, rank_class);
        }
    }
    Py_DECREF(state);
    if (holds == 0 && PyErr_Occurred()) holds = -1;
    return holds;
}

static PyObject *
ex_part_ranks_exact(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "part_ranks_exact expects (parts, part_class, fragment_class, rank_class)");
        return NULL;
    }
    PyObject *parts = args[0];
    for (int k = 1; k < 4; k++) {
        if (!PyType_Check(args[k])) {
            PyErr_SetString(PyExc_TypeError, "part_ranks_exact: the classes must be classes");
            return NULL;
        }
    }
    if (ex_rank_keys[5] == NULL) { /* (filled in order: the last one set means all are) */
        static const char *const names[6] = {"rank", "fragments", "dp", "tp", "pp", "ep"};
        for (int k = 0; k < 6; k++) {
            if (ex_rank_keys[k] == NULL) ex_rank_keys[k] = PyUnicode_InternFromString(names[k]);
            if (ex_rank_keys[k] == NULL) return NULL;
        }
    }
    if (!PyTuple_CheckExact(parts)) Py_RETURN_FALSE;
    /* parts is the caller's argument (held by it); no Python code runs in the loop */
    int result = 1;
    for (Py_ssize_t i = 0; i < PyTuple_Size(parts) && result == 1; i++) {
        result = ex_part_ranks(PyTuple_GetItem(parts, i), args[1], args[2], args[3]);
    }
    if (result < 0) return NULL;
    return PyBool_FromLong(result);
}

PyDoc_STRVAR(plain_executor_keys_doc,
"plain_executor_keys(executors, executor_class, rank_class)\n"
"--\n\n"
"True when executors is an exact tuple of objects of class exactly executor_class, each with a\n"
"plain instance dict (exact str keys) holding an exact str placement_id and participant_id, an\n"
"exact tuple of exact str placement_fragment_ids and a rank of class exactly rank_class whose\n"
"plain instance dict holds exact int dp, tp, pp and ep; and the keys (placement_id,\n"
"participant_id, (dp, tp, pp, ep), placement_fragment_ids) are distinct. False otherwise. Runs no\n"
"Python code (validation._target_checks_accepted: the plan's executor views cannot fail to\n"
"build; the tests hold the rule-by-rule oracle).");

/* interned "placement_id", "participant_id", "placement_fragment_ids", "rank", "dp", "tp", "pp",
 * "ep", kept for the process */
static PyObject *ex_executor_keys[8];

/* An executor's key fields, borrowed from its instance dict and its rank's (held by the executor:
 * no Python code runs while they are used). */
typedef struct {
    PyObject *placement_id, *participant_id, *ids, *rank[4];
    Py_hash_t participant_hash;
} ex_executor_key;

/* 1 when executor's fields are plain (the doc), filling key; 0 when not; -1 with an error. */
static int
ex_executor_key_read(PyObject *executor, PyObject *executor_class, PyObject *rank_class, ex_executor_key *key)
{
    if ((PyObject *)Py_TYPE(executor) != executor_class) return 0;
    PyObject *state = PyObject_GenericGetDict(executor, NULL);
    if (state == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    /* (the executor keeps its instance dict, and the dict its values: borrowed below) */
    Py_DECREF(state);
    if (!pd_plain_keys(state)) return 0;
    PyObject *fields[4];
    for (int k = 0; k < 4; k++) {
        fields[k] = PyDict_GetItemWithError(state, ex_executor_keys[k]);
        if (fields[k] == NULL) return PyErr_Occurred() ? -1 : 0;
    }
    key->placement_id = fields[0];
    key->participant_id = fields[1];
    key->ids = fields[2];
    if (!PyUnicode_CheckExact(fields[0]) || !PyUnicode_CheckExact(fields[1]) || !PyTuple_CheckExact(fields[2])) {
        return 0;
    }
    if ((PyObject *)Py_TYPE(fields[3]) != rank_class) return 0;
    PyObject *rank_state = PyObject_GenericGetDict(fields[3], NULL);
    if (rank_state == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(rank_state); /* (kept by the rank) */
    if (!pd_plain_keys(rank_state)) return 0;
    for (int k = 0; k < 4; k++) {
        key->rank[k] = PyDict_GetItemWithError(rank_state, ex_executor_keys[4 + k]);
        if (key->rank[k] == NULL) return PyErr_Occurred() ? -1 : 0;
        if (!PyLong_CheckExact(key->rank[k])) return 0; /* (bool is not exactly int) */
    }
    Py_ssize_t n = PyTuple_Size(key->ids);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyTuple_GetItem(key->ids, i); /* (in range of an exact tuple) */
        if (id == NULL) return -1;
        if (!PyUnicode_CheckExact(id)) return 0;
    }
    key->participant_hash = PyObject_Hash(key->participant_id); /* (exact str) */
    return key->participant_hash == -1 ? -1 : 1;
}

static int
ex_executor_key_order(const void *a, const void *b)
{
    Py_hash_t x = ((const ex_executor_key *)a)->participant_hash, y = ((const ex_executor_key *)b)->participant_hash;
    return (x > y) - (x < y);
}

/* 1 when the two keys are equal, 0 when not, -1 with an error. Exact strs, ints and tuples of
 * exact strs: the comparisons run no Python code. */
static int
ex_executor_keys_equal(const ex_executor_key *a, const ex_executor_key *b)
{
    PyObject *const pairs[6][2] = {
        {a->participant_id, b->participant_id}, {a->placement_id, b->placement_id}, {a->rank[0], b->rank[0]},
        {a->rank[1], b->rank[1]}, {a->rank[2], b->rank[2]}, {a->rank[3], b->rank[3]},
    };
    for (int k = 0; k < 6; k++) {
        int equal = PyObject_RichCompareBool(pairs[k][0], pairs[k][1], Py_EQ);
        if (equal != 1) return equal;
    }
    return PyObject_RichCompareBool(a->ids, b->ids, Py_EQ);
}

static PyObject *
ex_plain_executor_keys(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "plain_executor_keys expects (executors, executor_class, rank_class)");
        return NULL;
    }
    if (!PyType_Check(args[1]) || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "plain_executor_keys: the classes must be classes");
        return NULL;
    }
    if (ex_executor_keys[7] == NULL) { /* (filled in order: the last one set means all are) */
        static const char *const names[8] = {
            "placement_id", "participant_id", "placement_fragment_ids", "rank", "dp", "tp", "pp", "ep",
        };
        for (int k = 0; k < 8; k++) {
            if (ex_executor_keys[k] == NULL) ex_executor_keys[k] = PyUnicode_InternFromString(names[k]);
            if (ex_executor_keys[k] == NULL) return NULL;
        }
    }
    PyObject *executors = args[0];
    if (!PyTuple_CheckExact(executors)) Py_RETURN_FALSE;
    Py_ssize_t n = PyTuple_Size(executors);
    if (n < 0) return NULL;
    if ((size_t)n > SIZE_MAX / sizeof(ex_executor_key)) return PyErr_NoMemory();
    ex_executor_key *keys = PyMem_Malloc(n > 0 ? (size_t)n * sizeof(ex_executor_key) : 1);
    if (keys == NULL) return PyErr_NoMemory();
    /* executors is the caller's argument (held by it); no Python code runs below, so the borrowed
     * fields stay. Distinct keys: sorted by their participant id's hash, only keys in one run of
     * equal hashes can be equal (then compared in full; distinct ids, the usual case, are
     * decided by the hash or the id). The ids' strs are read once, not hashed as the tuple key
     * would hash them. */
    int result = 1;
    for (Py_ssize_t i = 0; i < n && result == 1; i++) {
        PyObject *executor = PyTuple_GetItem(executors, i);
        result = executor == NULL ? -1 : ex_executor_key_read(executor, args[1], args[2], &keys[i]);
    }
    if (result == 1 && n > 1) qsort(keys, (size_t)n, sizeof(ex_executor_key), ex_executor_key_order);
    for (Py_ssize_t i = 0; i < n && result == 1; i++) {
        for (Py_ssize_t j = i + 1; j < n && result == 1 && keys[j].participant_hash == keys[i].participant_hash; j++) {
            int equal = ex_executor_keys_equal(&keys[i], &keys[j]);
            result = equal < 0 ? -1 : !equal;
        }
    }
    PyMem_Free(keys);
    if (result < 0) return NULL;
    return PyBool_FromLong(result);
}

PyDoc_STRVAR(tensor_maps_match_doc,
"tensor_maps_match(tensors, groups, descriptor_class)\n"
"--\n\n"
"True when {t.tensor_id: t for t in tensors} has no two descriptors with one id and equals\n"
"{t.tensor_id: t for group in groups for t in group}, shown by identity: tensors an exact tuple\n"
"of objects of class exactly descriptor_class, each with a plain instance dict holding an exact\n"
"str tensor_id, the ids distinct; groups an exact tuple of exact tuples whose items are all\n"
"objects of tensors, every one of them listed at least once. None otherwise (binding's step 4\n"
"then builds and compares the two dicts, and raises its error). Runs no Python code.");

static PyObject *ex_tensor_id_key; /* interned "tensor_id", kept for the process */

/* A slot of tensor_maps_match's table of the tensors by object address. */
typedef struct {
    PyObject *tensor; /* borrowed (an item of tensors), NULL: empty */
    int seen;         /* listed in a group */
} ex_tensor_slot;

/* 1 when the ids of tensors (exact class, plain instance dicts, exact str ids) are distinct, 0
 * when not or not plain, -1 with an error. */
static int
ex_tensor_ids_distinct(PyObject *tensors, Py_ssize_t n, PyObject *descriptor_class)
{
    PyObject *ids = PySet_New(NULL);
    if (ids == NULL) return -1;
    int result = 1;
    for (Py_ssize_t i = 0; i < n && result == 1; i++) {
        PyObject *tensor = PyTuple_GetItem(tensors, i);
        if (tensor == NULL) {
            result = -1;
            break;
        }
        if ((PyObject *)Py_TYPE(tensor) != descriptor_class) {
            result = 0;
            break;
        }
        PyObject *state = PyObject_GenericGetDict(tensor, NULL);
        if (state == NULL) {
            result = PyErr_ExceptionMatches(PyExc_AttributeError) ? 0 : -1;
            if (result == 0) PyErr_Clear();
            break;
        }
        Py_DECREF(state); /* (kept by the tensor, as its id by the dict: no Python code runs) */
        PyObject *id = pd_plain_keys(state) ? PyDict_GetItemWithError(state, ex_tensor_id_key) : NULL;
        if (id == NULL) {
            result = PyErr_Occurred() ? -1 : 0;
        } else if (!PyUnicode_CheckExact(id)) {
            result = 0;
        } else if (PySet_Add(ids, id) < 0) { /* (an exact str: hashing and comparing run no code) */
            result = -1;
        }
    }
    if (result == 1 && PySet_Size(ids) != n) result = 0; /* two tensors with one id */
    Py_DECREF(ids);
    return result;
}

static PyObject *
ex_tensor_maps_match(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "tensor_maps_match expects (tensors, groups, descriptor_class)");
        return NULL;
    }
    if (!PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "tensor_maps_match: descriptor_class must be a class");
        return NULL;
    }
    if (ex_tensor_id_key == NULL) {
        ex_tensor_id_key = PyUnicode_InternFromString("tensor_id");
        if (ex_tensor_id_key == NULL) return NULL;
    }
    PyObject *tensors = args[0], *groups = args[1];
    if (!PyTuple_CheckExact(tensors) || !PyTuple_CheckExact(groups)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_Size(tensors);
    if (n < 0) return NULL;
    /* Both dicts map an id to the one tensor of tensors that has it (ids distinct; a group item
     * is one of those objects, so its id is that tensor's id): they are equal when every tensor
     * is listed in some group. The group items are found by address, without reading them. The
     * arguments are the caller's (held by it); no Python code runs below. */
    int result = ex_tensor_ids_distinct(tensors, n, args[2]);
    if (result != 1) {
        if (result < 0) return NULL;
        Py_RETURN_NONE;
    }
    size_t cap = 16;
    while (cap < (size_t)n * 2) {
        if (cap > SIZE_MAX / 4 / sizeof(ex_tensor_slot)) return PyErr_NoMemory();
        cap *= 2;
    }
    ex_tensor_slot *slots = PyMem_Calloc(cap, sizeof(ex_tensor_slot));
    if (slots == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *tensor = PyTuple_GetItem(tensors, i); /* (in range; checked above) */
        size_t at = mr_ptr_mix_slot(tensor, cap - 1);
        while (slots[at].tensor != NULL) at = (at + 1) & (cap - 1);
        slots[at].tensor = tensor; /* (distinct ids: distinct objects) */
    }
    Py_ssize_t unseen = n, count = PyTuple_Size(groups);
    for (Py_ssize_t g = 0; g < count && result == 1; g++) {
        PyObject *group = PyTuple_GetItem(groups, g);
        if (group == NULL) {
            result = -1;
            break;
        }
        if (!PyTuple_CheckExact(group)) {
            result = 0;
            break;
        }
        Py_ssize_t size = PyTuple_Size(group);
        for (Py_ssize_t i = 0; i < size; i++) {
            PyObject *item = PyTuple_GetItem(group, i);
            if (item == NULL) {
                result = -1;
                break;
            }
            size_t at = mr_ptr_mix_slot(item, cap - 1);
            while (slots[at].tensor != NULL && slots[at].tensor != item) at = (at + 1) & (cap - 1);
            if (slots[at].tensor == NULL) {
                result = 0; /* not one of tensors */
                break;
            }
            if (!slots[at].seen) {
                slots[at].seen = 1;
                unseen--;
            }
        }
    }
    PyMem_Free(slots);
    if (result < 0) return NULL;
    if (result == 1 && unseen == 0) Py_RETURN_TRUE;
    Py_RETURN_NONE;
}

static PyMethodDef ex_methods[] = {
    {"classes_within", (PyCFunction)(void (*)(void))ex_classes_within, METH_FASTCALL, classes_within_doc},
    {"parts_members_within", (PyCFunction)(void (*)(void))ex_parts_members_within, METH_FASTCALL,
     parts_members_within_doc},
    {"inert_graph", (PyCFunction)(void (*)(void))ex_inert_graph, METH_FASTCALL, inert_graph_doc},
    {"part_index_exact", (PyCFunction)(void (*)(void))ex_part_index_exact, METH_FASTCALL, part_index_exact_doc},
    {"part_ranks_exact", (PyCFunction)(void (*)(void))ex_part_ranks_exact, METH_FASTCALL, part_ranks_exact_doc},
    {"tensor_maps_match", (PyCFunction)(void (*)(void))ex_tensor_maps_match, METH_FASTCALL, tensor_maps_match_doc},
    {"plain_executor_keys", (PyCFunction)(void (*)(void))ex_plain_executor_keys, METH_FASTCALL, plain_executor_keys_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_Exact(PyObject *module)
{
    if (PyModule_AddFunctions(module, ex_methods) < 0) return -1;
    if (cw_frame_type == NULL) {
        PyObject *frame = (PyObject *)PyEval_GetFrame(); /* borrowed; NULL at import from C */
        PyObject *sys_getframe = NULL;
        if (frame == NULL) {
            PyObject *sys = PyImport_ImportModule("sys");
            if (sys == NULL) return -1;
            sys_getframe = PyObject_CallMethod(sys, "_getframe", NULL);
            Py_DECREF(sys);
            if (sys_getframe == NULL) return -1;
            frame = sys_getframe;
        }
        PyCodeObject *code = PyFrame_GetCode((PyFrameObject *)frame);
        if (code == NULL) {
            Py_XDECREF(sys_getframe);
            return -1;
        }
        cw_code_type = Py_NewRef((PyObject *)Py_TYPE(code)); /* both kept for the process */
        Py_DECREF(code);
        cw_frame_type = Py_NewRef((PyObject *)Py_TYPE(frame));
        Py_XDECREF(sys_getframe);
    }
    if (cs_type == NULL) {
        cs_type = PyType_FromSpec(&cs_spec); /* kept for the process */
        if (cs_type == NULL) return -1;
    }
    if (cw_type == NULL) {
        cw_type = PyType_FromSpec(&cw_spec);
        if (cw_type == NULL) return -1;
    }
    if (PyModule_AddObjectRef(module, "CodeSet", cs_type) < 0) return -1;
    if (PyModule_AddObjectRef(module, "CodeWatch", cw_type) < 0) return -1;
    return 0;
}
