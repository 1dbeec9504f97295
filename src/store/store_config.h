/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_STORE_CONFIG_H
#define MC_STORE_CONFIG_H

#include <stdint.h>

/*
 * Client configuration the way upstream's MooncakeConfig reads it (its load_from_env and its
 * JSON loader, same keys, same defaults):
 * a mooncake.json file (MOONCAKE_CONFIG_PATH or an explicit path), else the environment
 * (MOONCAKE_MASTER required, MOONCAKE_TE_META_DATA_SERVER, MOONCAKE_PROTOCOL, MOONCAKE_DEVICE,
 * MOONCAKE_GLOBAL_SEGMENT_SIZE, MOONCAKE_LOCAL_BUFFER_SIZE, MOONCAKE_LOCAL_HOSTNAME).
 */
struct mc_store_config {
	char local_hostname[256];
	char metadata_server[512];
	char master_server_address[256];
	char protocol[32];
	char device_name[256];
	uint64_t global_segment_size;
	uint64_t local_buffer_size;
	char tenant_id[128];
	int enable_ssd_offload;		/* "enable_ssd_offload" / MOONCAKE_ENABLE_SSD_OFFLOAD */
	char ssd_offload_path[1024];	/* "ssd_offload_path" / MOONCAKE_OFFLOAD_FILE_STORAGE_PATH */
	/* Segment memory (mooncake_client; in-process stores read the MC_STORE_* variables) */
	int use_hugepage;		/* "use_hugepage" */
	char hugepage_size[8];		/* "hugepage_size": 2MB or 1GB */
	int hugepage_fallback;		/* "hugepage_fallback" */
	int populate_segment;		/* "populate_segment" (default true) */
	char segment_location[128];	/* "segment_location": "*", cpu:N, interleave */
	/* "cluster_secret_file" / MOONCAKE_CLUSTER_SECRET_FILE: the cluster secret (libmooncake(3)) */
	char cluster_secret_file[1024];
};

/* path NULL: MOONCAKE_CONFIG_PATH if set, else the environment.  Returns 0, -ENOENT (no file,
 * or no MOONCAKE_MASTER), or -EINVAL with a message in err. */
int mc_store_config_load(struct mc_store_config *c, const char *path, char *err, size_t errlen);

#endif
