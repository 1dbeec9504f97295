/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The single-file layout of an SSD area (ssd_area.c), chosen when the area's path names an
 * existing regular file.
 *
 * The area is one preallocated file: a 4 KiB superblock, then extents of whole 4 KiB blocks, each
 * starting with either an object record (the same bytes as an object file) or a free-extent
 * header.  The scan walks the chain of extents; a block that holds neither (a torn write) is
 * freed one block at a time.  Space is taken first-fit from the free list; an extent given back
 * gets a free header on disk at once, and one split off gets its header before the record that
 * takes its front is written, so the chain is whole after any crash.
 * Called with the area's mutex where noted, otherwise from the one thread that writes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "common/wire.h"
#include "ssd/ssd_area.h"
#include "ssd/ssd_area_int.h"
#include "ssd/tier_io.h"

#define MC_SA_MAGIC 0x4153434Du		/* "MCSA": superblock */
#define MC_SA_FREE_MAGIC 0x4653434Du	/* "MCSF": free extent */
#define MC_SA_VERSION 1

uint64_t mc_ssd_file_extent(size_t key_len, uint64_t size)
{
	return (mc_ssd_data_off(key_len) + size + MC_SSD_ALIGN - 1) / MC_SSD_ALIGN * MC_SSD_ALIGN;
}

/* Write the free header of [off, off+len). */
static int mc_ssd_file_mark_free(struct mc_ssd *s, uint64_t off, uint64_t len)
{
	uint8_t h[MC_SSD_HDR];

	memset(h, 0, sizeof(h));
	mc_put_le32(h, MC_SA_FREE_MAGIC);
	mc_put_le32(h + 4, MC_SA_VERSION);
	mc_put_le64(h + 8, len);
	mc_put_le32(h + 16, mc_crc32c(0, h, 16));
	return mc_tier_pwrite(MC_FAULT_SSD_WRITE, s->afd, h, sizeof(h), (off_t)off);
}

/* Under the lock: give [off, off+len) back to the free list, merged with its neighbours. */
static int mc_ssd_file_give(struct mc_ssd *s, uint64_t off, uint64_t len)
{
	size_t i = 0;

	while (i < s->nfree && s->free_ext[i].off < off)
		i++;
	if (i > 0 && s->free_ext[i - 1].off + s->free_ext[i - 1].len == off) {
		s->free_ext[i - 1].len += len;
		if (i < s->nfree && off + len == s->free_ext[i].off) {
			s->free_ext[i - 1].len += s->free_ext[i].len;
			memmove(&s->free_ext[i], &s->free_ext[i + 1],
				(s->nfree - i - 1) * sizeof(*s->free_ext));
			s->nfree--;
		}
		return 0;
	}
	if (i < s->nfree && off + len == s->free_ext[i].off) {
		s->free_ext[i].off = off;
		s->free_ext[i].len += len;
		return 0;
	}
	if (s->nfree == s->capfree) {
		size_t cap = s->capfree ? s->capfree * 2 : 64;
		struct mc_ssd_ext *n = realloc(s->free_ext, cap * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;	/* the space is lost until the next open */
		s->free_ext = n;
		s->capfree = cap;
	}
	memmove(&s->free_ext[i + 1], &s->free_ext[i], (s->nfree - i) * sizeof(*s->free_ext));
	s->free_ext[i].off = off;
	s->free_ext[i].len = len;
	s->nfree++;
	return 0;
}

/* Under the lock: take len bytes first-fit.  *rest: bytes left of the extent it came from
 * (their free header must be written at *off + len).  0 or -ENOSPC. */
static int mc_ssd_file_take(struct mc_ssd *s, uint64_t len, uint64_t *off, uint64_t *rest)
{
	size_t i;

	for (i = 0; i < s->nfree; i++)
		if (s->free_ext[i].len >= len) {
			*off = s->free_ext[i].off;
			*rest = s->free_ext[i].len - len;
			if (*rest) {
				s->free_ext[i].off += len;
				s->free_ext[i].len = *rest;
			} else {
				memmove(&s->free_ext[i], &s->free_ext[i + 1],
					(s->nfree - i - 1) * sizeof(*s->free_ext));
				s->nfree--;
			}
			return 0;
		}
	return -ENOSPC;
}

/* Free a record's extent: on disk, then in the list. */
void mc_ssd_file_release(struct mc_ssd *s, uint64_t off, uint64_t len)
{
	if (mc_ssd_file_mark_free(s, off, len) != 0)
		mc_log_warn("SSD area %s: marking %llu bytes at %llu free failed", s->dir,
			    (unsigned long long)len, (unsigned long long)off);
	pthread_mutex_lock(&s->mu);
	mc_ssd_file_give(s, off, len);
	pthread_mutex_unlock(&s->mu);
}

/* Write a record (head: header, key and padding; then the value) into a free extent of ext
 * bytes and make it durable.  *at: where it starts.  0, -ENOSPC or -errno. */
int mc_ssd_file_write(struct mc_ssd *s, const uint8_t *head, uint64_t hlen, const void *value,
		       uint64_t size, uint64_t ext, uint64_t *at)
{
	uint64_t off, rest;
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = mc_ssd_file_take(s, ext, &off, &rest);
	pthread_mutex_unlock(&s->mu);
	if (rc)
		return rc;
	rc = rest ? mc_ssd_file_mark_free(s, off + ext, rest) : 0;
	if (rc == 0)
		rc = mc_tier_pwrite(MC_FAULT_SSD_WRITE, s->afd, head, (size_t)hlen, (off_t)off);
	if (rc == 0)
		rc = mc_tier_pwrite(MC_FAULT_SSD_WRITE, s->afd, value, (size_t)size, (off_t)(off + hlen));
	if (rc == 0)
		rc = mc_tier_sync(MC_FAULT_SSD_FSYNC, s->afd, 0);
	if (rc) {
		mc_ssd_file_release(s, off, ext);
		return rc;
	}
	*at = off;
	return 0;
}

int mc_ssd_file_scan(struct mc_ssd *s)
{
	uint8_t sb[MC_SSD_ALIGN], h[MC_SSD_HDR];
	uint64_t pos = MC_SSD_ALIGN, torn = 0;
	size_t kept = 0, i;
	int rc;

	rc = mc_tier_pread(s->afd, sb, sizeof(sb), 0);
	if (rc)
		return rc;
	if (mc_get_le32(sb) != MC_SA_MAGIC) {
		for (i = 0; i < sizeof(sb) && sb[i] == 0; i++)
			;
		if (i < sizeof(sb)) {
			mc_log_err("SSD area %s: the file is neither empty nor an SSD area", s->dir);
			return -EINVAL;
		}
		/* A new (zeroed, preallocated) file: one free extent after the superblock. */
		mc_put_le32(sb, MC_SA_MAGIC);
		mc_put_le32(sb + 4, MC_SA_VERSION);
		mc_put_le64(sb + 8, s->asize);
		mc_put_le32(sb + 16, mc_crc32c(0, sb, 16));
		rc = mc_ssd_file_mark_free(s, MC_SSD_ALIGN, s->asize - MC_SSD_ALIGN);
		if (rc == 0)
			rc = mc_tier_pwrite(MC_FAULT_SSD_WRITE, s->afd, sb, 64, 0);
		if (rc == 0 && fdatasync(s->afd) != 0)
			rc = -errno;
		if (rc)
			return rc;
		mc_log_info("SSD area %s: new single-file area of %llu bytes", s->dir,
			    (unsigned long long)s->asize);
	} else if (mc_get_le32(sb + 4) != MC_SA_VERSION || mc_get_le64(sb + 8) != s->asize ||
		   mc_get_le32(sb + 16) != mc_crc32c(0, sb, 16)) {
		mc_log_err("SSD area %s: bad superblock (version, size or checksum)", s->dir);
		return -EINVAL;
	}
	while (pos + MC_SSD_ALIGN <= s->asize) {
		const char *why = NULL;
		struct mc_ssd_obj *o, *old;
		uint64_t len;

		rc = mc_tier_pread(s->afd, h, sizeof(h), (off_t)pos);
		if (rc)
			return rc;
		if (mc_get_le32(h) == MC_SA_FREE_MAGIC && mc_get_le32(h + 4) == MC_SA_VERSION &&
		    mc_get_le32(h + 16) == mc_crc32c(0, h, 16)) {
			len = mc_get_le64(h + 8);
			if (len && len % MC_SSD_ALIGN == 0 && len <= s->asize - pos) {
				mc_ssd_file_give(s, pos, len);
				pos += len;
				continue;
			}
		}
		o = mc_get_le32(h) == MC_SSD_MAGIC ? mc_ssd_check_record(s->afd, pos, 0, &why) : NULL;
		if (o != NULL && (len = mc_ssd_file_extent(o->key_len, o->size)) <= s->asize - pos) {
			o->off = pos;
			o->foot = len;
			if (o->seq >= s->next_seq)
				s->next_seq = o->seq + 1;
			if (mc_ssd_insert(s, o, &old) != 0) {
				free(o);	/* an older copy of a key we hold */
				mc_ssd_file_mark_free(s, pos, len);
				mc_ssd_file_give(s, pos, len);
			} else if (old) {
				mc_ssd_file_mark_free(s, old->off, old->foot);
				mc_ssd_file_give(s, old->off, old->foot);
				free(old);
			} else {
				kept++;
			}
			pos += len;
			continue;
		}
		free(o);
		/* Neither: a torn write.  Free one block and look at the next. */
		mc_ssd_file_mark_free(s, pos, MC_SSD_ALIGN);
		mc_ssd_file_give(s, pos, MC_SSD_ALIGN);
		pos += MC_SSD_ALIGN;
		torn++;
	}
	if (torn) {
		s->discarded++;
		mc_log_warn("SSD area %s: %llu torn blocks freed", s->dir, (unsigned long long)torn);
	}
	mc_log_info("SSD area %s: %zu objects (values not yet verified), %llu of %llu bytes used",
		    s->dir, kept, (unsigned long long)s->used, (unsigned long long)s->limit);
	return 0;
}
