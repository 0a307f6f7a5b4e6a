/* run_state.json: what a run needs besides tensors to go on exactly where
 * it stopped. There is no generator state to save: every random stream of
 * a run is a function of grpo.seed and a counter saved here (the sampler's
 * of the step, the data order's of the epoch, a synthetic task's of the
 * problem number), see rlrun(1).
 * defines: struct rl_ckpt_run_state, rl_ckpt_model_signature,
 * rl_ckpt_run_state_json, rl_ckpt_run_state_parse, rl_ckpt_run_state_read,
 * rl_ckpt_read_text, rl_ckpt_read_whole */
#ifndef RL_CKPT_RUN_STATE_H
#define RL_CKPT_RUN_STATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/model/hf_config.h"

#define RL_CKPT_RUN_STATE "run_state.json"
#define RL_CKPT_CONFIG    "config.yaml"

struct rl_ckpt_run_state {
	int64_t step;            /* GRPO steps finished */
	int64_t optimizer_steps; /* AdamW updates taken */
	int64_t consumed_samples;
	uint64_t seed;
	/* the data loader: a dataset's epoch and position in it, or a
	 * synthetic task's next problem number */
	int64_t data_epoch;
	uint64_t data_position, data_examples;
	int64_t data_next_problem;
	char model_signature[512]; /* rl_ckpt_model_signature */
	uint64_t reference_xxh3;   /* of the starting weights, which are the reference policy */
	uint64_t teacher_xxh3;     /* on-policy distillation's teacher; 0: none (not written) */
	/* the layout that wrote it, for messages: any layout can load it */
	int world_size, tensor, pipeline, context, data;
	int64_t slurm_job_id; /* 0 outside Slurm */
	int restart_count;
	json_t *metrics; /* the step's metrics line (owned; may be NULL) */
};

/* The architecture as text: every field of config.json that changes a
 * tensor's shape or what the model computes. Two configs with the same
 * signature load each other's weights and mean the same thing by them. */
void rl_ckpt_model_signature(const struct rl_model_config *c, char *buf, size_t len);

/* The JSON text (malloc'd), or NULL when out of memory. */
char *rl_ckpt_run_state_json(const struct rl_ckpt_run_state *s);
/* Parses text read from PATH (named in messages) into s; s->metrics is
 * then a new reference the caller releases with json_decref. */
int rl_ckpt_run_state_parse(struct rl_ckpt_run_state *s, const char *text, size_t len,
                            const char *path, char *err, size_t errlen);

/* DIR/run_state.json read and parsed, as rl_ckpt_run_state_parse. */
int rl_ckpt_run_state_read(struct rl_ckpt_run_state *s, const char *dir, char *err, size_t errlen);

/* A whole small file (at most 64 MiB), NUL-terminated; *len without it. */
char *rl_ckpt_read_text(const char *path, size_t *len, char *err, size_t errlen);
/* The same with another limit, in bytes. */
char *rl_ckpt_read_whole(const char *path, size_t limit, size_t *len, char *err, size_t errlen);

#endif
