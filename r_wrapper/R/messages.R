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

# Python warnings (already short) re-emitted in R.
.rethrow_warnings <- function(messages) {
  for (m in messages) warning(.cut(m), call. = FALSE)
  invisible(NULL)
}
