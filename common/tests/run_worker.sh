#!/bin/sh
# Runs a core test worker as a job of NP ranks.
#   run_worker.sh local|mpi|gloo NP WORKER
# local: one process, no launcher; mpi: mpirun; gloo: run_gloo.py with a test store.
# Every run is bounded by a timeout so a broken job fails instead of hanging.
set -eu
controller=$1
np=$2
worker=$3
here=$(dirname "$0")
case "$controller" in
  local)
    exec timeout 120 "$worker" "$np"
    ;;
  mpi)
    # Root in containers needs the two OMPI_ALLOW_* variables; more ranks than cores needs
    # --oversubscribe.
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      exec timeout 180 mpirun -np "$np" --oversubscribe "$worker" "$np"
    ;;
  gloo)
    exec python3 "$here/run_gloo.py" -np "$np" --timeout 180 -- "$worker" "$np"
    ;;
  *)
    echo "run_worker.sh: unknown controller '$controller' (local, mpi or gloo)" >&2
    exit 2
    ;;
esac
