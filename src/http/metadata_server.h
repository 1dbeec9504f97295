/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_METADATA_SERVER_H
#define MC_METADATA_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

/*
 * The transfer engine's HTTP metadata key-value service (reference §2), embeddable in any
 * libevent loop: mooncake_http_metadata_server runs it alone, mooncake_master on its own loop
 * with --enable_http_metadata_server.
 *
 *   GET    /metadata?key=K   200 value (application/json) | 404 "metadata not found"
 *   PUT    /metadata?key=K   200 "metadata updated"; a key containing "rpc_meta" that exists:
 *                            same body 200 "metadata unchanged", else 400 "Duplicate rpc_meta
 *                            key not allowed"
 *   DELETE /metadata?key=K   200 "metadata deleted" | 404 "metadata not found"
 *   GET    /health           200 "OK"
 * A missing or empty key is 400 "Missing key parameter"; other methods 405; sizes are bounded.
 * Single-threaded: the loop's thread.
 */
struct mc_meta_server;

struct mc_meta_server_opts {
	size_t max_key_bytes;	/* default 1024 */
	size_t max_value_bytes;	/* default 16 MiB */
	size_t max_keys;	/* default 1,000,000 */
};

/* Listen on host:port (port 0: any).  Returns NULL with *err = -errno on failure. */
struct mc_meta_server *mc_meta_server_new(struct event_base *base, const char *host,
					  uint16_t port, const struct mc_meta_server_opts *opts,
					  int *err);
uint16_t mc_meta_server_port(const struct mc_meta_server *s);
void mc_meta_server_free(struct mc_meta_server *s);
/* In-process access (the master's cleanup of a dead client's entries). */
int mc_meta_server_delete(struct mc_meta_server *s, const char *key);
const char *mc_meta_server_get(struct mc_meta_server *s, const char *key, size_t *len);
size_t mc_meta_server_count(const struct mc_meta_server *s);

#endif
