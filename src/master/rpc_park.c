/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests that wait for the background load (master_load.c decides which must).
 *
 * While the objects load, a request whose keys are not known yet, or one that needs the whole
 * table, waits: a copy of its frame joins one of its connection's two lists, in arrival order,
 * and the connection reads on.  Those waiting for the lookup of their keys may run at any step
 * of the load, and only connections that have such requests are visited then (m->look_conns);
 * the others run at the end, when both lists run merged by arrival.  A waiting SetTenant holds
 * every later request of its connection until the end.  Bounds per connection and in all, in
 * requests and bytes, refuse what is past them with UNAVAILABLE_IN_CURRENT_STATUS.  The
 * listener (rpc_server.c) runs them when the load moves on.
 *
 * Runs on the master's loop thread.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/rpc_conn.h"

static void mc_park_list_init(struct mc_park_list *l)
{
	l->head = NULL;
	l->tail = &l->head;
}

static void mc_park_list_free(struct mc_park_list *l)
{
	struct mc_parked *p;

	while ((p = l->head) != NULL) {
		l->head = p->next;
		free(p);
	}
	l->tail = &l->head;
}

/* c has requests waiting for a lookup (nkeys went from 0 to 1): the load's steps resume it. */
static void mc_conn_look_link(struct mc_conn *c)
{
	struct mc_master *m = c->m;

	c->look_prev = NULL;
	c->look_next = m->look_conns;
	if (m->look_conns)
		m->look_conns->look_prev = c;
	m->look_conns = c;
}

/* ... no longer (nkeys is 0). */
void mc_rpc_park_look_unlink(struct mc_conn *c)
{
	if (c->look_prev)
		c->look_prev->look_next = c->look_next;
	else
		c->m->look_conns = c->look_next;
	if (c->look_next)
		c->look_next->look_prev = c->look_prev;
	c->look_prev = c->look_next = NULL;
}

/* Drop the requests of c that wait for the load (c closes: they are not executed). */
void mc_rpc_unpark_all(struct mc_conn *c)
{
	if (c->nkeys)
		mc_rpc_park_look_unlink(c);
	c->nkeys = 0;
	mc_park_list_free(&c->park_keys);
	mc_park_list_free(&c->park_end);
	c->m->nparked -= c->nparked;
	c->m->parked_bytes -= c->park_bytes;
	c->nparked = 0;
	c->park_bytes = 0;
	c->park_barrier = 0;
}

void mc_rpc_park_init(struct mc_conn *c)
{
	mc_park_list_init(&c->park_keys);
	mc_park_list_init(&c->park_end);
}

/* A complete request of c waits for the background load (why: MC_LOAD_WAIT_KEYS or
 * MC_LOAD_WAIT_END): a copy joins c's parked requests of that kind, or, past the bounds, it is
 * answered UNAVAILABLE_IN_CURRENT_STATUS without running. */
void mc_rpc_park(struct mc_conn *c, const struct mc_rpc_hdr *h, const uint8_t *frame,
			 int why)
{
	struct mc_park_list *l = why == MC_LOAD_WAIT_KEYS ? &c->park_keys : &c->park_end;
	struct mc_master *m = c->m;
	size_t len = MC_RPC_HDR_LEN + (size_t)h->body_len;
	struct mc_parked *p;

	if (c->nparked >= MC_PARK_MAX_CONN || m->nparked >= MC_PARK_MAX_TOTAL ||
	    c->park_bytes + len > MC_PARK_MAX_CONN_BYTES ||
	    m->parked_bytes + len > MC_PARK_MAX_TOTAL_BYTES) {
		size_t start = c->out.len;

		m->metrics.load_park_refused++;
		if (!c->park_warned)
			mc_log_warn("connection %llu from %s: %u requests (%zu bytes) on it and %llu in "
				    "all wait for the load: %s and those past the bound are refused "
				    "(UNAVAILABLE_IN_CURRENT_STATUS)", (unsigned long long)c->id,
				    c->peer, c->nparked, c->park_bytes,
				    (unsigned long long)m->nparked, mc_rpc_op_name(h->opcode));
		c->park_warned = 1;
		mc_rpc_frame_begin(&c->out, MC_RPC_RESPONSE, h->opcode,
				   MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS, h->req_id);
		mc_rpc_frame_end(&c->out, start);
		return;
	}
	/* A connection that waits for an answer is not idle (rpc_conn_timeout_seconds). */
	if (c->nparked == 0 && m->cfg.rpc_conn_timeout_seconds > 0)
		bufferevent_set_timeouts(c->bev, NULL, NULL);
	p = mc_xmalloc(sizeof(*p) + len);
	p->next = NULL;
	p->seq = c->park_seq++;
	p->h = *h;
	p->len = len;
	memcpy(p->frame, frame, len);
	*l->tail = p;
	l->tail = &p->next;
	if (why == MC_LOAD_WAIT_KEYS && c->nkeys++ == 0)
		mc_conn_look_link(c);
	c->nparked++;
	c->park_bytes += len;
	m->nparked++;
	m->parked_bytes += len;
	if (h->opcode == MC_OP_SET_TENANT)
		c->park_barrier = 1;
	mc_log_debug("connection %llu from %s: %s (req_id %llu) waits for the %s",
		     (unsigned long long)c->id, c->peer, mc_rpc_op_name(h->opcode),
		     (unsigned long long)h->req_id, l == &c->park_keys ? "lookup" : "load");
}

/* Whether a request of c (frame: header h and body) waits for the load now: 0 (it runs),
 * MC_LOAD_WAIT_KEYS or MC_LOAD_WAIT_END (behind a waiting SetTenant: the end). */
int mc_rpc_must_wait(struct mc_conn *c, const struct mc_rpc_hdr *h, const uint8_t *frame)
{
	if (c->m->load == NULL)
		return 0;
	if (c->park_barrier)
		return MC_LOAD_WAIT_END;
	return mc_master_load_gate(c->m, h->opcode, frame + MC_RPC_HDR_LEN, h->body_len,
				   c->tenant);
}

/* The first of l taken off it. */
struct mc_parked *mc_rpc_park_pop(struct mc_park_list *l)
{
	struct mc_parked *p = l->head;

	l->head = p->next;
	if (l->head == NULL)
		l->tail = &l->head;
	return p;
}
