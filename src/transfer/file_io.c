/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Positional file I/O of arbitrary ranges with O_DIRECT where possible (see file_io.h).
 *
 * A range [off, off + len) splits into an unaligned head (up to the next aligned offset), an
 * aligned middle and an unaligned tail.  Head and tail go through the buffered descriptor.  The
 * middle goes through the O_DIRECT descriptor straight from the caller's memory when that is
 * aligned too, otherwise through a bounce buffer.  A direct read that comes back short (end of
 * file) ends the read; a direct I/O that the kernel refuses with EINVAL (a file system that
 * accepted O_DIRECT at open but not this request) is redone buffered.  Any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/file_io.h"

#define MC_FILE_DEFAULT_ALIGN 4096u

static uint32_t mc_file_dio_align(int fd)
{
#if defined(STATX_DIOALIGN)
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align) {
		uint32_t a = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align
									    : sx.stx_dio_mem_align;

		/* Some file systems report 0 (no direct I/O for this file). */
		return (a & (a - 1)) == 0 && a <= (1u << 20) ? a : 0;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & STATX_DIOALIGN))
		return 0;
#else
	(void)fd;
#endif
	return MC_FILE_DEFAULT_ALIGN;
}

int mc_file_open(struct mc_file *f, const char *path, int flags, int direct)
{
	const char *env = getenv("MC_FILE_NO_DIRECT");
	int acc = flags & (O_ACCMODE | O_CREAT | O_TRUNC);

	f->fd = f->dfd = -1;
	f->align = MC_FILE_DEFAULT_ALIGN;
	if (path == NULL || *path == '\0')
		return -EINVAL;
	f->fd = open(path, acc | O_CLOEXEC, 0600);
	if (f->fd < 0)
		return -errno;
	if (!direct || (env && *env && strcmp(env, "0")))
		return 0;
	f->dfd = open(path, (acc & ~(O_CREAT | O_TRUNC)) | O_DIRECT | O_CLOEXEC);
	if (f->dfd >= 0) {
		f->align = mc_file_dio_align(f->dfd);
		if (f->align == 0) {
			close(f->dfd);
			f->dfd = -1;
			f->align = MC_FILE_DEFAULT_ALIGN;
		}
	}
	return 0;
}

void mc_file_close(struct mc_file *f)
{
	if (f->dfd >= 0)
		close(f->dfd);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = f->dfd = -1;
}

int mc_file_is_direct(const struct mc_file *f)
{
	return f->dfd >= 0;
}

int mc_file_sync(struct mc_file *f)
{
	return fdatasync(f->fd) ? -errno : 0;
}

int64_t mc_file_size(struct mc_file *f)
{
	struct stat st;

	return fstat(f->fd, &st) ? -errno : (int64_t)st.st_size;
}

/* Buffered positional I/O of the whole range: bytes done (short only at EOF) or -errno. */
static ssize_t mc_file_rw_buffered(int fd, int wr, uint8_t *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = wr ? pwrite(fd, buf + done, len - done, (off_t)(off + done))
			       : pread(fd, buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			if (wr)
				return -EIO;
			break;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* The aligned middle through O_DIRECT: bytes done (short only at EOF) or -errno.
 * -EINVAL means "this file refuses direct I/O": the caller redoes it buffered. */
static ssize_t mc_file_rw_direct(struct mc_file *f, int wr, uint8_t *buf, size_t len,
				 uint64_t off)
{
	uint8_t *bounce = NULL;
	size_t done = 0;
	ssize_t rc = 0;
	int aligned = ((uintptr_t)buf & (f->align - 1)) == 0;

	if (!aligned && posix_memalign((void **)&bounce, f->align,
				       len < MC_FILE_BOUNCE ? len : MC_FILE_BOUNCE))
		return -ENOMEM;
	while (done < len) {
		size_t chunk = aligned ? len - done
				       : (len - done < MC_FILE_BOUNCE ? len - done : MC_FILE_BOUNCE);
		uint8_t *p = aligned ? buf + done : bounce;
		ssize_t n;

		if (wr && !aligned)
			memcpy(bounce, buf + done, chunk);
		n = wr ? pwrite(f->dfd, p, chunk, (off_t)(off + done))
		       : pread(f->dfd, p, chunk, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (!wr && !aligned)
			memcpy(buf + done, bounce, (size_t)n);
		done += (size_t)n;
		if (n == 0 || ((size_t)n & (f->align - 1))) {
			if (wr && n == 0) {
				rc = -EIO;
				break;
			}
			if (wr) {
				/* A short direct write leaves an unaligned rest: finish buffered. */
				n = mc_file_rw_buffered(f->fd, 1, buf + done, len - done, off + done);
				if (n < 0) {
					rc = n;
					break;
				}
				done += (size_t)n;
			}
			break;	/* read: end of file */
		}
	}
	free(bounce);
	return rc < 0 ? rc : (ssize_t)done;
}

static ssize_t mc_file_rw(struct mc_file *f, int wr, uint8_t *buf, size_t len, uint64_t off)
{
	uint64_t a = f->align, end = off + len;
	uint64_t mid_lo = (off + a - 1) & ~(a - 1), mid_hi = end & ~(a - 1);
	size_t done = 0;
	ssize_t n;

	if (len == 0)
		return 0;
	if (end < off)
		return -EINVAL;
	if (f->dfd < 0 || mid_hi <= mid_lo)
		return mc_file_rw_buffered(f->fd, wr, buf, len, off);
	/* head */
	if (mid_lo > off) {
		n = mc_file_rw_buffered(f->fd, wr, buf, (size_t)(mid_lo - off), off);
		if (n < 0 || (size_t)n < mid_lo - off)
			return n;
		done = (size_t)n;
	}
	/* middle */
	n = mc_file_rw_direct(f, wr, buf + done, (size_t)(mid_hi - mid_lo), mid_lo);
	if (n == -EINVAL)
		n = mc_file_rw_buffered(f->fd, wr, buf + done, (size_t)(mid_hi - mid_lo), mid_lo);
	if (n < 0)
		return n;
	done += (size_t)n;
	if ((uint64_t)n < mid_hi - mid_lo)
		return (ssize_t)done;	/* end of file */
	/* tail */
	if (end > mid_hi) {
		n = mc_file_rw_buffered(f->fd, wr, buf + done, (size_t)(end - mid_hi), mid_hi);
		if (n < 0)
			return n;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t mc_file_pread(struct mc_file *f, void *buf, size_t len, uint64_t off)
{
	return mc_file_rw(f, 0, buf, len, off);
}

ssize_t mc_file_pwrite(struct mc_file *f, const void *buf, size_t len, uint64_t off)
{
	ssize_t n = mc_file_rw(f, 1, (uint8_t *)(uintptr_t)buf, len, off);

	return n >= 0 && (size_t)n != len ? -EIO : n;
}
