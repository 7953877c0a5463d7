"""The GPU path's logic, checked on the CPU: device standardization, device prediction,
no CUDA graphs for rows on the CPU. (The automatic batch size on CUDA:
tests/test_training.py; on a GPU itself: tests/test_gpu.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import neumiss
from neumiss.network import apply_on_device, standardize
from neumiss.tables import Standardizer

CPU = torch.device("cpu")


@settings(max_examples=40, deadline=None)
@given(X=arrays(np.float64, st.tuples(st.integers(2, 30), st.integers(1, 4)),
                elements=st.one_of(st.just(np.nan), st.floats(-1e9, 1e9, width=64))),
       compress=st.booleans())
def test_device_standardization_equals_the_host_one(X, compress):
    X[0] = 1e9  # an observed value in every column, far in the tails when compressed
    preprocessor = Standardizer(compress_tails=compress).fit(X)
    x, mask = preprocessor.transform(X)
    x_dev, mask_dev = standardize(preprocessor, torch.from_numpy(X))
    assert x_dev.dtype == mask_dev.dtype == torch.float32
    np.testing.assert_array_equal(x_dev.numpy(), x)
    np.testing.assert_array_equal(mask_dev.numpy(), mask)


def test_device_standardization_names_values_too_far():
    preprocessor = Standardizer().fit(np.array([[0.0, 1.0], [1.0, 2.0]]))
    X = torch.tensor([[0.5, 1.0], [1e300, 1.0], [0.0, 1.5]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"rows \[11\] \(columns \['a'\]\)"):
        standardize(preprocessor, X, row_offset=10, columns=["a", "b"])


def test_prediction_on_a_device_matches_the_host_path():
    X, y, _ = neumiss.simulation.make_regression(3000, 6, random_state=0)
    model = neumiss.NeuMissRegressor(depth=2, ensemble_size=2, max_epochs=2, random_state=0)
    model.fit(X, y)
    encoded, host = model._apply(X)
    device = apply_on_device(model.network_, model.preprocessor_, encoded, CPU, chunk=1000)
    assert device.dtype == np.float64 and device.shape == host.shape
    np.testing.assert_allclose(device, host, rtol=1e-6, atol=1e-6)


def test_rows_on_the_cpu_train_without_cuda_graphs():
    from neumiss.network import TrainingData
    from neumiss.network._graphs import graphs_pay

    data = TrainingData(torch.zeros(1000, 3), torch.zeros(1000, 3), torch.zeros(1000))
    assert not graphs_pay(data, 10)
