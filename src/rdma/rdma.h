/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_RDMA_H
#define MC_RDMA_H

/*
 * The rdma transport (upstream's RDMA transport, wire-compatible with it): one context per NIC,
 * every buffer registered on every NIC, RC endpoints per (local NIC, peer NIC) created on first
 * use and connected over the engine's handshake port with Connection frames (upstream's
 * HandShakeDesc JSON, see rdma_hs.c), requests cut into slices striped over
 * the NICs by the priority matrix, failed slices retried on another path.
 *
 * Threads: an mc_rdma lives on one libevent loop.  mc_rdma_new, _free, _submit and
 * _on_connection run on that loop's thread; _register, _unregister and _desc_fill may be called
 * from any thread.  The handshake callback runs on the transport's own worker thread, so a
 * blocking connect to a peer never stalls the loop.
 */
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <jansson.h>

#include "mooncake/transfer_engine_c.h"	/* ERR_* */

#define MC_RDMA_MAX_NICS 16
#define MC_RDMA_MAX_QP_PER_EP 16

struct mc_rdma;
struct mc_rdma_peer;
struct mc_verbs_ops;

/* Send a Connection frame (JSON) to a peer's handshake port and return its reply: 0 with a
 * malloc'ed NUL-terminated *reply, or a negative ERR_*.  Runs on the transport's worker thread
 * and may block (bounded by the callee's timeouts). */
typedef int (*mc_rdma_hs_fn)(void *arg, const char *host, uint16_t port, const char *json,
			     char **reply, size_t *reply_len);
/* A request finished: status 0, or a negative ERR_* when a slice failed past its retries.
 * Runs on the loop thread, exactly once per accepted request. */
typedef void (*mc_rdma_done_fn)(void *arg, int status);

struct mc_rdma_params {
	const struct mc_verbs_ops *ops;	/* NULL: the real libibverbs */
	const char *server_name;	/* ours; NIC paths are <server_name>@<nic> */
	const char *devices;		/* comma list of NICs, or NULL/"" */
	const char *matrix;		/* priority matrix JSON, or NULL */
	mc_rdma_hs_fn hs;
	void *hs_arg;
};

/* Open the NICs (devices, else the NICs the matrix names, else every NIC found) and start the
 * worker.  Reads the MC_* environment variables it honours (rdma.c's table).  Returns NULL with *err a negative
 * ERR_* (ERR_DEVICE_NOT_FOUND when there is no usable NIC) and a log line. */
struct mc_rdma *mc_rdma_new(struct event_base *base, const struct mc_rdma_params *p, int *err);
/* Fail what is still queued, join the worker, tear down QPs, MRs, CQs and contexts.  Requests
 * still in flight get their callback with ERR_ENDPOINT.  NULL is a no-op. */
void mc_rdma_free(struct mc_rdma *r);

/* Register [addr, addr+len) on every NIC.  location: "cpu:0", "*", ... (NULL = "*").
 * 0, ERR_ADDRESS_OVERLAPPED, ERR_INVALID_ARGUMENT, ERR_MEMORY or ERR_CONTEXT (a NIC refused). */
int mc_rdma_register(struct mc_rdma *r, void *addr, size_t len, const char *location,
		     int remote_accessible);
/* 0 or ERR_ADDRESS_NOT_REGISTERED (addr must start a registered buffer). */
int mc_rdma_unregister(struct mc_rdma *r, void *addr);
/* 1 if [addr, addr+len) lies in one buffer registered here (local or remote access). */
int mc_rdma_covers(struct mc_rdma *r, const void *addr, uint64_t len);

/* Make a segment descriptor object an rdma one (upstream's SegmentDesc JSON): protocol "rdma", devices,
 * priority_matrix, and for every remote-accessible buffer name = location plus rkey and lkey
 * arrays (entries already in desc's buffers keep their other fields; missing ones are added).
 * 0 or ERR_MEMORY. */
int mc_rdma_desc_fill(struct mc_rdma *r, json_t *desc);

/* A peer as its descriptor describes it: NICs, buffers with rkeys, priority matrix, and where
 * its handshake port is.  Refcounted (thread-safe); NULL with a log line if the descriptor
 * has no usable rdma fields. */
struct mc_rdma_peer *mc_rdma_peer_new(const json_t *desc, const char *name, const char *host,
				      uint16_t port);
struct mc_rdma_peer *mc_rdma_peer_ref(struct mc_rdma_peer *p);
void mc_rdma_peer_unref(struct mc_rdma_peer *p);

enum mc_rdma_op {
	MC_RDMA_READ = 0,	/* remote -> local */
	MC_RDMA_WRITE = 1,	/* local -> remote */
};

struct mc_rdma_xfer {
	int opcode;
	void *local;
	uint64_t remote;
	uint64_t len;
	struct mc_rdma_peer *peer;	/* referenced by the request while it runs */
	/* A local NIC to carry it first (upstream's nic_hint): its slices go through that NIC
	 * while it has a working path, the others only after failures.  NULL or an unknown name:
	 * the priority matrix decides. */
	const char *nic_hint;
};

/* Start a request.  0: done(arg, status) is called once on the loop, never from inside
 * mc_rdma_submit; otherwise a negative ERR_* and done is not called (unregistered local
 * memory, range outside the peer's buffers, too many requests). */
int mc_rdma_submit(struct mc_rdma *r, const struct mc_rdma_xfer *x, mc_rdma_done_fn done,
		   void *arg);

/* The passive side of a Connection frame (handshake type 0): create or re-create the endpoint
 * the peer asks for, bring its QPs to RTS and return the reply JSON (malloc'ed; reply_msg set
 * when refused).  Loop thread. */
char *mc_rdma_on_connection(struct mc_rdma *r, const char *json, size_t len);

/* For tests and logs. */
struct mc_rdma_stats {
	uint64_t slices_posted;
	uint64_t slices_retried;
	uint64_t slices_failed;
	uint64_t cq_events;
	uint64_t cq_acked;
	uint64_t ep_resets;
	uint64_t connects;
	uint64_t slice_timeouts;	/* endpoints reset by MC_SLICE_TIMEOUT */
	uint32_t endpoints;
	uint64_t posted_per_nic[MC_RDMA_MAX_NICS];
};
void mc_rdma_get_stats(struct mc_rdma *r, struct mc_rdma_stats *s);
unsigned mc_rdma_nic_count(const struct mc_rdma *r);
/* The priority matrix as published (immutable while r lives; borrowed). */
const json_t *mc_rdma_matrix(const struct mc_rdma *r);

#endif
