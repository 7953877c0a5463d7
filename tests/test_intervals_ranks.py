"""The ranks of split conformal prediction: the usual one, the confident one and the
fewest calibration rows that give a finite interval."""

import math
from fractions import Fraction

import numpy as np
import pytest

from neumiss.intervals import confident_rank, required_calibration_rows, upper_rank

from ._interval_helpers import conformal_rank


@pytest.mark.parametrize("n", [14, 30, 100, 1000])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.25])
@pytest.mark.parametrize("confidence", [None, 0.5, 0.75, 0.95])
def test_confident_rank_is_the_smallest_rank_the_beta_law_allows(n, alpha, confidence):
    if required_calibration_rows(alpha, confidence) <= n:
        assert confident_rank(n, alpha, confidence) == conformal_rank(n, alpha, confidence)


@pytest.mark.parametrize("alpha", ["1/100", "1/20", "1/10", "1/5", "3/10", "1/2"])
@pytest.mark.parametrize("confidence", [None, 0.75, 0.9])
def test_required_rows_are_the_fewest_with_finite_ranks(alpha, confidence):
    # In exact arithmetic: the usual rank ceil((1 - alpha)(n + 1)) <= n and the nested
    # lower rank floor(alpha (n + 1)) >= 1; with a confidence, the largest of n scores
    # covers 1 - alpha with that probability: (1 - alpha)^n <= 1 - confidence.
    a = Fraction(alpha)
    usual = next(n for n in range(1, 1000)
                 if math.ceil((1 - a) * (n + 1)) <= n and math.floor(a * (n + 1)) >= 1)
    confident = 0 if confidence is None else next(
        n for n in range(1, 1000) if (1 - float(a)) ** n <= 1 - confidence)
    assert required_calibration_rows(float(a), confidence) == max(usual, confident)


def test_upper_rank_is_exact_at_whole_numbers():
    # (1 - 0.1)(9 + 1) = 9 exactly in theory, 9.000000000000002 in floating point.
    assert upper_rank(9, 0.1) == 9 and upper_rank(19, 0.05) == 19
    assert required_calibration_rows(0.1) == 9 and required_calibration_rows(0.1, 0.75) == 14


def test_the_confident_rank_covers_with_the_asked_probability_over_calibration_draws():
    # Uniform scores: the coverage of a margin is the margin itself. Over many draws of
    # 60 calibration scores, the confident margin covers less than 0.9 in at most 20%
    # of the draws (binomial noise allowed), the rank below it in more; the usual rank
    # covers 0.9 on average only, and falls below it in about half of the draws.
    rng = np.random.default_rng(0)
    n, draws = 60, 20000
    ordered = np.sort(rng.random((draws, n)), axis=1)
    k = confident_rank(n, 0.1, 0.8)
    assert (ordered[:, k - 1] < 0.9).mean() <= 0.2 + 0.01
    assert (ordered[:, k - 2] < 0.9).mean() > 0.2 + 0.01
    usual = ordered[:, upper_rank(n, 0.1) - 1]
    assert usual.mean() >= 0.9 - 0.005 and 0.3 < (usual < 0.9).mean() < 0.7
    assert confident_rank(15, 0.1, 0.8) == 16  # beyond n: too few rows for that confidence
    assert required_calibration_rows(0.1, 0.8) == 16 == confident_rank(16, 0.1, 0.8)
