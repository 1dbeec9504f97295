/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_SSD_INT_H
#define MC_SSD_INT_H

/*
 * Inside an SSD area: the index's objects and the area itself, shared by ssd_store.c (format,
 * index, reads and writes) and ssd_list.c (listings for the master).  Not for other modules.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "transfer/memreg.h"

#define MC_SSD_MAGIC 0x4453434Du
#define MC_SSD_VERSION 3
#define MC_SSD_HAS_OCRC 0x01	/* header byte 44: bytes 48-55 hold the object's checksum */
#define MC_SSD_HDR 64
#define MC_SSD_ALIGN 4096
#define MC_SSD_SLOT_SHIFT 36
#define MC_SSD_SCAN_BUF (1u << 20)

struct mc_ssd_ext {
	uint64_t off, len;
};

struct mc_ssd_obj {
	struct mc_ssd_obj *knext, *snext;
	struct mc_ssd_obj *lru_prev, *lru_next;
	uint64_t seq, slot, size, foot, gen;
	uint32_t khash;
	uint32_t vcrc;			/* checksum of the value, from the header */
	int has_ocrc;			/* the object's own checksum (CRC-64) was stored with it */
	uint64_t ocrc;
	uint64_t off;			/* single-file area: where its record starts */
	int verified;			/* value checked against vcrc (or written by us) */
	int suspect;			/* its file changed after it was checked: verify again */
	/* Directory area: the file as it was when its value was written or last verified (inode,
	 * size, ctime).  Any later change through the file system changes one of them. */
	uint64_t fp_ino, fp_size;
	int64_t fp_ctime_ns;
	size_t key_len;
	char key[];
};

struct mc_ssd {
	pthread_mutex_t mu;
	char *dir;
	uint64_t limit, used;
	uint64_t next_seq, next_slot;
	struct mc_ssd_obj **kb, **sb;	/* buckets by key hash, by slot */
	size_t nb, count;
	struct mc_ssd_obj lru;		/* sentinel: lru.lru_next is the least recently used */
	size_t discarded;
	int dir_dirty;			/* renames since the last mc_ssd_sync */
	/* Single-file area (dir names a preallocated file): its descriptor, size, free extents
	 * (sorted by offset, adjacent ones merged). */
	int single;
	int afd;
	uint64_t asize;
	struct mc_ssd_ext *free_ext;
	size_t nfree, capfree;
	uint64_t dir_syncs;
	size_t nsuspect;		/* objects with suspect set */
};

/* The disk-window address the data server serves o's value at. */
static inline uint64_t mc_ssd_addr(const struct mc_ssd_obj *o)
{
	return MC_DISK_SPACE_BASE + (o->slot << MC_SSD_SLOT_SHIFT);
}

#endif
