/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Generations and ghosts: how the master keeps an SSD owner that was away from bringing back
 * removed keys or older values.
 *
 * Every put gets a generation from m->next_gen (strictly increasing, persisted; without a
 * database it starts at the wall clock in microseconds, so a restarted master never hands out a
 * generation an earlier one used).  An offload task carries the object's generation, the client
 * stores it in the object file, and a REGISTER of that file quotes it back: an SSD copy is taken
 * only if it holds exactly the generation the master knows for the key.
 *
 * When the master forgets an object that had a copy on an SSD area that went away (its client
 * died or unmounted) — because its last replica went too, or eviction took it — it keeps a
 * ghost (key, generation), so the owner can bring it back when it restarts.  A Remove of the
 * key, a new put of it, or RemoveAll forgets the ghost; a key the master knows neither as
 * object nor as ghost is refused.  Ghosts are persisted as rows of the objects table with the
 * MC_OBJ_GHOST flag and no replica, keyed like every row by its generation, the one of the
 * object it replaces (whose row is deleted in the same batch); a key is never object and ghost
 * at once in memory, and a ghost's row goes with the new put of its key; at most
 * MC_GHOST_MAX are kept, the oldest forgotten first (its SSD copy is then refused and deleted:
 * lost, never stale).
 *
 * Adoption: a master that started without state (no --persist_path, or a new database) knows
 * nothing of objects written before it; generations below m->gen_epoch are such objects, and
 * they are taken while the adoption window is open (the newest generation wins when several
 * SSDs hold the key).  While it is open every key the master forgets leaves a tombstone, so a
 * removed key is not adopted again; when tombstones would exceed MC_TOMB_MAX, or on RemoveAll or
 * RemoveByRegex (keys the master never saw may match), the window closes for good and older
 * objects are refused from then on.
 *
 * Ghosts are kept under the objects' tier names (mc_tier_key: the key, or "tenant\0key" in
 * multi-tenant mode), the names the SSD copies carry, so each tenant's keys have their own;
 * removals forget the ghosts of the namespace they work in only.
 * Single-threaded: the master's reactor thread.
 */
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "master/tenants.h"
#include "persist/persist.h"

struct mc_ghost {
	struct mc_ghost *hnext;
	struct mc_ghost *prev, *next;	/* age order, oldest at fifo.next */
	uint64_t gen;
	uint32_t hash;
	uint16_t key_len;
	uint8_t tomb;
	uint8_t rowkey;		/* its row is keyed by the key's hash (MC_PERSIST_ROWKEY) */
	char key[];
};

void mc_ghosts_init(struct mc_master *m)
{
	struct timeval tv;

	m->ghosts.nb = 1024;
	m->ghosts.b = mc_xcalloc(m->ghosts.nb, sizeof(*m->ghosts.b));
	m->ghosts.fifo = mc_xcalloc(1, sizeof(*m->ghosts.fifo));
	m->ghosts.fifo->prev = m->ghosts.fifo->next = m->ghosts.fifo;
	gettimeofday(&tv, NULL);
	m->next_gen = (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
	m->gen_epoch = m->next_gen;
	m->adopt_open = 1;
}

void mc_ghosts_fini(struct mc_master *m)
{
	struct mc_ghost *g, *n;

	if (m->ghosts.fifo == NULL)
		return;
	for (g = m->ghosts.fifo->next; g != m->ghosts.fifo; g = n) {
		n = g->next;
		free(g);
	}
	free(m->ghosts.fifo);
	free(m->ghosts.b);
	memset(&m->ghosts, 0, sizeof(m->ghosts));
}

uint64_t mc_gen_next(struct mc_master *m)
{
	return m->next_gen++;
}

static struct mc_ghost **mc_ghost_slot(struct mc_master *m, const char *key, size_t len,
				       uint32_t h)
{
	struct mc_ghost **pp = &m->ghosts.b[h & (m->ghosts.nb - 1)];

	for (; *pp; pp = &(*pp)->hnext)
		if ((*pp)->hash == h && (*pp)->key_len == len && !memcmp((*pp)->key, key, len))
			break;
	return pp;
}

static void mc_ghost_grow(struct mc_master *m)
{
	size_t nb = m->ghosts.nb * 2;
	struct mc_ghost **b = mc_xcalloc(nb, sizeof(*b)), *g;

	for (g = m->ghosts.fifo->next; g != m->ghosts.fifo; g = g->next) {
		g->hnext = b[g->hash & (nb - 1)];
		b[g->hash & (nb - 1)] = g;
	}
	free(m->ghosts.b);
	m->ghosts.b = b;
	m->ghosts.nb = nb;
}

/* Unlink and free g (not the persisted row). */
static void mc_ghost_free(struct mc_master *m, struct mc_ghost *g)
{
	struct mc_ghost **pp = mc_ghost_slot(m, g->key, g->key_len, g->hash);

	*pp = g->hnext;
	g->prev->next = g->next;
	g->next->prev = g->prev;
	if (g->tomb)
		m->ghosts.ntomb--;
	else
		m->ghosts.nkeep--;
	free(g);
}

static void mc_ghost_persist_gone(struct mc_master *m, const struct mc_ghost *g)
{
	/* A batch that cannot grow fails its commit: nothing to do here. */
	if (!g->tomb && m->persist)
		(void)mc_persist_del_object(m->persist, g->key, g->key_len,
					    mc_persist_row(g->key, g->key_len, g->gen, g->rowkey));
}

static void mc_ghost_persist(struct mc_master *m, const struct mc_ghost *g)
{
	struct mc_persist_object po;

	if (m->persist == NULL || g->tomb)
		return;
	memset(&po, 0, sizeof(po));
	po.key = g->key;
	po.key_len = g->key_len;
	po.size = 0;
	po.flags = MC_OBJ_GHOST | (g->rowkey ? MC_PERSIST_ROWKEY : 0);
	po.gen = g->gen;
	(void)mc_persist_put_object(m->persist, &po);
}

void mc_adopt_close(struct mc_master *m, const char *why)
{
	struct mc_ghost *g, *n;

	if (!m->adopt_open)
		return;
	m->adopt_open = 0;
	for (g = m->ghosts.fifo->next; g != m->ghosts.fifo; g = n) {
		n = g->next;
		if (g->tomb)
			mc_ghost_free(m, g);
	}
	mc_log_notice("SSD objects written before this master started are no longer adopted (%s)",
		      why);
}

/* Add or replace the entry of key. */
static void mc_ghost_set(struct mc_master *m, const char *key, size_t len, uint64_t gen, int tomb,
			 int rowkey)
{
	uint32_t h = mc_object_hash(key, len);
	struct mc_ghost **pp = mc_ghost_slot(m, key, len, h), *g;

	if (*pp)
		mc_ghost_free(m, *pp);
	if (tomb && m->ghosts.ntomb >= MC_TOMB_MAX) {
		mc_adopt_close(m, "too many removals to remember");
		return;
	}
	if (!tomb && m->ghosts.nkeep >= MC_GHOST_MAX) {
		for (g = m->ghosts.fifo->next; g != m->ghosts.fifo && g->tomb; g = g->next)
			;
		if (g != m->ghosts.fifo) {
			mc_log_info("forgetting the SSD copy of %.*s (more than %u ghosts): it will "
				    "not be taken back",
				    (int)(g->key_len > 128 ? 128 : g->key_len), g->key, MC_GHOST_MAX);
			mc_ghost_persist_gone(m, g);
			mc_ghost_free(m, g);
		}
	}
	if (m->ghosts.nkeep + m->ghosts.ntomb + 1 > m->ghosts.nb)
		mc_ghost_grow(m);
	g = mc_xcalloc(1, sizeof(*g) + len);
	memcpy(g->key, key, len);
	g->key_len = (uint16_t)len;
	g->hash = h;
	g->gen = gen;
	g->tomb = (uint8_t)tomb;
	g->rowkey = (uint8_t)(rowkey != 0);
	g->hnext = m->ghosts.b[h & (m->ghosts.nb - 1)];
	m->ghosts.b[h & (m->ghosts.nb - 1)] = g;
	g->prev = m->ghosts.fifo->prev;
	g->next = m->ghosts.fifo;
	g->prev->next = g;
	m->ghosts.fifo->prev = g;
	if (tomb)
		m->ghosts.ntomb++;
	else
		m->ghosts.nkeep++;
}

void mc_ghost_load(struct mc_master *m, const char *key, size_t len, uint64_t gen, int rowkey)
{
	mc_ghost_set(m, key, len, gen, 0, rowkey);
}

/* Forget the ghost of tier name key (and leave a tombstone while adoption is open). */
static void mc_ghost_forget_name(struct mc_master *m, const char *key, size_t len)
{
	struct mc_ghost **pp = mc_ghost_slot(m, key, len, mc_object_hash(key, len));

	if (*pp) {
		mc_ghost_persist_gone(m, *pp);
		mc_ghost_free(m, *pp);
	}
	if (m->adopt_open)
		mc_ghost_set(m, key, len, 0, 1, 0);
}

void mc_ghost_on_erase(void *arg, struct mc_object *o)
{
	struct mc_master *m = arg;
	char name[MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY];
	size_t len = mc_tenant_scoped_key(m, o->tenant, o->key, o->key_len, name);

	if (m->erase_keep) {
		uint32_t h = mc_object_hash(name, len);

		if (len > MC_RPC_MAX_KEY)
			return;		/* never on an SSD area (mc_tier_key): nothing comes back */
		mc_ghost_set(m, name, len, o->gen, 0, (o->xflags & MC_OBJX_ROWKEY) != 0);
		mc_ghost_persist(m, *mc_ghost_slot(m, name, len, h));
		return;
	}
	mc_ghost_forget_name(m, name, len);
}

void mc_ghost_forget(struct mc_master *m, const char *key, size_t len)
{
	char name[MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY];

	mc_ghost_forget_name(m, name, mc_tenant_scoped_key(m, m->objects.tenant, key, len, name));
}

void mc_ghost_drop(struct mc_master *m, const char *key, size_t len)
{
	char name[MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY];
	struct mc_ghost **pp;

	/* Every new put comes here, and most masters have no ghost at all: no key copy, hash
	 * and probe then (tombstones are never dropped). */
	if (m->ghosts.nkeep == 0)
		return;
	len = mc_tenant_scoped_key(m, m->objects.tenant, key, len, name);
	pp = mc_ghost_slot(m, name, len, mc_object_hash(name, len));
	if (*pp && !(*pp)->tomb) {
		mc_ghost_persist_gone(m, *pp);
		mc_ghost_free(m, *pp);
	}
}

uint64_t mc_ghost_remove_matching(struct mc_master *m, const void *re)
{
	struct mc_ghost *g, *n;
	char buf[MC_RPC_MAX_KEY + 1];
	uint64_t count = 0;

	for (g = m->ghosts.fifo->next; g != m->ghosts.fifo; g = n) {
		const char *key;
		size_t key_len;
		uint16_t tenant;

		n = g->next;
		if (g->tomb)
			continue;
		/* Only the ghosts of the namespace the request works in (all: admin). */
		if (mc_tenant_split_key(m, g->key, g->key_len, &tenant, &key, &key_len) != 0 ||
		    (!m->objects.all_tenants && tenant != m->objects.tenant))
			continue;
		if (re != NULL) {
			memcpy(buf, key, key_len);
			buf[key_len] = '\0';
			if (regexec((const regex_t *)re, buf, 0, NULL, 0) != 0)
				continue;
		}
		mc_ghost_persist_gone(m, g);
		mc_ghost_free(m, g);
		count++;
	}
	return count;
}

int mc_ghost_check(struct mc_master *m, const char *key, size_t len, uint64_t gen)
{
	struct mc_ghost **pp = mc_ghost_slot(m, key, len, mc_object_hash(key, len));

	if (*pp) {
		if ((*pp)->tomb || (*pp)->gen != gen)
			return -1;
		mc_ghost_persist_gone(m, *pp);
		mc_ghost_free(m, *pp);
		return 0;
	}
	return gen < m->gen_epoch && m->adopt_open ? 0 : -1;
}

int mc_ghost_gen(struct mc_master *m, const char *key, size_t len, uint64_t *gen, int *rowkey)
{
	struct mc_ghost *g = *mc_ghost_slot(m, key, len, mc_object_hash(key, len));

	if (g == NULL || g->tomb)
		return 0;
	*gen = g->gen;
	*rowkey = g->rowkey;
	return 1;
}

size_t mc_ghost_count(const struct mc_master *m)
{
	return m->ghosts.nkeep;
}
