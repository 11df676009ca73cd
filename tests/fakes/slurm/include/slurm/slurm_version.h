/* Test stand-in for Slurm's generated slurm_version.h: only what job_submit_slurmpod.so uses. */
#ifndef SLURMPOD_FAKE_SLURM_VERSION_H
#define SLURMPOD_FAKE_SLURM_VERSION_H
#define SLURM_VERSION_NUM(a, b, c) (((a) << 16) + ((b) << 8) + (c))
#define SLURM_VERSION_NUMBER SLURM_VERSION_NUM(24, 11, 5)
#endif
