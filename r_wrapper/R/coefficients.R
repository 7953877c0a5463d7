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
#' factor at its first level. Missing predictors have no coefficient: the
#' network has already accounted for them in the intercept and the other
#' coefficients.
#'
#' For regression the model predicts the response; for a classifier with two
#' classes, the log-odds of the second class. The coefficients are computed
#' from the network's predictions (exact up to rounding), so they hold for an
#' ensemble (the average of its members) and for a model read from a file. An
#' MLP head makes the network nonlinear: there are no coefficients, and
#' `coef()` says so.
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
#'   fit <- neumiss(Ozone ~ Solar.R + Wind + Temp, data = airquality,
#'                  mlp_depth = 0, max_epochs = 20)
#'   coef(fit)                       # rows with every predictor observed
#'   coef(fit, pattern = "Solar.R")  # rows where Solar.R is missing
#'   tidy(fit)
#' }
#' @name coef.neumiss
#' @export
coef.neumiss <- function(object, pattern = NULL, ...) {
  .check_fit(object)
  if (!identical(as.integer(object$mlp_depth), 0L)) {
    .abort("no coefficients: with an MLP head the network is nonlinear in the observed values; fit with mlp_depth = 0 (the linear head) for per-pattern coefficients.")
  }
  if (object$task == "classification" && length(object$classes) != 2) {
    .abort("no coefficients for a classifier of %d classes: coef() gives the log-odds model of a two-class classifier only.",
           length(object$classes))
  }
  missing <- .pattern_missing(object, pattern)
  design <- .coefficient_rows(object, missing)
  f <- .linear_output(object, design$table)
  slopes <- (f[-1] - f[1]) / design$steps
  intercept <- f[1] - sum(slopes * design$base)
  stats::setNames(c(intercept, slopes), c("(Intercept)", design$terms))
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

# The rows whose predictions give the coefficients: a base row (observed numeric
# predictors at their training centre, factors at their first level), then one row per
# term moving one numeric predictor by its training scale (a step of the size of the
# variable keeps the float32 rounding of the network small against the change), or a
# factor to one level. `base`: where each term's variable starts (0 for a level).
.coefficient_rows <- function(object, missing) {
  names <- object$feature_names
  base <- list()
  for (name in names) {
    if (object$column_kinds[[name]] == "categorical") {
      levels <- object$xlevels[[name]]
      base[[name]] <- factor(if (name %in% missing) NA else levels[1], levels = levels)
    } else {
      base[[name]] <- if (name %in% missing) NA_real_ else unname(object$center[name])
    }
  }
  rows <- list(base)
  terms <- character(0)
  steps <- starts <- numeric(0)
  for (name in setdiff(names, missing)) {
    if (object$column_kinds[[name]] == "categorical") {
      for (level in object$xlevels[[name]][-1]) {
        row <- base
        row[[name]] <- factor(level, levels = object$xlevels[[name]])
        rows[[length(rows) + 1]] <- row
        terms <- c(terms, paste0(name, level))
        steps <- c(steps, 1)
        starts <- c(starts, 0)
      }
    } else {
      step <- unname(object$scale[name])
      if (!is.finite(step) || step <= 0) step <- 1
      row <- base
      row[[name]] <- base[[name]] + step
      rows[[length(rows) + 1]] <- row
      terms <- c(terms, name)
      steps <- c(steps, step)
      starts <- c(starts, base[[name]])
    }
  }
  table <- lapply(stats::setNames(names, names), function(name) {
    do.call(c, lapply(rows, `[[`, name))
  })
  list(table = structure(table, named = TRUE), terms = terms, steps = steps, base = starts)
}

# The linear output of the network on a table: the prediction (regression) or the
# log-odds of the second class.
.linear_output <- function(object, table) {
  if (object$task == "regression") {
    return(.predict_table(object, table, "response"))
  }
  p <- .predict_table(object, table, "prob")
  log(p[, 2]) - log(p[, 1])
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
