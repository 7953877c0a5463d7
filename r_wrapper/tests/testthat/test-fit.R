test_that("regression from a matrix: fit, predict, print, summary, coef, plot", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 600)  # enough rows for the Bayes comparison below
  x_before <- data$x
  fit <- neumiss(data$x, data$y, depth = 2, max_epochs = 40, batch_size = 32,
                 seed = 1)
  expect_identical(data$x, x_before)  # the user's data is untouched
  expect_s3_class(fit, "neumiss")
  expect_equal(fit$task, "regression")
  expect_equal(fit$best_depth, 2L)
  expect_equal(fit$mlp_depth, 0L)
  expect_output(print(fit), "depth 2, independent weights, linear head")
  expect_equal(fit$feature_names, colnames(data$x))

  pred <- predict(fit, data$x)
  expect_type(pred, "double")
  expect_length(pred, nrow(data$x))
  expect_false(anyNA(pred))  # rows with missing values get predictions
  # on new data, close to the Bayes predictor E[y | x_obs] of the true Gaussian
  test <- simulate_data(n = 2000, seed = 2)
  bayes <- neumiss:::.gaussian_conditional_y(test$mu, test$sigma, test$x)
  expect_gt(r_squared(test$y, predict(fit, test$x)), r_squared(test$y, bayes) - 0.05)

  # a row with every predictor missing is valid
  all_missing <- data$x[1, , drop = FALSE]
  all_missing[] <- NA
  expect_false(is.na(predict(fit, all_missing)))

  # the same seed gives the same model
  again <- neumiss(data$x, data$y, depth = 2, max_epochs = 40, batch_size = 32,
                   seed = 1)
  expect_identical(predict(again, data$x), pred)

  # history matches the epochs; summary reports it
  expect_equal(nrow(fit$history), fit$n_epochs)
  expect_true(all(c("epoch", "train_loss", "val_loss") %in% names(fit$history)))
  s <- summary(fit)
  expect_s3_class(s, "summary.neumiss")
  expect_equal(s$depth, 2L)
  expect_equal(s$n_epochs, fit$n_epochs)
  expect_equal(s$validation, fit$history$val_score[fit$best_epoch])
  expect_equal(c(s$n_obs, s$n_train, s$n_valid), c(600L, 540L, 60L))
  expect_equal(s$training, r_squared(data$y, fitted(fit)))
  expect_equal(s$missing_rate, mean(is.na(data$x)))
  expect_output(print(s), "Validation R\\^2: [-0-9.]+ \\(60 rows\\)")
  expect_output(print(s), "Rows: 600 used: 540 training, 60 validation")
  expect_output(print(s), "Training history")
  expect_output(print(fit), "NeuMiss regression model \\(depth 2")

  # coef: the linear model of the complete rows, which their predictions follow
  b <- coef(fit)
  expect_named(b, c("(Intercept)", colnames(data$x)))
  complete <- stats::complete.cases(data$x)
  expect_equal(unname(predict(fit, data$x[complete, ])),
               unname(b[1] + drop(data$x[complete, ] %*% b[-1])), tolerance = 1e-4)

  png_file <- tempfile(fileext = ".png")
  grDevices::png(png_file)
  expect_invisible(plot(fit))
  expect_invisible(plot(fit, which = 4, main = "my title", log = "y"))  # defaults give way
  grDevices::dev.off()
  expect_gt(file.size(png_file), 1000)

  # a network kept untrained (the Chebyshev start validated best) has no history
  untrained <- fit
  untrained$n_epochs <- 0L
  untrained$best_epoch <- 0L
  untrained$history <- fit$history[0, ]
  expect_output(print(summary(untrained)), "Epochs: 0 \\(not trained")
  expect_output(print(summary(untrained)), "Training history: none \\(not trained\\)")
  expect_output(print(untrained), "0 epochs")
  grDevices::png(png_file)
  expect_invisible(plot(untrained, which = 4))
  grDevices::dev.off()
})

test_that("data frame and formula interfaces give the same model as the matrix", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 200)
  df <- data.frame(data$x, y = data$y)
  by_matrix <- neumiss(data$x, data$y, max_epochs = 10, seed = 3)
  by_frame <- neumiss(df[colnames(data$x)], df$y, max_epochs = 10, seed = 3)
  by_formula <- neumiss(y ~ ., data = df, max_epochs = 10, seed = 3)
  expect_equal(by_formula$call[[1]], as.name("neumiss"))
  p <- predict(by_matrix, data$x)
  expect_identical(predict(by_frame, df[colnames(data$x)]), p)
  # the formula picks its variables from newdata (the response column is not needed)
  expect_identical(predict(by_formula, df[rev(colnames(data$x))]), p)
  # columns are matched by name, in any order
  expect_identical(predict(by_matrix, data$x[, 4:1]), p)
})

test_that("formula with transformed terms and a subset of columns", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 200)
  df <- data.frame(data$x, y = data$y)
  fit <- neumiss(y ~ v1 + I(v2 * 2) + v3, data = df, max_epochs = 5, seed = 1)
  expect_equal(fit$feature_names, c("v1", "I(v2 * 2)", "v3"))
  by_matrix <- neumiss(cbind(v1 = df$v1, `I(v2 * 2)` = df$v2 * 2, v3 = df$v3), df$y,
                       max_epochs = 5, seed = 1)
  expect_identical(predict(fit, df), predict(by_matrix, cbind(df$v1, df$v2 * 2, df$v3)))
  expect_error(predict(fit, df[c("v1", "v2")]), "lacks the variable\\(s\\) 'v3'")
})

test_that("a vector of depths is searched and the best one kept", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 200)
  fit <- neumiss(data$x, data$y, depth = c(3, 1), max_epochs = 3, seed = 1)
  expect_true(fit$best_depth %in% c(1L, 3L))
  expect_output(print(summary(fit)), "Depth: \\[3, 1\\] \\(used: [13]\\)")
})

test_that("estimator parameters reach Python", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 200)
  # (3 epochs of SGD: the fit may warn that it does no better than a constant)
  fit <- suppressWarnings(neumiss(data$x, data$y, depth = "auto", mlp_depth = 1, mlp_width = 8,
                 weight_sharing = "shared", residual = TRUE, optimizer = "sgd",
                 learning_rate = 0.01, batch_size = 32, max_epochs = 3, patience = 2,
                 validation_fraction = 0.2, seed = 7, weight_decay = 1e-4))
  expected <- list(depth = "auto", mlp_depth = 1L, mlp_width = 8L, weight_sharing = "shared",
                   residual = TRUE, optimizer = "sgd", learning_rate = 0.01,
                   batch_size = 32L, max_epochs = 3L, patience = 2L,
                   validation_fraction = 0.2, random_state = 7L, weight_decay = 1e-4)
  expect_equal(fit$params[names(expected)], expected)
  expect_equal(fit$mlp_depth, 1L)
  expect_equal(fit$mlp_weight, 1)  # the MLP head alone: nothing blended
  # depth 0 alone takes the spline term unasked (spline = "auto"); print() says which
  expect_output(print(fit), if (isTRUE(fit$spline)) "MLP head \\(1 hidden layer\\) with splines, "
                else "MLP head \\(1 hidden layer\\), ")
  expect_lte(fit$n_epochs, 3L)
  expect_error(neumiss(data$x, data$y, not_a_parameter = 1),
               "unknown parameter\\(s\\) not_a_parameter")
  expect_error(neumiss(data$x, data$y, max_epochs = 2.5), "`max_epochs` must be a whole number")
  expect_error(neumiss(data$x, data$y, depth = c(1, 2.5)),
               "`depth` must be a whole number or a vector of them")
  expect_error(neumiss(data$x, data$y, seed = "a"), "`seed` must be a whole number")
  expect_error(neumiss(data$x, data$y, weight_sharing = "diagonal"),
               "weight_sharing must be one of")
  expect_equal(fit$weight_sharing, "shared")
})

test_that("classification: factor response, predictions keep its levels", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 400)
  cls <- cut(data$y, c(-Inf, -1, 1, Inf), labels = c("low", "mid", "high"))
  cls <- factor(cls, levels = c("high", "low", "mid", "unused"))
  fit <- neumiss(data$x, cls, max_epochs = 30, batch_size = 32, seed = 2)
  expect_equal(fit$task, "classification")
  expect_equal(fit$classes, c("high", "low", "mid"))
  pred <- predict(fit, data$x)
  expect_s3_class(pred, "factor")
  expect_equal(levels(pred), levels(cls))
  expect_identical(predict(fit, data$x, type = "class"), pred)
  expect_gt(mean(pred == cls), 0.6)
  prob <- predict(fit, data$x, type = "prob")
  expect_equal(dim(prob), c(400L, 3L))
  expect_equal(colnames(prob), fit$classes)
  expect_equal(rowSums(prob), rep(1, 400), tolerance = 1e-6)
  # the predicted class is the most probable one
  expect_equal(as.character(pred), colnames(prob)[max.col(prob, ties.method = "first")])
  expect_output(print(fit), "Classes \\(3\\): high, low, mid")
  expect_output(print(summary(fit)), "log-loss")

  # binary from a logical response, and a numeric response forced to classification
  fit2 <- neumiss(data$x, data$y > 0, max_epochs = 10, seed = 2)
  pred2 <- predict(fit2, data$x)
  expect_type(pred2, "logical")  # a logical response predicts logicals
  expect_equal(pred2, predict(fit2, data$x, type = "prob")[, "TRUE"] > 0.5)
  expect_gt(mean(pred2 == (data$y > 0)), 0.8)
  expect_identical(fitted(fit2, type = "class"), pred2)
  expect_identical(predict(fit2, data$x[0, , drop = FALSE]), logical(0))
  # the logistic start's C: logistic regression's default on held-out rows (one
  # network), chosen on the rows held out out of fold (an ensemble on 400 rows)
  expect_equal(fit2$validation_scheme, "holdout")
  expect_equal(fit2$start_C, 1)
  fit5 <- neumiss(data$x, data$y > 0, depth = 0, ensemble_size = 5, max_epochs = 5, seed = 2)
  expect_equal(fit5$validation_scheme, "out_of_fold")
  expect_true(is.numeric(fit5$start_C) && fit5$start_C > 0)
  expect_output(print(summary(fit5)), sprintf("Linear start: logistic regression with C = %.3g",
                                              fit5$start_C))
  path <- tempfile(fileext = ".neumiss")
  write_neumiss(fit2, path)
  expect_identical(predict(read_neumiss(path), data$x), pred2)
  fit3 <- neumiss(data$x, as.integer(data$y > 0), task = "classification",
                  max_epochs = 10, seed = 2)
  expect_equal(levels(predict(fit3, data$x)), c("0", "1"))
  regression <- neumiss(data$x, data$y, max_epochs = 1, seed = 1)
  expect_error(predict(regression, data$x, type = "prob"), "only for classification")
  expect_null(regression$start_C)
  expect_error(neumiss(data$x, cls, task = "regression"), "needs a numeric response")
})


test_that("class_weight weighs a level of a factor response up", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 300)
  rare <- factor(ifelse(data$y > 1.5, "rare", "common"))
  plain <- neumiss(data$x, rare, max_epochs = 10, seed = 3)
  weighted <- neumiss(data$x, rare, max_epochs = 10, seed = 3, class_weight = list(rare = 4))
  balanced <- neumiss(data$x, rare, max_epochs = 10, seed = 3, class_weight = "balanced")
  expect_equal(weighted$params$class_weight, list(rare = 4))
  expect_equal(balanced$params$class_weight, "balanced")
  counts <- table(rare)
  expect_equal(balanced$class_weights,
               c(common = 300 / (2 * counts[["common"]]), rare = 300 / (2 * counts[["rare"]])))
  expect_output(print(summary(weighted)), "Class weights: common 1, rare 4 \\(class_weight")
  expect_null(plain$class_weights)
  p_rare <- function(fit) mean(predict(fit, data$x, type = "prob")[, "rare"])
  expect_gt(p_rare(weighted), p_rare(plain))
  expect_gt(p_rare(balanced), p_rare(plain))
  path <- tempfile(fileext = ".neumiss")
  write_neumiss(weighted, path)
  expect_equal(predict(read_neumiss(path), data$x, type = "prob"),
               predict(weighted, data$x, type = "prob"))
  expect_error(neumiss(data$x, rare, max_epochs = 1, class_weight = list(other = 2)),
               "class_weight has labels that are not classes of y: 'other'")
  # a named vector is the same weights; unnamed weights are refused in R
  as_vector <- neumiss(data$x, rare, max_epochs = 10, seed = 3, class_weight = c(rare = 4))
  expect_equal(predict(as_vector, data$x, type = "prob"),
               predict(weighted, data$x, type = "prob"))
  expect_error(neumiss(data$x, rare, max_epochs = 1, class_weight = 4),
               "`class_weight` must be \"balanced\" or weights named by level")
  # a logical response: its levels are "FALSE" and "TRUE"
  high <- neumiss(data$x, data$y > 1.5, max_epochs = 10, seed = 3, class_weight = c(`TRUE` = 4))
  expect_equal(high$params$class_weight, list(`TRUE` = 4))
})

test_that("an ensemble fit (ensemble_size) is described and predicts", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 200)
  fit <- neumiss(data$x, data$y, ensemble_size = 2, max_epochs = 10, seed = 1)
  expect_equal(fit$params$ensemble_size, 2L)
  expect_true(all(is.finite(coef(fit))))
  expect_length(predict(fit, data$x), 200)
})

test_that("option neumiss.args gives arguments the call leaves out", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 100)
  old <- options(neumiss.args = list(depth = 1L, max_epochs = 2L, ensemble_size = 1L))
  on.exit(options(old))
  fit <- neumiss(data$x, data$y, max_epochs = 3, seed = 1)
  expect_equal(fit$params$depth, 1L)        # from the option
  expect_equal(fit$params$max_epochs, 3L)   # the call wins
  options(neumiss.args = list(seed = 1))
  expect_error(neumiss(data$x, data$y), "may not set 'seed'")
  options(neumiss.args = list(1))
  expect_error(neumiss(data$x, data$y), "must be a named list")
})

test_that("the head adds splines when the response bends with a feature", {
  skip_if_no_python_neumiss()
  set.seed(4)
  n <- 800
  x <- matrix(rnorm(n * 3), n, 3, dimnames = list(NULL, c("a", "b", "c")))
  y <- abs(2 * x[, 1]) + x[, 2] + rnorm(n, sd = 0.3)
  x[sample(n * 3, n * 3 * 0.1)] <- NA
  fit <- neumiss(x, y, depth = 0, mlp_depth = 0, max_epochs = 5, seed = 1)
  expect_true(fit$spline)
  expect_output(print(fit), "linear head with splines")
  expect_true(summary(fit)$spline)
  expect_output(print(summary(fit)), "with splines")
  plain <- neumiss(x, y, depth = 0, mlp_depth = 0, max_epochs = 5, seed = 1, spline = FALSE)
  expect_false(plain$spline)
  expect_false(grepl("splines", paste(capture.output(print(plain)), collapse = "\n")))
  # the splines fit the bend a linear head misses
  expect_gt(summary(fit)$training, summary(plain)$training + 0.1)
})

test_that("a positive, right-skewed response is fitted on the log scale", {
  skip_if_no_python_neumiss()
  set.seed(5)
  n <- 600
  x <- matrix(rnorm(n * 2), n, 2, dimnames = list(NULL, c("a", "b")))
  y <- exp(1 + 0.9 * x[, 1] - 0.6 * x[, 2] + rnorm(n, sd = 0.3))
  x[sample(n * 2, n * 2 * 0.1)] <- NA
  fit <- neumiss(x, y, depth = 0, mlp_depth = 0, spline = FALSE, max_epochs = 3, seed = 1)
  expect_true(fit$log_target)
  expect_true(summary(fit)$log_target)
  expect_output(print(fit), "fitted on the log scale")
  expect_output(print(summary(fit)), "fitted on the log scale")
  expect_true(all(predict(fit, x) > 0))
  # coef() is the linear model of log(y): exp() of it is the prediction
  complete <- x[stats::complete.cases(x), , drop = FALSE][1:3, ]
  beta <- coef(fit)
  expect_equal(unname(exp(beta[1] + complete %*% beta[-1])[, 1]),
               unname(predict(fit, complete)), tolerance = 1e-4)
  plain <- neumiss(x, y, depth = 0, mlp_depth = 0, spline = FALSE, max_epochs = 3, seed = 1,
                   log_target = FALSE)
  expect_false(plain$log_target)
  expect_false(grepl("log scale", paste(capture.output(print(plain)), collapse = "\n")))
  expect_error(neumiss(x, -y, max_epochs = 1, seed = 1, log_target = TRUE),
               "log_target = TRUE needs a positive y")
})

test_that("the head sees the mask when missingness tells the response", {
  skip_if_no_python_neumiss()
  set.seed(3)
  n <- 800
  x <- matrix(rnorm(n * 3), n, 3, dimnames = list(NULL, c("a", "b", "c")))
  y <- x[, 1] + x[, 2] + rnorm(n, sd = 0.3)
  x[x[, 1] > 0.5, 1] <- NA  # self-masking: the large values of a are the missing ones
  fit <- neumiss(x, y, depth = 0, max_epochs = 5, seed = 1)
  expect_true(fit$mask_skip)
  expect_output(print(fit), "linear head seeing the mask")
  expect_true(summary(fit)$mask_skip)
  expect_output(print(summary(fit)), "seeing the mask")
  # asked for without it, the head does not see the mask
  plain <- neumiss(x, y, depth = 0, max_epochs = 5, seed = 1, mask_skip = FALSE)
  expect_false(plain$mask_skip)
  expect_false(grepl("seeing the mask", paste(capture.output(print(plain)), collapse = "\n")))
})

test_that("a head blended with the linear head says its MLP weight", {
  expect_equal(neumiss:::.head_label(2L, mlp_weight = 0.35),
               "MLP head (2 hidden layers) blended with the linear head (MLP weight 0.35)")
  expect_equal(neumiss:::.head_label(2L, mlp_weight = 1), "MLP head (2 hidden layers)")
  expect_equal(neumiss:::.head_label(2L), "MLP head (2 hidden layers)")  # a fit from an older file
  expect_equal(neumiss:::.head_label(0L, mlp_weight = 0), "linear head")
})
