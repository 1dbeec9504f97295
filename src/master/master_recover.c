/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's recovery at start-up: open --persist_path (master_persist.c, which records the
 * changes from then on) and rebuild the tables from it.
 *
 * Segments come back with their allocators, their owners as clients not yet in good standing
 * (with --remount_grace_period_sec to re-mount with the same segment identities), dormant
 * segments as dormant for the rest of their time (their owners Offline), and every object's
 * buffers are re-reserved exactly, in ascending offset order per segment so the rebuild is
 * linear.  Objects that were still being written are not restored: their buffers go to the
 * discard list until put_start_release_timeout_sec after they started, since their writer may
 * still be writing.
 * Single-threaded: the master's reactor thread, before it serves.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <event2/event.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "master/master_load.h"
#include "master/tenants.h"
#include "persist/persist.h"
#include "segment/alloc.h"

void mc_load_stale(struct mc_load *L, const char *key, size_t len, uint64_t row)
{
	if (L->nstale == L->capstale) {
		L->capstale = L->capstale ? L->capstale * 2 : 64;
		L->stale = mc_xrealloc(L->stale, L->capstale * sizeof(*L->stale));
		L->stale_len = mc_xrealloc(L->stale_len, L->capstale * sizeof(*L->stale_len));
		L->stale_gen = mc_xrealloc(L->stale_gen, L->capstale * sizeof(*L->stale_gen));
	}
	L->stale[L->nstale] = mc_xstrndup(key, len);
	L->stale_gen[L->nstale] = row;
	L->stale_len[L->nstale++] = len;
}

static int mc_load_on_segment(void *arg, const struct mc_persist_segment *ps)
{
	struct mc_load *L = arg;
	struct mc_master *m = L->m;
	struct mc_rpc_segment s;
	struct mc_client *c;
	struct mc_uuid cid;

	memcpy(s.id.b, ps->id, 16);
	memcpy(cid.b, ps->client_id, 16);
	s.name = mc_strv_c(ps->name);
	s.base = ps->base;
	s.size = ps->size;
	s.endpoint = mc_strv_c(ps->endpoint);
	s.protocol = mc_strv_c(ps->protocol);
	c = mc_client_get(m, &cid);
	c->ok = 0;		/* must re-mount */
	if (ps->kind == 0 && ps->dormant_until_ms != 0) {
		struct mc_segment *seg;

		/* It was dormant: it stays so for the rest of its time (a past end drops it at
		 * the first tick), and its client is Offline unless another segment says more. */
		if (mc_segment_mount(m, c, &s, ps->token) != 0 ||
		    (seg = mc_segment_lookup(m, &s.id)) == NULL) {
			mc_log_warn("persisted dormant segment %s could not be restored", ps->name);
			return 0;
		}
		mc_segment_make_dormant(m, seg,
					L->now + (ps->dormant_until_ms > L->wall
							  ? ps->dormant_until_ms - L->wall : 0), 1);
		L->dormant++;
		if (c->state == MC_CLIENT_UNTRACKED) {
			c->state = MC_CLIENT_OFFLINE;
			c->state_since = L->now;
		}
		return 0;
	}
	/* Declared Offline remount_grace_period_sec from now unless it re-mounts (pings) first. */
	c->state = MC_CLIENT_ACTIVE;
	c->state_since = L->now;
	c->last_ping = L->now + (m->cfg.remount_grace_period_sec - m->cfg.client_ttl -
				 m->cfg.client_suspicion_ttl_sec) * 1000;
	if (ps->kind == 1) {
		int rc;

		if (mc_disk_mount(m, c, &s.id, s.name, s.endpoint, s.size, &rc) == NULL)
			mc_log_warn("persisted SSD area of %s could not be restored", ps->name);
		return 0;
	}
	if (mc_segment_mount(m, c, &s, ps->token) != 0)
		mc_log_warn("persisted segment %s could not be restored", ps->name);
	return 0;
}

/* Collect r's range [off, off + len) on seg (checked inside it), to re-reserve in order. */
static void mc_load_range_add(struct mc_load *L, struct mc_segment *seg, uint64_t off,
			      uint64_t len, struct mc_replica *r)
{
	if (L->ranges.pf == NULL)	/* the table's prefaulter, once it has one */
		L->ranges.pf = L->m->objects.arena->pf;
	mc_lranges_add(&L->ranges, &seg->lranges, seg, seg->size, off, mc_alloc_round(len), r);
}

static void mc_load_discard_add(struct mc_load *L, struct mc_segment *seg, uint64_t off,
				uint64_t len, int64_t release_at, int64_t seq)
{
	if (L->ndiscards == L->capdiscards) {
		L->capdiscards = L->capdiscards ? L->capdiscards * 2 : 64;
		L->discards = mc_xrealloc(L->discards, L->capdiscards * sizeof(*L->discards));
	}
	L->discards[L->ndiscards++] = (struct mc_load_discard){ seg, off, len, release_at, seq };
}

/* Drop replica r (seg and off set) whose range cannot be re-reserved (logged, why: what is
 * wrong with it); its object is listed for mc_load_fix_lost. */
static void mc_load_lose(struct mc_load *L, struct mc_replica *r, const char *why);

static struct mc_load_seen *mc_load_seen_slot(struct mc_load *L, const char *key, size_t len)
{
	size_t i = mc_object_hash(key, len) & (L->capseen - 1);

	while (L->seen[i].key && (L->seen[i].len != len || memcmp(L->seen[i].key, key, len)))
		i = (i + 1) & (L->capseen - 1);
	return &L->seen[i];
}

/* Row po put nothing in: its key is met all the same. */
static void mc_load_seen_add(struct mc_load *L, const struct mc_persist_object *po)
{
	struct mc_load_seen *s;

	if ((L->nseen + 1) * 2 > L->capseen) {
		struct mc_load_seen *old = L->seen;
		size_t oldcap = L->capseen, j;

		L->capseen = oldcap ? oldcap * 2 : 64;
		L->seen = mc_xcalloc(L->capseen, sizeof(*L->seen));
		for (j = 0; j < oldcap; j++)
			if (old[j].key)
				*mc_load_seen_slot(L, old[j].key, old[j].len) = old[j];
		free(old);
	}
	s = mc_load_seen_slot(L, po->key, po->key_len);
	if (s->key)
		return;
	*s = (struct mc_load_seen){ mc_xmalloc(po->key_len ? po->key_len : 1), po->key_len,
				    po->gen, (po->flags & MC_PERSIST_ROWKEY) != 0 };
	memcpy(s->key, po->key, po->key_len);
	L->nseen++;
}

/* A row's key in the table: its tenant, the key there and its hash in that namespace; ok 0
 * when the row's key has no place in the table (not scoped as the tenants say, empty, too
 * long). */
struct mc_load_key {
	const char *key;
	size_t len;
	uint16_t tenant;
	uint32_t h;
	int ok;
};

static void mc_load_key_of(struct mc_master *m, const struct mc_persist_object *po,
			   struct mc_load_key *k)
{
	k->ok = po->key_len && !mc_tenant_unscope(m, po->key, po->key_len, po->flags, &k->tenant,
						  &k->key, &k->len) &&
		k->len > 0 && k->len <= MC_RPC_MAX_KEY;
	if (k->ok) {
		m->objects.tenant = k->tenant;
		k->h = mc_object_key_hash(&m->objects, k->key, k->len);
		m->objects.tenant = 0;
	}
}

/* Whether po's key (k, from mc_load_key_of) has been met (newest rows first): 0 no, 1 by this
 * very row, 2 by a newer. */
static int mc_load_met(struct mc_load *L, const struct mc_persist_object *po,
		       const struct mc_load_key *k)
{
	struct mc_master *m = L->m;
	int rowkey = (po->flags & MC_PERSIST_ROWKEY) != 0, grk;
	uint64_t gen;

	if (k->ok) {
		struct mc_object *o;

		m->objects.tenant = k->tenant;
		o = mc_object_find_h(&m->objects, k->key, k->len, k->h);
		m->objects.tenant = 0;
		if (o)
			return o->gen == po->gen && !(o->xflags & MC_OBJX_ROWKEY) == !rowkey ? 1 : 2;
	}
	if (po->key_len && mc_ghost_count(m) && mc_ghost_gen(m, po->key, po->key_len, &gen, &grk))
		return gen == po->gen && !grk == !rowkey ? 1 : 2;
	if (L->nseen) {
		struct mc_load_seen *s = mc_load_seen_slot(L, po->key, po->key_len);

		if (s->key)
			return s->gen == po->gen && !s->rowkey == !rowkey ? 1 : 2;
	}
	return 0;
}

int mc_load_row(struct mc_load *L, const struct mc_persist_object *po, int newer_first)
{
	struct mc_master *m = L->m;
	struct mc_segment *segs[MC_RPC_MAX_REPLICAS];
	struct mc_object *o;
	uint32_t i, n = 0, processing = 0, memory = 0;
	struct mc_load_key k;
	int put = 0, keyed = 0;

	if (newer_first) {
		/* The key once for the check and the insert (the row's hot path). */
		mc_load_key_of(m, po, &k);
		keyed = 1;
		switch (mc_load_met(L, po, &k)) {
		case 1:		/* answered early, met again in its part */
			return 0;
		case 2:
			L->older++;
			mc_load_stale(L, po->key, po->key_len, po->row);
			return 0;
		}
	}
	if (po->flags & MC_OBJ_GHOST) {
		if (po->key_len == 0 || po->key_len > MC_RPC_MAX_KEY) {
			L->dropped++;
			mc_load_stale(L, po->key, po->key_len, po->row);
			goto out;
		}
		mc_ghost_load(m, po->key, po->key_len, po->gen,
			      (po->flags & MC_PERSIST_ROWKEY) != 0);
		L->ghosts++;
		put = 1;
		goto out;
	}
	for (i = 0; i < po->n_replicas && i < MC_RPC_MAX_REPLICAS; i++) {
		const struct mc_persist_replica *pr = &po->replicas[i];
		struct mc_uuid id;

		memcpy(id.b, pr->segment_id, 16);
		if (pr->type == MC_REPLICA_DISK) {
			segs[i] = pr->status == MC_REPLICA_COMPLETE ? m->fs_seg : NULL;
			n += segs[i] != NULL;
			continue;
		}
		if (pr->type == MC_REPLICA_LOCAL_DISK) {
			segs[i] = mc_disk_find(m, &id);
			if (segs[i] && pr->status == MC_REPLICA_COMPLETE && pr->offset != 0)
				n++;
			else
				segs[i] = NULL;
			continue;
		}
		segs[i] = mc_segment_lookup(m, &id);	/* mounted or dormant */
		if (segs[i] && pr->offset + pr->len <= segs[i]->size &&
		    pr->status == MC_REPLICA_COMPLETE)
			n++;
		if (pr->status == MC_REPLICA_PROCESSING)
			processing++;
	}
	if (processing && n > 0) {
		/* A promotion was filling a memory replica: park that range, keep the rest. */
		for (i = 0; i < po->n_replicas && i < MC_RPC_MAX_REPLICAS; i++)
			if (segs[i] && po->replicas[i].status == MC_REPLICA_PROCESSING) {
				mc_load_discard_add(L, segs[i], po->replicas[i].offset,
						    po->replicas[i].len,
						    L->now + m->cfg.put_start_release_timeout_sec * 1000,
						    MC_LOAD_SEQ_ROW);
				segs[i] = NULL;
			}
	} else if (processing) {
		/* A put in flight when the master died: keep its buffers out of use until its
		 * writer can no longer be writing, then free them.  The object is forgotten. */
		int64_t release = po->put_start_ms + m->cfg.put_start_release_timeout_sec * 1000;

		for (i = 0; i < po->n_replicas && i < MC_RPC_MAX_REPLICAS; i++)
			if (segs[i])
				mc_load_discard_add(L, segs[i], po->replicas[i].offset,
						    po->replicas[i].len, L->now + (release - L->wall),
						    MC_LOAD_SEQ_ROW);
		L->zombies++;
		mc_load_stale(L, po->key, po->key_len, po->row);
		goto out;
	}
	if (!keyed && n != 0 && po->size <= MC_OBJ_SIZE_MAX)
		mc_load_key_of(m, po, &k);
	else if (!keyed)
		k.ok = 0;
	if (n == 0 || po->size > MC_OBJ_SIZE_MAX || !k.ok) {
		L->dropped++;
		mc_load_stale(L, po->key, po->key_len, po->row);
		goto out;
	}
	m->objects.tenant = k.tenant;	/* a scoped key: its tenant's namespace */
	o = mc_object_insert_h(&m->objects, k.key, k.len, k.h, n);
	m->objects.tenant = 0;
	put = 1;
	o->size = po->size;
	o->gen = po->gen;
	if (po->flags & MC_PERSIST_ROWKEY)
		o->xflags |= MC_OBJX_ROWKEY;
	o->has_checksum = po->has_checksum ? 1 : 0;
	o->checksum = po->checksum;
	o->put_start = L->now - (L->wall - po->put_start_ms);
	if (po->flags & MC_OBJ_HARD_PIN) {
		o->flags |= MC_OBJ_HARD_PIN;
		mc_object_lru_unlink(&m->objects, o);
	}
	if (po->soft_pin_until_ms > L->wall) {
		o->flags |= MC_OBJ_SOFT_PIN;
		m->objects.soft_pinned++;
		mc_object_set_soft_pin_until(o, L->now + (po->soft_pin_until_ms - L->wall));
	}
	{
		struct mc_uuid wid;

		memcpy(wid.b, po->writer, 16);
		o->writer = mc_client_ref(mc_client_get(m, &wid));
	}
	n = 0;
	for (i = 0; i < po->n_replicas && i < MC_RPC_MAX_REPLICAS; i++) {
		struct mc_replica *r;

		if (segs[i] == NULL)
			continue;
		if (po->replicas[i].type == MC_REPLICA_DISK) {
			r = mc_object_replica(o, n++);
			r->id = po->replicas[i].id;
			mc_fs_attach(m, r, po->size);
			continue;
		}
		if (po->replicas[i].type == MC_REPLICA_LOCAL_DISK) {
			r = mc_object_replica(o, n++);
			r->id = po->replicas[i].id;
			mc_disk_replica_attach(m, segs[i], r, po->replicas[i].offset, po->size);
			continue;
		}
		if (po->replicas[i].offset + po->replicas[i].len > segs[i]->size ||
		    po->replicas[i].status != MC_REPLICA_COMPLETE)
			continue;
		r = mc_object_replica(o, n++);
		r->id = po->replicas[i].id;
		r->status = MC_REPLICA_COMPLETE;
		r->seg = segs[i];
		r->off = po->replicas[i].offset;
		/* A range of a length other than the object's size rounded up could not be
		 * released again. */
		if (mc_alloc_round(po->replicas[i].len) != mc_object_span(o)) {
			mc_load_lose(L, r, "does not match its object's size");
			continue;
		}
		if (r->off % MC_ALLOC_ALIGN != 0) {
			mc_load_lose(L, r, "is not aligned");
			continue;
		}
		/* Listed on its segment now, in the order the rows come (the object is at hand);
		 * its range is re-reserved at the end, in order, without reading it again. */
		r->pending = 1;
		mc_replica_push(&segs[i]->reps, r);
		segs[i]->nreps++;
		segs[i]->loading = 1;
		mc_load_range_add(L, segs[i], po->replicas[i].offset, po->replicas[i].len, r);
		memory++;
	}
	/* Only memory is evicted: an object on disk alone stays out of the eviction order. */
	if (memory == 0)
		mc_object_lru_unlink(&m->objects, o);
	L->objects++;
out:
	if (newer_first && !put)
		mc_load_seen_add(L, po);
	return 0;
}

static int mc_load_on_object(void *arg, const struct mc_persist_object *po)
{
	return mc_load_row(arg, po, 0);
}

/* A record of the put log: a fresh put that was in flight, or whose end (its objects row, or
 * its row's removal) came after the record.  Its memory ranges are kept out of use as an
 * unfinished put's; those that a finished object's row holds, or a later record overlaps, are
 * not its any more (mc_load_reserve_discards). */
static int mc_load_on_logged(void *arg, const struct mc_persist_object *po, int64_t seq)
{
	struct mc_load *L = arg;
	struct mc_master *m = L->m;
	int64_t release = po->put_start_ms + m->cfg.put_start_release_timeout_sec * 1000;
	uint32_t i;

	L->logged++;
	for (i = 0; i < po->n_replicas; i++) {
		const struct mc_persist_replica *pr = &po->replicas[i];
		struct mc_segment *seg;
		struct mc_uuid id;

		memcpy(id.b, pr->segment_id, 16);
		seg = mc_segment_lookup(m, &id);
		if (seg == NULL || seg->is_disk || pr->len == 0 || pr->offset > seg->size ||
		    pr->len > seg->size - pr->offset)
			continue;
		mc_load_discard_add(L, seg, pr->offset, pr->len, L->now + (release - L->wall),
				    seq);
	}
	return 0;
}

/* Per segment, ascending offsets. */
static int mc_load_discard_cmp(const void *a, const void *b)
{
	const struct mc_load_discard *x = a, *y = b;

	if (x->seg != y->seg)
		return x->seg < y->seg ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int mc_load_ptr_cmp(const void *a, const void *b)
{
	const void *x = *(const void *const *)a, *y = *(const void *const *)b;

	return x < y ? -1 : x > y;
}

static void mc_load_lose(struct mc_load *L, struct mc_replica *r, const char *why)
{
	mc_log_warn("persisted replica at offset %llu of %s %s: dropping it",
		    (unsigned long long)r->off, r->seg->name, why);
	if (r->pending) {	/* listed on its segment */
		mc_replica_pull(&r->seg->reps, r);
		r->seg->nreps--;
	}
	r->seg = NULL;
	r->pending = 0;
	r->status = MC_REPLICA_REMOVED;
	if (L->nlost == L->caplost) {
		L->caplost = L->caplost ? L->caplost * 2 : 16;
		L->lost = mc_xrealloc(L->lost, L->caplost * sizeof(*L->lost));
	}
	L->lost[L->nlost++] = mc_replica_obj(r);
}

/* Re-reserve pending replica r's range now, out of order: its object's span from its offset
 * (mc_load_row has dropped a row's range of another length).  Its range is taken out of those
 * reserved in order, whether it is reserved here or dropped. */
static void mc_load_reserve_replica(struct mc_load *L, struct mc_replica *r)
{
	struct mc_segment *seg = r->seg;
	uint64_t len = mc_object_span(mc_replica_obj(r));

	(void)mc_lranges_take_out(seg->lranges, r->off, r);
	if (mc_alloc_reserve_at(seg->alloc, r->off, len) != 0) {
		/* Overlapping or out-of-range rows: never hand a range out twice. */
		mc_load_lose(L, r, "overlaps another");
		return;
	}
	if (seg->status != MC_SEG_DORMANT)	/* dormant bytes are not counted */
		L->m->allocated += len;
	r->pending = 0;
}

static uint64_t mc_load_range_len(const struct mc_lrange *x)
{
	return x->units ? (uint64_t)x->units * MC_ALLOC_ALIGN : mc_object_span(mc_replica_obj(x->r));
}

/* Re-reserve a bucket's ranges (sorted, from base): adjacent ones in one call (the allocator
 * keeps no record of a reservation, so one of two neighbours is as good as two); a run that
 * cannot be reserved whole goes one range at a time, and a range that cannot be reserved
 * alone overlaps another or leaves its segment. */
static void mc_load_reserve_bucket(struct mc_load *L, struct mc_segment *seg, uint64_t base,
				   const struct mc_lrange *e, size_t m)
{
	size_t i = 0, j, k;

	while (i < m) {
		uint64_t off = base + (uint64_t)e[i].rel * MC_ALLOC_ALIGN, end, done = 0;

		if (e[i].r == NULL) {	/* taken out: reserved or dropped already, out of order */
			i++;
			continue;
		}
		end = off + mc_load_range_len(&e[i]);
		for (j = i + 1; j < m; j++) {
			uint64_t o = base + (uint64_t)e[j].rel * MC_ALLOC_ALIGN;

			if (o != end || e[j].r == NULL)
				break;
			end += mc_load_range_len(&e[j]);
		}
		if (end > off && mc_alloc_reserve_at(seg->alloc, off, end - off) == 0) {
			done = end - off;
		} else {
			for (k = i; k < j; k++) {
				uint64_t o = base + (uint64_t)e[k].rel * MC_ALLOC_ALIGN;
				uint64_t len = mc_load_range_len(&e[k]);

				if (mc_alloc_reserve_at(seg->alloc, o, len) == 0)
					done += len;
				else
					mc_load_lose(L, e[k].r, "overlaps another");
			}
		}
		if (seg->status != MC_SEG_DORMANT)	/* dormant bytes are not counted */
			L->m->allocated += done;
		i = j;
	}
}

int mc_load_reserve_some(struct mc_load *L, size_t max)
{
	size_t done = 0;

	/* Only the bucket's ranges and the allocators are read: not the replicas (in row order,
	 * a cache miss each) but those that lose their range. */
	while (done < max) {
		const struct mc_lrange *e;
		struct mc_segment *seg;
		uint64_t base;
		size_t m = mc_lranges_next(&L->ranges, &seg, &base, &e);

		if (m == 0)
			return 1;
		mc_load_reserve_bucket(L, seg, base, e, m);
		done += m;
	}
	return 0;
}

int mc_load_pending(struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		if (mc_replica_pending(mc_object_replica(o, i)))
			return 1;
	}
	return 0;
}

void mc_load_reserve_object(struct mc_load *L, struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (mc_replica_pending(r))
			mc_load_reserve_replica(L, r);
	}
}

void mc_load_ranges_done(struct mc_load *L)
{
	struct mc_master *m = L->m;
	uint32_t i;
	size_t k;

	for (i = 0; i < m->nsegs; i++)
		m->segs[i]->loading = 0;
	for (k = 0; k < L->ranges.nsegs; k++)	/* a segment outside the list (dormant) */
		mc_lranges_segment(&L->ranges, k)->loading = 0;
}

/* Re-reserve every persisted range exactly, per segment in ascending order (the allocator's
 * cheap order); then the quarantined ranges of puts in flight at the crash, which lose to a
 * finished object's replica if the rows overlap. */
static void mc_load_reserve(struct mc_load *L)
{
	(void)mc_load_reserve_some(L, SIZE_MAX);
	mc_load_ranges_done(L);
	mc_load_reserve_discards(L);
}

static int mc_load_seq_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

void mc_load_reserve_discards(struct mc_load *L)
{
	struct mc_master *m = L->m;
	int64_t *held = NULL;
	size_t i, nheld = 0, k = SIZE_MAX;

	if (L->ndiscards)
		qsort(L->discards, L->ndiscards, sizeof(*L->discards), mc_load_discard_cmp);
	/* Of overlapping ranges the later record's wins: the earlier put's range was freed and
	 * handed out again before the crash, so the earlier put had ended. */
	for (i = 0; i < L->ndiscards; i++) {
		struct mc_load_discard *x = &L->discards[i], *y;

		if (k == SIZE_MAX || (y = &L->discards[k])->seg != x->seg ||
		    x->off >= y->off + y->len) {
			k = i;
		} else if (x->seq > y->seq) {
			y->len = 0;
			k = i;
		} else {
			x->len = 0;
		}
	}
	for (i = 0; i < L->ndiscards; i++) {
		struct mc_load_discard *x = &L->discards[i];
		struct mc_discard *d;

		if (x->len == 0 || mc_alloc_reserve_at(x->seg->alloc, x->off, x->len) != 0)
			continue;
		if (x->seq != MC_LOAD_SEQ_ROW) {
			if (held == NULL)
				held = mc_xcalloc(L->ndiscards, sizeof(*held));
			held[nheld++] = x->seq;
		}
		if (x->seg->status != MC_SEG_DORMANT)
			m->allocated += mc_alloc_round(x->len);
		d = mc_xcalloc(1, sizeof(*d));
		d->seg = x->seg;
		d->off = x->off;
		d->len = mc_alloc_round(x->len);
		d->release_at = x->release_at;
		d->next = m->discards;
		m->discards = d;
	}
	/* The put log's records that still held a range count as unfinished puts. */
	if (nheld)
		qsort(held, nheld, sizeof(*held), mc_load_seq_cmp);
	for (k = 0; k < nheld; k++)
		L->zombies += k == 0 || held[k] != held[k - 1];
	free(held);
}

/* The objects that lost replicas to overlapping rows (each once): without any left they go,
 * else they keep the rest. */
void mc_load_fix_lost(struct mc_load *L)
{
	struct mc_master *m = L->m;
	size_t k;

	if (L->nlost)
		qsort(L->lost, L->nlost, sizeof(*L->lost), mc_load_ptr_cmp);
	for (k = 0; k < L->nlost; k++) {
		struct mc_object *o = L->lost[k];
		uint32_t i, live = 0;

		if (k > 0 && L->lost[k - 1] == o)
			continue;
		for (i = 0; i < o->nrep; i++)
			live += mc_object_replica(o, i)->seg != NULL;
		if (live == 0) {
			mc_persist_object_gone(m, o);
			mc_object_erase(&m->objects, o);
			continue;
		}
		mc_object_compact(o);
		if (!mc_object_has_memory(o))
			mc_object_lru_unlink(&m->objects, o);
	}
}

void mc_load_fini(struct mc_load *L)
{
	size_t pos;

	mc_lranges_fini(&L->ranges);
	free(L->discards);
	free(L->lost);
	for (pos = 0; pos < L->capseen; pos++)
		free(L->seen[pos].key);
	free(L->seen);
	for (pos = 0; pos < L->nstale; pos++)
		free(L->stale[pos]);
	free(L->stale);
	free(L->stale_len);
	free(L->stale_gen);
}

/* Rows that go once loaded (recorded now: the load is done) and the log line. */
void mc_load_done(struct mc_load *L, const char *how)
{
	struct mc_master *m = L->m;
	size_t pos;

	for (pos = 0; pos < L->nstale; pos++)
		mc_persist_del_object(m->persist, L->stale[pos], L->stale_len[pos],
				      L->stale_gen[pos]);
	/* The put log's ranges are held as discards now. */
	mc_persist_log_clear(m->persist);
	mc_log_notice("recovered %u segments (and %llu dormant), %llu objects and %llu SSD ghosts "
		      "from %s%s (%llu unfinished puts quarantined, %llu unusable rows dropped)",
		      m->nsegs, (unsigned long long)L->dormant, (unsigned long long)L->objects,
		      (unsigned long long)L->ghosts, m->cfg.persist_path, how,
		      (unsigned long long)L->zombies, (unsigned long long)L->dropped);
	mc_load_fini(L);
}

/* bg: starts the background load of the objects (0) or declines; NULL: load them here. */
static int mc_master_recover_with(struct mc_master *m,
				  int (*bg)(struct mc_master *m, const struct mc_load *L))
{
	struct mc_load L = { .m = m };
	struct mc_persist *p;
	int rc, background;

	/* A standby promoted by HA (ha.c) has had it open all along. */
	rc = m->persist ? 0 : mc_master_persist_open(m);
	if (rc || m->persist == NULL)
		return rc;
	L.now = mc_master_now(m);
	L.wall = mc_persist_wall_ms();
	/* A database that has issued generations knows every object since its epoch: nothing
	 * older is adopted.  A new one (or one from before generations) starts adopting. */
	if (mc_persist_get_meta(m->persist, "gen_epoch") > 0) {
		uint64_t next = (uint64_t)mc_persist_get_meta(m->persist, "next_gen");

		m->gen_epoch = (uint64_t)mc_persist_get_meta(m->persist, "gen_epoch");
		if (next > m->next_gen)
			m->next_gen = next;
		m->adopt_open = 0;
	} else {
		mc_persist_set_meta(m->persist, "gen_epoch", (int64_t)m->gen_epoch);
	}
	m->next_replica_id = (uint64_t)mc_persist_get_meta(m->persist, "next_replica_id");
	if (m->next_replica_id == 0)
		m->next_replica_id = 1;
	/* Loading records nothing: the database already holds it.  Segments first, here; the
	 * objects in the background (master_load.c) unless HA or tenants need the whole table at
	 * once, or the file cannot be read by a second connection (then here too). */
	p = m->persist;
	m->persist = NULL;
	rc = mc_persist_load(p, mc_load_on_segment, NULL, &L);
	if (rc == 0)		/* the put log is short: puts in flight at the crash */
		rc = mc_persist_load_log(p, mc_load_on_logged, &L);
	background = rc == 0 && bg && !m->ha && !m->cfg.enable_ha && !mc_tenants_enabled(m);
	if (background) {
		/* An empty log lets the loader read the table from the file's pages (emptied
		 * at open already, unless something was written since). */
		(void)mc_persist_truncate_log(p);
		background = bg(m, &L) == 0;
	}
	if (rc == 0 && !background)
		rc = mc_persist_load(p, NULL, mc_load_on_object, &L);
	m->persist = p;
	if (rc) {
		mc_load_fini(&L);
		return rc;
	}
	if (background) {	/* L is the loader's now */
		mc_master_persist_started(m, L.wall);
		return 0;
	}
	mc_load_reserve(&L);
	/* Objects whose every replica was dropped as overlapping go (recorded, so the rows go). */
	mc_load_fix_lost(&L);
	mc_load_done(&L, "");
	mc_master_persist_started(m, L.wall);
	return 0;
}

int mc_master_recover(struct mc_master *m)
{
	return mc_master_recover_with(m, NULL);
}

int mc_master_recover_bg(struct mc_master *m,
			 int (*bg)(struct mc_master *m, const struct mc_load *L))
{
	return mc_master_recover_with(m, bg);
}
