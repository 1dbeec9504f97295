/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: the store methods that ask about or remove objects (is_exist,
 * batch_is_exist, get_size, remove, batch_remove, remove_by_regex, remove_all, query,
 * batch_replica_clear).  Arguments are converted with the GIL held, the store runs without
 * it; results are upstream's plain ints and lists.  Any thread.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "python/store_py.h"


/* is_exist(key, options=None): with options.prefetch_to_memory (and the client's
 * enable_ssd_prefetch) an object found only on SSD is also asked back into memory. */
PyObject *mc_py_is_exist(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

PyObject *mc_py_batch_is_exist(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

PyObject *mc_py_get_size(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

PyObject *mc_py_remove(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

/* mc_py_per_key's step for batch_remove: arg is the force flag. */
static void mc_py_remove_step(struct mc_store *st, const char **keys, uint32_t n, int *out,
			      const void *arg)
{
	mc_store_remove_many(st, keys, n, *(const int *)arg, out);
}

PyObject *mc_py_batch_remove(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "keys", "force", NULL };
	PyObject *keys_o;
	int force = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:batch_remove", names, &keys_o, &force))
		return NULL;
	return mc_py_per_key(self, keys_o, mc_py_remove_step, &force);
}

PyObject *mc_py_remove_by_regex(struct mc_py_store *self, PyObject *args, PyObject *kw)
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

PyObject *mc_py_remove_all(struct mc_py_store *self, PyObject *args, PyObject *kw)
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
PyObject *mc_py_query(struct mc_py_store *self, PyObject *args)
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

PyObject *mc_py_batch_replica_clear(struct mc_py_store *self, PyObject *args,
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
