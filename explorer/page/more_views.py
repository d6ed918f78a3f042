"""Every view findable before a run uses it: under the view tabs' strip, a line names each tab the run shown
leaves out and the decoders whose runs fill it, each a link that opens such a run and that tab. The browser hides
the entries of the tabs the run shown has (``assets/js/scrub.js``), so on the opening threshold run a visitor reads
that S2D2, SimSD, TSPD + CE, ... each have their own views.

A link is the setting of the decoder's pre-baked example (``assets/examples``: its model, prompt and dials) when
that example fills the tab: a run the decoder takes on a prompt its model knows, with a setting that makes the
view non-empty (token editing's example edits; the canvas decodes arithmetic, the one task the uniform model
knows). A decoder without such an example gets a plain link: its defaults on the first model offered that takes
it. Either way ``tab=`` opens the tab once the run is shown, when the run fills it."""

from __future__ import annotations

import html
from urllib.parse import urlencode

from engine.catalogue import catalogue
from explorer.registry import CARDS, TABS, tabs_shown
from explorer.state import to_query
from explorer.views.trajectory import telling

# a tab whose view opens at a step of its own: the link opens the run there, so the slider and the title agree; and
# one whose view follows the selected position: the link selects one it has something for (the first revised)
OPEN_AT = {"TSPD + CE": lambda tr: {"step": (telling(tr) or (len(tr.records) - 1,))[0] + 1},
           "Revisions": lambda tr: {"pos": tr.revisions()[0][1]} if tr.revisions() else {},
           "Canvas": lambda tr: {"pos": tr.meta.prompt_len}}      # the answer's first slot: its history fills
WORDS = {"Revisions": "decoders that change their mind", "KV cache": "a prefix or dual cache on a full-attention model"}


def tab_decoders() -> dict[str, list[str]]:
    """Tab -> the decoders whose runs fill it: a card's own views, and the revising decoders for Revisions (its
    rule reads the records, not a decoder's name). The Decode tab is every run's."""
    out = {tab: [c.decoder.name for c in CARDS if any(v.tab == tab for v in c.views)] for tab in TABS[1:]}
    out["Revisions"] = list(dict.fromkeys([n for n, d in catalogue.DECODERS.items() if d.revises]
                                          + out.get("Revisions", [])))
    return out


def takes(page, model: str, decoder: str) -> bool:
    """Whether the page offers the model and its card takes the decoder (the card's reason why not, or None)."""
    decoders = ((getattr(page, "model_infos", None) or {}).get(model) or {}).get("decoders", {})
    return model in page.models and decoder in decoders and decoders[decoder] is None


def example_for(page, tab: str, decoder: str):
    """The decoder's pre-baked example that fills the tab, on a model the page offers that takes it (or None)."""
    return next((t for t in (getattr(page, "example_traces", None) or {}).values()
                 if t.meta.decoder == decoder and takes(page, t.meta.model, decoder) and tab in tabs_shown(t)), None)


def href(page, tab: str, decoder: str) -> str | None:
    """The query of a run of the decoder that fills the tab, with the tab to open (None: no model here takes it)."""
    example = example_for(page, tab, decoder)
    if example is not None:
        at = OPEN_AT[tab](example) if tab in OPEN_AT else {}
        # every dial of the example, not only those off the decoder's defaults: the page's controls open at the
        # values they show, which need not be the decoder's (TSPD's B is 16, the page's slider 8)
        m = example.meta
        return "?" + to_query({**m.params, "prompt": m.prompt, "decoder": decoder, "model": m.model, "tab": tab,
                               **at})
    model = next((m for m in page.models if takes(page, m, decoder)), None)
    if model is None:
        return None
    return "?" + urlencode({"decoder": decoder, **({"model": model} if model != page.models[0] else {}), "tab": tab})


def link(page, tab: str, decoder: str) -> str | None:
    query = href(page, tab, decoder)
    if query is None:
        return None
    words = catalogue.MENU[decoder][1].split(":")[0]
    return f"<a href='{html.escape(query)}' data-decoder='{html.escape(decoder)}'>{html.escape(words)}</a>"


def more_views_html(page) -> str:
    rows = []
    for tab, names in tab_decoders().items():
        links = [x for x in (link(page, tab, n) for n in names) if x]
        how = "run " + " / ".join(links) if links else \
            html.escape(WORDS.get(tab, "a decoder this server does not offer"))
        rows.append(f"<li data-tab='{html.escape(tab)}'><b>{html.escape(tab)}</b>: {how}</li>")
    return ("<div class='um-more-views'>Views this run leaves out; each tab appears when a run fills it (a link "
            f"opens one): <ul>{''.join(rows)}</ul></div>")
