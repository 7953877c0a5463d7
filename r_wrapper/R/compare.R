#' Compare NeuMiss with other methods for missing values
#'
#' Repeated K-fold cross-validation: the rows are split into `folds` folds,
#' `repeats` times; on every split each method is fitted on the training rows
#' and scored on the test rows, the same splits for every method. The result
#' has one row per method and metric: the mean score over the splits, its
#' standard error, the numbers of training and test rows and of splits scored,
#' ready for a table in a paper (`print()`) or a figure (`plot()`).
#'
#' Regression (a numeric response), scored by test R² (`metric = "r2"`):
#' * `"NeuMiss"`: [neumiss()] with `neumiss_args`;
#' * `"EM (R norm)"`: the joint Gaussian of (y, x) by R's `norm` package
#'   (`prelim.norm()`, `em.norm()`, `getparam.norm()`), predictions
#'   E\[y | x_obs\] computed in R; needs the CRAN package `norm`, otherwise the
#'   row has `mean = NA` and says so in `note`;
#' * `"EM (Python neumiss)"`: the Python package's `EMRegressor` (same model);
#' * `"MICE + linear regression"`: the Python package's `MICERegressor`;
#' * `"Mean imputation + mask + linear regression"`: the means of the training
#'   rows and one missingness indicator per column with missing values, then a
#'   ridge regression (penalty by leave-one-out cross-validation);
#' * `"Gradient boosting"`: scikit-learn's `HistGradientBoostingRegressor`,
#'   which handles missing values natively;
#' * `"Complete cases + lm"`: a linear regression fitted on the training rows
#'   without missing predictors; a test row with missing predictors is
#'   predicted with them at their means over those rows;
#' * `"MICE + lm (R mice)"`: R's `mice` (its defaults: 5 imputations, 5
#'   iterations, predictive mean matching; the imputation models fitted on the
#'   training rows, with the response, and applied to the test rows too), a
#'   linear regression on each imputed training set, its predictions on the
#'   imputed test set averaged;
#' * `"Random forest (ranger) + mean imputation + mask"`: R's `ranger` (500
#'   trees) on the means of the training rows and one missingness indicator per
#'   column with missing values.
#'
#' The rows of methods whose R package (`norm`, `mice`, `ranger`: suggested)
#' is not installed have `mean = NA` and say so, with how to install it, in
#' `note`.
#'
#' Classification (a factor, character or logical response), scored by test
#' accuracy and log-loss (`metric = "accuracy"`, `"log_loss"`):
#' * `"NeuMiss"`;
#' * `"MICE + logistic regression"`: scikit-learn's `IterativeImputer`, then a
#'   logistic regression;
#' * `"Mean imputation + mask + logistic regression"`: the means of the
#'   training rows and one missingness indicator per column with missing
#'   values, then a logistic regression;
#' * `"Gradient boosting"`: scikit-learn's `HistGradientBoostingClassifier`,
#'   which handles missing values natively;
#' * `"Complete cases + glm"`, `"MICE + glm (R mice)"`, `"Random forest
#'   (ranger) + mean imputation + mask"`: as for regression, with a logistic
#'   regression ([stats::glm()]'s binomial family for two classes, `nnet`'s
#'   multinomial logit for more) and a probability forest.
#'
#' Factor and character predictors are one-hot encoded for NeuMiss (see
#' [neumiss()]); for the other methods they are coded as indicators of every
#' level but the first (of the training rows), `NA` where the factor is `NA`
#' or holds a level absent from the training rows. A method that fails on a
#' split is left out of that split's scores, its error in `note`. A warning
#' raised on several splits is given once, with the number of fits that raised
#' it.
#'
#' The standard error is the standard deviation of the split scores divided by
#' the square root of their number: the splits share rows, so it understates
#' the uncertainty somewhat (it is the usual summary of cross-validation, and
#' fair for comparing methods scored on the same splits).
#'
#' @param x A matrix or data frame of predictors (`NA` = missing); for the
#'   generic, a formula or that.
#' @param y The response (no `NA`).
#' @param formula,data,subset,na.action As in [neumiss()]: by default rows
#'   with a missing response are dropped, rows with missing predictors kept.
#' @param task `"regression"` or `"classification"` (by default from the
#'   response, as in [neumiss()]).
#' @param folds Number of folds (K >= 2).
#' @param repeats Number of repetitions of the K-fold split (each with other
#'   folds); the scores are over `folds * repeats` splits.
#' @param seed Whole number for the splits and for NeuMiss (`NULL`: the
#'   current random state; the global random state is left unchanged when
#'   given).
#' @param neumiss_args A list of further arguments of [neumiss()].
#' @param em_max_iter,em_criterion Maximum number of iterations and convergence
#'   criterion of `em.norm()`.
#' @param ... For the formula method, the arguments of the default method;
#'   for `print()` and `plot()`, unused or graphical parameters.
#' @return A data frame of class `"neumiss_comparison"` with columns `method`,
#'   `metric`, `mean`, `se`, `n_train` and `n_test` (mean numbers of rows of a
#'   split), `folds` (the number of splits scored), `seconds` (mean time to fit
#'   and predict) and `note`; attributes `folds` and `repeats`.
#' @examples
#' if (is_neumiss_available()) {
#'   cmp <- compare_methods(Ozone ~ Solar.R + Wind + Temp, data = airquality,
#'                          folds = 2, repeats = 1, seed = 1,
#'                          neumiss_args = list(max_epochs = 10))
#'   cmp
#'   plot(cmp)
#' }
#' @export
compare_methods <- function(x, ...) {
  UseMethod("compare_methods")
}

#' @rdname compare_methods
#' @export
compare_methods.formula <- function(formula, data, subset, na.action, ...) {
  mf <- .model_frame(match.call(expand.dots = FALSE), parent.frame(), missing(na.action),
                     c("formula", "data", "subset", "na.action"))
  .compare(.formula_table(mf, attr(mf, "terms")), stats::model.response(mf), ...)
}

#' @rdname compare_methods
#' @export
compare_methods.default <- function(x, y, task = NULL, folds = 5L, repeats = 2L, seed = NULL,
                                    neumiss_args = list(), em_max_iter = 1000L,
                                    em_criterion = 1e-4, ...) {
  if ("test_fraction" %in% ...names()) {
    .abort("`test_fraction` is gone: compare_methods() cross-validates; set `folds` and `repeats`.")
  }
  if (...length()) {
    .abort("unknown argument(s) %s; pass arguments of neumiss() in `neumiss_args`.",
           .quote(names(list(...))))
  }
  .compare(.predictor_table(x, "x"), y, task = task, folds = folds, repeats = repeats,
           seed = seed, neumiss_args = neumiss_args, em_max_iter = em_max_iter,
           em_criterion = em_criterion)
}

.compare <- function(table, y, task = NULL, folds = 5L, repeats = 2L, seed = NULL,
                     neumiss_args = list(), em_max_iter = 1000L, em_criterion = 1e-4) {
  n <- .table_rows(table)
  response <- .response(y, task, n)
  .check_whole(folds, "folds", 2L)
  .check_whole(repeats, "repeats", 1L)
  if (!is.list(neumiss_args)) {
    .abort("`neumiss_args` must be a list of arguments of neumiss().")
  }
  if (n - ceiling(n / folds) < .min_fit_rows || floor(n / folds) < 2) {
    .abort("too few rows (%d) for %d folds: each training set needs at least %d rows and each test set 2.",
           n, as.integer(folds), .min_fit_rows)
  }
  splits <- .with_seed(seed, .cv_splits(n, folds, repeats))
  caught <- character(0)
  scores <- withCallingHandlers(
    lapply(seq_along(splits), function(i) {
      test <- splits[[i]]
      split_seed <- if (is.null(seed)) NULL else seed + i - 1L
      cbind(split = i, n_train = n - length(test), n_test = length(test),
            .compare_split(table, response, test, split_seed, neumiss_args, em_max_iter,
                           em_criterion))
    }),
    warning = function(w) {
      caught <<- c(caught, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  for (m in unique(caught)) {
    .warn("%s (in %d of the %d fits)", m, sum(caught == m), length(splits))
  }
  .summarise_comparison(do.call(rbind, scores), folds, repeats)
}

# Check a whole number of at least `min`.
.check_whole <- function(value, name, min) {
  if (!is.numeric(value) || length(value) != 1 || is.na(value) || value != round(value) ||
      value < min) {
    .abort("`%s` must be a whole number >= %d.", name, min)
  }
  invisible(value)
}

# The test rows of each split of `repeats` times K-fold cross-validation (K = folds).
.cv_splits <- function(n, folds, repeats) {
  splits <- list()
  for (r in seq_len(repeats)) {
    fold <- sample(rep_len(seq_len(folds), n))
    for (k in seq_len(folds)) splits[[length(splits) + 1]] <- which(fold == k)
  }
  splits
}

# One row per method and metric: the mean over the splits, its standard error, the
# mean numbers of training and test rows and the number of splits scored.
.summarise_comparison <- function(scores, folds, repeats) {
  metrics <- intersect(c("r2", "accuracy", "log_loss"), names(scores))
  rows <- list()
  for (method in unique(scores$method)) {
    one <- scores[scores$method == method, ]
    notes <- unique(one$note[nzchar(one$note)])
    for (metric in metrics) {
      values <- one[[metric]][is.finite(one[[metric]])]
      k <- length(values)
      rows[[length(rows) + 1]] <- data.frame(
        method = method, metric = metric,
        mean = if (k) mean(values) else NA_real_,
        se = if (k > 1) stats::sd(values) / sqrt(k) else NA_real_,
        n_train = round(mean(one$n_train)), n_test = round(mean(one$n_test)),
        folds = k, seconds = mean(one$seconds),
        note = if (length(notes)) paste(notes, collapse = "; ") else "",
        stringsAsFactors = FALSE)
    }
  }
  out <- do.call(rbind, rows)
  structure(out, class = c("neumiss_comparison", "data.frame"), folds = as.integer(folds),
            repeats = as.integer(repeats))
}

# The scores of every method on one split (`test`: the test rows), one row per method.
.compare_split <- function(table, response, test, seed, neumiss_args, em_max_iter,
                           em_criterion) {
  y <- response$y
  train_table <- .table_subset(table, -test)
  test_table <- .table_subset(table, test)
  ytr <- y[-test]
  yte <- y[test]
  if (response$task == "classification" && nlevels(droplevels(ytr)) < 2) {
    .abort("the training rows of a split hold a single class.")
  }
  adapter <- .adapter()
  # numeric matrices for the other methods: factors as indicators of their levels
  xtr <- .dummy_matrix(train_table, train_table)
  xte <- .dummy_matrix(test_table, train_table)

  neumiss_fit <- function() {
    args <- utils::modifyList(list(seed = seed, task = response$task), neumiss_args)
    do.call(neumiss, c(list(.table_frame(train_table), ytr), args))
  }
  if (response$task == "regression") {
    python_baseline <- function(name, method) {
      function() {
        result <- .py_call(
          adapter$baseline_r2(name, .values(xtr), nrow(xtr), ytr, .values(xte),
                                 nrow(xte), ncol(xtr), yte),
          sprintf("%s failed", method)
        )
        .rethrow_warnings(sprintf("%s: %s", method, unlist(result$warnings)))
        result$r2
      }
    }
    rows <- list(
      .run_method("NeuMiss", function() {
        .r2(yte, stats::predict(neumiss_fit(), .table_frame(test_table)))
      }),
      .norm_em_row(xtr, ytr, xte, yte, em_max_iter, em_criterion),
      .run_method("EM (Python neumiss)", python_baseline("EMRegressor", "EM (Python neumiss)")),
      .run_method("MICE + linear regression",
                  python_baseline("MICERegressor", "MICE + linear regression")),
      .run_method("Mean imputation + mask + linear regression",
                  python_baseline("MeanMaskLinear", "Mean imputation + mask + linear regression")),
      .run_method("Gradient boosting", python_baseline("HistGradientBoosting", "Gradient boosting"))
    )
    return(do.call(rbind, c(rows, .r_method_rows(xtr, ytr, xte, yte, seed, "regression"))))
  }
  python_classifier <- function(name, method) {
    function() {
      result <- .py_call(
        adapter$baseline_classification(name, .values(xtr), nrow(xtr),
                                           as.character(ytr), .values(xte), nrow(xte),
                                           ncol(xtr)),
        sprintf("%s failed", method)
      )
      .rethrow_warnings(sprintf("%s: %s", method, unlist(result$warnings)))
      matrix(as.numeric(result$proba), nrow = nrow(xte), byrow = TRUE,
             dimnames = list(NULL, as.character(unlist(result$classes))))
    }
  }
  rows <- list(
    .run_method("NeuMiss", function() {
      stats::predict(neumiss_fit(), .table_frame(test_table), type = "prob")
    }, yte),
    .run_method("MICE + logistic regression",
                python_classifier("MICELogistic", "MICE + logistic regression"), yte),
    .run_method("Mean imputation + mask + logistic regression",
                python_classifier("MeanMaskLogistic",
                                  "Mean imputation + mask + logistic regression"), yte),
    .run_method("Gradient boosting",
                python_classifier("HistGradientBoosting", "Gradient boosting"), yte)
  )
  do.call(rbind, c(rows, .r_method_rows(xtr, ytr, xte, yte, seed, "classification")))
}

# One row of the comparison: `score()` returns a test R² (regression), or a matrix
# of test class probabilities (classification: `truth` given), scored here.
.run_method <- function(method, score, truth = NULL) {
  note <- ""
  seconds <- system.time(
    value <- tryCatch(score(), error = function(e) {
      note <<- conditionMessage(e)
      NULL
    })
  )[["elapsed"]]
  if (is.null(truth)) {
    return(data.frame(method = method, r2 = if (is.null(value)) NA_real_ else value,
                      seconds = seconds, note = note))
  }
  accuracy <- log_loss <- NA_real_
  if (!is.null(value)) {
    predicted <- colnames(value)[max.col(value, ties.method = "first")]
    accuracy <- mean(predicted == as.character(truth))
    log_loss <- .log_loss(truth, value)
  }
  data.frame(method = method, accuracy = accuracy, log_loss = log_loss,
             seconds = seconds, note = note)
}

# A table as a data frame (names kept as they are).
.table_frame <- function(columns) {
  structure(unclass(columns)[names(columns)], class = "data.frame",
            row.names = .set_row_names(.table_rows(columns)))
}

# A numeric matrix of `table`: numeric columns as they are, factors as indicators of
# the levels of `reference` but its first (NA where the factor is NA or its level is
# not among those of `reference`).
.dummy_matrix <- function(table, reference) {
  blocks <- lapply(names(table), function(name) {
    col <- table[[name]]
    ref <- reference[[name]]
    if (!is.factor(ref)) {
      out <- matrix(if (is.factor(col)) NA_real_ else col, ncol = 1)
      colnames(out) <- name
      return(out)
    }
    levels_ref <- levels(droplevels(ref))
    values <- as.character(col)
    values[!is.na(values) & !(values %in% levels_ref)] <- NA
    out <- vapply(levels_ref[-1], function(l) as.numeric(values == l),
                  numeric(length(values)))
    out <- matrix(out, nrow = length(values))
    colnames(out) <- paste0(name, levels_ref[-1])
    out
  })
  do.call(cbind, blocks)
}

# R² of predictions (1 - SSE / SST around the mean of `truth`).
.r2 <- function(truth, prediction) {
  1 - sum((truth - prediction)^2) / sum((truth - mean(truth))^2)
}

# Evaluate `expr` with the random seed `seed`, leaving the global random state
# as it was (NULL: plain evaluation).
.with_seed <- function(seed, expr) {
  if (is.null(seed)) {
    return(expr)
  }
  had_seed <- exists(".Random.seed", envir = globalenv(), inherits = FALSE)
  if (had_seed) old <- get(".Random.seed", envir = globalenv(), inherits = FALSE)
  on.exit(if (had_seed) {
    assign(".Random.seed", old, envir = globalenv())
  } else {
    rm(".Random.seed", envir = globalenv())
  })
  set.seed(seed)
  expr
}

# The "EM (R norm)" row: its test R², or NA and a note when `norm` is not installed.
.norm_em_row <- function(xtr, ytr, xte, yte, max_iter, criterion,
                         installed = requireNamespace("norm", quietly = TRUE)) {
  .optional_method("norm", "EM (R norm)", function() {
    .r2(yte, .norm_em_predict(xtr, ytr, xte, max_iter, criterion))
  }, installed = installed)
}

# EM for the joint Gaussian of (y, x) with R's norm, then E[y | x_obs] per row.
.norm_em_predict <- function(xtr, ytr, xte, max_iter, criterion) {
  s <- norm::prelim.norm(cbind(ytr, xtr))
  theta <- norm::em.norm(s, showits = FALSE, maxits = max_iter, criterion = criterion)
  gaussian <- norm::getparam.norm(s, theta)
  .gaussian_conditional_y(gaussian$mu, gaussian$sigma, xte)
}

# E[y | x_obs] when (y, x) ~ N(mu, sigma), y first, for each row of x (NA = missing):
# mu_y + sigma[y, obs] sigma[obs, obs]^-1 (x_obs - mu_obs), one solve per pattern.
.gaussian_conditional_y <- function(mu, sigma, x) {
  mu <- unname(mu)
  sigma <- unname(sigma)
  x <- unname(x)
  observed <- !is.na(x)
  pattern <- apply(observed, 1, function(o) paste(as.integer(o), collapse = ""))
  prediction <- rep(mu[1], nrow(x))
  for (key in unique(pattern)) {
    rows <- which(pattern == key)
    obs <- which(observed[rows[1], ])
    if (length(obs) == 0) next
    centred <- t(x[rows, obs, drop = FALSE]) - mu[obs + 1]
    prediction[rows] <- mu[1] + drop(sigma[1, obs + 1, drop = FALSE] %*%
                                       solve(sigma[obs + 1, obs + 1], centred))
  }
  prediction
}

#' @rdname compare_methods
#' @param digits Number of significant digits of the scores.
#' @export
print.neumiss_comparison <- function(x, digits = 3, ...) {
  cat(sprintf("Comparison by %d-fold cross-validation, repeated %d time(s): mean +/- standard error over the splits\n",
              attr(x, "folds"), attr(x, "repeats")))
  shown <- data.frame(
    method = x$method, metric = x$metric,
    score = ifelse(is.na(x$mean), "NA",
                   sprintf("%s +/- %s", format(signif(x$mean, digits)),
                           format(signif(x$se, 2)))),
    n_train = x$n_train, n_test = x$n_test, splits = x$folds,
    seconds = format(signif(x$seconds, 2)), stringsAsFactors = FALSE)
  # one line per row, even in a narrow console (R would split the columns in blocks)
  old <- options(width = max(getOption("width"), 150L))
  on.exit(options(old))
  print(shown, row.names = FALSE, right = FALSE)
  notes <- unique(x$note[nzchar(x$note)])
  if (length(notes)) cat("Notes:", paste0("\n  ", unique(x$method[nzchar(x$note)]), ": ", notes), "\n")
  invisible(x)
}

#' @rdname compare_methods
#' @param metric For `plot()`, the metric to draw (by default the first).
#' @export
plot.neumiss_comparison <- function(x, metric = x$metric[1], ...) {
  one <- x[x$metric == metric & !is.na(x$mean), , drop = FALSE]
  if (nrow(one) == 0) {
    .abort("no scores for metric '%s' (metrics: %s).", metric, .quote(unique(x$metric)))
  }
  se <- ifelse(is.na(one$se), 0, one$se)
  at <- rev(seq_len(nrow(one)))
  # a left margin for the method names, at most half the figure's width
  left <- max(graphics::strwidth(one$method, units = "inches", cex = 0.8)) + 0.2
  mai <- graphics::par("mai")
  old <- graphics::par(mai = c(mai[1], min(left, 0.5 * graphics::par("fin")[1]), mai[3], 0.2))
  on.exit(graphics::par(old))
  args <- utils::modifyList(
    list(xlim = range(c(one$mean - 2 * se, one$mean + 2 * se)), ylim = c(0.5, nrow(one) + 0.5),
         yaxt = "n", pch = 19, ylab = "", xlab = sprintf("%s (mean +/- 2 SE)", metric),
         main = sprintf("%d-fold CV, %d repeat(s)", attr(x, "folds"), attr(x, "repeats"))),
    list(...))
  do.call(graphics::plot, c(list(one$mean, at), args))
  graphics::segments(one$mean - 2 * se, at, one$mean + 2 * se, at)
  graphics::axis(2, at = at, labels = one$method, las = 1, cex.axis = 0.8)
  invisible(x)
}
