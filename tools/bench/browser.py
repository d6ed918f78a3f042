"""Chromium for the page's benchmarks and browser tests: Debian's headless shell (``apt-get install
chromium-headless-shell``), else its full browser (``chromium``) run headless, with the background work that would
share the machine's two cores with the app turned off."""

from __future__ import annotations

import contextlib
from pathlib import Path

# the headless shell is Blink without the browser's own UI layer (Playwright's own default for headless runs): a
# page open and a run cost its processes about half the CPU the full browser's take (5.6 -> 3.1 CPU-s over three,
# alternated on one app); the full browser is the fallback, the same pages and scripts
SHELL, FULL = "/usr/bin/chromium-headless-shell", "/usr/bin/chromium"
CHROMIUM = SHELL if Path(SHELL).exists() or not Path(FULL).exists() else FULL


def launch(p):
    """A headless Chromium from a started ``sync_playwright()`` ``p``."""
    return p.chromium.launch(executable_path=CHROMIUM, headless=True,
                             args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                   "--disable-component-update", "--disable-sync", "--no-first-run"])


@contextlib.contextmanager
def chromium():
    """``launch`` inside its own Playwright, closed afterwards."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = launch(p)
        try:
            yield browser
        finally:
            browser.close()
