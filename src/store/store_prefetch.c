/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SSD prefetch on exist probes (upstream's ExistOptions.prefetch_to_memory with the client's
 * enable_ssd_prefetch): after is_exist / batch_is_exist found keys, the client asks the master
 * (RegisterPrefetchTask) to bring those that only an SSD area holds back into memory, so that the
 * get that usually follows a lookup reads memory.  The master decides which keys are SSD-only,
 * never evicts for a prefetch and answers NO_AVAILABLE_HANDLE when memory is full; the promotion
 * itself runs later on the SSD owner (the tier's PROMOTE task).
 *
 * Best effort and bounded: a key asked for is not asked again for ssd_prefetch_dedup_ttl_sec
 * (a direct-mapped table of key hashes, so a collision only costs a repeated request), and a
 * "no room" answer stops prefetches for ssd_prefetch_cooldown_sec.  A failed call is not an
 * error of the probe that triggered it.  Any API thread; the table is under its own mutex.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "store/store.h"

#define MC_PREFETCH_SLOTS 8192

struct mc_store_prefetch {
	pthread_mutex_t mu;
	int64_t cooldown_until;		/* monotonic ms */
	struct {
		uint64_t hash;
		int64_t until;		/* monotonic ms: not asked again before */
	} slot[MC_PREFETCH_SLOTS];
};

/* FNV-1a, 64 bits: the dedup table's key. */
static uint64_t mc_prefetch_hash(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *key; key++)
		h = (h ^ (uint8_t)*key) * 0x100000001b3ull;
	return h;
}

static struct mc_store_prefetch *mc_prefetch_get(struct mc_store *st)
{
	struct mc_store_prefetch *pf;

	pthread_mutex_lock(&st->mu);
	pf = st->pf;
	if (pf == NULL && (pf = calloc(1, sizeof(*pf))) != NULL) {
		pthread_mutex_init(&pf->mu, NULL);
		st->pf = pf;
	}
	pthread_mutex_unlock(&st->mu);
	return pf;
}

void mc_store_prefetch(struct mc_store *st, const char **keys, uint32_t n, const int *found)
{
	struct mc_store_prefetch *pf;
	const char **ask;
	int *res;
	uint32_t i, k = 0;
	int64_t now = mc_store_now_ms();
	int full = 0;

	if (!st->ssd_prefetch || n == 0 || (pf = mc_prefetch_get(st)) == NULL)
		return;
	ask = malloc(n * sizeof(*ask));
	res = malloc(n * sizeof(*res));
	if (ask == NULL || res == NULL)
		goto out;
	pthread_mutex_lock(&pf->mu);
	if (now >= pf->cooldown_until)
		for (i = 0; i < n; i++) {
			uint64_t h = mc_prefetch_hash(keys[i]);
			size_t s = h % MC_PREFETCH_SLOTS;

			if (found[i] != 1 || (pf->slot[s].hash == h && pf->slot[s].until > now))
				continue;
			if (st->prefetch_dedup_ms > 0) {
				pf->slot[s].hash = h;
				pf->slot[s].until = now + st->prefetch_dedup_ms;
			}
			ask[k++] = keys[i];
		}
	pthread_mutex_unlock(&pf->mu);
	if (k == 0 || mc_store_keys_call(st, MC_OP_REGISTER_PREFETCH_TASK, NULL, 0, ask, k, res))
		goto out;
	for (i = 0; i < k; i++)
		full |= res[i] == MC_ERR_NO_AVAILABLE_HANDLE;
	if (!full)
		goto out;
	pthread_mutex_lock(&pf->mu);
	if (st->prefetch_cooldown_ms > 0)
		pf->cooldown_until = mc_store_now_ms() + st->prefetch_cooldown_ms;
	pthread_mutex_unlock(&pf->mu);
	if (full)
		mc_log_info("SSD prefetch: memory is full at the master; no prefetch for %lld ms",
			    (long long)st->prefetch_cooldown_ms);
out:
	free(ask);
	free(res);
}

void mc_store_prefetch_free(struct mc_store *st)
{
	if (st->pf == NULL)
		return;
	pthread_mutex_destroy(&st->pf->mu);
	free(st->pf);
	st->pf = NULL;
}
