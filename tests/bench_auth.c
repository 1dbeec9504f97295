/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_auth: the CPU time of one cluster-secret handshake (src/common/auth.h), both sides
 * together, run COUNT times (default 20000) over a socketpair by two threads; getrusage gives
 * the process's user+sys time, so the figure includes the socket calls.  A store connection
 * pays it once; multiplied by the connections a workload opens and divided by its keys, it is
 * what the secret costs per key.
 * Usage: bench_auth SECRET_FILE [COUNT]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/auth.h"

struct bench_side {
	struct mc_auth *a;
	int fd, role, n, rc;
};

static void *bench_run(void *arg)
{
	struct bench_side *s = arg;
	int i;

	for (i = 0; i < s->n && s->rc == 0; i++) {
		struct mc_auth_hs hs;

		s->rc = mc_auth_hs_init(&hs, s->a, s->role);
		if (s->rc == 0)
			s->rc = mc_auth_hs_run(&hs, s->fd, 5000);
	}
	return NULL;
}

static double bench_cpu(void)
{
	struct rusage r;

	getrusage(RUSAGE_SELF, &r);
	return (double)r.ru_utime.tv_sec + (double)r.ru_stime.tv_sec +
	       ((double)r.ru_utime.tv_usec + (double)r.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv)
{
	struct bench_side cli = { 0 }, srv = { 0 };
	char err[512];
	pthread_t t;
	int fds[2], n = argc > 2 ? atoi(argv[2]) : 20000;
	double c0;

	if (argc < 2 || n < 1) {
		fprintf(stderr, "usage: bench_auth SECRET_FILE [COUNT]\n");
		return 2;
	}
	if (mc_auth_load(argv[1], &cli.a, err, sizeof(err)) != 0 || cli.a == NULL) {
		fprintf(stderr, "bench_auth: %s\n", cli.a ? err : "no secret");
		return 1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
		perror("bench_auth: socketpair");
		return 1;
	}
	srv = (struct bench_side){ cli.a, fds[1], MC_AUTH_SERVER, n, 0 };
	cli.fd = fds[0];
	cli.role = MC_AUTH_CLIENT;
	cli.n = n;
	c0 = bench_cpu();
	if (pthread_create(&t, NULL, bench_run, &srv) != 0) {
		fprintf(stderr, "bench_auth: no thread\n");
		return 1;
	}
	bench_run(&cli);
	if (cli.rc)
		shutdown(fds[0], SHUT_RDWR);	/* the server side stops too */
	pthread_join(t, NULL);
	if (cli.rc || srv.rc) {
		fprintf(stderr, "bench_auth: a handshake failed: %d %d\n", cli.rc, srv.rc);
		return 1;
	}
	printf("%d handshakes: %.2f us of CPU each, both sides\n", n, (bench_cpu() - c0) * 1e6 / n);
	close(fds[0]);
	close(fds[1]);
	mc_auth_unref(cli.a);
	return 0;
}
