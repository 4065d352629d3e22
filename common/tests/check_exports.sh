#!/bin/sh
# Checks the shipped core's dynamic interface: soname libtutti_core.so.1, -Bsymbolic, and
# no exported symbol other than the tutti_* C functions.
#   check_exports.sh LIBTUTTI_CORE_SO
set -eu
lib=$1
readelf -d "$lib" | grep -q 'Library soname: \[libtutti_core.so.1\]' || {
  echo "FAIL: soname is not libtutti_core.so.1" >&2
  exit 1
}
readelf -d "$lib" | grep -q 'SYMBOLIC' || {
  echo "FAIL: not linked with -Bsymbolic" >&2
  exit 1
}
exported=$(nm -D --defined-only "$lib" | awk '{print $3}')
others=$(echo "$exported" | grep -v '^tutti_' || true)
if [ -n "$others" ]; then
  echo "FAIL: symbols other than tutti_* are exported:" >&2
  echo "$others" | head -20 >&2
  exit 1
fi
count=$(echo "$exported" | grep -c '^tutti_')
echo "ok: $count tutti_* symbols exported, nothing else"
