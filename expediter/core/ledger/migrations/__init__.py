"""Alembic migrations for the ledger, bundled with the package (``expediter db upgrade``)."""
