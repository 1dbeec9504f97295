/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster secret and the connection handshake (see auth.h for the messages).
 *
 * Everything cryptographic is OpenSSL's: RAND_bytes for nonces, HMAC-SHA256 for proofs and
 * request signatures, SHA-256 for request bodies, CRYPTO_memcmp to compare MACs.  The handshake
 * is a small state machine over fixed-size messages, driven by its owner: from an event loop's
 * readiness callbacks (src/reactor/auth_event.c, the engine's TCP lanes) or by a thread that
 * owns the socket (mc_auth_hs_run).  It never reads past its own bytes, so the port's protocol
 * starts exactly where it ends.  A loaded struct mc_auth is shared by all threads: its key never
 * changes, its counters are atomics.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_OPENSSL
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#endif

#include "common/auth.h"
#include "common/log.h"

#define MC_AUTH_LABEL_SERVER "mooncake-auth-v1 server"
#define MC_AUTH_LABEL_CLIENT "mooncake-auth-v1 client"
#define MC_AUTH_LOG_PER_SEC 20

struct mc_auth {
	atomic_uint refs;
	atomic_uint_least64_t failures;
	atomic_int_least64_t log_sec;		/* second of the last refusal lines */
	atomic_uint log_count;			/* lines logged in that second */
	atomic_uint_least64_t suppressed;	/* refusals not logged since the last line */
	char *path;
	size_t keylen;
	uint8_t key[MC_AUTH_SECRET_MAX];
};

enum mc_auth_state {
	/* client */
	MC_AS_SEND_HELLO,
	MC_AS_RECV_CHALLENGE,
	MC_AS_SEND_PROOF,
	/* server */
	MC_AS_RECV_HELLO,
	MC_AS_SEND_CHALLENGE,
	MC_AS_RECV_PROOF,
	MC_AS_DONE,
};

int mc_auth_available(void)
{
#ifdef HAVE_OPENSSL
	return 1;
#else
	return 0;
#endif
}

int mc_auth_timeout_ms(void)
{
	const char *v = getenv("MC_AUTH_TIMEOUT_MS");
	long n = v ? strtol(v, NULL, 10) : 0;

	return n > 0 && n <= 600000 ? (int)n : MC_AUTH_TIMEOUT_MS;
}

int mc_auth_load_env(struct mc_auth **out, char *err, size_t errlen)
{
	return mc_auth_load(getenv(MC_AUTH_SECRET_ENV), out, err, errlen);
}

int mc_auth_load(const char *path, struct mc_auth **out, char *err, size_t errlen)
{
	struct mc_auth *a = NULL;
	struct stat sb;
	ssize_t n;
	int fd, rc;

	*out = NULL;
	if (path == NULL || *path == '\0')
		return 0;
	if (!mc_auth_available()) {
		snprintf(err, errlen, "cluster secret %s: this build has no OpenSSL (--with-openssl)",
			 path);
		return -ENOTSUP;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cluster secret %s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "cluster secret %s: not a regular file", path);
		rc = -EINVAL;
		goto out_close;
	}
	if (sb.st_mode & S_IRWXO) {
		snprintf(err, errlen,
			 "cluster secret %s: readable by others (mode %03o); chmod 600 it", path,
			 (unsigned)(sb.st_mode & 0777));
		rc = -EPERM;
		goto out_close;
	}
	a = calloc(1, sizeof(*a));
	if (a == NULL) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_close;
	}
	n = read(fd, a->key, sizeof(a->key));
	if (n < 0) {
		rc = -errno;
		snprintf(err, errlen, "cluster secret %s: %s", path, strerror(errno));
		goto out_free;
	}
	if ((size_t)n == sizeof(a->key)) {
		snprintf(err, errlen, "cluster secret %s: longer than %d bytes", path,
			 MC_AUTH_SECRET_MAX - 1);
		rc = -EINVAL;
		goto out_free;
	}
	while (n > 0 && (a->key[n - 1] == '\n' || a->key[n - 1] == '\r' || a->key[n - 1] == ' ' ||
			 a->key[n - 1] == '\t'))
		n--;
	if (n < MC_AUTH_SECRET_MIN) {
		snprintf(err, errlen,
			 "cluster secret %s: %zd bytes, at least %d are needed (e.g. head -c 32 "
			 "/dev/urandom | base64 > %s)",
			 path, n, MC_AUTH_SECRET_MIN, path);
		rc = -EINVAL;
		goto out_free;
	}
	a->keylen = (size_t)n;
	a->path = strdup(path);
	if (a->path == NULL) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	atomic_init(&a->refs, 1);
	close(fd);
	*out = a;
	return 0;

out_free:
	memset(a->key, 0, sizeof(a->key));
	free(a);
out_close:
	close(fd);
	return rc;
}

int mc_auth_export(const char *flag, const char *path, char *err, size_t errlen)
{
	struct mc_auth *a = NULL;
	char why[400];

	if (path == NULL || *path == '\0')
		return 0;
	if (mc_auth_load(path, &a, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "invalid value '%s' for --%s: %s", path, flag, why);
		return -1;
	}
	mc_auth_unref(a);
	if (setenv(MC_AUTH_SECRET_ENV, path, 1) != 0) {
		snprintf(err, errlen, "--%s: %s", flag, strerror(errno));
		return -1;
	}
	return 0;
}

void mc_auth_announce(const struct mc_auth *a, const char *open_risk)
{
	if (a)
		mc_log_notice("cluster secret from %s: every connection is authenticated", a->path);
	else
		mc_log_warn("no --cluster_secret_file: the cluster is open (any host that reaches "
			    "this daemon %s)", open_risk);
}

const char *mc_auth_path(const struct mc_auth *a)
{
	return a ? a->path : "";
}

struct mc_auth *mc_auth_ref(struct mc_auth *a)
{
	if (a)
		atomic_fetch_add(&a->refs, 1);
	return a;
}

void mc_auth_unref(struct mc_auth *a)
{
	if (a == NULL || atomic_fetch_sub(&a->refs, 1) != 1)
		return;
#ifdef HAVE_OPENSSL
	OPENSSL_cleanse(a->key, sizeof(a->key));
#endif
	free(a->path);
	free(a);
}

uint64_t mc_auth_failures(const struct mc_auth *a)
{
	return a ? atomic_load(&((struct mc_auth *)a)->failures) : 0;
}

void mc_auth_refused(struct mc_auth *a, const char *what, const char *peer, const char *why)
{
	int64_t now = (int64_t)time(NULL);
	int64_t sec;
	uint64_t skipped;

	if (a == NULL)
		return;
	atomic_fetch_add(&a->failures, 1);
	sec = atomic_load(&a->log_sec);
	if (sec != now && atomic_compare_exchange_strong(&a->log_sec, &sec, now))
		atomic_store(&a->log_count, 0);
	if (atomic_fetch_add(&a->log_count, 1) >= MC_AUTH_LOG_PER_SEC) {
		atomic_fetch_add(&a->suppressed, 1);
		return;
	}
	skipped = atomic_exchange(&a->suppressed, 0);
	if (skipped)
		mc_log_warn("refused %s peer %s: %s (and %llu more refusals not logged)", what, peer,
			    why, (unsigned long long)skipped);
	else
		mc_log_warn("refused %s peer %s: %s", what, peer, why);
}

void mc_auth_hs_refused(struct mc_auth *a, const char *what, const char *peer, int rc,
			const struct mc_auth_hs *hs)
{
	if (rc == -ECONNRESET && hs->role == MC_AUTH_SERVER && hs->state == MC_AS_RECV_HELLO &&
	    hs->pos == 0) {
		mc_log_debug("%s peer %s closed before the handshake", what, peer);
		return;
	}
	mc_auth_refused(a, what, peer,
			hs->why ? hs->why : strerror(rc < 0 && rc > -4096 ? -rc : EPROTO));
}

/* ---------------------------------------------------------------- the handshake */

#ifdef HAVE_OPENSSL
/* HMAC-SHA256(K, label | nonce_c | nonce_s) into mac. */
static int mc_auth_proof(const struct mc_auth *a, const char *label, const uint8_t *nc,
			 const uint8_t *ns, uint8_t *mac)
{
	uint8_t msg[64 + 2 * MC_AUTH_NONCE_LEN];
	size_t ll = strlen(label);
	unsigned int maclen = 0;

	memcpy(msg, label, ll);
	memcpy(msg + ll, nc, MC_AUTH_NONCE_LEN);
	memcpy(msg + ll + MC_AUTH_NONCE_LEN, ns, MC_AUTH_NONCE_LEN);
	if (HMAC(EVP_sha256(), a->key, (int)a->keylen, msg, ll + 2 * MC_AUTH_NONCE_LEN, mac,
		 &maclen) == NULL ||
	    maclen != MC_AUTH_MAC_LEN)
		return -EIO;
	return 0;
}
#endif

int mc_auth_hs_init(struct mc_auth_hs *hs, const struct mc_auth *a, int role)
{
	memset(hs, 0, sizeof(*hs));
	hs->a = a;
	hs->role = role;
#ifdef HAVE_OPENSSL
	if (RAND_bytes(role == MC_AUTH_CLIENT ? hs->nc : hs->ns, MC_AUTH_NONCE_LEN) != 1) {
		hs->why = "no random bytes";
		return -EIO;
	}
	if (role == MC_AUTH_CLIENT) {
		memcpy(hs->msg, MC_AUTH_MAGIC, MC_AUTH_MAGIC_LEN);
		memcpy(hs->msg + MC_AUTH_MAGIC_LEN, hs->nc, MC_AUTH_NONCE_LEN);
		hs->state = MC_AS_SEND_HELLO;
		hs->want_write = 1;
	} else {
		hs->state = MC_AS_RECV_HELLO;
	}
	return 0;
#else
	hs->why = "built without OpenSSL";
	return -ENOTSUP;
#endif
}

/* Move bytes of the current message (msg[pos..len)).  1 when complete, 0 would block, <0. */
static int mc_auth_io(struct mc_auth_hs *hs, int fd, size_t len, int writing)
{
	while (hs->pos < len) {
		ssize_t n = hs->io ? (ssize_t)hs->io(hs->io_ctx, hs->msg + hs->pos, len - hs->pos,
						       writing)
			    : writing ? send(fd, hs->msg + hs->pos, len - hs->pos,
					     MSG_DONTWAIT | MSG_NOSIGNAL)
				      : recv(fd, hs->msg + hs->pos, len - hs->pos, MSG_DONTWAIT);

		if (n == 0 && !writing) {
			hs->why = "connection closed during the handshake";
			return -ECONNRESET;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				hs->want_write = writing;
				return 0;
			}
			hs->why = strerror(errno);
			return -errno;
		}
		hs->pos += (size_t)n;
	}
	return 1;
}

/* Server: read the hello; give up on the first byte that is not the magic's. */
static int mc_auth_recv_hello(struct mc_auth_hs *hs, int fd)
{
	while (hs->pos < MC_AUTH_MAGIC_LEN) {
		size_t had = hs->pos;
		int rc = mc_auth_io(hs, fd, MC_AUTH_MAGIC_LEN, 0);

		if (memcmp(hs->msg + had, MC_AUTH_MAGIC + had, hs->pos - had) != 0) {
			hs->why = "no authentication handshake (a peer without the cluster secret)";
			return MC_AUTH_NOT_HELLO;
		}
		if (rc <= 0) {
			if (rc == -ECONNRESET && hs->pos == 0)
				hs->why = "connection closed before the handshake";
			return rc;
		}
	}
	return mc_auth_io(hs, fd, MC_AUTH_HELLO_LEN, 0);
}

int mc_auth_hs_step(struct mc_auth_hs *hs, int fd)
{
#ifdef HAVE_OPENSSL
	uint8_t mac[MC_AUTH_MAC_LEN];
	int rc;

	for (;;) {
		switch (hs->state) {
		case MC_AS_SEND_HELLO:
			if ((rc = mc_auth_io(hs, fd, MC_AUTH_HELLO_LEN, 1)) <= 0)
				return rc;
			hs->state = MC_AS_RECV_CHALLENGE;
			hs->pos = 0;
			break;
		case MC_AS_RECV_CHALLENGE:
			if ((rc = mc_auth_io(hs, fd, MC_AUTH_CHALLENGE_LEN, 0)) <= 0)
				return rc;
			if (memcmp(hs->msg, MC_AUTH_MAGIC, MC_AUTH_MAGIC_LEN) != 0) {
				hs->why = "the server does not speak the authentication handshake";
				return -EPROTO;
			}
			memcpy(hs->ns, hs->msg + MC_AUTH_MAGIC_LEN, MC_AUTH_NONCE_LEN);
			if (mc_auth_proof(hs->a, MC_AUTH_LABEL_SERVER, hs->nc, hs->ns, mac) != 0)
				return -EIO;
			if (CRYPTO_memcmp(mac, hs->msg + MC_AUTH_MAGIC_LEN + MC_AUTH_NONCE_LEN,
					  MC_AUTH_MAC_LEN) != 0) {
				hs->why = "the server's proof is wrong (a different cluster secret)";
				return MC_AUTH_BAD_PROOF;
			}
			if (mc_auth_proof(hs->a, MC_AUTH_LABEL_CLIENT, hs->nc, hs->ns, hs->msg) != 0)
				return -EIO;
			hs->state = MC_AS_SEND_PROOF;
			hs->pos = 0;
			break;
		case MC_AS_SEND_PROOF:
			if ((rc = mc_auth_io(hs, fd, MC_AUTH_PROOF_LEN, 1)) <= 0)
				return rc;
			hs->state = MC_AS_DONE;
			break;
		case MC_AS_RECV_HELLO:
			if ((rc = mc_auth_recv_hello(hs, fd)) <= 0)
				return rc;
			memcpy(hs->nc, hs->msg + MC_AUTH_MAGIC_LEN, MC_AUTH_NONCE_LEN);
			memcpy(hs->msg, MC_AUTH_MAGIC, MC_AUTH_MAGIC_LEN);
			memcpy(hs->msg + MC_AUTH_MAGIC_LEN, hs->ns, MC_AUTH_NONCE_LEN);
			if (mc_auth_proof(hs->a, MC_AUTH_LABEL_SERVER, hs->nc, hs->ns,
					  hs->msg + MC_AUTH_MAGIC_LEN + MC_AUTH_NONCE_LEN) != 0)
				return -EIO;
			hs->state = MC_AS_SEND_CHALLENGE;
			hs->pos = 0;
			break;
		case MC_AS_SEND_CHALLENGE:
			if ((rc = mc_auth_io(hs, fd, MC_AUTH_CHALLENGE_LEN, 1)) <= 0)
				return rc;
			hs->state = MC_AS_RECV_PROOF;
			hs->pos = 0;
			break;
		case MC_AS_RECV_PROOF:
			if ((rc = mc_auth_io(hs, fd, MC_AUTH_PROOF_LEN, 0)) <= 0)
				return rc;
			if (mc_auth_proof(hs->a, MC_AUTH_LABEL_CLIENT, hs->nc, hs->ns, mac) != 0)
				return -EIO;
			if (CRYPTO_memcmp(mac, hs->msg, MC_AUTH_MAC_LEN) != 0) {
				hs->why = "wrong proof (a different cluster secret)";
				return MC_AUTH_BAD_PROOF;
			}
			hs->state = MC_AS_DONE;
			break;
		case MC_AS_DONE:
			return MC_AUTH_DONE;
		}
	}
#else
	(void)fd;
	hs->why = "built without OpenSSL";
	return -ENOTSUP;
#endif
}

int mc_auth_hs_run(struct mc_auth_hs *hs, int fd, int timeout_ms)
{
	struct timespec ts;
	int64_t deadline;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	deadline = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + timeout_ms;
	for (;;) {
		struct pollfd p = { .fd = fd };
		int64_t now;
		int rc = mc_auth_hs_step(hs, fd);

		if (rc == MC_AUTH_DONE)
			return 0;
		if (rc != MC_AUTH_AGAIN)
			return rc;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		if (now >= deadline) {
			hs->why = "handshake timeout";
			return -ETIMEDOUT;
		}
		p.events = hs->want_write ? POLLOUT : POLLIN;
		if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR) {
			hs->why = strerror(errno);
			return -errno;
		}
	}
}

/* ---------------------------------------------------------------- HTTP requests */

#ifdef HAVE_OPENSSL
static void mc_auth_hex(const uint8_t *b, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hx[b[i] >> 4];
		out[2 * i + 1] = hx[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* hex(HMAC(K, "mooncake-http-v1\n" method "\n" uri "\n" ts "\n" nonce "\n" hex(SHA-256(body)))) */
static int mc_auth_http_mac(const struct mc_auth *a, const char *method, const char *uri,
			    const void *body, size_t len, const char *ts, const char *nonce,
			    char *out)
{
	uint8_t dig[SHA256_DIGEST_LENGTH], mac[MC_AUTH_MAC_LEN];
	char dhex[2 * SHA256_DIGEST_LENGTH + 1];
	unsigned int maclen = 0;
	size_t mlen;
	char *msg;
	int n;

	if (SHA256(body ? body : (const void *)"", len, dig) == NULL)
		return -EIO;
	mc_auth_hex(dig, sizeof(dig), dhex);
	mlen = strlen(method) + strlen(uri) + strlen(ts) + strlen(nonce) + sizeof(dhex) + 32;
	msg = malloc(mlen);
	if (msg == NULL)
		return -ENOMEM;
	n = snprintf(msg, mlen, "mooncake-http-v1\n%s\n%s\n%s\n%s\n%s", method, uri, ts, nonce,
		     dhex);
	if (HMAC(EVP_sha256(), a->key, (int)a->keylen, (const uint8_t *)msg, (size_t)n, mac,
		 &maclen) == NULL ||
	    maclen != MC_AUTH_MAC_LEN) {
		free(msg);
		return -EIO;
	}
	free(msg);
	mc_auth_hex(mac, sizeof(mac), out);
	return 0;
}
#endif

int mc_auth_http_token(const struct mc_auth *a, char *out)
{
#ifdef HAVE_OPENSSL
	static const char label[] = "mooncake-http-token-v1";
	uint8_t mac[MC_AUTH_MAC_LEN];
	unsigned int maclen = 0;

	if (HMAC(EVP_sha256(), a->key, (int)a->keylen, (const uint8_t *)label, sizeof(label) - 1,
		 mac, &maclen) == NULL)
		return -EIO;
	mc_auth_hex(mac, sizeof(mac), out);
	return 0;
#else
	(void)a;
	out[0] = '\0';
	return -ENOTSUP;
#endif
}

int mc_auth_http_sign(const struct mc_auth *a, const char *method, const char *uri,
		      const void *body, size_t len, int64_t now, char *out, size_t outlen)
{
#ifdef HAVE_OPENSSL
	uint8_t rnd[16];
	char ts[24], nonce[33], mac[2 * MC_AUTH_MAC_LEN + 1];

	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return -EIO;
	mc_auth_hex(rnd, sizeof(rnd), nonce);
	snprintf(ts, sizeof(ts), "%lld", (long long)now);
	if (mc_auth_http_mac(a, method, uri, body, len, ts, nonce, mac) != 0)
		return -EIO;
	snprintf(out, outlen, "%s:%s:%s", ts, nonce, mac);
	return 0;
#else
	(void)a, (void)method, (void)uri, (void)body, (void)len, (void)now, (void)out, (void)outlen;
	return -ENOTSUP;
#endif
}

int mc_auth_http_verify(const struct mc_auth *a, const char *method, const char *uri,
			const void *body, size_t len, const char *sig, const char *bearer,
			int64_t now, const char **why)
{
#ifdef HAVE_OPENSSL
	char want[2 * MC_AUTH_MAC_LEN + 1];

	*why = "no credentials (X-Mooncake-Auth or Authorization: Bearer)";
	if (bearer != NULL && strncmp(bearer, "Bearer ", 7) == 0) {
		const char *t = bearer + 7;

		if (mc_auth_http_token(a, want) != 0)
			return -EACCES;
		if (strlen(t) == MC_AUTH_HTTP_TOKEN_LEN &&
		    CRYPTO_memcmp(t, want, MC_AUTH_HTTP_TOKEN_LEN) == 0)
			return 0;
		*why = "wrong bearer token";
		if (sig == NULL)
			return -EACCES;
	}
	if (sig != NULL) {
		char ts[24], nonce[65];
		const char *c1 = strchr(sig, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		size_t tl, nl;
		char *end;
		long long t;

		*why = "malformed " MC_AUTH_HTTP_HEADER;
		if (c2 == NULL)
			return -EACCES;
		tl = (size_t)(c1 - sig);
		nl = (size_t)(c2 - c1 - 1);
		if (tl == 0 || tl >= sizeof(ts) || nl < 16 || nl >= sizeof(nonce) ||
		    strlen(c2 + 1) != 2 * MC_AUTH_MAC_LEN)
			return -EACCES;
		memcpy(ts, sig, tl);
		ts[tl] = '\0';
		memcpy(nonce, c1 + 1, nl);
		nonce[nl] = '\0';
		if (strspn(nonce, "0123456789abcdefABCDEF") != nl)
			return -EACCES;
		errno = 0;
		t = strtoll(ts, &end, 10);
		if (errno || *end != '\0')
			return -EACCES;
		if (t < now - MC_AUTH_HTTP_SKEW_S || t > now + MC_AUTH_HTTP_SKEW_S) {
			*why = "signature time too far from the server's clock";
			return -EACCES;
		}
		if (mc_auth_http_mac(a, method, uri, body, len, ts, nonce, want) != 0) {
			*why = "cannot compute the signature";
			return -EACCES;
		}
		if (CRYPTO_memcmp(want, c2 + 1, 2 * MC_AUTH_MAC_LEN) != 0) {
			*why = "wrong signature (a different cluster secret, or a changed request)";
			return -EACCES;
		}
		return 0;
	}
	return -EACCES;
#else
	(void)a, (void)method, (void)uri, (void)body, (void)len, (void)sig, (void)bearer, (void)now;
	*why = "built without OpenSSL";
	return -EACCES;
#endif
}
