#include <stdio.h>
#include <stdlib.h>

#include "runtime/generate/session.h"

/* SKELETON: the multi-turn session lands with issue 31's engine work. */
int rl_gen_session_new(struct rl_model *m, const struct rl_tokenizer *tok,
                       const struct rl_gen_params *p, int n_seqs, int max_len,
                       struct rl_gen_session **out, char *err, size_t errlen)
{
	(void)m;
	(void)tok;
	(void)p;
	(void)n_seqs;
	(void)max_len;
	*out = NULL;
	snprintf(err, errlen, "multi-turn generation is not implemented yet");
	return -1;
}

int rl_gen_session_add(struct rl_gen_session *g, int s, const int32_t *prompt, int len,
                       size_t max_new_tokens, char *err, size_t errlen)
{
	(void)g;
	(void)s;
	(void)prompt;
	(void)len;
	(void)max_new_tokens;
	snprintf(err, errlen, "multi-turn generation is not implemented yet");
	return -1;
}

int rl_gen_session_step(struct rl_gen_session *g, int *ended, int *n_ended, char *err,
                        size_t errlen)
{
	(void)g;
	(void)ended;
	*n_ended = 0;
	snprintf(err, errlen, "multi-turn generation is not implemented yet");
	return -1;
}

bool rl_gen_session_busy(const struct rl_gen_session *g)
{
	(void)g;
	return false;
}

const struct rl_gen_output *rl_gen_session_turn(const struct rl_gen_session *g, int s)
{
	(void)g;
	(void)s;
	return NULL;
}

int rl_gen_session_continue(struct rl_gen_session *g, int s, const int32_t *obs, int n_obs,
                            size_t max_new_tokens, char *err, size_t errlen)
{
	(void)g;
	(void)s;
	(void)obs;
	(void)n_obs;
	(void)max_new_tokens;
	snprintf(err, errlen, "multi-turn generation is not implemented yet");
	return -1;
}

void rl_gen_session_finish(struct rl_gen_session *g, int s)
{
	(void)g;
	(void)s;
}

void rl_gen_session_free(struct rl_gen_session *g)
{
	(void)g;
}
