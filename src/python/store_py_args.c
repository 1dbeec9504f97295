/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: converting Python arguments for the store methods: key lists (UTF-8,
 * each key pinned by a reference), ReplicateConfig attributes into the wire config with
 * range checks, integer lists.  Failures set a Python exception and return -1 or NULL.
 * Called with the GIL held.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "python/store_py.h"


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
