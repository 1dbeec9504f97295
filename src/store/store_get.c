/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Get, behind the C API's get forms: GetReplicaList for every key of a batch in one call, then
 * rounds of reads, each round reading every pending key from its next replica with all reads in
 * flight at once (memory replicas first, then SSD and shared-directory copies, replicas on
 * endpoints that failed lately last), a key whose read failed falling back to its next replica
 * in the next round.  A read that lands after the key's lease ended is not trusted.  With
 * MOONCAKE_STORE_CHECKSUM each whole-object read is verified against the object's CRC-64 as it
 * completes; a corrupt replica is reported and the next one read.  A ranged read of an object
 * with a checksum reads the whole object once into a scratch buffer, verifies it and copies the
 * ranges out: a CRC covers the whole object, and keeping per-chunk checksums beside every object
 * would cost the master memory for every object to spare bytes only for the rare read of a
 * small piece of a large one.  A second GetReplicaList is asked for keys whose lease ran out or
 * none of whose replicas could be read.
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

/* Replicas of one key from a GetReplicaList answer, and the order to try them in. */
struct mc_get_state {
	struct mc_rpc_replica reps[MC_RPC_MAX_REPLICAS];
	uint32_t nrep;
	uint8_t order[MC_RPC_MAX_REPLICAS];
	uint32_t norder;
	uint32_t tried;
	int code;
	int pending;		/* all its reads of this round were submitted */
	int expired;		/* read (or still unread) past its lease: needs a new one */
	int again;		/* every replica failed: ask once more (see mc_store_get_many) */
	int64_t want;		/* result when the reads succeed */
	int has_crc;		/* the master knows the object's CRC-64: crc */
	uint64_t crc;
	int corrupt;		/* a replica read failed its checksum (kept across passes) */
	uint8_t cur;		/* the replica read this round */
	uint8_t *scratch;	/* a ranged read of a checksummed object: the whole object, read
				 * here and verified before its ranges are copied out */
};

/* Readable replicas in the order to try: memory, then disk (SSD and shared directory), each in
 * the master's order; replicas on a data endpoint that failed lately come last. */
static void mc_get_order(struct mc_store *st, struct mc_get_state *g)
{
	uint32_t pass, j;

	g->norder = 0;
	for (pass = 0; pass < 4; pass++)
		for (j = 0; j < g->nrep; j++) {
			const struct mc_rpc_replica *rep = &g->reps[j];
			int mem = rep->type == MC_REPLICA_MEMORY;
			int suspect;

			if (!mem && rep->type != MC_REPLICA_LOCAL_DISK && rep->type != MC_REPLICA_DISK)
				continue;
			if ((pass & 1) != !mem)
				continue;
			suspect = rep->type != MC_REPLICA_DISK && mc_store_suspect(st, rep->endpoint);
			if ((pass >= 2) != suspect)
				continue;
			g->order[g->norder++] = (uint8_t)j;
		}
}

/* A second look: leave out replicas whose owner failed lately (the first pass just tried
 * them), so what the master lists besides them is tried without waiting on them again. */
static void mc_get_drop_suspects(struct mc_store *st, struct mc_get_state *g)
{
	uint32_t j, k = 0;

	for (j = 0; j < g->norder; j++) {
		const struct mc_rpc_replica *rep = &g->reps[g->order[j]];

		if (rep->type == MC_REPLICA_DISK || !mc_store_suspect(st, rep->endpoint))
			g->order[k++] = g->order[j];
	}
	g->norder = k;
}

/* GetReplicaList for the keys items[idx[0..m)]: fills their states and sets a provisional
 * result (MC_ERR_TRANSFER_FAIL until a read succeeds, or the key's error).  *lease_end is when
 * the leases granted end (monotonic ms).  call holds the answer the states point into. */
static int mc_get_fetch(struct mc_store *st, struct mc_rpc_call *call, struct mc_get_item *items,
			struct mc_get_state *gs, const uint32_t *idx, uint32_t m, int64_t *lease_end)
{
	struct mc_rbuf r;
	int64_t start = mc_store_now_ms(), lease_ttl;
	struct mc_rpc_checksum *sums;
	uint32_t k, j, cnt;
	int rc, corrupt;

	mc_rpc_call_init(call, m > 1 ? MC_OP_BATCH_GET_REPLICA_LIST : MC_OP_GET_REPLICA_LIST);
	mc_wbuf_u32(&call->req, m);
	for (k = 0; k < m; k++)
		mc_wbuf_cstr(&call->req, items[idx[k]].key);
	rc = mc_store_call(st, call);
	if (rc == 0)
		rc = call->status;
	if (rc)
		return rc;
	mc_rbuf_init(&r, call->resp, call->resp_len);
	lease_ttl = (int64_t)mc_rbuf_u64(&r);
	/* Bytes that arrive after the lease ended may have been overwritten meanwhile. */
	*lease_end = lease_ttl > 0 ? start + lease_ttl : INT64_MAX;
	cnt = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 8);
	if (cnt != m)
		return MC_ERR_RPC_FAIL;
	for (k = 0; k < m; k++) {
		struct mc_get_state *g = &gs[idx[k]];
		struct mc_get_item *it = &items[idx[k]];

		corrupt = g->corrupt;
		free(g->scratch);
		memset(g, 0, sizeof(*g));
		g->corrupt = corrupt;
		g->code = mc_rbuf_i32(&r);
		g->nrep = mc_rbuf_count(&r, MC_RPC_MAX_REPLICAS, 18);
		for (j = 0; j < g->nrep; j++)
			mc_rpc_get_replica(&r, &g->reps[j]);
		if (r.err)
			return MC_ERR_RPC_FAIL;
		it->result = g->code;
		if (g->code == 0 && g->nrep == 0)
			it->result = MC_ERR_REPLICA_IS_NOT_READY;
		if (it->result != 0)
			continue;
		if (it->ranges) {
			for (j = 0; j < it->nranges; j++) {
				const struct mc_get_range *rg = &it->ranges[j];

				if (rg->src_off + rg->len > g->reps[0].size ||
				    rg->src_off + rg->len < rg->len)
					it->result = MC_ERR_INVALID_PARAMS;
				g->want += (int64_t)rg->len;
			}
		} else if (g->reps[0].size > it->cap) {
			it->result = MC_ERR_INVALID_PARAMS;
		} else {
			g->want = (int64_t)g->reps[0].size;
		}
		if (it->result == 0)
			it->result = MC_ERR_TRANSFER_FAIL;	/* until a read succeeds */
		mc_get_order(st, g);
	}
	/* The objects' checksums, from a master that keeps them. */
	sums = calloc(m, sizeof(*sums));
	if (sums == NULL)
		return -ENOMEM;
	if (mc_rpc_get_checksums(&r, sums, m) > 0)
		for (k = 0; k < m; k++) {
			gs[idx[k]].has_crc = sums[k].present;
			gs[idx[k]].crc = sums[k].value;
		}
	free(sums);
	return r.err ? MC_ERR_RPC_FAIL : 0;
}

struct mc_get_verify {
	struct mc_store *st;
	struct mc_get_item *items;
	struct mc_get_state *gs;
	struct mc_xfer_list *xl;
	struct mc_rpc_corrupt_replica bad[MC_RPC_MAX_REPLICAS];	/* to report */
	uint32_t nbad;
};

/* Read j of this round is verified: a read of a whole object whose checksum the master
 * knows (into GPU memory too, when checksums were asked for explicitly: the engine checksums
 * it on its staging chunks). */
static int mc_get_verifiable(const struct mc_get_verify *v, size_t j)
{
	const struct mc_xfer_req *x = &v->xl->xr[j];
	uint32_t i = v->xl->item[j];
	const struct mc_get_state *g = &v->gs[i];

	return g->has_crc && x->len == g->reps[g->cur].size &&
	       (v->st->checksum_device || !mc_store_on_device(v->st, x->local));
}

/* A read of a whole object with a known checksum completed: check its bytes while they are
 * still in cache.  A mismatch fails this read (the next replica is tried) and is logged. */
static void mc_get_on_read(void *arg, size_t j, int status, const uint64_t *copied_crc)
{
	struct mc_get_verify *v = arg;
	struct mc_xfer_req *x = &v->xl->xr[j];
	uint32_t i = v->xl->item[j];
	struct mc_get_item *it = &v->items[i];
	struct mc_get_state *g = &v->gs[i];
	uint64_t crc, crc_flip = 0;
	int dev;

	if (status || !mc_get_verifiable(v, j))
		return;
	dev = mc_store_on_device(v->st, x->local);
	if (dev && copied_crc == NULL) {
		mc_log_warn("key %s: read into GPU memory came without its checksum: not verified",
			    it->key);
		return;
	}
	if (x->len && mc_fault(MC_FAULT_READ_FLIP) == MC_FAULT_FLIP) {
		/* Test hook: corrupted in flight (the value the engine computed on the way). */
		if (dev)
			crc_flip = 1;
		else
			((uint8_t *)x->local)[0] ^= 0xff;
		copied_crc = dev ? copied_crc : NULL;
	}
	/* The engine computed it in the copy (same host, GPU staging), else it is computed here,
	 * while the bytes are still in cache. */
	crc = copied_crc ? *copied_crc : mc_crc64(0, x->local, x->len);
	crc ^= crc_flip;
	if (crc == g->crc)
		return;
	x->status = MC_ERR_CHECKSUM_MISMATCH;
	g->corrupt = 1;
	if (v->nbad < MC_RPC_MAX_REPLICAS) {
		v->bad[v->nbad].key = mc_strv_c(it->key);
		v->bad[v->nbad].replica_id = g->reps[g->cur].id;
		v->bad[v->nbad].expected = g->crc;
		v->bad[v->nbad++].computed = crc;
	}
	mc_store_count_mismatch(v->st);
	mc_log_err("checksum mismatch: key %s, replica in segment %s (%s): expected %016llx, "
		   "read %016llx",
		   it->key, x->segment[0] ? x->segment : "SSD", x->host,
		   (unsigned long long)g->crc, (unsigned long long)crc);
}

/* Reads of at least this many bytes are verified as each completes, while its bytes are still
 * in cache; a batch of smaller ones is verified once all have landed, which spares the waiting
 * thread a wake-up per read. */
#define MC_GET_VERIFY_EACH (64u << 10)

/* This round's reads, verified when checksums are on. */
static void mc_get_transfer(struct mc_store *st, struct mc_get_item *items, struct mc_get_state *gs,
			    struct mc_xfer_list *xl)
{
	struct mc_get_verify v = { .st = st, .items = items, .gs = gs, .xl = xl };
	struct mc_store_xfer *x;
	struct mc_rpc_call *call;
	uint8_t *want = st->checksum ? calloc(xl->n ? xl->n : 1, 1) : NULL;
	uint32_t j;
	int each = 0;

	for (j = 0; want && j < xl->n; j++) {
		want[j] = (uint8_t)mc_get_verifiable(&v, j);
		each |= want[j] && xl->xr[j].len >= MC_GET_VERIFY_EACH;
	}
	x = mc_store_transfer_start(st, xl->xr, xl->n, each, want);
	if (x)
		mc_store_transfer_finish(x, st->checksum ? mc_get_on_read : NULL, &v);
	free(want);
	/* The master drops the corrupt replicas (fire and forget). */
	if (v.nbad == 0 || (call = mc_rpc_call_new(MC_OP_REPORT_CHECKSUM_MISMATCH)) == NULL)
		return;
	mc_rpc_put_uuid(&call->req, &st->client_id);
	mc_wbuf_u32(&call->req, v.nbad);
	for (j = 0; j < v.nbad; j++)
		mc_rpc_put_corrupt_replica(&call->req, &v.bad[j]);
	mc_store_call_async(st, call);
}

/* Whether key i's read this round goes through a scratch buffer: ranges of an object whose
 * checksum is known, with checksums on. */
static int mc_get_needs_scratch(const struct mc_store *st, const struct mc_get_item *it,
				const struct mc_get_state *g)
{
	return st->checksum && g->has_crc && it->ranges && it->nranges > 0;
}

/* The ranges of a verified whole object read into g->scratch go to their destinations (GPU
 * memory through the engine's device copy).  0 or a negative code. */
static int mc_get_copy_ranges(struct mc_store *st, const struct mc_get_item *it,
			      const struct mc_get_state *g)
{
	uint32_t q;

	for (q = 0; q < it->nranges; q++) {
		const struct mc_get_range *rg = &it->ranges[q];

		if (rg->len == 0)
			continue;
		if (mc_store_on_device(st, rg->dst)) {
			int rc = mc_te_gpu_local_copy(st->engine, rg->dst, g->scratch + rg->src_off,
						      rg->len);

			if (rc)
				return rc;
		} else {
			memcpy(rg->dst, g->scratch + rg->src_off, rg->len);
		}
	}
	return 0;
}

/* Read the keys items[idx[0..m)] fetched by mc_get_fetch.  Each round reads every pending key
 * from its next replica (a local one is copied at once); a key whose read failed falls back to
 * its next replica in the following round.  Each transfer is bounded by the data client's
 * connect and progress timeouts.  A key whose read would end past lease_end is marked
 * expired instead. */
static int mc_get_read(struct mc_store *st, struct mc_get_item *items, struct mc_get_state *gs,
		       const uint32_t *idx, uint32_t m, int64_t lease_end, struct mc_xfer_list *xl)
{
	uint32_t round, k, j, attempted;
	int rc;

	for (round = 0; round <= MC_RPC_MAX_REPLICAS; round++) {
		int64_t now = mc_store_now_ms();

		xl->n = 0;
		attempted = 0;
		for (k = 0; k < m; k++) {
			uint32_t i = idx[k];
			struct mc_get_state *g = &gs[i];
			struct mc_rpc_replica *rep;
			struct mc_get_range whole = { items[i].buf, 0, 0 };
			const struct mc_get_range *rg;
			uint32_t nrg, q;
			char host[256];
			uint16_t port;

			if (items[i].result != MC_ERR_TRANSFER_FAIL || g->code != 0 || g->expired ||
			    g->tried >= g->norder)
				continue;
			if (now >= lease_end) {
				g->expired = 1;
				continue;
			}
			g->cur = g->order[g->tried];
			rep = &g->reps[g->order[g->tried++]];
			attempted++;
			whole.len = rep->size;
			rg = items[i].ranges ? items[i].ranges : &whole;
			nrg = items[i].ranges ? items[i].nranges : 1;
			if (rep->type == MC_REPLICA_DISK) {
				/* --root_fs_dir: the shared file (a failure tries the next replica
				 * in the next round), checked against the object's checksum too
				 * when it has one (ranges through the scratch buffer). */
				const uint64_t *crc = NULL;

				if (st->checksum && g->has_crc &&
				    (items[i].ranges || !mc_store_on_device(st, items[i].buf))) {
					if (items[i].ranges) {
						if (g->scratch == NULL &&
						    (g->scratch = malloc(rep->size ? rep->size : 1)) == NULL) {
							items[i].result = -ENOMEM;
							continue;
						}
						whole.dst = g->scratch;
						rg = &whole;
						nrg = 1;
					}
					crc = &g->crc;
				}
				rc = mc_store_fs_read(st, mc_strv_c(items[i].key), rep->path, rep->size,
						      rg, nrg, crc);
				if (rc == MC_ERR_CHECKSUM_MISMATCH)
					g->corrupt = 1;
				if (rc == 0 && mc_store_now_ms() > lease_end)
					g->expired = 1;
				else if (rc == 0 && crc && items[i].ranges &&
					 (rc = mc_get_copy_ranges(st, &items[i], g)) != 0)
					items[i].result = rc;
				else if (rc == 0)
					items[i].result = g->want;
				continue;
			}
			/* An SSD replica (LOCAL_DISK) is read from its owner's data server, which
			 * serves its SSD objects at these addresses. */
			if (mc_endpoint_parse(rep->endpoint, host, sizeof(host), &port))
				continue;
			if (mc_get_needs_scratch(st, &items[i], g)) {
				if (g->scratch == NULL &&
				    (g->scratch = malloc(rep->size ? rep->size : 1)) == NULL) {
					items[i].result = -ENOMEM;
					continue;
				}
				whole.dst = g->scratch;
				rg = &whole;
				nrg = 1;
			}
			for (q = 0; q < nrg; q++) {
				if (rg[q].len == 0)
					continue;
				if (mc_xfer_list_add(xl, host, port, rep->segment_name, MC_XFER_READ,
						     rg[q].dst, rep->addr + rg[q].src_off, rg[q].len, i))
					return -ENOMEM;
			}
			g->pending = 1;
		}
		if (attempted == 0)
			break;
		mc_get_transfer(st, items, gs, xl);
		mc_store_note_transfers(st, xl->xr, xl->n);
		for (j = 0; j < xl->n; j++)
			if (xl->xr[j].status)
				gs[xl->item[j]].pending = 0;
		now = mc_store_now_ms();
		for (k = 0; k < m; k++) {
			struct mc_get_state *g = &gs[idx[k]];

			if (!g->pending)
				continue;
			g->pending = 0;
			if (now > lease_end)
				g->expired = 1;
			else if (g->scratch && (rc = mc_get_copy_ranges(st, &items[idx[k]], g)) != 0)
				items[idx[k]].result = rc;
			else
				items[idx[k]].result = g->want;
		}
	}
	return 0;
}

int mc_store_get_many_raw(struct mc_store *st, struct mc_get_item *items, uint32_t n)
{
	struct mc_rpc_call calls[2];
	struct mc_get_state *gs = NULL;
	struct mc_xfer_list xl = { 0 };
	uint32_t *idx = NULL, i, m, pass, ncalls = 0;
	int64_t lease_end = 0;
	int rc = 0;

	if (n == 0)
		return 0;
	gs = calloc(n, sizeof(*gs));
	idx = calloc(n, sizeof(*idx));
	if (!gs || !idx) {
		rc = -ENOMEM;
		goto out;
	}
	/* A second pass, with new leases, for keys whose lease ran out while a replica did not
	 * answer (another replica may still be read in time), and for keys none of whose replicas
	 * could be read: the master heard which segments failed before this second question, and
	 * then lists other copies (an SSD or shared-directory one) that it keeps back while a
	 * memory replica looks healthy. */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0, m = 0; i < n; i++)
			if (pass == 0 || gs[i].expired || gs[i].again)
				idx[m++] = i;
		if (m == 0)
			break;
		rc = mc_get_fetch(st, &calls[ncalls++], items, gs, idx, m, &lease_end);
		if (rc == 0 && pass == 1)
			for (i = 0; i < m; i++)
				mc_get_drop_suspects(st, &gs[idx[i]]);
		if (rc == 0)
			rc = mc_get_read(st, items, gs, idx, m, lease_end, &xl);
		if (rc == 0 && pass == 0)
			for (i = 0; i < m; i++)
				gs[idx[i]].again = items[idx[i]].result == MC_ERR_TRANSFER_FAIL &&
						   gs[idx[i]].code == 0 && !gs[idx[i]].expired &&
						   gs[idx[i]].norder > 0;
		if (rc) {
			for (i = 0; i < m; i++) {
				items[idx[i]].result = rc;
				gs[idx[i]].expired = 0;
			}
			rc = 0;
			break;
		}
	}
	for (i = 0; i < n; i++) {
		if (gs[i].expired)
			items[i].result = MC_ERR_LEASE_EXPIRED;
		/* No replica verified and one at least was corrupt (the master, told so, may
		 * have removed the object before the second look). */
		else if ((items[i].result == MC_ERR_TRANSFER_FAIL ||
			  items[i].result == MC_ERR_OBJECT_NOT_FOUND) && gs[i].corrupt)
			items[i].result = MC_ERR_CHECKSUM_MISMATCH;
	}
out:
	if (rc)
		for (i = 0; i < n; i++)
			items[i].result = rc;
	for (i = 0; gs && i < n; i++)
		free(gs[i].scratch);
	free(gs);
	free(idx);
	mc_xfer_list_free(&xl);
	for (i = 0; i < ncalls; i++)
		mc_rpc_call_fini(&calls[i]);
	return 0;
}

/* ---------------------------------------------------------------- ranged-read snapshots */

/* The replica lists of a fixed set of keys, kept for repeated ranged reads (upstream's
 * RangedReadSnapshot): reads skip GetReplicaList while its leases last, and the lists are asked
 * for again once half the lease has passed, or after a read found none of a key's replicas
 * readable.  Calls on one snapshot are serialized by its mutex (the replica lists point into
 * the answer it holds). */
struct mc_get_snapshot {
	pthread_mutex_t mu;
	struct mc_store *st;
	uint32_t n;
	char **keys;			/* sorted copies */
	struct mc_get_state *gs;	/* per key, from the last answer */
	struct mc_rpc_call call;	/* that answer */
	int have_call;
	int64_t fetched_ms, lease_end;
	int stale;
};

static int mc_snapshot_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Ask the master for the replica lists of every key again. */
static int mc_snapshot_fetch(struct mc_get_snapshot *s)
{
	struct mc_get_item *items = calloc(s->n ? s->n : 1, sizeof(*items));
	uint32_t *idx = calloc(s->n ? s->n : 1, sizeof(*idx));
	struct mc_rpc_call call;
	int64_t start = mc_store_now_ms(), lease_end = 0;
	uint32_t i;
	int rc = -ENOMEM;

	if (items == NULL || idx == NULL)
		goto out;
	for (i = 0; i < s->n; i++) {
		items[i].key = s->keys[i];
		items[i].cap = UINT64_MAX;
		idx[i] = i;
	}
	rc = mc_get_fetch(s->st, &call, items, s->gs, idx, s->n, &lease_end);
	if (rc) {
		mc_rpc_call_fini(&call);
		goto out;
	}
	if (s->have_call)
		mc_rpc_call_fini(&s->call);
	s->call = call;
	s->have_call = 1;
	s->fetched_ms = start;
	s->lease_end = lease_end;
	s->stale = 0;
out:
	free(items);
	free(idx);
	return rc;
}

struct mc_get_snapshot *mc_store_snapshot_new(struct mc_store *st, const char **keys, uint32_t n,
					      int *rc)
{
	struct mc_get_snapshot *s = calloc(1, sizeof(*s));
	uint32_t i, k = 0;

	*rc = -ENOMEM;
	if (s == NULL)
		return NULL;
	pthread_mutex_init(&s->mu, NULL);
	s->st = st;
	s->keys = calloc(n ? n : 1, sizeof(*s->keys));
	s->gs = calloc(n ? n : 1, sizeof(*s->gs));
	if (s->keys == NULL || s->gs == NULL)
		goto fail;
	for (i = 0; i < n; i++)
		if ((s->keys[i] = strdup(keys[i])) == NULL)
			goto fail;
	qsort(s->keys, n, sizeof(*s->keys), mc_snapshot_cmp);
	for (i = 0; i < n; i++)		/* a key listed twice is kept once */
		if (k == 0 || strcmp(s->keys[k - 1], s->keys[i]))
			s->keys[k++] = s->keys[i];
		else
			free(s->keys[i]);
	for (i = k; i < n; i++)
		s->keys[i] = NULL;
	s->n = k;
	*rc = k ? mc_snapshot_fetch(s) : 0;
	if (*rc == 0)
		return s;
fail:
	s->n = s->keys ? n : 0;
	mc_store_snapshot_free(s);
	return NULL;
}

void mc_store_snapshot_free(struct mc_get_snapshot *s)
{
	uint32_t i;

	if (s == NULL)
		return;
	for (i = 0; s->keys && i < s->n; i++)
		free(s->keys[i]);
	free(s->keys);
	free(s->gs);
	if (s->have_call)
		mc_rpc_call_fini(&s->call);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

struct mc_store *mc_store_snapshot_store(const struct mc_get_snapshot *s)
{
	return s->st;
}

int mc_store_get_from_snapshot(struct mc_get_snapshot *s, struct mc_get_item *items, uint32_t n)
{
	struct mc_get_state *gs = calloc(n ? n : 1, sizeof(*gs));
	uint32_t *idx = calloc(n ? n : 1, sizeof(*idx));
	struct mc_xfer_list xl = { 0 };
	uint32_t i, j, m = 0;
	int rc = 0;

	if (gs == NULL || idx == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&s->mu);
	/* Past the lease's midpoint (or after a failed read) the lists are renewed, so that
	 * every read submitted below lands within a lease. */
	if (s->n && (s->stale || mc_store_now_ms() >= s->fetched_ms +
							      (s->lease_end - s->fetched_ms) / 2))
		rc = mc_snapshot_fetch(s);
	for (i = 0; i < n; i++) {
		const char *key = items[i].key;
		char **at = s->n ? bsearch(&key, s->keys, s->n, sizeof(*s->keys),
					   mc_snapshot_cmp) : NULL;
		const struct mc_get_state *g0;

		if (rc) {
			items[i].result = rc;
			continue;
		}
		if (at == NULL || items[i].ranges == NULL) {
			items[i].result = MC_ERR_INVALID_PARAMS;	/* not in the snapshot */
			continue;
		}
		g0 = &s->gs[at - s->keys];
		gs[i] = *g0;
		gs[i].tried = gs[i].pending = gs[i].expired = gs[i].again = gs[i].corrupt = 0;
		gs[i].want = 0;
		items[i].result = g0->code ? g0->code
				  : g0->nrep == 0 ? MC_ERR_REPLICA_IS_NOT_READY
						  : MC_ERR_TRANSFER_FAIL;
		for (j = 0; g0->code == 0 && g0->nrep && j < items[i].nranges; j++) {
			const struct mc_get_range *rg = &items[i].ranges[j];

			if (rg->src_off + rg->len > g0->reps[0].size ||
			    rg->src_off + rg->len < rg->len)
				items[i].result = MC_ERR_INVALID_PARAMS;
			gs[i].want += (int64_t)rg->len;
		}
		if (items[i].result == MC_ERR_TRANSFER_FAIL)
			idx[m++] = i;
	}
	if (rc == 0 && m)
		rc = mc_get_read(s->st, items, gs, idx, m, s->lease_end, &xl);
	for (i = 0; i < m; i++) {
		if (gs[idx[i]].expired)
			items[idx[i]].result = MC_ERR_LEASE_EXPIRED;
		if (rc)
			items[idx[i]].result = rc;
		if (items[idx[i]].result < 0)
			s->stale = 1;
	}
	pthread_mutex_unlock(&s->mu);
out:
	if (rc == -ENOMEM)
		for (i = 0; i < n; i++)
			items[i].result = rc;
	free(gs);
	free(idx);
	mc_xfer_list_free(&xl);
	return 0;
}
