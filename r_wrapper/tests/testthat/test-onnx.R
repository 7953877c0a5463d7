test_that("export_onnx() writes a graph that predicts like the fit", {
  skip_if_no_python_neumiss()
  skip_if_not(reticulate::py_module_available("onnxruntime"), "onnxruntime not installed")
  data <- simulate_data(n = 150)
  fit <- neumiss(data$x, data$y, max_epochs = 3, seed = 1)
  path <- tempfile(fileext = ".onnx")
  result <- tryCatch(export_onnx(fit, path), error = identity)
  skip_if(inherits(result, "error") && grepl("has no export_onnx", conditionMessage(result)),
          "the Python package neumiss has no export_onnx() yet")
  expect_identical(result, path)
  expect_gt(file.size(path), 0)
  # run the graph with onnxruntime: inputs X (0 where missing) and the mask M
  # (data passed as lists: no NumPy conversion in R)
  run <- reticulate::py_run_string(paste(
    "def run_onnx(path, values, n, d):",
    "    import numpy as np, onnxruntime as ort",
    "    x = np.asarray(values, dtype=np.float64).reshape(d, n).T",
    "    mask = np.isnan(x)",
    "    feeds = {'X': np.where(mask, 0.0, x).astype(np.float32),",
    "             'M': mask.astype(np.float32)}",
    "    out = ort.InferenceSession(path).run(['y'], feeds)[0]",
    "    return [float(v) for v in out]",
    sep = "\n"), local = TRUE)
  values <- as.vector(data$x)
  values[is.na(values)] <- NaN
  onnx_pred <- run$run_onnx(path, values, nrow(data$x), ncol(data$x))
  expect_equal(onnx_pred, predict(fit, data$x), tolerance = 1e-4)
  expect_error(export_onnx(fit, c("a", "b")), "single path")
})
