#!/usr/bin/env bash
# Set up the real-data suite of `neumiss benchmark --suite real`, idempotently:
#  - R and the R data packages from Debian's packages (installed as root with apt-get
#    when one is missing); nothing else is downloaded;
#  - the data sets of the suite's tasks exported to CACHE_DIR (default
#    benchmark_results/realdata_cache), one CSV and one JSON schema each, by
#    neumiss/benchmark/realdata/export_datasets.R; data sets already there are kept.
# Usage: bash scripts/setup_realdata.sh [CACHE_DIR] [VENV]
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE="${1:-benchmark_results/realdata_cache}"
VENV="${2:-.venv}"
DEB_PACKAGES=(r-base-core r-cran-cardata r-cran-survival r-cran-mice r-cran-mlbench
              r-cran-psychtools r-cran-modeldata r-cran-ggplot2 r-cran-aer r-cran-mass
              r-cran-dslabs r-cran-vim)

source scripts/debian_packages.sh
install_debian_packages setup_realdata.sh "${DEB_PACKAGES[@]}"

PYTHON="$VENV/bin/python"
if [[ ! -x $PYTHON ]]; then
  echo "setup_realdata.sh: no Python venv at $VENV (create it first)" >&2
  exit 1
fi
"$PYTHON" -m neumiss.benchmark.realdata "$CACHE"
