"""docs/results.md's tables equal a fresh drawing from their records, captions say when a record is older than the
code it measures, and every record written from now on carries its provenance."""

from __future__ import annotations

import json

import pytest

from tools import provenance
from tools.results import glance, render
from tools.results.__main__ import differing, redraw
from tools.results.render import Column, Table
from tools.results.tables import TABLES


def test_committed_tables_equal_their_records():
    _, changed = differing()
    assert not changed, f"run `python -m tools.results`: {changed}"


def test_every_table_of_the_registry_is_shown_and_reads_its_record():
    names = [t.name for t in TABLES]
    assert len(names) == len(set(names))
    for t in TABLES:
        assert len(t.lines(t.load())) > 2, t.name          # a header, a separator and at least one row


def test_a_marker_naming_no_table_is_an_error():
    with pytest.raises(SystemExit, match="nosuch"):
        redraw("<!-- table nosuch -->\n<!-- /table -->", {}, set())


def test_staleness_names_the_first_change_after_the_record():
    root = provenance.git("rev-list", "--max-parents=0", "HEAD").splitlines()[-1]
    head = provenance.git("rev-parse", "HEAD")
    assert "Older than the code it measures" in render.staleness(root, ("engine",))
    assert render.staleness(head, ("engine",)) == ""
    assert "not in this repository's history" in render.staleness("0" * 40, ("engine",))


def test_a_caption_reads_the_provenance_of_a_new_record(tmp_path, monkeypatch):
    record = provenance.stamp([{"spec": "ar", "x": 1.5}], argv=["--n", "2"])
    p = tmp_path / "results" / "new.json"
    p.parent.mkdir()
    p.write_text(json.dumps(record))
    monkeypatch.setattr(render, "ROOT", tmp_path)
    table = Table("new", "new.json", "rows", (Column("x", "x", ".2f"),), measures=("engine",))
    text = render.draw(table)
    assert "| 1.50 |" in text
    head = record["provenance"]["commit"]
    assert f"commit {head[:7]}" in text and "--n 2" in text and "torch" in text
    m = record["provenance"]["machine"]
    assert f"reference loop {m['loop_ms_at_start']} → {m['loop_ms_at_end']} ms" in text
    assert "Older than" not in text                       # measured at HEAD: nothing newer touched engine/


def test_provenance_has_what_a_reader_needs():
    p = provenance.provenance(["--flag"])
    assert p["commit"] and len(p["commit"]) == 40 and p["clean"] in (True, False)
    assert p["command"].endswith("--flag")
    assert p["versions"]["python"] and "torch" in p["versions"]
    m = p["machine"]
    assert m["cores"] >= 1 and m["cpu"] and len(m["load_at_start"]) == 3 and len(m["load_at_end"]) == 3
    assert m["loop_ms_at_start"] > 0 and m["loop_ms_at_end"] > 0       # the host's speed, at start and at the end
    assert p["date"][:2] == "20"
    given = provenance.provenance([], commit="abc1234")
    assert given["commit"] == "abc1234"


def test_the_readme_glance_is_one_drawn_line_per_claim():
    readme = (provenance.ROOT / "README.md").read_text()
    block = readme.split("<!-- table glance -->\n", 1)[1].split("<!-- /table -->", 1)[0]
    lines = block.strip().splitlines()
    assert len(lines) == len(glance.CLAIMS)
    for claim, line in zip(glance.CLAIMS, lines):
        assert line.startswith(f"- **{claim.title}**") and f"results/{claim.record}" in line


def test_a_claims_verdict_follows_its_records_outcomes():
    """The drafter claim's "within noise" is the paired test's, not typed: outcomes that differ enough flip it."""
    claim = next(c for c in glance.CLAIMS if c.record == "drafter_story_simplified.json")
    record = claim.load()
    assert "is within noise of" in claim.say(record)
    base, simsd = record["rows"]
    worse = dict(simsd, outcomes="0" * 30 + simsd["outcomes"][30:])
    assert "is not within noise of" in claim.say(dict(record, rows=[base, worse]))


def test_a_claim_naming_no_section_is_an_error():
    with pytest.raises(SystemExit, match="lacks"):
        glance.draw("# no sections here\n")
    assert glance.anchor("TSPD + CE against its rivals: Prophet") == "tspd--ce-against-its-rivals-prophet"


def test_results_doc_stays_short():
    """The issue's bound: one section per README claim and its table, history left to the records and git."""
    assert len((provenance.ROOT / "docs/results.md").read_text().splitlines()) <= 600
