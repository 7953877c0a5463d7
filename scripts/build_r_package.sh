#!/usr/bin/env bash
# Build the R package's source tarball (neumiss_<version>.tar.gz), its vignette built
# with this checkout's Python package, and a wheel of that package inside it
# (inst/python/wheels/), which install_neumiss()
# installs: the Python package is not on PyPI, so the R package brings it. The checkout
# is left as it is (the wheel goes into a staged copy of r_wrapper/).
#
# With --check, then runs `R CMD check --as-cran --no-manual` on the tarball against the
# venv's Python with this checkout on PYTHONPATH, and prints its Status line. Offline
# (CRAN unreachable), --as-cran's check for orphaned dependencies stops with an error
# when a suggested package (R's `norm`, CRAN only) is not installed, as it must read
# CRAN's package database: the script then gives it an empty local one (R_CRAN_WEB) and
# skips the remote part of the incoming checks. _R_CHECK_FORCE_SUGGESTS_=false lets the
# check run without `norm` (its tests skip).
#
# Usage: bash scripts/build_r_package.sh [--check] [--no-wheel] [OUTDIR]   (default dist/)
#        VENV=path (default .venv): the Python that builds the wheel and runs the checks.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
CHECK=0
WHEEL=1
OUT=dist
for arg in "$@"; do
  case $arg in
    --check) CHECK=1 ;;
    --no-wheel) WHEEL=0 ;;
    -*) echo "build_r_package.sh: unknown option $arg" >&2; exit 2 ;;
    *) OUT=$arg ;;
  esac
done
VENV="${VENV:-.venv}"
[[ $VENV = /* ]] || VENV="$ROOT/$VENV"
PYTHON="$VENV/bin/python"
if [[ ! -x $PYTHON ]]; then
  echo "build_r_package.sh: no Python environment at $VENV (it builds the bundled wheel and" \
    "runs the vignette): run bash scripts/setup.sh first, or set VENV to one where" \
    "neumiss is installed" >&2
  exit 1
fi
if ! command -v R >/dev/null; then
  echo "build_r_package.sh: R is not installed: run bash scripts/setup_r.sh first" >&2
  exit 1
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
cp -r r_wrapper "$STAGE/neumiss"
rm -rf "$STAGE/neumiss/inst/python/wheels" "$STAGE"/neumiss/*.Rcheck
if ((WHEEL)); then
  "$PYTHON" -m pip wheel -q --no-deps --no-build-isolation \
    -w "$STAGE/neumiss/inst/python/wheels" "$ROOT" >/dev/null
  echo "build_r_package.sh: bundled $(basename "$STAGE"/neumiss/inst/python/wheels/neumiss-*.whl)"
fi
VERSION=$(sed -n 's/^Version: *//p' r_wrapper/DESCRIPTION)
TARBALL="$OUT/neumiss_$VERSION.tar.gz"
# the vignette runs NeuMiss: this checkout's Python package, from the venv's Python
PY_ENV=("RETICULATE_PYTHON=$PYTHON" "PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}")
(cd "$STAGE" && env "${PY_ENV[@]}" R CMD build neumiss >"$STAGE/build.log" 2>&1) || {
  cat "$STAGE/build.log" >&2
  exit 1
}
mv "$STAGE/neumiss_$VERSION.tar.gz" "$TARBALL"
echo "build_r_package.sh: built $TARBALL"
((CHECK)) || exit 0

CHECK_ENV=("_R_CHECK_FORCE_SUGGESTS_=false" "${PY_ENV[@]}")
if ! curl -sfI --max-time 10 https://cloud.r-project.org/web/packages/ >/dev/null 2>&1; then
  echo "build_r_package.sh: CRAN unreachable: an empty local CRAN package database for the check"
  mkdir -p "$STAGE/cran-web/web/packages"
  Rscript -e 'saveRDS(data.frame(Package = character(), Maintainer = character()),
                      commandArgs(TRUE)[1])' "$STAGE/cran-web/web/packages/packages.rds"
  CHECK_ENV+=("R_CRAN_WEB=file://$STAGE/cran-web" "_R_CHECK_CRAN_INCOMING_REMOTE_=false")
fi
rm -rf "$OUT/neumiss.Rcheck"
status=0
(cd "$OUT" && env "${CHECK_ENV[@]}" R CMD check --as-cran --no-manual "$TARBALL" \
  >"$OUT/check.log" 2>&1) || status=$?
grep -E "^(\* checking .*(NOTE|WARNING|ERROR)|Status:)" "$OUT/check.log" || true
echo "build_r_package.sh: full log in $OUT/check.log and $OUT/neumiss.Rcheck/"
exit "$status"
