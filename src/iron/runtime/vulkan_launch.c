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

static inline PyObject *call0(PyObject *obj, PyObject *name) {
    PyObject *args[1] = {obj};
    return PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* What one call's buffers are: new references, released by ``facts_clear``. */
typedef struct {
    PyObject *store[MAX_PARAMS], *buf[MAX_PARAMS], *offset[MAX_PARAMS], *nbytes[MAX_PARAMS];
    long long off[MAX_PARAMS], n[MAX_PARAMS];
    Scalar scalar[MAX_PARAMS];
} Facts;

static void facts_clear(FastLaunch *self, Facts *f) {
    for (Py_ssize_t i = 0; i < self->nparams; ++i) {
        if (self->params[i].kind != P_BUFFER) continue;
        Py_XDECREF(f->store[i]);
        Py_XDECREF(f->buf[i]);
        Py_XDECREF(f->offset[i]);
        Py_XDECREF(f->nbytes[i]);
    }
}

/* An attribute read as a C long long: 1, 0 (not an int: no match), -1 (a Python error). */
static int attr_ll(PyObject *obj, PyObject *name, PyObject **keep, long long *out) {
    PyObject *r = PyObject_GetAttr(obj, name);
    if (r == NULL) return -1;
    if (!PyLong_CheckExact(r)) {
        Py_DECREF(r);
        return 0;
    }
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(r, &overflow);
    if (overflow) {
        Py_DECREF(r);
        return 0;
    }
    if (keep != NULL) *keep = r;
    else Py_DECREF(r);
    return 1;
}

/* The generated launcher's buffer check: 1 matches (facts filled), 0 does not, -1 a Python error. */
static int check_buffer(FastLaunch *self, Py_ssize_t i, PyObject *v, Facts *f) {
    const Param *p = &self->params[i];
    if ((PyObject *)Py_TYPE(v) != self->array_type) return 0;
    PyObject *dt = PyObject_GetAttr(v, s_dtype);
    if (dt == NULL) return -1;
    Py_DECREF(dt);  /* compared by identity: the dtype singletons outlive the call */
    if (dt != p->expect) return 0;
    PyObject *store = PyObject_GetAttr(v, s_store);
    if (store == NULL) return -1;
    f->store[i] = store;
    if ((PyObject *)Py_TYPE(store) != self->store_type) return 0;
    PyObject *q = PyObject_GetAttr(store, s_queue);
    if (q == NULL) return -1;
    Py_DECREF(q);
    if (q != self->queue) return 0;
    long long size;
    int ok = attr_ll(v, s_size, NULL, &size);
    if (ok <= 0) return ok;
    if (size < p->number) return 0;
    if ((ok = attr_ll(v, s_offset, &f->offset[i], &f->off[i])) <= 0) return ok;
    if ((ok = attr_ll(v, s_nbytes, &f->nbytes[i], &f->n[i])) <= 0) return ok;
    f->buf[i] = PyObject_GetAttr(store, s_buf);
    return f->buf[i] == NULL ? -1 : 1;
}

/* The generated launcher's scalar check: 1 matches (value packed), 0 does not, 2 matches but the push constants
 * cannot hold it (struct.pack raises there: the Python launcher gives that answer), -1 a Python error. */
static int check_scalar(const Param *p, PyObject *v, Scalar *out) {
    if (p->kind == P_F32) {
        double d;
        if (PyFloat_CheckExact(v)) {
            d = PyFloat_AS_DOUBLE(v);
        } else if (PyLong_CheckExact(v)) {
            d = PyLong_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 2;
            }
        } else {
            return 0;
        }
        float x = (float)d;
        if (isinf(x) && !isinf(d)) return 2;  /* struct.pack("<f") refuses a finite value beyond float's range */
        out->f32 = x;
        return 1;
    }
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (p->kind == P_FIXED) {
        if (x != p->number) return 0;
        if (p->fixed_code == P_I32) out->i32 = (int32_t)x;
        else out->u32 = (uint32_t)x;
        return 1;
    }
    if (p->kind == P_I32) {
        if (x < INT32_MIN || x > INT32_MAX) return 0;
        out->i32 = (int32_t)x;
    } else {
        if (x < 0 || x > (long long)UINT32_MAX) return 0;
        out->u32 = (uint32_t)x;
    }
    return 1;
}

/* The queue's descriptor-set entry for this call's buffers (a new reference), or NULL: none yet (no error set) or
 * a Python error. The key as VulkanQueue._set makes it: (id(prog), ((binding, id(buf), offset, nbytes), ...)). */
static PyObject *lookup_set(FastLaunch *self, Facts *f) {
    PyObject *ranges = PyTuple_New(self->nbindings);
    if (ranges == NULL) return NULL;
    for (Py_ssize_t b = 0; b < self->nbindings; ++b) {
        Py_ssize_t i = self->binding_param[b];
        PyObject *id = PyLong_FromVoidPtr(f->buf[i]);
        if (id == NULL) {
            Py_DECREF(ranges);
            return NULL;
        }
        PyObject *range = PyTuple_Pack(4, self->binding[b], id, f->offset[i], f->nbytes[i]);
        Py_DECREF(id);
        if (range == NULL) {
            Py_DECREF(ranges);
            return NULL;
        }
        PyTuple_SET_ITEM(ranges, b, range);
    }
    PyObject *key = PyTuple_Pack(2, self->prog_id, ranges);
    Py_DECREF(ranges);
    if (key == NULL) return NULL;
    PyObject *sets = PyObject_GetAttr(self->queue, s_sets);
    if (sets == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    PyObject *entry = PyDict_Check(sets) ? PyDict_GetItemWithError(sets, key) : NULL;
    Py_XINCREF(entry);
    Py_DECREF(sets);
    Py_DECREF(key);
    return entry;
}

/* The dispatch, recorded with the queue's lock held: 1 recorded, 2 the Python launcher's case, -1 an error. */
static int record_locked(FastLaunch *self, Facts *f, const unsigned char *data) {
    PyObject *q = self->queue;
    PyObject *released = PyObject_GetAttr(q, s_released);
    if (released == NULL) return -1;
    Py_ssize_t pending = PyList_Check(released) ? PyList_GET_SIZE(released) : 1;
    Py_DECREF(released);
    if (pending) {
        PyObject *r = call0(q, s_drain);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    PyObject *recording = PyObject_GetAttr(q, s_recording);
    if (recording == NULL) return -1;
    Py_DECREF(recording);
    if (recording != Py_None) return 2;  /* iron.graph(): sets of the recording's own */
    long long epoch;
    int ok = attr_ll(q, s_sets_epoch, NULL, &epoch);
    if (ok <= 0) {
        if (ok == 0) PyErr_SetString(PyExc_TypeError, "VulkanQueue.sets_epoch is not an int");
        return -1;
    }
    PyObject *entry = NULL;
    if (self->last_entry != NULL && self->last_epoch == epoch) {
        entry = self->last_entry;
        for (Py_ssize_t b = 0; b < self->nbindings && entry != NULL; ++b) {
            Py_ssize_t i = self->binding_param[b];
            if (f->buf[i] != self->last_buf[b] || f->off[i] != self->last_off[b] || f->n[i] != self->last_n[b])
                entry = NULL;
        }
    }
    if (entry != NULL) Py_INCREF(entry);
    else if ((entry = lookup_set(self, f)) == NULL) return PyErr_Occurred() ? -1 : 2;  /* a set not made yet */
    else {  /* remembered for the next call */
        Py_XSETREF(self->last_entry, Py_NewRef(entry));
        self->last_epoch = epoch;
        for (Py_ssize_t b = 0; b < self->nbindings; ++b) {
            Py_ssize_t i = self->binding_param[b];
            Py_XSETREF(self->last_buf[b], Py_NewRef(f->buf[i]));
            self->last_off[b] = f->off[i];
            self->last_n[b] = f->n[i];
        }
    }
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
        Py_DECREF(entry);
        PyErr_SetString(PyExc_TypeError, "VulkanQueue.sets holds (descriptor set, handle) pairs");
        return -1;
    }
    uint64_t set = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(entry, 1));
    if (set == (uint64_t)-1 && PyErr_Occurred()) {
        Py_DECREF(entry);
        return -1;
    }
    long long handle;
    ok = attr_ll(q, s_cmd_handle, NULL, &handle);
    if (ok == 1 && handle == 0) {  /* a new batch: begun (with its leading barrier) by the queue */
        PyObject *closed = PyObject_GetAttr(q, s_closed);
        if (closed == NULL) {
            Py_DECREF(entry);
            return -1;
        }
        Py_DECREF(closed);
        if (closed != Py_False) {  /* its context was closed: the full path refuses the launch, located */
            Py_DECREF(entry);
            return 0;
        }
        PyObject *r = call0(q, s_begin);
        if (r == NULL) ok = -1;
        else {
            Py_DECREF(r);
            ok = attr_ll(q, s_cmd_handle, NULL, &handle);
        }
    }
    if (ok <= 0 || handle == 0) {
        Py_DECREF(entry);
        if (ok == 0 || (ok == 1 && handle == 0)) PyErr_SetString(PyExc_TypeError, "VulkanQueue.cmd_handle is not set");
        return -1;
    }
    void *cmd = (void *)(uintptr_t)handle;
    PyObject *bound = PyObject_GetAttr(q, s_bound);
    if (bound == NULL) {
        Py_DECREF(entry);
        return -1;
    }
    int same_pipe = PyTuple_Check(bound) && PyTuple_GET_SIZE(bound) == 2 && PyTuple_GET_ITEM(bound, 0) == self->pipe;
    int same_set = same_pipe && PyTuple_GET_ITEM(bound, 1) == entry;
    Py_DECREF(bound);
    /* state already bound in this command buffer is not bound again (a pipeline change rebinds the set) */
    if (!same_pipe) self->bind_pipeline(cmd, self->bind_point, self->pipeline);
    if (!same_set) {
        self->bind_sets(cmd, self->bind_point, self->layout, 0, 1, &set, 0, NULL);
        PyObject *now = PyTuple_Pack(2, self->pipe, entry);
        int err = now == NULL || PyObject_SetAttr(q, s_bound, now) < 0;
        Py_XDECREF(now);
        if (err) {
            Py_DECREF(entry);
            return -1;
        }
    }
    Py_DECREF(entry);
    if (self->push_size) self->push_constants(cmd, self->layout, self->push_stages, 0, self->push_size, data);
    self->dispatch(cmd, self->groups[0], self->groups[1], self->groups[2]);
    self->barrier(cmd, self->src_stages, self->dst_stages, 0, 1, &self->memory_barrier, 0, NULL, 0, NULL);
    long long count;
    if ((ok = attr_ll(q, s_count, NULL, &count)) <= 0) {
        if (ok == 0) PyErr_SetString(PyExc_TypeError, "VulkanQueue.count is not an int");
        return -1;
    }
    PyObject *now = PyLong_FromLongLong(count + 1);
    if (now == NULL || PyObject_SetAttr(q, s_count, now) < 0) {
        Py_XDECREF(now);
        return -1;
    }
    Py_DECREF(now);
    PyObject *batch = PyDict_GetItemWithError(self->module_dict, s_batch);  /* read per call, as _dispatch does */
    if (batch == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "BATCH");
        return -1;
    }
    long long limit = PyLong_AsLongLong(batch);
    if (limit == -1 && PyErr_Occurred()) return -1;
    if (count + 1 >= limit) {
        PyObject *r = call0(q, s_submit);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 1;
}

static int locked(FastLaunch *self, Facts *f, const unsigned char *data) {
    PyObject *r = call0(self->lock, s_acquire);
    if (r == NULL) return -1;
    Py_DECREF(r);
    int res = record_locked(self, f, data);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);  /* the lock is released whatever happened */
    r = call0(self->lock, s_release);
    if (r == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    Py_DECREF(r);
    PyErr_Restore(type, value, tb);
    return res;
}

/* 1: recorded, 0: the call does not match, 2: the Python launcher's case, -1: a Python error is set. */
static int fast_try_with(FastLaunch *self, PyObject *const *items, Facts *f) {
    for (Py_ssize_t i = 0; i < self->nparams; ++i) {
        const Param *p = &self->params[i];
        PyObject *v = items[i];
        int ok;
        if (p->kind == P_BUFFER) {
            ok = check_buffer(self, i, v, f);
        } else if (p->kind == P_CONSTEXPR) {
            if ((PyObject *)Py_TYPE(v) != p->expect) return 0;
            ok = PyObject_RichCompareBool(v, p->value, Py_NE);
            if (ok < 0) return -1;
            ok = !ok;
        } else {
            ok = check_scalar(p, v, &f->scalar[i]);
            if (ok == 2) return 2;
        }
        if (ok <= 0) return ok;
    }
    for (Py_ssize_t k = 0; k < self->nalias; ++k) {
        Py_ssize_t a = self->alias[2 * k], b = self->alias[2 * k + 1];
        if (f->store[a] == f->store[b] && f->off[a] < f->off[b] + f->n[b] && f->off[b] < f->off[a] + f->n[a])
            return 0;  /* the full path refuses the launch, naming both */
    }
    for (Py_ssize_t b = 0; b < self->nbindings; ++b) {
        Py_ssize_t i = self->binding_param[b];
        if (f->off[i] % self->align) return 2;  /* copied through an aligned scratch buffer: VulkanQueue.record */
    }
    unsigned char data[MAX_PUSH];
    memset(data, 0, self->push_size);
    for (Py_ssize_t k = 0; k < self->npush; ++k) {
        const PushField *pf = &self->push[k];
        Scalar value = pf->param < 0 ? pf->fixed : f->scalar[pf->param];
        memcpy(data + pf->offset, &value, 4);  /* little-endian, as the struct format "<" */
    }
    return locked(self, f, data);
}

static int fast_try(FastLaunch *self, PyObject *const *items, Py_ssize_t n) {
    if (n != self->nparams) return 0;
    /* IRON_BACKEND changed since this launcher was made: the full path decides where the call goes */
    const char *env = getenv("IRON_BACKEND");
    if ((env == NULL) != (self->backend_env == NULL) || (env != NULL && strcmp(env, self->backend_env) != 0)) return 0;
    PyObject *samples = PyObject_GetAttr(self->timer, s_samples);
    if (samples == NULL) return -1;
    Py_DECREF(samples);
    if (samples != Py_None) return 0;  /* timed launches take the full path */
    Facts f;
    for (Py_ssize_t i = 0; i < self->nparams; ++i) f.store[i] = f.buf[i] = f.offset[i] = f.nbytes[i] = NULL;
    int r = fast_try_with(self, items, &f);
    facts_clear(self, &f);
    if (r == 1) {
        /* TIMER.record(None), which appends only while a gpu_time() measures (it may have begun meanwhile) */
        samples = PyObject_GetAttr(self->timer, s_samples);
        if (samples == NULL) return -1;
        int timing = samples != Py_None;
        Py_DECREF(samples);
        if (timing) {
            PyObject *res = PyObject_CallMethodOneArg(self->timer, s_record, Py_None);
            if (res == NULL) return -1;
            Py_DECREF(res);
        }
    }
    return r;
}

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
