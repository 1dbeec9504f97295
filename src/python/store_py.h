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
	/* 0.3.14's per-key lists (session_ids, residency_affinity_ids,
	 * per_key_preferred_hca_names): how many entries they have, -1 when None; a put of
	 * another number of keys is refused (-600). */
	Py_ssize_t session_n, residency_n, per_key_hca_n;
};

int mc_py_ready(struct mc_py_store *self);
/* Run run(st, keys, n, out, arg) over the str keys of keys_o (GIL released) and return out as
 * a list of ints: one per key, -1 each when the store is not set up. */
typedef void (*mc_py_keys_fn)(struct mc_store *st, const char **keys, uint32_t n, int *out,
			      const void *arg);
PyObject *mc_py_per_key(struct mc_py_store *self, PyObject *keys_o, mc_py_keys_fn run,
			const void *arg);
void mc_py_keys_free(struct mc_py_keys *k);
int mc_py_keys_get(PyObject *seq, struct mc_py_keys *k);
int mc_py_config_get(PyObject *o, struct mc_py_config *c);
/* Set items[i].nic_hint from a ReplicateConfig: the first name of
 * per_key_preferred_hca_names[i] (when it has one list per item), else the first of
 * preferred_hca_names, else NULL.  Returns what keeps the names alive (release it after the
 * put), or NULL when there are none. */
PyObject *mc_py_nic_hints(PyObject *config, struct mc_put_item *items, Py_ssize_t n);
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
/* get_into_ranges's work, through GetReplicaList (snap NULL) or from a ranged-read snapshot. */
PyObject *mc_py_ranges(struct mc_py_store *self, PyObject *bp, PyObject *ak, PyObject *ad,
		       PyObject *as, PyObject *asz, struct mc_get_snapshot *snap);

/* store_py_probe.c: probes without leases, exist options, ranged-read snapshots */
PyObject *mc_py_probe_key(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_batch_probe_key(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_prepare_snapshot(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_get_from_snapshot(struct mc_py_store *self, PyObject *args, PyObject *kw);
/* options.prefetch_to_memory of an ExistOptions (None or absent: 0); -1 with an exception. */
int mc_py_exist_prefetch(PyObject *options);
/* The RangedReadSnapshot type, made ready and added to the module by PyInit__store. */
extern PyTypeObject mc_py_snapshot_type;

/* store_py_segments.c */
PyObject *mc_py_unmount_local_disk(struct mc_py_store *self, PyObject *args, PyObject *kw);

/* store_py_tasks.c */
PyObject *mc_py_create_copy_task(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_create_move_task(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_query_task(struct mc_py_store *self, PyObject *args, PyObject *kw);

/* store_py_query.c */
PyObject *mc_py_is_exist(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_batch_is_exist(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_get_size(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_remove(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_batch_remove(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_remove_by_regex(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_remove_all(struct mc_py_store *self, PyObject *args, PyObject *kw);
PyObject *mc_py_query(struct mc_py_store *self, PyObject *args);
PyObject *mc_py_replica_descs(struct mc_py_store *self, PyObject *args);
PyObject *mc_py_batch_replica_clear(struct mc_py_store *self, PyObject *args, PyObject *kw);

/* store_py_buffer.c: the BufferHandle type and the module's host memory functions. */
extern PyTypeObject mc_py_buffer_type;
PyObject *mc_py_host_alloc(PyObject *mod, PyObject *args);
PyObject *mc_py_host_free(PyObject *mod, PyObject *args);

#endif
