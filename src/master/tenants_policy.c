/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tenant quota policy file (--tenant_quota_connector_type=file,
 * --tenant_quota_connector_uri=PATH), in upstream's schema:
 *
 *     version: 1
 *     tenants:
 *       - name: tenant-a
 *         quota: 200GB
 *
 * Names are tenant names (tenants.c); quotas positive integers with an optional unit B, KB,
 * MB, GB or TB (1024-based), at most 2^63 - 1 bytes; a name twice, another version or anything
 * else is an error naming it.  Read with libyaml at start-up.  Changes made through the admin
 * API are written back the way upstream writes them (a temporary file, fsync, rename, fsync of
 * the directory), on a worker thread so the master's loop never waits for the disk; the
 * request is answered when the file is written (a pipe wakes the loop).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#ifdef HAVE_YAML
#include <yaml.h>
#endif

#include "common/log.h"
#include "common/xalloc.h"
#include "master/tenants.h"

/* ---------------------------------------------------------------- reading */

void mc_tenant_policy_free(struct mc_tenant_policy *p)
{
	uint32_t i;

	for (i = 0; i < p->n; i++)
		free(p->names[i]);
	free(p->names);
	free(p->quotas);
	memset(p, 0, sizeof(*p));
}

#ifdef HAVE_YAML
/* Upstream's quota form: digits, then nothing, B, KB, MB, GB or TB. */
static int mc_quota_parse(const char *s, uint64_t *out, const char **why)
{
	uint64_t v = 0, mul = 1;
	const char *p = s;

	if (*p < '0' || *p > '9') {
		*why = "quota must start with an integer";
		return -1;
	}
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
			*why = "quota integer overflows";
			return -1;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (!strcmp(p, "KB"))
		mul = 1ull << 10;
	else if (!strcmp(p, "MB"))
		mul = 1ull << 20;
	else if (!strcmp(p, "GB"))
		mul = 1ull << 30;
	else if (!strcmp(p, "TB"))
		mul = 1ull << 40;
	else if (*p && strcmp(p, "B")) {
		*why = "unsupported quota unit (B, KB, MB, GB or TB)";
		return -1;
	}
	if (v == 0) {
		*why = "quota must be positive";
		return -1;
	}
	if (v > MC_TENANT_MAX_QUOTA / mul) {
		*why = "quota exceeds 2^63 - 1 bytes";
		return -1;
	}
	*out = v * mul;
	return 0;
}

/* The parser's state: where in the schema the next event belongs. */
enum mc_pol_state { POL_TOP, POL_TOP_VALUE, POL_TENANTS, POL_ENTRY, POL_ENTRY_VALUE };

static int mc_policy_add(struct mc_tenant_policy *p, const char *name, const char *quota,
			 char *err, size_t n)
{
	const char *why = NULL;
	uint64_t bytes;
	uint32_t i;

	if (name == NULL || quota == NULL) {
		snprintf(err, n, "a tenant entry needs a name and a quota");
		return -1;
	}
	if (!mc_tenant_name_valid(name, strlen(name))) {
		snprintf(err, n, "invalid tenant name '%s'", name);
		return -1;
	}
	for (i = 0; i < p->n; i++)
		if (!strcmp(p->names[i], name)) {
			snprintf(err, n, "duplicate tenant name '%s'", name);
			return -1;
		}
	if (mc_quota_parse(quota, &bytes, &why)) {
		snprintf(err, n, "invalid quota for tenant '%s': %s", name, why);
		return -1;
	}
	p->names = mc_xrealloc(p->names, (p->n + 1) * sizeof(*p->names));
	p->quotas = mc_xrealloc(p->quotas, (p->n + 1) * sizeof(*p->quotas));
	p->names[p->n] = mc_xstrdup(name);
	p->quotas[p->n++] = bytes;
	return 0;
}

int mc_tenant_policy_parse(const char *text, size_t len, struct mc_tenant_policy *p, char *err,
			   size_t n)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	enum mc_pol_state state = POL_TOP;
	char key[64] = "", *name = NULL, *quota = NULL;
	int rc = -1, done = 0, version = 0, have_tenants = 0, depth = 0;

	memset(p, 0, sizeof(*p));
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	while (!done) {
		const char *v;

		if (!yaml_parser_parse(&parser, &ev)) {
			snprintf(err, n, "line %zu: %s", parser.problem_mark.line + 1,
				 parser.problem ? parser.problem : "YAML syntax error");
			goto out;
		}
		v = ev.type == YAML_SCALAR_EVENT ? (const char *)ev.data.scalar.value : NULL;
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_MAPPING_START_EVENT:
			depth++;
			if (state == POL_TENANTS) {
				state = POL_ENTRY;
				free(name);
				free(quota);
				name = quota = NULL;
			} else if (state != POL_TOP || depth != 1) {
				snprintf(err, n, "line %zu: unexpected mapping",
					 ev.start_mark.line + 1);
				goto out_ev;
			}
			break;
		case YAML_MAPPING_END_EVENT:
			depth--;
			if (state == POL_ENTRY) {
				if (mc_policy_add(p, name, quota, err, n))
					goto out_ev;
				state = POL_TENANTS;
			}
			break;
		case YAML_SEQUENCE_START_EVENT:
			if (state != POL_TOP_VALUE || strcmp(key, "tenants")) {
				snprintf(err, n, "line %zu: unexpected list", ev.start_mark.line + 1);
				goto out_ev;
			}
			have_tenants = 1;
			state = POL_TENANTS;
			break;
		case YAML_SEQUENCE_END_EVENT:
			state = POL_TOP;
			break;
		case YAML_SCALAR_EVENT:
			if (state == POL_TOP) {
				snprintf(key, sizeof(key), "%s", v);
				state = POL_TOP_VALUE;
			} else if (state == POL_TOP_VALUE) {
				if (!strcmp(key, "version")) {
					version = atoi(v);
				} else if (!strcmp(key, "tenants") && !strcmp(v, "[]")) {
					have_tenants = 1;
				} else if (!strcmp(key, "tenants")) {
					snprintf(err, n, "tenants must be a YAML sequence");
					goto out_ev;
				}
				state = POL_TOP;
			} else if (state == POL_ENTRY) {
				snprintf(key, sizeof(key), "%s", v);
				state = POL_ENTRY_VALUE;
			} else if (state == POL_ENTRY_VALUE) {
				if (!strcmp(key, "name") && name == NULL)
					name = mc_xstrdup(v);
				else if (!strcmp(key, "quota") && quota == NULL)
					quota = mc_xstrdup(v);
				state = POL_ENTRY;
			} else {
				snprintf(err, n, "line %zu: tenant entry must be a YAML map",
					 ev.start_mark.line + 1);
				goto out_ev;
			}
			break;
		case YAML_ALIAS_EVENT:
			snprintf(err, n, "line %zu: aliases are not allowed", ev.start_mark.line + 1);
			goto out_ev;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	if (version != 1) {
		snprintf(err, n, version ? "unsupported tenant quota policy version: %d"
					 : "tenant quota policy version is required%.0d", version);
		goto out;
	}
	if (!have_tenants) {
		snprintf(err, n, "tenants must be a YAML sequence");
		goto out;
	}
	rc = 0;
	goto out;
out_ev:
	yaml_event_delete(&ev);
out:
	yaml_parser_delete(&parser);
	free(name);
	free(quota);
	if (rc)
		mc_tenant_policy_free(p);
	return rc;
}
#else
int mc_tenant_policy_parse(const char *text, size_t len, struct mc_tenant_policy *p, char *err,
			   size_t n)
{
	(void)text;
	(void)len;
	memset(p, 0, sizeof(*p));
	snprintf(err, n, "this build cannot read YAML (configure found no libyaml)");
	return -1;
}
#endif

int mc_tenant_policy_load(const char *path, struct mc_tenant_policy *p, char *err, size_t n)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	size_t len = 0;
	int rc = -1;

	memset(p, 0, sizeof(*p));
	if (f == NULL) {
		snprintf(err, n, "cannot open: %s", strerror(errno));
		return -1;
	}
	text = mc_xmalloc(MC_TENANT_POLICY_MAX + 1);
	len = fread(text, 1, MC_TENANT_POLICY_MAX + 1, f);
	if (ferror(f))
		snprintf(err, n, "cannot read: %s", strerror(errno));
	else if (len > MC_TENANT_POLICY_MAX)
		snprintf(err, n, "larger than %d bytes", MC_TENANT_POLICY_MAX);
	else
		rc = mc_tenant_policy_parse(text, len, p, err, n);
	fclose(f);
	free(text);
	return rc;
}

/* ---------------------------------------------------------------- writing */

struct mc_policy_save {
	struct mc_master *m;
	char *path, *text;
	int rc;
	mc_policy_saved_fn done;
	void *arg;
	int pipe[2];
	struct event *ev;
	pthread_t thread;
};

static int mc_write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

static void *mc_policy_save_main(void *arg)
{
	struct mc_policy_save *w = arg;
	char tmp[4200], dir[4200];
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", w->path, (int)getpid());
	fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		rc = -errno;
	if (rc == 0 && (rc = mc_write_all(fd, w->text, strlen(w->text))) == 0 && fsync(fd) != 0)
		rc = -errno;
	if (fd >= 0 && close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, w->path) != 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	snprintf(dir, sizeof(dir), "%s", w->path);
	if (rc == 0 && (fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	w->rc = rc;
	while (write(w->pipe[1], "x", 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static void mc_policy_on_saved(evutil_socket_t fd, short what, void *arg)
{
	struct mc_policy_save *w = arg;
	char c;

	(void)what;
	if (read(fd, &c, 1) < 0 && errno == EAGAIN)
		return;
	pthread_join(w->thread, NULL);
	if (w->rc)
		mc_log_err("tenant quota policy %s not written: %s", w->path, strerror(-w->rc));
	w->done(w->m, w->arg, w->rc);
	event_free(w->ev);
	close(w->pipe[0]);
	close(w->pipe[1]);
	free(w->path);
	free(w->text);
	free(w);
}

int mc_tenant_policy_save(struct mc_master *m, const char *path, char *text,
			  mc_policy_saved_fn done, void *arg)
{
	struct mc_policy_save *w = mc_xcalloc(1, sizeof(*w));

	w->m = m;
	w->path = mc_xstrdup(path);
	w->text = text;
	w->done = done;
	w->arg = arg;
	if (pipe2(w->pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		goto fail;
	w->ev = event_new(m->base, w->pipe[0], EV_READ | EV_PERSIST, mc_policy_on_saved, w);
	if (w->ev == NULL || event_add(w->ev, NULL) != 0)
		goto fail_pipe;
	if (pthread_create(&w->thread, NULL, mc_policy_save_main, w) != 0)
		goto fail_ev;
	return 0;
fail_ev:
	event_free(w->ev);
fail_pipe:
	close(w->pipe[0]);
	close(w->pipe[1]);
fail:
	free(w->path);
	free(w->text);
	free(w);
	return -EAGAIN;
}
