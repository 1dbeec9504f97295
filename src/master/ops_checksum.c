/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ReportChecksumMismatch (a handler of the table in ops.h): a reader verified the bytes of a
 * replica against the object's checksum (the CRC-64 its writer gave PutEnd) and they differ.
 * The master drops that replica, so no reader is sent to it again: a memory replica's bytes are
 * parked until the object's read lease ends (a reader may still be reading them), an SSD or
 * shared-directory copy is deleted by its owner.  The object stays while another complete
 * replica is left, or one is being written (a promotion's target); one whose last replica is
 * corrupt is removed.  Each dropped replica is counted (master_checksum_mismatch_total) and
 * logged with the key, the segment and both values.  A report about other bytes than the object's present ones (the object was written
 * again since the reader's GetReplicaList) changes nothing.
 * Single-threaded: the master's reactor thread.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/tier_ssd.h"

/* Where replica r lies, for log lines. */
static const char *mc_replica_where(const struct mc_replica *r)
{
	if (r->type == MC_REPLICA_DISK)
		return "the shared directory";
	return r->seg->name;
}

/* One report: 0 (the replica is dropped, and the object with it when it was its last complete
 * one) or the item's code. */
static int mc_corrupt_one(struct mc_req *q, const struct mc_rpc_corrupt_replica *c)
{
	struct mc_master *m = q->m;
	struct mc_object *o = mc_object_find(&m->objects, c->key.p, c->key.n);
	struct mc_replica *r;
	uint32_t i, others = 0, writing = 0;
	int klen = (int)(c->key.n > 128 ? 128 : c->key.n);

	if (c->key.n == 0 || c->expected == c->computed)
		return MC_ERR_INVALID_PARAMS;	/* not a mismatch */
	if (o == NULL)
		return MC_ERR_OBJECT_NOT_FOUND;
	if (!o->has_checksum || o->checksum != c->expected)
		return MC_ERR_INVALID_VERSION;	/* about bytes the object no longer has */
	r = mc_object_replica_by_id(o, c->replica_id);
	if (r == NULL || r->seg == NULL)
		return MC_ERR_REPLICA_NOT_FOUND;
	if (r->status != MC_REPLICA_COMPLETE)
		return MC_ERR_REPLICA_IS_NOT_READY;	/* being written: not the bytes checked */
	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *x = mc_object_replica(o, i);

		others += x != r && x->seg != NULL && x->status == MC_REPLICA_COMPLETE;
		writing += x->seg != NULL && x->status == MC_REPLICA_PROCESSING;
	}
	m->metrics.checksum_mismatches++;
	/* A replica being written (a promotion's target) keeps the object: its writer may still
	 * be sending bytes, which must not land on memory given to another object. */
	if (others == 0 && writing == 0) {
		mc_log_warn("checksum mismatch on %.*s, replica %llu on %s (reported by %s): expected "
			    "%016llx, computed %016llx; no other complete replica: object removed",
			    klen, c->key.p, (unsigned long long)r->id, mc_replica_where(r), q->peer,
			    (unsigned long long)c->expected, (unsigned long long)c->computed);
		m->metrics.checksum_mismatch_removals++;
		mc_persist_object_gone(m, o);
		mc_master_object_remove(m, o);
		return 0;
	}
	mc_log_warn("checksum mismatch on %.*s, replica %llu on %s (reported by %s): expected "
		    "%016llx, computed %016llx; replica dropped, %u complete left",
		    klen, c->key.p, (unsigned long long)r->id, mc_replica_where(r), q->peer,
		    (unsigned long long)c->expected, (unsigned long long)c->computed, others);
	if (r->type == MC_REPLICA_MEMORY)
		mc_replica_discard(m, r, o->lease_until > q->now ? o->lease_until : q->now);
	else
		mc_replica_release(m, r);	/* its owner deletes the copy */
	mc_object_settle(m, o);
	return 0;
}

/* Body: uuid client_id, u32 n, n x (str key, u64 replica_id, u64 expected, u64 computed).
 * Only a client in good standing may report: the reports of others change nothing. */
int mc_op_report_checksum_mismatch(struct mc_req *q)
{
	struct mc_uuid cid;
	struct mc_rpc_corrupt_replica *items;
	struct mc_client *c;
	uint32_t n, i;

	mc_rpc_get_uuid(&q->r, &cid);
	n = mc_rbuf_count(&q->r, MC_RPC_MAX_REPORT, 28);
	if (q->r.err)
		return MC_ERR_INVALID_PARAMS;
	items = mc_xcalloc(n ? n : 1, sizeof(*items));
	for (i = 0; i < n; i++)
		mc_rpc_get_corrupt_replica(&q->r, &items[i]);
	if (!mc_req_done(q)) {
		free(items);
		return MC_ERR_INVALID_PARAMS;
	}
	c = mc_client_find(q->m, &cid);
	if (c == NULL || !c->ok) {
		free(items);
		mc_log_warn("checksum mismatch report from %s ignored: not a client in good standing",
			    q->peer);
		return MC_ERR_ILLEGAL_CLIENT;
	}
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		int rc = mc_corrupt_one(q, &items[i]);

		mc_wbuf_i32(q->out, rc);
		mc_req_item(q, rc);
	}
	free(items);
	return 0;
}
