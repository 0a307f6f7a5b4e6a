#define _GNU_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "runtime/train/checkpoint.h"
#include "runtime/train/stop.h"
#include "runtime/train/train.h"

int rl_trainer_stop(struct rl_trainer *t, struct rl_job_watch *w, int reason, int64_t done,
                    int64_t saved, const struct rl_step_metrics *m, char *err, size_t errlen)
{
	struct rl_comm *world = t->dist ? t->dist->g[RL_G_WORLD] : NULL;
	int save = rl_trainer_is_main(t)
	               ? rl_job_save_fits(w, reason, done, t->cfg->grpo.max_num_steps, saved,
	                                  t->ckpt->last_seconds)
	               : 0;

	if (world)
		rl_comm_broadcast(world, &save, 1, RL_COMM_I32, 0, "stop: save");
	if (t->progress && t->ckpt->in_flight && !atomic_load(&t->ckpt->written))
		fprintf(t->progress,
		        "rlrun train: checkpoint step_%" PRId64 " is still being written: it is "
		        "finished first\n",
		        t->ckpt->step);
	if ((save && rl_trainer_save(t, done, m, err, errlen)) ||
	    rl_trainer_save_poll(t, true, err, errlen))
		return -1;

	int requeued = 1;
	if (rl_trainer_is_main(t))
		requeued = rl_job_requeue(w, t->ckpt->committed, done, err, errlen) == 0;
	if (world)
		rl_comm_broadcast(world, &requeued, 1, RL_COMM_I32, 0, "stop: requeue");
	if (!requeued && !rl_trainer_is_main(t))
		err[0] = '\0';
	return requeued ? 0 : RL_TRAIN_AGREED_FAILURE;
}
