#!/usr/bin/env bash
# A device call (the workplace's GPU machine) carries at most 64 MiB of working tree: the tracked files, the untracked
# ones git does not ignore, and the ignored paths named in its `carry`. This repository is larger (102 MiB on
# 2026-11-27, 40 of them the CPU layer data, which a GPU session does not need). `slim` takes the CPU layer data
# (whole layers and models), the GPU layer rows and the benchmark reports (validation only; tests that read them fail
# there) out of the index for the call (the files stay on disk, listed in .git/info/exclude so they do not travel as
# untracked files), packs ../shared into .gpu-carry/shared.tgz and copies nlohmann-json's headers to .carry (both
# ignored: name them in `carry`; scripts/gpu_session.sh finds them there), and prints the size that will travel. The
# CPU predictor bundle stays: `prenet calibrate --gpu` measures the host's costs against the CPU predictions.
# `restore` puts the index back as HEAD has it and removes the exclusions; run it right after the call, before any
# commit.
# Usage: bash scripts/device_tree.sh slim|restore
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LEFT_BEHIND=(data/cpu data/cpu_second data/cpu_intel_xeon data/cpu_models data/gpu bench/results)
EXCLUDE=.git/info/exclude
MARK="# scripts/device_tree.sh slim"
case "${1:-}" in
  slim)
    if grep -qxF "$MARK" "$EXCLUDE" 2>/dev/null; then
      echo "already slim; run 'bash scripts/device_tree.sh restore' after the call" >&2
      exit 1
    fi
    if ! git diff --cached --quiet; then
      echo "the index holds staged changes; commit or unstage them first (restore resets the index to HEAD)" >&2
      exit 1
    fi
    mkdir -p .git/info
    { echo "$MARK"; for path in "${LEFT_BEHIND[@]}"; do echo "/$path/"; done; } >> "$EXCLUDE"
    git rm -r -q --cached "${LEFT_BEHIND[@]}"
    rm -rf .gpu-carry && mkdir -p .gpu-carry
    [ -d ../shared ] && tar czf .gpu-carry/shared.tgz -C .. shared
    if [ -d /usr/include/nlohmann ] && [ -d /usr/share/cmake/nlohmann_json ]; then
      mkdir -p .carry/include .carry/share/cmake
      cp -r /usr/include/nlohmann .carry/include/ && cp -r /usr/share/cmake/nlohmann_json .carry/share/cmake/
    fi
    bytes=$( (git ls-files -z; git ls-files -z --others --exclude-standard; find .carry .gpu-carry -type f -print0) \
      | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s}')
    echo "travels: $(( bytes / 1048576 )) MiB of 64 (with carry [\".carry\", \".gpu-carry\"])"
    if [ "$bytes" -gt $(( 64 * 1048576 )) ]; then
      echo "over the device's limit: leave more behind (LEFT_BEHIND), then restore and slim again" >&2
      exit 1
    fi
    ;;
  restore)
    git reset -q
    if [ -f "$EXCLUDE" ]; then
      # drop the block slim appended: its mark and the lines after it
      awk -v mark="$MARK" '$0 == mark {skip = 1} !skip' "$EXCLUDE" > "$EXCLUDE.tmp" && mv "$EXCLUDE.tmp" "$EXCLUDE"
    fi
    echo "index restored: $(git ls-files | wc -l) files tracked"
    ;;
  *)
    echo "usage: bash scripts/device_tree.sh slim|restore" >&2
    exit 2
    ;;
esac
