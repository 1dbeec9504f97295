/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Segments mounted on a running store handle, and their unmounting by id: memory the handle
 * allocates (mc_store_mount_segment, mc_store_mount_alloc) or a file the caller names, its pages
 * mapped MAP_SHARED (mc_store_mount_file).  These are upstream's mount_segment,
 * allocate_and_mount_segment, unmount_segment and unmount_and_free_segment; and
 * unmount_local_disk_segment, which takes the handle's SSD area out of service.
 *
 * Invariants: st->segs holds exactly the segments the master was asked to mount and has not
 * been asked to unmount; st->mu guards the list (the loop thread reads it for pings and
 * remounts).  A segment's memory is registered with the engine before the master hears of it
 * and unregistered only after the master dropped it, so no replica the master hands out ever
 * points at memory that is gone.  An unmount with a grace period leaves the segment mounted and
 * serving until then; the handle's retirer thread (started on first use, joined by teardown)
 * unmounts it at its deadline.  Any caller thread; the master calls go through the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/errcode.h"
#include "common/log.h"
#include "store/store.h"

/* Upstream allocates store segments in slabs of 16 MiB. */
#define MC_STORE_SLAB (16ull << 20)

void mc_store_segment_id_str(const struct mc_uuid *id, char out[MC_STORE_SEGMENT_ID_LEN])
{
	uint64_t hi = 0, lo = 0;
	int i;

	for (i = 0; i < 8; i++) {
		hi = hi << 8 | id->b[i];
		lo = lo << 8 | id->b[8 + i];
	}
	snprintf(out, MC_STORE_SEGMENT_ID_LEN, "%" PRIu64 "-%" PRIu64, hi, lo);
}

int mc_store_segment_id_parse(const char *s, struct mc_uuid *id)
{
	unsigned long long hi, lo;
	char *end;
	int i;

	if (s == NULL || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	hi = strtoull(s, &end, 10);
	if (errno || *end != '-' || end[1] < '0' || end[1] > '9')
		return -EINVAL;
	lo = strtoull(end + 1, &end, 10);
	if (errno || *end != '\0')
		return -EINVAL;
	for (i = 7; i >= 0; i--) {
		id->b[i] = (uint8_t)hi;
		id->b[8 + i] = (uint8_t)lo;
		hi >>= 8;
		lo >>= 8;
	}
	return 0;
}

static int mc_store_token(uint8_t out[16])
{
	size_t got = 0;

	while (got < 16) {
		ssize_t n = getrandom(out + got, 16 - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	return 0;
}

int mc_store_mount_mem(struct mc_store *st, struct mc_segmem *mem, int origin,
		       const char *location, struct mc_uuid *id_out)
{
	struct mc_store_segment seg = { .memfd = mem->fd, .mem = mem, .origin = origin };
	struct mc_rpc_call call;
	uint32_t i;
	int rc;

	seg.base = mem->base;
	seg.size = mem->size;
	mc_uuid_generate(&seg.id);
	if (mc_store_token(seg.token) != 0) {
		mc_log_err("cannot make a segment token: %s", strerror(errno));
		return MC_ERR_INTERNAL;
	}
	if (location == NULL)
		location = st->memopts.location[0] ? st->memopts.location : "*";
	rc = mc_store_register_at(st, seg.base, seg.size, location);
	if (rc)
		return rc;
	mc_rpc_call_init(&call, MC_OP_MOUNT_SEGMENT);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	pthread_mutex_lock(&st->mu);
	if (st->nsegs >= MC_STORE_MAX_SEGMENTS) {
		pthread_mutex_unlock(&st->mu);
		mc_rpc_call_fini(&call);
		mc_store_unregister(st, seg.base);
		mc_log_err("cannot mount more than %d segments", MC_STORE_MAX_SEGMENTS);
		return MC_ERR_INVALID_PARAMS;
	}
	i = st->nsegs++;
	st->segs[i] = seg;
	mc_store_put_segment(st, &call.req, i);
	mc_store_put_segment_token(st, &call.req, i);
	pthread_mutex_unlock(&st->mu);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	mc_rpc_call_fini(&call);
	if (rc) {
		mc_log_err("MountSegment of %llu bytes at master %s failed: %s",
			   (unsigned long long)seg.size, st->master_addr, mc_strerror(rc));
		pthread_mutex_lock(&st->mu);
		for (i = 0; i < st->nsegs; i++)
			if (memcmp(&st->segs[i].id, &seg.id, sizeof(seg.id)) == 0) {
				memmove(&st->segs[i], &st->segs[i + 1],
					(st->nsegs - i - 1) * sizeof(st->segs[0]));
				st->nsegs--;
				break;
			}
		pthread_mutex_unlock(&st->mu);
		mc_store_unregister(st, seg.base);
		return rc;
	}
	if (id_out)
		*id_out = seg.id;
	return 0;
}

int mc_store_mount_segment(struct mc_store *st, uint64_t size)
{
	struct mc_segmem *mem = calloc(1, sizeof(*mem));
	char err[512];
	int rc;
	struct mc_segmem_opts o = st->memopts;

	if (mem == NULL)
		return MC_ERR_INTERNAL;
	o.gather_thp = 1;	/* other processes write into it */
	if (mc_segmem_create(mem, size, "mooncake-segment", &o, err, sizeof(err)) != 0) {
		mc_log_err("cannot create a %llu-byte segment: %s", (unsigned long long)size, err);
		free(mem);
		return MC_ERR_INVALID_PARAMS;
	}
	rc = mc_store_mount_mem(st, mem, MC_STORE_SEG_SETUP, NULL, NULL);
	if (rc) {
		mc_segmem_free(mem);
		free(mem);
	}
	return rc;
}

/* The placement a mount asks for: the handle's options with location's NUMA placement
 * ("" or "*": the handle's own).  0, or -1 with the reason logged. */
static int mc_store_mount_location(struct mc_store *st, const char *what, const char *location,
				   struct mc_segmem_opts *o)
{
	char err[512];

	*o = st->memopts;
	if (location == NULL || *location == '\0' || !strcmp(location, "*"))
		return 0;
	if (mc_segmem_parse_location(location, o, err, sizeof(err)) != 0) {
		mc_log_err("%s: %s", what, err);
		return -1;
	}
	return 0;
}

int mc_store_mount_alloc(struct mc_store *st, uint64_t size, const char *location,
			 struct mc_uuid *id, uint64_t *allocated)
{
	struct mc_segmem_opts o;
	struct mc_segmem *mem;
	char err[512];
	int rc;

	if (size == 0 || size > UINT64_MAX - MC_STORE_SLAB) {
		mc_log_err("allocate_and_mount_segment: invalid size %llu", (unsigned long long)size);
		return -1;
	}
	if (mc_store_mount_location(st, "allocate_and_mount_segment", location, &o) != 0)
		return -1;
	size = (size + MC_STORE_SLAB - 1) / MC_STORE_SLAB * MC_STORE_SLAB;
	mem = calloc(1, sizeof(*mem));
	if (mem == NULL)
		return -1;
	o.gather_thp = 1;
	if (mc_segmem_create(mem, size, "mooncake-segment", &o, err, sizeof(err)) != 0) {
		mc_log_err("cannot create a %llu-byte segment: %s", (unsigned long long)size, err);
		free(mem);
		return -1;
	}
	rc = mc_store_mount_mem(st, mem, MC_STORE_SEG_ALLOC, o.location[0] ? o.location : "*", id);
	if (rc) {
		mc_segmem_free(mem);
		free(mem);
		return rc;
	}
	*allocated = size;
	return 0;
}

int mc_store_mount_file(struct mc_store *st, const char *path, uint64_t offset, uint64_t size,
			const char *location, struct mc_uuid *id)
{
	long page = sysconf(_SC_PAGESIZE);
	struct mc_segmem_opts o;
	struct mc_segmem *mem;
	struct stat sb;
	void *p;
	int fd, rc;

	if (mc_store_mount_location(st, "mount_segment", location, &o) != 0)
		return -1;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		mc_log_err("mount_segment: cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || offset > (uint64_t)sb.st_size ||
	    size > (uint64_t)sb.st_size - offset || offset % (uint64_t)page) {
		mc_log_err("mount_segment: [%llu, +%llu) of %s is not a page-aligned range of a "
			   "regular file of %lld bytes", (unsigned long long)offset,
			   (unsigned long long)size, path, (long long)sb.st_size);
		close(fd);
		return -1;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
	close(fd);
	if (p == MAP_FAILED) {
		mc_log_err("mount_segment: cannot map %s: %s", path, strerror(errno));
		return -1;
	}
	mem = calloc(1, sizeof(*mem));
	if (mem == NULL) {
		munmap(p, size);
		return -1;
	}
	mem->base = p;
	mem->size = size;
	mem->map_len = size;
	mem->page_size = (uint64_t)page;
	mem->fd = -1;
	mem->populated = size;		/* the file's pages: nothing to populate */
	rc = mc_store_mount_mem(st, mem, MC_STORE_SEG_FILE, o.location[0] ? o.location : "*", id);
	if (rc) {
		mc_segmem_free(mem);
		free(mem);
		return -1;
	}
	return 0;
}

/* Unmounts asked for with a grace period: the segment keeps serving (and stays mounted) until
 * its deadline, then a thread of the handle unmounts it as without one. */
struct mc_store_retire {
	struct mc_store_retire *next;
	struct mc_uuid id;
	int origin;
	int64_t due_ms;			/* mc_store_now_ms() */
};

struct mc_store_retirer {
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* on CLOCK_MONOTONIC */
	pthread_t thread;
	int stop;
	struct mc_store_retire *list;
};

static void *mc_store_retirer_main(void *arg)
{
	struct mc_store *st = arg;
	struct mc_store_retirer *r = st->retirer;

	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		struct mc_store_retire **pp, **first = NULL, *e;
		int64_t now = mc_store_now_ms();

		for (pp = &r->list; *pp; pp = &(*pp)->next)
			if (first == NULL || (*pp)->due_ms < (*first)->due_ms)
				first = pp;
		if (first == NULL) {
			pthread_cond_wait(&r->cv, &r->mu);
			continue;
		}
		if ((*first)->due_ms > now) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += ((*first)->due_ms - now) / 1000;
			ts.tv_nsec += ((*first)->due_ms - now) % 1000 * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&r->cv, &r->mu, &ts);
			continue;
		}
		e = *first;
		*first = e->next;
		pthread_mutex_unlock(&r->mu);
		if (mc_store_unmount_id(st, &e->id, e->origin, 0) != 0)
			mc_log_warn("unmount after the grace period failed (segment gone already?)");
		free(e);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Queue id's unmount for grace_ms from now, starting the handle's retirer on first use. */
static int mc_store_retire_later(struct mc_store *st, const struct mc_uuid *id, int origin,
				 uint64_t grace_ms)
{
	struct mc_store_retire *e = calloc(1, sizeof(*e));
	struct mc_store_retirer *r;
	int rc = 0;

	if (e == NULL)
		return MC_ERR_INTERNAL;
	e->id = *id;
	e->origin = origin;
	e->due_ms = mc_store_now_ms() + (int64_t)(grace_ms > INT32_MAX ? INT32_MAX : grace_ms);
	pthread_mutex_lock(&st->mu);
	r = st->retirer;
	if (r == NULL) {
		pthread_condattr_t ca;

		r = calloc(1, sizeof(*r));
		if (r == NULL) {
			rc = MC_ERR_INTERNAL;
			goto out;
		}
		pthread_mutex_init(&r->mu, NULL);
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&r->cv, &ca);
		pthread_condattr_destroy(&ca);
		st->retirer = r;
		if (pthread_create(&r->thread, NULL, mc_store_retirer_main, st) != 0) {
			st->retirer = NULL;
			pthread_cond_destroy(&r->cv);
			pthread_mutex_destroy(&r->mu);
			free(r);
			rc = MC_ERR_INTERNAL;
			goto out;
		}
	}
	pthread_mutex_lock(&r->mu);
	e->next = r->list;
	r->list = e;
	e = NULL;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
out:
	pthread_mutex_unlock(&st->mu);
	free(e);
	return rc;
}

void mc_store_retire_stop(struct mc_store *st)
{
	struct mc_store_retirer *r = st->retirer;

	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	while (r->list) {		/* teardown unmounts every segment anyway */
		struct mc_store_retire *e = r->list;

		r->list = e->next;
		free(e);
	}
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
	st->retirer = NULL;
}

int mc_store_unmount_rpc(struct mc_store *st, const struct mc_uuid *id)
{
	struct mc_rpc_call call;
	int rc;

	mc_rpc_call_init(&call, MC_OP_UNMOUNT_SEGMENT);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_rpc_put_uuid(&call.req, id);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	mc_rpc_call_fini(&call);
	return rc;
}

int mc_store_unmount_id(struct mc_store *st, const struct mc_uuid *id, int origin,
			uint64_t grace_ms)
{
	struct mc_store_segment seg;
	uint32_t i;
	int rc, found = 0;

	pthread_mutex_lock(&st->mu);
	for (i = 0; i < st->nsegs && !found; i++)
		found = st->segs[i].origin == origin &&
			memcmp(&st->segs[i].id, id, sizeof(*id)) == 0;
	pthread_mutex_unlock(&st->mu);
	if (!found)
		return -1;
	if (grace_ms)
		return mc_store_retire_later(st, id, origin, grace_ms);
	rc = mc_store_unmount_rpc(st, id);
	if (rc)
		return rc;
	found = 0;
	pthread_mutex_lock(&st->mu);
	for (i = 0; i < st->nsegs; i++)
		if (memcmp(&st->segs[i].id, id, sizeof(*id)) == 0) {
			seg = st->segs[i];
			memmove(&st->segs[i], &st->segs[i + 1],
				(st->nsegs - i - 1) * sizeof(st->segs[0]));
			st->nsegs--;
			found = 1;
			break;
		}
	pthread_mutex_unlock(&st->mu);
	if (!found)			/* unmounted by another thread meanwhile */
		return -1;
	mc_store_unregister(st, seg.base);
	mc_segmem_free(seg.mem);
	free(seg.mem);
	return 0;
}

int mc_store_unmount_local_disk(struct mc_store *st, uint64_t grace_ms)
{
	struct timespec ts = { (time_t)(grace_ms / 1000), (long)(grace_ms % 1000) * 1000000L };

	if (!st->initialized)
		return MC_ERR_INVALID_PARAMS;
	if (st->ssdw == NULL) {
		mc_log_warn("unmount_local_disk_segment: no SSD area (enable_ssd_offload is off)");
		return 0;
	}
	mc_store_ssd_stop(st);
	mc_log_info("unmount_local_disk_segment: the SSD area is out of service");
	while (grace_ms && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	return 0;
}
