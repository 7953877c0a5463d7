#!/usr/bin/env bash
# The main job: set up, then run the quick benchmark (NeuMiss against the Bayes
# predictor and the baselines on the paper's simulated data). Results land in
# benchmark_results/quick/ (runs.csv, summary.md, figure.png).
# Usage: bash scripts/main.sh
set -euo pipefail

cd "$(dirname "$0")/.."
bash scripts/setup.sh .venv
.venv/bin/neumiss benchmark --quick --out benchmark_results/quick
echo
echo "Table:  benchmark_results/quick/summary.md"
echo "Figure: benchmark_results/quick/figure.png"
