/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The put of a store handle (mc_store_put_many_raw, under the C API's and Python's puts):
 * PutStart, the write of every replica, PutEnd of what was written and PutRevoke of the rest,
 * one more pass for the objects whose writes failed, and a bounded wait for space a burst
 * larger than free memory needs.  Each step is one batch RPC whatever the number of keys,
 * with all transfers of a step in flight at once; a batch of many keys goes in a pipeline of
 * parts (mc_put_pass).  Runs on the calling thread; the calls go on its direct lanes to the
 * master (master_call.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc64.h"
#include "common/errcode.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/te_gpu.h"
#include "ssd/fault.h"
#include "store/store.h"

/* Make call the PutEnd or PutRevoke of the n keys (n > 0), as mc_store_put_finish sends it. */
static void mc_put_finish_call(struct mc_store *st, struct mc_rpc_call *call, const char **keys,
			       uint32_t n, int revoke, int upsert, uint8_t rtype,
			       const struct mc_rpc_checksum *sums)
{
	uint16_t op;

	if (upsert)
		op = revoke ? (n > 1 ? MC_OP_BATCH_UPSERT_REVOKE : MC_OP_UPSERT_REVOKE)
			    : (n > 1 ? MC_OP_BATCH_UPSERT_END : MC_OP_UPSERT_END);
	else
		op = revoke ? (n > 1 ? MC_OP_BATCH_PUT_REVOKE : MC_OP_PUT_REVOKE)
			    : (n > 1 ? MC_OP_BATCH_PUT_END : MC_OP_PUT_END);
	mc_rpc_call_init(call, op);
	mc_rpc_put_uuid(&call->req, &st->client_id);
	mc_wbuf_u8(&call->req, rtype);
	mc_store_put_keys(&call->req, keys, n);
	if (sums && !revoke)
		mc_rpc_put_checksums(&call->req, sums, n);
}

/* The answer of the call begun with p (mc_store_call_end): per-key codes of its n keys into res
 * (may be NULL); 0 or the call's error. */
static int mc_put_finish_results(struct mc_store *st, struct mc_rpc_call *call,
				 struct mc_store_pending *p, uint32_t n, int *res)
{
	struct mc_rbuf r;
	uint32_t i, m;
	int rc = mc_store_call_end(st, call, p);

	if (rc == 0)
		rc = call->status;
	if (rc == 0 && res) {
		mc_rbuf_init(&r, call->resp, call->resp_len);
		m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 4);
		for (i = 0; i < n; i++)
			res[i] = i < m ? mc_rbuf_i32(&r) : MC_ERR_RPC_FAIL;
		if (r.err || m != n)
			rc = MC_ERR_RPC_FAIL;
	}
	return rc;
}

int mc_store_put_finish(struct mc_store *st, const char **keys, uint32_t n, int revoke,
			int upsert, uint8_t rtype, int *res, const struct mc_rpc_checksum *sums)
{
	struct mc_rpc_call call;
	struct mc_store_pending p;
	int rc;

	if (n == 0)
		return 0;
	mc_put_finish_call(st, &call, keys, n, revoke, upsert, rtype, sums);
	mc_store_call_begin(st, &call, &p);
	rc = mc_put_finish_results(st, &call, &p, n, res);
	mc_rpc_call_fini(&call);
	return rc;
}

/* GPU memory, which the CPU may not read: checksums over it come from the engine, which takes
 * them on the pinned chunks it stages the bytes through. */
int mc_store_on_device(struct mc_store *st, const void *p)
{
	return st->engine->gpu && st->engine->gpu->is_device(p);
}

/* The writes of a put batch whose CRC-64 the engine computes on the way (want[j], as
 * mc_store_transfer_start left it) and the values it reported (have[j], crc[j]). */
struct mc_put_crcs {
	uint8_t *want;
	uint8_t *have;
	uint64_t *crc;
};

static void mc_put_on_write(void *arg, size_t j, int status, const uint64_t *crc)
{
	struct mc_put_crcs *c = arg;

	if (status == 0 && crc) {
		c->crc[j] = *crc;
		c->have[j] = 1;
	}
}

/* The number of non-empty parts of an item: the writes of each of its replicas. */
static uint32_t mc_put_item_writes(const struct mc_put_item *it)
{
	uint32_t k, nz = 0;

	if (it->iov == NULL)
		return it->size > 0;
	for (k = 0; k < it->iovcnt; k++)
		nz += it->iov[k].len > 0;
	return nz;
}

/* Whether some part of the item (its writes first..first+parts of its first replica) has its
 * CRC computed by the engine; then mc_put_item_crc waits for the transfer's end. */
static int mc_put_item_by_engine(const struct mc_put_item *it, const struct mc_put_crcs *c,
				 int64_t first)
{
	struct mc_iov one = { (void *)it->buf, it->size };
	const struct mc_iov *parts = it->iov ? it->iov : &one;
	uint32_t np = it->iov ? it->iovcnt : 1, k;
	int64_t j = first;

	for (k = 0; first >= 0 && k < np; k++)
		if (parts[k].len && c->want[j++])
			return 1;
	return 0;
}

/* CRC-64 of an item's value (its parts in order, combined): a part the engine checksummed on
 * its way takes the engine's value for its write (first + its index among the item's non-empty
 * parts), the others are computed here (also one the engine meant to but could not).  A part
 * in GPU memory without the engine's value leaves the object without a checksum. */
static void mc_put_item_crc(struct mc_store *st, struct mc_put_item *it,
			    const struct mc_put_crcs *c, int64_t first)
{
	struct mc_iov one = { (void *)it->buf, it->size };
	const struct mc_iov *parts = it->iov ? it->iov : &one;
	uint32_t np = it->iov ? it->iovcnt : 1, k;
	int64_t j = first;
	uint64_t crc = 0;

	if (first < 0)
		return;
	for (k = 0; k < np; k++) {
		if (parts[k].len == 0)
			continue;
		if (c->want[j] && c->have[j]) {
			crc = mc_crc64_combine(crc, c->crc[j], parts[k].len);
		} else if (mc_store_on_device(st, parts[k].base)) {
			return;
		} else {
			crc = mc_crc64(crc, parts[k].base, parts[k].len);
		}
		j++;
	}
	it->crc = crc;
	it->has_crc = 1;
}

/* One part of a put batch on its way (mc_put_part_*): its PutStart, the writes of what the
 * master placed, its PutEnd of what was written, and the PutRevoke of the rest.  A batch is
 * one part, or several in a pipeline (mc_put_pass). */
struct mc_put_part {
	struct mc_store *st;
	const struct mc_rpc_config *cfg;
	int upsert;
	struct mc_put_item *items;
	uint32_t n;
	uint8_t *xfail;			/* may be NULL, see mc_put_pass */
	int hinted;			/* the PutStart carries the eviction hint */
	int rc;				/* the part ended early: every result says how */
	struct mc_rpc_call start, end;
	struct mc_store_pending start_p, end_p;
	int end_begun;
	struct mc_xfer_list xl;
	const char **end_keys, **rev_keys;
	uint32_t nend, nrev;
	int *item_fail, *end_res;
	struct mc_rpc_checksum *end_sums;
	char (*disk_path)[MC_RPC_MAX_PATH + 1];
	int64_t *first_req;		/* checksums on: item's first write of its first replica */
	struct mc_put_crcs crcs;
};

static void mc_put_part_start_call(struct mc_put_part *p)
{
	uint32_t i;

	mc_rpc_call_init(&p->start,
			 p->upsert ? (p->n > 1 ? MC_OP_BATCH_UPSERT_START : MC_OP_UPSERT_START)
				   : (p->n > 1 ? MC_OP_BATCH_PUT_START : MC_OP_PUT_START));
	mc_rpc_put_uuid(&p->start.req, &p->st->client_id);
	mc_rpc_put_config(&p->start.req, p->cfg);
	mc_wbuf_u32(&p->start.req, p->n);
	for (i = 0; i < p->n; i++) {
		mc_wbuf_cstr(&p->start.req, p->items[i].key);
		mc_wbuf_u64(&p->start.req, p->items[i].size);
	}
	if (p->hinted)
		mc_rpc_put_evict_hint(&p->start.req, p->cfg);
}

/* Stage 1: send the part's PutStart (its answer is read by mc_put_part_placed). */
static void mc_put_part_start(struct mc_put_part *p)
{
	p->hinted = p->cfg->has_evict_hint &&
		    !__atomic_load_n(&p->st->evict_hint_refused, __ATOMIC_RELAXED);
	mc_put_part_start_call(p);
	mc_store_call_begin(p->st, &p->start, &p->start_p);
}

/* The part ends here: every item not decided yet gets rc. */
static void mc_put_part_fail(struct mc_put_part *p, int rc)
{
	uint32_t i;

	p->rc = rc;
	for (i = 0; i < p->n; i++)
		if (p->items[i].result == 0)
			p->items[i].result = rc;
}

/* Stage 2: the PutStart's answer, and the part's writes listed from it.  0, or the part
 * failed as a whole (p->rc). */
static int mc_put_part_placed(struct mc_put_part *p)
{
	struct mc_store *st = p->st;
	struct mc_put_item *items = p->items;
	uint32_t n = p->n, i, j, m;
	struct mc_strv last_ep = { NULL, 0 };	/* the endpoint host and port were parsed from, */
	int have_ep = 0;			/* once there is one */
	char host[256];
	uint16_t port = 0;
	struct mc_rbuf r;
	int rc;

	rc = mc_store_call_end(st, &p->start, &p->start_p);
	if (rc == 0)
		rc = p->start.status;
	if (rc == MC_ERR_INVALID_PARAMS && p->hinted) {
		/* A master from before the eviction hint refuses the body with it: ask again
		 * without, and send that master none from now on. */
		__atomic_store_n(&st->evict_hint_refused, 1, __ATOMIC_RELAXED);
		p->hinted = 0;
		mc_rpc_call_fini(&p->start);
		mc_put_part_start_call(p);
		rc = mc_store_call(st, &p->start);
		if (rc == 0)
			rc = p->start.status;
	}
	if (rc) {
		for (i = 0; i < n; i++)
			items[i].result = rc;
		p->rc = rc;
		return rc;
	}
	p->item_fail = calloc(n, sizeof(*p->item_fail));
	p->end_keys = calloc(n, sizeof(*p->end_keys));
	p->rev_keys = calloc(n, sizeof(*p->rev_keys));
	p->end_res = calloc(n, sizeof(*p->end_res));
	p->end_sums = calloc(n, sizeof(*p->end_sums));
	if (st->fsdir[0])
		p->disk_path = calloc(n, sizeof(*p->disk_path));
	if (st->checksum && (p->first_req = malloc(n * sizeof(*p->first_req))) != NULL)
		for (i = 0; i < n; i++)
			p->first_req[i] = -1;
	if (!p->item_fail || !p->end_keys || !p->rev_keys || !p->end_res || !p->end_sums ||
	    (st->fsdir[0] && !p->disk_path) || (st->checksum && !p->first_req))
		goto fail_nomem;
	mc_rbuf_init(&r, p->start.resp, p->start.resp_len);
	m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 8);
	if (m != n) {
		mc_put_part_fail(p, MC_ERR_RPC_FAIL);
		return p->rc;
	}
	/* One write per item is the common case: room for them at once, not by doubling. */
	if (mc_xfer_list_reserve(&p->xl, n))
		goto fail_nomem;
	for (i = 0; i < n; i++) {
		int code = mc_rbuf_i32(&r);
		uint32_t nrep = mc_rbuf_count(&r, MC_RPC_MAX_REPLICAS, 18);

		items[i].result = code == MC_ERR_OBJECT_ALREADY_EXISTS ? 0 : code;
		items[i].space_hint = -1;
		p->item_fail[i] = code != 0;	/* nothing to write or finish */
		for (j = 0; j < nrep; j++) {
			struct mc_rpc_replica rep;
			struct mc_iov one = { (void *)items[i].buf, items[i].size };
			const struct mc_iov *parts = items[i].iov ? items[i].iov : &one;
			uint32_t np = items[i].iov ? items[i].iovcnt : 1, k;
			uint64_t off = 0;

			mc_rpc_get_replica(&r, &rep);
			if (r.err)
				break;
			if (rep.type == MC_REPLICA_DISK && rep.size == items[i].size && code == 0 &&
			    p->disk_path && rep.path.n < sizeof(p->disk_path[i])) {
				/* --root_fs_dir: the file is written after PutEnd(MEMORY), on the
				 * shared-directory worker (store_tier_fsdir.c). */
				memcpy(p->disk_path[i], rep.path.p, rep.path.n);
				p->disk_path[i][rep.path.n] = '\0';
				continue;
			}
			if (rep.type != MC_REPLICA_MEMORY || rep.size != items[i].size)
				continue;
			/* A batch's replicas are on few segments: parsed once per run of the same
			 * endpoint. */
			if (!have_ep || !mc_strv_eq(rep.endpoint, last_ep)) {
				have_ep = 0;
				if (mc_endpoint_parse(rep.endpoint, host, sizeof(host), &port)) {
					p->item_fail[i] = 2;
					continue;
				}
				last_ep = rep.endpoint;
				have_ep = 1;
			}
			if (p->first_req && p->first_req[i] < 0)
				p->first_req[i] = p->xl.n;
			for (k = 0; k < np; off += parts[k].len, k++) {
				if (parts[k].len == 0)
					continue;
				if (mc_xfer_list_add(&p->xl, host, port, rep.segment_name,
						     MC_XFER_WRITE, parts[k].base, rep.addr + off,
						     parts[k].len, i))
					goto fail_nomem;
				if (items[i].nic_hint)
					snprintf(p->xl.xr[p->xl.n - 1].nic, sizeof(p->xl.xr[0].nic),
						 "%s", items[i].nic_hint);
			}
		}
	}
	if (r.err) {
		mc_put_part_fail(p, MC_ERR_RPC_FAIL);
		return p->rc;
	}
	if (r.left > 0) {
		/* Trailing u8: may the items refused for space fit soon? */
		int hint = mc_rbuf_u8(&r) != 0;

		for (i = 0; i < n; i++)
			if (items[i].result == MC_ERR_NO_AVAILABLE_HANDLE)
				items[i].space_hint = hint;
	}
	return 0;

fail_nomem:
	mc_put_part_fail(p, -ENOMEM);
	return p->rc;
}

/* Stage 3: the part's writes (with the objects' checksums computed while their bytes are on
 * their way: by the engine where they pass through a core anyway, a copy, a socket, GPU
 * staging, else here meanwhile), then its PutEnd sent for what was written. */
static void mc_put_part_write(struct mc_put_part *p)
{
	struct mc_store *st = p->st;
	struct mc_put_item *items = p->items;
	struct mc_xfer_list *xl = &p->xl;
	struct mc_put_crcs *crcs = &p->crcs;
	struct mc_store_xfer *x;
	uint32_t i, j, n = p->n;
	int by_engine = 0;

	if (p->first_req && xl->n) {
		crcs->want = calloc(xl->n, 1);
		crcs->have = calloc(xl->n, 1);
		crcs->crc = calloc(xl->n, sizeof(*crcs->crc));
		if (!crcs->want || !crcs->have || !crcs->crc) {
			mc_put_part_fail(p, -ENOMEM);
			return;
		}
		for (j = 0; j < xl->n; j++) {
			uint32_t it = xl->item[j];

			/* The first replica's writes: first_req .. + the non-empty parts. */
			crcs->want[j] = (uint8_t)(p->first_req[it] >= 0 && j >= p->first_req[it] &&
						  j < p->first_req[it] +
							      mc_put_item_writes(&items[it]) &&
						  items[it].result == 0 && p->item_fail[it] == 0 &&
						  (st->checksum_device ||
						   !mc_store_on_device(st, xl->xr[j].local)));
		}
	}
	/* No notify: the engine's values are all read once the batch is done. */
	x = xl->n ? mc_store_transfer_start(st, xl->xr, xl->n, 0, crcs->want) : NULL;
	for (i = 0; p->first_req && i < n; i++) {
		if (items[i].result != 0 || p->item_fail[i] != 0)
			continue;
		if (mc_put_item_by_engine(&items[i], crcs, p->first_req[i]))
			by_engine = 1;
		else
			mc_put_item_crc(st, &items[i], crcs, p->first_req[i]);
	}
	if (x)
		mc_store_transfer_finish(x, p->first_req ? mc_put_on_write : NULL, crcs);
	for (i = 0; by_engine && i < n; i++)
		if (items[i].result == 0 && p->item_fail[i] == 0 &&
		    mc_put_item_by_engine(&items[i], crcs, p->first_req[i]))
			mc_put_item_crc(st, &items[i], crcs, p->first_req[i]);
	if (xl->n && mc_fault(MC_FAULT_PUT_WRITE))
		for (j = 0; j < xl->n; j++)
			xl->xr[j].status = MC_ERR_TRANSFER_FAIL;	/* test hook (ssd/fault.h) */
	mc_store_note_transfers(st, xl->xr, xl->n);
	for (j = 0; j < xl->n; j++)
		if (xl->xr[j].status)
			p->item_fail[xl->item[j]] = 2;
	for (i = 0; i < n; i++) {
		if (items[i].result != 0 || p->item_fail[i] == 1)
			continue;	/* failed at PutStart, or already existed */
		if (p->item_fail[i] == 2) {
			p->rev_keys[p->nrev++] = items[i].key;
		} else {
			p->end_sums[p->nend].present = (uint8_t)items[i].has_crc;
			p->end_sums[p->nend].value = items[i].crc;
			p->end_keys[p->nend++] = items[i].key;
		}
	}
	/* With a shared directory the memory replicas end now, the DISK one when its file is in.
	 * The objects' checksums go with them. */
	if (p->nend) {
		mc_put_finish_call(st, &p->end, p->end_keys, p->nend, 0, p->upsert,
				   p->disk_path ? MC_REPLICA_MEMORY : MC_REPLICA_ALL,
				   st->checksum ? p->end_sums : NULL);
		mc_store_call_begin(st, &p->end, &p->end_p);
		p->end_begun = 1;
	}
}

/* Stage 4: the PutEnd's answer, the revoke of what was not written, every item's result; frees
 * what the part held.  Every part passes here, whatever happened before. */
static void mc_put_part_finish(struct mc_put_part *p)
{
	struct mc_store *st = p->st;
	struct mc_put_item *items = p->items;
	uint32_t i, j, n = p->n;
	int rc = 0;

	if (p->end_begun)
		rc = mc_put_finish_results(st, &p->end, &p->end_p, p->nend, p->end_res);
	for (i = 0, j = 0; p->rc == 0 && i < n && rc == 0; i++) {
		if (items[i].result != 0 || p->item_fail[i] != 0)
			continue;
		items[i].result = p->end_res[j++];
		if (items[i].result == 0 && p->disk_path && p->disk_path[i][0]) {
			struct mc_iov one = { (void *)items[i].buf, items[i].size };

			mc_store_fs_submit(st, items[i].key, p->disk_path[i],
					   items[i].iov ? items[i].iov : &one,
					   items[i].iov ? items[i].iovcnt : 1, items[i].size,
					   p->upsert);
		}
	}
	if (p->rc == 0 && p->nrev) {
		int rrc;

		mc_log_warn("put: %u object(s) could not be written to their replicas; revoking",
			    p->nrev);
		/* end_res is free again: the revoke's per-key codes go there. */
		rrc = mc_store_put_finish(st, p->rev_keys, p->nrev, 1, p->upsert, MC_REPLICA_ALL,
					  p->end_res, NULL);
		for (i = 0, j = 0; i < n; i++) {
			if (items[i].result != 0 || p->item_fail[i] != 2)
				continue;
			items[i].result = MC_ERR_TRANSFER_FAIL;
			/* Only a revoked allocation may be put again: otherwise the new PutStart
			 * would find the old one and answer "exists". */
			if (p->xfail && rrc == 0 && p->end_res[j] == 0)
				p->xfail[i] = 1;
			j++;
		}
	}
	if (p->rc == 0 && rc)
		for (i = 0; i < n; i++)
			if (items[i].result == 0 && p->item_fail[i] == 0)
				items[i].result = rc;
	mc_xfer_list_free(&p->xl);
	free(p->item_fail);
	free(p->end_keys);
	free(p->rev_keys);
	free(p->end_res);
	free(p->end_sums);
	free(p->disk_path);
	free(p->first_req);
	free(p->crcs.want);
	free(p->crcs.have);
	free(p->crcs.crc);
	mc_rpc_call_fini(&p->start);
	if (p->end_begun)
		mc_rpc_call_fini(&p->end);
}

/* The number of parts a put batch of n items goes in: one, or with MC_PUT_PIPELINE=1 up to
 * MC_PUT_PARTS_MAX of at least MC_PUT_PART_MIN items each.  Off by default: on two cores shared
 * with the master and the segment's owner, two parts of a batch of 128 small puts made it
 * slower (p50 0.16-0.18 ms against 0.12-0.13) and cost the master a quarter more CPU per put
 * (twice the requests); the overlap needs idle cores. */
#define MC_PUT_PART_MIN 64
#define MC_PUT_PARTS_MAX 4

static uint32_t mc_put_nparts(struct mc_store *st, uint32_t n, int upsert)
{
	const char *e = getenv("MC_PUT_PIPELINE");
	uint32_t k;

	/* Upserts of one key twice in a batch depend on the order the master sees them in,
	 * which parts on different connections do not keep; without direct lanes the parts
	 * would only go one after the other. */
	if (e == NULL || strcmp(e, "1") != 0 || upsert || !mc_store_lanes_on(st))
		return 1;
	k = n / MC_PUT_PART_MIN;
	return k < 1 ? 1 : k > MC_PUT_PARTS_MAX ? MC_PUT_PARTS_MAX : k;
}

/* One attempt of a put batch: PutStart, the writes, PutEnd of what was written and PutRevoke
 * of the rest.  xfail[i] (may be NULL) is set for an item whose write failed and whose
 * allocation was revoked: it may be tried again.
 *
 * A batch of many keys goes in parts, in a pipeline: the next part's PutStart is sent once the
 * part before it is placed (so the master sees the PutStarts in the batch's order) and the
 * master works on it while this part's bytes go out; a part's PutEnd is sent as soon as its
 * writes are done, and its answer read after the next part's writes.  Each part's items are
 * decided by its own answers: a part that fails (refused, its writes failed) takes only its own
 * items with it, and this returns only when every PutEnd sent has been answered, so nothing
 * is reported written before the master acknowledged it. */
static int mc_put_pass(struct mc_store *st, struct mc_put_item *items, uint32_t n,
		       const struct mc_rpc_config *cfg, int upsert, uint8_t *xfail)
{
	struct mc_put_part parts[MC_PUT_PARTS_MAX];
	uint32_t k, np, i, first = 0;

	if (n == 0)
		return 0;
	np = mc_put_nparts(st, n, upsert);
	memset(parts, 0, sizeof(parts));
	for (i = 0; i < np; i++) {
		uint32_t cnt = n / np + (i < n % np);

		parts[i].st = st;
		parts[i].cfg = cfg;
		parts[i].upsert = upsert;
		parts[i].items = items + first;
		parts[i].n = cnt;
		parts[i].xfail = xfail ? xfail + first : NULL;
		first += cnt;
	}
	mc_put_part_start(&parts[0]);
	mc_put_part_placed(&parts[0]);
	for (k = 0; k < np; k++) {
		if (k + 1 < np)
			mc_put_part_start(&parts[k + 1]);
		if (parts[k].rc == 0)
			mc_put_part_write(&parts[k]);
		if (k > 0)
			mc_put_part_finish(&parts[k - 1]);
		if (k + 1 < np)
			mc_put_part_placed(&parts[k + 1]);
	}
	mc_put_part_finish(&parts[np - 1]);
	return 0;
}

/* A put batch, and one more pass for the items whose writes failed.  Returns 0; each item's
 * result says how it went. */
static int mc_store_put_once(struct mc_store *st, struct mc_put_item *items, uint32_t n,
			     const struct mc_rpc_config *cfg, int upsert)
{
	struct mc_put_item *again;
	uint8_t *xfail;
	uint32_t i, m = 0;

	if (n == 0)
		return 0;
	xfail = calloc(n, sizeof(*xfail));
	if (xfail == NULL) {
		for (i = 0; i < n; i++)
			items[i].result = -ENOMEM;
		return 0;
	}
	mc_put_pass(st, items, n, cfg, upsert, xfail);
	for (i = 0; i < n; i++)
		m += xfail[i];
	/* Once more for the objects whose writes failed (their allocations are revoked and the
	 * master has heard which segments failed, so it can place them elsewhere). */
	again = m ? calloc(m, sizeof(*again)) : NULL;
	if (again) {
		uint32_t k = 0;

		for (i = 0; i < n; i++)
			if (xfail[i]) {
				again[k] = items[i];
				again[k++].result = 0;
			}
		mc_log_info("put: trying %u object(s) again after failed writes", m);
		mc_put_pass(st, again, m, cfg, upsert, NULL);
		for (i = 0, k = 0; i < n; i++)
			if (xfail[i]) {
				items[i].space_hint = again[k].space_hint;
				items[i].result = again[k++].result;
			}
		free(again);
	}
	free(xfail);
	return 0;
}

/* ---- waiting for space ---- */

#define MC_PUT_SPACE_WAIT_DEFAULT_MS 3000
#define MC_PUT_SPACE_WAIT_MAX_MS 3600000

static int64_t mc_put_space_wait_ms = MC_PUT_SPACE_WAIT_DEFAULT_MS;
static pthread_once_t mc_put_space_once = PTHREAD_ONCE_INIT;

/* MOONCAKE_PUT_SPACE_WAIT_MS: how long a put refused for space (NO_AVAILABLE_HANDLE) keeps
 * asking while eviction or demotion to SSD frees memory.  0 turns the wait off. */
static void mc_put_space_init(void)
{
	const char *v = getenv("MOONCAKE_PUT_SPACE_WAIT_MS");
	char *end;
	long long ms;

	if (v == NULL || *v == '\0')
		return;
	errno = 0;
	ms = strtoll(v, &end, 10);
	if (errno || *end || ms < 0 || ms > MC_PUT_SPACE_WAIT_MAX_MS) {
		mc_log_err("MOONCAKE_PUT_SPACE_WAIT_MS=%s: not a number of milliseconds in "
			   "[0, %d]; using %d", v, MC_PUT_SPACE_WAIT_MAX_MS,
			   MC_PUT_SPACE_WAIT_DEFAULT_MS);
		return;
	}
	mc_put_space_wait_ms = ms;
}

/* Put the items; those refused for space are asked again, with a short backoff (2 ms doubling
 * to 50 ms), until they fit or the wait bound passes: a burst larger than free memory then
 * waits for the space that eviction (or demotion to SSD) is freeing instead of failing.  Only
 * while the master expects room soon (or does not say): a pool where nothing can be freed
 * answers NO_AVAILABLE_HANDLE at once. */
int mc_store_put_many_raw(struct mc_store *st, struct mc_put_item *items, uint32_t n,
			  const struct mc_rpc_config *cfg, int upsert)
{
	struct mc_put_item *again = NULL;
	uint32_t *at = NULL, i, k;
	int64_t deadline, pause = 2;
	int rc;

	rc = mc_store_put_once(st, items, n, cfg, upsert);
	pthread_once(&mc_put_space_once, mc_put_space_init);
	for (i = 0; i < n && items[i].result != MC_ERR_NO_AVAILABLE_HANDLE; i++)
		;
	if (rc || i == n || mc_put_space_wait_ms == 0)
		return rc;
	deadline = mc_store_now_ms() + mc_put_space_wait_ms;
	again = malloc(n * sizeof(*again));
	at = malloc(n * sizeof(*at));
	while (again && at) {
		struct timespec ts;
		int64_t left = deadline - mc_store_now_ms();
		int coming = 0;

		for (i = 0, k = 0; i < n; i++)
			if (items[i].result == MC_ERR_NO_AVAILABLE_HANDLE) {
				again[k] = items[i];
				at[k++] = i;
				coming |= items[i].space_hint != 0;
			}
		if (k == 0 || left <= 0 || !coming)
			break;
		if (pause > left)
			pause = left;
		ts.tv_sec = pause / 1000;
		ts.tv_nsec = (pause % 1000) * 1000000;
		nanosleep(&ts, NULL);
		pause = pause * 2 > 50 ? 50 : pause * 2;
		rc = mc_store_put_once(st, again, k, cfg, upsert);
		if (rc)
			break;
		for (i = 0; i < k; i++) {
			items[at[i]].result = again[i].result;
			items[at[i]].space_hint = again[i].space_hint;
		}
	}
	free(again);
	free(at);
	return rc;
}
