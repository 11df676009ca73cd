/*
 * A stand-in libcudart.so for machines without GPUs: the CUDA runtime calls slurmpod's cffi sanity
 * check makes (device count, malloc/memset/memcpy/free, streams), over host memory.
 * Driven by the same key=value state file as the fake NVML (FAKE_NVML_STATE):
 *   gpus=N (default FAKE_NVML_GPUS or 2)   cuda.corrupt=I,J (copies from those GPUs flip a byte)
 *   cuda.fail_malloc=I,J (cudaMalloc there answers cudaErrorMemoryAllocation)
 *   cuda.error=CODE (cudaGetDeviceCount answers CODE, as the runtime does on a host without a driver
 *   (35, cudaErrorInsufficientDriver) or without a GPU (100, cudaErrorNoDevice))
 * Signatures follow https://docs.nvidia.com/cuda/cuda-runtime-api/ (cuda_runtime_api.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define cudaSuccess 0
#define cudaErrorInvalidValue 1
#define cudaErrorMemoryAllocation 2
#define cudaErrorInsufficientDriver 35
#define cudaErrorNoDevice 100
#define cudaErrorInvalidDevice 101

static int current;

static const char *state_value(const char *key, char *buf, size_t len) {
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *f = path ? fopen(path, "r") : NULL;
    const char *found = NULL;
    char line[512];
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (strncmp(line, key, n) == 0 && line[n] == '=') { snprintf(buf, len, "%s", line + n + 1); found = buf; }
    }
    if (f) fclose(f);
    return found;
}
static int listed(const char *key, int index) {
    char buf[256];
    const char *v = state_value(key, buf, sizeof buf);
    for (const char *p = v; p && *p;) {
        if (atoi(p) == index) return 1;
        p = strchr(p, ',');
        if (p) p++;
    }
    return 0;
}
static int device_count(void) {
    char buf[64];
    const char *v = state_value("gpus", buf, sizeof buf);
    const char *env = getenv("FAKE_NVML_GPUS");
    return v ? atoi(v) : env ? atoi(env) : 2;
}

int cudaGetDeviceCount(int *count) {
    char buf[16];
    if (!count) return cudaErrorInvalidValue;
    *count = 0;
    if (state_value("cuda.error", buf, sizeof buf)) return atoi(buf);
    *count = device_count();
    return cudaSuccess;
}
int cudaSetDevice(int device) {
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    current = device;
    return cudaSuccess;
}
int cudaGetDevice(int *device) { if (!device) return cudaErrorInvalidValue; *device = current; return cudaSuccess; }
int cudaMalloc(void **ptr, size_t size) {
    if (!ptr) return cudaErrorInvalidValue;
    if (listed("cuda.fail_malloc", current)) return cudaErrorMemoryAllocation;
    *ptr = malloc(size ? size : 1);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
int cudaFree(void *ptr) { free(ptr); return cudaSuccess; }
int cudaMemset(void *ptr, int value, size_t count) { if (!ptr) return cudaErrorInvalidValue; memset(ptr, value, count); return cudaSuccess; }
/* kind: 1 host->device, 2 device->host, 3 device->device; a "corrupt" GPU flips the first byte. */
int cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
    if (!dst || !src) return cudaErrorInvalidValue;
    memcpy(dst, src, count);
    if (kind == 2 && count && listed("cuda.corrupt", current)) ((unsigned char *)dst)[0] ^= 0xFF;
    return cudaSuccess;
}
int cudaDeviceSynchronize(void) { return cudaSuccess; }
int cudaStreamCreate(void **stream) { if (!stream) return cudaErrorInvalidValue; *stream = malloc(1); return cudaSuccess; }
int cudaStreamSynchronize(void *stream) { (void)stream; return cudaSuccess; }
int cudaStreamDestroy(void *stream) { free(stream); return cudaSuccess; }
int cudaRuntimeGetVersion(int *v) { if (!v) return cudaErrorInvalidValue; *v = 12080; return cudaSuccess; }
const char *cudaGetErrorString(int err) {
    switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    default: return "unknown error";
    }
}
