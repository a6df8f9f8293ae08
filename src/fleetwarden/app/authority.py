"""Who may heal what, and the check right before a remediation goes out: the healer's
*authority*, one per replica.

- ``HealAuthority`` (no leader election, no sharding): this replica decides every finding and
  every global duty; nothing is fenced.
- ``LeaderAuthority`` (leader election only): the leader decides every finding and the global
  duties while its term holds; each remediation is fenced by the term's token (``Fence``: one
  fresh read of the leader Lease).
- ``ShardAuthority`` (sharding, with or without leader election — Argo CD's
  application-controller model, each shard acts on its clusters): a replica decides the
  finding events of the clusters its ``Membership`` owns, while the membership is healthy and
  once the grace after a takeover has passed (``core.sharding.heal_problem``). Right before a
  remediation goes out it is fenced per cluster: the cluster must still be decided here and the
  replica's own membership Lease, read again, must still name it
  (``core.sharding.member_fence_problem``). The global duties (approvals, request expiry
  sweeps) stay with the leader when leader election is on; without it every replica may do
  them, made safe by the shared PostgreSQL guard state (approvals claimed once under a row
  lock, ``approve:<id>`` unique: the others answer 409; cancellations keyed ``cancel:<id>``).
  ``run`` tells the service when clusters become decided here (after the grace), so it can
  hand their current findings to the healer — as a new leader is handed every finding.

A refused remediation is not sent; the healer records it as a ``skipped`` outcome naming why.
Not done here: deciding, recording or sending anything (``app/healing``), holding the Leases
(``app/electing``, ``app/sharding``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from fleetwarden.app.electing import Elector, Fence, FenceRefused
from fleetwarden.app.sharding import Membership
from fleetwarden.core.policy import Decision
from fleetwarden.core.sharding import heal_problem, member_fence_problem
from fleetwarden.logs import get_logger
from fleetwarden.ports.kube import KubeError

__all__ = ["HealAuthority", "LeaderAuthority", "ShardAuthority", "authority_for"]

log = get_logger("fleetwarden.authority")


class HealAuthority:
    """No leader election, no sharding: this replica always decides, nothing is fenced."""

    @property
    def leading(self) -> bool:
        """Whether the global duties run here: approvals and request expiry sweeps."""
        return True

    @property
    def active(self) -> bool:
        """Whether any finding may be decided here now (else the healer drops its queue)."""
        return True

    def decides(self, cluster: str) -> bool:
        """Whether a finding event of ``cluster`` is decided here now."""
        return True

    def token(self, *, approval: bool = False) -> int | None:
        """The leadership term recorded with (and fencing) what is decided now."""
        return None

    async def refusals(
        self, decisions: Sequence[Decision], token: int | None, *, approval: bool = False
    ) -> dict[str, str]:
        """Executable ``decisions`` that must not go out now: decision id -> why."""
        return {}

    async def wait(self, timeout: float) -> None:
        """Until this replica may be active again, or ``timeout`` seconds."""
        await asyncio.sleep(timeout)


class LeaderAuthority(HealAuthority):
    """Leader election only: the leader decides everything, fenced by its term's token."""

    def __init__(self, elector: Elector, fence: Fence | None = None) -> None:
        self.elector, self.fence = elector, fence or Fence(elector)

    @property
    def leading(self) -> bool:
        return self.elector.leading

    @property
    def active(self) -> bool:
        return self.elector.leading

    def decides(self, cluster: str) -> bool:
        return self.elector.leading

    def token(self, *, approval: bool = False) -> int | None:
        return self.elector.fencing_token

    async def refusals(
        self, decisions: Sequence[Decision], token: int | None, *, approval: bool = False
    ) -> dict[str, str]:
        return await _leader_refusals(self.fence, decisions, token)

    async def wait(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.elector.leading_event.wait()


class ShardAuthority(HealAuthority):
    """Sharding: each replica decides the clusters its membership owns (see the module
    docstring); ``elector`` (optional) keeps the global duties with the leader."""

    def __init__(
        self,
        membership: Membership,
        *,
        elector: Elector | None = None,
        fence: Fence | None = None,
        timeout: float | None = None,
    ) -> None:
        self.membership, self.elector = membership, elector
        self.fence = fence or (Fence(elector) if elector is not None else None)
        self.timeout = membership.timing.retry_period if timeout is None else timeout
        self._decided: frozenset[str] = frozenset()  # what ``run`` last announced

    @property
    def leading(self) -> bool:
        return self.elector is None or self.elector.leading

    def _problem(self, cluster: str) -> str | None:
        m = self.membership
        return heal_problem(
            cluster,
            owned_since=m.owned_since,
            renewed_at=m.renewed_at,
            now=m.clock.monotonic(),
            timing=m.timing,
        )

    @property
    def active(self) -> bool:
        m = self.membership
        return (
            m.renewed_at is not None
            and m.clock.monotonic() < m.renewed_at + m.timing.renew_deadline
        )

    def decides(self, cluster: str) -> bool:
        return self._problem(cluster) is None

    def decided(self) -> frozenset[str]:
        """The clusters whose findings are decided here now."""
        return frozenset(c for c in self.membership.owned if self.decides(c))

    def token(self, *, approval: bool = False) -> int | None:
        # an approval is the leader's (fenced by its term); a shard's heal has no term
        return self.elector.fencing_token if approval and self.elector is not None else None

    async def refusals(
        self, decisions: Sequence[Decision], token: int | None, *, approval: bool = False
    ) -> dict[str, str]:
        if approval:  # a global duty: the leader's term fences it (without election, the
            # shared store's claim made this replica the only one to run it)
            if self.fence is None:
                return {}
            return await _leader_refusals(self.fence, decisions, token)
        m = self.membership
        try:
            async with asyncio.timeout(self.timeout):
                got = await m.store.read()
        except (KubeError, TimeoutError) as exc:
            problem: str | None = f"cannot read the membership lease to check: {exc}"
        else:
            problem = member_fence_problem(None if got is None else got[0], identity=m.identity)
        out: dict[str, str] = {}
        for d in decisions:  # after the read, which took time: ownership may have moved
            why = problem or (self._problem(d.cluster) if d.cluster else "no cluster")
            if why is not None:
                out[d.id] = f"fenced off: {why}"
        if out:
            log.warning("remediation fenced off", refused=len(out), reason=next(iter(out.values())))
        return out

    async def wait(self, timeout: float) -> None:
        await asyncio.sleep(min(timeout, self.membership.timing.retry_period))

    async def run(self, on_decided: Callable[[frozenset[str]], None]) -> None:
        """Until cancelled: call ``on_decided(clusters)`` with the clusters that became decided
        here since the last call (a takeover's grace ended, health came back)."""
        while True:
            now_decided = self.decided()
            gained = now_decided - self._decided
            self._decided = now_decided
            if gained:
                log.info("clusters now healed here", clusters=sorted(gained))
                on_decided(gained)
            await asyncio.sleep(self.membership.timing.retry_period / 2)


async def _leader_refusals(
    fence: Fence, decisions: Sequence[Decision], token: int | None
) -> dict[str, str]:
    try:
        await fence.check(token)
    except FenceRefused as exc:
        log.warning("remediation fenced off", term=token, reason=exc.reason)
        return {d.id: f"fencing token {token} refused ({exc.reason})" for d in decisions}
    return {}


def authority_for(
    *,
    elector: Elector | None = None,
    fence: Fence | None = None,
    membership: Membership | None = None,
) -> HealAuthority:
    """The authority for a replica with this leader election and this sharding (each None
    when off)."""
    if membership is not None:
        return ShardAuthority(membership, elector=elector, fence=fence)
    if elector is not None:
        return LeaderAuthority(elector, fence)
    return HealAuthority()
