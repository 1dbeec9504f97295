/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP data server's file window (SSD objects) must not block its loop: a READ of a file
 * whose disk is slow (here: every read of it takes 400 ms, through the test binary's pread and
 * sendfile, which come before libc's) must not delay a memory READ on another connection, and
 * replies on one connection keep the order of its requests.  Also: bytes read from the file are
 * exact (several chunks), a range outside any object is refused, and a server with READs in
 * flight shuts down cleanly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/wire.h"
#include "reactor/loop_thread.h"
#include "tap.h"
#include "transfer/memreg.h"
#include "transfer/tcp.h"

#define FILE_LEN (9u << 20)	/* more than two chunks */
#define SLOW_MS 400

static struct mc_loop_thread *srv_lt;
static char path[64];
static volatile int slow_fds[64];

static int is_slow(int fd)
{
	return fd >= 0 && fd < 64 && slow_fds[fd];
}

static void slow(int fd)
{
	if (is_slow(fd)) {
		struct timespec ts = { 0, SLOW_MS * 1000000L };

		nanosleep(&ts, NULL);
	}
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	slow(fd);
	return syscall(SYS_pread64, fd, buf, n, off);
}

ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	slow(in);
	return syscall(SYS_sendfile, out, in, off, n);
}

/* The file window: one object at MC_DISK_SPACE_BASE, FILE_LEN bytes of the temp file. */
static int open_range(void *arg, uint64_t addr, uint64_t len, int *fd, uint64_t *off)
{
	(void)arg;
	if (addr < MC_DISK_SPACE_BASE || addr - MC_DISK_SPACE_BASE + len > FILE_LEN)
		return -ENOENT;
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return -errno;
	if (*fd < 64)
		slow_fds[*fd] = 1;
	*off = addr - MC_DISK_SPACE_BASE;
	return 0;
}

struct srv_arg {
	struct mc_memreg *reg;
	struct mc_tcp_server *s;
	struct mc_waiter w;
};

static void srv_start(void *arg)
{
	struct srv_arg *a = arg;
	int err = 0;

	a->s = mc_tcp_server_new(mc_loop_thread_base(srv_lt), "127.0.0.1", 0, a->reg, &err);
	mc_waiter_signal(&a->w, a->s ? 0 : err);
}

static void srv_stop(void *arg)
{
	struct srv_arg *a = arg;

	mc_tcp_server_free(a->s);
	mc_waiter_signal(&a->w, 0);
}

static void on_loop(void (*fn)(void *), struct srv_arg *a)
{
	mc_waiter_init(&a->w);
	mc_loop_thread_call(srv_lt, fn, a);
	mc_waiter_wait(&a->w);
	mc_waiter_fini(&a->w);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int conn(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int send_read(int fd, uint64_t addr, uint64_t size)
{
	uint8_t h[MC_TCP_HDR_LEN] = { 0 };

	mc_put_le64(h, size);
	mc_put_le64(h + 8, addr);
	h[16] = 0x80;	/* v2 READ */
	return send(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) ? 0 : -1;
}

static int recv_all(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n) {
		ssize_t r = recv(fd, p, n, 0);

		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Status code of the reply, then its payload into buf (if code 0); -1 on a broken reply. */
static int recv_reply(int fd, void *buf, size_t n)
{
	uint8_t st[8];
	uint64_t v;

	if (recv_all(fd, st, 8))
		return -1;
	v = mc_get_le64(st);
	if (v >> 32 != MC_TCP_STATUS_MAGIC)
		return -1;
	if ((uint32_t)v == 0 && recv_all(fd, buf, n))
		return -1;
	return (int)(uint32_t)v;
}

int main(void)
{
	struct srv_arg a = { 0 };
	static uint8_t mem[4096];
	uint8_t *want = malloc(FILE_LEN), *got = malloc(FILE_LEN), small[4096];
	uint16_t port;
	double t0, t_mem;
	int f, fa, fb, i, code;

	signal(SIGPIPE, SIG_IGN);	/* as the daemons do: a reader that goes away is EPIPE */
	snprintf(path, sizeof(path), "/tmp/mc-tcp-file.%d", (int)getpid());
	for (i = 0; i < (int)FILE_LEN; i++)
		want[i] = (uint8_t)(i * 7 + (i >> 12));
	for (i = 0; i < (int)sizeof(mem); i++)
		mem[i] = (uint8_t)(255 - i);
	f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ok(f >= 0 && write(f, want, FILE_LEN) == (ssize_t)FILE_LEN, "a %u-byte object file",
	   FILE_LEN);
	close(f);

	srv_lt = mc_loop_thread_new("srv");
	mc_loop_thread_start(srv_lt);
	a.reg = mc_memreg_new();
	mc_memreg_add(a.reg, (uint64_t)(uintptr_t)mem, sizeof(mem));
	mc_memreg_set_files(a.reg, open_range, NULL);
	on_loop(srv_start, &a);
	ok(a.s != NULL, "data server started");
	port = mc_tcp_server_port(a.s);

	/* A slow file READ on one connection, a memory READ on another right after. */
	fa = conn(port);
	fb = conn(port);
	t0 = now_ms();
	is(send_read(fa, MC_DISK_SPACE_BASE, FILE_LEN), 0, "a READ of the whole object sent");
	usleep(50000);
	ok(send_read(fb, (uint64_t)(uintptr_t)mem, sizeof(mem)) == 0 &&
	   recv_reply(fb, small, sizeof(mem)) == 0 && !memcmp(small, mem, sizeof(mem)),
	   "a memory READ on another connection is answered");
	t_mem = now_ms() - t0;
	ok(t_mem < SLOW_MS / 2 + 50, "... at once (%.0f ms), not after the disk read (%d ms)",
	   t_mem, SLOW_MS);
	/* Pipelined on the first connection: a refused range and a small file read, after the
	 * big one: the replies must come in this order. */
	ok(send_read(fa, MC_DISK_SPACE_BASE + FILE_LEN - 10, 20) == 0 &&
	   send_read(fa, MC_DISK_SPACE_BASE + 12345, 1000) == 0, "two more READs pipelined");
	code = recv_reply(fa, got, FILE_LEN);
	ok(code == 0 && !memcmp(got, want, FILE_LEN), "the object reads back exactly (%.0f ms)",
	   now_ms() - t0);
	is(recv_reply(fa, small, 20), 1, "then the range beyond the object is refused");
	ok(recv_reply(fa, small, 1000) == 0 && !memcmp(small, want + 12345, 1000),
	   "then the small read, in order");

	/* Shut down with a file READ in flight. */
	is(send_read(fa, MC_DISK_SPACE_BASE, FILE_LEN), 0, "a READ in flight at shutdown");
	usleep(20000);
	on_loop(srv_stop, &a);
	ok(1, "the server shut down with a READ in flight");
	close(fa);
	close(fb);
	mc_loop_thread_stop_and_free(srv_lt);
	mc_memreg_free(a.reg);
	unlink(path);
	free(want);
	free(got);
	return tap_done();
}
