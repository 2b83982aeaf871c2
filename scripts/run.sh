#!/usr/bin/env bash
# Builds stalkd (release) and runs it in the foreground. Extra arguments go to stalkd,
# e.g. scripts/run.sh -l 127.0.0.1 -p 11300
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release --target stalkd
exec build/release/stalkd "$@"
