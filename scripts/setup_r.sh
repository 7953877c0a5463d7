#!/usr/bin/env bash
# Set up what the R side of neumiss needs, idempotently:
#  - R and the R packages of the R wrapper (r_wrapper/) from Debian's packages
#    (installed as root with apt-get when one is missing): reticulate and generics
#    (imported), testthat and mice (suggested: the tests, compare_methods()' MICE row and
#    the README's boys data), ranger and nnet (suggested: compare_methods()' random
#    forest and multinomial logit rows), knitr and rmarkdown (suggested: the vignette;
#    pandoc comes with rmarkdown), qpdf, which `R CMD check --as-cran` needs for a
#    package with a vignette, and pkgdown, which builds the package's site
#    (scripts/docs.sh);
#  - rpy2 3.5.17 (what works with Debian 12's R 4.2) in the Python venv given as $1
#    (default .venv), for neumiss.baselines.NormEMRegressor.
# R's `norm` package is on CRAN only and is not installed here: tests needing it skip.
# Usage: bash scripts/setup_r.sh [VENV]
set -euo pipefail

cd "$(dirname "$0")/.."
VENV="${1:-.venv}"
DEB_PACKAGES=(r-base-core r-base-dev r-cran-reticulate r-cran-generics r-cran-testthat
              r-cran-mice r-cran-ranger r-cran-nnet r-cran-knitr r-cran-rmarkdown qpdf
              r-cran-pkgdown)

source scripts/debian_packages.sh
install_debian_packages setup_r.sh "${DEB_PACKAGES[@]}"

PYTHON="$VENV/bin/python"
if [[ ! -x $PYTHON ]]; then
  echo "setup_r.sh: no Python venv at $VENV (create it first)" >&2
  exit 1
fi
if ! "$PYTHON" -c 'import importlib.metadata as m, sys; sys.exit(m.version("rpy2") != "3.5.17")' \
    2>/dev/null; then
  echo "setup_r.sh: installing rpy2==3.5.17 into $VENV"
  "$PYTHON" -m pip install -q "rpy2==3.5.17"
fi
