/* slurmd runs on the pod's CPUs, not on the cores CoreSpecCount reserves.
 * A worker's CoreSpecCount counts the host's cores outside the pod's CPU limit or cpuset, so that Slurm
 * allocates only what the pod may use. With specialized cores and no cgroup core confinement, slurmd binds
 * itself to those cores (to the others with TaskPluginParam=SlurmdOffSpec), and under TaskPlugin=task/none
 * every slurmstepd and task it starts inherits the binding: the cores least meant for jobs, the same ones on
 * every pod of the host. The pod's CPUs are Kubernetes' to place (its cpuset and CPU quota).
 * Ref: https://slurm.schedmd.com/core_spec.html, https://slurm.schedmd.com/slurm.conf.html#OPT_SlurmdOffSpec,
 * sched_setaffinity(2) (a mask is cut to the caller's cpuset).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <unistd.h>

#include "slurmpod_cpus.h"

int slurmpod_take_pod_cpus(int *cpus)
{
    long configured = sysconf(_SC_NPROCESSORS_CONF);
    size_t count = configured > CPU_SETSIZE ? (size_t)configured : CPU_SETSIZE;
    size_t size = CPU_ALLOC_SIZE(count);
    cpu_set_t *mask = CPU_ALLOC(count);
    int rc = 0;

    if (!mask)
        return ENOMEM;
    CPU_ZERO_S(size, mask);
    for (size_t cpu = 0; cpu < count; cpu++)
        CPU_SET_S(cpu, size, mask);
    if (sched_setaffinity(0, size, mask) != 0 || sched_getaffinity(0, size, mask) != 0)
        rc = errno;
    else
        *cpus = CPU_COUNT_S(size, mask);
    CPU_FREE(mask);
    return rc;
}
