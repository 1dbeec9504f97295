/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_FUZZ_UTIL_H
#define MC_FUZZ_UTIL_H

/*
 * Helpers shared by the fuzz targets (tests/fuzz/fuzz_*.c): quiet but complete logging, a file
 * that holds the input (a memfd, named by its /proc path, so nothing touches the disk), a
 * driving a libevent loop until a socket's peer has
 * answered.  Every target is one LLVMFuzzerTestOneInput over one process-wide state; the
 * targets run single-threaded unless the code under test starts threads itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Every log line is formatted (format bugs are found too) and dropped, unless MC_FUZZ_LOG is
 * set, which sends them to stderr. */
static inline void fuzz_log_drop(void *arg, int level, const char *line)
{
	(void)arg;
	(void)level;
	(void)line;
}

static inline void fuzz_quiet_logs(void)
{
	if (getenv("MC_FUZZ_LOG")) {
		mc_log_set_sink(mc_log_stderr_sink, NULL);
	} else {
		mc_log_set_sink(fuzz_log_drop, NULL);
	}
	mc_log_set_level(MC_LOG_DEBUG);
}

/* A failure of the harness itself (not of the code under test): say what and why, then abort
 * so libFuzzer keeps the input. */
static inline void fuzz_die(const char *what)
{
	fprintf(stderr, "fuzz harness: %s: %s\n", what, strerror(errno));
	abort();
}

/* A file holding data[0..n) at offset 0: its descriptor, its name in *path (/proc/self/fd/N).
 * Returns the descriptor (close it) or -1. */
static inline int fuzz_file(const void *data, size_t n, char *path, size_t pathlen)
{
	int fd = memfd_create("mc-fuzz", MFD_CLOEXEC);
	size_t done = 0;

	if (fd < 0)
		return -1;
	while (done < n) {
		ssize_t w = write(fd, (const uint8_t *)data + done, n - done);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)w;
	}
	snprintf(path, pathlen, "/proc/self/fd/%d", fd);
	return fd;
}

static inline int64_t fuzz_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Send data[0..n) on fd (a non-blocking socket whose other end a server on base serves), run
 * base, and read and drop the replies until the exchange is over or limit_ms pass.
 * half_close: shut fd's writing side once all is sent, and wait (in steps of a millisecond,
 * for servers with threads or timers) until the server closes its end.  Otherwise (TCP: a
 * half-close would leave the connection in TIME_WAIT, and millions of them would exhaust the
 * machine's ports) the exchange is over once all is sent and a few turns of the loop brought
 * no reply byte; the caller then resets the connection (fuzz_tcp_close).  Returns the number
 * of reply bytes read.
 */
static inline size_t fuzz_exchange(struct event_base *base, int fd, const uint8_t *data, size_t n,
				   int half_close, int limit_ms)
{
	int64_t end = fuzz_mono_ms() + limit_ms;
	size_t sent = 0, got = 0;
	int shut = 0, idle = 0;
	char buf[65536];

	for (;;) {
		struct timeval tick = { 0, 1000 };
		size_t got_now = 0;
		ssize_t r;

		while (sent < n) {
			ssize_t w = send(fd, data + sent, n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (w <= 0)
				break;
			sent += (size_t)w;
		}
		if (half_close && sent == n && !shut) {
			shutdown(fd, SHUT_WR);
			shut = 1;
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		for (;;) {
			r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r <= 0)
				break;
			got_now += (size_t)r;
		}
		got += got_now;
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			break;	/* the server closed (or reset) its end */
		if (fuzz_mono_ms() > end)
			break;
		if (!half_close) {
			idle = sent == n && got_now == 0 ? idle + 1 : 0;
			if (idle >= 4)
				break;
			continue;
		}
		/* Nothing more yet: let the server's events (timers, other threads) come, briefly. */
		event_base_loopexit(base, &tick);
		event_base_dispatch(base);
	}
	return got;
}

/* A connection to 127.0.0.1:port, non-blocking; -1 (errno set) on failure.  The kernel completes
 * it before the server's loop runs; libFuzzer's timer signals may interrupt the wait. */
static inline int fuzz_tcp_connect(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
	socklen_t len = sizeof(err);

	if (fd < 0)
		return -1;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int rc;

		if (errno != EINPROGRESS && errno != EINTR)
			goto fail;
		do
			rc = poll(&p, 1, 5000);
		while (rc < 0 && errno == EINTR);
		if (rc != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			goto fail;
		if (err != 0) {
			errno = err;
			goto fail;
		}
	}
	return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

/* Close with a reset: millions of connections leave no TIME_WAIT behind. */
static inline void fuzz_tcp_close(int fd)
{
	struct linger l = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

/* A port on 127.0.0.1 that was free a moment ago, or 0. */
static inline uint16_t fuzz_free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint16_t port = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

#endif
