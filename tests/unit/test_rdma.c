/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rdma transport through the fake NICs of verbs_fake.c: the Connection frame codec, the
 * priority matrix, the fake's QP state machine, then two transports (A on vf0,vf1; B on
 * vf2,vf3) moving data both ways at many sizes, striping, refusals of bad keys and ranges,
 * injected failures retried on another path, dead NICs, endpoints re-established, CQ events
 * acknowledged, and a clean teardown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/rdma_int.h"
#include "rdma_harness.h"
#include "tap.h"
#include "verbs_fake.h"

#define BUF (8u << 20)

static void diag_size(const char *what, size_t n, int rc)
{
	printf("# %s of %zu bytes: status %d\n", what, n, rc);
}

static void test_codec(void)
{
	struct mc_rdma_hs_desc d = { 0 }, e;
	char *s;

	snprintf(d.local_nic_path, sizeof(d.local_nic_path), "10.0.0.1:15000@mlx5_0");
	snprintf(d.peer_nic_path, sizeof(d.peer_nic_path), "10.0.0.2:15001@mlx5_1");
	d.lid = 7;
	d.gid.raw[10] = d.gid.raw[11] = 0xff;
	d.gid.raw[15] = 9;
	d.qpn[0] = 0x123;
	d.qpn[1] = 0xabcdef;
	d.nqp = 2;
	s = mc_rdma_hs_encode(&d);
	ok(s && strstr(s, "\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:00:00:00:09\""),
	   "gid as 16 hex bytes joined by ':' (%s)", s ? s : "");
	ok(s && strstr(s, "\"qp_num\":[291,11259375]") && strstr(s, "\"reply_msg\":\"\""),
	   "qp_num array and empty reply_msg");
	ok(s && mc_rdma_hs_decode(s, strlen(s), &e) == 0 && e.nqp == 2 && e.qpn[1] == 0xabcdef &&
		   e.lid == 7 && !memcmp(&e.gid, &d.gid, 16) &&
		   !strcmp(e.peer_nic_path, d.peer_nic_path),
	   "Connection frame round trip");
	free(s);
	ok(mc_rdma_hs_decode("{\"reply_msg\":\"no such NIC\"}", 27, &e) == 0 &&
		   !strcmp(e.reply_msg, "no such NIC"),
	   "reply_msg is a refusal");
#define BAD(j, what) ok(mc_rdma_hs_decode(j, strlen(j), &e) == ERR_MALFORMED_JSON, what)
	BAD("[1]", "not an object refused");
	BAD("{\"local_nic_path\":\"a@b\",\"peer_nic_path\":\"c@d\",\"local_lid\":1,"
	    "\"local_gid\":\"00:11\",\"qp_num\":[1]}", "short gid refused");
	BAD("{\"local_nic_path\":\"ab\",\"peer_nic_path\":\"c@d\",\"local_lid\":1,"
	    "\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\",\"qp_num\":[1]}",
	    "nic path without @ refused");
	BAD("{\"local_nic_path\":\"a@b\",\"peer_nic_path\":\"c@d\",\"local_lid\":70000,"
	    "\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\",\"qp_num\":[1]}",
	    "lid out of range refused");
	BAD("{\"local_nic_path\":\"a@b\",\"peer_nic_path\":\"c@d\",\"local_lid\":1,"
	    "\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\","
	    "\"qp_num\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}",
	    "too many QPs refused");
	BAD("{\"local_nic_path\":\"a@b\",\"peer_nic_path\":\"c@d\",\"local_lid\":1,"
	    "\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\",\"qp_num\":[-1]}",
	    "negative QP number refused");
	BAD("{\"local_nic_path\":\"a@b\",\"peer_nic_path\":\"c@d\",\"local_lid\":1,"
	    "\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\",\"qp_num\":[]}",
	    "no QP refused");
#undef BAD
}

static void test_topo(void)
{
	char names[3][64] = { "n0", "n1", "n2" };
	struct mc_rdma_topo t;
	json_t *m = json_loads("{\"cpu:0\":[[\"n1\"],[\"n0\",\"zz\"]],\"cpu:1\":[[\"n2\",\"n0\"],[]]}",
			       0, NULL);
	char got[4][64];
	uint32_t p, o;

	ok(mc_rdma_topo_parse(m, names, 3, &t) == 0 && t.nrows == 2, "matrix parsed");
	mc_rdma_topo_lookup(&t, "cpu:0", 3, &p, &o);
	ok(p == 0x2 && o == 0x5, "cpu:0 prefers n1, others fall back (%x %x)", p, o);
	mc_rdma_topo_lookup(&t, "cpu:1", 3, &p, &o);
	ok(p == 0x5 && o == 0x2, "cpu:1 prefers n2 and n0");
	mc_rdma_topo_lookup(&t, "*", 3, &p, &o);
	ok(p == 0x7 && o == 0, "unknown location: every NIC");
	ok(mc_rdma_topo_names(m, got, 4) == 4 && !strcmp(got[0], "n1") && !strcmp(got[3], "n2"),
	   "NIC names of a matrix, first seen first");
	mc_rdma_topo_fini(&t);
	json_decref(m);
	m = json_loads("{\"cpu:0\":\"n1\"}", 0, NULL);
	is(mc_rdma_topo_parse(m, names, 3, &t), ERR_MALFORMED_JSON, "malformed matrix refused");
	json_decref(m);
}

/* The fake's RC state machine, driven directly. */
static void test_qp_states(void)
{
	const struct mc_verbs_ops *v = vf_ops();
	struct ibv_device **l;
	struct ibv_context *c;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *q1, *q2;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	struct ibv_qp_attr a = { 0 };
	struct ibv_wc wc;
	char src[64] = "state machine", dst[64] = { 0 };
	struct ibv_mr *ms, *md;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { 0 }, *bad;
	int n, init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	int rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

	vf_reset(1);
	l = v->get_device_list(&n);
	c = v->open_device(l[0]);
	v->free_device_list(l);
	pd = v->alloc_pd(c);
	cq = v->create_cq(c, 16, NULL, NULL, 0);
	ia.send_cq = ia.recv_cq = cq;
	q1 = v->create_qp(pd, &ia);
	q2 = v->create_qp(pd, &ia);
	ms = v->reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	md = v->reg_mr(pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ok(q1 && q2 && ms && md && q1->state == IBV_QPS_RESET, "QPs start in RESET");
	sge = (struct ibv_sge){ (uint64_t)(uintptr_t)src, 14, ms->lkey };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)dst;
	wr.wr.rdma.rkey = md->rkey;
	ok(v->post_send(q1, &wr, &bad) == EINVAL && bad == &wr, "posting in RESET refused");
	a.qp_state = IBV_QPS_RTR;
	is(v->modify_qp(q1, &a, rtr), EINVAL, "RESET -> RTR refused");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	is(v->modify_qp(q1, &a, IBV_QP_STATE), EINVAL, "INIT without port/pkey/access refused");
	ok(v->modify_qp(q1, &a, init) == 0 && v->modify_qp(q2, &a, init) == 0 &&
		   q1->state == IBV_QPS_INIT,
	   "RESET -> INIT");
	is(v->post_send(q1, &wr, &bad), EINVAL, "posting in INIT refused");
	a.qp_state = IBV_QPS_RTS;
	is(v->modify_qp(q1, &a, rts), EINVAL, "INIT -> RTS refused");
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = 0x10;
	a.dest_qp_num = q2->qp_num;
	is(v->modify_qp(q1, &a, rtr), 0, "INIT -> RTR");
	a.dest_qp_num = q1->qp_num;
	is(v->modify_qp(q2, &a, rtr), 0, "peer INIT -> RTR");
	is(v->post_send(q1, &wr, &bad), EINVAL, "posting in RTR refused");
	a.qp_state = IBV_QPS_RTS;
	ok(v->modify_qp(q1, &a, rts) == 0 && q1->state == IBV_QPS_RTS, "RTR -> RTS");
	ok(v->post_send(q1, &wr, &bad) == 0 && v->poll_cq(cq, 1, &wc) == 1 &&
		   wc.status == IBV_WC_SUCCESS && !strcmp(dst, "state machine"),
	   "RDMA WRITE in RTS lands in the peer's MR");
	wr.wr.rdma.remote_addr += 60;
	ok(v->post_send(q1, &wr, &bad) == 0 && v->poll_cq(cq, 1, &wc) == 1 &&
		   wc.status == IBV_WC_REM_ACCESS_ERR && q1->state == IBV_QPS_ERR,
	   "a write past the remote MR fails with REM_ACCESS_ERR and the QP goes to ERR");
	wr.wr.rdma.remote_addr -= 60;
	ok(v->post_send(q1, &wr, &bad) == 0 && v->poll_cq(cq, 1, &wc) == 1 &&
		   wc.status == IBV_WC_WR_FLUSH_ERR,
	   "work posted on an ERR QP is flushed");
	a.qp_state = IBV_QPS_RESET;
	ok(v->modify_qp(q1, &a, IBV_QP_STATE) == 0 && q1->state == IBV_QPS_RESET, "ERR -> RESET");
	ok(v->destroy_qp(q1) == 0 && v->destroy_qp(q2) == 0 && v->dereg_mr(ms) == 0 &&
		   v->dereg_mr(md) == 0 && v->destroy_cq(cq) == 0 && v->dealloc_pd(pd) == 0 &&
		   v->close_device(c) == 0 && vf_live() == 0,
	   "fake objects torn down");
}

static unsigned char *abuf, *bbuf;
static struct mc_rdma_peer *pb;

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

static void test_sizes(void)
{
	static const size_t sizes[] = { 1, 7, 4096, 65535, 65536, 65537, 100000, 65536 * 3 + 1000,
					(1u << 20) + 3, (3u << 20) + 12345, 4u << 20 };
	size_t i;
	int good_w = 1, good_r = 1;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i], lo = (i * 4099) % 4096, ro = (i * 777) % 8192;
		uint64_t remote = (uint64_t)(uintptr_t)(bbuf + ro);
		int rc;

		fill(abuf + lo, n, (unsigned)i);
		memset(bbuf, 0xee, BUF);
		rc = hn_xfer(0, MC_RDMA_WRITE, abuf + lo, remote, n, pb);
		if (rc || memcmp(abuf + lo, bbuf + ro, n) || bbuf[ro + n] != 0xee ||
		    (ro && bbuf[ro - 1] != 0xee)) {
			good_w = 0;
			diag_size("write", n, rc);
		}
		fill(bbuf + ro, n, (unsigned)i + 100);
		memset(abuf, 0, BUF);
		rc = hn_xfer(0, MC_RDMA_READ, abuf + lo, remote, n, pb);
		if (rc || memcmp(abuf + lo, bbuf + ro, n) || abuf[lo + n] != 0) {
			good_r = 0;
			diag_size("read", n, rc);
		}
	}
	ok(good_w, "writes of 1 B .. 4 MiB at odd offsets arrive byte for byte, nothing around");
	ok(good_r, "reads of 1 B .. 4 MiB at odd offsets match byte for byte");
}

static void test_striping(void)
{
	unsigned long long a0 = vf_bytes(0), a1 = vf_bytes(1);
	struct mc_rdma_stats st;

	fill(abuf, 4u << 20, 3);
	ok(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 4u << 20, pb) == 0 &&
		   memcmp(abuf, bbuf, 4u << 20) == 0,
	   "4 MiB write");
	a0 = vf_bytes(0) - a0;
	a1 = vf_bytes(1) - a1;
	ok(a0 > 0 && a1 > 0 && a0 + a1 == 4u << 20,
	   "its 64 KiB slices went over both of A's NICs (%llu + %llu bytes)", a0, a1);
	st = hn_stats(0);
	ok(st.posted_per_nic[0] > 0 && st.posted_per_nic[1] > 0, "slices posted on vf0 and vf1");
	is(vf_last_sgid(), 2, "automatic GID: the IPv4-mapped RoCE v2 entry (index %ld)",
	   vf_last_sgid());
	ok(vf_qps_in(IBV_QPS_RTS) >= 8,
	   "endpoints to both peer NICs from both local NICs: QPs in RTS on both sides (%d)",
	   vf_qps_in(IBV_QPS_RTS));
}

/* nic_hint: the request's slices go through the named local NIC; an unknown name leaves the
 * choice to the matrix. */
static void test_nic_hint(void)
{
	unsigned long long a0 = vf_bytes(0), a1 = vf_bytes(1);

	fill(abuf, 4u << 20, 5);
	ok(hn_xfer_hint(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 4u << 20, pb, "vf1") ==
			   0 && memcmp(abuf, bbuf, 4u << 20) == 0,
	   "4 MiB write with nic_hint vf1");
	a0 = vf_bytes(0) - a0;
	a1 = vf_bytes(1) - a1;
	ok(a0 == 0 && a1 == 4u << 20, "all of it went over vf1 (%llu + %llu bytes)", a0, a1);
	a0 = vf_bytes(0);
	a1 = vf_bytes(1);
	fill(abuf, 4u << 20, 6);
	ok(hn_xfer_hint(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 4u << 20, pb, "mlx9") ==
			   0 && memcmp(abuf, bbuf, 4u << 20) == 0 && vf_bytes(0) > a0 &&
		   vf_bytes(1) > a1,
	   "an unknown nic_hint stripes over both NICs as before");
}

static void bad_rkey(json_t *d)
{
	json_t *b, *k;
	size_t i, j;

	json_array_foreach(json_object_get(d, "buffers"), i, b)
		json_array_foreach(json_object_get(b, "rkey"), j, k)
			json_integer_set(k, json_integer_value(k) + 0x100);
}

static void longer(json_t *d)
{
	json_t *b;
	size_t i;

	json_array_foreach(json_object_get(d, "buffers"), i, b)
		json_object_set_new(b, "length", json_integer(BUF + (1 << 20)));
}

static void test_refusals(void)
{
	struct mc_rdma_peer *p;
	unsigned char local[64];
	unsigned long e0 = vf_errors();
	int rc;

	is(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf + BUF - 10, 11, pb), ERR_INVALID_ARGUMENT,
	   "a range past the peer's published buffer is refused at submit");
	is(hn_xfer(0, MC_RDMA_WRITE, local, (uint64_t)(uintptr_t)bbuf, sizeof(local), pb), ERR_ADDRESS_NOT_REGISTERED,
	   "unregistered local memory is refused at submit");
	p = hn_peer(1, bad_rkey);
	memset(bbuf, 0x11, 1 << 20);
	fill(abuf, 1 << 20, 9);
	rc = hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 1 << 20, p);
	is(rc, ERR_ENDPOINT, "unknown rkey: the request FAILS (%d), no hang", rc);
	ok(bbuf[0] == 0x11 && bbuf[(1 << 20) - 1] == 0x11, "and nothing was written");
	ok(vf_errors() > e0, "the NIC refused it with error completions");
	mc_rdma_peer_unref(p);
	p = hn_peer(1, longer);
	rc = hn_xfer(0, MC_RDMA_READ, abuf, (uint64_t)(uintptr_t)bbuf + BUF - 4096, 65536, p);
	is(rc, ERR_ENDPOINT, "a range past the peer's MR FAILS at the NIC (%d)", rc);
	mc_rdma_peer_unref(p);
	ok(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 1 << 20, pb) == 0 &&
		   memcmp(abuf, bbuf, 1 << 20) == 0,
	   "after the failures, endpoints are re-established and a write works");
}

static void test_retry(void)
{
	struct mc_rdma_stats s0 = hn_stats(0), s1;
	struct mc_rdma_peer *ghost;

	fill(abuf, 2u << 20, 21);
	vf_fail_nth(5, IBV_WC_RETRY_EXC_ERR);
	ok(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 2u << 20, pb) == 0 &&
		   memcmp(abuf, bbuf, 2u << 20) == 0,
	   "a 2 MiB write with its 5th work request failed still completes, byte for byte");
	s1 = hn_stats(0);
	ok(s1.slices_retried > s0.slices_retried && s1.ep_resets > s0.ep_resets,
	   "the failed slice was retried (%llu) and its endpoint reset",
	   (unsigned long long)(s1.slices_retried - s0.slices_retried));
	{
		int i, good = 1;

		/* 64 slices over 4 paths: the reset one is used again (all but surely). */
		for (i = 0; i < 4; i++) {
			fill(abuf, 1u << 20, 22 + (unsigned)i);
			good &= hn_xfer(0, MC_RDMA_READ, abuf, (uint64_t)(uintptr_t)bbuf, 1u << 20,
					pb) == 0 && memcmp(abuf, bbuf, 1u << 20) == 0;
		}
		ok(good, "the next reads work");
	}
	s0 = hn_stats(0);
	ok(s0.connects > s1.connects && vf_qps_in(IBV_QPS_RTS) == 16,
	   "the reset endpoint was re-established: all 16 QPs in RTS again");

	/* One of A's NICs dies: everything moves to the other. */
	vf_set_port(1, 0);
	fill(abuf, 3u << 20, 23);
	ok(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 3u << 20, pb) == 0 &&
		   memcmp(abuf, bbuf, 3u << 20) == 0,
	   "with vf1 down a 3 MiB write completes over vf0");
	/* One of B's NICs dies too. */
	vf_set_port(3, 0);
	fill(abuf, 1u << 20, 24);
	ok(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 1u << 20, pb) == 0 &&
		   memcmp(abuf, bbuf, 1u << 20) == 0,
	   "with vf1 and the peer's vf3 down, vf0 -> vf2 carries it");
	vf_set_port(0, 0);
	is(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 1u << 20, pb), ERR_ENDPOINT,
	   "every local NIC down: the request FAILS, it does not hang");
	vf_set_port(0, 1);
	vf_set_port(1, 1);
	vf_set_port(3, 1);
	fill(abuf, 1u << 20, 25);
	ok(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 1u << 20, pb) == 0 &&
		   memcmp(abuf, bbuf, 1u << 20) == 0,
	   "NICs back: endpoints reconnect and the write works");

	/* A peer never contacted before whose handshakes fail, then one that refuses. */
	ghost = hn_peer(1, NULL);
	snprintf(ghost->name, sizeof(ghost->name), "ghost");
	hn_hs_fail = -1;
	s0 = hn_stats(0);
	is(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 1u << 20, ghost), ERR_ENDPOINT,
	   "peer unreachable on its handshake port: FAILED");
	hn_hs_fail = 0;
	s1 = hn_stats(0);
	ok(s1.connects > s0.connects, "connects were attempted (%llu)",
	   (unsigned long long)(s1.connects - s0.connects));
	is(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 1u << 20, ghost), ERR_ENDPOINT,
	   "a peer refusing the Connection frame (reply_msg): FAILED");
	mc_rdma_peer_unref(ghost);
	fill(abuf, 1u << 20, 26);
	ok(hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 1u << 20, pb) == 0 &&
		   memcmp(abuf, bbuf, 1u << 20) == 0,
	   "the real peer still works");
}

/* Many requests at once with small queues: QP-full and CQ-full waits. */
struct many {
	struct hn_wait w;
	int left, failed;
	pthread_mutex_t mu;
};

static void many_done(void *arg, int status)
{
	struct many *m = arg;
	int last;

	pthread_mutex_lock(&m->mu);
	m->failed += status != 0;
	last = --m->left == 0;
	pthread_mutex_unlock(&m->mu);
	if (last)
		hn_wait_signal(&m->w, 0);
}

static struct many many_m;

static void many_on_loop(void *arg)
{
	int i, *rc = arg;

	for (i = 0; i < 32; i++) {
		struct mc_rdma_xfer x = {
			.opcode = i % 2 ? MC_RDMA_READ : MC_RDMA_WRITE,
			.local = abuf + (size_t)i * (256 << 10),
			.remote = (uint64_t)(uintptr_t)bbuf + (size_t)i * (256 << 10),
			.len = 256 << 10,
			.peer = pb,
		};

		if (mc_rdma_submit(hn_sides[0].r, &x, many_done, &many_m))
			(*rc)++;
	}
}

static void test_many(void)
{
	int rc = 0, st;

	hn_wait_init(&many_m.w);
	pthread_mutex_init(&many_m.mu, NULL);
	many_m.left = 32;
	fill(abuf, BUF, 31);
	fill(bbuf, BUF, 32);
	hn_on_loop(&hn_sides[0], many_on_loop, &rc);
	ok(rc == 0 && hn_wait_for(&many_m.w, 10, &st) == 0 && many_m.failed == 0,
	   "32 requests of 256 KiB in flight at once all complete");
	ok(memcmp(abuf, bbuf, BUF) == 0, "and every byte is where it belongs");
}

/* Peers whose matrix prefers one of B's NICs. */
static void prefer_vf2(json_t *d)
{
	json_object_set_new(d, "priority_matrix", json_pack("{s[[s][]]}", "cpu:0", "vf2"));
}

static void prefer_vf3(json_t *d)
{
	json_object_set_new(d, "priority_matrix", json_pack("{s[[s][]]}", "cpu:0", "vf3"));
}

static struct hn_xfer ev_t[2];
static struct mc_rdma_peer *ev_p[2];
static unsigned char *ev_buf;
static int ev_in_submit, ev_done_inside;

static void ev_done(void *arg, int status)
{
	if (ev_in_submit)
		ev_done_inside = 1;
	hn_done(arg, status);
}

static void two_submits_on_loop(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < 2; i++) {
		hn_wait_init(&ev_t[i].w);
		ev_t[i].x.opcode = MC_RDMA_WRITE;
		ev_t[i].x.local = ev_buf;
		ev_t[i].x.remote = (uint64_t)(uintptr_t)bbuf;
		ev_t[i].x.len = 1u << 20;
		ev_t[i].x.peer = ev_p[i];
		ev_in_submit = 1;
		ev_t[i].rc = mc_rdma_submit(hn_sides[2].r, &ev_t[i].x, ev_done, &ev_t[i]);
		ev_in_submit = 0;
	}
}

/* MC_MAX_EP_PER_CTX=1: a third transport on vf0 alone writes alternately to B's vf2 and vf3
 * (by B's priority matrix), closing the idle endpoint each time to open the other.  With
 * MC_RETRY_CNT=0 every write must find its path at the first try. */
static void test_eviction(void)
{
	unsigned char *cbuf = malloc(1u << 20);
	struct mc_rdma_peer *p2 = hn_peer(1, prefer_vf2), *p3 = hn_peer(1, prefer_vf3);
	struct mc_rdma_stats st = { 0 };
	int rc, good = 1, i;

	setenv("MC_MAX_EP_PER_CTX", "1", 1);
	setenv("MC_RETRY_CNT", "0", 1);
	rc = hn_start(2, "c", vf_ops(), "vf0", NULL);
	unsetenv("MC_MAX_EP_PER_CTX");
	setenv("MC_RETRY_CNT", "4", 1);
	ok(rc == 0 && cbuf && p2 && p3 &&
		   mc_rdma_register(hn_sides[2].r, cbuf, 1u << 20, NULL, 1) == 0,
	   "transport C on vf0 with room for one endpoint");
	if (rc || cbuf == NULL || p2 == NULL || p3 == NULL)
		goto out;
	for (i = 0; i < 6; i++) {
		fill(cbuf, 1u << 20, 40 + (unsigned)i);
		rc = hn_xfer(2, MC_RDMA_WRITE, cbuf, (uint64_t)(uintptr_t)bbuf, 1u << 20,
			     i % 2 ? p3 : p2);
		good &= rc == 0 && memcmp(cbuf, bbuf, 1u << 20) == 0;
		st = hn_stats(2);
		good &= st.endpoints <= 1;
	}
	ok(good, "six 1 MiB writes complete with never more than one endpoint");
	is(st.connects, 6, "each write evicted the idle endpoint and made its own (%llu connects)",
	   (unsigned long long)st.connects);
	/* While the vf2 endpoint is busy, a request that wants vf3 finds no endpoint and (C has
	 * MC_RETRY_CNT=0) fails at once, but its callback still comes from the loop, not from
	 * inside submit. */
	ev_p[0] = p2;
	ev_p[1] = p3;
	ev_buf = cbuf;
	hn_on_loop(&hn_sides[2], two_submits_on_loop, NULL);
	ok(ev_t[0].rc == 0 && ev_t[1].rc == 0 && !ev_done_inside,
	   "no callback runs inside mc_rdma_submit");
	ok(hn_wait_for(&ev_t[0].w, 10, &rc) == 0 && rc == 0, "the request with an endpoint completes");
	ok(hn_wait_for(&ev_t[1].w, 10, &rc) == 0 && rc == ERR_ENDPOINT,
	   "the one without fails from the loop (%d)", rc);
out:
	hn_stop(2);
	mc_rdma_peer_unref(p2);
	mc_rdma_peer_unref(p3);
	free(cbuf);
}

/* MC_ENABLE_DEST_DEVICE_AFFINITY=1: D on vf0,vf1 writes to A (also vf0,vf1) only over
 * vf0 -> vf0 and vf1 -> vf1. */
static void test_affinity(void)
{
	unsigned char *dbuf = malloc(4u << 20);
	struct mc_rdma_peer *pa = hn_peer(0, NULL);
	struct mc_rdma_stats st = { 0 };
	int rc;

	setenv("MC_ENABLE_DEST_DEVICE_AFFINITY", "1", 1);
	rc = hn_start(2, "d", vf_ops(), "vf0,vf1", NULL);
	unsetenv("MC_ENABLE_DEST_DEVICE_AFFINITY");
	ok(rc == 0 && dbuf && pa && mc_rdma_register(hn_sides[2].r, dbuf, 4u << 20, NULL, 1) == 0,
	   "transport D on vf0, vf1 with destination affinity");
	if (rc == 0 && dbuf && pa) {
		fill(dbuf, 4u << 20, 61);
		rc = hn_xfer(2, MC_RDMA_WRITE, dbuf, (uint64_t)(uintptr_t)abuf, 4u << 20, pa);
		st = hn_stats(2);
		ok(rc == 0 && memcmp(dbuf, abuf, 4u << 20) == 0, "4 MiB write to A");
		ok(st.endpoints == 2 && st.posted_per_nic[0] > 0 && st.posted_per_nic[1] > 0,
		   "two endpoints (vf0 -> a@vf0, vf1 -> a@vf1), both NICs used (%u endpoints)",
		   st.endpoints);
	}
	hn_stop(2);
	mc_rdma_peer_unref(pa);
	free(dbuf);
}

/* Connection frames from the network: mutated valid frames and junk never crash the passive
 * side, and every reply is JSON; refusals create nothing. */
static int fz_bad, fz_n;

static void fuzz_on_loop(void *arg)
{
	static const char valid[] =
		"{\"local_nic_path\":\"fz@vf0\",\"peer_nic_path\":\"b@vf2\",\"local_lid\":16,"
		"\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:10\","
		"\"qp_num\":[1,2],\"reply_msg\":\"\"}";
	unsigned seed = 12345;
	char buf[sizeof(valid) + 16];
	int i, k;

	(void)arg;
	for (i = 0; i < 3000; i++) {
		size_t len = sizeof(valid) - 1;
		char *reply;
		json_t *j;

		memcpy(buf, valid, sizeof(valid));
		for (k = 0; k < 1 + i % 4; k++)
			buf[(size_t)rand_r(&seed) % len] = (char)(rand_r(&seed) % 256);
		if (i % 7 == 0)
			len = (size_t)rand_r(&seed) % len;
		reply = mc_rdma_on_connection(hn_sides[1].r, buf, len);
		j = reply ? json_loads(reply, 0, NULL) : NULL;
		if (!json_is_object(j))
			fz_bad++;
		json_decref(j);
		free(reply);
		fz_n++;
	}
}

static void test_fuzz(void)
{
	hn_on_loop(&hn_sides[1], fuzz_on_loop, NULL);
	ok(fz_n == 3000 && fz_bad == 0, "3000 mutated Connection frames: every reply is JSON (%d bad)",
	   fz_bad);
}

/* B restarts (new QPs, new keys): A's endpoints to it are stale, fail, and reconnect. */
static void test_restart(void)
{
	struct mc_rdma_stats s0 = hn_stats(0), s1;

	hn_stop(1);
	ok(hn_start(1, "b", vf_ops(), "vf2,vf3", NULL) == 0 &&
		   mc_rdma_register(hn_sides[1].r, bbuf, BUF, "cpu:0", 1) == 0,
	   "B restarted with its buffer registered again");
	mc_rdma_peer_unref(pb);
	pb = hn_peer(1, NULL);
	fill(abuf, 2u << 20, 77);
	ok(pb && hn_xfer(0, MC_RDMA_WRITE, abuf, (uint64_t)(uintptr_t)bbuf, 2u << 20, pb) == 0 &&
		   memcmp(abuf, bbuf, 2u << 20) == 0,
	   "a write to the restarted B completes byte for byte");
	s1 = hn_stats(0);
	ok(s1.ep_resets > s0.ep_resets && s1.connects > s0.connects,
	   "stale endpoints were reset (%llu) and reconnected (%llu)",
	   (unsigned long long)(s1.ep_resets - s0.ep_resets),
	   (unsigned long long)(s1.connects - s0.connects));
}

static void test_events(void)
{
	struct mc_rdma_stats s = hn_stats(0);

	ok(s.cq_events > 0 && s.cq_events == s.cq_acked, "CQ events taken (%llu) all acknowledged",
	   (unsigned long long)s.cq_events);
	is(vf_unacked(), 0, "no unacknowledged event on any CQ");
	is(vf_cq_overruns(), 0, "no CQ overran");
}

/* Requests in flight when the transport is freed: each gets its callback, once. */
static struct hn_xfer sf_t[2];

static void submit_free_on_loop(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < 2; i++)
		sf_t[i].rc = mc_rdma_submit(hn_sides[0].r, &sf_t[i].x, hn_done, &sf_t[i]);
	mc_rdma_free(hn_sides[0].r);
	hn_sides[0].r = NULL;
}

static void test_free_in_flight(void)
{
	struct mc_rdma_peer *ghost = hn_peer(1, NULL);
	int i, st[2] = { 1, 1 };

	snprintf(ghost->name, sizeof(ghost->name), "ghost2");
	for (i = 0; i < 2; i++) {
		hn_wait_init(&sf_t[i].w);
		sf_t[i].x.opcode = MC_RDMA_WRITE;
		sf_t[i].x.local = abuf;
		sf_t[i].x.remote = (uint64_t)(uintptr_t)bbuf;
		sf_t[i].x.len = 2u << 20;
		sf_t[i].x.peer = i ? ghost : pb;
	}
	hn_on_loop(&hn_sides[0], submit_free_on_loop, NULL);
	ok(sf_t[0].rc == 0 && sf_t[1].rc == 0 && sf_t[0].w.done && sf_t[1].w.done,
	   "requests in flight at mc_rdma_free got their callbacks before it returned");
	hn_wait_for(&sf_t[0].w, 1, &st[0]);
	hn_wait_for(&sf_t[1].w, 1, &st[1]);
	ok((st[0] == 0 || st[0] == ERR_ENDPOINT) && st[1] == ERR_ENDPOINT,
	   "with done or ERR_ENDPOINT (%d, %d)", st[0], st[1]);
	mc_rdma_peer_unref(ghost);
}

int main(void)
{
	struct mc_rdma_peer *pa;
	int rc;

	setenv("MC_MAX_WR", "8", 1);
	setenv("MC_MAX_CQE_PER_CTX", "24", 1);
	setenv("MC_RETRY_CNT", "4", 1);
	test_codec();
	test_topo();
	test_qp_states();

	vf_reset(4);
	ok(hn_start(0, "a", vf_ops(), "", "{\"cpu:0\":[[\"vf0\",\"vf1\"],[]]}") == 0,
	   "transport A on vf0, vf1 (from its matrix)");
	ok(hn_start(1, "b", vf_ops(), "vf2,vf3", NULL) == 0, "transport B on vf2, vf3");
	rc = hn_start(2, "c", vf_ops(), "vf9", NULL);
	is(rc, ERR_DEVICE_NOT_FOUND, "a missing NIC: ERR_DEVICE_NOT_FOUND (%d)", rc);
	hn_stop(2);
	if (hn_sides[0].r == NULL || hn_sides[1].r == NULL)
		return tap_done();
	ok(mc_rdma_nic_count(hn_sides[0].r) == 2 && mc_rdma_nic_count(hn_sides[1].r) == 2,
	   "two NICs each");
	abuf = aligned_alloc(4096, BUF + 4096);
	bbuf = aligned_alloc(4096, BUF + 8192);
	ok(mc_rdma_register(hn_sides[0].r, abuf, BUF + 4096, "cpu:0", 1) == 0 &&
		   mc_rdma_register(hn_sides[1].r, bbuf, BUF, "cpu:0", 1) == 0,
	   "buffers registered on every NIC");
	is(mc_rdma_register(hn_sides[1].r, bbuf + 4096, 10, NULL, 1), ERR_ADDRESS_OVERLAPPED,
	   "overlapping registration refused");
	pb = hn_peer(1, NULL);
	pa = hn_peer(0, NULL);
	ok(pb && pb->nnics == 2 && pb->nbufs == 1 && pb->bufs[0].rkey[0] != pb->bufs[0].rkey[1],
	   "B's descriptor: 2 devices, a buffer with one rkey per NIC");
	ok(pa && pa->topo.nrows == 1 && pa->topo.rows[0].pref == 3, "A's matrix is published");
	{
		json_t *d = json_pack("{s[{sIsIss}]}", "buffers", "addr",
				      (json_int_t)(uintptr_t)bbuf, "length", (json_int_t)BUF,
				      "other", "kept");
		json_t *b0;

		ok(mc_rdma_desc_fill(hn_sides[1].r, d) == 0 &&
			   json_array_size(json_object_get(d, "buffers")) == 1,
		   "descriptor fill augments the buffer already listed");
		b0 = json_array_get(json_object_get(d, "buffers"), 0);
		ok(!strcmp(json_string_value(json_object_get(b0, "other")), "kept") &&
			   json_array_size(json_object_get(b0, "rkey")) == 2 &&
			   !strcmp(json_string_value(json_object_get(b0, "name")), "cpu:0") &&
			   !strcmp(json_string_value(json_object_get(d, "protocol")), "rdma"),
		   "its other fields kept, name = location, rkey per NIC, protocol rdma");
		json_decref(d);
	}
	mc_rdma_peer_unref(pa);

	test_sizes();
	test_striping();
	test_nic_hint();
	test_refusals();
	test_retry();
	test_many();
	test_eviction();
	test_affinity();
	test_fuzz();
	test_restart();
	test_events();

	is(mc_rdma_unregister(hn_sides[1].r, bbuf + 1), ERR_ADDRESS_NOT_REGISTERED,
	   "unregister needs a buffer's start");
	is(mc_rdma_unregister(hn_sides[1].r, bbuf), 0, "unregister");
	mc_rdma_register(hn_sides[1].r, bbuf, BUF, "cpu:0", 1);
	mc_rdma_peer_unref(pb);
	pb = hn_peer(1, NULL);	/* new rkeys */
	test_free_in_flight();
	mc_rdma_peer_unref(pb);
	hn_stop(0);
	hn_stop(1);
	is(vf_live(), 0, "every QP, MR, CQ, channel, PD and context released (%d left)",
	   vf_live());
	is(vf_destroy_busy(), 0, "no CQ destroyed with unacknowledged events");
	free(abuf);
	free(bbuf);
	return tap_done();
}
