# A neumiss object keeps its Python estimator twice: live in the environment
# `object$py` (lost by saveRDS(), as a reticulate object cannot be serialized) and
# as the bytes of the Python package's own model file in `object$python_model` (a
# raw vector, kept by saveRDS()). The live estimator is rebuilt from the bytes when
# missing, e.g. after readRDS() in a new R session.

.model_bytes <- function(estimator) {
  path <- tempfile(fileext = ".neumiss")
  on.exit(unlink(path))
  .py_call(.adapter()$save(estimator, path), "could not serialize the fitted model")
  readBin(path, "raw", n = file.size(path))
}

.check_fit <- function(object, arg = "object") {
  if (!inherits(object, "neumiss")) {
    .abort("`%s` must be a model fitted by neumiss(), not an object of class '%s'.",
           arg, class(object)[1])
  }
  if (!is.raw(object$python_model) || length(object$python_model) == 0 ||
      !is.environment(object$py) || is.null(object$task)) {
    .abort("`%s` has class 'neumiss' but is not a model made by neumiss() or read_neumiss() (its stored Python model is missing).",
           arg)
  }
  invisible(object)
}

# The live Python estimator of a fit, rebuilt from its bytes when needed.
.estimator <- function(object) {
  estimator <- object$py$estimator
  if (!is.null(estimator) && !reticulate::py_is_null_xptr(estimator)) {
    return(estimator)
  }
  estimator <- .load_model_file(.write_temp(object$python_model),
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
#' The file keeps the feature names, the kind of each column and the levels
#' of factor columns (the Python estimator's encoder), and what the R package
#' records in the estimator's `r_metadata_` attribute: the formula (so
#' [predict()] takes a data frame and evaluates the formula's terms), the
#' levels of a factor response and the number of training rows. The training
#' data are not kept: [fitted()] and [residuals()] are not available on a
#' model read from a file. A data frame given to [predict()] has its columns
#' matched by name, in any order.
#'
#' @param fit A model fitted by [neumiss()].
#' @param file Path of the model file.
#' @return `write_neumiss()`: `file`, invisibly. `read_neumiss()`: a `"neumiss"`
#'   object. Its feature names are those the model was fitted with (from R, or
#'   from a pandas DataFrame in Python), else `x1`, `x2`, ...
#' @examples
#' if (is_neumiss_available()) {
#'   set.seed(1)
#'   fit <- neumiss(Ozone ~ Solar.R + Wind + Temp, data = airquality, max_epochs = 10)
#'   path <- tempfile(fileext = ".pt")
#'   write_neumiss(fit, path)
#'   same <- read_neumiss(path)
#'   formula(same)
#'   all.equal(predict(same, airquality), predict(fit, airquality))
#' }
#' @export
write_neumiss <- function(fit, file) {
  .check_fit(fit, "fit")
  writeBin(fit$python_model, file)
  invisible(file)
}

#' @rdname write_neumiss
#' @export
read_neumiss <- function(file) {
  if (!is.character(file) || length(file) != 1 || !file.exists(file)) {
    .abort("`file` must be the path of an existing model file.")
  }
  estimator <- .load_model_file(normalizePath(file),
                                sprintf("could not read '%s' as a neumiss model", file))
  .new_neumiss(estimator, call = match.call())
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
#' if (is_neumiss_available() && reticulate::py_module_available("onnx")) {
#'   set.seed(1)
#'   fit <- neumiss(Ozone ~ Solar.R + Wind + Temp, data = airquality, max_epochs = 5)
#'   export_onnx(fit, tempfile(fileext = ".onnx"))
#' }
#' @export
export_onnx <- function(fit, file) {
  .check_fit(fit, "fit")
  if (!is.character(file) || length(file) != 1) {
    .abort("`file` must be a single path.")
  }
  .py_call(.adapter()$export_onnx(.estimator(fit), path.expand(file)),
           "ONNX export failed")
  invisible(file)
}
