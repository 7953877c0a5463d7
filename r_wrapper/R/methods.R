#' Predict with a NeuMiss model
#'
#' @param object A model fitted by [neumiss()].
#' @param newdata A numeric matrix or data frame with the predictors of the fit
#'   (`NA` for missing values); a data frame for a model fitted with a formula.
#'   Columns are matched by name when both the fit and `newdata` have names
#'   (an error names missing or unexpected columns).
#' @param type `"response"`: numeric predictions (regression) or the predicted
#'   class (classification, a factor with the levels of the training
#'   response); `"class"`: the same for classification; `"prob"`: a matrix of
#'   class probabilities, one column per class.
#' @param ... Unused.
#' @return A numeric vector, a factor, or a matrix (`type = "prob"`).
#' @examples
#' \dontrun{
#' predict(fit, newdata)
#' predict(fit_class, newdata, type = "prob")
#' }
#' @export
predict.neumiss <- function(object, newdata, type = c("response", "prob", "class"), ...) {
  .check_fit(object)
  type <- match.arg(type)
  if (missing(newdata) || is.null(newdata)) {
    stop("`newdata` is required: a neumiss model does not keep its training data.",
         call. = FALSE)
  }
  if (object$task == "regression" && type != "response") {
    stop(sprintf("type = \"%s\" is only for classification; this is a regression model.",
                 type), call. = FALSE)
  }
  x <- .newdata_matrix(object, newdata)
  estimator <- .estimator(object)
  adapter <- .adapter()
  if (type == "prob") {
    proba <- .py_call(adapter$predict_proba(estimator, .values(x), nrow(x), ncol(x)),
                      "prediction failed")
    return(matrix(as.numeric(proba), nrow = nrow(x), byrow = TRUE,
                  dimnames = list(NULL, object$classes)))
  }
  pred <- .py_call(adapter$predict(estimator, .values(x), nrow(x), ncol(x)),
                   "prediction failed")
  if (object$task == "regression") {
    return(as.numeric(pred))
  }
  factor(object$classes[as.integer(pred) + 1L], levels = object$levels)
}

#' @export
print.neumiss <- function(x, ...) {
  .check_fit(x, "x")
  cat(sprintf("NeuMiss %s model (depth %d, %d epochs)\n", x$task, x$best_depth,
              x$n_epochs))
  if (!is.null(x$call)) {
    cat("Call: ", paste(deparse(x$call), collapse = "\n"), "\n", sep = "")
  }
  cat(sprintf("Features (%d): %s\n", length(x$feature_names),
              .abbreviate_list(x$feature_names)))
  if (x$task == "classification") {
    cat(sprintf("Classes (%d): %s\n", length(x$classes), .abbreviate_list(x$classes)))
  }
  cat(sprintf("%s: %s\n", .score_label(x), format(.score_value(x), digits = 4)))
  invisible(x)
}

.abbreviate_list <- function(v, n = 8) {
  if (length(v) <= n) paste(v, collapse = ", ") else
    paste0(paste(v[seq_len(n)], collapse = ", "), ", ...")
}

# The Python validation score is R² (regression) or minus the log-loss.
.score_label <- function(object) {
  if (object$task == "regression") "Validation R^2" else "Validation log-loss"
}

.score_value <- function(object) {
  if (object$task == "regression") object$validation_score else -object$validation_score
}

#' Summarise a NeuMiss model
#'
#' @param object A model fitted by [neumiss()].
#' @param x A `"summary.neumiss"` object.
#' @param ... Unused.
#' @return `summary()`: an object of class `"summary.neumiss"`, a list with
#'   `task`, `depth` (the depth asked for), `best_depth` (the depth used),
#'   `n_epochs`, `best_epoch` (whose weights were kept), `score_name`,
#'   `validation_score` (R² for regression, log-loss for classification),
#'   `history` (data frame: epoch, train_loss, val_loss, val_score, lr),
#'   `params` (all parameters of the Python estimator), `n_obs`,
#'   `missing_rate`, `feature_names`, `classes`.
#' @export
summary.neumiss <- function(object, ...) {
  .check_fit(object)
  structure(list(
    call = object$call,
    task = object$task,
    depth = object$params$depth,
    best_depth = object$best_depth,
    n_epochs = object$n_epochs,
    best_epoch = object$best_epoch,
    score_name = .score_label(object),
    validation_score = .score_value(object),
    history = object$history,
    params = object$params,
    n_obs = object$n_obs,
    missing_rate = object$missing_rate,
    feature_names = object$feature_names,
    classes = object$classes
  ), class = "summary.neumiss")
}

#' @rdname summary.neumiss
#' @export
print.summary.neumiss <- function(x, ...) {
  cat(sprintf("NeuMiss %s model\n", x$task))
  if (!is.null(x$call)) {
    cat("Call: ", paste(deparse(x$call), collapse = "\n"), "\n", sep = "")
  }
  if (!is.null(x$n_obs)) {
    cat(sprintf("Training data: %d rows, %d features, %.1f%% of predictor values missing\n",
                x$n_obs, length(x$feature_names), 100 * x$missing_rate))
  }
  cat(sprintf("Depth: %s (used: %d)\n", format(x$depth), x$best_depth))
  cat(sprintf("Epochs: %d (weights of epoch %d kept)\n", x$n_epochs, x$best_epoch))
  cat(sprintf("%s: %s\n", x$score_name, format(x$validation_score, digits = 4)))
  if (!is.null(x$classes)) {
    cat(sprintf("Classes: %s\n", paste(x$classes, collapse = ", ")))
  }
  shown <- c("weights", "residual", "mlp_depth", "optimizer", "learning_rate",
             "batch_size", "max_epochs", "patience", "random_state")
  shown <- intersect(shown, names(x$params))
  cat("Parameters: ", paste(shown, vapply(x$params[shown], format, character(1)),
                            sep = " = ", collapse = ", "), "\n", sep = "")
  cat("Training history:\n")
  h <- x$history
  rows <- if (nrow(h) <= 10) seq_len(nrow(h)) else
    unique(c(1:3, x$best_epoch, nrow(h) - 2:0))
  print(format(h[rows, , drop = FALSE], digits = 4), row.names = FALSE)
  invisible(x)
}

#' Plot the training curves of a NeuMiss model
#'
#' Training and validation loss per epoch (base graphics), with the epoch
#' whose weights were kept marked by a dotted line.
#'
#' @param x A model fitted by [neumiss()].
#' @param y Unused.
#' @param ... Graphical parameters passed to [graphics::matplot()].
#' @return `x`, invisibly.
#' @export
plot.neumiss <- function(x, y, ...) {
  .check_fit(x, "x")
  h <- x$history
  curves <- cbind(training = h$train_loss, validation = h$val_loss)
  curves <- curves[, colSums(is.finite(curves)) > 0, drop = FALSE]
  ylab <- if (x$task == "regression") "loss (MSE, standardized y)" else "loss (log-loss)"
  graphics::matplot(h$epoch, curves, type = "l", lty = seq_len(ncol(curves)),
                    col = seq_len(ncol(curves)), xlab = "epoch", ylab = ylab,
                    main = "NeuMiss training", ...)
  graphics::abline(v = x$best_epoch, lty = 3, col = "grey50")
  graphics::legend("topright", legend = colnames(curves), lty = seq_len(ncol(curves)),
                   col = seq_len(ncol(curves)), bty = "n")
  invisible(x)
}

#' The learned mean of a NeuMiss block
#'
#' A NeuMiss network has no regression coefficients in the usual sense; its
#' block learns a mean vector \eqn{\mu} of the predictors, the centre of its
#' estimate of the missing values. `coef()` returns it in the units of the
#' predictors, named by feature.
#'
#' @param object A model fitted by [neumiss()].
#' @param ... Unused.
#' @return A named numeric vector, one value per feature.
#' @export
coef.neumiss <- function(object, ...) {
  .check_fit(object)
  object$mu
}
