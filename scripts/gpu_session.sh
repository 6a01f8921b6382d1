#!/usr/bin/env bash
# One pass over what a GPU machine can check that ours cannot, within a time budget (minutes, default 9), for a
# session lent a GPU: build prenet with its predictors and the harness against the machine's torch, check that
# an error raised by the native core reaches Python as an error (it crashed on the GPU image of 2026-11-24;
# scripts/probe_native_errors.sh narrows the cause down and keeps a build without LTO where that fixes it),
# run the test suite under that torch, measure the whole-model cases of bench/measure_gpu.py (resumed from
# data/epochs/<GPU>.jsonl), measure the host's cost per operation, calibrate the GPU predictors to the GPU
# (prenet calibrate --gpu), measure what cuDNN's heuristic choice of algorithm costs against benchmarking
# (bench/cudnn_choice.py) and whether a convolution slows down as its process runs more shapes
# (bench/conv_order_effect.py), and collect layer rows for the time left.
# Everything lands in OUT_DIR (default ./gpu-session-out): logs, the epochs file, the host costs, a tarball of
# the layer rows. nlohmann-json's headers, if the machine has none, are looked for in ./.carry (include/ and
# share/cmake/ copied from Debian's nlohmann-json3-dev).
# Usage: bash scripts/gpu_session.sh [MINUTES] [SEED]
set -uo pipefail
MINUTES="${1:-9}"
SEED="${2:-2}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT_DIR="${OUT_DIR:-$ROOT/gpu-session-out}"
mkdir -p "$OUT_DIR"
START=$(date +%s)
left() { echo $(( 60 * MINUTES - ($(date +%s) - START) )); }
say() { echo "[$(( $(date +%s) - START )) s] $*"; }
PYTHON="$(python3 -c 'import sys; print(sys.executable)')"
TORCH_PREFIX="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$TORCH_PREFIX;$ROOT/.carry -DPRENET_BUILD_TESTS=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5"
say "build"
PRENET_BUILD_DIR="$ROOT/build/gpu-session" \
PRENET_CMAKE_ARGS="$CMAKE_ARGS" \
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PYTHON" -m pip install --no-build-isolation --no-deps --no-index -q . \
  > "$OUT_DIR/build.log" 2>&1 || { say "build failed: $OUT_DIR/build.log"; tail -20 "$OUT_DIR/build.log"; exit 1; }
say "does an error of the native core reach Python? (scripts/probe_native_errors.sh)"
PYTHON="$PYTHON" PRENET_CMAKE_ARGS="$CMAKE_ARGS" bash scripts/probe_native_errors.sh "$OUT_DIR"
say "test suite"
timeout $(( $(left) / 3 )) "$PYTHON" -m pytest -q -p no:cacheprovider -n "$(nproc)" -rfE \
  --deselect tests/test_gpu_build.py tests > "$OUT_DIR/pytest.log" 2>&1
grep -E "passed|failed" "$OUT_DIR/pytest.log" | tail -1
GPU="$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name().replace(" ", "_"))')"
say "whole-model epochs"
[ -f "data/epochs/$GPU.jsonl" ] && cp "data/epochs/$GPU.jsonl" "$OUT_DIR/epochs.jsonl"
(cd bench && timeout $(( $(left) / 2 )) "$PYTHON" measure_gpu.py --out "$OUT_DIR/epochs.jsonl" 2>&1 | grep -v Warning)
say "host cost"
(cd bench && timeout 120 "$PYTHON" gpu_host_cost.py --out "$OUT_DIR/host_costs.json" > /dev/null 2>&1)
say "GPU calibration (prenet calibrate --gpu), kept in OUT_DIR"
timeout 240 "$PYTHON" -m prenet calibrate --gpu --no-progress --out "$OUT_DIR/gpu_calibration.json" 2>&1 | tail -2
say "cuDNN's heuristic algorithms against benchmarked ones"
(cd bench && timeout 240 "$PYTHON" cudnn_choice.py --out "$OUT_DIR/cudnn_choice.jsonl" --max-minutes 3 2>&1 | tail -2)
ORDER_S=$(( $(left) - 60 < 270 ? $(left) - 60 : 270 ))
if [ "$ORDER_S" -gt 60 ]; then
  say "does a convolution slow down as its process runs more shapes, as NeuSight's rows do?"
  (cd bench && timeout "$ORDER_S" "$PYTHON" conv_order_effect.py --out "$OUT_DIR/conv_order_effect.jsonl" \
    --shapes 2500 --max-minutes "$(( ORDER_S / 60 ))" 2>&1 | tail -6)
fi
FOLDER="data/gpu/${GPU}_seed$SEED"
if [ "$(left)" -gt 90 ]; then
  say "layer rows, seed $SEED"
  timeout $(( $(left) - 15 )) "$PYTHON" -m prenet collect --kind all --samples 2000 --seed "$SEED" --device cuda \
    --out "$FOLDER" --max-minutes "$(( ($(left) - 30) / 60 ))" --no-progress 2>&1 | tail -2
  tar czf "$OUT_DIR/layer_rows.tgz" "$FOLDER"
fi
say "done: $OUT_DIR"
