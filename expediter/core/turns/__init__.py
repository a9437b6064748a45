"""Turns: the toolset offered to a model, provider names and schemas, parsing its calls, and the
messages that carry results back."""
