"""Benchmarks: `python -m tests.benchmarks.bench` (not part of the test run)."""
