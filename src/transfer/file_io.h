/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_FILE_IO_H
#define MC_FILE_IO_H

/*
 * File I/O for the data plane: positional reads and writes of arbitrary byte ranges, through
 * O_DIRECT where the file system allows it.
 *
 * mc_file_open opens a file twice: once with O_DIRECT (when the file system accepts it; tmpfs
 * and some FUSE file systems do not) and once buffered.  A transfer moves its aligned middle
 * (offset, length and memory all multiples of f->align) through the O_DIRECT descriptor; an
 * unaligned head or tail goes through the buffered descriptor, and unaligned memory is staged
 * through an aligned bounce buffer in chunks of at most MC_FILE_BOUNCE bytes.  No
 * read-modify-write of blocks ever happens, so concurrent writers to disjoint byte ranges never
 * overwrite each other (Linux keeps the page cache coherent with direct I/O on the same file).
 *
 * Blocking calls: run them off the reactor thread.  A struct mc_file may be used by several
 * threads at once (pread/pwrite are positional); open and close are not concurrent with I/O.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MC_FILE_BOUNCE (4u << 20)

struct mc_file {
	int fd;			/* buffered */
	int dfd;		/* O_DIRECT, or -1 */
	uint32_t align;		/* offset/length/memory alignment for dfd (power of two) */
};

/* Open path with flags O_RDONLY or O_RDWR, optionally | O_CREAT (mode 0600) | O_TRUNC.
 * MC_FILE_NO_DIRECT=1 in the environment or direct = 0 skips O_DIRECT.
 * 0 or -errno; on failure f->fd = f->dfd = -1. */
int mc_file_open(struct mc_file *f, const char *path, int flags, int direct);
/* Close both descriptors; safe on a failed or already closed file. */
void mc_file_close(struct mc_file *f);
/* 1 if O_DIRECT is in use. */
int mc_file_is_direct(const struct mc_file *f);

/* Read len bytes at off into buf.  Returns the bytes read (fewer only at end of file) or
 * -errno. */
ssize_t mc_file_pread(struct mc_file *f, void *buf, size_t len, uint64_t off);
/* Write all len bytes from buf at off (the file grows as needed).  len or -errno. */
ssize_t mc_file_pwrite(struct mc_file *f, const void *buf, size_t len, uint64_t off);
/* fdatasync.  0 or -errno. */
int mc_file_sync(struct mc_file *f);
/* The file's size in bytes, or -errno. */
int64_t mc_file_size(struct mc_file *f);

#endif
