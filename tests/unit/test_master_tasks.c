/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Copy and move tasks in the master (src/master/tasks.c), driven through its RPC handlers on a
 * fake clock: hand-out to the owner only, completion, a failed attempt retried and failing for
 * good after max_retry_attempts, the processing and pending timeouts, a completion by another
 * client refused, an object removed under a task, and the object's protection meanwhile.
 */
#include "tap.h"
#include "master_harness.h"
#include "master/dyn_replication.h"

static struct mc_uuid owner, other, seg_a, seg_b;

/* Mount a segment named name for client cid (and bring the client in good standing). */
static int mount_as(const struct mc_uuid *cid, const struct mc_uuid *sid, const char *name,
		    uint64_t base)
{
	struct mc_wbuf b;
	struct mc_rpc_segment s = {
		.id = *sid, .name = mc_strv_c(name), .base = base, .size = 64u << 20,
		.endpoint = mc_strv_c(name), .protocol = mc_strv_c("tcp"),
	};
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, cid);
	mc_wbuf_u32(&b, 1);
	mc_rpc_put_segment(&b, &s);
	st = call(MC_OP_REMOUNT_SEGMENT, &b);
	mc_wbuf_fini(&b);
	return st;
}

static int create_copy(const char *key, const char *target, struct mc_uuid *id)
{
	struct mc_wbuf b;
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_strv(&b, mc_strv_c(key));
	mc_wbuf_u32(&b, 1);
	mc_rpc_put_strv(&b, mc_strv_c(target));
	st = call(MC_OP_CREATE_COPY_TASK, &b);
	mc_wbuf_fini(&b);
	if (st == 0)
		mc_rpc_get_uuid(&resp, id);
	return st;
}

/* FetchTasks of cid: how many tasks, the first one's id in *id. */
static int fetch(const struct mc_uuid *cid, struct mc_uuid *id)
{
	struct mc_wbuf b;
	uint32_t n;
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, cid);
	mc_wbuf_u32(&b, 16);
	st = call(MC_OP_FETCH_TASKS, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	n = mc_rbuf_u32(&resp);
	if (n && id)
		mc_rpc_get_uuid(&resp, id);
	return (int)n;
}

static int complete(const struct mc_uuid *cid, const struct mc_uuid *id, int ok)
{
	struct mc_wbuf b;
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, cid);
	mc_rpc_put_uuid(&b, id);
	mc_wbuf_u8(&b, ok ? MC_TASK_SUCCESS : MC_TASK_FAILED);
	mc_wbuf_i32(&b, ok ? 0 : MC_ERR_TRANSFER_FAIL);
	mc_rpc_put_strv(&b, mc_strv_c(ok ? "" : "test failure"));
	st = call(MC_OP_MARK_TASK_COMPLETE, &b);
	mc_wbuf_fini(&b);
	return st;
}

/* QueryTask: the status, or the error code. */
static int status_of(const struct mc_uuid *id)
{
	struct mc_wbuf b;
	struct mc_uuid got;
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, id);
	st = call(MC_OP_QUERY_TASK, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	mc_rpc_get_uuid(&resp, &got);
	mc_rbuf_u8(&resp);
	return mc_rbuf_u8(&resp);
}

static int remove_key(const char *key)
{
	struct mc_wbuf b;
	int st;

	mc_wbuf_init(&b);
	mc_wbuf_u8(&b, 1);	/* force */
	put_keys(&b, &key, 1);
	st = call(MC_OP_REMOVE, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	mc_rbuf_u32(&resp);
	return mc_rbuf_i32(&resp);
}

static uint32_t replicas(const char *key)
{
	uint32_t n = 0;
	uint64_t addr;

	return get_list(key, &n, &addr) == 0 ? n : 0;
}

/* Two reads of key in a fresh heat window (threshold 1/s over 1 s: the second makes it hot). */
static void hot_reads(const char *key)
{
	fake_now += 1100;
	mc_dynrep_tick(&M);
	replicas(key);
	replicas(key);
}

static uint64_t dyn_tasks(uint64_t *cooling)
{
	uint64_t hot, tasks;

	mc_dynrep_counts(&M, &hot, &tasks, cooling);
	return tasks;
}

/* Hand the owner's pending task out and complete it. */
static int run_task(void)
{
	struct mc_uuid id;

	return fetch(&owner, &id) == 1 && complete(&owner, &id, 1) == 0;
}

/* Dynamic replication's cooldowns, as upstream's: no new replica for a key 30 s after one was
 * made, nor 60 s after its dynamic replica went. */
static void dynrep_cooldowns(void)
{
	struct mc_uuid third, seg_c, seg_d, saved = client_id;
	struct mc_rpc_config cfg;
	uint64_t cooling;

	M.cfg.dynrep.dynamic_replication_mode = (char *)"enforce";
	M.cfg.dynrep.dynamic_replication_heat_window_seconds = 1;
	M.cfg.dynrep.dynamic_replication_admission_qps_threshold = 1;
	M.cfg.dynrep.dynamic_replication_max_memory_replicas = 3;
	mc_dynrep_init(&M);
	mc_uuid_generate(&third);
	mc_uuid_generate(&seg_c);
	mc_uuid_generate(&seg_d);
	ok(mount_as(&third, &seg_c, "127.0.0.1:17003", 3u << 30) == 0, "a third client");
	mc_rpc_config_default(&cfg);
	cfg.preferred_segment = mc_strv_c("127.0.0.1:17001");
	ok(put_start_cfg(MC_OP_PUT_START, "hot", 4096, &cfg, NULL, NULL) == 0 &&
		   put_finish(MC_OP_PUT_END, "hot") == 0, "a hot key on the owner's segment");
	hot_reads("hot");
	ok(dyn_tasks(&cooling) == 1 && run_task() && replicas("hot") == 2,
	   "read past the threshold: a dynamic replica");
	hot_reads("hot");
	hot_reads("hot");
	ok(dyn_tasks(&cooling) == 1 && cooling == 2 && replicas("hot") == 2,
	   "hot in the next windows too, but no replica within the action cooldown");
	fake_now += 30000;
	hot_reads("hot");
	ok(dyn_tasks(&cooling) == 2 && run_task() && replicas("hot") == 3,
	   "after 30 s a third replica");
	client_id = third;
	ok(mc_segment_find(&M, &seg_c) != NULL, "the third client's segment is mounted");
	{
		struct mc_wbuf b;

		mc_wbuf_init(&b);
		mc_rpc_put_uuid(&b, &third);
		mc_rpc_put_uuid(&b, &seg_c);
		is(call(MC_OP_UNMOUNT_SEGMENT, &b), 0, "which it unmounts");
		mc_wbuf_fini(&b);
	}
	client_id = saved;
	ok(mount_as(&third, &seg_d, "127.0.0.1:17004", 4ull << 30) == 0 && replicas("hot") == 2,
	   "a replica went with it; the client mounts another segment");
	fake_now += 31000;
	hot_reads("hot");
	ok(dyn_tasks(&cooling) == 2 && cooling == 3,
	   "hot again after the action cooldown: none, its dynamic replica went");
	fake_now += 57000;
	hot_reads("hot");
	ok(dyn_tasks(&cooling) == 2, "none within the 60 s recreate cooldown");
	fake_now += 2000;
	hot_reads("hot");
	ok(dyn_tasks(&cooling) == 3 && run_task() && replicas("hot") == 3,
	   "after it, a replica again");
	mc_dynrep_fini(&M);
}

int main(void)
{
	struct mc_uuid id, got;
	struct mc_rpc_config cfg;

	master_init(&M, NULL);
	M.cfg.tasks.max_retry_attempts = 2;
	M.cfg.tasks.pending_task_timeout_sec = 60;
	M.cfg.tasks.processing_task_timeout_sec = 30;
	mc_uuid_generate(&owner);
	mc_uuid_generate(&other);
	mc_uuid_generate(&seg_a);
	mc_uuid_generate(&seg_b);
	client_id = owner;
	ok(mount_as(&owner, &seg_a, "127.0.0.1:17001", 1u << 30) == 0 &&
		   mount_as(&other, &seg_b, "127.0.0.1:17002", 2u << 30) == 0,
	   "two clients mount a segment each");
	mc_rpc_config_default(&cfg);
	cfg.preferred_segment = mc_strv_c("127.0.0.1:17001");
	ok(put_start_cfg(MC_OP_PUT_START, "obj", 4096, &cfg, NULL, NULL) == 0 &&
		   put_finish(MC_OP_PUT_END, "obj") == 0 && replicas("obj") == 1,
	   "an object on the owner's segment");

	/* A copy: only the owner gets it; its success completes the target. */
	is(create_copy("obj", "127.0.0.1:17002", &id), 0, "CreateCopyTask");
	is(status_of(&id), MC_TASK_PENDING, "it is PENDING");
	is(remove_key("obj"), MC_ERR_OBJECT_HAS_REPLICATION_TASK,
	   "the object cannot be removed meanwhile");
	is(create_copy("obj", "127.0.0.1:17002", &got), MC_ERR_OBJECT_HAS_REPLICATION_TASK,
	   "nor get a second task");
	is(fetch(&other, NULL), 0, "another client fetches nothing");
	ok(fetch(&owner, &got) == 1 && !memcmp(got.b, id.b, 16), "the owner fetches it");
	is(status_of(&id), MC_TASK_PROCESSING, "it is PROCESSING");
	is(replicas("obj"), 1, "its target is not readable before it completes");
	is(complete(&other, &id, 1), MC_ERR_ILLEGAL_CLIENT, "another client cannot complete it");
	is(complete(&owner, &id, 1), 0, "the owner completes it");
	is(status_of(&id), MC_TASK_SUCCESS, "it is SUCCESS");
	is(replicas("obj"), 2, "the object has two readable replicas");
	is(complete(&owner, &id, 1), MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS,
	   "a finished task cannot be completed again");

	/* Failures are retried, then the task fails for good; the object is free again. */
	ok(put_start_cfg(MC_OP_PUT_START, "obj2", 4096, &cfg, NULL, NULL) == 0 &&
		   put_finish(MC_OP_PUT_END, "obj2") == 0, "a second object on the owner");
	is(create_copy("obj2", "127.0.0.1:17002", &id), 0, "a copy of it");
	ok(fetch(&owner, NULL) == 1 && complete(&owner, &id, 0) == 0, "its first attempt fails");
	is(status_of(&id), MC_TASK_PENDING, "it waits for another attempt");
	is(fetch(&owner, NULL), 0, "not at once: it backs off");
	fake_now += 1100;
	is(fetch(&owner, NULL), 1, "after the backoff it is handed out again");
	fake_now += 31000;	/* past processing_task_timeout_sec */
	mc_tasks_tick(&M);
	is(status_of(&id), MC_TASK_FAILED, "the second attempt timed out: FAILED after 2 attempts");
	is(replicas("obj2"), 1, "no half-written copy is readable");
	is(remove_key("obj2"), 0, "the object can be removed once the task ended");

	/* Pending too long: FAILED; a removed object fails its task at hand-out. */
	ok(put_start_cfg(MC_OP_PUT_START, "obj3", 4096, &cfg, NULL, NULL) == 0 &&
		   put_finish(MC_OP_PUT_END, "obj3") == 0 &&
		   create_copy("obj3", "127.0.0.1:17002", &id) == 0,
	   "a third object and a copy of it");
	fake_now += 61000;
	mc_tasks_tick(&M);
	is(status_of(&id), MC_TASK_FAILED, "not taken within pending_task_timeout_sec: FAILED");
	is(create_copy("nope", "127.0.0.1:17002", &id), MC_ERR_OBJECT_NOT_FOUND,
	   "a missing key: OBJECT_NOT_FOUND");
	is(create_copy("obj3", "127.0.0.1:9", &id), MC_ERR_INVALID_PARAMS,
	   "an unknown target: INVALID_PARAMS, as upstream answers it");
	is(create_copy("nope", "127.0.0.1:9", &id), MC_ERR_OBJECT_NOT_FOUND,
	   "a missing key to an unknown target: the key is checked first");
	{
		struct mc_uuid nil;

		memset(&nil, 0, sizeof(nil));
		is(status_of(&nil), MC_ERR_TASK_NOT_FOUND, "an unknown id: TASK_NOT_FOUND");
	}
	dynrep_cooldowns();
	master_fini(&M);
	(void)mount;	/* harness helpers this test does not need */
	(void)put;
	(void)exist;
	(void)seg_id;
	return tap_done();
}
