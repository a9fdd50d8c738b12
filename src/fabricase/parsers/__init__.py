"""Parsers: pure `parse_<thing>(text) -> record` functions over captured bytes.

They never raise on malformed input and never invent values: what is absent or unreadable is None (or left out
of a mapping), never 0.
"""
