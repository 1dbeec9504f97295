/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_LOG_H
#define MC_LOG_H

#include <stdarg.h>
#include <stdio.h>

/* Severities, syslog-compatible numbers so the journal gets the right priority. */
enum mc_log_level {
	MC_LOG_ERR = 3,
	MC_LOG_WARN = 4,
	MC_LOG_NOTICE = 5,
	MC_LOG_INFO = 6,
	MC_LOG_DEBUG = 7,
};

/* A sink receives one formatted line without a trailing newline. */
typedef void (*mc_log_sink_fn)(void *arg, int level, const char *line);

/* Process-wide logging.  Libraries call mc_log_*; what happens to the lines is decided by the
 * program: daemons install mc_log_stderr_sink (or the journal sink), libmooncake users install
 * their own through mooncake's public API.  By default only warnings and errors go to stderr.
 * Thread-safe: the sink is called under no lock, so sinks must be thread-safe themselves. */
void mc_log_set_sink(mc_log_sink_fn fn, void *arg);
void mc_log_set_level(int level);
/* Set the level by name: debug, info, warning (or warn), error, in any case (upstream's
 * Python logging names and MC_LOG_LEVEL's).  0, or -EINVAL for another name (level unchanged). */
int mc_log_set_level_name(const char *name);
int mc_log_enabled(int level);

/* Prefixes each line with a timestamp, level and the program name set by mc_log_set_ident. */
void mc_log_stderr_sink(void *arg, int level, const char *line);
/* Writes one line to f with that prefix, as mc_log_stderr_sink does to stderr. */
void mc_log_write_line(FILE *f, int level, const char *line);
/* Sends each line to syslog(3) (the journal under systemd) with its priority. */
void mc_log_syslog_sink(void *arg, int level, const char *line);
/* Daemons: log to the journal when systemd started us with output not on a terminal
 * (JOURNAL_STREAM or INVOCATION_ID set), else to stderr.  Returns 1 if syslog was chosen. */
int mc_log_use_default_sink(void);
void mc_log_set_ident(const char *ident);

void mc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mc_logv(int level, const char *fmt, va_list ap);

#define mc_log_err(...) mc_log(MC_LOG_ERR, __VA_ARGS__)
#define mc_log_warn(...) mc_log(MC_LOG_WARN, __VA_ARGS__)
#define mc_log_notice(...) mc_log(MC_LOG_NOTICE, __VA_ARGS__)
#define mc_log_info(...) mc_log(MC_LOG_INFO, __VA_ARGS__)
#define mc_log_debug(...)                                    \
	do {                                                 \
		if (mc_log_enabled(MC_LOG_DEBUG))            \
			mc_log(MC_LOG_DEBUG, __VA_ARGS__);   \
	} while (0)

#endif
