/* The GPUs the planner knows: what hwloc cannot tell about a card (memory,
 * dense bf16 peak, memory bandwidth, NVLink bandwidth). Device ids are checked against
 * pci.ids (2023.04.10) and NVIDIA's open-gpu-kernel-modules README (its
 * "supported GPUs" table, which also gives the names NVML reports and hwloc
 * copies into GPUModel). Numbers come from NVIDIA's data sheets, cited per
 * line. Memory is the nominal size in GiB: the HBM stacks are powers of two
 * and nvidia-smi's totals (81559 MiB for an "80GB" H100) sit just under it;
 * the planner's reserve covers the difference.
 * defines: rl_gpu_spec_lookup */
#include "topology/planner.h"

#include <ctype.h>
#include <string.h>

#define GIB    (1024.0 * 1024.0 * 1024.0)
#define TFLOPS 1e12
#define GBPS   1e9 /* data sheets give link and memory speeds in decimal GB/s */

/* A spec plus the substrings that name it in a GPUModel string: NVML names
 * ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM3-32GB-H") and pci.ids names
 * ("GA100 [A100 SXM4 80GB]") spell the same card differently. */
struct gpu_entry {
	struct rl_gpu_spec spec;
	const char *match[3];
};

/* NVLink: the data sheets give the total of both directions; one
 * direction is half. Cards whose NVLink is an optional bridge (A100 PCIe,
 * H100 PCIe and NVL, RTX A6000) carry the bridge's bandwidth: the topology
 * says whether a bridge is there (its NVLink domain), so a card without
 * one is never charged at this speed. */
static const struct gpu_entry gpu_table[] = {
    /* Volta has no bf16 tensor cores: the fp16 tensor peak stands in, as a
     * V100 run trains in fp16. V100 data sheet (2020), SXM2 16 and 32 GB:
     * 125 TFLOPS tensor, HBM2 900 GB/s, NVLink 300 GB/s (6 links x 25 GB/s
     * x 2 directions). */
    {{"Tesla V100 SXM2 16GB", 0x1db1, 16 * GIB, 125 * TFLOPS, 900 * GBPS, 150 * GBPS},
     {"V100-SXM2-16GB", "V100 SXM2 16GB", NULL}},
    /* pci.ids lists a second device id for the same card */
    {{"Tesla V100 SXM2 16GB", 0x1df5, 16 * GIB, 125 * TFLOPS, 900 * GBPS, 150 * GBPS}, {NULL}},
    {{"Tesla V100 SXM2 32GB", 0x1db5, 32 * GIB, 125 * TFLOPS, 900 * GBPS, 150 * GBPS},
     {"V100-SXM2-32GB", "V100 SXM2 32GB", NULL}},
    /* DGX-2 data sheet: 16 GPUs, 2 PFLOPS tensor (125 per GPU; the 450 W
     * DGX-2H reports "V100-SXM3-32GB-H" and 2.1 PFLOPS, within 5%), 14.4
     * TB/s of HBM2 in all (900 GB/s per GPU); six NVLinks of 25 GB/s per
     * direction into the NVSwitches, as the hwloc DGX-2 topology's
     * NVLinkBandwidth matrix shows (25000 MB/s per link). */
    {{"Tesla V100 SXM3 32GB", 0x1db8, 32 * GIB, 125 * TFLOPS, 900 * GBPS, 150 * GBPS},
     {"V100-SXM3-32GB", "V100 SXM3 32GB", NULL}},
    /* A100 data sheet (2021): bf16 tensor 312 TFLOPS dense (624 sparse),
     * NVLink 600 GB/s on SXM4 and through the 2-GPU bridge on PCIe. HBM:
     * 1,555 GB/s on the 40 GB cards (HBM2), 2,039 GB/s on SXM4 80GB and
     * 1,935 GB/s on PCIe 80GB (HBM2e). */
    {{"A100 SXM4 40GB", 0x20b0, 40 * GIB, 312 * TFLOPS, 1555 * GBPS, 300 * GBPS},
     {"A100-SXM4-40GB", "A100 SXM4 40GB", NULL}},
    {{"A100 SXM4 80GB", 0x20b2, 80 * GIB, 312 * TFLOPS, 2039 * GBPS, 300 * GBPS},
     {"A100-SXM4-80GB", "A100 SXM4 80GB", NULL}},
    /* pci.ids names both 0x20f1 and 0x20b1 "A100 PCIe 40GB" */
    {{"A100 PCIe 40GB", 0x20f1, 40 * GIB, 312 * TFLOPS, 1555 * GBPS, 300 * GBPS},
     {"A100-PCIE-40GB", "A100 PCIe 40GB", NULL}},
    {{"A100 PCIe 40GB", 0x20b1, 40 * GIB, 312 * TFLOPS, 1555 * GBPS, 300 * GBPS}, {NULL}},
    {{"A100 PCIe 80GB", 0x20b5, 80 * GIB, 312 * TFLOPS, 1935 * GBPS, 300 * GBPS},
     {"A100-PCIE-80GB", "A100 PCIe 80GB", "A100 80GB PCIe"}},
    /* H100 data sheet: SXM5 bf16 1,979 TFLOPS with sparsity (989.4 dense),
     * HBM3 3.35 TB/s, NVLink 900 GB/s; PCIe 1,513 sparse (756.5 dense),
     * HBM2e 2 TB/s, NVLink bridge 600 GB/s. NVML calls the SXM5 card "H100
     * 80GB HBM3". */
    {{"H100 SXM5 80GB", 0x2330, 80 * GIB, 989.4 * TFLOPS, 3350 * GBPS, 450 * GBPS},
     {"H100 80GB HBM3", "H100 SXM5 80GB", "H100 SXM"}},
    {{"H100 PCIe", 0x2331, 80 * GIB, 756.5 * TFLOPS, 2000 * GBPS, 300 * GBPS}, {"H100 PCIe", NULL}},
    /* H100 NVL product brief (2024): 94 GB, bf16 1,671 TFLOPS with
     * sparsity (835.5 dense), HBM3 3,938 GB/s (the data sheet rounds it to
     * 3.9 TB/s), NVLink bridge 600 GB/s. */
    {{"H100 NVL", 0x2321, 94 * GIB, 835.5 * TFLOPS, 3938 * GBPS, 300 * GBPS}, {"H100 NVL", NULL}},
    /* H200 data sheet: 141 GB of HBM3e at 4.8 TB/s on both; SXM bf16
     * 1,979 TFLOPS sparse (989.4 dense), NVLink 900 GB/s; NVL 1,671 sparse
     * (835.5 dense), 2- or 4-way NVLink bridge 900 GB/s. */
    {{"H200 SXM 141GB", 0x2335, 141 * GIB, 989.4 * TFLOPS, 4800 * GBPS, 450 * GBPS},
     {"H200", NULL}},
    {{"H200 NVL", 0x233b, 141 * GIB, 835.5 * TFLOPS, 4800 * GBPS, 450 * GBPS}, {"H200 NVL", NULL}},
    /* L40S data sheet: 48 GB GDDR6 at 864 GB/s, bf16 362.05 TFLOPS dense
     * (733 sparse), PCIe Gen4 only. */
    {{"L40S", 0x26b9, 48 * GIB, 362.05 * TFLOPS, 864 * GBPS, 0}, {"L40S", NULL}},
    /* RTX A6000 data sheet: 48 GB GDDR6 at 768 GB/s, bf16 tensor with fp32
     * accumulate 154.8 TFLOPS dense (309.7 sparse), NVLink bridge
     * 112.5 GB/s for two cards. */
    {{"RTX A6000", 0x2230, 48 * GIB, 154.8 * TFLOPS, 768 * GBPS, 56.25 * GBPS},
     {"RTX A6000", NULL}},
    /* Ada whitepaper, RTX 4090: 24 GB GDDR6X at 1,008 GB/s, bf16 tensor
     * with fp32 accumulate 165.2 TFLOPS dense (330.4 sparse); no NVLink. */
    {{"GeForce RTX 4090", 0x2684, 24 * GIB, 165.2 * TFLOPS, 1008 * GBPS, 0}, {"RTX 4090", NULL}},
};

#define N_GPUS (sizeof gpu_table / sizeof gpu_table[0])

/* Case-insensitive strstr: hwloc copies whatever case the driver or
 * pci.ids used ("PCIE" and "PCIe" both occur). */
static int contains_nocase(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++) {
		size_t i = 0;
		while (i < n && hay[i] &&
		       tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
			i++;
		if (i == n)
			return 1;
	}
	return 0;
}

const struct rl_gpu_spec *rl_gpu_spec_lookup(unsigned device_id, const char *model)
{
	const struct gpu_entry *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; i < N_GPUS; i++)
		if (gpu_table[i].spec.device_id == device_id)
			return &gpu_table[i].spec;
	if (!model)
		return NULL;
	/* The longest matching name wins, so "H200 NVL" beats "H200". */
	for (size_t i = 0; i < N_GPUS; i++)
		for (size_t k = 0; k < 3 && gpu_table[i].match[k]; k++) {
			size_t len = strlen(gpu_table[i].match[k]);
			if (len > best_len && contains_nocase(model, gpu_table[i].match[k])) {
				best = &gpu_table[i];
				best_len = len;
			}
		}
	return best ? &best->spec : NULL;
}
