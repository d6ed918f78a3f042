"""One catalogue parameter (``Param``): its type, default, range and words, and how a raw value becomes a checked
one. The catalogue (``engine.catalogue.catalogue``) holds the instances."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from engine.errors import ConfigError


@dataclass(frozen=True)
class Param:
    type: type
    default: object
    lo: float | None = None
    hi: float | None = None
    open_lo: bool = False                # (lo, ...: lo itself is not allowed
    open_hi: bool = False
    choices: tuple = ()
    label: str = ""
    help: str = ""
    step: float | None = None            # slider step on the page
    page: tuple | None = None            # (lo, hi) on the public page, if narrower
    group: str = "common"                # where the page shows it
    cli: str = ""                        # flag stem when it differs from the name (booleans: --X / --no-X)
    model: bool = False                  # names a model: on the public page only the embedded ones
    name: str = ""

    def interval(self, page: bool = False) -> str:
        lo, hi = (self.page if page and self.page else (self.lo, self.hi))
        if self.type is int:
            return f"{lo}..{hi}"
        return f"{'(' if self.open_lo else '['}{lo:g}, {hi:g}{')' if self.open_hi else ']'}"

    def coerce(self, raw):
        """A value from text (SPEC, URL, CLI) or Python -> the parameter's type; ConfigError if it is not one."""
        bad = ConfigError(f"{self.name}={str(raw)[:40]!r} is not a valid {self.type.__name__}")
        if self.type is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise bad
        if self.type is str:
            if not isinstance(raw, str):
                raise bad
            return raw.strip()
        if isinstance(raw, bool):
            raise bad
        try:
            value = float_text(raw) if self.type is float else raw if isinstance(raw, int) else int_text(raw)
        except (TypeError, ValueError, OverflowError):
            raise bad from None
        if self.type is float and not math.isfinite(value):
            raise ConfigError(f"{self.name} must be a finite number")
        return value

    def check(self, value, page: bool = False) -> None:
        if self.choices and value not in self.choices:
            shown = ", ".join(c or "''" for c in self.choices)
            raise ConfigError(f"{self.name} must be one of {shown}")
        if self.lo is None or self.type in (bool, str):
            return
        lo, hi = self.page if page and self.page else (self.lo, self.hi)
        ok = (value > lo if self.open_lo else value >= lo) and (value < hi if self.open_hi else value <= hi)
        if not ok:
            raise ConfigError(f"{self.name} must be in {self.interval(page)}"
                              + (" on this page" if page and self.page else ""))

    def clamp(self, value, page: bool = True):
        """Into the (page) range: URL values and shared page controls are clamped, not refused."""
        if self.lo is None or self.type in (bool, str):
            return value
        lo, hi = self.page if page and self.page else (self.lo, self.hi)
        if self.open_hi and value >= hi:
            hi = hi - 0.01 if self.type is float else hi - 1
        if self.open_lo and value <= lo:
            lo = lo + 0.01 if self.type is float else lo + 1
        return self.type(min(max(value, lo), hi))


NUMBER_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.ASCII | re.I)


def int_text(raw) -> int:
    """Python's int() also reads Arabic-Indic and other Unicode digits ("٣"); a parameter takes ASCII digits only."""
    text = str(raw).strip()
    if len(text) > 20 or not re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII):
        raise ValueError(text)
    return int(text)


def float_text(raw) -> float:
    if isinstance(raw, (int, float)):
        return float(raw)
    text = str(raw).strip()
    if len(text) > 40 or not NUMBER_RE.fullmatch(text):
        raise ValueError(text)
    return float(text)


# the parameters every decoder with a block loop reads
COMMON = ("block_size", "gen_length", "temperature", "top_k", "top_p", "seed", "use_cache", "stop_at_eos",
          "fuse_commit", "kv_cache", "measure_drift")


@dataclass(frozen=True)
class Decoder:
    name: str
    summary: str
    params: tuple[str, ...]
    overrides: dict = field(default_factory=dict)     # key -> Param fields that differ for this decoder
    presets: dict = field(default_factory=dict)
    rules: tuple = ()                                  # (predicate over the values, message) cross-field checks
    proposed: bool = False                             # our design, labelled so in the page
    needs: tuple = ()                                  # "block_causal", "full", "no_shift", "canvas": what the
    #                                                    model must offer (engine.catalogue.applies)
    title: str = ""                                    # the page's box for the parameters of group == name
    revises: bool = False                              # may rewrite or re-mask tokens it wrote
    knob: str = ""                                     # the parameter a sweep varies (its speed/quality dial); none
    #                                                    for decoders without a block size (dream, uniform)
    resources: tuple = ()                              # what it needs besides the target (engine.runtime.resources)
    preview: str = ""                                  # the dial whose drag the page previews cell by cell: "tau"
    #                                                    (commits every slot with confidence ≥ τ) or
    #                                                    "entropy_bound" (EB's records give the γ each slot needs)
