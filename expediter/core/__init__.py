"""The host, one subpackage per stage of a call (see docs/index.md)."""
