/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fuzz targets' main() when the build has no libFuzzer (gcc, or clang without
 * --enable-fuzzing): runs LLVMFuzzerTestOneInput once on each file named on the command line,
 * and on each file of each directory named (in name order), so the seed corpora and the
 * regression inputs of every crash fixed are replayed by every `make check`, under the
 * sanitizers when the build has them.  Options that libFuzzer takes (-name=value) are ignored,
 * so a test can run either kind of binary the same way.  Exits 0 when every input ran (a crash
 * aborts the process, which is the failure).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define FUZZ_REPLAY_MAX (16u << 20)

static int fuzz_replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	size_t n;

	if (f == NULL) {
		fprintf(stderr, "fuzz_replay: %s: cannot open\n", path);
		return -1;
	}
	buf = malloc(FUZZ_REPLAY_MAX);
	if (buf == NULL) {
		fclose(f);
		return -1;
	}
	n = fread(buf, 1, FUZZ_REPLAY_MAX, f);
	fclose(f);
	/* An exact-size copy, so reads past the input's end are caught as in libFuzzer. */
	{
		uint8_t *in = malloc(n ? n : 1);

		if (in == NULL) {
			free(buf);
			return -1;
		}
		memcpy(in, buf, n);
		free(buf);
		LLVMFuzzerTestOneInput(in, n);
		free(in);
	}
	return 0;
}

static int fuzz_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int fuzz_replay_dir(const char *dir, unsigned *count)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0, i;
	int rc = 0;

	if (d == NULL) {
		fprintf(stderr, "fuzz_replay: %s: cannot open\n", dir);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));

			if (nn == NULL) {
				rc = -1;
				break;
			}
			names = nn;
		}
		names[n] = malloc(strlen(dir) + strlen(de->d_name) + 2);
		if (names[n] == NULL) {
			rc = -1;
			break;
		}
		sprintf(names[n], "%s/%s", dir, de->d_name);
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), fuzz_name_cmp);
	for (i = 0; i < n; i++) {
		if (rc == 0 && fuzz_replay_file(names[i]) == 0)
			(*count)++;
		else
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int i, rc = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc && rc == 0; i++) {
		struct stat st;

		if (argv[i][0] == '-')
			continue;	/* a libFuzzer option */
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "fuzz_replay: %s: no such file\n", argv[i]);
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			rc = fuzz_replay_dir(argv[i], &count);
		} else if (fuzz_replay_file(argv[i]) == 0) {
			count++;
		} else {
			rc = -1;
		}
	}
	printf("fuzz_replay: %u inputs ran\n", count);
	return rc ? 1 : 0;
}
