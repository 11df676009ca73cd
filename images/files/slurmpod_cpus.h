/* slurmpod_cpus.h - slurmd's CPUs are the pod's. The SPANK plugin (slurmpod_spank.c) calls it in slurmd;
 * the unit tests call it from a harness. No Slurm header here.
 */
#ifndef SLURMPOD_CPUS_H
#define SLURMPOD_CPUS_H

/* Lets the calling thread run on every CPU its cpuset allows (the kernel keeps only those). Returns 0 and
 * the number of CPUs it now has in *cpus, or an errno and leaves the thread's CPUs as they were. */
__attribute__((visibility("hidden"))) int slurmpod_take_pod_cpus(int *cpus);

#endif
