/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store client over the transfer engine (src/engine) when protocol is rdma and a NIC is
 * usable: one engine per handle, named like the handle's segment ("host:port", the port the
 * handle reserved), with the handle's segments, local buffer and registered buffers registered
 * on it.  mc_store_transfer hands remote requests to it here: each peer segment named in the
 * batch is opened once (the engine caches it and fetches it again after a failure), the whole
 * batch is submitted at once and the API thread sleeps until the engine completed every
 * request.  A peer whose engine publishes no rdma fields is served by the engine's tcp
 * transport; a peer with no engine at all (a tcp-only store) by the store's own tcp data client.
 * Same-host peers are store_shm.c's; the engine's shm transport is not used.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errcode.h"
#include "common/log.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"
#include "store/store.h"

int mc_store_rdma_start(struct mc_store *st, const char *devices, const char *ip, uint16_t port)
{
	const char *meta = st->metadata_server[0] ? st->metadata_server : "P2PHANDSHAKE";
	transfer_engine_t e;
	int rc;

	if (mc_te_known[MC_TE_XPORT_RDMA] == NULL) {
		mc_log_warn("protocol rdma: this build has no rdma transport, the store uses tcp");
		return 0;
	}
	/* The engine's handshake server takes over the port our segment name holds. */
	if (st->reserve_fd >= 0) {
		close(st->reserve_fd);
		st->reserve_fd = -1;
	}
	e = createTransferEngine(meta, st->hostname, ip, port, 0);
	if (e == NULL) {
		mc_log_err("protocol rdma: cannot start the transfer engine for %s (metadata %s)",
			   st->hostname, meta);
		return MC_ERR_INVALID_PARAMS;
	}
	rc = mc_te_install_rdma_devices(e, devices);
	if (rc < 0) {
		mc_log_err("protocol rdma: the NICs '%s' cannot be used", devices ? devices : "");
		destroyTransferEngine(e);
		return MC_ERR_INVALID_PARAMS;
	}
	if (rc == 1) {
		destroyTransferEngine(e);
		return 0;
	}
	/* Same-host peers are store_shm.c's (or, with MC_STORE_SHM=0, the NICs'). */
	uninstallTransport(e, "shm");
	st->engine = e;
	mc_log_info("store client %s: data moves over the transfer engine (rdma)", st->hostname);
	return 0;
}

void mc_store_rdma_stop(struct mc_store *st)
{
	if (st->engine)
		destroyTransferEngine(st->engine);
	st->engine = NULL;
}

int mc_store_rdma_register(struct mc_store *st, void *addr, uint64_t len)
{
	int rc;

	if (st->engine == NULL)
		return 0;
	rc = registerLocalMemory(st->engine, addr, len, "*", 1);
	if (rc) {
		mc_log_err("protocol rdma: cannot register %llu bytes at %p with the engine (%d)",
			   (unsigned long long)len, addr, rc);
		return MC_ERR_INVALID_PARAMS;
	}
	return 0;
}

void mc_store_rdma_unregister(struct mc_store *st, void *addr)
{
	if (st->engine)
		unregisterLocalMemory(st->engine, addr);
}

/* A segment with no engine behind it is not asked again for this long. */
#define MC_NOENGINE_MS 10000

/* The segment was recently found without an engine (st->mu not held). */
static int mc_store_noengine(struct mc_store *st, const char *name)
{
	int64_t now = mc_te_now_ms();
	int hit = 0;
	uint32_t i;

	pthread_mutex_lock(&st->mu);
	for (i = 0; i < MC_STORE_NOENGINE_MAX && !hit; i++)
		hit = st->noengine[i].until_ms > now && !strcmp(st->noengine[i].name, name);
	pthread_mutex_unlock(&st->mu);
	return hit;
}

/* Remember it, over the entry that expires first. */
static void mc_store_noengine_add(struct mc_store *st, const char *name)
{
	uint32_t i, at = 0;

	pthread_mutex_lock(&st->mu);
	for (i = 1; i < MC_STORE_NOENGINE_MAX; i++)
		if (st->noengine[i].until_ms < st->noengine[at].until_ms)
			at = i;
	snprintf(st->noengine[at].name, sizeof(st->noengine[at].name), "%s", name);
	st->noengine[at].until_ms = mc_te_now_ms() + MC_NOENGINE_MS;
	pthread_mutex_unlock(&st->mu);
}

int mc_store_rdma_transfer(struct mc_store *st, struct mc_xfer_req *reqs, uint32_t n)
{
	struct transfer_request *tr = calloc(n, sizeof(*tr));
	uint32_t *idx = calloc(n, sizeof(*idx)), *tidx = calloc(n, sizeof(*tidx));
	struct mc_xfer_req *tcp = NULL;
	batch_id_t b = INVALID_BATCH;
	uint32_t i, j, m = 0, nt = 0, failed = 0;

	if (tr == NULL || idx == NULL || tidx == NULL) {
		for (i = 0; i < n; i++)
			reqs[i].status = MC_ERR_TRANSFER_FAIL;
		failed = n;
		goto out;
	}
	for (i = 0; i < n; i++) {
		segment_handle_t h = -1;

		reqs[i].status = MC_ERR_TRANSFER_FAIL;
		/* One open per peer segment in the batch. */
		for (j = 0; j < m; j++)
			if (!strcmp(reqs[idx[j]].segment, reqs[i].segment)) {
				h = tr[j].target_id;
				break;
			}
		for (j = 0; h < 0 && j < nt; j++)
			if (!strcmp(reqs[tidx[j]].segment, reqs[i].segment))
				break;
		if (h < 0 && j < nt) {
			tidx[nt++] = i;		/* a segment already found engine-less */
			continue;
		}
		if (h < 0 &&
		    (reqs[i].segment[0] == '\0' || mc_store_noengine(st, reqs[i].segment))) {
			tidx[nt++] = i;
			continue;
		}
		if (h < 0)
			h = openSegment(st->engine, reqs[i].segment);
		if (h < 0) {
			/* No engine behind it (a tcp-only store): its tcp data server. */
			mc_log_info("protocol rdma: segment '%s' has no transfer engine (%d): tcp",
				    reqs[i].segment, h);
			mc_store_noengine_add(st, reqs[i].segment);
			tidx[nt++] = i;
			continue;
		}
		tr[m].opcode = reqs[i].opcode == MC_XFER_READ ? OPCODE_READ : OPCODE_WRITE;
		tr[m].source = reqs[i].local;
		tr[m].target_id = h;
		tr[m].target_offset = reqs[i].remote;
		tr[m].length = reqs[i].len;
		idx[m++] = i;
	}
	if (m) {
		b = allocateBatchID(st->engine, m);
		if (b == INVALID_BATCH || submitTransfer(st->engine, b, tr, m) ||
		    mc_te_batch_wait(st->engine, b)) {
			failed += m;
		} else {
			for (j = 0; j < m; j++) {
				struct transfer_status s = { 0 };

				if (getTransferStatus(st->engine, b, j, &s) == 0 &&
				    s.status == STATUS_COMPLETED)
					reqs[idx[j]].status = 0;
				else
					failed++;
			}
		}
	}
	if (nt) {
		tcp = calloc(nt, sizeof(*tcp));
		if (tcp == NULL) {
			failed += nt;
			goto out;
		}
		for (j = 0; j < nt; j++)
			tcp[j] = reqs[tidx[j]];
		failed += (uint32_t)mc_store_transfer_tcp(st, tcp, nt);
		for (j = 0; j < nt; j++)
			reqs[tidx[j]].status = tcp[j].status;
	}
out:
	if (b != INVALID_BATCH)
		freeBatchID(st->engine, b);
	free(tcp);
	free(tr);
	free(idx);
	free(tidx);
	return (int)failed;
}
