"""The README's commands and snippets: run from the virtual environment, write nothing in
the checkout, and name only files that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_commands_run_from_the_virtual_environment():
    for line in _readme_commands():
        first = line.split()[0]
        assert first not in ("neumiss", "python", "pytest"), (
            f"README command without .venv/bin/: {line}")


def test_readme_snippet_writes_no_model_file_in_the_checkout():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = re.search(r"## Python in ten lines\n\n```python\n(.*?)```", text, flags=re.S)[1]
    assert 'save("' not in snippet and 'to_onnx("' not in snippet
    assert "tempfile" in snippet


#: A script named by its path from the checkout's root (set-up scripts, benchmarks).
_SCRIPT_PATH = re.compile(r"\b((?:scripts|benchmarks)/\w+\.(?:py|sh))\b")


def _documents() -> list[Path]:
    """The READMEs, the package's and the R package's sources, and the scripts themselves."""
    patterns = ["README.md", "*/README.md", "results/**/README.md", "neumiss/**/*.py",
                "r_wrapper/**/*.R", "r_wrapper/**/*.Rd", "scripts/*", "benchmarks/*.py",
                ".ci/*"]
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


def test_readme_snippets_import_public_names_that_exist():
    import importlib

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    imports = [(module, name.strip())
               for block in re.findall(r"```python\n(.*?)```", text, flags=re.S)
               for module, names in re.findall(r"^from (neumiss[\w.]*) import ([\w, ]+)$",
                                               block, flags=re.M)
               for name in names.split(",")]
    assert len(imports) > 5
    for module, name in imports:
        public = importlib.import_module(module).__all__
        assert name in public, f"README: from {module} import {name}: not a public name"
