/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake.json and MOONCAKE_* environment parsing (see store_config.h).  Input is from users:
 * every field is type-checked, strings are bounded, sizes accept ints or "4gb"-style strings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "reactor/options.h"
#include "store/store_config.h"

/* The forms the file's keys and the environment's variables must have: the same checks as the
 * daemons' flags, so a value is refused alike wherever it comes from. */
#define MC_CFG_MAX_SIZE 140737488355328.0	/* 128 TiB: what a process's address space holds */
static const struct mc_opt mc_cfg_checks[] = {
	{ "local_hostname", "MOONCAKE_LOCAL_HOSTNAME", NULL, MC_OPT_ADDR, 0, NULL, 0, -1, "" },
	{ "metadata_server", "MOONCAKE_TE_META_DATA_SERVER", NULL, MC_OPT_METADATA, 0, NULL, 0, -1,
	  "" },
	{ "master_server_address", "MOONCAKE_MASTER", NULL, MC_OPT_MASTER, 0, NULL, 0, -1, "" },
	{ "protocol", "MOONCAKE_PROTOCOL", NULL, MC_OPT_CHOICE, 0, "tcp|rdma", 0, -1, "" },
	{ "device_name", "MOONCAKE_DEVICE", NULL, MC_OPT_NAMES, 0, NULL, 0, -1, "" },
	{ "tenant_id", "MOONCAKE_TENANT_ID", NULL, MC_OPT_TOKEN, 0, NULL, 0, -1, "" },
	{ "global_segment_size", "MOONCAKE_GLOBAL_SEGMENT_SIZE", NULL, MC_OPT_SIZE, 0, NULL, 0,
	  MC_CFG_MAX_SIZE, "" },
	{ "local_buffer_size", "MOONCAKE_LOCAL_BUFFER_SIZE", NULL, MC_OPT_SIZE, 0, NULL, 0,
	  MC_CFG_MAX_SIZE, "" },
	{ "enable_ssd_offload", "MOONCAKE_ENABLE_SSD_OFFLOAD", NULL, MC_OPT_BOOL, 0, NULL, 0, -1,
	  "" },
	{ "ssd_offload_path", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", NULL, MC_OPT_PATH, 0, NULL, 0,
	  -1, "" },
	{ "use_hugepage", "MC_STORE_USE_HUGEPAGE", NULL, MC_OPT_BOOL, 0, NULL, 0, -1, "" },
	{ "hugepage_size", "MC_STORE_HUGEPAGE_SIZE", NULL, MC_OPT_CHOICE, 0, "2MB|1GB", 0, -1, "" },
	{ "hugepage_fallback", "MC_STORE_HUGEPAGE_FALLBACK", NULL, MC_OPT_BOOL, 0, NULL, 0, -1,
	  "" },
	{ "populate_segment", "MC_STORE_POPULATE", NULL, MC_OPT_BOOL, 0, NULL, 0, -1, "" },
	{ "segment_location", "MC_STORE_SEGMENT_LOCATION", NULL, MC_OPT_TOKEN, 0, NULL, 0, -1,
	  "" },
	{ "cluster_secret_file", "MOONCAKE_CLUSTER_SECRET_FILE", NULL, MC_OPT_PATH, 0, NULL, 0, -1,
	  "" },
	MC_OPT_END,
};

/* Check v for the file key or variable name (alias).  Returns 0 or -EINVAL, err set. */
static int mc_cfg_check(const char *name, const char *v, const char *path, char *err, size_t el)
{
	const struct mc_opt *o = mc_opts_find(mc_cfg_checks, name);
	char label[1200];

	if (o == NULL)
		return 0;
	if (path)
		snprintf(label, sizeof(label), "key '%s' in %s", name, path);
	else
		snprintf(label, sizeof(label), "environment variable %s", name);
	return mc_opts_check_value(o, v, label, err, el);
}

static void mc_cfg_defaults(struct mc_store_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->local_hostname, sizeof(c->local_hostname), "localhost");
	snprintf(c->metadata_server, sizeof(c->metadata_server), "P2PHANDSHAKE");
	snprintf(c->protocol, sizeof(c->protocol), "tcp");
	snprintf(c->tenant_id, sizeof(c->tenant_id), "default");
	c->global_segment_size = 3355443200ull;
	c->local_buffer_size = 1073741824ull;
	snprintf(c->hugepage_size, sizeof(c->hugepage_size), "2MB");
	c->populate_segment = 1;
	snprintf(c->segment_location, sizeof(c->segment_location), "*");
}

static int mc_cfg_str(char *dst, size_t n, const char *v, const char *name, char *err, size_t el)
{
	if (strlen(v) >= n) {
		snprintf(err, el, "%s is too long", name);
		return -EINVAL;
	}
	snprintf(dst, n, "%s", v);
	return 0;
}

static int mc_cfg_size(uint64_t *dst, const char *v, const char *name, char *err, size_t el)
{
	if (mc_parse_size(v, dst)) {
		snprintf(err, el, "%s: invalid size '%s'", name, v);
		return -EINVAL;
	}
	return 0;
}

static void mc_lower(char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s - 'A' + 'a');
}

static int mc_cfg_from_json(struct mc_store_config *c, const char *path, char *err, size_t el)
{
	static const char *const required[] = { "local_hostname", "metadata_server",
						"master_server_address" };
	json_error_t jerr;
	json_t *root, *v;
	const char *key;
	int rc = 0;
	size_t i;

	root = json_load_file(path, 0, &jerr);
	if (root == NULL) {
		snprintf(err, el, "%s:%d: %s", path, jerr.line, jerr.text);
		return -EINVAL;
	}
	if (!json_is_object(root)) {
		snprintf(err, el, "%s: not a JSON object", path);
		rc = -EINVAL;
		goto out;
	}
	for (i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
		v = json_object_get(root, required[i]);
		if (!json_is_string(v) || json_string_length(v) == 0) {
			snprintf(err, el, "%s: '%s' is required", path, required[i]);
			rc = -EINVAL;
			goto out;
		}
	}
	json_object_foreach(root, key, v) {
		char num[64];
		const char *s = NULL;

		if (json_is_null(v) || mc_opts_find(mc_cfg_checks, key) == NULL)
			continue;	/* null: upstream's default; unknown keys are not ours */
		if (json_is_string(v)) {
			s = json_string_value(v);
		} else if (json_is_integer(v)) {
			snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
			s = num;
		} else if (json_is_real(v)) {
			snprintf(num, sizeof(num), "%.17g", json_real_value(v));
			s = num;
		} else if (json_is_boolean(v)) {
			s = json_is_true(v) ? "true" : "false";
		} else {
			snprintf(err, el, "key '%s' in %s must be a string, a number or a bool", key,
				 path);
			rc = -EINVAL;
			goto out;
		}
		rc = mc_cfg_check(key, s, path, err, el);
		if (rc)
			goto out;
		if (!strcmp(key, "local_hostname"))
			rc = mc_cfg_str(c->local_hostname, sizeof(c->local_hostname), s, key, err, el);
		else if (!strcmp(key, "metadata_server"))
			rc = mc_cfg_str(c->metadata_server, sizeof(c->metadata_server), s, key, err,
					el);
		else if (!strcmp(key, "master_server_address"))
			rc = mc_cfg_str(c->master_server_address, sizeof(c->master_server_address), s,
					key, err, el);
		else if (!strcmp(key, "protocol"))
			rc = mc_cfg_str(c->protocol, sizeof(c->protocol), s, key, err, el);
		else if (!strcmp(key, "device_name"))
			rc = mc_cfg_str(c->device_name, sizeof(c->device_name), s, key, err, el);
		else if (!strcmp(key, "tenant_id"))
			rc = mc_cfg_str(c->tenant_id, sizeof(c->tenant_id), s, key, err, el);
		else if (!strcmp(key, "global_segment_size"))
			rc = mc_cfg_size(&c->global_segment_size, s, key, err, el);
		else if (!strcmp(key, "local_buffer_size"))
			rc = mc_cfg_size(&c->local_buffer_size, s, key, err, el);
		else if (!strcmp(key, "enable_ssd_offload"))
			rc = mc_parse_bool(s, &c->enable_ssd_offload);
		else if (!strcmp(key, "ssd_offload_path"))
			rc = mc_cfg_str(c->ssd_offload_path, sizeof(c->ssd_offload_path), s, key, err,
					el);
		else if (!strcmp(key, "use_hugepage"))
			rc = mc_parse_bool(s, &c->use_hugepage);
		else if (!strcmp(key, "hugepage_size"))
			rc = mc_cfg_str(c->hugepage_size, sizeof(c->hugepage_size), s, key, err, el);
		else if (!strcmp(key, "hugepage_fallback"))
			rc = mc_parse_bool(s, &c->hugepage_fallback);
		else if (!strcmp(key, "populate_segment"))
			rc = mc_parse_bool(s, &c->populate_segment);
		else if (!strcmp(key, "segment_location"))
			rc = mc_cfg_str(c->segment_location, sizeof(c->segment_location), s, key, err,
					el);
		else if (!strcmp(key, "cluster_secret_file"))
			rc = mc_cfg_str(c->cluster_secret_file, sizeof(c->cluster_secret_file), s,
					key, err, el);
		if (rc)
			goto out;
	}
	mc_lower(c->protocol);
out:
	json_decref(root);
	return rc;
}

static int mc_cfg_from_env(struct mc_store_config *c, char *err, size_t el)
{
	const struct mc_opt *o;
	const char *v;
	int rc = 0;

	for (o = mc_cfg_checks; o->name; o++)
		if ((v = getenv(o->alias)) && *v && mc_cfg_check(o->alias, v, NULL, err, el))
			return -EINVAL;
	v = getenv("MOONCAKE_MASTER");
	if (v == NULL || *v == '\0') {
		snprintf(err, el, "no MOONCAKE_CONFIG_PATH and no MOONCAKE_MASTER in the environment");
		return -ENOENT;
	}
	rc = mc_cfg_str(c->master_server_address, sizeof(c->master_server_address), v,
			"MOONCAKE_MASTER", err, el);
	if (!rc && (v = getenv("MOONCAKE_TE_META_DATA_SERVER")) && *v)
		rc = mc_cfg_str(c->metadata_server, sizeof(c->metadata_server), v,
				"MOONCAKE_TE_META_DATA_SERVER", err, el);
	if (!rc && (v = getenv("MOONCAKE_PROTOCOL")) && *v)
		rc = mc_cfg_str(c->protocol, sizeof(c->protocol), v, "MOONCAKE_PROTOCOL", err, el);
	if (!rc && (v = getenv("MOONCAKE_DEVICE")) && *v)
		rc = mc_cfg_str(c->device_name, sizeof(c->device_name), v, "MOONCAKE_DEVICE", err,
				el);
	if (!rc && (v = getenv("MOONCAKE_LOCAL_HOSTNAME")) && *v)
		rc = mc_cfg_str(c->local_hostname, sizeof(c->local_hostname), v,
				"MOONCAKE_LOCAL_HOSTNAME", err, el);
	if (!rc && (v = getenv("MOONCAKE_TENANT_ID")) && *v)
		rc = mc_cfg_str(c->tenant_id, sizeof(c->tenant_id), v, "MOONCAKE_TENANT_ID", err, el);
	if (!rc && (v = getenv("MOONCAKE_GLOBAL_SEGMENT_SIZE")) && *v)
		rc = mc_cfg_size(&c->global_segment_size, v, "MOONCAKE_GLOBAL_SEGMENT_SIZE", err, el);
	if (!rc && (v = getenv("MOONCAKE_LOCAL_BUFFER_SIZE")) && *v)
		rc = mc_cfg_size(&c->local_buffer_size, v, "MOONCAKE_LOCAL_BUFFER_SIZE", err, el);
	if (!rc && (v = getenv("MOONCAKE_ENABLE_SSD_OFFLOAD")) && *v)
		rc = mc_parse_bool(v, &c->enable_ssd_offload);
	if (!rc && (v = getenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH")) && *v)
		rc = mc_cfg_str(c->ssd_offload_path, sizeof(c->ssd_offload_path), v,
				"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", err, el);
	if (!rc && (v = getenv("MOONCAKE_CLUSTER_SECRET_FILE")) && *v)
		rc = mc_cfg_str(c->cluster_secret_file, sizeof(c->cluster_secret_file), v,
				"MOONCAKE_CLUSTER_SECRET_FILE", err, el);
	mc_lower(c->protocol);
	return rc;
}

int mc_store_config_load(struct mc_store_config *c, const char *path, char *err, size_t errlen)
{
	mc_cfg_defaults(c);
	if (path == NULL || *path == '\0')
		path = getenv("MOONCAKE_CONFIG_PATH");
	if (path && *path)
		return mc_cfg_from_json(c, path, err, errlen);
	return mc_cfg_from_env(c, err, errlen);
}
