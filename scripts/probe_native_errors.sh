#!/usr/bin/env bash
# Does a C++ exception raised in prenet's native core reach Python as an exception on this machine? On the GPU
# image of 2026-11-24 (torch 2.11, Python 3.12, pybind11 3.1.0, g++ 13.3) each one killed the process with a
# segmentation fault. Where the installed prenet crashes, this narrows the cause down, each step logged to OUT_DIR:
#   1. a backtrace of the crash (gdb, where the machine has it) and the library each unwinder symbol binds to;
#   2. a one-function pybind11 module that throws, built by this compiler without and with -flto: a crash there
#      is the toolchain's or pybind11's, not prenet's;
#   3. prenet rebuilt without link-time optimisation (pybind11_add_module adds -flto unless
#      CMAKE_INTERPROCEDURAL_OPTIMIZATION is set) and installed where that fixes it.
# Exit status 0 when the installed (or rebuilt) prenet raises ValueError, 1 when it still crashes.
# Usage: bash scripts/probe_native_errors.sh [OUT_DIR]; PRENET_CMAKE_ARGS is passed on to the rebuild.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${1:-$ROOT/gpu-session-out}"
mkdir -p "$OUT_DIR"
PYTHON="$(command -v "${PYTHON:-python3}")"
PYTHON="$("$PYTHON" -c 'import sys; print(sys.executable)')"
PROBE="import prenet
try:
    prenet.find_gpu('T5000')
except ValueError as error:
    print('ValueError:', str(error)[:70])"

raises() {  # $1: log file; runs the probe outside the checkout, so the installed prenet is the one imported
  (cd /tmp && "$PYTHON" -X faulthandler -c "$PROBE") > "$1" 2>&1
  local status=$?
  echo "  exit $status: $(head -c 200 "$1" | tr '\n' ' ')"
  return $status
}

echo "[probe] installed prenet"
raises "$OUT_DIR/native_error.log" && exit 0

echo "[probe] it crashed; backtrace and unwinder bindings"
if command -v gdb > /dev/null; then
  (cd /tmp && gdb -q -batch -ex run -ex bt --args "$PYTHON" -c "$PROBE") > "$OUT_DIR/native_error_gdb.log" 2>&1
  grep -E "^#[0-9]+" "$OUT_DIR/native_error_gdb.log" | head -12
else
  echo "  no gdb on this machine"
fi
(cd /tmp && LD_DEBUG=bindings "$PYTHON" -c "$PROBE") 2>&1 \
  | grep -E "symbol \`(_Unwind_RaiseException|__cxa_throw|_Unwind_Find_FDE|__gxx_personality_v0)'" \
  | sort -u > "$OUT_DIR/native_error_bindings.log"
sed 's/^ *[0-9]*: *//' "$OUT_DIR/native_error_bindings.log" | head -8

echo "[probe] a minimal pybind11 module that throws, built by this compiler"
WORK="$(mktemp -d)"
cat > "$WORK/throws.cpp" << 'EOF'
#include <stdexcept>
#include <pybind11/pybind11.h>
PYBIND11_MODULE(throws, m) {
    m.def("throw_invalid_argument", [] { throw std::invalid_argument("from C++"); });
}
EOF
INCLUDES="$("$PYTHON" -m pybind11 --includes)"
SUFFIX="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
for flags in "-O2" "-O2 -flto"; do
  rm -f "$WORK"/throws*.so
  # shellcheck disable=SC2086  # the flags and include options are separate words
  if ! g++ -std=c++17 -shared -fPIC -fvisibility=hidden $flags $INCLUDES "$WORK/throws.cpp" \
       -o "$WORK/throws$SUFFIX" > "$OUT_DIR/minimal_build.log" 2>&1; then
    echo "  $flags: build failed ($OUT_DIR/minimal_build.log)"; continue
  fi
  (cd "$WORK" && "$PYTHON" -c "import throws
try:
    throws.throw_invalid_argument()
except ValueError:
    print('ValueError')") > "$OUT_DIR/minimal_run.log" 2>&1
  echo "  $flags: exit $? ($(head -c 100 "$OUT_DIR/minimal_run.log" | tr '\n' ' '))"
done
rm -rf "$WORK"

echo "[probe] prenet rebuilt without link-time optimisation"
PRENET_BUILD_DIR="$ROOT/build/no-lto" \
PRENET_CMAKE_ARGS="${PRENET_CMAKE_ARGS:-} -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF" \
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
  "$PYTHON" -m pip install --no-build-isolation --no-deps --no-index -q "$ROOT" > "$OUT_DIR/no_lto_build.log" 2>&1 \
  || { echo "  build failed: $OUT_DIR/no_lto_build.log"; exit 1; }
raises "$OUT_DIR/native_error_no_lto.log" && { echo "  fixed without LTO: that build stays installed"; exit 0; }
exit 1
