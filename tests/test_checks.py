"""Parameter constraints and input checks: clear errors naming the parameter or column,
numpy scalars accepted as numbers, booleans not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from neumiss import NeuMissClassifier, NeuMissRegressor
from neumiss.checks import (
    AnyOf,
    Boolean,
    Integer,
    NoneValue,
    Options,
    Real,
    SequenceOf,
    check_class_labels,
    check_params,
)

from .conftest import FAST, linear_data, paper


@pytest.mark.parametrize(
    "constraint, accepted, refused",
    [
        (Integer(0), [0, 3, np.int64(7)], [-1, 1.0, True, np.bool_(True), "1", None]),
        (Integer(1, 3), [1, 3], [0, 4]),
        (Real(0, 1, closed="left"), [0, 0.5, np.float32(0.25), 1e-300], [1, -0.1, np.nan,
                                                                       np.inf, False]),
        (Real(0, None, closed="neither"), [1e300], [0, -1]),
        (Boolean(), [True, False, np.bool_(False)], [0, 1, "True", None]),
        (Options("adam", "sgd"), ["adam", "sgd"], ["Adam", 1, None]),
        (Options(1, 2), [1, 2], [True, 1.0, "1"]),
        (SequenceOf(Integer(0)), [[0], (1, 2)], [[], [0, -1], 3, "12"]),
        (AnyOf(NoneValue(), Integer(1)), [None, 2], [0, "x"]),
    ],
)
def test_constraints_accept_exactly_their_values(constraint, accepted, refused):
    assert all(constraint.accepts(value) for value in accepted)
    assert not any(constraint.accepts(value) for value in refused)


@pytest.mark.parametrize(
    "constraint, description",
    [
        (Integer(0), "an integer >= 0"),
        (Integer(None, 5), "an integer <= 5"),
        (Integer(1, 3), "an integer in [1, 3]"),
        (Real(), "a finite number"),
        (Real(0, 1, closed="left"), "a number in [0, 1)"),
        (Real(0, None, closed="neither"), "a finite number > 0"),
        (Options("a"), "'a'"),
        (Options("a", "b"), "one of 'a', 'b'"),
        (SequenceOf(Integer(0)), "a non-empty list of integers >= 0"),
        (AnyOf(NoneValue(), Integer(1), Boolean()),
         "None, an integer >= 1 or a boolean (True or False)"),
    ],
)
def test_constraint_descriptions_complete_must_be(constraint, description):
    assert constraint.description == description


def test_check_params_names_owner_parameter_expectation_and_value():
    constraints = {"depth": Integer(0), "rate": Real(0, 1)}
    check_params("Model", {"depth": 2, "rate": 0.5, "unchecked": object()}, constraints)
    with pytest.raises(ValueError, match=r"^Model: rate must be a number in \[0, 1\], got 2$"):
        check_params("Model", {"depth": 2, "rate": 2}, constraints)


def test_real_refuses_an_unknown_closed():
    with pytest.raises(ValueError, match="closed must be"):
        Real(0, 1, closed="open")


def test_class_labels_of_one_kind_pass():
    check_class_labels(np.array(["a", "b"], dtype=object))
    check_class_labels(np.array([1, 2.5], dtype=object))
    check_class_labels(np.array([1, 2]))


@pytest.mark.parametrize("param, value", [("residual", "no"), ("residual", 1),
                                          ("verbose", "yes"), ("compress_tails", "True")])
def test_boolean_parameters_take_only_booleans(param, value):
    X, y = linear_data(60, 2)
    with pytest.raises(ValueError, match=param):
        paper(NeuMissRegressor, **FAST, **{param: value}).fit(X, y)


def test_numpy_scalars_are_accepted_everywhere():
    X, y = linear_data(80, 2)
    model = paper(NeuMissRegressor, depth=np.int64(1), learning_rate=np.float32(0.01),
                  residual=np.bool_(True), max_epochs=np.int32(2), random_state=np.int64(0))
    assert np.isfinite(model.fit(X, y).predict(X)).all()


def test_mixed_class_labels_and_duplicate_columns_are_clear_errors():
    X, y = linear_data(60, 2)
    with pytest.raises(ValueError, match="mixes class labels.*number 1.*text 'a'"):
        paper(NeuMissClassifier, **FAST).fit(X, np.array([1, "a"] * 30, dtype=object))
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        paper(NeuMissRegressor, **FAST).fit(pd.DataFrame(X, columns=["a", "a"]), y)


@pytest.mark.parametrize("missing", [None, np.nan, pd.NA])
def test_missing_class_labels_are_a_clear_error(missing):
    X, y = linear_data(60, 2)
    labels = np.where(y > 0, "p", "n").astype(object)
    labels[[4, 9]] = missing
    with pytest.raises(ValueError, match="y has 2 missing class labels .*first at position 4"):
        paper(NeuMissClassifier, **FAST).fit(X, labels)


def test_an_array_of_text_names_its_column_and_leaves_the_array_alone():
    X, y = linear_data(60, 2)
    table = np.column_stack([X, np.array(["u", "v", None] * 20, dtype=object)])
    before = table.copy()
    with pytest.raises(ValueError, match=r"column 2 of X holds text .*'u'.*pandas DataFrame"):
        paper(NeuMissRegressor, **FAST).fit(table, y)
    model = paper(NeuMissRegressor, **FAST).fit(X, y)
    with pytest.raises(ValueError, match=r"column 1 of X holds text .*'v'"):
        model.predict(np.column_stack([X[:, :1], np.array(["v", 1.0] * 30, dtype=object)]))
    numbers = np.array([[1.0, None], ["2.5", 3]] * 30, dtype=object)  # numbers as objects: read
    assert np.isfinite(paper(NeuMissRegressor, **FAST).fit(numbers, y).predict(numbers)).all()
    assert all(a is b or a == b for a, b in zip(table.ravel(), before.ravel()))
