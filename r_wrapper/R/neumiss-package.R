#' neumiss: NeuMiss networks for supervised learning with missing values
#'
#' An R interface to the Python package `neumiss` through reticulate. Fit with
#' [neumiss()] (formula or matrix interface, `NA` = missing; numeric, logical,
#' factor and character predictors), then use [predict.neumiss()],
#' [summary.neumiss()], [plot.neumiss()], [coef.neumiss()], the extractors
#' ([fitted()], [residuals()], [nobs()], [update()], ...: see
#' [neumiss-extractors]), [tidy.neumiss()] (`tidy`, `glance`, `augment`),
#' [write_neumiss()], [export_onnx()] and [compare_methods()]. Fitted models
#' survive [saveRDS()] / [readRDS()] into a new R session.
#'
#' Python: the package uses the Python found by reticulate: `RETICULATE_PYTHON`
#' (a full path) when set, else the virtualenv `"r-neumiss"` made by
#' [install_neumiss()], which installs the wheel of the Python package carried
#' by this R package.
#' Python starts on first use; [is_neumiss_available()] checks it.
#'
#' @docType package
#' @name neumiss-package
#' @keywords internal
NULL
