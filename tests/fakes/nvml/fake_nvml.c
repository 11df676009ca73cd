/*
 * A stand-in libnvidia-ml.so.1 for machines without GPUs: it exports the NVML entry points slurmpod's
 * inventory and health checks call, so the production path (pynvml -> ctypes -> this library) runs
 * unchanged. Signatures and return codes follow https://docs.nvidia.com/deploy/nvml-api/ (nvml.h).
 *
 * Environment: FAKE_NVML_GPUS sets the GPU count (default 2); FAKE_NVML_FAIL_INIT=1 makes init fail.
 * FAKE_NVML_STATE names a key=value file ('#' comments). A key "K" applies to every GPU, "gpu.N.K" to
 * GPU N only (it wins). Keys:
 *   gpus=8  name=NVIDIA H100 80GB HBM3  uuid=GPU-...  hang=nvmlFunctionName  unsupported=nvmlA,nvmlB
 *   hang_after_init=1 (nvmlInit succeeds, every later call sleeps: a driver wedged under a
 *   running process)  gpu.N.lost=1 (GPU N fell off the bus: its handle answers NVML_ERROR_GPU_IS_LOST)
 *   ecc.volatile.corrected  ecc.volatile.uncorrected  ecc.aggregate.corrected  ecc.aggregate.uncorrected
 *   retired.sbe  retired.dbe  retired.pending  remap.corrected  remap.uncorrected  remap.pending
 *   remap.failure  nvlinks (links per GPU, default 0)  nvlink.L.down=1  nvlink.L.replay / .recovery /
 *   .crc_flit / .crc_data  clocks_event (bitmask)  temp (C)  procs=pid:bytes,pid:bytes  mem_total
 *   mem_used  persistence  fabric.state  fabric.status
 *   affinity=online: every GPU's CPU affinity is all CPUs of this machine (default: CPUs 2i and 2i+1,
 *   which a small machine lacks; Slurm's AutoDetect then refuses affinities that split a socket)
 *   xid.SEQ=GPU:CODE: XID CODE raised on GPU at SEQ, a number that grows with each injection (the time
 *   in microseconds will do; tests/fakes/gpu_libs.py raise_xid writes one).
 * The file is read again on every call, so a process that stays initialised sees what is written later,
 * as with a real driver. Writers replace it at once (write a temp file, rename it over).
 * XIDs are events, as in the real driver: an event set gets each XID raised on a GPU after the set was
 * registered for it (SEQ above the largest in the file at nvmlDeviceRegisterEvents), once, from
 * nvmlEventSetWait; one raised before never reaches it (a later reader has only the kernel log).
 * "hang" makes the named function sleep (a wedged driver) until the key is gone from the file.
 * Built with -DFAKE_NVML_STATE_DIR='"/dir"' (the cluster tests' fake-GPU workers), a process without
 * FAKE_NVML_STATE reads "/dir/<hostname>": slurmd starts the hooks with none of the pod's environment.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
/* nvmlReturn_t values, from nvml.h. Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_GPU_IS_LOST 15
#define MAX_GPUS 16
#define MAX_KEYS 512
#define MAX_XIDS 256
#define MAX_STATE_BYTES (256 * 1024)

struct fake_device { unsigned int index; };
static struct fake_device devices[MAX_GPUS];
static int initialized;
static char state_path[1024];

struct xid { unsigned long long seq; unsigned int gpu, code; };
/* One reading of the state file. A snapshot is never changed or freed once published: a call on another
 * thread may still be reading it. A new one is made only when the file's bytes change. */
struct state {
    char *text; size_t len;
    int nkeys; const char *key[MAX_KEYS], *value[MAX_KEYS];
    int nxids; struct xid xids[MAX_XIDS];
    unsigned long long last_seq;  /* the largest SEQ in the file: what "injected before now" means */
};
static struct state empty_state = {.text = ""};
static struct state *current_state = &empty_state;
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;

static struct state *snapshot(void) { return __atomic_load_n(&current_state, __ATOMIC_ACQUIRE); }

static void resolve_path(void) {
    state_path[0] = 0;
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
    if (path) snprintf(state_path, sizeof state_path, "%s", path);
}

/* The file's bytes now (NUL-terminated; "" when there is none), in a buffer refresh() reuses. */
static const char *read_state_file(size_t *len) {
    static char buf[MAX_STATE_BYTES + 1];
    *len = 0;
    FILE *f = state_path[0] ? fopen(state_path, "r") : NULL;
    if (f) { *len = fread(buf, 1, MAX_STATE_BYTES, f); fclose(f); }
    buf[*len] = 0;
    return buf;
}

/* "xid.SEQ" = "GPU:CODE" joins the XID list; 1 if the line was one. */
static int parse_xid(struct state *s, const char *key, const char *value) {
    unsigned long long seq; unsigned int g, c; int used = 0;
    if (strncmp(key, "xid.", 4) != 0) return 0;
    if (sscanf(key + 4, "%llu%n", &seq, &used) != 1 || key[4 + used] != 0) return 0;
    if (s->nxids < MAX_XIDS && sscanf(value, "%u:%u", &g, &c) == 2) {
        s->xids[s->nxids++] = (struct xid){seq, g, c};
        if (seq > s->last_seq) s->last_seq = seq;
    }
    return 1;
}

/* A snapshot of ``bytes``: kept as read (to compare with the next reading) and split into keys. */
static struct state *parse_state(const char *bytes, size_t len) {
    struct state *s = calloc(1, sizeof *s);
    char *text = malloc(len + 1);
    if (s) s->text = malloc(len + 1);
    if (!s || !text || !s->text) { free(text); if (s) free(s->text); free(s); return NULL; }
    s->len = len;
    memcpy(s->text, bytes, len + 1);
    memcpy(text, bytes, len + 1);
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        line[strcspn(line, "\r")] = 0;
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !eq) continue;
        *eq = 0;
        if (strcmp(line, "xid") == 0)
            fprintf(stderr, "fake_nvml: 'xid=%s' has no sequence number: write xid.SEQ=GPU:CODE\n", eq + 1);
        if (parse_xid(s, line, eq + 1) || s->nkeys >= MAX_KEYS) continue;
        s->key[s->nkeys] = line; s->value[s->nkeys] = eq + 1; s->nkeys++;
    }
    return s;  /* keys and values point into ``text``, which lives as long as the snapshot */
}

/* Read the state file again; publish a new snapshot if it changed. */
static void refresh(void) {
    pthread_mutex_lock(&refresh_lock);
    size_t len;
    const char *bytes = read_state_file(&len);
    struct state *old = snapshot();
    if (len != old->len || memcmp(bytes, old->text, len) != 0) {
        struct state *s = parse_state(bytes, len);
        if (s) __atomic_store_n(&current_state, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&refresh_lock);
}

static const char *lookup(const char *key) {
    struct state *s = snapshot();
    for (int i = s->nkeys - 1; i >= 0; i--) if (strcmp(s->key[i], key) == 0) return s->value[i];
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
/* A wedged driver: the named call, or once initialised every call, does not return. */
static int hangs(const char *fn) {
    if (in_list(lookup("hang"), fn)) return 1;
    return initialized && strncmp(fn, "nvmlInit", 8) != 0 && lookup("hang_after_init") &&
           strcmp(lookup("hang_after_init"), "0") != 0;
}
/* A wedged call sleeps for as long as the state file says so, far past any caller's deadline. */
static void hang_if_wedged(const char *fn) {
    while (hangs(fn)) { usleep(100 * 1000); refresh(); }
}
/* Every entry point starts here: the state as written now, then hang or refuse when it says so. */
#define ENTER(fn) do { \
    refresh(); \
    hang_if_wedged(fn); \
    if (in_list(lookup("unsupported"), fn)) return NVML_ERROR_NOT_SUPPORTED; \
} while (0)
static unsigned int gpu_count(void) {
    const char *env = getenv("FAKE_NVML_GPUS");
    const char *st = lookup("gpus");
    unsigned int n = st ? (unsigned int)atoi(st) : env ? (unsigned int)atoi(env) : 2;
    return n > MAX_GPUS ? MAX_GPUS : n;
}
/* A GPU past "gpus" now, or marked lost, fell off the bus: NVML answers NVML_ERROR_GPU_IS_LOST for it.
 * Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html */
static int gpu_lost(unsigned int index) { return index >= gpu_count() || gpu_num(index, "lost", 0); }
#define DEVICE(d) do { if (!initialized) return NVML_ERROR_UNINITIALIZED; \
    if (!(d)) return NVML_ERROR_INVALID_ARGUMENT; \
    if (gpu_lost((d)->index)) return NVML_ERROR_GPU_IS_LOST; } while (0)

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *fail = getenv("FAKE_NVML_FAIL_INIT");
    if (fail && strcmp(fail, "1") == 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    resolve_path();
    ENTER("nvmlInit");
    for (unsigned int i = 0; i < MAX_GPUS; i++) devices[i].index = i;
    initialized = 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlShutdown(void) {
    ENTER("nvmlShutdown");
    initialized = 0;
    return NVML_SUCCESS;
}

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
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
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
    if (gpu_lost(index)) return NVML_ERROR_GPU_IS_LOST;
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
    DEVICE(d);
    if (!name) return NVML_ERROR_INVALID_ARGUMENT;
    if (length < 32) return NVML_ERROR_INSUFFICIENT_SIZE;
    const char *v = gpu_str(d->index, "name");
    snprintf(name, length, "%s", v ? v : "NVIDIA H100 80GB HBM3");
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(struct fake_device *d, char *uuid, unsigned int length) {
    ENTER("nvmlDeviceGetUUID");
    DEVICE(d);
    if (!uuid) return NVML_ERROR_INVALID_ARGUMENT;
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
    DEVICE(d);
    if (!minor) return NVML_ERROR_INVALID_ARGUMENT;
    *minor = d->index + 4;
    return NVML_SUCCESS;
}

/* GPU i is close to CPUs 2i and 2i+1 (one NUMA half each on a 4-CPU box). */
nvmlReturn_t nvmlDeviceGetCpuAffinity(struct fake_device *d, unsigned int cpuSetSize, unsigned long *cpuSet) {
    ENTER("nvmlDeviceGetCpuAffinity");
    DEVICE(d);
    if (!cpuSet || cpuSetSize == 0) return NVML_ERROR_INVALID_ARGUMENT;
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

/* --- events: each set gets, once, every XID raised after it was registered for the XID's GPU ---
 * Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlEvents.html (nvmlEventTypeXidCriticalError is
 * 0x8; nvmlEventData_t: device, eventType, eventData (the XID), gpuInstanceId, computeInstanceId). */
#define XID_EVENT 0x8ULL
#define NO_INSTANCE 0xFFFFFFFFu  /* nvmlEventData_t's instance ids when MIG is off */
#define WAIT_POLL_MS 5
typedef struct { struct fake_device *device; unsigned long long type, data; unsigned int gi, ci; } fake_event_t;
struct fake_set {
    int registered[MAX_GPUS];
    unsigned long long since[MAX_GPUS];  /* the largest SEQ in the file when the GPU was registered */
    unsigned long long last;             /* the SEQ of the last XID this set delivered */
};

nvmlReturn_t nvmlEventSetCreate(struct fake_set **set) {
    ENTER("nvmlEventSetCreate");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    *set = calloc(1, sizeof **set);
    return *set ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(struct fake_device *d, unsigned long long *types) {
    ENTER("nvmlDeviceGetSupportedEventTypes"); DEVICE(d);
    if (!types) return NVML_ERROR_INVALID_ARGUMENT;
    *types = XID_EVENT | 0x1ULL | 0x4ULL;  /* and nvmlEventTypeSingleBitEccError, nvmlEventTypePState */
    return NVML_SUCCESS;
}
/* From now on: XIDs already in the file are history, not events, for this set. */
nvmlReturn_t nvmlDeviceRegisterEvents(struct fake_device *d, unsigned long long types, struct fake_set *set) {
    ENTER("nvmlDeviceRegisterEvents"); DEVICE(d);
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    if ((types & XID_EVENT) && !set->registered[d->index]) {
        set->registered[d->index] = 1;
        set->since[d->index] = snapshot()->last_seq;
    }
    return NVML_SUCCESS;
}

/* The earliest XID this set has not had yet, or NULL. */
static const struct xid *next_xid(const struct state *s, const struct fake_set *set) {
    const struct xid *best = NULL;
    for (int i = 0; i < s->nxids; i++) {
        const struct xid *x = &s->xids[i];
        if (x->gpu >= MAX_GPUS || !set->registered[x->gpu] || x->seq <= set->since[x->gpu] || x->seq <= set->last)
            continue;
        if (!best || x->seq < best->seq) best = x;
    }
    return best;
}
static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
/* An event waiting now returns at once; else poll the file until one comes or timeout_ms pass. */
nvmlReturn_t nvmlEventSetWait_v2(struct fake_set *set, fake_event_t *data, unsigned int timeout_ms) {
    ENTER("nvmlEventSetWait");
    if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        const struct xid *x = next_xid(snapshot(), set);
        if (x) {  /* delivered even if its GPU fell off the bus since: the set holds its handle */
            set->last = x->seq;
            memset(data, 0, sizeof *data);
            data->device = &devices[x->gpu];
            data->type = XID_EVENT;
            data->data = x->code;
            data->gi = data->ci = NO_INSTANCE;
            return NVML_SUCCESS;
        }
        long long left = deadline - now_ms();
        if (left <= 0) return NVML_ERROR_TIMEOUT;
        usleep((useconds_t)(left < WAIT_POLL_MS ? left : WAIT_POLL_MS) * 1000u);
        refresh();
        hang_if_wedged("nvmlEventSetWait");
    }
}
nvmlReturn_t nvmlEventSetWait(struct fake_set *s, fake_event_t *d, unsigned int t) { return nvmlEventSetWait_v2(s, d, t); }
nvmlReturn_t nvmlEventSetFree(struct fake_set *set) {
    ENTER("nvmlEventSetFree");
    free(set);
    return NVML_SUCCESS;
}

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
