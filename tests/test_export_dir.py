"""Export files: one private folder per process, capped, removed at exit, dead processes' folders swept."""

import os
import subprocess
import sys

from explorer.export_dir import ExportDir, sweep_leftovers


def test_folder_is_private_capped_and_removed(tmp_path, adapter):
    from engine.decoders import build_decoder
    from engine.runtime.loop import Generation
    d = ExportDir(str(tmp_path), cap_bytes=10_000)
    assert d.path.name.startswith(f"unmask-export-{os.getpid()}-") and d.path.stat().st_mode & 0o777 == 0o700
    for k, prompt in enumerate(["Ann has 3 pens . How many pens does she have now ?",
                                "Ben has 5 eggs . He eats 2 eggs . How many eggs does he have now ?"]):
        d.write(Generation(adapter, prompt, build_decoder("threshold", block_size=4, gen_length=16)).run())
    assert sum(f.stat().st_size for f in d.path.iterdir()) <= 10_000
    d.remove()
    assert not d.path.exists()


def test_dead_processes_folders_are_swept_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = tmp_path / f"unmask-export-{int(dead.stdout)}-abc"
    mine = tmp_path / f"unmask-export-{os.getpid()}-def"
    other = tmp_path / "unrelated"
    for p in (gone, mine, other):
        p.mkdir()
    assert sweep_leftovers(tmp_path) == 1
    assert not gone.exists() and mine.exists() and other.exists()


def test_the_folder_goes_at_exit(tmp_path):
    code = ("import sys; from explorer.export_dir import ExportDir; d = ExportDir(sys.argv[1]); "
            "(d.path / 'x.json').write_text('{}'); print(d.path)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert not os.path.exists(out.stdout.strip())


def test_the_gif_is_made_once_per_trace_and_fits_its_budget(tmp_path):
    import io
    import time
    from pathlib import Path

    from PIL import Image

    from engine.records.trace import Trace
    from explorer.export_dir import ExportDir
    from explorer.gif import decode_gif
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "s2d2.npz")
    d = ExportDir(str(tmp_path))
    first = d.write_gif(tr)
    stamp = Path(first).stat().st_mtime_ns
    time.sleep(0.01)
    assert d.write_gif(tr) == first and Path(first).stat().st_mtime_ns == stamp     # not drawn again
    assert Image.open(io.BytesIO(decode_gif(tr))).n_frames == len(tr.records)
    assert Image.open(io.BytesIO(decode_gif(tr, budget_s=1e-6))).n_frames == 2     # first and last only
    d.remove()


def test_a_gif_whose_visitor_left_stops_between_frames_and_is_not_kept(tmp_path):
    from pathlib import Path

    from engine.records.trace import Trace
    from explorer.export_dir import ExportDir
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "s2d2.npz")
    asked = []

    def gone_after_three():
        asked.append(1)
        return len(asked) > 3
    d = ExportDir(str(tmp_path))
    assert d.write_gif(tr, should_stop=gone_after_three) is None and len(asked) == 4
    assert not d.gifs and not list(Path(d.path).glob("*.gif"))          # nothing kept for a later request
    assert d.write_gif(tr) is not None                                  # a visitor who stays gets it
    d.remove()


def test_a_gifs_colours_are_reduced_between_its_presence_checks_not_after_the_last(monkeypatch):
    """Reducing a frame to the GIF's 256 colours is nine tenths of the work: each frame's is done before the next
    check, so a visitor who leaves after the last check costs at most one frame's (Pillow's GIF writer did all of
    them after it: 1.6 s for 63 frames, paid for a visitor who had left)."""
    from pathlib import Path

    from PIL import Image

    from engine.records.trace import Trace
    from explorer.gif import decode_gif
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "s2d2.npz")
    events, convert = [], Image.Image.convert

    def logged(self, mode=None, *args, **kw):
        events.append("reduce" if mode == "P" else "other")
        return convert(self, mode, *args, **kw)
    monkeypatch.setattr(Image.Image, "convert", logged)
    assert decode_gif(tr, should_stop=lambda: events.append("check") or False)
    checks = [i for i, e in enumerate(events) if e == "check"]
    assert len(checks) == len(tr.records) and events.count("reduce") == len(tr.records)
    assert events[checks[-1]:].count("reduce") <= 1, events[checks[-1]:]


def test_a_gif_asks_for_its_visitor_before_any_frame_and_measures_each_chip_text_once(monkeypatch):
    """Before its first frame a GIF lays every slot out (the widest its chip gets in any step): that measured each
    chip of each step, 40 000 for a 200-step run (1.6 s, done for a visitor who had left: CI's failed GIF row).
    Each distinct text is measured once, and the visitor is asked for before the first frame is drawn."""
    from pathlib import Path

    from PIL import Image, ImageFont

    from engine.records.trace import Trace
    from explorer.gif import decode_gif
    tr = max((Trace.load(p) for p in (Path(__file__).resolve().parent.parent / "assets" / "examples").glob("*.npz")),
             key=lambda t: len(t.records))
    events, getlength, convert = [], ImageFont.FreeTypeFont.getlength, Image.Image.convert

    def measured(self, text, *args, **kw):
        events.append(("measure", self.size, text))
        return getlength(self, text, *args, **kw)

    def logged(self, mode=None, *args, **kw):
        events.append(("reduce" if mode == "P" else "other",))
        return convert(self, mode, *args, **kw)
    monkeypatch.setattr(ImageFont.FreeTypeFont, "getlength", measured)
    monkeypatch.setattr(Image.Image, "convert", logged)
    assert decode_gif(tr, should_stop=lambda: events.append(("check",)) or False)
    before = events[:events.index(("check",))]
    assert before and all(e[0] == "measure" for e in before), sorted({e[0] for e in before})   # no frame drawn
    assert len(before) == len(set(before)), len(before) - len(set(before))        # each text once


def test_a_shared_example_is_written_once_and_again_only_when_its_files_went(tmp_path, monkeypatch):
    """Every page open exports the opening example: a frozen (shared) trace's files are written once and served
    again while they stand as written; a plain trace is written each time; a file the cap removed is written
    again."""
    import os
    from pathlib import Path

    from engine.records.frozen import freeze
    from engine.records.trace import Trace
    from explorer import export_dir
    path = Path(__file__).resolve().parent.parent / "assets" / "examples" / "llada.npz"
    shared, plain = freeze(Trace.load(path)), Trace.load(path)
    writes, real = [], export_dir.export_files
    monkeypatch.setattr(export_dir, "export_files", lambda tr, d: writes.append(tr) or real(tr, d))
    d = export_dir.ExportDir(str(tmp_path))
    first = d.write(shared)
    assert d.write(shared) == first and len(writes) == 1              # served again, not written
    d.write(plain), d.write(plain)
    assert len(writes) == 3                                            # a run's own trace: written each time
    os.unlink(first[2])                                                # the cap took one
    assert d.write(shared) == first and len(writes) == 4 and all(os.path.isfile(p) for p in first)
    d.remove()
