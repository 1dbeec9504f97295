/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_BENCH_TRACE_H
#define MC_BENCH_TRACE_H

#include <stddef.h>
#include <stdint.h>

/*
 * KV-cache request traces for mooncake_bench (--trace): loading, and the offline simulator of
 * a prefix cache.  A trace holds requests in arrival order; each lists its prompt's block ids,
 * head first (equal ids are the same reusable block).  A request hits the longest prefix of its
 * blocks that is cached.
 */

#define MC_TRACE_BLOCK_TOKENS 512	/* tokens per block in the FAST'25 traces */

struct mc_trace {
	size_t nreq;
	size_t nrefs;			/* block references, all requests */
	size_t distinct;		/* distinct blocks: the working set */
	uint32_t max_id;		/* largest block id + 1 */
	uint32_t max_blocks;		/* longest request, in blocks */
	uint64_t *off;			/* request i's blocks: ids[off[i] .. off[i] + n[i]) */
	uint32_t *n;
	int64_t *ts;			/* arrival, ms from the start */
	int64_t *input_len;		/* tokens */
	uint32_t *ids;			/* dense: ids renumbered 0..distinct-1 in order of first use */
};

/* Read a JSON-lines trace (timestamp, input_length, output_length, hash_ids).  Returns 0, or -1
 * with a message naming the file and the line in err. */
int mc_trace_load(const char *path, struct mc_trace *t, char *err, size_t errlen);
void mc_trace_free(struct mc_trace *t);

enum mc_sim_policy {
	MC_SIM_LRU,		/* the master's table with --eviction_policy=lru */
	MC_SIM_PREFIX,		/* the master's table with --eviction_policy=prefix */
	MC_SIM_BELADY,		/* offline: evict the block used again furthest in the future */
	MC_SIM_UNBOUNDED,	/* no eviction: the ceiling */
};

struct mc_sim_result {
	uint64_t hit_blocks, blocks;
	uint64_t hit_tokens, tokens;
};

/* Replay the trace on a cache of capacity blocks with the given policy, issuing to the policy the
 * same sequence a connector makes the master see: a probe of every block of a request, a read of
 * the hit prefix, a put of the missing blocks, their put ends. */
void mc_sim_run(const struct mc_trace *t, enum mc_sim_policy p, uint64_t capacity,
		struct mc_sim_result *r);

/* Parse a list of pool sizes, "1/16,1/8,0.25,20000": fractions of the working set (a/b or a
 * number below 1) or block counts.  Returns how many (at most max), or -1 if malformed. */
int mc_trace_parse_pools(const char *s, double *out, int max);
/* Blocks for one parsed size. */
uint64_t mc_trace_pool_blocks(const struct mc_trace *t, double size);

#endif
