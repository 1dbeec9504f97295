/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_STORE_H
#define MC_STORE_H

/*
 * libmooncake store client internals.
 *
 * One struct mc_store per handle.  Its loop thread owns every socket but the API threads' own
 * connections: the master connection (master_client.c) and, through the handle's transfer
 * engine (src/engine), which runs on the same loop, the data server that serves this client's
 * segments, the data client that reaches other clients, the handshake port and the same-host
 * shared-memory listener.  API calls run on the caller's thread: they encode requests, send
 * them on the caller's direct lane to the master (master_call.c) or hand them to the loop,
 * wait, and decode the answers; small tcp transfers go on the caller's own data connections
 * (src/transfer/tcp_direct.c).  Many threads can be inside calls at once.
 */
#include <pthread.h>
#include <stdint.h>

#include "proto/rpc.h"
#include "segment/segmem.h"
#include "reactor/loop_thread.h"
#include "transfer/memreg.h"
#include "transfer/tcp.h"

#define MC_STORE_MAX_SEGMENTS 64
#define MC_STORE_SUSPECT_MAX 32
#define MC_STORE_RPC_TIMEOUT_MS 5000	/* master call deadline (MC_RPC_TIMEOUT_MS) */
#define MC_STORE_XFER_TIMEOUT_MS 2000	/* replica connect / progress timeouts */
#define MC_STORE_SUSPECT_MS 10000	/* a peer that failed a transfer is tried last this long */

struct mc_master_client;
struct mc_store_retirer;
struct mc_store_peers;
struct mc_engine;
struct mc_master;

struct mc_store_segment {
	struct mc_uuid id;
	/* Random, made with the segment and kept only in this process's memory: mounting with it
	 * proves to the master that this is the same memory (it restores a dormant segment). */
	uint8_t token[16];
	uint8_t *base;
	uint64_t size;
	int memfd;
	struct mc_segmem *mem;		/* the memory behind it (segment/segmem.h) */
	int origin;			/* MC_STORE_SEG_*: who asked for it (store_segments.c) */
};

#define MC_STORE_SEG_SETUP 0		/* set-up, init_all: unmounted by teardown only */
#define MC_STORE_SEG_FILE 1		/* mount_segment: a caller's file, mapped */
#define MC_STORE_SEG_ALLOC 2		/* allocate_and_mount_segment */
#define MC_STORE_SEGMENT_ID_LEN 48	/* "hi-lo" of a segment id, as upstream prints it */

/* The client's transfer metrics (store_http.c): atomics. */
#define MC_STORE_LAT_BUCKETS 27
struct mc_store_metrics {
	uint64_t read_bytes, write_bytes;
	uint64_t hist[4][MC_STORE_LAT_BUCKETS + 1];	/* get, put, batch get, batch put (us) */
	uint64_t sum_us[4];
	int64_t start_ms;
	/* Bytes that failed their object checksum here: a replica read, a shared-directory file,
	 * an object about to be offloaded, an SSD copy about to be promoted. */
	uint64_t checksum_mismatches;
};
/* One more checksum mismatch seen by this client (any thread). */
#define mc_store_count_mismatch(st) \
	__atomic_add_fetch(&(st)->metrics.checksum_mismatches, 1, __ATOMIC_RELAXED)
struct mc_store_http;

struct mc_store {
	pthread_mutex_t mu;		/* setup/teardown, the segment list, suspect[] */
	int initialized;
	struct mc_loop_thread *lt;
	struct mc_master_client *mc;
	struct mc_engine *engine;	/* moves every byte (store_data.c) */
	struct mc_memreg *reg;		/* the engine's registered memory (not ours to free) */
	struct mc_uuid client_id;
	char hostname[300];		/* segment name, "host:port" */
	char host[256];
	char endpoint[300];		/* "host:dataport", the engine's tcp data server */
	char protocol[32];
	char metadata_server[512];
	char master_addr[300];
	int checksum;			/* MOONCAKE_STORE_CHECKSUM (default on): CRC-64 objects
					   written, reads verified */
	int checksum_device;		/* also GPU memory (staged through the engine): only when
					   MOONCAKE_STORE_CHECKSUM=1 is set explicitly */
	int evict_hint_refused;		/* the master refused a PutStart's eviction hint (atomic) */
	int reserve_fd;			/* keeps the hostname's port taken until the engine's
					   handshake server listens on it */
	int auto_port;			/* we picked that port (another may replace it) */
	struct mc_store_segment segs[MC_STORE_MAX_SEGMENTS];
	uint32_t nsegs;
	struct mc_store_retirer *retirer;	/* unmounts after a grace period (store_segments.c) */
	struct mc_store_peers *peers;	/* opens same-host segments ahead (store_peers.c) */
	int no_peer_open;		/* set before set-up: leave them to the first transfer */
	uint8_t *local_buf;
	uint64_t local_buf_size;
	struct mc_segmem *local_mem;	/* the memory behind local_buf */
	int64_t active_ms;		/* monotonic ms of the last API request (atomic): the
					 * local buffer is populated only once requests pause */
	/* How segment memory is made (huge pages, population, placement): set before
	 * mc_store_setup with memopts_set = 1, or taken from the environment. */
	struct mc_segmem_opts memopts;
	int memopts_set;
	int64_t rpc_timeout_ms;
	struct mc_tcp_client_opts xfer_opts;	/* replica transfer bounds */
	struct {			/* data endpoints whose transfers failed recently (mu) */
		char endpoint[300];
		int64_t until_ms;	/* tried last until then (monotonic) */
	} suspect[MC_STORE_SUSPECT_MAX];
	/* SSD tier (store_tier_ssd.c): set before mc_store_setup, or taken from the environment */
	int ssd_enable;
	char ssd_path[1024];
	uint64_t ssd_limit;
	struct mc_store_ssd *ssdw;
	/* The embedded HTTP server (store_http.c): http_port > 0 starts it at set-up. */
	int http_port;
	struct mc_store_http *http;
	struct mc_store_metrics metrics;
	char fsdir[1024];		/* GetStorageConfig: the master's shared directory, or "" */
	int fs_evict;			/* enable_disk_eviction */
	uint64_t fs_quota;		/* quota_bytes (0: 90% of the file system) */
	struct mc_store_fs *fsw;	/* its worker (store_tier_fsdir.c) */
	/* SSD prefetch on exist probes (store_prefetch.c): set before setup (0: off) */
	int ssd_prefetch;
	int64_t prefetch_cooldown_ms;	/* no prefetch this long after "memory full" (0: none) */
	int64_t prefetch_dedup_ms;	/* a key is not asked for again this long (0: always) */
	struct mc_store_prefetch *pf;	/* its state, made at the first prefetch (mu) */
	/* A master on this handle's loop (store_embedded.c): set before setup, or
	 * MOONCAKE_ENABLE_EMBEDDED_MASTER */
	int embedded_master;
	struct mc_master *master;	/* running, on the loop thread */
	/* The cluster secret: its file set before mc_store_setup (mooncake_client's
	 * cluster_secret_file), else MOONCAKE_CLUSTER_SECRET_FILE; loaded by setup. */
	char cluster_secret_file[1024];
	struct mc_auth *auth;		/* NULL: an open cluster */
	struct mc_tls *tls;		/* MOONCAKE_TLS_CA_FILE: TLS to the master (NULL: none) */
	struct mc_store_tasks *tasksw;	/* copy/move task worker (store_tasks.c) */
	char tenant_id[256];		/* the tenant its requests work for ("" or "default": the
					   default namespace; set before mc_store_setup, else
					   MOONCAKE_TENANT_ID) */
};

/* ---- master_client.c: the RPC connection, on the store's loop ---- */

struct mc_rpc_call {
	uint16_t opcode;
	struct mc_wbuf req;		/* frame: header (patched when sent) + body */
	int status;			/* transport status or the frame's status */
	uint8_t *resp;			/* response body (malloc'ed), resp_len bytes */
	size_t resp_len;
	struct mc_waiter w;
	/* internal */
	uint64_t req_id;
	int64_t sent_ms;		/* when written to the connection (0: not yet) */
	int64_t deadline_ms;
	void (*on_done)(struct mc_rpc_call *call, void *arg);	/* loop-side completion */
	void *on_done_arg;
	struct mc_rpc_call *next;
};

struct mc_master_client *mc_master_client_new(struct mc_store *st, const char *addr);
/* On the loop thread. */

/* master_locate.c: where HA masters publish their leader (etcd://..., redis://...). */
struct mc_master_locate;
/* The lookup's end: rc 0 and leader "host:port", or rc < 0 (-ENOENT: no leader now). */
typedef void (*mc_locate_fn)(void *arg, int rc, const char *leader);
/* 1 if addr names a locator rather than a master. */
int mc_master_locate_wanted(const char *addr);
/* A locator on base for addr; NULL (with a log line) when it cannot be made. */
struct mc_master_locate *mc_master_locate_new(struct event_base *base, const char *addr);
/* Look the leader up; fn runs once, on the loop, within about a second. */
void mc_master_locate_lookup(struct mc_master_locate *l, mc_locate_fn fn, void *arg);
void mc_master_locate_free(struct mc_master_locate *l);
void mc_master_client_free(struct mc_master_client *mc);
int mc_master_client_healthy(struct mc_master_client *mc);

/* Prepare a call: writes a request frame header for opcode into call->req; the caller appends
 * the body with mc_wbuf_* before mc_store_call. */
void mc_rpc_call_init(struct mc_rpc_call *call, uint16_t opcode);
void mc_rpc_call_fini(struct mc_rpc_call *call);
/* Send and wait (any thread but the loop's).  Returns 0 when a response arrived (then
 * call->status is its frame status and resp/resp_len the body), MC_ERR_RPC_FAIL when the master
 * is unreachable, MC_ERR_RPC_TIMEOUT when no answer came in time. */
int mc_store_call(struct mc_store *st, struct mc_rpc_call *call);
/* The same through the handle's loop and main connection only, never a direct lane: for a
 * handle's own background calls, which must not hold a lane (a connection to the master) that
 * API threads would otherwise use. */
int mc_store_call_loop(struct mc_store *st, struct mc_rpc_call *call);
/* A call in flight whose answer the calling thread reads later: mc_store_call_begin sends call
 * on a direct lane of its own where one takes it (the lane stays held, and other calls of the
 * same thread take other lanes or the loop meanwhile), else leaves it to mc_store_call_end,
 * which reads the answer (or runs the call then, waiting) and returns as mc_store_call.  Every
 * begin needs its end, on the same thread; a thread keeps at most a few in flight (a call that
 * finds no free lane waits for its answer through the loop).  The master sees calls on
 * different lanes in no set order: only calls that may run in either order go in flight
 * together. */
enum { MC_PENDING_UNSENT, MC_PENDING_SENT, MC_PENDING_DONE };
struct mc_store_pending {
	void *lane;		/* the lane held while the answer is due */
	uint64_t gen;		/* the main connection's generation when sent */
	int fd;
	int state;		/* MC_PENDING_* */
};
void mc_store_call_begin(struct mc_store *st, struct mc_rpc_call *call,
			 struct mc_store_pending *p);
/* Whether calls of this handle may go on direct lanes (else begin sends nothing). */
int mc_store_lanes_on(struct mc_store *st);
int mc_store_call_end(struct mc_store *st, struct mc_rpc_call *call, struct mc_store_pending *p);
/* A heap call for mc_store_call_async (NULL when out of memory). */
struct mc_rpc_call *mc_rpc_call_new(uint16_t opcode);
/* Send without waiting (any thread but the loop's): the answer is dropped and the call, which
 * must come from mc_rpc_call_new, is freed by the loop. */
void mc_store_call_async(struct mc_store *st, struct mc_rpc_call *call);

/* ---- store.c ---- */
/* Is t a tenant name (upstream's: printable ASCII, not empty, not starting with '_'; at most
 * 255 bytes)? */
int mc_store_tenant_valid(const char *t);
int mc_store_setup(struct mc_store *st, const char *local_hostname, const char *metadata_server,
		   uint64_t global_segment_size, uint64_t local_buffer_size, const char *protocol,
		   const char *device_name, const char *master_addr);
/* Take this client's SSD area out of service (upstream's unmount_local_disk_segment): the
 * master forgets its replicas, offload stops, and grace_ms later the call returns (reads in
 * flight are still served until close).  0 also when there is none (store_segments.c). */
int mc_store_unmount_local_disk(struct mc_store *st, uint64_t grace_ms);
void mc_store_teardown(struct mc_store *st);
/* Encode this client's segments (for MountSegment / ReMountSegment): the segments first, then
 * their tokens in the same order (st->mu held by the caller when other threads may mount). */
void mc_store_put_segment(struct mc_store *st, struct mc_wbuf *w, uint32_t i);
void mc_store_put_segment_token(struct mc_store *st, struct mc_wbuf *w, uint32_t i);
/* The local virtual address range [addr, addr+len) lies inside one of our segments. */
int mc_store_is_local(struct mc_store *st, struct mc_strv endpoint, uint64_t addr, uint64_t len);

/* Register memory the handle's transfers may use (segments, the local buffer, the caller's
 * buffers) with its engine: peers may read and write it.  0 or MC_ERR_INVALID_PARAMS. */
int mc_store_register(struct mc_store *st, void *addr, uint64_t len);
/* The same, telling the engine where the memory lives (location: "*" or empty for
 * anywhere, "cpu:N", ...: the engine picks its NICs and GPU path by it). */
int mc_store_register_at(struct mc_store *st, void *addr, uint64_t len, const char *location);
/* 0 or MC_ERR_INVALID_PARAMS (not registered). */
int mc_store_unregister(struct mc_store *st, void *addr);

/* ---- store_segments.c: segments mounted and unmounted after set-up ---- */
/* Mount one more segment of size bytes of new memory (set-up, init_all).  0 or a code. */
int mc_store_mount_segment(struct mc_store *st, uint64_t size);
/* Register mem with the engine at location (NULL: the handle's segment_location), add it to
 * the segment list and mount it at the master; on success the list owns mem and *id_out (may
 * be NULL) is its segment id.  0 or a code (mem still the caller's). */
int mc_store_mount_mem(struct mc_store *st, struct mc_segmem *mem, int origin,
		       const char *location, struct mc_uuid *id_out);
/* allocate_and_mount_segment: size rounded up to 16 MiB slabs (*allocated), placed at
 * location ("" or "*": as the handle's segment_location says; "cpu:N", "cpu:N-M",
 * "interleave[:N,M]": on those NUMA nodes) and registered there.  0 or -1/a code (-1 for a
 * location that is not one, logged). */
int mc_store_mount_alloc(struct mc_store *st, uint64_t size, const char *location,
			 struct mc_uuid *id, uint64_t *allocated);
/* mount_segment: [offset, offset+size) of the regular file at path (offset page-aligned),
 * mapped shared and registered at location (checked as above; the file's pages stay where the
 * file system put them).  0 or -1. */
int mc_store_mount_file(struct mc_store *st, const char *path, uint64_t offset, uint64_t size,
			const char *location, struct mc_uuid *id);
/* UnmountSegment of id (this client's) at the master: 0, or the call's or the master's code. */
int mc_store_unmount_rpc(struct mc_store *st, const struct mc_uuid *id);
/* Unmount the segment id mounted with origin (-1 when there is none), then release its memory
 * now or grace_ms later.  0, -1 or the master's code (the segment then stays mounted). */
int mc_store_unmount_id(struct mc_store *st, const struct mc_uuid *id, int origin,
			uint64_t grace_ms);
/* Stop the retirer (teardown, before the segments are unmounted); pending unmounts are
 * dropped, teardown unmounts everything. */
void mc_store_retire_stop(struct mc_store *st);
/* A segment id as upstream's client prints it ("<u64>-<u64>"), and back (0 or -EINVAL). */
void mc_store_segment_id_str(const struct mc_uuid *id, char out[MC_STORE_SEGMENT_ID_LEN]);
int mc_store_segment_id_parse(const char *s, struct mc_uuid *id);

/* ---- store_peers.c: same-host segments opened ahead of the first put ---- */
/* Start the thread that opens the cluster's same-host segments through the engine's shm
 * transport (after the engine started; a no-op without shm, with MC_FORCE_TCP or with
 * population off).  0, or -ENOMEM. */
int mc_store_peers_start(struct mc_store *st);
/* Same-host segments it opened so far. */
uint32_t mc_store_peers_opened(struct mc_store *st);
/* Stop and join it (teardown, before the engine goes).  No-op when not started. */
void mc_store_peers_stop(struct mc_store *st);

/* ---- store_tier_ssd.c: the SSD tier ---- */
/* After the segments are mounted: open the SSD area (if enabled), register its objects at the
 * master and start the worker.  0 (also when disabled) or a negative code. */
int mc_store_ssd_start(struct mc_store *st);
/* Stop the worker (before the loop stops), then, after the loop stopped, free. */
void mc_store_ssd_stop(struct mc_store *st);
void mc_store_ssd_free(struct mc_store *st);

/* Append a key list (u32 count, then each key) to a request body. */
void mc_store_put_keys(struct mc_wbuf *w, const char *const *keys, uint32_t n);
/* Send PutEnd or PutRevoke of replica_type rtype for the keys; per-key codes into res (may be
 * NULL).  sums (PutEnd only, may be NULL): the objects' checksums, one per key.  0 or the
 * call's error. */
int mc_store_put_finish(struct mc_store *st, const char **keys, uint32_t n, int revoke,
			int upsert, uint8_t rtype, int *res, const struct mc_rpc_checksum *sums);

/* ---- store_tasks.c: copy and move tasks the master gives this client ---- */
struct mc_store_tasks;
/* Start the worker (a handle that mounts memory: it owns replicas tasks copy). */
int mc_store_tasks_start(struct mc_store *st);
/* The master says tasks wait for us (from the loop thread; no-op without a worker). */
void mc_store_tasks_kick(struct mc_store *st);
/* Stop the worker (while the loop still runs: it finishes its round's RPCs), then free it
 * (after the loop stopped). */
void mc_store_tasks_stop(struct mc_store *st);
void mc_store_tasks_free(struct mc_store *st);
/* CreateCopyTask (move 0: key to targets[0..n)) or CreateMoveTask (move 1: key from source to
 * targets[0]): 0 and the task's id, or the master's code. */
int mc_store_create_task(struct mc_store *st, int move, const char *key, const char *source,
			 const char **targets, uint32_t n, struct mc_uuid *id);
/* QueryTask: upstream's QueryTaskResponse. */
struct mc_store_task_info {
	struct mc_uuid id;
	uint8_t type;			/* 0 REPLICA_COPY, 1 REPLICA_MOVE */
	uint8_t status;			/* 0 PENDING, 1 PROCESSING, 2 FAILED, 3 SUCCESS */
	int64_t created_ms, updated_ms;	/* ms since the epoch */
	struct mc_uuid assigned;	/* the client carrying it out */
	char message[256];
};
int mc_store_query_task(struct mc_store *st, const struct mc_uuid *id,
			struct mc_store_task_info *info);

/* ---- store_tier_fsdir.c: legacy shared-directory DISK replicas ---- */
struct mc_iov;
struct mc_get_range;
struct mc_store_fs;
/* Start the shared-directory worker when the master has a --root_fs_dir (GetStorageConfig). */
int mc_store_fs_start(struct mc_store *st);
/* Finish the queued file writes (each ended or revoked), then stop the worker. */
void mc_store_fs_stop(struct mc_store *st);
/* Queue the DISK write of a put whose memory replicas ended: the value is copied (the caller's
 * buffer is free on return); the worker writes the file at path (one the master gave) and sends
 * PutEnd(DISK), or PutRevoke(DISK) if it fails.  Blocks while too many bytes are queued. */
void mc_store_fs_submit(struct mc_store *st, const char *key, const char *path,
			const struct mc_iov *parts, uint32_t np, uint64_t size, int upsert);
/* Read ranges of key's DISK replica's file of size bytes, checked against the checksum the
 * writer stored with it, and, when crc64 is not NULL (then rg must be the whole value in one
 * range), against the object's CRC-64.  A file of the wrong size or checksum is never served:
 * the master is told to forget the replica and the file is deleted.  0, MC_ERR_CHECKSUM_MISMATCH
 * (the object's checksum failed) or another MC_ERR_*. */
int mc_store_fs_read(struct mc_store *st, struct mc_strv key, struct mc_strv path, uint64_t size,
		     const struct mc_get_range *rg, uint32_t nrg, const uint64_t *crc64);

/* ---- store_data.c: moving bytes ---- */
struct mc_xfer_req {
	int opcode;			/* MC_XFER_READ / MC_XFER_WRITE */
	void *local;
	uint64_t remote;
	uint64_t len;
	char host[256];
	uint16_t port;
	char segment[256];		/* the peer's segment name (the engine path) */
	int status;			/* out */
	char nic[64];			/* a local NIC to carry it first (rdma), or "" */
};

/* Run the transfers (all at once) through the engine and wait.  Each req's status is set (0 or
 * MC_ERR_TRANSFER_FAIL); returns the number that failed. */
int mc_store_transfer(struct mc_store *st, struct mc_xfer_req *reqs, uint32_t n);
/* The same in two steps: start submits them (NULL when out of memory: every status is then
 * MC_ERR_TRANSFER_FAIL) and the caller may work meanwhile; finish waits, calling on_done
 * (with notify, when not NULL) on this thread for each request as it completes.  start clears
 * every status; one that on_done sets stays. */
struct mc_store_xfer;
typedef void (*mc_te_done_fn)(void *arg, size_t i, int status, const uint64_t *crc);
/* want_crc (may be NULL; in and out): requests whose CRC-64 the engine computes on the way
 * when it can (see mc_te_transfer_start); on_done gets it, or NULL.  On return want_crc[i] is
 * cleared where the engine will not, so the caller computes those itself meanwhile. */
struct mc_store_xfer *mc_store_transfer_start(struct mc_store *st, struct mc_xfer_req *reqs,
					      uint32_t n, int notify, uint8_t *want_crc);
int mc_store_transfer_finish(struct mc_store_xfer *x, mc_te_done_fn on_done, void *arg);
/* After a batch: forgive the endpoints that answered, mark those that failed suspect and
 * report their segments to the master (without waiting). */
void mc_store_note_transfers(struct mc_store *st, const struct mc_xfer_req *reqs, uint32_t n);
/* Transfers to this data endpoint ("host:port") failed within MC_STORE_SUSPECT_MS. */
int mc_store_suspect(struct mc_store *st, struct mc_strv endpoint);
/* Parse "host:port" into the request.  Returns 0 or -EINVAL. */
int mc_endpoint_parse(struct mc_strv ep, char *host, size_t hostlen, uint16_t *port);

/* ---- store_ops.c: the operations behind the C API (gets in store_get.c) ---- */
/* Transfers gathered for one step of an operation, with the item each belongs to. */
struct mc_xfer_list {
	struct mc_xfer_req *xr;
	uint32_t *item;
	uint32_t n, cap;
};

/* Room for cap transfers (0 or -ENOMEM); add a transfer for item (0 or -ENOMEM); free the
 * list's arrays. */
int mc_xfer_list_reserve(struct mc_xfer_list *l, uint32_t cap);
int mc_xfer_list_add(struct mc_xfer_list *l, const char *host, uint16_t port,
		     struct mc_strv segment, int opcode, void *local, uint64_t remote, uint64_t len,
		     uint32_t item);
void mc_xfer_list_free(struct mc_xfer_list *l);
/* p is GPU memory, which the CPU may not read (no checksums computed or verified over it). */
int mc_store_on_device(struct mc_store *st, const void *p);
/* A piece of caller memory. */
struct mc_iov {
	void *base;
	uint64_t len;
};

/* One key to put: its value is buf[0..size), or the concatenation of iov[0..iovcnt). */
struct mc_put_item {
	const char *key;
	const void *buf;
	uint64_t size;		/* total bytes (set by the caller also when iov is used) */
	const struct mc_iov *iov;
	uint32_t iovcnt;
	int result;
	int space_hint;		/* result NO_AVAILABLE_HANDLE: 1 the master expects room soon, 0
				 * it does not, -1 it did not say (an older master) */
	int has_crc;		/* set by the put when checksums are on: crc is the value's */
	uint64_t crc;		/* CRC-64/ECMA-182 */
	const char *nic_hint;	/* a local NIC to move its bytes through first (ReplicateConfig's
				   preferred_hca_names), or NULL */
};

/* A piece of an object to read: len bytes at src_off of the object into dst. */
struct mc_get_range {
	void *dst;
	uint64_t src_off;
	uint64_t len;
};

/* One key to get.  Without ranges the whole object goes into buf (cap bytes; smaller than the
 * object gives -600) and result is its size.  With ranges each is read (one outside the object
 * gives -600) and result is the sum of their lengths. */
struct mc_get_item {
	const char *key;
	void *buf;
	uint64_t cap;
	const struct mc_get_range *ranges;
	uint32_t nranges;
	int64_t result;
};

/* Replica descriptors of one key, as GetReplicaList returned them. */
struct mc_query_item {
	const char *key;
	int code;
	uint32_t nrep;
	struct mc_rpc_replica *reps;	/* nrep; they and their views live in the batch's memory,
					   held by items[0] until mc_store_query_release */
	void *own_resp, *own_reps;	/* items[0] only: that memory */
};

void mc_store_config_from_c(struct mc_rpc_config *cfg, size_t replica_num, int soft_pin,
			    int hard_pin, const char **preferred, size_t npreferred);
int mc_store_put_many(struct mc_store *st, struct mc_put_item *items, uint32_t n,
		      const struct mc_rpc_config *cfg, int upsert);
int mc_store_get_many(struct mc_store *st, struct mc_get_item *items, uint32_t n);
/* The same without the counting of store_http.c (mc_store_*_many count and call these). */
int mc_store_put_many_raw(struct mc_store *st, struct mc_put_item *items, uint32_t n,
			  const struct mc_rpc_config *cfg, int upsert);
int mc_store_get_many_raw(struct mc_store *st, struct mc_get_item *items, uint32_t n);
/* store_http.c: the embedded HTTP server (/health, /metrics, /metrics/summary) on the loop
 * thread; start 0 or an MC_ERR_* code (the port taken); stop: NULL-safe, before the loop
 * goes.  The metrics as Prometheus text and as upstream's summary. */
struct evbuffer;
int mc_store_http_start(struct mc_store *st, int port);
void mc_store_http_stop(struct mc_store *st);
void mc_store_metrics_prometheus(struct mc_store *st, struct evbuffer *b);
void mc_store_metrics_summary(struct mc_store *st, struct evbuffer *b);
int mc_store_exist_many(struct mc_store *st, const char **keys, uint32_t n, int *results);
/* ProbeKey / BatchProbeKey: per key 1 present, 0 not, or an error code; policy is enum
 * mc_probe_policy (LastHitOnly leases the last group of candidate_size keys all present).
 * 0, or the call's error (then also in every result). */
int mc_store_probe_many(struct mc_store *st, const char **keys, uint32_t n, int policy,
			uint32_t candidate_size, int *results);
/* The policy named "none" (or NULL) or "LastHitOnly" (exact spelling, as upstream), or -1. */
int mc_store_probe_policy(const char *name);
/* A call whose body is pre[0..npre) then "keys", answered "u32 n, n x i32": the codes go to
 * results (the call's error in each when it fails).  0 or that error. */
int mc_store_keys_call(struct mc_store *st, uint16_t op, const uint8_t *pre, size_t npre,
		       const char **keys, uint32_t n, int *results);
int64_t mc_store_get_size(struct mc_store *st, const char *key);
int mc_store_remove_many(struct mc_store *st, const char **keys, uint32_t n, int force,
			 int *results);
int64_t mc_store_remove_regex(struct mc_store *st, const char *pattern, int force);
/* Ranged-read snapshots (store_get.c): the replica lists of keys[0..n), kept for repeated
 * ranged reads and renewed past half their lease (upstream's RangedReadSnapshot).  new: NULL
 * with *rc set when the lists cannot be had.  get: items with ranges, each key one of the
 * snapshot's (else -600); results as mc_store_get_many's.  Calls on one snapshot are serialized;
 * it must be freed before its store is. */
struct mc_get_snapshot;
struct mc_get_snapshot *mc_store_snapshot_new(struct mc_store *st, const char **keys, uint32_t n,
					      int *rc);
int mc_store_get_from_snapshot(struct mc_get_snapshot *s, struct mc_get_item *items, uint32_t n);
void mc_store_snapshot_free(struct mc_get_snapshot *s);
/* The store the snapshot reads from. */
struct mc_store *mc_store_snapshot_store(const struct mc_get_snapshot *s);
/* GetReplicaList for each key (grants read leases, as upstream's query does).  items start
 * zeroed but for their keys; mc_store_query_release(items, n) frees what it filled in. */
int mc_store_query_many(struct mc_store *st, struct mc_query_item *items, uint32_t n);
void mc_store_query_release(struct mc_query_item *items, uint32_t n);
/* BatchReplicaClear: returns the number of keys cleared (their indices in cleared[]), or <0. */
int mc_store_replica_clear(struct mc_store *st, const char **keys, uint32_t n,
			   const char *segment_name, uint8_t *cleared);
int64_t mc_store_remove_all(struct mc_store *st, int force);

/* ---- store_embedded.c: a master on the handle's loop ---- */
/* With st->embedded_master or MOONCAKE_ENABLE_EMBEDDED_MASTER set: start a master on the
 * handle's (started) loop, listening on st->master_addr.  0 (also when not asked for) or a
 * negative code (logged). */
int mc_store_embedded_start(struct mc_store *st);
/* Stop it, on the loop thread, after the master client is gone. */
void mc_store_embedded_stop_on_loop(struct mc_store *st);

/* ---- store_prefetch.c: SSD prefetch on exist probes ---- */
/* With st->ssd_prefetch: ask the master to promote from SSD the keys whose exist result
 * found[i] is 1 (those only an SSD holds are promoted), skipping keys asked for within
 * prefetch_dedup_ms and everything during a cooldown after a "memory full" answer.  Best
 * effort: nothing is reported. */
void mc_store_prefetch(struct mc_store *st, const char **keys, uint32_t n, const int *found);
/* Free the prefetch state (teardown). */
void mc_store_prefetch_free(struct mc_store *st);

/* Monotonic clock in milliseconds, for the client's deadlines and backoffs. */
int64_t mc_store_now_ms(void);
/* An API request starts now (st->active_ms). */
static inline void mc_store_mark_active(struct mc_store *st, int64_t now_ms)
{
	__atomic_store_n(&st->active_ms, now_ms, __ATOMIC_RELAXED);
}

#endif
