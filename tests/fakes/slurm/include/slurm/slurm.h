/* Test stand-in for Slurm's slurm.h: the job_desc_msg_t fields job_submit_slurmpod.so reads and writes,
 * with Slurm's names and types (the layout is this file's own; the fake host below uses the same file).
 * Ref: https://github.com/SchedMD/slurm/blob/slurm-24-11-5-1/slurm/slurm.h (struct job_descriptor) */
#ifndef SLURMPOD_FAKE_SLURM_H
#define SLURMPOD_FAKE_SLURM_H
#include <inttypes.h>
#include <stdbool.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurm_version.h>

#define INFINITE16 (0xffff)
#define INFINITE (0xffffffff)
#define NO_VAL16 (0xfffe)
#define NO_VAL (0xfffffffe)

typedef struct job_descriptor {
    char *account, *comment, *features, *name, *partition, *qos;
    char *tres_per_job, *tres_per_node, *tres_per_socket, *tres_per_task;
    uint32_t group_id, job_id, max_nodes, min_nodes, num_tasks, req_switch, time_limit, user_id, wait4switch;
    uint16_t requeue, segment_size, shared, warn_flags, warn_signal, warn_time;
    char **environment;
    uint32_t env_size;
    char *job_id_str;
} job_desc_msg_t;
#endif
