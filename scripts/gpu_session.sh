#!/usr/bin/env bash
# One pass over what a GPU machine can check that ours cannot, within a time budget (minutes, default 9), for a
# session lent a GPU, most telling first, each step cut to the time left: build prenet with its predictors and the
# harness against the machine's torch; check that an error raised by the native core reaches Python as an error (it
# crashed on the GPU images of 2026-11-24 and -26, until the core stopped using the C++ locale;
# scripts/probe_native_errors.sh logs what tells the cause where it still does); the device time of each operator
# in the H100 validation's steps under the profiler (bench/gpu_step_device_profile.py); the tests that run only where
# CUDA is (tests/test_cuda_paths.py); the operators prenet costs for a GPU step against those the GPU dispatches
# (bench/gpu_trace_vs_device.py); calibrate the GPU predictors to the GPU (prenet calibrate --gpu); the H100
# validation traced under that torch; the rest of the test suite under it; where a host-bound step's host time goes,
# phase by phase (bench/gpu_step_host_profile.py); bench/measure_gpu.py's whole-model cases not yet in
# data/epochs/<GPU>.jsonl; the host's cost per operation; what cuDNN's heuristic choice of algorithm costs against
# benchmarking (bench/cudnn_choice.py, measured twice already); whether a convolution slows
# down as its process runs more shapes (bench/conv_order_effect.py, where 5 minutes are left); layer rows for the
# time left. Everything lands in OUT_DIR (default ./gpu-session-out): logs, the epochs file, the host costs, a
# tarball of the layer rows. nlohmann-json's headers, if the machine has none, are looked for in ./.carry (include/
# and share/cmake/ copied from Debian's nlohmann-json3-dev). The repository is larger than a device call carries:
# `bash scripts/device_tree.sh slim` before the call (carry [".carry", ".gpu-carry"]), `restore` after it.
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
cap() { local left_s; left_s="$(left)"; echo $(( $1 < left_s ? $1 : left_s )); }  # a step's limit: $1 s at most
worth() { [ "$(left)" -gt "$1" ]; }  # is there time left for a step that needs $1 s to say anything?
say() { echo "[$(( $(date +%s) - START )) s] $*"; }
# ../shared (the NeuSight set, the H100 validation) travels as .gpu-carry/shared.tgz (scripts/device_tree.sh slim)
[ -d ../shared ] || [ ! -f .gpu-carry/shared.tgz ] || tar xzf .gpu-carry/shared.tgz -C ..
[ -d ../shared/data/neusight ] && export PRENET_NEUSIGHT="$(cd ../shared/data/neusight && pwd)"  # from bench/ too
PYTHON="$(python3 -c 'import sys; print(sys.executable)')"
TORCH_PREFIX="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$TORCH_PREFIX;$ROOT/.carry -DPRENET_BUILD_TESTS=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5"
build_and_install() {  # $1: log file; $2: extra CMake arguments
  PRENET_BUILD_DIR="$ROOT/build/gpu-session" PRENET_CMAKE_ARGS="$CMAKE_ARGS ${2:-}" \
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PYTHON" -m pip install --no-build-isolation --no-deps --no-index -q . \
    > "$1" 2>&1
}
say "build"
if ! build_and_install "$OUT_DIR/build.log"; then
  say "build failed ($OUT_DIR/build.log); the rest runs on a build without the harness"
  grep -E "error|Error" "$OUT_DIR/build.log" | head -20
  build_and_install "$OUT_DIR/build_no_harness.log" -DPRENET_BUILD_HARNESS=OFF \
    || { say "that failed too"; tail -20 "$OUT_DIR/build_no_harness.log"; exit 1; }
fi
say "does an error of the native core reach Python? (scripts/probe_native_errors.sh)"
PYTHON="$PYTHON" bash scripts/probe_native_errors.sh "$OUT_DIR"
say "device time per operator in the H100 validation's steps (bench/gpu_step_device_profile.py)"
limit="$(cap 240)"
(cd bench && timeout "$limit" "$PYTHON" gpu_step_device_profile.py --measure --out "$OUT_DIR/device_profile.jsonl" \
  --max-minutes "$(( limit / 60 - 1 ))" 2>&1 | grep -v Warning | tail -14)
say "the tests that need CUDA (tests/test_cuda_paths.py)"
timeout -s INT -k 10 "$(cap 90)" "$PYTHON" -m pytest -v --tb=short -p no:cacheprovider -rfE \
  tests/test_cuda_paths.py > "$OUT_DIR/pytest_cuda.log" 2>&1
grep -E "passed|failed" "$OUT_DIR/pytest_cuda.log" | tail -1
say "the operators prenet costs for a GPU step against the ones the GPU dispatches"
(cd bench && timeout "$(cap 90)" "$PYTHON" gpu_trace_vs_device.py --out "$OUT_DIR/gpu_trace_vs_device.md" 2>&1 \
  | tail -3)
GPU="$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name().replace(" ", "_"))')"
if worth 120; then
  say "GPU calibration (prenet calibrate --gpu), kept in OUT_DIR"
  timeout "$(cap 150)" "$PYTHON" -m prenet calibrate --gpu --no-progress --out "$OUT_DIR/gpu_calibration.json" \
    2>&1 | tail -2
fi
if worth 90; then
  say "the H100 validation traced under this machine's torch (bench/validate_h100.py)"
  (cd bench && timeout "$(cap 120)" "$PYTHON" validate_h100.py --out "$OUT_DIR/validate_h100_trace.md" 2>&1 | tail -3)
fi
if worth 90; then
  say "test suite"
  # SIGINT at the limit, so that pytest still prints what failed so far; -v names each test as it ends
  timeout -s INT -k 20 "$(cap 150)" "$PYTHON" -m pytest -v --tb=short -p no:cacheprovider -n "$(nproc)" -rfE \
    --deselect tests/test_gpu_build.py --ignore tests/test_cuda_paths.py tests > "$OUT_DIR/pytest.log" 2>&1
  grep -E "passed|failed" "$OUT_DIR/pytest.log" | tail -1
fi
if worth 60; then
  say "where a host-bound step's host time goes (ResNet-18, batch 16: 30% under on the shared H100 set)"
  (cd bench && timeout "$(cap 120)" "$PYTHON" gpu_step_host_profile.py --out "$OUT_DIR/step_host_profile.md" \
    2>&1 | sed -n '5,27p')
fi
if worth 90; then
  say "whole-model epochs"
  [ -f "data/epochs/$GPU.jsonl" ] && cp "data/epochs/$GPU.jsonl" "$OUT_DIR/epochs.jsonl"
  limit="$(cap 600)"
  (cd bench && timeout "$limit" "$PYTHON" measure_gpu.py --out "$OUT_DIR/epochs.jsonl" \
    --max-minutes "$(( limit / 60 - 1 ))" 2>&1 | grep -v Warning)
fi
if worth 60; then
  say "host cost"
  (cd bench && timeout "$(cap 120)" "$PYTHON" gpu_host_cost.py --out "$OUT_DIR/host_costs.json" > /dev/null 2>&1)
fi
if worth 120; then  # measured twice (2026-11-27): bench/results/cudnn_choice_h100.jsonl
  say "cuDNN's heuristic algorithms against benchmarked ones"
  limit="$(cap 150)"
  (cd bench && timeout "$limit" "$PYTHON" cudnn_choice.py --out "$OUT_DIR/cudnn_choice.jsonl" \
    --max-minutes "$(( limit / 60 - 1 ))" 2>&1 | tail -2)
fi
if worth 300; then
  say "does a convolution slow down as its process runs more shapes, as NeuSight's rows do?"
  limit="$(cap 270)"
  (cd bench && timeout "$limit" "$PYTHON" conv_order_effect.py --out "$OUT_DIR/conv_order_effect.jsonl" \
    --shapes 2500 --max-minutes "$(( limit / 60 - 1 ))" 2>&1 | tail -6)
fi
FOLDER="data/gpu/${GPU}_seed$SEED"
if worth 90; then
  say "layer rows, seed $SEED"
  timeout $(( $(left) - 15 )) "$PYTHON" -m prenet collect --kind all --samples 2000 --seed "$SEED" --device cuda \
    --out "$FOLDER" --max-minutes "$(( ($(left) - 30) / 60 ))" --no-progress 2>&1 | tail -2
  tar czf "$OUT_DIR/layer_rows.tgz" "$FOLDER"
fi
say "done: $OUT_DIR"
