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

/* Write text to a new file named like a YAML configuration; its path into path. */
static void yaml_file(char *path, size_t n, const char *text)
{
	static int seq;
	FILE *f;

	snprintf(path, n, "/tmp/mc-opt-%d-%d.yaml", (int)getpid(), seq++);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

/* YAML configuration files (options_file.c): upstream's conf/master.yaml form. */
static void yaml_cases(struct cfg *c)
{
	char path[128], err[256];
	int rc;

	mc_opts_free(tab, c);
	mc_opts_defaults(tab, c);
	yaml_file(path, sizeof(path),
		  "# a comment\nrpc_port: 6001\nclient_live_ttl_sec: 60\n\nname: \"quoted\"\n"
		  "flag: false\nsize: 2GB\nttl: 5s\nratio: 1.0\n");
	rc = mc_opts_parse_config_file(tab, c, path, NULL, 1, err, sizeof(err));
#ifdef HAVE_YAML
	is(rc, 0, "YAML file parses (%s)", err);
	ok(c->port == 6001 && c->client_ttl == 60 && !strcmp(c->name, "quoted") && c->flag == 0 &&
		   c->size == 2ull << 30 && c->ttl == 5000 && c->ratio == 1.0,
	   "YAML values applied as the JSON ones would be");
	unlink(path);
	yaml_file(path, sizeof(path), "name: ~\nrpc_port: 6002\n");
	ok(mc_opts_parse_config_file(tab, c, path, NULL, 1, err, sizeof(err)) == 0 &&
		   c->name[0] == '\0' && c->port == 6002,
	   "a null YAML value is the empty string");
	unlink(path);
	yaml_file(path, sizeof(path), "rpc_port: 1\nrpc_port: 2\n");
	ok(mc_opts_parse_config_file(tab, c, path, NULL, 1, err, sizeof(err)) == -EINVAL &&
		   strstr(err, "twice"),
	   "a key given twice is refused: %s", err);
	unlink(path);
	yaml_file(path, sizeof(path), "rpc_port:\n  nested: 1\n");
	ok(mc_opts_parse_config_file(tab, c, path, NULL, 1, err, sizeof(err)) == -EINVAL &&
		   strstr(err, "'rpc_port'"),
	   "a nested mapping is refused naming its key: %s", err);
	unlink(path);
	yaml_file(path, sizeof(path), "rpc_port: [1, 2]\n");
	ok(mc_opts_parse_config_file(tab, c, path, NULL, 1, err, sizeof(err)) == -EINVAL,
	   "a list is refused: %s", err);
	unlink(path);
	yaml_file(path, sizeof(path), "ratio: 3\n");
	ok(mc_opts_parse_config_file(tab, c, path, NULL, 1, err, sizeof(err)) == -EINVAL &&
		   strstr(err, "'ratio'") && strstr(err, ".yaml"),
	   "a bad YAML value names the key and the file: %s", err);
	unlink(path);
	yaml_file(path, sizeof(path), "rpc_port: 6003\n  bad indent: [\n");
	ok(mc_opts_parse_config_file(tab, c, path, NULL, 1, err, sizeof(err)) == -EINVAL &&
		   strstr(err, ":2:"),
	   "a YAML syntax error names the line: %s", err);
	unlink(path);
	yaml_file(path, sizeof(path), "nope: 1\n");
	is(mc_opts_parse_config_file(tab, c, path, NULL, 1, err, sizeof(err)), -EINVAL,
	   "an unknown YAML key is refused in strict mode");
	unlink(path);
#else
	ok(rc == -EINVAL && strstr(err, "libyaml"), "without libyaml a YAML file is refused: %s",
	   err);
	unlink(path);
#endif
	is(mc_opts_parse_config_file(tab, c, "/nonexistent/x.yaml", NULL, 1, err, sizeof(err)),
#ifdef HAVE_YAML
	   -ENOENT,
#else
	   -EINVAL,
#endif
	   "a missing YAML file is an error");
	mc_opts_free(tab, c);
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

	is(mc_opts_defaults(tab, &c), 0, "defaults parse");
	ok(c.flag == 1 && c.port == 50051 && c.ratio == 0.9 && c.size == 4ull << 30 &&
		   c.ttl == 10000 && c.name && c.name[0] == '\0',
	   "defaults are applied");

	{
		const char *argv[] = { "prog", "--noflag", "--port=8080", "--ratio", "0.5",
				       "-name=abc", "--size=16MiB", "--ttl=30s" };

		is(parse(&c, NULL, 8, argv), 0, "a mixed command line parses");
		ok(!c.flag && c.port == 8080 && c.ratio == 0.5 && !strcmp(c.name, "abc") &&
			   c.size == 16u << 20 && c.ttl == 30000,
		   "values from the command line (alias --port, --noflag, '--x y', -x=y, units)");
	}
	{
		const char *argv[] = { "prog", "--bogus=1" };

		is(parse(&c, NULL, 2, argv), -EINVAL, "an unknown flag is an error");
	}
	{
		const char *argv[] = { "prog", "--rpc_port=70000" };

		is(parse(&c, NULL, 2, argv), -EINVAL, "an out-of-range value is an error");
	}
	{
		const char *argv[] = { "prog", "--ratio=abc" };

		is(parse(&c, NULL, 2, argv), -EINVAL, "a malformed number is an error");
	}
	{
		const char *argv[] = { "prog", "--name" };

		is(parse(&c, NULL, 2, argv), -EINVAL, "a missing value is an error");
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

	/* Checked string kinds: what upstream's forms accept, and what they refuse. */
	{
		static const struct {
			enum mc_opt_type t;
			const char *def, *value;
			int good;
		} cases[] = {
			{ MC_OPT_HOST, NULL, "127.0.0.1", 1 },
			{ MC_OPT_HOST, NULL, "node-1.example.com", 1 },
			{ MC_OPT_HOST, NULL, "::1", 1 },
			{ MC_OPT_HOST, NULL, "256.1.1.1", 0 },
			{ MC_OPT_HOST, NULL, "a..b", 0 },
			{ MC_OPT_HOST, NULL, "-bad", 0 },
			{ MC_OPT_HOST, NULL, "", 0 },
			{ MC_OPT_HOST, NULL, "h:1", 0 },
			{ MC_OPT_ADDR, NULL, "127.0.0.1", 1 },
			{ MC_OPT_ADDR, NULL, "127.0.0.1:65535", 1 },
			{ MC_OPT_ADDR, NULL, "[::1]:80", 1 },
			{ MC_OPT_ADDR, NULL, "fe80::1", 1 },
			{ MC_OPT_ADDR, NULL, "127.0.0.1:99999", 0 },
			{ MC_OPT_ADDR, NULL, "127.0.0.1:0", 0 },
			{ MC_OPT_ADDR, NULL, "h:", 0 },
			{ MC_OPT_ADDR, NULL, "h:1x", 0 },
			{ MC_OPT_ENDPOINT, NULL, "10.0.0.1:50051", 1 },
			{ MC_OPT_ENDPOINT, NULL, "master:50051", 1 },
			{ MC_OPT_ENDPOINT, NULL, "10.0.0.1", 0 },
			{ MC_OPT_ENDPOINT, NULL, "garbage::", 0 },
			{ MC_OPT_ENDPOINT, NULL, "etcd://h:2379", 0 },
			{ MC_OPT_METADATA, NULL, "P2PHANDSHAKE", 1 },
			{ MC_OPT_METADATA, NULL, "http://127.0.0.1:8080/metadata", 1 },
			{ MC_OPT_METADATA, NULL, "https://meta.example.com/metadata?x=1", 1 },
			{ MC_OPT_METADATA, NULL, "etcd://10.0.0.1:2379,10.0.0.2:2379", 1 },
			{ MC_OPT_METADATA, NULL, "10.0.0.1:2379", 1 },
			{ MC_OPT_METADATA, NULL, "redis://user:pw@10.0.0.1:6379", 1 },
			{ MC_OPT_METADATA, NULL, "redis://10.0.0.1", 1 },
			{ MC_OPT_METADATA, NULL, "notaurl", 0 },
			{ MC_OPT_METADATA, NULL, "ftp://x:1", 0 },
			{ MC_OPT_METADATA, NULL, "http://", 0 },
			{ MC_OPT_METADATA, NULL, "http://h:1/a b", 0 },
			{ MC_OPT_METADATA, NULL, "p2phandshake", 0 },
			{ MC_OPT_CHOICE, "tcp|rdma", "tcp", 1 },
			{ MC_OPT_CHOICE, "tcp|rdma", "RDMA", 1 },
			{ MC_OPT_CHOICE, "tcp|rdma", "foo", 0 },
			{ MC_OPT_CHOICE, "GB|Gb", "gb", 0 },
			{ MC_OPT_NAMES, NULL, "", 1 },
			{ MC_OPT_NAMES, NULL, "mlx5_0,mlx5_1", 1 },
			{ MC_OPT_NAMES, NULL, "mlx5_0,", 0 },
			{ MC_OPT_NAMES, NULL, "mlx5_0 mlx5_1", 0 },
			{ MC_OPT_TOKEN, NULL, "tenant-1", 1 },
			{ MC_OPT_TOKEN, NULL, "a b", 0 },
			{ MC_OPT_TOKEN, NULL, "a\"b", 0 },
			{ MC_OPT_PATH, NULL, "/var/lib/mooncake", 1 },
			{ MC_OPT_PATH, NULL, "a\nb", 0 },
		};
		size_t i;

		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct mc_opt o = { "x", NULL, NULL, cases[i].t, 0, cases[i].def, 0, -1, "" };
			int rc = mc_opts_check_value(&o, cases[i].value, NULL, err, sizeof(err));

			is((rc == 0), cases[i].good, "kind %d: '%s' %s", (int)cases[i].t,
			   cases[i].value, cases[i].good ? "accepted" : "refused");
			if (!cases[i].good)
				ok(strchr(err, '\n') == NULL && strstr(err, "--x"),
				   "one line naming the option: %s", err);
		}
	}
	{
		char host[64];
		int port = -1;

		ok(mc_opts_split_addr("[::1]:8080", host, sizeof(host), &port) == 0 &&
			   !strcmp(host, "::1") && port == 8080,
		   "split [::1]:8080");
		ok(mc_opts_split_addr("10.0.0.1", host, sizeof(host), &port) == 0 &&
			   !strcmp(host, "10.0.0.1") && port == 0,
		   "split a host without port");
		ok(mc_opts_split_addr("::1", host, sizeof(host), &port) == 0 && !strcmp(host, "::1") &&
			   port == 0,
		   "a bare IPv6 address has no port");
	}
	{
		static const struct mc_opt env[] = {
			{ "MC_TEST_OPT_PROTO", NULL, NULL, MC_OPT_CHOICE, 0, "tcp|rdma", 0, -1, "" },
			{ "MC_TEST_OPT_PORT", NULL, NULL, MC_OPT_INT, 0, NULL, 1, 65535, "" },
			MC_OPT_END,
		};

		setenv("MC_TEST_OPT_PROTO", "rdma", 1);
		setenv("MC_TEST_OPT_PORT", "", 1);
		is(mc_opts_check_env(env, err, sizeof(err)), 0, "good and empty variables pass");
		setenv("MC_TEST_OPT_PORT", "0", 1);
		ok(mc_opts_check_env(env, err, sizeof(err)) == -EINVAL &&
			   strstr(err, "environment variable MC_TEST_OPT_PORT") && strstr(err, "'0'"),
		   "a bad variable is named with its value: %s", err);
		unsetenv("MC_TEST_OPT_PROTO");
		unsetenv("MC_TEST_OPT_PORT");
	}
	{
		static const struct mc_opt ch[] = {
			{ "protocol", NULL, NULL, MC_OPT_CHOICE, O(name), "tcp|rdma", 0, -1, "" },
			MC_OPT_END,
		};
		struct cfg cc;

		memset(&cc, 0, sizeof(cc));
		ok(mc_opts_defaults(ch, &cc) == 0 && !strcmp(cc.name, "tcp"),
		   "a choice defaults to its first word");
		ok(mc_opts_set(&ch[0], &cc, "RDMA", err, sizeof(err)) == 0 && !strcmp(cc.name, "rdma"),
		   "a choice is stored in the table's spelling");
		mc_opts_free(ch, &cc);
	}

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
	is(mc_opts_parse_json_file(tab, &c, path, &st, 1, err, sizeof(err)), 0,
	   "config file parses (%s)", err);
	ok(c.port == 6000 && c.client_ttl == 60 && c.ratio == 0.75 && !strcmp(c.name, "fromfile") &&
		   c.size == 1u << 30 && c.flag == 0,
	   "file values applied, CLI value kept, json_key honoured");
	fd = open(path, O_WRONLY | O_TRUNC);
	dprintf(fd, "{\"ratio\": 7}");
	close(fd);
	ok(mc_opts_parse_json_file(tab, &c, path, &st, 1, err, sizeof(err)) == -EINVAL &&
		   strstr(err, "'ratio'") && c.ratio == 0.75,
	   "a bad file value is refused even when the command line overrides it: %s", err);
	fd = open(path, O_WRONLY | O_TRUNC);
	dprintf(fd, "{\"nope\": 1}");
	close(fd);
	is(mc_opts_parse_json_file(tab, &c, path, &st, 1, err, sizeof(err)), -EINVAL,
	   "unknown key refused in strict mode");
	is(mc_opts_parse_json_file(tab, &c, path, &st, 0, err, sizeof(err)), 0,
	   "unknown key ignored in lenient mode");
	fd = open(path, O_WRONLY | O_TRUNC);
	dprintf(fd, "{\"rpc_port\": 99999}");
	close(fd);
	is(mc_opts_parse_json_file(tab, &c, path, NULL, 1, err, sizeof(err)), -EINVAL,
	   "out-of-range file value refused");
	fd = open(path, O_WRONLY | O_TRUNC);
	dprintf(fd, "{\"rpc_port\": ");
	close(fd);
	is(mc_opts_parse_json_file(tab, &c, path, NULL, 1, err, sizeof(err)), -EINVAL,
	   "malformed JSON refused");
	unlink(path);
	is(mc_opts_parse_json_file(tab, &c, path, NULL, 1, err, sizeof(err)), -ENOENT,
	   "missing file gives -ENOENT");
	mc_opts_state_fini(&st);
	yaml_cases(&c);
	mc_opts_free(tab, &c);
	return tap_done();
}
