/* SPDX-License-Identifier: Apache-2.0 */
/*
 * glog's logging flags for our daemons (see log_opts.h): where lines go (a file under
 * --log_dir, stderr, both), which levels (--minloglevel, --stderrthreshold, --vmodule), the
 * file's mode and size bound, and the line prefix.
 *
 * The sink is called from any thread; the file and its rotation are under one mutex.  It is
 * set up once at start-up and lives until the process ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "reactor/log_opts.h"

struct mc_log_route {
	pthread_mutex_t mu;
	FILE *file;			/* NULL: stderr only */
	char path[4096];
	int mode;
	uint64_t max_bytes;
	int stderr_min;			/* our level number: lines at or below it (more severe)
					   also go to stderr; -1: none */
	int prefix;
	int color;
};

static struct mc_log_route mc_log_route = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* glog's severities 0 INFO, 1 WARNING, 2 ERROR, 3 FATAL as our level numbers. */
static int mc_glog_level(int64_t sev)
{
	return sev <= 0 ? MC_LOG_INFO : sev == 1 ? MC_LOG_WARN : MC_LOG_ERR;
}

static void mc_log_route_line(FILE *f, int level, const char *line, int prefix, int color)
{
	const char *on = "", *off = "";

	if (color && level <= MC_LOG_WARN) {
		on = level <= MC_LOG_ERR ? "\033[31m" : "\033[33m";
		off = "\033[0m";
	}
	if (prefix) {
		fputs(on, f);
		mc_log_write_line(f, level, line);
		if (*off)
			fputs(off, f);
	} else {
		fprintf(f, "%s%s%s\n", on, line, off);
	}
}

/* Past max_log_size: the file becomes <path>.1 (replacing an older one) and a new one starts. */
static void mc_log_route_rotate(struct mc_log_route *r)
{
	char old[4200];
	FILE *f;
	int fd;

	snprintf(old, sizeof(old), "%s.1", r->path);
	if (rename(r->path, old) != 0)
		return;
	fd = open(r->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, r->mode);
	f = fd >= 0 ? fdopen(fd, "a") : NULL;
	if (f == NULL) {
		if (fd >= 0)
			close(fd);
		return;		/* keep writing to the renamed file rather than lose lines */
	}
	fclose(r->file);
	r->file = f;
}

static void mc_log_route_sink(void *arg, int level, const char *line)
{
	struct mc_log_route *r = arg;

	if (r->file == NULL) {
		mc_log_route_line(stderr, level, line, r->prefix, r->color);
		return;
	}
	pthread_mutex_lock(&r->mu);
	mc_log_route_line(r->file, level, line, r->prefix, 0);
	fflush(r->file);
	if (r->max_bytes && (uint64_t)ftell(r->file) > r->max_bytes)
		mc_log_route_rotate(r);
	pthread_mutex_unlock(&r->mu);
	if (level <= r->stderr_min)
		mc_log_route_line(stderr, level, line, r->prefix, r->color);
}

/* The highest level any "module=N" entry of --vmodule asks for (0: none), or -1 when the
 * value is not a comma list of module=N. */
static int mc_vmodule_max(const char *s)
{
	int max = 0;

	while (*s) {
		const char *eq = strchr(s, '='), *comma = strchr(s, ',');
		char *end;
		long v;

		if (eq == NULL || eq == s || (comma && comma < eq))
			return -1;
		v = strtol(eq + 1, &end, 10);
		if (end == eq + 1 || (*end && *end != ',') || v < 0)
			return -1;
		if (v > max)
			max = (int)v;
		s = *end ? end + 1 : end;
	}
	return max;
}

int mc_log_opts_check(const struct mc_log_opts *o, char *err, size_t n)
{
	if (o->log_dir[0] && access(o->log_dir, W_OK | X_OK)) {
		snprintf(err, n, "invalid value '%s' for --log_dir: %s", o->log_dir,
			 strerror(errno));
		return -1;
	}
	if (mc_vmodule_max(o->vmodule) < 0) {
		snprintf(err, n, "invalid value '%s' for --vmodule (expected module=N,...)",
			 o->vmodule);
		return -1;
	}
	return 0;
}

int mc_log_opts_apply(const struct mc_log_opts *o, const char *ident, int level)
{
	struct mc_log_route *r = &mc_log_route;
	int floor = mc_glog_level(o->minloglevel);

	if (mc_vmodule_max(o->vmodule) > 0)
		level = MC_LOG_DEBUG;
	/* --minloglevel=1 drops INFO; NOTICE lines (start, stop) go with INFO. */
	if (o->minloglevel >= 1 && level > floor)
		level = floor;
	mc_log_set_level(level);
	r->prefix = o->log_prefix;
	r->color = o->colorlogtostderr && isatty(STDERR_FILENO);
	if (o->log_dir[0] && !o->logtostderr) {
		int fd;

		snprintf(r->path, sizeof(r->path), "%s/%s.log", o->log_dir, ident);
		r->mode = (int)o->logfile_mode;
		r->max_bytes = (uint64_t)o->max_log_size << 20;
		fd = open(r->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, r->mode);
		r->file = fd >= 0 ? fdopen(fd, "a") : NULL;
		if (r->file == NULL) {
			int e = errno;

			if (fd >= 0)
				close(fd);
			fprintf(stderr, "%s: cannot open %s: %s\n", ident, r->path, strerror(e));
			return -e;
		}
		r->stderr_min = o->alsologtostderr	   ? MC_LOG_DEBUG
				: o->stderrthreshold >= 3 ? -1	/* FATAL: we have none */
							  : mc_glog_level(o->stderrthreshold);
		mc_log_set_sink(mc_log_route_sink, r);
	} else if (o->logtostderr || o->alsologtostderr || !o->log_prefix || r->color) {
		r->stderr_min = -1;
		mc_log_set_sink(mc_log_route_sink, r);
	}
	return 0;
}
