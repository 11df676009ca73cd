/* slurmpod-prolog, slurmpod-epilog, slurmpod-healthcheck: what slurm.conf's Prolog=, Epilog= and
 * HealthCheckProgram= name on a worker. One program; its name says which hook it is.
 *
 * It asks the worker's health agent (`slurmpod daemon health-agent`) to run the hook, over the agent's
 * Unix socket, and exits with the agent's exit code after writing the agent's findings to stderr. So a
 * job pays a process start and one local round trip, not a Python start. When the agent does not
 * answer in time (no socket, nothing listening, busy, a refusal, an answer it cannot read), it runs the
 * Python hook of the same name instead, with the agent switched off for it, so the node never goes
 * unchecked. The wire format is in prolog_epilog/agent/protocol.py.
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
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef FALLBACK_DIR
#define FALLBACK_DIR "/opt/slurmpod/bin"
#endif
#define DEFAULT_SOCKET "/run/slurmpod/health-agent.sock"
#define MAX_REQUEST 65536 /* protocol.MAX_REQUEST_BYTES */
#define MAX_STDERR 65536  /* protocol.MAX_STDERR */
#define MAX_HEAD 256
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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

/* The variables the agent takes from a hook (protocol._ENV_NAME): SLURM_*, SLURMD_*, CUDA_VISIBLE_DEVICES.
 * SLURMPOD_* settings are the pod's, which the agent has already. */
static int carried(const char *entry, size_t name_len)
{
    size_t start;
    if (name_len == 20 && strncmp(entry, "CUDA_VISIBLE_DEVICES", 20) == 0)
        return 1;
    if (name_len > 6 && strncmp(entry, "SLURM_", 6) == 0)
        start = 6;
    else if (name_len > 7 && strncmp(entry, "SLURMD_", 7) == 0)
        start = 7;
    else
        return 0;
    for (size_t i = start; i < name_len; i++) {
        char c = entry[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return 1;
}

struct buf {
    char data[MAX_REQUEST];
    size_t len;
    int full;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->full || n > sizeof b->data - b->len) {
        b->full = 1;
        return;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

/* A JSON string: quotes, backslashes and control characters escaped; other bytes as they are (the agent
 * refuses what is not UTF-8, and this client then falls back). Ref: RFC 8259, section 7. */
static void put_json(struct buf *b, const char *s, size_t n)
{
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(b, esc, 2);
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(b, esc, 6);
        } else {
            put(b, (const char *)&s[i], 1);
        }
    }
    put(b, "\"", 1);
}

/* Wait until fd is ready for events, or the deadline; 1 ready, 0 not. */
static int ready(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - now();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)(left * 1000) + 1);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return 0;
    }
}

static int write_all(int fd, const char *data, size_t len, double deadline)
{
    while (len > 0) {
        if (!ready(fd, POLLOUT, deadline))
            return 0;
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            return 0;
        data += n;
        len -= (size_t)n;
    }
    return 1;
}

/* Read until `want` bytes are in (or, with stop_at_newline, a newline is); returns the count. */
static ssize_t read_some(int fd, char *out, size_t want, int stop_at_newline, double deadline)
{
    size_t got = 0;
    while (got < want) {
        if (stop_at_newline && got > 0 && memchr(out, '\n', got) != NULL)
            break;
        if (!ready(fd, POLLIN, deadline))
            return -1;
        ssize_t n = recv(fd, out + got, want - got, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
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
        path = DEFAULT_SOCKET;
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
    double deadline = now() + wait_s;

    static struct buf req;
    char head[96];
    snprintf(head, sizeof head, "{\"v\":1,\"hook\":\"%s\",\"deadline_s\":%.3f,\"env\":{", h->name, wait_s);
    put(&req, head, strlen(head));
    int first = 1;
    for (char **e = environ; *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        if (eq == NULL || !carried(*e, (size_t)(eq - *e)))
            continue;
        if (!first)
            put(&req, ",", 1);
        first = 0;
        put_json(&req, *e, (size_t)(eq - *e));
        put(&req, ":", 1);
        put_json(&req, eq + 1, strlen(eq + 1));
    }
    put(&req, "}}\n", 3);
    if (req.full)
        return fall_back(h, "the job's environment is larger than a request may be");

    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
        return fall_back(h, "socket path too long");
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return fall_back(h, strerror(errno));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int err = errno;
        close(fd);
        /* No socket: the agent is off on this worker, or not started yet. Nothing to say. */
        return fall_back(h, err == ENOENT ? NULL : strerror(err));
    }
    if (!write_all(fd, req.data, req.len, deadline)) {
        close(fd);
        return fall_back(h, "request not taken in time");
    }
    static char answer[MAX_HEAD + MAX_STDERR];
    ssize_t got = read_some(fd, answer, MAX_HEAD, 1, deadline);
    char *nl = got > 0 ? memchr(answer, '\n', (size_t)got) : NULL;
    if (nl == NULL) {
        close(fd);
        return fall_back(h, got < 0 ? "no answer in time" : "no answer");
    }
    int code = -1, size = -1, used = 0;
    *nl = '\0';
    if (sscanf(answer, "{\"v\":1,\"ok\":true,\"exit\":%d,\"stderr_len\":%d}%n", &code, &size, &used) != 2 ||
        answer[used] != '\0' || code < 0 || code > 255 || size < 0 || size > MAX_STDERR) {
        close(fd);
        /* A refusal ({"ok":false,...}: busy, bad request) or a line this client does not know. */
        return fall_back(h, strstr(answer, "\"ok\":false") ? "refused" : "answer not understood");
    }
    size_t have = (size_t)got - (size_t)(nl + 1 - answer);
    char *body = nl + 1;
    if (have < (size_t)size) {
        ssize_t more = read_some(fd, body + have, (size_t)size - have, 0, deadline);
        if (more < 0 || have + (size_t)more < (size_t)size) {
            close(fd);
            return fall_back(h, "answer cut short");
        }
    }
    close(fd);
    if (size > 0 && write(STDERR_FILENO, body, (size_t)size) < 0) {
        /* slurmd closed our stderr: the exit code is what counts */
    }
    return code;
}
