/* The bridge between training rank 0 and the generation ranks
 * (non-colocated generation), as both ends of it speak: a command is a
 * fixed head broadcast over the bridge, then its payload (for a rollout,
 * the prompts as length-prefixed strings); training rank 0 starts the
 * broadcasts and goes on (outbox.h). The samples come back point to
 * point, one packet per generation replica, from its first
 * tensor-parallel rank (a multi-turn run's followed by the episodes'
 * report, rollout/episodes.h), which sends it the same way and goes on to
 * the next command: neither side waits for the other but to receive. Inside
 * the rollout room: remote.c and async.c speak for the training ranks,
 * serve.c for the generation ranks.
 * defines: enum rl_bridge_command_kind, struct rl_bridge_command, rl_remote_request,
 * rl_remote_receive, rl_remote_send_weights, rl_remote_end */
#ifndef RL_ROLLOUT_BRIDGE_H
#define RL_ROLLOUT_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/rollout/source.h"

enum rl_bridge_command_kind { RL_CMD_GENERATE = 1, RL_CMD_REFIT, RL_CMD_STOP };

struct rl_bridge_command {
	int32_t kind, n_groups, group_size, pad;
	uint64_t seed;
	int64_t payload_bytes;
};

/* Training rank 0 sends the request for r's prompts sampled with seed
 * (the other training ranks return at once); every training rank later
 * receives what it asked for, every sample of r filled. Between the two
 * the generation ranks generate while training goes on. */
int rl_remote_request(struct rl_rollout_source *s, const struct rl_rollout *r, uint64_t seed,
                      char *err, size_t errlen);
/* keep (multi-turn): the replicas' episodes' reports summed there, for
 * the step that trains on r to count (a rollout received ahead, or saved
 * with a checkpoint, is not that step's); NULL: counted at once. */
int rl_remote_receive(struct rl_rollout_source *s, struct rl_rollout *r, struct rl_wire_info *info,
                      struct rl_episodes_report *keep, char *err, size_t errlen);
/* Every training rank: the generation ranks take the weights as they are
 * now (the first model replica sends them), once they are done with what
 * was asked before. later: training rank 0 keeps a copy of the weights
 * until they take it, and waits only for the refit before. */
int rl_remote_send_weights(struct rl_rollout_source *s, bool later, char *err, size_t errlen);
/* Training rank 0, at the end of the run: the rollouts still in flight are
 * taken (and left unused), and the generation ranks return. */
void rl_remote_end(struct rl_rollout_source *s);

#endif
