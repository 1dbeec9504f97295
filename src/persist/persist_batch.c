/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pending batch of the master's SQLite persistence (see persist.h): changes encoded as they
 * are recorded (persist_int.h gives the encoding), the meta values set since the last commit,
 * and the batch's hand-off to replication (mc_persist_take: coalesced, cut at whole changes).
 * Nothing here touches the file; persist_write.c writes the batch.  The master's reactor thread.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/wire.h"
#include "persist/persist.h"
#include "persist/persist_int.h"

static int mc_persist_queued(struct mc_persist *p)
{
	if (p->batch.err)
		return -ENOMEM;
	if (p->nends == p->capends) {
		size_t cap = p->capends ? p->capends * 2 : 256;
		size_t *n = realloc(p->ends, cap * sizeof(*n));

		if (n == NULL) {
			p->batch.err = -ENOMEM;
			return -ENOMEM;
		}
		p->ends = n;
		p->capends = cap;
	}
	p->ends[p->nends++] = p->batch.len;
	p->pending++;
	return 0;
}

void mc_persist_batch_str(struct mc_wbuf *w, const char *s)
{
	mc_wbuf_str(w, s, strlen(s));
}

int mc_persist_put_segment(struct mc_persist *p, const struct mc_persist_segment *s)
{
	struct mc_wbuf *w = &p->batch;

	mc_wbuf_u8(w, OP_PUT_SEGMENT);
	mc_wbuf_put(w, s->id, 16);
	mc_wbuf_put(w, s->client_id, 16);
	mc_persist_batch_str(w, s->name);
	mc_wbuf_u64(w, s->base);
	mc_wbuf_u64(w, s->size);
	mc_persist_batch_str(w, s->endpoint);
	mc_persist_batch_str(w, s->protocol);
	mc_wbuf_u8(w, s->kind);
	mc_wbuf_put(w, s->token, 16);
	mc_wbuf_u64(w, (uint64_t)s->dormant_until_ms);
	return mc_persist_queued(p);
}

int mc_persist_del_segment(struct mc_persist *p, const uint8_t id[16])
{
	mc_wbuf_u8(&p->batch, OP_DEL_SEGMENT);
	mc_wbuf_put(&p->batch, id, 16);
	return mc_persist_queued(p);
}

int mc_persist_put_object(struct mc_persist *p, const struct mc_persist_object *o)
{
	struct mc_wbuf *w = &p->batch;
	uint32_t i;

	mc_wbuf_u8(w, OP_PUT_OBJECT);
	mc_wbuf_str(w, o->key, o->key_len);
	mc_wbuf_u64(w, o->size);
	mc_wbuf_u32(w, o->flags);
	mc_wbuf_i64(w, o->put_start_ms);
	mc_wbuf_i64(w, o->soft_pin_until_ms);
	mc_wbuf_put(w, o->writer, 16);
	mc_wbuf_u64(w, o->gen);
	mc_wbuf_u8(w, o->has_checksum ? 1 : 0);
	mc_wbuf_u64(w, o->checksum);
	mc_wbuf_u32(w, o->n_replicas * MC_PERSIST_REPLICA_BYTES);
	for (i = 0; i < o->n_replicas; i++) {
		const struct mc_persist_replica *r = &o->replicas[i];

		mc_wbuf_u64(w, r->id);
		mc_wbuf_u8(w, r->type);
		mc_wbuf_u8(w, r->status);
		mc_wbuf_put(w, r->segment_id, 16);
		mc_wbuf_u64(w, r->offset);
		mc_wbuf_u64(w, r->len);
	}
	return mc_persist_queued(p);
}

int mc_persist_del_object(struct mc_persist *p, const char *key, size_t key_len, uint64_t gen)
{
	mc_wbuf_u8(&p->batch, OP_DEL_ROW);
	mc_wbuf_u64(&p->batch, gen);
	mc_wbuf_str(&p->batch, key, key_len);
	return mc_persist_queued(p);
}

int mc_persist_del_all_objects(struct mc_persist *p)
{
	mc_wbuf_u8(&p->batch, OP_DEL_ALL_OBJECTS);
	return mc_persist_queued(p);
}

int mc_persist_put_record(struct mc_persist *p, uint32_t kind, const void *id, size_t id_len,
			  const void *value, size_t len)
{
	mc_wbuf_u8(&p->batch, OP_PUT_RECORD);
	mc_wbuf_u32(&p->batch, kind);
	mc_wbuf_str(&p->batch, id, id_len);
	mc_wbuf_str(&p->batch, value, len);
	return mc_persist_queued(p);
}

int mc_persist_del_record(struct mc_persist *p, uint32_t kind, const void *id, size_t id_len)
{
	mc_wbuf_u8(&p->batch, OP_DEL_RECORD);
	mc_wbuf_u32(&p->batch, kind);
	mc_wbuf_str(&p->batch, id, id_len);
	return mc_persist_queued(p);
}

int mc_persist_set_meta(struct mc_persist *p, const char *name, int64_t value)
{
	int i;

	if (strlen(name) >= sizeof(p->meta[0].name))
		return -EINVAL;
	for (i = 0; i < p->nmeta; i++)
		if (!strcmp(p->meta[i].name, name))
			break;
	if (i == p->nmeta) {
		if (p->nmeta == MC_PERSIST_MAX_META)
			return -ENOSPC;
		snprintf(p->meta[i].name, sizeof(p->meta[i].name), "%s", name);
		p->nmeta++;
	} else if (p->meta[i].value == value && !p->meta[i].dirty) {
		return 0;
	}
	p->meta[i].value = value;
	p->meta[i].dirty = 1;
	p->pending++;
	return 0;
}

size_t mc_persist_pending(const struct mc_persist *p)
{
	return p->pending;
}

size_t mc_persist_pending_bytes(const struct mc_persist *p)
{
	return p->batch.len;
}

void mc_persist_drop_pending(struct mc_persist *p)
{
	int i;

	mc_wbuf_reset(&p->batch);
	p->batch.err = 0;
	p->nends = 0;
	p->pending = 0;
	for (i = 0; i < p->nmeta; i++)
		p->meta[i].dirty = 0;
}

void mc_persist_encode_meta(struct mc_wbuf *w, const char *name, int64_t value)
{
	mc_wbuf_u8(w, OP_SET_META);
	mc_persist_batch_str(w, name);
	mc_wbuf_i64(w, value);
}

/* The row a change writes and a class (objects, segments: different tables): an object's row
 * is its generation and key (the row of gen holds one key; a change of another key to the same
 * generation is a different change), a segment's its id.  The row's bytes: k (klen) and, for
 * objects, the 8 bytes of the generation at *g.  0 for changes that name no row
 * (DEL_ALL_OBJECTS, and DEL_OBJECT, which finds its row by key and is never in a pending
 * batch). */
static int mc_persist_row_of(const uint8_t *rec, size_t len, const uint8_t **key, size_t *klen,
			     const uint8_t **g)
{
	size_t kl;

	switch (rec[0]) {
	case OP_PUT_OBJECT:
		/* u8 op, str key, u64 size, u32 flags, i64, i64, writer[16], u64 gen */
		if (len < 5 || (kl = mc_get_le32(rec + 1)) > len - 5 || len - 5 - kl < 52)
			return 0;
		*key = rec + 5;
		*klen = kl;
		*g = rec + 5 + kl + 44;
		return 1;
	case OP_DEL_ROW:
		/* u8 op, u64 gen, str key */
		if (len < 13 || (kl = mc_get_le32(rec + 9)) > len - 13)
			return 0;
		*key = rec + 13;
		*klen = kl;
		*g = rec + 1;
		return 1;
	case OP_PUT_SEGMENT:
	case OP_DEL_SEGMENT:
		if (len < 17)
			return 0;
		*key = rec + 1;
		*klen = 16;
		*g = NULL;
		return 2;
	default:
		return 0;
	}
}

static uint64_t mc_persist_hash(int cls, const uint8_t *k, size_t n, const uint8_t *g)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)cls;
	size_t i;

	for (i = 0; g && i < 8; i++)
		h = (h ^ g[i]) * 1099511628211ull;
	for (i = 0; i < n; i++)
		h = (h ^ k[i]) * 1099511628211ull;
	return h;
}

/* Drop every change a later change of the pending batch to the same row overrides (a put's
 * PutStart row, written again by its PutEnd in the same batch): the batch writes the same
 * rows, in less.  DEL_ALL_OBJECTS stays where it is, so what precedes it still precedes it. */
static void mc_persist_coalesce(struct mc_persist *p)
{
	size_t nb = 16, i, j, w = 0, start = 0;
	size_t *slot;			/* index + 1 of the last change of the row hashed there */
	uint8_t *keep;

	while (nb < p->nends * 2)
		nb *= 2;
	slot = calloc(nb, sizeof(*slot));
	keep = malloc(p->nends ? p->nends : 1);
	if (slot == NULL || keep == NULL)
		goto out;
	for (i = 0; i < p->nends; i++) {
		const uint8_t *rec = p->batch.data + start, *k, *k2, *g, *g2;
		size_t len = p->ends[i] - start, kl, kl2;
		int cls = mc_persist_row_of(rec, len, &k, &kl, &g);

		keep[i] = 1;
		start = p->ends[i];
		if (cls == 0)
			continue;
		for (j = mc_persist_hash(cls, k, kl, g) & (nb - 1); slot[j]; j = (j + 1) & (nb - 1)) {
			size_t o = slot[j] - 1, os = o ? p->ends[o - 1] : 0;

			if (mc_persist_row_of(p->batch.data + os, p->ends[o] - os, &k2, &kl2, &g2) ==
				    cls &&
			    kl2 == kl && !memcmp(k, k2, kl) && (g == NULL || !memcmp(g, g2, 8))) {
				keep[o] = 0;
				break;
			}
		}
		slot[j] = i + 1;
	}
	for (i = 0, start = 0; i < p->nends; i++) {
		size_t len = p->ends[i] - start;

		if (keep[i]) {
			memmove(p->batch.data + w, p->batch.data + start, len);
			w += len;
		}
		start = p->ends[i];
	}
	/* The ends of the changes kept (each read before it is overwritten). */
	for (i = 0, j = 0, start = 0, w = 0; i < p->nends; i++) {
		size_t len = p->ends[i] - start;

		start = p->ends[i];
		if (keep[i]) {
			w += len;
			p->ends[j++] = w;
		}
	}
	p->pending -= p->nends - j;
	p->nends = j;
	p->batch.len = w;
out:
	free(slot);
	free(keep);
}

size_t mc_persist_take(struct mc_persist *p, struct mc_wbuf *out, size_t max, size_t max_changes)
{
	size_t n = 0, cut = 0, taken;
	int i;

	if (p->batch.err)
		return 0;
	mc_persist_coalesce(p);
	/* The longest run of whole changes within max bytes and max_changes (at least one). */
	while (n < p->nends && (n == 0 || (p->ends[n] <= max && n < max_changes)))
		n++;
	if (n)
		cut = p->ends[n - 1];
	mc_wbuf_put(out, p->batch.data, cut);
	taken = n;
	if (n == p->nends) {
		/* The meta values go with the last part: they are as of the end of the batch. */
		for (i = 0; i < p->nmeta; i++) {
			if (!p->meta[i].dirty)
				continue;
			mc_persist_encode_meta(out, p->meta[i].name, p->meta[i].value);
			p->meta[i].dirty = 0;
			taken++;
		}
		mc_wbuf_reset(&p->batch);
		p->nends = 0;
	} else {
		size_t k;

		memmove(p->batch.data, p->batch.data + cut, p->batch.len - cut);
		p->batch.len -= cut;
		for (k = n; k < p->nends; k++)
			p->ends[k - n] = p->ends[k] - cut;
		p->nends -= n;
	}
	p->pending = p->pending > taken ? p->pending - taken : 0;
	if (p->nends == 0) {
		int dirty = 0;

		for (i = 0; i < p->nmeta; i++)
			dirty += p->meta[i].dirty;
		p->pending = (size_t)dirty;
	}
	return taken;
}

/* Apply up to max changes from the n cursors r, in order, in one transaction.  0 or
 * MC_ERR_PERSISTENT_FAIL (rolled back). */