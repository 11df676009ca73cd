/* slurmpod_task_env.c - the task environment (slurmpod_task_env.h): the rules of prolog_epilog/task_env.py
 * (names A-Z 0-9 _, values of A-Z a-z 0-9 _ . / : , = @ % + ^ -), applied again to the files the
 * worker's start wrote, so an edited file still cannot set anything else. The job id is Slurm's number.
 */
#define _GNU_SOURCE
#include "slurmpod_task_env.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NAME 64     /* task_env.NAME */
#define MAX_VALUE 4096  /* task_env.VALUE */
#define MAX_LINE (7 + MAX_NAME + 1 + MAX_VALUE + 2)
#define SCRATCH_PREFIX "job-"

static int name_ok(const char *s, size_t n)
{
    if (n == 0 || n > MAX_NAME || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

static int value_ok(const char *s, size_t n)
{
    if (n == 0 || n > MAX_VALUE)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("_./:,=@%+^-", c)))
            return 0;
    }
    return 1;
}

/* One line without its newline, at most MAX_LINE bytes; 0 at end of file. A longer line is read to its
 * end and comes back empty, so it is left out rather than split. */
static int read_line(FILE *f, char *buf, size_t size)
{
    if (fgets(buf, (int)size, f) == NULL)
        return 0;
    size_t n = strlen(buf);
    if (n > 0 && buf[n - 1] == '\n') {
        buf[n - 1] = '\0';
        return 1;
    }
    if (feof(f))
        return 1;
    int c;
    while ((c = fgetc(f)) != EOF && c != '\n')
        ;
    buf[0] = '\0';
    return 1;
}

static int set_exports(const char *path, slurmpod_setenv_fn set, void *ctx)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    static char line[MAX_LINE + 1];
    int count = 0;
    while (read_line(f, line, sizeof line)) {
        if (strncmp(line, "export ", 7) != 0)
            continue;
        char *name = line + 7;
        char *eq = strchr(name, '=');
        if (eq == NULL || !name_ok(name, (size_t)(eq - name)) || !value_ok(eq + 1, strlen(eq + 1)))
            continue;
        *eq = '\0';
        if (set(ctx, name, eq + 1) == 0)
            count++;
    }
    fclose(f);
    return count;
}

/* The scratch file: "BASE true|false", BASE absolute, below /, without "..". 1 when read. */
static int read_scratch(const char *path, char *base, size_t size, int *tmpdir)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    static char line[MAX_LINE + 1];
    int got = read_line(f, line, sizeof line);
    fclose(f);
    if (!got)
        return 0;
    char *space = strchr(line, ' ');
    if (space == NULL)
        return 0;
    *space = '\0';
    const char *flag = space + 1;
    size_t n = strlen(line);
    if (!value_ok(line, n) || line[0] != '/' || n < 2 || n >= size || line[n - 1] == '/')
        return 0;
    char padded[MAX_VALUE + 2];
    snprintf(padded, sizeof padded, "%s/", line);
    if (strstr(padded, "/../") != NULL)
        return 0;
    if (strcmp(flag, "true") == 0)
        *tmpdir = 1;
    else if (strcmp(flag, "false") == 0)
        *tmpdir = 0;
    else
        return 0;
    memcpy(base, line, n + 1);
    return 1;
}

/* Make the job's dir as this user, mode 0700 whatever the umask; or accept the one another task of the
 * job made. One that is there must be a real directory of this user with no access for group or others:
 * in the sticky base another user cannot replace it, but could have planted it for this job id. Returns
 * NULL when usable, else why not ("" when it is there but not private). */
static const char *make_scratch(const char *dir)
{
    if (mkdir(dir, 0700) == 0) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return "cannot open it";
        int rc = fchmod(fd, 0700);
        close(fd);
        return rc == 0 ? NULL : "cannot set its mode";
    }
    if (errno != EEXIST)
        return "cannot make it";
    struct stat st;
    if (lstat(dir, &st) != 0)
        return "cannot stat it";
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
        return "";
    return NULL;
}

int slurmpod_task_env(const char *exports_path, const char *scratch_path, uint32_t job_id,
                      slurmpod_setenv_fn set, void *ctx, FILE *err)
{
    int count = set_exports(exports_path, set, ctx);
    char base[MAX_VALUE + 1];
    int tmpdir = 0;
    if (job_id == 0 || !read_scratch(scratch_path, base, sizeof base, &tmpdir))
        return count;
    char dir[MAX_VALUE + 32];
    snprintf(dir, sizeof dir, "%s/" SCRATCH_PREFIX "%u", base, job_id);
    const char *why = make_scratch(dir);
    if (why != NULL) {
        if (err != NULL)
            fprintf(err, "slurmpod task-env: no scratch directory: %s is not a private directory of uid %u%s%s%s\n",
                    dir, (unsigned)geteuid(), why[0] ? " (" : "", why, why[0] ? ")" : "");
        return count;
    }
    if (set(ctx, "SLURMPOD_SCRATCH", dir) == 0)
        count++;
    if (tmpdir && set(ctx, "TMPDIR", dir) == 0)
        count++;
    return count;
}
