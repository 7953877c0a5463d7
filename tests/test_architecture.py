"""Dependency rules: one-way imports, a light ``import neumiss``, CLI help without torch."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "neumiss"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_neumiss_modules(path: Path, known: set[str]) -> set[str]:
    """neumiss modules imported anywhere in ``path``, inside functions included."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            # "from . import x" may import the submodule x.
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _imported_neumiss_modules(path, set(files)) for name, path in files.items()}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_import_graph_finds_imports_inside_functions():
    graph = _import_graph()
    # base imports onnx_export only inside to_onnx(): the graph must see it.
    assert "neumiss.onnx_export" in graph["neumiss.base"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_among_neumiss_modules():
    assert _find_cycle(_import_graph()) is None


def test_layers_persistence_and_export_do_not_import_the_estimators():
    graph = _import_graph()
    for bottom in ("neumiss.block", "neumiss.training", "neumiss.validation",
                   "neumiss.gaussian", "neumiss.simulate", "neumiss.preprocessing",
                   "neumiss.search", "neumiss.persistence", "neumiss.onnx_export"):
        assert {"neumiss.estimators", "neumiss.base"}.isdisjoint(graph[bottom]), bottom


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        cwd=PACKAGE.parent,
    )


@pytest.mark.slow
def test_import_neumiss_loads_no_heavy_dependency():
    result = _run_python(
        "import sys, neumiss\n"
        "heavy = [m for m in ('torch', 'onnx', 'onnxruntime', 'matplotlib') if m in sys.modules]\n"
        "print(heavy)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.slow
def test_estimators_load_without_onnx_or_matplotlib():
    result = _run_python(
        "import sys\n"
        "from neumiss import NeuMissRegressor, NeuMissClassifier, load\n"
        "print([m for m in ('onnx', 'onnxruntime', 'matplotlib') if m in sys.modules])"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["--help"], ["benchmark", "--help"], ["score", "--help"],
                                  ["--version"]])
def test_command_line_help_works_without_torch(argv):
    # A finder ahead of the others makes any "import torch" raise ImportError.
    result = _run_python(
        "import sys, importlib.abc\n"
        "class NoTorch(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ImportError('torch is blocked')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "from neumiss.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit as exit:\n    sys.exit(exit.code)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "neumiss" in result.stdout
