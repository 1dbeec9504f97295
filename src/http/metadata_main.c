/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_http_metadata_server: the transfer engine's HTTP metadata service on its own loop.
 * Flags follow upstream's Python server (--port, --host, --log-level) plus size bounds.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "common/log.h"
#include "http/metadata_server.h"
#include "reactor/options.h"
#include "reactor/sd_notify.h"

struct mc_meta_cfg {
	int64_t port;
	char *host;
	char *log_level;
	uint64_t max_key_bytes;
	uint64_t max_value_bytes;
	int64_t max_keys;
};

#define O(f) offsetof(struct mc_meta_cfg, f)
static const struct mc_opt mc_meta_opts[] = {
	{ "port", NULL, NULL, MC_OPT_INT, O(port), "8080", 0, 65535, "listen port" },
	{ "host", NULL, NULL, MC_OPT_STRING, O(host), "0.0.0.0", 0, -1, "listen address" },
	{ "log-level", "log_level", NULL, MC_OPT_STRING, O(log_level), "INFO", 0, -1,
	  "DEBUG, INFO, WARNING or ERROR" },
	{ "max_key_bytes", NULL, NULL, MC_OPT_SIZE, O(max_key_bytes), "1024", 1, 1048576,
	  "longest key accepted" },
	{ "max_value_bytes", NULL, NULL, MC_OPT_SIZE, O(max_value_bytes), "16MB", 1, 1073741824.0,
	  "largest value accepted (413 above)" },
	{ "max_keys", NULL, NULL, MC_OPT_INT, O(max_keys), "1000000", 1, 1000000000,
	  "keys stored at most (503 above)" },
	MC_OPT_END,
};

static void mc_meta_on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	mc_log_notice("signal %d: shutting down", (int)sig);
	mc_sd_notify("STOPPING=1");
	event_base_loopexit(arg, NULL);
}

int main(int argc, char **argv)
{
	struct mc_meta_cfg cfg;
	struct mc_meta_server_opts mo;
	struct mc_meta_server *srv;
	struct event_base *base;
	struct event *sterm, *sint;
	char err[512];
	int next = argc, rc;

	mc_log_set_ident("mooncake_http_metadata_server");
	mc_log_use_default_sink();
	if (mc_opts_wants(argc, argv, "help")) {
		printf("usage: mooncake_http_metadata_server [--flag=value ...]\n"
		       "The transfer engine's HTTP metadata key-value service.\n\nFlags:\n");
		mc_opts_help(mc_meta_opts, stdout);
		return 0;
	}
	if (mc_opts_wants(argc, argv, "version")) {
		printf("mooncake_http_metadata_server %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (mc_opts_defaults(mc_meta_opts, &cfg) ||
	    mc_opts_parse_argv(mc_meta_opts, &cfg, argc, argv, NULL, &next, err, sizeof(err)) ||
	    next != argc) {
		fprintf(stderr, "mooncake_http_metadata_server: %s\n",
			next != argc ? "unexpected argument" : err);
		mc_opts_free(mc_meta_opts, &cfg);
		return 2;
	}
	if (!strcasecmp(cfg.log_level, "DEBUG"))
		mc_log_set_level(MC_LOG_DEBUG);
	else if (!strcasecmp(cfg.log_level, "INFO"))
		mc_log_set_level(MC_LOG_INFO);
	else if (!strcasecmp(cfg.log_level, "WARNING") || !strcasecmp(cfg.log_level, "WARN"))
		mc_log_set_level(MC_LOG_WARN);
	else if (!strcasecmp(cfg.log_level, "ERROR"))
		mc_log_set_level(MC_LOG_ERR);
	else {
		fprintf(stderr, "mooncake_http_metadata_server: --log-level must be DEBUG, INFO, "
				"WARNING or ERROR\n");
		mc_opts_free(mc_meta_opts, &cfg);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	mo.max_key_bytes = cfg.max_key_bytes;
	mo.max_value_bytes = cfg.max_value_bytes;
	mo.max_keys = (size_t)cfg.max_keys;
	srv = mc_meta_server_new(base, cfg.host, (uint16_t)cfg.port, &mo, &rc);
	if (srv == NULL) {
		mc_log_err("cannot listen on %s:%lld: %s", cfg.host, (long long)cfg.port,
			   strerror(-rc));
		event_base_free(base);
		mc_opts_free(mc_meta_opts, &cfg);
		return 1;
	}
	mc_log_notice("HTTP metadata service on %s:%u", cfg.host, mc_meta_server_port(srv));
	sterm = evsignal_new(base, SIGTERM, mc_meta_on_signal, base);
	sint = evsignal_new(base, SIGINT, mc_meta_on_signal, base);
	event_add(sterm, NULL);
	event_add(sint, NULL);
	mc_sd_notify("READY=1");
	event_base_dispatch(base);
	event_free(sterm);
	event_free(sint);
	mc_meta_server_free(srv);
	event_base_free(base);
	mc_opts_free(mc_meta_opts, &cfg);
	return 0;
}
