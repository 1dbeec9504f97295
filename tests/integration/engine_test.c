/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine C API between engines, per transport and metadata backend.
 *
 *   engine_test META tcp|shm     two engines in this process and a target in a child process:
 *                                reads and writes of many sizes and batch shapes checked byte
 *                                for byte (memfd-backed and private target memory), out-of-range
 *                                and unregistered addresses refused, a child killed in the
 *                                middle of a batch fails its requests (no hang) while another
 *                                target's complete, and a restarted child is reconnected by the
 *                                periodic descriptor refresh.  tcp sets MC_FORCE_TCP=1.
 *   engine_test META file SEG PATH1 PATH2 LEN
 *                                a file segment SEG (descriptor already in the metadata store,
 *                                two files of LEN bytes laid end to end): reads and writes of many
 *                                sizes, across the file boundary, checked against the files.
 *   engine_test META shm-race    two threads open a same-host target's segment at once (the
 *                                target stopped meanwhile, so the two opens overlap): both get
 *                                the same handle and copy through it byte for byte; prints the
 *                                segment's name ("# race segment NAME") so the caller can count
 *                                the descriptor fetches and shm attaches in the debug log (one
 *                                each).
 *   engine_test --child META NAME PORT   (internal) a target process: prints "ADDR PORT".
 *
 * META is P2PHANDSHAKE or a metadata URL.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/transfer_engine_c.h"
#include "../unit/tap.h"
#include "cluster_common.h"

#define BUF (32u << 20)
#define CHILD_BUF (8u << 20)

static int wait_batch(transfer_engine_t e, batch_id_t b, size_t n, int *completed)
{
	time_t end = time(NULL) + 30;
	size_t i;

	*completed = 0;
	for (i = 0; i < n; i++) {
		struct transfer_status st;

		do {
			if (getTransferStatus(e, b, i, &st))
				return -1;
			if (time(NULL) > end)
				return -2;
		} while (st.status == STATUS_PENDING || st.status == STATUS_WAITING);
		*completed += st.status == STATUS_COMPLETED;
	}
	return 0;
}

/* Run n requests as one batch; the number that completed, or -1 on a hang or API error. */
static int run(transfer_engine_t e, struct transfer_request *req, size_t n)
{
	batch_id_t b = allocateBatchID(e, n);
	int done = -1;

	if (b == INVALID_BATCH)
		return -1;
	if (submitTransfer(e, b, req, n) || wait_batch(e, b, n, &done))
		done = -1;
	freeBatchID(e, b);
	return done;
}

static struct transfer_request mkreq(int op, void *src, segment_handle_t seg, uint64_t off,
				     uint64_t len)
{
	struct transfer_request r = { op, src, seg, off, len };

	return r;
}

/* Shared memory from a memfd; the descriptor stays open (the engine finds it by inode). */
static void *memfd_alloc(size_t len)
{
	int fd = memfd_create("engine-test", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)len))
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

static int child_main(const char *meta, const char *name, int port)
{
	transfer_engine_t e = createTransferEngine(meta, name, "127.0.0.1", (uint64_t)port, 0);
	uint8_t *buf = memfd_alloc(CHILD_BUF);
	char ipport[128];

	if (e == NULL || buf == NULL || registerLocalMemory(e, buf, CHILD_BUF, "cpu:0", 1) ||
	    getLocalIpAndPort(e, ipport, sizeof(ipport)))
		return 1;
	memset(buf, 0x5a, CHILD_BUF);
	printf("%llu %s\n", (unsigned long long)(uintptr_t)buf, strrchr(ipport, ':') + 1);
	fflush(stdout);
	for (;;)
		pause();
}

/* Start a child target; its pid, buffer address and handshake port. */
static pid_t spawn_child(const char *meta, const char *name, int port, uint64_t *addr, int *rport)
{
	int p[2];
	pid_t pid;
	char ps[16], line[128];
	FILE *f;

	if (pipe(p))
		return -1;
	snprintf(ps, sizeof(ps), "%d", port);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execl("/proc/self/exe", "engine_test", "--child", meta, name, ps, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	if (f == NULL || fgets(line, sizeof(line), f) == NULL ||
	    sscanf(line, "%llu %d", (unsigned long long *)addr, rport) != 2) {
		if (f)
			fclose(f);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	fclose(f);
	return pid;
}

static void sizes_and_batches(transfer_engine_t ini, segment_handle_t seg, uint8_t *ibuf,
			      uint8_t *tbuf, const char *what)
{
	static const size_t sizes[] = { 1, 4096, 65536, (1u << 20) + 3, 16u << 20 };
	struct transfer_request req[256];
	size_t k;
	int i, ok_w = 1, ok_r = 1;

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];

		cc_fill(ibuf, n, "w", k);
		req[0] = mkreq(OPCODE_WRITE, ibuf, seg, (uint64_t)(uintptr_t)(tbuf + 7), n);
		ok_w &= run(ini, req, 1) == 1 && cc_check(tbuf + 7, n, "w", k);
		cc_fill(tbuf + 4096, n, "r", k);
		req[0] = mkreq(OPCODE_READ, ibuf + 1, seg, (uint64_t)(uintptr_t)(tbuf + 4096), n);
		ok_r &= run(ini, req, 1) == 1 && cc_check(ibuf + 1, n, "r", k);
	}
	ok(ok_w, "%s: WRITEs of 1 B .. 16 MiB land intact", what);
	ok(ok_r, "%s: READs of 1 B .. 16 MiB arrive intact", what);

	/* A batch of 64 mixed requests of 256 KiB. */
	cc_fill(ibuf, BUF / 2, "mix", 1);
	cc_fill(tbuf + BUF / 2, BUF / 2, "mix", 2);
	for (i = 0; i < 64; i++) {
		size_t chunk = BUF / 2 / 64, o = (i % 2 ? BUF / 2 : 0) + (size_t)i * chunk;

		req[i] = mkreq(i % 2 ? OPCODE_READ : OPCODE_WRITE, ibuf + o, seg,
			       (uint64_t)(uintptr_t)(tbuf + o), chunk);
	}
	is(run(ini, req, 64), 64, "%s: a batch of 64 mixed reads and writes completes", what);
	for (i = 0, k = 1; i < 64; i++) {
		size_t chunk = BUF / 2 / 64, o = (i % 2 ? BUF / 2 : 0) + (size_t)i * chunk;

		k &= !memcmp(ibuf + o, tbuf + o, chunk);
	}
	ok(k, "%s: and its data matches on both sides", what);

	/* 256 small requests of odd sizes and offsets. */
	cc_fill(ibuf, 256 * 1000, "small", 3);
	for (i = 0; i < 256; i++)
		req[i] = mkreq(OPCODE_WRITE, ibuf + i * 1000, seg,
			       (uint64_t)(uintptr_t)(tbuf + 3 + i * 1000), 1 + (i * 37) % 1000);
	is(run(ini, req, 256), 256, "%s: a batch of 256 small writes completes", what);
	for (i = 0, k = 1; i < 256; i++)
		k &= !memcmp(ibuf + i * 1000, tbuf + 3 + i * 1000, 1 + (i * 37) % 1000);
	ok(k, "%s: and every byte of it landed", what);
}

static int file_main(const char *meta, const char *segname, const char *p1, const char *p2,
		     uint64_t flen)
{
	transfer_engine_t ini = createTransferEngine(meta, "file-initiator", "127.0.0.1", 0, 0);
	uint64_t total = 2 * flen;
	uint8_t *ibuf = malloc(total + 64), *back = malloc(total);
	static const uint64_t offs[] = { 0, 1, 4096, 65536 + 5 };
	static const size_t sizes[] = { 1, 511, 4096, 65536, (1u << 20) + 3 };
	struct transfer_request req[8];
	segment_handle_t seg;
	size_t a, k;
	int okw = 1, okr = 1, fd1, fd2;

	ok(ini != NULL, "an engine starts with %s metadata", meta);
	if (ini == NULL)
		return tap_done();
	ok(installTransport(ini, "nvmeof", NULL) != NULL, "installTransport(\"nvmeof\") succeeds");
	ok(installTransport(ini, "file", NULL) != NULL, "\"file\" names the same transport");
	ok(registerLocalMemory(ini, ibuf, total + 64, "cpu:0", 1) == 0, "register local memory");
	seg = openSegment(ini, segname);
	ok(seg > 0, "open the file segment %s (handle %d)", segname, seg);
	fd1 = open(p1, O_RDONLY);
	fd2 = open(p2, O_RDONLY);
	for (a = 0; a < sizeof(offs) / sizeof(offs[0]); a++)
		for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			uint64_t off = offs[a] + (a == 3 ? flen - 70000 : 0), n = sizes[k];

			if (off + n > total)
				continue;
			cc_fill(ibuf + 3, n, "fw", a * 10 + k);
			req[0] = mkreq(OPCODE_WRITE, ibuf + 3, seg, off, n);
			okw &= run(ini, req, 1) == 1;
			/* The files themselves hold the bytes. */
			if (pread(fd1, back, flen, 0) != (ssize_t)flen ||
			    pread(fd2, back + flen, flen, 0) != (ssize_t)flen ||
			    !cc_check(back + off, n, "fw", a * 10 + k))
				okw = 0;
			memset(ibuf, 0, n + 8);
			req[0] = mkreq(OPCODE_READ, ibuf + 5, seg, off, n);
			okr &= run(ini, req, 1) == 1 && cc_check(ibuf + 5, n, "fw", a * 10 + k);
		}
	ok(okw, "WRITEs of 1 B .. 1 MiB at aligned and odd offsets (some across the two files) land in the files");
	ok(okr, "READs of the same ranges return them");
	cc_fill(ibuf, total, "whole", 9);
	for (k = 0; k < 8; k++)
		req[k] = mkreq(k % 2 ? OPCODE_WRITE : OPCODE_WRITE, ibuf + k * (total / 8), seg,
			       k * (total / 8), total / 8);
	ok(run(ini, req, 8) == 8 && pread(fd1, back, flen, 0) == (ssize_t)flen &&
		   pread(fd2, back + flen, flen, 0) == (ssize_t)flen && cc_check(back, total, "whole", 9),
	   "a batch of 8 writes covering both files whole");
	req[0] = mkreq(OPCODE_READ, ibuf, seg, total - 10, 11);
	req[1] = mkreq(OPCODE_WRITE, ibuf, seg, total, 1);
	req[2] = mkreq(OPCODE_READ, ibuf, seg, 0, 10);
	is(run(ini, req, 3), 1, "ranges beyond the files fail, the valid one completes");
	ok(openSegment(ini, "no-such-file-segment") < 0, "an unknown segment fails to open");
	for (k = 0; k < 8; k++)
		req[k] = mkreq(OPCODE_READ, ibuf + k * (total / 8), seg, k * (total / 8), total / 8);
	{
		batch_id_t b = allocateBatchID(ini, 8);
		int done = -1;

		submitTransfer(ini, b, req, 8);
		ok(uninstallTransport(ini, "nvmeof") == 0 && wait_batch(ini, b, 8, &done) == 0,
		   "uninstalling the file transport with reads in flight ends them all (%d completed)",
		   done);
		freeBatchID(ini, b);
	}
	ok(run(ini, req, 1) == 0 && uninstallTransport(ini, "file") == ERR_INVALID_ARGUMENT,
	   "then requests to the file segment fail and it uninstalls once");
	close(fd1);
	close(fd2);
	unregisterLocalMemory(ini, ibuf);
	destroyTransferEngine(ini);
	free(ibuf);
	free(back);
	return tap_done();
}

struct race_opener {
	transfer_engine_t e;
	const char *name;
	int entered;		/* atomic: about to call openSegment */
	int done;		/* atomic: openSegment returned */
	pid_t tid;		/* atomic */
	segment_handle_t h;
};

static void *race_open(void *arg)
{
	struct race_opener *o = arg;

	__atomic_store_n(&o->tid, gettid(), __ATOMIC_RELEASE);
	__atomic_store_n(&o->entered, 1, __ATOMIC_RELEASE);
	o->h = openSegment(o->e, o->name);
	__atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* 1 when this process's thread tid sleeps (state S or D in /proc/self/task/TID/stat). */
static int thread_sleeps(pid_t tid)
{
	char path[64], line[512], *p;
	FILE *f;
	int s = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')')) != NULL)
		s = p[1] == ' ' && (p[2] == 'S' || p[2] == 'D');
	fclose(f);
	return s;
}

/* Two opens of one same-host segment at once (engine_test META shm-race). */
static int race_main(const char *meta)
{
	int p2p = !strcmp(meta, "P2PHANDSHAKE"), cport, i, k, both = 0;
	struct race_opener op[2];
	pthread_t th[2];
	transfer_engine_t ini;
	uint8_t *ibuf = malloc(2u << 20);
	char cname[64];
	uint64_t caddr;
	pid_t child;

	ini = createTransferEngine(meta, "race-initiator", "127.0.0.1", 0, 0);
	ok(ini && ibuf && registerLocalMemory(ini, ibuf, 2u << 20, "cpu:0", 1) == 0,
	   "an initiator engine with %s metadata", meta);
	snprintf(cname, sizeof(cname), "race-seg-%d", (int)getpid());
	child = spawn_child(meta, p2p ? "127.0.0.1" : cname, 0, &caddr, &cport);
	ok(child > 0, "a target process starts");
	if (!ini || child <= 0)
		return tap_done();
	if (p2p)
		snprintf(cname, sizeof(cname), "127.0.0.1:%d", cport);
	printf("# race segment %s\n", cname);
	fflush(stdout);
	/* Stopped, the target answers neither its descriptor nor its shm socket: the first open
	 * waits there, the second meets it in progress. */
	kill(child, SIGSTOP);
	memset(op, 0, sizeof(op));
	for (i = 0; i < 2; i++) {
		op[i].e = ini;
		op[i].name = cname;
		pthread_create(&th[i], NULL, race_open, &op[i]);
	}
	/* Well inside the 5 s the stopped target's descriptor fetch may take: both seen asleep
	 * at once, or, on a machine too busy for the samples to catch that, both inside
	 * openSegment (entered, not returned) 200 ms after they entered, which the stopped
	 * target cannot let them leave. */
	for (k = 0; k < 2000 && !both; k++) {
		both = 1;
		for (i = 0; i < 2; i++)
			both &= __atomic_load_n(&op[i].entered, __ATOMIC_ACQUIRE) &&
				thread_sleeps(__atomic_load_n(&op[i].tid, __ATOMIC_ACQUIRE));
		if (!both)
			usleep(1000);
		if (!both && k == 200) {
			both = 1;
			for (i = 0; i < 2; i++)
				both &= __atomic_load_n(&op[i].entered, __ATOMIC_ACQUIRE) &&
					!__atomic_load_n(&op[i].done, __ATOMIC_ACQUIRE);
		}
	}
	ok(both, "both openers wait inside openSegment while the target is stopped");
	kill(child, SIGCONT);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ok(op[0].h > 0 && op[0].h == op[1].h, "both opens return the same handle (%d, %d)",
	   op[0].h, op[1].h);
	for (i = 0; i < 2; i++) {
		struct transfer_request req;
		uint64_t off = (uint64_t)i * (2u << 20);
		char tag[16];

		snprintf(tag, sizeof(tag), "race%d", i);
		cc_fill(ibuf, 2u << 20, tag, 1);
		req = mkreq(OPCODE_WRITE, ibuf, op[i].h, caddr + off, 2u << 20);
		k = run(ini, &req, 1);
		memset(ibuf, 0, 2u << 20);
		req = mkreq(OPCODE_READ, ibuf, op[i].h, caddr + off, 2u << 20);
		ok(k == 1 && run(ini, &req, 1) == 1 && cc_check(ibuf, 2u << 20, tag, 1),
		   "opener %d writes 2 MiB into the target and reads it back byte for byte", i + 1);
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	destroyTransferEngine(ini);
	free(ibuf);
	return tap_done();
}

int main(int argc, char **argv)
{
	const char *meta, *mode;
	int p2p;
	transfer_engine_t tgt, ini;
	uint8_t *tbuf, *tpriv, *ibuf;
	char name[128], cname[64];
	segment_handle_t seg, cseg;
	struct transfer_request req[128];
	uint64_t caddr, caddr2;
	int cport, cport2, i, done;
	pid_t child;
	time_t until;

	if (argc == 5 && !strcmp(argv[1], "--child"))
		return child_main(argv[2], argv[3], atoi(argv[4]));
	signal(SIGPIPE, SIG_IGN);
	meta = argc > 1 ? argv[1] : "P2PHANDSHAKE";
	mode = argc > 2 ? argv[2] : "tcp";
	if (!strcmp(mode, "file") && argc == 7)
		return file_main(meta, argv[3], argv[4], argv[5], strtoull(argv[6], NULL, 0));
	if (!strcmp(mode, "shm-race"))
		return race_main(meta);
	p2p = !strcmp(meta, "P2PHANDSHAKE");
	if (!strcmp(mode, "tcp"))
		setenv("MC_FORCE_TCP", "1", 1);
	setenv("MC_TE_METADATA_REFRESH_INTERVAL_SECONDS", "1", 1);
	tbuf = memfd_alloc(BUF);
	tpriv = malloc(BUF);
	ibuf = malloc(BUF);

	tgt = createTransferEngine(meta, "target-seg", "127.0.0.1", 0, 0);
	ini = createTransferEngine(meta, "initiator-seg", "127.0.0.1", 0, 0);
	ok(tgt && ini && tbuf, "two engines start with %s metadata (%s)", meta, mode);
	if (!tgt || !ini || !tbuf)
		return tap_done();
	ok(installTransport(tgt, "tcp", NULL) != NULL && installTransport(ini, "rdma", NULL) == NULL,
	   "tcp installs; rdma is refused in this build");
	ok(registerLocalMemory(tgt, tbuf, BUF, "cpu:0", 1) == 0 &&
		   registerLocalMemory(tgt, tpriv, BUF, "cpu:0", 1) == 0 &&
		   registerLocalMemory(ini, ibuf, BUF, "cpu:0", 1) == 0,
	   "register 32 MiB of memfd and 32 MiB of private memory on the target, 32 MiB on the initiator");
	ok(registerLocalMemory(tgt, tbuf + 100, 10, "cpu:0", 1) == ERR_ADDRESS_OVERLAPPED,
	   "overlapping registration gives ERR_ADDRESS_OVERLAPPED");
	if (p2p)
		getLocalIpAndPort(tgt, name, sizeof(name));
	else
		snprintf(name, sizeof(name), "target-seg");
	seg = openSegment(ini, name);
	ok(seg > 0, "initiator opens the target's segment %s (handle %d)", name, seg);
	ok(openSegment(ini, "no-such-segment:1") < 0, "opening an unknown segment fails");

	sizes_and_batches(ini, seg, ibuf, tbuf, "memfd memory");
	sizes_and_batches(ini, seg, ibuf, tpriv, "private memory");
	ok(run(ini, (struct transfer_request[]){ mkreq(OPCODE_WRITE, ibuf, seg,
						       (uint64_t)(uintptr_t)tbuf, 1) },
	       1) == 1 && submitTransfer(ini, INVALID_BATCH, req, 1) == ERR_INVALID_ARGUMENT,
	   "an unknown batch id is refused");
	{
		batch_id_t b = allocateBatchID(ini, 2);

		req[0] = mkreq(OPCODE_WRITE, ibuf, seg, (uint64_t)(uintptr_t)tbuf, 10);
		ok(submitTransfer(ini, b, req, 3) == ERR_TOO_MANY_REQUESTS &&
			   freeBatchID(ini, b) == 0 && freeBatchID(ini, b) == ERR_INVALID_ARGUMENT,
		   "submitting beyond the batch size is refused; a batch frees once");
	}

	/* Out-of-range and unregistered targets fail per request. */
	req[0] = mkreq(OPCODE_WRITE, ibuf, seg, (uint64_t)(uintptr_t)tbuf + BUF - 10, 20);
	req[1] = mkreq(OPCODE_WRITE, ibuf, seg, (uint64_t)(uintptr_t)ibuf, 10);
	req[2] = mkreq(OPCODE_WRITE, ibuf, seg, (uint64_t)(uintptr_t)tbuf, 10);
	req[3] = mkreq(OPCODE_READ, ibuf, seg, UINT64_MAX - 5, 10);
	req[4] = mkreq(7, ibuf, seg, (uint64_t)(uintptr_t)tbuf, 10);
	is(run(ini, req, 5), 1, "out-of-range, unregistered, wrapping and bad-opcode requests fail, the valid one completes");
	/* Unregistered after the descriptor was cached: the owner refuses it. */
	is(unregisterLocalMemory(tgt, tpriv), 0, "the target unregisters its private buffer");
	req[0] = mkreq(OPCODE_WRITE, ibuf, seg, (uint64_t)(uintptr_t)tpriv, 100);
	is(run(ini, req, 1), 0, "a write into memory the owner unregistered fails");

	req[0] = mkreq(OPCODE_WRITE, ibuf, LOCAL_SEGMENT, (uint64_t)(uintptr_t)(ibuf + 1000), 100);
	is(run(ini, req, 1), 1, "LOCAL_SEGMENT copies within registered memory");

	/* A target in another process, killed in the middle of a batch. */
	snprintf(cname, sizeof(cname), "child-seg-%d", (int)getpid());
	child = spawn_child(meta, p2p ? "127.0.0.1" : cname, 0, &caddr, &cport);
	ok(child > 0, "a child target process starts");
	if (child <= 0)
		return tap_done();
	if (p2p)
		snprintf(cname, sizeof(cname), "127.0.0.1:%d", cport);
	cseg = openSegment(ini, cname);
	ok(cseg > 0, "the initiator opens the child's segment");
	req[0] = mkreq(OPCODE_READ, ibuf, cseg, caddr, CHILD_BUF);
	ok(run(ini, req, 1) == 1 && ibuf[0] == 0x5a && ibuf[CHILD_BUF - 1] == 0x5a,
	   "a read from the child's memory");
	{
		batch_id_t bc = allocateBatchID(ini, 128), bt = allocateBatchID(ini, 64);
		int dc = -1, dt = -1;

		for (i = 0; i < 128; i++)
			req[i] = mkreq(i % 2 ? OPCODE_READ : OPCODE_WRITE, ibuf + (i % 8) * (1u << 20),
				       cseg, caddr + (uint64_t)(i % 8) * (1u << 20), 1u << 20);
		submitTransfer(ini, bc, req, 128);
		for (i = 0; i < 64; i++)
			req[i] = mkreq(OPCODE_WRITE, ibuf + 8 * (1u << 20) + i * 65536, seg,
				       (uint64_t)(uintptr_t)(tbuf + i * 65536), 65536);
		submitTransfer(ini, bt, req, 64);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		is(wait_batch(ini, bc, 128, &dc), 0,
		   "the batch to the killed child ends (%d of 128 completed before it died)", dc);
		ok(wait_batch(ini, bt, 64, &dt) == 0 && dt == 64,
		   "the batch to the live target all completes meanwhile (%d of 64)", dt);
		freeBatchID(ini, bc);
		freeBatchID(ini, bt);
	}
	req[0] = mkreq(OPCODE_WRITE, ibuf, cseg, caddr, 4096);
	is(run(ini, req, 1), 0, "a request to the dead child ends FAILED instead of hanging");

	/* Restarted (same name; with P2PHANDSHAKE the same handshake port): the periodic refresh
	 * finds its new descriptor and the old handle works again. */
	child = spawn_child(meta, p2p ? "127.0.0.1" : cname, p2p ? cport : 0, &caddr2, &cport2);
	ok(child > 0 && (!p2p || cport2 == cport), "the child restarts (handshake port %d)", cport2);
	until = time(NULL) + 10;
	do {
		usleep(200 * 1000);
		cc_fill(ibuf, 1u << 20, "restart", 1);
		req[0] = mkreq(OPCODE_WRITE, ibuf, cseg, caddr2, 1u << 20);
		done = run(ini, req, 1);
	} while (done != 1 && time(NULL) < until);
	memset(ibuf, 0, 1u << 20);
	req[0] = mkreq(OPCODE_READ, ibuf, cseg, caddr2, 1u << 20);
	ok(done == 1 && run(ini, req, 1) == 1 && cc_check(ibuf, 1u << 20, "restart", 1),
	   "the restarted child is reconnected through the same handle by the refresh");
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}

	/* The in-process target goes away. */
	destroyTransferEngine(tgt);
	req[0] = mkreq(OPCODE_READ, ibuf, seg, (uint64_t)(uintptr_t)tbuf, 1u << 20);
	is(run(ini, req, 1), 0, "a request to a destroyed engine ends FAILED instead of hanging");
	ok(unregisterLocalMemory(ini, ibuf) == 0 &&
		   unregisterLocalMemory(ini, ibuf) == ERR_ADDRESS_NOT_REGISTERED,
	   "unregister once");
	destroyTransferEngine(ini);
	munmap(tbuf, BUF);
	free(tpriv);
	free(ibuf);
	return tap_done();
}
