/* SPDX-License-Identifier: Apache-2.0 */
/*
 * KV cache events over ZeroMQ, in upstream's format (RFC #1527 events as its master publishes
 * them), for KV-aware routers and indexers.
 *
 * What is published: "stored" when an object becomes readable (its first PutEnd; medium "cpu"
 * for memory, "disk" for a shared-directory copy alone), "removed" when an object that was
 * published goes, whatever takes it (Remove, RemoveAll, eviction, a client's death, a corrupt
 * last replica), with the medium it had ("cpu" while it has memory, else "disk").
 *
 * The wire: a PUB socket bound at --kv_events_bind_endpoint; each message is three frames: an
 * empty topic, an 8-byte big-endian sequence number (from 1, one per message), and a msgpack
 * array [timestamp_ms, [event...], dp_rank].  An event is a map of event_id, timestamp,
 * event_type ("stored"/"removed"), type ("BlockStored"/"BlockRemoved", with
 * --kv_events_emit_legacy_compat), model_name, block_size, additional_salt, lora_name (the
 * --kv_events_* values, nil when unset), tenant_id, backend_id, group_id (nil), medium,
 * dp_rank, object_key (--kv_events_emit_object_key), seq_hashes ([u64] when the key is a
 * decimal or 0x-hex u64, else []), block_hashes (the same as int64, legacy), and for stored
 * events base_block_idx 0, parent_hash nil, token_ids nil, parent_block_hash nil (legacy),
 * for removed ones base_block_idx nil.  An event whose key is no u64 hash is counted in
 * skipped_unparsed_keys (and dropped when object keys are not emitted).  There is no replay:
 * a subscriber that joins late or falls behind sees the sequence numbers jump.
 *
 * Threads: the master's loop only appends events to a bounded queue under a mutex (no I/O,
 * no encoding); a publisher thread takes up to 64 at a time, encodes them and sends one
 * message (a PUB socket never blocks: ZeroMQ drops what a slow subscriber cannot take).  When
 * the queue is full (--kv_events_queue_capacity) the oldest event is dropped and a sequence
 * number is skipped so subscribers see the loss.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#ifdef HAVE_ZMQ
#include <zmq.h>
#endif

#include "common/log.h"
#include "common/wire.h"
#include "common/xalloc.h"
#include "master/kv_events.h"
#include "master/tenants.h"

#define MC_KV_BATCH 64
#define MC_KV_SNDHWM 10000

enum { MC_KV_STORED = 0, MC_KV_REMOVED = 1 };

struct mc_kv_event {
	struct mc_kv_event *next;
	uint8_t kind;
	uint8_t disk;			/* medium "disk" (else "cpu") */
	uint16_t tenant_len;
	uint32_t key_len;
	char data[];			/* tenant, then key */
};

struct mc_kv {
	const struct mc_kv_config *cfg;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mc_kv_event *head, *tail;
	uint64_t queued;
	int stop;
	uint64_t next_event_id, next_seq;	/* under mu */
	uint64_t batches, events, dropped, skipped;	/* under mu */
	void *zctx, *zsock;
	void (*prev_erase)(void *arg, struct mc_object *o);
	void *prev_erase_arg;
	struct mc_master *m;
};

/* Queue one event (the master's loop).  Never blocks on the publisher beyond the mutex. */
static void mc_kv_queue(struct mc_kv *kv, uint8_t kind, int disk, const char *tenant,
			const char *key, size_t key_len)
{
	size_t tl = strlen(tenant);
	struct mc_kv_event *e = malloc(sizeof(*e) + tl + key_len), *old = NULL;

	if (e == NULL)
		return;
	e->next = NULL;
	e->kind = kind;
	e->disk = (uint8_t)(disk != 0);
	e->tenant_len = (uint16_t)tl;
	e->key_len = (uint32_t)key_len;
	memcpy(e->data, tenant, tl);
	memcpy(e->data + tl, key, key_len);
	pthread_mutex_lock(&kv->mu);
	if (kv->cfg->kv_events_queue_capacity > 0 &&
	    kv->queued >= (uint64_t)kv->cfg->kv_events_queue_capacity) {
		old = kv->head;
		kv->head = old->next;
		if (kv->head == NULL)
			kv->tail = NULL;
		kv->queued--;
		kv->dropped++;
		kv->next_seq++;		/* a gap: subscribers see the loss */
	}
	if (kv->tail)
		kv->tail->next = e;
	else
		kv->head = e;
	kv->tail = e;
	kv->queued++;
	pthread_cond_signal(&kv->cv);
	pthread_mutex_unlock(&kv->mu);
	free(old);
}

static const char *mc_kv_tenant(const struct mc_master *m, const struct mc_object *o)
{
	return mc_tenants_enabled(m) ? mc_tenant_name(m, o->tenant)
				     : m->cfg.kv.kv_events_tenant_id;
}

/* Does o hold memory now? */
static int mc_kv_in_memory(struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg && r->type == MC_REPLICA_MEMORY)
			return 1;
	}
	return 0;
}

void mc_kv_event_stored(struct mc_master *m, struct mc_object *o, uint8_t rtype)
{
	int disk;

	if (m->kv == NULL)
		return;
	disk = rtype == MC_REPLICA_DISK || (rtype == MC_REPLICA_ALL && !mc_kv_in_memory(o));
	o->xflags |= MC_OBJX_PUBLISHED | (disk ? MC_OBJX_PUBLISHED_DISK : 0);
	mc_kv_queue(m->kv, MC_KV_STORED, disk, mc_kv_tenant(m, o), o->key, o->key_len);
}

void mc_kv_events_stats(const struct mc_master *m, struct mc_kv_stats *out)
{
	struct mc_kv *kv = m->kv;

	memset(out, 0, sizeof(*out));
	if (kv == NULL)
		return;
	pthread_mutex_lock(&kv->mu);
	out->enabled = 1;
	out->published_batches = kv->batches;
	out->published_events = kv->events;
	out->dropped_events = kv->dropped;
	out->skipped_unparsed_keys = kv->skipped;
	out->queued = kv->queued;
	pthread_mutex_unlock(&kv->mu);
}

/* ---------------------------------------------------------------- the publisher */

#ifdef HAVE_ZMQ
/* ---------------------------------------------------------------- msgpack, as much as needed */

static void mp_nil(struct mc_wbuf *w)
{
	mc_wbuf_u8(w, 0xc0);
}

static void mp_be(struct mc_wbuf *w, uint8_t tag, uint64_t v, int bytes)
{
	int i;

	mc_wbuf_u8(w, tag);
	for (i = bytes - 1; i >= 0; i--)
		mc_wbuf_u8(w, (uint8_t)(v >> (8 * i)));
}

static void mp_uint(struct mc_wbuf *w, uint64_t v)
{
	if (v < 128)
		mc_wbuf_u8(w, (uint8_t)v);
	else if (v <= UINT8_MAX)
		mp_be(w, 0xcc, v, 1);
	else if (v <= UINT16_MAX)
		mp_be(w, 0xcd, v, 2);
	else if (v <= UINT32_MAX)
		mp_be(w, 0xce, v, 4);
	else
		mp_be(w, 0xcf, v, 8);
}

static void mp_int(struct mc_wbuf *w, int64_t v)
{
	if (v >= 0)
		mp_uint(w, (uint64_t)v);
	else if (v >= -32)
		mc_wbuf_u8(w, (uint8_t)v);
	else if (v >= INT8_MIN)
		mp_be(w, 0xd0, (uint64_t)v, 1);
	else if (v >= INT16_MIN)
		mp_be(w, 0xd1, (uint64_t)v, 2);
	else if (v >= INT32_MIN)
		mp_be(w, 0xd2, (uint64_t)v, 4);
	else
		mp_be(w, 0xd3, (uint64_t)v, 8);
}

static void mp_str(struct mc_wbuf *w, const char *s, size_t n)
{
	if (n < 32)
		mc_wbuf_u8(w, (uint8_t)(0xa0 | n));
	else if (n <= UINT8_MAX)
		mp_be(w, 0xd9, n, 1);
	else if (n <= UINT16_MAX)
		mp_be(w, 0xda, n, 2);
	else
		mp_be(w, 0xdb, n, 4);
	mc_wbuf_put(w, s, n);
}

static void mp_cstr(struct mc_wbuf *w, const char *s)
{
	mp_str(w, s, strlen(s));
}

/* A string that is nil when empty (upstream's optional fields). */
static void mp_opt_str(struct mc_wbuf *w, const char *s)
{
	if (s == NULL || *s == '\0')
		mp_nil(w);
	else
		mp_cstr(w, s);
}

static void mp_head(struct mc_wbuf *w, uint8_t fix, uint8_t tag16, uint8_t tag32, uint32_t n)
{
	if (n < 16)
		mc_wbuf_u8(w, (uint8_t)(fix | n));
	else if (n <= UINT16_MAX)
		mp_be(w, tag16, n, 2);
	else
		mp_be(w, tag32, n, 4);
}

static void mp_array(struct mc_wbuf *w, uint32_t n)
{
	mp_head(w, 0x90, 0xdc, 0xdd, n);
}

static void mp_map(struct mc_wbuf *w, uint32_t n)
{
	mp_head(w, 0x80, 0xde, 0xdf, n);
}

/* ---------------------------------------------------------------- events */

/* A key that is a u64 block hash: decimal, or 0x / 0X and hex digits. */
static int mc_kv_seq_hash(const char *k, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	int hex = n > 2 && k[0] == '0' && (k[1] == 'x' || k[1] == 'X');

	if (n == 0)
		return -1;
	for (i = hex ? 2 : 0; i < n; i++) {
		int d = k[i] >= '0' && k[i] <= '9'		 ? k[i] - '0'
			: hex && k[i] >= 'a' && k[i] <= 'f'	 ? k[i] - 'a' + 10
			: hex && k[i] >= 'A' && k[i] <= 'F'	 ? k[i] - 'A' + 10
								 : -1;
		uint64_t base = hex ? 16 : 10;

		if (d < 0 || v > (UINT64_MAX - (uint64_t)d) / base)
			return -1;
		v = v * base + (uint64_t)d;
	}
	*out = v;
	return 0;
}

static int64_t mc_kv_wall_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* Encode one event into w (kv->mu not held; ids come with it). */
static void mc_kv_encode(struct mc_kv *kv, struct mc_wbuf *w, const struct mc_kv_event *e,
			 uint64_t event_id, int64_t ts, int has_hash, uint64_t hash)
{
	const struct mc_kv_config *c = kv->cfg;
	int stored = e->kind == MC_KV_STORED, legacy = c->kv_events_emit_legacy_compat;
	uint32_t n = 13 + (legacy ? 2 : 0) + (c->kv_events_emit_object_key ? 1 : 0) +
		     (stored ? 3 + (legacy ? 1 : 0) : 1);

	mp_map(w, n);
	mp_cstr(w, "event_id");
	mp_uint(w, event_id);
	mp_cstr(w, "timestamp");
	mp_int(w, ts);
	mp_cstr(w, "event_type");
	mp_cstr(w, stored ? "stored" : "removed");
	if (legacy) {
		mp_cstr(w, "type");
		mp_cstr(w, stored ? "BlockStored" : "BlockRemoved");
	}
	mp_cstr(w, "model_name");
	mp_opt_str(w, c->kv_events_model_name);
	mp_cstr(w, "block_size");
	if (c->kv_events_block_size)
		mp_uint(w, (uint64_t)c->kv_events_block_size);
	else
		mp_nil(w);
	mp_cstr(w, "additional_salt");
	mp_opt_str(w, c->kv_events_additional_salt);
	mp_cstr(w, "lora_name");
	mp_opt_str(w, c->kv_events_lora_name);
	mp_cstr(w, "tenant_id");
	mp_str(w, e->data, e->tenant_len);
	mp_cstr(w, "backend_id");
	mp_cstr(w, c->kv_events_backend_id);
	mp_cstr(w, "group_id");
	mp_nil(w);
	mp_cstr(w, "medium");
	mp_cstr(w, e->disk ? "disk" : "cpu");
	mp_cstr(w, "dp_rank");
	mp_uint(w, (uint64_t)c->kv_events_dp_rank);
	if (c->kv_events_emit_object_key) {
		mp_cstr(w, "object_key");
		mp_str(w, e->data + e->tenant_len, e->key_len);
	}
	mp_cstr(w, "seq_hashes");
	mp_array(w, has_hash);
	if (has_hash)
		mp_uint(w, hash);
	if (legacy) {
		mp_cstr(w, "block_hashes");
		mp_array(w, has_hash);
		if (has_hash)
			mp_int(w, (int64_t)hash);
	}
	mp_cstr(w, "base_block_idx");
	if (stored) {
		mp_uint(w, 0);
		mp_cstr(w, "parent_hash");
		mp_nil(w);
		mp_cstr(w, "token_ids");
		mp_nil(w);
		if (legacy) {
			mp_cstr(w, "parent_block_hash");
			mp_nil(w);
		}
	} else {
		mp_nil(w);
	}
}

/* Does o still hold any replica? */
static int mc_kv_live(struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++)
		if (mc_object_replica(o, i)->seg)
			return 1;
	return 0;
}

/* The object table's erase hook (chained before the one it had): a published object goes. */
static void mc_kv_on_erase(void *arg, struct mc_object *o)
{
	struct mc_kv *kv = arg;
	struct mc_master *m = kv->m;

	if (o->xflags & MC_OBJX_PUBLISHED) {
		/* Its replicas are usually released by now: then the medium it was stored on. */
		int disk = mc_kv_live(o) ? !mc_kv_in_memory(o)
					 : (o->xflags & MC_OBJX_PUBLISHED_DISK) != 0;

		mc_kv_queue(kv, MC_KV_REMOVED, disk, mc_kv_tenant(m, o), o->key, o->key_len);
	}
	if (kv->prev_erase)
		kv->prev_erase(kv->prev_erase_arg, o);
}

/* Encode and send one batch (the publisher thread). */
static void mc_kv_publish(struct mc_kv *kv, struct mc_kv_event *batch)
{
	struct mc_kv_event *e;
	struct mc_wbuf w;
	uint32_t n = 0, k;
	uint64_t first_id, seq, hashes[MC_KV_BATCH];
	uint8_t has[MC_KV_BATCH], sb[8];
	uint64_t skipped = 0;
	int64_t ts = mc_kv_wall_ms();
	int i, rc;

	for (e = batch, k = 0; e; e = e->next, k++) {
		has[k] = mc_kv_seq_hash(e->data + e->tenant_len, e->key_len, &hashes[k]) == 0;
		if (!has[k])
			skipped++;
		if (has[k] || (kv->cfg->kv_events_emit_object_key && e->key_len))
			n++;
	}
	pthread_mutex_lock(&kv->mu);
	kv->skipped += skipped;
	first_id = kv->next_event_id;
	kv->next_event_id += n;
	seq = n ? kv->next_seq++ : 0;
	pthread_mutex_unlock(&kv->mu);
	if (n == 0)
		return;
	mc_wbuf_init(&w);
	mp_array(&w, 3);
	mp_int(&w, ts);
	mp_array(&w, n);
	for (e = batch, k = 0; e; e = e->next, k++)
		if (has[k] || (kv->cfg->kv_events_emit_object_key && e->key_len))
			mc_kv_encode(kv, &w, e, first_id++, ts, has[k], hashes[k]);
	mp_uint(&w, (uint64_t)kv->cfg->kv_events_dp_rank);
	for (i = 0; i < 8; i++)
		sb[i] = (uint8_t)(seq >> (8 * (7 - i)));
	rc = w.err ? -1 : zmq_send(kv->zsock, "", 0, ZMQ_SNDMORE);
	if (rc >= 0)
		rc = zmq_send(kv->zsock, sb, 8, ZMQ_SNDMORE);
	if (rc >= 0)
		rc = zmq_send(kv->zsock, w.data, w.len, 0);
	mc_wbuf_fini(&w);
	pthread_mutex_lock(&kv->mu);
	if (rc >= 0) {
		kv->batches++;
		kv->events += n;
	} else {
		kv->dropped += n;
	}
	pthread_mutex_unlock(&kv->mu);
}

static void *mc_kv_main(void *arg)
{
	struct mc_kv *kv = arg;

	pthread_mutex_lock(&kv->mu);
	for (;;) {
		struct mc_kv_event *batch, *last;
		uint32_t n = 1;

		while (kv->head == NULL && !kv->stop)
			pthread_cond_wait(&kv->cv, &kv->mu);
		if (kv->head == NULL)
			break;		/* stopping, everything sent */
		batch = last = kv->head;
		while (last->next && n < MC_KV_BATCH) {
			last = last->next;
			n++;
		}
		kv->head = last->next;
		if (kv->head == NULL)
			kv->tail = NULL;
		last->next = NULL;
		kv->queued -= n;
		pthread_mutex_unlock(&kv->mu);
		mc_kv_publish(kv, batch);
		while (batch) {
			struct mc_kv_event *e = batch;

			batch = e->next;
			free(e);
		}
		pthread_mutex_lock(&kv->mu);
	}
	pthread_mutex_unlock(&kv->mu);
	return NULL;
}

int mc_kv_events_init(struct mc_master *m)
{
	const struct mc_kv_config *c = &m->cfg.kv;
	struct mc_kv *kv;
	int hwm = MC_KV_SNDHWM, linger = 0;

	if (!c->enable_kv_events)
		return 0;
	kv = mc_xcalloc(1, sizeof(*kv));
	kv->cfg = c;
	kv->m = m;
	kv->next_event_id = kv->next_seq = 1;
	kv->zctx = zmq_ctx_new();
	kv->zsock = kv->zctx ? zmq_socket(kv->zctx, ZMQ_PUB) : NULL;
	if (kv->zsock == NULL) {
		mc_log_err("KV events: cannot create a ZeroMQ PUB socket: %s",
			   zmq_strerror(zmq_errno()));
		goto fail;
	}
	zmq_setsockopt(kv->zsock, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(kv->zsock, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_bind(kv->zsock, c->kv_events_bind_endpoint) != 0) {
		mc_log_err("KV events: cannot bind %s: %s", c->kv_events_bind_endpoint,
			   zmq_strerror(zmq_errno()));
		goto fail;
	}
	pthread_mutex_init(&kv->mu, NULL);
	pthread_cond_init(&kv->cv, NULL);
	if (pthread_create(&kv->thread, NULL, mc_kv_main, kv) != 0) {
		mc_log_err("KV events: cannot start the publisher thread");
		pthread_cond_destroy(&kv->cv);
		pthread_mutex_destroy(&kv->mu);
		goto fail;
	}
	kv->prev_erase = m->objects.on_erase;
	kv->prev_erase_arg = m->objects.on_erase_arg;
	m->objects.on_erase = mc_kv_on_erase;
	m->objects.on_erase_arg = kv;
	m->kv = kv;
	mc_log_notice("KV events published on %s as backend %s", c->kv_events_bind_endpoint,
		      c->kv_events_backend_id);
	return 0;
fail:
	if (kv->zsock)
		zmq_close(kv->zsock);
	if (kv->zctx)
		zmq_ctx_term(kv->zctx);
	free(kv);
	return -1;
}

void mc_kv_events_fini(struct mc_master *m)
{
	struct mc_kv *kv = m->kv;

	if (kv == NULL)
		return;
	m->objects.on_erase = kv->prev_erase;
	m->objects.on_erase_arg = kv->prev_erase_arg;
	pthread_mutex_lock(&kv->mu);
	kv->stop = 1;
	pthread_cond_signal(&kv->cv);
	pthread_mutex_unlock(&kv->mu);
	pthread_join(kv->thread, NULL);
	zmq_close(kv->zsock);
	zmq_ctx_term(kv->zctx);
	pthread_cond_destroy(&kv->cv);
	pthread_mutex_destroy(&kv->mu);
	free(kv);
	m->kv = NULL;
}
#else
int mc_kv_events_init(struct mc_master *m)
{
	if (!m->cfg.kv.enable_kv_events)
		return 0;
	mc_log_err("--enable_kv_events: this build has no ZeroMQ (configure found no libzmq; "
		   "install libzmq3-dev and rebuild)");
	return -1;
}

void mc_kv_events_fini(struct mc_master *m)
{
	(void)m;
}
#endif
