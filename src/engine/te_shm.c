/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine's shm transport: a peer segment on this host, owned by a process of our uid, is
 * reached by copying memory directly instead of through TCP.
 *
 * Owner side.  The engine listens on an abstract Unix socket (name published in its descriptor
 * as "shm_socket", next to "shm_host_id" = boot_id/hostname and "shm_uid").  A same-uid peer
 * that connects gets the list of our published buffers: for each {addr, length, file offset}
 * and, when the memory is a shared file mapping (our memfd-backed managed buffers, a user's
 * memfd or /dev/shm mapping; te_mem.c), that file's descriptor (SCM_RIGHTS).  The connection
 * stays open: our death shows as a hang-up on the peer's end, and every register/unregister
 * writes a change notice on it so the peer re-reads the list before its next copy.
 *
 * Peer side.  openSegment picks shm when the descriptor's host id and uid are ours and the
 * owner answers on its socket (abstract names are per network namespace).  Buffers that came
 * with a descriptor are mapped MAP_SHARED; the others are copied with process_vm_readv/writev
 * when the kernel lets us (same uid, ptrace policy; probed once per attach), else their
 * requests go to tcp (-EXDEV).  Copies run on a worker pool, never on the loop, or, for the
 * store's small batches, on the calling thread (run_now).  Before every
 * copy the worker polls the owner's socket: hang-up = the owner died, the mappings are dropped
 * and requests FAIL (nothing is copied into memory the owner no longer has); a change notice =
 * re-attach and re-read the list.  Every request is checked against the owner's list as it
 * stands at that moment (the descriptor check in submitTransfer happened before).
 * MC_FORCE_TCP=1 (engine.c) or MC_TE_SHM=0 turn this transport off; MC_TE_SHM_PVM=0 turns the
 * process_vm path off.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "common/crc64.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "reactor/auth_event.h"
#include "engine/te_pool.h"
#include "engine/transport.h"
#include "segment/segmem.h"
#include "transfer/fdpass.h"

#define MC_SHM_MAGIC 0x4D435348u	/* "MCSH" */
#define MC_SHM_HDR 8			/* u32 magic, u32 count */
#define MC_SHM_MSG 28			/* u64 addr, u64 length, u64 file offset, u32 flags */
#define MC_SHM_HAS_FD 1u
#define MC_SHM_MAX_MAPS 4096
#define MC_SHM_TIMEOUT_MS 2000

struct mc_shm_buf {
	uint64_t addr, len;
	uint8_t *local;		/* mapped, or NULL (process_vm or tcp) */
	uint8_t *map_base;
	size_t map_len;
	struct mc_segmem_peer *pop;	/* maps the owner's populated pages ahead of our writes */
};

/* A peer segment as we see it.  Kept until uninstall (one per segment name); lk guards it:
 * copies hold it shared, (re-)attach holds it exclusive. */
struct mc_shm_map {
	struct mc_shm_map *next;
	char name[256];
	char sock_name[108];
	pthread_rwlock_t lk;
	int sock;		/* connection to the owner, -1 when detached */
	pid_t pid;
	int pvm;		/* process_vm_* works on this owner */
	int dead;		/* the owner went away */
	uint32_t n;
	struct mc_shm_buf *bufs;
};

struct mc_shm_peer {
	struct mc_shm_peer *next;
	struct mc_te_shm *s;
	int fd;
	struct event *ev;
	struct mc_auth_op *op;	/* proving the cluster secret: no list, no notices yet */
};

struct mc_te_shm {
	struct mc_engine *e;
	char host_id[160];
	char sock_name[96];
	struct evconnlistener *lis;	/* loop thread */
	struct mc_shm_peer *peers;	/* loop thread */
	pthread_mutex_t mu;		/* maps list */
	struct mc_shm_map *maps;
	uint32_t nmaps;
	struct mc_te_pool *pool;
	int pvm_enabled;
	struct mc_waiter w;
	int rc;
};

/* "boot_id/hostname": equal only for processes on the same running kernel instance. */
static void mc_shm_host_id(char *out, size_t n)
{
	char boot[64] = "", host[96] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f) {
		if (fgets(boot, sizeof(boot), f))
			boot[strcspn(boot, "\n")] = '\0';
		fclose(f);
	}
	gethostname(host, sizeof(host) - 1);
	snprintf(out, n, "%s/%s", boot, host);
}

/* ---- owner side (loop thread) ---- */

static void mc_shm_peer_free(struct mc_shm_peer *p)
{
	struct mc_shm_peer **pp;

	for (pp = &p->s->peers; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	mc_auth_op_free(p->op);
	if (p->ev)
		event_free(p->ev);
	close(p->fd);
	free(p);
}

/* The peer closed its end (it never writes): forget it. */
static void mc_shm_on_peer(evutil_socket_t fd, short what, void *arg)
{
	char b[16];

	(void)what;
	if (recv(fd, b, sizeof(b), MSG_DONTWAIT) > 0)
		return;
	mc_shm_peer_free(arg);
}

/* Send our published buffers to a same-uid peer.  0 or -errno. */
static int mc_shm_send_list(struct mc_te_shm *s, int fd)
{
	struct mc_engine *e = s->e;
	struct mc_te_buffer *snap;
	uint8_t hdr[MC_SHM_HDR], msg[MC_SHM_MSG];
	uint32_t i, n;
	int rc = 0;

	/* Snapshot with our own descriptors: unregister may close the engine's meanwhile. */
	pthread_mutex_lock(&e->mu);
	n = e->nbufs;
	snap = calloc(n ? n : 1, sizeof(*snap));
	for (i = 0; snap && i < n; i++) {
		snap[i] = e->bufs[i];
		snap[i].fd = e->bufs[i].fd >= 0 ? fcntl(e->bufs[i].fd, F_DUPFD_CLOEXEC, 0) : -1;
	}
	pthread_mutex_unlock(&e->mu);
	if (snap == NULL)
		return -ENOMEM;
	mc_put_le32(hdr, MC_SHM_MAGIC);
	mc_put_le32(hdr + 4, n);
	rc = mc_fdpass_send(fd, hdr, sizeof(hdr), -1);
	for (i = 0; i < n; i++) {
		mc_put_le64(msg, snap[i].addr);
		mc_put_le64(msg + 8, snap[i].length);
		mc_put_le64(msg + 16, snap[i].fd_off);
		mc_put_le32(msg + 24, snap[i].fd >= 0 ? MC_SHM_HAS_FD : 0);
		if (rc == 0)
			rc = mc_fdpass_send(fd, msg, sizeof(msg), snap[i].fd);
		if (snap[i].fd >= 0)
			close(snap[i].fd);
	}
	free(snap);
	return rc;
}

/* Send the list to an accepted (and authenticated) peer and watch for its hang-up; p is in
 * s->peers and is freed on failure. */
static void mc_shm_serve(struct mc_te_shm *s, struct mc_shm_peer *p)
{
	struct timeval tv = { MC_SHM_TIMEOUT_MS / 1000, 0 };
	int rc;

	/* Blocking with a bound: the list may exceed the socket buffer. */
	fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(p->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	rc = mc_shm_send_list(s, p->fd);
	if (rc) {
		mc_log_warn("transfer engine %s: shm: sending buffers to a peer failed: %s",
			    s->e->server_name, strerror(-rc));
		mc_shm_peer_free(p);
		return;
	}
	evutil_make_socket_nonblocking(p->fd);
	p->ev = event_new(mc_loop_thread_base(s->e->lt), p->fd, EV_READ | EV_PERSIST,
			  mc_shm_on_peer, p);
	if (p->ev == NULL || event_add(p->ev, NULL))
		mc_shm_peer_free(p);
}

static void mc_shm_on_auth(void *arg, int rc, struct mc_auth_hs *hs)
{
	struct mc_shm_peer *p = arg;
	char peer[48];

	p->op = NULL;
	if (rc == 0) {
		mc_shm_serve(p->s, p);
		return;
	}
	snprintf(peer, sizeof(peer), "fd %d", p->fd);
	mc_auth_hs_refused(p->s->e->auth, "engine shm socket", peer, rc, hs);
	mc_shm_peer_free(p);
}

static void mc_shm_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			     int salen, void *arg)
{
	struct mc_te_shm *s = arg;
	struct mc_shm_peer *p;
	uid_t uid = (uid_t)-1;

	(void)l;
	(void)sa;
	(void)salen;
	if (mc_fdpass_peer(fd, &uid, NULL) || uid != getuid()) {
		mc_log_warn("transfer engine %s: shm: refusing a peer of uid %d", s->e->server_name,
			    (int)uid);
		close(fd);
		return;
	}
	evutil_make_socket_closeonexec(fd);
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		close(fd);
		return;
	}
	p->s = s;
	p->fd = fd;
	p->next = s->peers;
	s->peers = p;
	if (s->e->auth == NULL) {
		mc_shm_serve(s, p);
		return;
	}
	evutil_make_socket_nonblocking(fd);
	p->op = mc_auth_op_start(mc_loop_thread_base(s->e->lt), fd, s->e->auth, MC_AUTH_SERVER, 0,
				 mc_shm_on_auth, p);
	if (p->op == NULL)
		mc_shm_peer_free(p);
}

static void mc_shm_start_on_loop(void *arg)
{
	struct mc_te_shm *s = arg;
	struct sockaddr_un sa;
	socklen_t len = mc_fdpass_addr(s->sock_name, &sa);

	s->lis = evconnlistener_new_bind(mc_loop_thread_base(s->e->lt), mc_shm_on_accept, s,
					 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
						 LEV_OPT_LEAVE_SOCKETS_BLOCKING, 64,
					 (struct sockaddr *)&sa, (int)len);
	s->rc = s->lis ? 0 : -errno;
	mc_waiter_signal(&s->w, 0);
}

static void mc_shm_stop_on_loop(void *arg)
{
	struct mc_te_shm *s = arg;

	if (s->lis)
		evconnlistener_free(s->lis);
	s->lis = NULL;
	while (s->peers)
		mc_shm_peer_free(s->peers);
	mc_waiter_signal(&s->w, 0);
}

/* Tell every attached peer that our buffer list changed. */
static void mc_shm_notify_on_loop(void *arg)
{
	struct mc_te_shm *s = arg;
	struct mc_shm_peer *p;

	for (p = s->peers; p; p = p->next)
		if (p->op == NULL && send(p->fd, "c", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
			mc_log_debug("transfer engine: shm: change notice failed: %s",
				     strerror(errno));
	mc_waiter_signal(&s->w, 0);
}

static void mc_shm_run(struct mc_te_shm *s, mc_loop_fn fn)
{
	mc_waiter_init(&s->w);
	if (mc_loop_thread_call(s->e->lt, fn, s) == 0)
		mc_waiter_wait(&s->w);
	mc_waiter_fini(&s->w);
}

/* ---- peer side ---- */

static void mc_shm_detach(struct mc_shm_map *m)
{
	uint32_t i;

	for (i = 0; i < m->n; i++) {
		mc_segmem_peer_stop(m->bufs[i].pop);
		if (m->bufs[i].map_base)
			munmap(m->bufs[i].map_base, m->bufs[i].map_len);
	}
	free(m->bufs);
	m->bufs = NULL;
	m->n = 0;
	if (m->sock >= 0)
		close(m->sock);
	m->sock = -1;
	m->pvm = 0;
}

/* Connect to the owner, read its buffer list and map what it shares.  m->lk held
 * exclusively (or m private).  0 or -errno. */
static int mc_shm_attach(struct mc_te_shm *s, struct mc_shm_map *m)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t hdr[MC_SHM_HDR], msg[MC_SHM_MSG];
	uint32_t i, n;
	int fd, rc;

	mc_shm_detach(m);
	m->sock = mc_fdpass_connect(m->sock_name, MC_SHM_TIMEOUT_MS, &m->pid);
	if (m->sock < 0) {
		rc = m->sock;
		m->sock = -1;
		return rc;
	}
	if (s->e->auth) {
		struct mc_auth_hs hs;

		rc = mc_auth_hs_init(&hs, s->e->auth, MC_AUTH_CLIENT);
		if (rc == 0)
			rc = mc_auth_hs_run(&hs, m->sock, MC_SHM_TIMEOUT_MS);
		if (rc) {
			mc_log_warn("transfer engine: shm: %s refused us: %s", m->name,
				    hs.why ? hs.why : strerror(-rc));
			rc = -EACCES;
			goto fail;
		}
	}
	rc = mc_fdpass_recv(m->sock, hdr, sizeof(hdr), &fd);
	if (fd >= 0)
		close(fd);
	if (rc)
		goto fail;
	n = mc_get_le32(hdr + 4);
	if (mc_get_le32(hdr) != MC_SHM_MAGIC || n > MC_TE_MAX_BUFFERS) {
		rc = -EPROTO;
		goto fail;
	}
	m->bufs = calloc(n ? n : 1, sizeof(*m->bufs));
	if (m->bufs == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < n; i++) {
		struct mc_shm_buf *b = &m->bufs[i];
		uint64_t off, aligned;

		rc = mc_fdpass_recv(m->sock, msg, sizeof(msg), &fd);
		if (rc)
			goto fail;
		m->n = i + 1;
		b->addr = mc_get_le64(msg);
		b->len = mc_get_le64(msg + 8);
		off = mc_get_le64(msg + 16);
		if (b->len == 0 || b->addr + b->len < b->addr || off + b->len < off) {
			if (fd >= 0)
				close(fd);
			rc = -EPROTO;
			goto fail;
		}
		if (fd < 0)
			continue;
		aligned = off & ~(uint64_t)(pg - 1);
		b->map_len = (size_t)(b->len + (off - aligned));
		/* On the owner's 2 MiB boundaries: its huge pages map whole (segment/segmem.h). */
		b->map_base = mc_segmem_map_shared(fd, aligned, b->map_len, 0);
		if (b->map_base == MAP_FAILED) {
			close(fd);
			b->map_base = NULL;	/* process_vm or tcp for this one */
			continue;
		}
		/* A first write through a fresh mapping faults once per page even where the
		 * owner populated it: map those pages now (segment/segmem.h). */
		if (s->e->peer_populate && aligned == 0)
			b->pop = mc_segmem_peer_map(b->map_base, b->map_len, fd);
		close(fd);
		b->local = b->map_base + (off - aligned);
	}
	/* process_vm_* for what is not mapped, if the kernel lets us reach the owner. */
	m->pvm = 0;
	for (i = 0; s->pvm_enabled && m->pid > 0 && i < m->n; i++)
		if (m->bufs[i].local == NULL) {
			uint8_t probe;
			struct iovec l = { &probe, 1 }, r = { (void *)(uintptr_t)m->bufs[i].addr, 1 };

			m->pvm = process_vm_readv(m->pid, &l, 1, &r, 1, 0) == 1;
			break;
		}
	m->dead = 0;
	mc_log_debug("transfer engine %s: shm: attached to %s (%u buffers)", s->e->server_name,
		     m->name, m->n);
	return 0;
fail:
	mc_shm_detach(m);
	return rc;
}

/* The peer-side copy, on a worker. */
static int mc_shm_job(struct mc_te_req *r)
{
	struct mc_te_shm *s = r->xport_priv[0];
	struct mc_shm_map *m = r->seg_ctx;
	struct mc_shm_buf *b = NULL;
	enum mc_fdpass_state st;
	uint32_t i;
	int rc = 0;

	pthread_rwlock_rdlock(&m->lk);
	st = m->dead ? MC_FDPASS_GONE : mc_fdpass_state(m->sock);
	if (st != MC_FDPASS_QUIET) {
		pthread_rwlock_unlock(&m->lk);
		pthread_rwlock_wrlock(&m->lk);
		st = m->dead ? MC_FDPASS_GONE : mc_fdpass_state(m->sock);
		if (st == MC_FDPASS_READABLE && mc_shm_attach(s, m) == 0)
			st = MC_FDPASS_QUIET;	/* the owner's new buffer list */
		if (st != MC_FDPASS_QUIET && !m->dead) {
			mc_log_warn("transfer engine %s: shm: owner of %s is gone; its requests fail",
				    s->e->server_name, m->name);
			mc_shm_detach(m);
			m->dead = 1;
		}
		pthread_rwlock_unlock(&m->lk);
		if (st != MC_FDPASS_QUIET)
			return -ECONNRESET;
		pthread_rwlock_rdlock(&m->lk);
	}
	for (i = 0; i < m->n; i++)
		if (r->remote >= m->bufs[i].addr &&
		    r->remote + r->len <= m->bufs[i].addr + m->bufs[i].len) {
			b = &m->bufs[i];
			break;
		}
	if (b == NULL) {
		rc = -EFAULT;	/* not registered there (any more) */
	} else if (b->local) {
		uint8_t *p = b->local + (r->remote - b->addr);

		mc_segmem_peer_touch(b->pop, p, r->len);

		if (r->opcode == MC_XFER_WRITE && r->want_crc) {
			r->crc = mc_crc64_copy(0, p, r->local, r->len);
			r->has_crc = 1;
		} else if (r->opcode == MC_XFER_WRITE) {
			memcpy(p, r->local, r->len);
		} else if (r->want_crc) {
			r->crc = mc_crc64_copy(0, r->local, p, r->len);
			r->has_crc = 1;
		} else {
			memcpy(r->local, p, r->len);
		}
	} else if (m->pvm) {
		uint64_t done = 0;

		while (done < r->len && rc == 0) {
			struct iovec l = { (uint8_t *)r->local + done, r->len - done };
			struct iovec rv = { (void *)(uintptr_t)(r->remote + done), r->len - done };
			ssize_t n = r->opcode == MC_XFER_WRITE
					    ? process_vm_writev(m->pid, &l, 1, &rv, 1, 0)
					    : process_vm_readv(m->pid, &l, 1, &rv, 1, 0);

			if (n <= 0)
				rc = n < 0 ? -errno : -EIO;
			else
				done += (uint64_t)n;
		}
		if (rc == 0 && r->want_crc) {
			/* The kernel copied them: checksum our side while it is warm. */
			r->crc = mc_crc64(0, r->local, r->len);
			r->has_crc = 1;
		}
	} else {
		rc = -EXDEV;	/* private memory we may not reach: tcp */
	}
	pthread_rwlock_unlock(&m->lk);
	if (rc && rc != -EXDEV)
		mc_log_warn("transfer engine %s: shm: %s of %llu bytes at 0x%llx in %s failed: %s",
			    s->e->server_name, r->opcode == MC_XFER_WRITE ? "write" : "read",
			    (unsigned long long)r->len, (unsigned long long)r->remote, m->name,
			    strerror(-rc));
	return rc;
}

/* ---- the transport ---- */

static int mc_te_shm_install(struct mc_engine *e, void **state)
{
	const char *v = getenv("MC_TE_SHM"), *pvm = getenv("MC_TE_SHM_PVM");
	const char *th = getenv("MC_TE_IO_THREADS");
	struct mc_te_shm *s;
	uint8_t rnd[8];
	FILE *f;

	if (v && !strcmp(v, "0"))
		return -ENOTSUP;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->e = e;
	s->pvm_enabled = !(pvm && !strcmp(pvm, "0"));
	pthread_mutex_init(&s->mu, NULL);
	mc_shm_host_id(s->host_id, sizeof(s->host_id));
	memset(rnd, 0, sizeof(rnd));
	f = fopen("/dev/urandom", "re");
	if (f) {
		if (fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd))
			memset(rnd, 0, sizeof(rnd));
		fclose(f);
	}
	snprintf(s->sock_name, sizeof(s->sock_name), "mooncake_te_%d_%016llx", (int)getpid(),
		 (unsigned long long)mc_get_le64(rnd));
	s->pool = mc_te_pool_new(e, th ? (unsigned)atoi(th) : 2);
	s->rc = -ESHUTDOWN;
	if (s->pool)
		mc_shm_run(s, mc_shm_start_on_loop);
	if (s->pool == NULL || s->rc) {
		mc_log_warn("transfer engine: shm listener: %s", strerror(s->rc ? -s->rc : ENOMEM));
		mc_te_pool_free(s->pool);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return -EADDRNOTAVAIL;
	}
	*state = s;
	return 0;
}

static void mc_te_shm_uninstall(struct mc_engine *e, void *state)
{
	struct mc_te_shm *s = state;

	(void)e;
	mc_shm_run(s, mc_shm_stop_on_loop);
	mc_te_pool_free(s->pool);	/* nothing copies after this */
	while (s->maps) {
		struct mc_shm_map *m = s->maps;

		s->maps = m->next;
		mc_shm_detach(m);
		pthread_rwlock_destroy(&m->lk);
		free(m);
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static void mc_te_shm_describe(void *state, json_t *desc)
{
	struct mc_te_shm *s = state;

	json_object_set_new(desc, "shm_host_id", json_string(s->host_id));
	json_object_set_new(desc, "shm_uid", json_integer((json_int_t)getuid()));
	json_object_set_new(desc, "shm_socket", json_string(s->sock_name));
}

/* The peer is on this host, under our uid, with a socket to attach to. */
static int mc_te_shm_may_match(void *state, const struct mc_te_segment *seg)
{
	struct mc_te_shm *s = state;
	json_t *raw = seg->desc.raw;
	json_t *host = json_object_get(raw, "shm_host_id"), *uid = json_object_get(raw, "shm_uid");
	json_t *sock = json_object_get(raw, "shm_socket");

	return json_is_string(host) && !strcmp(json_string_value(host), s->host_id) &&
	       json_is_integer(uid) && json_integer_value(uid) == (json_int_t)getuid() &&
	       json_is_string(sock) && json_string_length(sock) > 0 &&
	       json_string_length(sock) < sizeof(((struct mc_shm_map *)0)->sock_name) &&
	       seg->desc.tcp_data_port;
}

static int mc_te_shm_match(void *state, struct mc_te_segment *seg)
{
	struct mc_te_shm *s = state;
	json_t *sock = json_object_get(seg->desc.raw, "shm_socket");
	struct mc_shm_map *m;
	int rc;

	if (!mc_te_shm_may_match(state, seg))
		return 0;
	pthread_mutex_lock(&s->mu);
	for (m = s->maps; m; m = m->next)
		if (!strcmp(m->name, seg->name))
			break;
	if (m == NULL && s->nmaps < MC_SHM_MAX_MAPS && (m = calloc(1, sizeof(*m))) != NULL) {
		snprintf(m->name, sizeof(m->name), "%s", seg->name);
		m->sock = -1;
		pthread_rwlock_init(&m->lk, NULL);
		m->next = s->maps;
		s->maps = m;
		s->nmaps++;
	}
	pthread_mutex_unlock(&s->mu);
	if (m == NULL)
		return 0;
	/* (Re-)attach: a reopened segment may be a restarted owner with a new socket.  An
	 * attachment to the same socket whose owner is alive and quiet is kept as it is, with
	 * its mappings and what the map-ahead thread mapped (two threads opening one segment at
	 * once, or a refresh, would otherwise throw that away). */
	pthread_rwlock_wrlock(&m->lk);
	if (m->sock >= 0 && !m->dead && !strcmp(m->sock_name, json_string_value(sock)) &&
	    mc_fdpass_state(m->sock) == MC_FDPASS_QUIET) {
		pthread_rwlock_unlock(&m->lk);
		seg->xport_ctx = m;
		return 1;
	}
	snprintf(m->sock_name, sizeof(m->sock_name), "%s", json_string_value(sock));
	rc = mc_shm_attach(s, m);
	if (rc)
		m->dead = 1;
	pthread_rwlock_unlock(&m->lk);
	if (rc) {
		mc_log_info("transfer engine %s: shm: segment %s not reachable (%s), using tcp",
			    s->e->server_name, seg->name, strerror(-rc));
		return 0;
	}
	seg->xport_ctx = m;
	return 1;
}

static int mc_te_shm_submit(void *state, struct mc_te_req *r)
{
	struct mc_te_shm *s = state;

	r->xport_priv[0] = s;
	return mc_te_pool_submit(s->pool, r, mc_shm_job);
}

/* Small copies are cheaper on the caller's thread than through the loop and a worker. */
static int mc_te_shm_run_now(void *state, struct mc_te_req *r)
{
	r->xport_priv[0] = state;
	return mc_shm_job(r);
}

static int mc_te_shm_register(void *state, void *addr, size_t len, const char *location)
{
	(void)addr;
	(void)len;
	(void)location;
	mc_shm_run(state, mc_shm_notify_on_loop);
	return 0;
}

static void mc_te_shm_unregister(void *state, void *addr)
{
	(void)addr;
	mc_shm_run(state, mc_shm_notify_on_loop);
}

const struct mc_te_transport_ops mc_te_shm_ops = {
	.name = "shm",
	.install = mc_te_shm_install,
	.uninstall = mc_te_shm_uninstall,
	.describe = mc_te_shm_describe,
	.match = mc_te_shm_match,
	.may_match = mc_te_shm_may_match,
	.submit = mc_te_shm_submit,
	.run_now = mc_te_shm_run_now,
	.register_mem = mc_te_shm_register,
	.unregister_mem = mc_te_shm_unregister,
};
