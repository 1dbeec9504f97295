/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_client: a standalone process that contributes memory to the pool.  It sets up a store
 * client with a global segment and then serves reads and writes of that segment until SIGTERM or
 * SIGINT, when it unmounts and exits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/log.h"
#include "reactor/log_opts.h"
#include "reactor/options.h"
#include "reactor/sd_notify.h"
#include "segment/segmem.h"
#include "store/store.h"
#include "store/store_config.h"

struct mc_client_cfg {
	char *host;
	int64_t port;
	char *metadata_server;
	char *device_names;
	char *master_server_address;
	char *protocol;
	uint64_t global_segment_size;
	uint64_t local_buffer_size;
	int64_t threads;
	char *tenant_id;
	int enable_offload;
	char *ssd_offload_path;
	uint64_t ssd_offload_size_limit;
	int start_offload_rpc_server;
	int enable_http_server;
	int64_t http_port;
	int use_hugepage;
	char *hugepage_size;
	int hugepage_fallback;
	int populate_segment;
	char *segment_location;
	char *cluster_secret_file;
	int64_t max_connections;	/* 0: each port's default (mc_client_limits_env) */
	int64_t max_connections_per_peer;
	int64_t request_timeout_ms;
	int64_t idle_timeout_ms;
	struct mc_log_opts log;		/* glog's flags: --log_dir, --logtostderr, ... */
	int use_mmap_arena_allocator;
	uint64_t mmap_arena_pool_size;
	char *log_level;
	char *config;
	int check_config;
	int verbose;
};

#define O(f) offsetof(struct mc_client_cfg, f)
#define MC_CLIENT_MAX_SIZE 140737488355328.0	/* 128 TiB: a user address space */
static const struct mc_opt mc_client_opts[] = {
	{ "host", NULL, NULL, MC_OPT_ADDR, O(host), "0.0.0.0", 0, -1,
	  "address to serve on and advertise (a wildcard advertises the first non-loopback IPv4); "
	  "may be ip:port" },
	{ "port", NULL, NULL, MC_OPT_INT, O(port), "50052", 1, 65535,
	  "port reserved for this client; the segment name is host:port" },
	{ "metadata_server", NULL, NULL, MC_OPT_METADATA, O(metadata_server),
	  "http://127.0.0.1:8080/metadata", 0, -1, "transfer-engine metadata connection string" },
	{ "device_names", NULL, NULL, MC_OPT_NAMES, O(device_names), "", 0, -1,
	  "RDMA devices (comma-separated)" },
	{ "master_server_address", NULL, NULL, MC_OPT_MASTER, O(master_server_address),
	  "127.0.0.1:50051", 0, -1, "master RPC address" },
	{ "protocol", NULL, NULL, MC_OPT_CHOICE, O(protocol), "tcp|rdma", 0, -1,
	  "transfer protocol" },
	{ "global_segment_size", NULL, NULL, MC_OPT_SIZE, O(global_segment_size), "4 GB", 1,
	  MC_CLIENT_MAX_SIZE,
	  "memory contributed to the pool" },
	{ "local_buffer_size", NULL, NULL, MC_OPT_SIZE, O(local_buffer_size), "0", 0,
	  MC_CLIENT_MAX_SIZE,
	  "staging buffer" },
	{ "threads", NULL, NULL, MC_OPT_INT, O(threads), "1", 1, 1024,
	  "accepted for compatibility; the client is one reactor thread" },
	{ "tenant_id", NULL, NULL, MC_OPT_TOKEN, O(tenant_id), "default", 0, -1, "tenant" },
	{ "enable_offload", NULL, NULL, MC_OPT_BOOL, O(enable_offload), "false", 0, -1,
	  "contribute an SSD area (mooncake.json enable_ssd_offload)" },
	{ "ssd_offload_path", NULL, NULL, MC_OPT_PATH, O(ssd_offload_path), "", 0, -1,
	  "directory of the SSD area, or a preallocated file (default: "
	  "$MOONCAKE_OFFLOAD_FILE_STORAGE_PATH)" },
	{ "ssd_offload_size_limit", NULL, NULL, MC_OPT_SIZE, O(ssd_offload_size_limit), "0", 0, -1,
	  "bytes the SSD area may use (0: $MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES, else 2 TB, at "
	  "most 90% of its file system)" },
	{ "start_offload_rpc_server", NULL, NULL, MC_OPT_BOOL, O(start_offload_rpc_server), "true",
	  0, -1, "accepted for compatibility: SSD objects are always served on the data port" },
	{ "enable_http_server", NULL, NULL, MC_OPT_BOOL, O(enable_http_server), "false", 0, -1,
	  "serve GET /health, /metrics and /metrics/summary on --http_port" },
	{ "http_port", NULL, NULL, MC_OPT_INT, O(http_port), "9300", 1, 65535,
	  "port of the client HTTP server (with --enable_http_server)" },
	{ "use_hugepage", NULL, NULL, MC_OPT_BOOL, O(use_hugepage), "false", 0, -1,
	  "back the segment with hugetlb pages from the reserved pool (MC_STORE_USE_HUGEPAGE)" },
	{ "hugepage_size", NULL, NULL, MC_OPT_CHOICE, O(hugepage_size), "2MB|1GB", 0, -1,
	  "hugetlb page size (MC_STORE_HUGEPAGE_SIZE)" },
	{ "hugepage_fallback", NULL, NULL, MC_OPT_BOOL, O(hugepage_fallback), "false", 0, -1,
	  "use normal pages when the hugetlb pool is too small instead of refusing to start "
	  "(MC_STORE_HUGEPAGE_FALLBACK)" },
	{ "populate_segment", NULL, NULL, MC_OPT_BOOL, O(populate_segment), "true", 0, -1,
	  "allocate the segment's pages in the background after mounting, so first writes run "
	  "at memory speed; false leaves each page to its first write (MC_STORE_POPULATE)" },
	{ "segment_location", NULL, NULL, MC_OPT_TOKEN, O(segment_location), "*", 0, -1,
	  "NUMA placement of the segment: '*' (none), cpu:N, cpu:N,M, interleave, interleave:N,M "
	  "(MC_STORE_SEGMENT_LOCATION)" },
	{ "cluster_secret_file", NULL, NULL, MC_OPT_PATH, O(cluster_secret_file), "", 0, -1,
	  "file holding the cluster secret every connection proves (default: "
	  "$MOONCAKE_CLUSTER_SECRET_FILE; empty: an open cluster)" },
	{ "max_connections", NULL, NULL, MC_OPT_INT, O(max_connections), "0", 0, 1000000,
	  "connections at once on each of the data, handshake and HTTP ports (0: their defaults, "
	  "4096, 1024 and 1024, or MC_TCP_SERVER_, MC_HANDSHAKE_, MC_STORE_HTTP_MAX_CONNECTIONS)" },
	{ "max_connections_per_peer", NULL, NULL, MC_OPT_INT, O(max_connections_per_peer), "0", 0,
	  1000000, "connections from one address at once on each port (0: 256, 64 and 64, or "
	  "the ports' *_MAX_CONNECTIONS_PER_PEER)" },
	{ "request_timeout_ms", NULL, NULL, MC_OPT_INT, O(request_timeout_ms), "0", 0, 86400000,
	  "a request (its header; a payload must keep moving) must arrive in this time or the "
	  "connection is closed (0: 10000, 5000 and 10000, or the ports' *_REQUEST_TIMEOUT_MS)" },
	{ "idle_timeout_ms", NULL, NULL, MC_OPT_INT, O(idle_timeout_ms), "0", 0, 86400000,
	  "data connections with no request for this long are closed (0: never, or "
	  "MC_TCP_SERVER_IDLE_TIMEOUT_MS; peers reconnect when they need to)" },
	MC_LOG_OPTS(O(log)),
	{ "use_mmap_arena_allocator", NULL, NULL, MC_OPT_BOOL, O(use_mmap_arena_allocator),
	  "false", 0, -1, "accepted for compatibility: each segment is one memfd mapping reserved "
	  "without committing pages, which is what upstream's arena provides" },
	{ "mmap_arena_pool_size", NULL, NULL, MC_OPT_SIZE, O(mmap_arena_pool_size), "8589934592",
	  0, -1, "accepted for compatibility with --use_mmap_arena_allocator" },
	{ "log_level", NULL, NULL, MC_OPT_CHOICE, O(log_level), "info|error|warn|debug", 0, -1,
	  "error, warn, info or debug" },
	{ "config", NULL, NULL, MC_OPT_PATH, O(config), "", 0, -1,
	  "mooncake.json (default: $MOONCAKE_CONFIG_PATH); flags given explicitly win" },
	{ "check_config", NULL, NULL, MC_OPT_BOOL, O(check_config), "false", 0, -1,
	  "validate flags and configuration, then exit (0 valid, 2 invalid)" },
	{ "v", NULL, NULL, MC_OPT_BOOL, O(verbose), "false", 0, 9,
	  "debug logging (-v); glog's --v=N: any N > 0 turns it on" },
	MC_OPT_END,
};

static volatile sig_atomic_t mc_client_stop, mc_client_hup;

/* The connection-limit flags given (non-zero) become the variables of the ports the store
 * library opens: MC_TCP_SERVER_* (data), MC_HANDSHAKE_* (handshake) and MC_STORE_HTTP_*
 * (--enable_http_server); a flag wins over the environment. */
static void mc_client_limits_env(const struct mc_client_cfg *cfg)
{
	static const char *const ports[] = { "MC_TCP_SERVER", "MC_HANDSHAKE", "MC_STORE_HTTP" };
	const struct {
		const char *suffix;
		int64_t v;
	} set[] = {
		{ "MAX_CONNECTIONS", cfg->max_connections },
		{ "MAX_CONNECTIONS_PER_PEER", cfg->max_connections_per_peer },
		{ "REQUEST_TIMEOUT_MS", cfg->request_timeout_ms },
	};
	char name[64], val[24];
	size_t i, k;

	for (i = 0; i < sizeof(set) / sizeof(set[0]); i++)
		for (k = 0; k < sizeof(ports) / sizeof(ports[0]) && set[i].v > 0; k++) {
			snprintf(name, sizeof(name), "%s_%s", ports[k], set[i].suffix);
			snprintf(val, sizeof(val), "%lld", (long long)set[i].v);
			setenv(name, val, 1);
		}
	if (cfg->idle_timeout_ms > 0) {
		snprintf(val, sizeof(val), "%lld", (long long)cfg->idle_timeout_ms);
		setenv("MC_TCP_SERVER_IDLE_TIMEOUT_MS", val, 1);
	}
}

/* Dummy clients on this host (setup_dummy) ask this socket how to reach the cluster. */
struct mc_dummy_srv {
	int fd;
	struct mc_auth *auth;	/* the cluster secret a dummy proves first (NULL: none) */
	char reply[4096];
};

/* Answer each same-uid connection with the cluster's addresses and this client's segment, as
 * one JSON line, then close it.  Runs in its own thread; blocking accept is fine here. */
static void *mc_client_dummy_main(void *arg)
{
	struct mc_dummy_srv *d = arg;

	for (;;) {
		int c = accept4(d->fd, NULL, NULL, SOCK_CLOEXEC);
		struct ucred cred;
		socklen_t cl = sizeof(cred);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break;
		}
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.uid == getuid()) {
			struct mc_auth_hs hs;
			char peer[48];
			int rc = 0;

			if (d->auth && ((rc = mc_auth_hs_init(&hs, d->auth, MC_AUTH_SERVER)) != 0 ||
					(rc = mc_auth_hs_run(&hs, c, mc_auth_timeout_ms())) != 0)) {
				snprintf(peer, sizeof(peer), "pid %d", (int)cred.pid);
				mc_auth_hs_refused(d->auth, "dummy client socket", peer, rc, &hs);
			} else if (send(c, d->reply, strlen(d->reply), MSG_NOSIGNAL) < 0)
				mc_log_warn("dummy client: reply failed: %s", strerror(errno));
		} else {
			mc_log_warn("dummy client of another uid refused");
		}
		close(c);
	}
	return NULL;
}

/* Listen on upstream's abstract socket @mooncake_client_<port>.sock. */
static int mc_client_dummy_start(struct mc_dummy_srv *d, int64_t port, const char *master,
				 const char *meta, const char *segment, const char *protocol,
				 const char *devices)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	pthread_t tid;
	int n;

	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "mooncake_client_%lld.sock",
		     (long long)port);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	if (strpbrk(master, "\"\\") || strpbrk(meta, "\"\\") || strpbrk(segment, "\"\\") ||
	    strpbrk(devices, "\"\\")) {
		mc_log_warn("dummy clients: an address or device name holds '\"' or '\\'; "
			    "not serving @mooncake_client_%lld.sock", (long long)port);
		return -1;
	}
	n = snprintf(d->reply, sizeof(d->reply),
		 "{\"master_server_address\":\"%s\",\"metadata_server\":\"%s\","
		 "\"segment\":\"%s\",\"protocol\":\"%s\",\"rdma_devices\":\"%s\"}\n", master,
		 meta, segment, protocol, devices);
	if (n < 0 || (size_t)n >= sizeof(d->reply)) {
		mc_log_warn("dummy clients: the reply does not fit %zu bytes; not serving "
			    "@mooncake_client_%lld.sock", sizeof(d->reply), (long long)port);
		return -1;
	}
	d->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (d->fd < 0 || bind(d->fd, (struct sockaddr *)&sa, len) || listen(d->fd, 64) ||
	    pthread_create(&tid, NULL, mc_client_dummy_main, d)) {
		mc_log_warn("dummy clients: cannot listen on @mooncake_client_%lld.sock: %s",
			    (long long)port, strerror(errno));
		return -1;
	}
	pthread_detach(tid);
	return 0;
}

static void mc_client_on_signal(int sig)
{
	if (sig == SIGHUP)
		mc_client_hup = 1;
	else
		mc_client_stop = 1;
}

/* First non-loopback IPv4 address, or 127.0.0.1. */
static void mc_client_default_ip(char *out, size_t n)
{
	struct ifaddrs *ifs, *i;

	snprintf(out, n, "127.0.0.1");
	if (getifaddrs(&ifs))
		return;
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) >> 24 != 127) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out,
				  (socklen_t)n);
			break;
		}
	freeifaddrs(ifs);
}

/* Apply mooncake.json / MOONCAKE_* values to flags not given on the command line. */
static int mc_client_apply_file(struct mc_client_cfg *cfg, const struct mc_opts_state *st,
				char *err, size_t n)
{
	struct mc_store_config sc;
	const char *path = cfg->config[0] ? cfg->config : getenv("MOONCAKE_CONFIG_PATH");
	char num[32];
	int rc;

	if (path == NULL || *path == '\0')
		return 0;
	if (access(path, R_OK)) {
		snprintf(err, n, "invalid value '%s' for %s: %s", path,
			 cfg->config[0] ? "--config" : "environment variable MOONCAKE_CONFIG_PATH",
			 strerror(errno));
		return -1;
	}
	rc = mc_store_config_load(&sc, path, err, n);
	if (rc)
		return rc;
	/* Every value of the file was checked by the loader, also those the command line
	 * overrides; what the daemon needs beyond that (a segment of at least one byte) is
	 * checked against the flag's bounds, naming the file's key. */
#define SET(name, key, val)                                                                \
	do {                                                                               \
		const struct mc_opt *o_ = mc_opts_find(mc_client_opts, name);              \
		char label_[1200];                                                         \
		snprintf(label_, sizeof(label_), "key '%s' in %s", key, path);             \
		if (mc_opts_check_value(o_, val, label_, err, n))                          \
			return -1;                                                         \
		if (!st->cli_set[o_ - mc_client_opts] && mc_opts_set(o_, cfg, val, err, n)) \
			return -1;                                                         \
	} while (0)
	SET("host", "local_hostname", sc.local_hostname);
	SET("metadata_server", "metadata_server", sc.metadata_server);
	SET("master_server_address", "master_server_address", sc.master_server_address);
	SET("protocol", "protocol", sc.protocol);
	SET("device_names", "device_name", sc.device_name);
	SET("tenant_id", "tenant_id", sc.tenant_id);
	if (sc.enable_ssd_offload)
		SET("enable_offload", "enable_ssd_offload", "true");
	if (sc.ssd_offload_path[0])
		SET("ssd_offload_path", "ssd_offload_path", sc.ssd_offload_path);
	snprintf(num, sizeof(num), "%llu", (unsigned long long)sc.global_segment_size);
	SET("global_segment_size", "global_segment_size", num);
	SET("use_hugepage", "use_hugepage", sc.use_hugepage ? "true" : "false");
	SET("hugepage_size", "hugepage_size", sc.hugepage_size);
	SET("hugepage_fallback", "hugepage_fallback", sc.hugepage_fallback ? "true" : "false");
	SET("populate_segment", "populate_segment", sc.populate_segment ? "true" : "false");
	SET("segment_location", "segment_location", sc.segment_location);
	if (sc.cluster_secret_file[0])
		SET("cluster_secret_file", "cluster_secret_file", sc.cluster_secret_file);
#undef SET
	return 0;
}

/* The segment memory settings: a flag given on the command line wins over its MC_STORE_*
 * variable, which wins over mooncake.json and the default.  0 or -1 with err set. */
static int mc_client_mem_opts(const struct mc_client_cfg *cfg, const struct mc_opts_state *st,
			      struct mc_segmem_opts *o, char *err, size_t n)
{
#define FROM_FLAG(name, var)                                                               \
	(st->cli_set[mc_opts_find(mc_client_opts, name) - mc_client_opts] || getenv(var) == NULL || \
	 *getenv(var) == '\0')
	struct mc_segmem_opts env;
	char e[400];

	if (mc_segmem_opts_env(&env, err, n))
		return -1;
	*o = env;
	if (FROM_FLAG("use_hugepage", "MC_STORE_USE_HUGEPAGE") ? cfg->use_hugepage
							      : env.hugepage_size != 0) {
		if (FROM_FLAG("hugepage_size", "MC_STORE_HUGEPAGE_SIZE"))
			(void)mc_segmem_parse_hugepage_size(cfg->hugepage_size, &o->hugepage_size);
		else if (env.hugepage_size == 0)
			(void)mc_segmem_parse_hugepage_size(getenv("MC_STORE_HUGEPAGE_SIZE"),
							    &o->hugepage_size);
	} else {
		o->hugepage_size = 0;
	}
	if (FROM_FLAG("hugepage_fallback", "MC_STORE_HUGEPAGE_FALLBACK"))
		o->hugepage_fallback = cfg->hugepage_fallback;
	if (FROM_FLAG("populate_segment", "MC_STORE_POPULATE"))
		o->populate = cfg->populate_segment;
	if (FROM_FLAG("segment_location", "MC_STORE_SEGMENT_LOCATION") &&
	    mc_segmem_parse_location(cfg->segment_location, o, e, sizeof(e))) {
		snprintf(err, n, "--segment_location: %s", e);
		return -1;
	}
	return 0;
#undef FROM_FLAG
}

static int mc_client_configure(struct mc_client_cfg *cfg, int argc, char **argv,
			       struct mc_segmem_opts *mem)
{
	struct mc_opts_state st;
	char err[512] = "";
	int next, rc = -1;

	if (mc_opts_defaults(mc_client_opts, cfg) || mc_opts_state_init(&st, mc_client_opts))
		return -1;
	if (mc_opts_check_env(mc_opts_env_store, err, sizeof(err)))
		goto out;
	if (mc_opts_parse_argv(mc_client_opts, cfg, argc, argv, &st, &next, err, sizeof(err)))
		goto out;
	if (next != argc) {
		snprintf(err, sizeof(err), "unexpected argument '%s'", argv[next]);
		goto out;
	}
	if (mc_client_apply_file(cfg, &st, err, sizeof(err)))
		goto out;
	if (cfg->enable_offload && !cfg->ssd_offload_path[0] &&
	    !getenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH")) {
		snprintf(err, sizeof(err), "--enable_offload needs --ssd_offload_path or "
					   "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH");
		goto out;
	}
	if (mc_client_mem_opts(cfg, &st, mem, err, sizeof(err)))
		goto out;
	{
		struct mc_auth *a = NULL;
		const char *path = cfg->cluster_secret_file[0] ? cfg->cluster_secret_file
							       : getenv(MC_AUTH_SECRET_ENV);
		char why[400];

		if (mc_auth_load(path, &a, why, sizeof(why)) != 0) {
			snprintf(err, sizeof(err), "invalid value '%s' for %s: %s", path,
				 cfg->cluster_secret_file[0]
					 ? "--cluster_secret_file"
					 : "environment variable " MC_AUTH_SECRET_ENV,
				 why);
			goto out;
		}
		mc_auth_unref(a);
	}
	if (mc_log_opts_check(&cfg->log, err, sizeof(err)))
		goto out;
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "mooncake_client: %s\n", err);
	mc_opts_state_fini(&st);
	return rc;
}

int main(int argc, char **argv)
{
	struct mc_client_cfg cfg;
	struct mc_segmem_opts mem;
	struct mc_store *st;
	char host[300], name[320], ip[64];
	struct sigaction sa;
	int rc, port = 0;

	mc_log_set_ident("mooncake_client");
	mc_log_use_default_sink();
	if (mc_opts_wants(argc, argv, "help")) {
		printf("usage: mooncake_client [--flag=value ...]\n"
		       "Contributes memory to a mooncake store cluster.\n\nFlags:\n");
		mc_opts_help(mc_client_opts, stdout);
		return 0;
	}
	if (mc_opts_wants(argc, argv, "version")) {
		printf("mooncake_client %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (mc_client_configure(&cfg, argc, argv, &mem)) {
		mc_opts_free(mc_client_opts, &cfg);
		return 2;
	}
	if (cfg.check_config) {
		printf("mooncake_client: configuration is valid\n");
		mc_opts_free(mc_client_opts, &cfg);
		return 0;
	}
	if (mc_log_opts_apply(&cfg.log, "mooncake_client",
			      cfg.verbose ? MC_LOG_DEBUG
			      : !strcmp(cfg.log_level, "error") ? MC_LOG_ERR
			      : !strcmp(cfg.log_level, "warn") ? MC_LOG_WARN
			      : !strcmp(cfg.log_level, "debug") ? MC_LOG_DEBUG
								: MC_LOG_INFO)) {
		mc_opts_free(mc_client_opts, &cfg);
		return 1;
	}
	/* --host may carry the port; a wildcard host advertises a reachable address. */
	if (mc_opts_split_addr(cfg.host, host, sizeof(host), &port) == 0 && port > 0)
		cfg.port = port;
	if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::")) {
		mc_client_default_ip(ip, sizeof(ip));
		snprintf(host, sizeof(host), "%s", ip);
	}
	snprintf(name, sizeof(name), "%s:%lld", host, (long long)cfg.port);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = mc_client_on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	st = calloc(1, sizeof(*st));
	pthread_mutex_init(&st->mu, NULL);
	st->reserve_fd = -1;
	st->ssd_enable = cfg.enable_offload;
	st->http_port = cfg.enable_http_server ? (int)cfg.http_port : 0;
	snprintf(st->tenant_id, sizeof(st->tenant_id), "%s", cfg.tenant_id);
	snprintf(st->ssd_path, sizeof(st->ssd_path), "%s", cfg.ssd_offload_path);
	st->ssd_limit = cfg.ssd_offload_size_limit;
	st->memopts = mem;
	st->memopts_set = 1;
	/* It contributes memory and writes into peers only for copy/move tasks: mapping every
	 * same-host peer's segment ahead would cost it page tables (2 MiB per GiB) for nothing. */
	st->no_peer_open = 1;
	snprintf(st->cluster_secret_file, sizeof(st->cluster_secret_file), "%s",
		 cfg.cluster_secret_file);
	mc_client_limits_env(&cfg);
	/* Threads started from here on (the store's loop, the populating one) run on the CPUs of
	 * the segment's nodes. */
	rc = mc_segmem_bind_cpus(&mem);
	if (rc)
		mc_log_warn("segment_location %s: cannot run on its nodes' CPUs: %s", mem.location,
			    strerror(-rc));
	rc = mc_store_setup(st, name, cfg.metadata_server, cfg.global_segment_size,
			    cfg.local_buffer_size, cfg.protocol, cfg.device_names,
			    cfg.master_server_address);
	if (rc) {
		mc_log_err("setup against master %s failed: %d", cfg.master_server_address, rc);
		pthread_mutex_destroy(&st->mu);
		free(st);
		mc_opts_free(mc_client_opts, &cfg);
		return 1;
	}
	mc_auth_announce(st->auth, "can read and write its segment");
	mc_log_notice("serving segment %s (%llu bytes) at %s", st->hostname,
		      (unsigned long long)cfg.global_segment_size, st->endpoint);
	if (st->nsegs && st->segs[0].mem)
		mc_log_info("segment memory: %s pages%s%s, %s", st->segs[0].mem->hugetlb
			    ? (st->segs[0].mem->page_size == (1ull << 30) ? "1 GB hugetlb"
									 : "2 MB hugetlb")
			    : "normal", mem.location[0] ? ", location " : "", mem.location,
			    mem.populate ? "populating in the background" : "population off");
	{
		static struct mc_dummy_srv dummy;

		dummy.auth = st->auth;

		/* st->protocol is rdma only when this client's engine runs: dummies then run
		 * their own on the same NICs, so their buffers are registered and ride rdma. */
		if (mc_client_dummy_start(&dummy, cfg.port, cfg.master_server_address,
					  cfg.metadata_server, st->hostname, st->protocol,
					  !strcmp(st->protocol, "rdma") ? cfg.device_names : "") == 0)
			mc_log_notice("serving dummy clients on @mooncake_client_%lld.sock",
				      (long long)cfg.port);
	}
	mc_sd_notify("READY=1");
	while (!mc_client_stop) {
		pause();
		if (mc_client_hup) {
			/* Segment, addresses and sizes are fixed for the process's life. */
			mc_client_hup = 0;
			mc_log_notice("SIGHUP: nothing can change while running; restart to change "
				      "the segment, the master or the sizes");
		}
	}
	mc_sd_notify("STOPPING=1");
	mc_log_notice("shutting down");
	mc_store_teardown(st);
	pthread_mutex_destroy(&st->mu);
	free(st);
	mc_opts_free(mc_client_opts, &cfg);
	return 0;
}
