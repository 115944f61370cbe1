/* trim_heap: hand the C heap's free pages back to the system (issue 5, peak memory).
 *
 * Large passes (bind_regions, the binder's maps, the revalidation tables) allocate their scratch
 * arrays, and large lists, tuples and dicts their item tables, from the C library's heap. Freed,
 * those pages stay resident: the heap only shrinks from its top, and the Python objects built
 * next (small objects, from pymalloc arenas mapped on their own) never reuse them. Measured on
 * the Kimi-class workload at 30 layers, about 40 MiB of bind's peak RSS was such freed memory.
 * glibc's malloc_trim(0) releases every whole free page of the heap (madvise; the pages stay part
 * of the heap and fault back in if reused). Elsewhere (musl, macOS) there is nothing to call and
 * trim_heap reports False. */
#include "heap.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

PyDoc_STRVAR(trim_heap_doc,
"trim_heap()\n"
"--\n\n"
"Return the C heap's free pages to the system (glibc ``malloc_trim(0)``, run without the GIL).\n"
"True when memory was released, False when none was or the C library has no such call.");

static PyObject *
trim_heap(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
#if defined(__GLIBC__)
    int released;
    Py_BEGIN_ALLOW_THREADS
    released = malloc_trim(0);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(released);
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef heap_methods[] = {
    {"trim_heap", trim_heap, METH_NOARGS, trim_heap_doc},
    {NULL, NULL, 0, NULL},
};

int
Init_Heap(PyObject *module)
{
    return PyModule_AddFunctions(module, heap_methods);
}
