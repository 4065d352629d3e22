#!/bin/sh
# Runs a core test worker as a job of NP ranks.
#   run_worker.sh local|mpi|gloo|gloo2hosts NP CORE_LIBRARY RUN_GLOO_PY WORKER [WORKER_ARGS...]
# local: one process, no launcher; mpi: mpirun; gloo: run_gloo.py with a test store;
# gloo2hosts: the same with the ranks split into two simulated hosts.
# Workers link libtutti_core.so.1 by soname, like a framework plugin; Bazel's runfiles hold
# the library as libtutti_core.so, so a private directory with the soname link goes on
# LD_LIBRARY_PATH. Every run is bounded by a timeout so a broken job fails instead of hanging.
set -eu
controller=$1
np=$2
core=$3
run_gloo=$4
shift 4

libdir=$(mktemp -d)
trap 'rm -rf "$libdir"' EXIT
ln -s "$(cd "$(dirname "$core")" && pwd)/$(basename "$core")" "$libdir/libtutti_core.so.1"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

case "$controller" in
  local)
    timeout 120 "$@"
    ;;
  mpi)
    # Root in containers needs the two OMPI_ALLOW_* variables; more ranks than cores needs
    # --oversubscribe.
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout 180 mpirun -np "$np" --oversubscribe -x LD_LIBRARY_PATH "$@"
    ;;
  gloo)
    python3 "$run_gloo" -np "$np" --timeout 180 -- "$@"
    ;;
  gloo2hosts)
    python3 "$run_gloo" -np "$np" --hosts 2 --timeout 180 -- "$@"
    ;;
  *)
    echo "run_worker.sh: unknown controller '$controller' (local, mpi, gloo or gloo2hosts)" >&2
    exit 2
    ;;
esac
