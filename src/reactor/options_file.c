/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration files in either of upstream's two forms: JSON, or YAML (conf/master.yaml).
 *
 * A YAML file is read with libyaml's event parser into a JSON object of strings, which the
 * option table then applies exactly as it applies a JSON file's keys, so both forms accept the
 * same keys and values and fail with the same messages.  Only what upstream's files use is
 * accepted: one document whose top level is a mapping of scalars (comments, quoting and blank
 * lines as YAML allows); a nested mapping or a list is an error naming its key, as is a key
 * given twice.  A plain "~", "null" or empty value is the empty string.  Runs at start-up and
 * on SIGHUP, on the main thread.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>
#ifdef HAVE_YAML
#include <yaml.h>
#endif

#include "reactor/options.h"

static int mc_opts_is_yaml(const char *path)
{
	const char *dot = strrchr(path, '.');

	return dot && (!strcasecmp(dot, ".yaml") || !strcasecmp(dot, ".yml"));
}

#ifdef HAVE_YAML
/* The text of a scalar event as a configuration value. */
static const char *mc_yaml_value(const yaml_event_t *ev)
{
	const char *v = (const char *)ev->data.scalar.value;

	if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    (!strcmp(v, "~") || !strcasecmp(v, "null") || v[0] == '\0'))
		return "";
	return v;
}

/* Read the YAML file at path into *out (a new JSON object of strings).  0, -ENOENT or -EINVAL
 * with a message naming the file and the line. */
static int mc_yaml_load(const char *path, json_t **out, char *err, size_t errlen)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	json_t *root = json_object();
	char key[256] = "";
	int rc = -EINVAL, depth = 0, have_key = 0, docs = 0, done = 0;
	FILE *f = fopen(path, "rb");

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		json_decref(root);
		return -ENOENT;
	}
	if (!yaml_parser_initialize(&parser)) {
		snprintf(err, errlen, "%s: cannot start the YAML parser", path);
		goto out_file;
	}
	yaml_parser_set_input_file(&parser, f);
	while (!done) {
		if (!yaml_parser_parse(&parser, &ev)) {
			snprintf(err, errlen, "%s:%zu: %s", path, parser.problem_mark.line + 1,
				 parser.problem ? parser.problem : "YAML syntax error");
			goto out_parser;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1) {
				snprintf(err, errlen, "%s:%zu: only one YAML document is allowed",
					 path, ev.start_mark.line + 1);
				goto out_event;
			}
			break;
		case YAML_MAPPING_START_EVENT:
			if (depth++ > 0) {
				snprintf(err, errlen, "%s:%zu: key '%s' must be a string, number or "
					 "bool", path, ev.start_mark.line + 1, key);
				goto out_event;
			}
			break;
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		case YAML_SEQUENCE_START_EVENT:
			snprintf(err, errlen, "%s:%zu: %s%s%s must be a string, number or bool", path,
				 ev.start_mark.line + 1, depth ? "key '" : "the top level",
				 depth ? key : "", depth ? "'" : "");
			goto out_event;
		case YAML_ALIAS_EVENT:
			snprintf(err, errlen, "%s:%zu: aliases are not allowed", path,
				 ev.start_mark.line + 1);
			goto out_event;
		case YAML_SCALAR_EVENT:
			if (depth != 1) {
				snprintf(err, errlen, "%s: top level must be a mapping", path);
				goto out_event;
			}
			if (!have_key) {
				snprintf(key, sizeof(key), "%s", (const char *)ev.data.scalar.value);
				if (json_object_get(root, key)) {
					snprintf(err, errlen, "%s:%zu: key '%s' is given twice", path,
						 ev.start_mark.line + 1, key);
					goto out_event;
				}
				have_key = 1;
			} else {
				json_object_set_new(root, key, json_string(mc_yaml_value(&ev)));
				have_key = 0;
			}
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	*out = root;
	root = NULL;
	rc = 0;
	goto out_parser;
out_event:
	yaml_event_delete(&ev);
out_parser:
	yaml_parser_delete(&parser);
out_file:
	fclose(f);
	json_decref(root);
	return rc;
}
#endif

int mc_opts_parse_config_file(const struct mc_opt *tab, void *cfg, const char *path,
			      const struct mc_opts_state *st, int strict, char *err,
			      size_t errlen)
{
	json_t *root = NULL;
	int rc;

	if (!mc_opts_is_yaml(path))
		return mc_opts_parse_json_file(tab, cfg, path, st, strict, err, errlen);
#ifdef HAVE_YAML
	rc = mc_yaml_load(path, &root, err, errlen);
	if (rc)
		return rc;
	rc = mc_opts_apply_object(tab, cfg, root, path, st, strict, err, errlen);
	json_decref(root);
	return rc;
#else
	(void)root;
	(void)rc;
	snprintf(err, errlen, "%s: this build cannot read YAML configuration files (configure "
		 "found no libyaml; install libyaml-dev and rebuild, or use a JSON file)", path);
	return -EINVAL;
#endif
}
