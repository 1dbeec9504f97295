/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: the CPython extension behind mooncake.store.MooncakeDistributedStore.
 *
 * The type here implements upstream's store methods with their exact keyword names, defaults
 * and return conventions (plain ints, bytes, lists as long as the input); the package
 * mooncake.store (python/mooncake/store/__init__.py) subclasses it to add the pure-Python parts
 * (dict setup, replica descriptor objects, enums).
 * Every blocking call releases the GIL: arguments are converted first (keys pinned with a
 * reference, buffers held through the buffer protocol), then the store runs without the GIL.
 * The object may be used from many threads at once and subclassed.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "python/store_py.h"

struct mc_py_buffer {
	PyObject_HEAD
	void *data;
	Py_ssize_t size;
	Py_ssize_t exports;
};

static PyTypeObject mc_py_buffer_type;

/* ---------------------------------------------------------------- helpers */

int mc_py_ready(struct mc_py_store *self)
{
	return self->st != NULL && self->st->initialized;
}

void mc_py_keys_free(struct mc_py_keys *k)
{
	Py_ssize_t i;

	for (i = 0; i < k->n; i++)
		Py_XDECREF(k->objs[i]);
	PyMem_Free(k->objs);
	PyMem_Free(k->keys);
	memset(k, 0, sizeof(*k));
}

int mc_py_keys_get(PyObject *seq, struct mc_py_keys *k)
{
	PyObject *fast;
	Py_ssize_t i;

	memset(k, 0, sizeof(*k));
	/* A str is a sequence too, but never a list of keys (upstream's binding refuses it). */
	if (PyUnicode_Check(seq) || PyBytes_Check(seq) || PyByteArray_Check(seq)) {
		PyErr_SetString(PyExc_TypeError, "keys must be a list of str, not a single string");
		return -1;
	}
	fast = PySequence_Fast(seq, "keys must be a list of str");
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

/* The length of a list attribute of a config object, or -1 when it is absent or None. */
static Py_ssize_t mc_py_attr_len(PyObject *o, const char *name)
{
	PyObject *v = PyObject_GetAttrString(o, name);
	Py_ssize_t n = -1;

	if (v && v != Py_None)
		n = PyObject_Length(v);
	Py_XDECREF(v);
	PyErr_Clear();
	return n < 0 ? -1 : n;
}

int mc_py_config_get(PyObject *o, struct mc_py_config *c)
{
	PyObject *v;

	mc_rpc_config_default(&c->cfg);
	c->session_n = c->residency_n = c->per_key_hca_n = -1;
	if (o == NULL || o == Py_None)
		return 0;
	c->session_n = mc_py_attr_len(o, "session_ids");
	c->residency_n = mc_py_attr_len(o, "residency_affinity_ids");
	c->per_key_hca_n = mc_py_attr_len(o, "per_key_preferred_hca_names");
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
	v = PyObject_GetAttrString(o, "eviction_hint");
	if (v && v != Py_None) {
		long h = PyLong_Check(v) && !PyBool_Check(v) ? PyLong_AsLong(v) : -1;

		if (h < 0 || h > MC_EVICT_HINT_MASK) {
			Py_DECREF(v);
			PyErr_Format(PyExc_ValueError, "eviction_hint must be None or an int from 0 "
				     "to %d (EVICTION_HINT_* flags)", MC_EVICT_HINT_MASK);
			return -1;
		}
		c->cfg.has_evict_hint = 1;
		c->cfg.evict_hint = (uint8_t)h;
	}
	Py_XDECREF(v);
	PyErr_Clear();
	if (c->cfg.soft_pin_action != MC_SOFT_PIN_ENABLE && c->cfg.has_soft_pin_ttl) {
		/* Upstream: a TTL without ENABLE is invalid. */
		c->cfg.replica_num = 0;
	}
	return 0;
}

/* The first str of list l (borrowed), or NULL. */
static const char *mc_py_first_str(PyObject *l)
{
	PyObject *s;

	if (l == NULL || !PyList_Check(l) || PyList_GET_SIZE(l) == 0)
		return NULL;
	s = PyList_GET_ITEM(l, 0);
	return PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
}

PyObject *mc_py_nic_hints(PyObject *config, struct mc_put_item *items, Py_ssize_t n)
{
	PyObject *pref, *per, *hold;
	const char *all;
	Py_ssize_t i;

	if (config == NULL || config == Py_None)
		return NULL;
	pref = PyObject_GetAttrString(config, "preferred_hca_names");
	if (pref == NULL)
		PyErr_Clear();
	per = PyObject_GetAttrString(config, "per_key_preferred_hca_names");
	if (per == NULL)
		PyErr_Clear();
	all = mc_py_first_str(pref);
	for (i = 0; i < n; i++) {
		const char *k = per && PyList_Check(per) && PyList_GET_SIZE(per) == n
					? mc_py_first_str(PyList_GET_ITEM(per, i))
					: NULL;

		items[i].nic_hint = k ? k : all;
	}
	PyErr_Clear();
	hold = PyTuple_Pack(2, pref ? pref : Py_None, per ? per : Py_None);
	Py_XDECREF(pref);
	Py_XDECREF(per);
	if (hold == NULL) {
		PyErr_Clear();
		for (i = 0; i < n; i++)
			items[i].nic_hint = NULL;
	}
	return hold;
}

PyObject *mc_py_int_list(const int *v, Py_ssize_t n)
{
	PyObject *l = PyList_New(n);
	Py_ssize_t i;

	for (i = 0; l && i < n; i++)
		PyList_SET_ITEM(l, i, PyLong_FromLong(v[i]));
	return l;
}

PyObject *mc_py_i64_list(const int64_t *v, Py_ssize_t n)
{
	PyObject *l = PyList_New(n);
	Py_ssize_t i;

	for (i = 0; l && i < n; i++)
		PyList_SET_ITEM(l, i, PyLong_FromLongLong(v[i]));
	return l;
}

/* A list of ints (addresses or sizes). */
int mc_py_u64s(PyObject *seq, uint64_t **out, Py_ssize_t *n, const char *what)
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

/* The handle behind self, made on first use (self->lock held).  NULL: out of memory. */
static struct mc_store *mc_py_store_get(struct mc_py_store *self)
{
	if (self->st == NULL) {
		self->st = calloc(1, sizeof(*self->st));
		if (self->st == NULL)
			return NULL;
		pthread_mutex_init(&self->st->mu, NULL);
		self->st->reserve_fd = -1;
	}
	return self->st;
}

/* _configure_prefetch(enable, cooldown_sec, dedup_ttl_sec): setup(dict)'s enable_ssd_prefetch,
 * ssd_prefetch_cooldown_sec and ssd_prefetch_dedup_ttl_sec, given before setup. */
static PyObject *mc_py_configure_prefetch(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "enable", "cooldown_sec", "dedup_ttl_sec", NULL };
	int enable;
	double cooldown, dedup;
	struct mc_store *st;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "pdd:_configure_prefetch", names, &enable,
					 &cooldown, &dedup))
		return NULL;
	if (!(cooldown >= 0 && cooldown <= 86400 * 365) || !(dedup >= 0 && dedup <= 86400 * 365)) {
		PyErr_SetString(PyExc_ValueError, "prefetch times must be 0 .. 1 year in seconds");
		return NULL;
	}
	PyThread_acquire_lock(self->lock, WAIT_LOCK);
	st = mc_py_store_get(self);
	if (st) {
		st->ssd_prefetch = enable;
		st->prefetch_cooldown_ms = (int64_t)(cooldown * 1000);
		st->prefetch_dedup_ms = (int64_t)(dedup * 1000);
	}
	PyThread_release_lock(self->lock);
	if (st == NULL)
		return PyErr_NoMemory();
	Py_RETURN_NONE;
}

/* _memory_options(use_hugepage, hugepage_size, hugepage_fallback, populate_segment,
 * segment_location): the memory behind this store's segment and local buffer, as setup(dict)'s
 * keys of those names (and mooncake.json's) give them; each None keeps what the environment
 * (MC_STORE_USE_HUGEPAGE, MC_STORE_HUGEPAGE_SIZE, MC_STORE_HUGEPAGE_FALLBACK, MC_STORE_POPULATE,
 * MC_STORE_SEGMENT_LOCATION) says.  Before setup.  0, or -600 with a log line for a bad value. */
static PyObject *mc_py_memory_options(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "use_hugepage", "hugepage_size", "hugepage_fallback",
				 "populate_segment", "segment_location", NULL };
	PyObject *huge = Py_None, *fallback = Py_None, *populate = Py_None;
	const char *size = NULL, *loc = NULL;
	struct mc_segmem_opts o;
	struct mc_store *st;
	char err[512];
	int on;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OzOOz:_memory_options", names, &huge, &size,
					 &fallback, &populate, &loc))
		return NULL;
	if (mc_segmem_opts_env(&o, err, sizeof(err))) {
		mc_log_err("setup: %s", err);
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	}
	on = o.hugepage_size != 0;
	if (huge != Py_None && (on = PyObject_IsTrue(huge)) < 0)
		return NULL;
	if (size && mc_segmem_parse_hugepage_size(size, &o.hugepage_size)) {
		mc_log_err("setup: invalid value '%s' for hugepage_size (expected 2MB or 1GB)", size);
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	}
	if (on && o.hugepage_size == 0)
		o.hugepage_size = 2ull << 20;
	if (!on)
		o.hugepage_size = 0;
	if (fallback != Py_None && (o.hugepage_fallback = PyObject_IsTrue(fallback)) < 0)
		return NULL;
	if (populate != Py_None && (o.populate = PyObject_IsTrue(populate)) < 0)
		return NULL;
	if (loc && mc_segmem_parse_location(loc, &o, err, sizeof(err))) {
		mc_log_err("setup: segment_location: %s", err);
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	}
	PyThread_acquire_lock(self->lock, WAIT_LOCK);
	st = mc_py_store_get(self);
	if (st && !st->initialized) {
		st->memopts = o;
		st->memopts_set = 1;
	}
	PyThread_release_lock(self->lock);
	if (st == NULL)
		return PyErr_NoMemory();
	return PyLong_FromLong(st->initialized ? MC_ERR_INVALID_PARAMS : 0);
}

static PyObject *mc_py_setup(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "local_hostname", "metadata_server", "global_segment_size",
				 "local_buffer_size", "protocol", "rdma_devices",
				 "master_server_addr", "engine", "enable_ssd_offload",
				 "ssd_offload_path", "tenant_id", "enable_client_http_server",
				 "client_http_port", "enable_embedded_master", NULL };
	const char *host, *meta, *proto, *dev, *master, *ssd_path = "", *tenant = "default";
	unsigned long long gsize, lsize;
	PyObject *engine = Py_None;
	int ssd = 0, http = 0, http_port = 9300, embedded = 0, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ssKKsss|OpsspIp:setup", names, &host, &meta,
					 &gsize, &lsize, &proto, &dev, &master, &engine, &ssd,
					 &ssd_path, &tenant, &http, &http_port, &embedded))
		return NULL;
	if (http && (http_port < 1 || http_port > 65535))
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	PyThread_acquire_lock(self->lock, WAIT_LOCK);
	if (self->st && self->st->initialized) {
		PyThread_release_lock(self->lock);
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	}
	if (mc_py_store_get(self) == NULL) {
		PyThread_release_lock(self->lock);
		return PyErr_NoMemory();
	}
	self->st->embedded_master = embedded;
	/* SSD tier: MOONCAKE_OFFLOAD_FILE_STORAGE_PATH and MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES
	 * fill what is not given here. */
	self->st->ssd_enable = ssd;
	self->st->http_port = http ? http_port : 0;
	snprintf(self->st->tenant_id, sizeof(self->st->tenant_id), "%s", tenant ? tenant : "");
	snprintf(self->st->ssd_path, sizeof(self->st->ssd_path), "%s", ssd_path ? ssd_path : "");
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
	/* With the handle's engine: peers may reach it, and on rdma it is on the NICs. */
	return PyLong_FromLong(mc_store_register(self->st, (void *)(uintptr_t)ptr, size));
}

static PyObject *mc_py_unregister_buffer(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_ptr", NULL };
	unsigned long long ptr;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "K:unregister_buffer", names, &ptr))
		return NULL;
	if (!mc_py_ready(self))
		return PyLong_FromLong(-1);
	return PyLong_FromLong(mc_store_unregister(self->st, (void *)(uintptr_t)ptr));
}

PyObject *mc_py_buffer_new_from(void *data, Py_ssize_t size)
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

/* ---------------------------------------------------------------- queries, removal */

/* is_exist(key, options=None): with options.prefetch_to_memory (and the client's
 * enable_ssd_prefetch) an object found only on SSD is also asked back into memory. */
static PyObject *mc_py_is_exist(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", "options", NULL };
	const char *key;
	PyObject *opt = Py_None;
	int res = -1, pf;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|O:is_exist", names, &key, &opt))
		return NULL;
	if ((pf = mc_py_exist_prefetch(opt)) < 0)
		return NULL;
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_exist_many(self->st, &key, 1, &res);
		if (pf)
			mc_store_prefetch(self->st, &key, 1, &res);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLong(res);
}

PyObject *mc_py_per_key(struct mc_py_store *self, PyObject *keys_o, mc_py_keys_fn run,
			 const void *arg)
{
	PyObject *res;
	struct mc_py_keys k;
	int *out;
	Py_ssize_t i;

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
		run(self->st, k.keys, (uint32_t)k.n, out, arg);
		Py_END_ALLOW_THREADS
	}
	res = mc_py_int_list(out, k.n);
	PyMem_Free(out);
	mc_py_keys_free(&k);
	return res;
}

/* batch_is_exist's work (arg: the prefetch flag). */
static void mc_py_exist_run(struct mc_store *st, const char **keys, uint32_t n, int *out,
			    const void *arg)
{
	mc_store_exist_many(st, keys, n, out);
	if (*(const int *)arg)
		mc_store_prefetch(st, keys, n, out);
}

static PyObject *mc_py_batch_is_exist(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "keys", "options", NULL };
	PyObject *keys_o, *opt = Py_None;
	int pf;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:batch_is_exist", names, &keys_o, &opt))
		return NULL;
	if ((pf = mc_py_exist_prefetch(opt)) < 0)
		return NULL;
	return mc_py_per_key(self, keys_o, mc_py_exist_run, &pf);
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
	mc_store_query_release(items, (uint32_t)k.n);
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
	{ "_memory_options", KW mc_py_memory_options, METH_VARARGS | METH_KEYWORDS,
	  "Huge pages, population and NUMA placement of the store's memory (before setup)." },
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
	{ "_batch_upsert_from_multi_buffers", KW mc_py_batch_upsert_from_multi_buffers,
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
	{ "probe_key", KW mc_py_probe_key, METH_VARARGS | METH_KEYWORDS,
	  "Point-in-time existence check that grants no read lease." },
	{ "batch_probe_key", KW mc_py_batch_probe_key, METH_VARARGS | METH_KEYWORDS,
	  "Per-key existence without leases (policy 'none') or leasing the last all-present "
	  "group of candidate_size keys (policy 'LastHitOnly')." },
	{ "prepare_get_into_ranges_snapshot", KW mc_py_prepare_snapshot,
	  METH_VARARGS | METH_KEYWORDS, "Prepare a reusable metadata snapshot for ranged reads" },
	{ "get_into_ranges_from_snapshot", KW mc_py_get_from_snapshot, METH_VARARGS | METH_KEYWORDS,
	  "Get byte ranges using a reusable metadata snapshot." },
	{ "_configure_prefetch", KW mc_py_configure_prefetch, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_size", KW mc_py_get_size, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "remove", KW mc_py_remove, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "create_copy_task", KW mc_py_create_copy_task, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "create_move_task", KW mc_py_create_move_task, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "_query_task", KW mc_py_query_task, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "unmount_local_disk_segment", KW mc_py_unmount_local_disk,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_remove", KW mc_py_batch_remove, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "remove_by_regex", KW mc_py_remove_by_regex, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "remove_all", KW mc_py_remove_all, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_replica_clear", KW mc_py_batch_replica_clear, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "mount_segment", KW mc_py_mount_segment, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "allocate_and_mount_segment", KW mc_py_allocate_and_mount_segment,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "unmount_segment", KW mc_py_unmount_segment, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "unmount_and_free_segment", KW mc_py_unmount_and_free_segment,
	  METH_VARARGS | METH_KEYWORDS, NULL },
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
	"C core of mooncake.store (see mooncake/store/__init__.py).", -1, mc_py_module_methods,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__store(void);
PyMODINIT_FUNC PyInit__store(void)
{
	PyObject *m;

	if (PyType_Ready(&mc_py_store_type) < 0 || PyType_Ready(&mc_py_buffer_type) < 0 ||
	    PyType_Ready(&mc_py_snapshot_type) < 0)
		return NULL;
	m = PyModule_Create(&mc_py_module);
	if (m == NULL)
		return NULL;
	Py_INCREF(&mc_py_store_type);
	Py_INCREF(&mc_py_buffer_type);
	Py_INCREF(&mc_py_snapshot_type);
	if (PyModule_AddObject(m, "MooncakeDistributedStore", (PyObject *)&mc_py_store_type) ||
	    PyModule_AddObject(m, "BufferHandle", (PyObject *)&mc_py_buffer_type) ||
	    PyModule_AddObject(m, "RangedReadSnapshot", (PyObject *)&mc_py_snapshot_type)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
