/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Connection frame's JSON (upstream's HandShakeDesc, sent on the handshake port): local_nic_path and
 * peer_nic_path as <server_name>@<nic>, local_lid, local_gid as 16 hex bytes joined by ':',
 * qp_num as an array of u32, reply_msg non-empty when the peer refuses.  Decoding checks every
 * field's type and range: the JSON comes from the network.  Pure functions, any thread.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "mooncake/transfer_engine_c.h"
#include "rdma/rdma_int.h"

void mc_rdma_gid_to_str(const union ibv_gid *g, char *out, size_t n)
{
	size_t i, at = 0;

	for (i = 0; i < 16 && at + 3 < n + 1; i++)
		at += (size_t)snprintf(out + at, n - at, i ? ":%02x" : "%02x", g->raw[i]);
}

int mc_rdma_gid_from_str(const char *s, union ibv_gid *g)
{
	unsigned i, v;
	int used;

	for (i = 0; i < 16; i++) {
		if (sscanf(s, "%2x%n", &v, &used) != 1 || used != 2)
			return -1;
		g->raw[i] = (uint8_t)v;
		s += 2;
		if (i < 15 && *s++ != ':')
			return -1;
	}
	return *s == '\0' ? 0 : -1;
}

char *mc_rdma_hs_encode(const struct mc_rdma_hs_desc *d)
{
	json_t *j = json_object(), *q = json_array();
	char gid[64];
	char *s = NULL;
	unsigned i;

	if (j == NULL || q == NULL)
		goto out;
	mc_rdma_gid_to_str(&d->gid, gid, sizeof(gid));
	for (i = 0; i < d->nqp; i++)
		if (json_array_append_new(q, json_integer(d->qpn[i])))
			goto out;
	if (json_object_set_new(j, "local_nic_path", json_string(d->local_nic_path)) ||
	    json_object_set_new(j, "peer_nic_path", json_string(d->peer_nic_path)) ||
	    json_object_set_new(j, "local_lid", json_integer(d->lid)) ||
	    json_object_set_new(j, "local_gid", json_string(gid)) ||
	    json_object_set(j, "qp_num", q) ||
	    json_object_set_new(j, "reply_msg", json_string(d->reply_msg)))
		goto out;
	s = json_dumps(j, JSON_COMPACT);
out:
	json_decref(q);
	json_decref(j);
	return s;
}

static int mc_hs_bad(struct mc_rdma_hs_desc *d, const char *what)
{
	snprintf(d->reply_msg, sizeof(d->reply_msg), "malformed Connection frame: %s", what);
	return ERR_MALFORMED_JSON;
}

static int mc_hs_str(const json_t *j, const char *key, char *out, size_t n)
{
	const json_t *v = json_object_get(j, key);

	if (!json_is_string(v) || json_string_length(v) >= n ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return -1;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

int mc_rdma_hs_decode(const char *json, size_t len, struct mc_rdma_hs_desc *d)
{
	json_error_t err;
	json_t *j = json_loadb(json, len, 0, &err), *q, *v;
	char gid[64];
	size_t i;
	int rc = 0;

	memset(d, 0, sizeof(*d));
	if (!json_is_object(j)) {
		rc = mc_hs_bad(d, "not a JSON object");
		goto out;
	}
	v = json_object_get(j, "reply_msg");
	if (v && !json_is_string(v)) {
		rc = mc_hs_bad(d, "reply_msg");
		goto out;
	}
	if (v && json_string_length(v)) {
		/* A refusal: the rest need not be there. */
		snprintf(d->reply_msg, sizeof(d->reply_msg), "%s", json_string_value(v));
		goto out;
	}
	if (mc_hs_str(j, "local_nic_path", d->local_nic_path, sizeof(d->local_nic_path)) ||
	    strchr(d->local_nic_path, '@') == NULL) {
		rc = mc_hs_bad(d, "local_nic_path");
		goto out;
	}
	if (mc_hs_str(j, "peer_nic_path", d->peer_nic_path, sizeof(d->peer_nic_path)) ||
	    strchr(d->peer_nic_path, '@') == NULL) {
		rc = mc_hs_bad(d, "peer_nic_path");
		goto out;
	}
	v = json_object_get(j, "local_lid");
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0xffff) {
		rc = mc_hs_bad(d, "local_lid");
		goto out;
	}
	d->lid = (uint16_t)json_integer_value(v);
	if (mc_hs_str(j, "local_gid", gid, sizeof(gid)) || mc_rdma_gid_from_str(gid, &d->gid)) {
		rc = mc_hs_bad(d, "local_gid");
		goto out;
	}
	q = json_object_get(j, "qp_num");
	if (!json_is_array(q) || json_array_size(q) == 0 ||
	    json_array_size(q) > MC_RDMA_MAX_QP_PER_EP) {
		rc = mc_hs_bad(d, "qp_num");
		goto out;
	}
	for (i = 0; i < json_array_size(q); i++) {
		v = json_array_get(q, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 0xffffff) {
			rc = mc_hs_bad(d, "qp_num entry");
			goto out;
		}
		d->qpn[i] = (uint32_t)json_integer_value(v);
	}
	d->nqp = (unsigned)i;
out:
	json_decref(j);
	return rc;
}
