/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Same-host data connections: a connection whose two ends have the same address (loopback, or
 * a peer on this host reached through one of its own addresses) crosses no network, so the
 * congestion control the system chose for networks (bbr, say, which paces every packet out
 * with timers: on loopback that alone cost the sender about 1.6 times reno's CPU per byte,
 * measured with 1 MiB sends) buys nothing there.  Such a connection is switched to
 * MC_TCP_LOCAL_CONGESTION, "reno" by default (built into every kernel and always allowed to
 * unprivileged processes); an empty value or "default" keeps the system's choice.  Connections
 * to other hosts are left alone.  Any thread may call it; the variable is read once.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transfer/tcp.h"

static char mc_tcp_local_cc[16];
static pthread_once_t mc_tcp_local_once = PTHREAD_ONCE_INIT;

static void mc_tcp_local_init(void)
{
	const char *v = getenv("MC_TCP_LOCAL_CONGESTION");

	if (v == NULL)
		v = "reno";
	if (strcmp(v, "default") == 0 || strlen(v) >= sizeof(mc_tcp_local_cc))
		v = "";
	memcpy(mc_tcp_local_cc, v, strlen(v) + 1);
}

/* Whether both ends of the connected socket fd have the same address. */
static int mc_tcp_same_host(int fd)
{
	struct sockaddr_storage a, b;
	socklen_t al = sizeof(a), bl = sizeof(b);

	if (getsockname(fd, (struct sockaddr *)&a, &al) != 0 ||
	    getpeername(fd, (struct sockaddr *)&b, &bl) != 0 || a.ss_family != b.ss_family)
		return 0;
	if (a.ss_family == AF_INET)
		return ((struct sockaddr_in *)&a)->sin_addr.s_addr ==
		       ((struct sockaddr_in *)&b)->sin_addr.s_addr;
	if (a.ss_family == AF_INET6)
		return memcmp(&((struct sockaddr_in6 *)&a)->sin6_addr,
			      &((struct sockaddr_in6 *)&b)->sin6_addr, sizeof(struct in6_addr)) == 0;
	return 0;
}

int mc_tcp_tune_local(int fd)
{
	pthread_once(&mc_tcp_local_once, mc_tcp_local_init);
	if (mc_tcp_local_cc[0] == '\0' || !mc_tcp_same_host(fd))
		return 0;
	/* Best effort: a kernel without it keeps the default, which works, only dearer. */
	return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, mc_tcp_local_cc,
			  (socklen_t)strlen(mc_tcp_local_cc)) == 0;
}
