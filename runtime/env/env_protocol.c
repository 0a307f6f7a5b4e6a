/* rl-env(7)'s lines (env_protocol.h). */
#define _GNU_SOURCE
#include "runtime/env/env_protocol.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/reward/program_io.h"

static json_t *text(const char *s, size_t n)
{
	return rl_prog_json_text(s, n);
}

static json_t *text0(const char *s)
{
	return rl_prog_json_text(s, s ? strlen(s) : 0);
}

char *rl_env_line_start(long long id, const char *prompt, const char *problem, const char *expected,
                        json_t *metadata, const struct rl_env_turn *hist, int n_hist, size_t *len)
{
	json_t *h = json_array();

	for (int t = 0; h && t < n_hist; t++)
		json_array_append_new(
		    h,
		    json_pack("{s:o, s:o}", "message", text(hist[t].message, hist[t].message_len),
		              "observation", text(hist[t].observation, hist[t].observation_len)));
	return rl_prog_json_line(json_pack("{s:s, s:I, s:o, s:o, s:o, s:O, s:o}", "type", "start",
	                                   "episode", (json_int_t)id, "prompt", text0(prompt),
	                                   "problem", text0(problem), "expected_answer",
	                                   text0(expected), "metadata",
	                                   metadata ? metadata : json_null(), "history", h),
	                         len);
}

char *rl_env_line_step(long long id, int turn, const char *message, size_t message_len, size_t *len)
{
	return rl_prog_json_line(json_pack("{s:s, s:I, s:i, s:o}", "type", "step", "episode",
	                                   (json_int_t)id, "turn", turn, "message",
	                                   text(message, message_len)),
	                         len);
}

char *rl_env_line_end(long long id, size_t *len)
{
	return rl_prog_json_line(json_pack("{s:s, s:I}", "type", "end", "episode", (json_int_t)id),
	                         len);
}

/* "episode": N looked for in a line that is not JSON. */
static bool scan_episode(const char *line, long long *id)
{
	const char *at = strstr(line, "\"episode\"");
	char *end;

	if (!at)
		return false;
	at += strlen("\"episode\"");
	at += strspn(at, " \t");
	if (*at++ != ':')
		return false;
	*id = strtoll(at, &end, 10);
	return end != at;
}

/* What is wrong with an answer's fields, or NULL. */
static const char *check_fields(struct rl_env_reply *r)
{
	json_t *vo = json_object_get(r->o, "observation"), *vr = json_object_get(r->o, "reward"),
	       *vd = json_object_get(r->o, "done");

	if (!json_is_boolean(vd))
		return "has no boolean \"done\"";
	r->done = json_is_true(vd);
	if (!json_is_number(vr))
		return "has no number \"reward\"";
	r->reward = json_number_value(vr);
	if (!isfinite(r->reward))
		return "has a reward that is not finite";
	if (json_is_string(vo)) {
		r->observation = json_string_value(vo);
		r->observation_len = json_string_length(vo);
	} else if (r->done && (!vo || json_is_null(vo))) {
		r->observation = "";
		r->observation_len = 0;
	} else {
		return "has no string \"observation\"";
	}
	return NULL;
}

void rl_env_reply_parse(const char *line, size_t len, struct rl_env_reply *r)
{
	json_error_t je;

	*r = (struct rl_env_reply){0};
	r->o = json_loadb(line, len, JSON_DECODE_ANY, &je);
	if (!r->o) {
		r->named = scan_episode(line, &r->id);
		r->why = "is not JSON";
		return;
	}
	if (!json_is_object(r->o)) {
		r->why = "is not a JSON object";
		return;
	}
	json_t *v = json_object_get(r->o, "episode");

	if (!json_is_integer(v)) {
		r->why = "has no integer \"episode\"";
		return;
	}
	r->named = true;
	r->id = json_integer_value(v);
	r->why = check_fields(r);
}

void rl_env_reply_free(struct rl_env_reply *r)
{
	json_decref(r->o);
	r->o = NULL;
}
