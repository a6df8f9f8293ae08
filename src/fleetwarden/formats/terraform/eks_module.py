"""terraform-aws-eks (``terraform-aws-modules/eks/aws``): node groups as desired pools, with the
defaults the module applies, per major version (``eks_majors``).

The root module passes each group attribute as ``try(group.X, <kind>_node_group_defaults.X,
<fallback>)`` in v18-v20 (a group's value replaces the default's, maps included); v21 has no
``*_node_group_defaults`` and its sub-modules' variable defaults apply; a sub-module called
directly has no root fallbacks. The defaults (as desired values, each with its provenance):

============================  ===================  ===================  =====================
                              v17 (root)           v18-v20              v21
============================  ===================  ===================  =====================
managed min / max / desired   1 / 3 / 1            1 / 3 / 1 (sub-      1 / 3 / 1
                                                   module 0 / 3 / 1)
self-managed min / max / des  1 / 3 / 1            0 / 3 / 1            1 / 3 / 1
managed instance types        m4.large             EKS: t3.medium       EKS: t3.medium
self-managed instance type    m4.large (MIP: the   m6i.large (sub-      m6i.large
                              override list)       module: none)
managed AMI                   EKS default          EKS default          AL2023_x86_64_STANDARD
self-managed AMI              AL2 (Windows 2019)   AL2                  AL2023
managed disk                  disk_size, 100       the module's launch template: block device
                                                   mappings, else the AMI's own (20 GiB);
                                                   ``use_custom_launch_template = false``:
                                                   disk_size, else EKS's 20 / 50 GiB
capacity (managed)            ON_DEMAND label      ON_DEMAND label      ON_DEMAND label
============================  ===================  ===================  =====================

``desired_size`` is only the initial size (the module ignores later changes): the count is checked
against ``min_size..max_size``; ``schedules`` widen that range. Self-managed groups have no
``labels`` / ``taints`` / ``instance_types`` inputs (v18-v20 never read them, v21 drops them):
those keys are listed as ignored, never expected. Labels, taints and max-pods registered at boot
are read where they take effect: ``bootstrap_extra_args`` as kubelet flags on AL2 (on a managed
group only with ``enable_bootstrap_user_data``, i.e. a custom AMI; AL2023 ignores it) and as
Bottlerocket TOML; ``cloudinit_pre_nodeadm`` NodeConfig parts on AL2023 (v20+). Shell scripts
(``pre_bootstrap_user_data`` ...) are read too, but what they set is not asserted (it may not
take effect): taints there make the taints unresolved. Self-managed instance types come from
``mixed_instances_policy`` overrides when ``use_mixed_instances_policy`` is true (v18-v20:
``override``; v21: ``launch_template.override``; v17: ``override_instance_types``).

When the major is not known, each fact is worked out for every candidate major: a value they
agree on is asserted; sets (instance types, OS families) and count ranges are widened to accept
all of them; anything else is not compared, and the provenance says why. Either way each
attribute gets one note per fact, with one reason (``disk_size`` with no effect is not also
"not stated", nor both unresolved and dropped): ``_Group.settle``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from typing import Any

from fleetwarden.core.integers import ascii_int
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint
from fleetwarden.formats import bootstrap
from fleetwarden.formats.terraform import eks, eks_v17
from fleetwarden.formats.terraform.eks_majors import Majors, majors_of, same_checkout, span
from fleetwarden.formats.terraform.eks_module_ignored import (
    _MAJOR,
    _OPAQUE,
    _SELF_NO_INPUT,
    _reasons,
    _table,
)
from fleetwarden.formats.terraform.eks_module_outcomes import (
    _FACTS,
    Use,
    _Boot,
    _content,
    _format_of_ami_type,
    _known,
    _Out,
    _shown,
    _sized_by_mappings,
    _union,
    _written_empty,
)
from fleetwarden.formats.terraform.hcl import Expr, source_text
from fleetwarden.formats.terraform.lines import Path
from fleetwarden.formats.terraform.reading import Aside, Context, Obj, Reader, module_enabled
from fleetwarden.formats.terraform.sources import eks_module_kind

__all__ = ["module_pools"]

_SIZES = ("min_size", "max_size", "desired_size")

# -- the module block ---------------------------------------------------------------------------


def module_pools(
    ctx: Context, label: str, module: Mapping[Any, Any], remarks: list[str]
) -> list[NodePoolSpec]:
    """The node groups one terraform-aws-eks module block defines."""
    kind = eks_module_kind(module)
    where = f"module.{label}"
    if kind is None or not module_enabled(where, module, ctx.scope, remarks):
        return []
    majors = majors_of(module, kind, ctx.assume)
    if kind != "cluster" and not majors.pinned:
        majors = same_checkout(ctx.scope, module, majors, ctx.assume)
    base: Path = ("module", label)
    if kind != "cluster":  # a node-group sub-module is itself one group
        r = Reader(ctx, where)
        group = r.obj(module, base, _reasons(module, _table(kind == "managed")))
        r.exists(group)
        cluster = r.cluster(group, "cluster_name")
        spec = _Group(r, group, None, None, majors, managed=kind == "managed", via_root=False).spec(
            label, cluster
        )
        return [spec]
    if majors.majors == (17,):
        return eks_v17.pools(ctx, label, module, majors, remarks)
    pools: list[NodePoolSpec] = []
    for section, managed in (
        ("eks_managed_node_groups", True),
        ("self_managed_node_groups", False),
    ):
        if section not in module:
            continue
        defaults_attr = section.replace("_groups", "_group_defaults")
        groups = ctx.scope.resolved(module[section])
        defaults = ctx.scope.resolved(module.get(defaults_attr, {}))
        if not isinstance(groups, dict) or not isinstance(defaults, dict):
            unknown = groups if not isinstance(groups, dict) else defaults
            remarks.append(f"{where}.{section}: {source_text(unknown)} cannot be read")
            continue
        for key, body in groups.items():
            if not isinstance(body, dict):
                remarks.append(f"{where}.{section}.{key}: {source_text(body)} cannot be read")
                continue
            merged_create = body.get("create", defaults.get("create", True))
            if merged_create is False:
                remarks.append(Aside(f"{where}.{section}.{key}: create = false"))
                continue
            r = Reader(ctx, f"{where}.{section}.{key}")
            group = r.obj(body, (*base, section, str(key)), _reasons(body, _table(managed)))
            root = r.obj(module, base, {}, label=where, close=False)
            fallback = None
            if defaults and majors.majors == (21,):
                why = "v21 has no *_node_group_defaults (Terraform refuses it): not applied"
                root.view.ignored((defaults_attr,), why)
            elif defaults:
                fallback = r.obj(
                    defaults,
                    (*base, defaults_attr),
                    _reasons(defaults, _table(managed)),
                    where=f"{where}.{defaults_attr}",
                    label=defaults_attr,
                )
            r.exists(root)
            cluster_attr = "name" if "name" in module else "cluster_name"
            cluster = r.cluster(root, cluster_attr)
            built = _Group(r, group, fallback, root, majors, managed=managed, via_root=True)
            pools.append(built.spec(str(key), cluster))
    return pools


class _Group:
    """One terraform-aws-eks node group (v18-v21) of the cluster module or a sub-module."""

    def __init__(
        self,
        r: Reader,
        group: Obj,
        defaults: Obj | None,
        root: Obj | None,
        majors: Majors,
        *,
        managed: bool,
        via_root: bool,
    ) -> None:
        self.r, self.group, self.defaults, self.root = r, group, defaults, root
        self.majors, self.managed, self.via_root = majors, managed, via_root
        self._cache: dict[tuple[int, Path, str], Any] = {}
        self.disk_type: str | None = None  # shown on the spec, not compared

    # -- reads -----------------------------------------------------------------------------

    def src(self, attr: str, major: int | None = None) -> Obj | None:
        """Where ``try(group.X, defaults.X, fallback)`` reads ``attr`` (v21: the group only)."""
        if self.group.has(attr):
            return self.group
        if self.defaults is not None and major != 21 and self.defaults.has(attr):
            return self.defaults
        return None

    def read(self, attr: str | Path, how: str, major: int | None = None) -> tuple[Obj, Any]:
        """(object, value) of an attribute, read once: ``how`` is text, flag, count, texts or
        raw. The value is None when absent or unresolved (noted as such, once); a raw value
        may hold unresolved parts (``Expr``)."""
        path: Path = (attr,) if isinstance(attr, str) else attr
        top = str(path[0])
        obj = self.src(top, major) or self.group
        key = (id(obj), path, how)
        if key not in self._cache:
            r, fact = self.r, _FACTS.get(top, top)
            value: Any = None
            if obj.has(path) and path in (("ami_type",), ("capacity_type",)):
                eks.check_accepted(r, obj, top)  # a value EKS rejects is an error
            if obj.has(path):
                if how == "text":
                    value = r.text(obj, path, fact, note=False)
                elif how == "flag":
                    value = r.flag(obj, path, fact, note=False)
                elif how == "count":
                    value = r.count(obj, path, fact, note=False)
                elif how == "texts":
                    value = r.texts(obj, path, fact, note=False)
                else:  # raw: resolved as far as it goes; the caller checks what it needs
                    value = r.scope.resolved(obj.raw(path))
                    if isinstance(value, Expr):
                        r.unresolve(obj, path, fact, value.text)
                        value = None
            self._cache[key] = value
        return obj, self._cache[key]

    def stated(self, attr: str, major: int | None = None) -> Use | None:
        """The attribute as try() reads it, when the group or its defaults state it."""
        obj = self.src(attr, major)
        return (obj, (attr,)) if obj is not None else None

    # -- settling a fact over the candidate majors -----------------------------------------

    def settle(
        self,
        fact: str,
        attr: str,
        decide: Callable[[int], _Out],
        *,
        merge: Callable[[list[Any]], Any] | None = None,
        show: Callable[[Any], Any] = lambda v: v,
    ) -> Any:
        """The fact's value over the candidate majors, noted in the account: a value they
        agree on as it is; else ``merge`` of theirs (a wider range, a union) as a default;
        else none, saying what each major would give.

        Each attribute is noted once for the fact, with one reason: an attribute the fact is
        read from (a use) is never also noted as dropped (its note says what each major does
        with it), and ``attr`` gets a "not stated" note only when neither the group nor its
        defaults state it — a stated one is accounted for by its own note."""
        outs = {m: decide(m) for m in self.majors.majors}
        values = [o.value for o in outs.values()]
        r = self.r
        agree = all(v == values[0] for v in values)
        uses = list(dict.fromkeys(u for o in outs.values() for u in o.uses))
        dropped = self._drops(outs, skip=set(uses))
        merged = not agree and merge is not None and None not in values
        if (agree and values[0] is not None) or merged:
            value = values[0] if agree or merge is None else merge(values)
            for obj, path in uses:
                r.compared(obj, path, fact, show(value))
            if not agree or any(o.default for o in outs.values()):
                origin = self._origins(outs)
                if not agree:
                    origin += " (the major is not pinned: any of these is accepted)"
                r.default(fact, attr, show(value), origin)
            return value
        why = self._origins(outs)
        if not agree:
            why = f"depends on the module major: {why}"
        for obj, path in uses:
            if agree:  # no value in any major: not a guess to list among unresolved values
                obj.view.unresolved(path, why, fact)
            else:
                r.unresolve(obj, path, fact, why)
        stated = self.stated(attr)
        if stated is None:
            empty = _written_empty((self.group, self.defaults), attr)
            if empty is None:
                r.unstated(fact, attr, why)
            else:  # ``attr = null`` / ``""``: its own note says why nothing is compared
                empty[0].view.ignored(empty[1], f"empty: states nothing; {fact}: {why}")
        elif stated in dropped and not uses:
            # the attribute has no effect and nothing else gives the fact: one note says both
            obj, path = stated
            reason = f"{dropped[stated]}; {fact} not compared: {why}"
            if dropped[stated] == _MAJOR:
                obj.view.unresolved(path, reason, None)
            else:
                obj.view.ignored(path, reason)
        elif stated not in uses and stated not in dropped and not stated[0].view.noted(stated[1]):
            r.unstated(fact, attr, why)
        # else the attribute's own note (a use, a drop, its unresolved value) is the reason
        return None

    def _drops(self, outs: Mapping[int, _Out], *, skip: Set[Use] = frozenset()) -> dict[Use, str]:
        """Note the attributes the majors drop (no effect), except those in ``skip`` (noted
        as the fact's uses) and those noted already (an unresolved value, a fact read from
        them): one note per attribute. Returns each noted one with its note (``_MAJOR`` when
        the majors do not agree on it)."""
        seen: dict[Use, list[str]] = {}
        for out in outs.values():
            for use, why in out.drops:
                if use not in skip and not use[0].view.noted(use[1]):
                    seen.setdefault(use, []).append(why)
        noted: dict[Use, str] = {}
        for (obj, path), whys in seen.items():
            if len(whys) == len(outs) and len(set(whys)) == 1:
                obj.view.ignored(path, whys[0])
                noted[(obj, path)] = whys[0]
            else:
                obj.view.unresolved(path, _MAJOR, None)
                noted[(obj, path)] = _MAJOR
        return noted

    def _origins(self, outs: Mapping[int, _Out]) -> str:
        """Each major's origin, majors with the same one grouped."""
        by_text: dict[str, list[int]] = {}
        for major, out in outs.items():
            text = out.origin or "stated at " + ", ".join(
                self.r.origin(obj, path) for obj, path in out.uses
            )
            if not out.origin and out.value is not None:
                text = f"{_shown(out.value)} {text}"
            by_text.setdefault(text, []).append(major)
        if len(by_text) == 1:
            return f"{self.majors.label}: {next(iter(by_text))}"
        parts = "; ".join(f"{span(tuple(ms))}: {text}" for text, ms in by_text.items())
        return f"terraform-aws-eks {parts} ({self.majors.why})"

    # -- the spec --------------------------------------------------------------------------

    def spec(self, key: str, cluster: str | None) -> NodePoolSpec:
        r, group = self.r, self.group
        name = r.name(group, "name", key)
        prefixed = self.read("use_name_prefix", "flag")[1] is not False  # the module's default
        if prefixed and r.name_known:  # an unknown name gives no prefix to match by
            r.note("name", f'"{name}-" + a suffix Terraform generates (use_name_prefix)')
            r.name_prefix = f"{name}-"
        version = self.settle("kubernetesVersion", "cluster_version", self._version)
        families = tuple(
            self.settle("osImage", "ami_type", lambda m: self._os(m, version), merge=_union) or ()
        )
        types = self.settle(
            "instanceTypes",
            "instance_types" if self.managed else "instance_type",
            self._types,
            merge=_union,
            show=list,
        )
        lo, hi, desired = self._sizes()
        disk = self.settle(
            "diskSizeGiB", "disk_size", lambda m: self._disk(m, self._families(m, version))
        )
        labels: dict[str, str] = {}
        taints: list[Taint] = []
        if self.managed:
            labels.update(self._capacity())
            labels.update(self._labels())
            taints.extend(self._taints())
            r.startup_taints.append(eks.UPDATE_TAINT)
        else:
            for obj in (group, self.defaults):
                for attr in ("labels", "taints", "instance_types", "capacity_type"):
                    if obj is not None:
                        r.ignore(obj, attr, _SELF_NO_INPUT.format(key=attr))
        max_pods = self._boot(labels, taints)
        self._overridden()
        return r.spec(
            Provisioner.AWS,
            name=name,
            cluster=cluster,
            instance_types=tuple(types or ()),
            disk_size_gib=disk,
            disk_type=self.disk_type if disk is not None else None,
            min_size=lo,
            max_size=hi,
            desired_size=desired,
            labels=labels,
            taints=tuple(sorted(set(taints))),
            kubernetes_version=version,
            os_family=families[0] if families else None,
            os_family_alternatives=families[1:],
            allocatable={"pods": str(max_pods)} if max_pods is not None else {},
        )

    def _overridden(self) -> None:
        """Defaults a group replaces with its own value (``try()`` takes the group's)."""
        if self.defaults is None:
            return
        for attr in self.defaults.body:
            if isinstance(attr, str) and self.group.has(attr):
                self.defaults.view.ignored((attr,), "the group states its own (try() replaces)")

    # -- facts -----------------------------------------------------------------------------

    def _version(self, major: int) -> _Out:
        own, other = ("kubernetes_version", "cluster_version")
        if major != 21:
            own, other = other, own
        drops: tuple[tuple[Use, str], ...] = ()
        if (dropped := self.stated(other, major)) is not None and self.via_root:
            drops = ((dropped, f"v{major} reads {own}"),)
        obj, value = self.read(own, "text", major)
        if obj.has(own):
            return _Out(
                value, "" if value else "not resolved", _known(obj, own, value), drops=drops
            )
        if self.root is not None and self.root.has(own):
            text = self.r.text(self.root, own, "kubernetesVersion", note=False)
            why = "" if text else "the cluster's version is not resolved"
            return _Out(text, why, _known(self.root, own, text), drops=drops)
        return _Out(None, "not stated: the cluster's version (not compared)", drops=drops)

    def _families(self, major: int, version: str | None) -> tuple[str, ...]:
        return tuple(self._os(major, version).value or ())

    def _os(self, major: int, version: str | None) -> _Out:
        """The OS family. Without a custom AMI: ``ami_type`` (EKS's for a managed group; the
        AMI lookup of a v20+ self-managed one), else the default. With ``ami_id``: the format
        the module renders the user data in must fit the AMI: v18/v19 ``platform``, v20
        ``ami_type`` or ``platform``, v21 ``ami_type``; AL2's bootstrap.sh format (``linux``,
        ``AL2_*``) also boots other AMIs (Ubuntu's EKS images): no family then."""
        drops: list[tuple[Use, str]] = []
        custom = self.stated("ami_id", major)
        obj, ami_type = self.read("ami_type", "text", major)
        typed = obj.has("ami_type")
        pobj, platform = self.read("platform", "text", major)
        if major == 21 and pobj.has("platform"):
            drops.append(((pobj, ("platform",)), "v21 has no platform (ami_type names the OS)"))
        by_platform = {"bottlerocket": "bottlerocket", "windows": "windows"}.get(platform or "")
        if custom is not None:
            if major <= 20 and by_platform is not None:
                if typed:
                    why = f"with ami_id EKS gets no ami_type: the AMI is {platform} (platform)"
                    drops.append(((obj, ("ami_type",)), why))
                return _Out((by_platform,), uses=((pobj, ("platform",)),), drops=tuple(drops))
            if typed and major <= 19:
                drops.append(((obj, ("ami_type",)), "with ami_id the module sends no ami_type"))
            elif typed and ami_type is not None:
                family = eks.family_of_ami_type(ami_type)
                if family is not None and family != "amazonlinux2":  # AL2's bootstrap.sh
                    uses = ((obj, ("ami_type",)), custom)  # the AMI, of ami_type's OS
                    return _Out((family,), uses=uses, drops=tuple(drops))
                why = (
                    f"with ami_id EKS gets no ami_type: {ami_type} picks the user data format, "
                    "which boots AMIs of other OSes too"
                )
                drops.append(((obj, ("ami_type",)), why))
            if major == 21 and not typed:
                why = "a custom AMI booted with AL2023's nodeadm user data (ami_type default)"
                return _Out(("amazonlinux2023",), why, (custom,), default=True, drops=tuple(drops))
            why = "a custom AMI (ami_id) whose OS is not stated"
            return _Out(None, why, (custom,), drops=tuple(drops))
        if pobj.has("platform") and major <= 20:
            why = "platform picks the user data format; the AMI is ami_type's"
            drops.append(((pobj, ("platform",)), why))
        if typed:
            if not self.managed and major < 20:
                drops.append(((obj, ("ami_type",)), f"v{major} self-managed groups: no ami_type"))
            elif ami_type is None:
                return _Out(None, "ami_type is not resolved", drops=tuple(drops))
            elif (family := eks.family_of_ami_type(ami_type)) is None:
                why = f"ami_type {ami_type}: the AMI's OS is not known"
                return _Out(None, why, ((obj, ("ami_type",)),), drops=tuple(drops))
            else:
                return _Out((family,), uses=((obj, ("ami_type",)),), drops=tuple(drops))
        if self.managed and major <= 20:
            families, why = eks.default_families(version)
            return _Out(families, why, default=True, drops=tuple(drops))
        if major == 21:
            why = "ami_type AL2023_x86_64_STANDARD (sub-module default)"
            return _Out(("amazonlinux2023",), why, default=True, drops=tuple(drops))
        why = "the EKS-optimised AL2 x86_64 AMI (ami_type AL2_x86_64)"
        return _Out(("amazonlinux2",), why, default=True, drops=tuple(drops))

    def _types(self, major: int) -> _Out:
        if self.managed:
            obj, types = self.read("instance_types", "texts", major)
            if obj.has("instance_types"):
                return _Out(
                    types or None,
                    "" if types else "not resolved",
                    _known(obj, "instance_types", types),
                )
            if (external := self._external_launch_template(major)) is not None:
                return _Out(None, "the launch template may name it (not followed)", (external,))
            why = "EKS: t3.medium when neither instance_types nor a launch template names one"
            return _Out((eks.DEFAULT_INSTANCE_TYPE,), why, default=True)
        mixed, drops = self._mixed(major)
        if major >= 19 and (wanted := self.stated("instance_requirements", major)) is not None:
            # the overrides (often instance requirements too) say the same: any matching type
            uses = (wanted, *(mixed.uses if mixed is not None else ()))
            why = "instance_requirements: any matching type (not compared)"
            return _Out(None, why, uses, drops=drops)
        if mixed is not None:
            if (single := self.stated("instance_type", major)) is not None:
                why = "replaced by the mixed instances policy overrides"
                drops = (*drops, (single, why))
            return _Out(mixed.value, mixed.origin, mixed.uses, drops=drops)
        obj, single_type = self.read("instance_type", "text", major)
        if obj.has("instance_type"):
            value = (single_type,) if single_type else None
            why = "" if single_type else "not resolved"
            return _Out(value, why, _known(obj, "instance_type", single_type), drops=drops)
        if self.via_root or major == 21:
            return _Out(("m6i.large",), "instance_type m6i.large", default=True, drops=drops)
        return _Out(None, f"v{major} sub-module: no instance_type default", drops=drops)

    def _mixed(self, major: int) -> tuple[_Out | None, tuple[tuple[Use, str], ...]]:
        """Instance types from the mixed instances policy's overrides, when they apply (None
        when they do not), and the policy's attributes that have no effect."""
        if (policy := self.stated("mixed_instances_policy", major)) is None:
            return None, ()
        obj = policy[0]
        enabled = self.read("use_mixed_instances_policy", "flag", major)[1]
        top: Path = ("mixed_instances_policy", "override")
        nested: Path = ("mixed_instances_policy", "launch_template", "override")
        read_here, other = (nested, top) if major == 21 else (top, nested)
        drops: list[tuple[Use, str]] = []
        if obj.has(other):
            where = "launch_template.override" if major == 21 else "override"
            drops.append(((obj, other), f"v{major} reads mixed_instances_policy.{where}"))
        if not obj.has(read_here):
            return None, tuple(drops)
        if enabled is not True:
            why = "use_mixed_instances_policy is not true: the policy is not applied"
            drops.append(((obj, read_here), why))
            return None, tuple(drops)
        overrides = self.read(read_here, "raw", major)[1]
        if overrides is None:
            return _Out(None, "the mixed instances policy overrides are not resolved"), tuple(drops)
        use = (obj, read_here)
        types: list[str] = []
        for item in overrides if isinstance(overrides, list) else []:
            if not isinstance(item, dict):
                continue
            if item.get("instance_requirements") is not None:
                return _Out(None, "an override by instance requirements: any type", (use,)), tuple(
                    drops
                )
            if item.get("launch_template_specification") is not None:
                return _Out(None, "an override names another launch template", (use,)), tuple(drops)
            if isinstance(item.get("instance_type"), str):
                types.append(item["instance_type"])
            elif item.get("instance_type") is not None:
                why = "an override's instance_type is not resolved"
                return _Out(None, why, (use,)), tuple(drops)
        if not types:
            return None, tuple(drops)
        return _Out(tuple(dict.fromkeys(types)), uses=(use,)), tuple(drops)

    def _external_launch_template(self, major: int) -> Use | None:
        """A launch template of the user's (``create_launch_template = false`` and an id)."""
        create = self.read("create_launch_template", "flag", major)[1]
        if create is False:
            return self.stated("launch_template_id", major)
        return None

    def _custom_template(self, major: int) -> tuple[bool | None, tuple[Use, ...]]:
        """Does the group use the module's launch template (True), EKS's (False) or the
        user's (None)? v18: create_launch_template or a launch_template_name (the root
        passes the group's key); v19+: use_custom_launch_template."""
        if (external := self._external_launch_template(major)) is not None:
            return None, (external,)
        if major == 18:
            create = self.read("create_launch_template", "flag", major)[1]
            named = self.read("launch_template_name", "text", major)[1]
            uses = tuple(
                u
                for u in (
                    self.stated("create_launch_template", major),
                    self.stated("launch_template_name", major),
                )
                if u is not None
            )
            has_name = named != "" if named is not None else self.via_root
            return create is not False or has_name, uses
        custom = self.read("use_custom_launch_template", "flag", major)[1]
        switch = self.stated("use_custom_launch_template", major)
        return custom is not False, (switch,) if switch is not None else ()

    def _disk(self, major: int, families: tuple[str, ...]) -> _Out:
        ami_type = self.read("ami_type", "text", major)[1]
        size_use = self.stated("disk_size", major)
        drops: tuple[tuple[Use, str], ...] = ()
        if self.managed:
            custom, switches = self._custom_template(major)
            if custom is None:
                if size_use is not None:  # the module sends disk_size only without a template
                    drops = ((size_use, "no effect: the user's launch template sizes the disk"),)
                why = "the user's launch template: its disk (not followed)"
                return _Out(None, why, switches, drops=drops)
            if not custom:
                if size_use is not None:
                    size = self.read("disk_size", "count", major)[1]
                    if size is None:
                        return _Out(None, "disk_size is not resolved")
                    return _Out(size, uses=(*switches, size_use))
                found = eks.api_default_disk(families)
                return _Out(found.size, found.why, switches, default=found.size is not None)
            if size_use is not None:
                why = "no effect: the module's launch template is used (use_custom_launch_template)"
                drops = ((size_use, why),)
        elif size_use is not None:
            drops = ((size_use, "self-managed groups have no disk_size"),)
        mapped, unsized = self._mappings(major, families)
        drops = (*drops, *unsized)
        if mapped is not None:
            return _Out(mapped.value, mapped.origin, mapped.uses, drops=drops)
        if (custom_ami := self.stated("ami_id", major)) is not None:
            return _Out(
                None, "a custom AMI (ami_id): its own volume size", (custom_ami,), drops=drops
            )
        found = eks.ami_default_disk(families, ami_type)
        if found.size is None:
            return _Out(None, found.why, drops=drops)
        why = f"no block_device_mappings on the module's launch template: {found.why}"
        return _Out(found.size, why, default=True, drops=drops)

    def _mappings(
        self, major: int, families: tuple[str, ...]
    ) -> tuple[_Out | None, tuple[tuple[Use, str], ...]]:
        """``block_device_mappings`` as ``_sized_by_mappings`` reads them (the disk type
        kept for the spec)."""
        if (use := self.stated("block_device_mappings", major)) is None:
            return None, ()
        value = self.read("block_device_mappings", "raw", major)[1]
        out, drops, kind = _sized_by_mappings(use, value, families)
        if kind is not None or (out is not None and out.value is not None):
            self.disk_type = kind
        return out, drops

    def _sizes(self) -> tuple[int | None, int | None, int | None]:
        """min / max / desired (desired only initial); ``schedules`` widen min..max."""
        obj, unit = self.read("desired_size_type", "text")
        if obj.has("desired_size_type") and unit not in (None, "units"):
            self.r.compared(obj, "desired_size_type", "minSize", unit)
            self.r.note("minSize", f"desired_size_type = {unit}: the sizes are not node counts")
            return None, None, None
        lo = self.settle("minSize", "min_size", self._size("min_size", 0), merge=min)
        hi = self.settle("maxSize", "max_size", self._size("max_size", 1), merge=max)
        desired = self.settle("desiredSize", "desired_size", self._size("desired_size", 2))
        eks.check_sizes(self.r, *(self._stated_size(a) for a in _SIZES))
        lo, hi = self._scheduled(lo, hi)
        return lo, hi, desired

    def _stated_size(self, attr: str) -> eks.Stated | None:
        obj, value = self.read(attr, "count")
        return (obj, (attr,), value) if obj.has(attr) and value is not None else None

    def _size(self, attr: str, index: int) -> Callable[[int], _Out]:
        def decide(major: int) -> _Out:
            obj, value = self.read(attr, "count", major)
            if obj.has(attr):
                why = "" if value is not None else "not resolved"
                return _Out(value, why, _known(obj, attr, value))
            if self.managed:
                fallback = (1 if self.via_root or major == 21 else 0, 3, 1)
            else:
                fallback = (1 if major == 21 else 0, 3, 1)
            where = "root module fallback" if self.via_root and major < 21 else "default"
            kind = "eks-managed" if self.managed else "self-managed"
            why = f"{kind} {attr} {fallback[index]} ({where})"
            return _Out(fallback[index], why, default=True)

        return decide

    def _scheduled(self, lo: int | None, hi: int | None) -> tuple[int | None, int | None]:
        """Scheduled scaling actions move min/max at times: the range covers them."""
        if (use := self.stated("schedules")) is None:
            return lo, hi
        schedules = self.read("schedules", "raw")[1]
        if not isinstance(schedules, dict):
            return None, None
        sizes: dict[str, list[int]] = {"min_size": [], "max_size": []}
        for schedule in schedules.values():
            for key, found in sizes.items():
                value = schedule.get(key) if isinstance(schedule, dict) else None
                if isinstance(value, str) and (number := ascii_int(value, signed=True)) is not None:
                    value = number
                if isinstance(value, int) and not isinstance(value, bool):
                    if value >= 0:  # -1: "keep the current size"
                        found.append(value)
                elif value is not None:
                    self.r.unresolve(use[0], "schedules", "minSize", f"schedules: {key}")
                    return None, None
        if lo is not None:
            lo = min([lo, *sizes["min_size"]])
            self.r.compared(use[0], "schedules", "minSize", lo)
        if hi is not None:
            hi = max([hi, *sizes["max_size"]])
            self.r.compared(use[0], "schedules", "maxSize", f"min {lo}, max {hi}")
        return lo, hi

    def _capacity(self) -> dict[str, str]:
        fact = f"labels.{eks.CAPACITY_LABEL}"
        obj, stated = self.read("capacity_type", "text")
        if not obj.has("capacity_type"):
            why = f"{self.majors.label}: EKS managed node groups are ON_DEMAND"
            self.r.default(fact, "capacity_type", "ON_DEMAND", why)
            return {eks.CAPACITY_LABEL: "ON_DEMAND"}
        if stated in ("ON_DEMAND", "SPOT"):
            self.r.compared(obj, "capacity_type", fact, stated)
            return {eks.CAPACITY_LABEL: stated}
        if stated is not None:
            obj.view.ignored(("capacity_type",), f"{stated}: its node label is not known")
        return {}

    def _labels(self) -> dict[str, str]:
        obj = self.src("labels")
        return (self.r.labels(obj, "labels") or {}) if obj is not None else {}

    def _taints(self) -> tuple[Taint, ...]:
        obj = self.src("taints")
        return (self.r.taints(obj, "taints") or ()) if obj is not None else ()

    # -- boot ------------------------------------------------------------------------------

    def _format(self, major: int) -> str | None:
        """Which user data template renders the group: al2, al2023, bottlerocket, windows."""
        platforms = {"linux": "al2", "bottlerocket": "bottlerocket", "windows": "windows"}
        platform = self.read("platform", "text", major)[1]
        if major <= 19:  # v18/v19: platform picks the template
            return platforms.get(platform or "linux")
        obj, ami_type = self.read("ami_type", "text", major)
        if obj.has("ami_type"):
            return _format_of_ami_type(ami_type) if ami_type else None
        if major == 20:
            return platforms.get(platform or "linux")
        return "al2023"

    def _boot_of(self, major: int) -> _Boot:
        out = _Boot()
        fmt = self._format(major)
        enabled = not self.managed or self.read("enable_bootstrap_user_data", "flag", major)[1]
        obj, text = self.read("bootstrap_extra_args", "text", major)
        use: Use = (obj, ("bootstrap_extra_args",))
        if text is not None:
            if fmt == "al2" and enabled:
                out.read(self.r, use, bootstrap.from_kubelet_flags, text)
            elif fmt == "al2":
                why = "no effect: AL2 managed groups apply it only with enable_bootstrap_user_data"
                out.drops.append((use, why))
            elif fmt == "al2023":
                why = "no effect: AL2023 ignores it (nodeadm reads cloudinit_pre_nodeadm)"
                out.drops.append((use, why))
            elif fmt == "bottlerocket":
                out.read(self.r, use, bootstrap.from_bottlerocket_toml, text)
            else:
                out.opaque.append((use, bootstrap.read_opaque(bootstrap.from_user_data, text)))
        obj, parts = self.read("cloudinit_pre_nodeadm", "raw", major)
        use = (obj, ("cloudinit_pre_nodeadm",))
        if parts is not None:
            if major <= 19:
                out.drops.append((use, f"v{major} has no cloudinit_pre_nodeadm"))
            elif fmt != "al2023":
                out.drops.append((use, "no effect: only AL2023 user data has nodeadm parts"))
            else:
                out.read_nodeadm_parts(self.r, use, parts)
        for key in _OPAQUE:
            obj, value = self.read(key, "raw", major)
            if value is not None:
                opaque = bootstrap.read_opaque(bootstrap.from_user_data, _content(value))
                out.opaque.append(((obj, (key,)), opaque))
        if (template := self.stated("user_data_template_path", major)) is not None:
            out.opaque.append((template, bootstrap.BootFacts(found=True)))
        return out

    def _boot(self, labels: dict[str, str], taints: list[Taint]) -> int | None:
        """Boot-time labels, taints and max-pods, asserted where every candidate major
        renders them alike; shell scripts are read but never asserted."""
        r = self.r
        boots = {m: self._boot_of(m) for m in self.majors.majors}
        first = next(iter(boots.values()))
        uses = list(dict.fromkeys(u for b in boots.values() for u in b.uses))
        self._drops({m: _Out(drops=tuple(b.drops)) for m, b in boots.items()}, skip=set(uses))
        max_pods = None
        if all(b.key() == first.key() for b in boots.values()):
            facts = first.facts
            for obj, path in uses:
                for key, value in facts.labels.items():
                    r.compared(obj, path, f"labels.{key}", f"{key}={value}")
                for taint in facts.taints:
                    r.compared(obj, path, taint.field_name, "registered at boot")
                if facts.max_pods is not None:
                    r.compared(obj, path, "allocatable.pods", facts.max_pods)
                if not (facts.labels or facts.taints or facts.max_pods is not None):
                    obj.view.ignored(path, "no node labels, taints or max-pods in it")
            labels.update(facts.labels)
            taints.extend(facts.taints)
            max_pods = facts.max_pods
            for expression in facts.unresolved:
                r.note(bootstrap.unresolved_fact(expression), expression)
            for obj, path in uses if facts.ignored else ():  # flags that take no effect
                obj.view.ignored(path, "; ".join(facts.ignored))
        else:
            for obj, path in uses:
                r.unresolve(obj, path, "taints", _MAJOR)
        what = "sets node labels, taints or max-pods: not asserted (it may not take effect)"
        for (obj, path), facts in {u: f for b in boots.values() for u, f in b.opaque}.items():
            if not facts.found:
                obj.view.ignored(path, "no node labels, taints or max-pods in it")
                continue
            obj.view.unresolved(path, what, None)
            for key, value in facts.labels.items():
                r.note(f"labels.{key}", f"{key}={value} in {path[0]}: {what}")
            if facts.taints or not (facts.labels or facts.max_pods is not None):
                r.note("taints", f"{path[0]}: {what}")
        return max_pods
