/*
 * A stand-in libnvidia-ml.so.1 for machines without GPUs: it exports only the NVML entry points
 * slurmpod's inventory calls, so the production path (pynvml -> ctypes -> this library) runs
 * unchanged. FAKE_NVML_GPUS sets the GPU count (default 2); FAKE_NVML_FAIL_INIT=1 makes init fail.
 * Signatures and return codes follow https://docs.nvidia.com/deploy/nvml-api/ (nvml.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define MAX_GPUS 16

struct fake_device { unsigned int index; };
static struct fake_device devices[MAX_GPUS];
static int initialized;

static unsigned int gpu_count(void) {
    const char *env = getenv("FAKE_NVML_GPUS");
    unsigned int n = env ? (unsigned int)atoi(env) : 2;
    return n > MAX_GPUS ? MAX_GPUS : n;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *fail = getenv("FAKE_NVML_FAIL_INIT");
    if (fail && strcmp(fail, "1") == 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    for (unsigned int i = 0; i < MAX_GPUS; i++) devices[i].index = i;
    initialized = 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlShutdown(void) { initialized = 0; return NVML_SUCCESS; }

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = gpu_count();
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct fake_device **device) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (index >= gpu_count() || !device) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, struct fake_device **device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetName(struct fake_device *d, char *name, unsigned int length) {
    if (!d || !name) return NVML_ERROR_INVALID_ARGUMENT;
    if (length < 32) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(name, length, "NVIDIA H100 80GB HBM3");
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(struct fake_device *d, char *uuid, unsigned int length) {
    if (!d || !uuid) return NVML_ERROR_INVALID_ARGUMENT;
    if (length < 41) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(uuid, length, "GPU-00000000-0000-0000-0000-%012u", d->index);
    return NVML_SUCCESS;
}

/* The minor number is deliberately not the index, so callers must ask for it. */
nvmlReturn_t nvmlDeviceGetMinorNumber(struct fake_device *d, unsigned int *minor) {
    if (!d || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *minor = d->index + 4;
    return NVML_SUCCESS;
}

/* GPU i is close to CPUs 2i and 2i+1 (one NUMA half each on a 4-CPU box). */
nvmlReturn_t nvmlDeviceGetCpuAffinity(struct fake_device *d, unsigned int cpuSetSize, unsigned long *cpuSet) {
    if (!d || !cpuSet || cpuSetSize == 0) return NVML_ERROR_INVALID_ARGUMENT;
    memset(cpuSet, 0, cpuSetSize * sizeof(unsigned long));
    cpuSet[0] = 3UL << (2 * d->index);
    return NVML_SUCCESS;
}
