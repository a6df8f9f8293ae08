"""The pure core: models, normalisers, diff rules, severities and decisions.

It must not do I/O: no network, no files, no clock (callers pass ``now``), no logging.
Only the standard library. Everything here is deterministic and unit-testable.
"""
