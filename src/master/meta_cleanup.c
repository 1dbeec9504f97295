/* SPDX-License-Identifier: Apache-2.0 */
/*
 * With --enable_metadata_cleanup_on_timeout, a dead client's transfer-engine metadata entries
 * (mooncake/[<cluster>/]ram/<segment> and mooncake/[<cluster>/]rpc_meta/<segment>) are deleted,
 * so peers stop finding a segment that is gone.  In-process when the master embeds the HTTP
 * metadata service; otherwise an asynchronous HTTP DELETE to the http:// service named by
 * MOONCAKE_TE_META_DATA_SERVER (never blocking the loop).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "common/log.h"
#include "common/meta_auth.h"
#include "http/metadata_server.h"
#include "master/master.h"

static void mc_meta_key(char *out, size_t n, const char *kind, const char *seg)
{
	const char *cid = getenv("MC_METADATA_CLUSTER_ID");

	if (cid && *cid)
		snprintf(out, n, "mooncake/%s%s%s/%s", cid, cid[strlen(cid) - 1] == '/' ? "" : "/",
			 kind, seg);
	else
		snprintf(out, n, "mooncake/%s/%s", kind, seg);
}

static void mc_meta_on_delete_done(struct evhttp_request *req, void *arg)
{
	struct evhttp_connection *conn = arg;

	if (req == NULL || evhttp_request_get_response_code(req) >= 500)
		mc_log_warn("metadata cleanup: DELETE failed");
	(void)conn;
}

static void mc_meta_http_delete(struct mc_master *m, const char *url, const char *key)
{
	struct evhttp_uri *u = evhttp_uri_parse(url);
	char *esc, path[2048];
	struct evhttp_request *req;
	const char *host;
	int port;

	if (u == NULL || (host = evhttp_uri_get_host(u)) == NULL) {
		if (u)
			evhttp_uri_free(u);
		return;
	}
	port = evhttp_uri_get_port(u);
	if (m->meta_conn == NULL)
		m->meta_conn = evhttp_connection_base_new(m->base, NULL, host,
							  (uint16_t)(port > 0 ? port : 80));
	esc = evhttp_encode_uri(key);
	snprintf(path, sizeof(path), "%s?key=%s",
		 evhttp_uri_get_path(u) && *evhttp_uri_get_path(u) ? evhttp_uri_get_path(u)
								    : "/metadata",
		 esc ? esc : key);
	free(esc);
	req = evhttp_request_new(mc_meta_on_delete_done, m->meta_conn);
	if (req && m->meta_conn) {
		const char *token = mc_meta_auth_token();
		char *auth = token ? mc_meta_auth_header(token) : NULL;

		evhttp_add_header(evhttp_request_get_output_headers(req), "Host", host);
		if (auth)
			evhttp_add_header(evhttp_request_get_output_headers(req), "Authorization",
					  auth);
		free(auth);
		evhttp_make_request(m->meta_conn, req, EVHTTP_REQ_DELETE, path);
	}
	evhttp_uri_free(u);
}

void mc_master_meta_cleanup(struct mc_master *m, const char *segment_name)
{
	static const char *const kinds[] = { "ram", "rpc_meta" };
	const char *url = getenv("MOONCAKE_TE_META_DATA_SERVER");
	char key[1024];
	size_t i;

	if (!m->cfg.enable_metadata_cleanup_on_timeout)
		return;
	for (i = 0; i < 2; i++) {
		mc_meta_key(key, sizeof(key), kinds[i], segment_name);
		if (m->meta)
			mc_meta_server_delete(m->meta, key);
		else if (url && !strncmp(url, "http://", 7))
			mc_meta_http_delete(m, url, key);
		mc_log_info("metadata cleanup: %s", key);
	}
}
