/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End-to-end test of a running cluster through the public C API (include/mooncake/store_c.h).
 * Started by test_cluster.sh after a master and two mooncake_client daemons are up; the master
 * address comes from MC_MASTER.  Two store handles (writer and reader, both pure clients) move
 * objects through the daemons' segments, so every byte crosses processes over TCP.
 *
 * Prints TAP lines; exit status 0 when every check passed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/store_c.h"
#include "../unit/tap.h"
#include "cluster_common.h"

#define NOBJ 2000

static const char *master;
static mooncake_store_t wr, rd;

static size_t obj_size(int i)
{
	/* 1 B .. 64 MiB: a handful of big objects, the rest log-spread below 1 MiB. */
	static const size_t big[] = { 64u << 20, 64u << 20, 32u << 20, 16u << 20, 16u << 20,
				      8u << 20, 4u << 20, (4u << 20) + 1, 2u << 20, (1u << 20) + 3 };

	if (i < 10)
		return big[i];
	if (i == 10)
		return 1;
	return (size_t)1 << ((unsigned)i % 20) | (size_t)(i * 7919 % 1000);
}

static void obj_key(int i, char *out, size_t n)
{
	snprintf(out, n, "cluster/obj/%05d", i);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int setup_handle(mooncake_store_t *h, uint64_t local_buf)
{
	*h = mooncake_store_create();
	if (*h == NULL)
		return -1;
	return mooncake_store_setup(*h, "127.0.0.1", "P2PHANDSHAKE", 0, local_buf, "tcp", "",
				    master);
}

static void test_bulk(void)
{
	char key[64];
	int i, put_fail = 0, get_fail = 0, cmp_fail = 0;
	uint64_t bytes = 0;
	double t0;

	t0 = now_s();
	/* Small objects in batches through batch_put_from, big ones one by one through put. */
	for (i = 0; i < NOBJ;) {
		if (obj_size(i) >= (1u << 20)) {
			size_t n = obj_size(i);
			void *v = malloc(n);

			obj_key(i, key, sizeof(key));
			cc_fill(v, n, key, 1);
			if (mooncake_store_put(wr, key, v, n, NULL) != 0)
				put_fail++;
			bytes += n;
			free(v);
			i++;
			continue;
		} else {
			const char *keys[50];
			void *bufs[50];
			size_t sizes[50];
			int res[50], n = 0, j;
			char kb[50][64];

			while (n < 50 && i < NOBJ && obj_size(i) < (1u << 20)) {
				obj_key(i, kb[n], sizeof(kb[n]));
				keys[n] = kb[n];
				sizes[n] = obj_size(i);
				bufs[n] = malloc(sizes[n]);
				cc_fill(bufs[n], sizes[n], kb[n], 1);
				bytes += sizes[n];
				n++;
				i++;
			}
			if (mooncake_store_batch_put_from(wr, keys, bufs, sizes, (size_t)n, NULL, res))
				put_fail += n;
			else
				for (j = 0; j < n; j++)
					put_fail += res[j] != 0;
			for (j = 0; j < n; j++)
				free(bufs[j]);
		}
	}
	printf("# put %d objects, %.1f MiB in %.2f s\n", NOBJ, bytes / 1048576.0, now_s() - t0);
	is(put_fail, 0, "2000 objects of 1 B..64 MiB put through the writer (%d failures)",
	   put_fail);

	t0 = now_s();
	for (i = 0; i < NOBJ; i++) {
		size_t n = obj_size(i);
		void *v = malloc(n + 16);
		int64_t got;

		obj_key(i, key, sizeof(key));
		got = mooncake_store_get_into(rd, key, v, n + 16);
		if (got != (int64_t)n) {
			if (get_fail++ < 5)
				printf("# get %s: %" PRId64 " (want %zu)\n", key, got, n);
		} else if (!cc_check(v, n, key, 1)) {
			cmp_fail++;
		}
		free(v);
	}
	printf("# get %d objects in %.2f s\n", NOBJ, now_s() - t0);
	is(get_fail, 0, "every object reads back through the reader (%d failures)", get_fail);
	is(cmp_fail, 0, "every object is byte-identical (%d mismatches)", cmp_fail);

	/* The same objects again through batch_get_into, a mix of hits and misses. */
	{
		const char *keys[8];
		char kb[8][64];
		void *bufs[8];
		size_t sizes[8];
		int64_t res[8];
		int j, good = 1;

		for (j = 0; j < 8; j++) {
			if (j % 2)
				snprintf(kb[j], sizeof(kb[j]), "cluster/missing/%d", j);
			else
				obj_key(20 + j, kb[j], sizeof(kb[j]));
			keys[j] = kb[j];
			sizes[j] = obj_size(20 + j) + 1;
			bufs[j] = malloc(sizes[j]);
		}
		is(mooncake_store_batch_get_into(rd, keys, bufs, sizes, 8, res), 0,
		   "batch_get_into with mixed hits and misses runs");
		for (j = 0; j < 8; j++) {
			if (j % 2)
				good &= res[j] == -704;
			else
				good &= res[j] == (int64_t)obj_size(20 + j) &&
					cc_check(bufs[j], obj_size(20 + j), kb[j], 1);
			free(bufs[j]);
		}
		ok(good, "batch_get_into: hits return their bytes, misses -704");
	}
}

static void test_semantics(void)
{
	char buf[4096], key[64];
	const char *keys[4];
	int res[4];
	int64_t r64;
	int r;

	ok(mooncake_store_get_into(rd, "no/such/key", buf, sizeof(buf)) == -704,
	   "get of a missing key gives -704");
	ok(mooncake_store_is_exist(rd, "no/such/key") == 0, "is_exist of a missing key is 0");
	ok(mooncake_store_get_size(rd, "no/such/key") == -704, "get_size of a missing key is -704");
	ok(mooncake_store_remove(rd, "no/such/key", 0) == -704, "remove of a missing key is -704");

	obj_key(100, key, sizeof(key));
	is(mooncake_store_is_exist(rd, key), 1, "is_exist of a stored key is 1");
	is(mooncake_store_get_size(rd, key), (int64_t)obj_size(100), "get_size is the object size");
	keys[0] = key;
	keys[1] = "no/such/key";
	keys[2] = "cluster/obj/00101";
	keys[3] = "no/such/key2";
	ok(mooncake_store_batch_is_exist(rd, keys, 4, res) == 0 && res[0] == 1 && res[1] == 0 &&
		   res[2] == 1 && res[3] == 0,
	   "batch_is_exist: 1/0/1/0 (%d %d %d %d)", res[0], res[1], res[2], res[3]);

	/* A put of an existing key succeeds and does not overwrite. */
	memset(buf, 'X', 100);
	is(mooncake_store_put(wr, key, buf, 100, NULL), 0, "put of an existing key returns 0");
	{
		size_t n = obj_size(100);
		void *v = malloc(n);

		ok(mooncake_store_get_into(rd, key, v, n) == (int64_t)n && cc_check(v, n, key, 1),
		   "...and the old value is unchanged");
		is(mooncake_store_get_into(rd, key, v, n - 1 > 0 ? n - 1 : 0), -600,
		   "get_into a buffer smaller than the object gives -600");
		free(v);
	}

	/* Leases: the reads above leased the key; remove without force is refused. */
	r = mooncake_store_remove(rd, key, 0);
	is(r, -706, "remove of a just-read key is refused with -706 (got %d)", r);
	is(mooncake_store_remove(rd, key, 1), 0, "forced remove succeeds");
	is(mooncake_store_is_exist(rd, key), 0, "removed key no longer exists");
	is(mooncake_store_get_into(rd, key, buf, sizeof(buf)), -704, "and reads give -704");

	/* Regex removal. */
	{
		int i, all = 1;

		for (i = 0; i < 10; i++) {
			snprintf(key, sizeof(key), "rx/%d", i);
			all &= mooncake_store_put(wr, key, "abc", 3, NULL) == 0;
		}
		ok(all, "ten keys rx/0..9 put");
		r64 = mooncake_store_remove_by_regex(wr, "^rx/[0-4]$", 1);
		is(r64, 5, "remove_by_regex ^rx/[0-4]$ removes 5 (got %" PRId64 ")", r64);
		ok(mooncake_store_is_exist(rd, "rx/3") == 0 && mooncake_store_is_exist(rd, "rx/7") == 1,
		   "only the matching keys are gone");
	}

	/* Argument checking. */
	ok(mooncake_store_put(NULL, "k", "v", 1, NULL) == -1, "NULL handle gives -1");
	ok(mooncake_store_put(wr, NULL, "v", 1, NULL) == -1, "NULL key gives -1");
	is(mooncake_store_register_buffer(wr, buf, 0), -1, "register_buffer of size 0 gives -1");
	is(mooncake_store_get_hostname(wr, buf, 3), -1, "get_hostname into a tiny buffer gives -1");
	ok(mooncake_store_get_hostname(wr, buf, sizeof(buf)) == 0 && strchr(buf, ':') != NULL,
	   "get_hostname gives host:port (%s)", buf);
	is(mooncake_store_health_check(wr), 0, "health_check is 0 on a live cluster");
}

static void test_zero_copy(void)
{
	size_t n = 3u << 20;
	char *src = malloc(n), *dst = malloc(n);
	int64_t got;

	is(mooncake_store_register_buffer(wr, src, n), 0, "register_buffer of 3 MiB");
	is(mooncake_store_register_buffer(rd, dst, n), 0, "register_buffer on the reader");
	cc_fill(src, n, "zc/key", 7);
	ok(mooncake_store_put_from(wr, "zc/key", src, n, NULL) == 0, "put_from a registered buffer");
	got = mooncake_store_get_into(rd, "zc/key", dst, n);
	ok(got == (int64_t)n && cc_check(dst, n, "zc/key", 7),
	   "get_into a registered buffer returns identical bytes");
	is(mooncake_store_unregister_buffer(wr, src), 0, "unregister_buffer");
	free(src);
	free(dst);
}

/* Send raw bytes to the master and report whether it closed the connection within 5 s. */
static int master_closes_after(const void *bytes, size_t n)
{
	char host[64];
	const char *colon = strrchr(master, ':');
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct timeval tv = { 5, 0 };
	char tmp[256];
	int fd, closed = 0;
	ssize_t r;

	snprintf(host, sizeof(host), "%.*s", (int)(colon - master), master);
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	inet_pton(AF_INET, host, &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (send(fd, bytes, n, MSG_NOSIGNAL) < 0) {
		close(fd);
		return 1;
	}
	for (;;) {
		r = recv(fd, tmp, sizeof(tmp), 0);
		if (r == 0 || (r < 0 && errno == ECONNRESET)) {
			closed = 1;
			break;
		}
		if (r < 0)
			break;
	}
	close(fd);
	return closed;
}

static void test_bad_frames(void)
{
	uint8_t garbage[64], hdr[24];
	char key[64];
	size_t n = obj_size(200);
	void *v = malloc(n);

	memset(garbage, 0xA5, sizeof(garbage));
	is(master_closes_after(garbage, sizeof(garbage)), 1,
	   "a frame with a bad magic makes the master close that connection");
	/* A valid header announcing a 1 GiB body. */
	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, "MCRP", 4);
	hdr[4] = 1;
	hdr[6] = 43;	/* ExistKey */
	hdr[8] = 0;
	hdr[9] = 0;
	hdr[10] = 0;
	hdr[11] = 0x40;
	is(master_closes_after(hdr, sizeof(hdr)), 1,
	   "an oversized frame makes the master close that connection");
	obj_key(200, key, sizeof(key));
	ok(mooncake_store_get_into(rd, key, v, n) == (int64_t)n && cc_check(v, n, key, 1),
	   "other clients keep working after bad frames");
	free(v);
}

struct worker {
	int id;
	int errors;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char key[64], buf[70000];
	int i;

	for (i = 0; i < 200; i++) {
		size_t n = (size_t)(1 + (i * 977 + w->id * 131) % 65536);
		int64_t got;

		snprintf(key, sizeof(key), "mt/%d/%d", w->id, i);
		cc_fill(buf, n, key, 3);
		if (mooncake_store_put(i % 2 ? wr : rd, key, buf, n, NULL) != 0) {
			w->errors++;
			continue;
		}
		memset(buf, 0, n);
		got = mooncake_store_get_into(i % 2 ? rd : wr, key, buf, sizeof(buf));
		if (got != (int64_t)n || !cc_check(buf, n, key, 3))
			w->errors++;
		if (mooncake_store_is_exist(wr, key) != 1)
			w->errors++;
		if (i % 3 == 0 && mooncake_store_remove(rd, key, 1) != 0)
			w->errors++;
		/* Shared keys read by everyone at once. */
		obj_key(300 + i % 50, key, sizeof(key));
		n = obj_size(300 + i % 50);
		if (n <= sizeof(buf)) {
			got = mooncake_store_get_into(rd, key, buf, sizeof(buf));
			if (got != (int64_t)n || !cc_check(buf, n, key, 1))
				w->errors++;
		}
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[8];
	struct worker w[8];
	int i, errors = 0;

	for (i = 0; i < 8; i++) {
		w[i].id = i;
		w[i].errors = 0;
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		errors += w[i].errors;
	}
	is(errors, 0, "8 threads of mixed put/get/exist/remove on shared handles (%d errors)",
	   errors);
}

static void test_remove_all(void)
{
	int64_t n = mooncake_store_remove_all(wr, 1);
	char key[64];

	ok(n > 1000, "remove_all(force) removes everything (%" PRId64 " objects)", n);
	obj_key(500, key, sizeof(key));
	is(mooncake_store_is_exist(rd, key), 0, "no object is left afterwards");
}

int main(void)
{
	master = cc_env("MC_MASTER", "127.0.0.1:50051");
	is(setup_handle(&wr, 1u << 20), 0, "writer setup against %s (1 MiB local buffer)", master);
	is(setup_handle(&rd, 1u << 20), 0, "reader setup");
	if (tap_failed)
		return tap_done();
	test_bulk();
	test_semantics();
	test_zero_copy();
	test_bad_frames();
	test_threads();
	test_remove_all();
	mooncake_store_destroy(wr);
	mooncake_store_destroy(rd);
	return tap_done();
}
