"""What ``python app.py`` checks and says before it loads a model: the port is free (a second start on a busy port
stops at once with one line, instead of loading every model and dying in a traceback while the first server goes
on answering), and one log line names the settings in force (who counts as a visitor, the limits), so an operator
sees Space mode switched on or off without reading the code. No torch here (``explorer`` never imports it)."""

from __future__ import annotations

import gc
import os
import socket

from engine import settings
from explorer.page import proxy

# the limits an operator most often changes, in the order the log line names them
LIMITS = ("UNMASK_MAX_SECONDS", "UNMASK_MAX_RUNNING", "UNMASK_WAITING", "UNMASK_PER_ADDRESS", "UNMASK_QUEUE",
          "UNMASK_SESSIONS")


def address() -> tuple[str, int]:
    """The host and port the server will listen on: gradio's variables, as app.py passes them (gradio itself
    refuses a port that is not a number when it is imported)."""
    return os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"), int(os.environ.get("GRADIO_SERVER_PORT", "7860"))


def bound(host: str, port: int) -> OSError | None:
    """None where a server could listen on the port now, else the bind's error. SO_REUSEADDR as uvicorn sets it: a
    port left in TIME_WAIT by a server that just stopped is free to it, so it is free here too."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e
    return None


def free_near(host: str, port: int, tries: int = 20) -> int | None:
    """The first port after ``port`` that is free now (None if the next ``tries`` are all taken)."""
    return next((p for p in range(port + 1, min(port + 1 + tries, 65536)) if bound(host, p) is None), None)


def check_port(host: str, port: int) -> None:
    """Refuses a port another process listens on, naming one that is free now (so the hint works as typed)."""
    e = bound(host, port)
    if e is None:
        return
    other = free_near(host, port)
    hint = (f"start this one on a free port (GRADIO_SERVER_PORT={other} python app.py)" if other else
            "start this one on a free port (GRADIO_SERVER_PORT=<port> python app.py)")
    raise settings.SettingError(f"port {port} on {host} is busy ({e.strerror or e}): is Unmask already running? "
                                f"Stop it, or {hint}") from None


def settings_line() -> str:
    """One line: who counts as a visitor (Space mode and its forwarded-for rule, or the named proxies) and the
    limits in force."""
    if proxy.mode() == "space":
        who = "Space mode: a visitor is the right-most public X-Forwarded-For address (SPACE_ID is set)"
    elif proxy.forwarded_allow_ips():
        who = f"X-Forwarded-For believed from {proxy.forwarded_allow_ips()} only (UNMASK_TRUSTED_PROXIES)"
    else:
        who = "a visitor is the socket's address (no proxy trusted; X-Forwarded-For ignored)"
    limits = ", ".join(f"{name.removeprefix('UNMASK_')}={settings.get(name) or 'the device default':}"
                       for name in LIMITS)
    models = settings.get("UNMASK_MODELS") or "embedded only"
    return f"unmask: {who}; limits {limits}; models: {models}"


def settle_heap() -> None:
    """Once the app is built (models loaded, page made): every object alive now moves to the collector's permanent
    generation (``gc.freeze``), so no later collection walks it. A full collection stops every thread, the event
    loop's too, for as long as it walks the heap: with gradio, torch, plotly and the models' objects about 0.8 s on
    this project's 2-core machine, once every few hundred thousand allocations (a class of page Runs drawing at
    once), where the event loop must not stall over 100 ms (``tests/test_page_drawing.py``)."""
    gc.collect()
    gc.freeze()


# s: how often gradio's queue looks for new work while it has none (gradio: every 1 ms, 10 ms for progress). A
# thousand wake-ups a second kept an idle server at 6.8 % of a core (1.35 CPU-s in 20 s, no visitor): on a Space
# that is the whole time nobody visits, and each app the tests start. At 10 ms an event waits at most 10 ms more
# to start, under the 16 ms of a frame; the page's own previews (scrub, tune by eye) never wait for the server.
IDLE_POLL_S = 0.01
PROGRESS_POLL_S = 0.05


def quiet_queue(queue) -> None:
    """Gradio's queue (``demo.queue()``'s, once made) polls at ``IDLE_POLL_S`` when free, ``PROGRESS_POLL_S`` for
    progress messages when no event runs, and keeps no traffic summary."""
    queue.sleep_when_free = IDLE_POLL_S
    queue.progress_update_sleep_when_free = PROGRESS_POLL_S
    # gradio recomputes the summary of its /monitoring page (which explorer.page.bodylimit refuses to serve) with
    # pandas over its last 10 000 events after every event: each event cost the server more than the one before
    # (930 calls on one app: 100 empty events 4.6 CPU-s among the first, 21.4 among the last; 0.63 and 0.67 without
    # it), so one visitor's clicks slowed every later visitor's events
    queue.compute_analytics_summary = lambda records: queue.cached_event_analytics_summary
    queue.ANALYTICS_MAX_EVENTS = 1          # the per-event records it keeps for that page
