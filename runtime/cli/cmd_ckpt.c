/* rlrun ckpt: the checkpoints of a run, seen from the command line.
 *   list DIR                     the committed checkpoints and leftovers
 *   verify DIR/step_N            every checksum, every shard, every tensor whole
 *   export DIR/step_N --hf OUT   the policy as a Hugging Face directory */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/plural.h"
#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/reshard.h"
#include "runtime/ckpt/run_state.h"
#include "runtime/ckpt/store.h"
#include "runtime/cli/load_config.h"
#include "runtime/cli/commands.h"
#include "runtime/model/builtin.h"
#include "runtime/model/hub.h"
#include "runtime/base/durable.h"
#include "runtime/model/model.h"

static const char usage[] =
    "usage: rlrun ckpt list CHECKPOINT_DIR\n"
    "       rlrun ckpt verify CHECKPOINT_DIR/step_N\n"
    "       rlrun ckpt export CHECKPOINT_DIR/step_N --hf OUT [--model DIR]\n";

/* A checkpoint opened for reading: manifest, run state, shards, index. */
struct opened {
	struct rl_ckpt_manifest man;
	struct rl_ckpt_run_state state;
	struct rl_ckpt_shard_set set;
	uint64_t bytes;
};

static void opened_close(struct opened *o)
{
	rl_ckpt_shard_set_close(&o->set);
	json_decref(o->state.metrics);
	rl_ckpt_manifest_free(&o->man);
	memset(o, 0, sizeof *o);
}

/* Every file against the manifest, then the run state and the shards. */
static int open_verified(struct opened *o, const char *dir, char *err, size_t errlen)
{
	bool has_state = false;

	memset(o, 0, sizeof *o);
	if (rl_ckpt_manifest_read(dir, &o->man, err, errlen))
		return -1;
	for (int i = 0; i < o->man.n_files; i++) {
		const struct rl_ckpt_file *f = &o->man.files[i];

		if (rl_ckpt_file_verify(dir, f, err, errlen))
			return -1;
		o->bytes += f->sum.bytes;
		has_state |= strcmp(f->name, RL_CKPT_RUN_STATE) == 0;
	}
	if (!has_state) {
		snprintf(err, errlen, "%s/%s lists no %s", dir, RL_CKPT_MANIFEST,
		         RL_CKPT_RUN_STATE);
		return -1;
	}
	if (rl_ckpt_run_state_read(&o->state, dir, err, errlen))
		return -1;
	if (o->state.step != o->man.step) {
		snprintf(err, errlen,
		         "%s: the manifest is of step %" PRId64 ", the run state of %" PRId64, dir,
		         o->man.step, o->state.step);
		return -1;
	}
	if (rl_ckpt_shard_set_open(&o->set, dir, &o->man, err, errlen))
		return -1;
	if (o->set.n == 0) {
		snprintf(err, errlen, "%s/%s lists no shard file", dir, RL_CKPT_MANIFEST);
		return -1;
	}
	return 0;
}

static int64_t global_numel(const struct rl_ckpt_piece *p)
{
	return p->global_shape[0] * (p->ndim == 2 ? p->global_shape[1] : 1);
}

/* Every tensor of every kind covered exactly once by its pieces, all of
 * one global shape; every tensor with all three kinds. *n_tensors: the
 * tensors. */
static int check_complete(const struct opened *o, int *n_tensors, char *err, size_t errlen)
{
	int counts[RL_CKPT_N_KINDS] = {0};

	for (int i = 0; i < o->set.ix.n;) {
		const struct rl_ckpt_piece *first = o->set.ix.pieces[i];
		int64_t sum = 0;
		int k = i;

		for (; k < o->set.ix.n && o->set.ix.pieces[k]->kind == first->kind &&
		       strcmp(o->set.ix.pieces[k]->tensor, first->tensor) == 0;
		     k++) {
			const struct rl_ckpt_piece *p = o->set.ix.pieces[k];

			if (p->ndim != first->ndim || global_numel(p) != global_numel(first) ||
			    p->global_shape[0] != first->global_shape[0]) {
				snprintf(err, errlen, "%s of %s: pieces disagree on its shape",
				         rl_ckpt_kind_name(first->kind), first->tensor);
				return -1;
			}
			/* each run is backed by its bytes, but runs may share them */
			if (__builtin_add_overflow(sum, p->flat_len, &sum)) {
				snprintf(err, errlen,
				         "%s of %s: its pieces hold more than 2^63 values",
				         rl_ckpt_kind_name(first->kind), first->tensor);
				return -1;
			}
		}
		if (sum != global_numel(first)) {
			snprintf(err, errlen,
			         "%s of %s: its pieces hold %" PRId64 " values of %" PRId64,
			         rl_ckpt_kind_name(first->kind), first->tensor, sum,
			         global_numel(first));
			return -1;
		}
		counts[first->kind]++;
		i = k;
	}
	for (int k = 1; k < RL_CKPT_N_KINDS; k++)
		if (counts[k] != counts[RL_CKPT_WEIGHT]) {
			snprintf(err, errlen, "%d tensors have weights but %d have %s",
			         counts[RL_CKPT_WEIGHT], counts[k],
			         rl_ckpt_kind_name((enum rl_ckpt_kind)k));
			return -1;
		}
	*n_tensors = counts[RL_CKPT_WEIGHT];
	return 0;
}

/* A directory named on the command line, or a message saying why not. */
static bool is_directory(const char *verb, const char *path)
{
	struct stat st;

	if (stat(path, &st)) {
		fprintf(stderr, "rlrun ckpt %s: %s: %s\n", verb, path, strerror(errno));
		return false;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "rlrun ckpt %s: %s: not a directory\n", verb, path);
		return false;
	}
	return true;
}

static int cmd_verify(const char *dir)
{
	struct opened o;
	char err[2048], path[4300];
	int n_tensors = 0;

	if (!is_directory("verify", dir))
		return RL_EXIT_FAIL;
	/* the run's directory given for one of its checkpoints */
	snprintf(path, sizeof path, "%s/%s", dir, RL_CKPT_LATEST);
	if (access(path, F_OK) == 0) {
		fprintf(stderr,
		        "rlrun ckpt verify: %s holds checkpoints; name one of them "
		        "(rlrun ckpt list %s)\n",
		        dir, dir);
		return RL_EXIT_FAIL;
	}
	if (open_verified(&o, dir, err, sizeof err) ||
	    check_complete(&o, &n_tensors, err, sizeof err)) {
		fprintf(stderr, "rlrun ckpt verify: %s\n", err);
		opened_close(&o);
		return RL_EXIT_FAIL;
	}
	printf("%s: step %" PRId64 ", %d file%s, %.1f MB: every checksum matches; %d tensor%s "
	       "with %s Adam moments, each complete\n",
	       dir, o.man.step, o.man.n_files, rl_plural(o.man.n_files), (double)o.bytes / 1e6,
	       n_tensors, rl_plural(n_tensors), n_tensors == 1 ? "its" : "their");
	opened_close(&o);
	return RL_EXIT_OK;
}

/* A number from the run state's metrics, or "-" */
static void metric_text(json_t *metrics, const char *name, char *buf, size_t len)
{
	json_t *v = json_object_get(metrics, name);

	if (json_is_number(v))
		snprintf(buf, len, "%.4f", json_number_value(v));
	else
		snprintf(buf, len, "-");
}

/* Every checkpoint is listed; one that cannot be read is listed as broken,
 * says why on stderr and makes the exit status 1, so that a script sees it. */
static int cmd_list(const char *root)
{
	struct rl_ckpt_listing l;
	char err[1024], latest[64] = "", path[4300];
	size_t len;
	int broken = 0;

	/* the run's scan takes a missing directory for a fresh start; asked
	 * for by name, it is a mistake */
	if (!is_directory("list", root))
		return RL_EXIT_FAIL;
	if (rl_ckpt_scan(root, &l, err, sizeof err)) {
		fprintf(stderr, "rlrun ckpt list: %s\n", err);
		return RL_EXIT_FAIL;
	}
	snprintf(path, sizeof path, "%s/%s", root, RL_CKPT_LATEST);
	char *text = rl_ckpt_read_text(path, &len, err, sizeof err);
	if (text) {
		snprintf(latest, sizeof latest, "%.*s", (int)strcspn(text, "\n"), text);
		free(text);
	}
	if (l.n == 0)
		printf("%s: no committed checkpoint\n", root);
	else
		printf("%-12s %10s  %-22s %10s %10s  %s\n", "checkpoint", "MB", "written by",
		       "reward", "val_reward", "");
	for (int i = 0; i < l.n; i++) {
		char name[64], dir[4200], layout[64] = "?", reward[32] = "-", val[32] = "-";
		struct rl_ckpt_manifest man;
		struct rl_ckpt_run_state s;
		double mb = 0;

		snprintf(name, sizeof name, "step_%" PRId64, l.steps[i]);
		snprintf(dir, sizeof dir, "%s/%s", root, name);
		int bad = rl_ckpt_manifest_read(dir, &man, err, sizeof err);
		if (!bad) {
			for (int k = 0; k < man.n_files; k++)
				mb += (double)man.files[k].sum.bytes / 1e6;
			rl_ckpt_manifest_free(&man);
			bad = rl_ckpt_run_state_read(&s, dir, err, sizeof err);
		}
		if (bad) {
			printf("%-12s  broken: cannot be loaded (see below)\n", name);
			fprintf(stderr, "rlrun ckpt list: %s\n", err);
			broken++;
			continue;
		}
		snprintf(layout, sizeof layout, "%d rank%s: tp%d pp%d cp%d dp%d", s.world_size,
		         rl_plural(s.world_size), s.tensor, s.pipeline, s.context, s.data);
		metric_text(s.metrics, "reward_mean", reward, sizeof reward);
		metric_text(s.metrics, "val_reward", val, sizeof val);
		json_decref(s.metrics);
		printf("%-12s %10.1f  %-22s %10s %10s  %s\n", name, mb, layout, reward, val,
		       strcmp(name, latest) == 0 ? "latest" : "");
	}
	for (int i = 0; i < l.n_leftovers; i++)
		printf("%-12s  left by a crash: never loaded, removed by the next run\n",
		       l.leftovers[i]);
	rl_ckpt_listing_free(&l);
	if (broken) {
		fprintf(stderr, "rlrun ckpt list: %d of the checkpoints in %s cannot be read\n",
		        broken, root);
		return RL_EXIT_FAIL;
	}
	return RL_EXIT_OK;
}

/* The model of the checkpoint's policy.model_name (or --model), weights
 * zero; a built-in model's files are written into OUT first, so that the
 * save finds config.json and the tokenizer there. */
static int skeleton(const char *model_dir, const char *out, struct rl_model **m, char *err,
                    size_t errlen)
{
	struct rl_model_config cfg;
	const char *from = model_dir;

	if (rl_builtin_is(model_dir)) {
		struct rl_builtin_files files;
		struct rl_ckpt_file_sum unused;
		char path[4300];

		if (rl_builtin_files(model_dir, &files, err, errlen) ||
		    rl_make_dirs(out, "--hf", err, errlen))
			return -1;
		snprintf(path, sizeof path, "%s/config.json", out);
		unlink(path);
		snprintf(path, sizeof path, "%s/tokenizer.json", out);
		unlink(path);
		if (rl_ckpt_write_file(out, "config.json", files.config, files.config_len, &unused,
		                       err, errlen) ||
		    rl_ckpt_write_file(out, "tokenizer.json", files.tokenizer, files.tokenizer_len,
		                       &unused, err, errlen))
			return -1;
		from = out;
	}
	/* a hub name: its snapshot in the local Hugging Face cache */
	char *dir = from == out ? strdup(out)
	                        : rl_hub_resolve(model_dir, "policy.model_name (or --model)", NULL,
	                                         err, errlen);
	int rc = !dir || rl_model_config_load(&cfg, dir, err, errlen) ||
	                 rl_model_new_random(m, &cfg, dir, &rl_ops_cpu, 0, 0.0, err, errlen)
	             ? -1
	             : 0;
	if (!dir && from == out)
		snprintf(err, errlen, "out of memory");
	free(dir);
	return rc;
}

static int export_hf(const char *dir, const char *out, const char *model_override, char *err,
                     size_t errlen)
{
	struct opened o;
	struct rl_config cfg = {0};
	struct rl_model *m = NULL;
	char path[4300], sig[512];
	int rc = -1, n_tensors;

	if (open_verified(&o, dir, err, errlen) || check_complete(&o, &n_tensors, err, errlen))
		goto out;
	snprintf(path, sizeof path, "%s/%s", dir, RL_CKPT_CONFIG);
	char *args[] = {path};
	if (rl_cli_load_config("ckpt export", usage, args, 1, &cfg) != RL_EXIT_OK) {
		snprintf(err, errlen, "%s/%s: not a valid config (see above)", dir, RL_CKPT_CONFIG);
		goto out;
	}
	const char *model_dir = model_override ? model_override : cfg.policy.model_name;
	if (skeleton(model_dir, out, &m, err, errlen))
		goto out;
	rl_ckpt_model_signature(&m->cfg, sig, sizeof sig);
	if (strcmp(sig, o.state.model_signature) != 0) {
		snprintf(err, errlen, "%s is not the model of %s: \"%s\" against \"%s\"", model_dir,
		         dir, sig, o.state.model_signature);
		goto out;
	}
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		struct rl_ckpt_block b = {.tensor = p->name, .ndim = p->ndim};

		for (int d = 0; d < p->ndim; d++)
			b.global_shape[d] = b.shape[d] = p->shape[d];
		if (rl_ckpt_fill(&o.set.ix, RL_CKPT_WEIGHT, &b, p->master, err, errlen))
			goto out;
	}
	/* a bf16 run's policy is its bf16 weights: what it generated and
	 * scored with (the fp32 master stays in the checkpoint) */
	enum rl_dtype precision;
	if (rl_dtype_from_torch_name(cfg.policy.precision, &precision) == 0 && precision == RL_BF16)
		m->cfg.torch_dtype = RL_BF16;
	/* transformers' default shard size */
	if (rl_model_save(m, out, (size_t)5 << 30, err, errlen))
		goto out;
	printf("%s: step %" PRId64 " written to %s as %s (%s, %s)\n", dir, o.man.step, out,
	       m->cfg.architecture, model_dir, rl_dtype_name(m->cfg.torch_dtype));
	rc = 0;
out:
	rl_model_free(m);
	if (cfg.policy.model_name)
		rl_config_free(&cfg);
	opened_close(&o);
	return rc;
}

static int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {{"hf", required_argument, NULL, 'o'},
	                                     {"model", required_argument, NULL, 'm'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	const char *out = NULL, *model = NULL;
	char err[2048];
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'o')
			out = optarg;
		else if (c == 'm')
			model = optarg;
		else {
			fputs(usage, c == 'h' ? stdout : stderr);
			return c == 'h' ? RL_EXIT_OK : RL_EXIT_USAGE;
		}
	}
	if (!out || optind != argc - 1) {
		fprintf(stderr, "rlrun ckpt export: %s\n%s",
		        out ? "one checkpoint directory, please" : "--hf OUT is required", usage);
		return RL_EXIT_USAGE;
	}
	if (export_hf(argv[optind], out, model, err, sizeof err)) {
		fprintf(stderr, "rlrun ckpt export: %s\n", err);
		return RL_EXIT_FAIL;
	}
	return RL_EXIT_OK;
}

int rl_cmd_ckpt(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;

	if (sub && (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0)) {
		fputs(usage, stdout);
		return RL_EXIT_OK;
	}
	if (sub && strcmp(sub, "export") == 0)
		return cmd_export(argc - 1, argv + 1);
	if (sub && argc == 3 && strcmp(sub, "list") == 0)
		return cmd_list(argv[2]);
	if (sub && argc == 3 && strcmp(sub, "verify") == 0)
		return cmd_verify(argv[2]);
	fputs(usage, stderr);
	return RL_EXIT_USAGE;
}
