/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_HTTP_AUTH_H
#define MC_HTTP_AUTH_H

/*
 * The cluster secret on an evhttp server (admin HTTP, the metadata service): one check that a
 * request handler calls before it changes anything.
 */
#include <event2/http.h>

struct mc_auth;

/* Whether req carries valid credentials for a (X-Mooncake-Auth signature or the bearer token
 * derived from the secret; see common/auth.h).  a NULL (an open cluster): 1.  Otherwise 1, or 0
 * after answering 401 with a JSON error, logging the peer once and counting it in a's failure
 * counter.  what names the service in the log line. */
int mc_http_auth_check(struct mc_auth *a, struct evhttp_request *req, const char *what);

#endif
