/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._engine: upstream 0.3.14's bulk forms of the transfer calls (see engine_module.c for
 * the rest).  The *_arrays and *_pages methods take buffer-protocol objects (NumPy arrays,
 * array.array, memoryviews) of 8-byte integers and hand their memory to the engine as it is:
 * no Python object is made or read per request, which is what makes them cheaper than the list
 * forms for thousands of small transfers.  The scatter submit builds one batch from ranges of
 * fragments for mooncake.engine's ScatterTransferTicket (engine.py), which polls it with
 * _batch_poll.  Everything waits with the GIL released.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "python/engine_py.h"

/* A view of an object's memory as 8-byte integers, one-dimensional (rows 0) or [rows, cols]
 * C-contiguous (rows > 0 asks for exactly cols columns).  0, or -1 with upstream's TypeError. */
static int mc_pe_ints(PyObject *o, const char *what, Py_buffer *v, int cols)
{
	const char *f;

	if (PyObject_GetBuffer(o, v, PyBUF_RECORDS_RO) != 0) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "%s must support the buffer protocol (a NumPy array "
			     "of uint64/int64)", what);
		return -1;
	}
	f = v->format ? v->format : "B";
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	if (v->itemsize != 8 || strlen(f) != 1 || !strchr("qQlL", *f)) {
		PyErr_Format(PyExc_TypeError, "%s must hold 8-byte integers (uint64/int64)", what);
		goto fail;
	}
	if (cols) {
		if (v->ndim != 2 || v->shape[1] != cols || !PyBuffer_IsContiguous(v, 'C')) {
			PyErr_Format(PyExc_TypeError, "%s must be a [rows, %d] array", what, cols);
			goto fail;
		}
		return 0;
	}
	if (v->ndim != 1) {
		PyErr_Format(PyExc_TypeError, "%s must be a one-dimensional array", what);
		goto fail;
	}
	if (v->strides && v->strides[0] != 8) {
		PyErr_Format(PyExc_TypeError, "%s must be contiguous", what);
		goto fail;
	}
	return 0;
fail:
	PyBuffer_Release(v);
	return -1;
}

static Py_ssize_t mc_pe_count(const Py_buffer *v)
{
	return v->len / 8;
}

/* The arrays forms: target, buffers, peer_buffer_addresses, lengths[, transport_hint, nic_hint].
 * sync: 0 or -1 when every request completed or not; async: the batch id (0 on failure). */
static PyObject *mc_pe_arrays(struct mc_py_engine *self, PyObject *args, PyObject *kw,
			      int opcode, int async, const char *fmt)
{
	static char *names[] = { "target_hostname", "buffers", "peer_buffer_addresses", "lengths",
				 "transport_hint", "nic_hint", NULL };
	const char *target, *hint = "", *nic = "";
	PyObject *o[3];
	Py_buffer v[3];
	int k, rc = -1;
	size_t n;
	batch_id_t id = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, names, &target, &o[0], &o[1], &o[2], &hint,
					 &nic))
		return NULL;
	for (k = 0; k < 3; k++)
		if (mc_pe_ints(o[k], names[k + 1], &v[k], 0)) {
			while (k-- > 0)
				PyBuffer_Release(&v[k]);
			return NULL;
		}
	n = (size_t)mc_pe_count(&v[0]);
	if ((size_t)mc_pe_count(&v[1]) != n || (size_t)mc_pe_count(&v[2]) != n) {
		PyErr_SetString(PyExc_ValueError,
				"buffers, peer_buffer_addresses and lengths must have the same length");
		goto out;
	}
	if (self->e && n == 0) {
		rc = 0;
	} else if (self->e) {
		Py_BEGIN_ALLOW_THREADS
		if (async)
			id = mc_pe_submit(self->e, target, opcode, v[0].buf, v[1].buf, v[2].buf, n,
					  nic);
		else
			rc = mc_pe_run(self->e, target, opcode, v[0].buf, v[1].buf, v[2].buf, n,
				       nic);
		Py_END_ALLOW_THREADS
	}
out:
	for (k = 0; k < 3; k++)
		PyBuffer_Release(&v[k]);
	if (PyErr_Occurred())
		return NULL;
	return async ? PyLong_FromUnsignedLongLong(id) : PyLong_FromLong(rc);
}

PyObject *mc_pe_sync_write_arrays(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_arrays(self, args, kw, OPCODE_WRITE, 0,
			    "sOOO|ss:batch_transfer_sync_write_arrays");
}

PyObject *mc_pe_sync_read_arrays(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_arrays(self, args, kw, OPCODE_READ, 0,
			    "sOOO|ss:batch_transfer_sync_read_arrays");
}

PyObject *mc_pe_async_write_arrays(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_arrays(self, args, kw, OPCODE_WRITE, 1,
			    "sOOO|ss:batch_transfer_async_write_arrays");
}

PyObject *mc_pe_async_read_arrays(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_arrays(self, args, kw, OPCODE_READ, 1,
			    "sOOO|ss:batch_transfer_async_read_arrays");
}

/* The pages forms: for every page pair (src_pages[i], dst_pages[i]) and every row of fields,
 * (local_base, local_stride, remote_base, remote_stride, length): length bytes between
 * local_base + src_pages[i] * local_stride and remote_base + dst_pages[i] * remote_stride, as
 * upstream lays them out for both directions.  max_batch_size > 0 runs them in batches of at
 * most that many requests.  0 or -1; ValueError for rows with a length of 0, negative strides
 * (int64 arrays), offsets that overflow, or page arrays of different lengths. */
static PyObject *mc_pe_pages(struct mc_py_engine *self, PyObject *args, PyObject *kw, int opcode,
			     const char *fmt)
{
	static char *names[] = { "target_hostname", "src_pages", "dst_pages", "fields",
				 "max_batch_size", "transport_hint", "nic_hint", NULL };
	const char *target, *hint = "", *nic = "";
	PyObject *so, *dob, *fo;
	Py_ssize_t max_batch = 0;
	Py_buffer sv, dv, fv;
	uint64_t *bufs = NULL, *peers = NULL, *lens = NULL;
	const uint64_t *src, *dst, *f;
	size_t np, nf, n, i, j, k = 0, at;
	int rc = -1, sign;

	if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, names, &target, &so, &dob, &fo, &max_batch,
					 &hint, &nic))
		return NULL;
	if (mc_pe_ints(so, "src_pages", &sv, 0))
		return NULL;
	if (mc_pe_ints(dob, "dst_pages", &dv, 0)) {
		PyBuffer_Release(&sv);
		return NULL;
	}
	if (mc_pe_ints(fo, "fields", &fv, 5)) {
		PyBuffer_Release(&sv);
		PyBuffer_Release(&dv);
		return NULL;
	}
	src = sv.buf;
	dst = dv.buf;
	f = fv.buf;
	np = (size_t)mc_pe_count(&sv);
	nf = (size_t)fv.shape[0];
	sign = strchr(fv.format ? fv.format : "", 'q') || strchr(fv.format ? fv.format : "", 'l');
	if ((size_t)mc_pe_count(&dv) != np) {
		PyErr_SetString(PyExc_ValueError, "src_pages and dst_pages must have the same length");
		goto out;
	}
	for (j = 0; j < nf; j++)
		if (f[j * 5 + 4] == 0 ||
		    (sign && ((int64_t)f[j * 5 + 1] < 0 || (int64_t)f[j * 5 + 3] < 0 ||
			      (int64_t)f[j * 5 + 4] < 0))) {
			PyErr_SetString(PyExc_ValueError,
					"fields rows need a positive length and non-negative strides");
			goto out;
		}
	if (max_batch < 0) {
		PyErr_SetString(PyExc_ValueError, "max_batch_size must not be negative");
		goto out;
	}
	if (__builtin_mul_overflow(np, nf, &n)) {
		PyErr_SetString(PyExc_ValueError, "too many page transfers");
		goto out;
	}
	bufs = PyMem_Calloc(n ? n : 1, sizeof(*bufs));
	peers = PyMem_Calloc(n ? n : 1, sizeof(*peers));
	lens = PyMem_Calloc(n ? n : 1, sizeof(*lens));
	if (bufs == NULL || peers == NULL || lens == NULL) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < np; i++)
		for (j = 0; j < nf; j++, k++) {
			const uint64_t *row = f + j * 5;
			uint64_t lo, ro;

			if (__builtin_mul_overflow(src[i], row[1], &lo) ||
			    __builtin_add_overflow(row[0], lo, &bufs[k]) ||
			    __builtin_mul_overflow(dst[i], row[3], &ro) ||
			    __builtin_add_overflow(row[2], ro, &peers[k])) {
				PyErr_Format(PyExc_ValueError, "page %zu, field %zu: the address "
					     "overflows", i, j);
				goto out;
			}
			lens[k] = row[4];
		}
	rc = 0;
	if (self->e == NULL)
		rc = -1;
	Py_BEGIN_ALLOW_THREADS
	for (at = 0; rc == 0 && at < n;) {
		size_t m = max_batch > 0 && (size_t)max_batch < n - at ? (size_t)max_batch : n - at;

		rc = mc_pe_run(self->e, target, opcode, bufs + at, peers + at, lens + at, m, nic);
		at += m;
	}
	Py_END_ALLOW_THREADS
out:
	PyMem_Free(bufs);
	PyMem_Free(peers);
	PyMem_Free(lens);
	PyBuffer_Release(&sv);
	PyBuffer_Release(&dv);
	PyBuffer_Release(&fv);
	if (PyErr_Occurred())
		return NULL;
	return PyLong_FromLong(rc);
}

PyObject *mc_pe_sync_write_pages(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_pages(self, args, kw, OPCODE_WRITE, "sOOO|nss:batch_transfer_sync_write_pages");
}

PyObject *mc_pe_sync_read_pages(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	return mc_pe_pages(self, args, kw, OPCODE_READ, "sOOO|nss:batch_transfer_sync_read_pages");
}

/* _scatter_submit(endpoint, opcode, local_bases, local_caps, remote_bases, remote_caps,
 * local_offsets, remote_offsets, lengths): one batch of every fragment of every range, each
 * checked against its range's capacities first.  The batch id; 0 when there is nothing to move;
 * -1 when the arrays disagree, a fragment leaves its range, or the batch cannot be submitted
 * (the ticket is then failed and drained at once, as upstream's). */
PyObject *mc_pe_scatter_submit(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "endpoint", "opcode", "local_base_addresses", "local_capacities",
				 "remote_base_addresses", "remote_capacities", "local_offsets",
				 "remote_offsets", "lengths", NULL };
	const char *ep;
	int opcode;
	PyObject *a[7], *seq[7] = { NULL };
	uint64_t *bufs = NULL, *peers = NULL, *lens = NULL;
	Py_ssize_t nr, r, k;
	size_t n = 0, cap = 0;
	long long res = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "siOOOOOOO:_scatter_submit", names, &ep, &opcode,
					 &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6]))
		return NULL;
	for (k = 0; k < 7; k++)
		if ((seq[k] = PySequence_Fast(a[k], "scatter arguments must be lists")) == NULL)
			goto out;
	nr = PySequence_Fast_GET_SIZE(seq[0]);
	for (k = 1; k < 7; k++)
		if (PySequence_Fast_GET_SIZE(seq[k]) != nr)
			goto out;	/* range arrays of different sizes */
	for (r = 0; r < nr; r++) {
		uint64_t lb = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq[0], r));
		uint64_t lc = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq[1], r));
		uint64_t rb = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq[2], r));
		uint64_t rcap = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq[3], r));
		PyObject *f[3] = { NULL };
		Py_ssize_t nfrag, i;
		int bad = 0;

		if (PyErr_Occurred())
			goto out;
		for (k = 0; k < 3; k++)
			f[k] = PySequence_Fast(PySequence_Fast_GET_ITEM(seq[4 + k], r),
					       "fragment lists must be lists of ints");
		nfrag = f[0] ? PySequence_Fast_GET_SIZE(f[0]) : 0;
		bad = !f[0] || !f[1] || !f[2] || PySequence_Fast_GET_SIZE(f[1]) != nfrag ||
		      PySequence_Fast_GET_SIZE(f[2]) != nfrag;
		for (i = 0; !bad && i < nfrag; i++) {
			uint64_t lo = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(f[0], i));
			uint64_t ro = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(f[1], i));
			uint64_t len = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(f[2], i));

			if (PyErr_Occurred() || lo > lc || len > lc - lo || ro > rcap ||
			    len > rcap - ro) {
				bad = 1;
				break;
			}
			if (len == 0)
				continue;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 64;

				if (!(bufs = PyMem_Realloc(bufs, nc * sizeof(*bufs))) ||
				    !(peers = PyMem_Realloc(peers, nc * sizeof(*peers))) ||
				    !(lens = PyMem_Realloc(lens, nc * sizeof(*lens)))) {
					for (k = 0; k < 3; k++)
						Py_XDECREF(f[k]);
					PyErr_NoMemory();
					goto out;
				}
				cap = nc;
			}
			bufs[n] = lb + lo;
			peers[n] = rb + ro;
			lens[n++] = len;
		}
		for (k = 0; k < 3; k++)
			Py_XDECREF(f[k]);
		if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_TypeError))
			goto out;
		PyErr_Clear();
		if (bad)
			goto out;	/* a fragment outside its range, or lists that disagree */
	}
	res = 0;
	if (n && self->e) {
		batch_id_t id;

		Py_BEGIN_ALLOW_THREADS
		id = mc_pe_submit(self->e, ep, opcode == OPCODE_READ ? OPCODE_READ : OPCODE_WRITE,
				  bufs, peers, lens, n, NULL);
		Py_END_ALLOW_THREADS
		res = id ? (long long)id : -1;
	} else if (n) {
		res = -1;
	}
out:
	for (k = 0; k < 7; k++)
		Py_XDECREF(seq[k]);
	PyMem_Free(bufs);
	PyMem_Free(peers);
	PyMem_Free(lens);
	if (PyErr_Occurred())
		return NULL;
	return PyLong_FromLongLong(res);
}

/* _batch_poll(batch_id, timeout_ms): wait up to timeout_ms (GIL released) for the batch to end:
 * 1 every request completed, -1 some failed (the batch is freed then), 0 still running. */
PyObject *mc_pe_batch_poll(struct mc_py_engine *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "batch_id", "timeout_ms", NULL };
	unsigned long long id;
	long long ms;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "KL:_batch_poll", names, &id, &ms))
		return NULL;
	if (self->e == NULL || id == 0)
		return PyLong_FromLong(-1);
	Py_BEGIN_ALLOW_THREADS
	{
		double end = mc_pe_now() + (ms > 0 ? (double)ms / 1000.0 : 0);

		while ((rc = mc_pe_check(self->e, (batch_id_t)id)) == 0 && mc_pe_now() < end)
			usleep(50);
	}
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(rc);
}
