/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the HTTP metadata service (src/http/metadata_server.c) behind libevent's evhttp,
 * as mooncake_http_metadata_server and the master run it.  The input is what a client writes on
 * its port: one or more HTTP requests.  Each input gets a new server on 127.0.0.1 (small bounds,
 * so that the limits are reached: keys of 64 bytes, values of 4 KiB, 8 keys) holding two
 * entries, one of them an rpc_meta key; the input is sent on one TCP connection and the replies
 * read until the server has nothing more to say, then the connection is reset (no TIME_WAIT
 * left behind).  Afterwards the entries must still be readable in-process.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "http/metadata_server.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct event_base *base;
	struct mc_meta_server_opts opts = {
		.max_key_bytes = 64, .max_value_bytes = 4096, .max_keys = 8,
		.max_header_bytes = 8192,
	};
	struct mc_meta_server *s;
	size_t len = 0;
	int err = 0, fd;

	if (base == NULL) {
		fuzz_quiet_logs();
		base = event_base_new();
		if (base == NULL)
			abort();
	}
	s = mc_meta_server_new(base, "127.0.0.1", 0, &opts, &err);
	if (s == NULL) {
		errno = -err;
		fuzz_die("mc_meta_server_new");
	}
	if (mc_meta_server_put(s, "mooncake/rpc_meta/seg", "{\"rpc_port\":1}", 14) != 0 ||
	    mc_meta_server_put(s, "mooncake/ram/seg", "{}", 2) != 0)
		fuzz_die("mc_meta_server_put");
	fd = fuzz_tcp_connect(mc_meta_server_port(s));
	if (fd < 0)
		fuzz_die("connect");
	fuzz_exchange(base, fd, data, size, 0, 2000);
	fuzz_tcp_close(fd);
	event_base_loop(base, EVLOOP_NONBLOCK);
	if (mc_meta_server_count(s) > opts.max_keys)
		abort();
	{
		const char *v = mc_meta_server_get(s, "mooncake/ram/seg", &len);

		if (v != NULL && v[len] != '\0')
			abort();
	}
	mc_meta_server_free(s);
	event_base_loop(base, EVLOOP_NONBLOCK);
	return 0;
}
