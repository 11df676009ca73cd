/* slurmpod-prolog, slurmpod-epilog, slurmpod-healthcheck: what slurm.conf's Prolog=, Epilog= and
 * HealthCheckProgram= name on a worker. One program; its name says which hook it is.
 *
 * It asks the worker's health agent (`slurmpod daemon health-agent`) to run the hook, over the agent's
 * Unix socket, and exits with the agent's exit code after writing the agent's findings to stderr. So a
 * job pays a process start and one local round trip, not a Python start. When the agent does not
 * answer in time (no socket, nothing listening, busy, a refusal, an answer it cannot read), it runs the
 * Python hook of the same name instead, with the agent switched off for it, so the node never goes
 * unchecked. The request and its answer: slurmpod_agent_ask.c.
 *
 * slurmd reads a hook's output until end of file, then reaps it with waitpid(WNOHANG), sleeping 10 ms,
 * then 20 ms, while it is not yet reapable (run_command_poll_child and run_command_waitpid_timeout in
 * Slurm's src/common/run_command.c). A process's files close a moment before its exit can be waited
 * for, so nearly every hook paid that sleep. A child therefore holds this hook's stdout and stderr until
 * the hook has exited (its pidfd reads), and slurmd's first waitpid finds it.
 *
 * Environment (the pod's, as slurmd passes it on):
 *   SLURMPOD_HEALTH_AGENT_SOCKET  the socket; empty: do not ask, run the Python hook
 *   SLURMPOD_HEALTH_AGENT_WAIT    seconds to wait for the agent (default: half the hook's deadline)
 * Ref: https://slurm.schedmd.com/prolog_epilog.html (no arguments; exit code; root; SLURM_* variables)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "slurmpod_agent_ask.h"

#ifndef FALLBACK_DIR
#define FALLBACK_DIR "/opt/slurmpod/bin"
#endif
#define HOLD_MAX_MS 300000 /* protocol.MAX_DEADLINE_S: past it slurmd has killed the hook's group anyway */

extern char **environ;

struct hook {
    const char *program; /* argv[0]'s last component */
    const char *name;    /* the protocol's "hook" */
    double wait_s;       /* half of config.DEFAULT_DEADLINES for its context */
};

static const struct hook HOOKS[] = {
    {"slurmpod-prolog", "prolog", 10.0},
    {"slurmpod-epilog", "epilog", 15.0},
    {"slurmpod-healthcheck", "healthcheck", 25.0},
};

/* Run the Python hook in this process's place; only returns if that fails. */
static int fall_back(const struct hook *h, const char *why)
{
    char path[256];
    if (why != NULL)
        fprintf(stderr, "slurmpod %s: health agent: %s; running the checks here\n", h->name, why);
    snprintf(path, sizeof path, "%s/%s", FALLBACK_DIR, h->program);
    setenv("SLURMPOD_HEALTH_AGENT_SOCKET", "", 1);
    char *const args[] = {path, NULL};
    execv(path, args);
    fprintf(stderr, "slurmpod %s: cannot run %s: %s\n", h->name, path, strerror(errno));
    return 1;
}

/* Fork a child that keeps stdout and stderr open until this process has exited, then exits itself. It
 * holds nothing else: not stdin, not the agent's socket (opened later). Without a pidfd (Linux before
 * 5.3) or a fork, the hook runs as it would without it. Ref: pidfd_open(2), close_range(2). */
static void hold_output_until_exit(void)
{
    int pidfd = pidfd_open(getpid(), 0);
    if (pidfd < 0)
        return;
    pid_t holder = fork();
    if (holder != 0) {
        close(pidfd);
        return;
    }
    if (pidfd != 3) {
        dup2(pidfd, 3);
        close(pidfd);
    }
    close(STDIN_FILENO);
    close_range(4, ~0U, 0);
    struct pollfd p = {.fd = 3, .events = POLLIN};
    while (poll(&p, 1, HOLD_MAX_MS) < 0 && errno == EINTR)
        ;
    _exit(0);
}

int main(int argc, char **argv)
{
    (void)argc;
    hold_output_until_exit();
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    const struct hook *h = NULL;
    for (size_t i = 0; i < sizeof HOOKS / sizeof HOOKS[0]; i++)
        if (strcmp(prog, HOOKS[i].program) == 0)
            h = &HOOKS[i];
    if (h == NULL) {
        fprintf(stderr, "slurmpod hook: program name %s is none of slurmpod-prolog, slurmpod-epilog, "
                        "slurmpod-healthcheck\n", prog);
        return 2;
    }
    const char *path = getenv("SLURMPOD_HEALTH_AGENT_SOCKET");
    if (path == NULL)
        path = AGENT_DEFAULT_SOCKET;
    if (path[0] == '\0')
        return fall_back(h, NULL);
    double wait_s = h->wait_s;
    const char *wait_env = getenv("SLURMPOD_HEALTH_AGENT_WAIT");
    if (wait_env != NULL && wait_env[0] != '\0') {
        char *end;
        double w = strtod(wait_env, &end);
        if (*end != '\0' || !(w > 0.0 && w <= 300.0))
            return fall_back(h, "SLURMPOD_HEALTH_AGENT_WAIT is not a number of seconds in (0, 300]");
        wait_s = w;
    }
    double deadline = agent_now() + wait_s;

    static struct agent_request req;
    agent_request_begin(&req, h->name, wait_s, NULL);
    for (char **e = environ; *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        if (eq != NULL)
            agent_request_env(&req, *e, (size_t)(eq - *e), eq + 1);
    }
    if (!agent_request_end(&req))
        return fall_back(h, "the job's environment is larger than a request may be");
    static char findings[AGENT_MAX_STDERR];
    size_t size = 0;
    const char *why = NULL;
    int code = agent_ask(path, &req, deadline, findings, &size, &why);
    if (code < 0)
        return fall_back(h, why);
    if (size > 0 && write(STDERR_FILENO, findings, size) < 0) {
        /* slurmd closed our stderr: the exit code is what counts */
    }
    return code;
}
