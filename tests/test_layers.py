"""The layers of ``../shared/DESIGN.md``, enforced: imports only point down, and no package
reaches into another package's private (underscore) names.

Every module of ``src/ragmeter`` belongs to one layer (a new top-level module must be given
one here). A module may import its own layer's modules and the layers below it
(``MAY_IMPORT``); metrics and formats are siblings and do not import each other. Imports
under ``if TYPE_CHECKING:`` and inside functions count too: a coupling is a coupling.

The few known exceptions are listed in ``ALLOWED`` with their reason; the list may only
shrink. (A report is plain data the drivers make, so it sits below them.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ragmeter"
ADAPTERS = Path(__file__).resolve().parents[1] / "adapters"

LAYERS: dict[str, frozenset[str]] = {
    "foundations": frozenset({"_types", "_gc", "_version", "errors", "text"}),
    "records": frozenset({"schema", "spans", "aggregate"}),
    "metrics": frozenset({"metrics", "judge", "embed"}),
    "formats": frozenset({"io", "datasets"}),
    "reports": frozenset({"report", "registry"}),
    "drivers": frozenset({"evaluation"}),
    "results": frozenset({"stats", "stages"}),
    "surfaces": frozenset(
        {
            "__init__",
            "__main__",
            "capture",
            "cli",
            "dask",
            "html",
            "mlflow",
            "ragas_bridge",
            "server",
            "testing",
            "traces",
        }
    ),
}

_BASE = {"foundations", "records"}
MAY_IMPORT: dict[str, set[str]] = {
    "foundations": {"foundations"},
    "records": _BASE,
    "metrics": _BASE | {"metrics"},
    "formats": _BASE | {"formats"},
    "reports": _BASE | {"metrics", "reports"},
    "drivers": _BASE | {"metrics", "formats", "reports", "drivers"},
    "results": _BASE | {"metrics", "formats", "reports", "drivers", "results"},
    "surfaces": set(LAYERS),
}

ALLOWED: dict[tuple[str, str], str] = {
    ("ragmeter.report._html", "ragmeter.html"): "deprecated to_html (ragmeter.html writes pages)",
    ("ragmeter.stats._result", "ragmeter.html"): "deprecated CompareResult.to_html",
    ("ragmeter.stages", "ragmeter.html"): "deprecated StageReport.to_html",
    ("ragmeter.metrics.sample_retrieval", "ragmeter.evaluation.sample_retrieval"): (
        "the deprecated old path of ragmeter.evaluation.sample_retrieval"
    ),
}

# private names other packages still import: the scoring loop reaches into the metric
# kernel (issue 23 gives the kernel its public, columnar interface), and the text helpers
# of the lexical metrics
PRIVATE_ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        ("ragmeter.capture._dataset", "ragmeter.io.beir"),
        ("ragmeter.dask._rag", "ragmeter.evaluation._rag_rules"),
        ("ragmeter.datasets", "ragmeter.io.beir"),
        ("ragmeter.evaluation._query", "ragmeter.metrics._kernel"),
        ("ragmeter.evaluation._rag_rules", "ragmeter.metrics._kernel"),
        ("ragmeter.evaluation.scoring", "ragmeter.metrics._kernel"),
        ("ragmeter.evaluation.scoring", "ragmeter.metrics.registry"),
        ("ragmeter.evaluation.sample_retrieval", "ragmeter.metrics.lexical"),
        ("ragmeter.metrics.character", "ragmeter.spans"),
        ("ragmeter.metrics.faithfulness", "ragmeter.text"),
        ("ragmeter.metrics.lexical", "ragmeter.text"),
    }
)
SHARED_PRIVATE = frozenset({"ragmeter._types", "ragmeter._gc", "ragmeter._version"})
"""Foundation modules whose names every layer may import (underscored only to keep them
out of the public API)."""


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """``(imported module, names, line)`` of every absolute import of ``ragmeter*``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0].startswith("ragmeter"):
                found.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0].startswith("ragmeter"):
                    found.append((alias.name, [], node.lineno))
    return found


def _layer_of(module: str) -> str:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for layer, tops in LAYERS.items():
        if top in tops:
            return layer
    raise AssertionError(
        f"{module} is in no layer: add its top-level name to LAYERS in tests/test_layers.py "
        "(and to the table of ../shared/DESIGN.md)"
    )


def _target(module: str, names: list[str]) -> str:
    """``from ragmeter import x`` imports the module ``ragmeter.x`` when it is one."""
    submodule = SRC / names[0] if module == "ragmeter" and names else None
    if submodule is not None and (submodule.is_dir() or submodule.with_suffix(".py").exists()):
        return f"ragmeter.{names[0]}"
    return module


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "ragmeter" else parts[0]


SOURCES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_point_down(path: Path) -> None:
    me = "ragmeter" if path == SRC / "__init__.py" else f"ragmeter.{_module_name(path, SRC)}"
    mine = _layer_of(me)
    wrong = []
    for module, names, line in _imports(path):
        target = _target(module, names)
        if target == "ragmeter":
            continue  # the package's own re-exports: only surfaces import them
        theirs = _layer_of(target)
        if theirs in MAY_IMPORT[mine]:
            continue
        key = (me, ".".join(target.split(".")[:2]))
        if (me, target) in ALLOWED or key in ALLOWED:
            continue
        wrong.append(f"line {line}: {mine} module {me} imports {theirs} module {target}")
    assert not wrong, "\n".join(wrong)


def test_the_allowed_exceptions_still_exist() -> None:
    """An exception that was fixed comes off the list (the list only shrinks)."""
    seen = set()
    for path in SOURCES:
        me = "ragmeter" if path == SRC / "__init__.py" else f"ragmeter.{_module_name(path, SRC)}"
        for module, names, _ in _imports(path):
            target = _target(module, names)
            seen.add((me, target))
            seen.add((me, ".".join(target.split(".")[:2])))
    assert set(ALLOWED) <= seen, set(ALLOWED) - seen


def _private_imports() -> list[tuple[str, str, str, int]]:
    """``(importer, module, what, line)``: private modules or names of another package."""
    roots = [SRC.parent, *sorted(ADAPTERS.glob("*/src"))]
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            me = _module_name(path, root)
            for module, names, line in _imports(path):
                if _package(module) == _package(me) or module in SHARED_PRIVATE:
                    continue
                private_module = any(p.startswith("_") for p in module.split(".")[1:])
                private_names = [n for n in names if n.startswith("_") and not n.endswith("__")]
                if private_module or private_names:
                    what = ", ".join(private_names) or module
                    found.append((me, module, what, line))
    return found


def test_no_package_imports_another_packages_private_names() -> None:
    wrong = [
        f"{me} line {line} imports {what} from {module}"
        for me, module, what, line in _private_imports()
        if (me, module) not in PRIVATE_ALLOWED
    ]
    assert not wrong, "\n".join(wrong)


def test_the_private_exceptions_still_exist() -> None:
    seen = {(me, module) for me, module, _, _ in _private_imports()}
    assert seen >= PRIVATE_ALLOWED, PRIVATE_ALLOWED - seen
