"""The former console-script target, kept for installs made before ``fleetwarden.cli.main``.

An environment installed from an older ``pyproject.toml`` still runs
``fleetwarden.entrypoints.cli:main``; a reinstall points the script at ``fleetwarden.cli.main``.
"""

from fleetwarden.cli.main import app, main

__all__ = ["app", "main"]
