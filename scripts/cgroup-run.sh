#!/usr/bin/env bash
# Runs a command in a memory cgroup limited to LIMIT, page cache counted, as the larger-than-RAM
# measurements do (docs/memory-budget.md): cgroup v1's memory controller
# (/sys/fs/cgroup/memory, memory.limit_in_bytes) or v2's (memory.max, swap off with
# memory.swap.max = 0). Needs root. The page cache is dropped first (--keep-cache keeps it), so the
# run starts from disk as a cold start does; the cgroup is removed afterwards. --peak prints the
# cgroup's peak usage on stderr at the end. Each rank of `mpirun -np N scripts/cgroup-run.sh ...`
# gets a cgroup of its own (docs/scale-out.md).
#
#   scripts/cgroup-run.sh [--keep-cache] [--peak] LIMIT COMMAND [ARG...]     LIMIT: bytes, or 4G, 512M, ...
#
# The exit status is the command's; a command the limit kills (OOM) exits 137, and the script says
# so on stderr with the cgroup's peak and fail count.
set -euo pipefail

die() { echo "cgroup-run: $*" >&2; exit 2; }

drop_cache=1
print_peak=0
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --keep-cache) drop_cache=0 ;;
    --peak) print_peak=1 ;;
    *) die "unknown option $1" ;;
  esac
  shift
done
[[ $# -ge 2 ]] || die "usage: scripts/cgroup-run.sh [--keep-cache] [--peak] LIMIT COMMAND [ARG...]"
limit_text=$1; shift
[[ $(id -u) -eq 0 ]] || die "needs root (it writes /sys/fs/cgroup)"

# 4G, 512M, 1.5G, 300K, or bytes: powers of 1024.
limit=$(awk -v s="$limit_text" 'BEGIN {
  if (match(s, /^[0-9]+(\.[0-9]+)?[KMGT]?(i?B)?$/) == 0) exit 1
  n = s + 0; u = substr(s, length(n "") + 1, 1)
  m = u == "K" ? 1024 : u == "M" ? 1048576 : u == "G" ? 1073741824 : u == "T" ? 1099511627776 : 1
  printf "%.0f", n * m }') || die "LIMIT '$limit_text' is not a size (e.g. 4G)"
[[ $limit -gt 0 ]] || die "LIMIT '$limit_text' is not a size (e.g. 4G)"

name="latte-run-$$"
if [[ -d /sys/fs/cgroup/memory ]]; then  # v1
  dir=/sys/fs/cgroup/memory/$name
  mkdir "$dir" || die "cannot create $dir"
  echo "$limit" > "$dir/memory.limit_in_bytes"
  # Where swap accounting is on, no swap either: the limit is the memory the run may touch.
  [[ -w "$dir/memory.memsw.limit_in_bytes" ]] && echo "$limit" > "$dir/memory.memsw.limit_in_bytes"
  peak_file=memory.max_usage_in_bytes
  fail_file=memory.failcnt
elif [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then  # v2
  dir=/sys/fs/cgroup/$name
  mkdir "$dir" || die "cannot create $dir"
  echo "$limit" > "$dir/memory.max"
  [[ -w "$dir/memory.swap.max" ]] && echo 0 > "$dir/memory.swap.max"
  peak_file=memory.peak
  fail_file=memory.events
else
  die "no memory cgroup controller here (neither /sys/fs/cgroup/memory nor cgroup v2 with memory)"
fi
cleanup() { rmdir "$dir" 2>/dev/null || true; }
trap cleanup EXIT

if [[ $drop_cache -eq 1 ]]; then
  sync
  echo 3 > /proc/sys/vm/drop_caches || die "cannot drop the page cache"
fi

# The command runs in a child shell that joins the cgroup first, so only it is limited.
status=0
bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' cgroup-run "$dir" "$@" || status=$?
if [[ $status -eq 137 ]]; then
  peak=$(cat "$dir/$peak_file" 2>/dev/null || echo "?")
  echo "cgroup-run: the command was killed (OOM at a $limit_text limit; peak $peak bytes; $(tr '\n' ' ' < "$dir/$fail_file" 2>/dev/null))" >&2
fi
if [[ $print_peak -eq 1 ]]; then
  echo "cgroup-run: peak $(cat "$dir/$peak_file" 2>/dev/null || echo "?") bytes of a $limit_text limit" >&2
fi
# Move nothing back: the child has exited, so the cgroup is empty and rmdir (cleanup) removes it.
exit $status
