#' Install the Python package neumiss
#'
#' Creates a Python environment (a virtualenv, by default `"r-neumiss"`, which
#' the R package uses automatically when `RETICULATE_PYTHON` is not set) and
#' installs into it the CPU build of PyTorch, then the Python package
#' `neumiss` with its other dependencies (NumPy, pandas, scikit-learn, ...)
#' from the Python Package Index. Restart R afterwards.
#'
#' The Python package `neumiss` is not published on the Python Package Index:
#' the R package brings it. Its source tarball, built by the script
#' `scripts/build_r_package.sh` of the source repository, carries a wheel of
#' the Python package of the same source (in `inst/python/wheels/`), which is
#' what `install_neumiss()` installs by default. An R package built without
#' that wheel (plain `R CMD build`) needs `package =`: the path of a source
#' checkout of the Python package or of a wheel.
#'
#' To use another Python instead, install the Python package there
#' (`pip install <checkout or wheel>`) and set `RETICULATE_PYTHON` to the full
#' path of that Python before loading the R package.
#'
#' @param envname Name (or path) of the environment.
#' @param method `"virtualenv"` or `"conda"`.
#' @param package What pip installs for the Python package: `NULL` (the wheel
#'   carried by this R package), or the path of a source checkout of the Python
#'   package or of a wheel (`.whl`).
#' @param torch pip requirement for PyTorch, installed first (`NULL` to let pip
#'   resolve it with the package, which on Linux may download a CUDA build of
#'   several GB).
#' @param torch_index Package index for `torch`; the default serves the
#'   CPU-only builds. `NULL`: the indexes pip is configured with.
#' @param python_version Python version for a new environment (`NULL`: the
#'   default Python found by reticulate); 3.10 or later.
#' @param ... Further arguments of [reticulate::py_install()].
#' @return `envname`, invisibly.
#' @examples
#' \dontrun{
#' install_neumiss()                              # the wheel carried by the package
#' install_neumiss(package = "~/src/neumiss")     # from a source checkout
#' }
#' @export
install_neumiss <- function(envname = "r-neumiss", method = c("virtualenv", "conda"),
                            package = NULL, torch = "torch==2.13.0",
                            torch_index = "https://download.pytorch.org/whl/cpu",
                            python_version = NULL, ...) {
  method <- match.arg(method)
  package <- .python_package_source(package)
  .without_poetry({
    if (method == "virtualenv" && !reticulate::virtualenv_exists(envname)) {
      reticulate::virtualenv_create(envname, version = python_version)
    }
    if (!is.null(torch)) {
      options <- if (!is.null(torch_index)) c("--index-url", torch_index) else character()
      reticulate::py_install(torch, envname = envname, method = method, pip = TRUE,
                             python_version = python_version, pip_options = options, ...)
    }
    reticulate::py_install(package, envname = envname, method = method, pip = TRUE,
                           python_version = python_version, ...)
  })
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

# The wheels of the Python package carried by this R package.
.bundled_wheels <- function() {
  dir <- system.file("python", "wheels", package = "neumiss")
  if (!nzchar(dir)) {
    return(character())
  }
  sort(list.files(dir, pattern = "^neumiss-.*\\.whl$", full.names = TRUE))
}

# What pip installs for the Python package: a bundled wheel, a wheel or a checkout.
.python_package_source <- function(package) {
  if (is.null(package)) {
    wheels <- .bundled_wheels()
    if (length(wheels) == 0) {
      .abort(paste(
        "this build of the R package carries no wheel of the Python package neumiss",
        "(build the R package with scripts/build_r_package.sh to include one). Pass",
        "`package =` the path of a source checkout of neumiss, or of a wheel."
      ))
    }
    return(wheels[length(wheels)])
  }
  if (!is.character(package) || length(package) != 1 || is.na(package)) {
    .abort("`package` must be NULL (the bundled wheel) or the path of a source checkout or wheel.")
  }
  if (!file.exists(package)) {
    .abort("`package` '%s' does not exist: pass the path of a source checkout of neumiss or of a wheel (the Python package is not on the Python Package Index).",
           package)
  }
  normalizePath(package)
}
