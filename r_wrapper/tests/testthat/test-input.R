test_that("factor and character predictors are refused, naming the columns", {
  data <- simulate_data(n = 50)
  df <- data.frame(data$x, group = factor(rep(c("a", "b"), 25)),
                   label = rep("z", 50))
  expect_error(neumiss(df, data$y), "'group', 'label' \\(factor, character\\)")
  expect_error(neumiss(y ~ ., data = data.frame(df, y = data$y)), "'group', 'label'")
  expect_error(neumiss(matrix(letters[1:6], 3), 1:3), "not a character matrix")
  expect_error(neumiss(list(a = 1), 1), "numeric matrix or data frame")
})

test_that("NA in the response is an error naming the rows", {
  data <- simulate_data(n = 50)
  y <- data$y
  y[c(3, 7)] <- NA
  expect_error(neumiss(data$x, y), "2 missing value\\(s\\) \\(row\\(s\\) 3, 7\\)")
  expect_error(neumiss(y ~ ., data = data.frame(data$x, y = y)), "row\\(s\\) 3, 7")
  expect_error(neumiss(data$x, factor(ifelse(is.na(y), NA, "a"))), "missing value")
})

test_that("other bad inputs give clear R errors", {
  data <- simulate_data(n = 50)
  expect_error(neumiss(data$x, data$y[-1]), "50 rows")
  x <- data$x
  x[2, 3] <- Inf
  expect_error(neumiss(x, data$y), "infinite values in column\\(s\\) 'v3'")
  expect_error(neumiss(data$x[0, ], numeric(0)), "empty")
  expect_error(neumiss(data$x, rep("a", 50)), "at least 2 classes")
  expect_error(neumiss(data$x, data$y, task = "survival"), "should be one of")
  expect_error(neumiss(y ~ 1, data = data.frame(y = 1:3)), "no predictors")
  dup <- data$x
  colnames(dup) <- c("a", "a", "b", "c")
  expect_error(neumiss(dup, data$y), "duplicated column names: 'a'")
})

test_that("newdata columns must match those of the fit", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 100)
  fit <- neumiss(data$x, data$y, max_epochs = 2, seed = 1)
  renamed <- data$x
  colnames(renamed)[2] <- "w2"
  expect_error(predict(fit, renamed), "missing: 'v2'; not seen at fit: 'w2'")
  expect_error(predict(fit, data$x[, 1:3]), "missing: 'v4'")
  expect_error(predict(fit, unname(data$x[, 1:3])), "3 column\\(s\\) but the model was fitted on 4")
  expect_error(predict(fit, data.frame(data$x, g = "a")), "non-numeric column\\(s\\) 'g'")
  expect_error(predict(fit), "`newdata` is required")
  # unnamed newdata is taken in the order of the fit
  expect_identical(predict(fit, unname(data$x)), predict(fit, data$x))
})

test_that("errors raised in Python arrive as R errors without traceback", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 100)
  err <- tryCatch(neumiss(data$x, data$y, learning_rate = -1), error = identity)
  expect_match(conditionMessage(err), "^fitting the NeuMiss model failed: NeuMissRegressor: learning_rate must be")
  expect_no_match(conditionMessage(err), "Traceback|File \"")
  expect_null(conditionCall(err))
})

test_that("Python warnings become R warnings", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 100)
  x <- data$x
  x[, "v3"] <- NA
  expect_warning(fit <- neumiss(x, data$y, max_epochs = 2, seed = 1),
                 "missing in every training row")
  expect_length(predict(fit, x), 100)
})
