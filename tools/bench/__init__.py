"""What every benchmark of this repository shares, written once; each benchmark is a short module on top.

- ``tools.bench.app``: the real app (``python app.py``, of this checkout or another's with ``--app-dir``) on a free
  loopback port in a scratch folder, stopped afterwards (``served``; built on ``tools.local_app``, which the tests'
  app fixture uses too).
- ``tools.bench.visitors``: a wave of visitors: each on its own thread, connected first, then all released at one
  moment, each reading its times from that common start (``Gate``, ``wave``).
- ``tools.bench.clock``: timing with warm-up (``timed``), a clock that waits for a GPU's queued work when one is in
  use (``now``), the spread of repeated ratios (``spread``).
- ``tools.bench.settings``: ``UNMASK_*`` settings switched for a block (``settings``, ``under``).
- ``tools.bench.report``: progress lines a remote run's log keeps (``progress``) and a benchmark's command line that
  writes its record with ``tools.provenance`` and prints its table (``bench_main``).

Nothing here imports torch at module level: the page's benchmarks run without it.
"""
