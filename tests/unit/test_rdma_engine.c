/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine with the rdma transport over the fake NICs of verbs_fake.c: two engines
 * in P2PHANDSHAKE mode on 127.0.0.1 install "rdma", publish descriptors with devices, rkeys and
 * the priority matrix, exchange QPs with Connection frames over their real handshake ports,
 * and move data with submitTransfer, checked byte for byte and seen on the fake NICs (not
 * over TCP).  Bad Connection frames get a reply_msg; an unknown NIC fails the install.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"
#include "tap.h"
#include "transfer/nic_topo.h"
#include "te_wait.h"
#include "verbs_fake.h"

#define BUF (8u << 20)

static int run(transfer_engine_t e, segment_handle_t seg, int op, void *local, uint64_t remote,
	       size_t len)
{
	struct transfer_request r = { .opcode = op, .source = local, .target_id = seg,
				      .target_offset = remote, .length = len };

	return te_run_one(e, &r, 20);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 13 + seed + (i >> 11));
}

static char root[128];

static void sys_put(const char *rel, const char *text)
{
	char p[512], cmd[700];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", p);
	if (system(cmd) == 0 && (f = fopen(p, "w")) != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

static int topo_is(transfer_engine_t e, const char *want)
{
	char buf[1024] = "";
	int r = getLocalTopology(e, buf, sizeof(buf)) == 0 && !strcmp(buf, want);

	if (!r)
		printf("# topology %s, want %s\n", buf, want);
	return r;
}

/* Device lists and topology discovery (NICs vf0 on NUMA node 0, vf1 on node 1, in a fake
 * sysfs tree) decide which NICs the engine opens and what it publishes. */
static void devices_and_discovery(void)
{
	void *list1[2] = { (void *)"vf1", NULL }, *list9[2] = { (void *)"vf0,vf9", NULL };
	char buf[16], cmd[200];
	transfer_engine_t a, b;
	char *reply = NULL;
	size_t len;
	json_t *d;

	snprintf(root, sizeof(root), "/tmp/mc_rdma_topo.XXXXXX");
	if (mkdtemp(root) == NULL)
		return;
	mc_nic_topo_set_root(root);
	unsetenv("MC_TE_FILTERS");
	unsetenv("MC_CUSTOM_TOPO_JSON");
	sys_put("sys/devices/system/node/node0/x", "");
	sys_put("sys/devices/system/node/node1/x", "");
	sys_put("sys/class/infiniband/vf0/device/numa_node", "0\n");
	sys_put("sys/class/infiniband/vf1/device/numa_node", "1\n");

	vf_reset(2);
	a = createTransferEngine("P2PHANDSHAKE", "a", "127.0.0.1", 0, 1);
	ok(a != NULL, "auto_discover: engine created");
	ok(a && topo_is(a, "{\"cpu:0\":[[\"vf0\"],[\"vf1\"]],\"cpu:1\":[[\"vf1\"],[\"vf0\"]]}"),
	   "auto_discover: rdma installed on the discovered matrix (getLocalTopology)");
	ok(a && mc_te_hs_call("127.0.0.1", mc_te_rpc_port(a), MC_HS_METADATA, "{}", &reply,
			      &len) == 0,
	   "descriptor fetched");
	d = reply ? json_loads(reply, 0, NULL) : NULL;
	ok(d && !strcmp(json_string_value(json_object_get(d, "protocol")), "rdma") &&
		   json_array_size(json_array_get(json_object_get(json_object_get(d,
						  "priority_matrix"), "cpu:1"), 0)) == 1,
	   "the discovered matrix is published");
	json_decref(d);
	free(reply);
	ok(a && getLocalTopology(a, buf, sizeof(buf)) == ERR_INVALID_ARGUMENT,
	   "getLocalTopology refuses a buffer too small");
	destroyTransferEngine(a);

	setenv("MC_TE_FILTERS", "vf1", 1);
	a = createTransferEngine("P2PHANDSHAKE", "a", "127.0.0.1", 0, 1);
	ok(a && topo_is(a, "{\"cpu:0\":[[],[\"vf1\"]],\"cpu:1\":[[\"vf1\"],[]]}"),
	   "MC_TE_FILTERS keeps vf1 only");
	destroyTransferEngine(a);
	unsetenv("MC_TE_FILTERS");

	a = createTransferEngine("P2PHANDSHAKE", "a", "127.0.0.1", 0, 0);
	ok(a && installTransport(a, "rdma", list9) == NULL,
	   "a device list naming a missing NIC: rdma refused (upstream: error)");
	ok(a && installTransport(a, "rdma", list1) != NULL &&
		   topo_is(a, "{\"*\":[[\"vf1\"],[]],\"cpu:0\":[[\"vf1\"],[]],"
			      "\"cpu:1\":[[\"vf1\"],[]]}"),
	   "a device list: vf1 preferred for every location");
	destroyTransferEngine(a);
	a = createTransferEngine("P2PHANDSHAKE", "a", "127.0.0.1", 0, 0);
	ok(a && mc_te_install_rdma_devices(a, "vf0,vf1") == 0 &&
		   topo_is(a, "{\"*\":[[\"vf0\",\"vf1\"],[]],\"cpu:0\":[[\"vf0\",\"vf1\"],[]],"
			      "\"cpu:1\":[[\"vf0\",\"vf1\"],[]]}"),
	   "Python/store path: a device list installs rdma");
	destroyTransferEngine(a);

	/* No NIC on the host. */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/sys/class'", root);
	is(system(cmd), 0, "NICs gone from sysfs");
	a = createTransferEngine("P2PHANDSHAKE", "a", "127.0.0.1", 0, 1);
	ok(a && topo_is(a, "{\"cpu:0\":[[],[]],\"cpu:1\":[[],[]]}"),
	   "auto_discover without NICs: tcp, the empty matrix");
	ok(a && mc_te_install_rdma_devices(a, "") == 1, "rdma without a device list: tcp fallback");
	destroyTransferEngine(a);
	setenv("MC_FORCE_HCA", "1", 1);
	b = createTransferEngine("P2PHANDSHAKE", "b", "127.0.0.1", 0, 1);
	is(b, NULL, "auto_discover without NICs and MC_FORCE_HCA: no engine");
	destroyTransferEngine(b);
	unsetenv("MC_FORCE_HCA");

	mc_nic_topo_set_root(NULL);
	tap_rmtree(root);
}

/* NICs whose max_mr_size is 1 MiB: a 3.5 MiB buffer is registered as four regions, published
 * as four buffers with their own rkeys (upstream registers it the same way). */
static void mr_chunks(void)
{
	const size_t mib = 1u << 20, len = 3 * mib + mib / 2;
	unsigned char *tb = aligned_alloc(4096, len), *ib = aligned_alloc(4096, len);
	void *args[2] = { (void *)"vf0,vf1", NULL };
	transfer_engine_t tgt, ini;
	unsigned long long before;
	char name[128], *reply = NULL;
	segment_handle_t seg;
	size_t n, i;
	json_t *d, *b;
	int good = 1;

	vf_reset(2);
	vf_set_max_mr_size(mib);
	tgt = createTransferEngine("P2PHANDSHAKE", "t", "127.0.0.1", 0, 0);
	ini = createTransferEngine("P2PHANDSHAKE", "i", "127.0.0.1", 0, 0);
	if (tgt == NULL || ini == NULL || tb == NULL || ib == NULL) {
		ok(0, "engines for the max_mr_size test");
		return;
	}
	uninstallTransport(tgt, "shm");
	uninstallTransport(ini, "shm");
	ok(installTransport(tgt, "rdma", args) && installTransport(ini, "rdma", args),
	   "rdma on NICs with max_mr_size 1 MiB");
	ok(registerLocalMemory(tgt, tb, len, "cpu:0", 1) == 0 &&
		   registerLocalMemory(ini, ib, len, "cpu:0", 1) == 0,
	   "3.5 MiB buffers register");
	ok(mc_te_hs_call("127.0.0.1", mc_te_rpc_port(tgt), MC_HS_METADATA, "{}", &reply, &n) == 0,
	   "descriptor fetched");
	d = reply ? json_loads(reply, 0, NULL) : NULL;
	ok(json_array_size(json_object_get(d, "buffers")) == 4, "four buffers published");
	json_array_foreach(json_object_get(d, "buffers"), i, b) {
		uint64_t a = (uint64_t)json_integer_value(json_object_get(b, "addr"));
		uint64_t l = (uint64_t)json_integer_value(json_object_get(b, "length"));

		if (a != (uint64_t)(uintptr_t)tb + i * mib || l != (i < 3 ? mib : mib / 2) ||
		    json_array_size(json_object_get(b, "rkey")) != 2)
			good = 0;
	}
	ok(good, "each chunk at its address, of its length, with an rkey per NIC");
	json_decref(d);
	free(reply);
	getLocalIpAndPort(tgt, name, sizeof(name));
	seg = openSegment(ini, name);
	fill(ib, len, 3);
	before = vf_bytes(0) + vf_bytes(1);
	ok(run(ini, seg, OPCODE_WRITE, ib + mib, (uint64_t)(uintptr_t)(tb + 2 * mib + 4096),
	       mib / 2) == STATUS_COMPLETED &&
		   memcmp(ib + mib, tb + 2 * mib + 4096, mib / 2) == 0 &&
		   vf_bytes(0) + vf_bytes(1) - before == mib / 2,
	   "a write within one chunk goes over the NICs");
	before = vf_bytes(0) + vf_bytes(1);
	fill(ib, len, 4);
	ok(run(ini, seg, OPCODE_WRITE, ib + mib / 2, (uint64_t)(uintptr_t)tb, mib) ==
			   STATUS_COMPLETED &&
		   memcmp(ib + mib / 2, tb, mib) == 0 && vf_bytes(0) + vf_bytes(1) == before,
	   "local memory across two chunks: carried by tcp instead");
	is(run(ini, seg, OPCODE_WRITE, ib, (uint64_t)(uintptr_t)(tb + mib / 2), mib), STATUS_FAILED,
	   "a target range across two of its chunks FAILS (as upstream), no hang");
	ok(unregisterLocalMemory(tgt, tb) == 0 && unregisterLocalMemory(ini, ib) == 0,
	   "unregistered: every chunk's MRs go");
	is(unregisterLocalMemory(tgt, tb + mib), ERR_ADDRESS_NOT_REGISTERED,
	   "a chunk is not a registration of its own");
	destroyTransferEngine(ini);
	destroyTransferEngine(tgt);
	is(vf_live(), 0, "every fake verbs object released after the chunk test (%d left)",
	   vf_live());
	vf_reset(2);
	free(tb);
	free(ib);
}

/* MC_NUM_QP_PER_EP=3 gives endpoints of three QPs.  MC_SLICE_TIMEOUT=1: a work request the network lost (no completion) resets its endpoint
 * after a second; the flush retries the slice on another path and the request completes.
 * Without the timeout it would wait forever. */
static void slice_timeout(void)
{
	const size_t len = 256u << 10;
	unsigned char *tb = aligned_alloc(4096, len), *ib = aligned_alloc(4096, len);
	void *args[2] = { (void *)"vf0,vf1", NULL };
	transfer_engine_t tgt, ini;
	segment_handle_t seg;
	char name[128];
	time_t t0;
	int st;

	vf_reset(2);
	setenv("MC_SLICE_TIMEOUT", "1", 1);
	setenv("MC_NUM_QP_PER_EP", "3", 1);
	tgt = createTransferEngine("P2PHANDSHAKE", "t", "127.0.0.1", 0, 0);
	ini = createTransferEngine("P2PHANDSHAKE", "i", "127.0.0.1", 0, 0);
	if (tgt == NULL || ini == NULL || tb == NULL || ib == NULL) {
		ok(0, "engines for the slice timeout test");
		return;
	}
	uninstallTransport(tgt, "shm");
	uninstallTransport(ini, "shm");
	ok(installTransport(tgt, "rdma", args) && installTransport(ini, "rdma", args) &&
		   registerLocalMemory(tgt, tb, len, "cpu:0", 1) == 0 &&
		   registerLocalMemory(ini, ib, len, "cpu:0", 1) == 0,
	   "rdma with MC_SLICE_TIMEOUT=1, MC_NUM_QP_PER_EP=3");
	unsetenv("MC_SLICE_TIMEOUT");
	unsetenv("MC_NUM_QP_PER_EP");
	getLocalIpAndPort(tgt, name, sizeof(name));
	seg = openSegment(ini, name);
	fill(ib, len, 9);
	is(run(ini, seg, OPCODE_WRITE, ib, (uint64_t)(uintptr_t)tb, 4096), STATUS_COMPLETED,
	   "endpoints connected");
	is(vf_qps_in(IBV_QPS_RTS), 6,
	   "one slice, one endpoint pair of 3 QPs each (MC_NUM_QP_PER_EP): %d in RTS",
	   vf_qps_in(IBV_QPS_RTS));
	vf_hold_nth(2);
	t0 = time(NULL);
	st = run(ini, seg, OPCODE_WRITE, ib, (uint64_t)(uintptr_t)tb, len);
	ok(st == STATUS_COMPLETED && memcmp(ib, tb, len) == 0,
	   "a request with a lost work request completes (status %d)", st);
	ok(time(NULL) - t0 >= 1 && time(NULL) - t0 <= 6,
	   "... after the slice timeout (%ld s)", (long)(time(NULL) - t0));
	destroyTransferEngine(ini);
	destroyTransferEngine(tgt);
	is(vf_live(), 0, "every fake verbs object released after the timeout test (%d left)",
	   vf_live());
	free(tb);
	free(ib);
}

int main(void)
{
	static const size_t sizes[] = { 1, 4097, 65536, 65536 * 5 + 17, (2u << 20) + 5 };
	const char *matrix = "{\"cpu:0\":[[\"vf0\",\"vf1\"],[]]}";
	void *args[2] = { (void *)matrix, NULL };
	void *bad_args[2] = { (void *)"{\"cpu:0\":[[\"vf7\"],[]]}", NULL };
	transfer_engine_t tgt, ini;
	unsigned char *tb = aligned_alloc(4096, BUF), *ib = aligned_alloc(4096, BUF);
	char name[128], *reply = NULL;
	segment_handle_t seg;
	size_t k, len;
	json_t *d;
	int good;

	vf_reset(2);
	mc_te_rdma_set_verbs(vf_ops());
	tgt = createTransferEngine("P2PHANDSHAKE", "t", "127.0.0.1", 0, 0);
	ini = createTransferEngine("P2PHANDSHAKE", "i", "127.0.0.1", 0, 0);
	ok(tgt && ini, "two engines");
	if (!tgt || !ini)
		return tap_done();
	/* Same host: shm would be chosen before rdma. */
	uninstallTransport(tgt, "shm");
	uninstallTransport(ini, "shm");
	ok(installTransport(ini, "rdma", bad_args) == NULL, "a matrix naming a missing NIC: refused");
	ok(registerLocalMemory(tgt, tb, BUF, "cpu:0", 1) == 0, "target registers before install");
	ok(installTransport(tgt, "rdma", args) != NULL, "target installs rdma on vf0, vf1");
	ok(installTransport(ini, "rdma", NULL) != NULL, "initiator installs rdma on every NIC");
	ok(registerLocalMemory(ini, ib, BUF, "cpu:0", 1) == 0, "initiator registers after install");
	getLocalIpAndPort(tgt, name, sizeof(name));

	/* The segment descriptor as a peer receives it (upstream's SegmentDesc JSON). */
	ok(mc_te_hs_call("127.0.0.1", mc_te_rpc_port(tgt), MC_HS_METADATA, "{}", &reply, &len) == 0,
	   "descriptor fetched over the handshake port");
	d = reply ? json_loads(reply, 0, NULL) : NULL;
	ok(d && !strcmp(json_string_value(json_object_get(d, "protocol")), "rdma"),
	   "protocol rdma");
	ok(json_array_size(json_object_get(d, "devices")) == 2 &&
		   json_is_string(json_object_get(json_array_get(json_object_get(d, "devices"), 0),
						  "gid")),
	   "devices [{name, lid, gid}] for vf0 and vf1");
	ok(json_array_size(json_object_get(json_array_get(json_object_get(d, "buffers"), 0),
					   "rkey")) == 2 &&
		   json_array_size(json_object_get(json_array_get(json_object_get(d, "buffers"), 0),
						   "lkey")) == 2,
	   "the buffer registered before the install carries rkey and lkey per NIC");
	ok(json_is_object(json_object_get(d, "priority_matrix")) &&
		   json_object_get(json_object_get(d, "priority_matrix"), "cpu:0"),
	   "priority_matrix published");
	json_decref(d);
	free(reply);
	reply = NULL;
	ok(mc_te_hs_call("127.0.0.1", mc_te_rpc_port(tgt), MC_HS_CONNECTION, "{\"local_nic_path\":1}",
			 &reply, &len) == 0 && reply && strstr(reply, "\"reply_msg\":\"malformed"),
	   "a malformed Connection frame gets a reply_msg (%s)", reply ? reply : "");
	free(reply);
	reply = NULL;
	ok(mc_te_hs_call("127.0.0.1", mc_te_rpc_port(tgt), MC_HS_CONNECTION,
			 "{\"local_nic_path\":\"x@vf0\",\"peer_nic_path\":\"someone-else@vf0\","
			 "\"local_lid\":1,\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:00:00:00:00:"
			 "00:00\",\"qp_num\":[5]}",
			 &reply, &len) == 0 && reply && strstr(reply, "not this server"),
	   "a Connection frame for another server is refused");
	free(reply);

	seg = openSegment(ini, name);
	ok(seg > 0, "initiator opens %s", name);
	good = 1;
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		unsigned long long before = vf_bytes(0) + vf_bytes(1);
		size_t n = sizes[k], off = k * 4099;

		fill(ib, n, (unsigned)k);
		memset(tb, 0, BUF);
		if (run(ini, seg, OPCODE_WRITE, ib, (uint64_t)(uintptr_t)(tb + off), n) !=
			    STATUS_COMPLETED ||
		    memcmp(ib, tb + off, n) || vf_bytes(0) + vf_bytes(1) - before != n) {
			printf("# write of %zu failed\n", n);
			good = 0;
		}
		fill(tb + off, n, (unsigned)k + 50);
		memset(ib, 0, BUF);
		if (run(ini, seg, OPCODE_READ, ib, (uint64_t)(uintptr_t)(tb + off), n) !=
			    STATUS_COMPLETED ||
		    memcmp(ib, tb + off, n)) {
			printf("# read of %zu failed\n", n);
			good = 0;
		}
	}
	ok(good, "writes and reads of 1 B .. 2 MiB through submitTransfer, all over the fake NICs");
	ok(vf_bytes(0) > 0 && vf_bytes(1) > 0, "both NICs carried slices");
	is(run(ini, seg, OPCODE_WRITE, ib, (uint64_t)(uintptr_t)(tb + BUF - 10), 11), STATUS_FAILED,
	   "a range past the target's buffer FAILS");
	vf_fail_nth(2, IBV_WC_RETRY_EXC_ERR);
	fill(ib, 1u << 20, 99);
	ok(run(ini, seg, OPCODE_WRITE, ib, (uint64_t)(uintptr_t)tb, 1u << 20) == STATUS_COMPLETED &&
		   memcmp(ib, tb, 1u << 20) == 0,
	   "an injected completion error is retried and the transfer completes");
	ok(uninstallTransport(ini, "rdma") == 0, "initiator uninstalls rdma");
	fill(ib, 70000, 7);
	ok(run(ini, seg, OPCODE_WRITE, ib, (uint64_t)(uintptr_t)tb, 70000) == STATUS_COMPLETED &&
		   memcmp(ib, tb, 70000) == 0,
	   "without rdma on its side the initiator falls back to tcp");
	destroyTransferEngine(ini);
	destroyTransferEngine(tgt);
	is(vf_live(), 0, "every fake verbs object released (%d left)", vf_live());

	devices_and_discovery();
	mr_chunks();
	slice_timeout();
	is(vf_live(), 0, "every fake verbs object released after the discovery tests (%d left)",
	   vf_live());
	mc_te_rdma_set_verbs(NULL);
	free(tb);
	free(ib);
	return tap_done();
}
