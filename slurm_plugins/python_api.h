/*
 * python_api.h - what the embedded Python provides to job_submit_slurmpod.c.
 *
 * cffi's embedding API turns these declarations into C functions that start the interpreter on their
 * first call and run the Python functions slurmpod.slurm_plugins.embedded registers for them. Each
 * returns SP_OK only when it filled in its answer; cffi returns -1 when the Python side raised.
 * Ref: https://cffi.readthedocs.io/en/stable/embedding.html
 */
#ifndef SLURMPOD_PYTHON_API_H
#define SLURMPOD_PYTHON_API_H

#include <stddef.h>

#include "fastpath.h"
#include "slurmpod_job.h"

#define SP_OK 0x51504F4B /* "QPOK": embedded.OK */

/* init(): load and validate the policy; err gets why it is unusable (empty when it is fine). */
int slurmpod_py_start(const char *policy_path, char *err, size_t errlen);
/* job_submit() / job_modify(), when the fast path left the job to Python. */
int slurmpod_py_decide(const slurmpod_req_t *req, slurmpod_out_t *out);
/* Fill *fast (zeroed) from the policy as loaded now: ok = 0 when it cannot be decided in C. */
int slurmpod_py_compile(slurmpod_fast_t *fast);

#endif
