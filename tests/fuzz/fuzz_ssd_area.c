/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: what an SSD area reads back from disk at start-up (src/ssd/ssd_area.c's record
 * check and directory scan, ssd_area_file.c's single-file layout, ssd_area_index.c's index),
 * and what it then does with what it found.  A disk can hold anything after a crash, a bad
 * block or another program's writes.
 *
 * Input: one flags byte, then chunks of FUZZ_CHUNK bytes.
 *   flags bit 0: repair the checksums (superblock, free headers, record headers, values) and
 *                the sizes, so the fuzzer gets past them to the logic behind them;
 *   flags bit 1: a directory area: chunk i is the file "<seq>.mco" (the seq of its header;
 *                with bit 2 the name is taken from the chunk's second byte instead, so names
 *                that do not match are tried too), cut or extended to the length its header
 *                gives when bit 0 is set;
 *   otherwise:   a single-file area in a memfd: chunk i at the start of block i (block 0 the
 *                superblock), every other byte zero, two more empty blocks at the end.
 * The area is opened; every object is listed, verified, read whole and by range; one is
 * removed, one written and one replaced; the area is closed and opened again, and must then
 * hold the same objects.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/wire.h"
#include "ssd/ssd_area.h"
#include "ssd/ssd_area_int.h"
#include "fuzz_util.h"

#define FUZZ_CHUNK 256
#define FUZZ_MAX_BLOCKS 24
#define FUZZ_SA_MAGIC 0x4153434Du
#define FUZZ_SA_FREE_MAGIC 0x4653434Du

static char tmpdir[256];

/* Repair the record at rec (avail bytes of it are there, the rest reads as zero): version,
 * key length, value checksum, header checksum.  Returns the record's length (data_off + size),
 * value size capped so it fits in cap bytes. */
static uint64_t fuzz_fix_record(uint8_t *rec, size_t cap)
{
	uint32_t key_len = mc_get_le32(rec + 24) % 128 + 1;
	uint64_t size = mc_get_le64(rec + 16), off = mc_ssd_data_off(key_len);
	uint32_t crc;

	if (off >= cap)
		return 0;
	size = size % (cap - off) + 1;
	if (off + size > cap)
		size = cap - off;
	mc_put_le32(rec + 4, MC_SSD_VERSION);
	mc_put_le64(rec + 16, size);
	mc_put_le32(rec + 24, key_len);
	memset(rec + 45, 0, 3);
	memset(rec + 56, 0, 8);
	rec[44] &= MC_SSD_HAS_OCRC;
	if (!(rec[44] & MC_SSD_HAS_OCRC))
		memset(rec + 48, 0, 8);
	mc_put_le32(rec + 40, mc_crc32c(0, rec + off, (size_t)size));
	memset(rec + 28, 0, 4);
	crc = mc_crc32c(0, rec, MC_SSD_HDR);
	crc = mc_crc32c(crc, rec + MC_SSD_HDR, key_len);
	mc_put_le32(rec + 28, crc);
	return off + size;
}

/* The single-file area: its bytes (malloc'ed) and size. */
static uint8_t *fuzz_area_file(const uint8_t *data, size_t size, int fix, size_t *len)
{
	size_t nchunks = (size + FUZZ_CHUNK - 1) / FUZZ_CHUNK, blocks, b;
	uint8_t *area;

	if (nchunks > FUZZ_MAX_BLOCKS)
		nchunks = FUZZ_MAX_BLOCKS;
	blocks = nchunks + 2;
	area = calloc(blocks, MC_SSD_ALIGN);
	if (area == NULL)
		abort();
	for (b = 0; b < nchunks; b++) {
		size_t n = size - b * FUZZ_CHUNK < FUZZ_CHUNK ? size - b * FUZZ_CHUNK : FUZZ_CHUNK;

		memcpy(area + b * MC_SSD_ALIGN, data + b * FUZZ_CHUNK, n);
	}
	*len = blocks * MC_SSD_ALIGN;
	if (!fix)
		return area;
	for (b = 1; b < blocks; b++) {
		uint8_t *h = area + b * MC_SSD_ALIGN;

		if (mc_get_le32(h) == FUZZ_SA_FREE_MAGIC) {
			uint64_t l = (mc_get_le64(h + 8) % (blocks - b) + 1) * MC_SSD_ALIGN;

			mc_put_le32(h + 4, 1);
			mc_put_le64(h + 8, l);
			mc_put_le32(h + 16, mc_crc32c(0, h, 16));
		} else if (mc_get_le32(h) == MC_SSD_MAGIC) {
			fuzz_fix_record(h, (blocks - b) * MC_SSD_ALIGN);
		}
	}
	if (mc_get_le32(area) == FUZZ_SA_MAGIC) {
		mc_put_le32(area + 4, 1);
		mc_put_le64(area + 8, *len);
		mc_put_le32(area + 16, mc_crc32c(0, area, 16));
	}
	return area;
}

static void fuzz_write(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || write(fd, p, n) != (ssize_t)n)
		abort();
	close(fd);
}

static void fuzz_clean_dir(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	char path[600];

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || de->d_name[1] == '.'))
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, de->d_name);
		unlink(path);
	}
	closedir(d);
}

/* The directory area: one file per chunk. */
static void fuzz_area_dir(const uint8_t *data, size_t size, int fix, int any_name)
{
	size_t nchunks = (size + FUZZ_CHUNK - 1) / FUZZ_CHUNK, b;
	uint8_t rec[3 * MC_SSD_ALIGN];

	fuzz_clean_dir();
	if (nchunks > FUZZ_MAX_BLOCKS)
		nchunks = FUZZ_MAX_BLOCKS;
	for (b = 0; b < nchunks; b++) {
		size_t n = size - b * FUZZ_CHUNK < FUZZ_CHUNK ? size - b * FUZZ_CHUNK : FUZZ_CHUNK;
		size_t len = n;
		char path[600];

		memset(rec, 0, sizeof(rec));
		memcpy(rec, data + b * FUZZ_CHUNK, n);
		if (fix && mc_get_le32(rec) == MC_SSD_MAGIC)
			len = (size_t)fuzz_fix_record(rec, sizeof(rec));
		if (any_name)
			snprintf(path, sizeof(path), "%s/%016x.%s", tmpdir, rec[1],
				 rec[2] & 1 ? "tmp" : "mco");
		else
			snprintf(path, sizeof(path), "%s/%016llx.mco", tmpdir,
				 (unsigned long long)mc_get_le64(rec + 8));
		fuzz_write(path, rec, len);
	}
}

/* What a client does with an area it opened. */
static void fuzz_use(struct mc_ssd *s)
{
	struct mc_ssd_item *items = NULL;
	long n = mc_ssd_list(s, 0, SIZE_MAX, &items), i;
	uint8_t buf[3 * MC_SSD_ALIGN];
	uint64_t addr;

	if (n < 0)
		abort();
	if ((size_t)n != mc_ssd_count(s))
		abort();
	for (i = 0; i < n; i++) {
		int fd;
		uint64_t off;

		if (mc_ssd_verify(s, items[i].key, items[i].key_len, items[i].addr) != 0)
			continue;
		if (items[i].size <= sizeof(buf))
			(void)mc_ssd_read(s, items[i].addr, buf, items[i].size);
		(void)mc_ssd_read(s, items[i].addr, buf, 1);
		if (mc_ssd_open_range(s, items[i].addr, items[i].size, &fd, &off) == 0)
			close(fd);
	}
	if (n > 0)
		(void)mc_ssd_remove(s, items[0].key, items[0].key_len, items[0].addr);
	mc_ssd_items_free(items, (size_t)n);
	memset(buf, 0x5a, sizeof(buf));
	(void)mc_ssd_put(s, "fuzz-new", 8, buf, 5000, 7, &addr);
	if (n > 1) {
		uint64_t ocrc = 42;

		items = NULL;
		n = mc_ssd_list(s, 1, 2, &items);
		if (n > 0)
			(void)mc_ssd_put_checksummed(s, items[0].key, items[0].key_len, buf, 100, 9,
						     &ocrc, &addr);
		if (n >= 0)
			mc_ssd_items_free(items, (size_t)n);
	}
	(void)mc_ssd_sync(s);
	n = mc_ssd_suspects(s, &items);
	if (n >= 0)
		mc_ssd_items_free(items, (size_t)n);
	(void)mc_ssd_used(s);
}

static void fuzz_rm_tmpdir(void)
{
	fuzz_clean_dir();
	rmdir(tmpdir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[600];
	struct mc_ssd *s;
	uint8_t flags;
	int err = 0, fd = -1;
	size_t before;

	if (tmpdir[0] == '\0') {
		const char *t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

		fuzz_quiet_logs();
		snprintf(tmpdir, sizeof(tmpdir), "%s/mc-fuzz-ssd-%d", t, (int)getpid());
		if (mkdir(tmpdir, 0700) != 0)
			abort();
		atexit(fuzz_rm_tmpdir);
	}
	if (size == 0)
		return 0;
	flags = data[0];
	if (flags & 2) {
		fuzz_area_dir(data + 1, size - 1, flags & 1, flags & 4);
		snprintf(path, sizeof(path), "%s", tmpdir);
	} else {
		size_t len;
		uint8_t *area = fuzz_area_file(data + 1, size - 1, flags & 1, &len);

		fd = fuzz_file(area, len, path, sizeof(path));
		free(area);
		if (fd < 0)
			abort();
	}
	s = mc_ssd_open(path, 1u << 20, &err);
	if (s != NULL) {
		fuzz_use(s);
		before = mc_ssd_count(s);
		mc_ssd_close(s);
		/* What this process wrote and kept is found again. */
		s = mc_ssd_open(path, 1u << 20, &err);
		if (s == NULL || mc_ssd_count(s) != before)
			abort();
		mc_ssd_close(s);
	}
	if (fd >= 0)
		close(fd);
	if (flags & 2)
		fuzz_clean_dir();
	return 0;
}
