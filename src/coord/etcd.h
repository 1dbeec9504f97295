/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_COORD_ETCD_H
#define MC_COORD_ETCD_H

/*
 * An asynchronous client of etcd's v3 JSON gateway (POST /v3/kv/range, /v3/kv/txn,
 * /v3/lease/grant, /v3/lease/keepalive, /v3/watch ...) for a libevent loop: libcurl's multi
 * interface driven by the loop's events, so no call ever blocks the loop.
 *
 * One struct mc_etcd per endpoint list ("h1:2379;h2:2379", "," also separates, an "etcd://" or
 * "http://" prefix is accepted).  A call goes to the endpoint that answered last; when it cannot
 * reach it, or etcd answers 5xx (no leader, timeout inside etcd), the call moves on to the next
 * endpoint, round after round (100 ms apart), until its time is up.  Every request the master
 * sends is safe to repeat (conditional transactions, idempotent puts and keep-alives).
 *
 * Callbacks run on the loop, never inside libcurl; a callback may start and cancel calls, but must
 * not free the struct mc_etcd.  Keys and values travel base64-encoded, 64-bit numbers as strings:
 * the helpers below convert.  Replies are untrusted: sizes are bounded (64 MiB per answer) and
 * fields checked by the callers.
 */
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <jansson.h>

struct mc_etcd;
struct mc_etcd_call;

/* How a call ended.  rc 0: reply is the JSON object etcd answered (borrowed for the duration of
 * the callback).  rc < 0: -ETIMEDOUT (no endpoint answered in time), -EIO (a watch stream broke),
 * -ENOMEM, -EPROTO (an answer that is not JSON), or MC_ERR_ETCD_OPERATION_ERROR (etcd refused the
 * request; reply holds its error object when it sent one, else NULL).
 * For a watch: one call per message of the stream with rc 0 and reply its "result" object, then
 * one with rc < 0 when the stream ends (not after mc_etcd_cancel). */
typedef void (*mc_etcd_fn)(void *arg, int rc, json_t *reply);

/* A client on base for endpoints.  NULL with a message in err when the list is empty or
 * malformed, or this build has no libcurl. */
struct mc_etcd *mc_etcd_new(struct event_base *base, const char *endpoints, char *err, size_t n);
/* Cancel every call (no callbacks) and free.  NULL is a no-op. */
void mc_etcd_free(struct mc_etcd *e);

/* POST body (serialized at once; the caller keeps its reference) to path ("/v3/kv/range"); fn is
 * called once, within about timeout_ms.  Returns the call (valid until fn runs or it is
 * cancelled), or NULL when out of memory (fn is not called). */
struct mc_etcd_call *mc_etcd_post(struct mc_etcd *e, const char *path, json_t *body,
				  int64_t timeout_ms, mc_etcd_fn fn, void *arg);
/* Open a watch stream with {"create_request": create}; see mc_etcd_fn.  The stream uses TCP
 * keep-alives, so a vanished endpoint ends it within about 10 s; callers poll as well. */
struct mc_etcd_call *mc_etcd_watch(struct mc_etcd *e, json_t *create, mc_etcd_fn fn, void *arg);
/* Forget the call: its callback will not run.  NULL is a no-op.  Safe inside callbacks. */
void mc_etcd_cancel(struct mc_etcd_call *c);
/* The endpoint calls go to now ("host:port"). */
const char *mc_etcd_endpoint(const struct mc_etcd *e);

/* Test hook (etcd_fault.c), not used in production: when the environment variable
 * MC_TEST_ETCD_FAULT names a fault point ("txn": transactions, "range": reads) as the first
 * client is created, those calls fail without being sent (-ETIMEDOUT).  "txn:N" fails the next
 * N; with MC_TEST_ETCD_FAULT_FILE=path they fail while that file exists.  mc_etcd_fault_install reads
 * the environment once and returns 1 when the hook is on; mc_etcd_fault_fires(path) says
 * whether a call to path that starts now fails (and counts it). */
int mc_etcd_fault_install(void);
int mc_etcd_fault_fires(const char *path);

/* JSON helpers for the gateway's encoding. */
/* A JSON string holding the base64 of n bytes at s (NULL when out of memory). */
json_t *mc_etcd_b64(const void *s, size_t n);
json_t *mc_etcd_b64s(const char *s);
/* The 64-bit integer field name of obj (a decimal string or a number); 0 when absent or
 * malformed. */
int64_t mc_etcd_i64(const json_t *obj, const char *name);
/* A JSON string holding the decimal of v, as the gateway takes 64-bit numbers. */
json_t *mc_etcd_num(int64_t v);
/* The base64 field name of obj decoded into a malloc'd buffer with a NUL after the *len bytes;
 * NULL when absent or not base64. */
char *mc_etcd_bytes(const json_t *obj, const char *name, size_t *len);
/* The first key after every key starting with prefix, for range_end ("/a/" -> "/a0"). */
void mc_etcd_prefix_end(const char *prefix, char *out, size_t n);

#endif
