"""fleetwarden's own desired-state format (``apiVersion: fleetwarden.io/v1alpha1``,
``kind: NodePools``), validated with the JSON Schema in ``data/nodepools.schema.json``.

Validation has a fast path: the schema compiled to Python (fastjsonschema's code generator, run
once by ``scripts/gen-native-validator``: ``formats/native_validator.py``), ~20x quicker than
jsonschema on 200 pools, and neither jsonschema's nor fastjsonschema's import is paid. A document it
refuses is checked again by jsonschema, whose verdict and messages count: the fast path only
ever saves time on documents jsonschema also accepts (``tests/formats/test_native_schema.py``
checks both verdicts on drawn documents).

Pools are defined once under ``pools:``; ``clusters:`` lists which clusters get them and with
which per-cluster overrides (maps such as ``labels`` are merged key by key, everything else is
replaced). A file with a single ``cluster:`` applies every pool to that cluster.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from fleetwarden.core import osfamilies
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint
from fleetwarden.formats.accounting import Ledger, View
from fleetwarden.formats.documents import Document, PoolsRead
from fleetwarden.formats.errors import FormatError

if TYPE_CHECKING:
    import jsonschema

__all__ = ["API_VERSION", "KIND", "accepted_fast", "read_pools", "schema"]

API_VERSION = "fleetwarden.io/v1alpha1"
KIND = "NodePools"
_MERGED = ("labels", "allocatable")


@cache
def schema() -> dict[str, Any]:
    text = resources.files("fleetwarden.data").joinpath("nodepools.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def _validator() -> jsonschema.protocols.Validator:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema())
    return cls(schema())  # type: ignore[no-any-return]


@cache
def _fast_validator() -> Callable[[Any], bool]:
    """The schema compiled to Python: the module ``scripts/gen-native-validator`` generated
    from it (imported, not compiled at each run), or -- when the packaged schema is not the
    one that module was made from -- fastjsonschema's compilation now."""
    from fleetwarden.formats import native_validator

    text = resources.files("fleetwarden.data").joinpath("nodepools.schema.json").read_bytes()
    if hashlib.sha256(text).hexdigest() == native_validator.SCHEMA_SHA256:
        return _accepting(native_validator.validate, native_validator.JsonSchemaValueException)
    import fastjsonschema

    compiled = fastjsonschema.compile(schema())
    return _accepting(compiled, fastjsonschema.JsonSchemaException)


def _accepting(validate: Callable[[Any], Any], refused: type[Exception]) -> Callable[[Any], bool]:
    def accepts(body: Any) -> bool:
        try:
            validate(body)
        except refused:
            return False
        return True

    return accepts


def accepted_fast(body: Any) -> bool:
    """True when the compiled schema accepts ``body`` (jsonschema then would too); False
    means only "ask jsonschema"."""
    return _fast_validator()(body)


def read_pools(docs: Sequence[Document]) -> PoolsRead:
    out = PoolsRead()
    for doc in docs:
        if doc.api_version.startswith("fleetwarden.io/") or doc.kind == KIND:
            out.claimed.add((doc.path, doc.index))
            out.pools.extend(_pools_of(doc))
    return out


def _pools_of(doc: Document) -> list[NodePoolSpec]:
    errors = [] if accepted_fast(doc.body) else list(_validator().iter_errors(doc.body))
    errors.sort(key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = ".".join(str(p) for p in first.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise FormatError(doc.path, f"{first.message}{more}", field=where)
    pools: Mapping[str, Mapping[str, Any]] = doc.body["pools"]
    clusters = doc.body.get("clusters")
    single = doc.body.get("cluster")
    out: list[NodePoolSpec] = []
    if clusters is None:
        for name, pool in pools.items():
            out.append(_spec(doc, name, pool, single, {}))
        return out
    for cluster, entry in clusters.items():
        entry = entry or {}
        wanted = entry.get("pools", list(pools))
        overrides = entry.get("overrides", {})
        for name in list(wanted) + [n for n in overrides if n not in wanted]:
            base = pools.get(name)
            if base is None and name not in overrides:
                raise FormatError(
                    doc.path,
                    f"unknown pool {name!r} (not under pools:)",
                    field=f"clusters.{cluster}.pools",
                )
            override = overrides.get(name, {})
            merged = _merge(base or {}, override)
            out.append(_spec(doc, name, merged, cluster, override))
    return out


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if key in _MERGED and isinstance(value, Mapping):
            merged[key] = {**merged.get(key, {}), **value}
        else:
            merged[key] = value
    return merged


# native key -> the fact it states (every key of the schema's pool object)
_FACTS = {
    "instanceTypes": "instanceTypes",
    "diskSizeGiB": "diskSizeGiB",
    "minSize": "minSize",
    "maxSize": "maxSize",
    "desiredSize": "desiredSize",
    "kubernetesVersion": "kubernetesVersion",
    "osImage": "osImage",
}
_IGNORED = {
    "provider": "the provider: selects rules (heterogeneous Karpenter pools), not a node value",
    "diskType": "disk type: not visible on a Node (the size is compared)",
}


def _spec(
    doc: Document,
    name: str,
    pool: Mapping[str, Any],
    cluster: str | None,
    override: Mapping[str, Any],
) -> NodePoolSpec:
    lo, hi = pool.get("minSize"), pool.get("maxSize")
    if lo is not None and hi is not None and lo > hi:
        raise FormatError(
            doc.path, f"minSize {lo} is larger than maxSize {hi}", field=f"pools.{name}"
        )
    os_setting = pool.get("osImage")
    family = None
    if os_setting is not None:
        family = osfamilies.family_of_setting(os_setting)
        if family is None:
            raise FormatError(
                doc.path, f"unknown OS family {os_setting!r}", field=f"pools.{name}.osImage"
            )
    ledger = Ledger()
    base_view = ledger.view(doc.path, base=("pools", name), lines=doc.line_of)
    over_view = ledger.view(
        doc.path, base=("clusters", str(cluster), "overrides", name), lines=doc.line_of
    )

    def view_of(*key: str) -> View:
        inner: Any = override
        for part in key:
            inner = inner.get(part) if isinstance(inner, Mapping) else None
        return over_view if inner is not None else base_view

    for key, value in pool.items():
        if key in _FACTS:
            view_of(key).compared(key, _FACTS[key], value)
        elif key in _IGNORED:
            view_of(key).ignored(key, _IGNORED[key])
        elif key in ("labels", "allocatable"):
            for k, v in value.items():
                view_of(key, k).compared((key, k), f"{key}.{k}", v)
        elif key == "taints":
            for t in value:
                taint = Taint(t["key"], t.get("value"), t["effect"])
                view_of(key).compared(key, taint.field_name, t)
    return NodePoolSpec(
        name=name,
        cluster=cluster,
        provider=Provisioner(pool.get("provider", "generic")),
        source=doc.path,
        source_format="native",
        instance_types=tuple(pool.get("instanceTypes", ())),
        disk_size_gib=pool.get("diskSizeGiB"),
        disk_type=pool.get("diskType"),
        min_size=lo,
        max_size=hi,
        desired_size=pool.get("desiredSize"),
        labels=dict(pool.get("labels", {})),
        taints=tuple(
            sorted(Taint(t["key"], t.get("value"), t["effect"]) for t in pool.get("taints", ()))
        ),
        kubernetes_version=pool.get("kubernetesVersion"),
        os_family=family,
        allocatable={k: str(v) for k, v in pool.get("allocatable", {}).items()},
        heterogeneous=pool.get("provider") == "karpenter" or len(pool.get("instanceTypes", ())) > 1,
        provenance=dict(ledger.provenance),
        account=ledger.entries(),
    )
