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
#include <structmember.h>


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

/* Run GetReplicaList for the keys of keys_o: 0 with k and *items filled (release both with
 * mc_py_query_done), -1 with a Python exception set. */
static int mc_py_query_run(struct mc_py_store *self, PyObject *keys_o, struct mc_py_keys *k,
			   struct mc_query_item **items)
{
	Py_ssize_t i;

	if (mc_py_keys_get(keys_o, k))
		return -1;
	*items = calloc((size_t)(k->n ? k->n : 1), sizeof(**items));
	if (*items == NULL) {
		mc_py_keys_free(k);
		PyErr_NoMemory();
		return -1;
	}
	for (i = 0; i < k->n; i++)
		(*items)[i].key = k->keys[i];
	if (mc_py_ready(self) && k->n) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_query_many(self->st, *items, (uint32_t)k->n);
		Py_END_ALLOW_THREADS
	} else {
		for (i = 0; i < k->n; i++)
			(*items)[i].code = -1;
	}
	return 0;
}

static void mc_py_query_done(struct mc_py_keys *k, struct mc_query_item *items)
{
	mc_store_query_release(items, (uint32_t)k->n);
	free(items);
	mc_py_keys_free(k);
}

/* _query(keys) -> {key: (code, [dict per replica])}: the replicas as the master lists them. */
PyObject *mc_py_query(struct mc_py_store *self, PyObject *args)
{
	PyObject *keys_o, *res;
	struct mc_py_keys k;
	struct mc_query_item *items;
	Py_ssize_t i;
	uint32_t j;

	if (!PyArg_ParseTuple(args, "O:_query", &keys_o))
		return NULL;
	if (mc_py_query_run(self, keys_o, &k, &items))
		return NULL;
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
	mc_py_query_done(&k, items);
	return res;
}

/* The names of a batch's replicas repeat (a few segments hold every object): each field keeps
 * the str it made last and hands it out again while the bytes are the same. */
struct mc_py_strcache {
	PyObject *s;
	const char *p;
	size_t n;
};

/* A new reference to the str of v (UTF-8, bad bytes replaced), or NULL with an exception. */
static PyObject *mc_py_strcache_get(struct mc_py_strcache *c, struct mc_strv v)
{
	if (c->s == NULL || c->n != v.n || memcmp(c->p, v.p, v.n) != 0) {
		PyObject *s = PyUnicode_DecodeUTF8(v.p, (Py_ssize_t)v.n, "replace");

		if (s == NULL)
			return NULL;
		Py_XSETREF(c->s, s);
		c->p = v.p;
		c->n = v.n;
	}
	Py_INCREF(c->s);
	return c->s;
}

/* Where instances of cls keep the object slot called name, or -1 when it has no such slot
 * (plain member of a class with __slots__). */
static Py_ssize_t mc_py_slot_offset(PyObject *cls, const char *name)
{
	PyObject *d = PyObject_GetAttrString(cls, name);
	Py_ssize_t off = -1;

	if (d && Py_IS_TYPE(d, &PyMemberDescr_Type)) {
		PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;

		if (m->type == T_OBJECT_EX && !(m->flags & READONLY))
			off = m->offset;
	}
	Py_XDECREF(d);
	PyErr_Clear();
	return off;
}

/* One cls(raw): with slots _raw and _memd, made directly (raw and None in them, which is all
 * its __init__ does), else by calling cls.  Steals raw. */
static PyObject *mc_py_desc_new(PyObject *cls, Py_ssize_t raw_off, Py_ssize_t memd_off,
				PyObject *raw)
{
	PyObject *o;

	if (raw == NULL)
		return NULL;
	if (raw_off < 0 || memd_off < 0) {
		o = PyObject_CallOneArg(cls, raw);
		Py_DECREF(raw);
		return o;
	}
	o = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
	if (o == NULL) {
		Py_DECREF(raw);
		return NULL;
	}
	*(PyObject **)((char *)o + raw_off) = raw;
	Py_INCREF(Py_None);
	*(PyObject **)((char *)o + memd_off) = Py_None;
	return o;
}

/* _replica_descs(keys, cls, omit_failed=0) -> {key: [cls(raw) per replica], or [] when the
 * lookup failed; with omit_failed, a key whose lookup failed is left out, as upstream's
 * batch_get_replica_desc leaves it out},
 * raw being the tuple (id, type, status, size, addr, segment, endpoint, protocol): what
 * batch_get_replica_desc answers, built here in one pass.  cls is ReplicaDescriptor, whose
 * __init__ only keeps raw (in _raw) and None (in _memd): where both are slots, instances are
 * made with them filled instead of through a call per replica. */
PyObject *mc_py_replica_descs(struct mc_py_store *self, PyObject *args)
{
	PyObject *keys_o, *cls, *res = NULL;
	struct mc_py_strcache seg = { 0 }, ep = { 0 }, proto = { 0 };
	struct mc_py_keys k;
	struct mc_query_item *items;
	Py_ssize_t i, raw_off, memd_off;
	uint32_t j;
	int omit_failed = 0;

	if (!PyArg_ParseTuple(args, "OO!|p:_replica_descs", &keys_o, &PyType_Type, &cls,
			      &omit_failed))
		return NULL;
	raw_off = mc_py_slot_offset(cls, "_raw");
	memd_off = mc_py_slot_offset(cls, "_memd");
	if (mc_py_query_run(self, keys_o, &k, &items))
		return NULL;
	res = PyDict_New();
	for (i = 0; res && i < k.n; i++) {
		uint32_t n = items[i].code == 0 ? items[i].nrep : 0;
		PyObject *reps;

		if (omit_failed && items[i].code != 0)
			continue;
		reps = PyList_New(n);

		for (j = 0; reps && j < n; j++) {
			struct mc_rpc_replica *r = &items[i].reps[j];
			PyObject *raw = PyTuple_New(8), *o = NULL;

			if (raw) {
				PyTuple_SET_ITEM(raw, 0, PyLong_FromUnsignedLongLong(r->id));
				PyTuple_SET_ITEM(raw, 1, PyLong_FromLong(r->type));
				PyTuple_SET_ITEM(raw, 2, PyLong_FromLong(r->status));
				PyTuple_SET_ITEM(raw, 3, PyLong_FromUnsignedLongLong(r->size));
				PyTuple_SET_ITEM(raw, 4, PyLong_FromUnsignedLongLong(r->addr));
				PyTuple_SET_ITEM(raw, 5, mc_py_strcache_get(&seg, r->segment_name));
				PyTuple_SET_ITEM(raw, 6, mc_py_strcache_get(&ep, r->endpoint));
				PyTuple_SET_ITEM(raw, 7, mc_py_strcache_get(&proto, r->protocol));
				if (PyErr_Occurred())
					Py_CLEAR(raw);
			}
			o = mc_py_desc_new(cls, raw_off, memd_off, raw);
			if (o == NULL) {
				Py_CLEAR(reps);
				break;
			}
			PyList_SET_ITEM(reps, j, o);
		}
		if (reps == NULL || PyDict_SetItem(res, k.objs[i], reps))
			Py_CLEAR(res);
		Py_XDECREF(reps);
	}
	Py_XDECREF(seg.s);
	Py_XDECREF(ep.s);
	Py_XDECREF(proto.s);
	mc_py_query_done(&k, items);
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
