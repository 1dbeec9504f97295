/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: copy and move tasks (upstream's create_copy_task, create_move_task and
 * query_task).  Task ids are upstream's UUIDs, (first, second) tuples of two u64; query_task
 * answers a raw tuple that mooncake.store turns into a QueryTaskResponse.  The GIL is released
 * around each call to the master.
 */
#include "python/store_py.h"
#include "common/errcode.h"

static PyObject *mc_py_uuid(const struct mc_uuid *u)
{
	uint64_t a, b;

	mc_uuid_to_pair(u, &a, &b);
	return Py_BuildValue("(KK)", (unsigned long long)a, (unsigned long long)b);
}

static PyObject *mc_py_task_create(struct mc_py_store *self, int move, const char *key,
				   const char *source, const char **targets, uint32_t n)
{
	struct mc_uuid id;
	int rc = MC_ERR_INVALID_PARAMS;

	memset(&id, 0, sizeof(id));
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_store_create_task(self->st, move, key, source, targets, n, &id);
		Py_END_ALLOW_THREADS
	}
	if (rc)
		memset(&id, 0, sizeof(id));
	return Py_BuildValue("(Ni)", mc_py_uuid(&id), rc);
}

PyObject *mc_py_create_copy_task(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", "targets", NULL };
	const char *key;
	PyObject *targets_o, *res;
	struct mc_py_keys t;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sO:create_copy_task", names, &key, &targets_o))
		return NULL;
	if (mc_py_keys_get(targets_o, &t))
		return NULL;
	res = mc_py_task_create(self, 0, key, NULL, t.keys, (uint32_t)t.n);
	mc_py_keys_free(&t);
	return res;
}

PyObject *mc_py_create_move_task(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "key", "source", "target", NULL };
	const char *key, *source, *target;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sss:create_move_task", names, &key, &source,
					 &target))
		return NULL;
	return mc_py_task_create(self, 1, key, source, &target, 1);
}

/* _query_task((first, second)) -> ((id, type, status, created, updated, assigned, message) or
 * None, code). */
PyObject *mc_py_query_task(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "task_id", NULL };
	unsigned long long a, b;
	struct mc_store_task_info info;
	struct mc_uuid id;
	int rc = MC_ERR_INVALID_PARAMS;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "(KK):query_task", names, &a, &b))
		return NULL;
	mc_uuid_from_pair(&id, a, b);
	memset(&info, 0, sizeof(info));
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_store_query_task(self->st, &id, &info);
		Py_END_ALLOW_THREADS
	}
	if (rc)
		return Py_BuildValue("(Oi)", Py_None, rc);
	return Py_BuildValue("((NiiLLNs)i)", mc_py_uuid(&info.id), info.type, info.status,
			     (long long)info.created_ms, (long long)info.updated_ms,
			     mc_py_uuid(&info.assigned), info.message, 0);
}
