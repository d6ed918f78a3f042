"""Summary cards: model calls (NFE), tokens per call (TPF), time and tokens/s, and the checker's verdict when the
prompt is a known problem; each card's hover gives the exact term.

How to read: model calls (NFE) counts every model forward of the run (hover for draft / verify / commit); tokens per
call (TPF) is generated tokens per forward (autoregressive decoding is 1.0); both are the run's own, whoever else
uses the server. The model time is the engine's seconds for the decode's forwards, its share of the engine loop's
rounds (each round's time split among the decodes in it); the tokens/s says how many decodes ran at once, since in
a class it measures the room as much as the decoder; a cached run (decoded earlier) shows neither, in the same two
tiles. The line under the cards compares the
run with the previous one on the page (NFE and TPF). A warning names the prompt's words the
model does not know ([UNK]) and any request limit that stopped the run early.
"""

from __future__ import annotations

import html

from engine.catalogue.cards import cards as decoder_cards
from explorer import recorded
from engine.catalogue.catalogue import embedded_names
from explorer.glossary import plain_verdict


def card(label: str, value: str, hint: str = "") -> str:
    return (f"<div class='um-card' title='{html.escape(hint)}'><div class='um-card-v'>{html.escape(value)}</div>"
            f"<div class='um-card-l'>{html.escape(label)}</div></div>")


def speed_cards(m) -> list[str]:
    """What the run cost in time, in plain words (the exact term in the hover), kept apart from the room it ran in:
    the model's time for this decode's forwards (the engine's seconds: its share of the engine loop's rounds) and
    the tokens/s with how many decodes shared its rounds. Always two tiles, so the row keeps its layout between a
    live run and one decoded earlier (the trace cache, a pre-baked example), which shows no time: its times were
    another room's."""
    if m.cached:
        return [card("model time, s", "–", "not measured now: the run was decoded earlier and taken from the cache"),
                card("decoded earlier", "cached", "no tokens/s: the run was taken from the cache, not decoded now, so "
                     "no time of it belongs to this moment; the model calls and tokens per call are the run's own")]
    n, wall = m.generated_tokens, max(m.wall_s, 1e-9)
    room = "alone" if m.shared is None or m.shared < 1.5 else f"{m.shared:.0f} at once"
    return [engine_card(m.engine_s, wall),
            card(f"tokens/s, {room}", f"{n / wall:.1f}",
                 f"tokens/s over the wall time: {n} tokens in {wall:.3f} s from its first forward to its last, "
                 f"waiting for the other decodes of its rounds included ({room}): it measures the room too. The "
                 "model calls and tokens per call do not depend on it")]


def engine_card(engine_s: float | None, wall: float) -> str:
    """The engine's seconds for this decode; where they exceed the wall time, the hover says why."""
    if engine_s is None:
        return card("model time, s", "–", "engine seconds: not measured (the decode did not run on the engine loop)")
    why = (f" It reads above the wall time ({wall:.3f} s): a round's whole time is shared out, the loop's own work "
           "around the forward included (choosing the decodes, handing each its result), which the decode's clock, "
           "started at its first forward, does not count." if engine_s > wall else "")
    return card("model time, s", f"{engine_s:.3f}", "engine seconds: this decode's share of the engine loop's "
                "rounds, each round's time (one batched forward, then each decode's rule) split equally among the "
                "decodes in it; time spent waiting for a place is not counted." + why)


def paper_card(trace) -> str:
    """The forwards as the run's papers count them, with why they differ from NFE when they do, in the label's
    own words: the canvas's papers count its decoder's forwards (not the encoder's pass over the prompt), SDAR's
    and Fast-dLLM's code a prefill and a K/V-store forward per block, which Unmask fuses into its next forward."""
    encode = trace.meta.nfe_by_kind.get("encode", 0)
    label, why = "calls as papers count", ""
    if encode and trace.nfe_paper == trace.nfe - encode:
        label = "calls as papers count (decoder only)"
        why = (f"NFE as DiffusionGemma counts it (its tokens per forward): the decoder's forwards only; the "
               f"encoder's {encode} forward{'s' * (encode != 1)} over the prompt {'are' if encode != 1 else 'is'} "
               "counted in NFE, not here")
    elif trace.nfe_paper != trace.nfe:
        why = ("NFE as SDAR's and Fast-dLLM's code count it: a prefill forward and one K/V-store forward per "
               "block, which Unmask fuses into its next forward")
    else:
        why = "the same as NFE for this run: the papers count every forward it made"
    return card(label, str(trace.nfe_paper), why)


def render_summary(trace, verdict: str | None = None) -> str:
    m = trace.meta
    n = m.generated_tokens
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(m.nfe_by_kind.items()))
    cards = [card("model calls (NFE)", str(trace.nfe), f"NFE, the number of function evaluations: every model "
                  f"forward of the run ({kinds})"),
             paper_card(trace),
             card("tokens per call (TPF)", f"{trace.tpf:.2f}", "TPF: generated tokens per forward (autoregressive "
                  "decoding is 1.0)"),
             *speed_cards(m),
             card("tokens", str(n), "generated, up to and including the stop token"),
             card("decoder", m.decoder, str(m.params))]
    own = decoder_cards().get(m.decoder)
    extra, info = own.summary(m) if own is not None and own.summary else ([], [])   # the decoder's own cards
    cards += [card(*c) for c in extra]
    if verdict is not None:
        cards.append(card("checker", plain_verdict(verdict), f"the task's checker on the generated text: "
                          f"{verdict}"))
    notes, info = [], list(info) + ([recorded.note(m)] if recorded.note(m) else [])
    if m.unknown_words:
        words = ", ".join(repr(w) for w in m.unknown_words[:12])
        why = (": the embedded models only know the words of their tasks — pick an example to see them at their "
               "best." if m.model in embedded_names() else ": its tokenizer has no token for them.")
        notes.append(f"The model does not know {words} (read as [UNK]){why}")
    if m.limit:
        notes.append(f"Stopped early: {m.limit}. What finished is shown and can be explored.")
    warn = "".join(f"<div class='um-warn'>{html.escape(n)}</div>" for n in notes)
    note = "".join(f"<div class='um-note'>{html.escape(n)}</div>" for n in info)
    return "<div class='um-cards'>" + "".join(cards) + "</div>" + note + warn


def previous_delta(trace, prev) -> str:
    """One line comparing a run with the previous one on the page (kept for comparison): the figures that do not
    depend on the room (a wall tokens/s against a cached run's or another moment's would compare two rooms)."""
    pm = prev.meta
    shown = ("block_size", "tau", "steps", "router", "cost")
    setting = ", ".join(f"{k}={v}" for k, v in pm.params.items() if k in shown)
    same = pm.token_ids == trace.meta.token_ids
    return (f"<div class='um-delta'>vs previous run ({html.escape(pm.decoder)}, {html.escape(setting)}): "
            f"NFE {prev.nfe} → {trace.nfe} · TPF {prev.tpf:.2f} → {trace.tpf:.2f} · "
            f"text {'unchanged' if same else 'changed'}</div>")
