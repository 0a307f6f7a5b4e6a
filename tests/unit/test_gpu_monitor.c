/* The GPU monitor's refusals, which are what a machine without a GPU
 * meets: without NVML the reason names the library; with it (a GPU
 * machine), a bus id no GPU has is refused naming the bus id. The readings
 * themselves are checked on a GPU by tests/cuda/device-pack.sh. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <string.h>

#include "runtime/logger/gpu_monitor.h"

Test(gpu_monitor, refused_with_a_reason)
{
	char why[512] = "";
	void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	struct rl_gpu_monitor *m = rl_gpu_monitor_open("0000:ff:1f.7", 0.5, why, sizeof why);

	cr_assert_null(m, "a GPU at 0000:ff:1f.7?");
	if (!nvml) {
		cr_assert(strstr(why, "cannot load libnvidia-ml.so.1"), "%s", why);
	} else {
		cr_assert(strstr(why, "0000:ff:1f.7") || strstr(why, "NVML did not start"), "%s",
		          why);
		dlclose(nvml);
	}
	rl_gpu_monitor_close(NULL); /* closing none is harmless */
}
