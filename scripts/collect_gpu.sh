#!/usr/bin/env bash
# Collects layer timings for every harness kind on a CUDA GPU, within a time budget (minutes, default 60).
# For a GPU machine with Python and a CUDA torch 2.x wheel; needs neither network nor xgboost. Resumable:
# run it again to continue. Rows land in data/gpu/<device name>/<kind>.csv.
set -euo pipefail
MINUTES="${1:-60}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv-gpu/bin/python ]; then
  "$PYTHON" -m venv --system-site-packages .venv-gpu
fi
TORCH_PREFIX="$(.venv-gpu/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')"
PRENET_BUILD_DIR="$ROOT/build/gpu" \
PRENET_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$TORCH_PREFIX -DPRENET_BUILD_TESTS=OFF -DPRENET_BUILD_PREDICTOR=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5" \
  .venv-gpu/bin/python -m pip install --no-build-isolation --no-deps --no-index --quiet .
DEVICE_NAME="$(.venv-gpu/bin/python -c 'import torch; print(torch.cuda.get_device_name().replace(" ", "_"))')"
exec .venv-gpu/bin/prenet collect --kind all --samples 2000 --device cuda --out "data/gpu/$DEVICE_NAME" \
  --max-minutes "$MINUTES"
