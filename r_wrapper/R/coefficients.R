#' Per-pattern coefficients of a NeuMiss network with a linear head
#'
#' With the linear head (`mlp_depth = 0`), a NeuMiss network is, for a fixed
#' pattern of missing predictors, an exact linear model of the observed ones:
#' its Neumann iterations and head are linear in the observed values once the
#' mask is fixed. `coef(fit, pattern)` returns that model: the intercept and
#' one coefficient per observed predictor, in the units of the predictors (the
#' columns of the model frame: `log(x)` for a term `log(x)`). A factor
#' predictor has one coefficient per level but its first (the change of the
#' prediction from the first level to that level), and the intercept is the
#' prediction with every observed numeric predictor at 0 and every observed
#' factor at its first level. A numeric predictor of few distinct integers
#' that the fit gave indicators (the Python estimator's `integer_levels`: a
#' month, a year) has its slope, then one coefficient per indicator (`month=3`:
#' added when the value is 3). Missing predictors have no coefficient: the
#' network has already accounted for them in the intercept and the other
#' coefficients.
#'
#' For regression the model predicts the response (its log when the fit has
#' `log_target`: a positive, heavily right-skewed response, whose coefficients then
#' multiply the response by `exp()` of them); for a classifier with two
#' classes, the log-odds of the second class. The model is computed by the
#' Python estimator's `pattern_model()` from the network's outputs (exact up to
#' rounding), so it holds for an ensemble of regressors (the average of its
#' members' models) and for a model read from a file; for a fit with
#' `interval = TRUE`, it is the model of the median, which [predict()] gives.
#' There are no coefficients where the network is not linear in the observed
#' values, and `coef()` says why: with an MLP head (`mlp_depth > 0`), for an
#' ensemble of classifiers (which averages probabilities: fit with
#' `ensemble_size = 1`), or for a column whose heavy tails the fit compressed
#' (`compress_tails = TRUE`, the default: fit with `compress_tails = FALSE`).
#'
#' @param object A model fitted by [neumiss()].
#' @param pattern Which predictors are missing: `NULL` or `character(0)` for
#'   rows with every predictor observed, else a character vector of names of
#'   predictors (see `fit$feature_names`), or a logical vector with one value
#'   per predictor (`TRUE` = missing) such as `is.na()` of a row.
#' @param ... Unused.
#' @return A named numeric vector, `(Intercept)` first. [tidy()][tidy.neumiss]
#'   gives these models as a data frame with one row per term and pattern:
#'   `pattern` (the missing predictors, `"none"` for complete rows), `n`
#'   (training rows with that pattern), `term` and `estimate`.
#' @examples
#' if (is_neumiss_available()) {
#'   set.seed(1)
#'   # a linear head without the spline term: one linear model per pattern
#'   fit <- neumiss(Ozone ~ Solar.R + Wind + Temp, data = airquality,
#'                  mlp_depth = 0, spline = FALSE, max_epochs = 20)
#'   coef(fit)                       # rows with every predictor observed
#'   coef(fit, pattern = "Solar.R")  # rows where Solar.R is missing
#'   tidy(fit)
#' }
#' @name coef.neumiss
#' @export
coef.neumiss <- function(object, pattern = NULL, ...) {
  .check_fit(object)
  if (object$task == "classification" && length(object$classes) != 2) {
    .abort("no coefficients for a classifier of %d classes: coef() gives the log-odds model of a two-class classifier only.",
           length(object$classes))
  }
  missing <- .pattern_missing(object, pattern)
  adapter <- .adapter()
  estimator <- .estimator(object)
  model <- tryCatch(
    adapter$pattern_model(estimator, as.list(object$feature_names %in% missing)),
    error = function(e) .abort("no coefficients: %s", sub("^no linear model: ", "",
                                                          .python_message(e)))
  )
  .r_coefficients(object, missing, model)
}

# The names of the predictors missing in `pattern` (checked).
.pattern_missing <- function(object, pattern) {
  names <- object$feature_names
  if (is.null(pattern)) {
    return(character(0))
  }
  if (is.logical(pattern)) {
    if (length(pattern) != length(names) || anyNA(pattern)) {
      .abort("a logical `pattern` must have one TRUE/FALSE per predictor (%d: %s).",
             length(names), .quote(names))
    }
    return(names[pattern])
  }
  if (!is.character(pattern) || anyNA(pattern)) {
    .abort("`pattern` must be NULL, the names of the missing predictors or a logical vector.")
  }
  unknown <- setdiff(pattern, names)
  if (length(unknown)) {
    .abort("`pattern` names %s, not predictors of the fit (%s).", .quote(unknown),
           .quote(names))
  }
  unique(pattern)
}

# The Python model of a pattern (intercept, one coefficient per observed encoded column)
# in R's terms: a factor's one-hot coefficients become contrasts with its first level,
# whose own coefficient goes into the intercept (a factor encoded by target statistics
# alike, with each level's statistics times their coefficients as its coefficient). For
# two classes, the log-odds of R's second class (Python's logit is that of its second
# class, in sorted order).
.r_coefficients <- function(object, missing, model) {
  weights <- stats::setNames(as.numeric(unlist(model$coef)), as.character(unlist(model$names)))
  intercept <- model$intercept
  terms <- character(0)
  values <- numeric(0)
  for (name in setdiff(object$feature_names, missing)) {
    w <- unname(weights[object$encoded_names[object$encoded_input == name]])
    statistics <- object$level_statistics[[name]]
    if (!is.null(statistics)) w <- as.numeric(statistics %*% w)  # one value per level
    if (object$column_kinds[[name]] == "categorical") {
      levels <- object$xlevels[[name]]
      intercept <- intercept + w[1]
      terms <- c(terms, paste0(name, levels[-1]))
      values <- c(values, w[seq_along(levels)][-1] - w[1])
    } else {  # a number: its slope, then an effect per indicator of its integer values
      terms <- c(terms, object$encoded_names[object$encoded_input == name])
      values <- c(values, w)
    }
  }
  reversed <- object$task == "classification" && object$classes[2] != object$py_classes[2]
  stats::setNames((if (reversed) -1 else 1) * c(intercept, values), c("(Intercept)", terms))
}

# The patterns of missing predictors of a table's rows, most frequent first: a named
# integer vector of counts, named by the missing predictors ("none": complete rows).
.pattern_counts <- function(table) {
  missing <- do.call(cbind, lapply(table, is.na))
  keys <- apply(missing, 1, function(m) {
    if (any(m)) paste(names(table)[m], collapse = ", ") else "none"
  })
  counts <- table(keys)
  counts <- counts[order(-counts, names(counts))]
  stats::setNames(as.integer(counts), names(counts))
}
