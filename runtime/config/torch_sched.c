/* policy.scheduler as NeMo-RL writes it: torch LR schedulers by class name
 * with their kwargs, chained by torch.optim.lr_scheduler.SequentialLR at
 *   - name: torch.optim.lr_scheduler.LinearLR
 *     kwargs: {start_factor: 0.1, end_factor: 1.0, total_iters: 50}
 *   - name: torch.optim.lr_scheduler.ConstantLR
 *     kwargs: {factor: 1.0, total_iters: 10000000000}
 *   - milestones: [50]
 * or a single {name, kwargs} mapping. The kwargs' defaults and bounds are
 * torch's (LinearLR: start_factor 1/3 in (0, 1], end_factor 1.0 in [0, 1],
 * total_iters 5; ConstantLR: factor 1/3 in [0, 1], total_iters 5;
 * CosineAnnealingLR: T_max required, eta_min 0). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "runtime/config/internal.h"
#include "runtime/config/scalar.h"

enum { MAX_SCHEDULERS = 8 };

static const struct {
	const char *name;
	enum rl_torch_sched_kind kind;
} classes[] = {
    {"torch.optim.lr_scheduler.LinearLR", RL_TS_LINEAR},
    {"torch.optim.lr_scheduler.ConstantLR", RL_TS_CONSTANT},
    {"torch.optim.lr_scheduler.CosineAnnealingLR", RL_TS_COSINE},
};

const char *rl_torch_sched_name(enum rl_torch_sched_kind kind)
{
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (classes[i].kind == kind)
			return classes[i].name;
	return "?";
}

void rl_cfg_sched_list_free(struct rl_cfg_sched_list *l)
{
	free(l->v);
	free(l->milestones);
	*l = (struct rl_cfg_sched_list){0};
}

static bool number(const struct rl_ynode *v, const char *path, double lo, double hi, bool lo_open,
                   double *out, struct rl_diags *d)
{
	double x;
	if (v->kind != RL_Y_SCALAR || !v->plain || !rl_scalar_float(v->text, &x)) {
		rl_diag_add(d, v->file, v->line, v->col, path, "expected a number");
		return false;
	}
	if (lo_open ? !(x > lo) : !(x >= lo)) {
		rl_diag_add(d, v->file, v->line, v->col, path,
		            "%s is out of range: expected %s%g, %g]", v->text, lo_open ? "(" : "[",
		            lo, hi);
		return false;
	}
	if (x > hi) {
		rl_diag_add(d, v->file, v->line, v->col, path,
		            "%s is out of range: expected %s%g, %g]", v->text, lo_open ? "(" : "[",
		            lo, hi);
		return false;
	}
	*out = x;
	return true;
}

static bool integer(const struct rl_ynode *v, const char *path, int64_t lo, int64_t *out,
                    struct rl_diags *d)
{
	int64_t x;
	if (v->kind != RL_Y_SCALAR || !v->plain || !rl_scalar_int(v->text, &x)) {
		rl_diag_add(d, v->file, v->line, v->col, path, "expected an integer");
		return false;
	}
	if (x < lo) {
		rl_diag_add(d, v->file, v->line, v->col, path, "expected an integer >= %lld",
		            (long long)lo);
		return false;
	}
	*out = x;
	return true;
}

/* One {name, kwargs} item. */
static bool read_one(const struct rl_ynode *item, const char *at, struct rl_cfg_torch_sched *s,
                     struct rl_diags *d)
{
	const struct rl_yentry *ne = rl_ymap_find(item, "name");
	const struct rl_ynode *name = ne ? ne->value : NULL;
	bool ok = true;
	for (size_t i = 0; i < item->n; i++)
		if (strcmp(item->items[i].key, "name") != 0 &&
		    strcmp(item->items[i].key, "kwargs") != 0) {
			rl_diag_add(d, item->file, item->items[i].line, item->items[i].col, at,
			            "unknown key %s: a scheduler has name and kwargs",
			            item->items[i].key);
			ok = false;
		}
	if (!name || name->kind != RL_Y_SCALAR) {
		rl_diag_add(d, item->file, item->line, item->col, at, "a scheduler needs a name");
		return false;
	}
	size_t c = 0;
	while (c < sizeof(classes) / sizeof(classes[0]) && strcmp(classes[c].name, name->text) != 0)
		c++;
	if (c == sizeof(classes) / sizeof(classes[0])) {
		rl_diag_add(d, name->file, name->line, name->col, at,
		            "unknown scheduler %s: known are torch.optim.lr_scheduler.LinearLR, "
		            "ConstantLR and CosineAnnealingLR",
		            name->text);
		return false;
	}
	*s = (struct rl_cfg_torch_sched){.kind = classes[c].kind,
	                                 .start_factor = 1.0 / 3,
	                                 .end_factor = 1.0,
	                                 .factor = 1.0 / 3,
	                                 .total_iters = 5,
	                                 .t_max = -1};
	const struct rl_yentry *ke = rl_ymap_find(item, "kwargs");
	const struct rl_ynode *kw = ke ? ke->value : NULL;
	if (kw && !rl_yscalar_is_null(kw) && kw->kind != RL_Y_MAP) {
		rl_diag_add(d, kw->file, kw->line, kw->col, at, "kwargs must be a mapping");
		return false;
	}
	for (size_t i = 0; kw && kw->kind == RL_Y_MAP && i < kw->n; i++) {
		const char *k = kw->items[i].key;
		const struct rl_ynode *v = kw->items[i].value;
		char *path = NULL;
		if (asprintf(&path, "%s.kwargs.%s", at, k) < 0)
			return false;
		if (s->kind == RL_TS_LINEAR && strcmp(k, "start_factor") == 0)
			ok = number(v, path, 0, 1, true, &s->start_factor, d) && ok;
		else if (s->kind == RL_TS_LINEAR && strcmp(k, "end_factor") == 0)
			ok = number(v, path, 0, 1, false, &s->end_factor, d) && ok;
		else if (s->kind == RL_TS_CONSTANT && strcmp(k, "factor") == 0)
			ok = number(v, path, 0, 1, false, &s->factor, d) && ok;
		else if (s->kind != RL_TS_COSINE && strcmp(k, "total_iters") == 0)
			ok = integer(v, path, 0, &s->total_iters, d) && ok;
		else if (s->kind == RL_TS_COSINE && strcmp(k, "T_max") == 0)
			ok = integer(v, path, 1, &s->t_max, d) && ok;
		else if (s->kind == RL_TS_COSINE && strcmp(k, "eta_min") == 0)
			ok = number(v, path, 0, 1e308, false, &s->eta_min, d) && ok;
		else {
			rl_diag_add(d, kw->file, kw->items[i].line, kw->items[i].col, path,
			            "not an argument of %s that slurm-rl reads", name->text);
			ok = false;
		}
		free(path);
	}
	if (s->kind == RL_TS_LINEAR && s->total_iters == 0) {
		/* torch divides by it */
		rl_diag_add(d, item->file, item->line, item->col, at,
		            "LinearLR needs total_iters >= 1");
		ok = false;
	}
	if (s->kind == RL_TS_COSINE && s->t_max < 0) {
		rl_diag_add(d, item->file, item->line, item->col, at,
		            "CosineAnnealingLR needs kwargs.T_max");
		ok = false;
	}
	return ok;
}

bool rl_cfg_read_schedulers(const struct rl_ynode *v, const char *path,
                            struct rl_cfg_sched_list *out, struct rl_diags *d)
{
	rl_cfg_sched_list_free(out);
	if (rl_yscalar_is_null(v))
		return true;
	if (v->kind == RL_Y_MAP) {
		out->v = calloc(1, sizeof(*out->v));
		if (!out->v || !read_one(v, path, out->v, d)) {
			rl_cfg_sched_list_free(out);
			return false;
		}
		out->n = 1;
		return true;
	}
	if (v->kind != RL_Y_SEQ) {
		rl_diag_add(d, v->file, v->line, v->col, path,
		            "expected a list of schedulers, or one {name, kwargs}");
		return false;
	}
	struct rl_cfg_torch_sched s[MAX_SCHEDULERS];
	size_t n = 0;
	const struct rl_ynode *ms = NULL;
	bool ok = true;
	for (size_t i = 0; i < v->n; i++) {
		const struct rl_ynode *item = v->items[i].value;
		char *at = NULL;
		if (asprintf(&at, "%s[%zu]", path, i) < 0)
			return false;
		if (item->kind != RL_Y_MAP) {
			rl_diag_add(d, item->file, item->line, item->col, at,
			            "expected {name, kwargs} or {milestones: [...]}");
			ok = false;
		} else if (rl_ymap_find(item, "milestones")) {
			if (ms || item->n != 1) {
				rl_diag_add(d, item->file, item->line, item->col, at,
				            ms ? "a second milestones item"
				               : "milestones stands alone in its item");
				ok = false;
			}
			ms = rl_ymap_find(item, "milestones")->value;
		} else if (n == MAX_SCHEDULERS) {
			rl_diag_add(d, item->file, item->line, item->col, at,
			            "more than %d schedulers", MAX_SCHEDULERS);
			ok = false;
		} else {
			ok = read_one(item, at, &s[n++], d) && ok;
		}
		free(at);
	}
	if (!ok)
		return false;
	/* torch's SequentialLR: one milestone between each two schedulers */
	size_t nm = ms && ms->kind == RL_Y_SEQ ? ms->n : 0;
	if (n == 0 || (ms && ms->kind != RL_Y_SEQ) || nm + 1 != n) {
		const struct rl_ynode *at = ms ? ms : v;
		rl_diag_add(
		    d, at->file, at->line, at->col, path,
		    "%zu scheduler%s need%s %zu milestone%s in a {milestones: [...]} item, got "
		    "%zu",
		    n, n == 1 ? "" : "s", n == 1 ? "s" : "", n ? n - 1 : 0, n == 2 ? "" : "s", nm);
		return false;
	}
	int64_t m[MAX_SCHEDULERS];
	for (size_t i = 0; i < nm; i++) {
		const struct rl_ynode *e = ms->items[i].value;
		if (!integer(e, path, 1, &m[i], d))
			return false;
		if (i > 0 && m[i] <= m[i - 1]) {
			rl_diag_add(d, e->file, e->line, e->col, path, "milestones must increase");
			return false;
		}
	}
	out->v = calloc(n, sizeof(*out->v));
	out->milestones = calloc(nm ? nm : 1, sizeof(*out->milestones));
	if (!out->v || !out->milestones) {
		rl_cfg_sched_list_free(out);
		return false;
	}
	memcpy(out->v, s, n * sizeof(*s));
	memcpy(out->milestones, m, nm * sizeof(*m));
	out->n = n;
	return true;
}
