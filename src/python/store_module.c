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
 * This file holds the type's life cycle (setup, close, buffers), its method table and the
 * module; the methods live by concept in store_py_put.c, store_py_get.c, store_py_query.c
 * (existence, sizes, removal), store_py_segments.c, store_py_probe.c, store_py_tasks.c;
 * argument conversion in store_py_args.c and BufferHandle in store_py_buffer.c.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "python/store_py.h"

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
	if (!mc_py_ready(self))
		return PyLong_FromLong(-1);
	/* A null or empty range is a caller error, INVALID_PARAMS as upstream answers it. */
	if (ptr == 0 || size == 0)
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
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
	{ "_replica_descs", (PyCFunction)mc_py_replica_descs, METH_VARARGS, NULL },
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
