"""Tooling around Unmask, outside the runtime: training the embedded models (``tools.training``), the experiments
behind docs/results.md (``tools.experiments``), the page's benchmarks in a real browser and over HTTP
(``tools.page``), and the app on a loopback port for those and for the tests (``tools.local_app``)."""
