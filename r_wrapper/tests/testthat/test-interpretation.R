# Data where `signal` matters, `noise` does not, and the factor `group` does; NA in each.
interpretation_data <- function(n = 300, seed = 2) {
  set.seed(seed)
  df <- data.frame(signal = rnorm(n), noise = rnorm(n),
                   group = factor(sample(c("a", "b"), n, TRUE)))
  df$y <- 2 * df$signal + ifelse(df$group == "a", 1, -1) + rnorm(n, sd = 0.1)
  df$signal[sample(n, 40)] <- NA
  df$noise[sample(n, 40)] <- NA
  df$group[sample(n, 40)] <- NA
  df
}

test_that("importance() ranks the predictors by the drop of the score when shuffled", {
  skip_if_no_python_neumiss()
  df <- interpretation_data()
  fit <- neumiss(y ~ ., data = df, max_epochs = 30, seed = 1)
  imp <- importance(fit, nsim = 3, seed = 1)
  expect_s3_class(imp, "neumiss_importance")
  expect_named(imp, c("variable", "importance", "sd"))
  expect_equal(imp$variable, c("signal", "group", "noise"))
  expect_gt(imp$importance[1], 0.5)
  expect_lt(abs(imp$importance[3]), 0.05)
  expect_true(all(imp$sd >= 0))
  expect_equal(attr(imp, "metric"), "r2")
  expect_equal(attr(imp, "n"), 300L)
  # the same shuffles for the same seed; held-out rows (with a missing response dropped)
  expect_equal(importance(fit, nsim = 3, seed = 1), imp)
  new <- interpretation_data(seed = 3)
  new$y[1:10] <- NA
  held_out <- importance(fit, newdata = new, nsim = 2, seed = 1, metric = "neg_mean_absolute_error")
  expect_equal(attr(held_out, "n"), 290L)
  expect_equal(held_out$variable[1], "signal")
  png_file <- tempfile(fileext = ".png")
  grDevices::png(png_file)
  expect_invisible(plot(imp))
  grDevices::dev.off()
  expect_gt(file.size(png_file), 1000)
  expect_error(importance(fit, newdata = new[setdiff(names(new), "y")]), "lacks the response 'y'")
  expect_error(importance(fit, nsim = 0), "`nsim` must be a whole number >= 1")
  expect_error(importance(fit, metric = "nonsense"), "permutation importance failed")
})

test_that("importance() of classifiers and of matrix fits", {
  skip_if_no_python_neumiss()
  df <- interpretation_data()
  df$up <- factor(ifelse(df$y > 0, "up", "down"), levels = c("up", "down"))
  cls <- neumiss(up ~ signal + noise + group, data = df, max_epochs = 20, seed = 1)
  imp <- importance(cls, nsim = 2, seed = 1)
  expect_equal(attr(imp, "metric"), "accuracy")
  expect_equal(imp$variable[3], "noise")
  data <- simulate_data(n = 200, d = 3)
  fit <- neumiss(data$x, data$y, max_epochs = 5, seed = 1)
  expect_error(importance(fit), "`newdata` is required")
  expect_error(importance(fit, newdata = data$x), "`y` is required")
  expect_setequal(importance(fit, newdata = data$x, y = data$y, nsim = 1)$variable,
                  c("v1", "v2", "v3"))
})

test_that("plot(type = \"pdp\") draws the mean prediction with one predictor set to each value", {
  skip_if_no_python_neumiss()
  df <- interpretation_data()
  fit <- neumiss(y ~ ., data = df, max_epochs = 20, seed = 1)
  png_file <- tempfile(fileext = ".png")
  grDevices::png(png_file)
  on.exit(grDevices::dev.off())
  pd <- plot(fit, type = "pdp", variable = "signal", grid_size = 5)
  expect_invisible(plot(fit, type = "pdp", variable = "signal", grid_size = 5))
  expect_named(pd, c("value", "yhat"))
  observed <- df$signal[!is.na(df$signal)]
  expect_equal(pd$value, seq(quantile(observed, 0.05), quantile(observed, 0.95),
                             length.out = 5))
  by_hand <- vapply(pd$value, function(v) mean(predict(fit, transform(df, signal = v))),
                    numeric(1))
  expect_equal(pd$yhat, by_hand, tolerance = 1e-10)
  # the linear head: every row is linear in an observed value, so is their mean
  expect_equal(diff(pd$yhat, differences = 2), rep(0, 3), tolerance = 1e-6)
  groups <- plot(fit, type = "pdp", variable = "group")
  expect_equal(as.character(groups$value), c("a", "b"))
  expect_gt(groups$yhat[1], groups$yhat[2])
  expect_error(plot(fit, type = "pdp", variable = "nope"), "name of one predictor")
  expect_error(plot(fit, type = "pdp"), "name of one predictor")
  # a classifier: one curve per class, R's level order kept
  df$up <- factor(ifelse(df$y > 0, "up", "down"), levels = c("up", "down"))
  cls <- neumiss(up ~ signal + noise + group, data = df, max_epochs = 20, seed = 1)
  pd <- plot(cls, type = "pdp", variable = "signal", grid_size = 4, newdata = df[1:100, ])
  expect_named(pd, c("value", "up", "down"))
  expect_equal(pd$up + pd$down, rep(1, 4))
  expect_equal(pd$up, vapply(pd$value, function(v) {
    mean(predict(cls, transform(df[1:100, ], signal = v), type = "prob")[, "up"])
  }, numeric(1)), tolerance = 1e-10)
  expect_true(all(diff(pd$up) > 0))
})
