test_that("the R Gaussian conditional mean matches a row-by-row computation", {
  set.seed(4)
  a <- matrix(rnorm(16), 4)
  sigma <- crossprod(a) + diag(4)
  mu <- c(1, -1, 0.5, 2)
  x <- matrix(rnorm(30), 10, 3)
  x[matrix(runif(30) < 0.4, 10, 3)] <- NA
  x[1, ] <- NA
  got <- neumiss:::.gaussian_conditional_y(mu, sigma, x)
  for (i in seq_len(nrow(x))) {
    obs <- which(!is.na(x[i, ]))
    expected <- if (length(obs) == 0) mu[1] else
      mu[1] + sum(sigma[1, obs + 1] * solve(sigma[obs + 1, obs + 1], x[i, obs] - mu[obs + 1]))
    expect_equal(got[i], expected, tolerance = 1e-12)
  }
})

test_that("compare_methods() scores the methods on the same split", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 500, d = 4, seed = 5)
  seed_before <- .Random.seed
  result <- compare_methods(data$x, data$y, test_fraction = 0.3, seed = 11,
                            neumiss_args = list(max_epochs = 30, batch_size = 32))
  expect_identical(.Random.seed, seed_before)  # the global random state is unchanged
  expect_equal(result$method, c("NeuMiss", "EM (R norm)", "EM (Python neumiss)",
                                "MICE + linear regression"))
  expect_named(result, c("method", "r2", "seconds", "note"))
  python_rows <- c(1, 3, 4)
  expect_equal(result$note[python_rows], rep("", 3),
               info = paste(result$note, collapse = "\n"))
  # the split made by the seed, and the Bayes predictor's R² on it
  set.seed(11)
  test <- sample.int(500, 150)
  bayes <- neumiss:::.gaussian_conditional_y(data$mu, data$sigma, data$x[test, ])
  bayes_r2 <- r_squared(data$y[test], bayes)
  # EM fits the true model family: close to Bayes; the others learned something real
  expect_gt(result$r2[3], bayes_r2 - 0.03)
  expect_gt(result$r2[4], bayes_r2 - 0.1)
  expect_gt(result$r2[1], 0.3)
  expect_true(all(result$r2[python_rows] < 1))
  expect_error(compare_methods(data$x, data$y, test_fraction = 1), "test_fraction")
  expect_error(compare_methods(data$x, data$y, max_epochs = 1), "in `neumiss_args`")
})

test_that("compare_methods() has a formula interface and handles classification", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 400, d = 3, seed = 8)
  df <- data.frame(data$x, y = data$y)
  df$g <- factor(ifelse(df$v3 > 0, "pos", "neg"))
  df$g[1:30] <- NA
  df$y[1:10] <- NA  # dropped by default
  result <- compare_methods(y ~ v1 + v2 + g, data = df, seed = 3,
                            neumiss_args = list(max_epochs = 10))
  expect_named(result, c("method", "r2", "seconds", "note"))
  python_rows <- c(1, 3, 4)
  expect_equal(result$note[python_rows], rep("", 3), info = paste(result$note, collapse = "\n"))
  expect_true(all(result$r2[python_rows] > 0.3))

  df$cls <- factor(ifelse(data$y > 0, "up", "down"))
  result <- compare_methods(cls ~ v1 + v2 + v3 + g, data = df, seed = 3,
                            neumiss_args = list(max_epochs = 10))
  expect_named(result, c("method", "accuracy", "log_loss", "seconds", "note"))
  expect_equal(result$method, c("NeuMiss", "MICE + logistic regression",
                                "Mean imputation + mask + logistic regression",
                                "Gradient boosting"))
  expect_equal(result$note, rep("", 4), info = paste(result$note, collapse = "\n"))
  expect_true(all(result$accuracy > 0.7))
  expect_true(all(result$log_loss > 0 & result$log_loss < 0.8))
  # the same split for every method, from the seed: 25% of the 400 rows
  expect_equal(nrow(result), 4)
})

test_that("in compare_methods(), R's norm EM agrees with the package's EM", {
  skip_if_no_python_neumiss()
  skip_if_not(requireNamespace("norm", quietly = TRUE),
              "R package 'norm' (CRAN only) is not installed")
  data <- simulate_data(n = 500, d = 4, seed = 5)
  result <- compare_methods(data$x, data$y, test_fraction = 0.3, seed = 11,
                            neumiss_args = list(max_epochs = 1),
                            em_max_iter = 10000L, em_criterion = 1e-10)
  expect_equal(result$note[2], "")
  # the two EM implementations fit the same Gaussian: same test R²
  expect_equal(result$r2[2], result$r2[3], tolerance = 1e-4)
  # the norm row is E[y | x_obs] of norm's Gaussian, on the split made by the seed
  set.seed(11)
  test <- sample.int(500, 150)
  s <- norm::prelim.norm(cbind(data$y[-test], data$x[-test, ]))
  theta <- norm::em.norm(s, showits = FALSE, maxits = 10000L, criterion = 1e-10)
  gaussian <- norm::getparam.norm(s, theta)
  pred <- neumiss:::.gaussian_conditional_y(gaussian$mu, gaussian$sigma, data$x[test, ])
  expect_equal(result$r2[2], r_squared(data$y[test], pred))
})

test_that("without the norm package its row says so", {
  x <- matrix(c(1, 2, NA, 4, 5, 6), 3)
  row <- neumiss:::.norm_em_row(x, c(1, 2, 3), x, c(1, 2, 3), 100L, 1e-4, installed = FALSE)
  expect_equal(row$method, "EM (R norm)")
  expect_true(is.na(row$r2))
  expect_match(row$note, "R package 'norm' is not installed")
})

test_that("compare_methods() gives the norm row's note when norm is not installed", {
  skip_if_no_python_neumiss()
  skip_if(requireNamespace("norm", quietly = TRUE), "R package 'norm' is installed")
  set.seed(1)
  x <- matrix(rnorm(400), 100)
  y <- drop(x %*% c(1, 2, 0, -1)) + rnorm(100)
  x[runif(400) < 0.2] <- NA
  r <- compare_methods(x, y, seed = 1, neumiss_args = list(max_epochs = 10))
  expect_true(is.na(r$r2[r$method == "EM (R norm)"]))
  expect_match(r$note[r$method == "EM (R norm)"], "R package 'norm' is not installed")
  expect_true(is.finite(r$r2[r$method == "NeuMiss"]))
  expect_equal(r$note[r$method == "NeuMiss"], "")
})
