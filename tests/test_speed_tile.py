"""The summary's speed tile tells the decoder from the room: the same decode alone and beside eleven others on the
engine loop reads the same NFE, TPF and token count; its wall tokens/s names how many decodes shared its rounds
(alone, then a dozen), and a run taken from the cache says so instead of replaying another moment's speed."""

from __future__ import annotations

import re
from html import unescape
import threading

from engine.harness.service import DecodeService
from explorer.views.summary import previous_delta, render_summary

PROMPT = "Tell a story about a yak named Finn."
SETTING = ("threshold", {"tau": 0.9, "block_size": 8, "gen_length": 64})


def tiles(html: str) -> dict[str, str]:
    """label -> value of each card."""
    return dict((unescape(label), unescape(value)) for value, label in
                re.findall(r"<div class='um-card-v'>([^<]*)</div><div class='um-card-l'>([^<]*)</div>", html))


def test_the_same_decode_alone_and_beside_eleven_others_reads_the_same_tiles():
    service = DecodeService(default_model="unmask-tasks-small", max_seconds=120)
    alone = service.run(PROMPT, *SETTING)
    crowd, threads = [None] * 12, []

    def one(i):
        # the others decode longer answers, so the watched decode (#0) runs inside a full room
        setting = SETTING if i == 0 else ("threshold", {"tau": 0.99, "block_size": 8, "gen_length": 128})
        crowd[i] = service.run(PROMPT, *setting)

    for i in range(12):
        threads.append(threading.Thread(target=one, args=(i,)))
    for t in reversed(threads):                  # the others first: #0 joins a running room
        t.start()
    for t in threads:
        t.join(timeout=600)
    loaded = crowd[0]
    a, b = tiles(render_summary(alone)), tiles(render_summary(loaded))
    for label in ("model calls (NFE)", "calls as papers count", "tokens per call (TPF)", "tokens", "decoder"):
        assert a[label] == b[label], (label, a, b)
    assert "tokens/s, alone" in a and a["model time, s"] != "–" and b["model time, s"] != "–", (a, b)
    shared = [k for k in b if k.startswith("tokens/s, ") and k.endswith("at once")]
    assert shared and int(shared[0].split(", ")[1].split()[0]) >= 2, b      # the room is named, not hidden
    assert loaded.meta.shared > 1.5 and alone.meta.shared == 1.0, (alone.meta.shared, loaded.meta.shared)
    assert alone.meta.engine_s > 0 and loaded.meta.engine_s > 0


def test_a_cached_run_says_decoded_earlier_and_the_delta_compares_no_rooms():
    service = DecodeService(default_model="unmask-tasks-small", max_seconds=60)
    run = service.run(PROMPT, *SETTING)
    live = tiles(render_summary(run))
    run.meta.cached = True
    t = tiles(render_summary(run))
    assert t.get("decoded earlier") == "cached" and t["model time, s"] == "–", t
    assert not any(k.startswith("tokens/s") for k in t), t
    assert len(t) == len(live), (t, live)                  # the same tiles in the same places: the row keeps its layout
    assert "tokens/s" not in previous_delta(run, run)


def test_the_engines_seconds_above_the_wall_say_why():
    from explorer.views.summary import engine_card
    assert "above the wall time" in engine_card(1.778, 1.76) and "above" not in engine_card(1.2, 1.76)
    assert "–" in engine_card(None, 1.0)
