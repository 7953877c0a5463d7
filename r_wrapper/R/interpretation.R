#' Permutation importance of the predictors of a NeuMiss fit
#'
#' How much the model's score drops when the values of one predictor are
#' shuffled among the rows (which breaks its link with the response and keeps
#' its distribution, missing values included), averaged over `nsim` shuffles.
#' Computed by scikit-learn's `sklearn.inspection.permutation_importance()` on
#' the Python estimator, so that R and Python give the same numbers. A factor
#' is shuffled as one predictor (all its levels together).
#'
#' Importance on the training rows (the default for a formula fit) also
#' rewards what the network overfitted; held-out rows (`newdata`) measure what
#' generalises.
#'
#' @param object A model fitted by [neumiss()].
#' @param newdata Rows to score on, with the predictors and the response: a
#'   data frame for a formula fit (rows whose response is `NA` are dropped), a
#'   matrix or data frame of predictors for a matrix fit (then `y` is needed).
#'   `NULL`: the training rows of a formula fit (its model frame).
#' @param y For a matrix fit: the response of the rows of `newdata`.
#' @param nsim Number of shuffles of each predictor.
#' @param metric The score whose drop is measured, by its scikit-learn name:
#'   by default `"r2"` for regression, `"accuracy"` for classification; e.g.
#'   `"neg_mean_absolute_error"` or `"neg_log_loss"` (higher is better for
#'   every scikit-learn score).
#' @param seed Whole number seeding the shuffles (`NULL`: drawn from R's
#'   random number generator, so [set.seed()] makes them repeatable).
#' @param ... Unused.
#' @return A data frame of class `"neumiss_importance"`, one row per predictor,
#'   most important first: `variable`, `importance` (the mean drop of the
#'   score) and `sd` (its standard deviation over the `nsim` shuffles);
#'   attributes `metric`, `nsim` and `n` (the rows scored). `plot()` draws the
#'   importances with bars of +/- one standard deviation.
#' @seealso [plot.neumiss()] with `type = "pdp"` for the partial dependence on
#'   one predictor.
#' @examples
#' if (is_neumiss_available()) {
#'   set.seed(1)
#'   fit <- neumiss(Ozone ~ ., data = airquality, max_epochs = 20)
#'   imp <- importance(fit, nsim = 3)
#'   imp
#'   plot(imp)
#' }
#' @export
importance <- function(object, ...) {
  UseMethod("importance")
}

#' @rdname importance
#' @export
importance.neumiss <- function(object, newdata = NULL, y = NULL, nsim = 5L, metric = NULL,
                               seed = NULL, ...) {
  .check_fit(object)
  .check_whole(nsim, "nsim", 1L)
  if (is.null(metric)) metric <- if (object$task == "regression") "r2" else "accuracy"
  if (!is.character(metric) || length(metric) != 1 || is.na(metric)) {
    .abort("`metric` must be the name of a scikit-learn score, such as \"r2\" or \"accuracy\".")
  }
  if (is.null(seed)) seed <- .draw_seed()
  .check_whole(seed, "seed", 0L)
  data <- .inspection_data(object, newdata, y, response = TRUE)
  result <- .py_call(
    .adapter()$permutation_importance(.estimator(object), .table_for_python(data$table),
                                      data$y, as.integer(nsim), metric, as.integer(seed)),
    "permutation importance failed"
  )
  .rethrow_warnings(result$warnings)
  out <- data.frame(variable = names(data$table), importance = as.numeric(result$importance),
                    sd = as.numeric(result$sd), stringsAsFactors = FALSE)
  out <- out[order(-out$importance), , drop = FALSE]
  rownames(out) <- NULL
  structure(out, class = c("neumiss_importance", "data.frame"), metric = metric,
            nsim = as.integer(nsim), n = length(data$y))
}

#' @rdname importance
#' @param x A `"neumiss_importance"` data frame.
#' @export
plot.neumiss_importance <- function(x, ...) {
  x <- x[rev(seq_len(nrow(x))), , drop = FALSE]  # the most important on top
  at <- seq_len(nrow(x))
  low <- x$importance - x$sd
  high <- x$importance + x$sd
  left <- max(graphics::strwidth(x$variable, units = "inches", cex = 0.8)) + 0.2
  mai <- graphics::par("mai")
  old <- graphics::par(mai = c(mai[1], min(left, 0.5 * graphics::par("fin")[1]), mai[3], 0.2))
  on.exit(graphics::par(old))
  args <- utils::modifyList(
    list(xlim = range(c(0, low, high)), ylim = c(0.5, nrow(x) + 0.5), yaxt = "n", pch = 19,
         ylab = "", xlab = sprintf("drop of %s when shuffled (mean +/- sd)", attr(x, "metric")),
         main = sprintf("Permutation importance (%d shuffles, %d rows)", attr(x, "nsim"),
                        attr(x, "n"))),
    list(...))
  do.call(graphics::plot, c(list(x$importance, at), args))
  graphics::abline(v = 0, lty = 3, col = "grey50")
  graphics::segments(low, at, high, at)
  graphics::axis(2, at = at, labels = x$variable, las = 1, cex.axis = 0.8)
  invisible(x)
}

# The predictors (a table conformed to the fit) and, when `response`, the response of
# the rows to inspect: `newdata` (and `y` for a matrix fit), else the training rows of a
# formula fit. Rows with a missing response are dropped.
.inspection_data <- function(object, newdata, y, response) {
  if (is.null(newdata)) {
    if (is.null(object$model) || is.null(object$terms)) {
      .abort("`newdata` is required: this fit keeps no training data (a matrix fit, model = FALSE, or a model read from a file).")
    }
    table <- .conform_table(object, .formula_table(object$model, object$terms), TRUE)
    return(list(table = table, y = if (response) .response_for_python(object, object$y)))
  }
  if (!response) {
    return(list(table = .newdata_table(object, newdata)))
  }
  if (!is.null(object$terms)) {
    if (!is.data.frame(newdata)) {
      .abort("`newdata` must be a data frame with the response for a model fitted with a formula.")
    }
    name <- .response_name(object$terms)
    y <- tryCatch(eval(str2lang(name), newdata, environment(object$terms)),
                  error = function(e) .abort("`newdata` lacks the response '%s'.", name))
  } else if (is.null(y)) {
    .abort("`y` is required with `newdata` for a matrix fit: the response of its rows.")
  }
  if (length(y) != NROW(newdata)) {
    .abort("the response has %d values but `newdata` has %d rows.", length(y), NROW(newdata))
  }
  keep <- !is.na(y)
  if (!any(keep)) {
    .abort("every row of `newdata` has a missing response.")
  }
  table <- .table_subset(.newdata_table(object, newdata), keep)
  list(table = table, y = .response_for_python(object, y[keep]))
}

# The response as the Python estimator reads it: numbers, or class labels as strings.
.response_for_python <- function(object, y) {
  if (object$task == "regression") {
    if (!is.numeric(y)) .abort("the response must be numeric for a regression model.")
    return(as.numeric(y))
  }
  labels <- as.character(y)
  unseen <- setdiff(unique(labels), object$classes)
  if (length(unseen)) {
    .abort("the response has classes not seen at fit: %s (classes: %s).", .quote(unseen),
           .quote(object$classes))
  }
  labels
}

# Partial dependence on `variable` (plot(fit, type = "pdp")): the mean prediction over
# the rows with `variable` set to each value of a grid, by scikit-learn's
# partial_dependence(). A data frame: `value` (numbers, or the levels of a factor), and
# `yhat` (regression) or one column per class of the class probabilities.
.partial_dependence <- function(object, variable, newdata, grid_size) {
  if (!is.character(variable) || length(variable) != 1 || !variable %in% object$feature_names) {
    .abort("`variable` must be the name of one predictor of the fit (%s).",
           .quote(object$feature_names))
  }
  .check_whole(grid_size, "grid_size", 2L)
  table <- .inspection_data(object, newdata, NULL, response = FALSE)$table
  categorical <- object$column_kinds[[variable]] == "categorical"
  ordered <- object$ordered_levels[[variable]]
  values <- table[[variable]]
  grid <- if (categorical) {
    object$xlevels[[variable]]
  } else if (!is.null(ordered)) {
    seq_along(ordered)
  } else {
    if (all(is.na(values))) {
      .abort("'%s' is missing in every row: no values to set it to.", variable)
    }
    unique(seq(stats::quantile(values, 0.05, na.rm = TRUE),
               stats::quantile(values, 0.95, na.rm = TRUE), length.out = grid_size))
  }
  result <- .py_call(
    .adapter()$partial_dependence(.estimator(object), .table_for_python(table), variable,
                                  as.list(grid), categorical),
    "partial dependence failed"
  )
  .rethrow_warnings(result$warnings)
  average <- matrix(as.numeric(result$average), nrow = result$n_outputs, byrow = TRUE)
  out <- data.frame(value = if (!is.null(ordered)) factor(ordered, levels = ordered, ordered = TRUE) else grid)
  if (object$task == "regression") {
    out$yhat <- average[1, ]
  } else if (nrow(average) == 1) {
    # scikit-learn gives the probability of Python's second class
    second <- average[1, ]
    out[object$py_classes] <- list(1 - second, second)
  } else {
    out[object$py_classes] <- as.data.frame(t(average))
  }
  if (object$task == "classification") out <- out[c("value", object$classes)]
  attr(out, "variable") <- variable
  attr(out, "observed") <- values[!is.na(values)]
  out
}

# Draw a partial dependence (one line per class for a classifier), with the observed
# values of a numeric variable as a rug.
.plot_pdp <- function(x, variable, newdata, grid_size, ...) {
  pd <- .partial_dependence(x, variable, newdata, grid_size)
  curves <- as.matrix(pd[-1])
  discrete <- is.factor(pd$value) || is.character(pd$value)
  at <- if (discrete) seq_len(nrow(pd)) else pd$value
  ylab <- if (x$task == "regression") "mean prediction" else "mean class probability"
  args <- utils::modifyList(
    list(type = if (discrete) "b" else "l", pch = 19, lty = 1, col = seq_len(ncol(curves)),
         xlab = variable, ylab = ylab, xaxt = if (discrete) "n" else "s",
         main = sprintf("Partial dependence on %s", variable)),
    list(...))
  do.call(graphics::matplot, c(list(at, curves), args))
  if (discrete) {
    graphics::axis(1, at = at, labels = as.character(pd$value))
  } else {
    observed <- attr(pd, "observed")
    graphics::rug(observed[observed >= min(at) & observed <= max(at)], col = "grey50")
  }
  if (ncol(curves) > 1) {
    graphics::legend("topright", legend = colnames(curves), col = args$col, lty = args$lty,
                     pch = args$pch, bty = "n")
  }
  invisible(pd)
}
