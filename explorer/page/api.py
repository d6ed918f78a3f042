"""The documented API: ``decode(prompt, spec)`` with the page's validation and limits, for ``gradio_client``.

    from gradio_client import Client
    out = Client("http://localhost:7860/").predict("Ann has 3 apples. She buys 5 more. How many?",
                                                   "threshold:tau=0.9,block_size=8", api_name="/decode")
"""

from __future__ import annotations

import gradio as gr

from engine.errors import UserError
from explorer.page.context import Page

SUMMARY_KEYS = ("text", "token_ids", "nfe", "decoder", "params", "generated_tokens", "model")


def summary(trace) -> dict:
    """The JSON summary of a trace the API returns (and the load test compares with the engine's own)."""
    out = {k: trace.meta[k] for k in SUMMARY_KEYS}
    out["limit"] = trace.meta.get("limit")
    out["wall_s"] = trace.meta["wall_s"]
    return out


def register_api(page: Page) -> None:
    def decode(prompt: str, spec: str) -> dict:
        """Decode `prompt` with a decoder SPEC (the CLI's syntax, e.g. "s2d2:preset=sdar-a") on the default
        model; returns text, token_ids, nfe, decoder, params, generated_tokens, model, wall_s (engine seconds) and
        limit (the request limit that stopped it early, if any)."""
        try:
            return summary(page.service.run_spec(prompt, spec, page.default_model, page=True))
        except UserError as e:
            raise gr.Error(str(e)) from None

    gr.api(decode, api_name="decode", concurrency_id="model", concurrency_limit=1)
