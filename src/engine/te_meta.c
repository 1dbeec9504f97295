/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Segment descriptors (the JSON every engine publishes about its memory) and where they are kept.
 *
 * The descriptor of a tcp segment is {"name", "protocol": "tcp", "tcp_data_port",
 * "tcp_proto_version": 2, "timestamp", "buffers": [{"name", "addr", "length"}]}; rpc_meta is
 * {"ip_or_host_name", "rpc_port"}.  With P2PHANDSHAKE nothing is published: a peer asks for the
 * descriptor on the handshake port (the segment name is ip:rpc_port).  With an http:// metadata
 * service, etcd or redis the descriptor goes to mooncake/ram/<name> and rpc_meta to mooncake/rpc_meta/<name>
 * (prefixed with MC_METADATA_CLUSTER_ID when set); the same keys go to etcd or redis
 * (te_kv.c).  A store client's engine does both: it finds peers by handshake (its segment names
 * are host:handshake-port) and also publishes, best effort, when given a metadata URL.
 * Descriptors from the network are untrusted: types checked,
 * counts bounded.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/log.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"

char *mc_te_desc_to_json(const struct mc_engine *e)
{
	json_t *root = json_object(), *bufs = json_array();
	char ts[32];
	uint32_t i;
	char *s;

	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	for (i = 0; i < e->nbufs; i++)
		json_array_append_new(bufs, json_pack("{sssIsI}", "name", e->server_name, "addr",
						      (json_int_t)e->bufs[i].addr, "length",
						      (json_int_t)e->bufs[i].length));
	json_object_set_new(root, "name", json_string(e->server_name));
	json_object_set_new(root, "protocol", json_string("tcp"));
	json_object_set_new(root, "timestamp", json_string(ts));
	json_object_set_new(root, "buffers", bufs);
	for (i = 0; i < MC_TE_NXPORTS; i++)
		if (e->xports[i].state && e->xports[i].ops->describe)
			e->xports[i].ops->describe(e->xports[i].state, root);
	s = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return s;
}

void mc_te_desc_fini(struct mc_te_desc *d)
{
	json_decref(d->raw);
	d->raw = NULL;
	free(d->buffers);
	d->buffers = NULL;
	d->nbuffers = 0;
}

int mc_te_desc_from_json(const char *json, size_t len, struct mc_te_desc *d)
{
	json_error_t err;
	json_t *root = json_loadb(json, len, 0, &err), *v, *bufs;
	size_t i, n;
	int rc = ERR_MALFORMED_JSON;

	memset(d, 0, sizeof(*d));
	if (root == NULL || !json_is_object(root))
		goto out;
	v = json_object_get(root, "name");
	if (!json_is_string(v) || json_string_length(v) >= sizeof(d->name))
		goto out;
	snprintf(d->name, sizeof(d->name), "%s", json_string_value(v));
	v = json_object_get(root, "protocol");
	snprintf(d->protocol, sizeof(d->protocol), "%s", json_is_string(v) ? json_string_value(v)
									  : "tcp");
	v = json_object_get(root, "tcp_data_port");
	if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) <= 65535)
		d->tcp_data_port = (uint16_t)json_integer_value(v);
	else if (v != NULL || strcmp(d->protocol, "nvmeof"))
		goto out;	/* only a file segment has no data port */
	v = json_object_get(root, "tcp_proto_version");
	d->tcp_proto_version = json_is_integer(v) ? (int)json_integer_value(v) : 1;
	bufs = json_object_get(root, "buffers");
	n = json_is_array(bufs) ? json_array_size(bufs) : 0;
	if (n > MC_TE_MAX_BUFFERS)
		goto out;
	d->buffers = calloc(n ? n : 1, sizeof(*d->buffers));
	if (d->buffers == NULL) {
		rc = ERR_MEMORY;
		goto out;
	}
	for (i = 0; i < n; i++) {
		json_t *b = json_array_get(bufs, i), *a = json_object_get(b, "addr");
		json_t *l = json_object_get(b, "length");

		/* A file segment's buffers are files: {file_path, length, local_path_map}. */
		if ((!json_is_integer(a) && d->tcp_data_port) || !json_is_integer(l) ||
		    json_integer_value(l) < 0)
			goto out;
		d->buffers[i].addr = json_is_integer(a) ? (uint64_t)json_integer_value(a) : 0;
		d->buffers[i].length = (uint64_t)json_integer_value(l);
	}
	d->nbuffers = (uint32_t)n;
	d->raw = json_incref(root);
	rc = 0;
out:
	if (rc)
		mc_te_desc_fini(d);
	json_decref(root);
	return rc;
}

static void mc_te_key(char *out, size_t n, const char *kind, const char *name)
{
	const char *cid = getenv("MC_METADATA_CLUSTER_ID");

	if (cid && *cid)
		snprintf(out, n, "mooncake/%s%s%s/%s", cid, cid[strlen(cid) - 1] == '/' ? "" : "/",
			 kind, name);
	else if (!strcmp(kind, "ram") && strchr(name, '/'))
		snprintf(out, n, "mooncake/%s", name);
	else
		snprintf(out, n, "mooncake/%s/%s", kind, name);
}

/* Our rpc_meta was refused (the HTTP service keeps the first one): when the engine it names no
 * longer answers on its handshake port (a crashed predecessor of ours), delete it.  0 when the
 * key may be written again. */
static int mc_te_meta_take_over(struct mc_engine *e, const char *key)
{
	char *val = NULL, *reply = NULL;
	size_t vlen = 0, rlen = 0;
	json_error_t err;
	json_t *rpc, *ip, *port;
	int rc = -1;

	if (mc_te_kv_get(e, key, &val, &vlen))
		goto out;
	rpc = json_loadb(val, vlen, 0, &err);
	ip = json_object_get(rpc, "ip_or_host_name");
	port = json_object_get(rpc, "rpc_port");
	if (json_is_string(ip) && json_is_integer(port) && json_integer_value(port) > 0 &&
	    json_integer_value(port) < 65536 &&
	    mc_te_hs_call_within(e->auth, json_string_value(ip), (uint16_t)json_integer_value(port),
				 MC_HS_PROBE, "{}", &reply, &rlen, e->hs_timeout_ms) == 0) {
		mc_log_err("transfer engine: segment name %s is in use by a live engine at %s:%d",
			   e->server_name, json_string_value(ip), (int)json_integer_value(port));
	} else {
		mc_log_warn("transfer engine: %s: replacing the registration of a dead engine",
			    e->server_name);
		rc = mc_te_kv_del(e, key);
	}
	free(reply);
	json_decref(rpc);
out:
	free(val);
	return rc;
}

int mc_te_meta_publish(struct mc_engine *e)
{
	char key[512], rpc[512], *desc;
	int a, b;

	if (!e->publish)
		return 0;
	pthread_mutex_lock(&e->mu);
	desc = mc_te_desc_to_json(e);
	pthread_mutex_unlock(&e->mu);
	snprintf(rpc, sizeof(rpc), "{\"ip_or_host_name\":\"%s\",\"rpc_port\":%u}", e->ip,
		 e->rpc_port);
	mc_te_key(key, sizeof(key), "ram", e->server_name);
	a = mc_te_kv_put(e, key, desc ? desc : "{}");
	mc_te_key(key, sizeof(key), "rpc_meta", e->server_name);
	b = mc_te_kv_put(e, key, rpc);
	if (b && mc_te_meta_take_over(e, key) == 0)
		b = mc_te_kv_put(e, key, rpc);
	free(desc);
	if (a || b) {
		mc_log_warn("transfer engine: publishing %s to %s failed (%d, %d)", e->server_name,
			    e->meta_conn, a, b);
		/* An engine that finds its peers by handshake works without the service. */
		return e->p2p ? 0 : ERR_METADATA;
	}
	return 0;
}

int mc_te_meta_unpublish(struct mc_engine *e)
{
	char key[512];

	if (!e->publish)
		return 0;
	mc_te_key(key, sizeof(key), "ram", e->server_name);
	mc_te_kv_del(e, key);
	mc_te_key(key, sizeof(key), "rpc_meta", e->server_name);
	mc_te_kv_del(e, key);
	return 0;
}

int mc_te_meta_fetch(struct mc_engine *e, const char *name, struct mc_te_segment *seg)
{
	char *reply = NULL;
	size_t len = 0;
	int rc;

	memset(seg, 0, sizeof(*seg));
	snprintf(seg->name, sizeof(seg->name), "%s", name);
	if (e->p2p) {
		/* The name is ip:rpc_port: ask the peer for its descriptor. */
		const char *colon = strrchr(name, ':');
		char *mine;

		if (colon == NULL || atoi(colon + 1) <= 0 || (size_t)(colon - name) >= sizeof(seg->host))
			return ERR_INVALID_ARGUMENT;
		snprintf(seg->host, sizeof(seg->host), "%.*s", (int)(colon - name), name);
		seg->rpc_port = (uint16_t)atoi(colon + 1);
		pthread_mutex_lock(&e->mu);
		mine = mc_te_desc_to_json(e);
		pthread_mutex_unlock(&e->mu);
		rc = mc_te_hs_call_within(e->auth, seg->host, (uint16_t)atoi(colon + 1), MC_HS_METADATA,
					  mine ? mine : "{}", &reply, &len, e->hs_timeout_ms);
		free(mine);
		if (rc)
			return rc;
		rc = mc_te_desc_from_json(reply, len, &seg->desc);
		free(reply);
		return rc;
	}
	{
		char key[512], *val = NULL;
		size_t vlen = 0;
		json_t *rpc;
		json_error_t err;

		mc_te_key(key, sizeof(key), "ram", name);
		rc = mc_te_kv_get(e, key, &val, &vlen);
		if (rc == -ENOENT) {
			/* A file segment (te_file.c): no data host, no rpc_meta. */
			free(val);
			val = NULL;
			mc_te_key(key, sizeof(key), "nvmeof", name);
			if (mc_te_kv_get(e, key, &val, &vlen) == 0) {
				rc = mc_te_desc_from_json(val, vlen, &seg->desc);
				free(val);
				if (rc == 0 && strcmp(seg->desc.protocol, "nvmeof")) {
					mc_te_desc_fini(&seg->desc);
					rc = ERR_MALFORMED_JSON;
				}
				return rc;
			}
			rc = -ENOENT;
		}
		if (rc) {
			free(val);
			mc_log_warn("transfer engine: no descriptor of %s at %s (%d)", name,
				    e->meta_conn, rc);
			return ERR_METADATA;
		}
		rc = mc_te_desc_from_json(val, vlen, &seg->desc);
		free(val);
		if (rc)
			return rc;
		mc_te_key(key, sizeof(key), "rpc_meta", name);
		val = NULL;
		rpc = mc_te_kv_get(e, key, &val, &vlen) == 0 ? json_loadb(val, vlen, 0, &err) : NULL;
		free(val);
		if (!json_is_string(json_object_get(rpc, "ip_or_host_name")) ||
		    strlen(json_string_value(json_object_get(rpc, "ip_or_host_name"))) >=
			    sizeof(seg->host)) {
			json_decref(rpc);
			mc_te_desc_fini(&seg->desc);
			return ERR_METADATA;
		}
		snprintf(seg->host, sizeof(seg->host), "%s",
			 json_string_value(json_object_get(rpc, "ip_or_host_name")));
		if (json_is_integer(json_object_get(rpc, "rpc_port")))
			seg->rpc_port = (uint16_t)json_integer_value(json_object_get(rpc, "rpc_port"));
		json_decref(rpc);
		return 0;
	}
}
