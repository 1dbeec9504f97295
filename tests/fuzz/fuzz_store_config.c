/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the client configuration (src/store/store_config.c), upstream's mooncake.json
 * and MOONCAKE_* variables.  The first input byte chooses: even, the rest is a mooncake.json
 * (in a memfd, passed as the path); odd, the rest is the values of the environment variables
 * below, separated by NUL bytes (an absent one is unset), read with no file.  A configuration
 * that loads must hold NUL-terminated strings within their fields.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store_config.h"
#include "fuzz_util.h"

static const char *const vars[] = {
	"MOONCAKE_MASTER", "MOONCAKE_TE_META_DATA_SERVER", "MOONCAKE_PROTOCOL", "MOONCAKE_DEVICE",
	"MOONCAKE_LOCAL_HOSTNAME", "MOONCAKE_GLOBAL_SEGMENT_SIZE", "MOONCAKE_LOCAL_BUFFER_SIZE",
	"MOONCAKE_TENANT_ID", "MOONCAKE_ENABLE_SSD_OFFLOAD", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH",
	"MC_STORE_USE_HUGEPAGE", "MC_STORE_HUGEPAGE_SIZE", "MC_STORE_HUGEPAGE_FALLBACK",
	"MC_STORE_POPULATE", "MC_STORE_SEGMENT_LOCATION",
};
#define FUZZ_NVARS (sizeof(vars) / sizeof(vars[0]))
#define FUZZ_MAX_VALUE 8192

/* "NAME=value" strings the environment points to (putenv). */
static char env[FUZZ_NVARS][FUZZ_MAX_VALUE + 64];

static void fuzz_check(const struct mc_store_config *c)
{
	if (memchr(c->local_hostname, 0, sizeof(c->local_hostname)) == NULL ||
	    memchr(c->metadata_server, 0, sizeof(c->metadata_server)) == NULL ||
	    memchr(c->master_server_address, 0, sizeof(c->master_server_address)) == NULL ||
	    memchr(c->protocol, 0, sizeof(c->protocol)) == NULL ||
	    memchr(c->device_name, 0, sizeof(c->device_name)) == NULL ||
	    memchr(c->tenant_id, 0, sizeof(c->tenant_id)) == NULL ||
	    memchr(c->ssd_offload_path, 0, sizeof(c->ssd_offload_path)) == NULL ||
	    memchr(c->hugepage_size, 0, sizeof(c->hugepage_size)) == NULL ||
	    memchr(c->segment_location, 0, sizeof(c->segment_location)) == NULL)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct mc_store_config c;
	char err[1024];
	size_t i;

	if (!ready) {
		fuzz_quiet_logs();
		unsetenv("MOONCAKE_CONFIG_PATH");
		ready = 1;
	}
	if (size == 0)
		return 0;
	if (data[0] % 2 == 0) {
		char path[64];
		int fd = fuzz_file(data + 1, size - 1, path, sizeof(path));

		if (fd < 0)
			abort();
		if (mc_store_config_load(&c, path, err, sizeof(err)) == 0)
			fuzz_check(&c);
		close(fd);
		return 0;
	}
	{
		char *copy = malloc(size), *p = copy, *end = copy + size - 1;

		if (copy == NULL)
			abort();
		memcpy(copy, data + 1, size - 1);
		copy[size - 1] = '\0';
		for (i = 0; i < FUZZ_NVARS; i++) {
			if (p <= end) {
				/* putenv of our own buffer, rewritten in place: setenv keeps every
				 * value it ever held, which millions of inputs turn into gigabytes. */
				snprintf(env[i], sizeof(env[i]), "%s=%s", vars[i], p);
				putenv(env[i]);
				p += strlen(p) + 1;
			} else {
				unsetenv(vars[i]);
			}
		}
		if (mc_store_config_load(&c, NULL, err, sizeof(err)) == 0)
			fuzz_check(&c);
		free(copy);
	}
	return 0;
}
