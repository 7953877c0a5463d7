#' Install the Python package neumiss
#'
#' Creates a Python environment (a virtualenv, by default `"r-neumiss"`, which
#' the R package uses automatically when `RETICULATE_PYTHON` is not set) and
#' installs into it the CPU build of PyTorch, then the Python package
#' `neumiss`. Restart R afterwards.
#'
#' To use another Python instead, install the Python package there
#' (`pip install neumiss`) and set `RETICULATE_PYTHON` to that Python before
#' loading the R package.
#'
#' @param envname Name (or path) of the environment.
#' @param method `"virtualenv"` or `"conda"`.
#' @param package What pip installs for the Python package: `"neumiss"` (from
#'   PyPI), or the path of a source checkout of the Python package.
#' @param torch pip requirement for PyTorch, installed first from `torch_index`
#'   (`NULL` to let pip resolve it with the package).
#' @param torch_index Package index for `torch`; the default serves the
#'   CPU-only builds (no CUDA download).
#' @param python_version Python version for a new environment (`NULL`: the
#'   default Python found by reticulate); 3.10 or later.
#' @param ... Further arguments of [reticulate::py_install()].
#' @return `envname`, invisibly.
#' @examples
#' \dontrun{
#' install_neumiss()
#' install_neumiss(package = "~/src/neumiss")  # from a source checkout
#' }
#' @export
install_neumiss <- function(envname = "r-neumiss", method = c("virtualenv", "conda"),
                            package = "neumiss", torch = "torch==2.13.0",
                            torch_index = "https://download.pytorch.org/whl/cpu",
                            python_version = NULL, ...) {
  method <- match.arg(method)
  if (!is.character(package) || length(package) != 1) {
    stop("`package` must be \"neumiss\" or the path of a source checkout.", call. = FALSE)
  }
  if (dir.exists(package)) {
    package <- normalizePath(package)
  }
  if (method == "virtualenv" && !reticulate::virtualenv_exists(envname)) {
    reticulate::virtualenv_create(envname, version = python_version)
  }
  if (!is.null(torch)) {
    reticulate::py_install(torch, envname = envname, method = method, pip = TRUE,
                           python_version = python_version,
                           pip_options = c("--index-url", torch_index), ...)
  }
  reticulate::py_install(package, envname = envname, method = method, pip = TRUE,
                         python_version = python_version, ...)
  message(sprintf(
    "Installed the Python package neumiss in the %s '%s'. Restart R; %s",
    method, envname,
    if (envname == "r-neumiss" && method == "virtualenv") {
      "library(neumiss) then uses it."
    } else {
      sprintf("then call reticulate::use_%s(\"%s\") before using neumiss.", method, envname)
    }
  ))
  invisible(envname)
}
