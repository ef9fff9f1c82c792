#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet (nothing else).
#   bash scripts/apt_install.sh clang libclang-rt-14-dev
# Sourced by scripts/setup.sh and fuzz/run.sh, so both install the same way.
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
