#' Fit a NeuMiss network
#'
#' Fits a NeuMiss network (Le Morvan et al., NeurIPS 2020) with the Python
#' package `neumiss` (`NeuMissRegressor` or `NeuMissClassifier`). Predictors
#' may contain missing values (`NA`): the network learns to predict from the
#' observed values of every row, without imputing them first.
#'
#' @section Predictors:
#' * Numeric and integer columns are used as they are; logical columns are
#'   numeric (`TRUE` = 1). A column that is `NA` in every row (which R makes
#'   logical) is a numeric column with every value missing.
#' * Factors and character columns are categorical: the Python
#'   estimator one-hot encodes them, one column per level seen at fit. A
#'   factor of more than 100 levels is still one-hot encoded (up to 250 levels)
#'   when it has 20 rows per level; a factor of more levels (a postcode, a
#'   product code) is encoded by its levels' target statistics instead: each level's mean response, shrunk
#'   towards the overall mean as far as the level is rare (one column; one per
#'   class beyond two classes), cross-fitted on the training rows so that no
#'   row sees its own response (`level_statistics`). An `NA`
#'   value marks the whole group missing, so the network treats it as a
#'   missing value, not as "none of the levels". The levels are stored in the
#'   fit (`xlevels`). At prediction a level not seen at fit is treated as
#'   missing, with a warning when such values are more than one in twenty of
#'   the column's values. The `NA` level of a factor made by [addNA()] is a
#'   category of its own, named `"<NA>"` (an `NA` value of such a factor is not
#'   missing).
#' * Ordered factors keep their order: they are numeric, the scores 1, 2, ...,
#'   K of their K levels (kept in the fit as `ordered_levels`), so a linear
#'   head gives them one coefficient, a trend over the levels. At prediction
#'   the levels (of a factor, ordered or not, or of a character column) are
#'   matched to those of the fit by label.
#' * With a formula, transformations such as `log(x)`, `I(x^2)` or `poly(x, 2)`
#'   are allowed; interaction terms (`a:b`, `a*b`) and `offset()` are refused
#'   with an error.
#'
#' @section Missing values:
#' By default the formula method drops the rows whose response (or weight) is
#' `NA`, whatever `getOption("na.action")` says, and keeps the rows with
#' missing predictors: handling them is the point of the method. The dropped
#' rows are recorded as by [stats::na.omit()] (see `fit$na.action`). Pass
#' `na.action = na.omit` to drop every incomplete row, or `na.exclude` to pad
#' [fitted()] and [residuals()] with `NA`.
#'
#' @section Random numbers:
#' With `seed = NULL` the seed given to Python is drawn from R's random number
#' generator, so [set.seed()] makes fits repeatable (on CPU); the seed used is
#' kept in `fit$seed`.
#'
#' Estimator arguments left `NULL` take the value in the option
#' `neumiss.args` when it names them (a list, e.g.
#' `options(neumiss.args = list(ensemble_size = 1, device = "cuda"))` for a
#' session), else the default of the Python estimator. `fit$params` (and
#' [summary.neumiss()]) shows the values used by a fit.
#'
#' @param x A matrix or data frame of predictors, `NA` for missing values (a
#'   numeric vector is one predictor). For the generic, a formula or that.
#' @param y The response: numeric for regression; a factor (or character,
#'   logical) for classification. A logical response predicts logicals
#'   (`TRUE`/`FALSE`, from the classes `"FALSE"` and `"TRUE"`). No `NA` (the
#'   formula method drops those rows).
#' @param formula A formula `response ~ predictors`; `y ~ .` uses every other
#'   column of `data`.
#' @param data A data frame holding the variables of `formula` (else they are
#'   taken from the formula's environment).
#' @param subset An optional expression or vector selecting the rows to use,
#'   evaluated in `data`, as in [stats::lm()].
#' @param weights Case weights: `NULL` or one non-negative number per row
#'   (with a formula, evaluated in `data`). Each row's loss counts that many
#'   times, in training and in the validation split.
#' @param na.action A function for rows with `NA`, such as [stats::na.omit()];
#'   by default only rows with a missing response or weight are dropped.
#' @param model Logical: keep the model frame in the fit (for
#'   [model.frame()], [predict()] without `newdata` and `augment()`).
#' @param task `"regression"` or `"classification"`; by default
#'   classification for a factor, character or logical response, regression
#'   otherwise.
#' @param depth Depth of the NeuMiss block (a whole number >= 0: `S0` and
#'   `depth - 1` Neumann iterations); a vector of candidate depths, such as
#'   `c(0, 2, 4, 8, 16)`, or `"auto"` (`c(0, 16)`) to choose it on the
#'   validation split, each new block starting from the Neumann iterates of
#'   the training data's covariance (with `"auto"`, depth 16 is trained only
#'   when that start, with linear heads fitted on it, validates clearly better
#'   (by one standard error) than depth 0's order-0 imputation, never trained).
#' @param mlp_depth,mlp_width Hidden layers (and their width) of an MLP head
#'   after the block, for nonlinear targets; `mlp_depth = 0` is the paper's
#'   linear head. `"auto"` (Python's default) chooses between the linear head
#'   and a two-layer MLP on the validation split; the head used is
#'   `fit$mlp_depth`. `mlp_width = NULL`: as many as the encoded columns, at
#'   most 64.
#' @param weight_sharing `"independent"` (one matrix per Neumann iteration),
#'   `"shared"`, or `"auto"`: shared, then untied at the chosen depth when that
#'   improves the validation loss; with 100 training rows per encoded column or
#'   more, also an independent block set to Chebyshev steps of the data's
#'   covariance, untrained, kept when it validates better (then `fit$n_epochs` is
#'   0). The mode used is `fit$weight_sharing`.
#' @param residual Logical: residual connections in the block.
#' @param optimizer `"adam"` or `"sgd"`.
#' @param learning_rate,batch_size,max_epochs Training settings.
#' @param validation_fraction Share of rows held out for early stopping and
#'   for the validation metric; `NULL` (Python's `"auto"`): out of fold for an
#'   ensemble on up to 5,000 rows (every row trains all members but one and is
#'   scored by that one; a classifier's rows count as twice those outside its
#'   most frequent class), else 10%.
#' @param patience Epochs without validation improvement before stopping (the
#'   best weights are restored).
#' @param seed Whole number seeding the split, initialisation and shuffling
#'   (`random_state` in Python); `NULL` draws one from R's generator.
#' @param device `"cpu"`, `"cuda"` or `"auto"`.
#' @param verbose Logical: show a progress bar while training.
#' @param interval Logical: fit for prediction intervals (regression) or
#'   prediction sets (classification).
#'   A regression network is then a quantile head (outputs at `(1 - level) / 2`, 0.5
#'   and `(1 + level) / 2`, pinball loss) trained on 75% of the rows (by default), and the
#'   other 25% (`calibration_fraction`) calibrate it by conformal prediction (Python's
#'   `ConformalRegressor`); below 500 rows, every row calibrates instead, by CV+ (10
#'   networks, each without a tenth of the rows, and one on all rows: [print()] says
#'   which). [predict.neumiss()] with `interval = "prediction"`
#'   gives the intervals, and the predictions are the conditional median.
#'   A classifier is calibrated the same way (by a split, or below 500 rows by CV+;
#'   Python's `ConformalClassifier`), and `predict(fit, newdata, type = "set")` gives
#'   the set of classes that cannot be ruled out at `level`.
#'   Case weights are not supported with intervals.
#' @param level Coverage of the intervals the quantile head is trained for
#'   (`predict()` may ask for another level: see [predict.neumiss()]).
#' @param interval_method Regression: `"cqr-mondrian"` (the default: valid within cells of
#'   missingness patterns, each frequent pattern alone and the others by their
#'   number of missing predictors, whatever made the values missing),
#'   `"cqr-mda-exact"` (valid for every pattern when values are missing
#'   completely at random), `"cqr-mda-nested"`, `"cqr"` or `"split"` (valid on
#'   average only). Classification: `"lac-mondrian"` (the default, smallest sets,
#'   possibly empty), `"aps-mondrian"` (sets adapting to each row, never empty),
#'   `"lac"` or `"aps"` (valid on average only). `NULL`: the task's default. See the
#'   Python documentation of `neumiss.intervals`.
#' @param calibration_fraction With `interval = TRUE`, the share of rows that
#'   calibrate the intervals (the network trains on the others).
#' @param calibration_confidence With `interval = TRUE`, the probability that
#'   the calibrated margin of methods `"split"`, `"cqr"` and `"cqr-mondrian"`
#'   holds the coverage for the finite calibration set (a higher value needs
#'   more calibration rows); `NULL` for the plain conformal quantile.
#' @param cv With `interval = TRUE`: `"auto"` (the default) calibrates by CV+ below 500
#'   rows and by a split above; `NULL` always splits; a whole number `>= 2` always uses
#'   CV+ with that many folds (each fold's network fitted without it, and one on all rows).
#' @param ... Further parameters of the Python estimator by their Python names
#'   (e.g. `lr_patience`, `tol`, `weight_decay`, `compress_tails`,
#'   `integer_levels`; for a classifier `class_weight = "balanced"` or weights
#'   named by level, `c(yes = 3)`); unknown names are an error. For the formula
#'   method, the arguments of the default method.
#' @section Small data:
#' A fit needs at least 20 rows with a response (and a non-zero weight);
#' fewer are refused with an error. The validation rows stop the training early
#' and give the validation metric: 10% of the rows by default; an ensemble
#' (`ensemble_size` above 1) on up to 5,000 rows (for a classifier, twice the
#' rows outside the most frequent class) validates out of fold
#' instead: the rows are cut into `ensemble_size` folds, member `k` does not
#' train on fold `k` and scores it, so every row both trains and validates. [print()] and [summary.neumiss()]
#' show how many rows validated and how, and warn when they are fewer than 20,
#' as the metric is then unreliable.
#'
#' @return An object of class `"neumiss"`: a list with, among others, `call`,
#'   `terms` (formula fits), `task`, `feature_names`, `column_kinds`,
#'   `xlevels`, `level_statistics` (per factor encoded by target statistics,
#'   a matrix of levels x statistics), `seed`, `history` (a data frame of per-epoch losses),
#'   `n_epochs`, `best_depth`, `mlp_depth`, `mlp_weight` (the MLP head's weight in the
#'   head used: 0 linear, 1 the MLP head alone, between their blend), `weight_sharing`,
#'   `mask_skip` (whether the
#'   head sees the mask itself: the Python estimator's `mask_skip="auto"` decides on
#'   the validation rows), `spline` (whether the head adds piecewise-linear splines of
#'   the features: `spline="auto"` decides alike), `log_target` (whether the network
#'   fits the log of a positive, heavily right-skewed response and predicts `exp()` of
#'   it: `log_target="auto"`), `validation_score`,
#'   `n_train`, `n_valid`, `validation_scheme`, `fitted.values`, `residuals` (regression),
#'   `na.action`, `model` (the model frame) and the fitted Python model stored
#'   as bytes (`python_model`), so that the object survives [saveRDS()] /
#'   [readRDS()] into a new R session. With `interval = TRUE` also `interval`
#'   (`method`, `alpha`, `n_calibration`) and `n_calibration`.
#' @seealso [predict.neumiss()], [summary.neumiss()], [plot.neumiss()],
#'   [tidy.neumiss()], [write_neumiss()], [export_onnx()], [compare_methods()].
#' @examples
#' if (is_neumiss_available()) {
#'   # 37 rows have no Ozone (dropped), 7 no Solar.R (kept: NA = missing)
#'   set.seed(1)
#'   fit <- neumiss(Ozone ~ ., data = airquality, max_epochs = 20)
#'   fit
#'   predict(fit, data.frame(Solar.R = NA, Wind = 10, Temp = 80, Month = 6, Day = 1))
#'   fit2 <- update(fit, . ~ . - Day, subset = Month > 5)
#'   nobs(fit2)
#'   # prediction intervals, valid for every pattern of missing predictors
#'   fit3 <- neumiss(Ozone ~ ., data = airquality, max_epochs = 20, interval = TRUE)
#'   predict(fit3, airquality[1:5, ], interval = "prediction", level = 0.9)
#' }
#' @export
neumiss <- function(x, ...) {
  UseMethod("neumiss")
}

#' @rdname neumiss
#' @export
neumiss.formula <- function(formula, data, subset, weights, na.action, ..., model = TRUE) {
  call <- .generic_call(match.call())
  .check_dots(list(...), formula = TRUE)
  mf <- .model_frame(match.call(expand.dots = FALSE), parent.frame(), missing(na.action),
                     c("formula", "data", "subset", "weights", "na.action"))
  terms <- attr(mf, "terms")
  table <- .formula_table(mf, terms)
  fit <- .neumiss_fit(table, stats::model.response(mf), stats::model.weights(mf),
                      .estimator_args(...), call = call, terms = terms)
  names(fit$fitted.values) <- rownames(mf)
  if (!is.null(fit$residuals)) names(fit$residuals) <- rownames(mf)
  if (!is.null(fit$probabilities)) rownames(fit$probabilities) <- rownames(mf)
  fit$na.action <- attr(mf, "na.action")
  if (isTRUE(model)) fit$model <- mf
  fit
}

#' @rdname neumiss
#' @export
neumiss.default <- function(x, y, weights = NULL, task = NULL, depth = NULL,
                            mlp_depth = NULL, mlp_width = NULL, weight_sharing = NULL,
                            residual = NULL, optimizer = NULL, learning_rate = NULL,
                            batch_size = NULL, max_epochs = NULL,
                            validation_fraction = NULL, patience = NULL, seed = NULL,
                            device = NULL, verbose = FALSE, interval = FALSE, level = 0.9,
                            interval_method = NULL, calibration_fraction = 0.25,
                            calibration_confidence = 0.75, cv = "auto", ...) {
  call <- .generic_call(match.call())
  .check_dots(list(...), formula = FALSE)
  table <- .predictor_table(x, "x")
  args <- .estimator_args(
    task = task, depth = depth, mlp_depth = mlp_depth, mlp_width = mlp_width,
    weight_sharing = weight_sharing, residual = residual, optimizer = optimizer,
    learning_rate = learning_rate, batch_size = batch_size, max_epochs = max_epochs,
    validation_fraction = validation_fraction, patience = patience, seed = seed,
    device = device, verbose = verbose, interval = interval, level = level,
    interval_method = interval_method, calibration_fraction = calibration_fraction,
    calibration_confidence = calibration_confidence, cv = cv, ...
  )
  .neumiss_fit(table, y, weights, args, call = call, terms = NULL)
}

# The estimator arguments, split into task, seed and Python parameters.
.estimator_args <- function(task = NULL, depth = NULL, mlp_depth = NULL, mlp_width = NULL,
                            weight_sharing = NULL, residual = NULL, optimizer = NULL,
                            learning_rate = NULL, batch_size = NULL, max_epochs = NULL,
                            validation_fraction = NULL, patience = NULL, seed = NULL,
                            device = NULL, verbose = FALSE, interval = FALSE, level = 0.9,
                            interval_method = NULL, calibration_fraction = 0.25,
                            calibration_confidence = 0.75, cv = "auto", ...) {
  params <- c(
    list(depth = depth, mlp_depth = mlp_depth, mlp_width = mlp_width,
         weight_sharing = weight_sharing, residual = residual, optimizer = optimizer,
         learning_rate = learning_rate, batch_size = batch_size, max_epochs = max_epochs,
         validation_fraction = validation_fraction, patience = patience, device = device,
         verbose = as.integer(isTRUE(verbose))),
    list(...)
  )
  params <- params[!vapply(params, is.null, logical(1))]
  list(task = task, seed = seed, params = c(params, .option_args(names(params))),
       interval = .interval_args(interval, level, interval_method, calibration_fraction,
                                 calibration_confidence, cv))
}

# The conformal settings of a fit with intervals (NULL without).
.interval_args <- function(interval, level, method, calibration_fraction = 0.25,
                           calibration_confidence = 0.75, cv = "auto") {
  if (!is.logical(interval) || length(interval) != 1 || is.na(interval)) {
    .abort("`interval` must be TRUE or FALSE.")
  }
  if (!interval) {
    return(NULL)
  }
  .check_fraction(calibration_fraction, "calibration_fraction")
  if (!is.null(calibration_confidence)) {
    .check_fraction(calibration_confidence, "calibration_confidence", "or NULL")
  }
  list(method = if (!is.null(method)) .interval_method(method),
       alpha = 1 - .check_level(level),
       calibration_fraction = calibration_fraction,
       calibration_confidence = calibration_confidence,
       cv = .check_cv(cv))
}

# `cv` of a fit with intervals: "auto", NULL (always a split) or a number of folds >= 2.
.check_cv <- function(cv) {
  if (is.null(cv) || identical(cv, "auto")) {
    return(cv)
  }
  if (!is.numeric(cv) || length(cv) != 1 || is.na(cv) || cv < 2 || cv != round(cv)) {
    .abort("`cv` must be \"auto\", NULL (a split) or a whole number of folds >= 2, got %s.",
           .deparse(cv))
  }
  as.integer(cv)
}

# A number strictly between 0 and 1 (`or`: what else the argument may be).
.check_fraction <- function(value, name, or = "") {
  if (!is.numeric(value) || length(value) != 1 || is.na(value) || value <= 0 || value >= 1) {
    .abort("`%s` must be a number strictly between 0 and 1%s, got %s.", name,
           if (nzchar(or)) paste0(" ", or) else "", .cut(deparse(value), 40L))
  }
  value
}

.interval_methods <- c("cqr-mondrian", "cqr-mda-exact", "cqr-mda-nested", "cqr", "split",
                       "lac-mondrian", "aps-mondrian", "lac", "aps")

.interval_method <- function(method) {
  if (!is.character(method) || length(method) != 1 || !method %in% .interval_methods) {
    .abort("`interval_method` must be one of %s.", .quote(.interval_methods))
  }
  method
}

.check_level <- function(level) {
  if (!is.numeric(level) || length(level) != 1 || is.na(level) || level <= 0 || level >= 1) {
    .abort("`level` must be a number strictly between 0 and 1, got %s.",
           .cut(deparse(level), 40L))
  }
  level
}

# The estimator arguments of getOption("neumiss.args") not given in the call.
.option_args <- function(given) {
  defaults <- getOption("neumiss.args")
  if (is.null(defaults)) {
    return(list())
  }
  if (!is.list(defaults) || (length(defaults) && (is.null(names(defaults)) ||
                                                   any(!nzchar(names(defaults)))))) {
    .abort("getOption(\"neumiss.args\") must be a named list of arguments of neumiss().")
  }
  refused <- intersect(names(defaults), c("task", "seed", "random_state", "weights"))
  if (length(refused)) {
    .abort("getOption(\"neumiss.args\") may not set %s: give it in the call.", .quote(refused))
  }
  defaults[setdiff(names(defaults), given)]
}

# Arguments of R's modelling functions that are not estimator parameters.
.check_dots <- function(dots, formula) {
  names_dots <- names(dots)
  if (length(dots) && (is.null(names_dots) || any(!nzchar(names_dots)))) {
    .abort("estimator parameters passed in `...` must be named.")
  }
  if ("offset" %in% names_dots) {
    .abort("`offset` is not supported: a NeuMiss network has no linear predictor to add an offset to.")
  }
  r_only <- intersect(names_dots, c("data", "subset", "na.action", "formula"))
  if (length(r_only) && !formula) {
    .abort("%s: argument(s) of the formula interface, neumiss(y ~ ., data = ...).",
           .quote(r_only))
  }
  invisible(NULL)
}

# Drop the rows of a model frame (kept with na.pass) whose response or weight is NA,
# recorded like na.omit() does.
.drop_missing_response <- function(mf) {
  y <- stats::model.response(mf)
  drop <- if (is.null(dim(y))) is.na(y) else rowSums(is.na(as.matrix(y))) > 0
  w <- stats::model.weights(mf)
  if (!is.null(w)) drop <- drop | is.na(w)
  if (!any(drop)) {
    return(mf)
  }
  if (all(drop)) {
    .abort("every row has a missing response (or weight): nothing to fit.")
  }
  omit <- which(drop)
  names(omit) <- rownames(mf)[drop]
  class(omit) <- "omit"
  terms <- attr(mf, "terms")
  mf <- mf[!drop, , drop = FALSE]
  attr(mf, "terms") <- terms
  attr(mf, "na.action") <- omit
  mf
}

# match.call() in a method names the method; show the generic as the user wrote it.
.generic_call <- function(call) {
  call[[1]] <- as.name("neumiss")
  call
}

# A seed for Python from R's random number generator (set.seed() governs fits).
.draw_seed <- function() {
  sample.int(.Machine$integer.max, 1L) - 1L
}

# Fit on a table; the shared part of the formula and default methods.
.neumiss_fit <- function(table, y, weights, args, call, terms) {
  n <- .table_rows(table)
  response <- .response(y, args$task, n, if (is.null(terms)) "y" else .response_name(terms))
  weights <- .case_weights(weights, n)
  .check_enough_rows(if (is.null(weights)) n else sum(weights > 0))
  seed <- args$seed
  params <- .python_params(c(args$params, list(random_state = seed)))
  if (is.null(seed)) {
    seed <- .draw_seed()
    params$random_state <- seed
  }
  seed <- params$random_state
  task <- response$task
  y_py <- if (task == "classification") as.character(response$y) else response$y
  meta <- list(
    r_package = as.character(utils::packageVersion("neumiss")),
    formula = if (!is.null(terms)) .deparse(stats::formula(terms)),
    predvars = if (!is.null(attr(terms, "predvars"))) .deparse(attr(terms, "predvars")),
    response = if (!is.null(terms)) .response_name(terms),
    levels = if (task == "classification") as.list(levels(response$y)),
    logical_response = if (isTRUE(response$logical)) TRUE,
    ordered_levels = if (length(.table_ordered_levels(table))) {
      lapply(.table_ordered_levels(table), as.list)
    },
    named_features = isTRUE(attr(table, "named")),
    n_obs = n,
    missing_rate = .missing_rate(table),
    seed = seed
  )
  adapter <- .adapter()
  result <- .py_call(
    adapter$fit(task, params, .table_for_python(table), y_py, weights,
                   meta[!vapply(meta, is.null, logical(1))], args$interval),
    "fitting the NeuMiss model failed"
  )
  .rethrow_warnings(result$warnings)
  fit <- .new_neumiss(result$estimator, call = call, terms = terms,
                      levels = if (task == "classification") levels(response$y))
  fit$y <- response$y
  fit$weights <- weights
  fit$n_missing <- as.integer(Reduce(`+`, lapply(table, is.na)))
  fit$patterns <- .pattern_counts(table)
  # fitted values on the training rows (those held out for validation included)
  if (task == "regression") {
    fit$fitted.values <- .predict_table(fit, table, "response")
    fit$residuals <- fit$y - fit$fitted.values
  } else {
    fit$probabilities <- .predict_table(fit, table, "prob")
    fit$fitted.values <- .as_response(fit, factor(
      fit$classes[max.col(fit$probabilities, ties.method = "first")], levels = fit$levels
    ))
  }
  fit
}

# Fewer rows than this (with a response and a non-zero weight) are refused: the
# validation split that stops the training early would hold one or two rows, and a
# network fitted on so few rows is no better than their mean.
.min_fit_rows <- 20L

.check_enough_rows <- function(n) {
  if (n < .min_fit_rows) {
    .abort("too few rows to fit a NeuMiss network: %d with a response (and a non-zero weight), at least %d are needed; with so few rows, use lm() or glm() on complete cases.",
           n, .min_fit_rows)
  }
  invisible(n)
}

.deparse <- function(expr) {
  paste(deparse(expr, width.cutoff = 500L), collapse = " ")
}

.response_name <- function(terms) {
  .deparse(attr(terms, "variables")[[attr(terms, "response") + 1L]])
}

# Python wants integers where R users type 3 or 100: whole numbers for these
# parameters become integers, other numbers are an error; values of other types
# (e.g. depth = "auto") are passed as given and checked by Python.
.integer_params <- c("depth", "mlp_depth", "mlp_width", "batch_size", "max_epochs",
                     "patience", "lr_patience", "random_state", "verbose", "n_jobs",
                     "ensemble_size")

.python_params <- function(params) {
  params <- params[!vapply(params, is.null, logical(1))]
  for (name in intersect(names(params), .integer_params)) {
    value <- params[[name]]
    if (!is.numeric(value) && name != "random_state") next
    # depth may also be a vector of candidate depths (a Python list).
    several <- name == "depth" && length(value) > 1
    if (!is.numeric(value) || (length(value) != 1 && !several) || anyNA(value) ||
        any(value != round(value))) {
      shown <- if (name == "random_state") "seed" else name
      what <- if (name == "depth") "a whole number or a vector of them" else "a whole number"
      .abort("`%s` must be %s, got %s.", shown, what, .cut(deparse(value), 60L))
    }
    params[[name]] <- if (several) as.list(as.integer(value)) else as.integer(value)
  }
  weights <- params$class_weight
  if (is.numeric(weights) && !is.null(names(weights))) {
    params$class_weight <- as.list(weights)  # a named vector, as R writes it: a dict
  } else if (!is.null(weights) && !identical(weights, "balanced") &&
             !(is.list(weights) && !is.null(names(weights)) && all(nzchar(names(weights))))) {
    .abort(paste("`class_weight` must be \"balanced\" or weights named by level,",
                 "e.g. c(yes = 3), got %s."), .cut(deparse(weights), 60L))
  }
  params
}

# Build the R object around a fitted Python estimator. `levels`: the levels of
# the response factor (NULL for a model read from a file: those recorded by the
# R package in the file, else the estimator's classes).
.new_neumiss <- function(estimator, call, terms = NULL, levels = NULL) {
  info <- .py_call(.adapter()$describe(estimator), "could not read the fitted model")
  meta <- info$r_metadata
  if (is.null(meta)) meta <- list()
  feature_names <- unlist(info$feature_names)
  named <- !is.null(feature_names) && !isFALSE(meta$named_features)
  if (is.null(feature_names)) feature_names <- paste0("x", seq_len(info$n_features))
  columns <- info$columns
  kinds <- stats::setNames(vapply(columns, function(c) {
    if (c$kind == "categorical") "categorical" else "numeric"
  }, character(1)), feature_names)
  xlevels <- list()
  # factors of too many levels to one-hot encode: each level's target statistics
  # (a levels x statistics matrix), the encoded columns' values for that level
  level_statistics <- list()
  for (i in seq_along(columns)) {
    if (columns[[i]]$kind == "categorical") {
      levels_i <- as.character(unlist(columns[[i]]$categories))
      xlevels[[feature_names[i]]] <- levels_i
      if (length(columns[[i]]$statistic_names) > 0) {
        level_statistics[[feature_names[i]]] <- matrix(
          as.numeric(unlist(columns[[i]]$statistics)), nrow = length(levels_i), byrow = TRUE,
          dimnames = list(levels_i, as.character(unlist(columns[[i]]$statistic_names))))
      }
    }
  }
  if (is.null(terms) && !is.null(meta$formula)) {
    terms <- .terms_from_metadata(meta)
  }
  task <- if (info$estimator_class == "NeuMissClassifier") "classification" else "regression"
  py_classes <- NULL
  classes <- NULL
  if (task == "classification") {
    py_classes <- as.character(unlist(info$classes))
    if (is.null(levels)) levels <- as.character(unlist(meta$levels))
    if (length(levels) == 0) levels <- py_classes
    classes <- levels[levels %in% py_classes]
  }
  history <- as.data.frame(lapply(info$history, as.numeric))
  history <- cbind(epoch = seq_len(nrow(history)), history)
  encoded <- as.character(unlist(info$encoded_names))
  vf <- info$params$validation_fraction
  n_obs <- if (is.null(meta$n_obs)) NA_integer_ else as.integer(meta$n_obs)
  # with intervals, the network trains on the rows left by the calibration set
  n_cal <- if (is.null(info$interval)) 0L else as.integer(info$interval$n_calibration)
  n_base <- n_obs - n_cal
  scheme <- if (is.null(info$validation_scheme)) "holdout" else info$validation_scheme
  n_valid <- if (!is.null(info$n_validation_rows)) {
    as.integer(info$n_validation_rows)
  } else if (is.na(n_obs)) {
    NA_integer_
  } else if (is.numeric(vf) && vf > 0) {  # a model saved before the count was recorded
    as.integer(ceiling(vf * n_base))
  } else {
    0L
  }
  fit <- list(
    call = call,
    terms = terms,
    task = task,
    logical_response = isTRUE(meta$logical_response),
    ordered_levels = lapply(meta$ordered_levels, function(l) as.character(unlist(l))),
    feature_names = feature_names,
    named_features = named,
    column_kinds = kinds,
    xlevels = xlevels,
    level_statistics = level_statistics,
    encoded_names = encoded,
    encoded_input = feature_names[as.integer(unlist(info$encoded_input)) + 1L],
    levels = levels,
    classes = classes,
    py_classes = py_classes,
    params = info$params,
    seed = info$params$random_state,
    history = history,
    n_epochs = info$n_epochs,
    best_epoch = info$best_epoch,
    best_depth = info$best_depth,
    mlp_depth = info$mlp_depth,
    mlp_weight = info$mlp_weight,
    weight_sharing = info$weight_sharing,
    mask_skip = isTRUE(info$mask_skip),
    spline = isTRUE(info$spline),
    log_target = isTRUE(info$log_target),
    temperature = info$temperature,
    start_C = info$start_C,
    class_weights = unlist(info$class_weights),
    validation_score = info$validation_score,
    n_obs = n_obs,
    # out of fold, or on validation_data, every row trains
    n_train = if (scheme == "holdout") n_base - n_valid else n_base,
    n_valid = n_valid,
    validation_scheme = scheme,
    n_calibration = n_cal,
    interval = info$interval,
    missing_rate = if (is.null(meta$missing_rate)) NA_real_ else meta$missing_rate,
    mu = stats::setNames(as.numeric(info$mu), encoded),
    center = stats::setNames(as.numeric(info$mean), encoded),
    scale = stats::setNames(as.numeric(info$scale), encoded),
    python_version = info$python_version,
    python_model = .model_bytes(estimator),
    py = new.env(parent = emptyenv())
  )
  fit$py$estimator <- estimator
  structure(fit, class = "neumiss")
}

# Terms rebuilt from the formula and predvars recorded in a model file.
.terms_from_metadata <- function(meta) {
  terms <- tryCatch({
    formula <- stats::as.formula(meta$formula, env = globalenv())
    terms <- stats::terms(formula)
    if (!is.null(meta$predvars)) attr(terms, "predvars") <- str2lang(meta$predvars)
    terms
  }, error = function(e) NULL)
  if (is.null(terms)) {
    .warn("could not rebuild the formula '%s' recorded in the model file; predict from a data frame with the model's columns.",
          meta$formula)
  }
  terms
}
