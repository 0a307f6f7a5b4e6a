/* Placement of one node's tasks. Order of decisions: GPUs (so that the
 * stride-1 block of the layout shares an NVLink domain), then each task's
 * NUMA domain (its GPU's), then NICs (nearest InfiniBand device to the GPU,
 * balanced on ties), then CPU sets (the domain's cores cut into contiguous
 * blocks among the tasks that share it). Everything is deterministic: two
 * nodes with the same hardware and ranks get the same answer.
 *
 * Tasks are not spread over NUMA domains when they are fewer than the GPUs:
 * GPUs fill in bus-id order within domains, domains in the order of their
 * first GPU, so a half-full node uses the first GPUs. */
#include "topology/placement.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add_warning(struct rl_node_placement *out, const char *fmt, ...)
{
	size_t used = strlen(out->warning), cap = sizeof(out->warning);
	va_list ap;

	if (used > 0 && used + 2 < cap) {
		memcpy(out->warning + used, "; ", 3);
		used += 2;
	}
	if (used + 1 >= cap)
		return;
	va_start(ap, fmt);
	vsnprintf(out->warning + used, cap - used, fmt, ap);
	va_end(ap);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* ---- GPUs ---- */

/* The GPUs the step may use, ascending (bus-id order), and for each the
 * slot of its NVLink domain; slots are numbered in the order of their
 * first GPU. */
struct gpu_pool {
	int *gpu, *slot, n;
	int *cap, n_slots; /* allowed GPUs per slot */
};

static void pool_free(struct gpu_pool *p)
{
	free(p->gpu);
	free(p->slot);
	free(p->cap);
}

static int pool_init(struct gpu_pool *p, const struct rl_topo *topo, const int *allowed,
                     int n_allowed, char *err, size_t errlen)
{
	int n = allowed ? n_allowed : topo->n_gpus;

	memset(p, 0, sizeof(*p));
	if (n < 0) {
		snprintf(err, errlen, "placement on %s: %d allowed GPUs", topo->source, n);
		return -1;
	}
	p->gpu = calloc((size_t)n + 1, sizeof(int));
	p->slot = calloc((size_t)n + 1, sizeof(int));
	p->cap = calloc((size_t)n + 1, sizeof(int));
	if (!p->gpu || !p->slot || !p->cap) {
		snprintf(err, errlen, "placement on %s: out of memory", topo->source);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		int g = allowed ? allowed[i] : i;
		if (g < 0 || g >= topo->n_gpus) {
			snprintf(err, errlen,
			         "placement on %s: allowed GPU index %d is out of range (%d GPUs)",
			         topo->source, g, topo->n_gpus);
			return -1;
		}
		p->gpu[i] = g;
	}
	qsort(p->gpu, (size_t)n, sizeof(int), cmp_int);
	for (int i = 1; i < n; i++) {
		if (p->gpu[i] == p->gpu[i - 1]) {
			snprintf(err, errlen, "placement on %s: GPU %d (%s) is allowed twice",
			         topo->source, p->gpu[i], topo->gpus[p->gpu[i]].busid);
			return -1;
		}
	}
	p->n = n;
	for (int i = 0; i < n; i++) {
		int dom = topo->gpus[p->gpu[i]].nvlink_domain, s = 0;
		while (s < i && topo->gpus[p->gpu[s]].nvlink_domain != dom)
			s++;
		p->slot[i] = s < i ? p->slot[s] : p->n_slots++;
		p->cap[p->slot[i]]++;
	}
	return 0;
}

/* Cuts local ranks 0..n-1 (global first..first+n-1) into chunks that do
 * not cross a multiple of block in global rank, packs the chunks into
 * domain slots first-fit decreasing (ties in rank order, so equal chunks
 * fill slots in order) and gives each task the next free GPU of its
 * chunk's slot. Returns 0, or -1 when some chunk finds no slot. */
static int pack_blocks(const struct gpu_pool *p, int first, int n, int block, int *task_gpu)
{
	int n_chunks = 0, rc = -1;
	int *start = calloc((size_t)n, sizeof(int)), *len = calloc((size_t)n, sizeof(int));
	int *order = calloc((size_t)n, sizeof(int)), *chunk_slot = calloc((size_t)n, sizeof(int));
	int *free_in = calloc((size_t)p->n_slots + 1, sizeof(int));
	int *next = calloc((size_t)p->n_slots + 1, sizeof(int));

	if (!start || !len || !order || !chunk_slot || !free_in || !next)
		goto out;
	for (int i = 0; i < n; i++) {
		if (i == 0 || (first + i) % block == 0) {
			start[n_chunks] = i;
			order[n_chunks] = n_chunks;
			n_chunks++;
		}
		len[n_chunks - 1]++;
	}
	/* insertion sort: stable, by length descending */
	for (int i = 1; i < n_chunks; i++) {
		int c = order[i], j = i;
		for (; j > 0 && len[order[j - 1]] < len[c]; j--)
			order[j] = order[j - 1];
		order[j] = c;
	}
	memcpy(free_in, p->cap, (size_t)p->n_slots * sizeof(int));
	for (int i = 0; i < n_chunks; i++) {
		int c = order[i], s = 0;
		while (s < p->n_slots && free_in[s] < len[c])
			s++;
		if (s == p->n_slots)
			goto out;
		free_in[s] -= len[c];
		chunk_slot[c] = s;
	}
	for (int c = 0; c < n_chunks; c++) {
		int s = chunk_slot[c];
		for (int k = 0; k < len[c]; k++) {
			while (p->slot[next[s]] != s)
				next[s]++;
			task_gpu[start[c] + k] = p->gpu[next[s]++];
		}
	}
	rc = 0;
out:
	free(start);
	free(len);
	free(order);
	free(chunk_slot);
	free(free_in);
	free(next);
	return rc;
}

static int place_gpus(const struct rl_topo *topo, const struct rl_layout *layout, int first, int n,
                      const int *allowed, int n_allowed, int *task_gpu,
                      struct rl_node_placement *out, char *err, size_t errlen)
{
	struct gpu_pool p;
	int tp = layout->size[RL_AXIS_TP], inner = tp * layout->size[RL_AXIS_CP];

	if (pool_init(&p, topo, allowed, n_allowed, err, errlen) < 0)
		goto fail;
	if (n > p.n) {
		snprintf(err, errlen,
		         "placement on %s: %d tasks need a GPU each, but only %d GPUs are allowed "
		         "(of %d on the node)",
		         topo->source, n, p.n, topo->n_gpus);
		goto fail;
	}
	/* TP x CP together in a domain; failing that TP alone (CP traffic is
	 * a ring of point-to-point sends that tolerates PCIe or the network
	 * far better than TP's all-reduces) */
	if (pack_blocks(&p, first, n, inner, task_gpu) == 0 ||
	    (tp < inner && pack_blocks(&p, first, n, tp, task_gpu) == 0)) {
		pool_free(&p);
		return 0;
	}
	char sizes[160] = "";
	size_t used = 0;
	for (int s = 0; s < p.n_slots && used + 1 < sizeof(sizes); s++) {
		int k =
		    snprintf(sizes + used, sizeof(sizes) - used, "%s%d", s ? ", " : "", p.cap[s]);
		used += k > 0 ? (size_t)k : 0;
	}
	add_warning(out,
	            "TP %d does not fit in one NVLink domain (the allowed GPUs form domains of "
	            "%s): TP groups span domains",
	            tp, sizes);
	/* domain by domain, bus-id order inside each */
	int t = 0;
	for (int s = 0; s < p.n_slots && t < n; s++)
		for (int i = 0; i < p.n && t < n; i++)
			if (p.slot[i] == s)
				task_gpu[t++] = p.gpu[i];
	pool_free(&p);
	return 0;
fail:
	pool_free(&p);
	return -1;
}

/* ---- NUMA domains and NICs ---- */

static bool numa_has_cores(const struct rl_topo *topo, int numa)
{
	for (int c = 0; c < topo->n_cores; c++)
		if (topo->cores[c].numa == numa)
			return true;
	return false;
}

/* Tasks with a GPU live where the GPU is. Without GPUs, consecutive tasks
 * share a domain (task i to domain i * n / n_tasks), counting only domains
 * with cores: a memory-only domain (HBM, CXL) runs nothing. */
static void place_numa(const struct rl_topo *topo, struct rl_node_placement *out)
{
	int n_compute = 0, *compute = calloc((size_t)topo->n_numas, sizeof(int));

	for (int d = 0; compute && d < topo->n_numas; d++)
		if (numa_has_cores(topo, d))
			compute[n_compute++] = d;
	for (int i = 0; i < out->n_tasks; i++) {
		struct rl_task_place *t = &out->tasks[i];
		if (t->gpu >= 0) {
			int d = topo->gpus[t->gpu].numa;
			t->numa = d >= 0 && d < topo->n_numas ? d : 0;
		} else if (n_compute > 0) {
			t->numa = compute[(long long)i * n_compute / out->n_tasks];
		} else {
			t->numa = (int)((long long)i * topo->n_numas / out->n_tasks);
		}
	}
	free(compute);
}

static int gpu_nic_distance(const struct rl_topo *topo, int gpu, int nic)
{
	return topo->gpu_nic_distance ? topo->gpu_nic_distance[gpu * topo->n_nics + nic] : 0;
}

/* Only InfiniBand devices: what is picked goes into NCCL_IB_HCA. */
static void place_nics(const struct rl_topo *topo, struct rl_node_placement *out)
{
	int *uses = calloc((size_t)topo->n_nics + 1, sizeof(int));

	if (!uses)
		return; /* every nic stays -1: NCCL then picks by itself */
	for (int i = 0; i < out->n_tasks; i++) {
		struct rl_task_place *t = &out->tasks[i];
		int best = -1, best_dist = 0;
		for (int j = 0; j < topo->n_nics; j++) {
			if (!topo->nics[j].infiniband)
				continue;
			int dist;
			if (t->gpu >= 0)
				dist = gpu_nic_distance(topo, t->gpu, j);
			else if (topo->nics[j].numa == t->numa)
				dist = 0;
			else
				continue;
			if (best < 0 || dist < best_dist ||
			    (dist == best_dist && uses[j] < uses[best])) {
				best = j;
				best_dist = dist;
			}
		}
		t->nic = best;
		if (best >= 0)
			uses[best]++;
	}
	free(uses);
}

/* ---- CPU sets ---- */

static int task_cpus(const struct rl_topo *topo, const int *cores, int n_cores,
                     struct rl_task_place *t)
{
	int n = 0;

	for (int k = 0; k < n_cores; k++)
		n += topo->cores[cores[k]].n_pus;
	t->cpus = calloc((size_t)n + 1, sizeof(int));
	if (!t->cpus)
		return -1;
	for (int k = 0; k < n_cores; k++) {
		const struct rl_topo_core *c = &topo->cores[cores[k]];
		for (int u = 0; u < c->n_pus && u < RL_TOPO_MAX_SMT; u++)
			t->cpus[t->n_cpus++] = c->pus[u];
	}
	qsort(t->cpus, (size_t)t->n_cpus, sizeof(int), cmp_int);
	return 0;
}

/* The tasks of domain d (in local-rank order) split its cores into
 * contiguous blocks, the first (cores % tasks) one core larger. Fewer
 * cores than tasks: task j gets core j % cores, shared. */
static int place_cpus_of_domain(const struct rl_topo *topo, int d, struct rl_node_placement *out,
                                int *cores)
{
	int n_cores = 0, n_tasks = 0, j = 0;

	for (int c = 0; c < topo->n_cores; c++)
		if (topo->cores[c].numa == d)
			cores[n_cores++] = c;
	if (n_cores == 0) /* memory-only domain: the whole node */
		for (int c = 0; c < topo->n_cores; c++)
			cores[n_cores++] = c;
	for (int i = 0; i < out->n_tasks; i++)
		n_tasks += out->tasks[i].numa == d;
	if (n_tasks == 0)
		return 0;
	if (n_cores < n_tasks)
		add_warning(out, "NUMA domain %d has %d cores for %d tasks: tasks share cores",
		            topo->numas[d].os_index, n_cores, n_tasks);
	int q = n_cores / n_tasks, r = n_cores % n_tasks;
	for (int i = 0; i < out->n_tasks; i++) {
		struct rl_task_place *t = &out->tasks[i];
		if (t->numa != d)
			continue;
		int rc;
		if (n_cores < n_tasks)
			rc = task_cpus(topo, &cores[j % n_cores], 1, t);
		else
			rc = task_cpus(topo, &cores[j * q + (j < r ? j : r)], q + (j < r), t);
		if (rc < 0)
			return -1;
		j++;
	}
	return 0;
}

/* ---- the whole node ---- */

static int check_args(const struct rl_topo *topo, const struct rl_layout *layout, int first, int n,
                      char *err, size_t errlen)
{
	const char *src = topo->source;

	if (n < 1) {
		snprintf(err, errlen, "placement on %s: %d tasks", src, n);
		return -1;
	}
	if (first < 0 || first > layout->world - n) {
		snprintf(err, errlen, "placement on %s: ranks %d..%d are outside the world of %d",
		         src, first, first + n - 1, layout->world);
		return -1;
	}
	if (topo->n_cores < 1 || topo->n_numas < 1) {
		snprintf(err, errlen,
		         "placement on %s: the topology has %d cores in %d NUMA domains", src,
		         topo->n_cores, topo->n_numas);
		return -1;
	}
	return 0;
}

int rl_place_node(const struct rl_topo *topo, const struct rl_layout *layout, int first_rank,
                  int n_tasks, bool use_gpus, const int *allowed, int n_allowed,
                  struct rl_node_placement *out, char *err, size_t errlen)
{
	int *task_gpu = NULL, *cores = NULL;

	memset(out, 0, sizeof(*out));
	if (check_args(topo, layout, first_rank, n_tasks, err, errlen) < 0)
		return -1;
	out->n_tasks = n_tasks;
	out->tasks = calloc((size_t)n_tasks, sizeof(*out->tasks));
	task_gpu = calloc((size_t)n_tasks, sizeof(int));
	cores = calloc((size_t)topo->n_cores, sizeof(int));
	if (!out->tasks || !task_gpu || !cores) {
		snprintf(err, errlen, "placement on %s: out of memory", topo->source);
		goto fail;
	}
	for (int i = 0; i < n_tasks; i++)
		task_gpu[i] = -1;
	if (use_gpus && place_gpus(topo, layout, first_rank, n_tasks, allowed, n_allowed, task_gpu,
	                           out, err, errlen) < 0)
		goto fail;
	for (int i = 0; i < n_tasks; i++)
		out->tasks[i].gpu = task_gpu[i];
	place_numa(topo, out);
	place_nics(topo, out);
	for (int d = 0; d < topo->n_numas; d++) {
		if (place_cpus_of_domain(topo, d, out, cores) < 0) {
			snprintf(err, errlen, "placement on %s: out of memory", topo->source);
			goto fail;
		}
	}
	for (int i = 0; i < n_tasks; i++) {
		if (out->tasks[i].n_cpus == 0) {
			snprintf(err, errlen, "placement on %s: no hardware threads for task %d",
			         topo->source, i);
			goto fail;
		}
	}
	free(task_gpu);
	free(cores);
	return 0;
fail:
	free(task_gpu);
	free(cores);
	rl_node_placement_free(out);
	return -1;
}

void rl_node_placement_free(struct rl_node_placement *p)
{
	if (!p)
		return;
	for (int i = 0; p->tasks && i < p->n_tasks; i++)
		free(p->tasks[i].cpus);
	free(p->tasks);
	memset(p, 0, sizeof(*p));
}

/* Whole items only: a list cut inside a number ("1" of "12") would name
 * CPUs the caller never meant. */
void rl_cpulist_format(const int *cpus, int n, char *buf, size_t len)
{
	size_t used = 0;
	char item[32];

	if (len == 0)
		return;
	buf[0] = '\0';
	for (int i = 0; i < n;) {
		int j = i;
		while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
			j++;
		int k =
		    j > i ? snprintf(item, sizeof(item), "%s%d-%d", i ? "," : "", cpus[i], cpus[j])
		          : snprintf(item, sizeof(item), "%s%d", i ? "," : "", cpus[i]);
		if (k < 0 || used + (size_t)k + 1 > len)
			return;
		memcpy(buf + used, item, (size_t)k + 1);
		used += (size_t)k;
		i = j + 1;
	}
}
