# Pythons of this machine without the Python package neumiss (and so without its needs).
bare_pythons <- function() {
  python <- Sys.which("python3")
  python <- python[nzchar(python)]
  bare <- c("/usr/bin/python3", python)
  bare <- bare[file.exists(bare)]
  has_neumiss <- vapply(bare, function(p) {
    # as the new session will run it: without this checkout on PYTHONPATH
    suppressWarnings(system2(p, c("-c", shQuote("import neumiss")), stdout = FALSE,
                             stderr = FALSE, env = "PYTHONPATH=")) == 0
  }, logical(1))
  bare[!has_neumiss]
}

test_that("a Python without the neumiss package gives a message saying what to do", {
  skip_if_not_installed_as_library()
  bare <- bare_pythons()
  skip_if(length(bare) == 0, "no Python without the neumiss package to test with")
  out <- run_rscript(c(
    "library(neumiss)",
    "print(is_neumiss_available())",
    "x <- matrix(rnorm(120), 30); x[1, 1] <- NA",
    "tryCatch(neumiss(x, rnorm(30)), error = function(e) cat('ERROR:', conditionMessage(e), '\\n'))"
  ), env = c(paste0("RETICULATE_PYTHON=", bare[1]), "PYTHONPATH="))
  expect_equal(attr(out, "status"), 0L, info = paste(out, collapse = "\n"))
  text <- paste(out, collapse = "\n")
  expect_match(text, "[1] FALSE", fixed = TRUE)
  expect_match(text, "ERROR: The Python package 'neumiss' is not installed in the Python used by reticulate")
  expect_match(text, "install_neumiss()", fixed = TRUE)
  expect_match(text, "RETICULATE_PYTHON", fixed = TRUE)
})

test_that("from a source checkout's folder without Python set up, the same hint", {
  skip_if_not_installed_as_library()
  bare <- bare_pythons()
  skip_if(length(bare) == 0, "no Python without the neumiss package to test with")
  checkout <- tempfile()
  dir.create(file.path(checkout, "neumiss"), recursive = TRUE)
  file.create(file.path(checkout, "neumiss", "__init__.py"))  # importable, its needs absent
  out <- run_rscript(c(
    sprintf("setwd(%s)", deparse(checkout)),
    "library(neumiss)",
    "r <- is_neumiss_available()",
    "cat('REASON:', attr(r, 'reason'), '\\n')"
  ), env = c(paste0("RETICULATE_PYTHON=", bare[1]), "PYTHONPATH="))
  text <- paste(out, collapse = "\n")
  expect_match(text, "REASON: could not load the Python side of the neumiss R package in",
               fixed = TRUE)
  expect_match(text, "No module named", fixed = TRUE)
  expect_match(text, "install_neumiss()", fixed = TRUE)
})

test_that("a pyproject.toml in the working folder is not taken for a Poetry project", {
  checkout <- tempfile()
  dir.create(checkout)
  writeLines(c("[project]", "name = 'neumiss'", "[tool.ruff]", "line-length = 100"),
             file.path(checkout, "pyproject.toml"))
  old <- setwd(checkout)
  on.exit(setwd(old))
  poetry_config <- utils::getFromNamespace("poetry_config", "reticulate")
  warned <- tryCatch({
    suppressMessages(poetry_config(NULL))
    FALSE
  }, warning = function(w) grepl("Poetry", conditionMessage(w)))
  skip_if_not(warned, "this reticulate does not take such a file for a Poetry project")
  expect_no_warning(neumiss:::.without_poetry(poetry_config(NULL)))
})

test_that("a relative RETICULATE_PYTHON that does not exist is named in the message", {
  skip_if_not_installed_as_library()
  out <- run_rscript(c(
    "library(neumiss)",
    "r <- is_neumiss_available()",
    "cat('REASON:', attr(r, 'reason'), '\\n')"
  ), env = "RETICULATE_PYTHON=.no-such-venv/bin/python")
  text <- paste(out, collapse = "\n")
  expect_match(text, "REASON: RETICULATE_PYTHON is '.no-such-venv/bin/python', which does not exist (a relative path, looked up from",
               fixed = TRUE)
})

test_that("install_neumiss() checks its arguments and finds what to install", {
  expect_error(install_neumiss(method = "pip"), "should be one of")
  expect_error(install_neumiss(package = c("a", "b")), "`package` must be NULL")
  expect_error(install_neumiss(package = tempfile()), "does not exist: pass the path")
  wheels <- neumiss:::.bundled_wheels()
  if (length(wheels)) {
    expect_match(neumiss:::.python_package_source(NULL), "neumiss-.*\\.whl$")
  } else {
    expect_error(neumiss:::.python_package_source(NULL), "scripts/build_r_package.sh")
  }
  dir <- tempfile()
  dir.create(dir)
  expect_equal(neumiss:::.python_package_source(dir), normalizePath(dir))
})
