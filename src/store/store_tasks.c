/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store client's side of copy and move tasks (the master's tasks.c): a worker thread that
 * carries out the tasks the master gives this client, the owner of their source replicas.
 *
 * The master says on our Ping that tasks wait (master_client.c kicks the worker); the worker
 * fetches them (FetchTasks), and for each: checks that the source lies in one of our segments,
 * computes its CRC-64 and compares it with the object's checksum when the object has one (a
 * corrupt source is reported with ReportChecksumMismatch, so the master drops that replica and
 * the task is tried from another), writes the bytes to every target through the transfer
 * engine, reads each copy back and checks its CRC-64 (with a checksum), and reports the result
 * (MarkTaskToComplete).  It fetches again until nothing is left.
 *
 * Threads: the worker blocks on RPCs and transfers on its own thread; the kick comes from the
 * loop thread.  Started with the handle when it mounts memory, stopped before the loop.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc64.h"
#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "store/store.h"

#define MC_TASKS_FETCH 16
#define MC_TASKS_MAX_DST 16		/* targets of one task (the master's bound) */
#define MC_TASKS_VERIFY_CHUNK (64u << 20)	/* bytes read back per step */

struct mc_store_tasks {
	struct mc_store *st;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	int kicked;
};

struct mc_task_dst {
	char segment[MC_RPC_MAX_NAME + 1];
	char endpoint[MC_RPC_MAX_NAME + 1];
	uint64_t addr;
};

struct mc_task_job {
	struct mc_uuid id;
	uint8_t type;
	char key[MC_RPC_MAX_KEY + 1];
	uint32_t key_len;
	uint64_t size;
	uint64_t src_addr;
	uint64_t src_replica;
	uint8_t has_cs;
	uint64_t cs;
	uint32_t ndst;
	struct mc_task_dst dst[MC_TASKS_MAX_DST];
};

static void mc_strv_copy(char *dst, size_t n, struct mc_strv s)
{
	size_t k = s.n < n - 1 ? s.n : n - 1;

	if (k)
		memcpy(dst, s.p, k);
	dst[k] = '\0';
}

/* Is [addr, addr + len) inside one of our segments? */
static int mc_tasks_own(struct mc_store *st, uint64_t addr, uint64_t len)
{
	uint32_t i;
	int own = 0;

	pthread_mutex_lock(&st->mu);
	for (i = 0; i < st->nsegs && !own; i++) {
		uint64_t b = (uint64_t)(uintptr_t)st->segs[i].base;

		own = addr >= b && addr + len >= addr && addr + len <= b + st->segs[i].size;
	}
	pthread_mutex_unlock(&st->mu);
	return own;
}

static void mc_tasks_report_corrupt(struct mc_store *st, const struct mc_task_job *j,
				    uint64_t computed)
{
	struct mc_rpc_call call;
	struct mc_rpc_corrupt_replica c = {
		.key = { j->key, j->key_len }, .replica_id = j->src_replica,
		.expected = j->cs, .computed = computed,
	};

	mc_rpc_call_init(&call, MC_OP_REPORT_CHECKSUM_MISMATCH);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_wbuf_u32(&call.req, 1);
	mc_rpc_put_corrupt_replica(&call.req, &c);
	mc_store_call(st, &call);
	mc_rpc_call_fini(&call);
}

/* Read the copy at dst back in chunks and return its CRC-64 in *crc: 0 or an error. */
static int mc_tasks_readback(struct mc_store *st, const struct mc_task_job *j,
			     const struct mc_task_dst *d, uint64_t *crc)
{
	uint64_t off = 0, chunk = j->size < MC_TASKS_VERIFY_CHUNK ? j->size : MC_TASKS_VERIFY_CHUNK;
	uint8_t *buf = malloc(chunk ? chunk : 1);
	struct mc_xfer_req x;
	int rc = 0;

	if (buf == NULL)
		return -ENOMEM;
	*crc = 0;
	while (off < j->size && rc == 0) {
		uint64_t n = j->size - off < chunk ? j->size - off : chunk;

		memset(&x, 0, sizeof(x));
		x.opcode = MC_XFER_READ;
		x.local = buf;
		x.remote = d->addr + off;
		x.len = n;
		if (mc_endpoint_parse(mc_strv_c(d->endpoint), x.host, sizeof(x.host), &x.port))
			rc = MC_ERR_INVALID_PARAMS;
		snprintf(x.segment, sizeof(x.segment), "%s", d->segment);
		if (rc == 0 && mc_store_transfer(st, &x, 1) != 0)
			rc = MC_ERR_TRANSFER_FAIL;
		if (rc == 0)
			*crc = mc_crc64(*crc, buf, n);
		off += n;
	}
	free(buf);
	return rc;
}

/* Carry out one task; the result's code and a sentence into *code / msg. */
static void mc_tasks_run(struct mc_store *st, const struct mc_task_job *j, int *code,
			 char *msg, size_t n)
{
	struct mc_xfer_req *x;
	uint32_t i;
	int failed;

	*code = 0;
	msg[0] = '\0';
	if (j->ndst == 0 || !mc_tasks_own(st, j->src_addr, j->size)) {
		*code = MC_ERR_INVALID_PARAMS;
		snprintf(msg, n, "the source is not in this client's segments");
		return;
	}
	if (j->has_cs && !mc_store_on_device(st, (void *)(uintptr_t)j->src_addr)) {
		uint64_t crc = mc_crc64(0, (const void *)(uintptr_t)j->src_addr, j->size);

		if (crc != j->cs) {
			mc_tasks_report_corrupt(st, j, crc);
			*code = MC_ERR_CHECKSUM_MISMATCH;
			snprintf(msg, n, "the source replica failed its checksum (expected %016" PRIx64
				 ", computed %016" PRIx64 ")", j->cs, crc);
			return;
		}
	}
	x = calloc(j->ndst, sizeof(*x));
	if (x == NULL) {
		*code = -ENOMEM;
		snprintf(msg, n, "out of memory");
		return;
	}
	for (i = 0; i < j->ndst; i++) {
		x[i].opcode = MC_XFER_WRITE;
		x[i].local = (void *)(uintptr_t)j->src_addr;
		x[i].remote = j->dst[i].addr;
		x[i].len = j->size;
		if (mc_endpoint_parse(mc_strv_c(j->dst[i].endpoint), x[i].host, sizeof(x[i].host),
				      &x[i].port)) {
			*code = MC_ERR_INVALID_PARAMS;
			snprintf(msg, n, "target %s has a bad endpoint", j->dst[i].segment);
			free(x);
			return;
		}
		snprintf(x[i].segment, sizeof(x[i].segment), "%s", j->dst[i].segment);
	}
	failed = mc_store_transfer(st, x, j->ndst);
	mc_store_note_transfers(st, x, j->ndst);
	for (i = 0; i < j->ndst && failed; i++)
		if (x[i].status) {
			*code = MC_ERR_TRANSFER_FAIL;
			snprintf(msg, n, "writing to %s failed", j->dst[i].segment);
			break;
		}
	free(x);
	if (*code || !j->has_cs)
		return;
	for (i = 0; i < j->ndst; i++) {
		uint64_t crc;
		int rc = mc_tasks_readback(st, j, &j->dst[i], &crc);

		if (rc) {
			*code = rc;
			snprintf(msg, n, "reading back the copy on %s failed", j->dst[i].segment);
			return;
		}
		if (crc != j->cs) {
			*code = MC_ERR_CHECKSUM_MISMATCH;
			snprintf(msg, n, "the copy on %s failed its checksum (expected %016" PRIx64
				 ", read %016" PRIx64 ")", j->dst[i].segment, j->cs, crc);
			return;
		}
	}
}

static void mc_tasks_complete(struct mc_store *st, const struct mc_task_job *j, int code,
			      const char *msg)
{
	struct mc_rpc_call call;

	mc_rpc_call_init(&call, MC_OP_MARK_TASK_COMPLETE);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_rpc_put_uuid(&call.req, &j->id);
	mc_wbuf_u8(&call.req, code ? 2 : 3);	/* FAILED, SUCCESS */
	mc_wbuf_i32(&call.req, code);
	mc_wbuf_cstr(&call.req, msg);
	if (mc_store_call(st, &call) != 0 || call.status != 0)
		mc_log_warn("task of %.*s: reporting its end failed (%d); the master retries it",
			    (int)(j->key_len > 128 ? 128 : j->key_len), j->key, call.status);
	mc_rpc_call_fini(&call);
}

/* One FetchTasks round: the number of tasks carried out, or <0 when the call failed. */
static int mc_tasks_round(struct mc_store_tasks *w)
{
	struct mc_store *st = w->st;
	struct mc_rpc_call call;
	struct mc_task_job *jobs = NULL;
	struct mc_rbuf r;
	uint32_t n = 0, i, k;
	int rc = -1;

	mc_rpc_call_init(&call, MC_OP_FETCH_TASKS);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_wbuf_u32(&call.req, MC_TASKS_FETCH);
	if (mc_store_call(st, &call) != 0 || call.status != 0)
		goto out;
	mc_rbuf_init(&r, call.resp, call.resp_len);
	n = mc_rbuf_count(&r, MC_TASKS_FETCH, 32);
	jobs = calloc(n ? n : 1, sizeof(*jobs));
	if (jobs == NULL)
		goto out;
	for (i = 0; i < n && !r.err; i++) {
		struct mc_task_job *j = &jobs[i];
		struct mc_strv key;

		mc_rpc_get_uuid(&r, &j->id);
		j->type = mc_rbuf_u8(&r);
		key = mc_rpc_get_strv(&r, MC_RPC_MAX_KEY);
		mc_strv_copy(j->key, sizeof(j->key), key);
		j->key_len = key.n;
		j->size = mc_rbuf_u64(&r);
		j->src_addr = mc_rbuf_u64(&r);
		j->src_replica = mc_rbuf_u64(&r);
		j->has_cs = mc_rbuf_u8(&r);
		j->cs = mc_rbuf_u64(&r);
		j->ndst = mc_rbuf_count(&r, MC_TASKS_MAX_DST, 16);
		for (k = 0; k < j->ndst && !r.err; k++) {
			mc_strv_copy(j->dst[k].segment, sizeof(j->dst[k].segment),
				     mc_rpc_get_strv(&r, MC_RPC_MAX_NAME));
			mc_strv_copy(j->dst[k].endpoint, sizeof(j->dst[k].endpoint),
				     mc_rpc_get_strv(&r, MC_RPC_MAX_NAME));
			j->dst[k].addr = mc_rbuf_u64(&r);
		}
	}
	if (r.err || r.left) {
		mc_log_warn("FetchTasks: malformed answer from the master");
		goto out;
	}
	for (i = 0; i < n; i++) {
		char msg[200];
		int code;

		mc_tasks_run(st, &jobs[i], &code, msg, sizeof(msg));
		if (code)
			mc_log_warn("%s of %.*s failed: %s",
				    jobs[i].type ? "move" : "copy",
				    (int)(jobs[i].key_len > 128 ? 128 : jobs[i].key_len), jobs[i].key,
				    msg);
		mc_tasks_complete(st, &jobs[i], code, msg);
	}
	rc = (int)n;
out:
	free(jobs);
	mc_rpc_call_fini(&call);
	return rc;
}

static void *mc_tasks_main(void *arg)
{
	struct mc_store_tasks *w = arg;

	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		if (!w->kicked) {
			pthread_cond_wait(&w->cv, &w->mu);
			continue;
		}
		w->kicked = 0;
		pthread_mutex_unlock(&w->mu);
		while (mc_tasks_round(w) > 0)
			;
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int mc_store_tasks_start(struct mc_store *st)
{
	struct mc_store_tasks *w = mc_xcalloc(1, sizeof(*w));

	w->st = st;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->thread, NULL, mc_tasks_main, w) != 0) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return MC_ERR_INTERNAL;
	}
	__atomic_store_n(&st->tasksw, w, __ATOMIC_RELEASE);
	return 0;
}

void mc_store_tasks_kick(struct mc_store *st)
{
	struct mc_store_tasks *w = __atomic_load_n(&st->tasksw, __ATOMIC_ACQUIRE);

	if (w == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->kicked = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void mc_store_tasks_stop(struct mc_store *st)
{
	struct mc_store_tasks *w = st->tasksw;

	if (w == NULL || w->stop)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
}

void mc_store_tasks_free(struct mc_store *st)
{
	struct mc_store_tasks *w = st->tasksw;

	if (w == NULL)
		return;
	st->tasksw = NULL;
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

/* ---------------------------------------------------------------- the API's task calls */

int mc_store_create_task(struct mc_store *st, int move, const char *key, const char *source,
			 const char **targets, uint32_t n, struct mc_uuid *id)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	uint32_t i;
	int rc;

	if (key == NULL || (move && (source == NULL || n != 1)))
		return MC_ERR_INVALID_PARAMS;
	mc_rpc_call_init(&call, move ? MC_OP_CREATE_MOVE_TASK : MC_OP_CREATE_COPY_TASK);
	mc_wbuf_cstr(&call.req, key);
	if (move) {
		mc_wbuf_cstr(&call.req, source);
		mc_wbuf_cstr(&call.req, targets[0]);
	} else {
		mc_wbuf_u32(&call.req, n);
		for (i = 0; i < n; i++)
			mc_wbuf_cstr(&call.req, targets[i] ? targets[i] : "");
	}
	rc = mc_store_call(st, &call);
	if (rc == 0 && (rc = call.status) == 0) {
		mc_rbuf_init(&r, call.resp, call.resp_len);
		mc_rpc_get_uuid(&r, id);
		if (r.err || r.left)
			rc = MC_ERR_RPC_FAIL;
	}
	mc_rpc_call_fini(&call);
	return rc;
}

int mc_store_query_task(struct mc_store *st, const struct mc_uuid *id,
			struct mc_store_task_info *info)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	int rc;

	mc_rpc_call_init(&call, MC_OP_QUERY_TASK);
	mc_rpc_put_uuid(&call.req, id);
	rc = mc_store_call(st, &call);
	if (rc == 0 && (rc = call.status) == 0) {
		struct mc_strv msg;

		mc_rbuf_init(&r, call.resp, call.resp_len);
		mc_rpc_get_uuid(&r, &info->id);
		info->type = mc_rbuf_u8(&r);
		info->status = mc_rbuf_u8(&r);
		info->created_ms = mc_rbuf_i64(&r);
		info->updated_ms = mc_rbuf_i64(&r);
		mc_rpc_get_uuid(&r, &info->assigned);
		msg = mc_rpc_get_strv(&r, 4096);
		if (r.err || r.left)
			rc = MC_ERR_RPC_FAIL;
		else
			mc_strv_copy(info->message, sizeof(info->message), msg);
	}
	mc_rpc_call_fini(&call);
	return rc;
}
