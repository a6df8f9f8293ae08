"""Container image references as registries read them, and which parts of two of them
differ. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ImageRef", "default_pull_policy", "image_drift"]


def default_pull_policy(image: str) -> str:
    """The API server's default: ``Always`` for ``:latest`` or an untagged image."""
    ref = ImageRef.parse(image)
    return "Always" if ref.digest is None and ref.tag in (None, "latest") else "IfNotPresent"


@dataclass(frozen=True, slots=True)
class ImageRef:
    """An image reference split the way registries read it; ``nginx`` and
    ``docker.io/library/nginx:latest`` are the same image."""

    repository: str
    tag: str | None
    digest: str | None

    @classmethod
    def parse(cls, text: str) -> ImageRef:
        name, _, digest = text.strip().partition("@")
        slash = name.rfind("/")
        colon = name.rfind(":")
        tag: str | None = None
        if colon > slash:
            name, tag = name[:colon], name[colon + 1 :]
        first, sep, rest = name.partition("/")
        if not sep:
            name = f"docker.io/library/{name}"
        elif "." not in first and ":" not in first and first != "localhost":
            name = f"docker.io/{name}"
        elif first in ("index.docker.io", "registry-1.docker.io"):
            name = f"docker.io/{rest}"
        if name.startswith("docker.io/") and name.count("/") == 1:
            name = "docker.io/library/" + name.split("/", 1)[1]
        if tag is None and not digest:
            tag = "latest"
        return cls(name, tag, digest or None)


def image_drift(desired: str, actual: str) -> tuple[str, ...]:
    """Which parts of an image differ: ``repository``, ``tag``, ``digest`` (empty: none).

    A digest counts only when Git states one: a live digest added to the same tag is the
    same intent (admission controllers pin tags to digests).
    """
    if desired == actual:
        return ()
    want, have = ImageRef.parse(desired), ImageRef.parse(actual)
    out = []
    if want.repository != have.repository:
        out.append("repository")
    if want.tag is not None and want.tag != have.tag:
        out.append("tag")
    if want.digest is not None and want.digest != have.digest:
        out.append("digest")
    return tuple(out)
