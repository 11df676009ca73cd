/* One hook request to the worker's health agent: see slurmpod_agent_ask.h. No global state, so
 * slurmd's threads may each ask at once (prep_slurmpod.c). */
#define _GNU_SOURCE
#include "slurmpod_agent_ask.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_HEAD 256

double agent_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int agent_carried(const char *name, size_t name_len)
{
    size_t start;
    if (name_len == 20 && strncmp(name, "CUDA_VISIBLE_DEVICES", 20) == 0)
        return 1;
    if (name_len > 6 && strncmp(name, "SLURM_", 6) == 0)
        start = 6;
    else if (name_len > 7 && strncmp(name, "SLURMD_", 7) == 0)
        start = 7;
    else
        return 0;
    for (size_t i = start; i < name_len; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return 1;
}

static void put(struct agent_request *r, const char *s, size_t n)
{
    if (r->full || n > sizeof r->data - r->len) {
        r->full = 1;
        return;
    }
    memcpy(r->data + r->len, s, n);
    r->len += n;
}

/* A JSON string: quotes, backslashes and control characters escaped; other bytes as they are (the agent
 * refuses what is not UTF-8, and the caller then falls back). Ref: RFC 8259, section 7. */
static void put_json(struct agent_request *r, const char *s, size_t n)
{
    put(r, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(r, esc, 2);
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(r, esc, 6);
        } else {
            put(r, (const char *)&s[i], 1);
        }
    }
    put(r, "\"", 1);
}

void agent_request_begin(struct agent_request *r, const char *hook, double wait_s, const char *extra)
{
    char head[128];
    r->len = 0;
    r->full = 0;
    r->first = 1;
    snprintf(head, sizeof head, "{\"v\":1,\"hook\":\"%s\",\"deadline_s\":%.3f,", hook, wait_s);
    put(r, head, strlen(head));
    if (extra != NULL) {
        put(r, extra, strlen(extra));
        put(r, ",", 1);
    }
    put(r, "\"env\":{", 7);
}

void agent_request_env(struct agent_request *r, const char *name, size_t name_len, const char *value)
{
    if (!agent_carried(name, name_len))
        return;
    if (!r->first)
        put(r, ",", 1);
    r->first = 0;
    put_json(r, name, name_len);
    put(r, ":", 1);
    put_json(r, value, strlen(value));
}

int agent_request_end(struct agent_request *r)
{
    put(r, "}}\n", 3);
    return !r->full;
}

/* Wait until fd is ready for events, or the deadline; 1 ready, 0 not. */
static int ready(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - agent_now();
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

static int fail(int fd, const char **why, const char *what)
{
    if (fd >= 0)
        close(fd);
    *why = what;
    return -1;
}

int agent_ask(const char *path, const struct agent_request *r, double deadline, char *findings,
              size_t *findings_len, const char **why)
{
    *findings_len = 0;
    *why = NULL;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
        return fail(-1, why, "socket path too long");
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return fail(-1, why, strerrordesc_np(errno));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int err = errno;
        /* No socket: the agent is off on this worker, or not started yet. Nothing to say. */
        return fail(fd, why, err == ENOENT ? NULL : strerrordesc_np(err));
    }
    if (!write_all(fd, r->data, r->len, deadline))
        return fail(fd, why, "request not taken in time");
    char head[MAX_HEAD];
    ssize_t got = read_some(fd, head, sizeof head, 1, deadline);
    char *nl = got > 0 ? memchr(head, '\n', (size_t)got) : NULL;
    if (nl == NULL)
        return fail(fd, why, got < 0 ? "no answer in time" : "no answer");
    int code = -1, size = -1, used = 0;
    *nl = '\0';
    if (sscanf(head, "{\"v\":1,\"ok\":true,\"exit\":%d,\"stderr_len\":%d}%n", &code, &size, &used) != 2 ||
        head[used] != '\0' || code < 0 || code > 255 || size < 0 || size > AGENT_MAX_STDERR)
        /* A refusal ({"ok":false,...}: busy, bad request) or a line this client does not know. */
        return fail(fd, why, strstr(head, "\"ok\":false") ? "refused" : "answer not understood");
    size_t have = (size_t)got - (size_t)(nl + 1 - head);
    if (have > (size_t)size)
        return fail(fd, why, "answer not understood");
    memcpy(findings, nl + 1, have);
    if (have < (size_t)size) {
        ssize_t more = read_some(fd, findings + have, (size_t)size - have, 0, deadline);
        if (more < 0 || have + (size_t)more < (size_t)size)
            return fail(fd, why, "answer cut short");
    }
    close(fd);
    *findings_len = (size_t)size;
    return code;
}
