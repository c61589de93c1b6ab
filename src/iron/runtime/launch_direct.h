/* Direct: what ``k[grid]`` returns once a compiled fast launcher exists for it (KernelFunction.install_direct_launcher).
 *
 * Calling it runs the fast launcher's ``try`` on the positional arguments as they arrive (no tuple, no Python
 * frame); a call with keywords, or one the fast launcher does not take, goes to the Python launcher (``fallback``)
 * with the same arguments. Attributes it does not have (grid, group, ...) are the fallback's.
 *
 * A header for the compiled launchers (vulkan_launch.c; c_extension.py builds a source with the headers it names):
 * define DIRECT_MODULE (the extension's name, a string literal) before including it, call ``direct_ready()`` in the
 * module's init, and make one with ``direct_new(fast, fallback, try)``.
 */
#ifndef IRON_LAUNCH_DIRECT_H
#define IRON_LAUNCH_DIRECT_H

#include <Python.h>
#include <structmember.h>

/* 1: launched, 0: not this launcher's call (the fallback takes it), -1: a Python error is set. */
typedef int (*direct_try_fn)(PyObject *fast, PyObject *const *args, Py_ssize_t nargs);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    direct_try_fn try_launch;
    PyObject *fast;
    PyObject *fallback;
} Direct;

static PyObject *Direct_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Direct *self = (Direct *)callable;
    if (self->fallback == NULL) {  /* cleared by the garbage collector */
        PyErr_SetString(PyExc_RuntimeError, "this launcher was cleared");
        return NULL;
    }
    if ((kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) && self->fast != NULL) {
        int r = self->try_launch(self->fast, args, PyVectorcall_NARGS(nargsf));
        if (r < 0) return NULL;
        if (r > 0) Py_RETURN_NONE;
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

/* Direct takes part in garbage collection: k[grid] -> Direct -> Launcher -> kernel -> k's launcher cache -> Direct
 * is a cycle, which must stay collectable for kernels made at run time. */
static int Direct_traverse(Direct *self, visitproc visit, void *arg) {
    Py_VISIT(self->fast);
    Py_VISIT(self->fallback);
    return 0;
}

static int Direct_clear(Direct *self) {
    Py_CLEAR(self->fast);
    Py_CLEAR(self->fallback);
    return 0;
}

static void Direct_dealloc(Direct *self) {
    PyObject_GC_UnTrack(self);
    Direct_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Direct_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return PyVectorcall_Call(self, args, kwargs);
}

static PyObject *Direct_getattro(PyObject *self, PyObject *name) {
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError) || ((Direct *)self)->fallback == NULL) return r;
    PyErr_Clear();
    return PyObject_GetAttr(((Direct *)self)->fallback, name);
}

static PyObject *Direct_repr(Direct *self) {
    if (self->fallback == NULL) return PyUnicode_FromString("<" DIRECT_MODULE ".Direct (cleared)>");
    return PyUnicode_FromFormat("<compiled launcher (" DIRECT_MODULE ") of %R>", self->fallback);
}

static PyMemberDef Direct_members[] = {
    {"fast", T_OBJECT, offsetof(Direct, fast), READONLY, "the compiled fast launcher"},
    {"fallback", T_OBJECT, offsetof(Direct, fallback), READONLY, "the Python launcher for every other call"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject DirectType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = DIRECT_MODULE ".Direct",
    .tp_basicsize = sizeof(Direct),
    .tp_dealloc = (destructor)Direct_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "k[grid] with a compiled fast launcher: call it with the kernel's arguments",
    .tp_traverse = (traverseproc)Direct_traverse,
    .tp_clear = (inquiry)Direct_clear,
    .tp_call = Direct_call,
    .tp_vectorcall_offset = offsetof(Direct, vectorcall),
    .tp_getattro = Direct_getattro,
    .tp_repr = (reprfunc)Direct_repr,
    .tp_members = Direct_members,
};

static PyObject *direct_new(PyObject *fast, PyObject *fallback, direct_try_fn try_launch) {
    Direct *d = PyObject_GC_New(Direct, &DirectType);
    if (d == NULL) return NULL;
    d->vectorcall = Direct_vectorcall;
    d->try_launch = try_launch;
    Py_INCREF(fast); d->fast = fast;
    Py_INCREF(fallback); d->fallback = fallback;
    PyObject_GC_Track((PyObject *)d);
    return (PyObject *)d;
}

/* Ready the type and add it to ``module`` as ``Direct``: 0, or -1 with a Python error set. */
static int direct_ready(PyObject *module) {
    if (PyType_Ready(&DirectType) < 0) return -1;
    Py_INCREF(&DirectType);
    if (PyModule_AddObject(module, "Direct", (PyObject *)&DirectType) < 0) {
        Py_DECREF(&DirectType);
        return -1;
    }
    return 0;
}

#endif
