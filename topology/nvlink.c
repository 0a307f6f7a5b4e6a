/* NVLink from hwloc's "NVLinkBandwidth" distances, which the NVML backend
 * writes: MB/s between GPUs (OS devices "nvmlN" or their PCI devices),
 * NVSwitches (PCI devices) and, on POWER, CPUs (packages).
 *
 * Bandwidth from GPU a to GPU b is their direct links plus what they get
 * through the NVSwitches: min(up(a), down(b)), where up(a) sums a's links
 * into every switch and down(b) every switch's links into b. All NVSwitches
 * of a machine are taken as one non-blocking fabric: NVML reports no
 * switch-to-switch links, yet the DGX-2 joins its two baseboards switch to
 * switch, so GPUs on different sets of switches still talk over NVLink. When
 * both GPUs reach the same switches, as on HGX boards, this is the sum over
 * switches of the narrower of the two hops. Links to anything else (a CPU)
 * do not count: placement cares about GPU-to-GPU traffic. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "topology/discover.h"

/* hwloc tags NVSwitches "NVSwitch" even when their config space reads as
 * zeros (one of the DGX-2's does); otherwise NVIDIA's "bridge, other". */
static bool is_nvswitch(hwloc_obj_t pci)
{
	if (pci->subtype && strcmp(pci->subtype, "NVSwitch") == 0)
		return true;
	return pci->attr->pcidev.vendor_id == 0x10de && pci->attr->pcidev.class_id == 0x0680;
}

enum { ROLE_OTHER = -1, ROLE_SWITCH = -2 };

/* A GPU's index, ROLE_SWITCH or ROLE_OTHER. */
static int role_of(hwloc_obj_t obj, const hwloc_obj_t *gpu_objs, int n_gpus)
{
	hwloc_obj_t pci = rl_topo_pci_of(obj);
	if (!pci)
		return ROLE_OTHER;
	for (int i = 0; i < n_gpus; i++)
		if (gpu_objs[i] == pci)
			return i;
	return is_nvswitch(pci) ? ROLE_SWITCH : ROLE_OTHER;
}

static double max_d(double a, double b)
{
	return a > b ? a : b;
}

/* Adds one matrix into direct (n x n), up and down (n). Two objects of one
 * GPU (cuda0 and nvml0) in one matrix would describe the same links: the
 * larger value is kept rather than the sum. */
static int add_matrix(const struct hwloc_distances_s *d, const hwloc_obj_t *gpu_objs, int n,
                      double *direct, double *up, double *down)
{
	unsigned nb = d->nbobjs;
	int *role = calloc(nb, sizeof *role);
	double *to_sw = calloc((size_t)n * nb, sizeof *to_sw);     /* [gpu][switch obj] */
	double *from_sw = calloc((size_t)n * nb, sizeof *from_sw); /* [gpu][switch obj] */
	int rc = -1;

	if (!role || !to_sw || !from_sw)
		goto out;
	for (unsigned k = 0; k < nb; k++)
		role[k] = role_of(d->objs[k], gpu_objs, n);
	for (unsigned k = 0; k < nb; k++) {
		for (unsigned l = 0; l < nb; l++) {
			double v = (double)d->values[(size_t)k * nb + l];
			int rk = role[k], rl = role[l];
			if (k == l || v <= 0)
				continue; /* POWER reports a GPU's own bandwidth on the diagonal */
			if (rk >= 0 && rl >= 0 && rk != rl)
				direct[rk * n + rl] = max_d(direct[rk * n + rl], v);
			else if (rk >= 0 && rl == ROLE_SWITCH)
				to_sw[(size_t)rk * nb + l] = max_d(to_sw[(size_t)rk * nb + l], v);
			else if (rk == ROLE_SWITCH && rl >= 0)
				from_sw[(size_t)rl * nb + k] =
				    max_d(from_sw[(size_t)rl * nb + k], v);
		}
	}
	for (int g = 0; g < n; g++) {
		double u = 0, w = 0;
		for (unsigned k = 0; k < nb; k++) {
			u += to_sw[(size_t)g * nb + k];
			w += from_sw[(size_t)g * nb + k];
		}
		up[g] = max_d(up[g], u);
		down[g] = max_d(down[g], w);
	}
	rc = 0;
out:
	free(role);
	free(to_sw);
	free(from_sw);
	return rc;
}

/* Connected components over nonzero bandwidth in either direction,
 * numbered in the order of their lowest GPU. */
static void label_domains(struct rl_topo *topo)
{
	int n = topo->n_gpus, next = 0;

	for (int i = 0; i < n; i++)
		topo->gpus[i].nvlink_domain = -1;
	for (int i = 0; i < n; i++) {
		if (topo->gpus[i].nvlink_domain >= 0)
			continue;
		topo->gpus[i].nvlink_domain = next;
		/* flood fill: n is at most a few dozen, a rescan until stable is enough */
		for (bool grew = true; grew;) {
			grew = false;
			for (int a = 0; a < n; a++) {
				if (topo->gpus[a].nvlink_domain != next)
					continue;
				for (int b = 0; b < n; b++) {
					if (topo->gpus[b].nvlink_domain >= 0)
						continue;
					if (topo->nvlink_mbps[a * n + b] > 0 ||
					    topo->nvlink_mbps[b * n + a] > 0) {
						topo->gpus[b].nvlink_domain = next;
						grew = true;
					}
				}
			}
		}
		next++;
	}
	topo->n_nvlink_domains = next;
}

int rl_topo_fill_nvlink(struct rl_topo *topo, hwloc_topology_t ht, const hwloc_obj_t *gpu_objs,
                        char *err, size_t errlen)
{
	int n = topo->n_gpus, rc = -1;
	unsigned nr = 0;
	struct hwloc_distances_s **dists = NULL;
	double *up = NULL, *down = NULL;

	if (n == 0)
		return 0;
	topo->nvlink_mbps = calloc((size_t)n * n, sizeof *topo->nvlink_mbps);
	up = calloc(n, sizeof *up);
	down = calloc(n, sizeof *down);
	if (!topo->nvlink_mbps || !up || !down)
		goto oom;
	if (hwloc_distances_get_by_name(ht, "NVLinkBandwidth", &nr, NULL, 0) < 0)
		nr = 0;
	if (nr > 0) {
		dists = calloc(nr, sizeof *dists);
		if (!dists)
			goto oom;
		if (hwloc_distances_get_by_name(ht, "NVLinkBandwidth", &nr, dists, 0) < 0)
			nr = 0;
	}
	for (unsigned i = 0; i < nr; i++) {
		if (!(dists[i]->kind & HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH))
			continue;
		if (add_matrix(dists[i], gpu_objs, n, topo->nvlink_mbps, up, down) < 0)
			goto oom;
	}
	for (int a = 0; a < n; a++) {
		for (int b = 0; b < n; b++) {
			if (a != b)
				topo->nvlink_mbps[a * n + b] += up[a] < down[b] ? up[a] : down[b];
		}
	}
	label_domains(topo);
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "%s: out of memory reading the NVLink matrix", topo->source);
out:
	for (unsigned i = 0; dists && i < nr; i++)
		hwloc_distances_release(ht, dists[i]);
	free(dists);
	free(up);
	free(down);
	return rc;
}
