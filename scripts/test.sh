#!/usr/bin/env bash
# Command 2 of the README: set up what is missing, then run every test (pytest and ctest).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" || exit 1
cd "$ROOT"
status=0
echo "[test] GoogleTest suite (ctest)"
ctest --test-dir build/cmake --output-on-failure || status=1
echo "[test] Python suite (pytest)"
.venv/bin/python -m pytest -q tests "$@" || status=1
exit $status
