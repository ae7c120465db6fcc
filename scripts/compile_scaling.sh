#!/usr/bin/env bash
# Compile time against kernel size (docs/perf.md, "Compile time"): a measurement, never a
# test. Times `tlc check` and `tlc compile` for sm_80 and sm_90a on generated kernels of
# SIZES statements (scripts/gen_scaling_kernel.py: elementwise `T.Parallel` loops, per-thread
# scalar statements, a long `T.Pipelined` GEMM body, many small shared buffers) and on two
# ~10 MB kernels (per-thread statements; elementwise loops, which `unroll`'s statement cap
# refuses). A run past LIMIT seconds is stopped and printed as `>LIMIT`.
#
#   scripts/compile_scaling.sh                      # target/release/tlc, 2000 8000 32000
#   TLC=path/to/tlc SIZES="2000 8000" KINDS=parallel LIMIT=60 scripts/compile_scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TLC=${TLC:-target/release/tlc}
SIZES=${SIZES:-"2000 8000 32000"}
KINDS=${KINDS:-"parallel scalar pipelined buffers"}
LIMIT=${LIMIT:-300}
BIG=${BIG:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# CPU seconds (user + sys) one command takes, its output discarded — CPU time, because a
# shared 2-core box's wall time mostly measures its neighbours — or `>LIMIT` when stopped
# at LIMIT seconds of wall time; a refusal is marked `(error: …)`.
timed() {
    local rc=0
    /usr/bin/time -o "$dir/time" -f '%U %S' timeout "$LIMIT" "$@" >/dev/null 2>"$dir/err" || rc=$?
    if [ "$rc" = 124 ]; then
        printf '>%s' "$LIMIT"
    else
        tail -1 "$dir/time" | awk '{printf "%.2f", $1 + $2}'
        # A refusal: the pass that reported it, else the error's first words.
        local by
        by=$(sed -n 's/.*reported by pass `\([a-z-]*\)`.*/\1/p' "$dir/err" | head -1)
        [ -n "$by" ] || by=$(grep -m1 -o 'error: .*' "$dir/err" | cut -c8-48 || true)
        [ "$rc" = 0 ] || printf ' (refused: %s)' "$by"
    fi
}

row() {
    local name=$1 file=$2
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$(du -h "$file" | cut -f1)" \
        "$(timed "$TLC" check "$file")" \
        "$(timed "$TLC" compile "$file" -o - --target sm_80)" \
        "$(timed "$TLC" compile "$file" -o - --target sm_90a)"
}

echo "| kernel | size | check (CPU s) | compile sm_80 (CPU s) | compile sm_90a (CPU s) |"
echo "|---|---|---|---|---|"
for kind in $KINDS; do
    for n in $SIZES; do
        python3 scripts/gen_scaling_kernel.py "$kind" "$n" >"$dir/k.tir"
        row "$kind $n" "$dir/k.tir"
    done
done
if [ "$BIG" = 1 ]; then
    # About 10 MB each: ~45 bytes a scalar statement, ~130 an elementwise loop.
    python3 scripts/gen_scaling_kernel.py scalar 220000 >"$dir/big.tir"
    row "scalar 220000 (10 MB)" "$dir/big.tir"
    python3 scripts/gen_scaling_kernel.py parallel 75000 >"$dir/big.tir"
    row "parallel 75000 (10 MB)" "$dir/big.tir"
fi
