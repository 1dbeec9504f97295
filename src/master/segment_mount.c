/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Mounting memory segments: the checks a MountSegment or ReMountSegment must pass (sizes,
 * addresses, names and identities against the other segments), taking over the name of a silent
 * client's segment, restoring a dormant segment with its token, and creating the segment in the
 * tables (segment_table.c).  Used by the RPC handlers and by recovery.
 * Single-threaded: the master's reactor thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "reactor/options.h"
#include "segment/alloc.h"

static char *mc_strv_dup(struct mc_strv s)
{
	return mc_xstrndup(s.p, s.n);
}

static int mc_token_given(const uint8_t *token)
{
	static const uint8_t zero[16];

	return token != NULL && memcmp(token, zero, 16) != 0;
}

/* Does s (from a mount request of client c) describe seg's memory exactly? */
static int mc_segment_same(const struct mc_segment *seg, const struct mc_client *c,
			   const struct mc_rpc_segment *s)
{
	return seg->client == c && seg->base == s->base && seg->size == s->size &&
	       strlen(seg->name) == s->name.n && !memcmp(seg->name, s->name.p, s->name.n);
}

int mc_segment_mount_check(struct mc_master *m, struct mc_client *c,
			   const struct mc_rpc_segment *s, char *why, size_t n)
{
	struct mc_segment *seg = mc_segment_lookup(m, &s->id);
	uint32_t i;
	int port;

	if (s->size == 0) {
		snprintf(why, n, "size 0");
		return MC_ERR_INVALID_PARAMS;
	}
	if (s->base == 0) {
		snprintf(why, n, "base address 0");
		return MC_ERR_INVALID_PARAMS;
	}
	if (s->base + s->size < s->base) {
		snprintf(why, n, "base 0x%llx + size %llu wraps around", (unsigned long long)s->base,
			 (unsigned long long)s->size);
		return MC_ERR_INVALID_PARAMS;
	}
	if (s->size > MC_SEGMENT_VA_LIMIT || s->base + s->size > MC_SEGMENT_VA_LIMIT) {
		snprintf(why, n, "%llu bytes at 0x%llx lie past the %llu-byte address space a "
			 "client maps memory in", (unsigned long long)s->size,
			 (unsigned long long)s->base, (unsigned long long)MC_SEGMENT_VA_LIMIT);
		return MC_ERR_INVALID_PARAMS;
	}
	if (s->name.n == 0 || s->endpoint.n == 0) {
		snprintf(why, n, "empty %s", s->name.n == 0 ? "name" : "endpoint");
		return MC_ERR_INVALID_PARAMS;
	}
	{
		char ep[256];

		snprintf(ep, sizeof(ep), "%.*s", (int)s->endpoint.n, s->endpoint.p);
		if (memchr(s->endpoint.p, '\0', s->endpoint.n) || s->endpoint.n >= sizeof(ep) ||
		    mc_opts_split_addr(ep, NULL, 0, &port) || port == 0) {
			snprintf(why, n, "endpoint '%s' is not host:port", ep);
			return MC_ERR_INVALID_PARAMS;
		}
	}
	if (seg == NULL) {
		struct mc_segment *u;

		/* Its records are still being dropped (an unmount, a dormant time that ended): a
		 * second segment of that id now would have its persisted row deleted by the first's
		 * end.  The client mounts again at its next NEED_REMOUNT. */
		for (u = m->reap_head; u; u = u->reap_next)
			if (!memcmp(u->id.b, s->id.b, 16)) {
				snprintf(why, n, "segment still being unmounted");
				return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
			}
	}
	if (seg != NULL && seg->status == MC_SEG_DORMANT) {
		/* Whether the token proves the memory is mc_segment_mount's to decide. */
		if (!mc_segment_same(seg, c, s)) {
			snprintf(why, n, "does not describe the dormant segment with that id (%s, "
				 "%llu bytes at 0x%llx)", seg->name, (unsigned long long)seg->size,
				 (unsigned long long)seg->base);
			return MC_ERR_INVALID_PARAMS;
		}
		return 0;
	}
	if (seg != NULL && seg->status != MC_SEG_OK) {
		snprintf(why, n, "segment still being unmounted");
		return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
	}
	if (seg != NULL && seg->client != c) {
		snprintf(why, n, "segment id already mounted by another client");
		return MC_ERR_SEGMENT_ALREADY_EXISTS;
	}
	if (seg != NULL) {
		/* Idempotent re-mount: the same identity must describe the same memory. */
		if (!mc_segment_same(seg, c, s)) {
			snprintf(why, n, "segment id already mounted as %s, %llu bytes at 0x%llx",
				 seg->name, (unsigned long long)seg->size,
				 (unsigned long long)seg->base);
			return MC_ERR_INVALID_PARAMS;
		}
		return 0;
	}
	for (i = 0; i < m->nsegs; i++) {
		const struct mc_segment *o = m->segs[i];

		/* A name is a client's address: two live clients cannot both claim it.  A
		 * silent holder is taken over (mc_segment_take_over_name): a process restarted
		 * on the same host:port must not wait for its predecessor to time out. */
		if (o->client != c && strlen(o->name) == s->name.n &&
		    !memcmp(o->name, s->name.p, s->name.n) && !mc_client_silent(m, o->client)) {
			snprintf(why, n, "segment name %s already mounted by another client",
				 o->name);
			return MC_ERR_SEGMENT_ALREADY_EXISTS;
		}
		/* One client's segments are distinct memory: overlapping ones would hand out
		 * the same bytes twice. */
		if (o->client == c && s->base < o->base + o->size && o->base < s->base + s->size) {
			snprintf(why, n, "overlaps this client's segment %s (%llu bytes at 0x%llx)",
				 o->name, (unsigned long long)o->size,
				 (unsigned long long)o->base);
			return MC_ERR_INVALID_PARAMS;
		}
	}
	return 0;
}

int mc_segment_mount(struct mc_master *m, struct mc_client *c, const struct mc_rpc_segment *s,
		     const uint8_t *token)
{
	struct mc_segment *seg;
	char idbuf[40], why[256];
	int rc = mc_segment_mount_check(m, c, s, why, sizeof(why));

	if (rc)
		return rc;
	seg = mc_segment_lookup(m, &s->id);
	if (seg != NULL && seg->status == MC_SEG_DORMANT) {
		/* Only the process that made the segment knows its token: then the memory and
		 * whatever it still holds are the same. */
		if (seg->has_token && mc_token_given(token) && !memcmp(seg->token, token, 16)) {
			uint32_t i;

			/* Its name went to another process meanwhile: one name, one server. */
			for (i = 0; i < m->nsegs; i++)
				if (m->segs[i]->client != c && !strcmp(m->segs[i]->name, seg->name)) {
					mc_log_warn("segment %s stays dormant: its name is mounted by "
						    "another client now", seg->name);
					return MC_ERR_SEGMENT_ALREADY_EXISTS;
				}
			mc_segment_restore(m, seg);
			return 0;
		}
		/* Another process (a restarted client has new ids; this one lies or is confused):
		 * the dormant records stay until their time is over. */
		mc_uuid_format(&s->id, idbuf);
		mc_log_warn("mount of segment %s (%.*s) refused: it does not prove the memory of the "
			    "dormant segment with that id", idbuf, (int)s->name.n, s->name.p);
		return MC_ERR_INVALID_PARAMS;
	}
	if (seg != NULL) {
		/* The same segment again; a process that gave a token must give the same one. */
		if (mc_token_given(token) && seg->has_token && memcmp(seg->token, token, 16))
			return MC_ERR_INVALID_PARAMS;
		if (mc_token_given(token) && !seg->has_token) {
			memcpy(seg->token, token, 16);
			seg->has_token = 1;
			mc_persist_segment_changed(m, seg);
		}
		return 0;
	}
	seg = mc_xcalloc(1, sizeof(*seg));
	seg->alloc = mc_alloc_new(s->size);
	if (seg->alloc == NULL) {
		free(seg);
		return MC_ERR_INVALID_PARAMS;
	}
	mc_segment_take_over_name(m, c, s->name);
	seg->id = s->id;
	seg->name = mc_strv_dup(s->name);
	seg->endpoint = mc_strv_dup(s->endpoint);
	seg->protocol = mc_strv_dup(s->protocol.n ? s->protocol : mc_strv_c("tcp"));
	seg->base = s->base;
	seg->size = s->size;
	seg->client = c;
	seg->status = MC_SEG_OK;
	if (mc_token_given(token)) {
		memcpy(seg->token, token, 16);
		seg->has_token = 1;
	}
	seg->cnext = c->segs;
	c->segs = seg;
	c->refs++;
	mc_segs_add(m, seg);
	mc_uuid_format(&s->id, idbuf);
	mc_persist_segment_changed(m, seg);
	mc_log_info("segment %s mounted: name %s, %llu bytes at 0x%llx, endpoint %s", idbuf,
		    seg->name, (unsigned long long)seg->size, (unsigned long long)seg->base,
		    seg->endpoint);
	return 0;
}
