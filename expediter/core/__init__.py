"""The host, one subpackage per stage of a call (see DESIGN.md section 1)."""
