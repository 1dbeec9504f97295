/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_ENGINE_H
#define MC_ENGINE_H

/*
 * Transfer engine internals (include/mooncake/transfer_engine_c.h is the API).
 *
 * struct mc_engine owns a loop thread with the TCP data server and client (src/transfer) and the
 * handshake server (handshake.c), the registered-memory set, the table of opened peer segments
 * and the batches.  Metadata (te_meta.c) is published and fetched on the calling API thread,
 * never on the loop.
 */
#include <pthread.h>
#include <stdint.h>

#include <jansson.h>

#include "reactor/loop_thread.h"
#include "transfer/memreg.h"
#include "transfer/tcp.h"

#define MC_TE_MAX_BUFFERS 65536
#define MC_TE_MAX_SEGMENTS 4096

struct mc_te_buffer {
	uint64_t addr;
	uint64_t length;
};

struct mc_rdma;
struct mc_rdma_peer;

/* A segment descriptor (reference §3.2, tcp fields; rdma ones parsed into rdma). */
struct mc_te_desc {
	char name[256];
	char protocol[16];
	uint16_t tcp_data_port;
	int tcp_proto_version;
	struct mc_te_buffer *buffers;
	uint32_t nbuffers;
	struct mc_rdma_peer *rdma;	/* protocol "rdma": NICs, rkeys, matrix (a reference) */
};

struct mc_te_segment {
	char name[256];
	char host[256];		/* where its data server listens */
	uint16_t rpc_port;	/* its handshake port */
	struct mc_te_desc desc;
	int open;
};

struct mc_te_task {
	int status;		/* STATUS_* */
	uint64_t bytes;
};

struct mc_te_batch {
	struct mc_te_batch *next;
	struct mc_engine *e;
	size_t size, count, pending;
	struct mc_te_task tasks[];
};

struct mc_engine {
	pthread_mutex_t mu;
	struct mc_loop_thread *lt;
	struct mc_memreg *reg;
	struct mc_tcp_server *data;
	struct mc_tcp_client *cli;
	struct mc_te_hs_server *hs;
	char meta_conn[512];
	int p2p;
	char server_name[256];	/* our segment name */
	char ip[64];		/* advertised address */
	uint16_t rpc_port;	/* handshake port */
	struct mc_te_buffer *bufs;	/* registered, for the descriptor */
	uint32_t nbufs;
	struct mc_te_segment *segs;	/* handle i -> segs[i - 1] */
	uint32_t nsegs;
	struct mc_te_batch *batches;
	int tcp_installed;
	struct mc_te_notify *notifies;	/* received, oldest first */
	struct mc_te_notify **notifies_tail;
	uint32_t nnotifies;
	struct mc_rdma *rdma;	/* installed rdma transport (loop-owned; set under mu) */
};

/* A notification another engine sent us (handshake type Notify). */
struct mc_te_notify {
	struct mc_te_notify *next;
	char *name;
	char *msg;
};

/* Send {name, notify_msg} to the engine behind an open segment.  0 or a negative ERR_*. */
int mc_te_notify_send(void *engine, int32_t seg, const char *name, const char *msg);
/* Take every received notification (a list the caller frees with mc_te_notify_free). */
struct mc_te_notify *mc_te_notify_take(void *engine);
void mc_te_notify_free(struct mc_te_notify *n);

/* te_meta.c: descriptors as JSON and the metadata store. */
char *mc_te_desc_to_json(const struct mc_engine *e);	/* malloc'ed, needs e->mu held */
int mc_te_desc_from_json(const char *json, size_t len, struct mc_te_desc *d);
void mc_te_desc_fini(struct mc_te_desc *d);
int mc_te_meta_publish(struct mc_engine *e);		/* segment descriptor + rpc_meta */
int mc_te_meta_unpublish(struct mc_engine *e);
/* Fetch a peer's descriptor and data host by segment name. */
int mc_te_meta_fetch(struct mc_engine *e, const char *name, struct mc_te_segment *seg);

/* te_kv.c: the metadata store behind e->meta_conn (http://, etcd://, redis://). */
int mc_te_kv_supported(const char *conn);
int mc_te_kv_put(struct mc_engine *e, const char *key, const char *value);
/* 0 with a malloc'ed NUL-terminated value, -ENOENT when missing, or a negative ERR_*. */
int mc_te_kv_get(struct mc_engine *e, const char *key, char **value, size_t *len);
int mc_te_kv_del(struct mc_engine *e, const char *key);

/* handshake.c */
struct mc_te_hs_server;
/* Listen on ip:*port (0: any in [15000, 17000]) on the engine's loop. */
int mc_te_hs_start(struct mc_engine *e, const char *bind_ip, uint16_t *port);
void mc_te_hs_stop(struct mc_engine *e);
/* Send one handshake frame to host:port and read the reply (blocking, bounded by timeouts).
 * Returns 0 with a malloc'ed reply, or a negative ERR_*. */
int mc_te_hs_call(const char *host, uint16_t port, uint8_t type, const char *json, char **reply,
		  size_t *reply_len);

/* te_rdma.c: the rdma transport (src/rdma) in the engine; failures logged there. */
struct mc_verbs_ops;
/* Process-wide: the verbs the next installs use (NULL: libibverbs).  For tests. */
void mc_te_rdma_set_verbs(const struct mc_verbs_ops *ops);
int mc_te_rdma_install(struct mc_engine *e, const char *matrix);
int mc_te_rdma_uninstall(struct mc_engine *e);
void mc_te_rdma_stop_on_loop(struct mc_engine *e);
int mc_te_rdma_register(struct mc_engine *e, void *addr, size_t len, const char *location,
			int remote_accessible);
void mc_te_rdma_unregister(struct mc_engine *e, void *addr);
/* Our descriptor's rdma fields (protocol, devices, buffers, priority_matrix); e->mu held. */
int mc_te_rdma_desc_fill(const struct mc_engine *e, json_t *desc);
/* A peer descriptor's rdma fields into d->rdma (left NULL if unusable). */
void mc_te_rdma_peer_parse(json_t *desc, struct mc_te_desc *d);
void mc_te_rdma_peer_set_addr(struct mc_te_desc *d, const char *host, uint16_t port);
struct mc_rdma_peer *mc_te_rdma_peer_ref(struct mc_rdma_peer *p);
void mc_te_rdma_peer_unref(struct mc_rdma_peer *p);
/* A Connection frame's reply (malloc'ed), or NULL without rdma.  Loop thread. */
char *mc_te_rdma_on_connection(struct mc_engine *e, const char *json, size_t len);
/* Loop thread.  0 (done runs later on the loop) or a negative ERR_* (done not called). */
int mc_te_rdma_submit(struct mc_engine *e, struct mc_rdma_peer *peer, int opcode, void *local,
		      uint64_t remote, uint64_t len, void (*done)(void *, int), void *arg);

/* For the Python binding: the first buffer a segment publishes, and the handshake port. */
int mc_te_first_buffer(void *engine, int32_t seg, uint64_t *addr);
uint16_t mc_te_rpc_port(void *engine);
/* Probe a peer's handshake port (segment name "ip:port", or a name from the metadata
 * service).  0 when it answered {"status":"success"}. */
int mc_te_probe(void *engine, const char *segment_name);

enum mc_te_hs_type {
	MC_HS_CONNECTION = 0,
	MC_HS_METADATA = 1,
	MC_HS_NOTIFY = 2,
	MC_HS_PROBE = 3,
};

#endif
