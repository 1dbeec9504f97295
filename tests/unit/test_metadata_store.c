/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the key-value table of the HTTP metadata service (src/http/metadata_server.c),
 * through its in-process API: exact results for put/get/delete and the bounds, a randomized run
 * against a shadow array across several table growths, and one HTTP round trip showing that a
 * URL-escaped key sent by a client is the decoded key the master deletes in process.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/log.h"
#include "http/metadata_server.h"
#include "tap.h"

#define NKEYS 20000

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static int value_is(struct mc_meta_server *s, const char *key, const void *v, size_t n)
{
	size_t len = (size_t)-1;
	const char *got = mc_meta_server_get(s, key, &len);

	return got && len == n && !memcmp(got, v, n) && got[n] == '\0';
}

static void test_basics(struct mc_meta_server *s)
{
	static const char bin[] = { 'a', '\0', '\r', '\n', (char)0xff, 'z' };
	char big[64];
	size_t len = 42;

	ok(mc_meta_server_port(s) != 0, "port 0 becomes a real port (%u)", mc_meta_server_port(s));
	is(mc_meta_server_count(s), 0, "a new server is empty");
	ok(mc_meta_server_get(s, "k", &len) == NULL && len == 42, "get of a missing key is NULL");
	ok(mc_meta_server_put(s, "k", "{\"a\":1}", 7) == 0 && value_is(s, "k", "{\"a\":1}", 7),
	   "put then get returns the value, NUL-terminated");
	ok(mc_meta_server_put(s, "k", "xy", 2) == 0 && value_is(s, "k", "xy", 2) &&
	   mc_meta_server_count(s) == 1, "put replaces without adding a key");
	ok(mc_meta_server_put(s, "bin", bin, sizeof(bin)) == 0 &&
	   value_is(s, "bin", bin, sizeof(bin)), "binary values with NUL bytes are kept verbatim");
	ok(mc_meta_server_put(s, "empty", "", 0) == 0 && value_is(s, "empty", "", 0),
	   "an empty value is a value");
	ok(mc_meta_server_put(s, "", "v", 1) == -EINVAL, "an empty key is refused");
	memset(big, 'k', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ok(mc_meta_server_put(s, big, "v", 1) == -E2BIG, "a key over max_key_bytes is refused");
	big[32] = '\0';
	ok(mc_meta_server_put(s, big, "v", 1) == 0, "a key of exactly max_key_bytes is stored");
	ok(mc_meta_server_put(s, "v", big, 33) == -E2BIG && mc_meta_server_put(s, "v", big, 32) == 0,
	   "values: max_value_bytes is stored, one more byte is refused");
	ok(mc_meta_server_delete(s, "k") == 0 && mc_meta_server_get(s, "k", &len) == NULL,
	   "delete removes");
	ok(mc_meta_server_delete(s, "k") == -ENOENT, "delete of a missing key is -ENOENT");
	ok(mc_meta_server_delete(s, "bin") == 0 && mc_meta_server_delete(s, "empty") == 0 &&
	   mc_meta_server_delete(s, big) == 0 && mc_meta_server_delete(s, "v") == 0 &&
	   mc_meta_server_count(s) == 0, "count follows puts and deletes");
}

/* Random puts, replacements and deletes over NKEYS keys, checked against a shadow array. */
static void test_random(struct mc_meta_server *s)
{
	static unsigned shadow[NKEYS];	/* 0: absent, else the value's number */
	unsigned i, op, k, present = 0, bad = 0;
	char key[64], val[32];
	size_t len;

	for (op = 0; op < 200000; op++) {
		k = (unsigned)(rng() % NKEYS);
		snprintf(key, sizeof(key), "mooncake/ram/10.0.%u.%u:%u", k / 256, k % 256, k);
		switch (rng() % 4) {
		case 0:
		case 1:
			snprintf(val, sizeof(val), "{\"v\":%u}", op + 1);
			if (mc_meta_server_put(s, key, val, strlen(val)) != 0)
				bad++;
			present += shadow[k] == 0;
			shadow[k] = op + 1;
			break;
		case 2:
			if (mc_meta_server_delete(s, key) != (shadow[k] ? 0 : -ENOENT))
				bad++;
			present -= shadow[k] != 0;
			shadow[k] = 0;
			break;
		default:
			snprintf(val, sizeof(val), "{\"v\":%u}", shadow[k]);
			if (shadow[k] ? !value_is(s, key, val, strlen(val))
				      : mc_meta_server_get(s, key, &len) != NULL)
				bad++;
		}
	}
	is(bad, 0, "200000 random operations agree with the shadow (%u mismatches)", bad);
	is(mc_meta_server_count(s), present, "count %zu matches the shadow's %u",
	   mc_meta_server_count(s), present);
	for (i = 0, bad = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "mooncake/ram/10.0.%u.%u:%u", i / 256, i % 256, i);
		snprintf(val, sizeof(val), "{\"v\":%u}", shadow[i]);
		if (shadow[i] ? !value_is(s, key, val, strlen(val))
			      : mc_meta_server_get(s, key, &len) != NULL)
			bad++;
	}
	is(bad, 0, "every key has its last value after the run (%u wrong)", bad);
}

static void test_key_limit(struct event_base *base)
{
	struct mc_meta_server_opts o = { .max_keys = 3000 };
	struct mc_meta_server *s;
	char key[32];
	int err = 0, rc = 0;
	unsigned i;

	s = mc_meta_server_new(base, "127.0.0.1", 0, &o, &err);
	ok(s != NULL, "a second server binds (%d)", err);
	if (s == NULL)
		return;
	for (i = 0; i < 3000 && rc == 0; i++) {
		snprintf(key, sizeof(key), "k%u", i);
		rc = mc_meta_server_put(s, key, "v", 1);
	}
	ok(rc == 0 && mc_meta_server_count(s) == 3000, "max_keys keys are stored");
	ok(mc_meta_server_put(s, "one-more", "v", 1) == -ENOSPC, "a new key past max_keys: -ENOSPC");
	ok(mc_meta_server_put(s, "k7", "w", 1) == 0 && value_is(s, "k7", "w", 1),
	   "replacing a key at the limit still works");
	ok(mc_meta_server_delete(s, "k7") == 0 && mc_meta_server_put(s, "one-more", "v", 1) == 0,
	   "a delete makes room for a new key");
	mc_meta_server_free(s);
}

struct http_result {
	struct event_base *base;
	int code;
	char body[64];
};

static void on_response(struct evhttp_request *req, void *arg)
{
	struct http_result *r = arg;
	ev_ssize_t n;

	if (req) {
		r->code = evhttp_request_get_response_code(req);
		n = evbuffer_copyout(evhttp_request_get_input_buffer(req), r->body,
				     sizeof(r->body) - 1);
		r->body[n > 0 ? n : 0] = '\0';
	}
	event_base_loopexit(r->base, NULL);
}

/* One HTTP request to the server on base; returns the status (0: no answer). */
static int http(struct event_base *base, uint16_t port, enum evhttp_cmd_type cmd,
		const char *uri, const char *body, struct http_result *r)
{
	struct evhttp_connection *c = evhttp_connection_base_new(base, NULL, "127.0.0.1", port);
	struct evhttp_request *req;

	memset(r, 0, sizeof(*r));
	r->base = base;
	req = evhttp_request_new(on_response, r);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "127.0.0.1");
	if (body)
		evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
	evhttp_make_request(c, req, cmd, uri);
	event_base_dispatch(base);
	evhttp_connection_free(c);
	return r->code;
}

static void test_http(struct event_base *base, struct mc_meta_server *s)
{
	uint16_t p = mc_meta_server_port(s);
	struct http_result r;

	ok(http(base, p, EVHTTP_REQ_PUT, "/metadata?key=mooncake%2Fram%2F10.0.0.1%3A12345", "{}",
		&r) == 200 && !strcmp(r.body, "metadata updated"), "HTTP PUT of an escaped key");
	ok(value_is(s, "mooncake/ram/10.0.0.1:12345", "{}", 2),
	   "the store holds the decoded key");
	ok(mc_meta_server_delete(s, "mooncake/ram/10.0.0.1:12345") == 0 &&
	   http(base, p, EVHTTP_REQ_GET, "/metadata?key=mooncake/ram/10.0.0.1:12345", NULL, &r) ==
	   404 && !strcmp(r.body, "metadata not found"),
	   "an in-process delete is seen over HTTP");
	ok(http(base, p, EVHTTP_REQ_GET, "/metadata?key=a&key=b", NULL, &r) == 400,
	   "a repeated key parameter is 400");
	ok(http(base, p, EVHTTP_REQ_GET, "/metadata?key=a%00b", NULL, &r) == 400,
	   "a key with a NUL byte is 400");
}

int main(void)
{
	struct mc_meta_server_opts o = { .max_key_bytes = 32, .max_value_bytes = 32 };
	struct event_base *base;
	struct mc_meta_server *s;
	int err = 0;

	mc_log_set_level(MC_LOG_ERR);
	base = event_base_new();
	if (base == NULL)
		return 99;
	s = mc_meta_server_new(base, "127.0.0.1", 0, &o, &err);
	if (s == NULL) {
		printf("1..0 # SKIP cannot listen on 127.0.0.1: %s\n", strerror(-err));
		event_base_free(base);
		return 77;
	}
	test_basics(s);
	mc_meta_server_free(s);
	o.max_key_bytes = 0;
	o.max_value_bytes = 0;
	s = mc_meta_server_new(base, "127.0.0.1", 0, &o, &err);
	ok(s != NULL, "defaults for zero bounds");
	if (s) {
		test_random(s);
		test_http(base, s);
	}
	mc_meta_server_free(s);
	test_key_limit(base);
	mc_meta_server_free(NULL);
	event_base_free(base);
	return tap_done();
}
