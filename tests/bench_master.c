/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Master RPC benchmark: operations per second of ExistKey, GetReplicaList and PutStart+PutEnd,
 * single and in batches, pipelined over several connections; and the master's resident memory
 * per key.  Talks the wire protocol directly (src/proto), so it measures the master alone.
 *
 *   bench_master HOST:PORT MASTER_PID [NKEYS] [puts]
 *
 * It mounts one large fake segment (the master never touches segment memory), inserts NKEYS
 * keys (default 1,000,000) with batched puts (printing the put rate of each tenth;
 * MC_BENCH_KEY_LEN=40 pads the keys to 40 bytes, MC_BENCH_OBJ_SIZE=64 makes them 64-byte puts), reads /proc/MASTER_PID/status before and after,
 * then runs each workload for 3 seconds ("puts": only the put workloads, as scripts/bench-ha.sh
 * compares them; MC_BENCH_TAG=T names keys and segment apart, for several runs at once).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/wire.h"
#include "proto/rpc.h"

#define DEPTH 8		/* frames in flight per connection */

static struct mc_uuid cid;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int dial(const char *addr)
{
	char host[64];
	const char *c = strrchr(addr, ':');
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(c + 1)) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	snprintf(host, sizeof(host), "%.*s", (int)(c - addr), addr);
	inet_pton(AF_INET, host, &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0) {
			perror("write");
			exit(1);
		}
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

static void recv_all(int fd, void *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r <= 0) {
			perror("read");
			exit(1);
		}
		p = (char *)p + r;
		n -= (size_t)r;
	}
}

/* Read one response frame, return its status; body discarded. */
static int recv_frame(int fd, uint8_t **buf, size_t *cap)
{
	uint8_t hb[MC_RPC_HDR_LEN];
	struct mc_rpc_hdr h;

	recv_all(fd, hb, sizeof(hb));
	if (mc_rpc_hdr_decode(hb, &h, 1u << 30)) {
		fprintf(stderr, "bad frame\n");
		exit(1);
	}
	if (h.body_len > *cap) {
		*cap = h.body_len;
		*buf = realloc(*buf, *cap);
	}
	recv_all(fd, *buf, h.body_len);
	return h.status;
}

/* CPU seconds (user + system) the process pid has used, from /proc/PID/stat; 0 if unreadable. */
static double cpu_of(const char *pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the command name may hold spaces */
	if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
				&ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* MC_BENCH_TAG: a name of this run, so that several can share a master (keys and segment). */
static const char *tag = "";
/* MC_BENCH_KEY_LEN: pad keys with '-' to this many bytes (0: as they come, 20 bytes untagged). */
static size_t key_len;
/* MC_BENCH_OBJ_SIZE: bytes of each put (default 4096; the fake segment holds about 10 GiB). */
static uint64_t obj_size = 4096;

static void key_of(char *out, size_t n, uint64_t i)
{
	int len = snprintf(out, n, "bench/%skey/%010llu", tag, (unsigned long long)i);

	while (len >= 0 && (size_t)len < key_len && (size_t)len + 1 < n)
		out[len++] = '-';
	if (len >= 0 && (size_t)len < n)
		out[len] = '\0';
}

/* Build a request frame for op over keys [first, first+batch). */
static void build(struct mc_wbuf *w, uint16_t op, uint64_t first, uint32_t batch, int with_sizes)
{
	struct mc_rpc_config cfg;
	char key[512];
	uint32_t i;

	mc_wbuf_reset(w);
	mc_rpc_frame_begin(w, MC_RPC_REQUEST, op, 0, first);
	if (op == MC_OP_PUT_START || op == MC_OP_BATCH_PUT_START) {
		mc_rpc_put_uuid(w, &cid);
		mc_rpc_config_default(&cfg);
		mc_rpc_put_config(w, &cfg);
	} else if (op == MC_OP_PUT_END || op == MC_OP_BATCH_PUT_END) {
		mc_rpc_put_uuid(w, &cid);
		mc_wbuf_u8(w, MC_REPLICA_ALL);
	}
	mc_wbuf_u32(w, batch);
	for (i = 0; i < batch; i++) {
		key_of(key, sizeof(key), first + i);
		mc_wbuf_cstr(w, key);
		if (with_sizes)
			mc_wbuf_u64(w, obj_size);
	}
	mc_rpc_frame_end(w, 0);
}

/* Pipelined: keep DEPTH frames in flight; returns items per second. */
static double run(int fd, uint16_t op, uint16_t op2, uint32_t batch, uint64_t nkeys,
		  uint64_t *next_key, double secs)
{
	struct mc_wbuf w;
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint64_t items = 0, inflight = 0;
	double t0 = now_s(), end = t0 + secs;

	mc_wbuf_init(&w);
	while (now_s() < end || inflight) {
		while (inflight < DEPTH && now_s() < end) {
			uint64_t first = next_key ? *next_key : (uint64_t)rand() % (nkeys - batch);

			if (next_key)
				*next_key += batch;
			build(&w, op, first, batch, op == MC_OP_PUT_START || op == MC_OP_BATCH_PUT_START);
			send_all(fd, w.data, w.len);
			if (op2) {
				build(&w, op2, first, batch, 0);
				send_all(fd, w.data, w.len);
			}
			inflight++;
		}
		recv_frame(fd, &buf, &cap);
		if (op2)
			recv_frame(fd, &buf, &cap);
		inflight--;
		items += batch;
	}
	free(buf);
	mc_wbuf_fini(&w);
	return (double)items / (now_s() - t0);
}

static long rss_kb(const char *pid)
{
	char path[64], line[256];
	FILE *f;
	long kb = -1;

	snprintf(path, sizeof(path), "/proc/%s/status", pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = atol(line + 6);
	if (f)
		fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	struct mc_wbuf w;
	struct mc_rpc_segment seg;
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint64_t nkeys = argc > 3 ? strtoull(argv[3], NULL, 10) : 1000000, next = 0;
	long rss0, rss1;
	int fd, st, tenth = 0;
	double t0, tenth_t, tenth_c, tenth_rate[10], tenth_cpu[10];
	char segname[64];

	if (argc < 3) {
		fprintf(stderr, "usage: bench_master HOST:PORT MASTER_PID [NKEYS] [puts]\n");
		return 2;
	}
	if (getenv("MC_BENCH_TAG"))
		tag = getenv("MC_BENCH_TAG");
	if (getenv("MC_BENCH_KEY_LEN"))
		key_len = strtoul(getenv("MC_BENCH_KEY_LEN"), NULL, 10);
	if (key_len > 500)
		key_len = 500;
	if (getenv("MC_BENCH_OBJ_SIZE") && strtoull(getenv("MC_BENCH_OBJ_SIZE"), NULL, 10) > 0)
		obj_size = strtoull(getenv("MC_BENCH_OBJ_SIZE"), NULL, 10);
	snprintf(segname, sizeof(segname), "bench:%s1", tag);
	fd = dial(argv[1]);
	mc_uuid_generate(&cid);
	mc_wbuf_init(&w);
	mc_uuid_generate(&seg.id);
	seg.name = mc_strv_c(segname);
	seg.base = 1ull << 40;
	seg.size = 1ull << 40;
	seg.endpoint = mc_strv_c("127.0.0.1:1");
	seg.protocol = mc_strv_c("tcp");
	mc_rpc_frame_begin(&w, MC_RPC_REQUEST, MC_OP_MOUNT_SEGMENT, 0, 1);
	mc_rpc_put_uuid(&w, &cid);
	mc_rpc_put_segment(&w, &seg);
	mc_rpc_frame_end(&w, 0);
	send_all(fd, w.data, w.len);
	st = recv_frame(fd, &buf, &cap);
	if (st) {
		fprintf(stderr, "mount failed: %d\n", st);
		return 1;
	}
	rss0 = rss_kb(argv[2]);
	t0 = now_s();
	tenth_t = t0;
	tenth_c = cpu_of(argv[2]);
	while (next < nkeys) {
		uint32_t b = nkeys - next < 1024 ? (uint32_t)(nkeys - next) : 1024;

		/* The put rate per tenth of the inserts: a table that slows as it grows shows. */
		if (nkeys >= 10 * 1024 && next >= nkeys * (tenth + 1) / 10) {
			tenth_rate[tenth] = (double)(next - nkeys * tenth / 10) / (now_s() - tenth_t);
			tenth_cpu[tenth] = (cpu_of(argv[2]) - tenth_c) * 1e6 /
					   (double)(next - nkeys * tenth / 10);
			tenth_t = now_s();
			tenth_c = cpu_of(argv[2]);
			tenth++;
		}

		build(&w, MC_OP_BATCH_PUT_START, next, b, 1);
		send_all(fd, w.data, w.len);
		build(&w, MC_OP_BATCH_PUT_END, next, b, 0);
		send_all(fd, w.data, w.len);
		recv_frame(fd, &buf, &cap);
		recv_frame(fd, &buf, &cap);
		next += b;
	}
	rss1 = rss_kb(argv[2]);
	printf("inserted %llu keys in %.2f s; master RSS %ld -> %ld KiB: %.0f bytes per key "
	       "(keys are %zu bytes)\n",
	       (unsigned long long)nkeys, now_s() - t0, rss0, rss1,
	       (double)(rss1 - rss0) * 1024.0 / (double)nkeys,
	       key_len > 20 + strlen(tag) ? key_len : 20 + strlen(tag));
	if (tenth == 9) {
		tenth_rate[9] = (double)(nkeys - nkeys * 9 / 10) / (now_s() - tenth_t);
		tenth_cpu[9] = (cpu_of(argv[2]) - tenth_c) * 1e6 / (double)(nkeys - nkeys * 9 / 10);
		printf("puts/s per tenth:");
		for (tenth = 0; tenth < 10; tenth++)
			printf(" %.0f", tenth_rate[tenth]);
		printf("; last/first %.2f\n", tenth_rate[9] / tenth_rate[0]);
		/* Per put of the master's CPU: what machine load bends least. */
		printf("master CPU us/put per tenth:");
		for (tenth = 0; tenth < 10; tenth++)
			printf(" %.2f", tenth_cpu[tenth]);
		printf("; last/first %.2f\n", tenth_cpu[9] / tenth_cpu[0]);
	}
	if (argc > 4 && !strcmp(argv[4], "puts"))
		goto puts;
	printf("ExistKey          batch 1:   %10.0f ops/s\n",
	       run(fd, MC_OP_EXIST_KEY, 0, 1, nkeys, NULL, 3));
	printf("ExistKey          batch 128: %10.0f keys/s\n",
	       run(fd, MC_OP_BATCH_EXIST_KEY, 0, 128, nkeys, NULL, 3));
	printf("GetReplicaList    batch 1:   %10.0f ops/s\n",
	       run(fd, MC_OP_GET_REPLICA_LIST, 0, 1, nkeys, NULL, 3));
	printf("GetReplicaList    batch 128: %10.0f keys/s\n",
	       run(fd, MC_OP_BATCH_GET_REPLICA_LIST, 0, 128, nkeys, NULL, 3));
puts:
	printf("PutStart+PutEnd   batch 1:   %10.0f pairs/s\n",
	       run(fd, MC_OP_PUT_START, MC_OP_PUT_END, 1, nkeys, &next, 3));
	printf("PutStart+PutEnd   batch 128: %10.0f pairs/s\n",
	       run(fd, MC_OP_BATCH_PUT_START, MC_OP_BATCH_PUT_END, 128, nkeys, &next, 3));
	free(buf);
	mc_wbuf_fini(&w);
	close(fd);
	return 0;
}
