/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_SSD_AREA_INT_H
#define MC_SSD_AREA_INT_H

/*
 * Inside an SSD area: the index's objects and the area itself, shared by ssd_area.c (format,
 * reads and writes), ssd_area_index.c (the index), ssd_area_file.c (the single-file layout) and
 * ssd_area_list.c (listings for the master).  Not for other modules.
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

/* Where the value starts in a record: the header and key, padded to a block. */
static inline uint64_t mc_ssd_data_off(size_t key_len)
{
	return (MC_SSD_HDR + key_len + MC_SSD_ALIGN - 1) / MC_SSD_ALIGN * MC_SSD_ALIGN;
}

/* ---- ssd_area_index.c: all under the area's mutex ---- */

/* A new object (not linked) for key with sequence number seq and a value of size bytes; NULL
 * when out of memory.  The caller owns it until mc_ssd_insert links it. */
struct mc_ssd_obj *mc_ssd_obj_new(const char *key, size_t len, uint64_t seq, uint64_t size);
/* Link o under a new slot; an older object of the same key is unlinked and returned in *old
 * (the caller drops its bytes and frees it).  -EEXIST (nothing changed) if the key's object is
 * newer than o. */
int mc_ssd_insert(struct mc_ssd *s, struct mc_ssd_obj *o, struct mc_ssd_obj **old);
/* Take o off the tables and the LRU list (not freed). */
void mc_ssd_unlink(struct mc_ssd *s, struct mc_ssd_obj *o);
struct mc_ssd_obj *mc_ssd_find_key(struct mc_ssd *s, const char *key, size_t len);
struct mc_ssd_obj *mc_ssd_find_slot(struct mc_ssd *s, uint64_t slot);

/* ---- ssd_area.c ---- */

/* Check a record's header and key at off of fd (not its value); want_len: the exact record
 * length the header must give (a file's size), or 0.  A new object (not linked, not verified)
 * or NULL with *why set. */
struct mc_ssd_obj *mc_ssd_check_record(int fd, uint64_t off, uint64_t want_len, const char **why);

/* ---- ssd_area_file.c: the single-file layout ---- */

/* The extent a record of this key length and value size takes: whole blocks. */
uint64_t mc_ssd_file_extent(size_t key_len, uint64_t size);
/* Read the superblock (or make one in a zeroed file) and walk the extents, filling the index
 * and the free list.  0, -EINVAL (not an area, bad superblock) or -errno. */
int mc_ssd_file_scan(struct mc_ssd *s);
/* Write a record (head: header, key and padding; then the value) into a free extent of ext
 * bytes and make it durable.  *at: where it starts.  0, -ENOSPC or -errno.  Takes the lock. */
int mc_ssd_file_write(struct mc_ssd *s, const uint8_t *head, uint64_t hlen, const void *value,
		      uint64_t size, uint64_t ext, uint64_t *at);
/* Free a record's extent: on disk, then in the list.  Takes the lock. */
void mc_ssd_file_release(struct mc_ssd *s, uint64_t off, uint64_t len);

/* The disk-window address the data server serves o's value at. */
static inline uint64_t mc_ssd_addr(const struct mc_ssd_obj *o)
{
	return MC_DISK_SPACE_BASE + (o->slot << MC_SSD_SLOT_SHIFT);
}

#endif
