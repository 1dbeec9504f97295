/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SSD area of a store client: the disk tier a client contributes besides its memory
 * (format and contract in ssd_area.h).  This file holds the object files and records, the
 * directory scan at open, and the operations (put, verify, remove, read, open_range); the
 * index is in ssd_area_index.c, the single-file layout in ssd_area_file.c, the listings for the
 * master in ssd_area_list.c, the shared structures in ssd_area_int.h, whole-file I/O in
 * tier_io.c.
 *
 * The index maps keys and address slots to objects (two chained hash tables) and keeps the
 * objects on an LRU list (reads through the data server and writes move an object to the
 * most-recently-used end).  The mutex guards the index only: writes build the file as
 * "<seq>.tmp" without it and publish with rename + insert under it; a reader opens the file
 * under it, so a concurrent delete at worst leaves the reader an open, unlinked file.  In a
 * single-file area a record is written into an extent taken under the lock and readers get a
 * duplicate of the area's descriptor: like memory, a deleted object's extent may be reused, so
 * deletions rely on the master's leases (as memory replicas do).
 * Called from the store's SSD worker thread (store_tier_ssd.c) and (open_range) from the data
 * server's file-read workers.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "common/wire.h"
#include "ssd/ssd_area.h"
#include "ssd/ssd_area_int.h"
#include "ssd/tier_io.h"

/* ---------------------------------------------------------------- files */

static void mc_ssd_path(const struct mc_ssd *s, uint64_t seq, const char *ext, char *out,
			size_t n)
{
	snprintf(out, n, "%s/%016" PRIx64 ".%s", s->dir, seq, ext);
}

/* Delete the bytes of o (already unlinked from the index): its file, or its extent. */
static void mc_ssd_drop_data(struct mc_ssd *s, const struct mc_ssd_obj *o)
{
	char path[4200];

	if (s->single) {
		mc_ssd_file_release(s, o->off, o->foot);
		return;
	}
	mc_ssd_path(s, o->seq, "mco", path, sizeof(path));
	unlink(path);
}

/* Under the lock: a new descriptor to read o's record, and where the record starts in it.
 * -errno if its file cannot be opened. */
static int mc_ssd_open_data(struct mc_ssd *s, const struct mc_ssd_obj *o, uint64_t *base)
{
	char path[4200];
	int fd;

	if (s->single) {
		fd = fcntl(s->afd, F_DUPFD_CLOEXEC, 0);
		*base = o->off;
	} else {
		mc_ssd_path(s, o->seq, "mco", path, sizeof(path));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		*base = 0;
	}
	return fd < 0 ? -errno : fd;
}

uint64_t mc_ssd_footprint(size_t key_len, uint64_t size)
{
	return mc_ssd_data_off(key_len) + size;
}

/* ---------------------------------------------------------------- files */

static void mc_ssd_header(uint8_t hdr[MC_SSD_HDR], uint64_t seq, uint64_t size, size_t key_len,
			  uint64_t gen, const uint64_t *ocrc)
{
	memset(hdr, 0, MC_SSD_HDR);
	mc_put_le32(hdr, MC_SSD_MAGIC);
	mc_put_le32(hdr + 4, MC_SSD_VERSION);
	mc_put_le64(hdr + 8, seq);
	mc_put_le64(hdr + 16, size);
	mc_put_le32(hdr + 24, (uint32_t)key_len);
	mc_put_le64(hdr + 32, gen);
	if (ocrc != NULL) {
		hdr[44] = MC_SSD_HAS_OCRC;
		mc_put_le64(hdr + 48, *ocrc);
	}
}

/* Record what fd's file looks like now (directory area). */
static void mc_ssd_fingerprint(int fd, uint64_t *ino, uint64_t *size, int64_t *ctime_ns)
{
	struct stat sb;

	if (fstat(fd, &sb) != 0) {
		*ino = *size = 0;
		*ctime_ns = 0;
		return;
	}
	*ino = (uint64_t)sb.st_ino;
	*size = (uint64_t)sb.st_size;
	*ctime_ns = (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec;
}

/* Check a record's header and key at off of fd (not its value: mc_ssd_verify); want_len: the
 * exact record length the header must give (a file's size), or 0.  Returns a new object (not
 * linked, not verified) or NULL with why set. */
struct mc_ssd_obj *mc_ssd_check_record(int fd, uint64_t off, uint64_t want_len,
					      const char **why)
{
	uint8_t hdr[MC_SSD_HDR];
	char key[MC_SSD_MAX_KEY];
	uint64_t seq, size, gen, ocrc;
	uint32_t key_len, crc, want, vcrc, i;
	uint8_t flags;
	struct mc_ssd_obj *o;

	if (mc_tier_pread(fd, hdr, MC_SSD_HDR, (off_t)off) != 0) {
		*why = "short header";
		return NULL;
	}
	seq = mc_get_le64(hdr + 8);
	size = mc_get_le64(hdr + 16);
	key_len = mc_get_le32(hdr + 24);
	want = mc_get_le32(hdr + 28);
	gen = mc_get_le64(hdr + 32);
	vcrc = mc_get_le32(hdr + 40);
	flags = hdr[44];
	ocrc = mc_get_le64(hdr + 48);
	if (mc_get_le32(hdr) != MC_SSD_MAGIC || mc_get_le32(hdr + 4) != MC_SSD_VERSION) {
		*why = "bad magic or version";
		return NULL;
	}
	for (i = 45; i < MC_SSD_HDR; i++)
		if (hdr[i] && (i < 48 || i >= 56)) {
			*why = "bad header padding";
			return NULL;
		}
	if ((flags & ~MC_SSD_HAS_OCRC) || (!(flags & MC_SSD_HAS_OCRC) && ocrc != 0)) {
		*why = "bad header flags";
		return NULL;
	}
	if (key_len == 0 || key_len > MC_SSD_MAX_KEY || size == 0 || size > MC_SSD_MAX_OBJECT ||
	    (want_len && want_len != mc_ssd_data_off(key_len) + size)) {
		*why = "sizes do not match the file (torn write?)";
		return NULL;
	}
	if (mc_tier_pread(fd, key, key_len, (off_t)off + MC_SSD_HDR) != 0) {
		*why = "unreadable key";
		return NULL;
	}
	memset(hdr + 28, 0, 4);
	crc = mc_crc32c(0, hdr, MC_SSD_HDR);
	crc = mc_crc32c(crc, key, key_len);
	if (crc != want) {
		*why = "header checksum mismatch";
		return NULL;
	}
	o = mc_ssd_obj_new(key, key_len, seq, size);
	if (o) {
		o->gen = gen;
		o->vcrc = vcrc;
		o->has_ocrc = (flags & MC_SSD_HAS_OCRC) != 0;
		o->ocrc = ocrc;
	}
	return o;
}

static int mc_ssd_scan(struct mc_ssd *s)
{
	DIR *d = opendir(s->dir);
	struct dirent *de;
	size_t kept = 0;

	if (d == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		size_t nl = strlen(de->d_name);
		char path[4200];
		struct mc_ssd_obj *o, *old;
		const char *why = NULL;
		int fd;

		if (nl != 20 || de->d_name[16] != '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->dir, de->d_name);
		if (!strcmp(de->d_name + 17, "tmp")) {
			mc_log_info("SSD area %s: removing unfinished write %s", s->dir, de->d_name);
			unlink(path);
			continue;
		}
		if (strcmp(de->d_name + 17, "mco"))
			continue;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		{
			struct stat sb;

			o = fstat(fd, &sb) == 0 && sb.st_size > 0
				    ? mc_ssd_check_record(fd, 0, (uint64_t)sb.st_size, &why)
				    : (why = "empty file", NULL);
		}
		close(fd);
		if (o != NULL && strtoull(de->d_name, NULL, 16) != o->seq) {
			why = "name does not match its sequence number";
			free(o);
			o = NULL;
		}
		if (o == NULL) {
			mc_log_warn("SSD area %s: %s is corrupt (%s): discarded", s->dir, de->d_name,
				    why);
			unlink(path);
			s->discarded++;
			continue;
		}
		if (o->seq >= s->next_seq)
			s->next_seq = o->seq + 1;
		if (mc_ssd_insert(s, o, &old) != 0) {
			/* An older copy of a key we already hold. */
			unlink(path);
			free(o);
			continue;
		}
		if (old) {
			mc_ssd_path(s, old->seq, "mco", path, sizeof(path));
			unlink(path);
			free(old);
		}
		kept++;
	}
	closedir(d);
	mc_log_info("SSD area %s: %zu objects (values not yet verified), %llu of %llu bytes used, "
		    "%zu corrupt discarded",
		    s->dir, kept, (unsigned long long)s->used, (unsigned long long)s->limit,
		    s->discarded);
	return 0;
}

struct mc_ssd *mc_ssd_open(const char *dir, uint64_t limit, int *err)
{
	struct mc_ssd *s;
	int rc;

	if (dir == NULL || *dir == '\0' || limit == 0) {
		*err = -EINVAL;
		return NULL;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		*err = -errno;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	s->afd = -1;
	{
		struct stat st;

		if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) {
			/* A preallocated file: the single-file area. */
			s->single = 1;
			s->asize = (uint64_t)st.st_size / MC_SSD_ALIGN * MC_SSD_ALIGN;
			s->afd = open(dir, O_RDWR | O_CLOEXEC);
			if (s->afd < 0 || s->asize < 2 * MC_SSD_ALIGN) {
				*err = s->afd < 0 ? -errno : -EINVAL;
				if (s->afd >= 0)
					close(s->afd);
				free(s);
				return NULL;
			}
			if (limit > s->asize - MC_SSD_ALIGN)
				limit = s->asize - MC_SSD_ALIGN;
		}
	}
	pthread_mutex_init(&s->mu, NULL);
	s->dir = strdup(dir);
	s->limit = limit;
	s->next_seq = 1;
	s->nb = 1024;
	s->kb = calloc(s->nb, sizeof(*s->kb));
	s->sb = calloc(s->nb, sizeof(*s->sb));
	s->lru.lru_prev = s->lru.lru_next = &s->lru;
	if (s->dir == NULL || s->kb == NULL || s->sb == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = s->single ? mc_ssd_file_scan(s) : mc_ssd_scan(s);
	if (rc)
		goto fail;
	return s;
fail:
	*err = rc;
	mc_ssd_close(s);
	return NULL;
}

void mc_ssd_close(struct mc_ssd *s)
{
	struct mc_ssd_obj *o, *n;

	if (s == NULL)
		return;
	for (o = s->lru.lru_next; o && o != &s->lru; o = n) {
		n = o->lru_next;
		free(o);
	}
	if (s->afd >= 0)
		close(s->afd);
	free(s->free_ext);
	free(s->kb);
	free(s->sb);
	free(s->dir);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

uint64_t mc_ssd_used(struct mc_ssd *s)
{
	uint64_t u;

	pthread_mutex_lock(&s->mu);
	u = s->used;
	pthread_mutex_unlock(&s->mu);
	return u;
}

uint64_t mc_ssd_limit(const struct mc_ssd *s)
{
	return s->limit;
}

size_t mc_ssd_count(struct mc_ssd *s)
{
	size_t n;

	pthread_mutex_lock(&s->mu);
	n = s->count;
	pthread_mutex_unlock(&s->mu);
	return n;
}

size_t mc_ssd_discarded(const struct mc_ssd *s)
{
	return s->discarded;
}

int mc_ssd_put(struct mc_ssd *s, const char *key, size_t key_len, const void *value,
	       uint64_t size, uint64_t gen, uint64_t *addr)
{
	return mc_ssd_put_checksummed(s, key, key_len, value, size, gen, NULL, addr);
}

int mc_ssd_put_checksummed(struct mc_ssd *s, const char *key, size_t key_len, const void *value,
			   uint64_t size, uint64_t gen, const uint64_t *ocrc, uint64_t *addr)
{
	uint8_t *head;
	char tmp[4200], path[4200];
	struct mc_ssd_obj *o, *old;
	uint64_t seq, foot, off = mc_ssd_data_off(key_len), at = 0;
	uint32_t crc, vcrc;
	uint64_t fp_ino = 0, fp_size = 0;
	int64_t fp_ctime = 0;
	int fd, rc;

	if (key_len == 0 || key_len > MC_SSD_MAX_KEY || size == 0 || size > MC_SSD_MAX_OBJECT)
		return -EINVAL;
	foot = s->single ? mc_ssd_file_extent(key_len, size) : mc_ssd_footprint(key_len, size);
	pthread_mutex_lock(&s->mu);
	old = mc_ssd_find_key(s, key, key_len);
	if (s->used - (old ? old->foot : 0) + foot > s->limit) {
		pthread_mutex_unlock(&s->mu);
		return -ENOSPC;
	}
	seq = s->next_seq++;
	pthread_mutex_unlock(&s->mu);

	head = calloc(1, (size_t)off);
	if (head == NULL)
		return -ENOMEM;
	mc_ssd_header(head, seq, size, key_len, gen, ocrc);
	memcpy(head + MC_SSD_HDR, key, key_len);
	vcrc = mc_crc32c(0, value, (size_t)size);
	mc_put_le32(head + 40, vcrc);
	crc = mc_crc32c(0, head, MC_SSD_HDR);
	crc = mc_crc32c(crc, key, key_len);
	mc_put_le32(head + 28, crc);
	if (s->single) {
		rc = mc_ssd_file_write(s, head, off, value, size, foot, &at);
		if (rc)
			goto fail_head;
		goto written;
	}
	mc_ssd_path(s, seq, "tmp", tmp, sizeof(tmp));
	mc_ssd_path(s, seq, "mco", path, sizeof(path));
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail_head;
	}
	rc = mc_tier_pwrite(MC_FAULT_SSD_WRITE, fd, head, (size_t)off, 0);
	if (rc == 0)
		rc = mc_tier_pwrite(MC_FAULT_SSD_WRITE, fd, value, (size_t)size, (off_t)off);
	/* The bytes are on the device before the name says the object exists; the name itself
	 * is made durable by mc_ssd_sync, once per batch. */
	if (rc == 0)
		rc = mc_tier_sync(MC_FAULT_SSD_FSYNC, fd, 0);
	if (rc == 0)
		rc = mc_tier_rename(MC_FAULT_SSD_RENAME, tmp, path);
	if (rc == 0)
		mc_ssd_fingerprint(fd, &fp_ino, &fp_size, &fp_ctime);
	if (close(fd) != 0 && rc == 0) {
		rc = -errno;
		unlink(path);	/* renamed, but the close reported a lost write */
	}
	if (rc)
		goto fail_file;
written:
	free(head);
	o = mc_ssd_obj_new(key, key_len, seq, size);
	if (o == NULL) {
		if (s->single)
			mc_ssd_file_release(s, at, foot);
		else
			unlink(path);
		return -ENOMEM;
	}
	o->gen = gen;
	o->vcrc = vcrc;
	o->has_ocrc = ocrc != NULL;
	o->ocrc = ocrc ? *ocrc : 0;
	o->verified = 1;
	o->off = at;
	o->foot = foot;
	o->fp_ino = fp_ino;
	o->fp_size = fp_size;
	o->fp_ctime_ns = fp_ctime;
	pthread_mutex_lock(&s->mu);
	s->dir_dirty = !s->single;
	rc = mc_ssd_insert(s, o, &old);
	if (rc == 0)
		*addr = mc_ssd_addr(o);
	pthread_mutex_unlock(&s->mu);
	if (rc) {
		if (s->single)
			mc_ssd_file_release(s, at, foot);
		else
			unlink(path);
		free(o);
		return rc;
	}
	if (old) {
		mc_ssd_drop_data(s, old);
		free(old);
	}
	return 0;

fail_file:
	unlink(tmp);
fail_head:
	free(head);
	mc_log_warn("SSD area %s: writing %.*s failed: %s", s->dir,
		    (int)(key_len > 128 ? 128 : key_len), key, strerror(-rc));
	return rc;
}

int mc_ssd_verify(struct mc_ssd *s, const char *key, size_t key_len, uint64_t addr)
{
	struct mc_ssd_obj *o;
	uint8_t *buf = NULL;
	uint64_t seq, size, doff, off, base, fp_ino = 0, fp_size = 0;
	int64_t fp_ctime = 0;
	uint32_t want, crc = 0;
	int fd, rc = 0;

	pthread_mutex_lock(&s->mu);
	o = mc_ssd_find_key(s, key, key_len);
	if (o == NULL || mc_ssd_addr(o) != addr) {
		pthread_mutex_unlock(&s->mu);
		return -ENOENT;
	}
	if (o->verified && !o->suspect) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	seq = o->seq;
	size = o->size;
	want = o->vcrc;
	fd = mc_ssd_open_data(s, o, &base);
	doff = base + mc_ssd_data_off(o->key_len);
	if (fd == -ENOENT) {
		/* The file is gone while the index holds it: drop the entry. */
		mc_ssd_unlink(s, o);
		s->discarded++;
		pthread_mutex_unlock(&s->mu);
		mc_log_warn("SSD area %s: %016llx.mco is missing: dropped", s->dir,
			    (unsigned long long)seq);
		free(o);
		return -EBADMSG;
	}
	pthread_mutex_unlock(&s->mu);
	if (fd < 0)
		return fd;	/* unreadable: not served either way */
	buf = malloc(MC_SSD_SCAN_BUF);
	if (buf == NULL) {
		close(fd);
		return -ENOMEM;
	}
	if (!s->single)
		mc_ssd_fingerprint(fd, &fp_ino, &fp_size, &fp_ctime);
	for (off = 0; off < size && rc == 0;) {
		size_t n = size - off > MC_SSD_SCAN_BUF ? MC_SSD_SCAN_BUF : (size_t)(size - off);

		rc = mc_tier_pread(fd, buf, n, (off_t)(doff + off));
		if (rc == 0)
			crc = mc_crc32c(crc, buf, n);
		off += n;
	}
	close(fd);
	free(buf);
	if (rc == 0 && crc != want)
		rc = -EBADMSG;

	pthread_mutex_lock(&s->mu);
	o = mc_ssd_find_key(s, key, key_len);
	if (o == NULL || o->seq != seq) {
		pthread_mutex_unlock(&s->mu);
		return -ENOENT;	/* replaced or removed meanwhile */
	}
	if (o->suspect) {
		o->suspect = 0;
		s->nsuspect--;
	}
	if (rc == 0) {
		o->verified = 1;
		o->fp_ino = fp_ino;
		o->fp_size = fp_size;
		o->fp_ctime_ns = fp_ctime;
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	mc_ssd_unlink(s, o);
	s->discarded++;
	pthread_mutex_unlock(&s->mu);
	mc_log_warn("SSD area %s: %s%016llx%s is corrupt (%s): discarded", s->dir,
		    s->single ? "object " : "", (unsigned long long)seq, s->single ? "" : ".mco",
		    rc == -EBADMSG ? "checksum mismatch" : strerror(-rc));
	mc_ssd_drop_data(s, o);
	free(o);
	return -EBADMSG;
}

int mc_ssd_sync(struct mc_ssd *s)
{
	int fd, rc = 0;

	pthread_mutex_lock(&s->mu);
	if (!s->dir_dirty) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	s->dir_dirty = 0;
	pthread_mutex_unlock(&s->mu);
	fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = fd < 0 ? -errno : mc_tier_sync(MC_FAULT_SSD_FSYNC, fd, 1);
	if (fd >= 0)
		close(fd);
	pthread_mutex_lock(&s->mu);
	if (rc)
		s->dir_dirty = 1;	/* try again next time */
	else
		s->dir_syncs++;
	pthread_mutex_unlock(&s->mu);
	if (rc)
		mc_log_warn("SSD area %s: fsync of the directory failed: %s", s->dir,
			    strerror(-rc));
	return rc;
}

int mc_ssd_remove(struct mc_ssd *s, const char *key, size_t key_len, uint64_t addr)
{
	struct mc_ssd_obj *o;

	pthread_mutex_lock(&s->mu);
	o = mc_ssd_find_key(s, key, key_len);
	if (o == NULL || (addr != 0 && mc_ssd_addr(o) != addr)) {
		pthread_mutex_unlock(&s->mu);
		return -ENOENT;
	}
	mc_ssd_unlink(s, o);
	pthread_mutex_unlock(&s->mu);
	mc_ssd_drop_data(s, o);
	free(o);
	return 0;
}

/* Under the lock: the object holding [addr, addr+len) and the offset of addr in its value. */
static struct mc_ssd_obj *mc_ssd_locate(struct mc_ssd *s, uint64_t addr, uint64_t len,
					uint64_t *in)
{
	uint64_t rel, slot, off;
	struct mc_ssd_obj *o;

	if (!mc_memreg_in_files(addr, len))
		return NULL;
	rel = addr - MC_DISK_SPACE_BASE;
	slot = rel >> MC_SSD_SLOT_SHIFT;
	off = rel & ((1ull << MC_SSD_SLOT_SHIFT) - 1);
	o = mc_ssd_find_slot(s, slot);
	if (o == NULL || off + len > o->size || off + len < off)
		return NULL;
	*in = off;
	return o;
}

/* Under the lock: o's file no longer looks as it did when its value was written or checked
 * (truncated, rewritten, replaced): mark it to be verified again by mc_ssd_verify, unserved
 * until then.  Returns 1 when it changed.  Costs one fstat of an open descriptor. */
static int mc_ssd_changed(struct mc_ssd *s, struct mc_ssd_obj *o, int fd)
{
	uint64_t ino, size;
	int64_t ct;

	if (s->single || o->fp_ino == 0)
		return 0;
	mc_ssd_fingerprint(fd, &ino, &size, &ct);
	if (ino == o->fp_ino && size == o->fp_size && ct == o->fp_ctime_ns)
		return 0;
	o->verified = 0;
	if (!o->suspect) {
		o->suspect = 1;
		s->nsuspect++;
		mc_log_warn("SSD area %s: %016llx.mco changed on disk (size %llu, was %llu): not "
			    "served until its checksum is verified", s->dir, (unsigned long long)o->seq,
			    (unsigned long long)size, (unsigned long long)o->fp_size);
	}
	return 1;
}

/* Under the lock: open [addr, addr+len) of a verified object.  *obj receives it. */
static int mc_ssd_open_locked(struct mc_ssd *s, uint64_t addr, uint64_t len, int *fd,
			      uint64_t *off, struct mc_ssd_obj **obj)
{
	struct mc_ssd_obj *o;
	uint64_t in, base;

	o = mc_ssd_locate(s, addr, len, &in);
	if (o == NULL || !o->verified)	/* never serve a value not checked yet */
		return -ENOENT;
	*fd = mc_ssd_open_data(s, o, &base);
	if (*fd == -ENOENT && !s->single && !o->suspect) {
		/* Its file was deleted behind our back: verify drops it. */
		o->verified = 0;
		o->suspect = 1;
		s->nsuspect++;
		mc_log_warn("SSD area %s: %016llx.mco is missing", s->dir, (unsigned long long)o->seq);
	}
	if (*fd < 0)
		return *fd;
	if (mc_ssd_changed(s, o, *fd)) {
		close(*fd);
		*fd = -1;
		return -ENOENT;
	}
	*off = base + mc_ssd_data_off(o->key_len) + in;
	*obj = o;
	/* Most recently used. */
	o->lru_prev->lru_next = o->lru_next;
	o->lru_next->lru_prev = o->lru_prev;
	o->lru_prev = s->lru.lru_prev;
	o->lru_next = &s->lru;
	s->lru.lru_prev->lru_next = o;
	s->lru.lru_prev = o;
	return 0;
}

int mc_ssd_open_range(void *arg, uint64_t addr, uint64_t len, int *fd, uint64_t *off)
{
	struct mc_ssd *s = arg;
	struct mc_ssd_obj *o = NULL;
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = mc_ssd_open_locked(s, addr, len, fd, off, &o);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int mc_ssd_read(struct mc_ssd *s, uint64_t addr, void *buf, uint64_t len)
{
	struct mc_ssd_obj *o = NULL;
	uint64_t off, seq = 0, size = 0;
	uint32_t want = 0;
	int fd, rc;

	pthread_mutex_lock(&s->mu);
	rc = mc_ssd_open_locked(s, addr, len, &fd, &off, &o);
	if (rc == 0) {
		seq = o->seq;
		size = o->size;
		want = o->vcrc;
	}
	pthread_mutex_unlock(&s->mu);
	if (rc)
		return rc;
	rc = mc_tier_pread(fd, buf, (size_t)len, (off_t)off);
	close(fd);
	/* A whole value is checked on the way (what promotion reads): wrong bytes never go on. */
	if (rc == 0 && len == size && (addr & ((1ull << MC_SSD_SLOT_SHIFT) - 1)) == 0 &&
	    mc_crc32c(0, buf, (size_t)len) != want)
		rc = -EBADMSG;
	if (rc == -EBADMSG || rc == -EIO) {
		pthread_mutex_lock(&s->mu);
		o = mc_ssd_find_slot(s, (addr - MC_DISK_SPACE_BASE) >> MC_SSD_SLOT_SHIFT);
		if (o != NULL && o->seq == seq) {
			mc_ssd_unlink(s, o);
			s->discarded++;
		} else {
			o = NULL;
		}
		pthread_mutex_unlock(&s->mu);
		if (o) {
			mc_log_warn("SSD area %s: object %016llx is corrupt (%s on read): discarded",
				    s->dir, (unsigned long long)seq,
				    rc == -EBADMSG ? "checksum mismatch" : "short file");
			mc_ssd_drop_data(s, o);
			free(o);
		}
		rc = -EBADMSG;
	}
	return rc;
}
