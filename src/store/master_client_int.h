/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_STORE_MASTER_CLIENT_INT_H
#define MC_STORE_MASTER_CLIENT_INT_H
/*
 * The store's master connection, shared by the two files that make it: master_client.c (the
 * main connection on the store's loop) and master_call.c (API threads' calls, and the direct
 * lane).  Not for other modules: they use store.h.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>

#include "store/store.h"

#define MC_PING_INTERVAL_MS 1000
#define MC_PING_TIMEOUT_MS 2000
#define MC_BACKOFF_MIN_MS 100
#define MC_BACKOFF_MAX_MS 500
#define MC_DL_REFUSED 1			/* the master closed the lane unasked */
#define MC_DL_REFUSED_BACKOFF_MS 5000
#define MC_DL_LANES 4			/* direct lanes: API threads calling at once */
#define MC_STANDBY_DRAIN_MS 500	/* a standby's answers to the calls in flight: wait this long */
#define MC_HA_SWITCH_WAIT_MS 10000	/* calls without a deadline wait this long for a leader */

enum mc_mc_state {
	MC_MC_DOWN,		/* not connected; a reconnect is scheduled */
	MC_MC_CONNECTING,
	MC_MC_AUTHENTICATING,	/* connected, proving the cluster secret (nothing sent yet) */
	MC_MC_PROBING,		/* connected, its first ping not answered yet */
	MC_MC_UP,
};

/* A direct lane to the master (master_call.c).  fd and gen change under the client's mu (the
 * loop shuts fd down from there); the rest belongs to the thread holding mu here. */
#define MC_DL_SIZE_CLASSES 32

struct mc_dlane {
	pthread_mutex_t mu;		/* held by the thread using the lane */
	int fd;				/* the lane's socket (-1: none) */
	uint64_t gen;			/* conn_gen when fd was connected */
	int64_t retry_ms;		/* no connect before then (a connect failed, or refused) */
	int64_t used_ms;		/* the lane's last answer */
	/* How long the last answer to a request of each size class (by the bit length of the
	 * request's size) took to arrive, in microseconds: a call spins for its answer only
	 * where the last one of its class came within the spin (master_call.c). */
	uint32_t wait_us[MC_DL_SIZE_CLASSES];
	uint32_t calls;			/* calls on the lane (every MC_DL_RESPIN-th one spins) */
};

struct mc_master_client {
	struct mc_store *st;
	struct event_base *base;
	char host[256];
	uint16_t port;
	enum mc_mc_state state;
	int suspect;			/* a connection was lost and none answered since */
	struct bufferevent *bev;
	struct mc_auth_op *auth_op;	/* the handshake on bev's socket while AUTHENTICATING */
	struct mc_auth_hs *hs;		/* ... or, with TLS, inside TLS over bev */
	struct mc_rpc_call *pending;	/* sent or waiting to be sent, any order */
	uint64_t next_req_id;
	struct event *ev_tick;		/* ping, timeouts */
	struct event *ev_reconnect;
	int64_t backoff_ms;
	int64_t connect_started_ms;
	int64_t connect_timeout_ms;
	int ping_inflight;
	int remount_inflight;
	int ping_ok;
	int64_t last_ping_ms;		/* when the last ping was sent (monotonic) */
	int64_t ping_sent_wall_ms;
	int64_t last_rx_ms;		/* when the last answer arrived */
	int clock_known;
	int64_t clock_offset_ms;	/* master wall clock - ours */
	int ping_figures;		/* the master takes population figures on Ping */
	struct mc_rpc_call ping_call, remount_call;
	/* Shared with API threads, under mu (written by the loop only, except the dl_ fields):
	 * clock_known and clock_offset_ms above, and these. */
	pthread_mutex_t mu;
	int up;				/* state UP and not suspect */
	int closing;
	uint64_t conn_gen;		/* bumped each time the main connection is lost */
	struct sockaddr_storage addr;	/* the master's resolved address (addrlen 0: none yet) */
	socklen_t addrlen;
	int dl_enabled;
	uint64_t dl_failed_gen;		/* a lane call failed while conn_gen was this (+1: none) */
	const char *dl_why;		/* why, for the loop's log line */
	struct mc_dlane dl[MC_DL_LANES];
	int dl_busy;			/* lane calls waiting for their answers (atomic) */
	int dl_spin;			/* lane calls may spin: cores enough (mc_dl_spin_allowed) */
	int user_queued;		/* API calls on the loop not completed yet (atomic) */
	/* HA: the locator (NULL: host and port are the master's), a lookup in flight, and for a
	 * plain address the leader a standby named (redirect), which replaces host:port until it
	 * fails. */
	struct mc_master_locate *loc;
	int locating;
	char conf_host[256];
	uint16_t conf_port;
	int redirected;
	int following;			/* mc_master_client_standby is redirecting (its own drop) */
	/* A standby refused a call: the connection stays until every call sent on it is answered
	 * (a standby executes none, so each refused one may go again), or MC_STANDBY_DRAIN_MS; new
	 * calls wait meanwhile. */
	int standby_wait;
	int64_t standby_since_ms;
	char standby_leader[300];
};

/* Whether this process has cores enough for a lane call to spin for its answer (master_call.c). */
int mc_dl_spin_allowed(void);
/* The master's wall clock as we read ours (ms since the epoch); add clock_offset_ms. */
int64_t mc_master_wall_ms(void);
/* Drop the main connection (loop thread): abort resets it so that queued requests are
 * discarded; every pending call ends with MC_ERR_RPC_FAIL and a reconnect is scheduled. */
void mc_master_client_down(struct mc_master_client *mc, const char *why, int abort);
/* Queue call on the main connection (loop thread); it completes through call->on_done, or
 * the waiter when on_done is NULL. */
void mc_master_client_submit(struct mc_master_client *mc, struct mc_rpc_call *call);
/* The SetTenant frame a tenant's store sends first on each connection, in call (then 0), or
 * 1 when the store has no tenant (call untouched). */
int mc_master_tenant_frame(struct mc_master_client *mc, struct mc_rpc_call *call);

#endif
