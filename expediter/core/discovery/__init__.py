"""Discovery: tool packs from entry points, tools directories and the built-ins; the cached
manifest and catalogue of what exists; tool types and their loaded instances."""
