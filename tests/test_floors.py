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
# the one way up: the catalogue finds each decoder folder's torch-free card.py by scanning the folders (plug-ins)
PLUGIN_SCAN = {("engine.catalogue.cards", "engine.decoders")}


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
            if theirs is not None and mine is not None and theirs > mine and (me, target) not in PLUGIN_SCAN:
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
