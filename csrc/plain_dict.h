/* Plain instance dicts: the instance dicts a C pass may probe by key without running Python code.
 *
 * A dict lookup compares every stored key whose hash equals the probe's, unless identical, with
 * ``==``. An instance dict is writable (``obj.__dict__[key] = ...``, or a dict subclass assigned
 * to ``__dict__``), so a str subclass (or any object) with a colliding hash stored as a key runs
 * its ``__eq__`` inside ``PyDict_GetItemWithError`` or a generic ``getattr`` -- user code, while
 * the pass holds borrowed references and takes its decisions (tests/test_lead24_unsealed_keys.py,
 * tests/test_sound25_plain_dicts.py). The sealed gate refuses such graphs at entry (exact.c
 * inert_graph), but replace(), direct construction, unsealed binds and pickle restore reach the
 * fast revalidation without it, and a fact proved at its entry would not hold for its later passes
 * (a trace or profile hook, a signal handler or another thread can run Python code between them).
 * So each reader checks the dict it probes, in the pass that probes it: an exact dict whose keys
 * are all exact strs, where comparing two keys is unicode_compare (equal but not identical
 * strs are then found as Python finds them, with no Python code). The check is one PyDict_Next
 * walk of the dict's few keys; the pass holds the GIL and runs no Python code between it and the
 * probes, so nothing can add a key in between.
 *
 * Both readers fail with AttributeError, as for an object without an instance dict: every caller
 * then declines (the rule-by-rule path decides, reading the same attributes in Python). */
#ifndef MOONCAKE_RESHARD_PLAIN_DICT_H
#define MOONCAKE_RESHARD_PLAIN_DICT_H

#include <Python.h>

/* 1 when dict is an exact dict whose keys are all exact strs, else 0. Runs no Python code. */
static inline int
pd_plain_keys(PyObject *dict)
{
    if (!PyDict_CheckExact(dict)) return 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) return 0;
    }
    return 1;
}

/* The AttributeError of an instance dict the readers below refuse. */
static inline void
pd_refuse(void)
{
    PyErr_SetString(PyExc_AttributeError, "instance dict is not a plain dict of exact str keys");
}

/* PyObject_GenericGetDict(obj) for a reader that probes it by key: a new reference when it is
 * plain (pd_plain_keys), NULL with AttributeError when it is not or obj has no instance dict,
 * NULL with another error on failure. Runs no Python code. */
static inline PyObject *
pd_instance_dict(PyObject *obj)
{
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL || pd_plain_keys(dict)) return dict;
    Py_DECREF(dict);
    pd_refuse();
    return NULL;
}

/* pd_instance_dict(obj) that also takes, in the walk that checks the keys, the value stored
 * under each of the n names (interned exact strs: names[index[k]], or names[k] when index is
 * NULL) as that very key object: values[k] borrowed
 * (the returned dict holds it), or NULL when no key is the name itself -- the caller then looks
 * the name up, which finds a key equal to it but another object by unicode compare, as Python
 * finds it. Keys of a dict are distinct under ==, so a key identical to a name is the entry a
 * lookup of the name finds: the values are the lookups', one lookup fewer per field. Same
 * result and errors as pd_instance_dict (values all NULL on failure). Runs no Python code. */
static inline PyObject *
pd_instance_values(PyObject *obj, PyObject *const *names, const int *index, int n, PyObject **values)
{
    for (int k = 0; k < n; k++) values[k] = NULL;
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL) return NULL;
    int plain = PyDict_CheckExact(dict);
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    int left = n;
    while (plain && PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            plain = 0;
            break;
        }
        for (int k = 0; left > 0 && k < n; k++) {
            /* (the keys are distinct objects: a name is met at most once, values[k] still NULL) */
            if (key == names[index != NULL ? index[k] : k]) {
                values[k] = value;
                left--;
                break;
            }
        }
    }
    if (plain) return dict;
    for (int k = 0; k < n; k++) values[k] = NULL;
    Py_DECREF(dict);
    pd_refuse();
    return NULL;
}

/* pd_plain_keys(dict) that also takes, in the same walk, the value stored under each of the n
 * names (interned exact strs: names[index[k]], or names[k] when index is NULL) as that very key
 * object, as pd_instance_values does for an object's instance dict: values[k] borrowed (dict
 * holds it), or NULL when no key is the name itself (the caller then looks the name up). For a
 * dict already in hand (an instance dict another pass returned). 1 when plain, else 0 with the
 * values all NULL. Runs no Python code. */
static inline int
pd_plain_values(PyObject *dict, PyObject *const *names, const int *index, int n, PyObject **values)
{
    for (int k = 0; k < n; k++) values[k] = NULL;
    if (!PyDict_CheckExact(dict)) return 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    int left = n;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            for (int k = 0; k < n; k++) values[k] = NULL;
            return 0;
        }
        for (int k = 0; left > 0 && k < n; k++) {
            /* (the keys are distinct objects: a name is met at most once, values[k] still NULL) */
            if (key == names[index != NULL ? index[k] : k]) {
                values[k] = value;
                left--;
                break;
            }
        }
    }
    return 1;
}

/* 1 when ``dict`` is an exact dict holding exactly the n keys ``names[0..n)`` (interned exact
 * strs), stored in that order as those very objects; values[k] is then the value stored under
 * names[k] (borrowed: the dict holds it). 0 otherwise (values unspecified): the caller looks the
 * names up. Such a dict is plain (its keys are exact strs), and a lookup of names[k] finds the
 * very entry whose key is names[k] (the keys of a plain dict are distinct under ==): the values
 * are the lookups', with no lookup, for a dict read right after the walk (plain_dict.h's rule:
 * before any Python code can run). Runs no Python code. */
static inline int
pd_ordered_values(PyObject *dict, PyObject *const *names, Py_ssize_t n, PyObject **values)
{
    if (!PyDict_CheckExact(dict) || PyDict_Size(dict) != n) return 0;
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (k >= n || key != names[k]) return 0;
        values[k++] = value;
    }
    return k == n;
}

/* Classes whose instances have no instance dict (PyObject_GenericGetDict raised AttributeError
 * once: a class's layout never changes), per C file; strong references, kept for the process. */
#define PD_DICTLESS 8
static PyObject *pd_dictless[PD_DICTLESS];

/* 1 when a generic getattr of obj probes no instance dict that is not plain (obj has none, or
 * it is plain), 0 when it would, -1 with an error. Materializes the dict of an instance that
 * keeps its attributes inline (CPython 3.11+: what reading ``__dict__`` does). Runs no Python
 * code. */
static inline int
pd_getattr_safe(PyObject *obj)
{
    PyObject *cls = (PyObject *)Py_TYPE(obj);
    for (int k = 0; k < PD_DICTLESS && pd_dictless[k] != NULL; k++) {
        if (pd_dictless[k] == cls) return 1;
    }
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear(); /* no instance dict: a getattr reads descriptors (slots, layouts) only */
        for (int k = 0; k < PD_DICTLESS; k++) {
            if (pd_dictless[k] == NULL) {
                pd_dictless[k] = Py_NewRef(cls);
                break;
            }
        }
        return 1;
    }
    int plain = pd_plain_keys(dict);
    Py_DECREF(dict);
    return plain;
}

/* PyObject_GetAttr(obj, name) for a pass: NULL with AttributeError when obj's instance dict is
 * not plain (pd_getattr_safe). name: an interned exact str; obj: of a class whose attribute
 * lookup is the generic one (the caller checked its exact class, or declines anything else). */
static inline PyObject *
pd_getattr(PyObject *obj, PyObject *name)
{
    int safe = pd_getattr_safe(obj);
    if (safe <= 0) {
        if (safe == 0) pd_refuse();
        return NULL;
    }
    return PyObject_GetAttr(obj, name);
}

#endif
