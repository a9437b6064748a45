"""``expediter serve --mcp``: the host's tools for one user, served to MCP clients.

``command`` is the click command (cheap to import: ``expediter serve --help`` never imports
fastmcp); ``bridge`` turns the host's toolset into offered tools and runs an MCP client's
calls through the host's one pipeline; ``arguments`` checks a call's arguments against its
action's JSON Schema; ``provider`` wraps the bridge as a fastmcp server; ``auth`` reads the
bearer token and checks it; ``transport`` listens (HTTP) or speaks on stdio.
"""
