"""An animated GIF of a decode for slides: the answer unmasking forward by forward, drawn with Pillow from a trace.

Each frame is one forward and shows the text view's own slots (``explorer.scrub.chips``) in the text view's colour
code, with the same legend under them: masked, this step's draft (a faded proposal), committed at this step
(outlined, tagged with its commit reason), committed earlier (coloured by its confidence, red → green), revised
(old struck through → new), and a uniform canvas's noise. The last frame is held longer.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageColor, ImageDraw, ImageFont

from explorer.grid import NEW, Grid
from explorer.scrub import block_label, chips, hue, payload
from explorer.views.reasons import REASONS

TAGS = {code: tag for code, (_, _, tag) in REASONS.items()}   # the reason map's table, one place
WIDTH, PAD, BOX_H, GAP, ROW = 900, 12, 26, 6, 44
MAX_FRAMES = 200
# the text view's classes (assets/style.css) in Pillow's terms: (text colour, outline colour, outline width)
STYLE = {"um-mask": ((153, 153, 153), (187, 187, 187), 1), "um-draft": ((138, 138, 138), (187, 187, 187), 1),
         "um-noise": ((154, 154, 154), (170, 170, 170), 1), "um-new": ((20, 20, 20), (230, 85, 13), 3),
         "um-rev": ((20, 20, 20), (122, 1, 119), 3), "um-fold": ((119, 119, 119), (204, 204, 204), 1)}
PLAIN = ((20, 20, 20), (190, 190, 190), 1)
LEGEND = (("um-tok um-mask", "·", "masked"), ("um-tok um-mask um-draft", "draft", "this step's proposal"),
          ("um-tok um-new", "new", "committed now"), ("um-tok", "sure", "earlier, by confidence"),
          ("um-tok", "unsure", ""), ("um-tok um-rev", "new", "revised"), ("um-tok um-noise", "noise", "not kept yet"))


def load_fonts() -> tuple:
    """(font, small font, speller): DejaVu Sans where the system has it (Greek and arrows, as the page writes
    them), else Pillow's own font, which has neither: then the speller writes them in ASCII."""
    try:
        return ImageFont.truetype("DejaVuSans.ttf", 14), ImageFont.truetype("DejaVuSans.ttf", 10), str
    except OSError:
        return ImageFont.load_default(size=15), ImageFont.load_default(size=10), ascii_words


def ascii_words(text: str) -> str:
    return text.replace("→", "->").replace("τ", "tau")


def style(cls: str) -> tuple:
    """The strongest of a chip's classes (a revised token committed now is outlined as revised)."""
    names = cls.split()
    return next((STYLE[k] for k in ("um-rev", "um-new", "um-draft", "um-noise", "um-mask", "um-fold")
                 if k in names), PLAIN)


def label(c: dict) -> str:
    text = "·" if "um-mask" in c["cls"] and "um-draft" not in c["cls"] else c["text"]
    return f"{c['old']}→{text}" if c["old"] is not None else text


def layout(frames: list[list[dict]], font, words) -> dict[int, tuple[int, int, int]]:
    """(x, y, width) of every slot's box, the widest it gets in any frame, wrapped to the frame width: boxes
    never move between frames."""
    widest: dict[int, int] = {}
    width: dict[str, int] = {}     # by text: a 200-step run's 40 000 chips, a few hundred texts (1.57 -> 0.04 s)
    for row in frames:
        for c in row:
            text = words(label(c))
            if text not in width:
                width[text] = int(font.getlength(text)) + 10
            widest[c["pos"]] = max(widest.get(c["pos"], 28), width[text])
    boxes, x, y = {}, PAD, PAD + ROW
    for pos in sorted(widest):
        if x + widest[pos] > WIDTH - PAD:
            x, y = PAD, y + BOX_H + 18
        boxes[pos] = (x, y, widest[pos])
        x += widest[pos] + GAP
    return boxes


def chip(d: ImageDraw.ImageDraw, c: dict, x: int, y: int, w: int, font, words) -> None:
    """One slot as the text view draws it: its background, its outline, its text (the old token struck through)."""
    ink, edge, width = style(c["cls"])
    d.rounded_rectangle((x, y, x + w, y + BOX_H), radius=4, fill=ImageColor.getrgb(c["bg"]), outline=edge,
                        width=width)
    tx = x + 5
    if c["old"] is not None:
        old, arrow = words(c["old"]), words("→")
        d.text((tx, y + 5), old, fill=edge, font=font)
        d.line((tx, y + BOX_H // 2, tx + font.getlength(old), y + BOX_H // 2), fill=edge, width=1)
        d.text((tx + int(font.getlength(old)), y + 5), arrow, fill=edge, font=font)
        tx += int(font.getlength(old + arrow))
    text = words(label(c) if c["old"] is None else c["text"])
    d.text((tx, y + 5), text, fill=ink, font=font)
    if "um-noise" in c["cls"]:
        d.line((tx, y + BOX_H // 2, tx + font.getlength(text), y + BOX_H // 2), fill=(200, 200, 200), width=1)


def legend(d: ImageDraw.ImageDraw, y: int, small, words) -> None:
    x = PAD
    for cls, text, meaning in LEGEND:
        bg = hue(95) if text == "sure" else hue(15) if text == "unsure" else "#ffffff" if "um-new" in cls or \
            "um-rev" in cls else "#f3f3f3"
        c = dict(cls=cls, text=text, bg=bg, old="old" if "um-rev" in cls else None)
        w = int(small.getlength(words(label(c)))) + 12
        chip(d, c, x, y, w, small, words)
        d.text((x + w + 4, y + 7), meaning, fill=(90, 90, 90), font=small)
        x += w + int(small.getlength(meaning)) + 16


def frame(trace, d: dict, g: Grid, s: int, row: list[dict], boxes, fonts) -> Image.Image:
    font, small, words = fonts
    bottom = max(y for _, y, _ in boxes.values()) if boxes else PAD + ROW
    img = Image.new("RGB", (WIDTH, bottom + BOX_H + 60), "white")
    dr = ImageDraw.Draw(img)
    rec = trace.records[s]
    dr.text((PAD, PAD), f"{trace.meta.decoder} · step {s + 1} / {g.n_steps} · block {block_label(rec.block)} · "
                        f"{rec.kind} · NFE {rec.nfe}", fill=(60, 60, 60), font=font)
    prompt = trace.meta.prompt
    dr.text((PAD, PAD + 20), prompt if len(prompt) <= 110 else prompt[:107] + "…", fill=(130, 130, 130), font=small)
    column = {p: j for j, p in enumerate(d["pos"])}
    for c in row:
        x, y, w = boxes[c["pos"]]
        chip(dr, c, x, y, w, font, words)
        j = column[c["pos"]]
        if g.state[s, j] == NEW and "um-fold" not in c["cls"]:
            dr.text((x + 3, y + BOX_H + 2), words(TAGS.get(int(g.reason[s, j]), "")), fill=(230, 85, 13),
                    font=small)
    legend(dr, bottom + BOX_H + 24, small, words)
    return img


def decode_gif(trace, ms_per_frame: int = 450, budget_s: float | None = None, should_stop=None) -> bytes | None:
    """The GIF's bytes (at most MAX_FRAMES forwards: longer traces are sampled evenly, the last kept). With a
    budget, the last frame is made first and timed, and the frames are thinned so that making them fits in about
    half of it. ``should_stop()`` true between two frames (the visitor left) ends it with None."""
    import time
    g = Grid.of(trace)
    d = payload(trace, g)
    fonts = load_fonts()
    rows = [chips(d, s, None) for s in range(g.n_steps)]
    boxes = layout(rows, fonts[0], fonts[2])
    stop = should_stop or (lambda: False)
    if stop():       # a visitor gone while the frames were laid out
        return None
    t0 = time.perf_counter()
    last = paletted(frame(trace, d, g, g.n_steps - 1, rows[-1], boxes, fonts))
    most = MAX_FRAMES
    if budget_s is not None:
        most = max(2, min(MAX_FRAMES, int(0.5 * budget_s / max(time.perf_counter() - t0, 1e-4))))
    steps = list(range(g.n_steps))
    if len(steps) > most:
        steps = sorted(set(np.linspace(0, g.n_steps - 1, most).astype(int).tolist()))
    frames = []
    for s in steps[:-1]:
        if stop():
            return None
        frames.append(paletted(frame(trace, d, g, s, rows[s], boxes, fonts)))
    frames.append(last)
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], loop=0,
                   duration=[ms_per_frame] * (len(frames) - 1) + [2500], optimize=False)
    return buf.getvalue()


def paletted(img: Image.Image) -> Image.Image:
    """A frame in the GIF's 256 colours, as Pillow's GIF writer would make it (its own median cut, the same bytes),
    but here, between two presence checks: it is nine tenths of making the GIF (1.64 of 1.85 s for 63 frames), and
    inside the writer it could not be stopped once the visitor had left."""
    return img.convert("P", palette=Image.Palette.ADAPTIVE)
