/* The few names of Slurm's installed slurm/slurm.h that prep_slurmpod.c uses, for building it on a host
 * without libslurm-dev (tests/unit/prolog_epilog/agent/test_prep_plugin.py). The images build it against
 * their own Slurm's headers. */
#ifndef PREP_STUB_SLURM_H
#define PREP_STUB_SLURM_H
#include <stdint.h>
#define SLURM_VERSION_NUM(a, b, c) (((a) << 16) + ((b) << 8) + (c))
#define SLURM_VERSION_NUMBER SLURM_VERSION_NUM(24, 11, 5)
#define SLURM_SUCCESS 0
typedef struct {
    uint32_t job_id;
    uint32_t step_het_comp;
    uint32_t step_id;
} slurm_step_id_t;
#endif
