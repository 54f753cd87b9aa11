"""What runs inside the sandbox: the pre-warmed worker and the candidate's child process.

Standard library only; bound read-only into the sandbox as the package `coral_inside`.
"""
