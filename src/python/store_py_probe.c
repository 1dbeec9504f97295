/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: upstream 0.3.14's lookups and ranged-read snapshots (see store_module.c for
 * the overall design).  probe_key / batch_probe_key check existence without a read lease (or,
 * with LastHitOnly, with one on the last whole group), so lookups that do not read leave
 * eviction alone; the ExistOptions of is_exist / batch_is_exist are read here; a
 * RangedReadSnapshot keeps the replica lists of a set of keys for repeated get_into_ranges.
 * Blocking calls release the GIL.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "python/store_py.h"

PyObject *mc_py_probe_key(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", NULL };
	const char *key;
	int res = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s:probe_key", names, &key))
		return NULL;
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		mc_store_probe_many(self->st, &key, 1, MC_PROBE_NONE, 1, &res);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLong(res);
}

struct mc_py_probe {
	int policy;
	uint32_t candidate_size;
};

static void mc_py_probe_run(struct mc_store *st, const char **keys, uint32_t n, int *out,
			    const void *arg)
{
	const struct mc_py_probe *p = arg;

	mc_store_probe_many(st, keys, n, p->policy, p->candidate_size, out);
}

/* batch_probe_key(keys, policy='none', candidate_size=1): per key 1, 0 or a negative code.
 * An unknown policy raises ValueError, as upstream's; a candidate_size that LastHitOnly cannot
 * use (0, or not dividing the keys) gives -600 for every key. */
PyObject *mc_py_batch_probe_key(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "keys", "policy", "candidate_size", NULL };
	PyObject *keys_o;
	const char *policy = "none";
	Py_ssize_t cs = 1;
	struct mc_py_probe p;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|sn:batch_probe_key", names, &keys_o, &policy,
					 &cs))
		return NULL;
	if (cs < 0 || (uint64_t)cs > UINT32_MAX) {
		PyErr_SetString(PyExc_TypeError, "candidate_size must be a non-negative int");
		return NULL;
	}
	p.policy = mc_store_probe_policy(policy);
	p.candidate_size = (uint32_t)cs;
	if (p.policy < 0) {
		PyErr_Format(PyExc_ValueError, "Unknown batch_probe_key policy: %s", policy);
		return NULL;
	}
	return mc_py_per_key(self, keys_o, mc_py_probe_run, &p);
}

int mc_py_exist_prefetch(PyObject *options)
{
	PyObject *v;
	int on;

	if (options == NULL || options == Py_None)
		return 0;
	v = PyObject_GetAttrString(options, "prefetch_to_memory");
	if (v == NULL) {
		PyErr_Clear();
		PyErr_SetString(PyExc_TypeError, "options must be an ExistOptions");
		return -1;
	}
	on = PyObject_IsTrue(v);
	Py_DECREF(v);
	return on;
}

/* ---------------------------------------------------------------- RangedReadSnapshot */

struct mc_py_snapshot {
	PyObject_HEAD
	struct mc_get_snapshot *snap;
	PyObject *owner;	/* the store it reads from, kept alive while it is */
};

static void mc_py_snapshot_dealloc(struct mc_py_snapshot *self)
{
	mc_store_snapshot_free(self->snap);
	Py_XDECREF(self->owner);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject mc_py_snapshot_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "mooncake._store.RangedReadSnapshot",
	.tp_basicsize = sizeof(struct mc_py_snapshot),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Reusable metadata snapshot for repeated ranged reads",
	.tp_dealloc = (destructor)mc_py_snapshot_dealloc,
};

/* prepare_get_into_ranges_snapshot(keys) -> RangedReadSnapshot: the keys' replica lists, asked
 * for once now and again past half their lease.  Keys that do not exist read -704 later. */
PyObject *mc_py_prepare_snapshot(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "keys", NULL };
	struct mc_py_snapshot *o;
	struct mc_get_snapshot *snap;
	struct mc_py_keys k;
	PyObject *keys_o;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O:prepare_get_into_ranges_snapshot", names,
					 &keys_o))
		return NULL;
	if (!mc_py_ready(self)) {
		PyErr_SetString(PyExc_RuntimeError, "Client is not initialized");
		return NULL;
	}
	if (mc_py_keys_get(keys_o, &k))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	snap = mc_store_snapshot_new(self->st, k.keys, (uint32_t)k.n, &rc);
	Py_END_ALLOW_THREADS
	mc_py_keys_free(&k);
	if (snap == NULL) {
		PyErr_Format(PyExc_RuntimeError, "cannot prepare the snapshot: %s (%d)",
			     mc_strerror(rc), rc);
		return NULL;
	}
	o = PyObject_New(struct mc_py_snapshot, &mc_py_snapshot_type);
	if (o == NULL) {
		mc_store_snapshot_free(snap);
		return NULL;
	}
	o->snap = snap;
	Py_INCREF(self);
	o->owner = (PyObject *)self;
	return (PyObject *)o;
}

/* get_into_ranges_from_snapshot(snapshot, buffer_ptrs, all_keys, all_dst_offsets,
 * all_src_offsets, all_sizes): get_into_ranges for keys of the snapshot (another key: -600). */
PyObject *mc_py_get_from_snapshot(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "snapshot", "buffer_ptrs", "all_keys", "all_dst_offsets",
				 "all_src_offsets", "all_sizes", NULL };
	PyObject *so, *bp, *ak, *ad, *as, *asz;
	struct mc_py_snapshot *snap;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OOOOO:get_into_ranges_from_snapshot", names,
					 &mc_py_snapshot_type, &so, &bp, &ak, &ad, &as, &asz))
		return NULL;
	snap = (struct mc_py_snapshot *)so;
	if (!mc_py_ready(self)) {
		PyErr_SetString(PyExc_RuntimeError, "Client is not initialized");
		return NULL;
	}
	if (snap->owner != (PyObject *)self) {
		PyErr_SetString(PyExc_ValueError, "Ranged-read snapshot belongs to another Store");
		return NULL;
	}
	return mc_py_ranges(self, bp, ak, ad, as, asz, snap->snap);
}
