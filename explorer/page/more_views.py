"""Every view findable before a run uses it: under the view tabs, a line names each tab the run shown leaves out
and the decoders whose runs fill it, each a link that opens such a run (on the first model offered that takes
that decoder). The browser hides the entries of the tabs the run shown has (``assets/js/scrub.js``), so on the
opening threshold run a visitor reads that S2D2, SimSD, TSPD + CE, ... each have their own views."""

from __future__ import annotations

import html
from urllib.parse import urlencode

from engine.catalogue import catalogue
from explorer.registry import CARDS, TABS

WORDS = {"Revisions": "decoders that change their mind", "KV cache": "a prefix or dual cache on a full-attention model"}


def tab_decoders() -> dict[str, list[str]]:
    """Tab -> the decoders whose runs fill it: a card's own views, and the revising decoders for Revisions (its
    rule reads the records, not a decoder's name). The Decode tab is every run's."""
    out = {tab: [c.decoder.name for c in CARDS if any(v.tab == tab for v in c.views)] for tab in TABS[1:]}
    out["Revisions"] = list(dict.fromkeys([n for n, d in catalogue.DECODERS.items() if d.revises]
                                          + out.get("Revisions", [])))
    return out


def link(page, decoder: str) -> str | None:
    """A link that opens a run of the decoder on the first model offered that takes it (None: no model here does)."""
    infos = getattr(page, "model_infos", None) or {}
    takes = lambda m: decoder in (infos.get(m) or {}).get("decoders", {}) and \
        infos[m]["decoders"][decoder] is None     # noqa: E731  (the model card's reason why not, or None)
    model = next((m for m in page.models if takes(m)), None)
    if model is None:
        return None
    query = {"decoder": decoder, **({"model": model} if model != page.models[0] else {})}
    words = catalogue.MENU[decoder][1].split(":")[0]
    return f"<a href='?{html.escape(urlencode(query))}'>{html.escape(words)}</a>"


def more_views_html(page) -> str:
    rows = []
    for tab, names in tab_decoders().items():
        links = [x for x in (link(page, n) for n in names) if x]
        how = "run " + " / ".join(links) if links else \
            html.escape(WORDS.get(tab, "a decoder this server does not offer"))
        rows.append(f"<li data-tab='{html.escape(tab)}'><b>{html.escape(tab)}</b>: {how}</li>")
    return ("<div class='um-more-views'>Views this run leaves out; each tab appears when a run fills it (a link "
            f"opens one): <ul>{''.join(rows)}</ul></div>")
