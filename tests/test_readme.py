"""The README's commands and snippets: they run as written (from the virtual environment,
writing nothing in the checkout, each file where the next command looks for it), they name
only files that exist, and its results table is the committed benchmark summary's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def _section(title: str) -> str:
    """The README's text under the heading ``## title``, up to the next one."""
    return re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, flags=re.S | re.M)[1]


def _readme_commands() -> list[str]:
    """The shell commands of the README and of export/README.md (run from the checkout)."""
    export = (ROOT / "export" / "README.md").read_text(encoding="utf-8")
    return [line.strip() for block in _blocks("bash") + _blocks("bash", export)
            for line in block.splitlines() if line.strip() and not line.startswith(" ")]


def test_readme_is_short():
    assert len(README.splitlines()) <= 200


def test_readme_commands_run_from_the_virtual_environment():
    for line in _readme_commands():
        first = line.split()[0]
        # `python -m pip install` installs into the reader's own environment.
        assert first not in ("neumiss", "pytest") and (
            first != "python" or line.startswith("python -m pip ")), (
            f"README command without .venv/bin/: {line}")


def test_the_python_and_r_packages_have_one_version():
    import neumiss

    description = (ROOT / "r_wrapper" / "DESCRIPTION").read_text(encoding="utf-8")
    assert re.search(r"^Version: (\S+)$", description, flags=re.M)[1] == neumiss.__version__


def test_readme_installs_the_torch_that_setup_installs():
    pins = set(re.findall(r"torch==[\d.]+", _section("Installing into your own environment")))
    setup = set(re.findall(r"torch==[\d.]+", (ROOT / "scripts" / "setup.sh").read_text()))
    assert pins and pins == setup


def _run_shell(line: str, home: Path) -> subprocess.CompletedProcess:
    """A README command as a user pastes it, with this interpreter's environment as .venv."""
    bin_dir = Path(sys.executable).parent
    command = line.replace(".venv/bin/", f"{bin_dir}/")
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_readme_python_example_then_its_commands_run(tmp_path):
    # The example writes into ~/neumiss-quickstart, where the next commands read.
    before = sorted(path.name for path in ROOT.iterdir())
    (snippet,) = _blocks("python", _section("Python"))
    result = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True,
                            text=True, timeout=600,
                            env={**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    printed = re.fullmatch(r"test R2 (\S+) Bayes rate (\S+)\n", result.stdout)
    r2, bayes = map(float, printed.groups())
    assert bayes - 0.05 < r2 <= bayes + 0.01
    (commands,) = _blocks("bash", _section("Command line and ONNX"))
    outputs = []
    for line in commands.strip().splitlines():
        result = _run_shell(line, tmp_path)
        assert result.returncode == 0, f"{line}\n{result.stderr}"
        outputs.append(result.stdout)
    assert (tmp_path / "neumiss-quickstart" / "model.onnx").is_file()
    # score.py (ONNX) and neumiss score (the model file) give one prediction per row.
    for output in outputs[1:]:
        lines = output.strip().splitlines()
        assert lines[0].strip('"') == "prediction" and len(lines) == 101
    scored = [[float(v) for v in output.split()[1:]] for output in outputs[1:]]
    assert scored[0] == pytest.approx(scored[1], rel=1e-5, abs=1e-5)
    assert sorted(path.name for path in ROOT.iterdir()) == before


@pytest.mark.slow
def test_readme_r_example_runs(tmp_path):
    if shutil.which("Rscript") is None:
        pytest.skip("R is not installed (scripts/setup_r.sh installs it)")
    has = subprocess.run(["Rscript", "-e", "cat(requireNamespace('reticulate', quietly=TRUE))"],
                         capture_output=True, text=True)
    if has.stdout.strip() != "TRUE":
        pytest.skip("R's reticulate is not installed (scripts/setup_r.sh installs it)")
    library = tmp_path / "lib"
    library.mkdir()
    install = subprocess.run(["R", "CMD", "INSTALL", "--no-multiarch", "-l", str(library),
                              str(ROOT / "r_wrapper")], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    (code,) = _blocks("r", _section("R"))
    env = {**os.environ, "R_LIBS": str(library), "RETICULATE_PYTHON": sys.executable,
           "PYTHONPATH": str(ROOT)}
    result = subprocess.run(["Rscript", "-e", code], env=env, capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"\[1\] \d+\.\d+", result.stdout), result.stdout  # the prediction
    assert "Validation R^2" in result.stdout  # summary()


def _table(text: str) -> dict[str, list[str]]:
    """Rows of the first markdown table in ``text``: first cell (bold and notes removed) ->
    the other cells, bold removed."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip().replace("**", "") for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and not set(cells[0]) <= {"-"} and cells[0] != "method":
            rows[cells[0].split()[0]] = cells[1:]
    return rows


def test_readme_results_table_is_the_committed_summary():
    summary = (ROOT / "results" / "realdata" / "summary.md").read_text(encoding="utf-8")
    committed = _table(summary.split("## Methods over tasks")[1].split("\n## ")[0])
    shown = _table(_section("Results: real data"))
    assert set(shown) == set(committed)
    assert f"among the {len(committed)} methods" in _section("Results: real data")
    for method, (rank, within, seconds) in shown.items():
        rank_, _, _, within_, seconds_ = committed[method]
        assert (rank, within, seconds) == (rank_, within_, seconds_), method


def test_readme_links_point_to_files_that_exist():
    for document in ("README.md", "export/README.md"):
        text = (ROOT / document).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if "://" not in target:
                assert (ROOT / document).parent.joinpath(target).exists(), (document, target)


#: A script named by its path from the checkout's root (set-up scripts, benchmarks).
_SCRIPT_PATH = re.compile(r"\b((?:scripts|benchmarks)/\w+\.(?:py|sh))\b")


def _documents() -> list[Path]:
    """The READMEs, the package's and the R package's sources, and the scripts themselves."""
    patterns = ["README.md", "*/README.md", "results/**/README.md", "neumiss/**/*.py",
                "r_wrapper/**/*.R", "r_wrapper/**/*.Rd", "scripts/*", "benchmarks/*.py",
                ".ci/*", "docs/**/*.rst", "docs/**/*.py"]
    return sorted({path for pattern in patterns for path in ROOT.glob(pattern)
                   if path.is_file()})


def test_every_script_path_in_the_documentation_exists():
    named = {(path.relative_to(ROOT).as_posix(), script)
             for path in _documents()
             for script in _SCRIPT_PATH.findall(path.read_text(encoding="utf-8"))}
    assert named, "no script path found: the pattern no longer matches the documentation"
    missing = sorted((document, script) for document, script in named
                     if not (ROOT / script).is_file())
    assert not missing, f"paths to scripts that do not exist (document, path): {missing}"


def test_scripts_hold_only_set_up_and_test_scripts():
    # Measurements and regression checks live in benchmarks/, each listed in its README.
    assert all(path.suffix == ".sh" for path in (ROOT / "scripts").iterdir())
    listed = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    for script in (ROOT / "benchmarks").glob("*.py"):
        assert f"`{script.name}`" in listed and f"benchmarks/{script.name}" in listed, script


def test_documented_snippets_import_public_names_that_exist():
    import importlib

    documents = [ROOT / "README.md", ROOT / "export" / "README.md",
                 *sorted((ROOT / "docs" / "user_guide").glob("*.rst"))]
    imports = [(module, name.strip())
               for document in documents
               for module, names in re.findall(r"^\s*from (neumiss[\w.]*) import ([\w, ]+)$",
                                               document.read_text(encoding="utf-8"), flags=re.M)
               for name in names.split(",")]
    assert len(imports) > 5
    for module, name in imports:
        public = importlib.import_module(module).__all__
        assert name in public, f"from {module} import {name}: not a public name"
