#!/usr/bin/env bash
# Command 1 of the README: set up what is missing, then run the main job on the default case.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec .venv/bin/prenet predict torchvision:vgg16 --gpu V100 --batch 32 "$@"
