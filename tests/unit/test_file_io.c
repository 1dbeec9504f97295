/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/transfer/file_io: random reads and writes of unaligned ranges from unaligned memory
 * against a shadow copy, with O_DIRECT (a directory on a file system that supports it, argv[1]
 * or $TMPDIR; O_DIRECT is checked to be in use when the file system takes it), on /dev/shm, and
 * with MC_FILE_NO_DIRECT=1, short reads at end of file, and
 * two threads writing disjoint ranges that share blocks.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transfer/file_io.h"
#include "tap.h"

#define FSIZE (3u << 20)

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	return tap_xorshift(&rng);
}

static void run_random(const char *dir, int expect_direct)
{
	char path[512];
	struct mc_file f;
	uint8_t *shadow = calloc(1, FSIZE), *mem = malloc(FSIZE + 64), *back = malloc(FSIZE + 64);
	int i, bad = 0, rc;

	snprintf(path, sizeof(path), "%s/mc_file_io_%d", dir, (int)getpid());
	rc = mc_file_open(&f, path, O_RDWR | O_CREAT | O_TRUNC, 1);
	is(rc, 0, "open %s", path);
	if (rc)
		goto out;
	if (expect_direct >= 0)
		is(mc_file_is_direct(&f), expect_direct, "O_DIRECT %s in %s",
		   expect_direct ? "used" : "not used", dir);
	is(mc_file_pwrite(&f, shadow, FSIZE, 0), FSIZE, "write the whole file");
	for (i = 0; i < 300; i++) {
		uint64_t off = next() % FSIZE, len = next() % (FSIZE - off) % (600u << 10);
		size_t moff = (size_t)(next() % 64);
		uint64_t k;

		if (i % 3 == 0) {	/* aligned everywhere */
			off &= ~4095ull;
			len &= ~4095ull;
			moff = 0;
		}
		if (next() % 2) {
			for (k = 0; k < len; k++)
				mem[moff + k] = (uint8_t)next();
			if (mc_file_pwrite(&f, mem + moff, len, off) != (ssize_t)len)
				bad++;
			memcpy(shadow + off, mem + moff, len);
		} else {
			if (mc_file_pread(&f, back + moff, len, off) != (ssize_t)len ||
			    memcmp(back + moff, shadow + off, len))
				bad++;
		}
	}
	is(bad, 0, "300 random reads and writes of unaligned ranges match the shadow (%d bad)", bad);
	ok(mc_file_pread(&f, back, FSIZE, 0) == FSIZE && !memcmp(back, shadow, FSIZE),
	   "the whole file matches");
	is(mc_file_pread(&f, back, 1u << 20, FSIZE - 1000), 1000, "a read past the end is short");
	ok(mc_file_pwrite(&f, mem, 5000, FSIZE + 100) == 5000 && mc_file_size(&f) == FSIZE + 5100,
	   "a write past the end grows the file to exactly its end");
	is(mc_file_sync(&f), 0, "sync");
	mc_file_close(&f);
	mc_file_close(&f);
	unlink(path);
out:
	free(shadow);
	free(mem);
	free(back);
}

struct writer {
	struct mc_file *f;
	int id;
	int bad;
};

/* Writer id writes 100-byte stripes id, id + 2, ... (neighbours share every block). */
static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t buf[100];
	int i, r;

	for (r = 0; r < 3; r++)
		for (i = w->id; i < 2000; i += 2) {
			memset(buf, 'a' + w->id + r, sizeof(buf));
			if (mc_file_pwrite(w->f, buf, sizeof(buf), (uint64_t)i * 100) != 100)
				w->bad++;
		}
	return NULL;
}

static void run_concurrent(const char *dir)
{
	char path[512];
	struct mc_file f;
	struct writer w[2] = { { &f, 0, 0 }, { &f, 1, 0 } };
	pthread_t t[2];
	uint8_t *back = malloc(200000);
	int i, bad = 0;

	snprintf(path, sizeof(path), "%s/mc_file_io_c_%d", dir, (int)getpid());
	if (mc_file_open(&f, path, O_RDWR | O_CREAT | O_TRUNC, 1)) {
		ok(0, "open %s", path);
		free(back);
		return;
	}
	pthread_create(&t[0], NULL, writer_main, &w[0]);
	pthread_create(&t[1], NULL, writer_main, &w[1]);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	is(mc_file_pread(&f, back, 200000, 0), 200000, "read back the striped file");
	for (i = 0; i < 200000; i++)
		bad += back[i] != 'a' + (i / 100) % 2 + 2;
	ok(w[0].bad + w[1].bad == 0 && bad == 0,
	   "two threads writing interleaved 100-byte stripes never overwrite each other");
	mc_file_close(&f);
	unlink(path);
	free(back);
}

/* 1 if the file system under dir accepts O_DIRECT. */
static int direct_works(const char *dir)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/mc_file_io_probe_%d", dir, (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	if (fd >= 0)
		close(fd);
	unlink(path);
	return fd >= 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct mc_file f;

	ok(mc_file_open(&f, "/nonexistent/dir/x", O_RDONLY, 1) == -ENOENT && f.fd == -1,
	   "a missing file gives -ENOENT");
	mc_file_close(&f);
	run_random(dir, direct_works(dir));
	run_concurrent(dir);
	/* tmpfs: O_DIRECT only since Linux 6.6. */
	if (access("/dev/shm", W_OK) == 0)
		run_random("/dev/shm", direct_works("/dev/shm"));
	setenv("MC_FILE_NO_DIRECT", "1", 1);
	run_random(dir, 0);
	return tap_done();
}
