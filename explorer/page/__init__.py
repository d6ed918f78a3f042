"""The parts of the Gradio page, one feature each: ``controls`` (prompt, model, decoder and its parameters, from
the catalogue), ``decode_tab`` (the live decode and its views), ``playback`` (step slider, ◀ / ▶ / play, position),
``share`` (link, export, page load from the URL), ``tour``, ``compare``, ``sweep``, ``masks``. Each builds its
components and keeps its handlers at module level; ``explorer.layout`` wires the parts together."""
