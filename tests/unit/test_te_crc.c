/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRC-64 on the way (mc_te_transfer_start with want_crc): two engines in this process, one
 * holding a segment, move batches of READs and WRITEs over tcp (MC_FORCE_TCP=1), over same-host
 * shared memory (the owner's memory mapped: memfd; or copied by the kernel: process_vm_*), and
 * within our own memory, small batches (copied on the calling thread) and large ones (on the
 * engine's workers).  Every CRC the engine reports is that of exactly the bytes moved, and
 * want_crc comes back cleared exactly where the engine leaves the CRC to the caller: same-host
 * WRITEs copied by a worker, and WRITEs over tcp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/crc64.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"
#include "tap.h"

#define SEG (32u << 20)
#define N 8

struct got {
	uint64_t crc[N];
	int have[N];
	int status[N];
};

static void on_done(void *arg, size_t i, int status, const uint64_t *crc)
{
	struct got *g = arg;

	g->status[i] = status;
	if (crc) {
		g->crc[i] = *crc;
		g->have[i] = 1;
	}
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 29 + seed + (i >> 9));
}

/* One batch of N requests of len bytes each (alternating WRITE and READ), to target_id at
 * remote + i * stride; checks data, CRCs and the want_crc it came back with.  expect_write:
 * whether the engine computes WRITEs' CRCs on this path. */
static void batch(transfer_engine_t ini, segment_handle_t target, uint8_t *local, uint8_t *remote,
		  uint64_t len, int expect_write, const char *what)
{
	struct transfer_request x[N];
	uint8_t want[N];
	struct got g;
	struct mc_te_inflight *t;
	int status[N], i, wrong = 0, bad_want = 0, missing = 0;
	uint64_t stride = len + 4096;

	memset(&g, 0, sizeof(g));
	for (i = 0; i < N; i++) {
		fill(local + i * stride, len, (unsigned)i);
		fill(remote + i * stride, len, (unsigned)i + 50);
		x[i] = (struct transfer_request){ i % 2 ? OPCODE_READ : OPCODE_WRITE,
						  local + i * stride, target,
						  (uint64_t)(uintptr_t)(remote + i * stride), len };
		want[i] = 1;
	}
	t = mc_te_transfer_start((struct mc_engine *)ini, x, NULL, N, 1, want);
	ok(t && mc_te_transfer_finish(t, status, on_done, &g) == 0, "%s: the batch completes", what);
	for (i = 0; i < N; i++) {
		int write = i % 2 == 0;

		if (memcmp(local + i * stride, remote + i * stride, len))
			wrong++;
		if (want[i] != (write ? expect_write : 1))
			bad_want++;
		if (want[i] && !g.have[i])
			missing++;
		if (g.have[i] && g.crc[i] != mc_crc64(0, local + i * stride, len))
			wrong++;
	}
	is(wrong, 0, "%s: every byte moved, every CRC reported is that of its bytes", what);
	is(bad_want, 0, "%s: want_crc left set exactly where the engine computes (writes: %s)", what,
	   expect_write ? "yes" : "no");
	is(missing, 0, "%s: each CRC it kept want_crc for was delivered", what);
}

static transfer_engine_t engine(void)
{
	return createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
}

int main(void)
{
	int fd = memfd_create("te-crc", 0);
	uint8_t *shared = NULL, *priv = malloc(SEG), *local = malloc(SEG);
	transfer_engine_t tgt, ini;
	char name[128];
	segment_handle_t seg;
	int tcp;

	if (fd >= 0 && ftruncate(fd, SEG) == 0)
		shared = mmap(NULL, SEG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ok(shared != MAP_FAILED && shared && priv && local, "memory for the test");
	for (tcp = 1; tcp >= 0; tcp--) {
		if (tcp)
			setenv("MC_FORCE_TCP", "1", 1);
		else
			unsetenv("MC_FORCE_TCP");
		tgt = engine();
		ini = engine();
		registerLocalMemory(tgt, shared, SEG / 2, "cpu:0", 1);
		registerLocalMemory(tgt, priv, SEG, "cpu:0", 1);
		registerLocalMemory(ini, local, SEG, "cpu:0", 1);
		getLocalIpAndPort(tgt, name, sizeof(name));
		seg = openSegment(ini, name);
		if (tcp) {
			batch(ini, seg, local, shared, 300000, 0, "tcp, 300 KB each");
			batch(ini, seg, local, priv, (1u << 20) + 3, 0, "tcp, 1 MiB each");
		} else {
			batch(ini, seg, local, shared, 4000, 1, "shm mapped, small batch (this thread)");
			batch(ini, seg, local, shared, (1u << 20) + 3, 0, "shm mapped, large batch (workers)");
			batch(ini, seg, local, priv, 4000, 1, "shm by process_vm, small batch");
			batch(ini, seg, local, priv, (1u << 20) + 3, 0, "shm by process_vm, large batch");
		}
		/* Our own memory: copied on this thread, fused. */
		batch(ini, LOCAL_SEGMENT, local, local + (SEG / 2), (1u << 20) + 3, 1,
		      tcp ? "own memory (tcp engine)" : "own memory");
		destroyTransferEngine(ini);
		destroyTransferEngine(tgt);
	}
	unsetenv("MC_FORCE_TCP");
	free(priv);
	free(local);
	if (shared && shared != MAP_FAILED)
		munmap(shared, SEG);
	if (fd >= 0)
		close(fd);
	return tap_done();
}
