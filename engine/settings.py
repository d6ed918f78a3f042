"""Every operator setting (``UNMASK_*`` environment variable) in one table: its type, range, default and meaning.

``check_all()`` runs once when the app starts: a value that is not of its type or out of its range stops the
server before it serves, with one line naming the variable (an operator who mistyped a limit must not run a public
Space on limits they did not choose). Each reader (``get``) checks its variable again, so the CLI and tests get
the same refusal. docs/security.md's table of settings is tested against ``SETTINGS``. No torch here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


class SettingError(SystemExit):
    """A bad operator setting: one line, exit status 2, before anything is served."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Setting:
    name: str
    kind: type           # int, float, str, or bool (a bool is "0" or "1")
    default: object
    lo: float | None = None
    hi: float | None = None
    doc: str = ""
    choices: tuple = ()  # a str setting's allowed values (empty: any)

    def parse(self, raw: str):
        if self.kind is str:
            if self.choices and raw not in self.choices:
                raise SettingError(f"{self.name}={raw[:40]!r}: must be one of {', '.join(self.choices)}")
            return raw
        if self.kind is bool:
            if raw not in ("0", "1"):
                raise SettingError(f"{self.name}={raw[:40]!r}: must be 0 or 1")
            return raw == "1"
        try:
            value = self.kind(raw)
        except ValueError:
            raise SettingError(f"{self.name}={raw[:40]!r}: must be {'an integer' if self.kind is int else 'a number'}"
                               ) from None
        if not (self.lo is None or value >= self.lo) or not (self.hi is None or value <= self.hi) or value != value:
            raise SettingError(f"{self.name}={raw[:40]!r}: must be in [{self.lo:g}, {self.hi:g}]")
        return value


SETTINGS = {s.name: s for s in (
    Setting("UNMASK_MODELS", str, "", doc="extra models the page offers: local directories or hub ids, commas"),
    Setting("UNMASK_MAX_SECONDS", float, 60.0, 0.01, 1e6, "wall-time budget of one request, seconds"),
    Setting("UNMASK_MAX_RUNNING", int, 0, 0, 1024, "decodes that share one round of the engine loop "
            "(0: the device's default, 16 on a CPU, 64 on an accelerator)"),
    Setting("UNMASK_ROUND_TOKENS", int, 4096, 1, 1 << 20, "query tokens in one round of the engine loop "
            "(a round always runs at least one request)"),
    Setting("UNMASK_WAITING", int, 256, 1, 8192, "requests waiting for the model, all clients together (the fair "
            "queue's bound; beyond it the most served waiting request leaves, or the newcomer is refused)"),
    Setting("UNMASK_PER_ADDRESS", int, 128, 2, 8192, "requests of one pool of clients (an IPv4 /24 or IPv6 /32) "
            "waiting for the model, all its sessions and kinds together (128: a class of 64 behind one address, "
            "each with one running and one waiting)"),
    Setting("UNMASK_TRUSTED_PROXIES", str, "", doc="addresses or networks (commas) whose X-Forwarded-For is "
            "believed (uvicorn's FORWARDED_ALLOW_IPS); empty: none, the socket's address counts, except on a Space "
            "(SPACE_ID set), where the right-most non-private X-Forwarded-For address counts"),
    Setting("UNMASK_SESSIONS", int, 256, 1, 100_000, "sessions whose page state is kept"),
    Setting("UNMASK_SESSION_IDLE_S", float, 600.0, 1.0, 1e7, "seconds after which an idle session's state goes"),
    Setting("UNMASK_THREADS", int, 0, 0, 1024, "torch's intra-op threads (0: torch's default)"),
    Setting("UNMASK_QUEUE", int, 1024, 1, 10_000, "gradio's queue size: events gradio has not yet started (the "
            "model's requests pass through it on their way to the fair queue, so it must hold a class's burst)"),
    Setting("UNMASK_MAX_BODY", int, 1 << 20, 4096, 1 << 30, "bytes of one HTTP request's body (larger: refused "
            "with 413 before it is kept; the page sends a few kB, a decode call less)"),
    Setting("UNMASK_CACHE_DIR", str, "", doc="the trace cache's folder (default ~/.cache/unmask)"),
    Setting("UNMASK_TRACES", str, "", doc="recorded traces the page opens (docs/record.md): .npz files or folders "
            "of them, commas; a visitor picks one by name (?trace=NAME), never by path"),
    Setting("UNMASK_ALLOW_DOWNLOAD", bool, False, doc="1: models named by hub id may be downloaded"),
    Setting("UNMASK_STATIC", str, "auto", doc="the static forward path (engine/models/static.py): auto (on a CUDA "
            "device only), on (every device; on a CPU eager over the static buffers), off", choices=("auto", "on",
                                                                                                  "off")),
    Setting("UNMASK_LAYOUT", str, "auto", doc="the layout of a round's batched eager forward (engine/runtime/"
            "batch.py): auto (ragged on a CPU, else packed or padded by their estimated cost), ragged, packed or "
            "padded on every device (ragged needs sdpa attention: else auto's choice)", choices=("auto", "ragged",
                                                                                               "packed", "padded")),
    Setting("UNMASK_PAUSED_MB", int, 1024, 0, 1 << 20, "what decodes paused for others (fair share) may keep on the "
            "device (K/V caches, slot rows included, and kept distributions), all together, in MiB; past it no decode "
            "pauses: it keeps its place until it ends"),
    Setting("UNMASK_STATIC_MB", int, 0, doc="the device memory budget in MiB over everything the byte ledger counts "
            "(engine/models/memory.py: K/V slot pools, graphs, static buffers, what decodes keep between forwards, "
            "the running round's logits and statistics; 0: a quarter of the device's memory on a GPU, no bound on a "
            "CPU); past it a decode waits for a place, a round runs fewer decodes, no graph is captured and no pool "
            "grows (the decode keeps a dynamic cache), and a decode that alone cannot fit is refused with one line"),
    Setting("UNMASK_COMPILE", str, "auto", doc="a compiled forward (torch.compile) for the static path's buckets, "
            "compiled in the background while the model serves eagerly (engine/models/compiled.py): auto (where "
            "measured exact and faster: nowhere yet), on (every model and device; brings the static path on a "
            "CPU), off", choices=("auto", "on", "off")),
    Setting("UNMASK_CUDA_GRAPHS", bool, True, doc="1: the static path captures one CUDA graph per shape bucket and "
            "replays it; 0: eager over the static buffers (ZeroGPU, where a graph would not outlive its lease)"),
)}


def get(name: str):
    """The setting's value from the environment, or its default; a bad value raises ``SettingError``."""
    s = SETTINGS[name]
    raw = os.environ.get(name)
    return s.default if raw is None or (raw == "" and s.kind is not str) else s.parse(raw)


def check_all() -> dict:
    """Every setting's value (``SettingError`` at the first bad one)."""
    return {name: get(name) for name in SETTINGS}


def table() -> str:
    """The settings as a Markdown table (docs/security.md holds this text; a test compares them)."""
    rows = ["| variable | type | default | range | meaning |", "|---|---|---|---|---|"]
    for s in SETTINGS.values():
        span = f"{s.lo:g} – {s.hi:g}" if s.lo is not None else ""
        rows.append(f"| `{s.name}` | {s.kind.__name__} | {s.default!r} | {span} | {s.doc} |")
    return "\n".join(rows)
