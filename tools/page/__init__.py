"""Benchmarks of the page: figures' layout (``bench_figures``), memory over HTTP (``bench_memory``), the page in
Chromium (``bench_page``), server-side rendering (``bench_render``), what a newcomer meets (``bench_ux``) and the
τ drag against another commit (``bench_tune``). What they share (the app on a loopback port, Chromium, waves of
visitors, timing, the record) is ``tools.bench``."""
