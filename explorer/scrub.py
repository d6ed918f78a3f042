"""What a finished run sends the browser once, so that scrubbing, play and selecting a position redraw there.

The text view and the candidates panel are drawn from this data both here (``text_html``, ``candidates_html``:
the page's first drawing and the source of truth) and in the browser (``assets/js/scrub.js``, a line-by-line port
of the two functions below, checked against them by ``tests/test_browser.py``). Probabilities travel as integer
hundredths (text) and thousandths (candidates), so both sides print the same digits.

Per column j (generated position ``pos[j]``): ``tok[j]`` the token after each forward as change points
``[step, string]`` (string -1 = [MASK]); ``new[j]`` the steps that committed it; ``cand[j]`` ``[step, string,
hundredths (truncated)]`` at each forward that scored it while masked; ``topk[j]`` ``[step, [strings],
[thousandths]]`` at those forwards; ``cstep[j]`` / ``cconf[j]`` its commit step and confidence; ``stop`` the
column of the stop token the run ended on (-1: none), after which the text folds the slots into one chip. Strings index ``disp`` (display text and
whether it continues the previous token) and ``raw`` (the vocabulary's string). Steps are 0-based here.
"""

from __future__ import annotations

import hashlib
import html
import json

import numpy as np

from engine.decoders.eb.card import EBFields
from engine.records.trace import own_records
from explorer.grid import Grid
from explorer.tokens import display

VERSION = 2


def hundredths(x, to: str = "nearest") -> int | None:
    """``to``: "down" for a draft's confidence (the τ preview's h ≥ 100 τ is then exactly c ≥ τ on the dial's 0.01
    grid; rounded, a 0.996 read as 1.00 and was marked as clearing τ 1, which commits only c = 1), "up" for the γ an
    EB slot needed (h ≤ 100 γ exactly when need ≤ γ). 1e-9 absorbs the float error of x * 100 (0.57 * 100 is
    56.99999999999999)."""
    if x is None or np.isnan(x):
        return None
    v = float(x) * 100
    return int(np.floor(v + 1e-9)) if to == "down" else int(np.ceil(v - 1e-9)) if to == "up" else int(round(v))


def payload(trace, grid: Grid | None = None) -> dict:
    """The run's per-step data (computed once per trace)."""
    g = grid or Grid.of(trace)
    if "scrub" not in g.memo:
        g.memo["scrub"] = _build(trace, g)
    return g.memo["scrub"]


def _build(trace, g: Grid) -> dict:
    strings: dict[int, int] = {}

    def sid(t) -> int:
        return strings.setdefault(int(t), len(strings)) if t >= 0 else -1

    mask_id = trace.meta.mask_token_id
    n_cols = g.end - g.P
    tok = [[] for _ in range(n_cols)]
    for j in range(n_cols):
        col = g.tokens[:, j]
        for s in np.flatnonzero(np.r_[True, col[1:] != col[:-1]]) if g.n_steps else []:
            tok[j].append([int(s), -1 if col[s] == mask_id else sid(col[s])])
    cand, topk = [[] for _ in range(n_cols)], [[] for _ in range(n_cols)]
    for s, j in np.argwhere(g.candidate >= 0):
        cand[j].append([int(s), sid(g.candidate[s, j]), hundredths(g.confidence[s, j], to="down")])
    for s, r in enumerate(trace.records):
        ids, ps = r.topk.topk_ids, r.topk.topk_p
        if ids is None:
            continue
        for i in np.flatnonzero((r.tokens_before == mask_id) & (r.positions >= g.P) & (r.positions < g.end)):
            topk[int(r.positions[i]) - g.P].append(
                [s, [sid(t) for t in ids[i]], [int(round(float(p) * 1000)) for p in ps[i]]])
    ids = sorted(strings, key=strings.get)
    return dict(v=VERSION, need=bound_needed(trace, g), n=g.n_steps, P=g.P, pos=[int(p) for p in g.positions],
                prompt=str(trace.meta.prompt), tok=tok, cand=cand, topk=topk,
                new=[[int(s) for s in np.flatnonzero(g.committed[:, j])] for j in range(n_cols)],
                cstep=[int(s) for s in g.commit_step], cconf=[hundredths(c) for c in g.commit_confidence],
                rec=[[int(r.block), str(r.kind)] for r in trace.records], stop=stop_column(trace, g),
                disp=[list(display(trace, t)) for t in ids], raw=[trace.token_str(t) for t in ids])


def bound_needed(trace, g: Grid) -> list:
    """EB's runs: per column, [step, hundredths (rounded up) of the γ the slot needed to be committed at that step] (the bound's
    left side at its rank, ``eb_bound[eb_order]``): a γ drag commits exactly the cells whose need is ≤ γ. Empty
    lists for other decoders."""
    need = [[] for _ in range(g.end - g.P)]
    for s, r, f in own_records(trace, EBFields):     # the uniform canvas's payload extends EB's
        if f.eb_order is None:
            continue
        rank, bound = f.eb_order, f.eb_bound
        for i in np.flatnonzero((rank >= 0) & (r.positions >= g.P) & (r.positions < g.end)):
            need[int(r.positions[i]) - g.P].append([s, hundredths(float(bound[rank[i]]), to="up")])
    return need


def would_pass_tau(d: dict, tau: float) -> list[tuple[int, int]]:
    """The (step, column) cells the τ preview marks at ``tau`` (``tune`` in assets/js/scrub.js, in the same integer
    hundredths): scored while masked with a confidence that clears τ, at a step that did not commit them. What the
    opening example is baked for and tested on (tools.experiments.bake_examples, tests/test_page_examples.py)."""
    k = int(np.floor(tau * 100 + 0.5))           # Math.round, not Python's round-half-to-even
    return [(e[0], j) for j, col in enumerate(d["cand"]) for e in col
            if e[-1] is not None and e[-1] >= k and e[0] not in d["new"][j]]


def stop_column(trace, g: Grid) -> int:
    """The column of the stop token the run ended on (-1 if it ran to its length)."""
    at_pos = trace.meta.stopped_at
    return int(at_pos) - g.P if at_pos is not None and g.P <= int(at_pos) < g.end else -1


def at(changes: list, s: int):
    """The value of a change-point list at step s (None before its first point)."""
    out = None
    for t, v in changes:
        if t > s:
            break
        out = v
    return out


def fmt(k: int | None, digits: int) -> str:
    return "–" if k is None else f"{k / 10 ** digits:.{digits}f}"


def hue(k: int | None) -> str:
    return "#e8e8e8" if k is None else f"hsl({120 * k // 100}, 70%, 82%)"


def revised_from(changes: list, s: int, t: int, since: int = -1):
    """The written token a slot held before its token at step s, if a decoder rewrote it (None otherwise). Only
    from ``since``, the slot's first commit, on: before it a uniform canvas's slot holds noise, whose replacement is
    the commit, not a change of mind."""
    out = None
    for step, v in changes:
        if step > s:
            break
        if step < since:
            continue
        if v != -1 and v != t:
            out = v
        elif v == -1:
            out = None
    return out


def chips(d: dict, s: int, selected: int | None) -> list[dict]:
    """The text view's slots at step s, each in its state: masked (with this step's draft, faded, if the forward
    proposed one), noise (a uniform canvas's random token, not kept yet), committed this step, committed earlier
    (coloured by its confidence), revised (old → new); the slots after a decoded stop token fold into one chip."""
    out, stop = [], d.get("stop", -1)
    ended = stop >= 0 and at(d["tok"][stop], s) not in (None, -1)
    for j, pos in enumerate(d["pos"]):
        if ended and j > stop:
            break
        t, cls, old = at(d["tok"][j], s), ["um-tok"], None
        if t is None or t == -1:
            c = next((e for e in d["cand"][j] if e[0] == s), None)
            cls.append("um-mask")
            text, cont, bg, title = "\u25a2", False, "#f3f3f3", "masked"
            if c:
                cls.append("um-draft")
                text = d["disp"][c[1]][0]
                title = f'masked; this step\'s draft is "{text}" (p {fmt(c[2], 2)})'
        elif not any(x <= s for x in d["new"][j]):
            text, cont = d["disp"][t]
            cls.append("um-noise")
            bg, title = "#f3f3f3", "noise: a random token the canvas has not kept yet"
        else:
            text, cont = d["disp"][t]
            bg = hue(d["cconf"][j])
            now = s in d["new"][j]
            title = (f"decoded at this step with p {fmt(d['cconf'][j], 2)}" if now else
                     f"decoded at step {d['cstep'][j] + 1} with p {fmt(d['cconf'][j], 2)}")
            if now:
                cls.append("um-new")
            r = revised_from(d["tok"][j], s, t, min(d["new"][j]))
            if r is not None:
                old = d["disp"][r][0]
                cls.append("um-rev")
                title += f'; revised from "{old}"'
        if cont:
            cls.append("um-cont")
        if selected == pos:
            cls.append("um-sel")
        out.append(dict(cls=" ".join(cls), pos=pos, text=text, title=f"position {pos}: {title}", bg=bg, old=old))
    if ended and stop + 1 < len(d["pos"]):
        n = len(d["pos"]) - stop - 1
        out.append(dict(cls="um-tok um-fold", pos=d["pos"][stop + 1], text=f"+{n}", old=None, bg="#f3f3f3",
                        title=f"position {d['pos'][stop + 1]}: {n} slots after the stop token, folded"))
    return out


def chip_html(c: dict) -> str:
    old = f"<s>{html.escape(c['old'])}</s>\u2192" if c["old"] is not None else ""
    return (f"<span class='{c['cls']}' data-pos='{c['pos']}' style='background:{c['bg']}' "
            f"title='{html.escape(c['title'])}'>{old}{html.escape(c['text'])}</span>")


def block_label(block: int) -> str:
    """Blocks are numbered from 1, as steps are (-1: the prompt's own forward)."""
    return str(block + 1) if block >= 0 else "prompt"


def text_html(d: dict, s: int, selected: int | None, run: str, finished: bool, slots: int = 0,
              ended: str | None = None) -> str:
    """The text view at step s (``slots``: the run's generated slots, for a streaming run's line; ``ended``: the
    line of a run stopped before its end, ``ended_line``, by default the run data's own)."""
    if d["n"] == 0:
        return "<div class='um-text'>(no steps)</div>"
    spans = "".join(chip_html(c) for c in chips(d, s, selected))
    block, kind = d["rec"][s]
    head = f"step {s + 1} / {d['n']}" if finished else progress(d, s, max(slots, len(d["pos"])))
    ended = d.get("ended") if ended is None else ended
    note = f"<div class='um-ended' role='status'>{html.escape(ended)}</div>" if ended and finished else ""
    # which run this is and whether it has ended: what tests (and scripts) wait for, never for time
    return (f"<div class='um-text' data-run='{html.escape(run)}' data-finished='{int(finished)}'>"
            f"<div class='um-step'>{head} · block {block_label(block)} · {html.escape(kind)}</div>{note}"
            f"<span class='um-prompt'>{html.escape(d['prompt'])}</span> {spans}</div>")


def undecided(d: dict, s: int, slots: int) -> int:
    """The generated slots not decided after step s (masked, or a uniform canvas's noise not kept yet)."""
    return slots - sum(1 for c in chips(d, s, None) if not {"um-mask", "um-noise", "um-fold"} & set(c["cls"].split()))


def progress(d: dict, s: int, slots: int) -> str:
    """A streaming run's line: the steps done and the slots still to decide (the blocks not reached yet hold only
    masks; each step decides at least one, except a revising decoder's), with no total: the run's own, and the
    slider's, come when it ends, so the page never shows two step counters that disagree."""
    return f"decoding… step {s + 1} done, {undecided(d, s, slots)} of {slots} slots still to decide"


STOPPED = "you pressed Stop"    # ``meta.limit`` of a run the visitor stopped (the other limits name themselves)


def ended_line(trace, d: dict) -> str:
    """The words of a run that ended before its text did (Stop, or a request limit), '' for one that ran to its
    end: where it stopped, what it left undecided, that the slider scrubs what was decoded, and (Stop) that Run
    decodes it again rather than serve another visitor's finished copy."""
    limit = trace.meta.limit
    if not limit or d["n"] == 0:
        return ""
    slots = max(trace.meta.gen_end - trace.meta.prompt_len, len(d["pos"]))
    left = undecided(d, d["n"] - 1, slots)
    why = "when you pressed Stop" if limit == STOPPED else f"by a limit ({limit})"
    again = "; Run decodes it again from its first step" if limit == STOPPED else ""
    return (f"Stopped at step {d['n']}, {why}: {left} of {slots} slots were still to decide. "
            f"The slider scrubs the {d['n']} steps decoded{again}.")


def candidates_html(d: dict, s: int, selected: int | None) -> str:
    if selected is None or d["n"] == 0:
        return "<div class='um-cand'>Click a token (or pick a position) to see its candidates.</div>"
    j = int(selected) - d["P"]
    if not 0 <= j < len(d["pos"]):
        return f"<div class='um-cand'>Position {int(selected)} is not in the generated region.</div>"
    seen = [e for e in d["topk"][j] if e[0] <= s]
    if not seen:
        return (f"<div class='um-cand'>Position {int(selected)} has not been scored while masked yet at step "
                f"{s + 1}.</div>")
    t, ids, ps = seen[-1]
    cs, final = d["cstep"][j], at(d["tok"][j], d["n"] - 1)
    status = (f"committed at step {cs + 1} as \"{html.escape(d['raw'][final])}\""
              if 0 <= cs <= s and final not in (None, -1) else "still masked")
    rows = "".join(f"<div class='um-cand-row'><span class='um-cand-tok'>{html.escape(d['raw'][i])}</span>"
                   f"<span class='um-cand-bar' style='width:{max(1, 240 * m // 1000)}px'></span>"
                   f"<span>{fmt(m, 3)}</span></div>" for i, m in zip(ids, ps))
    return f"<div class='um-cand'><b>position {int(selected)}</b> · step {t + 1} · {status}<div>{rows}</div></div>"


def embed(d: dict, query: str, step: int, run: str, example: bool, server_views: list[str],
          tabs: list[str] | None = None, tune: str | None = None, maps: list[str] = (), tune_map: str = "",
          views: list[str] | None = None, spec: str = "", ended: str = "") -> str:
    """The run's data as an inert element of the page (JSON in an attribute, HTML-escaped); ``tabs`` and
    ``views``: the view tabs and the views (their elements) with something to show for it (the browser hides the
    others); ``tune``: the dial whose drag the browser
    previews on the confidence map (the threshold family's τ), or None; ``maps``: the step × position maps whose
    cells select a position on click, and ``tune_map`` the map the preview marks (the registry's, so the browser
    names no view); ``spec``: the run's SPEC, which Compare's A follows (assets/js/compare_follow.js); ``ended``: the
    line of a run stopped early (``ended_line``)."""
    meta = dict(query=query, step=step, run=run, example=example, server=server_views, tabs=tabs, tune=tune,
                maps=list(maps), tune_map=tune_map, views=views, spec=spec, ended=ended)
    blob = json.dumps(dict(d, **meta), separators=(",", ":"), ensure_ascii=True)
    # what the browser compares (the JSON is large): the data's own digest, as every pre-baked run is "example"
    key = f"{html.escape(run, quote=True)}:{step}:{hashlib.blake2b(blob.encode(), digest_size=8).hexdigest()}"
    return f"<div class='um-run-data' hidden data-key='{key}' data-json='{html.escape(blob, quote=True)}'></div>"
