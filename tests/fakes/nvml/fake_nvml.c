/*
 * A stand-in libnvidia-ml.so.1 for machines without GPUs: it exports the NVML entry points slurmpod's
 * inventory and health checks call, so the production path (pynvml -> ctypes -> this library) runs
 * unchanged. Signatures and return codes follow https://docs.nvidia.com/deploy/nvml-api/ (nvml.h).
 *
 * Environment (kept from the first version): FAKE_NVML_GPUS sets the GPU count (default 2);
 * FAKE_NVML_FAIL_INIT=1 makes init fail.
 * FAKE_NVML_STATE names a key=value file read at init ('#' comments). A key "K" applies to every GPU,
 * "gpu.N.K" to GPU N only (it wins). Keys:
 *   gpus=8  name=NVIDIA H100 80GB HBM3  uuid=GPU-...  hang=nvmlFunctionName  unsupported=nvmlA,nvmlB
 *   ecc.volatile.corrected  ecc.volatile.uncorrected  ecc.aggregate.corrected  ecc.aggregate.uncorrected
 *   retired.sbe  retired.dbe  retired.pending  remap.corrected  remap.uncorrected  remap.pending
 *   remap.failure  nvlinks (links per GPU, default 0)  nvlink.L.down=1  nvlink.L.replay / .recovery /
 *   .crc_flit / .crc_data  clocks_event (bitmask)  temp (C)  procs=pid:bytes,pid:bytes  mem_total
 *   mem_used  persistence  fabric.state  fabric.status  xid=GPU:CODE (repeatable: a queue)
 *   affinity=online: every GPU's CPU affinity is all CPUs of this machine (default: CPUs 2i and 2i+1,
 *   which a small machine lacks; Slurm's AutoDetect then refuses affinities that split a socket)
 * XIDs are delivered once each through the event-set API: the count already delivered is kept in
 * "$FAKE_NVML_STATE.delivered", as a real event is seen once.
 * "hang" makes the named function sleep forever (a wedged driver).
 * Built with -DFAKE_NVML_STATE_DIR='"/dir"' (the cluster tests' fake-GPU workers), a process without
 * FAKE_NVML_STATE reads "/dir/<hostname>": slurmd starts the hooks with none of the pod's environment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define MAX_GPUS 16
#define MAX_KEYS 512
#define MAX_XIDS 64

struct fake_device { unsigned int index; };
static struct fake_device devices[MAX_GPUS];
static int initialized;
static char keys[MAX_KEYS][128], values[MAX_KEYS][512];
static int nkeys;
static unsigned int xid_gpu[MAX_XIDS], xid_code[MAX_XIDS];
static int nxids;
static char state_path[1024];

static void load_state(void) {
    nkeys = 0; nxids = 0; state_path[0] = 0;
    const char *path = getenv("FAKE_NVML_STATE");
#ifdef FAKE_NVML_STATE_DIR
    static char by_host[512];
    if (!path || !*path) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        snprintf(by_host, sizeof by_host, "%s/%s", FAKE_NVML_STATE_DIR, host);
        path = by_host;
    }
#endif
    if (!path || !*path) return;
    snprintf(state_path, sizeof state_path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !eq) continue;
        *eq = 0;
        if (strcmp(line, "xid") == 0) {
            unsigned int g, c;
            if (nxids < MAX_XIDS && sscanf(eq + 1, "%u:%u", &g, &c) == 2) {
                xid_gpu[nxids] = g; xid_code[nxids] = c; nxids++;
            }
            continue;
        }
        if (nkeys < MAX_KEYS) {
            snprintf(keys[nkeys], sizeof keys[0], "%.127s", line);
            snprintf(values[nkeys], sizeof values[0], "%.511s", eq + 1);
            nkeys++;
        }
    }
    fclose(f);
}

static const char *lookup(const char *key) {
    for (int i = nkeys - 1; i >= 0; i--) if (strcmp(keys[i], key) == 0) return values[i];
    return NULL;
}
/* "gpu.N.key" if set, else "key" (applies to every GPU), else NULL. */
static const char *gpu_str(unsigned int gpu, const char *key) {
    char k[96];
    snprintf(k, sizeof k, "gpu.%u.%s", gpu, key);
    const char *v = lookup(k);
    return v ? v : lookup(key);
}
static unsigned long long gpu_num(unsigned int gpu, const char *key, unsigned long long dflt) {
    const char *v = gpu_str(gpu, key);
    return v ? strtoull(v, NULL, 10) : dflt;
}
static int in_list(const char *list, const char *name) {
    if (!list) return 0;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}
/* Every entry point starts here: hang forever or refuse when the state file says so. */
#define ENTER(fn) do { \
    if (in_list(lookup("hang"), fn)) for (;;) sleep(3600); \
    if (in_list(lookup("unsupported"), fn)) return NVML_ERROR_NOT_SUPPORTED; \
} while (0)
#define DEVICE(d) do { if (!initialized) return NVML_ERROR_UNINITIALIZED; \
    if (!(d)) return NVML_ERROR_INVALID_ARGUMENT; } while (0)

static unsigned int gpu_count(void) {
    const char *env = getenv("FAKE_NVML_GPUS");
    const char *st = lookup("gpus");
    unsigned int n = st ? (unsigned int)atoi(st) : env ? (unsigned int)atoi(env) : 2;
    return n > MAX_GPUS ? MAX_GPUS : n;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *fail = getenv("FAKE_NVML_FAIL_INIT");
    if (fail && strcmp(fail, "1") == 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    load_state();
    ENTER("nvmlInit");
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
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    ENTER("nvmlSystemGetDriverVersion");
    if (!version || length < 16) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(version, length, "%s", lookup("driver") ? lookup("driver") : "570.00.fake");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    ENTER("nvmlSystemGetNVMLVersion");
    if (!version || length < 16) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(version, length, "12.570.fake");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    ENTER("nvmlSystemGetCudaDriverVersion");
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    *v = 12080;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    ENTER("nvmlDeviceGetCount");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = gpu_count();
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct fake_device **device) {
    ENTER("nvmlDeviceGetHandleByIndex");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (index >= gpu_count() || !device) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, struct fake_device **device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}
nvmlReturn_t nvmlDeviceGetIndex(struct fake_device *d, unsigned int *index) {
    ENTER("nvmlDeviceGetIndex"); DEVICE(d);
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = d->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(struct fake_device *d, char *name, unsigned int length) {
    ENTER("nvmlDeviceGetName");
    if (!d || !name) return NVML_ERROR_INVALID_ARGUMENT;
    if (length < 32) return NVML_ERROR_INSUFFICIENT_SIZE;
    const char *v = gpu_str(d->index, "name");
    snprintf(name, length, "%s", v ? v : "NVIDIA H100 80GB HBM3");
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(struct fake_device *d, char *uuid, unsigned int length) {
    ENTER("nvmlDeviceGetUUID");
    if (!d || !uuid) return NVML_ERROR_INVALID_ARGUMENT;
    if (length < 41) return NVML_ERROR_INSUFFICIENT_SIZE;
    char k[32];
    snprintf(k, sizeof k, "gpu.%u.uuid", d->index);
    const char *v = lookup(k);
    if (v) snprintf(uuid, length, "%s", v);
    else snprintf(uuid, length, "GPU-00000000-0000-0000-0000-%012u", d->index);
    return NVML_SUCCESS;
}

/* The minor number is deliberately not the index, so callers must ask for it. */
nvmlReturn_t nvmlDeviceGetMinorNumber(struct fake_device *d, unsigned int *minor) {
    ENTER("nvmlDeviceGetMinorNumber");
    if (!d || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *minor = d->index + 4;
    return NVML_SUCCESS;
}

/* GPU i is close to CPUs 2i and 2i+1 (one NUMA half each on a 4-CPU box). */
nvmlReturn_t nvmlDeviceGetCpuAffinity(struct fake_device *d, unsigned int cpuSetSize, unsigned long *cpuSet) {
    ENTER("nvmlDeviceGetCpuAffinity");
    if (!d || !cpuSet || cpuSetSize == 0) return NVML_ERROR_INVALID_ARGUMENT;
    memset(cpuSet, 0, cpuSetSize * sizeof(unsigned long));
    const char *aff = lookup("affinity");
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (aff && strcmp(aff, "online") == 0 && online > 0) {
        /* every CPU of this machine, as on a one-socket box (Slurm wants a GPU's cores to fill sockets) */
        unsigned long bits = 8 * sizeof(unsigned long);
        for (long c = 0; c < online && (unsigned long)c < bits * cpuSetSize; c++) cpuSet[c / bits] |= 1UL << (c % bits);
        return NVML_SUCCESS;
    }
    cpuSet[0] = 3UL << (2 * d->index);
    return NVML_SUCCESS;
}

/* nvmlPciInfo_t (v3 layout): what Slurm's gpu/nvml plugin reads for gres.conf File= and Links=. */
typedef struct {
    char busIdLegacy[16]; unsigned int domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32];
} fake_pci_t;
nvmlReturn_t nvmlDeviceGetPciInfo_v3(struct fake_device *d, fake_pci_t *pci) {
    ENTER("nvmlDeviceGetPciInfo"); DEVICE(d);
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->bus = 0x10 + d->index; pci->pciDeviceId = 0x233010de;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02x:00.0", pci->bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(struct fake_device *d, fake_pci_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }
nvmlReturn_t nvmlDeviceGetPciInfo(struct fake_device *d, fake_pci_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }

/* errorType 0 corrected, 1 uncorrected; counterType 0 volatile, 1 aggregate. */
nvmlReturn_t nvmlDeviceGetTotalEccErrors(struct fake_device *d, int errorType, int counterType,
                                         unsigned long long *count) {
    ENTER("nvmlDeviceGetTotalEccErrors"); DEVICE(d);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    char k[64];
    snprintf(k, sizeof k, "ecc.%s.%s", counterType ? "aggregate" : "volatile",
             errorType ? "uncorrected" : "corrected");
    *count = gpu_num(d->index, k, 0);
    return NVML_SUCCESS;
}

/* cause 0: multiple single-bit errors, 1: double-bit error. */
nvmlReturn_t nvmlDeviceGetRetiredPages(struct fake_device *d, int cause, unsigned int *count,
                                       unsigned long long *addresses) {
    ENTER("nvmlDeviceGetRetiredPages"); DEVICE(d);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int n = (unsigned int)gpu_num(d->index, cause ? "retired.dbe" : "retired.sbe", 0);
    if (!addresses || *count < n) { *count = n; return n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS; }
    for (unsigned int i = 0; i < n; i++) addresses[i] = 0x1000ULL * (i + 1);
    *count = n;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(struct fake_device *d, unsigned int *pending) {
    ENTER("nvmlDeviceGetRetiredPagesPendingStatus"); DEVICE(d);
    if (!pending) return NVML_ERROR_INVALID_ARGUMENT;
    *pending = (unsigned int)gpu_num(d->index, "retired.pending", 0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(struct fake_device *d, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure) {
    ENTER("nvmlDeviceGetRemappedRows"); DEVICE(d);
    if (!corr || !unc || !pending || !failure) return NVML_ERROR_INVALID_ARGUMENT;
    *corr = (unsigned int)gpu_num(d->index, "remap.corrected", 0);
    *unc = (unsigned int)gpu_num(d->index, "remap.uncorrected", 0);
    *pending = (unsigned int)gpu_num(d->index, "remap.pending", 0);
    *failure = (unsigned int)gpu_num(d->index, "remap.failure", 0);
    return NVML_SUCCESS;
}

/* Links past "nvlinks" do not exist (NVML answers NOT_SUPPORTED for a GPU without NVLink). */
nvmlReturn_t nvmlDeviceGetNvLinkState(struct fake_device *d, unsigned int link, unsigned int *active) {
    ENTER("nvmlDeviceGetNvLinkState"); DEVICE(d);
    if (!active) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int links = (unsigned int)gpu_num(d->index, "nvlinks", 0);
    if (links == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= links) return NVML_ERROR_INVALID_ARGUMENT;
    char k[48];
    snprintf(k, sizeof k, "nvlink.%u.down", link);
    *active = gpu_num(d->index, k, 0) ? 0 : 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(struct fake_device *d, unsigned int link, int counter,
                                             unsigned long long *value) {
    static const char *names[] = {"replay", "recovery", "crc_flit", "crc_data"};
    ENTER("nvmlDeviceGetNvLinkErrorCounter"); DEVICE(d);
    if (!value || counter < 0 || counter > 3) return NVML_ERROR_INVALID_ARGUMENT;
    if (link >= (unsigned int)gpu_num(d->index, "nvlinks", 0)) return NVML_ERROR_INVALID_ARGUMENT;
    char k[48];
    snprintf(k, sizeof k, "nvlink.%u.%s", link, names[counter]);
    *value = gpu_num(d->index, k, 0);
    return NVML_SUCCESS;
}
/* What gpu/nvml reads to build gres.conf Links=: the peer's PCI info. No NVLink -> not supported. */
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(struct fake_device *d, unsigned int link, fake_pci_t *pci) {
    ENTER("nvmlDeviceGetNvLinkRemotePciInfo"); DEVICE(d);
    if (link >= (unsigned int)gpu_num(d->index, "nvlinks", 0)) return NVML_ERROR_NOT_SUPPORTED;
    return nvmlDeviceGetPciInfo_v3(&devices[(d->index + 1 + link) % gpu_count()], pci);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(struct fake_device *d, unsigned long long *reasons) {
    ENTER("nvmlDeviceGetCurrentClocksEventReasons"); DEVICE(d);
    if (!reasons) return NVML_ERROR_INVALID_ARGUMENT;
    *reasons = gpu_num(d->index, "clocks_event", 0);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(struct fake_device *d, unsigned long long *r) {
    return nvmlDeviceGetCurrentClocksEventReasons(d, r);
}

nvmlReturn_t nvmlDeviceGetTemperature(struct fake_device *d, int sensor, unsigned int *temp) {
    ENTER("nvmlDeviceGetTemperature"); DEVICE(d);
    if (!temp || sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = (unsigned int)gpu_num(d->index, "temp", 40);
    return NVML_SUCCESS;
}

typedef struct { unsigned long long total, free, used; } fake_memory_t;
nvmlReturn_t nvmlDeviceGetMemoryInfo(struct fake_device *d, fake_memory_t *m) {
    ENTER("nvmlDeviceGetMemoryInfo"); DEVICE(d);
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = gpu_num(d->index, "mem_total", 85899345920ULL);
    m->used = gpu_num(d->index, "mem_used", 0);
    m->free = m->total > m->used ? m->total - m->used : 0;
    return NVML_SUCCESS;
}

/* nvmlProcessInfo_v2/v3: pid, usedGpuMemory, gpuInstanceId, computeInstanceId. */
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } fake_proc_t;
static nvmlReturn_t running(struct fake_device *d, unsigned int *count, fake_proc_t *infos) {
    DEVICE(d);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    fake_proc_t found[32];
    unsigned int n = 0;
    const char *v = gpu_str(d->index, "procs");
    for (const char *p = v; p && *p && n < 32;) {
        unsigned int pid; unsigned long long used;
        if (sscanf(p, "%u:%llu", &pid, &used) != 2) break;
        found[n].pid = pid; found[n].used = used; found[n].gi = found[n].ci = 0xFFFFFFFFu; n++;
        p = strchr(p, ',');
        if (p) p++;
    }
    if (n == 0) { *count = 0; return NVML_SUCCESS; }
    if (!infos || *count < n) { *count = n; return NVML_ERROR_INSUFFICIENT_SIZE; }
    memcpy(infos, found, n * sizeof *found);
    *count = n;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(struct fake_device *d, unsigned int *c, fake_proc_t *i) {
    ENTER("nvmlDeviceGetComputeRunningProcesses"); return running(d, c, i);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(struct fake_device *d, unsigned int *c, fake_proc_t *i) {
    return nvmlDeviceGetComputeRunningProcesses_v3(d, c, i);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(struct fake_device *d, unsigned int *c, fake_proc_t *i) {
    ENTER("nvmlDeviceGetGraphicsRunningProcesses"); DEVICE(d);
    (void)i; if (!c) return NVML_ERROR_INVALID_ARGUMENT; *c = 0; return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(struct fake_device *d, unsigned int *mode) {
    ENTER("nvmlDeviceGetPersistenceMode"); DEVICE(d);
    if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = (unsigned int)gpu_num(d->index, "persistence", 1);
    return NVML_SUCCESS;
}

/* nvmlGpuFabricInfo_t: clusterUuid[16], status, cliqueId, state. No "fabric.state" -> not supported
 * (a GPU that is not on an NVSwitch fabric). */
typedef struct { unsigned char uuid[16]; int status; unsigned int clique; unsigned int state; } fake_fabric_t;
nvmlReturn_t nvmlDeviceGetGpuFabricInfo(struct fake_device *d, fake_fabric_t *info) {
    ENTER("nvmlDeviceGetGpuFabricInfo"); DEVICE(d);
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpu_str(d->index, "fabric.state")) return NVML_ERROR_NOT_SUPPORTED;
    memset(info, 0, sizeof *info);
    info->state = (unsigned int)gpu_num(d->index, "fabric.state", 0);
    info->status = (int)gpu_num(d->index, "fabric.status", 0);
    return NVML_SUCCESS;
}

/* --- events: one set; each queued XID delivered once (counter in "$FAKE_NVML_STATE.delivered") --- */
#define XID_EVENT 0x8ULL
typedef struct { struct fake_device *device; unsigned long long type, data; unsigned int gi, ci; } fake_event_t;
struct fake_set { unsigned long long gpus; };
static struct fake_set the_set;

static int delivered_count(void) {
    char p[1100]; int n = 0;
    snprintf(p, sizeof p, "%s.delivered", state_path);
    FILE *f = fopen(p, "r");
    if (f) { if (fscanf(f, "%d", &n) != 1) n = 0; fclose(f); }
    return n;
}
static void set_delivered(int n) {
    char p[1100];
    snprintf(p, sizeof p, "%s.delivered", state_path);
    FILE *f = fopen(p, "w");
    if (f) { fprintf(f, "%d\n", n); fclose(f); }
}

nvmlReturn_t nvmlEventSetCreate(struct fake_set **set) {
    ENTER("nvmlEventSetCreate");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    the_set.gpus = 0;
    *set = &the_set;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(struct fake_device *d, unsigned long long *types) {
    ENTER("nvmlDeviceGetSupportedEventTypes"); DEVICE(d);
    if (!types) return NVML_ERROR_INVALID_ARGUMENT;
    *types = XID_EVENT | 0x1ULL | 0x4ULL;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(struct fake_device *d, unsigned long long types, struct fake_set *set) {
    ENTER("nvmlDeviceRegisterEvents"); DEVICE(d);
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    if (types & XID_EVENT) set->gpus |= 1ULL << d->index;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetWait_v2(struct fake_set *set, fake_event_t *data, unsigned int timeout_ms) {
    ENTER("nvmlEventSetWait");
    if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
    int done = delivered_count();
    for (int i = done; i < nxids; i++) {
        set_delivered(i + 1);
        if (xid_gpu[i] >= gpu_count() || !(set->gpus & (1ULL << xid_gpu[i]))) continue;
        memset(data, 0, sizeof *data);
        data->device = &devices[xid_gpu[i]];
        data->type = XID_EVENT;
        data->data = xid_code[i];
        return NVML_SUCCESS;
    }
    if (timeout_ms) usleep(timeout_ms * 1000u);
    return NVML_ERROR_TIMEOUT;
}
nvmlReturn_t nvmlEventSetWait(struct fake_set *s, fake_event_t *d, unsigned int t) { return nvmlEventSetWait_v2(s, d, t); }
nvmlReturn_t nvmlEventSetFree(struct fake_set *set) { ENTER("nvmlEventSetFree"); (void)set; return NVML_SUCCESS; }

/* --- what Slurm's gpu/nvml plugin asks besides the above (AutoDetect=nvml): MIG off, clocks --- */
nvmlReturn_t nvmlDeviceGetMigMode(struct fake_device *d, unsigned int *current, unsigned int *pending) {
    ENTER("nvmlDeviceGetMigMode"); DEVICE(d);
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(struct fake_device *d, unsigned int *count) {
    ENTER("nvmlDeviceGetMaxMigDeviceCount"); DEVICE(d);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(struct fake_device *d, unsigned int *count, unsigned int *clocks) {
    ENTER("nvmlDeviceGetSupportedMemoryClocks"); DEVICE(d);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!clocks || *count < 1) { *count = 1; return NVML_ERROR_INSUFFICIENT_SIZE; }
    clocks[0] = 2619; *count = 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(struct fake_device *d, unsigned int mem, unsigned int *count,
                                                  unsigned int *clocks) {
    ENTER("nvmlDeviceGetSupportedGraphicsClocks"); DEVICE(d); (void)mem;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!clocks || *count < 1) { *count = 1; return NVML_ERROR_INSUFFICIENT_SIZE; }
    clocks[0] = 1980; *count = 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetApplicationsClock(struct fake_device *d, int type, unsigned int *mhz) {
    ENTER("nvmlDeviceGetApplicationsClock"); DEVICE(d); (void)type;
    if (!mhz) return NVML_ERROR_INVALID_ARGUMENT;
    *mhz = 1980;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceSetApplicationsClocks(struct fake_device *d, unsigned int m, unsigned int g) {
    ENTER("nvmlDeviceSetApplicationsClocks"); DEVICE(d); (void)m; (void)g; return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceResetApplicationsClocks(struct fake_device *d) {
    ENTER("nvmlDeviceResetApplicationsClocks"); DEVICE(d); return NVML_SUCCESS;
}
/* gpu/nvml's MIG path (reached only when GetMigMode says enabled, which it never does here) and the
 * unversioned names nvml.h maps to versioned ones; present so a plugin bound with RTLD_NOW resolves. */
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(struct fake_device *d, unsigned int link, fake_pci_t *pci) {
    return nvmlDeviceGetNvLinkRemotePciInfo_v2(d, link, pci);
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(struct fake_device *d, unsigned int i, struct fake_device **mig) {
    ENTER("nvmlDeviceGetMigDeviceHandleByIndex"); DEVICE(d); (void)i; (void)mig;
    return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(struct fake_device *d, unsigned int *id) {
    ENTER("nvmlDeviceGetGpuInstanceId"); DEVICE(d); (void)id; return NVML_ERROR_NOT_SUPPORTED;
}
nvmlReturn_t nvmlDeviceGetComputeInstanceId(struct fake_device *d, unsigned int *id) {
    ENTER("nvmlDeviceGetComputeInstanceId"); DEVICE(d); (void)id; return NVML_ERROR_NOT_SUPPORTED;
}
nvmlReturn_t nvmlDeviceGetAttributes_v2(struct fake_device *d, void *attributes) {
    ENTER("nvmlDeviceGetAttributes"); DEVICE(d); (void)attributes; return NVML_ERROR_NOT_SUPPORTED;
}
nvmlReturn_t nvmlDeviceGetProcessUtilization(struct fake_device *d, void *samples, unsigned int *count,
                                             unsigned long long since) {
    ENTER("nvmlDeviceGetProcessUtilization"); DEVICE(d); (void)samples; (void)count; (void)since;
    return NVML_ERROR_NOT_SUPPORTED;
}
/* acct_gather_energy/gpu and gpu usage sampling: energy in mJ since driver load, utilization in percent. */
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(struct fake_device *d, unsigned long long *mj) {
    ENTER("nvmlDeviceGetTotalEnergyConsumption"); DEVICE(d);
    if (!mj) return NVML_ERROR_INVALID_ARGUMENT;
    *mj = gpu_num(d->index, "energy_mj", 1000000ULL);
    return NVML_SUCCESS;
}
typedef struct { unsigned int gpu, memory; } fake_utilization_t;
nvmlReturn_t nvmlDeviceGetUtilizationRates(struct fake_device *d, fake_utilization_t *u) {
    ENTER("nvmlDeviceGetUtilizationRates"); DEVICE(d);
    if (!u) return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = (unsigned int)gpu_num(d->index, "util.gpu", 0);
    u->memory = (unsigned int)gpu_num(d->index, "util.memory", 0);
    return NVML_SUCCESS;
}
