"""The package's import graph: layers only import downwards, no module cycles, argparse
only in the CLI. Reads the sources with ``ast`` (imports inside functions count too);
imports nothing of the package, so no JAX."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "curiosity_search"

# Lowest first. A module may import its own top-level package or module, and those of
# strictly lower layers; packages of one layer never import each other.
LAYERS = (
    ("errors", "atomic_io", "compilation_cache"),  # utilities for every layer
    ("envs",),
    ("search", "nets", "htp"),
    ("curiosity",),
    ("testing", "rules"),
    ("config",),
    ("train",),
    ("eval",),
    ("plots", "sweeps", "bench"),
    ("cli",),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
# What ``from curiosity_search import NAME`` reaches (the package's own facade).
ROOT_NAMES = {"__version__": "errors", "load_agent": "train"}


def module_names() -> dict[str, Path]:
    """``curiosity_search.x.y`` -> its file, for every module of the package."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


MODULES = module_names()


def resolve(name: str) -> str:
    """The module a dotted import name lands in (a package's attribute: the package)."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports(module: str) -> Iterator[tuple[str, str]]:
    """``(imported module, name imported from the package root or "")`` for each
    import of the package in ``module``."""
    tree = ast.parse(MODULES[module].read_text())
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "curiosity_search":
                    yield resolve(alias.name), ""
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] != "curiosity_search":
                continue
            for alias in node.names:
                target = resolve(f"{base}.{alias.name}")
                yield target, alias.name if target == "curiosity_search" else ""


def layer(module: str, root_name: str = "") -> str:
    """The top-level package or module of ``module`` (``root_name``: what is imported
    from the package root)."""
    if module == "curiosity_search":
        return ROOT_NAMES.get(root_name, "errors")
    return module.split(".")[1]


def test_every_top_level_name_has_a_layer():
    tops = {layer(m) for m in MODULES if m != "curiosity_search"}
    assert tops <= set(RANK), f"place {sorted(tops - set(RANK))} in LAYERS"


def test_imports_go_downwards():
    upward = []
    for module in MODULES:
        if module == "curiosity_search":
            continue  # the facade: load_agent imports train lazily
        own = layer(module)
        for target, root_name in imports(module):
            other = layer(target, root_name)
            if other != own and RANK[other] >= RANK[own]:
                upward.append(f"{module} -> {target}{'.' + root_name if root_name else ''}")
    assert not upward, "imports that are not downwards:\n" + "\n".join(sorted(set(upward)))


def test_no_import_cycles():
    graph = {m: {t for t, _ in imports(m) if t != m} for m in MODULES}
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_argparse_only_in_the_cli():
    users = [
        m for m, path in MODULES.items()
        if layer(m) != "cli" and any(
            (isinstance(n, ast.Import) and any(a.name == "argparse" for a in n.names))
            or (isinstance(n, ast.ImportFrom) and n.module == "argparse")
            for n in ast.walk(ast.parse(path.read_text()))
        )
    ]
    assert not users, f"library modules importing argparse: {users}"
