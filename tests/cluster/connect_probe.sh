#!/bin/bash
# Open one TCP connection to $1:$2 and say how it went: open, refused, timeout or other (with the error).
# bash's /dev/tcp: every image has bash, not every image has a Python. Ref: https://www.gnu.org/software/bash/manual/bash.html#Redirections
host=$1 port=$2 limit=${3:-3}
err=$(timeout "$limit" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>&1)
rc=$?
if [ "$rc" -eq 0 ]; then
    echo open
elif [ "$rc" -eq 124 ]; then
    echo timeout
elif [[ $err == *"Connection refused"* ]]; then
    echo refused
else
    echo "other: rc=$rc $err"
fi
