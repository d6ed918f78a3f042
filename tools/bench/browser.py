"""Chromium for the page's benchmarks and browser tests: Debian's build (``apt-get install chromium``), headless,
with the background work that would share the machine's two cores with the app turned off."""

from __future__ import annotations

import contextlib

CHROMIUM = "/usr/bin/chromium"


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
