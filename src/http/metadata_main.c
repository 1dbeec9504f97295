/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_http_metadata_server: the transfer engine's HTTP metadata service (metadata_server.h)
 * alone on its own loop.  Flags follow upstream's Python server (--port, --host, --log-level)
 * plus the size bounds.  Exit status: 0 after SIGTERM/SIGINT, 1 when the service cannot start,
 * 2 for a bad command line.  Single-threaded.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "common/log.h"
#include "http/metadata_server.h"
#include "common/auth.h"
#include "reactor/options.h"
#include "reactor/tls.h"
#include "reactor/sd_notify.h"

#define MC_META_PROG "mooncake_http_metadata_server"

struct mc_meta_cfg {
	int64_t port;
	char *host;
	char *log_level;
	uint64_t max_key_bytes;
	uint64_t max_value_bytes;
	int64_t max_keys;
	char *cluster_secret_file;
	int auth_http_reads;
	char *tls_cert_file;
	char *tls_key_file;
	char *tls_ca_file;
	int64_t max_connections;
	int64_t max_connections_per_peer;
	int64_t request_timeout_ms;
	int check_config;
};

/* The daemon's context: configuration and everything the loop owns. */
struct mc_meta_daemon {
	struct mc_meta_cfg cfg;
	struct mc_meta_server_opts env;	/* limits and token from the environment */
	struct event_base *base;
	struct mc_meta_server *srv;
	struct event *sig_term;
	struct event *sig_int;
	struct event *sig_hup;
	struct mc_auth *auth;
	struct mc_tls *tls;
};

#define O(f) offsetof(struct mc_meta_cfg, f)
static const struct mc_opt mc_meta_opts[] = {
	{ "port", NULL, NULL, MC_OPT_INT, O(port), "8080", 0, 65535,
	  "listen port (0: any free port, logged)" },
	{ "host", NULL, NULL, MC_OPT_HOST, O(host), "0.0.0.0", 0, -1, "listen address" },
	{ "log-level", "log_level", NULL, MC_OPT_CHOICE, O(log_level),
	  "INFO|DEBUG|WARNING|WARN|ERROR", 0, -1,
	  "DEBUG, INFO, WARNING or ERROR" },
	{ "max_key_bytes", NULL, NULL, MC_OPT_SIZE, O(max_key_bytes), "1024", 1, 1048576,
	  "longest key accepted, after URL-decoding (400 above)" },
	{ "max_value_bytes", NULL, NULL, MC_OPT_SIZE, O(max_value_bytes), "1MB", 1, 1073741824.0,
	  "largest value accepted (413 above; MC_METADATA_MAX_BODY_BYTES)" },
	{ "max_keys", NULL, NULL, MC_OPT_INT, O(max_keys), "65536", 1, 1000000000,
	  "keys stored at most (507 for a new key above; MC_METADATA_MAX_KEYS)" },
	{ "cluster_secret_file", NULL, NULL, MC_OPT_PATH, O(cluster_secret_file), "", 0, -1,
	  "file holding the cluster secret: PUT and DELETE must be signed with it (empty: an open "
	  "service)" },
	{ "auth_http_reads", NULL, NULL, MC_OPT_BOOL, O(auth_http_reads), "false", 0, -1,
	  "with a cluster secret, GET /metadata needs it too" },
	{ "tls_cert_file", NULL, NULL, MC_OPT_PATH, O(tls_cert_file), "", 0, -1,
	  "PEM certificate (chain): with --tls_key_file the service speaks HTTPS" },
	{ "tls_key_file", NULL, NULL, MC_OPT_PATH, O(tls_key_file), "", 0, -1,
	  "PEM private key of --tls_cert_file" },
	{ "tls_ca_file", NULL, NULL, MC_OPT_PATH, O(tls_ca_file), "", 0, -1,
	  "PEM CA certificates: clients must present a certificate they sign (mutual TLS)" },
	{ "max_connections", NULL, NULL, MC_OPT_INT, O(max_connections), "1024", 1, 1000000,
	  "connections served at once; more are closed at once (counted on /metrics)" },
	{ "max_connections_per_peer", NULL, NULL, MC_OPT_INT, O(max_connections_per_peer), "64",
	  1, 1000000, "connections from one address at once" },
	{ "request_timeout_ms", NULL, NULL, MC_OPT_INT, O(request_timeout_ms), "10000", 1,
	  86400000, "a request must arrive whole within this time of the connection's start or "
	  "of the previous reply, or the connection is closed (slow and idle clients)" },
	{ "check_config", NULL, NULL, MC_OPT_BOOL, O(check_config), "false", 0, -1,
	  "validate the flags, then exit (0 valid, 2 invalid)" },
	MC_OPT_END,
};

static void mc_meta_usage(FILE *out)
{
	fprintf(out, "usage: " MC_META_PROG " [--flag=value | --flag value ...]\n"
		     "The transfer engine's HTTP metadata key-value service "
		     "(GET/PUT/DELETE /metadata?key=K, GET /health).\n\nFlags:\n");
	mc_opts_help(mc_meta_opts, out);
	fprintf(out, "  --help\n      print this help and exit\n"
		     "  --version\n      print the version and exit\n");
}

/* Parse argv into d->cfg.  Returns 0, or 2 (the exit status) after a message on stderr. */
static int mc_meta_parse(struct mc_meta_daemon *d, int argc, char **argv)
{
	char err[512];
	int next = argc;

	if (mc_opts_defaults(mc_meta_opts, &d->cfg) != 0) {
		fprintf(stderr, MC_META_PROG ": bad built-in default\n");
		return 2;
	}
	/* Upstream's variables replace the defaults; flags given replace them in turn. */
	d->env.max_value_bytes = (size_t)d->cfg.max_value_bytes;
	d->env.max_keys = (size_t)d->cfg.max_keys;
	if (mc_meta_server_opts_env(&d->env, "127.0.0.1", err, sizeof(err)) != 0) {
		fprintf(stderr, MC_META_PROG ": %s\n", err);
		return 2;
	}
	d->cfg.max_value_bytes = d->env.max_value_bytes;
	d->cfg.max_keys = (int64_t)d->env.max_keys;
	if (mc_opts_parse_argv(mc_meta_opts, &d->cfg, argc, argv, NULL, &next, err,
			       sizeof(err)) != 0) {
		fprintf(stderr, MC_META_PROG ": %s\n", err);
		return 2;
	}
	if (next != argc) {
		fprintf(stderr, MC_META_PROG ": unexpected argument '%s'\n", argv[next]);
		return 2;
	}
	{
		char why[400];

		if (mc_auth_load(d->cfg.cluster_secret_file, &d->auth, why, sizeof(why)) != 0) {
			fprintf(stderr, MC_META_PROG ": invalid value '%s' for --cluster_secret_file: "
					"%s\n", d->cfg.cluster_secret_file, why);
			return 2;
		}
	}
	if (mc_opts_check_readable("tls_cert_file", d->cfg.tls_cert_file, err, sizeof(err)) ||
	    mc_opts_check_readable("tls_key_file", d->cfg.tls_key_file, err, sizeof(err)) ||
	    mc_opts_check_readable("tls_ca_file", d->cfg.tls_ca_file, err, sizeof(err))) {
		fprintf(stderr, MC_META_PROG ": %s\n", err);
		return 2;
	}
	if ((d->cfg.tls_cert_file[0] || d->cfg.tls_key_file[0] || d->cfg.tls_ca_file[0])) {
		char why[400];

		if (mc_tls_server_new(d->cfg.tls_cert_file, d->cfg.tls_key_file,
				      d->cfg.tls_ca_file, &d->tls, why, sizeof(why)) != 0) {
			fprintf(stderr, MC_META_PROG ": invalid value '%s' for --%s: %s\n",
				d->cfg.tls_cert_file[0] ? d->cfg.tls_cert_file
							: d->cfg.tls_key_file,
				d->cfg.tls_cert_file[0] ? "tls_cert_file" : "tls_key_file", why);
			return 2;
		}
	}
	if (mc_log_set_level_name(d->cfg.log_level) != 0) {
		fprintf(stderr, MC_META_PROG ": --log-level must be DEBUG, INFO, WARNING or ERROR, "
				"not '%s'\n", d->cfg.log_level);
		return 2;
	}
	/* Now that the address is known: no token (or cluster secret), no other host than this
	 * one. */
	d->env.auth = d->auth;
	if (mc_meta_server_opts_env(&d->env, d->cfg.host, err, sizeof(err)) != 0) {
		fprintf(stderr, MC_META_PROG ": %s\n", err);
		return 2;
	}
	return 0;
}

static void mc_meta_on_hup(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	(void)arg;
	mc_log_notice("SIGHUP: nothing to reload (all settings are flags; restart to change them)");
}

static void mc_meta_on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct mc_meta_daemon *d = arg;

	mc_log_notice("signal %d: shutting down", (int)sig);
	mc_sd_notify("STOPPING=1");
	event_base_loopexit(d->base, NULL);
}

/* Build the loop, the service and the signal events.  Returns 0 or -1 (logged). */
static int mc_meta_start(struct mc_meta_daemon *d)
{
	struct mc_meta_server_opts mo = {
		.max_key_bytes = (size_t)d->cfg.max_key_bytes,
		.max_value_bytes = (size_t)d->cfg.max_value_bytes,
		.max_keys = (size_t)d->cfg.max_keys,
		.max_total_bytes = d->env.max_total_bytes,
		.max_concurrent_puts = d->env.max_concurrent_puts,
		.token = d->env.token,
		.auth = d->auth,
		.auth_reads = d->cfg.auth_http_reads,
		.tls = d->tls,
		.max_connections = (unsigned)d->cfg.max_connections,
		.max_connections_per_peer = (unsigned)d->cfg.max_connections_per_peer,
		.request_timeout_ms = (unsigned)d->cfg.request_timeout_ms,
	};
	int rc = 0;

	d->base = event_base_new();
	if (d->base == NULL) {
		mc_log_err("cannot create the event loop");
		return -1;
	}
	d->srv = mc_meta_server_new(d->base, d->cfg.host, (uint16_t)d->cfg.port, &mo, &rc);
	if (d->srv == NULL) {
		mc_log_err("cannot listen on %s:%lld: %s", d->cfg.host, (long long)d->cfg.port,
			   strerror(-rc));
		return -1;
	}
	d->sig_term = evsignal_new(d->base, SIGTERM, mc_meta_on_signal, d);
	d->sig_int = evsignal_new(d->base, SIGINT, mc_meta_on_signal, d);
	/* Nothing of this daemon can change while it runs: SIGHUP is logged, not fatal. */
	d->sig_hup = evsignal_new(d->base, SIGHUP, mc_meta_on_hup, d);
	if (d->sig_hup == NULL || event_add(d->sig_hup, NULL) != 0) {
		mc_log_err("cannot watch SIGHUP");
		return -1;
	}
	if (d->sig_term == NULL || d->sig_int == NULL || event_add(d->sig_term, NULL) != 0 ||
	    event_add(d->sig_int, NULL) != 0) {
		mc_log_err("cannot watch SIGTERM and SIGINT");
		return -1;
	}
	mc_auth_announce(d->auth, "can change the cluster's transfer-engine descriptors");
	if (d->tls)
		mc_log_notice("HTTPS (%s)%s", d->cfg.tls_cert_file,
			      d->cfg.tls_ca_file[0] ? ", client certificates required" : "");
	mc_log_notice("HTTP metadata service on %s:%u (keys up to %zu bytes, values up to %zu "
		      "bytes, at most %zu keys%s)", d->cfg.host, mc_meta_server_port(d->srv),
		      mo.max_key_bytes, mo.max_value_bytes, mo.max_keys,
		      mo.token ? ", bearer token required" : "");
	return 0;
}

/* Undo mc_meta_start(), whatever it got to. */
static void mc_meta_stop(struct mc_meta_daemon *d)
{
	if (d->sig_term)
		event_free(d->sig_term);
	if (d->sig_int)
		event_free(d->sig_int);
	if (d->sig_hup)
		event_free(d->sig_hup);
	mc_meta_server_free(d->srv);
	if (d->base)
		event_base_free(d->base);
	mc_auth_unref(d->auth);
	d->auth = NULL;
	mc_tls_free(d->tls);
	d->tls = NULL;
}

int main(int argc, char **argv)
{
	struct mc_meta_daemon d;
	int status;

	memset(&d, 0, sizeof(d));
	mc_log_set_ident(MC_META_PROG);
	mc_log_use_default_sink();
	if (mc_opts_wants(argc, argv, "help")) {
		mc_meta_usage(stdout);
		return 0;
	}
	if (mc_opts_wants(argc, argv, "version")) {
		printf(MC_META_PROG " %s\n", PACKAGE_VERSION);
		return 0;
	}
	status = mc_meta_parse(&d, argc, argv);
	if (status != 0)
		goto free_cfg;
	if (d.cfg.check_config) {
		printf(MC_META_PROG ": configuration is valid\n");
		goto free_cfg;
	}
	/* A client that goes away mid-reply must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	status = 1;
	if (mc_meta_start(&d) != 0)
		goto stop;
	mc_sd_notify("READY=1");
	if (event_base_dispatch(d.base) == 0)
		status = 0;
	else
		mc_log_err("event loop failed");
stop:
	mc_meta_stop(&d);
free_cfg:
	mc_auth_unref(d.auth);
	mc_tls_free(d.tls);
	mc_opts_free(mc_meta_opts, &d.cfg);
	return status;
}
