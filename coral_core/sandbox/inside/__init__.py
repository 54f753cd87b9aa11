"""What runs inside the sandbox: the pre-warmed worker and the candidate's child process
(standard library only), and the analysis worker (`lint`, the one module that imports
third-party packages: flake8 and bandit; it never runs candidate code).

Bound read-only into the sandbox as the package `coral_inside`.
"""
