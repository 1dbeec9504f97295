/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster secret on an evhttp server: the request's method, URI and body are checked against
 * its X-Mooncake-Auth signature or its bearer token (common/auth.c does the arithmetic); a
 * request that fails gets 401 and is counted.  Runs on the server's loop thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "common/auth.h"
#include "http/http_auth.h"

static const char *mc_http_method_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	case EVHTTP_REQ_TRACE: return "TRACE";
	case EVHTTP_REQ_CONNECT: return "CONNECT";
	case EVHTTP_REQ_PATCH: return "PATCH";
	}
	return "?";
}

int mc_http_auth_check(struct mc_auth *a, struct evhttp_request *req, const char *what)
{
	struct evkeyvalq *h;
	struct evbuffer *in, *out;
	struct evhttp_connection *conn;
	const char *why = NULL;
	const void *body = NULL;
	char peer[80] = "?";
	size_t len;

	if (a == NULL)
		return 1;
	h = evhttp_request_get_input_headers(req);
	in = evhttp_request_get_input_buffer(req);
	len = in ? evbuffer_get_length(in) : 0;
	if (len)
		body = evbuffer_pullup(in, -1);
	if (mc_auth_http_verify(a, mc_http_method_name(evhttp_request_get_command(req)),
				evhttp_request_get_uri(req), body, len,
				evhttp_find_header(h, MC_AUTH_HTTP_HEADER),
				evhttp_find_header(h, "Authorization"), (int64_t)time(NULL),
				&why) == 0)
		return 1;
	conn = evhttp_request_get_connection(req);
	if (conn) {
		char *addr = NULL;
		ev_uint16_t port = 0;

		evhttp_connection_get_peer(conn, &addr, &port);
		snprintf(peer, sizeof(peer), "%s:%u", addr ? addr : "?", (unsigned)port);
	}
	mc_auth_refused(a, what, peer, why);
	out = evbuffer_new();
	if (out)
		evbuffer_add_printf(out, "{\"error\":\"unauthorized\",\"message\":\"%s\"}\n", why);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
			  "Bearer realm=\"mooncake\"");
	evhttp_send_reply(req, 401, "Unauthorized", out);
	if (out)
		evbuffer_free(out);
	return 0;
}
