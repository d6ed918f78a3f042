"""The recorder's worked example (a LLaDA-style loop on the embedded model) and its benchmarks (docs/record.md)."""
