/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_NIC_TOPO_H
#define MC_NIC_TOPO_H

/*
 * NIC priority matrices from a device list or from topology discovery (src/transfer/nic_topo.c).
 */
#include <jansson.h>

#define MC_NIC_MAX 16
#define MC_NIC_NAME_MAX 64

/* Split a comma (or space) list of NIC names, duplicates dropped.  0 (*n may be 0 for an
 * empty list) or ERR_INVALID_ARGUMENT with a log line (a bad name, more than max). */
int mc_nic_list_parse(const char *list, char (*names)[MC_NIC_NAME_MAX], unsigned max,
			unsigned *n);
/* Upstream's matrix for a device list: every NIC preferred for "cpu:N" (each NUMA node of this
 * host) and "*".  Malloc'ed JSON, or NULL for an empty or invalid list. */
char *mc_nic_matrix_from_list(const char *list);
/* Discover {"cpu:N": [[NICs on node N], [others]]} (MC_CUSTOM_TOPO_JSON replaces it; filters,
 * else MC_TE_FILTERS, whitelists NICs).  *nnics = the NICs it names.  A new reference, or NULL
 * (bad filter list, bad MC_CUSTOM_TOPO_JSON, out of memory). */
json_t *mc_nic_topo_discover(const char *filters, unsigned *nnics);
/* The same as compact JSON text (malloc'ed) or NULL. */
char *mc_nic_topo_discover_str(const char *filters, unsigned *nnics);
/* 1 if the NIC is listed under <root>/sys/class/infiniband. */
int mc_nic_present(const char *name);
/* Tests: read sysfs under root instead of "/" (NULL or "": "/"). */
void mc_nic_topo_set_root(const char *root);

#endif
