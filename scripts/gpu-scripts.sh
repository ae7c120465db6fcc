#!/usr/bin/env bash
# TileLang's example scripts (python/tests/tilelang_scripts/: whole files, only their
# imports changed to tlc.tilelang) run with their own `main()` on a GPU: their own checks
# against torch, their own timings (profiler.do_bench). Needs python3 with the tlc wheel
# and torch (CUDA) installed, no Rust; some scripts need more (triton, einops): those are
# SKIPPED with the module named.
#
#   scripts/gpu-scripts.sh [PYTHON]        (default: python3)
#   ONLY=gemm scripts/gpu-scripts.sh       scripts whose name contains "gemm"
#   TIMEOUT=1800 scripts/gpu-scripts.sh    seconds per script (default 900)
#   OUT=DIR scripts/gpu-scripts.sh         where the logs go (default: a new /tmp folder)
#
# Prints one line per script (PASS / FAIL / XFAIL / SKIP / TIMEOUT) with the lines of its
# output that report times, then a markdown table for docs/perf.md. XFAIL: a failure tlc
# knows (listed below with what tlc lacks), recognized by its message. Exits 1 if a script
# FAILs or TIMEOUTs.
set -u
cd "$(dirname "$0")/.."
PY=${1:-python3}
TIMEOUT=${TIMEOUT:-900}
OUT=${OUT:-$(mktemp -d /tmp/tlc-gpu-scripts.XXXXXX)}
mkdir -p "$OUT"
DIR=python/tests/tilelang_scripts

# Failures tlc knows of: script -> a regex its output matches when it fails that way.
declare -A XFAIL=(
)

if ! "$PY" - <<'PY'
import sys
try:
    import tlc, torch
except ImportError as e:
    sys.exit(f"gpu-scripts.sh: {e}: install the tlc wheel and torch first")
if not torch.cuda.is_available():
    sys.exit("gpu-scripts.sh: torch sees no CUDA device")
print(f"tlc {tlc.__version__}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"{torch.cuda.get_device_name(0)}, python {sys.version.split()[0]}")
PY
then
    exit 1
fi
echo "logs: $OUT"

fail=0
table="| script | result | timings (the script's own prints) |
|---|---|---|"
for path in "$DIR"/*.py; do
    name=$(basename "$path")
    case $name in
        copy_script.py | example_triton_cast_to_fp8.py) continue ;;  # a tool; a helper module
    esac
    if [ -n "${ONLY:-}" ] && [[ $name != *"$ONLY"* ]]; then
        continue
    fi
    log="$OUT/${name%.py}.log"
    start=$(date +%s)
    (cd "$DIR" && timeout "$TIMEOUT" "$PY" "$name") >"$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    missing=$(grep -oE "ModuleNotFoundError: No module named '[^']+'" "$log" | grep -v "'tlc" | head -1)
    if [ $rc -eq 0 ]; then
        result=PASS
    elif [ $rc -eq 124 ]; then
        result=TIMEOUT
        fail=1
    elif [ -n "$missing" ]; then
        result="SKIP (${missing#ModuleNotFoundError: })"
    elif [ -n "${XFAIL[$name]:-}" ] && grep -qE "${XFAIL[$name]}" "$log"; then
        result="XFAIL (known: ${XFAIL[$name]})"
    else
        result=FAIL
        fail=1
    fi
    timings=$(grep -iE 'latency|tflops|[0-9] ?ms\b|ms$' "$log" | grep -viE 'warn|error' | head -12 | tr '\n' ';' | sed 's/;$//; s/;/; /g')
    echo "$result  $name (${secs}s)"
    [ -n "$timings" ] && echo "      $timings"
    if [ "$result" = FAIL ] || [ "$result" = TIMEOUT ]; then
        tail -15 "$log" | sed 's/^/      /'
    fi
    table="$table
| \`$name\` | $result | ${timings//|/\\|} |"
done
echo
echo "$table"
exit $fail
