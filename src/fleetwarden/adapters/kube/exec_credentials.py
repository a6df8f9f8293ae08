"""Running a client-go exec credential plugin, and caching what it returns.

``ExecCredentialSource`` does for one cluster what client-go's exec ``Authenticator`` does:

* the plugin runs with its ``args``, the process environment plus its ``env``, and
  ``KUBERNETES_EXEC_INFO`` (``spec.interactive``; ``spec.cluster`` when ``provideClusterInfo``);
  as an asyncio subprocess, so the event loop never waits on it; within ``timeout`` seconds
  (then it and its process group are killed).
* Standard input is passed only when the run is interactive: ``interactiveMode: Never`` never,
  ``IfAvailable`` when the caller allows it (a terminal, not ``serve``), ``Always`` requires it
  or fails with a clear error. Interactive runs also show the plugin's stderr (its prompts);
  other runs capture it for the error message.
* The credential is cached until its ``expirationTimestamp`` (refreshed a little before: a
  fifth of its life, at most 30 s early) or until the API server refuses it (``refresh`` after
  a 401 runs the plugin again unless another request already did). One lock: concurrent
  requests share one plugin run.
* A bare command is looked up on PATH; one with a path separator was made absolute against
  the kubeconfig's directory when it was loaded (``config.load_kubeconfig``). Argo CD's
  ``awsAuthConfig`` names a ``fallback`` command, run when the first is not on PATH.

Every failure is one ``CredentialError`` naming where the plugin was configured and its
command, with the install hint (when the command is missing) or the plugin's stderr
(truncated, with anything token-like redacted). Tokens never reach a message or a log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Mapping
from datetime import datetime, timedelta

from fleetwarden.core.audit.redaction import REDACTED as AUDIT_REDACTED
from fleetwarden.core.audit.redaction import scrub_text
from fleetwarden.core.clusters import ClusterEndpoint, InteractiveMode, PluginCredential
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.exec_credentials import exec_info, parse_exec_credential
from fleetwarden.ports.kube import CredentialError
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["DEFAULT_TIMEOUT", "ExecCredentialSource", "redact"]

DEFAULT_TIMEOUT = 60.0  # seconds for one non-interactive run (an STS round trip, a token mint)
INTERACTIVE_TIMEOUT = 300.0  # a browser or device-code login takes a person's time
EARLY_REFRESH = timedelta(seconds=30)
STDERR_SHOWN = 400  # characters of the plugin's stderr quoted in an error

# long runs of token alphabets (JWT segments, base64, hex, EKS's k8s-aws-v1.*): redacted from
# a plugin's stderr before it is quoted; '/' and '.' break runs so paths and hosts survive
_TOKENISH = re.compile(r"[A-Za-z0-9_\-+=~]{32,}")


# no square brackets: the CLI prints errors through rich, which would take "[...]" for markup
REDACTED = "<redacted>"


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without the given secrets and without anything that looks like a token: long
    token-alphabet runs, and what the audit store's free-text scrub masks (a credential after
    ``Bearer``/``Basic``/``token``, ``password=``-style pairs, JWTs of any length, AWS keys,
    private keys) -- a short token after ``Authorization: Bearer`` is still a token."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = scrub_text(text).replace(AUDIT_REDACTED, REDACTED)
    return _TOKENISH.sub(REDACTED, text)


class ExecCredentialSource:
    """One cluster's exec plugin and its cached credential. Use from one event loop."""

    def __init__(
        self,
        endpoint: ClusterEndpoint,
        *,
        interactive: bool = False,
        not_interactive_because: str = "standard input is not a terminal",
        timeout: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """``interactive``: the caller may hand the plugin its terminal (kubectl: stdin is a
        terminal). ``not_interactive_because`` is said when an ``Always`` plugin cannot run."""
        plugin = endpoint.credentials.exec
        if plugin is None:
            raise ValueError(f"{endpoint.name}: no exec plugin configured")
        self.endpoint, self.plugin, self.cluster = endpoint, plugin, endpoint.name
        mode = plugin.interactive_mode
        self.interactive = interactive and mode is not InteractiveMode.NEVER
        self._no_terminal = (
            not_interactive_because if mode is InteractiveMode.ALWAYS and not interactive else None
        )
        self.timeout = timeout or (INTERACTIVE_TIMEOUT if self.interactive else DEFAULT_TIMEOUT)
        self.clock, self.environ = clock, environ
        self.runs = 0  # plugin runs so far (tests and metrics)
        self._lock = asyncio.Lock()
        self._current: PluginCredential | None = None
        self._refresh_at: datetime | None = None
        self._generation = 0  # plugin runs finished, successful or not
        self._last_error: CredentialError | None = None
        self._secrets: tuple[str, ...] = ()

    @property
    def current(self) -> PluginCredential | None:
        return self._current

    async def get(self) -> PluginCredential:
        """The cached credential while it is fresh; otherwise the plugin's next one."""
        cached = self._current
        if cached is not None and not self._stale():
            return cached
        return await self._run_once(unless_replaced=cached)

    async def refresh(self, stale: PluginCredential) -> PluginCredential:
        """After the API server refused ``stale`` (401): the plugin's next credential, unless
        another request has already replaced ``stale``."""
        return await self._run_once(unless_replaced=stale)

    def expire(self, stale: PluginCredential) -> None:
        """Drop ``stale`` (say, a watch was closed with 401): the next ``get`` runs the plugin."""
        if self._current is stale:
            self._refresh_at = self.clock.now()

    # --- one run at a time, its outcome shared -------------------------------------------

    def _stale(self) -> bool:
        return self._refresh_at is not None and self.clock.now() >= self._refresh_at

    async def _run_once(self, *, unless_replaced: PluginCredential | None) -> PluginCredential:
        seen = self._generation
        async with self._lock:
            if self._generation != seen:
                # a run ended while this request waited: its outcome is this request's too
                if self._last_error is not None:
                    raise CredentialError(self.cluster, self._last_error.reason)
                if self._current is not None:
                    return self._current
            elif self._current is not None and self._current is not unless_replaced:
                return self._current
            try:
                credential = await self._run()
            except CredentialError as exc:
                self._last_error = exc
                raise
            finally:
                self._generation += 1
            self._last_error = None
            return credential

    # --- the run ---------------------------------------------------------------------------

    def _fail(self, what: str) -> CredentialError:
        plugin = self.plugin
        return CredentialError(
            self.cluster,
            f"{plugin.origin or self.cluster}: exec credential plugin {plugin.command!r} {what}",
        )

    def _argv(self) -> list[str]:
        plugin = self.plugin
        candidates = [(plugin.command, plugin.args)]
        if plugin.fallback is not None:
            candidates.append(plugin.fallback)
        search = (os.environ if self.environ is None else self.environ).get("PATH")
        for command, args in candidates:
            found = command if os.sep in command else shutil.which(command, path=search)
            if found and os.path.exists(found):
                return [found, *args]
        hint = f"; {plugin.install_hint}" if plugin.install_hint else ""
        if plugin.fallback is not None:
            names = " nor ".join(repr(c) for c, _ in candidates)
            raise self._fail(f"is not installed: neither {names} is on PATH{hint}")
        where = "does not exist" if os.sep in plugin.command else "was not found on PATH"
        raise self._fail(f"{where}{hint}")

    async def _run(self) -> PluginCredential:
        if self._no_terminal is not None:
            raise self._fail(
                f"needs a terminal (interactiveMode: Always): {self._no_terminal}; set "
                "interactiveMode: Never or IfAvailable, or give the context a token"
            )
        plugin, interactive = self.plugin, self.interactive
        argv = self._argv()
        env = dict(os.environ if self.environ is None else self.environ)
        env.update(plugin.env)
        env["KUBERNETES_EXEC_INFO"] = exec_info(plugin, self.endpoint, interactive=interactive)
        self.runs += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=None if interactive else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=None if interactive else subprocess.PIPE,
                env=env,
                # its own process group, so a timeout also kills what it started (a shell
                # script's `aws`); an interactive one keeps the terminal's
                start_new_session=not interactive,
            )
        except OSError as exc:
            raise self._fail(f"could not be started: {exc.strerror or exc}") from None
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            raise self._fail(f"did not finish within {self.timeout:g} s") from None
        finally:
            if proc.returncode is None:  # timed out or cancelled: no orphan left behind
                self._kill(proc, group=not interactive)
                await proc.wait()
        if proc.returncode != 0:
            raise self._fail(f"failed with exit code {proc.returncode}{self._stderr(err)}")
        try:
            credential = parse_exec_credential(out, api_version=plugin.api_version, where="stdout")
        except FormatError as exc:
            field = f"{exc.field}: " if exc.field else ""
            raise self._fail(f"printed no usable ExecCredential: {field}{exc.reason}") from None
        self._current = credential
        self._refresh_at = self._refresh_time(credential)
        if credential.token:
            self._secrets = (*self._secrets[-3:], credential.token)
        return credential

    def _refresh_time(self, credential: PluginCredential) -> datetime | None:
        if credential.expires_at is None:
            return None  # used until the API server says 401
        life = max(credential.expires_at - self.clock.now(), timedelta(0))
        return credential.expires_at - min(EARLY_REFRESH, life / 5)

    @staticmethod
    def _kill(proc: asyncio.subprocess.Process, *, group: bool) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()

    def _stderr(self, err: bytes | None) -> str:
        lines = (err or b"").decode("utf-8", "replace").splitlines()
        text = " | ".join(" ".join(line.split()) for line in lines if line.strip())
        if not text:
            return ""
        env_values = tuple(v for _, v in self.plugin.env if len(v) >= 8)
        text = redact(text, self._secrets + env_values)
        if len(text) > STDERR_SHOWN:
            text = text[:STDERR_SHOWN] + "..."
        return f": {text}"
