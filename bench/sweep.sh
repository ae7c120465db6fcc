#!/usr/bin/env bash
# The GEMM tables of docs/perf.md: `tlc bench` (result checked against cuBLAS, both timed
# in one process) over the issue's shapes. Needs a GPU and cuBLAS on LD_LIBRARY_PATH.
#
#   bench/sweep.sh TLC_BINARY OUT_DIR PART...
#
# PART: seed     the seed kernel at 12288^3 ... 20480^3 (step 1024) and the other listed shapes
#       configs  the other bench/ configs on the seed sweep and 8192^3
#       best     the fastest sm_90a config (128x256x64, 4 stages) at the seed sweep and the
#                other listed shapes
#       ragged   the masked seed config at ragged shapes
#       swizzle  the seed kernel with no L2 rasterization and panel_size 0 / 10 / 20
#       small    the small-tile config at the shapes with few output tiles
# Each writes OUT_DIR/PART-*.csv (and the table to stdout).
set -eu
cd "$(dirname "$0")/.."
TLC=$1
OUT=$2
shift 2
mkdir -p "$OUT"
SWEEP="12288,12288,12288;13312,13312,13312;14336,14336,14336;15360,15360,15360;16384,16384,16384;17408,17408,17408;18432,18432,18432;19456,19456,19456;20480,20480,20480"
OTHER="4096,2048,1024;4096,4096,4096;8192,8192,8192;1024,1024,14336"
bench() { # name file shapes [extra args]
    local name=$1 file=$2 shapes=$3
    shift 3
    echo "== $name: $file"
    "$TLC" bench "$file" --specialize --sweep "$shapes" "$@" --csv | tee "$OUT/$name.csv"
}
for part in "$@"; do
    case $part in
    seed)
        bench seed-sweep tests/cases/valid/seed000_dims.tir "$SWEEP"
        bench seed-other tests/cases/valid/seed000_dims.tir "$OTHER"
        ;;
    configs)
        for f in bench/gemm_*.tir; do
            case $f in *masked* | *64x64x64*) continue ;; esac
            bench "configs-$(basename "$f" .tir)" "$f" "$SWEEP;8192,8192,8192" --iters 20
        done
        ;;
    best)
        bench best bench/gemm_128x256x64_t256_s4.tir "$SWEEP;$OTHER"
        ;;
    ragged)
        bench ragged bench/gemm_128x128x32_t128_s3_masked.tir \
            "1000,1000,1000;4095,4097,1023;4000,4040,1000;8191,8193,4095"
        ;;
    swizzle)
        tmp=$(mktemp -d)
        sed '/T.use_swizzle/d' tests/cases/valid/seed000_dims.tir > "$tmp/none.tir"
        for p in 0 10 20; do
            sed "s/panel_size=10/panel_size=$p/" tests/cases/valid/seed000_dims.tir > "$tmp/p$p.tir"
        done
        for v in none p0 p10 p20; do
            bench "swizzle-$v" "$tmp/$v.tir" "$SWEEP;8192,8192,8192" --iters 20
        done
        ;;
    small)
        bench small bench/gemm_64x64x64_t128_s4.tir "1024,1024,14336;4096,2048,1024"
        ;;
    *)
        echo "unknown part $part" >&2
        exit 1
        ;;
    esac
done
