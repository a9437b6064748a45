"""OAuth for tool ``mcp`` (``auth: oauth``): tokens kept in the core's sealed token store, the
flows a call runs (``oauth_for``), and the person's login (``interactive_login``).

Imported only when an OAuth instance is used: it imports fastmcp.
"""

from expediter_mcp.oauth.flows import ReauthorizeNeeded, oauth_for
from expediter_mcp.oauth.login import LoginFailed, interactive_login
from expediter_mcp.oauth.store import TokenStore

__all__ = ["LoginFailed", "ReauthorizeNeeded", "TokenStore", "interactive_login", "oauth_for"]
