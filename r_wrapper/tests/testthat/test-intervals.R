test_that("predict(interval = 'prediction') returns fit/lwr/upr like predict.lm", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 600, d = 3, missing = 0.3)  # 500 rows or more: a split
  df <- data.frame(data$x, y = data$y)
  fit <- neumiss(y ~ ., data = df, max_epochs = 3, ensemble_size = 1, depth = 1, seed = 1,
                 interval = TRUE, level = 0.8)
  expect_equal(fit$interval$method, "cqr-mondrian")
  expect_equal(fit$interval$alpha, 0.2)
  expect_equal(fit$n_calibration, 150L)
  expect_equal(fit$n_train + fit$n_valid + fit$n_calibration, 600L)
  expect_output(print(fit), "Prediction intervals: cqr-mondrian, level 0.8")
  expect_output(print(fit), "calibration: split, 150 held-out rows")
  newdata <- df[1:6, ]
  newdata$v1[2] <- NA
  pred <- predict(fit, newdata, interval = "prediction")
  expect_true(is.matrix(pred))
  expect_identical(colnames(pred), c("fit", "lwr", "upr"))
  expect_identical(rownames(pred), rownames(newdata))
  expect_true(all(pred[, "lwr"] <= pred[, "upr"]))
  expect_equal(pred[, "fit"], predict(fit, newdata), ignore_attr = TRUE)
  # a wider level gives wider intervals, from the same calibration scores
  wide <- predict(fit, newdata, interval = "prediction", level = 0.9)
  expect_true(all(wide[, "lwr"] <= pred[, "lwr"] & wide[, "upr"] >= pred[, "upr"]))
  # the Python model's own intervals
  # the Python model's own intervals (rows as lists: no NumPy conversion in R)
  run <- reticulate::py_run_string(paste(
    "def intervals(model, rows, names):",
    "    import pandas as pd",
    "    return model.predict_interval(pd.DataFrame(rows, columns=names)).tolist()",
    sep = "\n"), local = TRUE)
  rows <- lapply(seq_len(nrow(newdata)), function(i) as.list(unlist(newdata[i, 1:3])))
  rows <- lapply(rows, function(r) lapply(r, function(v) if (is.na(v)) NaN else v))
  py <- do.call(rbind, lapply(run$intervals(neumiss:::.estimator(fit), rows,
                                            c("v1", "v2", "v3")), unlist))
  expect_equal(unname(pred[, c("lwr", "upr")]), py, tolerance = 1e-10)
})

test_that("interval fits survive saveRDS() and refuse what they cannot do", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 300, d = 3)
  fit <- neumiss(data$x, data$y, max_epochs = 2, ensemble_size = 1, depth = 1, seed = 2,
                 interval = TRUE, interval_method = "split")
  pred <- predict(fit, data$x[1:4, ], interval = "prediction")
  path <- tempfile(fileext = ".rds")
  saveRDS(fit, path)
  back <- readRDS(path)
  back$py$estimator <- NULL  # as in a new session: rebuilt from the stored bytes
  expect_equal(predict(back, data$x[1:4, ], interval = "prediction"), pred)
  expect_error(predict(fit, data$x[1:4, ], interval = "confidence"), "confidence intervals")
  expect_error(predict(fit, data$x[1:4, ], interval = "prediction", level = 1.5), "`level`")
  expect_error(predict(fit, interval = "prediction"), "newdata")
  plain <- neumiss(data$x, data$y, max_epochs = 2, ensemble_size = 1, depth = 1, seed = 2)
  expect_error(predict(plain, data$x[1:4, ], interval = "prediction"), "interval = TRUE")
  expect_error(neumiss(data$x, data$y, interval = TRUE, interval_method = "jackknife"),
               "interval_method")
  expect_error(neumiss(data$x, data$y, interval = NA), "`interval`")
  expect_error(neumiss(data$x, data$y > 0, interval = TRUE, interval_method = "cqr",
                       max_epochs = 1), "not a classification method")
  expect_error(predict(fit, data$x[1:4, ], type = "set"), "needs a classifier")
})

test_that("interval fits take factor predictors (re-masked as a whole)", {
  skip_if_no_python_neumiss()
  # Two epochs may not beat the constant predictor (a DivergenceWarning): this fit only
  # checks that factors go through the augmentation and the model file.
  fit <- suppressWarnings(neumiss(Sepal.Length ~ ., data = iris, max_epochs = 2,
                                  ensemble_size = 1, depth = 1, seed = 3, interval = TRUE))
  newdata <- iris[c(1, 51, 101), ]
  newdata$Species[2] <- NA
  newdata$Petal.Width[3] <- NA
  pred <- predict(fit, newdata, interval = "prediction")
  expect_true(all(is.finite(pred)) && all(pred[, "lwr"] <= pred[, "upr"]))
  path <- tempfile(fileext = ".rds")
  saveRDS(fit, path)
  back <- readRDS(path)
  back$py$estimator <- NULL
  expect_equal(predict(back, newdata, interval = "prediction"), pred)
})

test_that("small tables calibrate on every row (CV+), and print() says so", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 250, d = 3)
  fit <- neumiss(data$x, data$y, max_epochs = 2, ensemble_size = 1, depth = 1, seed = 4,
                 interval = TRUE)
  expect_equal(fit$n_calibration, 0L)  # every row trains the network of predict()
  expect_output(print(fit), "cross-conformal \\(CV\\+, 10 folds\\), every one of the 250 rows")
  expect_output(print(fit), "validity: ")
  pred <- predict(fit, data$x[1:5, ], interval = "prediction")
  expect_true(all(pred[, "lwr"] <= pred[, "fit"] | pred[, "fit"] <= pred[, "upr"]))
  expect_true(neumiss:::.estimator(fit)$cross_conformal_)
})

test_that("predict(type = 'set') gives the classes that cannot be ruled out", {
  skip_if_no_python_neumiss()
  df <- iris_with_missing(600, "Petal.Length", seed = 5)
  fit <- neumiss(Species ~ ., data = df, max_epochs = 5, ensemble_size = 1, depth = 1,
                 seed = 5, interval = TRUE, interval_method = "aps-mondrian")
  expect_output(print(fit), "Prediction sets: aps-mondrian, level 0.9")
  newdata <- iris[c(1, 51, 101), ]
  newdata$Petal.Length[2] <- NA
  sets <- predict(fit, newdata, type = "set")
  expect_true(is.logical(sets) && is.matrix(sets))
  expect_identical(colnames(sets), levels(iris$Species))
  expect_identical(rownames(sets), rownames(newdata))
  expect_true(all(rowSums(sets) >= 1))  # an APS set is never empty
  wide <- predict(fit, newdata, type = "set", level = 0.99)
  expect_true(all(wide | !sets))  # nested in the level
  # the Python model's own sets
  expect_equal(unname(sets) * 1L, python_sets(fit, newdata[, 1:4]))
  empty <- predict(fit, newdata[0, ], type = "set")
  expect_equal(dim(empty), c(0L, 3L))
  expect_error(predict(fit, type = "set"), "newdata")
})

test_that("small tables calibrate prediction sets on every row (CV+)", {
  skip_if_no_python_neumiss()
  df <- iris_with_missing(240, "Sepal.Width", seed = 6)
  fit <- neumiss(Species ~ ., data = df, max_epochs = 3, ensemble_size = 1, depth = 1,
                 seed = 6, interval = TRUE)
  expect_equal(fit$n_calibration, 0L)  # every row trains the network of predict()
  expect_output(print(fit), "Prediction sets: lac-mondrian, level 0.9")
  expect_output(print(fit), "cross-conformal \\(CV\\+, 10 folds\\), every one of the 240 rows")
  expect_output(print(fit), "validity: ")
  expect_true(neumiss:::.estimator(fit)$cross_conformal_)
  newdata <- iris[c(1, 51, 101, 2), ]
  newdata$Sepal.Width[c(2, 4)] <- NA
  sets <- predict(fit, newdata, type = "set")
  expect_true(is.logical(sets) && is.matrix(sets))
  expect_identical(colnames(sets), levels(iris$Species))
  wide <- predict(fit, newdata, type = "set", level = 0.95)
  expect_true(all(wide | !sets))  # nested in the level (the cells keep their regime)
  # the Python model's own sets
  expect_equal(unname(sets) * 1L, python_sets(fit, newdata[, 1:4]))
})

test_that("cv chooses between a split and CV+ for the interval fits", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 240, d = 3)
  split <- neumiss(data$x, data$y, max_epochs = 2, ensemble_size = 1, depth = 1, seed = 3,
                   validation_fraction = 0.2, interval = TRUE, interval_method = "split",
                   cv = NULL)
  expect_output(print(split), "calibration: split, 60 held-out rows")
  df <- data.frame(data$x, y = data$y)
  five <- neumiss(y ~ ., data = df, max_epochs = 2, ensemble_size = 1, depth = 1, seed = 3,
                  interval = TRUE, interval_method = "split", cv = 5)
  expect_output(print(five), "cross-conformal \\(CV\\+, 5 folds\\)")
  pred <- predict(five, df[1:5, ], interval = "prediction")
  expect_true(all(pred[, "lwr"] <= pred[, "upr"]))
  expect_error(neumiss(data$x, data$y, interval = TRUE, cv = 1), "`cv`")
  expect_error(neumiss(data$x, data$y, interval = TRUE, cv = "loo"), "`cv`")
})
