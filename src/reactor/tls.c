/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS contexts and TLS bufferevents for the control plane (see tls.h).  Certificates and keys
 * are read once, at start-up; the contexts are then only read (OpenSSL's SSL_CTX may be shared
 * by connections).  Everything else runs on the owning loop's thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include "reactor/tls.h"

#ifdef HAVE_OPENSSL
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

struct mc_tls {
#ifdef HAVE_OPENSSL
	SSL_CTX *ctx;
#endif
	int server;
};

#ifdef HAVE_OPENSSL
static void mc_tls_errstr(char *err, size_t n, const char *what, const char *path)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "";

	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, n, "%s %s: %s", what, path, e ? buf : "invalid");
	ERR_clear_error();
}

static int mc_tls_load_pair(SSL_CTX *ctx, const char *cert, const char *key, char *err,
			    size_t n)
{
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		mc_tls_errstr(err, n, "TLS certificate", cert);
		return -EINVAL;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		mc_tls_errstr(err, n, "TLS key", key);
		return -EINVAL;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(err, n, "TLS key %s does not match the certificate %s", key, cert);
		return -EINVAL;
	}
	return 0;
}
#endif

int mc_tls_server_new(const char *cert, const char *key, const char *ca, struct mc_tls **out,
		      char *err, size_t errlen)
{
#ifdef HAVE_OPENSSL
	struct mc_tls *t;
	int rc;

	*out = NULL;
	if (cert == NULL || !*cert || key == NULL || !*key) {
		snprintf(err, errlen, "TLS needs both a certificate and a key");
		return -EINVAL;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL || (t->ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		free(t);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->server = 1;
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	rc = mc_tls_load_pair(t->ctx, cert, key, err, errlen);
	if (rc == 0 && ca && *ca) {
		if (SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1) {
			mc_tls_errstr(err, errlen, "TLS CA file", ca);
			rc = -EINVAL;
		} else {
			/* Mutual TLS: a client without a certificate from this CA is refused. */
			SSL_CTX_set_verify(t->ctx,
					   SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		}
	}
	if (rc) {
		mc_tls_free(t);
		return rc;
	}
	*out = t;
	return 0;
#else
	(void)cert, (void)key, (void)ca;
	*out = NULL;
	snprintf(err, errlen, "TLS: this build has no OpenSSL (--with-openssl)");
	return -ENOTSUP;
#endif
}

int mc_tls_client_new(const char *ca, const char *cert, const char *key, struct mc_tls **out,
		      char *err, size_t errlen)
{
#ifdef HAVE_OPENSSL
	struct mc_tls *t;
	int rc = 0;

	*out = NULL;
	if (ca == NULL || !*ca) {
		snprintf(err, errlen, "TLS needs a CA file to verify the server");
		return -EINVAL;
	}
	if ((cert && *cert) != (key && *key)) {
		snprintf(err, errlen, "a TLS client certificate needs its key, and a key its "
				      "certificate");
		return -EINVAL;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL || (t->ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
		free(t);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	if (SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1) {
		mc_tls_errstr(err, errlen, "TLS CA file", ca);
		rc = -EINVAL;
	}
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	if (rc == 0 && cert && *cert)
		rc = mc_tls_load_pair(t->ctx, cert, key, err, errlen);
	if (rc) {
		mc_tls_free(t);
		return rc;
	}
	*out = t;
	return 0;
#else
	(void)ca, (void)cert, (void)key;
	*out = NULL;
	snprintf(err, errlen, "TLS: this build has no OpenSSL (--with-openssl)");
	return -ENOTSUP;
#endif
}

int mc_tls_client_from_env(struct mc_tls **out, char *err, size_t errlen)
{
	const char *ca = getenv(MC_TLS_CA_ENV);

	*out = NULL;
	if (ca == NULL || *ca == '\0')
		return 0;
	return mc_tls_client_new(ca, getenv(MC_TLS_CERT_ENV), getenv(MC_TLS_KEY_ENV), out, err,
				 errlen);
}

void mc_tls_free(struct mc_tls *t)
{
	if (t == NULL)
		return;
#ifdef HAVE_OPENSSL
	SSL_CTX_free(t->ctx);
#endif
	free(t);
}

struct bufferevent *mc_tls_bev_accept(struct event_base *base, struct mc_tls *t,
				      evutil_socket_t fd)
{
#ifdef HAVE_OPENSSL
	SSL *ssl = SSL_new(t->ctx);
	struct bufferevent *bev;

	if (ssl == NULL)
		return NULL;
	bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		SSL_free(ssl);
	return bev;
#else
	(void)base, (void)t, (void)fd;
	return NULL;
#endif
}

struct bufferevent *mc_tls_bev_connect(struct event_base *base, struct mc_tls *t,
				       const char *host)
{
#ifdef HAVE_OPENSSL
	SSL *ssl = SSL_new(t->ctx);
	struct bufferevent *bev;
	unsigned char ip[16];

	if (ssl == NULL)
		return NULL;
	/* The server's certificate must name the address we dialled. */
	if (inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
	} else {
		SSL_set1_host(ssl, host);
		SSL_set_tlsext_host_name(ssl, host);
	}
	bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		SSL_free(ssl);
	return bev;
#else
	(void)base, (void)t, (void)host;
	return NULL;
#endif
}

const char *mc_tls_bev_error(struct bufferevent *bev, char *buf, size_t n)
{
#ifdef HAVE_OPENSSL
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	unsigned long e = bufferevent_get_openssl_error(bev);
	long v;

	buf[0] = '\0';
	if (ssl && (v = SSL_get_verify_result(ssl)) != X509_V_OK)
		snprintf(buf, n, "TLS: certificate verification failed: %s",
			 X509_verify_cert_error_string(v));
	else if (e)
		ERR_error_string_n(e, buf, n);
	return buf;
#else
	(void)bev;
	if (n)
		buf[0] = '\0';
	return buf;
#endif
}

#ifdef HAVE_OPENSSL
static struct bufferevent *mc_tls_http_bev(struct event_base *base, void *arg)
{
	struct mc_tls *t = arg;
	SSL *ssl = SSL_new(t->ctx);
	struct bufferevent *bev;

	if (ssl == NULL)
		return NULL;
	bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		SSL_free(ssl);
	return bev;
}
#endif

struct bufferevent *mc_tls_http_bevcb(struct event_base *base, void *arg)
{
#ifdef HAVE_OPENSSL
	return mc_tls_http_bev(base, arg);
#else
	(void)base, (void)arg;
	return NULL;
#endif
}

