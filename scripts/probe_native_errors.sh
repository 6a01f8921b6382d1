#!/usr/bin/env bash
# Does a C++ exception raised in prenet's native core reach Python as an exception on this machine? On the GPU
# image of 2026-11-24 and 2026-11-26 (torch 2.11, Python 3.12, pybind11 3.1.0, /opt/gcc's g++ 13.3) each one killed
# the process: the module built there carries its own libstdc++ (ldd lists none) and crashed on the first use of
# the C++ locale, formatting the message's numbers into a stream (backtrace: GpuCatalog::find, then
# ostream::_M_insert<unsigned long>); file streams crashed the same way. The core has used no C++ locale since
# (prenet/file_bytes.hpp); a minimal pybind11 module, and prenet rebuilt without LTO or with -static-libstdc++, had
# not told the cause apart. Where the installed prenet still crashes, this logs what tells it, to OUT_DIR: a
# backtrace (gdb or cuda-gdb, where the machine has one), the library each unwinder symbol binds to, and the
# libraries of the interpreter and of the module, with the C++ runtime symbols the module defines itself.
# Exit status 0 when the installed prenet raises ValueError, 1 when it crashes.
# Usage: bash scripts/probe_native_errors.sh [OUT_DIR]
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

echo "[probe] it crashed: backtrace, unwinder bindings, the libraries of the interpreter and the module"
DEBUGGER="$(command -v gdb || command -v cuda-gdb || true)"
if [ -n "$DEBUGGER" ]; then
  (cd /tmp && timeout 120 "$DEBUGGER" -q -batch -ex run -ex bt --args "$PYTHON" -c "$PROBE") \
    > "$OUT_DIR/native_error_gdb.log" 2>&1
  grep -E "^#[0-9]+" "$OUT_DIR/native_error_gdb.log" | head -12
else
  echo "  no gdb on this machine"
fi
(cd /tmp && LD_DEBUG=bindings "$PYTHON" -c "$PROBE") 2>&1 \
  | grep -E "symbol \`(_Unwind_RaiseException|__cxa_throw|_Unwind_Find_FDE|__gxx_personality_v0)'" \
  | sort -u > "$OUT_DIR/native_error_bindings.log"
sed 's/^ *[0-9]*: *//' "$OUT_DIR/native_error_bindings.log" | head -8
INTERPRETER="$(readlink -f "$PYTHON")"
{
  echo "interpreter: $INTERPRETER"
  ldd "$INTERPRETER"
  echo "unwinder symbols it exports:"
  nm -D --defined-only "$INTERPRETER" 2>&1 | grep -E "_Unwind_|__cxa_|__gxx_" | head -20
  MODULE="$(cd /tmp && "$PYTHON" -c 'import importlib.util as u; print(u.find_spec("prenet._core").origin)')"
  echo "module: $MODULE"
  ldd "$MODULE"
  echo "C++ runtime symbols the module defines itself:"
  nm -D --defined-only "$MODULE" 2>&1 | grep -E "__cxa_throw|_ZNSt6locale" | head -10
} > "$OUT_DIR/native_error_libraries.log" 2>&1
grep -A3 "exports:" "$OUT_DIR/native_error_libraries.log"

exit 1
