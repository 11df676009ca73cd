/* One hook request to the worker's health agent, over its Unix socket: what slurmpod_hook.c (the
 * Prolog=/Epilog=/HealthCheckProgram= program) and prep_slurmpod.c (slurmd's PrEp plugin) share.
 * The wire format is in prolog_epilog/agent/protocol.py. */
#ifndef SLURMPOD_AGENT_ASK_H
#define SLURMPOD_AGENT_ASK_H

#include <stddef.h>

/* Not exported from the PrEp plugin: slurmd's namespace holds only what Slurm looks up. */
#define AGENT_API __attribute__((visibility("hidden")))

#define AGENT_DEFAULT_SOCKET "/run/slurmpod/health-agent.sock"
#define AGENT_MAX_REQUEST 65536 /* protocol.MAX_REQUEST_BYTES */
#define AGENT_MAX_STDERR 65536  /* protocol.MAX_STDERR */

struct agent_request {
    char data[AGENT_MAX_REQUEST];
    size_t len;
    int full;  /* larger than a request may be: not sent */
    int first; /* no variable written yet */
};

/* Seconds on CLOCK_MONOTONIC. */
AGENT_API double agent_now(void);

/* Whether the agent takes this variable from a hook (protocol._ENV_NAME): SLURM_*, SLURMD_*,
 * CUDA_VISIBLE_DEVICES. */
AGENT_API int agent_carried(const char *name, size_t name_len);

/* {"v":1,"hook":HOOK,"deadline_s":WAIT,[EXTRA,]"env":{ ... then agent_request_env per variable, then
 * agent_request_end. `extra`: members of the request's object besides those, as JSON text, or NULL. */
AGENT_API void agent_request_begin(struct agent_request *r, const char *hook, double wait_s, const char *extra);
/* One variable, if carried; the value as it is (JSON-escaped). */
AGENT_API void agent_request_env(struct agent_request *r, const char *name, size_t name_len, const char *value);
/* 1: complete; 0: too large. */
AGENT_API int agent_request_end(struct agent_request *r);

/* Ask the agent at `path` by `deadline` (agent_now() seconds). Returns the hook's exit code (0-255)
 * with its findings in `findings` (`*findings_len` bytes, at most AGENT_MAX_STDERR: give that much
 * room), or -1 with `*why` saying why not; `*why` is NULL when nothing listens there (the agent is off
 * or not started yet: nothing to report). */
AGENT_API int agent_ask(const char *path, const struct agent_request *r, double deadline, char *findings,
              size_t *findings_len, const char **why);

#endif
