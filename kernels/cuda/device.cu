/* Opening the rank's GPU. cudaFree(0) forces the context into existence,
 * the usual idiom, so that a device in a bad state is reported with its
 * ordinal before any model memory is asked for. */
#include <stdio.h>

#include <cuda_runtime.h>

#include "kernels/device.h"

extern "C" int rl_cuda_device_count(char *err, size_t errlen)
{
	int n = 0;
	cudaError_t rc = cudaGetDeviceCount(&n);

	if (rc != cudaSuccess) {
		snprintf(err, errlen, "cudaGetDeviceCount: %s", cudaGetErrorString(rc));
		return 0;
	}
	if (n == 0)
		snprintf(err, errlen, "cudaGetDeviceCount found no GPU");
	return n;
}

extern "C" int rl_cuda_device_open(int ordinal, char *desc, size_t desclen, char *err,
                                   size_t errlen)
{
	cudaDeviceProp prop;
	cudaError_t rc = cudaSetDevice(ordinal);

	if (rc == cudaSuccess)
		rc = cudaFree(0);
	if (rc == cudaSuccess)
		rc = cudaGetDeviceProperties(&prop, ordinal);
	if (rc != cudaSuccess) {
		snprintf(err, errlen, "GPU %d: %s", ordinal, cudaGetErrorString(rc));
		return -1;
	}
	snprintf(desc, desclen, "GPU %d: %s, %.1f GiB, sm_%d%d", ordinal, prop.name,
	         (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), prop.major, prop.minor);
	return 0;
}

extern "C" int rl_cuda_device_bus_id(char *out, size_t len, char *err, size_t errlen)
{
	int dev = 0;
	cudaError_t rc = cudaGetDevice(&dev);

	if (rc == cudaSuccess)
		rc = cudaDeviceGetPCIBusId(out, (int)len, dev);
	if (rc != cudaSuccess) {
		snprintf(err, errlen, "cudaDeviceGetPCIBusId: %s", cudaGetErrorString(rc));
		return -1;
	}
	return 0;
}

extern "C" void *rl_cuda_host_alloc(size_t bytes)
{
	void *p = NULL;

	return cudaMallocHost(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}

extern "C" void rl_cuda_host_release(void *p)
{
	if (p)
		cudaFreeHost(p);
}
