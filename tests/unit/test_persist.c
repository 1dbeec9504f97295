/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the SQLite persistence module (src/persist/persist.c). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/errcode.h"
#include "common/wire.h"
#include "persist/persist.h"
#include "tap.h"

struct seen {
	int segments, objects, bad;
	uint64_t size_sum;
};

static int on_seg(void *arg, const struct mc_persist_segment *s)
{
	struct seen *x = arg;

	x->segments++;
	if (strcmp(s->protocol, "tcp") || s->size != 1u << 30 || s->id[0] != 7)
		x->bad++;
	return 0;
}

/* Counts kind 1 segments in bad, checks kind 0 ones. */
static int on_seg_kind(void *arg, const struct mc_persist_segment *s)
{
	struct seen *x = arg;

	x->segments++;
	x->bad += s->kind == 1 && s->base == 0;
	if (s->kind > 1)
		x->bad += 100;
	return 0;
}

/* Segments of the schema upgrade to 4: id[1] == 3 is the dormant one written with a token of
 * 0xab bytes and an end of 1234567 (counted in size_sum); any other must be mounted, tokenless. */
static int on_seg_token(void *arg, const struct mc_persist_segment *s)
{
	static const uint8_t zero[16];
	struct seen *x = arg;
	uint8_t ab[16];

	memset(ab, 0xab, sizeof(ab));
	x->segments++;
	if (s->id[1] == 3) {
		x->bad += s->dormant_until_ms != 1234567 || memcmp(s->token, ab, 16) != 0;
		x->size_sum++;
	} else {
		x->bad += s->dormant_until_ms != 0 || memcmp(s->token, zero, 16) != 0;
	}
	return 0;
}

static int on_obj(void *arg, const struct mc_persist_object *o)
{
	struct seen *x = arg;

	x->objects++;
	x->size_sum += o->size;
	if (o->n_replicas != 1 || o->replicas[0].offset != o->size * 2 ||
	    o->replicas[0].segment_id[0] != 7 || o->replicas[0].status != 3 ||
	    o->gen != (o->size - 1) * 3 + 1)
		x->bad++;
	return 0;
}

static void put_obj(struct mc_persist *p, int i)
{
	char key[32];
	struct mc_persist_replica r = { .id = (uint64_t)i, .type = 0, .status = 3 };
	struct mc_persist_object o = { .key = key, .n_replicas = 1, .replicas = &r };

	snprintf(key, sizeof(key), "key-%d", i);
	o.key_len = strlen(key);
	o.size = (uint64_t)i + 1;
	o.gen = (uint64_t)i * 3 + 1;	/* checked by on_obj: generations round-trip */
	r.segment_id[0] = 7;
	r.offset = o.size * 2;
	r.len = o.size;
	mc_persist_put_object(p, &o);
}

struct count {
	int objects, has_key0;
};

static int on_seg_any(void *arg, const struct mc_persist_segment *s)
{
	(void)arg;
	(void)s;
	return 0;
}

/* Objects of the checksum test: "old" (a schema 4 row) has none; "c/0" has 0, "c/max" has
 * 2^64 - 1, "c/none" has none.  Counts the objects; bad on any other value. */
static int on_obj_checksum(void *arg, const struct mc_persist_object *o)
{
	struct seen *x = arg;
	int want_has = 0;
	uint64_t want = 0;

	x->objects++;
	if (o->key_len == 3 && !memcmp(o->key, "c/0", 3)) {
		want_has = 1;
	} else if (o->key_len == 5 && !memcmp(o->key, "c/max", 5)) {
		want_has = 1;
		want = UINT64_MAX;
	} else if (!(o->key_len == 3 && !memcmp(o->key, "old", 3)) &&
		   !(o->key_len == 6 && !memcmp(o->key, "c/none", 6))) {
		x->bad += 100;
	}
	x->bad += o->has_checksum != want_has || o->checksum != want;
	x->size_sum += o->gen == 77;	/* the schema 4 row kept its generation */
	return 0;
}

static int on_obj_count(void *arg, const struct mc_persist_object *o)
{
	struct count *c = arg;

	c->objects++;
	c->has_key0 |= o->key_len == 5 && !memcmp(o->key, "key-0", 5);
	return 0;
}

/* In a child (the fault hook is process-wide): with the fault at point switched on through a
 * flag file, a commit fails, keeps its batch whole, fails again on retry; once the flag is gone
 * the same batch commits and a reopen finds exactly what was committed.  Exit status 0, or the
 * number of the step that went wrong. */
static int fault_child(const char *dir, const char *point)
{
	char path[256], flag[256];
	struct mc_persist *p;
	struct count c = { 0 };
	FILE *f;
	int i, rc = 0;

	snprintf(path, sizeof(path), "%s/fault-%s.db", dir, point);
	snprintf(flag, sizeof(flag), "%s/fault-%s.flag", dir, point);
	setenv("MC_TEST_SQLITE_FAULT", point, 1);
	setenv("MC_TEST_SQLITE_FAULT_FILE", flag, 1);
	if (!mc_persist_fault_install())
		return 1;
	if (mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p))
		return 2;
	for (i = 0; i < 10; i++)
		put_obj(p, i);
	if (mc_persist_commit(p))
		return 3;
	if (!strcmp(point, "checkpoint")) {
		/* Grow the log until a checkpoint is due, then fail it. */
		for (i = 10; i < 200000 && !mc_persist_checkpoint_due(p); i++) {
			put_obj(p, i);
			if (i % 1000 == 0 && mc_persist_commit(p))
				return 4;
		}
		if (mc_persist_commit(p) || !mc_persist_checkpoint_due(p))
			return 5;
		if ((f = fopen(flag, "w")) == NULL)
			return 6;
		fclose(f);
		/* The checkpointer thread runs it: a later call reports its failure (5 s at most). */
		for (i = 0; i < 500 && (rc = mc_persist_checkpoint(p)) == 0; i++)
			usleep(10000);
		if (rc != MC_ERR_PERSISTENT_FAIL || !mc_persist_checkpoint_due(p))
			return 7;
		if (strcmp(mc_persist_error_class(mc_persist_last_error(p)), "I/O error"))
			return 8;
		unlink(flag);
		if (mc_persist_checkpoint(p) != 0 || mc_persist_checkpoint_due(p))
			return 9;
		mc_persist_close(p);
		return 0;
	}
	if ((f = fopen(flag, "w")) == NULL)
		return 6;
	fclose(f);
	for (i = 10; i < 15; i++)
		put_obj(p, i);
	mc_persist_del_object(p, "key-0", 5, 1);
	if (mc_persist_commit(p) != MC_ERR_PERSISTENT_FAIL || mc_persist_pending(p) != 6)
		return 7;
	if (mc_persist_last_error(p) == 0 ||
	    mc_persist_map_error(mc_persist_last_error(p)) != MC_ERR_PERSISTENT_FAIL)
		return 8;
	if (mc_persist_commit(p) != MC_ERR_PERSISTENT_FAIL || mc_persist_pending(p) != 6)
		return 9;
	unlink(flag);
	if (mc_persist_commit(p) != 0 || mc_persist_pending(p) != 0 || mc_persist_last_error(p))
		return 10;
	mc_persist_close(p);
	if (mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p) ||
	    mc_persist_load(p, on_seg_any, on_obj_count, &c))
		return 11;
	mc_persist_close(p);
	return c.objects == 14 && !c.has_key0 ? 0 : 12;
}

/* Replication (the master's HA): the pending batch taken in parts (changes to the same row
 * coalesced, meta values in the last part) and applied to another database; a snapshot reader's
 * encoding applied in bounded steps to a third; all three hold the same rows. */
static void replication_tests(const char *dir)
{
	char a[256], b[256], c[256];
	struct mc_persist *pa, *pb, *pc;
	struct mc_persist_reader *r;
	struct mc_persist_segment s = { .name = "host:1", .base = 4096, .size = 1u << 30,
					.endpoint = "127.0.0.1:5000", .protocol = "tcp" };
	struct mc_wbuf parts[64], w;
	struct iovec iov[64];
	struct mc_rbuf rb;
	struct seen x = { 0 };
	uint64_t n, segs = 0, objs = 0;
	size_t taken = 0;
	int i, np = 0, steps = 0, rc = 0;

	snprintf(a, sizeof(a), "%s/ha-a.db", dir);
	snprintf(b, sizeof(b), "%s/ha-b.db", dir);
	snprintf(c, sizeof(c), "%s/ha-c.db", dir);
	if (mc_persist_open(a, MC_PERSIST_SYNC_NORMAL, &pa) ||
	    mc_persist_open(b, MC_PERSIST_SYNC_NORMAL, &pb) ||
	    mc_persist_open(c, MC_PERSIST_SYNC_NORMAL, &pc)) {
		ok(0, "open three databases");
		return;
	}
	s.id[0] = 7;
	mc_persist_put_segment(pa, &s);
	for (i = 0; i < 50; i++)
		put_obj(pa, i);		/* a PutStart's row ... */
	for (i = 0; i < 50; i++)
		put_obj(pa, i);		/* ... written again by its PutEnd */
	mc_persist_del_object(pa, "key-3", 5, 10);
	mc_persist_set_meta(pa, "next_replica_id", 777);
	while (mc_persist_pending(pa) > 0 && np < 64) {
		mc_wbuf_init(&parts[np]);
		taken += mc_persist_take(pa, &parts[np], 1500, SIZE_MAX);
		iov[np].iov_base = parts[np].data;
		iov[np].iov_len = parts[np].len;
		np++;
	}
	ok(np > 1 && taken == 52 && mc_persist_pending_bytes(pa) == 0,
	   "the batch is taken in %d parts of at most 1500 bytes: 52 changes (the second write of "
	   "each row and a row deleted later coalesced; got %zu)", np, taken);
	ok(mc_persist_apply_batches(pb, iov, np) == 0 && mc_persist_apply_batches(pa, iov, np) == 0,
	   "the parts apply to the standby's database and to the leader's own");
	mc_persist_load(pb, on_seg, on_obj, &x);
	ok(x.segments == 1 && x.objects == 49 && x.bad == 0 &&
	   mc_persist_get_meta(pb, "next_replica_id") == 777,
	   "the standby holds 1 segment, 49 objects and the meta value (%d %d bad %d)", x.segments,
	   x.objects, x.bad);
	for (i = 0; i < np; i++)
		mc_wbuf_fini(&parts[i]);
	{
		/* --oplog_batch_max_entries: at most that many changes a part. */
		size_t got[8] = { 0 };
		int k = 0;

		for (i = 100; i < 110; i++)
			put_obj(pa, i);
		while (mc_persist_pending(pa) > 0 && k < 8) {
			struct mc_wbuf pw;

			mc_wbuf_init(&pw);
			got[k++] = mc_persist_take(pa, &pw, 1u << 20, 3);
			mc_wbuf_fini(&pw);
		}
		ok(k == 4 && got[0] == 3 && got[1] == 3 && got[2] == 3 && got[3] >= 1,
		   "ten changes taken at most three a part: %d parts (%zu %zu %zu %zu)", k, got[0],
		   got[1], got[2], got[3]);
	}
	/* A snapshot of the standby's file, restored into a third in steps. */
	mc_wbuf_init(&w);
	if (mc_persist_reader_open(b, &r) == 0) {
		rc |= mc_persist_reader_segments(r, &w, &segs);
		do {
			rc |= mc_persist_reader_objects(r, &w, 10, &n);
			objs += n;
		} while (n == 10);
		rc |= mc_persist_reader_metas(r, &w);
		mc_persist_reader_close(r);
	} else {
		rc = -1;
	}
	ok(rc == 0 && segs == 1 && objs == 49, "the snapshot reader encodes %llu segment and %llu "
	   "objects", (unsigned long long)segs, (unsigned long long)objs);
	mc_rbuf_init(&rb, w.data, w.len);
	while (rb.left > 0 && rc == 0 && steps < 1000) {
		rc = mc_persist_apply_some(pc, &rb, 7);
		steps++;
	}
	memset(&x, 0, sizeof(x));
	mc_persist_load(pc, on_seg, on_obj, &x);
	ok(rc == 0 && steps > 5 && x.segments == 1 && x.objects == 49 && x.bad == 0 &&
	   mc_persist_get_meta(pc, "next_replica_id") == 777,
	   "restored in %d steps of 7 changes: the same rows", steps);
	ok(mc_persist_wipe(pc) == 0 && mc_persist_get_meta(pc, "next_replica_id") == 0,
	   "wipe empties the database");
	ok(mc_persist_reader_open(":memory:", &r) != 0, "an in-memory database cannot be read for "
	   "a snapshot");
	mc_wbuf_fini(&w);
	mc_persist_close(pa);
	mc_persist_close(pb);
	mc_persist_close(pc);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Records seen by mc_persist_load_records. */
static struct {
	int n;
	char last[64];
} recs;

static int on_record(void *arg, const void *id, size_t id_len, const void *val, size_t len)
{
	(void)arg;
	recs.n++;
	snprintf(recs.last, sizeof(recs.last), "%.*s=%.*s", (int)id_len, (const char *)id,
		 (int)len, (const char *)val);
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/mc-persist-XXXXXX", path[256], cmd[300];
	struct mc_persist *p;
	struct mc_persist_segment s = { .name = "host:1", .base = 4096, .size = 1u << 30,
					.endpoint = "127.0.0.1:5000", .protocol = "tcp" };
	struct seen x = { 0 };
	pid_t pid;
	int i, st;
	double t0;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/master.db", dir);
	is(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p), 0, "open a new database");
	s.id[0] = 7;
	is(mc_persist_put_segment(p, &s), 0, "put a segment");
	for (i = 0; i < 100; i++)
		put_obj(p, i);
	is(mc_persist_pending(p), 101, "changes are pending before commit");
	ok(mc_persist_commit(p) == 0 && mc_persist_pending(p) == 0, "commit");
	ok(mc_persist_del_object(p, "key-5", 5, 16) == 0 && mc_persist_commit(p) == 0, "delete one");
	mc_persist_set_meta(p, "next_replica_id", 12345);
	mc_persist_commit(p);
	mc_persist_close(p);

	is(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p), 0, "reopen");
	is(mc_persist_load(p, on_seg, on_obj, &x), 0, "load");
	ok(x.segments == 1 && x.objects == 99 && x.bad == 0,
	   "reloaded 1 segment and 99 objects with their fields (%d %d bad %d)", x.segments,
	   x.objects, x.bad);
	ok(mc_persist_get_meta(p, "next_replica_id") == 12345 && mc_persist_get_meta(p, "nope") == 0,
	   "meta values survive");
	/* Records: put, replace, delete, by kind; deleting every object leaves them. */
	ok(mc_persist_put_record(p, 1, "a", 1, "one", 3) == 0 &&
		   mc_persist_put_record(p, 1, "b", 1, "two", 3) == 0 &&
		   mc_persist_put_record(p, 2, "a", 1, "other kind", 10) == 0 &&
		   mc_persist_put_record(p, 1, "a", 1, "uno", 3) == 0 &&
		   mc_persist_del_record(p, 1, "b", 1) == 0 && mc_persist_del_all_objects(p) == 0 &&
		   mc_persist_commit(p) == 0,
	   "records put, replaced and deleted");
	mc_persist_close(p);
	is(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p), 0, "reopen for the records");
	memset(&recs, 0, sizeof(recs));
	ok(mc_persist_load_records(p, 1, on_record, &recs) == 0 && recs.n == 1 &&
		   !strcmp(recs.last, "a=uno"),
	   "records of kind 1 reload: the replaced value, not the deleted one (%d, %s)", recs.n,
	   recs.last);
	memset(&recs, 0, sizeof(recs));
	ok(mc_persist_load_records(p, 2, on_record, &recs) == 0 && recs.n == 1,
	   "records of another kind are apart");
	mc_persist_del_record(p, 1, "a", 1);
	mc_persist_del_record(p, 2, "a", 1);
	mc_persist_commit(p);
	mc_persist_close(p);
	/* The object rows went with the records' commit: put them back for what follows. */
	ok(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p) == 0, "reopen");
	for (i = 0; i < 100; i++)
		if (i != 5)
			put_obj(p, i);
	mc_persist_commit(p);
	mc_persist_close(p);

	/* Crash: a child commits 50 more objects, leaves 50 uncommitted and is killed. */
	pid = fork();
	if (pid == 0) {
		if (mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p))
			_exit(1);
		for (i = 1000; i < 1050; i++)
			put_obj(p, i);
		mc_persist_commit(p);
		for (i = 2000; i < 2050; i++)
			put_obj(p, i);
		kill(getpid(), SIGKILL);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	ok(WIFSIGNALED(st), "writer killed with SIGKILL");
	memset(&x, 0, sizeof(x));
	ok(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
		   mc_persist_load(p, on_seg, on_obj, &x) == 0,
	   "database opens after the crash");
	ok(x.objects == 149 && x.bad == 0,
	   "committed changes survived kill -9, uncommitted ones did not (%d objects)", x.objects);

	/* Scale: 1M objects written in group commits of 10k, then reloaded. */
	ok(mc_persist_del_all_objects(p) == 0 && mc_persist_commit(p) == 0, "delete all objects");
	t0 = now_s();
	for (i = 0; i < 1000000; i++) {
		put_obj(p, i);
		if (i % 10000 == 9999 && mc_persist_commit(p) == 0 && mc_persist_checkpoint_due(p))
			mc_persist_checkpoint(p);
	}
	mc_persist_commit(p);
	printf("# 1M object rows written in %.2f s\n", now_s() - t0);
	mc_persist_close(p);
	memset(&x, 0, sizeof(x));
	t0 = now_s();
	ok(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
		   mc_persist_load(p, on_seg, on_obj, &x) == 0 && x.objects == 1000000 && x.bad == 0,
	   "1M objects reload intact");
	printf("# 1M object rows reloaded in %.2f s\n", now_s() - t0);
	mc_persist_close(p);

	/* A version 1 file (no segments.kind) is upgraded in place; SSD areas (kind 1) survive. */
	{
		char v1[600];
		sqlite3 *db;
		struct mc_persist_segment ps = { .name = "host:9", .base = 0, .size = 1u << 30,
						 .endpoint = "h:1", .protocol = "tcp", .kind = 1 };
		struct seen y;
		int rc;

		snprintf(v1, sizeof(v1), "%s/v1.db", dir);
		rc = sqlite3_open(v1, &db);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db,
					  "CREATE TABLE segments(id BLOB PRIMARY KEY, client_id BLOB NOT "
					  "NULL, name TEXT NOT NULL, base INTEGER NOT NULL, size INTEGER "
					  "NOT NULL, endpoint TEXT NOT NULL, protocol TEXT NOT NULL);"
					  "INSERT INTO segments VALUES (x'07000000000000000000000000000000',"
					  " x'01000000000000000000000000000000', 'old:1', 4096, 1073741824, 'h:1',"
					  " 'tcp');"
					  "PRAGMA user_version=1;",
					  NULL, NULL, NULL);
		sqlite3_close(db);
		memset(&y, 0, sizeof(y));
		ok(rc == SQLITE_OK && mc_persist_open(v1, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
			   mc_persist_load(p, on_seg, on_obj, &y) == 0 && y.segments == 1 && y.bad == 0,
		   "a schema 1 database opens and its segment loads");
		ps.id[0] = 7;
		ps.id[1] = 2;
		ok(mc_persist_put_segment(p, &ps) == 0 && mc_persist_commit(p) == 0,
		   "an SSD area (kind 1) is recorded");
		mc_persist_close(p);
		memset(&y, 0, sizeof(y));
		ok(mc_persist_open(v1, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
			   mc_persist_load(p, on_seg_kind, on_obj, &y) == 0 && y.segments == 2 &&
			   y.bad == 1,
		   "after the upgrade the memory segment has kind 0 and the SSD area kind 1");
		mc_persist_close(p);
	}

	/* Error mapping: every storage failure is PERSISTENT_FAIL, named for the log. */
	ok(mc_persist_map_error(SQLITE_OK) == 0 && mc_persist_map_error(SQLITE_DONE) == 0,
	   "SQLite success codes map to 0");
	ok(mc_persist_map_error(SQLITE_FULL) == MC_ERR_PERSISTENT_FAIL &&
		   mc_persist_map_error(SQLITE_IOERR_WRITE) == MC_ERR_PERSISTENT_FAIL &&
		   mc_persist_map_error(SQLITE_IOERR_FSYNC) == MC_ERR_PERSISTENT_FAIL &&
		   mc_persist_map_error(SQLITE_READONLY) == MC_ERR_PERSISTENT_FAIL &&
		   mc_persist_map_error(SQLITE_CANTOPEN) == MC_ERR_PERSISTENT_FAIL &&
		   mc_persist_map_error(SQLITE_CORRUPT) == MC_ERR_PERSISTENT_FAIL,
	   "disk full, I/O errors, read-only, cannot open and corrupt map to PERSISTENT_FAIL");
	is(mc_persist_map_error(SQLITE_NOMEM), -ENOMEM, "SQLITE_NOMEM maps to -ENOMEM");
	ok(!strcmp(mc_persist_error_class(SQLITE_FULL), "disk full") &&
		   !strcmp(mc_persist_error_class(SQLITE_IOERR_WRITE), "I/O error") &&
		   !strcmp(mc_persist_error_class(SQLITE_READONLY_DBMOVED), "read-only") &&
		   !strcmp(mc_persist_error_class(SQLITE_CANTOPEN), "cannot open") &&
		   !strcmp(mc_persist_error_class(SQLITE_OK), "ok"),
	   "error classes name the failure");
	{
		static const char *const points[] = { "begin", "insert", "commit", "checkpoint" };

		for (i = 0; i < 4; i++) {
			pid = fork();
			if (pid == 0)
				_exit(fault_child(dir, points[i]));
			waitpid(pid, &st, 0);
			ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			   "fault at %s: the failed batch is kept whole and commits once the fault "
			   "clears (step %d)", points[i], WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		}
	}
	/* A version 3 file (segments without token and dormant_until_ms) is upgraded in place; a
	 * dormant segment's token and end survive a reload, a mounted one reads as such. */
	{
		char v3[600];
		sqlite3 *db;
		struct mc_persist_segment ps = { .name = "host:3", .base = 8192, .size = 1u << 30,
						 .endpoint = "h:3", .protocol = "tcp",
						 .dormant_until_ms = 1234567 };
		struct seen y;
		int rc;

		snprintf(v3, sizeof(v3), "%s/v3.db", dir);
		rc = sqlite3_open(v3, &db);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db,
					  "CREATE TABLE segments(id BLOB PRIMARY KEY, client_id BLOB NOT "
					  "NULL, name TEXT NOT NULL, base INTEGER NOT NULL, size INTEGER "
					  "NOT NULL, endpoint TEXT NOT NULL, protocol TEXT NOT NULL, kind "
					  "INTEGER NOT NULL DEFAULT 0);"
					  "CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL, "
					  "flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, "
					  "soft_pin_until_ms INTEGER NOT NULL, writer BLOB NOT NULL, "
					  "replicas BLOB NOT NULL, gen INTEGER NOT NULL DEFAULT 0) WITHOUT "
					  "ROWID;"
					  "INSERT INTO segments VALUES (x'07000000000000000000000000000000',"
					  " x'01000000000000000000000000000000', 'old:3', 4096, 1073741824, 'h:1',"
					  " 'tcp', 0);"
					  "PRAGMA user_version=3;",
					  NULL, NULL, NULL);
		sqlite3_close(db);
		memset(&y, 0, sizeof(y));
		ok(rc == SQLITE_OK && mc_persist_open(v3, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
			   mc_persist_load(p, on_seg_token, on_obj, &y) == 0 && y.segments == 1 &&
			   y.bad == 0,
		   "a schema 3 database opens and its segment loads mounted, without a token");
		ps.id[0] = 7;
		ps.id[1] = 3;
		memset(ps.token, 0xab, sizeof(ps.token));
		ok(mc_persist_put_segment(p, &ps) == 0 && mc_persist_commit(p) == 0,
		   "a dormant segment with a token is recorded");
		mc_persist_close(p);
		memset(&y, 0, sizeof(y));
		ok(mc_persist_open(v3, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
			   mc_persist_load(p, on_seg_token, on_obj, &y) == 0 && y.segments == 2 &&
			   y.bad == 0 && y.objects == 0 && y.size_sum == 1,
		   "after the upgrade its token and dormant end come back");
		mc_persist_close(p);
	}

	/* A version 4 file (objects without checksum) is upgraded in place: its rows are kept,
	 * with no checksum; checksums written after (0 and 2^64 - 1 are values like any other)
	 * come back, and an object without one reads as such. */
	{
		char v4[600];
		sqlite3 *db;
		struct mc_persist_replica r = { .id = 1, .type = 0, .status = 3, .len = 8 };
		struct mc_persist_object o = { .size = 8, .n_replicas = 1, .replicas = &r };
		struct seen y;
		int rc;

		snprintf(v4, sizeof(v4), "%s/v4.db", dir);
		rc = sqlite3_open(v4, &db);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db,
					  "CREATE TABLE segments(id BLOB PRIMARY KEY, client_id BLOB NOT "
					  "NULL, name TEXT NOT NULL, base INTEGER NOT NULL, size INTEGER "
					  "NOT NULL, endpoint TEXT NOT NULL, protocol TEXT NOT NULL, kind "
					  "INTEGER NOT NULL DEFAULT 0, token BLOB, dormant_until_ms INTEGER "
					  "NOT NULL DEFAULT 0);"
					  "CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL, "
					  "flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, "
					  "soft_pin_until_ms INTEGER NOT NULL, writer BLOB NOT NULL, "
					  "replicas BLOB NOT NULL, gen INTEGER NOT NULL DEFAULT 0) WITHOUT "
					  "ROWID;"
					  "INSERT INTO objects VALUES (x'6f6c64', 8, 0, 1, 0, "
					  "x'01000000000000000000000000000000', x'', 77);"
					  "PRAGMA user_version=4;",
					  NULL, NULL, NULL);
		sqlite3_close(db);
		memset(&y, 0, sizeof(y));
		ok(rc == SQLITE_OK && mc_persist_open(v4, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
			   mc_persist_load(p, on_seg_any, on_obj_checksum, &y) == 0 &&
			   y.objects == 1 && y.bad == 0 && y.size_sum == 1,
		   "a schema 4 database opens; its object is kept, without a checksum");
		o.key = "c/0";
		o.key_len = 3;
		o.gen = 100;
		o.has_checksum = 1;
		o.checksum = 0;
		rc = mc_persist_put_object(p, &o);
		o.key = "c/max";
		o.key_len = 5;
		o.gen = 101;
		o.checksum = UINT64_MAX;
		rc |= mc_persist_put_object(p, &o);
		o.key = "c/none";
		o.key_len = 6;
		o.gen = 102;
		o.has_checksum = 0;
		o.checksum = 0;
		rc |= mc_persist_put_object(p, &o);
		ok(rc == 0 && mc_persist_commit(p) == 0, "objects with checksums 0, 2^64-1 and none "
		   "are recorded");
		mc_persist_close(p);
		memset(&y, 0, sizeof(y));
		ok(mc_persist_open(v4, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
			   mc_persist_load(p, on_seg_any, on_obj_checksum, &y) == 0 &&
			   y.objects == 4 && y.bad == 0,
		   "their checksums come back exactly, and absent where there was none (%d objects, "
		   "bad %d)", y.objects, y.bad);
		mc_persist_close(p);
		rc = sqlite3_open(v4, &db);
		if (rc == SQLITE_OK) {
			sqlite3_stmt *vst = NULL;

			rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &vst, NULL);
			ok(rc == SQLITE_OK && sqlite3_step(vst) == SQLITE_ROW &&
				   sqlite3_column_int(vst, 0) == 8,
			   "the file is at schema version 8");
			sqlite3_finalize(vst);
			vst = NULL;
			rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM records", -1, &vst, NULL);
			ok(rc == SQLITE_OK && sqlite3_step(vst) == SQLITE_ROW &&
				   sqlite3_column_int(vst, 0) == 0,
			   "the upgrade made the records table, empty");
			sqlite3_finalize(vst);
		}
		sqlite3_close(db);
	}

	/* A database from a newer schema is refused rather than misread. */
	snprintf(cmd, sizeof(cmd), "sqlite3 %s 'PRAGMA user_version=9' 2>/dev/null", path);
	if (system(cmd) == 0)
		ok(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p) != 0,
		   "a newer schema version is refused");
	replication_tests(dir);
	tap_rmtree(dir);
	return tap_done();
}
