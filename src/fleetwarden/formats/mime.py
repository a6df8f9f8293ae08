"""MIME multi-part user data (RFC 2045/2046) split into the texts of its parts.

EC2 user data (Karpenter, eksctl, terraform-aws-eks on AL2023) is often a MIME message whose
parts cloud-init and nodeadm read separately: a nodeadm ``NodeConfig``, shell scripts. The
parts are found by the boundary the message declares (or, for parts pasted without the
message's headers, by the delimiter line before a part header), their headers removed and
their bodies decoded (base64 or quoted-printable, gzip unpacked), each with the media type its
headers declare (nodeadm reads only ``application/node.eks.aws`` parts). What a part says is
for ``formats.bootstrap``. Not done: parts' character sets other than UTF-8 (such a part is said
not to decode), and anything but text. Pure: text in, parts out.
"""

from __future__ import annotations

import base64
import quopri
import re
import zlib
from dataclasses import dataclass

__all__ = ["Part", "body", "parts"]

_MULTIPART = re.compile(r"^Content-Type:[ \t]*multipart/", re.I | re.M)
_BOUNDARY_PARAMETER = re.compile(r"""boundary=(?:"([^"]+)"|([^\s;"]+))""", re.I)
_HEADERLESS = re.compile(r"^--(\S+?)[ \t]*\n(?=Content-Type:)", re.I | re.M)


def _boundary(text: str) -> str | None:
    """The boundary the message's headers declare; for parts pasted without them, the
    delimiter line before a part's ``Content-Type`` header."""
    head = text.lstrip("\n").split("\n\n", 1)[0]
    declared = _BOUNDARY_PARAMETER.search(head) if _MULTIPART.search(head) else None
    if declared is not None:
        return declared[1] or declared[2]
    pasted = _HEADERLESS.search(text)
    return pasted[1] if pasted is not None else None


@dataclass(frozen=True, slots=True)
class Part:
    """One part: its declared media type (lower case, parameters removed; None for a part
    without headers, or a text that is no MIME message) and its decoded body (None: one that
    does not decode to text)."""

    content_type: str | None
    body: str | None


def parts(text: str) -> list[Part]:
    """The parts of a MIME multi-part text (RFC 2046: between ``--boundary`` lines, up to
    ``--boundary--``, or the end; a multi-part part read likewise), headers removed and
    decoded; any other text is its own one part."""
    text = text.replace("\r\n", "\n")
    boundary = _boundary(text)
    if boundary is None:
        return [Part(_content_type(text), _decoded(text))]
    found: list[Part] = []
    start = None
    for line in re.finditer(rf"^--{re.escape(boundary)}(--)?[ \t]*$", text, flags=re.M):
        if start is not None:
            found.extend(parts(text[start : line.start()]))
        if line[1]:  # the closing delimiter: what follows is the epilogue
            break
        start = line.end()
    else:  # not closed: the last part runs to the end
        if start is not None:
            found.extend(parts(text[start:]))
    return found


_CONTENT_TYPE = re.compile(r"^Content-Type:[ \t]*([^\s;]+)", re.I | re.M)


def _content_type(part: str) -> str | None:
    """The media type a part's headers declare (None: no headers, or no Content-Type)."""
    head = part.lstrip("\n").partition("\n\n")[0]
    if re.match(r"(Content-|MIME-Version)", head, re.I) is None:
        return None
    declared = _CONTENT_TYPE.search(head)
    return declared[1].lower() if declared is not None else None


_TRANSFER_ENCODING = re.compile(r"^Content-Transfer-Encoding:[ \t]*(\S+)", re.I | re.M)
_MAX_TEXT = 1 << 20  # user data is at most 16 KiB (EC2): more unpacked is no user data


def _decoded(part: str) -> str | None:
    """A MIME part's body as text: base64 or quoted-printable decoded (RFC 2045), gzip unpacked
    (cloud-init does); None for one that does not decode to text."""
    head, _, encoded = part.lstrip("\n").partition("\n\n")
    is_head = re.match(r"(Content-|MIME-Version)", head, re.I) is not None
    encoding = _TRANSFER_ENCODING.search(head) if is_head else None
    if encoding is None or encoding[1].lower() not in ("base64", "quoted-printable"):
        return body(part)
    try:
        if encoding[1].lower() == "base64":
            data = base64.b64decode("".join(encoded.split()), validate=True)
        else:
            data = quopri.decodestring(encoded.encode())
        if data[:2] == b"\x1f\x8b":  # gzip
            unpacking = zlib.decompressobj(wbits=31)
            data = unpacking.decompress(data, _MAX_TEXT)
            if unpacking.unconsumed_tail or not unpacking.eof:  # too large, or cut short
                return None
        return data.decode()
    except (ValueError, zlib.error):  # binascii.Error and UnicodeDecodeError are ValueErrors
        return None


def body(part: str) -> str:
    """A part without its MIME headers (a text that starts with none, as it is)."""
    lines = part.strip("\n").splitlines()
    if lines and re.match(r"^(Content-|MIME-Version)", lines[0], re.I):
        while lines and lines[0].strip():
            lines.pop(0)
        del lines[:1]  # the blank line that ends the headers: a body's lines count from 1
    return "\n".join(lines)
