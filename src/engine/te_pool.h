/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TE_POOL_H
#define MC_TE_POOL_H

/*
 * Worker threads for blocking transport work (te_pool.c).  The pool uses req->xport_priv[2..3];
 * transports keep [0..1].
 */
#include "engine/transport.h"

struct mc_te_pool;

/* Runs on a worker: 0 or a negative status (-EXDEV hands the request to tcp). */
typedef int (*mc_te_job_fn)(struct mc_te_req *r);

/* nthreads workers (1..16).  NULL on failure. */
struct mc_te_pool *mc_te_pool_new(struct mc_engine *e, unsigned nthreads);
/* Queue r (loop thread or any): fn(r) runs on a worker, then mc_te_req_done(r, status) on the
 * loop thread.  0, or -ESHUTDOWN (r untouched: the caller completes it). */
int mc_te_pool_submit(struct mc_te_pool *p, struct mc_te_req *r, mc_te_job_fn fn);
/* Fail what has not started, wait for what runs, join.  NULL is a no-op. */
void mc_te_pool_free(struct mc_te_pool *p);

#endif
