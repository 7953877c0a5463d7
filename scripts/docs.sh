#!/usr/bin/env bash
# Build the documentation, warnings as errors:
#  - the Python site (Sphinx: user guide, benchmarks, API reference, and the gallery,
#    whose examples run) in docs/_build/html; a broken reference or a failing example
#    fails the build;
#  - the R package's site (pkgdown: its help pages, with their examples run, and its
#    vignette) in docs/_build/html/r, linked from the Python site. It is built from a
#    staged copy of r_wrapper/ with docs/r/_pkgdown.yml, so the package is left as it is.
# Sets up what it needs first (idempotent): the venv with the `docs` extra, R and pkgdown.
# Usage: bash scripts/docs.sh [--python-only]
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
R_SITE=1
for arg in "$@"; do
  case $arg in
    --python-only) R_SITE=0 ;;
    *) echo "docs.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
OUT=docs/_build/html

bash scripts/setup.sh .venv
.venv/bin/python -m sphinx -b html -n -W --keep-going docs "$OUT"
echo "docs.sh: Python site in $OUT/index.html"
((R_SITE)) || exit 0

bash scripts/setup_r.sh .venv
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
cp -r r_wrapper "$STAGE/neumiss"
rm -rf "$STAGE/neumiss/inst/python/wheels" "$STAGE"/neumiss/*.Rcheck
cp docs/r/_pkgdown.yml "$STAGE/neumiss/"
rm -rf "$OUT/r"
# The examples and the vignette run NeuMiss: this checkout's package, from the venv.
# pkgdown.internet = FALSE: no lookup of the package on CRAN (it is not there; offline
# machines would fail). A warning of pkgdown's own is an error; the examples' warnings
# are part of their output.
RETICULATE_PYTHON="$ROOT/.venv/bin/python" PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
  Rscript --vanilla -e '
    args <- commandArgs(TRUE)
    options(pkgdown.internet = FALSE)
    withCallingHandlers(
      pkgdown::build_site(args[1], override = list(destination = args[2]),
                          preview = FALSE, install = TRUE, new_process = FALSE),
      warning = function(w) stop("pkgdown: ", conditionMessage(w), call. = FALSE))
  ' "$STAGE/neumiss" "$ROOT/$OUT/r"
echo "docs.sh: R package site in $OUT/r/index.html"
