"""``fleetwarden serve --config FILE``: the service's YAML configuration.

Example::

    listen: 127.0.0.1:8080
    store: sqlite:///fleetwarden.db          # audit store (SQLAlchemy URL; default: a state dir)
    queue: sqlite                            # or nats://127.0.0.1:4222
    queuePath: fleetwarden-queue.db          # the SQLite queue file (default: beside the store)
    desired: [prod-eu-1=clusters/prod-eu-1/, fleet/pools.yaml]
    nodes: [prod-eu-1=dumps/prod-eu-1.json]  # latest known state where no live access
    clusters:
      kubeconfig: ~/.kube/config
      inCluster: mgmt                        # in a pod: watch this cluster too (its token)
      contexts: [prod-eu-1]
      argocdSecrets: {namespace: argocd, context: mgmt}
    allowedHosts: [fleetwarden.example.com]  # Host names served (default: loopback + listen)
    auth:
      read: {bearerToken: env:FW_READ_TOKEN}   # /api/*, /ui/, /metrics (public: true: open)
      aws: {bearerToken: env:FW_AWS_TOKEN}
      azure: {bearerToken: file:/run/secrets/azure-token}
      gcp: {bearerToken: env:FW_GCP_TOKEN}
      cloudevents: {hmacSecret: env:FW_CE_SECRET}
      argocd: {bearerToken: env:FW_ARGOCD_TOKEN}
      flux: {hmacSecret: env:FW_FLUX_SECRET}
    limits: {bodyBytes: 1048576, queueDepth: 100000, batchEvents: 1000, headerBytes: 16384}
    metrics: {public: false}                 # true: /metrics without auth.read (a scraper)
    debounceSeconds: 2
    eventLog: fleetwarden-events.jsonl       # every processed event, fsync'd before its ack
    role: all                                # all | gateway | worker (scale out over nats://)
    policy: {mode: dry-run}                  # dry-run (default) | enforce | approval
                                             # requestExpiryMinutes: 60 (approval requests)
                                             # maxActionsPerCluster, maxActionsFleet: per 10 min
                                             # warn: fields reported, never healed, per owner:
                                             #  [{owner: {kind: Kustomization, name: "apps-*"},
                                             #    fields: ["spec.replicas", "labels.*"]}]
    ownership:                               # who owns which fields (defaults: seed 001)
      - {cluster: "prod-*", field: "labels.*", owner: cluster, argocd: "{cluster}-nodes"}
    argocd: {url: https://argocd.example.com, token: env:ARGOCD_TOKEN}
      # refresh: normal (default) | hard | false | {mode, debounce: 2, rate: 5, burst: 10,
      #   trackingMethod: annotation, instanceLabel, controlNamespace: argocd}: a live change
      #   refreshes the apps owning it (app/argo_refreshing.py)
    auth: {admin: {bearerToken: env:FW_ADMIN_TOKEN}}   # for POST /api/decisions/ID/approve
    notify:                                  # webhook | slack | alertmanager; urls are secrets
      - {name: oncall, kind: slack, url: env:SLACK_WEBHOOK_URL, minSeverity: high}
      - {name: am, kind: alertmanager, url: http://alertmanager:9093, renotifyMinutes: 1}
      - {name: feed, kind: webhook, url: env:FEED_URL, events: true}  # every change event too
      - {name: corp, kind: webhook, url: https://hooks.corp.example/fw,
         caFile: /etc/fleetwarden/corp-ca.pem}  # CAs trusted besides the system's
    scan: {...}                              # as for `fleetwarden scan --config`
    workloads:                               # follow applications' workloads live
      apps:
        - {name: shop, desired: [rendered/shop/, prod-eu-1=rendered/shop-eu/]}
        - {name: billing, argocd: [billing, prod-us-1=billing-prod-us-1]}  # rendered by Argo CD
      namespaces: []                         # default: all (cluster-wide list and watch)
      secrets: true                          # false: Secrets are not watched (no RBAC for it)
      refreshSeconds: 180                    # re-read the desired state (files, Argo CD)
      maxObjects: 200000                     # per cluster
    fleet: {...}                             # as for `fleetwarden fleet --config`
    leaderElection:                          # replicas: one healer (app/leader_config.py)
      {context: mgmt, namespace: fleetwarden, name: fleetwarden, leaseSeconds: 15}
    sharding:                                # watcher replicas split the clusters (app/sharding.py)
      {context: mgmt, namespace: fleetwarden, group: watchers, leaseSeconds: 15}

Secret values may be given as ``env:NAME`` (an environment variable) or ``file:PATH``; they are
never logged or echoed (a missing variable is an error that names the variable, not a value).

The read side (``/api/*``, ``/ui/``, ``/metrics``) is closed by default: without ``auth.read``
tokens ``serve`` listens only on a loopback address (``exposure_problem``), and whatever the
address, only ``allowedHosts`` are answered (see ``core/access.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import jsonschema
import yaml

from fleetwarden.app.argo_refreshing import RefreshSettings, parse_refresh_settings
from fleetwarden.app.ingesting import SourceAuth
from fleetwarden.app.leader_config import SCHEMA as LEADER_SCHEMA
from fleetwarden.app.leader_config import LeaderElectionConfig, leader_election_from
from fleetwarden.app.sharding import SCHEMA as SHARDING_SCHEMA
from fleetwarden.app.sharding import ShardingConfig, sharding_from
from fleetwarden.app.workload_watching import WorkloadWatchSettings
from fleetwarden.core import access
from fleetwarden.core.access import ReadAuth, default_hosts, is_loopback
from fleetwarden.core.policy import WarnRule, parse_warn
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.events import SOURCES
from fleetwarden.formats.settings import CONFIG_SCHEMA, Settings, settings_from
from fleetwarden.formats.workloads import FleetSettings, fleet_settings
from fleetwarden.ports.audit import AuditStoreError

__all__ = [
    "SERVICE_SCHEMA",
    "AppSource",
    "GatewayConfig",
    "ServiceConfig",
    "StoreChecks",
    "default_store",
    "exposure_problem",
    "gateway_config",
    "load_service_config",
    "secret_values",
    "service_config_from",
    "without_credentials",
]

_SECRET = {"type": "string", "minLength": 1}
_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}
_SECRETS = {"oneOf": [_SECRET, {"type": "array", "items": _SECRET, "minItems": 1}]}
# a name, *.suffix, * (any), or a bracketed IPv6 address; never a port or a path
_HOST_PATTERN = r"^(\*|(\*\.)?[^\s/*:\[\]]+|\[[0-9a-fA-F:.]+\])$"
SERVICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        **CONFIG_SCHEMA["properties"],  # auditLogs too: serve's watchers join them
        "listen": {"type": "string", "pattern": r"^[^:\s]+:\d{1,5}$"},
        "store": {"type": "string", "minLength": 1},
        # a nats:// URL may carry credentials: env:NAME / file:PATH, like every secret
        "queue": {"type": "string", "pattern": r"^(sqlite|nats://.+|env:.+|file:.+)$"},
        "queuePath": {"type": "string", "minLength": 1},
        # checked by their own parsers (precise errors naming the field)
        "leaderElection": LEADER_SCHEMA,
        "sharding": SHARDING_SCHEMA,
        "desired": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "nodes": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "clusters": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kubeconfig": {"type": "string"},
                "contexts": {"type": "array", "items": {"type": "string"}},
                "inCluster": {"type": "string", "minLength": 1},
                "argocdSecrets": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["namespace"],
                    "properties": {"namespace": {"type": "string"}, "context": {"type": "string"}},
                },
                "probeIntervalSeconds": {"type": "number", "exclusiveMinimum": 0},
            },
        },
        "auth": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                source: {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"hmacSecret": _SECRETS, "bearerToken": _SECRETS},
                }
                for source in (*SOURCES, "admin")
            }
            | {
                "read": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"bearerToken": _SECRETS, "public": {"type": "boolean"}},
                }
            },
        },
        "allowedHosts": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "pattern": _HOST_PATTERN},
        },
        "metrics": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"public": {"type": "boolean"}},
        },
        "limits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                **CONFIG_SCHEMA["properties"]["limits"]["properties"],
                "bodyBytes": {"type": "integer", "minimum": 1024},
                "queueDepth": {"type": "integer", "minimum": 1},
                "batchEvents": {"type": "integer", "minimum": 1},
                "headerBytes": {"type": "integer", "minimum": 1024},
            },
        },
        "debounceSeconds": {"type": "number", "minimum": 0},
        "eventLog": {"type": "string", "minLength": 1},
        "role": {"enum": ["all", "gateway", "worker"]},
        "notify": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "kind", "url"],
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "kind": {"enum": ["webhook", "slack", "alertmanager"]},
                    "url": _SECRET,
                    "secret": _SECRET,
                    "token": _SECRET,
                    "minSeverity": {"enum": ["info", "low", "medium", "high", "critical"]},
                    "renotifyMinutes": {"type": "number", "exclusiveMinimum": 0},
                    "events": {"type": "boolean"},
                    # a PEM file of CAs trusted besides the system's (adapters/trust.py)
                    "caFile": {"type": "string", "minLength": 1},
                },
            },
        },
        "policy": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "mode": {"enum": ["dry-run", "enforce", "approval"]},
                "requestExpiryMinutes": {"type": "number", "exclusiveMinimum": 0},
                # the blast radius in actions per 10 minutes (default: 10 % of the pools)
                "maxActionsPerCluster": {"type": "integer", "minimum": 1},
                "maxActionsFleet": {"type": "integer", "minimum": 1},
                "warn": {"type": "array"},  # checked by core.policy.parse_warn (precise errors)
            },
        },
        "ownership": {"type": "array", "items": {"type": "object"}},
        "fleet": {"type": "object"},  # validated by formats.workloads.fleet_settings
        "workloads": {
            "type": "object",
            "additionalProperties": False,
            "required": ["apps"],
            "properties": {
                "apps": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name"],
                        "anyOf": [{"required": ["desired"]}, {"required": ["argocd"]}],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "desired": {
                                "type": "array",
                                "items": {"type": "string", "minLength": 1},
                            },
                            "argocd": {
                                "type": "array",
                                "items": {"type": "string", "minLength": 1},
                            },
                        },
                    },
                },
                "namespaces": _STRINGS,
                "secrets": {"type": "boolean"},
                "refreshSeconds": {"type": "number", "minimum": 5},
                "maxObjects": {"type": "integer", "minimum": 1},
            },
        },
        "argocd": {
            "type": "object",
            "additionalProperties": False,
            "required": ["url"],
            "properties": {
                "url": {"type": "string", "pattern": "^https?://"},
                "token": _SECRET,
                "insecure": {"type": "boolean"},
                "refresh": {"type": ["boolean", "string", "object"]},  # argo_refreshing
            },
        },
        "replayWindowSeconds": {"type": "number", "minimum": 1},
    },
}


def default_store(env: Mapping[str, str] | None = None) -> str:
    """Where the audit store lives when the config does not say: a state directory (never the
    directory serve happens to be started in): ``$FLEETWARDEN_STATE_DIR``, else
    ``$XDG_STATE_HOME/fleetwarden``, else ``~/.local/state/fleetwarden``. The SQLite queue
    then sits beside it."""
    env = os.environ if env is None else env
    state = env.get("FLEETWARDEN_STATE_DIR") or os.path.join(
        env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state"),
        "fleetwarden",
    )
    return f"sqlite:///{os.path.abspath(os.path.join(state, 'fleetwarden.db'))}"


def default_queue_path(env: Mapping[str, str] | None = None) -> str:
    """The SQLite queue's file beside the default store (``default_store``): its directory,
    ``fleetwarden-queue.db``."""
    store = default_store(env).removeprefix("sqlite:///")
    return str(Path(store).with_name("fleetwarden-queue.db"))


@dataclass(frozen=True)
class StoreChecks:
    """The audit store adapter's answers about a store URL, passed in (the app imports no
    adapter): ``sqlite_file`` its SQLite file (None: not a file), ``sqlite_path_problem`` why
    that file is likely not the one meant (None: it is). Both raise ``AuditStoreError`` for a
    URL that is no store's."""

    sqlite_file: Callable[[str], Path | None]
    sqlite_path_problem: Callable[[str], str | None]


@dataclass
class ServiceConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    store: str = field(default_factory=default_store)
    queue: str = "sqlite"
    queue_path: str = field(default_factory=lambda: default_queue_path())
    desired: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    kubeconfig: str | None = None
    in_cluster: str | None = None  # the name of the cluster serve runs in, to watch it too
    contexts: list[str] = field(default_factory=list)
    argocd_namespace: str | None = None
    argocd_context: str | None = None
    probe_interval: float = 10.0
    auth: dict[str, SourceAuth] = field(default_factory=dict)
    read: ReadAuth = field(default_factory=ReadAuth)
    allowed_hosts: frozenset[str] = field(default_factory=lambda: default_hosts("127.0.0.1"))
    metrics_public: bool = False
    body_limit: int = 2**20
    batch_events: int = 1000
    header_bytes: int = 16384
    queue_depth: int = 100_000
    debounce: float = 2.0
    replay_window: float = 300.0
    scan: Settings = field(default_factory=Settings)
    journal: str | None = None
    role: str = "all"
    notify: list[dict[str, Any]] = field(default_factory=list)
    policy_mode: str = "dry-run"
    request_expiry: float = 3600.0  # seconds an approval request waits before it is cancelled
    max_per_cluster: int | None = None  # actions per guard window; None: a fraction of pools
    max_fleet: int | None = None
    ownership: list[dict[str, Any]] = field(default_factory=list)
    warn: tuple[WarnRule, ...] = ()  # policy.warn: fields reported and never healed
    argocd_url: str | None = None
    argocd_token: str | None = None
    argocd_insecure: bool = False
    argocd_refresh: RefreshSettings | None = None  # with argocd: targeted refreshes
    fleet: FleetSettings = field(default_factory=FleetSettings)
    apps: list[AppSource] = field(default_factory=list)
    workloads: WorkloadWatchSettings | None = None  # None: workloads are not watched
    desired_refresh: float = 180.0
    leader_election: LeaderElectionConfig | None = None  # None: always leads
    sharding: ShardingConfig | None = None  # None: every cluster watched here

    def __repr__(self) -> str:
        return (
            f"ServiceConfig(listen={self.host}:{self.port}, "
            f"queue={without_credentials(self.queue)}, auth={self.auth}, read={self.read})"
        )


def _secret(value: str, where: str, source: str, env: Mapping[str, str]) -> str:
    if value.startswith("env:"):
        name = value[4:]
        if name not in env or not env[name]:
            raise FormatError(source, f"environment variable {name} is not set", field=where)
        return env[name]
    if value.startswith("file:"):
        path = Path(value[5:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise FormatError(
                source, f"cannot read secret file {path}: {exc.strerror}", field=where
            ) from None
        if not text:
            raise FormatError(source, f"secret file {path} is empty", field=where)
        return text
    return value


def without_credentials(url: str) -> str:
    """``nats://user:pass@host:4222`` as ``nats://host:4222``: a URL fit to print or log."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


def _queue_url(value: str, source: str, env: Mapping[str, str]) -> str:
    url = _secret(value, "queue", source, env)
    if url != "sqlite" and not url.startswith("nats://"):
        raise FormatError(source, "must be sqlite or a nats:// URL", field="queue")
    return url


def load_service_config(
    path: Path | None, *, checks: StoreChecks, env: Mapping[str, str] | None = None
) -> ServiceConfig:
    env = os.environ if env is None else env
    if path is None:
        return ServiceConfig()
    source = str(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise FormatError(source, f"cannot read config: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise FormatError(
            source,
            f"YAML syntax error: {getattr(exc, 'problem', exc)}",
            line=mark.line + 1 if mark is not None else None,
        ) from None
    if not isinstance(raw, Mapping):
        raise FormatError(source, "the config must be a mapping")
    return service_config_from(raw, source=source, checks=checks, env=env)


def service_config_from(
    raw: Mapping[str, Any],
    *,
    source: str,
    checks: StoreChecks,
    env: Mapping[str, str] | None = None,
) -> ServiceConfig:
    """A validated ``ServiceConfig`` from an already parsed mapping (``source`` names it)."""
    env = os.environ if env is None else env
    errors = sorted(
        jsonschema.Draft202012Validator(SERVICE_SCHEMA).iter_errors(raw),
        key=lambda e: list(e.absolute_path),
    )
    if errors:
        where = ".".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        # never echo a value from the auth section: it may be a secret
        message = errors[0].message if not where.startswith("auth") else errors[0].validator
        raise FormatError(source, str(message), field=where)
    file_limits = {
        k: v
        for k, v in (raw.get("limits") or {}).items()
        if k in ("desiredFileBytes", "nodesFileBytes")
    }
    scan_raw = {"scan": raw.get("scan") or {}, "limits": file_limits}
    if "auditLogs" in raw:  # cluster -> its API server's audit log, for the watchers
        scan_raw["auditLogs"] = raw["auditLogs"]
    scan = settings_from(scan_raw, source=source)
    host, _, port = raw.get("listen", "127.0.0.1:8080").rpartition(":")
    if int(port) > 65535:  # the kernel would take it modulo 65536: another port, silently
        raise FormatError(source, f"port {int(port)} is over 65535", field="listen")
    auth = {}
    read = ReadAuth()
    for name, spec in (raw.get("auth") or {}).items():

        def values(key: str, spec: Mapping[str, Any] = spec, name: str = name) -> tuple[str, ...]:
            v = spec.get(key)
            items = [v] if isinstance(v, str) else list(v or ())
            return tuple(_secret(x, f"auth.{name}.{key}", source, env) for x in items)

        if name == "read":
            read = ReadAuth(tokens=values("bearerToken"), public=bool(spec.get("public", False)))
            continue
        auth[name] = SourceAuth(
            hmac_secrets=values("hmacSecret"), bearer_tokens=values("bearerToken")
        )
    if read.public and read.tokens:
        raise FormatError(
            source, "give bearerToken or public: true, not both", field="auth.read.public"
        )
    for n in raw.get("notify") or ():
        if n.get("events") and n["kind"] != "webhook":
            raise FormatError(
                source, "events: true is for kind: webhook sinks", field=f"notify.{n['name']}"
            )
    clusters = raw.get("clusters") or {}
    limits = raw.get("limits") or {}
    argocd = clusters.get("argocdSecrets") or {}
    hosts = raw.get("allowedHosts")
    store = _secret(raw.get("store") or default_store(env), "store", source, env)
    if (problem := _store_problem(store, source, checks)) is not None:
        raise FormatError(source, problem, field="store")
    queue = _queue_url(raw.get("queue", "sqlite"), source, env)
    return ServiceConfig(
        host=host,
        port=int(port),
        read=read,
        allowed_hosts=frozenset(h.strip("[]").lower() for h in hosts)
        if hosts
        else default_hosts(host),
        metrics_public=bool((raw.get("metrics") or {}).get("public", False)),
        batch_events=int(limits.get("batchEvents", 1000)),
        header_bytes=int(limits.get("headerBytes", 16384)),
        store=store,
        queue=queue,
        queue_path=raw.get("queuePath") or _queue_beside_store(store, queue, source, checks),
        desired=list(raw.get("desired") or ()),
        nodes=list(raw.get("nodes") or ()),
        kubeconfig=clusters.get("kubeconfig"),
        in_cluster=clusters.get("inCluster"),
        contexts=list(clusters.get("contexts") or ()),
        argocd_namespace=argocd.get("namespace"),
        argocd_context=argocd.get("context"),
        probe_interval=float(clusters.get("probeIntervalSeconds", 10.0)),
        auth=auth,
        body_limit=int(limits.get("bodyBytes", 2**20)),
        queue_depth=int(limits.get("queueDepth", 100_000)),
        debounce=float(raw.get("debounceSeconds", 2.0)),
        replay_window=float(raw.get("replayWindowSeconds", 300.0)),
        scan=scan,
        journal=raw.get("eventLog"),
        role=raw.get("role", "all"),
        notify=[
            {
                **n,
                **{
                    k: _secret(n[k], f"notify.{n['name']}.{k}", source, env)
                    for k in ("url", "secret", "token")
                    if k in n
                },
            }
            for n in raw.get("notify") or ()
        ],
        policy_mode=(raw.get("policy") or {}).get("mode", "dry-run"),
        request_expiry=60.0 * float((raw.get("policy") or {}).get("requestExpiryMinutes", 60)),
        max_per_cluster=(raw.get("policy") or {}).get("maxActionsPerCluster"),
        max_fleet=(raw.get("policy") or {}).get("maxActionsFleet"),
        ownership=list(raw.get("ownership") or ()),
        warn=_warn((raw.get("policy") or {}).get("warn"), source),
        argocd_url=(raw.get("argocd") or {}).get("url"),
        argocd_token=_secret((raw.get("argocd") or {})["token"], "argocd.token", source, env)
        if (raw.get("argocd") or {}).get("token")
        else None,
        argocd_insecure=bool((raw.get("argocd") or {}).get("insecure", False)),
        argocd_refresh=parse_refresh_settings(raw["argocd"].get("refresh"), source=source)
        if raw.get("argocd")
        else None,
        **_workloads(raw, source),
        leader_election=leader_election_from(raw.get("leaderElection"), source=source),
        sharding=sharding_from(raw.get("sharding"), source=source),
    )


def _store_problem(store: str, source: str, checks: StoreChecks) -> str | None:
    try:
        return checks.sqlite_path_problem(store)
    except AuditStoreError as exc:
        raise FormatError(source, str(exc), field="store") from None


def _queue_beside_store(store: str, queue: str, source: str, checks: StoreChecks) -> str:
    """The SQLite queue's default file: beside an SQLite store, named after it (the default
    store's gives ``fleetwarden-queue.db``), never wherever serve happens to be started."""
    try:
        path = checks.sqlite_file(store)
    except AuditStoreError as exc:
        raise FormatError(source, str(exc), field="store") from None
    if path is not None:
        return str(path.with_name(f"{path.stem}-queue.db"))
    if queue == "sqlite":
        raise FormatError(
            source,
            "the SQLite queue's file is kept beside an SQLite store by default; with this "
            "store, set queuePath to a local file (or use queue: nats://...)",
            field="queuePath",
        )
    return ""  # not used: the queue is NATS


def secret_values(config: ServiceConfig) -> list[str]:
    """Every credential the config holds (tokens, HMAC secrets, webhook URLs, passwords in the
    store and queue URLs): the values the log redaction masks wherever they appear."""
    values: list[str] = [*config.read.tokens]
    for auth in config.auth.values():
        values += [*auth.hmac_secrets, *auth.bearer_tokens]
    for sink in config.notify:
        values += [sink[k] for k in ("url", "secret", "token") if sink.get(k)]
    if config.argocd_token:
        values.append(config.argocd_token)
    for url in (config.store, config.queue):
        password = urlsplit(url).password
        if password:
            values += [password, url]
    return values


def exposure_problem(config: ServiceConfig) -> str | None:
    """Why ``serve`` must not start with this config (None: it may): a read side without
    ``auth.read`` on an address other machines can reach, unless ``auth.read.public``."""
    if is_loopback(config.host) or config.read.required or config.read.public:
        return None
    return (
        f"listen: {config.host}:{config.port} is reachable from other machines and auth.read "
        "has no bearerToken: /api, /ui and /metrics would be open to them. Set "
        "auth.read.bearerToken, listen on 127.0.0.1, or say auth.read.public: true"
    )


@dataclass
class GatewayConfig:
    """The gateway's limits and the door's rules (``entrypoints/gateway.py``)."""

    auth: Mapping[str, SourceAuth] = field(default_factory=dict)
    body_limit: int = 2**20
    replay_window: float = 300.0
    retry_after: int = 5
    recent_events: int = 1000
    known_pools: Mapping[str, set[str]] = field(default_factory=dict)  # cluster -> pools
    batch_events: int = 1000  # events in one request (a batch, or one body that names many)
    door: access.DoorConfig = field(default_factory=access.DoorConfig)


def gateway_config(config: ServiceConfig, known_pools: dict[str, set[str]]) -> GatewayConfig:
    """The gateway's limits and the door's rules of this configuration."""
    admin = config.auth.get("admin")
    return GatewayConfig(
        auth=config.auth,
        body_limit=config.body_limit,
        replay_window=config.replay_window,
        known_pools=known_pools,
        batch_events=config.batch_events,
        door=access.DoorConfig(
            allowed_hosts=config.allowed_hosts,
            read=config.read,
            admin_tokens=admin.bearer_tokens if admin is not None else (),
            metrics_public=config.metrics_public,
        ),
    )


@dataclass(frozen=True)
class AppSource:
    """One followed application: its rendered manifests (files) and/or Argo CD applications."""

    name: str
    desired: tuple[str, ...] = ()
    argocd: tuple[str, ...] = ()


def _warn(raw: Any, source: str) -> tuple[WarnRule, ...]:
    try:
        rules = parse_warn(raw, where="policy.warn")
    except ValueError as exc:
        where, _, reason = str(exc).partition(": ")
        raise FormatError(source, reason, field=where) from None
    return rules


def _workloads(raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    fleet = fleet_settings(raw.get("fleet"), source=source)
    section = raw.get("workloads")
    if not section:
        return {"fleet": fleet}
    apps = [
        AppSource(a["name"], tuple(a.get("desired") or ()), tuple(a.get("argocd") or ()))
        for a in section["apps"]
    ]
    names = [a.name for a in apps]
    if len(set(names)) != len(names):
        raise FormatError(source, "an application is named twice", field="workloads.apps")
    if any(a.argocd for a in apps) and not raw.get("argocd"):
        raise FormatError(
            source, "argocd applications need the argocd: section (url, token)", field="workloads"
        )
    settings = WorkloadWatchSettings(
        namespaces=tuple(section.get("namespaces") or ()),
        secrets=bool(section.get("secrets", True)),
        max_objects=int(section.get("maxObjects", 200_000)),
        options=fleet.options,
        app_label=fleet.app_label,
    )
    return {
        "fleet": fleet,
        "apps": apps,
        "workloads": settings,
        "desired_refresh": float(section.get("refreshSeconds", 180)),
    }
