/* The resolved config as YAML, generated from the schema table in its order,
 * through libyaml's emitter so that quoting is always right: what this
 * prints reads back as the same config. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "runtime/config/internal.h"
#include "runtime/config/scalar.h"

struct out {
	yaml_emitter_t em;
	bool ok;
};

static void emit(struct out *o, yaml_event_t *ev)
{
	if (o->ok && !yaml_emitter_emit(&o->em, ev))
		o->ok = false;
}

static void scalar(struct out *o, const char *text, bool force_quotes)
{
	yaml_event_t ev;
	yaml_scalar_style_t style =
	    force_quotes ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE;
	yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text),
	                             !force_quotes, 1, style);
	emit(o, &ev);
}

/* A literal `${` must be written `\${`, or reading the output back would
 * take it for a reference. */
static void string(struct out *o, const char *s)
{
	if (!strstr(s, "${")) {
		scalar(o, s, rl_scalar_needs_quotes(s));
		return;
	}
	char *escaped = malloc(2 * strlen(s) + 1), *w = escaped;
	if (!escaped) {
		o->ok = false;
		return;
	}
	for (const char *r = s; *r; r++) {
		if (r[0] == '$' && r[1] == '{')
			*w++ = '\\';
		*w++ = *r;
	}
	*w = '\0';
	scalar(o, escaped, true);
	free(escaped);
}

static void begin(struct out *o, bool map, bool flow)
{
	yaml_event_t ev;
	if (map)
		yaml_mapping_start_event_initialize(
		    &ev, NULL, NULL, 1, flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
	else
		yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
		                                     flow ? YAML_FLOW_SEQUENCE_STYLE
		                                          : YAML_BLOCK_SEQUENCE_STYLE);
	emit(o, &ev);
}

static void end(struct out *o, bool map)
{
	yaml_event_t ev;
	if (map)
		yaml_mapping_end_event_initialize(&ev);
	else
		yaml_sequence_end_event_initialize(&ev);
	emit(o, &ev);
}

static void number_int(struct out *o, int64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRId64, v);
	scalar(o, buf, false);
}

/* Shortest text that reads back as the same double. */
static void number_float(struct out *o, double v)
{
	char buf[40];
	if (isinf(v)) {
		scalar(o, v > 0 ? ".inf" : "-.inf", false);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	scalar(o, buf, false);
}

/* A parsed YAML value, as flow style */
static void node(struct out *o, const struct rl_ynode *n)
{
	if (n->kind == RL_Y_SCALAR) {
		if (n->plain)
			scalar(o, n->text, false);
		else
			string(o, n->text);
		return;
	}
	begin(o, n->kind == RL_Y_MAP, true);
	for (size_t i = 0; i < n->n; i++) {
		if (n->kind == RL_Y_MAP)
			string(o, n->items[i].key);
		node(o, n->items[i].value);
	}
	end(o, n->kind == RL_Y_MAP);
}

/* A mapping kept as JSON text, written back as a mapping (JSON is YAML) */
static void json_map(struct out *o, const char *text)
{
	struct rl_ysources src = {0};
	struct rl_diags d = {0};
	struct rl_ynode *n;

	if (!text) {
		scalar(o, "null", false);
		return;
	}
	n = rl_yaml_parse_value(&src, "<mapping>", text, strlen(text), &d);
	if (n)
		node(o, n);
	else
		o->ok = false;
	rl_ynode_free(n);
	rl_ysources_free(&src);
	rl_diags_free(&d);
}

/* policy.scheduler in NeMo-RL's own list form, milestones last. */
static void schedulers(struct out *o, const struct rl_cfg_sched_list *l)
{
	if (!l->n) {
		scalar(o, "null", false);
		return;
	}
	begin(o, false, false);
	for (size_t i = 0; i < l->n; i++) {
		const struct rl_cfg_torch_sched *s = &l->v[i];
		begin(o, true, false);
		scalar(o, "name", false);
		string(o, rl_torch_sched_name(s->kind));
		scalar(o, "kwargs", false);
		begin(o, true, true);
		if (s->kind == RL_TS_LINEAR) {
			scalar(o, "start_factor", false);
			number_float(o, s->start_factor);
			scalar(o, "end_factor", false);
			number_float(o, s->end_factor);
		} else if (s->kind == RL_TS_CONSTANT) {
			scalar(o, "factor", false);
			number_float(o, s->factor);
		}
		if (s->kind == RL_TS_COSINE) {
			scalar(o, "T_max", false);
			number_int(o, s->t_max);
			scalar(o, "eta_min", false);
			number_float(o, s->eta_min);
		} else {
			scalar(o, "total_iters", false);
			number_int(o, s->total_iters);
		}
		end(o, true);
		end(o, true);
	}
	begin(o, true, false);
	scalar(o, "milestones", false);
	begin(o, false, true);
	for (size_t i = 0; i + 1 < l->n; i++)
		number_int(o, l->milestones[i]);
	end(o, false);
	end(o, true);
	end(o, false);
}

static void value(struct out *o, const struct rl_key *k, const void *base)
{
	const void *f = (const char *)base + k->offset;
	switch (k->type) {
	case RL_T_BOOL:
		scalar(o, *(const bool *)f ? "true" : "false", false);
		break;
	case RL_T_INT:
		number_int(o, *(const int64_t *)f);
		break;
	case RL_T_FLOAT:
		number_float(o, *(const double *)f);
		break;
	case RL_T_OPT_INT: {
		const struct rl_opt_int *v = f;
		if (v->set)
			number_int(o, v->value);
		else
			scalar(o, "null", false);
		break;
	}
	case RL_T_OPT_FLOAT: {
		const struct rl_opt_float *v = f;
		if (v->set)
			number_float(o, v->value);
		else
			scalar(o, "null", false);
		break;
	}
	case RL_T_STRING:
	case RL_T_ENUM: {
		const char *s = *(char *const *)f;
		if (s)
			string(o, s);
		else
			scalar(o, "null", false);
		break;
	}
	case RL_T_INT_LIST: {
		const struct rl_int_list *l = f;
		begin(o, false, true);
		for (size_t i = 0; i < l->n; i++)
			number_int(o, l->v[i]);
		end(o, false);
		break;
	}
	case RL_T_FLOAT_LIST: {
		const struct rl_float_list *l = f;
		begin(o, false, true);
		for (size_t i = 0; i < l->n; i++)
			number_float(o, l->v[i]);
		end(o, false);
		break;
	}
	case RL_T_STRING_LIST: {
		const struct rl_str_list *l = f;
		begin(o, false, true);
		for (size_t i = 0; i < l->n; i++)
			string(o, l->v[i]);
		end(o, false);
		break;
	}
	case RL_T_JSON_MAP:
		json_map(o, *(char *const *)f);
		break;
	case RL_T_SCHEDULERS:
		schedulers(o, f);
		break;
	case RL_T_AUTO_SECTION:
	case RL_T_UNSUPPORTED:
		break;
	}
}

/* Number of leading dotted components two paths share. */
static int common_depth(const char *a, const char *b)
{
	int depth = 0;
	for (;;) {
		size_t la = strcspn(a, "."), lb = strcspn(b, ".");
		if (la != lb || strncmp(a, b, la) != 0 || !a[la] || !b[lb])
			return depth;
		depth++;
		a += la + 1;
		b += lb + 1;
	}
}

static const char *component(const char *path, int index, size_t *len)
{
	for (int i = 0; i < index; i++)
		path = strchr(path, '.') + 1;
	*len = strcspn(path, ".");
	return path;
}

static int depth_of(const char *path)
{
	int d = 0;
	for (; *path; path++)
		d += *path == '.';
	return d;
}

static void key(struct out *o, const char *name, size_t len)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%.*s", (int)len, name);
	scalar(o, buf, false);
}

static void env_section(struct out *o, const struct rl_config *cfg)
{
	key(o, "env", 3);
	begin(o, true, false);
	for (size_t i = 0; i < cfg->n_env; i++) {
		string(o, cfg->env[i].name);
		begin(o, true, false);
		for (size_t j = 0; j < rl_schema_len; j++) {
			const struct rl_key *k = &rl_schema[j];
			if (!(k->flags & RL_K_IN_ENV) || k->type == RL_T_UNSUPPORTED)
				continue;
			size_t len;
			const char *leaf = component(k->path, 2, &len);
			key(o, leaf, len);
			value(o, k, &cfg->env[i]);
		}
		end(o, true);
	}
	end(o, true);
}

/* A key of another algorithm's block (sft., dpo., distillation.): left
 * out, since the block's presence is what picks the algorithm when the
 * YAML is read back. */
static bool other_algorithm(const struct rl_config *cfg, const char *path)
{
	for (int a = RL_ALGO_SFT; a <= RL_ALGO_DISTILLATION; a++) {
		const char *block = rl_algorithm_block((enum rl_algorithm)a);
		size_t n = strlen(block);
		if (a != (int)cfg->algorithm && strncmp(path, block, n) == 0 && path[n] == '.')
			return true;
	}
	return false;
}

/* Whether the schema has a key that is written under the block of a. */
static bool block_has_keys(enum rl_algorithm a)
{
	const char *block = rl_algorithm_block(a);
	size_t n = strlen(block);

	for (size_t i = 0; i < rl_schema_len; i++)
		if (rl_schema[i].type != RL_T_UNSUPPORTED &&
		    strncmp(rl_schema[i].path, block, n) == 0 && rl_schema[i].path[n] == '.')
			return true;
	return false;
}

int rl_config_write_yaml(const struct rl_config *cfg, FILE *out)
{
	struct out o = {.ok = true};
	if (!yaml_emitter_initialize(&o.em))
		return -1;
	yaml_emitter_set_output_file(&o.em, out);
	yaml_emitter_set_unicode(&o.em, 1);
	yaml_emitter_set_width(&o.em, 100);
	yaml_event_t ev;
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	emit(&o, &ev);
	yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
	emit(&o, &ev);
	begin(&o, true, false);
	/* the algorithm is the config's block (algorithm.c): a block with
	 * keys of its own in the schema (dpo.*) is written with them below;
	 * one whose keys all went to grpo.* (distillation's) is written
	 * empty, which says it as well */
	if (cfg->algorithm != RL_ALGO_GRPO && !block_has_keys(cfg->algorithm)) {
		const char *block = rl_algorithm_block(cfg->algorithm);
		key(&o, block, strlen(block));
		begin(&o, true, true);
		end(&o, true);
	}

	const char *prev = "";
	int open = 0; /* sections currently open below the document mapping */
	bool env_done = false;
	const char *skip_below = NULL; /* a section printed as `auto` */
	for (size_t i = 0; i < rl_schema_len; i++) {
		const struct rl_key *k = &rl_schema[i];
		if (k->type == RL_T_UNSUPPORTED || other_algorithm(cfg, k->path) ||
		    (cfg->algorithm != RL_ALGO_GRPO && rl_cfg_grpo_only_key(k->path)))
			continue;
		if (skip_below && strncmp(k->path, skip_below, strlen(skip_below)) == 0 &&
		    k->path[strlen(skip_below)] == '.')
			continue;
		int keep = common_depth(prev, k->path);
		if (keep > open)
			keep = open;
		for (; open > keep; open--)
			end(&o, true);
		if (k->flags & RL_K_IN_ENV) {
			if (!env_done && cfg->n_env > 0)
				env_section(&o, cfg);
			env_done = true;
			prev = "";
			continue;
		}
		int depth = depth_of(k->path);
		for (; open < depth; open++) {
			size_t len;
			const char *name = component(k->path, open, &len);
			key(&o, name, len);
			begin(&o, true, false);
		}
		size_t len;
		const char *leaf = component(k->path, depth, &len);
		if (k->type == RL_T_AUTO_SECTION) {
			if (*(const bool *)((const char *)cfg + k->offset)) {
				key(&o, leaf, len);
				scalar(&o, "auto", false);
				skip_below = k->path;
			}
			prev = k->path;
			continue;
		}
		key(&o, leaf, len);
		value(&o, k, cfg);
		prev = k->path;
	}
	for (; open > 0; open--)
		end(&o, true);
	end(&o, true);
	yaml_document_end_event_initialize(&ev, 1);
	emit(&o, &ev);
	yaml_stream_end_event_initialize(&ev);
	emit(&o, &ev);
	bool ok = o.ok && yaml_emitter_flush(&o.em);
	yaml_emitter_delete(&o.em);
	return ok ? 0 : -1;
}
