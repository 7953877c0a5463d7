"""The documentation covers the package: the API reference lists every subpackage with
public names (its pages are generated from their ``__all__``), and the gallery holds
runnable scripts. `bash scripts/docs.sh` (run by .ci/run) builds the sites themselves."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import neumiss

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _public_subpackages() -> set[str]:
    found = set()
    for info in pkgutil.walk_packages(neumiss.__path__, "neumiss."):
        if info.ispkg and not any(part.startswith("_") for part in info.name.split(".")):
            if getattr(importlib.import_module(info.name), "__all__", None):
                found.add(info.name)
    return found


def test_api_reference_lists_every_subpackage_with_public_names():
    index = (DOCS / "api" / "subpackages.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"^   (neumiss\.[\w.]+)$", index, flags=re.M))
    assert listed == _public_subpackages()
    # conf.py's list drives the resolution of references between those pages.
    tree = ast.parse((DOCS / "conf.py").read_text(encoding="utf-8"))
    (modules,) = [ast.literal_eval(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Assign)
                  and getattr(node.targets[0], "id", None) == "PUBLIC_MODULES"]
    assert set(modules) == listed


def test_gallery_examples_are_scripts_with_a_title():
    examples = sorted((DOCS / "examples").glob("plot_*.py"))
    assert len(examples) >= 4
    for example in examples:
        source = example.read_text(encoding="utf-8")
        compile(source, str(example), "exec")
        title = ast.get_docstring(ast.parse(source)).splitlines()
        assert set(title[1]) == {"="} and len(title[1]) == len(title[0]), example
