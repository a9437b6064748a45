"""Calls: the executor (the one pipeline every call runs through), approvals, and results."""
