# Shared helpers of the tests.

skip_if_no_python_neumiss <- function() {
  available <- is_neumiss_available()
  skip_if_not(available, paste("Python package neumiss unavailable:",
                               attr(available, "reason")))
}

# Gaussian predictors with MCAR missing values, a linear response. Also returns
# the true joint Gaussian of (y, x), y first, for the Bayes predictor E[y | x_obs].
simulate_data <- function(n = 300, d = 4, missing = 0.3, seed = 1, noise = 0.3) {
  set.seed(seed)
  mixing <- diag(d)
  mixing[1, 2] <- 0.8  # correlated features: missing values are predictable
  x <- matrix(rnorm(n * d), n, d) %*% mixing
  colnames(x) <- paste0("v", seq_len(d))
  beta <- seq(1, -1, length.out = d)
  y <- drop(x %*% beta) + rnorm(n, sd = noise)
  x[matrix(runif(n * d) < missing, n, d)] <- NA
  sigma_x <- crossprod(mixing)
  sigma <- rbind(c(sum(beta * (sigma_x %*% beta)) + noise^2, sigma_x %*% beta),
                 cbind(sigma_x %*% beta, sigma_x))
  list(x = x, y = y, mu = rep(0, d + 1), sigma = sigma)
}

r_squared <- function(truth, prediction) {
  1 - sum((truth - prediction)^2) / sum((truth - mean(truth))^2)
}

# Run R code in a fresh Rscript process that sees the same libraries (so the
# installed neumiss package) and environment; returns its output lines with the
# exit status as attribute "status".
run_rscript <- function(code, env = character()) {
  script <- tempfile(fileext = ".R")
  writeLines(code, script)
  on.exit(unlink(script))
  rscript <- file.path(R.home("bin"), "Rscript")
  libs <- paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep))
  out <- suppressWarnings(system2(rscript, c("--vanilla", shQuote(script)), stdout = TRUE,
                                  stderr = TRUE, env = c(libs, env)))
  structure(out, status = if (is.null(attr(out, "status"))) 0L else attr(out, "status"))
}

skip_if_not_installed_as_library <- function() {
  installed <- find.package("neumiss", lib.loc = .libPaths(), quiet = TRUE)
  skip_if(length(installed) == 0,
          "neumiss must be installed (R CMD INSTALL) for tests in a new R session")
}

# The tests fit the paper's network (one network of depth 3, linear head) with the
# training settings of neumiss 0.1 unless a test says otherwise: fast, and independent of
# the Python estimator's defaults.
options(neumiss.args = list(depth = 3L, mlp_depth = 0L, weight_sharing = "independent",
                            residual = FALSE, ensemble_size = 1L, patience = 8L,
                            lr_patience = 2L, tol = 0))

# The rows of a comparison whose method ran: not those of a missing R package.
installed_methods <- function(result) {
  !grepl("^R package '[a-z]+' is not installed", result$note)
}

# The sets (0/1 matrix) the Python model of `fit` gives for the predictors `newdata`
# (a data frame of numeric columns, NA as NaN), computed in Python from plain lists.
python_sets <- function(fit, newdata) {
  run <- reticulate::py_run_string(paste(
    "def sets(model, rows, names):",
    "    import pandas as pd",
    "    return model.predict_set(pd.DataFrame(rows, columns=names))[0].astype(int).tolist()",
    sep = "\n"), local = TRUE)
  rows <- lapply(seq_len(nrow(newdata)), function(i) as.list(unlist(newdata[i, ])))
  rows <- lapply(rows, function(r) lapply(r, function(v) if (is.na(v)) NaN else v))
  do.call(rbind, lapply(run$sets(neumiss:::.estimator(fit), rows, names(newdata)), unlist))
}

# `n` rows drawn from iris with replacement, 30% of `column` missing, from `seed`.
iris_with_missing <- function(n, column, seed) {
  set.seed(seed)
  df <- iris[sample(nrow(iris), n, replace = TRUE), ]
  df[[column]][runif(n) < 0.3] <- NA
  df
}
