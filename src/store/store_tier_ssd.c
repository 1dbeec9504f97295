/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store client's SSD tier (upstream's LOCAL_DISK replicas, --enable_offload): an SSD area
 * (src/ssd/ssd_area.c) contributed to the cluster, and the worker thread that carries out the
 * master's offload, promotion and deletion tasks for it.
 *
 * The area is opened with a scan of headers only, so start-up costs one small read per object.
 * The worker mounts the area at the master (MOUNT_LOCAL_DISK) and registers every object the
 * area holds (so a client restarted on the same directory, even after kill -9, brings its
 * objects back) in steps between heartbeat rounds, checking each value's checksum just before
 * its registration (a corrupt object is deleted, never registered or served); it polls
 * OFFLOAD_HEARTBEAT meanwhile.  OFFLOAD: read the object from our own
 * segment memory and write it to the SSD; PROMOTE: read it from the SSD and write it into the
 * memory replica the master allocated (ours: memcpy; another client's: a TCP WRITE); DROP: the
 * master forgot a copy, delete it.  Results go back in one NOTIFY_OFFLOAD per round, after the
 * directory fsync that makes the round's copies durable (a failed write or flush is answered
 * WRITE_FAIL and nothing of it stays; the master keeps the memory copy and backs off).  When the
 * area passes its high watermark (0.90 of the limit) the least recently used objects are offered
 * to the master with EVICT_DISK_REPLICA and only those it releases are deleted, down to 0.80.
 * Copies found damaged (a promotion's checksum fails, or a file the data server found changed
 * fails its re-verification, done here each round) are deleted by the area and reported LOST in
 * the next NOTIFY_OFFLOAD, so the master stops handing them to readers.
 * Object checksums: heartbeats ask for each task's object checksum (the CRC-64 its writer gave
 * the master), an offloaded copy keeps it in its record, and registration hands it back, so an
 * object brought back from the SSD keeps its checksum; with a master from before checksums
 * (it answers -600 to them) the older forms are sent instead.
 *
 * Readers reach SSD objects through this client's data server: the area is installed as the
 * memreg file window (its objects' addresses are in the LOCAL_DISK descriptors).
 * Threads: the worker runs blocking RPCs and file I/O on its own thread; the data server reads
 * files on its file-read workers (tcp_server.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "common/crc64.h"
#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "ssd/ssd_area.h"
#include "ssd/fault.h"
#include "store/store.h"

#define MC_SSD_HIGH 0.90
#define MC_SSD_LOW 0.80
#define MC_SSD_MAX_TASKS 64
#define MC_SSD_REGISTER_BATCH 512
#define MC_SSD_VERIFY_BYTES (64u << 20)	/* values checked per registration step */

struct mc_store_ssd {
	struct mc_store *st;
	struct mc_ssd *ssd;
	struct mc_uuid disk_id;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	int joined;		/* the thread is gone (mc_store_ssd_stop ran) */
	int mounted;
	/* The master answered -600 to the checksum features (a master from before them): send
	 * the older forms of OffloadObjectHeartbeat and NotifyOffloadSuccess from then on. */
	int old_master;
	int64_t interval_ms;
	/* Objects found at start-up (or at a re-mount) still to verify and register. */
	struct mc_ssd_item *reg_items;
	size_t reg_n, reg_at, reg_done, reg_dropped;
	/* Copies found corrupt or truncated since the last round (deleted here already): the
	 * master is told to forget them (MC_TIER_LOST) in the next NOTIFY_OFFLOAD. */
	struct mc_lost {
		char *key;
		size_t key_len;
		uint64_t size, addr;
	} *lost;
	size_t nlost, caplost;
};

struct mc_task {
	uint8_t kind;
	struct mc_strv key;
	uint64_t size, src, dst, gen;
	struct mc_strv dst_ep;
	struct mc_strv dst_seg;		/* PROMOTE: the destination's segment name ("": unknown,
					   an older master) */
	struct mc_rpc_checksum cs;	/* the object's checksum, kept with an offloaded copy */
	/* result */
	uint64_t disk_addr;
	int32_t result;
};

static int mc_env_bool(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes"));
}

/* Decide from the caller's settings and the environment.  Returns 1 to run the tier. */
static int mc_store_ssd_configure(struct mc_store *st)
{
	const char *v;

	if (!st->ssd_enable)
		st->ssd_enable = mc_env_bool("MOONCAKE_ENABLE_SSD_OFFLOAD") ||
				 mc_env_bool("MOONCAKE_OFFLOAD_ENABLED");
	if (!st->ssd_enable)
		return 0;
	if (st->ssd_path[0] == '\0' && (v = getenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH")) && *v)
		snprintf(st->ssd_path, sizeof(st->ssd_path), "%s", v);
	if (st->ssd_limit == 0 && (v = getenv("MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES")) && *v)
		st->ssd_limit = strtoull(v, NULL, 10);
	if (st->ssd_limit == 0) {
		/* Upstream's default is 2 TB; never more than 90% of the file system. */
		struct statvfs fs;
		uint64_t cap = 2000000000000ull;

		if (st->ssd_path[0] && statvfs(st->ssd_path, &fs) == 0) {
			uint64_t fsz = (uint64_t)fs.f_blocks * fs.f_frsize / 10 * 9;

			if (fsz < cap)
				cap = fsz;
		}
		st->ssd_limit = cap;
	}
	return 1;
}

static int mc_ssd_call_codes(struct mc_store *st, struct mc_rpc_call *call, int32_t *codes,
			     uint32_t n)
{
	struct mc_rbuf r;
	uint32_t i, m;
	int rc = mc_store_call(st, call);

	if (rc == 0)
		rc = call->status;
	if (rc)
		return rc;
	mc_rbuf_init(&r, call->resp, call->resp_len);
	m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 4);
	if (m != n)
		return MC_ERR_RPC_FAIL;
	for (i = 0; i < n; i++)
		codes[i] = mc_rbuf_i32(&r);
	return r.err ? MC_ERR_RPC_FAIL : 0;
}

/* Mount the area at the master; its objects are registered afterwards, in steps
 * (mc_ssd_register_step). */
static int mc_ssd_mount(struct mc_store_ssd *w)
{
	struct mc_store *st = w->st;
	struct mc_rpc_call call;
	long n;
	int rc;

	mc_rpc_call_init(&call, MC_OP_MOUNT_LOCAL_DISK);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_rpc_put_uuid(&call.req, &w->disk_id);
	mc_wbuf_cstr(&call.req, st->hostname);
	mc_wbuf_cstr(&call.req, st->endpoint);
	mc_wbuf_u64(&call.req, mc_ssd_limit(w->ssd));
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	mc_rpc_call_fini(&call);
	if (rc)
		return rc;
	mc_ssd_items_free(w->reg_items, w->reg_n);
	w->reg_items = NULL;
	w->reg_n = w->reg_at = 0;
	w->reg_done = w->reg_dropped = 0;
	n = mc_ssd_list(w->ssd, 0, SIZE_MAX, &w->reg_items);
	if (n < 0) {
		w->reg_items = NULL;
		return (int)n;
	}
	w->reg_n = (size_t)n;
	return 0;
}

/* Register the next batch of the area's objects (each value checked first: a corrupt one is
 * deleted, never registered).  Objects the master refuses are deleted.  Returns 1 while more
 * remain, 0 when all are registered, <0 when the master did not answer. */
static int mc_ssd_register_step(struct mc_store_ssd *w)
{
	struct mc_store *st = w->st;
	struct mc_rpc_call call;
	struct mc_ssd_item *batch[MC_SSD_REGISTER_BATCH];
	int32_t codes[MC_SSD_REGISTER_BATCH];
	uint64_t bytes = 0;
	uint32_t k, cnt = 0;
	int rc;

	if (w->reg_items == NULL)
		return 0;
	while (w->reg_at < w->reg_n && cnt < MC_SSD_REGISTER_BATCH &&
	       bytes < MC_SSD_VERIFY_BYTES) {
		struct mc_ssd_item *it = &w->reg_items[w->reg_at++];

		if (!it->verified) {
			bytes += it->size;
			if (mc_ssd_verify(w->ssd, it->key, it->key_len, it->addr) != 0) {
				w->reg_dropped++;
				continue;
			}
		}
		batch[cnt++] = it;
	}
	if (cnt) {
		int with_cs = 0;

		for (k = 0; k < cnt; k++)
			with_cs |= batch[k]->has_checksum;
again:
		mc_rpc_call_init(&call, MC_OP_NOTIFY_OFFLOAD);
		mc_rpc_put_uuid(&call.req, &st->client_id);
		mc_rpc_put_uuid(&call.req, &w->disk_id);
		mc_wbuf_u32(&call.req, cnt);
		for (k = 0; k < cnt; k++) {
			mc_wbuf_u8(&call.req, MC_TIER_REGISTER);
			mc_wbuf_str(&call.req, batch[k]->key, batch[k]->key_len);
			mc_wbuf_u64(&call.req, batch[k]->size);
			mc_wbuf_u64(&call.req, batch[k]->addr);
			mc_wbuf_u32(&call.req, 0);
			mc_wbuf_u64(&call.req, batch[k]->gen);
		}
		/* The checksums kept with the copies, so the objects keep theirs. */
		if (with_cs && !w->old_master)
			for (k = 0; k < cnt; k++) {
				struct mc_rpc_checksum cs = { (uint8_t)batch[k]->has_checksum,
							      batch[k]->checksum };

				mc_rpc_put_checksums(&call.req, &cs, 1);
			}
		rc = mc_ssd_call_codes(st, &call, codes, cnt);
		mc_rpc_call_fini(&call);
		if (rc == MC_ERR_INVALID_PARAMS && with_cs && !w->old_master) {
			mc_log_info("master %s takes no object checksums: registering without them",
				    st->master_addr);
			w->old_master = 1;
			goto again;
		}
		if (rc)
			return rc;	/* the whole list is registered again after a re-mount */
		for (k = 0; k < cnt; k++) {
			struct mc_ssd_item *it = batch[k];

			if (codes[k] == 0) {
				w->reg_done++;
				continue;
			}
			mc_log_info("SSD object %.*s not taken by the master (%s): deleted",
				    (int)(it->key_len > 128 ? 128 : it->key_len), it->key,
				    mc_strerror(codes[k]));
			mc_ssd_remove(w->ssd, it->key, it->key_len, it->addr);
			w->reg_dropped++;
		}
	}
	if (w->reg_at < w->reg_n)
		return 1;
	mc_log_info("SSD area mounted at master %s: %zu objects registered, %zu dropped",
		    st->master_addr, w->reg_done, w->reg_dropped);
	mc_ssd_items_free(w->reg_items, w->reg_n);
	w->reg_items = NULL;
	w->reg_n = w->reg_at = 0;
	return 0;
}

/* Free at least bytes of the area, least recently used first, each deletion released by the
 * master first.  Returns the bytes freed. */
static uint64_t mc_ssd_evict(struct mc_store_ssd *w, uint64_t bytes)
{
	struct mc_store *st = w->st;
	struct mc_ssd_item *items = NULL;
	struct mc_rpc_call call;
	uint64_t freed = 0, offered = 0;
	int32_t *codes;
	long n, i, cnt = 0;
	int rc;

	n = mc_ssd_list(w->ssd, 1, 1024, &items);
	if (n <= 0)
		return 0;
	while (cnt < n && offered < bytes) {
		offered += mc_ssd_footprint(items[cnt].key_len, items[cnt].size);
		cnt++;
	}
	/* Exactly what is needed: whatever the master releases must be deleted (it forgot it),
	 * and what it refuses (a reader holds it) is retried on the next round. */
	codes = mc_xcalloc((size_t)cnt, sizeof(*codes));
	mc_rpc_call_init(&call, MC_OP_EVICT_DISK_REPLICA);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_rpc_put_uuid(&call.req, &w->disk_id);
	mc_wbuf_u32(&call.req, (uint32_t)cnt);
	for (i = 0; i < cnt; i++)
		mc_wbuf_str(&call.req, items[i].key, items[i].key_len);
	rc = mc_ssd_call_codes(st, &call, codes, (uint32_t)cnt);
	mc_rpc_call_fini(&call);
	for (i = 0; rc == 0 && i < cnt; i++) {
		/* 0: the master forgot it (even if more than needed was released, it must go);
		 * OBJECT_NOT_FOUND: it never knew it.  Anything else: a reader holds it. */
		if (codes[i] != 0 && codes[i] != MC_ERR_OBJECT_NOT_FOUND)
			continue;
		if (mc_ssd_remove(w->ssd, items[i].key, items[i].key_len, items[i].addr) == 0)
			freed += mc_ssd_footprint(items[i].key_len, items[i].size);
	}
	if (rc)
		mc_log_warn("SSD eviction: EvictDiskReplica failed: %s", mc_strerror(rc));
	else
		mc_log_debug("SSD eviction freed %" PRIu64 " bytes (%" PRIu64 " wanted)", freed,
			     bytes);
	free(codes);
	mc_ssd_items_free(items, (size_t)n);
	return freed;
}

static void mc_ssd_watermark(struct mc_store_ssd *w)
{
	uint64_t used = mc_ssd_used(w->ssd), limit = mc_ssd_limit(w->ssd);

	if ((double)used > MC_SSD_HIGH * (double)limit)
		mc_ssd_evict(w, used - (uint64_t)(MC_SSD_LOW * (double)limit));
}

static void mc_ssd_do_offload(struct mc_store_ssd *w, struct mc_task *t)
{
	struct mc_store *st = w->st;
	uint64_t need = mc_ssd_footprint(t->key.n, t->size), used, limit = mc_ssd_limit(w->ssd);
	int rc;

	if (!mc_store_is_local(st, mc_strv_c(st->endpoint), t->src, t->size)) {
		mc_log_warn("offload of %.*s: 0x%" PRIx64 "+%" PRIu64 " is not in our segments",
			    (int)(t->key.n > 128 ? 128 : t->key.n), t->key.p, t->src, t->size);
		t->result = MC_ERR_INVALID_PARAMS;
		return;
	}
	if (t->cs.present) {
		/* Bytes that rotted in memory must not become an SSD copy that looks sound (its
		 * file checksum would be computed over the bad bytes). */
		uint64_t crc = mc_crc64(0, (const void *)(uintptr_t)t->src, t->size);

		if (mc_fault(MC_FAULT_OFFLOAD_FLIP) == MC_FAULT_FLIP)
			crc ^= 1;	/* test hook: as if they had rotted */
		if (crc != t->cs.value) {
			mc_store_count_mismatch(w->st);
			mc_log_err("checksum mismatch: key %.*s in our segment at 0x%" PRIx64
				   ": expected %016" PRIx64 ", read %016" PRIx64 "; not offloaded",
				   (int)(t->key.n > 128 ? 128 : t->key.n), t->key.p, t->src,
				   t->cs.value, crc);
			t->result = MC_ERR_CHECKSUM_MISMATCH;
			return;
		}
	}
	used = mc_ssd_used(w->ssd);
	if (used + need > limit)
		mc_ssd_evict(w, used + need - (uint64_t)(MC_SSD_LOW * (double)limit));
	rc = mc_ssd_put_checksummed(w->ssd, t->key.p, t->key.n, (const void *)(uintptr_t)t->src,
				    t->size, t->gen, t->cs.present ? &t->cs.value : NULL,
				    &t->disk_addr);
	/* A failed write stores nothing; the master keeps the memory copy and backs off. */
	t->result = rc ? MC_ERR_WRITE_FAIL : 0;
}

/* A copy was found corrupt and deleted: remember to tell the master. */
static void mc_ssd_lost(struct mc_store_ssd *w, const char *key, size_t key_len, uint64_t size,
			uint64_t addr)
{
	struct mc_lost *l;

	if (w->nlost == w->caplost) {
		size_t cap = w->caplost ? w->caplost * 2 : 16;

		w->lost = mc_xrealloc(w->lost, cap * sizeof(*w->lost));
		w->caplost = cap;
	}
	l = &w->lost[w->nlost++];
	l->key = mc_xstrndup(key, key_len);
	l->key_len = key_len;
	l->size = size;
	l->addr = addr;
}

/* Verify again the objects whose files changed under us (mc_ssd_suspects); the corrupt ones
 * are deleted by mc_ssd_verify and reported lost. */
static void mc_ssd_check_suspects(struct mc_store_ssd *w)
{
	struct mc_ssd_item *items = NULL;
	long n = mc_ssd_suspects(w->ssd, &items), i;

	for (i = 0; i < n; i++)
		if (mc_ssd_verify(w->ssd, items[i].key, items[i].key_len, items[i].addr) == -EBADMSG)
			mc_ssd_lost(w, items[i].key, items[i].key_len, items[i].size, items[i].addr);
	if (n > 0)
		mc_ssd_items_free(items, (size_t)n);
}

/* The bytes of a promotion, read from the SSD and checked by the file's CRC-32C, checked once
 * more against the object's checksum before they become a memory replica: the copy must be
 * of this object's value, not merely intact.  A copy that fails is forgotten (reported lost).
 * 0 or MC_ERR_CHECKSUM_MISMATCH. */
static int mc_ssd_promote_verify(struct mc_store_ssd *w, const struct mc_task *t, const void *p)
{
	uint64_t crc;

	if (!t->cs.present)
		return 0;
	crc = mc_crc64(0, p, t->size);
	if (mc_fault(MC_FAULT_PROMOTE_FLIP) == MC_FAULT_FLIP)
		crc ^= 1;	/* test hook: as if the copy held other bytes */
	if (crc == t->cs.value)
		return 0;
	mc_store_count_mismatch(w->st);
	mc_log_err("checksum mismatch: key %.*s in the SSD area at 0x%" PRIx64 ": expected %016" PRIx64
		   ", read %016" PRIx64 "; not promoted, copy dropped",
		   (int)(t->key.n > 128 ? 128 : t->key.n), t->key.p, t->src, t->cs.value, crc);
	mc_ssd_remove(w->ssd, t->key.p, t->key.n, t->src);
	mc_ssd_lost(w, t->key.p, t->key.n, t->size, t->src);
	return MC_ERR_CHECKSUM_MISMATCH;
}

static void mc_ssd_do_promote(struct mc_store_ssd *w, struct mc_task *t)
{
	struct mc_store *st = w->st;
	struct mc_xfer_req x;
	void *buf;
	int rc;

	if (mc_store_is_local(st, t->dst_ep, t->dst, t->size)) {
		rc = mc_ssd_read(w->ssd, t->src, (void *)(uintptr_t)t->dst, t->size);
		if (rc == -EBADMSG)
			mc_ssd_lost(w, t->key.p, t->key.n, t->size, t->src);
		if (rc == 0 && mc_ssd_promote_verify(w, t, (const void *)(uintptr_t)t->dst))
			rc = -EBADMSG;
		t->result = rc ? MC_ERR_INVALID_READ : 0;
		return;
	}
	buf = malloc(t->size);
	if (buf == NULL) {
		t->result = MC_ERR_INTERNAL;
		return;
	}
	rc = mc_ssd_read(w->ssd, t->src, buf, t->size);
	if (rc == -EBADMSG)
		mc_ssd_lost(w, t->key.p, t->key.n, t->size, t->src);
	if (rc == 0 && mc_ssd_promote_verify(w, t, buf))
		rc = -EBADMSG;
	if (rc == 0) {
		memset(&x, 0, sizeof(x));
		x.opcode = MC_XFER_WRITE;
		x.local = buf;
		x.remote = t->dst;
		x.len = t->size;
		rc = mc_endpoint_parse(t->dst_ep, x.host, sizeof(x.host), &x.port);
		/* Another client's memory is written through its segment (by name). */
		if (t->dst_seg.n && t->dst_seg.n < sizeof(x.segment))
			memcpy(x.segment, t->dst_seg.p, t->dst_seg.n);
		if (rc == 0 && mc_store_transfer(st, &x, 1) != 0)
			rc = x.status ? x.status : MC_ERR_TRANSFER_FAIL;
	}
	free(buf);
	t->result = rc ? MC_ERR_TRANSFER_FAIL : 0;
}

/* One heartbeat and its tasks.  Returns the number of tasks, or <0 when the master did not
 * answer (or the area must be mounted again). */
static int mc_ssd_round(struct mc_store_ssd *w)
{
	struct mc_store *st = w->st;
	struct mc_rpc_call call, note;
	struct mc_task tasks[MC_SSD_MAX_TASKS];
	struct mc_rbuf r;
	uint32_t n, i, nnote = 0;
	int rc;

	mc_rpc_call_init(&call, MC_OP_OFFLOAD_HEARTBEAT);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_rpc_put_uuid(&call.req, &w->disk_id);
	mc_wbuf_u32(&call.req, MC_SSD_MAX_TASKS);
	mc_wbuf_u64(&call.req, mc_ssd_used(w->ssd));
	if (!w->old_master)
		mc_wbuf_u8(&call.req, MC_RPC_HB_CHECKSUMS | MC_RPC_HB_SEGMENTS);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc) {
		if (rc == MC_ERR_INVALID_PARAMS && !w->old_master) {
			mc_log_info("master %s takes no object checksums: heartbeats without them",
				    st->master_addr);
			w->old_master = 1;
		}
		if (rc == MC_ERR_SEGMENT_NOT_FOUND) {
			mc_log_info("master %s does not know our SSD area: mounting it again",
				    st->master_addr);
			w->mounted = 0;
		}
		mc_rpc_call_fini(&call);
		return -1;
	}
	mc_rbuf_init(&r, call.resp, call.resp_len);
	n = mc_rbuf_count(&r, MC_SSD_MAX_TASKS, 41);	/* u8 + str + 3 u64 + str + u64 */
	for (i = 0; i < n && r.err == 0; i++) {
		memset(&tasks[i], 0, sizeof(tasks[i]));
		tasks[i].kind = mc_rbuf_u8(&r);
		tasks[i].key = mc_rpc_get_strv(&r, MC_RPC_MAX_KEY);
		tasks[i].size = mc_rbuf_u64(&r);
		tasks[i].src = mc_rbuf_u64(&r);
		tasks[i].dst_ep = mc_rpc_get_strv(&r, MC_RPC_MAX_NAME);
		tasks[i].dst = mc_rbuf_u64(&r);
		tasks[i].gen = mc_rbuf_u64(&r);
	}
	if (r.err == 0 && !w->old_master && r.left > (size_t)n * MC_RPC_CHECKSUM_BYTES) {
		/* Checksums, then each task's destination segment (a master that knows
		 * MC_RPC_HB_SEGMENTS). */
		for (i = 0; i < n; i++) {
			tasks[i].cs.present = mc_rbuf_u8(&r);
			tasks[i].cs.value = mc_rbuf_u64(&r);
		}
		if (mc_rbuf_u32(&r) != n)
			r.err = 1;
		for (i = 0; i < n && r.err == 0; i++)
			tasks[i].dst_seg = mc_rpc_get_strv(&r, MC_RPC_MAX_NAME);
	} else if (r.err == 0 && !w->old_master) {
		struct mc_rpc_checksum cs[MC_SSD_MAX_TASKS];

		if (mc_rpc_get_checksums(&r, cs, n) >= 0)
			for (i = 0; i < n; i++)
				tasks[i].cs = cs[i];
	}
	if (r.err || r.left) {
		mc_log_warn("malformed OffloadObjectHeartbeat answer from %s", st->master_addr);
		mc_rpc_call_fini(&call);
		return -1;
	}
	for (i = 0; i < n; i++) {
		struct mc_task *t = &tasks[i];

		if (t->key.n == 0 || t->size == 0 || t->size > MC_SSD_MAX_OBJECT) {
			t->result = MC_ERR_INVALID_PARAMS;
			continue;
		}
		switch (t->kind) {
		case MC_TIER_OFFLOAD: mc_ssd_do_offload(w, t); break;
		case MC_TIER_PROMOTE: mc_ssd_do_promote(w, t); break;
		case MC_TIER_DROP: mc_ssd_remove(w->ssd, t->key.p, t->key.n, t->src); break;
		default: t->result = MC_ERR_INVALID_PARAMS; break;
		}
		nnote += t->kind == MC_TIER_OFFLOAD || t->kind == MC_TIER_PROMOTE;
	}
	mc_ssd_check_suspects(w);
	if (nnote || w->nlost) {
		int32_t codes[MC_SSD_MAX_TASKS + 64];
		uint32_t k = 0, nl = w->nlost > 64 ? 64 : (uint32_t)w->nlost, j;

		/* The master frees memory once it hears an offload is done: the copies' names must
		 * survive a crash first (one directory fsync for the whole round). */
		if (mc_ssd_sync(w->ssd) != 0)
			for (i = 0; i < n; i++)
				if (tasks[i].kind == MC_TIER_OFFLOAD && tasks[i].result == 0) {
					mc_ssd_remove(w->ssd, tasks[i].key.p, tasks[i].key.n,
						      tasks[i].disk_addr);
					tasks[i].result = MC_ERR_WRITE_FAIL;
				}

		mc_rpc_call_init(&note, MC_OP_NOTIFY_OFFLOAD);
		mc_rpc_put_uuid(&note.req, &st->client_id);
		mc_rpc_put_uuid(&note.req, &w->disk_id);
		mc_wbuf_u32(&note.req, nnote + nl);
		for (j = 0; j < nl; j++) {
			mc_wbuf_u8(&note.req, MC_TIER_LOST);
			mc_wbuf_str(&note.req, w->lost[j].key, w->lost[j].key_len);
			mc_wbuf_u64(&note.req, w->lost[j].size);
			mc_wbuf_u64(&note.req, w->lost[j].addr);
			mc_wbuf_i32(&note.req, MC_ERR_INVALID_READ);
			mc_wbuf_u64(&note.req, 0);
		}
		for (i = 0; i < n; i++) {
			struct mc_task *t = &tasks[i];

			if (t->kind != MC_TIER_OFFLOAD && t->kind != MC_TIER_PROMOTE)
				continue;
			mc_wbuf_u8(&note.req, t->kind);
			mc_rpc_put_strv(&note.req, t->key);
			mc_wbuf_u64(&note.req, t->size);
			mc_wbuf_u64(&note.req, t->disk_addr);
			mc_wbuf_i32(&note.req, t->result);
			mc_wbuf_u64(&note.req, 0);
		}
		rc = mc_ssd_call_codes(st, &note, codes, nnote + nl);
		mc_rpc_call_fini(&note);
		if (rc == 0 && nl) {
			/* Delivered: forget them (kept for the next round otherwise). */
			for (j = 0; j < nl; j++)
				free(w->lost[j].key);
			memmove(w->lost, w->lost + nl, (w->nlost - nl) * sizeof(*w->lost));
			w->nlost -= nl;
			k = nl;
		}
		/* What we wrote for a task the master no longer wants (object removed, re-put, or
		 * the task timed out) would never be read or evicted: delete it. */
		for (i = 0; rc == 0 && i < n; i++) {
			struct mc_task *t = &tasks[i];

			if (t->kind != MC_TIER_OFFLOAD && t->kind != MC_TIER_PROMOTE)
				continue;
			if (t->kind == MC_TIER_OFFLOAD && t->result == 0 && codes[k] != 0)
				mc_ssd_remove(w->ssd, t->key.p, t->key.n, t->disk_addr);
			k++;
		}
		if (rc)
			mc_log_warn("NotifyOffloadSuccess to %s failed: %s", st->master_addr,
				    mc_strerror(rc));
	}
	mc_rpc_call_fini(&call);
	return (int)n;
}

static void *mc_ssd_main(void *arg)
{
	struct mc_store_ssd *w = arg;

	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		int busy = 0;
		struct timespec ts;

		pthread_mutex_unlock(&w->mu);
		if (!w->mounted && mc_ssd_mount(w) == 0)
			w->mounted = 1;
		if (w->mounted && w->reg_items) {
			/* One step between rounds: offloads keep flowing meanwhile. */
			int r = mc_ssd_register_step(w);

			busy = r > 0;
			if (r < 0)
				w->mounted = 0;
		}
		if (w->mounted) {
			int n = mc_ssd_round(w);

			busy |= n > 0;
			mc_ssd_watermark(w);
		}
		pthread_mutex_lock(&w->mu);
		if (busy || w->stop)
			continue;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (w->mounted ? w->interval_ms : 1000) * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int mc_store_ssd_start(struct mc_store *st)
{
	struct mc_store_ssd *w;
	const char *v;
	int err = 0;

	if (!mc_store_ssd_configure(st))
		return 0;
	if (st->ssd_path[0] == '\0') {
		mc_log_err("SSD offload enabled without a path (ssd_offload_path / "
			   "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH)");
		return MC_ERR_INVALID_PARAMS;
	}
	w = mc_xcalloc(1, sizeof(*w));
	w->st = st;
	w->ssd = mc_ssd_open(st->ssd_path, st->ssd_limit, &err);
	if (w->ssd == NULL) {
		mc_log_err("SSD area %s: %s", st->ssd_path, strerror(-err));
		free(w);
		return MC_ERR_INVALID_PARAMS;
	}
	v = getenv("MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_MS");
	w->interval_ms = v && atoll(v) > 0 ? atoll(v) : 100;
	mc_uuid_generate(&w->disk_id);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	mc_memreg_set_files(st->reg, mc_ssd_open_range, w->ssd);
	if (mc_ssd_mount(w) == 0)
		w->mounted = 1;
	else
		mc_log_warn("SSD area %s: mounting at the master failed; retrying in the background",
			    st->ssd_path);
	if (pthread_create(&w->thread, NULL, mc_ssd_main, w) != 0) {
		mc_memreg_set_files(st->reg, NULL, NULL);
		mc_ssd_close(w->ssd);
		free(w);
		return MC_ERR_INTERNAL;
	}
	st->ssdw = w;
	mc_log_info("SSD area %s: %zu objects, limit %" PRIu64 " bytes", st->ssd_path,
		    mc_ssd_count(w->ssd), mc_ssd_limit(w->ssd));
	return 0;
}

void mc_store_ssd_stop(struct mc_store *st)
{
	struct mc_store_ssd *w = st->ssdw;

	if (w == NULL || w->joined)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	w->joined = 1;
	if (w->mounted && st->mc) {
		/* Readers must not be sent here once we are gone. */
		(void)mc_store_unmount_rpc(st, &w->disk_id);
		w->mounted = 0;
	}
}

void mc_store_ssd_free(struct mc_store *st)
{
	struct mc_store_ssd *w = st->ssdw;

	if (w == NULL)
		return;
	if (st->reg)
		mc_memreg_set_files(st->reg, NULL, NULL);
	mc_ssd_items_free(w->reg_items, w->reg_n);
	while (w->nlost)
		free(w->lost[--w->nlost].key);
	free(w->lost);
	mc_ssd_close(w->ssd);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
	st->ssdw = NULL;
}
