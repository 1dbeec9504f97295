/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store operations behind the C API: put (PutStart, write every replica, PutEnd or
 * PutRevoke), exist, size, query, remove; get is in store_get.c.  Each runs on the calling
 * thread and uses one batch RPC per step whatever the number of keys, with all transfers of a
 * step in flight at once.
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

void mc_store_config_from_c(struct mc_rpc_config *cfg, size_t replica_num, int soft_pin,
			    int hard_pin, const char **preferred, size_t npreferred)
{
	size_t i;

	mc_rpc_config_default(cfg);
	cfg->replica_num = replica_num ? (uint32_t)replica_num : 1;
	cfg->with_hard_pin = hard_pin != 0;
	cfg->soft_pin_action = soft_pin ? MC_SOFT_PIN_ENABLE : MC_SOFT_PIN_PRESERVE;
	for (i = 0; preferred && i < npreferred && i < MC_RPC_MAX_PREFERRED; i++)
		if (preferred[i])
			cfg->preferred[cfg->n_preferred++] = mc_strv_c(preferred[i]);
}

int mc_xfer_list_reserve(struct mc_xfer_list *l, uint32_t cap)
{
	struct mc_xfer_req *nxr;
	uint32_t *nxi;

	if (cap <= l->cap)
		return 0;
	nxr = realloc(l->xr, cap * sizeof(*l->xr));
	if (nxr == NULL)
		return -ENOMEM;
	l->xr = nxr;
	nxi = realloc(l->item, cap * sizeof(*l->item));
	if (nxi == NULL)
		return -ENOMEM;
	l->item = nxi;
	l->cap = cap;
	return 0;
}

int mc_xfer_list_add(struct mc_xfer_list *l, const char *host, uint16_t port,
		     struct mc_strv segment, int opcode, void *local, uint64_t remote, uint64_t len,
		     uint32_t item)
{
	struct mc_xfer_req *x;
	size_t hl, sl;

	if (l->n == l->cap && mc_xfer_list_reserve(l, l->cap ? l->cap * 2 : 16))
		return -ENOMEM;
	/* Field by field: a request is 600 bytes of mostly string room, and a batch of small
	 * values adds one per key (clearing it all, and a printf for the host, were a tenth of
	 * the client's time per small put). */
	x = &l->xr[l->n];
	hl = strlen(host);
	if (hl >= sizeof(x->host))
		hl = sizeof(x->host) - 1;
	memcpy(x->host, host, hl);
	x->host[hl] = '\0';
	x->port = port;
	sl = segment.n < sizeof(x->segment) ? segment.n : 0;
	if (sl)
		memcpy(x->segment, segment.p, sl);
	x->segment[sl] = '\0';
	x->nic[0] = '\0';
	x->status = 0;
	x->opcode = opcode;
	x->local = local;
	x->remote = remote;
	x->len = len;
	l->item[l->n++] = item;
	return 0;
}

void mc_xfer_list_free(struct mc_xfer_list *l)
{
	free(l->xr);
	free(l->item);
	memset(l, 0, sizeof(*l));
}

static void mc_put_keys(struct mc_wbuf *w, const char *const *keys, uint32_t n)
{
	uint32_t i;

	mc_wbuf_u32(w, n);
	for (i = 0; i < n; i++)
		mc_wbuf_cstr(w, keys[i]);
}

int mc_store_put_finish(struct mc_store *st, const char **keys, uint32_t n, int revoke,
			int upsert, uint8_t rtype, int *res, const struct mc_rpc_checksum *sums)
{
	struct mc_rpc_call call;
	uint16_t op;
	struct mc_rbuf r;
	uint32_t i, m;
	int rc;

	if (n == 0)
		return 0;
	if (upsert)
		op = revoke ? (n > 1 ? MC_OP_BATCH_UPSERT_REVOKE : MC_OP_UPSERT_REVOKE)
			    : (n > 1 ? MC_OP_BATCH_UPSERT_END : MC_OP_UPSERT_END);
	else
		op = revoke ? (n > 1 ? MC_OP_BATCH_PUT_REVOKE : MC_OP_PUT_REVOKE)
			    : (n > 1 ? MC_OP_BATCH_PUT_END : MC_OP_PUT_END);
	mc_rpc_call_init(&call, op);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_wbuf_u8(&call.req, rtype);
	mc_put_keys(&call.req, keys, n);
	if (sums && !revoke)
		mc_rpc_put_checksums(&call.req, sums, n);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc == 0 && res) {
		mc_rbuf_init(&r, call.resp, call.resp_len);
		m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 4);
		for (i = 0; i < n; i++)
			res[i] = i < m ? mc_rbuf_i32(&r) : MC_ERR_RPC_FAIL;
		if (r.err || m != n)
			rc = MC_ERR_RPC_FAIL;
	}
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

/* One attempt of a put batch: PutStart, the writes, PutEnd of what was written and PutRevoke
 * of the rest.  xfail[i] (may be NULL) is set for an item whose write failed and whose
 * allocation was revoked: it may be tried again. */
static int mc_put_pass(struct mc_store *st, struct mc_put_item *items, uint32_t n,
		       const struct mc_rpc_config *cfg, int upsert, uint8_t *xfail)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	struct mc_xfer_list xl = { 0 };
	uint32_t i, j, m;
	const char **end_keys = NULL, **rev_keys = NULL;
	uint32_t nend = 0, nrev = 0;
	int *item_fail = NULL, *end_res = NULL;
	struct mc_rpc_checksum *end_sums = NULL;
	char (*disk_path)[MC_RPC_MAX_PATH + 1] = NULL;
	int64_t *first_req = NULL;	/* checksums on: item's first write of its first replica */
	struct mc_put_crcs crcs = { NULL, NULL, NULL };
	struct mc_strv last_ep = { NULL, 0 };	/* the endpoint host and port were parsed from, */
	int have_ep = 0;			/* once there is one */
	char host[256];
	uint16_t port = 0;
	int hinted = cfg->has_evict_hint &&
		     !__atomic_load_n(&st->evict_hint_refused, __ATOMIC_RELAXED);
	int rc;

	if (n == 0)
		return 0;
again:
	mc_rpc_call_init(&call, upsert ? (n > 1 ? MC_OP_BATCH_UPSERT_START : MC_OP_UPSERT_START)
				       : (n > 1 ? MC_OP_BATCH_PUT_START : MC_OP_PUT_START));
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_rpc_put_config(&call.req, cfg);
	mc_wbuf_u32(&call.req, n);
	for (i = 0; i < n; i++) {
		mc_wbuf_cstr(&call.req, items[i].key);
		mc_wbuf_u64(&call.req, items[i].size);
	}
	if (hinted)
		mc_rpc_put_evict_hint(&call.req, cfg);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc == MC_ERR_INVALID_PARAMS && hinted) {
		/* A master from before the eviction hint refuses the body with it: ask again
		 * without, and send that master none from now on. */
		__atomic_store_n(&st->evict_hint_refused, 1, __ATOMIC_RELAXED);
		hinted = 0;
		mc_rpc_call_fini(&call);
		goto again;
	}
	if (rc) {
		for (i = 0; i < n; i++)
			items[i].result = rc;
		goto out;
	}
	item_fail = calloc(n, sizeof(*item_fail));
	end_keys = calloc(n, sizeof(*end_keys));
	rev_keys = calloc(n, sizeof(*rev_keys));
	end_res = calloc(n, sizeof(*end_res));
	end_sums = calloc(n, sizeof(*end_sums));
	if (st->fsdir[0])
		disk_path = calloc(n, sizeof(*disk_path));
	if (st->checksum && (first_req = malloc(n * sizeof(*first_req))) != NULL)
		for (i = 0; i < n; i++)
			first_req[i] = -1;
	if (!item_fail || !end_keys || !rev_keys || !end_res || !end_sums ||
	    (st->fsdir[0] && !disk_path) || (st->checksum && !first_req)) {
		rc = -ENOMEM;
		goto out;
	}
	mc_rbuf_init(&r, call.resp, call.resp_len);
	m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 8);
	if (m != n) {
		rc = MC_ERR_RPC_FAIL;
		goto out;
	}
	/* One write per item is the common case: room for them at once, not by doubling. */
	if (mc_xfer_list_reserve(&xl, n)) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		int code = mc_rbuf_i32(&r);
		uint32_t nrep = mc_rbuf_count(&r, MC_RPC_MAX_REPLICAS, 18);

		items[i].result = code == MC_ERR_OBJECT_ALREADY_EXISTS ? 0 : code;
		items[i].space_hint = -1;
		item_fail[i] = code != 0;	/* nothing to write or finish */
		for (j = 0; j < nrep; j++) {
			struct mc_rpc_replica rep;

			mc_rpc_get_replica(&r, &rep);
			if (r.err)
				break;
			if (rep.type == MC_REPLICA_DISK && rep.size == items[i].size && code == 0 &&
			    disk_path && rep.path.n < sizeof(disk_path[i])) {
				/* --root_fs_dir: the file is written after PutEnd(MEMORY), on the
				 * shared-directory worker (store_tier_fsdir.c). */
				memcpy(disk_path[i], rep.path.p, rep.path.n);
				disk_path[i][rep.path.n] = '\0';
				continue;
			}
			if (rep.type != MC_REPLICA_MEMORY || rep.size != items[i].size)
				continue;
			{
				struct mc_iov one = { (void *)items[i].buf, items[i].size };
				const struct mc_iov *parts = items[i].iov ? items[i].iov : &one;
				uint32_t np = items[i].iov ? items[i].iovcnt : 1, k;
				uint64_t off = 0;

				/* A batch's replicas are on few segments: parsed once per run of the
				 * same endpoint. */
				if (!have_ep || !mc_strv_eq(rep.endpoint, last_ep)) {
					have_ep = 0;
					if (mc_endpoint_parse(rep.endpoint, host, sizeof(host), &port)) {
						item_fail[i] = 2;
						continue;
					}
					last_ep = rep.endpoint;
					have_ep = 1;
				}
				if (first_req && first_req[i] < 0)
					first_req[i] = xl.n;
				for (k = 0; k < np; off += parts[k].len, k++) {
					if (parts[k].len == 0)
						continue;
					if (mc_xfer_list_add(&xl, host, port, rep.segment_name, MC_XFER_WRITE, parts[k].base,
							     rep.addr + off, parts[k].len, i)) {
						rc = -ENOMEM;
						goto out;
					}
					if (items[i].nic_hint)
						snprintf(xl.xr[xl.n - 1].nic, sizeof(xl.xr[0].nic),
							 "%s", items[i].nic_hint);
				}
			}
		}
	}
	if (r.err) {
		rc = MC_ERR_RPC_FAIL;
		goto out;
	}
	if (r.left > 0) {
		/* Trailing u8: may the items refused for space fit soon? */
		int hint = mc_rbuf_u8(&r) != 0;

		for (i = 0; i < n; i++)
			if (items[i].result == MC_ERR_NO_AVAILABLE_HANDLE)
				items[i].space_hint = hint;
	}
	{
		/* The objects' checksums are computed while their bytes are on their way: by the
		 * engine where they pass through a core anyway (a copy, a socket, GPU staging),
		 * else here meanwhile. */
		struct mc_store_xfer *x;
		int by_engine = 0;

		if (first_req && xl.n) {
			crcs.want = calloc(xl.n, 1);
			crcs.have = calloc(xl.n, 1);
			crcs.crc = calloc(xl.n, sizeof(*crcs.crc));
			if (!crcs.want || !crcs.have || !crcs.crc) {
				rc = -ENOMEM;
				goto out;
			}
			for (j = 0; j < xl.n; j++) {
				uint32_t it = xl.item[j];

				/* The first replica's writes: first_req .. + the non-empty parts. */
				crcs.want[j] = (uint8_t)(first_req[it] >= 0 && j >= first_req[it] &&
							 j < first_req[it] + mc_put_item_writes(&items[it]) &&
							 items[it].result == 0 && item_fail[it] == 0 &&
							 (st->checksum_device ||
							  !mc_store_on_device(st, xl.xr[j].local)));
			}
		}
		/* No notify: the engine's values are all read once the batch is done. */
		x = xl.n ? mc_store_transfer_start(st, xl.xr, xl.n, 0, crcs.want) : NULL;
		for (i = 0; first_req && i < n; i++) {
			if (items[i].result != 0 || item_fail[i] != 0)
				continue;
			if (mc_put_item_by_engine(&items[i], &crcs, first_req[i]))
				by_engine = 1;
			else
				mc_put_item_crc(st, &items[i], &crcs, first_req[i]);
		}
		if (x)
			mc_store_transfer_finish(x, first_req ? mc_put_on_write : NULL, &crcs);
		for (i = 0; by_engine && i < n; i++)
			if (items[i].result == 0 && item_fail[i] == 0 &&
			    mc_put_item_by_engine(&items[i], &crcs, first_req[i]))
				mc_put_item_crc(st, &items[i], &crcs, first_req[i]);
	}
	mc_store_note_transfers(st, xl.xr, xl.n);
	for (j = 0; j < xl.n; j++)
		if (xl.xr[j].status)
			item_fail[xl.item[j]] = 2;
	for (i = 0; i < n; i++) {
		if (items[i].result != 0 || item_fail[i] == 1)
			continue;	/* failed at PutStart, or already existed */
		if (item_fail[i] == 2) {
			rev_keys[nrev++] = items[i].key;
		} else {
			end_sums[nend].present = (uint8_t)items[i].has_crc;
			end_sums[nend].value = items[i].crc;
			end_keys[nend++] = items[i].key;
		}
	}
	/* With a shared directory the memory replicas end now, the DISK one when its file is in.
	 * The objects' checksums go with them. */
	rc = mc_store_put_finish(st, end_keys, nend, 0, upsert,
				 disk_path ? MC_REPLICA_MEMORY : MC_REPLICA_ALL, end_res,
				 st->checksum ? end_sums : NULL);
	for (i = 0, j = 0; i < n && rc == 0; i++) {
		if (items[i].result != 0 || item_fail[i] != 0)
			continue;
		items[i].result = end_res[j++];
		if (items[i].result == 0 && disk_path && disk_path[i][0]) {
			struct mc_iov one = { (void *)items[i].buf, items[i].size };

			mc_store_fs_submit(st, items[i].key, disk_path[i],
					   items[i].iov ? items[i].iov : &one,
					   items[i].iov ? items[i].iovcnt : 1, items[i].size, upsert);
		}
	}
	if (nrev) {
		int rrc;

		mc_log_warn("put: %u object(s) could not be written to their replicas; revoking",
			    nrev);
		/* end_res is free again: the revoke's per-key codes go there. */
		rrc = mc_store_put_finish(st, rev_keys, nrev, 1, upsert, MC_REPLICA_ALL, end_res,
					  NULL);
		for (i = 0, j = 0; i < n; i++) {
			if (items[i].result != 0 || item_fail[i] != 2)
				continue;
			items[i].result = MC_ERR_TRANSFER_FAIL;
			/* Only a revoked allocation may be put again: otherwise the new PutStart
			 * would find the old one and answer "exists". */
			if (xfail && rrc == 0 && end_res[j] == 0)
				xfail[i] = 1;
			j++;
		}
	}
	if (rc)
		for (i = 0; i < n; i++)
			if (items[i].result == 0 && item_fail[i] == 0)
				items[i].result = rc;
	rc = 0;
out:
	if (rc)
		for (i = 0; i < n; i++)
			if (items[i].result == 0)
				items[i].result = rc;
	mc_xfer_list_free(&xl);
	free(item_fail);
	free(end_keys);
	free(rev_keys);
	free(end_res);
	free(end_sums);
	free(disk_path);
	free(first_req);
	free(crcs.want);
	free(crcs.have);
	free(crcs.crc);
	mc_rpc_call_fini(&call);
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

int mc_store_keys_call(struct mc_store *st, uint16_t op, const uint8_t *pre, size_t npre,
		       const char **keys, uint32_t n, int *results)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	uint32_t i, m;
	int rc;

	mc_rpc_call_init(&call, op);
	if (npre)
		mc_wbuf_put(&call.req, pre, npre);
	mc_put_keys(&call.req, keys, n);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc == 0) {
		mc_rbuf_init(&r, call.resp, call.resp_len);
		m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 4);
		for (i = 0; i < n; i++)
			results[i] = i < m ? mc_rbuf_i32(&r) : MC_ERR_RPC_FAIL;
		if (r.err || m != n)
			rc = MC_ERR_RPC_FAIL;
	}
	if (rc)
		for (i = 0; i < n; i++)
			results[i] = rc;
	mc_rpc_call_fini(&call);
	return rc;
}

int mc_store_exist_many(struct mc_store *st, const char **keys, uint32_t n, int *results)
{
	if (n == 0)
		return 0;
	mc_store_keys_call(st, n > 1 ? MC_OP_BATCH_EXIST_KEY : MC_OP_EXIST_KEY, NULL, 0, keys, n,
			   results);
	return 0;
}

int mc_store_probe_policy(const char *name)
{
	if (name == NULL || !strcmp(name, "none"))
		return MC_PROBE_NONE;
	if (!strcmp(name, "LastHitOnly"))
		return MC_PROBE_LAST_HIT_ONLY;
	return -1;
}

int mc_store_probe_many(struct mc_store *st, const char **keys, uint32_t n, int policy,
			uint32_t candidate_size, int *results)
{
	uint8_t pre[5] = { (uint8_t)policy };

	if (n == 0)
		return 0;
	if (policy == MC_PROBE_NONE && n == 1)
		return mc_store_keys_call(st, MC_OP_PROBE_KEY, NULL, 0, keys, n, results);
	mc_put_le32(pre + 1, candidate_size);
	return mc_store_keys_call(st, MC_OP_BATCH_PROBE_KEY, pre, sizeof(pre), keys, n, results);
}

int mc_store_remove_many(struct mc_store *st, const char **keys, uint32_t n, int force,
			 int *results)
{
	uint8_t f = force ? 1 : 0;

	if (n == 0)
		return 0;
	mc_store_keys_call(st, n > 1 ? MC_OP_BATCH_REMOVE : MC_OP_REMOVE, &f, 1, keys, n, results);
	return 0;
}

int64_t mc_store_get_size(struct mc_store *st, const char *key)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	int64_t res;
	int rc;

	mc_rpc_call_init(&call, MC_OP_GET_REPLICA_LIST);
	mc_put_keys(&call.req, &key, 1);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc) {
		res = rc;
	} else {
		struct mc_rpc_replica rep;
		uint32_t nrep;

		mc_rbuf_init(&r, call.resp, call.resp_len);
		(void)mc_rbuf_u64(&r);
		(void)mc_rbuf_u32(&r);
		res = mc_rbuf_i32(&r);
		nrep = mc_rbuf_u32(&r);
		if (res == 0 && nrep > 0) {
			mc_rpc_get_replica(&r, &rep);
			res = (int64_t)rep.size;
		} else if (res == 0) {
			res = MC_ERR_REPLICA_IS_NOT_READY;
		}
		if (r.err)
			res = MC_ERR_RPC_FAIL;
	}
	mc_rpc_call_fini(&call);
	return res;
}

static int64_t mc_store_count_call(struct mc_store *st, uint16_t op, int force, const char *regex)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	int64_t res;
	int rc;

	mc_rpc_call_init(&call, op);
	mc_wbuf_u8(&call.req, force ? 1 : 0);
	if (regex)
		mc_wbuf_cstr(&call.req, regex);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc) {
		res = rc;
	} else {
		mc_rbuf_init(&r, call.resp, call.resp_len);
		res = mc_rbuf_i64(&r);
		if (r.err)
			res = MC_ERR_RPC_FAIL;
	}
	mc_rpc_call_fini(&call);
	return res;
}

int64_t mc_store_remove_regex(struct mc_store *st, const char *pattern, int force)
{
	return mc_store_count_call(st, MC_OP_REMOVE_BY_REGEX, force, pattern);
}

int64_t mc_store_remove_all(struct mc_store *st, int force)
{
	return mc_store_count_call(st, MC_OP_REMOVE_ALL, force, NULL);
}

int mc_store_query_many(struct mc_store *st, struct mc_query_item *items, uint32_t n)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	uint32_t i, j, m;
	int rc;

	if (n == 0)
		return 0;
	mc_rpc_call_init(&call, n > 1 ? MC_OP_BATCH_GET_REPLICA_LIST : MC_OP_GET_REPLICA_LIST);
	mc_wbuf_u32(&call.req, n);
	for (i = 0; i < n; i++)
		mc_wbuf_cstr(&call.req, items[i].key);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc == 0) {
		/* The replicas go into one array for the batch (first[i]: where key i's start),
		 * their names stay views into the answer, which the batch keeps. */
		struct mc_rpc_replica *reps = NULL;
		uint32_t *first = calloc(n, sizeof(*first)), nr = 0, cap = 0;

		mc_rbuf_init(&r, call.resp, call.resp_len);
		(void)mc_rbuf_u64(&r);
		m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 8);
		if (m != n || first == NULL)
			rc = m != n ? MC_ERR_RPC_FAIL : -ENOMEM;
		for (i = 0; i < n && rc == 0; i++) {
			items[i].code = mc_rbuf_i32(&r);
			items[i].nrep = mc_rbuf_count(&r, MC_RPC_MAX_REPLICAS, 18);
			first[i] = nr;
			if (nr + items[i].nrep > cap) {
				uint32_t nc = cap ? cap * 2 : n + 8;
				struct mc_rpc_replica *g;

				while (nc < nr + items[i].nrep)
					nc *= 2;
				g = realloc(reps, nc * sizeof(*reps));
				if (g == NULL) {
					rc = -ENOMEM;
					break;
				}
				reps = g;
				cap = nc;
			}
			for (j = 0; j < items[i].nrep; j++) {
				mc_rpc_get_replica(&r, &reps[nr]);
				reps[nr++].path = mc_strv_c("");
			}
		}
		if (rc == 0 && r.err)
			rc = MC_ERR_RPC_FAIL;
		if (rc == 0) {
			for (i = 0; i < n; i++)
				items[i].reps = reps + first[i];
			items[0].own_reps = reps;
			items[0].own_resp = call.resp;
			call.resp = NULL;
		} else {
			free(reps);
		}
		free(first);
	}
	if (rc)
		for (i = 0; i < n; i++) {
			items[i].code = rc;
			items[i].nrep = 0;
		}
	mc_rpc_call_fini(&call);
	return rc;
}

void mc_store_query_release(struct mc_query_item *items, uint32_t n)
{
	if (n == 0)
		return;
	free(items[0].own_reps);
	free(items[0].own_resp);
	items[0].own_reps = items[0].own_resp = NULL;
}

int mc_store_replica_clear(struct mc_store *st, const char **keys, uint32_t n,
			   const char *segment_name, uint8_t *cleared)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	uint32_t i, j, m;
	int rc;

	memset(cleared, 0, n);
	mc_rpc_call_init(&call, MC_OP_BATCH_REPLICA_CLEAR);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_wbuf_cstr(&call.req, segment_name ? segment_name : "");
	mc_put_keys(&call.req, keys, n);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc == 0) {
		mc_rbuf_init(&r, call.resp, call.resp_len);
		m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 4);
		for (j = 0; j < m && !r.err; j++) {
			struct mc_strv k = mc_rpc_get_strv(&r, MC_RPC_MAX_KEY);

			for (i = 0; i < n; i++)
				if (!cleared[i] && mc_strv_eq(k, mc_strv_c(keys[i]))) {
					cleared[i] = 1;
					break;
				}
		}
		rc = r.err ? MC_ERR_RPC_FAIL : (int)m;
	}
	mc_rpc_call_fini(&call);
	return rc;
}
