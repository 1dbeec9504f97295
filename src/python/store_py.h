/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_STORE_PY_H
#define MC_STORE_PY_H

/* Shared by the files of the mooncake._store extension (see store_module.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "store/store.h"

struct mc_py_store {
	PyObject_HEAD
	struct mc_store *st;
	PyThread_type_lock lock;	/* serializes setup/close against each other */
};

/* Keys of a list/tuple as UTF-8, each object pinned by a reference. */
struct mc_py_keys {
	PyObject **objs;
	const char **keys;
	Py_ssize_t n;
};

/* ReplicateConfig -> wire config, with owned copies of the segment names. */
struct mc_py_config {
	struct mc_rpc_config cfg;
	char names[MC_RPC_MAX_PREFERRED + 1][MC_RPC_MAX_NAME + 1];
};

int mc_py_ready(struct mc_py_store *self);
void mc_py_keys_free(struct mc_py_keys *k);
int mc_py_keys_get(PyObject *seq, struct mc_py_keys *k);
int mc_py_config_get(PyObject *o, struct mc_py_config *c);
PyObject *mc_py_int_list(const int *v, Py_ssize_t n);
PyObject *mc_py_i64_list(const int64_t *v, Py_ssize_t n);
int mc_py_u64s(PyObject *seq, uint64_t **out, Py_ssize_t *n, const char *what);
PyObject *mc_py_buffer_new_from(void *data, Py_ssize_t size);

/* store_py_put.c */
PyObject *mc_py_put(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_upsert(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_put_parts(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_upsert_parts(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_put_batch(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_upsert_batch(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_put_from(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_upsert_from(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_put_from_with_metadata(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_batch_put_from(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_batch_upsert_from(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_batch_put_from_multi_buffers(struct mc_py_store *self, PyObject *args,
					     PyObject *kw);
PyObject *mc_py_batch_upsert_from_multi_buffers(struct mc_py_store *self, PyObject *args,
						PyObject *kw);
/* Per-key lists of (ptr, size) -> iovs; 0, -1 (exception set) or 1 (shapes differ). */
int mc_py_multi(PyObject *ptrss, PyObject *sizess, Py_ssize_t n, struct mc_iov ***out,
		uint32_t **counts);
void mc_py_multi_free(struct mc_iov **iovs, uint32_t *counts, Py_ssize_t n);

/* store_py_segments.c */
PyObject *mc_py_mount_segment(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_allocate_and_mount_segment(struct mc_py_store *self, PyObject *args,
					   PyObject *kw);
PyObject *mc_py_unmount_segment(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_unmount_and_free_segment(struct mc_py_store *self, PyObject *args, PyObject *kw);

/* store_py_get.c */
PyObject *mc_py_get_into(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_batch_get_into(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_batch_get_into_multi_buffers(struct mc_py_store *self, PyObject *args,
					     PyObject *kw);
PyObject *mc_py_get(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_get_batch(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_get_buffer(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_batch_get_buffer(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_get_into_ranges(struct mc_py_store *self, PyObject *args, PyObject *kw);

#endif
