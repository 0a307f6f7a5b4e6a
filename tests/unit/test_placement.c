/* Placement on hand-made nodes. Every expected GPU, NIC and CPU list below
 * is worked out by hand from the fixture's description and placement.h's
 * rules, not taken from the code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "topology/placement.h"

/* ---- fixtures ---- */

/* n_numas sockets of per_numa cores with smt threads each; core c (in
 * socket order) has PUs c, c + n, c + 2n ... (n = all cores), the way
 * Linux numbers hyperthread siblings. */
static void make_cores(struct rl_topo *t, int n_numas, int per_numa, int smt)
{
	int n = n_numas * per_numa;

	t->n_numas = n_numas;
	t->numas = calloc((size_t)n_numas, sizeof(*t->numas));
	cr_assert_not_null(t->numas);
	for (int d = 0; d < n_numas; d++)
		t->numas[d].os_index = d;
	t->n_cores = n;
	t->cores = calloc((size_t)n, sizeof(*t->cores));
	cr_assert_not_null(t->cores);
	for (int c = 0; c < n; c++) {
		t->cores[c].numa = c / per_numa;
		t->cores[c].n_pus = smt;
		for (int k = 0; k < smt; k++)
			t->cores[c].pus[k] = c + k * n;
	}
}

static void make_gpus(struct rl_topo *t, int n, const int *numa, const int *domain)
{
	int max_domain = -1;

	t->n_gpus = n;
	t->gpus = calloc((size_t)n, sizeof(*t->gpus));
	t->nvlink_mbps = calloc((size_t)n * (size_t)n, sizeof(double));
	cr_assert(t->gpus && t->nvlink_mbps);
	for (int g = 0; g < n; g++) {
		snprintf(t->gpus[g].busid, sizeof(t->gpus[g].busid), "0000:%02x:00.0", 0x10 + g);
		t->gpus[g].vendor_id = 0x10de;
		t->gpus[g].numa = numa[g];
		t->gpus[g].nvlink_domain = domain[g];
		if (domain[g] > max_domain)
			max_domain = domain[g];
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			if (i != j && domain[i] == domain[j])
				t->nvlink_mbps[i * n + j] = 300000;
	t->n_nvlink_domains = max_domain + 1;
}

struct nic_spec {
	const char *name;
	bool ib;
	int numa;
};

/* dist: n_gpus x n NIC distances, or NULL */
static void make_nics(struct rl_topo *t, int n, const struct nic_spec *spec, const int *dist)
{
	t->n_nics = n;
	t->nics = calloc((size_t)n, sizeof(*t->nics));
	cr_assert_not_null(t->nics);
	for (int i = 0; i < n; i++) {
		snprintf(t->nics[i].name, sizeof(t->nics[i].name), "%s", spec[i].name);
		t->nics[i].infiniband = spec[i].ib;
		t->nics[i].numa = spec[i].numa;
	}
	if (dist && t->n_gpus > 0) {
		size_t m = (size_t)t->n_gpus * (size_t)n;
		t->gpu_nic_distance = calloc(m, sizeof(int));
		cr_assert_not_null(t->gpu_nic_distance);
		memcpy(t->gpu_nic_distance, dist, m * sizeof(int));
	}
}

static void free_topo(struct rl_topo *t)
{
	free(t->cores);
	free(t->numas);
	free(t->gpus);
	free(t->nics);
	free(t->nvlink_mbps);
	free(t->gpu_nic_distance);
	memset(t, 0, sizeof(*t));
}

/* 8 GPUs on 2 sockets of 16 cores x 2 threads; GPUs 0-3 on socket 0,
 * 4-7 on socket 1. Four InfiniBand NICs, mlx5_k behind the PCIe switch
 * of GPUs 2k and 2k+1 (distance 0), 2 from the other GPUs of its socket, 4
 * across; eth0 on socket 0 behind GPU 0's switch. domain: the NVLink
 * domain of each GPU. */
static void make_8gpu(struct rl_topo *t, const int *domain)
{
	static const int numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
	static const struct nic_spec nics[5] = {
	    {"mlx5_0", true, 0}, {"mlx5_1", true, 0}, {"mlx5_2", true, 1},
	    {"mlx5_3", true, 1}, {"eth0", false, 0},
	};
	int dist[8 * 5];

	memset(t, 0, sizeof(*t));
	snprintf(t->source, sizeof(t->source), "test 8-GPU node");
	make_cores(t, 2, 16, 2);
	make_gpus(t, 8, numa, domain);
	for (int g = 0; g < 8; g++) {
		for (int k = 0; k < 4; k++)
			dist[g * 5 + k] = k == g / 2 ? 0 : nics[k].numa == numa[g] ? 2 : 4;
		dist[g * 5 + 4] = g == 0 ? 0 : numa[g] == 0 ? 2 : 4;
	}
	make_nics(t, 5, nics, dist);
}

static void make_one_domain(struct rl_topo *t)
{
	static const int domain[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	make_8gpu(t, domain);
}

/* two NVLink domains of 4: GPUs 0-3 and 4-7 */
static void make_two_domains(struct rl_topo *t)
{
	static const int domain[8] = {0, 0, 0, 0, 1, 1, 1, 1};
	make_8gpu(t, domain);
}

/* two NVLink domains of 4 that interleave in bus order: {0,1,4,5} and
 * {2,3,6,7}, so "the next four GPUs" is never a domain */
static void make_interleaved_domains(struct rl_topo *t)
{
	static const int domain[8] = {0, 0, 1, 1, 0, 0, 1, 1};
	make_8gpu(t, domain);
}

/* A PCIe workstation: 4 GPUs without NVLink (each its own domain), one
 * socket of 8 cores x 2 threads, only Ethernet. */
static void make_workstation(struct rl_topo *t)
{
	static const int numa[4] = {0, 0, 0, 0}, domain[4] = {0, 1, 2, 3};
	static const struct nic_spec nics[1] = {{"eno1", false, 0}};
	static const int dist[4] = {1, 1, 1, 1};

	memset(t, 0, sizeof(*t));
	snprintf(t->source, sizeof(t->source), "test workstation");
	make_cores(t, 1, 8, 2);
	make_gpus(t, 4, numa, domain);
	make_nics(t, 1, nics, dist);
}

/* No GPUs, 2 sockets of 8 cores x 2 threads, mlx5_0 on socket 1. */
static void make_cpu_node(struct rl_topo *t)
{
	static const struct nic_spec nics[2] = {{"mlx5_0", true, 1}, {"eth0", false, 0}};

	memset(t, 0, sizeof(*t));
	snprintf(t->source, sizeof(t->source), "test cpu node");
	make_cores(t, 2, 8, 2);
	make_nics(t, 2, nics, NULL);
}

static void layout(struct rl_layout *l, int world, int tp, int pp, int cp)
{
	char err[256] = "";
	cr_assert_eq(rl_layout_init(l, world, tp, pp, cp, 1, tp, err, sizeof(err)), 0, "%s", err);
}

static void place_ok(const struct rl_topo *t, const struct rl_layout *l, int first, int n,
                     bool use_gpus, const int *allowed, int n_allowed, struct rl_node_placement *p)
{
	char err[256] = "";
	cr_assert_eq(
	    rl_place_node(t, l, first, n, use_gpus, allowed, n_allowed, p, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(p->n_tasks, n);
}

static void expect_gpus(const struct rl_node_placement *p, const int *want)
{
	for (int i = 0; i < p->n_tasks; i++)
		cr_expect_eq(p->tasks[i].gpu, want[i], "task %d: GPU %d, want %d", i,
		             p->tasks[i].gpu, want[i]);
}

static void expect_nics(const struct rl_node_placement *p, const int *want)
{
	for (int i = 0; i < p->n_tasks; i++)
		cr_expect_eq(p->tasks[i].nic, want[i], "task %d: NIC %d, want %d", i,
		             p->tasks[i].nic, want[i]);
}

static void expect_numas(const struct rl_node_placement *p, const int *want)
{
	for (int i = 0; i < p->n_tasks; i++)
		cr_expect_eq(p->tasks[i].numa, want[i], "task %d: NUMA %d, want %d", i,
		             p->tasks[i].numa, want[i]);
}

static void expect_cpus(const struct rl_node_placement *p, const char *const *want)
{
	char buf[256];

	for (int i = 0; i < p->n_tasks; i++) {
		rl_cpulist_format(p->tasks[i].cpus, p->tasks[i].n_cpus, buf, sizeof(buf));
		cr_expect_str_eq(buf, want[i], "task %d: CPUs %s, want %s", i, buf, want[i]);
		for (int k = 1; k < p->tasks[i].n_cpus; k++)
			cr_expect_lt(p->tasks[i].cpus[k - 1], p->tasks[i].cpus[k], "task %d", i);
	}
}

static void expect_warning(const struct rl_node_placement *p, const char *a, const char *b)
{
	cr_expect(strstr(p->warning, a) != NULL, "warning \"%s\" lacks \"%s\"", p->warning, a);
	if (b)
		cr_expect(strstr(p->warning, b) != NULL, "warning \"%s\" lacks \"%s\"", p->warning,
		          b);
}

/* ---- one NVLink domain ---- */

/* 8 tasks, one per GPU in order; NIC behind each GPU's switch; each socket's
 * 16 cores split among its 4 tasks: 4 cores = 8 PUs each, disjoint. */
Test(placement, one_domain_full_node)
{
	static const int gpus[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	static const int nics[8] = {0, 0, 1, 1, 2, 2, 3, 3};
	static const int numas[8] = {0, 0, 0, 0, 1, 1, 1, 1};
	static const char *const cpus[8] = {"0-3,32-35",   "4-7,36-39",   "8-11,40-43",
	                                    "12-15,44-47", "16-19,48-51", "20-23,52-55",
	                                    "24-27,56-59", "28-31,60-63"};
	/* (world, tp, first rank): TP 8, TP 4 on the second node, TP 2 */
	static const int cases[][3] = {{8, 8, 0}, {16, 4, 8}, {8, 2, 0}, {32, 1, 24}};
	struct rl_topo t;

	make_one_domain(&t);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct rl_layout l;
		struct rl_node_placement p;
		layout(&l, cases[c][0], cases[c][1], 1, 1);
		place_ok(&t, &l, cases[c][2], 8, true, NULL, 0, &p);
		expect_gpus(&p, gpus);
		expect_nics(&p, nics);
		expect_numas(&p, numas);
		expect_cpus(&p, cpus);
		cr_expect_str_eq(p.warning, "", "TP %d: %s", cases[c][1], p.warning);
		/* disjoint, 8 PUs each */
		char seen[64] = {0};
		for (int i = 0; i < 8; i++) {
			cr_expect_eq(p.tasks[i].n_cpus, 8);
			for (int k = 0; k < p.tasks[i].n_cpus; k++) {
				int cpu = p.tasks[i].cpus[k];
				cr_assert(cpu >= 0 && cpu < 64);
				cr_expect_eq(seen[cpu], 0, "PU %d given twice", cpu);
				seen[cpu] = 1;
			}
		}
		rl_node_placement_free(&p);
	}
	free_topo(&t);
}

/* Half a node: the first GPUs, both on socket 0, 8 cores each. */
Test(placement, one_domain_two_tasks)
{
	static const int gpus[2] = {0, 1}, nics[2] = {0, 0};
	static const char *const cpus[2] = {"0-7,32-39", "8-15,40-47"};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	make_one_domain(&t);
	layout(&l, 8, 2, 1, 1);
	place_ok(&t, &l, 4, 2, true, NULL, 0, &p);
	expect_gpus(&p, gpus);
	expect_nics(&p, nics);
	expect_cpus(&p, cpus);
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* ---- two NVLink domains ---- */

Test(placement, two_domains_tp4)
{
	static const int gpus[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	make_two_domains(&t);
	layout(&l, 16, 4, 2, 1);
	place_ok(&t, &l, 0, 8, true, NULL, 0, &p);
	expect_gpus(&p, gpus);
	cr_expect_str_eq(p.warning, "");
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* Domains {0,1,4,5} and {2,3,6,7}: TP group 0 (tasks 0-3) takes the first
 * domain in bus order, TP group 1 the second. Each task's NUMA domain and
 * NIC follow its GPU; socket 0 holds tasks 0,1,4,5 (GPUs 0,1,2,3), socket 1
 * tasks 2,3,6,7, cores split in local-rank order. */
Test(placement, interleaved_domains_tp4)
{
	static const int gpus[8] = {0, 1, 4, 5, 2, 3, 6, 7};
	static const int nics[8] = {0, 0, 2, 2, 1, 1, 3, 3};
	static const int numas[8] = {0, 0, 1, 1, 0, 0, 1, 1};
	static const char *const cpus[8] = {"0-3,32-35",   "4-7,36-39",  "16-19,48-51",
	                                    "20-23,52-55", "8-11,40-43", "12-15,44-47",
	                                    "24-27,56-59", "28-31,60-63"};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	make_interleaved_domains(&t);
	layout(&l, 8, 4, 1, 1);
	place_ok(&t, &l, 0, 8, true, NULL, 0, &p);
	expect_gpus(&p, gpus);
	expect_nics(&p, nics);
	expect_numas(&p, numas);
	expect_cpus(&p, cpus);
	cr_expect_str_eq(p.warning, "");
	rl_node_placement_free(&p);

	/* TP 2 x CP 2 is the same stride-1 block of 4 */
	layout(&l, 8, 2, 1, 2);
	place_ok(&t, &l, 0, 8, true, NULL, 0, &p);
	expect_gpus(&p, gpus);
	cr_expect_str_eq(p.warning, "");
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* TP 2 x CP 4 = 8 fits no domain: TP pairs stay inside domains, CP spans
 * them, without a warning. Pairs {0,1},{2,3} go to domain {0,1,4,5},
 * pairs {4,5},{6,7} to {2,3,6,7}. */
Test(placement, cp_falls_back_to_tp)
{
	static const int gpus[8] = {0, 1, 4, 5, 2, 3, 6, 7};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	make_interleaved_domains(&t);
	layout(&l, 8, 2, 1, 4);
	place_ok(&t, &l, 0, 8, true, NULL, 0, &p);
	expect_gpus(&p, gpus);
	cr_expect_str_eq(p.warning, "");
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* TP 8 on two domains of 4: placed domain by domain, with a warning. */
Test(placement, tp8_on_two_domains_warns)
{
	static const int contiguous[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	static const int interleaved[8] = {0, 1, 4, 5, 2, 3, 6, 7};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	layout(&l, 8, 8, 1, 1);
	make_two_domains(&t);
	place_ok(&t, &l, 0, 8, true, NULL, 0, &p);
	expect_gpus(&p, contiguous);
	expect_warning(&p, "TP 8", "4, 4");
	rl_node_placement_free(&p);
	free_topo(&t);

	make_interleaved_domains(&t);
	place_ok(&t, &l, 0, 8, true, NULL, 0, &p);
	expect_gpus(&p, interleaved);
	expect_warning(&p, "TP 8", "4, 4");
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* Slurm gave the step GPUs 5 and 6 (both in domain 4-7): 2 tasks of a TP 2
 * job get exactly those, in bus order whatever order they are listed in;
 * NICs mlx5_2 and mlx5_3; socket 1's 16 cores halved. */
Test(placement, allowed_gpus)
{
	static const int allowed_a[2] = {5, 6}, allowed_b[2] = {6, 5};
	static const int gpus[2] = {5, 6}, nics[2] = {2, 3}, numas[2] = {1, 1};
	static const char *const cpus[2] = {"16-23,48-55", "24-31,56-63"};
	const int *lists[2] = {allowed_a, allowed_b};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	make_two_domains(&t);
	layout(&l, 16, 2, 1, 1);
	for (int k = 0; k < 2; k++) {
		place_ok(&t, &l, 6, 2, true, lists[k], 2, &p);
		expect_gpus(&p, gpus);
		expect_nics(&p, nics);
		expect_numas(&p, numas);
		expect_cpus(&p, cpus);
		cr_expect_str_eq(p.warning, "");
		rl_node_placement_free(&p);
	}
	free_topo(&t);

	/* with interleaved domains 5 and 6 are in different domains: a TP
	 * pair on them is split, TP 1 is fine */
	make_interleaved_domains(&t);
	place_ok(&t, &l, 6, 2, true, allowed_a, 2, &p);
	expect_gpus(&p, gpus);
	expect_warning(&p, "TP 2", "1, 1");
	rl_node_placement_free(&p);
	layout(&l, 16, 1, 1, 1);
	place_ok(&t, &l, 6, 2, true, allowed_a, 2, &p);
	expect_gpus(&p, gpus);
	cr_expect_str_eq(p.warning, "");
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* A node holding ranks 2..7 of a TP 4 world of 8: the partial TP group
 * {2,3} and the whole group {4..7}. The whole group is packed first
 * (GPUs 0-3, domain 0); the pair then only fits domain 1 (GPUs 4, 5). */
Test(placement, partial_tp_group_on_node)
{
	static const int gpus[6] = {4, 5, 0, 1, 2, 3};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	make_two_domains(&t);
	layout(&l, 8, 4, 1, 1);
	place_ok(&t, &l, 2, 6, true, NULL, 0, &p);
	expect_gpus(&p, gpus);
	cr_expect_str_eq(p.warning, "");
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* ---- NICs ---- */

/* 4 GPUs, one domain, one socket. Distances (mlx5_0, mlx5_1, eth0):
 * GPU 0 (2, 2, 0): eth0 is nearest but not InfiniBand; tie -> mlx5_0.
 * GPU 1 (1, 0, 2): mlx5_1 on its switch wins over the lower index.
 * GPU 2 (2, 2, 2): tie, both used once -> mlx5_0.
 * GPU 3 (2, 2, 2): tie, mlx5_0 used twice, mlx5_1 once -> mlx5_1. */
Test(placement, nic_pairing)
{
	static const int numa[4] = {0, 0, 0, 0}, domain[4] = {0, 0, 0, 0};
	static const struct nic_spec spec[3] = {
	    {"mlx5_0", true, 0}, {"mlx5_1", true, 0}, {"eth0", false, 0}};
	static const int dist[12] = {2, 2, 0, 1, 0, 2, 2, 2, 2, 2, 2, 2};
	static const int nics[4] = {0, 1, 0, 1};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	memset(&t, 0, sizeof(t));
	make_cores(&t, 1, 4, 1);
	make_gpus(&t, 4, numa, domain);
	make_nics(&t, 3, spec, dist);
	layout(&l, 4, 1, 1, 1);
	place_ok(&t, &l, 0, 4, true, NULL, 0, &p);
	expect_nics(&p, nics);
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* ---- PCIe workstation ---- */

Test(placement, workstation_tp2_warns)
{
	static const int gpus[4] = {0, 1, 2, 3}, nics[4] = {-1, -1, -1, -1};
	static const char *const cpus[4] = {"0-1,8-9", "2-3,10-11", "4-5,12-13", "6-7,14-15"};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	make_workstation(&t);
	layout(&l, 4, 2, 1, 1);
	place_ok(&t, &l, 0, 4, true, NULL, 0, &p);
	expect_gpus(&p, gpus);
	expect_nics(&p, nics);
	expect_cpus(&p, cpus);
	expect_warning(&p, "TP 2", "1, 1, 1, 1");
	rl_node_placement_free(&p);

	layout(&l, 4, 1, 1, 1);
	place_ok(&t, &l, 0, 4, true, NULL, 0, &p);
	expect_gpus(&p, gpus);
	cr_expect_str_eq(p.warning, "");
	rl_node_placement_free(&p);

	/* 8 cores for 3 tasks: 3, 3, 2 */
	static const char *const cpus3[3] = {"0-2,8-10", "3-5,11-13", "6-7,14-15"};
	layout(&l, 3, 1, 1, 1);
	place_ok(&t, &l, 0, 3, true, NULL, 0, &p);
	expect_cpus(&p, cpus3);
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* ---- without GPUs ---- */

/* 4 tasks over 2 sockets: tasks 0,1 on socket 0, 2,3 on socket 1, 4 cores
 * each; the only InfiniBand NIC is on socket 1. */
Test(placement, gpu_less_node)
{
	static const int gpus[4] = {-1, -1, -1, -1}, nics[4] = {-1, -1, 0, 0};
	static const int numas[4] = {0, 0, 1, 1};
	static const char *const cpus[4] = {"0-3,16-19", "4-7,20-23", "8-11,24-27", "12-15,28-31"};
	static const char *const cpus3[3] = {"0-3,16-19", "4-7,20-23", "8-15,24-31"};
	static const int numas3[3] = {0, 0, 1};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	make_cpu_node(&t);
	layout(&l, 8, 2, 1, 1);
	place_ok(&t, &l, 4, 4, false, NULL, 0, &p);
	expect_gpus(&p, gpus);
	expect_nics(&p, nics);
	expect_numas(&p, numas);
	expect_cpus(&p, cpus);
	cr_expect_str_eq(p.warning, "");
	rl_node_placement_free(&p);

	/* 3 tasks: task i to domain i * 2 / 3 = 0, 0, 1 */
	layout(&l, 3, 1, 1, 1);
	place_ok(&t, &l, 0, 3, false, NULL, 0, &p);
	expect_numas(&p, numas3);
	expect_cpus(&p, cpus3);
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* GPUs present but unused (CPU backend): no GPU, spread by socket, NICs of
 * the socket balanced (mlx5_0, mlx5_1 on socket 0, mlx5_2, mlx5_3 on 1). */
Test(placement, gpus_present_not_used)
{
	static const int gpus[4] = {-1, -1, -1, -1}, nics[4] = {0, 1, 2, 3};
	static const int numas[4] = {0, 0, 1, 1};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	make_one_domain(&t);
	layout(&l, 4, 1, 1, 1);
	place_ok(&t, &l, 0, 4, false, NULL, 0, &p);
	expect_gpus(&p, gpus);
	expect_nics(&p, nics);
	expect_numas(&p, numas);
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* ---- CPU corner cases ---- */

/* 2 single-thread cores for 4 tasks: round robin 0,1,0,1 with a warning;
 * GPUs of unknown NUMA domain (-1) count as domain 0. */
Test(placement, fewer_cores_than_tasks)
{
	static const int numa[4] = {-1, -1, -1, -1}, domain[4] = {0, 0, 0, 0};
	static const char *const cpus[4] = {"0", "1", "0", "1"};
	static const int numas[4] = {0, 0, 0, 0};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	memset(&t, 0, sizeof(t));
	make_cores(&t, 1, 2, 1);
	make_gpus(&t, 4, numa, domain);
	layout(&l, 4, 4, 1, 1);
	place_ok(&t, &l, 0, 4, true, NULL, 0, &p);
	expect_cpus(&p, cpus);
	expect_numas(&p, numas);
	expect_warning(&p, "2 cores for 4 tasks", NULL);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(p.tasks[i].nic, -1, "no NICs at all");
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* GPUs attached to a memory-only NUMA domain 1 (all 8 cores are in domain
 * 0): their tasks split the whole node. Without GPUs, tasks only go to
 * domains that have cores. */
Test(placement, memory_only_numa)
{
	static const int numa[2] = {1, 1}, domain[2] = {0, 0};
	static const char *const cpus[2] = {"0-3", "4-7"};
	static const int on_gpu[2] = {1, 1}, no_gpu[2] = {0, 0};
	struct rl_topo t;
	struct rl_layout l;
	struct rl_node_placement p;

	memset(&t, 0, sizeof(t));
	make_cores(&t, 1, 8, 1);
	t.n_numas = 2;
	t.numas = realloc(t.numas, 2 * sizeof(*t.numas));
	cr_assert_not_null(t.numas);
	t.numas[1].os_index = 1;
	make_gpus(&t, 2, numa, domain);
	layout(&l, 2, 2, 1, 1);
	place_ok(&t, &l, 0, 2, true, NULL, 0, &p);
	expect_numas(&p, on_gpu);
	expect_cpus(&p, cpus);
	rl_node_placement_free(&p);
	place_ok(&t, &l, 0, 2, false, NULL, 0, &p);
	expect_numas(&p, no_gpu);
	expect_cpus(&p, cpus);
	rl_node_placement_free(&p);
	free_topo(&t);
}

/* ---- errors ---- */

static void expect_error(const struct rl_topo *t, const struct rl_layout *l, int first, int n,
                         bool use_gpus, const int *allowed, int n_allowed, const char *a,
                         const char *b)
{
	struct rl_node_placement p;
	char err[256] = "";

	cr_expect_eq(
	    rl_place_node(t, l, first, n, use_gpus, allowed, n_allowed, &p, err, sizeof(err)), -1,
	    "placing %d tasks should fail", n);
	cr_expect(strstr(err, a) != NULL, "error \"%s\" lacks \"%s\"", err, a);
	if (b)
		cr_expect(strstr(err, b) != NULL, "error \"%s\" lacks \"%s\"", err, b);
	cr_expect_null(p.tasks, "a failed placement holds nothing");
	cr_expect_eq(p.n_tasks, 0);
}

Test(placement, errors)
{
	static const int two[2] = {5, 6}, bad[1] = {8}, neg[1] = {-1}, twice[2] = {1, 1};
	struct rl_topo t, cpu, empty;
	struct rl_layout l;

	make_two_domains(&t);
	layout(&l, 16, 1, 1, 1);
	expect_error(&t, &l, 0, 3, true, two, 2, "3 tasks", "only 2 GPUs");
	expect_error(&t, &l, 0, 9, true, NULL, 0, "9 tasks", "only 8 GPUs");
	expect_error(&t, &l, 0, 1, true, bad, 1, "index 8", "8 GPUs");
	expect_error(&t, &l, 0, 1, true, neg, 1, "index -1", NULL);
	expect_error(&t, &l, 0, 1, true, twice, 2, "allowed twice", "0000:11:00.0");
	expect_error(&t, &l, 0, 0, true, NULL, 0, "0 tasks", NULL);
	expect_error(&t, &l, 12, 8, true, NULL, 0, "12..19", "16");
	expect_error(&t, &l, -1, 2, true, NULL, 0, "outside the world", NULL);
	expect_error(&t, &l, 0, 1, true, two, 0, "1 tasks", "only 0 GPUs");
	free_topo(&t);

	make_cpu_node(&cpu);
	expect_error(&cpu, &l, 0, 4, true, NULL, 0, "4 tasks need a GPU", "test cpu node");
	free_topo(&cpu);

	memset(&empty, 0, sizeof(empty));
	snprintf(empty.source, sizeof(empty.source), "empty.xml");
	expect_error(&empty, &l, 0, 1, false, NULL, 0, "empty.xml", "0 cores");
}

Test(placement, free_twice_is_harmless)
{
	struct rl_node_placement p;

	memset(&p, 0, sizeof(p));
	rl_node_placement_free(&p);
	rl_node_placement_free(&p);
	rl_node_placement_free(NULL);
}

/* ---- cpulist ---- */

Test(placement, cpulist_format)
{
	static const int a[8] = {0, 1, 2, 3, 8, 9, 10, 11}, b[3] = {0, 2, 4}, c[2] = {4, 5};
	static const int d[1] = {17}, e[6] = {1, 3, 4, 5, 12, 13};
	char buf[64];

	rl_cpulist_format(a, 8, buf, sizeof(buf));
	cr_expect_str_eq(buf, "0-3,8-11");
	rl_cpulist_format(b, 3, buf, sizeof(buf));
	cr_expect_str_eq(buf, "0,2,4");
	rl_cpulist_format(c, 2, buf, sizeof(buf));
	cr_expect_str_eq(buf, "4-5");
	rl_cpulist_format(d, 1, buf, sizeof(buf));
	cr_expect_str_eq(buf, "17");
	rl_cpulist_format(e, 6, buf, sizeof(buf));
	cr_expect_str_eq(buf, "1,3-5,12-13");
	rl_cpulist_format(a, 0, buf, sizeof(buf));
	cr_expect_str_eq(buf, "");

	/* truncation keeps whole items only */
	rl_cpulist_format(a, 8, buf, 8); /* "0-3,8-11" needs 9 bytes */
	cr_expect_str_eq(buf, "0-3");
	rl_cpulist_format(a, 8, buf, 9);
	cr_expect_str_eq(buf, "0-3,8-11");
	rl_cpulist_format(d, 1, buf, 2);
	cr_expect_str_eq(buf, "", "\"1\" of \"17\" would be a different CPU");
	rl_cpulist_format(a, 8, buf, 1);
	cr_expect_str_eq(buf, "");
	buf[0] = 'x';
	rl_cpulist_format(a, 8, buf, 0);
	cr_expect_eq(buf[0], 'x');
}
