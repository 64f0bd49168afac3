#!/bin/sh
# Runs "$@" under heaptrack's malloc hooks, keeping the process id and leaving stdout to the
# program (the `heaptrack` command prints its own lines there, and a benchmark reads its child's
# first line). The profile goes to ${HEAPTRACK_OUT:-/tmp}/heaptrack.<pid>.gz; read it with
#   heaptrack_print -f FILE -F stacks.txt --flamegraph-cost-type peak
# For `bench-hpa-plus`, built with the C library's malloc so that the hooks see the heap:
#   cargo build --profile dist -p plimsoll-e2e --features system-allocator --bin bench-hpa-plus
#   BENCH_HPA_PLUS_PROFILE=scripts/heaptrack-child.sh BENCH_HPA_PLUS_PROCESSES=4 … target/dist/bench-hpa-plus
# (docs/benchmarks.md, "Memory that divides with shards"). Needs Debian's heaptrack.
set -eu
lib=$(dirname "$(readlink -f "$(command -v heaptrack)")")/../lib/heaptrack
[ -f "$lib/libheaptrack_preload.so" ] || { echo "heaptrack-child: no heaptrack libraries under $lib" >&2; exit 1; }
pipe=$(mktemp -u /tmp/heaptrack-fifo.XXXXXX)
mkfifo "$pipe"
"$lib/libexec/heaptrack_interpret" < "$pipe" | gzip -1 -c > "${HEAPTRACK_OUT:-/tmp}/heaptrack.$$.gz" &
LD_PRELOAD="$lib/libheaptrack_preload.so" DUMP_HEAPTRACK_OUTPUT="$pipe" exec "$@"
