#define _GNU_SOURCE
/* NVML's C API as nvml.h declares it (the functions and structs used
 * here, whose layout NVML keeps stable across versions): nvmlInit_v2,
 * nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetIndex,
 * nvmlDeviceGetMemoryInfo_v2 (nvmlMemory_v2_t: its version, then total,
 * reserved, free, used in bytes; "used" as nvidia-smi shows it, without
 * the driver's reserve) or, on drivers before it, nvmlDeviceGetMemoryInfo
 * (nvmlMemory_t: total, free, used, the reserve counted as used),
 * nvmlDeviceGetUtilizationRates (nvmlUtilization_t: gpu, memory in percent
 * of the last sample period), nvmlErrorString, nvmlShutdown. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/logger/gpu_monitor.h"

typedef int nvml_return; /* nvmlReturn_t; NVML_SUCCESS is 0 */
typedef struct nvml_device *nvml_device;
struct nvml_memory {
	unsigned long long total, free, used;
};
struct nvml_memory_v2 {
	unsigned int version;
	unsigned long long total, reserved, free, used;
};
/* nvml.h's nvmlMemory_v2: the struct's size and its version, 2 */
#define NVML_MEMORY_V2 ((unsigned)sizeof(struct nvml_memory_v2) | 2u << 24)
struct nvml_utilization {
	unsigned int gpu, memory;
};

struct nvml {
	void *lib;
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	nvml_return (*by_bus_id)(const char *, nvml_device *);
	nvml_return (*index)(nvml_device, unsigned *);
	nvml_return (*memory)(nvml_device, struct nvml_memory *);
	nvml_return (*memory_v2)(nvml_device, struct nvml_memory_v2 *); /* NULL: older driver */
	nvml_return (*utilization)(nvml_device, struct nvml_utilization *);
	const char *(*error_string)(nvml_return);
};

struct rl_gpu_monitor {
	struct nvml api;
	nvml_device dev;
	unsigned index;
	double interval_s;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop, started;
	/* since the last take */
	double peak_used, total, util_sum;
	int n, failed;
	nvml_return last_error;
};

static const char *nvml_error(const struct nvml *api, nvml_return rc)
{
	const char *s = api->error_string ? api->error_string(rc) : NULL;
	return s ? s : "unknown NVML error";
}

static int load(struct nvml *api, char *why, size_t whylen)
{
	/* the driver's own name for it: libnvidia-ml.so is a development link */
	if (!(api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL))) {
		const char *e = dlerror();
		snprintf(why, whylen, "cannot load libnvidia-ml.so.1 (%s)", e ? e : "not found");
		return -1;
	}
	static const char *names[] = {"nvmlInit_v2",
	                              "nvmlShutdown",
	                              "nvmlDeviceGetHandleByPciBusId_v2",
	                              "nvmlDeviceGetIndex",
	                              "nvmlDeviceGetMemoryInfo",
	                              "nvmlDeviceGetUtilizationRates",
	                              "nvmlErrorString"};
	void *f[7];
	for (int i = 0; i < 7; i++)
		if (!(f[i] = dlsym(api->lib, names[i]))) {
			snprintf(why, whylen, "libnvidia-ml.so.1 has no %s", names[i]);
			dlclose(api->lib);
			api->lib = NULL;
			return -1;
		}
	/* POSIX: a function pointer converts from dlsym's void * */
	*(void **)&api->init = f[0];
	*(void **)&api->shutdown = f[1];
	*(void **)&api->by_bus_id = f[2];
	*(void **)&api->index = f[3];
	*(void **)&api->memory = f[4];
	*(void **)&api->utilization = f[5];
	*(void **)&api->error_string = f[6];
	*(void **)&api->memory_v2 = dlsym(api->lib, "nvmlDeviceGetMemoryInfo_v2");
	return 0;
}

/* One reading, into the sums since the last take; under the lock. */
static void read_gpu(struct rl_gpu_monitor *m)
{
	struct nvml_memory mem;
	struct nvml_memory_v2 mem2 = {.version = NVML_MEMORY_V2};
	struct nvml_utilization u;
	nvml_return rc = -1;

	if (m->api.memory_v2 && (rc = m->api.memory_v2(m->dev, &mem2)) == 0)
		mem = (struct nvml_memory){mem2.total, mem2.free, mem2.used};
	else
		rc = m->api.memory(m->dev, &mem);
	if (rc == 0)
		rc = m->api.utilization(m->dev, &u);
	if (rc != 0) {
		m->failed++;
		m->last_error = rc;
		return;
	}
	double used = (double)mem.used / (1024.0 * 1024 * 1024);
	m->peak_used = m->n == 0 || used > m->peak_used ? used : m->peak_used;
	m->total = (double)mem.total / (1024.0 * 1024 * 1024);
	m->util_sum += u.gpu;
	m->n++;
}

static void *watch(void *arg)
{
	struct rl_gpu_monitor *m = arg;
	struct timespec at;

	pthread_mutex_lock(&m->lock);
	clock_gettime(CLOCK_REALTIME, &at);
	while (!m->stop) {
		double whole = floor(m->interval_s);
		at.tv_sec += (time_t)whole;
		at.tv_nsec += (long)((m->interval_s - whole) * 1e9);
		if (at.tv_nsec >= 1000000000L) {
			at.tv_sec++;
			at.tv_nsec -= 1000000000L;
		}
		while (!m->stop && pthread_cond_timedwait(&m->wake, &m->lock, &at) != ETIMEDOUT)
			;
		if (!m->stop)
			read_gpu(m);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

struct rl_gpu_monitor *rl_gpu_monitor_open(const char *bus_id, double interval_s, char *why,
                                           size_t whylen)
{
	struct rl_gpu_monitor *m = calloc(1, sizeof *m);
	nvml_return rc;

	if (!m) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	if (load(&m->api, why, whylen)) {
		free(m);
		return NULL;
	}
	if ((rc = m->api.init()) != 0) {
		snprintf(why, whylen, "NVML did not start: %s", nvml_error(&m->api, rc));
		goto fail_lib;
	}
	if ((rc = m->api.by_bus_id(bus_id, &m->dev)) != 0 ||
	    (rc = m->api.index(m->dev, &m->index)) != 0) {
		snprintf(why, whylen, "NVML does not know the GPU at %s: %s", bus_id,
		         nvml_error(&m->api, rc));
		goto fail_init;
	}
	m->interval_s = interval_s > 0.01 ? interval_s : 0.01;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->wake, NULL);
	if (pthread_create(&m->thread, NULL, watch, m) == 0)
		m->started = true;
	/* without the thread, each take still reads the GPU once */
	return m;
fail_init:
	m->api.shutdown();
fail_lib:
	dlclose(m->api.lib);
	free(m);
	return NULL;
}

int rl_gpu_monitor_take(struct rl_gpu_monitor *m, struct rl_gpu_reading *r, char *why,
                        size_t whylen)
{
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	read_gpu(m);
	*r = (struct rl_gpu_reading){.index = m->index, .readings = m->n};
	if (m->n > 0) {
		r->mem_used_gb = m->peak_used;
		r->mem_total_gb = m->total;
		r->util = m->util_sum / m->n;
	} else {
		snprintf(why, whylen, "NVML could not read the GPU: %s",
		         nvml_error(&m->api, m->last_error));
		rc = -1;
	}
	m->peak_used = m->util_sum = 0;
	m->n = m->failed = 0;
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void rl_gpu_monitor_close(struct rl_gpu_monitor *m)
{
	if (!m)
		return;
	if (m->started) {
		pthread_mutex_lock(&m->lock);
		m->stop = true;
		pthread_cond_signal(&m->wake);
		pthread_mutex_unlock(&m->lock);
		pthread_join(m->thread, NULL);
	}
	pthread_cond_destroy(&m->wake);
	pthread_mutex_destroy(&m->lock);
	m->api.shutdown();
	dlclose(m->api.lib);
	free(m);
}
