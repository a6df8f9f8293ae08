"""How a value's type is named in messages for people: "a mapping", "a list", "null" — never
a Python type name (a YAML user has no ``NoneType``)."""

from __future__ import annotations

__all__ = ["describe_type"]

_NAMES: dict[type, str] = {
    dict: "a mapping",
    list: "a list",
    tuple: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    bytes: "binary data",
    type(None): "null (nothing)",
}


def describe_type(value: object) -> str:
    for kind, name in _NAMES.items():
        if type(value) is kind:
            return name
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "a value of an unsupported kind"
