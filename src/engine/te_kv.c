/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine's metadata store, where segment descriptors are kept (doc/protocol.md
 * section 4): one get/put/delete interface over
 *   http://host:port/metadata  upstream's HTTP metadata protocol (libcurl),
 *   etcd://h1:2379,h2:2379     etcd's v3 JSON gateway (/v3/kv/put|range|deleterange, base64 keys
 *                              and values; a string without "://" also means etcd), trying the
 *                              endpoints in order,
 *   redis://host:port          SET/GET/DEL through hiredis (MC_REDIS_USERNAME, MC_REDIS_PASSWORD,
 *                              MC_REDIS_DB_INDEX).
 * Calls block for at most a few seconds and run on API threads, never on a loop.  Values are
 * bounded (16 MiB); replies are untrusted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#ifdef HAVE_CURL
#include <curl/curl.h>

#include "common/meta_auth.h"
#endif
#ifdef HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#include "common/auth.h"
#include "common/base64.h"
#include "common/log.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"

#define MC_KV_MAX_VALUE (16u << 20)

#ifdef HAVE_CURL
struct mc_kv_body {
	char *data;
	size_t len;
};

static size_t mc_kv_on_body(char *p, size_t sz, size_t nm, void *arg)
{
	struct mc_kv_body *b = arg;
	size_t n = sz * nm;
	char *q;

	if (b->len + n > MC_KV_MAX_VALUE * 2)
		return 0;
	q = realloc(b->data, b->len + n + 1);
	if (q == NULL)
		return 0;
	memcpy(q + b->len, p, n);
	b->data = q;
	b->len += n;
	q[b->len] = '\0';
	return n;
}

/* One request; returns the HTTP status or a negative error.  token: a bearer token to send
 * (the HTTP metadata service's MC_METADATA_HTTP_TOKEN), or NULL; a: the cluster secret to sign
 * it with (NULL: none; see common/auth.h). */
static long mc_kv_curl(const struct mc_auth *a, const char *url, const char *method,
		       const char *body, struct mc_kv_body *out, const char *token)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	long code = ERR_METADATA;
	char *auth = NULL;

	if (c == NULL)
		return ERR_MEMORY;
	if (token) {
		size_t n;
		char *line;

		auth = mc_meta_auth_header(token);
		n = auth ? strlen("Authorization: ") + strlen(auth) + 1 : 0;
		line = auth ? malloc(n) : NULL;
		if (line)
			snprintf(line, n, "Authorization: %s", auth);
		hdrs = line ? curl_slist_append(NULL, line) : NULL;
		free(line);
		if (hdrs == NULL) {
			free(auth);
			curl_easy_cleanup(c);
			return ERR_MEMORY;
		}
	}
	if (a) {
		const char *scheme = strstr(url, "://");
		const char *uri = scheme ? strchr(scheme + 3, '/') : NULL;
		struct curl_slist *more;
		char h[200];

		snprintf(h, sizeof(h), "%s: ", MC_AUTH_HTTP_HEADER);
		if (mc_auth_http_sign(a, method, uri ? uri : "/", body, body ? strlen(body) : 0,
				      (int64_t)time(NULL), h + strlen(h), sizeof(h) - strlen(h)) != 0 ||
		    (more = curl_slist_append(hdrs, h)) == NULL) {
			curl_slist_free_all(hdrs);
			free(auth);
			curl_easy_cleanup(c);
			return ERR_MEMORY;
		}
		hdrs = more;
	}
	if (hdrs)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	if (strncmp(url, "https://", 8) == 0) {
		/* The control plane's TLS settings (libmooncake(3)). */
		const char *ca = getenv("MOONCAKE_TLS_CA_FILE");
		const char *cert = getenv("MOONCAKE_TLS_CERT_FILE");
		const char *key = getenv("MOONCAKE_TLS_KEY_FILE");

		if (ca && *ca)
			curl_easy_setopt(c, CURLOPT_CAINFO, ca);
		if (cert && *cert && key && *key) {
			curl_easy_setopt(c, CURLOPT_SSLCERT, cert);
			curl_easy_setopt(c, CURLOPT_SSLKEY, key);
		}
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1500L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	if (out) {
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mc_kv_on_body);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	}
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);
	free(auth);
	return code;
}

static int mc_kv_http(struct mc_engine *e, const char *method, const char *key,
		      const char *value, char **out, size_t *len)
{
	CURL *c = curl_easy_init();
	char url[2048], *esc;
	struct mc_kv_body b = { 0 };
	long code;

	if (c == NULL)
		return ERR_MEMORY;
	esc = curl_easy_escape(c, key, 0);
	snprintf(url, sizeof(url), "%s?key=%s", e->meta_conn, esc ? esc : key);
	curl_free(esc);
	curl_easy_cleanup(c);
	/* Bodies are never printed; MC_METADATA_HTTP_TOKEN, when set, is sent. */
	code = mc_kv_curl(e->auth, url, method, value, &b, mc_meta_auth_token());
	if (code == 404) {
		free(b.data);
		return -ENOENT;
	}
	if (code != 200) {
		free(b.data);
		return ERR_METADATA;
	}
	if (out) {
		*out = b.data ? b.data : strdup("");
		*len = b.len;
	} else {
		free(b.data);
	}
	return 0;
}

/* etcd: each endpoint of "etcd://h1:p1,h2:p2" (or ";"-separated, or without the scheme). */
static int mc_kv_etcd(struct mc_engine *e, const char *op, const char *key, const char *value,
		      char **out, size_t *len)
{
	const char *list = strstr(e->meta_conn, "://") ? strstr(e->meta_conn, "://") + 3
						       : e->meta_conn;
	char eps[512], *save = NULL, *ep, *k64 = mc_base64_encode(key, strlen(key)), *v64 = NULL;
	char *big = NULL;
	int rc = ERR_METADATA;

	if (k64 == NULL)
		return ERR_MEMORY;
	if (value) {
		v64 = mc_base64_encode(value, strlen(value));
		if (v64 == NULL) {
			free(k64);
			return ERR_MEMORY;
		}
	}
	big = malloc(strlen(k64) + (v64 ? strlen(v64) : 0) + 64);
	if (big == NULL)
		goto out;
	if (v64)
		sprintf(big, "{\"key\":\"%s\",\"value\":\"%s\"}", k64, v64);
	else
		sprintf(big, "{\"key\":\"%s\"}", k64);
	snprintf(eps, sizeof(eps), "%s", list);
	for (ep = strtok_r(eps, ",;", &save); ep; ep = strtok_r(NULL, ",;", &save)) {
		char url[600];
		struct mc_kv_body b = { 0 };
		long code;

		snprintf(url, sizeof(url), "http://%s/v3/kv/%s", ep, op);
		code = mc_kv_curl(NULL, url, "POST", big, &b, NULL);
		if (code < 0) {
			free(b.data);
			continue;	/* unreachable: try the next endpoint */
		}
		if (code != 200) {
			free(b.data);
			break;
		}
		rc = 0;
		if (out) {
			json_error_t jerr;
			json_t *j = json_loadb(b.data ? b.data : "", b.len, 0, &jerr);
			json_t *kvs = json_object_get(j, "kvs");
			json_t *val = json_object_get(json_array_get(kvs, 0), "value");

			if (!json_is_string(val)) {
				rc = -ENOENT;
			} else {
				*out = mc_base64_decode(json_string_value(val), len);
				rc = *out ? 0 : ERR_MALFORMED_JSON;
			}
			json_decref(j);
		} else if (!strcmp(op, "deleterange") && b.data && !strstr(b.data, "\"deleted\"")) {
			rc = -ENOENT;
		}
		free(b.data);
		break;
	}
out:
	free(big);
	free(k64);
	free(v64);
	return rc;
}
#endif

#ifdef HAVE_HIREDIS
static int mc_kv_redis(struct mc_engine *e, const char *cmd, const char *key, const char *value,
		       char **out, size_t *len)
{
	const char *hp = strstr(e->meta_conn, "://") + 3, *colon = strrchr(hp, ':');
	const char *user = getenv("MC_REDIS_USERNAME"), *pass = getenv("MC_REDIS_PASSWORD");
	const char *db = getenv("MC_REDIS_DB_INDEX");
	struct timeval tv = { 3, 0 };
	char host[256];
	redisContext *c;
	redisReply *r = NULL;
	int rc = ERR_METADATA;

	snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - hp) : (int)strlen(hp), hp);
	c = redisConnectWithTimeout(host, colon ? atoi(colon + 1) : 6379, tv);
	if (c == NULL || c->err)
		goto out;
	redisSetTimeout(c, tv);
	if (pass && *pass) {
		r = user && *user ? redisCommand(c, "AUTH %s %s", user, pass)
				  : redisCommand(c, "AUTH %s", pass);
		if (r == NULL || r->type == REDIS_REPLY_ERROR)
			goto out;
		freeReplyObject(r);
	}
	if (db && *db) {
		int idx = atoi(db);

		if (idx < 0 || idx > 255)
			goto out;
		r = redisCommand(c, "SELECT %d", idx);
		if (r == NULL || r->type == REDIS_REPLY_ERROR)
			goto out;
		freeReplyObject(r);
	}
	if (!strcmp(cmd, "SET"))
		r = redisCommand(c, "SET %s %b", key, value, strlen(value));
	else
		r = redisCommand(c, "%s %s", cmd, key);
	if (r == NULL || r->type == REDIS_REPLY_ERROR)
		goto out;
	rc = 0;
	if (!strcmp(cmd, "GET")) {
		if (r->type != REDIS_REPLY_STRING) {
			rc = -ENOENT;
		} else {
			*out = malloc(r->len + 1);
			if (*out == NULL) {
				rc = ERR_MEMORY;
			} else {
				memcpy(*out, r->str, r->len);
				(*out)[r->len] = '\0';
				*len = r->len;
			}
		}
	} else if (!strcmp(cmd, "DEL") && r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
		rc = -ENOENT;
	}
out:
	if (r)
		freeReplyObject(r);
	if (c == NULL || c->err)
		mc_log_warn("transfer engine: redis %s: %s", host, c ? c->errstr : "no memory");
	redisFree(c);
	return rc;
}
#endif

enum mc_kv_kind { MC_KV_HTTP, MC_KV_ETCD, MC_KV_REDIS, MC_KV_NONE };

static enum mc_kv_kind mc_kv_kind(const char *conn)
{
	if (!strcmp(conn, "P2PHANDSHAKE"))
		return MC_KV_NONE;
	if (!strncmp(conn, "http://", 7) || !strncmp(conn, "https://", 8))
		return MC_KV_HTTP;
	if (!strncmp(conn, "redis://", 8))
		return MC_KV_REDIS;
	if (!strncmp(conn, "etcd://", 7) || strstr(conn, "://") == NULL)
		return MC_KV_ETCD;
	return MC_KV_NONE;
}

int mc_te_kv_supported(const char *conn)
{
	switch (mc_kv_kind(conn)) {
	case MC_KV_HTTP:
	case MC_KV_ETCD:
#ifdef HAVE_CURL
		return 1;
#else
		return 0;
#endif
	case MC_KV_REDIS:
#ifdef HAVE_HIREDIS
		return 1;
#else
		return 0;
#endif
	default:
		return !strcmp(conn, "P2PHANDSHAKE");
	}
}

int mc_te_kv_put(struct mc_engine *e, const char *key, const char *value)
{
	switch (mc_kv_kind(e->meta_conn)) {
#ifdef HAVE_CURL
	case MC_KV_HTTP:
		return mc_kv_http(e, "PUT", key, value, NULL, NULL);
	case MC_KV_ETCD:
		return mc_kv_etcd(e, "put", key, value, NULL, NULL);
#endif
#ifdef HAVE_HIREDIS
	case MC_KV_REDIS:
		return mc_kv_redis(e, "SET", key, value, NULL, NULL);
#endif
	default:
		return ERR_NOT_IMPLEMENTED;
	}
}

int mc_te_kv_get(struct mc_engine *e, const char *key, char **value, size_t *len)
{
	*value = NULL;
	switch (mc_kv_kind(e->meta_conn)) {
#ifdef HAVE_CURL
	case MC_KV_HTTP:
		return mc_kv_http(e, "GET", key, NULL, value, len);
	case MC_KV_ETCD:
		return mc_kv_etcd(e, "range", key, NULL, value, len);
#endif
#ifdef HAVE_HIREDIS
	case MC_KV_REDIS:
		return mc_kv_redis(e, "GET", key, NULL, value, len);
#endif
	default:
		return ERR_NOT_IMPLEMENTED;
	}
}

int mc_te_kv_del(struct mc_engine *e, const char *key)
{
	switch (mc_kv_kind(e->meta_conn)) {
#ifdef HAVE_CURL
	case MC_KV_HTTP:
		return mc_kv_http(e, "DELETE", key, NULL, NULL, NULL);
	case MC_KV_ETCD:
		return mc_kv_etcd(e, "deleterange", key, NULL, NULL, NULL);
#endif
#ifdef HAVE_HIREDIS
	case MC_KV_REDIS:
		return mc_kv_redis(e, "DEL", key, NULL, NULL, NULL);
#endif
	default:
		return ERR_NOT_IMPLEMENTED;
	}
}
