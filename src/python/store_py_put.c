/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: the put and upsert methods (see store_module.c for the overall design).
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "python/store_py.h"

/* ---------------------------------------------------------------- puts */

/* Run put_many on items (GIL released) and return per-item results. */
static int mc_py_put_items(struct mc_py_store *self, struct mc_put_item *items, Py_ssize_t n,
			   PyObject *config, int upsert)
{
	struct mc_py_config c;
	PyObject *nics;
	Py_ssize_t i;

	if (mc_py_config_get(config, &c))
		return -1;
	/* Per-key lists must have one entry per key (per_key_preferred_hca_names only counts for
	 * the batch forms, which single puts cannot be told from when they have one key). */
	if ((c.session_n >= 0 && c.session_n != n) || (c.residency_n >= 0 && c.residency_n != n) ||
	    (n > 1 && c.per_key_hca_n >= 0 && c.per_key_hca_n != n))
		c.cfg.replica_num = 0;
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
	/* ReplicateConfig.preferred_hca_names: the NICs (rdma) the bytes go through first. */
	nics = mc_py_nic_hints(config, items, n);
	Py_BEGIN_ALLOW_THREADS
	mc_store_put_many(self->st, items, (uint32_t)n, &c.cfg, upsert);
	Py_END_ALLOW_THREADS
	Py_XDECREF(nics);
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

PyObject *mc_py_put(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_common(self, args, kw, 0);
}

PyObject *mc_py_upsert(struct mc_py_store *self, PyObject *args, PyObject *kw)
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
	/* Nothing to store: upstream answers 0 and stores nothing, local buffer or not. */
	if (it.size == 0)
		it.result = mc_py_ready(self) ? 0 : -1;
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

PyObject *mc_py_put_parts(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_parts_common(self, args, kw, 0);
}

PyObject *mc_py_upsert_parts(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

PyObject *mc_py_put_batch(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_batch_common(self, args, kw, 0);
}

PyObject *mc_py_upsert_batch(struct mc_py_store *self, PyObject *args, PyObject *kw)
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
	/* An empty range stores nothing and succeeds, as upstream's put_from/upsert_from. */
	if (size == 0)
		return PyLong_FromLong(mc_py_ready(self) ? 0 : -1);
	if (ptr == 0)
		return PyLong_FromLong(MC_ERR_INVALID_PARAMS);
	if (mc_py_put_items(self, &it, 1, config, upsert))
		return NULL;
	return PyLong_FromLong(it.result);
}

PyObject *mc_py_put_from(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_from_common(self, args, kw, 0);
}

PyObject *mc_py_upsert_from(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_put_from_common(self, args, kw, 1);
}

/* The value is the metadata bytes followed by the data bytes. */
PyObject *mc_py_put_from_with_metadata(struct mc_py_store *self, PyObject *args,
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

PyObject *mc_py_batch_put_from(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_batch_put_from_common(self, args, kw, 0);
}

PyObject *mc_py_batch_upsert_from(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_batch_put_from_common(self, args, kw, 1);
}

/* Per-key lists of (ptr, size) pairs -> iovs; returns 0 or -1 with an exception set, or 1 when
 * the shapes do not match (the caller answers -600 per key). */
int mc_py_multi(PyObject *ptrss, PyObject *sizess, Py_ssize_t n, struct mc_iov ***out,
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

void mc_py_multi_free(struct mc_iov **iovs, uint32_t *counts, Py_ssize_t n)
{
	Py_ssize_t i;

	for (i = 0; iovs && i < n; i++)
		PyMem_Free(iovs[i]);
	PyMem_Free(iovs);
	PyMem_Free(counts);
}

static PyObject *mc_py_multi_put_common(struct mc_py_store *self, PyObject *args, PyObject *kw,
					int upsert)
{
	static char *names[] = { "keys", "all_buffer_ptrs", "all_sizes", "config", NULL };
	PyObject *keys_o, *ptrss, *sizess, *config = NULL, *res = NULL;
	struct mc_py_keys k;
	struct mc_iov **iovs = NULL;
	uint32_t *counts = NULL, j;
	struct mc_put_item *items = NULL;
	int *out = NULL, shape;
	Py_ssize_t i;

	if (!PyArg_ParseTupleAndKeywords(args, kw,
					 upsert ? "OOO|O:_batch_upsert_from_multi_buffers" :
						  "OOO|O:batch_put_from_multi_buffers",
					 names, &keys_o, &ptrss, &sizess, &config))
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
		if (k.n && mc_py_put_items(self, items, k.n, config, upsert))
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

PyObject *mc_py_batch_put_from_multi_buffers(struct mc_py_store *self, PyObject *args,
					     PyObject *kw)
{
	return mc_py_multi_put_common(self, args, kw, 0);
}

/* The upsert twin, used by the tensor methods (each object is a header part and a data part). */
PyObject *mc_py_batch_upsert_from_multi_buffers(struct mc_py_store *self, PyObject *args,
						PyObject *kw)
{
	return mc_py_multi_put_common(self, args, kw, 1);
}

