/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the table-driven option parser (src/reactor/options.c). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "reactor/options.h"
#include "tap.h"

struct cfg {
	int flag;
	int64_t port;
	double ratio;
	char *name;
	uint64_t size;
	int64_t ttl;
	int64_t client_ttl;
};

#define O(f) offsetof(struct cfg, f)
static const struct mc_opt tab[] = {
	{ "flag", NULL, NULL, MC_OPT_BOOL, O(flag), "true", 0, -1, "a bool" },
	{ "rpc_port", "port", NULL, MC_OPT_INT, O(port), "50051", 1, 65535, "a port" },
	{ "ratio", NULL, NULL, MC_OPT_DOUBLE, O(ratio), "0.9", 0, 1, "a ratio" },
	{ "name", NULL, NULL, MC_OPT_STRING, O(name), "", 0, -1, "a string" },
	{ "size", NULL, NULL, MC_OPT_SIZE, O(size), "4 GB", 0, -1, "a size" },
	{ "ttl", NULL, NULL, MC_OPT_DURATION, O(ttl), "10000", 0, -1, "a duration" },
	{ "client_ttl", NULL, "client_live_ttl_sec", MC_OPT_INT, O(client_ttl), "10", 1, 3600,
	  "json key differs" },
	MC_OPT_END,
};

static int parse(struct cfg *c, struct mc_opts_state *st, int argc, const char **argv)
{
	char err[256];
	int next;

	return mc_opts_parse_argv(tab, c, argc, (char **)argv, st, &next, err, sizeof(err));
}

int main(void)
{
	struct cfg c;
	struct mc_opts_state st;
	char err[256];
	uint64_t sz;
	int64_t ms;
	char path[] = "/tmp/mc-opt-XXXXXX";
	int fd;

	ok(mc_opts_defaults(tab, &c) == 0, "defaults parse");
	ok(c.flag == 1 && c.port == 50051 && c.ratio == 0.9 && c.size == 4ull << 30 &&
		   c.ttl == 10000 && c.name && c.name[0] == '\0',
	   "defaults are applied");

	{
		const char *argv[] = { "prog", "--noflag", "--port=8080", "--ratio", "0.5",
				       "-name=abc", "--size=16MiB", "--ttl=30s" };

		ok(parse(&c, NULL, 8, argv) == 0, "a mixed command line parses");
		ok(!c.flag && c.port == 8080 && c.ratio == 0.5 && !strcmp(c.name, "abc") &&
			   c.size == 16u << 20 && c.ttl == 30000,
		   "values from the command line (alias --port, --noflag, '--x y', -x=y, units)");
	}
	{
		const char *argv[] = { "prog", "--bogus=1" };

		ok(parse(&c, NULL, 2, argv) == -EINVAL, "an unknown flag is an error");
	}
	{
		const char *argv[] = { "prog", "--rpc_port=70000" };

		ok(parse(&c, NULL, 2, argv) == -EINVAL, "an out-of-range value is an error");
	}
	{
		const char *argv[] = { "prog", "--ratio=abc" };

		ok(parse(&c, NULL, 2, argv) == -EINVAL, "a malformed number is an error");
	}
	{
		const char *argv[] = { "prog", "--name" };

		ok(parse(&c, NULL, 2, argv) == -EINVAL, "a missing value is an error");
	}

	ok(mc_parse_size("4gb", &sz) == 0 && sz == 4ull << 30, "size 4gb");
	ok(mc_parse_size("16 MB", &sz) == 0 && sz == 16u << 20, "size '16 MB'");
	ok(mc_parse_size("3355443200", &sz) == 0 && sz == 3355443200ull, "plain size");
	ok(mc_parse_size("1.5k", &sz) == 0 && sz == 1536, "fractional size");
	ok(mc_parse_size("-1", &sz) != 0 && mc_parse_size("12xb", &sz) != 0 &&
		   mc_parse_size("", &sz) != 0,
	   "bad sizes are refused");
	ok(mc_parse_duration_ms("2h", &ms) == 0 && ms == 7200000, "duration 2h");
	ok(mc_parse_duration_ms("250ms", &ms) == 0 && ms == 250, "duration 250ms");
	ok(mc_parse_duration_ms("5x", &ms) != 0, "bad duration refused");

	/* Config file: keys by name or json_key; CLI-set options win. */
	fd = mkstemp(path);
	dprintf(fd, "{\"rpc_port\": 6000, \"client_live_ttl_sec\": 60, \"ratio\": 0.25, "
		    "\"name\": \"fromfile\", \"size\": \"1gb\", \"flag\": false}");
	close(fd);
	mc_opts_free(tab, &c);
	mc_opts_defaults(tab, &c);
	mc_opts_state_init(&st, tab);
	{
		const char *argv[] = { "prog", "--ratio=0.75" };

		parse(&c, &st, 2, argv);
	}
	ok(mc_opts_parse_json_file(tab, &c, path, &st, 1, err, sizeof(err)) == 0,
	   "config file parses (%s)", err);
	ok(c.port == 6000 && c.client_ttl == 60 && c.ratio == 0.75 && !strcmp(c.name, "fromfile") &&
		   c.size == 1u << 30 && c.flag == 0,
	   "file values applied, CLI value kept, json_key honoured");
	fd = open(path, O_WRONLY | O_TRUNC);
	dprintf(fd, "{\"nope\": 1}");
	close(fd);
	ok(mc_opts_parse_json_file(tab, &c, path, &st, 1, err, sizeof(err)) == -EINVAL,
	   "unknown key refused in strict mode");
	ok(mc_opts_parse_json_file(tab, &c, path, &st, 0, err, sizeof(err)) == 0,
	   "unknown key ignored in lenient mode");
	fd = open(path, O_WRONLY | O_TRUNC);
	dprintf(fd, "{\"rpc_port\": 99999}");
	close(fd);
	ok(mc_opts_parse_json_file(tab, &c, path, NULL, 1, err, sizeof(err)) == -EINVAL,
	   "out-of-range file value refused");
	fd = open(path, O_WRONLY | O_TRUNC);
	dprintf(fd, "{\"rpc_port\": ");
	close(fd);
	ok(mc_opts_parse_json_file(tab, &c, path, NULL, 1, err, sizeof(err)) == -EINVAL,
	   "malformed JSON refused");
	unlink(path);
	ok(mc_opts_parse_json_file(tab, &c, path, NULL, 1, err, sizeof(err)) == -ENOENT,
	   "missing file gives -ENOENT");
	mc_opts_state_fini(&st);
	mc_opts_free(tab, &c);
	return tap_done();
}
