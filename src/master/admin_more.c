/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin HTTP routes, every area's, registered on the admin server (admin_http.c) from one
 * place: metrics, objects, segments and the master's state (admin_metrics.c, admin_keys.c,
 * admin_segments.c, admin_status.c), and those of the operator features: drain jobs
 * (drain_http.c), tenant quotas (tenants_http.c) and KV events; with the metrics of the latter.
 * Single-threaded: the master's reactor thread.
 */
#include <inttypes.h>

#include <event2/buffer.h>

#include "master/admin_http.h"
#include "master/drain.h"
#include "master/dyn_replication.h"
#include "master/kv_events.h"
#include "master/tasks.h"
#include "master/tenants.h"

/* GET /kv_events/status: upstream's publisher figures. */
static void mc_kv_status(struct evhttp_request *req, void *arg)
{
	struct mc_kv_stats s;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_send_error(req, 405, "Method not allowed");
		return;
	}
	mc_kv_events_stats(arg, &s);
	mc_admin_send_json(req, 200, json_pack("{sbsIsIsIsI}", "enabled", s.enabled,
					       "published_batches", (json_int_t)s.published_batches,
					       "published_events", (json_int_t)s.published_events,
					       "dropped_events", (json_int_t)s.dropped_events,
					       "skipped_unparsed_keys",
					       (json_int_t)s.skipped_unparsed_keys));
}

int mc_admin_more_routes(struct mc_master *m)
{
	return mc_admin_metrics_routes(m) || mc_admin_keys_routes(m) ||
	       mc_admin_segments_routes(m) || mc_admin_status_routes(m) ||
	       mc_drain_http_routes(m) || mc_tenant_http_routes(m) ||
	       mc_admin_route(m, "/kv_events/status", mc_kv_status, m);
}

/* One gauge per label value. */
static void mc_more_gauge(struct evbuffer *b, const char *name, const char *help,
			  const char *label, const char *const *values, const uint64_t *v, int n)
{
	int i;

	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (i = 0; i < n; i++)
		evbuffer_add_printf(b, "%s{%s=\"%s\"} %" PRIu64 "\n", name, label, values[i], v[i]);
}

void mc_admin_more_metrics(struct mc_master *m, struct evbuffer *b)
{
	static const char *const task_states[] = { "PENDING", "PROCESSING", "FAILED", "SUCCESS" };
	static const char *const job_states[] = { "CREATED", "PLANNING", "RUNNING", "SUCCEEDED",
						  "FAILED", "CANCELED" };
	uint64_t tasks[4], jobs[6];

	mc_tasks_counts(m, tasks);
	mc_more_gauge(b, "master_tasks", "Copy and move tasks kept, by status", "status",
		      task_states, tasks, 4);
	mc_drain_counts(m, jobs);
	mc_more_gauge(b, "master_drain_jobs", "Drain jobs kept, by status", "status", job_states,
		      jobs, 6);
	mc_tenant_metrics(m, b);
	{
		uint64_t hot, dtasks, cooling;

		mc_dynrep_counts(m, &hot, &dtasks, &cooling);
		evbuffer_add_printf(b, "# HELP master_dynamic_replication_hot_keys_total Keys read "
				       "past the admission threshold within a heat window\n"
				       "# TYPE master_dynamic_replication_hot_keys_total counter\n"
				       "master_dynamic_replication_hot_keys_total %" PRIu64 "\n"
				       "# HELP master_dynamic_replication_tasks_total Copy tasks made "
				       "for hot keys (enforce)\n"
				       "# TYPE master_dynamic_replication_tasks_total counter\n"
				       "master_dynamic_replication_tasks_total %" PRIu64 "\n"
				       "# HELP master_dynamic_replication_cooldown_skips_total Hot "
				       "keys given no replica for their cooldown (one after an action, "
				       "one after their dynamic replica went)\n"
				       "# TYPE master_dynamic_replication_cooldown_skips_total counter\n"
				       "master_dynamic_replication_cooldown_skips_total %" PRIu64 "\n",
				    hot, dtasks, cooling);
	}
	{
		struct mc_kv_stats s;

		mc_kv_events_stats(m, &s);
		if (s.enabled)
			evbuffer_add_printf(b,
					    "# HELP master_kv_events_published_total KV events sent\n"
					    "# TYPE master_kv_events_published_total counter\n"
					    "master_kv_events_published_total %" PRIu64 "\n"
					    "# HELP master_kv_events_dropped_total KV events dropped "
					    "(queue full or send failed)\n"
					    "# TYPE master_kv_events_dropped_total counter\n"
					    "master_kv_events_dropped_total %" PRIu64 "\n"
					    "# HELP master_kv_events_queued KV events waiting for the "
					    "publisher\n# TYPE master_kv_events_queued gauge\n"
					    "master_kv_events_queued %" PRIu64 "\n",
					    s.published_events, s.dropped_events, s.queued);
	}
}
