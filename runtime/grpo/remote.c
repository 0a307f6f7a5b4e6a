/* A command is a fixed head broadcast over the bridge, then its payload
 * (for a rollout, the prompts as length-prefixed strings); training rank 0
 * starts the broadcasts and goes on (outbox.h). The samples come back
 * point to point, one packet per generation replica, from its first
 * tensor-parallel rank, which sends it the same way and goes on to the next
 * command: neither side waits for the other but to receive. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/comm/outbox.h"
#include "runtime/grpo/refit.h"
#include "runtime/grpo/remote.h"
#include "runtime/grpo/rollout_wire.h"
#include "runtime/grpo/share.h"

/* Megatron's default bucket is 40M parameters; the refit's is 64 MiB of
 * fp32 weights (a small model goes in one). */
#define REFIT_BUCKET_BYTES (64u << 20)

enum command_kind { CMD_GENERATE = 1, CMD_REFIT, CMD_STOP };

struct command {
	int32_t kind, n_groups, group_size, pad;
	uint64_t seed;
	int64_t payload_bytes;
};

/* Training rank 0: c and its payload (malloc'd; the command takes it)
 * go out without waiting for the generation ranks, which take them in
 * order when they are done with what came before. */
static void send_command(struct rl_trainer *t, const struct command *c, void *payload)
{
	struct rl_comm *bridge = t->dist->bridge;
	struct command *head = malloc(sizeof *head);

	if (!head) {
		/* out of memory for the copy: sent and waited for at once */
		struct command now = *c;

		rl_comm_broadcast(bridge, &now, sizeof now, RL_COMM_U8, 0,
		                  "a command to the generation ranks");
	} else {
		*head = *c;
		rl_outbox_add(&t->bridge_out,
		              rl_comm_start_broadcast(bridge, head, sizeof *head, RL_COMM_U8, 0,
		                                      "a command to the generation ranks"),
		              head);
	}
	if (c->payload_bytes > 0)
		rl_outbox_add(&t->bridge_out,
		              rl_comm_start_broadcast(bridge, payload, (size_t)c->payload_bytes,
		                                      RL_COMM_U8, 0, "a command's payload"),
		              payload);
	else
		free(payload);
}

/* Training rank 0: every generation replica's packet into r, in replica
 * order. */
static int collect(struct rl_trainer *t, struct rl_rollout *r, struct rl_wire_info *got, char *err,
                   size_t errlen)
{
	int gen_tp = (int)t->cfg->policy.generation.tensor_parallel_size;
	int replicas = (rl_comm_size(t->dist->bridge) - 1) / gen_tp;
	unsigned char *buf = NULL;

	for (int k = 0; k < replicas; k++) {
		int peer = 1 + k * gen_tp;
		int64_t size;
		struct rl_wire_info info;

		rl_comm_recv(t->dist->bridge, &size, 1, RL_COMM_I64, peer, "rollout packet size");
		unsigned char *grown = size >= 0 ? realloc(buf, (size_t)size + 1) : NULL;
		if (!grown) {
			snprintf(err, errlen,
			         "out of memory for generation replica %d's %lld bytes", k,
			         (long long)size);
			free(buf);
			return -1;
		}
		buf = grown;
		rl_comm_recv(t->dist->bridge, buf, (size_t)size, RL_COMM_U8, peer,
		             "rollout packet");
		char why[512];
		if (rl_wire_unpack(buf, (size_t)size, r,
		                   (int)t->cfg->policy.max_total_sequence_length, &info, why,
		                   sizeof why)) {
			snprintf(err, errlen, "generation replica %d: %s", k, why);
			free(buf);
			return -1;
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
static int pass_on(struct rl_trainer *t, struct rl_rollout *r, struct rl_wire_info *info, char *err,
                   size_t errlen)
{
	struct rl_comm *world = t->dist->g[RL_G_WORLD];
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
	if (!leader &&
	    rl_wire_unpack(w.buf, (size_t)size, r, (int)t->cfg->policy.max_total_sequence_length,
	                   info, err, errlen))
		goto done;
	rc = 0;
done:
	rl_wire_free(&w);
	return rc;
}

int rl_remote_request(struct rl_trainer *t, const struct rl_rollout *r, uint64_t seed, char *err,
                      size_t errlen)
{
	struct rl_wire prompts = {0};
	struct command c = {.kind = CMD_GENERATE,
	                    .n_groups = r->n_groups,
	                    .group_size = r->group_size,
	                    .seed = seed};

	if (!t->dist->bridge)
		return 0;
	if (rl_wire_pack_prompts(&prompts, r)) {
		rl_wire_free(&prompts);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c.payload_bytes = (int64_t)prompts.len;
	send_command(t, &c, prompts.buf);
	return 0;
}

int rl_remote_receive(struct rl_trainer *t, struct rl_rollout *r, struct rl_wire_info *info,
                      char *err, size_t errlen)
{
	memset(info, 0, sizeof *info);
	if (t->dist->bridge && collect(t, r, info, err, errlen))
		return -1;
	return pass_on(t, r, info, err, errlen);
}

int rl_remote_generate(struct rl_trainer *t, struct rl_rollout *r, uint64_t seed,
                       int64_t *prompts_truncated, char *err, size_t errlen)
{
	struct rl_wire_info info;

	if (rl_remote_request(t, r, seed, err, errlen) ||
	    rl_remote_receive(t, r, &info, err, errlen))
		return -1;
	*prompts_truncated += info.prompts_truncated;
	return 0;
}

/* Training rank 0's ep group, on its members; NULL elsewhere and
 * without expert parallelism. */
static struct rl_comm *leaders_experts(const struct rl_trainer *t)
{
	struct rl_comm *ep = t->dist->g[RL_G_EP];

	if (t->model->shard.ep.size <= 1 || !ep)
		return NULL;
	for (int r = 0; r < rl_comm_size(ep); r++)
		if (rl_comm_world_rank(ep, r) == 0)
			return ep;
	return NULL;
}

int rl_remote_refit(struct rl_trainer *t, char *err, size_t errlen)
{
	const struct rl_coords *c = &t->dist->coords;
	/* asynchronous, the generation ranks may be in the middle of a
	 * rollout: the weights wait for them in a copy, one refit at a time */
	struct rl_outbox *later = t->cfg->grpo.async_grpo.enabled ? &t->bridge_out : NULL;
	/* the first model replica holds the dense tensors the generation
	 * ranks need; training rank 0's ep group every expert */
	struct rl_refit_sender from = {
	    .bridge = t->dist->bridge,
	    .dense = c->rank[RL_AXIS_DP] == 0 && c->rank[RL_AXIS_CP] == 0,
	    .experts = leaders_experts(t),
	};

	if (t->dist->bridge) {
		struct command cmd = {.kind = CMD_REFIT};

		if (later)
			rl_outbox_drain(later);
		send_command(t, &cmd, NULL);
		if (!later)
			rl_outbox_drain(&t->bridge_out);
	}
	if (!from.dense && !from.experts)
		return 0;
	return rl_refit_send(t->model, &from, REFIT_BUCKET_BYTES, later, err, errlen);
}

void rl_remote_stop(struct rl_trainer *t)
{
	struct command c = {.kind = CMD_STOP};

	if (!t->dist || !t->dist->bridge || t->dist->generation)
		return;
	/* the generation ranks finish what they were asked for, and hold
	 * their packets until someone takes them */
	for (int k = 0; k < t->ahead.n; k++) {
		struct rl_inflight *e = &t->ahead.q[k];
		struct rl_wire_info info = {0};
		char err[512];

		if (!e->received && collect(t, &e->r, &info, err, sizeof err) == 0)
			e->received = true;
	}
	send_command(t, &c, NULL);
	rl_outbox_drain(&t->bridge_out);
}

/* A generation rank: its replica's share of the rollout c asks for. */
static int serve_rollout(struct rl_trainer *t, const struct command *c,
                         const unsigned char *payload, char *err, size_t errlen)
{
	struct rl_rollout r;
	struct rl_wire w = {0};
	struct rl_wire_info info = {0};
	double started = rl_now();
	int rc = -1, lo, hi;

	if (c->n_groups < 1 || c->group_size < 1 ||
	    rl_rollout_alloc(&r, c->n_groups, c->group_size)) {
		snprintf(err, errlen, "a rollout command for %d x %d samples", c->n_groups,
		         c->group_size);
		return -1;
	}
	if (rl_wire_unpack_prompts(payload, (size_t)c->payload_bytes, &r, err, errlen) ||
	    rl_rollout_generate(t, &r, c->seed, &info.prompts_truncated, err, errlen))
		goto done;
	/* the replica's tensor-parallel ranks made the same samples; the
	 * first speaks for them */
	if (t->dist->coords.rank[RL_AXIS_TP] == 0) {
		rl_share_range(t->dp, r.n, &lo, &hi);
		info.generation_s = rl_now() - started;
		if (rl_wire_pack(&w, &r, lo, hi, &info)) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		/* kept until training rank 0 takes them: it may be training,
		 * or sending the next command */
		int64_t *size = malloc(sizeof *size);
		if (!size) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		*size = (int64_t)w.len;
		rl_outbox_add(&t->bridge_out,
		              rl_comm_start_send(t->dist->bridge, size, 1, RL_COMM_I64, 0,
		                                 "rollout packet size"),
		              size);
		rl_outbox_add(&t->bridge_out,
		              rl_comm_start_send(t->dist->bridge, w.buf, w.len, RL_COMM_U8, 0,
		                                 "rollout packet"),
		              w.buf);
		w = (struct rl_wire){0};
	}
	rc = 0;
done:
	rl_wire_free(&w);
	rl_rollout_free(&r);
	return rc;
}

int rl_generation_serve(struct rl_trainer *t, char *err, size_t errlen)
{
	unsigned char *payload = NULL;
	int rc = -1;

	for (;;) {
		struct command c;

		rl_comm_broadcast(t->dist->bridge, &c, sizeof c, RL_COMM_U8, 0,
		                  "waiting for a command from training rank 0");
		if (c.payload_bytes < 0) {
			snprintf(err, errlen, "a command with a payload of %lld bytes",
			         (long long)c.payload_bytes);
			break;
		}
		if (c.payload_bytes > 0) {
			unsigned char *grown = realloc(payload, (size_t)c.payload_bytes);
			if (!grown) {
				snprintf(err, errlen, "out of memory");
				break;
			}
			payload = grown;
			rl_comm_broadcast(t->dist->bridge, payload, (size_t)c.payload_bytes,
			                  RL_COMM_U8, 0, "a command's payload");
		}
		rl_outbox_reap(&t->bridge_out);
		if (c.kind == CMD_STOP) {
			rc = 0;
			break;
		}
		if (c.kind == CMD_GENERATE ? serve_rollout(t, &c, payload, err, errlen)
		    : c.kind == CMD_REFIT  ? rl_refit_recv(t->model, t->dist->bridge, err, errlen)
		                           : -1) {
			if (c.kind != CMD_GENERATE && c.kind != CMD_REFIT)
				snprintf(err, errlen, "an unknown command %d", c.kind);
			break;
		}
	}
	free(payload);
	/* training rank 0 took every packet before it said stop */
	if (rc == 0)
		rl_outbox_drain(&t->bridge_out);
	return rc;
}
