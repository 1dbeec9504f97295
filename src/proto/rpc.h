/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_RPC_H
#define MC_RPC_H

/*
 * The master RPC protocol, version 1 (full description: doc/protocol.md).
 *
 * Every message is a frame: a 24-byte header followed by body_len bytes of body.
 *
 *   off size field
 *   0   4    magic    0x5052434D ("MCRP" as bytes on the wire), little-endian u32
 *   4   1    version  MC_RPC_VERSION
 *   5   1    kind     0 request, 1 response
 *   6   2    opcode   enum mc_rpc_op
 *   8   4    body_len bytes following the header (bounded by the receiver's maximum)
 *   12  4    status   responses: 0, or an error code for the whole request (then body is empty);
 *                     requests: the deadline, low 32 bits of the master's wall-clock time in ms
 *                     after which the request must not be executed (0: none; see
 *                     mc_rpc_deadline_expired)
 *   16  8    req_id   chosen by the client, echoed in the response
 *
 * Many requests may be in flight on one connection; the master answers each with the request's
 * req_id (today in order, but clients must match by req_id).  All integers are little-endian.
 *
 * Body encodings use src/common/wire.h: str = u32 length + bytes, keys = u32 n + n x str,
 * uuid = 16 raw bytes.  Per opcode (request -> response body):
 *
 *   PING                 uuid client_id                    -> i64 view_version, u8 client_status,
 *                                                             u64 master wall clock in ms
 *   SERVICE_READY        (empty)                           -> str version
 *   GET_FSDIR            (empty)                           -> str "<root_fs_dir>/<cluster_id>" or ""
 *   GET_STORAGE_CONFIG   (empty)                           -> str fsdir, u8 enable_disk_eviction,
 *                                                             u64 quota_bytes
 *   FS_HEARTBEAT         uuid client_id, u32 n, n x u64 done -> u64 used, u64 quota,
 *                        u32 m, m x (u64 id, str path): files of forgotten DISK replicas to delete
 *                        (ids acknowledged in the next heartbeat's "done")
 *   FS_EVICT             uuid client_id, keys              -> u32 n, n x i32 code (0: the DISK
 *                        replica is forgotten, delete its file; OBJECT_HAS_LEASE: keep it)
 *   MOUNT_SEGMENT        uuid client_id, segment [, u8[16] token] -> (empty)
 *   REMOUNT_SEGMENT      uuid client_id, u32 n, n x segment [, n x u8[16] token] -> (empty)
 *                        (token: random bytes the mounting process made with the segment and
 *                        keeps only in memory; a dormant segment is restored only to it)
 *   UNMOUNT_SEGMENT      uuid client_id, uuid segment_id   -> (empty)
 *   PUT_START, BATCH_PUT_START, UPSERT_START, BATCH_UPSERT_START
 *                        uuid client_id, config, u32 n, n x (str key, u64 size)
 *                        -> u32 n, n x (i32 code, u32 nrep, nrep x replica)
 *   PUT_END, UPSERT_END and their BATCH_ forms
 *                        uuid client_id, u8 replica_type, keys [, n x checksum]
 *                        -> u32 n, n x i32 code
 *   PUT_REVOKE, UPSERT_REVOKE and their BATCH_ forms
 *                        uuid client_id, u8 replica_type, keys -> u32 n, n x i32 code
 *   GET_REPLICA_LIST, BATCH_GET_REPLICA_LIST
 *                        keys -> u64 lease_ttl_ms, u32 n, n x (i32 code, u32 nrep, nrep x replica),
 *                        n x checksum (absent from older masters)
 *   GET_REPLICA_LIST_BY_REGEX
 *                        str regex -> u64 lease_ttl_ms, u32 n, n x (str key, u32 nrep, nrep x replica)
 *   EXIST_KEY, BATCH_EXIST_KEY
 *                        keys -> u32 n, n x i32 (1 exists, 0 not, <0 error)
 *   REMOVE, BATCH_REMOVE u8 force, keys -> u32 n, n x i32 code
 *   REMOVE_BY_REGEX      u8 force, str regex -> i64 count
 *   REMOVE_ALL           u8 force -> i64 count
 *   BATCH_QUERY_IP       u32 n, n x uuid -> u32 n, n x (uuid client_id, u32 m, m x str ip)
 *   BATCH_REPLICA_CLEAR  uuid client_id, str segment_name, keys -> keys (the cleared ones)
 *   MOUNT_LOCAL_DISK     uuid client_id, uuid disk_id, str name, str endpoint, u64 capacity
 *                        -> (empty)
 *   OFFLOAD_HEARTBEAT    uuid client_id, uuid disk_id, u32 max_tasks, u64 used_bytes
 *                        [, u8 features]
 *                        -> u32 n, n x task (u8 kind, str key, u64 size, u64 src_addr,
 *                           str dst_endpoint, u64 dst_addr, u64 gen) [, n x checksum when
 *                           features has MC_RPC_HB_CHECKSUMS]; status MC_ERR_SEGMENT_NOT_FOUND
 *                           when the disk is not mounted (mount it and register its objects)
 *   NOTIFY_OFFLOAD       uuid client_id, uuid disk_id, u32 n,
 *                        n x (u8 kind, str key, u64 size, u64 disk_addr, i32 result, u64 gen)
 *                        [, n x checksum] -> u32 n, n x i32 code
 *   EVICT_DISK_REPLICA   uuid client_id, uuid disk_id, keys -> u32 n, n x i32 code (0: the master
 *                        forgot the copy, delete it; OBJECT_HAS_LEASE: a reader may use it, keep it)
 *   REPORT_TRANSFER_FAILURE
 *                        uuid client_id, u32 n, n x (str segment_name, i32 code)
 *                        -> u32 n, n x i32 (0, or SEGMENT_NOT_FOUND for an unknown name)
 *   REPORT_CHECKSUM_MISMATCH
 *                        uuid client_id, u32 n, n x (str key, u64 replica_id, u64 expected,
 *                        u64 computed) -> u32 n, n x i32 code (0: the replica is dropped)
 *
 * checksum = u8 present, u64 value (see mc_rpc_put_checksums below).
 *
 * The single-key opcodes use the same bodies as the batch ones with n = 1; they exist separately
 * so the master can count them under upstream's metric names.  A request whose body does not
 * decode exactly (short, trailing bytes, a count or string over its bound) is answered with
 * status MC_ERR_INVALID_PARAMS and an empty body; an unknown opcode with MC_ERR_NOT_SUPPORTED.
 * A header with a bad magic, an unknown version or a body over the maximum closes the connection.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/wire.h"
#include "proto/rpc_ops.h"

#define MC_RPC_MAGIC 0x5052434Du
#define MC_RPC_VERSION 1
#define MC_RPC_HDR_LEN 24
#define MC_RPC_DEFAULT_MAX_BODY (64u << 20)

/* Bounds enforced by the decoders. */
#define MC_RPC_MAX_KEY 4096		/* bytes in a key */
#define MC_RPC_MAX_BATCH 65536		/* items in one batch */
#define MC_RPC_MAX_NAME 255		/* segment name, endpoint, ip string */
#define MC_RPC_MAX_PROTO 31		/* transport protocol name */
#define MC_RPC_MAX_PREFERRED 64		/* preferred segments in a config */
#define MC_RPC_MAX_REPLICAS 64		/* replicas in one descriptor list */
#define MC_RPC_MAX_REGEX 4096
#define MC_RPC_MAX_PATH 4096
#define MC_RPC_MAX_REPORT 1024		/* items in one ReportTransferFailure or
					   ReportChecksumMismatch */

/* Slack the master allows past a request's deadline for clock error between the hosts. */
#define MC_RPC_DEADLINE_TOLERANCE_MS 1000

enum mc_rpc_kind {
	MC_RPC_REQUEST = 0,
	MC_RPC_RESPONSE = 1,
};

/* Opcodes: see rpc_ops.h. */
#define MC_RPC_OP_ENUM(sym, code, name, metric, batch, durable, handler) MC_OP_##sym = code,
enum mc_rpc_op { MC_RPC_OPS(MC_RPC_OP_ENUM) };
#undef MC_RPC_OP_ENUM

/* Tier tasks handed to a disk owner by OFFLOAD_HEARTBEAT, and their results in NOTIFY_OFFLOAD. */
enum mc_tier_task_kind {
	MC_TIER_OFFLOAD = 0,	/* copy memory at src_addr (own segment) to the SSD */
	MC_TIER_PROMOTE = 1,	/* copy the SSD object at src_addr to dst_endpoint/dst_addr */
	MC_TIER_DROP = 2,	/* the master forgot the SSD copy at src_addr: delete it */
	MC_TIER_REGISTER = 3,	/* (notify only) an object found on the SSD at start-up */
	MC_TIER_LOST = 4,	/* (notify only) the SSD copy at disk_addr failed its checksum
				 * or is truncated: the owner deleted it, forget it */
};

/* Upstream enums carried on the wire with upstream's numbers. */
enum mc_replica_type {
	MC_REPLICA_MEMORY = 0,
	MC_REPLICA_DISK = 1,
	MC_REPLICA_LOCAL_DISK = 2,
	MC_REPLICA_ALL = 4,
};

enum mc_replica_status {
	MC_REPLICA_UNDEFINED = 0,
	MC_REPLICA_INITIALIZED = 1,
	MC_REPLICA_PROCESSING = 2,
	MC_REPLICA_COMPLETE = 3,
	MC_REPLICA_REMOVED = 4,
	MC_REPLICA_FAILED = 5,
};

enum mc_client_status {
	MC_CLIENT_UNDEFINED = 0,
	MC_CLIENT_OK = 1,
	MC_CLIENT_NEED_REMOUNT = 2,
};

enum mc_soft_pin_action {
	MC_SOFT_PIN_PRESERVE = 0,
	MC_SOFT_PIN_ENABLE = 1,
	MC_SOFT_PIN_DISABLE = 2,
};

/* BatchProbeKey's lease policy (upstream's GrantLeasePolicy): none grants no lease; LastHitOnly
 * leases the last group of candidate_size keys that are all present. */
enum mc_probe_policy {
	MC_PROBE_NONE = 0,
	MC_PROBE_LAST_HIT_ONLY = 1,
};

/* A string view into a decoded frame (not NUL-terminated; valid while the frame is). */
struct mc_strv {
	const char *p;
	uint32_t n;
};

struct mc_uuid {
	uint8_t b[16];
};

/* Fill with random bytes (getrandom), version-4 layout.  Returns 0 or -errno. */
int mc_uuid_generate(struct mc_uuid *u);
/* 36-character canonical text form plus NUL into out (at least 37 bytes). */
void mc_uuid_format(const struct mc_uuid *u, char *out);
int mc_uuid_is_nil(const struct mc_uuid *u);

/* A memory segment as mounted by a client. */
struct mc_rpc_segment {
	struct mc_uuid id;
	struct mc_strv name;		/* owner's local_hostname, e.g. "10.0.0.1:12345" */
	uint64_t base;			/* owner's virtual address of the segment start */
	uint64_t size;
	struct mc_strv endpoint;	/* transfer endpoint "host:port" peers connect to */
	struct mc_strv protocol;	/* "tcp", "rdma", ... */
};

/* Upstream's ReplicateConfig: how many replicas a put wants, and where (preferred segment,
 * memory or disk), as PutStart and BatchPutStart carry it. */
struct mc_rpc_config {
	uint32_t replica_num;
	uint8_t with_hard_pin;
	uint8_t soft_pin_action;	/* enum mc_soft_pin_action */
	uint8_t has_soft_pin_ttl;
	uint64_t soft_pin_ttl_ms;
	uint8_t prefer_alloc_in_same_node;
	uint32_t data_type;		/* ObjectDataType */
	struct mc_strv preferred_segment;
	uint32_t n_preferred;
	struct mc_strv preferred[MC_RPC_MAX_PREFERRED];
};

/* One replica descriptor.  Which fields are meaningful depends on type. */
struct mc_rpc_replica {
	uint64_t id;
	uint8_t type;		/* enum mc_replica_type */
	uint8_t status;		/* enum mc_replica_status */
	uint64_t size;		/* object bytes (all types) */
	/* MEMORY */
	uint64_t addr;		/* MEMORY: owner's virtual address of the buffer; LOCAL_DISK: address
				   of the object in the owner's disk range (served by its data port) */
	struct mc_strv segment_name;
	struct mc_strv endpoint;
	struct mc_strv protocol;
	/* DISK: path; LOCAL_DISK: client_id + endpoint */
	struct mc_strv path;
	struct mc_uuid client_id;
};

struct mc_rpc_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t kind;
	uint16_t opcode;
	uint32_t body_len;
	int32_t status;
	uint64_t req_id;
};

void mc_rpc_hdr_encode(uint8_t out[MC_RPC_HDR_LEN], const struct mc_rpc_hdr *h);
/* Decode and validate a header.  Returns 0, -EPROTO (bad magic or kind), -EPROTONOSUPPORT
 * (unknown version) or -EMSGSIZE (body_len > max_body). */
int mc_rpc_hdr_decode(const uint8_t in[MC_RPC_HDR_LEN], struct mc_rpc_hdr *h, uint32_t max_body);

/* Start a frame in w: writes a header with body_len 0, to be fixed by mc_rpc_frame_end. */
void mc_rpc_frame_begin(struct mc_wbuf *w, uint8_t kind, uint16_t opcode, int32_t status,
			uint64_t req_id);
/* Patch body_len for the frame begun at offset start (usually 0) of w. */
void mc_rpc_frame_end(struct mc_wbuf *w, size_t start);

/* Composite encoders/decoders.  Decoders set r->err on any violation of the bounds above. */
void mc_rpc_put_uuid(struct mc_wbuf *w, const struct mc_uuid *u);
void mc_rpc_get_uuid(struct mc_rbuf *r, struct mc_uuid *u);
void mc_rpc_put_strv(struct mc_wbuf *w, struct mc_strv s);
struct mc_strv mc_rpc_get_strv(struct mc_rbuf *r, size_t max);
void mc_rpc_put_segment(struct mc_wbuf *w, const struct mc_rpc_segment *s);
void mc_rpc_get_segment(struct mc_rbuf *r, struct mc_rpc_segment *s);
void mc_rpc_put_config(struct mc_wbuf *w, const struct mc_rpc_config *c);
void mc_rpc_get_config(struct mc_rbuf *r, struct mc_rpc_config *c);
void mc_rpc_put_replica(struct mc_wbuf *w, const struct mc_rpc_replica *rep);
void mc_rpc_get_replica(struct mc_rbuf *r, struct mc_rpc_replica *rep);
/* One item of ReportTransferFailure: a segment and the transfer error seen on it. */
struct mc_rpc_xfer_failure {
	struct mc_strv segment;
	int32_t code;
};

void mc_rpc_put_xfer_failure(struct mc_wbuf *w, const struct mc_rpc_xfer_failure *f);
void mc_rpc_get_xfer_failure(struct mc_rbuf *r, struct mc_rpc_xfer_failure *f);

/* Object checksums (CRC-64/ECMA-182 of the object's bytes: polynomial 0x42F0E1EBA9EA3693, not
 * reflected, initial value 0, no final xor).  Any value is valid, 0 included, so whether one is
 * known is said apart.  On the wire one is 9 bytes, u8 present (0 or 1) and u64 value (0 when
 * absent), and the checksums of a request or response go in one optional section of n of them
 * at the very end of its body, in the order of its n items:
 *   PutEnd, UpsertEnd (and their batch forms): after the keys, the writer's checksum per key;
 *   GetReplicaList, BatchGetReplicaList: after the items, the object's checksum per key (absent
 *	for a key answered with an error);
 *   NotifyOffloadSuccess: after the items, the object's checksum per item (REGISTER items);
 *   OffloadObjectHeartbeat: after the tasks, the object's checksum per task, only when the
 *	request ended with the feature byte MC_RPC_HB_CHECKSUMS. */
#define MC_RPC_CHECKSUM_BYTES 9

struct mc_rpc_checksum {
	uint8_t present;
	uint64_t value;
};

/* Append the section: n x (u8 present, u64 value). */
void mc_rpc_put_checksums(struct mc_wbuf *w, const struct mc_rpc_checksum *c, uint32_t n);
/* Read the optional section of n checksums at the end of a body into c[0..n).  Returns 1 when
 * it is there (exactly n x 9 bytes left, each present byte 0 or 1), 0 when nothing is left (a
 * peer from before checksums: every c[i] is absent), or -1 with r->err set when anything else
 * is left (the body is malformed). */
int mc_rpc_get_checksums(struct mc_rbuf *r, struct mc_rpc_checksum *c, uint32_t n);

/* OffloadObjectHeartbeat's optional trailing request byte: the features the disk owner
 * understands in the answer. */
#define MC_RPC_HB_CHECKSUMS 0x01	/* append the tasks' object checksums */

/* One item of ReportChecksumMismatch: a reader read replica replica_id of key and its bytes'
 * CRC-64 (computed) differs from the object's checksum (expected, as GetReplicaList gave it). */
struct mc_rpc_corrupt_replica {
	struct mc_strv key;
	uint64_t replica_id;
	uint64_t expected;
	uint64_t computed;
};

void mc_rpc_put_corrupt_replica(struct mc_wbuf *w, const struct mc_rpc_corrupt_replica *c);
void mc_rpc_get_corrupt_replica(struct mc_rbuf *r, struct mc_rpc_corrupt_replica *c);

/* Request deadlines.  A request frame's status field holds the low 32 bits of the wall-clock
 * time (ms, in the master's clock) after which it must not be executed; 0 means none.
 * mc_rpc_deadline_encode maps a time to that field (never 0).  mc_rpc_deadline_expired says
 * whether field dl has passed at now_ms by more than tolerance_ms, comparing modulo 2^32 (so
 * a deadline within about 24 days of now compares right). */
uint32_t mc_rpc_deadline_encode(int64_t wall_ms);
int mc_rpc_deadline_expired(uint32_t dl, int64_t now_ms, uint32_t tolerance_ms);

/* Default config: replica_num 1, everything else zero. */
void mc_rpc_config_default(struct mc_rpc_config *c);

static inline struct mc_strv mc_strv_c(const char *s)
{
	struct mc_strv v = { s ? s : "", s ? (uint32_t)strlen(s) : 0 };
	return v;
}

static inline int mc_strv_eq(struct mc_strv a, struct mc_strv b)
{
	return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

const char *mc_rpc_op_name(uint16_t op);

#endif
