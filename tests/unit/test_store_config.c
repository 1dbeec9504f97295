/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for mooncake.json / MOONCAKE_* parsing (src/store/store_config.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store_config.h"
#include "tap.h"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

int main(void)
{
	struct mc_store_config c;
	char err[256] = "", path[] = "/tmp/mc-cfg-XXXXXX";
	int fd = mkstemp(path);

	close(fd);
	unsetenv("MOONCAKE_CONFIG_PATH");
	unsetenv("MOONCAKE_MASTER");
	is(mc_store_config_load(&c, NULL, err, sizeof(err)), -ENOENT,
	   "no file and no MOONCAKE_MASTER is an error (%s)", err);

	setenv("MOONCAKE_MASTER", "10.0.0.1:50051", 1);
	setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "4gb", 1);
	setenv("MOONCAKE_LOCAL_BUFFER_SIZE", "16 MB", 1);
	setenv("MOONCAKE_PROTOCOL", "TCP", 1);
	is(mc_store_config_load(&c, NULL, err, sizeof(err)), 0, "environment only");
	ok(!strcmp(c.master_server_address, "10.0.0.1:50051") &&
		   !strcmp(c.metadata_server, "P2PHANDSHAKE") &&
		   !strcmp(c.local_hostname, "localhost") && c.global_segment_size == 4ull << 30 &&
		   c.local_buffer_size == 16u << 20 && !strcmp(c.protocol, "tcp"),
	   "env values and upstream's defaults (protocol lower-cased)");
	setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "lots", 1);
	is(mc_store_config_load(&c, NULL, err, sizeof(err)), -EINVAL, "bad size refused: %s", err);
	unsetenv("MOONCAKE_GLOBAL_SEGMENT_SIZE");

	write_file(path, "{\"local_hostname\": \"10.0.0.2\", \"metadata_server\": "
			 "\"http://10.0.0.1:8080/metadata\", \"master_server_address\": "
			 "\"10.0.0.1:50051\", \"global_segment_size\": \"3 GB\", "
			 "\"local_buffer_size\": 1048576, \"protocol\": \"rdma\", "
			 "\"device_name\": \"mlx5_0\", \"unknown_key\": 1}");
	setenv("MOONCAKE_CONFIG_PATH", path, 1);
	is(mc_store_config_load(&c, NULL, err, sizeof(err)), 0,
	   "MOONCAKE_CONFIG_PATH file wins over the environment");
	ok(!strcmp(c.local_hostname, "10.0.0.2") && c.global_segment_size == 3ull << 30 &&
		   c.local_buffer_size == 1u << 20 && !strcmp(c.device_name, "mlx5_0") &&
		   !strcmp(c.protocol, "rdma") &&
		   !strcmp(c.metadata_server, "http://10.0.0.1:8080/metadata"),
	   "file values: strings, int and string sizes");
	write_file(path, "{\"local_hostname\": \"h\", \"metadata_server\": \"P2PHANDSHAKE\"}");
	ok(mc_store_config_load(&c, NULL, err, sizeof(err)) == -EINVAL &&
		   strstr(err, "master_server_address"),
	   "a missing required key is named: %s", err);
	write_file(path, "[1, 2]");
	is(mc_store_config_load(&c, NULL, err, sizeof(err)), -EINVAL, "not an object: %s", err);
	write_file(path, "{\"local_hostname\": ");
	is(mc_store_config_load(&c, NULL, err, sizeof(err)), -EINVAL, "malformed JSON: %s", err);
	ok(mc_store_config_load(&c, "/nonexistent/mooncake.json", err, sizeof(err)) == -EINVAL,
	   "an explicit missing file is an error");
	unlink(path);
	return tap_done();
}
