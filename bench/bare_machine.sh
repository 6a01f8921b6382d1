#!/usr/bin/env bash
# Times the README's two commands on bare Debian 12 systems: one fresh debootstrap chroot per command, each
# command run twice (the second run shows what skipping installed parts saves). Needs root and Debian's mirror.
# Usage: bash bench/bare_machine.sh [WORKDIR]   (default /tmp/prenet-bare); prints one line per run.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${1:-/tmp/prenet-bare}"
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
mkdir -p "$WORK"
for command in main test; do
  jail="$WORK/$command"
  if [ ! -x "$jail/bin/bash" ]; then
    debootstrap --variant=minbase bookworm "$jail" http://deb.debian.org/debian > "$WORK/debootstrap-$command.log" 2>&1 \
      || { echo "debootstrap failed, see $WORK/debootstrap-$command.log"; exit 1; }
  fi
  cp /etc/resolv.conf "$jail/etc/resolv.conf"
  mkdir -p "$jail/work/shared" "$jail/proc" "$jail/dev"
  mountpoint -q "$jail/proc" || mount -t proc proc "$jail/proc"
  mountpoint -q "$jail/dev" || mount --bind /dev "$jail/dev"
  mountpoint -q "$jail/work/shared" || mount --bind "$ROOT/../shared" "$jail/work/shared"
  rm -rf "$jail/work/main" && git clone -q "$ROOT" "$jail/work/main"
  for run in 1 2; do
    start=$(date +%s)
    chroot "$jail" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
      bash -c "cd /work/main && bash scripts/$command.sh" > "$WORK/$command-$run.log" 2>&1
    echo "scripts/$command.sh run $run: exit $? in $(( $(date +%s) - start )) s (log: $WORK/$command-$run.log)"
  done
  umount "$jail/work/shared" "$jail/dev" "$jail/proc"
done
