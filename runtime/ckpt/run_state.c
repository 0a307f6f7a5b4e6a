#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/run_state.h"

void rl_ckpt_model_signature(const struct rl_model_config *c, char *buf, size_t len)
{
	const struct rl_rope_scaling *rs = &c->rope_scaling;

	/* %.17g: doubles round-trip, so equal text means equal values */
	snprintf(buf, len,
	         "%s layers=%d hidden=%d intermediate=%d heads=%d kv_heads=%d head_dim=%d "
	         "vocab=%d tied=%d qkv_bias=%d o_bias=%d mlp_bias=%d qk_norm=%d "
	         "rms_norm_eps=%.17g rope_theta=%.17g rope_scaling=%d/%.17g/%.17g/%.17g/%d",
	         c->architecture, c->n_layers, c->hidden_size, c->intermediate_size, c->n_heads,
	         c->n_kv_heads, c->head_dim, c->vocab_size, c->tie_word_embeddings, c->qkv_bias,
	         c->o_bias, c->mlp_bias, c->qk_norm, c->rms_norm_eps, c->rope_theta, (int)rs->type,
	         rs->factor, rs->low_freq_factor, rs->high_freq_factor,
	         rs->original_max_position_embeddings);
}

static json_t *hex64(uint64_t v)
{
	char s[17];

	snprintf(s, sizeof s, "%016" PRIx64, v);
	return json_string(s);
}

static json_t *u64(uint64_t v)
{
	/* json integers are signed 64-bit; the seed may use every bit */
	return json_integer((json_int_t)v);
}

char *rl_ckpt_run_state_json(const struct rl_ckpt_run_state *s)
{
	json_t *o = json_object(), *data = json_object(), *rng = json_object();
	json_t *model = json_object(), *layout = json_object(), *slurm = json_object();

	json_object_set_new(o, "step", json_integer(s->step));
	json_object_set_new(o, "optimizer_steps", json_integer(s->optimizer_steps));
	json_object_set_new(o, "consumed_samples", json_integer(s->consumed_samples));
	json_object_set_new(data, "epoch", json_integer(s->data_epoch));
	json_object_set_new(data, "position", u64(s->data_position));
	json_object_set_new(data, "examples", u64(s->data_examples));
	json_object_set_new(data, "next_problem", json_integer(s->data_next_problem));
	json_object_set_new(o, "data", data);
	json_object_set_new(rng, "seed", u64(s->seed));
	json_object_set_new(rng, "streams",
	                    json_string("derived: sampling from (seed, step), data order from "
	                                "(seed, epoch), synthetic problems from (seed, number)"));
	json_object_set_new(o, "rng", rng);
	json_object_set_new(model, "signature", json_string(s->model_signature));
	json_object_set_new(model, "reference_xxh3_64", hex64(s->reference_xxh3));
	if (s->teacher_xxh3)
		json_object_set_new(model, "teacher_xxh3_64", hex64(s->teacher_xxh3));
	json_object_set_new(o, "model", model);
	json_object_set_new(layout, "world_size", json_integer(s->world_size));
	json_object_set_new(layout, "tensor", json_integer(s->tensor));
	json_object_set_new(layout, "pipeline", json_integer(s->pipeline));
	json_object_set_new(layout, "context", json_integer(s->context));
	json_object_set_new(layout, "data", json_integer(s->data));
	json_object_set_new(o, "layout", layout);
	json_object_set_new(slurm, "job_id", json_integer(s->slurm_job_id));
	json_object_set_new(slurm, "restart_count", json_integer(s->restart_count));
	json_object_set_new(o, "slurm", slurm);
	if (s->metrics)
		json_object_set(o, "metrics", s->metrics);
	char *text = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(o);
	return text;
}

/* A non-negative integer at path a.b (b may be NULL). */
static int get_int(json_t *root, const char *a, const char *b, int64_t *out)
{
	json_t *v = json_object_get(root, a);

	if (b)
		v = json_object_get(v, b);
	if (!json_is_integer(v))
		return -1;
	*out = json_integer_value(v);
	return 0;
}

/* A count that is only shown: 0 (unknown) when missing or not an int. */
static int get_small(json_t *obj, const char *key)
{
	int64_t v;

	return get_int(obj, key, NULL, &v) || v < 0 || v > INT32_MAX ? 0 : (int)v;
}

int rl_ckpt_run_state_parse(struct rl_ckpt_run_state *s, const char *text, size_t len,
                            const char *path, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *o = json_loadb(text, len, 0, &jerr);
	static const struct {
		const char *a, *b;
		size_t off;
		bool is_unsigned; /* written from a uint64_t: any bit pattern */
	} ints[] = {
#define AT(field) offsetof(struct rl_ckpt_run_state, field)
	    {"step", NULL, AT(step), false},
	    {"optimizer_steps", NULL, AT(optimizer_steps), false},
	    {"consumed_samples", NULL, AT(consumed_samples), false},
	    {"data", "epoch", AT(data_epoch), false},
	    {"data", "position", AT(data_position), true},
	    {"data", "examples", AT(data_examples), true},
	    {"data", "next_problem", AT(data_next_problem), false},
	    {"rng", "seed", AT(seed), true},
	    {"slurm", "job_id", AT(slurm_job_id), false},
#undef AT
	};

	memset(s, 0, sizeof *s);
	if (!o) {
		snprintf(err, errlen, "%s:%d: %s", path, jerr.line, jerr.text);
		return -1;
	}
	for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
		int64_t v;

		if (get_int(o, ints[i].a, ints[i].b, &v) || (v < 0 && !ints[i].is_unsigned)) {
			snprintf(err, errlen, "%s: %s%s%s is missing or not a valid integer", path,
			         ints[i].a, ints[i].b ? "." : "", ints[i].b ? ints[i].b : "");
			json_decref(o);
			return -1;
		}
		/* every field listed is 64 bits wide */
		memcpy((char *)s + ints[i].off, &v, sizeof v);
	}
	const char *sig =
	    json_string_value(json_object_get(json_object_get(o, "model"), "signature"));
	const char *ref =
	    json_string_value(json_object_get(json_object_get(o, "model"), "reference_xxh3_64"));
	char *end = NULL;
	if (ref)
		s->reference_xxh3 = strtoull(ref, &end, 16);
	if (!sig || strlen(sig) >= sizeof s->model_signature || !ref || strlen(ref) != 16 || *end) {
		snprintf(err, errlen, "%s: model.signature or model.reference_xxh3_64 is missing",
		         path);
		json_decref(o);
		return -1;
	}
	strcpy(s->model_signature, sig);
	/* a distillation run's teacher; absent: none */
	const char *teacher =
	    json_string_value(json_object_get(json_object_get(o, "model"), "teacher_xxh3_64"));
	if (teacher) {
		s->teacher_xxh3 = strtoull(teacher, &end, 16);
		if (strlen(teacher) != 16 || *end) {
			snprintf(err, errlen, "%s: model.teacher_xxh3_64 is not 16 hex digits",
			         path);
			json_decref(o);
			return -1;
		}
	}
	json_t *layout = json_object_get(o, "layout");
	s->world_size = get_small(layout, "world_size");
	s->tensor = get_small(layout, "tensor");
	s->pipeline = get_small(layout, "pipeline");
	s->context = get_small(layout, "context");
	s->data = get_small(layout, "data");
	s->restart_count = get_small(json_object_get(o, "slurm"), "restart_count");
	s->metrics = json_object_get(o, "metrics");
	json_incref(s->metrics);
	json_decref(o);
	return 0;
}

char *rl_ckpt_read_text(const char *path, size_t *len, char *err, size_t errlen)
{
	return rl_ckpt_read_whole(path, 64u << 20, len, err, errlen);
}

char *rl_ckpt_read_whole(const char *path, size_t limit, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (n + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			char *more = cap <= limit + 4096 + 1 ? realloc(buf, cap) : NULL;
			if (!more) {
				snprintf(err, errlen, "%s: too large or out of memory", path);
				goto fail;
			}
			buf = more;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		goto fail;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
fail:
	fclose(f);
	free(buf);
	return NULL;
}

int rl_ckpt_run_state_read(struct rl_ckpt_run_state *s, const char *dir, char *err, size_t errlen)
{
	char path[4300];
	size_t len;

	memset(s, 0, sizeof *s);
	snprintf(path, sizeof path, "%s/%s", dir, RL_CKPT_RUN_STATE);
	char *text = rl_ckpt_read_text(path, &len, err, errlen);
	if (!text)
		return -1;
	int rc = rl_ckpt_run_state_parse(s, text, len, path, err, errlen);
	free(text);
	return rc;
}
