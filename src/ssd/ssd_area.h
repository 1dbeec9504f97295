/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_SSD_AREA_H
#define MC_SSD_AREA_H

/*
 * A client's SSD area: one directory holding one file per object, under a size limit; or a
 * single-file area, a preallocated file holding the same records in 4 KiB-aligned extents (see
 * the single-file layout of ssd_area_file.c), chosen when the path names an existing regular file.
 *
 * File format (little-endian), name "<16 hex digits of seq>.mco":
 *   off 0  u32 magic "MCSD" (0x4453434D)   4  u32 version (3)
 *       8  u64 seq (newer wins when two files hold the same key)
 *       16 u64 value_len                   24 u32 key_len (1..4096)
 *       28 u32 crc32c over the 64-byte header (this field zero) and the key
 *       32 u64 gen: the master's generation of these bytes (quoted back at registration)
 *       40 u32 crc32c of the value
 *       44 u8 flags: 1 = bytes 48-55 hold the object's checksum (the CRC-64 its writer gave the
 *          master, kept so a restarted owner can register the copy with it); other bits zero
 *       45 3 zero bytes                    48 u64 object checksum (zero without the flag)
 *       56 8 zero bytes
 *   Readers from before the flag refuse (and delete) records that carry a checksum.
 *   64 key bytes, zero padding up to data_off = round_up(64 + key_len, 4096), then the value;
 *   the file is exactly data_off + value_len bytes.
 * Files are written as "<seq>.tmp", fdatasync'ed and renamed (the directory is fsync'ed by
 * mc_ssd_sync), so a crash leaves at most a .tmp (removed at open); a failed or short write,
 * fdatasync or rename deletes the .tmp and stores nothing (the caller keeps its copy).  A torn file or one whose
 * header or key fails its checksum is deleted with a log line when the area is opened; a value
 * that fails its checksum, when mc_ssd_verify checks it (before the object is ever served).
 *
 * Every object stored gets an address in the file window of memreg.h:
 * MC_DISK_SPACE_BASE + slot << 36 (objects up to 64 GiB), so a data server can serve reads of it
 * like memory.  Addresses are per process: after a restart the objects get new ones.
 * Thread-safe (one mutex); file I/O happens outside it.
 */
#include <stddef.h>
#include <stdint.h>

#define MC_SSD_MAX_OBJECT (1ull << 36)
#define MC_SSD_MAX_KEY 4096

struct mc_ssd;

struct mc_ssd_item {
	char *key;		/* malloc'ed, key_len bytes (+ NUL) */
	size_t key_len;
	uint64_t size;
	uint64_t addr;
	uint64_t gen;
	int has_checksum;	/* the object's checksum was stored with it */
	uint64_t checksum;	/* the object's CRC-64, when has_checksum */
	int verified;		/* its value was checked (mc_ssd_verify) */
};

/* Open (creating the directory if needed; a regular file at dir is a single-file area, a zeroed
 * one is formatted, one with other contents refused with -EINVAL) and scan it: headers and
 * keys only, so the cost is one small read per object; values are checked by mc_ssd_verify
 * before anything is served.  limit: bytes the objects may take (0 is refused; a single-file
 * area caps it at its size).  Returns NULL with *err = -errno on failure; corrupt objects are
 * not a failure. */
struct mc_ssd *mc_ssd_open(const char *dir, uint64_t limit, int *err);
void mc_ssd_close(struct mc_ssd *s);

uint64_t mc_ssd_used(struct mc_ssd *s);
uint64_t mc_ssd_limit(const struct mc_ssd *s);
size_t mc_ssd_count(struct mc_ssd *s);
/* Files found corrupt and removed by the last scan. */
size_t mc_ssd_discarded(const struct mc_ssd *s);

/* Bytes a value of size takes on disk. */
uint64_t mc_ssd_footprint(size_t key_len, uint64_t size);
/* Store value[0..size), generation gen, under key (replacing an older copy of key).  *addr
 * receives its address.  0, -ENOSPC (over the limit: evict first), -EINVAL, or -errno of the
 * write. */
int mc_ssd_put(struct mc_ssd *s, const char *key, size_t key_len, const void *value,
	       uint64_t size, uint64_t gen, uint64_t *addr);
/* mc_ssd_put, also storing the object's checksum *ocrc (NULL: none) in the record; it comes
 * back in the items of mc_ssd_list after a restart (has_checksum, checksum). */
int mc_ssd_put_checksummed(struct mc_ssd *s, const char *key, size_t key_len, const void *value,
			   uint64_t size, uint64_t gen, const uint64_t *ocrc, uint64_t *addr);
/* Check the value of key's object at addr against its checksum (once; objects written by this
 * process need none).  A corrupt object is deleted with a log line.  0, -EBADMSG (corrupt:
 * deleted), -ENOENT (gone or replaced), or -errno.  Until it returns 0 an object found at open
 * is not served (mc_ssd_open_range and mc_ssd_read answer -ENOENT). */
int mc_ssd_verify(struct mc_ssd *s, const char *key, size_t key_len, uint64_t addr);
/* Make the names of the objects stored since the last call durable (one fsync of the
 * directory; mc_ssd_put already made their bytes durable).  Call before telling anyone an object
 * is stored.  0 or -errno (then the next call tries again). */
int mc_ssd_sync(struct mc_ssd *s);
/* Delete key's object; with addr != 0 only if it is still the one at addr.  0 or -ENOENT. */
int mc_ssd_remove(struct mc_ssd *s, const char *key, size_t key_len, uint64_t addr);
/* Resolve [addr, addr+len) to a new descriptor and a file offset (mc_memreg_file_fn).  Counts as
 * a use for the LRU order. */
int mc_ssd_open_range(void *s, uint64_t addr, uint64_t len, int *fd, uint64_t *off);
/* Read len bytes at addr into buf.  A read of a whole value is checked against its checksum;
 * a value that fails it, or a file shorter than its record, is deleted with a log line and
 * -EBADMSG returned (the caller tells the master the copy is lost).  0, -ENOENT (unknown, not
 * verified, or its file changed since: see mc_ssd_suspects), -EBADMSG or -errno. */
int mc_ssd_read(struct mc_ssd *s, uint64_t addr, void *buf, uint64_t len);
/* Objects whose file changed after their value was written or verified (mc_ssd_open_range
 * found its inode, size or ctime different, e.g. truncated or rewritten in place): they are not
 * served until mc_ssd_verify checks them again (which deletes them if they fail).  *out is
 * malloc'ed (mc_ssd_items_free).  Count or -ENOMEM.  Single-file areas have none: a change
 * inside the area file cannot be told from its own writes. */
long mc_ssd_suspects(struct mc_ssd *s, struct mc_ssd_item **out);
/* All objects (or the max least recently used, oldest first).  *out is malloc'ed; free with
 * mc_ssd_items_free.  Returns the count, or -ENOMEM. */
long mc_ssd_list(struct mc_ssd *s, int lru_order, size_t max, struct mc_ssd_item **out);
void mc_ssd_items_free(struct mc_ssd_item *items, size_t n);


#endif
