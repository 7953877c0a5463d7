# A response that depends on a factor: only a model that uses the factor fits it.
factor_data <- function(n = 300, seed = 1) {
  set.seed(seed)
  g <- factor(sample(c("a", "b", "c"), n, replace = TRUE), levels = c("c", "a", "b"))
  x <- rnorm(n)
  y <- c(a = -2, b = 0, c = 2)[as.character(g)] + 0.5 * x + rnorm(n, sd = 0.1)
  df <- data.frame(x = x, g = g, s = as.character(g), flag = x > 0, y = unname(y))
  df$x[sample(n, 30)] <- NA
  df
}

test_that("factors with NA are one-hot encoded, levels stored, and used", {
  skip_if_no_python_neumiss()
  df <- factor_data()
  df$g[1:20] <- NA
  fit <- neumiss(y ~ x + g, data = df, max_epochs = 40, seed = 1)
  expect_equal(fit$column_kinds, c(x = "numeric", g = "categorical"))
  expect_equal(fit$xlevels, list(g = c("c", "a", "b")))
  expect_equal(names(coef(fit)), c("(Intercept)", "x", "ga", "gb"))
  expect_gt(r_squared(df$y[-(1:20)], fitted(fit)[-(1:20)]), 0.95)
  # an NA factor value is a missing value: a prediction, between the group means
  na_rows <- fitted(fit)[1:20]
  expect_false(anyNA(na_rows))
  expect_true(all(na_rows > -2.5 & na_rows < 2.5))
  # predict with other level order, a character column or an unseen level
  newdata <- data.frame(x = c(0, 0, 0, 0), g = c("a", "b", "c", NA))
  pred <- predict(fit, newdata)
  expect_equal(pred[1:3], c(-2, 0, 2), tolerance = 0.3)
  expect_identical(predict(fit, transform(newdata, g = factor(g, levels = c("b", "a", "c")))),
                   pred)
  expect_warning(unseen <- predict(fit, data.frame(x = 0, g = "z")),
                 "column 'g' has categories not seen at fit, treated as missing: 'z'$")
  expect_identical(unseen, pred[4])
  # an all-NA column (logical in R) where the fit had a factor
  expect_identical(predict(fit, data.frame(x = 0, g = NA)), pred[4])
  expect_error(predict(fit, data.frame(x = 0, g = 1)),
               "column 'g' of `newdata` holds numbers but was a factor or character at fit")
})

test_that("characters are categorical, logicals numeric; matrix interface too", {
  skip_if_no_python_neumiss()
  df <- factor_data()
  by_formula <- neumiss(y ~ x + s + flag, data = df, max_epochs = 5, seed = 2)
  expect_equal(by_formula$column_kinds,
               c(x = "numeric", s = "categorical", flag = "numeric"))
  expect_equal(by_formula$xlevels, list(s = c("a", "b", "c")))
  by_frame <- neumiss(df[c("x", "s", "flag")], df$y, max_epochs = 5, seed = 2)
  expect_identical(unname(fitted(by_frame)), unname(fitted(by_formula)))
  # columns in another order are matched by name
  expect_identical(predict(by_frame, df[c("flag", "s", "x")]), predict(by_frame, df))
  # a long character column in newdata where numbers were expected: a short error
  bad <- df
  bad$x <- paste0("value-", seq_len(nrow(df)))
  err <- tryCatch(predict(by_frame, bad), error = conditionMessage)
  expect_match(err, "column 'x' of `newdata` holds categories \\('value-1', 'value-10', 'value-100', ... \\(300 in all\\)\\)")
  expect_lt(nchar(err), 200)
})

test_that("classification with factor predictors", {
  skip_if_no_python_neumiss()
  df <- factor_data(n = 400)
  df$cls <- factor(ifelse(df$y > 0.5, "high", "low"))
  df$g[5:15] <- NA
  fit <- neumiss(cls ~ x + g, data = df, max_epochs = 30, seed = 1)
  expect_gt(mean(fitted(fit, type = "class") == df$cls), 0.9)
  # as glm's fitted(): the probability of the second level
  expect_equal(fitted(fit), fitted(fit, type = "prob")[, "low"])
  expect_equal(unname(fitted(fit) > 0.5), fitted(fit, type = "class") == "low")
  expect_equal(colnames(predict(fit, df[1:3, ], type = "prob")), c("high", "low"))
  expect_error(residuals(fit), "regression only")
})
