/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: segments mounted after setup (upstream's mount_segment,
 * allocate_and_mount_segment, unmount_segment, unmount_and_free_segment).  The mounts answer
 * {"ret": 0 or -1, "segment_ids": [...]} (and "allocated_size"), the unmounts the first error
 * or 0; an id that is malformed or was not mounted by that method is -1.  GIL released around
 * every master call.
 */
#include <string.h>

#include "common/log.h"
#include "common/errcode.h"
#include "python/store_py.h"

/* {"ret": rc, "segment_ids": [id] or []} plus "allocated_size" when allocated is not NULL. */
static PyObject *mc_py_mount_result(int rc, const struct mc_uuid *id, const uint64_t *allocated)
{
	char s[MC_STORE_SEGMENT_ID_LEN];
	PyObject *ids = PyList_New(0), *d;

	if (ids == NULL)
		return NULL;
	if (rc == 0 && id) {
		PyObject *o;

		mc_store_segment_id_str(id, s);
		o = PyUnicode_FromString(s);
		if (o == NULL || PyList_Append(ids, o)) {
			Py_XDECREF(o);
			Py_DECREF(ids);
			return NULL;
		}
		Py_DECREF(o);
	}
	d = allocated ? Py_BuildValue("{s:i,s:N,s:K}", "ret", rc, "segment_ids", ids,
				      "allocated_size", (unsigned long long)(rc ? 0 : *allocated))
		      : Py_BuildValue("{s:i,s:N}", "ret", rc, "segment_ids", ids);
	return d;
}

PyObject *mc_py_mount_segment(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "path", "size", "offset", "protocol", "location", NULL };
	const char *path, *proto = "tcp", *loc = "";
	unsigned long long size, offset = 0;
	struct mc_uuid id;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sK|Kss:mount_segment", names, &path, &size,
					 &offset, &proto, &loc))
		return NULL;
	if (size == 0)		/* nothing to mount: no segment, success (as upstream) */
		return mc_py_mount_result(0, NULL, NULL);
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_store_mount_file(self->st, path, offset, size, loc, &id);
		Py_END_ALLOW_THREADS
	}
	return mc_py_mount_result(rc, &id, NULL);
}

PyObject *mc_py_allocate_and_mount_segment(struct mc_py_store *self, PyObject *args,
					   PyObject *kw)
{
	static char *names[] = { "size", "protocol", "location", NULL };
	const char *proto = "tcp", *loc = "";
	unsigned long long size;
	uint64_t allocated = 0;
	struct mc_uuid id;
	int rc = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "K|ss:allocate_and_mount_segment", names, &size,
					 &proto, &loc))
		return NULL;
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_store_mount_alloc(self->st, size, loc, &id, &allocated);
		Py_END_ALLOW_THREADS
	}
	return mc_py_mount_result(rc, &id, &allocated);
}

static PyObject *mc_py_unmount_common(struct mc_py_store *self, PyObject *args, PyObject *kw,
				      int origin, const char *fmt)
{
	static char *names[] = { "segment_ids", "grace_period_seconds", NULL };
	unsigned long long grace = 0;
	struct mc_py_keys k;
	PyObject *ids;
	Py_ssize_t i;
	int first = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, names, &ids, &grace))
		return NULL;
	if (mc_py_keys_get(ids, &k))
		return NULL;
	if (grace > UINT64_MAX / 1000)
		grace = UINT64_MAX / 1000;
	for (i = 0; i < k.n; i++) {
		struct mc_uuid id;
		int rc = -1;

		if (mc_store_segment_id_parse(k.keys[i], &id) != 0)
			mc_log_err("unmount: invalid segment id %s", k.keys[i]);
		else if (mc_py_ready(self)) {
			Py_BEGIN_ALLOW_THREADS
			rc = mc_store_unmount_id(self->st, &id, origin, grace * 1000);
			Py_END_ALLOW_THREADS
			if (rc == -1)
				mc_log_err("unmount: segment %s was not mounted by %s", k.keys[i],
					   origin == MC_STORE_SEG_FILE ? "mount_segment"
								       : "allocate_and_mount_segment");
		}
		if (rc && first == 0)
			first = rc;
	}
	mc_py_keys_free(&k);
	return PyLong_FromLong(first);
}

PyObject *mc_py_unmount_segment(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_unmount_common(self, args, kw, MC_STORE_SEG_FILE, "O|K:unmount_segment");
}

PyObject *mc_py_unmount_and_free_segment(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_unmount_common(self, args, kw, MC_STORE_SEG_ALLOC,
				    "O|K:unmount_and_free_segment");
}

/* unmount_local_disk_segment(grace_period_seconds=0): take this client's SSD area out of
 * service.  0, or an error code. */
PyObject *mc_py_unmount_local_disk(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "grace_period_seconds", NULL };
	unsigned long long grace = 0;
	int rc = MC_ERR_INVALID_PARAMS;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|K:unmount_local_disk_segment", names, &grace))
		return NULL;
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_store_unmount_local_disk(self->st, grace > UINT64_MAX / 1000 ? UINT64_MAX
									 : grace * 1000);
		Py_END_ALLOW_THREADS
	}
	return PyLong_FromLong(rc);
}
