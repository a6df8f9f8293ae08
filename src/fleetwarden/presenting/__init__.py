"""Presenting: app results turned into text and tables for people and JSON for machines.

``rendering`` measures and prints (``Grid``/``Col``, findings tables, reports, explanations,
values shown literally) on a ``rich`` Console it is given; ``table_layout`` is the pure plan of
which columns fit a width. No I/O besides writing to that Console, no reading of files or the
network; it imports ``app`` result types and ``core``, never ``cli``, ``entrypoints`` or
``adapters`` (and adapters never import it).
"""

__all__: list[str] = []
