/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transfer_engine_bench: throughput of the transfer engine C API between two processes, with
 * the flags of upstream's transfer_engine_bench (--mode, --metadata_server, --segment_id,
 * --operation, --block_size, --batch_size, --threads, --duration, --protocol, --device_name...).  A target registers a buffer and waits; an initiator opens
 * the target's segment and runs batches of block_size READs or WRITEs from several threads for
 * the duration, then prints the throughput.
 *
 * --protocol=tcp forces tcp (MC_FORCE_TCP=1); shm or auto let the engine choose same-host
 * shared memory when the target is on this host (the engine logs the transport it picked; the
 * bench turns MC_LOG_LEVEL=info on so that line shows).  Buffers are memfd-backed, as the
 * engine's managed buffers are, so a same-host peer maps them.  --reference=memcpy also times a
 * single-thread memcpy loop of block_size in the same run and prints the ratio.
 *
 * The initiator finds the target's buffer in the descriptor the target publishes (as
 * upstream's bench reads segment_desc->buffers): no address to pass around (TEB_REMOTE_BASE
 * still overrides it).  --use_vram puts the buffer in GPU memory (--gpu_id) in a build with
 * CUDA; --backend takes upstream's classic engine (tent is not part of this build).
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "common/auth.h"
#include "common/log.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"
#include "reactor/options.h"

struct teb_cfg {
	char *cluster_secret_file;
	char *local_server_name;
	char *metadata_server;
	char *mode;
	char *operation;
	char *protocol;
	char *device_name;
	char *nic_priority_matrix;
	char *segment_id;
	uint64_t buffer_size;
	int64_t batch_size;
	uint64_t block_size;
	double duration;
	int64_t threads;
	int auto_discovery;
	char *report_unit;
	int64_t report_precision;
	int64_t rpc_port;
	char *reference;
	char *backend;
	int use_vram;
	int64_t gpu_id;
	int init_mem;
	int verbose;
	char *vmodule;
	int symbolize_stacktrace;
	int check_config;
};

#define O(f) offsetof(struct teb_cfg, f)
static const struct mc_opt teb_opts[] = {
	{ "cluster_secret_file", NULL, NULL, MC_OPT_PATH, O(cluster_secret_file), "", 0, -1,
	  "the cluster secret (default: $MOONCAKE_CLUSTER_SECRET_FILE)" },
	{ "local_server_name", NULL, NULL, MC_OPT_ADDR, O(local_server_name), "127.0.0.1", 0, -1,
	  "this engine's segment name (with P2PHANDSHAKE: its address)" },
	{ "metadata_server", NULL, NULL, MC_OPT_METADATA, O(metadata_server), "P2PHANDSHAKE", 0, -1,
	  "metadata service: P2PHANDSHAKE or http://host:port/metadata" },
	{ "mode", NULL, NULL, MC_OPT_CHOICE, O(mode), "initiator|target", 0, -1,
	  "initiator or target" },
	{ "operation", NULL, NULL, MC_OPT_CHOICE, O(operation), "read|write", 0, -1,
	  "read or write" },
	{ "protocol", NULL, NULL, MC_OPT_CHOICE, O(protocol), "tcp|shm|auto|rdma|nvmeof|file", 0,
	  -1,
	  "tcp (forced), shm / auto (shared memory when the target is on this host), or rdma" },
	{ "device_name", NULL, NULL, MC_OPT_NAMES, O(device_name), "", 0, -1,
	  "rdma: comma list of NICs, each preferred for every location" },
	{ "nic_priority_matrix", NULL, NULL, MC_OPT_PATH, O(nic_priority_matrix), "", 0, -1,
	  "rdma: file holding the NIC priority matrix JSON (overrides device_name)" },
	{ "segment_id", NULL, NULL, MC_OPT_TOKEN, O(segment_id), "", 0, -1,
	  "the target's segment name (initiator)" },
	{ "buffer_size", "segment_size", NULL, MC_OPT_SIZE, O(buffer_size), "1GB", 4096,
	  1099511627776.0, "bytes registered on each side (the segment each side contributes)" },
	{ "batch_size", NULL, NULL, MC_OPT_INT, O(batch_size), "128", 1, 65536,
	  "requests per batch" },
	{ "block_size", NULL, NULL, MC_OPT_SIZE, O(block_size), "65536", 1, 1073741824.0,
	  "bytes per request" },
	{ "duration", NULL, NULL, MC_OPT_DOUBLE, O(duration), "10", 0.1, 86400, "seconds" },
	{ "threads", NULL, NULL, MC_OPT_INT, O(threads), "12", 1, 256, "initiator threads" },
	{ "auto_discovery", NULL, NULL, MC_OPT_BOOL, O(auto_discovery), "false", 0, -1,
	  "rdma: NICs and their NUMA nodes from sysfs (MC_TE_FILTERS, MC_CUSTOM_TOPO_JSON)" },
	{ "report_unit", NULL, NULL, MC_OPT_CHOICE, O(report_unit),
	  "GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb", 0, -1,
	  "GB, GiB, Gb, MB, MiB, Mb, KB, KiB or Kb" },
	{ "report_precision", NULL, NULL, MC_OPT_INT, O(report_precision), "2", 0, 9,
	  "digits after the decimal point" },
	{ "rpc_port", NULL, NULL, MC_OPT_INT, O(rpc_port), "0", 0, 65535,
	  "handshake port (0: a free one in 15000-17000)" },
	{ "reference", NULL, NULL, MC_OPT_CHOICE, O(reference), "none|memcpy", 0, -1,
	  "none, or memcpy: also time a single-thread memcpy of block_size and print the ratio" },
	{ "backend", NULL, NULL, MC_OPT_CHOICE, O(backend), "classic|tent", 0, -1,
	  "transfer engine: classic (tent, upstream's newer engine, is not part of this build)" },
	{ "use_vram", NULL, NULL, MC_OPT_BOOL, O(use_vram), "false", 0, -1,
	  "put the buffer in GPU memory (needs a build with CUDA and a GPU)" },
	{ "gpu_id", NULL, NULL, MC_OPT_INT, O(gpu_id), "0", -1, 1023,
	  "GPU of the buffer with --use_vram (-1: the first)" },
	{ "init_mem", NULL, NULL, MC_OPT_BOOL, O(init_mem), "true", 0, -1,
	  "fill the buffer before the run" },
	{ "v", NULL, NULL, MC_OPT_BOOL, O(verbose), "false", 0, 9,
	  "debug logging; glog's --v=N: any N > 0 turns it on" },
	{ "vmodule", NULL, NULL, MC_OPT_STRING, O(vmodule), "", 0, -1,
	  "module=N,...: lines are not split by module here, so any N > 0 turns on debug lines" },
	{ "symbolize_stacktrace", NULL, NULL, MC_OPT_BOOL, O(symbolize_stacktrace), "true", 0, -1,
	  "accepted for compatibility: this program prints no stack traces to symbolize" },
	{ "check_config", NULL, NULL, MC_OPT_BOOL, O(check_config), "false", 0, -1,
	  "validate the flags and the environment, then exit (0 valid, 2 invalid)" },
	MC_OPT_END,
};

static struct teb_cfg cfg;

/* Does --vmodule (module=N,...) ask for any level above 0? */
static int teb_vmodule_on(const char *s)
{
	const char *eq;

	for (; s && (eq = strchr(s, '=')) != NULL; s = strchr(eq, ','), s = s ? s + 1 : NULL)
		if (strtol(eq + 1, NULL, 10) > 0)
			return 1;
	return 0;
}
static uint64_t remote;		/* the target's buffer (its descriptor, or TEB_REMOTE_BASE) */
static transfer_engine_t engine;
static segment_handle_t target;
static uint8_t *buffer;
static volatile sig_atomic_t stop;
static uint64_t total_bytes;
static pthread_mutex_t total_mu = PTHREAD_MUTEX_INITIALIZER;
static int failed;

static double teb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void teb_on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void *teb_worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	size_t b = (size_t)cfg.batch_size, i;
	struct transfer_request *req = calloc(b, sizeof(*req));
	uint64_t span = cfg.buffer_size / (uint64_t)cfg.threads, base = (uint64_t)id * span;
	uint64_t bytes = 0;
	double end = teb_now() + cfg.duration;

	while (teb_now() < end && !failed) {
		batch_id_t bid = allocateBatchID(engine, b);

		for (i = 0; i < b; i++) {
			uint64_t off = base + (i * cfg.block_size) % (span - cfg.block_size + 1);

			req[i].opcode = strcmp(cfg.operation, "write") ? OPCODE_READ : OPCODE_WRITE;
			req[i].source = buffer + off;
			req[i].target_id = target;
			req[i].target_offset = remote + off;
			req[i].length = cfg.block_size;
		}
		if (bid == INVALID_BATCH || submitTransfer(engine, bid, req, b)) {
			failed = 1;
			break;
		}
		for (i = 0; i < b; i++) {
			struct transfer_status st;

			for (;;) {
				getTransferStatus(engine, bid, i, &st);
				if (st.status != STATUS_PENDING && st.status != STATUS_WAITING)
					break;
				/* Polling must not starve the engine's thread on a small machine. */
				usleep(20);
			}
			if (st.status != STATUS_COMPLETED)
				failed = 1;
			bytes += st.transferred_bytes;
		}
		freeBatchID(engine, bid);
	}
	pthread_mutex_lock(&total_mu);
	total_bytes += bytes;
	pthread_mutex_unlock(&total_mu);
	free(req);
	return NULL;
}

/* memfd-backed shared memory (the fd stays open: the engine hands it to same-host peers). */
static uint8_t *teb_alloc(uint64_t len)
{
	int fd = memfd_create("transfer_engine_bench", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)len))
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* --use_vram: GPU memory for the buffer, its location ("cuda:N") into loc; NULL if none. */
static uint8_t *teb_alloc_vram(uint64_t len, char *loc, size_t n)
{
#ifdef HAVE_CUDA
	int gpu = cfg.gpu_id < 0 ? 0 : (int)cfg.gpu_id;
	void *p = NULL;

	if (cudaSetDevice(gpu) != cudaSuccess || cudaMalloc(&p, len) != cudaSuccess)
		return NULL;
	if (cfg.init_mem && cudaMemset(p, 0x5a, len) != cudaSuccess) {
		cudaFree(p);
		return NULL;
	}
	snprintf(loc, n, "cuda:%d", gpu);
	return p;
#else
	(void)len;
	(void)loc;
	(void)n;
	return NULL;
#endif
}

static void teb_free(uint8_t *p, uint64_t len)
{
#ifdef HAVE_CUDA
	if (cfg.use_vram) {
		cudaFree(p);
		return;
	}
#endif
	munmap(p, len);
}

/* Bytes per second of one thread memcpy'ing block_size blocks at the offsets worker 0 uses
 * (batch_size blocks, over and over) between the buffer and a second one, for the bench's
 * duration. */
static double teb_memcpy_rate(void)
{
	uint8_t *dst = teb_alloc(cfg.buffer_size);
	uint64_t span = cfg.buffer_size / (uint64_t)cfg.threads, bytes = 0, i = 0;
	double t0, end, secs;

	if (dst == NULL)
		return 0;
	memset(dst, 1, cfg.buffer_size);
	t0 = teb_now();
	end = t0 + cfg.duration;
	while (teb_now() < end) {
		/* The offsets worker 0 uses, batch after batch. */
		uint64_t off = ((i++ % (uint64_t)cfg.batch_size) * cfg.block_size) %
			       (span - cfg.block_size + 1);

		if (strcmp(cfg.operation, "write"))
			memcpy(buffer + off, dst + off, cfg.block_size);
		else
			memcpy(dst + off, buffer + off, cfg.block_size);
		bytes += cfg.block_size;
	}
	secs = teb_now() - t0;
	munmap(dst, cfg.buffer_size);
	return (double)bytes / secs;
}

static double teb_unit(const char *u)
{
	static const struct { const char *n; double v; } units[] = {
		{ "GB", 1e9 }, { "GiB", 1073741824.0 }, { "Gb", 1.25e8 }, { "MB", 1e6 },
		{ "MiB", 1048576.0 }, { "Mb", 1.25e5 }, { "KB", 1e3 }, { "KiB", 1024.0 },
		{ "Kb", 125.0 },
	};
	size_t i;

	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(units[i].n, u))
			return units[i].v;
	return 0;
}

/* The --nic_priority_matrix file (at most 1 MiB), malloc'ed and NUL-terminated, or NULL. */
static char *teb_read_matrix(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = f ? malloc((1 << 20) + 1) : NULL;
	size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;

	if (f == NULL || buf == NULL || n == 0 || (n == (1 << 20) && fgetc(f) != EOF)) {
		fprintf(stderr, "transfer_engine_bench: --nic_priority_matrix %s: %s\n", path,
			f == NULL ? strerror(errno) : "empty, or larger than 1 MiB");
		free(buf);
		buf = NULL;
	} else {
		buf[n] = '\0';
	}
	if (f)
		fclose(f);
	return buf;
}

/* What the table cannot say: no stray argument, a block fits a thread's share of the buffer,
 * the initiator's TEB_REMOTE_BASE is a number.  Returns 0 or -1 with one line in err. */
static int teb_check(int argc, char **argv, int next, char *err, size_t n)
{
	const char *rb = getenv("TEB_REMOTE_BASE");
	char *end;

	if (next != argc) {
		snprintf(err, n, "unexpected argument '%s' (see --help)", argv[next]);
		return -1;
	}
	if (cfg.vmodule[0]) {
		const char *p = cfg.vmodule;

		while (p) {	/* each entry module=N */
			const char *e = strchr(p, ','), *eq = strchr(p, '=');

			if (eq == NULL || eq == p || (e && eq > e) || eq[1] < '0' || eq[1] > '9') {
				snprintf(err, n, "invalid value '%s' for --vmodule (expected "
					 "module=N,...)", cfg.vmodule);
				return -1;
			}
			p = e ? e + 1 : NULL;
		}
	}
	if (cfg.block_size > cfg.buffer_size / (uint64_t)cfg.threads) {
		snprintf(err, n, "invalid value '%" PRIu64 "' for --block_size: larger than "
			 "--buffer_size / --threads (%" PRIu64 ")", cfg.block_size,
			 cfg.buffer_size / (uint64_t)cfg.threads);
		return -1;
	}
	if (rb && *rb) {
		errno = 0;
		(void)strtoull(rb, &end, 0);
		if (errno || *end || *rb == '-') {
			snprintf(err, n, "invalid value '%.64s' for environment variable "
				 "TEB_REMOTE_BASE (expected an address)", rb);
			return -1;
		}
	}
	if (!strcmp(cfg.backend, "tent")) {
		snprintf(err, n, "--backend=tent: upstream's TENT engine is not part of this build "
			 "(use classic)");
		return -1;
	}
#ifndef HAVE_CUDA
	if (cfg.use_vram) {
		snprintf(err, n, "--use_vram: this build has no CUDA (configure --with-cuda)");
		return -1;
	}
#endif
	if (cfg.use_vram && !strcmp(cfg.reference, "memcpy")) {
		snprintf(err, n, "--reference=memcpy times host memory: not with --use_vram");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char err[512] = "", name[128], *matrix = NULL, location[32] = "cpu:0";
	void *args[2] = { NULL, NULL };
	int next = argc, i, rdma;
	pthread_t *tids;
	double t0, secs;

	if (mc_opts_wants(argc, argv, "help")) {
		printf("usage: transfer_engine_bench [--flag=value ...]\n"
		       "Throughput of the mooncake transfer engine between two processes.\n\n");
		mc_opts_help(teb_opts, stdout);
		return 0;
	}
	if (mc_opts_defaults(teb_opts, &cfg) ||
	    mc_opts_parse_argv(teb_opts, &cfg, argc, argv, NULL, &next, err, sizeof(err)) ||
	    mc_auth_export("cluster_secret_file", cfg.cluster_secret_file, err, sizeof(err)) ||
	    mc_opts_check_env(mc_opts_env_store, err, sizeof(err)) || teb_check(argc, argv, next,
										err, sizeof(err))) {
		fprintf(stderr, "transfer_engine_bench: %s\n", err[0] ? err : "invalid arguments");
		mc_opts_free(teb_opts, &cfg);
		return 2;
	}
	if (cfg.verbose || teb_vmodule_on(cfg.vmodule))
		mc_log_set_level(MC_LOG_DEBUG);
	if (cfg.check_config) {
		printf("transfer_engine_bench: configuration is valid\n");
		mc_opts_free(teb_opts, &cfg);
		return 0;
	}
	signal(SIGINT, teb_on_signal);
	signal(SIGTERM, teb_on_signal);
	if (!strcmp(cfg.protocol, "tcp"))
		setenv("MC_FORCE_TCP", "1", 1);
	else if (strcmp(cfg.protocol, "shm") && strcmp(cfg.protocol, "auto"))
		fprintf(stderr, "transfer_engine_bench: protocol %s: installing it\n", cfg.protocol);
	setenv("MC_LOG_LEVEL", "info", 0);
	/* rdma as upstream's bench: the matrix file, else the device list, else discovery. */
	rdma = !strcmp(cfg.protocol, "rdma");
	if (rdma && *cfg.nic_priority_matrix) {
		matrix = teb_read_matrix(cfg.nic_priority_matrix);
		if (matrix == NULL)
			return 1;
		args[0] = matrix;
	} else if (rdma && *cfg.device_name) {
		args[0] = cfg.device_name;
	}
	engine = createTransferEngine(cfg.metadata_server, cfg.local_server_name, "",
				      (uint64_t)cfg.rpc_port,
				      cfg.auto_discovery || (rdma && args[0] == NULL));
	if (engine == NULL ||
	    (strcmp(cfg.protocol, "auto") &&
	     installTransport(engine, cfg.protocol, args[0] ? args : NULL) == NULL)) {
		fprintf(stderr, "transfer_engine_bench: cannot start the engine%s\n",
			rdma ? " (no usable RDMA NIC? see the log)" : "");
		free(matrix);
		return 1;
	}
	free(matrix);
	buffer = cfg.use_vram ? teb_alloc_vram(cfg.buffer_size, location, sizeof(location))
			      : teb_alloc(cfg.buffer_size);
	if (buffer == NULL) {
		fprintf(stderr, "transfer_engine_bench: cannot allocate %" PRIu64 " bytes%s\n",
			cfg.buffer_size, cfg.use_vram ? " of GPU memory" : "");
		return 1;
	}
	if (cfg.init_mem && !cfg.use_vram)
		memset(buffer, 0x5a, cfg.buffer_size);
	if (registerLocalMemory(engine, buffer, cfg.buffer_size, location, 1)) {
		fprintf(stderr, "transfer_engine_bench: cannot register memory\n");
		return 1;
	}
	getLocalIpAndPort(engine, name, sizeof(name));
	if (!strcmp(cfg.mode, "target")) {
		printf("target ready: segment %s, buffer 0x%" PRIxPTR " (%" PRIu64 " bytes)\n",
		       !strcmp(cfg.metadata_server, "P2PHANDSHAKE") ? name : cfg.local_server_name,
		       (uintptr_t)buffer, cfg.buffer_size);
		fflush(stdout);
		while (!stop)
			pause();
		destroyTransferEngine(engine);
		teb_free(buffer, cfg.buffer_size);
		mc_opts_free(teb_opts, &cfg);
		return 0;
	}
	target = openSegment(engine, cfg.segment_id);
	if (target < 0) {
		fprintf(stderr, "transfer_engine_bench: cannot open segment %s\n", cfg.segment_id);
		return 1;
	}
	/* The target's buffer: the first its descriptor lists (TEB_REMOTE_BASE overrides). */
	if (getenv("TEB_REMOTE_BASE") && *getenv("TEB_REMOTE_BASE")) {
		remote = strtoull(getenv("TEB_REMOTE_BASE"), NULL, 0);
	} else if (mc_te_first_buffer(engine, target, &remote) != 0) {
		fprintf(stderr, "transfer_engine_bench: segment %s publishes no buffer\n",
			cfg.segment_id);
		return 1;
	}
	tids = calloc((size_t)cfg.threads, sizeof(*tids));
	t0 = teb_now();
	for (i = 0; i < cfg.threads; i++)
		pthread_create(&tids[i], NULL, teb_worker, (void *)(intptr_t)i);
	for (i = 0; i < cfg.threads; i++)
		pthread_join(tids[i], NULL);
	secs = teb_now() - t0;
	printf("Test completed: duration %.2f s, block size %" PRIu64 ", batch size %" PRId64
	       ", threads %" PRId64 ", %s\nThroughput: %.*f %s/s%s\n",
	       secs, cfg.block_size, cfg.batch_size, cfg.threads, cfg.operation,
	       (int)cfg.report_precision, (double)total_bytes / secs / teb_unit(cfg.report_unit),
	       cfg.report_unit, failed ? " (some transfers FAILED)" : "");
	if (!strcmp(cfg.reference, "memcpy")) {
		double rate = teb_memcpy_rate();

		printf("memcpy reference (1 thread, same block size): %.*f %s/s; engine/memcpy %.2f\n",
		       (int)cfg.report_precision, rate / teb_unit(cfg.report_unit),
		       cfg.report_unit, rate > 0 ? (double)total_bytes / secs / rate : 0);
	}
	destroyTransferEngine(engine);
	free(tids);
	teb_free(buffer, cfg.buffer_size);
	mc_opts_free(teb_opts, &cfg);
	return failed ? 1 : 0;
}
