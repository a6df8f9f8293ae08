"""The audit chain (core.audit): building, canonical JSON, tamper detection, redaction.

Pure: records are built with a fixed ``now``; tampering is done on the values a store would
hand back (``dataclasses.replace``), so every way history can be rewritten is pinned here,
store or no store.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import string
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fleetwarden.core import audit
from fleetwarden.core.audit import (
    GENESIS_HASH,
    REDACTED,
    AuditDraft,
    AuditKind,
    AuditRecord,
    ChainVerifier,
    Problem,
)
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.findings import Finding, Layer, Severity

NOW = datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=UTC)


def drafts(n: int) -> list[AuditDraft]:
    return [
        AuditDraft(
            AuditKind.NOTE,
            f"note {i}",
            cluster="prod-eu-1",
            pool="general",
            actor="arn:aws:sts::123456789012:assumed-role/oncall/alice",
            payload={"i": i, "nested": {"list": [1, "two", None, 3.5]}},
            key=f"k{i}",
        )
        for i in range(n)
    ]


def chain(n: int = 10) -> list[AuditRecord]:
    return audit.build_records(drafts(n), prev_hash=GENESIS_HASH, next_seq=1, now=NOW)


def renumber(record: AuditRecord, seq: int) -> AuditRecord:
    return dataclasses.replace(record, seq=seq)


def rehash(record: AuditRecord, **changes: object) -> AuditRecord:
    """What an attacker who knows the scheme does: change, then recompute the record's hash."""
    changed = dataclasses.replace(record, **changes)
    return dataclasses.replace(
        changed, hash=audit.chain_hash(changed.prev_hash, audit.record_body(changed))
    )


# --------------------------------------------------------------------------- building


def test_records_are_numbered_from_one_and_each_hash_chains_to_the_previous():
    records = chain(5)
    assert [r.seq for r in records] == [1, 2, 3, 4, 5]
    assert records[0].prev_hash == GENESIS_HASH
    for before, after in itertools.pairwise(records):
        assert after.prev_hash == before.hash
    for r in records:
        assert r.hash == audit.chain_hash(r.prev_hash, audit.record_body(r))
        assert len(r.hash) == 64 and set(r.hash) <= set(string.hexdigits.lower())
    assert audit.verify_chain(records).ok


def test_a_second_batch_continues_the_chain_from_the_head():
    first = chain(3)
    more = audit.build_records(
        drafts(2), prev_hash=first[-1].hash, next_seq=4, now=NOW + timedelta(seconds=1)
    )
    assert [r.seq for r in more] == [4, 5] and more[0].prev_hash == first[-1].hash
    result = audit.verify_chain([*first, *more])
    assert result.ok and result.checked == 5 and result.last_hash == more[-1].hash


def test_ids_keyed_are_predictable_explicit_are_kept_and_duplicates_refused():
    keyed, explicit, plain = audit.build_records(
        [
            AuditDraft(AuditKind.EVENT, key="abc"),
            AuditDraft(AuditKind.DECISION, id="decision-1", refs=("event-x",)),
            AuditDraft(AuditKind.NOTE),
        ],
        prev_hash=GENESIS_HASH,
        next_seq=1,
        now=NOW,
    )
    assert keyed.id == audit.record_id(AuditKind.EVENT, "abc") and keyed.id.startswith("event-")
    assert explicit.id == "decision-1" and explicit.refs == ("event-x",)
    assert plain.id.startswith("note-") and plain.id not in (keyed.id, explicit.id)
    with pytest.raises(ValueError, match="the id"):
        audit.build_records(
            [AuditDraft(AuditKind.NOTE, id="x"), AuditDraft(AuditKind.NOTE, id="x")],
            prev_hash=GENESIS_HASH,
            next_seq=1,
            now=NOW,
        )


def test_drafts_of_events_and_findings_carry_the_actor_key_and_contract_json():
    event = ChangeEvent(
        id="e-1",
        source="aws.eks",
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        cluster="prod-eu-1",
        pool="general",
        actor="arn:aws:iam::123456789012:user/bob",
    )
    draft = audit.event_draft(event)
    assert draft.key == event.key and draft.actor == event.actor and draft.kind is AuditKind.EVENT
    assert draft.payload["event"]["id"] == "e-1"
    finding = Finding("prod-eu-1", "general", Layer.SPEC, "instanceType", "m5.large", "t3.medium",
                      Severity.CRITICAL)  # fmt: skip
    fdraft = audit.finding_draft(finding, refs=(audit.record_id(AuditKind.EVENT, event.key),))
    assert fdraft.refs == (audit.record_id(AuditKind.EVENT, event.key),)
    assert fdraft.payload["finding"]["id"] == finding.id
    records = audit.build_records([draft, fdraft], prev_hash=GENESIS_HASH, next_seq=1, now=NOW)
    assert records[1].refs == (records[0].id,)


def test_times_are_fixed_width_utc_text_that_sorts_in_time_order():
    paris = timezone(timedelta(hours=1))
    assert audit.format_time(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == (
        "2026-01-02T03:04:05.000000Z"
    )
    assert audit.format_time(datetime(2026, 1, 2, 4, 4, 5, 7, tzinfo=paris)) == (
        "2026-01-02T03:04:05.000007Z"
    )
    assert audit.format_time(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000000Z"
    assert audit.parse_time("2026-01-02T03:04:05.000007Z") == datetime(
        2026, 1, 2, 3, 4, 5, 7, tzinfo=UTC
    )


@given(st.lists(st.datetimes(timezones=st.just(UTC)), min_size=2, max_size=20))
def test_time_text_order_is_time_order(times):
    texts = [audit.format_time(t) for t in times]
    assert {len(t) for t in texts} == {27}
    assert sorted(texts) == [audit.format_time(t) for t in sorted(times)]


# --------------------------------------------------------------------------- canonical JSON

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), json_values, max_size=8), st.randoms())
def test_canonical_json_ignores_key_order_and_is_a_fixed_point(value, rnd):
    items = list(value.items())
    rnd.shuffle(items)
    text = audit.canonical_json(value)
    assert audit.canonical_json(dict(items)) == text
    assert audit.canonical_json(json.loads(text)) == text


def test_canonical_json_is_sorted_compact_and_utf8():
    assert audit.canonical_json({"b": 1, "a": [1, {"d": "é", "c": None}]}) == (
        '{"a":[1,{"c":null,"d":"é"}],"b":1}'
    )
    with pytest.raises(ValueError):
        audit.canonical_json({"x": float("nan")})


optional_text = st.none() | st.text()


@given(
    seq=st.integers(min_value=1, max_value=2**62),
    id=st.text(),
    kind=st.text(),
    at=st.text(),
    cluster=optional_text,
    pool=optional_text,
    actor=optional_text,
    summary=st.text(),
    refs=st.lists(st.text(), max_size=3),
    key=optional_text,
    payload_json=st.text(),
)
def test_the_hand_written_body_is_exactly_canonical_json(**fields):
    """canonical_body is spelled out for speed: its header must stay byte for byte the
    canonical JSON of the header fields, then a newline, then the payload text as it is."""
    header = {k: v for k, v in fields.items() if k != "payload_json"}
    expected = audit.canonical_json(header) + "\n" + fields["payload_json"]
    assert audit.canonical_body(**fields) == expected


# --------------------------------------------------------------------------- tampering


def swapped(records: list[AuditRecord], a: int, b: int) -> list[AuditRecord]:
    """Rows with seq a and b exchange their seq numbers (the store then reads them in seq order)."""
    out = list(records)
    out[a - 1], out[b - 1] = renumber(records[b - 1], a), renumber(records[a - 1], b)
    return out


def without(records: list[AuditRecord], seq: int, *, renumbered: bool = False) -> list[AuditRecord]:
    out = [r for r in records if r.seq != seq]
    if renumbered:
        out = [renumber(r, r.seq - 1) if r.seq > seq else r for r in out]
    return out


def edited(records: list[AuditRecord], seq: int, **changes: object) -> list[AuditRecord]:
    return [dataclasses.replace(r, **changes) if r.seq == seq else r for r in records]


def forged_after(records: list[AuditRecord], seq: int) -> list[AuditRecord]:
    """A record inserted after ``seq``, correctly chained to it; the rest renumbered."""
    prev = records[seq - 1]
    fake = audit.build_records(
        [AuditDraft(AuditKind.NOTE, "nothing happened")], prev_hash=prev.hash, next_seq=seq + 1,
        now=NOW,
    )[0]  # fmt: skip
    return [*records[:seq], fake, *(renumber(r, r.seq + 1) for r in records[seq:])]


R = chain(10)
TAMPERS = {
    "payload edited": (edited(R, 4, payload_json='{"i":999}'), Problem.EDITED, 4, R[3].id),
    "summary edited": (edited(R, 7, summary="nothing to see"), Problem.EDITED, 7, R[6].id),
    "actor edited": (edited(R, 1, actor="arn:aws:iam::1:user/mallory"), Problem.EDITED, 1, R[0].id),
    "time text re-written": (
        [
            dataclasses.replace(r, at_text="2026-11-29T10:00:00.123456+00:00") if r.seq == 5 else r
            for r in R
        ],
        Problem.EDITED,
        5,
        R[4].id,
    ),
    "edited and re-hashed": (
        [rehash(r, summary="x") if r.seq == 3 else r for r in R],
        Problem.EDITED,
        3,
        R[2].id,
    ),
    "deleted (gap)": (without(R, 6), Problem.DELETED, 6, None),
    "first deleted": (without(R, 1), Problem.DELETED, 1, None),
    "deleted, later renumbered": (without(R, 6, renumbered=True), Problem.DELETED, 6, None),
    "adjacent rows swapped": (swapped(R, 4, 5), Problem.REORDERED, 4, R[4].id),
    "distant rows swapped": (swapped(R, 2, 8), Problem.REORDERED, 2, R[7].id),
    "forged record inserted": (forged_after(R, 5), Problem.INSERTED, 6, None),
}


@pytest.mark.parametrize("case", list(TAMPERS), ids=list(TAMPERS))
def test_every_kind_of_tampering_is_detected_and_the_first_bad_record_named(case):
    records, problem, seq, record_id = TAMPERS[case]
    result = audit.verify_chain(records, anchors={10: R[-1].hash})
    assert not result.ok, case
    breach = result.breach
    assert (breach.problem, breach.seq) == (problem, seq), str(breach)
    if record_id is not None:
        assert breach.id == record_id, str(breach)
    assert f"seq {seq}" in result.summary()
    assert result.checked <= seq  # a re-hashed or forged record passes its own check


@pytest.mark.parametrize("case", list(TAMPERS), ids=list(TAMPERS))
def test_stored_rows_verify_exactly_like_records(case):
    """Stores feed rows (no records built on the fast path): same answer, same names."""
    records = TAMPERS[case][0]
    expected = audit.verify_chain(records, anchors={10: R[-1].hash})
    for size in (1, 4, 100):
        verifier = ChainVerifier(anchors={10: R[-1].hash})
        rows = [audit.record_row(r) for r in records]
        for i in range(0, len(rows), size):
            if not verifier.feed_rows(rows[i : i + size]):
                break
        assert verifier.finish() == expected


def test_rows_read_back_as_the_same_records():
    for r in R:
        back = audit.record_from_row(audit.record_row(r))
        assert back == r and back.at_text == r.at_text and back.payload == r.payload
    row = list(audit.record_row(R[0]))
    for index, junk in ((2, "bogus-kind"), (3, "last tuesday"), (8, '{"a":1}')):
        broken = (*row[:index], junk, *row[index + 1 :])
        with pytest.raises((ValueError, KeyError)):
            audit.record_from_row(broken)
        verifier = ChainVerifier()
        verifier.feed_rows([broken])
        result = verifier.finish()
        assert (result.breach.problem, result.breach.seq) == (Problem.EDITED, 1)
        assert "unreadable" in result.breach.detail


def test_the_forged_insert_names_the_forged_record():
    result = audit.verify_chain(forged_after(R, 5))
    assert result.breach.problem is Problem.INSERTED
    assert result.breach.id == forged_after(R, 5)[5].id


def test_records_cut_from_the_end_need_an_anchor_to_be_seen():
    """A hash chain alone cannot see its own end cut off; the store's head row (or a head
    noted earlier) is the anchor that does."""
    assert audit.verify_chain(R[:8]).ok
    result = audit.verify_chain(R[:8], anchors={10: R[-1].hash})
    assert result.breach.problem is Problem.DELETED and result.breach.seq == 9
    assert "seq 9..10" in result.breach.detail


def test_an_anchor_with_another_hash_means_the_chain_was_rewritten_from_there():
    result = audit.verify_chain(R, anchors={6: "f" * 64})
    assert result.breach.problem is Problem.EDITED and result.breach.seq == 6


def test_feeding_pages_gives_the_same_answer_as_one_pass():
    records, *_ = TAMPERS["distant rows swapped"]
    whole = audit.verify_chain(records)
    for size in (1, 2, 3, 7):
        verifier = ChainVerifier()
        for i in range(0, len(records), size):
            if not verifier.feed(records[i : i + size]):
                break
        assert verifier.finish() == whole


def test_an_unreadable_row_is_reported_as_edited_at_its_seq():
    verifier = ChainVerifier()
    verifier.feed(R[:3])
    verifier.reject(4, R[3].id, "time 'yesterday' is not RFC 3339")
    result = verifier.finish()
    assert (result.breach.problem, result.breach.seq, result.breach.id) == (
        Problem.EDITED,
        4,
        R[3].id,
    )
    assert "unreadable" in result.breach.detail


def test_an_empty_chain_is_intact():
    result = audit.verify_chain([])
    assert result.ok and result.checked == 0 and result.last_hash == GENESIS_HASH


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_single_field_edit_of_any_record_is_detected_at_that_record(data):
    n = data.draw(st.integers(min_value=1, max_value=8))
    records = chain(n)
    seq = data.draw(st.integers(min_value=1, max_value=n))
    field = data.draw(st.sampled_from(["summary", "cluster", "pool", "actor", "payload_json"]))
    value = data.draw(st.text(max_size=20))
    assume(getattr(records[seq - 1], field) != value)
    result = audit.verify_chain(edited(records, seq, **{field: value}))
    assert result.breach is not None and result.breach.seq == seq


# --------------------------------------------------------------------------- export lines


def test_exported_lines_read_back_and_verify():
    lines = [r.to_json_line() for r in R]
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    assert [json.loads(line) for line in lines] == [r.to_json() for r in R]
    back = [AuditRecord.from_json(json.loads(line)) for line in lines]
    assert [b.hash for b in back] == [r.hash for r in R]
    assert audit.verify_chain(back).ok
    back[2] = AuditRecord.from_json(json.loads(lines[2]) | {"payload": {"i": 1}})
    assert audit.verify_chain(back).breach.seq == 3


# --------------------------------------------------------------------------- redaction

JWT = (
    "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW06"
    "ZGVmYXVsdCJ9.c2lnbmF0dXJlLWJ5dGVz"
)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"

REDACTED_CASES = {
    "token key": ({"token": "abc"}, "abc"),
    "apiKey key, any spelling": ({"API-Key": "k-123", "api_key": "k-456"}, "k-"),
    "password key, nested": ({"spec": {"db": {"Password": "hunter2"}}}, "hunter2"),
    "authorization header object": ({"headers": {"Authorization": "Bearer xyz123"}}, "xyz123"),
    "secret under key holding a list": ({"clientSecrets": ["s1-zzz", "s2-zzz"]}, "-zzz"),
    "docker auth": ({"auths": {"r.io": {"auth": "dXNlcjpwYXNz"}}}, "dXNlcjpwYXNz"),
    "bearer in text": ({"log": "sent Authorization: Bearer abc.DEF-123_456"}, "abc.DEF-123_456"),
    "basic in text": ({"note": "curl -H 'Basic dXNlcjpwYXNzd29yZA=='"}, "dXNlcjpwYXNzd29yZA"),
    "jwt in text": ({"msg": f"token={JWT[:20]} and {JWT}"}, JWT),
    "aws access key id": ({"msg": "key AKIAIOSFODNN7EXAMPLE leaked"}, "AKIAIOSFODNN7EXAMPLE"),
    "aws secret key": ({"msg": f"aws_secret {AWS_SECRET}"}, AWS_SECRET),
    "github token": ({"msg": "ghp_" + "a1B2" * 9}, "a1B2a1B2"),
    "pem private key": ({"key-material": PEM}, "MIIEowIBAAKCAQEA"),
    "url password": ({"dsn": "postgresql://fw:hunter2@db:5432/x"}, "hunter2"),
    "password= pair": ({"cmd": "login --user bob password=hunter2 now"}, "hunter2"),
    "sas signature": ({"url": "https://a.blob.core.windows.net/c?sv=1&sig=abc%2Bdef"}, "abc%2Bdef"),
}


@pytest.mark.parametrize("case", list(REDACTED_CASES), ids=list(REDACTED_CASES))
def test_known_secrets_are_masked(case):
    payload, secret = REDACTED_CASES[case]
    out = audit.canonical_json(audit.redact(payload))
    assert secret not in out and REDACTED in out
    assert audit.redacted_json(payload) == out


KEPT = {
    "git commit": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "arn": "arn:aws:sts::123456789012:assumed-role/platform-oncall/alice",
    "node": "ip-10-0-1-23.eu-west-1.compute.internal",
    "prose": "basic checks passed; token expired",
    "image": "registry.k8s.io/pause@sha256:"
    "7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097",
    "event id": "c0ffee00-000000000001",
}


def test_ordinary_values_and_flags_survive():
    payload = {
        **KEPT,
        "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        "endpointPrivateAccess": True,
        "sessionToken": None,
        "count": 3,
    }
    out = audit.redact(payload)
    assert out == payload
    assert audit.redacted_json(payload) == audit.canonical_json(payload)


class Colour(Enum):
    RED = "red"


def test_redact_makes_payloads_json_safe():
    out = audit.redact(
        {
            "t": datetime(2026, 1, 1, tzinfo=UTC),
            "s": {3, 1},
            "e": Colour.RED,
            1: (1, 2),
            "f": float("inf"),
            "nul": "a\x00b",
        }
    )
    assert out == {"t": "2026-01-01T00:00:00.000000Z", "s": [1, 3], "e": "red", "1": [1, 2],
                   "f": "inf", "nul": "a\ufffdb"}  # fmt: skip
    with pytest.raises(TypeError, match="no JSON form"):
        audit.redact({"x": object()})


def test_records_are_redacted_before_they_are_hashed():
    [record] = audit.build_records(
        [AuditDraft(AuditKind.ACTION, f"ran with Bearer {JWT}", actor="ci password=hunter2",
                    payload={"token": "abc", "msg": AWS_SECRET})],
        prev_hash=GENESIS_HASH, next_seq=1, now=NOW,
    )  # fmt: skip
    text = audit.record_body(record)
    for secret in (JWT, "hunter2", '"abc"', AWS_SECRET):
        assert secret not in text
    assert audit.verify_chain([record]).ok


# Secret-looking values, and where they may hide.
b64url = st.text(string.ascii_letters + string.digits + "-_", min_size=8, max_size=40)
jwts = st.builds(lambda h, p, s: f"eyJ{h}.{p}.{s}", b64url, b64url, b64url)
bearers = st.text(string.ascii_letters + string.digits + "-._~+/", min_size=8, max_size=60)
aws_secrets = st.permutations(
    list("Aa0") + list("Zz9+/" * 2) + list(string.ascii_letters[:27])
).map(lambda chars: "".join(chars)[:40])
aws_key_ids = st.builds(
    lambda p, rest: p + rest, st.sampled_from(["AKIA", "ASIA"]),
    st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16),
)  # fmt: skip
basics = (
    st.binary(min_size=6, max_size=30)
    .map(lambda b: base64.b64encode(b"u:" + b).decode())
    .filter(lambda s: any(c.isupper() or c.isdigit() or c in "+/=" for c in s))
)
secret_keys = st.sampled_from(
    ["token", "password", "clientSecret", "api_key", "Authorization", "privateKey",
     "credentials", "x-api-key", "SESSION_TOKEN", "db.passwd", "hmacKey", "auth"]
)  # fmt: skip
innocent = st.text(string.ascii_letters + " .,:-", max_size=20)


@st.composite
def payloads_with_secrets(draw):
    secrets: list[str] = []
    payload: dict = {}
    for i in range(draw(st.integers(min_value=1, max_value=5))):
        how = draw(st.sampled_from(["key", "jwt", "bearer", "aws", "akia", "basic", "url"]))
        before, after = draw(innocent), draw(innocent)
        if how == "key":
            value = draw(st.text(min_size=1, max_size=30))
            payload.setdefault("nested", {})[draw(secret_keys)] = value
            payload["nested"][f"other{i}"] = draw(innocent)
            secret = None  # checked below: the value under the key is masked
        elif how == "jwt":
            secret = draw(jwts)
            payload[f"msg{i}"] = f"{before} {secret} {after}"
        elif how == "bearer":
            secret = draw(bearers)
            payload[f"hdr{i}"] = f"{before} Bearer {secret} {after}"
        elif how == "aws":
            secret = draw(aws_secrets)
            payload[f"env{i}"] = [f"{before} {secret} {after}"]
        elif how == "akia":
            secret = draw(aws_key_ids)
            payload[f"id{i}"] = f"{before} {secret} {after}"
        elif how == "basic":
            secret = draw(basics)
            payload[f"curl{i}"] = f"{before} Basic {secret} {after}"
        else:
            secret = draw(st.text(string.ascii_letters + string.digits, min_size=6, max_size=20))
            payload[f"dsn{i}"] = f"{before} https://user:{secret}@host/db {after}"
        if secret is not None:
            secrets.append(secret)
    text = audit.canonical_json(payload)
    assume(all(text.count(secret) == 1 for secret in secrets))  # not also in innocent text
    return payload, secrets


@settings(max_examples=400, deadline=None)
@given(payloads_with_secrets())
def test_no_generated_secret_survives_redaction(case):
    payload, secrets = case
    out = audit.redacted_json(payload)
    assert out == audit.canonical_json(audit.redact(payload))
    for secret in secrets:
        assert secret not in out, (secret, out)
    masked = json.loads(out).get("nested", {})
    for key in payload.get("nested", {}):
        if not key.startswith("other"):
            assert masked[key] == REDACTED


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=12) | st.sampled_from(["auth", "Token", "pin", "api-key", "x"]),
        json_values | st.sampled_from(["Bearer abcdefgh", AWS_SECRET, "digest abc", "x://y:z@w"]),
        max_size=6,
    )
)
def test_the_fast_path_gives_exactly_what_the_full_walk_gives(payload):
    """redacted_json skips the walk for payloads with no hint of a secret: it must never
    differ from canonical_json(redact(payload))."""
    assert audit.redacted_json(payload) == audit.canonical_json(audit.redact(payload))


@given(st.text())
def test_scrubbing_never_raises_and_is_idempotent(text):
    once = audit.scrub_text(text)
    assert audit.scrub_text(once) == once


@pytest.mark.parametrize("case", list(TAMPERS), ids=list(TAMPERS))
def test_the_breach_names_what_happened_once(case):
    """`audit verify` said "edited: its contents do not match its hash (edited)": the kind of
    breach is said once, and the detail says what was found."""
    records = TAMPERS[case][0]
    breach = audit.verify_chain(records, anchors={10: R[-1].hash}).breach
    assert breach is not None
    text = str(breach).lower()
    assert text.count(breach.problem.value) == 1, text


def test_a_scheme_word_before_a_credential_does_not_hide_it():
    """Hypothesis found "TOKEN Bearer 00000000": the ``token`` scheme took "Bearer" as its
    (too short) credential and the scan went on after it, past the real one."""
    out = audit.redacted_json({"hdr": "TOKEN Bearer 00000000 ", "b": "token Basic QWxhZGRp=="})
    assert "00000000" not in out and "QWxhZGRp" not in out, out
