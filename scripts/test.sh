#!/usr/bin/env bash
# The project's test command (README): builds and runs every test of the workspace, then
# the Python package's (scripts/test-python.sh: wheel, fresh venv, pytest).
# It installs what the tests need and a fresh machine lacks: ptxas (scripts/install-ptxas.sh,
# into the git-ignored .tools/), which compiler/tests/ptxas.rs runs on every emitted PTX.
set -euo pipefail
cd "$(dirname "$0")/.."

# insta must fail on a changed or missing snapshot, never write one, when run by this script.
export INSTA_UPDATE=no
export CARGO_TERM_COLOR=never

# ptxas: installed on first use, then found offline; the tests fail (never skip) without it.
TLC_PTXAS="$(./scripts/install-ptxas.sh)"
export TLC_PTXAS

cargo test --workspace --all-targets "$@"
# Doc tests (not part of --all-targets).
cargo test --workspace --doc "$@"
# The Python package, built from what the tests above compiled (scripts/test-python.sh).
./scripts/test-python.sh
