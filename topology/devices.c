/* NVIDIA GPUs and network adapters from hwloc's PCI tree, how far apart
 * they are, and finding a GPU by its PCI bus id. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/discover.h"

#define NVIDIA_VENDOR 0x10de

struct found_gpu {
	struct rl_topo_gpu gpu;
	hwloc_obj_t pci;
	unsigned long long key;
};

struct found_nic {
	struct rl_topo_nic nic;
	hwloc_obj_t os; /* the OS device: its PCI parent may be missing */
};

/* ---- PCI bus ids ---- */

hwloc_obj_t rl_topo_pci_of(hwloc_obj_t obj)
{
	if (obj && obj->type == HWLOC_OBJ_OS_DEVICE)
		obj = obj->parent;
	return obj && obj->type == HWLOC_OBJ_PCI_DEVICE ? obj : NULL;
}

static const char *parse_hex(const char *s, int max_digits, unsigned long *v)
{
	int n = 0;

	*v = 0;
	for (; isxdigit((unsigned char)*s); s++, n++) {
		if (n == max_digits)
			return NULL;
		*v = *v * 16 + (unsigned long)(isdigit((unsigned char)*s)
		                                   ? *s - '0'
		                                   : tolower((unsigned char)*s) - 'a' + 10);
	}
	return n ? s : NULL;
}

/* "[domain:]bus:dev.fn" in hex, any case, into one number that sorts as
 * the bus ids do; the domain may have up to 8 digits, as NVML writes it
 * ("00000000:07:00.0"), and is 0 when absent. */
static bool parse_busid(const char *s, unsigned long long *key)
{
	unsigned long f[3], fn;
	int n = 0;

	for (;;) {
		if (n == 3 || !(s = parse_hex(s, 8, &f[n++])))
			return false;
		if (*s == '.')
			break;
		if (*s++ != ':')
			return false;
	}
	if (n < 2 || !(s = parse_hex(s + 1, 1, &fn)) || *s || fn > 7)
		return false;
	unsigned long dom = n == 3 ? f[0] : 0, bus = f[n - 2], dev = f[n - 1];
	if (bus > 0xff || dev > 0x1f)
		return false;
	*key = (unsigned long long)dom << 16 | bus << 8 | dev << 3 | fn;
	return true;
}

static int format_busid(char *out, hwloc_obj_t pci, const char *source, char *err, size_t errlen)
{
	const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
	int n = snprintf(out, RL_TOPO_BUSID_LEN, "%04x:%02x:%02x.%x", (unsigned)a->domain,
	                 (unsigned)a->bus, (unsigned)a->dev, (unsigned)a->func);
	if (n < 0 || n >= RL_TOPO_BUSID_LEN) {
		snprintf(err, errlen, "%s: PCI domain %x too wide for a bus id", source,
		         (unsigned)a->domain);
		return -1;
	}
	return 0;
}

int rl_topo_find_gpu(const struct rl_topo *topo, const char *busid)
{
	unsigned long long want, have;

	if (!topo || !busid || !parse_busid(busid, &want))
		return -1;
	for (int i = 0; i < topo->n_gpus; i++)
		if (parse_busid(topo->gpus[i].busid, &have) && have == want)
			return i;
	return -1;
}

/* The NUMA domain of an I/O object: ours in the nodeset of its nearest
 * non-I/O ancestor (the package, die or group holding its host bridge).
 * hwloc hangs a device whose locality it does not know high enough to
 * cover several domains (a package in NPS or SNC mode, the machine): it is
 * near none of them in particular, -1. */
static int io_numa(const struct rl_topo *t, hwloc_topology_t ht, hwloc_obj_t io)
{
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(ht, io);
	int found = -1, os;

	if (!anc || !anc->nodeset)
		return -1;
	for (os = hwloc_bitmap_first(anc->nodeset); os >= 0;
	     os = hwloc_bitmap_next(anc->nodeset, os)) {
		int i = rl_topo_numa_index(t, (unsigned)os);
		if (i >= 0 && found >= 0)
			return -1;
		if (i >= 0)
			found = i;
	}
	return found;
}

/* name: an NVML OS device ("nvml3"), else a CUDA one ("cuda3"); model: the
 * GPUModel of the best of them that has one. */
static void gpu_names(struct rl_topo_gpu *g, hwloc_obj_t pci)
{
	int best_name = 0, best_model = 0;

	for (hwloc_obj_t o = pci->io_first_child; o; o = o->next_sibling) {
		int rank;
		const char *model;

		if (o->type != HWLOC_OBJ_OS_DEVICE || !o->name)
			continue;
		if (strncmp(o->name, "nvml", 4) == 0)
			rank = 2;
		else if (strncmp(o->name, "cuda", 4) == 0)
			rank = 1;
		else
			rank = 0;
		if (rank > best_name) {
			snprintf(g->name, sizeof g->name, "%s", o->name);
			best_name = rank;
		}
		model = hwloc_obj_get_info_by_name(o, "GPUModel");
		if (rank > best_model && model) {
			snprintf(g->model, sizeof g->model, "%s", model);
			best_model = rank;
		}
	}
}

static bool is_nvidia_gpu(hwloc_obj_t pci)
{
	/* 0x0300 VGA, 0x0302 3D controller; NVSwitches are 0x0680 */
	return pci->attr->pcidev.vendor_id == NVIDIA_VENDOR &&
	       (pci->attr->pcidev.class_id == 0x0300 || pci->attr->pcidev.class_id == 0x0302);
}

static int cmp_gpu(const void *a, const void *b)
{
	unsigned long long x = ((const struct found_gpu *)a)->key;
	unsigned long long y = ((const struct found_gpu *)b)->key;
	return (x > y) - (x < y);
}

static int load_gpus(struct rl_topo *t, hwloc_topology_t ht, struct found_gpu **out, char *err,
                     size_t errlen)
{
	hwloc_obj_t pci = NULL;
	int n = 0;
	struct found_gpu *f;

	while ((pci = hwloc_get_next_pcidev(ht, pci)))
		n += is_nvidia_gpu(pci);
	f = calloc(n > 0 ? n : 1, sizeof *f);
	if (!f) {
		snprintf(err, errlen, "%s: out of memory", t->source);
		return -1;
	}
	*out = f;
	n = 0;
	while ((pci = hwloc_get_next_pcidev(ht, pci))) {
		struct found_gpu *g;
		if (!is_nvidia_gpu(pci))
			continue;
		g = &f[n++];
		g->pci = pci;
		if (format_busid(g->gpu.busid, pci, t->source, err, errlen) < 0)
			return -1;
		parse_busid(g->gpu.busid, &g->key);
		g->gpu.vendor_id = pci->attr->pcidev.vendor_id;
		g->gpu.device_id = pci->attr->pcidev.device_id;
		g->gpu.numa = io_numa(t, ht, pci);
		gpu_names(&g->gpu, pci);
	}
	qsort(f, n, sizeof *f, cmp_gpu);
	t->gpus = n > 0 ? calloc(n, sizeof *t->gpus) : NULL;
	if (n > 0 && !t->gpus) {
		snprintf(err, errlen, "%s: out of memory", t->source);
		return -1;
	}
	for (int i = 0; i < n; i++)
		t->gpus[i] = f[i].gpu;
	t->n_gpus = n;
	return 0;
}

static bool is_nic(hwloc_obj_t os)
{
	if (!os->name)
		return false;
	if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
		return true;
	return os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && strcmp(os->name, "lo") != 0;
}

static int cmp_nic(const void *a, const void *b)
{
	const struct rl_topo_nic *x = &((const struct found_nic *)a)->nic;
	const struct rl_topo_nic *y = &((const struct found_nic *)b)->nic;
	if (x->infiniband != y->infiniband)
		return x->infiniband ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int load_nics(struct rl_topo *t, hwloc_topology_t ht, struct found_nic **out, char *err,
                     size_t errlen)
{
	hwloc_obj_t os = NULL;
	int n = 0;
	struct found_nic *f;

	while ((os = hwloc_get_next_osdev(ht, os)))
		n += is_nic(os);
	f = calloc(n > 0 ? n : 1, sizeof *f);
	if (!f) {
		snprintf(err, errlen, "%s: out of memory", t->source);
		return -1;
	}
	*out = f;
	n = 0;
	while ((os = hwloc_get_next_osdev(ht, os))) {
		struct found_nic *c;
		hwloc_obj_t pci = rl_topo_pci_of(os);
		if (!is_nic(os))
			continue;
		c = &f[n++];
		c->os = os;
		snprintf(c->nic.name, sizeof c->nic.name, "%s", os->name);
		c->nic.infiniband = os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
		c->nic.numa = io_numa(t, ht, os);
		if (pci && format_busid(c->nic.busid, pci, t->source, err, errlen) < 0)
			return -1;
	}
	qsort(f, n, sizeof *f, cmp_nic);
	t->nics = n > 0 ? calloc(n, sizeof *t->nics) : NULL;
	if (n > 0 && !t->nics) {
		snprintf(err, errlen, "%s: out of memory", t->source);
		return -1;
	}
	for (int i = 0; i < n; i++)
		t->nics[i] = f[i].nic;
	t->n_nics = n;
	return 0;
}

/* How far apart a GPU and a NIC are, for pairing each GPU with the NIC its
 * traffic should leave through (NCCL's PIX/PXB, PHB, NODE, SYS). Found at
 * their lowest common ancestor in hwloc's tree:
 *   0  a PCI bridge: a root port or PCIe switch above both; traffic between
 *      them can stay below the host bridge (GPUDirect RDMA at full speed)
 *   1  a host bridge: they meet in the CPU's root complex
 *   2  a CPU-side object, and both are in the same NUMA domain
 *   3  a CPU-side object inside one package (different NUMA domains of it,
 *      as with sub-NUMA clustering or AMD's NPS modes)
 *   4  anything higher: across the link between sockets
 * A NIC without a PCI device starts from its OS device, so it lands on 2-4. */
static int gpu_nic_distance(hwloc_obj_t gpu, int gpu_numa, hwloc_obj_t nic, int nic_numa)
{
	hwloc_obj_t a, b = NULL;

	for (a = gpu; a; a = a->parent) {
		for (b = nic; b && b != a; b = b->parent)
			;
		if (b)
			break;
	}
	if (!a)
		return 4;
	if (a->type == HWLOC_OBJ_BRIDGE)
		return a->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? 1 : 0;
	if (a->type == HWLOC_OBJ_PCI_DEVICE)
		return 0; /* one adapter with both functions */
	if (gpu_numa >= 0 && gpu_numa == nic_numa)
		return 2;
	for (; a; a = a->parent)
		if (a->type == HWLOC_OBJ_PACKAGE)
			return 3;
	return 4;
}

static int fill_distances(struct rl_topo *t, const struct found_gpu *g, const struct found_nic *c,
                          char *err, size_t errlen)
{
	if (t->n_gpus == 0 || t->n_nics == 0)
		return 0;
	t->gpu_nic_distance = calloc((size_t)t->n_gpus * t->n_nics, sizeof *t->gpu_nic_distance);
	if (!t->gpu_nic_distance) {
		snprintf(err, errlen, "%s: out of memory", t->source);
		return -1;
	}
	for (int i = 0; i < t->n_gpus; i++)
		for (int j = 0; j < t->n_nics; j++)
			t->gpu_nic_distance[i * t->n_nics + j] =
			    gpu_nic_distance(g[i].pci, t->gpus[i].numa, c[j].os, t->nics[j].numa);
	return 0;
}

int rl_topo_load_devices(struct rl_topo *t, hwloc_topology_t ht, char *err, size_t errlen)
{
	struct found_gpu *gpus = NULL;
	struct found_nic *nics = NULL;
	hwloc_obj_t *gpu_objs = NULL;
	int rc = -1;

	if (load_gpus(t, ht, &gpus, err, errlen) < 0 || load_nics(t, ht, &nics, err, errlen) < 0)
		goto out;
	gpu_objs = calloc(t->n_gpus > 0 ? t->n_gpus : 1, sizeof *gpu_objs);
	if (!gpu_objs) {
		snprintf(err, errlen, "%s: out of memory", t->source);
		goto out;
	}
	for (int i = 0; i < t->n_gpus; i++)
		gpu_objs[i] = gpus[i].pci;
	if (rl_topo_fill_nvlink(t, ht, gpu_objs, err, errlen) < 0 ||
	    fill_distances(t, gpus, nics, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	free(gpu_objs);
	free(gpus);
	free(nics);
	return rc;
}
