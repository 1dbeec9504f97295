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

#include "engine/transport.h"
#include "reactor/loop_thread.h"
#include "transfer/memreg.h"
#include "transfer/tcp.h"

#define MC_TE_MAX_BUFFERS 65536
#define MC_TE_MAX_SEGMENTS 4096
#define MC_TE_OPENING 8		/* opens of distinct names fetched at once, one each */

struct mc_te_buffer {
	uint64_t addr;
	uint64_t length;
	int fd;			/* ours: a descriptor of the shared file behind it, or -1 */
	uint64_t fd_off;	/* and the offset of addr in that file */
};

/* A segment descriptor (doc/protocol.md section 4).  buffers are what every transport
 * range-checks against: memory ranges, or for a file segment (protocol "nvmeof") the files laid
 * end to end from offset 0.  raw keeps the whole JSON object for transport-specific fields. */
struct mc_te_desc {
	char name[256];
	char protocol[16];
	uint16_t tcp_data_port;
	int tcp_proto_version;
	struct mc_te_buffer *buffers;
	uint32_t nbuffers;
	json_t *raw;
};

/* Transport slots in selection order: the first installed transport whose match accepts a
 * segment serves it. */
enum mc_te_xport_slot {
	MC_TE_XPORT_FILE = 0,
	MC_TE_XPORT_SHM,
	MC_TE_XPORT_RDMA,
	MC_TE_XPORT_TCP,
	MC_TE_NXPORTS
};

struct mc_te_segment {
	char name[256];
	char host[256];		/* where its data server listens */
	uint16_t rpc_port;	/* its handshake port */
	struct mc_te_desc desc;
	int open;
	int xport;		/* enum mc_te_xport_slot serving it, -1 none */
	void *xport_ctx;	/* that transport's per-segment state */
	int64_t fetched_ms;	/* monotonic time of the last descriptor fetch */
	int stale;		/* a request failed: fetch again before the next use */
};

struct mc_te_task {
	int status;		/* STATUS_* */
	uint64_t bytes;
	int has_crc;		/* the transport computed crc, the CRC-64 of the bytes read */
	uint64_t crc;
};

struct mc_te_batch {
	struct mc_te_batch *next;
	struct mc_engine *e;
	size_t size, count, pending;
	/* A store transfer's batch (mc_te_transfer_start): its own condition, signalled when
	 * pending reaches 0, or at every completion when doneq lists them (task indices in
	 * completion order, ndone so far).  NULL: e->batch_cv. */
	pthread_cond_t *cv;
	uint32_t *doneq;
	size_t ndone;
	char nic_hint[64];	/* a local NIC its rdma requests use first (mc_te_batch_nic_hint) */
	struct mc_te_task tasks[];
};

struct mc_engine {
	pthread_mutex_t mu;
	pthread_cond_t batch_cv;	/* broadcast when a batch's pending count reaches 0 */
	struct mc_loop_thread *lt;
	int own_lt;		/* lt was started by the engine (else it is its owner's) */
	int has_tcp_opts;	/* tcp_opts bound the tcp transport's transfers */
	struct mc_tcp_client_opts tcp_opts;
	unsigned hs_timeout_ms;	/* handshake calls: connect and each read/write */
	int publish;		/* publish our descriptor to the metadata store at meta_conn */
	int peer_populate;	/* map same-host peers' populated pages ahead of writes */
	struct mc_memreg *reg;
	struct {
		const struct mc_te_transport_ops *ops;
		void *state;	/* NULL: not installed */
	} xports[MC_TE_NXPORTS];
	struct mc_te_hs_server *hs;
	const char *rdma_matrix;	/* during installTransport("rdma", args) only */
	int auto_discover;		/* createTransferEngine's flag */
	char meta_conn[512];
	int p2p;		/* peers' descriptors come from their handshake port ("ip:port") */
	char server_name[256];	/* our segment name */
	char ip[64];		/* advertised address */
	uint16_t rpc_port;	/* handshake port */
	struct mc_te_buffer *bufs;	/* registered, for the descriptor */
	uint32_t nbufs;
	struct mc_te_segment *segs;	/* handle i -> segs[i - 1] */
	uint32_t nsegs;
	char opening[MC_TE_OPENING][256];	/* names an open is fetching now (mu; "" free):
						 * another open of the same name waits for it
						 * (open_cv) instead of attaching twice */
	pthread_cond_t open_cv;
	struct mc_te_batch *batches;
	const struct mc_gpu_ops *gpu;	/* NULL: no GPU at run time */
	struct mc_te_pool *gpu_pool;
	struct mc_te_gpu_stager_node *gpu_stagers;
	int refresh_s;		/* MC_TE_METADATA_REFRESH_INTERVAL_SECONDS, 0 = off */
	int refresh_stop;
	pthread_t refresher;
	pthread_cond_t refresh_cv;
	struct mc_te_notify *notifies;	/* received, oldest first */
	struct mc_te_notify **notifies_tail;
	uint32_t nnotifies;
	struct mc_auth *auth;	/* the cluster secret every port of the engine requires (NULL: none) */
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

int64_t mc_te_now_ms(void);

/*
 * An engine for a component of this process (the store client) rather than for the C API's
 * createTransferEngine.  It may run on its owner's loop thread, so that one loop serves the
 * owner's sockets and the engine's data server, data client, handshake and shm listener.
 */
struct mc_engine_opts {
	const char *server_name;	/* our segment name, kept as given ("host:port") */
	const char *ip;			/* advertised and bound address */
	uint16_t rpc_port;		/* handshake port (0: any free one) */
	/* A metadata URL (http://, etcd://, redis://) to publish our descriptor to, best
	 * effort, or NULL.  Peers are always found through their handshake port. */
	const char *meta_conn;
	struct mc_loop_thread *lt;	/* the owner's started loop, or NULL for the engine's own */
	const struct mc_tcp_client_opts *tcp;	/* bounds of tcp transfers, or NULL */
	unsigned hs_timeout_ms;		/* 0: 5000 */
	int shm;			/* install the same-host shm transport */
	int peer_populate;		/* map same-host peers' populated pages ahead of writes */
	struct mc_auth *auth;		/* the cluster secret (NULL: an open cluster); the engine
					   takes a reference */
};

/* NULL on failure (logged).  Free with destroyTransferEngine, before the owner's loop stops. */
struct mc_engine *mc_engine_new(const struct mc_engine_opts *o);

/* A data server by address, for reads of objects it keeps in files (its file window), which
 * have no segment to open: target_id MC_TE_SEG_ENDPOINT and ep[i] say where. */
#define MC_TE_SEG_ENDPOINT (-1000)
struct mc_te_endpoint {
	const char *host;
	uint16_t port;
	/* For any request of mc_te_transfer_start: a local NIC to carry it first (rdma), or NULL.
	 * The string must stay valid until the transfer finishes. */
	const char *nic_hint;
};

/* Transfers for the store: x[i] goes to the open segment x[i].target_id (LOCAL_SEGMENT: our own
 * memory, copied on this thread), or with MC_TE_SEG_ENDPOINT to ep[i] (ep may be NULL
 * otherwise).  mc_te_transfer_start submits them all and returns (the caller may work on
 * something else meanwhile); mc_te_transfer_finish waits for the last, calling on_done (when
 * not NULL) on the waiting thread for each request as it completes, in completion order, with
 * its index and status (without notify: once all have completed, in index order, which costs
 * the waiting thread one wake-up for the whole batch); status[i] becomes 0 or a negative code.
 *
 * want_crc (may be NULL; in and out): requests whose CRC-64 the caller wants.  Where the bytes
 * pass through a core anyway the engine computes it on the way and on_done gets it (crc not
 * NULL): our own memory and same-host shm (in the copy), tcp READs (each piece as it lands),
 * GPU memory (on the pinned staging chunks; such a request is always staged when its CRC is
 * wanted, even where rdma could reach the GPU directly).  Same-host WRITEs that go to the
 * engine's workers and tcp WRITEs from host memory are left to the caller, who has a core free
 * while the workers or the loop thread move the bytes, as are rdma and file requests.  On return want_crc[i] is cleared for every request whose CRC
 * the engine will not deliver, so the caller computes those itself while the transfer runs.
 * finish returns the number that failed and frees t.  start returns NULL only when out of
 * memory. */
struct transfer_request;
struct mc_te_inflight;
typedef void (*mc_te_done_fn)(void *arg, size_t i, int status, const uint64_t *crc);
struct mc_te_inflight *mc_te_transfer_start(struct mc_engine *e, const struct transfer_request *x,
					    const struct mc_te_endpoint *ep, size_t n, int notify,
					    uint8_t *want_crc);
int mc_te_transfer_finish(struct mc_te_inflight *t, int *status, mc_te_done_fn on_done,
			  void *arg);
/* start then finish without on_done. */
int mc_te_transfer_wait(struct mc_engine *e, const struct transfer_request *x,
			const struct mc_te_endpoint *ep, size_t n, int *status);

/* Requests submitted to the batch from now on prefer the local NIC named nic (upstream's
 * nic_hint; NULL or "" clears it).  Only rdma has NICs to choose; an unknown name changes
 * nothing.  0, or ERR_INVALID_ARGUMENT for an unknown batch or a name over 63 bytes. */
int mc_te_batch_nic_hint(void *engine, uint64_t batch_id, const char *nic);

/* Wait until no request of the batch is pending (any thread but the engine's loop).  0, or
 * ERR_INVALID_ARGUMENT for an unknown batch. */
int mc_te_batch_wait(void *engine, uint64_t batch_id);

/* te_segment.c: the one transport slot MC_FORCE_TCP (tcp) or MC_FORCE_SHM (shm) leaves to
 * peers, or -1 when neither is set. */
int mc_te_forced_slot(void);

/* engine.c: the transports this build knows, by slot (NULL: not built). */
extern const struct mc_te_transport_ops *const mc_te_known[MC_TE_NXPORTS];

/* Install rdma on a device list ("mlx5_0,mlx5_1": every NIC preferred everywhere), or with
 * devices NULL/"" on the discovered topology (src/transfer/nic_topo.c).  0 installed; 1 no NIC was found
 * (or this build has no rdma) and tcp carries the data, with a warning; a negative ERR_* when
 * a listed NIC is missing or bad, when NICs exist but cannot be opened, or when none exists
 * and MC_FORCE_HCA is set. */
int mc_te_install_rdma_devices(struct mc_engine *e, const char *devices);
/* The local NIC priority matrix: the installed rdma transport's, else the discovered one
 * (malloc'ed JSON, or NULL). */
char *mc_te_local_topology(struct mc_engine *e);

/* te_segment.c: peer segments. */
/* Open the segment name only if it is a same-host peer the shm transport serves (its memory
 * then gets mapped here ahead of the first copy: segment/segmem.h).  Fetches the descriptor
 * unless the segment is open already.  1 open through shm, 0 not a same-host peer (or shm is
 * not installed, or MC_FORCE_TCP), or a negative ERR_* (the descriptor could not be fetched).
 * Any thread but the loop's. */
int mc_te_open_same_host(struct mc_engine *e, const char *name);
#define MC_TE_NOT_SAME_HOST (-100000)	/* internal: mc_te_open's "not served by shm" */
/* Choose / drop the transport serving seg (API thread, e->mu not held). */
void mc_te_pick(struct mc_engine *e, struct mc_te_segment *seg);
void mc_te_unpick(struct mc_engine *e, struct mc_te_segment *seg);
void mc_te_refresher_start(struct mc_engine *e);
void mc_te_refresher_stop(struct mc_engine *e);

/* te_staging.c: requests on GPU memory. */
int mc_te_gpu_init(struct mc_engine *e);
void mc_te_gpu_fini(struct mc_engine *e);
int mc_te_gpu_submit(struct mc_engine *e, struct mc_te_req *r);	/* loop thread */
int mc_te_gpu_local_copy(struct mc_engine *e, void *dst, const void *src, uint64_t len);

/* te_mem.c: memory same-host peers can map. */
/* A memfd-backed MAP_SHARED buffer of len bytes (NULL on failure); free with
 * mc_te_free_managed (0 or -ENOENT). */
void *mc_te_alloc_managed(size_t len);
int mc_te_free_managed(void *addr);
/* A new descriptor (*fd) of the shared file mapped at [addr, addr + len) and the file offset
 * of addr, or -ENOENT for private memory. */
int mc_te_mem_share_fd(uint64_t addr, uint64_t len, int *fd, uint64_t *off);

/* te_tcp.c: the data port of the installed tcp transport (0 if none). */
uint16_t mc_te_tcp_port(void *state);

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
/* Serve fd, a connected stream socket (what the handshake listener accepted; a socketpair end
 * in tests), on base for e: one frame in, one reply out, then closed.  base must be the loop
 * that runs e's handshake (e->lt's).  fd is owned from here on, also on failure.  0 or
 * -ENOMEM. */
int mc_te_hs_adopt(struct mc_engine *e, struct event_base *base, evutil_socket_t fd);
/* Send one handshake frame to host:port and read the reply (blocking, bounded by timeouts).
 * Returns 0 with a malloc'ed reply, or a negative ERR_*. */
int mc_te_hs_call(const char *host, uint16_t port, uint8_t type, const char *json, char **reply,
		  size_t *reply_len);
/* The same with its own bound on the connect and on each read or write, proving the cluster
 * secret a first (NULL: none; ERR_REJECT_HANDSHAKE when the peer does not accept us). */
int mc_te_hs_call_within(const struct mc_auth *a, const char *host, uint16_t port, uint8_t type,
			 const char *json, char **reply, size_t *reply_len, unsigned timeout_ms);

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
