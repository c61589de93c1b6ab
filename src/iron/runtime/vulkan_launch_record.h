/* The compiled Vulkan launcher's checks and recording (see vulkan_launch.c, which includes this file after its types:
 * one translation unit, split for size): a call's facts (buffers, scalars), the checks that send it back to the
 * full path, the descriptor-set lookup, and the recording of push constants, set, dispatch and barrier under the
 * queue's lock. */

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

