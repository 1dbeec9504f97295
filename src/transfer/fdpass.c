/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fixed-size messages with SCM_RIGHTS descriptors over abstract Unix sockets (fdpass.h).
 * Stateless helpers; any thread.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "transfer/fdpass.h"

socklen_t mc_fdpass_addr(const char *name, struct sockaddr_un *sa)
{
	size_t n = name ? strlen(name) : 0;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n == 0 || n > sizeof(sa->sun_path) - 1)
		return 0;
	memcpy(sa->sun_path + 1, name, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int mc_fdpass_send(int sock, const void *msg, size_t len, int fd)
{
	struct iovec iov = { (void *)(uintptr_t)msg, len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		CMSG_FIRSTHDR(&mh)->cmsg_level = SOL_SOCKET;
		CMSG_FIRSTHDR(&mh)->cmsg_type = SCM_RIGHTS;
		CMSG_FIRSTHDR(&mh)->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(CMSG_FIRSTHDR(&mh)), &fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EPROTO;
}

int mc_fdpass_recv(int sock, void *msg, size_t len, int *fd)
{
	struct iovec iov = { msg, len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c;
	ssize_t n;

	*fd = -1;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		size_t k, nfd;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < nfd; k++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = f;
			else
				close(f);	/* never more than one is sent */
		}
	}
	if ((size_t)n != len) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -EPROTO;
	}
	return 0;
}

int mc_fdpass_peer(int sock, uid_t *uid, pid_t *pid)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &cl))
		return -errno;
	*uid = cred.uid;
	if (pid)
		*pid = cred.pid;
	return 0;
}

int mc_fdpass_connect(const char *name, unsigned timeout_ms, pid_t *pid)
{
	struct sockaddr_un sa;
	socklen_t len = mc_fdpass_addr(name, &sa);
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	uid_t uid;
	int fd, rc;

	if (len == 0)
		return -EINVAL;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, len)) {
		rc = -errno;
		goto fail;
	}
	rc = mc_fdpass_peer(fd, &uid, pid);
	if (rc == 0 && uid != getuid())
		rc = -EPERM;
	if (rc)
		goto fail;
	return fd;
fail:
	close(fd);
	return rc;
}

enum mc_fdpass_state mc_fdpass_state(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	int n;

	if (sock < 0)
		return MC_FDPASS_GONE;
	do
		n = poll(&p, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return MC_FDPASS_QUIET;
	if (n < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
		return MC_FDPASS_GONE;
	return MC_FDPASS_READABLE;
}
