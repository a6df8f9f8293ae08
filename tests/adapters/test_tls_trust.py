"""How ``adapters.trust`` reads the CAs a Go program on Linux trusts (``crypto/x509``'s
``root_linux.go`` locations, ``root_unix.go``'s ``loadSystemRoots``), over temporary files: the
first system CA file that can be read and every CA directory, ``SSL_CERT_FILE`` and
``SSL_CERT_DIR`` in their place, certifi's CAs only where the system has none; a variable or a
configured CA file that gives no certificate is an error, never a silent fallback; a client
context trusts a configured CA file besides the system's."""

from __future__ import annotations

import base64
import os
import ssl
from pathlib import Path

import certifi
import pytest

from fleetwarden.adapters import trust
from tests.adapters.test_kube_kubeconfig import make_certs


@pytest.fixture
def tls_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No CA variable: the system's locations only (which never hold a test CA)."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# --- Go's reading of the locations ------------------------------------------------------------


def _ca(tmp: Path, name: str) -> bytes:
    (tmp / name).mkdir()
    return make_certs(tmp / name, f"{name}.example")[0]


def _der(pem: bytes) -> bytes:
    return trust.pem_certificates(pem)[0]


def test_the_first_system_ca_file_that_can_be_read_is_the_only_one_loaded(tmp_path):
    a, b = _ca(tmp_path, "a"), _ca(tmp_path, "b")
    (tmp_path / "a.pem").write_bytes(a)
    (tmp_path / "b.pem").write_bytes(b)
    files = [str(tmp_path / "missing.pem"), str(tmp_path / "a.pem"), str(tmp_path / "b.pem")]
    roots = trust.system_roots({}, files=files, directories=[])
    assert roots.certificates == (_der(a),)
    assert roots.sources == (str(tmp_path / "a.pem"),) and not roots.fallback


def test_ssl_cert_file_replaces_the_system_files_and_ssl_cert_dir_the_directories(tmp_path):
    a, b, c, d = (_ca(tmp_path, n) for n in "abcd")
    (tmp_path / "a.pem").write_bytes(a)
    (tmp_path / "b.pem").write_bytes(b)
    for name, pem in (("sysdir", c), ("envdir", d)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.crt").write_bytes(pem)
    files, dirs = [str(tmp_path / "a.pem")], [str(tmp_path / "sysdir")]
    assert set(trust.system_roots({}, files=files, directories=dirs).certificates) == {
        _der(a),
        _der(c),
    }
    env = {"SSL_CERT_FILE": str(tmp_path / "b.pem")}
    assert set(trust.system_roots(env, files=files, directories=dirs).certificates) == {
        _der(b),
        _der(c),  # Go still reads the system directories
    }
    env = {"SSL_CERT_DIR": f"{tmp_path / 'nothing-here'}:{tmp_path / 'envdir'}"}
    roots = trust.system_roots(env, files=files, directories=dirs)
    assert set(roots.certificates) == {_der(a), _der(d)}
    assert roots.sources == (str(tmp_path / "a.pem"), str(tmp_path / "envdir"))


def test_every_file_of_a_ca_directory_is_read_but_links_within_it(tmp_path):
    """Every file, whatever its name; a link to a file elsewhere is read; OpenSSL's
    ``<hash>.0`` links to a name in the same directory are passed over (Go's
    readUniqueDirectoryEntries); text and other PEM blocks around the certificates are
    skipped, a block with headers too."""
    a, b, c = _ca(tmp_path, "a"), _ca(tmp_path, "b"), _ca(tmp_path, "c")
    d = tmp_path / "certs"
    d.mkdir()
    (d / "A.pem").write_bytes(b"# comment\n" + a.replace(b"\n", b"\r\n") + b"trailing text\n")
    (tmp_path / "elsewhere.crt").write_bytes(b)
    os.symlink(tmp_path / "elsewhere.crt", d / "B-link.pem")
    os.symlink("A.pem", d / "1a2b3c4d.0")
    (d / "sub").mkdir()
    headers = c.replace(b"-----\n", b"-----\nProc-Type: 4,ENCRYPTED\n\n", 1)
    (d / "C-with-headers.pem").write_bytes(
        headers + b"-----BEGIN X509 CRL-----\nAA==\n-----END X509 CRL-----\n"
    )
    assert trust._directory_files(str(d)) == sorted(
        [str(d / "A.pem"), str(d / "B-link.pem"), str(d / "C-with-headers.pem"), str(d / "sub")]
    )
    roots = trust.system_roots({}, files=[], directories=[str(d)])
    assert set(roots.certificates) == {_der(a), _der(b)}


def test_certifis_cas_only_where_the_system_has_none(tmp_path):
    roots = trust.system_roots({}, files=[str(tmp_path / "no.pem")], directories=[str(tmp_path)])
    assert roots.fallback and roots.sources == (certifi.where(),)
    assert len(roots.certificates) > 50
    assert roots.describe() == "certifi's CAs (no system CA bundle)"


@pytest.mark.parametrize(
    ("env", "complaint"),
    [
        (
            {"SSL_CERT_FILE": "{tmp}/missing.pem"},
            "SSL_CERT_FILE='{tmp}/missing.pem' cannot be read",
        ),
        ({"SSL_CERT_FILE": "{tmp}/empty.pem"}, "SSL_CERT_FILE='{tmp}/empty.pem' holds no PEM"),
        ({"SSL_CERT_DIR": "{tmp}/nothing:{tmp}"}, "SSL_CERT_DIR='{tmp}/nothing:{tmp}': no PEM"),
    ],
)
def test_a_ca_variable_that_gives_nothing_is_an_error_not_certifi(tmp_path, env, complaint):
    """Go passes over a missing SSL_CERT_FILE (and trusts whatever else it finds, or nothing);
    here whoever set it is told, rather than certifi's CAs being trusted instead."""
    (tmp_path / "empty.pem").write_text("")
    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    with pytest.raises(trust.TrustError) as info:
        trust.system_roots(env, files=[], directories=[])
    assert str(info.value).startswith(complaint.format(tmp=tmp_path))
    assert info.value.setting == next(iter(env))


def test_a_system_ca_file_that_cannot_be_read_is_an_error_when_nothing_else_gives_a_ca(tmp_path):
    (tmp_path / "bundle.crt").mkdir()  # read fails (EISDIR), not a missing file
    with pytest.raises(trust.TrustError, match=r"bundle.crt cannot be read: Is a directory"):
        trust.system_roots({}, files=[str(tmp_path / "bundle.crt")], directories=[])


# --- a configured CA file --------------------------------------------------------------------


def test_a_ca_file_is_trusted_besides_the_systems_cas(tmp_path, tls_env):
    """caFile adds to the system's CAs (a sink to a public receiver behind a re-signing proxy
    and one to an internal receiver both work with one setting)."""
    ca, _, _ = make_certs(tmp_path, "localhost")
    (tmp_path / "ca.pem").write_bytes(ca)
    system = trust.system_roots()
    made = trust.client_trust(ca_file=str(tmp_path / "ca.pem"))
    subjects = [
        dict(x[0] for x in c["subject"]).get("commonName") for c in made.context.get_ca_certs()
    ]
    assert "fw-test-ca" in subjects
    assert len(subjects) >= min(len(system.certificates), 2)
    assert made.context.verify_mode == ssl.CERT_REQUIRED and made.context.check_hostname
    assert made.trusted.endswith(f"and caFile {tmp_path / 'ca.pem'}")


def _bad_cert_pem() -> bytes:
    body = base64.encodebytes(b"\x30\x03\x02\x01\x00" + b"not a certificate" * 4).decode()
    return f"-----BEGIN CERTIFICATE-----\n{body}-----END CERTIFICATE-----\n".encode()


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        (None, "cannot be read: No such file or directory"),
        (b"", "holds no PEM certificate"),
        (b"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n", "holds no PEM"),
        (_bad_cert_pem(), ": certificate 1 of 1 does not parse"),
    ],
    ids=["missing", "empty", "a-key", "not-a-certificate"],
)
def test_a_ca_file_giving_no_certificate_is_an_error_naming_it(tmp_path, content, complaint):
    """Never a silent fallback to the system's CAs alone."""
    path = tmp_path / "corp-ca.pem"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(trust.TrustError) as info:
        trust.read_ca_file(str(path))
    separator = "" if complaint.startswith(":") else " "
    assert str(info.value).startswith(f"{str(path)!r}{separator}{complaint}")
    assert info.value.setting == "caFile"
