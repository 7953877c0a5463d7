# Access to the Python package, loaded lazily on first use.

.state <- new.env(parent = emptyenv())

.onLoad <- function(libname, pkgname) {
  # Use the environment made by install_neumiss() unless the user chose a Python.
  if (!nzchar(Sys.getenv("RETICULATE_PYTHON")) &&
      reticulate::virtualenv_exists("r-neumiss")) {
    reticulate::use_virtualenv("r-neumiss", required = FALSE)
  }
  # PyTorch may write a cache folder (torchinductor_<user>) under the system's temporary
  # folder; keep it in R's session folder, removed when R exits.
  if (!nzchar(Sys.getenv("TORCHINDUCTOR_CACHE_DIR"))) {
    Sys.setenv(TORCHINDUCTOR_CACHE_DIR = file.path(tempdir(), "torchinductor"))
  }
}

.how_to_get_python <- paste(
  "Run neumiss::install_neumiss() (then restart R), or set the environment",
  "variable RETICULATE_PYTHON to a Python where the 'neumiss' package is installed",
  "before loading the package."
)

#' Is the Python package available?
#'
#' Checks, without failing, that reticulate finds a Python in which the
#' `neumiss` Python package can be imported. Calling it starts Python.
#'
#' @return `TRUE` or `FALSE`; when `FALSE`, the attribute `"reason"` says why.
#' @examples
#' is_neumiss_available()
#' @export
is_neumiss_available <- function() {
  reason <- tryCatch({
    .adapter()
    NULL
  }, error = conditionMessage)
  structure(is.null(reason), reason = reason)
}

# The Python adapter module (inst/python/neumiss_r.py), imported once.
.adapter <- function() {
  if (!is.null(.state$adapter)) {
    return(.state$adapter)
  }
  chosen <- Sys.getenv("RETICULATE_PYTHON")
  if (nzchar(chosen) && !file.exists(chosen)) {
    .abort("RETICULATE_PYTHON is '%s', which does not exist%s. Set it to the full path of a Python where the 'neumiss' package is installed, before loading the package.",
           chosen, if (!grepl("^(/|~|[A-Za-z]:)", chosen)) {
             sprintf(" (a relative path, looked up from %s)", getwd())
           } else "")
  }
  started <- tryCatch(.without_poetry(reticulate::py_available(initialize = TRUE)),
                      error = function(e) FALSE)
  if (!started) {
    .abort("Python could not be found or started by reticulate. %s", .how_to_get_python)
  }
  if (!reticulate::py_module_available("neumiss")) {
    .abort("The Python package 'neumiss' is not installed in the Python used by reticulate (%s). %s",
           reticulate::py_config()$python, .how_to_get_python)
  }
  # Importable is not loadable: from a source checkout's folder, Python finds its
  # 'neumiss' folder without the packages it needs (pandas, torch, ...).
  path <- system.file("python", package = "neumiss")
  .state$adapter <- tryCatch(
    reticulate::import_from_path("neumiss_r", path = path),
    error = function(e) {
      .abort("could not load the Python side of the neumiss R package in %s (%s). %s",
             reticulate::py_config()$python, .cut(.python_message(e)), .how_to_get_python)
    }
  )
  .state$adapter
}

# `expr`, with reticulate's look-up of a Poetry project turned off: reticulate 1.28 takes
# a pyproject.toml with any [tool] table in the working folder (or above) for a Poetry
# project and warns that `poetry` is absent, as in a source checkout of neumiss (which
# does not use Poetry). The look-up is pointed at R's session folder instead.
.without_poetry <- function(expr) {
  old <- options(reticulate.poetry.project = tempdir())
  on.exit(options(old))
  expr
}

# Evaluate `expr` (a Python call) and turn a Python exception into a plain R error
# "<context>: <Python message>", without traceback.
.py_call <- function(expr, context) {
  tryCatch(expr, error = function(e) {
    .abort("%s: %s", context, .cut(.python_message(e)))
  })
}

.python_message <- function(e) {
  msg <- conditionMessage(e)
  msg <- sub("(?s)\\s*Detailed traceback:.*$", "", msg, perl = TRUE)
  msg <- sub("(?s)\\s*Run `reticulate::py_last_error\\(\\)`.*$", "", msg, perl = TRUE)
  msg <- sub("^[A-Za-z_.]*(Error|Exception|Warning): ", "", trimws(msg))
  .r_terms(trimws(msg))
}

# The values of a numeric vector or matrix for the adapter: a flat column-major
# vector of doubles (a matrix is passed with nrow(x) and ncol(x)). R's NA is a signalling NaN, on which
# NumPy arithmetic warns "invalid value encountered": it is sent as a plain NaN.
.values <- function(x) {
  values <- as.vector(unname(x), mode = "double")
  values[is.na(values)] <- NaN
  values
}
