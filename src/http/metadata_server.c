/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP metadata key-value service (protocol in metadata_server.h).
 *
 * Storage is a chained hash table of power-of-two size that doubles when it is 75% full.  Keys
 * come from the network, so the hash is SipHash-1-3 under a per-server random key: nobody can
 * aim a flood of requests at one chain.  Each entry owns its key and a separate value buffer
 * (value bytes verbatim plus a NUL that is not part of the value).  Invariants: count equals the
 * number of entries; no two entries have the same key; no key is empty or holds a NUL byte.
 *
 * Everything that arrives is bounded (key length, body size, header size, number of keys) and a
 * refused request gets a 4xx/5xx answer and a warning naming the peer; the server keeps serving.
 * libevent answers some bad requests itself without calling us (a body over the limit, request
 * line or headers over the limit, unparsable requests); mc_meta_on_output() notices those answers on the connection's
 * output buffer so that they are logged too.
 *
 * Runs on the thread of the event_base it was created on.
 */
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/util.h>

#include "common/log.h"
#include "reactor/conn_limit.h"
#include "reactor/http_guard.h"
#include "reactor/procmem.h"
#include "common/auth.h"
#include "common/meta_auth.h"
#include "http/http_auth.h"
#include "http/metadata_server.h"
#include "reactor/tls.h"

#define MC_META_DEF_KEY_BYTES 1024
#define MC_META_DEF_VALUE_BYTES (1u << 20)
#define MC_META_DEF_KEYS 65536
#define MC_META_DEF_TOTAL_BYTES (1ull << 30)
#define MC_META_DEF_PUTS 8
#define MC_META_MIN_BUCKETS 1024

struct mc_meta_entry {
	struct mc_meta_entry *next;	/* bucket chain */
	uint64_t hash;
	char *value;			/* len bytes + NUL */
	size_t len;
	size_t klen;
	char key[];			/* klen bytes + NUL */
};

struct mc_meta_server {
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	struct mc_meta_server_opts opts;
	uint64_t seed[2];		/* SipHash key */
	struct mc_meta_entry **buckets;
	size_t nbuckets;		/* power of two */
	size_t count;
	size_t total;			/* bytes of all values */
	char *token;			/* required bearer token, or NULL */
	uint16_t port;
	struct mc_http_guard *guard;	/* connection limits */
};

/*
 * Set while we hand a reply to libevent, so that mc_meta_on_output() can tell our answers from
 * the ones libevent sends on its own: evhttp_send_reply() writes the status line synchronously.
 * Per thread because each loop (and so each server) runs on one thread.
 */
static _Thread_local int mc_meta_replying;

/* ---- storage ------------------------------------------------------------------------------ */

#define MC_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define MC_SIPROUND                                                            \
	do {                                                                   \
		v0 += v1; v1 = MC_ROTL(v1, 13); v1 ^= v0; v0 = MC_ROTL(v0, 32); \
		v2 += v3; v3 = MC_ROTL(v3, 16); v3 ^= v2;                      \
		v0 += v3; v3 = MC_ROTL(v3, 21); v3 ^= v0;                      \
		v2 += v1; v1 = MC_ROTL(v1, 17); v1 ^= v2; v2 = MC_ROTL(v2, 32); \
	} while (0)

/* SipHash-1-3 of data[0..len) under key k. */
static uint64_t mc_meta_hash(const uint64_t k[2], const char *data, size_t len)
{
	uint64_t v0 = 0x736f6d6570736575ull ^ k[0], v1 = 0x646f72616e646f6dull ^ k[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ k[0], v3 = 0x7465646279746573ull ^ k[1];
	uint64_t m, last = (uint64_t)len << 56;
	size_t i, j;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&m, data + i, 8);
		m = le64toh(m);
		v3 ^= m;
		MC_SIPROUND;
		v0 ^= m;
	}
	for (j = 0; i + j < len; j++)
		last |= (uint64_t)(unsigned char)data[i + j] << (8 * j);
	v3 ^= last;
	MC_SIPROUND;
	v0 ^= last;
	v2 ^= 0xff;
	MC_SIPROUND;
	MC_SIPROUND;
	MC_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* The link that points at key's entry, or at the NULL ending its chain when absent. */
static struct mc_meta_entry **mc_meta_find(struct mc_meta_server *s, const char *key, size_t klen,
					   uint64_t h)
{
	struct mc_meta_entry **pp = &s->buckets[h & (s->nbuckets - 1)];

	while (*pp && ((*pp)->hash != h || (*pp)->klen != klen || memcmp((*pp)->key, key, klen)))
		pp = &(*pp)->next;
	return pp;
}

/* Double the bucket array.  On -ENOMEM the table stays as it is, only with longer chains. */
static int mc_meta_grow(struct mc_meta_server *s)
{
	size_t n = s->nbuckets * 2, i;
	struct mc_meta_entry **b = calloc(n, sizeof(*b)), *e, *next;

	if (b == NULL)
		return -ENOMEM;
	for (i = 0; i < s->nbuckets; i++) {
		for (e = s->buckets[i]; e; e = next) {
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

/*
 * Store value (len bytes, malloc'ed with a NUL at value[len]) under key[0..klen).  Takes
 * ownership of value on success only.  Returns 0, -ENOSPC (a new key past max_keys), -EDQUOT
 * (the values would pass max_total_bytes) or -ENOMEM.
 */
static int mc_meta_store(struct mc_meta_server *s, const char *key, size_t klen, char *value,
			 size_t len)
{
	uint64_t h = mc_meta_hash(s->seed, key, klen);
	struct mc_meta_entry **pp = mc_meta_find(s, key, klen, h), *e = *pp;

	if (s->total - (e ? e->len : 0) + len > s->opts.max_total_bytes)
		return -EDQUOT;
	if (e) {
		s->total = s->total - e->len + len;
		free(e->value);
		e->value = value;
		e->len = len;
		return 0;
	}
	if (s->count >= s->opts.max_keys)
		return -ENOSPC;
	e = malloc(sizeof(*e) + klen + 1);
	if (e == NULL)
		return -ENOMEM;
	memcpy(e->key, key, klen);
	e->key[klen] = '\0';
	e->klen = klen;
	e->hash = h;
	e->value = value;
	e->len = len;
	e->next = NULL;
	*pp = e;
	s->count++;
	s->total += len;
	if (s->count > s->nbuckets / 4 * 3)
		(void)mc_meta_grow(s);
	return 0;
}

static const struct mc_meta_entry *mc_meta_lookup(struct mc_meta_server *s, const char *key,
						  size_t klen)
{
	return *mc_meta_find(s, key, klen, mc_meta_hash(s->seed, key, klen));
}

static int mc_meta_remove(struct mc_meta_server *s, const char *key, size_t klen)
{
	struct mc_meta_entry **pp = mc_meta_find(s, key, klen, mc_meta_hash(s->seed, key, klen));
	struct mc_meta_entry *e = *pp;

	if (e == NULL)
		return -ENOENT;
	*pp = e->next;
	s->total -= e->len;
	free(e->value);
	free(e);
	s->count--;
	return 0;
}

const char *mc_meta_server_get(struct mc_meta_server *s, const char *key, size_t *len)
{
	const struct mc_meta_entry *e = mc_meta_lookup(s, key, strlen(key));

	if (e == NULL)
		return NULL;
	*len = e->len;
	return e->value;
}

int mc_meta_server_put(struct mc_meta_server *s, const char *key, const void *value, size_t len)
{
	size_t klen = strlen(key);
	char *copy;
	int rc;

	if (klen == 0)
		return -EINVAL;
	if (klen > s->opts.max_key_bytes || len > s->opts.max_value_bytes)
		return -E2BIG;
	copy = malloc(len + 1);
	if (copy == NULL)
		return -ENOMEM;
	if (len)
		memcpy(copy, value, len);
	copy[len] = '\0';
	rc = mc_meta_store(s, key, klen, copy, len);
	if (rc)
		free(copy);
	return rc;
}

int mc_meta_server_delete(struct mc_meta_server *s, const char *key)
{
	return mc_meta_remove(s, key, strlen(key));
}

size_t mc_meta_server_count(const struct mc_meta_server *s)
{
	return s->count;
}

/* ---- replies and log lines ---------------------------------------------------------------- */

/* "a.b.c.d:port" or "[v6]:port" of the socket's peer, "?" when unknown. */
static const char *mc_meta_fd_peer(evutil_socket_t fd, char *buf, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 ||
	    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), serv, sizeof(serv),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(buf, n, "?");
	else
		snprintf(buf, n, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
	return buf;
}

static const char *mc_meta_peer(struct evhttp_request *req, char *buf, size_t n)
{
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;

	return mc_meta_fd_peer(bev ? bufferevent_getfd(bev) : -1, buf, n);
}

/* s[0..len) for a log line: printable ASCII as is, other bytes as \xNN, cut with "...". */
static const char *mc_meta_printable(const char *s, size_t len, char *buf, size_t n)
{
	size_t i, o = 0;

	for (i = 0; i < len && o + 8 < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
	}
	if (i < len)
		o += (size_t)snprintf(buf + o, n - o, "...");
	buf[o] = '\0';
	return buf;
}

static const char *mc_meta_method(enum evhttp_cmd_type c)
{
	switch (c) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	case EVHTTP_REQ_TRACE:
		return "TRACE";
	case EVHTTP_REQ_CONNECT:
		return "CONNECT";
	}
	return "?";
}

static void mc_meta_reply(struct evhttp_request *req, int code, const char *type,
			  const void *body, size_t len)
{
	if (evbuffer_add(evhttp_request_get_output_buffer(req), body, len) != 0) {
		code = 500;
		type = "text/plain";
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
	mc_meta_replying = 1;
	evhttp_send_reply(req, code, NULL, NULL);
	mc_meta_replying = 0;
}

static void mc_meta_text(struct evhttp_request *req, int code, const char *text)
{
	mc_meta_reply(req, code, "text/plain", text, strlen(text));
}

/* Answer code/body and log a warning naming the request, the peer and why. */
static void mc_meta_refuse(struct evhttp_request *req, int code, const char *body,
			   const char *key, size_t klen, const char *why)
{
	char peer[80], what[256];
	const char *uri = evhttp_request_get_uri(req);

	if (key)
		mc_meta_printable(key, klen, what, sizeof(what));
	else
		mc_meta_printable(uri ? uri : "", uri ? strlen(uri) : 0, what, sizeof(what));
	mc_log_warn("metadata: %s %s from %s refused with %d: %s",
		    mc_meta_method(evhttp_request_get_command(req)), what,
		    mc_meta_peer(req, peer, sizeof(peer)), code, why ? why : body);
	mc_meta_text(req, code, body);
}

static void mc_meta_log_debug(struct evhttp_request *req, const char *what, const char *key,
			      size_t klen, size_t vlen)
{
	char peer[80], k[256];

	if (!mc_log_enabled(MC_LOG_DEBUG))
		return;
	mc_log_debug("metadata: %s %s (%zu bytes) from %s", what, mc_meta_printable(key, klen, k,
		     sizeof(k)), vlen, mc_meta_peer(req, peer, sizeof(peer)));
}

/* ---- /metadata ---------------------------------------------------------------------------- */

/*
 * The one "key" parameter of the query, URL-decoded ('+' as a space, as aiohttp does), as a
 * malloc'ed string the caller frees.  Returns 0, or -1 after answering the request.
 */
static int mc_meta_query_key(struct mc_meta_server *s, struct evhttp_request *req, char **out,
			     size_t *outlen)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *q = u ? evhttp_uri_get_query(u) : NULL;
	char *copy = NULL, *rest, *part, *eq, *name, *key = NULL;
	size_t nlen, klen = 0;
	int seen = 0, rc = -1;
	char why[64];

	if (q && (copy = strdup(q)) == NULL) {
		mc_meta_refuse(req, 503, "Out of memory", NULL, 0, NULL);
		return -1;
	}
	for (rest = copy; rest && (part = strsep(&rest, "&")) != NULL;) {
		eq = strchr(part, '=');
		if (eq)
			*eq++ = '\0';
		name = evhttp_uridecode(part, 1, &nlen);
		if (name && nlen == 3 && !memcmp(name, "key", 3)) {
			seen++;
			free(key);
			key = evhttp_uridecode(eq ? eq : "", 1, &klen);
		}
		free(name);
	}
	if (seen > 1) {
		mc_meta_refuse(req, 400, "Repeated key parameter", NULL, 0, NULL);
	} else if (key == NULL || klen == 0) {
		mc_meta_refuse(req, 400, "Missing key parameter", NULL, 0, NULL);
	} else if (memchr(key, '\0', klen)) {
		mc_meta_refuse(req, 400, "Invalid key", key, klen, "key holds a NUL byte");
	} else if (klen > s->opts.max_key_bytes) {
		snprintf(why, sizeof(why), "key of %zu bytes, limit %zu", klen,
			 s->opts.max_key_bytes);
		mc_meta_refuse(req, 400, "Key too long", key, klen, why);
	} else {
		*out = key;
		*outlen = klen;
		key = NULL;
		rc = 0;
	}
	free(key);
	free(copy);
	return rc;
}

static void mc_meta_do_get(struct mc_meta_server *s, struct evhttp_request *req,
			   const char *key, size_t klen)
{
	const struct mc_meta_entry *e = mc_meta_lookup(s, key, klen);

	if (e == NULL) {
		mc_meta_log_debug(req, "GET (not found)", key, klen, 0);
		mc_meta_text(req, 404, "metadata not found");
		return;
	}
	mc_meta_reply(req, 200, "application/json", e->value, e->len);
}

static void mc_meta_do_delete(struct mc_meta_server *s, struct evhttp_request *req,
			      const char *key, size_t klen)
{
	if (mc_meta_remove(s, key, klen) != 0) {
		mc_meta_log_debug(req, "DELETE (not found)", key, klen, 0);
		mc_meta_text(req, 404, "metadata not found");
		return;
	}
	mc_meta_log_debug(req, "DELETE", key, klen, 0);
	mc_meta_text(req, 200, "metadata deleted");
}

static void mc_meta_do_put(struct mc_meta_server *s, struct evhttp_request *req,
			   const char *key, size_t klen)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	const struct mc_meta_entry *old;
	char *value, why[96];
	int rc;

	/* libevent already refuses bodies over the limit; this is the last line of defence. */
	if (n > s->opts.max_value_bytes) {
		snprintf(why, sizeof(why), "value of %zu bytes, limit %zu", n,
			 s->opts.max_value_bytes);
		mc_meta_refuse(req, 413, "Value too large", key, klen, why);
		return;
	}
	value = malloc(n + 1);
	if (value == NULL) {
		mc_meta_refuse(req, 503, "Out of memory", key, klen, NULL);
		return;
	}
	if (evbuffer_copyout(in, value, n) != (ev_ssize_t)n) {
		free(value);
		mc_meta_refuse(req, 500, "Cannot read the body", key, klen, NULL);
		return;
	}
	value[n] = '\0';
	/* A transfer engine publishes its rpc_meta once; a second, different one means two engines
	 * claim the same name.  Upstream's C++ server tolerates an identical re-publish. */
	old = mc_meta_lookup(s, key, klen);
	if (old && memmem(key, klen, "rpc_meta", 8)) {
		if (old->len == n && !memcmp(old->value, value, n)) {
			mc_meta_log_debug(req, "PUT (unchanged)", key, klen, n);
			mc_meta_text(req, 200, "metadata unchanged");
		} else {
			mc_meta_refuse(req, 400, "Duplicate rpc_meta key not allowed", key, klen,
				       NULL);
		}
		free(value);
		return;
	}
	rc = mc_meta_store(s, key, klen, value, n);
	if (rc == -ENOSPC || rc == -EDQUOT) {
		free(value);
		snprintf(why, sizeof(why), rc == -ENOSPC ? "%zu keys stored, limit %zu"
							 : "%zu value bytes stored, limit %zu",
			 rc == -ENOSPC ? s->count : s->total,
			 rc == -ENOSPC ? s->opts.max_keys : s->opts.max_total_bytes);
		mc_meta_refuse(req, 507, rc == -ENOSPC ? "metadata key budget exhausted"
						       : "metadata byte budget exhausted",
			       key, klen, why);
	} else if (rc != 0) {
		free(value);
		mc_meta_refuse(req, 503, "Out of memory", key, klen, NULL);
	} else {
		mc_meta_log_debug(req, "PUT", key, klen, n);
		mc_meta_text(req, 200, "metadata updated");
	}
}

static void mc_meta_on_metadata(struct evhttp_request *req, void *arg)
{
	struct mc_meta_server *s = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	char *key;
	size_t klen;

	if (s->token &&
	    !mc_meta_auth_check(evhttp_find_header(evhttp_request_get_input_headers(req),
						   "Authorization"), s->token)) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
				  "Bearer");
		mc_meta_refuse(req, 401, "Unauthorized", NULL, 0,
			       "no valid bearer token (MC_METADATA_HTTP_TOKEN)");
		return;
	}
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_PUT && cmd != EVHTTP_REQ_DELETE) {
		mc_meta_refuse(req, 405, "Method not allowed", NULL, 0, NULL);
		return;
	}
	if ((cmd != EVHTTP_REQ_GET || s->opts.auth_reads) &&
	    !mc_http_auth_check(s->opts.auth, req, "metadata HTTP"))
		return;
	if (mc_meta_query_key(s, req, &key, &klen) != 0)
		return;
	if (cmd == EVHTTP_REQ_GET)
		mc_meta_do_get(s, req, key, klen);
	else if (cmd == EVHTTP_REQ_PUT)
		mc_meta_do_put(s, req, key, klen);
	else
		mc_meta_do_delete(s, req, key, klen);
	free(key);
}

static void mc_meta_on_health(struct evhttp_request *req, void *arg)
{
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

	if (cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD)
		mc_meta_text(req, 200, "OK");
	else
		mc_meta_refuse(req, 405, "Method not allowed", NULL, 0, NULL);
}

static void mc_meta_on_metrics(struct evhttp_request *req, void *arg)
{
	struct mc_meta_server *s = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	struct evbuffer *b;

	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		mc_meta_refuse(req, 405, "Method not allowed", NULL, 0, NULL);
		return;
	}
	b = evbuffer_new();
	if (b == NULL) {
		evhttp_send_error(req, 503, "Out of memory");
		return;
	}
	evbuffer_add_printf(b,
			    "# HELP metadata_keys keys stored\n# TYPE metadata_keys gauge\n"
			    "metadata_keys %zu\n"
			    "# HELP mooncake_auth_failures_total requests refused for want of the "
			    "cluster secret\n# TYPE mooncake_auth_failures_total counter\n"
			    "mooncake_auth_failures_total %llu\n",
			    s->count, (unsigned long long)mc_auth_failures(s->opts.auth));
	mc_conn_limit_prom(b);
	mc_procmem_prom(b);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; version=0.0.4");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static void mc_meta_on_other(struct evhttp_request *req, void *arg)
{
	mc_meta_refuse(req, 404, "Not found", NULL, 0, "unknown path");
}

/* ---- answers libevent gives on its own ---------------------------------------------------- */

/*
 * Output-buffer callback of every connection (arg: its bufferevent).  libevent 2.1 refuses a
 * request whose body is over the limit (413), whose request line or headers are over the limit
 * or unparsable (400), or whose method it does not know (501) without calling us and without a
 * hook; its answer's status line, written in one piece, is the
 * one trace we get.  Status lines we write ourselves are skipped (mc_meta_replying).
 */
static void mc_meta_on_output(struct evbuffer *out, const struct evbuffer_cb_info *info,
			      void *arg)
{
	struct bufferevent *bev = arg;
	struct evbuffer_ptr at;
	char line[80], peer[80];
	ev_ssize_t n;
	const char *why;
	int code;

	if (mc_meta_replying || info->n_added < 12 || info->n_deleted)
		return;
	if (evbuffer_ptr_set(out, &at, info->orig_size, EVBUFFER_PTR_SET) != 0)
		return;
	n = evbuffer_copyout_from(out, &at, line,
				  info->n_added < sizeof(line) ? info->n_added : sizeof(line) - 1);
	if (n < 12 || strncmp(line, "HTTP/1.", 7) != 0 || line[8] != ' ')
		return;
	line[n] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	code = atoi(line + 9);
	if (code < 400)
		return;
	why = code == 413 ? "body over the size limit"
	      : code == 501 ? "unknown method"
			    : "malformed request, or request line or headers over the size limit";
	mc_log_warn("metadata: request from %s refused with \"%s\": %s",
		    mc_meta_fd_peer(bufferevent_getfd(bev), peer, sizeof(peer)), line + 9, why);
}

/* evhttp's bufferevent factory: the default socket bufferevent, plus mc_meta_on_output. */
static struct bufferevent *mc_meta_on_accept(struct event_base *base, void *arg)
{
	struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);

	if (bev)
		evbuffer_add_cb(bufferevent_get_output(bev), mc_meta_on_output, bev);
	return bev;
}

/* ---- life cycle --------------------------------------------------------------------------- */

static void mc_meta_opts_init(struct mc_meta_server_opts *o, const struct mc_meta_server_opts *in)
{
	o->max_key_bytes = in && in->max_key_bytes ? in->max_key_bytes : MC_META_DEF_KEY_BYTES;
	o->max_value_bytes = in && in->max_value_bytes ? in->max_value_bytes
						       : MC_META_DEF_VALUE_BYTES;
	o->max_keys = in && in->max_keys ? in->max_keys : MC_META_DEF_KEYS;
	o->max_header_bytes = in && in->max_header_bytes ? in->max_header_bytes
							 : 8192 + 3 * o->max_key_bytes;
	o->max_total_bytes = in && in->max_total_bytes ? in->max_total_bytes
						       : (size_t)MC_META_DEF_TOTAL_BYTES;
	o->max_concurrent_puts = in && in->max_concurrent_puts ? in->max_concurrent_puts
							       : MC_META_DEF_PUTS;
	o->token = NULL;	/* kept as the server's own copy */
	o->auth = in ? in->auth : NULL;
	o->auth_reads = in ? in->auth_reads : 0;
	o->tls = in ? in->tls : NULL;
	o->max_connections = in && in->max_connections ? in->max_connections : 1024;
	o->max_connections_per_peer = in && in->max_connections_per_peer
					      ? in->max_connections_per_peer : 64;
	o->request_timeout_ms = in && in->request_timeout_ms ? in->request_timeout_ms : 10000;
}

/* A positive size from the environment variable name into *out (left alone when unset).  0,
 * or -1 with the reason in err. */
static int mc_meta_env_size(const char *name, size_t max, size_t *out, char *err, size_t n)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || *end || *v == '-' || x == 0 || x > max) {
		snprintf(err, n, "invalid value '%s' for %s (1 .. %zu)", v, name, max);
		return -1;
	}
	*out = (size_t)x;
	return 0;
}

static int mc_meta_loopback(const char *host)
{
	struct in_addr a4;

	if (host == NULL)
		return 0;
	if (!strcmp(host, "localhost") || !strcmp(host, "::1") || !strcmp(host, "[::1]"))
		return 1;
	return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

int mc_meta_server_opts_env(struct mc_meta_server_opts *o, const char *host, char *err,
			    size_t n)
{
	const char *insecure = getenv("MC_METADATA_HTTP_ALLOW_INSECURE");

	if (mc_meta_env_size("MC_METADATA_MAX_BODY_BYTES", 1ull << 30, &o->max_value_bytes, err,
			     n) ||
	    mc_meta_env_size("MC_METADATA_MAX_KEYS", 1000000000, &o->max_keys, err, n) ||
	    mc_meta_env_size("MC_METADATA_MAX_TOTAL_BYTES", (size_t)1 << 48, &o->max_total_bytes,
			     err, n) ||
	    mc_meta_env_size("MC_METADATA_MAX_CONCURRENT_PUTS", 65536, &o->max_concurrent_puts,
			     err, n))
		return -1;
	o->token = mc_meta_auth_token();
	/* A cluster secret guards the service as well as a token does. */
	if (o->token == NULL && o->auth == NULL && !mc_meta_loopback(host) &&
	    !(insecure && !strcmp(insecure, "1"))) {
		snprintf(err, n, "refusing to serve metadata on %s without a token: set "
			 "MC_METADATA_HTTP_TOKEN or a cluster secret, bind a loopback address, or "
			 "set MC_METADATA_HTTP_ALLOW_INSECURE=1",
			 host && *host ? host : "all addresses");
		return -1;
	}
	return 0;
}

static uint16_t mc_meta_bound_port(struct evhttp_bound_socket *sock)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(evhttp_bound_socket_get_fd(sock), (struct sockaddr *)&ss, &sl) != 0)
		return 0;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

struct mc_meta_server *mc_meta_server_new(struct event_base *base, const char *host,
					  uint16_t port, const struct mc_meta_server_opts *opts,
					  int *err)
{
	struct mc_meta_server *s;

	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	mc_meta_opts_init(&s->opts, opts);
	if (opts && opts->token && (s->token = strdup(opts->token)) == NULL) {
		*err = -ENOMEM;
		goto free_server;
	}
	evutil_secure_rng_get_bytes(s->seed, sizeof(s->seed));
	s->nbuckets = MC_META_MIN_BUCKETS;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	if (s->buckets == NULL) {
		*err = -ENOMEM;
		goto free_server;
	}
	s->http = evhttp_new(base);
	if (s->http == NULL) {
		*err = -ENOMEM;
		goto free_buckets;
	}
	s->guard = mc_http_guard_new(s->http, base, "metadata_http", s->opts.max_connections,
				     s->opts.max_connections_per_peer,
				     (int)s->opts.request_timeout_ms,
				     s->opts.tls ? mc_tls_http_bevcb : mc_meta_on_accept,
				     s->opts.tls ? (void *)s->opts.tls : (void *)s);
	if (s->guard == NULL) {
		*err = -ENOMEM;
		goto free_http;
	}
	/* Every method reaches our callbacks, so that the answer is our 405, not libevent's. */
	evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
						    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(s->http, (ev_ssize_t)s->opts.max_header_bytes);
	evhttp_set_max_body_size(s->http, (ev_ssize_t)s->opts.max_value_bytes);
	/* Read and drop the rest of a body over the limit before answering 413, so that the client
	 * sees the 413 rather than a reset of a connection closed under its upload. */
	evhttp_set_flags(s->http, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_timeout(s->http, 30);	/* slow or idle clients let go (seconds) */
	if (mc_http_guard_route(s->guard, "/metadata", mc_meta_on_metadata, s) ||
	    mc_http_guard_route(s->guard, "/health", mc_meta_on_health, s) ||
	    mc_http_guard_route(s->guard, "/metrics", mc_meta_on_metrics, s) ||
	    mc_http_guard_route(s->guard, NULL, mc_meta_on_other, s)) {
		*err = -ENOMEM;
		goto free_http;
	}
	errno = 0;
	s->sock = evhttp_bind_socket_with_handle(s->http, host, port);
	if (s->sock == NULL) {
		*err = errno ? -errno : -EADDRNOTAVAIL;
		goto free_http;
	}
	s->port = mc_meta_bound_port(s->sock);
	return s;

free_http:
	evhttp_free(s->http);
	mc_http_guard_free(s->guard);
free_buckets:
	free(s->buckets);
free_server:
	free(s->token);
	free(s);
	return NULL;
}

uint16_t mc_meta_server_port(const struct mc_meta_server *s)
{
	return s->port;
}

void mc_meta_server_free(struct mc_meta_server *s)
{
	struct mc_meta_entry *e, *next;
	size_t i;

	if (s == NULL)
		return;
	evhttp_free(s->http);
	mc_http_guard_free(s->guard);	/* after evhttp_free: see http_guard.h */
	for (i = 0; i < s->nbuckets; i++) {
		for (e = s->buckets[i]; e; e = next) {
			next = e->next;
			free(e->value);
			free(e);
		}
	}
	free(s->buckets);
	free(s->token);
	free(s);
}
