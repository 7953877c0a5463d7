#' @importFrom generics tidy
#' @export
generics::tidy

#' @importFrom generics glance
#' @export
generics::glance

#' @importFrom generics augment
#' @export
generics::augment

#' Tidy a NeuMiss fit (broom's tidy, glance and augment)
#'
#' Methods for the `generics` (and broom) verbs, returning data frames:
#' * `tidy()`: the per-pattern linear models of a fit with the linear head
#'   (see [coef.neumiss()]): one row per term and pattern of missing
#'   predictors, for the `n_patterns` most frequent patterns of the training
#'   rows (a model read from a file: the complete rows only). An error where
#'   the network has no coefficients (an MLP head, an ensemble of classifiers:
#'   see [coef.neumiss()]).
#' * `glance()`: one row of fit statistics: `task`, `nobs`, `n_train`,
#'   `n_valid`, `depth` (used), `weight_sharing`, `epochs`, `best_epoch`,
#'   `metric` (`"R^2"` or `"log-loss"`), `validation` and `training` (that
#'   metric on the validation rows and, in-sample, on all training rows),
#'   `missing_rate` and `seed`.
#' * `augment()`: the data with `.fitted` (the prediction, or predicted class)
#'   and, for regression when the response is present, `.resid`. Without
#'   `newdata`, the data are `data` (default: the model frame of the fit, the
#'   rows used) and `.fitted` the fitted values.
#'
#' @param x A model fitted by [neumiss()].
#' @param data The data the model was fitted on (default: its model frame);
#'   must have the rows used by the fit.
#' @param newdata New data to predict on (then `data` is ignored).
#' @param n_patterns For `tidy()`: how many of the most frequent patterns.
#' @param ... Unused.
#' @return A data frame.
#' @examples
#' if (is_neumiss_available()) {
#'   set.seed(1)
#'   fit <- neumiss(Ozone ~ Solar.R + Wind + Temp, data = airquality, max_epochs = 10,
#'                  mlp_depth = 0, spline = FALSE)
#'   tidy(fit)   # the linear model of each frequent pattern of missing predictors
#'   glance(fit)
#'   head(augment(fit))
#' }
#' @name tidy.neumiss
NULL

#' @rdname tidy.neumiss
#' @method tidy neumiss
#' @export
tidy.neumiss <- function(x, n_patterns = 3L, ...) {
  .check_fit(x, "x")
  counts <- x$patterns
  if (is.null(counts)) counts <- c(none = NA_integer_)
  counts <- utils::head(counts, n_patterns)
  rows <- lapply(names(counts), function(key) {
    missing <- if (key == "none") NULL else strsplit(key, ", ", fixed = TRUE)[[1]]
    estimate <- coef.neumiss(x, pattern = missing)
    data.frame(pattern = key, n = unname(counts[key]), term = names(estimate),
               estimate = unname(estimate), stringsAsFactors = FALSE)
  })
  do.call(rbind, rows)
}

#' @rdname tidy.neumiss
#' @method glance neumiss
#' @export
glance.neumiss <- function(x, ...) {
  .check_fit(x, "x")
  data.frame(
    task = x$task,
    nobs = nobs.neumiss(x),
    n_train = x$n_train,
    n_valid = x$n_valid,
    depth = x$best_depth,
    weight_sharing = x$weight_sharing,
    epochs = x$n_epochs,
    best_epoch = x$best_epoch,
    metric = if (x$task == "regression") "R^2" else "log-loss",
    validation = .score_value(x),
    training = .training_metric(x),
    missing_rate = x$missing_rate,
    seed = if (is.null(x$seed)) NA_integer_ else as.integer(x$seed),
    stringsAsFactors = FALSE
  )
}

#' @rdname tidy.neumiss
#' @method augment neumiss
#' @export
augment.neumiss <- function(x, data = NULL, newdata = NULL, ...) {
  .check_fit(x, "x")
  if (!is.null(newdata)) {
    out <- as.data.frame(newdata)
    out$.fitted <- predict.neumiss(x, newdata)
    response <- if (!is.null(x$terms)) .response_name(x$terms)
    if (x$task == "regression" && !is.null(response) && response %in% names(out)) {
      out$.resid <- out[[response]] - out$.fitted
    }
    return(out)
  }
  if (is.null(data)) {
    if (is.null(x$model)) {
      .abort("pass `data` (the data of the fit) or `newdata`: this fit kept no model frame.")
    }
    data <- x$model
  }
  data <- as.data.frame(data)
  fitted <- fitted.neumiss(x, type = "class")
  if (nrow(data) != length(fitted)) {
    .abort("`data` has %d rows but the fit has %d fitted values (rows used, or padded with na.exclude).",
           nrow(data), length(fitted))
  }
  data$.fitted <- unname(fitted)
  if (x$task == "regression") data$.resid <- unname(residuals.neumiss(x))
  data
}
