"""An animated GIF of a decode for slides: the answer unmasking forward by forward, drawn with Pillow from a trace.

Each frame is one forward: the step and the forward's kind on top; every generated position as a box (grey while
masked, then coloured by the confidence it was committed with, red → green); the tokens committed at this step
are outlined and tagged with their commit reason. The last frame is held longer.
"""

from __future__ import annotations

import colorsys
import io

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from explorer.views.reasons import REASONS
from explorer.grid import MASKED, NEW, Grid
from explorer.scrub import block_label
from explorer.tokens import display

TAGS = {code: tag for code, (_, _, tag) in REASONS.items()}   # the reason map's table, one place
WIDTH, PAD, BOX_H, GAP = 900, 12, 26, 6
MAX_FRAMES = 200


def confidence_rgb(c: float) -> tuple[int, int, int]:
    """The page's colour scale: hue 0 (red, p = 0) to 120 (green, p = 1), light."""
    if not np.isfinite(c):
        return (232, 232, 232)
    r, g, b = colorsys.hls_to_rgb(float(np.clip(c, 0, 1)) / 3, 0.82, 0.7)
    return int(r * 255), int(g * 255), int(b * 255)


def layout(trace, g: Grid, font) -> list[tuple[int, int, int, str]]:
    """(x, y, width, text) of every position's box, wrapped to the frame width, from the final tokens."""
    boxes, x, y = [], PAD, PAD + 44
    for j in range(len(g.positions)):
        text, _ = display(trace, g.tokens[-1][j])
        w = max(28, int(font.getlength(text)) + 10)
        if x + w > WIDTH - PAD:
            x, y = PAD, y + BOX_H + 18
        boxes.append((x, y, w, text))
        x += w + GAP
    return boxes


def frame(trace, g: Grid, s: int, boxes, font, small) -> Image.Image:
    height = boxes[-1][1] + BOX_H + 30 if boxes else 80
    img = Image.new("RGB", (WIDTH, height), "white")
    d = ImageDraw.Draw(img)
    rec = trace.records[s]
    d.text((PAD, PAD), f"{trace.meta.decoder} · step {s + 1} / {g.n_steps} · block {block_label(rec.block)} · {rec.kind}"
                       f" · NFE {rec.nfe}", fill=(60, 60, 60), font=font)
    prompt = trace.meta.prompt
    d.text((PAD, PAD + 20), prompt if len(prompt) <= 110 else prompt[:107] + "…", fill=(130, 130, 130), font=small)
    for j, (x, y, w, text) in enumerate(boxes):
        masked = g.state[s, j] == MASKED
        fill = (243, 243, 243) if masked else confidence_rgb(g.commit_confidence[j])
        new = g.state[s, j] == NEW
        d.rounded_rectangle((x, y, x + w, y + BOX_H), radius=4, fill=fill,
                            outline=(230, 85, 13) if new else (190, 190, 190), width=3 if new else 1)
        d.text((x + 5, y + 5), "·" if masked else text, fill=(150, 150, 150) if masked else (20, 20, 20), font=font)
        if new:
            tag = TAGS.get(int(g.reason[s, j]), "")
            d.text((x + 3, y + BOX_H + 2), tag, fill=(230, 85, 13), font=small)
    return img


def decode_gif(trace, ms_per_frame: int = 450, budget_s: float | None = None) -> bytes:
    """The GIF's bytes (at most MAX_FRAMES forwards: longer traces are sampled evenly, the last kept). With a
    budget, the last frame is drawn first and timed, and the frames are thinned so that drawing and encoding them
    fit in about half of it."""
    import time
    g = Grid.of(trace)
    font, small = ImageFont.load_default(size=15), ImageFont.load_default(size=10)
    boxes = layout(trace, g, font)
    t0 = time.perf_counter()
    last = frame(trace, g, g.n_steps - 1, boxes, font, small)
    most = MAX_FRAMES
    if budget_s is not None:        # encoding costs about as much again as drawing
        most = max(2, min(MAX_FRAMES, int(0.25 * budget_s / max(time.perf_counter() - t0, 1e-4))))
    steps = list(range(g.n_steps))
    if len(steps) > most:
        steps = sorted(set(np.linspace(0, g.n_steps - 1, most).astype(int).tolist()))
    frames = [frame(trace, g, s, boxes, font, small) for s in steps[:-1]] + [last]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], loop=0,
                   duration=[ms_per_frame] * (len(frames) - 1) + [2500], optimize=False)
    return buf.getvalue()
