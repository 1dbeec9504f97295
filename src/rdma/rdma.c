/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rdma transport object: configuration from upstream's MC_* environment variables (the
 * table below: names, defaults and bounds), the NIC
 * contexts it opens, the handshake worker, teardown.  See rdma.h for the threading contract.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/transfer_engine_c.h"
#include "common/log.h"
#include "rdma/rdma_int.h"

/* The variables we honour: name, field, default, bounds. */
static const struct mc_rdma_opt {
	const char *env;
	size_t off;
	int def, min, max;
} mc_rdma_opts[] = {
	{ "MC_NUM_QP_PER_EP", offsetof(struct mc_rdma_config, num_qp_per_ep), 2, 1,
	  MC_RDMA_MAX_QP_PER_EP },
	{ "MC_MAX_WR", offsetof(struct mc_rdma_config, max_wr), 256, 1, 16384 },
	{ "MC_MAX_SGE", offsetof(struct mc_rdma_config, max_sge), 4, 1, 64 },
	{ "MC_MAX_INLINE", offsetof(struct mc_rdma_config, max_inline), 64, 0, 4096 },
	{ "MC_MTU", offsetof(struct mc_rdma_config, mtu), 4096, 256, 4096 },
	{ "MC_IB_PORT", offsetof(struct mc_rdma_config, ib_port), 1, 1, 255 },
	{ "MC_GID_INDEX", offsetof(struct mc_rdma_config, gid_index), -1, -1, 255 },
	{ "MC_PKEY_INDEX", offsetof(struct mc_rdma_config, pkey_index), 0, 0, 65535 },
	{ "MC_IB_SL", offsetof(struct mc_rdma_config, ib_sl), -1, -1, 15 },
	{ "MC_IB_TC", offsetof(struct mc_rdma_config, ib_tc), -1, -1, 255 },
	{ "MC_MAX_CQE_PER_CTX", offsetof(struct mc_rdma_config, max_cqe), 4096, 16, 1 << 22 },
	{ "MC_MAX_EP_PER_CTX", offsetof(struct mc_rdma_config, max_ep), 65536, 1, 1 << 20 },
	{ "MC_SLICE_SIZE", offsetof(struct mc_rdma_config, slice_size), 65536, 4096, 64 << 20 },
	{ "MC_RETRY_CNT", offsetof(struct mc_rdma_config, retry_cnt), 9, 0, 1000 },
	{ "MC_FRAGMENT_RATIO", offsetof(struct mc_rdma_config, fragment_ratio), 4, 1, 1 << 16 },
	{ "MC_PATH_ROUNDROBIN", offsetof(struct mc_rdma_config, path_rr), 0, 0, 1 },
	{ "MC_ENABLE_DEST_DEVICE_AFFINITY", offsetof(struct mc_rdma_config, dest_affinity), 0, 0,
	  1 },
	{ "MC_SLICE_TIMEOUT", offsetof(struct mc_rdma_config, slice_timeout), -1, -1, 86400 },
};

void mc_rdma_config_load(struct mc_rdma_config *c)
{
	size_t i;

	for (i = 0; i < sizeof(mc_rdma_opts) / sizeof(mc_rdma_opts[0]); i++) {
		const struct mc_rdma_opt *o = &mc_rdma_opts[i];
		const char *v = getenv(o->env);
		int *f = (int *)((char *)c + o->off);
		char *end;
		long n;

		*f = o->def;
		if (v == NULL || *v == '\0')
			continue;
		if (o->min == 0 && o->max == 1 && (!strcmp(v, "true") || !strcmp(v, "yes"))) {
			*f = 1;
			continue;
		}
		errno = 0;
		n = strtol(v, &end, 10);
		if (errno || *end || n < o->min || n > o->max) {
			mc_log_warn("rdma: %s=%s is not in [%d, %d], using %d", o->env, v, o->min,
				    o->max, o->def);
			continue;
		}
		*f = (int)n;
	}
}

/* Our NIC list: devices, else the names in the matrix, else every device found. */
static unsigned mc_rdma_pick_names(struct mc_rdma *r, const char *devices, json_t *m,
				   struct ibv_device **list, int ndev)
{
	unsigned n = 0;
	int i;

	if (devices && *devices) {
		const char *p = devices;

		while (*p && n < MC_RDMA_MAX_NICS) {
			size_t k = strcspn(p, ", ");

			if (k && k < sizeof(r->names[0])) {
				memcpy(r->names[n], p, k);
				r->names[n++][k] = '\0';
			} else if (k) {
				mc_log_warn("rdma: NIC name '%.*s' too long", (int)k, p);
			}
			p += k;
			p += strspn(p, ", ");
		}
		return n;
	}
	if (m)
		n = mc_rdma_topo_names(m, r->names, MC_RDMA_MAX_NICS);
	for (i = 0; n == 0 && i < ndev && i < MC_RDMA_MAX_NICS; i++)
		snprintf(r->names[i], sizeof(r->names[i]), "%s", r->ops->get_device_name(list[i]));
	return n ? n : (unsigned)(ndev < MC_RDMA_MAX_NICS ? ndev : MC_RDMA_MAX_NICS);
}

static void mc_rdma_on_sweep(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mc_rdma_slice_sweep(arg);
}

static void mc_rdma_on_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mc_rdma_run_deferred(arg);
}

struct mc_rdma *mc_rdma_new(struct event_base *base, const struct mc_rdma_params *p, int *err)
{
	struct mc_rdma *r = calloc(1, sizeof(*r));
	struct ibv_device **list = NULL;
	json_error_t jerr;
	json_t *m = NULL;
	unsigned n, i;
	int ndev = 0, k, rc = ERR_MEMORY;

	if (r == NULL)
		goto fail;
	r->base = base;
	r->ops = p->ops ? p->ops : mc_verbs_ibv();
	r->hs = p->hs;
	r->hs_arg = p->hs_arg;
	r->wpipe[0] = r->wpipe[1] = -1;
	r->seed = (unsigned)time(NULL) ^ (unsigned)getpid() ^ (unsigned)(uintptr_t)r;
	pthread_mutex_init(&r->mr.mu, NULL);
	pthread_mutex_init(&r->wmu, NULL);
	pthread_cond_init(&r->wcv, NULL);
	TAILQ_INIT(&r->deferred);
	mc_rdma_config_load(&r->cfg);
	r->dev = event_new(base, -1, 0, mc_rdma_on_deferred, r);
	if (r->dev == NULL)
		goto fail;
	rc = ERR_INVALID_ARGUMENT;
	if (p->server_name == NULL || *p->server_name == '\0' || strchr(p->server_name, '@') ||
	    strlen(p->server_name) >= sizeof(r->server_name) || p->hs == NULL)
		goto fail;
	strcpy(r->server_name, p->server_name);
	if (p->matrix && *p->matrix) {
		m = json_loads(p->matrix, 0, &jerr);
		if (!json_is_object(m)) {
			mc_log_err("rdma: priority matrix is not a JSON object: %s", jerr.text);
			rc = ERR_MALFORMED_JSON;
			goto fail;
		}
	}
	list = r->ops->get_device_list(&ndev);
	if (list == NULL || ndev <= 0) {
		n = mc_rdma_pick_names(r, p->devices, m, list, 0);
		mc_log_err("rdma: no RDMA device found%s%s%s", n ? " (wanted " : "",
			   n ? r->names[0] : "", n > 1 ? ", ...)" : n ? ")" : "");
		rc = ERR_DEVICE_NOT_FOUND;
		goto fail;
	}
	n = mc_rdma_pick_names(r, p->devices, m, list, ndev);
	rc = ERR_DEVICE_NOT_FOUND;
	for (i = 0; i < n; i++) {
		struct mc_rdma_ctx *c = &r->ctx[r->nctx];

		for (k = 0; k < ndev; k++)
			if (!strcmp(r->ops->get_device_name(list[k]), r->names[i]))
				break;
		if (k == ndev) {
			mc_log_err("rdma: device %s not found", r->names[i]);
			rc = ERR_DEVICE_NOT_FOUND;	/* a NIC before it may have set rc to 0 */
			goto fail;
		}
		c->index = r->nctx;
		snprintf(c->name, sizeof(c->name), "%s", r->names[i]);
		rc = mc_rdma_ctx_open(r, c, list[k]);
		if (rc)
			goto fail;
		r->nctx++;
	}
	if (r->nctx == 0) {
		mc_log_err("rdma: no usable RDMA device");
		goto fail;
	}
	/* The published matrix: the given one, else every NIC preferred everywhere. */
	if (m == NULL) {
		json_t *all = json_array();

		for (i = 0; all && i < r->nctx; i++)
			json_array_append_new(all, json_string(r->ctx[i].name));
		m = all ? json_pack("{s[o[]]}", "*", all) : NULL;
		if (m == NULL) {
			rc = ERR_MEMORY;
			goto fail;
		}
	}
	rc = mc_rdma_topo_parse(m, r->names, r->nctx, &r->topo);
	if (rc)
		goto fail;
	r->matrix = m;
	m = NULL;
	rc = mc_rdma_worker_start(r);
	if (rc)
		goto fail;
	if (r->cfg.slice_timeout > 0) {
		/* A quarter of the timeout between sweeps, at most a second. */
		struct timeval tv = { 0, 0 };
		int ms = r->cfg.slice_timeout * 250;

		if (ms > 1000)
			ms = 1000;
		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;
		r->tev = event_new(base, -1, EV_PERSIST, mc_rdma_on_sweep, r);
		if (r->tev == NULL || event_add(r->tev, &tv)) {
			rc = ERR_MEMORY;
			goto fail;
		}
	}
	r->ops->free_device_list(list);
	mc_log_info("rdma: %s with %u NIC(s), %d QP(s) per endpoint, slices of %d bytes",
		    r->server_name, r->nctx, r->cfg.num_qp_per_ep, r->cfg.slice_size);
	return r;
fail:
	if (list)
		r->ops->free_device_list(list);
	json_decref(m);
	mc_rdma_free(r);
	if (err)
		*err = rc;
	return NULL;
}

void mc_rdma_free(struct mc_rdma *r)
{
	unsigned i;

	if (r == NULL)
		return;
	r->freeing = 1;
	if (r->tev)
		event_free(r->tev);
	r->tev = NULL;
	mc_rdma_worker_stop(r);
	for (i = 0; i < r->nctx; i++)
		mc_rdma_ep_free_all(&r->ctx[i]);
	mc_rdma_mr_fini(r);
	for (i = 0; i < r->nctx; i++)
		mc_rdma_ctx_close(&r->ctx[i]);
	mc_rdma_run_deferred(r);
	if (r->dev)
		event_free(r->dev);
	mc_rdma_topo_fini(&r->topo);
	json_decref(r->matrix);
	pthread_cond_destroy(&r->wcv);
	pthread_mutex_destroy(&r->wmu);
	pthread_mutex_destroy(&r->mr.mu);
	free(r);
}

void mc_rdma_get_stats(struct mc_rdma *r, struct mc_rdma_stats *s)
{
	*s = r->st;
}

unsigned mc_rdma_nic_count(const struct mc_rdma *r)
{
	return r->nctx;
}

const json_t *mc_rdma_matrix(const struct mc_rdma *r)
{
	return r->matrix;
}
