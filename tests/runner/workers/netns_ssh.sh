#!/bin/sh
# Stands in for ssh in the multi-host tests: "connects" to a host that lives in a network
# namespace. Usage as ssh: netns_ssh.sh [-o OPT]... [-p PORT] [-i FILE] HOST COMMAND
#
# Like sshd, it runs COMMAND through a shell in a new session, so that the launcher can
# only stop it the way it stops a real remote rank: by closing the connection (stdin).
# NETNS_SSH_HOST and NETNS_SSH_NAMESPACE name the one host it can reach; every call is
# appended to NETNS_SSH_LOG.
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-p|-i) shift 2 ;;
    *) break ;;
  esac
done
host=$1
shift
printf '%s\n' "$host $*" >> "$NETNS_SSH_LOG"
if [ "$host" != "$NETNS_SSH_HOST" ]; then
  echo "ssh: connect to host $host port 22: No route to host" >&2
  exit 255
fi
exec setsid -w ip netns exec "$NETNS_SSH_NAMESPACE" sh -c "$*"
