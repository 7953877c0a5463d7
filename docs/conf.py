"""Sphinx configuration of the neumiss documentation (``bash scripts/docs.sh`` builds it)."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import sys
import warnings
from pathlib import Path

import matplotlib

ROOT = Path(__file__).resolve().parent.parent
# The checkout's package, whatever is installed: the site documents this tree.
sys.path.insert(0, str(ROOT))
# Gallery examples draw into files, never onto a screen.
matplotlib.use("agg")

import neumiss  # noqa: E402

# numpydoc drops a section it does not know, with its text: fail instead.
warnings.filterwarnings("error", message="Unknown section", category=UserWarning)

project = "neumiss"
author = "the neumiss maintainers"
copyright = "the neumiss maintainers, BSD-3-Clause"
release = version = neumiss.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "matplotlib.sphinxext.plot_directive",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "**/GALLERY_HEADER.rst"]
root_doc = "index"

# API reference: one page per public name of each subpackage's ``__all__``.
autosummary_generate = True
autosummary_ignore_module_all = False
autosummary_imported_members = True
#: The modules whose ``__all__`` the API reference documents (docs/api/subpackages.rst).
PUBLIC_MODULES = ["neumiss.checks", "neumiss.simulation", "neumiss.tables", "neumiss.network",
                  "neumiss.export", "neumiss.estimators", "neumiss.baselines",
                  "neumiss.intervals", "neumiss.scoring", "neumiss.benchmark",
                  "neumiss.benchmark.realdata", "neumiss.benchmark.intervals"]


def _documented_elsewhere() -> dict[str, list[str]]:
    """Per module, the names of its ``__all__`` documented on another page.

    Submodules have a page of their own, and a name re-exported from a subpackage
    (``neumiss.benchmark.Task``) is documented there only: one page per object.
    """
    skip: dict[str, list[str]] = {}
    for outer in PUBLIC_MODULES:
        module = importlib.import_module(outer)
        for name in module.__all__:
            value = getattr(module, name)
            inner = [other for other in PUBLIC_MODULES if other.startswith(f"{outer}.")
                     and getattr(importlib.import_module(other), name, None) is value]
            if inspect.ismodule(value) or inner:
                skip.setdefault(outer, []).append(name)
    return skip


autosummary_context = {"documented_elsewhere": _documented_elsewhere()}
autodoc_default_options = {"members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# Every cross-reference must resolve (-n): names outside this package are listed here,
# as the build must work offline (no intersphinx inventories).
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|pd|pandas|torch|onnx|sklearn|scipy|dask|pyspark|pyarrow)\b.*"),
    (r"py:.*", r"(array-like|ndarray|DataFrame|Series|callable|optional|default|of|or|and)"),
    (r"py:.*", r"(int|float|str|bool|bytes|dict|list|tuple|None|object|Path|path-like)"),
]

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    # A failing example fails the build (-W turns its report into an error).
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "min_reported_time": 0,
    "show_memory": False,
}
# NEUMISS_DOCS_NO_GALLERY=1 builds the pages without running the examples (quick edits).
if os.environ.get("NEUMISS_DOCS_NO_GALLERY"):
    sphinx_gallery_conf["plot_gallery"] = "False"

# The user guide's figures computed at build time (``.. plot::``), without their code.
plot_formats = [("png", 100)]
plot_html_show_source_link = False
plot_html_show_formats = False

html_theme = "furo"
html_title = f"neumiss {version}"
html_static_path: list[str] = []


#: A constant's value is shown (after its comment) when its ``repr`` is this short; the
#: subpackage pages document constants with ``:no-value:`` (tables of tasks and methods
#: would fill the page).
VALUE_SHOWN_CHARS = 80


def _constant_doc(app, what, name, obj, options, lines):
    """Give a re-exported constant the ``#:`` comment it has where it is defined, and its
    value when short (:data:`VALUE_SHOWN_CHARS`).

    Constants are defined in a subpackage's private modules and exported by its
    ``__init__``; autodoc reads the comments of the module it documents the name in, and
    else gives the docstring of the value's type (``float``'s), which is replaced here.
    """
    if what != "data":
        return
    if lines and getattr(obj, "__doc__", None) != getattr(type(obj), "__doc__", None):
        return  # a docstring of its own
    lines.clear()
    from sphinx.pycode import ModuleAnalyzer

    package_name, _, attribute = name.rpartition(".")
    package = sys.modules.get(package_name)
    for module in pkgutil.iter_modules(getattr(package, "__path__", [])):
        analyzer = ModuleAnalyzer.for_module(f"{package_name}.{module.name}")
        comment = analyzer.find_attr_docs().get(("", attribute))
        if comment:
            lines.extend(comment)
            break
    if len(repr(obj)) <= VALUE_SHOWN_CHARS:
        lines.extend(["", f"Value: ``{obj!r}``"])


def _find(path: str, module_name: str | None):
    """The object that a docstring's reference ``path`` names, seen from ``module_name``.

    Looks in the module, then in its subpackage's private modules (docstrings name
    their neighbours), then from the top; None when nothing has that name.
    """
    package = module_name or ""
    modules = [package]
    if package in sys.modules and hasattr(sys.modules[package], "__path__"):
        modules += [f"{package}.{m.name}" for m in pkgutil.iter_modules(
            sys.modules[package].__path__)]
    for prefix in [*modules, ""]:
        name = f"{prefix}.{path}".strip(".")
        head, *attributes = name.split(".")
        try:
            obj = importlib.import_module(head)
            for attribute in attributes:
                try:
                    obj = getattr(obj, attribute)
                except AttributeError:
                    obj = importlib.import_module(f"{obj.__name__}.{attribute}")
        except (ImportError, AttributeError):
            continue
        return obj
    return None


def _public_name(obj, path: str) -> str | None:
    """The name under which the API reference documents ``obj`` (or its attribute)."""
    first, _, rest = path.partition(".")
    for layer in PUBLIC_MODULES:
        module = importlib.import_module(layer)
        if first in getattr(module, "__all__", ()) and getattr(module, first) is (
                obj if not rest else _find(first, layer)):
            return f"{layer}.{path}"
    return None


def _resolve_private(app, env, node, contnode):
    """Resolve a docstring's reference to a name of this package that the site lacks.

    A public name reached by another path (``neumiss.load``) links to its page; a private
    name (``_store``, ``read_rows``) is shown as code without a link. A name that
    exists nowhere stays unresolved, so that the build (-n -W) fails on it.
    """
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    context = node.get("py:module")
    obj = _find(target, context)
    if obj is None and node.get("py:class"):
        obj = _find(f"{node['py:class']}.{target}", context)
    if obj is None or not getattr(obj, "__module__", getattr(obj, "__name__", "neumiss")
                                  ).startswith("neumiss"):
        return None
    for path in (target.removeprefix("neumiss."), target.rpartition(".")[2]):
        name = _public_name(obj, path)
        if name:
            domain = env.get_domain("py")
            found = domain.resolve_xref(env, node["refdoc"], app.builder, "obj", name,
                                        node, contnode)
            if found is not None:
                return found
    return contnode


def setup(app):
    app.connect("autodoc-process-docstring", _constant_doc, priority=100)
    app.connect("missing-reference", _resolve_private)
