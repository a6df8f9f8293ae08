"""Readers of desired and observed state: real published formats -> core values.

Parsing only: these modules get text that someone else read, and return core values or a
``FormatError`` that names the file, the field (or line) and the reason. No file or network I/O.
"""
