/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine C API (include/mooncake/transfer_engine_c.h): engine life cycle,
 * transports, registered memory, batches.
 *
 * createTransferEngine starts a loop thread, installs tcp (data server + client) and shm, and
 * starts the handshake port; registered memory is both served to peers and published in this
 * engine's segment descriptor (built from the installed transports' fields).  Segments are
 * opened in te_segment.c.  submitTransfer checks every request against the target's published
 * buffers on the calling thread, then hands the valid ones to the loop, which passes each to
 * the transport serving its segment (transport.h) or, for GPU memory, to the staging pool
 * (te_staging.c).  Completions update per-task status under the engine mutex, which
 * getTransferStatus reads.  Transports are called without e->mu held, except describe.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/errcode.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/te_gpu.h"
#include "transfer/nic_topo.h"
#include "mooncake/transfer_engine_c.h"

#define MC_E(x) ((struct mc_engine *)(x))

int64_t mc_te_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void mc_te_default_ip(char *out, size_t n)
{
	struct ifaddrs *ifs, *i;
	const char *bind = getenv("MC_TCP_BIND_ADDRESS");

	if (bind && *bind) {
		snprintf(out, n, "%s", bind);
		return;
	}
	snprintf(out, n, "127.0.0.1");
	if (getifaddrs(&ifs))
		return;
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & 1) &&
		    ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) >> 24 != 127) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out,
				  (socklen_t)n);
			break;
		}
	freeifaddrs(ifs);
}

const struct mc_te_transport_ops *const mc_te_known[MC_TE_NXPORTS] = {
	[MC_TE_XPORT_FILE] = &mc_te_file_ops,
	[MC_TE_XPORT_SHM] = &mc_te_shm_ops,
#ifdef HAVE_RDMA
	[MC_TE_XPORT_RDMA] = &mc_te_rdma_ops,
#endif
	[MC_TE_XPORT_TCP] = &mc_te_tcp_ops,
};

/* The slot of a transport name; "file" is our name for upstream's "nvmeof". */
static int mc_te_slot_of(const char *proto)
{
	int i;

	if (!strcmp(proto, "file"))
		proto = "nvmeof";
	for (i = 0; i < MC_TE_NXPORTS; i++)
		if (mc_te_known[i] && !strcmp(mc_te_known[i]->name, proto))
			return i;
	return -1;
}

/* Install the transport in slot i (API thread).  0 or a negative errno. */
static int mc_te_install(struct mc_engine *e, int i)
{
	void *state = NULL;
	int rc;

	if (mc_te_known[i] == NULL)
		return -ENOTSUP;
	pthread_mutex_lock(&e->mu);
	rc = e->xports[i].state != NULL;
	pthread_mutex_unlock(&e->mu);
	if (rc)
		return 0;
	rc = mc_te_known[i]->install(e, &state);
	if (rc)
		return rc;
	pthread_mutex_lock(&e->mu);
	e->xports[i].ops = mc_te_known[i];
	e->xports[i].state = state;
	pthread_mutex_unlock(&e->mu);
	return 0;
}


/* MC_LOG_LEVEL (upstream's variable): debug, info, warning or error. */
static void mc_te_log_level_from_env(void)
{
	static const struct {
		const char *name;
		int level;
	} levels[] = { { "debug", MC_LOG_DEBUG }, { "info", MC_LOG_INFO },
		       { "warning", MC_LOG_WARN }, { "warn", MC_LOG_WARN },
		       { "error", MC_LOG_ERR } };
	const char *v = getenv("MC_LOG_LEVEL");
	size_t i;

	for (i = 0; v && i < sizeof(levels) / sizeof(levels[0]); i++)
		if (!strcasecmp(v, levels[i].name))
			mc_log_set_level(levels[i].level);
}

static int mc_te_env_true(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "no");
}

int mc_te_install_rdma_devices(struct mc_engine *e, const char *devices)
{
	char *matrix;
	unsigned nnics = 0;
	void *args[2] = { NULL, NULL };

	if (devices && *devices) {
		matrix = mc_nic_matrix_from_list(devices);
		if (matrix == NULL)
			return ERR_INVALID_ARGUMENT;
	} else {
		matrix = mc_nic_topo_discover_str(NULL, &nnics);
		if (matrix == NULL)
			return ERR_INVALID_ARGUMENT;
		if (nnics == 0) {
			free(matrix);
			if (mc_te_env_true("MC_FORCE_HCA")) {
				mc_log_err("transfer engine %s: no RDMA NIC found and MC_FORCE_HCA is "
					   "set", e->server_name);
				return ERR_DEVICE_NOT_FOUND;
			}
			mc_log_warn("transfer engine %s: no RDMA NIC found, using tcp",
				    e->server_name);
			return 1;
		}
	}
	if (mc_te_known[MC_TE_XPORT_RDMA] == NULL) {
		free(matrix);
		if (devices && *devices) {
			mc_log_err("transfer engine %s: rdma devices %s given but this build has no "
				   "rdma transport", e->server_name, devices);
			return ERR_DEVICE_NOT_FOUND;
		}
		mc_log_warn("transfer engine %s: this build has no rdma transport, using tcp",
			    e->server_name);
		return 1;
	}
	args[0] = matrix;
	if (installTransport(e, "rdma", args) == NULL) {
		free(matrix);
		return ERR_DEVICE_NOT_FOUND;
	}
	free(matrix);
	return 0;
}

/* The engine without a loop or transports; NULL when out of memory. */
static struct mc_engine *mc_engine_alloc(const char *meta_conn)
{
	struct mc_engine *e = calloc(1, sizeof(*e));

	if (e == NULL)
		return NULL;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->batch_cv, NULL);
	e->notifies_tail = &e->notifies;
	e->hs_timeout_ms = 5000;
	snprintf(e->meta_conn, sizeof(e->meta_conn), "%s", meta_conn);
	e->reg = mc_memreg_new();
	if (e->reg == NULL) {
		pthread_cond_destroy(&e->batch_cv);
		pthread_mutex_destroy(&e->mu);
		free(e);
		return NULL;
	}
	return e;
}

/* Start the loop (or adopt lt), tcp, the handshake port and GPU staging; shm when asked.
 * *port: the handshake port wanted (0: any), then the one taken.  0 or -1. */
static int mc_engine_start(struct mc_engine *e, struct mc_loop_thread *lt, uint16_t *port, int shm)
{
	if (lt) {
		e->lt = lt;
	} else {
		e->lt = mc_loop_thread_new("mc-engine");
		e->own_lt = 1;
		if (e->lt == NULL || mc_loop_thread_start(e->lt))
			return -1;
	}
	/* tcp serves our memory to every peer and is every transport's fallback; shm is chosen
	 * on its own for same-host peers. */
	if (mc_te_install(e, MC_TE_XPORT_TCP) || mc_te_hs_start(e, e->ip, port))
		return -1;
	if (mc_te_gpu_init(e))
		return -1;
	if (shm && mc_te_known[MC_TE_XPORT_SHM] && mc_te_install(e, MC_TE_XPORT_SHM))
		mc_log_warn("transfer engine: same-host shared memory unavailable, using tcp");
	e->rpc_port = *port;
	return 0;
}

transfer_engine_t createTransferEngine(const char *metadata_conn_string,
				       const char *local_server_name, const char *ip_or_host_name,
				       uint64_t rpc_port, int auto_discover)
{
	struct mc_engine *e;
	uint16_t port = rpc_port > 65535 ? 0 : (uint16_t)rpc_port;

	mc_te_log_level_from_env();
	if (metadata_conn_string == NULL || local_server_name == NULL)
		return NULL;
	if (!mc_te_kv_supported(metadata_conn_string)) {
		mc_log_err("transfer engine: metadata '%s' is not supported in this build "
			   "(P2PHANDSHAKE, http://, etcd:// with libcurl, redis:// with hiredis)",
			   metadata_conn_string);
		return NULL;
	}
	e = mc_engine_alloc(metadata_conn_string);
	if (e == NULL)
		return NULL;
	e->auto_discover = auto_discover != 0;
	e->p2p = !strcmp(metadata_conn_string, "P2PHANDSHAKE");
	e->publish = !e->p2p;
	if (ip_or_host_name && *ip_or_host_name)
		snprintf(e->ip, sizeof(e->ip), "%s", ip_or_host_name);
	else if (strchr(local_server_name, ':') == NULL && *local_server_name &&
		 inet_pton(AF_INET, local_server_name, &(struct in_addr){ 0 }) == 1)
		snprintf(e->ip, sizeof(e->ip), "%s", local_server_name);
	else
		mc_te_default_ip(e->ip, sizeof(e->ip));
	/* Upstream's default rpc_port 12345 is a placeholder: pick a free one. */
	if (port == 12345)
		port = 0;
	if (mc_engine_start(e, NULL, &port, 1))
		goto fail;
	if (e->p2p)
		snprintf(e->server_name, sizeof(e->server_name), "%s:%u", e->ip, port);
	else
		snprintf(e->server_name, sizeof(e->server_name), "%s", local_server_name);
	/* Upstream's auto-discovery installs rdma itself when the host has NICs (tcp otherwise,
	 * and always with MC_FORCE_TCP). */
	if (e->auto_discover && !mc_te_env_true("MC_FORCE_TCP") &&
	    mc_te_install_rdma_devices(e, NULL) < 0)
		goto fail;
	if (mc_te_meta_publish(e))
		goto fail;
	mc_te_refresher_start(e);
	mc_log_info("transfer engine %s: data port %u, handshake port %u, metadata %s",
		    e->server_name, mc_te_tcp_port(e->xports[MC_TE_XPORT_TCP].state), port,
		    e->meta_conn);
	return e;
fail:
	destroyTransferEngine(e);
	return NULL;
}

struct mc_engine *mc_engine_new(const struct mc_engine_opts *o)
{
	const char *meta = o->meta_conn && *o->meta_conn && strcmp(o->meta_conn, "P2PHANDSHAKE")
				   ? o->meta_conn
				   : "P2PHANDSHAKE";
	struct mc_engine *e;
	uint16_t port = o->rpc_port;

	mc_te_log_level_from_env();
	if (o->server_name == NULL || o->ip == NULL || strlen(o->server_name) >= sizeof(e->server_name))
		return NULL;
	if (!mc_te_kv_supported(meta)) {
		mc_log_err("transfer engine: metadata '%s' is not supported in this build", meta);
		return NULL;
	}
	e = mc_engine_alloc(meta);
	if (e == NULL)
		return NULL;
	e->p2p = 1;
	e->publish = strcmp(meta, "P2PHANDSHAKE") != 0;
	if (o->hs_timeout_ms)
		e->hs_timeout_ms = o->hs_timeout_ms;
	if (o->tcp) {
		e->tcp_opts = *o->tcp;
		e->has_tcp_opts = 1;
	}
	snprintf(e->ip, sizeof(e->ip), "%s", o->ip);
	snprintf(e->server_name, sizeof(e->server_name), "%s", o->server_name);
	if (mc_engine_start(e, o->lt, &port, o->shm))
		goto fail;
	if (mc_te_meta_publish(e))
		goto fail;
	mc_log_info("transfer engine %s: data port %u, handshake port %u%s%s", e->server_name,
		    mc_te_tcp_port(e->xports[MC_TE_XPORT_TCP].state), port,
		    e->publish ? ", published to " : "", e->publish ? e->meta_conn : "");
	return e;
fail:
	destroyTransferEngine(e);
	return NULL;
}

char *mc_te_local_topology(struct mc_engine *e)
{
	char *s = NULL;

	/* The state is freed only after it is cleared under mu. */
	pthread_mutex_lock(&e->mu);
	if (e->xports[MC_TE_XPORT_RDMA].state)
		s = mc_te_rdma_matrix_str(e->xports[MC_TE_XPORT_RDMA].state);
	pthread_mutex_unlock(&e->mu);
	return s ? s : mc_nic_topo_discover_str(NULL, NULL);
}

int getLocalTopology(transfer_engine_t engine, char *buf_out, size_t buf_len)
{
	char *s;
	int rc;

	if (engine == NULL || buf_out == NULL || buf_len == 0)
		return ERR_INVALID_ARGUMENT;
	s = mc_te_local_topology(MC_E(engine));
	if (s == NULL)
		return ERR_MEMORY;
	rc = strlen(s) < buf_len ? 0 : ERR_INVALID_ARGUMENT;
	if (rc == 0)
		strcpy(buf_out, s);
	free(s);
	return rc;
}

int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len)
{
	int n;

	if (engine == NULL || buf_out == NULL)
		return ERR_INVALID_ARGUMENT;
	n = snprintf(buf_out, buf_len, "%s:%u", MC_E(engine)->ip, MC_E(engine)->rpc_port);
	return n < 0 || (size_t)n >= buf_len ? ERR_INVALID_ARGUMENT : 0;
}

static void mc_te_barrier_on_loop(void *arg)
{
	mc_waiter_signal(arg, 0);
}

/* Wait until the loop has run everything queued so far: a dispatch that read a transport's
 * state before it was cleared has handed its request over by then. */
static void mc_te_loop_barrier(struct mc_engine *e)
{
	struct mc_waiter w;

	if (mc_loop_thread_is_current(e->lt))
		return;
	mc_waiter_init(&w);
	if (mc_loop_thread_call(e->lt, mc_te_barrier_on_loop, &w) == 0)
		mc_waiter_wait(&w);
	mc_waiter_fini(&w);
}

transport_t installTransport(transfer_engine_t engine, const char *proto, void **args)
{
	struct mc_engine *e = MC_E(engine);
	char *found = NULL;
	unsigned nnics = 0;
	int i, rc;

	if (e == NULL || proto == NULL)
		return NULL;
	/* rdma: args[0], when given, is the NIC priority matrix JSON (read by the install);
	 * without one an auto-discovering engine uses the discovered matrix, else every NIC. */
	e->rdma_matrix = !strcmp(proto, "rdma") && args ? (const char *)args[0] : NULL;
	/* Our extension: a device list ("mlx5_0,mlx5_1") in place of the matrix. */
	if (e->rdma_matrix && e->rdma_matrix[strspn(e->rdma_matrix, " \t\n")] != '{' &&
	    *e->rdma_matrix) {
		found = mc_nic_matrix_from_list(e->rdma_matrix);
		e->rdma_matrix = found;
		if (found == NULL)
			return NULL;
	}
	i = mc_te_slot_of(proto);
	if (i < 0) {
		mc_log_warn("transfer engine: transport '%s' is not available in this build", proto);
		free(found);
		return NULL;
	}
	if (i == MC_TE_XPORT_RDMA && e->rdma_matrix == NULL && e->auto_discover) {
		found = mc_nic_topo_discover_str(NULL, &nnics);
		if (found == NULL)
			return NULL;
		if (nnics)
			e->rdma_matrix = found;
	}
	rc = mc_te_install(e, i);
	e->rdma_matrix = NULL;
	free(found);
	if (rc) {
		mc_log_warn("transfer engine: installing transport '%s' failed: %s", proto,
			    strerror(-rc));
		return NULL;
	}
	return e->xports[i].state;
}

/* Take every segment off transport slot i (e->mu held): they fall back to tcp where it serves
 * them, else to none until the next openSegment.  Their per-segment contexts are returned in a
 * malloc'ed array (*nctx entries) for mc_te_release_ctxs once no dispatch can use them; NULL
 * when there are none or on out-of-memory (the contexts are then leaked, never freed early). */
static void **mc_te_detach_segments(struct mc_engine *e, int i, uint32_t *nctx)
{
	void **ctx = e->nsegs ? calloc(e->nsegs, sizeof(*ctx)) : NULL;
	uint32_t k;

	*nctx = 0;
	for (k = 0; k < e->nsegs; k++)
		if (e->segs[k].xport == i) {
			if (ctx && e->segs[k].xport_ctx)
				ctx[(*nctx)++] = e->segs[k].xport_ctx;
			/* Re-chosen at the next openSegment; tcp until then when it serves. */
			if (i != MC_TE_XPORT_TCP && e->xports[MC_TE_XPORT_TCP].state &&
			    e->segs[k].desc.tcp_data_port)
				e->segs[k].xport = MC_TE_XPORT_TCP;
			else
				e->segs[k].xport = -1;
			e->segs[k].xport_ctx = NULL;
		}
	return ctx;
}

/* Hand detached per-segment contexts back to transport slot i before it is uninstalled. */
static void mc_te_release_ctxs(int i, void *state, void **ctx, uint32_t nctx)
{
	struct mc_te_segment tmp;
	uint32_t k;

	for (k = 0; k < nctx && mc_te_known[i]->release; k++) {
		memset(&tmp, 0, sizeof(tmp));
		tmp.xport = i;
		tmp.xport_ctx = ctx[k];
		mc_te_known[i]->release(state, &tmp);
	}
	free(ctx);
}

int uninstallTransport(transfer_engine_t engine, const char *proto)
{
	struct mc_engine *e = MC_E(engine);
	void *state, **ctx;
	uint32_t nctx;
	int i;

	if (e == NULL || proto == NULL || (i = mc_te_slot_of(proto)) < 0)
		return ERR_INVALID_ARGUMENT;
	pthread_mutex_lock(&e->mu);
	state = e->xports[i].state;
	e->xports[i].state = NULL;	/* requests queued to the loop now fail */
	ctx = mc_te_detach_segments(e, i, &nctx);
	pthread_mutex_unlock(&e->mu);
	if (state == NULL) {
		free(ctx);
		return ERR_INVALID_ARGUMENT;
	}
	mc_te_loop_barrier(e);
	mc_te_release_ctxs(i, state, ctx, nctx);
	mc_te_known[i]->uninstall(e, state);
	return 0;
}

void destroyTransferEngine(transfer_engine_t engine)
{
	struct mc_engine *e = MC_E(engine);
	uint32_t i;
	int k;

	if (e == NULL)
		return;
	mc_te_refresher_stop(e);
	if (e->lt) {
		if (e->rpc_port)
			mc_te_meta_unpublish(e);
		mc_te_hs_stop(e);
		mc_te_gpu_fini(e);	/* its sub-requests need the transports */
		/* Every transport completes (or fails) what it holds before it goes. */
		void *states[MC_TE_NXPORTS], **ctxs[MC_TE_NXPORTS];
		uint32_t nctxs[MC_TE_NXPORTS];

		pthread_mutex_lock(&e->mu);
		for (k = 0; k < MC_TE_NXPORTS; k++) {
			states[k] = e->xports[k].state;
			e->xports[k].state = NULL;
			ctxs[k] = mc_te_detach_segments(e, k, &nctxs[k]);
		}
		pthread_mutex_unlock(&e->mu);
		mc_te_loop_barrier(e);
		for (k = MC_TE_NXPORTS - 1; k >= 0; k--) {
			if (states[k]) {
				mc_te_release_ctxs(k, states[k], ctxs[k], nctxs[k]);
				mc_te_known[k]->uninstall(e, states[k]);
			} else {
				free(ctxs[k]);
			}
		}
		if (e->own_lt)
			mc_loop_thread_stop_and_free(e->lt);
	}
	while (e->batches) {
		struct mc_te_batch *b = e->batches;

		e->batches = b->next;
		free(b);
	}
	for (i = 0; i < e->nsegs; i++)
		mc_te_desc_fini(&e->segs[i].desc);
	free(e->segs);
	mc_te_notify_free(e->notifies);
	for (i = 0; i < e->nbufs; i++)
		if (e->bufs[i].fd >= 0)
			close(e->bufs[i].fd);
	free(e->bufs);
	mc_memreg_free(e->reg);
	pthread_cond_destroy(&e->batch_cv);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

/* GPU memory (location "cuda:N", or device memory by mc_gpu_ops): with rdma installed it is
 * registered on the NICs directly, as upstream does with nvidia-peermem or dma-buf, and
 * published through the rdma fields only (tcp and shm cannot reach it); requests on it to rdma
 * peers then skip staging.  When the driver refuses (no peer memory support) or rdma is not
 * installed it stays registered for local use, staged through pinned host memory.  0, or the
 * publish error. */
static int mc_te_register_gpu(struct mc_engine *e, void *addr, size_t length,
			      const char *location)
{
	void *rdma = e->xports[MC_TE_XPORT_RDMA].state;
	int rc;

	if (rdma) {
		rc = mc_te_rdma_register_local(rdma, addr, length, location, 1);
		if (rc == 0) {
			mc_log_info("transfer engine %s: GPU memory at %p (%zu bytes) registered on "
				    "the RDMA NICs directly",
				    e->server_name, addr, length);
			return mc_te_meta_publish(e);
		}
		mc_log_warn("transfer engine %s: the RDMA NICs cannot register GPU memory at %p "
			    "(%d; nvidia-peermem or dma-buf missing?): staged through pinned host "
			    "memory, for local use only",
			    e->server_name, addr, rc);
		return 0;
	}
	/* Usable as a local source or destination (staged); peers cannot reach it over tcp or
	 * shm, so it is not published. */
	mc_log_warn("transfer engine %s: GPU memory at %p is registered for local use only",
		    e->server_name, addr);
	return 0;
}

int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
			int remote_accessible)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_buffer *nb;
	uint64_t fd_off = 0;
	int rc, fd, k;

	if (e == NULL || addr == NULL || length == 0)
		return ERR_INVALID_ARGUMENT;
	rc = mc_memreg_add(e->reg, (uint64_t)(uintptr_t)addr, length);
	if (rc == -EEXIST)
		return ERR_ADDRESS_OVERLAPPED;
	if (rc)
		return ERR_INVALID_ARGUMENT;
	if (!remote_accessible)
		return 0;
	if ((e->gpu && e->gpu->is_device(addr)) || (location && !strncmp(location, "cuda:", 5)))
		return mc_te_register_gpu(e, addr, length, location);
	/* Shared file memory can be mapped by same-host peers (te_shm.c). */
	if (mc_te_mem_share_fd((uint64_t)(uintptr_t)addr, length, &fd, &fd_off))
		fd = -1;
	pthread_mutex_lock(&e->mu);
	nb = e->nbufs < MC_TE_MAX_BUFFERS ? realloc(e->bufs, (e->nbufs + 1) * sizeof(*nb)) : NULL;
	if (nb) {
		e->bufs = nb;
		nb[e->nbufs].addr = (uint64_t)(uintptr_t)addr;
		nb[e->nbufs].length = length;
		nb[e->nbufs].fd = fd;
		nb[e->nbufs].fd_off = fd_off;
		e->nbufs++;
	}
	pthread_mutex_unlock(&e->mu);
	if (nb == NULL) {
		if (fd >= 0)
			close(fd);
		mc_memreg_remove(e->reg, (uint64_t)(uintptr_t)addr);
		return ERR_MEMORY;
	}
	for (k = 0; k < MC_TE_NXPORTS; k++) {
		void *state = e->xports[k].state;

		if (state && e->xports[k].ops->register_mem &&
		    e->xports[k].ops->register_mem(state, addr, length, location)) {
			unregisterLocalMemory(engine, addr);
			return ERR_MEMORY;
		}
	}
	return mc_te_meta_publish(e);
}

int unregisterLocalMemory(transfer_engine_t engine, void *addr)
{
	struct mc_engine *e = MC_E(engine);
	uint32_t i;

	int k, fd = -1, published = 0;

	if (e == NULL || addr == NULL)
		return ERR_INVALID_ARGUMENT;
	if (mc_memreg_remove(e->reg, (uint64_t)(uintptr_t)addr))
		return ERR_ADDRESS_NOT_REGISTERED;
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < e->nbufs; i++)
		if (e->bufs[i].addr == (uint64_t)(uintptr_t)addr) {
			fd = e->bufs[i].fd;
			e->bufs[i] = e->bufs[--e->nbufs];
			published = 1;
			break;
		}
	pthread_mutex_unlock(&e->mu);
	if (fd >= 0)
		close(fd);
	for (k = 0; published && k < MC_TE_NXPORTS; k++)
		if (e->xports[k].state && e->xports[k].ops->unregister_mem)
			e->xports[k].ops->unregister_mem(e->xports[k].state, addr);
	/* GPU memory registered on the NICs directly is in no list but rdma's. */
	if (!published && e->xports[MC_TE_XPORT_RDMA].state &&
	    mc_te_rdma_unregister(e->xports[MC_TE_XPORT_RDMA].state, addr) == 0)
		published = 1;
	return published ? mc_te_meta_publish(e) : 0;
}

int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *buffer_list,
			     size_t buffer_len, const char *location)
{
	size_t i;
	int rc;

	if (engine == NULL || (buffer_list == NULL && buffer_len))
		return ERR_INVALID_ARGUMENT;
	for (i = 0; i < buffer_len; i++) {
		rc = registerLocalMemory(engine, buffer_list[i].addr, buffer_list[i].length,
					 location, 1);
		if (rc) {
			while (i-- > 0)
				unregisterLocalMemory(engine, buffer_list[i].addr);
			return rc;
		}
	}
	return 0;
}

int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list, size_t addr_len)
{
	size_t i;
	int rc = 0;

	if (engine == NULL || (addr_list == NULL && addr_len))
		return ERR_INVALID_ARGUMENT;
	for (i = 0; i < addr_len; i++)
		if (unregisterLocalMemory(engine, addr_list[i]))
			rc = ERR_ADDRESS_NOT_REGISTERED;
	return rc;
}

batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_batch *b;

	if (e == NULL || batch_size == 0 || batch_size > (1u << 20))
		return INVALID_BATCH;
	b = calloc(1, sizeof(*b) + batch_size * sizeof(b->tasks[0]));
	if (b == NULL)
		return INVALID_BATCH;
	b->e = e;
	b->size = batch_size;
	pthread_mutex_lock(&e->mu);
	b->next = e->batches;
	e->batches = b;
	pthread_mutex_unlock(&e->mu);
	return (batch_id_t)(uintptr_t)b;
}

/* The batch behind an id, or NULL; e->mu held. */
static struct mc_te_batch *mc_te_batch_find(struct mc_engine *e, batch_id_t id)
{
	struct mc_te_batch *b;

	for (b = e->batches; b; b = b->next)
		if ((batch_id_t)(uintptr_t)b == id)
			return b;
	return NULL;
}

static void mc_te_dispatch(struct mc_engine *e, struct mc_te_req *r);

void mc_te_req_done(struct mc_te_req *r, int status)
{
	struct mc_engine *e = r->e;

	if (status == -EXDEV && r->xport != MC_TE_XPORT_TCP && r->tcp_port &&
	    mc_loop_thread_is_current(e->lt)) {
		/* Not reachable by its transport (e.g. memory the owner cannot share): tcp. */
		r->xport = MC_TE_XPORT_TCP;
		r->seg_ctx = NULL;
		mc_te_dispatch(e, r);
		return;
	}
	if (r->on_done) {
		r->on_done(r, status);
		free(r);
		return;
	}
	pthread_mutex_lock(&e->mu);
	/* A failure may mean a restarted peer: fetch its descriptor again on the next open. */
	if (status && r->seg_id > 0 && (uint32_t)r->seg_id <= e->nsegs &&
	    !strcmp(e->segs[r->seg_id - 1].name, r->seg_name))
		e->segs[r->seg_id - 1].stale = 1;
	r->b->tasks[r->task].status = status ? STATUS_FAILED : STATUS_COMPLETED;
	r->b->tasks[r->task].bytes = status ? 0 : r->len;
	if (--r->b->pending == 0)
		pthread_cond_broadcast(&e->batch_cv);
	pthread_mutex_unlock(&e->mu);
	free(r);
}

struct mc_te_submit {
	struct mc_engine *e;
	struct mc_te_req **r;
	size_t n;
};

/* Hand one request to its transport on the loop thread; -EXDEV falls back to tcp. */
static void mc_te_dispatch(struct mc_engine *e, struct mc_te_req *r)
{
	const struct mc_te_transport_ops *ops;
	void *state;
	int rc;

	if (r->gpu) {
		rc = mc_te_gpu_submit(e, r);
		if (rc)
			mc_te_req_done(r, rc);
		return;
	}
	pthread_mutex_lock(&e->mu);
	state = e->xports[r->xport].state;
	ops = e->xports[r->xport].ops;
	pthread_mutex_unlock(&e->mu);
	rc = state ? ops->submit(state, r) : -ESHUTDOWN;
	if (rc)
		mc_te_req_done(r, rc);	/* -EXDEV: on to tcp */
}

void mc_te_req_dispatch(struct mc_engine *e, struct mc_te_req *r)
{
	mc_te_dispatch(e, r);
}

static void mc_te_submit_on_loop(void *arg)
{
	struct mc_te_submit *s = arg;
	size_t i;

	for (i = 0; i < s->n; i++)
		mc_te_dispatch(s->e, s->r[i]);
	free(s->r);
	free(s);
}

/* A read of objects a data server keeps in files (its file window), from host:port over tcp:
 * only that server can resolve those addresses, and it checks the range itself. */
static int mc_te_prepare_file_read(struct mc_engine *e, struct mc_te_batch *b, size_t task,
				   const struct transfer_request *r, const char *host,
				   uint16_t port, struct mc_te_req **out)
{
	struct mc_te_req *x;

	if (r->opcode != OPCODE_READ || port == 0 || host == NULL || *host == '\0' ||
	    strlen(host) >= sizeof(x->host) || !mc_memreg_in_files(r->target_offset, r->length))
		return STATUS_FAILED;
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return STATUS_FAILED;
	x->b = b;
	x->task = task;
	x->e = e;
	x->xport = MC_TE_XPORT_TCP;
	x->seg_id = r->target_id;
	x->opcode = MC_XFER_READ;
	x->local = r->source;
	x->remote = r->target_offset;
	x->len = r->length;
	snprintf(x->host, sizeof(x->host), "%s", host);
	x->tcp_port = port;
	*out = x;
	return STATUS_PENDING;
}

/* Check one request against its segment and build it; e->mu held.  Returns the task status
 * to record now (STATUS_PENDING when *out is to be dispatched). */
static int mc_te_prepare(struct mc_engine *e, struct mc_te_batch *b, size_t task,
			 const struct transfer_request *r, struct mc_te_req **out)
{
	struct mc_te_segment *seg = NULL;
	struct mc_te_req *x;
	uint32_t k;
	int ok = 0, xport;

	*out = NULL;
	if ((r->opcode != OPCODE_READ && r->opcode != OPCODE_WRITE) ||
	    (r->source == NULL && r->length) || r->target_offset + r->length < r->length)
		return STATUS_INVALID;
	if (r->length == 0)
		return STATUS_COMPLETED;
	if (r->target_id == LOCAL_SEGMENT && mc_memreg_in_files(r->target_offset, r->length)) {
		/* Our own objects kept in files (the store's SSD area): our data server reads
		 * them on its file workers, as it does for peers. */
		uint16_t port = e->xports[MC_TE_XPORT_TCP].state
					? mc_te_tcp_port(e->xports[MC_TE_XPORT_TCP].state)
					: 0;

		return mc_te_prepare_file_read(e, b, task, r, e->ip, port, out);
	}
	if (r->target_id == LOCAL_SEGMENT) {
		/* Our own memory: copy directly, within registered memory only. */
		if (!mc_memreg_check(e->reg, r->target_offset, r->length))
			return STATUS_FAILED;
		if (e->gpu && (e->gpu->is_device(r->source) ||
			       e->gpu->is_device((void *)(uintptr_t)r->target_offset))) {
			void *t = (void *)(uintptr_t)r->target_offset;

			if (r->opcode == OPCODE_WRITE ? mc_te_gpu_local_copy(e, t, r->source, r->length)
						      : mc_te_gpu_local_copy(e, r->source, t, r->length))
				return STATUS_FAILED;
		} else if (r->opcode == OPCODE_WRITE)
			memmove((void *)(uintptr_t)r->target_offset, r->source, r->length);
		else
			memmove(r->source, (void *)(uintptr_t)r->target_offset, r->length);
		b->tasks[task].bytes = r->length;
		return STATUS_COMPLETED;
	}
	if (r->target_id > 0 && (uint32_t)r->target_id <= e->nsegs && e->segs[r->target_id - 1].open)
		seg = &e->segs[r->target_id - 1];
	if (seg == NULL || seg->xport < 0)
		return STATUS_FAILED;
	xport = seg->xport;
	if (mc_memreg_in_files(r->target_offset, r->length)) {
		/* A peer's objects kept in files: only its tcp data server reads those, and it
		 * checks the range itself. */
		if (r->opcode != OPCODE_READ || seg->desc.tcp_data_port == 0 || seg->host[0] == '\0')
			return STATUS_FAILED;
		xport = MC_TE_XPORT_TCP;
		ok = 1;
	} else if (seg->xport == MC_TE_XPORT_FILE) {
		/* Files laid end to end from offset 0. */
		uint64_t total = 0;

		for (k = 0; k < seg->desc.nbuffers; k++)
			total += seg->desc.buffers[k].length;
		ok = r->target_offset + r->length <= total;
	} else {
		for (k = 0; k < seg->desc.nbuffers; k++)
			if (r->target_offset >= seg->desc.buffers[k].addr &&
			    r->target_offset + r->length <=
				    seg->desc.buffers[k].addr + seg->desc.buffers[k].length)
				ok = 1;
	}
	if (!ok)
		return STATUS_FAILED;	/* the peer would refuse it too */
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return STATUS_FAILED;
	x->b = b;
	x->task = task;
	x->e = e;
	x->xport = xport;
	x->seg_id = r->target_id;
	x->opcode = r->opcode == OPCODE_READ ? MC_XFER_READ : MC_XFER_WRITE;
	x->local = r->source;
	x->remote = r->target_offset;
	x->len = r->length;
	snprintf(x->seg_name, sizeof(x->seg_name), "%s", seg->name);
	snprintf(x->host, sizeof(x->host), "%s", seg->host);
	x->tcp_port = seg->desc.tcp_data_port;
	x->seg_ctx = xport == seg->xport ? seg->xport_ctx : NULL;
	/* GPU memory is staged, unless rdma carries this request and the GPU buffer is
	 * registered on the NICs. */
	x->gpu = e->gpu && e->gpu->is_device(r->source) &&
		 !(x->xport == MC_TE_XPORT_RDMA && e->xports[MC_TE_XPORT_RDMA].state &&
		   mc_te_rdma_covers(e->xports[MC_TE_XPORT_RDMA].state, r->source, r->length));
	*out = x;
	return STATUS_PENDING;
}

int submitTransfer(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries,
		   size_t count)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_submit *s;
	struct mc_te_batch *b;
	size_t i, first;

	if (e == NULL || (entries == NULL && count))
		return ERR_INVALID_ARGUMENT;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return ERR_MEMORY;
	s->r = calloc(count ? count : 1, sizeof(*s->r));
	if (s->r == NULL) {
		free(s);
		return ERR_MEMORY;
	}
	s->e = e;
	pthread_mutex_lock(&e->mu);
	b = mc_te_batch_find(e, batch_id);
	if (b == NULL || b->count + count > b->size) {
		pthread_mutex_unlock(&e->mu);
		free(s->r);
		free(s);
		return b == NULL ? ERR_INVALID_ARGUMENT : ERR_TOO_MANY_REQUESTS;
	}
	first = b->count;
	for (i = 0; i < count; i++) {
		struct mc_te_req *x;

		b->tasks[first + i].bytes = 0;
		b->tasks[first + i].status = mc_te_prepare(e, b, first + i, &entries[i], &x);
		if (x) {
			b->pending++;
			s->r[s->n++] = x;
		}
	}
	b->count += count;
	pthread_mutex_unlock(&e->mu);
	if (s->n && mc_loop_thread_call(e->lt, mc_te_submit_on_loop, s) == 0)
		return 0;
	for (i = 0; i < s->n; i++)
		mc_te_req_done(s->r[i], -ESHUTDOWN);
	free(s->r);
	free(s);
	return 0;
}
/* Batches whose same-host copies add up to no more than this are copied on the calling thread:
 * cheaper than two hand-offs and a worker wake-up per request. */
#define MC_TE_INLINE_BYTES (256u << 10)

/* Carry the batch's shm requests on this thread (e->mu not held); the rest stay in s. */
static void mc_te_run_inline(struct mc_engine *e, struct mc_te_submit *s)
{
	const struct mc_te_transport_ops *ops;
	void *state;
	size_t i, kept = 0;

	pthread_mutex_lock(&e->mu);
	state = e->xports[MC_TE_XPORT_SHM].state;
	ops = e->xports[MC_TE_XPORT_SHM].ops;
	pthread_mutex_unlock(&e->mu);
	for (i = 0; i < s->n; i++) {
		struct mc_te_req *r = s->r[i];
		int rc;

		if (r->xport != MC_TE_XPORT_SHM || r->gpu || state == NULL || ops->run_now == NULL) {
			s->r[kept++] = r;
			continue;
		}
		rc = ops->run_now(state, r);
		if (rc == -EXDEV && r->tcp_port) {
			/* Memory the owner cannot share: its tcp data server. */
			r->xport = MC_TE_XPORT_TCP;
			r->seg_ctx = NULL;
			s->r[kept++] = r;
			continue;
		}
		mc_te_req_done(r, rc);
	}
	s->n = kept;
}

int mc_te_transfer_wait(struct mc_engine *e, const struct transfer_request *x,
			const struct mc_te_endpoint *ep, size_t n, int *status)
{
	struct mc_te_submit *s = NULL;
	struct mc_te_batch *b;
	size_t i, failed = 0;
	uint64_t inline_bytes = 0;

	if (n == 0)
		return 0;
	b = calloc(1, sizeof(*b) + n * sizeof(b->tasks[0]));
	if (b)
		s = calloc(1, sizeof(*s));
	if (s)
		s->r = calloc(n, sizeof(*s->r));
	if (s == NULL || s->r == NULL) {
		for (i = 0; i < n; i++)
			status[i] = -ENOMEM;
		if (s)
			free(s->r);
		free(s);
		free(b);
		return (int)n;
	}
	/* A private batch: not on e->batches, so no API call can find or free it. */
	b->e = e;
	b->size = b->count = n;
	s->e = e;
	for (i = 0; i < n; i++) {
		/* Our own memory: copied here, outside the engine's lock. */
		const struct transfer_request *q = &x[i];
		void *t = (void *)(uintptr_t)q->target_offset;

		if (q->target_id != LOCAL_SEGMENT || q->source == NULL || q->length == 0 ||
		    (e->gpu && (e->gpu->is_device(q->source) || e->gpu->is_device(t))) ||
		    !mc_memreg_check(e->reg, q->target_offset, q->length))
			continue;
		if (q->opcode == OPCODE_WRITE)
			memmove(t, q->source, q->length);
		else
			memmove(q->source, t, q->length);
		b->tasks[i].status = STATUS_COMPLETED;
		b->tasks[i].bytes = q->length;
	}
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < n; i++) {
		struct mc_te_req *r;

		if (b->tasks[i].status == STATUS_COMPLETED)
			continue;
		if (x[i].target_id == MC_TE_SEG_ENDPOINT)
			b->tasks[i].status = ep ? mc_te_prepare_file_read(e, b, i, &x[i], ep[i].host,
									  ep[i].port, &r)
						: STATUS_FAILED;
		else
			b->tasks[i].status = mc_te_prepare(e, b, i, &x[i], &r);
		if (b->tasks[i].status != STATUS_PENDING)
			r = NULL;
		if (r) {
			b->pending++;
			s->r[s->n++] = r;
			inline_bytes += r->xport == MC_TE_XPORT_SHM ? r->len : 0;
		}
	}
	pthread_mutex_unlock(&e->mu);
	if (inline_bytes && inline_bytes <= MC_TE_INLINE_BYTES)
		mc_te_run_inline(e, s);
	if (s->n == 0 || mc_loop_thread_call(e->lt, mc_te_submit_on_loop, s) != 0) {
		for (i = 0; i < s->n; i++)
			mc_te_req_done(s->r[i], -ESHUTDOWN);
		free(s->r);
		free(s);
	}
	pthread_mutex_lock(&e->mu);
	while (b->pending)
		pthread_cond_wait(&e->batch_cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
	for (i = 0; i < n; i++) {
		status[i] = b->tasks[i].status == STATUS_COMPLETED ? 0 : -EIO;
		failed += status[i] != 0;
	}
	free(b);
	return (int)failed;
}

int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id,
		      struct transfer_status *status)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_batch *b;
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL || status == NULL)
		return rc;
	pthread_mutex_lock(&e->mu);
	b = mc_te_batch_find(e, batch_id);
	if (b && task_id < b->count) {
		status->status = b->tasks[task_id].status;
		status->transferred_bytes = b->tasks[task_id].bytes;
		rc = 0;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int mc_te_batch_wait(transfer_engine_t engine, batch_id_t batch_id)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_batch *b;
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL)
		return rc;
	pthread_mutex_lock(&e->mu);
	while ((b = mc_te_batch_find(e, batch_id)) != NULL && b->pending)
		pthread_cond_wait(&e->batch_cv, &e->mu);
	if (b)
		rc = 0;
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int freeBatchID(transfer_engine_t engine, batch_id_t batch_id)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_batch **pp, *b;
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL)
		return rc;
	pthread_mutex_lock(&e->mu);
	for (pp = &e->batches; (b = *pp) != NULL; pp = &b->next)
		if ((batch_id_t)(uintptr_t)b == batch_id) {
			if (b->pending) {
				rc = ERR_BATCH_BUSY;
				break;
			}
			*pp = b->next;
			free(b);
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int mc_te_first_buffer(transfer_engine_t engine, segment_handle_t seg, uint64_t *addr)
{
	struct mc_engine *e = MC_E(engine);
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL)
		return rc;
	pthread_mutex_lock(&e->mu);
	if (seg == LOCAL_SEGMENT && e->nbufs) {
		*addr = e->bufs[0].addr;
		rc = 0;
	} else if (seg > 0 && (uint32_t)seg <= e->nsegs && e->segs[seg - 1].desc.nbuffers) {
		*addr = e->segs[seg - 1].desc.buffers[0].addr;
		rc = 0;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

uint16_t mc_te_rpc_port(transfer_engine_t engine)
{
	return engine ? MC_E(engine)->rpc_port : 0;
}

int mc_te_probe(transfer_engine_t engine, const char *segment_name)
{
	const char *colon = segment_name ? strrchr(segment_name, ':') : NULL;
	char host[256], *reply = NULL;
	size_t len = 0;
	int rc;

	if (engine == NULL || colon == NULL || (size_t)(colon - segment_name) >= sizeof(host) ||
	    atoi(colon + 1) <= 0)
		return ERR_INVALID_ARGUMENT;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - segment_name), segment_name);
	rc = mc_te_hs_call(host, (uint16_t)atoi(colon + 1), MC_HS_PROBE, "{}", &reply, &len);
	if (rc == 0 && (reply == NULL || strstr(reply, "\"success\"") == NULL))
		rc = ERR_REJECT_HANDSHAKE;
	free(reply);
	return rc;
}

void mc_te_notify_free(struct mc_te_notify *n)
{
	while (n) {
		struct mc_te_notify *next = n->next;

		free(n->name);
		free(n->msg);
		free(n);
		n = next;
	}
}

struct mc_te_notify *mc_te_notify_take(transfer_engine_t engine)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_notify *n;

	if (e == NULL)
		return NULL;
	pthread_mutex_lock(&e->mu);
	n = e->notifies;
	e->notifies = NULL;
	e->notifies_tail = &e->notifies;
	e->nnotifies = 0;
	pthread_mutex_unlock(&e->mu);
	return n;
}

int mc_te_notify_send(transfer_engine_t engine, segment_handle_t seg, const char *name,
		      const char *msg)
{
	struct mc_engine *e = MC_E(engine);
	char host[256], *reply = NULL, *body;
	uint16_t port = 0;
	size_t len;
	json_t *j;
	int rc;

	if (e == NULL || name == NULL || msg == NULL)
		return ERR_INVALID_ARGUMENT;
	pthread_mutex_lock(&e->mu);
	if (seg > 0 && (uint32_t)seg <= e->nsegs) {
		snprintf(host, sizeof(host), "%s", e->segs[seg - 1].host);
		port = e->segs[seg - 1].rpc_port;
	}
	pthread_mutex_unlock(&e->mu);
	if (port == 0)
		return ERR_INVALID_ARGUMENT;
	j = json_pack("{ssss}", "name", name, "notify_msg", msg);
	body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (body == NULL)
		return ERR_MEMORY;
	rc = mc_te_hs_call(host, port, MC_HS_NOTIFY, body, &reply, &len);
	free(body);
	if (rc == 0 && (reply == NULL || strstr(reply, "success") == NULL))
		rc = ERR_REJECT_HANDSHAKE;
	free(reply);
	return rc;
}
