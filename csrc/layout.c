/* C-owned value layouts: the layout base types (layout.h has the reading and building helpers
 * other files use) and a few entry points for the tests and benchmarks/layout_reads.py.
 *
 * value_base(name, fields) builds a module whose state describes the layout (MR_LAYOUT_MODULE,
 * an mr_layout_info) and the layout base, a heap type made with that module
 * (PyType_FromModuleAndSpec: immutable, GC, a direct subclass of object, one T_OBJECT_EX member
 * per field at offsetof(mr_layout_object, fields[i])). The base holds its module; the module
 * knows the base's address (identity only). (Until session 23 the base derived from a mutable
 * "anchor" type holding a capsule as a class attribute: CPython 3.13 warns about an immutable
 * type with a mutable base, and 3.14 refuses to make one.) A Python
 * subclass's instances are dealt with by subtype_dealloc / subtype_traverse / subtype_clear,
 * which clear its own slots (weak references included), then call the base's functions below;
 * the base's dealloc releases the reference the instance holds on its (exact) heap type.
 *
 * On CPython 3.10 and 3.11 PyType_FromSpec keeps pointers to the spec's name and to the
 * members' names, so those live in a spec block that is never freed; blocks are interned by
 * (name, fields), so building the same layout again reuses its block (memory stays bounded by
 * the distinct layouts built). The traverse / clear / dealloc functions exist once per field
 * count (macro-generated below), so each knows its n without reading the type. */
#include "layout.h"
#include "gctrack.h"
#include <limits.h>
#include <structmember.h>

#define LY_MAX_NAME 200

static int
ly_traverse_n(PyObject *self, visitproc visit, void *arg, Py_ssize_t n)
{
    PyObject **fields = ((mr_layout_object *)self)->fields;
    for (Py_ssize_t i = 0; i < n; i++) Py_VISIT(fields[i]);
    /* instances of a heap type hold a reference to it */
    Py_VISIT((PyObject *)Py_TYPE(self));
    return 0;
}

static int
ly_clear_n(PyObject *self, Py_ssize_t n)
{
    PyObject **fields = ((mr_layout_object *)self)->fields;
    for (Py_ssize_t i = 0; i < n; i++) Py_CLEAR(fields[i]);
    return 0;
}

static void
ly_dealloc_n(PyObject *self, Py_ssize_t n)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    (void)ly_clear_n(self, n);
    freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_fn(self);
    Py_DECREF((PyObject *)type);
}

#define LY_FUNCS(N)                                                                              \
    static int ly_traverse_##N(PyObject *self, visitproc visit, void *arg)                        \
    {                                                                                            \
        return ly_traverse_n(self, visit, arg, N);                                               \
    }                                                                                            \
    static int ly_clear_##N(PyObject *self) { return ly_clear_n(self, N); }                      \
    static void ly_dealloc_##N(PyObject *self) { ly_dealloc_n(self, N); }

#define LY_FUNCS8(A, B, C, D, E, F, G, H)                                                        \
    LY_FUNCS(A) LY_FUNCS(B) LY_FUNCS(C) LY_FUNCS(D) LY_FUNCS(E) LY_FUNCS(F) LY_FUNCS(G) LY_FUNCS(H)

LY_FUNCS8(1, 2, 3, 4, 5, 6, 7, 8)
LY_FUNCS8(9, 10, 11, 12, 13, 14, 15, 16)
LY_FUNCS8(17, 18, 19, 20, 21, 22, 23, 24)
LY_FUNCS8(25, 26, 27, 28, 29, 30, 31, 32)
LY_FUNCS8(33, 34, 35, 36, 37, 38, 39, 40)
LY_FUNCS8(41, 42, 43, 44, 45, 46, 47, 48)
LY_FUNCS8(49, 50, 51, 52, 53, 54, 55, 56)
LY_FUNCS8(57, 58, 59, 60, 61, 62, 63, 64)

typedef struct {
    traverseproc traverse;
    inquiry clear;
    destructor dealloc;
} ly_gc_funcs;

#define LY_ENTRY(N) {ly_traverse_##N, ly_clear_##N, ly_dealloc_##N}
#define LY_ENTRIES8(A, B, C, D, E, F, G, H)                                                      \
    LY_ENTRY(A), LY_ENTRY(B), LY_ENTRY(C), LY_ENTRY(D), LY_ENTRY(E), LY_ENTRY(F), LY_ENTRY(G),   \
        LY_ENTRY(H)

/* ly_gc[n - 1]: the functions of a base of n fields */
static const ly_gc_funcs ly_gc[MR_LAYOUT_MAX_FIELDS] = {
    LY_ENTRIES8(1, 2, 3, 4, 5, 6, 7, 8),         LY_ENTRIES8(9, 10, 11, 12, 13, 14, 15, 16),
    LY_ENTRIES8(17, 18, 19, 20, 21, 22, 23, 24), LY_ENTRIES8(25, 26, 27, 28, 29, 30, 31, 32),
    LY_ENTRIES8(33, 34, 35, 36, 37, 38, 39, 40), LY_ENTRIES8(41, 42, 43, 44, 45, 46, 47, 48),
    LY_ENTRIES8(49, 50, 51, 52, 53, 54, 55, 56), LY_ENTRIES8(57, 58, 59, 60, 61, 62, 63, 64),
};

/* ---- Spec blocks (never freed; interned) -------------------------------------------------- */

typedef struct ly_block {
    struct ly_block *next;
    Py_ssize_t n;
    char *short_name;     /* name as given (UTF-8) */
    char *name;           /* "mooncake.reshard._native.<name>" */
    char **field_names;   /* n UTF-8 names */
    PyMemberDef *members; /* n + 1 */
    PyType_Slot slots[5];
    PyType_Spec spec;
} ly_block;

static ly_block *ly_blocks = NULL; /* GIL-protected list of every block built */

#define LY_PREFIX "mooncake.reshard._native."

/* A NUL-terminated copy of prefix + text + suffix (PyMem), or NULL with MemoryError. */
static char *
ly_concat(const char *prefix, const char *text, Py_ssize_t len, const char *suffix)
{
    size_t a = strlen(prefix), c = strlen(suffix), total;
    if (len < 0 || __builtin_add_overflow(a, (size_t)len, &total) || __builtin_add_overflow(total, c + 1, &total)) {
        PyErr_NoMemory();
        return NULL;
    }
    char *out = PyMem_Malloc(total);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(out, prefix, a);
    memcpy(out + a, text, (size_t)len);
    memcpy(out + a + (size_t)len, suffix, c + 1);
    return out;
}

/* The interned block for (name, names[0..n-1]) (UTF-8), built on first use; NULL with an
 * exception. A half-built block is freed (it was never handed to PyType_FromSpec). */
static ly_block *
ly_block_for(const char *name, Py_ssize_t name_len, const char *const *names, const Py_ssize_t *lens,
             Py_ssize_t n)
{
    for (ly_block *b = ly_blocks; b != NULL; b = b->next) {
        if (b->n != n || strlen(b->short_name) != (size_t)name_len || memcmp(b->short_name, name, (size_t)name_len))
            continue;
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            if (strlen(b->field_names[i]) != (size_t)lens[i] || memcmp(b->field_names[i], names[i], (size_t)lens[i]))
                break;
        }
        if (i == n) return b;
    }
    ly_block *b = PyMem_Calloc(1, sizeof(ly_block));
    if (b == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    b->n = n;
    b->short_name = ly_concat("", name, name_len, "");
    b->name = ly_concat(LY_PREFIX, name, name_len, "");
    b->field_names = mr_alloc_array((size_t)n, sizeof(char *));
    b->members = mr_alloc_array((size_t)n + 1, sizeof(PyMemberDef));
    int failed = b->short_name == NULL || b->name == NULL || b->field_names == NULL || b->members == NULL;
    if (b->field_names != NULL) memset(b->field_names, 0, (size_t)n * sizeof(char *));
    for (Py_ssize_t i = 0; !failed && i < n; i++) {
        b->field_names[i] = ly_concat("", names[i], lens[i], "");
        if (b->field_names[i] == NULL) failed = 1;
    }
    if (failed) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        if (b->field_names != NULL) {
            for (Py_ssize_t i = 0; i < n; i++) PyMem_Free(b->field_names[i]);
        }
        PyMem_Free(b->field_names);
        PyMem_Free(b->members);
        PyMem_Free(b->name);
        PyMem_Free(b->short_name);
        PyMem_Free(b);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        b->members[i].name = b->field_names[i];
        b->members[i].type = T_OBJECT_EX;
        b->members[i].offset = (Py_ssize_t)(offsetof(mr_layout_object, fields) + (size_t)i * sizeof(PyObject *));
        b->members[i].flags = 0;
        b->members[i].doc = NULL;
    }
    memset(&b->members[n], 0, sizeof(PyMemberDef));
    const ly_gc_funcs *gc = &ly_gc[n - 1];
    b->slots[0] = (PyType_Slot){Py_tp_traverse, (void *)gc->traverse};
    b->slots[1] = (PyType_Slot){Py_tp_clear, (void *)gc->clear};
    b->slots[2] = (PyType_Slot){Py_tp_dealloc, (void *)gc->dealloc};
    b->slots[3] = (PyType_Slot){Py_tp_members, b->members};
    b->slots[4] = (PyType_Slot){0, NULL};
    b->spec = (PyType_Spec){
        .name = b->name,
        .basicsize = (int)(offsetof(mr_layout_object, fields) + (size_t)n * sizeof(PyObject *)),
        .itemsize = 0,
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
        .slots = b->slots,
    };
    b->next = ly_blocks;
    ly_blocks = b;
    return b;
}

/* ---- The layout's module ---------------------------------------------------------------- */

/* Its state (an mr_layout_info, zeroed when the module is made) owns one object, the tuple of
 * field names (str: nothing that can lead back to the module, so no m_clear is needed); m_free
 * drops it when the module goes (with its base, which holds it). */
static int
ly_module_traverse(PyObject *module, visitproc visit, void *arg)
{
    mr_layout_info *info = PyModule_GetState(module);
    if (info == NULL) return 0;
    Py_VISIT(info->names);
    return 0;
}

static void
ly_module_free(void *module)
{
    mr_layout_info *info = PyModule_GetState((PyObject *)module); /* (a module: cannot fail) */
    if (info == NULL) return;
    info->base = NULL;
    Py_CLEAR(info->names);
}

static PyModuleDef ly_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = MR_LAYOUT_MODULE,
    .m_doc = "The description of one C layout base (mooncake_reshard/_layout.py value_base).",
    .m_size = (Py_ssize_t)sizeof(mr_layout_info),
    .m_traverse = ly_module_traverse,
    .m_free = ly_module_free,
};

/* 1 when s (exact str) is an identifier, 0 when not, -1 with an exception. */
static int
ly_is_identifier(PyObject *s)
{
    PyObject *r = PyObject_CallMethod(s, "isidentifier", NULL);
    if (r == NULL) return -1;
    int ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok;
}

/* 1 when s starts and ends with "__" (dunder names are not fields here), 0 otherwise. */
static int
ly_is_dunder(const char *s, Py_ssize_t len)
{
    return len >= 4 && s[0] == '_' && s[1] == '_' && s[len - 1] == '_' && s[len - 2] == '_';
}

/* 0 when an entry point got want arguments, else -1 with TypeError. */
static int
ly_nargs(Py_ssize_t nargs, Py_ssize_t want, const char *name)
{
    if (nargs == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd arguments (%zd given)", name, want, nargs);
    return -1;
}

PyDoc_STRVAR(value_base_doc,
"value_base(name, fields, /)\n"
"--\n\n"
"A new C layout base type for a value class: instances hold one object per field, in the order\n"
"of ``fields``, exposed as member descriptors (an empty field raises AttributeError). ``name``\n"
"and every field are identifiers (fields: 1 to 64 distinct names, no dunders). The type is\n"
"immutable; derive a frozen dataclass from it with ``__slots__ = (\"__weakref__\",)`` (see\n"
"``mooncake_reshard/_layout.py``).");

static PyObject *
value_base(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (ly_nargs(nargs, 2, "value_base") < 0) return NULL;
    PyObject *name = args[0], *fields = args[1];
    if (!PyUnicode_CheckExact(name)) {
        PyErr_SetString(PyExc_TypeError, "value_base() name must be a str");
        return NULL;
    }
    if (!PyTuple_CheckExact(fields)) {
        PyErr_SetString(PyExc_TypeError, "value_base() fields must be a tuple of str");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(fields);
    if (n < 1 || n > MR_LAYOUT_MAX_FIELDS) {
        PyErr_Format(PyExc_ValueError, "value_base() takes 1 to %d fields, not %zd", MR_LAYOUT_MAX_FIELDS, n);
        return NULL;
    }
    Py_ssize_t name_len;
    const char *name_utf8 = PyUnicode_AsUTF8AndSize(name, &name_len);
    if (name_utf8 == NULL) return NULL;
    int ident = ly_is_identifier(name);
    if (ident < 0) return NULL;
    if (!ident || name_len > LY_MAX_NAME) {
        PyErr_SetString(PyExc_ValueError, "value_base() name must be an identifier of at most 200 bytes");
        return NULL;
    }
    const char *names[MR_LAYOUT_MAX_FIELDS];
    Py_ssize_t lens[MR_LAYOUT_MAX_FIELDS];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *field = PyTuple_GetItem(fields, i);
        if (field == NULL) return NULL;
        if (!PyUnicode_CheckExact(field)) {
            PyErr_SetString(PyExc_TypeError, "value_base() fields must be a tuple of str");
            return NULL;
        }
        names[i] = PyUnicode_AsUTF8AndSize(field, &lens[i]);
        if (names[i] == NULL) return NULL;
        ident = ly_is_identifier(field);
        if (ident < 0) return NULL;
        if (!ident || ly_is_dunder(names[i], lens[i]) || lens[i] > LY_MAX_NAME) {
            PyErr_Format(PyExc_ValueError, "value_base() field %R is not a plain identifier", field);
            return NULL;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            if (lens[j] == lens[i] && memcmp(names[j], names[i], (size_t)lens[i]) == 0) {
                PyErr_Format(PyExc_ValueError, "value_base() field %R is repeated", field);
                return NULL;
            }
        }
    }
    ly_block *block = ly_block_for(name_utf8, name_len, names, lens, n);
    if (block == NULL) return NULL;
    PyObject *module = PyModule_Create(&ly_module_def);
    if (module == NULL) return NULL;
    mr_layout_info *info = PyModule_GetState(module);
    if (info == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "value_base(): layout module has no state");
        Py_DECREF(module);
        return NULL;
    }
    info->dealloc = (void *)ly_gc[n - 1].dealloc;
    info->n = n;
    info->names = Py_NewRef(fields);
    PyObject *base = PyType_FromModuleAndSpec(module, &block->spec, NULL);
    Py_DECREF(module); /* the base holds it (or, on failure, the module goes with its state) */
    if (base == NULL) return NULL;
    info->base = base; /* (identity only: see mr_layout_info) */
    return base;
}

PyDoc_STRVAR(layout_info_doc,
"layout_info(cls, /)\n"
"--\n\n"
"``(base, fields)`` when ``cls`` derives from a ``value_base`` type (``base``, whose field names\n"
"in layout order are ``fields``) found as the per-pass check finds it, else None.");

static PyObject *
layout_info(PyObject *self, PyObject *cls)
{
    (void)self;
    PyObject *base, *mro;
    Py_ssize_t index;
    const mr_layout_info *info = mr_layout_find(cls, &base, &index, &mro);
    if (info == NULL) Py_RETURN_NONE;
    PyObject *result = PyTuple_Pack(2, base, info->names);
    Py_DECREF(mro);
    return result;
}

/* n from a Python int for the test entry points: 1 and *n set, 0 when out of range (no
 * exception), -1 with TypeError when not an int. */
static int
ly_count_arg(PyObject *obj, Py_ssize_t *n)
{
    if (!PyLong_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "field count must be an int");
        return -1;
    }
    Py_ssize_t v = PyLong_AsSsize_t(obj);
    if (v == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return 0;
    }
    if (v < 0 || v > MR_LAYOUT_MAX_FIELDS) return 0;
    *n = v;
    return 1;
}

/* The per-pass check of cls against fields: a tuple of the field names in layout order
 * (mr_layout_check_fields) or their count (an int; out of range declines). Fills *lc (cls NULL
 * when declined); -1 with TypeError when fields is neither. */
static int
ly_check_arg(PyObject *cls, PyObject *fields, mr_layout_class *lc)
{
    lc->cls = NULL;
    lc->n = 0;
    if (PyTuple_Check(fields)) {
        (void)mr_layout_check_fields(lc, cls, 0, fields);
        return 0;
    }
    Py_ssize_t n = 0;
    int in_range = ly_count_arg(fields, &n);
    if (in_range < 0) return -1;
    if (in_range) (void)mr_layout_check(lc, cls, n);
    return 0;
}

PyDoc_STRVAR(layout_check_doc,
"layout_check(cls, n, /)\n"
"--\n\n"
"Test entry point: True when the C per-pass check (``mr_layout_check``) accepts ``cls`` as a\n"
"class built on a layout base of exactly ``n`` fields whose instances C may read by direct\n"
"loads, else False. ``n`` may also be the tuple of the expected field names in layout order\n"
"(``mr_layout_check_fields``).");

static PyObject *
layout_check(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (ly_nargs(nargs, 2, "layout_check") < 0) return NULL;
    mr_layout_class lc;
    if (ly_check_arg(args[0], args[1], &lc) < 0) return NULL;
    if (lc.cls == NULL) Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(layout_read_doc,
"layout_read(objects, cls, n, /)\n"
"--\n\n"
"Test entry point: for each object of the list, the tuple of its ``n`` fields read by\n"
"``mr_layout_fields_set`` (one check of ``cls`` for the whole list), or None where that\n"
"declines (not exactly ``cls``, an empty field, or ``cls`` failing the check).");

static PyObject *
layout_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (ly_nargs(nargs, 3, "layout_read") < 0) return NULL;
    PyObject *objects = args[0];
    if (!PyList_CheckExact(objects)) {
        PyErr_SetString(PyExc_TypeError, "layout_read() objects must be a list");
        return NULL;
    }
    Py_ssize_t n = 0;
    int in_range = ly_count_arg(args[2], &n);
    if (in_range < 0) return NULL;
    mr_layout_class lc = {NULL, 0};
    if (in_range) (void)mr_layout_check(&lc, args[1], n);
    Py_ssize_t count = PyList_Size(objects);
    PyObject *out = mr_gc_hide(PyList_New(count)); /* until full: the items' allocations may collect (gctrack.h) */
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *obj = PyList_GetItem(objects, k); /* borrowed; the list is not changed below */
        if (obj == NULL) goto fail;
        PyObject *const *fields = mr_layout_fields_set(obj, &lc);
        PyObject *item;
        if (fields == NULL) {
            item = Py_NewRef(Py_None);
        } else {
            item = PyTuple_New(n);
            if (item == NULL) goto fail;
            for (Py_ssize_t i = 0; i < n; i++) PyTuple_SetItem(item, i, Py_NewRef(fields[i]));
        }
        PyList_SetItem(out, k, item);
    }
    mr_gc_show(out); /* full */
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

PyDoc_STRVAR(layout_new_doc,
"layout_new(cls, values, /)\n"
"--\n\n"
"Test entry point: an instance of exactly ``cls`` built by ``mr_layout_new`` from the tuple\n"
"``values`` (no ``__init__``; untracked by the collector when every value is inert).\n"
"TypeError when ``cls`` fails the per-pass check for ``len(values)`` fields.");

static PyObject *
layout_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (ly_nargs(nargs, 2, "layout_new") < 0) return NULL;
    PyObject *values = args[1];
    if (!PyTuple_CheckExact(values)) {
        PyErr_SetString(PyExc_TypeError, "layout_new() values must be a tuple");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(values);
    mr_layout_class lc;
    if (!mr_layout_check(&lc, args[0], n)) {
        PyErr_SetString(PyExc_TypeError, "layout_new() class is not a value layout of len(values) fields");
        return NULL;
    }
    PyObject *items[MR_LAYOUT_MAX_FIELDS];
    for (Py_ssize_t i = 0; i < n; i++) {
        items[i] = PyTuple_GetItem(values, i);
        if (items[i] == NULL) return NULL;
    }
    return mr_layout_new(&lc, items, n);
}

/* ---- Measurement entry point (benchmarks/layout_reads.py) --------------------------------- */

#define LY_AHEAD 12
#define LY_AHEAD_DICT 6

PyDoc_STRVAR(layout_read_bench_doc,
"layout_read_bench(objects, cls, names, mode, /)\n"
"--\n\n"
"Measurement entry point: reads the fields ``names`` (in order) of every object of the list and\n"
"returns a checksum of the field pointers. mode 0: direct loads through ``mr_layout_fields_set``\n"
"(the layout is checked once for ``len(names)`` fields, ``cls`` must pass); 1: the same with the\n"
"object 12 ahead prefetched; 2: the instance dict (``PyObject_GenericGetDict`` +\n"
"``PyDict_GetItem`` per name, what the core does for dict-backed values); 3: the same with the\n"
"object 12 ahead and its dict 6 ahead prefetched (as ``revalidate_side`` does). ValueError when\n"
"an object declines.");

/* Prefetch the instance dict of a dict-backed object (loading its dict pointer is the miss the
 * dict path cannot avoid). */
static void
ly_prefetch_own_dict(PyObject *obj)
{
    PyObject *own = obj == NULL ? NULL : PyObject_GenericGetDict(obj, NULL);
    if (own == NULL) {
        PyErr_Clear();
        return;
    }
    __builtin_prefetch(own);
    __builtin_prefetch((const char *)own + 32);
    Py_DECREF(own);
}

static PyObject *
layout_read_bench(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (ly_nargs(nargs, 4, "layout_read_bench") < 0) return NULL;
    PyObject *objects = args[0], *cls = args[1], *names = args[2];
    if (!PyList_CheckExact(objects) || !PyTuple_CheckExact(names)) {
        PyErr_SetString(PyExc_TypeError, "layout_read_bench() takes a list and a tuple of names");
        return NULL;
    }
    long mode = PyLong_Check(args[3]) ? PyLong_AsLong(args[3]) : -1;
    if (mode == -1 && PyErr_Occurred()) return NULL;
    if (mode < 0 || mode > 3) {
        PyErr_SetString(PyExc_ValueError, "layout_read_bench() mode must be 0, 1, 2 or 3");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(names);
    if (n < 1 || n > MR_LAYOUT_MAX_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "layout_read_bench() takes 1 to 64 names");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(PyTuple_GetItem(names, i))) {
            PyErr_SetString(PyExc_TypeError, "layout_read_bench() names must be str");
            return NULL;
        }
    }
    mr_layout_class lc = {NULL, 0};
    if (mode <= 1) {
        /* the layout may have more fields than are read: check against the base's count */
        PyObject *base, *mro;
        Py_ssize_t index;
        const mr_layout_info *info = mr_layout_find(cls, &base, &index, &mro);
        if (info != NULL) Py_DECREF(mro);
        if (info == NULL || info->n < n || !mr_layout_check(&lc, cls, info->n)) {
            PyErr_SetString(PyExc_ValueError, "layout_read_bench() class is not a value layout");
            return NULL;
        }
    }
    uint64_t sum = 0;
    Py_ssize_t count = PyList_Size(objects);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *obj = PyList_GetItem(objects, k);
        if (obj == NULL) return NULL;
        if (mode == 1 || mode == 3) {
            if (k + LY_AHEAD < count) __builtin_prefetch(PyList_GetItem(objects, k + LY_AHEAD));
            if (mode == 3 && k + LY_AHEAD_DICT < count) ly_prefetch_own_dict(PyList_GetItem(objects, k + LY_AHEAD_DICT));
        }
        if (mode <= 1) {
            PyObject *const *fields = mr_layout_fields_set(obj, &lc);
            if (fields == NULL) goto declined;
            for (Py_ssize_t i = 0; i < n; i++) sum += (uint64_t)(uintptr_t)fields[i] >> 4;
        } else {
            PyObject *dict = PyObject_GenericGetDict(obj, NULL);
            if (dict == NULL) return NULL;
            int ok = PyDict_Check(dict);
            for (Py_ssize_t i = 0; ok && i < n; i++) {
                PyObject *value = PyDict_GetItemWithError(dict, PyTuple_GetItem(names, i));
                if (value == NULL) ok = 0;
                else sum += (uint64_t)(uintptr_t)value >> 4;
            }
            Py_DECREF(dict);
            if (PyErr_Occurred()) return NULL;
            if (!ok) goto declined;
        }
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)sum);
declined:
    PyErr_SetString(PyExc_ValueError, "layout_read_bench() an object declined");
    return NULL;
}

/* ---- Builders: a class checked once, instances built by a call --------------------------- */

/* A builder holds a class that passed the layout check for n fields when the builder was made.
 * What the builder relies on (instances of exactly cls have n field slots) cannot change
 * afterwards: a class's bases and an object's class can only be reassigned between compatible
 * layouts, and the layout base is immutable. A field shadowed later (a property) does not
 * concern building: the slots are still the storage, as a dict-backed instance's dict is. */
typedef struct {
    PyObject_HEAD
    PyObject *cls;
    Py_ssize_t n;
    int store; /* layout_storer: fill an existing instance (its first argument) instead */
    /* layout_storer with shared tuples (mooncake_reshard/_shared_tuples.py): the namespace
     * holding SHARED (the table) and SHARED_MAX, read at every call, and which fields share. */
    PyObject *shared_ns;
    char shared[MR_LAYOUT_MAX_FIELDS];
} ly_builder;

static PyObject *ly_builder_type = NULL; /* created once by Init_Layout */

/* TransferRegion's field names (layout.h mr_region_names), created once by Init_Layout. */
static PyObject *ly_region_names = NULL;

PyObject *
mr_region_names(void)
{
    return ly_region_names;
}

/* RuntimeBindingFragment's field names (layout.h mr_runtime_names, mr_runtime_name_ptrs), created
 * once by Init_Layout. */
static PyObject *ly_runtime_names = NULL;
PyObject *mr_runtime_name_ptrs[MR_RF_N];

PyObject *
mr_runtime_names(void)
{
    return ly_runtime_names;
}

/* PlacementFragment's field names (layout.h mr_pf_names, mr_pf_name_ptrs), created once by
 * Init_Layout. */
static PyObject *ly_pf_names = NULL;
PyObject *mr_pf_name_ptrs[MR_PF_N];

PyObject *
mr_pf_names(void)
{
    return ly_pf_names;
}

/* An exact tuple of the n names, interned (kept for the process by the caller); NULL with an
 * exception. */
static PyObject *
ly_interned_names(const char *const *names, int n)
{
    PyObject *tuple = PyTuple_New(n);
    if (tuple == NULL) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *name = PyUnicode_InternFromString(names[k]);
        if (name == NULL || PyTuple_SetItem(tuple, k, name) < 0) { /* steals name */
            Py_DECREF(tuple);
            return NULL;
        }
    }
    return tuple;
}

static int
ly_builder_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((ly_builder *)self)->cls);
    Py_VISIT(((ly_builder *)self)->shared_ns);
    Py_VISIT((PyObject *)Py_TYPE(self));
    return 0;
}

static int
ly_builder_clear(PyObject *self)
{
    Py_CLEAR(((ly_builder *)self)->cls);
    Py_CLEAR(((ly_builder *)self)->shared_ns);
    return 0;
}

static void
ly_builder_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    (void)ly_builder_clear(self);
    freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_fn(self);
    Py_DECREF((PyObject *)type);
}

static PyObject *ly_storer_call(ly_builder *b, PyObject *args);

static PyObject *
ly_builder_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    ly_builder *b = (ly_builder *)self;
    if (kwargs != NULL && PyDict_Check(kwargs) && PyDict_Size(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "layout builder takes positional field values only");
        return NULL;
    }
    if (b->cls == NULL || !PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "layout builder is not usable");
        return NULL;
    }
    if (b->store) return ly_storer_call(b, args);
    Py_ssize_t n = PyTuple_Size(args);
    if (n != b->n) {
        PyErr_Format(PyExc_TypeError, "layout builder takes %zd field values (%zd given)", b->n, n);
        return NULL;
    }
    PyObject *items[MR_LAYOUT_MAX_FIELDS];
    for (Py_ssize_t i = 0; i < n; i++) {
        items[i] = PyTuple_GetItem(args, i);
        if (items[i] == NULL) return NULL;
    }
    mr_layout_class lc = {b->cls, b->n};
    return mr_layout_new(&lc, items, n);
}

/* The namespace keys "SHARED" and "SHARED_MAX", interned, created once by Init_Layout. */
static PyObject *ly_shared_key = NULL, *ly_shared_max_key = NULL;

/* The shared tuple table of namespace ns (borrowed) and its limit: 0, or -1 with an exception (a
 * namespace without a dict SHARED or an int SHARED_MAX). Exact dict, interned exact-str keys: no
 * Python code runs. */
static int
ly_shared_table(PyObject *ns, PyObject **table, Py_ssize_t *limit)
{
    *table = PyDict_GetItemWithError(ns, ly_shared_key);
    PyObject *limit_obj = *table == NULL ? NULL : PyDict_GetItemWithError(ns, ly_shared_max_key);
    if (*table == NULL || !PyDict_CheckExact(*table) || limit_obj == NULL || !PyLong_CheckExact(limit_obj)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "layout storer: the shared tuple table is missing");
        return -1;
    }
    *limit = PyLong_AsSsize_t(limit_obj);
    return *limit == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The object to store for a shared field's value (borrowed): the table's equal tuple, else value
 * itself (entered in the table, emptied first when it holds limit entries; a limit of 0 stores
 * value unshared). Only an exact tuple of exact ints is looked up: hashing and comparing it runs
 * no Python code. NULL with an exception (a failed dict operation). */
static PyObject *
ly_shared_value(PyObject *table, Py_ssize_t limit, PyObject *value)
{
    Py_ssize_t size = PyTuple_Size(value);
    for (Py_ssize_t k = 0; k < size; k++) {
        PyObject *item = PyTuple_GetItem(value, k); /* borrowed; in range */
        if (item == NULL || !PyLong_CheckExact(item)) {
            PyErr_Clear();
            return value;
        }
    }
    PyObject *found = PyDict_GetItemWithError(table, value);
    if (found != NULL) return found;
    if (PyErr_Occurred()) return NULL;
    if (PyDict_Size(table) >= limit) {
        PyDict_Clear(table);
        if (limit <= 0) return value; /* sharing switched off */
    }
    if (PyDict_SetItem(table, value, value) < 0) return NULL;
    return value;
}

/* layout_storer's call: storer(obj, v0, ..., vn-1) replaces the n fields of obj (an instance of
 * the checked class or of a subclass: the same slots, the base's) with new references to the
 * values, then untracks obj from the collector when it is exactly the class and every value is
 * inert (mr_layout_new's rule; a subclass instance stays tracked). TypeError (nothing stored)
 * for any other obj. */
static PyObject *
ly_storer_call(ly_builder *b, PyObject *args)
{
    Py_ssize_t n = PyTuple_Size(args);
    if (n < 0) return NULL;
    if (n != b->n + 1) {
        PyErr_Format(PyExc_TypeError, "layout storer takes an instance and %zd field values (%zd given)", b->n,
                     n - 1);
        return NULL;
    }
    PyObject *obj = PyTuple_GetItem(args, 0);
    if (obj == NULL) return NULL;
    if (!PyType_IsSubtype(Py_TYPE(obj), (PyTypeObject *)b->cls)) {
        PyErr_SetString(PyExc_TypeError, "layout storer: the object is not an instance of its class");
        return NULL;
    }
    /* (the checked class's layout: its n fields at the base's offsets, in a subclass too) */
    PyObject **fields = ((mr_layout_object *)obj)->fields;
    int inert = (PyObject *)Py_TYPE(obj) == b->cls;
    /* the values to store (borrowed: args holds them, the shared table its own) */
    PyObject *values[MR_LAYOUT_MAX_FIELDS];
    PyObject *table = NULL; /* the shared tuple table, read at the first shared tuple */
    Py_ssize_t limit = 0;
    for (Py_ssize_t i = 0; i < b->n; i++) {
        PyObject *value = PyTuple_GetItem(args, i + 1);
        if (value != NULL && b->shared_ns != NULL && b->shared[i] && PyTuple_CheckExact(value)) {
            if (table == NULL && ly_shared_table(b->shared_ns, &table, &limit) < 0) value = NULL;
            if (value != NULL) value = ly_shared_value(table, limit, value);
        }
        if (value == NULL) {
            for (Py_ssize_t k = 0; k < i; k++) Py_DECREF(values[k]);
            return NULL;
        }
        values[i] = Py_NewRef(value); /* held across the stores below (a table entry may go) */
        if (inert && !mr_gc_inert(value, MR_INERT_DEPTH)) inert = 0;
    }
    for (Py_ssize_t i = 0; i < b->n; i++) {
        PyObject *old = fields[i];
        fields[i] = Py_NewRef(values[i]);
        Py_XDECREF(old); /* (may run code: the new value is already in place) */
    }
    if (inert) {
        /* judged again after any old value's release: every field must still be a stored value */
        for (Py_ssize_t i = 0; i < b->n && inert; i++) {
            if (fields[i] != values[i]) inert = 0;
        }
        if (inert) (void)mr_untrack_inert(obj, NULL);
    }
    for (Py_ssize_t i = 0; i < b->n; i++) Py_DECREF(values[i]);
    Py_RETURN_NONE;
}

static PyType_Slot ly_builder_slots[] = {
    {Py_tp_call, (void *)ly_builder_call},
    {Py_tp_traverse, (void *)ly_builder_traverse},
    {Py_tp_clear, (void *)ly_builder_clear},
    {Py_tp_dealloc, (void *)ly_builder_dealloc},
    {0, NULL},
};

static PyType_Spec ly_builder_spec = {
    .name = "mooncake.reshard._native.LayoutBuilder",
    .basicsize = (int)sizeof(ly_builder),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = ly_builder_slots,
};

PyDoc_STRVAR(layout_builder_doc,
"layout_builder(cls, fields, /)\n"
"--\n\n"
"A callable building instances of exactly ``cls`` from its field values in layout order:\n"
"``builder(v0, ..., vn-1)`` stores them directly (no ``__init__`` / ``__post_init__``: the caller\n"
"has validated them; untracked by the collector when every value is inert). ``cls`` is checked\n"
"once, here (``mr_layout_check_fields``): ``fields`` is the tuple of its field names in layout\n"
"order (or their count). TypeError when ``cls`` fails the check.");

/* layout_builder / layout_storer (store) of (cls, fields). */
static PyObject *
ly_make_builder(PyObject *const *args, int store, const char *who)
{
    mr_layout_class lc;
    if (ly_check_arg(args[0], args[1], &lc) < 0) return NULL;
    if (lc.cls == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() class is not a value layout of these fields", who);
        return NULL;
    }
    if (ly_builder_type == NULL) {
        PyErr_Format(PyExc_SystemError, "%s() type not initialized", who);
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)ly_builder_type, Py_tp_alloc);
    if (alloc == NULL) {
        PyErr_Format(PyExc_SystemError, "%s() type has no allocator", who);
        return NULL;
    }
    PyObject *builder = alloc((PyTypeObject *)ly_builder_type, 0);
    if (builder == NULL) return NULL;
    ((ly_builder *)builder)->cls = Py_NewRef(lc.cls);
    ((ly_builder *)builder)->n = lc.n;
    ((ly_builder *)builder)->store = store;
    ((ly_builder *)builder)->shared_ns = NULL;
    memset(((ly_builder *)builder)->shared, 0, sizeof(((ly_builder *)builder)->shared));
    return builder;
}

static PyObject *
layout_builder(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (ly_nargs(nargs, 2, "layout_builder") < 0) return NULL;
    return ly_make_builder(args, 0, "layout_builder");
}

PyDoc_STRVAR(layout_storer_doc,
"layout_storer(cls, fields, shared=(), namespace=None, /)\n"
"--\n\n"
"A callable filling instances of ``cls`` or of a subclass (a hand-written ``__init__``'s last\n"
"step): ``storer(obj, v0, ..., vn-1)`` replaces obj's fields with the values in layout order (no\n"
"validation: the caller has validated them) and, when obj is exactly ``cls`` and every value is\n"
"inert, untracks it from the collector; TypeError (nothing stored) when obj is not an instance\n"
"of ``cls``. ``cls`` is checked once, here, as by ``layout_builder``. With ``shared`` (a tuple of\n"
"field positions) and ``namespace`` (a dict holding ``SHARED``, a dict, and ``SHARED_MAX``, an\n"
"int: ``mooncake_reshard._shared_tuples``), a value at a shared position that is an exact tuple\n"
"of exact ints is replaced by the table's equal tuple, or entered as that tuple.");

static PyObject *
layout_storer(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 && nargs != 4) {
        PyErr_Format(PyExc_TypeError, "layout_storer() takes 2 or 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *builder = ly_make_builder(args, 1, "layout_storer");
    if (builder == NULL || nargs == 2) return builder;
    ly_builder *b = (ly_builder *)builder;
    PyObject *positions = args[2], *ns = args[3];
    if (!PyDict_CheckExact(ns) || !PyTuple_CheckExact(positions)) {
        Py_DECREF(builder);
        PyErr_SetString(PyExc_TypeError, "layout_storer() shared positions must be a tuple and namespace a dict");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_Size(positions); k++) {
        PyObject *item = PyTuple_GetItem(positions, k); /* borrowed; in range */
        Py_ssize_t position = item != NULL && PyLong_CheckExact(item) ? PyLong_AsSsize_t(item) : -1;
        if (position < 0 || position >= b->n) {
            PyErr_Clear();
            Py_DECREF(builder);
            PyErr_SetString(PyExc_ValueError, "layout_storer() shared position out of range");
            return NULL;
        }
        b->shared[position] = 1;
    }
    b->shared_ns = Py_NewRef(ns);
    return builder;
}

/* Cold mode (layout.h mr_layout_memo, AUDIT40): the level, and the list of memos ever filled. */
int mr_memo_cold = 0;
static mr_layout_memo *ly_memo_list = NULL;

void
mr_memo_listed(mr_layout_memo *memo)
{
    if (memo->listed) return;
    memo->listed = 1;
    memo->next = ly_memo_list;
    ly_memo_list = memo;
}

PyDoc_STRVAR(layout_memos_cold_doc,
"layout_memos_cold(delta, /)\n"
"--\n\n"
"Enter (delta 1) or leave (delta -1) cold mode, which nests, and return the new level: while the\n"
"level is above 0, no per-call-site layout memo answers from what it holds, so every memo'd C\n"
"step decides as in a fresh process (csrc/layout.h mr_layout_memo). Entering from level 0\n"
"empties every memo first. For a call whose per-call proof (fields_unshadowed) failed. ValueError\n"
"for any other delta or below level 0.");

static PyObject *
layout_memos_cold(PyObject *Py_UNUSED(module), PyObject *arg)
{
    long delta = PyLong_CheckExact(arg) ? PyLong_AsLong(arg) : 0;
    if (delta == -1 && PyErr_Occurred()) return NULL;
    if ((delta != 1 && delta != -1) || (delta == -1 && mr_memo_cold <= 0) || (delta == 1 && mr_memo_cold == INT_MAX)) {
        PyErr_SetString(PyExc_ValueError, "layout_memos_cold: delta must be 1, or -1 in cold mode");
        return NULL;
    }
    mr_memo_cold += (int)delta; /* (first: a class released below may run code that reads a memo) */
    if (delta == 1 && mr_memo_cold == 1) {
        for (mr_layout_memo *memo = ly_memo_list; memo != NULL; memo = memo->next) mr_layout_memo_forget(memo);
    }
    return PyLong_FromLong(mr_memo_cold);
}

static PyObject *ly_mro_key = NULL; /* interned "__mro__", made once by Init_Layout */

PyDoc_STRVAR(layout_memos_unshadowed_doc,
"layout_memos_unshadowed(specs, /)\n"
"--\n\n"
"True when each (cls, names) pair of specs (an exact tuple of exact 2-tuples: the package's layout\n"
"classes) and each class a per-call-site layout memo holds, with the memo's names, passes\n"
"mr_fields_unshadowed (no class of its MRO up to the layout base holds a field's name, metaclass\n"
"exactly type, the generic __getattribute__): a memo hit then answers what the full check would\n"
"answer now. Else False (then run the call in cold mode: layout_memos_cold). The specs stay\n"
"proved when a nested cold call empties the memos. The per-call proof of the entry points whose\n"
"memo'd C steps stand for rules that read attributes (AUDIT40). Runs no Python code.");

/* 1 when a and b are exact tuples of the same items (identity: interned names). */
static int
ly_same_items(PyObject *a, PyObject *b)
{
    if (a == b) return 1;
    if (a == NULL || b == NULL || !PyTuple_CheckExact(a) || !PyTuple_CheckExact(b)) return 0;
    const Py_ssize_t n = PyTuple_Size(a);
    if (PyTuple_Size(b) != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyTuple_GetItem(a, i) != PyTuple_GetItem(b, i)) return 0; /* in range */
    }
    return 1;
}

static PyObject *
layout_memos_unshadowed(PyObject *Py_UNUSED(module), PyObject *specs)
{
    enum { LY_SEEN = 32 };
    /* (class, names, another names tuple of the same items) proved by this call: borrowed */
    PyObject *seen[LY_SEEN][3];
    int n_seen = 0;
    if (ly_mro_key == NULL || !PyTuple_CheckExact(specs)) Py_RETURN_FALSE;
    const Py_ssize_t n_specs = PyTuple_Size(specs);
    for (Py_ssize_t k = 0; k < n_specs; k++) {
        PyObject *spec = PyTuple_GetItem(specs, k); /* borrowed; in range */
        if (spec == NULL || !PyTuple_CheckExact(spec) || PyTuple_Size(spec) != 2
            || !mr_fields_unshadowed(PyTuple_GetItem(spec, 0), PyTuple_GetItem(spec, 1), NULL, NULL, ly_mro_key)) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
        if (n_seen < LY_SEEN) {
            seen[n_seen][0] = PyTuple_GetItem(spec, 0);
            seen[n_seen][1] = seen[n_seen][2] = PyTuple_GetItem(spec, 1);
            n_seen++;
        }
    }
    for (const mr_layout_memo *memo = ly_memo_list; memo != NULL; memo = memo->next) {
        if (memo->cls == NULL) continue;
        int known = 0;
        for (int k = 0; k < n_seen && !known; k++) {
            if (seen[k][0] != memo->cls) continue;
            /* (memos share a few names tuples: the items compared once per tuple and call) */
            known = memo->names == seen[k][1] || memo->names == seen[k][2];
            if (!known && ly_same_items(seen[k][1], memo->names)) {
                known = 1;
                seen[k][2] = memo->names;
            }
        }
        if (known) continue;
        if (memo->names == NULL || !mr_fields_unshadowed(memo->cls, memo->names, NULL, NULL, ly_mro_key)) {
            Py_RETURN_FALSE;
        }
        if (n_seen < LY_SEEN) {
            seen[n_seen][0] = memo->cls;
            seen[n_seen][1] = seen[n_seen][2] = memo->names;
            n_seen++;
        }
    }
    Py_RETURN_TRUE;
}

static PyMethodDef layout_methods[] = {
    {"layout_memos_cold", layout_memos_cold, METH_O, layout_memos_cold_doc},
    {"layout_memos_unshadowed", layout_memos_unshadowed, METH_O, layout_memos_unshadowed_doc},
    {"value_base", (PyCFunction)(void (*)(void))value_base, METH_FASTCALL, value_base_doc},
    {"layout_info", layout_info, METH_O, layout_info_doc},
    {"layout_check", (PyCFunction)(void (*)(void))layout_check, METH_FASTCALL, layout_check_doc},
    {"layout_read", (PyCFunction)(void (*)(void))layout_read, METH_FASTCALL, layout_read_doc},
    {"layout_new", (PyCFunction)(void (*)(void))layout_new, METH_FASTCALL, layout_new_doc},
    {"layout_builder", (PyCFunction)(void (*)(void))layout_builder, METH_FASTCALL, layout_builder_doc},
    {"layout_storer", (PyCFunction)(void (*)(void))layout_storer, METH_FASTCALL, layout_storer_doc},
    {"layout_read_bench", (PyCFunction)(void (*)(void))layout_read_bench, METH_FASTCALL, layout_read_bench_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_Layout(PyObject *module)
{
    if (ly_region_names == NULL) {
        static const char *const names[MR_RG_NFIELDS] = {
            "tensor_id",          "source",      "target",            "overlap_offset", "overlap_shape",
            "source_base_offset", "target_base_offset", "inner_bytes", "outer_loop_counts", "source_strides",
            "target_strides",
        };
        PyObject *tuple = PyTuple_New(MR_RG_NFIELDS);
        if (tuple == NULL) return -1;
        for (int k = 0; k < MR_RG_NFIELDS; k++) {
            PyObject *name = PyUnicode_InternFromString(names[k]);
            if (name == NULL || PyTuple_SetItem(tuple, k, name) < 0) { /* steals name */
                Py_DECREF(tuple);
                return -1;
            }
        }
        ly_region_names = tuple; /* kept for the process */
    }
    if (ly_runtime_names == NULL) {
        static const char *const names[MR_RF_N] = {
            "placement_fragment_id", "fragment_id",     "address",         "nbytes",
            "worker_id",             "endpoint",        "device",          "itemsize",
            "local_shape",           "strides_bytes",   "storage_address", "storage_nbytes",
            "storage_offset_bytes",  "owner",
        };
        ly_runtime_names = ly_interned_names(names, MR_RF_N); /* kept for the process */
        if (ly_runtime_names == NULL) return -1;
        for (int k = 0; k < MR_RF_N; k++) mr_runtime_name_ptrs[k] = PyTuple_GetItem(ly_runtime_names, k); /* in range */
    }
    if (ly_pf_names == NULL) {
        static const char *const names[MR_PF_N] = {
            "tensor_id", "global_offset", "local_shape", "nbytes", "rank", "pipeline_stage_id", "aliases",
            "placement_fragment_id",
        };
        ly_pf_names = ly_interned_names(names, MR_PF_N); /* kept for the process */
        if (ly_pf_names == NULL) return -1;
        for (int k = 0; k < MR_PF_N; k++) mr_pf_name_ptrs[k] = PyTuple_GetItem(ly_pf_names, k); /* in range */
    }
    if (ly_shared_key == NULL) {
        ly_shared_key = PyUnicode_InternFromString("SHARED"); /* kept for the process */
        if (ly_shared_key == NULL) return -1;
    }
    if (ly_shared_max_key == NULL) {
        ly_shared_max_key = PyUnicode_InternFromString("SHARED_MAX"); /* kept for the process */
        if (ly_shared_max_key == NULL) return -1;
    }
    if (ly_mro_key == NULL) {
        ly_mro_key = PyUnicode_InternFromString("__mro__"); /* kept for the process */
        if (ly_mro_key == NULL) return -1;
    }
    if (ly_builder_type == NULL) {
        ly_builder_type = PyType_FromSpec(&ly_builder_spec); /* kept for the process */
        if (ly_builder_type == NULL) return -1;
    }
    return PyModule_AddFunctions(module, layout_methods);
}
