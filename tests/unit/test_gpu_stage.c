/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU staging (src/engine/te_gpu.c and te_staging.c) driven through a CUDA test double.
 *
 * The double's "device memory" is a host region it calls device; async copies are only queued
 * and run at stream_sync, and the double's transport moves a chunk only when it is waited for.
 * So a stager that reuses a pinned chunk too early, or starts the transport before the copy
 * ended, produces wrong bytes, which the checks see; the double also counts violations of the
 * slot discipline and what is in flight.  Then two engines in this process move GPU memory
 * through tcp and shm with the double installed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "common/crc64.h"
#include "engine/te_gpu.h"
#include "mooncake/transfer_engine_c.h"
#include "tap.h"
#include "te_wait.h"

#define DEVLEN (40u << 20)
#include "gpu_fake.h"

/* The double's transport: a peer buffer, chunks moved when waited for. */
struct fake_io {
	uint8_t *peer;
	int to_gpu;
	struct {
		void *host;
		uint64_t n, off;
		int busy;
	} slot[MC_GPU_MAX_CHUNKS];
	int inflight, max_inflight, violations, fail_start_at, starts;
};

static int io_start(void *arg, unsigned i, void *host, uint64_t n, uint64_t off)
{
	struct fake_io *io = arg;

	if (++io->starts == io->fail_start_at)
		return -ECONNRESET;
	if (io->slot[i].busy)
		io->violations++;	/* started twice without a wait */
	io->slot[i].host = host;
	io->slot[i].n = n;
	io->slot[i].off = off;
	io->slot[i].busy = 1;
	if (++io->inflight > io->max_inflight)
		io->max_inflight = io->inflight;
	return 0;
}

static int io_wait(void *arg, unsigned i)
{
	struct fake_io *io = arg;

	if (!io->slot[i].busy) {
		io->violations++;
		return -EINVAL;
	}
	if (io->to_gpu)
		memcpy(io->slot[i].host, io->peer + io->slot[i].off, io->slot[i].n);
	else
		memcpy(io->peer + io->slot[i].off, io->slot[i].host, io->slot[i].n);
	io->slot[i].busy = 0;
	io->inflight--;
	return 0;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 12));
}

static void stage_matrix(void)
{
	static const uint64_t lens[] = { 1, 4095, 4096, 4097, 3 * 4096, 10 * 4096 + 123 };
	uint8_t *peer = malloc(DEVLEN);
	unsigned k, li, dir;
	int bad = 0, viol = 0, maxq = 0, maxinf_send = 0, maxinf_recv = 0, badcrc = 0;

	for (k = 2; k <= 4; k++)
		for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
			for (dir = 0; dir < 2; dir++) {
				struct mc_gpu_stager s;
				struct fake_io io = { .peer = peer, .to_gpu = (int)dir };
				struct mc_gpu_io gio = { &io, io_start, io_wait };
				uint64_t len = lens[li], crc = 1;

				if (mc_gpu_stager_init(&s, &fake, k, 4096)) {
					bad++;
					continue;
				}
				fill(dev + 7, len, k * 100 + li);
				fill(peer, len, k * 100 + li + 50);
				max_queued = 0;
				if (mc_gpu_stage(&s, (int)dir, dev + 7, len, &gio, &crc) != 0)
					bad++;
				/* device dev + 7 + off <-> peer + off */
				if (dir == 0 ? memcmp(peer, dev + 7, len) : memcmp(dev + 7, peer, len))
					bad++;
				/* The CRC taken from the pinned chunks is that of the bytes moved. */
				if (crc != mc_crc64(0, peer, len))
					badcrc++;
				viol += io.violations + (io.inflight != 0) + (queued != 0);
				if (max_queued > maxq)
					maxq = max_queued;
				if (dir == 0 && io.max_inflight > maxinf_send)
					maxinf_send = io.max_inflight;
				if (dir == 1 && io.max_inflight > maxinf_recv)
					maxinf_recv = io.max_inflight;
				mc_gpu_stager_fini(&s);
			}
	is(bad, 0, "staging both ways with 2-4 chunks of 4 KiB, lengths 1 B .. 10 chunks + 123, "
		     "moves every byte (%d bad)", bad);
	is(badcrc, 0, "the CRC-64 computed on the pinned chunks on the way is the bytes' CRC, "
		      "both ways, every length (%d differ)", badcrc);
	is(viol, 0, "no chunk is reused or waited for out of turn, nothing left in flight (%d)",
	   viol);
	ok(maxq <= 4 && maxq >= 2, "at most k copies queued at once (max %d)", maxq);
	is(maxinf_send, 2, "sending keeps two transports in flight (max %d)", maxinf_send);
	is(maxinf_recv, 4, "receiving keeps k transports in flight (max %d with k = 4)",
	   maxinf_recv);
	is(n_alloc, n_free, "pinned chunks freed (%d allocated, %d freed)", n_alloc, n_free);
	free(peer);
}

static void stage_errors(void)
{
	uint8_t *peer = malloc(1u << 20);
	struct mc_gpu_stager s;
	int dir;

	for (dir = 0; dir < 2; dir++) {
		struct fake_io io = { .peer = peer, .to_gpu = dir, .fail_start_at = 3 };
		struct mc_gpu_io gio = { &io, io_start, io_wait };
		int rc;

		mc_gpu_stager_init(&s, &fake, 3, 4096);
		rc = mc_gpu_stage(&s, dir, dev, 20 * 4096, &gio, NULL);
		ok(rc == -ECONNRESET && io.inflight == 0 && queued == 0 && io.violations == 0,
		   "%s: a transport failing on chunk 3 fails the request with nothing left in flight",
		   dir ? "receive" : "send");
		mc_gpu_stager_fini(&s);
	}
	for (dir = 0; dir < 2; dir++) {
		struct fake_io io = { .peer = peer, .to_gpu = dir };
		struct mc_gpu_io gio = { &io, io_start, io_wait };
		int rc;

		mc_gpu_stager_init(&s, &fake, 3, 4096);
		n_copies = 0;
		fail_copy_at = 4;
		rc = mc_gpu_stage(&s, dir, dev, 20 * 4096, &gio, NULL);
		fail_copy_at = 0;
		ok(rc == -EIO && io.inflight == 0 && queued == 0 && io.violations == 0,
		   "%s: a failing GPU copy fails the request with nothing left in flight",
		   dir ? "receive" : "send");
		mc_gpu_stager_fini(&s);
	}
	free(peer);
}

static int wait_one(transfer_engine_t e, struct transfer_request *r)
{
	return te_run_one(e, r, 30) == STATUS_COMPLETED ? 0 : -1;
}

static void engines(int force_tcp)
{
	transfer_engine_t tgt, ini;
	uint8_t *tbuf = malloc(24u << 20);
	char name[128];
	segment_handle_t seg;
	struct transfer_request r;
	const char *what = force_tcp ? "tcp" : "shm";
	int d2h, h2d;

	if (force_tcp)
		setenv("MC_FORCE_TCP", "1", 1);
	else
		unsetenv("MC_FORCE_TCP");
	tgt = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
	ini = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
	registerLocalMemory(tgt, tbuf, 24u << 20, "cpu:0", 1);
	ok(registerLocalMemory(ini, dev, DEVLEN, "cuda:0", 1) == 0,
	   "%s: GPU memory registers (for local use)", what);
	getLocalIpAndPort(tgt, name, sizeof(name));
	seg = openSegment(ini, name);
	fill(dev + 100, (16u << 20) + 5, 1);
	d2h = n_d2h;
	r = (struct transfer_request){ OPCODE_WRITE, dev + 100, seg, (uint64_t)(uintptr_t)tbuf + 9,
				       (16u << 20) + 5 };
	ok(wait_one(ini, &r) == 0 && !memcmp(tbuf + 9, dev + 100, (16u << 20) + 5) &&
		   n_d2h - d2h >= 4,
	   "%s: a 16 MiB WRITE from GPU memory lands intact, staged (%d device-to-host copies)",
	   what, n_d2h - d2h);
	fill(tbuf + 1, (8u << 20) + 1, 2);
	h2d = n_h2d;
	r = (struct transfer_request){ OPCODE_READ, dev + 33, seg, (uint64_t)(uintptr_t)tbuf + 1,
				       (8u << 20) + 1 };
	ok(wait_one(ini, &r) == 0 && !memcmp(dev + 33, tbuf + 1, (8u << 20) + 1) &&
		   n_h2d - h2d >= 2,
	   "%s: an 8 MiB READ into GPU memory arrives intact, staged (%d host-to-device copies)",
	   what, n_h2d - h2d);
	r = (struct transfer_request){ OPCODE_READ, dev, seg, (uint64_t)(uintptr_t)tbuf + (24u << 20),
				       4096 };
	ok(wait_one(ini, &r) != 0, "%s: an out-of-range GPU request fails", what);
	r = (struct transfer_request){ OPCODE_WRITE, dev + 1, LOCAL_SEGMENT,
				       (uint64_t)(uintptr_t)(dev + (30u << 20)), 1000 };
	ok(wait_one(ini, &r) == 0 && !memcmp(dev + 1, dev + (30u << 20), 1000),
	   "%s: LOCAL_SEGMENT copies within GPU memory through the runtime", what);
	destroyTransferEngine(ini);
	destroyTransferEngine(tgt);
	free(tbuf);
}

int main(void)
{
	dev = malloc(DEVLEN);
	stage_matrix();
	stage_errors();
	mc_gpu_set_ops(&fake);
	engines(1);
	engines(0);
	mc_gpu_set_ops(NULL);
	is(n_alloc, n_free, "every pinned chunk is freed with its engine (%d, %d)", n_alloc, n_free);
	free(dev);
	unsetenv("MC_FORCE_TCP");
	return tap_done();
}
