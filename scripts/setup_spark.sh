#!/usr/bin/env bash
# Set up what the Spark scoring test needs, idempotently:
#  - a Java runtime from Debian's packages (default-jre-headless, installed as root with
#    apt-get when missing);
#  - pyspark (the `spark` extra of neumiss) in the Python venv given as $1 (default .venv).
# Usage: bash scripts/setup_spark.sh [VENV]
set -euo pipefail

cd "$(dirname "$0")/.."
VENV="${1:-.venv}"

source scripts/debian_packages.sh
command -v java >/dev/null || install_debian_packages setup_spark.sh default-jre-headless

PYTHON="$VENV/bin/python"
if [[ ! -x $PYTHON ]]; then
  echo "setup_spark.sh: no Python venv at $VENV (create it first)" >&2
  exit 1
fi
if ! "$PYTHON" -c 'import pyspark' 2>/dev/null; then
  echo "setup_spark.sh: installing pyspark into $VENV"
  "$PYTHON" -m pip install -q --disable-pip-version-check -e ".[spark]"
fi
