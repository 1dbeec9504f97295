/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake._store: segments mounted and unmounted at run time (upstream's mount_segment,
 * allocate_and_mount_segment, unmount_segment, unmount_and_free_segment and
 * unmount_local_disk_segment; store/store_segments.c does the work).  Segment ids are upstream's
 * "first-second" strings.  The GIL is released around each call.
 */
#include "python/store_py.h"
#include "common/errcode.h"

static PyObject *mc_py_mount_result(int rc, const struct mc_uuid *id, int with_size,
				    uint64_t allocated)
{
	char s[48];
	PyObject *d = PyDict_New(), *ids = PyList_New(0), *v;

	if (d == NULL || ids == NULL)
		goto fail;
	if (rc == 0) {
		mc_uuid_pair_format(id, s);
		v = PyUnicode_FromString(s);
		if (v == NULL || PyList_Append(ids, v)) {
			Py_XDECREF(v);
			goto fail;
		}
		Py_DECREF(v);
	}
	v = PyLong_FromLong(rc);
	if (v == NULL || PyDict_SetItemString(d, "ret", v)) {
		Py_XDECREF(v);
		goto fail;
	}
	Py_DECREF(v);
	if (PyDict_SetItemString(d, "segment_ids", ids))
		goto fail;
	Py_CLEAR(ids);
	if (with_size) {
		v = PyLong_FromUnsignedLongLong(rc == 0 ? allocated : 0);
		if (v == NULL || PyDict_SetItemString(d, "allocated_size", v)) {
			Py_XDECREF(v);
			goto fail;
		}
		Py_DECREF(v);
	}
	return d;
fail:
	Py_XDECREF(ids);
	Py_XDECREF(d);
	return NULL;
}

PyObject *mc_py_mount_file_segment(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "path", "size", "offset", "protocol", "location", NULL };
	const char *path, *protocol = "tcp", *location = "";
	unsigned long long size, offset = 0;
	struct mc_uuid id;
	int rc = MC_ERR_INVALID_PARAMS;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sK|Kss:mount_segment", names, &path, &size,
					 &offset, &protocol, &location))
		return NULL;
	memset(&id, 0, sizeof(id));
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_store_mount_file(self->st, path, size, offset, &id);
		Py_END_ALLOW_THREADS
	}
	return mc_py_mount_result(rc, &id, 0, 0);
}

PyObject *mc_py_allocate_and_mount(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "size", "protocol", "location", NULL };
	const char *protocol = "tcp", *location = "";
	unsigned long long size;
	uint64_t allocated = 0;
	struct mc_uuid id;
	int rc = MC_ERR_INVALID_PARAMS;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "K|ss:allocate_and_mount_segment", names,
					 &size, &protocol, &location))
		return NULL;
	memset(&id, 0, sizeof(id));
	if (mc_py_ready(self)) {
		Py_BEGIN_ALLOW_THREADS
		rc = mc_store_allocate_and_mount(self->st, size, &id, &allocated);
		Py_END_ALLOW_THREADS
	}
	return mc_py_mount_result(rc, &id, 1, allocated);
}

/* Unmount each id of the list (a str alone is one id); the first error, as upstream. */
static PyObject *mc_py_unmount_ids(struct mc_py_store *self, PyObject *args, PyObject *kw,
				   int origin, const char *fmt)
{
	static char *names[] = { "segment_ids", "grace_period_seconds", NULL };
	unsigned long long grace = 0;
	PyObject *ids_o;
	struct mc_py_keys k;
	Py_ssize_t i;
	int first = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, names, &ids_o, &grace))
		return NULL;
	if (PyUnicode_Check(ids_o)) {
		PyObject *one = PyList_New(1);

		if (one == NULL)
			return NULL;
		Py_INCREF(ids_o);
		PyList_SET_ITEM(one, 0, ids_o);
		i = mc_py_keys_get(one, &k);
		Py_DECREF(one);
		if (i)
			return NULL;
	} else if (mc_py_keys_get(ids_o, &k)) {
		return NULL;
	}
	if (!mc_py_ready(self))
		first = MC_ERR_INVALID_PARAMS;
	for (i = 0; i < k.n && mc_py_ready(self); i++) {
		struct mc_uuid id;
		int rc = MC_ERR_INVALID_PARAMS;

		if (mc_uuid_pair_parse(k.keys[i], &id) == 0) {
			Py_BEGIN_ALLOW_THREADS
			rc = mc_store_unmount_id(self->st, &id, origin,
						 grace > UINT64_MAX / 1000 ? UINT64_MAX : grace * 1000);
			Py_END_ALLOW_THREADS
		}
		if (rc && first == 0)
			first = rc;
	}
	mc_py_keys_free(&k);
	return PyLong_FromLong(first);
}

PyObject *mc_py_unmount_file_segment(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_unmount_ids(self, args, kw, MC_STORE_SEG_FILE, "O|K:unmount_segment");
}

PyObject *mc_py_unmount_and_free(struct mc_py_store *self, PyObject *args, PyObject *kw)
{
	return mc_py_unmount_ids(self, args, kw, MC_STORE_SEG_ALLOCATED,
				 "O|K:unmount_and_free_segment");
}

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
