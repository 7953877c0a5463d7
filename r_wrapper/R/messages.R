# Every message of the package goes through these helpers: errors and warnings
# without the call, lists of names or values cut to a few items.

# "'a', 'b', 'c', ... (12 in all)": at most `n` quoted items.
.quote <- function(x, n = 5L) {
  x <- as.character(x)
  shown <- paste0("'", utils::head(x, n), "'", collapse = ", ")
  if (length(x) > n) sprintf("%s, ... (%d in all)", shown, length(x)) else shown
}

# A message cut to `max` characters.
.cut <- function(text, max = 400L) {
  text <- paste(text, collapse = " ")
  if (nchar(text) > max) paste0(substr(text, 1L, max - 4L), " ...") else text
}

# `fmt` is a sprintf() format when arguments follow, else the message itself.
.format <- function(fmt, ...) {
  .cut(if (...length()) sprintf(fmt, ...) else fmt, 1000L)
}

.abort <- function(fmt, ...) {
  stop(.format(fmt, ...), call. = FALSE)
}

.warn <- function(fmt, ...) {
  warning(.format(fmt, ...), call. = FALSE)
}

# Python warnings (already short, one per problem) re-emitted in R, in R terms.
.rethrow_warnings <- function(messages) {
  for (m in messages) warning(.cut(.r_terms(m)), call. = FALSE)
  invisible(NULL)
}

# A Python message in R terms: without the Python class it starts with, lists as
# quoted names without brackets, the intervals' `alpha` as the R argument `level`, and
# arguments as R writes them (`spline=False` as `spline = FALSE`, None as NULL).
.r_terms <- function(message) {
  message <- sub("^(NeuMiss[A-Za-z]*|ConformalRegressor): ", "", message)
  message <- gsub("\\[((['\"][^'\"]*['\"](, )?)+)\\]", "\\1", message)
  alpha <- regmatches(message, regexpr("(?<=alpha=)[0-9.eE+-]+", message, perl = TRUE))
  if (length(alpha)) {
    level <- format(signif(1 - as.numeric(alpha), 10))
    message <- sub(paste0("alpha=", alpha), paste("level =", level), message, fixed = TRUE)
    message <- sub("n >= 1/alpha - 1", "n >= 1/(1 - level) - 1", message, fixed = TRUE)
    message <- sub("(1 - alpha)^n", "level^n", message, fixed = TRUE)
    message <- sub("raise alpha", "lower level", message, fixed = TRUE)
  }
  argument <- "(?<![\\w'\"=])([a-z_][a-z0-9_]*)="
  r_values <- c(True = "TRUE", False = "FALSE", None = "NULL")
  for (python in names(r_values)) {
    message <- gsub(paste0(argument, python, "\\b"), paste0("\\1 = ", r_values[[python]]),
                    message, perl = TRUE)
  }
  message <- gsub(paste0(argument, "('[^']*'|-?[0-9][0-9.eE+-]*)"), "\\1 = \\2", message,
                  perl = TRUE)
  message
}
