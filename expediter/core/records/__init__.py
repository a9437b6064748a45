"""Records every stage shares: tool calls, call events, statuses, and the safe forms of values
(sanitised, capped and redacted text)."""
