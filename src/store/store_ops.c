/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store operations behind the C API: exist, size, query, remove, and the transfer lists of
 * put and get; put is in store_put.c, get in store_get.c.  Each runs on the calling thread and
 * uses one batch RPC per step whatever the number of keys.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "engine/engine.h"
#include "ssd/fault.h"
#include "store/store.h"

void mc_store_config_from_c(struct mc_rpc_config *cfg, size_t replica_num, int soft_pin,
			    int hard_pin, const char **preferred, size_t npreferred)
{
	size_t i;

	mc_rpc_config_default(cfg);
	cfg->replica_num = replica_num ? (uint32_t)replica_num : 1;
	cfg->with_hard_pin = hard_pin != 0;
	cfg->soft_pin_action = soft_pin ? MC_SOFT_PIN_ENABLE : MC_SOFT_PIN_PRESERVE;
	for (i = 0; preferred && i < npreferred && i < MC_RPC_MAX_PREFERRED; i++)
		if (preferred[i])
			cfg->preferred[cfg->n_preferred++] = mc_strv_c(preferred[i]);
}

int mc_xfer_list_reserve(struct mc_xfer_list *l, uint32_t cap)
{
	struct mc_xfer_req *nxr;
	uint32_t *nxi;

	if (cap <= l->cap)
		return 0;
	nxr = realloc(l->xr, cap * sizeof(*l->xr));
	if (nxr == NULL)
		return -ENOMEM;
	l->xr = nxr;
	nxi = realloc(l->item, cap * sizeof(*l->item));
	if (nxi == NULL)
		return -ENOMEM;
	l->item = nxi;
	l->cap = cap;
	return 0;
}

int mc_xfer_list_add(struct mc_xfer_list *l, const char *host, uint16_t port,
		     struct mc_strv segment, int opcode, void *local, uint64_t remote, uint64_t len,
		     uint32_t item)
{
	struct mc_xfer_req *x;
	size_t hl, sl;

	if (l->n == l->cap && mc_xfer_list_reserve(l, l->cap ? l->cap * 2 : 16))
		return -ENOMEM;
	/* Field by field: a request is 600 bytes of mostly string room, and a batch of small
	 * values adds one per key (clearing it all, and a printf for the host, were a tenth of
	 * the client's time per small put). */
	x = &l->xr[l->n];
	hl = strlen(host);
	if (hl >= sizeof(x->host))
		hl = sizeof(x->host) - 1;
	memcpy(x->host, host, hl);
	x->host[hl] = '\0';
	x->port = port;
	sl = segment.n < sizeof(x->segment) ? segment.n : 0;
	if (sl)
		memcpy(x->segment, segment.p, sl);
	x->segment[sl] = '\0';
	x->nic[0] = '\0';
	x->status = 0;
	x->opcode = opcode;
	x->local = local;
	x->remote = remote;
	x->len = len;
	l->item[l->n++] = item;
	return 0;
}

void mc_xfer_list_free(struct mc_xfer_list *l)
{
	free(l->xr);
	free(l->item);
	memset(l, 0, sizeof(*l));
}

void mc_store_put_keys(struct mc_wbuf *w, const char *const *keys, uint32_t n)
{
	uint32_t i;

	mc_wbuf_u32(w, n);
	for (i = 0; i < n; i++)
		mc_wbuf_cstr(w, keys[i]);
}

int mc_store_keys_call(struct mc_store *st, uint16_t op, const uint8_t *pre, size_t npre,
		       const char **keys, uint32_t n, int *results)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	uint32_t i, m;
	int rc;

	mc_rpc_call_init(&call, op);
	if (npre)
		mc_wbuf_put(&call.req, pre, npre);
	mc_store_put_keys(&call.req, keys, n);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc == 0) {
		mc_rbuf_init(&r, call.resp, call.resp_len);
		m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 4);
		for (i = 0; i < n; i++)
			results[i] = i < m ? mc_rbuf_i32(&r) : MC_ERR_RPC_FAIL;
		if (r.err || m != n)
			rc = MC_ERR_RPC_FAIL;
	}
	if (rc)
		for (i = 0; i < n; i++)
			results[i] = rc;
	mc_rpc_call_fini(&call);
	return rc;
}

int mc_store_exist_many(struct mc_store *st, const char **keys, uint32_t n, int *results)
{
	if (n == 0)
		return 0;
	mc_store_keys_call(st, n > 1 ? MC_OP_BATCH_EXIST_KEY : MC_OP_EXIST_KEY, NULL, 0, keys, n,
			   results);
	return 0;
}

int mc_store_probe_policy(const char *name)
{
	if (name == NULL || !strcmp(name, "none"))
		return MC_PROBE_NONE;
	if (!strcmp(name, "LastHitOnly"))
		return MC_PROBE_LAST_HIT_ONLY;
	return -1;
}

int mc_store_probe_many(struct mc_store *st, const char **keys, uint32_t n, int policy,
			uint32_t candidate_size, int *results)
{
	uint8_t pre[5] = { (uint8_t)policy };

	if (n == 0)
		return 0;
	if (policy == MC_PROBE_NONE && n == 1)
		return mc_store_keys_call(st, MC_OP_PROBE_KEY, NULL, 0, keys, n, results);
	mc_put_le32(pre + 1, candidate_size);
	return mc_store_keys_call(st, MC_OP_BATCH_PROBE_KEY, pre, sizeof(pre), keys, n, results);
}

int mc_store_remove_many(struct mc_store *st, const char **keys, uint32_t n, int force,
			 int *results)
{
	uint8_t f = force ? 1 : 0;

	if (n == 0)
		return 0;
	mc_store_keys_call(st, n > 1 ? MC_OP_BATCH_REMOVE : MC_OP_REMOVE, &f, 1, keys, n, results);
	return 0;
}

int64_t mc_store_get_size(struct mc_store *st, const char *key)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	int64_t res;
	int rc;

	mc_rpc_call_init(&call, MC_OP_GET_REPLICA_LIST);
	mc_store_put_keys(&call.req, &key, 1);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc) {
		res = rc;
	} else {
		struct mc_rpc_replica rep;
		uint32_t nrep;

		mc_rbuf_init(&r, call.resp, call.resp_len);
		(void)mc_rbuf_u64(&r);
		(void)mc_rbuf_u32(&r);
		res = mc_rbuf_i32(&r);
		nrep = mc_rbuf_u32(&r);
		if (res == 0 && nrep > 0) {
			mc_rpc_get_replica(&r, &rep);
			res = (int64_t)rep.size;
		} else if (res == 0) {
			res = MC_ERR_REPLICA_IS_NOT_READY;
		}
		if (r.err)
			res = MC_ERR_RPC_FAIL;
	}
	mc_rpc_call_fini(&call);
	return res;
}

static int64_t mc_store_count_call(struct mc_store *st, uint16_t op, int force, const char *regex)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	int64_t res;
	int rc;

	mc_rpc_call_init(&call, op);
	mc_wbuf_u8(&call.req, force ? 1 : 0);
	if (regex)
		mc_wbuf_cstr(&call.req, regex);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc) {
		res = rc;
	} else {
		mc_rbuf_init(&r, call.resp, call.resp_len);
		res = mc_rbuf_i64(&r);
		if (r.err)
			res = MC_ERR_RPC_FAIL;
	}
	mc_rpc_call_fini(&call);
	return res;
}

int64_t mc_store_remove_regex(struct mc_store *st, const char *pattern, int force)
{
	return mc_store_count_call(st, MC_OP_REMOVE_BY_REGEX, force, pattern);
}

int64_t mc_store_remove_all(struct mc_store *st, int force)
{
	return mc_store_count_call(st, MC_OP_REMOVE_ALL, force, NULL);
}

int mc_store_query_many(struct mc_store *st, struct mc_query_item *items, uint32_t n)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	uint32_t i, j, m;
	int rc;

	if (n == 0)
		return 0;
	mc_rpc_call_init(&call, n > 1 ? MC_OP_BATCH_GET_REPLICA_LIST : MC_OP_GET_REPLICA_LIST);
	mc_wbuf_u32(&call.req, n);
	for (i = 0; i < n; i++)
		mc_wbuf_cstr(&call.req, items[i].key);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc == 0) {
		/* The replicas go into one array for the batch (first[i]: where key i's start),
		 * their names stay views into the answer, which the batch keeps. */
		struct mc_rpc_replica *reps = NULL;
		uint32_t *first = calloc(n, sizeof(*first)), nr = 0, cap = 0;

		mc_rbuf_init(&r, call.resp, call.resp_len);
		(void)mc_rbuf_u64(&r);
		m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 8);
		if (m != n || first == NULL)
			rc = m != n ? MC_ERR_RPC_FAIL : -ENOMEM;
		for (i = 0; i < n && rc == 0; i++) {
			items[i].code = mc_rbuf_i32(&r);
			items[i].nrep = mc_rbuf_count(&r, MC_RPC_MAX_REPLICAS, 18);
			first[i] = nr;
			if (nr + items[i].nrep > cap) {
				uint32_t nc = cap ? cap * 2 : n + 8;
				struct mc_rpc_replica *g;

				while (nc < nr + items[i].nrep)
					nc *= 2;
				g = realloc(reps, nc * sizeof(*reps));
				if (g == NULL) {
					rc = -ENOMEM;
					break;
				}
				reps = g;
				cap = nc;
			}
			for (j = 0; j < items[i].nrep; j++) {
				mc_rpc_get_replica(&r, &reps[nr]);
				reps[nr++].path = mc_strv_c("");
			}
		}
		if (rc == 0 && r.err)
			rc = MC_ERR_RPC_FAIL;
		if (rc == 0) {
			for (i = 0; i < n; i++)
				items[i].reps = reps + first[i];
			items[0].own_reps = reps;
			items[0].own_resp = call.resp;
			call.resp = NULL;
		} else {
			free(reps);
		}
		free(first);
	}
	if (rc)
		for (i = 0; i < n; i++) {
			items[i].code = rc;
			items[i].nrep = 0;
		}
	mc_rpc_call_fini(&call);
	return rc;
}

void mc_store_query_release(struct mc_query_item *items, uint32_t n)
{
	if (n == 0)
		return;
	free(items[0].own_reps);
	free(items[0].own_resp);
	items[0].own_reps = items[0].own_resp = NULL;
}

int mc_store_replica_clear(struct mc_store *st, const char **keys, uint32_t n,
			   const char *segment_name, uint8_t *cleared)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	uint32_t i, j, m;
	int rc;

	memset(cleared, 0, n);
	mc_rpc_call_init(&call, MC_OP_BATCH_REPLICA_CLEAR);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_wbuf_cstr(&call.req, segment_name ? segment_name : "");
	mc_store_put_keys(&call.req, keys, n);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc == 0) {
		mc_rbuf_init(&r, call.resp, call.resp_len);
		m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 4);
		for (j = 0; j < m && !r.err; j++) {
			struct mc_strv k = mc_rpc_get_strv(&r, MC_RPC_MAX_KEY);

			for (i = 0; i < n; i++)
				if (!cleared[i] && mc_strv_eq(k, mc_strv_c(keys[i]))) {
					cleared[i] = 1;
					break;
				}
		}
		rc = r.err ? MC_ERR_RPC_FAIL : (int)m;
	}
	mc_rpc_call_fini(&call);
	return rc;
}
