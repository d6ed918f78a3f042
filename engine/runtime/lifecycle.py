"""The engine thread's life: it serves rounds until stopped, survives any decode's failure, and ends before the
interpreter does.

A round that raises in the loop itself (a bug) fails every decode the loop holds, waiting ones included, and is
logged; the thread then sleeps until new work comes. A decode that raises when it is closed (its own ``finally``)
is logged and ends all the same: no decode's failure ends the thread (before, one raising on close during a
failing round did, and every later decode waited forever).

The thread is a daemon: the interpreter does not wait for it. When the interpreter exits while that thread is
inside a torch operation (a forward releases the GIL), the thread is killed in the middle of C++ code and the
process aborts ("terminate called without an active exception", SIGABRT), which can cost it its buffered output
(issue 74: a ``bench --json`` redirected to a file lost its JSON). So every loop registers here, and ``stop_all``, at the exit
(``atexit``, which runs while daemon threads still run) and before each entry point returns, ends each loop at
its next round boundary and joins its thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref

STOP_WAIT_S = 30.0          # how long the exit waits for the rounds in progress to end
log = logging.getLogger("engine.runtime.engine_loop")
_LIVE: weakref.WeakSet = weakref.WeakSet()


class Aborted(Exception):
    """The decode was aborted before it ended (``EngineLoop.abort``, or the loop stopped)."""


class EngineThread:
    """The thread's part of ``EngineLoop``: ``_start`` it, it runs ``_step`` while there is work, ``stop`` ends it."""

    def _start(self) -> None:
        self._stopping = False
        self.thread = threading.Thread(target=self._serve, name="unmask-engine", daemon=True)
        self.thread.start()
        _LIVE.add(self)

    def _serve(self) -> None:
        while True:
            with self.cond:
                while not self._stopping and not any(self.queues.values()) and not self.running \
                        and not self.paused and not self._aborts:
                    self.cond.wait()
                if self._stopping:
                    break
            try:
                self._step()
            except BaseException as e:        # a bug of the loop itself, kept visible: logged, and every decode it
                self._fail_all(e)             # would have served fails with it; the loop then sleeps until new work
        self._end_all(Aborted("the engine loop stopped (the process is exiting)"))

    @property
    def stopped(self) -> bool:
        """Asked to stop: its thread ends (or has ended) at a round boundary and serves nothing more."""
        return self._stopping

    def stop(self, timeout_s: float | None = STOP_WAIT_S) -> bool:
        """End the thread at its next round boundary, every decode it holds and every later one ``Aborted``; wait
        for it at most ``timeout_s`` (0: ask only). True once it has ended."""
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout_s)
        return not self.thread.is_alive()

    def _fail_all(self, error: BaseException) -> None:
        """Every decode in the loop, waiting ones included, ends with ``error`` (a round that raised would raise
        again for them: retrying at once would spin forever and never end them)."""
        log.error("the engine loop failed a round; its decodes fail with it", exc_info=error)
        self._end_all(error)

    def _end_all(self, error: BaseException) -> None:
        with self.cond:
            waiting, self.queues, self._aborts = self.waiting, {}, set()
        for r in self.running + self.paused:
            self._end(r, error=error)
        self.running, self.paused = [], []
        for h in waiting:
            h.finish(error=error)


def close(decode) -> None:
    """Close a decode's generator; what it raises then (a bug) is logged, not raised: the thread outlives it."""
    try:
        if decode is not None:
            decode.close()
    except Exception:
        log.exception("a decode raised when it was closed (it ends all the same)")


def stop_all(timeout_s: float = STOP_WAIT_S) -> bool:
    """Stop every engine loop of the process and join their threads, all within ``timeout_s`` (each is asked
    first, so their rounds end together). True when every thread has ended; one still running is logged."""
    loops = list(_LIVE)
    for loop in loops:
        loop.stop(0)
    deadline = time.monotonic() + timeout_s
    ended = True
    for loop in loops:
        if not loop.stop(max(0.0, deadline - time.monotonic())):
            log.warning("an engine thread did not end within %g s of the exit; it is left running", timeout_s)
            ended = False
    return ended


atexit.register(stop_all)
# a forked child (a ZeroGPU worker) has none of its parent's engine threads, and their locks may have been held at
# the fork: it stops only the loops it starts itself
os.register_at_fork(after_in_child=_LIVE.clear)
