"""Authoring: ``@tool`` and ``Toolbox``, type hints to JSON Schema, docstrings, argument binding."""
