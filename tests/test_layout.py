"""The tree reads as the pipeline: no import circle between modules (function-level imports
included), and the packages depend on each other in one direction only.

The rule (docs/design.md#the-code): ``hivestream`` → ``projections`` → ``streams``; inside ``streams``,
the apps (``workers``, ``produce``, ``ingest``) → the pipelines (``frames``, ``experiences``,
``stubs``, ``memory_calls``) → ``redaction`` / ``importers`` → ``model``, with ``settings`` and
``kafka`` below the apps. A pipeline never imports another pipeline's package except the one
dependency the design has: the KnowHub experience dedup reuses the frames dedup core.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("streams", "projections", "hivestream")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for p in (REPO / pkg).rglob("*.py"):
            parts = p.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            mods[name] = p
    return mods


def _edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the project modules it imports (anywhere in its body)."""
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{a.name}" for a in node.names} & mods.keys()
                if subs:
                    edges[m] |= subs
                elif node.module in mods:
                    edges[m].add(node.module)
            elif isinstance(node, ast.Import):
                edges[m] |= {a.name for a in node.names} & mods.keys()
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _package(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else mod


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _cycles(_edges(_modules())) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_packages_depend_in_one_direction() -> None:
    edges = _edges(_modules())
    pkg: dict[str, set[str]] = {}
    for m, targets in edges.items():
        for t in targets:
            a, b = _package(m), _package(t)
            if a != b:
                pkg.setdefault(a, set()).add(b)
    assert _cycles({p: pkg.get(p, set()) for p in {_package(m) for m in edges}}) == []
    # the layers: nothing below imports what is above it
    for p, targets in pkg.items():
        if p.startswith("streams."):
            assert not {t for t in targets if t.split(".")[0] in ("projections", "hivestream")}, p
        if p.startswith("projections."):
            assert not {t for t in targets if t.startswith("hivestream")}, p
    assert pkg.get("streams.model", set()) <= set(), pkg.get("streams.model")
    pipelines = {"streams.frames", "streams.experiences", "streams.stubs"}
    allowed = {("streams.experiences", "streams.frames")}  # the experience dedup reuses the frames dedup core
    for p in pipelines:
        for t in pkg.get(p, set()) & pipelines:
            assert (p, t) in allowed, f"{p} reaches into {t}"
    for p in ("streams.kafka",):
        assert not pkg.get(p, set()) & (pipelines | {"streams.workers", "streams.produce"}), pkg.get(p)
