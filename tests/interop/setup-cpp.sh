#!/usr/bin/env bash
# Installs the official RocketMQ C++ client (librocketmq.so inside the PyPI wheel
# rocketmq==0.4.4) into a virtualenv for tests/interop_cpp.rs:
#     ${CARGO_TARGET_DIR:-target}/interop-venv
# No system packages are needed: the wheel bundles librocketmq.so and its zlib.
#
# Exit 0 = installed and importable. Otherwise prints a loud SKIPPING message, removes
# the half-made venv (the test skips only when the venv is absent) and exits 1, so a
# caller can do:  tests/interop/setup-cpp.sh || export RMQ_INTEROP_CPP=skipped
set -uo pipefail
cd "$(dirname "$0")/../.."

target="${CARGO_TARGET_DIR:-target}"
venv="${RMQ_INTEROP_VENV:-$target/interop-venv}"
python="${PYTHON:-python3}"

skip() {
    rm -rf "$venv"
    echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
    echo "!!! SKIPPING C++ interop: wheel could not be installed ($1)" >&2
    echo "!!! tests/interop_cpp.rs will skip; nothing was tested against the C++ client" >&2
    echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
    exit 1
}

check() {
    "$venv/bin/python" -c 'import rocketmq.client' 2>/dev/null
}

if [ -x "$venv/bin/python" ] && check; then
    echo "C++ interop: using $venv (rocketmq wheel already installed)"
    exit 0
fi

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) skip "the rocketmq==0.4.4 wheel ships librocketmq.so for Linux x86_64 only" ;;
esac

command -v "$python" >/dev/null 2>&1 || skip "$python not found"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv" || skip "python3 -m venv failed (install python3-venv?)"
"$venv/bin/pip" install --disable-pip-version-check --quiet rocketmq==0.4.4 ||
    skip "pip install rocketmq==0.4.4 failed"
check || skip "rocketmq.client does not import (librocketmq.so did not load)"
echo "C++ interop: installed rocketmq==0.4.4 into $venv"
