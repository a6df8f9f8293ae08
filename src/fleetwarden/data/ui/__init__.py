"""The web dashboard's static files (served by ``entrypoints.dashboard``)."""

__all__: list[str] = []
