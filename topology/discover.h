/* What discover.c, devices.c and nvlink.c share; they alone see hwloc.
 * Not for layout, placement or planner, which read struct rl_topo alone.
 * defines: rl_topo_numa_index, rl_topo_load_devices, rl_topo_pci_of,
 * rl_topo_fill_nvlink */
#ifndef RL_TOPOLOGY_DISCOVER_H
#define RL_TOPOLOGY_DISCOVER_H

#include <hwloc.h>

#include "topology/topology.h"

/* Index into topo->numas of the NUMA node with this OS index, or -1. */
int rl_topo_numa_index(const struct rl_topo *topo, unsigned os_index);

/* GPUs, NICs, NVLink and gpu_nic_distance (devices.c), once numas is
 * filled. Returns 0, or -1 with err filled. */
int rl_topo_load_devices(struct rl_topo *topo, hwloc_topology_t ht, char *err, size_t errlen);

/* The PCI device an object belongs to: itself, or the PCI parent of an OS
 * device ("nvml0" -> its GPU); NULL for anything else. */
hwloc_obj_t rl_topo_pci_of(hwloc_obj_t obj);

/* Fills topo->nvlink_mbps, the GPUs' nvlink_domain and n_nvlink_domains
 * from hwloc's "NVLinkBandwidth" matrices; gpu_objs[i] is the PCI device of
 * topo->gpus[i]. Returns 0, or -1 (out of memory) with err filled. */
int rl_topo_fill_nvlink(struct rl_topo *topo, hwloc_topology_t ht, const hwloc_obj_t *gpu_objs,
                        char *err, size_t errlen);

#endif
