#!/usr/bin/env bash
# Run the testthat suite of the R package (r_wrapper/) against this checkout's Python
# package: installs the R package into a temporary library, points reticulate at the
# venv's Python ($1, default .venv) with this checkout first on PYTHONPATH, and fails
# if a test fails. Run scripts/setup_r.sh first.
#
# When R's `norm` package (CRAN only, suggested) is installed, wherever it is (the user
# library where install.packages() puts it, a site library, or a library of R_LIBS),
# then runs `R CMD check --as-cran` (scripts/build_r_package.sh --check) twice: with
# `norm`, and without it, as the CI machine has no `norm`. Without it: R_LIBS,
# R_LIBS_USER and R_LIBS_SITE all name one temporary library that links every other
# package of the search path. Only a `norm` in R's own library (R_HOME/library) cannot be
# hidden: that second check is then skipped, with a note.
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
NO_NORM=$(mktemp -d)
trap 'rm -rf "$LIB" "$NO_NORM"' EXIT
# every package of the search path but norm, the first of each name as R finds it
Rscript --vanilla -e '
  into <- commandArgs(TRUE)[1]
  for (lib in setdiff(.libPaths(), .Library))
    for (pkg in setdiff(list.files(lib), c("norm", list.files(into))))
      file.symlink(file.path(lib, pkg), file.path(into, pkg))
' "$NO_NORM"
HIDDEN=$(R_LIBS="$NO_NORM" R_LIBS_USER="$NO_NORM" R_LIBS_SITE="$NO_NORM" Rscript --vanilla \
  -e 'cat(!requireNamespace("norm", quietly = TRUE))')
CHECK_OUT=$(mktemp -d)
trap 'rm -rf "$LIB" "$NO_NORM" "$CHECK_OUT"' EXIT

# R CMD check --as-cran into $CHECK_OUT/$1, with the environment's assignments $2...;
# fails on an ERROR or a WARNING.
check() {
  local name=$1
  shift
  echo "test_r.sh: R CMD check --as-cran ($name)"
  env "$@" VENV="$VENV" bash scripts/build_r_package.sh --check --no-wheel \
    "$CHECK_OUT/$name" || true
  local log="$CHECK_OUT/$name/check.log"
  if [[ ! -f $log ]]; then
    echo "test_r.sh: R CMD check $name: the package did not build" >&2
    exit 1
  fi
  if ! grep -Eq "^Status: (OK|[0-9]+ NOTEs?)$" "$log"; then
    echo "test_r.sh: R CMD check $name failed:" >&2
    sed -n '/^\* checking .*\(ERROR\|WARNING\)$/,/^\* /p' "$log" >&2
    exit 1
  fi
}
check with-norm "R_LIBS=$R_LIBS"
if [[ $HIDDEN == TRUE ]]; then
  check without-norm "R_LIBS=$NO_NORM" "R_LIBS_USER=$NO_NORM" "R_LIBS_SITE=$NO_NORM"
else
  echo "test_r.sh: R's norm is in R's own library ($NORM_LIB), which cannot be left out:" \
    "no check without it" >&2
fi
