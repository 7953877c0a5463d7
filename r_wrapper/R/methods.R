#' Predict with a NeuMiss model
#'
#' @param object A model fitted by [neumiss()].
#' @param newdata A data frame (or matrix) with the predictors of the fit,
#'   `NA` for missing values; a data frame for a model fitted with a formula,
#'   whose terms are evaluated in it. Columns are matched by name, in any
#'   order, when both the fit and `newdata` have names (an error names the
#'   missing ones); a data frame may have further columns. Omitted: the
#'   predictions on the training rows (as [fitted()]), when the fit has them.
#' @param type `"response"`: numeric predictions (regression) or the predicted
#'   class (classification, a factor with the levels of the training
#'   response); `"class"`: the same for classification; `"prob"`: a matrix of
#'   class probabilities, one column per class; `"set"` (a classifier fitted with
#'   `interval = TRUE`): the prediction set of each row at `level`, a logical
#'   matrix with one column per class (`TRUE`: the class cannot be ruled out), its
#'   row sums the set sizes.
#' @param interval `"none"`, or `"prediction"` for prediction intervals (a
#'   model fitted with `neumiss(..., interval = TRUE)`, regression). There are
#'   no confidence intervals (`"confidence"` is an error).
#' @param level Coverage of the prediction intervals or sets; `NULL` is the level the
#'   model was fitted for. Another level is calibrated from the stored
#'   calibration scores, with the quantile head trained at the fit's level
#'   (valid, possibly wider than a model fitted for that level).
#' @param se.fit Must be `FALSE`: a NeuMiss network has no standard errors
#'   (see [neumiss-inference]); `TRUE` is an error pointing to prediction
#'   intervals.
#' @param ... Unused.
#' @return A numeric vector, a factor, or a matrix (`type = "prob"`), one value
#'   (row) per row of `newdata`: rows with missing predictors get predictions.
#'   A `newdata` without rows gives a prediction without values (length 0, or
#'   0 rows).
#'   A factor level not seen at fit is treated as missing, with a warning when
#'   such values are more than one in twenty of the column's values.
#'   With `interval = "prediction"`, a matrix with columns `fit`, `lwr` and
#'   `upr`, as [stats::predict.lm()] returns: the interval holds the response
#'   with probability `level` within each cell of patterns of missing
#'   predictors (method `"cqr-mondrian"`), for every pattern when they are
#'   missing completely at random (`"cqr-mda-exact"`), on average over the
#'   rows only for `"cqr"` and `"split"`.
#'   With `type = "set"`, the set holds the true class with probability `level`
#'   within each cell of patterns of missing predictors (`"lac-mondrian"`,
#'   `"aps-mondrian"`), on average over the rows for `"lac"` and `"aps"`; a
#'   `"lac"` set may be empty (no class plausible enough), an `"aps"` set never is.
#'   Below 500 rows the sets are calibrated by CV+ (every row, scored by a network
#'   that did not see it): within a cell where it holds enough rows for `level`, on
#'   average over the rows elsewhere ([print()] says which).
#' @examples
#' if (is_neumiss_available()) {
#'   set.seed(1)
#'   fit <- neumiss(Species ~ ., data = iris, max_epochs = 20)
#'   newdata <- iris[c(1, 51, 101), ]
#'   newdata$Petal.Length[2] <- NA
#'   predict(fit, newdata)
#'   predict(fit, newdata, type = "prob")
#'   fit2 <- neumiss(Sepal.Length ~ ., data = iris, max_epochs = 20, interval = TRUE)
#'   predict(fit2, newdata, interval = "prediction", level = 0.9)
#' }
#' @export
predict.neumiss <- function(object, newdata, type = c("response", "prob", "class", "set"),
                            interval = c("none", "prediction", "confidence"), level = NULL,
                            se.fit = FALSE, ...) {
  .check_fit(object)
  type <- match.arg(type)
  interval <- match.arg(interval)
  if (!isFALSE(se.fit)) {
    .abort("se.fit = TRUE: a NeuMiss network has no standard errors of its predictions (%s); %s.",
           "its weights are not identified", .intervals_instead)
  }
  if (interval != "none") {
    return(.predict_interval(object, newdata, interval, level))
  }
  if (type == "set") {
    return(.predict_set(object, newdata, level))
  }
  if (object$task == "regression" && type != "response") {
    .abort("type = \"%s\" is only for classification; this is a regression model.", type)
  }
  if (missing(newdata) || is.null(newdata)) {
    if (is.null(object$fitted.values)) {
      .abort("`newdata` is required: this model (read from a file) has no training predictions.")
    }
    return(stats::napredict(object$na.action,
                            if (type == "prob") object$probabilities else object$fitted.values))
  }
  .predict_table(object, .newdata_table(object, newdata), type)
}

# The fit/lwr/upr matrix of predict(..., interval = "prediction").
.predict_interval <- function(object, newdata, interval, level) {
  if (interval == "confidence") {
    .abort("confidence intervals are not available: a NeuMiss network has no standard errors; use interval = \"prediction\".")
  }
  if (is.null(object$interval)) {
    .abort("this model was fitted without intervals: refit it with neumiss(..., interval = TRUE).")
  }
  if (missing(newdata) || is.null(newdata)) {
    .abort("`newdata` is required for prediction intervals.")
  }
  level <- if (is.null(level)) 1 - object$interval$alpha else .check_level(level)
  table <- .newdata_table(object, newdata)
  if (.table_rows(table) == 0) {
    return(matrix(numeric(0), 0, 3, dimnames = list(NULL, c("fit", "lwr", "upr"))))
  }
  result <- .py_call(.adapter()$predict_interval(.estimator(object), .table_for_python(table),
                                                 1 - level), "prediction failed")
  .rethrow_warnings(result$warnings)
  matrix(as.numeric(result$values), ncol = 3, byrow = TRUE,
         dimnames = list(rownames(as.data.frame(newdata)), c("fit", "lwr", "upr")))
}

# The logical matrix of predict(..., type = "set"): one row per row, one column per class.
.predict_set <- function(object, newdata, level) {
  if (object$task != "classification" || is.null(object$interval)) {
    .abort("type = \"set\" needs a classifier fitted with prediction sets: neumiss(..., interval = TRUE) on a class response.")
  }
  if (missing(newdata) || is.null(newdata)) {
    .abort("`newdata` is required for prediction sets.")
  }
  level <- if (is.null(level)) 1 - object$interval$alpha else .check_level(level)
  table <- .newdata_table(object, newdata)
  n <- .table_rows(table)
  values <- if (n == 0) logical(0) else {
    result <- .py_call(.adapter()$predict_set(.estimator(object), .table_for_python(table),
                                              1 - level), "prediction failed")
    .rethrow_warnings(result$warnings)
    as.logical(as.integer(result$values))
  }
  sets <- matrix(values, nrow = n, ncol = length(object$py_classes), byrow = TRUE,
                 dimnames = list(if (n) rownames(as.data.frame(newdata)), object$py_classes))
  sets[, object$classes, drop = FALSE]
}

# Predictions for a table already conformed to the fit.
.predict_table <- function(object, table, type) {
  if (.table_rows(table) == 0) {
    return(.empty_prediction(object, type))
  }
  estimator <- .estimator(object)
  adapter <- .adapter()
  spec <- .table_for_python(table)
  if (type == "prob") {
    result <- .py_call(adapter$predict_proba(estimator, spec), "prediction failed")
    .rethrow_warnings(result$warnings)
    proba <- matrix(as.numeric(result$values), nrow = .table_rows(table), byrow = TRUE,
                    dimnames = list(NULL, object$py_classes))
    return(proba[, object$classes, drop = FALSE])
  }
  result <- .py_call(adapter$predict(estimator, spec), "prediction failed")
  .rethrow_warnings(result$warnings)
  if (object$task == "regression") {
    return(as.numeric(result$values))
  }
  .as_response(object, factor(object$py_classes[as.integer(result$values) + 1L],
                              levels = object$levels))
}

# Predicted classes as the response was: logical for a logical response, else a factor.
.as_response <- function(object, classes) {
  if (isTRUE(object$logical_response)) as.logical(as.character(classes)) else classes
}

# A prediction for no rows, of the type of predict().
.empty_prediction <- function(object, type) {
  if (object$task == "regression") {
    return(numeric(0))
  }
  if (type == "prob") {
    return(matrix(numeric(0), 0, length(object$classes), dimnames = list(NULL, object$classes)))
  }
  .as_response(object, factor(character(0), levels = object$levels))
}

#' @export
print.neumiss <- function(x, ...) {
  .check_fit(x, "x")
  cat(sprintf("NeuMiss %s model (depth %d, %s weights, %s, %d epochs)\n", x$task,
              x$best_depth, x$weight_sharing,
              .head_label(x$mlp_depth, x$mask_skip, x$spline, x$mlp_weight), x$n_epochs))
  if (!is.null(x$call)) {
    cat("Call: ", paste(deparse(x$call), collapse = "\n"), "\n", sep = "")
  }
  cat(sprintf("Features (%d): %s\n", length(x$feature_names),
              .abbreviate_list(x$feature_names)))
  .log_target_note(x)
  .calibration_note(x)
  .integer_levels_note(.integer_levels(x))
  if (x$task == "classification") {
    cat(sprintf("Classes (%d): %s\n", length(x$classes), .abbreviate_list(x$classes)))
  }
  if (!is.na(x$n_obs)) {
    cat(sprintf("Rows: %d (%d training, %d validation%s%s)%s\n", x$n_obs, x$n_train, x$n_valid,
                .scheme_note(x$validation_scheme),
                if (isTRUE(x$n_calibration > 0)) sprintf(", %d calibration", x$n_calibration)
                else "", .deleted_note(x)))
  }
  if (!is.null(x$interval)) {
    cat(sprintf("Prediction %s: %s, level %g\n",
                if (identical(x$interval$kind, "sets")) "sets" else "intervals",
                x$interval$method, 1 - x$interval$alpha))
    for (line in unlist(x$interval$summary)) cat("  ", line, "\n", sep = "")
  }
  cat(sprintf("%s: %s%s\n", .score_label(x), format(.score_value(x), digits = 4),
              if (isTRUE(x$n_valid > 0)) sprintf(" (%d rows)", x$n_valid) else ""))
  .warn_few_validation_rows(x$n_valid)
  invisible(x)
}

# How the validation rows were chosen, when not a held-out share: out of fold (each row
# scored by the ensemble member that did not train on it), or the user's validation_data.
.scheme_note <- function(scheme) {
  if (identical(scheme, "out_of_fold")) {
    ", out of fold: each scored by the member that did not train on it"
  } else if (identical(scheme, "validation_data")) {
    ", from validation_data"
  } else {
    ""
  }
}

# A warning when the validation metric rests on too few rows to be trusted.
.warn_few_validation_rows <- function(n_valid) {
  if (!is.na(n_valid) && n_valid > 0 && n_valid < .min_validation_rows) {
    .warn("the validation metric rests on %d row(s) only: it is unreliable (more rows, or a larger validation_fraction, would help).",
          n_valid)
  }
}

.deleted_note <- function(x) {
  n <- length(x$na.action)
  if (n == 0) "" else sprintf("; %d deleted (%s)", n, .na_reason(x))
}

.na_reason <- function(x) {
  if (is.null(x$call$na.action)) "missing response" else "na.action"
}

.abbreviate_list <- function(v, n = 8) {
  if (length(v) <= n) paste(v, collapse = ", ") else
    paste0(paste(v[seq_len(n)], collapse = ", "), ", ... (", length(v), " in all)")
}

# The Python validation score is R² (regression) or minus the log-loss.
.score_label <- function(object) {
  if (object$task == "regression") "Validation R^2" else "Validation log-loss"
}

.score_value <- function(object) {
  if (object$task == "regression") object$validation_score else -object$validation_score
}

# R² (regression) or log-loss (classification) on the training rows, all of them.
.training_metric <- function(object) {
  if (is.null(object$fitted.values) || is.null(object$y)) {
    return(NA_real_)
  }
  if (object$task == "regression") {
    return(.r2(object$y, object$fitted.values))
  }
  .log_loss(object$y, object$probabilities)
}

.log_loss <- function(truth, proba) {
  p <- proba[cbind(seq_along(truth), match(as.character(truth), colnames(proba)))]
  p[is.na(p)] <- 0
  -mean(log(pmax(p, 1e-15)))
}

#' Summarise a NeuMiss model
#'
#' Shows the rows used (training and validation), the validation metric (R²
#' for regression, log-loss for classification) and the same metric on all
#' training rows, the depth and weight sharing used, the epochs and the
#' parameters. The validation metric rests on the rows held out
#' (`validation_fraction`, 10% by default): a warning says when they are fewer
#' than 20, as the metric is then unreliable.
#'
#' @param object A model fitted by [neumiss()].
#' @param x A `"summary.neumiss"` object.
#' @param ... Unused.
#' @return `summary()`: an object of class `"summary.neumiss"`, a list with
#'   `task`, `depth` (the depth asked for), `best_depth` (the depth used),
#'   `mlp_depth` (the head used: 0 is linear), `mlp_weight` (the MLP head's weight in
#'   it: between 0 and 1, a blend with the linear head), `weight_sharing`, `mask_skip` (whether
#'   the head sees the mask itself), `spline` (whether it adds splines of the features),
#'   `log_target` (whether the network fits the log of the response),
#'   `n_epochs`, `best_epoch` (whose weights were kept),
#'   `n_obs`, `n_train`, `n_valid`, `validation_scheme` (`"holdout"`,
#'   `"out_of_fold"`, `"validation_data"`), `n_deleted`, `metric` (`"R^2"` or
#'   `"log-loss"`), `validation` (the validation metric), `training` (the
#'   metric on all training rows, in-sample), `history` (data frame: epoch,
#'   train_loss, val_loss, val_score, lr), `params` (all parameters of the
#'   Python estimator), `seed`, `missing_rate`, `feature_names`, `xlevels`,
#'   `target_encoded` (the factors encoded by target statistics),
#'   `integer_levels` (the numeric predictors given an indicator per frequent
#'   integer value, and how many), `classes`, `class_weights` (a classifier fitted
#'   with `class_weight`: the weight of each level; `NULL` otherwise).
#' @export
summary.neumiss <- function(object, ...) {
  .check_fit(object)
  n_valid <- object$n_valid
  .warn_few_validation_rows(n_valid)
  structure(list(
    call = object$call,
    task = object$task,
    depth = object$params$depth,
    best_depth = object$best_depth,
    mlp_depth = object$mlp_depth,
    mlp_weight = object$mlp_weight,
    weight_sharing = object$weight_sharing,
    mask_skip = isTRUE(object$mask_skip),
    spline = isTRUE(object$spline),
    log_target = isTRUE(object$log_target),
    temperature = object$temperature,
    start_C = object$start_C,
    class_weights = object$class_weights,
    n_epochs = object$n_epochs,
    best_epoch = object$best_epoch,
    n_obs = object$n_obs,
    n_train = object$n_train,
    n_valid = n_valid,
    validation_scheme = object$validation_scheme,
    n_deleted = length(object$na.action),
    deleted_reason = .na_reason(object),
    metric = if (object$task == "regression") "R^2" else "log-loss",
    validation = .score_value(object),
    training = .training_metric(object),
    history = object$history,
    params = object$params,
    seed = object$seed,
    missing_rate = object$missing_rate,
    feature_names = object$feature_names,
    xlevels = object$xlevels,
    target_encoded = names(object$level_statistics),
    integer_levels = .integer_levels(object),
    classes = object$classes
  ), class = "summary.neumiss")
}

# Fewer validation rows than this: print() and summary() warn that the metric is
# unreliable.
.min_validation_rows <- 20L

# A parameter value on one line: c(3, 1) as [3, 1].
.format_param <- function(value) {
  if (is.list(value) || length(value) > 1) {
    return(paste0("[", paste(unlist(value), collapse = ", "), "]"))
  }
  format(value)
}

#' @rdname summary.neumiss
#' @export
print.summary.neumiss <- function(x, ...) {
  cat(sprintf("NeuMiss %s model\n", x$task))
  if (!is.null(x$call)) {
    cat("Call: ", paste(deparse(x$call), collapse = "\n"), "\n", sep = "")
  }
  if (!is.na(x$n_obs)) {
    cat(sprintf("Rows: %d used: %d training, %d validation%s%s\n", x$n_obs, x$n_train,
                x$n_valid, .scheme_note(x$validation_scheme), if (x$n_deleted) sprintf(" (%d deleted: %s)", x$n_deleted,
                                                    x$deleted_reason) else ""))
  }
  cat(sprintf("Features: %d (%s), %.1f%% of predictor values missing\n",
              length(x$feature_names), .abbreviate_list(x$feature_names, 6),
              100 * x$missing_rate))
  .log_target_note(x)
  .calibration_note(x)
  .class_weight_note(x)
  .start_note(x)
  .integer_levels_note(x$integer_levels)
  if (length(x$xlevels)) {
    encoded_by <- ifelse(names(x$xlevels) %in% x$target_encoded, ", target statistics", "")
    cat(sprintf("Factors: %s\n", paste(sprintf("%s (%d levels%s)", names(x$xlevels),
                                               lengths(x$xlevels), encoded_by),
                                       collapse = ", ")))
  }
  if (!is.null(x$classes)) {
    cat(sprintf("Classes: %s\n", .abbreviate_list(x$classes)))
  }
  cat(sprintf("Depth: %s (used: %d), weight sharing: %s, %s\n", .format_param(x$depth),
              x$best_depth, x$weight_sharing, .head_label(x$mlp_depth, x$mask_skip, x$spline,
                                                          x$mlp_weight)))
  cat(sprintf("Epochs: %d (%s)\n", x$n_epochs,
              if (x$n_epochs == 0) "not trained: the start fitted to the data validated best"
              else if (x$best_epoch == 0) "no epoch beat the start fitted to the data: it is kept"
              else sprintf("weights of epoch %d kept", x$best_epoch)))
  if (!is.na(x$n_valid) && x$n_valid == 0) {
    cat(sprintf("Validation %s: none (validation_fraction = 0); training loss used\n", x$metric))
  } else {
    cat(sprintf("Validation %s: %s%s\n", x$metric, format(x$validation, digits = 4),
                if (!is.na(x$n_valid)) sprintf(" (%d rows)", x$n_valid) else ""))
  }
  if (!is.na(x$training)) {
    cat(sprintf("Training %s: %s (all %d rows, in-sample)\n", x$metric,
                format(x$training, digits = 4), x$n_obs))
  }
  shown <- c("residual", "mlp_depth", "ensemble_size", "optimizer", "learning_rate",
             "batch_size", "max_epochs", "patience", "random_state")
  shown <- intersect(shown, names(x$params))
  cat("Parameters: ", paste(sub("random_state", "seed", shown),
                            vapply(x$params[shown], .format_param, character(1)),
                            sep = " = ", collapse = ", "), "\n", sep = "")
  h <- x$history
  if (nrow(h) == 0) {
    cat("Training history: none (not trained)\n")
    return(invisible(x))
  }
  cat("Training history:\n")
  rows <- if (nrow(h) <= 10) seq_len(nrow(h)) else
    unique(c(1:3, x$best_epoch, nrow(h) - 2:0))
  print(format(h[rows, , drop = FALSE], digits = 4), row.names = FALSE)
  invisible(x)
}

#' Diagnostic plots of a NeuMiss model
#'
#' As [stats::plot.lm()], one plot per value of `which` (base graphics):
#' 1. residuals against fitted values, with a smooth ([stats::lowess()]);
#' 2. a normal Q-Q plot of the residuals divided by [sigma()][neumiss-inference];
#' 3. residuals by the number of missing predictors of the row (box plots):
#'    whether the fit is worse where more values are missing;
#' 4. the training curve: training and validation loss per epoch, with the
#'    epoch whose weights were kept marked by a dotted line (a note instead for a
#'    network kept untrained, `n_epochs` 0).
#'
#' Plots 1 to 3 use the training rows (validation rows included) and need a
#' regression fit with its training data; a classifier has plot 4 only.
#'
#' With `type = "pdp"`, the partial dependence on one predictor instead: the
#' mean prediction over the rows (of `newdata`, by default the training rows)
#' with `variable` set to each value of a grid, by scikit-learn's
#' `sklearn.inspection.partial_dependence()`. The grid runs from the 5% to the
#' 95% quantile of the observed values of a numeric predictor (those in that
#' range are marked below the curve), over the levels of a factor. A classifier has one curve per
#' class (its mean probability). Each row keeps its other predictors as they
#' are, missing ones included. See [importance()] for permutation importance.
#'
#' @param x A model fitted by [neumiss()].
#' @param y Unused.
#' @param which Which plots (a subset of 1:4); by default all four for
#'   regression, 4 for classification or a model read from a file.
#' @param ask Logical: ask before each new plot (by default when several plots
#'   do not fit on an interactive device).
#' @param type `"diagnostics"` (the plots of `which`) or `"pdp"`.
#' @param variable With `type = "pdp"`: the name of a predictor (see
#'   `fit$feature_names`).
#' @param newdata With `type = "pdp"`: the rows to average over (as for
#'   [predict.neumiss()]); `NULL`: the training rows of a formula fit.
#' @param grid_size With `type = "pdp"`: the number of values of a numeric
#'   predictor.
#' @param ... Graphical parameters passed to the plotting function (they
#'   replace the defaults, e.g. `main`, `ylab`, `log = "y"`).
#' @return `x`, invisibly; with `type = "pdp"`, the partial dependence,
#'   invisibly: a data frame with `value` (the grid) and `yhat` (regression)
#'   or one column of mean probabilities per class.
#' @examples
#' if (is_neumiss_available()) {
#'   set.seed(1)
#'   fit <- neumiss(Ozone ~ ., data = airquality, max_epochs = 20)
#'   plot(fit, which = 1)
#'   plot(fit, type = "pdp", variable = "Temp")
#' }
#' @export
plot.neumiss <- function(x, y, which = NULL, ask = NULL, type = c("diagnostics", "pdp"),
                         variable = NULL, newdata = NULL, grid_size = 20L, ...) {
  .check_fit(x, "x")
  type <- match.arg(type)
  if (type == "pdp") {
    return(.plot_pdp(x, variable, newdata, grid_size, ...))
  }
  has_residuals <- x$task == "regression" && !is.null(x$residuals)
  if (is.null(which)) which <- if (has_residuals) 1:4 else 4L
  if (!is.numeric(which) || !length(which) || anyNA(which) || !all(which %in% 1:4)) {
    .abort("`which` must hold plot numbers among 1:4.")
  }
  if (any(which < 4) && !has_residuals) {
    .abort("plots 1 to 3 show residuals: a regression fit with its training data only (which = 4 is the training curve).")
  }
  if (is.null(ask)) {
    ask <- length(which) > prod(graphics::par("mfcol")) && grDevices::dev.interactive()
  }
  if (ask) {
    old <- grDevices::devAskNewPage(TRUE)
    on.exit(grDevices::devAskNewPage(old))
  }
  for (k in which) {
    switch(k, .plot_residuals(x, ...), .plot_qq(x, ...), .plot_by_missing(x, ...),
           .plot_training(x, ...))
  }
  invisible(x)
}

# Call `fun` with `defaults` replaced by the user's graphical parameters.
.plot_call <- function(fun, data, defaults, ...) {
  do.call(fun, c(data, utils::modifyList(defaults, list(...))))
}

.plot_residuals <- function(x, ...) {
  .plot_call(graphics::plot, list(x$fitted.values, x$residuals),
             list(xlab = "fitted values", ylab = "residuals", main = "Residuals vs fitted"),
             ...)
  graphics::abline(h = 0, lty = 3, col = "grey50")
  graphics::lines(stats::lowess(x$fitted.values, x$residuals), col = 2)
}

.plot_qq <- function(x, ...) {
  standardized <- x$residuals / sigma.neumiss(x)
  .plot_call(stats::qqnorm, list(standardized),
             list(ylab = "residuals / sigma", main = "Normal Q-Q"), ...)
  stats::qqline(standardized, lty = 3, col = "grey50")
}

.plot_by_missing <- function(x, ...) {
  if (is.null(x$n_missing)) {
    .abort("this fit does not record the missing predictors of its rows: refit it to draw plot 3.")
  }
  .plot_call(graphics::boxplot, list(x$residuals ~ x$n_missing),
             list(xlab = "number of missing predictors", ylab = "residuals",
                  main = "Residuals by missing predictors"), ...)
  graphics::abline(h = 0, lty = 3, col = "grey50")
}

.plot_training <- function(x, ...) {
  h <- x$history
  if (nrow(h) == 0) {  # the start fitted to the data was kept untrained
    graphics::plot.new()
    graphics::title(main = "NeuMiss training")
    graphics::text(0.5, 0.5, "not trained: the start fitted to the data validated best")
    return(invisible(NULL))
  }
  curves <- cbind(training = h$train_loss, validation = h$val_loss)
  curves <- curves[, colSums(is.finite(curves)) > 0, drop = FALSE]
  ylab <- if (x$task == "regression") "loss (MSE, standardized y)" else "loss (log-loss)"
  args <- utils::modifyList(
    list(type = "l", lty = seq_len(ncol(curves)), col = seq_len(ncol(curves)),
         xlab = "epoch", ylab = ylab, main = "NeuMiss training"),
    list(...)
  )
  do.call(graphics::matplot, c(list(h$epoch, curves), args))
  graphics::abline(v = x$best_epoch, lty = 3, col = "grey50")
  graphics::legend("topright", legend = colnames(curves), lty = args$lty,
                   col = args$col, bty = "n")
}

#' Extractors of a NeuMiss fit
#'
#' The usual accessors of a model fitted by [neumiss()]:
#' * `fitted()`: predictions on the training rows (validation rows included),
#'   padded with `NA` with `na.action = na.exclude`. For regression, numbers.
#'   For classification, as `fitted()` of a [stats::glm()] (`type =
#'   "response"`): with two classes, the probability of the second level of
#'   the response; with more, the matrix of class probabilities. `type =
#'   "prob"` always gives that matrix (one column per class), `type =
#'   "class"` the predicted class (a factor).
#' * `residuals()`: response minus fitted values (regression only).
#' * `nobs()`: the number of rows used (with non-zero weight).
#' * `formula()`, `terms()`: those of a formula fit, with the response, so that
#'   [update()] works (`update(fit, . ~ . - x)`, `update(fit, max_epochs = 50)`).
#' * `model.frame()`: the model frame kept by a formula fit (`model = TRUE`).
#'
#' A model read with [read_neumiss()] has no training data: `fitted()`,
#' `residuals()` and `model.frame()` give an error, `nobs()` the recorded count.
#'
#' @param object,formula,x A model fitted by [neumiss()].
#' @param type For `fitted()` of a classifier: `"response"`, `"prob"` or
#'   `"class"` (see above); ignored for regression.
#' @param ... Unused.
#' @return As for [stats::lm()] fits.
#' @name neumiss-extractors
NULL

#' @rdname neumiss-extractors
#' @importFrom stats coef fitted formula model.frame nobs predict residuals terms
#' @export
fitted.neumiss <- function(object, type = c("response", "prob", "class"), ...) {
  .check_fit(object)
  type <- match.arg(type)
  if (is.null(object$fitted.values)) {
    .abort("no fitted values: this model was read from a file, without its training data.")
  }
  values <- object$fitted.values
  if (object$task == "classification" && type != "class") {
    values <- object$probabilities
    if (type == "response" && ncol(values) == 2) {
      values <- stats::setNames(values[, 2], rownames(values))
    }
  }
  stats::napredict(object$na.action, values)
}

#' @rdname neumiss-extractors
#' @export
residuals.neumiss <- function(object, ...) {
  .check_fit(object)
  if (object$task != "regression") {
    .abort("residuals are defined for regression only; for classification use predict(fit, type = \"prob\").")
  }
  if (is.null(object$residuals)) {
    .abort("no residuals: this model was read from a file, without its training data.")
  }
  stats::naresid(object$na.action, object$residuals)
}

#' @rdname neumiss-extractors
#' @export
nobs.neumiss <- function(object, ...) {
  .check_fit(object)
  if (!is.null(object$weights)) sum(object$weights != 0) else object$n_obs
}

#' @rdname neumiss-extractors
#' @export
formula.neumiss <- function(x, ...) {
  stats::formula(terms.neumiss(x))
}

#' @rdname neumiss-extractors
#' @export
terms.neumiss <- function(x, ...) {
  .check_fit(x, "x")
  if (is.null(x$terms)) {
    .abort("this model was fitted from a matrix or data frame, not a formula: it has no formula or terms.")
  }
  x$terms
}

#' @rdname neumiss-extractors
#' @export
model.frame.neumiss <- function(formula, ...) {
  .check_fit(formula, "formula")
  if (!is.null(formula$model)) {
    return(formula$model)
  }
  if (is.null(formula$terms)) {
    .abort("this model was fitted from a matrix or data frame: it has no model frame.")
  }
  .abort("the model frame was not kept (model = FALSE, or a model read from a file); refit with model = TRUE.")
}

# A classifier's temperature, when its probabilities were calibrated.
.calibration_note <- function(x) {
  if (!is.null(x$temperature) && x$temperature != 1) {
    cat(sprintf("Probabilities: calibrated (log-odds divided by the temperature %.3g)\n",
                x$temperature))
  }
}

# A classifier fitted with class_weight: the weight of each level in every loss.
.class_weight_note <- function(x) {
  if (length(x$class_weights)) {
    cat(sprintf("Class weights: %s (class_weight; probabilities of the reweighted levels)\n",
                paste(names(x$class_weights), sprintf("%.3g", x$class_weights),
                      collapse = ", ")))
  }
}

# A classifier's logistic start: the C its heads' linear part started from.
.start_note <- function(x) {
  if (!is.null(x$start_C)) {
    cat(sprintf("Linear start: logistic regression with C = %.3g\n", x$start_C))
  }
}

# One line saying that the network fits log(response), when it does.
.log_target_note <- function(x) {
  if (isTRUE(x$log_target)) {
    cat("Response: fitted on the log scale (log_target), predictions are exp() of it\n")
  }
}

# The numeric predictors given an indicator per frequent integer value (integer_levels):
# their numbers of indicators, named by predictor.
.integer_levels <- function(object) {
  counts <- table(factor(object$encoded_input, levels = object$feature_names))
  numeric <- vapply(names(counts), function(n) identical(object$column_kinds[[n]], "numeric"),
                    logical(1))
  stats::setNames(as.integer(counts) - 1L, names(counts))[counts > 1 & numeric]
}

.integer_levels_note <- function(levels) {
  if (length(levels)) {
    cat(sprintf("Integer codes with an indicator per value (integer_levels): %s\n",
                paste(sprintf("%s (%d)", names(levels), levels), collapse = ", ")))
  }
}

# "linear head" or "MLP head (k hidden layers)": the head a fit uses, "blended with the
# linear head" with its MLP weight below 1 (NULL: a fit read from an older file, not
# blended), "seeing the mask" with the mask's own term, "with splines" with the spline term.
.head_label <- function(mlp_depth, mask_skip = FALSE, spline = FALSE, mlp_weight = NULL) {
  head <- if (mlp_depth == 0L) "linear head" else
    sprintf("MLP head (%d hidden layer%s)", mlp_depth, if (mlp_depth == 1L) "" else "s")
  if (mlp_depth > 0L && !is.null(mlp_weight) && mlp_weight < 1) {
    head <- sprintf("%s blended with the linear head (MLP weight %.2f)", head, mlp_weight)
  }
  if (isTRUE(mask_skip)) head <- paste(head, "seeing the mask")
  if (isTRUE(spline)) paste(head, "with splines") else head
}
