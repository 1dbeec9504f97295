/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Table-driven option parsing for the daemons (see options.h).  Everything here runs at start-up
 * or on SIGHUP on the main thread; values come from users, so every conversion is checked and
 * every failure produces a message naming the option.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "reactor/options.h"

#define FIELD(cfg, o, type) ((type *)((char *)(cfg) + (o)->offset))

int mc_parse_bool(const char *s, int *out)
{
	if (!strcasecmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
	    !strcasecmp(s, "on")) {
		*out = 1;
		return 0;
	}
	if (!strcasecmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") ||
	    !strcasecmp(s, "off")) {
		*out = 0;
		return 0;
	}
	return -EINVAL;
}

int mc_parse_size(const char *s, uint64_t *out)
{
	char *end;
	double v;
	uint64_t mult = 1;

	while (isspace((unsigned char)*s))
		s++;
	if (*s == '\0' || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	while (isspace((unsigned char)*end))
		end++;
	if (*end) {
		char u = (char)tolower((unsigned char)*end);
		const char *rest = end + 1;

		switch (u) {
		case 'b': mult = 1; rest = end + 1; break;
		case 'k': mult = 1ull << 10; break;
		case 'm': mult = 1ull << 20; break;
		case 'g': mult = 1ull << 30; break;
		case 't': mult = 1ull << 40; break;
		default: return -EINVAL;
		}
		if (u != 'b') {
			/* Accept k, kb, kib (any case). */
			if (tolower((unsigned char)*rest) == 'i')
				rest++;
			if (tolower((unsigned char)*rest) == 'b')
				rest++;
		}
		while (isspace((unsigned char)*rest))
			rest++;
		if (*rest)
			return -EINVAL;
	}
	v *= (double)mult;
	if (v >= 18446744073709551615.0)
		return -ERANGE;
	*out = (uint64_t)v;
	return 0;
}

int mc_parse_duration_ms(const char *s, int64_t *out)
{
	char *end;
	long long v;
	int64_t mult = 1;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || v < 0)
		return -EINVAL;
	if (*end == '\0' || !strcmp(end, "ms"))
		mult = 1;
	else if (!strcmp(end, "s"))
		mult = 1000;
	else if (!strcmp(end, "m"))
		mult = 60000;
	else if (!strcmp(end, "h"))
		mult = 3600000;
	else
		return -EINVAL;
	if (v > INT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}

static int mc_opts_in_range(const struct mc_opt *o, double v)
{
	if (o->min > o->max)
		return 1;
	return v >= o->min && v <= o->max;
}

int mc_opts_set(const struct mc_opt *o, void *cfg, const char *value, char *err, size_t errlen)
{
	char *end;
	int b;
	long long ll;
	double d;
	uint64_t sz;
	int64_t ms;
	char *dup;

	switch (o->type) {
	case MC_OPT_BOOL:
		if (mc_parse_bool(value, &b))
			goto bad;
		*FIELD(cfg, o, int) = b;
		return 0;
	case MC_OPT_INT:
		errno = 0;
		ll = strtoll(value, &end, 10);
		if (errno || end == value || *end)
			goto bad;
		if (!mc_opts_in_range(o, (double)ll))
			goto range;
		*FIELD(cfg, o, int64_t) = ll;
		return 0;
	case MC_OPT_DOUBLE:
		errno = 0;
		d = strtod(value, &end);
		if (errno || end == value || *end || !isfinite(d))
			goto bad;
		if (!mc_opts_in_range(o, d))
			goto range;
		*FIELD(cfg, o, double) = d;
		return 0;
	case MC_OPT_STRING:
		dup = strdup(value);
		if (dup == NULL) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		free(*FIELD(cfg, o, char *));
		*FIELD(cfg, o, char *) = dup;
		return 0;
	case MC_OPT_SIZE:
		if (mc_parse_size(value, &sz))
			goto bad;
		if (!mc_opts_in_range(o, (double)sz))
			goto range;
		*FIELD(cfg, o, uint64_t) = sz;
		return 0;
	case MC_OPT_DURATION:
		if (mc_parse_duration_ms(value, &ms))
			goto bad;
		if (!mc_opts_in_range(o, (double)ms))
			goto range;
		*FIELD(cfg, o, int64_t) = ms;
		return 0;
	}
bad:
	snprintf(err, errlen, "invalid value '%s' for --%s", value, o->name);
	return -EINVAL;
range:
	snprintf(err, errlen, "value '%s' for --%s is out of range [%g, %g]", value, o->name,
		 o->min, o->max);
	return -EINVAL;
}

int mc_opts_defaults(const struct mc_opt *tab, void *cfg)
{
	char err[256];
	const struct mc_opt *o;

	for (o = tab; o->name; o++) {
		if (o->type == MC_OPT_STRING)
			*FIELD(cfg, o, char *) = NULL;
		if (o->def && mc_opts_set(o, cfg, o->def, err, sizeof(err)))
			return -EINVAL;
		if (o->type == MC_OPT_STRING && *FIELD(cfg, o, char *) == NULL)
			*FIELD(cfg, o, char *) = strdup("");
	}
	return 0;
}

void mc_opts_free(const struct mc_opt *tab, void *cfg)
{
	const struct mc_opt *o;

	for (o = tab; o->name; o++)
		if (o->type == MC_OPT_STRING) {
			free(*FIELD(cfg, o, char *));
			*FIELD(cfg, o, char *) = NULL;
		}
}

const struct mc_opt *mc_opts_find(const struct mc_opt *tab, const char *name)
{
	const struct mc_opt *o;

	for (o = tab; o->name; o++)
		if (!strcmp(o->name, name) || (o->alias && !strcmp(o->alias, name)))
			return o;
	return NULL;
}

int mc_opts_state_init(struct mc_opts_state *st, const struct mc_opt *tab)
{
	size_t n = 0;

	while (tab[n].name)
		n++;
	st->cli_set = calloc(n ? n : 1, 1);
	st->n = n;
	return st->cli_set ? 0 : -ENOMEM;
}

void mc_opts_state_fini(struct mc_opts_state *st)
{
	free(st->cli_set);
	st->cli_set = NULL;
}

int mc_opts_wants(int argc, char **argv, const char *name)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--"))
			break;
		if (a[0] != '-')
			continue;
		a += (a[1] == '-') ? 2 : 1;
		if (!strcmp(a, name))
			return 1;
	}
	return 0;
}

int mc_opts_parse_argv(const struct mc_opt *tab, void *cfg, int argc, char **argv,
		       struct mc_opts_state *st, int *next, char *err, size_t errlen)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		char name[128];
		const char *eq, *value;
		const struct mc_opt *o;
		size_t n;
		int neg = 0;

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break;
		a += (a[1] == '-') ? 2 : 1;
		eq = strchr(a, '=');
		n = eq ? (size_t)(eq - a) : strlen(a);
		if (n == 0 || n >= sizeof(name)) {
			snprintf(err, errlen, "invalid option '%s'", argv[i]);
			return -EINVAL;
		}
		memcpy(name, a, n);
		name[n] = '\0';
		o = mc_opts_find(tab, name);
		if (o == NULL && !strncmp(name, "no", 2)) {
			o = mc_opts_find(tab, name + 2);
			if (o && o->type == MC_OPT_BOOL && !eq)
				neg = 1;
			else
				o = NULL;
		}
		if (o == NULL) {
			snprintf(err, errlen, "unknown option '--%s' (see --help)", name);
			return -EINVAL;
		}
		if (eq) {
			value = eq + 1;
		} else if (o->type == MC_OPT_BOOL) {
			value = neg ? "false" : "true";
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			snprintf(err, errlen, "option '--%s' needs a value", name);
			return -EINVAL;
		}
		if (mc_opts_set(o, cfg, value, err, errlen))
			return -EINVAL;
		if (st && st->cli_set)
			st->cli_set[o - tab] = 1;
	}
	if (next)
		*next = i;
	return 0;
}

int mc_opts_parse_json_file(const struct mc_opt *tab, void *cfg, const char *path,
			    const struct mc_opts_state *st, int strict, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root, *val;
	const char *key;
	int ret = 0;

	root = json_load_file(path, 0, &jerr);
	if (root == NULL) {
		snprintf(err, errlen, "%s:%d: %s", path, jerr.line, jerr.text);
		return access(path, R_OK) ? -ENOENT : -EINVAL;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "%s: top level must be a JSON object", path);
		ret = -EINVAL;
		goto out;
	}
	json_object_foreach(root, key, val) {
		const struct mc_opt *o = NULL, *p;
		char buf[64];
		const char *text;

		for (p = tab; p->name; p++)
			if (!strcmp(p->json_key ? p->json_key : p->name, key) ||
			    !strcmp(p->name, key) || (p->alias && !strcmp(p->alias, key))) {
				o = p;
				break;
			}
		if (o == NULL) {
			if (strict) {
				snprintf(err, errlen, "%s: unknown key '%s'", path, key);
				ret = -EINVAL;
				goto out;
			}
			continue;
		}
		if (st && st->cli_set && st->cli_set[o - tab])
			continue;
		if (json_is_string(val))
			text = json_string_value(val);
		else if (json_is_true(val))
			text = "true";
		else if (json_is_false(val))
			text = "false";
		else if (json_is_integer(val)) {
			snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(val));
			text = buf;
		} else if (json_is_real(val)) {
			snprintf(buf, sizeof(buf), "%.17g", json_real_value(val));
			text = buf;
		} else {
			snprintf(err, errlen, "%s: key '%s' must be a string, number or bool", path,
				 key);
			ret = -EINVAL;
			goto out;
		}
		if (mc_opts_set(o, cfg, text, err, errlen)) {
			size_t l = strlen(err);

			snprintf(err + l, errlen - l, " (in %s)", path);
			ret = -EINVAL;
			goto out;
		}
	}
out:
	json_decref(root);
	return ret;
}

static const char *mc_opts_type_name(enum mc_opt_type t)
{
	switch (t) {
	case MC_OPT_BOOL: return "bool";
	case MC_OPT_INT: return "int";
	case MC_OPT_DOUBLE: return "float";
	case MC_OPT_STRING: return "string";
	case MC_OPT_SIZE: return "size";
	case MC_OPT_DURATION: return "duration";
	}
	return "?";
}

void mc_opts_help(const struct mc_opt *tab, FILE *out)
{
	const struct mc_opt *o;

	for (o = tab; o->name; o++) {
		fprintf(out, "  --%s=<%s>", o->name, mc_opts_type_name(o->type));
		if (o->alias)
			fprintf(out, " (alias --%s)", o->alias);
		fprintf(out, "  (default: %s)\n", o->def && *o->def ? o->def : "\"\"");
		fprintf(out, "      %s\n", o->help);
	}
}
