# Export R data sets to CSV files plus JSON schemas, for neumiss's real-data benchmark.
#
# Usage: Rscript export_datasets.R CACHE_DIR PACKAGE::DATASET [PACKAGE::DATASET ...]
#
# For each data set, writes CACHE_DIR/PACKAGE.DATASET.csv (header line, comma-separated,
# an empty field = NA; doubles with enough digits to read back exactly) and
# CACHE_DIR/PACKAGE.DATASET.json: its source (package and R versions) and, per column, its
# type: "numeric", "integer", "logical", "character", or "factor" with its levels in
# order and whether it is ordered. Dates (class Date) are written as numbers: days since
# 1970-01-01. Row names are not written. A data set whose two files
# already exist is skipped (delete them to export it again).

args <- commandArgs(trailingOnly = TRUE)
if (length(args) < 2) {
  stop("usage: Rscript export_datasets.R CACHE_DIR PACKAGE::DATASET [PACKAGE::DATASET ...]")
}
cache <- args[[1]]
dir.create(cache, recursive = TRUE, showWarnings = FALSE)

load_dataset <- function(package, name) {
  # Lazily loaded data (carData, survival, mice, psychTools) or data() files (mlbench).
  env <- new.env()
  suppressWarnings(utils::data(list = name, package = package, envir = env))
  if (exists(name, envir = env, inherits = FALSE)) {
    return(get(name, envir = env))
  }
  getExportedValue(package, name)
}

json_string <- function(x) {
  x <- gsub("\\", "\\\\", x, fixed = TRUE)
  x <- gsub("\"", "\\\"", x, fixed = TRUE)
  paste0("\"", x, "\"")
}

exact_text <- function(x, name) {
  # Shortest of 15 or 17 significant digits that reads back as the same double.
  if (any(is.infinite(x))) stop(sprintf("column %s has infinite values", name))
  text <- rep(NA_character_, length(x))
  present <- !is.na(x)
  text[present] <- sprintf("%.15g", x[present])
  inexact <- present & suppressWarnings(as.numeric(text)) != x
  inexact[is.na(inexact)] <- FALSE
  text[inexact] <- sprintf("%.17g", x[inexact])
  text
}

column_schema <- function(name, x) {
  fields <- c(paste0("\"name\": ", json_string(name)))
  if (is.factor(x)) {
    if (any(levels(x) == "")) stop(sprintf("column %s has an empty factor level", name))
    levels_json <- paste(vapply(levels(x), json_string, ""), collapse = ", ")
    fields <- c(fields, "\"type\": \"factor\"", paste0("\"levels\": [", levels_json, "]"),
                paste0("\"ordered\": ", if (is.ordered(x)) "true" else "false"))
  } else if (is.logical(x)) {
    fields <- c(fields, "\"type\": \"logical\"")
  } else if (is.integer(x)) {
    fields <- c(fields, "\"type\": \"integer\"")
  } else if (is.numeric(x)) {
    fields <- c(fields, "\"type\": \"numeric\"")
  } else if (is.character(x)) {
    if (any(!is.na(x) & x == "")) stop(sprintf("column %s has empty strings", name))
    fields <- c(fields, "\"type\": \"character\"")
  } else {
    stop(sprintf("column %s has unsupported class %s", name, class(x)[[1]]))
  }
  paste0("{", paste(fields, collapse = ", "), "}")
}

for (spec in args[-1]) {
  parts <- strsplit(spec, "::", fixed = TRUE)[[1]]
  if (length(parts) != 2) stop(sprintf("expected PACKAGE::DATASET, got %s", spec))
  package <- parts[[1]]
  name <- parts[[2]]
  stem <- file.path(cache, paste0(package, ".", name))
  csv_path <- paste0(stem, ".csv")
  json_path <- paste0(stem, ".json")
  if (file.exists(csv_path) && file.exists(json_path)) {
    cat(sprintf("%s: already in %s\n", spec, cache))
    next
  }
  data <- as.data.frame(load_dataset(package, name))
  dates <- vapply(data, function(x) inherits(x, "Date"), TRUE)
  data[dates] <- lapply(data[dates], as.numeric)
  schema <- vapply(names(data), function(n) column_schema(n, data[[n]]), "")
  quoted <- which(vapply(data, function(x) is.factor(x) || is.character(x), TRUE))
  out <- data
  for (n in names(out)) {
    if (is.double(out[[n]])) out[[n]] <- exact_text(out[[n]], n)
  }
  # Written to temporary names first, so that an interrupted export leaves no half file.
  utils::write.table(out, paste0(csv_path, ".tmp"), sep = ",", na = "", row.names = FALSE,
                     quote = quoted, qmethod = "double", fileEncoding = "UTF-8")
  source <- sprintf(
    "{\"package\": %s, \"package_version\": %s, \"dataset\": %s, \"r_version\": %s, \"n_rows\": %d}",
    json_string(package), json_string(as.character(utils::packageVersion(package))),
    json_string(name), json_string(paste(R.version$major, R.version$minor, sep = ".")),
    nrow(data)
  )
  writeLines(c("{", paste0("  \"source\": ", source, ","), "  \"columns\": [",
               paste0("    ", schema, c(rep(",", length(schema) - 1), "")), "  ]", "}"),
             paste0(json_path, ".tmp"), useBytes = TRUE)
  file.rename(paste0(csv_path, ".tmp"), csv_path)
  file.rename(paste0(json_path, ".tmp"), json_path)
  cat(sprintf("%s: %d rows, %d columns -> %s\n", spec, nrow(data), ncol(data), csv_path))
}
