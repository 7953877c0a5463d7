#' Fit a NeuMiss network
#'
#' Fits a NeuMiss network (Le Morvan et al., NeurIPS 2020) with the Python
#' package `neumiss` (`NeuMissRegressor` or `NeuMissClassifier`). The
#' predictors are numeric and may contain missing values (`NA`): the network
#' learns to predict from the observed values of every row, without imputing
#' them first.
#'
#' Predictors must be numeric (logical columns count as 0/1). Factor and
#' character predictors are refused with an error: NeuMiss models continuous
#' features; encode such columns yourself (e.g. with [stats::model.matrix()])
#' if you want them as numbers. The response must not contain `NA`.
#'
#' Estimator arguments left `NULL` take the default of the Python estimator
#' (see `help(neumiss.NeuMissRegressor)` in Python, or [summary.neumiss()] for
#' the values used by a fit).
#'
#' @param x A numeric matrix or data frame of predictors, `NA` for missing
#'   values (a numeric vector is one predictor). For the generic, a formula.
#' @param y The response: numeric for regression; a factor (or character,
#'   logical) for classification. No `NA`.
#' @param formula A formula `response ~ predictors`; `y ~ .` uses every other
#'   column of `data`. Transformations such as `log(x1)` are allowed.
#' @param data A data frame holding the variables of `formula`.
#' @param task `"regression"` or `"classification"`; by default
#'   classification for a factor, character or logical response, regression
#'   otherwise.
#' @param depth Depth of the NeuMiss block (a whole number >= 0: `S0` and
#'   `depth - 1` Neumann iterations); a vector of candidate depths, such as
#'   `c(0, 2, 4, 8, 16)`, or `"auto"` (those five) to choose it on the
#'   validation split, each candidate starting from the weights of the
#'   previous one.
#' @param mlp_depth,mlp_width Hidden layers (and their width) of an MLP head
#'   after the block, for nonlinear targets; `mlp_depth = 0` is the paper's
#'   linear head.
#' @param weights `"independent"` (one matrix per Neumann iteration),
#'   `"shared"`, or `"auto"`: shared, then untied at the chosen depth when that
#'   improves the validation loss (tried only with at least 10 training rows
#'   per parameter of the untied block).
#' @param residual Logical: residual connections in the block.
#' @param optimizer `"adam"` or `"sgd"`.
#' @param learning_rate,batch_size,max_epochs Training settings.
#' @param validation_fraction Share of rows held out for early stopping.
#' @param patience Epochs without validation improvement before stopping (the
#'   best weights are restored).
#' @param seed Whole number seeding the split, initialisation and shuffling
#'   (`random_state` in Python): repeatable fits on CPU.
#' @param device `"cpu"`, `"cuda"` or `"auto"`.
#' @param verbose Logical: show a progress bar while training.
#' @param ... Further parameters of the Python estimator by their Python names
#'   (e.g. `lr_patience`, `tol`, `weight_decay`); unknown names are an error. For the
#'   formula method, the arguments of the default method.
#' @return An object of class `"neumiss"`: a list with, among others, `task`,
#'   `feature_names`, `history` (a data frame of per-epoch losses),
#'   `n_epochs`, `best_depth`, `validation_score`, `mu` (see [coef.neumiss()])
#'   and the fitted Python model stored as bytes (`model`), so that the object
#'   survives [saveRDS()] / [readRDS()] into a new R session.
#' @seealso [predict.neumiss()], [summary.neumiss()], [plot.neumiss()],
#'   [export_onnx()], [compare_methods()].
#' @examples
#' \dontrun{
#' set.seed(1)
#' x <- matrix(rnorm(600), ncol = 3, dimnames = list(NULL, c("a", "b", "c")))
#' y <- drop(x %*% c(1, -2, 0.5)) + rnorm(200, sd = 0.1)
#' x[sample(length(x), 150)] <- NA
#' fit <- neumiss(x, y, max_epochs = 30, seed = 1)
#' predict(fit, x[1:5, ])
#' fit2 <- neumiss(y ~ ., data = data.frame(x, y = y), max_epochs = 30)
#' }
#' @export
neumiss <- function(x, ...) {
  UseMethod("neumiss")
}

#' @rdname neumiss
#' @export
neumiss.formula <- function(formula, data, ...) {
  call <- match.call()
  if (missing(data)) {
    stop("`data` is required with a formula.", call. = FALSE)
  }
  mf <- stats::model.frame(formula, data, na.action = stats::na.pass)
  terms <- stats::terms(mf)
  if (attr(terms, "response") == 0) {
    stop("the formula has no response (write it as response ~ predictors).", call. = FALSE)
  }
  predictors <- mf[-attr(terms, "response")]
  if (ncol(predictors) == 0) {
    stop("the formula has no predictors.", call. = FALSE)
  }
  .check_numeric_columns(predictors, "data")  # no factor or character predictors
  terms <- stats::delete.response(terms)
  attr(terms, "intercept") <- 0L
  x <- stats::model.matrix(terms, mf)
  fit <- neumiss.default(x, stats::model.response(mf), ...)
  fit$terms <- terms
  fit$call <- .generic_call(call)
  fit
}

#' @rdname neumiss
#' @export
neumiss.default <- function(x, y, task = NULL, depth = NULL, mlp_depth = NULL,
                            mlp_width = NULL, weights = NULL, residual = NULL,
                            optimizer = NULL, learning_rate = NULL, batch_size = NULL,
                            max_epochs = NULL, validation_fraction = NULL,
                            patience = NULL, seed = NULL, device = NULL,
                            verbose = FALSE, ...) {
  call <- match.call()
  x <- .predictor_matrix(x, "x")
  response <- .response(y, task, nrow(x))
  params <- c(
    list(depth = depth, mlp_depth = mlp_depth, mlp_width = mlp_width, weights = weights,
         residual = residual, optimizer = optimizer, learning_rate = learning_rate,
         batch_size = batch_size, max_epochs = max_epochs,
         validation_fraction = validation_fraction, patience = patience,
         random_state = seed, device = device, verbose = as.integer(isTRUE(verbose))),
    list(...)
  )
  params <- .python_params(params[!vapply(params, is.null, logical(1))])
  y_py <- if (response$task == "classification") {
    as.integer(response$y) - 1L
  } else {
    response$y
  }
  adapter <- .adapter()
  result <- .py_call(
    adapter$fit(response$task, params, .values(x), nrow(x), ncol(x), y_py),
    "fitting the NeuMiss model failed"
  )
  for (w in result$warnings) {
    warning(w, call. = FALSE)
  }
  levels <- if (response$task == "classification") levels(response$y)
  fit <- .new_neumiss(result$estimator, colnames(x), attr(x, "named"), levels,
                      .generic_call(call))
  fit$n_obs <- nrow(x)
  fit$missing_rate <- mean(is.na(x))
  fit
}

# match.call() in a method names the method; show the generic as the user wrote it.
.generic_call <- function(call) {
  call[[1]] <- as.name("neumiss")
  call
}

# Python wants integers where R users type 3 or 100: whole numbers for these
# parameters become integers, other numbers are an error; values of other types
# (e.g. depth = "auto") are passed as given and checked by Python.
.integer_params <- c("depth", "mlp_depth", "mlp_width", "batch_size", "max_epochs",
                     "patience", "lr_patience", "random_state", "verbose")

.python_params <- function(params) {
  if (is.null(names(params)) || any(!nzchar(names(params)))) {
    stop("estimator parameters passed in `...` must be named.", call. = FALSE)
  }
  for (name in intersect(names(params), .integer_params)) {
    value <- params[[name]]
    if (!is.numeric(value) && name != "random_state") next
    # depth may also be a vector of candidate depths (a Python list).
    several <- name == "depth" && length(value) > 1
    if (!is.numeric(value) || (length(value) != 1 && !several) || anyNA(value) ||
        any(value != round(value))) {
      shown <- if (name == "random_state") "seed" else name
      what <- if (name == "depth") "a whole number or a vector of them" else "a whole number"
      stop(sprintf("`%s` must be %s, got %s.", shown, what,
                   paste(deparse(value), collapse = " ")), call. = FALSE)
    }
    params[[name]] <- if (several) as.list(as.integer(value)) else as.integer(value)
  }
  params
}

# Build the R object around a fitted Python estimator. `levels`: all levels of
# the response factor (classification); the classes the model knows are those
# of the estimator's classes_ (codes into `levels`, or labels of a model read
# from a file). `feature_names = NULL` (a model read from a file): the names
# the Python model was fitted with, else x1, x2, ...
.new_neumiss <- function(estimator, feature_names, named, levels, call) {
  info <- .py_call(.adapter()$describe(estimator), "could not read the fitted model")
  if (is.null(feature_names)) {
    feature_names <- unlist(info$feature_names)
    named <- !is.null(feature_names)
    if (!named) feature_names <- paste0("x", seq_len(info$n_features))
  }
  task <- if (info$estimator_class == "NeuMissClassifier") "classification" else "regression"
  classes <- NULL
  if (task == "classification") {
    classes <- if (is.null(levels)) {
      unlist(info$classes)
    } else {
      levels[as.integer(unlist(info$classes)) + 1L]
    }
    if (is.null(levels)) levels <- classes
  }
  history <- as.data.frame(lapply(info$history, as.numeric))
  history <- cbind(epoch = seq_len(nrow(history)), history)
  mu <- stats::setNames(as.numeric(info$mu), feature_names)
  fit <- list(
    call = call,
    task = task,
    feature_names = feature_names,
    named_features = named,
    levels = levels,
    classes = classes,
    params = info$params,
    history = history,
    n_epochs = info$n_epochs,
    best_epoch = info$best_epoch,
    best_depth = info$best_depth,
    validation_score = info$validation_score,
    mu = mu,
    python_version = info$python_version,
    model = .model_bytes(estimator),
    py = new.env(parent = emptyenv())
  )
  fit$py$estimator <- estimator
  structure(fit, class = "neumiss")
}
