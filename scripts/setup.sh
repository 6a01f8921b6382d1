#!/usr/bin/env bash
# Brings a bare Debian 12 machine to a working prenet install, skipping every step already done:
# Debian packages, the virtual environment at .venv/, and the package itself (rebuilt when its sources change).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# libopenblas0-pthread: Debian's torch calls whatever libblas.so.3 the alternatives system selects, and the
# reference BLAS that comes by default is about 6x slower; timing data is taken with OpenBLAS.
APT_PACKAGES=(
  build-essential cmake ninja-build git
  python3-venv python3-dev python3-pip python3-setuptools python3-wheel
  python3-pybind11 pybind11-dev libeigen3-dev nlohmann-json3-dev zlib1g-dev libgtest-dev
  libtorch-dev python3-torch python3-torchvision
  libopenblas0-pthread
  python3-xgboost
  python3-numpy python3-pandas python3-sklearn python3-threadpoolctl python3-matplotlib python3-pytest
  python3-tqdm
  jupyter-nbconvert python3-nbclient python3-ipykernel python3-nbformat
)

missing=()
for package in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "[setup] installing ${#missing[@]} Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[setup] Debian packages: all ${#APT_PACKAGES[@]} present"
fi

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv from /usr/bin/python3 with the system's packages"
  /usr/bin/python3 -m venv --system-site-packages .venv
  # pip's option is inverted: 'false' here turns build isolation off, so a bare `pip install .` works offline.
  printf '[install]\nno-build-isolation = false\n' > .venv/pip.conf
fi

# Reinstall only when what the build reads has changed since the last install.
stamp=$(cat CMakeLists.txt setup.py pyproject.toml \
          $(find cpp python data -type f -not -path 'data/cpu*/*' -not -name '*.lock' \
            -not -path '*/__pycache__/*' -not -path '*.egg-info/*' -not -name '*.so' | sort) | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.prenet-installed 2>/dev/null)" != "$stamp" ] || [ ! -x build/cmake/prenet_tests ]; then
  echo "[setup] building and installing prenet (CMake via setuptools)"
  .venv/bin/python -m pip install --no-build-isolation --no-index --no-deps --quiet .
  echo "$stamp" > .venv/.prenet-installed
else
  echo "[setup] prenet is installed and up to date"
fi
