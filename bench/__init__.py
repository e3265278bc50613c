"""Benchmarks: in-process and networked runs of the private selection (not part of the tests)."""
