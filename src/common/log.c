/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process-wide log routing.  The level and sink are plain atomics/pointers set at start-up by the
 * program; any thread may log.  Lines are formatted into a stack buffer (long lines are cut), so
 * logging never allocates and is safe on out-of-memory paths.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <syslog.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/log.h"

static mc_log_sink_fn mc_log_sink = mc_log_stderr_sink;
static void *mc_log_sink_arg;
static volatile int mc_log_level = MC_LOG_WARN;
static char mc_log_ident[64] = "mooncake";

void mc_log_set_sink(mc_log_sink_fn fn, void *arg)
{
	mc_log_sink = fn;
	mc_log_sink_arg = arg;
}

void mc_log_set_level(int level)
{
	if (level < MC_LOG_ERR)
		level = MC_LOG_ERR;
	if (level > MC_LOG_DEBUG)
		level = MC_LOG_DEBUG;
	mc_log_level = level;
}

int mc_log_set_level_name(const char *name)
{
	static const struct {
		const char *name;
		int level;
	} levels[] = { { "debug", MC_LOG_DEBUG }, { "info", MC_LOG_INFO },
		       { "warning", MC_LOG_WARN }, { "warn", MC_LOG_WARN },
		       { "error", MC_LOG_ERR } };
	size_t i;

	for (i = 0; name && i < sizeof(levels) / sizeof(levels[0]); i++)
		if (!strcasecmp(name, levels[i].name)) {
			mc_log_set_level(levels[i].level);
			return 0;
		}
	return -EINVAL;
}

int mc_log_enabled(int level)
{
	return level <= mc_log_level && mc_log_sink != NULL;
}

void mc_log_set_ident(const char *ident)
{
	snprintf(mc_log_ident, sizeof(mc_log_ident), "%s", ident);
}

static const char *mc_log_level_name(int level)
{
	switch (level) {
	case MC_LOG_ERR:
		return "E";
	case MC_LOG_WARN:
		return "W";
	case MC_LOG_NOTICE:
		return "N";
	case MC_LOG_INFO:
		return "I";
	default:
		return "D";
	}
}

void mc_log_write_line(FILE *f, int level, const char *line)
{
	struct timeval tv;
	struct tm tm;
	char ts[32];

	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
	fprintf(f, "%s.%03ld %s %s: %s\n", ts, (long)(tv.tv_usec / 1000),
		mc_log_level_name(level), mc_log_ident, line);
}

void mc_log_stderr_sink(void *arg, int level, const char *line)
{
	(void)arg;
	mc_log_write_line(stderr, level, line);
}

void mc_logv(int level, const char *fmt, va_list ap)
{
	char line[2048];
	mc_log_sink_fn sink = mc_log_sink;

	if (sink == NULL || level > mc_log_level)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	sink(mc_log_sink_arg, level, line);
}

void mc_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	mc_logv(level, fmt, ap);
	va_end(ap);
}

void mc_log_syslog_sink(void *arg, int level, const char *line)
{
	(void)arg;
	syslog(level, "%s", line);
}

int mc_log_use_default_sink(void)
{
	const char *js = getenv("JOURNAL_STREAM"), *inv = getenv("INVOCATION_ID");

	if ((js && *js) || ((inv && *inv) && !isatty(STDERR_FILENO))) {
		openlog(mc_log_ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
		mc_log_set_sink(mc_log_syslog_sink, NULL);
		return 1;
	}
	mc_log_set_sink(mc_log_stderr_sink, NULL);
	return 0;
}
