/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NIC priority matrices (src/transfer/nic_topo.c) against a fake sysfs tree in a temporary
 * directory: device lists (upstream: every listed NIC preferred for every location), topology
 * discovery by NUMA node, MC_TE_FILTERS, MC_CUSTOM_TOPO_JSON (text and file), and the store
 * client's protocol=rdma checks (a missing listed NIC fails setup at once; no NIC at all falls
 * back to tcp unless MC_FORCE_HCA).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/errcode.h"
#include "mooncake/transfer_engine_c.h"
#include "store/store.h"
#include "tap.h"
#include "transfer/nic_topo.h"

static char root[256];

static void mkpath(const char *rel)
{
	char p[512], *s;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	for (s = p + strlen(root) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	mkdir(p, 0755);
}

static void put(const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void nic(const char *name, const char *numa)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "sys/class/infiniband/%s/device", name);
	mkpath(rel);
	if (numa) {
		snprintf(rel, sizeof(rel), "sys/class/infiniband/%s/device/numa_node", name);
		put(rel, numa);
	}
}

/* The matrix as compact sorted JSON, or "(null)". */
static char *disc(const char *filters, unsigned *n)
{
	char *s = mc_nic_topo_discover_str(filters, n);

	return s ? s : strdup("(null)");
}

static int check(char *got, const char *want, const char *what)
{
	int r = !strcmp(got, want);

	ok(r, "%s: %s", what, got);
	if (!r)
		printf("#   want %s\n", want);
	free(got);
	return r;
}

/* A PCI device directory under root2 with its sysfs files, and its /sys/bus/pci link. */
static char root2[256];

static void pci_dev(const char *dir, const char *vendor, const char *cls, const char *numa)
{
	char p[700], link[700], *bdf = strrchr(dir, '/') + 1;
	FILE *f;

	snprintf(p, sizeof(p), "mkdir -p '%s/%s' '%s/sys/bus/pci/devices'", root2, dir, root2);
	if (system(p))
		return;
	snprintf(p, sizeof(p), "%s/%s/vendor", root2, dir);
	if ((f = fopen(p, "w")) != NULL) {
		fprintf(f, "%s\n", vendor);
		fclose(f);
	}
	snprintf(p, sizeof(p), "%s/%s/class", root2, dir);
	if ((f = fopen(p, "w")) != NULL) {
		fprintf(f, "%s\n", cls);
		fclose(f);
	}
	snprintf(p, sizeof(p), "%s/%s/numa_node", root2, dir);
	if ((f = fopen(p, "w")) != NULL) {
		fprintf(f, "%s\n", numa);
		fclose(f);
	}
	snprintf(p, sizeof(p), "%s/%s", root2, dir);
	snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/%s", root2, bdf);
	if (symlink(p, link))
		printf("# symlink %s failed\n", link);
}

static void ib_dev(const char *nic, const char *dir)
{
	char p[700], link[700];

	snprintf(p, sizeof(p), "mkdir -p '%s/sys/class/infiniband/%s'", root2, nic);
	if (system(p))
		return;
	snprintf(p, sizeof(p), "%s/%s", root2, dir);
	snprintf(link, sizeof(link), "%s/sys/class/infiniband/%s/device", root2, nic);
	if (symlink(p, link))
		printf("# symlink %s failed\n", link);
}

/* Two root complexes (NUMA nodes 0 and 1), each with a GPU and a NIC behind one switch, and a
 * third NIC elsewhere on the first: cuda:N rows by PCIe distance, NUMA nodes read through the
 * device links. */
static void cuda_rows(void)
{
	unsigned n;

	snprintf(root2, sizeof(root2), "/tmp/mc_nic_cuda.XXXXXX");
	if (mkdtemp(root2) == NULL)
		return;
	mc_nic_topo_set_root(root2);
	pci_dev("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", "0x10de", "0x030200", "0");
	pci_dev("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.1", "0x15b3", "0x020700", "0");
	pci_dev("sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0", "0x15b3", "0x020700", "0");
	pci_dev("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", "0x10de", "0x030200", "1");
	pci_dev("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.1", "0x15b3", "0x020700", "1");
	pci_dev("sys/devices/pci0000:00/0000:00:03.0", "0x8086", "0x060400", "0");
	ib_dev("mlx5_0", "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.1");
	ib_dev("mlx5_1", "sys/devices/pci0000:80/0000:80:01.0/0000:81:00.1");
	ib_dev("mlx5_2", "sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0");
	check(disc(NULL, &n),
	      "{\"cpu:0\":[[\"mlx5_0\",\"mlx5_2\"],[\"mlx5_1\"]],"
	      "\"cpu:1\":[[\"mlx5_1\"],[\"mlx5_0\",\"mlx5_2\"]],"
	      "\"cuda:0\":[[\"mlx5_0\"],[\"mlx5_1\",\"mlx5_2\"]],"
	      "\"cuda:1\":[[\"mlx5_1\"],[\"mlx5_0\",\"mlx5_2\"]]}",
	      "cuda:N rows: each GPU prefers the NIC behind its own PCIe switch");
	check(disc("mlx5_1,mlx5_2", &n),
	      "{\"cpu:0\":[[\"mlx5_2\"],[\"mlx5_1\"]],\"cpu:1\":[[\"mlx5_1\"],[\"mlx5_2\"]],"
	      "\"cuda:0\":[[\"mlx5_2\"],[\"mlx5_1\"]],"
	      "\"cuda:1\":[[\"mlx5_1\"],[\"mlx5_2\"]]}",
	      "without its switch-mate GPU 0 prefers the NIC on its root complex");
	tap_rmtree(root2);
}

int main(void)
{
	char names[MC_NIC_MAX][MC_NIC_NAME_MAX], cmd[600], path[512];
	char many[40 * 20] = "";
	unsigned n, i;
	struct mc_store st;
	char *m;

	snprintf(root, sizeof(root), "/tmp/mc_nic_topo.XXXXXX");
	if (mkdtemp(root) == NULL)
		return 1;
	unsetenv("MC_TE_FILTERS");
	unsetenv("MC_CUSTOM_TOPO_JSON");
	unsetenv("MC_FORCE_HCA");
	unsetenv("MC_MS_AUTO_DISC");
	mc_nic_topo_set_root(root);

	/* Device lists. */
	ok(mc_nic_list_parse(" mlx5_0, mlx5_1,,mlx5_0 ", names, MC_NIC_MAX, &n) == 0 && n == 2 &&
		   !strcmp(names[0], "mlx5_0") && !strcmp(names[1], "mlx5_1"),
	   "a comma list with spaces, empty items and a duplicate gives two NICs");
	ok(mc_nic_list_parse("", names, MC_NIC_MAX, &n) == 0 && n == 0, "an empty list");
	ok(mc_nic_list_parse("mlx5_0,\"x\"", names, MC_NIC_MAX, &n) == ERR_INVALID_ARGUMENT,
	   "a name with a quote is refused");
	ok(mc_nic_list_parse("a@b", names, MC_NIC_MAX, &n) == ERR_INVALID_ARGUMENT,
	   "a name with @ is refused");
	for (i = 0; i < 17; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "n%u,", i);
	is(mc_nic_list_parse(many, names, MC_NIC_MAX, &n), ERR_INVALID_ARGUMENT,
	   "17 NICs are more than the transport handles");
	memset(many, 'a', 64);
	many[64] = '\0';
	is(mc_nic_list_parse(many, names, MC_NIC_MAX, &n), ERR_INVALID_ARGUMENT,
	   "a 64-character name is refused");

	/* An empty tree: one node, no NIC. */
	n = 9;
	check(disc(NULL, &n), "{\"cpu:0\":[[],[]]}", "no sysfs: cpu:0 without NICs");
	is(n, 0, "no NIC counted");
	check(mc_nic_matrix_from_list("mlx5_0,mlx5_1"),
	      "{\"*\":[[\"mlx5_0\",\"mlx5_1\"],[]],\"cpu:0\":[[\"mlx5_0\",\"mlx5_1\"],[]]}",
	      "device list on a one-node host");
	ok(mc_nic_matrix_from_list("") == NULL && mc_nic_matrix_from_list("x y!") == NULL,
	   "no matrix from an empty or bad list");

	/* Two nodes, three NICs: numa 0, 1, and -1 (no affinity: node 0). */
	mkpath("sys/devices/system/node/node0");
	mkpath("sys/devices/system/node/node1");
	mkpath("sys/devices/system/node/possible");
	nic("mlx5_1", "1\n");
	nic("mlx5_0", "0\n");
	nic("mlx5_2", "-1\n");
	nic("bad name", "0\n");
	check(mc_nic_matrix_from_list("mlx5_3"),
	      "{\"*\":[[\"mlx5_3\"],[]],\"cpu:0\":[[\"mlx5_3\"],[]],\"cpu:1\":[[\"mlx5_3\"],[]]}",
	      "device list: every NUMA node and * prefer the listed NICs");
	check(disc(NULL, &n),
	      "{\"cpu:0\":[[\"mlx5_0\",\"mlx5_2\"],[\"mlx5_1\"]],"
	      "\"cpu:1\":[[\"mlx5_1\"],[\"mlx5_0\",\"mlx5_2\"]]}",
	      "discovery by NUMA node, numa_node -1 on node 0");
	is(n, 3, "three NICs discovered (the badly named entry skipped)");
	check(disc("mlx5_1,mlx5_2", &n),
	      "{\"cpu:0\":[[\"mlx5_2\"],[\"mlx5_1\"]],\"cpu:1\":[[\"mlx5_1\"],[\"mlx5_2\"]]}",
	      "a filter keeps the listed NICs only");
	setenv("MC_TE_FILTERS", "mlx5_0", 1);
	check(disc(NULL, &n), "{\"cpu:0\":[[\"mlx5_0\"],[]],\"cpu:1\":[[],[\"mlx5_0\"]]}",
	      "MC_TE_FILTERS");
	setenv("MC_TE_FILTERS", "mlx5_0;rm", 1);
	check(disc(NULL, &n), "(null)", "a malformed MC_TE_FILTERS is an error");
	unsetenv("MC_TE_FILTERS");
	nic("mlx5_3", "7x");
	check(disc("mlx5_3", &n), "{\"cpu:0\":[[\"mlx5_3\"],[]],\"cpu:1\":[[],[\"mlx5_3\"]]}",
	      "an unreadable numa_node counts as node 0");

	/* MC_CUSTOM_TOPO_JSON replaces discovery. */
	setenv("MC_CUSTOM_TOPO_JSON", "{\"cpu:0\":[[\"ib9\"],[\"ib8\"]]}", 1);
	check(disc(NULL, &n), "{\"cpu:0\":[[\"ib9\"],[\"ib8\"]]}", "MC_CUSTOM_TOPO_JSON as JSON");
	is(n, 2, "its two NICs counted");
	snprintf(path, sizeof(path), "%s/topo.json", root);
	put("topo.json", "{\"cuda:0\": [[\"mlx5_1\"], []]}\n");
	setenv("MC_CUSTOM_TOPO_JSON", path, 1);
	check(disc(NULL, &n), "{\"cuda:0\":[[\"mlx5_1\"],[]]}", "MC_CUSTOM_TOPO_JSON as a file");
	put("topo.json", "[1,2]");
	check(disc(NULL, &n), "(null)", "a custom topology that is not an object is an error");
	setenv("MC_CUSTOM_TOPO_JSON", "/nonexistent/topo.json", 1);
	check(disc(NULL, &n), "(null)", "a missing custom topology file is an error");
	unsetenv("MC_CUSTOM_TOPO_JSON");

	ok(mc_nic_present("mlx5_0") && !mc_nic_present("mlx5_9") && !mc_nic_present("../.."),
	   "mc_nic_present");
	cuda_rows();
	mc_nic_topo_set_root(root);

	/* The store client's protocol=rdma decisions, before any connection is made. */
	memset(&st, 0, sizeof(st));
	ok(mc_store_setup(&st, "127.0.0.1:1", "P2PHANDSHAKE", 0, 0, "rdma", "mlx5_0,mlx5_9",
			  "127.0.0.1:1") == MC_ERR_INVALID_PARAMS,
	   "store: rdma_devices naming a missing NIC fails setup");
	ok(mc_store_setup(&st, "127.0.0.1:1", "P2PHANDSHAKE", 0, 0, "rdma", "mlx5_0;x",
			  "127.0.0.1:1") == MC_ERR_INVALID_PARAMS,
	   "store: a malformed device list fails setup");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'/sys/class", root);
	is(system(cmd), 0, "NICs removed");
	setenv("MC_FORCE_HCA", "1", 1);
	ok(mc_store_setup(&st, "127.0.0.1:1", "P2PHANDSHAKE", 0, 0, "rdma", "", "127.0.0.1:1") ==
		   MC_ERR_INVALID_PARAMS,
	   "store: no NIC with MC_FORCE_HCA fails setup");
	unsetenv("MC_FORCE_HCA");
	setenv("MC_MS_AUTO_DISC", "0", 1);
	ok(mc_store_setup(&st, "127.0.0.1:1", "P2PHANDSHAKE", 0, 0, "rdma", "", "127.0.0.1:1") ==
		   MC_ERR_INVALID_PARAMS,
	   "store: MC_MS_AUTO_DISC=0 needs a device list");
	unsetenv("MC_MS_AUTO_DISC");
	m = mc_nic_topo_discover_str(NULL, &n);
	ok(m && n == 0, "no NIC left: the store would fall back to tcp");
	free(m);

	tap_rmtree(root);
	return tap_done();
}
