#!/usr/bin/env bash
# One-command set-up on a fresh machine: .venv with everything, bpy 5.0.x included.
#   bash scripts/setup_env.sh                 # Python side only
#   bash scripts/setup_env.sh --with-blender  # + Debian's blender 3.4 binary (needs root/apt)
#   bash scripts/setup_env.sh --with-bpy52    # + .venv313: Python 3.13 with bpy 5.2.x, numpy 2
#   bash scripts/setup_env.sh --with-lts      # + .venv42 / .venv45: Python 3.11 with bpy 4.2.x
#                                             #   LTS / 4.5.x LTS (the LTS tiers, tests/test_lts.py)
# pip downloads are cached in ${PIP_CACHE_DIR:-~/.cache/pip} (the bpy wheel is ~375 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

with_blender=0
with_bpy52=0
with_lts=0
for arg in "$@"; do
  case "$arg" in
    --with-blender) with_blender=1 ;;
    --with-bpy52) with_bpy52=1 ;;
    --with-lts) with_lts=1 ;;
    *) echo "setup_env.sh: unknown argument $arg (use --with-blender, --with-bpy52, --with-lts)" >&2
       exit 2 ;;
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

if [ "$with_blender" = 1 ] && { ! command -v blender || ! command -v xvfb-run \
     || ! command -v xdotool || ! command -v tesseract; } >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # python3-numpy: Blender 3.4's own Python has no numpy without it.
    # xvfb, xauth, xdotool: the add-on's GUI tier (a real Blender window, tests/gui/).
    # e2fsprogs: chattr and mkfs.ext4 for the immutable-directory faults (tests/test_faults.py).
    # tesseract-ocr: the GUI tier reads the panel's text back from its screenshots.
    apt-get install -y -qq --no-install-recommends blender python3-numpy \
      xvfb xauth xdotool e2fsprogs tesseract-ocr tesseract-ocr-eng >/dev/null
  else
    echo "setup_env.sh: not root; install Debian's blender python3-numpy xvfb xauth xdotool" \
      "e2fsprogs tesseract-ocr tesseract-ocr-eng yourself" >&2
    exit 2
  fi
fi

if [ "$with_bpy52" = 1 ]; then
  # bpy 5.2.x exists only for Python 3.13. pyenv's interpreters are tried directly (a pyenv
  # shim refuses a version that is not the active one).
  py313=""
  for cand in "${PYTHON313:-}" python3.13 "$(pyenv root 2>/dev/null)"/versions/3.13*/bin/python3.13; do
    if [ -n "$cand" ] && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' \
         >/dev/null 2>&1; then
      py313="$cand"; break
    fi
  done
  if [ -z "$py313" ]; then
    echo "setup_env.sh: --with-bpy52 needs Python 3.13 (set PYTHON313=/path/to/python3.13)" >&2
    exit 2
  fi
  if [ ! -x .venv313/bin/python ]; then
    "$py313" -m venv .venv313
  fi
  .venv313/bin/python -m pip install -q -e '.[test]' --config-settings editable_mode=compat
  echo "setup_env.sh: .venv313 ready ($(.venv313/bin/python -c \
    'import bpy; print("bpy", bpy.app.version_string)' 2>/dev/null | tail -n 1))"
fi
if [ "$with_lts" = 1 ]; then
  # The Blender LTS lines studios pin, as bpy wheels on Python 3.11 (~400 MB each, cached by
  # pip). The project's own dependencies pin bpy 5.0 on 3.11, so the test set is named here
  # and the checkout goes in without dependencies.
  for lts in 4.2 4.5; do
    venv=".venv${lts/./}"
    if [ ! -x "$venv/bin/python" ]; then
      "$py" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install -q "bpy==$lts.*" "numpy>=1.24,<2" "pytest>=8" \
      "trimesh>=4.0" "python-fcl>=0.7" "pillow>=10" "pyyaml>=6" "shapely>=2" \
      "filelock>=3.30"
    "$venv/bin/python" -m pip install -q --no-deps -e . --config-settings editable_mode=compat
    echo "setup_env.sh: $venv ready ($("$venv/bin/python" -c \
      'import bpy; print("bpy", bpy.app.version_string)' 2>/dev/null | tail -n 1))"
  done
fi
echo "setup_env.sh: ready ($(.venv/bin/python -c 'import bpy; print("bpy", bpy.app.version_string)' 2>/dev/null | tail -n 1))"
