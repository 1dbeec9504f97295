/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TE_TRANSPORT_H
#define MC_TE_TRANSPORT_H

/*
 * The transfer engine's internal transport interface.
 *
 * A transport moves the bytes of one request between local memory and a peer segment.  The
 * engine owns everything else: batches, task status, descriptors, range checks.  A transport is
 * a const table of operations (struct mc_te_transport_ops) plus the state its install returns.
 *
 * Life cycle (threads in brackets):
 *   install(e, &state)         [API thread, createTransferEngine or installTransport]
 *   describe(state, desc)      [API thread, e->mu held] add own fields to our descriptor
 *   match(state, seg)          [API thread, openSegment] 1: this transport serves seg
 *   submit(state, req)         [loop thread] start one request
 *   register_mem/unregister_mem [API thread] registered memory changed
 *   uninstall(e, state)        [API thread] requests still in flight complete (FAILED or not)
 *                              before it returns; state is freed
 *
 * openSegment asks the installed transports, in the engine's fixed priority order (file, shm,
 * rdma, tcp), whether they serve the peer; the first that does is remembered in the segment and
 * used by submitTransfer for every request to it.  MC_FORCE_TCP=1 skips all but tcp.
 *
 * Contract of submit: return 0 and later call mc_te_req_done(req, status) exactly once, on the
 * loop thread, never from inside submit; or return a negative errno and never call it (the
 * engine then fails the request); or return -EXDEV to hand this one request to tcp instead
 * (memory the transport cannot reach, e.g. shm for a buffer the owner cannot share).  The request's range was checked against the peer's
 * published buffers before submit; the transport must still refuse anything it cannot serve.
 * req stays valid and unchanged until mc_te_req_done.
 *
 * Adding a transport (rdma): define `const struct mc_te_transport_ops mc_te_rdma_ops` with
 * name "rdma" in its own file, put it in engine.c's mc_te_known[MC_TE_XPORT_RDMA] (under
 * #ifdef HAVE_RDMA) and add the file to src/engine/Makefile.inc.  describe adds "devices",
 * "priority_matrix" and per-buffer rkeys to our descriptor (the tcp fields stay, so peers
 * without rdma use tcp); match reads the peer's fields from seg->desc.raw (untrusted: check
 * types and bounds) and may keep per-peer state in seg->xport_ctx; register_mem and
 * unregister_mem register memory regions; submit posts work requests on the loop thread and
 * completes from the completion-channel callback.  Requests on GPU memory reach submit as
 * host-memory chunks staged by te_staging.c, except on rdma when the GPU buffer itself is
 * registered on the NICs (registerLocalMemory tries that first; mc_te_prepare skips staging).
 * A handshake of type Connection (0) is answered by handshake.c through on_connection.
 */
#include <stdint.h>

#include <jansson.h>

struct mc_engine;
struct mc_te_segment;
struct mc_te_batch;

struct mc_te_req {
	/* engine-owned */
	struct mc_te_batch *b;
	size_t task;
	struct mc_engine *e;
	int xport;			/* enum mc_te_xport_slot */
	int32_t seg_id;			/* the segment handle */
	int gpu;			/* local is GPU memory: staged (te_staging.c) */
	/* Set for internal sub-requests: called instead of updating a batch. */
	void (*on_done)(struct mc_te_req *req, int status);
	void *done_arg;
	/* the request */
	int opcode;			/* MC_XFER_READ (peer -> local) or MC_XFER_WRITE */
	void *local;
	uint64_t remote;		/* absolute address (memory) or offset (file segment) */
	uint64_t len;
	/* the peer, copied from its segment at submit time */
	char seg_name[256];
	char host[256];
	uint16_t tcp_port;
	void *seg_ctx;			/* the transport's per-segment handle from match */
	void *xport_priv[4];		/* scratch for the transport */
	const char *nic_hint;		/* a local NIC to use first, or NULL (its batch's) */
	int want_crc;			/* a READ whose CRC-64 the caller wants: a transport that
					   copies it computes it in the same pass (has_crc, crc) */
	int has_crc;
	uint64_t crc;
};

struct mc_te_transport_ops {
	const char *name;		/* "tcp", "shm", "nvmeof", "rdma" */
	int (*install)(struct mc_engine *e, void **state);
	void (*uninstall)(struct mc_engine *e, void *state);
	/* Optional: add fields to our descriptor (e->mu held; never block). */
	void (*describe)(void *state, json_t *desc);
	/* 1 if this transport serves seg (may set seg->xport_ctx), 0 if not.  Called without
	 * e->mu; may block briefly (connect a Unix socket, open a file). */
	int (*match)(void *state, struct mc_te_segment *seg);
	/* Optional: 1 if match could accept seg judging by its descriptor alone (no connection
	 * made): a segment served by a later transport is tried again by the refresher when an
	 * earlier one may serve it (it was picked while the peer was restarting, say). */
	int (*may_match)(void *state, const struct mc_te_segment *seg);
	/* Optional: drop per-segment state (segment closed or refreshed). */
	void (*release)(void *state, struct mc_te_segment *seg);
	int (*submit)(void *state, struct mc_te_req *req);
	/* Optional: carry req to the end on the calling API thread (no lock held) instead of
	 * submit.  0 or a negative status (req is then completed by the engine), -EXDEV: hand it
	 * to tcp.  Only for transports whose work is a bounded memory copy. */
	int (*run_now)(void *state, struct mc_te_req *req);
	/* Optional: carry the small requests reqs[0..n) (host memory, all on this transport) on
	 * the calling API thread (no lock held), all at once.  Completes each request it carried
	 * (mc_te_req_done) and sets its slot to NULL; those it leaves are submitted as usual. */
	void (*run_batch_now)(void *state, struct mc_te_req **reqs, size_t n);
	/* Optional: local memory was registered (remote_accessible) / is being unregistered
	 * [API thread, after the engine updated its buffer list].  A failing register_mem
	 * fails registerLocalMemory. */
	int (*register_mem)(void *state, void *addr, size_t len, const char *location);
	void (*unregister_mem)(void *state, void *addr);
	/* Optional, for a transport that reaches memory through NICs (rdma); the engine uses the
	 * first installed transport that has register_local (mc_te_nic_slot):
	 * register_local / unregister_local: memory on the NICs directly, outside the published
	 *   buffer list (GPU memory; with remote 0, local access only, e.g. staging chunks).
	 *   0, or a negative ERR_* (unregister_local: ERR_ADDRESS_NOT_REGISTERED if unknown).
	 * covers: 1 if [addr, addr+len) is on the NICs (a request from it needs no staging).
	 * topology: the NIC priority matrix as JSON text (malloc'ed), or NULL.
	 * on_connection: the reply to a handshake of type Connection (malloc'ed), or NULL to
	 *   refuse it [loop thread]. */
	int (*register_local)(void *state, void *addr, size_t len, const char *location,
			      int remote);
	int (*unregister_local)(void *state, void *addr);
	int (*covers)(void *state, const void *addr, uint64_t len);
	char *(*topology)(void *state);
	char *(*on_connection)(void *state, const char *json, size_t len);
};

/* Complete a request: status 0 or negative.  Loop thread (any thread is safe except for
 * -EXDEV, which re-dispatches the request to tcp and must run on the loop).  Frees req. */
void mc_te_req_done(struct mc_te_req *req, int status);

/* Hand a request to its transport (loop thread only). */
void mc_te_req_dispatch(struct mc_engine *e, struct mc_te_req *req);

extern const struct mc_te_transport_ops mc_te_tcp_ops;
extern const struct mc_te_transport_ops mc_te_shm_ops;
extern const struct mc_te_transport_ops mc_te_file_ops;
extern const struct mc_te_transport_ops mc_te_rdma_ops;	/* built with libibverbs */

/* te_rdma.c */
struct mc_verbs_ops;
/* Process-wide: the verbs the next rdma installs use (NULL: libibverbs).  For tests. */
void mc_te_rdma_set_verbs(const struct mc_verbs_ops *ops);

/* engine.c: the first installed transport with NIC hooks (register_local), or -1; its state in
 * *state.  Takes e->mu (do not hold it). */
int mc_te_nic_slot(struct mc_engine *e, void **state);

#endif
