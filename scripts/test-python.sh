#!/usr/bin/env bash
# The Python package's tests (python/, called by scripts/test.sh): builds the `tlc` wheel,
# installs it into a virtual environment and runs python/tests with pytest.
#
# Fast on purpose: the wheel is built in the dev profile, so it reuses what `cargo test`
# compiled in target/ (the interpreter crate is optimized even there, see Cargo.toml), and
# stripped, so packing and installing it is quick. Users get a release build from
# `pip install ./python`.
#
# The virtual environment is reused while its inputs are unchanged: it lives under
# ${XDG_CACHE_HOME:-~/.cache}/tlc/ (TLC_TEST_VENV overrides the place), named by a hash of
# the Python version and the package list below, so a fresh clone on the same machine finds
# it; only the tlc wheel is reinstalled on every run. A venv whose setup did not finish
# (no `ready` stamp) is built again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=("maturin>=1.9.4,<2" numpy pytest)
python_version="$(python3 -c 'import sys; print(sys.version)')"
inputs_hash="$(printf '%s\n' "$python_version" "${packages[@]}" | sha256sum | cut -c1-16)"
venv="${TLC_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tlc/test-venv-$inputs_hash}"
wheels=target/python-wheels

mkdir -p "$(dirname "$venv")"
# One run at a time per venv (two test runs on one machine share it): held to the end.
exec 9>"$venv.lock"
flock 9
if [ ! -f "$venv/ready" ]; then
    rm -rf "$venv"
    if ! python3 -m venv "$venv"; then
        echo "test-python.sh: \`python3 -m venv\` failed; install the venv module (Debian/Ubuntu: python3-venv)" >&2
        exit 1
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}"
    touch "$venv/ready"
fi
rm -rf "$wheels"
"$venv/bin/maturin" build --quiet --profile dev --strip -m python/Cargo.toml -o "$wheels"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --force-reinstall "$wheels"/tlc-*.whl
# From outside the source tree, so `import tlc` is the installed wheel, not python/tlc.
tests="$PWD/python/tests"
cd "$venv"
bin/python -m pytest --quiet -p no:cacheprovider "$tests" "$@"
