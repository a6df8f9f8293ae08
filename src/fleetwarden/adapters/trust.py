"""The certificate authorities an HTTPS client of fleetwarden trusts: those a Go program on
Linux trusts, so that a receiver kubectl, curl or the ``argocd`` CLI reach on this host is
reached here too (a corporate proxy that re-signs TLS, a webhook receiver signed by a company
CA whose root the host's store holds).

Go's rules (``crypto/x509``: ``root_linux.go`` for the locations, ``root_unix.go``'s
``loadSystemRoots`` for how they are read), followed here:

* the CA file: ``SSL_CERT_FILE`` if set (not empty), else the first of ``CA_FILES``
  (``/etc/ssl/certs/ca-certificates.crt`` Debian/Ubuntu, ``/etc/pki/tls/certs/ca-bundle.crt``
  Fedora/RHEL 6, ``/etc/ssl/ca-bundle.pem`` openSUSE, ``/etc/pki/tls/cacert.pem`` OpenELEC,
  ``/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem`` CentOS/RHEL 7+, ``/etc/ssl/cert.pem``
  Alpine) that can be read: only that one is loaded;
* and the CA directories: ``SSL_CERT_DIR`` if set (a ``:``-separated list), else
  ``CA_DIRECTORIES`` (``/etc/ssl/certs``, ``/etc/pki/tls/certs``; Go's Android directories are
  left out): every file in each one is read, except a symbolic link to a name in the same
  directory (OpenSSL's ``<hash>.0`` links), and a directory that does not exist is passed over;
* from each file, every PEM block of type ``CERTIFICATE`` without headers that decodes (Go's
  ``CertPool.AppendCertsFromPEM``); other blocks, text between them and certificates that do
  not parse are skipped. Every certificate loaded is a trust anchor, self-signed or not (Go's
  pool; OpenSSL's ``X509_V_FLAG_PARTIAL_CHAIN``). The name checked is the URL's host.

Where fleetwarden differs: Go fails every verification when none of these holds a certificate
(unless the program embeds ``golang.org/x/crypto/x509roots/fallback``); here certifi's bundle is
trusted then, as that fallback would be -- but only when the environment names no location
itself. A ``SSL_CERT_FILE`` that cannot be read or holds no certificate, a ``SSL_CERT_DIR`` whose
directories hold none (and no system CA file), and a system CA file that exists but cannot be
read when nothing else can be, are a ``TrustError`` naming the variable or the file: Go passes
over a missing ``SSL_CERT_FILE`` silently and trusts whatever else it finds, which is not what
whoever set it meant.

A ``ca_file`` (a sink's ``caFile``) adds its certificates to these; it must be readable and hold
at least one certificate, every ``CERTIFICATE`` block in it must parse, or it is a
``TrustError``. Python's OpenSSL defaults (its compiled-in paths, ``SSL_CERT_FILE`` read by
OpenSSL itself) are never loaded: what is trusted is only what is described here.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CA_DIRECTORIES",
    "CA_FILES",
    "Roots",
    "Trust",
    "TrustError",
    "client_trust",
    "pem_certificates",
    "read_ca_file",
    "system_roots",
    "verification_failure",
]

# Go's root_linux.go certFiles, in its order: the first that can be read is the only one loaded
CA_FILES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian/Ubuntu/Gentoo etc.
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora/RHEL 6
    "/etc/ssl/ca-bundle.pem",  # OpenSUSE
    "/etc/pki/tls/cacert.pem",  # OpenELEC
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  # CentOS/RHEL 7
    "/etc/ssl/cert.pem",  # Alpine Linux
)
# Go's root_linux.go certDirectories (its Android ones left out): every one is read
CA_DIRECTORIES = (
    "/etc/ssl/certs",  # SLES10/SLES11, https://golang.org/issue/12139
    "/etc/pki/tls/certs",  # Fedora/RHEL
)

# Go's pem.Decode: "-----BEGIN TYPE-----", the body, "-----END TYPE-----" of the same type
_PEM = re.compile(rb"-----BEGIN ([^\r\n-]*)-----(.*?)-----END \1-----", re.DOTALL)


class TrustError(ValueError):
    """A CA file or directory named by the environment or the configuration that gives no
    usable certificate. ``setting`` is what named it: ``caFile``, ``SSL_CERT_FILE``,
    ``SSL_CERT_DIR`` or None (a system location)."""

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


@dataclass(frozen=True, slots=True)
class Roots:
    """The trust anchors read, DER-encoded and without duplicates, and where they came from
    (the file and the directories that gave at least one). ``fallback``: none of the system's
    locations held a certificate, and these are certifi's."""

    certificates: tuple[bytes, ...]
    sources: tuple[str, ...]
    fallback: bool = False

    def describe(self) -> str:
        if self.fallback:
            return "certifi's CAs (no system CA bundle)"
        return "the CAs in " + (", ".join(self.sources) or "nothing")


@dataclass(frozen=True, slots=True)
class Trust:
    """A client's TLS context and, for error messages, what it trusts."""

    context: ssl.SSLContext
    trusted: str


def pem_certificates(data: bytes) -> list[bytes]:
    """The DER bytes of every PEM ``CERTIFICATE`` block without headers whose body is base64,
    in order (Go's ``AppendCertsFromPEM``, before each is parsed)."""
    out = []
    for match in _PEM.finditer(data):
        kind, body = match.group(1), match.group(2)
        if kind != b"CERTIFICATE" or b":" in body:  # RFC 1421 headers: Go skips such blocks
            continue
        try:
            out.append(base64.b64decode(b"".join(body.split()), validate=True))
        except binascii.Error:
            continue
    return out


def _unique(certificates: Iterable[bytes]) -> tuple[bytes, ...]:
    return tuple(dict.fromkeys(certificates))


def _directory_files(directory: str) -> list[str]:
    """The files Go reads in a CA directory: every entry but a symbolic link whose target
    has no ``/`` (a link to a name in the same directory). Raises OSError as listing it does."""
    names = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_symlink():
                try:
                    if "/" not in os.readlink(entry.path):
                        continue
                except OSError:
                    continue
            names.append(entry.path)
    return sorted(names)


def system_roots(
    env: Mapping[str, str] | None = None,
    *,
    files: Iterable[str] = CA_FILES,
    directories: Iterable[str] = CA_DIRECTORIES,
) -> Roots:
    """The CAs a Go program on Linux trusts (the module docstring), else certifi's. Raises
    ``TrustError`` for a location the environment names that gives nothing, and for a system
    CA file that cannot be read when no other location gives a certificate."""
    env = os.environ if env is None else env
    cert_file, cert_dir = env.get("SSL_CERT_FILE", ""), env.get("SSL_CERT_DIR", "")
    found: list[bytes] = []
    sources: list[str] = []
    unreadable: tuple[str, OSError] | None = None
    for path in [cert_file] if cert_file else files:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            if cert_file:
                raise TrustError(
                    f"SSL_CERT_FILE={cert_file!r} cannot be read: {exc.strerror}",
                    setting="SSL_CERT_FILE",
                ) from None
            if not isinstance(exc, FileNotFoundError | NotADirectoryError) and not unreadable:
                unreadable = (path, exc)
            continue
        certificates = pem_certificates(data)
        if cert_file and not certificates:
            raise TrustError(
                f"SSL_CERT_FILE={cert_file!r} holds no PEM certificate", setting="SSL_CERT_FILE"
            )
        found += certificates
        sources.append(path)
        break  # Go loads the first file it can read, and no other
    for directory in cert_dir.split(":") if cert_dir else directories:
        try:
            paths = _directory_files(directory)
        except OSError as exc:
            if not isinstance(exc, FileNotFoundError | NotADirectoryError) and not unreadable:
                unreadable = (directory, exc)
            continue
        before = len(found)
        for path in paths:
            try:
                found += pem_certificates(Path(path).read_bytes())
            except OSError:
                continue  # Go skips a file it cannot read (a subdirectory, say)
        if len(found) > before:
            sources.append(directory)
    if found:
        return Roots(_unique(found), tuple(sources))
    if cert_dir:
        raise TrustError(
            f"SSL_CERT_DIR={cert_dir!r}: no PEM certificate in its directories, nor in a "
            "system CA file",
            setting="SSL_CERT_DIR",
        )
    if unreadable is not None:
        location, error = unreadable
        raise TrustError(f"the system CA location {location} cannot be read: {error.strerror}")
    import certifi  # only where no system bundle exists (a distroless or scratch image)

    bundle = certifi.where()
    return Roots(_unique(pem_certificates(Path(bundle).read_bytes())), (bundle,), fallback=True)


def read_ca_file(path: str) -> tuple[bytes, ...]:
    """The certificates of a configured CA file (``~`` expanded), DER-encoded. Raises
    ``TrustError`` (setting ``caFile``) for a file that cannot be read, holds no PEM
    certificate, or holds one that does not parse."""
    file = Path(path).expanduser()
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise TrustError(
            f"{str(file)!r} cannot be read: {exc.strerror}", setting="caFile"
        ) from None
    certificates = pem_certificates(data)
    if not certificates:
        raise TrustError(
            f"{str(file)!r} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            setting="caFile",
        )
    scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for n, der in enumerate(certificates, 1):
        try:
            scratch.load_verify_locations(cadata=der)
        except ssl.SSLError:
            raise TrustError(
                f"{str(file)!r}: certificate {n} of {len(certificates)} does not parse",
                setting="caFile",
            ) from None
    return _unique(certificates)


def client_trust(*, ca_file: str | None = None, env: Mapping[str, str] | None = None) -> Trust:
    """A client TLS context (certificate and host name checked) trusting ``system_roots`` and
    the certificates of ``ca_file``. Raises ``TrustError``. With the process environment
    (``env`` None) the context is made once per ``ca_file`` and value of ``SSL_CERT_FILE`` and
    ``SSL_CERT_DIR`` and then shared, as Go reads the system roots once a process: reading
    them takes ~0.1 s (a few hundred files), and serve makes a client per sink."""
    if env is None:
        variables = (os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))
        return _process_trust(ca_file, *variables)
    return _trust(ca_file, env)


@functools.lru_cache(maxsize=32)
def _process_trust(ca_file: str | None, cert_file: str, cert_dir: str) -> Trust:
    return _trust(ca_file, {"SSL_CERT_FILE": cert_file, "SSL_CERT_DIR": cert_dir})


def _trust(ca_file: str | None, env: Mapping[str, str]) -> Trust:
    roots = system_roots(env)
    extra = read_ca_file(ca_file) if ca_file else ()
    # not ssl.create_default_context(): without a CA given it loads OpenSSL's default paths
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # any anchor, as Go's pool
    for der in _unique((*roots.certificates, *extra)):
        try:
            context.load_verify_locations(cadata=der)
        except ssl.SSLError:
            continue  # Go skips a system certificate that does not parse
    trusted = roots.describe()
    if ca_file:
        trusted += f" and caFile {ca_file}"
    return Trust(context, trusted)


def verification_failure(exc: BaseException) -> str | None:
    """OpenSSL's reason when ``exc`` (an httpx error) was caused by the server's certificate
    failing verification (``unable to get local issuer certificate``, a host name mismatch),
    else None. The reason names no URL."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return str(current.verify_message or current.reason or "certificate verify failed")
        current = current.__cause__ or current.__context__
    return None
