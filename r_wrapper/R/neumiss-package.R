#' neumiss: NeuMiss networks for supervised learning with missing values
#'
#' An R interface to the Python package `neumiss` through reticulate. Fit with
#' [neumiss()] (formula or matrix interface, `NA` = missing), then use
#' [predict.neumiss()], [summary.neumiss()], [plot.neumiss()],
#' [coef.neumiss()], [export_onnx()] and [compare_methods()]. Fitted models
#' survive [saveRDS()] / [readRDS()] into a new R session.
#'
#' Python: the package uses the Python found by reticulate: `RETICULATE_PYTHON`
#' when set, else the virtualenv `"r-neumiss"` made by [install_neumiss()].
#' Python starts on first use; [is_neumiss_available()] checks it.
#'
#' @docType package
#' @name neumiss-package
#' @keywords internal
NULL
