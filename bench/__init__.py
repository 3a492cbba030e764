"""Benchmarks that print figures (never pass/fail tests); see bench/README.md."""
