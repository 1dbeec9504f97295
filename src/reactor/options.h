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
 * Checked strings (char *, like MC_OPT_STRING, but the value must have a form):
 *   MC_OPT_HOST      a host name, an IPv4 or an IPv6 address; no port (bind addresses)
 *   MC_OPT_ADDR      a host with an optional port: "h", "h:p", "[v6]:p", "v6" (port 1..65535)
 *   MC_OPT_ENDPOINT  a host and a port: "h:p", "[v6]:p", "v6:p"
 *   MC_OPT_METADATA  a metadata service: P2PHANDSHAKE, http(s)://host[:port][/path],
 *                    etcd://h:p[,h:p...] (also without the scheme), redis://host[:port]
 *   MC_OPT_CHOICE    one of the '|'-separated words in def ("tcp|rdma"); the first is the
 *                    default; matched exactly, else case-insensitively when only one word fits,
 *                    and stored in the table's spelling
 *   MC_OPT_NAMES     a comma-separated list of names ([A-Za-z0-9_.:-]), possibly empty (NICs)
 *   MC_OPT_TOKEN     printable text without blanks, quotes or backslashes, at most 255 bytes
 *   MC_OPT_PATH      a file name: no control characters, shorter than 1024 bytes
 *   MC_OPT_MASTER    a master: host:port, or where the HA masters publish their leader,
 *                    etcd://h1:p1[;h2:p2...] or redis://host[:port]
 * A value that does not have its form is refused with one line naming the option and the value,
 * the same whether it came from the command line, a configuration file or the environment.
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
	MC_OPT_HOST,
	MC_OPT_ADDR,
	MC_OPT_ENDPOINT,
	MC_OPT_METADATA,
	MC_OPT_CHOICE,
	MC_OPT_NAMES,
	MC_OPT_TOKEN,
	MC_OPT_PATH,
	MC_OPT_MASTER,
};

struct mc_opt {
	const char *name;	/* flag name, also the JSON key unless json_key is set */
	const char *alias;	/* another accepted flag name (deprecated spellings), or NULL */
	const char *json_key;	/* key in config files when it differs from name, or NULL */
	enum mc_opt_type type;
	size_t offset;		/* offsetof(config struct, field) */
	const char *def;	/* default as text (parsed like a user value); for MC_OPT_CHOICE the
				 * accepted words "a|b|c", the first being the default */
	double min, max;	/* inclusive bounds for INT/DOUBLE/SIZE/DURATION (ignored if
				 * min > max) */
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
/* Apply a JSON object from a file; keys that were set on the command line (st) are checked but
 * not applied (a bad value in the file is an error even when the command line overrides it).
 * Unknown keys are an error when strict, otherwise ignored.  Values may be JSON numbers, bools or
 * strings.  Returns 0, -ENOENT, or -EINVAL with a message. */
int mc_opts_parse_json_file(const struct mc_opt *tab, void *cfg, const char *path,
			    const struct mc_opts_state *st, int strict, char *err, size_t errlen);
/* Apply the keys of a JSON object (a json_t *) as mc_opts_parse_json_file does with a file's;
 * path names the file in messages. */
int mc_opts_apply_object(const struct mc_opt *tab, void *cfg, const void *object,
			 const char *path, const struct mc_opts_state *st, int strict, char *err,
			 size_t errlen);
/* A configuration file by its name: ".yaml" and ".yml" files are read as YAML (a mapping of
 * scalars at the top level, as upstream's conf/master.yaml), anything else as JSON; then as
 * mc_opts_parse_json_file.  A YAML file in a build without libyaml is an error that says so
 * (options_file.c). */
int mc_opts_parse_config_file(const struct mc_opt *tab, void *cfg, const char *path,
			      const struct mc_opts_state *st, int strict, char *err,
			      size_t errlen);
/* Print "--name=<type> (default: X)  help" lines. */
void mc_opts_help(const struct mc_opt *tab, FILE *out);
/* True if argv contains --name or -name (e.g. "help", "version"). */
int mc_opts_wants(int argc, char **argv, const char *name);

/* Check value as o would take it, without storing it.  label names where the value came from in
 * the message ("--name" when NULL, e.g. "MOONCAKE_PROTOCOL" or "key 'protocol' in FILE").
 * Returns 0 or -EINVAL with one line in err naming the label and the value. */
int mc_opts_check_value(const struct mc_opt *o, const char *value, const char *label, char *err,
			size_t errlen);
/* Check every environment variable named in tab (names are the variables, offsets unused) that
 * is set and not empty.  Returns 0 or -EINVAL with one line naming the variable and its value. */
int mc_opts_check_env(const struct mc_opt *tab, char *err, size_t errlen);
/* A file flag's value must name a readable file ("" is fine: not set).  0, or -1 with
 * "invalid value 'PATH' for --FLAG: reason" in err. */
int mc_opts_check_readable(const char *flag, const char *path, char *err, size_t errlen);

/* Split an MC_OPT_ADDR value into host (brackets of an IPv6 literal removed) and port (0 when
 * none is given).  Returns 0, or -EINVAL when the value has not that form. */
int mc_opts_split_addr(const char *value, char *host, size_t hostlen, int *port);

/* The environment variables the store client and the transfer engine read (MOONCAKE_*, MC_*),
 * for processes that run them: check with mc_opts_check_env() before starting. */
extern const struct mc_opt mc_opts_env_store[];

int mc_opts_state_init(struct mc_opts_state *st, const struct mc_opt *tab);
void mc_opts_state_fini(struct mc_opts_state *st);

/* Shared value parsers (also used for mooncake.json and environment variables). */
int mc_parse_size(const char *s, uint64_t *out);
int mc_parse_duration_ms(const char *s, int64_t *out);
int mc_parse_bool(const char *s, int *out);

#endif
