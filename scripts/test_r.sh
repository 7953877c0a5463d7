#!/usr/bin/env bash
# Run the testthat suite of the R package (r_wrapper/) against this checkout's Python
# package: installs the R package into a temporary library, points reticulate at the
# venv's Python ($1, default .venv) with this checkout first on PYTHONPATH, and fails
# if a test fails. Run scripts/setup_r.sh first.
# Usage: bash scripts/test_r.sh [VENV]
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="${1:-.venv}"
[[ $VENV = /* ]] || VENV="$ROOT/$VENV"

LIB=$(mktemp -d)
trap 'rm -rf "$LIB"' EXIT
if ! R CMD INSTALL --no-multiarch -l "$LIB" r_wrapper >"$LIB/install.log" 2>&1; then
  cat "$LIB/install.log" >&2
  exit 1
fi

export RETICULATE_PYTHON="$VENV/bin/python"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export R_LIBS="$LIB${R_LIBS:+:$R_LIBS}"
Rscript --vanilla -e '
  results <- testthat::test_dir("r_wrapper/tests/testthat", package = "neumiss",
                                load_package = "installed", stop_on_failure = TRUE)
  invisible(results)
'
