/* slurmd's side of prep_slurmpod.c, for its tests: loads the plugin, calls prep_p_prolog or
 * prep_p_epilog with a job as slurmd 24.11 hands it (job_env_t, src/slurmd/slurmd/slurmd.h), and prints
 * the plugin's log lines, then the return code and the seconds the call took. It holds descriptor 7 open
 * without FD_CLOEXEC, as slurmd holds descriptors of its own, which no hook may inherit.
 *
 * Built against prep_stub/ (Slurm 24.11's names) and images/files/slurmd_job_env.h, the layout the plugin
 * itself is built with.
 *
 * Usage: prep_harness PLUGIN prolog|epilog JOB_ID */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "slurmd_job_env.h"


static void say(const char *level, const char *format, va_list ap)
{
    printf("%s: ", level);
    vprintf(format, ap);
    printf("\n");
    fflush(stdout);
}

void slurm_info(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    say("info", format, ap);
    va_end(ap);
}

void slurm_error(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    say("error", format, ap);
    va_end(ap);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int held = open("/dev/null", O_RDONLY);
    if (held < 0 || dup2(held, 7) != 7)
        return 2;
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (plugin == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    const char *sym = strcmp(argv[2], "prolog") == 0 ? "prep_p_prolog" : "prep_p_epilog";
    int (*call)(job_env_t *, void *) = (int (*)(job_env_t *, void *))dlsym(plugin, sym);
    if (call == NULL)
        return 2;
    char *gres[] = {"CUDA_VISIBLE_DEVICES=0,1", "SLURM_JOB_GPUS=0,1", "NOT_A_HOOK_VARIABLE=x", NULL};
    job_env_t job = {.gres_job_env = gres, .partition = "main", .node_list = "gpu-[0-1]", .uid = 2000, .gid = 2000};
    JOB_ID(&job) = (uint32_t)atoi(argv[3]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = call(&job, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("rc=%d seconds=%.3f\n", rc, (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
    return 0;
}
