/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NIC priority matrices (for each memory location, its preferred NICs, then the others) the way
 * upstream's topology discovery builds them:
 *
 * - from a device list ("mlx5_0,mlx5_1": transfer_engine_bench --device_name, Python
 *   initialize's device_name, the store's rdma_devices / device_name / --device_names): every
 *   listed NIC preferred for every location, i.e. rows "cpu:N" for each NUMA node of this host
 *   and the wildcard "*", each [[the NICs], []];
 * - by discovery (auto_discover, --auto_discovery): the NICs under
 *   <root>/sys/class/infiniband, each on the NUMA node its device/numa_node names (-1 or
 *   unreadable: node 0), kept only if MC_TE_FILTERS (a comma list) names them, giving
 *   {"cpu:N": [[NICs on node N], [the others]]} for every node, and for every NVIDIA GPU
 *   (PCI bus order) "cuda:N": [[the NICs nearest it on the PCIe tree], [the others]];
 * - MC_CUSTOM_TOPO_JSON (a JSON object, or the path of a file holding one) replaces discovery.
 *
 * Everything read here (sysfs, the variable, the file) is bounded and checked; a NIC name must
 * be 1-63 characters of [A-Za-z0-9_.:-].  The sysfs root is "/" unless a test points it at a
 * fake tree (mc_nic_topo_set_root).  No verbs call is made: this file builds without libibverbs.
 * Any thread; the root is set once, before engines exist.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "transfer/nic_topo.h"
#include "mooncake/transfer_engine_c.h"

#define MC_TOPO_MAX_NODES 64
#define MC_TOPO_MAX_FILE (1 << 20)

static char mc_topo_root[512];

void mc_nic_topo_set_root(const char *root)
{
	snprintf(mc_topo_root, sizeof(mc_topo_root), "%s", root ? root : "");
}

static int mc_topo_name_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n >= MC_NIC_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.:-", s[i]))
			return 0;
	return 1;
}

int mc_nic_list_parse(const char *list, char (*names)[MC_NIC_NAME_MAX], unsigned max,
			unsigned *n)
{
	const char *p = list ? list : "";

	*n = 0;
	p += strspn(p, ", \t");
	while (*p) {
		size_t k = strcspn(p, ", \t");
		unsigned i;

		if (!mc_topo_name_ok(p, k)) {
			mc_log_err("transfer engine: '%.*s' is not a NIC name", (int)(k > 64 ? 64 : k),
				   p);
			return ERR_INVALID_ARGUMENT;
		}
		for (i = 0; i < *n; i++)
			if (strlen(names[i]) == k && !memcmp(names[i], p, k))
				break;
		if (i == *n) {
			if (*n == max) {
				mc_log_err("transfer engine: more than %u NICs listed", max);
				return ERR_INVALID_ARGUMENT;
			}
			memcpy(names[*n], p, k);
			names[(*n)++][k] = '\0';
		}
		p += k;
		p += strspn(p, ", \t");
	}
	return 0;
}

/* Read a small sysfs file into buf (NUL-terminated, trailing newline dropped); 0 or -errno. */
static int mc_topo_read(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "re");
	size_t got;

	if (f == NULL)
		return -errno;
	got = fread(buf, 1, n - 1, f);
	fclose(f);
	buf[got] = '\0';
	while (got && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
		buf[--got] = '\0';
	return 0;
}

/* The NUMA nodes of this host (<root>/sys/devices/system/node/nodeN), sorted; at least node 0. */
static unsigned mc_topo_nodes(int *nodes, unsigned max)
{
	char path[600];
	struct dirent *d;
	unsigned n = 0, i, j;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/sys/devices/system/node", mc_topo_root);
	dir = opendir(path);
	while (dir && (d = readdir(dir)) != NULL && n < max) {
		char *end;
		long v;

		if (strncmp(d->d_name, "node", 4) || !isdigit((unsigned char)d->d_name[4]))
			continue;
		v = strtol(d->d_name + 4, &end, 10);
		if (*end || v < 0 || v >= 4096)
			continue;
		nodes[n++] = (int)v;
	}
	if (dir)
		closedir(dir);
	if (n == 0)
		nodes[n++] = 0;
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && nodes[j - 1] > nodes[j]; j--) {
			int t = nodes[j];

			nodes[j] = nodes[j - 1];
			nodes[j - 1] = t;
		}
	return n;
}

static int mc_topo_has_node(const int *nodes, unsigned n, int v)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (nodes[i] == v)
			return 1;
	return 0;
}

static json_t *mc_topo_name_array(char (*names)[MC_NIC_NAME_MAX], const int *numa,
				  unsigned n, int node, int on)
{
	json_t *a = json_array();
	unsigned i;

	for (i = 0; a && i < n; i++)
		if (numa == NULL || (numa[i] == node) == on)
			if (json_array_append_new(a, json_string(names[i]))) {
				json_decref(a);
				return NULL;
			}
	return a;
}

char *mc_nic_matrix_from_list(const char *list)
{
	char names[MC_NIC_MAX][MC_NIC_NAME_MAX];
	int nodes[MC_TOPO_MAX_NODES];
	unsigned n, nn, i;
	json_t *m = NULL;
	char loc[32], *out = NULL;

	if (mc_nic_list_parse(list, names, MC_NIC_MAX, &n) || n == 0)
		return NULL;
	nn = mc_topo_nodes(nodes, MC_TOPO_MAX_NODES);
	m = json_object();
	for (i = 0; m && i <= nn; i++) {
		json_t *row = json_pack("[o[]]", mc_topo_name_array(names, NULL, n, 0, 1));

		if (i < nn)
			snprintf(loc, sizeof(loc), "cpu:%d", nodes[i]);
		else
			snprintf(loc, sizeof(loc), "*");
		if (row == NULL || json_object_set_new(m, loc, row))
			goto out;
	}
	if (m)
		out = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
out:
	json_decref(m);
	return out;
}

/* MC_CUSTOM_TOPO_JSON: the JSON itself, or a file holding it.  NULL with a log line if bad. */
static json_t *mc_topo_custom(const char *v)
{
	json_error_t jerr;
	json_t *m;

	if (*v == '{') {
		m = json_loads(v, 0, &jerr);
	} else {
		FILE *f = fopen(v, "re");
		char *buf = f ? malloc(MC_TOPO_MAX_FILE + 1) : NULL;
		size_t got = buf ? fread(buf, 1, MC_TOPO_MAX_FILE + 1, f) : 0;

		if (f)
			fclose(f);
		if (buf == NULL || got > MC_TOPO_MAX_FILE) {
			mc_log_err("transfer engine: MC_CUSTOM_TOPO_JSON %s: %s", v,
				   buf ? "larger than 1 MiB" : "cannot read it");
			free(buf);
			return NULL;
		}
		m = json_loadb(buf, got, 0, &jerr);
		free(buf);
	}
	if (!json_is_object(m)) {
		mc_log_err("transfer engine: MC_CUSTOM_TOPO_JSON is not a JSON object (%s)",
			   m ? "wrong type" : jerr.text);
		json_decref(m);
		return NULL;
	}
	return m;
}

/* Path components of a sysfs PCI device path ("/sys/devices/pci0000:00/0000:00:01.0/...")
 * that two paths share. */
static unsigned mc_topo_common(const char *a, const char *b)
{
	unsigned c = 0;

	while (*a && *a == *b) {
		if (*a == '/')
			c++;
		a++;
		b++;
	}
	if ((*a == '\0' || *a == '/') && (*b == '\0' || *b == '/'))
		c++;
	return c;
}

static unsigned mc_topo_depth(const char *a)
{
	unsigned d = 1;

	for (; *a; a++)
		d += *a == '/';
	return d;
}

static json_t *mc_topo_mask_array(char (*names)[MC_NIC_NAME_MAX], unsigned n, uint32_t mask)
{
	json_t *a = json_array();
	unsigned i;

	for (i = 0; a && i < n; i++)
		if (((mask >> i) & 1) && json_array_append_new(a, json_string(names[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static int mc_topo_bdf_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* "cuda:N" rows: the NVIDIA GPUs of <root>/sys/bus/pci/devices (vendor 0x10de, class 0x0300xx
 * or 0x0302xx) numbered in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID), each preferring the
 * NICs closest to it on the PCIe tree (fewest hops between the two sysfs device paths: the same
 * switch first), else the NICs of its NUMA node.  0, or -1 out of memory. */
static int mc_topo_cuda_rows(json_t *m, char (*names)[MC_NIC_NAME_MAX], const int *numa,
			     unsigned n)
{
	struct mc_topo_gpus {
		char bdf[64][32];
		char nicpath[MC_NIC_MAX][PATH_MAX];
		char gpath[PATH_MAX];
	} *g = calloc(1, sizeof(*g));
	char (*bdf)[32], (*nicpath)[PATH_MAX], *gpath, path[800], buf[64];
	unsigned ngpu = 0, i, k, best;
	int havepath[MC_NIC_MAX], rc = -1;
	struct dirent *d;
	DIR *dir;

	if (g == NULL)
		return -1;
	bdf = g->bdf;
	nicpath = g->nicpath;
	gpath = g->gpath;
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", mc_topo_root);
	dir = opendir(path);
	while (dir && (d = readdir(dir)) != NULL && ngpu < 64) {
		if (d->d_name[0] == '.' || strlen(d->d_name) >= sizeof(bdf[0]))
			continue;
		snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/vendor", mc_topo_root,
			 d->d_name);
		if (mc_topo_read(path, buf, sizeof(buf)) || strcmp(buf, "0x10de"))
			continue;
		snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/class", mc_topo_root,
			 d->d_name);
		if (mc_topo_read(path, buf, sizeof(buf)) ||
		    (strncmp(buf, "0x0302", 6) && strncmp(buf, "0x0300", 6)))
			continue;
		strcpy(bdf[ngpu++], d->d_name);
	}
	if (dir)
		closedir(dir);
	rc = 0;
	if (ngpu == 0)
		goto out;
	qsort(bdf, ngpu, sizeof(bdf[0]), mc_topo_bdf_cmp);
	for (k = 0; k < n; k++) {
		int len = snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/device",
				   mc_topo_root, names[k]);

		havepath[k] = len > 0 && (size_t)len < sizeof(path) &&
			      realpath(path, nicpath[k]) != NULL;
	}
	for (i = 0; i < ngpu; i++) {
		uint32_t pref = 0, all = n >= 32 ? ~0u : (1u << n) - 1;
		unsigned dist[MC_NIC_MAX];
		char loc[32];
		json_t *row;
		int node = 0;

		snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s", mc_topo_root, bdf[i]);
		best = ~0u;
		if (realpath(path, gpath))
			for (k = 0; k < n; k++) {
				unsigned c;

				if (!havepath[k])
					continue;
				c = mc_topo_common(gpath, nicpath[k]);
				dist[k] = mc_topo_depth(gpath) + mc_topo_depth(nicpath[k]) - 2 * c;
				if (dist[k] < best)
					best = dist[k];
			}
		for (k = 0; best != ~0u && k < n; k++)
			if (havepath[k] && dist[k] == best)
				pref |= 1u << k;
		if (pref == 0) {
			char *end;
			long v;

			snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/numa_node",
				 mc_topo_root, bdf[i]);
			if (mc_topo_read(path, buf, sizeof(buf)) == 0) {
				v = strtol(buf, &end, 10);
				if (end != buf && *end == '\0' && v >= 0 && v < 4096)
					node = (int)v;
			}
			for (k = 0; k < n; k++)
				if (numa[k] == node)
					pref |= 1u << k;
		}
		row = json_pack("[oo]", mc_topo_mask_array(names, n, pref),
				mc_topo_mask_array(names, n, all & ~pref));
		snprintf(loc, sizeof(loc), "cuda:%u", i);
		if (row == NULL || json_object_set_new(m, loc, row)) {
			rc = -1;
			goto out;
		}
	}
out:
	free(g);
	return rc;
}

json_t *mc_nic_topo_discover(const char *filters, unsigned *nnics)
{
	char names[MC_NIC_MAX][MC_NIC_NAME_MAX], allow[MC_NIC_MAX][MC_NIC_NAME_MAX];
	int numa[MC_NIC_MAX], nodes[MC_TOPO_MAX_NODES];
	const char *custom = getenv("MC_CUSTOM_TOPO_JSON");
	unsigned n = 0, nallow = 0, nn, i, k;
	char path[800], buf[64];
	struct dirent *d;
	json_t *m;
	DIR *dir;

	*nnics = 0;
	if (custom && *custom) {
		m = mc_topo_custom(custom);
		if (m) {
			const char *loc;
			json_t *row, *list, *nic;
			size_t a, b;

			/* Count the distinct NICs it names, for the caller's "any NIC?" test. */
			json_object_foreach(m, loc, row) json_array_foreach(row, a, list)
				json_array_foreach(list, b, nic) {
					const char *s = json_string_value(nic);

					for (k = 0; s && k < n; k++)
						if (!strcmp(names[k], s))
							break;
					if (s && k == n && n < MC_NIC_MAX &&
					    mc_topo_name_ok(s, strlen(s)))
						strcpy(names[n++], s);
				}
			*nnics = n;
		}
		return m;
	}
	if (filters == NULL || *filters == '\0')
		filters = getenv("MC_TE_FILTERS");
	if (filters && *filters && mc_nic_list_parse(filters, allow, MC_NIC_MAX, &nallow))
		return NULL;
	nn = mc_topo_nodes(nodes, MC_TOPO_MAX_NODES);
	snprintf(path, sizeof(path), "%s/sys/class/infiniband", mc_topo_root);
	dir = opendir(path);
	while (dir && (d = readdir(dir)) != NULL) {
		char *end;
		long v;

		if (d->d_name[0] == '.' || !mc_topo_name_ok(d->d_name, strlen(d->d_name)))
			continue;
		for (k = 0; k < nallow; k++)
			if (!strcmp(allow[k], d->d_name))
				break;
		if (nallow && k == nallow)
			continue;
		if (n == MC_NIC_MAX) {
			mc_log_warn("transfer engine: more than %u RDMA NICs, ignoring %s",
				    MC_NIC_MAX, d->d_name);
			continue;
		}
		strcpy(names[n], d->d_name);
		numa[n] = 0;
		snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/device/numa_node",
			 mc_topo_root, names[n]);
		if (mc_topo_read(path, buf, sizeof(buf)) == 0) {
			errno = 0;
			v = strtol(buf, &end, 10);
			if (!errno && end != buf && *end == '\0' && v >= 0 && v < 4096)
				numa[n] = (int)v;
		}
		n++;
	}
	if (dir)
		closedir(dir);
	/* readdir order is arbitrary: name order makes the matrix stable. */
	for (i = 1; i < n; i++)
		for (k = i; k > 0 && strcmp(names[k - 1], names[k]) > 0; k--) {
			char t[MC_NIC_NAME_MAX];
			int tn = numa[k];

			strcpy(t, names[k]);
			strcpy(names[k], names[k - 1]);
			strcpy(names[k - 1], t);
			numa[k] = numa[k - 1];
			numa[k - 1] = tn;
		}
	for (i = 0; i < n && nn < MC_TOPO_MAX_NODES; i++)
		if (!mc_topo_has_node(nodes, nn, numa[i]))
			nodes[nn++] = numa[i];
	m = json_object();
	for (i = 0; m && i < nn; i++) {
		json_t *row = json_pack("[oo]", mc_topo_name_array(names, numa, n, nodes[i], 1),
					mc_topo_name_array(names, numa, n, nodes[i], 0));
		char loc[32];

		snprintf(loc, sizeof(loc), "cpu:%d", nodes[i]);
		if (row == NULL || json_object_set_new(m, loc, row)) {
			json_decref(m);
			return NULL;
		}
	}
	if (m && mc_topo_cuda_rows(m, names, numa, n)) {
		json_decref(m);
		return NULL;
	}
	*nnics = n;
	return m;
}

char *mc_nic_topo_discover_str(const char *filters, unsigned *nnics)
{
	unsigned dummy;
	json_t *m = mc_nic_topo_discover(filters, nnics ? nnics : &dummy);
	char *s = m ? json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(m);
	return s;
}

int mc_nic_present(const char *name)
{
	char path[700];

	if (!mc_topo_name_ok(name, strlen(name)))
		return 0;
	snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s", mc_topo_root, name);
	return access(path, F_OK) == 0;
}
