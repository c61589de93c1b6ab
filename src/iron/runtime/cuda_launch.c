/* The compiled CUDA launch fast path (see cuda_fast.py): one FastLaunch object per (k[grid], backend) call shape.
 *
 * Calling it with the kernel's positional arguments checks each against the facts the first launch recorded (the
 * tensor type, dtype object, device, contiguity, minimum size in bytes; scalar types and ranges; constexpr keys),
 * writes the data pointers and scalars into the prebuilt argument slots, reads the torch stream, and calls
 * cuLaunchKernel through the function pointer it was given. It returns True when it launched, False when anything
 * does not match (the caller then takes the full path), and raises LaunchError when the driver fails. A kernel emitted
 * for programmatic dependent launch (IRON_CUDA_PDL=1) gets cuLaunchKernelEx's pointer instead, and is launched with
 * the programmatic stream serialization attribute.
 *
 * Built at first use with the system C compiler against this Python's headers (cuda_fast.py); no CUDA headers are
 * needed: the driver types it uses are plain pointers and unsigned ints.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DIRECT_MODULE "iron_cuda_launch"
#include "launch_direct.h"

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shmem, void *stream, void **params, void **extra);

/* cuda.h's CUlaunchAttribute and CUlaunchConfig, laid out as there (a 64-byte value union, 8-byte aligned) */
typedef struct {
    int id;
    char pad[4];
    union {
        int flag;
        char bytes[64];
        void *align;
    } value;
} LaunchAttribute;

typedef struct {
    unsigned grid[3], block[3], shmem;
    void *stream;
    LaunchAttribute *attrs;
    unsigned num_attrs;
} LaunchConfig;

typedef int (*launch_ex_fn)(const LaunchConfig *config, void *f, void **params, void **extra);

enum { PROGRAMMATIC_STREAM_SERIALIZATION = 6 }; /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */

enum { K_BUFFER = 0, K_I32 = 1, K_U32 = 2, K_F32 = 3, K_CONSTEXPR = 4 };

typedef struct {
    int kind;
    int slot;                 /* index into the argument slots (-1 for constexprs) */
    PyObject *type;           /* buffers: the tensor type */
    PyObject *dtype;          /* buffers: the dtype object (compared by identity) */
    long long min_nbytes;     /* buffers: the size checks' minimum element count times the element size */
    PyObject *key;            /* constexprs: the expected key */
    int written;              /* buffers: the kernel writes it */
} Param;

typedef union {
    void *ptr;
    int32_t i32;
    uint32_t u32;
    float f32;
} Slot;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    launch_fn launch;
    void *function;
    unsigned grid[3], block[3], shmem;
    int device;
    int single_device;       /* the process sees one CUDA device: is_cuda is the device check */
    void *stream;
    PyObject *backend;       /* its .capture must be None */
    PyObject *stream_of;     /* callable(device) -> int stream handle */
    PyObject *ckey;          /* callable(value) -> constexpr key */
    PyObject *error;         /* LaunchError */
    PyObject *name;          /* kernel name, for messages */
    char *backend_env;       /* IRON_BACKEND when this launcher was made (NULL: unset) */
    int alias_check;         /* two or more buffers, one written: overlapping ones go to the full path */
    int pdl;                 /* launch through launch_ex (cuLaunchKernelEx), programmatic stream serialization */
    launch_ex_fn launch_ex;
    Py_ssize_t nparams;
    Param *params;
    Py_ssize_t nslots;
    Slot *slots;
} FastLaunch;

static PyObject *s_capture, *s_dtype, *s_get_device, *s_is_contiguous, *s_nbytes, *s_data_ptr, *s_is_cuda;

static void FastLaunch_dealloc(FastLaunch *self) {
    for (Py_ssize_t i = 0; i < self->nparams; ++i) {
        Py_XDECREF(self->params[i].type);
        Py_XDECREF(self->params[i].dtype);
        Py_XDECREF(self->params[i].key);
    }
    PyMem_Free(self->params);
    PyMem_Free(self->slots);
    PyMem_Free(self->backend_env);
    Py_XDECREF(self->backend);
    Py_XDECREF(self->stream_of);
    Py_XDECREF(self->ckey);
    Py_XDECREF(self->error);
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A method call with no arguments (vectorcall: no tuple built). */
static inline PyObject *call0(PyObject *obj, PyObject *name) {
    PyObject *args[1] = {obj};
    return PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* A getter the tensor type lacks (an older torch): not a match, so the full path handles the call. */
static int attribute_missing(void) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
}

/* 1: matches (slot written), 0: does not match, -1: a Python error is set. */
static int check_buffer(FastLaunch *self, const Param *p, PyObject *v, Slot *slots) {
    if ((PyObject *)Py_TYPE(v) != p->type) return 0;
    PyObject *dt = PyObject_GetAttr(v, s_dtype);
    if (dt == NULL) return -1;
    int same = dt == p->dtype;
    Py_DECREF(dt);
    if (!same) return 0;
    /* the cheapest torch calls that decide each fact: attribute getters where torch has one */
    PyObject *r;
    if (self->single_device) {
        r = PyObject_GetAttr(v, s_is_cuda);
        if (r == NULL) return attribute_missing();
        int cuda = r == Py_True;
        Py_DECREF(r);
        if (!cuda) return 0;
    } else {
        r = call0(v, s_get_device);
        if (r == NULL) return -1;
        long dev = PyLong_AsLong(r);
        Py_DECREF(r);
        if (dev == -1 && PyErr_Occurred()) return -1;
        if (dev != self->device) return 0;
    }
    r = call0(v, s_is_contiguous);
    if (r == NULL) return -1;
    int contiguous = r == Py_True;
    Py_DECREF(r);
    if (!contiguous) return 0;
    if (p->min_nbytes > 0) {
        r = PyObject_GetAttr(v, s_nbytes);
        if (r == NULL) return attribute_missing();
        long long n = PyLong_AsLongLong(r);
        Py_DECREF(r);
        if (n == -1 && PyErr_Occurred()) return -1;
        if (n < p->min_nbytes) return 0;
    }
    r = call0(v, s_data_ptr);
    if (r == NULL) return -1;
    void *ptr = PyLong_AsVoidPtr(r);
    Py_DECREF(r);
    if (ptr == NULL && PyErr_Occurred()) return -1;
    if ((uintptr_t)ptr % 16) return 0; /* off a 16-byte boundary: the full path aligns it (cuda_align.py) */
    slots[p->slot].ptr = ptr;
    return 1;
}

static int check_scalar(const Param *p, PyObject *v, Slot *slots) {
    if (p->kind == K_F32) {
        double d;
        if (PyFloat_CheckExact(v)) {
            d = PyFloat_AS_DOUBLE(v);
        } else if (PyLong_CheckExact(v)) {
            d = PyLong_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
        } else {
            return 0;
        }
        slots[p->slot].f32 = (float)d;
        return 1;
    }
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (p->kind == K_I32) {
        if (x < INT32_MIN || x > INT32_MAX) return 0;
        slots[p->slot].i32 = (int32_t)x;
    } else {
        if (x < 0 || x > (long long)UINT32_MAX) return 0;
        slots[p->slot].u32 = (uint32_t)x;
    }
    return 1;
}

#define STACK_SLOTS 32

/* 1: no two buffers overlap where the kernel writes either, 0: some do (the full path refuses the launch, naming
 * both), -1: a Python error is set. Buffer i covers [its data pointer, + its nbytes). */
static int check_alias(FastLaunch *self, PyObject *const *items, Slot *slots) {
    long long stack_nbytes[STACK_SLOTS];
    long long *nbytes = stack_nbytes;
    if (self->nparams > STACK_SLOTS && (nbytes = PyMem_Malloc(self->nparams * sizeof(long long))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int ok = 1;
    for (Py_ssize_t i = 0; i < self->nparams && ok == 1; ++i) {
        if (self->params[i].kind != K_BUFFER) continue;
        PyObject *r = PyObject_GetAttr(items[i], s_nbytes);
        if (r == NULL) {
            ok = attribute_missing();
            break;
        }
        nbytes[i] = PyLong_AsLongLong(r);
        Py_DECREF(r);
        if (nbytes[i] == -1 && PyErr_Occurred()) ok = -1;
    }
    for (Py_ssize_t i = 0; i < self->nparams && ok == 1; ++i) {
        const Param *p = &self->params[i];
        if (p->kind != K_BUFFER || nbytes[i] <= 0) continue;
        uintptr_t a = (uintptr_t)slots[p->slot].ptr;
        for (Py_ssize_t j = i + 1; j < self->nparams; ++j) {
            const Param *q = &self->params[j];
            if (q->kind != K_BUFFER || nbytes[j] <= 0 || (!p->written && !q->written)) continue;
            uintptr_t b = (uintptr_t)slots[q->slot].ptr;
            if (a < b + (uintptr_t)nbytes[j] && b < a + (uintptr_t)nbytes[i]) {
                ok = 0;
                break;
            }
        }
    }
    if (nbytes != stack_nbytes) PyMem_Free(nbytes);
    return ok;
}

/* 1: launched, 0: the call does not match (nothing launched), -1: a Python error is set.
 * The argument slots and the void*[] the driver reads are this call's own (on the stack; copied from the template,
 * which holds the fixed grid sizes): Python code that runs during the checks (a constexpr key, the stream query) may
 * switch threads or re-enter this launcher, and must not be able to change another call's arguments. */
static int fast_try_with(FastLaunch *self, PyObject *const *items, Slot *slots, void **argv);

static int fast_try(FastLaunch *self, PyObject *const *items, Py_ssize_t n) {
    if (n != self->nparams) return 0;
    Slot stack_slots[STACK_SLOTS];
    void *stack_argv[STACK_SLOTS];
    Slot *slots = stack_slots;
    void **argv = stack_argv;
    if (self->nslots > STACK_SLOTS) {
        slots = PyMem_Malloc(self->nslots * sizeof(Slot));
        argv = PyMem_Malloc(self->nslots * sizeof(void *));
        if (slots == NULL || argv == NULL) {
            PyMem_Free(slots);
            PyMem_Free(argv);
            PyErr_NoMemory();
            return -1;
        }
    }
    int r = fast_try_with(self, items, slots, argv);
    if (slots != stack_slots) {
        PyMem_Free(slots);
        PyMem_Free(argv);
    }
    return r;
}

static int fast_try_with(FastLaunch *self, PyObject *const *items, Slot *slots, void **argv) {
    /* IRON_BACKEND changed since this launcher was made: the full path decides where the call goes */
    const char *env = getenv("IRON_BACKEND");
    if ((env == NULL) != (self->backend_env == NULL) || (env != NULL && strcmp(env, self->backend_env) != 0)) return 0;
    memcpy(slots, self->slots, self->nslots * sizeof(Slot));
    for (Py_ssize_t i = 0; i < self->nslots; ++i) argv[i] = &slots[i];
    PyObject *capture = PyObject_GetAttr(self->backend, s_capture);
    if (capture == NULL) return -1;
    int capturing = capture != Py_None;
    Py_DECREF(capture);
    if (capturing) return 0;
    for (Py_ssize_t i = 0; i < self->nparams; ++i) {
        const Param *p = &self->params[i];
        PyObject *v = items[i];
        int ok;
        if (p->kind == K_BUFFER) {
            ok = check_buffer(self, p, v, slots);
        } else if (p->kind == K_CONSTEXPR) {
            PyObject *k = PyObject_CallOneArg(self->ckey, v);
            if (k == NULL) return -1;
            ok = PyObject_RichCompareBool(k, p->key, Py_EQ);
            Py_DECREF(k);
        } else {
            ok = check_scalar(p, v, slots);
        }
        if (ok <= 0) return ok;
    }
    if (self->alias_check) {
        int ok = check_alias(self, items, slots);
        if (ok <= 0) return ok;
    }
    PyObject *dev = PyLong_FromLong(self->device);
    if (dev == NULL) return -1;
    PyObject *s = PyObject_CallOneArg(self->stream_of, dev);
    Py_DECREF(dev);
    if (s == NULL) return -1;
    void *stream = PyLong_AsVoidPtr(s);
    Py_DECREF(s);
    if (stream == NULL && PyErr_Occurred()) return -1;
    int err;
    if (self->pdl) {
        LaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.flag = 1;
        LaunchConfig config = {{self->grid[0], self->grid[1], self->grid[2]},
                               {self->block[0], self->block[1], self->block[2]}, self->shmem, stream, &attr, 1};
        err = self->launch_ex(&config, self->function, argv, NULL);
    } else {
        err = self->launch(self->function, self->grid[0], self->grid[1], self->grid[2], self->block[0],
                           self->block[1], self->block[2], self->shmem, stream, argv, NULL);
    }
    if (err != 0) {
        PyErr_Format(self->error, "CUDA launch of %U failed (CUresult %d)", self->name, err);
        return -1;
    }
    return 1;
}

static PyObject *FastLaunch_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || kwnames != NULL || !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "FastLaunch takes one tuple of the kernel's arguments");
        return NULL;
    }
    PyObject *call_args = args[0];
    int r = fast_try((FastLaunch *)callable, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args));
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

/* FastLaunch(launch_ptr, function_ptr, grid3, block3, shmem, device, single_device, backend, stream_of, ckey, error,
 *            name, params, slots[, pdl])
 *   pdl: launch_ptr is cuLaunchKernelEx, called with programmatic stream serialization allowed
 *   params: [(kind, slot, type, dtype, min_nbytes, key, written)] per Python parameter, in order
 *   slots:  [(kind, value)] per C parameter: kind 0 pointer (filled per call), 1 i32, 2 u32, 3 f32 (value: a
 *           fixed value, e.g. the exact-grid sizes) */
static PyObject *FastLaunch_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    unsigned long long launch_ptr, function_ptr;
    unsigned gx, gy, gz, bx, by, bz, shmem;
    int device, single_device, pdl = 0;
    PyObject *backend, *stream_of, *ckey, *error, *name, *params, *slots;
    if (!PyArg_ParseTuple(args, "KK(III)(III)IipOOOOUOO|p", &launch_ptr, &function_ptr, &gx, &gy, &gz, &bx, &by, &bz,
                          &shmem, &device, &single_device, &backend, &stream_of, &ckey, &error, &name, &params, &slots,
                          &pdl))
        return NULL;
    if (!PyList_Check(params) || !PyList_Check(slots)) {
        PyErr_SetString(PyExc_TypeError, "params and slots must be lists");
        return NULL;
    }
    FastLaunch *self = (FastLaunch *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = FastLaunch_vectorcall;
    self->launch = (launch_fn)(uintptr_t)launch_ptr;
    self->function = (void *)(uintptr_t)function_ptr;
    self->grid[0] = gx; self->grid[1] = gy; self->grid[2] = gz;
    self->block[0] = bx; self->block[1] = by; self->block[2] = bz;
    self->shmem = shmem;
    self->device = device;
    self->single_device = single_device;
    self->pdl = pdl;
    if (pdl) self->launch_ex = (launch_ex_fn)(uintptr_t)launch_ptr;
    Py_INCREF(backend); self->backend = backend;
    Py_INCREF(stream_of); self->stream_of = stream_of;
    Py_INCREF(ckey); self->ckey = ckey;
    Py_INCREF(error); self->error = error;
    Py_INCREF(name); self->name = name;
    Py_ssize_t nslots = PyList_GET_SIZE(slots), nparams = PyList_GET_SIZE(params);
    self->slots = PyMem_Calloc(nslots ? nslots : 1, sizeof(Slot));
    self->params = PyMem_Calloc(nparams ? nparams : 1, sizeof(Param));
    if (self->slots == NULL || self->params == NULL) {
        Py_DECREF(self);  /* nparams is still 0: the dealloc reads no Param */
        return PyErr_NoMemory();
    }
    self->nslots = nslots;
    self->nparams = nparams;
    const char *env = getenv("IRON_BACKEND");
    if (env != NULL) {
        self->backend_env = PyMem_Malloc(strlen(env) + 1);
        if (self->backend_env == NULL) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        strcpy(self->backend_env, env);
    }
    for (Py_ssize_t i = 0; i < self->nslots; ++i) {
        int kind;
        PyObject *value;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(slots, i), "iO", &kind, &value)) goto fail;
        if (kind == 1) self->slots[i].i32 = (int32_t)PyLong_AsLong(value);
        else if (kind == 2) self->slots[i].u32 = (uint32_t)PyLong_AsUnsignedLong(value);
        else if (kind == 3) self->slots[i].f32 = (float)PyFloat_AsDouble(value);
        if (PyErr_Occurred()) goto fail;
    }
    int buffers = 0, written = 0;
    for (Py_ssize_t i = 0; i < self->nparams; ++i) {
        Param *p = &self->params[i];
        PyObject *ptype, *pdtype, *pkey;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(params, i), "iiOOLOp", &p->kind, &p->slot, &ptype, &pdtype,
                              &p->min_nbytes, &pkey, &p->written))
            goto fail;
        if (p->kind != K_CONSTEXPR && (p->slot < 0 || p->slot >= self->nslots)) {
            PyErr_SetString(PyExc_ValueError, "parameter slot out of range");
            goto fail;
        }
        Py_INCREF(ptype); p->type = ptype;
        Py_INCREF(pdtype); p->dtype = pdtype;
        Py_INCREF(pkey); p->key = pkey;
        if (p->kind == K_BUFFER) {
            buffers += 1;
            written += p->written;
        }
    }
    self->alias_check = buffers >= 2 && written > 0;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyObject *FastLaunch_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return PyVectorcall_Call(self, args, kwargs);
}

static PyObject *FastLaunch_direct(FastLaunch *self, PyObject *fallback);

static PyMethodDef FastLaunch_methods[] = {
    {"direct", (PyCFunction)FastLaunch_direct, METH_O,
     "a callable that launches through this fast launcher and calls `fallback` (same arguments) otherwise"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FastLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "iron_cuda_launch.FastLaunch",
    .tp_basicsize = sizeof(FastLaunch),
    .tp_dealloc = (destructor)FastLaunch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A compiled CUDA fast launcher: call with a tuple of the kernel's arguments",
    .tp_new = FastLaunch_new,
    .tp_call = FastLaunch_call,
    .tp_vectorcall_offset = offsetof(FastLaunch, vectorcall),
    .tp_methods = FastLaunch_methods,
};

/* k[grid] served from C: launch_direct.h's Direct, whose try is this launcher's. */
static int direct_try(PyObject *fast, PyObject *const *args, Py_ssize_t nargs) {
    return fast_try((FastLaunch *)fast, args, nargs);
}

static PyObject *FastLaunch_direct(FastLaunch *self, PyObject *fallback) {
    return direct_new((PyObject *)self, fallback, direct_try);
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "iron_cuda_launch", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_iron_cuda_launch(void) {
    s_capture = PyUnicode_InternFromString("capture");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_nbytes = PyUnicode_InternFromString("nbytes");
    s_is_cuda = PyUnicode_InternFromString("is_cuda");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    if (!s_capture || !s_dtype || !s_get_device || !s_is_contiguous || !s_nbytes || !s_data_ptr || !s_is_cuda) return NULL;
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
