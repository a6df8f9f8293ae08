"""The proxy a Go client takes from the environment, for a client of one server.

kubectl, client-go and the ``argocd`` CLI reach a server through a proxy named in the
environment when nothing else names one: client-go's transport uses ``http.ProxyFromEnvironment``
unless the kubeconfig has a ``proxy-url`` (client-go ``transport/cache.go``), wrapped by
apimachinery's ``NewProxierWithNoProxyCIDR`` (``util/net/http.go``); the ``argocd`` CLI's HTTP
transport is ``http.ProxyFromEnvironment`` (argo-cd ``pkg/apiclient/apiclient.go``). Go's rules
(golang.org/x/net ``http/httpproxy/proxy.go``), followed here:

* ``HTTPS_PROXY`` for an https server, ``HTTP_PROXY`` for an http one (never the other as a
  fallback); each upper-case name wins over its lower-case one unless it is empty; ``NO_PROXY``
  likewise. A value without a scheme (``proxy.corp:3128``) is an http proxy.
* never for ``localhost`` or a loopback address;
* ``NO_PROXY``: comma-separated, trimmed, case-insensitive; ``*`` alone excludes every server;
  a CIDR (``10.0.0.0/8``) excludes the IP addresses in it (apimachinery also reads IPv4 octets
  with leading zeros); an IP address, optionally with a port, excludes that address; a name
  excludes itself and its subdomains (``corp.example`` and ``api.corp.example``), a name with a
  leading ``.`` or ``*.`` only the subdomains; a ``:port`` suffix restricts an entry to that
  port (the server's default port being 443 or 80);
* with ``REQUEST_METHOD`` set (a CGI process) an ``HTTP_PROXY`` for an http server is refused
  (the "httpoxy" guard).

Where fleetwarden differs (Go's behaviour checked against go1.26 ``net/http``): Go's
``parseProxy`` takes any value ``url.Parse`` reads, with ``http://`` put before one that has no
scheme or host or does not parse; ``init`` drops a value that does not parse even then (a direct
connection, silently), and the transport speaks to a proxy of an unknown scheme as to an http
one, dials ``:port`` on the local host for a proxy URL without a host, and, for a port that is
not a number, reads ``http://http://proxy:31x8`` as a proxy named ``http``: the requests fail,
or go where nobody meant them to. Here each of these is a ``ProxyError`` naming the variable
(a scheme other than http, https, socks5 or socks5h; no host; a port that is not a number),
raised when the client is made, so a command or ``serve`` stops at once with it. The value is
quoted without its user info (``http://***@proxy.corp:3128``): a proxy password is never in
an error. What is not done: the environment of a credential plugin is the process's, untouched.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["ProxyError", "environment_proxy"]

# Go's transport: socks5 and socks5h alike resolve the server's name at the proxy
_SCHEMES = ("http", "https", "socks5", "socks5h")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class ProxyError(ValueError):
    """A proxy variable of the environment that names no usable proxy."""


def _first(env: Mapping[str, str], *names: str) -> tuple[str, str]:
    """(name, value) of the first variable set to a non-empty value (Go's getEnvAny)."""
    for name in names:
        if env.get(name):
            return name, env[name]
    return names[0], ""


def _shown(value: str) -> str:
    """A proxy variable's value fit for an error: everything before its last ``@`` (user
    info: a password, a token used as a user name) as ``***``, even in a value that does not
    parse."""
    if "@" not in value:
        return value
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "", value
    return f"{scheme}{sep}***@{rest.rpartition('@')[2]}"


def _proxy(name: str, value: str) -> str:
    """A proxy URL as Go's parseProxy reads an environment value: a URL with a scheme Go
    proxies through, else ``http://`` and the value."""
    shown = f"{name}={_shown(value)!r}"  # the value as it was given
    parts = urlsplit(value)
    if parts.scheme not in _SCHEMES or not parts.netloc:
        if "://" in value:
            raise ProxyError(f"{shown}: a proxy's scheme must be http, https, socks5 or socks5h")
        value = f"http://{value}"
        parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 -- raises on a port that is not a number
    except ValueError:
        raise ProxyError(f"{shown}: the port is not a number") from None
    if not parts.hostname:
        raise ProxyError(f"{shown}: the proxy URL names no host")
    return value


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """A CIDR; IPv4 octets may have leading zeros (apimachinery's ParseCIDRSloppy)."""
    if "/" not in text:
        return None
    addr, _, bits = text.partition("/")
    if "." in addr and ":" not in addr:
        octets = addr.split(".")
        if len(octets) == 4 and all(o.isdigit() for o in octets):
            addr = ".".join(str(int(o)) for o in octets)
    try:
        return ipaddress.ip_network(f"{addr}/{bits}", strict=False)
    except ValueError:
        return None


def _split_port(entry: str) -> tuple[str, str]:
    """Go's net.SplitHostPort on a NO_PROXY entry: ``host:port`` or ``[v6]:port``, else the
    entry is all host."""
    if entry.startswith("["):
        host, sep, rest = entry[1:].partition("]")
        if sep and rest.startswith(":") and rest[1:].isdigit():
            return host, rest[1:]
        return entry, ""
    host, sep, port = entry.rpartition(":")
    if sep and ":" not in host and port.isdigit():
        return host, port
    return entry, ""


def _excluded(no_proxy: str, host: str, port: str) -> bool:
    """Whether a NO_PROXY list excludes the server ``host`` (lower case) on ``port``."""
    ip = _address(host)
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        network = _network(entry)
        if network is not None:
            if ip is not None and ip in network:
                return True
            continue
        phost, pport = _split_port(entry)
        phost = _idna(phost)
        if not phost:
            continue  # ":80" names no host: Go ignores it
        if pport and pport != port:
            continue
        pip = _address(phost)
        if pip is not None:
            if ip is not None and ip == pip:
                return True
            continue
        if phost.startswith("*."):
            phost = phost[1:]
        if phost.startswith("."):
            if host.endswith(phost):
                return True
        elif host == phost or host.endswith(f".{phost}"):
            return True
    return False


def environment_proxy(server: str, env: Mapping[str, str] | None = None) -> str | None:
    """The proxy URL Go's ``http.ProxyFromEnvironment`` (with apimachinery's CIDR rule) picks
    for requests to ``server`` (an http(s) URL), or None for a direct connection. Raises
    ``ProxyError`` for a variable that names no usable proxy."""
    env = os.environ if env is None else env
    try:
        url = urlsplit(server)
    except ValueError:  # not a URL ("http://[x"): the request fails on it, with its own error
        return None
    scheme = url.scheme.lower()
    if scheme == "https":
        name, value = _first(env, "HTTPS_PROXY", "https_proxy")
    elif scheme == "http":
        name, value = _first(env, "HTTP_PROXY", "http_proxy")
        if value and env.get("REQUEST_METHOD"):
            raise ProxyError(
                f"{name} is set in a CGI environment (REQUEST_METHOD): Go refuses to use it "
                "(golang.org/s/cgihttpproxy), and so does fleetwarden"
            )
    else:
        return None
    if not value:
        return None
    proxy = _proxy(name, value)
    host = (url.hostname or "").lower()
    try:
        port = str(url.port or _DEFAULT_PORTS[scheme])
    except ValueError:
        return proxy  # a bad port fails the request itself, with its own error
    ip = _address(host)
    if host == "localhost" or (ip is not None and ip.is_loopback):
        return None
    _, no_proxy = _first(env, "NO_PROXY", "no_proxy")
    return None if _excluded(no_proxy, _idna(host), port) else proxy


def _idna(host: str) -> str:
    """The ASCII form of an internationalised name, as Go compares them."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host
