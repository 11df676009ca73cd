/* A stand-in for slurmctld: loads job_submit_slurmpod.so the way Slurm's plugin loader does (dlopen,
 * dlsym of the plugin symbols), provides the libslurmfull functions the plugin imports, and submits the
 * jobs named on the command line, one line of key=value output per job.
 *   slurmctld_host PLUGIN.so [--threads N --repeat M] PARTITION[:GPUS_PER_NODE[:NODES]] ...
 * A job argument "--swap=FILE" renames FILE over $SLURMPOD_POLICY instead (a ConfigMap update).
 * HOST_UNIQUE=1 gives every submission its own job name (as sbatch -J NAME-$i would).
 * HOST_UID=N submits as uid N (job_desc user_id and submit_uid); HOST_ACCOUNT=A sets --account;
 * HOST_COMMENT_BYTES=N gives every job an N-byte comment ending in a non-ASCII byte (the Python path).
 * HOST_TRES_PER_TASK=T sets tres_per_task (--gpus-per-task). The last line is "rss_kb=<VmRSS>".
 * HOST_WAIT_MS=N sleeps N ms after the last job, then writes "host: fini" to stderr before calling fini().
 * A job argument "modify:K=V,..." calls job_modify instead, with a job_desc naming only those fields
 * (partition, qos, account, name, time_limit, requeue, job_id) for the job HOST_EXISTING="K=V,..." describes,
 * which this host's copy_job_record_to_job_desc() returns (NULL when HOST_EXISTING is unset), as slurmctld's
 * does. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <slurm/slurm.h>

char *slurm_xstrdup(const char *s) { return s ? strdup(s) : NULL; }
void slurm_xfree(void **p) { free(*p); *p = NULL; }
static pthread_t main_thread;
/* "log<level>@main:" when main() logs, "log<level>@thread:" from any other thread. */
void slurm_log_var(const int level, const char *fmt, ...)
{
    va_list a;
    va_start(a, fmt);
    fprintf(stderr, "log%d@%s: ", level, pthread_equal(pthread_self(), main_thread) ? "main" : "thread");
    vfprintf(stderr, fmt, a);
    fputc('\n', stderr);
    va_end(a);
}
int slurm_error(const char *fmt, ...)
{
    va_list a;
    va_start(a, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, a);
    fputc('\n', stderr);
    va_end(a);
    return -1;
}

typedef int (*submit_fn)(job_desc_msg_t *, uint32_t, char **);
typedef int (*modify_fn)(job_desc_msg_t *, void *, uint32_t, char **);
static submit_fn job_submit;
static modify_fn job_modify;
static int copies, frees;

static void unset(job_desc_msg_t *d)
{
    memset(d, 0, sizeof(*d));
    d->job_id = d->min_nodes = d->max_nodes = d->num_tasks = d->time_limit = d->req_switch = d->wait4switch = NO_VAL;
    d->group_id = NO_VAL;
    d->requeue = d->segment_size = d->shared = d->warn_flags = d->warn_signal = d->warn_time = NO_VAL16;
}

/* "K=V,K=V" into d: strings strdup()ed (freed by slurm_free_job_desc_msg or the caller). */
static void fill(job_desc_msg_t *d, const char *spec)
{
    char buf[1024], *save = NULL, *kv;
    snprintf(buf, sizeof(buf), "%s", spec);
    for (kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *v = strchr(kv, '=');
        if (!v)
            continue;
        *v++ = '\0';
        if (!strcmp(kv, "partition")) d->partition = strdup(v);
        else if (!strcmp(kv, "qos")) d->qos = strdup(v);
        else if (!strcmp(kv, "account")) d->account = strdup(v);
        else if (!strcmp(kv, "name")) d->name = strdup(v);
        else if (!strcmp(kv, "tres_per_node")) d->tres_per_node = strdup(v);
        else if (!strcmp(kv, "time_limit")) d->time_limit = (uint32_t) strtoul(v, NULL, 10);
        else if (!strcmp(kv, "requeue")) d->requeue = (uint16_t) atoi(v);
        else if (!strcmp(kv, "warn_signal")) d->warn_signal = (uint16_t) atoi(v);
        else if (!strcmp(kv, "job_id")) d->job_id_str = strdup(v); /* as scontrol update sends it */
        else if (!strcmp(kv, "user_id")) d->user_id = (uint32_t) strtoul(v, NULL, 10);
    }
}

static void free_strings(job_desc_msg_t *d)
{
    free(d->partition); free(d->qos); free(d->account); free(d->name); free(d->tres_per_node); free(d->job_id_str);
}

/* slurmctld's (src/slurmctld/job_mgr.c) and libslurmfull's, as the plugin finds them with dlsym. */
job_desc_msg_t *copy_job_record_to_job_desc(void *job_ptr)
{
    job_desc_msg_t *d;
    if (!job_ptr || !getenv("HOST_EXISTING") || !(d = malloc(sizeof(*d))))
        return NULL;
    unset(d);
    fill(d, getenv("HOST_EXISTING"));
    /* get_job_env()'s layout: every element points into one buffer (Ref: src/slurmctld/job_mgr.c) */
    static const char env[] = "HOME=/home/researcher\0PATH=/usr/bin";
    char *buf = malloc(sizeof(env));
    memcpy(buf, env, sizeof(env));
    d->environment = calloc(3, sizeof(char *));
    d->environment[0] = buf;
    d->environment[1] = buf + strlen(buf) + 1;
    d->env_size = 2;
    __atomic_fetch_add(&copies, 1, __ATOMIC_RELAXED);
    return d;
}

/* As Slurm's: env_array_free() frees each element, so a one-buffer environment left here aborts. */
void slurm_free_job_desc_msg(job_desc_msg_t *d)
{
    for (char **e = d->environment; e && *e; e++)
        free(*e);
    free(d->environment);
    free_strings(d);
    free(d);
    __atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
}

static int modify(const char *spec, char *line, size_t len)
{
    job_desc_msg_t d;
    static int record = 1;
    char *err = NULL;
    int rc;
    uint32_t uid = getenv("HOST_UID") ? (uint32_t) atoi(getenv("HOST_UID")) : 0;

    unset(&d);
    d.segment_size = d.warn_flags = d.warn_signal = d.warn_time = 0; /* as slurm_init_job_desc_msg() leaves them */
    fill(&d, spec + strlen("modify:"));
    d.user_id = NO_VAL; /* as update_job sends it: the caller is submit_uid */
    errno = EAGAIN; /* left by the RPC thread's socket reads: slurmctld reads errno after job_modify */
    rc = job_modify(&d, &record, uid, &err);
    int after = errno;
    snprintf(line, len, "job=%s rc=%d time_limit=%u requeue=%u warn_signal=%u copies=%d frees=%d errno=%d err=%s",
             spec, rc, d.time_limit, d.requeue, d.warn_signal, copies, frees, after, err ? err : "-");
    free_strings(&d);
    free(err);
    return rc;
}
static const char *thread_job;
static int repeat = 1, bad_threads, unique_names;
static unsigned serial;

static int submit(const char *spec, char *line, size_t len)
{
    job_desc_msg_t d;
    char part[256], name[64], *err = NULL, *colon;
    int rc, gpus = 0, nodes = 1;

    if (!strncmp(spec, "modify:", 7))
        return modify(spec, line, len);
    memset(&d, 0, sizeof(d));
    d.max_nodes = d.num_tasks = d.time_limit = d.req_switch = d.wait4switch = NO_VAL;
    d.requeue = d.segment_size = d.shared = d.warn_flags = d.warn_signal = d.warn_time = NO_VAL16;
    snprintf(part, sizeof(part), "%s", spec);
    if ((colon = strchr(part, ':'))) {
        *colon = '\0';
        sscanf(colon + 1, "%d:%d", &gpus, &nodes);
    }
    d.partition = strdup(part);
    d.min_nodes = (uint32_t) nodes;
    if (unique_names) {
        snprintf(name, sizeof(name), "job-%u", __atomic_fetch_add(&serial, 1, __ATOMIC_RELAXED));
        d.name = name;
    }
    if (gpus) {
        d.tres_per_node = malloc(32);
        snprintf(d.tres_per_node, 32, "gres/gpu:%d", gpus);
    }
    uint32_t uid = getenv("HOST_UID") ? (uint32_t) atoi(getenv("HOST_UID")) : 0;
    d.user_id = uid;
    d.account = getenv("HOST_ACCOUNT");
    d.tres_per_task = getenv("HOST_TRES_PER_TASK");
    if (getenv("HOST_COMMENT_BYTES")) {
        size_t n = (size_t) atol(getenv("HOST_COMMENT_BYTES"));
        d.comment = malloc(n + 1);
        memset(d.comment, 'c', n);
        if (n)
            d.comment[n - 1] = (char) 0xe9;
        d.comment[n] = '\0';
    }
    rc = job_submit(&d, uid, &err);
    snprintf(line, len, "job=%s rc=%d time_limit=%u requeue=%u warn_signal=%u segment_size=%u tres_per_node=%s "
             "err=%s", spec, rc, d.time_limit, d.requeue, d.warn_signal, d.segment_size,
             d.tres_per_node ? d.tres_per_node : "-", err ? err : "-");
    free(d.partition);
    free(d.tres_per_node);
    free(d.comment);
    free(err);
    return rc;
}

static void *worker(void *arg)
{
    char line[4096], first[4096];

    submit(thread_job, first, sizeof(first));
    for (int i = 1; i < repeat; i++) {
        submit(thread_job, line, sizeof(line));
        if (strcmp(line, first)) /* every thread must see the same answer */
            __atomic_fetch_add(&bad_threads, 1, __ATOMIC_RELAXED);
    }
    return arg;
}

int main(int argc, char **argv)
{
    char line[4096];
    int threads = 0, i = 2;
    void *h;

    main_thread = pthread_self();
    h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);

    if (!h) {
        printf("dlopen failed: %s\n", dlerror());
        return 3;
    }
    int (*init)(void) = (int (*)(void)) dlsym(h, "init");
    int (*fini)(void) = (int (*)(void)) dlsym(h, "fini");
    job_submit = (submit_fn) dlsym(h, "job_submit");
    job_modify = (modify_fn) dlsym(h, "job_modify");
    const uint32_t *version = dlsym(h, "plugin_version");
    const char *type = dlsym(h, "plugin_type");
    if (!init || !fini || !job_submit || !version || !type || !job_modify || !dlsym(h, "plugin_name")) {
        printf("missing plugin symbols\n");
        return 3;
    }
    unique_names = getenv("HOST_UNIQUE") != NULL;
    printf("plugin_type=%s plugin_version=%u init=%d\n", type, *version, init());
    if (argc > 3 && !strcmp(argv[2], "--threads")) {
        threads = atoi(argv[3]);
        repeat = atoi(argv[5]);
        i = 6;
    }
    for (; i < argc; i++) {
        if (!strncmp(argv[i], "--swap=", 7)) {
            printf("swap=%d\n", rename(argv[i] + 7, getenv("SLURMPOD_POLICY")));
            continue;
        }
        if (threads) {
            pthread_t t[64];
            thread_job = argv[i];
            submit(thread_job, line, sizeof(line)); /* as a first job would: the plugin caches the caller's name */
            for (int k = 0; k < threads; k++)
                pthread_create(&t[k], NULL, worker, NULL);
            for (int k = 0; k < threads; k++)
                pthread_join(t[k], NULL);
            printf("threads=%d repeat=%d mismatches=%d\n", threads, repeat, bad_threads);
        }
        submit(argv[i], line, sizeof(line));
        printf("%s\n", line);
    }
    if (getenv("HOST_WAIT_MS")) { /* give the plugin's log writer time, then mark where fini() begins */
        usleep((useconds_t) atoi(getenv("HOST_WAIT_MS")) * 1000);
        fprintf(stderr, "host: fini\n");
    }
    printf("fini=%d\n", fini());
    {
        char status[256];
        FILE *fp = fopen("/proc/self/status", "r");
        while (fp && fgets(status, sizeof(status), fp))
            if (!strncmp(status, "VmRSS:", 6))
                printf("rss_kb=%ld\n", atol(status + 6));
        if (fp)
            fclose(fp);
    }
    if (getenv("HOST_RELOAD")) { /* what an in-process reconfigure does: unload, load, init again */
        dlclose(h);
        if (!(h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL))) {
            printf("reload failed: %s\n", dlerror());
            return 3;
        }
        init = (int (*)(void)) dlsym(h, "init");
        job_submit = (submit_fn) dlsym(h, "job_submit");
        printf("reload init=%d\n", init());
        submit(argv[argc - 1], line, sizeof(line));
        printf("reloaded %s\n", line);
    }
    return 0;
}
