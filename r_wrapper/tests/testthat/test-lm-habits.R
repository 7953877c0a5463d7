test_that("sigma() and deviance() of a regression are those of its residuals", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 200, d = 3)
  fit <- neumiss(data$x, data$y, max_epochs = 5, seed = 1)
  r <- residuals(fit)
  expect_equal(deviance(fit), sum(r^2))
  expect_equal(sigma(fit), sqrt(mean(r^2)))
  w <- rep(c(1, 3), 100)
  weighted <- neumiss(data$x, data$y, weights = w, max_epochs = 5, seed = 1)
  rw <- residuals(weighted)
  expect_equal(deviance(weighted), sum(w * rw^2))
  expect_equal(sigma(weighted), sqrt(sum(w * rw^2) / sum(w)))
})

test_that("a classifier's deviance is minus twice its log-likelihood on the training rows", {
  skip_if_no_python_neumiss()
  fit <- neumiss(Species ~ ., data = iris, max_epochs = 5, seed = 1)
  p <- fitted(fit, type = "prob")
  expect_equal(dim(p), c(150L, 3L))
  expect_equal(deviance(fit), -2 * sum(log(p[cbind(1:150, as.integer(iris$Species))])))
  expect_error(sigma(fit), "regression only")
  # three classes: fitted() gives the probability matrix, as predict(type = "prob")
  expect_identical(fitted(fit), p)
  expect_equal(unname(fitted(fit, type = "class")),
               factor(colnames(p)[max.col(p, "first")], levels = levels(iris$Species)))
})

test_that("likelihood-based inference gives errors that say what to use instead", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 150, d = 3)
  fit <- neumiss(data$x, data$y, max_epochs = 2, seed = 1)
  expect_error(logLik(fit), "no log-likelihood.*compare_methods\\(\\)")
  expect_error(AIC(fit), "no log-likelihood \\(nor AIC or BIC\\)")
  expect_error(BIC(fit), "no log-likelihood")
  expect_error(vcov(fit), "no covariance matrix.*interval = TRUE")
  expect_error(confint(fit), "no confidence intervals for parameters.*interval = \"prediction\"")
  expect_error(anova(fit), "no analysis of variance.*compare_methods\\(\\)")
  expect_error(predict(fit, data$x, se.fit = TRUE), "no standard errors.*interval = TRUE")
  expect_length(predict(fit, data$x, se.fit = FALSE), 150)
})

test_that("zero-row newdata gives zero-length predictions", {
  skip_if_no_python_neumiss()
  fit <- neumiss(Ozone ~ ., data = airquality, max_epochs = 2, seed = 1)
  expect_identical(predict(fit, airquality[0, ]), numeric(0))
  cls <- neumiss(Species ~ ., data = iris, max_epochs = 2, seed = 1)
  expect_identical(predict(cls, iris[0, ]), factor(character(0), levels = levels(iris$Species)))
  prob <- predict(cls, iris[0, ], type = "prob")
  expect_equal(dim(prob), c(0L, 3L))
  expect_equal(colnames(prob), levels(iris$Species))
  data <- simulate_data(n = 200, d = 3)
  interval <- suppressWarnings(  # one epoch may not beat the constant predictor
    neumiss(data$x, data$y, max_epochs = 1, depth = 1, seed = 1, interval = TRUE))
  expect_identical(predict(interval, data$x[0, , drop = FALSE]), numeric(0))
  empty <- predict(interval, data$x[0, , drop = FALSE], interval = "prediction")
  expect_equal(dim(empty), c(0L, 3L))
  expect_equal(colnames(empty), c("fit", "lwr", "upr"))
})

test_that("plot(which = 1:4) draws the diagnostics, refusing what a fit cannot show", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 200, d = 3)
  fit <- neumiss(data$x, data$y, max_epochs = 3, seed = 1)
  expect_equal(fit$n_missing, unname(rowSums(is.na(data$x))))
  png_file <- tempfile(fileext = ".png")
  grDevices::png(png_file)
  on.exit(grDevices::dev.off())
  for (k in 1:4) expect_invisible(plot(fit, which = k))
  expect_invisible(plot(fit, which = c(2, 3), ask = FALSE))
  expect_error(plot(fit, which = 5), "among 1:4")
  cls <- neumiss(Species ~ ., data = iris, max_epochs = 2, seed = 1)
  expect_invisible(plot(cls))
  expect_error(plot(cls, which = 1), "regression fit")
})

test_that("per-pattern coefficients reproduce the predictions of their pattern", {
  skip_if_no_python_neumiss()
  set.seed(3)
  df <- data.frame(a = rnorm(300, 10, 5), b = rnorm(300), g = factor(sample(c("u", "v", "w"),
                                                                            300, TRUE)))
  df$y <- 0.3 * df$a - df$b + c(u = 0, v = 1, w = -1)[as.character(df$g)] + rnorm(300, sd = 0.2)
  df$a[1:60] <- NA
  df$g[61:90] <- NA
  fit <- neumiss(y ~ ., data = df, max_epochs = 20, seed = 1)
  new <- data.frame(a = c(1, 20, NA, NA, 5), b = c(0, -1, 2, 0.5, 1),
                    g = factor(c("u", "w", "v", "u", NA), levels = c("u", "v", "w")))
  pred <- predict(fit, new)
  b <- coef(fit)
  expect_named(b, c("(Intercept)", "a", "b", "gv", "gw"))
  design <- cbind(1, new$a, new$b, new$g == "v", new$g == "w")
  expect_equal(pred[1:2], drop(design[1:2, ] %*% b), tolerance = 1e-4)
  without_a <- coef(fit, pattern = "a")
  expect_named(without_a, c("(Intercept)", "b", "gv", "gw"))
  expect_equal(pred[3:4], drop(design[3:4, -2] %*% without_a), tolerance = 1e-4)
  expect_equal(coef(fit, pattern = c(FALSE, FALSE, TRUE)), coef(fit, pattern = "g"))
  expect_equal(pred[5], sum(c(1, 5, 1) * coef(fit, pattern = "g")), tolerance = 1e-4)
  expect_error(coef(fit, pattern = "z"), "names 'z', not predictors")
  expect_error(coef(fit, pattern = TRUE), "one TRUE/FALSE per predictor")
  mlp <- neumiss(y ~ ., data = df, max_epochs = 2, seed = 1, mlp_depth = 1)
  expect_error(coef(mlp), "MLP head")
  expect_error(tidy(mlp), "MLP head")
})

test_that("a two-class classifier's coefficients are its log-odds model", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 300, d = 3)
  cls <- factor(ifelse(data$y > 0, "up", "down"))
  fit <- neumiss(data$x, cls, max_epochs = 10, seed = 1)
  b <- coef(fit, pattern = "v2")
  rows <- which(is.na(data$x[, 2]) & !is.na(data$x[, 1]) & !is.na(data$x[, 3]))
  p <- predict(fit, data$x[rows, ], type = "prob")
  expect_equal(unname(log(p[, "up"] / p[, "down"])),
               unname(b[1] + drop(data$x[rows, c(1, 3)] %*% b[-1])), tolerance = 1e-3)
  iris_fit <- neumiss(Species ~ ., data = iris, max_epochs = 2, seed = 1)
  expect_error(coef(iris_fit), "two-class")
})

test_that("coef() is the Python estimator's pattern model: ensembles, level order, refusals", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 300, d = 3)
  complete <- which(rowSums(is.na(data$x)) == 0)
  design <- cbind(1, data$x[complete, ])
  # an ensemble of regressors averages its members: the mean of their linear models
  ensemble <- neumiss(data$x, data$y, max_epochs = 5, seed = 1, ensemble_size = 3)
  expect_named(coef(ensemble), c("(Intercept)", "v1", "v2", "v3"))
  expect_equal(unname(predict(ensemble, data$x[complete, ])),
               unname(drop(design %*% coef(ensemble))), tolerance = 1e-6)
  # R's second level sorts first in Python: still the log-odds of R's second level
  cls <- factor(ifelse(data$y > 0, "up", "down"), levels = c("up", "down"))
  fit <- neumiss(data$x, cls, max_epochs = 5, seed = 1)
  p <- predict(fit, data$x[complete, ], type = "prob")
  expect_equal(unname(log(p[, "down"] / p[, "up"])), unname(drop(design %*% coef(fit))),
               tolerance = 1e-6)
  ensemble_cls <- neumiss(data$x, cls, max_epochs = 2, seed = 1, ensemble_size = 2)
  expect_error(coef(ensemble_cls),
               "no coefficients: the classifier is an ensemble of 2 networks that averages their probabilities")
  message <- tryCatch(coef(ensemble_cls), error = conditionMessage)
  expect_false(grepl("NeuMiss[A-Z]", message))
  expect_match(message, "fit with ensemble_size = 1 for", fixed = TRUE)  # R's syntax
})

test_that("integer codes with indicators: coef() names each one, predict() agrees", {
  skip_if_no_python_neumiss()
  set.seed(4)
  n <- 400
  df <- data.frame(quarter = sample(1:4, n, TRUE), wave = sample(1:4, n, TRUE),
                   matrix(rnorm(6 * n), n, dimnames = list(NULL, paste0("x", 1:6))))
  shock <- matrix(rnorm(16), 4)
  df$y <- 2 * shock[cbind(df$quarter, df$wave)] + 0.5 * df$x1 + rnorm(n, sd = 0.2)
  fit <- neumiss(y ~ ., data = df, integer_levels = TRUE, mlp_depth = 0, ensemble_size = 1,
                 spline = FALSE, max_epochs = 5, seed = 1)
  b <- coef(fit)
  expect_equal(names(b)[1:7], c("(Intercept)", "quarter", paste0("quarter=", 1:4), "wave"))
  new <- df[1:5, ]
  design <- cbind(1, new$quarter, outer(new$quarter, 1:4, "=="), new$wave,
                  outer(new$wave, 1:4, "=="), as.matrix(new[paste0("x", 1:6)]))
  expect_equal(unname(predict(fit, new)), unname(drop(design %*% b)), tolerance = 1e-4)
  expect_output(print(fit), "indicator per value \\(integer_levels\\): quarter \\(4\\), wave \\(4\\)")
  expect_equal(summary(fit)$integer_levels, c(quarter = 4L, wave = 4L))
  expect_output(print(summary(fit)), "quarter \\(4\\), wave \\(4\\)")
  plain <- neumiss(y ~ ., data = df, integer_levels = FALSE, max_epochs = 2, seed = 1)
  expect_false(any(grepl("indicator per value", capture.output(print(plain)))))
})
