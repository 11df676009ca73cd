/* Test stand-in for Slurm's slurm_errno.h: the return codes job_submit_slurmpod.so uses, with the values
 * of Slurm 24.11's enum (the plugin names them; the real header gives the real values at build time).
 * Ref: https://github.com/SchedMD/slurm/blob/slurm-24-11-5-1/slurm/slurm_errno.h */
#ifndef SLURMPOD_FAKE_SLURM_ERRNO_H
#define SLURMPOD_FAKE_SLURM_ERRNO_H
#define SLURM_SUCCESS 0
#define SLURM_ERROR -1
enum {
    ESLURM_INVALID_PARTITION_NAME = 2000,
    ESLURM_ACCESS_DENIED = 2002,
    ESLURM_INVALID_NODE_COUNT = 2006,
    ESLURM_PATHNAME_TOO_LONG = 2012,
    ESLURM_INVALID_ACCOUNT = 2045,
    ESLURM_INVALID_TIME_LIMIT = 2051,
    ESLURM_INVALID_QOS = 2066,
    ESLURM_INVALID_GRES = 2072,
    ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE = 2178,
};
#endif
