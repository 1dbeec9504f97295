/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The legacy shared-directory tier on the client side (reference §6.1): when the master runs with
 * --root_fs_dir, PutStart returns a DISK replica naming a file under "<root_fs_dir>/<cluster_id>"
 * (learnt at set-up with GetFsdir) that the writer fills with the raw value before its PutEnd, and
 * a reader whose object has no memory replica left reads that file.
 *
 * A path from the master is used only if it lies under the directory the master announced and
 * has no ".." component, so a confused or hostile master cannot make a client write elsewhere.
 * The writer writes "<path>.<pid>.tmp" and renames it, so a reader never sees half a value.
 * Runs on the calling API thread (blocking file I/O, as the put or get itself blocks).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errcode.h"
#include "common/log.h"
#include "store/store.h"

/* Copy a checked path into out.  0 or -EINVAL. */
static int mc_fs_checked(struct mc_store *st, struct mc_strv path, char *out, size_t n)
{
	size_t dl = strlen(st->fsdir);

	if (dl == 0 || path.n <= dl + 1 || path.n >= n || memcmp(path.p, st->fsdir, dl) ||
	    path.p[dl] != '/' || memchr(path.p, '\0', path.n))
		return -EINVAL;
	memcpy(out, path.p, path.n);
	out[path.n] = '\0';
	if (strstr(out, "/../") || !strcmp(out + path.n - 3, "/.."))
		return -EINVAL;
	return 0;
}

static int mc_mkdirs(char *path)
{
	char *p;

	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	return 0;
}

int mc_store_fs_write(struct mc_store *st, struct mc_strv path, const struct mc_iov *parts,
		      uint32_t np)
{
	char file[MC_RPC_MAX_PATH + 1], tmp[MC_RPC_MAX_PATH + 32];
	uint32_t k;
	off_t off = 0;
	int fd, rc = 0;

	if (mc_fs_checked(st, path, file, sizeof(file))) {
		mc_log_warn("DISK replica path %.*s is not under %s: refused", (int)path.n, path.p,
			    st->fsdir);
		return MC_ERR_INVALID_PARAMS;
	}
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", file, (int)getpid());
	rc = mc_mkdirs(tmp);
	fd = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = rc ? rc : -errno;
		goto fail;
	}
	for (k = 0; k < np && rc == 0; k++) {
		const uint8_t *p = parts[k].base;
		uint64_t left = parts[k].len;

		while (left) {
			ssize_t w = pwrite(fd, p, left > (1u << 30) ? (1u << 30) : (size_t)left, off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				rc = -errno;
				break;
			}
			p += w;
			left -= (uint64_t)w;
			off += w;
		}
	}
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, file) != 0)
		rc = -errno;
	if (rc == 0)
		return 0;
	unlink(tmp);
fail:
	mc_log_warn("writing DISK replica %s failed: %s", file, strerror(-rc));
	return MC_ERR_WRITE_FAIL;
}

int mc_store_fs_read(struct mc_store *st, struct mc_strv path, uint64_t size,
		     const struct mc_get_range *rg, uint32_t nrg)
{
	char file[MC_RPC_MAX_PATH + 1];
	struct stat sb;
	uint32_t k;
	int fd, rc = 0;

	if (mc_fs_checked(st, path, file, sizeof(file)))
		return MC_ERR_INVALID_PARAMS;
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return MC_ERR_INVALID_READ;
	if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != size) {
		close(fd);
		return MC_ERR_INVALID_READ;	/* missing, or another size: never serve it */
	}
	for (k = 0; k < nrg && rc == 0; k++) {
		uint8_t *p = rg[k].dst;
		uint64_t left = rg[k].len;
		off_t off = (off_t)rg[k].src_off;

		while (left) {
			ssize_t r = pread(fd, p, left > (1u << 30) ? (1u << 30) : (size_t)left, off);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				rc = MC_ERR_INVALID_READ;
				break;
			}
			p += r;
			left -= (uint64_t)r;
			off += r;
		}
	}
	close(fd);
	return rc;
}
