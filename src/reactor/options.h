/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_OPTIONS_H
#define MC_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Table-driven options.  Each daemon declares one table of struct mc_opt over its own config
 * struct; the same table drives command-line parsing, JSON config files, --help and range
 * validation, so documentation, parsing and checks cannot drift apart.
 *
 * Field types in the config struct:
 *   MC_OPT_BOOL      int (0/1); "--flag", "--flag=true|false|1|0|yes|no", "--noflag"
 *   MC_OPT_INT       int64_t, checked against [min, max]
 *   MC_OPT_DOUBLE    double, checked against [min, max]
 *   MC_OPT_STRING    char * (heap; release with mc_opts_free)
 *   MC_OPT_SIZE      uint64_t bytes; accepts 1048576, "4GB", "4 gb", "16MiB", "512k" (1024-based)
 *   MC_OPT_DURATION  int64_t milliseconds; accepts raw ms or an integer with ms|s|m|h
 *
 * Command line: "--name=value" and "--name value" (single dash accepted too).
 */
enum mc_opt_type {
	MC_OPT_BOOL,
	MC_OPT_INT,
	MC_OPT_DOUBLE,
	MC_OPT_STRING,
	MC_OPT_SIZE,
	MC_OPT_DURATION,
};

struct mc_opt {
	const char *name;	/* flag name, also the JSON key unless json_key is set */
	const char *alias;	/* another accepted flag name (deprecated spellings), or NULL */
	const char *json_key;	/* key in config files when it differs from name, or NULL */
	enum mc_opt_type type;
	size_t offset;		/* offsetof(config struct, field) */
	const char *def;	/* default as text (parsed like a user value) */
	double min, max;	/* inclusive bounds for INT/DOUBLE/SIZE/DURATION (ignored if min > max) */
	const char *help;
};

#define MC_OPT_END { NULL, NULL, NULL, MC_OPT_BOOL, 0, NULL, 0, 0, NULL }

/* Per-table bookkeeping of which options were set explicitly on the command line, so a config
 * file does not override them.  Sized by the caller: one byte per table entry. */
struct mc_opts_state {
	uint8_t *cli_set;
	size_t n;
};

/* Set every field to its default.  Returns 0, or -EINVAL if a default does not parse (a bug). */
int mc_opts_defaults(const struct mc_opt *tab, void *cfg);
/* Free MC_OPT_STRING fields. */
void mc_opts_free(const struct mc_opt *tab, void *cfg);
/* Set one option from text.  Returns 0 or -EINVAL with a message in err. */
int mc_opts_set(const struct mc_opt *o, void *cfg, const char *value, char *err, size_t errlen);
const struct mc_opt *mc_opts_find(const struct mc_opt *tab, const char *name);

/*
 * Parse argv[1..].  Stops at "--" or the first non-option argument and returns its index in
 * *next.  "--help" and "--version" are not handled here: callers look for them first with
 * mc_opts_wants(argc, argv, "help").  Returns 0 or -EINVAL with a message in err (unknown flag,
 * missing value, bad value, out of range).  st may be NULL.
 */
int mc_opts_parse_argv(const struct mc_opt *tab, void *cfg, int argc, char **argv,
		       struct mc_opts_state *st, int *next, char *err, size_t errlen);
/* Apply a JSON object from a file; keys that were set on the command line (st) are skipped.
 * Unknown keys are an error when strict, otherwise ignored.  Values may be JSON numbers, bools or
 * strings.  Returns 0, -ENOENT, or -EINVAL with a message. */
int mc_opts_parse_json_file(const struct mc_opt *tab, void *cfg, const char *path,
			    const struct mc_opts_state *st, int strict, char *err, size_t errlen);
/* Print "--name=<type> (default: X)  help" lines. */
void mc_opts_help(const struct mc_opt *tab, FILE *out);
/* True if argv contains --name or -name (e.g. "help", "version"). */
int mc_opts_wants(int argc, char **argv, const char *name);

int mc_opts_state_init(struct mc_opts_state *st, const struct mc_opt *tab);
void mc_opts_state_fini(struct mc_opts_state *st);

/* Shared value parsers (also used for mooncake.json and environment variables). */
int mc_parse_size(const char *s, uint64_t *out);
int mc_parse_duration_ms(const char *s, int64_t *out);
int mc_parse_bool(const char *s, int *out);

#endif
