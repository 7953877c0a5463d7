#!/usr/bin/env bash
# Set up everything and run all tests: Python (pytest, 2 workers) then R (testthat).
# Needs root on a fresh Debian machine to install R and Java from Debian's packages.
# Usage: bash scripts/test.sh
set -euo pipefail

cd "$(dirname "$0")/.."
bash scripts/setup.sh .venv
bash scripts/setup_r.sh .venv
bash scripts/setup_spark.sh .venv
# The Spark test fails (does not skip) here, where setup_spark.sh installed its needs.
NEUMISS_REQUIRE_SPARK=1 .venv/bin/python -m pytest -n 2 --durations=15
bash scripts/test_r.sh .venv
