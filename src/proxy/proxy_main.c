/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_proxy: the prefill/decode (XpYd) proxy for vLLM instances sharing a Mooncake store.
 * The command line is the one of vLLM's disaggregation demo proxy (--model, --prefill h:p ...,
 * --decode h:p ..., --port, --scheduling) plus bounds; the admin key comes from ADMIN_API_KEY
 * or --admin_api_key_file, never from the command line.  Exit status: 0 after SIGTERM/SIGINT, 1
 * when the service cannot start, 2 for a bad command line.  Single-threaded.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "proxy/proxy.h"
#include "reactor/http_guard.h"
#include "reactor/options.h"
#include "reactor/sd_notify.h"

#define PX_PROG "mooncake_proxy"

#define O(f) offsetof(struct px_cfg, f)
static const struct mc_opt px_opts[] = {
	{ "model", NULL, NULL, MC_OPT_TOKEN, O(model), "", 0, -1,
	  "the model the instances serve: /v1/models names it and an instance is put in rotation "
	  "only when it serves it (empty: not checked)" },
	{ "host", NULL, NULL, MC_OPT_HOST, O(host), "0.0.0.0", 0, -1, "listen address" },
	{ "port", NULL, NULL, MC_OPT_INT, O(port), "8000", 0, 65535,
	  "listen port (0: any free port, logged)" },
	{ "scheduling", NULL, NULL, MC_OPT_CHOICE, O(scheduling),
	  "round_robin|least_loaded|kv_aware", 0, -1,
	  "how instances are chosen: round_robin, least_loaded (fewest requests in flight) or "
	  "kv_aware (prefill instance most likely to hold the prompt's prefix, within "
	  "--kv_load_slack of the least loaded)" },
	{ "log-level", "log_level", NULL, MC_OPT_CHOICE, O(log_level),
	  "INFO|DEBUG|WARNING|WARN|ERROR", 0, -1, "DEBUG, INFO, WARNING or ERROR" },
	{ "admin_api_key_file", NULL, NULL, MC_OPT_PATH, O(admin_api_key_file), "", 0, -1,
	  "file holding the admin key for /instances/add and /instances/remove (else the "
	  "ADMIN_API_KEY environment variable; neither: admin routes answer 503)" },
	{ "max_header_bytes", NULL, NULL, MC_OPT_SIZE, O(max_header_bytes), "64KB", 1024,
	  16777216.0, "largest request header block (larger: the connection is refused)" },
	{ "max_body_bytes", NULL, NULL, MC_OPT_SIZE, O(max_body_bytes), "32MB", 1024,
	  1073741824.0, "largest request body (413 above)" },
	{ "max_inflight", NULL, NULL, MC_OPT_INT, O(max_inflight), "4096", 1, 1000000,
	  "completion requests in flight at most (503 above)" },
	{ "max_instances", NULL, NULL, MC_OPT_INT, O(max_instances), "256", 1, 65536,
	  "prefill plus decode instances at most" },
	{ "max_idle_upstream", NULL, NULL, MC_OPT_INT, O(max_idle_upstream), "256", 0, 65536,
	  "kept-alive idle connections per instance" },
	{ "upstream_timeout", NULL, NULL, MC_OPT_DURATION, O(upstream_timeout_ms), "600s", 1,
	  86400000, "longest silence from an instance before its request fails" },
	{ "client_timeout", NULL, NULL, MC_OPT_DURATION, O(client_timeout_ms), "600s", 1, 86400000,
	  "longest silence from a caller before its connection is closed" },
	{ "max_connections", NULL, NULL, MC_OPT_INT, O(max_connections), "8192", 1, 1000000,
	  "callers' connections at once; more are closed at once (counted on /metrics)" },
	{ "max_connections_per_peer", NULL, NULL, MC_OPT_INT, O(max_connections_per_peer),
	  "1024", 1, 1000000, "callers' connections from one address at once" },
	{ "request_timeout", NULL, NULL, MC_OPT_DURATION, O(request_timeout_ms), "60s", 1,
	  86400000, "a request must arrive whole within this time of its connection's start or "
	  "of the previous reply, or the connection is closed (slow and idle callers)" },
	{ "health_interval", NULL, NULL, MC_OPT_DURATION, O(health_interval_ms), "5s", 100,
	  3600000, "period of the health checks (GET /v1/models on every instance)" },
	{ "prefill_retries", NULL, NULL, MC_OPT_INT, O(prefill_retries), "2", 0, 15,
	  "other instances tried when a prefill (or a decode, before its first byte) fails" },
	{ "kv_block_bytes", NULL, NULL, MC_OPT_INT, O(kv_block_bytes), "64", 1, 65536,
	  "kv_aware: prompt bytes per prefix block" },
	{ "kv_cache_blocks", NULL, NULL, MC_OPT_INT, O(kv_cache_blocks), "65536", 1, 67108864,
	  "kv_aware: prefix blocks remembered per prefill instance" },
	{ "kv_load_slack", NULL, NULL, MC_OPT_INT, O(kv_load_slack), "2", 0, 1000000,
	  "kv_aware: requests in flight above the least loaded instance that a prefix match may "
	  "still win" },
	{ "kv_events_endpoint", NULL, NULL, MC_OPT_STRING, O(kv_events_endpoint), "", 0, -1,
	  "kv_aware: the master's KV events, e.g. tcp://master:5557 (its "
	  "--kv_events_bind_endpoint); the proxy subscribes and keeps the set of blocks in the "
	  "pool (empty: no pool knowledge)" },
	{ "kv_events_key_format", NULL, NULL, MC_OPT_STRING, O(kv_events_key_format), "{hash}", 0,
	  -1, "kv_aware: the object key of a prompt block in the pool, with {hash} (decimal) or "
	  "{hex} (hexadecimal) standing for the block's hash; keys other than a bare {hash} "
	  "need the master's --kv_events_emit_object_key" },
	{ "kv_pool_block_bytes", NULL, NULL, MC_OPT_INT, O(kv_pool_block_bytes), "0", 0, 65536,
	  "kv_aware: prompt bytes per pool block (0: --kv_block_bytes)" },
	{ "kv_pool_blocks", NULL, NULL, MC_OPT_INT, O(kv_pool_blocks), "1048576", 4, 268435456,
	  "kv_aware: pool blocks remembered at most (8 bytes each)" },
	{ "kv_pool_min_blocks", NULL, NULL, MC_OPT_INT, O(kv_pool_min_blocks), "1", 1, 1000000,
	  "kv_aware: leading prompt blocks the pool must hold for the prompt to count as in the "
	  "pool (then that prefix counts as every prefill instance's own)" },
	{ "kv_pool_skip_prefill", NULL, NULL, MC_OPT_BOOL, O(kv_pool_skip_prefill), "false", 0, -1,
	  "kv_aware: when every whole block of the prompt is in the pool, send the request "
	  "straight to a decode instance (only for connectors that load pool hits on the decode "
	  "side, e.g. LMCache's Mooncake backend)" },
	{ "check_config", NULL, NULL, MC_OPT_BOOL, O(check_config), "false", 0, -1,
	  "validate the flags and the admin key file, then exit (0 valid, 2 invalid)" },
	MC_OPT_END,
};

static void px_usage(FILE *out)
{
	fprintf(out, "usage: " PX_PROG " --model M --prefill host:port [host:port ...] "
		     "--decode host:port [host:port ...] [--flag=value ...]\n"
		     "The prefill/decode proxy for vLLM instances (OpenAI /v1/completions and "
		     "/v1/chat/completions).\n\nFlags:\n");
	fprintf(out, "  --prefill=<host:port ...> (alias -p)  (default: \"\")\n"
		     "      prefill instances (more may be added with /instances/add)\n"
		     "  --decode=<host:port ...> (alias -d)  (default: \"\")\n"
		     "      decode instances (more may be added with /instances/add)\n");
	mc_opts_help(px_opts, out);
	fprintf(out, "  --help\n      print this help and exit\n"
		     "  --version\n      print the version and exit\n");
}

/* Is a the list flag of role (--prefill, -p, --prefill=V ...)?  Sets *val to an inline value. */
static int px_list_flag(const char *a, const char *lng, const char *shrt, const char **val)
{
	size_t n = strlen(lng);

	*val = NULL;
	if (!strcmp(a, shrt))
		return 1;
	a += a[0] == '-' && a[1] == '-' ? 2 : a[0] == '-' ? 1 : 0;
	if (!strncmp(a, lng, n) && (a[n] == 0 || a[n] == '=')) {
		*val = a[n] == '=' ? a + n + 1 : NULL;
		return 1;
	}
	return 0;
}

/* Take the --prefill and --decode lists out of argv (checking every value); the rest goes to
 * *rest for the option table.  Returns 0 or 2 after one line on stderr. */
static int px_parse_lists(struct px_cfg *c, int argc, char **argv, char **rest, int *n_rest)
{
	static const struct mc_opt ep = { "instance", NULL, NULL, MC_OPT_ENDPOINT, 0, NULL,
					  0, -1, "" };
	char err[512];
	const char *v;
	int i, role, n;

	*n_rest = 0;
	rest[(*n_rest)++] = argv[0];
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *flag;
		char ***list;
		size_t *cnt;

		if (!strcmp(a, "--")) {
			while (i < argc)
				rest[(*n_rest)++] = argv[i++];
			break;
		}
		if (px_list_flag(a, "prefill", "-p", &v))
			role = PX_PREFILL;
		else if (px_list_flag(a, "decode", "-d", &v))
			role = PX_DECODE;
		else {
			rest[(*n_rest)++] = argv[i];
			continue;
		}
		flag = role == PX_PREFILL ? "--prefill" : "--decode";
		list = role == PX_PREFILL ? &c->prefill : &c->decode;
		cnt = role == PX_PREFILL ? &c->n_prefill : &c->n_decode;
		n = 0;
		for (;;) {
			if (v == NULL) {
				if (i + 1 >= argc || argv[i + 1][0] == '-')
					break;
				v = argv[++i];
			}
			if (mc_opts_check_value(&ep, v, flag, err, sizeof(err)) != 0) {
				fprintf(stderr, PX_PROG ": %s\n", err);
				return 2;
			}
			*list = mc_xrealloc(*list, (*cnt + 1) * sizeof(char *));
			(*list)[(*cnt)++] = mc_xstrdup(v);
			n++;
			v = NULL;
		}
		if (n == 0) {
			fprintf(stderr, PX_PROG ": %s needs at least one host:port\n", flag);
			return 2;
		}
	}
	return 0;
}

/* The admin key: the file's first line, else ADMIN_API_KEY.  Returns 0 or 2 (one line said). */
static int px_load_key(struct px *px)
{
	const char *f = px->cfg.admin_api_key_file, *e = getenv("ADMIN_API_KEY");
	char buf[1024];
	FILE *fp;

	if (f && *f) {
		fp = fopen(f, "r");
		if (fp == NULL || fgets(buf, sizeof(buf), fp) == NULL) {
			fprintf(stderr, PX_PROG ": --admin_api_key_file '%s': cannot read a key: %s\n",
				f, fp ? "empty file" : strerror(errno));
			if (fp)
				fclose(fp);
			return 2;
		}
		fclose(fp);
		buf[strcspn(buf, "\r\n")] = 0;
		if (!buf[0]) {
			fprintf(stderr, PX_PROG ": --admin_api_key_file '%s': the key is empty\n", f);
			return 2;
		}
		px->admin_key = mc_xstrdup(buf);
	} else if (e && *e) {
		px->admin_key = mc_xstrdup(e);
	}
	return 0;
}

static int px_parse(struct px *px, int argc, char **argv)
{
	char err[512];
	char **rest = mc_xcalloc((size_t)argc + 1, sizeof(char *));
	int n_rest = 0, next, rc = 2;

	if (mc_opts_defaults(px_opts, &px->cfg) != 0) {
		fprintf(stderr, PX_PROG ": bad built-in default\n");
		goto out;
	}
	if (px_parse_lists(&px->cfg, argc, argv, rest, &n_rest) != 0)
		goto out;
	next = n_rest;
	if (mc_opts_parse_argv(px_opts, &px->cfg, n_rest, rest, NULL, &next, err, sizeof(err))) {
		fprintf(stderr, PX_PROG ": %s\n", err);
		goto out;
	}
	if (next != n_rest) {
		fprintf(stderr, PX_PROG ": unexpected argument '%s'\n", rest[next]);
		goto out;
	}
	if (mc_log_set_level_name(px->cfg.log_level) != 0) {
		fprintf(stderr, PX_PROG ": --log-level must be DEBUG, INFO, WARNING or ERROR, not '%s'\n",
			px->cfg.log_level);
		goto out;
	}
	px->policy = !strcmp(px->cfg.scheduling, "kv_aware")	   ? PX_KV_AWARE
		     : !strcmp(px->cfg.scheduling, "least_loaded") ? PX_LEAST_LOADED
								   : PX_ROUND_ROBIN;
	if (px->cfg.kv_events_endpoint[0] && px->policy != PX_KV_AWARE)
		mc_log_warn("--kv_events_endpoint is used by --scheduling=kv_aware only");
	if (px->cfg.kv_pool_skip_prefill && !px->cfg.kv_events_endpoint[0]) {
		fprintf(stderr, PX_PROG ": --kv_pool_skip_prefill needs --kv_events_endpoint\n");
		goto out;
	}
	if (px->cfg.kv_events_endpoint[0] && px->policy == PX_KV_AWARE && px_kvpool_init(px) != 0)
		goto out;
	rc = px_load_key(px);
out:
	free(rest);
	return rc;
}

static void px_on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct px *px = arg;

	(void)what;
	mc_log_notice("signal %d: shutting down", (int)sig);
	mc_sd_notify("STOPPING=1");
	event_base_loopexit(px->base, NULL);
}

static int px_start(struct px *px, struct event **sigs)
{
	size_t i;
	int r, rc;

	px->base = event_base_new();
	if (px->base == NULL) {
		mc_log_err("cannot create the event loop");
		return -1;
	}
	/* Names other than localhost are resolved without blocking the loop. */
	px->dns = evdns_base_new(px->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
						   EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (px->dns == NULL)
		px->dns = evdns_base_new(px->base, 0);
	for (r = 0; r < 2; r++) {
		char **l = r == PX_PREFILL ? px->cfg.prefill : px->cfg.decode;
		size_t n = r == PX_PREFILL ? px->cfg.n_prefill : px->cfg.n_decode;

		for (i = 0; i < n; i++) {
			rc = px_pool_add(px, (enum px_role)r, l[i], 0);
			if (rc == -EEXIST)
				mc_log_warn("%s listed twice: once is enough", l[i]);
			else if (rc != 0) {
				mc_log_err("cannot add instance %s: %s", l[i], strerror(-rc));
				return -1;
			}
		}
	}
	rc = px_http_start(px);
	if (rc != 0) {
		mc_log_err("cannot listen on %s:%lld: %s", px->cfg.host, (long long)px->cfg.port,
			   strerror(-rc));
		return -1;
	}
	if (px->kvpool && px_kvsub_start(px) != 0)
		return -1;
	if (px_health_start(px) != 0) {
		mc_log_err("cannot start the health checks");
		return -1;
	}
	sigs[0] = evsignal_new(px->base, SIGTERM, px_on_signal, px);
	sigs[1] = evsignal_new(px->base, SIGINT, px_on_signal, px);
	if (!sigs[0] || !sigs[1] || event_add(sigs[0], NULL) || event_add(sigs[1], NULL)) {
		mc_log_err("cannot watch SIGTERM and SIGINT");
		return -1;
	}
	if (px->cfg.n_prefill == 0 || px->cfg.n_decode == 0)
		mc_log_warn("no %s instance given: completions answer 503 until one is added",
			    px->cfg.n_prefill == 0 ? "prefill" : "decode");
	if (px->admin_key == NULL)
		mc_log_warn("no admin key (ADMIN_API_KEY or --admin_api_key_file): "
			    "/instances/add and /instances/remove answer 503");
	mc_log_notice("proxy on %s:%u: %zu prefill, %zu decode instances, scheduling %s, "
		      "model '%s'", px->cfg.host, px->bound_port, px->pool[PX_PREFILL].n,
		      px->pool[PX_DECODE].n, px->cfg.scheduling, px->cfg.model);
	return 0;
}

static void px_stop(struct px *px, struct event **sigs)
{
	if (sigs[0])
		event_free(sigs[0]);
	if (sigs[1])
		event_free(sigs[1]);
	if (px->http)
		evhttp_free(px->http);
	mc_http_guard_free(px->guard);	/* after evhttp_free: see http_guard.h */
	px_pool_free_all(px);
	px_kvsub_stop(px);
	if (px->dns)
		evdns_base_free(px->dns, 0);
	if (px->base)
		event_base_free(px->base);
}

int main(int argc, char **argv)
{
	struct px px;
	struct event *sigs[2] = { NULL, NULL };
	size_t i;
	int status;

	memset(&px, 0, sizeof(px));
	mc_log_set_ident(PX_PROG);
	mc_log_use_default_sink();
	if (mc_opts_wants(argc, argv, "help")) {
		px_usage(stdout);
		return 0;
	}
	if (mc_opts_wants(argc, argv, "version")) {
		printf(PX_PROG " %s\n", PACKAGE_VERSION);
		return 0;
	}
	status = px_parse(&px, argc, argv);
	if (status != 0)
		goto free_cfg;
	if (px.cfg.check_config) {
		printf(PX_PROG ": configuration is valid\n");
		goto free_cfg;
	}
	signal(SIGPIPE, SIG_IGN);
	status = 1;
	if (px_start(&px, sigs) != 0)
		goto stop;
	mc_sd_notify("READY=1");
	if (event_base_dispatch(px.base) == 0)
		status = 0;
	else
		mc_log_err("event loop failed");
stop:
	px_stop(&px, sigs);
free_cfg:
	for (i = 0; i < px.cfg.n_prefill; i++)
		free(px.cfg.prefill[i]);
	for (i = 0; i < px.cfg.n_decode; i++)
		free(px.cfg.decode[i]);
	free(px.cfg.prefill);
	free(px.cfg.decode);
	free(px.admin_key);
	px_kvpool_free(&px);
	mc_opts_free(px_opts, &px.cfg);
	return status;
}
