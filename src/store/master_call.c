/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How API threads call the master (mc_store_call, mc_store_call_async): on the direct lane
 * when it can take the call, else through the store's loop and its main connection
 * (master_client.c), whose rules, deadlines and state the lane shares (master_client_int.h).
 *
 * The direct lane.  Going through the loop costs a calling thread two thread hand-offs per call
 * (to the loop to send, back from the loop with the answer), each a wake-up of a sleeping
 * thread.  So while the main connection is up and healthy, an API thread sends its request on a
 * connection of its own to the master, a direct lane, and reads the answer itself.  There are
 * MC_DL_LANES lanes, each used by one thread at a time and connected when first needed (a
 * single thread keeps using the first; threads calling at once take one each, which lets one
 * process keep several batches in flight); further threads, and every call while API calls
 * queued on the loop are not finished, go through the loop as before, which keeps one thread's
 * calls in order.  The lane follows the main connection's
 * rules: the same frames, deadlines and req_ids; a call that waits for more than
 * MC_PING_TIMEOUT_MS with nothing back, neither on the lane nor on the main connection (whose
 * pings a live master answers), ends with MC_ERR_RPC_FAIL, one past its deadline with
 * MC_ERR_RPC_TIMEOUT; either, or a broken lane, aborts the lane with a reset and has the loop
 * abort the main connection too, so that the master is suspect exactly as when the call had
 * gone through the loop.  Losing the main connection shuts the lane down (waking a thread that
 * waits on it); the lane reconnects on the next call once the main connection is up again.  A
 * failed lane stops all of them until then.  MC_RPC_DIRECT=0 turns the lanes off.  Shared
 * fields are under mc->mu; a lane's socket is used only by the thread holding its mu.
 *
 * A lane call looks for its answer without sleeping for a short while (MC_DL_SPIN_NS) before it
 * sleeps, which saves a wake-up where the master answers fast, but only while it is the only
 * call on a lane, and only where the last answer to a request of its size on that lane came
 * within the spin (and on every MC_DL_RESPIN-th call, to notice a master that got faster), and
 * only in a process that may run on MC_DL_SPIN_CPUS cores or more (MC_RPC_SPIN=0/1 overrides):
 * with several threads calling at once, for a request the master takes longer than the spin to
 * answer (a batch of a hundred puts keeps it busy for fifty microseconds or more), or on a host
 * where the master, the data server and this process share few cores, the spinning only takes
 * the core they need.  On two cores, spinning cost a Python writer of batches of 128 small puts
 * 0.3-0.4 us per put and made its batches slower (0.17-0.23 ms against 0.14 ms), its
 * batch_is_exist too.
 */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/errcode.h"
#include "common/log.h"
#include "store/master_client_int.h"
#include "store/store.h"

/* ---------------------------------------------------------------- the direct lane */

#define MC_DL_SPIN_NS 40000	/* how long a lane call looks for its answer before sleeping */
#define MC_DL_RESPIN 64		/* every so many calls a lane spins whatever the last one took */
#define MC_DL_SPIN_CPUS 4	/* fewer cores for this process: lane calls never spin */

/* Wait for events on fd until limit_ms (monotonic; 0: no limit), for POLLIN spinning a while
 * first when spin is set.  1: ready (or an error to be read by the next call), 0: the limit
 * passed, -1: poll failed. */
static int mc_dl_wait(int fd, short events, int64_t limit_ms, int spin)
{
	if (events == POLLIN && spin) {
		/* A master on a fast network answers within tens of microseconds; sleeping at once
		 * adds a wake-up of an idle CPU (tens of microseconds more on a virtual machine).
		 * Look for the answer without sleeping for a short while first. */
		struct timespec t0, t;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			struct pollfd p = { .fd = fd, .events = events };

			if (poll(&p, 1, 0) > 0)
				return 1;
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) <
			 MC_DL_SPIN_NS);
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int64_t left = limit_ms ? limit_ms - mc_store_now_ms() : -1;
		int n;

		if (limit_ms && left <= 0)
			return 0;
		n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 1;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

int mc_dl_spin_allowed(void)
{
	const char *e = getenv("MC_RPC_SPIN");
	cpu_set_t set;

	if (e && (e[0] == '0' || e[0] == '1') && e[1] == '\0')
		return e[0] == '1';
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	return CPU_COUNT(&set) >= MC_DL_SPIN_CPUS;
}

static uint64_t mc_dl_now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* The size class of a request of len bytes: its bit length (requests of similar size take the
 * master similar time to answer). */
static unsigned mc_dl_size_class(size_t len)
{
	unsigned c = len ? 64u - (unsigned)__builtin_clzll((unsigned long long)len) : 0;

	return c < MC_DL_SIZE_CLASSES ? c : MC_DL_SIZE_CLASSES - 1;
}

/* A non-blocking socket connected to the master within the connect timeout, or -1. */
static int mc_dl_connect(struct mc_master_client *mc, const struct sockaddr_storage *ss,
			 socklen_t len)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1, err = 0;
	unsigned int uto = MC_PING_TIMEOUT_MS + 1000;
	socklen_t elen = sizeof(err);

	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)ss, len) != 0) {
		if (errno != EINPROGRESS ||
		    mc_dl_wait(fd, POLLOUT, mc_store_now_ms() + mc->connect_timeout_ms, 0) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
			close(fd);
			return -1;
		}
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
	if (mc->st->auth) {
		struct mc_auth_hs hs;

		if (mc_auth_hs_init(&hs, mc->st->auth, MC_AUTH_CLIENT) != 0 ||
		    mc_auth_hs_run(&hs, fd, (int)mc->connect_timeout_ms + MC_PING_TIMEOUT_MS) != 0) {
			mc_log_debug("master %s:%u: direct lane: authentication failed: %s", mc->host,
				     mc->port, hs.why ? hs.why : "?");
			close(fd);
			return -1;
		}
	}
	return fd;
}

/* On the loop: a lane call failed; abort the main connection it was paired with (if still the
 * current one), as a failed call on it would have. */
static void mc_dl_on_failed(void *arg)
{
	struct mc_store *st = arg;
	struct mc_master_client *mc = st->mc;	/* NULL once torn down */
	const char *why;
	int same;

	if (mc == NULL)
		return;
	pthread_mutex_lock(&mc->mu);
	same = mc->dl_failed_gen == mc->conn_gen;
	why = mc->dl_why;
	pthread_mutex_unlock(&mc->mu);
	if (same && mc->bev)
		mc_master_client_down(mc, why, 1);
}

/* Give the lane up after a failure: reset its connection (so that nothing of it arrives late),
 * keep calls off the lanes until the main connection is replaced, and with drop_main tell the
 * loop to drop that one too. */
static void mc_dl_fail(struct mc_master_client *mc, struct mc_dlane *l, uint64_t gen,
		       const char *why, int drop_main)
{
	struct linger lg = { 1, 0 };
	int tell;

	pthread_mutex_lock(&mc->mu);
	setsockopt(l->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(l->fd);
	l->fd = -1;
	tell = drop_main && !mc->closing && mc->dl_failed_gen != gen;
	mc->dl_failed_gen = gen;
	mc->dl_why = why;
	pthread_mutex_unlock(&mc->mu);
	if (tell)
		(void)mc_loop_thread_call(mc->st->lt, mc_dl_on_failed, mc->st);
}

/* When the master was last heard from: on this lane (last_rx) or on the main connection. */
static int64_t mc_dl_heard(struct mc_master_client *mc, int64_t last_rx)
{
	int64_t main_rx = __atomic_load_n(&mc->last_rx_ms, __ATOMIC_RELAXED);

	return main_rx > last_rx ? main_rx : last_rx;
}

/* Read the answer to req_id into call (spinning before a sleep when spin is set and this is the
 * only lane call).  0; MC_ERR_RPC_FAIL / MC_ERR_RPC_TIMEOUT with *why; or MC_DL_REFUSED: the
 * master closed the lane before a byte of the answer. */
static int mc_dl_read(struct mc_master_client *mc, int fd, struct mc_rpc_call *call, int spin,
		      const char **why)
{
	uint8_t buf[4096];
	size_t got = 0, want = MC_RPC_HDR_LEN;
	struct mc_rpc_hdr h;
	int64_t last_rx = mc_store_now_ms();
	uint8_t *dst = buf;
	size_t cap = sizeof(buf);

	memset(&h, 0, sizeof(h));
	while (got < want) {
		ssize_t n = recv(fd, dst + got, cap - got, MSG_DONTWAIT);

		if (n > 0) {
			got += (size_t)n;
			last_rx = mc_store_now_ms();
			if (dst == buf && got >= MC_RPC_HDR_LEN && want == MC_RPC_HDR_LEN) {
				if (mc_rpc_hdr_decode(buf, &h, 1u << 30) || h.kind != MC_RPC_RESPONSE ||
				    h.req_id != call->req_id) {
					*why = "malformed response from master";
					return MC_ERR_RPC_FAIL;
				}
				want = MC_RPC_HDR_LEN + h.body_len;
				call->resp = malloc(h.body_len ? h.body_len : 1);
				if (call->resp == NULL) {
					*why = "out of memory";
					return MC_ERR_RPC_FAIL;
				}
				if (want > sizeof(buf)) {
					/* A large answer: the rest goes straight into the body. */
					memcpy(call->resp, buf + MC_RPC_HDR_LEN, got - MC_RPC_HDR_LEN);
					dst = call->resp;
					got -= MC_RPC_HDR_LEN;
					want = h.body_len;
					cap = h.body_len;
				}
			}
			if (got > want) {
				*why = "malformed response from master";
				return MC_ERR_RPC_FAIL;
			}
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			if (got == 0 && dst == buf && (n == 0 || errno == ECONNRESET))
				return MC_DL_REFUSED;
			*why = n == 0 ? "connection closed" : "connection broken";
			return MC_ERR_RPC_FAIL;
		}
		if (n < 0 && errno == EINTR)
			continue;
		{
			/* Nothing back for MC_PING_TIMEOUT_MS, here or on the main connection (whose
			 * pings a master answers while this call waits, e.g. for its load after a
			 * restart): the master is gone or stuck. */
			int64_t heard = mc_dl_heard(mc, last_rx);
			int64_t limit = heard + MC_PING_TIMEOUT_MS;
			int timeout = call->deadline_ms && call->deadline_ms < limit;
			int r = mc_dl_wait(fd, POLLIN, timeout ? call->deadline_ms : limit,
					   spin && __atomic_load_n(&mc->dl_busy,
								   __ATOMIC_RELAXED) <= 1);

			spin = 0;	/* once: a partial answer is on its way already */

			if (r == 0 && !timeout && mc_dl_heard(mc, last_rx) > heard)
				continue;	/* the master answered pings meanwhile */
			if (r == 0) {
				*why = timeout ? "a request timed out" : "no answer for 2 s";
				return timeout ? MC_ERR_RPC_TIMEOUT : MC_ERR_RPC_FAIL;
			}
			if (r < 0) {
				*why = "connection broken";
				return MC_ERR_RPC_FAIL;
			}
		}
	}
	if (dst == buf)
		memcpy(call->resp, buf + MC_RPC_HDR_LEN, h.body_len);
	call->resp_len = h.body_len;
	call->status = h.status;
	return 0;
}

/* A new lane of a tenant's store: SetTenant first, and its answer read (0), as on the main
 * connection; -1 when it fails (the lane is not used then). */
static int mc_dl_hello(struct mc_master_client *mc, int fd)
{
	struct mc_rpc_call call;
	const char *why = NULL;
	size_t off = 0;
	int rc = 0;

	if (mc_master_tenant_frame(mc, &call))
		return 0;
	call.deadline_ms = mc_store_now_ms() + mc->connect_timeout_ms;
	while (rc == 0 && off < call.req.len) {
		ssize_t n = send(fd, call.req.data + off, call.req.len - off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			rc = mc_dl_wait(fd, POLLOUT, call.deadline_ms, 0) == 1 ? 0 : -1;
		else
			rc = -1;
	}
	if (rc == 0 && (mc_dl_read(mc, fd, &call, mc->dl_spin, &why) != 0 || call.status != 0))
		rc = -1;
	free(call.resp);
	call.resp = NULL;
	mc_rpc_call_fini(&call);
	return rc;
}

/* The ends of a lane call that did not get its answer, both letting the lane go: failed (the
 * call ended, call->status says how; the lane and the main connection are dropped) returns 0;
 * refused returns 1: the master closed the lane before it read the request (it refuses
 * connections beyond max_connections, or closed the lane as idle just now), or the master is
 * going away and its main connection ends too: either way nothing ran, and the loop's
 * connection is the one to judge the master by.  The call goes there; the lane rests a while. */
static int mc_dl_failed(struct mc_master_client *mc, struct mc_dlane *l, uint64_t gen,
			const char *why)
{
	mc_log_debug("master %s:%u direct call failed: %s", mc->host, mc->port, why);
	mc_dl_fail(mc, l, gen, why, 1);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

static int mc_dl_refused(struct mc_master_client *mc, struct mc_dlane *l,
			 struct mc_rpc_call *call)
{
	mc_log_debug("master %s:%u closed the direct connection; calls go through the loop",
		     mc->host, mc->port);
	pthread_mutex_lock(&mc->mu);
	close(l->fd);
	l->fd = -1;
	l->retry_ms = mc_store_now_ms() + MC_DL_REFUSED_BACKOFF_MS;
	pthread_mutex_unlock(&mc->mu);
	free(call->resp);
	call->resp = NULL;
	pthread_mutex_unlock(&l->mu);
	return 1;
}

/* Send call on the first lane no other call holds.  1: no lane takes it (use the loop); 0 with
 * f->lane set: sent, that lane held until mc_dl_recv; 0 with f->lane NULL: the call ended
 * (call->status says how). */
static int mc_dl_send(struct mc_master_client *mc, struct mc_rpc_call *call,
		      struct mc_store_pending *f)
{
	struct sockaddr_storage ss;
	socklen_t len;
	uint64_t gen;
	struct mc_dlane *l;
	uint32_t dl = 0;
	int64_t now;
	const char *why = NULL;
	size_t off = 0;
	int fd, rc, k;

	if (!mc->dl_enabled || call->req.err ||
	    __atomic_load_n(&mc->user_queued, __ATOMIC_ACQUIRE) != 0)
		return 1;
	/* The first lane no other thread holds: one thread uses one connection, several threads
	 * calling at once get one each, up to MC_DL_LANES. */
	for (k = 0; k < MC_DL_LANES; k++)
		if (pthread_mutex_trylock(&mc->dl[k].mu) == 0)
			break;
	if (k == MC_DL_LANES)
		return 1;
	l = &mc->dl[k];
	now = mc_store_now_ms();
	pthread_mutex_lock(&mc->mu);
	gen = mc->conn_gen;
	if (!mc->up || mc->closing || mc->dl_failed_gen == gen || mc->addrlen == 0 ||
	    (l->fd < 0 && now < l->retry_ms)) {
		pthread_mutex_unlock(&mc->mu);
		goto not_taken;
	}
	if (l->fd >= 0 && l->gen != gen) {	/* shut down with its main connection */
		close(l->fd);
		l->fd = -1;
	}
	fd = l->fd;
	ss = mc->addr;
	len = mc->addrlen;
	if (mc->clock_known && call->deadline_ms)
		dl = mc_rpc_deadline_encode(mc_master_wall_ms() + mc->clock_offset_ms +
					    (call->deadline_ms - now));
	pthread_mutex_unlock(&mc->mu);
	if (fd >= 0 && now - l->used_ms > MC_PING_INTERVAL_MS) {
		/* Idle for a while: the master may have closed it (rpc_conn_timeout_seconds). */
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, 0) != 0) {
			pthread_mutex_lock(&mc->mu);
			close(l->fd);
			l->fd = fd = -1;
			pthread_mutex_unlock(&mc->mu);
		}
	}
	if (fd < 0) {
		fd = mc_dl_connect(mc, &ss, len);
		if (fd >= 0 && mc_dl_hello(mc, fd) != 0) {
			close(fd);
			fd = -1;
		}
		pthread_mutex_lock(&mc->mu);
		if (fd < 0)
			l->retry_ms = mc_store_now_ms() + MC_PING_INTERVAL_MS;
		else if (mc->conn_gen != gen || mc->closing)
			close(fd), fd = -1;	/* the main connection went meanwhile */
		l->fd = fd;
		l->gen = gen;
		pthread_mutex_unlock(&mc->mu);
		if (fd < 0)
			goto not_taken;
	}
	call->req_id = __atomic_add_fetch(&mc->next_req_id, 1, __ATOMIC_RELAXED);
	call->sent_ms = now;
	mc_put_le32(call->req.data + 12, dl);
	mc_put_le64(call->req.data + 16, call->req_id);
	mc_rpc_frame_end(&call->req, 0);
	while (off < call->req.len) {
		ssize_t n = send(fd, call->req.data + off, call->req.len - off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			off += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			rc = mc_dl_wait(fd, POLLOUT, call->deadline_ms, 0);
			if (rc == 0) {
				why = "a request timed out";
				call->status = MC_ERR_RPC_TIMEOUT;
				return mc_dl_failed(mc, l, gen, why);
			}
			if (rc < 0)
				break;
		} else {
			break;
		}
	}
	if (off < call->req.len) {
		if (errno == EPIPE || errno == ECONNRESET)
			return mc_dl_refused(mc, l, call);
		why = "connection broken";
		call->status = MC_ERR_RPC_FAIL;
		return mc_dl_failed(mc, l, gen, why);
	}
	f->lane = l;
	f->gen = gen;
	f->fd = fd;
	return 0;

not_taken:
	pthread_mutex_unlock(&l->mu);
	return 1;
}

/* Read the answer to the call mc_dl_send sent on f's lane, and let the lane go.  0: the call
 * ended and call->status says how; 1: nothing ran, the call goes through the loop. */
static int mc_dl_recv(struct mc_master_client *mc, struct mc_rpc_call *call,
		      struct mc_store_pending *f)
{
	struct mc_dlane *l = f->lane;
	uint64_t gen = f->gen, t0, waited;
	const char *why = NULL;
	unsigned cls;
	int fd = f->fd, rc, spin;

	f->lane = NULL;
	__atomic_add_fetch(&mc->dl_busy, 1, __ATOMIC_RELAXED);
	cls = mc_dl_size_class(call->req.len);
	spin = mc->dl_spin &&
	       (l->wait_us[cls] < MC_DL_SPIN_NS / 1000 || ++l->calls % MC_DL_RESPIN == 0);
	t0 = mc_dl_now_us();
	rc = mc_dl_read(mc, fd, call, spin, &why);
	waited = mc_dl_now_us() - t0;
	l->wait_us[cls] = waited > UINT32_MAX ? UINT32_MAX : (uint32_t)waited;
	__atomic_sub_fetch(&mc->dl_busy, 1, __ATOMIC_RELAXED);
	if (rc == MC_DL_REFUSED)
		return mc_dl_refused(mc, l, call);
	if (rc == 0 && call->status == MC_ERR_UNAVAILABLE_IN_CURRENT_MODE) {
		/* A standby: nothing ran.  No lane is used on this connection any more; the call
		 * goes through the main connection, whose refusal makes the loop drain it and
		 * follow the leader (dropping it from here would fail what is in flight on it). */
		free(call->resp);
		call->resp = NULL;
		call->status = 0;
		mc_dl_fail(mc, l, gen, "the master is a standby", 0);
		pthread_mutex_unlock(&l->mu);
		return 1;
	}
	if (rc) {
		free(call->resp);
		call->resp = NULL;
		call->status = rc;
		return mc_dl_failed(mc, l, gen, why);
	}
	l->used_ms = mc_store_now_ms();
	pthread_mutex_unlock(&l->mu);
	return 0;

}

/* Run call on a lane.  1: no lane is available (use the loop); 0: the call ran and
 * call->status says how it ended. */
static int mc_dl_call(struct mc_master_client *mc, struct mc_rpc_call *call)
{
	struct mc_store_pending f = { 0 };
	int rc = mc_dl_send(mc, call, &f);

	if (rc || f.lane == NULL)
		return rc;
	return mc_dl_recv(mc, call, &f);
}

/* ---------------------------------------------------------------- calls from API threads */

static void mc_store_call_on_loop(void *arg)
{
	struct mc_rpc_call *call = arg;

	mc_master_client_submit(call->on_done_arg, call);
}

static void mc_store_call_prep(struct mc_store *st, struct mc_rpc_call *call)
{
	int64_t now = mc_store_now_ms();

	mc_store_mark_active(st, now);
	call->on_done = NULL;
	call->deadline_ms = st->rpc_timeout_ms > 0 ? now + st->rpc_timeout_ms : 0;
}

/* Run a prepared call (on a lane when lanes is set and one takes it, else through the loop)
 * and wait for it; then as mc_store_call. */
static int mc_store_call_run(struct mc_store *st, struct mc_rpc_call *call, int lanes)
{
	struct mc_master_client *mc = st->mc;
	int rc;

	if (mc == NULL)
		return MC_ERR_RPC_FAIL;
	if (lanes && mc_dl_call(mc, call) == 0)
		goto done;
	/* on_done_arg carries the master client to the loop; on_done stays NULL (waiter). */
	call->on_done_arg = mc;
	mc_waiter_init(&call->w);
	__atomic_add_fetch(&mc->user_queued, 1, __ATOMIC_ACQ_REL);
	rc = mc_loop_thread_call(st->lt, mc_store_call_on_loop, call);
	if (rc) {
		__atomic_sub_fetch(&mc->user_queued, 1, __ATOMIC_RELEASE);
		mc_waiter_fini(&call->w);
		return MC_ERR_RPC_FAIL;
	}
	mc_waiter_wait(&call->w);
	mc_waiter_fini(&call->w);
done:
	if (call->status == MC_ERR_RPC_FAIL || call->status == MC_ERR_RPC_TIMEOUT)
		return call->status;
	return 0;
}

static int mc_store_call_via(struct mc_store *st, struct mc_rpc_call *call, int lanes)
{
	mc_store_call_prep(st, call);
	return mc_store_call_run(st, call, lanes);
}

int mc_store_lanes_on(struct mc_store *st)
{
	return st->mc != NULL && st->mc->dl_enabled;
}

void mc_store_call_begin(struct mc_store *st, struct mc_rpc_call *call,
			 struct mc_store_pending *p)
{
	memset(p, 0, sizeof(*p));
	p->state = MC_PENDING_UNSENT;
	mc_store_call_prep(st, call);
	if (st->mc && mc_dl_send(st->mc, call, p) == 0)
		p->state = p->lane ? MC_PENDING_SENT : MC_PENDING_DONE;
}

int mc_store_call_end(struct mc_store *st, struct mc_rpc_call *call, struct mc_store_pending *p)
{
	int state = p->state;

	p->state = MC_PENDING_DONE;
	switch (state) {
	case MC_PENDING_SENT:
		if (mc_dl_recv(st->mc, call, p) == 0)
			break;
		return mc_store_call_run(st, call, 0);	/* refused: nothing ran */
	case MC_PENDING_UNSENT:
		return mc_store_call_run(st, call, 1);
	default:
		break;
	}
	if (call->status == MC_ERR_RPC_FAIL || call->status == MC_ERR_RPC_TIMEOUT)
		return call->status;
	return 0;
}

int mc_store_call(struct mc_store *st, struct mc_rpc_call *call)
{
	return mc_store_call_via(st, call, 1);
}

int mc_store_call_loop(struct mc_store *st, struct mc_rpc_call *call)
{
	return mc_store_call_via(st, call, 0);
}

/* Fire-and-forget calls: the answer is dropped and the call freed on the loop. */
static void mc_async_free(struct mc_rpc_call *call)
{
	mc_rpc_call_fini(call);
	free(call);
}

static void mc_async_on_done(struct mc_rpc_call *call, void *arg)
{
	struct mc_master_client *mc = arg;

	__atomic_sub_fetch(&mc->user_queued, 1, __ATOMIC_RELEASE);
	mc_async_free(call);
}

static void mc_async_on_loop(void *arg)
{
	struct mc_rpc_call *call = arg;
	struct mc_master_client *mc = call->on_done_arg;

	call->on_done = mc_async_on_done;
	mc_master_client_submit(mc, call);
}

struct mc_rpc_call *mc_rpc_call_new(uint16_t opcode)
{
	struct mc_rpc_call *call = malloc(sizeof(*call));

	if (call)
		mc_rpc_call_init(call, opcode);
	return call;
}

void mc_store_call_async(struct mc_store *st, struct mc_rpc_call *call)
{
	struct mc_master_client *mc = st->mc;

	call->deadline_ms = st->rpc_timeout_ms > 0 ? mc_store_now_ms() + st->rpc_timeout_ms : 0;
	call->on_done_arg = mc;
	if (mc == NULL) {
		mc_async_free(call);
		return;
	}
	__atomic_add_fetch(&mc->user_queued, 1, __ATOMIC_ACQ_REL);
	if (mc_loop_thread_call(st->lt, mc_async_on_loop, call) != 0) {
		__atomic_sub_fetch(&mc->user_queued, 1, __ATOMIC_RELEASE);
		mc_async_free(call);
	}
}
