/* The compiled Vulkan launch fast path (see vulkan_fast.py): one FastLaunch object per (k[grid], call shape).
 *
 * Calling it with the kernel's positional arguments makes the generated Python launcher's checks (the Array type,
 * dtype, store class and queue, minimum size; scalar types and ranges; constexprs equal; no written buffer
 * overlapping another), packs the push constants, and, holding the queue's lock, records push constants, descriptor
 * set, dispatch and the barrier that follows every dispatch into the batch command buffer, through device-level
 * function pointers (vkGetDeviceProcAddr) it was given. It returns True when it recorded, False when the call does
 * not match (the caller takes the full path). Whatever is not the common case, a view the device cannot bind in
 * place, a descriptor set not made yet, an open iron.graph() recording, a value the push constants cannot hold, goes
 * to the generated Python launcher (``python``), which has the same checks and handles them all.
 *
 * The queue's state stays in the Python VulkanQueue (vulkan_queue.py) and is read and written here under its lock:
 * ``cmd_handle`` (the batch command buffer, 0 before ``_begin``), ``bound`` (the pipeline and descriptor-set entry
 * bound in it), ``count`` (dispatches in the batch; ``_submit`` at the module's BATCH), ``sets`` (descriptor-set
 * key -> (cffi array, handle)), ``released`` (freed arrays' buffers, ``_drain``), ``recording``.
 *
 * Built at first use with the system C compiler against this Python's headers (c_extension.py); no Vulkan headers
 * are needed: the commands used take dispatchable handles (pointers), 64-bit non-dispatchable handles and 32-bit
 * flags and enums.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DIRECT_MODULE "iron_vulkan_launch"
#include "launch_direct.h"

typedef struct {
    int32_t sType;
    const void *pNext;
    uint32_t srcAccessMask;
    uint32_t dstAccessMask;
} MemoryBarrier; /* VkMemoryBarrier */

typedef void (*bind_pipeline_fn)(void *cmd, int32_t point, uint64_t pipeline);
typedef void (*bind_sets_fn)(void *cmd, int32_t point, uint64_t layout, uint32_t first, uint32_t count,
                             const uint64_t *sets, uint32_t ndynamic, const uint32_t *dynamic);
typedef void (*push_constants_fn)(void *cmd, uint64_t layout, uint32_t stages, uint32_t offset, uint32_t size,
                                  const void *values);
typedef void (*dispatch_fn)(void *cmd, uint32_t x, uint32_t y, uint32_t z);
typedef void (*barrier_fn)(void *cmd, uint32_t src_stages, uint32_t dst_stages, uint32_t dependency_flags,
                           uint32_t nmemory, const MemoryBarrier *memory, uint32_t nbuffer, const void *buffer,
                           uint32_t nimage, const void *image);

enum { P_BUFFER = 0, P_I32 = 1, P_U32 = 2, P_F32 = 3, P_CONSTEXPR = 4, P_FIXED = 5 };
#define MAX_PARAMS 32
#define MAX_PUSH 256

typedef union {
    int32_t i32;
    uint32_t u32;
    float f32;
} Scalar;

typedef struct {
    int kind;
    PyObject *expect;     /* buffers: the dtype (by identity); constexprs: the exact type */
    PyObject *value;      /* constexprs: the value (compared with !=) */
    long long number;     /* buffers: the minimum size in elements; P_FIXED: the value (a run-time shared length) */
    int fixed_code;       /* P_FIXED: how it is packed (P_I32 or P_U32) */
} Param;

typedef struct {
    uint32_t offset;
    int code;             /* P_I32, P_U32, P_F32 */
    Py_ssize_t param;     /* the parameter it holds, or -1: ``fixed`` (an exact grid size) */
    Scalar fixed;
} PushField;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    bind_pipeline_fn bind_pipeline;
    bind_sets_fn bind_sets;
    push_constants_fn push_constants;
    dispatch_fn dispatch;
    barrier_fn barrier;
    uint64_t pipeline, layout;
    uint32_t groups[3];
    uint32_t push_size, push_stages, src_stages, dst_stages;
    int32_t bind_point;
    MemoryBarrier memory_barrier;
    long long align;
    PyObject *pipe;          /* the pipeline object (queue.bound holds it) */
    PyObject *queue, *lock, *timer, *module_dict, *python, *array_type, *store_type, *prog_id;
    char *backend_env;       /* IRON_BACKEND when this launcher was made (NULL: unset) */
    Py_ssize_t nparams, npush, nbindings, nalias;
    Param *params;
    PushField *push;
    Py_ssize_t *binding_param;
    PyObject **binding;      /* each binding number as a Python int (the descriptor-set key's) */
    Py_ssize_t *alias;       /* pairs of parameter indices: a written buffer and another */
    /* the descriptor-set entry of the last call, while ``sets_epoch`` (bumped when the pool is reset) holds: the
     * buffers (held, so no other can take their address), offsets and sizes it binds */
    PyObject *last_entry;
    long long last_epoch;
    PyObject **last_buf;
    long long *last_off, *last_n;
} FastLaunch;

static PyObject *s_samples, *s_dtype, *s_store, *s_queue, *s_size, *s_offset, *s_nbytes, *s_buf, *s_released,
    *s_drain, *s_recording, *s_sets, *s_cmd_handle, *s_begin, *s_bound, *s_count, *s_submit, *s_batch, *s_acquire,
    *s_release, *s_record, *s_sets_epoch, *s_closed;

static void FastLaunch_dealloc(FastLaunch *self) {
    for (Py_ssize_t i = 0; i < self->nparams; ++i) {
        Py_XDECREF(self->params[i].expect);
        Py_XDECREF(self->params[i].value);
    }
    for (Py_ssize_t i = 0; i < self->nbindings; ++i) {
        Py_XDECREF(self->binding[i]);
        Py_XDECREF(self->last_buf[i]);
    }
    Py_XDECREF(self->last_entry);
    PyMem_Free(self->last_buf);
    PyMem_Free(self->last_off);
    PyMem_Free(self->last_n);
    PyMem_Free(self->params);
    PyMem_Free(self->push);
    PyMem_Free(self->binding_param);
    PyMem_Free(self->binding);
    PyMem_Free(self->alias);
    PyMem_Free(self->backend_env);
    Py_XDECREF(self->pipe);
    Py_XDECREF(self->queue);
    Py_XDECREF(self->lock);
    Py_XDECREF(self->timer);
    Py_XDECREF(self->module_dict);
    Py_XDECREF(self->python);
    Py_XDECREF(self->array_type);
    Py_XDECREF(self->store_type);
    Py_XDECREF(self->prog_id);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#include "vulkan_launch_record.h"

/* The generated Python launcher's answer for a call this one hands over. */
static PyObject *python_answer(FastLaunch *self, PyObject *call_args) {
    return PyObject_CallOneArg(self->python, call_args);
}

static PyObject *FastLaunch_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || kwnames != NULL || !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "FastLaunch takes one tuple of the kernel's arguments");
        return NULL;
    }
    FastLaunch *self = (FastLaunch *)callable;
    PyObject *call_args = args[0];
    int r = fast_try(self, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args));
    if (r < 0) return NULL;
    if (r == 2) return python_answer(self, call_args);
    return PyBool_FromLong(r);
}

static PyObject *FastLaunch_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return PyVectorcall_Call(self, args, kwargs);
}

static int parse_u32s(PyObject *seq, uint32_t *out, Py_ssize_t n, const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s must be a tuple of %zd ints", what, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        unsigned long long v = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(seq, i));
        if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        out[i] = (uint32_t)v;
    }
    return 0;
}

/* FastLaunch(procs, pipe, pipeline, layout, groups, push_size, push_stages, bind_point, barrier, align, queue, lock,
 *            timer, module_dict, python, array_type, store_type, prog_id, params, push, bindings, alias)
 *   procs:    (vkCmdBindPipeline, vkCmdBindDescriptorSets, vkCmdPushConstants, vkCmdDispatch, vkCmdPipelineBarrier)
 *             addresses
 *   barrier:  (sType, srcAccessMask, dstAccessMask, srcStageMask, dstStageMask) of the barrier after a dispatch
 *   params:   [(kind, expect, value, number, fixed_code)] per Python parameter, in order (see Param)
 *   push:     [(offset, code, param or -1, fixed value)] per push constant
 *   bindings: [(binding, param)] per buffer binding, in the kernel's order
 *   alias:    [(param, param)] buffer pairs where either is written */
static PyObject *FastLaunch_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *procs, *pipe, *groups, *barrier, *queue, *lock, *timer, *module_dict, *python, *array_type,
        *store_type, *prog_id, *params, *push, *bindings, *alias;
    unsigned long long pipeline, layout;
    unsigned push_size, push_stages;
    int bind_point;
    long long align;
    if (!PyArg_ParseTuple(args, "O!OKKO!IIiO!LOOOO!OOOOO!O!O!O!", &PyTuple_Type, &procs, &pipe, &pipeline, &layout,
                          &PyTuple_Type, &groups, &push_size, &push_stages, &bind_point, &PyTuple_Type, &barrier,
                          &align, &queue, &lock, &timer, &PyDict_Type, &module_dict, &python, &array_type,
                          &store_type, &prog_id, &PyList_Type, &params, &PyList_Type, &push, &PyList_Type, &bindings,
                          &PyList_Type, &alias))
        return NULL;
    if (PyList_GET_SIZE(params) > MAX_PARAMS || push_size > MAX_PUSH || align <= 0) {
        PyErr_SetString(PyExc_ValueError, "more parameters or push-constant bytes than the compiled launcher takes");
        return NULL;
    }
    FastLaunch *self = (FastLaunch *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = FastLaunch_vectorcall;
    uint32_t b[5];
    unsigned long long fn[5];
    if (PyTuple_GET_SIZE(procs) != 5) {
        PyErr_SetString(PyExc_ValueError, "procs must hold five addresses");
        goto fail;
    }
    for (int i = 0; i < 5; ++i) {
        fn[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(procs, i));
        if (fn[i] == (unsigned long long)-1 && PyErr_Occurred()) goto fail;
        if (fn[i] == 0) {
            PyErr_SetString(PyExc_ValueError, "a Vulkan entry point is missing");
            goto fail;
        }
    }
    self->bind_pipeline = (bind_pipeline_fn)(uintptr_t)fn[0];
    self->bind_sets = (bind_sets_fn)(uintptr_t)fn[1];
    self->push_constants = (push_constants_fn)(uintptr_t)fn[2];
    self->dispatch = (dispatch_fn)(uintptr_t)fn[3];
    self->barrier = (barrier_fn)(uintptr_t)fn[4];
    if (parse_u32s(groups, self->groups, 3, "groups") < 0 || parse_u32s(barrier, b, 5, "barrier") < 0) goto fail;
    self->memory_barrier.sType = (int32_t)b[0];
    self->memory_barrier.pNext = NULL;
    self->memory_barrier.srcAccessMask = b[1];
    self->memory_barrier.dstAccessMask = b[2];
    self->src_stages = b[3];
    self->dst_stages = b[4];
    self->pipeline = pipeline;
    self->layout = layout;
    self->push_size = push_size;
    self->push_stages = push_stages;
    self->bind_point = bind_point;
    self->align = align;
    Py_INCREF(pipe); self->pipe = pipe;
    Py_INCREF(queue); self->queue = queue;
    Py_INCREF(lock); self->lock = lock;
    Py_INCREF(timer); self->timer = timer;
    Py_INCREF(module_dict); self->module_dict = module_dict;
    Py_INCREF(python); self->python = python;
    Py_INCREF(array_type); self->array_type = array_type;
    Py_INCREF(store_type); self->store_type = store_type;
    Py_INCREF(prog_id); self->prog_id = prog_id;
    const char *env = getenv("IRON_BACKEND");
    if (env != NULL) {
        self->backend_env = PyMem_Malloc(strlen(env) + 1);
        if (self->backend_env == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        strcpy(self->backend_env, env);
    }
    Py_ssize_t np = PyList_GET_SIZE(params), npush = PyList_GET_SIZE(push), nb = PyList_GET_SIZE(bindings),
               na = PyList_GET_SIZE(alias);
    self->params = PyMem_Calloc(np ? np : 1, sizeof(Param));
    self->push = PyMem_Calloc(npush ? npush : 1, sizeof(PushField));
    self->binding_param = PyMem_Calloc(nb ? nb : 1, sizeof(Py_ssize_t));
    self->binding = PyMem_Calloc(nb ? nb : 1, sizeof(PyObject *));
    self->alias = PyMem_Calloc(na ? 2 * na : 1, sizeof(Py_ssize_t));
    self->last_buf = PyMem_Calloc(nb ? nb : 1, sizeof(PyObject *));
    self->last_off = PyMem_Calloc(nb ? nb : 1, sizeof(long long));
    self->last_n = PyMem_Calloc(nb ? nb : 1, sizeof(long long));
    if (!self->params || !self->push || !self->binding_param || !self->binding || !self->alias || !self->last_buf ||
        !self->last_off || !self->last_n) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < np; ++i) {
        Param *p = &self->params[i];
        PyObject *expect, *value;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(params, i), "iOOLi", &p->kind, &expect, &value, &p->number,
                              &p->fixed_code))
            goto fail;
        Py_INCREF(expect); p->expect = expect;
        Py_INCREF(value); p->value = value;
        self->nparams = i + 1;
    }
    for (Py_ssize_t k = 0; k < npush; ++k) {
        PushField *pf = &self->push[k];
        unsigned offset;
        PyObject *fixed;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(push, k), "IinO", &offset, &pf->code, &pf->param, &fixed)) goto fail;
        pf->offset = offset;
        if (offset + 4 > push_size || pf->param >= np ||
            (pf->param >= 0 && self->params[pf->param].kind != P_I32 && self->params[pf->param].kind != P_U32 &&
             self->params[pf->param].kind != P_F32 && self->params[pf->param].kind != P_FIXED)) {
            PyErr_SetString(PyExc_ValueError, "a push constant outside the block or of no scalar");
            goto fail;
        }
        if (pf->param < 0) {
            if (pf->code == P_F32) pf->fixed.f32 = (float)PyFloat_AsDouble(fixed);
            else if (pf->code == P_I32) pf->fixed.i32 = (int32_t)PyLong_AsLong(fixed);
            else pf->fixed.u32 = (uint32_t)PyLong_AsUnsignedLong(fixed);
            if (PyErr_Occurred()) goto fail;
        }
        self->npush = k + 1;
    }
    for (Py_ssize_t k = 0; k < nb; ++k) {
        PyObject *binding;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(bindings, k), "On", &binding, &self->binding_param[k])) goto fail;
        Py_ssize_t i = self->binding_param[k];
        if (i < 0 || i >= np || self->params[i].kind != P_BUFFER) {
            PyErr_SetString(PyExc_ValueError, "a binding of no buffer parameter");
            goto fail;
        }
        Py_INCREF(binding); self->binding[k] = binding;
        self->nbindings = k + 1;
    }
    for (Py_ssize_t k = 0; k < na; ++k) {
        if (!PyArg_ParseTuple(PyList_GET_ITEM(alias, k), "nn", &self->alias[2 * k], &self->alias[2 * k + 1]))
            goto fail;
        Py_ssize_t a = self->alias[2 * k], c = self->alias[2 * k + 1];
        if (a < 0 || a >= np || c < 0 || c >= np || self->params[a].kind != P_BUFFER ||
            self->params[c].kind != P_BUFFER) {
            PyErr_SetString(PyExc_ValueError, "an alias pair of no buffer parameters");
            goto fail;
        }
        self->nalias = k + 1;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyObject *FastLaunch_get_python(FastLaunch *self, void *closure) {
    Py_INCREF(self->python);
    return self->python;
}

static PyObject *FastLaunch_get_source(FastLaunch *self, void *closure) {
    return PyObject_GetAttrString(self->python, "source");
}

static PyGetSetDef FastLaunch_getset[] = {
    {"python", (getter)FastLaunch_get_python, NULL, "the generated Python launcher it hands other cases to", NULL},
    {"source", (getter)FastLaunch_get_source, NULL, "the generated Python launcher's source (the same checks)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *FastLaunch_direct(FastLaunch *self, PyObject *fallback);

static PyMethodDef FastLaunch_methods[] = {
    {"direct", (PyCFunction)FastLaunch_direct, METH_O,
     "a callable that launches through this fast launcher and calls `fallback` (same arguments) otherwise"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FastLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "iron_vulkan_launch.FastLaunch",
    .tp_basicsize = sizeof(FastLaunch),
    .tp_dealloc = (destructor)FastLaunch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A compiled Vulkan fast launcher: call with a tuple of the kernel's arguments",
    .tp_new = FastLaunch_new,
    .tp_call = FastLaunch_call,
    .tp_vectorcall_offset = offsetof(FastLaunch, vectorcall),
    .tp_getset = FastLaunch_getset,
    .tp_methods = FastLaunch_methods,
};

/* The fast launcher as a Direct's ``try``: the cases it hands over get the Python launcher's answer. */
static int direct_try(PyObject *fast, PyObject *const *args, Py_ssize_t nargs) {
    FastLaunch *self = (FastLaunch *)fast;
    int r = fast_try(self, args, nargs);
    if (r != 2) return r;
    PyObject *call_args = PyTuple_New(nargs);
    if (call_args == NULL) return -1;
    for (Py_ssize_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(call_args, i, Py_NewRef(args[i]));
    PyObject *done = python_answer(self, call_args);
    Py_DECREF(call_args);
    if (done == NULL) return -1;
    int launched = PyObject_IsTrue(done);
    Py_DECREF(done);
    return launched;
}

static PyObject *FastLaunch_direct(FastLaunch *self, PyObject *fallback) {
    return direct_new((PyObject *)self, fallback, direct_try);
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "iron_vulkan_launch", NULL, -1, NULL, NULL, NULL, NULL,
                                    NULL};

#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit_iron_vulkan_launch(void) {
    INTERN(s_samples, "samples");
    INTERN(s_dtype, "dtype");
    INTERN(s_store, "_store");
    INTERN(s_queue, "queue");
    INTERN(s_size, "size");
    INTERN(s_offset, "_offset");
    INTERN(s_nbytes, "nbytes");
    INTERN(s_buf, "buf");
    INTERN(s_released, "released");
    INTERN(s_drain, "_drain");
    INTERN(s_recording, "recording");
    INTERN(s_sets, "sets");
    INTERN(s_cmd_handle, "cmd_handle");
    INTERN(s_begin, "_begin");
    INTERN(s_bound, "bound");
    INTERN(s_count, "count");
    INTERN(s_submit, "_submit");
    INTERN(s_batch, "BATCH");
    INTERN(s_acquire, "acquire");
    INTERN(s_release, "release");
    INTERN(s_record, "record");
    INTERN(s_sets_epoch, "sets_epoch");
    INTERN(s_closed, "closed");
    if (PyType_Ready(&FastLaunchType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&FastLaunchType);
    if (PyModule_AddObject(m, "FastLaunch", (PyObject *)&FastLaunchType) < 0) {
        Py_DECREF(&FastLaunchType);
        Py_DECREF(m);
        return NULL;
    }
    if (direct_ready(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
