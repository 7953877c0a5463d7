"""The standalone scorer ``export/score.py`` (numpy and ONNX Runtime only): every
failure is one line on standard error, exit status 1."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from .conftest import one_line_error

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def score():
    spec = importlib.util.spec_from_file_location("score", ROOT / "export" / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCORER_INPUTS = {
    "short header": (b"age,income,score\n1,2,3\n", r"missing \['tenure'\]"),
    "not UTF-8": (b"\xff\xfe1,2,3,4\n", "not UTF-8"),
    "NUL byte": (b"age,income,score,tenure\n1,2\x00,3,4\n", "line 2, column 2"),
    "empty": (b"", "no data rows"),
}


@pytest.mark.parametrize("case", list(SCORER_INPUTS))
def test_scorer_failures_are_one_line(score, tmp_path, capsys, case):
    content, message = SCORER_INPUTS[case]
    (tmp_path / "in.csv").write_bytes(content)
    model = ROOT / "export" / "fixtures" / "regressor" / "model.onnx"
    assert score.main([str(model), str(tmp_path / "in.csv")]) == 1
    assert re.search(message, one_line_error(capsys.readouterr().err))


def test_scorer_unreadable_model_and_output_are_one_line(score, tmp_path, capsys):
    inputs = ROOT / "export" / "fixtures" / "regressor" / "inputs.csv"
    (tmp_path / "m.onnx").write_bytes(b"garbage")
    assert score.main([str(tmp_path / "m.onnx"), str(inputs)]) == 1
    assert "not a readable ONNX model" in one_line_error(capsys.readouterr().err)
    model = ROOT / "export" / "fixtures" / "regressor" / "model.onnx"
    assert score.main([str(model), str(inputs), "-o", str(tmp_path / "no" / "p.csv")]) == 1
    one_line_error(capsys.readouterr().err)
