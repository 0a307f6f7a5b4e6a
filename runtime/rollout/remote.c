/* Non-colocated generation, the training ranks' side: training rank 0
 * leads, sends each command over the bridge, collects the generation
 * replicas' samples and passes them on to the other training ranks
 * (bridge.h says how the two ends speak). The synchronous source asks for
 * a step's rollout and waits for it, and refits after every step. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "runtime/rollout/bridge.h"
#include "runtime/rollout/episodes.h"
#include "runtime/rollout/refit.h"
#include "runtime/rollout/source.h"

/* Megatron's default bucket is 40M parameters; the refit's is 64 MiB of
 * fp32 weights (a small model goes in one). */
#define REFIT_BUCKET_BYTES (64u << 20)

/* Training rank 0: c and its payload (malloc'd; the command takes it)
 * go out without waiting for the generation ranks, which take them in
 * order when they are done with what came before. */
static void send_command(struct rl_rollout_source *s, const struct rl_bridge_command *c,
                         void *payload)
{
	struct rl_comm *bridge = s->ctx.dist->bridge;
	struct rl_bridge_command *head = malloc(sizeof *head);

	if (!head) {
		/* out of memory for the copy: sent and waited for at once */
		struct rl_bridge_command now = *c;

		rl_comm_broadcast(bridge, &now, sizeof now, RL_COMM_U8, 0,
		                  "a command to the generation ranks");
	} else {
		*head = *c;
		rl_outbox_add(&s->bridge_out,
		              rl_comm_start_broadcast(bridge, head, sizeof *head, RL_COMM_U8, 0,
		                                      "a command to the generation ranks"),
		              head);
	}
	if (c->payload_bytes > 0)
		rl_outbox_add(&s->bridge_out,
		              rl_comm_start_broadcast(bridge, payload, (size_t)c->payload_bytes,
		                                      RL_COMM_U8, 0, "a command's payload"),
		              payload);
	else
		free(payload);
}

/* Training rank 0: every generation replica's packet into r, in replica
 * order. */
static int collect(struct rl_rollout_source *s, struct rl_rollout *r, struct rl_wire_info *got,
                   struct rl_episodes_report *keep, char *err, size_t errlen)
{
	struct rl_comm *bridge = s->ctx.dist->bridge;
	int gen_tp = s->ctx.generation_tp;
	int replicas = (rl_comm_size(bridge) - 1) / gen_tp;
	unsigned char *buf = NULL;

	for (int k = 0; k < replicas; k++) {
		int peer = 1 + k * gen_tp;
		int64_t size;
		struct rl_wire_info info;

		rl_comm_recv(bridge, &size, 1, RL_COMM_I64, peer, "rollout packet size");
		unsigned char *grown = size >= 0 ? realloc(buf, (size_t)size + 1) : NULL;
		if (!grown) {
			snprintf(err, errlen,
			         "out of memory for generation replica %d's %lld bytes", k,
			         (long long)size);
			free(buf);
			return -1;
		}
		buf = grown;
		rl_comm_recv(bridge, buf, (size_t)size, RL_COMM_U8, peer, "rollout packet");
		char why[512];
		if (rl_wire_unpack(buf, (size_t)size, r, (int)s->ctx.gen->max_total_tokens, &info,
		                   why, sizeof why)) {
			snprintf(err, errlen, "generation replica %d: %s", k, why);
			free(buf);
			return -1;
		}
		/* multi-turn: the replica's episodes, reported after them */
		if (s->ctx.episodes) {
			struct rl_episodes_report rep;

			rl_comm_recv(bridge, &rep, sizeof rep, RL_COMM_U8, peer, "episodes report");
			rep.first[sizeof rep.first - 1] = '\0';
			if (keep)
				rl_episodes_report_add(keep, &rep);
			else
				rl_episodes_add_report(s->ctx.episodes, &rep);
		}
		/* every replica counted the prompts; the slowest sets the pace */
		if (k == 0)
			got->prompts_truncated = info.prompts_truncated;
		if (info.generation_s > got->generation_s)
			got->generation_s = info.generation_s;
	}
	free(buf);
	for (int i = 0; i < r->n; i++)
		if (!r->s[i].ids) {
			snprintf(err, errlen, "no generation replica sent sample %d", i);
			return -1;
		}
	return 0;
}

/* Training rank 0's rollout to the other training ranks. */
static int pass_on(struct rl_rollout_source *s, struct rl_rollout *r, struct rl_wire_info *info,
                   char *err, size_t errlen)
{
	struct rl_comm *world = s->ctx.dist->g[RL_G_WORLD];
	struct rl_wire w = {0};
	int64_t size = 0;
	int rc = -1;

	if (rl_comm_size(world) == 1)
		return 0;
	bool leader = rl_comm_rank(world) == 0;
	if (leader && rl_wire_pack(&w, r, 0, r->n, info)) {
		snprintf(err, errlen, "out of memory");
		size = -1;
	} else {
		size = (int64_t)w.len;
	}
	rl_comm_broadcast(world, &size, 1, RL_COMM_I64, 0, "rollout size");
	if (size < 0) {
		snprintf(err, errlen, "training rank 0 could not pack the rollout");
		goto done;
	}
	if (!leader && !(w.buf = malloc((size_t)size + 1))) {
		snprintf(err, errlen, "out of memory for a rollout of %lld bytes", (long long)size);
		goto done;
	}
	rl_comm_broadcast(world, w.buf, (size_t)size, RL_COMM_U8, 0, "rollout");
	if (!leader && rl_wire_unpack(w.buf, (size_t)size, r, (int)s->ctx.gen->max_total_tokens,
	                              info, err, errlen))
		goto done;
	rc = 0;
done:
	rl_wire_free(&w);
	return rc;
}

int rl_remote_request(struct rl_rollout_source *s, const struct rl_rollout *r, uint64_t seed,
                      char *err, size_t errlen)
{
	struct rl_wire prompts = {0};
	struct rl_bridge_command c = {.kind = RL_CMD_GENERATE,
	                              .n_groups = r->n_groups,
	                              .group_size = r->group_size,
	                              .seed = seed};

	if (!s->ctx.dist->bridge)
		return 0;
	/* the groups whole: generation ranks that play episodes give each
	 * environment its problem, answer and metadata */
	if (rl_wire_pack_groups(&prompts, r)) {
		rl_wire_free(&prompts);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c.payload_bytes = (int64_t)prompts.len;
	send_command(s, &c, prompts.buf);
	return 0;
}

int rl_remote_receive(struct rl_rollout_source *s, struct rl_rollout *r, struct rl_wire_info *info,
                      struct rl_episodes_report *keep, char *err, size_t errlen)
{
	memset(info, 0, sizeof *info);
	if (keep)
		memset(keep, 0, sizeof *keep);
	if (s->ctx.dist->bridge && collect(s, r, info, keep, err, errlen))
		return -1;
	return pass_on(s, r, info, err, errlen);
}

/* Training rank 0's ep group, on its members; NULL elsewhere and
 * without expert parallelism. */
static struct rl_comm *leaders_experts(const struct rl_rollout_source *s)
{
	struct rl_comm *ep = s->ctx.dist->g[RL_G_EP];

	if (s->ctx.model->shard.ep.size <= 1 || !ep)
		return NULL;
	for (int r = 0; r < rl_comm_size(ep); r++)
		if (rl_comm_world_rank(ep, r) == 0)
			return ep;
	return NULL;
}

int rl_remote_send_weights(struct rl_rollout_source *s, bool later, char *err, size_t errlen)
{
	const struct rl_coords *c = &s->ctx.dist->coords;
	struct rl_outbox *keep = later ? &s->bridge_out : NULL;
	/* the first model replica holds the dense tensors the generation
	 * ranks need; training rank 0's ep group every expert */
	struct rl_refit_sender from = {
	    .bridge = s->ctx.dist->bridge,
	    .dense = c->rank[RL_AXIS_DP] == 0 && c->rank[RL_AXIS_CP] == 0,
	    .experts = leaders_experts(s),
	};

	if (s->ctx.dist->bridge) {
		struct rl_bridge_command cmd = {.kind = RL_CMD_REFIT};

		if (keep)
			rl_outbox_drain(keep);
		send_command(s, &cmd, NULL);
		if (!keep)
			rl_outbox_drain(&s->bridge_out);
	}
	if (!from.dense && !from.experts)
		return 0;
	return rl_refit_send(s->ctx.model, &from, REFIT_BUCKET_BYTES, keep, err, errlen);
}

void rl_remote_end(struct rl_rollout_source *s)
{
	struct rl_bridge_command c = {.kind = RL_CMD_STOP};

	if (!s->ctx.dist || !s->ctx.dist->bridge)
		return;
	/* the generation ranks finish what they were asked for, and hold
	 * their packets until someone takes them */
	for (int k = 0; k < s->ahead.n; k++) {
		struct rl_inflight *e = &s->ahead.q[k];
		struct rl_wire_info info = {0};
		char err[512];

		if (!e->received && collect(s, &e->r, &info, &e->episodes, err, sizeof err) == 0)
			e->received = true;
	}
	send_command(s, &c, NULL);
	rl_outbox_drain(&s->bridge_out);
}

/* ---- the synchronous source ---- */

static int remote_generate(struct rl_rollout_source *s, struct rl_rollout *r, uint64_t seed,
                           int64_t *prompts_truncated, char *err, size_t errlen)
{
	struct rl_wire_info info;

	if (rl_remote_request(s, r, seed, err, errlen) ||
	    rl_remote_receive(s, r, &info, NULL, err, errlen))
		return -1;
	*prompts_truncated += info.prompts_truncated;
	return 0;
}

static int remote_send_weights(struct rl_rollout_source *s, char *err, size_t errlen)
{
	return rl_remote_send_weights(s, false, err, errlen);
}

const struct rl_rollout_source_ops rl_rollout_remote = {
    .generate = remote_generate,
    .send_weights = remote_send_weights,
    .end = rl_remote_end,
};
