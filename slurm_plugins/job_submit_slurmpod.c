/*
 * job_submit_slurmpod.c - job_submit/slurmpod: the cluster's job policy, enforced inside slurmctld.
 *
 * Enforces the policy YAML (the chart's policy ConfigMap, SLURMPOD_POLICY overrides its path) on every
 * job_submit and job_modify: preemption tiers (who may use a tier, time caps, requeue and a grace signal
 * so preemptible work can checkpoint), GPU jobs kept out of CPU-only partitions, multi-node GPU jobs kept
 * on one network block or leaf switch, and a site's own rules. The policy is Python (slurmpod.policy),
 * started in slurmctld with cffi's embedding API; its built-in rules are also compiled into a table that
 * fastpath.c decides from without entering Python, for every job it can answer exactly as Python would.
 *
 * - plugin_version is SLURM_VERSION_NUMBER of the headers it is compiled against: slurmctld refuses a
 *   plugin whose version differs, micro included, so the controller image builds it from its own headers.
 * - init() dlopen()s libpython with RTLD_NOW|RTLD_NOLOAD|RTLD_GLOBAL before any Python runs (without it
 *   _cffi_backend fails with "undefined symbol PyExc_SystemError"), then starts Python, which loads and
 *   validates the policy. init() never fails, so a bad policy cannot stop slurmctld: jobs are rejected
 *   (or, with failMode: open, accepted unchanged) until it is fixed.
 * - Each call stat()s the policy file (about a microsecond), so an edit takes effect on the next
 *   submission: a changed file is re-read by Python and compiled into a fresh table.
 * - Only the fields the decision sets are written back, with Slurm's allocator (slurm_xstrdup /
 *   slurm_xfree from libslurmfull); a rejection's message goes to *err_msg, which sbatch prints.
 * - The decision's log line reaches slurmctld's log through slurm_log_var, written by this plugin's own
 *   thread within SP_LOG_FLUSH_MS, so the RPC thread does not write it while it holds the job lock.
 * - Every call is timed with clock_gettime(CLOCK_MONOTONIC) into a histogram of 1 us buckets, written as
 *   JSON (slurmpod.slurm_plugins.stats reads it) at most once a second and at fini().
 *
 * Built by slurmpod.slurm_plugins.build_plugin, which defines the SP_* names checked below.
 * Ref: https://slurm.schedmd.com/job_submit_plugins.html, https://cffi.readthedocs.io/en/stable/embedding.html
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "fastpath.h"
#include "python_api.h"
#include "slurmpod_job.h"

/* From build_plugin (cc -D): the values slurmpod.well_known and slurmpod.slurm_plugins.bridge own. */
#if !defined(SP_LIBPYTHON) || !defined(SP_POLICY_FILE) || !defined(SP_STATS_FILE) || !defined(SP_ENV_POLICY) || \
    !defined(SP_ENV_STATS) || !defined(SP_IDENTITY_TTL_S)
#error "build with slurmpod.slurm_plugins.build_plugin, which defines the SP_* paths, env names and TTL"
#endif

const char plugin_name[] = "slurmpod job_submit policy (Python, cffi embedding)";
const char plugin_type[] = "job_submit/slurmpod";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

/* Exported by libslurmfull, which slurmctld links: xstrdup (strong_alias slurm_xstrdup), xfree
 * (-> slurm_xfree(void **)), log_var (-> slurm_log_var), error (-> slurm_error).
 * Ref: https://github.com/SchedMD/slurm/blob/master/src/common/xstring.c, src/common/xmalloc.h,
 * src/common/log.h */
extern char *slurm_xstrdup(const char *str);
extern void slurm_xfree(void **ptr);
extern void slurm_log_var(const int level, const char *fmt, ...);
extern int slurm_error(const char *fmt, ...);
#define SP_LOG_INFO 3 /* LOG_LEVEL_INFO in log_level_t, src/common/log.h */

struct job_record; /* opaque: job_record_t is internal to slurmctld */

/* job_modify reads the job it changes through slurmctld's own copy_job_record_to_job_desc() (exported by
 * the slurmctld binary, as every function plugins call is; Ref: src/slurmctld/slurmctld.h) into a
 * job_desc_msg_t, whose layout slurm.h gives, freed with libslurmfull's slurm_free_job_desc_msg().
 * Both are looked up at init(): a slurmctld without them still loads the plugin, and every modification
 * the policy would judge is refused. */
typedef job_desc_msg_t *(*sp_copy_job_fn)(struct job_record *job_ptr);
typedef void (*sp_free_desc_fn)(job_desc_msg_t *msg);
static sp_copy_job_fn sp_copy_job;
static sp_free_desc_fn sp_free_desc;

#define SP_BUCKETS 4096 /* 1 us each; the last one holds everything slower */

/* Written once in init(), read-only afterwards: safe across RPC threads. */
static char sp_policy_path[4096];
static char sp_stats_path[4096];
/* Call timing: atomics only. */
static uint64_t sp_hist[SP_BUCKETS];
static uint64_t sp_calls, sp_sum_ns, sp_max_ns, sp_last_write_ns, sp_failures, sp_fast_calls;
/* The compiled policy: read under the read lock, swapped under the write lock; one compile at a time. */
static slurmpod_fast_t *sp_fast;
static pthread_rwlock_t sp_fast_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t sp_compile_lock = PTHREAD_MUTEX_INITIALIZER;
/* uid -> user name, as Python's identity cache (bridge.system_identity, SP_IDENTITY_TTL_S). */
#define SP_UID_SLOTS 64
static struct { uint32_t uid, used; uint64_t at_ns; char name[64]; } sp_uids[SP_UID_SLOTS];
static pthread_mutex_t sp_uid_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t sp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void sp_write_stats(void)
{
    char tmp[4200];
    FILE *fp;
    int i;

    if (!sp_stats_path[0])
        return;
    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", sp_stats_path, (long) getpid());
    if (!(fp = fopen(tmp, "w")))
        return;
    fprintf(fp, "{\"calls\": %" PRIu64 ", \"fast\": %" PRIu64 ", \"failures\": %" PRIu64 ", \"sum_ns\": %" PRIu64
        ", \"max_ns\": %" PRIu64 ", \"bucket_us\": 1, \"buckets\": {",
        __atomic_load_n(&sp_calls, __ATOMIC_RELAXED), __atomic_load_n(&sp_fast_calls, __ATOMIC_RELAXED),
        __atomic_load_n(&sp_failures, __ATOMIC_RELAXED),
        __atomic_load_n(&sp_sum_ns, __ATOMIC_RELAXED), __atomic_load_n(&sp_max_ns, __ATOMIC_RELAXED));
    const char *sep = "";
    for (i = 0; i < SP_BUCKETS; i++) {
        uint64_t n = __atomic_load_n(&sp_hist[i], __ATOMIC_RELAXED);
        if (n) {
            fprintf(fp, "%s\"%d\": %" PRIu64, sep, i, n);
            sep = ", ";
        }
    }
    fprintf(fp, "}}\n");
    if (fclose(fp) == 0)
        rename(tmp, sp_stats_path);
    else
        unlink(tmp);
}

static void sp_record(uint64_t started)
{
    uint64_t now = sp_now_ns(), ns = now - started, us = ns / 1000, max, last;

    __atomic_fetch_add(&sp_hist[us < SP_BUCKETS ? us : SP_BUCKETS - 1], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sp_calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sp_sum_ns, ns, __ATOMIC_RELAXED);
    max = __atomic_load_n(&sp_max_ns, __ATOMIC_RELAXED);
    while (ns > max && !__atomic_compare_exchange_n(&sp_max_ns, &max, ns, false, __ATOMIC_RELAXED,
                            __ATOMIC_RELAXED))
        ;
    /* At most one writer a second: whoever wins the compare-exchange (outside the timed part). */
    last = __atomic_load_n(&sp_last_write_ns, __ATOMIC_RELAXED);
    if (now - last > 1000000000u &&
        __atomic_compare_exchange_n(&sp_last_write_ns, &last, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        sp_write_stats();
}

/* The decision log. job_submit() runs in an RPC thread that holds slurmctld's job write lock, so a log
 * write there (slurmctld's log mutex, write() to its stderr pipe, waking the reader) lengthens every other
 * submitter's wait for that lock. Calls only append their line here; one thread hands the lines to
 * slurm_log_var at most SP_LOG_FLUSH_MS later, outside the lock, and fini() writes what is left. A full
 * buffer, or no writer thread, has the caller log its line itself: no line is dropped.
 * Ref: https://slurm.schedmd.com/job_submit_plugins.html (job_submit is called with the job write lock) */
#define SP_LOG_BYTES (256 * 1024)
#define SP_LOG_FLUSH_MS 50
static char sp_log_buf[SP_LOG_BYTES]; /* NUL-terminated lines, back to back */
static size_t sp_log_len;
static int sp_log_on, sp_log_stop;
static pthread_t sp_log_thread;
static pthread_mutex_t sp_log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sp_log_cond = PTHREAD_COND_INITIALIZER;

static void sp_log_flush(void)
{
    char *copy = NULL;
    size_t len, at;

    pthread_mutex_lock(&sp_log_lock);
    len = sp_log_len;
    if (len && (copy = malloc(len))) {
        memcpy(copy, sp_log_buf, len);
        sp_log_len = 0;
    }
    pthread_mutex_unlock(&sp_log_lock);
    for (at = 0; copy && at < len; at += strlen(copy + at) + 1)
        slurm_log_var(SP_LOG_INFO, "job_submit/slurmpod: %s", copy + at);
    free(copy);
}

static void *sp_log_main(void *arg)
{
    struct timespec gather = {0, SP_LOG_FLUSH_MS * 1000000L};
    int stop;

    for (;;) {
        pthread_mutex_lock(&sp_log_lock);
        while (!sp_log_stop && !sp_log_len)
            pthread_cond_wait(&sp_log_cond, &sp_log_lock);
        stop = sp_log_stop;
        pthread_mutex_unlock(&sp_log_lock);
        if (!stop)
            nanosleep(&gather, NULL); /* let a burst of submissions gather into one batch */
        sp_log_flush();
        if (stop)
            return arg;
    }
}

static void sp_log(const char *line)
{
    size_t n = strlen(line) + 1;
    int queued = 0;

    pthread_mutex_lock(&sp_log_lock);
    if (sp_log_on && sp_log_len + n <= SP_LOG_BYTES) {
        if (!sp_log_len)
            pthread_cond_signal(&sp_log_cond);
        memcpy(sp_log_buf + sp_log_len, line, n);
        sp_log_len += n;
        queued = 1;
    }
    pthread_mutex_unlock(&sp_log_lock);
    if (!queued)
        slurm_log_var(SP_LOG_INFO, "job_submit/slurmpod: %s", line);
}

static void sp_log_start(void)
{
    sigset_t all, old;
    int rc;

    pthread_mutex_lock(&sp_log_lock);
    rc = sp_log_on;
    sp_log_stop = 0;
    pthread_mutex_unlock(&sp_log_lock);
    if (rc)
        return;
    /* The writer takes no signal: slurmctld handles them in its own thread. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&sp_log_thread, NULL, sp_log_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        slurm_error("job_submit/slurmpod: no log writer thread (%d): decisions are logged in the RPC", rc);
        return;
    }
    pthread_mutex_lock(&sp_log_lock);
    sp_log_on = 1;
    pthread_mutex_unlock(&sp_log_lock);
}

static void sp_log_end(void)
{
    int on;

    pthread_mutex_lock(&sp_log_lock);
    on = sp_log_on;
    sp_log_on = 0; /* from here on callers log for themselves */
    sp_log_stop = 1;
    pthread_cond_signal(&sp_log_cond);
    pthread_mutex_unlock(&sp_log_lock);
    if (on)
        pthread_join(sp_log_thread, NULL);
    sp_log_flush();
}

/* The policy file's identity as Python's bridge.Loaded.key has it: (st_ino, st_mtime_ns, st_size). */
static int sp_policy_key(int64_t key[3])
{
    struct stat st;

    if (stat(sp_policy_path, &st) != 0)
        return 0;
    key[0] = (int64_t) st.st_ino;
    key[1] = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    key[2] = (int64_t) st.st_size;
    return 1;
}

static int sp_fast_is(const slurmpod_fast_t *t, const int64_t key[3])
{
    return t && t->key_ino == key[0] && t->key_mtime_ns == key[1] && t->key_size == key[2];
}

/* Have Python compile the policy it has loaded now (it re-reads a changed file first) and swap it in. */
static void sp_recompile(const int64_t key[3])
{
    slurmpod_fast_t *fresh, *old;
    int current;

    pthread_mutex_lock(&sp_compile_lock);
    pthread_rwlock_rdlock(&sp_fast_lock);
    current = key && sp_fast_is(sp_fast, key);
    pthread_rwlock_unlock(&sp_fast_lock);
    if (!current && (fresh = calloc(1, sizeof(*fresh)))) {
        if (slurmpod_py_compile(fresh) == SP_OK) {
            if (fresh->ok)
                slurm_log_var(SP_LOG_INFO, "job_submit/slurmpod: policy compiled, its built-in rules run in C");
            else
                slurm_log_var(SP_LOG_INFO, "job_submit/slurmpod: every job is decided in Python: %s", fresh->why);
            pthread_rwlock_wrlock(&sp_fast_lock);
            old = sp_fast;
            sp_fast = fresh;
            pthread_rwlock_unlock(&sp_fast_lock);
            free(old);
        } else {
            free(fresh);
        }
    }
    pthread_mutex_unlock(&sp_compile_lock);
}

static void sp_fast_drop(void)
{
    slurmpod_fast_t *old;

    pthread_rwlock_wrlock(&sp_fast_lock);
    old = sp_fast;
    sp_fast = NULL;
    pthread_rwlock_unlock(&sp_fast_lock);
    free(old);
}

/* The user's name from the cache; 0: ask Python. The C side never calls NSS itself (getpwuid_r has no
 * deadline, and slurmctld holds its job write lock here): Python looks the name up within its deadline
 * (bridge.IDENTITY_DEADLINE_S) and hands it back in out->user, which sp_remember_user() keeps. */
static int sp_user_name(uint32_t uid, char *name, size_t len)
{
    uint64_t now = sp_now_ns();
    int hit;

    pthread_mutex_lock(&sp_uid_lock);
    hit = sp_uids[uid % SP_UID_SLOTS].used && sp_uids[uid % SP_UID_SLOTS].uid == uid &&
          now - sp_uids[uid % SP_UID_SLOTS].at_ns < SP_IDENTITY_TTL_S * 1000000000ull;
    if (hit)
        snprintf(name, len, "%s", sp_uids[uid % SP_UID_SLOTS].name);
    pthread_mutex_unlock(&sp_uid_lock);
    return hit;
}

static void sp_remember_user(uint32_t uid, const char *name)
{
    if (!name[0] || strnlen(name, sizeof(sp_uids[0].name)) >= sizeof(sp_uids[0].name))
        return;
    pthread_mutex_lock(&sp_uid_lock);
    sp_uids[uid % SP_UID_SLOTS].uid = uid;
    sp_uids[uid % SP_UID_SLOTS].used = 1;
    sp_uids[uid % SP_UID_SLOTS].at_ns = sp_now_ns();
    snprintf(sp_uids[uid % SP_UID_SLOTS].name, sizeof(sp_uids[0].name), "%s", name);
    pthread_mutex_unlock(&sp_uid_lock);
}

/* 1: decided in C from the compiled policy (fresh for the file as it is now); 0: ask Python. */
static int sp_fast_try(const slurmpod_req_t *req, slurmpod_out_t *out)
{
    int64_t key[3];
    char user[64];
    int fresh, done = 0;

    if (!sp_policy_key(key))
        return 0; /* unreadable: Python says why */
    pthread_rwlock_rdlock(&sp_fast_lock);
    fresh = sp_fast_is(sp_fast, key);
    pthread_rwlock_unlock(&sp_fast_lock);
    if (!fresh)
        sp_recompile(key);
    if (!sp_user_name(req->user_id, user, sizeof(user)))
        return 0;
    pthread_rwlock_rdlock(&sp_fast_lock);
    if (sp_fast_is(sp_fast, key) && sp_fast->ok)
        done = slurmpod_fast_decide(sp_fast, req, user, out);
    pthread_rwlock_unlock(&sp_fast_lock);
    return done;
}

extern int init(void)
{
    char err[1024] = "";
    const char *env;
    void *py;
    Dl_info self;

    /* Promote the libpython this plugin links to RTLD_GLOBAL, so Python's own extension modules
     * (_cffi_backend) resolve its symbols. Must happen before any Python runs. */
    py = dlopen(SP_LIBPYTHON, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    if (!py)
        slurm_error("job_submit/slurmpod: dlopen(%s): %s", SP_LIBPYTHON, dlerror());
    /* Pin this plugin: Python keeps pointers into it (the extern "Python" functions), and an
     * initialized interpreter cannot be unloaded, so a dlclose() at fini must not unmap it. */
    if (dladdr((void *) &init, &self) && self.dli_fname &&
        !dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE))
        slurm_error("job_submit/slurmpod: dlopen(%s, RTLD_NODELETE): %s", self.dli_fname, dlerror());
    sp_copy_job = (sp_copy_job_fn) dlsym(RTLD_DEFAULT, "copy_job_record_to_job_desc");
    sp_free_desc = (sp_free_desc_fn) dlsym(RTLD_DEFAULT, "slurm_free_job_desc_msg");
    if (!sp_copy_job || !sp_free_desc)
        slurm_error("job_submit/slurmpod: copy_job_record_to_job_desc/slurm_free_job_desc_msg not found: "
                    "job modifications the policy judges are refused");
    env = getenv(SP_ENV_POLICY);
    snprintf(sp_policy_path, sizeof(sp_policy_path), "%s", (env && env[0]) ? env : SP_POLICY_FILE);
    env = getenv(SP_ENV_STATS);
    snprintf(sp_stats_path, sizeof(sp_stats_path), "%s", (env && env[0]) ? env : SP_STATS_FILE);
    sp_last_write_ns = sp_now_ns();
    sp_log_start();
    sp_fast_drop(); /* an in-process reconfigure: compile again from the policy this init() loads */
    if (slurmpod_py_start(sp_policy_path, err, sizeof(err)) != SP_OK) {
        slurm_error("job_submit/slurmpod: Python did not start; every job will be rejected");
        return SLURM_SUCCESS;
    }
    if (err[0])
        slurm_error("job_submit/slurmpod: %s", err);
    else
        slurm_log_var(SP_LOG_INFO, "job_submit/slurmpod: policy %s loaded", sp_policy_path);
    sp_recompile(NULL);
    return SLURM_SUCCESS; /* never stop slurmctld over the policy: jobs are rejected instead */
}

extern int fini(void)
{
    sp_log_end();
    sp_write_stats();
    return SLURM_SUCCESS;
}

static void sp_set_str(char **field, const char *value)
{
    slurm_xfree((void **) field);
    *field = slurm_xstrdup(value);
}

static uint32_t sp_job_id(const job_desc_msg_t *d)
{
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
    return d->step_id.job_id; /* 25.11 replaced job_desc.job_id by step_id */
#else
    return d->job_id;
#endif
}

/* Slurm refuses these fields past 1024 bytes itself, after job_submit: refuse them first, so no
 * user-sized string reaches Python, its answer cache or the log.
 * Ref: https://github.com/SchedMD/slurm/blob/slurm-24-11-5-1/src/slurmctld/job_mgr.c (_test_job_desc_fields) */
#define SP_STR_MAX 1024

static const char *sp_too_long(const slurmpod_req_t *r)
{
    const char *const v[] = { r->account, r->partition, r->qos, r->tres_per_node, r->tres_per_job, r->features,
                              r->comment, r->name, r->tres_per_task, r->tres_per_socket };
    static const char *const names[] = { "account", "partition", "qos", "tres_per_node", "tres_per_job",
                                         "features", "comment", "name", "tres_per_task", "tres_per_socket" };
    size_t i;

    for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        if (v[i] && strnlen(v[i], SP_STR_MAX + 1) > SP_STR_MAX)
            return names[i];
    return NULL;
}

/* Names slurmctld itself writes into its log unescaped (an invalid partition, account or QOS is logged
 * by name after job_submit): one holding a control character is refused here, before any of that, so
 * no user can write a line into the log. The Slurm error names the field. */
static const char *sp_control_char(const slurmpod_req_t *r, int *code)
{
    const char *const v[] = { r->partition, r->account, r->qos };
    static const char *const names[] = { "partition", "account", "qos" };
    static const int codes[] = { ESLURM_INVALID_PARTITION_NAME, ESLURM_INVALID_ACCOUNT, ESLURM_INVALID_QOS };
    size_t i;
    const unsigned char *c;

    for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        for (c = (const unsigned char *) v[i]; c && *c; c++) {
            if (*c < 0x20 || *c == 0x7f) {
                *code = codes[i];
                return names[i];
            }
        }
    }
    return NULL;
}

/* The Slurm error code for a refusal of this kind (sbatch prints its text under the policy's message). */
static int sp_error_code(uint32_t refusal)
{
    switch (refusal) {
    case SP_REFUSE_ACCESS: return ESLURM_ACCESS_DENIED;
    case SP_REFUSE_TIME: return ESLURM_INVALID_TIME_LIMIT;
    case SP_REFUSE_GRES: return ESLURM_INVALID_GRES;
    case SP_REFUSE_TOPOLOGY: return ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE;
    case SP_REFUSE_TOO_LONG: return ESLURM_PATHNAME_TOO_LONG;
    default: return SLURM_ERROR;
    }
}

/* The request for job_submit: job_desc as the user sent it. uid: the caller's (submit_uid), never
 * job_desc->user_id, which the user may set and job_modify leaves NO_VAL. */
static slurmpod_req_t sp_submitted(const job_desc_msg_t *d, uint32_t uid)
{
    slurmpod_req_t req = {
        .user_id = uid, .group_id = d->group_id, .job_id = sp_job_id(d), .is_modify = 0, .moves_tier = 0,
        .min_nodes = d->min_nodes, .max_nodes = d->max_nodes, .num_tasks = d->num_tasks,
        .time_limit = d->time_limit, .req_switch = d->req_switch, .wait4switch = d->wait4switch,
        .segment_size = d->segment_size, .shared = d->shared, .requeue = d->requeue,
        .warn_signal = d->warn_signal, .warn_time = d->warn_time, .warn_flags = d->warn_flags,
        .account = d->account, .partition = d->partition, .qos = d->qos,
        .tres_per_node = d->tres_per_node, .tres_per_job = d->tres_per_job, .features = d->features,
        .comment = d->comment, .name = d->name, .tres_per_task = d->tres_per_task,
        .tres_per_socket = d->tres_per_socket,
    };
    return req;
}

/* slurm_init_job_desc_msg() leaves segment_size and warn_* at 0 (memset), not NO_VAL16, so an update
 * that does not name them (scontrol hold, release) sends 0. Ref: src/api/init_msg.c */
#define SP_SET16(v) ((v) != NO_VAL16 && (v) != 0)

/* The job a job_modify changes: scontrol update names it in job_id_str ("12", "12_3", "12+1"), leaving
 * job_id NO_VAL. Ref: slurm/slurm.h (job_desc_msg_t.job_id_str) */
static uint32_t sp_modified_job_id(const job_desc_msg_t *d)
{
    uint32_t id = sp_job_id(d);
    unsigned long parsed;
    char *end = NULL;

    if (id != NO_VAL && id != 0)
        return id;
    if (!d->job_id_str)
        return NO_VAL;
    parsed = strtoul(d->job_id_str, &end, 10);
    return (end != d->job_id_str && parsed > 0 && parsed < NO_VAL) ? (uint32_t) parsed : NO_VAL;
}

/* Whether a job_modify names any field the policy reads (a hold, release, nice or dependency does not). */
static bool sp_names_policy_fields(const job_desc_msg_t *d)
{
    return d->account || d->partition || d->qos || d->tres_per_node || d->tres_per_job || d->tres_per_task ||
           d->tres_per_socket || d->features || d->comment || d->name || d->min_nodes != NO_VAL ||
           d->max_nodes != NO_VAL || d->num_tasks != NO_VAL || d->time_limit != NO_VAL ||
           d->req_switch != NO_VAL || d->wait4switch != NO_VAL || SP_SET16(d->segment_size) ||
           d->shared != NO_VAL16 || d->requeue != NO_VAL16 || SP_SET16(d->warn_signal) ||
           SP_SET16(d->warn_time) || SP_SET16(d->warn_flags);
}

static bool sp_differs(const char *change, const char *now)
{
    return change && strcmp(change, now ? now : "") != 0;
}

/* The request for job_modify: the job it produces, each field the change names over the job's record
 * (e, from copy_job_record_to_job_desc), judged for the caller. */
static slurmpod_req_t sp_merged(const job_desc_msg_t *d, const job_desc_msg_t *e, uint32_t uid)
{
#define SP_N(f) (d->f != NO_VAL ? d->f : e->f)
#define SP_N16(f) (d->f != NO_VAL16 ? d->f : e->f)
#define SP_Z16(f) (SP_SET16(d->f) ? d->f : e->f)
#define SP_S(f) (d->f ? d->f : e->f)
    slurmpod_req_t req = {
        .user_id = uid, .group_id = e->group_id, .job_id = sp_modified_job_id(d), .is_modify = 1,
        .moves_tier = sp_differs(d->partition, e->partition) || sp_differs(d->qos, e->qos) ||
                      sp_differs(d->account, e->account),
        .min_nodes = SP_N(min_nodes), .max_nodes = SP_N(max_nodes), .num_tasks = SP_N(num_tasks),
        .time_limit = SP_N(time_limit), .req_switch = SP_N(req_switch), .wait4switch = SP_N(wait4switch),
        .segment_size = SP_Z16(segment_size), .shared = SP_N16(shared), .requeue = SP_N16(requeue),
        .warn_signal = SP_Z16(warn_signal), .warn_time = SP_Z16(warn_time), .warn_flags = SP_Z16(warn_flags),
        .account = SP_S(account), .partition = SP_S(partition), .qos = SP_S(qos),
        .tres_per_node = SP_S(tres_per_node), .tres_per_job = SP_S(tres_per_job), .features = SP_S(features),
        .comment = SP_S(comment), .name = SP_S(name), .tres_per_task = SP_S(tres_per_task),
        .tres_per_socket = SP_S(tres_per_socket),
    };
#undef SP_N
#undef SP_N16
#undef SP_Z16
#undef SP_S
    return req;
}

/* Free a copy_job_record_to_job_desc() result. get_job_env() points every element of the environment
 * into one buffer it allocated (_read_data_array_from_file, src/slurmctld/job_mgr.c), which
 * slurm_free_job_desc_msg()'s env_array_free() would free element by element (glibc aborts on it): so
 * when the elements lie end to end in one buffer, that buffer and the array are freed here first. */
static void sp_free_copy(job_desc_msg_t *e)
{
    char **env = e->environment;
    const char *next = env ? env[0] : NULL;
    bool one_buffer = true;
    uint32_t i;

    for (i = 0; env && i < e->env_size && env[i]; i++) {
        if (env[i] != next) {
            one_buffer = false;
            break;
        }
        next = env[i] + strlen(env[i]) + 1;
    }
    if (env && one_buffer) {
        if (env[0])
            slurm_xfree((void **) &env[0]);
        slurm_xfree((void **) &e->environment);
        e->env_size = 0;
    }
    sp_free_desc(e);
}

/* Decide one request and write the answer into d (the job_desc slurmctld goes on with). */
static int sp_call(job_desc_msg_t *d, const slurmpod_req_t *r, char **err_msg)
{
    uint64_t started = sp_now_ns();
    slurmpod_req_t req = *r;
    bool modify = req.is_modify != 0;
    uint32_t uid = req.user_id;
    slurmpod_out_t out;
    const char *too_long;
    int rc = SLURM_SUCCESS;

    if ((too_long = sp_too_long(&req))) {
        char line[128];
        if (err_msg) {
            snprintf(line, sizeof(line), "rejected by cluster policy: %s is longer than %d bytes", too_long,
                     SP_STR_MAX);
            *err_msg = slurm_xstrdup(line);
        }
        snprintf(line, sizeof(line), "%s job=- uid=%u verdict=reject rules=too-long field=%s",
                 modify ? "modify" : "submit", uid, too_long);
        sp_record(started);
        sp_log(line);
        return ESLURM_PATHNAME_TOO_LONG;
    }
    if ((too_long = sp_control_char(&req, &rc))) {
        char line[128];
        if (err_msg) {
            snprintf(line, sizeof(line), "rejected by cluster policy: %s holds a control character", too_long);
            *err_msg = slurm_xstrdup(line);
        }
        snprintf(line, sizeof(line), "%s job=- uid=%u verdict=reject rules=control-character field=%s",
                 modify ? "modify" : "submit", uid, too_long);
        sp_record(started);
        sp_log(line);
        return rc;
    }
    memset(&out, 0, sizeof(out));
    if (!modify && sp_fast_try(&req, &out)) {
        __atomic_fetch_add(&sp_fast_calls, 1, __ATOMIC_RELAXED);
    } else {
        memset(&out, 0, sizeof(out)); /* the fast path may have begun an answer it then left to Python */
        rc = slurmpod_py_decide(&req, &out) == SP_OK ? SLURM_SUCCESS : SLURM_ERROR;
        if (rc == SLURM_SUCCESS) {
            out.user[sizeof(out.user) - 1] = '\0';
            sp_remember_user(uid, out.user);
        }
    }
    if (rc != SLURM_SUCCESS) {
        __atomic_fetch_add(&sp_failures, 1, __ATOMIC_RELAXED);
        slurm_error("job_submit/slurmpod: the policy engine failed for a job of uid %u", uid);
        if (err_msg)
            *err_msg = slurm_xstrdup("rejected by cluster policy: the policy engine failed (see slurmctld log)");
        sp_record(started);
        return SLURM_ERROR;
    }
    if (out.verdict == SP_VERDICT_REJECT) {
        rc = sp_error_code(out.refusal);
    } else {
        if (out.set & SP_SET_PARTITION) sp_set_str(&d->partition, out.partition);
        if (out.set & SP_SET_QOS) sp_set_str(&d->qos, out.qos);
        if (out.set & SP_SET_TRES_PER_NODE) sp_set_str(&d->tres_per_node, out.tres_per_node);
        if (out.set & SP_SET_TIME_LIMIT) d->time_limit = out.time_limit;
        if (out.set & SP_SET_REQUEUE) d->requeue = (uint16_t) out.requeue;
        if (out.set & SP_SET_WARN_SIGNAL) d->warn_signal = (uint16_t) out.warn_signal;
        if (out.set & SP_SET_WARN_TIME) d->warn_time = (uint16_t) out.warn_time;
        if (out.set & SP_SET_WARN_FLAGS) d->warn_flags = (uint16_t) out.warn_flags;
        if (out.set & SP_SET_REQ_SWITCH) d->req_switch = out.req_switch;
        if (out.set & SP_SET_WAIT4SWITCH) d->wait4switch = out.wait4switch;
        if (out.set & SP_SET_SEGMENT_SIZE) d->segment_size = (uint16_t) out.segment_size;
        if (out.set & SP_SET_SHARED) d->shared = (uint16_t) out.shared;
    }
    if (err_msg && out.message[0])
        *err_msg = slurm_xstrdup(out.message);
    sp_record(started);
    sp_log(out.log);
    return rc;
}

/* errno on return: 0 after success, else as the caller had it. slurmctld takes errno as the error of an
 * update whose new association lookup returns NULL without setting it (_retrieve_new_assoc in
 * src/slurmctld/job_mgr.c, with no accounting): an EAGAIN left behind, by Python or by the RPC thread's
 * earlier socket reads (seen on 26.05), failed a valid partition change with "Resource temporarily
 * unavailable". */
static int sp_errno_after(int rc, int saved)
{
    return rc == SLURM_SUCCESS ? 0 : saved;
}

extern int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid, char **err_msg)
{
    int saved = errno;
    slurmpod_req_t req = sp_submitted(job_desc, submit_uid);
    int rc = sp_call(job_desc, &req, err_msg);

    errno = sp_errno_after(rc, saved);
    return rc;
}

extern int job_modify(job_desc_msg_t *job_desc, struct job_record *job_ptr, uint32_t submit_uid,
              char **err_msg)
{
    job_desc_msg_t *existing;
    slurmpod_req_t req;
    char line[160];
    int rc, saved = errno;

    if (!sp_names_policy_fields(job_desc)) {
        errno = 0;
        return SLURM_SUCCESS; /* a hold, release, nice, dependency...: nothing the policy judges */
    }
    if (!sp_copy_job || !sp_free_desc || !job_ptr || !(existing = sp_copy_job(job_ptr))) {
        if (err_msg)
            *err_msg = slurm_xstrdup("rejected by cluster policy: the job's record could not be read to judge "
                                     "this change (see slurmctld log)");
        snprintf(line, sizeof(line), "modify job=%u uid=%u verdict=reject rules=job-record-unreadable",
                 sp_modified_job_id(job_desc), submit_uid);
        sp_log(line);
        errno = saved;
        return ESLURM_ACCESS_DENIED;
    }
    req = sp_merged(job_desc, existing, submit_uid);
    rc = sp_call(job_desc, &req, err_msg);
    sp_free_copy(existing);
    errno = sp_errno_after(rc, saved);
    return rc;
}
