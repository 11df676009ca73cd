/*
 * fastpath.h - the compiled policy the plugin decides from in C, without entering Python.
 *
 * slurmpod.slurm_plugins.fastpath compiles a loaded policy into a slurmpod_fast_t (names as "|a|b|"
 * lists, the constant notes already formatted) and checks every string against these sizes, which are
 * literals because cffi's cdef reads this file too.
 */
#ifndef SLURMPOD_FASTPATH_H
#define SLURMPOD_FASTPATH_H

#include <stdint.h>

#include "slurmpod_job.h"

typedef struct {
    char name[64];
    char partitions[512], qos[512];   /* "|a|b|": matched by any of these partitions or QoS */
    char users[512], accounts[512];   /* access: these users or accounts (when not everyone) */
    uint32_t everyone, has_groups;    /* has_groups: access by group, which only Python can check */
    uint32_t requeue, has_grace, grace_signal, grace_seconds, grace_batch;
    uint32_t has_cap, max_time, clamp;
    char note_requeue[256], note_grace[256];
} slurmpod_fast_tier_t;

typedef struct {
    uint32_t ok;                      /* 1: decide in C what this table covers; 0: every call goes to Python */
    char why[256];                    /* when not ok: why, for slurmctld's log */
    int64_t key_ino, key_mtime_ns, key_size;   /* the policy file this table was compiled from (stat) */
    uint32_t ntiers, has_default, default_tier;
    uint32_t topology_active, gpu_jobs_only;
    char cpu_only[1024];
    slurmpod_fast_tier_t tiers[8];
} slurmpod_fast_t;

/* 1: *out holds the decision (verdict, fields, message, log line), exactly as Python would have
 * answered; 0: ask Python (out may hold a partial answer). */
int slurmpod_fast_decide(const slurmpod_fast_t *t, const slurmpod_req_t *req, const char *user,
                         slurmpod_out_t *out);

#endif
