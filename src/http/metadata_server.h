/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_METADATA_SERVER_H
#define MC_METADATA_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

/*
 * The transfer engine's HTTP metadata key-value service (upstream's GET/PUT/DELETE
 * /metadata?key=... protocol, served by upstream's master with --enable_http_metadata_server
 * and by its mooncake_http_metadata_server), embeddable in any libevent loop: mooncake_http_metadata_server runs it
 * alone, mooncake_master on its own loop with --enable_http_metadata_server.
 *
 *   GET    /metadata?key=K   200 value verbatim (application/json) | 404 "metadata not found"
 *   PUT    /metadata?key=K   200 "metadata updated"; a key containing "rpc_meta" that exists:
 *                            same body 200 "metadata unchanged", else 400 "Duplicate rpc_meta
 *                            key not allowed"; 507 when a new key passes max_keys ("metadata
 *                            key budget exhausted") or the values would pass max_total_bytes
 *                            ("metadata byte budget exhausted")
 *   DELETE /metadata?key=K   200 "metadata deleted" | 404 "metadata not found"
 *   GET    /health           200 "OK"
 *   GET    /metrics          Prometheus text: keys stored, requests refused for want of the
 *                            cluster secret
 *
 * With a cluster secret (opts.auth), PUT and DELETE without valid credentials get 401
 * (http/http_auth.h), GET too with opts.auth_reads; /health and /metrics stay open.
 *
 * K is URL-decoded.  A missing, empty or repeated key parameter is 400 "Missing key parameter"
 * (repeated: "Repeated key parameter"); a key over max_key_bytes or holding a NUL byte is 400;
 * a body over max_value_bytes 413; a request line or headers over max_header_bytes 400 (the
 * answer of libevent 2.1); other methods on /metadata and /health 405 "Method not allowed";
 * other paths 404.  With a token, every /metadata request must carry "Authorization: Bearer
 * <token>" (compared in constant time), else 401 "Unauthorized"; /health stays open.
 * Mutations are logged at debug level, refused requests at warning level with the peer.
 *
 * Threading: everything runs on the thread of the event_base given to mc_meta_server_new(),
 * including the in-process accessors below; the server takes no locks.
 */
struct mc_meta_server;
struct mc_auth;
struct mc_tls;

/* Bounds on what the network may make us store, and who may.  A zero field takes the
 * default (upstream 0.3.14's). */
struct mc_meta_server_opts {
	size_t max_key_bytes;		/* decoded key length; default 1024 */
	size_t max_value_bytes;		/* request body; default 1 MiB */
	size_t max_keys;		/* distinct keys stored; default 65536 */
	size_t max_header_bytes;	/* request line, and all headers together;
					 * default 8 KiB + 3 * max_key_bytes (a fully
					 * escaped key fits in the request line) */
	size_t max_total_bytes;		/* all values together; default 1 GiB */
	/* Upstream's bound on PUTs handled at once (default 8).  This server applies PUTs one at
	 * a time on its loop, so the bound always holds; bodies still arriving are bounded by
	 * max_value_bytes each. */
	size_t max_concurrent_puts;
	const char *token;		/* bearer token every /metadata request must carry, or
					 * NULL (copied) */
	/* The cluster secret PUT and DELETE must carry (and GET too with auth_reads); NULL: an
	 * open service.  Not owned: it must outlive the server. */
	struct mc_auth *auth;
	int auth_reads;
	struct mc_tls *tls;		/* serve HTTPS (NULL: HTTP); not owned */
	/* Connection limits (http_guard.h; port "metadata_http" on /metrics), 0: the default:
	 * connections at once (1024), from one address (64), and the time a request has to
	 * arrive whole after the connection opened or the previous reply (10000 ms). */
	unsigned max_connections;
	unsigned max_connections_per_peer;
	unsigned request_timeout_ms;
};

/* Upstream's environment into o: MC_METADATA_MAX_BODY_BYTES (max_value_bytes),
 * MC_METADATA_MAX_KEYS, MC_METADATA_MAX_TOTAL_BYTES, MC_METADATA_MAX_CONCURRENT_PUTS (fields of
 * variables that are not set are left alone) and MC_METADATA_HTTP_TOKEN (o->token, pointing
 * into the environment).  Then whether binding host is allowed: a host other than a loopback
 * address (127.0.0.0/8, ::1, localhost) needs a token, unless MC_METADATA_HTTP_ALLOW_INSECURE=1.
 * 0, or -1 with the reason (naming the variable) in err. */
int mc_meta_server_opts_env(struct mc_meta_server_opts *o, const char *host, char *err,
			    size_t n);

/*
 * Bind an HTTP server on host:port (host NULL: all addresses; port 0: any free port) and serve
 * it from base.  opts may be NULL (all defaults); it is copied.  Returns an owned server, or
 * NULL with *err = -errno (-EADDRINUSE, -EADDRNOTAVAIL for an unresolvable host, -ENOMEM, ...).
 * base must outlive the server.  host may be a name; it is resolved here, blocking.
 */
struct mc_meta_server *mc_meta_server_new(struct event_base *base, const char *host,
					  uint16_t port, const struct mc_meta_server_opts *opts,
					  int *err);
/* The port actually bound (the kernel's choice when 0 was asked for). */
uint16_t mc_meta_server_port(const struct mc_meta_server *s);
/* Close the listener and every connection and drop all entries.  NULL is a no-op.  Must not be
 * called from inside one of the server's own callbacks. */
void mc_meta_server_free(struct mc_meta_server *s);

/*
 * In-process access, e.g. the master deleting a dead client's entries.  Keys are NUL-terminated
 * decoded keys, exactly as a client would send them before URL-escaping.
 */

/* The value stored under key, or NULL (len untouched).  The bytes are owned by the server and
 * stay valid until key is next written or deleted, or the server is freed; they are followed by
 * a NUL byte not counted in *len, so a JSON value can be parsed in place. */
const char *mc_meta_server_get(struct mc_meta_server *s, const char *key, size_t *len);
/* Insert or replace key with a copy of value[0..len).  No rpc_meta rule (that is a rule of the
 * HTTP protocol).  Returns 0, -EINVAL (empty key), -E2BIG (key or value over the bounds),
 * -ENOSPC (a new key past max_keys), -EDQUOT (values past max_total_bytes) or -ENOMEM. */
int mc_meta_server_put(struct mc_meta_server *s, const char *key, const void *value, size_t len);
/* Returns 0, or -ENOENT when key is not stored. */
int mc_meta_server_delete(struct mc_meta_server *s, const char *key);
/* Number of keys stored. */
size_t mc_meta_server_count(const struct mc_meta_server *s);

#endif
