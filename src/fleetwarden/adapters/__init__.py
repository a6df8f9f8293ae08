"""Adapters: the only place that touches files, networks and third-party clients.

They turn the outside world into core values (through ``formats``) and back; no decisions here.
"""
