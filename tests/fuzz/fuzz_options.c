/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the daemons' table-driven option parser (src/reactor/options.c): JSON
 * configuration files, command lines, and the value forms every option type accepts.  The
 * table has one option of every type, with bounds, an alias and a JSON key that differs from
 * the flag, as the daemons' tables do.  The first input byte chooses:
 *   0  the rest is a JSON configuration file (in a memfd), applied strict or not (bit 3 of
 *      the byte) over a command line that set some options (bits 4-7);
 *   1  the rest is a command line: arguments separated by NUL bytes;
 *   2  the rest is one value, checked against every option and set where it is valid;
 *   3  the rest is one value for the shared parsers (sizes, durations, bools, addresses).
 * Whatever is accepted must be accepted again as it was stored: a value set into the table
 * and read back passes its own check, numbers lie within their bounds.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reactor/options.h"
#include "fuzz_util.h"

struct fuzz_cfg {
	int flag;
	int64_t port;
	double ratio;
	char *name;
	uint64_t size;
	int64_t ttl;
	char *host;
	char *addr;
	char *endpoint;
	char *metadata;
	char *protocol;
	char *nics;
	char *token;
	char *path;
	int64_t json_only;
};

#define O(f) offsetof(struct fuzz_cfg, f)
static const struct mc_opt tab[] = {
	{ "flag", NULL, NULL, MC_OPT_BOOL, O(flag), "true", 0, -1, "a bool" },
	{ "rpc_port", "port", NULL, MC_OPT_INT, O(port), "50051", 1, 65535, "a port" },
	{ "ratio", NULL, NULL, MC_OPT_DOUBLE, O(ratio), "0.9", 0, 1, "a ratio" },
	{ "name", NULL, NULL, MC_OPT_STRING, O(name), "", 0, -1, "a string" },
	{ "size", NULL, NULL, MC_OPT_SIZE, O(size), "4 GB", 0, 1e15, "a size" },
	{ "ttl", NULL, NULL, MC_OPT_DURATION, O(ttl), "10000", 0, 86400000, "a duration" },
	{ "host", NULL, NULL, MC_OPT_HOST, O(host), "0.0.0.0", 0, -1, "a bind address" },
	{ "addr", NULL, NULL, MC_OPT_ADDR, O(addr), "localhost", 0, -1, "a host[:port]" },
	{ "endpoint", NULL, NULL, MC_OPT_ENDPOINT, O(endpoint), "127.0.0.1:50051", 0, -1,
	  "a host:port" },
	{ "metadata", NULL, NULL, MC_OPT_METADATA, O(metadata), "P2PHANDSHAKE", 0, -1,
	  "a metadata service" },
	{ "protocol", NULL, NULL, MC_OPT_CHOICE, O(protocol), "tcp|rdma|nvmeof", 0, -1,
	  "a choice" },
	{ "nics", NULL, NULL, MC_OPT_NAMES, O(nics), "", 0, -1, "names" },
	{ "token", NULL, NULL, MC_OPT_TOKEN, O(token), "x", 0, -1, "a token" },
	{ "path", NULL, NULL, MC_OPT_PATH, O(path), "/tmp/x", 0, -1, "a path" },
	{ "json_only", NULL, "json_key_differs", MC_OPT_INT, O(json_only), "10", -5, 3600,
	  "json key differs" },
	MC_OPT_END,
};
#define FUZZ_NOPTS (sizeof(tab) / sizeof(tab[0]) - 1)

/* Every stored value passes its option's check again. */
static void fuzz_check_stored(const struct fuzz_cfg *c)
{
	char err[512];
	size_t i;

	for (i = 0; i < FUZZ_NOPTS; i++) {
		const struct mc_opt *o = &tab[i];
		const char *v = NULL;

		switch (o->type) {
		case MC_OPT_STRING: case MC_OPT_HOST: case MC_OPT_ADDR: case MC_OPT_ENDPOINT:
		case MC_OPT_METADATA: case MC_OPT_CHOICE: case MC_OPT_NAMES: case MC_OPT_TOKEN:
		case MC_OPT_PATH:
			v = *(char *const *)((const char *)c + o->offset);
			if (v == NULL || mc_opts_check_value(o, v, NULL, err, sizeof(err)) != 0)
				abort();
			break;
		default:
			break;
		}
	}
	if (c->port < 1 || c->port > 65535 || !(c->ratio >= 0 && c->ratio <= 1) ||
	    c->size > (uint64_t)1e15 || c->ttl < 0 || c->ttl > 86400000 || c->json_only < -5 ||
	    c->json_only > 3600 || (c->flag != 0 && c->flag != 1))
		abort();
}

static void fuzz_json(uint8_t mode, const uint8_t *data, size_t size)
{
	struct fuzz_cfg c;
	struct mc_opts_state st;
	char path[64], err[512];
	const char *argv[5] = { "prog", NULL, NULL, NULL, NULL };
	int argc = 1, next, fd;

	if (mc_opts_defaults(tab, &c) != 0 || mc_opts_state_init(&st, tab) != 0)
		abort();
	if (mode & 0x10)
		argv[argc++] = "--port=8080";
	if (mode & 0x20)
		argv[argc++] = "--name=cli";
	if (mode & 0x40)
		argv[argc++] = "--noflag";
	if (mode & 0x80)
		argv[argc++] = "--metadata=http://127.0.0.1:8080/metadata";
	if (mc_opts_parse_argv(tab, &c, argc, (char **)argv, &st, &next, err, sizeof(err)) != 0)
		abort();
	fd = fuzz_file(data, size, path, sizeof(path));
	if (fd < 0)
		abort();
	if (mc_opts_parse_json_file(tab, &c, path, &st, mode & 8, err, sizeof(err)) == 0)
		fuzz_check_stored(&c);
	close(fd);
	mc_opts_state_fini(&st);
	mc_opts_free(tab, &c);
}

static void fuzz_argv(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1), **argv;
	struct fuzz_cfg c;
	char err[512];
	int argc = 1, next, i;
	size_t k;

	if (copy == NULL)
		abort();
	memcpy(copy, data, size);
	copy[size] = '\0';
	for (k = 0; k < size; k++)
		argc += copy[k] == '\0';
	argc += 1;
	argv = calloc((size_t)argc + 1, sizeof(*argv));
	if (argv == NULL)
		abort();
	argv[0] = (char *)"prog";
	argv[1] = copy;
	for (i = 2, k = 0; k < size; k++)
		if (copy[k] == '\0')
			argv[i++] = copy + k + 1;
	(void)mc_opts_wants(argc, argv, "help");
	if (mc_opts_defaults(tab, &c) != 0)
		abort();
	if (mc_opts_parse_argv(tab, &c, argc, argv, NULL, &next, err, sizeof(err)) == 0) {
		if (next < 1 || next > argc)
			abort();
		fuzz_check_stored(&c);
	}
	mc_opts_free(tab, &c);
	free(argv);
	free(copy);
}

static void fuzz_value(const uint8_t *data, size_t size)
{
	char *v = malloc(size + 1), err[512];
	struct fuzz_cfg c;
	size_t i;

	if (v == NULL)
		abort();
	memcpy(v, data, size);
	v[size] = '\0';
	if (mc_opts_defaults(tab, &c) != 0)
		abort();
	for (i = 0; i < FUZZ_NOPTS; i++) {
		int checked = mc_opts_check_value(&tab[i], v, "fuzz", err, sizeof(err));
		int set = mc_opts_set(&tab[i], &c, v, err, sizeof(err));

		/* A check says what setting does. */
		if ((checked == 0) != (set == 0))
			abort();
	}
	fuzz_check_stored(&c);
	mc_opts_free(tab, &c);
	free(v);
}

static void fuzz_parsers(const uint8_t *data, size_t size)
{
	char *v = malloc(size + 1), host[300];
	uint64_t sz;
	int64_t ms;
	int b, port = -1;

	if (v == NULL)
		abort();
	memcpy(v, data, size);
	v[size] = '\0';
	(void)mc_parse_size(v, &sz);
	if (mc_parse_duration_ms(v, &ms) == 0 && ms < 0)
		abort();
	if (mc_parse_bool(v, &b) == 0 && b != 0 && b != 1)
		abort();
	if (mc_opts_split_addr(v, host, sizeof(host), &port) == 0 &&
	    (port < 0 || port > 65535 || strlen(host) >= sizeof(host)))
		abort();
	free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;

	if (!ready) {
		fuzz_quiet_logs();
		ready = 1;
	}
	if (size == 0)
		return 0;
	switch (data[0] & 3) {
	case 0: fuzz_json(data[0], data + 1, size - 1); break;
	case 1: fuzz_argv(data + 1, size - 1); break;
	case 2: fuzz_value(data + 1, size - 1); break;
	case 3: fuzz_parsers(data + 1, size - 1); break;
	}
	return 0;
}
