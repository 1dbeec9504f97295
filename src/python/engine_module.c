/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._engine: the C core of mooncake.engine.TransferEngine, upstream's Python transfer
 * engine API over the C transfer engine (src/engine).  Synchronous transfers wait (GIL released)
 * until every request completed or failed, bounded by MC_TRANSFER_TIMEOUT seconds (30, at least
 * 5).  Returns follow upstream: 0 / negative ints, addresses as ints.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "python/engine_py.h"
#include "transfer/nic_topo.h"

double mc_pe_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double mc_pe_timeout(void)
{
	const char *v = getenv("MC_TRANSFER_TIMEOUT");
	double t = v ? atof(v) : 30;

	return t < 5 ? 5 : t;
}

static void mc_pe_dealloc(struct mc_py_engine *self)
{
	if (self->e) {
		Py_BEGIN_ALLOW_THREADS
		destroyTransferEngine(self->e);
		Py_END_ALLOW_THREADS
	}
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* protocol rdma: device_name "mlx5_0,mlx5_1" puts every listed NIC first for every location
 * (a listed NIC missing is an error, as upstream); "" discovers the NICs, and a host without
 * any moves data over tcp with a warning (an error with MC_FORCE_HCA).  Other protocols ignore
 * device_name. */
static PyObject *mc_pe_initialize_common(struct mc_py_engine *self, const char *host,
					 const char *meta, const char *proto, const char *dev)
{
	transfer_engine_t e;

	if (self->e)
		return PyLong_FromLong(-1);
	Py_BEGIN_ALLOW_THREADS
	e = createTransferEngine(meta, host, "", 0, 0);
	if (e && (!strcmp(proto, "rdma") ? mc_te_install_rdma_devices(e, dev) < 0 :
					    installTransport(e, proto, NULL) == NULL)) {
		destroyTransferEngine(e);
		e = NULL;
	}
	Py_END_ALLOW_THREADS
	self->e = e;
	return PyLong_FromLong(e ? 0 : -1);
}

static PyObject *mc_pe_initialize(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "local_hostname", "metadata_server", "protocol", "device_name",
				 NULL };
	const char *host, *meta, *proto, *dev;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ssss:initialize", names, &host, &meta, &proto,
					 &dev))
		return NULL;
	return mc_pe_initialize_common(self, host, meta, proto, dev);
}

static PyObject *mc_pe_initialize_ext(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "local_hostname", "metadata_server", "protocol", "device_name",
				 "metadata_type", NULL };
	const char *host, *meta, *proto, *dev, *type;
	char conn[600];

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sssss:initialize_ext", names, &host, &meta,
					 &proto, &dev, &type))
		return NULL;
	if (strstr(meta, "://") == NULL && strcmp(meta, "P2PHANDSHAKE") && !strcmp(type, "http"))
		snprintf(conn, sizeof(conn), "http://%s", meta);
	else
		snprintf(conn, sizeof(conn), "%s", meta);
	return mc_pe_initialize_common(self, host, conn, proto, dev);
}

/* get_local_topology(device_name=""): this engine's matrix once rdma is installed, else the
 * discovered one, filtered by device_name (a comma list) when given. */
static PyObject *mc_pe_local_topology(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "device_name", NULL };
	const char *dev = "";
	char *s = NULL;
	PyObject *o;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|s:get_local_topology", names, &dev))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	if (self->e && *dev == '\0')
		s = mc_te_local_topology(self->e);
	else
		s = mc_nic_topo_discover_str(dev, NULL);
	Py_END_ALLOW_THREADS
	if (s == NULL) {
		PyErr_SetString(PyExc_ValueError, "cannot build the topology (see the log)");
		return NULL;
	}
	o = PyUnicode_FromString(s);
	free(s);
	return o;
}

static PyObject *mc_pe_get_rpc_port(struct mc_py_engine *self, PyObject *unused)
{
	(void)unused;
	return PyLong_FromLong(self->e ? mc_te_rpc_port(self->e) : -1);
}

static PyObject *mc_pe_get_engine(struct mc_py_engine *self, PyObject *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)self->e);
}

static PyObject *mc_pe_register(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_addr", "capacity", "location", "remote_accessible", NULL };
	unsigned long long addr, len;
	const char *loc = "*";
	int rc, remote = 1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "KK|sp:register_memory", names, &addr, &len,
					 &loc, &remote))
		return NULL;
	if (self->e == NULL)
		return PyLong_FromLong(-1);
	/* "*" (upstream's default) lets the engine find where the memory is. */
	Py_BEGIN_ALLOW_THREADS
	rc = registerLocalMemory(self->e, (void *)(uintptr_t)addr, len,
				 strcmp(loc, "*") ? loc : "cpu:0", remote);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_unregister(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_addr", NULL };
	unsigned long long addr;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "K:unregister_memory", names, &addr))
		return NULL;
	if (self->e == NULL)
		return PyLong_FromLong(-1);
	Py_BEGIN_ALLOW_THREADS
	rc = unregisterLocalMemory(self->e, (void *)(uintptr_t)addr);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_allocate(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "length", NULL };
	unsigned long long len;
	void *p = NULL;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "K:allocate_managed_buffer", names, &len))
		return NULL;
	/* memfd-backed, so a same-host peer maps these very pages (shm transport). */
	if (self->e == NULL || len == 0 || (p = mc_te_alloc_managed(len)) == NULL)
		return PyLong_FromLong(0);
	Py_BEGIN_ALLOW_THREADS
	rc = registerLocalMemory(self->e, p, len, "cpu:0", 1);
	Py_END_ALLOW_THREADS
	if (rc) {
		mc_te_free_managed(p);
		return PyLong_FromLong(0);
	}
	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)p);
}

static PyObject *mc_pe_free_managed(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_addr", "length", NULL };
	unsigned long long addr, len;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "KK:free_managed_buffer", names, &addr, &len))
		return NULL;
	if (self->e == NULL)
		return PyLong_FromLong(-1);
	Py_BEGIN_ALLOW_THREADS
	rc = unregisterLocalMemory(self->e, (void *)(uintptr_t)addr);
	Py_END_ALLOW_THREADS
	if (rc == 0)
		mc_te_free_managed((void *)(uintptr_t)addr);
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_first_buffer(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "segment_name", NULL };
	const char *name;
	segment_handle_t h;
	uint64_t addr = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s:get_first_buffer_address", names, &name))
		return NULL;
	if (self->e == NULL)
		return PyLong_FromLong(0);
	Py_BEGIN_ALLOW_THREADS
	h = openSegment(self->e, name);
	if (h < 0 || mc_te_first_buffer(self->e, h, &addr))
		addr = 0;
	Py_END_ALLOW_THREADS
	return PyLong_FromUnsignedLongLong(addr);
}

int mc_pe_run(transfer_engine_t e, const char *target, int opcode, const uint64_t *bufs,
	      const uint64_t *peers, const uint64_t *lens, size_t n, const char *nic)
{
	segment_handle_t h = openSegment(e, target);
	struct transfer_request *req;
	batch_id_t b;
	size_t i;
	int rc = 0;
	double end = mc_pe_now() + mc_pe_timeout();

	if (h < 0 || n == 0)
		return n == 0 ? 0 : -1;
	req = calloc(n, sizeof(*req));
	b = allocateBatchID(e, n);
	if (req == NULL || b == INVALID_BATCH) {
		free(req);
		return -1;
	}
	if (nic && *nic)
		mc_te_batch_nic_hint(e, b, nic);
	for (i = 0; i < n; i++) {
		req[i].opcode = opcode;
		req[i].source = (void *)(uintptr_t)bufs[i];
		req[i].target_id = h;
		req[i].target_offset = peers[i];
		req[i].length = lens[i];
	}
	if (submitTransfer(e, b, req, n))
		rc = -1;
	for (i = 0; rc == 0 && i < n; i++) {
		struct transfer_status st;

		for (;;) {
			if (getTransferStatus(e, b, i, &st)) {
				rc = -1;
				break;
			}
			if (st.status != STATUS_PENDING && st.status != STATUS_WAITING)
				break;
			if (mc_pe_now() > end) {
				rc = -1;
				break;
			}
			usleep(20);
		}
		if (st.status != STATUS_COMPLETED)
			rc = -1;
	}
	/* A timed-out batch may still hold pending requests: wait them out before freeing. */
	while (freeBatchID(e, b) == ERR_BATCH_BUSY)
		usleep(1000);
	free(req);
	return rc;
}

static PyObject *mc_pe_sync_common(struct mc_py_engine *self, PyObject *args, PyObject *kw,
				   int opcode, const char *fmt)
{
	static char *names[] = { "target_hostname", "buffer", "peer_buffer_address", "length",
				 "transport_hint", "nic_hint", NULL };
	const char *target, *hint = "", *nic = "";
	unsigned long long buf, peer, len;
	uint64_t b, p, l;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, names, &target, &buf, &peer, &len, &hint,
					 &nic))
		return NULL;
	if (self->e == NULL)
		return PyLong_FromLong(-1);
	b = buf;
	p = peer;
	l = len;
	Py_BEGIN_ALLOW_THREADS
	rc = mc_pe_run(self->e, target, opcode, &b, &p, &l, 1, nic);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_sync_write(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_sync_common(self, args, kw, OPCODE_WRITE, "sKKK|ss:transfer_sync_write");
}

static PyObject *mc_pe_sync_read(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_sync_common(self, args, kw, OPCODE_READ, "sKKK|ss:transfer_sync_read");
}

static PyObject *mc_pe_sync(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "target_hostname", "buffer", "peer_buffer_address", "length",
				 "opcode", "notify", "transport_hint", "nic_hint", NULL };
	const char *target, *hint = "", *nic = "";
	unsigned long long buf, peer, len;
	int opcode, rc;
	PyObject *notify = Py_None;
	uint64_t b, p, l;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sKKKi|Oss:transfer_sync", names, &target, &buf,
					 &peer, &len, &opcode, &notify, &hint, &nic))
		return NULL;
	if (self->e == NULL || (opcode != OPCODE_READ && opcode != OPCODE_WRITE))
		return PyLong_FromLong(-1);
	b = buf;
	p = peer;
	l = len;
	if (notify != Py_None) {
		/* After the transfer, tell the target: {name, notify_msg}. */
		PyObject *n = PyObject_GetAttrString(notify, "name");
		PyObject *m = PyObject_GetAttrString(notify, "msg");
		const char *ns = n && PyUnicode_Check(n) ? PyUnicode_AsUTF8(n) : NULL;
		const char *ms = m && PyUnicode_Check(m) ? PyUnicode_AsUTF8(m) : NULL;

		if (ns == NULL || ms == NULL) {
			Py_XDECREF(n);
			Py_XDECREF(m);
			PyErr_Clear();
			PyErr_SetString(PyExc_TypeError, "notify must have str name and msg");
			return NULL;
		}
		Py_BEGIN_ALLOW_THREADS
		rc = mc_pe_run(self->e, target, opcode, &b, &p, &l, 1, nic);
		if (rc == 0 && mc_te_notify_send(self->e, openSegment(self->e, target), ns, ms))
			rc = -1;
		Py_END_ALLOW_THREADS
		Py_DECREF(n);
		Py_DECREF(m);
		return PyLong_FromLong(rc);
	}
	Py_BEGIN_ALLOW_THREADS
	rc = mc_pe_run(self->e, target, opcode, &b, &p, &l, 1, nic);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_get_notifies(struct mc_py_engine *self, PyObject *unused)
{
	struct mc_te_notify *list, *n;
	PyObject *res = PyList_New(0);

	(void)unused;
	if (res == NULL || self->e == NULL)
		return res;
	list = mc_te_notify_take(self->e);
	for (n = list; n; n = n->next) {
		PyObject *t = Py_BuildValue("(ss)", n->name, n->msg);

		if (t == NULL || PyList_Append(res, t)) {
			Py_XDECREF(t);
			Py_CLEAR(res);
			break;
		}
		Py_DECREF(t);
	}
	mc_te_notify_free(list);
	return res;
}

static int mc_pe_u64s(PyObject *seq, uint64_t **out, Py_ssize_t *n)
{
	PyObject *fast = PySequence_Fast(seq, "a list of ints is expected");
	Py_ssize_t i;

	if (fast == NULL)
		return -1;
	*n = PySequence_Fast_GET_SIZE(fast);
	*out = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof(**out));
	for (i = 0; *out && i < *n; i++)
		(*out)[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fast, i));
	Py_DECREF(fast);
	if (*out == NULL || PyErr_Occurred()) {
		PyMem_Free(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

static PyObject *mc_pe_batch(struct mc_py_engine *self, PyObject *args, PyObject *kw,
			     int opcode, const char *fmt)
{
	static char *names[] = { "target_hostname", "buffers", "peer_buffer_addresses", "lengths",
				 "transport_hint", "nic_hint", NULL };
	const char *target, *hint = "", *nic = "";
	PyObject *bo, *po, *lo;
	uint64_t *b = NULL, *p = NULL, *l = NULL;
	Py_ssize_t nb, np, nl;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, names, &target, &bo, &po, &lo, &hint, &nic))
		return NULL;
	if (mc_pe_u64s(bo, &b, &nb) || mc_pe_u64s(po, &p, &np) || mc_pe_u64s(lo, &l, &nl))
		goto out;
	if (self->e && nb == np && nb == nl) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_pe_run(self->e, target, opcode, b, p, l, (size_t)nb, nic);
		Py_END_ALLOW_THREADS
	}
out:
	PyMem_Free(b);
	PyMem_Free(p);
	PyMem_Free(l);
	if (PyErr_Occurred())
		return NULL;
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_batch_write(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_batch(self, args, kw, OPCODE_WRITE, "sOOO|ss:batch_transfer_sync_write");
}

static PyObject *mc_pe_batch_read(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_batch(self, args, kw, OPCODE_READ, "sOOO|ss:batch_transfer_sync_read");
}

batch_id_t mc_pe_submit(transfer_engine_t e, const char *target, int opcode,
			const uint64_t *bufs, const uint64_t *peers, const uint64_t *lens,
			size_t n, const char *nic)
{
	segment_handle_t h = openSegment(e, target);
	struct transfer_request *req;
	batch_id_t b;
	size_t i;

	if (h < 0 || n == 0)
		return 0;
	req = calloc(n, sizeof(*req));
	b = allocateBatchID(e, n);
	if (req == NULL || b == INVALID_BATCH) {
		free(req);
		return 0;
	}
	if (nic && *nic)
		mc_te_batch_nic_hint(e, b, nic);
	for (i = 0; i < n; i++) {
		req[i].opcode = opcode;
		req[i].source = (void *)(uintptr_t)bufs[i];
		req[i].target_id = h;
		req[i].target_offset = peers[i];
		req[i].length = lens[i];
	}
	if (submitTransfer(e, b, req, n)) {
		freeBatchID(e, b);
		b = 0;
	}
	free(req);
	return b;
}

int mc_pe_check(transfer_engine_t e, batch_id_t b)
{
	size_t i;
	int failed = 0;

	for (i = 0;; i++) {
		struct transfer_status st;

		if (getTransferStatus(e, b, i, &st))
			break;		/* past the last task */
		if (st.status == STATUS_PENDING || st.status == STATUS_WAITING)
			return 0;
		if (st.status != STATUS_COMPLETED)
			failed = 1;
	}
	if (i == 0)
		return -1;		/* unknown batch */
	freeBatchID(e, b);
	return failed ? -1 : 1;
}

static PyObject *mc_pe_submit_write(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "target_hostname", "buffer", "peer_buffer_address", "length",
				 "transport_hint", "nic_hint", NULL };
	const char *target, *hint = "", *nic = "";
	unsigned long long buf, peer, len;
	uint64_t bb, p, l;
	batch_id_t b = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sKKK|ss:transfer_submit_write", names, &target,
					 &buf, &peer, &len, &hint, &nic))
		return NULL;
	bb = buf;
	p = peer;
	l = len;
	if (self->e) {
		Py_BEGIN_ALLOW_THREADS
		b = mc_pe_submit(self->e, target, OPCODE_WRITE, &bb, &p, &l, 1, nic);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromUnsignedLongLong(b);
}

static PyObject *mc_pe_check_status(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "batch_id", NULL };
	unsigned long long b;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "K:transfer_check_status", names, &b))
		return NULL;
	if (self->e && b)
		rc = mc_pe_check(self->e, (batch_id_t)b);
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_batch_async(struct mc_py_engine *self, PyObject *args, PyObject *kw,
				   int opcode, const char *fmt)
{
	static char *names[] = { "target_hostname", "buffers", "peer_buffer_addresses", "lengths",
				 "transport_hint", "nic_hint", NULL };
	const char *target, *hint = "", *nic = "";
	PyObject *bo, *po, *lo;
	uint64_t *b = NULL, *p = NULL, *l = NULL;
	Py_ssize_t nb, np, nl;
	batch_id_t id = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, names, &target, &bo, &po, &lo, &hint, &nic))
		return NULL;
	if (mc_pe_u64s(bo, &b, &nb) || mc_pe_u64s(po, &p, &np) || mc_pe_u64s(lo, &l, &nl))
		goto out;
	if (self->e && nb == np && nb == nl) {
		Py_BEGIN_ALLOW_THREADS
		id = mc_pe_submit(self->e, target, opcode, b, p, l, (size_t)nb, nic);
		Py_END_ALLOW_THREADS
	}
out:
	PyMem_Free(b);
	PyMem_Free(p);
	PyMem_Free(l);
	if (PyErr_Occurred())
		return NULL;
	return PyLong_FromUnsignedLongLong(id);
}

static PyObject *mc_pe_async_write(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_batch_async(self, args, kw, OPCODE_WRITE, "sOOO|ss:batch_transfer_async_write");
}

static PyObject *mc_pe_async_read(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_batch_async(self, args, kw, OPCODE_READ, "sOOO|ss:batch_transfer_async_read");
}

/* Wait for every batch; 0 when all completed, -1 otherwise.  The batches are freed. */
static PyObject *mc_pe_batch_status(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "batch_ids", NULL };
	PyObject *ids_o;
	uint64_t *ids = NULL;
	Py_ssize_t n, i;
	int rc = 0;
	double end = mc_pe_now() + mc_pe_timeout();

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O:get_batch_transfer_status", names, &ids_o))
		return NULL;
	if (mc_pe_u64s(ids_o, &ids, &n))
		return NULL;
	if (self->e == NULL)
		rc = -1;
	Py_BEGIN_ALLOW_THREADS
	for (i = 0; rc == 0 && i < n; i++) {
		int s;

		while ((s = ids[i] ? mc_pe_check(self->e, (batch_id_t)ids[i]) : -1) == 0) {
			if (mc_pe_now() > end)
				break;
			usleep(20);
		}
		if (s != 1)
			rc = -1;
	}
	Py_END_ALLOW_THREADS
	PyMem_Free(ids);
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_batch_register(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_addresses", "capacities", NULL };
	PyObject *ao, *co;
	uint64_t *a = NULL, *c = NULL;
	Py_ssize_t na, nc, i;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:batch_register_memory", names, &ao, &co))
		return NULL;
	if (mc_pe_u64s(ao, &a, &na) || mc_pe_u64s(co, &c, &nc))
		goto out;
	if (self->e && na == nc) {
		buffer_entry_t *ents = calloc((size_t)(na ? na : 1), sizeof(*ents));

		for (i = 0; ents && i < na; i++) {
			ents[i].addr = (void *)(uintptr_t)a[i];
			ents[i].length = c[i];
		}
		if (ents) {
			Py_BEGIN_ALLOW_THREADS
			rc = registerLocalMemoryBatch(self->e, ents, (size_t)na, "cpu:0");
			Py_END_ALLOW_THREADS
		}
		free(ents);
	}
out:
	PyMem_Free(a);
	PyMem_Free(c);
	if (PyErr_Occurred())
		return NULL;
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_batch_unregister(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_addresses", NULL };
	PyObject *ao;
	uint64_t *a = NULL;
	Py_ssize_t na, i;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O:batch_unregister_memory", names, &ao))
		return NULL;
	if (mc_pe_u64s(ao, &a, &na))
		return NULL;
	if (self->e) {
		void **ptrs = calloc((size_t)(na ? na : 1), sizeof(*ptrs));

		for (i = 0; ptrs && i < na; i++)
			ptrs[i] = (void *)(uintptr_t)a[i];
		if (ptrs) {
			Py_BEGIN_ALLOW_THREADS
			rc = unregisterLocalMemoryBatch(self->e, ptrs, (size_t)na);
			Py_END_ALLOW_THREADS
		}
		free(ptrs);
	}
	PyMem_Free(a);
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_send_probe(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "peer_server_name", NULL };
	const char *target;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s:send_probe", names, &target))
		return NULL;
	if (self->e) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_te_probe(self->e, target);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLong(rc);
}

/* _send_notify(target_hostname, name, msg): deliver a notification to the target engine
 * (batch_transfer_sync's notify); 0 or a negative code. */
static PyObject *mc_pe_send_notify(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "target_hostname", "name", "msg", NULL };
	const char *target, *name, *msg;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sss:_send_notify", names, &target, &name, &msg))
		return NULL;
	if (self->e) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_te_notify_send(self->e, openSegment(self->e, target), name, msg);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLong(rc);
}

static PyObject *mc_pe_write_bytes(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_addr", "src_data", "length", NULL };
	unsigned long long addr, len;
	Py_buffer v;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "Ky*K:write_bytes_to_buffer", names, &addr, &v,
					 &len))
		return NULL;
	if (addr == 0 || len > (unsigned long long)v.len) {
		PyBuffer_Release(&v);
		return PyLong_FromLong(-1);
	}
	memcpy((void *)(uintptr_t)addr, v.buf, len);
	PyBuffer_Release(&v);
	return PyLong_FromLong(0);
}

static PyObject *mc_pe_read_bytes(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_addr", "length", NULL };
	unsigned long long addr, len;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "KK:read_bytes_from_buffer", names, &addr, &len))
		return NULL;
	if (addr == 0)
		return PyBytes_FromStringAndSize("", 0);
	return PyBytes_FromStringAndSize((const char *)(uintptr_t)addr, (Py_ssize_t)len);
}

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef mc_pe_methods[] = {
	{ "initialize", KW mc_pe_initialize, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "initialize_ext", KW mc_pe_initialize_ext, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_rpc_port", (PyCFunction)mc_pe_get_rpc_port, METH_NOARGS, NULL },
	{ "get_local_topology", KW mc_pe_local_topology, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_engine", (PyCFunction)mc_pe_get_engine, METH_NOARGS, NULL },
	{ "register_memory", KW mc_pe_register, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "unregister_memory", KW mc_pe_unregister, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "allocate_managed_buffer", KW mc_pe_allocate, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "free_managed_buffer", KW mc_pe_free_managed, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_first_buffer_address", KW mc_pe_first_buffer, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "transfer_sync_write", KW mc_pe_sync_write, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "transfer_sync_read", KW mc_pe_sync_read, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "transfer_sync", KW mc_pe_sync, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_sync_write", KW mc_pe_batch_write, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_sync_read", KW mc_pe_batch_read, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "transfer_submit_write", KW mc_pe_submit_write, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "transfer_check_status", KW mc_pe_check_status, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_async_write", KW mc_pe_async_write, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_async_read", KW mc_pe_async_read, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "get_batch_transfer_status", KW mc_pe_batch_status, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_register_memory", KW mc_pe_batch_register, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_unregister_memory", KW mc_pe_batch_unregister, METH_VARARGS | METH_KEYWORDS,
	  NULL },
	{ "send_probe", KW mc_pe_send_probe, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "_send_notify", KW mc_pe_send_notify, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "_get_notifies", (PyCFunction)mc_pe_get_notifies, METH_NOARGS, NULL },
	{ "write_bytes_to_buffer", KW mc_pe_write_bytes, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "read_bytes_from_buffer", KW mc_pe_read_bytes, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_sync_write_arrays", KW mc_pe_sync_write_arrays,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_sync_read_arrays", KW mc_pe_sync_read_arrays,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_async_write_arrays", KW mc_pe_async_write_arrays,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_async_read_arrays", KW mc_pe_async_read_arrays,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_sync_write_pages", KW mc_pe_sync_write_pages,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "batch_transfer_sync_read_pages", KW mc_pe_sync_read_pages,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "_scatter_submit", KW mc_pe_scatter_submit, METH_VARARGS | METH_KEYWORDS, NULL },
	{ "_batch_poll", KW mc_pe_batch_poll, METH_VARARGS | METH_KEYWORDS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject mc_pe_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "mooncake._engine.TransferEngine",
	.tp_basicsize = sizeof(struct mc_py_engine),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Mooncake transfer engine (C core).",
	.tp_new = PyType_GenericNew,
	.tp_dealloc = (destructor)mc_pe_dealloc,
	.tp_methods = mc_pe_methods,
};

static struct PyModuleDef mc_pe_module = {
	PyModuleDef_HEAD_INIT, "mooncake._engine", "C core of mooncake.engine.", -1, NULL,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__engine(void);
PyMODINIT_FUNC PyInit__engine(void)
{
	PyObject *m;

	if (PyType_Ready(&mc_pe_type) < 0)
		return NULL;
	m = PyModule_Create(&mc_pe_module);
	if (m == NULL)
		return NULL;
	Py_INCREF(&mc_pe_type);
	if (PyModule_AddObject(m, "TransferEngine", (PyObject *)&mc_pe_type)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
