/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd's v3 JSON gateway over libcurl's multi interface on a libevent loop (see etcd.h).
 *
 * libcurl tells us which sockets to watch (mc_etcd_on_socket) and when to wake it
 * (mc_etcd_on_timer_set); the loop's events call back into curl_multi_socket_action, and
 * finished transfers are collected afterwards (mc_etcd_collect), outside libcurl's callbacks,
 * where user callbacks run.  A cancelled call is only marked: it is taken out of libcurl from a
 * deferred event, since a cancel may come from inside a write callback.  Every call is one easy
 * handle in the multi handle; connections are reused by libcurl between calls to an endpoint.
 * Single-threaded: everything runs on the loop that owns the struct.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base64.h"
#include "common/errcode.h"
#include "common/log.h"
#include "coord/etcd.h"

#ifdef HAVE_CURL
#include <curl/curl.h>

#define MC_ETCD_MAX_REPLY (64u << 20)
#define MC_ETCD_MAX_EPS 16
#define MC_ETCD_ROUND_PAUSE_MS 100

struct mc_etcd {
	struct event_base *base;
	CURLM *multi;
	struct event *timer;		/* libcurl's timeout */
	struct event *reap;		/* frees cancelled calls */
	char *eps[MC_ETCD_MAX_EPS];	/* "host:port" */
	int neps;
	int cur;			/* the endpoint calls go to first */
	struct mc_etcd_call *calls;	/* every live call */
	struct curl_slist *headers;
	int fault;			/* the test hook is on (etcd_fault.c) */
};

struct mc_etcd_call {
	struct mc_etcd *e;
	struct mc_etcd_call *prev, *next;
	CURL *easy;
	int in_multi;
	int cancelled;
	int watch;
	int faulty;			/* the test hook fails it (etcd_fault.c) */
	char path[64];
	char *body;
	int64_t deadline;		/* monotonic ms; 0 for a watch */
	int64_t total_ms;
	int ep;				/* endpoint of the current attempt */
	int attempts;
	struct event *retry;		/* the next attempt, after a pause */
	struct event *lines;		/* a watch has complete messages to hand out */
	char *buf;
	size_t len, cap;
	mc_etcd_fn fn;
	void *arg;
};

static int64_t mc_etcd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void mc_etcd_free_call(struct mc_etcd_call *c)
{
	struct mc_etcd *e = c->e;

	if (c->in_multi)
		curl_multi_remove_handle(e->multi, c->easy);
	if (c->prev)
		c->prev->next = c->next;
	else
		e->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->retry)
		event_free(c->retry);
	if (c->lines)
		event_free(c->lines);
	curl_easy_cleanup(c->easy);
	free(c->body);
	free(c->buf);
	free(c);
}

static void mc_etcd_on_reap(evutil_socket_t fd, short what, void *arg)
{
	struct mc_etcd *e = arg;
	struct mc_etcd_call *c = e->calls, *n;

	(void)fd;
	(void)what;
	for (; c; c = n) {
		n = c->next;
		if (c->cancelled)
			mc_etcd_free_call(c);
	}
}

void mc_etcd_cancel(struct mc_etcd_call *c)
{
	if (c == NULL || c->cancelled)
		return;
	c->cancelled = 1;
	c->fn = NULL;
	event_active(c->e->reap, EV_TIMEOUT, 0);
}

/* Watch streams: hand every complete line (one JSON message) to the callback, from an event of
 * its own (libcurl refuses calls made from inside its write callback). */
static void mc_etcd_on_lines(evutil_socket_t fd, short what, void *arg)
{
	struct mc_etcd_call *c = arg;
	size_t start = 0, i;

	(void)fd;
	(void)what;

	for (i = 0; i < c->len && !c->cancelled; i++) {
		json_error_t jerr;
		json_t *j, *res;

		if (c->buf[i] != '\n')
			continue;
		j = json_loadb(c->buf + start, i - start, 0, &jerr);
		start = i + 1;
		if (j == NULL)
			continue;	/* blank or partial garbage: the stream goes on */
		res = json_object_get(j, "result");
		if (json_is_object(res) && !json_is_true(json_object_get(res, "canceled"))) {
			c->fn(c->arg, 0, res);
		} else {
			/* An error message, or etcd cancelled the watch (compacted revision). */
			mc_etcd_fn fn = c->fn;

			mc_etcd_cancel(c);
			fn(c->arg, MC_ERR_ETCD_OPERATION_ERROR, j);
		}
		json_decref(j);
	}
	if (start && !c->cancelled) {
		memmove(c->buf, c->buf + start, c->len - start);
		c->len -= start;
	}
}

static size_t mc_etcd_on_body(char *p, size_t sz, size_t nm, void *arg)
{
	struct mc_etcd_call *c = arg;
	size_t n = sz * nm;

	if (c->cancelled || c->len + n > MC_ETCD_MAX_REPLY)
		return 0;
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 4096;
		char *q;

		while (cap < c->len + n + 1)
			cap *= 2;
		q = realloc(c->buf, cap);
		if (q == NULL)
			return 0;
		c->buf = q;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, p, n);
	c->len += n;
	c->buf[c->len] = '\0';
	if (c->watch && memchr(p, '\n', n)) {
		long code = 0;

		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code == 200)
			event_active(c->lines, EV_TIMEOUT, 0);
	}
	return n;
}

static void mc_etcd_attempt(struct mc_etcd_call *c);

static void mc_etcd_finish(struct mc_etcd_call *c, int rc, json_t *reply);

static void mc_etcd_on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct mc_etcd_call *c = arg;

	(void)fd;
	(void)what;
	if (c->faulty)
		mc_etcd_finish(c, -ETIMEDOUT, NULL);
	else
		mc_etcd_attempt(c);
}

/* End the call: the callback runs with rc and the parsed reply, then the call is gone. */
static void mc_etcd_finish(struct mc_etcd_call *c, int rc, json_t *reply)
{
	mc_etcd_fn fn = c->fn;
	void *arg = c->arg;

	c->fn = NULL;
	mc_etcd_cancel(c);
	if (fn)
		fn(arg, rc, reply);
}

/* Try the next endpoint, after a pause once every endpoint failed in a row; or give up. */
static void mc_etcd_next(struct mc_etcd_call *c, int rc)
{
	struct mc_etcd *e = c->e;
	int64_t now = mc_etcd_now();
	struct timeval tv = { 0, 0 };

	if (e->cur == c->ep)
		e->cur = (e->cur + 1) % e->neps;
	if (c->watch || now >= c->deadline) {
		mc_etcd_finish(c, c->watch ? -EIO : rc, NULL);
		return;
	}
	if (c->attempts % e->neps == 0) {
		int64_t pause = MC_ETCD_ROUND_PAUSE_MS;

		if (now + pause > c->deadline)
			pause = c->deadline - now;
		tv.tv_usec = (suseconds_t)pause * 1000;
	}
	evtimer_add(c->retry, &tv);
}

static void mc_etcd_collect(struct mc_etcd *e)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(e->multi, &left)) != NULL) {
		struct mc_etcd_call *c = NULL;
		long code = 0;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
		curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
		curl_multi_remove_handle(e->multi, msg->easy_handle);
		c->in_multi = 0;
		if (c->cancelled)
			continue;
		if (msg->data.result != CURLE_OK || code >= 500 || code == 0) {
			mc_log_debug("etcd %s%s: %s (HTTP %ld)", e->eps[c->ep], c->path,
				     curl_easy_strerror(msg->data.result), code);
			mc_etcd_next(c, -ETIMEDOUT);
			continue;
		}
		{
			json_error_t jerr;
			json_t *j = c->watch ? NULL : json_loadb(c->buf ? c->buf : "", c->len, 0, &jerr);

			if (c->watch)	/* the server ended the stream */
				mc_etcd_finish(c, -EIO, NULL);
			else if (code != 200)
				mc_etcd_finish(c, MC_ERR_ETCD_OPERATION_ERROR, j);
			else
				mc_etcd_finish(c, json_is_object(j) ? 0 : -EPROTO, j);
			json_decref(j);
		}
	}
}

static void mc_etcd_on_event(evutil_socket_t fd, short what, void *arg)
{
	struct mc_etcd *e = arg;
	int running = 0;
	int flags = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);

	curl_multi_socket_action(e->multi, fd, flags, &running);
	mc_etcd_collect(e);
}

static void mc_etcd_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct mc_etcd *e = arg;
	int running = 0;

	(void)fd;
	(void)what;
	curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	mc_etcd_collect(e);
}

static int mc_etcd_on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct mc_etcd *e = userp;
	struct event *ev = socketp;
	short kind;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (ev)
			event_free(ev);
		curl_multi_assign(e->multi, s, NULL);
		return 0;
	}
	kind = EV_PERSIST | (what & CURL_POLL_IN ? EV_READ : 0) |
	       (what & CURL_POLL_OUT ? EV_WRITE : 0);
	if (ev) {
		event_del(ev);
		event_assign(ev, e->base, s, kind, mc_etcd_on_event, e);
	} else {
		ev = event_new(e->base, s, kind, mc_etcd_on_event, e);
		if (ev == NULL)
			return -1;
		curl_multi_assign(e->multi, s, ev);
	}
	event_add(ev, NULL);
	return 0;
}

static int mc_etcd_on_timer_set(CURLM *multi, long timeout_ms, void *userp)
{
	struct mc_etcd *e = userp;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

	(void)multi;
	if (timeout_ms < 0)
		evtimer_del(e->timer);
	else
		evtimer_add(e->timer, &tv);
	return 0;
}

/* Start (again) the call on the current endpoint. */
static void mc_etcd_attempt(struct mc_etcd_call *c)
{
	struct mc_etcd *e = c->e;
	char url[320];
	int64_t left = c->deadline ? c->deadline - mc_etcd_now() : 0;

	if (c->cancelled)
		return;
	if (c->deadline && left <= 0) {
		mc_etcd_finish(c, -ETIMEDOUT, NULL);
		return;
	}
	c->ep = e->cur;
	c->attempts++;
	c->len = 0;
	snprintf(url, sizeof(url), "http://%s%s", e->eps[c->ep], c->path);
	curl_easy_reset(c->easy);
	curl_easy_setopt(c->easy, CURLOPT_URL, url);
	curl_easy_setopt(c->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(c->body));
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, e->headers);
	curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->easy, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, mc_etcd_on_body);
	curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_PRIVATE, (char *)c);
	if (c->watch) {
		curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
		curl_easy_setopt(c->easy, CURLOPT_TCP_KEEPALIVE, 1L);
		curl_easy_setopt(c->easy, CURLOPT_TCP_KEEPIDLE, 2L);
		curl_easy_setopt(c->easy, CURLOPT_TCP_KEEPINTVL, 1L);
	} else {
		/* One attempt may not take the whole time when another endpoint could answer. */
		int64_t one = e->neps > 1 ? c->total_ms / 2 : c->total_ms;

		if (one < 500)
			one = 500;
		if (one > left)
			one = left;
		curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, (long)one);
		curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)(one < 1000 ? one : 1000));
	}
	if (curl_multi_add_handle(e->multi, c->easy) != CURLM_OK) {
		mc_etcd_finish(c, -ENOMEM, NULL);
		return;
	}
	c->in_multi = 1;
}

static struct mc_etcd_call *mc_etcd_start(struct mc_etcd *e, const char *path, json_t *body,
					  int64_t timeout_ms, int watch, mc_etcd_fn fn, void *arg)
{
	struct mc_etcd_call *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->e = e;
	c->next = e->calls;
	if (e->calls)
		e->calls->prev = c;
	e->calls = c;
	c->watch = watch;
	snprintf(c->path, sizeof(c->path), "%s", path);
	c->body = json_dumps(body, JSON_COMPACT);
	c->easy = curl_easy_init();
	c->retry = evtimer_new(e->base, mc_etcd_on_retry, c);
	c->lines = event_new(e->base, -1, 0, mc_etcd_on_lines, c);
	if (c->body == NULL || c->easy == NULL || c->retry == NULL || c->lines == NULL) {
		mc_etcd_free_call(c);
		return NULL;
	}
	c->total_ms = timeout_ms > 0 ? timeout_ms : 1;
	c->deadline = watch ? 0 : mc_etcd_now() + c->total_ms;
	c->fn = fn;
	c->arg = arg;
	if (!watch && e->fault && mc_etcd_fault_fires(c->path)) {
		/* Ends from the loop's next turn: never inside the caller's own call. */
		struct timeval now = { 0, 0 };

		c->faulty = 1;
		evtimer_add(c->retry, &now);
		return c;
	}
	mc_etcd_attempt(c);
	return c;
}

struct mc_etcd_call *mc_etcd_post(struct mc_etcd *e, const char *path, json_t *body,
				  int64_t timeout_ms, mc_etcd_fn fn, void *arg)
{
	return mc_etcd_start(e, path, body, timeout_ms, 0, fn, arg);
}

struct mc_etcd_call *mc_etcd_watch(struct mc_etcd *e, json_t *create, mc_etcd_fn fn, void *arg)
{
	json_t *body = json_pack("{sO}", "create_request", create);
	struct mc_etcd_call *c;

	if (body == NULL)
		return NULL;
	c = mc_etcd_start(e, "/v3/watch", body, 0, 1, fn, arg);
	json_decref(body);
	return c;
}

const char *mc_etcd_endpoint(const struct mc_etcd *e)
{
	return e->eps[e->cur];
}

/* Split "etcd://h1:p1;h2:p2" (or ","-separated, with or without a scheme) into e->eps. */
static int mc_etcd_parse(struct mc_etcd *e, const char *list, char *err, size_t n)
{
	const char *p = strstr(list, "://") ? strstr(list, "://") + 3 : list;

	while (*p) {
		size_t len = strcspn(p, ",;");

		if (len > 0) {
			if (e->neps == MC_ETCD_MAX_EPS || len > 255 || memchr(p, '/', len) ||
			    memchr(p, ' ', len)) {
				snprintf(err, n, "etcd endpoints '%s': too many, or not host:port", list);
				return -EINVAL;
			}
			e->eps[e->neps] = strndup(p, len);
			if (e->eps[e->neps] == NULL)
				return -ENOMEM;
			e->neps++;
		}
		p += len;
		if (*p)
			p++;
	}
	if (e->neps == 0) {
		snprintf(err, n, "etcd endpoints '%s': none given", list);
		return -EINVAL;
	}
	return 0;
}

struct mc_etcd *mc_etcd_new(struct event_base *base, const char *endpoints, char *err, size_t n)
{
	static int curl_ready;
	struct mc_etcd *e;

	if (!curl_ready) {
		/* The process's first use, on its main thread (the master's loop). */
		curl_global_init(CURL_GLOBAL_DEFAULT);
		curl_ready = 1;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL) {
		snprintf(err, n, "out of memory");
		return NULL;
	}
	e->base = base;
	e->fault = mc_etcd_fault_install();
	if (mc_etcd_parse(e, endpoints, err, n))
		goto fail;
	e->multi = curl_multi_init();
	e->timer = evtimer_new(base, mc_etcd_on_timer, e);
	e->reap = event_new(base, -1, 0, mc_etcd_on_reap, e);
	e->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (e->headers)
		e->headers = curl_slist_append(e->headers, "Expect:");
	if (e->multi == NULL || e->timer == NULL || e->reap == NULL || e->headers == NULL) {
		snprintf(err, n, "out of memory");
		goto fail;
	}
	curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, mc_etcd_on_socket);
	curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
	curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, mc_etcd_on_timer_set);
	curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
	return e;
fail:
	mc_etcd_free(e);
	return NULL;
}

void mc_etcd_free(struct mc_etcd *e)
{
	int i;

	if (e == NULL)
		return;
	while (e->calls)
		mc_etcd_free_call(e->calls);
	if (e->multi)
		curl_multi_cleanup(e->multi);	/* frees the socket events through the callback */
	if (e->timer)
		event_free(e->timer);
	if (e->reap)
		event_free(e->reap);
	curl_slist_free_all(e->headers);
	for (i = 0; i < e->neps; i++)
		free(e->eps[i]);
	free(e);
}

#else /* !HAVE_CURL */

struct mc_etcd *mc_etcd_new(struct event_base *base, const char *endpoints, char *err, size_t n)
{
	(void)base;
	(void)endpoints;
	snprintf(err, n, "this build has no libcurl, which etcd needs (configure --with-curl)");
	return NULL;
}

void mc_etcd_free(struct mc_etcd *e)
{
	(void)e;
}

struct mc_etcd_call *mc_etcd_post(struct mc_etcd *e, const char *path, json_t *body,
				  int64_t timeout_ms, mc_etcd_fn fn, void *arg)
{
	(void)e, (void)path, (void)body, (void)timeout_ms, (void)fn, (void)arg;
	return NULL;
}

struct mc_etcd_call *mc_etcd_watch(struct mc_etcd *e, json_t *create, mc_etcd_fn fn, void *arg)
{
	(void)e, (void)create, (void)fn, (void)arg;
	return NULL;
}

void mc_etcd_cancel(struct mc_etcd_call *c)
{
	(void)c;
}

const char *mc_etcd_endpoint(const struct mc_etcd *e)
{
	(void)e;
	return "";
}

#endif /* HAVE_CURL */

json_t *mc_etcd_b64(const void *s, size_t n)
{
	char *b = mc_base64_encode(s, n);
	json_t *j;

	if (b == NULL)
		return NULL;
	j = json_string(b);
	free(b);
	return j;
}

json_t *mc_etcd_b64s(const char *s)
{
	return mc_etcd_b64(s, strlen(s));
}

json_t *mc_etcd_num(int64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", (long long)v);
	return json_string(buf);
}

int64_t mc_etcd_i64(const json_t *obj, const char *name)
{
	json_t *v = json_object_get(obj, name);
	const char *s;
	char *end;
	long long x;

	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (!json_is_string(v))
		return 0;
	s = json_string_value(v);
	x = strtoll(s, &end, 10);
	return (*s && *end == '\0') ? (int64_t)x : 0;
}

char *mc_etcd_bytes(const json_t *obj, const char *name, size_t *len)
{
	json_t *v = json_object_get(obj, name);

	*len = 0;
	if (v == NULL)		/* an empty value is left out by the gateway */
		return calloc(1, 1);
	if (!json_is_string(v))
		return NULL;
	return mc_base64_decode(json_string_value(v), len);
}

void mc_etcd_prefix_end(const char *prefix, char *out, size_t n)
{
	size_t len = strlen(prefix);

	snprintf(out, n, "%s", prefix);
	if (len == 0 || len >= n)
		return;
	while (len > 0) {
		unsigned char c = (unsigned char)out[len - 1];

		if (c < 0xff) {
			out[len - 1] = (char)(c + 1);
			out[len] = '\0';
			return;
		}
		len--;
	}
	out[0] = '\0';
}
