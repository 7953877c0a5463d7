library(testthat)
library(neumiss)

test_check("neumiss")
