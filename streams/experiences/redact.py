"""Privacy redaction of KnowHub experience text before it is written to any topic or table.

In ``strict`` mode (the default) home-directory user names, e-mail addresses, phone numbers and
secrets (API keys, tokens, credentials, private key blocks) are replaced by typed placeholders
``[REDACTED:<kind>]``; ``relaxed`` mode keeps the content. The number of replacements per kind
is reported, and redaction is idempotent: ``redact(redact(s).text)`` returns the same text with
no replacements.

Source: the seed's ``redactSensitiveInfo`` (knowhub-openclaw-integration.zh.md, 数据脱敏), which
replaced ``/Users/<name>``, e-mail addresses, ``ddd-ddd-dddd`` phone numbers and
``sk-[a-zA-Z0-9]{32,}`` keys with untyped markers; this module widens each rule and adds the
providers' documented token formats (see :class:`PiiKind`).

Rules run in a fixed order, most specific first: private key blocks, then provider tokens,
then generic credentials (``Bearer``, ``Authorization``, URL user info, ``NAME_TOKEN=value``,
then a credential named in prose), then home paths, e-mail addresses, card numbers and, last,
phone numbers — so that the digits inside a key
are never read as a phone number. A placeholder is never matched by any rule, and a pass is
repeated until it replaces nothing, which makes the result a fixed point (a replacement can
change a neighbour's context, e.g. ``alice@example.com/home/bob``).

Deliberately not detected (precision over recall, or out of scope): personal names, postal
addresses, IP addresses, IBANs / social-security numbers, card numbers outside the 2–6 IIN
ranges or failing the Luhn check, a number that is a card's by chance (a 13–19-digit id starting
with 2–6 that passes Luhn, one in ten of them, is replaced); ``~user`` paths and shell
prompts (``alice@laptop:~$``, no TLD); phone numbers without separators (``4155550134``) or
without a trunk ``0`` outside North America (``612 34 56 78``) or with an ``00`` international
prefix; percent-encoded or obfuscated e-mail addresses; credentials without a known prefix or a
credential-like name (``curl -u user:pw``; ``--password hunter2`` is kept only because the value
is short), named values that do not read as random (``password is hunter``, ``the secret is
v2-2024-final``), digit-free or letter-free assigned values, assigned values longer than 4096 characters, and ``Bearer`` tokens without a
digit. Known over-redaction: any ``/Users/<x>`` or ``/home/<x>`` path root (also in docs),
``123 456 7890``-shaped number runs, ``01 02 03 04 05``-shaped runs, example credentials in docs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from streams.experiences.redact_checks import (
    accept_card,
    accept_email,
    accept_international,
    accept_named_secret,
    accept_national,
    accept_secret,
)

__all__ = [
    "PLACEHOLDER_RE",
    "PiiKind",
    "Redacted",
    "RedactionMode",
    "placeholder",
    "redact",
    "redact_fields",
]


class RedactionMode(StrEnum):
    """How much of an experience's text is kept (the seed's ``privacyMode``).

    ``strict`` (default): sensitive substrings are replaced by typed placeholders.
    ``relaxed``: the text is kept verbatim.
    """

    STRICT = "strict"
    RELAXED = "relaxed"


class PiiKind(StrEnum):
    """The kinds of sensitive substring; the value is the placeholder's type tag.

    Formats (as documented by each provider):

    * ``email``: ``local@domain.tld`` (TLD of 2+ letters); ``git@host`` SSH remotes are kept.
    * ``phone``: ``+<country> ...`` (8–15 digits), North-American ``(415) 555-0134`` /
      ``415-555-0134`` / ``415.555.0134`` / ``415 555 0134``, and European national numbers with
      a ``0`` trunk prefix and separators (``020 7946 0958``, ``030 123456 78``, ``06 12 34 56 78``;
      9–13 digits). Not: dates, times, versions, IPs, UUIDs, ZIP+4 codes, unseparated digit runs.
    * ``home_user``: the user-name segment of ``/Users/<u>``, ``/home/<u>``, ``C:\\Users\\<u>``
      (a Windows name may contain spaces), ``C:/Users/<u>``, ``\\\\Users\\\\<u>`` and ``\\/Users\\/<u>``
      (JSON-escaped) and ``C:\\Documents and Settings\\<u>``, at the root of an absolute path;
      ``Shared``, ``Public``, ``Default``, ``All Users``, ``Guest`` and ``linuxbrew`` are kept.
    * ``openai_key``: ``sk-...`` (OpenAI ``sk-``, ``sk-proj-``, ``sk-svcacct-``, ``sk-admin-`` and
      other ``sk-`` style keys): the seed's ``sk-`` + 32+ alphanumerics, or 20+ key characters
      including a digit.
    * ``anthropic_key``: ``sk-ant-api03-...`` / ``sk-ant-admin01-...``.
    * ``aws_key``: access key ids ``AKIA``/``ASIA``/``ABIA``/``ACCA`` + 16 upper-case alphanumerics,
      and the 40-character value of ``aws_secret_access_key``.
    * ``github_token``: ``ghp_``/``gho_``/``ghs_``/``ghu_``/``ghr_`` + 36+ alphanumerics,
      ``github_pat_`` fine-grained tokens.
    * ``gitlab_token``: ``glpat-`` personal access tokens.
    * ``slack_token``: ``xoxb-``/``xoxp-``/``xoxa-``/``xoxo-``/``xoxs-``/``xoxr-``/``xoxe-`` tokens,
      ``xapp-`` app tokens and the secret path of ``hooks.slack.com`` webhook URLs.
    * ``google_key``: API keys ``AIza`` + 35 characters, OAuth access tokens ``ya29.``, OAuth
      client secrets ``GOCSPX-``.
    * ``stripe_key``: secret and restricted keys ``sk_live_``/``sk_test_``/``rk_live_``/``rk_test_``.
    * ``huggingface_token``: ``hf_`` + 30+ alphanumerics.
    * ``npm_token``: ``npm_`` + 36 alphanumerics.
    * ``jwt``: ``eyJ<header>.eyJ<payload>.<signature>``.
    * ``bearer_token``: the credential after ``Bearer`` (e.g. ``Authorization: Bearer <token>``).
    * ``auth_header``: the credential of ``Authorization: Basic|Token|Bot <credential>``.
    * ``url_credentials``: the ``user:password`` part of ``scheme://user:password@host``.
    * ``secret``: the value of an assignment (``NAME=v``, ``NAME: v``, ``"NAME": "v"``, also
      JSON-escaped and in query strings) whose name ends in ``SECRET``, ``SECRET_KEY``,
      ``PASSWORD``, ``PASSWD``, ``TOKEN``, ``API_KEY``, ``ACCESS_KEY``, ``PRIVATE_KEY``,
      ``SIGNING_KEY`` or ``AUTH_KEY`` (any case), when the value has 8–4096 characters mixing
      letters and digits and is not a variable reference (``$X``, ``${X}``, ``<X>``), a path, or
      (unquoted after `` = ``) a dotted / underscored code identifier.
    * ``named_secret``: a credential introduced by its name in prose or in an assignment the
      ``secret`` rule does not read: ``secret``, ``password``, ``passwd``, ``passphrase``, ``api
      key``, ``access key``, ``token``, ``access / auth / refresh token``, ``client secret``,
      ``secret access key`` … followed by nothing, ``is``, ``was``, ``to``, ``set to``, ``:`` or
      ``=`` (``the password for staging is X``, ``AWS secret X``, ``"api key": "X"``), when the
      value reads as a credential (:func:`~streams.experiences.redact_checks.credential_like`:
      8–256 characters with letters and digits and either a 6+-character piece mixing them or
      upper case, lower case and digits; not a version, date, path or ``snake_case`` / dotted
      identifier). So "rotate the secret monthly" and "token limit 4096" are kept.
    * ``card_number``: a payment card number: 13–19 digits, unseparated or in groups of 3–6
      separated by one kind of separator (space or dash), starting with 2–6 (the networks' IIN
      ranges: Mastercard 2/5, Amex/Diners/JCB 3, Visa 4, Discover/UnionPay/Maestro 6), passing the
      Luhn check and not part of a longer number, identifier or decimal. ISO 7812; so a ticket id
      or a millisecond timestamp (they start with 1, or fail Luhn) is kept.
    * ``private_key``: a ``-----BEGIN ... PRIVATE KEY-----`` block through its ``-----END ...``
      line (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP ``... PRIVATE KEY BLOCK``).
    """

    EMAIL = "email"
    PHONE = "phone"
    HOME_USER = "home_user"
    OPENAI_KEY = "openai_key"
    ANTHROPIC_KEY = "anthropic_key"
    AWS_KEY = "aws_key"
    GITHUB_TOKEN = "github_token"
    GITLAB_TOKEN = "gitlab_token"
    SLACK_TOKEN = "slack_token"
    GOOGLE_KEY = "google_key"
    STRIPE_KEY = "stripe_key"
    HUGGINGFACE_TOKEN = "huggingface_token"
    NPM_TOKEN = "npm_token"
    JWT = "jwt"
    BEARER_TOKEN = "bearer_token"
    AUTH_HEADER = "auth_header"
    URL_CREDENTIALS = "url_credentials"
    SECRET = "secret"
    NAMED_SECRET = "named_secret"
    CARD_NUMBER = "card_number"
    PRIVATE_KEY = "private_key"


def placeholder(kind: PiiKind) -> str:
    """The placeholder that replaces a substring of ``kind``: ``"[REDACTED:<kind value>]"``.

    Stable across versions and never matched by any redaction rule. Raises nothing.
    """
    return f"[REDACTED:{kind.value}]"


PLACEHOLDER_RE: Final = re.compile(r"\[REDACTED:([a-z_]+)\]")
"""Matches any placeholder produced by :func:`placeholder`; group 1 is the kind value."""


@dataclass(frozen=True)
class Redacted:
    """The result of :func:`redact`.

    ``text``: the redacted text (the input itself in relaxed mode).
    ``counts``: kind value (:class:`PiiKind`) → number of replacements, only kinds with a
    count > 0 (empty when nothing was replaced or in relaxed mode).
    """

    text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Total number of replacements over all kinds (0 in relaxed mode)."""
        return sum(self.counts.values())


# --- rules ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    """One regex rule: the whole match, or only its ``secret`` group when the pattern has one,
    is replaced by the kind's placeholder, provided ``accept`` (if any) returns true."""

    kind: PiiKind
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool] | None = None


# A provider token is a whole identifier-like run, not part of a longer one. No rule's character
# class admits "[" at the start of a token, which keeps placeholders out of every rule.
_TOKEN_END: Final = r"(?![A-Za-z0-9_\-])"
_TOKEN_START: Final = r"(?<![A-Za-z0-9_\-])"

_PEM_BEGIN: Final = r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END: Final = r"-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
# A block runs to the first END line before any other BEGIN line. A truncated block (no END
# line) covers the BEGIN line and the base64 / header lines that follow it, with real or
# JSON-escaped line breaks.
_PEM_TAIL: Final = r"(?:(?:\s|\\[rn])+(?:[A-Za-z0-9+/]{20,}={0,2}|[A-Za-z0-9+/]{2,19}={1,2}|(?:Proc-Type|DEK-Info|Comment):[^\r\n\\]*))*"

# A home-directory user name: one path segment (no separators, quotes, brackets or spaces).
_USER: Final = r"[^\\/\s\"'`<>|:;,()\[\]{}*?]+"
# Windows names may contain single spaces when the segment is followed by a separator.
_WIN_USER: Final = rf"(?:{_USER}(?: {_USER})*(?=\\|/)|{_USER})"
# /Users and /home only at the root of an absolute path (not in boost/spirit/home/x3): at the
# start or after a non-path character, or under /var (Fedora Silverblue), /System/Volumes/Data
# (macOS), /mnt/<drive> (WSL), file://, or a compiler flag (-I/Users/..., -L/home/...).
_PATH_ROOT: Final = r"(?:(?<![\w.\-/\\])|(?<=/var)|(?<=/Data)|(?<=/mnt/[a-z])|(?<=file://)|(?<=-[A-Za-z]))"
# Well-known non-personal profile directories.
_NOT_A_USER: Final = r"(?!(?i:shared|public|default(?: user)?|all users|guest|linuxbrew)(?![A-Za-z0-9._-]))"

_SECRET_NAME: Final = (
    r"(?i:secret(?:[_-]?key)?|password|passwd|token|api[_-]?key|access[_-]?key|private[_-]?key|signing[_-]?key|auth[_-]?key)"
)
# An identifier ending in a secret name, an optional closing quote, then ":" or "=".
_SECRET_ASSIGN: Final = rf"[A-Za-z0-9_.\-]*?{_SECRET_NAME}\\?[\"']?(?P<sep>\s*[:=]\s*)"

# The names that introduce a credential in prose (``named_secret``).
_NAMED: Final = (
    r"(?i:(?:aws[ _-]?)?secret(?:[ _-]access)?(?:[ _-]key)?|client[ _-]secret|password|passwd|passphrase|pass phrase"
    r"|api[ _-]?key|access[ _-]key|(?:access|auth|refresh|bearer|api|session)[ _-]token|token)"
)

_RULES: Final[tuple[_Rule, ...]] = (
    # Private key blocks first: nothing inside them is read by a later rule.
    _Rule(PiiKind.PRIVATE_KEY, re.compile(rf"{_PEM_BEGIN}(?:(?:(?!-----BEGIN ).)*?{_PEM_END}|{_PEM_TAIL})", re.DOTALL)),
    # Provider tokens, most specific prefix first (sk-ant- before sk-).
    _Rule(PiiKind.ANTHROPIC_KEY, re.compile(rf"{_TOKEN_START}sk-ant-(?:api|admin|oat|ort)\d{{2}}-[A-Za-z0-9_\-]{{20,}}{_TOKEN_END}")),
    # The seed's rule (sk- + 32+ alphanumerics), or 20+ key characters including a digit.
    _Rule(PiiKind.OPENAI_KEY, re.compile(rf"{_TOKEN_START}sk-(?:[A-Za-z0-9]{{32,}}|(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{{20,}}){_TOKEN_END}")),
    _Rule(PiiKind.STRIPE_KEY, re.compile(rf"{_TOKEN_START}(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{{16,}}{_TOKEN_END}")),
    _Rule(PiiKind.AWS_KEY, re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])")),
    _Rule(
        PiiKind.AWS_KEY,
        re.compile(r"(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
    ),
    _Rule(PiiKind.GITHUB_TOKEN, re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])")),
    _Rule(PiiKind.GITLAB_TOKEN, re.compile(rf"{_TOKEN_START}glpat-[A-Za-z0-9_\-]{{20,}}{_TOKEN_END}")),
    _Rule(PiiKind.SLACK_TOKEN, re.compile(rf"{_TOKEN_START}(?:xoxe\.)?xox[abposre]-[A-Za-z0-9\-]{{10,}}{_TOKEN_END}")),
    _Rule(PiiKind.SLACK_TOKEN, re.compile(rf"{_TOKEN_START}xapp-\d-[A-Za-z0-9\-]{{10,}}{_TOKEN_END}")),
    _Rule(PiiKind.SLACK_TOKEN, re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_\-]+(?:/[A-Za-z0-9_\-]+)*)")),
    _Rule(PiiKind.GOOGLE_KEY, re.compile(rf"{_TOKEN_START}AIza[0-9A-Za-z_\-]{{35}}{_TOKEN_END}")),
    _Rule(PiiKind.GOOGLE_KEY, re.compile(rf"{_TOKEN_START}ya29\.[0-9A-Za-z_\-]{{20,}}{_TOKEN_END}")),
    _Rule(PiiKind.GOOGLE_KEY, re.compile(rf"{_TOKEN_START}GOCSPX-[0-9A-Za-z_\-]{{20,}}{_TOKEN_END}")),
    _Rule(PiiKind.HUGGINGFACE_TOKEN, re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])")),
    _Rule(PiiKind.NPM_TOKEN, re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])")),
    # Generic credentials. A token that is already a placeholder starts with "[" and is skipped.
    _Rule(
        PiiKind.BEARER_TOKEN,
        re.compile(r"(?<![A-Za-z0-9])(?i:bearer)\s+(?P<secret>(?=[A-Za-z0-9._~+/\-]*\d)[A-Za-z0-9._~+/\-]{8,}=*)(?![A-Za-z0-9._~+/=\-])"),
    ),
    _Rule(PiiKind.JWT, re.compile(rf"{_TOKEN_START}eyJ[A-Za-z0-9_\-]{{6,}}\.eyJ[A-Za-z0-9_\-]{{6,}}\.[A-Za-z0-9_\-]*{_TOKEN_END}")),
    _Rule(
        PiiKind.AUTH_HEADER,
        re.compile(
            r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:basic|token|bot)\s+(?P<secret>[A-Za-z0-9+/._~\-]{8,}=*)(?![A-Za-z0-9+/._~=\-])"
        ),
    ),
    _Rule(PiiKind.URL_CREDENTIALS, re.compile(r"(?<=://)(?P<secret>[^\s/:@\[\]{}\"'<>]+:[^\s/@\[\]{}\"'<>]+)@")),
    # user:<placeholder>@ — the password was a provider token already replaced above.
    _Rule(PiiKind.URL_CREDENTIALS, re.compile(r"(?<=://)(?P<secret>[^\s/:@\[\]{}\"'<>]+)(?=:\[REDACTED:[a-z_]+\]@)")),
    # NAME = "value" / NAME: 'value' (JSON, YAML, code): the quoted value, spaces allowed.
    _Rule(
        PiiKind.SECRET,
        re.compile(
            rf"(?<![A-Za-z0-9_.\-]){_SECRET_ASSIGN}\\?(?P<q>[\"'`])"
            r"(?P<secret>(?![$%<{*/~.\[])[^\r\n\"'`\\]{8,4096}+)\\?(?P=q)"
        ),
        accept_secret,
    ),
    # NAME=value (.env, shell, ini, YAML, query strings): the value up to a delimiter.
    _Rule(
        PiiKind.SECRET,
        re.compile(
            rf"(?<![A-Za-z0-9_.\-]){_SECRET_ASSIGN}"
            r"(?P<secret>(?![$%<{*/~.\[\"'`])[^\s\"'`,;&()\[\]{}<>\\]{8,4096}+)(?=[\s\"'`,;&\\]|$)"
        ),
        accept_secret,
    ),
    # A credential introduced by its name (prose, spaced names, JSON keys): after the assignment
    # rules, so ``NAME=value`` keeps its ``secret`` kind; the value must read as a credential.
    _Rule(
        PiiKind.NAMED_SECRET,
        re.compile(
            rf"(?<![A-Za-z0-9_.\-]){_NAMED}(?![A-Za-z0-9])\\?[\"']?"
            r"(?:\s+(?:for|of|on|in)\s+(?:the\s+|our\s+|my\s+|this\s+)?[\w.@\-]+(?:\s+[\w.@\-]+)?\s*(?:[:=]|\s(?:is|was))"
            r"|\s*[:=]|\s+(?i:is|was|set to|changed to|to|of|is now|value)\s*[:=]?|)"
            r"\s*\\?(?P<q>[\"'`]?)(?P<secret>(?![$%<{*/~.\[])[A-Za-z0-9+/=_\-.~!@#%^&*]{8,256}?)\\?(?P=q)"
            r"(?=[\s\"'`,;)\]}]|[.!?:](?:\s|$)|$)"
        ),
        accept_named_secret,
    ),
    # Home directories: only the user-name segment is replaced, the path keeps its structure.
    _Rule(PiiKind.HOME_USER, re.compile(rf"{_PATH_ROOT}\\?/(?:Users|home)\\?/{_NOT_A_USER}(?P<secret>{_USER})")),
    _Rule(PiiKind.HOME_USER, re.compile(rf"(?<![A-Za-z0-9])[A-Za-z]:/(?i:users|documents and settings)/{_NOT_A_USER}(?P<secret>{_WIN_USER})")),
    _Rule(
        PiiKind.HOME_USER,
        re.compile(rf"(?:(?<![A-Za-z0-9])[A-Za-z]:|(?<![\w.\-/\\]))\\{{1,2}}(?i:users|documents and settings)\\{{1,2}}{_NOT_A_USER}(?P<secret>{_WIN_USER})"),
    ),
    _Rule(
        PiiKind.EMAIL,
        re.compile(
            r"(?<![A-Za-z0-9._%+\-])(?P<local>[A-Za-z0-9._%+\-]+)@(?!\d+x\.)"
            r"[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}(?![A-Za-z0-9\-])"
        ),
        accept_email,
    ),
    # Payment cards before phones (a card's digit groups would read as a phone number).
    _Rule(
        PiiKind.CARD_NUMBER,
        re.compile(r"(?<![\w.,+\-/])(?<!\d:)(?:[2-6]\d{12,18}|[2-6]\d{3}(?P<s>[ \-])\d{3,6}(?:(?P=s)\d{3,6}){1,3})(?![\w\-/]|[.,:]\d)"),
        accept_card,
    ),
    # Phones last. International: "+" and a country code, then digit groups.
    _Rule(
        PiiKind.PHONE,
        re.compile(r"(?<![\w+])(?<!\d:)\+[1-9]\d{0,2}(?:[ .\-]?\(\d{1,4}\))?[ .\-]?\d+(?:[ .\-]\d+){0,6}(?!\w)(?![.\-:]\d)"),
        accept_international,
    ),
    # North American: (415) 555-0134, 415-555-0134, 415.555.0134, 415 555 0134, 1-800-555-0199.
    _Rule(
        PiiKind.PHONE,
        re.compile(r"(?<![\w.+\-])(?<!\d:)(?:1[ .\-])?(?:\(\d{3}\) ?\d{3}[ .\-]|\d{3}(?P<s>[ .\-])\d{3}(?P=s))\d{4}(?!\w)(?![.\-:]\d)"),
    ),
    # European national: trunk 0 and separators: 020 7946 0958, 07700 900123, 030 123456 78,
    # 030/12345678, (030) 1234 5678, 06 12 34 56 78, 06-12345678.
    _Rule(
        PiiKind.PHONE,
        re.compile(
            r"(?<![\w.+/\-])(?<!\d[ ./:\-])(?:\(0[1-9]\d{0,3}\) ?|0[1-9]\d{0,3}[ ./\-])\d{2,8}(?:(?P<s>[ .\-])\d{2,8}(?:(?P=s)\d{2,8}){0,2})?"
            r"(?!\w)(?![ ./\-]\d{2})(?!:\d)"
        ),
        accept_national,
    ),
)

_MAX_PASSES: Final = 8


def _apply(rule: _Rule, text: str, counts: Counter[str]) -> str:
    marker = placeholder(rule.kind)
    has_secret = "secret" in rule.pattern.groupindex

    def repl(m: re.Match[str]) -> str:
        if rule.accept is not None and not rule.accept(m):
            return m.group(0)
        counts[rule.kind.value] += 1
        if has_secret and m.start("secret") >= 0:
            start, end = m.start("secret") - m.start(), m.end("secret") - m.start()
            whole = m.group(0)
            return whole[:start] + marker + whole[end:]
        return marker

    return rule.pattern.sub(repl, text)


def redact(text: str, mode: RedactionMode = RedactionMode.STRICT) -> Redacted:
    """Redact one string.

    ``text``: any string (may be empty). ``mode``: :class:`RedactionMode` (a plain ``"strict"`` /
    ``"relaxed"`` string compares equal). Returns :class:`Redacted` with the redacted text and the
    per-kind replacement counts; in relaxed mode the text is returned unchanged with empty counts.

    Pure (no I/O, no state) and idempotent: ``redact(redact(s).text)`` returns the same text and
    empty counts, because placeholders are never matched and a pass is repeated until it
    replaces nothing (at most 8 passes; in practice 1 or 2). Raises nothing.

    Source: the seed's ``redactSensitiveInfo`` and the providers' documented token formats
    (see :class:`PiiKind`).
    """
    if mode == RedactionMode.RELAXED:
        return Redacted(text, {})
    counts: Counter[str] = Counter()
    for _ in range(_MAX_PASSES):
        before = sum(counts.values())
        for rule in _RULES:
            text = _apply(rule, text, counts)
        if sum(counts.values()) == before:
            break
    return Redacted(text, {kind: n for kind, n in counts.items() if n > 0})


def redact_fields(fields: Mapping[str, str], mode: RedactionMode = RedactionMode.STRICT) -> tuple[dict[str, str], dict[str, int]]:
    """Redact several string fields (e.g. an experience's ``title``, ``problem``, ``solution``).

    ``fields``: field name → text. Returns ``(redacted fields, counts)``: a new dict with the same
    keys in the same order, each value passed through :func:`redact`, and the per-kind counts
    summed over all fields (only kinds > 0). Relaxed mode returns a copy and empty counts.
    Pure; raises nothing.
    """
    out: dict[str, str] = {}
    total: Counter[str] = Counter()
    for name, value in fields.items():
        result = redact(value, mode)
        out[name] = result.text
        total.update(result.counts)
    return out, {kind: n for kind, n in total.items() if n > 0}
