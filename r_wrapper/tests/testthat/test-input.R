test_that("predictor tables: kinds of columns and what is refused", {
  df <- data.frame(num = c(1.5, NA, 3), int = c(1L, NA, 3L), lgl = c(TRUE, NA, FALSE),
                   fac = factor(c("b", NA, "a"), levels = c("b", "a", "unused")),
                   chr = c("x", NA, "y"), none = NA)
  table <- neumiss:::.predictor_table(df)
  expect_equal(neumiss:::.table_kinds(table),
               c(num = "numeric", int = "numeric", lgl = "numeric", fac = "categorical",
                 chr = "categorical", none = "numeric"))
  expect_identical(table$lgl, c(1, NA, 0))            # logicals are numeric 0/1
  expect_identical(table$none, rep(NA_real_, 3))      # an all-NA column is numeric NaN
  expect_identical(levels(table$fac), c("b", "a"))    # level order kept, unused dropped
  expect_identical(levels(table$chr), c("x", "y"))
  spec <- neumiss:::.table_for_python(table)
  expect_equal(spec$columns[[4]], list(kind = "categorical", codes = c(0L, -1L, 1L),
                                       levels = list("b", "a")))
  expect_error(neumiss:::.predictor_table(data.frame(d = Sys.Date() + 1:3)),
               "'d' holds dates or times \\(Date\\)")
  expect_error(neumiss:::.predictor_table(data.frame(z = complex(3))), "class complex")
  expect_error(neumiss(matrix(letters[1:6], 3), 1:3), "not a character matrix")
  expect_error(neumiss(list(a = 1), 1), "numeric matrix or data frame")
})

test_that("messages stay short: long lists are cut", {
  expect_equal(neumiss:::.quote(c("a", "b")), "'a', 'b'")
  expect_equal(neumiss:::.quote(1:20), "'1', '2', '3', '4', '5', ... (20 in all)")
  long <- strrep("x", 2000)
  expect_lte(nchar(neumiss:::.cut(long)), 400)
  y <- rnorm(50)
  y[1:30] <- NA
  err <- tryCatch(neumiss(matrix(rnorm(50)), y), error = conditionMessage)
  expect_match(err, "30 missing value\\(s\\) \\(row\\(s\\) '1', '2', '3', '4', '5', ... \\(30 in all\\)\\)")
  expect_error(neumiss(matrix(rnorm(50)), rnorm(50), na.action = na.omit),
               "'na.action': argument\\(s\\) of the formula interface")
  expect_error(neumiss(matrix(rnorm(50)), rnorm(50), offset = 1), "`offset` is not supported")
})

test_that("NA in the response of a matrix fit is an error naming the rows", {
  data <- simulate_data(n = 50)
  y <- data$y
  y[c(3, 7)] <- NA
  expect_error(neumiss(data$x, y), "2 missing value\\(s\\) \\(row\\(s\\) '3', '7'\\)")
  expect_error(neumiss(data$x, factor(ifelse(is.na(y), NA, "a"))), "missing value")
})

test_that("other bad inputs give clear R errors", {
  data <- simulate_data(n = 50)
  expect_error(neumiss(data$x, data$y[-1]), "50 rows")
  x <- data$x
  x[2, 3] <- Inf
  expect_error(neumiss(x, data$y), "infinite values in column\\(s\\) 'v3'")
  expect_error(neumiss(data$x[0, ], numeric(0)), "empty")
  expect_error(neumiss(data$x, rep("a", 50)), "the response .y. has a single class \\(.a.\\): classification needs at least 2")
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
  # a data frame may carry further columns; a matrix may not
  expect_identical(predict(fit, data.frame(data$x, g = "a")), predict(fit, data$x))
  expect_error(predict(fit, cbind(data$x, g = 1)), "not seen at fit: 'g'")
  # a column of another kind than at fit
  bad <- data.frame(data$x)
  bad$v2 <- factor(ifelse(is.na(bad$v2), NA, "a"))
  expect_error(predict(fit, bad), "column 'v2' of `newdata` holds categories \\('a'\\) but was numeric at fit")
  # unnamed newdata is taken in the order of the fit
  expect_identical(predict(fit, unname(data$x)), predict(fit, data$x))
})

test_that("errors raised in Python arrive as R errors without traceback", {
  skip_if_no_python_neumiss()
  data <- simulate_data(n = 100)
  err <- tryCatch(neumiss(data$x, data$y, learning_rate = -1), error = identity)
  expect_match(conditionMessage(err), "^fitting the NeuMiss model failed: learning_rate must be")
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

test_that("bad input gives one R error naming the column and what was expected", {
  skip_if_no_python_neumiss()
  aq <- airquality
  expect_error(neumiss(Ozone ~ nope + Wind, data = aq),
               paste("the formula uses 'nope', which is neither a column of `data`",
                     "\\(which has 'Ozone'.* nor a variable in the formula's environment"))
  aq$cls <- factor("only")
  expect_error(neumiss(cls ~ Wind, data = aq),
               "the response 'cls' has a single class \\('only'\\): classification needs at least 2")
  aq$empty <- factor(NA, levels = c("a", "b"))
  expect_error(neumiss(Ozone ~ Wind + empty, data = aq),
               "factor 'empty' is NA in every row: it carries nothing to learn from")
  w <- ifelse(aq$Month == 5, -1, 1)
  w[40] <- Inf
  expect_error(neumiss(Ozone ~ Wind, data = aq, weights = w),
               "without NA; infinite in row\\(s\\) '[0-9]+'; negative in row\\(s\\) '1', '2',")
  expect_error(neumiss(aq[, c("Wind", "Temp")], aq$Temp, weights = c(NA, rep(1, 152))),
               "NA in row\\(s\\) '1'")
  fit <- suppressWarnings(neumiss(Ozone ~ Wind + Temp, data = airquality, max_epochs = 2,
                                  seed = 1))
  expect_error(predict(fit, data.frame(Wind = "a", Temp = 3)),
               "column 'Wind' of `newdata` holds categories \\('a'\\) but was numeric at fit")
})
