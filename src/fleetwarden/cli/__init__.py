"""The ``fleetwarden`` command line: thin commands over the use cases in ``app/``.

``main`` is the Typer application; it imports no command module until that command runs (the
start-up of ``--help``, ``--version``, ``scan`` and ``gate`` is paid in every CI job and every
Argo CD PreSync hook). ``common`` holds the one error path and the option enums; the tables
and JSON for people and machines are ``fleetwarden.presenting``'s. A command module parses its
arguments, calls one function of ``app/`` (or a loader it needs) and renders; it imports no
other command module.
"""

__all__: list[str] = []
