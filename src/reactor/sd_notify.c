/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sd_notify datagrams (see sd_notify.h).  Stateless: each call opens a socket, sends and closes,
 * which is fine for the handful of state changes a daemon reports in its lifetime.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "reactor/sd_notify.h"

int mc_sd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len;
	socklen_t salen;
	int fd, ret = 1;

	if (path == NULL || path[0] == '\0')
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0)
		ret = -errno;
	close(fd);
	return ret;
}
