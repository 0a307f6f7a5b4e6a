/* One node's hardware as the placement needs it: cores by NUMA domain, NVIDIA
 * GPUs with their PCI bus id and NVLink domain, network adapters. A plain
 * struct, filled from hwloc (the live machine or an XML file) or by hand in
 * tests, so that layout, placement and planner never see hwloc.
 * defines: struct rl_topo and its parts, rl_topo_load, rl_topo_free */
#ifndef RL_TOPOLOGY_H
#define RL_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>

#define RL_TOPO_MAX_SMT 8
#define RL_TOPO_BUSID_LEN 16 /* "0000:07:00.0" */

struct rl_topo_core {
	int numa;                 /* index into rl_topo.numas */
	int n_pus;
	int pus[RL_TOPO_MAX_SMT]; /* OS indexes of its hardware threads (what affinity takes) */
};

struct rl_topo_numa {
	int os_index; /* the kernel's NUMA node number */
};

struct rl_topo_gpu {
	char busid[RL_TOPO_BUSID_LEN]; /* lower-case domain:bus:dev.fn */
	unsigned vendor_id, device_id; /* PCI ids (vendor 0x10de) */
	char name[32];  /* OS device name ("nvml3", "cuda3"), or "" when hwloc has none */
	char model[64]; /* "GPUModel" info when hwloc has it ("Tesla V100-SXM3-32GB"), else "" */
	int numa;       /* index into rl_topo.numas: the domain closest to it; -1 unknown */
	int nvlink_domain; /* GPUs that reach each other over NVLink (directly or through
	                      NVSwitches) share it; a GPU without NVLink is alone in its own */
};

struct rl_topo_nic {
	char name[32];                 /* "mlx5_0" (OpenFabrics) or "eth0" (network) */
	char busid[RL_TOPO_BUSID_LEN]; /* "" for a virtual interface */
	bool infiniband;               /* an OpenFabrics device: goes into NCCL_IB_HCA */
	int numa;                      /* -1 unknown */
};

struct rl_topo {
	char source[256]; /* "this machine" or the XML file's path */
	struct rl_topo_core *cores; /* in the OS's logical order (by package, then core) */
	int n_cores;
	struct rl_topo_numa *numas; /* at least one: a machine without NUMA info gets one */
	int n_numas;
	struct rl_topo_gpu *gpus; /* sorted by PCI bus id: CUDA_DEVICE_ORDER=PCI_BUS_ID order */
	int n_gpus;
	struct rl_topo_nic *nics; /* InfiniBand first, then Ethernet, each by name */
	int n_nics;
	int n_nvlink_domains;
	/* n_gpus x n_gpus, row-major: NVLink bandwidth in MB/s from i to j: direct
	 * links plus min(what i sends into the NVSwitches, what j receives from
	 * them). All NVSwitches of a machine are one fabric: NVML reports no
	 * switch-to-switch links, yet the DGX-2 joins its baseboards that way.
	 * 0 when they have no NVLink path; NULL when n_gpus is 0. */
	double *nvlink_mbps;
	/* n_gpus x n_nics: how far apart in the PCI / package tree (0: behind the
	 * same PCI switch, 1: same host bridge, 2: same NUMA domain, 3: same
	 * package, 4: elsewhere in the machine). NULL when either count is 0. */
	int *gpu_nic_distance;
};

/* Loads this machine (xml_path NULL) or an hwloc XML file. Returns 0, or -1
 * with a message naming the file in err. */
int rl_topo_load(struct rl_topo *topo, const char *xml_path, char *err, size_t errlen);
void rl_topo_free(struct rl_topo *topo);

/* Index of the GPU with this PCI bus id (any case, with or without the
 * domain), or -1. */
int rl_topo_find_gpu(const struct rl_topo *topo, const char *busid);

#endif
