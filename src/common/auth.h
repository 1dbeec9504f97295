/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_AUTH_H
#define MC_AUTH_H

/*
 * The cluster secret and the connection handshake built on it (doc/protocol.md, "Authentication").
 *
 * When a cluster secret is configured, every connection on every port begins with a mutual
 * challenge-response before the port's own protocol:
 *
 *   client -> server  hello      "MCAUTH1\n" | nonce_c (32 bytes)
 *   server -> client  challenge  "MCAUTH1\n" | nonce_s (32) | HMAC-SHA256(K, "mooncake-auth-v1
 *                                server" | nonce_c | nonce_s)
 *   client -> server  proof      HMAC-SHA256(K, "mooncake-auth-v1 client" | nonce_c | nonce_s)
 *
 * K is the secret file's content (trailing white space removed).  Nonces come from RAND_bytes,
 * MACs from OpenSSL's HMAC and are compared with CRYPTO_memcmp.  A server whose first bytes
 * from a peer are not the hello reports MC_AUTH_NOT_HELLO with those bytes kept, so that the
 * port can refuse in its own protocol's words.
 *
 * A struct mc_auth is immutable once loaded except for its counters (atomics), so one object is
 * shared by every thread and every port of a process.
 */
#include <stddef.h>
#include <stdint.h>

#define MC_AUTH_MAGIC "MCAUTH1\n"
#define MC_AUTH_MAGIC_LEN 8
#define MC_AUTH_NONCE_LEN 32
#define MC_AUTH_MAC_LEN 32
#define MC_AUTH_HELLO_LEN (MC_AUTH_MAGIC_LEN + MC_AUTH_NONCE_LEN)
#define MC_AUTH_CHALLENGE_LEN (MC_AUTH_MAGIC_LEN + MC_AUTH_NONCE_LEN + MC_AUTH_MAC_LEN)
#define MC_AUTH_PROOF_LEN MC_AUTH_MAC_LEN
#define MC_AUTH_SECRET_MIN 16
#define MC_AUTH_SECRET_MAX 4096
/* Default time a peer has to complete the handshake (MC_AUTH_TIMEOUT_MS overrides it). */
#define MC_AUTH_TIMEOUT_MS 5000

#define MC_AUTH_SECRET_ENV "MOONCAKE_CLUSTER_SECRET_FILE"

struct mc_auth;

/* Load the secret from path.  path NULL or "": *out = NULL and 0 (an open cluster).  Otherwise
 * 0 and an owned reference in *out, or -ENOTSUP (built without OpenSSL), -EPERM (the file is
 * readable by others), -EINVAL (shorter than MC_AUTH_SECRET_MIN or longer than the maximum) or
 * -errno, with a sentence in err. */
int mc_auth_load(const char *path, struct mc_auth **out, char *err, size_t errlen);
/* mc_auth_load(getenv(MOONCAKE_CLUSTER_SECRET_FILE)). */
int mc_auth_load_env(struct mc_auth **out, char *err, size_t errlen);
/* For tools built on the libraries: check the secret file a --flag names and put it in the
 * environment (MOONCAKE_CLUSTER_SECRET_FILE) for the store and engine the tool creates.  path
 * "" or NULL: nothing.  0, or -1 with "invalid value 'PATH' for --FLAG: reason" in err. */
int mc_auth_export(const char *flag, const char *path, char *err, size_t errlen);
/* A daemon's one start-up line about the secret: a notice naming its file, or (a NULL: an
 * open cluster) a warning saying what anyone who reaches the daemon can do (open_risk). */
void mc_auth_announce(const struct mc_auth *a, const char *open_risk);
/* The path the secret came from (for log lines). */
const char *mc_auth_path(const struct mc_auth *a);
struct mc_auth *mc_auth_ref(struct mc_auth *a);
void mc_auth_unref(struct mc_auth *a);
/* Whether the build can authenticate at all. */
int mc_auth_available(void);
/* The handshake timeout in ms (MC_AUTH_TIMEOUT_MS, default 5000). */
int mc_auth_timeout_ms(void);

/* Peers refused so far by this process on any port (a, or NULL: 0). */
uint64_t mc_auth_failures(const struct mc_auth *a);
/* Count one refused peer and log it (rate-limited to a few lines a second; the suppressed ones
 * are counted in the next line).  what: the port ("master RPC"), peer: its address. */
void mc_auth_refused(struct mc_auth *a, const char *what, const char *peer, const char *why);

struct mc_auth_hs;
/* mc_auth_refused for a handshake that failed with rc, unless the peer closed before sending a
 * byte (a port probe, a health check: logged at debug level, not counted). */
void mc_auth_hs_refused(struct mc_auth *a, const char *what, const char *peer, int rc,
			const struct mc_auth_hs *hs);

enum mc_auth_role {
	MC_AUTH_CLIENT = 0,
	MC_AUTH_SERVER = 1,
};

/* Results of mc_auth_hs_step besides -errno. */
#define MC_AUTH_DONE 1
#define MC_AUTH_AGAIN 0
#define MC_AUTH_BAD_PROOF (-10001)	/* the peer does not know our secret */
#define MC_AUTH_NOT_HELLO (-10002)	/* server: the peer speaks without the handshake */

/* Moves bytes of the handshake for a connection that is not a plain socket (TLS through a
 * bufferevent): like recv/send with MSG_DONTWAIT, -1 with errno EAGAIN when nothing can move,
 * 0 from a read at end of stream. */
typedef long (*mc_auth_io_fn)(void *ctx, void *buf, size_t n, int writing);

/* One handshake in progress on a socket.  Embedded by its owner; holds no resource. */
struct mc_auth_hs {
	const struct mc_auth *a;
	mc_auth_io_fn io;		/* NULL: recv/send on the fd given to mc_auth_hs_step */
	void *io_ctx;
	int role;
	int state;
	int want_write;			/* AGAIN: wait for writability, else readability */
	size_t pos;			/* bytes of the current message moved so far */
	uint8_t msg[MC_AUTH_CHALLENGE_LEN];
	uint8_t nc[MC_AUTH_NONCE_LEN], ns[MC_AUTH_NONCE_LEN];
	const char *why;		/* a failure in words */
};

/* Begin a handshake.  0, or -EIO when no random bytes could be had. */
int mc_auth_hs_init(struct mc_auth_hs *hs, const struct mc_auth *a, int role);
/* Move the handshake as far as the socket allows without blocking (MSG_DONTWAIT; fd may be
 * blocking or not).  Returns MC_AUTH_DONE (the port's protocol may start: the handshake read
 * nothing beyond its own bytes), MC_AUTH_AGAIN (wait for hs->want_write ? writable : readable),
 * MC_AUTH_BAD_PROOF, MC_AUTH_NOT_HELLO (server only: msg[0..pos) holds the peer's first bytes,
 * at most MC_AUTH_MAGIC_LEN), or -errno (-ECONNRESET for a peer that closed).  hs->why says
 * what went wrong. */
int mc_auth_hs_step(struct mc_auth_hs *hs, int fd);
/* Run a whole handshake on fd, waiting with poll(2) up to timeout_ms in all (for threads that
 * own a socket).  Returns 0 or what mc_auth_hs_step failed with (-ETIMEDOUT on timeout). */
int mc_auth_hs_run(struct mc_auth_hs *hs, int fd, int timeout_ms);

/* ---------------------------------------------------------------- HTTP requests
 * A write request is authenticated by the header
 *   X-Mooncake-Auth: <unix seconds>:<nonce, 16 to 64 hex digits>:<64 hex digits>
 * where the last field is hex(HMAC-SHA256(K, "mooncake-http-v1\n" method "\n" uri "\n" seconds
 * "\n" nonce "\n" hex(SHA-256(body)))) and seconds is within MC_AUTH_HTTP_SKEW_S of the server's
 * clock, or by "Authorization: Bearer <token>" where the token is mc_auth_http_token's. */
#define MC_AUTH_HTTP_HEADER "X-Mooncake-Auth"
#define MC_AUTH_HTTP_SKEW_S 300
#define MC_AUTH_HTTP_TOKEN_LEN 64	/* hex digits */

/* The bearer token derived from the secret (hex, NUL-terminated; out has room for
 * MC_AUTH_HTTP_TOKEN_LEN + 1).  0 or -EIO. */
int mc_auth_http_token(const struct mc_auth *a, char *out);
/* Fill out (room for 128 bytes) with the X-Mooncake-Auth value for this request at time now.
 * 0 or -EIO. */
int mc_auth_http_sign(const struct mc_auth *a, const char *method, const char *uri,
		      const void *body, size_t len, int64_t now, char *out, size_t outlen);
/* Check a request: sig is the X-Mooncake-Auth value and bearer the Authorization value (either
 * may be NULL).  0 when one of them is right; otherwise -EACCES with a reason in *why. */
int mc_auth_http_verify(const struct mc_auth *a, const char *method, const char *uri,
			const void *body, size_t len, const char *sig, const char *bearer,
			int64_t now, const char **why);

#endif
