#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/comm/outbox.h"
#include "runtime/rollout/bridge.h"
#include "runtime/rollout/episodes.h"
#include "runtime/rollout/refit.h"
#include "runtime/rollout/serve.h"
#include "runtime/rollout/share.h"
#include "runtime/rollout/wire.h"

/* This replica's share of the rollout c asks for, its packet kept in out
 * until training rank 0 takes it. */
static int serve_rollout(const struct rl_serve *v, struct rl_outbox *out,
                         const struct rl_bridge_command *c, const unsigned char *payload, char *err,
                         size_t errlen)
{
	struct rl_comm *dp = v->dist->g[RL_G_DP];
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
	if (rl_wire_unpack_groups(payload, (size_t)c->payload_bytes, &r, err, errlen) ||
	    (v->episodes ? rl_rollout_episodes_share(v->episodes, v->model, v->tok, v->gen, dp, &r,
	                                             c->seed, &info.prompts_truncated, err, errlen)
	                 : rl_rollout_generate_share(v->model, v->tok, v->gen, dp, &r, c->seed,
	                                             &info.prompts_truncated, err, errlen)))
		goto done;
	/* the replica's tensor-parallel ranks made the same samples; the
	 * first speaks for them */
	if (v->dist->coords.rank[RL_AXIS_TP] == 0) {
		rl_share_range(dp, r.n, &lo, &hi);
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
		rl_outbox_add(out,
		              rl_comm_start_send(v->dist->bridge, size, 1, RL_COMM_I64, 0,
		                                 "rollout packet size"),
		              size);
		rl_outbox_add(out,
		              rl_comm_start_send(v->dist->bridge, w.buf, w.len, RL_COMM_U8, 0,
		                                 "rollout packet"),
		              w.buf);
		w = (struct rl_wire){0};
		/* the share's episodes: their stats and the environment's
		 * failures, which training rank 0 counts in the step's */
		if (v->episodes) {
			struct rl_episodes_report *rep = malloc(sizeof *rep);
			if (!rep) {
				snprintf(err, errlen, "out of memory");
				goto done;
			}
			rl_episodes_take_report(v->episodes, rep);
			rl_outbox_add(out,
			              rl_comm_start_send(v->dist->bridge, rep, sizeof *rep,
			                                 RL_COMM_U8, 0, "episodes report"),
			              rep);
		}
	}
	rc = 0;
done:
	rl_wire_free(&w);
	rl_rollout_free(&r);
	return rc;
}

int rl_generation_serve(const struct rl_serve *v, char *err, size_t errlen)
{
	struct rl_comm *bridge = v->dist->bridge;
	struct rl_outbox out = {0};
	unsigned char *payload = NULL;
	int rc = -1;

	for (;;) {
		struct rl_bridge_command c;

		rl_comm_broadcast(bridge, &c, sizeof c, RL_COMM_U8, 0,
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
			rl_comm_broadcast(bridge, payload, (size_t)c.payload_bytes, RL_COMM_U8, 0,
			                  "a command's payload");
		}
		rl_outbox_reap(&out);
		if (c.kind == RL_CMD_STOP) {
			rc = 0;
			break;
		}
		if (c.kind == RL_CMD_GENERATE ? serve_rollout(v, &out, &c, payload, err, errlen)
		    : c.kind == RL_CMD_REFIT  ? rl_refit_recv(v->model, bridge, err, errlen)
		                              : -1) {
			if (c.kind != RL_CMD_GENERATE && c.kind != RL_CMD_REFIT)
				snprintf(err, errlen, "an unknown command %d", c.kind);
			break;
		}
	}
	free(payload);
	/* training rank 0 took every packet before it said stop; after a
	 * failure, messages that did not complete keep their memory (the run
	 * is ending) */
	if (rc == 0)
		rl_outbox_drain(&out);
	rl_outbox_reap(&out);
	if (out.n == 0)
		rl_outbox_free(&out);
	return rc;
}
