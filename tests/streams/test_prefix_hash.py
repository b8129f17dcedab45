"""Prefix build/parse/strip and body_hash, including parity with hive-mind's JavaScript."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess

import pytest

from streams.model.body_hash import KeyStrategy, body_hash, dedup_key
from streams.model.jsstring import JS_WHITESPACE, js_trim
from streams.model.prefix import Provenance, build_prefix, parse_prefix, strip_hm_prefix


def test_build_prefix_token_order_and_default_scope() -> None:
    p = Provenance(source="codex", session="s1", parent="p9", event="stop", project="proj")
    assert build_prefix(p) == "[hm session:s1 parent:p9 src:codex event:stop project:proj] "
    assert build_prefix(Provenance(source="openclaw")) == "[hm src:openclaw] "


def test_build_prefix_rejects_unparseable_tokens() -> None:
    with pytest.raises(ValueError):
        build_prefix(Provenance(source="a]b"))
    with pytest.raises(ValueError):
        build_prefix(Provenance(source="a b"))


def test_a_value_ending_in_a_colon_is_a_token() -> None:
    """A session id like ``s:`` (or a cwd, a channel id ending in ``:``) is a value, not an empty token: the
    prefix is built, parses back and strips (it stopped `hivestream run` with an error before)."""
    p = Provenance(source="claude-code", session="s:", parent="a:b:", event="prompt", project="p:")
    assert build_prefix(p) == "[hm session:s: parent:a:b: src:claude-code event:prompt project:p:] "
    assert parse_prefix(build_prefix(p) + "BODY") == (p, "BODY")
    assert strip_hm_prefix(build_prefix(p) + "BODY") == "BODY"
    with pytest.raises(ValueError):
        build_prefix(Provenance(source=""))


def test_strip_round_trip() -> None:
    p = Provenance(source="claude-code", session="s2", event="stop")
    assert strip_hm_prefix(build_prefix(p) + "BODY") == "BODY"
    prov, body = parse_prefix(build_prefix(p) + "BODY")
    assert prov == p and body == "BODY"


def test_seed_5_strip_helper() -> None:
    """Seed test 5: removes a well-formed prefix, leaves others alone, no over-strip."""
    assert strip_hm_prefix("[hm session:s1 src:claude-code event:stop] BODY") == "BODY"
    assert strip_hm_prefix("no prefix here") == "no prefix here"
    body = "use arr[0] and [hm not a prefix] later"
    assert strip_hm_prefix("[hm src:x] " + body) == body
    assert strip_hm_prefix(body) == body
    assert strip_hm_prefix(" [hm src:x] lead space") == " [hm src:x] lead space"
    assert strip_hm_prefix("[hm src:x]\u3000\n body") == "body"


def test_js_trim_differs_from_python_strip() -> None:
    assert js_trim("\ufeffx\u2028") == "x"
    assert js_trim("\x1cx\x85") == "\x1cx\x85"  # Python's str.strip would remove both
    assert "\x1cx\x85".strip() == "x"


def test_body_hash_ignores_provenance_and_outer_whitespace() -> None:
    a = body_hash("[hm session:openclaw-gateway:c1 src:openclaw event:stop] BODY")
    b = body_hash("[hm session:s2 src:claude-code event:stop]   BODY \n")
    assert a == b == hashlib.sha256(b"BODY").hexdigest()
    assert body_hash("BODY") == a
    assert body_hash("[hm src:x] BODY2") != a


def test_lone_surrogate_hashes_as_replacement_char() -> None:
    assert body_hash("a\ud800b") == hashlib.sha256("a\ufffdb".encode()).hexdigest()
    assert body_hash("\ud83d\ude00") == hashlib.sha256("😀".encode()).hexdigest()


def test_key_strategies() -> None:
    h = body_hash("x")
    assert dedup_key(h, "stop", KeyStrategy.BODY) == h
    assert dedup_key(h, "stop", KeyStrategy.BODY_EVENT) == "stop:" + h
    assert dedup_key(h, "stop", KeyStrategy.BODY_EVENT) != dedup_key(h, "user-prompt-submit", KeyStrategy.BODY_EVENT)


PY_ONLY_WS = "\x1c\x1d\x1e\x1f\x85"
POOL = (
    list(JS_WHITESPACE) + list(PY_ONLY_WS)
    + ["\ufeff", "\u200b", "\u180e", "a", "Z", "0", "[", "]", "[hm ", "[hm src:x] ", "hm", " ", ":", "é", "中", "😀",
       "\u0301", "\x00", "\ud800", "\udc00", "\ud83d", "\ude00", "\U0010ffff", "\\", '"']
)

NODE_SCRIPT = r"""
const fs = require('fs');
const { createHash } = require('crypto');
function stripHmPrefix(content) { return content.replace(/^\[hm [^\]]*\]\s*/, ''); }
const strings = JSON.parse(fs.readFileSync(0, 'utf8'));
const out = strings.map(s => createHash('sha256').update(stripHmPrefix(s).trim()).digest('hex'));
process.stdout.write(JSON.stringify(out));
"""


def _generated(n: int, seed: int = 20261130) -> list[str]:
    rnd = random.Random(seed)
    out: list[str] = [c for c in POOL]  # every pool element alone
    out += ["[hm src:x]" + c + "body" + c for c in POOL]
    while len(out) < n:
        k = rnd.randint(0, 12)
        s = "".join(rnd.choice(POOL) for _ in range(k))
        if rnd.random() < 0.4:
            s = "[hm session:s" + str(rnd.randint(0, 9)) + " src:codex]" + s
        out.append(s)
    return out


@pytest.mark.node
@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_body_hash_parity_with_javascript(tmp_path: object) -> None:
    """body_hash equals sha256(stripHmPrefix(s).trim()) run by node on 10,000+ strings."""
    strings = _generated(10_000)
    assert len(strings) >= 10_000
    payload = json.dumps(strings, ensure_ascii=True)
    res = subprocess.run(["node", "-e", NODE_SCRIPT], input=payload.encode(), capture_output=True, check=True, timeout=120)
    js = json.loads(res.stdout)
    py = [body_hash(s) for s in strings]
    mismatches = [(s, a, b) for s, a, b in zip(strings, py, js, strict=True) if a != b]
    assert not mismatches[:5], f"{len(mismatches)} mismatches"
    assert len(set(js)) > 1000  # the generator really varies the input
