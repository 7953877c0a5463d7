test_that("Python messages are put in R terms", {
  r_terms <- neumiss:::.r_terms
  expect_equal(r_terms("NeuMissRegressor: learning_rate must be > 0"),
               "learning_rate must be > 0")
  expect_equal(r_terms("features ['d', 'e'] are missing in every training row"),
               "features 'd', 'e' are missing in every training row")
  msg <- r_terms(paste(
    "alpha=0.010000000000000009 needs at least 138 calibration rows ((1 - alpha)^n <= 1 -",
    "calibration_confidence = 0.25), got 30: give more rows, raise calibration_fraction or",
    "raise alpha, or lower calibration_confidence"))
  expect_match(msg, "^level = 0.99 needs at least 138 calibration rows \\(level\\^n")
  expect_match(msg, "or lower level, or lower calibration_confidence$")
  expect_false(grepl("alpha", msg))
  expect_equal(r_terms("alpha=0.5 needs at least 2 calibration rows (n >= 1/alpha - 1)"),
               "level = 0.5 needs at least 2 calibration rows (n >= 1/(1 - level) - 1)")
  expect_equal(r_terms(paste("fit with spline=False for per-pattern linear models, or",
                             "mlp_depth=0, weight_sharing='auto', init=None, tol=-1e-3")),
               paste("fit with spline = FALSE for per-pattern linear models, or",
                     "mlp_depth = 0, weight_sharing = 'auto', init = NULL, tol = -1e-3"))
  expect_equal(r_terms("column 'size=3' and warm_start=True"),
               "column 'size=3' and warm_start = TRUE")
})

test_that("the divergence warnings of an ensemble's networks are one message", {
  skip_if_no_python_neumiss()
  adapter <- neumiss:::.adapter()
  reports <- c(
    "NeuMissRegressor(depth=2): no epoch beat the constant predictor on validation (loss 1.2)",
    "NeuMissRegressor[2](depth=2): training diverged 1 time(s), first at epoch 3 (nan loss)",
    "NeuMissRegressor[4](depth=2): training diverged 2 time(s), first at epoch 1 (nan loss)"
  )
  msg <- adapter$`_divergence_message`(as.list(reports), 5L)
  expect_length(msg, 1)
  expect_match(msg, "training diverged in 2 of the 5 networks of the ensemble", fixed = TRUE)
  expect_match(msg, "in 1 of the 5 networks of the ensemble, no epoch beat", fixed = TRUE)
  expect_match(msg, "learning_rate")
  expect_false(grepl("NeuMiss|\\[|depth=", msg))
  single <- adapter$`_divergence_message`(list(reports[1]), 1L)
  expect_match(single, "^in the network, no epoch beat the constant predictor")
  expect_match(single, "max_epochs")
  overfitted <- adapter$`_divergence_message`(list(paste(
    "NeuMissRegressor(depth=0): training overfitted 1 time(s), first at epoch 4",
    "(validation loss above the constant predictor's (1) for 3 epochs); no epoch beat the",
    "constant predictor on validation (loss 1)")), 1L)
  expect_match(overfitted, "^training overfitted in the network")
  expect_match(overfitted, "more rows, some weight_decay or informative predictors")
  expect_false(grepl("diverged|learning_rate", overfitted))
})

test_that("a fit gives one warning per problem, without Python names", {
  skip_if_no_python_neumiss()
  set.seed(2)
  # pure noise, an empty column: the networks cannot beat the constant predictor
  df <- data.frame(a = rnorm(120), b = rnorm(120), d = NA_real_, y = rnorm(120))
  warnings <- character()
  withCallingHandlers(
    neumiss(y ~ ., data = df, max_epochs = 3, ensemble_size = 3L, seed = 1),
    warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  expect_false(any(grepl("NeuMiss[A-Z]|\\[\\d+\\]|\\['|depth=", warnings)),
               info = paste(warnings, collapse = "\n"))
  expect_lte(sum(grepl("no epoch beat|diverged", warnings)), 1)
  expect_true(any(grepl("'d'", warnings)), info = paste(warnings, collapse = "\n"))
})

test_that("the interval settings a message names are arguments of neumiss()", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 520, d = 3)  # 500 rows or more: a split, 130 calibration rows
  err <- expect_error(neumiss(data$x, data$y, max_epochs = 1, interval = TRUE, level = 0.99),
                      "calibration_fraction")
  msg <- conditionMessage(err)
  expect_match(msg, "level = 0.99 needs at least")
  expect_false(grepl("alpha|NeuMiss[A-Z]|Conformal", msg))
  # what the message suggests is accepted: more calibration rows, a lower confidence
  # (one epoch may not beat the constant predictor: that warning is not the point here)
  fit <- suppressWarnings(neumiss(data$x, data$y, max_epochs = 1, depth = 1, seed = 1,
                                  interval = TRUE, level = 0.99, calibration_fraction = 0.6,
                                  calibration_confidence = 0.5))
  expect_equal(fit$n_calibration, 312L)
  py <- neumiss:::.estimator(fit)
  expect_equal(py$calibration_fraction, 0.6)
  expect_equal(py$calibration_confidence, 0.5)
  expect_error(neumiss(data$x, data$y, interval = TRUE, calibration_fraction = 1),
               "`calibration_fraction` must be a number strictly between 0 and 1")
  expect_error(neumiss(data$x, data$y, interval = TRUE, calibration_confidence = "a"),
               "`calibration_confidence` must be a number strictly between 0 and 1 or NULL")
})
