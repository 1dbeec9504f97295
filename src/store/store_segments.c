/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Segments mounted and unmounted while the client runs (upstream's RealClient::mountSegment,
 * allocateAndMountSegment, unmountSegment, unmountAndFreeSegment, drainLocalDiskSegment; the
 * Python store's methods of those names and mc_store_rest_server's /api/mount* endpoints).
 *
 * A segment mapped from a file (a /dev/shm object another process filled, say) is mounted as
 * it is: its bytes are not changed; one allocated here comes from segment/segmem.c like the
 * set-up's.  Each is one more entry of st->segs (so ReMountSegment after a master restart
 * carries it too), told apart by its origin: unmount_segment takes only file-mapped ones,
 * unmount_and_free_segment only allocated ones, as upstream.  Unmounting tells the master
 * first (it drops the replicas there and places nothing more), waits out the grace period so
 * that reads already granted finish, then unregisters and unmaps.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/errcode.h"
#include "common/log.h"
#include "segment/segmem.h"
#include "store/store.h"

int mc_store_mount_file(struct mc_store *st, const char *path, uint64_t size, uint64_t offset,
			struct mc_uuid *id)
{
	long page = sysconf(_SC_PAGESIZE);
	struct mc_segmem *mem;
	struct stat sb;
	void *p;
	int fd;

	if (!st->initialized || size == 0)
		return MC_ERR_INVALID_PARAMS;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		mc_log_err("mount_segment: cannot open %s: %s", path, strerror(errno));
		return MC_ERR_INVALID_PARAMS;
	}
	if (fstat(fd, &sb) != 0 || offset > (uint64_t)sb.st_size ||
	    size > (uint64_t)sb.st_size - offset || offset % (uint64_t)page) {
		mc_log_err("mount_segment: [%llu, +%llu) of %s is not a page-aligned range inside "
			   "its %lld bytes", (unsigned long long)offset, (unsigned long long)size,
			   path, (long long)sb.st_size);
		close(fd);
		return MC_ERR_INVALID_PARAMS;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
	close(fd);
	if (p == MAP_FAILED) {
		mc_log_err("mount_segment: cannot map %s: %s", path, strerror(errno));
		return MC_ERR_INVALID_PARAMS;
	}
	mem = calloc(1, sizeof(*mem));
	if (mem == NULL) {
		munmap(p, size);
		return MC_ERR_INTERNAL;
	}
	mem->base = p;
	mem->size = size;
	mem->map_len = size;
	mem->page_size = (uint64_t)page;
	mem->fd = -1;
	mem->populated = size;
	mc_log_info("mount_segment: %s [%llu, +%llu) at %p", path, (unsigned long long)offset,
		    (unsigned long long)size, p);
	return mc_store_mount_mem(st, mem, MC_STORE_SEG_FILE, id);
}

int mc_store_allocate_and_mount(struct mc_store *st, uint64_t size, struct mc_uuid *id,
				uint64_t *allocated)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	int rc;

	if (!st->initialized || size == 0 || size > UINT64_MAX - page)
		return MC_ERR_INVALID_PARAMS;
	size = (size + page - 1) / page * page;
	rc = mc_store_mount_new(st, size, MC_STORE_SEG_ALLOCATED, id);
	if (rc == 0 && allocated)
		*allocated = size;
	return rc;
}

static void mc_sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int mc_store_unmount_id(struct mc_store *st, const struct mc_uuid *id, int origin,
			uint64_t grace_ms)
{
	struct mc_store_segment seg;
	struct mc_rpc_call call;
	uint32_t i;
	int rc, found = 0;

	if (!st->initialized)
		return MC_ERR_INVALID_PARAMS;
	pthread_mutex_lock(&st->mu);
	for (i = 0; i < st->nsegs && !found; i++)
		found = !memcmp(&st->segs[i].id, id, sizeof(*id)) && st->segs[i].origin == origin;
	pthread_mutex_unlock(&st->mu);
	if (!found)
		return MC_ERR_INVALID_PARAMS;
	mc_rpc_call_init(&call, MC_OP_UNMOUNT_SEGMENT);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_rpc_put_uuid(&call.req, id);
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	mc_rpc_call_fini(&call);
	if (rc && rc != MC_ERR_SEGMENT_NOT_FOUND) {
		mc_log_err("UnmountSegment at master %s failed: %s", st->master_addr,
			   mc_strerror(rc));
		return rc;
	}
	if (grace_ms)
		mc_sleep_ms(grace_ms);
	found = 0;
	pthread_mutex_lock(&st->mu);
	for (i = 0; i < st->nsegs; i++)
		if (!memcmp(&st->segs[i].id, id, sizeof(*id))) {
			seg = st->segs[i];
			memmove(&st->segs[i], &st->segs[i + 1],
				(st->nsegs - i - 1) * sizeof(st->segs[0]));
			st->nsegs--;
			found = 1;
			break;
		}
	pthread_mutex_unlock(&st->mu);
	if (!found)
		return 0;	/* another caller got there first */
	mc_store_unregister(st, seg.base);
	mc_segmem_free(seg.mem);
	free(seg.mem);
	return 0;
}

int mc_store_unmount_local_disk(struct mc_store *st, uint64_t grace_ms)
{
	if (!st->initialized)
		return MC_ERR_INVALID_PARAMS;
	if (st->ssdw == NULL) {
		mc_log_warn("unmount_local_disk_segment: no SSD area (enable_ssd_offload is off)");
		return 0;
	}
	mc_store_ssd_stop(st);
	mc_log_info("unmount_local_disk_segment: the SSD area is out of service");
	if (grace_ms)
		mc_sleep_ms(grace_ms);
	return 0;
}
