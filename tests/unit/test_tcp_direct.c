/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the calling thread's TCP data client (src/transfer/tcp_direct.c) against the data
 * server on a loop thread: batches of many small writes and reads pipelined on one connection,
 * verified byte for byte and by CRC-64; a refused range in the middle of a batch; two peers in
 * one batch; large payloads among small ones; a peer that went away and came back on the same
 * port; a peer that never answers; a peer that answers garbage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/crc64.h"
#include "common/errcode.h"
#include "reactor/loop_thread.h"
#include "tap.h"
#include "transfer/memreg.h"
#include "transfer/tcp.h"

struct srv {
	struct mc_loop_thread *lt;
	struct mc_memreg *reg;
	struct mc_tcp_server *s;
	uint16_t port;
	struct mc_waiter w;
};

static void srv_start_on_loop(void *arg)
{
	struct srv *a = arg;
	int err = 0;

	a->s = mc_tcp_server_new(mc_loop_thread_base(a->lt), "127.0.0.1", a->port, a->reg, &err);
	if (a->s)
		a->port = mc_tcp_server_port(a->s);
	mc_waiter_signal(&a->w, a->s ? 0 : err);
}

static void srv_stop_on_loop(void *arg)
{
	struct srv *a = arg;

	mc_tcp_server_free(a->s);
	a->s = NULL;
	mc_waiter_signal(&a->w, 0);
}

static int on_loop(struct srv *a, void (*fn)(void *))
{
	int rc;

	mc_waiter_init(&a->w);
	mc_loop_thread_call(a->lt, fn, a);
	rc = mc_waiter_wait(&a->w);
	mc_waiter_fini(&a->w);
	return rc;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A listener that accepts and then either says nothing or answers every request with bytes
 * that are no status frame. */
struct fake {
	int lfd;
	uint16_t port;
	int garbage;
	pthread_t th;
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	int fd = accept(f->lfd, NULL, NULL);
	uint8_t buf[4096];

	if (fd < 0)
		return NULL;
	if (f->garbage) {
		if (recv(fd, buf, sizeof(buf), 0) > 0 && send(fd, "GARBAGE!GARBAGE!", 16, 0) < 0) {
			/* the test sees the failure */
		}
	}
	/* Hold the connection until the client gives up on it. */
	while (recv(fd, buf, sizeof(buf), 0) > 0)
		;
	close(fd);
	return NULL;
}

static int fake_start(struct fake *f, int garbage)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->garbage = garbage;
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(f->lfd, 4) != 0 || getsockname(f->lfd, (struct sockaddr *)&sa, &len) != 0)
		return -1;
	f->port = ntohs(sa.sin_port);
	return pthread_create(&f->th, NULL, fake_main, f);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->th, NULL);
	close(f->lfd);
}

int main(void)
{
	enum { N = 200, SMALL = 64 };
	static struct mc_tcp_dop ops[N + 4];
	struct srv a = { 0 }, b = { 0 };
	struct mc_tcp_dpeer peers[2];
	struct mc_tcp_client_opts o = { .connect_timeout_ms = 1000, .io_timeout_ms = 300 };
	struct mc_tcp_direct *d;
	size_t big = 1u << 20, i;
	uint8_t *remote, *remote2, *local;
	int bad, left;

	signal(SIGPIPE, SIG_IGN);
	remote = calloc(1, big);
	remote2 = calloc(1, big);
	local = calloc(1, big);
	a.lt = mc_loop_thread_new("srv-a");
	b.lt = mc_loop_thread_new("srv-b");
	mc_loop_thread_start(a.lt);
	mc_loop_thread_start(b.lt);
	a.reg = mc_memreg_new();
	b.reg = mc_memreg_new();
	mc_memreg_add(a.reg, (uint64_t)(uintptr_t)remote, big);
	mc_memreg_add(b.reg, (uint64_t)(uintptr_t)remote2, big);
	ok(on_loop(&a, srv_start_on_loop) == 0 && on_loop(&b, srv_start_on_loop) == 0,
	   "two data servers listening");
	d = mc_tcp_direct_new(&o);
	ok(d != NULL, "direct client created");

	/* N small writes in one batch, every other one with its CRC-64. */
	fill(local, N * SMALL, 1);
	memset(ops, 0, sizeof(ops));
	for (i = 0; i < N; i++) {
		ops[i].opcode = MC_XFER_WRITE;
		ops[i].local = local + i * SMALL;
		ops[i].remote = (uint64_t)(uintptr_t)remote + i * SMALL;
		ops[i].len = SMALL;
		ops[i].want_crc = i % 2;
	}
	peers[0] = (struct mc_tcp_dpeer){ "127.0.0.1", a.port, ops, N };
	is(mc_tcp_direct_run(d, peers, 1), 0, "a batch of %d small writes runs", N);
	for (i = 0, bad = 0; i < N; i++)
		bad += ops[i].status != 0 ||
		       (ops[i].want_crc && ops[i].crc != mc_crc64(0, local + i * SMALL, SMALL));
	ok(bad == 0 && memcmp(local, remote, N * SMALL) == 0,
	   "every write succeeded, arrived intact, with the right CRC-64");

	/* N small reads back, on the pooled connection. */
	memset(local, 0, N * SMALL);
	for (i = 0; i < N; i++)
		ops[i].opcode = MC_XFER_READ;
	is(mc_tcp_direct_run(d, peers, 1), 0, "a batch of %d small reads runs", N);
	for (i = 0, bad = 0; i < N; i++)
		bad += ops[i].status != 0 ||
		       (ops[i].want_crc && ops[i].crc != mc_crc64(0, remote + i * SMALL, SMALL));
	ok(bad == 0 && memcmp(local, remote, N * SMALL) == 0,
	   "every read succeeded, bytes and CRC-64 intact");

	/* A refused range in the middle: that one fails, its neighbours do not. */
	for (i = 0; i < 3; i++) {
		ops[i].opcode = MC_XFER_WRITE;
		ops[i].len = SMALL;
		ops[i].want_crc = 0;
	}
	ops[1].remote = 64;	/* not registered */
	fill(local, 3 * SMALL, 7);
	peers[0].n = 3;
	mc_tcp_direct_run(d, peers, 1);
	ok(ops[0].status == 0 && ops[1].status == MC_ERR_TRANSFER_FAIL && ops[2].status == 0 &&
		   memcmp(remote, local, SMALL) == 0 &&
		   memcmp(remote + 2 * SMALL, local + 2 * SMALL, SMALL) == 0,
	   "a refused write fails alone, in the middle of its batch");
	ops[1].remote = (uint64_t)(uintptr_t)remote + SMALL;

	/* Large and small, writes and reads, over two peers at once. */
	fill(local, big, 9);
	ops[0] = (struct mc_tcp_dop){ .opcode = MC_XFER_WRITE, .local = local,
				      .remote = (uint64_t)(uintptr_t)remote, .len = 300000,
				      .want_crc = 1 };
	ops[1] = (struct mc_tcp_dop){ .opcode = MC_XFER_WRITE, .local = local + 300000,
				      .remote = (uint64_t)(uintptr_t)remote + 300000, .len = 5 };
	ops[2] = (struct mc_tcp_dop){ .opcode = MC_XFER_WRITE, .local = local + 400000,
				      .remote = (uint64_t)(uintptr_t)remote2, .len = 200000 };
	fill(remote2 + 500000, 100000, 11);
	ops[3] = (struct mc_tcp_dop){ .opcode = MC_XFER_READ, .local = local + 700000,
				      .remote = (uint64_t)(uintptr_t)remote2 + 500000,
				      .len = 100000, .want_crc = 1 };
	peers[0] = (struct mc_tcp_dpeer){ "127.0.0.1", a.port, ops, 2 };
	peers[1] = (struct mc_tcp_dpeer){ "127.0.0.1", b.port, ops + 2, 2 };
	mc_tcp_direct_run(d, peers, 2);
	ok(ops[0].status == 0 && ops[1].status == 0 && ops[2].status == 0 && ops[3].status == 0 &&
		   memcmp(remote, local, 300005) == 0 &&
		   memcmp(remote2, local + 400000, 200000) == 0 &&
		   memcmp(local + 700000, remote2 + 500000, 100000) == 0 &&
		   ops[0].crc == mc_crc64(0, local, 300000) &&
		   ops[3].crc == mc_crc64(0, remote2 + 500000, 100000),
	   "large and small transfers over two peers in one batch");

	/* The peer goes away: its pooled connection is dropped and the connect refused, which
	 * fails the request at once (the lanes would only be refused again). */
	on_loop(&a, srv_stop_on_loop);
	ops[0] = (struct mc_tcp_dop){ .opcode = MC_XFER_WRITE, .local = local,
				      .remote = (uint64_t)(uintptr_t)remote, .len = SMALL };
	peers[0] = (struct mc_tcp_dpeer){ "127.0.0.1", a.port, ops, 1 };
	mc_tcp_direct_run(d, peers, 1);
	is(ops[0].status, MC_ERR_TRANSFER_FAIL, "a stopped peer's request fails");
	/* ... and comes back on the same port. */
	ok(on_loop(&a, srv_start_on_loop) == 0, "the peer is back on port %u", a.port);
	fill(local, SMALL, 13);
	mc_tcp_direct_run(d, peers, 1);
	ok(ops[0].status == 0 && memcmp(remote, local, SMALL) == 0,
	   "a request to the restarted peer succeeds");

	/* A peer that never answers: the batch fails after the progress timeout. */
	{
		struct fake f;
		double t0;

		ok(fake_start(&f, 0) == 0, "a silent peer listening");
		for (i = 0; i < 3; i++)
			ops[i] = (struct mc_tcp_dop){ .opcode = MC_XFER_WRITE, .local = local,
						      .remote = 4096, .len = SMALL };
		peers[0] = (struct mc_tcp_dpeer){ "127.0.0.1", f.port, ops, 3 };
		t0 = now_s();
		mc_tcp_direct_run(d, peers, 1);
		for (i = 0, left = 0; i < 3; i++)
			left += ops[i].status == MC_ERR_TRANSFER_FAIL;
		ok(left == 3 && now_s() - t0 >= 0.25 && now_s() - t0 < 5,
		   "a silent peer's requests fail after the progress timeout (%.2f s)", now_s() - t0);
		fake_stop(&f);
	}

	/* A peer that answers garbage: its requests fail, nothing is left pending. */
	{
		struct fake f;

		ok(fake_start(&f, 1) == 0, "a garbage-answering peer listening");
		peers[0] = (struct mc_tcp_dpeer){ "127.0.0.1", f.port, ops, 3 };
		mc_tcp_direct_run(d, peers, 1);
		for (i = 0, left = 0; i < 3; i++)
			left += ops[i].status == MC_ERR_TRANSFER_FAIL;
		is(left, 3, "a peer answering garbage fails its requests");
		fake_stop(&f);
	}

	mc_tcp_direct_free(d);
	on_loop(&a, srv_stop_on_loop);
	on_loop(&b, srv_stop_on_loop);
	mc_loop_thread_stop_and_free(a.lt);
	mc_loop_thread_stop_and_free(b.lt);
	mc_memreg_free(a.reg);
	mc_memreg_free(b.reg);
	free(remote);
	free(remote2);
	free(local);
	return tap_done();
}
