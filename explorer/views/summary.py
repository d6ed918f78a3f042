"""Summary cards: NFE, TPF, tokens/s, steps, and the checker's verdict when the prompt is a known problem.

How to read: NFE counts every model forward of the run (hover for draft / verify / commit); TPF is generated
tokens per forward (autoregressive decoding is 1.0); tokens/s is the engine's own time, without rendering. The
line under the cards compares the run with the previous one on the page. A warning names the prompt's words the
model does not know ([UNK]) and any request limit that stopped the run early.
"""

from __future__ import annotations

import html

from engine.catalogue.cards import cards as decoder_cards
from engine.catalogue.catalogue import embedded_names


def card(label: str, value: str, hint: str = "") -> str:
    return (f"<div class='um-card' title='{html.escape(hint)}'><div class='um-card-v'>{html.escape(value)}</div>"
            f"<div class='um-card-l'>{html.escape(label)}</div></div>")


def render_summary(trace, verdict: str | None = None) -> str:
    m = trace.meta
    n = m.generated_tokens
    wall = max(m.wall_s, 1e-9)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(m.nfe_by_kind.items()))
    cards = [card("NFE", str(trace.nfe), f"model forwards: {kinds}"),
             card("NFE papers' count", str(trace.nfe_paper), "as SDAR's and Fast-dLLM's code count: a prefill "
                  "forward and one K/V-store forward per block, which Unmask fuses into its next forward"),
             card("TPF", f"{trace.tpf:.2f}", "generated tokens per forward"),
             card("tokens/s (engine)", f"{n / wall:.1f}", f"{n} tokens in {wall:.3f} s of engine time; rendering "
                  "is not counted, but in the page it shares the CPU, so the API or CLI gives the clean figure"),
             card("tokens", str(n), "generated, up to and including the stop token"),
             card("decoder", m.decoder, str(m.params))]
    own = decoder_cards().get(m.decoder)
    extra, info = own.summary(m) if own is not None and own.summary else ([], [])   # the decoder's own cards
    cards += [card(*c) for c in extra]
    if verdict is not None:
        cards.append(card("checker", verdict, "the task's checker on the generated text (valid = right)"))
    notes, info = [], list(info)
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
    """One line comparing a run with the previous one on the page (kept for comparison)."""
    def speed(t):
        return t.meta.generated_tokens / max(t.meta.wall_s, 1e-9)

    pm = prev.meta
    shown = ("block_size", "tau", "steps", "router", "cost")
    setting = ", ".join(f"{k}={v}" for k, v in pm.params.items() if k in shown)
    same = pm.token_ids == trace.meta.token_ids
    return (f"<div class='um-delta'>vs previous run ({html.escape(pm.decoder)}, {html.escape(setting)}): "
            f"NFE {prev.nfe} → {trace.nfe} · TPF {prev.tpf:.2f} → {trace.tpf:.2f} · "
            f"tokens/s {speed(prev):.1f} → {speed(trace):.1f} · text {'unchanged' if same else 'changed'}</div>")
