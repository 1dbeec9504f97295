/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster secret (src/common/auth.c) without daemons: loading secret files (too short,
 * readable by others, trailing newline), the handshake between two ends of a socket pair (the
 * same secret, another secret, a peer speaking without the handshake, a peer that trickles its
 * bytes one at a time, a bufferevent-style I/O function), and HTTP signatures (a good one, a
 * changed method, URI or body, a stale time, a malformed header, the bearer token).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "tap.h"

static char dir[] = "/tmp/mc-auth-XXXXXX";

static const char *write_file(const char *name, const char *content, mode_t mode)
{
	static char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content))
		abort();
	close(fd);
	chmod(path, mode);
	return path;
}

static struct mc_auth *load(const char *name, const char *content, mode_t mode, int *rc)
{
	struct mc_auth *a = NULL;
	char err[512];

	*rc = mc_auth_load(write_file(name, content, mode), &a, err, sizeof(err));
	return a;
}

/* Run a client and a server handshake against each other, alternating steps, on a socket pair.
 * Returns the server's result; *crc gets the client's. */
static int duel(struct mc_auth *ca, struct mc_auth *sa, int *crc)
{
	struct mc_auth_hs c, s;
	int sv[2], i, cr = MC_AUTH_AGAIN, sr = MC_AUTH_AGAIN;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		abort();
	mc_auth_hs_init(&c, ca, MC_AUTH_CLIENT);
	mc_auth_hs_init(&s, sa, MC_AUTH_SERVER);
	for (i = 0; i < 20 && (cr == MC_AUTH_AGAIN || sr == MC_AUTH_AGAIN); i++) {
		if (cr == MC_AUTH_AGAIN)
			cr = mc_auth_hs_step(&c, sv[0]);
		if (sr == MC_AUTH_AGAIN)
			sr = mc_auth_hs_step(&s, sv[1]);
		if (cr != MC_AUTH_AGAIN && cr != MC_AUTH_DONE)
			shutdown(sv[0], SHUT_RDWR);	/* a client that gives up closes */
	}
	close(sv[0]);
	close(sv[1]);
	*crc = cr;
	return sr;
}

/* A bufferevent stand-in: reads from an in-memory input, writes to an output. */
struct mem_io {
	uint8_t in[256], out[256];
	size_t in_len, in_pos, out_len;
};

static long mem_io(void *ctx, void *buf, size_t n, int writing)
{
	struct mem_io *m = ctx;

	if (writing) {
		memcpy(m->out + m->out_len, buf, n);
		m->out_len += n;
		return (long)n;
	}
	if (m->in_pos == m->in_len) {
		errno = EAGAIN;
		return -1;
	}
	if (n > m->in_len - m->in_pos)
		n = m->in_len - m->in_pos;
	memcpy(buf, m->in + m->in_pos, n);
	m->in_pos += n;
	return (long)n;
}

static void test_load(void)
{
	struct mc_auth *a;
	int rc;

	a = load("short", "0123456789\n", 0600, &rc);
	ok(a == NULL && rc == -EINVAL, "a secret under 16 bytes is refused (%d)", rc);
	a = load("open", "0123456789abcdef0123\n", 0644, &rc);
	ok(a == NULL && rc == -EPERM, "a secret others may read is refused (%d)", rc);
	a = load("good", "0123456789abcdef0123\n", 0600, &rc);
	ok(a != NULL && rc == 0, "a 20-byte secret with a newline loads");
	mc_auth_unref(a);
	{
		char err[256];

		ok(mc_auth_load("", &a, err, sizeof(err)) == 0 && a == NULL,
		   "no path: an open cluster");
		ok(mc_auth_load("/nonexistent/secret", &a, err, sizeof(err)) == -ENOENT,
		   "a missing file is -ENOENT: %s", err);
	}
}

static void test_handshake(void)
{
	struct mc_auth *a, *same, *other;
	int rc, crc, sr;

	a = load("k1", "the-cluster-secret-1\n", 0600, &rc);
	same = load("k2", "the-cluster-secret-1", 0600, &rc);	/* no newline: the same key */
	other = load("k3", "another-secret-entirely", 0600, &rc);
	sr = duel(a, same, &crc);
	is(sr, MC_AUTH_DONE, "the same secret: the server accepts");
	is(crc, MC_AUTH_DONE, "and the client accepts the server");
	sr = duel(a, other, &crc);
	is(crc, MC_AUTH_BAD_PROOF, "another secret: the client finds the server's proof wrong");
	ok(sr != MC_AUTH_DONE, "and the server never accepts (%d)", sr);
	ok(mc_auth_failures(a) == 0, "nothing counted without mc_auth_refused");
	mc_auth_refused(a, "test", "peer", "why");
	is(mc_auth_failures(a), 1, "mc_auth_refused counts");

	/* A peer without the handshake: an RPC frame's first bytes. */
	{
		struct mc_auth_hs s;
		int sv[2];

		socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
		mc_auth_hs_init(&s, a, MC_AUTH_SERVER);
		if (write(sv[0], "MCRP\x01\x00\x01\x00", 8) != 8)
			abort();
		rc = mc_auth_hs_step(&s, sv[1]);
		is(rc, MC_AUTH_NOT_HELLO, "a peer speaking RPC without the handshake is NOT_HELLO");
		ok(s.pos >= 1 && s.pos <= MC_AUTH_MAGIC_LEN && memcmp(s.msg, "MC", 2) == 0,
		   "its first bytes are kept for the port's refusal (%zu)", s.pos);
		close(sv[0]);
		close(sv[1]);
	}
	/* A hello trickled one byte at a time is still a hello. */
	{
		struct mc_auth_hs s;
		uint8_t hello[MC_AUTH_HELLO_LEN];
		int sv[2], i;

		socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
		mc_auth_hs_init(&s, a, MC_AUTH_SERVER);
		memcpy(hello, MC_AUTH_MAGIC, MC_AUTH_MAGIC_LEN);
		memset(hello + MC_AUTH_MAGIC_LEN, 7, MC_AUTH_NONCE_LEN);
		for (i = 0, rc = MC_AUTH_AGAIN; i < MC_AUTH_HELLO_LEN && rc == MC_AUTH_AGAIN; i++) {
			if (write(sv[0], hello + i, 1) != 1)
				abort();
			rc = mc_auth_hs_step(&s, sv[1]);
		}
		is(rc, MC_AUTH_AGAIN, "a trickled hello is read to its end (challenge sent, proof awaited)");
		close(sv[0]);
		rc = mc_auth_hs_step(&s, sv[1]);
		is(rc, -ECONNRESET, "a peer that closes before its proof is -ECONNRESET");
		close(sv[1]);
	}
	/* Through an I/O function (as over a TLS bufferevent): hello in, challenge out. */
	{
		struct mc_auth_hs s;
		struct mem_io m = { .in_len = MC_AUTH_HELLO_LEN };

		memcpy(m.in, MC_AUTH_MAGIC, MC_AUTH_MAGIC_LEN);
		mc_auth_hs_init(&s, a, MC_AUTH_SERVER);
		s.io = mem_io;
		s.io_ctx = &m;
		rc = mc_auth_hs_step(&s, -1);
		ok(rc == MC_AUTH_AGAIN && m.out_len == MC_AUTH_CHALLENGE_LEN &&
			   memcmp(m.out, MC_AUTH_MAGIC, MC_AUTH_MAGIC_LEN) == 0,
		   "over an I/O function the challenge goes out (%d, %zu bytes)", rc, m.out_len);
	}
	{
		struct mc_auth_hs c;
		int sv[2];

		socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
		mc_auth_hs_init(&c, a, MC_AUTH_CLIENT);
		rc = mc_auth_hs_run(&c, sv[0], 200);
		is(rc, -ETIMEDOUT, "a server that never answers: -ETIMEDOUT after the bound");
		close(sv[0]);
		close(sv[1]);
	}
	mc_auth_unref(a);
	mc_auth_unref(same);
	mc_auth_unref(other);
}

static void test_http(void)
{
	struct mc_auth *a, *other;
	char sig[160], tok[MC_AUTH_HTTP_TOKEN_LEN + 1], bearer[100];
	const char *why = NULL;
	int64_t now = (int64_t)time(NULL);
	int rc;

	a = load("h1", "http-secret-0123456789", 0600, &rc);
	other = load("h2", "http-secret-9876543210", 0600, &rc);
	ok(mc_auth_http_sign(a, "POST", "/api/v1/remove?key=k", "", 0, now, sig, sizeof(sig)) == 0,
	   "sign a request: %s", sig);
	is(mc_auth_http_verify(a, "POST", "/api/v1/remove?key=k", "", 0, sig, NULL, now, &why), 0,
	   "its signature verifies");
	ok(mc_auth_http_verify(a, "DELETE", "/api/v1/remove?key=k", "", 0, sig, NULL, now, &why) ==
		   -EACCES, "another method fails: %s", why);
	ok(mc_auth_http_verify(a, "POST", "/api/v1/remove?key=x", "", 0, sig, NULL, now, &why) ==
		   -EACCES, "another URI fails");
	ok(mc_auth_http_verify(a, "POST", "/api/v1/remove?key=k", "b", 1, sig, NULL, now, &why) ==
		   -EACCES, "another body fails");
	ok(mc_auth_http_verify(other, "POST", "/api/v1/remove?key=k", "", 0, sig, NULL, now, &why) ==
		   -EACCES, "another secret fails");
	ok(mc_auth_http_verify(a, "POST", "/api/v1/remove?key=k", "", 0, sig, NULL,
			       now + MC_AUTH_HTTP_SKEW_S + 5, &why) == -EACCES,
	   "a signature older than the window fails: %s", why);
	ok(mc_auth_http_verify(a, "POST", "/x", "", 0, "12:zz:00", NULL, now, &why) == -EACCES,
	   "a malformed header fails: %s", why);
	ok(mc_auth_http_verify(a, "POST", "/x", "", 0, NULL, NULL, now, &why) == -EACCES,
	   "no credentials fail: %s", why);
	ok(mc_auth_http_token(a, tok) == 0 && strlen(tok) == MC_AUTH_HTTP_TOKEN_LEN,
	   "the bearer token is 64 hex digits");
	snprintf(bearer, sizeof(bearer), "Bearer %s", tok);
	is(mc_auth_http_verify(a, "PUT", "/metadata?key=k", "{}", 2, NULL, bearer, now, &why), 0,
	   "the bearer token is accepted");
	ok(mc_auth_http_verify(other, "PUT", "/metadata?key=k", "{}", 2, NULL, bearer, now, &why) ==
		   -EACCES, "another secret's token is not");
	mc_auth_unref(a);
	mc_auth_unref(other);
}

int main(void)
{
	if (!mc_auth_available()) {
		printf("1..0 # SKIP built without OpenSSL\n");
		return 77;
	}
	if (mkdtemp(dir) == NULL)
		return 1;
	test_load();
	test_handshake();
	test_http();
	tap_rmtree(dir);
	return tap_done();
}
