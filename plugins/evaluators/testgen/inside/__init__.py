"""Code that runs inside the sandbox for a testgen run, sent as support-module text.

Two processes per run (docs/testgen.md): the tests' process runs the model's test file
(`tests_side`, `proxy`) and never holds the program under test; the program's process
(`host`) loads the program, runs every call the tests make, measures coverage and CPU
budgets, and reports. Values cross between them through the core's codec
(coral_core/hosted/codec.py, loaded here as `coral_testgen_codec`).
"""
