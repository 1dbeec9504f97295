/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store client with protocol rdma over the fake NICs of verbs_fake.c: a real
 * mooncake_master on a free loopback port, store handles A (pure client) and B (a segment) in
 * this process on NICs vf0,vf1 (a fake sysfs tree lists them), MC_STORE_SHM=0 so the same-host
 * shortcut does not take the copies.  A puts objects of 1 B .. 4 MiB that land in B's segment
 * and gets them back, byte for byte, with the bytes seen on the fake NICs (not over tcp); a
 * tcp-only handle C is still reachable from A; a listed NIC that is missing fails setup; B
 * going away while A's transfer is in flight gives -800 (TRANSFER_FAIL), not a hang.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "engine/transport.h"
#include "mooncake/store_c.h"
#include "tap.h"
#include "transfer/nic_topo.h"
#include "verbs_fake.h"
#include "master_proc.h"

#define BIG (4u << 20)

static char root[128];

/* The "protocol" the master's admin HTTP shows for segment name (NULL if not found). */
static char *segment_protocol(const char *name)
{
	json_t *j = mp_admin_json("/get_segments_detail"), *segs = json_object_get(j, "segments");
	char *out = NULL;
	size_t i;

	for (i = 0; i < json_array_size(segs); i++) {
		json_t *s = json_array_get(segs, i);
		const char *sn = json_string_value(json_object_get(s, "segment_name"));
		const char *p = json_string_value(json_object_get(s, "protocol"));

		if (sn && p && !strcmp(sn, name)) {
			out = strdup(p);
			break;
		}
	}
	json_decref(j);
	return out;
}

static void sys_put(const char *rel)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", root, rel);
	if (system(cmd) != 0)
		printf("# %s failed\n", cmd);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7 + seed + (i >> 12));
}

static unsigned long long nic_bytes(void)
{
	return vf_bytes(0) + vf_bytes(1);
}

static mooncake_store_t handle(const char *master_addr, uint64_t seg, const char *protocol,
			       const char *devices)
{
	mooncake_store_t s = mooncake_store_create();

	if (s && mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", seg, 16u << 20, protocol,
				      devices, master_addr) != 0) {
		mooncake_store_destroy(s);
		return NULL;
	}
	return s;
}

struct getter {
	mooncake_store_t s;
	void *buf;
	int64_t rc;
	int done;
};

static void *get_thread(void *arg)
{
	struct getter *g = arg;

	g->rc = mooncake_store_get_into(g->s, "held", g->buf, 4096);
	__atomic_store_n(&g->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

int main(void)
{
	static const size_t sizes[] = { 1, 4097, 65536 * 5 + 17, BIG };
	unsigned char *src = aligned_alloc(4096, BIG), *dst = aligned_alloc(4096, BIG);
	char master_addr[64], key[32], segb[128], segc[128];
	const char *pref[1];
	mooncake_replicate_config_t cfg = { .replica_num = 1 };
	mooncake_store_t a, b, c, bad;
	struct getter g = { 0 };
	pthread_t th;
	int port, i, good;
	time_t t0;

	if (src == NULL || dst == NULL)
		return 1;
	snprintf(root, sizeof(root), "/tmp/mc_store_rdma.XXXXXX");
	if (mkdtemp(root) == NULL)
		return 1;
	mc_nic_topo_set_root(root);
	unsetenv("MC_TE_FILTERS");
	unsetenv("MC_CUSTOM_TOPO_JSON");
	sys_put("sys/devices/system/node/node0");
	sys_put("sys/class/infiniband/vf0/device");
	sys_put("sys/class/infiniband/vf1/device");
	setenv("MC_STORE_SHM", "0", 1);
	setenv("MC_SLICE_TIMEOUT", "1", 1);
	vf_reset(2);
	mc_te_rdma_set_verbs(vf_ops());

	port = mp_free_port();
	if (port <= 0 || mp_start_master(port, NULL)) {
		printf("1..0 # SKIP no mooncake_master\n");
		mp_stop_master();
		return 77;
	}
	snprintf(master_addr, sizeof(master_addr), "127.0.0.1:%d", port);

	bad = handle(master_addr, 0, "rdma", "vf0,vf9");
	is(bad, NULL, "protocol rdma with a missing listed NIC (vf9): setup fails");
	mooncake_store_destroy(bad);

	b = handle(master_addr, 64u << 20, "rdma", "vf0,vf1");
	a = handle(master_addr, 0, "rdma", "vf0,vf1");
	c = handle(master_addr, 8u << 20, "tcp", NULL);
	ok(a && b && c, "handles A (rdma, client), B (rdma, 64 MiB) and C (tcp, 8 MiB)");
	if (!a || !b || !c)
		goto out;
	mooncake_store_get_hostname(b, segb, sizeof(segb));
	mooncake_store_get_hostname(c, segc, sizeof(segc));
	ok(mooncake_store_register_buffer(a, src, BIG) == 0 &&
		   mooncake_store_register_buffer(a, dst, BIG) == 0,
	   "A registers its buffers");
	{
		/* MountSegment says how a segment's bytes move; readers do not route on it. */
		char *pb = segment_protocol(segb), *pc = segment_protocol(segc);

		ok(pb && !strcmp(pb, "rdma"), "the master shows B's segment as rdma (%s)",
		   pb ? pb : "missing");
		ok(pc && !strcmp(pc, "tcp"), "... and C's as tcp (%s)", pc ? pc : "missing");
		free(pb);
		free(pc);
	}
	pref[0] = segb;
	cfg.preferred_segments = pref;
	cfg.preferred_segments_count = 1;

	for (i = 0; i < (int)(sizeof(sizes) / sizeof(sizes[0])); i++) {
		unsigned long long before = nic_bytes();
		size_t n = sizes[i];

		snprintf(key, sizeof(key), "obj%d", i);
		fill(src, n, (unsigned)i + 1);
		is(mooncake_store_put_from(a, key, src, n, &cfg), 0, "A puts %zu bytes", n);
		ok(nic_bytes() - before >= n, "... %llu bytes went over the fake NICs",
		   nic_bytes() - before);
		memset(dst, 0, n);
		before = nic_bytes();
		good = mooncake_store_get_into(a, key, dst, BIG) == (int64_t)n &&
		       memcmp(src, dst, n) == 0;
		ok(good, "A gets %s back, byte for byte", key);
		ok(nic_bytes() - before >= n, "... over the fake NICs (%llu bytes)",
		   nic_bytes() - before);
		memset(dst, 0, n);
		ok(mooncake_store_get_into(b, key, dst, BIG) == (int64_t)n && memcmp(src, dst, n) == 0,
		   "B reads %s from its own segment", key);
	}

	/* A tcp-only store: no engine behind its segment name, the store's tcp data path. */
	pref[0] = segc;
	fill(src, 100000, 77);
	{
		unsigned long long before = nic_bytes();

		ok(mooncake_store_put_from(a, "on_c", src, 100000, &cfg) == 0 &&
			   mooncake_store_get_into(a, "on_c", dst, BIG) == 100000 &&
			   memcmp(src, dst, 100000) == 0,
		   "A puts to and gets from the tcp-only store C");
		is(nic_bytes(), before, "... not over the NICs");
	}

	/* B goes away while A's read is in flight (its work request is held on the NIC). */
	pref[0] = segb;
	ok(mooncake_store_put_from(a, "held", src, 4096, &cfg) == 0, "A puts 'held' on B");
	vf_hold_nth(1);
	g.s = a;
	g.buf = dst;
	t0 = time(NULL);
	if (pthread_create(&th, NULL, get_thread, &g) == 0) {
		usleep(300000);
		ok(!__atomic_load_n(&g.done, __ATOMIC_SEQ_CST), "A's read waits on the held request");
		mooncake_store_destroy(b);
		b = NULL;
		pthread_join(th, NULL);
		/* -704 once the master, asked again after the failure, no longer lists B's copy. */
		ok(g.rc == -800 || g.rc == -704,
		   "B removed mid-transfer: A's get gives -800 or -704 (%lld)", (long long)g.rc);
		ok(time(NULL) - t0 <= 15, "... within %ld s, no hang", (long)(time(NULL) - t0));
	} else {
		ok(0, "getter thread");
	}

out:
	mooncake_store_destroy(a);
	mooncake_store_destroy(b);
	mooncake_store_destroy(c);
	is(vf_live(), 0, "every fake verbs object released (%d left)", vf_live());
	mp_stop_master();
	mc_te_rdma_set_verbs(NULL);
	tap_rmtree(root);
	free(src);
	free(dst);
	return tap_done();
}
