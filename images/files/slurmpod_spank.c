/* slurmpod_spank.so: the SPANK plugin a worker's plugstack.conf names. In each task, after slurmstepd has
 * switched to the job's user and just before it execs the task (slurm_spank_task_init), it sets the task
 * environment the worker's start rendered and makes the job's scratch dir (slurmpod_task_env.c). In the
 * task's own process: no program runs per task, where a TaskProlog costs a fork and exec and slurmstepd's
 * 10 ms between SIGTERM and SIGKILL to the script's process group (run_command(), _kill_pg()).
 * It never fails a task: what it cannot do is said on the task's stderr and left out.
 * In slurmd itself (slurm_spank_init in S_CTX_SLURMD, called once slurmd has applied CoreSpecCount), it
 * gives slurmd back every CPU of the pod, so that steps and tasks are not bound to the reserved cores
 * (slurmpod_cpus.c).
 * Ref: https://slurm.schedmd.com/spank.html
 */
#include <slurm/spank.h>
#include <string.h>

#include "slurmpod_cpus.h"
#include "slurmpod_task_env.h"

#ifndef EXPORTS_FILE
#define EXPORTS_FILE "/etc/slurmpod/task-prolog.exports" /* well_known.TASK_PROLOG_EXPORTS */
#endif
#ifndef SCRATCH_FILE
#define SCRATCH_FILE "/etc/slurmpod/task-prolog.scratch" /* well_known.TASK_PROLOG_SCRATCH */
#endif

SPANK_PLUGIN(slurmpod, 1);

static int set_in_task(void *ctx, const char *name, const char *value)
{
    return spank_setenv((spank_t)ctx, name, value, 1) == ESPANK_SUCCESS ? 0 : -1;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    int cpus = 0;
    if (spank_context() != S_CTX_SLURMD)
        return ESPANK_SUCCESS;
    int rc = slurmpod_take_pod_cpus(&cpus);
    if (rc != 0)
        slurm_error("slurmpod: slurmd keeps the CPU binding it gave itself: %s", strerror(rc));
    else
        slurm_info("slurmpod: slurmd and the steps it starts may use the pod's %d CPUs", cpus);
    return ESPANK_SUCCESS; /* never keep slurmd from starting */
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    uint32_t job_id = 0;
    if (!spank_remote(sp))
        return ESPANK_SUCCESS;
    if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
        job_id = 0;
    slurmpod_task_env(EXPORTS_FILE, SCRATCH_FILE, job_id, set_in_task, sp, stderr);
    return ESPANK_SUCCESS;
}
