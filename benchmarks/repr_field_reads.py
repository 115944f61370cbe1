#!/usr/bin/env python3
"""Cost of reading fields from C, per object, for three instance layouts of ``TransferRegion``.

A scratch C extension (its source is the ``C_SOURCE`` string below; it is compiled with the
stable ABI, ``Py_LIMITED_API=0x030A0000``, into ``--build-dir``, outside the package) reads
``--fields`` fields of every object of a list, in creation order and in a shuffled order, over
``--sizes`` objects, through:

* ``dict_getitem``  ``PyObject_GenericGetDict`` + ``PyDict_GetItemWithError`` per field (what the
                    core's state-dict readers do), on today's dict-backed instances;
* ``getattr``       ``PyObject_GetAttr`` per field, on each layout;
* ``slot_load``     a direct load at the slot's offset (exact-type check first; an empty slot
                    declines), on ``@dataclass(frozen=True, slots=True)`` instances. The offsets
                    are found once by a probe (``probe_offsets``): a fresh instance gets a fresh
                    sentinel object in each slot through ``object.__setattr__`` (the member
                    descriptor), then the words of the instance between ``sizeof(PyObject)`` and
                    ``__basicsize__`` are searched for each sentinel; every sentinel must be
                    found exactly once, every class attribute of a field name must be a
                    ``member_descriptor``, else the probe fails.

``*_prefetch`` variants prefetch as the core's ``revalidate_side`` does (object 12 ahead, its
instance dict 6 ahead; for slots the object only).

Layouts: ``dict`` (today: ``object.__new__`` + own ``__dict__`` filled in field order, a
key-sharing dict), ``inline`` (CPython 3.11: ``object.__setattr__`` per field, ``__dict__``
never materialized; values array without a dict object), ``slots``. Timing is taken inside C
(``clock_gettime(CLOCK_THREAD_CPUTIME_ID)``: time off the CPU on a shared machine is not
counted) around the loop only; each configuration is run ``--repeats`` times, interleaved, and
the median ns per object is printed (JSON).

Also times building all fields of a region from C (``build``): today's own-dict fill, the
generic ``object.__setattr__`` path for both layouts, and direct stores at the probed offsets.

    python benchmarks/repr_field_reads.py                       # 74k and 562k objects
    python benchmarks/repr_field_reads.py --sizes 73728 --repeats 11
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import types
from typing import Any, Dict, List

C_SOURCE = r"""
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A new array of the borrowed items of seq (the caller keeps seq alive while using it):
 * names != 0: seq is a tuple of 1..64 str (field names); else a non-empty list (objects). */
static PyObject **
borrowed_items(PyObject *seq, int names, Py_ssize_t *count)
{
    if (names ? !PyTuple_Check(seq) : !PyList_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, names ? "names must be a tuple" : "objs must be a list");
        return NULL;
    }
    Py_ssize_t n = names ? PyTuple_Size(seq) : PyList_Size(seq);
    if (n < 1 || n > (names ? 64 : PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(PyObject *))) {
        PyErr_SetString(PyExc_ValueError, "bad sequence size");
        return NULL;
    }
    PyObject **out = PyMem_Malloc((size_t)n * sizeof(PyObject *));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = names ? PyTuple_GetItem(seq, i) : PyList_GetItem(seq, i);
        if (item == NULL || (names && !PyUnicode_Check(item))) {
            PyMem_Free(out);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "names must be str");
            return NULL;
        }
        out[i] = item;
    }
    *count = n;
    return out;
}

static PyObject *
result(int64_t elapsed, Py_ssize_t n, uintptr_t check)
{
    return Py_BuildValue("(dK)", (double)elapsed / (double)n, (unsigned long long)check);
}

#define AHEAD_OBJECT 12 /* the distances revalidate.c's revalidate_side uses */
#define AHEAD_DICT 6

/* As revalidate.c's rs_prefetch / rs_prefetch_dict: the object AHEAD_OBJECT ahead, the instance
 * dict of the one AHEAD_DICT ahead (its object is cached by then). */
static void
prefetch_dict_stages(PyObject **items, Py_ssize_t n, Py_ssize_t i)
{
    if (i + AHEAD_OBJECT < n) {
        __builtin_prefetch(items[i + AHEAD_OBJECT]);
        __builtin_prefetch((const char *)items[i + AHEAD_OBJECT] + 64);
    }
    if (i + AHEAD_DICT < n) {
        PyObject *dict = PyObject_GenericGetDict(items[i + AHEAD_DICT], NULL);
        if (dict == NULL) {
            PyErr_Clear();
            return;
        }
        __builtin_prefetch(dict);
        __builtin_prefetch((const char *)dict + 32);
        Py_DECREF(dict);
    }
}

/* One field of obj: mode 0 a borrowed reference from its instance dict (PyObject_GenericGetDict +
 * PyDict_GetItemWithError, as the core's state-dict readers; *dict holds the dict over one
 * object's fields), mode 1 a new reference from PyObject_GetAttr. NULL with an error set. */
static PyObject *
field(int mode, PyObject *obj, PyObject *name, PyObject **dict)
{
    if (mode == 1) return PyObject_GetAttr(obj, name);
    if (*dict == NULL && (*dict = PyObject_GenericGetDict(obj, NULL)) == NULL) return NULL;
    PyObject *value = PyDict_GetItemWithError(*dict, name);
    if (value == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, name);
    return value;
}

/* read_fields(mode, objs, names, prefetch) -> (ns per object, checksum); mode as in field(). */
static PyObject *
read_fields(PyObject *self, PyObject *args)
{
    PyObject *objs, *names;
    int mode, prefetch = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "iOO|p", &mode, &objs, &names, &prefetch)) return NULL;
    Py_ssize_t n = 0, k = 0;
    PyObject **items = borrowed_items(objs, 0, &n);
    if (items == NULL) return NULL;
    PyObject **keys = borrowed_items(names, 1, &k);
    if (keys == NULL) {
        PyMem_Free(items);
        return NULL;
    }
    uintptr_t check = 0;
    int failed = 0;
    int64_t start = now_ns();
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        if (prefetch) prefetch_dict_stages(items, n, i);
        PyObject *dict = NULL;
        for (Py_ssize_t j = 0; j < k && !failed; j++) {
            PyObject *value = field(mode, items[i], keys[j], &dict);
            failed = value == NULL;
            check += (uintptr_t)value;
            if (mode == 1) Py_XDECREF(value);
        }
        Py_XDECREF(dict);
    }
    int64_t elapsed = now_ns() - start;
    PyMem_Free(items);
    PyMem_Free(keys);
    return failed ? NULL : result(elapsed, n, check);
}

/* read_slots(objs, cls, offsets, prefetch) -> (ns per object, checksum). offsets: tuple of
 * byte offsets from probe_offsets(cls, names). Every object must be exactly cls (a subclass could override
 * a field with a property); an empty slot (deleted field) raises. */
static PyObject *
read_slots(PyObject *self, PyObject *args)
{
    PyObject *objs, *cls, *offsets;
    int prefetch = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO|p", &objs, &cls, &offsets, &prefetch)) return NULL;
    if (!PyType_Check(cls) || !PyTuple_Check(offsets)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a type, offsets a tuple");
        return NULL;
    }
    Py_ssize_t k = PyTuple_Size(offsets);
    if (k < 1 || k > 64) {
        PyErr_SetString(PyExc_ValueError, "1..64 offsets");
        return NULL;
    }
    Py_ssize_t off[64];
    for (Py_ssize_t j = 0; j < k; j++) {
        Py_ssize_t value = PyLong_AsSsize_t(PyTuple_GetItem(offsets, j));
        if (value == -1 && PyErr_Occurred()) return NULL;
        if (value < (Py_ssize_t)sizeof(PyObject) || value % (Py_ssize_t)sizeof(PyObject *) != 0 || value > 4096) {
            PyErr_SetString(PyExc_ValueError, "bad slot offset");
            return NULL;
        }
        off[j] = value;
    }
    Py_ssize_t n = 0;
    PyObject **items = borrowed_items(objs, 0, &n);
    if (items == NULL) return NULL;
    uintptr_t check = 0;
    int64_t start = now_ns();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = items[i];
        if (prefetch && i + AHEAD_OBJECT < n) {
            __builtin_prefetch(items[i + AHEAD_OBJECT]);
            __builtin_prefetch((const char *)items[i + AHEAD_OBJECT] + 64);
        }
        if ((PyObject *)Py_TYPE(obj) != cls) {
            PyErr_SetString(PyExc_TypeError, "not exactly cls (a real reader would fall back)");
            goto fail;
        }
        const char *base = (const char *)obj;
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *value;
            memcpy(&value, base + off[j], sizeof value);
            if (value == NULL) {
                PyErr_SetString(PyExc_AttributeError, "empty slot (a real reader would fall back)");
                goto fail;
            }
            check += (uintptr_t)value;
        }
    }
    int64_t elapsed = now_ns() - start;
    PyMem_Free(items);
    return result(elapsed, n, check);
fail:
    PyMem_Free(items);
    return NULL;
}

/* probe_offsets(cls, names, member_descriptor_type) -> tuple of byte offsets, one per name. */
static PyObject *
probe_offsets(PyObject *self, PyObject *args)
{
    PyObject *cls, *names, *member_type;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &cls, &names, &member_type)) return NULL;
    if (!PyType_Check(cls) || !PyType_Check(member_type)) {
        PyErr_SetString(PyExc_TypeError, "cls and member_descriptor_type must be types");
        return NULL;
    }
    Py_ssize_t k = 0;
    PyObject **keys = borrowed_items(names, 1, &k);
    if (keys == NULL) return NULL;
    PyObject *basic_obj = PyObject_GetAttrString(cls, "__basicsize__");
    if (basic_obj == NULL) goto fail_keys;
    Py_ssize_t basicsize = PyLong_AsSsize_t(basic_obj);
    Py_DECREF(basic_obj);
    if (basicsize == -1 && PyErr_Occurred()) goto fail_keys;
    if (basicsize < (Py_ssize_t)sizeof(PyObject) || basicsize > 4096) {
        PyErr_SetString(PyExc_ValueError, "implausible __basicsize__");
        goto fail_keys;
    }
    /* every field name must resolve on the class to a member descriptor (a slot) */
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *descr = PyObject_GetAttr(cls, keys[j]);
        if (descr == NULL) goto fail_keys;
        int ok = (PyObject *)Py_TYPE(descr) == member_type;
        Py_DECREF(descr);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%S is not a slot of the class", keys[j]);
            goto fail_keys;
        }
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "no tp_alloc");
        goto fail_keys;
    }
    PyObject *probe = alloc((PyTypeObject *)cls, 0);
    if (probe == NULL) goto fail_keys;
    PyObject *sentinels = PyTuple_New(k);
    if (sentinels == NULL) {
        Py_DECREF(probe);
        goto fail_keys;
    }
    PyObject *out = PyTuple_New(k);
    if (out == NULL) goto fail_probe;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *sentinel = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
        if (sentinel == NULL) goto fail_out;
        if (PyTuple_SetItem(sentinels, j, sentinel) < 0) goto fail_out;
        if (PyObject_GenericSetAttr(probe, keys[j], sentinel) < 0) goto fail_out;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *sentinel = PyTuple_GetItem(sentinels, j);
        Py_ssize_t found = -1;
        for (Py_ssize_t at = (Py_ssize_t)sizeof(PyObject); at + (Py_ssize_t)sizeof(PyObject *) <= basicsize;
             at += (Py_ssize_t)sizeof(PyObject *)) {
            PyObject *word;
            memcpy(&word, (const char *)probe + at, sizeof word);
            if (word == sentinel) {
                if (found >= 0) {
                    PyErr_SetString(PyExc_RuntimeError, "sentinel found twice");
                    goto fail_out;
                }
                found = at;
            }
        }
        if (found < 0) {
            PyErr_Format(PyExc_RuntimeError, "slot of %S not found in the instance", keys[j]);
            goto fail_out;
        }
        PyObject *number = PyLong_FromSsize_t(found);
        if (number == NULL || PyTuple_SetItem(out, j, number) < 0) goto fail_out;
    }
    Py_DECREF(sentinels);
    Py_DECREF(probe);
    PyMem_Free(keys);
    return out;
fail_out:
    Py_DECREF(out);
fail_probe:
    Py_DECREF(sentinels);
    Py_DECREF(probe);
fail_keys:
    PyMem_Free(keys);
    return NULL;
}

/* Construction, timed in C: build(mode, cls, names, values, offsets, n) -> (ns per object, list).
 * mode 0: object.__new__(cls) (the base tp_new, as mr_new_object) + its own instance dict
 *         (PyObject_GenericGetDict) filled with PyDict_SetItem in field order (mr_new_instance);
 * mode 1: object.__new__(cls) + PyObject_GenericSetAttr per field (object.__setattr__: what the
 *         dataclass __init__ does; works for both layouts);
 * mode 2: tp_alloc(cls) + a new reference stored at each probed slot offset (own fresh object,
 *         no descriptor call; slots layout only). */
static PyObject *
build(PyObject *self, PyObject *args)
{
    int mode;
    PyObject *cls, *names, *values, *offsets;
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "iOOOOn", &mode, &cls, &names, &values, &offsets, &n)) return NULL;
    if (!PyType_Check(cls) || !PyTuple_Check(values) || !PyTuple_Check(offsets) || n < 1 || n > 100000000) {
        PyErr_SetString(PyExc_ValueError, "bad arguments");
        return NULL;
    }
    Py_ssize_t k = 0;
    PyObject **keys = borrowed_items(names, 1, &k);
    if (keys == NULL) return NULL;
    if (PyTuple_Size(values) != k || (mode == 2 && PyTuple_Size(offsets) != k)) {
        PyMem_Free(keys);
        PyErr_SetString(PyExc_ValueError, "values/offsets must match names");
        return NULL;
    }
    Py_ssize_t off[64] = {0};
    PyObject *vals[64];
    for (Py_ssize_t j = 0; j < k; j++) {
        vals[j] = PyTuple_GetItem(values, j);
        if (mode == 2) {
            off[j] = PyLong_AsSsize_t(PyTuple_GetItem(offsets, j));
            if (off[j] < (Py_ssize_t)sizeof(PyObject) || off[j] > 4096 || off[j] % (Py_ssize_t)sizeof(PyObject *)) {
                PyMem_Free(keys);
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad slot offset");
                return NULL;
            }
        }
    }
    newfunc make = (newfunc)PyType_GetSlot(&PyBaseObject_Type, Py_tp_new);
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    PyObject *no_args = PyTuple_New(0);
    PyObject *out = PyList_New(n);
    if (make == NULL || alloc == NULL || no_args == NULL || out == NULL) goto fail;
    int64_t start = now_ns();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = mode == 2 ? alloc((PyTypeObject *)cls, 0) : make((PyTypeObject *)cls, no_args, NULL);
        if (obj == NULL) goto fail;
        if (mode == 0) {
            PyObject *dict = PyObject_GenericGetDict(obj, NULL);
            if (dict == NULL) {
                Py_DECREF(obj);
                goto fail;
            }
            for (Py_ssize_t j = 0; j < k; j++) {
                if (PyDict_SetItem(dict, keys[j], vals[j]) < 0) {
                    Py_DECREF(dict);
                    Py_DECREF(obj);
                    goto fail;
                }
            }
            Py_DECREF(dict);
        }
        else if (mode == 1) {
            for (Py_ssize_t j = 0; j < k; j++) {
                if (PyObject_GenericSetAttr(obj, keys[j], vals[j]) < 0) {
                    Py_DECREF(obj);
                    goto fail;
                }
            }
        }
        else {
            for (Py_ssize_t j = 0; j < k; j++) {
                PyObject *value = vals[j];
                Py_INCREF(value);
                memcpy((char *)obj + off[j], &value, sizeof value);
            }
        }
        PyList_SetItem(out, i, obj); /* steals; i < n */
    }
    int64_t elapsed = now_ns() - start;
    Py_DECREF(no_args);
    PyMem_Free(keys);
    PyObject *result_tuple = Py_BuildValue("(dN)", (double)elapsed / (double)n, out);
    return result_tuple;
fail:
    Py_XDECREF(no_args);
    Py_XDECREF(out);
    PyMem_Free(keys);
    return NULL;
}

static PyMethodDef methods[] = {
    {"build", build, METH_VARARGS, NULL},
    {"read_fields", read_fields, METH_VARARGS, NULL},
    {"read_slots", read_slots, METH_VARARGS, NULL},
    {"probe_offsets", probe_offsets, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "reprfieldread", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit_reprfieldread(void)
{
    return PyModule_Create(&module);
}
"""


def build_extension(build_dir: str) -> Any:
    """Compile C_SOURCE into build_dir (strict warnings) and import it."""
    os.makedirs(build_dir, exist_ok=True)
    source = os.path.join(build_dir, "reprfieldread.c")
    target = os.path.join(build_dir, "reprfieldread.abi3.so")
    with open(source, "w") as handle:
        handle.write(C_SOURCE)
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        ["cc", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Wshadow", "-Werror", f"-I{include}",
         source, "-o", target],
        check=True,
    )
    spec = importlib.util.spec_from_file_location("reprfieldread", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_objects(layout: str, count: int, cls: type, slotted: type, names: List[str],
                 values: List[Any]) -> List[Any]:
    """count instances; field values are shared objects (only the containers differ)."""
    new = object.__new__
    setter = object.__setattr__
    out: List[Any] = []
    append = out.append
    if layout == "dict":
        for _ in range(count):
            obj = new(cls)
            own = obj.__dict__
            for name, value in zip(names, values):
                own[name] = value
            append(obj)
    elif layout in ("inline", "slots"):  # object.__setattr__ per field, __dict__ never read
        kind = cls if layout == "inline" else slotted
        for _ in range(count):
            obj = new(kind)
            for name, value in zip(names, values):
                setter(obj, name, value)
            append(obj)
    else:
        raise ValueError(layout)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="73728,562176", help="object counts, comma-separated")
    parser.add_argument("--fields", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument(
        "--build-dir",
        default=os.path.join(tempfile.gettempdir(), "mooncake-reshard-repr-field-reads"),
        help="where the scratch extension is compiled (default: a folder in the temp directory)",
    )
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    from mooncake.reshard.weight._planner.contracts import TransferRegion

    ext = build_extension(args.build_dir)
    all_names = [f.name for f in dataclasses.fields(TransferRegion)]
    names = tuple(all_names[: args.fields])
    slotted = dataclasses.make_dataclass(
        "SlottedTransferRegion", [(n, Any) for n in all_names], frozen=True, slots=True
    )
    offsets = ext.probe_offsets(slotted, names, types.MemberDescriptorType)
    slot_order = sorted(range(len(all_names)), key=lambda i: all_names[i])
    document: Dict[str, Any] = {
        "python": sys.version.split()[0],
        "fields_read": list(names),
        "slot_offsets": dict(zip(names, offsets)),
        "basicsize": slotted.__basicsize__,
        "cpython_sorted_slot_order": [all_names[i] for i in slot_order],
        "results": {},
    }
    rng = random.Random(args.seed)
    for count in [int(v) for v in args.sizes.split(",")]:
        values = [(i, f"value-{i}") for i in range(len(all_names))]
        layouts = {layout: make_objects(layout, count, TransferRegion, slotted, all_names, values)
                   for layout in ("dict", "inline", "slots")}
        permutation = list(range(count))
        rng.shuffle(permutation)
        configs = []
        for order in ("creation", "shuffled"):
            lists = {layout: (objs if order == "creation" else [objs[i] for i in permutation])
                     for layout, objs in layouts.items()}
            configs += [
                (order, "dict", "dict_getitem", lambda o=lists["dict"]: ext.read_fields(0, o, names)),
                (order, "dict", "dict_getitem_prefetch",
                 lambda o=lists["dict"]: ext.read_fields(0, o, names, True)),
                (order, "dict", "getattr", lambda o=lists["dict"]: ext.read_fields(1, o, names)),
                (order, "inline", "getattr", lambda o=lists["inline"]: ext.read_fields(1, o, names)),
                (order, "slots", "getattr", lambda o=lists["slots"]: ext.read_fields(1, o, names)),
                (order, "slots", "slot_load", lambda o=lists["slots"]: ext.read_slots(o, slotted, offsets)),
                (order, "slots", "slot_load_prefetch",
                 lambda o=lists["slots"]: ext.read_slots(o, slotted, offsets, True)),
            ]
        samples: Dict[str, List[float]] = {}
        checks: Dict[str, int] = {}
        for _ in range(args.repeats):
            for order, layout, method, run in configs:
                ns, check = run()
                key = f"{order}/{layout}/{method}"
                samples.setdefault(key, []).append(ns)
                checks[key] = check
        # every method read the same values (same shared field objects): equal checksums
        if len({checks[k] for k in checks}) != 1:
            raise RuntimeError(f"checksums differ: {checks}")
        document["results"][str(count)] = {
            key: {"median_ns_per_object": statistics.median(v), "min": min(v), "max": max(v)}
            for key, v in samples.items()
        }
    # Construction (one count: the largest), interleaved repeats, median ns per object.
    count = max(int(v) for v in args.sizes.split(","))
    values_t = tuple((i, f"value-{i}") for i in range(len(all_names)))
    all_offsets = ext.probe_offsets(slotted, tuple(all_names), types.MemberDescriptorType)
    builds = [
        ("dict/own_dict_setitem", 0, TransferRegion, ()),
        ("dict/generic_setattr", 1, TransferRegion, ()),
        ("slots/generic_setattr", 1, slotted, ()),
        ("slots/direct_store", 2, slotted, all_offsets),
    ]
    build_samples: Dict[str, List[float]] = {}
    gc.collect()
    gc.disable()  # as the package's collector_paused(): no cyclic collections while building
    for _ in range(args.repeats):
        for label, mode, cls, offs in builds:
            ns, objs = ext.build(mode, cls, tuple(all_names), values_t, offs, count)
            if label == "slots/direct_store":
                assert objs[0] == slotted(*values_t) and objs[-1].tensor_id is values_t[0]
            elif label == "dict/own_dict_setitem":
                assert objs[0].__dict__ == dict(zip(all_names, values_t))
            del objs
            build_samples.setdefault(label, []).append(ns)
    gc.enable()
    document["build_all_fields"] = {
        "count": count,
        **{k: {"median_ns_per_object": statistics.median(v), "min": min(v), "max": max(v)}
           for k, v in build_samples.items()},
    }
    print(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
