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

#include <arpa/inet.h>
#include <netinet/in.h>

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

static int mc_opts_is_string(enum mc_opt_type t)
{
	return t == MC_OPT_STRING || t >= MC_OPT_HOST;
}

/* A host name (RFC 1123 labels; '_' tolerated), or an IPv4 dotted quad.  Names made only of
 * digits and dots must be valid IPv4 addresses, so "999.1.1.1" is refused. */
static int mc_valid_hostname(const char *s, size_t n)
{
	size_t i, label = 0;
	int digits_only = 1;
	char buf[256];

	if (n == 0 || n > 253)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)c) && c != '-' && c != '_')
			return 0;
		if (c == '-' && label == 0)
			return 0;
		if (!isdigit((unsigned char)c))
			digits_only = 0;
		if (++label > 63)
			return 0;
	}
	if (label == 0 || s[n - 1] == '-')
		return 0;
	if (digits_only) {
		struct in_addr a;

		memcpy(buf, s, n);
		buf[n] = '\0';
		return inet_pton(AF_INET, buf, &a) == 1;
	}
	return 1;
}

static int mc_valid_ipv6(const char *s, size_t n)
{
	struct in6_addr a;
	char buf[INET6_ADDRSTRLEN + 1];

	if (n == 0 || n >= sizeof(buf))
		return 0;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return inet_pton(AF_INET6, buf, &a) == 1;
}

static int mc_valid_host(const char *s, size_t n)
{
	return mc_valid_hostname(s, n) || mc_valid_ipv6(s, n);
}

/* "1".."65535", digits only.  Returns the port or 0. */
static int mc_parse_port(const char *s, size_t n)
{
	int p = 0;
	size_t i;

	if (n == 0 || n > 5)
		return 0;
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return 0;
		p = p * 10 + (s[i] - '0');
	}
	return p >= 1 && p <= 65535 ? p : 0;
}

/* mc_opts_split_addr() on the first n bytes of s. */
static int mc_split_addr_n(const char *s, size_t n, char *host, size_t hostlen, int *port)
{
	const char *h = s, *colon = NULL, *p;
	size_t hl = n, colons = 0;
	int pt = 0;

	if (n == 0)
		return -EINVAL;
	if (s[0] == '[') {
		const char *rb = memchr(s, ']', n);

		if (rb == NULL || !mc_valid_ipv6(s + 1, (size_t)(rb - s - 1)))
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(rb - s - 1);
		if ((size_t)(rb - s) + 1 < n) {
			if (rb[1] != ':' ||
			    !(pt = mc_parse_port(rb + 2, n - (size_t)(rb - s) - 2)))
				return -EINVAL;
		}
		goto out;
	}
	for (p = s; p < s + n; p++)
		if (*p == ':') {
			colons++;
			colon = p;
		}
	if (colons == 0) {
		if (!mc_valid_hostname(s, n))
			return -EINVAL;
	} else if (colons > 1 && mc_valid_ipv6(s, n)) {
		/* A bare IPv6 address without a port. */
	} else {
		hl = (size_t)(colon - s);
		if (colons == 1 ? !mc_valid_hostname(s, hl) : !mc_valid_ipv6(s, hl))
			return -EINVAL;
		if (!(pt = mc_parse_port(colon + 1, n - hl - 1)))
			return -EINVAL;
	}
out:
	if (host) {
		if (hl >= hostlen)
			return -EINVAL;
		memcpy(host, h, hl);
		host[hl] = '\0';
	}
	if (port)
		*port = pt;
	return 0;
}

int mc_opts_split_addr(const char *value, char *host, size_t hostlen, int *port)
{
	return mc_split_addr_n(value, strlen(value), host, hostlen, port);
}

/* Printable, no blanks: the rest of a URL after its authority. */
static int mc_valid_url_rest(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

/* A list of host:port separated by ',' or ';'. */
static int mc_valid_endpoint_list(const char *s)
{
	if (*s == '\0')
		return 0;
	for (;;) {
		size_t n = strcspn(s, ",;");
		int port = 0;

		if (mc_split_addr_n(s, n, NULL, 0, &port) || port == 0)
			return 0;
		if (s[n] == '\0')
			return 1;
		s += n + 1;
	}
}

static int mc_valid_metadata(const char *s)
{
	const char *auth;
	size_t n;
	int port;

	if (!strcmp(s, "P2PHANDSHAKE"))
		return 1;
	if (!strncmp(s, "http://", 7) || !strncmp(s, "https://", 8)) {
		auth = s + (s[4] == 's' ? 8 : 7);
		n = strcspn(auth, "/?#");
		return mc_split_addr_n(auth, n, NULL, 0, &port) == 0 &&
		       mc_valid_url_rest(auth + n);
	}
	if (!strncmp(s, "redis://", 8)) {
		const char *at;

		auth = s + 8;
		n = strcspn(auth, "/");
		at = memchr(auth, '@', n);
		while (at && memchr(at + 1, '@', n - (size_t)(at + 1 - auth)))
			at = memchr(at + 1, '@', n - (size_t)(at + 1 - auth));
		if (at) {
			n -= (size_t)(at + 1 - auth);
			auth = at + 1;
		}
		return mc_split_addr_n(auth, n, NULL, 0, &port) == 0 &&
		       mc_valid_url_rest(auth + n);
	}
	if (!strncmp(s, "etcd://", 7))
		return mc_valid_endpoint_list(s + 7);
	if (strstr(s, "://"))
		return 0;
	return mc_valid_endpoint_list(s);
}

/* A master: host:port, or the HA locators etcd://h1:p1;h2:p2 and redis://[user@]host[:port]. */
static int mc_valid_master(const char *s)
{
	int port = 0;

	if (!strncmp(s, "etcd://", 7))
		return mc_valid_endpoint_list(s + 7);
	if (!strncmp(s, "redis://", 8))
		return mc_valid_metadata(s);
	return mc_opts_split_addr(s, NULL, 0, &port) == 0 && port != 0;
}

static int mc_valid_names(const char *s)
{
	if (*s == '\0')
		return 1;
	for (;;) {
		size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				     "0123456789_.:-");

		if (n == 0 || (s[n] != ',' && s[n] != '\0'))
			return 0;
		if (s[n] == '\0')
			return 1;
		s += n + 1;
	}
}

static int mc_valid_token(const char *s)
{
	size_t n = 0;

	for (; *s; s++, n++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f || *s == '"' ||
		    *s == '\\')
			return 0;
	return n <= 255;
}

static int mc_valid_path(const char *s)
{
	size_t n = 0;

	for (; *s; s++, n++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			return 0;
	return n < 1024;
}

/* The word of choices ("a|b|c") that value names, or NULL.  An exact match wins; otherwise a
 * case-insensitive one when it is the only one.  The result points into choices, *len set. */
static const char *mc_choice_find(const char *choices, const char *value, size_t *len)
{
	const char *p = choices, *ci = NULL;
	size_t vl = strlen(value), cil = 0;
	int nci = 0;

	while (p && *p) {
		size_t n = strcspn(p, "|");

		if (n == vl && !strncmp(p, value, n)) {
			*len = n;
			return p;
		}
		if (n == vl && !strncasecmp(p, value, n)) {
			ci = p;
			cil = n;
			nci++;
		}
		p = p[n] ? p + n + 1 : NULL;
	}
	if (nci == 1) {
		*len = cil;
		return ci;
	}
	return NULL;
}

/* What a value of this type must look like, for messages. */
static void mc_opts_form(const struct mc_opt *o, char *out, size_t n)
{
	const char *p;
	size_t l = 0;

	switch (o->type) {
	case MC_OPT_BOOL: snprintf(out, n, "true or false"); return;
	case MC_OPT_INT: snprintf(out, n, "an integer"); return;
	case MC_OPT_DOUBLE: snprintf(out, n, "a number"); return;
	case MC_OPT_SIZE: snprintf(out, n, "a size such as 4096, 16MB or 4 GiB"); return;
	case MC_OPT_DURATION:
		snprintf(out, n, "a duration such as 250, 250ms, 30s, 5m or 1h");
		return;
	case MC_OPT_HOST: snprintf(out, n, "a host name or an IP address"); return;
	case MC_OPT_ADDR: snprintf(out, n, "host or host:port, port 1-65535"); return;
	case MC_OPT_ENDPOINT: snprintf(out, n, "host:port, port 1-65535"); return;
	case MC_OPT_MASTER:
		snprintf(out, n, "host:port, etcd://host:port[;host:port...] or redis://host[:port]");
		return;
	case MC_OPT_METADATA:
		snprintf(out, n, "P2PHANDSHAKE, http://host[:port][/path], etcd://host:port[,...] "
				 "or redis://host[:port]");
		return;
	case MC_OPT_NAMES: snprintf(out, n, "names separated by commas"); return;
	case MC_OPT_TOKEN:
		snprintf(out, n, "printable text without blanks or quotes, at most 255 bytes");
		return;
	case MC_OPT_PATH:
		snprintf(out, n, "a file name without control characters, under 1024 bytes");
		return;
	case MC_OPT_CHOICE:
		l = (size_t)snprintf(out, n, "one of ");
		for (p = o->def; p && *p && l + 3 < n; p++) {
			if (*p == '|') {
				out[l++] = ',';
				out[l++] = ' ';
			} else {
				out[l++] = *p;
			}
		}
		out[l] = '\0';
		return;
	case MC_OPT_STRING:
		break;
	}
	snprintf(out, n, "text");
}

/* value, shortened and with control characters replaced, so that a message stays one line. */
static void mc_opts_quote(const char *value, char *out, size_t n)
{
	size_t i;

	for (i = 0; value[i] && i + 4 < n && i < 200; i++)
		out[i] = (unsigned char)value[i] < 0x20 || value[i] == 0x7f ? '?' : value[i];
	if (value[i] && i + 4 < n) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
}

/* mc_opts_set() with the value's origin named by label (NULL: "--name"). */
static int mc_opts_set_as(const struct mc_opt *o, void *cfg, const char *value,
			  const char *label, char *err, size_t errlen)
{
	char *end, lbuf[160], form[160], q[256];
	int b;
	long long ll;
	double d;
	uint64_t sz;
	int64_t ms;
	char *dup;
	const char *w;
	size_t wl = 0;

	if (label == NULL) {
		snprintf(lbuf, sizeof(lbuf), "--%s", o->name);
		label = lbuf;
	}
	switch (o->type) {
	case MC_OPT_BOOL:
		if (mc_parse_bool(value, &b)) {
			/* A bool with a max > 0 (glog's --v) also takes a level 0..max: N > 0 is
			 * true. */
			errno = 0;
			ll = o->max > 0 ? strtoll(value, &end, 10) : -1;
			if (o->max <= 0 || errno || end == value || *end || ll < 0 ||
			    (double)ll > o->max)
				goto bad;
			b = ll > 0;
		}
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
	case MC_OPT_HOST:
		if (!mc_valid_host(value, strlen(value)))
			goto bad;
		break;
	case MC_OPT_ADDR:
		if (mc_opts_split_addr(value, NULL, 0, &b))
			goto bad;
		break;
	case MC_OPT_ENDPOINT:
		if (mc_opts_split_addr(value, NULL, 0, &b) || b == 0)
			goto bad;
		break;
	case MC_OPT_METADATA:
		if (!mc_valid_metadata(value))
			goto bad;
		break;
	case MC_OPT_MASTER:
		if (!mc_valid_master(value))
			goto bad;
		break;
	case MC_OPT_CHOICE:
		w = mc_choice_find(o->def, value, &wl);
		if (w == NULL)
			goto bad;
		dup = strndup(w, wl);
		goto store;
	case MC_OPT_NAMES:
		if (!mc_valid_names(value))
			goto bad;
		break;
	case MC_OPT_TOKEN:
		if (!mc_valid_token(value))
			goto bad;
		break;
	case MC_OPT_PATH:
		if (!mc_valid_path(value))
			goto bad;
		break;
	case MC_OPT_STRING:
		break;
	}
	dup = strdup(value);
store:
	if (dup == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	free(*FIELD(cfg, o, char *));
	*FIELD(cfg, o, char *) = dup;
	return 0;
bad:
	mc_opts_quote(value, q, sizeof(q));
	mc_opts_form(o, form, sizeof(form));
	snprintf(err, errlen, "invalid value '%s' for %s (expected %s)", q, label, form);
	return -EINVAL;
range:
	mc_opts_quote(value, q, sizeof(q));
	snprintf(err, errlen, "value '%s' for %s is out of range [%.15g, %.15g]", q, label, o->min,
		 o->max);
	return -EINVAL;
}

int mc_opts_set(const struct mc_opt *o, void *cfg, const char *value, char *err, size_t errlen)
{
	return mc_opts_set_as(o, cfg, value, NULL, err, errlen);
}

int mc_opts_check_value(const struct mc_opt *o, const char *value, const char *label, char *err,
			size_t errlen)
{
	struct mc_opt tmp = *o;
	union {
		int b;
		int64_t i;
		uint64_t u;
		double d;
		char *s;
	} scratch;
	int rc;

	memset(&scratch, 0, sizeof(scratch));
	tmp.offset = 0;
	rc = mc_opts_set_as(&tmp, &scratch, value, label, err, errlen);
	if (rc == 0 && mc_opts_is_string(o->type))
		free(scratch.s);
	return rc;
}

int mc_opts_check_readable(const char *flag, const char *path, char *err, size_t errlen)
{
	if (path == NULL || *path == '\0' || access(path, R_OK) == 0)
		return 0;
	snprintf(err, errlen, "invalid value '%s' for --%s: %s", path, flag, strerror(errno));
	return -1;
}

int mc_opts_check_env(const struct mc_opt *tab, char *err, size_t errlen)
{
	const struct mc_opt *o;
	char label[160];

	for (o = tab; o->name; o++) {
		const char *v = getenv(o->name);

		if (v == NULL || *v == '\0')
			continue;
		snprintf(label, sizeof(label), "environment variable %s", o->name);
		if (mc_opts_check_value(o, v, label, err, errlen))
			return -EINVAL;
	}
	return 0;
}

int mc_opts_defaults(const struct mc_opt *tab, void *cfg)
{
	char err[256];
	const struct mc_opt *o;

	for (o = tab; o->name; o++) {
		const char *def = o->def;
		char first[64];

		if (mc_opts_is_string(o->type))
			*FIELD(cfg, o, char *) = NULL;
		if (o->type == MC_OPT_CHOICE && def) {
			snprintf(first, sizeof(first), "%.*s", (int)strcspn(def, "|"), def);
			def = first;
		}
		/* An empty default of a string means "not set": it is not checked. */
		if (def && (*def || !mc_opts_is_string(o->type)) &&
		    mc_opts_set(o, cfg, def, err, sizeof(err)))
			return -EINVAL;
		if (mc_opts_is_string(o->type) && *FIELD(cfg, o, char *) == NULL)
			*FIELD(cfg, o, char *) = strdup("");
	}
	return 0;
}

void mc_opts_free(const struct mc_opt *tab, void *cfg)
{
	const struct mc_opt *o;

	for (o = tab; o->name; o++)
		if (mc_opts_is_string(o->type)) {
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
		{
			char label[160];

			/* Name the flag as the user spelled it (an alias, say). */
			snprintf(label, sizeof(label), "--%s", name);
			if (mc_opts_set_as(o, cfg, value, label, err, errlen))
				return -EINVAL;
		}
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
	json_t *root;
	int ret;

	root = json_load_file(path, 0, &jerr);
	if (root == NULL) {
		snprintf(err, errlen, "%s:%d: %s", path, jerr.line, jerr.text);
		return access(path, R_OK) ? -ENOENT : -EINVAL;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "%s: top level must be a JSON object", path);
		json_decref(root);
		return -EINVAL;
	}
	ret = mc_opts_apply_object(tab, cfg, root, path, st, strict, err, errlen);
	json_decref(root);
	return ret;
}

int mc_opts_apply_object(const struct mc_opt *tab, void *cfg, const void *object,
			 const char *path, const struct mc_opts_state *st, int strict, char *err,
			 size_t errlen)
{
	json_t *root = (json_t *)object, *val;
	const char *key;
	int ret = 0;

	json_object_foreach(root, key, val) {
		const struct mc_opt *o = NULL, *p;
		char buf[64], label[1200];
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
		snprintf(label, sizeof(label), "key '%s' in %s", key, path);
		/* A value the command line overrides is still checked: a file that is wrong must
		 * not wait for the day the flag is dropped to be found out. */
		if (st && st->cli_set && st->cli_set[o - tab]) {
			if (mc_opts_check_value(o, text, label, err, errlen)) {
				ret = -EINVAL;
				goto out;
			}
			continue;
		}
		if (mc_opts_set_as(o, cfg, text, label, err, errlen)) {
			ret = -EINVAL;
			goto out;
		}
	}
out:
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
	case MC_OPT_HOST: return "host";
	case MC_OPT_ADDR: return "host[:port]";
	case MC_OPT_ENDPOINT: return "host:port";
	case MC_OPT_MASTER: return "host:port|etcd://...";
	case MC_OPT_METADATA: return "conn";
	case MC_OPT_CHOICE: return "choice";
	case MC_OPT_NAMES: return "names";
	case MC_OPT_TOKEN: return "name";
	case MC_OPT_PATH: return "path";
	}
	return "?";
}

void mc_opts_help(const struct mc_opt *tab, FILE *out)
{
	const struct mc_opt *o;

	for (o = tab; o->name; o++) {
		if (o->type == MC_OPT_CHOICE)
			fprintf(out, "  --%s=<%s>", o->name, o->def);
		else
			fprintf(out, "  --%s=<%s>", o->name, mc_opts_type_name(o->type));
		if (o->alias)
			fprintf(out, " (alias --%s)", o->alias);
		if (o->type == MC_OPT_CHOICE)
			fprintf(out, "  (default: %.*s)\n", (int)strcspn(o->def, "|"), o->def);
		else
			fprintf(out, "  (default: %s)\n", o->def && *o->def ? o->def : "\"\"");
		fprintf(out, "      %s\n", o->help);
	}
}

/* Variables upstream's store client and transfer engine read, with the forms they take.  The
 * names are the variables; offsets are unused (values are only checked here, and each module
 * reads its own).  Variables whose mere presence is the setting (MC_FORCE_TCP...) are not listed:
 * every value is valid for them. */
#define MC_ENV(n, t, def, lo, hi) { n, NULL, NULL, t, 0, def, lo, hi, "" }
const struct mc_opt mc_opts_env_store[] = {
	MC_ENV("MOONCAKE_CONFIG_PATH", MC_OPT_PATH, NULL, 0, -1),
	MC_ENV("MOONCAKE_MASTER", MC_OPT_MASTER, NULL, 0, -1),
	MC_ENV("MOONCAKE_TE_META_DATA_SERVER", MC_OPT_METADATA, NULL, 0, -1),
	MC_ENV("MOONCAKE_PROTOCOL", MC_OPT_CHOICE, "tcp|rdma", 0, -1),
	MC_ENV("MOONCAKE_DEVICE", MC_OPT_NAMES, NULL, 0, -1),
	MC_ENV("MOONCAKE_LOCAL_HOSTNAME", MC_OPT_ADDR, NULL, 0, -1),
	MC_ENV("MOONCAKE_TENANT_ID", MC_OPT_TOKEN, NULL, 0, -1),
	MC_ENV("MOONCAKE_GLOBAL_SEGMENT_SIZE", MC_OPT_SIZE, NULL, 0, 140737488355328.0),
	MC_ENV("MOONCAKE_LOCAL_BUFFER_SIZE", MC_OPT_SIZE, NULL, 0, 140737488355328.0),
	MC_ENV("MOONCAKE_ENABLE_SSD_OFFLOAD", MC_OPT_BOOL, NULL, 0, -1),
	MC_ENV("MOONCAKE_OFFLOAD_ENABLED", MC_OPT_BOOL, NULL, 0, -1),
	MC_ENV("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", MC_OPT_PATH, NULL, 0, -1),
	MC_ENV("MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES", MC_OPT_INT, NULL, 0, 9.2e18),
	MC_ENV("MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_MS", MC_OPT_INT, NULL, 1, 86400000),
	MC_ENV("MOONCAKE_STORE_CHECKSUM", MC_OPT_BOOL, NULL, 0, -1),
	MC_ENV("MOONCAKE_CLUSTER_SECRET_FILE", MC_OPT_PATH, NULL, 0, -1),
	MC_ENV("MC_AUTH_TIMEOUT_MS", MC_OPT_INT, NULL, 1, 600000),
	MC_ENV("MC_TCP_SERVER_MAX_CONNECTIONS", MC_OPT_INT, NULL, 1, 1000000),
	MC_ENV("MOONCAKE_TLS_CA_FILE", MC_OPT_PATH, NULL, 0, -1),
	MC_ENV("MOONCAKE_TLS_CERT_FILE", MC_OPT_PATH, NULL, 0, -1),
	MC_ENV("MOONCAKE_TLS_KEY_FILE", MC_OPT_PATH, NULL, 0, -1),
	MC_ENV("MC_STORE_SHM", MC_OPT_BOOL, NULL, 0, -1),
	MC_ENV("MC_RPC_TIMEOUT_MS", MC_OPT_INT, NULL, -2147483648.0, 2147483647.0),
	MC_ENV("MC_STORE_CLIENT_MIN_PORT", MC_OPT_INT, NULL, 1, 65535),
	MC_ENV("MC_STORE_CLIENT_MAX_PORT", MC_OPT_INT, NULL, 1, 65535),
	MC_ENV("MC_STORE_CLIENT_SETUP_RETRIES", MC_OPT_INT, NULL, 1, 1000000),
	MC_ENV("MC_STORE_USE_HUGEPAGE", MC_OPT_BOOL, NULL, 0, -1),
	MC_ENV("MC_STORE_HUGEPAGE_SIZE", MC_OPT_CHOICE, "2MB|1GB", 0, -1),
	MC_ENV("MC_STORE_HUGEPAGE_FALLBACK", MC_OPT_BOOL, NULL, 0, -1),
	MC_ENV("MC_STORE_POPULATE", MC_OPT_BOOL, NULL, 0, -1),
	MC_ENV("MC_STORE_SEGMENT_LOCATION", MC_OPT_TOKEN, NULL, 0, -1),
	MC_ENV("MC_MIN_RPC_PORT", MC_OPT_INT, NULL, 1, 65535),
	MC_ENV("MC_MAX_RPC_PORT", MC_OPT_INT, NULL, 1, 65535),
	MC_ENV("MC_HANDSHAKE_MAX_LENGTH", MC_OPT_INT, NULL, 1, 134217728),
	MC_ENV("MC_TE_IO_THREADS", MC_OPT_INT, NULL, 1, 1024),
	MC_ENV("MC_TCP_BIND_ADDRESS", MC_OPT_HOST, NULL, 0, -1),
	MC_ENV("MC_METADATA_CLUSTER_ID", MC_OPT_TOKEN, NULL, 0, -1),
	MC_ENV("MC_REDIS_DB_INDEX", MC_OPT_INT, NULL, 0, 255),
	MC_ENV("MC_TE_METADATA_REFRESH_INTERVAL_SECONDS", MC_OPT_INT, NULL, 0, 86400),
	MC_OPT_END,
};
