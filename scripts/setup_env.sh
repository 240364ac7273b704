#!/usr/bin/env bash
# One-command set-up on a fresh machine: .venv with everything, bpy 5.0.x included.
#   bash scripts/setup_env.sh                 # Python side only
#   bash scripts/setup_env.sh --with-blender  # + Debian's blender 3.4 binary (needs root/apt)
# pip downloads are cached in ${PIP_CACHE_DIR:-~/.cache/pip} (the bpy wheel is ~375 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

with_blender=0
for arg in "$@"; do
  case "$arg" in
    --with-blender) with_blender=1 ;;
    *) echo "setup_env.sh: unknown argument $arg (use --with-blender)" >&2; exit 2 ;;
  esac
done

py=""
for cand in "${PYTHON:-}" python3.11 python3; do
  if [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1 \
     && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    py="$cand"; break
  fi
done
if [ -z "$py" ]; then
  echo "setup_env.sh: Python 3.11 is required (the bpy 5.0 wheel exists only for 3.11)" >&2
  exit 2
fi

export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
# editable_mode=compat: a plain .pth path entry. The default editable finder is imported by
# every Python start in the venv (~11 ms), a tenth of a warm iter_step.py call's client side.
.venv/bin/python -m pip install -q -e '.[test]' --config-settings editable_mode=compat
# Bytecode for the repo's own modules (an editable install does not compile them): a fresh
# CLI process then never compiles worker/daemon.py & co. from source, even when
# PYTHONDONTWRITEBYTECODE is set.
.venv/bin/python -m compileall -q -j 0 island_tools worker scripts fixtures blender_addon >/dev/null

if [ "$with_blender" = 1 ] && ! command -v blender >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # python3-numpy: Blender 3.4's own Python has no numpy without it.
    apt-get install -y -qq --no-install-recommends blender python3-numpy >/dev/null
  else
    echo "setup_env.sh: not root; install Debian's blender + python3-numpy yourself" >&2
    exit 2
  fi
fi
echo "setup_env.sh: ready ($(.venv/bin/python -c 'import bpy; print("bpy", bpy.app.version_string)' 2>/dev/null | tail -n 1))"
