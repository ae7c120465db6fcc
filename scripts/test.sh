#!/usr/bin/env bash
# The project's test command (README): builds and runs every test of the workspace.
# It installs what the tests need and a fresh machine lacks (nothing beyond Rust yet; ptxas
# joins here when the PTX back end lands).
set -euo pipefail
cd "$(dirname "$0")/.."

# insta must fail on a changed or missing snapshot, never write one, when run by this script.
export INSTA_UPDATE=no
export CARGO_TERM_COLOR=never

cargo test --workspace --all-targets "$@"
# Doc tests (not part of --all-targets).
cargo test --workspace --doc "$@"
