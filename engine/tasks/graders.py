"""Graders of the data tasks (``engine.tasks.data``): generated text + the problem's gold answer -> a verdict.

number   GSM8K, scored exactly as lm-evaluation-harness 0.4.13's ``gsm8k`` task scores it, in one of its two named
         filters: ``strict-match`` (the first ``#### (-?[0-9.,]+)``) or ``flexible-extract`` (the *last* match of
         ``(-?[$0-9.,]{2,})|(-?[0-9]+)``), then its ``exact_match`` with ``regexes_to_ignore`` (``,``, ``\\$``,
         ``(?s).*#### ``, ``\\.$``) and ``ignore_case`` against the whole gold solution. A third mode, ``value``
         (Unmask's own, not the field's), reads the ``####`` number or else the last number and compares values
         (``72`` = ``72.00``).
exact    the stripped text, case-folded, equals the answer (its first line).
choice   the first standalone letter A–J of the text (or of "answer is (X)") equals the answer's.
math     the content of the last ``\\boxed{…}`` (braces balanced), normalised (spaces, ``\\left`` / ``\\right``,
         ``\\dfrac`` → ``\\frac``, ``^\\circ``, ``\\$``, text units, a trailing full stop) equals the answer's, or
         both read as the same number.
code     never graded here: ``engine.tasks.sandbox`` runs the tests, only from the command line, when asked.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

GSM_RE = re.compile(r"#### *(\-?[0-9\.\,]+)")
NUMBER_RE = re.compile(r"-?\$?[0-9][0-9,]*(?:\.[0-9]+)?")


def _number(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", "").replace("$", "").rstrip("."))
    except InvalidOperation:
        return None


def extract_number(text: str, strict: bool = True) -> Decimal | None:
    """The answer number of a GSM8K-style text (None when it has none)."""
    m = GSM_RE.search(text)
    if m:
        return _number(m.group(1))
    if strict:
        return None
    found = NUMBER_RE.findall(text)
    return _number(found[-1]) if found else None


LMEVAL_FILTERS = {"strict-match": (re.compile(r"#### (\-?[0-9\.\,]+)"), 0),
                  "flexible-extract": (re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)"), -1)}
LMEVAL_IGNORE = (",", "\\$", "(?s).*#### ", "\\.$")
NUMBER_MODES = (*LMEVAL_FILTERS, "value")


def lmeval_filter(text: str, mode: str) -> str:
    """lm-eval's ``regex`` filter then ``take_first``: the match its group_select picks, or "[invalid]"."""
    regex, group = LMEVAL_FILTERS[mode]
    found = regex.findall(text)
    if not found:
        return "[invalid]"
    m = found[group]
    if isinstance(m, tuple):
        m = next((g for g in m if g), "[invalid]")
    return m.strip()


def lmeval_exact_match(pred: str, gold: str) -> bool:
    """lm-eval's ``exact_match`` as the gsm8k task configures it (regexes_to_ignore, then ignore_case)."""
    for rx in LMEVAL_IGNORE:
        pred, gold = re.sub(rx, "", pred), re.sub(rx, "", gold)
    return pred.lower() == gold.lower()


def grade_number(text: str, gold: str, mode: str = "strict-match") -> bool:
    if mode in LMEVAL_FILTERS:
        return lmeval_exact_match(lmeval_filter(text, mode), gold)
    want, got = extract_number(gold, strict=False), extract_number(text, strict=False)
    return got is not None and want is not None and got == want


def grade_exact(text: str, gold: str) -> bool:
    return text.strip().splitlines()[0].strip().casefold() == gold.strip().casefold() if text.strip() else False


CHOICE_RE = re.compile(r"answer is \(?([A-J])\)?|\b([A-J])\b")


def grade_choice(text: str, gold: str) -> bool:
    m = CHOICE_RE.search(text)
    return bool(m) and (m.group(1) or m.group(2)) == gold.strip().strip("()").upper()


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{…}`` (or ``\\fbox{…}``), braces balanced; None if there is none."""
    at = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if at < 0:
        return None
    start = text.find("{", at)
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i]
    return None


UNIT_RE = re.compile(r"\\(?:text|mbox|mathrm)\{\s*(?:units?|cm|m|km|inches|inch|feet|ft|degrees?|cents?|dollars?)\s*\}")


def normalise_math(s: str) -> str:
    s = UNIT_RE.sub("", s)
    for a, b in (("\\left", ""), ("\\right", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\ ", ""),
                 ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("^\\circ", ""), ("^{\\circ}", ""), ("\\$", ""),
                 ("$", ""), ("\\%", ""), ("%", "")):
        s = s.replace(a, b)
    s = re.sub(r"\\text\{\s*([^{}]*)\}", r"\1", s)
    s = re.sub(r"\s+", "", s).rstrip(".")
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)           # \frac12 -> \frac{1}{2}
    return s[2:] if s.startswith("x=") or s.startswith("y=") else s


MATH_MODES = ("math-verify", "normalise")


def math_mode() -> str:
    """The MATH grader this installation uses: Hugging Face's math-verify (the eval extra) where installed, else
    Unmask's string normalisation (named apart in every bench row)."""
    try:
        import math_verify  # noqa: F401
        return "math-verify"
    except ImportError:
        return "normalise"


def grade_math(text: str, gold: str, mode: str | None = None) -> bool:
    """The last ``\\boxed{}`` of the text against the gold answer: equivalent by math-verify (LaTeX to SymPy), or
    equal after ``normalise_math`` (or as plain numbers without commas: "3, 5" is a list, never 35)."""
    got = last_boxed(text)
    if got is None:
        return False
    if (mode or math_mode()) == "math-verify":
        return math_verify_equal(got, gold)
    a, b = normalise_math(got), normalise_math(gold)
    if a == b:
        return True
    if "," in a or "," in b:
        return False
    x, y = _number(a), _number(b)
    return x is not None and y is not None and x == y


def math_verify_equal(answer: str, gold: str) -> bool:
    """math-verify's verdict on two LaTeX answers. Its time limits use SIGALRM, which only the main thread may set:
    elsewhere (the page's Sweep) they are off."""
    import threading
    from math_verify import parse, verify
    limit = 5 if threading.current_thread() is threading.main_thread() else None
    g = parse(f"${gold}$", parsing_timeout=limit)
    p = parse(f"$\\boxed{{{answer}}}$", parsing_timeout=limit)
    return bool(g) and bool(p) and verify(g, p, timeout_seconds=limit)


GRADERS = {"number": grade_number, "exact": grade_exact, "choice": grade_choice, "math": grade_math}
