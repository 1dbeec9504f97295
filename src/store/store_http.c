/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's transfer metrics and its embedded HTTP server (upstream's RealClient
 * start_http_server: mooncake_client --enable_http_server --http_port, the Python store's
 * enable_client_http_server / client_http_port).
 *
 *   GET /health           200 {"status":"healthy","code":0}; 503 with "not_initialized" (1) or
 *                         "master_unreachable" (2) (upstream's health codes)
 *   GET /metrics          Prometheus text: mooncake_transfer_read_bytes,
 *                         mooncake_transfer_write_bytes and the histograms (us)
 *                         mooncake_transfer_{get,put,batch_get,batch_put}_latency
 *   GET /metrics/summary  upstream's "=== Transfer Metrics Summary ===" text
 *
 * /metrics also shows mooncake_auth_failures_total (peers refused for want of the cluster
 * secret on any port of the handle) and the connection limits of the process's ports
 * (conn_limit.h).  The server itself is bounded by MC_STORE_HTTP_MAX_CONNECTIONS (1024),
 * MC_STORE_HTTP_MAX_CONNECTIONS_PER_PEER (64) and MC_STORE_HTTP_REQUEST_TIMEOUT_MS (10000).
 *
 * Every put and get of the handle goes through mc_store_put_many / mc_store_get_many, which
 * count here (atomics: any thread) around the work of mc_store_*_many_raw.  A call of one key
 * is a Get or Put, of several a Batch Get or Batch Put, as upstream's client counts them.  The
 * server runs on the handle's loop thread, where the master connection's state is read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/auth.h"
#include "common/errcode.h"
#include "common/log.h"
#include "reactor/conn_limit.h"
#include "reactor/http_guard.h"
#include "reactor/procmem.h"
#include "reactor/loop_thread.h"
#include "store/store.h"

/* Upstream's kLatencyBucket (us). */
static const double mc_lat_bounds[MC_STORE_LAT_BUCKETS] = {
	50, 75, 125, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000, 7000,
	15000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000, 5000000, 10000000,
	20000000
};

enum { MC_LAT_GET, MC_LAT_PUT, MC_LAT_BATCH_GET, MC_LAT_BATCH_PUT };

static const char *const mc_lat_names[4] = { "get", "put", "batch_get", "batch_put" };
static const char *const mc_lat_titles[4] = { "Get", "Put", "Batch Get", "Batch Put" };

static uint64_t mc_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void mc_lat_add(struct mc_store *st, int which, uint64_t us)
{
	struct mc_store_metrics *m = &st->metrics;
	unsigned i = 0;

	while (i < MC_STORE_LAT_BUCKETS && (double)us > mc_lat_bounds[i])
		i++;
	__atomic_add_fetch(&m->hist[which][i], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&m->sum_us[which], us, __ATOMIC_RELAXED);
}

int mc_store_put_many(struct mc_store *st, struct mc_put_item *items, uint32_t n,
		      const struct mc_rpc_config *cfg, int upsert)
{
	uint64_t t0 = mc_now_us(), bytes = 0;
	uint32_t i;
	int rc = mc_store_put_many_raw(st, items, n, cfg, upsert);

	for (i = 0; i < n; i++)
		if (items[i].result == 0)
			bytes += items[i].size;
	__atomic_add_fetch(&st->metrics.write_bytes, bytes, __ATOMIC_RELAXED);
	if (n)
		mc_lat_add(st, n == 1 ? MC_LAT_PUT : MC_LAT_BATCH_PUT, mc_now_us() - t0);
	return rc;
}

int mc_store_get_many(struct mc_store *st, struct mc_get_item *items, uint32_t n)
{
	uint64_t t0 = mc_now_us(), bytes = 0;
	uint32_t i;
	int rc = mc_store_get_many_raw(st, items, n);

	for (i = 0; i < n; i++)
		if (items[i].result > 0)
			bytes += (uint64_t)items[i].result;
	__atomic_add_fetch(&st->metrics.read_bytes, bytes, __ATOMIC_RELAXED);
	if (n)
		mc_lat_add(st, n == 1 ? MC_LAT_GET : MC_LAT_BATCH_GET, mc_now_us() - t0);
	return rc;
}

void mc_store_metrics_prometheus(struct mc_store *st, struct evbuffer *b)
{
	struct mc_store_metrics *m = &st->metrics;
	int w;
	unsigned i;

	evbuffer_add_printf(b, "# HELP mooncake_transfer_read_bytes Total bytes read\n"
			       "# TYPE mooncake_transfer_read_bytes counter\n"
			       "mooncake_transfer_read_bytes %" PRIu64 "\n"
			       "# HELP mooncake_transfer_write_bytes Total bytes written\n"
			       "# TYPE mooncake_transfer_write_bytes counter\n"
			       "mooncake_transfer_write_bytes %" PRIu64 "\n",
			    __atomic_load_n(&m->read_bytes, __ATOMIC_RELAXED),
			    __atomic_load_n(&m->write_bytes, __ATOMIC_RELAXED));
	evbuffer_add_printf(b, "# HELP mooncake_checksum_mismatch_total objects whose bytes failed "
			       "their checksum here (MOONCAKE_STORE_CHECKSUM): replicas read, shared-"
			       "directory files, offloads and promotions refused\n"
			       "# TYPE mooncake_checksum_mismatch_total counter\n"
			       "mooncake_checksum_mismatch_total %" PRIu64 "\n",
			    __atomic_load_n(&m->checksum_mismatches, __ATOMIC_RELAXED));
	evbuffer_add_printf(b, "# HELP mooncake_auth_failures_total peers refused for want of the "
			       "cluster secret (data, handshake and shm ports; peers are logged)\n"
			       "# TYPE mooncake_auth_failures_total counter\n"
			       "mooncake_auth_failures_total %" PRIu64 "\n",
			    mc_auth_failures(st->auth));
	mc_conn_limit_prom(b);
	mc_procmem_prom(b);
	for (w = 0; w < 4; w++) {
		const char *n = mc_lat_names[w];
		uint64_t cum = 0;

		evbuffer_add_printf(b, "# HELP mooncake_transfer_%s_latency %s transfer latency "
				       "(us)\n# TYPE mooncake_transfer_%s_latency histogram\n",
				    n, mc_lat_titles[w], n);
		for (i = 0; i <= MC_STORE_LAT_BUCKETS; i++) {
			cum += __atomic_load_n(&m->hist[w][i], __ATOMIC_RELAXED);
			if (i < MC_STORE_LAT_BUCKETS)
				evbuffer_add_printf(b, "mooncake_transfer_%s_latency_bucket{le=\"%g\"} "
						       "%" PRIu64 "\n", n, mc_lat_bounds[i], cum);
			else
				evbuffer_add_printf(b, "mooncake_transfer_%s_latency_bucket"
						       "{le=\"+Inf\"} %" PRIu64 "\n", n, cum);
		}
		evbuffer_add_printf(b, "mooncake_transfer_%s_latency_sum %" PRIu64 "\n"
				       "mooncake_transfer_%s_latency_count %" PRIu64 "\n", n,
				    __atomic_load_n(&m->sum_us[w], __ATOMIC_RELAXED), n, cum);
	}
}

/* Upstream's byte_size_to_string: two decimals and a binary unit. */
static void mc_bytes_text(char *out, size_t n, double v, const char *suffix)
{
	static const char *const units[] = { "T", "G", "M", "K" };
	static const double scale[] = { 1099511627776.0, 1073741824.0, 1048576.0, 1024.0 };
	int i;

	for (i = 0; i < 4; i++)
		if (v >= scale[i]) {
			snprintf(out, n, "%.2f %s%s", v / scale[i], units[i], suffix);
			return;
		}
	snprintf(out, n, "%.2f %s", v, suffix);
}

void mc_store_metrics_summary(struct mc_store *st, struct evbuffer *b)
{
	struct mc_store_metrics *m = &st->metrics;
	double secs = (double)(mc_store_now_ms() - m->start_ms) / 1000.0;
	uint64_t rb = __atomic_load_n(&m->read_bytes, __ATOMIC_RELAXED);
	uint64_t wb = __atomic_load_n(&m->write_bytes, __ATOMIC_RELAXED);
	char t[4][64];
	int w;

	if (secs < 1e-9)
		secs = 1e-9;
	mc_bytes_text(t[0], sizeof(t[0]), (double)rb, "B");
	mc_bytes_text(t[1], sizeof(t[1]), (double)wb, "B");
	mc_bytes_text(t[2], sizeof(t[2]), (double)rb / secs, "B/s");
	mc_bytes_text(t[3], sizeof(t[3]), (double)wb / secs, "B/s");
	evbuffer_add_printf(b, "=== Transfer Metrics Summary ===\nTotal Read: %s\nTotal Write: %s\n"
			       "Average Read Throughput: %s\nAverage Write Throughput: %s\n"
			       "\n=== Latency Summary (microseconds) ===\n", t[0], t[1], t[2], t[3]);
	for (w = 0; w < 4; w++) {
		uint64_t c[MC_STORE_LAT_BUCKETS + 1], total = 0, cum = 0;
		double p95 = 0, max = 0;
		unsigned i;

		for (i = 0; i <= MC_STORE_LAT_BUCKETS; i++)
			total += c[i] = __atomic_load_n(&m->hist[w][i], __ATOMIC_RELAXED);
		evbuffer_add_printf(b, "%s: ", mc_lat_titles[w]);
		if (total == 0) {
			evbuffer_add_printf(b, "No data\n");
			continue;
		}
		for (i = 0; i < MC_STORE_LAT_BUCKETS && p95 == 0; i++) {
			cum += c[i];
			if (cum >= total * 95 / 100)
				p95 = mc_lat_bounds[i];
		}
		for (i = MC_STORE_LAT_BUCKETS; i > 0 && max == 0; i--)
			if (c[i - 1])
				max = mc_lat_bounds[i - 1];
		evbuffer_add_printf(b, "count=%" PRIu64, total);
		if (p95 > 0)
			evbuffer_add_printf(b, ", p95<%g\xce\xbcs", p95);
		if (max > 0)
			evbuffer_add_printf(b, ", max<%g\xce\xbcs", max);
		evbuffer_add_printf(b, "\n");
	}
}

/* ---------------------------------------------------------------- the HTTP server */

struct mc_store_http {
	struct evhttp *http;
	struct mc_http_guard *guard;	/* connection limits of the HTTP port */
	struct mc_store *st;
	int port;
	int rc;
	struct mc_waiter w;
};

static void mc_http_reply(struct evhttp_request *req, int code, const char *type,
			  struct evbuffer *b)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
	evhttp_send_reply(req, code, code == 200 ? "OK" : code == 404 ? "Not Found"
			  : code == 405 ? "Method Not Allowed" : "Service Unavailable", b);
}

static void mc_http_cb(struct evhttp_request *req, void *arg)
{
	struct mc_store_http *h = arg;
	struct mc_store *st = h->st;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	struct evbuffer *b = evbuffer_new();

	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	if (path == NULL || (strcmp(path, "/health") && strcmp(path, "/metrics") &&
			     strcmp(path, "/metrics/summary"))) {
		evbuffer_add_printf(b, "not found\n");
		mc_http_reply(req, 404, "text/plain", b);
	} else if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evbuffer_add_printf(b, "method not allowed\n");
		mc_http_reply(req, 405, "text/plain", b);
	} else if (!strcmp(path, "/health")) {
		int code = !st->initialized ? 1 : (st->mc && mc_master_client_healthy(st->mc)) ? 0 : 2;
		static const char *const names[] = { "healthy", "not_initialized",
						      "master_unreachable" };

		evbuffer_add_printf(b, "{\"status\":\"%s\",\"code\":%d}", names[code], code);
		mc_http_reply(req, code ? 503 : 200, "application/json", b);
	} else if (!strcmp(path, "/metrics")) {
		mc_store_metrics_prometheus(st, b);
		mc_http_reply(req, 200, "text/plain; version=0.0.4", b);
	} else {
		mc_store_metrics_summary(st, b);
		mc_http_reply(req, 200, "text/plain", b);
	}
	evbuffer_free(b);
}

static void mc_http_start_on_loop(void *arg)
{
	struct mc_store_http *h = arg;

	h->http = evhttp_new(mc_loop_thread_base(h->st->lt));
	if (h->http == NULL) {
		h->rc = MC_ERR_INTERNAL;
	} else if (evhttp_bind_socket(h->http, "0.0.0.0", (uint16_t)h->port) != 0) {
		evhttp_free(h->http);
		h->http = NULL;
		h->rc = MC_ERR_INVALID_PARAMS;
	} else {
		/* A scrape is one small GET: a few connections per scraper suffice. */
		struct mc_port_limits pl = { 1024, 64, 10000, 0 };

		mc_port_limits_env("MC_STORE_HTTP", &pl);
		evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
					   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD);
		evhttp_set_max_headers_size(h->http, 16384);
		evhttp_set_max_body_size(h->http, 65536);
		evhttp_set_timeout(h->http, 30);
		h->guard = mc_http_guard_new(h->http, mc_loop_thread_base(h->st->lt), "client_http",
					     pl.max_conns, pl.max_per_peer, (int)pl.request_ms,
					     NULL, NULL);
		if (h->guard == NULL || mc_http_guard_route(h->guard, NULL, mc_http_cb, h) != 0) {
			evhttp_free(h->http);
			mc_http_guard_free(h->guard);
			h->http = NULL;
			h->guard = NULL;
			h->rc = MC_ERR_INTERNAL;
		} else {
			h->rc = 0;
		}
	}
	mc_waiter_signal(&h->w, 0);
}

static void mc_http_stop_on_loop(void *arg)
{
	struct mc_store_http *h = arg;

	if (h->http)
		evhttp_free(h->http);
	mc_http_guard_free(h->guard);	/* after evhttp_free: see http_guard.h */
	h->http = NULL;
	h->guard = NULL;
	mc_waiter_signal(&h->w, 0);
}

int mc_store_http_start(struct mc_store *st, int port)
{
	struct mc_store_http *h;

	if (st->http || st->lt == NULL)
		return st->http ? 0 : MC_ERR_INVALID_PARAMS;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return MC_ERR_INTERNAL;
	h->st = st;
	h->port = port;
	mc_waiter_init(&h->w);
	mc_loop_thread_call(st->lt, mc_http_start_on_loop, h);
	mc_waiter_wait(&h->w);
	mc_waiter_fini(&h->w);
	if (h->rc) {
		mc_log_err("client HTTP server: cannot listen on port %d", port);
		free(h);
		return MC_ERR_INVALID_PARAMS;
	}
	st->http = h;
	mc_log_info("client HTTP server on port %d (/health, /metrics, /metrics/summary)", port);
	return 0;
}

void mc_store_http_stop(struct mc_store *st)
{
	struct mc_store_http *h = st->http;

	if (h == NULL)
		return;
	if (st->lt) {
		mc_waiter_init(&h->w);
		mc_loop_thread_call(st->lt, mc_http_stop_on_loop, h);
		mc_waiter_wait(&h->w);
		mc_waiter_fini(&h->w);
	}
	free(h);
	st->http = NULL;
}
