test_that("the formula drops rows with an NA response and keeps NA predictors", {
  skip_if_no_python_neumiss()
  fit <- neumiss(Ozone ~ ., data = airquality, max_epochs = 5, seed = 1)
  missing_y <- which(is.na(airquality$Ozone))
  expect_equal(nobs(fit), 116L)
  expect_s3_class(fit$na.action, "omit")
  expect_equal(unname(unclass(fit$na.action)), missing_y)
  expect_equal(names(fit$na.action), as.character(missing_y))
  # rows with NA Solar.R are kept and get fitted values
  kept_na <- setdiff(which(is.na(airquality$Solar.R)), missing_y)
  expect_length(kept_na, 5)
  expect_false(anyNA(fitted(fit)[as.character(kept_na)]))
  expect_equal(names(fitted(fit)), setdiff(rownames(airquality), missing_y))
  expect_equal(c(fit$n_train, fit$n_valid), c(104L, 12L))
  expect_warning(  # 12 validation rows: print() warns that the metric is unreliable
    expect_output(print(fit),
                  "Rows: 116 \\(104 training, 12 validation\\); 37 deleted \\(missing response\\)"),
    "rests on 12 row")

  # the issue's example: an all-NA column is logical in R, and still a missing value
  one <- data.frame(Solar.R = NA, Wind = 10, Temp = 80, Month = 6, Day = 1)
  expect_identical(predict(fit, one), predict(fit, transform(one, Solar.R = NA_real_)))
  expect_false(is.na(predict(fit, one)))
})

test_that("subset, na.action and weights are evaluated like lm's", {
  skip_if_no_python_neumiss()
  # Two epochs on ~80 rows may not beat the constant predictor (a DivergenceWarning):
  # these fits only check which rows are used.
  sub <- suppressWarnings(neumiss(Ozone ~ Wind + Temp, data = airquality, subset = Month > 5,
                                  max_epochs = 2, seed = 1))
  expect_equal(nobs(sub), sum(airquality$Month > 5 & !is.na(airquality$Ozone)))
  omit <- neumiss(Ozone ~ ., data = airquality, na.action = na.omit, max_epochs = 2, seed = 1)
  expect_equal(nobs(omit), nrow(na.omit(airquality)))
  exclude <- neumiss(Ozone ~ ., data = airquality, na.action = na.exclude, max_epochs = 20,
                     seed = 1)
  expect_length(fitted(exclude), nrow(airquality))
  expect_equal(sum(is.na(residuals(exclude))), nrow(airquality) - 111L)
  # weights are found in data; an NA weight drops its row as an NA response does
  aq <- transform(airquality, w = ifelse(Month == 5, NA, 1))
  weighted <- suppressWarnings(neumiss(Ozone ~ Wind + Temp, data = aq, weights = w,
                                       max_epochs = 2, seed = 1))
  expect_equal(nobs(weighted), sum(!is.na(aq$w) & !is.na(aq$Ozone)))
  expect_equal(length(weights(weighted)), nobs(weighted))
  # data may be omitted: the variables come from the formula's environment
  x1 <- c(1, NA, 3:20)
  y1 <- x1 * 2
  y1[2] <- 4
  expect_equal(nobs(suppressWarnings(neumiss(y1 ~ x1, max_epochs = 1, seed = 1))), 20L)
})

test_that("case weights change the fit; unit weights do not", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 300, d = 2, seed = 3)
  df <- data.frame(data$x, y = data$y)
  plain <- neumiss(y ~ ., data = df, max_epochs = 20, seed = 2)
  ones <- neumiss(y ~ ., data = df, weights = rep(1, 300), max_epochs = 20, seed = 2)
  expect_equal(fitted(ones), fitted(plain), tolerance = 1e-5)
  # weight the rows of high y: the fit moves towards them
  w <- ifelse(df$y > median(df$y), 20, 1)
  heavy <- neumiss(y ~ ., data = df, weights = w, max_epochs = 20, seed = 2)
  high <- df$y > median(df$y)
  expect_lt(mean(abs(residuals(heavy)[high])), mean(abs(residuals(plain)[high])))
  expect_gt(mean(abs(residuals(heavy)[!high])), mean(abs(residuals(plain)[!high])))
  expect_error(neumiss(y ~ ., data = df, weights = rep(-1, 300)), "non-negative")
  expect_error(neumiss(y ~ ., data = df, weights = rep(0, 300)), "all zero")
  expect_error(neumiss(data$x, data$y, weights = 1:3), "`weights` has 3 values")
  expect_error(neumiss(y ~ ., data = df, weights = rep("a", 300)), "numeric vector")
})

test_that("offset() and interactions are refused with clear errors", {
  expect_error(neumiss(Ozone ~ Wind + offset(log(Temp)), data = airquality),
               "offset\\(\\) terms are not supported")
  expect_error(neumiss(Ozone ~ Wind, data = airquality, offset = log(airquality$Temp)),
               "`offset` is not supported")
  expect_error(neumiss(Ozone ~ Wind * Temp, data = airquality),
               "interaction terms \\('Wind:Temp'\\) are not supported")
  expect_error(neumiss(~ Wind, data = airquality), "no response")
})

test_that("transformations and matrix terms become named columns", {
  skip_if_no_python_neumiss()
  fit <- neumiss(Ozone ~ log(Wind) + poly(Temp, 2) + I(Month > 6), data = airquality,
                 max_epochs = 20, seed = 1)
  expect_equal(fit$feature_names,
               c("log(Wind)", "poly(Temp, 2)1", "poly(Temp, 2)2", "I(Month > 6)"))
  # poly()'s coefficients of the training data are reused on new data (predvars)
  pred <- predict(fit, airquality[1:3, ])
  expect_equal(pred, unname(fitted(fit)[c("1", "2", "3")]))
})

test_that("set.seed() governs fits without a seed; the seed used is kept", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 200, d = 3)
  set.seed(10)
  a <- neumiss(data$x, data$y, max_epochs = 10)
  set.seed(10)
  b <- neumiss(data$x, data$y, max_epochs = 10)
  set.seed(11)
  c <- neumiss(data$x, data$y, max_epochs = 10)
  expect_identical(fitted(a), fitted(b))
  expect_false(identical(fitted(a), fitted(c)))
  expect_equal(a$seed, b$seed)
  again <- neumiss(data$x, data$y, max_epochs = 10, seed = a$seed)
  expect_identical(fitted(again), fitted(a))
})
