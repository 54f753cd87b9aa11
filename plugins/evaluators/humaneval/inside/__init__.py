"""Code that runs inside the sandbox for a HumanEval check, sent as support-module text
(a package only so that its files are installed).

Two processes per check (docs/benchmarks.md): the program's (`program`) loads the
candidate's program and answers calls; the test's (`check`) runs the benchmark's test
against proxies and reports the verdict. Values cross through the core's codec
(coral_core/hosted/codec.py, loaded here as `coral_hosted_codec`).
"""
