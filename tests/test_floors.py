"""The imports stand on floors: no module imports one of a floor above its own (function-level imports included),
and the ground floor (``engine.catalogue``) imports no torch. docs/architecture.md draws the same picture."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# lowest first; a module may import its own floor and those below
FLOORS = [
    ("engine.errors", "engine.settings", "engine.catalogue"),
    ("engine.records", "engine.models", "engine.tasks"),
    ("engine.runtime",),
    ("engine.decoders",),
    ("engine.harness", "engine.__main__"),
    ("explorer",),
    ("app", "tools"),
]


def floor_of(module: str) -> int | None:
    for i, rooms in enumerate(FLOORS):
        if any(module == r or module.startswith(r + ".") for r in rooms):
            return i
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_no_import_goes_up_a_floor():
    up = []
    for path in [*ROOT.glob("engine/**/*.py"), *ROOT.glob("explorer/**/*.py")]:
        me = module_name(path)
        mine = floor_of(me)
        for target in imports_of(path):
            theirs = floor_of(target)
            if theirs is not None and mine is not None and theirs > mine:
                up.append(f"{me} -> {target}")
    assert not up, "imports up a floor:\n" + "\n".join(sorted(up))


def test_the_floor_test_sees_an_arrow_up(tmp_path):
    bad = ROOT / "engine" / "runtime" / "_probe_up.py"
    bad.write_text("def f():\n    from engine.harness.service import DecodeService\n")
    try:
        me = module_name(bad)
        assert any(floor_of(t) > floor_of(me) for t in imports_of(bad) if floor_of(t) is not None)
    finally:
        bad.unlink()


def test_the_ground_floor_imports_no_torch():
    code = ("import sys; import engine.catalogue.catalogue, engine.catalogue.applies, engine.catalogue.spec; "
            "engine.catalogue.cards.cards(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def engine_graph() -> dict[str, set[str]]:
    """Each engine module -> the engine modules its import statements name (function-level ones included);
    ``from pkg import sub`` names the submodule ``sub`` only."""
    paths = {module_name(p): p for p in ROOT.glob("engine/**/*.py")}
    graph = {}
    for me, path in paths.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{a.name}" for a in node.names} & paths.keys()
                deps |= subs or {node.module}
        graph[me] = {d for d in deps if d in paths and d != me}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, stack, on, out, count = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = count[0]
        count[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        group.append(x)
                        if x == v:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))
            elif w not in index:
                index[w] = low[w] = count[0]
                count[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def test_no_import_circle_in_the_engine():
    """The decoder plug-ins are found by listing their folders, not by importing the decoders' package from the
    ground floor: before, that one import tied nine modules into a circle (catalogue.cards -> decoders ->
    runtime.loop -> catalogue.cards ...)."""
    assert circles(engine_graph()) == []


def test_the_circle_finder_finds_one():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
