/* Test stand-in for Slurm's slurm_errno.h: the two return codes a job_submit plugin uses. */
#ifndef SLURMPOD_FAKE_SLURM_ERRNO_H
#define SLURMPOD_FAKE_SLURM_ERRNO_H
#define SLURM_SUCCESS 0
#define SLURM_ERROR -1
#endif
