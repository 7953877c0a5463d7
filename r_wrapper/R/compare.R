#' Compare NeuMiss with EM and MICE baselines
#'
#' Splits the rows into a training and a test set, fits each method on the
#' training rows and reports its R² on the test rows:
#' * `"NeuMiss"`: [neumiss()] with `neumiss_args`;
#' * `"EM (R norm)"`: the joint Gaussian of (y, x) by R's `norm` package
#'   (`prelim.norm()`, `em.norm()`, `getparam.norm()`), predictions
#'   E\[y | x_obs\] computed in R; needs the CRAN package `norm`, otherwise the
#'   row has `r2 = NA` and says so in `note`;
#' * `"EM (Python neumiss)"`: the Python package's `EMRegressor` (same model);
#' * `"MICE + linear regression"`: the Python package's `MICERegressor`.
#'
#' A method that fails gets `r2 = NA` and its error in `note`.
#'
#' @param x A numeric matrix or data frame of predictors (`NA` = missing).
#' @param y A numeric response without `NA`.
#' @param test_fraction Share of rows in the test set, in (0, 1).
#' @param seed Whole number for the split and for NeuMiss (`NULL`: the current
#'   random state; the global random state is left unchanged when given).
#' @param neumiss_args A list of further arguments of [neumiss()].
#' @param em_max_iter,em_criterion Maximum number of iterations and convergence
#'   criterion of `em.norm()`.
#' @return A data frame with columns `method`, `r2` (test R²), `seconds`
#'   (fit and predict time) and `note`.
#' @examples
#' \dontrun{
#' compare_methods(x, y, seed = 1, neumiss_args = list(max_epochs = 50))
#' }
#' @export
compare_methods <- function(x, y, test_fraction = 0.25, seed = NULL, neumiss_args = list(),
                            em_max_iter = 1000L, em_criterion = 1e-4) {
  x <- .predictor_matrix(x, "x")
  y <- .response(y, "regression", nrow(x))$y
  if (!is.numeric(test_fraction) || length(test_fraction) != 1 ||
      !(test_fraction > 0 && test_fraction < 1)) {
    stop("`test_fraction` must be a number in (0, 1).", call. = FALSE)
  }
  if (!is.list(neumiss_args)) {
    stop("`neumiss_args` must be a list of arguments of neumiss().", call. = FALSE)
  }
  n_test <- round(test_fraction * nrow(x))
  if (n_test < 2 || nrow(x) - n_test < 2 * ncol(x) + 2) {
    stop(sprintf("too few rows (%d) to split with test_fraction = %s.", nrow(x),
                 format(test_fraction)), call. = FALSE)
  }
  test <- .with_seed(seed, sample.int(nrow(x), n_test))
  xtr <- x[-test, , drop = FALSE]
  ytr <- y[-test]
  xte <- x[test, , drop = FALSE]
  yte <- y[test]

  # each method is a function returning its test R²
  run <- function(method, test_r2) {
    note <- ""
    seconds <- system.time(
      r2 <- tryCatch(test_r2(), error = function(e) {
        note <<- conditionMessage(e)
        NA_real_
      })
    )[["elapsed"]]
    data.frame(method = method, r2 = r2, seconds = seconds, note = note)
  }
  python_baseline <- function(name) {
    function() {
      result <- .py_call(
        .adapter()$baseline_r2(name, .values(xtr), nrow(xtr), ytr, .values(xte),
                               nrow(xte), ncol(x), yte),
        sprintf("neumiss.baselines.%s failed", name)
      )
      for (w in result$warnings) {
        warning(sprintf("neumiss.baselines.%s: %s", name, w), call. = FALSE)
      }
      result$r2
    }
  }
  rows <- list(
    run("NeuMiss", function() {
      fit <- do.call(neumiss, c(list(xtr, ytr), utils::modifyList(list(seed = seed), neumiss_args)))
      .r2(yte, predict(fit, xte))
    }),
    if (requireNamespace("norm", quietly = TRUE)) {
      run("EM (R norm)", function() {
        .r2(yte, .norm_em_predict(xtr, ytr, xte, em_max_iter, em_criterion))
      })
    } else {
      data.frame(method = "EM (R norm)", r2 = NA_real_, seconds = NA_real_,
                 note = paste("R package 'norm' is not installed (CRAN only:",
                              "install.packages(\"norm\")); not run"))
    },
    run("EM (Python neumiss)", python_baseline("EMRegressor")),
    run("MICE + linear regression", python_baseline("MICERegressor"))
  )
  do.call(rbind, rows)
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
