/* hwloc (the live machine or an XML file) into struct rl_topo: opening
 * it, NUMA domains and cores. GPUs and NICs are in devices.c, NVLink in
 * nvlink.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/discover.h"

/* ---- NUMA domains and cores ---- */

int rl_topo_numa_index(const struct rl_topo *t, unsigned os_index)
{
	for (int i = 0; i < t->n_numas; i++)
		if ((unsigned)t->numas[i].os_index == os_index)
			return i;
	return -1;
}

/* The first of our domains in a nodeset, or -1. */
static int first_numa(const struct rl_topo *t, hwloc_const_nodeset_t set)
{
	int os;

	if (!set)
		return -1;
	for (os = hwloc_bitmap_first(set); os >= 0; os = hwloc_bitmap_next(set, os)) {
		int i = rl_topo_numa_index(t, (unsigned)os);
		if (i >= 0)
			return i;
	}
	return -1;
}

/* Every NUMA node in logical order; hwloc 2 always has one, but a machine
 * where it has none still gets one domain. */
static int load_numas(struct rl_topo *t, hwloc_topology_t ht)
{
	int n = hwloc_get_nbobjs_by_type(ht, HWLOC_OBJ_NUMANODE);

	t->numas = calloc(n > 0 ? n : 1, sizeof *t->numas);
	if (!t->numas)
		return -1;
	for (int i = 0; i < n; i++)
		t->numas[t->n_numas++].os_index =
		    (int)hwloc_get_obj_by_type(ht, HWLOC_OBJ_NUMANODE, i)->os_index;
	if (t->n_numas == 0)
		t->numas[t->n_numas++].os_index = 0;
	return 0;
}

/* PUs in logical order, grouped by their Core; a PU without a Core
 * ancestor (some XMLs have none) is a core of its own. */
static int load_cores(struct rl_topo *t, hwloc_topology_t ht, char *err, size_t errlen)
{
	int npu = hwloc_get_nbobjs_by_type(ht, HWLOC_OBJ_PU);
	hwloc_obj_t last = NULL;

	if (npu <= 0) {
		snprintf(err, errlen, "%s: no processing units (PU objects)", t->source);
		return -1;
	}
	t->cores = calloc(npu, sizeof *t->cores);
	if (!t->cores) {
		snprintf(err, errlen, "%s: out of memory", t->source);
		return -1;
	}
	for (int i = 0; i < npu; i++) {
		hwloc_obj_t pu = hwloc_get_obj_by_type(ht, HWLOC_OBJ_PU, i);
		hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(ht, HWLOC_OBJ_CORE, pu);
		struct rl_topo_core *c;

		if (!core || core != last) {
			c = &t->cores[t->n_cores++];
			c->numa = first_numa(t, (core ? core : pu)->nodeset);
			if (c->numa < 0)
				c->numa = 0;
		} else {
			c = &t->cores[t->n_cores - 1];
		}
		if (c->n_pus == RL_TOPO_MAX_SMT) {
			snprintf(err, errlen, "%s: core L#%u has more than %d hardware threads",
			         t->source, core->logical_index, RL_TOPO_MAX_SMT);
			return -1;
		}
		c->pus[c->n_pus++] = (int)pu->os_index;
		last = core;
	}
	return 0;
}

/* ---- load and free ---- */

static int open_hwloc(struct rl_topo *t, const char *xml_path, hwloc_topology_t *ht, char *err,
                      size_t errlen)
{
	if (xml_path) {
		FILE *f = fopen(xml_path, "r");
		if (!f) {
			snprintf(err, errlen, "%s: %s", xml_path, strerror(errno));
			return -1;
		}
		fclose(f);
	}
	if (hwloc_topology_init(ht) < 0) {
		snprintf(err, errlen, "%s: hwloc_topology_init failed", t->source);
		return -1;
	}
	/* keeps GPUs, NICs, NVSwitches and the bridges above them */
	hwloc_topology_set_io_types_filter(*ht, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	/* Linux's own backend reads the PCI tree from sysfs; the libpciaccess
	 * component would find the same devices but leaks on every load, which
	 * slurmstepd would pay once per step. */
	if (!xml_path)
		hwloc_topology_set_components(*ht, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
	if (xml_path && hwloc_topology_set_xml(*ht, xml_path) < 0) {
		snprintf(err, errlen, "%s: cannot read as an hwloc XML topology (%s)", xml_path,
		         strerror(errno));
		return -1;
	}
	if (hwloc_topology_load(*ht) < 0) {
		snprintf(err, errlen, "%s: %s", t->source,
		         xml_path ? "not a valid hwloc XML topology" : "hwloc cannot read it");
		return -1;
	}
	return 0;
}

int rl_topo_load(struct rl_topo *topo, const char *xml_path, char *err, size_t errlen)
{
	hwloc_topology_t ht = NULL;
	int rc = -1;

	memset(topo, 0, sizeof *topo);
	snprintf(topo->source, sizeof topo->source, "%s", xml_path ? xml_path : "this machine");
	if (open_hwloc(topo, xml_path, &ht, err, errlen) < 0)
		goto out;
	if (load_numas(topo, ht) < 0) {
		snprintf(err, errlen, "%s: out of memory", topo->source);
		goto out;
	}
	if (load_cores(topo, ht, err, errlen) < 0 ||
	    rl_topo_load_devices(topo, ht, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	if (ht)
		hwloc_topology_destroy(ht);
	if (rc < 0)
		rl_topo_free(topo);
	return rc;
}

void rl_topo_free(struct rl_topo *topo)
{
	if (!topo)
		return;
	free(topo->cores);
	free(topo->numas);
	free(topo->gpus);
	free(topo->nics);
	free(topo->nvlink_mbps);
	free(topo->gpu_nic_distance);
	memset(topo, 0, sizeof *topo);
}
