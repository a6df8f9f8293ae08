"""Node labels, taints and max-pods set at boot: kubelet flags, nodeadm NodeConfig, Bottlerocket.

Provisioners let users pass what the kubelet registers in text fields fleetwarden would
otherwise drop without a trace:

- kubelet flags (AL2 ``bootstrap.sh --kubelet-extra-args '--node-labels=a=b,c=d
  --register-with-taints=k=v:NoSchedule --max-pods=58'``, eksctl ``overrideBootstrapCommand``,
  terraform-aws-eks ``bootstrap_extra_args``, kubeadm ``kubeletExtraArgs``);
- nodeadm ``NodeConfig`` documents (AL2023: ``spec.kubelet.flags``, ``spec.kubelet.config``
  ``registerWithTaints`` / ``maxPods``), alone or inside a MIME multi-part user data, which is
  read part by part: kubelet flags in the shell script parts beside a NodeConfig count too, and
  what both set to different values is unresolved, with the reason (``_beside``). Of a part
  nodeadm reads, only the first YAML document counts (``formats.node_configs``); one that is
  not YAML, or not a NodeConfig, is refused (``NodeConfigYAMLError``, ``NotNodeConfigError``:
  nodeadm does not start the node);
  plain text laid out as one that is not YAML leaves what it sets unresolved (``_node_configs``);
- Bottlerocket TOML (``[settings.kubernetes.node-labels]``, ``[settings.kubernetes.node-taints]``
  with ``"key" = "value:Effect"`` or a list of them, ``settings.kubernetes.max-pods``).

Only literal values are taken; a value holding a shell or template variable (``${NODE_LABELS}``,
``$LABELS``) is returned as unresolved, never guessed. Values are read as the kubelet reads
them (``formats.kubelet_values``, whose rules are re-exported here; it names its sources): one
it refuses to start with, or registers a Node with that the API server refuses, raises
``KubeletFlagError`` -- no node of the pool would join, so the desired state is wrong, and the
readers report it naming the file and the field. That includes a ``--node-labels`` label in the
kubernetes.io / k8s.io namespaces the kubelet may not set itself (``node-role.kubernetes.io/*``:
ValidateKubeletFlags returns an error, and the kubelet does not start), in a script,
a NodeConfig's flags and Bottlerocket's ``node-labels`` alike. In a script, where flags are found
by searching text, that holds for a flag that is a shell word of its own (or the value of an
assignment or of ``--kubelet-extra-args=``); one found inside other text (a ``sed``
expression) or written ``--flag VALUE`` may not be a kubelet argument at all, so a value the
kubelet would refuse is returned as unresolved, with the reason (a label it may not set as
ignored: it is on no Node either way). A script is read as one
kubelet command line: every ``--node-labels`` adds labels, the last ``--register-with-taints``
and ``--max-pods`` win and the earlier ones are returned as ignored (``BootFacts.ignored``). A
literal ``--kubelet-extra-args`` value with a word that is neither a flag nor a flag's value
(``'--node-labels=a=b oops'``) is refused too: the kubelet takes no positional argument.
A script's comments pass nothing: whole lines and the rest of a line from a ``#`` that begins
a word (``shell_text.uncommented``). Pure: text in, ``BootFacts`` out.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.core.pools import EFFECTS, Taint
from fleetwarden.formats import kubelet_values, mime, node_configs
from fleetwarden.formats import shell as shell_text
from fleetwarden.formats.kubelet_values import (  # the values' rules, re-exported for readers
    DROPPED_TAINT,
    GO_SPACE,
    REFUSED_LABEL,
    KubeletFlagError,
    kubelet_labels,
    kubelet_may_set,
    kubelet_taint,
    kubelet_taints,
    label_value,
    max_pods,
    qualified_name,
    register_with_taints,
)
from fleetwarden.formats.node_configs import NodeConfigYAMLError, NotNodeConfigError

__all__ = [
    "DROPPED_TAINT",
    "GO_SPACE",
    "REFUSED_LABEL",
    "BootFacts",
    "KubeletFlagError",
    "NodeConfigYAMLError",
    "NotNodeConfigError",
    "flags_given",
    "from_bottlerocket_toml",
    "from_kubelet_extra_args",
    "from_kubelet_flags",
    "from_node_config",
    "from_nodeadm",
    "from_user_data",
    "kubelet_config",
    "kubelet_labels",
    "kubelet_may_set",
    "kubelet_taint",
    "kubelet_taints",
    "label_value",
    "max_pods",
    "qualified_name",
    "read_opaque",
    "register_with_taints",
    "unresolved_fact",
]

# a shell expansion ($VAR, ${VAR}, $1, $@, $(cmd), `cmd`) or a template's ({{ .X }})
_VARIABLE = re.compile(r"\$[{(A-Za-z_0-9@*#?$!-]|`|\{\{")
_FLAG = re.compile(r"--(node-labels|register-with-taints|max-pods)(?==|\Z)")
# what may come before a flag in the same shell word and still leave it a kubelet argument:
# assignments (KUBELET_EXTRA_ARGS=--node-labels=..., Environment=KUBELET_EXTRA_ARGS=...) and
# an option taking it as its value (--kubelet-extra-args=--node-labels=...)
_LEAD = re.compile(r"(?:(?:[A-Za-z_][A-Za-z0-9_]*\+?|--[a-z][a-z0-9-]*)=['\"]?)*\Z")


@dataclass(slots=True)
class BootFacts:
    """What the kubelet will register, as far as literal text says."""

    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    max_pods: int | None = None
    unresolved: list[str] = field(default_factory=list)  # texts holding variables
    ignored: list[str] = field(default_factory=list)  # flags found that do not take effect
    found: bool = False  # the text sets labels, taints or max-pods at all
    # a --register-with-taints flag gives the taints (it beats any registerWithTaints the
    # kubelet's configuration holds, a provisioner's own included), not a configuration
    taints_flag: bool = False
    max_pods_flag: bool = False  # likewise for --max-pods and maxPods

    def merge(self, other: BootFacts) -> None:
        self.labels.update(other.labels)
        self.taints.extend(t for t in other.taints if t not in self.taints)
        if other.max_pods is not None:
            self.max_pods = other.max_pods
        self.unresolved.extend(other.unresolved)
        self.ignored.extend(other.ignored)
        self.found = self.found or other.found
        self.taints_flag = self.taints_flag or other.taints_flag
        self.max_pods_flag = self.max_pods_flag or other.max_pods_flag


# ------------------------------------------------------------------------------------------
# Kubelet flags in command lines and scripts


@dataclass(frozen=True, slots=True)
class _Hit:
    """One kubelet flag found in a text. ``certain``: a kubelet argument for sure (a shell word
    of its own, or the value of an assignment / option), so a value the kubelet refuses is
    an error; otherwise (inside other text: a sed expression, a flag whose value is the next
    word) such a value is left unresolved."""

    flag: str
    value: str | None  # None: nothing follows the flag
    certain: bool

    @property
    def text(self) -> str:
        return f"--{self.flag}" if self.value is None else f"--{self.flag}={self.value}"


def from_kubelet_flags(text: str, *, shell: bool = True) -> BootFacts:
    """``--node-labels``, ``--register-with-taints`` and ``--max-pods`` anywhere in a command
    line or shell script (quotes and ``--kubelet-extra-args '...'`` nesting allowed), read as
    one kubelet command line: labels of every ``--node-labels`` accumulate, the last
    ``--register-with-taints`` and ``--max-pods`` win (the earlier ones are listed as
    ignored). ``KubeletFlagError`` for a flag the kubelet refuses, or a word in a
    ``--kubelet-extra-args`` value that is no flag (see ``_check_extra_args``). ``shell``: the
    text is a shell's, whose comments pass nothing (``shell_text.uncommented``: a line
    commented out, ``... --max-pods=20 # was 30``); False for flags handed to the kubelet as
    they are (a NodeConfig's ``kubelet.flags``), where a ``#`` is no comment."""
    if shell:
        text = shell_text.uncommented(text)
    out = BootFacts()
    labels: dict[str, str] = {}
    certain_keys: set[str] = set()  # the labels a certain hit set last
    last: dict[str, _Hit] = {}
    for hit in _hits(text, shell=shell):
        out.found = True
        if hit.flag == "node-labels":
            _node_labels_hit(out, hit, labels, certain_keys)
            continue
        earlier = last.get(hit.flag)
        if earlier is not None:
            out.ignored.append(
                f"{earlier.text}: replaced by a later --{hit.flag} (the kubelet keeps the last)"
            )
        last[hit.flag] = hit
    try:
        kubelet_values.check_node_labels({k: v for k, v in labels.items() if k in certain_keys})
    except KubeletFlagError as exc:
        raise KubeletFlagError(f"kubelet flag --node-labels: {exc}") from None
    for key, value in labels.items():
        if key not in certain_keys and not kubelet_may_set(key):
            # on no Node either way: not a kubelet argument, or one it refuses to start with
            out.ignored.append(f"--node-labels={key}={value}: {REFUSED_LABEL} ({_NOT_READ})")
        elif key in certain_keys or (qualified_name(key) and label_value(value)):
            out.labels[key] = value
        else:
            out.unresolved.append(f"--node-labels={key}={value} ({_NOT_READ})")
    if (taints := last.get("register-with-taints")) is not None:
        _taints_hit(out, taints)
    if (pods := last.get("max-pods")) is not None:
        _max_pods_hit(out, pods)
    _check_extra_args(text)  # after the values: pflag refuses a malformed one first
    return out


_NOT_READ = "found inside other text, not read as a kubelet argument"


def _unreadable(out: BootFacts, hit: _Hit, exc: KubeletFlagError) -> None:
    """A value the kubelet refuses: an error where the hit is certainly a kubelet argument,
    else left unresolved with the reason."""
    if hit.certain:
        raise KubeletFlagError(f"kubelet flag --{hit.flag}: {exc}") from None
    out.unresolved.append(f"{hit.text} ({exc}; {_NOT_READ})")


def _node_labels_hit(
    out: BootFacts, hit: _Hit, labels: dict[str, str], certain_keys: set[str]
) -> None:
    if hit.value is None or _VARIABLE.search(hit.value):
        out.unresolved.append(hit.text)
        return
    found: dict[str, str] = {}
    try:
        kubelet_values.set_node_labels(found, hit.value)
    except KubeletFlagError as exc:
        _unreadable(out, hit, exc)
        return
    labels.update(found)
    if hit.certain:
        certain_keys.update(found)
    else:
        certain_keys.difference_update(found)


def _taints_hit(out: BootFacts, hit: _Hit) -> None:
    out.taints_flag = True
    if hit.value is None or _VARIABLE.search(hit.value):
        out.unresolved.append(hit.text)
        return
    try:
        taints, dropped = register_with_taints(hit.value)
    except KubeletFlagError as exc:
        _unreadable(out, hit, exc)
        return
    out.taints.extend(taints)
    out.ignored.extend(f"--register-with-taints item {item!r}: {DROPPED_TAINT}" for item in dropped)


def _max_pods_hit(out: BootFacts, hit: _Hit) -> None:
    out.max_pods_flag = True
    if hit.value is None or _VARIABLE.search(hit.value):
        out.unresolved.append(hit.text)
        return
    try:
        out.max_pods = max_pods(hit.value)
    except KubeletFlagError as exc:
        _unreadable(out, hit, exc)


def _hits(text: str, *, shell: bool = True) -> list[_Hit]:
    tokens, exact = _tokens(text, shell=shell)
    out = []
    for i, token in enumerate(tokens):
        match = _FLAG.search(token)
        if match is None:
            continue
        lead = token[: match.start()]
        own_word = exact and _LEAD.match(lead) is not None
        if token[match.end() : match.end() + 1] == "=":
            # quotes left around a nested word are a later shell's or systemd's to remove; one
            # left inside it (sed's 's/A=x/A="x --max-pods=20"/') says it is inside other text
            value = token[match.end() + 1 :].strip("'\"")
            inside = "'" in value or '"' in value
            out.append(_Hit(match[1], value, own_word and not inside))
        else:  # "--max-pods 58": pflag takes the next argument, if this is a kubelet's
            following = tokens[i + 1] if i + 1 < len(tokens) else None
            out.append(_Hit(match[1], following, certain=False))
    return out


def _tokens(text: str, *, shell: bool = True) -> tuple[list[str], bool]:
    """Shell words (False: the quotes do not balance, so the words are only a guess)."""
    tokens = shell_text.words(text, operators=shell)
    if tokens is None:
        return text.split(), False
    # '--kubelet-extra-args "--node-labels=a=b --max-pods=20"' nests flags in one word, which
    # the script word-splits when it passes it on
    return [part for token in tokens for part in token.split()], True


_EXTRA_ARGS = "--kubelet-extra-args"


def from_kubelet_extra_args(text: str) -> BootFacts:
    """A text that is the value of ``--kubelet-extra-args`` (terraform-aws-eks v17
    ``kubelet_extra_args``), read as ``from_kubelet_flags`` reads that flag."""
    return from_kubelet_flags(f"{_EXTRA_ARGS} {shlex.quote(text)}")


# KUBELET_EXTRA_ARGS=..., KUBELET_EXTRA_ARGS+=..., Environment=KUBELET_EXTRA_ARGS=... as a word
_EXTRA_ARGS_VARIABLE = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*=)*KUBELET_EXTRA_ARGS\+?=(.*)", re.S)


def _check_extra_args(text: str) -> None:
    """``KubeletFlagError`` for a word of a ``--kubelet-extra-args`` value, or of a
    ``KUBELET_EXTRA_ARGS`` assignment, that is neither a flag nor a flag's value
    (``'--node-labels=a=b oops'``): bootstrap.sh hands the value on as ``KUBELET_EXTRA_ARGS``
    (it also takes the variable from its environment), which the kubelet unit passes as
    ``$KUBELET_EXTRA_ARGS``: systemd splits it at spaces (as it does a value written to an
    environment file or an ``Environment=`` line), and the kubelet, which takes no positional
    argument, refuses to start ("unknown command", NewKubeletCommand). Only an option or an
    assignment that is a shell word of its own, with a literal value: quotes, escapes or
    variables left in it are another layer's to expand, so nothing is refused there."""
    words = shell_text.words(text)
    # a drop-in's Environment= line, as the file holds it (in a here-document or a file)
    lines = [line.strip() for line in text.splitlines()]
    for line in (line for line in lines if line.startswith(_ENVIRONMENT)):
        _check_environment(line)
    for i, word in enumerate(words or ()):
        value, shown = None, ""
        if word.startswith(_ENVIRONMENT):  # written by a command (echo '...' >> drop-in)
            _check_environment(word)
        elif (assigned := _EXTRA_ARGS_VARIABLE.fullmatch(word)) is not None:
            value, shown = assigned[1], f"KUBELET_EXTRA_ARGS={assigned[1]!r}"
        elif (at := word.find(_EXTRA_ARGS)) >= 0 and _LEAD.match(word[:at]) is not None:
            rest = word[at + len(_EXTRA_ARGS) :]
            if rest[:1] == "=":
                value = rest[1:]
            elif not rest and i + 1 < len(words or ()):
                value = (words or [])[i + 1]
            shown = f"{_EXTRA_ARGS} {value!r}"
        _check_value(value, shown)


_ENVIRONMENT = "Environment="


def _check_environment(setting: str) -> None:
    """A systemd ``Environment=`` setting: its items split as systemd splits them (a quoted
    item is one, stray words beside an unquoted assignment are assignments of their own, which
    systemd ignores); a ``KUBELET_EXTRA_ARGS=`` item's value is what the unit's
    ``$KUBELET_EXTRA_ARGS`` passes, split at blanks."""
    for item in shell_text.unit_words(setting.removeprefix(_ENVIRONMENT)) or ():
        name, equals, value = item.partition("=")
        if equals and name == "KUBELET_EXTRA_ARGS":
            _check_value(value, f"{_ENVIRONMENT}KUBELET_EXTRA_ARGS={value!r}")


def _check_value(value: str | None, shown: str) -> None:
    if value is None or _VARIABLE.search(value) or any(c in value for c in "'\"\\`$"):
        return
    stray = _positional(value.split())
    if stray is not None:
        raise KubeletFlagError(
            f"{shown}: {stray!r} is not a flag nor the value of one; the kubelet takes no "
            f"positional argument and refuses to start (unknown command {stray})"
        )


def _positional(words: list[str]) -> str | None:
    """The first word pflag would leave as a positional argument. ``--flag VALUE`` takes the
    next word as the value (a bool flag would not, but which flags are bool is not told here:
    such a word is let through)."""
    value_next = False
    for i, word in enumerate(words):
        if word == "--":  # the end of the flags: whatever follows is positional
            return words[i + 1] if i + 1 < len(words) else None
        if word.startswith("-") and word != "-":
            value_next = "=" not in word
        elif value_next:
            value_next = False
        else:
            return word
    return None


def from_nodeadm(text: str, *, part: str = "") -> BootFacts:
    """The nodeadm ``NodeConfig``s of a text nodeadm reads as one: plain YAML (JSON) or a
    MIME message's ``application/node.eks.aws`` parts, the first YAML document of each. One
    that is not YAML, or whose first document is no NodeConfig, is refused, as nodeadm refuses
    it (see ``_node_configs``). ``part``: the text is the body of the ``application/node.eks.aws``
    part so named (terraform-aws-eks ``cloudinit_pre_nodeadm[0]``), so an empty one is refused
    too (nodeadm's decoder finds no kind in it)."""
    out = BootFacts()
    configs: list[Mapping[str, Any]] = []
    split = mime.parts(text)
    for i, one in enumerate(split, 1):
        if one.body is None:
            out.found = True
            out.unresolved.extend(f"{flag} ({_UNREADABLE})" for flag in _FLAGS)
            continue
        named = bool(part) and len(split) == 1 and not one.content_type
        ours = one.content_type == _NODEADM_TYPE or (len(split) == 1 and not one.content_type)
        where = f"MIME part {i} ({one.content_type})" if one.content_type else part
        declared = one.content_type == _NODEADM_TYPE or named
        configs.extend(_node_configs(out, one.body, nodeadm=ours, declared=declared, where=where))
    out.merge(_from_node_configs(configs))
    return out


def from_node_config(text: str) -> BootFacts:
    """A text that is one NodeConfig, not a MIME message: eksctl's AL2023
    ``overrideBootstrapCommand``, which eksctl unmarshals (its first YAML document) into the
    NodeConfig it hands nodeadm. ``NodeConfigYAMLError`` where it is not YAML,
    ``NotNodeConfigError`` where that document is no NodeConfig (empty included). eksctl
    marshals the NodeConfig again for nodeadm, so its field names are matched as Go's
    encoding/json matches them (``Spec:`` is ``spec``), not as nodeadm's own decoder would."""
    out = BootFacts()
    configs = _node_configs(out, text, nodeadm=True, declared=True, go_json=True)
    out.merge(_from_node_configs(configs))
    return out


def _from_node_configs(configs: Iterable[Mapping[str, Any]]) -> BootFacts:
    """NodeConfigs as nodeadm merges them and hands them to the kubelet: every ``kubelet.flags``
    in order, as one command line (mergeKubeletFlags appends them), and ``kubelet.config``
    merged key by key, a later NodeConfig's value replacing an earlier one -- an empty list,
    0, "" or null too; only two mappings merge (mergeInlineDocument: util.Merge, mergo
    WithOverride on the decoded maps, whose map branch sets a later element whatever it is:
    nodeadm/internal/api merge.go, util/merge.go, vendored dario.cat/mergo merge.go). nodeadm
    writes the flags after its own (the user's win) and the configuration to a drop-in file;
    the kubelet lets a command-line flag override the configuration: ``--register-with-taints``
    / ``--max-pods`` replace ``registerWithTaints`` / ``maxPods`` (kubeletConfigFlagPrecedence),
    which are then listed as ignored."""
    flags: list[str] = []
    merged: dict[str, Any] = {}
    replaced: list[str] = []
    for config in configs:
        spec = config.get("spec")
        kubelet = spec.get("kubelet") if isinstance(spec, Mapping) else None
        if not isinstance(kubelet, Mapping):
            continue
        given = kubelet.get("flags")
        if isinstance(given, list):
            flags.extend(f for f in given if isinstance(f, str))  # null: Go's "" (no flag)
        config_ = kubelet.get("config")
        if not isinstance(config_, Mapping):
            continue
        for key, value in config_.items():
            earlier = merged.get(key)
            if isinstance(earlier, Mapping) and isinstance(value, Mapping):
                value = {**earlier, **value}  # deep below this: no field read here is a map
            if key in _CONFIG_FLAGS and key in merged and merged[key] != value:
                replaced.append(
                    f"{key}: {merged[key]!r}: replaced by a later NodeConfig's {value!r} "
                    "(nodeadm merges NodeConfigs, the later value wins)"
                )
            merged[key] = value
    line = " ".join(flags)
    out = from_kubelet_flags(line, shell=False)  # nodeadm hands them on as they are
    out.ignored.extend(replaced)
    kubelet_config(out, merged, flags=flags_given(line), drop_in=True)
    return out


# KubeletConfiguration fields a kubelet flag overrides
_CONFIG_FLAGS = {"registerWithTaints": "register-with-taints", "maxPods": "max-pods"}
_OVERRIDDEN = "the kubelet flag --{} overrides its configuration (command-line flags win)"


def flags_given(line: str) -> frozenset[str]:
    """The kubelet flags a command line gives (their values readable or not)."""
    return frozenset(hit.flag for hit in _hits(line, shell=False))


def kubelet_config(
    out: BootFacts,
    config: Mapping[str, Any],
    *,
    flags: Collection[str] = (),
    drop_in: bool = False,
) -> None:
    """A KubeletConfiguration fragment: ``registerWithTaints`` and ``maxPods``.
    ``KubeletFlagError`` for a value the kubelet refuses to load (a type its strict decoding
    refuses, ``maxPods`` < 0) or a taint the API server refuses on the Node it registers (no
    exact effect, a bad key or value, a key and effect twice: ValidateNodeSpec). ``flags``: the
    kubelet flags the command line also gives (``register-with-taints``, ``max-pods``); a field
    such a flag overrides is listed as ignored, and refused only where the kubelet cannot load
    it (its type): what it says is neither registered nor validated. ``maxPods: 0``: the
    kubelet's default, 110, where the fragment is (merged into) its configuration file, whose
    decoding defaults a 0 (SetDefaults_KubeletConfiguration); unresolved where it is a drop-in
    (``drop_in``: nodeadm writes a NodeConfig's ``kubelet.config`` as one), which the kubelet
    merges over its configuration undefaulted."""
    taints = config.get("registerWithTaints")
    if taints is not None:
        out.found = True
        if not isinstance(taints, list):
            raise KubeletFlagError(
                "kubelet configuration registerWithTaints: not a list (the kubelet refuses it)"
            )
        if "register-with-taints" in flags:
            for i, item in enumerate(taints):
                if not isinstance(item, Mapping):
                    raise KubeletFlagError(
                        f"kubelet configuration registerWithTaints[{i}]: not a taint object "
                        "(the kubelet refuses it)"
                    )
            shown = ", ".join(str(dict(t)) for t in taints) or "[]"
            out.ignored.append(
                f"registerWithTaints: {shown}: {_OVERRIDDEN.format('register-with-taints')}"
            )
            taints = []
        seen: set[tuple[str, str]] = set()
        for i, item in enumerate(taints):
            taint = _config_taint(out, item, f"kubelet configuration registerWithTaints[{i}]")
            if taint is None:
                continue
            if (taint.key, taint.effect) in seen:
                raise KubeletFlagError(
                    f"kubelet configuration registerWithTaints[{i}]: a second taint with key "
                    f"{taint.key!r} and effect {taint.effect} (the API server refuses the Node "
                    "the kubelet registers)"
                )
            seen.add((taint.key, taint.effect))
            if taint not in out.taints:
                out.taints.append(taint)
    pods = config.get("maxPods")
    if pods is None:
        return
    out.found = True
    variable = isinstance(pods, str) and _VARIABLE.search(pods) is not None
    if not variable and (isinstance(pods, bool) or not isinstance(pods, int)):
        raise KubeletFlagError(
            f"kubelet configuration maxPods: {pods!r} is not an integer (the kubelet refuses it)"
        )
    if "max-pods" in flags:
        out.ignored.append(f"maxPods: {pods}: {_OVERRIDDEN.format('max-pods')}")
    elif variable:
        out.unresolved.append(f"maxPods: {pods}")
    elif pods < 0:
        raise KubeletFlagError(
            f"kubelet configuration maxPods: {pods} is negative (the kubelet refuses to start)"
        )
    elif pods == 0 and drop_in:
        out.unresolved.append(f"maxPods: 0: {_ZERO_DROP_IN}")
    elif pods == 0:
        out.max_pods = _KUBELET_MAX_PODS
        out.ignored.append(f"maxPods: 0: {_ZERO_DEFAULTED}")
    else:
        out.max_pods = pods


_KUBELET_MAX_PODS = 110
_ZERO_DEFAULTED = (
    f"the kubelet defaults a 0 in its configuration file to {_KUBELET_MAX_PODS} "
    "(SetDefaults_KubeletConfiguration), which is expected"
)
_ZERO_DROP_IN = (
    "nodeadm writes kubelet.config as a drop-in (config.json.d/40-nodeadm.conf), which the "
    "kubelet decodes without defaults and merges over the configuration nodeadm computes, so "
    f"the kubelet may run with 0 rather than its default {_KUBELET_MAX_PODS} or nodeadm's "
    "pod count: not asserted"
)


def _config_taint(out: BootFacts, item: Any, where: str) -> Taint | None:
    """One ``registerWithTaints`` entry (None: it holds a variable, noted as unresolved)."""
    if not isinstance(item, Mapping):
        raise KubeletFlagError(f"{where}: not a taint object (the kubelet refuses it)")
    key, value, effect = item.get("key"), item.get("value"), item.get("effect")
    texts = [t for t in (key, value, effect) if isinstance(t, str)]
    if any(_VARIABLE.search(t) for t in texts):
        out.unresolved.append(f"{where.removeprefix('kubelet configuration ')}: {dict(item)}")
        return None
    refused = "the API server refuses the Node the kubelet registers"
    if not isinstance(key, str) or not qualified_name(key):
        raise KubeletFlagError(f"{where}.key: {key!r} is not a taint key ({refused})")
    if value is not None and (not isinstance(value, str) or not label_value(value)):
        raise KubeletFlagError(f"{where}.value: {value!r} is not a taint value ({refused})")
    if effect not in EFFECTS:
        raise KubeletFlagError(
            f"{where}.effect: {effect!r}: one of {', '.join(EFFECTS)}, spelt exactly ({refused})"
        )
    return Taint(key, value or None, str(effect))


_NODEADM_TYPE = "application/node.eks.aws"  # nodeadm's nodeConfigMediaType


def _node_configs(
    out: BootFacts,
    body: str,
    *,
    nodeadm: bool,
    declared: bool = False,
    where: str = "",
    go_json: bool = False,
) -> list[Mapping[str, Any]]:
    """The NodeConfig of a part's body as nodeadm reads it (``node_configs.read``), its notes
    taken into ``out``: a body whose settings cannot be told leaves them unresolved, saying why."""
    found = node_configs.read(
        body, nodeadm=nodeadm, declared=declared, where=where, go_json=go_json
    )
    out.ignored.extend(found.ignored)
    if found.unreadable is not None:
        out.found = True
        out.unresolved.extend(f"{flag} ({found.unreadable}: not read)" for flag in _FLAGS)
    return found.configs


def from_bottlerocket_toml(text: str) -> BootFacts:
    """Bottlerocket settings TOML: node labels, node taints and max-pods."""
    out = BootFacts()
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):  # deep nesting included
        return out
    settings = data.get("settings")
    kube = settings.get("kubernetes") if isinstance(settings, Mapping) else None
    if not isinstance(kube, Mapping):
        return out
    labels = kube.get("node-labels")
    if isinstance(labels, Mapping):
        out.found = True
        for key, value in labels.items():
            if _VARIABLE.search(str(value)):
                out.unresolved.append(f"node-labels.{key} = {value}")
            elif not kubelet_may_set(str(key)):  # Bottlerocket passes them as --node-labels
                raise KubeletFlagError(
                    f"Bottlerocket settings.kubernetes.node-labels.{key}: {REFUSED_LABEL}"
                )
            else:
                out.labels[str(key)] = str(value)
    taints = kube.get("node-taints")
    if isinstance(taints, Mapping):
        out.found = True
        for key, value in taints.items():
            for one in value if isinstance(value, list) else [value]:
                taint = _toml_taint(out, str(key), str(one))
                if taint is not None and taint not in out.taints:
                    out.taints.append(taint)
    pods = kube.get("max-pods")
    if isinstance(pods, int) and not isinstance(pods, bool):
        out.found = True
        out.max_pods = pods
    return out


def _toml_taint(out: BootFacts, key: str, value: str) -> Taint | None:
    """``"key" = "value:Effect"``: Bottlerocket hands it to the kubelet's registerWithTaints,
    so an effect not spelt exactly, or a bad key or value, is refused there (its own settings
    check takes any alphanumeric effect: models/src/modeled_types KubernetesTaintValue)."""
    shown = f"Bottlerocket settings.kubernetes.node-taints.{key} = {value!r}"
    if _VARIABLE.search(key) or _VARIABLE.search(value):
        out.unresolved.append(f"node-taints.{key} = {value}")
        return None
    try:
        return kubelet_taint(f"{key}={value}")
    except KubeletFlagError as exc:
        raise KubeletFlagError(f"{shown}: {exc}") from None


def from_user_data(text: str) -> BootFacts:
    """Any of the three forms, whichever the text holds. A MIME multi-part user data is read
    part by part: a ``NodeConfig`` part as nodeadm reads it, every other part (shell scripts)
    for kubelet flags, all of them as one command line; ``_beside`` says how the two combine."""
    out = BootFacts()
    if "[settings" in text:
        out.merge(from_bottlerocket_toml(text))
    configs: list[Mapping[str, Any]] = []
    scripts: list[str] = []
    for i, part in enumerate(mime.parts(text), 1):
        if part.body is None:  # whatever it sets is not known: said, not dropped
            out.found = True
            out.unresolved.extend(f"{flag} ({_UNREADABLE})" for flag in _FLAGS)
            continue
        ours = part.content_type == _NODEADM_TYPE
        where = f"MIME part {i} ({part.content_type})" if part.content_type else ""
        unread = len(out.unresolved)
        # a part of another declared type is never nodeadm's, whatever it holds
        theirs = part.content_type is not None and not ours
        found = (
            []
            if theirs
            else _node_configs(out, part.body, nodeadm=ours, declared=ours, where=where)
        )
        if found or ours:  # its flags are nodeadm's to pass on: not read again as a script's
            configs.extend(found)
        elif len(out.unresolved) == unread and _MENTIONS_FLAG.search(part.body):
            scripts.append(part.body)
    nodeadm = _from_node_configs(configs)
    script = from_kubelet_flags("\n".join(scripts)) if scripts else BootFacts()
    out.merge(_beside(nodeadm, script))
    return out


_MENTIONS_FLAG = re.compile(
    r"--(?:node-labels|register-with-taints|max-pods|kubelet-extra-args)|KUBELET_EXTRA_ARGS"
)
_FLAGS = ("--node-labels", "--register-with-taints", "--max-pods")
_UNREADABLE = "a MIME part that does not decode to text: what it sets is not read"


_BOTH = (
    "set by both the NodeConfig part and a shell script part of the user data: which one the "
    "kubelet registers depends on how the script hands its flag on"
)


def _beside(config: BootFacts, script: BootFacts) -> BootFacts:
    """A NodeConfig (nodeadm passes its flags and configuration to the kubelet) and kubelet flags
    in the shell script parts beside it. Either alone is read as it is; labels add up (the
    kubelet's --node-labels do). Where both set taints, max-pods or one label to different
    values, which one the kubelet gets depends on what the script writes where (a flag beside
    nodeadm's, after or before it, or over a configuration value): left unresolved, with the
    reason, never one side silently dropped."""
    if not (config.found and script.found):
        return script if script.found else config
    out = BootFacts(
        found=True,
        taints_flag=config.taints_flag or script.taints_flag,
        max_pods_flag=config.max_pods_flag or script.max_pods_flag,
    )
    out.unresolved = [*config.unresolved, *script.unresolved]
    out.ignored = [*config.ignored, *script.ignored]
    for key, value in {**config.labels, **script.labels}.items():
        other = config.labels.get(key, value)
        if other != value:
            out.unresolved.append(f"--node-labels={key}={other} or {key}={value}: {_BOTH}")
        else:
            out.labels[key] = value
    if config.taints and script.taints and set(config.taints) != set(script.taints):
        shown = " or ".join(
            ",".join(
                f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                for t in side.taints
            )
            for side in (config, script)
        )
        out.unresolved.append(f"--register-with-taints={shown}: {_BOTH}")
    else:
        out.taints = list(config.taints or script.taints)
    pods = {config.max_pods, script.max_pods} - {None}
    if len(pods) > 1:
        out.unresolved.append(f"--max-pods={config.max_pods} or {script.max_pods}: {_BOTH}")
    else:
        out.max_pods = next(iter(pods), None)
    return out


def unresolved_fact(expression: str) -> str:
    """The fact an unresolved text of ``BootFacts.unresolved`` leaves open (``taints``,
    ``allocatable.pods`` or ``labels``), so a reader leaves exactly that one unchecked: taints
    noted as labels would still be compared, as none."""
    if expression.startswith(("--register-with-taints", "node-taints", "registerWithTaints")):
        return "taints"
    if expression.startswith(("--max-pods", "maxPods")):
        return "allocatable.pods"
    return "labels"


def read_opaque(parse: Callable[[str], BootFacts], text: str) -> BootFacts:
    """``parse(text)`` for a text that may not take effect, whose facts are only listed as not
    asserted: one the kubelet would refuse sets something too (found), never an error."""
    try:
        return parse(text)
    except KubeletFlagError:
        return BootFacts(found=True)
