/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine C API (include/mooncake/transfer_engine_c.h): engine life cycle,
 * transports, registered memory, batches.
 *
 * createTransferEngine starts a loop thread, installs tcp (data server + client) and shm, and
 * starts the handshake port; mc_engine_new does the same for a store handle on the handle's
 * own loop.  Registered memory is both served to peers and published in this engine's segment
 * descriptor (built from the installed transports' fields).  Segments are opened in
 * te_segment.c, batches and transfers run in te_batch.c.  Transports are called without e->mu
 * held, except describe.
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
#include "common/auth.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/te_gpu.h"
#include "segment/segmem.h"
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


int mc_te_nic_slot(struct mc_engine *e, void **state)
{
	int k, slot = -1;

	*state = NULL;
	pthread_mutex_lock(&e->mu);
	for (k = 0; k < MC_TE_NXPORTS && slot < 0; k++)
		if (e->xports[k].state && e->xports[k].ops->register_local) {
			slot = k;
			*state = e->xports[k].state;
		}
	pthread_mutex_unlock(&e->mu);
	return slot;
}

/* MC_LOG_LEVEL (upstream's variable): debug, info, warning or error. */
static void mc_te_log_level_from_env(void)
{
	const char *v = getenv("MC_LOG_LEVEL");

	if (v)
		(void)mc_log_set_level_name(v);
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
	pthread_cond_init(&e->open_cv, NULL);
	e->notifies_tail = &e->notifies;
	e->hs_timeout_ms = 5000;
	snprintf(e->meta_conn, sizeof(e->meta_conn), "%s", meta_conn);
	e->reg = mc_memreg_new();
	if (e->reg == NULL) {
		pthread_cond_destroy(&e->open_cv);
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
	{
		char err[512];

		if (mc_auth_load_env(&e->auth, err, sizeof(err)) != 0) {
			mc_log_err("transfer engine: %s", err);
			goto fail;
		}
	}
	e->auto_discover = auto_discover != 0;
	e->p2p = !strcmp(metadata_conn_string, "P2PHANDSHAKE");
	{
		/* Same-host peers' pages mapped ahead, unless MC_STORE_POPULATE says no. */
		struct mc_segmem_opts mo;
		char err[256];

		e->peer_populate = mc_segmem_opts_env(&mo, err, sizeof(err)) == 0 && mo.populate;
	}
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
	 * and always with MC_FORCE_TCP; shm alone with MC_FORCE_SHM). */
	if (e->auto_discover && mc_te_forced_slot() < 0 &&
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
	e->auth = mc_auth_ref(o->auth);
	e->publish = strcmp(meta, "P2PHANDSHAKE") != 0;
	e->peer_populate = o->peer_populate;
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

	int k;

	/* The state is freed only after it is cleared under mu. */
	pthread_mutex_lock(&e->mu);
	for (k = 0; k < MC_TE_NXPORTS && s == NULL; k++)
		if (e->xports[k].state && e->xports[k].ops->topology)
			s = e->xports[k].ops->topology(e->xports[k].state);
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
	mc_auth_unref(e->auth);
	pthread_cond_destroy(&e->open_cv);
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
	void *nic;
	int slot = mc_te_nic_slot(e, &nic), rc;

	if (slot >= 0) {
		rc = mc_te_known[slot]->register_local(nic, addr, length, location, 1);
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
	void *nic;
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
	/* GPU memory registered on the NICs directly is in no list but the NIC transport's. */
	if (!published && (k = mc_te_nic_slot(e, &nic)) >= 0 &&
	    mc_te_known[k]->unregister_local(nic, addr) == 0)
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

/* The peer's handshake port comes from its published descriptor (openSegment resolves the
 * name through the metadata service, or through the name's own port with P2PHANDSHAKE); only a
 * name that cannot be resolved is dialled at the port it carries. */
int mc_te_probe(transfer_engine_t engine, const char *segment_name)
{
	struct mc_engine *e = MC_E(engine);
	const char *colon = segment_name ? strrchr(segment_name, ':') : NULL;
	char host[256], *reply = NULL;
	segment_handle_t seg;
	uint16_t port = 0;
	size_t len = 0;
	int rc;

	if (e == NULL || segment_name == NULL || *segment_name == '\0')
		return ERR_INVALID_ARGUMENT;
	seg = openSegment(engine, segment_name);
	pthread_mutex_lock(&e->mu);
	if (seg > 0 && (uint32_t)seg <= e->nsegs && e->segs[seg - 1].rpc_port) {
		snprintf(host, sizeof(host), "%s", e->segs[seg - 1].host);
		port = e->segs[seg - 1].rpc_port;
	}
	pthread_mutex_unlock(&e->mu);
	if (port == 0) {
		if (colon == NULL || (size_t)(colon - segment_name) >= sizeof(host) ||
		    atoi(colon + 1) <= 0 || atoi(colon + 1) > 65535)
			return ERR_INVALID_ARGUMENT;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - segment_name), segment_name);
		port = (uint16_t)atoi(colon + 1);
	}
	rc = mc_te_hs_call_within(e->auth, host, port, MC_HS_PROBE, "{}", &reply, &len, 5000);
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
	rc = mc_te_hs_call_within(e->auth, host, port, MC_HS_NOTIFY, body, &reply, &len, 5000);
	free(body);
	if (rc == 0 && (reply == NULL || strstr(reply, "success") == NULL))
		rc = ERR_REJECT_HANDSHAKE;
	free(reply);
	return rc;
}
