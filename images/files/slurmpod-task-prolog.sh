#!/bin/sh
# slurmpod-task-prolog: what slurm.conf's TaskProlog= names on a worker. slurmstepd runs it as the job's
# user before each task and sets each `export NAME=value` line it prints in that task's environment.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_TaskProlog
#
# Both files are written by the worker's start (prolog_epilog/task_env.py), root's and read-only here,
# their names and values validated there: the exports as they are printed, and the scratch base with
# whether TMPDIR is the job's scratch dir too. Nothing here comes from the job's environment but
# SLURM_JOB_ID, and that only when it is a job id. Shell builtins only, but for mkdir and, when the dir
# was there already (another task of the job made it), stat.
exports=/etc/slurmpod/task-prolog.exports
scratch=/etc/slurmpod/task-prolog.scratch

if [ -r "$exports" ]; then
    while IFS= read -r line; do printf '%s\n' "$line"; done < "$exports"
fi
[ -r "$scratch" ] || exit 0
read -r base tmpdir < "$scratch" || exit 0
case ${SLURM_JOB_ID-} in
    '' | *[!0-9]*) exit 0 ;;
esac
[ "${#SLURM_JOB_ID}" -le 10 ] || exit 0
dir=$base/job-$SLURM_JOB_ID

# Made by the job's first task, as the job's user, mode 0700. One already there must be a directory of
# this user's, not a link, with no access for others: another user cannot plant one for this job id in
# the sticky base and read the job's files.
if ! mkdir -m 0700 "$dir" 2>/dev/null; then
    mode=
    if [ -d "$dir" ] && [ ! -h "$dir" ] && [ -O "$dir" ]; then
        mode=$(stat -c %a "$dir" 2>/dev/null)
    fi
    case $mode in
        ?00 | ??00) ;; # no access for group and others
        *)
            echo "slurmpod task-prolog: no scratch directory: $dir is not a private directory of uid $(id -u)" >&2
            exit 0
            ;;
    esac
fi
echo "export SLURMPOD_SCRATCH=$dir"
if [ "$tmpdir" = true ]; then echo "export TMPDIR=$dir"; fi
