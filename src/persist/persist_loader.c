/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The background load of the object rows at start-up (see persist.h).  Up to eight scanning
 * threads (workers; MC_LOAD_THREADS, else one a CPU but the loop's), each with a read-only
 * connection of its own whose read transaction begins in mc_persist_loader_start, one after the
 * other before it returns: all see the file as the master found it (one snapshot) while the
 * master's own connection goes on writing.  The table is cut into a few parts a worker, taken
 * from the last generations to the first: subtrees of its b-tree read from the file's pages
 * (persist_pages.c; each part's rows counted again by SQLite before it goes out, else read
 * through SQLite) or, when the pages cannot be read, ranges of generations read through
 * SQLite's statements.  Each part's rows are decoded into chunks held in memory, keys and
 * replicas packed in arrays (no allocation per row, persist_loadpart.c).  The master's loop
 * takes each part once it is read, in that order (mc_persist_loader_take), so it meets a key's
 * newest row before its older ones, and puts the rows into its table while the next parts are
 * read.  It asks for keys it has not loaded yet (mc_persist_loader_query): the table has no
 * index on the key; with the key index (persist_keylook.c) a query thread with a connection of
 * its own in the same snapshot answers them (it reads the index in at the first key asked,
 * beside the scan); without one it answers -EAGAIN.  A worker reads at most a part a worker
 * beyond the part the loop takes next (mc_loader_wait_turn), so the rows in memory stay a few
 * parts' worth.  The loop learns of finished work through an eventfd.
 *
 * Threads: each worker owns its connection and the part it reads until it marks the part read
 * (under the mutex); the loop then owns it.  The queues between them take the mutex.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "persist/persist.h"
#include "persist/persist_int.h"
#include "persist/persist_loadpart.h"
#include "persist/persist_pages.h"
#include "proto/rpc.h"

#define MC_LOADER_MAX_THREADS 8
/* Parts a thread reads, on average: many, so the loop has the first soon (it puts each part
 * into the table while the next are read), the loop alone has little left once the scan ends,
 * and no thread is left with a long one at the end (64: at 10M rows 156K rows a part). */
#define MC_LOADER_PARTS_PER_THREAD 64
#define MC_LOADER_COLUMNS \
	"key, size, flags, put_start_ms, soft_pin_until_ms, writer, replicas, gen, checksum, sgen"

/* A scanning thread: its read-only connection, whose read transaction began in
 * mc_persist_loader_start with the others' (one snapshot of the file for all). */
struct mc_loader_worker {
	struct mc_persist_loader *l;
	sqlite3 *db;
	sqlite3_stmt *scan;
	pthread_t tid;
	int started;
	unsigned idx;
	sqlite3_stmt *count;	/* SQLite's count of a part's rows, for the pages' check */
	unsigned unseen;	/* rows read, not yet counted in l->rows (under 1024) */
	uint64_t nread;		/* rows read: counted, and the test hook's delay, every 1024 */
	int64_t cpu_ns;		/* CPU time its scan took (set when it ends) */
	struct mc_loader_part *p;	/* a page walk's part (the row callback's) */
};

static int64_t mc_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct mc_persist_loader {
	sqlite3 *db;		/* worker 0's: the loader thread's */
	pthread_t tid;
	int started;
	int efd;
	atomic_int stop;
	atomic_int failed;	/* a worker's scan failed: the others stop */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mc_persist_keylook *look;	/* the key index (NULL: none usable) */
	struct mc_persist_answer *q_head, *q_tail;	/* asked, not yet answered */
	struct mc_persist_answer *a_head, *a_tail;	/* answered, not yet taken */
	int state;		/* 0 scanning, 1 done, <0 failed (under mu) */
	int running;		/* workers 1.. still scanning (under mu) */
	int scan_rc;		/* the first worker's error (under mu) */
	char path[256];
	long delay_ms;		/* test hook: MC_TEST_LOAD_DELAY_MS per 1000 rows */
	atomic_ullong rows;
	struct mc_loader_worker w[MC_LOADER_MAX_THREADS];
	unsigned nw;
	/* The parts, read by the workers from the last (next_part counts them) and taken by the
	 * loop in the same order: parts [0, take) are not taken yet; ready[i] once part i is
	 * read (under mu). */
	struct mc_loader_part *parts;
	size_t nparts, take;
	unsigned char *ready;
	atomic_size_t next_part;
	/* Read from the file's pages (persist_pages.c): part i walks spans[span_at[i]] up to
	 * spans[span_at[i + 1]]; the map closes once the scan is done.  NULL: through SQLite. */
	struct mc_pages *pages;
	struct mc_pages_span *spans;
	size_t nspans, *span_at;
	atomic_size_t walked;	/* parts read from pages, not through SQLite */
	uint64_t estimate;	/* rows, from the pages (0: none) */
	struct mc_loadpool pool;	/* chunks the loop gave back */
	/* The query thread: its connection (q.db, in the workers' snapshot) and the key index
	 * it opens there (look). */
	struct mc_loader_worker q;
	pthread_t qtid;
	int qstarted;
};

static void mc_loader_wake(struct mc_persist_loader *l)
{
	uint64_t one = 1;

	if (write(l->efd, &one, sizeof(one)) < 0) {
		/* The counter is already set (it cannot overflow here): the loop wakes anyway. */
	}
}

/* The test hook's slow disk: delay_ms without reading rows (a stop ends it). */
static void mc_loader_delay(struct mc_persist_loader *l)
{
	struct timespec end;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_nsec += l->delay_ms * 1000000L;
	end.tv_sec += end.tv_nsec / 1000000000L;
	end.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&l->mu);
	while (!atomic_load(&l->stop) && rc == 0)
		rc = pthread_cond_timedwait(&l->cv, &l->mu, &end);
	pthread_mutex_unlock(&l->mu);
}

/* Answer the queued queries (the query thread) through the key index, from its read
 * transaction; without one, -EAGAIN (the loop waits for the load). */
static void mc_loader_answer(struct mc_persist_loader *l)
{
	for (;;) {
		struct mc_persist_replica reps[MC_PERSIST_MAX_REPLICAS];
		struct mc_persist_answer *q;
		struct mc_persist_object po;
		sqlite3_stmt *point = NULL;
		int rc = -EAGAIN;

		pthread_mutex_lock(&l->mu);
		q = l->q_head;
		if (q) {
			l->q_head = q->next;
			if (l->q_head == NULL)
				l->q_tail = NULL;
		}
		pthread_mutex_unlock(&l->mu);
		if (q == NULL)
			return;
		q->next = NULL;
		if (l->look) {
			rc = mc_persist_keylook_find(l->look, q->key, q->key_len, &point);
			if (rc == 0 && mc_persist_decode_object(point, &po, reps) == 0) {
				mc_persist_rows_add(&q->rows, &po);
				mc_persist_rows_seal(&q->rows);
			} else if (rc == 0) {
				rc = 1;	/* a row that does not parse: as the scan skips it */
			} else if (rc < 0) {
				mc_log_err("loading %s: looking up a key: %s", l->path,
					   sqlite3_errmsg(l->q.db));
			}
			if (point)
				sqlite3_reset(point);
		}
		q->rc = rc;
		pthread_mutex_lock(&l->mu);
		if (l->a_tail)
			l->a_tail->next = q;
		else
			l->a_head = q;
		l->a_tail = q;
		pthread_mutex_unlock(&l->mu);
		mc_loader_wake(l);
	}
}

/* A row read: into w's part; the count, the test hook's delay. */
static void mc_loader_took(struct mc_loader_worker *w, struct mc_loader_part *p,
			   const struct mc_persist_object *o)
{
	struct mc_persist_loader *l = w->l;

	mc_loadpart_add(p, &l->pool, o);
	w->unseen++;
	if (++w->nread % 1024 == 0) {
		atomic_fetch_add_explicit(&l->rows, w->unseen, memory_order_relaxed);
		w->unseen = 0;
		if (l->delay_ms)
			mc_loader_delay(l);
	}
}

/* A row of a page walk (mc_pages_walk); 1 stops it (a stop, or another worker failed). */
static int mc_loader_on_page_row(void *arg, const struct mc_persist_object *o)
{
	struct mc_loader_worker *w = arg;
	struct mc_persist_loader *l = w->l;

	if (atomic_load_explicit(&l->stop, memory_order_relaxed) ||
	    atomic_load_explicit(&l->failed, memory_order_relaxed))
		return 1;
	mc_loader_took(w, w->p, o);
	return 0;
}

/* SQLite's count of the rows of p's generations on w's connection, or -1. */
static int64_t mc_loader_count(struct mc_loader_worker *w, const struct mc_loader_part *p)
{
	int64_t n = -1;

	if (w->count == NULL &&
	    sqlite3_prepare_v2(w->db, "SELECT count(*) FROM objects WHERE gen BETWEEN ?1 AND ?2",
			       -1, &w->count, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(w->count, 1, p->lo);
	sqlite3_bind_int64(w->count, 2, p->hi);
	if (sqlite3_step(w->count) == SQLITE_ROW)
		n = sqlite3_column_int64(w->count, 0);
	sqlite3_reset(w->count);
	return n;
}

/* Part i (p) from the file's pages, its rows counted again by SQLite (its own walk of the
 * tree: a page this reader went past would show): 0, -ECANCELED, or 1 when a page does not
 * parse or the counts differ (p is empty again: its rows go through SQLite). */
static int mc_loader_walk_part(struct mc_loader_worker *w, size_t i, struct mc_loader_part *p)
{
	struct mc_persist_loader *l = w->l;
	int64_t count;
	size_t s;
	int rc = 0;

	w->p = p;
	for (s = l->span_at[i]; s < l->span_at[i + 1] && rc == 0; s++)
		rc = mc_pages_walk(l->pages, &l->spans[s], mc_loader_on_page_row, w);
	if (rc > 0)
		return -ECANCELED;
	if (rc == 0) {
		count = mc_loader_count(w, p);
		if (count >= 0 && (uint64_t)count == mc_loadpart_rows(p)) {
			atomic_fetch_add(&l->walked, 1);
			return 0;
		}
		if (atomic_load(&l->stop))
			return -ECANCELED;
		mc_log_err("loading %s: the file's pages gave %zu rows of generations %lld to %lld "
			   "where SQLite counts %lld: reading them through SQLite", l->path,
			   mc_loadpart_rows(p), (long long)p->lo, (long long)p->hi, (long long)count);
	}
	/* Its rows so far go (the progress count keeps them: they are read again). */
	mc_loadpart_fini(p);
	return 1;
}

/* Read the rows of part i (p) from the file's pages, or else on worker w's connection.  0,
 * -ECANCELED (a stop, or another worker failed) or MC_ERR_PERSISTENT_FAIL. */
static int mc_loader_scan_part(struct mc_loader_worker *w, size_t i, struct mc_loader_part *p)
{
	struct mc_persist_replica reps[MC_PERSIST_MAX_REPLICAS];
	struct mc_persist_loader *l = w->l;
	int rc = -ECANCELED;

	if (l->pages != NULL) {
		rc = mc_loader_walk_part(w, i, p);
		if (rc == 0)
			goto sort;
		if (rc < 0)
			return rc;
		rc = -ECANCELED;
	}

	sqlite3_bind_int64(w->scan, 1, p->lo);
	sqlite3_bind_int64(w->scan, 2, p->hi);
	while (!atomic_load_explicit(&l->stop, memory_order_relaxed) &&
	       !atomic_load_explicit(&l->failed, memory_order_relaxed)) {
		struct mc_persist_object o;
		int step;

		step = sqlite3_step(w->scan);
		if (step == SQLITE_DONE) {
			rc = 0;
			break;
		}
		if (step != SQLITE_ROW) {
			mc_log_err("loading %s: %s", l->path, sqlite3_errmsg(w->db));
			rc = MC_ERR_PERSISTENT_FAIL;
			break;
		}
		if (mc_persist_decode_object(w->scan, &o, reps)) {
			mc_log_warn("persist %s: skipping a malformed object row", l->path);
			continue;
		}
		mc_loader_took(w, p, &o);
	}
	sqlite3_reset(w->scan);
sort:
	if (rc == 0) {	/* the loop's from here on */
		atomic_fetch_add_explicit(&l->rows, w->unseen, memory_order_relaxed);
		w->unseen = 0;
		mc_loadpart_finish(p);
		pthread_mutex_lock(&l->mu);
		l->ready[i] = 1;
		pthread_mutex_unlock(&l->mu);
		mc_loader_wake(l);
	}
	return rc;
}

/* Wait until part i is at most a part a worker ahead of the loop (the part it takes next and
 * one more a worker), so the chunks the loop gives back are read into again and the rows in
 * memory stay a few parts' worth, however far the scan outruns the inserts.  0, or -1 on a
 * stop or once a worker failed (the loop takes no part after the failed one). */
static int mc_loader_wait_turn(struct mc_persist_loader *l, size_t i)
{
	int rc = 0;

	pthread_mutex_lock(&l->mu);
	while (l->take > i + 1 + l->nw && !(rc = atomic_load(&l->stop) || atomic_load(&l->failed)))
		pthread_cond_wait(&l->cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
	return rc ? -1 : 0;
}

/* Scan parts in turn while any is left.  The first error is kept (scan_rc) and stops the
 * other workers. */
static void mc_loader_work(struct mc_loader_worker *w)
{
	struct mc_persist_loader *l = w->l;
	int64_t cpu0 = mc_thread_cpu_ns();
	int rc = 0;

	for (;;) {
		size_t k = atomic_fetch_add(&l->next_part, 1), i;

		if (k >= l->nparts)
			break;
		i = l->nparts - 1 - k;	/* from the last generations (the loop's order) */
		if (mc_loader_wait_turn(l, i) != 0) {
			rc = -ECANCELED;
			break;
		}
		rc = mc_loader_scan_part(w, i, &l->parts[i]);
		if (rc)
			break;
	}
	atomic_fetch_add_explicit(&l->rows, w->unseen, memory_order_relaxed);
	w->unseen = 0;
	w->cpu_ns += mc_thread_cpu_ns() - cpu0;
	if (rc == 0)
		return;
	pthread_mutex_lock(&l->mu);
	if (l->scan_rc == 0 || l->scan_rc == -ECANCELED)
		l->scan_rc = rc;
	if (rc != -ECANCELED) {
		atomic_store(&l->failed, 1);
		pthread_cond_broadcast(&l->cv);	/* workers waiting for their turn stop */
	}
	pthread_mutex_unlock(&l->mu);
}

static void *mc_loader_worker_main(void *arg)
{
	struct mc_loader_worker *w = arg;
	struct mc_persist_loader *l = w->l;
	char name[16];

	snprintf(name, sizeof(name), "mc-load-%u", w->idx);
	pthread_setname_np(pthread_self(), name);
	mc_loader_work(w);
	pthread_mutex_lock(&l->mu);
	l->running--;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* The scan: workers 1.. start, the loader thread scans with them, then waits for them.  0 or
 * the first error. */
static int mc_loader_scan(struct mc_persist_loader *l)
{
	unsigned i;
	int rc;

	pthread_mutex_lock(&l->mu);
	for (i = 1; i < l->nw; i++) {
		if (pthread_create(&l->w[i].tid, NULL, mc_loader_worker_main, &l->w[i]) != 0) {
			mc_log_warn("loading %s: cannot start loader thread %u: %u scan", l->path,
				    i, i);
			break;
		}
		l->w[i].started = 1;
		l->running++;
	}
	pthread_mutex_unlock(&l->mu);
	mc_loader_work(&l->w[0]);
	pthread_mutex_lock(&l->mu);
	while (l->running > 0)
		pthread_cond_wait(&l->cv, &l->mu);
	rc = l->scan_rc;
	pthread_mutex_unlock(&l->mu);
	for (i = 1; i < l->nw; i++) {
		if (l->w[i].started)
			pthread_join(l->w[i].tid, NULL);
		l->w[i].started = 0;
	}
	/* 0: every part was read, though a stop may have come since (the loop takes the last
	 * part as soon as it is read, and may be done and stop the loader before this returns). */
	return rc;
}

static void *mc_loader_main(void *arg)
{
	struct mc_persist_loader *l = arg;
	struct timespec t0, t1;
	int64_t cpu0 = mc_thread_cpu_ns(), scan_cpu = 0;
	unsigned i;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_setname_np(pthread_self(), "mc-load");
	rc = mc_loader_scan(l);
	mc_pages_close(l->pages);	/* every walk has ended */
	l->pages = NULL;
	if (rc == 0) {
		uint64_t rows = atomic_load(&l->rows);
		double cpu;

		clock_gettime(CLOCK_MONOTONIC, &t1);
		for (i = 1; i < l->nw; i++)
			scan_cpu += l->w[i].cpu_ns;
		cpu = (double)(scan_cpu + mc_thread_cpu_ns() - cpu0);
		mc_log_info("loading %s: %llu rows read by %u threads (%zu of %zu parts from the "
			    "file's pages) in %.3f s, CPU %.3f s (%.0f ns a row)", l->path,
			    (unsigned long long)rows, l->nw, atomic_load(&l->walked), l->nparts,
			    (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
			    cpu / 1e9, cpu / (double)(rows ? rows : 1));
	}
	pthread_mutex_lock(&l->mu);
	l->state = rc == 0 ? 1 : rc;
	pthread_mutex_unlock(&l->mu);
	mc_loader_wake(l);
	return NULL;
}

/* The query thread: the queries as they come until the stop, through the key index it reads
 * in at the first. */
static void *mc_loader_query_main(void *arg)
{
	struct mc_persist_loader *l = arg;
	int opened = 0;

	pthread_setname_np(pthread_self(), "mc-load-query");
	for (;;) {
		pthread_mutex_lock(&l->mu);
		while (!atomic_load(&l->stop) && l->q_head == NULL)
			pthread_cond_wait(&l->cv, &l->mu);
		pthread_mutex_unlock(&l->mu);
		if (atomic_load(&l->stop))
			break;
		/* The index is read in when the first key is asked (its runs are about 16 bytes a
		 * row, read and checked): a load nobody asks during reads none of it. */
		if (!opened && mc_persist_keylook_open(l->q.db, l->path, "SELECT " MC_LOADER_COLUMNS
						       " FROM objects WHERE gen = ?1", &l->look) != 0)
			l->look = NULL;
		opened = 1;
		mc_loader_answer(l);
	}
	mc_persist_keylook_free(l->look);
	l->look = NULL;
	return NULL;
}

/* The number of scanning threads: MC_LOAD_THREADS, else one a CPU but the loop's (which must
 * keep answering while they scan; one with the test hook's delay, which tests time for one
 * thread), within 1 to 8. */
static unsigned mc_loader_nthreads(const struct mc_persist_loader *l)
{
	const char *e = getenv("MC_LOAD_THREADS");
	long n = e && *e ? strtol(e, NULL, 10)
			 : l->delay_ms ? 1 : sysconf(_SC_NPROCESSORS_ONLN) - 1;

	if (n < 1)
		n = 1;
	return n > MC_LOADER_MAX_THREADS ? MC_LOADER_MAX_THREADS : (unsigned)n;
}

/* Open worker w's connection and begin its read transaction with first (the lowest and
 * highest generation: *lo, *hi, or *empty).  0, else -1 (logged). */
static int mc_loader_open(struct mc_persist_loader *l, struct mc_loader_worker *w,
			  int64_t *lo, int64_t *hi, int *empty)
{
	sqlite3_stmt *first = NULL;
	int rc;

	if (sqlite3_open_v2(l->path, &w->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(w->db, 2000);
	if (sqlite3_exec(w->db, "PRAGMA cache_size=-65536; PRAGMA mmap_size=1099511627776; BEGIN",
			 NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(w->db, "SELECT " MC_LOADER_COLUMNS " FROM objects "
			       "WHERE gen BETWEEN ?1 AND ?2 ORDER BY gen", -1, &w->scan,
			       NULL) != SQLITE_OK ||
	    /* Two subqueries: each is one descent of the primary key, where one query of both
	     * aggregates would read every row. */
	    sqlite3_prepare_v2(w->db, "SELECT (SELECT min(gen) FROM objects), "
			       "(SELECT max(gen) FROM objects)", -1, &first, NULL) != SQLITE_OK)
		goto fail;
	/* The read transaction begins with its first read: now, before the master writes. */
	rc = sqlite3_step(first);
	if (rc != SQLITE_ROW)
		goto fail;
	*empty = sqlite3_column_type(first, 0) == SQLITE_NULL;
	*lo = sqlite3_column_int64(first, 0);
	*hi = sqlite3_column_int64(first, 1);
	sqlite3_finalize(first);
	return 0;
fail:
	mc_log_err("loading %s: %s", l->path, w->db ? sqlite3_errmsg(w->db) : "out of memory");
	sqlite3_finalize(first);
	return -1;
}

/* Split the generations [lo, hi] into parts, a few a worker (one with one worker). */
static void mc_loader_split(struct mc_persist_loader *l, int64_t lo, int64_t hi)
{
	uint64_t span = (uint64_t)hi - (uint64_t)lo, step;
	size_t n = (size_t)l->nw * MC_LOADER_PARTS_PER_THREAD, i;

	if (span < n)
		n = (size_t)span + 1;
	step = span / n + 1;
	l->parts = mc_xcalloc(n, sizeof(*l->parts));
	l->nparts = n;
	for (i = 0; i < n; i++) {
		l->parts[i].lo = (int64_t)((uint64_t)lo + i * step);
		l->parts[i].hi = i + 1 == n ? hi : (int64_t)((uint64_t)lo + (i + 1) * step - 1);
	}
}

/* Parts of whole subtrees when the file's pages can be read (every worker's read transaction
 * has begun): 0, else -1 (through SQLite). */
static int mc_loader_split_pages(struct mc_persist_loader *l)
{
	size_t want = (size_t)l->nw * MC_LOADER_PARTS_PER_THREAD, n, i;

	if (mc_pages_open(l->db, l->path, &l->pages) != 0)
		return -1;
	if (mc_pages_split(l->pages, want, &l->spans, &l->nspans) != 0 || l->nspans == 0) {
		mc_pages_close(l->pages);
		l->pages = NULL;
		return -1;
	}
	l->estimate = mc_pages_estimate(l->pages);
	n = l->nspans < want ? l->nspans : want;
	l->parts = mc_xcalloc(n, sizeof(*l->parts));
	l->span_at = mc_xcalloc(n + 1, sizeof(*l->span_at));
	l->nparts = n;
	for (i = 0; i <= n; i++)
		l->span_at[i] = l->nspans * i / n;
	for (i = 0; i < n; i++) {
		l->parts[i].lo = l->spans[l->span_at[i]].lo;
		l->parts[i].hi = l->spans[l->span_at[i + 1] - 1].hi;
	}
	return 0;
}

int mc_persist_loader_start(const char *path, struct mc_persist_loader **out)
{
	struct mc_persist_loader *l;
	const char *delay = getenv("MC_TEST_LOAD_DELAY_MS");
	int64_t lo = 0, hi = 0;
	int empty = 1;
	unsigned i, nw;

	*out = NULL;
	if (path == NULL || path[0] == '\0' || !strcmp(path, ":memory:") ||
	    strlen(path) >= sizeof(l->path))
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	l->efd = -1;
	pthread_mutex_init(&l->mu, NULL);
	mc_loadpool_init(&l->pool, 16);
	pthread_cond_init(&l->cv, NULL);
	strcpy(l->path, path);
	l->delay_ms = delay ? strtol(delay, NULL, 10) : 0;
	if (l->delay_ms < 0 || l->delay_ms > 1000)
		l->delay_ms = 0;
	/* Every worker's read transaction begins here, before the master writes again: one
	 * snapshot for all.  A worker that sees other bounds (cannot happen unless something
	 * else writes the file) is not used. */
	nw = mc_loader_nthreads(l);
	for (i = 0; i < nw; i++) {
		struct mc_loader_worker *w = &l->w[i];
		int64_t wlo, whi;
		int wempty;

		w->l = l;
		w->idx = i;
		l->nw = i + 1;
		if (mc_loader_open(l, w, &wlo, &whi, &wempty)) {
			if (i == 0)
				goto out;
			l->nw = i;
			break;
		}
		if (i == 0) {
			lo = wlo;
			hi = whi;
			empty = wempty;
		} else if (wlo != lo || whi != hi || wempty != empty) {
			mc_log_warn("loading %s: loader thread %u sees another file: %u scan",
				    path, i, i);
			l->nw = i;
			break;
		}
	}
	l->db = l->w[0].db;
	/* The query thread's connection, in the same snapshot (without it: no key index). */
	{
		int64_t qlo, qhi;
		int qempty;

		l->q.l = l;
		l->q.idx = MC_LOADER_MAX_THREADS;
		if (mc_loader_open(l, &l->q, &qlo, &qhi, &qempty) == 0 &&
		    (qlo != lo || qhi != hi || qempty != empty)) {
			sqlite3_finalize(l->q.scan);
			sqlite3_close(l->q.db);
			l->q.scan = NULL;
			l->q.db = NULL;
		}
	}
	if (!empty && mc_loader_split_pages(l) != 0)
		mc_loader_split(l, lo, hi);
	l->ready = mc_xcalloc(l->nparts ? l->nparts : 1, 1);
	l->take = l->nparts;
	l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->efd < 0) {
		mc_log_err("loading %s: eventfd: %s", path, strerror(errno));
		goto out;
	}
	if (pthread_create(&l->tid, NULL, mc_loader_main, l) != 0) {
		mc_log_err("loading %s: cannot start the loader thread", path);
		goto out;
	}
	l->started = 1;
	if (l->q.db && pthread_create(&l->qtid, NULL, mc_loader_query_main, l) == 0)
		l->qstarted = 1;
	mc_log_info("loading %s: %u threads, %zu ranges of generations", path, l->nw, l->nparts);
	*out = l;
	return 0;
out:
	mc_persist_loader_free(l);
	return MC_ERR_PERSISTENT_FAIL;
}

size_t mc_persist_loader_pages(const struct mc_persist_loader *l)
{
	return atomic_load(&((struct mc_persist_loader *)l)->walked);
}

int mc_persist_loader_fd(const struct mc_persist_loader *l)
{
	return l->efd;
}

int mc_persist_loader_poll(struct mc_persist_loader *l, struct mc_persist_answer **answers)
{
	uint64_t v;
	int state;

	if (read(l->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing new since the last poll. */
	}
	pthread_mutex_lock(&l->mu);
	*answers = l->a_head;
	l->a_head = l->a_tail = NULL;
	state = l->state;
	pthread_mutex_unlock(&l->mu);
	return state;
}

int mc_persist_loader_query(struct mc_persist_loader *l, const void *key, size_t len, void *tag)
{
	struct mc_persist_answer *q = calloc(1, sizeof(*q) + len);

	if (q == NULL)
		return -ENOMEM;
	q->tag = tag;
	q->key_len = len;
	memcpy(q->key, key, len);
	pthread_mutex_lock(&l->mu);
	if (l->q_tail)
		l->q_tail->next = q;
	else
		l->q_head = q;
	l->q_tail = q;
	pthread_cond_broadcast(&l->cv);	/* workers in the test hook's delay wait on it too */
	pthread_mutex_unlock(&l->mu);
	return 0;
}

void mc_persist_answer_free(struct mc_persist_answer *a)
{
	while (a) {
		struct mc_persist_answer *next = a->next;

		mc_persist_rows_fini(&a->rows);
		free(a);
		a = next;
	}
}

uint64_t mc_persist_loader_rows(const struct mc_persist_loader *l)
{
	return atomic_load_explicit(&((struct mc_persist_loader *)l)->rows, memory_order_relaxed);
}

int mc_persist_loader_take(struct mc_persist_loader *l, struct mc_persist_rows **chunks,
			   size_t *n)
{
	struct mc_loader_part *p;

	pthread_mutex_lock(&l->mu);
	if (l->take == 0 || !l->ready[l->take - 1]) {
		int rc = l->take == 0 ? -1 : 0;

		pthread_mutex_unlock(&l->mu);
		return rc;
	}
	p = &l->parts[--l->take];
	pthread_cond_broadcast(&l->cv);	/* a worker may wait for this turn */
	pthread_mutex_unlock(&l->mu);
	*chunks = p->chunks;
	*n = p->nchunks;
	p->chunks = NULL;
	p->nchunks = p->capchunks = 0;
	return 1;
}

void mc_persist_loader_give(struct mc_persist_loader *l, struct mc_persist_rows *c)
{
	mc_loadpool_put(&l->pool, c);
}

uint64_t mc_persist_loader_estimate(const struct mc_persist_loader *l)
{
	return l->estimate;
}

void mc_persist_loader_halt(struct mc_persist_loader *l)
{
	unsigned i;

	if (l->started || l->qstarted) {
		atomic_store(&l->stop, 1);
		for (i = 0; i < l->nw; i++)
			if (l->w[i].db)
				sqlite3_interrupt(l->w[i].db);	/* a long step ends at once */
		if (l->q.db)
			sqlite3_interrupt(l->q.db);
		pthread_mutex_lock(&l->mu);
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
	}
	if (l->started)
		pthread_join(l->tid, NULL);	/* it joins the other workers */
	if (l->qstarted)
		pthread_join(l->qtid, NULL);
	l->started = l->qstarted = 0;
	for (i = 0; i <= MC_LOADER_MAX_THREADS; i++) {
		struct mc_loader_worker *w = i < MC_LOADER_MAX_THREADS ? &l->w[i] : &l->q;

		sqlite3_finalize(w->scan);
		sqlite3_finalize(w->count);
		w->scan = w->count = NULL;
		if (w->db && !sqlite3_get_autocommit(w->db))
			sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
		sqlite3_close(w->db);
		w->db = NULL;
	}
	l->db = NULL;
	if (l->efd >= 0)
		close(l->efd);
	l->efd = -1;
}

void mc_persist_loader_free(struct mc_persist_loader *l)
{
	size_t i;

	if (l == NULL)
		return;
	mc_persist_loader_halt(l);
	mc_persist_answer_free(l->q_head);
	mc_persist_answer_free(l->a_head);
	for (i = 0; i < l->nparts; i++)
		mc_loadpart_fini(&l->parts[i]);
	free(l->parts);
	free(l->ready);
	mc_loadpool_fini(&l->pool);
	mc_pages_close(l->pages);	/* after the halt: no walk runs */
	free(l->spans);
	free(l->span_at);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}
