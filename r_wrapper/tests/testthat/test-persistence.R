test_that("a fit survives saveRDS()/readRDS() into a new R session", {
  skip_if_no_python_neumiss()
  skip_if_not_installed_as_library()
  data <- simulate_data(n = 200)
  cls <- factor(ifelse(data$y > 0, "up", "down"))
  fits <- list(
    regression = neumiss(y ~ ., data = data.frame(data$x, y = data$y), max_epochs = 5,
                         seed = 1),
    classification = neumiss(data$x, cls, max_epochs = 5, seed = 1)
  )
  dir <- tempfile()
  dir.create(dir)
  saveRDS(fits, file.path(dir, "fits.rds"))
  saveRDS(data.frame(data$x), file.path(dir, "newdata.rds"))
  expected <- list(predict(fits$regression, data.frame(data$x)),
                   predict(fits$classification, data$x, type = "prob"),
                   predict(fits$classification, data$x))
  out <- run_rscript(c(
    "library(neumiss)",
    sprintf("dir <- '%s'", dir),
    "fits <- readRDS(file.path(dir, 'fits.rds'))",
    "newdata <- readRDS(file.path(dir, 'newdata.rds'))",
    "got <- list(predict(fits$regression, newdata),",
    "            predict(fits$classification, as.matrix(newdata), type = 'prob'),",
    "            predict(fits$classification, as.matrix(newdata)))",
    "saveRDS(got, file.path(dir, 'got.rds'))",
    "print(fits$regression)"
  ))
  expect_equal(attr(out, "status"), 0L, info = paste(out, collapse = "\n"))
  expect_true(any(grepl("NeuMiss regression model", out)))
  expect_identical(readRDS(file.path(dir, "got.rds")), expected)
})

test_that("the Python model is rebuilt from the stored bytes when lost", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 150)
  fit <- neumiss(data$x, data$y, max_epochs = 3, seed = 1)
  expected <- predict(fit, data$x)
  copy <- unserialize(serialize(fit, NULL))  # as saveRDS/readRDS: the live object is gone
  expect_true(reticulate::py_is_null_xptr(copy$py$estimator))
  expect_identical(predict(copy, data$x), expected)
  expect_false(reticulate::py_is_null_xptr(copy$py$estimator))  # cached for next calls
})

test_that("write_neumiss()/read_neumiss() use the Python package's file format", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 150)
  fit <- neumiss(data$x, data$y, max_epochs = 3, seed = 1)
  path <- tempfile(fileext = ".pt")
  expect_identical(write_neumiss(fit, path), path)
  # Python reads it with neumiss.load and predicts the same
  py_model <- reticulate::import("neumiss", convert = FALSE)$load(path)
  expect_equal(reticulate::py_to_r(py_model$n_features_in_), 4L)
  back <- read_neumiss(path)
  expect_s3_class(back, "neumiss")
  expect_equal(back$feature_names, colnames(data$x))  # names are kept
  expect_identical(predict(back, data$x), predict(fit, data$x))
  expect_identical(predict(back, data$x[, 4:1]), predict(fit, data$x))  # matched by name
  expect_identical(predict(back, unname(data$x)), predict(fit, data$x))
  expect_named(coef(back), c("(Intercept)", colnames(data$x)))
  expect_equal(coef(back), coef(fit))
  expect_error(fitted(back), "read from a file")
  expect_error(formula(back), "not a formula")
})

test_that("a model file keeps the formula, factor levels and response levels", {
  skip_if_no_python_neumiss()
  set.seed(3)
  n <- 200
  df <- data.frame(a = rnorm(n), g = factor(sample(c("lo", "mid", "hi"), n, TRUE),
                                            levels = c("lo", "mid", "hi")),
                   s = sample(c("p", "q"), n, TRUE))
  df$y <- factor(ifelse(df$a + (df$g == "hi") > 0.5, "yes", "no"), levels = c("yes", "no"))
  df$a[1:20] <- NA
  df$g[15:30] <- NA
  fit <- neumiss(y ~ log(abs(a) + 1) + a + g + s, data = df, max_epochs = 5, seed = 1)
  path <- tempfile(fileext = ".pt")
  write_neumiss(fit, path)
  back <- read_neumiss(path)
  expect_equal(formula(back), formula(fit), ignore_attr = TRUE)
  expect_equal(back$xlevels, list(g = c("lo", "mid", "hi"), s = c("p", "q")))
  expect_equal(back$levels, c("yes", "no"))
  expect_equal(back$n_obs, 200L)
  # the terms are evaluated in newdata, whose columns may come in any order
  shuffled <- df[c("s", "y", "g", "a")]
  expect_identical(predict(back, shuffled), predict(fit, df))
  expect_identical(predict(back, shuffled, type = "prob"), predict(fit, df, type = "prob"))
  expect_equal(colnames(predict(back, df, type = "prob")), c("yes", "no"))
  # Python sees the R names and the class labels
  py_model <- reticulate::import("neumiss", convert = FALSE)$load(path)
  expect_equal(reticulate::py_to_r(py_model$encoder_$output_names()),
               c("log(abs(a) + 1)", "a", "g=lo", "g=mid", "g=hi", "s=p", "s=q"))
  expect_equal(sort(unlist(reticulate::py_to_r(py_model$classes_$tolist()))), c("no", "yes"))
})

test_that("objects and files that are not neumiss models give clear errors", {
  lm_fit <- stats::lm(dist ~ speed, data = cars)
  rds <- tempfile(fileext = ".rds")
  saveRDS(lm_fit, rds)
  other <- readRDS(rds)
  expect_error(export_onnx(other, tempfile()), "must be a model fitted by neumiss\\(\\), not an object of class 'lm'")
  expect_error(write_neumiss(other, tempfile()), "class 'lm'")
  expect_error(getS3method("predict", "neumiss")(other, cars), "class 'lm'")
  fake <- structure(list(task = "regression"), class = "neumiss")
  expect_error(predict(fake, cars), "not a model made by neumiss\\(\\)")
  expect_error(read_neumiss(tempfile()), "existing model file")

  skip_if_no_python_neumiss()
  err <- tryCatch(read_neumiss(rds), error = identity)
  expect_match(conditionMessage(err), "could not read '.*' as a neumiss model: .*not a neumiss model file")
  expect_null(conditionCall(err))
  data <- simulate_data(n = 100)
  fit <- neumiss(data$x, data$y, max_epochs = 2, seed = 1)
  broken <- unserialize(serialize(fit, NULL))
  broken$python_model <- as.raw(1:100)
  expect_error(predict(broken, data$x),
               "could not restore the Python model stored in this neumiss object: .*not a neumiss model file")
})
