/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_FDPASS_H
#define MC_FDPASS_H

/*
 * Handing memory between same-host processes: fixed-size messages with an optional file
 * descriptor attached (SCM_RIGHTS) over abstract Unix sockets, the peer's credentials, and
 * owner-death detection.  Used by the store's same-host path and the engine's shm transport.
 *
 * Abstract socket names are per network namespace, so only processes sharing the host's network
 * stack reach them; callers also require the peer's uid to be their own (SO_PEERCRED).
 */
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

/* Fill sa with the abstract address "\0<name>".  The address length, or 0 if name is empty
 * or too long. */
socklen_t mc_fdpass_addr(const char *name, struct sockaddr_un *sa);
/* Send one message of len bytes with fd attached (fd < 0: none).  0 or -errno. */
int mc_fdpass_send(int sock, const void *msg, size_t len, int fd);
/* Receive one message of exactly len bytes; *fd gets an attached descriptor (close-on-exec)
 * or -1.  0, -EPROTO for a short message, or -errno.  Extra descriptors are closed. */
int mc_fdpass_recv(int sock, void *msg, size_t len, int *fd);
/* The connected peer's uid and pid (pid 0 if in another pid namespace).  0 or -errno. */
int mc_fdpass_peer(int sock, uid_t *uid, pid_t *pid);
/* Connect to the abstract name with send/receive timeouts of timeout_ms; the peer must run
 * under our uid.  The socket or -errno (-EPERM for another uid). */
int mc_fdpass_connect(const char *name, unsigned timeout_ms, pid_t *pid);

enum mc_fdpass_state {
	MC_FDPASS_GONE = 0,	/* hung up or failed: the owner is gone */
	MC_FDPASS_QUIET = 1,	/* alive, nothing to read */
	MC_FDPASS_READABLE = 2,	/* alive with bytes pending (a change notice) */
};
/* Poll the connection without blocking. */
enum mc_fdpass_state mc_fdpass_state(int sock);

#endif
