#!/bin/sh
# run_worker.sh with the project's NCCL (pip nvidia-nccl-cu13 in .venv, which tools/setup
# installs) on TUTTI_GPU_LIBRARY_PATH. Bazel's runfiles link back to the source tree, whose
# root holds .venv.
set -eu
here=$(dirname "$(readlink -f "$0")")
root=$(cd "$here/../../.." && pwd)
for dir in "$root"/.venv/lib/python3*/site-packages/nvidia/nccl/lib; do
  [ -d "$dir" ] && TUTTI_GPU_LIBRARY_PATH="$dir${TUTTI_GPU_LIBRARY_PATH:+:$TUTTI_GPU_LIBRARY_PATH}"
done
export TUTTI_GPU_LIBRARY_PATH="${TUTTI_GPU_LIBRARY_PATH:-}"
exec "$here/../run_worker.sh" "$@"
