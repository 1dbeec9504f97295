/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One proxied completion of mooncake_proxy, as vLLM's disaggregated connectors expect it:
 *
 *   PX_PREFILL  the request, with max_tokens 1, stream off and kv_transfer_params asking for a
 *               remote decode, goes to a prefill instance; its answer is read whole (it is one
 *               token).  A prefill that cannot connect or answers 5xx is tried on another
 *               instance (--prefill_retries); a 4xx is the caller's and is relayed.
 *   PX_DECODE   the original request, plus the kv_transfer_params the prefill returned, goes to
 *               a decode instance; its status, content type and body are relayed to the caller
 *               as they arrive, chunk by chunk, never buffered whole.
 *   PX_DONE     the reply is finished; the flow is freed.
 *
 * A caller that goes away cancels the upstream request in flight.  Loop thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "proxy/proxy.h"

#define PX_MAX_TRIES 16

enum px_state { PX_ST_PREFILL, PX_ST_DECODE, PX_ST_DONE };

struct px_flow {
	struct px *px;
	enum px_state state;
	struct evhttp_request *down;	/* the caller's request; NULL once answered */
	struct evhttp_connection *down_conn;
	int down_gone;			/* the caller closed its connection */
	int started;			/* the reply's status line and headers are sent */
	struct event *watch;		/* readable caller socket: EOF means it went away */
	const char *api;		/* "/v1/completions" or "/v1/chat/completions" */
	json_t *body;			/* the caller's request */
	char *raw;			/* ... as it came */
	size_t raw_len;
	char *prompt;			/* text the prefix policy hashes */
	size_t prompt_len;
	char *auth;			/* Authorization header to pass on */
	size_t pool_blocks;		/* leading prefix blocks in the store's pool */
	char request_id[48];
	/* The upstream exchange in flight. */
	struct px_instance *up_in;
	struct evhttp_connection *up_conn;
	struct evhttp_request *up_req;
	int cancelling;			/* callbacks of a cancelled request are ignored */
	int reused;			/* the upstream connection was kept alive from before */
	int fresh;			/* the next send opens a new connection */
	char *pbody_sent;		/* the prefill's request body */
	json_t *kv_params;		/* kv_transfer_params the prefill returned */
	struct px_instance *tried[PX_MAX_TRIES];
	size_t n_tried;
	double t0, t_sent, t_upstream;	/* arrival, upstream request sent, time spent upstream */
};

double px_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void px_send_error(struct evhttp_request *req, int code, const char *type, const char *msg)
{
	struct evbuffer *b = evbuffer_new();
	json_t *j = json_pack("{s:{s:s,s:s,s:n,s:i}}", "error", "message", msg, "type", type,
			      "param", "code", code);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	if (b && s) {
		evbuffer_add(b, s, strlen(s));
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
				  "application/json");
		evhttp_send_reply(req, code, code == 400 ? "Bad Request" : "Error", b);
	} else {
		evhttp_send_error(req, 500, NULL);
	}
	free(s);
	json_decref(j);
	if (b)
		evbuffer_free(b);
}

static void px_flow_start_prefill(struct px_flow *f);
static void px_flow_start_decode(struct px_flow *f);

/* Drop the upstream exchange: cancel it when in flight, return or drop its connection. */
static void px_flow_release_upstream(struct px_flow *f, int reusable)
{
	if (f->up_req != NULL) {
		struct evhttp_request *r = f->up_req;

		f->up_req = NULL;
		f->cancelling = 1;
		evhttp_cancel_request(r);
		f->cancelling = 0;
		reusable = 0;
	}
	if (f->up_in != NULL) {
		f->up_in->inflight--;
		px_conn_put(f->up_in, f->up_conn, reusable);
		px_instance_unref(f->up_in);
	}
	f->up_in = NULL;
	f->up_conn = NULL;
}

static void px_flow_free(struct px_flow *f)
{
	struct px *px = f->px;
	double t = px_now() - f->t0;

	px_flow_release_upstream(f, 0);
	if (f->watch)
		event_free(f->watch);
	if (f->down_conn)
		evhttp_connection_set_closecb(f->down_conn, NULL, NULL);
	px->inflight--;
	px_hist_observe(&px->lat, t);
	px_hist_observe(&px->added, t > f->t_upstream ? t - f->t_upstream : 0);
	free(f->pbody_sent);
	json_decref(f->kv_params);
	json_decref(f->body);
	free(f->raw);
	free(f->prompt);
	free(f->auth);
	free(f);
}

/* Answer the caller with an error (before any byte of a reply) and end the flow. */
static void px_flow_fail(struct px_flow *f, int code, const char *type, const char *msg)
{
	f->px->errors++;
	if (f->down != NULL && !f->started)
		px_send_error(f->down, code, type, msg);
	else if (f->down != NULL)
		evhttp_send_reply_end(f->down);
	f->down = NULL;
	f->state = PX_ST_DONE;
	px_flow_free(f);
}

/* The caller's connection closed: the request is no longer wanted. */
static void px_flow_on_down_close(struct evhttp_connection *c, void *arg)
{
	struct px_flow *f = arg;

	(void)c;
	f->down_gone = 1;
	f->px->client_aborts++;
	mc_log_info("request %s: the caller went away; upstream request cancelled", f->request_id);
	/* A request the connection let go of (the caller hung up) outlives it until answered,
	 * and answering frees it; one still attached is freed with the connection. */
	if (f->down != NULL && evhttp_request_get_connection(f->down) == NULL) {
		if (f->started)
			evhttp_send_reply_end(f->down);
		else
			evhttp_send_error(f->down, 499, NULL);
	}
	f->down = NULL;
	f->down_conn = NULL;
	f->state = PX_ST_DONE;
	px_flow_free(f);
}

/* The caller's socket became readable while its request is served.  evhttp does not read a
 * connection while the user holds its request, so a caller that hangs up before the reply
 * starts is seen here: EOF (or an error) ends the flow and frees the connection; data (a
 * pipelined request) is left for evhttp and the watch is not renewed. */
static void px_flow_on_down_readable(evutil_socket_t fd, short what, void *arg)
{
	struct px_flow *f = arg;
	struct evhttp_connection *c = f->down_conn;
	char ch;
	ssize_t r = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);

	(void)what;
	if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR)) || c == NULL)
		return;
	f->px->client_aborts++;
	mc_log_info("request %s: the caller went away; upstream request cancelled", f->request_id);
	evhttp_connection_set_closecb(c, NULL, NULL);
	f->down = NULL;		/* freed with its connection */
	f->down_conn = NULL;
	f->state = PX_ST_DONE;
	px_flow_free(f);
	evhttp_connection_free(c);
}

/* Send body to the chosen instance at f->api.  cb is the done callback.  Returns 0, or -1 when
 * the request could not be issued (the instance is marked failed). */
static int px_flow_send(struct px_flow *f, struct px_instance *in, const char *body, size_t len,
			void (*cb)(struct evhttp_request *, void *), int streaming);

static void px_on_prefill_done(struct evhttp_request *req, void *arg);
static void px_on_decode_done(struct evhttp_request *req, void *arg);
static int px_flow_decode_on(struct px_flow *f, struct px_instance *in);

static int px_on_decode_headers(struct evhttp_request *req, void *arg)
{
	struct px_flow *f = arg;
	struct evkeyvalq *in_h = evhttp_request_get_input_headers(req);
	struct evkeyvalq *out_h;
	const char *ct;
	int code = evhttp_request_get_response_code(req);

	if (f->cancelling || f->down == NULL)
		return 0;
	out_h = evhttp_request_get_output_headers(f->down);
	ct = evhttp_find_header(in_h, "Content-Type");
	evhttp_add_header(out_h, "Content-Type", ct ? ct : "application/json");
	evhttp_add_header(out_h, "X-Request-Id", f->request_id);
	if (code >= 500)
		f->up_in->errors++;
	evhttp_send_reply_start(f->down, code, evhttp_request_get_response_code_line(req));
	f->started = 1;
	return 0;
}

static void px_on_decode_chunk(struct evhttp_request *req, void *arg)
{
	struct px_flow *f = arg;

	if (f->cancelling || f->down == NULL)
		return;
	/* Moves the bytes: the input buffer is left empty. */
	evhttp_send_reply_chunk(f->down, evhttp_request_get_input_buffer(req));
}

static int px_flow_send(struct px_flow *f, struct px_instance *in, const char *body, size_t len,
			void (*cb)(struct evhttp_request *, void *), int streaming)
{
	struct evhttp_request *r;
	struct evkeyvalq *h;
	char host[300];

	f->up_in = in;
	in->inflight++;
	in->requests++;
	f->up_conn = px_conn_get(in, f->fresh, &f->reused);
	f->fresh = 0;
	r = f->up_conn ? evhttp_request_new(cb, f) : NULL;
	if (r == NULL)
		goto fail;
	if (streaming) {
		evhttp_request_set_header_cb(r, px_on_decode_headers);
		evhttp_request_set_chunked_cb(r, px_on_decode_chunk);
	}
	h = evhttp_request_get_output_headers(r);
	snprintf(host, sizeof(host), "%s", in->name);
	evhttp_add_header(h, "Host", host);
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "X-Request-Id", f->request_id);
	if (f->auth)
		evhttp_add_header(h, "Authorization", f->auth);
	evbuffer_add(evhttp_request_get_output_buffer(r), body, len);
	f->t_sent = px_now();
	f->up_req = r;
	if (evhttp_make_request(f->up_conn, r, EVHTTP_REQ_POST, f->api) != 0) {
		f->up_req = NULL;	/* freed by evhttp_make_request */
		goto fail;
	}
	return 0;
fail:
	in->errors++;
	px_instance_failed(in, "cannot send a request");
	px_flow_release_upstream(f, 0);
	return -1;
}

/* The prefill's copy: one token, not streamed, and the connector told to keep the KV cache for
 * a remote decode. */
static char *px_prefill_body(const struct px_flow *f)
{
	json_t *j = json_deep_copy(f->body);
	json_t *kv = json_pack("{s:b,s:b,s:n,s:n,s:n,s:n}", "do_remote_decode", 1,
			       "do_remote_prefill", 0, "remote_engine_id", "remote_block_ids",
			       "remote_host", "remote_port");
	char *s;

	json_object_set_new(j, "kv_transfer_params", kv);
	json_object_set_new(j, "stream", json_false());
	json_object_set_new(j, "max_tokens", json_integer(1));
	if (json_object_get(j, "max_completion_tokens"))
		json_object_set_new(j, "max_completion_tokens", json_integer(1));
	json_object_del(j, "stream_options");
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

static void px_flow_start_prefill(struct px_flow *f)
{
	struct px *px = f->px;
	struct px_instance *in;
	char *body;
	int rc;

	for (;;) {
		if (f->n_tried > (size_t)px->cfg.prefill_retries || f->n_tried >= PX_MAX_TRIES) {
			px_flow_fail(f, 502, "server_error", "every prefill instance tried failed");
			return;
		}
		in = px_pool_pick(px, PX_PREFILL, f->prompt, f->prompt_len, f->pool_blocks, f->tried,
				  f->n_tried);
		if (in == NULL) {
			px_flow_fail(f, 503, "server_error",
				     f->n_tried ? "every prefill instance tried failed"
						: "no prefill instance in rotation");
			return;
		}
		f->tried[f->n_tried++] = in;
		if (f->n_tried > 1)
			px->retries++;
		body = px_prefill_body(f);
		if (body == NULL) {
			px_instance_unref(in);
			px_flow_fail(f, 500, "server_error", "out of memory");
			return;
		}
		free(f->pbody_sent);
		f->pbody_sent = body;
		f->state = PX_ST_PREFILL;
		rc = px_flow_send(f, in, body, strlen(body), px_on_prefill_done, 0);
		if (rc == 0)
			return;
	}
}

static void px_on_prefill_done(struct evhttp_request *req, void *arg)
{
	struct px_flow *f = arg;
	struct px_instance *in = f->up_in;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	double dt;
	json_t *j;

	if (f->cancelling)
		return;
	f->up_req = NULL;	/* libevent frees it after this callback */
	dt = px_now() - f->t_sent;
	f->t_upstream += dt;
	px_hist_observe(&in->lat, dt);
	if (code == 0 && f->reused) {
		/* The instance may have closed the idle connection as we reused it: once more on a
		 * new connection before blaming the instance. */
		in->refs++;
		px_flow_release_upstream(f, 0);
		f->fresh = 1;
		if (px_flow_send(f, in, f->pbody_sent, strlen(f->pbody_sent), px_on_prefill_done,
				 0) != 0)
			px_flow_start_prefill(f);
		return;
	}
	if (code == 0 || code >= 500) {
		char why[64];

		snprintf(why, sizeof(why), code ? "prefill answered HTTP %d" : "prefill failed", code);
		in->errors++;
		mc_log_warn("request %s: prefill instance %s: %s; trying another", f->request_id,
			    in->name, why);
		px_instance_failed(in, why);
		px_flow_release_upstream(f, 0);
		px_flow_start_prefill(f);
		return;
	}
	if (code >= 300) {
		/* The request itself is refused: relay the instance's answer. */
		struct evbuffer *b = evhttp_request_get_input_buffer(req);
		const char *ct = evhttp_find_header(evhttp_request_get_input_headers(req),
						    "Content-Type");

		in->errors++;
		px_flow_release_upstream(f, 1);
		f->px->errors++;
		evhttp_add_header(evhttp_request_get_output_headers(f->down), "Content-Type",
				  ct ? ct : "application/json");
		evhttp_send_reply(f->down, code, evhttp_request_get_response_code_line(req), b);
		f->down = NULL;
		f->state = PX_ST_DONE;
		px_flow_free(f);
		return;
	}
	{
		struct evbuffer *b = evhttp_request_get_input_buffer(req);
		size_t n = evbuffer_get_length(b);

		j = json_loadb((const char *)evbuffer_pullup(b, -1), n, 0, NULL);
		if (json_is_object(json_object_get(j, "kv_transfer_params")) &&
		    json_object_size(json_object_get(j, "kv_transfer_params")) > 0)
			f->kv_params = json_incref(json_object_get(j, "kv_transfer_params"));
		json_decref(j);
	}
	px_flow_release_upstream(f, 1);
	f->n_tried = 0;
	px_flow_start_decode(f);
}

/* Send the decode request to in (whose reference the flow takes).  Returns 0, or -1 when it
 * could not be sent (in is released and marked failed). */
static int px_flow_decode_on(struct px_flow *f, struct px_instance *in)
{
	char *body;
	int rc;

	f->tried[f->n_tried++] = in;
	f->state = PX_ST_DECODE;
	if (f->kv_params == NULL)	/* nothing to add: the caller's bytes as they came */
		return px_flow_send(f, in, f->raw, f->raw_len, px_on_decode_done, 1);
	{
		json_t *j = json_deep_copy(f->body);

		json_object_set(j, "kv_transfer_params", f->kv_params);
		body = json_dumps(j, JSON_COMPACT);
		json_decref(j);
	}
	if (body == NULL) {
		px_instance_unref(in);
		return -1;
	}
	rc = px_flow_send(f, in, body, strlen(body), px_on_decode_done, 1);
	free(body);
	return rc;
}

static void px_flow_start_decode(struct px_flow *f)
{
	struct px *px = f->px;
	struct px_instance *in;

	for (;;) {
		in = px_pool_pick(px, PX_DECODE, NULL, 0, 0, f->tried, f->n_tried);
		if (in == NULL || f->n_tried >= PX_MAX_TRIES ||
		    f->n_tried > (size_t)px->cfg.prefill_retries) {
			px_instance_unref(in);
			px_flow_fail(f, 503, "server_error",
				     f->n_tried ? "every decode instance tried failed"
						: "no decode instance in rotation");
			return;
		}
		if (px_flow_decode_on(f, in) == 0)
			return;
	}
}

static void px_on_decode_done(struct evhttp_request *req, void *arg)
{
	struct px_flow *f = arg;
	struct px_instance *in = f->up_in;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	double dt;

	if (f->cancelling)
		return;
	f->up_req = NULL;
	dt = px_now() - f->t_sent;
	f->t_upstream += dt;
	px_hist_observe(&in->lat, dt);
	if (code == 0 && !f->started && f->reused) {
		/* As for the prefill: perhaps a connection the instance closed; once more. */
		in->refs++;
		px_flow_release_upstream(f, 0);
		f->fresh = 1;
		f->n_tried--;
		if (px_flow_decode_on(f, in) != 0)
			px_flow_start_decode(f);
		return;
	}
	if (code == 0 && !f->started) {
		/* Nothing reached the caller yet: another decode instance may serve it. */
		in->errors++;
		px_instance_failed(in, "decode failed");
		mc_log_warn("request %s: decode instance %s failed; trying another", f->request_id,
			    in->name);
		px_flow_release_upstream(f, 0);
		px_flow_start_decode(f);
		return;
	}
	if (code == 0) {
		/* Cut mid-stream: close the caller's connection so it sees the reply truncated. */
		struct evhttp_connection *c = f->down_conn;

		in->errors++;
		f->px->errors++;
		mc_log_warn("request %s: decode instance %s failed mid-reply", f->request_id,
			    in->name);
		px_flow_release_upstream(f, 0);
		if (c) {
			evhttp_connection_set_closecb(c, NULL, NULL);
			f->down_conn = NULL;
			evhttp_send_reply_end(f->down);
			f->down = NULL;
			evhttp_connection_free(c);
		}
		f->state = PX_ST_DONE;
		px_flow_free(f);
		return;
	}
	/* Whatever is left (a body read in one go) then the end of the reply. */
	if (f->down) {
		struct evbuffer *b = evhttp_request_get_input_buffer(req);

		if (!f->started)
			px_on_decode_headers(req, f);
		if (evbuffer_get_length(b))
			evhttp_send_reply_chunk(f->down, b);
		evhttp_send_reply_end(f->down);
		f->down = NULL;
	}
	if (code >= 500)
		f->px->errors++;
	px_flow_release_upstream(f, 1);
	f->state = PX_ST_DONE;
	px_flow_free(f);
}

/* The prompt text the prefix policy hashes: "prompt" (a string, or the first of a list), or the
 * chat messages' contents joined. */
static void px_flow_prompt(struct px_flow *f)
{
	json_t *p = json_object_get(f->body, "prompt"), *m, *c;
	struct evbuffer *b;
	size_t i;

	if (json_is_array(p))
		p = json_array_get(p, 0);
	if (json_is_string(p)) {
		f->prompt_len = json_string_length(p);
		f->prompt = mc_xstrndup(json_string_value(p), f->prompt_len);
		return;
	}
	b = evbuffer_new();
	json_array_foreach(json_object_get(f->body, "messages"), i, m) {
		c = json_object_get(m, "content");
		if (json_is_string(c))
			evbuffer_add(b, json_string_value(c), json_string_length(c));
		evbuffer_add(b, "\n", 1);
	}
	f->prompt_len = evbuffer_get_length(b);
	f->prompt = mc_xmalloc(f->prompt_len + 1);
	evbuffer_remove(b, f->prompt, f->prompt_len);
	f->prompt[f->prompt_len] = 0;
	evbuffer_free(b);
}

/* kv_aware with the pool's contents: how much of the prompt's prefix is in the store's pool
 * (any prefill instance can load it: f->pool_blocks, in prefix-tree blocks), and is every whole
 * block of it there, so that the prefill step can be skipped (--kv_pool_skip_prefill: the
 * decode instance's connector loads the blocks from the pool and computes the rest)?  Returns
 * 1 to skip the prefill. */
static int px_flow_from_pool(struct px_flow *f)
{
	struct px *px = f->px;
	struct px_kvpool *kp = px->kvpool;
	size_t nb, m;

	if (kp == NULL || px->policy != PX_KV_AWARE || !kp->live)
		return 0;
	m = px_kvpool_match(px, f->prompt, f->prompt_len, &nb);
	kp->lookups++;
	kp->blocks_looked += nb;
	kp->blocks_matched += m;
	if (nb == 0 || m < (size_t)px->cfg.kv_pool_min_blocks)
		return 0;
	kp->hits++;
	f->pool_blocks = m * kp->block / (size_t)px->cfg.kv_block_bytes;
	if (!px->cfg.kv_pool_skip_prefill || m < nb)
		return 0;
	kp->skipped++;
	mc_log_debug("request %s: all %zu prompt blocks are in the pool: prefill skipped",
		     f->request_id, nb);
	return 1;
}

static void px_flow_begin(struct evhttp_request *req, struct px *px, const char *api)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	struct px_flow *f;
	json_error_t jerr;
	const char *auth;
	char msg[256];
	static uint64_t seq;

	px->requests++;
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		px_send_error(req, 405, "invalid_request_error", "use POST");
		return;
	}
	if (px->inflight >= px->cfg.max_inflight) {
		px->rejected++;
		px_send_error(req, 503, "server_error", "too many requests in flight; retry later");
		return;
	}
	f = mc_xcalloc(1, sizeof(*f));
	f->px = px;
	f->t0 = px_now();
	f->api = api;
	f->raw_len = evbuffer_get_length(in);
	f->raw = mc_xmalloc(f->raw_len + 1);
	evbuffer_remove(in, f->raw, f->raw_len);
	f->raw[f->raw_len] = 0;
	f->body = json_loadb(f->raw, f->raw_len, 0, &jerr);
	if (!json_is_object(f->body)) {
		snprintf(msg, sizeof(msg), "the body is not a JSON object%s%s",
			 f->body ? "" : ": ", f->body ? "" : jerr.text);
		px->errors++;
		px_send_error(req, 400, "invalid_request_error", msg);
		json_decref(f->body);
		free(f->raw);
		free(f);
		return;
	}
	px->inflight++;
	f->down = req;
	f->down_conn = evhttp_request_get_connection(req);
	evhttp_connection_set_closecb(f->down_conn, px_flow_on_down_close, f);
	{
		struct bufferevent *bev = evhttp_connection_get_bufferevent(f->down_conn);
		evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;

		if (fd >= 0) {
			f->watch = event_new(px->base, fd, EV_READ, px_flow_on_down_readable, f);
			if (f->watch)
				event_add(f->watch, NULL);
		}
	}
	auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	if (auth)
		f->auth = mc_xstrdup(auth);
	else if (getenv("OPENAI_API_KEY")) {
		const char *k = getenv("OPENAI_API_KEY");

		f->auth = mc_xmalloc(strlen(k) + 8);
		sprintf(f->auth, "Bearer %s", k);
	}
	snprintf(f->request_id, sizeof(f->request_id), "px-%llx-%llx",
		 (unsigned long long)(uint64_t)(f->t0 * 1e6), (unsigned long long)++seq);
	px_flow_prompt(f);
	if (px_flow_from_pool(f))
		px_flow_start_decode(f);
	else
		px_flow_start_prefill(f);
}

void px_flow_on_completions(struct evhttp_request *req, void *arg)
{
	px_flow_begin(req, arg, "/v1/completions");
}

void px_flow_on_chat(struct evhttp_request *req, void *arg)
{
	px_flow_begin(req, arg, "/v1/chat/completions");
}
