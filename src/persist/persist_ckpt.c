/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checkpointer: a thread with a SQLite connection of its own to the master's file that runs
 * the passive checkpoints (copying the write-ahead log into the database, with its fsyncs) off
 * the reactor thread, so the loop never waits for the disk to sync.  A checkpoint is durable
 * housekeeping, not durability: what a commit wrote is in the log (and survives kill -9) before
 * any checkpoint.
 *
 * The loop asks for a run (mc_persist_ckpt_kick) and later collects its result
 * (mc_persist_ckpt_collect); one run at a time, requests while one runs are dropped.  The
 * connection only checkpoints: it never reads or writes rows, so it takes no lock a commit of the
 * loop's connection waits for (a passive checkpoint copies what the log holds when it starts).
 * The thread ends, its connection closed, in mc_persist_ckpt_stop.  Shared fields are under mu.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "persist/persist.h"
#include "persist/persist_int.h"

struct mc_persist_ckpt {
	pthread_t tid;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	sqlite3 *db;			/* the thread's alone once started */
	int requested, running, stop, has_result;
	int rc, logged, done;		/* the last run's result */
	char msg[160];
};

static void *mc_persist_ckpt_main(void *arg)
{
	struct mc_persist_ckpt *c = arg;
	int rc, logged, done;
	char msg[160];

	pthread_setname_np(pthread_self(), "mc-checkpoint");
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->requested && !c->stop)
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->stop)
			break;
		c->requested = 0;
		c->running = 1;
		pthread_mutex_unlock(&c->mu);
		logged = done = 0;
		rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &logged, &done);
		if (rc != SQLITE_OK) {
			rc = sqlite3_extended_errcode(c->db);
			snprintf(msg, sizeof(msg), "%s", sqlite3_errmsg(c->db));
		}
		pthread_mutex_lock(&c->mu);
		c->running = 0;
		c->has_result = 1;
		c->rc = rc;
		c->logged = logged;
		c->done = done;
		if (rc != SQLITE_OK)
			memcpy(c->msg, msg, sizeof(c->msg));
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int mc_persist_ckpt_start(const char *path, int sync_mode, struct mc_persist_ckpt **out)
{
	struct mc_persist_ckpt *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
		    SQLITE_OK ||
	    sqlite3_exec(c->db, mc_persist_sync_sql(sync_mode), NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(c->db, "PRAGMA wal_autocheckpoint=0", NULL, NULL, NULL) != SQLITE_OK) {
		rc = -EIO;
		goto fail_db;
	}
	sqlite3_extended_result_codes(c->db, 1);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	rc = pthread_create(&c->tid, NULL, mc_persist_ckpt_main, c);
	if (rc != 0) {
		rc = -rc;
		goto fail_sync;
	}
	*out = c;
	return 0;

fail_sync:
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
fail_db:
	sqlite3_close(c->db);
	free(c);
	return rc;
}

void mc_persist_ckpt_stop(struct mc_persist_ckpt *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->tid, NULL);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	sqlite3_close(c->db);
	free(c);
}

int mc_persist_ckpt_kick(struct mc_persist_ckpt *c)
{
	int idle;

	pthread_mutex_lock(&c->mu);
	idle = !c->running && !c->requested && !c->has_result;
	if (idle) {
		c->requested = 1;
		pthread_cond_signal(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return idle;
}

int mc_persist_ckpt_busy(struct mc_persist_ckpt *c)
{
	int busy;

	pthread_mutex_lock(&c->mu);
	busy = c->running || c->requested;
	pthread_mutex_unlock(&c->mu);
	return busy;
}

int mc_persist_ckpt_collect(struct mc_persist_ckpt *c, int *rc, int *logged, int *done, char *msg,
			    size_t msglen)
{
	int got;

	pthread_mutex_lock(&c->mu);
	got = c->has_result;
	if (got) {
		c->has_result = 0;
		*rc = c->rc;
		*logged = c->logged;
		*done = c->done;
		snprintf(msg, msglen, "%s", c->rc == SQLITE_OK ? "" : c->msg);
	}
	pthread_mutex_unlock(&c->mu);
	return got;
}
