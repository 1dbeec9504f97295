/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MOONCAKE_TRANSFER_ENGINE_C_H
#define MOONCAKE_TRANSFER_ENGINE_C_H

/*
 * libmooncake transfer engine, C API.
 *
 * Names, types and return conventions are those of upstream Mooncake's transfer_engine_c.h:
 * an engine publishes this process's registered memory as one segment named local_server_name;
 * peers open it by name and move bytes with batches of READ/WRITE requests whose target_offset
 * is an absolute address inside the peer's registered memory.  Functions return 0 (or a handle)
 * on success and a negative TE error code (ERR_* below) on failure.  Every function is
 * thread-safe; the engine's sockets are owned by its own reactor thread.
 *
 * Transports: "tcp"; "shm", chosen automatically for a segment on this host (same uid);
 * "nvmeof" (also "file"): file-backed segments described under mooncake/nvmeof/<name>, see
 * libmooncake(3).  MC_FORCE_TCP=1 keeps everything on tcp.  Metadata: "P2PHANDSHAKE" (peers exchange
 * descriptors over the handshake port; the segment name becomes ip:rpc_port),
 * "http://host:port/metadata" and "etcd://h1:2379,h2:2379" (built with libcurl), and
 * "redis://host:port" (built with hiredis; MC_REDIS_USERNAME/PASSWORD/DB_INDEX).
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OPCODE_READ 0
#define OPCODE_WRITE 1
#define LOCAL_SEGMENT 0
#define INVALID_BATCH UINT64_MAX

#define STATUS_WAITING 0
#define STATUS_PENDING 1
#define STATUS_INVALID 2
#define STATUS_CANCELED 3
#define STATUS_COMPLETED 4
#define STATUS_TIMEOUT 5
#define STATUS_FAILED 6

/* Error codes (upstream error.h). */
#define ERR_INVALID_ARGUMENT (-1)
#define ERR_TOO_MANY_REQUESTS (-2)
#define ERR_ADDRESS_NOT_REGISTERED (-3)
#define ERR_BATCH_BUSY (-4)
#define ERR_DEVICE_NOT_FOUND (-6)
#define ERR_ADDRESS_OVERLAPPED (-7)
#define ERR_DNS (-101)
#define ERR_SOCKET (-102)
#define ERR_MALFORMED_JSON (-103)
#define ERR_REJECT_HANDSHAKE (-104)
#define ERR_METADATA (-200)
#define ERR_ENDPOINT (-201)
#define ERR_CONTEXT (-202)
#define ERR_NUMA (-300)
#define ERR_CLOCK (-301)
#define ERR_MEMORY (-302)
#define ERR_NOT_IMPLEMENTED (-303)

typedef int32_t segment_handle_t;
typedef int32_t segment_id_t;
typedef uint64_t batch_id_t;
typedef void *transfer_engine_t;
typedef void *transport_t;

struct transfer_request {
	int opcode;			/* OPCODE_READ (remote -> source) or OPCODE_WRITE */
	void *source;			/* local memory */
	segment_id_t target_id;		/* from openSegment */
	uint64_t target_offset;		/* absolute address in the target's registered memory */
	uint64_t length;
};
typedef struct transfer_request transfer_request_t;

struct transfer_status {
	int status;			/* STATUS_* */
	uint64_t transferred_bytes;
};
typedef struct transfer_status transfer_status_t;

struct buffer_entry {
	void *addr;
	size_t length;
};
typedef struct buffer_entry buffer_entry_t;

/* rpc_port 0 picks a free port in [MC_MIN_RPC_PORT, MC_MAX_RPC_PORT] (15000-17000). */
transfer_engine_t createTransferEngine(const char *metadata_conn_string,
				       const char *local_server_name, const char *ip_or_host_name,
				       uint64_t rpc_port, int auto_discover);
/* "ip:port" of this engine's handshake/RPC port. */
int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len);
/* The NIC priority matrix {"cpu:0": [["mlx5_0"], ["mlx5_1"]], ...} as JSON: the installed rdma
 * transport's, else the discovered topology (NICs of /sys/class/infiniband by NUMA node,
 * MC_TE_FILTERS, MC_CUSTOM_TOPO_JSON).  0, or ERR_INVALID_ARGUMENT when buf_len is too small. */
int getLocalTopology(transfer_engine_t engine, char *buf_out, size_t buf_len);
/* "tcp", "shm", "nvmeof"/"file" return a non-NULL handle; a transport this build lacks NULL. */
transport_t installTransport(transfer_engine_t engine, const char *proto, void **args);
int uninstallTransport(transfer_engine_t engine, const char *proto);
void destroyTransferEngine(transfer_engine_t engine);

int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
			int remote_accessible);
int unregisterLocalMemory(transfer_engine_t engine, void *addr);
int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *buffer_list,
			     size_t buffer_len, const char *location);
int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list, size_t addr_len);

/* A handle (>= 1) for the segment named segment_name, or a negative error. */
segment_handle_t openSegment(transfer_engine_t engine, const char *segment_name);
segment_handle_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name);
int closeSegment(transfer_engine_t engine, segment_handle_t seg_id);
int syncSegmentCache(transfer_engine_t engine);

/* A batch of up to batch_size requests; INVALID_BATCH on failure. */
batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size);
int submitTransfer(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries,
		   size_t count);
int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id,
		      struct transfer_status *status);
/* Refused with ERR_BATCH_BUSY while requests are pending. */
int freeBatchID(transfer_engine_t engine, batch_id_t batch_id);

#ifdef __cplusplus
}
#endif

#endif
