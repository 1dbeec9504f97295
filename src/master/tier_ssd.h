/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_TIER_SSD_H
#define MC_MASTER_TIER_SSD_H

/*
 * What the master's SSD tier (tier_ssd.c: areas and tasks) shares with its RPC operations
 * (tier_ssd_rpc.c).  Nothing else includes this.
 */
#include "master/master.h"

/* The name o has on SSD areas and in the tier protocol: its key, or "tenant\0key" for a tenant
 * other than the default one (mc_tenant_scoped_key), so two tenants' objects of one key never
 * share a copy.  out holds MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY bytes; returns the length. */
size_t mc_tier_key(const struct mc_master *m, const struct mc_object *o, char *out);
/* The object a tier name names, in its tenant's namespace whatever namespace the request works
 * in; NULL when there is none. */
struct mc_object *mc_tier_object(struct mc_master *m, const char *name, size_t len);
/* c's SSD area with that id (NULL: its mounted one), or NULL. */
struct mc_segment *mc_client_disk(struct mc_client *c, const struct mc_uuid *id);
/* o's replica with that id, or NULL. */
struct mc_replica *mc_object_replica_by_id(struct mc_object *o, uint64_t id);
/* A LOCAL_DISK address must lie in the disk window of the data port, [2^62, 2^63). */
int mc_disk_addr_ok(uint64_t addr, uint64_t size);
/* The first queued task of disk, unlinked, or NULL. */
struct mc_tier_task *mc_task_pop(struct mc_segment *disk);
/* The area backs off after failed offloads: none is handed out now. */
int mc_disk_backing_off(const struct mc_master *m, const struct mc_segment *disk);
/* An OFFLOAD task that will not run: the object goes back to normal (evicted if eviction had
 * chosen it).  Frees t. */
void mc_task_cancel(struct mc_master *m, struct mc_tier_task *t);
/* A task is over: result 0 (success), or a failure code.  Returns the code for the client
 * (0: keep what you wrote; OBJECT_NOT_FOUND: delete it). */
int mc_task_done(struct mc_master *m, struct mc_segment *disk, struct mc_tier_task *t, int result,
		 uint64_t disk_addr);
/* A promotion that will get no answer (deadline, disk gone): the owner may still be writing
 * into the memory replica, so its bytes are parked like a preempted put's. */
void mc_task_abandon(struct mc_master *m, struct mc_segment *disk, struct mc_tier_task *t);

#endif
