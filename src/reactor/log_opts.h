/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_LOG_OPTS_H
#define MC_LOG_OPTS_H

/*
 * The logging flags upstream's daemons take from glog (--log_dir, --logtostderr,
 * --alsologtostderr, --stderrthreshold, --minloglevel, ...), for the option tables of
 * mooncake_master and mooncake_client, and the sink that does what they say.
 *
 * A daemon embeds struct mc_log_opts in its configuration and puts MC_LOG_OPTS(offset) in its
 * option table (offset: offsetof(daemon config, the embedded struct)); after parsing it calls
 * mc_log_opts_apply() once.
 */
#include <stddef.h>
#include <stdint.h>

#include "reactor/options.h"

struct mc_log_opts {
	char *log_dir;			/* lines go to <log_dir>/<program>.log */
	int logtostderr;		/* everything to stderr, no file */
	int alsologtostderr;		/* the file and stderr */
	int64_t stderrthreshold;	/* 0 INFO .. 3 FATAL: with a file, these also to stderr */
	int64_t minloglevel;		/* 0 INFO .. 3 FATAL: lines below are not logged */
	int64_t logfile_mode;		/* permissions of a new log file */
	int log_prefix;			/* time, level and program before each line */
	int64_t max_log_size;		/* MB: the file is rotated to .1 past this */
	int colorlogtostderr;		/* color the level on a terminal */
	char *vmodule;			/* module=N,...: any N > 0 turns debug lines on */
	int symbolize_stacktrace;
	/* glog's remaining flags, taken so upstream command lines start; they change nothing. */
	char *alsologtoemail;
	char *logmailer;
	int64_t logemaillevel;
	int64_t logbuflevel;
	int64_t logbufsecs;
	int drop_log_memory;
	char *log_backtrace_at;
	char *log_link;
	int stop_logging_if_full_disk;
};

#define MC_LOG_OPT_O(base, f) ((base) + offsetof(struct mc_log_opts, f))
#define MC_LOG_OPTS(base)                                                                      \
	{ "log_dir", NULL, NULL, MC_OPT_PATH, MC_LOG_OPT_O(base, log_dir), "", 0, -1,         \
	  "write the log to DIR/<program>.log instead of stderr or the journal" },             \
	{ "logtostderr", NULL, NULL, MC_OPT_BOOL, MC_LOG_OPT_O(base, logtostderr), "false", 0, \
	  -1, "log to stderr only (overrides --log_dir and the journal)" },                    \
	{ "alsologtostderr", NULL, NULL, MC_OPT_BOOL, MC_LOG_OPT_O(base, alsologtostderr),    \
	  "false", 0, -1, "with --log_dir, also copy every line to stderr" },                  \
	{ "stderrthreshold", NULL, NULL, MC_OPT_INT, MC_LOG_OPT_O(base, stderrthreshold), "2", \
	  0, 3, "with --log_dir, lines at or above this level also go to stderr "               \
	  "(0 INFO, 1 WARNING, 2 ERROR, 3 FATAL)" },                                          \
	{ "minloglevel", NULL, NULL, MC_OPT_INT, MC_LOG_OPT_O(base, minloglevel), "0", 0, 3,    \
	  "lines below this level are not logged (0 INFO, 1 WARNING, 2 ERROR, 3 FATAL)" },     \
	{ "logfile_mode", NULL, NULL, MC_OPT_INT, MC_LOG_OPT_O(base, logfile_mode), "436", 0,   \
	  511, "permissions of a log file --log_dir creates (decimal; 436 is 0664)" },         \
	{ "log_prefix", NULL, NULL, MC_OPT_BOOL, MC_LOG_OPT_O(base, log_prefix), "true", 0, -1, \
	  "start each line with its time, level and program" },                               \
	{ "max_log_size", NULL, NULL, MC_OPT_INT, MC_LOG_OPT_O(base, max_log_size), "1800", 1,  \
	  4095, "MB a --log_dir file may reach before it is moved to <file>.1" },              \
	{ "colorlogtostderr", NULL, NULL, MC_OPT_BOOL, MC_LOG_OPT_O(base, colorlogtostderr),  \
	  "false", 0, -1, "color warnings and errors on stderr when it is a terminal" },       \
	{ "vmodule", NULL, NULL, MC_OPT_STRING, MC_LOG_OPT_O(base, vmodule), "", 0, -1,         \
	  "module=N,...: verbose logging; lines are not split by module here, so any N > 0 "   \
	  "turns on debug lines" },                                                            \
	{ "symbolize_stacktrace", NULL, NULL, MC_OPT_BOOL,                                    \
	  MC_LOG_OPT_O(base, symbolize_stacktrace), "true", 0, -1,                             \
	  "accepted for compatibility: this program prints no stack traces to symbolize" },     \
	{ "alsologtoemail", NULL, NULL, MC_OPT_TOKEN, MC_LOG_OPT_O(base, alsologtoemail), "",   \
	  0, -1, "accepted for compatibility: this program sends no log email" },              \
	{ "logemaillevel", NULL, NULL, MC_OPT_INT, MC_LOG_OPT_O(base, logemaillevel), "999", 1, \
	  0, "accepted for compatibility: this program sends no log email" },                  \
	{ "logmailer", NULL, NULL, MC_OPT_PATH, MC_LOG_OPT_O(base, logmailer), "/bin/mail", 0, \
	  -1, "accepted for compatibility: this program sends no log email" },                 \
	{ "logbuflevel", NULL, NULL, MC_OPT_INT, MC_LOG_OPT_O(base, logbuflevel), "0", 1, 0,    \
	  "accepted for compatibility: each line is written when it is logged, unbuffered" },  \
	{ "logbufsecs", NULL, NULL, MC_OPT_INT, MC_LOG_OPT_O(base, logbufsecs), "30", 1, 0,     \
	  "accepted for compatibility: each line is written when it is logged, unbuffered" },  \
	{ "drop_log_memory", NULL, NULL, MC_OPT_BOOL, MC_LOG_OPT_O(base, drop_log_memory),     \
	  "true", 0, -1, "accepted for compatibility: the log file's page cache is left to the " \
	  "kernel" },                                                                          \
	{ "log_backtrace_at", NULL, NULL, MC_OPT_TOKEN, MC_LOG_OPT_O(base, log_backtrace_at),  \
	  "", 0, -1, "accepted for compatibility: this program prints no stack traces" },       \
	{ "log_link", NULL, NULL, MC_OPT_PATH, MC_LOG_OPT_O(base, log_link), "", 0, -1,       \
	  "accepted for compatibility: no links to the log file are made" },                   \
	{ "stop_logging_if_full_disk", NULL, NULL, MC_OPT_BOOL,                               \
	  MC_LOG_OPT_O(base, stop_logging_if_full_disk), "false", 0, -1,                       \
	  "accepted for compatibility: it has no effect here" }

/* Check the values (a --log_dir that cannot be written, a malformed --vmodule).  0, or -1 with
 * one line in err naming the flag. */
int mc_log_opts_check(const struct mc_log_opts *o, char *err, size_t n);
/* Route the log as the flags say for program ident, and lower the level to at most what
 * --minloglevel allows (level: the level the daemon chose from its other flags).  0, or -errno
 * when the log file cannot be opened (with a line on stderr). */
int mc_log_opts_apply(const struct mc_log_opts *o, const char *ident, int level);

#endif
