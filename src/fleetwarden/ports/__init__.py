"""Ports: ``typing.Protocol`` seams between the app and the outside world, with their errors."""
