"""The objects of one side (an app's desired manifests or a cluster's observed objects),
indexed by key, app and kind, with models built once per object. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwarden.core.workloads.models import Autoscaler, Model, _autoscaler, _config, _workload
from fleetwarden.core.workloads.objects import (
    AUTOSCALER_KIND,
    CONFIG_KINDS,
    KINDS,
    WORKLOAD_KINDS,
    ObjectKey,
    _app_in,
    _key_in,
)
from fleetwarden.core.workloads.redaction import redact

__all__ = ["ManifestObject", "ObjectIndex"]


def _model(obj: ManifestObject) -> Model:
    """``model_from`` for an indexed object, whose key is known."""
    kind = obj.key.kind
    if kind in WORKLOAD_KINDS:
        return _workload(obj.body, obj.key, obj.app, obj.source)
    if kind in CONFIG_KINDS:
        return _config(obj.body, obj.key, obj.app, obj.source)
    return _autoscaler(obj.body, obj.key, obj.app, obj.source)


@dataclass(frozen=True, slots=True)
class ManifestObject:
    """One redacted object of a side, with where it came from."""

    key: ObjectKey  # key_of(body): the index builds the model from both
    body: Mapping[str, Any]
    source: str | None
    app: str | None


class ObjectIndex:
    """The objects of one side: an application's desired manifests, or one cluster's
    observed objects (a snapshot, or the cache a watcher keeps warm). Models are built once
    per object and kept until the object changes."""

    __slots__ = (
        "_aliases",
        "_autoscaled",
        "_by_app",
        "_by_kind_name",
        "_desired_keys",
        "_hpas",
        "_models",
        "app_label",
        "objects",
    )

    def __init__(
        self, objects: Iterable[ManifestObject] = (), *, app_label: str | None = None
    ) -> None:
        self.app_label = app_label
        self.objects: dict[ObjectKey, ManifestObject] = {}
        self._by_app: dict[str, set[ObjectKey]] = {}
        self._aliases: dict[str, tuple[str, ...]] = {}
        self._by_kind_name: dict[tuple[str, str], list[ObjectKey]] = {}
        self._models: dict[ObjectKey, Model] = {}
        self._hpas: set[ObjectKey] = set()
        self._autoscaled: set[tuple[str, str | None, str]] | None = None
        self._desired_keys: dict[str, list[ObjectKey]] = {}  # keys_for_app, until a change
        for obj in objects:
            self.put(obj)

    @staticmethod
    def wrap(
        body: Mapping[str, Any], *, source: str | None = None, app_label: str | None = None
    ) -> ManifestObject | None:
        """A redacted ``ManifestObject`` for a raw object of a supported kind, else None."""
        kind = body.get("kind")  # key_of and app_of, reading the metadata once
        if kind not in KINDS:
            return None
        meta: Any = body.get("metadata")
        key = _key_in(kind, meta)
        if key is None:
            return None
        return ManifestObject(key, redact(body), source, _app_in(meta, app_label))

    def add(self, body: Mapping[str, Any], *, source: str | None = None) -> ObjectKey | None:
        obj = self.wrap(body, source=source, app_label=self.app_label)
        if obj is None:
            return None
        self.put(obj)
        return obj.key

    def put(self, obj: ManifestObject) -> None:
        key = obj.key
        if key in self.objects:
            self.discard(key)
        self.objects[key] = obj
        if self._desired_keys:
            self._desired_keys.clear()
        if obj.app:
            by_app = self._by_app.get(obj.app)
            if by_app is None:
                by_app = self._by_app[obj.app] = set()
            by_app.add(key)
        kind_name = (key.kind, key.name)
        same = self._by_kind_name.get(kind_name)
        if same is None:
            self._by_kind_name[kind_name] = [key]
        else:
            same.append(key)
        if key.kind == AUTOSCALER_KIND:
            self._hpas.add(key)
            self._autoscaled = None

    def discard(self, key: ObjectKey) -> None:
        old = self.objects.pop(key, None)
        if old is None:
            return
        self._desired_keys.clear()
        self._models.pop(key, None)
        if key in self._hpas:
            self._hpas.discard(key)
            self._autoscaled = None
        if old.app:
            self._by_app.get(old.app, set()).discard(key)
        same = self._by_kind_name.get((key.kind, key.name), [])
        if key in same:
            same.remove(key)

    def __len__(self) -> int:
        return len(self.objects)

    def app_keys(self, app: str) -> set[ObjectKey]:
        keys = self._by_app.get(app, set())
        for other in self._aliases.get(app, ()):
            keys = keys | self._by_app.get(other, set())
        return keys

    def set_aliases(self, app: str, others: Iterable[str]) -> None:
        """Objects labelled for any of ``others`` count as ``app``'s here: in this cluster the
        app is deployed as another Argo CD application (an ApplicationSet's
        ``shop-prod-eu-1`` for ``shop``)."""
        found = tuple(sorted(set(others) - {app}))
        if found:
            self._aliases[app] = found
        else:
            self._aliases.pop(app, None)

    def keys_for_app(self, app: str) -> list[ObjectKey]:
        """Desired side: objects that name ``app``, or name no application at all (a tree
        given for one app rarely carries Argo CD's tracking label: Argo CD adds it on apply).
        """
        keys = self._desired_keys.get(app)
        if keys is None:
            keys = sorted(
                (k for k, o in self.objects.items() if o.app is None or o.app == app),
                key=lambda k: k.order,
            )
            self._desired_keys[app] = keys
        return list(keys)

    def autoscalers(self) -> set[ObjectKey]:
        return self._hpas

    def autoscaled(self) -> set[tuple[str, str | None, str]]:
        """``(kind, namespace, name)`` of every workload an HPA here scales (kept until an
        HPA changes)."""
        if self._autoscaled is None:
            found = set()
            for key in self._hpas:
                hpa = self.model(key)
                if isinstance(hpa, Autoscaler):
                    found.add((hpa.target_kind, key.namespace, hpa.target_name))
            self._autoscaled = found
        return self._autoscaled

    def candidates(self, kind: str, name: str) -> list[ObjectKey]:
        return self._by_kind_name.get((kind, name), [])

    def model(self, key: ObjectKey) -> Model:
        cached = self._models.get(key)
        if cached is None:
            cached = self._models[key] = _model(self.objects[key])
        return cached
