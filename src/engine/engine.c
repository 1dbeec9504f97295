/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine C API (include/mooncake/transfer_engine_c.h) over the TCP data plane,
 * and over RDMA once installTransport("rdma") succeeded (te_rdma.c, src/rdma).
 *
 * createTransferEngine starts a loop thread with the data server, the data client and the
 * handshake port; registered memory is both served to peers and published in this engine's
 * segment descriptor.  openSegment fetches a peer's descriptor (handshake or metadata service)
 * once and caches it.  submitTransfer checks every request against the target's published
 * buffers, then hands the batch to the loop; completions update per-task status under the
 * engine mutex, which getTransferStatus reads.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/errcode.h"
#include "common/log.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"

#define MC_E(x) ((struct mc_engine *)(x))

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

struct mc_te_loop_ctx {
	struct mc_engine *e;
	int rc;
	struct mc_waiter w;
};

static void mc_te_start_on_loop(void *arg)
{
	struct mc_te_loop_ctx *x = arg;
	struct event_base *base = mc_loop_thread_base(x->e->lt);
	int err = 0;

	x->e->data = mc_tcp_server_new(base, x->e->ip, 0, x->e->reg, &err);
	x->e->cli = mc_tcp_client_new(base, NULL);
	x->rc = x->e->data && x->e->cli ? 0 : ERR_SOCKET;
	mc_waiter_signal(&x->w, 0);
}

static void mc_te_stop_on_loop(void *arg)
{
	struct mc_te_loop_ctx *x = arg;

	mc_te_rdma_stop_on_loop(x->e);
	mc_tcp_client_free(x->e->cli);
	x->e->cli = NULL;
	mc_tcp_server_free(x->e->data);
	x->e->data = NULL;
	mc_waiter_signal(&x->w, 0);
}

static void mc_te_run(struct mc_engine *e, void (*fn)(void *), struct mc_te_loop_ctx *x)
{
	x->e = e;
	mc_waiter_init(&x->w);
	mc_loop_thread_call(e->lt, fn, x);
	mc_waiter_wait(&x->w);
	mc_waiter_fini(&x->w);
}

transfer_engine_t createTransferEngine(const char *metadata_conn_string,
				       const char *local_server_name, const char *ip_or_host_name,
				       uint64_t rpc_port, int auto_discover)
{
	struct mc_engine *e;
	struct mc_te_loop_ctx x;
	uint16_t port = rpc_port > 65535 ? 0 : (uint16_t)rpc_port;

	(void)auto_discover;
	if (metadata_conn_string == NULL || local_server_name == NULL)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return NULL;
	pthread_mutex_init(&e->mu, NULL);
	e->notifies_tail = &e->notifies;
	snprintf(e->meta_conn, sizeof(e->meta_conn), "%s", metadata_conn_string);
	e->p2p = !strcmp(metadata_conn_string, "P2PHANDSHAKE");
	if (!mc_te_kv_supported(metadata_conn_string)) {
		mc_log_err("transfer engine: metadata '%s' is not supported in this build "
			   "(P2PHANDSHAKE, http://, etcd:// with libcurl, redis:// with hiredis)",
			   metadata_conn_string);
		goto fail_early;
	}
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
	e->reg = mc_memreg_new();
	e->lt = mc_loop_thread_new("mc-engine");
	if (e->reg == NULL || e->lt == NULL || mc_loop_thread_start(e->lt))
		goto fail;
	mc_te_run(e, mc_te_start_on_loop, &x);
	if (x.rc || mc_te_hs_start(e, e->ip, &port))
		goto fail;
	e->rpc_port = port;
	e->tcp_installed = 1;
	if (e->p2p)
		snprintf(e->server_name, sizeof(e->server_name), "%s:%u", e->ip, port);
	else
		snprintf(e->server_name, sizeof(e->server_name), "%s", local_server_name);
	if (mc_te_meta_publish(e))
		goto fail;
	mc_log_info("transfer engine %s: data port %u, handshake port %u, metadata %s",
		    e->server_name, mc_tcp_server_port(e->data), port, e->meta_conn);
	return e;
fail:
	destroyTransferEngine(e);
	return NULL;
fail_early:
	pthread_mutex_destroy(&e->mu);
	free(e);
	return NULL;
}

int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len)
{
	int n;

	if (engine == NULL || buf_out == NULL)
		return ERR_INVALID_ARGUMENT;
	n = snprintf(buf_out, buf_len, "%s:%u", MC_E(engine)->ip, MC_E(engine)->rpc_port);
	return n < 0 || (size_t)n >= buf_len ? ERR_INVALID_ARGUMENT : 0;
}

transport_t installTransport(transfer_engine_t engine, const char *proto, void **args)
{
	/* rdma: args[0], when given, is the NIC priority matrix JSON. */
	if (engine && proto && !strcmp(proto, "rdma"))
		return mc_te_rdma_install(MC_E(engine), args ? (const char *)args[0] : NULL) ? NULL
											: engine;
	if (engine == NULL || proto == NULL || strcmp(proto, "tcp")) {
		if (proto)
			mc_log_warn("transfer engine: transport '%s' is not available in this build",
				    proto);
		return NULL;
	}
	MC_E(engine)->tcp_installed = 1;
	return engine;
}

int uninstallTransport(transfer_engine_t engine, const char *proto)
{
	if (engine && proto && !strcmp(proto, "rdma"))
		return mc_te_rdma_uninstall(MC_E(engine));
	if (engine == NULL || proto == NULL || strcmp(proto, "tcp"))
		return ERR_INVALID_ARGUMENT;
	MC_E(engine)->tcp_installed = 0;
	return 0;
}

void destroyTransferEngine(transfer_engine_t engine)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_loop_ctx x;
	uint32_t i;

	if (e == NULL)
		return;
	if (e->lt) {
		if (e->rpc_port)
			mc_te_meta_unpublish(e);
		mc_te_hs_stop(e);
		mc_te_run(e, mc_te_stop_on_loop, &x);
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
	free(e->bufs);
	mc_memreg_free(e->reg);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
			int remote_accessible)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_buffer *nb;
	int rc;

	if (e == NULL || addr == NULL || length == 0)
		return ERR_INVALID_ARGUMENT;
	rc = mc_memreg_add(e->reg, (uint64_t)(uintptr_t)addr, length);
	if (rc == -EEXIST)
		return ERR_ADDRESS_OVERLAPPED;
	if (rc)
		return ERR_INVALID_ARGUMENT;
	rc = mc_te_rdma_register(e, addr, length, location, remote_accessible);
	if (rc) {
		mc_memreg_remove(e->reg, (uint64_t)(uintptr_t)addr);
		return rc;
	}
	if (!remote_accessible)
		return 0;
	pthread_mutex_lock(&e->mu);
	nb = e->nbufs < MC_TE_MAX_BUFFERS ? realloc(e->bufs, (e->nbufs + 1) * sizeof(*nb)) : NULL;
	if (nb) {
		e->bufs = nb;
		nb[e->nbufs].addr = (uint64_t)(uintptr_t)addr;
		nb[e->nbufs].length = length;
		e->nbufs++;
	}
	pthread_mutex_unlock(&e->mu);
	if (nb == NULL) {
		mc_te_rdma_unregister(e, addr);
		mc_memreg_remove(e->reg, (uint64_t)(uintptr_t)addr);
		return ERR_MEMORY;
	}
	return mc_te_meta_publish(e);
}

int unregisterLocalMemory(transfer_engine_t engine, void *addr)
{
	struct mc_engine *e = MC_E(engine);
	uint32_t i;

	if (e == NULL || addr == NULL)
		return ERR_INVALID_ARGUMENT;
	if (mc_memreg_remove(e->reg, (uint64_t)(uintptr_t)addr))
		return ERR_ADDRESS_NOT_REGISTERED;
	mc_te_rdma_unregister(e, addr);
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < e->nbufs; i++)
		if (e->bufs[i].addr == (uint64_t)(uintptr_t)addr) {
			e->bufs[i] = e->bufs[--e->nbufs];
			break;
		}
	pthread_mutex_unlock(&e->mu);
	return mc_te_meta_publish(e);
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

static segment_handle_t mc_te_open(struct mc_engine *e, const char *name, int cached)
{
	struct mc_te_segment seg, *ns;
	uint32_t i;
	int rc;

	if (e == NULL || name == NULL || *name == '\0')
		return ERR_INVALID_ARGUMENT;
	if (!strcmp(name, e->server_name))
		return LOCAL_SEGMENT;
	pthread_mutex_lock(&e->mu);
	for (i = 0; cached && i < e->nsegs; i++)
		if (e->segs[i].open && !strcmp(e->segs[i].name, name)) {
			pthread_mutex_unlock(&e->mu);
			return (segment_handle_t)(i + 1);
		}
	pthread_mutex_unlock(&e->mu);
	rc = mc_te_meta_fetch(e, name, &seg);
	if (rc) {
		mc_log_warn("transfer engine: cannot open segment %s: %d", name, rc);
		return rc;
	}
	seg.open = 1;
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < e->nsegs; i++)
		if (!strcmp(e->segs[i].name, name)) {
			mc_te_desc_fini(&e->segs[i].desc);
			e->segs[i] = seg;
			pthread_mutex_unlock(&e->mu);
			return (segment_handle_t)(i + 1);
		}
	ns = e->nsegs < MC_TE_MAX_SEGMENTS ? realloc(e->segs, (e->nsegs + 1) * sizeof(*ns)) : NULL;
	if (ns == NULL) {
		pthread_mutex_unlock(&e->mu);
		mc_te_desc_fini(&seg.desc);
		return ERR_MEMORY;
	}
	e->segs = ns;
	e->segs[e->nsegs++] = seg;
	i = e->nsegs;
	pthread_mutex_unlock(&e->mu);
	return (segment_handle_t)i;
}

segment_handle_t openSegment(transfer_engine_t engine, const char *segment_name)
{
	return mc_te_open(MC_E(engine), segment_name, 1);
}

segment_handle_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name)
{
	return mc_te_open(MC_E(engine), segment_name, 0);
}

int closeSegment(transfer_engine_t engine, segment_handle_t seg_id)
{
	struct mc_engine *e = MC_E(engine);
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL)
		return rc;
	if (seg_id == LOCAL_SEGMENT)
		return 0;
	pthread_mutex_lock(&e->mu);
	if (seg_id > 0 && (uint32_t)seg_id <= e->nsegs && e->segs[seg_id - 1].open) {
		e->segs[seg_id - 1].open = 0;
		rc = 0;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int syncSegmentCache(transfer_engine_t engine)
{
	struct mc_engine *e = MC_E(engine);
	uint32_t i, n;
	char name[256];

	if (e == NULL)
		return ERR_INVALID_ARGUMENT;
	pthread_mutex_lock(&e->mu);
	n = e->nsegs;
	pthread_mutex_unlock(&e->mu);
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&e->mu);
		snprintf(name, sizeof(name), "%s", e->segs[i].name);
		pthread_mutex_unlock(&e->mu);
		mc_te_open(e, name, 0);
	}
	return 0;
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

struct mc_te_xfer {
	struct mc_te_batch *b;
	size_t task;
	char host[256];
	uint16_t port;
	int opcode;
	void *local;
	uint64_t remote, len;
	struct mc_rdma_peer *rdma;	/* set: go over rdma (a reference) */
};

struct mc_te_submit {
	struct mc_engine *e;
	struct mc_te_xfer *x;
	size_t n;
};

static void mc_te_on_done(void *arg, int status)
{
	struct mc_te_xfer *x = arg;
	struct mc_engine *e = x->b->e;

	pthread_mutex_lock(&e->mu);
	x->b->tasks[x->task].status = status ? STATUS_FAILED : STATUS_COMPLETED;
	x->b->tasks[x->task].bytes = status ? 0 : x->len;
	x->b->pending--;
	pthread_mutex_unlock(&e->mu);
	free(x);
}

static void mc_te_submit_on_loop(void *arg)
{
	struct mc_te_submit *s = arg;
	size_t i;

	for (i = 0; i < s->n; i++) {
		struct mc_te_xfer *x = malloc(sizeof(*x));

		if (x == NULL) {
			pthread_mutex_lock(&s->e->mu);
			s->x[i].b->tasks[s->x[i].task].status = STATUS_FAILED;
			s->x[i].b->pending--;
			pthread_mutex_unlock(&s->e->mu);
			mc_te_rdma_peer_unref(s->x[i].rdma);
			continue;
		}
		*x = s->x[i];
		if (x->rdma) {
			/* The request holds its own reference; done (later, on the loop) frees x. */
			struct mc_rdma_peer *p = x->rdma;
			int rc = mc_te_rdma_submit(s->e, p, x->opcode, x->local, x->remote, x->len,
						   mc_te_on_done, x);

			mc_te_rdma_peer_unref(p);
			if (rc)
				mc_te_on_done(x, rc);
			continue;
		}
		if (mc_tcp_client_submit(s->e->cli, x->host, x->port, x->opcode, x->local, x->remote,
					 x->len, mc_te_on_done, x) != 0)
			mc_te_on_done(x, -1);
	}
	free(s->x);
	free(s);
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
	s->x = calloc(count ? count : 1, sizeof(*s->x));
	if (s->x == NULL) {
		free(s);
		return ERR_MEMORY;
	}
	s->e = e;
	pthread_mutex_lock(&e->mu);
	b = mc_te_batch_find(e, batch_id);
	if (b == NULL || b->count + count > b->size) {
		pthread_mutex_unlock(&e->mu);
		free(s->x);
		free(s);
		return b == NULL ? ERR_INVALID_ARGUMENT : ERR_TOO_MANY_REQUESTS;
	}
	first = b->count;
	for (i = 0; i < count; i++) {
		struct transfer_request *r = &entries[i];
		struct mc_te_task *t = &b->tasks[first + i];
		struct mc_te_segment *seg = NULL;
		uint32_t k;
		int ok = 0;

		t->status = STATUS_WAITING;
		if ((r->opcode != OPCODE_READ && r->opcode != OPCODE_WRITE) ||
		    (r->source == NULL && r->length) || r->target_offset + r->length < r->length) {
			t->status = STATUS_INVALID;
			continue;
		}
		if (r->length == 0) {
			t->status = STATUS_COMPLETED;
			continue;
		}
		if (r->target_id == LOCAL_SEGMENT) {
			/* Our own memory: copy directly, within registered memory only. */
			if (mc_memreg_check(e->reg, r->target_offset, r->length)) {
				if (r->opcode == OPCODE_WRITE)
					memmove((void *)(uintptr_t)r->target_offset, r->source,
						r->length);
				else
					memmove(r->source, (void *)(uintptr_t)r->target_offset,
						r->length);
				t->status = STATUS_COMPLETED;
				t->bytes = r->length;
			} else {
				t->status = STATUS_FAILED;
			}
			continue;
		}
		if (r->target_id > 0 && (uint32_t)r->target_id <= e->nsegs &&
		    e->segs[r->target_id - 1].open)
			seg = &e->segs[r->target_id - 1];
		for (k = 0; seg && k < seg->desc.nbuffers; k++)
			if (r->target_offset >= seg->desc.buffers[k].addr &&
			    r->target_offset + r->length <=
				    seg->desc.buffers[k].addr + seg->desc.buffers[k].length)
				ok = 1;
		if (!ok) {
			/* Unknown segment, or a range outside what the peer published: the peer
			 * would refuse it too. */
			t->status = STATUS_FAILED;
			continue;
		}
		t->status = STATUS_PENDING;
		b->pending++;
		s->x[s->n].b = b;
		s->x[s->n].task = first + i;
		snprintf(s->x[s->n].host, sizeof(s->x[s->n].host), "%s", seg->host);
		s->x[s->n].port = seg->desc.tcp_data_port;
		s->x[s->n].opcode = r->opcode == OPCODE_READ ? MC_XFER_READ : MC_XFER_WRITE;
		s->x[s->n].local = r->source;
		s->x[s->n].remote = r->target_offset;
		s->x[s->n].len = r->length;
		/* rdma when the target publishes it and we have it installed; tcp otherwise. */
		s->x[s->n].rdma = seg->desc.rdma && e->rdma ? mc_te_rdma_peer_ref(seg->desc.rdma)
							     : NULL;
		s->n++;
	}
	b->count += count;
	pthread_mutex_unlock(&e->mu);
	if (s->n == 0 || mc_loop_thread_call(e->lt, mc_te_submit_on_loop, s) != 0) {
		pthread_mutex_lock(&e->mu);
		for (i = 0; i < s->n; i++) {
			b->tasks[s->x[i].task].status = STATUS_FAILED;
			b->pending--;
			mc_te_rdma_peer_unref(s->x[i].rdma);
		}
		pthread_mutex_unlock(&e->mu);
		free(s->x);
		free(s);
	}
	return 0;
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
