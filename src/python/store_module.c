/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: the CPython extension behind mooncake.store.MooncakeDistributedStore.
 *
 * The type here implements upstream's store methods with their exact keyword names, defaults
 * and return conventions (plain ints, bytes, lists as long as the input); mooncake/store.py
 * subclasses it to add the pure-Python parts (dict setup, replica descriptor objects, enums).
 * Every blocking call releases the GIL: arguments are converted first (keys pinned with a
 * reference, buffers held through the buffer protocol), then the store runs without the GIL.
 * The object may be used from many threads at once and subclassed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "store/store.h"

struct mc_py_store {
	PyObject_HEAD
	struct mc_store *st;
	PyThread_type_lock lock;	/* serializes setup/close against each other */
};

struct mc_py_buffer {
	PyObject_HEAD
	void *data;
	Py_ssize_t size;
	Py_ssize_t exports;
};

static PyTypeObject mc_py_buffer_type;

/* ---------------------------------------------------------------- helpers */

static int mc_py_ready(struct mc_py_store *self)
{
	return self->st != NULL && self->st->initialized;
}

/* Keys of a list/tuple as UTF-8, each object pinned by a reference. */
struct mc_py_keys {
	PyObject **objs;
	const char **keys;
	Py_ssize_t n;
};

static void mc_py_keys_free(struct mc_py_keys *k)
{
	Py_ssize_t i;

	for (i = 0; i < k->n; i++)
		Py_XDECREF(k->objs[i]);
	PyMem_Free(k->objs);
	PyMem_Free(k->keys);
	memset(k, 0, sizeof(*k));
}

static int mc_py_keys_get(PyObject *seq, struct mc_py_keys *k)
{
	PyObject *fast = PySequence_Fast(seq, "keys must be a list of str");
	Py_ssize_t i;

	memset(k, 0, sizeof(*k));
	if (fast == NULL)
		return -1;
	k->n = PySequence_Fast_GET_SIZE(fast);
	k->objs = PyMem_Calloc((size_t)(k->n ? k->n : 1), sizeof(*k->objs));
	k->keys = PyMem_Calloc((size_t)(k->n ? k->n : 1), sizeof(*k->keys));
	if (k->objs == NULL || k->keys == NULL) {
		Py_DECREF(fast);
		PyErr_NoMemory();
		return -1;
	}
	for (i = 0; i < k->n; i++) {
		PyObject *o = PySequence_Fast_GET_ITEM(fast, i);

		if (!PyUnicode_Check(o)) {
			k->n = i;
			Py_DECREF(fast);
			mc_py_keys_free(k);
			PyErr_SetString(PyExc_TypeError, "keys must be str");
			return -1;
		}
		Py_INCREF(o);
		k->objs[i] = o;
		k->keys[i] = PyUnicode_AsUTF8(o);
		if (k->keys[i] == NULL) {
			k->n = i + 1;
			Py_DECREF(fast);
			mc_py_keys_free(k);
			return -1;
		}
	}
	Py_DECREF(fast);
	return 0;
}

/* An int attribute of a config object, or def when absent/None. */
static long long mc_py_attr_ll(PyObject *o, const char *name, long long def)
{
	PyObject *v = PyObject_GetAttrString(o, name);
	long long x = def;

	if (v == NULL) {
		PyErr_Clear();
		return def;
	}
	if (v != Py_None) {
		x = PyLong_AsLongLong(v);
		if (x == -1 && PyErr_Occurred()) {
			PyErr_Clear();
			x = def;
		}
	}
	Py_DECREF(v);
	return x;
}

/* ReplicateConfig -> wire config.  Strings are copied into owned storage in *names. */
struct mc_py_config {
	struct mc_rpc_config cfg;
	char names[MC_RPC_MAX_PREFERRED + 1][MC_RPC_MAX_NAME + 1];
};

static int mc_py_config_get(PyObject *o, struct mc_py_config *c)
{
	PyObject *v;

	mc_rpc_config_default(&c->cfg);
	if (o == NULL || o == Py_None)
		return 0;
	c->cfg.replica_num = (uint32_t)mc_py_attr_ll(o, "replica_num", 1);
	c->cfg.with_hard_pin = mc_py_attr_ll(o, "with_hard_pin", 0) != 0;
	c->cfg.soft_pin_action = (uint8_t)mc_py_attr_ll(o, "soft_pin_action", 0);
	c->cfg.prefer_alloc_in_same_node = mc_py_attr_ll(o, "prefer_alloc_in_same_node", 0) != 0;
	c->cfg.data_type = (uint32_t)mc_py_attr_ll(o, "data_type", 0);
	if (c->cfg.soft_pin_action > MC_SOFT_PIN_DISABLE) {
		PyErr_SetString(PyExc_ValueError, "soft_pin_action out of range");
		return -1;
	}
	v = PyObject_GetAttrString(o, "soft_pin_ttl_ms");
	if (v && v != Py_None) {
		unsigned long long t = PyLong_AsUnsignedLongLong(v);

		if (PyErr_Occurred()) {
			Py_DECREF(v);
			return -1;
		}
		c->cfg.has_soft_pin_ttl = 1;
		c->cfg.soft_pin_ttl_ms = t;
	}
	Py_XDECREF(v);
	PyErr_Clear();
	v = PyObject_GetAttrString(o, "preferred_segment");
	if (v && PyUnicode_Check(v) && PyUnicode_GetLength(v) > 0) {
		snprintf(c->names[MC_RPC_MAX_PREFERRED], sizeof(c->names[0]), "%s",
			 PyUnicode_AsUTF8(v));
		c->cfg.preferred_segment = mc_strv_c(c->names[MC_RPC_MAX_PREFERRED]);
	}
	Py_XDECREF(v);
	PyErr_Clear();
	v = PyObject_GetAttrString(o, "preferred_segments");
	if (v && PyList_Check(v)) {
		Py_ssize_t i, n = PyList_GET_SIZE(v);

		for (i = 0; i < n && i < MC_RPC_MAX_PREFERRED; i++) {
			PyObject *s = PyList_GET_ITEM(v, i);

			if (!PyUnicode_Check(s))
				continue;
			snprintf(c->names[c->cfg.n_preferred], sizeof(c->names[0]), "%s",
				 PyUnicode_AsUTF8(s));
			c->cfg.preferred[c->cfg.n_preferred] = mc_strv_c(c->names[c->cfg.n_preferred]);
			c->cfg.n_preferred++;
		}
	}
	Py_XDECREF(v);
	PyErr_Clear();
	if (c->cfg.soft_pin_action != MC_SOFT_PIN_ENABLE && c->cfg.has_soft_pin_ttl) {
		/* Upstream: a TTL without ENABLE is invalid. */
		c->cfg.replica_num = 0;
	}
	return 0;
}

static PyObject *mc_py_int_list(const int *v, Py_ssize_t n)
{
	PyObject *l = PyList_New(n);
	Py_ssize_t i;

	for (i = 0; l && i < n; i++)
		PyList_SET_ITEM(l, i, PyLong_FromLong(v[i]));
	return l;
}

static PyObject *mc_py_i64_list(const int64_t *v, Py_ssize_t n)
{
	PyObject *l = PyList_New(n);
	Py_ssize_t i;

	for (i = 0; l && i < n; i++)
		PyList_SET_ITEM(l, i, PyLong_FromLongLong(v[i]));
	return l;
}

/* A list of ints (addresses or sizes). */
static int mc_py_u64s(PyObject *seq, uint64_t **out, Py_ssize_t *n, const char *what)
{
	PyObject *fast = PySequence_Fast(seq, what);
	Py_ssize_t i;

	if (fast == NULL)
		return -1;
	*n = PySequence_Fast_GET_SIZE(fast);
	*out = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof(**out));
	for (i = 0; *out && i < *n; i++) {
		(*out)[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fast, i));
		if (PyErr_Occurred()) {
			PyMem_Free(*out);
			*out = NULL;
			Py_DECREF(fast);
			PyErr_Format(PyExc_TypeError, "%s must be ints", what);
			return -1;
		}
	}
	Py_DECREF(fast);
	return *out ? 0 : (PyErr_NoMemory(), -1);
}

/* ---------------------------------------------------------------- lifecycle */

static void mc_py_store_dealloc(struct mc_py_store *self)
{
	if (self->st) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_teardown(self->st);
		Py_END_ALLOW_THREADS
		pthread_mutex_destroy(&self->st->mu);
		free(self->st);
	}
	if (self->lock)
		PyThread_free_lock(self->lock);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int mc_py_store_init(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	(void)args;
	(void)kw;
	if (self->lock == NULL)
		self->lock = PyThread_allocate_lock();
	return self->lock ? 0 : -1;
}

static PyObject *mc_py_setup(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "local_hostname", "metadata_server", "global_segment_size",
				 "local_buffer_size", "protocol", "rdma_devices",
				 "master_server_addr", "engine", "enable_ssd_offload",
				 "ssd_offload_path", "tenant_id", "enable_client_http_server",
				 "client_http_port", NULL };
	const char *host, *meta, *proto, *dev, *master, *ssd_path = "", *tenant = "default";
	unsigned long long gsize, lsize;
	PyObject *engine = Py_None;
	int ssd = 0, http = 0, http_port = 9300, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ssKKsss|OpsspI:setup", names, &host, &meta,
					 &gsize, &lsize, &proto, &dev, &master, &engine, &ssd,
					 &ssd_path, &tenant, &http, &http_port))
		return NULL;
	if (ssd || http) {
		/* Not available yet: refuse rather than pretend. */
		return PyLong_FromLong(MC_ERR_NOT_SUPPORTED);
	}
	PyThread_acquire_lock(self->lock, WAIT_LOCK);
	if (self->st && self->st->initialized) {
		PyThread_release_lock(self->lock);
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	}
	if (self->st == NULL) {
		self->st = calloc(1, sizeof(*self->st));
		if (self->st == NULL) {
			PyThread_release_lock(self->lock);
			return PyErr_NoMemory();
		}
		pthread_mutex_init(&self->st->mu, NULL);
		self->st->reserve_fd = -1;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = mc_store_setup(self->st, host, meta, gsize, lsize, proto, dev, master);
	Py_END_ALLOW_THREADS
	PyThread_release_lock(self->lock);
	return PyLong_FromLong(rc);
}

static PyObject *mc_py_init_all(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "protocol", "device_name", "mount_segment_size", NULL };
	const char *proto, *dev;
	unsigned long long size = 16ull << 20;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|K:init_all", names, &proto, &dev, &size))
		return NULL;
	if (!mc_py_ready(self))
		return PyLong_FromLong(-1);
	Py_BEGIN_ALLOW_THREADS
	rc = mc_store_mount_segment(self->st, size);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(rc);
}

static PyObject *mc_py_close(struct mc_py_store *self, PyObject *unused)
{
	(void)unused;
	PyThread_acquire_lock(self->lock, WAIT_LOCK);
	if (self->st) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_teardown(self->st);
		Py_END_ALLOW_THREADS
	}
	PyThread_release_lock(self->lock);
	return PyLong_FromLong(0);
}

static PyObject *mc_py_health_check(struct mc_py_store *self, PyObject *unused)
{
	struct mc_rpc_call call;
	int rc;

	(void)unused;
	if (!mc_py_ready(self))
		return PyLong_FromLong(1);
	Py_BEGIN_ALLOW_THREADS
	mc_rpc_call_init(&call, MC_OP_SERVICE_READY);
	rc = mc_store_call(self->st, &call);
	if (rc == 0)
		rc = call.status;
	mc_rpc_call_fini(&call);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(rc ? 2 : 0);
}

static PyObject *mc_py_get_hostname(struct mc_py_store *self, PyObject *unused)
{
	(void)unused;
	return PyUnicode_FromString(self->st ? self->st->hostname : "");
}

static PyObject *mc_py_register_buffer(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_ptr", "size", NULL };
	unsigned long long ptr, size;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "KK:register_buffer", names, &ptr, &size))
		return NULL;
	if (!mc_py_ready(self) || ptr == 0 || size == 0)
		return PyLong_FromLong(-1);
	return PyLong_FromLong(mc_memreg_add(self->st->reg, ptr, size) ? MC_ERR_INVALID_PARAMS : 0);
}

static PyObject *mc_py_unregister_buffer(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_ptr", NULL };
	unsigned long long ptr;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "K:unregister_buffer", names, &ptr))
		return NULL;
	if (!mc_py_ready(self))
		return PyLong_FromLong(-1);
	return PyLong_FromLong(mc_memreg_remove(self->st->reg, ptr) ? MC_ERR_INVALID_PARAMS : 0);
}

/* ---------------------------------------------------------------- puts */

/* Run put_many on items (GIL released) and return per-item results. */
static int mc_py_put_items(struct mc_py_store *self, struct mc_put_item *items, Py_ssize_t n,
			   PyObject *config, int upsert)
{
	struct mc_py_config c;
	Py_ssize_t i;

	if (mc_py_config_get(config, &c))
		return -1;
	if (upsert && c.cfg.replica_num == 0) {
		for (i = 0; i < n; i++)
			items[i].result = MC_ERR_INVALID_PARAMS;
		return 0;
	}
	if (!mc_py_ready(self)) {
		for (i = 0; i < n; i++)
			items[i].result = -1;
		return 0;
	}
	Py_BEGIN_ALLOW_THREADS
	mc_store_put_many(self->st, items, (uint32_t)n, &c.cfg, upsert);
	Py_END_ALLOW_THREADS
	return 0;
}

static PyObject *mc_py_put_common(struct mc_py_store *self, PyObject *args, PyObject *kw,
				  int upsert)
{
	static char *names[] = { "key", "value", "config", NULL };
	const char *key;
	Py_buffer view;
	PyObject *config = NULL;
	struct mc_put_item it = { 0 };

	if (!PyArg_ParseTupleAndKeywords(args, kw, upsert ? "sy*|O:upsert" : "sy*|O:put", names,
					 &key, &view, &config))
		return NULL;
	it.key = key;
	it.buf = view.buf;
	it.size = (uint64_t)view.len;
	if (view.len == 0)
		it.result = MC_ERR_INVALID_PARAMS;
	else if (mc_py_put_items(self, &it, 1, config, upsert)) {
		PyBuffer_Release(&view);
		return NULL;
	}
	PyBuffer_Release(&view);
	return PyLong_FromLong(it.result);
}

static PyObject *mc_py_put(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_common(self, args, kw, 0);
}

static PyObject *mc_py_upsert(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_common(self, args, kw, 1);
}

/* put_parts(key, *parts, config=...): the value is the concatenation of the parts. */
static PyObject *mc_py_parts_common(struct mc_py_store *self, PyObject *args, PyObject *kw,
				   int upsert)
{
	Py_ssize_t np = PyTuple_GET_SIZE(args), i;
	PyObject *config = kw ? PyDict_GetItemString(kw, "config") : NULL, *res = NULL;
	Py_buffer *views = NULL;
	struct mc_iov *iov = NULL;
	struct mc_put_item it = { 0 };
	Py_ssize_t got = 0;

	if (kw && PyDict_Size(kw) > (config ? 1 : 0)) {
		PyErr_SetString(PyExc_TypeError, "unexpected keyword argument (only config)");
		return NULL;
	}
	if (np < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(args, 0))) {
		PyErr_SetString(PyExc_TypeError, "the first argument must be the key (str)");
		return NULL;
	}
	it.key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(args, 0));
	views = PyMem_Calloc((size_t)np, sizeof(*views));
	iov = PyMem_Calloc((size_t)np, sizeof(*iov));
	if (!views || !iov) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 1; i < np; i++, got++) {
		if (PyObject_GetBuffer(PyTuple_GET_ITEM(args, i), &views[got], PyBUF_ND) ||
		    views[got].ndim > 1 || views[got].itemsize != 1) {
			if (!PyErr_Occurred())
				got++;
			PyErr_Clear();
			PyErr_SetString(PyExc_RuntimeError, "parts must be 1-D bytes-like");
			goto out;
		}
		iov[got].base = views[got].buf;
		iov[got].len = (uint64_t)views[got].len;
		it.size += iov[got].len;
	}
	it.iov = iov;
	it.iovcnt = (uint32_t)got;
	if (it.size == 0)
		it.result = MC_ERR_INVALID_PARAMS;
	else if (mc_py_put_items(self, &it, 1, config, upsert))
		goto out;
	res = PyLong_FromLong(it.result);
out:
	for (i = 0; views && i < got; i++)
		PyBuffer_Release(&views[i]);
	PyMem_Free(views);
	PyMem_Free(iov);
	return res;
}

static PyObject *mc_py_put_parts(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_parts_common(self, args, kw, 0);
}

static PyObject *mc_py_upsert_parts(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_parts_common(self, args, kw, 1);
}

/* put_batch(keys, values, config): returns the first error or 0. */
static PyObject *mc_py_put_batch_common(struct mc_py_store *self, PyObject *args, PyObject *kw,
					int upsert)
{
	static char *names[] = { "keys", "values", "config", NULL };
	PyObject *keys_o, *vals_o, *config = NULL, *fast = NULL, *res = NULL;
	struct mc_py_keys k;
	Py_buffer *views = NULL;
	struct mc_put_item *items = NULL;
	Py_ssize_t i, got = 0;
	int first = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, upsert ? "OO|O:upsert_batch" : "OO|O:put_batch",
					 names, &keys_o, &vals_o, &config))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	fast = PySequence_Fast(vals_o, "values must be a list");
	if (fast == NULL)
		goto out;
	if (PySequence_Fast_GET_SIZE(fast) != k.n) {
		res = PyLong_FromLong(MC_ERR_INVALID_PARAMS);
		goto out;
	}
	views = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*views));
	items = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*items));
	if (!views || !items) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < k.n; i++, got++) {
		if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fast, i), &views[i], PyBUF_SIMPLE))
			goto out;
		items[i].key = k.keys[i];
		items[i].buf = views[i].buf;
		items[i].size = (uint64_t)views[i].len;
	}
	if (k.n && mc_py_put_items(self, items, k.n, config, upsert))
		goto out;
	for (i = 0; i < k.n && !first; i++)
		first = items[i].result;
	res = PyLong_FromLong(first);
out:
	for (i = 0; views && i < got; i++)
		PyBuffer_Release(&views[i]);
	PyMem_Free(views);
	PyMem_Free(items);
	Py_XDECREF(fast);
	mc_py_keys_free(&k);
	return res;
}

static PyObject *mc_py_put_batch(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_batch_common(self, args, kw, 0);
}

static PyObject *mc_py_upsert_batch(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_batch_common(self, args, kw, 1);
}

static PyObject *mc_py_put_from_common(struct mc_py_store *self, PyObject *args, PyObject *kw,
				       int upsert)
{
	static char *names[] = { "key", "buffer_ptr", "size", "config", NULL };
	const char *key;
	unsigned long long ptr, size;
	PyObject *config = NULL;
	struct mc_put_item it = { 0 };

	if (!PyArg_ParseTupleAndKeywords(args, kw, upsert ? "sKK|O:upsert_from" : "sKK|O:put_from",
					 names, &key, &ptr, &size, &config))
		return NULL;
	it.key = key;
	it.buf = (const void *)(uintptr_t)ptr;
	it.size = size;
	if (ptr == 0 || size == 0)
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	if (mc_py_put_items(self, &it, 1, config, upsert))
		return NULL;
	return PyLong_FromLong(it.result);
}

static PyObject *mc_py_put_from(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_from_common(self, args, kw, 0);
}

static PyObject *mc_py_upsert_from(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_from_common(self, args, kw, 1);
}

/* The value is the metadata bytes followed by the data bytes. */
static PyObject *mc_py_put_from_with_metadata(struct mc_py_store *self, PyObject *args,
					      PyObject *kw)
{
	static char *names[] = { "key", "buffer_ptr", "metadata_buffer_ptr", "size",
				 "metadata_size", "config", NULL };
	const char *key;
	unsigned long long ptr, mptr, size, msize;
	PyObject *config = NULL;
	struct mc_iov iov[2];
	struct mc_put_item it = { 0 };

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sKKKK|O:put_from_with_metadata", names, &key,
					 &ptr, &mptr, &size, &msize, &config))
		return NULL;
	iov[0].base = (void *)(uintptr_t)mptr;
	iov[0].len = msize;
	iov[1].base = (void *)(uintptr_t)ptr;
	iov[1].len = size;
	it.key = key;
	it.iov = iov;
	it.iovcnt = 2;
	it.size = size + msize;
	if ((ptr == 0 && size) || (mptr == 0 && msize) || it.size == 0)
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	if (mc_py_put_items(self, &it, 1, config, 0))
		return NULL;
	return PyLong_FromLong(it.result);
}

static PyObject *mc_py_batch_put_from_common(struct mc_py_store *self, PyObject *args,
					     PyObject *kw, int upsert)
{
	static char *names[] = { "keys", "buffer_ptrs", "sizes", "config", NULL };
	PyObject *keys_o, *ptrs_o, *sizes_o, *config = NULL, *res = NULL;
	struct mc_py_keys k;
	uint64_t *ptrs = NULL, *sizes = NULL;
	Py_ssize_t np = 0, ns = 0, i;
	struct mc_put_item *items = NULL;
	int *out = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw,
					 upsert ? "OOO|O:batch_upsert_from" : "OOO|O:batch_put_from",
					 names, &keys_o, &ptrs_o, &sizes_o, &config))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	if (mc_py_u64s(ptrs_o, &ptrs, &np, "buffer_ptrs") ||
	    mc_py_u64s(sizes_o, &sizes, &ns, "sizes"))
		goto out;
	items = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*items));
	out = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*out));
	if (!items || !out) {
		PyErr_NoMemory();
		goto out;
	}
	if (np != k.n || ns != k.n) {
		for (i = 0; i < k.n; i++)
			out[i] = MC_ERR_INVALID_PARAMS;
	} else {
		for (i = 0; i < k.n; i++) {
			items[i].key = k.keys[i];
			items[i].buf = (const void *)(uintptr_t)ptrs[i];
			items[i].size = sizes[i];
		}
		if (k.n && mc_py_put_items(self, items, k.n, config, upsert))
			goto out;
		for (i = 0; i < k.n; i++)
			out[i] = items[i].result;
	}
	res = mc_py_int_list(out, k.n);
out:
	PyMem_Free(ptrs);
	PyMem_Free(sizes);
	PyMem_Free(items);
	PyMem_Free(out);
	mc_py_keys_free(&k);
	return res;
}

static PyObject *mc_py_batch_put_from(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_batch_put_from_common(self, args, kw, 0);
}

static PyObject *mc_py_batch_upsert_from(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_batch_put_from_common(self, args, kw, 1);
}

/* Per-key lists of (ptr, size) pairs -> iovs; returns 0 or -1 with an exception set, or 1 when
 * the shapes do not match (the caller answers -600 per key). */
static int mc_py_multi(PyObject *ptrss, PyObject *sizess, Py_ssize_t n, struct mc_iov ***out,
		       uint32_t **counts)
{
	PyObject *pf = PySequence_Fast(ptrss, "all_buffer_ptrs must be a list of lists");
	PyObject *sf = pf ? PySequence_Fast(sizess, "all_sizes must be a list of lists") : NULL;
	Py_ssize_t i;
	int rc = -1;

	*out = NULL;
	*counts = NULL;
	if (!pf || !sf)
		goto done;
	if (PySequence_Fast_GET_SIZE(pf) != n || PySequence_Fast_GET_SIZE(sf) != n) {
		rc = 1;
		goto done;
	}
	*out = PyMem_Calloc((size_t)(n ? n : 1), sizeof(**out));
	*counts = PyMem_Calloc((size_t)(n ? n : 1), sizeof(**counts));
	if (!*out || !*counts) {
		PyErr_NoMemory();
		goto done;
	}
	for (i = 0; i < n; i++) {
		uint64_t *p = NULL, *s = NULL;
		Py_ssize_t np, ns, j;

		if (mc_py_u64s(PySequence_Fast_GET_ITEM(pf, i), &p, &np, "buffer pointers") ||
		    mc_py_u64s(PySequence_Fast_GET_ITEM(sf, i), &s, &ns, "sizes")) {
			PyMem_Free(p);
			goto done;
		}
		if (np != ns) {
			PyMem_Free(p);
			PyMem_Free(s);
			rc = 1;
			goto done;
		}
		(*out)[i] = PyMem_Calloc((size_t)(np ? np : 1), sizeof(struct mc_iov));
		for (j = 0; (*out)[i] && j < np; j++) {
			(*out)[i][j].base = (void *)(uintptr_t)p[j];
			(*out)[i][j].len = s[j];
		}
		(*counts)[i] = (uint32_t)np;
		PyMem_Free(p);
		PyMem_Free(s);
	}
	rc = 0;
done:
	Py_XDECREF(pf);
	Py_XDECREF(sf);
	return rc;
}

static void mc_py_multi_free(struct mc_iov **iovs, uint32_t *counts, Py_ssize_t n)
{
	Py_ssize_t i;

	for (i = 0; iovs && i < n; i++)
		PyMem_Free(iovs[i]);
	PyMem_Free(iovs);
	PyMem_Free(counts);
}

static PyObject *mc_py_batch_put_from_multi_buffers(struct mc_py_store *self, PyObject *args,
						    PyObject *kw)
{
	static char *names[] = { "keys", "all_buffer_ptrs", "all_sizes", "config", NULL };
	PyObject *keys_o, *ptrss, *sizess, *config = NULL, *res = NULL;
	struct mc_py_keys k;
	struct mc_iov **iovs = NULL;
	uint32_t *counts = NULL, j;
	struct mc_put_item *items = NULL;
	int *out = NULL, shape;
	Py_ssize_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O:batch_put_from_multi_buffers", names,
					 &keys_o, &ptrss, &sizess, &config))
		return NULL;
	if (!mc_py_ready(self))
		return PyList_New(0);
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	shape = mc_py_multi(ptrss, sizess, k.n, &iovs, &counts);
	if (shape < 0)
		goto out;
	items = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*items));
	out = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*out));
	if (!items || !out) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < k.n; i++) {
		items[i].key = k.keys[i];
		if (shape == 1)
			continue;
		items[i].iov = iovs[i];
		items[i].iovcnt = counts[i];
		for (j = 0; j < counts[i]; j++)
			items[i].size += iovs[i][j].len;
	}
	if (shape == 1) {
		for (i = 0; i < k.n; i++)
			out[i] = MC_ERR_INVALID_PARAMS;
	} else {
		if (k.n && mc_py_put_items(self, items, k.n, config, 0))
			goto out;
		for (i = 0; i < k.n; i++)
			out[i] = items[i].result;
	}
	res = mc_py_int_list(out, k.n);
out:
	mc_py_multi_free(iovs, counts, k.n);
	PyMem_Free(items);
	PyMem_Free(out);
	mc_py_keys_free(&k);
	return res;
}

/* ---------------------------------------------------------------- gets */

static void mc_py_get_items(struct mc_py_store *self, struct mc_get_item *items, Py_ssize_t n)
{
	Py_ssize_t i;

	if (!mc_py_ready(self)) {
		for (i = 0; i < n; i++)
			items[i].result = -1;
		return;
	}
	Py_BEGIN_ALLOW_THREADS
	mc_store_get_many(self->st, items, (uint32_t)n);
	Py_END_ALLOW_THREADS
}

static PyObject *mc_py_get_into(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", "buffer_ptr", "size", NULL };
	const char *key;
	unsigned long long ptr, size;
	struct mc_get_item it = { 0 };

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sKK:get_into", names, &key, &ptr, &size))
		return NULL;
	if (ptr == 0)
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	it.key = key;
	it.buf = (void *)(uintptr_t)ptr;
	it.cap = size;
	mc_py_get_items(self, &it, 1);
	return PyLong_FromLongLong(it.result);
}

static PyObject *mc_py_batch_get_into(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "keys", "buffer_ptrs", "sizes", NULL };
	PyObject *keys_o, *ptrs_o, *sizes_o, *res = NULL;
	struct mc_py_keys k;
	uint64_t *ptrs = NULL, *sizes = NULL;
	Py_ssize_t np = 0, ns = 0, i;
	struct mc_get_item *items = NULL;
	int64_t *out = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:batch_get_into", names, &keys_o, &ptrs_o,
					 &sizes_o))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	if (mc_py_u64s(ptrs_o, &ptrs, &np, "buffer_ptrs") ||
	    mc_py_u64s(sizes_o, &sizes, &ns, "sizes"))
		goto out;
	items = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*items));
	out = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*out));
	if (!items || !out) {
		PyErr_NoMemory();
		goto out;
	}
	if (np != k.n || ns != k.n) {
		for (i = 0; i < k.n; i++)
			out[i] = MC_ERR_INVALID_PARAMS;
	} else {
		for (i = 0; i < k.n; i++) {
			items[i].key = k.keys[i];
			items[i].buf = (void *)(uintptr_t)ptrs[i];
			items[i].cap = sizes[i];
		}
		if (k.n)
			mc_py_get_items(self, items, k.n);
		for (i = 0; i < k.n; i++)
			out[i] = items[i].result;
	}
	res = mc_py_i64_list(out, k.n);
out:
	PyMem_Free(ptrs);
	PyMem_Free(sizes);
	PyMem_Free(items);
	PyMem_Free(out);
	mc_py_keys_free(&k);
	return res;
}

static PyObject *mc_py_batch_get_into_multi_buffers(struct mc_py_store *self, PyObject *args,
						    PyObject *kw)
{
	static char *names[] = { "keys", "all_buffer_ptrs", "all_sizes",
				 "prefer_alloc_in_same_node", NULL };
	PyObject *keys_o, *ptrss, *sizess, *res = NULL;
	struct mc_py_keys k;
	struct mc_iov **iovs = NULL;
	uint32_t *counts = NULL, j;
	struct mc_get_item *items = NULL;
	struct mc_get_range **rgs = NULL;
	int64_t *out = NULL;
	int prefer = 0, shape;
	Py_ssize_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|p:batch_get_into_multi_buffers", names,
					 &keys_o, &ptrss, &sizess, &prefer))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	shape = mc_py_multi(ptrss, sizess, k.n, &iovs, &counts);
	if (shape < 0)
		goto out;
	items = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*items));
	rgs = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*rgs));
	out = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*out));
	if (!items || !rgs || !out) {
		PyErr_NoMemory();
		goto out;
	}
	if (shape == 1) {
		for (i = 0; i < k.n; i++)
			out[i] = MC_ERR_INVALID_PARAMS;
	} else {
		for (i = 0; i < k.n; i++) {
			uint64_t off = 0;

			rgs[i] = PyMem_Calloc(counts[i] ? counts[i] : 1, sizeof(**rgs));
			if (rgs[i] == NULL) {
				PyErr_NoMemory();
				goto out;
			}
			for (j = 0; j < counts[i]; j++) {
				rgs[i][j].dst = iovs[i][j].base;
				rgs[i][j].src_off = off;
				rgs[i][j].len = iovs[i][j].len;
				off += iovs[i][j].len;
			}
			items[i].key = k.keys[i];
			items[i].ranges = rgs[i];
			items[i].nranges = counts[i];
		}
		if (k.n)
			mc_py_get_items(self, items, k.n);
		for (i = 0; i < k.n; i++)
			out[i] = items[i].result;
	}
	res = mc_py_i64_list(out, k.n);
out:
	for (i = 0; rgs && i < k.n; i++)
		PyMem_Free(rgs[i]);
	PyMem_Free(rgs);
	mc_py_multi_free(iovs, counts, k.n);
	PyMem_Free(items);
	PyMem_Free(out);
	mc_py_keys_free(&k);
	return res;
}

/* Read a whole object into fresh memory from alloc(size). */
static int64_t mc_py_fetch(struct mc_py_store *self, const char *key, void **buf,
			   void *(*alloc)(size_t))
{
	int64_t size, got;
	struct mc_get_item it = { 0 };

	if (!mc_py_ready(self))
		return -1;
	Py_BEGIN_ALLOW_THREADS
	size = mc_store_get_size(self->st, key);
	Py_END_ALLOW_THREADS
	if (size < 0)
		return size;
	*buf = alloc((size_t)size ? (size_t)size : 1);
	if (*buf == NULL)
		return -ENOMEM;
	it.key = key;
	it.buf = *buf;
	it.cap = (uint64_t)size;
	Py_BEGIN_ALLOW_THREADS
	mc_store_get_many(self->st, &it, 1);
	Py_END_ALLOW_THREADS
	got = it.result;
	return got;
}

static PyObject *mc_py_get(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", NULL };
	const char *key;
	void *buf = NULL;
	int64_t got;
	PyObject *res;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s:get", names, &key))
		return NULL;
	got = mc_py_fetch(self, key, &buf, malloc);
	if (got < 0) {
		free(buf);
		return PyBytes_FromStringAndSize("", 0);
	}
	res = PyBytes_FromStringAndSize(buf, (Py_ssize_t)got);
	free(buf);
	return res;
}

static PyObject *mc_py_get_batch(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "keys", NULL };
	PyObject *keys_o, *res;
	struct mc_py_keys k;
	Py_ssize_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O:get_batch", names, &keys_o))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	res = PyList_New(k.n);
	for (i = 0; res && i < k.n; i++) {
		void *buf = NULL;
		int64_t got = mc_py_fetch(self, k.keys[i], &buf, malloc);

		PyList_SET_ITEM(res, i, PyBytes_FromStringAndSize(got > 0 ? buf : "",
								  got > 0 ? (Py_ssize_t)got : 0));
		free(buf);
	}
	mc_py_keys_free(&k);
	return res;
}

static PyObject *mc_py_buffer_new_from(void *data, Py_ssize_t size)
{
	struct mc_py_buffer *b = PyObject_New(struct mc_py_buffer, &mc_py_buffer_type);

	if (b == NULL) {
		free(data);
		return NULL;
	}
	b->data = data;
	b->size = size;
	b->exports = 0;
	return (PyObject *)b;
}

static PyObject *mc_py_get_buffer(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", NULL };
	const char *key;
	void *buf = NULL;
	int64_t got;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s:get_buffer", names, &key))
		return NULL;
	got = mc_py_fetch(self, key, &buf, malloc);
	if (got < 0) {
		free(buf);
		Py_RETURN_NONE;
	}
	return mc_py_buffer_new_from(buf, (Py_ssize_t)got);
}

static PyObject *mc_py_batch_get_buffer(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "keys", NULL };
	PyObject *keys_o, *res;
	struct mc_py_keys k;
	Py_ssize_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O:batch_get_buffer", names, &keys_o))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	res = PyList_New(k.n);
	for (i = 0; res && i < k.n; i++) {
		void *buf = NULL;
		int64_t got = mc_py_fetch(self, k.keys[i], &buf, malloc);

		if (got < 0) {
			free(buf);
			Py_INCREF(Py_None);
			PyList_SET_ITEM(res, i, Py_None);
		} else {
			PyList_SET_ITEM(res, i, mc_py_buffer_new_from(buf, (Py_ssize_t)got));
		}
	}
	mc_py_keys_free(&k);
	return res;
}

/* get_into_ranges(buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes):
 * for group g, key all_keys[g][k]: read ranges (src offset, size) of the object into
 * buffer_ptrs[g] + dst offset.  Returns result[g][k] = per-range bytes read or a negative code. */
static PyObject *mc_py_get_into_ranges(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_ptrs", "all_keys", "all_dst_offsets", "all_src_offsets",
				 "all_sizes", NULL };
	PyObject *bp, *ak, *ad, *as, *asz, *res = NULL;
	uint64_t *bases = NULL;
	Py_ssize_t ng, g;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO:get_into_ranges", names, &bp, &ak, &ad,
					 &as, &asz))
		return NULL;
	if (mc_py_u64s(bp, &bases, &ng, "buffer_ptrs"))
		return NULL;
	if (PySequence_Size(ak) != ng || PySequence_Size(ad) != ng || PySequence_Size(as) != ng ||
	    PySequence_Size(asz) != ng) {
		PyMem_Free(bases);
		PyErr_SetString(PyExc_ValueError, "all lists must have one entry per buffer");
		return NULL;
	}
	res = PyList_New(ng);
	for (g = 0; res && g < ng; g++) {
		PyObject *keys_g = PySequence_GetItem(ak, g), *dg = PySequence_GetItem(ad, g);
		PyObject *sg = PySequence_GetItem(as, g), *zg = PySequence_GetItem(asz, g);
		PyObject *glist = NULL;
		struct mc_py_keys k = { 0 };
		Py_ssize_t i;

		if (!keys_g || !dg || !sg || !zg || mc_py_keys_get(keys_g, &k))
			goto group_fail;
		glist = PyList_New(k.n);
		for (i = 0; glist && i < k.n; i++) {
			uint64_t *d = NULL, *s = NULL, *z = NULL;
			Py_ssize_t nd, ns, nz, j;
			struct mc_get_range *rg;
			struct mc_get_item it = { 0 };
			PyObject *rl;

			if (mc_py_u64s(PySequence_GetItem(dg, i), &d, &nd, "dst offsets") ||
			    mc_py_u64s(PySequence_GetItem(sg, i), &s, &ns, "src offsets") ||
			    mc_py_u64s(PySequence_GetItem(zg, i), &z, &nz, "sizes") || nd != ns ||
			    nd != nz) {
				PyMem_Free(d);
				PyMem_Free(s);
				PyMem_Free(z);
				Py_CLEAR(glist);
				if (!PyErr_Occurred())
					PyErr_SetString(PyExc_ValueError, "range lists differ in length");
				break;
			}
			rg = PyMem_Calloc((size_t)(nd ? nd : 1), sizeof(*rg));
			for (j = 0; rg && j < nd; j++) {
				rg[j].dst = (void *)(uintptr_t)(bases[g] + d[j]);
				rg[j].src_off = s[j];
				rg[j].len = z[j];
			}
			it.key = k.keys[i];
			it.ranges = rg;
			it.nranges = (uint32_t)nd;
			mc_py_get_items(self, &it, 1);
			rl = PyList_New(nd);
			for (j = 0; rl && j < nd; j++)
				PyList_SET_ITEM(rl, j, PyLong_FromLongLong(it.result < 0 ? it.result
										 : (int64_t)z[j]));
			PyList_SET_ITEM(glist, i, rl);
			PyMem_Free(rg);
			PyMem_Free(d);
			PyMem_Free(s);
			PyMem_Free(z);
		}
group_fail:
		mc_py_keys_free(&k);
		Py_XDECREF(keys_g);
		Py_XDECREF(dg);
		Py_XDECREF(sg);
		Py_XDECREF(zg);
		if (glist == NULL) {
			Py_CLEAR(res);
			break;
		}
		PyList_SET_ITEM(res, g, glist);
	}
	PyMem_Free(bases);
	return res;
}

/* ---------------------------------------------------------------- queries, removal */

static PyObject *mc_py_is_exist(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", NULL };
	const char *key;
	int res = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s:is_exist", names, &key))
		return NULL;
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_exist_many(self->st, &key, 1, &res);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLong(res);
}

static PyObject *mc_py_batch_is_exist(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "keys", NULL };
	PyObject *keys_o, *res;
	struct mc_py_keys k;
	int *out;
	Py_ssize_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O:batch_is_exist", names, &keys_o))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	out = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*out));
	if (out == NULL) {
		mc_py_keys_free(&k);
		return PyErr_NoMemory();
	}
	if (!mc_py_ready(self)) {
		for (i = 0; i < k.n; i++)
			out[i] = -1;
	} else if (k.n) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_exist_many(self->st, k.keys, (uint32_t)k.n, out);
		Py_END_ALLOW_THREADS
	}
	res = mc_py_int_list(out, k.n);
	PyMem_Free(out);
	mc_py_keys_free(&k);
	return res;
}

static PyObject *mc_py_get_size(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", NULL };
	const char *key;
	int64_t res = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s:get_size", names, &key))
		return NULL;
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		res = mc_store_get_size(self->st, key);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLongLong(res);
}

static PyObject *mc_py_remove(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", "force", NULL };
	const char *key;
	int force = 0, res = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|p:remove", names, &key, &force))
		return NULL;
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_remove_many(self->st, &key, 1, force, &res);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLong(res);
}

static PyObject *mc_py_batch_remove(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "keys", "force", NULL };
	PyObject *keys_o, *res;
	struct mc_py_keys k;
	int force = 0, *out;
	Py_ssize_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:batch_remove", names, &keys_o, &force))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	out = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*out));
	if (out == NULL) {
		mc_py_keys_free(&k);
		return PyErr_NoMemory();
	}
	if (!mc_py_ready(self)) {
		for (i = 0; i < k.n; i++)
			out[i] = -1;
	} else if (k.n) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_remove_many(self->st, k.keys, (uint32_t)k.n, force, out);
		Py_END_ALLOW_THREADS
	}
	res = mc_py_int_list(out, k.n);
	PyMem_Free(out);
	mc_py_keys_free(&k);
	return res;
}

static PyObject *mc_py_remove_by_regex(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "regex_pattern", "force", NULL };
	const char *pat;
	int force = 0;
	int64_t res = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|p:remove_by_regex", names, &pat, &force))
		return NULL;
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		res = mc_store_remove_regex(self->st, pat, force);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLongLong(res);
}

static PyObject *mc_py_remove_all(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "force", NULL };
	int force = 0;
	int64_t res = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:remove_all", names, &force))
		return NULL;
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		res = mc_store_remove_all(self->st, force);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLongLong(res);
}

/* _query(keys) -> {key: (code, [dict per replica])}: raw material for get_replica_desc. */
static PyObject *mc_py_query(struct mc_py_store *self, PyObject *args)
{
	PyObject *keys_o, *res;
	struct mc_py_keys k;
	struct mc_query_item *items;
	Py_ssize_t i;
	uint32_t j;

	if (!PyArg_ParseTuple(args, "O:_query", &keys_o))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	items = calloc((size_t)(k.n ? k.n : 1), sizeof(*items));
	if (items == NULL) {
		mc_py_keys_free(&k);
		return PyErr_NoMemory();
	}
	for (i = 0; i < k.n; i++)
		items[i].key = k.keys[i];
	if (mc_py_ready(self) && k.n) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_query_many(self->st, items, (uint32_t)k.n);
		Py_END_ALLOW_THREADS
	} else {
		for (i = 0; i < k.n; i++)
			items[i].code = -1;
	}
	res = PyDict_New();
	for (i = 0; res && i < k.n; i++) {
		PyObject *reps = PyList_New(items[i].nrep), *t;

		for (j = 0; reps && j < items[i].nrep; j++) {
			struct mc_rpc_replica *r = &items[i].reps[j];

			PyList_SET_ITEM(reps, j,
					Py_BuildValue("{s:K,s:i,s:i,s:K,s:K,s:s#,s:s#,s:s#}", "id",
						      (unsigned long long)r->id, "type", r->type,
						      "status", r->status, "size",
						      (unsigned long long)r->size, "addr",
						      (unsigned long long)r->addr, "segment",
						      r->segment_name.p, (Py_ssize_t)r->segment_name.n,
						      "endpoint", r->endpoint.p,
						      (Py_ssize_t)r->endpoint.n, "protocol",
						      r->protocol.p, (Py_ssize_t)r->protocol.n));
		}
		t = Py_BuildValue("(iN)", items[i].code, reps);
		PyDict_SetItem(res, k.objs[i], t);
		Py_XDECREF(t);
	}
	free(items);
	mc_py_keys_free(&k);
	return res;
}

static PyObject *mc_py_batch_replica_clear(struct mc_py_store *self, PyObject *args,
					   PyObject *kw)
{
	static char *names[] = { "keys", "segment_name", NULL };
	PyObject *keys_o, *res;
	const char *seg = "";
	struct mc_py_keys k;
	uint8_t *cleared;
	Py_ssize_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|s:batch_replica_clear", names, &keys_o, &seg))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	cleared = calloc((size_t)(k.n ? k.n : 1), 1);
	if (mc_py_ready(self) && k.n && cleared) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_replica_clear(self->st, k.keys, (uint32_t)k.n, seg, cleared);
		Py_END_ALLOW_THREADS
	}
	res = PyList_New(0);
	for (i = 0; res && cleared && i < k.n; i++)
		if (cleared[i])
			PyList_Append(res, k.objs[i]);
	free(cleared);
	mc_py_keys_free(&k);
	return res;
}

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef mc_py_store_methods[] = {
	{ "setup", KW mc_py_setup, METH_VARARGS | METH_KEYWORDS, "Connect and contribute memory." },
	{ "init_all", KW mc_py_init_all, METH_VARARGS | METH_KEYWORDS, "Mount one more segment." },
	{ "close", (PyCFunction)mc_py_close, METH_NOARGS, "Tear down (idempotent)." },
	{ "health_check", (PyCFunction)mc_py_health_check, METH_NOARGS, "0, 1 or 2." },
	{ "get_hostname", (PyCFunction)mc_py_get_hostname, METH_NOARGS, "host:port." },
	{ "register_buffer", KW mc_py_register_buffer, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "unregister_buffer", KW mc_py_unregister_buffer, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "put", KW mc_py_put, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "upsert", KW mc_py_upsert, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "put_parts", KW mc_py_put_parts, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "upsert_parts", KW mc_py_upsert_parts, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "put_batch", KW mc_py_put_batch, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "upsert_batch", KW mc_py_upsert_batch, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "put_from", KW mc_py_put_from, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "upsert_from", KW mc_py_upsert_from, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "put_from_with_metadata", KW mc_py_put_from_with_metadata, METH_VARARGS | METH_KEYWORDS,
	  NULL },
	{ "batch_put_from", KW mc_py_batch_put_from, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_upsert_from", KW mc_py_batch_upsert_from, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_put_from_multi_buffers", KW mc_py_batch_put_from_multi_buffers,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get", KW mc_py_get, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_batch", KW mc_py_get_batch, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_buffer", KW mc_py_get_buffer, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_get_buffer", KW mc_py_batch_get_buffer, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_into", KW mc_py_get_into, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_get_into", KW mc_py_batch_get_into, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_get_into_multi_buffers", KW mc_py_batch_get_into_multi_buffers,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_into_ranges", KW mc_py_get_into_ranges, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "is_exist", KW mc_py_is_exist, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_is_exist", KW mc_py_batch_is_exist, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_size", KW mc_py_get_size, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "remove", KW mc_py_remove, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_remove", KW mc_py_batch_remove, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "remove_by_regex", KW mc_py_remove_by_regex, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "remove_all", KW mc_py_remove_all, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_replica_clear", KW mc_py_batch_replica_clear, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "_query", (PyCFunction)mc_py_query, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject mc_py_store_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "mooncake._store.MooncakeDistributedStore",
	.tp_basicsize = sizeof(struct mc_py_store),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Mooncake distributed store client (C core).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)mc_py_store_init,
	.tp_dealloc = (destructor)mc_py_store_dealloc,
	.tp_methods = mc_py_store_methods,
};

/* ---------------------------------------------------------------- BufferHandle */

static int mc_py_buffer_getbuf(struct mc_py_buffer *self, Py_buffer *view, int flags)
{
	if (PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 1, flags))
		return -1;
	self->exports++;
	return 0;
}

static void mc_py_buffer_releasebuf(struct mc_py_buffer *self, Py_buffer *view)
{
	(void)view;
	self->exports--;
}

static void mc_py_buffer_dealloc(struct mc_py_buffer *self)
{
	free(self->data);
	PyObject_Free(self);
}

static PyObject *mc_py_buffer_ptr(struct mc_py_buffer *self, PyObject *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)self->data);
}

static PyObject *mc_py_buffer_size(struct mc_py_buffer *self, PyObject *unused)
{
	(void)unused;
	return PyLong_FromSsize_t(self->size);
}

static Py_ssize_t mc_py_buffer_len(struct mc_py_buffer *self)
{
	return self->size;
}

static PyBufferProcs mc_py_buffer_procs = {
	.bf_getbuffer = (getbufferproc)mc_py_buffer_getbuf,
	.bf_releasebuffer = (releasebufferproc)mc_py_buffer_releasebuf,
};

static PySequenceMethods mc_py_buffer_seq = {
	.sq_length = (lenfunc)mc_py_buffer_len,
};

static PyMethodDef mc_py_buffer_methods[] = {
	{ "ptr", (PyCFunction)mc_py_buffer_ptr, METH_NOARGS, "Address of the data." },
	{ "size", (PyCFunction)mc_py_buffer_size, METH_NOARGS, "Bytes." },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject mc_py_buffer_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "mooncake._store.BufferHandle",
	.tp_basicsize = sizeof(struct mc_py_buffer),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "An object's bytes, readable through the buffer protocol.",
	.tp_dealloc = (destructor)mc_py_buffer_dealloc,
	.tp_as_buffer = &mc_py_buffer_procs,
	.tp_as_sequence = &mc_py_buffer_seq,
	.tp_methods = mc_py_buffer_methods,
};

/* ---------------------------------------------------------------- host memory */

static PyObject *mc_py_host_alloc(PyObject *mod, PyObject *args)
{
	unsigned long long size;
	void *p = NULL;

	(void)mod;
	if (!PyArg_ParseTuple(args, "K:alloc", &size))
		return NULL;
	if (size == 0 || posix_memalign(&p, 4096, size))
		return PyLong_FromLong(0);
	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)p);
}

static PyObject *mc_py_host_free(PyObject *mod, PyObject *args)
{
	unsigned long long ptr;

	(void)mod;
	if (!PyArg_ParseTuple(args, "K:free", &ptr))
		return NULL;
	free((void *)(uintptr_t)ptr);
	Py_RETURN_NONE;
}

static PyMethodDef mc_py_module_methods[] = {
	{ "host_alloc", mc_py_host_alloc, METH_VARARGS, "4 KiB-aligned host memory; 0 on failure." },
	{ "host_free", mc_py_host_free, METH_VARARGS, "Free memory from host_alloc." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef mc_py_module = {
	PyModuleDef_HEAD_INIT, "mooncake._store",
	"C core of mooncake.store (see mooncake/store.py).", -1, mc_py_module_methods,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__store(void);
PyMODINIT_FUNC PyInit__store(void)
{
	PyObject *m;

	if (PyType_Ready(&mc_py_store_type) < 0 || PyType_Ready(&mc_py_buffer_type) < 0)
		return NULL;
	m = PyModule_Create(&mc_py_module);
	if (m == NULL)
		return NULL;
	Py_INCREF(&mc_py_store_type);
	Py_INCREF(&mc_py_buffer_type);
	if (PyModule_AddObject(m, "MooncakeDistributedStore", (PyObject *)&mc_py_store_type) ||
	    PyModule_AddObject(m, "BufferHandle", (PyObject *)&mc_py_buffer_type)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
