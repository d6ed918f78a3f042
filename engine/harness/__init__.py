"""The harness around decodes: the service the page and the API call (``service``), benchmarks on held-out
problems (``bench``, ``bench_row``, ``bench_stream``) with their statistics (``stats``), progress reporting
(``progress``) and Unmask as an lm-evaluation-harness model (``lmeval``)."""
