#!/bin/sh
# The worker's hook programs, run by worker.Dockerfile with HOOK_BUILD_PACKAGES in the environment:
# slurmpod_hook.c compiled into /usr/local/sbin/slurmpod-prolog, with slurmpod-epilog and
# slurmpod-healthcheck as links to it (the program's name is its hook); prep_slurmpod.so, slurmd's PrEp
# plugin that asks the health agent in-process, in Slurm's plugin directory; and slurmpod_spank.so, the
# SPANK plugin that sets each task's environment and gives slurmd the pod's CPUs (both against this
# image's own Slurm headers, from libslurm-dev: slurmd loads a plugin only when its plugin_version is this
# Slurm's).
# Exactly the packages the compile brought are purged again in this same layer.
set -eu
src=/tmp/slurmpod-hooks
apt-get update
dpkg-query -W -f '${Package}\n' | sort > "$src/before"
apt-get install -y --no-install-recommends $HOOK_BUILD_PACKAGES
gcc -O2 -Wall -Wextra -Werror -DFALLBACK_DIR='"/opt/slurmpod/bin"' -o /usr/local/sbin/slurmpod-prolog \
    "$src/slurmpod_hook.c" "$src/slurmpod_agent_ask.c"
plugindir="$(dirname "$(dpkg -L slurm-wlm-basic-plugins | grep '/prep_script.so$')")"
gcc -O2 -Wall -Wextra -Werror -fPIC -shared -DFALLBACK_DIR='"/opt/slurmpod/bin"' -o "$plugindir/prep_slurmpod.so" \
    "$src/prep_slurmpod.c" "$src/slurmpod_agent_ask.c"
ln -f /usr/local/sbin/slurmpod-prolog /usr/local/sbin/slurmpod-epilog
ln -f /usr/local/sbin/slurmpod-prolog /usr/local/sbin/slurmpod-healthcheck
install -d /usr/local/lib/slurmpod
gcc -O2 -Wall -Wextra -Werror -fPIC -shared -o /usr/local/lib/slurmpod/slurmpod_spank.so \
    "$src/slurmpod_spank.c" "$src/slurmpod_task_env.c" "$src/slurmpod_cpus.c"
dpkg-query -W -f '${Package}\n' | sort > "$src/after"
comm -13 "$src/before" "$src/after" | xargs -r apt-get purge -y
rc=0; /usr/local/sbin/slurmpod-prolog 2>/dev/null || rc=$?; test "$rc" -eq 1  # it runs; no Python hook yet
rm -rf "$src"
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log
