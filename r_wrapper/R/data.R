# Checking and converting user data.
#
# Predictors become a "table": a named list of columns, each a double vector
# (numeric, NA = missing) or a factor (categorical, NA = missing), with the kind
# of each column. Numbers and logicals (TRUE = 1) are numeric; factors and
# character vectors are categorical, one-hot encoded by the Python estimator, a
# missing value marking the whole group missing; the NA level of a factor made by
# addNA() is a category, "<NA>", not a missing value. An ordered factor is numeric:
# the scores 1, 2, ... of its levels (kept in the attribute "ordered_levels"), so its
# order is used. A column that is entirely NA (logical in R whatever was meant) is
# numeric: it carries no value.

#: The label of the category made of a factor's NA level (addNA()).
.na_level <- "<NA>"

.is_all_na <- function(col) {
  is.atomic(col) && length(col) > 0 && all(is.na(col))
}

# The columns (a named list) made from one R column `col` called `name`.
.table_columns <- function(col, name, arg) {
  if (inherits(col, c("Date", "POSIXt", "difftime"))) {
    .abort("`%s`: column '%s' holds dates or times (%s): convert it to numbers first (e.g. days since a reference date).",
           arg, name, class(col)[1])
  }
  if (is.matrix(col) && (is.numeric(col) || is.logical(col))) {
    # a matrix in a data frame (e.g. poly(x, 2)): one column each, named as by model.matrix()
    suffix <- colnames(col)
    if (is.null(suffix)) suffix <- seq_len(ncol(col))
    out <- lapply(seq_len(ncol(col)), function(j) as.numeric(col[, j]))
    return(stats::setNames(out, paste0(name, suffix)))
  }
  if (!is.null(dim(col)) && length(dim(col)) > 1) {
    .abort("`%s`: column '%s' is a %s with %d columns, which NeuMiss cannot use.",
           arg, name, class(col)[1], NCOL(col))
  }
  if (is.factor(col) && anyNA(levels(col))) {
    levels(col)[is.na(levels(col))] <- .na_level
  }
  if (is.factor(col) && arg != "newdata" && .is_all_na(col)) {
    .abort("`%s`: factor '%s' is NA in every row: it carries nothing to learn from; drop it from the predictors.",
           arg, name)
  }
  value <- if (.is_all_na(col)) {
    rep(NA_real_, length(col))
  } else if (is.ordered(col)) {
    structure(as.numeric(as.integer(col)), ordered_levels = levels(col))
  } else if (is.factor(col)) {
    factor(col, levels = levels(col)[levels(col) %in% as.character(col)], ordered = FALSE)
  } else if (is.character(col)) {
    factor(col)
  } else if (is.numeric(col) || is.logical(col)) {
    as.numeric(col)
  } else {
    .abort("`%s`: column '%s' is of class %s; NeuMiss uses numbers, logicals, factors and characters.",
           arg, name, class(col)[1])
  }
  stats::setNames(list(value), name)
}

.table_kinds <- function(columns) {
  vapply(columns, function(col) if (is.factor(col)) "categorical" else "numeric",
         character(1))
}

# A table from a matrix, vector or data frame of predictors. Attribute "named":
# whether the user supplied the column names (else x1, x2, ...).
.predictor_table <- function(x, arg = "x") {
  if (is.data.frame(x)) {
    if (ncol(x) == 0 || (nrow(x) == 0 && arg != "newdata")) {
      .abort("`%s` is empty (%d rows, %d columns).", arg, nrow(x), ncol(x))
    }
    names_x <- names(x)
    named <- TRUE
    columns <- do.call(c, unname(Map(.table_columns, x, names_x, arg)))
  } else if (is.numeric(x) || is.logical(x)) {
    if (is.null(dim(x))) {
      x <- matrix(x, ncol = 1)
    } else if (length(dim(x)) != 2) {
      .abort("`%s` must be a matrix or data frame, not an array with %d dimensions.",
             arg, length(dim(x)))
    }
    if (ncol(x) == 0 || (nrow(x) == 0 && arg != "newdata")) {
      .abort("`%s` is empty (%d rows, %d columns).", arg, nrow(x), ncol(x))
    }
    named <- !is.null(colnames(x))
    names_x <- if (named) colnames(x) else paste0("x", seq_len(ncol(x)))
    columns <- lapply(seq_len(ncol(x)), function(j) as.numeric(x[, j]))
    names(columns) <- names_x
  } else {
    what <- if (is.matrix(x)) paste(typeof(x), "matrix") else class(x)[1]
    .abort("`%s` must be a numeric matrix or data frame, not a %s.", arg, what)
  }
  .check_table(columns, arg)
  structure(columns, named = named)
}

.check_table <- function(columns, arg) {
  names_x <- names(columns)
  if (any(is.na(names_x) | !nzchar(names_x))) {
    .abort("`%s` has columns without a name.", arg)
  }
  if (anyDuplicated(names_x)) {
    .abort("`%s` has duplicated column names: %s.", arg,
           .quote(unique(names_x[duplicated(names_x)])))
  }
  infinite <- vapply(columns, function(col) is.numeric(col) && any(is.infinite(col)),
                     logical(1))
  if (any(infinite)) {
    .abort("`%s` has infinite values in column(s) %s; use NA for missing values.",
           arg, .quote(names_x[infinite]))
  }
  invisible(columns)
}

.table_rows <- function(columns) {
  length(columns[[1]])
}

.table_subset <- function(columns, rows) {
  structure(lapply(columns, `[`, rows), named = attr(columns, "named"))
}

# Share of missing cells of a table.
.missing_rate <- function(columns) {
  mean(vapply(columns, function(col) mean(is.na(col)), numeric(1)))
}

# The table as the Python side's frame() reads it (see inst/python/neumiss_r.py).
# R's NA is a signalling NaN, on which NumPy arithmetic warns: it is sent as NaN.
.table_for_python <- function(columns) {
  spec <- lapply(unname(columns), function(col) {
    if (is.factor(col)) {
      codes <- as.integer(col) - 1L
      codes[is.na(codes)] <- -1L
      list(kind = "categorical", codes = codes, levels = as.list(levels(col)))
    } else {
      list(kind = "numeric", values = .values(col))
    }
  })
  list(names = as.list(names(columns)), columns = spec)
}

# The columns of the formula's terms (main effects only) from a model frame.
# The model frame of a formula method's call, as lm() builds it: `call` is
# match.call(expand.dots = FALSE) and `env` the caller's frame; `fields` are the
# call's arguments that model.frame() takes. Unused factor levels are dropped.
# By default (`default_na`: no na.action given) rows with missing predictors are
# kept (NA = missing, what NeuMiss is for) and rows with a missing response dropped.
.model_frame <- function(call, env, default_na, fields) {
  mf <- call[c(1L, match(fields, names(call), 0L))]
  if (default_na) mf$na.action <- quote(stats::na.pass)
  mf$drop.unused.levels <- TRUE
  mf[[1L]] <- quote(stats::model.frame)
  mf <- tryCatch(eval(mf, env), error = function(e) .model_frame_error(e, call, env))
  if (attr(attr(mf, "terms"), "response") == 0) {
    .abort("the formula has no response (write it as response ~ predictors).")
  }
  if (default_na) mf <- .drop_missing_response(mf)
  mf
}

# R's "object 'x' not found" of a variable of the formula, as an error naming it and
# the columns of `data`; other errors as they are.
.model_frame_error <- function(e, call, env) {
  absent <- regmatches(conditionMessage(e),
                       regexec("object '(.*)' not found", conditionMessage(e)))[[1]]
  if (length(absent) < 2) stop(e)
  data <- if (!is.null(call$data)) tryCatch(eval(call$data, env), error = function(e) NULL)
  where <- if (is.data.frame(data)) {
    sprintf("neither a column of `data` (which has %s) nor a variable", .quote(names(data)))
  } else {
    "not a variable"
  }
  .abort("the formula uses '%s', which is %s in the formula's environment.", absent[2], where)
}

.formula_table <- function(mf, terms, arg = "data") {
  if (!is.null(attr(terms, "offset"))) {
    .abort(paste(
      "offset() terms are not supported: a NeuMiss network has no linear predictor to",
      "add an offset to. Model the ratio as the response, or use the variable as a predictor."
    ))
  }
  labels <- attr(terms, "term.labels")
  if (length(labels) == 0) {
    .abort("the formula has no predictors.")
  }
  if (any(attr(terms, "order") > 1)) {
    .abort(paste(
      "interaction terms (%s) are not supported: the network learns interactions itself",
      "(use mlp_depth > 0 for nonlinear effects), or add a product as I(a * b)."
    ), .quote(labels[attr(terms, "order") > 1], 3L))
  }
  factors <- attr(terms, "factors")
  index <- apply(factors, 2, function(col) which(col > 0)[1])
  columns <- do.call(c, unname(Map(.table_columns, mf[index], names(mf)[index], arg)))
  .check_table(columns, arg)
  structure(columns, named = TRUE)
}

# The response as a numeric vector (regression) or a factor (classification).
.response <- function(y, task, n_rows, name = "y") {
  if (is.data.frame(y) || (!is.null(dim(y)) && ncol(as.matrix(y)) != 1)) {
    .abort("the response `y` must be a vector (one column).")
  }
  y <- if (is.factor(y)) y else as.vector(y)
  if (length(y) != n_rows) {
    .abort("the response `y` has %d values but the predictors have %d rows.",
           length(y), n_rows)
  }
  if (anyNA(y)) {
    rows <- which(is.na(y))
    .abort(paste(
      "the response `y` has %d missing value(s) (row(s) %s): NeuMiss handles missing",
      "predictors, not a missing response; remove those rows (the formula interface",
      "drops them by default)."
    ), length(rows), .quote(rows))
  }
  if (is.null(task)) {
    task <- if (is.numeric(y)) "regression" else "classification"
  }
  task <- match.arg(task, c("regression", "classification"))
  if (task == "regression") {
    if (!is.numeric(y)) {
      .abort("task = \"regression\" needs a numeric response, got a %s.", class(y)[1])
    }
    if (any(is.infinite(y))) {
      .abort("the response `y` has infinite values.")
    }
    return(list(task = task, y = as.numeric(y)))
  }
  if (!(is.factor(y) || is.character(y) || is.logical(y) || is.numeric(y))) {
    .abort("cannot use a %s response for classification.", class(y)[1])
  }
  logical <- is.logical(y)
  y <- if (is.factor(y)) y else if (logical) factor(y, levels = c(FALSE, TRUE)) else factor(y)
  if (nlevels(droplevels(y)) < 2) {
    .abort("the response '%s' has a single class (%s): classification needs at least 2.",
           name, .quote(levels(droplevels(y))))
  }
  list(task = task, y = y, logical = logical)
}

# Case weights: NULL, or one finite non-negative number per row, not all zero.
.case_weights <- function(weights, n_rows) {
  if (is.null(weights)) {
    return(NULL)
  }
  if (!is.numeric(weights) || !is.null(dim(weights)) && NCOL(weights) != 1) {
    .abort("`weights` must be a numeric vector of case weights, one per row.")
  }
  weights <- as.numeric(weights)
  if (length(weights) != n_rows) {
    .abort("`weights` has %d values but the data have %d rows.", length(weights), n_rows)
  }
  bad <- list("NA" = which(is.na(weights)), infinite = which(is.infinite(weights)),
              negative = which(!is.na(weights) & weights < 0))
  bad <- bad[lengths(bad) > 0]
  if (length(bad)) {
    .abort("`weights` must be finite and non-negative, without NA; %s.",
           paste(sprintf("%s in row(s) %s", names(bad), vapply(bad, .quote, "")),
                 collapse = "; "))
  }
  if (!any(weights > 0)) {
    .abort("`weights` are all zero.")
  }
  weights
}

# newdata as a table with the columns of the fit, in the order of the fit.
.newdata_table <- function(object, newdata) {
  if (!is.null(object$terms)) {
    if (!is.data.frame(newdata)) {
      if (!is.list(newdata)) {
        .abort("`newdata` must be a data frame for a model fitted with a formula.")
      }
      newdata <- as.data.frame(newdata, optional = TRUE)
    }
    terms <- stats::delete.response(object$terms)
    absent <- setdiff(all.vars(terms), names(newdata))
    if (length(absent)) {
      .abort("`newdata` lacks the variable(s) %s used at fit.", .quote(absent))
    }
    mf <- stats::model.frame(terms, newdata, na.action = stats::na.pass)
    table <- .formula_table(mf, terms, "newdata")
  } else {
    table <- .predictor_table(newdata, "newdata")
  }
  .conform_table(object, table, is.data.frame(newdata))
}

# Columns of `table` matched to the fit's, by name when both have names; kinds checked.
.conform_table <- function(object, table, frame) {
  fit_names <- object$feature_names
  if (isTRUE(attr(table, "named")) && isTRUE(object$named_features)) {
    absent <- setdiff(fit_names, names(table))
    extra <- setdiff(names(table), fit_names)
    if (length(absent) || (length(extra) && !frame)) {
      .abort(paste0(
        "the columns of `newdata` differ from those used at fit",
        if (length(absent)) sprintf("; missing: %s", .quote(absent)),
        if (length(extra)) sprintf("; not seen at fit: %s", .quote(extra)),
        "."
      ))
    }
    table <- structure(table[fit_names], named = TRUE)
  } else if (length(table) != length(fit_names)) {
    .abort("`newdata` has %d column(s) but the model was fitted on %d (%s).",
           length(table), length(fit_names), .quote(fit_names))
  } else {
    names(table) <- fit_names
  }
  for (name in intersect(names(object$ordered_levels), fit_names)) {
    table[[name]] <- .ordered_scores(table[[name]], object$ordered_levels[[name]], name)
  }
  kinds <- object$column_kinds
  if (!is.null(kinds)) {
    for (name in fit_names) {
      col <- table[[name]]
      if (kinds[[name]] == "numeric" && is.factor(col)) {
        .abort("column '%s' of `newdata` holds categories (%s) but was numeric at fit.",
               name, .quote(levels(col), 3L))
      }
      if (kinds[[name]] == "categorical" && !is.factor(col) && !all(is.na(col))) {
        .abort("column '%s' of `newdata` holds numbers but was a factor or character at fit (levels %s).",
               name, .quote(object$xlevels[[name]], 3L))
      }
    }
  }
  table
}

# The scores of a column of newdata for an ordered factor of the fit, whose levels are
# `levels`: the levels of a factor, ordered or not, or a character column are matched
# by label, as the Python side matches categories: spelled as a level, or equal to one
# once both are stripped of spaces (a level not seen at fit is missing, with a warning
# when such cells are more than Python's UNSEEN_WARNING_SHARE of the observed ones);
# numbers are scores.
.ordered_scores <- function(col, levels, name) {
  labels <- attr(col, "ordered_levels")
  if (is.null(labels) && !is.factor(col)) {
    return(col)
  }
  values <- if (is.factor(col)) as.character(col) else labels[col]
  scores <- match(values, levels)
  spaced <- is.na(scores) & !is.na(values)
  scores[spaced] <- match(trimws(values[spaced]), trimws(levels))
  new <- is.na(scores) & !is.na(values)
  unseen <- unique(values[new])
  if (length(unseen) && sum(new) > .adapter()$UNSEEN_WARNING_SHARE * sum(!is.na(values))) {
    .warn("column '%s' of `newdata` has levels not seen at fit, treated as missing: %s.",
          name, .quote(unseen))
  }
  as.numeric(scores)
}

# The levels of the ordered factors of a table (a named list; empty if none).
.table_ordered_levels <- function(table) {
  levels <- lapply(table, attr, "ordered_levels")
  levels[!vapply(levels, is.null, logical(1))]
}
