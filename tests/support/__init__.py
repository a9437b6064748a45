"""What the test modules share, importable as ``support`` (pyproject.toml puts tests/ on pytest's
path): saved provider responses and their builders (``responses``), the documented event and
ledger fields (``events``), hosts on a chosen ledger (``hosts``), and the worker processes of the
ledger and approval tests (``ledger_workers``, ``turn_workers``, run through ``scripts``), and
terminal transcripts as the demo prints and the docs quote them (``transcripts``)."""
