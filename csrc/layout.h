/* C-owned value layouts (issue 5, representation change step 1).
 *
 * A value class (a frozen dataclass) gets its fields stored in a C base type that owns the
 * layout: ``_native.value_base(name, fields)`` builds an immutable heap type whose instances are
 * ``PyObject_HEAD`` followed by one ``PyObject *`` per field, in the given order, exposed to
 * Python as ``T_OBJECT_EX`` member descriptors (an empty field raises AttributeError). The
 * dataclass derives from it with ``__slots__ = ("__weakref__",)`` (``mooncake_reshard/_layout.py``
 * does the rest). C code then reads a field with one load instead of an instance-dict lookup.
 *
 * Reading, once per pass and then per object:
 *
 *     mr_layout_class lc;
 *     mr_layout_check(&lc, cls, n);                     // 1: fast path usable, 0: decline all
 *     (or mr_layout_check_fields(&lc, cls, 0, names): also the field names, in order)
 *     ...
 *     PyObject *const *f = mr_layout_fields_set(obj, &lc);  // NULL: decline this object
 *     if (f == NULL) { ...original getattr / dict path... } else { use f[0] .. f[n-1] }
 *
 * ``mr_layout_check`` accepts ``cls`` only when its instances' attribute reads are exactly the
 * loads: ``type(cls)`` is ``type``, attribute access is the generic one (no ``__getattr__`` /
 * ``__getattribute__``), ``cls`` derives from a layout base with exactly ``n`` fields, and no
 * class between ``cls`` and that base in the MRO defines a field's name (a property, a default
 * value or a slot shadowing the member). The base itself is immutable, so its member descriptors
 * are the ones at the offsets below. The per-object call adds the exact-type check (a subclass
 * may shadow a field) and the NULL check (a field never set, or removed with
 * ``object.__delattr__``). Pointers read are borrowed: use them only while no Python code runs
 * (as with ``PyDict_GetItem`` today). ``object.__setattr__`` on a field stores into the same
 * slot, so forged values are seen at once.
 *
 * Building: ``mr_layout_new(&lc, values, n)`` allocates an instance of exactly ``lc.cls`` and
 * stores new references to the n values (no ``__init__`` / ``__post_init__``: the caller has
 * validated them), untracked by the collector when every value is inert as ``mr_gc_inert``
 * decides (the rule ``mr_untrack_inert`` applies to dict-backed instances). */
#ifndef MOONCAKE_RESHARD_LAYOUT_H
#define MOONCAKE_RESHARD_LAYOUT_H
#include "common.h"

/* m_name of the module definition whose modules describe layout bases: value_base makes one
 * module per base, with an mr_layout_info as its state, and gives it to the base
 * (PyType_FromModuleAndSpec), which holds it; PyType_GetModule(base) finds it again. A type's
 * module is set when the type is made and cannot be set from Python (classes made by ``class``
 * or ``type()`` have none, and subclasses do not inherit it), so the base itself stays
 * immutable, as Python 3.14 requires of a type whose bases are all immutable. */
#define MR_LAYOUT_MODULE "mooncake.reshard._native.layout"
/* Most fields a layout base may have (the largest value class has 16). */
#define MR_LAYOUT_MAX_FIELDS 64

/* An instance of a layout base (or of a Python subclass: its own slots, e.g. __weakref__, come
 * after the fields). */
typedef struct {
    PyObject_HEAD
    PyObject *fields[];
} mr_layout_object;

/* common.h mr_layout_slots reads the fields at this offset */
_Static_assert(offsetof(mr_layout_object, fields) == sizeof(PyObject), "layout fields follow the object header");

/* The state of a layout base's module (MR_LAYOUT_MODULE). base is the layout base's address, set
 * once the base exists and compared by identity only, never dereferenced or owned (the base owns
 * the module; a module kept after its base died matches no live type: no other type is ever
 * given it); dealloc is the base's tp_dealloc, which identifies types built by value_base; names
 * is the exact tuple of the n field names, owned by the module (a tuple of str: never part of a
 * reference cycle). */
typedef struct {
    PyObject *base;
    void *dealloc;
    Py_ssize_t n;
    PyObject *names;
} mr_layout_info;

/* The outcome of a per-pass check: cls (borrowed; the caller keeps it alive for the pass) when
 * the fast path is usable for instances of exactly cls, else NULL. */
typedef struct {
    PyObject *cls;
    Py_ssize_t n;
} mr_layout_class;

/* The layout info of type when type itself is a layout base built by value_base (its own
 * module, not one inherited: subclasses have none, is an MR_LAYOUT_MODULE module whose state
 * names type as its base), else NULL (no exception). Runs no Python code; touches no reference
 * count. */
static inline const mr_layout_info *
mr_layout_own_info(PyObject *type)
{
    /* a heap type made immutable (value_base's flags): every class made in Python is mutable and
     * has no module, so it is passed over here without raising and clearing a TypeError */
    const unsigned long want = Py_TPFLAGS_HEAPTYPE | Py_TPFLAGS_IMMUTABLETYPE;
    if ((PyType_GetFlags((PyTypeObject *)type) & want) != want) return NULL;
    PyObject *module = PyType_GetModule((PyTypeObject *)type); /* borrowed */
    if (module == NULL) {
        PyErr_Clear(); /* TypeError: no module */
        return NULL;
    }
    PyModuleDef *def = PyModule_GetDef(module);
    if (def == NULL || def->m_name == NULL || strcmp(def->m_name, MR_LAYOUT_MODULE) != 0
        || def->m_size != (Py_ssize_t)sizeof(mr_layout_info)) {
        PyErr_Clear();
        return NULL;
    }
    const mr_layout_info *info = (const mr_layout_info *)PyModule_GetState(module);
    if (info == NULL || info->base == NULL || info->names == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return info->base == type ? info : NULL;
}

/* Find the layout base of cls: the first layout base B in cls.__mro__ (mr_layout_own_info). On
 * success returns its info (borrowed from B's module, which B keeps), *base_out = B (borrowed;
 * in cls's MRO) and *index_out = B's MRO index, and *mro_out = a new reference to cls.__mro__.
 * NULL otherwise (no exception). cls and every MRO entry up to B must be exact ``type``
 * instances. Runs no Python code. */
static inline const mr_layout_info *
mr_layout_find(PyObject *cls, PyObject **base_out, Py_ssize_t *index_out, PyObject **mro_out)
{
    *mro_out = NULL;
    if (!PyType_Check(cls) || !Py_IS_TYPE(cls, &PyType_Type)) return NULL;
    PyObject *mro = PyObject_GetAttrString(cls, "__mro__");
    if (mro == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyTuple_CheckExact(mro)) {
        Py_DECREF(mro);
        return NULL;
    }
    const mr_layout_info *found = NULL;
    Py_ssize_t size = PyTuple_Size(mro);
    for (Py_ssize_t j = 0; j < size; j++) {
        PyObject *entry = PyTuple_GetItem(mro, j); /* borrowed; in range */
        if (entry == NULL || !Py_IS_TYPE(entry, &PyType_Type)) break;
        const mr_layout_info *info = mr_layout_own_info(entry);
        if (info == NULL) continue;
        /* the first layout base decides: a type built by value_base (its dealloc), whose size is
         * exactly n fields */
        if (PyType_GetSlot((PyTypeObject *)entry, Py_tp_dealloc) != info->dealloc) break;
        PyObject *size_obj = PyObject_GetAttrString(entry, "__basicsize__");
        Py_ssize_t basicsize = size_obj == NULL ? -1 : PyLong_AsSsize_t(size_obj);
        Py_XDECREF(size_obj);
        if (basicsize < 0) {
            PyErr_Clear();
            break;
        }
        if ((size_t)basicsize != offsetof(mr_layout_object, fields) + (size_t)info->n * sizeof(PyObject *)) break;
        *base_out = entry;
        *index_out = j;
        found = info;
        break;
    }
    if (found == NULL) {
        Py_DECREF(mro);
        return NULL;
    }
    *mro_out = mro;
    return found;
}

/* The per-pass check (see the top of this file), also requiring, when names is not NULL, that
 * the layout's field names equal names (a tuple; then n is its length). Fills *out and returns
 * 1 when accepted, else clears *out and returns 0. Never raises (failures decline); call it with
 * no exception set. */
static inline int
mr_layout_check_fields(mr_layout_class *out, PyObject *cls, Py_ssize_t n, PyObject *names)
{
    out->cls = NULL;
    out->n = 0;
    if (names != NULL) {
        if (!PyTuple_CheckExact(names)) return 0;
        n = PyTuple_Size(names);
    }
    if (n < 0 || n > MR_LAYOUT_MAX_FIELDS || !PyType_Check(cls)) return 0;
    if (PyType_GetSlot((PyTypeObject *)cls, Py_tp_getattro) != (void *)PyObject_GenericGetAttr) return 0;
    PyObject *base, *mro;
    Py_ssize_t index;
    const mr_layout_info *info = mr_layout_find(cls, &base, &index, &mro);
    if (info == NULL) return 0;
    int ok = info->n == n && PyTuple_CheckExact(info->names) && PyTuple_Size(info->names) == n;
    /* (field names are exact str: the comparison runs no Python code) */
    if (ok && names != NULL && names != info->names) ok = PyObject_RichCompareBool(info->names, names, Py_EQ) == 1;
    /* no class before the base in the MRO may define a field's name (the base's own entries
     * are its member descriptors: the type is immutable) */
    for (Py_ssize_t k = 0; ok && k < index; k++) {
        PyObject *proxy = PyObject_GetAttrString(PyTuple_GetItem(mro, k), "__dict__");
        if (proxy == NULL) {
            ok = 0;
            break;
        }
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            int has = PySequence_Contains(proxy, PyTuple_GetItem(info->names, i));
            if (has != 0) ok = 0;
        }
        Py_DECREF(proxy);
    }
    Py_DECREF(mro);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        ok = 0;
    }
    if (!ok) return 0;
    out->cls = cls;
    out->n = n;
    return 1;
}

/* mr_layout_check_fields without a names check: instances of exactly cls may be read with n
 * fields (the caller indexes fields by a layout order pinned elsewhere, e.g. by a test against
 * dataclasses.fields). */
static inline int
mr_layout_check(mr_layout_class *out, PyObject *cls, Py_ssize_t n)
{
    return mr_layout_check_fields(out, cls, n, NULL);
}

/* The per-call proof (AUDIT39) that the state readers' values are the attributes the rules read:
 * 1 when instances of ``cls`` read each of the fields ``names`` (an exact tuple of exact str) by
 * the generic attribute lookup from their state. ``cls`` and every class of its MRO up to its
 * layout base (mr_layout_own_info: immutable, its entries are the fields' member descriptors),
 * or the whole MRO for a dict-backed class, are of metaclass exactly ``type``; ``cls`` has the
 * generic attribute lookup (no ``__getattribute__`` / ``__getattr__`` planted); and no such
 * class's own dict holds a field's name, as anything: a value there shadows a layout member (an
 * instance has no dict), or, for a dict-backed class, as a value with ``__get__`` (a property
 * planted after import is a data descriptor the rules call; a plain value or a default loses to
 * the instance dict). ``object`` (immutable: no attribute can be set on it; no field is named as
 * one of its attributes) is passed over; any other immutable or static class that is not the
 * layout base declines. Each mutable class's dict is probed for the names after its keys were
 * found exact strs (another key's ``__eq__`` could run in a lookup), walked once per MRO tuple
 * (mr_plain_mros). Class dicts can change
 * between any two calls (and Python code run by a pass can change them), so no outcome is
 * remembered: callers prove it per call. ``pinned`` (NULL or an exact tuple of ``(name,
 * value)`` exact 2-tuples): each name is held by ``cls``'s own dict as exactly that value (the
 * methods a pass reproduces, e.g. ParallelRank's dataclass ``__eq__``); ``absent`` (NULL or an
 * exact tuple of exact str): no walked class holds any of these names (e.g. ``__ne__``).
 * ``mro_key``: the interned str ``"__mro__"`` (made once
 * by the caller: a str made per call costs more than the proof). 0 for anything else (no error
 * left set). Runs no Python code. */
enum { MR_PLAIN_MROS = 64 };

/* The MRO tuples (strong references: an address is never reused while held) every mutable class
 * of which, up to a layout base, was found to hold exact str keys only (mr_fields_unshadowed).
 * Such a class's dict keeps that: attribute assignment (``setattr``, ``type.__setattr__``, a
 * class body's later ``cls.x = ...``) stores an exact, interned str key whatever str subclass it
 * was given, and a class holding other keys enters an MRO only with a new MRO tuple
 * (``__bases__`` assignment). (Writing into a type's dict behind its back, e.g. through
 * ``gc.get_referents``, is unsupported by CPython itself: its attribute cache ignores it.) */
static PyObject *mr_plain_mros[MR_PLAIN_MROS];

static inline int
mr_plain_mro_known(PyObject *mro)
{
    for (int k = 0; k < MR_PLAIN_MROS && mr_plain_mros[k] != NULL; k++) {
        if (mr_plain_mros[k] == mro) return 1;
    }
    return 0;
}

static inline void
mr_plain_mro_add(PyObject *mro)
{
    for (int k = 0; k < MR_PLAIN_MROS; k++) {
        if (mr_plain_mros[k] == NULL) {
            mr_plain_mros[k] = Py_NewRef(mro);
            return;
        }
    }
}

static inline int
mr_fields_unshadowed(PyObject *cls, PyObject *names, PyObject *pinned, PyObject *absent, PyObject *mro_key)
{
    if (!PyType_Check(cls) || !Py_IS_TYPE(cls, &PyType_Type) || !PyTuple_CheckExact(names)
        || (pinned != NULL && !PyTuple_CheckExact(pinned)) || (absent != NULL && !PyTuple_CheckExact(absent))
        || PyType_GetSlot((PyTypeObject *)cls, Py_tp_getattro) != (void *)PyObject_GenericGetAttr) {
        return 0;
    }
    const Py_ssize_t n_names = PyTuple_Size(names);
    PyObject *mro = PyObject_GetAttr(cls, mro_key);
    if (mro == NULL || !PyTuple_CheckExact(mro) || n_names < 0) {
        Py_XDECREF(mro);
        PyErr_Clear();
        return 0;
    }
    const int known = mr_plain_mro_known(mro);
    int ok = 1, dict_backed = -1; /* (-1: not yet known) */
    const Py_ssize_t size = PyTuple_Size(mro);
    for (Py_ssize_t k = 0; k < size && ok; k++) {
        PyObject *entry = PyTuple_GetItem(mro, k); /* borrowed; in range */
        if (entry == NULL || !Py_IS_TYPE(entry, &PyType_Type)) {
            ok = 0;
            break;
        }
        if (entry == (PyObject *)&PyBaseObject_Type) continue;
        if (mr_layout_own_info(entry) != NULL) break; /* (the fields' members: nothing after it shadows them) */
        const unsigned long flags = PyType_GetFlags((PyTypeObject *)entry);
        if (!(flags & Py_TPFLAGS_HEAPTYPE) || (flags & Py_TPFLAGS_IMMUTABLETYPE)) {
            ok = 0;
            break;
        }
        PyObject *dict = PyObject_GenericGetDict(entry, NULL); /* (a heap type's own dict) */
        if (dict == NULL || !PyDict_CheckExact(dict)) {
            Py_XDECREF(dict);
            ok = 0;
            break;
        }
        /* exact str keys only (another key's __eq__ could run in a lookup): walked once per MRO */
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (!known && ok && PyDict_Next(dict, &pos, &key, &value)) {
            if (!PyUnicode_CheckExact(key)) ok = 0;
        }
        for (Py_ssize_t j = 0; j < n_names && ok; j++) {
            PyObject *name = PyTuple_GetItem(names, j); /* borrowed; in range */
            if (name == NULL || !PyUnicode_CheckExact(name)) {
                ok = 0;
                break;
            }
            PyObject *held = PyDict_GetItemWithError(dict, name); /* borrowed; plain keys */
            if (held == NULL) {
                if (PyErr_Occurred()) ok = 0;
                continue;
            }
            /* (a value under a field name: harmless only before a dict-backed instance's dict,
             * and only when it is no descriptor) */
            if (dict_backed < 0) {
                dict_backed = 1;
                for (Py_ssize_t b = k + 1; b < size; b++) {
                    if (mr_layout_own_info(PyTuple_GetItem(mro, b)) != NULL) dict_backed = 0;
                }
            }
            ok = dict_backed == 1 && PyType_GetSlot(Py_TYPE(held), Py_tp_descr_get) == NULL;
        }
        const Py_ssize_t n_absent = absent == NULL ? 0 : PyTuple_Size(absent);
        for (Py_ssize_t j = 0; j < n_absent && ok; j++) {
            PyObject *name = PyTuple_GetItem(absent, j); /* borrowed; in range */
            if (name == NULL || !PyUnicode_CheckExact(name) || PyDict_GetItemWithError(dict, name) != NULL
                || PyErr_Occurred()) {
                ok = 0;
            }
        }
        const Py_ssize_t n_pinned = k > 0 || pinned == NULL ? 0 : PyTuple_Size(pinned);
        for (Py_ssize_t j = 0; j < n_pinned && ok; j++) {
            PyObject *pin = PyTuple_GetItem(pinned, j); /* borrowed; in range */
            if (pin == NULL || !PyTuple_CheckExact(pin) || PyTuple_Size(pin) != 2
                || !PyUnicode_CheckExact(PyTuple_GetItem(pin, 0))
                || PyDict_GetItemWithError(dict, PyTuple_GetItem(pin, 0)) != PyTuple_GetItem(pin, 1)) {
                ok = 0;
            }
        }
        Py_DECREF(dict);
    }
    if (ok && !known) mr_plain_mro_add(mro);
    Py_DECREF(mro);
    PyErr_Clear();
    return ok;
}

/* A per-call-site memo of mr_layout_check_fields for readers of an instance's STATE (what its
 * instance dict held, e.g. pickle state and state comparisons, which never consulted class
 * attributes) and for builders: both need only that instances of exactly cls store the named
 * fields at these slots. That is fixed when the class is made: its instance layout cannot
 * change afterwards (``__bases__`` / ``__class__`` assignment to another layout is refused,
 * "layout differs": tests/test_native_layout.py), so a class accepted once by the full check
 * stays accepted for these readers, and the memo (holding a strong reference, so the address is
 * never reused) answers with two pointer comparisons per call. The full check runs for any
 * other class or names (a declined class is never remembered: it is checked on every call). A
 * class attribute added later that shadows a field does not matter to these readers (the
 * instance state is what they mirror) and is not re-checked: readers that mirror getattr must
 * call mr_layout_check_fields on each pass instead. One class per call site. (AUDIT39: the fast
 * revalidation's passes mirror rules that read attributes; its driver proves per call that no
 * field is shadowed, mr_fields_unshadowed, before and after them.)
 *
 * Cold mode (AUDIT40): many memo'd steps stand for rules that read attributes (bind's steps,
 * tests/test_audit39_bind_warm_memo.py), so a public call whose per-call proof fails
 * (``_native.layout_memos_unshadowed``: mr_fields_unshadowed for every class a memo holds, with
 * its names) runs with mr_memo_cold > 0 (``_native.layout_memos_cold``): on
 * entering it every memo that ever held a class is emptied (each one is linked into one list when
 * first filled: ``next``), and while it lasts no memo answers from what it holds (every check is
 * the full one, which declines a class with a shadowed field), a memo whose full check declines
 * is emptied (readers that compare a type with ``memo.cls`` directly see no class), and no class
 * is added to an mr_class_memo's declined list (it would stay declined once the shadow is
 * gone). Each memo'd step then decides as in a fresh process (a cold call): the layout check
 * declines and the rules (the Python steps) decide. Memos filled meanwhile hold classes the full
 * check accepted, so they stay valid after it. */
typedef struct mr_layout_memo {
    PyObject *cls;
    PyObject *names;
    struct mr_layout_memo *next; /* the list of filled memos (mr_memo_listed), or NULL */
    int listed;
} mr_layout_memo;

/* > 0 while a call runs in cold mode (above); layout.c. */
extern int mr_memo_cold;

/* Links memo into the list of filled memos (once; memos are static storage). layout.c. */
void mr_memo_listed(mr_layout_memo *memo);

/* Empties memo (its references released last). */
static inline void
mr_layout_memo_forget(mr_layout_memo *memo)
{
    PyObject *old[2] = {memo->cls, memo->names};
    memo->cls = NULL;
    memo->names = NULL;
    for (int k = 0; k < 2; k++) Py_XDECREF(old[k]);
}

/* 1 when the names tuple's items are the memo's, the same objects in order (exact tuples). */
static inline int
mr_layout_memo_same_names(const mr_layout_memo *memo, PyObject *names)
{
    if (memo->names == names) return 1;
    if (memo->names == NULL || !PyTuple_CheckExact(names)) return 0;
    Py_ssize_t n = PyTuple_Size(names);
    if (n < 0 || PyTuple_Size(memo->names) != n) {
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyTuple_GetItem(names, i) != PyTuple_GetItem(memo->names, i)) return 0; /* in range */
    }
    return 1;
}

/* 1 (and *out filled) when memo holds cls with exactly these n names, the same objects in
 * order as names[0 .. n-1] (a C array: the caller need not build a tuple); else 0. */
static inline int
mr_layout_memo_hit(const mr_layout_memo *memo, mr_layout_class *out, PyObject *cls, PyObject *const *names,
                   Py_ssize_t n)
{
    out->cls = NULL;
    out->n = 0;
    if (memo->cls == NULL || memo->cls != cls || mr_memo_cold > 0 || PyTuple_Size(memo->names) != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyTuple_GetItem(memo->names, i) != names[i]) return 0; /* in range */
    }
    out->cls = cls;
    out->n = n;
    return 1;
}

/* mr_layout_check_fields(out, cls, 0, names) through memo (see mr_layout_memo): 1 accepted,
 * 0 declined. Never raises; call it with no exception set. */
static inline int
mr_layout_memo_check(mr_layout_memo *memo, mr_layout_class *out, PyObject *cls, PyObject *names)
{
    if (memo->cls != NULL && memo->cls == cls && mr_memo_cold == 0 && mr_layout_memo_same_names(memo, names)) {
        out->cls = cls;
        out->n = PyTuple_Size(names);
        return 1;
    }
    if (!mr_layout_check_fields(out, cls, 0, names)) {
        if (mr_memo_cold > 0) mr_layout_memo_forget(memo); /* (cold mode: no class left to compare with) */
        return 0;
    }
    PyObject *old[2] = {memo->cls, memo->names};
    memo->cls = Py_NewRef(cls);
    memo->names = Py_NewRef(names);
    mr_memo_listed(memo);
    for (int k = 0; k < 2; k++) Py_XDECREF(old[k]); /* after the memo is consistent */
    return 1;
}

/* The field array of obj when its type is exactly the checked class, else NULL (decline).
 * Entries may be NULL (a field never set or deleted): see mr_layout_fields_set. */
static inline PyObject *const *
mr_layout_fields(PyObject *obj, const mr_layout_class *lc)
{
    if (lc->cls == NULL || (PyObject *)Py_TYPE(obj) != lc->cls) return NULL;
    return (PyObject *const *)((mr_layout_object *)obj)->fields;
}

/* 1 when all n fields are set, else 0. */
static inline int
mr_layout_all_set(PyObject *const *fields, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (fields[i] == NULL) return 0;
    }
    return 1;
}

/* mr_layout_fields, also declining (NULL) when a field is empty. */
static inline PyObject *const *
mr_layout_fields_set(PyObject *obj, const mr_layout_class *lc)
{
    PyObject *const *fields = mr_layout_fields(obj, lc);
    if (fields == NULL || !mr_layout_all_set(fields, lc->n)) return NULL;
    return fields;
}

/* A new instance of exactly lc->cls holding new references to values[0 .. n-1] (all non-NULL),
 * untracked by the collector when every value is inert (mr_gc_inert, as mr_untrack_inert
 * decides for dict-backed instances). NULL with an exception (TypeError when lc was not checked
 * for n fields, MemoryError). */
static inline PyObject *
mr_layout_new_gc(const mr_layout_class *lc, PyObject *const *values, Py_ssize_t n, int untrack);

static inline PyObject *
mr_layout_new(const mr_layout_class *lc, PyObject *const *values, Py_ssize_t n)
{
    return mr_layout_new_gc(lc, values, n, 1);
}

/* Non-zero, with SystemError set, when one of values[0 .. n-1] is NULL. */
static inline int
mr_layout_values_missing(PyObject *const *values, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (values[i] == NULL) {
            PyErr_SetString(PyExc_SystemError, "mr_layout_new: NULL field value");
            return 1;
        }
    }
    return 0;
}

/* Store new references to values[0 .. n-1] in a fresh instance's fields; non-zero when judge is
 * and every value is inert for the collector (mr_gc_inert). */
static inline int
mr_layout_store(PyObject *obj, PyObject *const *values, Py_ssize_t n, int judge)
{
    PyObject **fields = ((mr_layout_object *)obj)->fields;
    int inert = judge != 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        fields[i] = Py_NewRef(values[i]);
        if (inert && !mr_gc_inert(values[i], MR_INERT_DEPTH)) inert = 0;
    }
    return inert;
}

/* mr_layout_new, judging the values for the collector only when untrack is non-zero (a bulk
 * builder below MR_GC_BULK_MIN objects leaves its instances tracked, as it did dict-backed
 * ones). */
static inline PyObject *
mr_layout_new_gc(const mr_layout_class *lc, PyObject *const *values, Py_ssize_t n, int untrack)
{
    if (lc->cls == NULL || lc->n != n) {
        PyErr_SetString(PyExc_TypeError, "class is not a checked value layout of this many fields");
        return NULL;
    }
    if (mr_layout_values_missing(values, n)) return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)lc->cls, Py_tp_alloc);
    if (alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "value layout class has no allocator");
        return NULL;
    }
    PyObject *obj = alloc((PyTypeObject *)lc->cls, 0);
    if (obj == NULL) return NULL;
    int inert = mr_layout_store(obj, values, n, untrack);
    if (inert) (void)mr_untrack_inert(obj, NULL);
    return obj;
}

/* ---- Bulk allocation without tp_alloc's zeroing and collector round trip ----------------
 *
 * mr_layout_new allocates through the class's tp_alloc (PyType_GenericAlloc for every value
 * class): the whole instance zeroed, linked and tracked by the collector, then untracked again
 * when its values are inert. A bulk builder (thousands of instances of one class in one call)
 * may instead describe the class once (mr_layout_alloc_init) and build with mr_layout_new_with:
 * the instance comes from PyObject_GC_New (the same block size, the same collector link and
 * generation count, the type's reference and the object's header set by the same
 * _PyObject_Init), its fields stored, the bytes after them (a subclass's __weakref__ slot)
 * zeroed as PyType_GenericAlloc zeroed them, and it is tracked only when not inert: the object
 * PyType_GenericAlloc + mr_layout_new_gc leave, byte for byte and in the same collector state.
 * Only for a class whose tp_alloc is PyType_GenericAlloc and tp_free PyObject_GC_Del (the pair
 * PyObject_GC_New's blocks need), a collector type without any of the type flags that put data
 * before the object or inline values in it (bits 2-4: inline values, managed weakref, managed
 * dict, 3.11-3.13; unused in 3.10), with no item size and no instance dict, and whose size holds
 * exactly the n fields and then pointer-sized slots. A class's slots, flags and sizes cannot
 * change after it is made, and the caller holds it for the call. */
typedef struct {
    PyObject *cls; /* NULL: not described (mr_layout_new_with takes mr_layout_new_gc's path) */
    Py_ssize_t n;
    size_t tail_at, size; /* the bytes [tail_at, size) of an instance zeroed */
} mr_layout_alloc;

/* An int attribute of a type read once (*out), 0; -1 with no exception when it is missing or not
 * a non-negative int that fits. Runs no Python code (type attributes of these names are
 * getset descriptors of type itself, read through type's own getattro: cls's metaclass is
 * exactly type, checked by the caller). */
static inline int
mr_type_size_attr(PyObject *cls, const char *name, Py_ssize_t *out)
{
    PyObject *value = PyObject_GetAttrString(cls, name);
    if (value == NULL) {
        PyErr_Clear();
        return -1;
    }
    *out = PyLong_CheckExact(value) ? PyLong_AsSsize_t(value) : -1;
    Py_DECREF(value);
    if (*out < 0) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

/* Describes lc's class for mr_layout_new_with (la->cls NULL when it does not qualify, or lc
 * accepted none). Never raises. */
static inline void
mr_layout_alloc_init(mr_layout_alloc *la, const mr_layout_class *lc)
{
    la->cls = NULL;
    la->n = 0;
    la->tail_at = la->size = 0;
    if (lc->cls == NULL || !Py_IS_TYPE(lc->cls, &PyType_Type) || lc->n < 0 || lc->n > MR_LAYOUT_MAX_FIELDS) return;
    PyTypeObject *type = (PyTypeObject *)lc->cls;
    const unsigned long preheader = (1UL << 2) | (1UL << 3) | (1UL << 4);
    unsigned long flags = PyType_GetFlags(type);
    if (!(flags & Py_TPFLAGS_HAVE_GC) || (flags & preheader) != 0) return;
    if (PyType_GetSlot(type, Py_tp_alloc) != (void *)PyType_GenericAlloc
        || PyType_GetSlot(type, Py_tp_free) != (void *)PyObject_GC_Del) {
        PyErr_Clear();
        return;
    }
    Py_ssize_t basicsize = 0, itemsize = 0, dictoffset = 0;
    if (mr_type_size_attr(lc->cls, "__basicsize__", &basicsize) < 0
        || mr_type_size_attr(lc->cls, "__itemsize__", &itemsize) < 0
        || mr_type_size_attr(lc->cls, "__dictoffset__", &dictoffset) < 0) {
        return;
    }
    size_t fields_end = offsetof(mr_layout_object, fields) + (size_t)lc->n * sizeof(PyObject *);
    if (itemsize != 0 || dictoffset != 0 || (size_t)basicsize < fields_end
        || (size_t)basicsize % sizeof(PyObject *) != 0) {
        return;
    }
    la->cls = lc->cls;
    la->n = lc->n;
    la->tail_at = fields_end;
    la->size = (size_t)basicsize;
}

/* mr_layout_new_gc(lc, values, n, untrack), through la when it describes lc's class (see
 * mr_layout_alloc: the same object, the same collector state). Kept out of line, as
 * mr_layout_new_gc is: inlined into a bulk builder's loop it crowds out what the compiler inlines
 * there (bind_regions: +4.3M instructions at Kimi 2 layers, bd_canon_region left out of line). */
static __attribute__((noinline, unused)) PyObject *
mr_layout_new_with(const mr_layout_alloc *la, const mr_layout_class *lc, PyObject *const *values, Py_ssize_t n,
                   int untrack)
{
    if (la == NULL || la->cls == NULL || la->cls != lc->cls || la->n != n || lc->n != n) {
        return mr_layout_new_gc(lc, values, n, untrack);
    }
    if (mr_layout_values_missing(values, n)) return NULL;
    PyObject *obj = PyObject_GC_New(PyObject, (PyTypeObject *)la->cls); /* untracked */
    if (obj == NULL) return NULL;
    int inert = mr_layout_store(obj, values, n, untrack);
    if (la->size > la->tail_at) memset((char *)obj + la->tail_at, 0, la->size - la->tail_at);
    if (!inert) PyObject_GC_Track(obj);
    return obj;
}

/* ---- BoundWeightFragment (representation change step 3) -------------------------------
 *
 * Its fields in layout order (mooncake_reshard/weight/_planner/fragments.py _BOUND_LAYOUT). Each
 * C reader or builder of bound fragments checks the class it is given once per call (or per
 * object through a per-call-site memo: a hit is one pointer comparison) with mr_bound_layout;
 * an accepted class's instances are read with direct loads (an empty field is what a missing key
 * of the instance dict was), any other class takes the instance-dict path, which declines
 * (nothing read) on an object without a __dict__. */
enum {
    MR_BF_PLACEMENT,
    MR_BF_BINDING,
    MR_BF_INSTANCE_ID,
    MR_BF_RUNTIME_LEASE_ID,
    MR_BF_LEASE_GENERATION,
    MR_BF_OWNER,
    MR_BF_ATTESTATION,
    MR_BF_N
};

/* mr_layout_memo_check(memo, out, cls, <the MR_BF_N field names, interned>): 1 when cls is a
 * C-owned layout of exactly BoundWeightFragment's fields in order (instances of exactly cls
 * may be read and built with direct loads and stores), else 0 (out cleared). memo is one call
 * site's and only ever holds this check's names. Never raises; call it with no exception set. */
static inline int
mr_bound_layout(mr_layout_memo *memo, mr_layout_class *out, PyObject *cls)
{
    static const char *const names[MR_BF_N] = {"placement",        "binding", "instance_id", "runtime_lease_id",
                                               "lease_generation", "owner",   "attestation"};
    if (memo->cls != NULL && memo->cls == cls && mr_memo_cold == 0) {
        out->cls = cls;
        out->n = MR_BF_N;
        return 1;
    }
    out->cls = NULL;
    out->n = 0;
    PyObject *tuple = PyTuple_New(MR_BF_N);
    if (tuple == NULL) {
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t k = 0; k < MR_BF_N; k++) {
        PyObject *name = PyUnicode_InternFromString(names[k]);
        if (name == NULL || PyTuple_SetItem(tuple, k, name) < 0) { /* steals name */
            PyErr_Clear();
            Py_DECREF(tuple);
            return 0;
        }
    }
    int ok = mr_layout_memo_check(memo, out, cls, tuple);
    Py_DECREF(tuple);
    return ok;
}

/* 1 when instances of cls have an instance __dict__ (a nonzero __dictoffset__), 0 when not,
 * -1 with an exception. For builders that fill an instance dict: a class without one (a C-owned
 * layout their check did not accept) is declined before anything is built. */
static inline int
mr_class_has_dict(PyObject *cls)
{
    PyObject *offset = PyObject_GetAttrString(cls, "__dictoffset__");
    if (offset == NULL) return -1;
    Py_ssize_t value = PyLong_Check(offset) ? PyLong_AsSsize_t(offset) : -1;
    int failed = PyLong_Check(offset) && value == -1 && PyErr_Occurred();
    Py_DECREF(offset);
    if (failed) return -1;
    return value != 0;
}

/* A new reference to what obj's instance state holds under field `index` (named `name`): its
 * layout slot when lc accepted exactly its type (NULL, no exception, when empty), else the item
 * of its instance dict (NULL, no exception, when missing or when obj has no __dict__). NULL
 * with an exception on error. Runs no Python code. */
static inline PyObject *
mr_state_item(PyObject *obj, const mr_layout_class *lc, Py_ssize_t index, PyObject *name)
{
    PyObject *const *fields = mr_layout_fields(obj, lc);
    if (fields != NULL) {
        if (index < 0 || index >= lc->n) {
            PyErr_SetString(PyExc_SystemError, "mr_state_item: field index out of range");
            return NULL;
        }
        return fields[index] == NULL ? NULL : Py_NewRef(fields[index]);
    }
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear(); /* no __dict__: nothing read */
        return NULL;
    }
    PyObject *value = PyDict_Check(dict) ? PyDict_GetItemWithError(dict, name) : NULL;
    Py_XINCREF(value);
    Py_DECREF(dict);
    return value;
}

/* ---- TransferRegion (representation change step 4) --------------------------------------
 *
 * TransferRegion's fields in field order (mooncake_reshard/weight/_planner/contracts.py
 * _REGION_LAYOUT; tests/test_region_layout.py pins both). A reader or builder of regions checks
 * its region class once per call with mr_region_layout (through a per-call-site memo: what it
 * reads is the instance state, what a dict-backed region's instance dict held), then reads an
 * exact instance's fields with mr_layout_fields (an entry NULL: the field is empty, as a key
 * missing from an instance dict was) or builds with mr_layout_new. A class the check declines
 * takes the reader's original instance-dict path, which declines on an instance without a
 * __dict__. */
enum {
    MR_RG_TENSOR_ID,
    MR_RG_SOURCE,
    MR_RG_TARGET,
    MR_RG_OVERLAP_OFFSET,
    MR_RG_OVERLAP_SHAPE,
    MR_RG_SOURCE_BASE_OFFSET,
    MR_RG_TARGET_BASE_OFFSET,
    MR_RG_INNER_BYTES,
    MR_RG_OUTER_LOOP_COUNTS,
    MR_RG_SOURCE_STRIDES,
    MR_RG_TARGET_STRIDES,
    MR_RG_NFIELDS
};

/* The exact tuple of TransferRegion's field names (interned str, in field order), made by
 * Init_Layout and kept for the process; borrowed. */
PyObject *mr_region_names(void);

/* Per call: *lc accepts cls when it is a C-owned layout of exactly TransferRegion's fields in
 * field order (1), else is cleared (0: the caller's instance-dict path). memo is the call
 * site's (static). Never raises; call it with no exception set. */
static inline int
mr_region_layout(mr_layout_memo *memo, mr_layout_class *lc, PyObject *cls)
{
    PyObject *names = mr_region_names();
    if (names == NULL) {
        lc->cls = NULL;
        lc->n = 0;
        return 0;
    }
    return mr_layout_memo_check(memo, lc, cls, names);
}

/* mr_untrack_bound_regions for the regions (an exact list or tuple) that are exact instances of
 * rl's class (a checked region layout): each one's bound source and target offered to
 * mr_untrack_bound (bound_layout: bound_cls's layout, see there), then the region untracked when every field is set and inert (what
 * mr_untrack_inert decides from a dict-backed region's dict). Any other region is left to
 * mr_untrack_bound_regions. Same size threshold; runs no Python code; never fails (errors,
 * never expected, are cleared and stop nothing but untracking). */
static inline void
mr_untrack_layout_regions(PyObject *regions, const mr_layout_class *rl, PyObject *bound_cls, int bound_layout,
                          PyObject *attestation_name)
{
    if (PyErr_Occurred() || rl->cls == NULL || rl->n != MR_RG_NFIELDS) return;
    mr_region_pass pass;
    mr_region_pass_begin(&pass, regions, bound_cls);
    PyObject *region;
    while ((region = mr_region_pass_next(&pass)) != NULL) {
        PyObject *const *fields = mr_layout_fields_set(region, rl);
        if (fields == NULL) continue;
        mr_untrack_bound_pair(fields[MR_RG_SOURCE], fields[MR_RG_TARGET], bound_cls, bound_layout, attestation_name,
                              pass.memo);
        if (mr_untrack_values(region, NULL, fields, MR_RG_NFIELDS) < 0) break;
    }
    mr_region_pass_end(&pass);
}

/* ---- Named layouts: PlacementFragment (step 5), RuntimeBindingFragment (step 6) -----------
 *
 * A C file's memo of a named layout's check (mr_class_layout): the accepted class
 * (mr_layout_memo: a hit is one pointer comparison), and the last few classes the check
 * declined (strong references, so their addresses are never reused). A declined class stays
 * declined for the process: declining is always safe (the reader takes its instance-dict path),
 * and it spares the full check (an MRO walk) per object for the other classes a reader meets
 * (placement fragments, runtime fragments, ranks, ...). A layout class of these very fields
 * declined for a shadowed field is not remembered (the shadow may go: AUDIT40), nor any class in
 * cold mode. One memo per layout and call site: a memo only ever holds one layout's names. */
#define MR_CLASS_DECLINED 8
typedef struct {
    mr_layout_memo memo;
    PyObject *declined[MR_CLASS_DECLINED];
    int next;
} mr_class_memo;

/* 1 when cls derives from a layout base (mr_layout_find) whose field names equal names (an exact
 * tuple of exact str), else 0. Never raises; runs no Python code. */
static inline int
mr_layout_has_names(PyObject *cls, PyObject *names)
{
    PyObject *base, *mro;
    Py_ssize_t index;
    const mr_layout_info *info = mr_layout_find(cls, &base, &index, &mro);
    if (info == NULL) return 0;
    Py_DECREF(mro);
    int same = info->names == names
               || (PyTuple_CheckExact(names) && PyObject_RichCompareBool(info->names, names, Py_EQ) == 1);
    PyErr_Clear();
    return same;
}

/* Per call (or per object): *lc accepts cls when it is a C-owned layout of exactly the n field
 * names (an exact tuple, NULL before Init_Layout: declined) in field order (1), else is cleared
 * (0). memo is the C file's (static). Never raises; call it with no exception set. */
static inline int
mr_class_layout(mr_class_memo *memo, mr_layout_class *lc, PyObject *cls, PyObject *names, Py_ssize_t n)
{
    if (memo->memo.cls != NULL && memo->memo.cls == cls && mr_memo_cold == 0) { /* (only ever these names) */
        lc->cls = cls;
        lc->n = n;
        return 1;
    }
    lc->cls = NULL;
    lc->n = 0;
    for (int k = 0; k < MR_CLASS_DECLINED; k++) {
        if (memo->declined[k] == cls) return 0;
    }
    if (names == NULL) return 0;
    if (mr_layout_memo_check(&memo->memo, lc, cls, names)) return 1;
    /* (not remembered in cold mode, nor a class whose layout has these very fields: declined for
     * a shadowed field, which may go, AUDIT40) */
    if (mr_memo_cold > 0 || mr_layout_has_names(cls, names)) return 0;
    int slot = memo->next;
    memo->next = (slot + 1) % MR_CLASS_DECLINED;
    PyObject *old = memo->declined[slot];
    memo->declined[slot] = Py_NewRef(cls);
    Py_XDECREF(old); /* after the memo is consistent */
    return 0;
}

/* The field index of name among a named layout's n interned field names (ptrs: borrowed from
 * the exact tuple names; identity first, else equality of exact str), or -1 (not a field). Runs
 * no Python code. */
static inline Py_ssize_t
mr_name_index(PyObject *const *ptrs, PyObject *names, Py_ssize_t n, PyObject *name)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (ptrs[i] == name) return i; /* (NULL before Init_Layout: no match) */
    }
    if (names == NULL || !PyUnicode_CheckExact(name)) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyUnicode_Compare(PyTuple_GetItem(names, i), name) == 0) return i;
    }
    PyErr_Clear(); /* (PyUnicode_Compare of exact str does not fail) */
    return -1;
}

/* ---- PlacementFragment (representation change step 5) ----------------------------------
 *
 * Its fields in field order (mooncake_reshard/weight/types.py _FRAGMENT_FIELDS;
 * tests/test_placement_fragment_layout.py pins both). Readers with a fast path check the class
 * they are given once per call through a per-call-site memo (mr_pf_layout, an mr_class_memo) and
 * load an exact instance's fields with mr_layout_fields. Readers of a placement fragment's
 * instance state (what the dict-backed class's __dict__ held) that accept any class read it with
 * mr_pf_state: for an instance of any class deriving from a layout base with exactly these
 * fields (the class itself or a user subclass, whose own __dict__, if any, holds none of the
 * fields) a new dict of its set fields in field order; for anything else its instance dict. */
enum {
    MR_PF_TENSOR_ID,
    MR_PF_GLOBAL_OFFSET,
    MR_PF_LOCAL_SHAPE,
    MR_PF_NBYTES,
    MR_PF_RANK,
    MR_PF_PIPELINE_STAGE_ID,
    MR_PF_ALIASES,
    MR_PF_PLACEMENT_FRAGMENT_ID,
    MR_PF_N
};

/* The exact tuple of PlacementFragment's field names (interned str, in field order), made by
 * Init_Layout and kept for the process; borrowed (NULL before Init_Layout). */
PyObject *mr_pf_names(void);

/* The same names as a plain array (borrowed from that tuple; all NULL before Init_Layout). */
extern PyObject *mr_pf_name_ptrs[MR_PF_N];

/* mr_class_layout with PlacementFragment's names: 1 when instances of exactly cls may be read
 * (and built) with direct loads (stores) of its 8 fields in field order, else 0 (out cleared).
 * Never raises; call it with no exception set. */
static inline int
mr_pf_layout(mr_class_memo *memo, mr_layout_class *out, PyObject *cls)
{
    return mr_class_layout(memo, out, cls, mr_pf_names(), MR_PF_N);
}

/* 1 when instances of type store PlacementFragment's 8 fields in a C-owned layout (type derives
 * from a value_base type of exactly these field names, in order, found as mr_layout_find finds
 * it: the class itself or any subclass, which mr_pf_layout declines), else 0. The answer cannot
 * change once the class exists (its instance layout is fixed), so it is remembered per class
 * (strong references, a small table per file; both answers: the readers of a state meet the
 * class, user subclasses and every other class alike). Never raises; call it with no exception
 * set. */
static inline int
mr_pf_derived(PyObject *type)
{
    enum { MR_PF_MEMO = 16 };
    static PyObject *known[MR_PF_MEMO];
    static signed char verdict[MR_PF_MEMO];
    static int next;
    for (int k = 0; k < MR_PF_MEMO && known[k] != NULL; k++) {
        if (known[k] == type) return verdict[k];
    }
    PyObject *base, *mro;
    Py_ssize_t index;
    int yes = 0;
    const mr_layout_info *info = mr_layout_find(type, &base, &index, &mro);
    if (info != NULL) {
        Py_DECREF(mro);
        PyObject *names = mr_pf_names();
        if (names != NULL && info->n == MR_PF_N && PyTuple_CheckExact(info->names))
            yes = info->names == names || PyObject_RichCompareBool(info->names, names, Py_EQ) == 1;
        PyErr_Clear();
    }
    int slot = next;
    next = (next + 1) % MR_PF_MEMO;
    PyObject *old = known[slot];
    known[slot] = Py_NewRef(type);
    verdict[slot] = (signed char)yes;
    Py_XDECREF(old);
    return yes;
}

/* mr_pf_class: mr_pf_layout through one memo per file. mr_pf_fields: the field array (entries
 * NULL where empty) of obj when its type is exactly a class mr_pf_class accepts, else NULL (the
 * caller's instance-dict path; no exception). Neither raises; call them with no exception set. */
static inline int
mr_pf_class(PyObject *cls, mr_layout_class *lc)
{
    static mr_class_memo memo;
    return mr_pf_layout(&memo, lc, cls);
}

static inline PyObject *const *
mr_pf_fields(PyObject *obj)
{
    mr_layout_class lc;
    if (!mr_pf_class((PyObject *)Py_TYPE(obj), &lc)) return NULL;
    return mr_layout_fields(obj, &lc);
}

/* 1 when names (a tuple) holds exactly PlacementFragment's field names in field order, else 0.
 * Never raises. */
static inline int
mr_pf_same_names(PyObject *names)
{
    PyObject *pf = mr_pf_names();
    if (pf == NULL || !PyTuple_CheckExact(names)) return 0;
    if (names == pf) return 1;
    int same = PyObject_RichCompareBool(names, pf, Py_EQ) == 1; /* exact str items: no Python code */
    PyErr_Clear();
    return same;
}

/* The field of a placement fragment's slot array f (from mr_pf_fields) named name (an interned
 * str, matched by identity): a borrowed pointer, NULL when that slot is empty; *found = 0 (and
 * NULL) when name is not one of its fields. Never raises. */
static inline PyObject *
mr_pf_named(PyObject *const *f, PyObject *name, int *found)
{
    for (Py_ssize_t j = 0; j < MR_PF_N; j++) {
        if (mr_pf_name_ptrs[j] == name) {
            *found = 1;
            return f[j];
        }
    }
    *found = 0;
    return NULL;
}

/* mr_pf_fields read by name: when obj is exactly an accepted class, v[k] (k < n) = a new
 * reference to its field named names[k] (interned str, matched by identity), NULL where that
 * slot is empty or names[k] is not one of its fields, and 1; else 0 (v untouched). Runs no
 * Python code; never raises. */
static inline int
mr_pf_scan(PyObject *obj, PyObject *const *names, int n, PyObject **v)
{
    PyObject *const *f = mr_pf_fields(obj);
    if (f == NULL) return 0;
    for (int k = 0; k < n; k++) {
        int found;
        PyObject *value = mr_pf_named(f, names[k], &found);
        v[k] = value == NULL ? NULL : Py_NewRef(value);
    }
    return 1;
}

/* A new reference to obj's placement-fragment state: when mr_pf_derived(type(obj)), a new dict
 * of its set fields in field order (what the dict-backed class's instance dict held); else
 * obj's instance dict (PyObject_GenericGetDict: AttributeError when it has none). NULL with an
 * exception on failure. Runs no Python code. */
static inline PyObject *
mr_pf_state(PyObject *obj)
{
    if (!mr_pf_derived((PyObject *)Py_TYPE(obj))) return PyObject_GenericGetDict(obj, NULL);
    PyObject *dict = PyDict_New();
    if (dict == NULL) return NULL;
    PyObject *const *fields = (PyObject *const *)((mr_layout_object *)obj)->fields;
    for (Py_ssize_t k = 0; k < MR_PF_N; k++) {
        if (fields[k] == NULL) continue;
        if (PyDict_SetItem(dict, mr_pf_name_ptrs[k], fields[k]) < 0) { /* (set: mr_pf_derived found them) */
            Py_DECREF(dict);
            return NULL;
        }
    }
    return dict;
}

/* A new reference to a placement fragment's state as its ``__dict__`` attribute gives it (must be
 * a dict: TypeError otherwise): mr_pf_state for a class deriving from the layout base, else the
 * attribute ``dict_name`` (``"__dict__"``, interned by the caller). May run Python code (a
 * foreign class's ``__dict__``). NULL with an exception on failure. */
static inline PyObject *
mr_pf_state_dict(PyObject *obj, PyObject *dict_name)
{
    PyObject *state = mr_pf_derived((PyObject *)Py_TYPE(obj)) ? mr_pf_state(obj) : PyObject_GetAttr(obj, dict_name);
    if (state != NULL && !PyDict_Check(state)) {
        Py_DECREF(state);
        PyErr_SetString(PyExc_TypeError, "fragment state must be a dict");
        return NULL;
    }
    return state;
}

/* Borrowed state[key] of a state dict; KeyError (as ``state[key]`` would raise) when missing. */
static inline PyObject *
mr_dict_item(PyObject *state, PyObject *key)
{
    PyObject *v = PyDict_GetItemWithError(state, key);
    if (v == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
    return v;
}

/* ---- RuntimeBindingFragment (representation change step 6) -------------------------------
 *
 * Its fields in field order (mooncake_reshard/contracts/fragments.py _RUNTIME_LAYOUT;
 * tests/test_runtime_fragment_layout.py pins both). Readers of runtime fragments mirror their
 * instance state, what a dict-backed fragment's instance dict held: each C file keeps one
 * mr_class_memo for them (mr_runtime_layout; a hit is one pointer comparison) and, where it used
 * to fetch the instance dict of an exact runtime fragment and look fields up in it by name, takes
 * a "state" instead (mr_runtime_state: the object itself when its exact class is an accepted
 * layout, else its instance dict) and looks names up in it with mr_runtime_state_get (a layout
 * state: the slot of that name, found by identity among the interned field names; NULL, as a
 * missing key, when empty or not a field). A class the check declines keeps the instance-dict
 * path, which declines on an instance without a __dict__. */
enum {
    MR_RF_PLACEMENT_FRAGMENT_ID,
    MR_RF_FRAGMENT_ID,
    MR_RF_ADDRESS,
    MR_RF_NBYTES,
    MR_RF_WORKER_ID,
    MR_RF_ENDPOINT,
    MR_RF_DEVICE,
    MR_RF_ITEMSIZE,
    MR_RF_LOCAL_SHAPE,
    MR_RF_STRIDES_BYTES,
    MR_RF_STORAGE_ADDRESS,
    MR_RF_STORAGE_NBYTES,
    MR_RF_STORAGE_OFFSET_BYTES,
    MR_RF_OWNER,
    MR_RF_N
};

/* The exact tuple of RuntimeBindingFragment's field names (interned str, in field order), made
 * by Init_Layout and kept for the process; borrowed. */
PyObject *mr_runtime_names(void);

/* The same names as a plain array (borrowed from that tuple; all NULL before Init_Layout): the
 * per-read name lookups below compare pointers without a PyTuple_GetItem call each. */
extern PyObject *mr_runtime_name_ptrs[MR_RF_N];

/* Per call (or per object): mr_class_layout with RuntimeBindingFragment's names, memo the C
 * file's (static). Never raises; call it with no exception set. */
static inline int
mr_runtime_layout(mr_class_memo *memo, mr_layout_class *lc, PyObject *cls)
{
    return mr_class_layout(memo, lc, cls, mr_runtime_names(), MR_RF_N);
}

/* The state of runtime fragment obj (new reference): obj itself when its exact class is a
 * runtime layout memo accepts, else its instance dict (PyObject_GenericGetDict). NULL with an
 * exception when neither (AttributeError: no __dict__). Runs no Python code. */
static inline PyObject *
mr_runtime_state(mr_class_memo *memo, PyObject *obj)
{
    mr_layout_class lc;
    if (mr_runtime_layout(memo, &lc, (PyObject *)Py_TYPE(obj))) return Py_NewRef(obj);
    return PyObject_GenericGetDict(obj, NULL);
}

/* The field index of name in a runtime layout (mr_name_index), or -1 (not a field). */
static inline Py_ssize_t
mr_runtime_index(PyObject *name)
{
    return mr_name_index(mr_runtime_name_ptrs, mr_runtime_names(), MR_RF_N, name);
}

/* A borrowed reference to state[name] of a state from mr_runtime_state (same memo): the item of
 * an instance dict, or the slot of a layout instance; NULL with no exception when missing or
 * empty (also for a non-dict state memo does not hold), NULL with an exception on error. Runs
 * no Python code (exact str names). */
static inline PyObject *
mr_runtime_state_get(const mr_class_memo *memo, PyObject *state, PyObject *name)
{
    if (PyDict_Check(state)) return PyDict_GetItemWithError(state, name);
    if (memo->memo.cls == NULL || (PyObject *)Py_TYPE(state) != memo->memo.cls) return NULL;
    Py_ssize_t index = mr_runtime_index(name);
    if (index < 0) return NULL;
    return ((mr_layout_object *)state)->fields[index];
}

/* Registers this file's functions on the module; returns 0 or -1 with an exception set. */
int Init_Layout(PyObject *module);

/* Before fragment i of a list or tuple of n C-owned layout fragments (lc accepted by
 * mr_pf_layout) is read: ask for the fragment 2 * ahead further on and for the field objects of
 * the one ahead further on (its slots asked for a round earlier). The field objects are read
 * (and their reference counts written) when the fragment is, scattered in memory at scale.
 * Hints only: borrowed pointers, nothing kept, no Python code runs; a field is loaded only from
 * an exact instance of lc's class. Always inlined: GCC 12 at -O3 drops the calls to a static
 * function whose only effect is prefetches. */
static inline __attribute__((always_inline)) void
mr_pf_prefetch_ahead(PyObject *seq, Py_ssize_t i, Py_ssize_t n, const mr_layout_class *lc, Py_ssize_t ahead)
{
    int list = PyList_Check(seq);
    if (!list && !PyTuple_Check(seq)) return;
    Py_ssize_t size = list ? PyList_Size(seq) : PyTuple_Size(seq); /* a list may have shrunk */
    if (size < n) n = size;
    if (i + 2 * ahead < n) {
        const char *far = (const char *)(list ? PyList_GetItem(seq, i + 2 * ahead) : PyTuple_GetItem(seq, i + 2 * ahead));
        if (far != NULL) {
            __builtin_prefetch(far);
            __builtin_prefetch(far + 64);
        }
    }
    if (i + ahead < n) {
        PyObject *near = list ? PyList_GetItem(seq, i + ahead) : PyTuple_GetItem(seq, i + ahead);
        PyObject *const *f = near != NULL ? mr_layout_fields(near, lc) : NULL;
        if (f != NULL) {
            for (int k = 0; k < MR_PF_N; k++) {
                if (f[k] != NULL) __builtin_prefetch(f[k], 1);
            }
        }
    }
}

#endif
