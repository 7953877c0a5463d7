"""Dependency rules: one-way imports, a light ``import neumiss``, CLI help without torch."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "neumiss"


#: The layers, bottom first. A module may import its own subpackage and those before it;
#: the top-level modules (entry points: __init__, __main__, cli, _version) import any.
LAYERS = ("checks", "simulation", "tables", "network", "export", "estimators", "baselines",
          "intervals", "scoring", "benchmark", "commands")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, imported names) of every import in ``path``, inside functions too."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.append((module, [alias.name for alias in node.names]))
    return found


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _import_graph() -> dict[str, set[str]]:
    """Module -> the neumiss modules it imports ("from . import x" counts as x only)."""
    files = _modules()
    graph = {}
    for name, path in files.items():
        targets = set()
        for module, names in _imports(path):
            submodules = {f"{module}.{n}" for n in names} & set(files)
            targets |= submodules or ({module} & set(files))
        graph[name] = targets - {name}
    return graph


def _layer(module: str) -> str | None:
    """The subpackage owning ``module``, or None for a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else None


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


def _function_lengths(path: Path):
    """(qualified name, lines) of every function in ``path``, its docstring not counted."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines -= first.end_lineno - first.lineno + 1
            yield f"{_module_name(path)}.{node.name}", lines


def test_import_graph_finds_imports_inside_functions():
    graph = _import_graph()
    # _base imports the export layer only inside to_onnx(): the graph must see it.
    assert "neumiss.export" in graph["neumiss.estimators._base"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_among_neumiss_modules():
    assert _find_cycle(_import_graph()) is None


def test_every_subpackage_is_a_layer_with_a_docstring():
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert subpackages == set(LAYERS)
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text()))
        assert doc and "import" in doc, f"neumiss.{layer} must say what it owns and may import"
    top_level = {p.name for p in PACKAGE.glob("*.py")}
    assert top_level == {"__init__.py", "__main__.py", "_version.py", "cli.py"}


def test_layers_import_only_themselves_and_the_layers_below():
    graph = _import_graph()
    violations = []
    for module, targets in graph.items():
        layer = _layer(module)
        if layer is None:
            continue  # the entry points
        for target in targets:
            other = _layer(target)
            if other is None and target != "neumiss._version":
                violations.append(f"{module} imports the entry point {target}")
            elif other is not None and LAYERS.index(other) > LAYERS.index(layer):
                violations.append(f"{module} ({layer}) imports {target} ({other}), a layer above")
    assert violations == []


def test_no_private_import_across_subpackages():
    violations = []
    for module, path in _modules().items():
        layer = _layer(module)
        for target, names in _imports(path):
            if not target.startswith("neumiss.") or _layer(target) in (None, layer):
                continue
            if any(part.startswith("_") for part in target.split(".")[1:]):
                violations.append(f"{module} imports the private module {target}")
            private = [n for n in names if n.startswith("_")]
            if private:
                violations.append(f"{module} imports private {private} from {target}")
    assert violations == []


def test_implementation_modules_are_private():
    public = [name for name, path in _modules().items()
              if _layer(name) is not None and path.name != "__init__.py"
              and not path.name.startswith("_")]
    assert public == []


def test_functions_are_short():
    long = [f"{name}: {lines} lines" for path in PACKAGE.rglob("*.py")
            for name, lines in _function_lengths(path) if lines > MAX_FUNCTION_LINES]
    assert long == []


def test_modules_are_short():
    long = [f"{path.relative_to(PACKAGE.parent)}: {n} lines"
            for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert long == []


def test_the_rules_catch_what_they_forbid(tmp_path):
    source = tmp_path / "bad.py"
    source.write_text(
        "def long():\n    \"\"\"Doc.\n\n    More.\n    \"\"\"\n" + "    x = 1\n" * 61
    )
    assert [lines for _, lines in _function_lengths_at(source)] == [62]
    assert _layer("neumiss.network._block") == "network"
    assert _layer("neumiss.network") == "network"
    assert _layer("neumiss.cli") is None


def _function_lengths_at(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef):
            body = node.body[0]
            doc = isinstance(body, ast.Expr) and isinstance(body.value, ast.Constant)
            yield node.name, node.end_lineno - node.lineno + 1 - (
                body.end_lineno - body.lineno + 1 if doc else 0)


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        cwd=PACKAGE.parent,
    )


def _loaded_after(imports: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has loaded after running ``imports``."""
    result = _run_python(f"import sys\n{imports}\nprint([m for m in {modules!r} "
                         "if m in sys.modules])")
    assert result.returncode == 0, result.stderr
    return ast.literal_eval(result.stdout.strip())


@pytest.mark.slow
def test_import_neumiss_loads_no_heavy_dependency():
    assert _loaded_after("import neumiss", ("torch", "onnx", "onnxruntime", "matplotlib")) == []


@pytest.mark.slow
def test_estimators_load_without_onnx_or_matplotlib():
    assert _loaded_after("from neumiss import NeuMissRegressor, NeuMissClassifier, load",
                         ("onnx", "onnxruntime", "matplotlib")) == []


@pytest.mark.slow
def test_file_scoring_loads_neither_torch_nor_scikit_learn_nor_pandas(tmp_path):
    # `neumiss score` starts in a fraction of a second: scikit-learn and pandas
    # took 2 s to import, more than scoring 1M rows.
    assert _loaded_after("import neumiss.commands._score, neumiss.scoring",
                         ("torch", "sklearn", "pandas", "scipy")) == []
    # nor does scoring a file into Parquet load them (pa.array would import pandas)
    fixture = PACKAGE.parent / "export" / "fixtures" / "regressor"
    scoring = (f"import neumiss.scoring as s; s.score_file({str(fixture / 'model.onnx')!r}, "
               f"{str(fixture / 'inputs.csv')!r}, {str(tmp_path / 'out.parquet')!r})")
    assert _loaded_after(scoring, ("torch", "sklearn", "pandas", "scipy")) == []
    assert (tmp_path / "out.parquet").stat().st_size > 0
    # and the check that the helper sees a loaded module at all
    assert _loaded_after("import neumiss.scoring", ("onnxruntime", "pyarrow")) == [
        "onnxruntime", "pyarrow"]


def test_checks_load_the_validation_functions_on_first_use():
    from neumiss import checks
    from neumiss.checks import _validation

    assert checks.check_features is _validation.check_features
    assert "check_training_data" in checks.__all__
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        checks.nothing  # noqa: B018


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
