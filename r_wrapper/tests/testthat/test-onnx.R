test_that("export_onnx() writes a graph that predicts like the fit", {
  skip_if_no_python_neumiss()
  skip_if_not(reticulate::py_has_attr(reticulate::import("neumiss"), "export_onnx"),
              "the Python package neumiss has no export_onnx() yet")
  skip_if_not(reticulate::py_module_available("onnxruntime"), "onnxruntime not installed")
  data <- simulate_data(n = 150)
  fit <- neumiss(data$x, data$y, max_epochs = 3, seed = 1)
  path <- tempfile(fileext = ".onnx")
  expect_identical(export_onnx(fit, path), path)
  expect_gt(file.size(path), 0)
  # run the graph with onnxruntime (data passed as lists: no NumPy conversion in R)
  run <- reticulate::py_run_string(paste(
    "import numpy as np, onnxruntime as ort",
    "def run_onnx(path, values, n, d):",
    "    session = ort.InferenceSession(path)",
    "    inp = session.get_inputs()[0]",
    "    dtype = np.float64 if 'double' in inp.type else np.float32",
    "    x = np.asarray(values, dtype=dtype).reshape(d, n).T",
    "    return [float(v) for v in np.ravel(session.run(None, {inp.name: x})[0])]",
    sep = "\n"), local = TRUE)
  values <- as.vector(data$x)
  values[is.na(values)] <- NaN
  onnx_pred <- run$run_onnx(path, values, nrow(data$x), ncol(data$x))
  expect_equal(onnx_pred, predict(fit, data$x), tolerance = 1e-4)
  expect_error(export_onnx(fit, c("a", "b")), "single path")
})
