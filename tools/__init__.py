"""Tooling around Unmask, outside the runtime: training the embedded models (``tools.training``), the experiments
behind docs/results.md (``tools.experiments``), the page's benchmarks in a real browser and over HTTP
(``tools.page``) and on a GPU (``tools.gpu``), what they share (``tools.bench``), their records and the docs drawn from
them (``tools.provenance``, ``tools.results``), and the app on a loopback port (``tools.local_app``)."""
