/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What mooncake_proxy knows of the Mooncake store's pool: a bounded set of the block hashes the
 * master's KV events said are stored (and not removed since), and the mapping from a prompt to
 * the hashes its prefix blocks would have in the pool.
 *
 * The set: 4-way buckets of u64 hashes, --kv_pool_blocks entries in all (rounded up to a power
 * of two).  A stored hash goes into a free way of its bucket, else evicts one way chosen by a
 * rotating counter; a removed hash is cleared where found.  So it forgets (never invents)
 * blocks: a lookup's false answers are misses, except after events were lost (a sequence gap:
 * a missed "removed" leaves a stale entry until the next disconnection clears the set).
 *
 * The mapping: a prompt is cut in blocks of --kv_pool_block_bytes bytes; block i's hash is the
 * FNV-1a chain over blocks 0..i (the same chain as the kv_aware prefix tree), so a block is
 * named by its whole prefix.  An object key names a block when it is the text of
 * --kv_events_key_format with its {hash} (decimal u64) or {hex} (hexadecimal u64, as many digits
 * as needed) replaced by the block's hash.  Loop thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "proxy/proxy.h"

#define PX_WAYS 4

int px_kvpool_init(struct px *px)
{
	struct px_kvpool *kp = mc_xcalloc(1, sizeof(*kp));
	const char *fmt = px->cfg.kv_events_key_format, *at;
	size_t sets = 1;

	at = strstr(fmt, "{hash}");
	kp->hex = at == NULL;
	if (at == NULL)
		at = strstr(fmt, "{hex}");
	if (at == NULL || strstr(at + 1, "{hash}") || strstr(at + 1, "{hex}")) {
		mc_log_err("--kv_events_key_format '%s' must hold exactly one {hash} or {hex}", fmt);
		free(kp);
		return -EINVAL;
	}
	kp->pre = fmt;
	kp->pre_len = (size_t)(at - fmt);
	kp->suf = at + (kp->hex ? 5 : 6);
	kp->suf_len = strlen(kp->suf);
	kp->plain = !kp->hex && kp->pre_len == 0 && kp->suf_len == 0;
	while (sets * PX_WAYS < (size_t)px->cfg.kv_pool_blocks)
		sets <<= 1;
	kp->n_sets = sets;
	kp->ways = mc_xcalloc(sets * PX_WAYS, sizeof(uint64_t));
	kp->block = (size_t)(px->cfg.kv_pool_block_bytes ? px->cfg.kv_pool_block_bytes
							   : px->cfg.kv_block_bytes);
	px->kvpool = kp;
	return 0;
}

void px_kvpool_free(struct px *px)
{
	if (px->kvpool == NULL)
		return;
	free(px->kvpool->ways);
	free(px->kvpool);
	px->kvpool = NULL;
}

static uint64_t *px_kvpool_set(struct px_kvpool *kp, uint64_t h)
{
	/* Hashes from elsewhere may be poorly mixed: spread them over the buckets. */
	uint64_t m = h * 0x9e3779b97f4a7c15ULL;

	return kp->ways + (size_t)((m >> 20) & (kp->n_sets - 1)) * PX_WAYS;
}

void px_kvpool_stored(struct px_kvpool *kp, uint64_t h)
{
	uint64_t *w;
	int i;

	if (h == 0)
		return;
	w = px_kvpool_set(kp, h);
	for (i = 0; i < PX_WAYS; i++)
		if (w[i] == h)
			return;
	for (i = 0; i < PX_WAYS; i++)
		if (w[i] == 0) {
			w[i] = h;
			kp->known++;
			return;
		}
	w[kp->rot++ % PX_WAYS] = h;
}

void px_kvpool_removed(struct px_kvpool *kp, uint64_t h)
{
	uint64_t *w;
	int i;

	if (h == 0)
		return;
	w = px_kvpool_set(kp, h);
	for (i = 0; i < PX_WAYS; i++)
		if (w[i] == h) {
			w[i] = 0;
			kp->known--;
		}
}

void px_kvpool_clear(struct px_kvpool *kp)
{
	memset(kp->ways, 0, kp->n_sets * PX_WAYS * sizeof(uint64_t));
	kp->known = 0;
}

static int px_kvpool_has(const struct px_kvpool *kp, uint64_t h)
{
	const uint64_t *w = px_kvpool_set((struct px_kvpool *)kp, h);
	int i;

	for (i = 0; i < PX_WAYS; i++)
		if (w[i] == h)
			return 1;
	return 0;
}

int px_kvpool_key_hash(const struct px_kvpool *kp, const char *key, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i, digits;

	if (n < kp->pre_len + kp->suf_len + 1 || memcmp(key, kp->pre, kp->pre_len) != 0 ||
	    memcmp(key + n - kp->suf_len, kp->suf, kp->suf_len) != 0)
		return -1;
	digits = n - kp->pre_len - kp->suf_len;
	key += kp->pre_len;
	if (digits > (kp->hex ? 16u : 20u))
		return -1;
	for (i = 0; i < digits; i++) {
		char c = key[i];
		int d = c >= '0' && c <= '9'		   ? c - '0'
			: kp->hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
			: kp->hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
							  : -1;

		if (d < 0)
			return -1;
		if (!kp->hex && v > (UINT64_MAX - (uint64_t)d) / 10)
			return -1;
		v = v * (kp->hex ? 16 : 10) + (uint64_t)d;
	}
	*out = v;
	return 0;
}

size_t px_kvpool_match(struct px *px, const char *prompt, size_t len, size_t *n_blocks)
{
	struct px_kvpool *kp = px->kvpool;
	size_t i, nb;
	uint64_t h = 0;

	*n_blocks = 0;
	if (kp == NULL || !kp->live || prompt == NULL)
		return 0;
	nb = len / kp->block;
	*n_blocks = nb;
	for (i = 0; i < nb; i++) {
		h = px_block_hash(h, prompt + i * kp->block, kp->block);
		if (!px_kvpool_has(kp, h))
			break;
	}
	return i;
}
