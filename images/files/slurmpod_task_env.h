/* slurmpod_task_env.h - the task environment one task gets: the worker's exports and the job's private
 * scratch dir. The SPANK plugin (slurmpod_spank.c) calls it in each task; the unit tests call it from a
 * harness. No Slurm header here: what it sets goes through the caller's setter.
 */
#ifndef SLURMPOD_TASK_ENV_H
#define SLURMPOD_TASK_ENV_H

#include <stdint.h>
#include <stdio.h>

/* Sets NAME=value in the task's environment; returns 0 when it did. */
typedef int (*slurmpod_setenv_fn)(void *ctx, const char *name, const char *value);

/* Reads the exports file (`export NAME=value` lines, written and validated at worker start) and sets each
 * line; then, when the scratch file ("BASE true|false") is there, makes BASE/job-JOB_ID as this process's
 * user, mode 0700, or accepts one that is already a private directory of this user (another task of the
 * job made it), and sets SLURMPOD_SCRATCH (and TMPDIR with "true") to it. A line it cannot read is left
 * out; a scratch dir it cannot use is named on `err` and left out. Returns how many variables it set. */
__attribute__((visibility("hidden"))) int slurmpod_task_env(const char *exports_path, const char *scratch_path,
                                                           uint32_t job_id, slurmpod_setenv_fn set, void *ctx,
                                                           FILE *err);

#endif
