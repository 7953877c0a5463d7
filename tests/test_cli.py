"""The ``neumiss`` command line: plain-text help, every failure one line on standard error
(the traceback only with ``--debug``), and a clean stop on SIGTERM that a rerun resumes."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from neumiss import cli as neumiss_cli
from neumiss.benchmark import grid

from .conftest import interrupt_after_first_row, one_line_error

ROOT = Path(__file__).resolve().parent.parent


def test_cli_description_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        neumiss_cli.main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "The neumiss command line" in out and "--debug" in out


def test_benchmark_out_under_a_file_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert neumiss_cli.main(["benchmark", "--quick", "--out", str(tmp_path / "file" / "sub")]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "is under" in line and "a file, not a folder" in line


def test_benchmark_needs_two_test_rows(capsys):
    with pytest.raises(SystemExit) as exit_info:
        neumiss_cli.main(["benchmark", "--n-test", "1"])
    assert exit_info.value.code == 2
    assert "at least 2 test rows" in one_line_error(capsys.readouterr().err)
    with pytest.raises(ValueError, match=r"n_test must be integers >= 2 \(a test R² needs"):
        grid(n_test=1)


def test_any_command_failure_is_one_line_unless_debug(monkeypatch, capsys):
    import neumiss.commands._export as export_command

    def broken(args):
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(export_command, "run", broken)
    assert neumiss_cli.main(["export", "a.pt", "b.onnx"]) == 1
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith("neumiss export: error: something broke (RuntimeError")
    with pytest.raises(RuntimeError):
        neumiss_cli.main(["--debug", "export", "a.pt", "b.onnx"])
    with pytest.raises(RuntimeError):
        neumiss_cli.main(["export", "a.pt", "b.onnx", "--debug"])


def test_export_of_a_damaged_file_is_one_line(saved, tmp_path, capsys):
    path, _ = saved
    (tmp_path / "cut.pt").write_bytes(path.read_bytes()[:100])
    assert neumiss_cli.main(["export", str(tmp_path / "cut.pt"), str(tmp_path / "m.onnx")]) == 1
    assert "not a neumiss model file" in one_line_error(capsys.readouterr().err)


@pytest.mark.slow
def test_sigterm_during_a_benchmark_is_clean_and_the_run_resumes(tmp_path):
    command = [
        sys.executable, "-m", "neumiss.cli", "benchmark", "--mechanisms", "MCAR",
        "--n-features", "5", "--n-train", "40000", "--n-val", "500", "--n-test", "500",
        "--repeats", "3", "--methods", "impute_mask_lr", "neumiss", "--neumiss-depths", "0",
        "1", "--out", str(tmp_path), "--no-progress",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT)
    runs = tmp_path / "runs.csv"
    interrupt_after_first_row(process, runs, "benchmark")
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert one_line_error(err).startswith("terminated: finished runs are in")
    finished = len(runs.read_text().splitlines()) - 1
    assert finished >= 1
    again = subprocess.run([*command[:command.index("--repeats") + 1], "1",
                            *command[command.index("--repeats") + 2:]],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert again.returncode == 0 and "Traceback" not in again.stderr
    assert "already in" in again.stdout
