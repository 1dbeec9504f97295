/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PERSIST_INT_H
#define MC_PERSIST_INT_H

/*
 * Inside src/persist: the encoding of changes in a batch, shared by persist.c (which queues and
 * writes them) and persist_snapshot.c (which encodes a database's rows as changes).  Each change
 * is a u8 kind and then:
 *   PUT_SEGMENT  id[16] client_id[16] str name, u64 base, u64 size, str endpoint, str protocol,
 *                u8 kind, token[16] (all zero: none), u64 dormant_until_ms
 *   DEL_SEGMENT  id[16]
 *   PUT_OBJECT   str key, u64 size, u32 flags, i64 put_start_ms, i64 soft_pin_until_ms,
 *                writer[16], u64 gen, u8 has_checksum, u64 checksum, str replicas (packed as in
 *                the objects table)
 *   DEL_OBJECT   str key
 *   DEL_ALL_OBJECTS
 *   SET_META     str name, i64 value
 *   PUT_RECORD   u32 kind, str id, str value (the records table: tasks, drain jobs, tenants)
 *   DEL_RECORD   u32 kind, str id
 * (str: u32 length and the bytes, src/common/wire.h.)
 */
enum mc_persist_op {
	OP_PUT_SEGMENT = 1,
	OP_DEL_SEGMENT,
	OP_PUT_OBJECT,
	OP_DEL_OBJECT,
	OP_DEL_ALL_OBJECTS,
	OP_SET_META,		/* only in batches taken for replication and in snapshots */
	OP_PUT_RECORD,
	OP_DEL_RECORD,
};

#endif
