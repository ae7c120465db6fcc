#!/usr/bin/env bash
# The Python package's tests (python/, called by scripts/test.sh): builds the `tlc` wheel,
# installs it into a fresh virtual environment and runs python/tests with pytest.
#
# Fast on purpose: the wheel is built in the dev profile, so it reuses what `cargo test`
# compiled in target/ (the interpreter crate is optimized even there, see Cargo.toml), and
# stripped, so packing and installing it is quick. Users get a release build from
# `pip install ./python`.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/python-venv
wheels=target/python-wheels
rm -rf "$venv" "$wheels"
if ! python3 -m venv "$venv"; then
    echo "test-python.sh: \`python3 -m venv\` failed; install the venv module (Debian/Ubuntu: python3-venv)" >&2
    exit 1
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "maturin>=1.9.4,<2" numpy pytest
"$venv/bin/maturin" build --quiet --profile dev --strip -m python/Cargo.toml -o "$wheels"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$wheels"/tlc-*.whl
# From outside the source tree, so `import tlc` is the installed wheel, not python/tlc.
cd "$venv"
bin/python -m pytest --quiet -p no:cacheprovider ../../python/tests "$@"
