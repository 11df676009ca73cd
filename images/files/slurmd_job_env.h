/* slurmd's job_env_t, as prep_slurmpod.c is handed it (and its tests' harness hands it): include after
 * <slurm/slurm.h>. JOB_ID(e) is the job's id in either layout. */
#ifndef SLURMD_JOB_ENV_H
#define SLURMD_JOB_ENV_H

#include <stdint.h>
#include <sys/types.h>

/* slurmd's job_env_t (src/slurmd/slurmd/slurmd.h), which it passes to prep_p_prolog and prep_p_epilog.
 * It is not in Slurm's installed headers, and its layout changed between releases: only the releases
 * written out here build. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0) && SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(26, 6, 0)
typedef struct {
    slurm_step_id_t step_id;
    uint32_t derived_ec;
    uint32_t exit_code;
    char **gres_job_env;
    uint32_t het_job_id;
    char *node_aliases;
    char *node_list;
    char *partition;
    char **spank_job_env;
    uint32_t spank_job_env_size;
    uid_t uid;
    gid_t gid;
    char *work_dir;
} job_env_t;
#define JOB_ID(e) ((e)->step_id.job_id)
#elif SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 11, 0) && SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(24, 12, 0)
typedef struct {
    uint32_t derived_ec;
    uint32_t exit_code;
    char **gres_job_env;
    uint32_t het_job_id;
    uint32_t jobid;
    uint32_t step_id;
    char *node_aliases;
    char *node_list;
    char *partition;
    char **spank_job_env;
    uint32_t spank_job_env_size;
    uid_t uid;
    gid_t gid;
    char *work_dir;
} job_env_t;
#define JOB_ID(e) ((e)->jobid)
#else
#error "slurmd_job_env.h: slurmd's job_env_t is written out for Slurm 24.11 and 26.05 only"
#endif

#endif
