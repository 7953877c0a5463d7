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
  expect_equal(predict(fit, data.frame(x = 0, g = c(" a", "b "))), pred[1:2])  # spaces
  expect_warning(unseen <- predict(fit, data.frame(x = 0, g = "z")),
                 "column 'g' has categories not seen at fit, treated as missing: 'z'$")
  expect_identical(unseen, pred[4])
  expect_no_warning(rare <- predict(fit, data.frame(x = 0, g = c("z", rep("a", 39)))))
  expect_identical(rare[1], pred[4])
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

test_that("ordered factors are the scores of their levels, matched by label", {
  skip_if_no_python_neumiss()
  set.seed(4)
  size <- factor(sample(c("S", "M", "L"), 300, TRUE), levels = c("S", "M", "L"),
                 ordered = TRUE)
  df <- data.frame(size = size, x = rnorm(300))
  df$y <- 2 * as.integer(df$size) + df$x + rnorm(300, sd = 0.1)
  df$size[1:20] <- NA
  fit <- neumiss(y ~ size + x, data = df, max_epochs = 30, seed = 1)
  expect_equal(fit$column_kinds, c(size = "numeric", x = "numeric"))
  expect_equal(fit$ordered_levels, list(size = c("S", "M", "L")))
  expect_equal(length(fit$xlevels), 0)
  # one coefficient, the trend over the levels (2 per level)
  expect_named(coef(fit), c("(Intercept)", "size", "x"))
  expect_equal(unname(coef(fit)["size"]), 2, tolerance = 0.15)
  # the levels of newdata are matched by label: another order, a character column
  new <- data.frame(size = factor(c("L", "S", "M"), levels = c("L", "M", "S"), ordered = TRUE),
                    x = 0)
  pred <- predict(fit, new)
  expect_equal(pred, predict(fit, data.frame(size = c("L", "S", "M"), x = 0)))
  expect_equal(diff(pred[c(2, 3, 1)]), c(2, 2), tolerance = 0.3)
  # a label with spaces around it is that level, as in the scorers
  expect_no_warning(spaced <- predict(fit, data.frame(size = c("L ", " S", "M"), x = 0)))
  expect_equal(spaced, pred)
  expect_warning(unseen <- predict(fit, data.frame(size = "XL", x = 0)),
                 "column 'size' of `newdata` has levels not seen at fit, treated as missing: 'XL'")
  expect_equal(unseen, predict(fit, data.frame(size = NA_character_, x = 0)))
  # one unseen label in 40 rows (a rare level of a test fold): missing, without a warning
  expect_no_warning(rare <- predict(fit, data.frame(size = c("XL", rep("M", 39)), x = 0)))
  expect_equal(rare[1], unseen)
})

test_that("the NA level of addNA() is a category of its own", {
  skip_if_no_python_neumiss()
  set.seed(6)
  g <- sample(c("a", "b", NA), 300, TRUE)
  df <- data.frame(g = addNA(factor(g)), x = rnorm(300))
  df$y <- ifelse(is.na(g), 5, ifelse(g == "a", -1, 1)) + 0.1 * df$x
  fit <- neumiss(y ~ g + x, data = df, max_epochs = 40, seed = 1)
  expect_equal(fit$xlevels, list(g = c("a", "b", "<NA>")))
  new <- data.frame(g = addNA(factor(c("a", "b", NA))), x = 0)
  pred <- predict(fit, new)
  expect_equal(pred, c(-1, 1, 5), tolerance = 0.5)
  # a plain NA (no addNA level) is a missing value: not the "<NA>" category
  plain <- predict(fit, data.frame(g = factor(NA, levels = c("a", "b")), x = 0))
  expect_gt(abs(plain - pred[3]), 1)
})

test_that("a factor of more levels than one-hot encoding takes is encoded by target statistics", {
  skip_if_no_python_neumiss()
  set.seed(7)
  n <- 1500
  levels <- sprintf("p%03d", 1:150)
  effect <- stats::setNames(rnorm(150, sd = 2), levels)
  code <- sample(levels, n, replace = TRUE)
  df <- data.frame(postcode = factor(code, levels = levels), x = rnorm(n))
  df$y <- unname(effect[code]) + df$x + rnorm(n, sd = 0.3)
  df$postcode[1:30] <- NA
  # spline = FALSE: per-pattern linear models (coef()) exist only without the ramps
  fit <- neumiss(y ~ postcode + x, data = df, depth = 0, mlp_depth = 0, spline = FALSE,
                 seed = 1)
  statistics <- fit$level_statistics$postcode
  expect_equal(dim(statistics), c(150L, 1L))
  expect_equal(rownames(statistics), levels)
  expect_gt(stats::cor(statistics[, 1], effect), 0.9)  # each level's shrunk mean response
  expect_output(print(summary(fit)), "postcode \\(150 levels, target statistics\\)")
  # coef(): one contrast per level, as for a one-hot factor, that predict() agrees with
  beta <- coef(fit)
  expect_equal(names(beta), c("(Intercept)", paste0("postcode", levels[-1]), "x"))
  new <- data.frame(postcode = c("p001", "p002", "p150"), x = 0)
  pred <- predict(fit, new)
  expect_equal(pred[2:3] - pred[1], unname(beta[c("postcodep002", "postcodep150")]),
               tolerance = 1e-5)
  expect_gt(r_squared(df$y[-(1:30)], fitted(fit)[-(1:30)]), 0.8)
})
