#!/usr/bin/env bash
# Compile time against kernel size (docs/perf.md, "Compile time"): a measurement, never a
# test. Times `tlc check` and `tlc compile` for sm_80 and sm_90a on generated kernels of
# SIZES statements (scripts/gen_scaling_kernel.py: elementwise `T.Parallel` loops, per-thread
# scalar statements, a long `T.Pipelined` GEMM body) and on a ~10 MB kernel of elementwise
# loops. A run past LIMIT seconds is stopped and printed as `>LIMIT`.
#
#   scripts/compile_scaling.sh                      # target/release/tlc, 2000 8000 32000
#   TLC=path/to/tlc SIZES="2000 8000" KINDS=parallel LIMIT=60 scripts/compile_scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TLC=${TLC:-target/release/tlc}
SIZES=${SIZES:-"2000 8000 32000"}
KINDS=${KINDS:-"parallel scalar pipelined"}
LIMIT=${LIMIT:-300}
BIG=${BIG:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Seconds one command takes (its output discarded), or `>LIMIT`; a refusal is marked `(error)`.
timed() {
    local start end rc=0
    start=$(date +%s.%N)
    timeout "$LIMIT" "$@" >/dev/null 2>"$dir/err" || rc=$?
    end=$(date +%s.%N)
    if [ "$rc" = 124 ]; then
        printf '>%s' "$LIMIT"
    else
        printf '%.2f' "$(echo "$end - $start" | bc)"
        [ "$rc" = 0 ] || printf ' (error: %s)' "$(grep -m1 error "$dir/err" | cut -c1-60)"
    fi
}

row() {
    local name=$1 file=$2
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$(du -h "$file" | cut -f1)" \
        "$(timed "$TLC" check "$file")" \
        "$(timed "$TLC" compile "$file" -o - --target sm_80)" \
        "$(timed "$TLC" compile "$file" -o - --target sm_90a)"
}

echo "| kernel | size | check (s) | compile sm_80 (s) | compile sm_90a (s) |"
echo "|---|---|---|---|---|"
for kind in $KINDS; do
    for n in $SIZES; do
        python3 scripts/gen_scaling_kernel.py "$kind" "$n" >"$dir/k.tir"
        row "$kind $n" "$dir/k.tir"
    done
done
if [ "$BIG" = 1 ]; then
    # About 10 MB: 2 lines of ~60 bytes and a loop line per elementwise statement.
    python3 scripts/gen_scaling_kernel.py parallel 75000 >"$dir/big.tir"
    row "parallel 75000 (10 MB)" "$dir/big.tir"
fi
