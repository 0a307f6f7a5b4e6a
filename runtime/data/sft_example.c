#define _GNU_SOURCE
/* Turns as texts first (each with whether the loss counts it), then each
 * turn's tokens, then the cut of an overlong example. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/chat/chat_template.h"
#include "runtime/data/sft_example.h"

#define MAX_TURNS_CUT 4 /* NeMo-RL's stub of an overlong example's turn */

struct turn {
	char *text;
	bool trained;
};

struct turns {
	struct turn *v;
	int n, cap;
};

static int add_turn(struct turns *ts, char *text, bool trained)
{
	if (!text)
		return -1;
	if (ts->n == ts->cap) {
		int cap = ts->cap ? 2 * ts->cap : 4;
		struct turn *v = realloc(ts->v, (size_t)cap * sizeof *v);
		if (!v) {
			free(text);
			return -1;
		}
		ts->v = v, ts->cap = cap;
	}
	ts->v[ts->n++] = (struct turn){text, trained};
	return 0;
}

static void free_turns(struct turns *ts)
{
	for (int i = 0; i < ts->n; i++)
		free(ts->v[i].text);
	free(ts->v);
}

/* what `now` adds to `before`: past the first character where they differ
 * (NeMo-RL's get_first_index_that_differs) */
static char *delta(const char *before, const char *now)
{
	size_t i = 0;

	while (before[i] && before[i] == now[i])
		i++;
	return strdup(now + i);
}

static char *render(const struct rl_sft_format *f, const struct rl_chat_template *chat,
                    json_t *msgs, bool gen, char *err, size_t errlen)
{
	char *out = NULL;
	size_t len;

	if (rl_chat_template_apply(chat, msgs, f->prompt->chat_vars, gen, &out, &len, err, errlen))
		return NULL;
	return out;
}

/* A problem and its answer: GRPO's prompt, then the assistant's turn. */
static int answer_turns(const struct rl_sft_format *f, const struct rl_example *ex,
                        struct turns *ts, char *err, size_t errlen)
{
	if (!ex->answer) {
		snprintf(err, errlen, "an example has no answer");
		return -1;
	}
	if (add_turn(ts, rl_prompt_render(f->prompt, ex->problem, err, errlen), false)) {
		if (!err[0])
			snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!f->prompt->chat) {
		if (add_turn(ts, strdup(ex->answer), true) == 0)
			return 0;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	char *user = rl_prompt_user_text(f->prompt, ex->problem);
	json_t *msgs = user ? json_pack("[{s:s}]", "role", "user") : NULL;
	char *head = NULL, *all = NULL;
	int rc = -1;

	if (!msgs || json_object_set_new(json_array_get(msgs, 0), "content", json_string(user)) ||
	    !(head = render(f, f->prompt->chat, msgs, true, err, errlen)))
		goto out;
	if (json_array_append_new(
	        msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", ex->answer)) ||
	    !(all = render(f, f->prompt->chat, msgs, false, err, errlen)))
		goto out;
	rc = add_turn(ts, delta(head, all), true);
out:
	if (rc && !err[0])
		snprintf(err, errlen, "out of memory");
	json_decref(msgs);
	free(user);
	free(head);
	free(all);
	return rc;
}

/* A conversation, message by message. */
static int chat_turns(const struct rl_sft_format *f, const struct rl_example *ex, struct turns *ts,
                      char *err, size_t errlen)
{
	json_t *all = json_deep_copy(ex->messages), *part = json_array(), *m;
	char *before = strdup(""), *now = NULL;
	bool formatted = false;
	size_t i, n = json_array_size(ex->messages);
	int rc = -1;

	if (!all || !part || !before)
		goto oom;
	json_array_foreach(all, i, m)
	{
		const char *role = json_string_value(json_object_get(m, "role"));

		if (!formatted && strcmp(role, "user") == 0) {
			char *u = rl_prompt_user_text(
			    f->prompt, json_string_value(json_object_get(m, "content")));
			if (!u || json_object_set_new(m, "content", json_string(u))) {
				free(u);
				goto oom;
			}
			free(u);
			formatted = true;
		}
		if (json_array_append(part, m))
			goto oom;
		bool gen = f->add_generation_prompt &&
		           (strcmp(role, "user") == 0 || strcmp(role, "tool") == 0);
		if (!(now = render(f, f->chat, part, gen, err, errlen)))
			goto out;
		bool trained = f->only_unmask_final ? i == n - 1 : strcmp(role, "assistant") == 0;
		if (add_turn(ts, delta(before, now), trained))
			goto oom;
		free(before);
		before = now;
		now = NULL;
	}
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	json_decref(all);
	json_decref(part);
	free(before);
	free(now);
	return rc;
}

static char *token_text(const struct rl_sft_format *f, int32_t id)
{
	char *text = NULL, e[8];
	size_t len;

	if (rl_tokenizer_decode(f->tok, &id, 1, false, &text, &len, e, sizeof e))
		return NULL;
	return text;
}

/* NeMo-RL's add_eos: the EOS text unless the last turn ends with it
 * before its trailing newlines */
static int append_eos(const struct rl_sft_format *f, struct turn *last)
{
	char *eos = token_text(f, f->eos_id), *more;
	size_t n = strlen(last->text), e;

	if (!eos)
		return -1;
	while (n > 0 && last->text[n - 1] == '\n')
		n--;
	e = strlen(eos);
	if (e > 0 && n >= e && memcmp(last->text + n - e, eos, e) == 0) {
		free(eos);
		return 0;
	}
	if (asprintf(&more, "%s%s", last->text, eos) < 0) {
		free(eos);
		return -1;
	}
	free(eos);
	free(last->text);
	last->text = more;
	return 0;
}

int rl_sft_encode(const struct rl_sft_format *f, const struct rl_example *ex,
                  struct rl_sft_tokens *out, char *err, size_t errlen)
{
	struct turns ts = {0};
	int32_t **ids = NULL;
	size_t *n = NULL, total = 0;
	int rc = -1;

	memset(out, 0, sizeof *out);
	err[0] = '\0';
	if ((ex->messages ? chat_turns(f, ex, &ts, err, errlen)
	                  : answer_turns(f, ex, &ts, err, errlen)))
		goto out;
	if (f->add_eos && f->eos_id >= 0 && append_eos(f, &ts.v[ts.n - 1])) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	ids = calloc((size_t)ts.n, sizeof *ids);
	n = calloc((size_t)ts.n, sizeof *n);
	if (!ids || !n) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int k = 0; k < ts.n; k++) {
		if (rl_tokenizer_encode(f->tok, ts.v[k].text, strlen(ts.v[k].text), false, &ids[k],
		                        &n[k], err, errlen))
			goto out;
		total += n[k];
	}
	bool bos = f->add_bos && f->bos_id >= 0 && !(n[0] > 0 && ids[0][0] == f->bos_id);
	total += bos;
	out->overlong = (int64_t)total >= f->max_len;
	size_t cut = out->overlong ? (size_t)(f->max_len / ts.n) : SIZE_MAX;
	if (cut > MAX_TURNS_CUT && out->overlong)
		cut = MAX_TURNS_CUT;
	out->ids = malloc((total + 1) * sizeof *out->ids);
	out->mask = calloc(total + 1, 1);
	if (!out->ids || !out->mask) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	int at = 0;
	if (bos)
		out->ids[at++] = f->bos_id;
	for (int k = 0; k < ts.n; k++)
		for (size_t j = 0; j < n[k] && j < cut; j++, at++) {
			out->ids[at] = ids[k][j];
			out->mask[at] = (ts.v[k].trained || f->train_on_inputs) && at > 0;
		}
	out->len = at;
	if (out->len == 0) {
		snprintf(err, errlen, "an example encodes to no tokens");
		goto out;
	}
	rc = 0;
out:
	for (int k = 0; ids && k < ts.n; k++)
		free(ids[k]);
	free(ids);
	free(n);
	free_turns(&ts);
	if (rc)
		rl_sft_tokens_free(out);
	return rc;
}

void rl_sft_tokens_free(struct rl_sft_tokens *t)
{
	free(t->ids);
	free(t->mask);
	memset(t, 0, sizeof *t);
}
