#!/usr/bin/env bash
# Collects layer timings for every harness kind on a CUDA GPU, within a time budget (minutes, default 60), for
# the configurations of a sampling seed (default 0). For a GPU machine with Python and a CUDA torch 2.x wheel;
# needs neither network nor xgboost. Resumable: run it again to continue. Rows land in
# data/gpu/<device name>/<kind>.csv (seed 0) or data/gpu/<device name>_seed<N>/<kind>.csv.
set -euo pipefail
MINUTES="${1:-60}"
SEED="${2:-0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
# An interpreter that is itself a virtual environment (a GPU image's /opt/torch/.venv, say) is installed into
# directly: a venv made from it would not see its packages, --system-site-packages notwithstanding.
if "$PYTHON" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  VENV_PYTHON="$("$PYTHON" -c 'import sys; print(sys.executable)')"
else
  [ -x .venv-gpu/bin/python ] || "$PYTHON" -m venv --system-site-packages .venv-gpu
  VENV_PYTHON=.venv-gpu/bin/python
fi
TORCH_PREFIX="$("$VENV_PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$TORCH_PREFIX -DPRENET_BUILD_TESTS=OFF -DPRENET_BUILD_PREDICTOR=OFF"
CMAKE_ARGS="$CMAKE_ARGS -DCMAKE_POLICY_VERSION_MINIMUM=3.5"
PRENET_BUILD_DIR="$ROOT/build/gpu" PRENET_CMAKE_ARGS="$CMAKE_ARGS" \
  "$VENV_PYTHON" -m pip install --no-build-isolation --no-deps --no-index --quiet .
FOLDER="data/gpu/$("$VENV_PYTHON" -c 'import torch; print(torch.cuda.get_device_name().replace(" ", "_"))')"
[ "$SEED" = 0 ] || FOLDER="${FOLDER}_seed$SEED"
exec "$VENV_PYTHON" -m prenet collect --kind all --samples 2000 --seed "$SEED" --device cuda --out "$FOLDER" \
  --max-minutes "$MINUTES"
