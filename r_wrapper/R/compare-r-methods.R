# The methods of compare_methods() computed in R: complete cases + lm/glm, mice + lm/glm
# and a random forest (ranger) on mean imputation + missingness indicators. Each works
# on numeric matrices (factors coded as indicators, NA = missing: see .dummy_matrix())
# and gives predictions (regression) or class probabilities (classification).

# How to install each suggested package a method needs.
.install_hints <- c(
  norm = "CRAN only: install.packages(\"norm\")",
  mice = "Debian: apt-get install r-cran-mice; or install.packages(\"mice\")",
  ranger = "Debian: apt-get install r-cran-ranger; or install.packages(\"ranger\")"
)

# One row of the comparison for a method computed in R (see .run_method()), its
# warnings given with its name.
.r_method <- function(method, score, truth = NULL) {
  .run_method(method, function() {
    withCallingHandlers(score(), warning = function(w) {
      .warn("%s: %s", method, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  }, truth)
}

# The row of a method that needs the suggested R package `package`: run when it is
# installed, else a row without scores whose note says how to get it.
.optional_method <- function(package, method, score, truth = NULL,
                             installed = requireNamespace(package, quietly = TRUE)) {
  if (installed) {
    return(.r_method(method, score, truth))
  }
  note <- sprintf("R package '%s' is not installed (%s); not run", package,
                  .install_hints[[package]])
  scores <- if (is.null(truth)) list(r2 = NA_real_) else
    list(accuracy = NA_real_, log_loss = NA_real_)
  data.frame(method = method, scores, seconds = NA_real_, note = note)
}

# The rows of the R methods on one split: `xtr`, `xte` numeric matrices, `ytr` and `yte`
# the responses (numbers, or factors for classification).
.r_method_rows <- function(xtr, ytr, xte, yte, seed, task) {
  truth <- if (task == "classification") yte
  score <- function(predict) {
    function() if (task == "regression") .r2(yte, predict()) else predict()
  }
  model <- if (task == "regression") "lm" else "glm"
  list(
    .r_method(sprintf("Complete cases + %s", model), score(function() {
      .complete_case_predict(xtr, ytr, xte)
    }), truth),
    .optional_method("mice", sprintf("MICE + %s (R mice)", model), score(function() {
      .mice_predict(xtr, ytr, xte, seed)
    }), truth),
    .optional_method("ranger", "Random forest (ranger) + mean imputation + mask",
                     score(function() .ranger_predict(xtr, ytr, xte, seed)), truth)
  )
}

# lm (numeric y), or a logistic regression (a factor: glm's binomial for two classes,
# nnet's multinomial logit for more) of `ytr` on the complete matrix `xtr`; predictions
# (class probabilities) for the complete matrix `xte`. Columns that are constant or
# aliased in the training rows get a coefficient of 0.
.linear_predict <- function(xtr, ytr, xte) {
  design <- cbind(1, xtr)
  new <- cbind(1, xte)
  if (is.numeric(ytr)) {
    beta <- stats::lm.fit(design, ytr)$coefficients
    beta[is.na(beta)] <- 0
    return(drop(new %*% beta))
  }
  ytr <- droplevels(ytr)
  if (nlevels(ytr) == 2) {
    beta <- stats::glm.fit(design, as.integer(ytr) - 1L, family = stats::binomial())$coefficients
    beta[is.na(beta)] <- 0
    p <- stats::plogis(drop(new %*% beta))
    return(matrix(c(1 - p, p), ncol = 2, dimnames = list(NULL, levels(ytr))))
  }
  if (!requireNamespace("nnet", quietly = TRUE)) {
    .abort("more than two classes need R's nnet package (multinomial logit); not run")
  }
  colnames(xtr) <- colnames(xte) <- paste0("x", seq_len(ncol(xtr)))
  fit <- nnet::multinom(ytr ~ ., data = data.frame(xtr, ytr = ytr), trace = FALSE)
  p <- stats::predict(fit, data.frame(xte), type = "probs")
  matrix(p, nrow = nrow(xte), dimnames = list(NULL, levels(ytr)))
}

# The missing values of `x` replaced by the means of the columns of `reference` (0 for a
# column without values).
.fill_means <- function(x, reference) {
  means <- colMeans(reference, na.rm = TRUE)
  means[!is.finite(means)] <- 0
  missing <- which(is.na(x), arr.ind = TRUE)
  x[missing] <- means[missing[, 2]]
  x
}

# Complete cases: the model fitted on the training rows without missing predictors; a
# test row with missing predictors is predicted with them at their means over those rows.
.complete_case_predict <- function(xtr, ytr, xte) {
  complete <- stats::complete.cases(xtr)
  if (sum(complete) <= ncol(xtr) + 1) {
    .abort("%d complete training rows for %d predictor columns: too few to fit.",
           sum(complete), ncol(xtr))
  }
  xcc <- xtr[complete, , drop = FALSE]
  .linear_predict(xcc, ytr[complete], .fill_means(xte, xcc))
}

# mice (its defaults: 5 imputations by predictive mean matching or logistic models, 5
# iterations) imputes the predictors of the training and test rows, the response of
# the training rows among the predictors of the imputation models, which are fitted on
# the training rows only (`ignore`). One model per imputed training set predicts its
# imputed test set; the predictions (probabilities) are averaged. Columns that mice set
# aside (constant or collinear) are filled with their training means.
.mice_predict <- function(xtr, ytr, xte, seed) {
  n_train <- nrow(xtr)
  x <- rbind(xtr, xte)
  colnames(x) <- paste0("x", seq_len(ncol(x)))
  y <- if (is.numeric(ytr)) c(ytr, rep(NA, nrow(xte))) else
    factor(c(as.character(ytr), rep(NA, nrow(xte))), levels = levels(ytr))
  # mice(seed = ) would reset the global random state, which compare_methods() keeps
  imputed <- .with_seed(seed, mice::mice(data.frame(x, .y = y), printFlag = FALSE,
                                         ignore = seq_len(nrow(x)) > n_train))
  train <- seq_len(n_train)
  predictions <- lapply(seq_len(imputed$m), function(i) {
    full <- .fill_means(as.matrix(mice::complete(imputed, i)[colnames(x)]), x[train, ])
    .linear_predict(full[train, , drop = FALSE], ytr, full[-train, , drop = FALSE])
  })
  Reduce(`+`, predictions) / length(predictions)
}

# A random forest (ranger, 500 trees, one thread) on mean imputation and missingness
# indicators: ranger 0.14 (Debian 12) refuses missing values.
.ranger_predict <- function(xtr, ytr, xte, seed) {
  with_mask <- function(x) {
    masked <- colSums(is.na(xtr)) > 0
    indicators <- is.na(x[, masked, drop = FALSE]) + 0
    out <- cbind(.fill_means(x, xtr), indicators)
    colnames(out) <- c(sprintf("x%d", seq_len(ncol(x))), sprintf("m%d", seq_len(sum(masked))))
    as.data.frame(out)
  }
  classification <- is.factor(ytr)
  # ranger draws its seeds from R's generator: the global random state is kept
  prediction <- .with_seed(seed, {
    fit <- ranger::ranger(x = with_mask(xtr), y = if (classification) droplevels(ytr) else ytr,
                          probability = classification, num.threads = 1L)
    stats::predict(fit, with_mask(xte), num.threads = 1L)$predictions
  })
  if (classification) {
    prediction <- matrix(prediction, nrow = nrow(xte),
                         dimnames = list(NULL, colnames(prediction)))
  }
  prediction
}
