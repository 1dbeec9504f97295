/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the SSD area (src/ssd): the file format, the recovery scan (torn, corrupt,
 * renamed and unfinished files are dropped, the rest load), the size limit, replacement of a key,
 * LRU order, and address resolution for the data server.  Failure paths: a failed or short
 * write, a failed fdatasync or rename stores nothing and leaves no file; a file truncated or
 * rewritten after it was stored is not served and is dropped once verified; a whole-value read
 * checks the checksum.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <dirent.h>

#include "common/crc32c.h"
#include "ssd/ssd_area.h"
#include "tap.h"
#include "transfer/memreg.h"

static char dir[256];

/* Durability order: the test binary's fdatasync, fsync and rename come before libc's, record
 * the order of the calls and do the real system call. */
static char trace[256];
static size_t ntrace;

static void note(char c)
{
	if (ntrace + 1 < sizeof(trace)) {
		trace[ntrace++] = c;
		trace[ntrace] = '\0';
	}
}

/* Injected failures (0: none): the next write, fdatasync or rename fails with this errno. */
static int fail_write, fail_datasync, fail_rename, short_write;

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (short_write && n > 1) {
		short_write = 0;
		fail_write = ENOSPC;	/* the rest of it finds the disk full */
		return syscall(SYS_pwrite64, fd, buf, n / 2, off);
	}
	if (fail_write) {
		errno = fail_write;
		return -1;
	}
	return syscall(SYS_pwrite64, fd, buf, n, off);
}

int fdatasync(int fd)
{
	note('D');
	if (fail_datasync) {
		errno = fail_datasync;
		return -1;
	}
	return (int)syscall(SYS_fdatasync, fd);
}

int fsync(int fd)
{
	struct stat sb;

	note(fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode) ? 'F' : 'f');
	return (int)syscall(SYS_fsync, fd);
}

static uint64_t bytes_read;

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	ssize_t r = syscall(SYS_pread64, fd, buf, n, off);

	if (r > 0)
		bytes_read += (uint64_t)r;
	return r;
}

int rename(const char *from, const char *to)
{
	note('R');
	if (fail_rename) {
		errno = fail_rename;
		return -1;
	}
	return (int)syscall(SYS_renameat, AT_FDCWD, from, AT_FDCWD, to);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 9));
}

static int count_files(const char *ext);
static int file_of(struct mc_ssd *s, const char *key, char *out, size_t n);

/* The failure paths of a directory area. */
static void fault_tests(void)
{
	static uint8_t v[200000], back[200000];
	struct mc_ssd *s;
	struct mc_ssd_item *items = NULL;
	uint64_t addr = 0, a2 = 0, off;
	char path[4200];
	long n;
	int err = 0, fd, rc;
	size_t i;

	for (i = 0; i < sizeof(v); i++)
		v[i] = (uint8_t)(i * 13 + 5);
	snprintf(dir, sizeof(dir), "%s/mc-ssd-fault.%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid());
	s = mc_ssd_open(dir, 1 << 24, &err);
	ok(s != NULL, "fault tests: an empty area");
	if (s == NULL)
		return;

	fail_write = ENOSPC;
	rc = mc_ssd_put(s, "w", 1, v, sizeof(v), 1, &addr);
	fail_write = 0;
	ok(rc == -ENOSPC && mc_ssd_count(s) == 0 && mc_ssd_used(s) == 0 && count_files("tmp") == 0 &&
	   count_files("mco") == 0, "a write failing with ENOSPC stores nothing, leaves no file (%d)", rc);
	short_write = 1;
	rc = mc_ssd_put(s, "w", 1, v, sizeof(v), 1, &addr);
	short_write = fail_write = 0;
	ok(rc == -ENOSPC && mc_ssd_count(s) == 0 && count_files("tmp") == 0 && count_files("mco") == 0,
	   "a short write (half written, then ENOSPC) stores nothing, leaves no file");
	fail_datasync = EIO;
	rc = mc_ssd_put(s, "w", 1, v, sizeof(v), 1, &addr);
	fail_datasync = 0;
	ok(rc == -EIO && mc_ssd_count(s) == 0 && count_files("tmp") == 0 && count_files("mco") == 0,
	   "a failed fdatasync (EIO) stores nothing, leaves no file");
	fail_rename = EIO;
	rc = mc_ssd_put(s, "w", 1, v, sizeof(v), 1, &addr);
	fail_rename = 0;
	ok(rc == -EIO && mc_ssd_count(s) == 0 && count_files("tmp") == 0 && count_files("mco") == 0,
	   "a failed rename stores nothing, leaves no file");
	ok(mc_ssd_put(s, "w", 1, v, sizeof(v), 1, &addr) == 0 &&
	   mc_ssd_put(s, "x", 1, v, sizeof(v), 2, &a2) == 0 && mc_ssd_read(s, addr, back, sizeof(v)) == 0 &&
	   !memcmp(back, v, sizeof(v)), "once the faults clear, writes work again");
	/* An existing copy survives a failed replacement. */
	fail_write = EIO;
	rc = mc_ssd_put(s, "w", 1, v + 1, sizeof(v) - 1, 3, &off);
	fail_write = 0;
	ok(rc == -EIO && mc_ssd_read(s, addr, back, sizeof(v)) == 0 && !memcmp(back, v, sizeof(v)),
	   "a failed replacement leaves the old copy readable");

	/* Truncated after it was stored: not served, listed as suspect, dropped by verify. */
	ok(file_of(s, "w", path, sizeof(path)) == 0 && truncate(path, 4096 + 1000) == 0,
	   "truncate w's file behind the area's back");
	rc = mc_ssd_open_range(s, addr, 10, &fd, &off);
	is(rc, -ENOENT, "the data server is refused the truncated object (%d)", rc);
	is(mc_ssd_read(s, addr, back, sizeof(v)), -ENOENT, "so is a local read");
	n = mc_ssd_suspects(s, &items);
	ok(n == 1 && items && !strcmp(items[0].key, "w") && items[0].addr == addr,
	   "it is listed for verification");
	ok(n == 1 && mc_ssd_verify(s, items[0].key, items[0].key_len, items[0].addr) == -EBADMSG &&
	   mc_ssd_count(s) == 1 && access(path, F_OK) != 0, "verify drops it and deletes its file");
	mc_ssd_items_free(items, n > 0 ? (size_t)n : 0);
	is(mc_ssd_suspects(s, &items), 0, "nothing left to verify");

	/* Rewritten in place, same size: caught by its changed ctime, then by its checksum. */
	ok(file_of(s, "x", path, sizeof(path)) == 0, "x's file");
	fd = open(path, O_WRONLY);
	ok(fd >= 0 && syscall(SYS_pwrite64, fd, "XYZ", 3, 4096 + 777) == 3, "corrupt x in place");
	if (fd >= 0)
		close(fd);
	is(mc_ssd_open_range(s, a2, 10, &fd, &off), -ENOENT,
	   "the corrupt object is not served to the data server");
	n = mc_ssd_suspects(s, &items);
	ok(n == 1 && mc_ssd_verify(s, items[0].key, items[0].key_len, items[0].addr) == -EBADMSG &&
	   mc_ssd_count(s) == 0 && mc_ssd_used(s) == 0, "verify finds the checksum wrong and drops it");
	mc_ssd_items_free(items, n > 0 ? (size_t)n : 0);

	/* A file touched but not changed is served again once verified. */
	ok(mc_ssd_put(s, "y", 1, v, sizeof(v), 4, &addr) == 0 && file_of(s, "y", path, sizeof(path)) == 0 &&
	   chmod(path, 0640) == 0, "y's file gets a new ctime, same bytes");
	is(mc_ssd_open_range(s, addr, 10, &fd, &off), -ENOENT, "it is held back");
	n = mc_ssd_suspects(s, &items);
	ok(n == 1 && mc_ssd_verify(s, items[0].key, items[0].key_len, items[0].addr) == 0 &&
	   mc_ssd_read(s, addr, back, sizeof(v)) == 0 && !memcmp(back, v, sizeof(v)),
	   "after its checksum verifies it is served again");
	mc_ssd_items_free(items, n > 0 ? (size_t)n : 0);
	mc_ssd_remove(s, "y", 1, 0);

	/* Deleted behind the area's back: refused, then dropped by verify. */
	ok(mc_ssd_put(s, "m", 1, v, sizeof(v), 6, &addr) == 0 && file_of(s, "m", path, sizeof(path)) == 0 &&
	   unlink(path) == 0, "m's file is deleted behind the area's back");
	is(mc_ssd_open_range(s, addr, 10, &fd, &off), -ENOENT, "it is not served");
	n = mc_ssd_suspects(s, &items);
	ok(n == 1 && mc_ssd_verify(s, items[0].key, items[0].key_len, items[0].addr) == -EBADMSG &&
	   mc_ssd_count(s) == 0 && mc_ssd_used(s) == 0, "verify drops the entry (-EBADMSG)");
	mc_ssd_items_free(items, n > 0 ? (size_t)n : 0);
	mc_ssd_close(s);
	rmdir(dir);

	/* A single-file area cannot see changes by file metadata: a whole-value read checks the
	 * checksum and drops a corrupt object. */
	snprintf(path, sizeof(path), "%s.area", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ok(fd >= 0 && ftruncate(fd, 4 << 20) == 0, "a single-file area");
	if (fd >= 0)
		close(fd);
	s = mc_ssd_open(path, 1ull << 40, &err);
	ok(s && mc_ssd_put(s, "z", 1, v, sizeof(v), 5, &addr) == 0 &&
	   mc_ssd_open_range(s, addr + 5000, 1, &fd, &off) == 0, "z stored");
	if (s && fd >= 0) {
		close(fd);
		fd = open(path, O_WRONLY);
		ok(fd >= 0 && syscall(SYS_pwrite64, fd, "Q", 1, (off_t)off) == 1, "corrupt z's value");
		if (fd >= 0)
			close(fd);
		ok(mc_ssd_read(s, addr, back, sizeof(v)) == -EBADMSG && mc_ssd_count(s) == 0,
		   "the whole-value read fails its checksum: -EBADMSG, the object is dropped");
	}
	mc_ssd_close(s);
	unlink(path);
}

static int count_files(const char *ext)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);

		if (l > 4 && !strcmp(de->d_name + l - 3, ext))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* Path of the file holding the object whose value starts with byte first. */
static int file_of(struct mc_ssd *s, const char *key, char *out, size_t n)
{
	struct mc_ssd_item *items;
	long cnt = mc_ssd_list(s, 0, 1000, &items), i;
	int rc = -1;

	(void)out;
	(void)n;
	for (i = 0; i < cnt; i++)
		if (!strcmp(items[i].key, key)) {
			int fd;
			uint64_t off;

			if (mc_ssd_open_range(s, items[i].addr, 1, &fd, &off) == 0) {
				char link[64];
				ssize_t l;

				snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
				l = readlink(link, out, n - 1);
				if (l > 0) {
					out[l] = '\0';
					rc = 0;
				}
				close(fd);
			}
		}
	mc_ssd_items_free(items, (size_t)cnt);
	return rc;
}

int main(void)
{
	static uint8_t a[300000], b[5000], back[300000];
	struct mc_ssd *s;
	struct mc_ssd_item *items;
	uint64_t addr_a = 0, addr_b = 0, addr_c = 0, off;
	char path[4200], path2[4200];
	long n;
	int err = 0, fd, rc, i;

	snprintf(dir, sizeof(dir), "%s/mc-ssd-test.%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid());
	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);

	/* crc32c check value of "123456789" */
	ok(mc_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c of 123456789 is e3069283");

	ok(mc_ssd_open(dir, 0, &err) == NULL && err == -EINVAL, "a zero limit is refused");
	s = mc_ssd_open(dir, 1 << 20, &err);
	ok(s != NULL && mc_ssd_count(s) == 0, "an empty area opens");
	ok(mc_ssd_put(s, "alpha", 5, a, sizeof(a), 0x123456789aull, &addr_a) == 0, "put alpha (300000 bytes)");
	ok(mc_ssd_put(s, "beta", 4, b, sizeof(b), 7, &addr_b) == 0, "put beta");
	ok(addr_a >= MC_DISK_SPACE_BASE && addr_b != addr_a, "addresses in the file window");
	is(mc_ssd_used(s), mc_ssd_footprint(5, sizeof(a)) + mc_ssd_footprint(4, sizeof(b)),
	   "used bytes are the footprints");
	memset(back, 0, sizeof(back));
	ok(mc_ssd_read(s, addr_a, back, sizeof(a)) == 0 && !memcmp(back, a, sizeof(a)),
	   "alpha reads back byte for byte");
	ok(mc_ssd_read(s, addr_a + 1000, back, 5000) == 0 && !memcmp(back, a + 1000, 5000),
	   "a range inside alpha reads back");
	is(mc_ssd_read(s, addr_a + 1, back, sizeof(a)), -ENOENT,
	   "a range past the object's end is refused");
	is(mc_ssd_read(s, addr_b + (1ull << 36), back, 1), -ENOENT, "an unknown slot is refused");
	rc = mc_ssd_open_range(s, addr_b + 10, 100, &fd, &off);
	ok(rc == 0 && off % 4096 == 10, "open_range gives a descriptor and a value offset");
	if (rc == 0)
		close(fd);
	ok(mc_ssd_put(s, "big", 3, a, 1 << 20, 7, &addr_c) == -ENOSPC, "over the limit: -ENOSPC");
	ok(mc_ssd_put(s, "", 0, a, 10, 7, &addr_c) == -EINVAL, "an empty key is refused");

	/* Replacing a key drops the old file. */
	ok(mc_ssd_put(s, "beta", 4, a, 1000, 7, &addr_c) == 0 && addr_c != addr_b,
	   "beta replaced gets a new address");
	is(mc_ssd_read(s, addr_b, back, 10), -ENOENT, "the old beta address is gone");
	ok(count_files("mco") == 2, "two object files on disk");

	/* LRU: reading alpha makes beta the least recently used. */
	is(mc_ssd_read(s, addr_a, back, 1), 0, "touch alpha");
	n = mc_ssd_list(s, 1, 1, &items);
	ok(n == 1 && !strcmp(items[0].key, "beta"), "beta is the least recently used");
	mc_ssd_items_free(items, (size_t)n);

	ok(mc_ssd_put(s, "gamma", 5, b, sizeof(b), 7, &addr_c) == 0, "put gamma");
	ok(mc_ssd_put(s, "delta", 5, b, sizeof(b), 7, &addr_c) == 0, "put delta");
	ok(mc_ssd_remove(s, "delta", 5, addr_c + 1) == -ENOENT, "remove with a stale address refused");
	ok(mc_ssd_remove(s, "delta", 5, addr_c) == 0 && mc_ssd_count(s) == 3, "remove delta");
	ok(file_of(s, "gamma", path, sizeof(path)) == 0, "gamma's file found");
	ok(file_of(s, "beta", path2, sizeof(path2)) == 0, "beta's file found");
	mc_ssd_close(s);

	/* Corrupt gamma's value, truncate beta, leave a .tmp behind: recovery keeps alpha only. */
	fd = open(path, O_WRONLY);
	ok(fd >= 0 && pwrite(fd, "X", 1, 4096 + 100) == 1, "flip a byte in gamma's value");
	close(fd);
	is(truncate(path2, 4096 + 10), 0, "tear beta's file");
	snprintf(path2, sizeof(path2), "%s/00000000000000ff.tmp", dir);
	fd = open(path2, O_WRONLY | O_CREAT, 0600);
	close(fd);
	bytes_read = 0;
	s = mc_ssd_open(dir, 1 << 20, &err);
	ok(s != NULL, "the area reopens");
	ok(bytes_read <= 3 * 4096, "opening reads headers and keys only: %llu bytes for 3 files "
	   "holding %zu bytes of values", (unsigned long long)bytes_read, sizeof(a) + 2 * sizeof(b));
	ok(s && mc_ssd_count(s) == 2 && mc_ssd_discarded(s) == 1,
	   "alpha and gamma load, torn beta is discarded");
	ok(count_files("tmp") == 0 && count_files("mco") == 2, "beta's file and the .tmp are gone");
	n = s ? mc_ssd_list(s, 0, 10, &items) : 0;
	for (i = 0; i < n && strcmp(items[i].key, "alpha"); i++)
		;
	ok(n == 2 && i < n && items[i].size == sizeof(a) && items[i].gen == 0x123456789aull &&
	   !items[i].verified, "alpha is listed with its size and generation, not yet verified");
	if (n == 2 && i < n) {
		int g = !i;

		is(mc_ssd_read(s, items[i].addr, back, 10), -ENOENT,
		   "an object whose value was not verified is not served");
		ok(mc_ssd_verify(s, items[g].key, items[g].key_len, items[g].addr) == -EBADMSG &&
		   mc_ssd_count(s) == 1 && mc_ssd_discarded(s) == 2 && count_files("mco") == 1,
		   "verifying gamma finds its value corrupt: deleted");
		is(mc_ssd_read(s, items[g].addr, back, 10), -ENOENT, "gamma is never served");
		ok(mc_ssd_verify(s, items[i].key, items[i].key_len, items[i].addr) == 0 &&
		   mc_ssd_verify(s, items[i].key, items[i].key_len, items[i].addr) == 0,
		   "alpha verifies (twice: the second is free)");
		memset(back, 0, sizeof(back));
		ok(mc_ssd_read(s, items[i].addr, back, sizeof(a)) == 0 &&
		   !memcmp(back, a, sizeof(a)), "alpha reads back after the restart");
	}
	mc_ssd_items_free(items, (size_t)n);
	/* Header corruption: the key length. */
	ok(file_of(s, "alpha", path, sizeof(path)) == 0, "alpha's file found");
	mc_ssd_close(s);
	fd = open(path, O_WRONLY);
	ok(fd >= 0 && pwrite(fd, "\x07", 1, 24) == 1, "alter alpha's key length");
	close(fd);
	s = mc_ssd_open(dir, 1 << 20, &err);
	ok(s && mc_ssd_count(s) == 0 && mc_ssd_discarded(s) == 1, "a bad header is discarded");
	/* Sequence numbers continue past what was found: new writes never reuse a name. */
	for (i = 0; i < 3; i++)
		ok(mc_ssd_put(s, "k", 1, b, 100, 7, &addr_c) == 0, "write %d after recovery", i);
	ok(count_files("mco") == 1, "rewrites of one key leave one file");
	mc_ssd_close(s);
	s = mc_ssd_open(dir, 1 << 20, &err);
	ok(s && mc_ssd_count(s) == 1, "it loads again");
	/* Durability: data, then name, then (once per batch) the directory. */
	ntrace = 0;
	trace[0] = '\0';
	ok(s && mc_ssd_put(s, "d1", 2, b, 100, 1, &addr_c) == 0 &&
	   mc_ssd_put(s, "d2", 2, b, 100, 2, &addr_c) == 0, "two more objects stored");
	is_str(trace, "DRDR", "each object file is fdatasync'ed before its rename (%s)", trace);
	ok(s && mc_ssd_sync(s) == 0 && mc_ssd_sync(s) == 0 && !strcmp(trace, "DRDRF"),
	   "one directory fsync makes both names durable, none when nothing changed (%s)", trace);
	mc_ssd_remove(s, "d1", 2, 0);
	mc_ssd_remove(s, "d2", 2, 0);
	mc_ssd_remove(s, "k", 1, 0);
	/* The object's checksum kept in the record: 0 and 2^64-1 are values, absence is kept. */
	{
		uint64_t zero = 0, max = UINT64_MAX;
		int seen = 0;

		ok(s && mc_ssd_put_checksummed(s, "c0", 2, b, 100, 1, &zero, &addr_c) == 0 &&
		   mc_ssd_put_checksummed(s, "cmax", 4, b, 100, 2, &max, &addr_c) == 0 &&
		   mc_ssd_put_checksummed(s, "cno", 3, b, 100, 3, NULL, &addr_c) == 0 &&
		   mc_ssd_sync(s) == 0, "objects stored with checksums 0, 2^64-1 and none");
		mc_ssd_close(s);
		s = mc_ssd_open(dir, 1 << 20, &err);
		n = s ? mc_ssd_list(s, 0, 10, &items) : 0;
		for (i = 0; i < n; i++) {
			if (!strcmp(items[i].key, "c0"))
				seen += items[i].has_checksum && items[i].checksum == 0;
			else if (!strcmp(items[i].key, "cmax"))
				seen += items[i].has_checksum && items[i].checksum == UINT64_MAX;
			else if (!strcmp(items[i].key, "cno"))
				seen += !items[i].has_checksum && items[i].checksum == 0;
			rc = mc_ssd_verify(s, items[i].key, items[i].key_len, items[i].addr);
			seen += rc == 0 ? 10 : 0;
		}
		mc_ssd_items_free(items, (size_t)n);
		ok(n == 3 && seen == 33 && mc_ssd_discarded(s) == 0,
		   "reopened, they come back with their checksums and verify (%d)", seen);
		mc_ssd_remove(s, "c0", 2, 0);
		mc_ssd_remove(s, "cmax", 4, 0);
		mc_ssd_remove(s, "cno", 3, 0);
	}
	mc_ssd_close(s);
	rmdir(dir);

	/* A single-file area: a preallocated file (zeroed; sparse here). */
	snprintf(path, sizeof(path), "%s.area", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ok(fd >= 0 && ftruncate(fd, 4 << 20) == 0, "a zeroed 4 MiB file");
	close(fd);
	s = mc_ssd_open(path, 1ull << 40, &err);
	ok(s && mc_ssd_limit(s) == (4 << 20) - 4096 && mc_ssd_count(s) == 0,
	   "it becomes a single-file area, limited to its size");
	ok(s && mc_ssd_put(s, "alpha", 5, a, sizeof(a), 11, &addr_a) == 0 &&
	   mc_ssd_put(s, "beta", 4, b, sizeof(b), 12, &addr_b) == 0, "two objects stored in it");
	ok(s && mc_ssd_read(s, addr_a, back, sizeof(a)) == 0 && !memcmp(back, a, sizeof(a)) &&
	   mc_ssd_read(s, addr_b, back, sizeof(b)) == 0 && !memcmp(back, b, sizeof(b)),
	   "both read back");
	for (i = 0, rc = 0; s && i < 40; i++)
		rc |= mc_ssd_put(s, "k", 1, a, sizeof(a), 100 + (uint64_t)i, &addr_c);
	ok(rc == 0 && mc_ssd_remove(s, "beta", 4, addr_b) == 0 && mc_ssd_count(s) == 2,
	   "a key replaced 40 times (12 MiB through a 4 MiB area) reuses its space");
	ok(s && mc_ssd_put(s, "gamma", 5, b, sizeof(b), 13, &addr_b) == 0, "gamma takes beta's room");
	mc_ssd_close(s);
	bytes_read = 0;
	s = mc_ssd_open(path, 1ull << 40, &err);
	ok(s && mc_ssd_count(s) == 3 && bytes_read < 64 * 1024,
	   "reopened: 3 objects found reading headers only (%llu bytes)",
	   (unsigned long long)bytes_read);
	n = s ? mc_ssd_list(s, 0, 10, &items) : 0;
	for (i = 0, rc = 0; i < n; i++)
		rc |= mc_ssd_verify(s, items[i].key, items[i].key_len, items[i].addr);
	for (i = 0; i < n && strcmp(items[i].key, "alpha"); i++)
		;
	ok(n == 3 && rc == 0 && i < n && items[i].gen == 11 &&
	   mc_ssd_read(s, items[i].addr, back, sizeof(a)) == 0 && !memcmp(back, a, sizeof(a)),
	   "all verify; alpha reads back with its generation");
	if (n == 3 && i < n && mc_ssd_open_range(s, items[i].addr + 100, 1, &fd, &off) == 0) {
		close(fd);
		fd = open(path, O_WRONLY);
		ok(fd >= 0 && pwrite(fd, "X", 1, (off_t)off) == 1, "flip a byte of alpha's value");
		close(fd);
	}
	mc_ssd_items_free(items, (size_t)n);
	mc_ssd_close(s);
	s = mc_ssd_open(path, 1ull << 40, &err);
	n = s ? mc_ssd_list(s, 0, 10, &items) : 0;
	for (i = 0, rc = 0; i < n; i++)
		if (mc_ssd_verify(s, items[i].key, items[i].key_len, items[i].addr) == -EBADMSG)
			rc++;
	mc_ssd_items_free(items, (size_t)n);
	ok(n == 3 && rc == 1 && mc_ssd_count(s) == 2, "alpha's corrupt value is found and dropped");
	mc_ssd_close(s);
	s = mc_ssd_open(path, 1ull << 40, &err);
	ok(s && mc_ssd_count(s) == 2, "and its space stays free after a reopen");
	mc_ssd_close(s);
	fd = open(path, O_WRONLY | O_TRUNC);
	ok(fd >= 0 && write(fd, "not an area", 11) == 11 && ftruncate(fd, 1 << 20) == 0,
	   "a file with other contents");
	close(fd);
	s = mc_ssd_open(path, 1ull << 40, &err);
	ok(s == NULL && err == -EINVAL, "is refused, not overwritten");
	unlink(path);
	fault_tests();
	return tap_done();
}
