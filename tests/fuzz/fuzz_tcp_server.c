/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the TCP data plane's server (src/transfer/tcp_server.c), its request parser and
 * state machine.  The input is what a peer writes on a client's data port: 24-byte request
 * headers {u64 size, u64 addr, u8 opcode|0x80, 7 zero bytes}, each WRITE followed by its
 * payload.  It is written on one end of a socketpair that the server serves as an accepted
 * connection (mc_tcp_server_adopt), then half-closed; the replies are read and dropped until
 * the server closes its end.
 *
 * So that inputs can name registered memory, the registered ranges are at fixed addresses:
 * FUZZ_MEM (two ranges of 64 KiB with a 4 KiB hole between them), refilled with a pattern for
 * every input.  The file window (memreg.h) is installed too: READs of
 * [MC_DISK_SPACE_BASE, + 64 KiB) are served from a memfd by the server's file-read workers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "transfer/memreg.h"
#include "transfer/tcp.h"
#include "fuzz_util.h"

#define FUZZ_MEM 0x300000000000ull
#define FUZZ_RANGE (64u << 10)
#define FUZZ_GAP 4096u
#define FUZZ_FILE_LEN (64u << 10)

static struct event_base *base;
static struct mc_memreg *reg;
static struct mc_tcp_server *srv;
static uint8_t *mem;
static int file_fd = -1;

static int fuzz_open_file(void *arg, uint64_t addr, uint64_t len, int *fd, uint64_t *off)
{
	(void)arg;
	if (addr < MC_DISK_SPACE_BASE || addr - MC_DISK_SPACE_BASE >= FUZZ_FILE_LEN ||
	    len > FUZZ_FILE_LEN - (addr - MC_DISK_SPACE_BASE))
		return -ENOENT;
	*fd = dup(file_fd);
	if (*fd < 0)
		return -errno;
	*off = addr - MC_DISK_SPACE_BASE;
	return 0;
}

static void fuzz_setup(void)
{
	size_t total = 2 * (size_t)FUZZ_RANGE + FUZZ_GAP;
	uint8_t pattern[4096];
	char path[64];
	unsigned i;
	int err = 0;

	fuzz_quiet_logs();
	base = event_base_new();
	reg = mc_memreg_new();
	mem = mmap((void *)(uintptr_t)FUZZ_MEM, total, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (base == NULL || reg == NULL || mem != (uint8_t *)(uintptr_t)FUZZ_MEM)
		abort();
	if (mc_memreg_add(reg, FUZZ_MEM, FUZZ_RANGE) != 0 ||
	    mc_memreg_add(reg, FUZZ_MEM + FUZZ_RANGE + FUZZ_GAP, FUZZ_RANGE) != 0)
		abort();
	for (i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i * 7);
	{
		uint8_t *filebytes = malloc(FUZZ_FILE_LEN);

		if (filebytes == NULL)
			abort();
		for (i = 0; i < FUZZ_FILE_LEN; i++)
			filebytes[i] = (uint8_t)(i * 13);
		file_fd = fuzz_file(filebytes, FUZZ_FILE_LEN, path, sizeof(path));
		free(filebytes);
	}
	if (file_fd < 0)
		abort();
	mc_memreg_set_files(reg, fuzz_open_file, NULL);
	srv = mc_tcp_server_new(base, "127.0.0.1", 0, reg, &err);
	if (srv == NULL)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];

	if (base == NULL)
		fuzz_setup();
	memset(mem, 0xa5, 2 * (size_t)FUZZ_RANGE + FUZZ_GAP);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	if (mc_tcp_server_adopt(srv, sv[1], "fuzz:1") != 0)
		abort();
	evutil_make_socket_nonblocking(sv[0]);
	fuzz_exchange(base, sv[0], data, size, 1, 5000);
	close(sv[0]);
	/* Let the server see the close of a connection still open (a hung request). */
	event_base_loop(base, EVLOOP_NONBLOCK);
	return 0;
}
