/* Topology discovery against hwloc XML files. The expected values of our
 * fixtures (tests/topologies/) are the machines as tests/fixtures/
 * make_topologies.py describes them in its comments; those of the real
 * machines (../shared/topologies/, skipped when absent) were read from the
 * XML by hand. Neither comes from this code's output. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "topology/topology.h"

#ifndef TOP_SRCDIR
#define TOP_SRCDIR "/work/main"
#endif

static char *src_path(const char *rel)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : TOP_SRCDIR;
	char *p = NULL;
	cr_assert_geq(asprintf(&p, "%s/%s", top, rel), 0);
	return p;
}

static void load_path(struct rl_topo *t, const char *path)
{
	char err[512] = "";
	int rc = rl_topo_load(t, path, err, sizeof err);
	cr_assert_eq(rc, 0, "rl_topo_load(%s): %s", path ? path : "NULL", err);
}

static void load_fixture(struct rl_topo *t, const char *name)
{
	char *rel = NULL, *path;
	cr_assert_geq(asprintf(&rel, "tests/topologies/%s", name), 0);
	path = src_path(rel);
	load_path(t, path);
	cr_expect_str_eq(t->source, path);
	free(rel);
	free(path);
}

/* A machine from ../shared/topologies, or the test is skipped. */
static void load_shared(struct rl_topo *t, const char *name)
{
	char *rel = NULL, *path;
	cr_assert_geq(asprintf(&rel, "../shared/topologies/%s", name), 0);
	path = src_path(rel);
	if (access(path, R_OK) != 0) {
		free(rel);
		free(path);
		cr_skip_test(
		    "%s not found: the shared real topologies are not next to the source tree",
		    name);
	}
	load_path(t, path);
	free(rel);
	free(path);
}

static double mbps(const struct rl_topo *t, int a, int b)
{
	return t->nvlink_mbps[a * t->n_gpus + b];
}

static int dist(const struct rl_topo *t, int g, int n)
{
	return t->gpu_nic_distance[g * t->n_nics + n];
}

static void expect_core(const struct rl_topo *t, int i, int numa, int n_pus, const int *pus)
{
	cr_assert_lt(i, t->n_cores);
	cr_expect_eq(t->cores[i].numa, numa, "core %d numa %d, want %d", i, t->cores[i].numa, numa);
	cr_expect_eq(t->cores[i].n_pus, n_pus, "core %d has %d PUs, want %d", i, t->cores[i].n_pus,
	             n_pus);
	for (int k = 0; k < n_pus && k < t->cores[i].n_pus; k++)
		cr_expect_eq(t->cores[i].pus[k], pus[k], "core %d PU %d is %d, want %d", i, k,
		             t->cores[i].pus[k], pus[k]);
}

static void expect_gpu(const struct rl_topo *t, int i, const char *busid, const char *name,
                       const char *model, unsigned device, int numa)
{
	cr_assert_lt(i, t->n_gpus);
	cr_expect_str_eq(t->gpus[i].busid, busid, "gpu %d", i);
	cr_expect_str_eq(t->gpus[i].name, name, "gpu %d", i);
	cr_expect_str_eq(t->gpus[i].model, model, "gpu %d", i);
	cr_expect_eq(t->gpus[i].vendor_id, 0x10de, "gpu %d", i);
	cr_expect_eq(t->gpus[i].device_id, device, "gpu %d device %#x", i, t->gpus[i].device_id);
	cr_expect_eq(t->gpus[i].numa, numa, "gpu %d numa %d, want %d", i, t->gpus[i].numa, numa);
}

static void expect_nic(const struct rl_topo *t, int i, const char *name, const char *busid, bool ib,
                       int numa)
{
	cr_assert_lt(i, t->n_nics);
	cr_expect_str_eq(t->nics[i].name, name, "nic %d", i);
	cr_expect_str_eq(t->nics[i].busid, busid, "nic %d (%s)", i, name);
	cr_expect_eq(t->nics[i].infiniband, ib, "nic %d (%s)", i, name);
	cr_expect_eq(t->nics[i].numa, numa, "nic %d (%s) numa %d, want %d", i, name,
	             t->nics[i].numa, numa);
}

/* ---- dgx-8gpu-2socket.xml ---- */

static const char *const dgx_busids[8] = {"0000:13:00.0", "0000:16:00.0", "0000:23:00.0",
                                          "0000:26:00.0", "0000:93:00.0", "0000:96:00.0",
                                          "0000:a3:00.0", "0000:a6:00.0"};

Test(topology_dgx, cores_and_numa)
{
	struct rl_topo t;
	load_fixture(&t, "dgx-8gpu-2socket.xml");
	cr_assert_eq(t.n_numas, 2);
	cr_expect_eq(t.numas[0].os_index, 0);
	cr_expect_eq(t.numas[1].os_index, 1);
	cr_assert_eq(t.n_cores, 32);
	/* socket s, core c: PUs 16s+c and 32+16s+c */
	for (int i = 0; i < 32; i++) {
		int pus[2] = {i, 32 + i};
		expect_core(&t, i, i / 16, 2, pus);
	}
	rl_topo_free(&t);
}

Test(topology_dgx, gpus)
{
	struct rl_topo t;
	load_fixture(&t, "dgx-8gpu-2socket.xml");
	/* the 4 NVSwitches are NVIDIA PCI devices too, of class 0x0680 */
	cr_assert_eq(t.n_gpus, 8);
	for (int i = 0; i < 8; i++) {
		char name[32];
		snprintf(name, sizeof name, "nvml%d", i);
		expect_gpu(&t, i, dgx_busids[i], name, "NVIDIA H100 80GB HBM3", 0x2330, i / 4);
	}
	rl_topo_free(&t);
}

Test(topology_dgx, nics)
{
	struct rl_topo t;
	static const char *const busids[8] = {"0000:14:00.0", "0000:15:00.0", "0000:24:00.0",
	                                      "0000:25:00.0", "0000:94:00.0", "0000:95:00.0",
	                                      "0000:a4:00.0", "0000:a5:00.0"};
	load_fixture(&t, "dgx-8gpu-2socket.xml");
	cr_assert_eq(t.n_nics, 9);
	for (int i = 0; i < 8; i++) {
		char name[32];
		snprintf(name, sizeof name, "mlx5_%d", i);
		expect_nic(&t, i, name, busids[i], true, i / 4);
	}
	expect_nic(&t, 8, "enp49s0f0", "0000:31:00.0", false, 0);
	rl_topo_free(&t);
}

Test(topology_dgx, nvlink_through_switches)
{
	struct rl_topo t;
	load_fixture(&t, "dgx-8gpu-2socket.xml");
	cr_assert_eq(t.n_gpus, 8);
	cr_assert_not_null(t.nvlink_mbps);
	/* 5 + 4 + 4 + 5 links of 25000 MB/s to the four switches, from every GPU */
	for (int a = 0; a < 8; a++)
		for (int b = 0; b < 8; b++)
			cr_expect_eq(mbps(&t, a, b), a == b ? 0.0 : 450000.0, "%d->%d: %g", a, b,
			             mbps(&t, a, b));
	cr_expect_eq(t.n_nvlink_domains, 1);
	for (int i = 0; i < 8; i++)
		cr_expect_eq(t.gpus[i].nvlink_domain, 0);
	rl_topo_free(&t);
}

Test(topology_dgx, gpu_nic_distance)
{
	struct rl_topo t;
	/* columns mlx5_0..7, enp49s0f0. Same PCIe switch 0, other switch of the
	 * socket (another host bridge) 2, other socket 4; the Ethernet port has
	 * its own host bridge on socket 0. */
	static const int want[8][9] = {
	    {0, 0, 2, 2, 4, 4, 4, 4, 2}, {0, 0, 2, 2, 4, 4, 4, 4, 2}, {2, 2, 0, 0, 4, 4, 4, 4, 2},
	    {2, 2, 0, 0, 4, 4, 4, 4, 2}, {4, 4, 4, 4, 0, 0, 2, 2, 4}, {4, 4, 4, 4, 0, 0, 2, 2, 4},
	    {4, 4, 4, 4, 2, 2, 0, 0, 4}, {4, 4, 4, 4, 2, 2, 0, 0, 4},
	};
	load_fixture(&t, "dgx-8gpu-2socket.xml");
	cr_assert_eq(t.n_gpus, 8);
	cr_assert_eq(t.n_nics, 9);
	for (int g = 0; g < 8; g++)
		for (int n = 0; n < 9; n++)
			cr_expect_eq(dist(&t, g, n), want[g][n], "gpu %d nic %s: %d, want %d", g,
			             t.nics[n].name, dist(&t, g, n), want[g][n]);
	rl_topo_free(&t);
}

Test(topology_dgx, find_gpu)
{
	struct rl_topo t;
	load_fixture(&t, "dgx-8gpu-2socket.xml");
	cr_expect_eq(rl_topo_find_gpu(&t, "0000:13:00.0"), 0);
	cr_expect_eq(rl_topo_find_gpu(&t, "13:00.0"), 0);
	cr_expect_eq(rl_topo_find_gpu(&t, "00000000:13:00.0"), 0);
	cr_expect_eq(rl_topo_find_gpu(&t, "0000:A6:00.0"), 7);
	cr_expect_eq(rl_topo_find_gpu(&t, "00000000:A6:00.0"), 7);
	cr_expect_eq(rl_topo_find_gpu(&t, "a3:00.0"), 6);
	cr_expect_eq(rl_topo_find_gpu(&t, "0000:14:00.0"), -1, "a NIC is no GPU");
	cr_expect_eq(rl_topo_find_gpu(&t, "0000:b3:00.0"), -1, "an NVSwitch is no GPU");
	cr_expect_eq(rl_topo_find_gpu(&t, "0001:13:00.0"), -1, "other domain");
	cr_expect_eq(rl_topo_find_gpu(&t, "0000:13:00.1"), -1, "other function");
	cr_expect_eq(rl_topo_find_gpu(&t, "13:00"), -1);
	cr_expect_eq(rl_topo_find_gpu(&t, "13:00.0 "), -1);
	cr_expect_eq(rl_topo_find_gpu(&t, "0:0:13:00.0"), -1);
	cr_expect_eq(rl_topo_find_gpu(&t, "000000000:13:00.0"), -1, "9-digit domain");
	cr_expect_eq(rl_topo_find_gpu(&t, "0000:13:00.8"), -1);
	cr_expect_eq(rl_topo_find_gpu(&t, "0000:113:00.0"), -1);
	cr_expect_eq(rl_topo_find_gpu(&t, "12:20.0"), -1, "device 0x20 is not 13:00.0");
	cr_expect_eq(rl_topo_find_gpu(&t, ""), -1);
	cr_expect_eq(rl_topo_find_gpu(&t, "nvml0"), -1);
	cr_expect_eq(rl_topo_find_gpu(&t, NULL), -1);
	rl_topo_free(&t);
}

/* ---- workstation-4gpu-pcie.xml ---- */

Test(topology_workstation, all)
{
	struct rl_topo t;
	load_fixture(&t, "workstation-4gpu-pcie.xml");
	cr_assert_eq(t.n_numas, 1);
	cr_expect_eq(t.numas[0].os_index, 0);
	cr_assert_eq(t.n_cores, 8);
	for (int i = 0; i < 8; i++) {
		int pus[2] = {i, i + 8};
		expect_core(&t, i, 0, 2, pus);
	}
	/* written 41, 01, 61, 21 in the XML; the ASPEED display is no GPU */
	cr_assert_eq(t.n_gpus, 4);
	expect_gpu(&t, 0, "0000:01:00.0", "nvml0", "NVIDIA RTX A6000", 0x2230, 0);
	expect_gpu(&t, 1, "0000:21:00.0", "nvml1", "NVIDIA RTX A6000", 0x2230, 0);
	expect_gpu(&t, 2, "0000:41:00.0", "nvml2", "NVIDIA RTX A6000", 0x2230, 0);
	expect_gpu(&t, 3, "0000:61:00.0", "cuda3", "NVIDIA RTX A6000", 0x2230, 0);
	cr_assert_eq(t.n_nics, 1);
	expect_nic(&t, 0, "eno1", "0000:81:00.0", false, 0);
	/* no NVLink: each GPU alone, in bus order */
	cr_assert_not_null(t.nvlink_mbps);
	cr_expect_eq(t.n_nvlink_domains, 4);
	for (int a = 0; a < 4; a++) {
		cr_expect_eq(t.gpus[a].nvlink_domain, a);
		for (int b = 0; b < 4; b++)
			cr_expect_eq(mbps(&t, a, b), 0.0);
		/* every device on its own root port of the one host bridge */
		cr_expect_eq(dist(&t, a, 0), 1);
	}
	rl_topo_free(&t);
}

/* ---- cpu-only.xml ---- */

Test(topology_cpu_only, all)
{
	struct rl_topo t;
	load_fixture(&t, "cpu-only.xml");
	cr_assert_eq(t.n_numas, 2);
	cr_expect_eq(t.numas[0].os_index, 0);
	cr_expect_eq(t.numas[1].os_index, 1);
	cr_assert_eq(t.n_cores, 8);
	for (int i = 0; i < 8; i++)
		expect_core(&t, i, i / 4, 1, &i);
	cr_expect_eq(t.n_gpus, 0);
	cr_expect_null(t.gpus);
	cr_expect_null(t.nvlink_mbps);
	cr_expect_null(t.gpu_nic_distance);
	cr_expect_eq(t.n_nvlink_domains, 0);
	cr_assert_eq(t.n_nics, 1);
	expect_nic(&t, 0, "eth0", "0000:81:00.0", false, 1);
	cr_expect_eq(rl_topo_find_gpu(&t, "0000:81:00.0"), -1);
	rl_topo_free(&t);
}

/* ---- 8gpu-two-nvlink-domains.xml ---- */

Test(topology_two_domains, gpus_nics_cores)
{
	struct rl_topo t;
	static const char *const busids[8] = {"0000:43:00.0", "0000:44:00.0", "0000:53:00.0",
	                                      "0000:54:00.0", "0000:c3:00.0", "0000:c4:00.0",
	                                      "0000:d3:00.0", "0000:d4:00.0"};
	load_fixture(&t, "8gpu-two-nvlink-domains.xml");
	cr_assert_eq(t.n_numas, 2);
	cr_assert_eq(t.n_cores, 16);
	for (int i = 0; i < 16; i++) {
		int pus[2] = {i, i + 16};
		expect_core(&t, i, i / 8, 2, pus);
	}
	cr_assert_eq(t.n_gpus, 8);
	for (int i = 0; i < 8; i++) {
		char name[32];
		snprintf(name, sizeof name, "nvml%d", i);
		expect_gpu(&t, i, busids[i], name, "NVIDIA A100-SXM4-40GB", 0x20b0, i / 4);
	}
	cr_assert_eq(t.n_nics, 3);
	expect_nic(&t, 0, "mlx5_0", "0000:45:00.0", true, 0);
	expect_nic(&t, 1, "mlx5_1", "0000:c5:00.0", true, 1);
	expect_nic(&t, 2, "eno1", "0000:61:00.0", false, -1); /* hung at the package */
	rl_topo_free(&t);
}

Test(topology_two_domains, nvlink)
{
	struct rl_topo t;
	/* partners (0,1), (2,3), (4,5), (6,7): 6 links; the rest of a board: 3 */
	static const double w[8][8] = {
	    {0, 150000, 75000, 75000, 0, 0, 0, 0}, {150000, 0, 75000, 75000, 0, 0, 0, 0},
	    {75000, 75000, 0, 150000, 0, 0, 0, 0}, {75000, 75000, 150000, 0, 0, 0, 0, 0},
	    {0, 0, 0, 0, 0, 150000, 75000, 75000}, {0, 0, 0, 0, 150000, 0, 75000, 75000},
	    {0, 0, 0, 0, 75000, 75000, 0, 150000}, {0, 0, 0, 0, 75000, 75000, 150000, 0},
	};
	load_fixture(&t, "8gpu-two-nvlink-domains.xml");
	cr_assert_eq(t.n_gpus, 8);
	for (int a = 0; a < 8; a++)
		for (int b = 0; b < 8; b++)
			cr_expect_eq(mbps(&t, a, b), w[a][b], "%d->%d: %g, want %g", a, b,
			             mbps(&t, a, b), w[a][b]);
	cr_expect_eq(t.n_nvlink_domains, 2);
	for (int i = 0; i < 8; i++)
		cr_expect_eq(t.gpus[i].nvlink_domain, i / 4, "gpu %d", i);
	rl_topo_free(&t);
}

Test(topology_two_domains, gpu_nic_distance)
{
	struct rl_topo t;
	/* columns mlx5_0 (die 0, switch of GPUs 0-1), mlx5_1 (die 1, switch of
	 * GPUs 4-5), eno1 (the package, no NUMA domain): same switch 0, same
	 * die 2, the one package otherwise 3 */
	static const int want[8][3] = {{0, 3, 3}, {0, 3, 3}, {2, 3, 3}, {2, 3, 3},
	                               {3, 0, 3}, {3, 0, 3}, {3, 2, 3}, {3, 2, 3}};
	load_fixture(&t, "8gpu-two-nvlink-domains.xml");
	cr_assert_eq(t.n_gpus, 8);
	cr_assert_eq(t.n_nics, 3);
	for (int g = 0; g < 8; g++)
		for (int n = 0; n < 3; n++)
			cr_expect_eq(dist(&t, g, n), want[g][n], "gpu %d nic %s: %d, want %d", g,
			             t.nics[n].name, dist(&t, g, n), want[g][n]);
	rl_topo_free(&t);
}

/* ---- pus-only.xml: no Core and no NUMA objects ---- */

Test(topology_pus_only, each_pu_a_core)
{
	struct rl_topo t;
	load_fixture(&t, "pus-only.xml");
	cr_assert_eq(t.n_numas, 1);
	cr_expect_eq(t.numas[0].os_index, 0);
	cr_assert_eq(t.n_cores, 4);
	for (int i = 0; i < 4; i++)
		expect_core(&t, i, 0, 1, &i);
	cr_expect_eq(t.n_gpus, 0);
	cr_expect_eq(t.n_nics, 0);
	cr_expect_null(t.nics);
	rl_topo_free(&t);
}

/* ---- real machines from hwloc's test suite ---- */

Test(topology_real, dgx2)
{
	struct rl_topo t;
	static const char *const busids[16] = {
	    "0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0",
	    "0000:57:00.0", "0000:59:00.0", "0000:5c:00.0", "0000:5e:00.0",
	    "0000:b7:00.0", "0000:b9:00.0", "0000:bc:00.0", "0000:be:00.0",
	    "0000:e0:00.0", "0000:e2:00.0", "0000:e5:00.0", "0000:e7:00.0"};
	load_shared(&t, "nvidiaDGX2.xml");
	cr_assert_eq(t.n_numas, 2);
	cr_assert_eq(t.n_cores, 4); /* the file keeps 2 cores of each socket */
	expect_core(&t, 0, 0, 1, (int[]){0});
	expect_core(&t, 1, 0, 1, (int[]){1});
	expect_core(&t, 2, 1, 1, (int[]){24});
	expect_core(&t, 3, 1, 1, (int[]){25});
	/* 12 NVSwitches are NVIDIA PCI devices too (one reads as class 0) */
	cr_assert_eq(t.n_gpus, 16);
	for (int i = 0; i < 16; i++) {
		char name[32];
		snprintf(name, sizeof name, "nvml%d", i);
		expect_gpu(&t, i, busids[i], name, "Tesla V100-SXM3-32GB-H", 0x1db8, i / 8);
	}
	cr_expect_eq(t.n_nics, 0);
	/* each GPU: 6 links of 25000 MB/s, one to each of its baseboard's six
	 * switches; the baseboards are joined switch to switch */
	for (int a = 0; a < 16; a++)
		for (int b = 0; b < 16; b++)
			cr_expect_eq(mbps(&t, a, b), a == b ? 0.0 : 6 * 25000.0, "%d->%d: %g", a, b,
			             mbps(&t, a, b));
	cr_expect_eq(t.n_nvlink_domains, 1);
	for (int i = 0; i < 16; i++)
		cr_expect_eq(t.gpus[i].nvlink_domain, 0);
	rl_topo_free(&t);
}

Test(topology_real, power8)
{
	struct rl_topo t;
	static const int pus[8][2] = {{0, 1},   {8, 9},   {16, 17}, {24, 25},
	                              {80, 81}, {88, 89}, {96, 97}, {104, 105}};
	static const char *const busids[4] = {"0002:01:00.0", "0003:01:00.0", "000a:01:00.0",
	                                      "000b:01:00.0"};
	load_shared(&t, "power8gpudistances.xml");
	cr_assert_eq(t.n_numas, 2);
	cr_assert_eq(t.n_cores, 8);
	for (int i = 0; i < 8; i++)
		expect_core(&t, i, i / 4, 2, pus[i]);
	cr_assert_eq(t.n_gpus, 4);
	for (int i = 0; i < 4; i++) {
		char name[32];
		snprintf(name, sizeof name, "nvml%d", i); /* over cuda%d and opencl0d%d */
		expect_gpu(&t, i, busids[i], name, "Tesla P100-SXM2-16GB", 0x15f9, i / 2);
	}
	/* 40000 MB/s within each pair; the GPU-CPU links and the 1000000 on the
	 * diagonal do not count */
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 4; b++)
			cr_expect_eq(mbps(&t, a, b), a != b && a / 2 == b / 2 ? 40000.0 : 0.0,
			             "%d->%d: %g", a, b, mbps(&t, a, b));
	cr_expect_eq(t.n_nvlink_domains, 2);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(t.gpus[i].nvlink_domain, i / 2);
	rl_topo_free(&t);
}

Test(topology_real, x86_whole_io)
{
	struct rl_topo t;
	load_shared(&t, "32em64t-2n8c2t-pci-wholeio.xml");
	cr_assert_eq(t.n_numas, 2);
	cr_assert_eq(t.n_cores, 16);
	/* socket 0: cores with PUs k and k+16; socket 1: 8+k and 24+k */
	for (int i = 0; i < 16; i++) {
		int want[2] = {i, i + 16};
		expect_core(&t, i, i / 8, 2, want);
	}
	/* three NVIDIA 3D controllers; only 84:00.0 has an OS device (cuda0,
	 * whose GPUModel says K40m); the AMD VGA at 84:00.1 is no GPU */
	cr_assert_eq(t.n_gpus, 3);
	expect_gpu(&t, 0, "0000:03:00.0", "", "", 0x1094, 0);
	expect_gpu(&t, 1, "0000:83:00.0", "", "", 0x1094, 1);
	expect_gpu(&t, 2, "0000:84:00.0", "cuda0", "Tesla K40m", 0x1094, 1);
	cr_expect_eq(t.n_nvlink_domains, 3);
	/* ib0 is the IPoIB interface of the ConnectX-4: a network device */
	cr_assert_eq(t.n_nics, 4);
	expect_nic(&t, 0, "mlx5_0", "0000:04:00.0", true, 1);
	expect_nic(&t, 1, "eth0", "0000:81:00.0", false, 1);
	expect_nic(&t, 2, "eth1", "0000:81:00.1", false, 1);
	expect_nic(&t, 3, "ib0", "0000:04:00.0", false, 1);
	/* the ConnectX-4 hangs below root port 80:03.0 with GPU 84:00.0; GPU
	 * 83:00.0 and the I350 ports have their own root ports on the same host
	 * bridge; GPU 03:00.0 is on the other socket */
	static const int want[3][4] = {{4, 4, 4, 4}, {1, 1, 1, 1}, {0, 1, 1, 0}};
	for (int g = 0; g < 3; g++)
		for (int n = 0; n < 4; n++)
			cr_expect_eq(dist(&t, g, n), want[g][n], "gpu %d nic %s: %d, want %d", g,
			             t.nics[n].name, dist(&t, g, n), want[g][n]);
	rl_topo_free(&t);
}

/* ---- errors and the live machine ---- */

Test(topology_errors, missing_file)
{
	struct rl_topo t;
	char err[512] = "";
	const char *path = "/nonexistent/dir/topo.xml";
	cr_assert_eq(rl_topo_load(&t, path, err, sizeof err), -1);
	cr_expect(strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':',
	          "err does not start with the file: %s", err);
	cr_expect(strstr(err, "No such file") != NULL, "%s", err);
	cr_expect_eq(t.n_cores, 0);
	cr_expect_null(t.cores);
	rl_topo_free(&t);
}

static void expect_bad_file(const char *text)
{
	struct rl_topo t;
	char err[512] = "";
	char dir[] = "/tmp/rl-topo-XXXXXX";
	char *path = NULL;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_geq(asprintf(&path, "%s/bad.xml", dir), 0);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
	cr_expect_eq(rl_topo_load(&t, path, err, sizeof err), -1, "loaded: %s", text);
	cr_expect(strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':',
	          "err does not start with the file: %s", err);
	cr_expect_null(t.cores);
	cr_expect_null(t.gpus);
	cr_expect_eq(t.n_gpus, 0);
	rl_topo_free(&t);
	unlink(path);
	rmdir(dir);
	free(path);
}

Test(topology_errors, not_xml)
{
	expect_bad_file("this is not XML at all\n");
}

Test(topology_errors, empty_file)
{
	expect_bad_file("");
}

Test(topology_errors, xml_but_no_topology)
{
	expect_bad_file("<?xml version=\"1.0\"?>\n<html><body>hello</body></html>\n");
}

Test(topology_errors, v2_without_numa)
{
	/* hwloc 2 refuses a v2 topology without NUMA nodes */
	expect_bad_file("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	                "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
	                "<topology version=\"2.0\">\n"
	                "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" "
	                "complete_cpuset=\"0x1\" allowed_cpuset=\"0x1\" nodeset=\"0x1\" "
	                "complete_nodeset=\"0x1\" allowed_nodeset=\"0x1\" gp_index=\"1\">\n"
	                "    <object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" "
	                "complete_cpuset=\"0x1\" gp_index=\"2\"/>\n"
	                "  </object>\n</topology>\n");
}

Test(topology_errors, free_is_safe)
{
	struct rl_topo t;
	memset(&t, 0, sizeof t);
	rl_topo_free(&t);
	rl_topo_free(&t);
	rl_topo_free(NULL);
	cr_expect_eq(rl_topo_find_gpu(&t, "0000:13:00.0"), -1);
	cr_expect_eq(rl_topo_find_gpu(NULL, "0000:13:00.0"), -1);
}

Test(topology_live, this_machine)
{
	struct rl_topo t;
	load_path(&t, NULL);
	cr_expect_str_eq(t.source, "this machine");
	cr_assert_geq(t.n_cores, 1);
	cr_assert_geq(t.n_numas, 1);
	for (int i = 0; i < t.n_cores; i++) {
		cr_expect_geq(t.cores[i].n_pus, 1);
		cr_expect(t.cores[i].numa >= 0 && t.cores[i].numa < t.n_numas);
	}
	for (int i = 0; i < t.n_gpus; i++) {
		cr_expect_eq(rl_topo_find_gpu(&t, t.gpus[i].busid), i);
		cr_expect(t.gpus[i].nvlink_domain >= 0 &&
		          t.gpus[i].nvlink_domain < t.n_nvlink_domains);
	}
	rl_topo_free(&t);
	cr_expect_null(t.cores);
}
