#!/usr/bin/env bash
# Installs ptxas into the git-ignored .tools/ folder when it is missing, and prints its path
# (the only thing written to stdout; progress goes to stderr).
#
# ptxas comes from the PyPI package nvidia-cuda-nvcc-cu12, which ships
# nvidia/cuda_nvcc/bin/ptxas. Version 12.9.86 (CUDA 12.9) assembles PTX ISA up to 8.8 for
# sm_80 and sm_90a. Once installed, a run only checks the stamp and the binary: it is quick
# and needs no network.
#
#   ./scripts/install-ptxas.sh            # prints /…/.tools/nvcc/nvidia/cuda_nvcc/bin/ptxas
#   export TLC_PTXAS="$(./scripts/install-ptxas.sh)"
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

package=nvidia-cuda-nvcc-cu12
version=12.9.86
dest="$root/.tools/nvcc"
ptxas="$dest/nvidia/cuda_nvcc/bin/ptxas"
stamp="$dest/.tlc-installed"

installed() {
    [[ -x "$ptxas" && -f "$stamp" && "$(cat "$stamp")" == "$package==$version" ]] &&
        "$ptxas" --version >/dev/null 2>&1
}

if ! installed; then
    echo "install-ptxas: installing $package==$version into $dest" >&2
    if ! python3 -m pip --version >/dev/null 2>&1; then
        echo "install-ptxas: error: python3 with pip is needed to install ptxas" >&2
        exit 1
    fi
    # Install into a fresh folder and move it in place, so an interrupted install never
    # leaves a half-written tree that looks installed.
    tmp="$dest.partial.$$"
    rm -rf "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
        --target "$tmp" "$package==$version" >&2
    echo "$package==$version" >"$tmp/.tlc-installed"
    rm -rf "$dest"
    mkdir -p "$(dirname "$dest")"
    mv "$tmp" "$dest"
    trap - EXIT
    if ! installed; then
        echo "install-ptxas: error: $ptxas does not run after installing $package" >&2
        exit 1
    fi
    echo "install-ptxas: ptxas $("$ptxas" --version | grep -o "release .*")" >&2
fi
echo "$ptxas"
