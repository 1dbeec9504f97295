/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_proxy's subscription to the master's KV events (--kv_events_endpoint): a ZeroMQ SUB
 * socket whose file descriptor is an event source of the proxy's loop.  Each message is three
 * frames (empty topic, 8-byte big-endian sequence number, msgpack [timestamp_ms, [event...],
 * dp_rank]); an event is a map whose event_type ("stored"/"removed", or type "BlockStored"/
 * "BlockRemoved"/"AllBlocksCleared") says what happened to the blocks named by its seq_hashes
 * (else block_hashes, else its object_key read through --kv_events_key_format).  The blocks go
 * into the pool set of proxy_kvpool.c.
 *
 * A monitor socket reports the connection: the set is used only while connected, and is
 * emptied when the master goes away (events published meanwhile are lost: there is no replay),
 * so routing falls back to the prefix tree alone until the master is back and publishes again.
 * ZeroMQ heartbeats notice a master that vanished without closing its connection.
 *
 * Nothing blocks the loop: every receive is ZMQ_DONTWAIT, at most PX_KV_BUDGET messages are
 * taken per turn (the rest on the next), messages are bounded (ZMQ_MAXMSGSIZE) and decoded by a
 * bounds-checked msgpack reader; a message that does not parse is counted and dropped.  ZeroMQ's
 * descriptor is edge-triggered, so each turn reads until EAGAIN, and a timer polls as a safety
 * net.  Loop thread only (ZeroMQ's own I/O thread does the connecting).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_ZMQ
#include <zmq.h>
#endif

#include "common/log.h"
#include "common/xalloc.h"
#include "proxy/proxy.h"

#ifdef HAVE_ZMQ

#define PX_KV_BUDGET 256
#define PX_KV_MAX_MSG (16 * 1024 * 1024)
#define PX_KV_MAX_HASHES 4096
#define PX_KV_MAX_DEPTH 16
#define PX_KV_MONITOR "inproc://mooncake-proxy-kv-monitor"

/* ---- msgpack, read with bounds ----------------------------------------------------------- */

enum { MP_NIL, MP_BOOL, MP_UINT, MP_INT, MP_FLOAT, MP_STR, MP_BIN, MP_ARRAY, MP_MAP, MP_EXT };

struct mp {
	const uint8_t *p;
	size_t left;
	int err;
};

struct mp_val {
	int t;
	uint64_t u;		/* UINT, INT (two's complement), BOOL; count of ARRAY and MAP */
	const uint8_t *s;	/* STR, BIN */
	size_t n;
};

static uint64_t mp_take(struct mp *m, size_t bytes)
{
	uint64_t v = 0;
	size_t i;

	if (m->err || m->left < bytes) {
		m->err = 1;
		return 0;
	}
	for (i = 0; i < bytes; i++)
		v = v << 8 | m->p[i];
	m->p += bytes;
	m->left -= bytes;
	return v;
}

static void mp_span(struct mp *m, struct mp_val *v, size_t n)
{
	if (m->err || m->left < n) {
		m->err = 1;
		return;
	}
	v->s = m->p;
	v->n = n;
	m->p += n;
	m->left -= n;
}

static uint64_t mp_sext(uint64_t v, int bytes)
{
	int sh = 64 - 8 * bytes;

	return (uint64_t)((int64_t)(v << sh) >> sh);
}

/* Read the next value's header (and a string's or binary's bytes).  Returns 0 or -1. */
static int mp_next(struct mp *m, struct mp_val *v)
{
	uint8_t b = (uint8_t)mp_take(m, 1);

	memset(v, 0, sizeof(*v));
	if (m->err)
		return -1;
	if (b <= 0x7f) {
		v->t = MP_UINT;
		v->u = b;
	} else if (b >= 0xe0) {
		v->t = MP_INT;
		v->u = mp_sext(b, 1);
	} else if ((b & 0xf0) == 0x80 || (b & 0xf0) == 0x90) {
		v->t = (b & 0xf0) == 0x80 ? MP_MAP : MP_ARRAY;
		v->u = b & 0x0f;
	} else if ((b & 0xe0) == 0xa0) {
		v->t = MP_STR;
		mp_span(m, v, b & 0x1f);
	} else {
		switch (b) {
		case 0xc0: v->t = MP_NIL; break;
		case 0xc2: case 0xc3: v->t = MP_BOOL; v->u = b & 1; break;
		case 0xc4: case 0xc5: case 0xc6:
			v->t = MP_BIN;
			mp_span(m, v, (size_t)mp_take(m, (size_t)1 << (b - 0xc4)));
			break;
		case 0xc7: case 0xc8: case 0xc9:
			v->t = MP_EXT;
			mp_span(m, v, (size_t)mp_take(m, (size_t)1 << (b - 0xc7)) + 1);
			break;
		case 0xca: v->t = MP_FLOAT; mp_take(m, 4); break;
		case 0xcb: v->t = MP_FLOAT; mp_take(m, 8); break;
		case 0xcc: case 0xcd: case 0xce: case 0xcf:
			v->t = MP_UINT;
			v->u = mp_take(m, (size_t)1 << (b - 0xcc));
			break;
		case 0xd0: case 0xd1: case 0xd2: case 0xd3:
			v->t = MP_INT;
			v->u = mp_sext(mp_take(m, (size_t)1 << (b - 0xd0)), 1 << (b - 0xd0));
			break;
		case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
			v->t = MP_EXT;
			mp_span(m, v, ((size_t)1 << (b - 0xd4)) + 1);
			break;
		case 0xd9: case 0xda: case 0xdb:
			v->t = MP_STR;
			mp_span(m, v, (size_t)mp_take(m, (size_t)1 << (b - 0xd9)));
			break;
		case 0xdc: case 0xdd:
			v->t = MP_ARRAY;
			v->u = mp_take(m, b == 0xdc ? 2 : 4);
			break;
		case 0xde: case 0xdf:
			v->t = MP_MAP;
			v->u = mp_take(m, b == 0xde ? 2 : 4);
			break;
		default:	/* 0xc1: never used */
			m->err = 1;
		}
	}
	return m->err ? -1 : 0;
}

/* Skip the elements of a container whose header v was just read. */
static void mp_skip_body(struct mp *m, const struct mp_val *v, int depth)
{
	uint64_t i, n = v->t == MP_MAP ? 2 * v->u : v->t == MP_ARRAY ? v->u : 0;
	struct mp_val e;

	if (n && depth >= PX_KV_MAX_DEPTH)
		m->err = 1;
	for (i = 0; i < n && !m->err; i++)
		if (mp_next(m, &e) == 0)
			mp_skip_body(m, &e, depth + 1);
}

static int mp_is(const struct mp_val *v, const char *s)
{
	size_t n = strlen(s);

	return v->t == MP_STR && v->n == n && memcmp(v->s, s, n) == 0;
}

/* ---- events ------------------------------------------------------------------------------ */

enum { PX_EV_NONE, PX_EV_STORED, PX_EV_REMOVED, PX_EV_CLEARED };

/* Read a list of block hashes (u64, or int64 carrying the same bits) into kp->tmp. */
static size_t px_kv_hashes(struct px_kvpool *kp, struct mp *m, const struct mp_val *v)
{
	struct mp_val e;
	uint64_t i;
	size_t n = 0;

	for (i = 0; i < v->u && !m->err; i++) {
		if (mp_next(m, &e) != 0)
			break;
		if ((e.t == MP_UINT || e.t == MP_INT) && n < PX_KV_MAX_HASHES)
			kp->tmp[n++] = e.u;
		else if (e.t != MP_UINT && e.t != MP_INT)
			mp_skip_body(m, &e, 2);
	}
	return n;
}

/* One event map (its header read).  Returns 0, or -1 when the message is malformed. */
static int px_kv_event(struct px_kvpool *kp, struct mp *m, uint64_t fields)
{
	struct mp_val k, v;
	uint64_t i, key_hash = 0;
	int kind = PX_EV_NONE, from = 0;	/* from: 2 seq_hashes, 1 block_hashes */
	int have_key = 0;
	size_t n = 0, j;

	for (i = 0; i < fields && !m->err; i++) {
		if (mp_next(m, &k) != 0 || mp_next(m, &v) != 0)
			break;
		if (mp_is(&k, "event_type") || mp_is(&k, "type")) {
			if (mp_is(&v, "stored") || mp_is(&v, "BlockStored"))
				kind = PX_EV_STORED;
			else if (mp_is(&v, "removed") || mp_is(&v, "BlockRemoved"))
				kind = PX_EV_REMOVED;
			else if (mp_is(&v, "AllBlocksCleared") || mp_is(&v, "all_blocks_cleared"))
				kind = PX_EV_CLEARED;
			mp_skip_body(m, &v, 2);	/* a container where a name belongs */
		} else if ((mp_is(&k, "seq_hashes") || mp_is(&k, "block_hashes")) &&
			   v.t == MP_ARRAY) {
			int f = mp_is(&k, "seq_hashes") ? 2 : 1;

			if (f < from) {		/* seq_hashes read already: they win */
				mp_skip_body(m, &v, 2);
				continue;
			}
			n = px_kv_hashes(kp, m, &v);
			from = f;
			if (v.u > PX_KV_MAX_HASHES)
				kp->truncated++;
		} else if (mp_is(&k, "object_key") && v.t == MP_STR) {
			have_key = px_kvpool_key_hash(kp, (const char *)v.s, v.n, &key_hash) == 0;
		} else {
			mp_skip_body(m, &v, 2);
		}
	}
	if (m->err)
		return -1;
	kp->events++;
	if (kind == PX_EV_CLEARED) {
		px_kvpool_clear(kp);
		return 0;
	}
	/* A key that is no u64 comes with no hashes: its name says which block it is. */
	if (n == 0 && have_key) {
		kp->tmp[0] = key_hash;
		n = 1;
	}
	if (n == 0 || kind == PX_EV_NONE) {
		kp->unmapped++;
		return 0;
	}
	for (j = 0; j < n; j++) {
		if (kind == PX_EV_STORED)
			px_kvpool_stored(kp, kp->tmp[j]);
		else
			px_kvpool_removed(kp, kp->tmp[j]);
	}
	return 0;
}

/* The payload [timestamp_ms, [event...], dp_rank].  Returns 0 or -1 (malformed). */
static int px_kv_payload(struct px_kvpool *kp, const uint8_t *p, size_t len)
{
	struct mp m = { p, len, 0 };
	struct mp_val top, v, ev;
	uint64_t i;

	if (mp_next(&m, &top) != 0 || top.t != MP_ARRAY || top.u < 2)
		return -1;
	if (mp_next(&m, &v) != 0)	/* timestamp */
		return -1;
	mp_skip_body(&m, &v, 1);
	if (mp_next(&m, &v) != 0 || v.t != MP_ARRAY)
		return -1;
	for (i = 0; i < v.u && !m.err; i++) {
		if (mp_next(&m, &ev) != 0)
			return -1;
		if (ev.t != MP_MAP) {
			kp->unmapped++;
			mp_skip_body(&m, &ev, 2);
			continue;
		}
		if (px_kv_event(kp, &m, ev.u) != 0)
			return -1;
	}
	return m.err ? -1 : 0;
}

/* ---- the sockets on the loop ------------------------------------------------------------- */

/* One message (all its frames) into parts[0..2]; more frames than three are dropped.  Returns
 * the number of frames, 0 when none is waiting, -1 on error. */
static int px_kv_recv(void *sock, zmq_msg_t *parts, int max)
{
	int n = 0, more;
	size_t ml = sizeof(more);
	zmq_msg_t extra;

	for (;;) {
		zmq_msg_t *msg = n < max ? &parts[n] : &extra;

		zmq_msg_init(msg);
		if (zmq_msg_recv(msg, sock, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(msg);
			return n == 0 && (errno == EAGAIN || errno == EINTR) ? 0 : n ? n : -1;
		}
		more = 0;
		zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
		if (msg == &extra)
			zmq_msg_close(&extra);
		n++;
		if (!more)
			return n;
	}
}

static void px_kv_close_parts(zmq_msg_t *parts, int n, int max)
{
	int i;

	for (i = 0; i < n && i < max; i++)
		zmq_msg_close(&parts[i]);
}

static void px_kv_on_sub(evutil_socket_t fd, short what, void *arg)
{
	struct px_kvpool *kp = arg;
	zmq_msg_t parts[3];
	int k, n;

	(void)fd;
	(void)what;
	for (k = 0; k < PX_KV_BUDGET; k++) {
		n = px_kv_recv(kp->sub, parts, 3);
		if (n <= 0)
			return;
		kp->messages++;
		if (n == 3 && zmq_msg_size(&parts[1]) == 8) {
			const uint8_t *s = zmq_msg_data(&parts[1]);
			uint64_t seq = 0;
			int i;

			for (i = 0; i < 8; i++)
				seq = seq << 8 | s[i];
			if (kp->last_seq && seq != kp->last_seq + 1 && kp->gaps++ % 1000 == 0) {
				mc_log_info("KV events: sequence %llu after %llu: events were lost "
					    "(%llu gaps so far)",
					    (unsigned long long)seq, (unsigned long long)kp->last_seq,
					    (unsigned long long)kp->gaps);
			}
			kp->last_seq = seq;
		}
		if (n != 3 || px_kv_payload(kp, zmq_msg_data(&parts[2]),
					    zmq_msg_size(&parts[2])) != 0) {
			if (kp->bad++ == 0 || kp->bad % 1000 == 0)
				mc_log_warn("KV events: a message that is not [timestamp, [event...], "
					    "dp_rank] in three frames was dropped (%llu so far)",
					    (unsigned long long)kp->bad);
		}
		px_kv_close_parts(parts, n, 3);
	}
	/* More may be waiting: go on at the next turn, after the requests. */
	event_active(kp->sub_ev, EV_READ, 0);
}

static void px_kv_on_monitor(evutil_socket_t fd, short what, void *arg)
{
	struct px_kvpool *kp = arg;
	zmq_msg_t parts[2];
	int n;

	(void)fd;
	(void)what;
	while ((n = px_kv_recv(kp->mon, parts, 2)) > 0) {
		uint16_t ev = 0;

		if (zmq_msg_size(&parts[0]) >= 6)
			memcpy(&ev, zmq_msg_data(&parts[0]), sizeof(ev));
		if (ev == ZMQ_EVENT_CONNECTED) {
			kp->connected = 1;
			kp->live = 1;
			kp->last_seq = 0;
			mc_log_notice("KV events: subscribed to %s", kp->endpoint);
		} else if (ev == ZMQ_EVENT_DISCONNECTED && kp->connected) {
			kp->connected = 0;
			kp->live = 0;
			kp->disconnects++;
			px_kvpool_clear(kp);
			mc_log_warn("KV events: %s went away: pool knowledge dropped, routing by the "
				    "prefix tree alone until it is back", kp->endpoint);
		}
		px_kv_close_parts(parts, n, 2);
	}
}

static void px_kv_on_tick(evutil_socket_t fd, short what, void *arg)
{
	px_kv_on_monitor(fd, what, arg);
	px_kv_on_sub(fd, what, arg);
}

static int px_kv_watch(struct px *px, void *sock, event_callback_fn cb, struct event **ev)
{
	int fd;
	size_t l = sizeof(fd);

	if (zmq_getsockopt(sock, ZMQ_FD, &fd, &l) != 0)
		return -1;
	*ev = event_new(px->base, fd, EV_READ | EV_PERSIST, cb, px->kvpool);
	if (*ev == NULL || event_add(*ev, NULL) != 0)
		return -1;
	return 0;
}

int px_kvsub_start(struct px *px)
{
	struct px_kvpool *kp = px->kvpool;
	int64_t maxmsg = PX_KV_MAX_MSG;
	int hwm = 10000, linger = 0, hb = 2000, hbt = 6000, ivl_max = 5000;
	struct timeval tick = { 0, 250000 };

	kp->endpoint = px->cfg.kv_events_endpoint;
	kp->tmp = mc_xcalloc(PX_KV_MAX_HASHES, sizeof(uint64_t));
	kp->zctx = zmq_ctx_new();
	kp->sub = kp->zctx ? zmq_socket(kp->zctx, ZMQ_SUB) : NULL;
	kp->mon = kp->zctx ? zmq_socket(kp->zctx, ZMQ_PAIR) : NULL;
	if (kp->sub == NULL || kp->mon == NULL ||
	    zmq_setsockopt(kp->sub, ZMQ_SUBSCRIBE, "", 0) != 0 ||
	    zmq_setsockopt(kp->sub, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) != 0 ||
	    zmq_setsockopt(kp->sub, ZMQ_RCVHWM, &hwm, sizeof(hwm)) != 0 ||
	    zmq_setsockopt(kp->sub, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
	    zmq_setsockopt(kp->mon, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
	    zmq_setsockopt(kp->sub, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof(ivl_max)) != 0 ||
	    zmq_setsockopt(kp->sub, ZMQ_HEARTBEAT_IVL, &hb, sizeof(hb)) != 0 ||
	    zmq_setsockopt(kp->sub, ZMQ_HEARTBEAT_TIMEOUT, &hbt, sizeof(hbt)) != 0 ||
	    zmq_socket_monitor(kp->sub, PX_KV_MONITOR,
			       ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) != 0 ||
	    zmq_connect(kp->mon, PX_KV_MONITOR) != 0) {
		mc_log_err("KV events: cannot set up a ZeroMQ subscriber: %s",
			   zmq_strerror(zmq_errno()));
		return -1;
	}
	if (zmq_connect(kp->sub, kp->endpoint) != 0) {
		mc_log_err("--kv_events_endpoint '%s': %s", kp->endpoint, zmq_strerror(zmq_errno()));
		return -1;
	}
	if (px_kv_watch(px, kp->sub, px_kv_on_sub, &kp->sub_ev) != 0 ||
	    px_kv_watch(px, kp->mon, px_kv_on_monitor, &kp->mon_ev) != 0)
		return -1;
	kp->tick_ev = event_new(px->base, -1, EV_PERSIST, px_kv_on_tick, kp);
	if (kp->tick_ev == NULL || event_add(kp->tick_ev, &tick) != 0)
		return -1;
	mc_log_info("KV events: subscribing to %s", kp->endpoint);
	return 0;
}

void px_kvsub_stop(struct px *px)
{
	struct px_kvpool *kp = px->kvpool;

	if (kp == NULL)
		return;
	if (kp->sub_ev)
		event_free(kp->sub_ev);
	if (kp->mon_ev)
		event_free(kp->mon_ev);
	if (kp->tick_ev)
		event_free(kp->tick_ev);
	if (kp->sub) {
		zmq_socket_monitor(kp->sub, NULL, 0);
		zmq_close(kp->sub);
	}
	if (kp->mon)
		zmq_close(kp->mon);
	if (kp->zctx)
		zmq_ctx_term(kp->zctx);
	free(kp->tmp);
	kp->sub_ev = kp->mon_ev = kp->tick_ev = NULL;
	kp->sub = kp->mon = kp->zctx = NULL;
	kp->tmp = NULL;
}

#else /* !HAVE_ZMQ */

int px_kvsub_start(struct px *px)
{
	mc_log_err("--kv_events_endpoint '%s': this mooncake_proxy was built without libzmq",
		   px->cfg.kv_events_endpoint);
	return -ENOTSUP;
}

void px_kvsub_stop(struct px *px)
{
	(void)px;
}

#endif
