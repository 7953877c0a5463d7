#' Simulate data with missing values from a chosen mechanism
#'
#' Draws Gaussian predictors, a response, and removes values by a missingness
#' mechanism, with the Python package's `neumiss.simulation.make_regression()`
#' (the simulations of Le Morvan et al., 2020): the covariance has a low-rank
#' part (strongly correlated predictors), the response is `1 + sum(x) +
#' noise` for the linear link, at signal-to-noise ratio `snr`.
#'
#' Mechanisms:
#' * `"MCAR"`: each value missing with probability `missing_rate`,
#'   independently of everything (missing completely at random);
#' * `"MAR"`: some predictors always observed, the others missing with a
#'   probability depending on the observed ones (missing at random);
#' * `"gaussian_sm"`: Gaussian self-masking, a value is missing with a
#'   probability that is a Gaussian function of the value itself (missing not
#'   at random: the case NeuMiss is built for);
#' * `"probit_sm"`: probit self-masking, the probability increases with the
#'   value (missing not at random).
#'
#' @param n Number of rows.
#' @param d Number of predictors.
#' @param mechanism One of `"MCAR"`, `"MAR"`, `"gaussian_sm"`, `"probit_sm"`.
#' @param missing_rate Share of missing values per predictor (of the
#'   incomplete predictors for `"MAR"`), in \[0, 1).
#' @param snr Signal-to-noise ratio of the response.
#' @param link `"linear"`, `"square"`, `"cube"` or `"stairs"`: the function of
#'   the linear signal that gives the response.
#' @param n_test Number of rows of a test set drawn from the same
#'   distribution (0: none).
#' @param seed Whole number seeding the simulation (`NULL`: drawn from R's
#'   random number generator, so [set.seed()] makes it repeatable).
#' @return A data frame with columns `x1`, ..., `xd` (`NA` = missing) and `y`,
#'   with attributes `mechanism` and, when `n_test > 0`, `test`: a data frame
#'   of the same columns plus `bayes`, the prediction of the Bayes predictor
#'   E\[y | observed x\] where the simulation has it (not for
#'   `"probit_sm"` or nonlinear links: `NA`).
#' @examples
#' if (is_neumiss_available()) {
#'   data <- simulate_missing(500, 5, mechanism = "gaussian_sm", seed = 1)
#'   colMeans(is.na(data))
#' }
#' @export
simulate_missing <- function(n, d, mechanism = c("MCAR", "MAR", "gaussian_sm", "probit_sm"),
                             missing_rate = 0.3, snr = 10, link = "linear", n_test = 0L,
                             seed = NULL) {
  mechanism <- match.arg(mechanism)
  .check_whole(n, "n", 1L)
  .check_whole(d, "d", 1L)
  .check_whole(n_test, "n_test", 0L)
  if (!is.numeric(missing_rate) || length(missing_rate) != 1 || is.na(missing_rate) ||
      missing_rate < 0 || missing_rate >= 1) {
    .abort("`missing_rate` must be a number in [0, 1).")
  }
  if (is.null(seed)) seed <- .draw_seed()
  .check_whole(seed, "seed", 0L)
  out <- .py_call(.adapter()$simulate(as.integer(n), as.integer(d), mechanism, missing_rate,
                                      snr, link, as.integer(seed), as.integer(n_test)),
                  "the simulation failed")
  frame <- function(x, y) {
    x <- matrix(as.numeric(x), ncol = d, byrow = TRUE)
    x[is.nan(x)] <- NA
    colnames(x) <- paste0("x", seq_len(d))
    data.frame(x, y = as.numeric(y))
  }
  data <- frame(out$x, out$y)
  attr(data, "mechanism") <- mechanism
  if (n_test > 0) {
    test <- frame(out$x_test, out$y_test)
    test$bayes <- if (length(out$bayes_test)) as.numeric(out$bayes_test) else NA_real_
    attr(data, "test") <- test
  }
  data
}
