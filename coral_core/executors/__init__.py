"""Executors: where generation and evaluation run (local; Ray as a plugin)."""
