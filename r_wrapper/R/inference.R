#' Likelihood-based inference: what a NeuMiss fit offers instead
#'
#' A NeuMiss network is fitted by minimising a loss with early stopping, not by
#' maximum likelihood, and its weights are not identified (many weight vectors
#' give the same predictions): it has no covariance matrix of its weights, no
#' standard errors, no number of parameters that an information criterion
#' could count. So:
#' * `sigma()` (regression): the root mean squared training residual
#'   (weighted by the case weights), \eqn{\sqrt{\sum w_i r_i^2 / \sum w_i}},
#'   without a degrees-of-freedom correction: in-sample, hence optimistic.
#' * `deviance()`: the (weighted) residual sum of squares for regression, as
#'   for [stats::lm()]; for classification, twice the (weighted) sum of minus
#'   the log-probabilities of the observed classes, as for [stats::glm()].
#' * `logLik()` (hence [stats::AIC()] and [stats::BIC()]), `vcov()`,
#'   `confint()` and `anova()` are errors saying so. To compare models use
#'   held-out data: [compare_methods()], or the validation score of
#'   [summary.neumiss()]; for the uncertainty of predictions, fit with
#'   `neumiss(..., interval = TRUE)` and call `predict(fit, newdata, interval =
#'   "prediction")`.
#'
#' @param object A model fitted by [neumiss()].
#' @param parm,level Unused (`confint()` is an error).
#' @param ... Unused.
#' @return `sigma()`: a number; `deviance()`: a number. The others signal an
#'   error.
#' @name neumiss-inference
NULL

.no_likelihood <- paste(
  "a NeuMiss network is fitted by minimising a loss with early stopping, not by maximum",
  "likelihood, and its weights are not identified"
)

.compare_instead <- paste(
  "compare models on held-out data with compare_methods() or the validation score of",
  "summary()"
)

.intervals_instead <- paste(
  "for the uncertainty of predictions, fit with neumiss(..., interval = TRUE) and use",
  "predict(fit, newdata, interval = \"prediction\")"
)

# The training residuals and case weights of a regression fit (an error otherwise).
.training_residuals <- function(object, what) {
  .check_fit(object)
  if (object$task != "regression") {
    .abort("%s is defined for regression only.", what)
  }
  if (is.null(object$residuals)) {
    .abort("no %s: this model was read from a file, without its training data.", what)
  }
  w <- if (is.null(object$weights)) rep(1, length(object$residuals)) else object$weights
  list(residuals = object$residuals, weights = w)
}

#' @rdname neumiss-inference
#' @importFrom stats sigma
#' @export
sigma.neumiss <- function(object, ...) {
  r <- .training_residuals(object, "sigma()")
  sqrt(sum(r$weights * r$residuals^2) / sum(r$weights))
}

#' @rdname neumiss-inference
#' @importFrom stats deviance
#' @export
deviance.neumiss <- function(object, ...) {
  .check_fit(object)
  if (object$task == "regression") {
    r <- .training_residuals(object, "deviance()")
    return(sum(r$weights * r$residuals^2))
  }
  if (is.null(object$probabilities)) {
    .abort("no deviance: this model was read from a file, without its training data.")
  }
  p <- object$probabilities[cbind(seq_along(object$y),
                                  match(as.character(object$y), colnames(object$probabilities)))]
  w <- if (is.null(object$weights)) 1 else object$weights
  -2 * sum(w * log(pmax(p, 1e-15)))
}

#' @rdname neumiss-inference
#' @importFrom stats logLik
#' @export
logLik.neumiss <- function(object, ...) {
  .abort("no log-likelihood (nor AIC or BIC): %s, so it has no likelihood with a known number of parameters; %s.",
         .no_likelihood, .compare_instead)
}

#' @rdname neumiss-inference
#' @importFrom stats vcov
#' @export
vcov.neumiss <- function(object, ...) {
  .abort("no covariance matrix: %s, so they have no standard errors; %s.", .no_likelihood,
         .intervals_instead)
}

#' @rdname neumiss-inference
#' @importFrom stats confint
#' @export
confint.neumiss <- function(object, parm, level = 0.95, ...) {
  .abort("no confidence intervals for parameters: %s, so they have no standard errors; %s.",
         .no_likelihood, .intervals_instead)
}

#' @rdname neumiss-inference
#' @importFrom stats anova
#' @export
anova.neumiss <- function(object, ...) {
  .abort("no analysis of variance: %s, so nested networks cannot be compared by F or likelihood-ratio tests; %s.",
         .no_likelihood, .compare_instead)
}
