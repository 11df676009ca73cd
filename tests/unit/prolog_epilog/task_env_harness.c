/* task_env_harness: images/files/slurmpod_task_env.c as the SPANK plugin calls it in a task, with the
 * task's environment replaced by stdout: `task_env_harness EXPORTS SCRATCH JOB_ID` prints one
 * `export NAME=value` line for each variable it sets, and what it says to the task on stderr.
 */
#include <stdio.h>
#include <stdlib.h>

#include "slurmpod_task_env.h"

static int print_set(void *ctx, const char *name, const char *value)
{
    (void)ctx;
    return printf("export %s=%s\n", name, value) > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: task_env_harness EXPORTS SCRATCH JOB_ID\n");
        return 2;
    }
    int set = slurmpod_task_env(argv[1], argv[2], (uint32_t)strtoul(argv[3], NULL, 10), print_set, NULL, stderr);
    return set >= 0 ? 0 : 1;
}
