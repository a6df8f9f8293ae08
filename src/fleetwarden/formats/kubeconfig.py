"""kubeconfig files -> ``ClusterEndpoint`` per context.

Read as client-go's ``tools/clientcmd`` reads them (``loader.go``, ``client_config.go``,
``validation.go``, ``api/v1/types.go``), with one rule on top: a field fleetwarden would not
honour is refused, never ignored. What kubectl refuses is refused here too, naming the file,
the entry and the field:

* a context naming a cluster or user the file(s) do not define (``cluster "x" was not found
  for context "y"``); a context without a cluster; a name listed twice in one list (clientcmd
  fails to convert such a file); a namespace that is not a DNS label;
* both ``certificate-authority`` and ``-data``, both ``client-certificate`` and ``-data`` (or
  ``client-key`` and ``-data``), a certificate without its key (or a key without a
  certificate), a token (or ``tokenFile``) with basic auth, a password without a username,
  ``insecure-skip-tls-verify: true`` with a certificate authority, ``as-uid``/``as-groups``/
  ``as-user-extra`` without ``as``, a ``proxy-url`` whose scheme is not http, https or socks5;
* a field of another type than clientcmd's (a quoted "false" never turns verification off), and
  a field kubeconfig v1 does not define (a misspelt ``certificate-authority-dta`` would leave
  the connection unverified in kubectl's hands: here it is an error naming it).

A context without a ``user`` connects without credentials, as kubectl does (``kubectl proxy``
and local tunnels add their own). Several files (``$KUBECONFIG``) merge as clientcmd merges them:
the first file that names a cluster, user or context wins, entry and all.

File references (``certificate-authority``, ``client-certificate``, ``client-key``,
``tokenFile``) are returned as paths with the file they came from, for the caller to read
(relative paths are relative to that file's directory); this module does no I/O. A user's
``exec`` credential plugin becomes an ``ExecConfig`` (validated as clientcmd does: command and
apiVersion required, ``interactiveMode`` required for ``v1``, defaulting to ``IfAvailable`` for
``v1beta1``); a relative command path is left for the caller to resolve against the
kubeconfig's directory. ``auth-provider`` (removed from kubectl in 1.26) is an error that says
how to migrate. ``proxy-url``, ``tls-server-name``, ``disable-compression`` and the
impersonation fields are carried on the endpoint for the client to honour.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from fleetwarden.core.clusters import (
    ClusterEndpoint,
    Credentials,
    DiscoverySource,
    ExecConfig,
    Impersonation,
    InteractiveMode,
)
from fleetwarden.core.describing import describe_type
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.exec_credentials import EXEC_EXTENSION, check_api_version

__all__ = [
    "ContextRef",
    "FileRefs",
    "check_proxy_url",
    "parse_kubeconfig",
    "parse_kubeconfigs",
]

# the fields of kubeconfig v1 (client-go tools/clientcmd/api/v1/types.go)
_CLUSTER_FIELDS = (
    "server",
    "tls-server-name",
    "insecure-skip-tls-verify",
    "certificate-authority",
    "certificate-authority-data",
    "proxy-url",
    "disable-compression",
    "extensions",
)
_USER_FIELDS = (
    "client-certificate",
    "client-certificate-data",
    "client-key",
    "client-key-data",
    "token",
    "tokenFile",
    "as",
    "as-uid",
    "as-groups",
    "as-user-extra",
    "username",
    "password",
    "auth-provider",
    "exec",
    "extensions",
)
_CONTEXT_FIELDS = ("cluster", "user", "namespace", "extensions")
_EXEC_FIELDS = (
    "command",
    "args",
    "env",
    "apiVersion",
    "installHint",
    "provideClusterInfo",
    "interactiveMode",
)
# clientcmd's parseProxyURL (tools/clientcmd/helpers.go)
_PROXY_SCHEMES = ("http", "https", "socks5")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# header values go out as they are: printable ASCII only (a newline would split the header)
_HEADER_TEXT = re.compile(r"[\x20-\x7e]*")


@dataclass(frozen=True, slots=True)
class FileRefs:
    """Files a context points at, to be read by the caller and passed back in."""

    ca: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    token: str | None = None


@dataclass(frozen=True, slots=True)
class ContextRef:
    """One context; ``cluster_file``/``user_file``: the kubeconfig file its cluster and user
    entries came from (relative ``files`` are relative to its directory)."""

    endpoint: ClusterEndpoint
    files: FileRefs = field(default_factory=FileRefs)
    cluster_file: str = ""
    user_file: str = ""


@dataclass(frozen=True, slots=True)
class _Entry:
    file: str
    body: Mapping[str, Any]


def parse_kubeconfig(path: str, text: str, *, contexts: Sequence[str] = ()) -> list[ContextRef]:
    """Every context (or those named in ``contexts``), in file order."""
    return parse_kubeconfigs([(path, text)], contexts=contexts)


def parse_kubeconfigs(
    files: Sequence[tuple[str, str]], *, contexts: Sequence[str] = ()
) -> list[ContextRef]:
    """The contexts of several kubeconfig files (path, text) merged as clientcmd merges
    ``$KUBECONFIG``: the first file to name an entry wins; every context (or those named in
    ``contexts``), in file order."""
    clusters: dict[str, _Entry] = {}
    users: dict[str, _Entry] = {}
    ctxs: dict[str, _Entry] = {}
    for path, text in files:
        try:
            body = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise FormatError(path, f"YAML error: {exc}") from None
        if body is None:
            body = {}  # an empty file adds nothing (clientcmd loads it as an empty config)
        if not isinstance(body, Mapping):
            raise FormatError(path, "not a kubeconfig (expected a mapping)")
        for table, key, inner in (
            (clusters, "clusters", "cluster"),
            (users, "users", "user"),
            (ctxs, "contexts", "context"),
        ):
            for name, value in _named(path, body, key, inner).items():
                table.setdefault(name, _Entry(path, value))
    where = ", ".join(p for p, _ in files) or "kubeconfig"
    wanted = list(contexts) or list(ctxs)
    out = []
    for name in wanted:
        ctx = ctxs.get(name)
        if ctx is None:
            known = ", ".join(ctxs) or "none"
            raise FormatError(where, f"no context {name!r} (contexts: {known})", field="contexts")
        out.append(_context(name, ctx, clusters, users))
    return out


def _named(
    path: str, body: Mapping[str, Any], key: str, inner: str
) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    first: dict[str, int] = {}
    entries = body.get(key) or ()
    if not isinstance(entries, list):
        raise FormatError(path, "expected a list of {name, " + inner + "}", field=key)
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise FormatError(path, "expected {name, " + inner + "}", field=f"{key}[{i}]")
        value = entry.get(inner) or {}
        if not isinstance(value, Mapping):
            raise FormatError(path, "expected a mapping", field=f"{key}[{i}].{inner}")
        name = entry["name"]
        if name in first:
            # clientcmd's conversion refuses it (api/v1/conversion.go: duplicate name in list)
            raise FormatError(
                path,
                f"{inner} {name!r} is listed twice ({key}[{first[name]}] and {key}[{i}]): "
                "kubectl refuses a kubeconfig with duplicate names; keep one",
                field=f"{key}[{i}]",
            )
        first[name] = i
        out[name] = value
    return out


def _context(
    name: str, ctx: _Entry, clusters: Mapping[str, _Entry], users: Mapping[str, _Entry]
) -> ContextRef:
    here = f"contexts.{name}"
    _known_fields(ctx.file, ctx.body, _CONTEXT_FIELDS, here, "context")
    cluster_name = _string(ctx.file, ctx.body.get("cluster"), f"{here}.cluster")
    if cluster_name is None:
        raise FormatError(
            ctx.file,
            f"context {name!r} names no cluster (kubectl: cluster was not specified)",
            field=f"{here}.cluster",
        )
    cluster = clusters.get(cluster_name)
    if cluster is None:
        known = ", ".join(clusters) or "none"
        raise FormatError(
            ctx.file,
            f"cluster {cluster_name!r} was not found for context {name!r} (clusters: {known})",
            field=f"{here}.cluster",
        )
    user_name = _string(ctx.file, ctx.body.get("user"), f"{here}.user")
    user = _Entry(ctx.file, {})  # no user: no credentials, as kubectl connects
    if user_name is not None:
        found = users.get(user_name)
        if found is None:
            known = ", ".join(users) or "none"
            raise FormatError(
                ctx.file,
                f"user {user_name!r} was not found for context {name!r} (users: {known}); "
                "kubectl would connect without credentials",
                field=f"{here}.user",
            )
        user = found
    namespace = _string(ctx.file, ctx.body.get("namespace"), f"{here}.namespace")
    if namespace is not None and not _DNS_LABEL.fullmatch(namespace):
        raise FormatError(
            ctx.file,
            f"namespace {namespace[:70]!r} is not a DNS label (lower-case letters, digits and "
            "'-', at most 63)",
            field=f"{here}.namespace",
        )
    return _endpoint(
        name,
        cluster,
        f"clusters.{cluster_name}",
        user,
        f"users.{user_name}",
        (namespace,) if namespace else (),
    )


def _known_fields(
    path: str, body: Mapping[str, Any], known: Sequence[str], where: str, what: str
) -> None:
    for key in body:
        if key not in known:
            shown = str(key)[:60]
            near = difflib.get_close_matches(shown, known, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise FormatError(
                path,
                f"not a kubeconfig {what} field, and fleetwarden ignores nothing silently: "
                f"{hint}(a {what} has: {', '.join(known)})",
                field=f"{where}.{shown}",
            )


def _string(path: str, value: Any, field_: str) -> str | None:
    """An optional string; ``""`` is absent, as in clientcmd; another type is refused."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise FormatError(path, f"expected a string, got {describe_type(value)}", field=field_)
    return value


def _boolean(path: str, value: Any, field_: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise FormatError(path, "expected true or false", field=field_)
    return value


def _b64(path: str, value: Any, field_: str) -> bytes | None:
    text = _string(path, value, field_)
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise FormatError(path, "not valid base64", field=field_) from None


def _endpoint(
    name: str,
    cluster_entry: _Entry,
    where: str,
    user_entry: _Entry,
    user_field: str,
    namespaces: tuple[str, ...],
) -> ContextRef:
    # fields are named after the entry to fix: the cluster's name, not the context's
    cfile, cluster = cluster_entry.file, cluster_entry.body
    _known_fields(cfile, cluster, _CLUSTER_FIELDS, where, "cluster")
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise FormatError(cfile, "missing or not an http(s) URL", field=f"{where}.server")
    # a quoted "false" must not turn verification off: only a real boolean counts
    insecure = _boolean(
        cfile, cluster.get("insecure-skip-tls-verify"), f"{where}.insecure-skip-tls-verify"
    )
    server_name = _string(cfile, cluster.get("tls-server-name"), f"{where}.tls-server-name")
    ca_file = _string(cfile, cluster.get("certificate-authority"), f"{where}.certificate-authority")
    ca_data = _b64(
        cfile, cluster.get("certificate-authority-data"), f"{where}.certificate-authority-data"
    )
    if ca_file and ca_data:
        raise FormatError(
            cfile,
            "both certificate-authority and certificate-authority-data are given: kubectl "
            "refuses this; keep one",
            field=f"{where}.certificate-authority",
        )
    if insecure and (ca_file or ca_data):
        raise FormatError(
            cfile,
            "insecure-skip-tls-verify: true with a certificate authority: client-go refuses "
            "the pair (specifying a root certificates file with the insecure flag is not "
            "allowed); remove one",
            field=f"{where}.insecure-skip-tls-verify",
        )
    proxy = check_proxy_url(cfile, cluster.get("proxy-url"), f"{where}.proxy-url")
    no_compression = _boolean(
        cfile, cluster.get("disable-compression"), f"{where}.disable-compression"
    )

    ufile, user = user_entry.file, user_entry.body
    _known_fields(ufile, user, _USER_FIELDS, user_field, "user")
    if user.get("auth-provider") is not None:
        raise FormatError(
            ufile,
            _auth_provider_hint(name, user["auth-provider"]),
            field=f"{user_field}.auth-provider",
        )
    plugin = None
    if user.get("exec") is not None:
        plugin = _exec(ufile, name, user["exec"], cluster, f"{user_field}.exec", cfile, where)
    token = _string(ufile, user.get("token"), f"{user_field}.token")
    if token is not None and not _HEADER_TEXT.fullmatch(token):
        # it goes out in the Authorization header, where the HTTP client would refuse it with
        # a transport error that says nothing of the kubeconfig (the value is never quoted)
        raise FormatError(
            ufile,
            "the token holds a control or non-ASCII character (a stray newline from a block "
            "scalar?); give it on one line",
            field=f"{user_field}.token",
        )
    token_file = _string(ufile, user.get("tokenFile"), f"{user_field}.tokenFile")
    username = _string(ufile, user.get("username"), f"{user_field}.username")
    password = _string(ufile, user.get("password"), f"{user_field}.password")
    if password and not username:
        raise FormatError(
            ufile,
            "a password without a username: client-go would send no basic auth at all; "
            "add the username",
            field=f"{user_field}.password",
        )
    if (token or token_file) and username:
        which = "token" if token else "tokenFile"
        raise FormatError(
            ufile,
            f"both {which} and username/password: kubectl refuses more than one "
            "authentication method; keep one",
            field=f"{user_field}.{which}",
        )
    cert_file = _string(ufile, user.get("client-certificate"), f"{user_field}.client-certificate")
    cert_data = _b64(
        ufile, user.get("client-certificate-data"), f"{user_field}.client-certificate-data"
    )
    key_file = _string(ufile, user.get("client-key"), f"{user_field}.client-key")
    key_data = _b64(ufile, user.get("client-key-data"), f"{user_field}.client-key-data")
    for kind, from_file, data in (
        ("certificate", cert_file, cert_data),
        ("key", key_file, key_data),
    ):
        if from_file and data:
            raise FormatError(
                ufile,
                f"both client-{kind} and client-{kind}-data are given: kubectl refuses this; "
                "keep one",
                field=f"{user_field}.client-{kind}",
            )
    has_cert, has_key = bool(cert_file or cert_data), bool(key_file or key_data)
    if has_cert != has_key:
        given, missing = ("certificate", "key") if has_cert else ("key", "certificate")
        present = f"client-{given}" if (cert_file or key_file) else f"client-{given}-data"
        raise FormatError(
            ufile,
            f"a client {given} without its {missing}: give client-{missing} or "
            f"client-{missing}-data (kubectl refuses a certificate without a key)",
            field=f"{user_field}.{present}",
        )
    creds = Credentials(
        token=token,
        client_cert_pem=cert_data,
        client_key_pem=key_data,
        username=username,
        password=password,
        exec=plugin,
        impersonate=_impersonation(ufile, user, user_field),
    )
    endpoint = ClusterEndpoint(
        name=name,
        server=server.rstrip("/"),
        credentials=creds,
        ca_pem=ca_data,
        insecure=insecure,
        tls_server_name=server_name,
        namespaces=namespaces,
        source=DiscoverySource.KUBECONFIG,
        proxy_url=proxy,
        disable_compression=no_compression,
    )
    files = FileRefs(ca=ca_file, client_cert=cert_file, client_key=key_file, token=token_file)
    return ContextRef(endpoint, files, cluster_file=cfile, user_file=ufile)


def check_proxy_url(path: str, value: Any, field_: str) -> str | None:
    """A proxy URL as clientcmd's parseProxyURL takes it (http, https or socks5), or None;
    ``FormatError`` naming ``field_`` otherwise. The URL may carry a password: no message
    quotes it."""
    text = _string(path, value, field_)
    if text is None:
        return None
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise FormatError(path, "not a URL", field=field_) from None
    if parts.scheme not in _PROXY_SCHEMES:
        scheme = parts.scheme[:20] if parts.scheme.isascii() else "?"
        raise FormatError(
            path,
            f"unsupported scheme {scheme!r}: expected http, https or socks5 (as kubectl)",
            field=field_,
        )
    if not parts.hostname:
        raise FormatError(path, "the proxy URL names no host", field=field_)
    return text


def _impersonation(path: str, user: Mapping[str, Any], where: str) -> Impersonation | None:
    """``as``, ``as-uid``, ``as-groups``, ``as-user-extra``: values go out as HTTP headers."""

    def header_text(value: Any, field_: str) -> str | None:
        text = _string(path, value, field_)
        if text is not None and not _HEADER_TEXT.fullmatch(text):
            raise FormatError(
                path, "expected printable ASCII (it is sent as a header)", field=field_
            )
        return text

    as_user = header_text(user.get("as"), f"{where}.as")
    uid = header_text(user.get("as-uid"), f"{where}.as-uid")
    raw_groups = user.get("as-groups")
    if raw_groups is not None and not isinstance(raw_groups, list):
        raise FormatError(path, "expected a list of strings", field=f"{where}.as-groups")
    groups = tuple(
        g
        for i, item in enumerate(raw_groups or ())
        if (g := header_text(item, f"{where}.as-groups[{i}]")) is not None
    )
    raw_extra = user.get("as-user-extra")
    if raw_extra is not None and not isinstance(raw_extra, Mapping):
        raise FormatError(
            path, "expected a mapping of lists of strings", field=f"{where}.as-user-extra"
        )
    extra: list[tuple[str, tuple[str, ...]]] = []
    for key, values in (raw_extra or {}).items():
        here = f"{where}.as-user-extra.{str(key)[:60]}"
        if not isinstance(key, str) or not key:
            raise FormatError(path, "expected a non-empty string key", field=here)
        if not isinstance(values, list):
            raise FormatError(path, "expected a list of strings", field=here)
        extra.append(
            (
                key,
                tuple(
                    v
                    for i, item in enumerate(values)
                    if (v := header_text(item, f"{here}[{i}]")) is not None
                ),
            )
        )
    if as_user is None:
        if uid or groups or extra:
            raise FormatError(
                path,
                "as-uid, as-groups or as-user-extra without as: kubectl refuses to impersonate "
                "without a user; add as",
                field=f"{where}.as",
            )
        return None
    return Impersonation(as_user, uid, groups, tuple(sorted(extra)))


_MIGRATION = {
    "gcp": "install gke-gcloud-auth-plugin and run `gcloud container clusters get-credentials` "
    "again (it writes an exec plugin)",
    "azure": "run `kubelogin convert-kubeconfig -l azurecli` (Azure/kubelogin), which turns the "
    "context into an exec plugin",
    "oidc": "use an exec plugin such as `kubectl oidc-login` (int128/kubelogin)",
}


def _auth_provider_hint(context: str, provider: Any) -> str:
    kind = provider.get("name") if isinstance(provider, Mapping) else None
    what = _MIGRATION.get(str(kind), "convert it to an exec credential plugin")
    shown = f" {kind!r}" if isinstance(kind, str) else ""
    return (
        f"context {context!r} uses the auth-provider{shown} plugin, which kubectl removed in "
        f"1.26 and fleetwarden does not run: {what}"
    )


def _exec(
    path: str,
    context: str,
    spec: Any,
    cluster: Mapping[str, Any],
    field_: str,
    cluster_file: str,
    cluster_field: str,
) -> ExecConfig:
    """``users[].user.exec`` -> ExecConfig, refused field by field as clientcmd validates."""
    if not isinstance(spec, Mapping):
        raise FormatError(path, "expected a mapping", field=field_)
    _known_fields(path, spec, _EXEC_FIELDS, field_, "exec")
    command = spec.get("command")
    if not isinstance(command, str) or not command.strip():
        raise FormatError(path, "the plugin's command is missing", field=f"{field_}.command")
    api_version = check_api_version(spec.get("apiVersion"), path, f"{field_}.apiVersion")
    args = spec.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise FormatError(path, "expected a list of strings", field=f"{field_}.args")
    entries = spec.get("env") or []
    if not isinstance(entries, list):
        raise FormatError(path, "expected a list of {name, value}", field=f"{field_}.env")
    env: list[tuple[str, str]] = []
    for i, item in enumerate(entries):
        pair = (item.get("name"), item.get("value")) if isinstance(item, Mapping) else (None, None)
        if not isinstance(pair[0], str) or not pair[0] or not isinstance(pair[1], str):
            raise FormatError(path, "expected {name, value} strings", field=f"{field_}.env[{i}]")
        env.append((pair[0], pair[1]))
    hint = spec.get("installHint")
    if hint is not None and not isinstance(hint, str):
        raise FormatError(path, "expected a string", field=f"{field_}.installHint")
    provide = spec.get("provideClusterInfo", False)
    if not isinstance(provide, bool):
        raise FormatError(path, "expected true or false", field=f"{field_}.provideClusterInfo")
    mode = spec.get("interactiveMode")
    if mode is None or mode == "":
        if api_version.endswith("/v1"):
            raise FormatError(
                path,
                "required for client.authentication.k8s.io/v1 (Never, IfAvailable or Always)",
                field=f"{field_}.interactiveMode",
            )
        mode = InteractiveMode.IF_AVAILABLE.value  # clientcmd's default for v1beta1
    if mode not in {m.value for m in InteractiveMode}:
        raise FormatError(
            path, "expected Never, IfAvailable or Always", field=f"{field_}.interactiveMode"
        )
    return ExecConfig(
        command=command,
        api_version=api_version,
        args=tuple(args),
        env=tuple(env),
        install_hint=_clean_hint(hint) if hint else None,
        provide_cluster_info=provide,
        interactive_mode=InteractiveMode(mode),
        cluster_config=_exec_extension(cluster_file, cluster, cluster_field),
        origin=f"context {context!r}",
    )


def _exec_extension(path: str, cluster: Mapping[str, Any], where: str) -> str | None:
    """The cluster's ``extensions[client.authentication.k8s.io/exec].extension``, as JSON."""
    extensions = cluster.get("extensions") or []
    if not isinstance(extensions, list):
        raise FormatError(path, "expected a list of {name, extension}", field=f"{where}.extensions")
    for item in extensions:
        if isinstance(item, Mapping) and item.get("name") == EXEC_EXTENSION:
            try:
                return json.dumps(item.get("extension"), sort_keys=True)
            except (TypeError, ValueError):
                raise FormatError(
                    path, "not representable as JSON", field=f"{where}.extensions.{EXEC_EXTENSION}"
                ) from None
    return None


def _clean_hint(text: str) -> str:
    """An install hint without control characters (client-go strips ANSI escapes too)."""
    return "".join(c if c.isprintable() or c in "\n\t" else " " for c in text).strip()
