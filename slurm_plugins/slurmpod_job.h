/*
 * slurmpod_job.h - the job as job_submit_slurmpod.c hands it over (slurmpod_req_t), and the answer it
 * writes back into job_desc (slurmpod_out_t).
 *
 * Shared by the plugin, its C fast path (fastpath.c) and its Python side: build_plugin gives these
 * declarations to cffi's cdef with the preprocessor lines left out, so struct sizes are literals here
 * and the SP_SET_* bits have their Python twin in embedded.SET_BITS.
 * Ref: https://slurm.schedmd.com/job_submit_plugins.html, https://cffi.readthedocs.io/en/stable/cdef.html
 */
#ifndef SLURMPOD_JOB_H
#define SLURMPOD_JOB_H

#include <stdint.h>

/* job_desc_msg_t's fields the policy reads, copied as they are (NO_VAL / NO_VAL16 when unset). For
 * job_modify: the job's record merged with the change, and moves_tier set when the change names a
 * partition, QoS or account other than the job's. */
typedef struct {
    uint32_t user_id, group_id, job_id, is_modify, moves_tier;
    uint32_t min_nodes, max_nodes, num_tasks, time_limit, req_switch, wait4switch;
    uint32_t segment_size, shared, requeue, warn_signal, warn_time, warn_flags;
    const char *account, *partition, *qos, *tres_per_node, *tres_per_job, *features, *comment, *name;
    const char *tres_per_task, *tres_per_socket;
} slurmpod_req_t;

typedef struct {
    uint32_t verdict;   /* 0 accept, 1 modify, 2 reject */
    uint32_t set;       /* SP_SET_* bits: which fields below to write into job_desc */
    uint32_t refusal;   /* SP_REFUSE_*: what kind of refusal, for the Slurm error code (reject only) */
    uint32_t time_limit, requeue, warn_signal, warn_time, warn_flags, req_switch, wait4switch;
    uint32_t segment_size, shared;
    char partition[256], qos[256], tres_per_node[1024];
    char message[1024];
    char log[2048];
    char user[64];      /* the caller's name as Python looked it up (within its deadline), for the C cache */
} slurmpod_out_t;

#define SP_VERDICT_ACCEPT 0
#define SP_VERDICT_MODIFY 1
#define SP_VERDICT_REJECT 2

/* What kind of refusal (the shim returns the matching ESLURM_* code; Python twin: outcome.Refusal). */
#define SP_REFUSE_POLICY 0
#define SP_REFUSE_ACCESS 1
#define SP_REFUSE_TIME 2
#define SP_REFUSE_GRES 3
#define SP_REFUSE_TOPOLOGY 4
#define SP_REFUSE_TOO_LONG 5

#define SP_SET_PARTITION (1u << 0)
#define SP_SET_QOS (1u << 1)
#define SP_SET_TIME_LIMIT (1u << 2)
#define SP_SET_REQUEUE (1u << 3)
#define SP_SET_WARN_SIGNAL (1u << 4)
#define SP_SET_WARN_TIME (1u << 5)
#define SP_SET_WARN_FLAGS (1u << 6)
#define SP_SET_REQ_SWITCH (1u << 7)
#define SP_SET_WAIT4SWITCH (1u << 8)
#define SP_SET_SEGMENT_SIZE (1u << 9)
#define SP_SET_TRES_PER_NODE (1u << 10)
#define SP_SET_SHARED (1u << 11)

#endif
