/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TLS_H
#define MC_TLS_H

/*
 * TLS for the control plane (master RPC, admin HTTP, metadata HTTP) through libevent's OpenSSL
 * bufferevents.  A daemon with a certificate and key serves TLS on those ports; with a CA file
 * it also requires and verifies client certificates (mutual TLS).  A client with a CA file
 * verifies the server's certificate and name; with a certificate and key it presents them.
 * Contexts are built once at start-up and shared by the loop's connections.
 */
#include <stddef.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

struct mc_tls;

/* Client-side settings from the environment: MOONCAKE_TLS_CA_FILE (turns TLS on),
 * MOONCAKE_TLS_CERT_FILE and MOONCAKE_TLS_KEY_FILE (a client certificate). */
#define MC_TLS_CA_ENV "MOONCAKE_TLS_CA_FILE"
#define MC_TLS_CERT_ENV "MOONCAKE_TLS_CERT_FILE"
#define MC_TLS_KEY_ENV "MOONCAKE_TLS_KEY_FILE"

/* A server context from PEM files (ca may be NULL or "": no client certificates asked).
 * 0 and *out, or -ENOTSUP (no OpenSSL in this build) / -EINVAL with a sentence in err. */
int mc_tls_server_new(const char *cert, const char *key, const char *ca, struct mc_tls **out,
		      char *err, size_t errlen);
/* A client context: ca verifies the server (required), cert and key are ours (both or neither).
 * Same returns. */
int mc_tls_client_new(const char *ca, const char *cert, const char *key, struct mc_tls **out,
		      char *err, size_t errlen);
/* mc_tls_client_new from the MOONCAKE_TLS_* variables; *out NULL and 0 when MOONCAKE_TLS_CA_FILE
 * is not set. */
int mc_tls_client_from_env(struct mc_tls **out, char *err, size_t errlen);
void mc_tls_free(struct mc_tls *t);

/* A bufferevent doing TLS on an accepted socket (closed with it), or NULL. */
struct bufferevent *mc_tls_bev_accept(struct event_base *base, struct mc_tls *t,
				      evutil_socket_t fd);
/* A bufferevent for bufferevent_socket_connect that does TLS once connected, verifying the
 * server's certificate for host (a name or an IP address), or NULL. */
struct bufferevent *mc_tls_bev_connect(struct event_base *base, struct mc_tls *t,
				       const char *host);
/* Why the TLS of bev failed (the OpenSSL error queue, or the verification result), for a log
 * line; "" when nothing is known. */
const char *mc_tls_bev_error(struct bufferevent *bev, char *buf, size_t n);
/* A bufferevent factory for an evhttp server whose connections are served through TLS (an
 * evhttp_set_bevcb callback, or the guard's inner one, http_guard.h): arg is the struct
 * mc_tls.  NULL without OpenSSL or memory. */
struct event_base;
struct bufferevent *mc_tls_http_bevcb(struct event_base *base, void *arg);

#endif
