/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MOONCAKE_STORE_C_H
#define MOONCAKE_STORE_C_H

/*
 * libmooncake store client, C API.
 *
 * Names, arguments and return conventions are those of upstream Mooncake's store_c.h, so programs
 * written against upstream build and run unchanged.  Return values: 0 (or a count / byte size) on
 * success, a negative Mooncake ErrorCode on failure (-704 OBJECT_NOT_FOUND, -200
 * NO_AVAILABLE_HANDLE, -1503 PERSISTENT_FAIL, ... listed in libmooncake(3)), and -1 for a NULL
 * handle or NULL argument.
 *
 * Every function may be called from many threads at once on the same handle.  Strings passed in
 * are only borrowed for the duration of the call.  The library runs one internal reactor thread
 * per handle; calls hand their work to it and wait.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *mooncake_store_t;

typedef struct mooncake_replicate_config {
	size_t replica_num;		/* memory replicas on distinct segments (default 1) */
	int with_soft_pin;		/* != 0: soft-pin the object (SoftPinAction ENABLE) */
	int with_hard_pin;		/* != 0: never evicted */
	const char **preferred_segments;	/* segment names tried first, in order */
	size_t preferred_segments_count;
} mooncake_replicate_config_t;

/* A new, unconfigured handle, or NULL on out-of-memory. */
mooncake_store_t mooncake_store_create(void);
/* Unmounts this client's segment, closes connections, frees the handle.  NULL is a no-op. */
void mooncake_store_destroy(mooncake_store_t store);

/*
 * Connect to the master and contribute global_segment_size bytes of memory (0: a pure client).
 * local_hostname: "host" or "host:port" naming this client (its segment name); without a port one
 * is picked.  metadata_server: transfer-engine metadata ("P2PHANDSHAKE", "http://h:p/metadata",
 * "etcd://...", "redis://...").  local_buffer_size: staging memory for put/get (values larger
 * than it still work here, unlike upstream).  protocol: NULL -> "tcp".  device_name: NULL -> "".
 * master_server_addr: NULL -> "127.0.0.1:50051".
 */
int mooncake_store_setup(mooncake_store_t store, const char *local_hostname,
			 const char *metadata_server, uint64_t global_segment_size,
			 uint64_t local_buffer_size, const char *protocol, const char *device_name,
			 const char *master_server_addr);
/* Legacy: mount a further segment of mount_segment_size bytes after setup. */
int mooncake_store_init_all(mooncake_store_t store, const char *protocol, const char *device_name,
			    uint64_t mount_segment_size);
/* 0 healthy, 1 not initialized, 2 master unreachable, -1 bad handle. */
int mooncake_store_health_check(mooncake_store_t store);

/* Store size bytes under key.  An existing key is not overwritten and the call returns 0. */
int mooncake_store_put(mooncake_store_t store, const char *key, const void *value, size_t size,
		       const mooncake_replicate_config_t *config);
/* Zero-copy put from a registered buffer. */
int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
			    const mooncake_replicate_config_t *config);
/* Returns 0 if the call ran; per-key codes in results_out[count]. */
int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers,
				  const size_t *sizes, size_t count,
				  const mooncake_replicate_config_t *config, int *results_out);
/* Bytes read into buffer, or negative (a buffer smaller than the object gives -600). */
int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer, size_t size);
/* Returns 0 if the call ran; per-key bytes read or negative code in results_out[count]. */
int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers,
				  const size_t *sizes, size_t count, int64_t *results_out);
/* 1 exists, 0 does not, negative on error. */
int mooncake_store_is_exist(mooncake_store_t store, const char *key);
int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count,
				  int *results_out);
/* Point-in-time existence without a read lease (upstream 0.3.14's probe_key): 1 exists, 0 does
 * not, negative on error.  The object may be evicted before a later get. */
int mooncake_store_probe_key(mooncake_store_t store, const char *key);
/* The same for count keys (results_out[count]: 1, 0 or a negative code).  policy NULL or
 * "none": no lease; "LastHitOnly": the keys form groups of candidate_size (which must divide
 * count, else -600 for every key) and only the last group whose keys all exist is leased, as
 * is_exist leases.  An unknown policy gives -600.  Returns 0 if the call ran. */
int mooncake_store_batch_probe_key(mooncake_store_t store, const char **keys, size_t count,
				   const char *policy, size_t candidate_size, int *results_out);
/* Object size in bytes, or negative. */
int64_t mooncake_store_get_size(mooncake_store_t store, const char *key);
/* "host:port" of this client; -1 if buf_len is too small. */
int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len);
int mooncake_store_remove(mooncake_store_t store, const char *key, int force);
/* Number of objects removed, or negative. */
int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force);
int64_t mooncake_store_remove_all(mooncake_store_t store, int force);
/* Register memory for zero-copy put_from/get_into (size 0 gives -1). */
int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size);
int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer);

#ifdef __cplusplus
}
#endif

#endif
