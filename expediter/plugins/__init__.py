"""Built-in tools: each module here is one tool, found by the same scan as a tools directory."""
