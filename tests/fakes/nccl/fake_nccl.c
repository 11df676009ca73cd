/*
 * A stand-in libnccl.so.2 for machines without GPUs: the single-process all-reduce slurmpod's cffi
 * bandwidth check runs (ncclCommInitAll, grouped ncclAllReduce, ncclCommDestroy). ncclGroupEnd takes as
 * long as the all-reduce would at the bus bandwidth the state file names (FAKE_NVML_STATE, key
 * nccl.busbw in GB/s, default 900: comfortably above every floor): time = bytes * 2(n-1)/n / busbw, the nccl-tests definition.
 * nccl.fail=1 makes ncclCommInitAll fail (ncclSystemError).
 * Signatures follow https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api.html (nccl.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ncclSuccess 0
#define ncclSystemError 2
#define ncclInvalidArgument 4

struct fake_comm { int rank, n; };
static size_t pending_bytes;
static int pending_n;

static double state_double(const char *key, double dflt) {
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *f = path ? fopen(path, "r") : NULL;
    double v = dflt;
    char line[512];
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == '=') v = atof(line + n + 1);
    if (f) fclose(f);
    return v;
}
static size_t type_size(int t) {
    switch (t) { case 0: case 1: return 1; case 6: case 9: return 2; case 4: case 5: case 8: return 8; default: return 4; }
}

int ncclGetVersion(int *v) { if (!v) return ncclInvalidArgument; *v = 22105; return ncclSuccess; }
const char *ncclGetErrorString(int r) {
    switch (r) { case ncclSuccess: return "no error"; case ncclSystemError: return "unhandled system error";
    case ncclInvalidArgument: return "invalid argument"; default: return "unknown error"; }
}
int ncclCommInitAll(struct fake_comm **comms, int ndev, const int *devlist) {
    (void)devlist;
    if (!comms || ndev < 1) return ncclInvalidArgument;
    if (state_double("nccl.fail", 0) != 0) return ncclSystemError;
    for (int i = 0; i < ndev; i++) {
        comms[i] = malloc(sizeof **comms);
        comms[i]->rank = i; comms[i]->n = ndev;
    }
    return ncclSuccess;
}
int ncclCommDestroy(struct fake_comm *comm) { free(comm); return ncclSuccess; }
int ncclGroupStart(void) { pending_bytes = 0; pending_n = 0; return ncclSuccess; }
int ncclAllReduce(const void *send, void *recv, size_t count, int datatype, int op, struct fake_comm *comm,
                  void *stream) {
    (void)op; (void)stream;
    if (!send || !recv || !comm) return ncclInvalidArgument;
    if (comm->rank == 0) { pending_bytes = count * type_size(datatype); pending_n = comm->n; }
    return ncclSuccess;
}
int ncclGroupEnd(void) {
    if (pending_n > 1) {
        double busbw = state_double("nccl.busbw", 900.0) * 1e9;
        double seconds = (double)pending_bytes * 2.0 * (pending_n - 1) / pending_n / busbw;
        struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
        nanosleep(&ts, NULL);
    }
    pending_n = 0;
    return ncclSuccess;
}
