/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Same-host shortcut: a client on the same host maps the owner's segment memory and copies
 * directly, instead of sending the bytes through TCP.
 *
 * Every client that contributes memory listens on an abstract Unix socket named after its
 * segment ("\0mooncake_shm_<host:port>"; abstract names are per network namespace, so only
 * processes that share the host's network stack can reach it).  It accepts only peers running
 * under its own uid (SO_PEERCRED) and sends each of its segments: base address and size, with the
 * segment's memfd attached (SCM_RIGHTS).  The peer maps them MAP_SHARED and keeps the socket
 * open: the owner's death shows as a hang-up on that socket, which drops the mapping before it
 * is used again, so bytes never go to or come from a dead owner's memory.  The socket helpers
 * are shared with the transfer engine's shm transport (src/transfer/fdpass.c).  Anything that fails
 * makes the caller fall back to TCP.  MC_STORE_SHM=0 turns the shortcut off.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "common/log.h"
#include "common/wire.h"
#include "store/store.h"
#include "transfer/fdpass.h"

#define MC_SHM_MAX_MAPS 256
#define MC_SHM_RETRY_MS 2000

struct mc_shm_map {
	char name[300];		/* owner's segment name */
	int sock;		/* open while the owner lives */
	uint32_t n;
	uint64_t base[MC_STORE_MAX_SEGMENTS];
	uint64_t size[MC_STORE_MAX_SEGMENTS];
	uint8_t *local[MC_STORE_MAX_SEGMENTS];
	struct mc_segmem_peer *pop[MC_STORE_MAX_SEGMENTS];	/* maps its pages ahead of writes */
	int64_t failed_at;	/* ms; not reachable over shm, retry later */
};

struct mc_shm {
	pthread_mutex_t mu;
	struct evconnlistener *listener;
	struct mc_shm_map maps[MC_SHM_MAX_MAPS];
	uint32_t nmaps;
	int enabled;
};

static int64_t mc_shm_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static socklen_t mc_shm_addr(const char *name, struct sockaddr_un *sa)
{
	char full[400];

	/* Long names are cut to what an address holds, the same way on both sides. */
	snprintf(full, sizeof(full), "mooncake_shm_%s", name);
	full[sizeof(sa->sun_path) - 2] = '\0';
	return mc_fdpass_addr(full, sa);
}

/* The peer closed its end (or wrote, which it never should): close ours. */
static void mc_shm_on_peer(evutil_socket_t fd, short what, void *arg)
{
	char b[16];

	(void)what;
	if (recv(fd, b, sizeof(b), MSG_DONTWAIT) > 0)
		return;
	event_free(arg);
	close(fd);
}

/* Owner side: hand our segments to a same-uid peer. */
static void mc_shm_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			     int salen, void *arg)
{
	struct mc_store *st = arg;
	uid_t uid = (uid_t)-1;
	uint32_t i, n;

	(void)l;
	(void)sa;
	(void)salen;
	if (mc_fdpass_peer(fd, &uid, NULL) || uid != getuid()) {
		mc_log_warn("shm: refusing a peer of uid %d", (int)uid);
		close(fd);
		return;
	}
	evutil_make_socket_nonblocking(fd);
	pthread_mutex_lock(&st->mu);
	n = st->nsegs;
	for (i = 0; i <= n; i++) {
		uint8_t msg[20];

		/* Segments, then an end marker (size 0). */
		mc_put_le32(msg, i < n ? n : 0);
		mc_put_le64(msg + 4, i < n ? (uint64_t)(uintptr_t)st->segs[i].base : 0);
		mc_put_le64(msg + 12, i < n ? st->segs[i].size : 0);
		if (mc_fdpass_send(fd, msg, sizeof(msg), i < n ? st->segs[i].memfd : -1))
			break;
	}
	pthread_mutex_unlock(&st->mu);
	/* The peer keeps its end open while it uses the mapping and our end stays open while we
	 * live, so our death is its signal.  When the peer goes, close ours. */
	{
		struct event *ev = event_new(mc_loop_thread_base(st->lt), fd, EV_READ | EV_PERSIST,
					     mc_shm_on_peer, NULL);

		if (ev == NULL || event_assign(ev, mc_loop_thread_base(st->lt), fd,
					       EV_READ | EV_PERSIST, mc_shm_on_peer, ev) ||
		    event_add(ev, NULL)) {
			if (ev)
				event_free(ev);
			close(fd);
		}
	}
}

int mc_store_shm_start(struct mc_store *st)
{
	struct sockaddr_un sa;
	socklen_t len;
	const char *v = getenv("MC_STORE_SHM");

	st->shm = calloc(1, sizeof(*st->shm));
	if (st->shm == NULL)
		return -ENOMEM;
	pthread_mutex_init(&st->shm->mu, NULL);
	st->shm->enabled = !(v && !strcmp(v, "0"));
	if (!st->shm->enabled || st->nsegs == 0)
		return 0;
	len = mc_shm_addr(st->hostname, &sa);
	st->shm->listener = evconnlistener_new_bind(mc_loop_thread_base(st->lt), mc_shm_on_accept,
						     st, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
						     64, (struct sockaddr *)&sa, (int)len);
	if (st->shm->listener == NULL)
		mc_log_warn("shm: cannot listen for same-host peers of %s: %s", st->hostname,
			    strerror(errno));
	return 0;
}

static void mc_shm_unmap(struct mc_shm_map *m)
{
	uint32_t i;

	for (i = 0; i < m->n; i++) {
		mc_segmem_peer_stop(m->pop[i]);
		m->pop[i] = NULL;
		if (m->local[i])
			munmap(m->local[i], m->size[i]);
	}
	if (m->sock >= 0)
		close(m->sock);
	m->n = 0;
	m->sock = -1;
}

void mc_store_shm_stop_listener(struct mc_store *st)
{
	if (st->shm && st->shm->listener) {
		evconnlistener_free(st->shm->listener);
		st->shm->listener = NULL;
	}
}

void mc_store_shm_stop(struct mc_store *st)
{
	uint32_t i;

	if (st->shm == NULL)
		return;
	for (i = 0; i < st->shm->nmaps; i++)
		mc_shm_unmap(&st->shm->maps[i]);
	pthread_mutex_destroy(&st->shm->mu);
	free(st->shm);
	st->shm = NULL;
}

/* Connect to the owner and map its segments (populate: map their pages ahead of the writes,
 * segment/segmem.h).  0 or -1. */
static int mc_shm_attach(struct mc_shm_map *m, int populate)
{
	char name[400];
	int fd;

	snprintf(name, sizeof(name), "mooncake_shm_%s", m->name);
	name[sizeof(((struct sockaddr_un *)0)->sun_path) - 2] = '\0';
	fd = mc_fdpass_connect(name, 2000, NULL);	/* the owner must run under our uid */
	if (fd < 0)
		return -1;
	m->n = 0;
	for (;;) {
		uint8_t msg[20];
		int sfd = -1;
		uint64_t size;

		if (mc_fdpass_recv(fd, msg, sizeof(msg), &sfd))
			goto fail;
		size = mc_get_le64(msg + 12);
		if (size == 0) {
			if (sfd >= 0)
				close(sfd);
			break;
		}
		if (sfd < 0 || m->n >= MC_STORE_MAX_SEGMENTS) {
			if (sfd >= 0)
				close(sfd);
			goto fail;
		}
		m->base[m->n] = mc_get_le64(msg + 4);
		m->size[m->n] = size;
		m->local[m->n] = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
		if (m->local[m->n] == MAP_FAILED) {
			close(sfd);
			m->local[m->n] = NULL;
			goto fail;
		}
		m->pop[m->n] = m->local[m->n] && populate ?
			mc_segmem_peer_map(m->local[m->n], size, sfd) : NULL;
		close(sfd);
		m->n++;
	}
	m->sock = fd;
	return 0;
fail:
	m->sock = fd;
	mc_shm_unmap(m);
	return -1;
}

/* True while the owner is alive (its end of the socket not hung up; it never writes). */
static int mc_shm_alive(struct mc_shm_map *m)
{
	return mc_fdpass_state(m->sock) == MC_FDPASS_QUIET;
}

void *mc_store_shm_ptr(struct mc_store *st, struct mc_strv segment, uint64_t addr, uint64_t len)
{
	struct mc_shm *s = st->shm;
	struct mc_shm_map *m = NULL;
	void *ptr = NULL;
	uint32_t i;

	if (s == NULL || !s->enabled || segment.n == 0 || segment.n >= sizeof(m->name))
		return NULL;
	pthread_mutex_lock(&s->mu);
	for (i = 0; i < s->nmaps; i++)
		if (strlen(s->maps[i].name) == segment.n &&
		    !memcmp(s->maps[i].name, segment.p, segment.n)) {
			m = &s->maps[i];
			break;
		}
	if (m == NULL) {
		if (s->nmaps == MC_SHM_MAX_MAPS)
			goto out;
		m = &s->maps[s->nmaps++];
		memset(m, 0, sizeof(*m));
		m->sock = -1;
		memcpy(m->name, segment.p, segment.n);
	}
	if (m->sock >= 0 && !mc_shm_alive(m))
		mc_shm_unmap(m);	/* the owner went away: never touch its memory again */
	if (m->sock < 0) {
		if (m->failed_at && mc_shm_now() - m->failed_at < MC_SHM_RETRY_MS)
			goto out;
		if (mc_shm_attach(m, st->memopts.populate)) {
			m->failed_at = mc_shm_now();
			goto out;
		}
		m->failed_at = 0;
	}
	for (i = 0; i < m->n; i++)
		if (addr >= m->base[i] && addr + len <= m->base[i] + m->size[i] && addr + len >= addr) {
			ptr = m->local[i] + (addr - m->base[i]);
			break;
		}
	if (ptr == NULL && m->n)
		mc_shm_unmap(m);	/* a segment we do not know yet: map again next time */
out:
	pthread_mutex_unlock(&s->mu);
	return ptr;
}
