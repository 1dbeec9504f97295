/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the TCP data plane (src/transfer): a server and a client on two loop threads move
 * data of many sizes, verified byte for byte; refused ranges; garbage; a peer that dies; a peer
 * that comes back.  With --bench it measures throughput against a forked server process.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/crc64.h"
#include "common/errcode.h"
#include "common/wire.h"
#include "reactor/loop_thread.h"
#include "tap.h"
#include "transfer/memreg.h"
#include "transfer/tcp.h"

static struct mc_loop_thread *srv_lt, *cli_lt;
static struct mc_tcp_client *cli;
static uint16_t srv_port;

struct op {
	int opcode;
	void *local;
	uint64_t remote, len;
	int status;
	struct mc_waiter w;
	uint16_t port;
	int want_crc;		/* ask for the CRC-64 of the bytes moved, into crc */
	uint64_t crc;
};

static void op_done(void *arg, int status)
{
	struct op *o = arg;

	mc_waiter_signal(&o->w, status);
}

static void op_submit(void *arg)
{
	struct op *o = arg;

	if (mc_tcp_client_submit(cli, "127.0.0.1", o->port, o->opcode, o->local, o->remote, o->len,
				 op_done, o, o->want_crc ? &o->crc : NULL) != 0)
		mc_waiter_signal(&o->w, -EINVAL);
}

/* Run n transfers at once and return how many failed. */
static int run_ops(struct op *ops, int n)
{
	int i, failed = 0;

	for (i = 0; i < n; i++) {
		mc_waiter_init(&ops[i].w);
		if (!ops[i].port)
			ops[i].port = srv_port;
		mc_loop_thread_call(cli_lt, op_submit, &ops[i]);
	}
	for (i = 0; i < n; i++) {
		ops[i].status = mc_waiter_wait(&ops[i].w);
		failed += ops[i].status != 0;
		mc_waiter_fini(&ops[i].w);
	}
	return failed;
}

static int xfer(int opcode, void *local, void *remote, uint64_t len)
{
	struct op o = { .opcode = opcode, .local = local, .remote = (uint64_t)(uintptr_t)remote,
			.len = len };

	run_ops(&o, 1);
	return o.status;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

struct srv_arg {
	struct mc_memreg *reg;
	struct mc_tcp_server *s;
	uint16_t port;
	struct mc_waiter w;
};

static void srv_start(void *arg)
{
	struct srv_arg *a = arg;
	int err = 0;

	a->s = mc_tcp_server_new(mc_loop_thread_base(srv_lt), "127.0.0.1", a->port, a->reg, &err);
	mc_waiter_signal(&a->w, a->s ? 0 : err);
}

static void srv_stop(void *arg)
{
	struct srv_arg *a = arg;

	mc_tcp_server_free(a->s);
	a->s = NULL;
	mc_waiter_signal(&a->w, 0);
}

static void on_loop(struct mc_loop_thread *lt, void (*fn)(void *), struct srv_arg *a)
{
	mc_waiter_init(&a->w);
	mc_loop_thread_call(lt, fn, a);
	mc_waiter_wait(&a->w);
	mc_waiter_fini(&a->w);
}

static void cli_new(void *arg)
{
	cli = mc_tcp_client_new(mc_loop_thread_base(cli_lt), NULL);
	mc_waiter_signal(arg, 0);
}

/* A client with short connect and progress timeouts, as the store uses against silent peers. */
static void cli_new_short(void *arg)
{
	struct mc_tcp_client_opts o = { .connect_timeout_ms = 300, .io_timeout_ms = 300 };

	cli = mc_tcp_client_new(mc_loop_thread_base(cli_lt), &o);
	mc_waiter_signal(arg, 0);
}

/* A client with a 1 s progress timeout. */
static void cli_new_1s(void *arg)
{
	struct mc_tcp_client_opts o = { .io_timeout_ms = 1000 };

	cli = mc_tcp_client_new(mc_loop_thread_base(cli_lt), &o);
	mc_waiter_signal(arg, 0);
}

/* A client whose peers take at most 1 MiB of transfers at once (the rest wait). */
static void cli_new_bounded(void *arg)
{
	struct mc_tcp_client_opts o = { .max_queued_bytes = 1u << 20 };

	cli = mc_tcp_client_new(mc_loop_thread_base(cli_lt), &o);
	mc_waiter_signal(arg, 0);
}

static void cli_free(void *arg)
{
	mc_tcp_client_free(cli);
	mc_waiter_signal(arg, 0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A peer that answers one READ of len bytes with its status, then the payload step bytes at a
 * time every gap_ms (a forked process on a raw socket); the read goes through the current
 * client.  Returns the transfer's status; *crc gets its CRC-64. */
static int trickle_read(uint8_t *local, const uint8_t *src, size_t len, size_t step, int gap_ms,
			uint64_t *crc)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct op o = { .opcode = MC_XFER_READ, .local = local, .len = len, .want_crc = 1 };
	pid_t pid;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 4) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		uint8_t hdr[MC_TCP_HDR_LEN], status[8];
		int fd = accept(lfd, NULL, NULL);
		size_t got = 0, off;

		while (fd >= 0 && got < sizeof(hdr)) {
			ssize_t r = recv(fd, hdr + got, sizeof(hdr) - got, 0);

			if (r <= 0)
				_exit(1);
			got += (size_t)r;
		}
		mc_put_le64(status, (uint64_t)MC_TCP_STATUS_MAGIC << 32);
		if (send(fd, status, 8, 0) != 8)
			_exit(1);
		for (off = 0; off < len; off += step) {
			usleep((useconds_t)gap_ms * 1000);
			if (send(fd, src + off, len - off < step ? len - off : step, 0) < 0)
				_exit(1);
		}
		pause();
		_exit(0);
	}
	close(lfd);
	o.port = ntohs(sa.sin_port);
	run_ops(&o, 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	*crc = o.crc;
	return o.status;
}

static int bench(void)
{
	size_t sizes[] = { 64u << 10, 1u << 20, 16u << 20 };
	size_t total = 256u << 20;
	uint8_t *remote = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint8_t *local = malloc(total);
	int pfd[2], k;
	pid_t pid;

	memset(local, 1, total);
	memset(remote, 2, total);
	if (pipe(pfd))
		return 1;
	pid = fork();
	if (pid == 0) {
		struct srv_arg a = { .reg = mc_memreg_new() };

		srv_lt = mc_loop_thread_new("srv");
		mc_loop_thread_start(srv_lt);
		mc_memreg_add(a.reg, (uint64_t)(uintptr_t)remote, total);
		on_loop(srv_lt, srv_start, &a);
		a.port = mc_tcp_server_port(a.s);
		if (write(pfd[1], &a.port, sizeof(a.port)) != sizeof(a.port))
			_exit(1);
		pause();
		_exit(0);
	}
	if (read(pfd[0], &srv_port, sizeof(srv_port)) != sizeof(srv_port))
		return 1;
	for (k = 0; k < 3; k++) {
		size_t sz = sizeof(sizes) > 0 ? sizes[k] : 0, n = total / sz, i;
		int op;

		for (op = 0; op < 2; op++) {
			struct op *ops = calloc(n, sizeof(*ops));
			double t0, best = 0;
			int rep;

			for (rep = 0; rep < 5; rep++) {
				for (i = 0; i < n; i++) {
					ops[i].opcode = op ? MC_XFER_WRITE : MC_XFER_READ;
					ops[i].local = local + i * sz;
					ops[i].remote = (uint64_t)(uintptr_t)remote + i * sz;
					ops[i].len = sz;
					ops[i].port = 0;
				}
				t0 = now_s();
				if (run_ops(ops, (int)n))
					printf("# errors!\n");
				t0 = now_s() - t0;
				if (best == 0 || total / t0 > best)
					best = total / t0;
			}
			printf("%s %8zu B: %.2f GB/s (best of 5, %zu transfers in flight)\n",
			       op ? "write" : "read ", sz, best / 1e9, n);
			free(ops);
		}
	}
	/* Latency: one 1 MiB transfer at a time. */
	for (k = 0; k < 2; k++) {
		double t0 = now_s();
		int i;

		for (i = 0; i < 200; i++)
			xfer(k ? MC_XFER_WRITE : MC_XFER_READ, local, remote, 1u << 20);
		printf("%s 1 MiB one at a time: %.1f us each\n", k ? "write" : "read ",
		       (now_s() - t0) / 200 * 1e6);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1, 4095, 65536, (1u << 20) + 7, 64u << 20 };
	struct srv_arg a = { 0 };
	struct mc_waiter w;
	size_t big = 64u << 20, i;
	uint8_t *remote, *local;
	int bad = 0;

	signal(SIGPIPE, SIG_IGN);
	cli_lt = mc_loop_thread_new("cli");
	mc_loop_thread_start(cli_lt);
	mc_waiter_init(&w);
	mc_loop_thread_call(cli_lt, cli_new, &w);
	mc_waiter_wait(&w);
	mc_waiter_fini(&w);
	if (argc > 1 && !strcmp(argv[1], "--bench"))
		return bench();

	srv_lt = mc_loop_thread_new("srv");
	mc_loop_thread_start(srv_lt);
	a.reg = mc_memreg_new();
	remote = malloc(big + 4096);
	local = malloc(big + 4096);
	is(mc_memreg_add(a.reg, (uint64_t)(uintptr_t)remote, big), 0, "register 64 MiB");
	is(mc_memreg_add(a.reg, (uint64_t)(uintptr_t)remote + 10, 10), -EEXIST,
	   "overlapping registration refused");
	ok(mc_memreg_check(a.reg, (uint64_t)(uintptr_t)remote + big - 1, 1) &&
		   !mc_memreg_check(a.reg, (uint64_t)(uintptr_t)remote + big - 1, 2),
	   "memreg boundaries");
	{
		/* The cached check: a hit, then the range's removal must not be served from the
		 * cache (the data server's connections keep one). */
		struct mc_memreg *r2 = mc_memreg_new();
		struct mc_memreg_hit hit = { 0 };
		uint64_t base = (uint64_t)(uintptr_t)remote;

		mc_memreg_add(r2, base, 4096);
		ok(mc_memreg_check_cached(r2, &hit, base + 8, 64) && hit.start == base &&
			   mc_memreg_check_cached(r2, &hit, base + 4032, 64) &&
			   !mc_memreg_check_cached(r2, &hit, base + 4040, 64),
		   "cached memreg check: inside, boundary, past the end");
		mc_memreg_remove(r2, base);
		ok(!mc_memreg_check_cached(r2, &hit, base + 8, 64),
		   "cached memreg check: a removed range is refused");
		mc_memreg_add(r2, base, 128);
		ok(mc_memreg_check_cached(r2, &hit, base, 128) &&
			   !mc_memreg_check_cached(r2, &hit, base + 64, 128),
		   "cached memreg check: a range registered again, smaller");
		mc_memreg_free(r2);
	}
	on_loop(srv_lt, srv_start, &a);
	ok(a.s != NULL, "server listening");
	srv_port = mc_tcp_server_port(a.s);

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		fill(local, n, (unsigned)i + 1);
		ok(xfer(MC_XFER_WRITE, local, remote, n) == 0 && memcmp(local, remote, n) == 0,
		   "write %zu bytes arrives intact", n);
		fill(remote, n, (unsigned)i + 100);
		memset(local, 0, n);
		ok(xfer(MC_XFER_READ, local, remote, n) == 0 && memcmp(local, remote, n) == 0,
		   "read %zu bytes arrives intact", n);
	}
	is(xfer(MC_XFER_WRITE, local, remote, 0), 0, "a zero-byte transfer completes");

	/* CRC-64 on the way: sizes below, across and far past the read-ahead and the 4 MiB slices
	 * (split over both lanes), both directions, all in flight at once. */
	{
		static const uint64_t crc_sizes[] = { 1, 4095, 300000, (1u << 20) + 7,
						      (9u << 20) + 3 };
		struct op ops[10];
		uint64_t at = 0;
		int badcrc = 0;

		memset(ops, 0, sizeof(ops));
		fill(local, 24u << 20, 21);
		fill(remote, 24u << 20, 22);
		for (i = 0; i < 10; i++) {
			ops[i].opcode = i % 2 ? MC_XFER_READ : MC_XFER_WRITE;
			ops[i].local = local + at;
			ops[i].remote = (uint64_t)(uintptr_t)remote + at;
			ops[i].len = crc_sizes[i / 2];
			ops[i].want_crc = 1;
			ops[i].crc = 0x5a5a;
			at += ops[i].len + 13;
		}
		is(run_ops(ops, 10), 0, "transfers asking for their CRC succeed");
		for (i = 0; i < 10; i++)
			badcrc += ops[i].crc != mc_crc64(0, ops[i].local, ops[i].len) ||
				  memcmp(ops[i].local, (void *)(uintptr_t)ops[i].remote, ops[i].len);
		is(badcrc, 0, "each got the CRC-64 of exactly its bytes, written and read, 1 B to 9 MiB "
			      "(%d wrong)", badcrc);
	}

	/* Many transfers in flight at once, mixed directions on disjoint ranges. */
	{
		struct op ops[200];
		size_t chunk = big / 200;

		fill(local, big, 7);
		fill(remote, big, 8);
		for (i = 0; i < 200; i++) {
			memset(&ops[i], 0, sizeof(ops[i]));
			ops[i].opcode = i % 2 ? MC_XFER_WRITE : MC_XFER_READ;
			ops[i].local = local + i * chunk;
			ops[i].remote = (uint64_t)(uintptr_t)remote + i * chunk;
			ops[i].len = chunk - (i % 7);
		}
		is(run_ops(ops, 200), 0, "200 concurrent transfers succeed");
		for (i = 0; i < 200; i++)
			bad += memcmp(local + i * chunk, remote + i * chunk, chunk - (i % 7)) != 0;
		is(bad, 0, "and every range matches");
	}

	/* max_queued_bytes (MC_TCP_MAX_QUEUED_BYTES_PER_PEER): 64 transfers of 256 KiB and one of
	 * 4 MiB (larger than the bound: it goes alone) through a client that lets 1 MiB onto a
	 * peer's lanes at once; every one completes and lands. */
	{
		struct op ops[65];
		size_t chunk = 256u << 10;

		mc_waiter_init(&w);
		mc_loop_thread_call(cli_lt, cli_free, &w);
		mc_waiter_wait(&w);
		mc_waiter_fini(&w);
		mc_waiter_init(&w);
		mc_loop_thread_call(cli_lt, cli_new_bounded, &w);
		mc_waiter_wait(&w);
		mc_waiter_fini(&w);
		fill(local, big, 21);
		memset(remote, 0, big);
		for (i = 0; i < 65; i++) {
			memset(&ops[i], 0, sizeof(ops[i]));
			ops[i].opcode = MC_XFER_WRITE;
			ops[i].local = local + i * chunk;
			ops[i].remote = (uint64_t)(uintptr_t)remote + i * chunk;
			ops[i].len = i == 64 ? 4u << 20 : chunk;
		}
		is(run_ops(ops, 65), 0, "transfers past max_queued_bytes wait their turn and succeed");
		ok(!memcmp(local, remote, 64 * chunk + (4u << 20)), "and every byte lands");
		mc_waiter_init(&w);
		mc_loop_thread_call(cli_lt, cli_free, &w);
		mc_waiter_wait(&w);
		mc_waiter_fini(&w);
		mc_waiter_init(&w);
		mc_loop_thread_call(cli_lt, cli_new, &w);
		mc_waiter_wait(&w);
		mc_waiter_fini(&w);
	}

	/* Refused ranges keep the connection usable. */
	is(xfer(MC_XFER_WRITE, local, remote + big - 10, 20), MC_ERR_TRANSFER_FAIL,
	   "a write past the registered range is refused with -800");
	is(xfer(MC_XFER_READ, local, local, 100), MC_ERR_TRANSFER_FAIL,
	   "a read of an unregistered address is refused with -800");
	fill(local, 1000, 9);
	ok(xfer(MC_XFER_WRITE, local, remote, 1000) == 0 && !memcmp(local, remote, 1000),
	   "the next transfer works");

	/* Garbage from a raw socket closes only that connection. */
	{
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(srv_port) };
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		char junk[100], buf[8];

		memset(junk, 0xff, sizeof(junk));
		inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
		ok(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
			   send(fd, junk, sizeof(junk), 0) == sizeof(junk) && recv(fd, buf, 8, 0) <= 0,
		   "garbage gets the connection closed");
		close(fd);
		is(xfer(MC_XFER_READ, local, remote, 4096), 0, "other connections keep working");
	}

	/* The server goes away: pending and new transfers fail, nothing hangs. */
	on_loop(srv_lt, srv_stop, &a);
	is(xfer(MC_XFER_READ, local, remote, 1u << 20), MC_ERR_TRANSFER_FAIL,
	   "a transfer to a dead server fails with -800");
	a.port = srv_port;
	on_loop(srv_lt, srv_start, &a);
	ok(a.s != NULL, "server restarted on the same port");
	fill(local, 5000, 11);
	ok(xfer(MC_XFER_WRITE, local, remote, 5000) == 0 && !memcmp(local, remote, 5000),
	   "the client reconnects to the restarted server");

	/* A forked server killed mid-transfer. */
	{
		int pfd[2];
		pid_t pid = -1;
		uint16_t port = 0;
		uint8_t *shared = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				       -1, 0);
		struct op ops[8];

		if (pipe(pfd) == 0 && (pid = fork()) == 0) {
			struct srv_arg b = { .reg = mc_memreg_new() };

			srv_lt = mc_loop_thread_new("srv2");
			mc_loop_thread_start(srv_lt);
			mc_memreg_add(b.reg, (uint64_t)(uintptr_t)shared, big);
			on_loop(srv_lt, srv_start, &b);
			port = mc_tcp_server_port(b.s);
			if (write(pfd[1], &port, sizeof(port)) != sizeof(port))
				_exit(1);
			pause();
			_exit(0);
		}
		if (read(pfd[0], &port, sizeof(port)) != sizeof(port))
			port = 0;
		for (i = 0; i < 8; i++) {
			memset(&ops[i], 0, sizeof(ops[i]));
			ops[i].opcode = MC_XFER_WRITE;
			ops[i].local = local;
			ops[i].remote = (uint64_t)(uintptr_t)shared;
			ops[i].len = big;
			ops[i].port = port;
			mc_waiter_init(&ops[i].w);
			mc_loop_thread_call(cli_lt, op_submit, &ops[i]);
		}
		usleep(20000);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		bad = 0;
		for (i = 0; i < 8; i++) {
			ops[i].status = mc_waiter_wait(&ops[i].w);
			bad += ops[i].status == MC_ERR_TRANSFER_FAIL;
			mc_waiter_fini(&ops[i].w);
		}
		ok(bad > 0, "a peer killed mid-transfer fails the pending transfers (%d of 8)", bad);
		munmap(shared, big);
	}

	/* A peer whose kernel accepts connections and data but which answers nothing (a stopped
	 * process, a cut link): transfers fail once nothing moved for io_timeout_ms. */
	{
		struct sockaddr_in sa = { .sin_family = AF_INET };
		socklen_t sl = sizeof(sa);
		int lfd = socket(AF_INET, SOCK_STREAM, 0);
		struct op ops[2];
		double t0, d;

		mc_waiter_init(&w);
		mc_loop_thread_call(cli_lt, cli_free, &w);
		mc_waiter_wait(&w);
		mc_waiter_fini(&w);
		mc_waiter_init(&w);
		mc_loop_thread_call(cli_lt, cli_new_short, &w);
		mc_waiter_wait(&w);
		mc_waiter_fini(&w);
		inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
		if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 16) != 0 ||
		    getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0)
			sa.sin_port = 0;
		memset(ops, 0, sizeof(ops));
		ops[0].opcode = MC_XFER_READ;
		ops[1].opcode = MC_XFER_WRITE;
		for (i = 0; i < 2; i++) {
			ops[i].local = local;
			ops[i].remote = (uint64_t)(uintptr_t)remote;
			ops[i].len = 1u << 20;
			ops[i].port = ntohs(sa.sin_port);
		}
		t0 = now_s();
		bad = run_ops(ops, 2);
		d = now_s() - t0;
		ok(sa.sin_port != 0 && bad == 2 && ops[0].status == MC_ERR_TRANSFER_FAIL && d < 2.0,
		   "transfers to a peer that accepts but never answers fail with -800 after the "
		   "progress timeout (%.3f s)", d);
		fill(local, 5000, 12);
		ok(xfer(MC_XFER_WRITE, local, remote, 5000) == 0 && !memcmp(local, remote, 5000),
		   "a live peer still works with the short timeouts");
		close(lfd);
	}

	/* A READ payload that trickles in, a little every 100 ms, never enough for the wake-up
	 * mark the lane sets (SO_RCVLOWAT) before the 1 s progress timeout: bytes moving are
	 * progress, and the read completes with the right bytes and CRC.  (The gaps are a tenth
	 * of the timeout, so that a busy machine delaying the sender does not make a silence.) */
	{
		uint64_t crc;
		double d;
		int st;

		mc_waiter_init(&w);
		mc_loop_thread_call(cli_lt, cli_free, &w);
		mc_waiter_wait(&w);
		mc_waiter_fini(&w);
		mc_waiter_init(&w);
		mc_loop_thread_call(cli_lt, cli_new_1s, &w);
		mc_waiter_wait(&w);
		mc_waiter_fini(&w);
		fill(remote, 256u << 10, 31);
		d = now_s();
		st = trickle_read(local, remote, 256u << 10, 16u << 10, 100, &crc);
		d = now_s() - d;
		ok(st == 0 && !memcmp(local, remote, 256u << 10) &&
			   crc == mc_crc64(0, remote, 256u << 10),
		   "a 256 KiB read trickling in 16 KiB every 100 ms completes intact past a 1 s "
		   "progress timeout (status %d, %.2f s)", st, d);
	}

	/* Same-host connections get the same-host congestion control (reno by default). */
	{
		int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET };
		socklen_t sl = sizeof(sa);
		char cc[16] = "";
		socklen_t cl = sizeof(cc);
		int tuned = -1;

		inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
		if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 1) == 0 &&
		    getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0 &&
		    connect(cfd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			tuned = mc_tcp_tune_local(cfd);
			getsockopt(cfd, IPPROTO_TCP, TCP_CONGESTION, cc, &cl);
		}
		ok(tuned == 1 && !strcmp(cc, "reno"),
		   "a loopback connection is switched to reno (tuned %d, congestion control \"%s\")",
		   tuned, cc);
		close(cfd);
		close(lfd);
	}

	mc_waiter_init(&w);
	mc_loop_thread_call(cli_lt, cli_free, &w);
	mc_waiter_wait(&w);
	mc_waiter_fini(&w);
	on_loop(srv_lt, srv_stop, &a);
	mc_loop_thread_stop_and_free(cli_lt);
	mc_loop_thread_stop_and_free(srv_lt);
	mc_memreg_free(a.reg);
	free(remote);
	free(local);
	return tap_done();
}
