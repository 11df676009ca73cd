/*
 * fastpath.c - the plugin's built-in tier rules in C, over the table Python compiles from the policy.
 *
 * Python owns the policy: slurmpod.slurm_plugins.fastpath turns a loaded policy into a slurmpod_fast_t,
 * and slurmpod_fast_decide applies the same rules as slurmpod.policy (tier_rules.check, decide.decide)
 * to one request without entering Python (no GIL, no thread state, no objects): GPU jobs kept out of
 * CPU-only partitions, tier matching by partition or QoS, access by user or account, time caps, requeue
 * and the grace signal. It answers only what it can answer exactly like Python, and returns 0 (ask
 * Python) for everything else: site rules, an unusable policy, access by group, a multi-node job under a
 * topology rule, any string that is not printable ASCII, a value too long for the buffers.
 * tests/unit/slurm_plugins/test_fastpath.py compiles this file on its own and checks, over generated
 * policies and requests, that every answer it gives is byte for byte the answer of the Python path.
 * Ref: https://slurm.schedmd.com/job_submit_plugins.html
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fastpath.h"
#include "slurmpod_job.h"

#define SPF_NO_VAL 0xfffffffeu   /* slurm.h NO_VAL */
#define SPF_NO_VAL16 0xfffeu     /* slurm.h NO_VAL16 */
#define SPF_INFINITE 0xffffffffu /* slurm.h INFINITE */
#define SPF_KILL_JOB_BATCH 0x1u  /* slurm.h KILL_JOB_BATCH: --signal=B: */
#define SPF_MAX_TOKENS 32

/* Printable ASCII only: Python would decode anything else (and its log line would differ). */
static int spf_printable(const char *s)
{
    for (; s && *s; s++)
        if ((unsigned char) *s < 0x20 || (unsigned char) *s > 0x7e)
            return 0;
    return 1;
}

/* The quote Python's repr() puts around s: ' unless s holds ' and no "; 0 when repr would escape
 * something (a backslash, or both quotes), which C leaves to Python. */
static char spf_quote(const char *s)
{
    int single = 0, dbl = 0;

    for (; *s; s++) {
        if (*s == '\\')
            return 0;
        single |= *s == '\'';
        dbl |= *s == '"';
    }
    return single ? (dbl ? 0 : '"') : '\'';
}

/* s[0..n) is one of the names in "|a|b|" (names hold no '|'). */
static int spf_in(const char *list, const char *s, size_t n)
{
    const char *p = list;

    while (p && *p == '|' && p[1]) {
        const char *end = strchr(p + 1, '|');
        if (!end)
            return 0;
        if ((size_t) (end - p - 1) == n && !memcmp(p + 1, s, n))
            return 1;
        p = end;
    }
    return 0;
}

typedef struct { const char *s; size_t n; } spf_tok_t;

/* Python: tuple(p.strip() for p in partition.split(",") if p.strip()); -1 when there are too many. */
static int spf_split(const char *s, spf_tok_t *tok)
{
    int n = 0;

    while (s && *s) {
        const char *end = strchr(s, ',');
        const char *b = s, *e = end ? end : s + strlen(s);
        while (b < e && *b == ' ')
            b++;
        while (e > b && e[-1] == ' ')
            e--;
        if (e > b) {
            if (n == SPF_MAX_TOKENS)
                return -1;
            tok[n].s = b;
            tok[n++].n = (size_t) (e - b);
        }
        s = end ? end + 1 : NULL;
    }
    return n;
}

/* A count: 1 and *value when s..e is all digits, 0 when it is not a count, -1 when it has so many
 * digits that C cannot be sure of the sum (Python decides). */
static int spf_count(const char *s, const char *e, uint64_t *value)
{
    uint64_t v = 0;
    const char *p;

    if (s == e)
        return 0;
    for (p = s; p < e; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        v = v * 10 + (uint64_t) (*p - '0');
    }
    if (e - s > 9)
        return -1;
    *value = v;
    return 1;
}

static int spf_type_char(char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && ((c >= '0' && c <= '9') || c == '.' || c == '-'));
}

/* request.gpu_count: entries split on , and ;, stripped, each matching
 * ^gres[/:]gpu(?::TYPE)?(?:[:=]COUNT)?$ with TYPE [A-Za-z_][\w.-]* and COUNT \d+ (1 without a count).
 * TYPE holds no ':' or '=', so the longest TYPE is the only one that can match.
 * Returns 0 when C cannot be sure (a count of 10 digits or more). */
static int spf_gpus(const char *tres, uint64_t *total)
{
    *total = 0;
    while (tres && *tres) {
        const char *end = tres + strcspn(tres, ",;");
        const char *b = tres, *e = end, *r;
        uint64_t count = 1;
        int match = 0;

        while (b < e && *b == ' ')
            b++;
        while (e > b && e[-1] == ' ')
            e--;
        if (e - b >= 8 && !memcmp(b, "gres", 4) && (b[4] == '/' || b[4] == ':') && !memcmp(b + 5, "gpu", 3)) {
            r = b + 8;
            if (r + 1 < e && *r == ':' && spf_type_char(r[1], 1))
                for (r += 2; r < e && spf_type_char(*r, 0); r++)
                    ;
            if (r == e)
                match = 1;
            else if (*r == ':' || *r == '=')
                match = spf_count(r + 1, e, &count);
            if (match < 0)
                return 0;
        }
        if (match)
            *total += count;
        tres = *end ? end + 1 : end;
    }
    return 1;
}

/* Python's ordering of two ASCII names. */
static int spf_cmp(const spf_tok_t *a, const spf_tok_t *b)
{
    int c = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
    return c ? c : (a->n > b->n) - (a->n < b->n);
}

typedef struct {
    char text[1024];
    size_t len;
    int full;
} spf_buf_t;

static void spf_add(spf_buf_t *b, const char *sep, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void spf_add(spf_buf_t *b, const char *sep, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->full)
        return;
    if (b->len && sep) {
        n = snprintf(b->text + b->len, sizeof(b->text) - b->len, "%s", sep);
        if (n < 0 || (size_t) n >= sizeof(b->text) - b->len) {
            b->full = 1;
            return;
        }
        b->len += (size_t) n;
    }
    va_start(ap, fmt);
    n = vsnprintf(b->text + b->len, sizeof(b->text) - b->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t) n >= sizeof(b->text) - b->len)
        b->full = 1;
    else
        b->len += (size_t) n;
}

int slurmpod_fast_decide(const slurmpod_fast_t *t, const slurmpod_req_t *req, const char *user,
                         slurmpod_out_t *out)
{
    spf_tok_t parts[SPF_MAX_TOKENS];
    const slurmpod_fast_tier_t *tiers[8];
    spf_buf_t notes = { .len = 0 }, rules = { .len = 0 }, reject = { .len = 0 };
    const char *qos = (req->qos && req->qos[0]) ? req->qos : NULL;
    const char *account = (req->account && req->account[0]) ? req->account : NULL;
    const char *partition = (req->partition && req->partition[0]) ? req->partition : NULL;
    uint64_t per_job, per_node, per_task, per_socket;
    uint32_t nodes, ntiers = 0, i;
    int nparts, gpus, n;
    char quote;

    /* A modification is judged on the merged job, with its own rules (decide._modification): Python's. */
    if (!t || !t->ok || req->is_modify || !user || !user[0] || !spf_printable(user) || !spf_printable(req->partition) ||
        !spf_printable(req->qos) || !spf_printable(req->account) || !spf_printable(req->tres_per_node) ||
        !spf_printable(req->tres_per_job) || !spf_printable(req->tres_per_task) ||
        !spf_printable(req->tres_per_socket))
        return 0;
    if ((nparts = spf_split(partition, parts)) < 0)
        return 0;
    if (!spf_gpus(req->tres_per_job, &per_job) || !spf_gpus(req->tres_per_node, &per_node) ||
        !spf_gpus(req->tres_per_task, &per_task) || !spf_gpus(req->tres_per_socket, &per_socket))
        return 0;
    nodes = (req->min_nodes != SPF_NO_VAL && req->min_nodes > 0) ? req->min_nodes : 1;
    gpus = per_job > 0 || per_node > 0 || per_task > 0 || per_socket > 0; /* JobRequest.gpus: every form */

    /* tier_rules.check: GPU jobs are refused in CPU-only partitions (the first such name, sorted). */
    if (gpus) {
        const spf_tok_t *first = NULL;
        for (n = 0; n < nparts; n++)
            if (spf_in(t->cpu_only, parts[n].s, parts[n].n) && (!first || spf_cmp(&parts[n], first) < 0))
                first = &parts[n];
        if (first) {
            spf_add(&reject, NULL, "partition %.*s has no GPUs; submit GPU jobs to a GPU partition",
                    (int) first->n, first->s);
            spf_add(&rules, NULL, "cpu-only-partition");
            out->refusal = SP_REFUSE_GRES;
            goto decided;
        }
    }
    /* tiers_of: by partition or QoS, lowest first; else the default tier. */
    for (i = 0; i < t->ntiers && i < 8; i++) {
        const slurmpod_fast_tier_t *tier = &t->tiers[i];
        int hit = qos && spf_in(tier->qos, qos, strlen(qos));
        for (n = 0; n < nparts && !hit; n++)
            hit = spf_in(tier->partitions, parts[n].s, parts[n].n);
        if (hit)
            tiers[ntiers++] = tier;
    }
    if (!ntiers && t->has_default && t->default_tier < t->ntiers && t->default_tier < 8)
        tiers[ntiers++] = &t->tiers[t->default_tier];
    for (i = 0; i < ntiers; i++) {
        const slurmpod_fast_tier_t *tier = tiers[i];
        if (tier->everyone || spf_in(tier->users, user, strlen(user)) ||
            (account && spf_in(tier->accounts, account, strlen(account))))
            continue;
        if (tier->has_groups)
            return 0; /* the user's groups are Python's to resolve */
        spf_add(&reject, NULL, "user %s may not use the %s tier (account %s)", user, tier->name,
                account ? account : "(default)");
        spf_add(&rules, NULL, "tier-access");
        out->refusal = SP_REFUSE_ACCESS;
        goto decided;
    }
    if (ntiers) {
        const slurmpod_fast_tier_t *cap = NULL, *lowest = tiers[0];
        for (i = 0; i < ntiers; i++)
            if (tiers[i]->has_cap && (!cap || tiers[i]->max_time < cap->max_time))
                cap = tiers[i];
        if (cap) {
            if (req->time_limit == SPF_NO_VAL) {
                out->set |= SP_SET_TIME_LIMIT;
                out->time_limit = cap->max_time;
                spf_add(&notes, "; ", "time limit set to the %s cap of %u min", cap->name, cap->max_time);
                spf_add(&rules, ",", "tier-time-cap");
            } else if (req->time_limit > cap->max_time) {
                char asked[32];
                if (req->time_limit == SPF_INFINITE)
                    snprintf(asked, sizeof(asked), "UNLIMITED");
                else
                    snprintf(asked, sizeof(asked), "%u min", req->time_limit);
                if (cap->clamp) {
                    out->set |= SP_SET_TIME_LIMIT;
                    out->time_limit = cap->max_time;
                    spf_add(&notes, "; ", "time limit lowered from %s to %u min", asked, cap->max_time);
                } else {
                    spf_add(&reject, NULL, "time limit %s exceeds the %s tier's cap of %u min", asked, cap->name,
                            cap->max_time);
                    out->refusal = SP_REFUSE_TIME;
                }
                spf_add(&rules, ",", "tier-time-cap");
            }
        }
        if (lowest->requeue && (req->requeue == SPF_NO_VAL16 || req->requeue == 0)) {
            out->set |= SP_SET_REQUEUE;
            out->requeue = 1;
            spf_add(&notes, "; ", "%s", lowest->note_requeue);
            spf_add(&rules, ",", "tier-requeue");
        }
        if (lowest->has_grace && (req->warn_signal == SPF_NO_VAL16 || req->warn_signal == 0)) {
            uint32_t flags = req->warn_flags == SPF_NO_VAL16 ? 0 : req->warn_flags;
            out->set |= SP_SET_WARN_SIGNAL | SP_SET_WARN_TIME | SP_SET_WARN_FLAGS;
            out->warn_signal = lowest->grace_signal;
            out->warn_time = lowest->grace_seconds;
            out->warn_flags = lowest->grace_batch ? flags | SPF_KILL_JOB_BATCH : flags;
            spf_add(&notes, "; ", "%s", lowest->note_grace);
            spf_add(&rules, ",", "tier-grace-signal");
        }
    }
    /* topology_rules.check: only multi-node jobs (GPU jobs, with gpuJobsOnly) are placed: Python's. */
    if (!reject.len && t->topology_active && nodes > 1 && (!t->gpu_jobs_only || gpus))
        return 0;

decided:
    if (notes.full || rules.full || reject.full || strlen(user) >= sizeof(out->user))
        return 0;
    memcpy(out->user, user, strlen(user) + 1); /* as Python fills it: the name this answer was for */
    if (reject.len) {
        out->verdict = SP_VERDICT_REJECT;
        out->set = 0;
        out->time_limit = out->requeue = out->warn_signal = out->warn_time = out->warn_flags = 0;
        memcpy(out->message, reject.text, reject.len + 1);
    } else {
        out->verdict = out->set ? SP_VERDICT_MODIFY : SP_VERDICT_ACCEPT;
        memcpy(out->message, notes.text, notes.len + 1);
    }
    if (!(quote = spf_quote(out->message)))
        return 0;
    {
        char job[16];
        static const char *verdicts[] = { "accept", "modify", "reject" };
        if (req->job_id != SPF_NO_VAL && req->job_id != 0)
            snprintf(job, sizeof(job), "%u", req->job_id);
        else
            snprintf(job, sizeof(job), "new");
        n = snprintf(out->log, sizeof(out->log), "submit job=%s user=%s partition=%s verdict=%s rules=%s message=%c%s%c",
                     job, user, partition ? partition : "-",
                     verdicts[out->verdict], rules.len ? rules.text : "-", quote, out->message, quote);
        if (n < 0 || (size_t) n >= sizeof(out->log))
            return 0;
    }
    return 1;
}
