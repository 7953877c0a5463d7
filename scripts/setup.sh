#!/usr/bin/env bash
# Create (or reuse) the Python virtual environment and install neumiss into it.
# Torch is pinned (torch==2.13.0) and the CPU build where it can be had: from PyTorch's
# CPU index when it is reachable, or from a copy pip already sees (find-links, as on this
# machine kind's disk); else PyPI's build of that version, which on Linux is CUDA's
# (multi-GB). It is installed first so that the extras' torch users (pytabkit, in the
# anchors that .[dev] includes) find it there and pip pulls no other build.
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
TORCH=torch==2.13.0
CPU_INDEX=https://download.pytorch.org/whl/cpu
if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
  if "$VENV/bin/python" -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=10)' "$CPU_INDEX/torch/" 2>/dev/null; then
    "${PIP[@]}" --extra-index-url "$CPU_INDEX" "$TORCH+cpu"
  else
    echo "setup.sh: PyTorch's CPU index unreachable: $TORCH as pip finds it (a CPU copy it sees, else PyPI's)"
    "${PIP[@]}" "$TORCH"
  fi
fi
echo "setup.sh: torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
"${PIP[@]}" -e ".[dev,docs]"
echo "setup.sh: neumiss $("$VENV/bin/python" -c 'import neumiss; print(neumiss.__version__)') ready in $VENV"
