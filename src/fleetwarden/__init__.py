"""fleetwarden: keeps a fleet of Kubernetes clusters honest.

Layers point one way (checked by import-linter in the test suite):
``entrypoints -> adapters -> app -> ports -> formats -> core``.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
