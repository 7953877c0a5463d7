#!/usr/bin/env bash
# Run the testthat suite of the R package (r_wrapper/) against this checkout's Python
# package: installs the R package into a temporary library, points reticulate at the
# venv's Python ($1, default .venv) with this checkout first on PYTHONPATH, and fails
# if a test fails. Run scripts/setup_r.sh first.
#
# When R's `norm` package (CRAN only, suggested) is installed, then runs
# `R CMD check --as-cran` (scripts/build_r_package.sh --check) twice: with `norm`, and
# with its library left out of R_LIBS, as the CI machine has no `norm`. `norm` must then
# sit in a library of its own named in R_LIBS (e.g. R_LIBS=/tmp/rlib-norm), so that it
# can be hidden; the script fails otherwise.
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

NORM_LIB=$(Rscript --vanilla -e 'if (requireNamespace("norm", quietly = TRUE))
  cat(normalizePath(dirname(find.package("norm"))))')
[[ -n $NORM_LIB ]] || exit 0
WITHOUT_NORM=""
IFS=: read -ra LIBS <<<"$R_LIBS"
for lib in "${LIBS[@]}"; do
  if [[ -n $lib && $(realpath -m "$lib") != "$NORM_LIB" ]]; then
    WITHOUT_NORM+="${WITHOUT_NORM:+:}$lib"
  fi
done
if [[ $WITHOUT_NORM == "$R_LIBS" ]]; then
  echo "test_r.sh: R's norm is in $NORM_LIB, not a library of R_LIBS: cannot check without it" >&2
  exit 1
fi
CHECK_OUT=$(mktemp -d)
trap 'rm -rf "$LIB" "$CHECK_OUT"' EXIT

# R CMD check --as-cran into $CHECK_OUT/$1 with R_LIBS=$2; fails on an ERROR or a WARNING.
check() {
  echo "test_r.sh: R CMD check --as-cran ($1)"
  R_LIBS="$2" VENV="$VENV" bash scripts/build_r_package.sh --check --no-wheel \
    "$CHECK_OUT/$1" || true
  local log="$CHECK_OUT/$1/check.log"
  if [[ ! -f $log ]]; then
    echo "test_r.sh: R CMD check $1: the package did not build" >&2
    exit 1
  fi
  if ! grep -Eq "^Status: (OK|[0-9]+ NOTEs?)$" "$log"; then
    echo "test_r.sh: R CMD check $1 failed:" >&2
    sed -n '/^\* checking .*\(ERROR\|WARNING\)$/,/^\* /p' "$log" >&2
    exit 1
  fi
}
check with-norm "$R_LIBS"
check without-norm "$WITHOUT_NORM"
