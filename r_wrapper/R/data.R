# Checking and converting user data. Predictors must be numeric (logical counts as
# 0/1); NA (or NaN) marks a missing value. Factor and character predictors are
# refused: NeuMiss models continuous features, encode them first if wanted.

.quote <- function(x) {
  paste0("'", x, "'", collapse = ", ")
}

.check_numeric_columns <- function(df, arg) {
  ok <- vapply(df, function(col) is.numeric(col) || is.logical(col), logical(1))
  if (!all(ok)) {
    kinds <- vapply(df[!ok], function(col) class(col)[1], character(1))
    stop(sprintf(
      "`%s` has non-numeric column(s) %s (%s): NeuMiss needs numeric predictors, with NA for missing values. Encode them as numbers first (e.g. with model.matrix()) or drop them.",
      arg, .quote(names(df)[!ok]), paste(kinds, collapse = ", ")
    ), call. = FALSE)
  }
}

# A double matrix with column names from a numeric matrix, data frame or vector.
# Attribute "named": whether the user supplied the column names.
.predictor_matrix <- function(x, arg = "x") {
  if (is.data.frame(x)) {
    .check_numeric_columns(x, arg)
    x <- as.matrix(x)  # a matrix column m becomes columns m.1, m.2, ...
    names_x <- colnames(x)
    x <- matrix(as.numeric(x), nrow = nrow(x), ncol = ncol(x))
  } else if (is.numeric(x) || is.logical(x)) {
    if (is.null(dim(x))) {
      x <- matrix(x, ncol = 1)
    } else if (length(dim(x)) != 2) {
      stop(sprintf("`%s` must be a matrix or data frame, not an array with %d dimensions.",
                   arg, length(dim(x))), call. = FALSE)
    }
    names_x <- colnames(x)
    x <- matrix(as.numeric(x), nrow = nrow(x), ncol = ncol(x))
  } else {
    what <- if (is.matrix(x)) paste(typeof(x), "matrix") else class(x)[1]
    stop(sprintf("`%s` must be a numeric matrix or data frame, not a %s.", arg, what),
         call. = FALSE)
  }
  if (nrow(x) == 0 || ncol(x) == 0) {
    stop(sprintf("`%s` is empty (%d rows, %d columns).", arg, nrow(x), ncol(x)),
         call. = FALSE)
  }
  named <- !is.null(names_x)
  if (!named) {
    names_x <- paste0("x", seq_len(ncol(x)))
  }
  if (anyDuplicated(names_x)) {
    stop(sprintf("`%s` has duplicated column names: %s.", arg,
                 .quote(unique(names_x[duplicated(names_x)]))), call. = FALSE)
  }
  infinite <- colSums(is.infinite(x)) > 0
  if (any(infinite)) {
    stop(sprintf("`%s` has infinite values in column(s) %s; use NA for missing values.",
                 arg, .quote(names_x[infinite])), call. = FALSE)
  }
  colnames(x) <- names_x
  structure(x, named = named)
}

# The response as a numeric vector (regression) or a factor (classification).
.response <- function(y, task, n_rows) {
  if (is.data.frame(y) || (!is.null(dim(y)) && ncol(as.matrix(y)) != 1)) {
    stop("the response `y` must be a vector (one column).", call. = FALSE)
  }
  y <- if (is.factor(y)) y else as.vector(y)
  if (length(y) != n_rows) {
    stop(sprintf("the response `y` has %d values but the predictors have %d rows.",
                 length(y), n_rows), call. = FALSE)
  }
  if (anyNA(y)) {
    rows <- which(is.na(y))
    stop(sprintf(
      "the response `y` has %d missing value(s) (row(s) %s): NeuMiss handles missing predictors, not a missing response; remove those rows.",
      length(rows), paste(utils::head(rows, 10), collapse = ", ")
    ), call. = FALSE)
  }
  if (is.null(task)) {
    task <- if (is.numeric(y)) "regression" else "classification"
  }
  task <- match.arg(task, c("regression", "classification"))
  if (task == "regression") {
    if (!is.numeric(y)) {
      stop(sprintf("task = \"regression\" needs a numeric response, got a %s.",
                   class(y)[1]), call. = FALSE)
    }
    if (any(is.infinite(y))) {
      stop("the response `y` has infinite values.", call. = FALSE)
    }
    return(list(task = task, y = as.numeric(y)))
  }
  if (!(is.factor(y) || is.character(y) || is.logical(y) || is.numeric(y))) {
    stop(sprintf("cannot use a %s response for classification.", class(y)[1]),
         call. = FALSE)
  }
  y <- if (is.factor(y)) y else factor(y)
  if (nlevels(droplevels(y)) < 2) {
    stop("classification needs at least 2 classes in the response `y`.", call. = FALSE)
  }
  list(task = task, y = y)
}

# newdata as a matrix with the columns of the fit, in the order of the fit.
.newdata_matrix <- function(object, newdata) {
  if (!is.null(object$terms)) {
    if (!is.data.frame(newdata) && !is.list(newdata)) {
      stop("`newdata` must be a data frame for a model fitted with a formula.",
           call. = FALSE)
    }
    absent <- setdiff(all.vars(object$terms), names(newdata))
    if (length(absent)) {
      stop(sprintf("`newdata` lacks the variable(s) %s used at fit.", .quote(absent)),
           call. = FALSE)
    }
    mf <- stats::model.frame(object$terms, newdata, na.action = stats::na.pass)
    newdata <- stats::model.matrix(object$terms, mf)
  }
  x <- .predictor_matrix(newdata, "newdata")
  fit_names <- object$feature_names
  if (attr(x, "named") && object$named_features) {
    absent <- setdiff(fit_names, colnames(x))
    extra <- setdiff(colnames(x), fit_names)
    if (length(absent) || length(extra)) {
      stop(paste0(
        "the columns of `newdata` differ from those used at fit",
        if (length(absent)) sprintf("; missing: %s", .quote(absent)),
        if (length(extra)) sprintf("; not seen at fit: %s", .quote(extra)),
        "."
      ), call. = FALSE)
    }
    x <- x[, fit_names, drop = FALSE]
  } else if (ncol(x) != length(fit_names)) {
    stop(sprintf("`newdata` has %d column(s) but the model was fitted on %d (%s).",
                 ncol(x), length(fit_names), paste(fit_names, collapse = ", ")),
         call. = FALSE)
  }
  x
}
