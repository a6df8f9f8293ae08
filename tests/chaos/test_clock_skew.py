"""Clock skew on signed webhooks: a sender whose clock is 10 minutes ahead or behind gets a 401
that says so (by how much, which way, what is allowed, what to check) and nothing is stored; a
sender 4 minutes off is inside the 5-minute window and accepted; once the sender's clock is
right, the same deliveries are accepted and each is processed once (real ``serve`` process,
SQLite queue, event log)."""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import httpx

from fleetwarden.core.signatures import sign
from tests.support.chaos_serve import ServeProcess, eks_event, wait_for

SECRET = "chaos-hmac-secret"
SKEW = 600  # seconds: the ±10 minutes of the seed's drill
REASON = re.compile(
    r"signature timestamp t=T is (?:599|600|601) s (ahead of|behind) this server's clock "
    r"\(allowed: ±300 s\): check the sender's clock \(NTP\), or this is a replay"
)


def _post(client: httpx.Client, svc: ServeProcess, event_id: str, skew: float) -> httpx.Response:
    body = json.dumps(eks_event(event_id)).encode()
    stamp = int(time.time() + skew)
    return client.post(
        f"{svc.base}/events/aws",
        content=body,
        headers={
            "content-type": "application/json",
            "x-fleetwarden-signature": sign(SECRET, body, stamp),
        },
    )


def test_signed_webhooks_ten_minutes_off_get_a_clear_401_and_are_accepted_once_corrected(
    tmp_path, figures
):
    svc = ServeProcess(
        tmp_path,
        {
            "auth": {"aws": {"hmacSecret": SECRET}},
            "queuePath": str(tmp_path / "queue.db"),
            "store": f"sqlite:///{tmp_path / 'audit.db'}",
            "eventLog": str(tmp_path / "events.jsonl"),
        },
    )
    svc.start()
    try:
        refused: list[str] = []
        reasons: Counter[str] = Counter()
        accepted: list[str] = []
        with httpx.Client(timeout=5) as client:
            for i in range(40):  # half ahead, half behind
                skew = SKEW if i % 2 else -SKEW
                r = _post(client, svc, f"skewed-{i}", skew)
                assert r.status_code == 401, r.text
                refused.append(f"skewed-{i}")
                reasons[re.sub(r"t=\d+ ", "t=T ", r.json()["error"])] += 1
            assert svc.depth() == 0  # nothing stored
            for i in range(20):  # 4 minutes off: inside the window
                r = _post(client, svc, f"close-{i}", 240 if i % 2 else -240)
                assert r.status_code == 202, r.text
                accepted.append(f"close-{i}")
            # the sender's clock is put right: the refused deliveries, sent again, go through
            corrected = time.monotonic()
            first_ok: float | None = None
            for event_id in refused:
                r = _post(client, svc, event_id, 0)
                assert r.status_code == 202, r.text
                first_ok = first_ok or time.monotonic()
                accepted.append(event_id)
        wait_for(lambda: svc.depth() == 0 and set(accepted) <= set(svc.journal_ids()), "drained")
        processed = Counter(svc.journal_ids())
        rejected = svc.metric("fleetwarden_events_rejected_total")
        lost = [i for i in accepted if i not in processed]
        twice = [i for i, n in processed.items() if n > 1]
        assert first_ok is not None
        figures(
            faults=f"{len(refused)} deliveries signed {SKEW // 60} min ahead or behind",
            acknowledged=len(accepted),
            lost=len(lost),
            twice=len(twice),
            recover_s=first_ok - corrected,
            notes=f"{int(rejected)} refused with 401, each naming the skew; 20 deliveries "
            "4 min off accepted",
        )
        assert rejected == len(refused)
        # the skew is measured by the server a moment after the sender signed: 599-601 s
        said = Counter(m.group(1) if (m := REASON.fullmatch(r)) else r for r in reasons.elements())
        assert said == {"ahead of": 20, "behind": 20}, reasons
        assert not lost and not twice
        assert set(processed) == set(accepted)
    finally:
        svc.stop()
