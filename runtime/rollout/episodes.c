#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/data/prompt.h"
#include "runtime/env/builtin_env.h"
#include "runtime/generate/session.h"
#include "runtime/rollout/episodes.h"
#include "runtime/rollout/observation.h"
#include "runtime/rollout/share.h"

/* ---- settings ---- */

/* "'<this program>' env NAME", the path quoted for sh: how a built-in
 * environment (env/builtin_env.h) runs. */
static char *builtin_command(const char *name, char *err, size_t errlen)
{
	char exe[PATH_MAX + 1];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

	if (n <= 0) {
		snprintf(err, errlen,
		         "the built-in environment %s: cannot find this program "
		         "(/proc/self/exe)",
		         name);
		return NULL;
	}
	exe[n] = '\0';
	size_t cap = 4 * (size_t)n + strlen(name) + 16, at = 0;
	char *cmd = malloc(cap);
	if (!cmd) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	cmd[at++] = '\'';
	for (const char *p = exe; *p; p++) {
		if (*p == '\'') {
			memcpy(cmd + at, "'\\''", 4);
			at += 4;
		} else {
			cmd[at++] = *p;
		}
	}
	snprintf(cmd + at, cap - at, "' env %s", name);
	return cmd;
}

static int chat_of(struct rl_episode_settings *s, const struct rl_config *cfg, char *err,
                   size_t errlen)
{
	struct rl_prompt p;
	bool applies;

	if (rl_prompt_chat_template_applies(cfg, &applies, err, errlen))
		return -1;
	if (!applies)
		return 0;
	if (rl_prompt_load(&p, &cfg->data, err, errlen))
		return -1;
	if (rl_prompt_use_chat_template(&p, cfg, err, errlen)) {
		rl_prompt_free(&p);
		return -1;
	}
	/* the episodes keep the template; the prompt's texts go */
	s->chat = p.chat;
	s->chat_vars = p.chat_vars;
	p.chat = NULL;
	p.chat_vars = NULL;
	rl_prompt_free(&p);
	return 0;
}

int rl_episode_settings_init(struct rl_episode_settings *s, const struct rl_config *cfg,
                             const sigset_t *stop_signals, char *err, size_t errlen)
{
	const char *name = cfg->data.env_name;
	const struct rl_cfg_env *env = name ? rl_config_env(cfg, name) : NULL;

	memset(s, 0, sizeof *s);
	if (name ? !(env && env->multi_turn) : !rl_env_builtin_known(cfg->data.dataset_name))
		return 0;
	if (cfg->policy.parallel.expert > 1) {
		snprintf(err, errlen,
		         "policy.parallel.expert: multi-turn episodes (%s) with expert parallelism "
		         "are not implemented in this release; set expert to 1",
		         name ? name : cfg->data.dataset_name);
		return -1;
	}
	if (env && !env->command) {
		snprintf(err, errlen,
		         "env.%s.multi_turn is true but env.%s.command is not set: an environment "
		         "is a program (rl-env(7))",
		         name, name);
		return -1;
	}
	s->enabled = true;
	s->name = strdup(name ? name : cfg->data.dataset_name);
	s->command = !s->name ? NULL
	             : env    ? strdup(env->command)
	                      : builtin_command(s->name, err, errlen);
	if (!s->name || !s->command) {
		if (!s->name || env)
			snprintf(err, errlen, "out of memory");
		rl_episode_settings_free(s);
		return -1;
	}
	s->program = (struct rl_env_program){
	    .command = s->command,
	    .num_workers = env && env->num_workers.set ? (int)env->num_workers.value : 0,
	    .max_in_flight = env ? (int)env->max_episodes_in_flight : 64,
	    .turn_timeout_s =
	        env ? (env->turn_timeout.set ? env->turn_timeout.value : env->timeout) : 60,
	    .episode_timeout_s = env && env->episode_timeout.set ? env->episode_timeout.value : 0,
	};
	if (stop_signals) {
		s->stop_signals = *stop_signals;
		s->program.stop_signals = &s->stop_signals;
	}
	s->max_turns = (int)cfg->grpo.max_rollout_turns;
	s->observation_role = env && env->observation_role ? env->observation_role : "tool";
	if (chat_of(s, cfg, err, errlen)) {
		rl_episode_settings_free(s);
		return -1;
	}
	return 0;
}

void rl_episode_settings_free(struct rl_episode_settings *s)
{
	free(s->name);
	free(s->command);
	rl_chat_template_free(s->chat);
	json_decref(s->chat_vars);
	memset(s, 0, sizeof *s);
}

/* ---- the run's episodes ---- */

struct rl_episodes {
	struct rl_episode_settings set;
	struct rl_comm *mp; /* NULL: one rank */
	bool leader;        /* this rank talks to the environment */
	FILE *log;
	struct rl_env_pool *pool;
	int pool_episodes; /* the most episodes the pool was opened for */
	struct rl_episode_stats stats;
	/* non-colocated, training rank 0: the replicas' failures */
	struct rl_reward_failures received;
};

int rl_episodes_open(struct rl_episodes **out, struct rl_episode_settings *s, struct rl_comm *mp,
                     FILE *log, char *err, size_t errlen)
{
	struct rl_episodes *e = calloc(1, sizeof *e);

	*out = NULL;
	if (!e) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	e->set = *s;
	e->set.program.command = e->set.command;
	if (s->program.stop_signals)
		e->set.program.stop_signals = &e->set.stop_signals;
	memset(s, 0, sizeof *s);
	e->mp = mp && rl_comm_size(mp) > 1 ? mp : NULL;
	e->leader = !e->mp || rl_comm_rank(e->mp) == 0;
	e->log = log;
	*out = e;
	return 0;
}

void rl_episodes_close(struct rl_episodes *e)
{
	if (!e)
		return;
	rl_env_pool_close(e->pool);
	rl_episode_settings_free(&e->set);
	free(e);
}

const char *rl_episodes_name(const struct rl_episodes *e)
{
	return e->set.name;
}

const char *rl_episodes_command(const struct rl_episodes *e)
{
	return e->set.command;
}

void rl_episodes_failures(struct rl_episodes *e, struct rl_reward_failures *fail)
{
	if (!e)
		return;
	if (e->pool)
		rl_env_pool_failures(e->pool, fail);
	rl_reward_failures_add(fail, &e->received);
	memset(&e->received, 0, sizeof e->received);
}

void rl_episodes_take_report(struct rl_episodes *e, struct rl_episodes_report *rep)
{
	struct rl_reward_failures f = {0};

	memset(rep, 0, sizeof *rep);
	rl_episodes_take_stats(e, &rep->stats);
	rl_episodes_failures(e, &f);
	rep->crashed = (int64_t)f.crashed;
	rep->timed_out = (int64_t)f.timed_out;
	rep->bad_output = (int64_t)f.bad_output;
	snprintf(rep->first, sizeof rep->first, "%s", f.first);
}

void rl_episodes_add_report(struct rl_episodes *e, const struct rl_episodes_report *rep)
{
	/* a report's counts are the replica's own: never negative; its text
	 * came over the wire: ended here */
	struct rl_reward_failures f = {
	    .crashed = rep->crashed > 0 ? (size_t)rep->crashed : 0,
	    .timed_out = rep->timed_out > 0 ? (size_t)rep->timed_out : 0,
	    .bad_output = rep->bad_output > 0 ? (size_t)rep->bad_output : 0,
	};

	snprintf(f.first, sizeof f.first, "%.*s", (int)sizeof rep->first - 1, rep->first);
	rl_episode_stats_add(&e->stats, &rep->stats);
	rl_reward_failures_add(&e->received, &f);
}

void rl_episodes_report_add(struct rl_episodes_report *a, const struct rl_episodes_report *b)
{
	rl_episode_stats_add(&a->stats, &b->stats);
	a->crashed += b->crashed;
	a->timed_out += b->timed_out;
	a->bad_output += b->bad_output;
	if (!a->first[0] && b->first[0])
		snprintf(a->first, sizeof a->first, "%.*s", (int)sizeof b->first - 1, b->first);
}

void rl_episodes_take_stats(struct rl_episodes *e, struct rl_episode_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!e)
		return;
	*out = e->stats;
	memset(&e->stats, 0, sizeof e->stats);
}

void rl_episode_stats_add(struct rl_episode_stats *a, const struct rl_episode_stats *b)
{
	a->episodes += b->episodes;
	a->turns += b->turns;
	a->max_turns = b->max_turns > a->max_turns ? b->max_turns : a->max_turns;
	a->natural += b->natural;
	a->truncated += b->truncated;
	a->max_turns_reached += b->max_turns_reached;
	a->failed += b->failed;
	a->gen_tokens += b->gen_tokens;
	a->max_gen_tokens =
	    b->max_gen_tokens > a->max_gen_tokens ? b->max_gen_tokens : a->max_gen_tokens;
	a->env_tokens += b->env_tokens;
	a->total_tokens += b->total_tokens;
}

/* ---- one share ---- */

enum end { END_NONE, END_NATURAL, END_TRUNCATED, END_MAX_TURNS, END_FAILED };

/* One episode of the share: its transcript after the prompt so far. */
struct episode {
	int32_t *ids;
	float *lp;
	uint8_t *mask;
	int len, cap;
	char *text;
	size_t text_len, text_cap;
	int prompt_len, turns, gen_tokens;
	double reward;
	enum end end;
	/* the leader's: the conversation (with a chat template), and the
	 * token text the last turn stopped on (NULL: it stopped otherwise) */
	json_t *messages;
	char *turn_end;
	bool owed; /* its turn went to the environment, unanswered */
};

static int grow_tokens(struct episode *ep, int more)
{
	if (ep->len + more <= ep->cap)
		return 0;
	int cap = ep->cap ? ep->cap : 64;
	while (cap < ep->len + more)
		cap *= 2;
	int32_t *ids = realloc(ep->ids, (size_t)cap * sizeof *ids);
	if (ids)
		ep->ids = ids;
	float *lp = realloc(ep->lp, (size_t)cap * sizeof *lp);
	if (lp)
		ep->lp = lp;
	uint8_t *mask = realloc(ep->mask, (size_t)cap);
	if (mask)
		ep->mask = mask;
	if (!ids || !lp || !mask)
		return -1;
	ep->cap = cap;
	return 0;
}

static int append(struct episode *ep, const int32_t *ids, const float *lp, int n, uint8_t mark)
{
	if (grow_tokens(ep, n))
		return -1;
	memcpy(ep->ids + ep->len, ids, (size_t)n * sizeof *ids);
	for (int i = 0; i < n; i++) {
		ep->lp[ep->len + i] = lp ? lp[i] : 0.0f;
		ep->mask[ep->len + i] = mark;
	}
	ep->len += n;
	return 0;
}

static int append_text(struct episode *ep, const char *t, size_t n)
{
	if (ep->text_len + n + 1 > ep->text_cap) {
		size_t cap = ep->text_cap ? ep->text_cap : 256;
		while (cap < ep->text_len + n + 1)
			cap *= 2;
		char *grown = realloc(ep->text, cap);
		if (!grown)
			return -1;
		ep->text = grown;
		ep->text_cap = cap;
	}
	memcpy(ep->text + ep->text_len, t, n);
	ep->text_len += n;
	ep->text[ep->text_len] = '\0';
	return 0;
}

static void episode_free(struct episode *ep)
{
	free(ep->ids);
	free(ep->lp);
	free(ep->mask);
	free(ep->text);
	json_decref(ep->messages);
	free(ep->turn_end);
}

/* What a share works with. */
struct share {
	struct rl_episodes *e;
	const struct rl_tokenizer *tok;
	const struct rl_gen_settings *g;
	struct rl_gen_session *session;
	struct rl_rollout *r;
	int lo, n;
	int max_len;
	struct episode *ep;
	int over;
	/* the leader's events of one round, for the others too */
	unsigned char *buf;
	size_t buf_len, buf_cap;
	struct rl_env_answer *answers;
};

static int reserve(struct share *sh, size_t n)
{
	if (sh->buf_len + n > sh->buf_cap) {
		size_t cap = sh->buf_cap ? sh->buf_cap : 4096;
		while (cap < sh->buf_len + n)
			cap *= 2;
		unsigned char *grown = realloc(sh->buf, cap);
		if (!grown)
			return -1;
		sh->buf = grown;
		sh->buf_cap = cap;
	}
	return 0;
}

static int put(struct share *sh, const void *p, size_t n)
{
	if (reserve(sh, n))
		return -1;
	if (n)
		memcpy(sh->buf + sh->buf_len, p, n);
	sh->buf_len += n;
	return 0;
}

/* An event: what happened to sequence seq, the same on every rank. */
struct event_head {
	int32_t seq, end; /* end: END_NONE goes on with the observation */
	int32_t n_obs, pad;
	double reward;     /* added to the episode's */
	uint64_t text_len; /* the observation's text, for the transcript */
};

static int turn_budget(const struct share *sh, const struct episode *ep)
{
	int64_t left = (int64_t)sh->max_len - ep->prompt_len - ep->len;

	return (int)(left < sh->g->max_new_tokens ? left : sh->g->max_new_tokens);
}

static int over(struct share *sh, int s, enum end why)
{
	struct episode *ep = &sh->ep[s];

	ep->end = why;
	sh->over++;
	rl_gen_session_finish(sh->session, s);
	if (sh->e->leader && sh->e->pool)
		rl_env_end(sh->e->pool, s);
	return 0;
}

/* Applies one event (every rank): the episode goes on or is over. */
static int apply(struct share *sh, const struct event_head *h, const int32_t *obs, const char *text,
                 char *err, size_t errlen)
{
	struct episode *ep = &sh->ep[h->seq];

	if (h->end == END_FAILED)
		ep->reward = 0;
	else
		ep->reward += h->reward;
	if (h->end != END_NONE)
		return over(sh, h->seq, (enum end)h->end);
	if (append(ep, obs, NULL, h->n_obs, 0) || append_text(ep, text, h->text_len)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return rl_gen_session_continue(sh->session, h->seq, obs, h->n_obs,
	                               (size_t)turn_budget(sh, ep), err, errlen);
}

/* The leader's: an answer as an event into the round's buffer. */
static int answer_event(struct share *sh, const struct rl_env_answer *a, char *err, size_t errlen)
{
	struct rl_episodes *e = sh->e;
	struct episode *ep = a->episode >= 0 && a->episode < sh->n ? &sh->ep[a->episode] : NULL;
	struct event_head h = {.seq = a->episode, .reward = a->reward};
	int32_t *ids = NULL;
	size_t n_ids = 0;
	char *text = NULL;
	int rc = -1;

	/* only an answer owed counts (the pool owes none after an end) */
	if (!ep || !ep->owed || ep->end != END_NONE)
		return 0;
	ep->owed = false;
	if (a->outcome != RL_ENV_ANSWERED) {
		h.end = END_FAILED;
	} else if (a->done) {
		h.end = END_NATURAL;
	} else if (ep->turns >= e->set.max_turns) {
		h.end = END_MAX_TURNS;
	} else {
		struct rl_observation o = {e->set.chat, e->set.chat_vars, e->set.observation_role,
		                           sh->tok};
		/* rendered after the turn (as its text, without a template),
		 * then kept in the conversation */
		if (rl_observation_render(&o, ep->messages, ep->turn_end, a->observation,
		                          a->observation_len, &ids, &n_ids, &text, err, errlen))
			goto out;
		if (ep->messages) {
			json_t *m = json_pack("{s:s, s:s%}", "role", e->set.observation_role,
			                      "content", a->observation, a->observation_len);
			if (!m || json_array_append_new(ep->messages, m)) {
				snprintf(err, errlen, "out of memory");
				goto out;
			}
		}
		/* the observation must fit with at least one token for the model */
		if ((int64_t)ep->prompt_len + ep->len + (int64_t)n_ids + 1 > sh->max_len) {
			h.end = END_TRUNCATED;
			n_ids = 0;
		} else {
			h.n_obs = (int32_t)n_ids;
			h.text_len = strlen(text);
		}
	}
	if (put(sh, &h, sizeof h) || put(sh, ids, (size_t)h.n_obs * sizeof *ids) ||
	    put(sh, text, (size_t)h.text_len)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	free(ids);
	free(text);
	return rc;
}

/* The turn s ended with: into its transcript, and (the leader) its
 * message to the environment. */
static int take_turn(struct share *sh, int s, char *err, size_t errlen)
{
	struct episode *ep = &sh->ep[s];
	const struct rl_gen_output *o = rl_gen_session_turn(sh->session, s);
	const char *text = o->text ? o->text : "";
	size_t text_len = o->text ? o->text_len : 0;

	if (append(ep, o->tokens, o->logprobs, (int)o->n_tokens, 1) ||
	    append_text(ep, text, text_len)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	ep->turns++;
	ep->gen_tokens += (int)o->n_tokens;
	if (!sh->e->leader)
		return 0;
	free(ep->turn_end);
	ep->turn_end = NULL;
	if (ep->messages) {
		/* the model's end-of-turn token is in the sequence: the
		 * observation's tokens start after it */
		if ((o->reason == RL_STOP_EOS || o->reason == RL_STOP_TOKEN) && o->n_tokens > 0) {
			size_t n;
			if (rl_tokenizer_decode(sh->tok, o->tokens + o->n_tokens - 1, 1, false,
			                        &ep->turn_end, &n, err, errlen))
				return -1;
		}
		json_t *m =
		    json_pack("{s:s, s:s%}", "role", "assistant", "content", text, text_len);
		if (!m || json_array_append_new(ep->messages, m)) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	ep->owed = true;
	return rl_env_act(sh->e->pool, s, text, text_len, err, errlen);
}

/* The leader: the answers there are (waiting for one when the session has
 * nothing to do) as the round's events. */
static int collect(struct share *sh, char *err, size_t errlen)
{
	int n = 0;
	double wait = rl_gen_session_busy(sh->session) ? 0 : -1;

	sh->buf_len = 0;
	if (rl_env_wait(sh->e->pool, wait, sh->answers, sh->n, &n, err, errlen))
		return -1;
	int rc = 0;
	for (int i = 0; i < n; i++) {
		if (rc == 0 && answer_event(sh, &sh->answers[i], err, errlen))
			rc = -1;
		free(sh->answers[i].observation);
	}
	return rc;
}

/* Every rank: the round's events, from the leader, applied. */
static int round_events(struct share *sh, bool failed, char *err, size_t errlen)
{
	/* a round the leader failed (the environment could not be reached
	 * at all) ends the share on every rank of the group, not on it alone */
	int64_t len = failed ? -1 : (int64_t)sh->buf_len;

	if (!sh->e->mp && failed)
		return -1;
	if (sh->e->mp) {
		rl_comm_broadcast(sh->e->mp, &len, 1, RL_COMM_I64, 0, "an episode round's size");
		if (failed)
			return -1;
		if (len < 0) {
			snprintf(err, errlen,
			         "the episodes failed on the first rank of this model group, which "
			         "talks to the environment (its message says why)");
			return -1;
		}
		if (!sh->e->leader) {
			sh->buf_len = 0;
			if (reserve(sh, (size_t)len)) {
				snprintf(err, errlen,
				         "an episode round of %lld bytes: out of memory",
				         (long long)len);
				return -1;
			}
			sh->buf_len = (size_t)len;
		}
		if (len > 0)
			rl_comm_broadcast(sh->e->mp, sh->buf, (size_t)len, RL_COMM_U8, 0,
			                  "an episode round's events");
	}
	size_t at = 0;
	while (at < sh->buf_len) {
		struct event_head h;

		memcpy(&h, sh->buf + at, sizeof h);
		at += sizeof h;
		if (h.seq < 0 || h.seq >= sh->n || h.n_obs < 0 ||
		    at + (size_t)h.n_obs * sizeof(int32_t) + h.text_len > sh->buf_len) {
			snprintf(err, errlen, "an episode round's events do not read back");
			return -1;
		}
		/* copies: the buffer is not aligned for the tokens */
		int32_t *obs = malloc((size_t)h.n_obs * sizeof *obs + 1);
		if (!obs) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		memcpy(obs, sh->buf + at, (size_t)h.n_obs * sizeof *obs);
		at += (size_t)h.n_obs * sizeof *obs;
		int rc = apply(sh, &h, obs, (const char *)sh->buf + at, err, errlen);
		at += h.text_len;
		free(obs);
		if (rc)
			return -1;
	}
	return 0;
}

static int begin(struct share *sh, const int32_t *const *prompt, const int *prompt_len, char *err,
                 size_t errlen)
{
	struct rl_episodes *e = sh->e;
	struct rl_rollout *r = sh->r;

	if (e->leader && (!e->pool || e->pool_episodes < sh->n)) {
		rl_env_pool_close(e->pool);
		e->pool = NULL;
		if (rl_env_pool_open(&e->set.program, sh->n, e->log, &e->pool, err, errlen))
			return -1;
		e->pool_episodes = sh->n;
	}
	for (int j = 0; j < sh->n; j++) {
		struct episode *ep = &sh->ep[j];
		int i = sh->lo + j, k = r->s[i].group;

		ep->prompt_len = prompt_len[i];
		if (e->leader) {
			struct rl_env_start st = {r->prompts[k], r->problems[k], r->answers[k],
			                          r->metadata ? r->metadata[k] : NULL};
			if (e->set.chat &&
			    !(ep->messages = json_pack("[{s:s, s:s}]", "role", "user", "content",
			                               r->problems[k] ? r->problems[k] : ""))) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			if (rl_env_begin(e->pool, j, &st, err, errlen))
				return -1;
		}
		if (rl_gen_session_add(sh->session, j, prompt[i], prompt_len[i],
		                       (size_t)turn_budget(sh, ep), err, errlen))
			return -1;
	}
	return 0;
}

/* Turns, answers and observations until every episode is over. */
static int play(struct share *sh, char *err, size_t errlen)
{
	int *ended = calloc((size_t)sh->n + 1, sizeof *ended);
	int rc = -1;

	if (!ended) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	while (sh->over < sh->n) {
		int n_ended = 0;

		if (rl_gen_session_busy(sh->session) &&
		    rl_gen_session_step(sh->session, ended, &n_ended, err, errlen))
			goto out;
		bool failed = false;
		for (int i = 0; i < n_ended && !failed; i++)
			failed = take_turn(sh, ended[i], err, errlen) != 0;
		if (!failed && sh->e->leader)
			failed = collect(sh, err, errlen) != 0;
		if (round_events(sh, failed, err, errlen))
			goto out;
	}
	rc = 0;
out:
	free(ended);
	return rc;
}

/* Episode j as sample lo + j. */
static int take_sample(struct share *sh, int j, const int32_t *prompt)
{
	struct episode *ep = &sh->ep[j];
	struct rl_sample *s = &sh->r->s[sh->lo + j];
	struct rl_episode_stats *st = &sh->e->stats;

	s->prompt_len = ep->prompt_len;
	s->len = ep->prompt_len + ep->len;
	s->ids = malloc((size_t)s->len * sizeof *s->ids + 1);
	s->gen_lp = calloc((size_t)ep->len + 1, sizeof *s->gen_lp);
	s->prev_lp = calloc((size_t)ep->len + 1, sizeof *s->prev_lp);
	s->ref_lp = calloc((size_t)ep->len + 1, sizeof *s->ref_lp);
	s->loss_mask = calloc((size_t)s->len + 1, 1);
	if (!s->ids || !s->gen_lp || !s->prev_lp || !s->ref_lp || !s->loss_mask)
		return -1;
	memcpy(s->ids, prompt, (size_t)ep->prompt_len * sizeof *s->ids);
	if (ep->len) {
		memcpy(s->ids + ep->prompt_len, ep->ids, (size_t)ep->len * sizeof *s->ids);
		memcpy(s->gen_lp, ep->lp, (size_t)ep->len * sizeof *s->gen_lp);
		memcpy(s->loss_mask + ep->prompt_len, ep->mask, (size_t)ep->len);
	}
	s->response = ep->text ? ep->text : strdup("");
	ep->text = NULL;
	if (!s->response)
		return -1;
	s->turns = ep->turns;
	s->env_scored = true;
	s->reward = ep->reward;
	s->truncated = ep->end == END_TRUNCATED;
	if (sh->g->overlong_filtering && s->truncated)
		s->loss_mult = 0;

	st->episodes++;
	st->turns += ep->turns;
	st->max_turns = ep->turns > st->max_turns ? ep->turns : st->max_turns;
	st->natural += ep->end == END_NATURAL;
	st->truncated += ep->end == END_TRUNCATED;
	st->max_turns_reached += ep->end == END_MAX_TURNS;
	st->failed += ep->end == END_FAILED;
	st->gen_tokens += ep->gen_tokens;
	st->max_gen_tokens =
	    ep->gen_tokens > st->max_gen_tokens ? ep->gen_tokens : st->max_gen_tokens;
	st->env_tokens += ep->len - ep->gen_tokens;
	st->total_tokens += s->len;
	return 0;
}

int rl_rollout_episodes_share(struct rl_episodes *e, struct rl_model *m,
                              const struct rl_tokenizer *tok, const struct rl_gen_settings *g,
                              struct rl_comm *dp, struct rl_rollout *r, uint64_t seed,
                              int64_t *prompts_truncated, char *err, size_t errlen)
{
	int32_t **ids = calloc((size_t)r->n_groups + 1, sizeof *ids);
	int *lens = calloc((size_t)r->n_groups + 1, sizeof *lens);
	const int32_t **prompt = calloc((size_t)r->n + 1, sizeof *prompt);
	int *prompt_len = calloc((size_t)r->n + 1, sizeof *prompt_len);
	struct share sh = {.e = e, .tok = tok, .g = g, .r = r, .max_len = (int)g->max_total_tokens};
	int rc = -1, hi;

	rl_share_range(dp, r->n, &sh.lo, &hi);
	sh.n = hi - sh.lo;
	sh.ep = calloc((size_t)sh.n + 1, sizeof *sh.ep);
	sh.answers = calloc((size_t)sh.n + 1, sizeof *sh.answers);
	if (!ids || !lens || !prompt || !prompt_len || !sh.ep || !sh.answers) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	if (rl_gen_encode_prompts(tok, g, r, ids, lens, prompts_truncated, err, errlen))
		goto done;
	for (int i = 0; i < r->n; i++) {
		prompt[i] = ids[r->s[i].group];
		prompt_len[i] = lens[r->s[i].group];
	}
	if (sh.n > 0) {
		struct rl_gen_params p;

		rl_gen_params_of(g, seed, (uint64_t)sh.lo, (size_t)g->max_new_tokens, &p);
		/* an episode waiting for its environment keeps its cache but
		 * not its running slot (generation_batch_size bounds a step's
		 * batch, as vLLM's max_num_seqs; the cache's blocks the
		 * episodes in flight) */
		p.max_in_flight = sh.n;
		if (rl_gen_session_new(m, tok, &p, sh.n, sh.max_len, &sh.session, err, errlen))
			goto done;
		/* the leader's start of the environment, agreed on as a round
		 * with no events: a failure ends the share on every rank */
		bool failed = begin(&sh, prompt, prompt_len, err, errlen) != 0;
		if (round_events(&sh, failed, err, errlen) || play(&sh, err, errlen))
			goto done;
		for (int j = 0; j < sh.n; j++)
			if (take_sample(&sh, j, prompt[sh.lo + j])) {
				snprintf(err, errlen, "out of memory");
				goto done;
			}
	}
	rc = 0;
done:
	if (rc && e->leader && e->pool) {
		/* episodes left in play are over for us: a later share begins
		 * them again */
		for (int j = 0; j < sh.n; j++)
			if (sh.ep && sh.ep[j].end == END_NONE)
				rl_env_end(e->pool, j);
	}
	rl_gen_session_free(sh.session);
	for (int j = 0; sh.ep && j < sh.n; j++)
		episode_free(&sh.ep[j]);
	free(sh.ep);
	free(sh.answers);
	free(sh.buf);
	for (int k = 0; ids && k < r->n_groups; k++)
		free(ids[k]);
	free(ids);
	free(lens);
	free(prompt);
	free(prompt_len);
	return rc;
}
