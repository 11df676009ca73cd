/* prep/slurmpod (PrEpPlugins=slurmpod): slurmd's Prolog and Epilog, asked of the worker's health agent
 * from inside slurmd, with no process started.
 *
 * With Prolog=/Epilog= programs (PrEpPlugins=script), slurmd forks and execs each hook, reads its output
 * until end of file, polls waitpid from 10 ms, and then sleeps 10 ms between SIGTERM and SIGKILL to the
 * hook's process group (run_command() and _kill_pg() in Slurm's src/common/run_command.c). That alone
 * costs a job more than asking the agent. This plugin sends the agent the request the hook program
 * (slurmpod_hook.c) would, from the job's fields slurmd hands a PrEp plugin, and returns the hook's exit
 * code as slurmd takes a script's: a wait status, non-zero failing the Prolog or Epilog.
 *
 * When the agent does not answer in time (no socket, busy, a refusal, an answer it cannot read), it runs
 * the Python hook of the same name, as the hook program does, in its own process group, killed when it
 * outlives its own deadline, so the node never goes unchecked and slurmd never waits past a bound.
 *
 * A job's --comment and --extra (where a job asks to skip checks) reach a PrEp plugin only inside the
 * job credential, whose layout is internal to Slurm. So the request says it lacks them ("job_fields":
 * false); the hook looks them up only when a check a job may skip has failed (prolog_epilog/main.py).
 *
 * slurmctld loads PrEpPlugins too: there this plugin asks for nothing (no PrologSlurmctld or
 * EpilogSlurmctld).
 * Ref: https://slurm.schedmd.com/prep_plugins.html
 * Ref: https://slurm.schedmd.com/prolog_epilog.html
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/spank.h> /* slurm_info(), slurm_error(): libslurm's log, as slurmd's own lines */

#include "slurmd_job_env.h"
#include "slurmpod_agent_ask.h"

#ifndef FALLBACK_DIR
#define FALLBACK_DIR "/opt/slurmpod/bin"
#endif

const char plugin_name[] = "slurmpod: Prolog and Epilog asked of the health agent";
const char plugin_type[] = "prep/slurmpod";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;


/* src/interfaces/prep.h */
enum prep_call { PREP_REGISTER_CALLBACKS = 0, PREP_PROLOG, PREP_EPILOG, PREP_PROLOG_SLURMCTLD, PREP_EPILOG_SLURMCTLD };

struct hook {
    const char *name;     /* the protocol's "hook", and SLURM_SCRIPT_CONTEXT's prefix */
    const char *program;  /* the Python hook in FALLBACK_DIR */
    double wait_s;        /* for the agent (SLURMPOD_HEALTH_AGENT_WAIT overrides): half of config.DEFAULT_DEADLINES */
    double fallback_s;    /* for the Python hook: its own deadline (config.DEFAULT_DEADLINES) and 5 s */
};

/* The Python hooks' own deadlines (config.DEFAULT_DEADLINES: 20 s, 30 s) and 5 s; the tests build shorter. */
#ifndef PROLOG_FALLBACK_S
#define PROLOG_FALLBACK_S 25.0
#endif
#ifndef EPILOG_FALLBACK_S
#define EPILOG_FALLBACK_S 35.0
#endif

static const struct hook PROLOG = {"prolog", "slurmpod-prolog", 10.0, PROLOG_FALLBACK_S};
static const struct hook EPILOG = {"epilog", "slurmpod-epilog", 15.0, EPILOG_FALLBACK_S};

#define MAX_VARS 64

/* The job's variables, as Slurm's script PrEp plugin names them (its _build_env), that the hooks read. */
struct vars {
    char *entries[MAX_VARS + 1];
    int count;
};

static void add(struct vars *v, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(struct vars *v, const char *name, const char *fmt, ...)
{
    if (v->count >= MAX_VARS)
        return;
    char *value = NULL, *entry = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&value, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    n = asprintf(&entry, "%s=%s", name, value);
    free(value);
    if (n < 0)
        return;
    v->entries[v->count++] = entry;
    v->entries[v->count] = NULL;
}

static void add_entry(struct vars *v, const char *entry)
{
    if (v->count >= MAX_VARS || entry == NULL)
        return;
    char *copy = strdup(entry);
    if (copy == NULL)
        return;
    v->entries[v->count++] = copy;
    v->entries[v->count] = NULL;
}

static void free_vars(struct vars *v)
{
    for (int i = 0; i < v->count; i++)
        free(v->entries[i]);
    v->count = 0;
}

static void job_vars(struct vars *v, const struct hook *h, const job_env_t *e)
{
    add(v, "SLURM_JOB_ID", "%u", JOB_ID(e));
    add(v, "SLURM_JOBID", "%u", JOB_ID(e));
    add(v, "SLURM_JOB_UID", "%u", (unsigned)e->uid);
    add(v, "SLURM_JOB_GID", "%u", (unsigned)e->gid);
    add(v, "SLURM_SCRIPT_CONTEXT", "%s_slurmd", h->name);
    if (e->partition != NULL)
        add(v, "SLURM_JOB_PARTITION", "%s", e->partition);
    if (e->node_list != NULL)
        add(v, "SLURM_JOB_NODELIST", "%s", e->node_list);
    /* The job's GPUs on this node: CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS (gres/gpu's prolog environment). */
    for (char **g = e->gres_job_env; g != NULL && *g != NULL; g++) {
        const char *eq = strchr(*g, '=');
        if (eq != NULL && agent_carried(*g, (size_t)(eq - *g)))
            add_entry(v, *g);
    }
}

/* Each line of `text` into slurmd's log, error level when the hook failed. */
static void log_lines(const struct hook *h, uint32_t job_id, int failed, const char *text, size_t len)
{
    while (len > 0) {
        const char *nl = memchr(text, '\n', len);
        size_t n = nl != NULL ? (size_t)(nl - text) : len;
        if (n > 0) {
            if (failed)
                slurm_error("prep/slurmpod: %s job %u: %.*s", h->name, job_id, (int)n, text);
            else
                slurm_info("prep/slurmpod: %s job %u: %.*s", h->name, job_id, (int)n, text);
        }
        if (nl == NULL)
            break;
        len -= n + 1;
        text = nl + 1;
    }
}

static int wait_status(int code)
{
    return code == 0 ? SLURM_SUCCESS : W_EXITCODE(code, 0);
}

/* Whether `pid` (our child) has exited by `deadline`, leaving it unreaped. Ref: pidfd_open(2), waitid(2). */
static int exited_by(pid_t pid, double deadline)
{
    int pidfd = pidfd_open(pid, 0);
    int exited = 0;
    for (;;) {
        siginfo_t info;
        memset(&info, 0, sizeof info);
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
            exited = 1;
            break;
        }
        double left = deadline - agent_now();
        if (left <= 0)
            break;
        if (pidfd >= 0) {
            struct pollfd p = {.fd = pidfd, .events = POLLIN};
            poll(&p, 1, (int)(left * 1000) + 1);
        } else {
            usleep(left < 0.01 ? (useconds_t)(left * 1e6) : 10000);
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    return exited;
}

/* The Python hook, in its own process group, with the job's variables and the agent switched off; its
 * output goes to slurmd's log. Killed (the whole group) once it outlives h->fallback_s. */
static int fall_back(const struct hook *h, uint32_t job_id, const struct vars *job)
{
    struct vars env = {.count = 0};
    for (int i = 0; i < job->count; i++)
        add_entry(&env, job->entries[i]);
    add_entry(&env, "SLURMPOD_HEALTH_AGENT_SOCKET=");
    add_entry(&env, "SLURMPOD_JOB_FIELDS=lookup");
    char path[256];
    snprintf(path, sizeof path, "%s/%s", FALLBACK_DIR, h->program);
    char *const argv[] = {path, NULL};
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
        free_vars(&env);
        slurm_error("prep/slurmpod: %s job %u: pipe: %s", h->name, job_id, strerrordesc_np(errno));
        return W_EXITCODE(1, 0);
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDERR_FILENO);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* none of slurmd's descriptors */
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, path, &fa, &attr, argv, env.entries);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(out[1]);
    free_vars(&env);
    if (rc != 0) {
        close(out[0]);
        slurm_error("prep/slurmpod: %s job %u: cannot run %s: %s", h->name, job_id, path, strerrordesc_np(rc));
        return W_EXITCODE(1, 0);
    }
    double deadline = agent_now() + h->fallback_s;
    char *text = malloc(AGENT_MAX_STDERR);
    size_t cap = text != NULL ? AGENT_MAX_STDERR : 0;
    size_t len = 0;
    int timed_out = 0;
    for (;;) {
        double left = deadline - agent_now();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        int n = poll(&p, 1, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        char chunk[4096];
        ssize_t got = read(out[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; /* end of file: the hook (and all it started with its output) is done */
        size_t keep = (size_t)got < cap - len ? (size_t)got : cap - len;
        if (keep > 0)
            memcpy(text + len, chunk, keep);
        len += keep;
    }
    close(out[0]);
    /* Its output closed; its exit follows at once. The group is killed while the hook is still unreaped
     * (a zombie keeps its pid, so the group's id cannot have been taken by another process), taking
     * whatever it left behind, as slurmd's run_command() does; then it is reaped. */
    if (!timed_out && !exited_by(pid, deadline))
        timed_out = 1;
    kill(-pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    int code = timed_out ? 1 : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (text != NULL)
        log_lines(h, job_id, code != 0, text, len);
    free(text);
    if (timed_out)
        slurm_error("prep/slurmpod: %s job %u: %s ran past %.0f s and was killed", h->name, job_id, path,
                    h->fallback_s);
    return wait_status(code);
}

static int run(const struct hook *h, const job_env_t *e)
{
    uint32_t job_id = JOB_ID(e);
    struct vars job = {.count = 0};
    job_vars(&job, h, e);
    const char *path = getenv("SLURMPOD_HEALTH_AGENT_SOCKET");
    if (path == NULL)
        path = AGENT_DEFAULT_SOCKET;
    int code = -1;
    const char *why = NULL;
    /* SLURMPOD_HEALTH_AGENT_WAIT in slurmd's environment, as the hook program reads it in its own. */
    double wait_s = h->wait_s;
    const char *wait_env = getenv("SLURMPOD_HEALTH_AGENT_WAIT");
    if (wait_env != NULL && wait_env[0] != '\0') {
        char *end;
        double w = strtod(wait_env, &end);
        if (*end == '\0' && w > 0.0 && w <= 300.0)
            wait_s = w;
        else
            why = "SLURMPOD_HEALTH_AGENT_WAIT is not a number of seconds in (0, 300]";
    }
    if (path[0] != '\0' && why == NULL) {
        struct agent_request *req = malloc(sizeof *req);
        char *findings = malloc(AGENT_MAX_STDERR);
        size_t size = 0;
        if (req == NULL || findings == NULL) {
            why = "out of memory";
        } else {
            agent_request_begin(req, h->name, wait_s, "\"job_fields\":false");
            for (int i = 0; i < job.count; i++) {
                const char *eq = strchr(job.entries[i], '=');
                agent_request_env(req, job.entries[i], (size_t)(eq - job.entries[i]), eq + 1);
            }
            if (!agent_request_end(req))
                why = "the job's variables are larger than a request may be";
            else
                code = agent_ask(path, req, agent_now() + wait_s, findings, &size, &why);
            if (code >= 0)
                log_lines(h, job_id, code != 0, findings, size);
        }
        free(req);
        free(findings);
    }
    if (code < 0) {
        if (why != NULL)
            slurm_info("prep/slurmpod: %s job %u: health agent: %s; running %s", h->name, job_id, why,
                       h->program);
        code = fall_back(h, job_id, &job);
        free_vars(&job);
        return code;
    }
    free_vars(&job);
    return wait_status(code);
}

extern int init(void)
{
    return SLURM_SUCCESS;
}

extern void fini(void)
{
}

extern void prep_p_register_callbacks(void *callbacks)
{
    (void)callbacks;
}

extern int prep_p_prolog(job_env_t *job_env, void *cred)
{
    (void)cred;
    return run(&PROLOG, job_env);
}

extern int prep_p_epilog(job_env_t *job_env, void *cred)
{
    (void)cred;
    return run(&EPILOG, job_env);
}

extern int prep_p_prolog_slurmctld(void *job_ptr, bool *async)
{
    (void)job_ptr;
    *async = false;
    return SLURM_SUCCESS;
}

extern int prep_p_epilog_slurmctld(void *job_ptr, bool *async)
{
    (void)job_ptr;
    *async = false;
    return SLURM_SUCCESS;
}

extern void prep_p_required(int type, bool *required)
{
    *required = (type == PREP_PROLOG || type == PREP_EPILOG);
}
