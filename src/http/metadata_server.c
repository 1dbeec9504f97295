/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP metadata key-value service (see metadata_server.h).  Keys and values live in a chained
 * hash table that doubles when it is 75% full; values are stored verbatim.  Every request comes
 * from the network: key and value sizes and the number of keys are bounded, and a refused
 * request gets a 4xx/5xx reply and a log line naming the peer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <stdio.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "common/log.h"
#include "http/metadata_server.h"

struct mc_meta_entry {
	struct mc_meta_entry *next;
	uint64_t hash;
	size_t len;
	char *value;
	char key[];
};

struct mc_meta_server {
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	struct mc_meta_server_opts opts;
	struct mc_meta_entry **buckets;
	size_t nbuckets, count;
	uint16_t port;
};

static uint64_t mc_meta_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h ^ (h >> 31);
}

static struct mc_meta_entry **mc_meta_slot(struct mc_meta_server *s, const char *key, uint64_t h)
{
	struct mc_meta_entry **pp = &s->buckets[h & (s->nbuckets - 1)];

	while (*pp && ((*pp)->hash != h || strcmp((*pp)->key, key)))
		pp = &(*pp)->next;
	return pp;
}

static int mc_meta_grow(struct mc_meta_server *s)
{
	size_t n = s->nbuckets * 2, i;
	struct mc_meta_entry **b = calloc(n, sizeof(*b));

	if (b == NULL)
		return -ENOMEM;
	for (i = 0; i < s->nbuckets; i++) {
		struct mc_meta_entry *e = s->buckets[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = n;
	return 0;
}

const char *mc_meta_server_get(struct mc_meta_server *s, const char *key, size_t *len)
{
	struct mc_meta_entry *e = *mc_meta_slot(s, key, mc_meta_hash(key));

	if (e == NULL)
		return NULL;
	*len = e->len;
	return e->value;
}

int mc_meta_server_delete(struct mc_meta_server *s, const char *key)
{
	struct mc_meta_entry **pp = mc_meta_slot(s, key, mc_meta_hash(key)), *e = *pp;

	if (e == NULL)
		return -ENOENT;
	*pp = e->next;
	free(e->value);
	free(e);
	s->count--;
	return 0;
}

size_t mc_meta_server_count(const struct mc_meta_server *s)
{
	return s->count;
}

/* Insert or replace.  Returns 0, -ENOSPC (too many keys) or -ENOMEM. */
static int mc_meta_put(struct mc_meta_server *s, const char *key, const void *v, size_t len)
{
	uint64_t h = mc_meta_hash(key);
	struct mc_meta_entry **pp = mc_meta_slot(s, key, h), *e = *pp;
	char *copy = malloc(len ? len : 1);

	if (copy == NULL)
		return -ENOMEM;
	memcpy(copy, v, len);
	if (e) {
		free(e->value);
		e->value = copy;
		e->len = len;
		return 0;
	}
	if (s->count >= s->opts.max_keys) {
		free(copy);
		return -ENOSPC;
	}
	e = malloc(sizeof(*e) + strlen(key) + 1);
	if (e == NULL) {
		free(copy);
		return -ENOMEM;
	}
	strcpy(e->key, key);
	e->hash = h;
	e->value = copy;
	e->len = len;
	e->next = NULL;
	*pp = e;
	s->count++;
	if (s->count * 4 > s->nbuckets * 3)
		mc_meta_grow(s);
	return 0;
}

static void mc_meta_reply(struct evhttp_request *req, int code, const char *reason,
			  const char *type, const void *body, size_t len)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evbuffer_add(b, body, len);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
	evhttp_send_reply(req, code, reason, b);
	evbuffer_free(b);
}

static void mc_meta_text(struct evhttp_request *req, int code, const char *text)
{
	static const char *const reasons[] = { [200 - 200] = "OK" };
	const char *reason = code == 200   ? reasons[0]
			     : code == 400 ? "Bad Request"
			     : code == 404 ? "Not Found"
			     : code == 405 ? "Method Not Allowed"
			     : code == 413 ? "Payload Too Large"
					   : "Service Unavailable";

	mc_meta_reply(req, code, reason, "text/plain", text, strlen(text));
}

static const char *mc_meta_peer(struct evhttp_request *req, char *buf, size_t n)
{
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	const char *addr = NULL;
	uint16_t port = 0;

	if (c)
		evhttp_connection_get_peer(c, (char **)&addr, &port);
	snprintf(buf, n, "%s:%u", addr ? addr : "?", port);
	return buf;
}

/* The decoded "key" query parameter, or NULL (missing, empty, repeated). */
static const char *mc_meta_key(struct evhttp_request *req, struct evkeyvalq *q)
{
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct evkeyval *kv;
	const char *key = NULL;
	int n = 0;

	if (query == NULL || evhttp_parse_query_str(query, q) != 0)
		return NULL;
	TAILQ_FOREACH(kv, q, next)
		if (!strcmp(kv->key, "key")) {
			key = kv->value;
			n++;
		}
	return n == 1 && key && *key ? key : NULL;
}

static void mc_meta_on_metadata(struct evhttp_request *req, void *arg)
{
	struct mc_meta_server *s = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	struct evkeyvalq q;
	const char *key, *val;
	char peer[80];
	size_t len;

	TAILQ_INIT(&q);
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_PUT && cmd != EVHTTP_REQ_DELETE &&
	    cmd != EVHTTP_REQ_POST) {
		mc_meta_text(req, 405, "Method not allowed");
		goto out;
	}
	key = mc_meta_key(req, &q);
	if (key == NULL) {
		mc_meta_text(req, 400, "Missing key parameter");
		goto out;
	}
	if (strlen(key) > s->opts.max_key_bytes) {
		mc_log_warn("metadata: key of %zu bytes from %s refused", strlen(key),
			    mc_meta_peer(req, peer, sizeof(peer)));
		mc_meta_text(req, 400, "Key too long");
		goto out;
	}
	if (cmd == EVHTTP_REQ_GET) {
		val = mc_meta_server_get(s, key, &len);
		if (val == NULL)
			mc_meta_text(req, 404, "metadata not found");
		else
			mc_meta_reply(req, 200, "OK", "application/json", val, len);
	} else if (cmd == EVHTTP_REQ_DELETE) {
		if (mc_meta_server_delete(s, key))
			mc_meta_text(req, 404, "metadata not found");
		else
			mc_meta_text(req, 200, "metadata deleted");
		mc_log_debug("metadata: delete %s", key);
	} else {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t n = evbuffer_get_length(in);
		const unsigned char *body = evbuffer_pullup(in, -1);
		int rc;

		if (n > s->opts.max_value_bytes) {
			mc_meta_text(req, 413, "Value too large");
			goto out;
		}
		val = mc_meta_server_get(s, key, &len);
		if (val && strstr(key, "rpc_meta")) {
			if (len == n && !memcmp(val, body, n))
				mc_meta_text(req, 200, "metadata unchanged");
			else
				mc_meta_text(req, 400, "Duplicate rpc_meta key not allowed");
			goto out;
		}
		rc = mc_meta_put(s, key, body ? (const void *)body : "", n);
		if (rc == -ENOSPC) {
			mc_log_warn("metadata: key limit (%zu) reached; PUT %s from %s refused",
				    s->opts.max_keys, key, mc_meta_peer(req, peer, sizeof(peer)));
			mc_meta_text(req, 503, "Too many keys");
		} else if (rc) {
			mc_meta_text(req, 503, "Out of memory");
		} else {
			mc_meta_text(req, 200, "metadata updated");
			mc_log_debug("metadata: put %s (%zu bytes)", key, n);
		}
	}
out:
	evhttp_clear_headers(&q);
}

static void mc_meta_on_health(struct evhttp_request *req, void *arg)
{
	(void)arg;
	mc_meta_text(req, 200, "OK");
}

static void mc_meta_on_other(struct evhttp_request *req, void *arg)
{
	(void)arg;
	mc_meta_text(req, 404, "Not found");
}

struct mc_meta_server *mc_meta_server_new(struct event_base *base, const char *host,
					  uint16_t port, const struct mc_meta_server_opts *opts,
					  int *err)
{
	struct mc_meta_server *s = calloc(1, sizeof(*s));
	evutil_socket_t fd;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (s == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	s->opts.max_key_bytes = opts && opts->max_key_bytes ? opts->max_key_bytes : 1024;
	s->opts.max_value_bytes = opts && opts->max_value_bytes ? opts->max_value_bytes : 16u << 20;
	s->opts.max_keys = opts && opts->max_keys ? opts->max_keys : 1000000;
	s->nbuckets = 1024;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	s->http = evhttp_new(base);
	if (s->buckets == NULL || s->http == NULL) {
		*err = -ENOMEM;
		goto fail;
	}
	evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						    EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(s->http, 16384 + s->opts.max_key_bytes * 3);
	evhttp_set_max_body_size(s->http, (ev_ssize_t)s->opts.max_value_bytes);
	evhttp_set_cb(s->http, "/metadata", mc_meta_on_metadata, s);
	evhttp_set_cb(s->http, "/health", mc_meta_on_health, s);
	evhttp_set_gencb(s->http, mc_meta_on_other, s);
	s->sock = evhttp_bind_socket_with_handle(s->http, host, port);
	if (s->sock == NULL) {
		*err = errno ? -errno : -EADDRINUSE;
		goto fail;
	}
	fd = evhttp_bound_socket_get_fd(s->sock);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return s;
fail:
	if (s->http)
		evhttp_free(s->http);
	free(s->buckets);
	free(s);
	return NULL;
}

uint16_t mc_meta_server_port(const struct mc_meta_server *s)
{
	return s->port;
}

void mc_meta_server_free(struct mc_meta_server *s)
{
	size_t i;

	if (s == NULL)
		return;
	evhttp_free(s->http);
	for (i = 0; i < s->nbuckets; i++) {
		struct mc_meta_entry *e = s->buckets[i], *n;

		for (; e; e = n) {
			n = e->next;
			free(e->value);
			free(e);
		}
	}
	free(s->buckets);
	free(s);
}
