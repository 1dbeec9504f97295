/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Store handle set-up and teardown: the loop thread, the data server over this client's
 * segments, the master connection, segment memory and its mounting.
 *
 * Segment memory comes from segment/segmem.c: a memfd mapped MAP_SHARED (a same-host peer maps
 * the same pages through the descriptor), populated in the background from its lowest address up
 * unless the operator turned that off, on huge pages and NUMA nodes when asked (st->memopts).
 * The segment name is "host:port": the port is the handshake port of the handle's transfer
 * engine, which peers ask for our segment descriptor.  A port not given is picked in the
 * client port range (reserved with a bound socket, then handed to the engine).  The engine
 * runs on the handle's loop, registers our segments and buffers, and moves every byte; with
 * protocol rdma and a usable NIC it installs rdma too.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/errcode.h"
#include "common/auth.h"
#include "common/log.h"
#include "reactor/tls.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"
#include "reactor/options.h"
#include "transfer/nic_topo.h"
#include "store/store.h"

int mc_endpoint_parse(struct mc_strv ep, char *host, size_t hostlen, uint16_t *port)
{
	const char *colon;
	size_t hl;
	long p;
	char buf[8];

	if (ep.n == 0)
		return -EINVAL;
	colon = memrchr(ep.p, ':', ep.n);
	if (colon == NULL)
		return -EINVAL;
	hl = (size_t)(colon - ep.p);
	if (hl == 0 || hl >= hostlen || ep.n - hl - 1 == 0 || ep.n - hl - 1 >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, colon + 1, ep.n - hl - 1);
	buf[ep.n - hl - 1] = '\0';
	p = strtol(buf, NULL, 10);
	if (p <= 0 || p > 65535)
		return -EINVAL;
	/* "[v6]:port" */
	if (ep.p[0] == '[' && hl >= 2 && ep.p[hl - 1] == ']') {
		memcpy(host, ep.p + 1, hl - 2);
		host[hl - 2] = '\0';
	} else {
		memcpy(host, ep.p, hl);
		host[hl] = '\0';
	}
	*port = (uint16_t)p;
	return 0;
}

int64_t mc_store_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int mc_env_int(const char *name, int def)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : def;
}

/* A positive number of milliseconds from the environment, else def. */
static int mc_env_pos(const char *name, int def)
{
	int v = mc_env_int(name, def);

	return v > 0 ? v : def;
}

/* Bind (without listening) a TCP port in [lo, hi] on host to reserve it.  Returns fd or -1. */
static int mc_reserve_port(const char *host, uint16_t *port_out)
{
	int lo = mc_env_int("MC_STORE_CLIENT_MIN_PORT", 12300);
	int hi = mc_env_int("MC_STORE_CLIENT_MAX_PORT", 14300);
	int tries = mc_env_int("MC_STORE_CLIENT_SETUP_RETRIES", 20), i;
	unsigned seed = (unsigned)getpid() ^ (unsigned)(uintptr_t)port_out;

	if (lo < 1024 || hi > 65535 || lo > hi) {
		lo = 12300;
		hi = 14300;
	}
	for (i = 0; i < tries * 10; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		uint16_t p = (uint16_t)(lo + (int)(rand_r(&seed) % (unsigned)(hi - lo + 1)));
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -1;
		sa.sin_port = htons(p);
		if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
			sa.sin_addr.s_addr = htonl(INADDR_ANY);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			*port_out = p;
			return fd;
		}
		close(fd);
	}
	return -1;
}

void mc_store_put_segment(struct mc_store *st, struct mc_wbuf *w, uint32_t i)
{
	struct mc_rpc_segment s;

	s.id = st->segs[i].id;
	s.name = mc_strv_c(st->hostname);
	s.base = (uint64_t)(uintptr_t)st->segs[i].base;
	s.size = st->segs[i].size;
	s.endpoint = mc_strv_c(st->endpoint);
	s.protocol = mc_strv_c(st->protocol);
	mc_rpc_put_segment(w, &s);
}

void mc_store_put_segment_token(struct mc_store *st, struct mc_wbuf *w, uint32_t i)
{
	mc_wbuf_put(w, st->segs[i].token, sizeof(st->segs[i].token));
}

int mc_store_is_local(struct mc_store *st, struct mc_strv endpoint, uint64_t addr, uint64_t len)
{
	uint32_t i;
	int local = 0;

	if (!mc_strv_eq(endpoint, mc_strv_c(st->endpoint)))
		return 0;
	pthread_mutex_lock(&st->mu);
	for (i = 0; i < st->nsegs; i++) {
		uint64_t b = (uint64_t)(uintptr_t)st->segs[i].base;

		if (addr >= b && addr + len <= b + st->segs[i].size && addr + len >= addr) {
			local = 1;
			break;
		}
	}
	pthread_mutex_unlock(&st->mu);
	return local;
}

int mc_store_register(struct mc_store *st, void *addr, uint64_t len)
{
	return mc_store_register_at(st, addr, len, "*");
}

int mc_store_register_at(struct mc_store *st, void *addr, uint64_t len, const char *location)
{
	int rc;

	if (st->engine == NULL)
		return MC_ERR_INVALID_PARAMS;
	rc = registerLocalMemory(st->engine, addr, len, location && *location ? location : "*", 1);
	if (rc) {
		mc_log_err("cannot register %llu bytes at %p for transfers (%d)",
			   (unsigned long long)len, addr, rc);
		return MC_ERR_INVALID_PARAMS;
	}
	return 0;
}

int mc_store_unregister(struct mc_store *st, void *addr)
{
	if (st->engine == NULL || unregisterLocalMemory(st->engine, addr))
		return MC_ERR_INVALID_PARAMS;
	return 0;
}

struct mc_setup_ctx {
	struct mc_store *st;
	int rc;
	struct mc_waiter w;
};

static void mc_store_setup_on_loop(void *arg)
{
	struct mc_setup_ctx *x = arg;
	struct mc_store *st = x->st;

	st->mc = mc_master_client_new(st, st->master_addr);
	if (st->mc == NULL)
		x->rc = -ENOMEM;
	mc_waiter_signal(&x->w, 0);
}

static void mc_store_teardown_on_loop(void *arg)
{
	struct mc_setup_ctx *x = arg;
	struct mc_store *st = x->st;

	mc_master_client_free(st->mc);
	st->mc = NULL;
	mc_store_embedded_stop_on_loop(st);
	mc_waiter_signal(&x->w, 0);
}

/* Resolve a host name to a numeric address for binding and advertising. */
static void mc_numeric_host(const char *host, char *out, size_t n)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;

	snprintf(out, n, "%s", host);
	if (inet_pton(AF_INET, host, &(struct in_addr){ 0 }) == 1 || strchr(host, ':'))
		return;
	if (getaddrinfo(host, NULL, &hints, &res) == 0) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, (socklen_t)n);
		freeaddrinfo(res);
	}
}

/* protocol rdma, as upstream decides it: listed NICs (rdma_devices / device_name /
 * --device_names, a comma list) must all exist, else setup fails; an empty list discovers the
 * NICs (unless MC_MS_AUTO_DISC=0, which makes the list required) and a host with none uses tcp
 * with a warning (an error with MC_FORCE_HCA).  1 when NICs are there (the transfer engine
 * carries the data), 0 for tcp, or MC_ERR_INVALID_PARAMS. */
static int mc_store_check_rdma(const char *devices)
{
	char names[MC_NIC_MAX][MC_NIC_NAME_MAX];
	const char *v;
	unsigned n = 0, i;
	char *m;

	if (mc_nic_list_parse(devices, names, MC_NIC_MAX, &n))
		return MC_ERR_INVALID_PARAMS;
	if (n) {
		for (i = 0; i < n; i++)
			if (!mc_nic_present(names[i])) {
				mc_log_err("protocol rdma: no RDMA device %s on this host "
					   "(rdma_devices '%s')",
					   names[i], devices);
				return MC_ERR_INVALID_PARAMS;
			}
	} else {
		v = getenv("MC_MS_AUTO_DISC");
		if (v && !strcmp(v, "0")) {
			mc_log_err("protocol rdma: MC_MS_AUTO_DISC=0 needs rdma_devices");
			return MC_ERR_INVALID_PARAMS;
		}
		m = mc_nic_topo_discover_str(NULL, &n);
		free(m);
		if (m == NULL)
			return MC_ERR_INVALID_PARAMS;
		if (n == 0) {
			v = getenv("MC_FORCE_HCA");
			if (v && *v && strcmp(v, "0")) {
				mc_log_err("protocol rdma: no RDMA NIC found and MC_FORCE_HCA is set");
				return MC_ERR_INVALID_PARAMS;
			}
			mc_log_warn("protocol rdma: no RDMA NIC found, using tcp");
			return 0;
		}
	}
	mc_log_info("protocol rdma: %u NIC(s) present", n);
	return 1;
}

/* Start the handle's transfer engine on its loop, its handshake server on port (the port of our
 * segment name).  A port we picked ourselves that someone took in between is replaced by
 * another; one the caller gave must be free.  0 or MC_ERR_INVALID_PARAMS. */
static int mc_store_engine_start(struct mc_store *st, const char *ip, uint16_t port)
{
	const char *shm = getenv("MC_STORE_SHM");
	int shm_on = 1;
	struct mc_engine_opts o = {
		.ip = ip,
		.meta_conn = st->metadata_server,
		.lt = st->lt,
		.tcp = &st->xfer_opts,
		.hs_timeout_ms = st->xfer_opts.connect_timeout_ms,
		.shm = !(shm && mc_parse_bool(shm, &shm_on) == 0 && !shm_on),
		.peer_populate = st->memopts.populate,
		.auth = st->auth,
	};
	int tries;

	for (tries = 0; tries < 5; tries++) {
		o.server_name = st->hostname;
		o.rpc_port = port;
		if (st->reserve_fd >= 0)
			close(st->reserve_fd);
		st->reserve_fd = -1;
		st->engine = mc_engine_new(&o);
		if (st->engine || tries == 4 || !st->auto_port)
			break;
		st->reserve_fd = mc_reserve_port(ip, &port);
		if (st->reserve_fd < 0)
			break;
		snprintf(st->hostname, sizeof(st->hostname), "%s:%u", st->host, port);
	}
	if (st->engine == NULL) {
		mc_log_err("store client %s: cannot start its transfer engine on %s:%u", st->hostname,
			   ip, port);
		return MC_ERR_INVALID_PARAMS;
	}
	st->reg = st->engine->reg;
	snprintf(st->endpoint, sizeof(st->endpoint), "%s:%u", ip,
		 mc_te_tcp_port(st->engine->xports[MC_TE_XPORT_TCP].state));
	return 0;
}

int mc_store_tenant_valid(const char *t)
{
	return mc_rpc_tenant_valid(t, strlen(t));
}

int mc_store_setup(struct mc_store *st, const char *local_hostname, const char *metadata_server,
		   uint64_t global_segment_size, uint64_t local_buffer_size, const char *protocol,
		   const char *device_name, const char *master_addr)
{
	struct mc_setup_ctx x = { .st = st };
	char ip[256];
	uint16_t port = 0;
	const char *colon;
	int rc, use_rdma = 0;

	if (st->initialized)
		return MC_ERR_INVALID_PARAMS;
	if (st->tenant_id[0] == '\0') {
		const char *t = getenv("MOONCAKE_TENANT_ID");

		snprintf(st->tenant_id, sizeof(st->tenant_id), "%s", t && *t ? t : "default");
	}
	if (!mc_store_tenant_valid(st->tenant_id)) {
		mc_log_err("tenant_id '%s' is not a tenant name (printable ASCII, at most 255 bytes, "
			   "not starting with '_')", st->tenant_id);
		return MC_ERR_INVALID_PARAMS;
	}
	if (!st->memopts_set) {
		char err[512];

		if (mc_segmem_opts_env(&st->memopts, err, sizeof(err))) {
			mc_log_err("%s", err);
			return MC_ERR_INVALID_PARAMS;
		}
	}
	if (protocol && !strcmp(protocol, "rdma")) {
		rc = mc_store_check_rdma(device_name);
		if (rc < 0)
			return rc;
		use_rdma = rc == 1;
	} else if (protocol && strcmp(protocol, "tcp")) {
		mc_log_warn("protocol '%s' is not available in this build's store client; using tcp",
			    protocol);
	}
	snprintf(st->protocol, sizeof(st->protocol), "tcp");
	snprintf(st->metadata_server, sizeof(st->metadata_server), "%s",
		 metadata_server ? metadata_server : "");
	snprintf(st->master_addr, sizeof(st->master_addr), "%s",
		 master_addr && *master_addr ? master_addr : "127.0.0.1:50051");
	{
		char h[256];
		uint16_t p;

		/* A malformed address is the caller's error, not a lack of memory later. */
		if (!mc_master_locate_wanted(st->master_addr) &&
		    mc_endpoint_parse(mc_strv_c(st->master_addr), h, sizeof(h), &p)) {
			mc_log_err("master_server_address '%s' is not host:port (nor etcd://... or "
				   "redis://...)", st->master_addr);
			return MC_ERR_INVALID_PARAMS;
		}
	}
	/* Objects carry a CRC-64 the readers verify (upstream's switch, on by default here: it
	 * costs host-memory puts and gets under 5% where measured).  GPU memory is checksummed
	 * only when asked for explicitly: it must then be staged through host memory, which would
	 * take GPU-direct rdma away from users who never asked. */
	{
		const char *v = getenv("MOONCAKE_STORE_CHECKSUM");
		int on = 1;	/* left as it is by a value that is not a boolean */
		int said = v && mc_parse_bool(v, &on) == 0;

		st->checksum = on;
		st->checksum_device = said && on;
	}
	/* The cluster secret every connection of this handle proves (master, data, handshake,
	 * shm). */
	{
		char err[512];
		const char *path = st->cluster_secret_file[0] ? st->cluster_secret_file
							      : getenv(MC_AUTH_SECRET_ENV);

		mc_auth_unref(st->auth);
		st->auth = NULL;
		if (mc_auth_load(path, &st->auth, err, sizeof(err)) != 0) {
			mc_log_err("%s", err);
			return MC_ERR_INVALID_PARAMS;
		}
		mc_tls_free(st->tls);
		st->tls = NULL;
		if (mc_tls_client_from_env(&st->tls, err, sizeof(err)) != 0) {
			mc_log_err("%s", err);
			mc_auth_unref(st->auth);
			st->auth = NULL;
			return MC_ERR_INVALID_PARAMS;
		}
	}
	/* Bounds of master calls and of each replica transfer (see libmooncake(3)). */
	st->rpc_timeout_ms = mc_env_int("MC_RPC_TIMEOUT_MS", MC_STORE_RPC_TIMEOUT_MS);
	st->xfer_opts.connect_timeout_ms =
		(unsigned)mc_env_pos("MC_STORE_CONNECT_TIMEOUT_MS", MC_STORE_XFER_TIMEOUT_MS);
	st->xfer_opts.io_timeout_ms =
		(unsigned)mc_env_pos("MC_STORE_TRANSFER_TIMEOUT_MS", MC_STORE_XFER_TIMEOUT_MS);
	/* Segment name: host:port, the port reserved now if not given. */
	colon = local_hostname ? strrchr(local_hostname, ':') : NULL;
	if (local_hostname == NULL || *local_hostname == '\0')
		local_hostname = "127.0.0.1";
	st->reserve_fd = -1;
	if (colon && !strchr(colon + 1, ']') && atoi(colon + 1) > 0) {
		snprintf(st->host, sizeof(st->host), "%.*s", (int)(colon - local_hostname),
			 local_hostname);
		snprintf(st->hostname, sizeof(st->hostname), "%s", local_hostname);
		port = (uint16_t)atoi(colon + 1);
	} else {
		snprintf(st->host, sizeof(st->host), "%s", local_hostname);
		mc_numeric_host(st->host, ip, sizeof(ip));
		st->reserve_fd = mc_reserve_port(ip, &port);
		if (st->reserve_fd < 0) {
			mc_log_err("no free port for %s in the client port range", st->host);
			return MC_ERR_INVALID_PARAMS;
		}
		st->auto_port = 1;
		snprintf(st->hostname, sizeof(st->hostname), "%s:%u", st->host, port);
	}
	mc_numeric_host(st->host, ip, sizeof(ip));
	mc_uuid_generate(&st->client_id);
	st->lt = mc_loop_thread_new("mc-store");
	if (st->lt == NULL || mc_loop_thread_start(st->lt)) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = mc_store_embedded_start(st);
	if (rc)
		goto fail;
	mc_waiter_init(&x.w);
	mc_loop_thread_call(st->lt, mc_store_setup_on_loop, &x);
	mc_waiter_wait(&x.w);
	mc_waiter_fini(&x.w);
	if (x.rc) {
		mc_log_err("store setup on %s failed: %s", ip, mc_strerror(x.rc));
		rc = MC_ERR_INVALID_PARAMS;
		goto fail;
	}
	rc = mc_store_engine_start(st, ip, port);
	if (rc)
		goto fail;
	if (use_rdma) {
		rc = mc_te_install_rdma_devices(st->engine, device_name);
		if (rc < 0) {
			mc_log_err("protocol rdma: the NICs '%s' cannot be used",
				   device_name ? device_name : "");
			rc = MC_ERR_INVALID_PARAMS;
			goto fail;
		}
		/* The segment descriptor the master keeps says how its bytes move. */
		if (rc == 0)
			snprintf(st->protocol, sizeof(st->protocol), "rdma");
		rc = 0;
	}
	/* Same-host segments: opened (and their pages mapped here) from now on, not by the
	 * first put. */
	rc = mc_store_peers_start(st);
	if (rc)
		goto fail;
	if (local_buffer_size) {
		char err[512];
		struct mc_segmem_opts lo = st->memopts;

		/* Only our own requests use it: populated where a core is idle and once our
		 * requests pause, never ahead of the first copies (segment/segmem.h). */
		lo.idle = 1;
		lo.active_ms = &st->active_ms;
		st->local_mem = calloc(1, sizeof(*st->local_mem));
		if (st->local_mem == NULL || mc_segmem_create(st->local_mem, local_buffer_size,
							      "mooncake-local-buffer", &lo, err,
							      sizeof(err))) {
			mc_log_err("cannot create a %llu-byte local buffer: %s",
				   (unsigned long long)local_buffer_size,
				   st->local_mem ? err : "out of memory");
			free(st->local_mem);
			st->local_mem = NULL;
			rc = MC_ERR_INVALID_PARAMS;
			goto fail;
		}
		st->local_buf = st->local_mem->base;
		st->local_buf_size = local_buffer_size;
		rc = mc_store_register(st, st->local_buf, local_buffer_size);
		if (rc)
			goto fail;
	}
	if (global_segment_size) {
		rc = mc_store_mount_segment(st, global_segment_size);
		if (rc)
			goto fail;
	} else {
		/* A pure client still checks that the master answers. */
		struct mc_rpc_call call;

		mc_rpc_call_init(&call, MC_OP_SERVICE_READY);
		rc = mc_store_call(st, &call);
		if (rc == 0)
			rc = call.status;
		mc_rpc_call_fini(&call);
		if (rc) {
			mc_log_err("master %s does not answer: %s", st->master_addr, mc_strerror(rc));
			goto fail;
		}
	}
	{
		/* --root_fs_dir on the master: where DISK replicas live and their quota (older
		 * masters: none). */
		struct mc_rpc_call call;
		struct mc_rbuf r;

		mc_rpc_call_init(&call, MC_OP_GET_STORAGE_CONFIG);
		if (mc_store_call(st, &call) == 0 && call.status == 0) {
			struct mc_strv d;

			mc_rbuf_init(&r, call.resp, call.resp_len);
			d = mc_rpc_get_strv(&r, MC_RPC_MAX_PATH);
			st->fs_evict = mc_rbuf_u8(&r);
			st->fs_quota = mc_rbuf_u64(&r);
			if (r.err == 0 && r.left == 0 && d.n < sizeof(st->fsdir)) {
				memcpy(st->fsdir, d.p, d.n);
				st->fsdir[d.n] = '\0';
			}
		}
		mc_rpc_call_fini(&call);
	}
	rc = mc_store_fs_start(st);
	if (rc)
		goto fail;
	rc = mc_store_ssd_start(st);
	if (rc)
		goto fail;
	if (st->nsegs > 0 && (rc = mc_store_tasks_start(st)) != 0)
		goto fail;
	st->metrics.start_ms = mc_store_now_ms();
	st->initialized = 1;
	if (st->http_port > 0 && (rc = mc_store_http_start(st, st->http_port)) != 0) {
		st->initialized = 0;
		goto fail;
	}
	mc_log_info("store client %s ready: endpoint %s, master %s, %u segment(s)", st->hostname,
		    st->endpoint, st->master_addr, st->nsegs);
	return 0;
fail:
	mc_store_teardown(st);
	return rc;
}

void mc_store_teardown(struct mc_store *st)
{
	uint32_t i;

	mc_store_http_stop(st);
	mc_store_peers_stop(st);
	mc_store_retire_stop(st);
	mc_store_fs_stop(st);
	mc_store_ssd_stop(st);
	mc_store_tasks_stop(st);
	if (st->lt) {
		struct mc_setup_ctx x = { .st = st };

		/* Unmount what we contributed, best effort (also when a later step of the set-up
		 * failed: nothing of a failed set-up stays mounted). */
		for (i = 0; st->mc && i < st->nsegs; i++)
			(void)mc_store_unmount_rpc(st, &st->segs[i].id);
		/* The engine first: it runs on our loop and serves the memory freed below. */
		if (st->engine)
			destroyTransferEngine(st->engine);
		st->engine = NULL;
		st->reg = NULL;
		mc_waiter_init(&x.w);
		mc_loop_thread_call(st->lt, mc_store_teardown_on_loop, &x);
		mc_waiter_wait(&x.w);
		mc_waiter_fini(&x.w);
		mc_loop_thread_stop_and_free(st->lt);
		st->lt = NULL;
	}
	mc_store_ssd_free(st);
	mc_store_prefetch_free(st);
	mc_store_tasks_free(st);
	for (i = 0; i < st->nsegs; i++) {
		mc_segmem_free(st->segs[i].mem);
		free(st->segs[i].mem);
	}
	st->nsegs = 0;
	mc_segmem_free(st->local_mem);
	free(st->local_mem);
	st->local_mem = NULL;
	st->local_buf = NULL;
	if (st->reserve_fd >= 0)
		close(st->reserve_fd);
	st->reserve_fd = -1;
	mc_auth_unref(st->auth);
	st->auth = NULL;
	mc_tls_free(st->tls);
	st->tls = NULL;
	st->initialized = 0;
}
