test_that("fitted, residuals, nobs, formula, terms, model.frame and predict()", {
  skip_if_no_python_neumiss()
  fit <- neumiss(Ozone ~ Solar.R + Wind + Temp, data = airquality, max_epochs = 20, seed = 1)
  used <- !is.na(airquality$Ozone)
  expect_equal(unname(fitted(fit)), predict(fit, airquality[used, ]))
  expect_equal(residuals(fit), airquality$Ozone[used] - fitted(fit), ignore_attr = TRUE)
  expect_equal(unname(residuals(fit) + fitted(fit)), airquality$Ozone[used])
  expect_identical(predict(fit), fitted(fit))
  expect_equal(nobs(fit), sum(used))
  expect_equal(formula(fit), Ozone ~ Solar.R + Wind + Temp, ignore_attr = TRUE)
  expect_s3_class(terms(fit), "terms")
  mf <- model.frame(fit)
  expect_equal(nrow(mf), sum(used))
  expect_equal(names(mf), c("Ozone", "Solar.R", "Wind", "Temp"))
  no_frame <- neumiss(Ozone ~ Wind, data = airquality, max_epochs = 10, seed = 1, model = FALSE)
  expect_error(model.frame(no_frame), "not kept")
  expect_error(predict(fit, airquality, interval = "prediction"), "fitted without intervals")
  matrix_fit <- neumiss(as.matrix(airquality[used, 2:4]), airquality$Ozone[used],
                        max_epochs = 10, seed = 1)
  expect_error(formula(matrix_fit), "not a formula")
  expect_error(model.frame(matrix_fit), "no model frame")
  expect_length(fitted(matrix_fit), sum(used))
})

test_that("update() changes the formula or the arguments", {
  skip_if_no_python_neumiss()
  fit <- neumiss(Ozone ~ ., data = airquality, max_epochs = 3, seed = 1)
  smaller <- update(fit, . ~ . - Solar.R)
  expect_equal(smaller$feature_names, c("Wind", "Temp", "Month", "Day"))
  expect_equal(formula(smaller), Ozone ~ Wind + Temp + Month + Day, ignore_attr = TRUE)
  longer <- update(fit, max_epochs = 4, subset = Month > 6)
  expect_equal(longer$params$max_epochs, 4L)
  expect_equal(nobs(longer), sum(airquality$Month > 6 & !is.na(airquality$Ozone)))
  # same call, same seed: same model
  expect_identical(fitted(update(fit)), fitted(fit))
})

test_that("summary reports training and validation rows; warns when validation is tiny", {
  skip_if_no_python_neumiss()
  set.seed(5)
  small <- data.frame(x = rnorm(30), z = rnorm(30))
  small$y <- small$x + rnorm(30, sd = 0.1)
  small$y[1:10] <- NA
  # (20 rows: the fit itself may warn that it does no better than a constant)
  fit <- suppressWarnings(neumiss(y ~ x + z, data = small, max_epochs = 3, seed = 1))
  expect_warning(s <- summary(fit), "the validation metric rests on 2 row\\(s\\) only")
  expect_equal(c(s$n_obs, s$n_train, s$n_valid, s$n_deleted), c(20L, 18L, 2L, 10L))
  expect_output(print(s), "Rows: 20 used: 18 training, 2 validation \\(10 deleted: missing response\\)")
  expect_output(print(s), "Validation R\\^2: .* \\(2 rows\\)")
  expect_output(print(s), "Training R\\^2: .* \\(all 20 rows, in-sample\\)")
  # An ensemble validates out of fold by default: every row trains and validates.
  oof <- suppressWarnings(neumiss(y ~ x + z, data = small, max_epochs = 3, seed = 1,
                                  ensemble_size = 4))
  s <- summary(oof)
  expect_equal(c(s$n_train, s$n_valid), c(20L, 20L))
  expect_equal(s$validation_scheme, "out_of_fold")
  expect_output(print(s), "20 training, 20 validation, out of fold: each scored by the member")
  # print() says how many rows the validation used, and warns too
  expect_warning(out <- capture.output(print(fit)), "rests on 2 row\\(s\\) only")
  expect_match(out, "Rows: 20 \\(18 training, 2 validation\\); 10 deleted", all = FALSE)
  expect_match(out, "Validation R\\^2: .* \\(2 rows\\)$", all = FALSE)
  # (noise: the fit may warn that it does no better than a constant)
  big <- suppressWarnings(neumiss(data.frame(x = rnorm(300)), rnorm(300), max_epochs = 2,
                                  seed = 1))
  expect_silent(capture.output(print(big)))
  expect_output(print(big), "Validation R\\^2: .* \\(30 rows\\)")
  # fewer rows than the minimum are refused, with the minimum in the message
  expect_error(neumiss(y ~ x + z, data = small[1:25, ]),
               "too few rows to fit a NeuMiss network: 15 with a response .*at least 20")
  expect_error(neumiss(small$x[11:30], small$y[11:30], weights = rep(0:1, 10)),
               ": 10 with a response \\(and a non-zero weight\\), at least 20")
  none <- suppressWarnings(neumiss(y ~ x + z, data = small, max_epochs = 3, seed = 1,
                                   validation_fraction = 0))
  expect_silent(s0 <- summary(none))
  expect_output(print(s0), "none \\(validation_fraction = 0\\)")
})

test_that("tidy, glance and augment", {
  skip_if_no_python_neumiss()
  aq <- airquality
  aq$Month <- factor(month.abb[aq$Month])
  fit <- neumiss(Ozone ~ Solar.R + Wind + Month, data = aq, max_epochs = 5, seed = 1)
  td <- tidy(fit)
  expect_named(td, c("pattern", "n", "term", "estimate"))
  # the complete rows (111), then the rows without Solar.R (5)
  expect_equal(unique(td$pattern), c("none", "Solar.R"))
  expect_equal(unique(td$n), c(111L, 5L))
  months <- sort(unique(aq$Month))
  expect_equal(td$term[td$pattern == "none"],
               c("(Intercept)", "Solar.R", "Wind", paste0("Month", months[-1])))
  expect_equal(td$estimate[td$pattern == "Solar.R"], unname(coef(fit, pattern = "Solar.R")))
  gl <- suppressWarnings(glance(fit))
  expect_equal(nrow(gl), 1)
  expect_equal(gl$nobs, 116L)
  expect_equal(gl$n_train + gl$n_valid, 116L)
  expect_equal(gl$validation, fit$validation_score)
  expect_equal(gl$training, r_squared(aq$Ozone[!is.na(aq$Ozone)], fitted(fit)))
  au <- augment(fit)
  expect_equal(nrow(au), 116)
  expect_equal(au$.fitted, unname(fitted(fit)))
  expect_equal(au$.resid, unname(residuals(fit)))
  au_new <- augment(fit, newdata = aq[1:5, ])
  expect_equal(au_new$.fitted, predict(fit, aq[1:5, ]))
  expect_equal(au_new$.resid, aq$Ozone[1:5] - au_new$.fitted)
  expect_error(augment(fit, data = aq), "153 rows but the fit has 116")
})

test_that("the README's boys session runs (mice's data: factors with NA)", {
  skip_if_no_python_neumiss()
  skip_if_not_installed("mice")
  boys <- mice::boys
  fit <- neumiss(tv ~ ., data = boys, max_epochs = 10, seed = 1)
  expect_equal(nobs(fit), sum(!is.na(boys$tv)))
  expect_equal(names(fit$xlevels), "reg")
  expect_equal(fit$ordered_levels, list(gen = levels(boys$gen), phb = levels(boys$phb)))
  expect_gt(suppressWarnings(summary(fit))$validation, 0.5)
  newdata <- boys[c(700, 740), ]
  newdata$gen[1] <- NA
  expect_false(anyNA(predict(fit, newdata)))
})
