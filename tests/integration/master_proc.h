/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TESTS_MASTER_PROC_H
#define MC_TESTS_MASTER_PROC_H

/*
 * For C tests that run store handles in their own process against a real mooncake_master:
 * a free loopback port, starting and stopping the master ($MC_TOP_BUILDDIR/mooncake_master on
 * 127.0.0.1 with its admin HTTP on mp_http_port), and GET of a JSON document from that admin
 * port.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

static pid_t mp_master = -1;
static int mp_http_port = -1;

static int mp_free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* A connected socket to 127.0.0.1:port, or -1. */
static int mp_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* mooncake_master on 127.0.0.1:port (extra: one more flag, or NULL); 0 once it listens. */
static int mp_start_master(int port, const char *extra)
{
	const char *top = getenv("MC_TOP_BUILDDIR");
	char bin[1024], rpc[32], metrics[32];
	int i, fd;

	snprintf(bin, sizeof(bin), "%s/mooncake_master", top && *top ? top : ".");
	snprintf(rpc, sizeof(rpc), "--rpc_port=%d", port);
	mp_http_port = mp_free_port();
	snprintf(metrics, sizeof(metrics), "--metrics_port=%d", mp_http_port);
	mp_master = fork();
	if (mp_master == 0) {
		execl(bin, bin, "--rpc_address=127.0.0.1", rpc, metrics, extra, (char *)NULL);
		_exit(127);
	}
	for (i = 0; mp_master > 0 && i < 200; i++) {
		if ((fd = mp_connect(port)) >= 0) {
			close(fd);
			return 0;
		}
		usleep(50000);
	}
	return -1;
}

static void mp_stop_master(void)
{
	if (mp_master > 0) {
		kill(mp_master, SIGTERM);
		waitpid(mp_master, NULL, 0);
	}
	mp_master = -1;
}

/* GET path from the master's admin HTTP; the JSON body (the caller json_decref's it), or NULL
 * (not 200-and-JSON, or unreachable). */
static json_t *mp_admin_json(const char *path)
{
	static char buf[1 << 16];
	char req[512];
	char *body;
	size_t n = 0;
	ssize_t r;
	int fd = mp_connect(mp_http_port);
	json_t *j = NULL;

	snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	if (fd < 0)
		return NULL;
	if (write(fd, req, strlen(req)) == (ssize_t)strlen(req)) {
		while (n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
			n += (size_t)r;
		buf[n] = '\0';
		body = strstr(buf, "\r\n\r\n");
		if (n > 12 && !strncmp(buf, "HTTP/1.", 7) && !strncmp(buf + 8, " 200", 4) && body)
			j = json_loads(body + 4, 0, NULL);
	}
	close(fd);
	return j;
}

#endif
