"""Review has its own authority: an ``experience-reviewed`` event is taken only from a token with the
``review`` scope (a tokens-file line ``... scopes=review``) or, on a loopback server without tokens,
from the bearer of serve's per-start review token; a gateway's token, or none, gets 403 with one
line and nothing of the request is written. Tokens files without scopes keep their meaning."""

from __future__ import annotations

import json

import pytest

from hivestream.ingest.server import IngestConfig
from streams.ingest.auth import Scope, TokenTable, parse_tokens
from tests.support.memory_sink import MemorySink, request, requests

GW = "a-gateway-token-0123456789"
REVIEWER = "a-reviewer-token-0123456789"
BOTH = "an-admin-token-0123456789ab"
LOCAL_REVIEW = "serve-review-token-0123456789abcdef"
REVIEW = json.dumps({"type": "experience-reviewed", "event_id": "rev-quarantined-1", "experience_id": "e" * 32, "decision": "approved",
                     "reviewer": "mallory", "event_time_ms": 1_790_000_000_000}).encode()
HOOK = json.dumps({"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": "/w", "prompt": "hello there",
                   "event_time_ms": 1_790_000_000_000}).encode()
SUBMIT = json.dumps({"type": "experience-submitted", "event_id": "sub-1", "task": "t", "result": "r", "event_time_ms": 1_790_000_000_000}).encode()


def _bearer(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


def _tokens() -> TokenTable:
    return TokenTable(parse_tokens(f"gw-a {GW}\nlee {REVIEWER} scopes=review  # a reviewer\nops {BOTH} scopes=hooks,review\n"))


def test_a_line_without_scopes_is_a_gateway_and_scopes_are_parsed_strictly() -> None:
    entries = {e.gateway_id: e.scopes for e in parse_tokens(f"gw-a {GW}\nlee {REVIEWER} scopes=review\nops {BOTH} scopes=review,hooks\n")}
    assert entries == {"gw-a": {Scope.HOOKS}, "lee": {Scope.REVIEW}, "ops": {Scope.HOOKS, Scope.REVIEW}}
    for bad in (f"gw {GW} scopes=", f"gw {GW} scopes=admin", f"gw {GW} scopes=review,", f"gw {GW} review", f"gw {GW} scopes=review extra"):
        with pytest.raises(ValueError, match="line 1") as e:
            parse_tokens(bad)
        assert GW not in str(e.value)


@pytest.mark.parametrize("path", ["/v1/hooks/knowhub", "/v1/hooks/auto"])
def test_a_gateway_token_cannot_post_a_review_and_nothing_is_written(path: str) -> None:
    cfg = IngestConfig(tokens=_tokens())
    sink = MemorySink()
    status, got = request(cfg, sink, "POST", path, REVIEW, _bearer(GW))
    assert status == 403 and got["error"] == "forbidden" and "scopes=review" in got["detail"] and "gw-a" in got["detail"]
    assert "\n" not in got["detail"] and GW not in json.dumps(got)
    # a body mixing a hook event and a review: refused whole, not even the hook event is written
    status, _got = request(cfg, sink, "POST", "/v1/hooks/auto", b"[" + HOOK + b"," + REVIEW + b"]", _bearer(GW))
    assert status == 403 and sink.records == []


def test_a_review_scoped_token_posts_reviews_and_only_reviews() -> None:
    cfg = IngestConfig(tokens=_tokens())
    sink = MemorySink()
    out = requests(cfg, sink, [("POST", "/v1/hooks/knowhub", REVIEW, _bearer(REVIEWER)),
                               ("POST", "/v1/hooks/claude-code", HOOK, _bearer(REVIEWER)),  # a reviewer's token is no gateway's
                               ("POST", "/v1/hooks/knowhub", SUBMIT, _bearer(GW)),  # a submission is a gateway's to post
                               ("POST", "/v1/hooks/auto", b"[" + HOOK + b"," + REVIEW + b"]", _bearer(BOTH))])
    assert [s for s, _ in out] == [200, 403, 200, 200]
    assert out[0][1]["gateway"] == "lee" and "hooks" in out[1][1]["detail"]
    assert len(sink.records) == 4  # the review, the submission, and the hook event and review of the last body


def test_on_loopback_without_tokens_only_the_review_token_may_review() -> None:
    sink = MemorySink()
    open_cfg = IngestConfig(review_token=LOCAL_REVIEW)
    out = requests(open_cfg, sink, [("POST", "/v1/hooks/knowhub", REVIEW, {}),
                                    ("POST", "/v1/hooks/knowhub", REVIEW, _bearer(GW)),
                                    ("POST", "/v1/hooks/knowhub", SUBMIT, {}),
                                    ("POST", "/v1/hooks/claude-code", HOOK, {}),
                                    ("POST", "/v1/hooks/knowhub", REVIEW, _bearer(LOCAL_REVIEW))])
    assert [s for s, _ in out] == [403, 403, 200, 200, 200]
    assert "kb approve" in out[0][1]["detail"] and LOCAL_REVIEW not in json.dumps(out)
    assert len(sink.records) == 3
    # ingest on loopback without tokens has no review token: reviews go by --kafka or a tokens file
    status, got = request(IngestConfig(), MemorySink(), "POST", "/v1/hooks/knowhub", REVIEW, _bearer(LOCAL_REVIEW))
    assert status == 403 and "--tokens-file" in got["detail"] and "--kafka" in got["detail"]
    # with a tokens file the review token means nothing: the file's scopes decide
    status, _got = request(IngestConfig(tokens=_tokens(), review_token=LOCAL_REVIEW), MemorySink(), "POST", "/v1/hooks/knowhub", REVIEW,
                           _bearer(LOCAL_REVIEW))
    assert status == 401
