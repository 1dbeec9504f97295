/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PROTO_RPC_OPS_H
#define MC_PROTO_RPC_OPS_H

/*
 * The master's RPC operations: the one list from which the opcodes (enum mc_rpc_op), their
 * names (mc_rpc_op_name), the master's dispatch table, its per-operation metrics and the Python
 * test client's opcode list (tests/integration/mcrpc.py reads this file) are all made.
 *
 *   X(SYMBOL, opcode, "Name", "metric", batch, durable, handler)
 *
 * SYMBOL	MC_OP_<SYMBOL> in C, OP["<SYMBOL>"] in mcrpc.py.
 * opcode	on the wire (below 96: the master's counters are indexed by it).
 * Name		the operation's name in log lines.
 * metric	the master's counters are exported as master_<metric>_requests_total and
 *		master_<metric>_failures_total, batch ones also as _partial_successes_total,
 *		_items_total and _failed_items_total; NULL: counted, not exported.
 * batch	a batch operation: its per-item failures make a partial success, not a failure.
 * durable	success changes durable state: with --persist_path it is acknowledged only once
 *		committed, and refused while persistence fails.
 * handler	the master handles it with mc_op_<handler>(struct mc_req *) (src/master/ops.h);
 *		single and batch forms share one.
 *
 * Each line must stay on one line: mcrpc.py reads "X(SYMBOL, opcode" with a regular expression.
 */
#define MC_RPC_OPS(X) \
	X(PING, 1, "Ping", "ping", 0, 0, ping) \
	X(SERVICE_READY, 2, "ServiceReady", NULL, 0, 0, service_ready) \
	X(GET_FSDIR, 3, "GetFsdir", NULL, 0, 0, get_fsdir) \
	X(GET_STORAGE_CONFIG, 4, "GetStorageConfig", NULL, 0, 0, get_storage_config) \
	X(FS_HEARTBEAT, 5, "FsHeartbeat", NULL, 0, 0, fs_heartbeat) \
	X(FS_EVICT, 6, "BatchEvictDiskReplica(DISK)", NULL, 0, 1, fs_evict) \
	X(MOUNT_SEGMENT, 10, "MountSegment", "mount_segment", 0, 1, mount_segment) \
	X(REMOUNT_SEGMENT, 11, "ReMountSegment", "remount_segment", 0, 0, remount_segment) \
	X(UNMOUNT_SEGMENT, 12, "UnmountSegment", "unmount_segment", 0, 1, unmount_segment) \
	X(PUT_START, 20, "PutStart", "put_start", 0, 1, put_start) \
	X(BATCH_PUT_START, 21, "BatchPutStart", "batch_put_start", 1, 1, put_start) \
	X(PUT_END, 22, "PutEnd", "put_end", 0, 1, put_end) \
	X(BATCH_PUT_END, 23, "BatchPutEnd", "batch_put_end", 1, 1, put_end) \
	X(PUT_REVOKE, 24, "PutRevoke", "put_revoke", 0, 1, put_revoke) \
	X(BATCH_PUT_REVOKE, 25, "BatchPutRevoke", "batch_put_revoke", 1, 1, put_revoke) \
	X(UPSERT_START, 26, "UpsertStart", "upsert_start", 0, 1, upsert_start) \
	X(BATCH_UPSERT_START, 27, "BatchUpsertStart", "batch_upsert_start", 1, 1, upsert_start) \
	X(UPSERT_END, 28, "UpsertEnd", "upsert_end", 0, 1, put_end) \
	X(BATCH_UPSERT_END, 29, "BatchUpsertEnd", "batch_upsert_end", 1, 1, put_end) \
	X(UPSERT_REVOKE, 30, "UpsertRevoke", "upsert_revoke", 0, 1, put_revoke) \
	X(BATCH_UPSERT_REVOKE, 31, "BatchUpsertRevoke", "batch_upsert_revoke", 1, 1, put_revoke) \
	X(GET_REPLICA_LIST, 40, "GetReplicaList", "get_replica_list", 0, 0, get_replica_list) \
	X(BATCH_GET_REPLICA_LIST, 41, "BatchGetReplicaList", "batch_get_replica_list", 1, 0, get_replica_list) \
	X(GET_REPLICA_LIST_BY_REGEX, 42, "GetReplicaListByRegex", "get_replica_list_by_regex", 0, 0, get_replica_list_by_regex) \
	X(EXIST_KEY, 43, "ExistKey", "exist_key", 0, 0, exist_key) \
	X(BATCH_EXIST_KEY, 44, "BatchExistKey", "batch_exist_key", 1, 0, exist_key) \
	X(PROBE_KEY, 45, "ProbeKey", "probe_key", 0, 0, probe_key) \
	X(BATCH_PROBE_KEY, 46, "BatchProbeKey", "batch_probe_key", 1, 0, probe_key) \
	X(REGISTER_PREFETCH_TASK, 47, "RegisterPrefetchTask", "register_prefetch_task", 0, 0, register_prefetch) \
	X(REMOVE, 50, "Remove", "remove", 0, 1, remove) \
	X(BATCH_REMOVE, 51, "BatchRemove", "batch_remove", 1, 1, remove) \
	X(REMOVE_BY_REGEX, 52, "RemoveByRegex", "remove_by_regex", 0, 1, remove_by_regex) \
	X(REMOVE_ALL, 53, "RemoveAll", "remove_all", 0, 1, remove_all) \
	X(BATCH_QUERY_IP, 60, "BatchQueryIp", "batch_query_ip", 1, 0, batch_query_ip) \
	X(BATCH_REPLICA_CLEAR, 61, "BatchReplicaClear", "batch_replica_clear", 1, 1, batch_replica_clear) \
	X(CREATE_COPY_TASK, 62, "CreateCopyTask", "create_copy_task", 0, 1, create_copy_task) \
	X(CREATE_MOVE_TASK, 63, "CreateMoveTask", "create_move_task", 0, 1, create_move_task) \
	X(QUERY_TASK, 64, "QueryTask", "query_task", 0, 0, query_task) \
	X(FETCH_TASKS, 65, "FetchTasks", "fetch_tasks", 0, 1, fetch_tasks) \
	X(MARK_TASK_COMPLETE, 66, "MarkTaskToComplete", "update_task", 0, 1, mark_task_complete) \
	X(SET_TENANT, 67, "SetTenant", NULL, 0, 0, set_tenant) \
	X(MOUNT_LOCAL_DISK, 70, "MountLocalDiskSegment", "mount_local_disk_segment", 0, 1, mount_local_disk) \
	X(OFFLOAD_HEARTBEAT, 71, "OffloadObjectHeartbeat", "offload_object_heartbeat", 0, 0, offload_heartbeat) \
	X(NOTIFY_OFFLOAD, 72, "NotifyOffloadSuccess", "notify_offload_success", 0, 1, notify_offload) \
	X(EVICT_DISK_REPLICA, 73, "BatchEvictDiskReplica", "evict_disk_replica", 0, 1, evict_disk_replica) \
	X(REPORT_TRANSFER_FAILURE, 80, "ReportTransferFailure", "report_transfer_failure", 0, 0, report_transfer_failure) \
	X(REPORT_CHECKSUM_MISMATCH, 81, "ReportChecksumMismatch", "report_checksum_mismatch", 0, 1, report_checksum_mismatch) \
	X(GET_ALL_SEGMENTS, 88, "GetAllSegments", "get_all_segments", 0, 0, get_all_segments)

#endif
