/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy_loadgen: the two halves of mooncake_proxy's benchmark (scripts/bench_proxy.sh), each on
 * one libevent loop so that neither is the slower part of what is measured.
 *
 *   proxy_loadgen serve PREFILL_PORT DECODE_PORT [TOKENS]
 *       fake vLLM instances on 127.0.0.1: the prefill port answers one JSON token with
 *       kv_transfer_params, the decode port streams TOKENS server-sent events then [DONE].
 *   proxy_loadgen load HOST:PORT STREAMS SECONDS [PREFILL_HOST:PORT]
 *       STREAMS callers, each sending streamed completions one after the other for SECONDS
 *       through HOST:PORT; with PREFILL_HOST:PORT each caller does the proxy's work itself
 *       (prefill there, then decode at HOST:PORT), which is the baseline without a proxy.
 *       Prints "requests N errors N rps R p50_us P p99_us P".
 * Not installed; single-threaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

static double lg_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- serve ---- */
static int lg_tokens = 8;

static void lg_on_prefill(struct evhttp_request *req, void *arg)
{
	static const char body[] =
		"{\"id\":\"x\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":"
		"\"a\"}],\"kv_transfer_params\":{\"remote_engine_id\":\"e\",\"remote_block_ids\":"
		"[1],\"remote_host\":\"127.0.0.1\",\"remote_port\":1,\"do_remote_prefill\":true,"
		"\"do_remote_decode\":false}}";
	struct evbuffer *b = evbuffer_new();

	(void)arg;
	evbuffer_add(b, body, sizeof(body) - 1);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static void lg_on_decode(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();
	int i;

	(void)arg;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/event-stream");
	evhttp_send_reply_start(req, 200, "OK");
	for (i = 0; i < lg_tokens; i++) {
		evbuffer_add_printf(b, "data: {\"id\":\"x\",\"object\":\"text_completion\","
				       "\"choices\":[{\"index\":0,\"text\":\"tok%d \"}]}\n\n", i);
		evhttp_send_reply_chunk(req, b);
	}
	evbuffer_add_printf(b, "data: [DONE]\n\n");
	evhttp_send_reply_chunk(req, b);
	evhttp_send_reply_end(req);
	evbuffer_free(b);
}

static void lg_on_models(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();

	(void)arg;
	evbuffer_add_printf(b, "{\"object\":\"list\",\"data\":[{\"id\":\"fake-model\"}]}");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static int lg_serve(int argc, char **argv)
{
	struct event_base *base = event_base_new();
	struct evhttp *hp = evhttp_new(base), *hd = evhttp_new(base);

	if (argc > 4)
		lg_tokens = atoi(argv[4]);
	evhttp_set_gencb(hp, lg_on_prefill, NULL);
	evhttp_set_gencb(hd, lg_on_decode, NULL);
	evhttp_set_cb(hp, "/v1/models", lg_on_models, NULL);
	evhttp_set_cb(hd, "/v1/models", lg_on_models, NULL);
	if (evhttp_bind_socket(hp, "127.0.0.1", (ev_uint16_t)atoi(argv[2])) ||
	    evhttp_bind_socket(hd, "127.0.0.1", (ev_uint16_t)atoi(argv[3]))) {
		fprintf(stderr, "proxy_loadgen: cannot listen\n");
		return 1;
	}
	printf("serving\n");
	fflush(stdout);
	event_base_dispatch(base);
	return 0;
}

/* ---- load ---- */
struct lg_caller {
	struct event_base *base;
	struct evhttp_connection *target, *prefill;
	double t0;
};

static double *lg_lat;
static size_t lg_n, lg_cap, lg_errors;
static int lg_active;
static double lg_end;
static const char lg_body[] = "{\"model\":\"fake-model\",\"prompt\":\"San Francisco is a\","
			      "\"max_tokens\":8,\"stream\":true}";

static void lg_send(struct lg_caller *c);

/* The caller's next request, or its end once the time is up (the last one stops the loop). */
static void lg_next(struct lg_caller *c)
{
	if (lg_now() < lg_end)
		lg_send(c);
	else if (--lg_active == 0)
		event_base_loopbreak(c->base);
}

static void lg_on_done(struct evhttp_request *req, void *arg)
{
	struct lg_caller *c = arg;

	if (req == NULL || evhttp_request_get_response_code(req) != 200) {
		lg_errors++;
	} else {
		if (lg_n == lg_cap) {
			lg_cap = lg_cap ? 2 * lg_cap : 65536;
			lg_lat = realloc(lg_lat, lg_cap * sizeof(*lg_lat));
		}
		lg_lat[lg_n++] = lg_now() - c->t0;
	}
	lg_next(c);
}

static void lg_post(struct evhttp_connection *conn, const char *body, size_t len,
		    void (*cb)(struct evhttp_request *, void *), void *arg)
{
	struct evhttp_request *r = evhttp_request_new(cb, arg);

	evhttp_add_header(evhttp_request_get_output_headers(r), "Host", "127.0.0.1");
	evhttp_add_header(evhttp_request_get_output_headers(r), "Content-Type",
			  "application/json");
	evbuffer_add(evhttp_request_get_output_buffer(r), body, len);
	evhttp_make_request(conn, r, EVHTTP_REQ_POST, "/v1/completions");
}

static void lg_on_prefill_done(struct evhttp_request *req, void *arg)
{
	struct lg_caller *c = arg;

	if (req == NULL || evhttp_request_get_response_code(req) != 200) {
		lg_errors++;
		lg_next(c);
		return;
	}
	lg_post(c->target, lg_body, sizeof(lg_body) - 1, lg_on_done, c);
}

static void lg_send(struct lg_caller *c)
{
	c->t0 = lg_now();
	if (c->prefill)
		lg_post(c->prefill, lg_body, sizeof(lg_body) - 1, lg_on_prefill_done, c);
	else
		lg_post(c->target, lg_body, sizeof(lg_body) - 1, lg_on_done, c);
}

static int lg_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int lg_load(int argc, char **argv)
{
	struct event_base *base = event_base_new();
	int streams = atoi(argv[3]), i;
	double secs = atof(argv[4]), t0;
	struct lg_caller *cs = calloc((size_t)streams, sizeof(*cs));
	char host[256];
	int port, pport = 0;
	char phost[256] = "";

	if (sscanf(argv[2], "%255[^:]:%d", host, &port) != 2 ||
	    (argc > 5 && sscanf(argv[5], "%255[^:]:%d", phost, &pport) != 2)) {
		fprintf(stderr, "proxy_loadgen: HOST:PORT expected\n");
		return 2;
	}
	t0 = lg_now();
	lg_end = t0 + secs;
	lg_active = streams;
	for (i = 0; i < streams; i++) {
		cs[i].base = base;
		cs[i].target = evhttp_connection_base_new(base, NULL, host, (ev_uint16_t)port);
		if (pport)
			cs[i].prefill = evhttp_connection_base_new(base, NULL, phost,
								   (ev_uint16_t)pport);
		lg_send(&cs[i]);
	}
	event_base_dispatch(base);
	t0 = lg_now() - t0;
	qsort(lg_lat, lg_n, sizeof(*lg_lat), lg_cmp);
	printf("requests %zu errors %zu rps %.0f p50_us %.1f p99_us %.1f\n", lg_n, lg_errors,
	       (double)lg_n / t0, lg_n ? lg_lat[lg_n / 2] * 1e6 : 0,
	       lg_n ? lg_lat[(size_t)((double)lg_n * 0.99)] * 1e6 : 0);
	for (i = 0; i < streams; i++) {
		evhttp_connection_free(cs[i].target);
		if (cs[i].prefill)
			evhttp_connection_free(cs[i].prefill);
	}
	free(cs);
	free(lg_lat);
	event_base_free(base);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "serve"))
		return lg_serve(argc, argv);
	if (argc >= 5 && !strcmp(argv[1], "load"))
		return lg_load(argc, argv);
	fprintf(stderr, "usage: proxy_loadgen serve PREFILL_PORT DECODE_PORT [TOKENS]\n"
			"       proxy_loadgen load HOST:PORT STREAMS SECONDS [PREFILL_HOST:PORT]\n");
	return 2;
}
