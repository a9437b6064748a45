"""Stored tool instances: per-user configuration, encrypted credentials (AES-GCM), default
tools, and the storage built-in tools keep their data in."""
