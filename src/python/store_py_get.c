/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: the get methods (see store_module.c for the overall design).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "python/store_py.h"

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

PyObject *mc_py_get_into(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

PyObject *mc_py_batch_get_into(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

PyObject *mc_py_batch_get_into_multi_buffers(struct mc_py_store *self, PyObject *args,
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

/* The objects under keys[0..n) into new buffers from alloc, in two master round trips for
 * the whole batch (their sizes, then the reads).  Per key: bufs[i] (owned by the caller, NULL
 * when none was allocated) and got[i], the bytes read or a negative code. */
static void mc_py_fetch_many(struct mc_py_store *self, const char **keys, Py_ssize_t n,
			     void **bufs, int64_t *got, void *(*alloc)(size_t))
{
	struct mc_query_item *q = NULL;
	struct mc_get_item *it = NULL;
	Py_ssize_t i;

	for (i = 0; i < n; i++) {
		bufs[i] = NULL;
		got[i] = -1;
	}
	if (n == 0 || !mc_py_ready(self))
		return;
	q = calloc((size_t)n, sizeof(*q));
	it = calloc((size_t)n, sizeof(*it));
	if (q == NULL || it == NULL)
		goto out;
	for (i = 0; i < n; i++)
		q[i].key = keys[i];
	Py_BEGIN_ALLOW_THREADS
	mc_store_query_many(self->st, q, (uint32_t)n);
	Py_END_ALLOW_THREADS
	for (i = 0; i < n; i++) {
		uint64_t size = q[i].nrep ? q[i].reps[0].size : 0;

		it[i].key = keys[i];
		it[i].result = q[i].code ? q[i].code : MC_ERR_REPLICA_IS_NOT_READY;
		if (q[i].code || q[i].nrep == 0)
			continue;
		bufs[i] = alloc(size ? (size_t)size : 1);
		if (bufs[i] == NULL) {
			it[i].result = -ENOMEM;
			continue;
		}
		it[i].buf = bufs[i];
		it[i].cap = size;
	}
	/* Only the keys with a buffer are read; the others keep their code. */
	{
		struct mc_get_item *todo = calloc((size_t)n, sizeof(*todo));
		uint32_t m = 0;

		if (todo == NULL)
			goto out;
		for (i = 0; i < n; i++)
			if (bufs[i])
				todo[m++] = it[i];
		if (m) {
			Py_BEGIN_ALLOW_THREADS
			mc_store_get_many(self->st, todo, m);
			Py_END_ALLOW_THREADS
		}
		for (i = 0, m = 0; i < n; i++)
			got[i] = bufs[i] ? todo[m++].result : it[i].result;
		free(todo);
	}
out:
	if (q)
		mc_store_query_release(q, (uint32_t)n);
	free(q);
	free(it);
}

PyObject *mc_py_get(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

/* get_batch (bytes, b"" for a miss) and batch_get_buffer (BufferHandle, None for a miss). */
static PyObject *mc_py_batch_fetch(struct mc_py_store *self, PyObject *args, PyObject *kw,
				   int handles)
{
	static char *names[] = { "keys", NULL };
	PyObject *keys_o, *res = NULL;
	struct mc_py_keys k;
	void **bufs = NULL;
	int64_t *got = NULL;
	Py_ssize_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw,
					 handles ? "O:batch_get_buffer" : "O:get_batch", names,
					 &keys_o))
		return NULL;
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	bufs = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*bufs));
	got = PyMem_Calloc((size_t)(k.n ? k.n : 1), sizeof(*got));
	if (bufs == NULL || got == NULL) {
		PyErr_NoMemory();
		goto out;
	}
	mc_py_fetch_many(self, k.keys, k.n, bufs, got, malloc);
	res = PyList_New(k.n);
	for (i = 0; res && i < k.n; i++) {
		PyObject *o;

		if (handles && got[i] >= 0) {
			o = mc_py_buffer_new_from(bufs[i], (Py_ssize_t)got[i]);
			bufs[i] = NULL;		/* the handle owns it now */
		} else if (handles) {
			Py_INCREF(Py_None);
			o = Py_None;
		} else {
			o = PyBytes_FromStringAndSize(got[i] > 0 ? bufs[i] : "",
						      got[i] > 0 ? (Py_ssize_t)got[i] : 0);
		}
		if (o == NULL) {
			Py_CLEAR(res);
			break;
		}
		PyList_SET_ITEM(res, i, o);
	}
out:
	for (i = 0; bufs && i < k.n; i++)
		free(bufs[i]);
	PyMem_Free(bufs);
	PyMem_Free(got);
	mc_py_keys_free(&k);
	return res;
}

PyObject *mc_py_get_batch(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_batch_fetch(self, args, kw, 0);
}

PyObject *mc_py_get_buffer(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

PyObject *mc_py_batch_get_buffer(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_batch_fetch(self, args, kw, 1);
}

/* Read one key's ranges: through GetReplicaList, or from snap when not NULL. */
static void mc_py_read_ranges(struct mc_py_store *self, struct mc_get_item *it,
			      struct mc_get_snapshot *snap)
{
	if (snap == NULL) {
		mc_py_get_items(self, it, 1);
		return;
	}
	if (!mc_py_ready(self)) {
		it->result = -1;
		return;
	}
	Py_BEGIN_ALLOW_THREADS
	mc_store_get_from_snapshot(snap, it, 1);
	Py_END_ALLOW_THREADS
}

/* The offsets and sizes of key i of a group: three lists of the same length. */
static int mc_py_range_lists(PyObject *dg, PyObject *sg, PyObject *zg, Py_ssize_t i, uint64_t **d,
			     uint64_t **s, uint64_t **z, Py_ssize_t *n)
{
	PyObject *o[3] = { PySequence_GetItem(dg, i), PySequence_GetItem(sg, i),
			   PySequence_GetItem(zg, i) };
	Py_ssize_t nd = 0, ns = 0, nz = 0;
	int rc = -1;

	*d = *s = *z = NULL;
	if (o[0] && o[1] && o[2] && !mc_py_u64s(o[0], d, &nd, "dst offsets") &&
	    !mc_py_u64s(o[1], s, &ns, "src offsets") && !mc_py_u64s(o[2], z, &nz, "sizes") &&
	    nd == ns && nd == nz)
		rc = 0;
	Py_XDECREF(o[0]);
	Py_XDECREF(o[1]);
	Py_XDECREF(o[2]);
	if (rc == 0) {
		*n = nd;
		return 0;
	}
	PyMem_Free(*d);
	PyMem_Free(*s);
	PyMem_Free(*z);
	*d = *s = *z = NULL;
	if (!PyErr_Occurred())
		PyErr_SetString(PyExc_ValueError, "range lists differ in length");
	return -1;
}

/* For group g, key all_keys[g][k]: read ranges (src offset, size) of the object into
 * buffer_ptrs[g] + dst offset, through GetReplicaList or from snap.  Returns result[g][k] =
 * per-range bytes read or a negative code. */
PyObject *mc_py_ranges(struct mc_py_store *self, PyObject *bp, PyObject *ak, PyObject *ad,
		       PyObject *as, PyObject *asz, struct mc_get_snapshot *snap)
{
	PyObject *res = NULL;
	uint64_t *bases = NULL;
	Py_ssize_t ng, g;

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
			uint64_t *d, *s, *z;
			Py_ssize_t nd, j;
			struct mc_get_range *rg;
			struct mc_get_item it = { 0 };
			PyObject *rl;

			if (mc_py_range_lists(dg, sg, zg, i, &d, &s, &z, &nd)) {
				Py_CLEAR(glist);
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
			if (rg)
				mc_py_read_ranges(self, &it, snap);
			else
				it.result = -ENOMEM;
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

/* get_into_ranges(buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes). */
PyObject *mc_py_get_into_ranges(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "buffer_ptrs", "all_keys", "all_dst_offsets", "all_src_offsets",
				 "all_sizes", NULL };
	PyObject *bp, *ak, *ad, *as, *asz;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO:get_into_ranges", names, &bp, &ak, &ad,
					 &as, &asz))
		return NULL;
	return mc_py_ranges(self, bp, ak, ad, as, asz, NULL);
}

