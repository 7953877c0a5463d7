#!/usr/bin/env bash
# Create (or reuse) the Python virtual environment and install neumiss into it.
# Torch is the CPU build (torch==2.13.0, which pip takes from this machine kind's
# disk in seconds); an unpinned torch would download a multi-GB CUDA build. It is
# installed first so that the extras' torch users (pytabkit, in the anchors that
# .[dev] includes) find it there and pip pulls no other build.
# Usage: bash scripts/setup.sh [VENV]   (default .venv)
set -euo pipefail

cd "$(dirname "$0")/.."
VENV="${1:-.venv}"
PYTHON_BIN="${PYTHON:-python3}"

if [[ ! -x $VENV/bin/python ]]; then
  if ! "$PYTHON_BIN" -m venv "$VENV" 2>/dev/null; then
    # Debian's own python3 ships venv separately.
    echo "setup.sh: installing python3-venv (apt-get)"
    rm -rf "$VENV"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    "$PYTHON_BIN" -m venv "$VENV"
  fi
fi
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
"$VENV/bin/python" -c 'import torch' 2>/dev/null || "${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" -e ".[dev,docs]"
echo "setup.sh: neumiss $("$VENV/bin/python" -c 'import neumiss; print(neumiss.__version__)') ready in $VENV"
