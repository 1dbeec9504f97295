/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exported store C API (include/mooncake/store_c.h): argument checks and upstream's return
 * conventions around the operations in store_ops.c.  NULL handles and arguments give -1, as
 * upstream.  Calls on a handle that is not set up give 1 from health_check and -1 elsewhere.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "mooncake/store_c.h"
#include "store/store.h"

#define MC_STORE(h) ((struct mc_store *)(h))

static int mc_api_ready(mooncake_store_t h)
{
	return h != NULL && MC_STORE(h)->initialized;
}

static void mc_api_config(struct mc_rpc_config *cfg, const mooncake_replicate_config_t *c)
{
	if (c == NULL)
		mc_store_config_from_c(cfg, 1, 0, 0, NULL, 0);
	else
		mc_store_config_from_c(cfg, c->replica_num, c->with_soft_pin, c->with_hard_pin,
				       c->preferred_segments, c->preferred_segments_count);
}

mooncake_store_t mooncake_store_create(void)
{
	struct mc_store *st = calloc(1, sizeof(*st));

	if (st == NULL)
		return NULL;
	pthread_mutex_init(&st->mu, NULL);
	st->reserve_fd = -1;
	return st;
}

void mooncake_store_destroy(mooncake_store_t store)
{
	struct mc_store *st = MC_STORE(store);

	if (st == NULL)
		return;
	mc_store_teardown(st);
	pthread_mutex_destroy(&st->mu);
	free(st);
}

int mooncake_store_setup(mooncake_store_t store, const char *local_hostname,
			 const char *metadata_server, uint64_t global_segment_size,
			 uint64_t local_buffer_size, const char *protocol, const char *device_name,
			 const char *master_server_addr)
{
	if (store == NULL)
		return -1;
	return mc_store_setup(MC_STORE(store), local_hostname ? local_hostname : "",
			      metadata_server ? metadata_server : "", global_segment_size,
			      local_buffer_size, protocol ? protocol : "tcp",
			      device_name ? device_name : "",
			      master_server_addr ? master_server_addr : "127.0.0.1:50051");
}

int mooncake_store_init_all(mooncake_store_t store, const char *protocol, const char *device_name,
			    uint64_t mount_segment_size)
{
	(void)protocol;
	(void)device_name;
	if (!mc_api_ready(store) || mount_segment_size == 0)
		return -1;
	return mc_store_mount_segment(MC_STORE(store), mount_segment_size);
}

int mooncake_store_health_check(mooncake_store_t store)
{
	struct mc_rpc_call call;
	int rc;

	if (store == NULL)
		return -1;
	if (!MC_STORE(store)->initialized)
		return 1;
	mc_rpc_call_init(&call, MC_OP_SERVICE_READY);
	rc = mc_store_call(MC_STORE(store), &call);
	if (rc == 0)
		rc = call.status;
	mc_rpc_call_fini(&call);
	return rc ? 2 : 0;
}

static int mc_api_put(mooncake_store_t store, const char *key, const void *value, size_t size,
		      const mooncake_replicate_config_t *config)
{
	struct mc_rpc_config cfg;
	struct mc_put_item it = { .key = key, .buf = value, .size = size };

	if (!mc_api_ready(store) || key == NULL || (value == NULL && size))
		return -1;
	mc_api_config(&cfg, config);
	mc_store_put_many(MC_STORE(store), &it, 1, &cfg, 0);
	return it.result;
}

int mooncake_store_put(mooncake_store_t store, const char *key, const void *value, size_t size,
		       const mooncake_replicate_config_t *config)
{
	return mc_api_put(store, key, value, size, config);
}

int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
			    const mooncake_replicate_config_t *config)
{
	return mc_api_put(store, key, buffer, size, config);
}

int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers,
				  const size_t *sizes, size_t count,
				  const mooncake_replicate_config_t *config, int *results_out)
{
	struct mc_rpc_config cfg;
	struct mc_put_item *items;
	size_t i;

	if (!mc_api_ready(store) || keys == NULL || buffers == NULL || sizes == NULL ||
	    results_out == NULL || count > MC_RPC_MAX_BATCH)
		return -1;
	for (i = 0; i < count; i++)
		if (keys[i] == NULL)
			return -1;
	if (count == 0)
		return 0;
	items = calloc(count, sizeof(*items));
	if (items == NULL)
		return -1;
	for (i = 0; i < count; i++) {
		items[i].key = keys[i];
		items[i].buf = buffers[i];
		items[i].size = sizes[i];
	}
	mc_api_config(&cfg, config);
	mc_store_put_many(MC_STORE(store), items, (uint32_t)count, &cfg, 0);
	for (i = 0; i < count; i++)
		results_out[i] = items[i].result;
	free(items);
	return 0;
}

int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer, size_t size)
{
	struct mc_get_item it = { .key = key, .buf = buffer, .cap = size };

	if (!mc_api_ready(store) || key == NULL || (buffer == NULL && size))
		return -1;
	mc_store_get_many(MC_STORE(store), &it, 1);
	return it.result;
}

int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers,
				  const size_t *sizes, size_t count, int64_t *results_out)
{
	struct mc_get_item *items;
	size_t i;

	if (!mc_api_ready(store) || keys == NULL || buffers == NULL || sizes == NULL ||
	    results_out == NULL || count > MC_RPC_MAX_BATCH)
		return -1;
	for (i = 0; i < count; i++)
		if (keys[i] == NULL)
			return -1;
	if (count == 0)
		return 0;
	items = calloc(count, sizeof(*items));
	if (items == NULL)
		return -1;
	for (i = 0; i < count; i++) {
		items[i].key = keys[i];
		items[i].buf = buffers[i];
		items[i].cap = sizes[i];
	}
	mc_store_get_many(MC_STORE(store), items, (uint32_t)count);
	for (i = 0; i < count; i++)
		results_out[i] = items[i].result;
	free(items);
	return 0;
}

int mooncake_store_is_exist(mooncake_store_t store, const char *key)
{
	int res;

	if (!mc_api_ready(store) || key == NULL)
		return -1;
	mc_store_exist_many(MC_STORE(store), &key, 1, &res);
	return res;
}

/* A batch call's arguments: a set-up handle, count keys (none NULL, at most a batch), room for
 * the results. */
static int mc_api_batch_ok(mooncake_store_t store, const char **keys, size_t count,
			   const void *results_out)
{
	size_t i;

	if (!mc_api_ready(store) || keys == NULL || results_out == NULL ||
	    count > MC_RPC_MAX_BATCH)
		return 0;
	for (i = 0; i < count; i++)
		if (keys[i] == NULL)
			return 0;
	return 1;
}

int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count,
				  int *results_out)
{
	if (!mc_api_batch_ok(store, keys, count, results_out))
		return -1;
	return mc_store_exist_many(MC_STORE(store), keys, (uint32_t)count, results_out);
}

int mooncake_store_probe_key(mooncake_store_t store, const char *key)
{
	int res;

	if (!mc_api_ready(store) || key == NULL)
		return -1;
	mc_store_probe_many(MC_STORE(store), &key, 1, MC_PROBE_NONE, 1, &res);
	return res;
}

int mooncake_store_batch_probe_key(mooncake_store_t store, const char **keys, size_t count,
				   const char *policy, size_t candidate_size, int *results_out)
{
	int p = mc_store_probe_policy(policy);
	size_t i;

	if (!mc_api_batch_ok(store, keys, count, results_out))
		return -1;
	if (p < 0 || candidate_size > UINT32_MAX) {
		for (i = 0; i < count; i++)
			results_out[i] = MC_ERR_INVALID_PARAMS;
		return MC_ERR_INVALID_PARAMS;
	}
	return mc_store_probe_many(MC_STORE(store), keys, (uint32_t)count, p,
				   (uint32_t)candidate_size, results_out);
}

int64_t mooncake_store_get_size(mooncake_store_t store, const char *key)
{
	if (!mc_api_ready(store) || key == NULL)
		return -1;
	return mc_store_get_size(MC_STORE(store), key);
}

int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len)
{
	size_t n;

	if (store == NULL || buf_out == NULL)
		return -1;
	n = strlen(MC_STORE(store)->hostname);
	if (n + 1 > buf_len)
		return -1;
	memcpy(buf_out, MC_STORE(store)->hostname, n + 1);
	return 0;
}

int mooncake_store_remove(mooncake_store_t store, const char *key, int force)
{
	int res;

	if (!mc_api_ready(store) || key == NULL)
		return -1;
	mc_store_remove_many(MC_STORE(store), &key, 1, force, &res);
	return res;
}

int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force)
{
	if (!mc_api_ready(store) || pattern == NULL)
		return -1;
	return mc_store_remove_regex(MC_STORE(store), pattern, force);
}

int64_t mooncake_store_remove_all(mooncake_store_t store, int force)
{
	if (!mc_api_ready(store))
		return -1;
	return mc_store_remove_all(MC_STORE(store), force);
}

int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size)
{
	if (!mc_api_ready(store) || buffer == NULL || size == 0)
		return -1;
	/* With the handle's engine: peers may reach it, and on rdma it is on the NICs. */
	return mc_store_register(MC_STORE(store), buffer, size) ? -1 : 0;
}

int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer)
{
	if (!mc_api_ready(store) || buffer == NULL)
		return -1;
	return mc_store_unregister(MC_STORE(store), buffer) ? -1 : 0;
}
