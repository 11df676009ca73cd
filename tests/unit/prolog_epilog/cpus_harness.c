/* Runs images/files/slurmpod_cpus.c as slurmd's SPANK init does, after binding itself to one CPU as slurmd
 * binds itself to its specialized cores. Prints the CPU sets before, bound and after, and what it returned.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "slurmpod_cpus.h"

static void print_set(const char *name, const cpu_set_t *set)
{
    printf("%s=", name);
    const char *sep = "";
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, set)) {
            printf("%s%d", sep, cpu);
            sep = ",";
        }
    printf("\n");
}

int main(void)
{
    cpu_set_t start, bound, after;
    int cpus = -1;

    if (sched_getaffinity(0, sizeof(start), &start) != 0)
        return 1;
    CPU_ZERO(&bound);
    for (int cpu = CPU_SETSIZE - 1; cpu >= 0; cpu--)
        if (CPU_ISSET(cpu, &start)) { /* the highest CPU, where slurmd puts CoreSpecCount's first core */
            CPU_SET(cpu, &bound);
            break;
        }
    if (sched_setaffinity(0, sizeof(bound), &bound) != 0 || sched_getaffinity(0, sizeof(bound), &bound) != 0)
        return 1;
    int rc = slurmpod_take_pod_cpus(&cpus);
    if (sched_getaffinity(0, sizeof(after), &after) != 0)
        return 1;
    print_set("start", &start);
    print_set("bound", &bound);
    print_set("after", &after);
    printf("rc=%d cpus=%d\n", rc, cpus);
    return 0;
}
