# A neumiss object keeps its Python estimator twice: live in the environment
# `object$py` (lost by saveRDS(), as a reticulate object cannot be serialized) and
# as the bytes of the Python package's own model file in `object$model` (a raw
# vector, kept by saveRDS()). The live estimator is rebuilt from the bytes when
# missing, e.g. after readRDS() in a new R session.

.model_bytes <- function(estimator) {
  path <- tempfile(fileext = ".neumiss")
  on.exit(unlink(path))
  .py_call(.adapter()$save(estimator, path), "could not serialize the fitted model")
  readBin(path, "raw", n = file.size(path))
}

.check_fit <- function(object, arg = "object") {
  if (!inherits(object, "neumiss")) {
    stop(sprintf("`%s` must be a model fitted by neumiss(), not an object of class '%s'.",
                 arg, class(object)[1]), call. = FALSE)
  }
  if (!is.raw(object$model) || length(object$model) == 0 ||
      !is.environment(object$py) || is.null(object$task)) {
    stop(sprintf(
      "`%s` has class 'neumiss' but is not a model made by neumiss() or read_neumiss() (its stored Python model is missing).",
      arg
    ), call. = FALSE)
  }
  invisible(object)
}

# The live Python estimator of a fit, rebuilt from its bytes when needed.
.estimator <- function(object) {
  estimator <- object$py$estimator
  if (!is.null(estimator) && !reticulate::py_is_null_xptr(estimator)) {
    return(estimator)
  }
  estimator <- .load_model_file(.write_temp(object$model),
                                "could not restore the Python model stored in this neumiss object")
  object$py$estimator <- estimator
  estimator
}

.write_temp <- function(bytes) {
  path <- tempfile(fileext = ".neumiss")
  writeBin(bytes, path)
  path
}

.load_model_file <- function(path, context) {
  .py_call(.adapter()$load(path), context)
}

#' Write and read models in the Python package's file format
#'
#' `write_neumiss()` writes a fitted model to the file format of the Python
#' package (`estimator.save(path)`), which Python reads with
#' `neumiss.load(path)`; `read_neumiss()` reads such a file, e.g. a model
#' trained in Python, as a `"neumiss"` R object. Within R, [saveRDS()] and
#' [readRDS()] work directly on fitted models.
#'
#' @param fit A model fitted by [neumiss()].
#' @param file Path of the model file.
#' @return `write_neumiss()`: `file`, invisibly. `read_neumiss()`: a `"neumiss"`
#'   object. Its feature names are those the Python model was fitted with (from
#'   a pandas DataFrame), else `x1`, `x2`, ...
#' @examples
#' \dontrun{
#' path <- tempfile(fileext = ".pt")
#' write_neumiss(fit, path)
#' same <- read_neumiss(path)
#' }
#' @export
write_neumiss <- function(fit, file) {
  .check_fit(fit, "fit")
  writeBin(fit$model, file)
  invisible(file)
}

#' @rdname write_neumiss
#' @export
read_neumiss <- function(file) {
  if (!is.character(file) || length(file) != 1 || !file.exists(file)) {
    stop("`file` must be the path of an existing model file.", call. = FALSE)
  }
  estimator <- .load_model_file(normalizePath(file),
                                sprintf("could not read '%s' as a neumiss model", file))
  .new_neumiss(estimator, NULL, NULL, NULL, match.call())
}

#' Export a fitted model to ONNX
#'
#' Writes the fitted network as an ONNX graph with the Python package's
#' `neumiss.export_onnx()`, for inference outside R and Python.
#'
#' @param fit A model fitted by [neumiss()].
#' @param file Path of the `.onnx` file to write.
#' @return `file`, invisibly.
#' @examples
#' \dontrun{
#' export_onnx(fit, "model.onnx")
#' }
#' @export
export_onnx <- function(fit, file) {
  .check_fit(fit, "fit")
  if (!is.character(file) || length(file) != 1) {
    stop("`file` must be a single path.", call. = FALSE)
  }
  .py_call(.adapter()$export_onnx(.estimator(fit), path.expand(file)),
           "ONNX export failed")
  invisible(file)
}
