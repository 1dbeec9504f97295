/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PROXY_H
#define MC_PROXY_H

/*
 * mooncake_proxy: the prefill/decode (XpYd) proxy in front of vLLM instances.  One thread, one
 * libevent loop.  The daemon context (struct px) owns the configuration, the HTTP server, both
 * instance pools and the metrics; every callback reaches it through its argument.
 *
 * Modules:
 *   proxy_pool.c   instances (prefill and decode pools), upstream connection reuse, health
 *                  checks, the scheduling policies and the prefix structure of kv_aware
 *   proxy_flow.c   one proxied completion: prefill (max_tokens 1) then decode, relayed
 *   proxy_http.c   the routes: OpenAI endpoints, /health, /status, /metrics, admin
 *   proxy_kvpool.c what the store's pool holds (block hashes) and a prompt's blocks in it
 *   proxy_kvsub.c  the subscription to the master's KV events (ZeroMQ) that fills it
 *   proxy_main.c   flags, start-up, signals
 */
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/http.h>

enum px_role { PX_PREFILL = 0, PX_DECODE = 1 };
enum px_policy { PX_ROUND_ROBIN, PX_LEAST_LOADED, PX_KV_AWARE };

/* Latency histogram buckets, seconds (Prometheus le labels). */
#define PX_HIST_N 14
extern const double px_hist_bounds[PX_HIST_N];

struct px_hist {
	uint64_t bucket[PX_HIST_N + 1]; /* last: +Inf */
	uint64_t count;
	double sum;
};
void px_hist_observe(struct px_hist *h, double seconds);

struct px_cfg {
	char *model;
	char *host;
	int64_t port;
	char *scheduling;
	char *log_level;
	char *admin_api_key_file;
	uint64_t max_header_bytes;
	uint64_t max_body_bytes;
	int64_t max_inflight;
	int64_t max_instances;
	int64_t max_idle_upstream;
	int64_t upstream_timeout_ms;
	int64_t client_timeout_ms;
	int64_t max_connections;	/* callers' connections at once (http_guard.h) */
	int64_t max_connections_per_peer;
	int64_t request_timeout_ms;	/* a request must arrive whole within this */
	int64_t health_interval_ms;
	int64_t prefill_retries;
	int64_t kv_block_bytes;
	int64_t kv_cache_blocks;
	int64_t kv_load_slack;
	char *kv_events_endpoint;
	char *kv_events_key_format;
	int64_t kv_pool_block_bytes;
	int64_t kv_pool_blocks;
	int64_t kv_pool_min_blocks;
	int kv_pool_skip_prefill;
	int check_config;
	/* From the command line's lists (--prefill h:p h:p ..., --decode ...). */
	char **prefill;
	size_t n_prefill;
	char **decode;
	size_t n_decode;
};

/* A health check in flight: GET /v1/models on its own connection. */
struct px_check {
	struct px_instance *in;
	struct evhttp_connection *conn;
};

struct px_instance {
	struct px *px;
	enum px_role role;
	char *name;		/* "host:port", as given */
	char *host;
	uint16_t port;
	int healthy;		/* in rotation */
	int removed;		/* taken out by the admin; freed when refs reach 0 */
	int checking;		/* a health check is in flight */
	struct px_check *check;
	int refs;		/* the pool's reference plus one per user */
	int64_t inflight;
	uint64_t requests, errors, fails_in_row;
	struct px_hist lat;
	struct evhttp_connection **idle; /* keep-alive connections ready for reuse */
	size_t n_idle;
	uint64_t *kv_slots;	/* kv_aware: direct-mapped set of prefix-block hashes */
	struct px_instance *next;
};

struct px_pool {
	struct px_instance *head;
	size_t n;
	uint64_t rr;		/* round-robin cursor */
};

/* The pool's contents as the KV events tell them (proxy_kvpool.c, proxy_kvsub.c). */
struct px_kvpool {
	uint64_t *ways;		/* n_sets buckets of 4 hashes; 0: free */
	size_t n_sets;
	uint32_t rot;		/* which way a full bucket gives up */
	size_t block;		/* prompt bytes per pool block */
	const char *pre, *suf;	/* --kv_events_key_format around {hash} / {hex} */
	size_t pre_len, suf_len;
	int hex, plain;
	int connected, live;	/* live: the set is used for routing */
	const char *endpoint;
	void *zctx, *sub, *mon;
	struct event *sub_ev, *mon_ev, *tick_ev;
	uint64_t *tmp;		/* one event's hashes */
	uint64_t last_seq;
	uint64_t known;		/* hashes in the set */
	uint64_t messages, events, unmapped, bad, gaps, truncated, disconnects;
	uint64_t lookups, hits, blocks_looked, blocks_matched, skipped;
};

struct px {
	struct px_cfg cfg;
	enum px_policy policy;
	char *admin_key;	/* NULL: admin routes answer 503 */
	struct event_base *base;
	struct evdns_base *dns;
	struct evhttp *http;
	struct mc_http_guard *guard;	/* limits of the callers' connections */
	uint16_t bound_port;
	struct px_pool pool[2];
	struct event *health_ev;
	int64_t inflight;
	uint64_t requests, errors, rejected, client_aborts, retries;
	uint64_t kv_blocks_looked, kv_blocks_matched;
	struct px_kvpool *kvpool;	/* NULL without --kv_events_endpoint */
	struct px_hist lat;	/* whole request, arrival to last byte */
	struct px_hist added;	/* proxy's own time: total minus time waiting on instances */
};

/* proxy_pool.c */
/* Add an instance; name is "host:port".  checked: 0 puts it in rotation at once (start-up
 * lists), 1 keeps it out until its first health check passes.  Returns 0, -EEXIST, -EINVAL
 * (bad form) or -ENOSPC (--max_instances). */
int px_pool_add(struct px *px, enum px_role role, const char *name, int checked);
/* Take an instance out of its pool; requests using it finish.  Returns 0 or -ENOENT. */
int px_pool_remove(struct px *px, enum px_role role, const char *name);
void px_pool_free_all(struct px *px);
/* Pick an instance of role for a request; prompt (may be NULL) feeds kv_aware, and
 * pool_blocks (leading --kv_block_bytes blocks of the prompt in the store's pool, which any
 * instance can load) counts as every instance's own prefix.  Skips the instances in
 * avoid[0..n_avoid).  Returns a referenced instance or NULL when none is in rotation.  Release
 * with px_instance_unref(). */
struct px_instance *px_pool_pick(struct px *px, enum px_role role, const char *prompt,
				 size_t prompt_len, size_t pool_blocks, struct px_instance *const *avoid,
				 size_t n_avoid);
/* FNV-1a over one block of n bytes, chained from the previous block's hash; never 0. */
uint64_t px_block_hash(uint64_t prev, const char *p, size_t n);
void px_instance_unref(struct px_instance *in);
/* An upstream connection to in: a kept-alive one (*reused set to 1) unless fresh is set, or a
 * new one.  NULL on failure. */
struct evhttp_connection *px_conn_get(struct px_instance *in, int fresh, int *reused);
/* Give a connection back after a complete exchange (reuse) or drop it (broken, cancelled);
 * dropping frees it from a deferred event, never inside its own callback. */
void px_conn_put(struct px_instance *in, struct evhttp_connection *c, int reusable);
/* Passive health: a request to in failed to connect or got a 5xx. */
void px_instance_failed(struct px_instance *in, const char *why);
int px_health_start(struct px *px);
/* Check one instance now (after /instances/add). */
void px_health_check(struct px_instance *in);

/* proxy_kvpool.c */
/* Set up the pool set from the flags (px->kvpool).  Returns 0 or -EINVAL (bad key format). */
int px_kvpool_init(struct px *px);
void px_kvpool_free(struct px *px);
void px_kvpool_stored(struct px_kvpool *kp, uint64_t hash);
void px_kvpool_removed(struct px_kvpool *kp, uint64_t hash);
void px_kvpool_clear(struct px_kvpool *kp);
/* The block hash an object key names through --kv_events_key_format: 0, or -1 when it names
 * none. */
int px_kvpool_key_hash(const struct px_kvpool *kp, const char *key, size_t n, uint64_t *out);
/* Leading pool blocks of the prompt the pool holds (0 while the set is not live); the number
 * of whole blocks of the prompt in *n_blocks. */
size_t px_kvpool_match(struct px *px, const char *prompt, size_t len, size_t *n_blocks);

/* proxy_kvsub.c: subscribe to --kv_events_endpoint on px->base.  0, or -1 after a log line. */
int px_kvsub_start(struct px *px);
void px_kvsub_stop(struct px *px);

/* proxy_flow.c: POST /v1/completions and /v1/chat/completions. */
void px_flow_on_completions(struct evhttp_request *req, void *arg);
void px_flow_on_chat(struct evhttp_request *req, void *arg);
/* An OpenAI-style error body {"error": {...}} with status code. */
void px_send_error(struct evhttp_request *req, int code, const char *type, const char *msg);

/* proxy_http.c */
int px_http_start(struct px *px);
double px_now(void);

#endif
