/* What the planner assumes about a node's GPUs and links, read off its
 * topology: the GPU's entry in the table, the NVLink domains, the NICs. */
#include <stdio.h>
#include <string.h>

#include "topology/planner.h"
#include "topology/topology.h"

/* What the topology cannot say about links, stated so that a plan's
 * estimate can be read against it: PCIe 4.0 x16 moves about 25 GB/s each
 * way; an HDR InfiniBand port 200 Gb/s; a node without one is assumed to
 * have a 100 GbE link. Compute reaches 40% of the dense peak, typical of
 * Megatron-style training at this scale. */
#define RL_PCIE_BYTES_PER_S    25e9
#define RL_IB_PORT_BYTES_PER_S 25e9
#define RL_ETH_BYTES_PER_S     12.5e9
#define RL_ASSUMED_MFU         0.4

static int smallest_nvlink_domain(const struct rl_topo *topo)
{
	int best = 0;
	for (int d = 0; d < topo->n_nvlink_domains; d++) {
		int n = 0;
		for (int g = 0; g < topo->n_gpus; g++)
			n += topo->gpus[g].nvlink_domain == d;
		if (n > 0 && (best == 0 || n < best))
			best = n;
	}
	return best > 0 ? best : 1;
}

int rl_plan_hw_from_topo(const struct rl_topo *topo, int n_nodes, int tasks_per_node,
                         struct rl_plan_hw *hw, char *err, size_t errlen)
{
	memset(hw, 0, sizeof *hw);
	if (topo->n_gpus == 0) {
		snprintf(err, errlen, "%s: no NVIDIA GPU on this node", topo->source);
		return -1;
	}
	const struct rl_topo_gpu *g = &topo->gpus[0];
	const struct rl_gpu_spec *spec = rl_gpu_spec_lookup(g->device_id, g->model);
	if (!spec) {
		snprintf(err, errlen,
		         "%s: GPU %04x:%04x%s%s%s is not in the planner's table, so its memory "
		         "is unknown; give policy.parallel sizes instead of auto",
		         topo->source, g->vendor_id, g->device_id, *g->model ? " (" : "", g->model,
		         *g->model ? ")" : "");
		return -1;
	}
	int n_ib = 0;
	for (int i = 0; i < topo->n_nics; i++)
		n_ib += topo->nics[i].infiniband;
	hw->n_nodes = n_nodes;
	hw->gpus_per_node = tasks_per_node;
	hw->nvlink_domain_size = smallest_nvlink_domain(topo);
	hw->gpu_mem_bytes = spec->mem_bytes;
	hw->peak_flops = spec->bf16_flops;
	hw->hbm_bytes_per_s = spec->hbm_bytes_per_s;
	hw->mfu = RL_ASSUMED_MFU;
	hw->nvlink_bytes_per_s = hw->nvlink_domain_size > 1 ? spec->nvlink_bytes_per_s : 0;
	hw->pcie_bytes_per_s = RL_PCIE_BYTES_PER_S;
	hw->net_bytes_per_s = n_ib > 0 ? n_ib * RL_IB_PORT_BYTES_PER_S : RL_ETH_BYTES_PER_S;
	return 0;
}
