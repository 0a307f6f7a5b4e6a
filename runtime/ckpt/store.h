/* The layout of checkpointing.checkpoint_dir and the moves that keep it
 * consistent through crashes:
 *   tmp_step_N/   being written; never loaded, removed at the next start
 *   step_N/       committed: renamed from tmp_step_N after every file and
 *                 the manifest were durable
 *   latest        "step_N\n", replaced by rename after each commit
 *   removing_*    on its way out (renamed first, so that a half-removed
 *                 directory never looks like a checkpoint)
 *   rejected_step_N  failed verification at a start; kept for the user
 *   latest.tmp    a commit cut short; removed at the next start
 * defines: RL_CKPT_LATEST, rl_ckpt_path, struct rl_ckpt_listing, rl_ckpt_scan,
 * rl_ckpt_listing_free, rl_ckpt_begin, rl_ckpt_commit, rl_ckpt_remove,
 * rl_ckpt_clean_leftovers */
#ifndef RL_CKPT_STORE_H
#define RL_CKPT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RL_CKPT_LATEST "latest"

/* ROOT/step_N or ROOT/tmp_step_N into buf. */
int rl_ckpt_path(char *buf, size_t len, const char *root, int64_t step, bool tmp, char *err,
                 size_t errlen);

struct rl_ckpt_listing {
	int64_t *steps; /* step_N directories holding a manifest, ascending */
	int n;
	char **leftovers; /* tmp_step_N, removing_* and latest.tmp */
	int n_leftovers;
};

/* A missing ROOT lists nothing. */
int rl_ckpt_scan(const char *root, struct rl_ckpt_listing *l, char *err, size_t errlen);
void rl_ckpt_listing_free(struct rl_ckpt_listing *l);

/* Creates ROOT (and parents) and ROOT/tmp_step_N; every rank may call it. */
int rl_ckpt_begin(const char *root, int64_t step, char *err, size_t errlen);
/* After ROOT/tmp_step_N holds every file and its manifest: renames it to
 * step_N (one already there is removed), makes that durable, then
 * replaces ROOT/latest. One rank only. */
int rl_ckpt_commit(const char *root, int64_t step, char *err, size_t errlen);
/* Removes ROOT/NAME: a directory of plain files, renamed first, or a
 * plain file. */
int rl_ckpt_remove(const char *root, const char *name, char *err, size_t errlen);
/* Removes what a crash left: the listing's leftovers. */
int rl_ckpt_clean_leftovers(const char *root, char *err, size_t errlen);

#endif
