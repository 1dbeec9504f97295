/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The background load of the object rows at start-up (see persist.h): a thread with a read-only
 * connection of its own and one read transaction (taken before mc_persist_loader_start
 * returns, so it sees the file as the master found it while the master's own connection goes
 * on writing) reads every row in generation order and decodes it into chunks held in memory,
 * keys and replicas packed in arrays (no allocation per row).  Alongside it keeps a reference
 * per row with its key's hash, and lists every complete memory replica as a range.  After the
 * scan it sorts the references by hash (rows of one key side by side: the newest wins, the
 * others are marked MC_PERSIST_ROW_OLDER and their ranges dropped) and the ranges by segment and
 * offset (radix sorts), the order in which the master's allocators rebuild in constant time per
 * range.  The master's loop asks for keys it has not loaded yet (mc_persist_loader_query): the
 * table has no index on the key; with the key index (persist_keylook.c) the thread answers
 * between the scan's rows, from the same read transaction, else once its scan is done.  The
 * loop learns of finished work through an eventfd.
 *
 * Threads: the loader thread owns the connection; the loop owns everything else, and reads the
 * chunks and ranges only once the scan is done.  The queues between them take a mutex.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/radix_sort.h"
#include "common/xalloc.h"
#include "persist/persist.h"
#include "persist/persist_int.h"
#include "proto/rpc.h"

#define MC_LOADER_CHUNK_ROWS 16384
#define MC_LOADER_COLUMNS \
	"key, size, flags, put_start_ms, soft_pin_until_ms, writer, replicas, gen, checksum, sgen"

struct mc_persist_loader {
	sqlite3 *db;
	sqlite3_stmt *scan;
	pthread_t tid;
	int started;
	int efd;
	atomic_int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mc_persist_keylook *look;	/* the key index (NULL: none usable) */
	atomic_int nqueries;	/* queries queued, read without the lock */
	struct mc_persist_answer *q_head, *q_tail;	/* asked, not yet answered */
	struct mc_persist_answer *a_head, *a_tail;	/* answered, not yet taken */
	int state;		/* 0 scanning, 1 done, 2 scattered, <0 failed (under mu) */
	int scatter;		/* the loop asked for the scatter (under mu) */
	char path[256];
	long delay_ms;		/* test hook: MC_TEST_LOAD_DELAY_MS per 1000 rows */
	atomic_ullong rows;
	/* The result, the loader thread's until state leaves 0. */
	struct mc_persist_rows *chunks;
	size_t nchunks, capchunks;
	struct mc_persist_keyref *keyrefs;
	size_t nkeyrefs, capkeyrefs;
	struct mc_persist_range *ranges;
	size_t nranges, capranges;
	uint8_t (*segids)[16];
	uint32_t nsegids, capsegids;
	uint32_t *seghash;	/* open addressing: index + 1, 0 empty */
	uint32_t seghash_cap;
};

void mc_persist_rows_fini(struct mc_persist_rows *c)
{
	free(c->rows);
	free(c->reps);
	free(c->user);
	free(c->keys);
	memset(c, 0, sizeof(*c));
}

/* Append the decoded row o to c (pointers kept as offsets until mc_rows_seal). */
static void mc_rows_add(struct mc_persist_rows *c, const struct mc_persist_object *o)
{
	struct mc_persist_object *d;

	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 1;
		c->rows = mc_xrealloc(c->rows, c->cap * sizeof(*c->rows));
	}
	while (c->keys_len + o->key_len > c->keys_cap) {
		c->keys_cap = c->keys_cap ? c->keys_cap * 2 : 64 * 1024;
		c->keys = mc_xrealloc(c->keys, c->keys_cap);
	}
	while (c->nreps + o->n_replicas > c->capreps) {
		c->capreps = c->capreps ? c->capreps * 2 : 1024;
		c->reps = mc_xrealloc(c->reps, c->capreps * sizeof(*c->reps));
	}
	d = &c->rows[c->n++];
	*d = *o;
	d->flags &= ~MC_PERSIST_ROW_OLDER;	/* the loader's mark, never the file's */
	memcpy(c->keys + c->keys_len, o->key, o->key_len);
	d->key = (const char *)(uintptr_t)c->keys_len;
	c->keys_len += o->key_len;
	memcpy(c->reps + c->nreps, o->replicas, o->n_replicas * sizeof(*c->reps));
	d->replicas = (const struct mc_persist_replica *)(uintptr_t)c->nreps;
	c->nreps += o->n_replicas;
}

/* Turn the offsets into pointers; c is not appended to afterwards. */
static void mc_rows_seal(struct mc_persist_rows *c)
{
	size_t i;

	c->user = mc_xcalloc(c->nreps ? c->nreps : 1, sizeof(*c->user));
	for (i = 0; i < c->n; i++) {
		c->rows[i].key = c->keys + (uintptr_t)c->rows[i].key;
		c->rows[i].replicas = c->reps + (uintptr_t)c->rows[i].replicas;
	}
}

static uint32_t mc_segid_hash(const uint8_t id[16])
{
	uint64_t a, b;

	memcpy(&a, id, 8);
	memcpy(&b, id + 8, 8);
	a ^= b * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(a ^ a >> 29);
}

/* The index of segment id in l->segids, added if new; UINT32_MAX past 65535 segments. */
static uint32_t mc_loader_segidx(struct mc_persist_loader *l, const uint8_t id[16])
{
	uint32_t h, i;

	if (l->seghash_cap == 0 || (l->nsegids + 1) * 2 > l->seghash_cap) {
		uint32_t cap = l->seghash_cap ? l->seghash_cap * 2 : 64;

		free(l->seghash);
		l->seghash = mc_xcalloc(cap, sizeof(*l->seghash));
		l->seghash_cap = cap;
		for (i = 0; i < l->nsegids; i++) {
			h = mc_segid_hash(l->segids[i]) & (cap - 1);
			while (l->seghash[h])
				h = (h + 1) & (cap - 1);
			l->seghash[h] = i + 1;
		}
	}
	h = mc_segid_hash(id) & (l->seghash_cap - 1);
	while (l->seghash[h]) {
		if (!memcmp(l->segids[l->seghash[h] - 1], id, 16))
			return l->seghash[h] - 1;
		h = (h + 1) & (l->seghash_cap - 1);
	}
	if (l->nsegids >= 65535)
		return UINT32_MAX;
	if (l->nsegids == l->capsegids) {
		l->capsegids = l->capsegids ? l->capsegids * 2 : 16;
		l->segids = mc_xrealloc(l->segids, l->capsegids * sizeof(*l->segids));
	}
	memcpy(l->segids[l->nsegids], id, 16);
	l->seghash[h] = ++l->nsegids;
	return l->nsegids - 1;
}

/* The complete memory replicas of the row just added to chunk k, as ranges.  An offset that
 * cannot be sorted (not a multiple of 64, or past 2^54) is left out: no allocator takes it. */
static void mc_loader_add_ranges(struct mc_persist_loader *l, uint32_t k)
{
	struct mc_persist_rows *c = &l->chunks[k];
	const struct mc_persist_object *o = &c->rows[c->n - 1];
	size_t first = (uintptr_t)o->replicas;
	uint32_t i;

	for (i = 0; i < o->n_replicas; i++) {
		const struct mc_persist_replica *r = &c->reps[first + i];
		uint32_t seg;

		if (r->type != MC_REPLICA_MEMORY || r->status != MC_REPLICA_COMPLETE ||
		    r->offset % 64 || r->offset >> 54)
			continue;
		seg = mc_loader_segidx(l, r->segment_id);
		if (seg == UINT32_MAX)
			continue;
		if (l->nranges == l->capranges) {
			l->capranges = l->capranges ? l->capranges * 2 : 65536;
			l->ranges = mc_xrealloc(l->ranges, l->capranges * sizeof(*l->ranges));
		}
		l->ranges[l->nranges++] = (struct mc_persist_range){
			(uint64_t)seg << 48 | r->offset >> 6, r->len, k, (uint32_t)(first + i), NULL
		};
	}
}

MC_RADIX_SORT_DEFINE(mc_ranges_radix, struct mc_persist_range, order, mc_xmalloc)

/* The ranges in order (segment and offset).  A stop ends it between passes (a pass over ten
 * million ranges takes tens of ms): the order is then of no use. */
static void mc_loader_sort(struct mc_persist_loader *l)
{
	(void)mc_ranges_radix(l->ranges, l->nranges, &l->stop);
}

static void mc_loader_wake(struct mc_persist_loader *l)
{
	uint64_t one = 1;

	if (write(l->efd, &one, sizeof(one)) < 0) {
		/* The counter is already set (it cannot overflow here): the loop wakes anyway. */
	}
}

static void mc_loader_answer(struct mc_persist_loader *l, int scanned);

/* The test hook's slow disk: delay_ms without reading rows (a stop ends it); queries are
 * answered meanwhile when the key index can. */
static void mc_loader_delay(struct mc_persist_loader *l)
{
	struct timespec end;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_nsec += l->delay_ms * 1000000L;
	end.tv_sec += end.tv_nsec / 1000000000L;
	end.tv_nsec %= 1000000000L;
	for (;;) {
		int rc = 0;

		pthread_mutex_lock(&l->mu);
		while ((l->look == NULL || l->q_head == NULL) && !atomic_load(&l->stop) && rc == 0)
			rc = pthread_cond_timedwait(&l->cv, &l->mu, &end);
		pthread_mutex_unlock(&l->mu);
		if (rc != 0 || atomic_load(&l->stop))
			return;
		mc_loader_answer(l, 0);
	}
}

/* The row just added as the last of chunk k, referenced by its key's hash. */
static void mc_loader_add_keyref(struct mc_persist_loader *l, uint32_t k, const void *key,
				 size_t len)
{
	if (l->nkeyrefs == l->capkeyrefs) {
		l->capkeyrefs = l->capkeyrefs ? l->capkeyrefs * 2 : 65536;
		l->keyrefs = mc_xrealloc(l->keyrefs, l->capkeyrefs * sizeof(*l->keyrefs));
	}
	l->keyrefs[l->nkeyrefs++] = (struct mc_persist_keyref){
		mc_persist_key_hash(key, len), k, (uint32_t)(l->chunks[k].n - 1)
	};
}

static struct mc_persist_object *mc_keyref_row(struct mc_persist_rows *chunks,
					       const struct mc_persist_keyref *r)
{
	return &chunks[r->chunk].rows[r->row];
}

/* Of the rows of one key, all but the newest (the last: the sort is stable) are marked older;
 * their replicas are marked so their ranges go.  Returns the number marked. */
static size_t mc_loader_mark_older(struct mc_persist_loader *l)
{
	struct mc_persist_keyref *a = l->keyrefs;
	size_t n = l->nkeyrefs, i, j, x, y, marked = 0;

	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && a[j].hash == a[i].hash; j++)
			;
		for (x = i; j - i > 1 && x < j - 1; x++) {
			struct mc_persist_object *ox = mc_keyref_row(l->chunks, &a[x]);

			for (y = x + 1; y < j; y++) {
				const struct mc_persist_object *oy = mc_keyref_row(l->chunks, &a[y]);
				struct mc_persist_replica *r;
				uint32_t k;

				if (oy->key_len != ox->key_len || memcmp(oy->key, ox->key, ox->key_len))
					continue;
				ox->flags |= MC_PERSIST_ROW_OLDER;
				r = l->chunks[a[x].chunk].reps + (ox->replicas -
								  l->chunks[a[x].chunk].reps);
				for (k = 0; k < ox->n_replicas; k++)
					r[k].status = 0xff;
				marked++;
				break;
			}
		}
	}
	return marked;
}

/* Answer the queued queries (the loader thread): through the key index while scanning, from
 * the rows read once the scan is done (the thread owns them until it announces the end). */
static void mc_loader_answer(struct mc_persist_loader *l, int scanned)
{
	for (;;) {
		struct mc_persist_replica reps[MC_PERSIST_MAX_REPLICAS];
		struct mc_persist_answer *q;
		struct mc_persist_object *o, po;
		sqlite3_stmt *point;
		size_t c, r;
		int rc;

		pthread_mutex_lock(&l->mu);
		q = l->q_head;
		if (q) {
			l->q_head = q->next;
			if (l->q_head == NULL)
				l->q_tail = NULL;
			atomic_fetch_sub(&l->nqueries, 1);
		}
		pthread_mutex_unlock(&l->mu);
		if (q == NULL)
			return;
		q->next = NULL;
		if (scanned) {
			o = mc_persist_rows_find(l->chunks, 0, l->keyrefs, l->nkeyrefs, q->key,
						 q->key_len, &c, &r);
			q->rc = o ? 0 : 1;
		} else {
			rc = mc_persist_keylook_find(l->look, q->key, q->key_len, &point);
			o = NULL;
			if (rc == 0 && mc_persist_decode_object(point, &po, reps) == 0)
				o = &po;
			else if (rc == 0)
				rc = 1;	/* a row that does not parse: as the scan skips it */
			q->rc = rc;
			if (rc < 0)
				mc_log_err("loading %s: looking up a key: %s", l->path,
					   sqlite3_errmsg(l->db));
		}
		if (o) {
			mc_rows_add(&q->rows, o);
			mc_rows_seal(&q->rows);
		}
		if (!scanned)
			sqlite3_reset(point);
		pthread_mutex_lock(&l->mu);
		if (l->a_tail)
			l->a_tail->next = q;
		else
			l->a_head = q;
		l->a_tail = q;
		pthread_mutex_unlock(&l->mu);
		if (!scanned)
			mc_loader_wake(l);
	}
}

/* The ranges of replicas marked by mc_loader_mark_older go. */
static void mc_loader_drop_older_ranges(struct mc_persist_loader *l)
{
	size_t i, w = 0;

	for (i = 0; i < l->nranges; i++)
		if (l->chunks[l->ranges[i].chunk].reps[l->ranges[i].rep].status != 0xff)
			l->ranges[w++] = l->ranges[i];
	l->nranges = w;
}

MC_LOWER_BOUND_DEFINE(mc_keyrefs_lower_bound, struct mc_persist_keyref, hash)

struct mc_persist_object *mc_persist_rows_find(struct mc_persist_rows *chunks, size_t first_chunk,
					       const struct mc_persist_keyref *refs, size_t n,
					       const void *key, size_t len, size_t *chunk,
					       size_t *row)
{
	uint64_t h = mc_persist_key_hash(key, len);
	struct mc_persist_object *found = NULL;
	size_t lo = mc_keyrefs_lower_bound(refs, n, h);

	for (; lo < n && refs[lo].hash == h; lo++) {
		struct mc_persist_object *o;

		if (refs[lo].chunk < first_chunk)	/* emptied by the caller */
			continue;
		o = mc_keyref_row(chunks, &refs[lo]);
		if ((o->flags & MC_PERSIST_ROW_OLDER) || o->key_len != len ||
		    memcmp(o->key, key, len))
			continue;
		found = o;
		*chunk = refs[lo].chunk;
		*row = refs[lo].row;
	}
	return found;
}

static int mc_loader_scan(struct mc_persist_loader *l)
{
	struct mc_persist_replica reps[MC_PERSIST_MAX_REPLICAS];
	uint64_t rows = 0;
	int rc;

	while (!atomic_load_explicit(&l->stop, memory_order_relaxed)) {
		struct mc_persist_object o;

		if (l->look && atomic_load_explicit(&l->nqueries, memory_order_relaxed))
			mc_loader_answer(l, 0);
		rc = sqlite3_step(l->scan);
		if (rc == SQLITE_DONE)
			return 0;
		if (rc != SQLITE_ROW) {
			mc_log_err("loading %s: %s", l->path, sqlite3_errmsg(l->db));
			return MC_ERR_PERSISTENT_FAIL;
		}
		if (mc_persist_decode_object(l->scan, &o, reps)) {
			mc_log_warn("persist %s: skipping a malformed object row", l->path);
			continue;
		}
		if (l->nchunks == 0 || l->chunks[l->nchunks - 1].n == MC_LOADER_CHUNK_ROWS) {
			if (l->nchunks)
				mc_rows_seal(&l->chunks[l->nchunks - 1]);
			if (l->nchunks == l->capchunks) {
				l->capchunks = l->capchunks ? l->capchunks * 2 : 64;
				l->chunks = mc_xrealloc(l->chunks,
							       l->capchunks * sizeof(*l->chunks));
			}
			memset(&l->chunks[l->nchunks], 0, sizeof(l->chunks[0]));
			l->chunks[l->nchunks].cap = MC_LOADER_CHUNK_ROWS;
			l->chunks[l->nchunks].rows =
				mc_xrealloc(NULL, MC_LOADER_CHUNK_ROWS * sizeof(o));
			l->nchunks++;
		}
		mc_rows_add(&l->chunks[l->nchunks - 1], &o);
		mc_loader_add_keyref(l, (uint32_t)(l->nchunks - 1), o.key, o.key_len);
		mc_loader_add_ranges(l, (uint32_t)(l->nchunks - 1));
		if (++rows % 1024 == 0) {
			atomic_store_explicit(&l->rows, rows, memory_order_relaxed);
			if (l->delay_ms)
				mc_loader_delay(l);
		}
	}
	return -ECANCELED;
}

static void *mc_loader_main(void *arg)
{
	struct mc_persist_loader *l = arg;
	int rc;

	pthread_setname_np(pthread_self(), "mc-load");
	if (mc_persist_keylook_open(l->db, l->path, "SELECT " MC_LOADER_COLUMNS " FROM objects "
				    "WHERE gen = ?1", &l->look) == 0)
		mc_loader_answer(l, 0);
	rc = mc_loader_scan(l);
	mc_persist_keylook_free(l->look);	/* the rows answer from here on */
	l->look = NULL;

	if (rc == 0) {
		size_t older;

		if (l->nchunks)
			mc_rows_seal(&l->chunks[l->nchunks - 1]);
		if (mc_persist_keyrefs_sort(l->keyrefs, l->nkeyrefs) != 0) {
			mc_log_err("loading %s: out of memory sorting %zu keys", l->path,
				   l->nkeyrefs);
			rc = -ENOMEM;
			goto end;
		}
		older = mc_loader_mark_older(l);
		if (older) {
			mc_log_notice("loading %s: %zu rows have a newer row of their key: they go",
				      l->path, older);
			mc_loader_drop_older_ranges(l);
		}
		mc_loader_sort(l);
		mc_loader_answer(l, 1);
	}
end:
	atomic_store(&l->rows, (unsigned long long)l->nranges);
	pthread_mutex_lock(&l->mu);
	l->state = rc == 0 ? 1 : rc;
	pthread_mutex_unlock(&l->mu);
	mc_loader_wake(l);
	/* The loop finds the keys asked for in the rows from here on; then the scatter. */
	for (;;) {
		int scatter;

		pthread_mutex_lock(&l->mu);
		while (!atomic_load(&l->stop) && l->scatter != 1)
			pthread_cond_wait(&l->cv, &l->mu);
		scatter = l->scatter == 1;
		pthread_mutex_unlock(&l->mu);
		if (atomic_load(&l->stop))
			break;
		if (scatter) {
			size_t i;

			for (i = 0; i < l->nranges; i++) {
				if (i % 1048576 == 0 &&
				    atomic_load_explicit(&l->stop, memory_order_relaxed))
					return NULL;
				l->chunks[l->ranges[i].chunk].user[l->ranges[i].rep] =
					l->ranges[i].blk;
			}
			pthread_mutex_lock(&l->mu);
			l->scatter = 2;
			l->state = 2;
			pthread_mutex_unlock(&l->mu);
			mc_loader_wake(l);
		}
	}
	return NULL;
}

int mc_persist_loader_start(const char *path, struct mc_persist_loader **out)
{
	struct mc_persist_loader *l;
	const char *delay = getenv("MC_TEST_LOAD_DELAY_MS");
	sqlite3_stmt *first = NULL;
	int rc;

	*out = NULL;
	if (path == NULL || path[0] == '\0' || !strcmp(path, ":memory:") ||
	    strlen(path) >= sizeof(l->path))
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	l->efd = -1;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	strcpy(l->path, path);
	l->delay_ms = delay ? strtol(delay, NULL, 10) : 0;
	if (l->delay_ms < 0 || l->delay_ms > 1000)
		l->delay_ms = 0;
	if (sqlite3_open_v2(path, &l->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(l->db, 2000);
	if (sqlite3_exec(l->db, "PRAGMA cache_size=-65536; PRAGMA mmap_size=1099511627776; BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(l->db, "SELECT " MC_LOADER_COLUMNS " FROM objects ORDER BY gen", -1,
			       &l->scan, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(l->db, "SELECT value FROM meta WHERE name = 'next_gen'", -1, &first,
			       NULL) != SQLITE_OK)
		goto fail;
	/* The read transaction begins with its first read: now, before the master writes. */
	rc = sqlite3_step(first);
	sqlite3_finalize(first);
	first = NULL;
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		goto fail;
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
	*out = l;
	return 0;
fail:
	mc_log_err("loading %s: %s", path, l->db ? sqlite3_errmsg(l->db) : "out of memory");
	sqlite3_finalize(first);
out:
	mc_persist_loader_free(l);
	return MC_ERR_PERSISTENT_FAIL;
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
	atomic_fetch_add(&l->nqueries, 1);
	pthread_cond_signal(&l->cv);
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

void mc_persist_loader_result(struct mc_persist_loader *l, struct mc_persist_rows **chunks,
			      size_t *nchunks, struct mc_persist_keyref **keyrefs,
			      size_t *nkeyrefs, struct mc_persist_range **ranges, size_t *nranges,
			      const uint8_t (**segids)[16], uint32_t *nsegids)
{
	*chunks = l->chunks;
	*nchunks = l->nchunks;
	*keyrefs = l->keyrefs;
	*nkeyrefs = l->nkeyrefs;
	*ranges = l->ranges;
	*nranges = l->nranges;
	*segids = (const uint8_t(*)[16])l->segids;
	*nsegids = l->nsegids;
}

void mc_persist_loader_scatter(struct mc_persist_loader *l)
{
	pthread_mutex_lock(&l->mu);
	if (l->scatter == 0)
		l->scatter = 1;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

void mc_persist_loader_drop_keyrefs(struct mc_persist_loader *l)
{
	free(l->keyrefs);
	l->keyrefs = NULL;
	l->nkeyrefs = l->capkeyrefs = 0;
}

void mc_persist_loader_drop_ranges(struct mc_persist_loader *l)
{
	free(l->ranges);
	l->ranges = NULL;
	l->nranges = l->capranges = 0;
}

void mc_persist_loader_halt(struct mc_persist_loader *l)
{
	if (l->started) {
		atomic_store(&l->stop, 1);
		if (l->db)
			sqlite3_interrupt(l->db);	/* a long step ends at once */
		pthread_mutex_lock(&l->mu);
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->tid, NULL);
		l->started = 0;
	}
	sqlite3_finalize(l->scan);
	l->scan = NULL;
	if (l->db && !sqlite3_get_autocommit(l->db))
		sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(l->db);
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
	for (i = 0; i < l->nchunks; i++)
		mc_persist_rows_fini(&l->chunks[i]);
	free(l->chunks);
	free(l->keyrefs);
	free(l->ranges);
	free(l->segids);
	free(l->seghash);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}
