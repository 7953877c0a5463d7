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

test_that("compare_methods() cross-validates every method on the same splits", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 500, d = 4, seed = 5)
  seed_before <- .Random.seed
  result <- compare_methods(data$x, data$y, folds = 3, repeats = 2, seed = 11,
                            neumiss_args = list(max_epochs = 30, batch_size = 32))
  expect_identical(.Random.seed, seed_before)  # the global random state is unchanged
  expect_s3_class(result, "neumiss_comparison")
  expect_named(result, c("method", "metric", "mean", "se", "n_train", "n_test", "folds",
                         "seconds", "note"))
  expect_equal(result$method, c("NeuMiss", "EM (R norm)", "EM (Python neumiss)",
                                "MICE + linear regression",
                                "Mean imputation + mask + linear regression",
                                "Gradient boosting", "Complete cases + lm",
                                "MICE + lm (R mice)",
                                "Random forest (ranger) + mean imputation + mask"))
  expect_equal(unique(result$metric), "r2")
  python_rows <- c(1, 3:6)
  expect_equal(result$note[python_rows], rep("", 5),
               info = paste(result$note, collapse = "\n"))
  expect_equal(result$folds[python_rows], rep(6L, 5))
  expect_equal(result$n_test[python_rows], rep(167, 5))  # 500 / 3, rounded
  expect_equal(result$n_train[python_rows], rep(333, 5))
  expect_true(all(result$se[python_rows] > 0 & result$se[python_rows] < 0.1))
  # the splits made by the seed, and the Bayes predictor's mean R² on them
  splits <- neumiss:::.with_seed(11, neumiss:::.cv_splits(500, 3, 2))
  expect_equal(sort(unlist(splits[1:3])), 1:500)  # each repeat: every row tested once
  bayes <- mean(vapply(splits, function(test) {
    r_squared(data$y[test], neumiss:::.gaussian_conditional_y(data$mu, data$sigma,
                                                             data$x[test, ]))
  }, numeric(1)))
  # EM fits the true model family: close to Bayes; the others learned something real
  expect_gt(result$mean[3], bayes - 0.03)
  expect_gt(result$mean[4], bayes - 0.1)
  expect_gt(result$mean[5], bayes - 0.1)
  expect_gt(result$mean[6], 0.3)
  expect_gt(result$mean[1], 0.3)
  expect_true(all(result$mean[python_rows] < 1))
  # the R methods: complete cases lose rows, mice and the forest do not
  r_rows <- 7:9
  run <- installed_methods(result)[r_rows]
  expect_equal(result$note[r_rows][run], rep("", sum(run)),
               info = paste(result$note, collapse = "\n"))
  expect_true(all(result$folds[r_rows][run] == 6L))
  expect_gt(result$mean[7], 0.2)
  if (run[2]) expect_gt(result$mean[8], bayes - 0.1)
  if (run[3]) expect_gt(result$mean[9], 0.3)
  out <- capture.output(print(result))
  expect_match(out[1], "3-fold cross-validation, repeated 2 time\\(s\\)")
  expect_match(out, "^ *NeuMiss +r2 +0\\.[0-9]+ \\+/- 0\\.[0-9]+ +333 +167 +6", all = FALSE)
  png_file <- tempfile(fileext = ".png")
  grDevices::png(png_file)
  expect_invisible(plot(result))
  grDevices::dev.off()
  expect_gt(file.size(png_file), 1000)
  expect_error(plot(result, metric = "auc"), "no scores for metric 'auc'")
  expect_error(compare_methods(data$x, data$y, folds = 1), "`folds` must be a whole number >= 2")
  expect_error(compare_methods(data$x, data$y, repeats = 0.5), "`repeats`")
  expect_error(compare_methods(data$x[1:30, ], data$y[1:30], folds = 2),
               "too few rows \\(30\\) for 2 folds: each training set needs at least 20")
  expect_error(compare_methods(data$x, data$y, max_epochs = 1), "in `neumiss_args`")
  expect_error(compare_methods(data$x, data$y, test_fraction = 0.3),
               "`test_fraction` is gone: .* set `folds` and `repeats`")
})

test_that("compare_methods() has a formula interface and handles classification", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 400, d = 3, seed = 8)
  df <- data.frame(data$x, y = data$y)
  df$g <- factor(ifelse(df$v3 > 0, "pos", "neg"))
  df$g[1:30] <- NA
  df$y[1:10] <- NA  # dropped by default
  result <- compare_methods(y ~ v1 + v2 + g, data = df, seed = 3, folds = 2, repeats = 1,
                            neumiss_args = list(max_epochs = 10))
  python_rows <- c(1, 3:6)
  expect_equal(result$note[python_rows], rep("", 5), info = paste(result$note, collapse = "\n"))
  expect_true(all(result$mean[python_rows] > 0.3))
  run <- installed_methods(result)
  expect_true(all(result$mean[7:9][run[7:9]] > 0.2))
  expect_equal(result$n_train[1] + result$n_test[1], 390)

  df$cls <- factor(ifelse(data$y > 0, "up", "down"))
  # nearly separable classes: glm warns that it diverges on the complete cases
  warnings <- character()
  result <- withCallingHandlers(
    compare_methods(cls ~ v1 + v2 + v3 + g, data = df, seed = 3, folds = 2, repeats = 1,
                    neumiss_args = list(max_epochs = 10)),
    warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  expect_match(warnings, "^Complete cases \\+ glm: glm.fit: fitted probabilities numerically",
               all = FALSE)
  methods <- c("NeuMiss", "MICE + logistic regression",
               "Mean imputation + mask + logistic regression", "Gradient boosting",
               "Complete cases + glm", "MICE + glm (R mice)",
               "Random forest (ranger) + mean imputation + mask")
  expect_equal(result$method, rep(methods, each = 2))
  expect_equal(result$metric, rep(c("accuracy", "log_loss"), 7))
  run <- installed_methods(result)
  expect_equal(result$note[run], rep("", sum(run)), info = paste(result$note, collapse = "\n"))
  accuracy <- result$mean[result$metric == "accuracy" & run]
  # (the diverged glm's probabilities are overconfident: its log-loss is not bounded)
  log_loss <- result$mean[result$metric == "log_loss" & run &
                            result$method != "Complete cases + glm"]
  expect_true(all(accuracy > 0.7))
  expect_true(all(log_loss > 0 & log_loss < 0.8))
  expect_equal(result$folds[run], rep(2L, sum(run)))
})

test_that("a warning raised on several splits is given once, with its count", {
  skip_if_no_python_neumiss()
  set.seed(2)
  x <- matrix(rnorm(300), 100)
  y <- rnorm(100)  # noise: NeuMiss cannot beat the constant predictor
  warnings <- character()
  withCallingHandlers(
    compare_methods(x, y, folds = 2, repeats = 2, seed = 1,
                    neumiss_args = list(max_epochs = 2)),
    warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  expect_equal(anyDuplicated(sub(" \\(in [0-9]+ of the 4 fits\\)$", "", warnings)), 0L)
  expect_true(all(grepl("\\(in [1-4] of the 4 fits\\)$", warnings)),
              info = paste(warnings, collapse = "\n"))
  expect_false(any(grepl("IterativeImputer|neumiss\\.baselines|NeuMiss[A-Z]", warnings)))
})

test_that("in compare_methods(), R's norm EM agrees with the package's EM", {
  skip_if_no_python_neumiss()
  skip_if_not(requireNamespace("norm", quietly = TRUE),
              "R package 'norm' (CRAN only) is not installed")
  data <- simulate_data(n = 500, d = 4, seed = 5)
  # (one epoch may not beat the constant predictor: NeuMiss is not the point here)
  result <- suppressWarnings(compare_methods(data$x, data$y, folds = 2, repeats = 1, seed = 11,
                                             neumiss_args = list(max_epochs = 1),
                                             em_max_iter = 10000L, em_criterion = 1e-10))
  expect_equal(result$note[2], "")
  # the two EM implementations fit the same Gaussian: same test R²
  expect_equal(result$mean[2], result$mean[3], tolerance = 1e-4)
  # the norm row is E[y | x_obs] of norm's Gaussian, on the splits made by the seed
  splits <- neumiss:::.with_seed(11, neumiss:::.cv_splits(500, 2, 1))
  r2 <- vapply(splits, function(test) {
    s <- norm::prelim.norm(cbind(data$y[-test], data$x[-test, ]))
    theta <- norm::em.norm(s, showits = FALSE, maxits = 10000L, criterion = 1e-10)
    gaussian <- norm::getparam.norm(s, theta)
    r_squared(data$y[test],
              neumiss:::.gaussian_conditional_y(gaussian$mu, gaussian$sigma, data$x[test, ]))
  }, numeric(1))
  expect_equal(result$mean[2], mean(r2))
  expect_equal(result$se[2], sd(r2) / sqrt(2))
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
  # (10 epochs may diverge or not beat the constant: not the point here)
  r <- suppressWarnings(compare_methods(x, y, seed = 1, folds = 2, repeats = 1,
                                        neumiss_args = list(max_epochs = 10)))
  expect_true(is.na(r$mean[r$method == "EM (R norm)"]))
  expect_equal(r$folds[r$method == "EM (R norm)"], 0L)
  expect_match(r$note[r$method == "EM (R norm)"], "R package 'norm' is not installed")
  expect_true(is.finite(r$mean[r$method == "NeuMiss"]))
  expect_equal(r$note[r$method == "NeuMiss"], "")
})

test_that("complete cases + lm is lm() on the complete training rows, means for the test rows", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 300, d = 3, seed = 6, missing = 0.15)
  result <- suppressWarnings(compare_methods(data$x, data$y, folds = 2, repeats = 1, seed = 4,
                                             neumiss_args = list(max_epochs = 1)))
  splits <- neumiss:::.with_seed(4, neumiss:::.cv_splits(300, 2, 1))
  r2 <- vapply(splits, function(test) {
    train <- data.frame(data$x[-test, ], y = data$y[-test])
    complete <- train[complete.cases(train), ]
    new <- as.data.frame(data$x[test, ])
    for (v in names(new)) new[[v]][is.na(new[[v]])] <- mean(complete[[v]])
    r_squared(data$y[test], predict(lm(y ~ ., data = complete), new))
  }, numeric(1))
  row <- result$method == "Complete cases + lm"
  expect_equal(result$mean[row], mean(r2), tolerance = 1e-10)
  expect_equal(result$se[row], sd(r2) / sqrt(2), tolerance = 1e-8)
})

test_that("the rows of methods whose R package is absent say how to install it", {
  x <- matrix(c(1, 2, NA, 4, 5, 6), 3)
  row <- neumiss:::.optional_method("ranger", "Random forest (ranger) + mean imputation + mask",
                                    function() stop("not run"), installed = FALSE)
  expect_true(is.na(row$r2))
  expect_match(row$note, "R package 'ranger' is not installed \\(Debian: apt-get install r-cran-ranger")
  row <- neumiss:::.optional_method("mice", "MICE + glm (R mice)", function() stop("not run"),
                                    truth = factor(c("a", "b")), installed = FALSE)
  expect_true(is.na(row$accuracy) && is.na(row$log_loss))
  expect_match(row$note, "R package 'mice' is not installed")
})
