/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The copy/move task operations (handlers of the table in ops.h; the tasks themselves are
 * tasks.c): CreateCopyTask, CreateMoveTask and QueryTask for any client, FetchTasks and
 * MarkTaskToComplete for the client carrying a task out.  Bodies:
 *
 *   CREATE_COPY_TASK     str key, u32 n, n x str target           -> uuid task_id
 *   CREATE_MOVE_TASK     str key, str source, str target          -> uuid task_id
 *   QUERY_TASK           uuid task_id -> uuid id, u8 type, u8 status, i64 created_at_ms,
 *                        i64 last_updated_at_ms, uuid assigned_client, str message
 *   FETCH_TASKS          uuid client_id, u32 max -> u32 n, n x (uuid task_id, u8 type, str key,
 *                        u64 size, u64 src_addr, u64 src_replica_id, u8 has_checksum,
 *                        u64 checksum, u32 m,
 *                        m x (str segment, str endpoint, u64 addr))
 *   MARK_TASK_COMPLETE   uuid client_id, uuid task_id, u8 status (SUCCESS or FAILED),
 *                        i32 code, str message -> (empty)
 *
 * A refused creation is the frame's status (the error code), with the reason in a log line.
 * Single-threaded: the master's reactor thread.
 */
#include <stdlib.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/tasks.h"

#define MC_TASK_FETCH_MAX 64

static int mc_task_create_reply(struct mc_req *q, uint8_t type, struct mc_strv key,
				struct mc_strv source, const struct mc_strv *targets, uint32_t n)
{
	struct mc_uuid id;
	char why[200];
	int rc = mc_task_create(q->m, type, mc_req_tenant(q), key, source, targets, n, NULL, &id,
				why, sizeof(why));

	if (rc) {
		mc_log_info("%s of %.*s from %s refused: %s (%d)", mc_task_type_name(type),
			    (int)(key.n > 128 ? 128 : key.n), key.p ? key.p : "", q->peer, why, rc);
		return rc;
	}
	mc_rpc_put_uuid(q->out, &id);
	return 0;
}

int mc_op_create_copy_task(struct mc_req *q)
{
	struct mc_strv key = mc_rpc_get_strv(&q->r, MC_RPC_MAX_KEY), none = { "", 0 };
	struct mc_strv targets[MC_TASK_MAX_TARGETS];
	uint32_t n = mc_rbuf_count(&q->r, MC_TASK_MAX_TARGETS, 4), i;

	for (i = 0; i < n; i++)
		targets[i] = mc_rpc_get_strv(&q->r, MC_RPC_MAX_NAME);
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	return mc_task_create_reply(q, MC_TASK_REPLICA_COPY, key, none, targets, n);
}

int mc_op_create_move_task(struct mc_req *q)
{
	struct mc_strv key = mc_rpc_get_strv(&q->r, MC_RPC_MAX_KEY);
	struct mc_strv source = mc_rpc_get_strv(&q->r, MC_RPC_MAX_NAME);
	struct mc_strv target = mc_rpc_get_strv(&q->r, MC_RPC_MAX_NAME);

	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	return mc_task_create_reply(q, MC_TASK_REPLICA_MOVE, key, source, &target, 1);
}

int mc_op_query_task(struct mc_req *q)
{
	struct mc_uuid id;
	struct mc_task *t;

	mc_rpc_get_uuid(&q->r, &id);
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	t = mc_task_find(q->m, &id);
	if (t == NULL || t->tenant != mc_req_tenant(q))
		return MC_ERR_TASK_NOT_FOUND;
	mc_rpc_put_uuid(q->out, &t->id);
	mc_wbuf_u8(q->out, t->type);
	mc_wbuf_u8(q->out, t->status);
	mc_wbuf_i64(q->out, t->created_wall);
	mc_wbuf_i64(q->out, t->updated_wall);
	mc_rpc_put_uuid(q->out, &t->assigned);
	mc_wbuf_cstr(q->out, t->message);
	return 0;
}

int mc_op_fetch_tasks(struct mc_req *q)
{
	struct mc_uuid cid;
	struct mc_client *c;
	uint32_t max, n;
	size_t at;

	mc_rpc_get_uuid(&q->r, &cid);
	max = mc_rbuf_u32(&q->r);
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	c = mc_client_find(q->m, &cid);
	if (c == NULL || !c->ok)
		return MC_ERR_ILLEGAL_CLIENT;
	if (max > MC_TASK_FETCH_MAX)
		max = MC_TASK_FETCH_MAX;
	at = q->out->len;
	mc_wbuf_u32(q->out, 0);
	n = mc_tasks_fetch(q->m, c, max, q->out);
	mc_wbuf_patch_u32(q->out, at, n);
	return 0;
}

int mc_op_mark_task_complete(struct mc_req *q)
{
	struct mc_uuid cid, id;
	struct mc_strv msg;
	struct mc_client *c;
	uint8_t status;
	int32_t code;

	mc_rpc_get_uuid(&q->r, &cid);
	mc_rpc_get_uuid(&q->r, &id);
	status = mc_rbuf_u8(&q->r);
	code = mc_rbuf_i32(&q->r);
	msg = mc_rpc_get_strv(&q->r, 4096);
	if (!mc_req_done(q) || (status != MC_TASK_SUCCESS && status != MC_TASK_FAILED))
		return MC_ERR_INVALID_PARAMS;
	c = mc_client_find(q->m, &cid);
	if (c == NULL)
		return MC_ERR_ILLEGAL_CLIENT;
	return mc_tasks_complete(q->m, c, &id, status == MC_TASK_SUCCESS, code, msg);
}
