"""The redaction rules of :mod:`streams.redaction.redact` (pure data, compiled at import): the
kinds of sensitive substring, their placeholders, one regex :class:`Rule` per format in the order
they run, and for each rule a cheap necessary condition (:attr:`Rule.needs`, :attr:`Rule.trigger`)
that any text the rule can match satisfies, so :func:`~streams.redaction.redact.redact` skips
the rules that cannot match a string.

Sources: the seed's ``redactSensitiveInfo`` (the KnowHub integration design (docs/design.md#sources), 数据脱敏) and the
providers' documented token formats (see :class:`PiiKind`); the checks of
:mod:`streams.redaction.checks`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntFlag, StrEnum
from typing import Final

from streams.redaction.checks import (
    accept_card,
    accept_email,
    accept_international,
    accept_named_secret,
    accept_national,
    accept_secret,
)

__all__ = ["PLACEHOLDER_RE", "RULES", "Family", "PiiKind", "Rule", "families", "placeholder"]


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
      value reads as a credential (:func:`~streams.redaction.checks.credential_like`:
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

# --- rules ---------------------------------------------------------------------------------


class Family(IntFlag):
    """Which cheap test (:func:`families`) a text must pass before a rule's own condition is checked.

    * ``LITERAL``: one of the rule's first ``needs`` literals occurs (one regex of all of them);
    * ``NAME``: a credential's name occurs in any case: ``secret``, ``pass``, ``token``, ``key``,
      ``bearer`` or ``authorization`` (every such rule's ``trigger`` contains one of them);
    * ``DIGIT``: one of the rule's ``trigger`` matches (one regex of all of them; each contains a
      digit, so a digit-free text is skipped by the regex engine's first-character check).
    """

    LITERAL = 1
    NAME = 2
    DIGIT = 4


@dataclass(frozen=True)
class Rule:
    """One regex rule: the whole match, or only its ``secret`` group when the pattern has one,
    is replaced by the kind's placeholder, provided ``accept`` (if any) returns true.

    ``needs`` and ``trigger`` are a necessary condition of a match, cheaper to test than the
    pattern: a text the pattern matches (with the context its look-behinds read) contains, for
    each group of ``needs``, at least one of its literals (case-sensitive substrings), and a
    match of ``trigger`` (a sub-pattern of the rule with the same flags, e.g. its literal prefix
    without the look-behinds). Both default to "no condition". A text failing either is one the
    pattern cannot match; ``tests/streams/test_redact_fast.py`` checks this against the rules themselves.
    ``family``: the :class:`Family` whose test every text the rule can match passes.
    """

    kind: PiiKind
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool] | None = None
    needs: tuple[tuple[str, ...], ...] = ()
    trigger: re.Pattern[str] | None = None
    family: Family = Family.LITERAL

    def could_match(self, text: str) -> bool:
        """False when :attr:`pattern` cannot match ``text`` (true does not mean it matches)."""
        for group in self.needs:
            for literal in group:
                if literal in text:
                    break
            else:
                return False
        return self.trigger is None or self.trigger.search(text) is not None


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

RULES: Final[tuple[Rule, ...]] = (
    # Private key blocks first: nothing inside them is read by a later rule.
    Rule(PiiKind.PRIVATE_KEY, re.compile(rf"{_PEM_BEGIN}(?:(?:(?!-----BEGIN ).)*?{_PEM_END}|{_PEM_TAIL})", re.DOTALL), needs=(("-----BEGIN",),)),
    # Provider tokens, most specific prefix first (sk-ant- before sk-).
    Rule(PiiKind.ANTHROPIC_KEY, re.compile(rf"{_TOKEN_START}sk-ant-(?:api|admin|oat|ort)\d{{2}}-[A-Za-z0-9_\-]{{20,}}{_TOKEN_END}"), needs=(("sk-ant-",),)),
    # The seed's rule (sk- + 32+ alphanumerics), or 20+ key characters including a digit.
    Rule(PiiKind.OPENAI_KEY, re.compile(rf"{_TOKEN_START}sk-(?:[A-Za-z0-9]{{32,}}|(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{{20,}}){_TOKEN_END}"), needs=(("sk-",),)),
    Rule(PiiKind.STRIPE_KEY, re.compile(rf"{_TOKEN_START}(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{{16,}}{_TOKEN_END}"), needs=(("k_live_", "k_test_"),)),
    Rule(PiiKind.AWS_KEY, re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"), needs=(("AKIA", "ASIA", "ABIA", "ACCA"),)),
    Rule(
        PiiKind.AWS_KEY,
        re.compile(r"(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
        needs=((":", "="),),
        trigger=re.compile(r"(?i:aws_?secret_?access_?key)"),
        family=Family.NAME,
    ),
    Rule(PiiKind.GITHUB_TOKEN, re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])"),
         needs=(("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),)),
    Rule(PiiKind.GITLAB_TOKEN, re.compile(rf"{_TOKEN_START}glpat-[A-Za-z0-9_\-]{{20,}}{_TOKEN_END}"), needs=(("glpat-",),)),
    Rule(PiiKind.SLACK_TOKEN, re.compile(rf"{_TOKEN_START}(?:xoxe\.)?xox[abposre]-[A-Za-z0-9\-]{{10,}}{_TOKEN_END}"), needs=(("xox",),)),
    Rule(PiiKind.SLACK_TOKEN, re.compile(rf"{_TOKEN_START}xapp-\d-[A-Za-z0-9\-]{{10,}}{_TOKEN_END}"), needs=(("xapp-",),)),
    Rule(PiiKind.SLACK_TOKEN, re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_\-]+(?:/[A-Za-z0-9_\-]+)*)"),
         needs=(("hooks.slack.com/",),)),
    Rule(PiiKind.GOOGLE_KEY, re.compile(rf"{_TOKEN_START}AIza[0-9A-Za-z_\-]{{35}}{_TOKEN_END}"), needs=(("AIza",),)),
    Rule(PiiKind.GOOGLE_KEY, re.compile(rf"{_TOKEN_START}ya29\.[0-9A-Za-z_\-]{{20,}}{_TOKEN_END}"), needs=(("ya29.",),)),
    Rule(PiiKind.GOOGLE_KEY, re.compile(rf"{_TOKEN_START}GOCSPX-[0-9A-Za-z_\-]{{20,}}{_TOKEN_END}"), needs=(("GOCSPX-",),)),
    Rule(PiiKind.HUGGINGFACE_TOKEN, re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"), needs=(("hf_",),)),
    Rule(PiiKind.NPM_TOKEN, re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"), needs=(("npm_",),)),
    # Generic credentials. A token that is already a placeholder starts with "[" and is skipped.
    Rule(
        PiiKind.BEARER_TOKEN,
        re.compile(r"(?<![A-Za-z0-9])(?i:bearer)\s+(?P<secret>(?=[A-Za-z0-9._~+/\-]*\d)[A-Za-z0-9._~+/\-]{8,}=*)(?![A-Za-z0-9._~+/=\-])"),
        trigger=re.compile(r"(?i:bearer)\s"),
        family=Family.NAME,
    ),
    Rule(PiiKind.JWT, re.compile(rf"{_TOKEN_START}eyJ[A-Za-z0-9_\-]{{6,}}\.eyJ[A-Za-z0-9_\-]{{6,}}\.[A-Za-z0-9_\-]*{_TOKEN_END}"), needs=((".eyJ",),)),
    Rule(
        PiiKind.AUTH_HEADER,
        re.compile(
            r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:basic|token|bot)\s+(?P<secret>[A-Za-z0-9+/._~\-]{8,}=*)(?![A-Za-z0-9+/._~=\-])"
        ),
        needs=((":", "="),),
        trigger=re.compile(r"(?i:authorization)"),
        family=Family.NAME,
    ),
    Rule(PiiKind.URL_CREDENTIALS, re.compile(r"(?<=://)(?P<secret>[^\s/:@\[\]{}\"'<>]+:[^\s/@\[\]{}\"'<>]+)@"), needs=(("://",), ("@",))),
    # user:<placeholder>@ — the password was a provider token already replaced above.
    Rule(PiiKind.URL_CREDENTIALS, re.compile(r"(?<=://)(?P<secret>[^\s/:@\[\]{}\"'<>]+)(?=:\[REDACTED:[a-z_]+\]@)"), needs=(("://",), (":[REDACTED:",))),
    # NAME = "value" / NAME: 'value' (JSON, YAML, code): the quoted value, spaces allowed.
    Rule(
        PiiKind.SECRET,
        re.compile(
            rf"(?<![A-Za-z0-9_.\-]){_SECRET_ASSIGN}\\?(?P<q>[\"'`])"
            r"(?P<secret>(?![$%<{*/~.\[])[^\r\n\"'`\\]{8,4096}+)\\?(?P=q)"
        ),
        accept_secret,
        needs=((":", "="), ('"', "'", "`")),
        trigger=re.compile(_SECRET_NAME),
        family=Family.NAME,
    ),
    # NAME=value (.env, shell, ini, YAML, query strings): the value up to a delimiter.
    Rule(
        PiiKind.SECRET,
        re.compile(
            rf"(?<![A-Za-z0-9_.\-]){_SECRET_ASSIGN}"
            r"(?P<secret>(?![$%<{*/~.\[\"'`])[^\s\"'`,;&()\[\]{}<>\\]{8,4096}+)(?=[\s\"'`,;&\\]|$)"
        ),
        accept_secret,
        needs=((":", "="),),
        trigger=re.compile(_SECRET_NAME),
        family=Family.NAME,
    ),
    # A credential introduced by its name (prose, spaced names, JSON keys): after the assignment
    # rules, so ``NAME=value`` keeps its ``secret`` kind; the value must read as a credential.
    Rule(
        PiiKind.NAMED_SECRET,
        re.compile(
            rf"(?<![A-Za-z0-9_.\-]){_NAMED}(?![A-Za-z0-9])\\?[\"']?"
            r"(?:\s+(?:for|of|on|in)\s+(?:the\s+|our\s+|my\s+|this\s+)?[\w.@\-]+(?:\s+[\w.@\-]+)?\s*(?:[:=]|\s(?:is|was))"
            r"|\s*[:=]|\s+(?i:is|was|set to|changed to|to|of|is now|value)\s*[:=]?|)"
            r"\s*\\?(?P<q>[\"'`]?)(?P<secret>(?![$%<{*/~.\[])[A-Za-z0-9+/=_\-.~!@#%^&*]{8,256}?)\\?(?P=q)"
            r"(?=[\s\"'`,;)\]}]|[.!?:](?:\s|$)|$)"
        ),
        accept_named_secret,
        trigger=re.compile(r"(?i:secret|pass|api[ _-]?key|access[ _-]key|token)"),
        family=Family.NAME,
    ),
    # Home directories: only the user-name segment is replaced, the path keeps its structure.
    Rule(PiiKind.HOME_USER, re.compile(rf"{_PATH_ROOT}\\?/(?:Users|home)\\?/{_NOT_A_USER}(?P<secret>{_USER})"), needs=(("/Users", "/home"),)),
    Rule(PiiKind.HOME_USER, re.compile(rf"(?<![A-Za-z0-9])[A-Za-z]:/(?i:users|documents and settings)/{_NOT_A_USER}(?P<secret>{_WIN_USER})"),
         needs=((":/",),), trigger=re.compile(r":/(?i:users|documents and settings)/")),
    Rule(
        PiiKind.HOME_USER,
        re.compile(rf"(?:(?<![A-Za-z0-9])[A-Za-z]:|(?<![\w.\-/\\]))\\{{1,2}}(?i:users|documents and settings)\\{{1,2}}{_NOT_A_USER}(?P<secret>{_WIN_USER})"),
        needs=(("\\",),),
        trigger=re.compile(r"\\(?i:users|documents and settings)\\"),
    ),
    Rule(
        PiiKind.EMAIL,
        re.compile(
            r"(?<![A-Za-z0-9._%+\-])(?P<local>[A-Za-z0-9._%+\-]+)@(?!\d+x\.)"
            r"[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}(?![A-Za-z0-9\-])"
        ),
        accept_email,
        needs=(("@",), (".",)),
        trigger=re.compile(r"[A-Za-z0-9._%+\-]@[A-Za-z0-9]"),
    ),
    # Payment cards before phones (a card's digit groups would read as a phone number).
    Rule(
        PiiKind.CARD_NUMBER,
        re.compile(r"(?<![\w.,+\-/])(?<!\d:)(?:[2-6]\d{12,18}|[2-6]\d{3}(?P<s>[ \-])\d{3,6}(?:(?P=s)\d{3,6}){1,3})(?![\w\-/]|[.,:]\d)"),
        accept_card,
        trigger=re.compile(r"[2-6]\d{3}(?:\d{9}|[ \-]\d{3})"),
        family=Family.DIGIT,
    ),
    # Phones last. International: "+" and a country code, then digit groups.
    Rule(
        PiiKind.PHONE,
        re.compile(r"(?<![\w+])(?<!\d:)\+[1-9]\d{0,2}(?:[ .\-]?\(\d{1,4}\))?[ .\-]?\d+(?:[ .\-]\d+){0,6}(?!\w)(?![.\-:]\d)"),
        accept_international,
        needs=(("+",),),
        trigger=re.compile(r"\+[1-9]"),
        family=Family.DIGIT,
    ),
    # North American: (415) 555-0134, 415-555-0134, 415.555.0134, 415 555 0134, 1-800-555-0199.
    Rule(
        PiiKind.PHONE,
        re.compile(r"(?<![\w.+\-])(?<!\d:)(?:1[ .\-])?(?:\(\d{3}\) ?\d{3}[ .\-]|\d{3}(?P<s>[ .\-])\d{3}(?P=s))\d{4}(?!\w)(?![.\-:]\d)"),
        trigger=re.compile(r"\d{3}(?:\) ?\d{3}[ .\-]|[ .\-]\d{3}[ .\-])\d{4}"),
        family=Family.DIGIT,
    ),
    # European national: trunk 0 and separators: 020 7946 0958, 07700 900123, 030 123456 78,
    # 030/12345678, (030) 1234 5678, 06 12 34 56 78, 06-12345678.
    Rule(
        PiiKind.PHONE,
        re.compile(
            r"(?<![\w.+/\-])(?<!\d[ ./:\-])(?:\(0[1-9]\d{0,3}\) ?|0[1-9]\d{0,3}[ ./\-])\d{2,8}(?:(?P<s>[ .\-])\d{2,8}(?:(?P=s)\d{2,8}){0,2})?"
            r"(?!\w)(?![ ./\-]\d{2})(?!:\d)"
        ),
        accept_national,
        trigger=re.compile(r"(?:\(0[1-9]\d{0,3}\) ?|0[1-9]\d{0,3}[ ./\-])\d{2}"),
        family=Family.DIGIT,
    ),
)

if any((not r.needs) if r.family is Family.LITERAL else (r.trigger is None) for r in RULES):  # pragma: no cover - a table error
    raise ValueError("a LITERAL-family rule needs a literal, a NAME- or DIGIT-family rule a trigger")

_LITERAL_GATE: Final = re.compile("|".join(sorted({re.escape(lit) for r in RULES if r.family is Family.LITERAL for lit in r.needs[0]})))
_NAMES: Final = r"secret|pass|token|key|bearer|authorization"
_NAME_GATE_LOWER: Final = re.compile(_NAMES)
_NAME_GATE: Final = re.compile(rf"(?i:{_NAMES})")
_ANY_DIGIT: Final = re.compile(r"\d")
_DIGIT_GATE: Final = re.compile("|".join(f"(?:{r.trigger.pattern})" for r in RULES if r.family is Family.DIGIT and r.trigger is not None))
_LITERAL, _NAME, _DIGIT = int(Family.LITERAL), int(Family.NAME), int(Family.DIGIT)


def families(text: str) -> int:
    """The :class:`Family` tests ``text`` passes, as an ``int`` bit mask of :class:`Family` values (0
    when none: then no rule can match ``text``).

    Costs about one short regex scan per family (the ``DIGIT`` regex only runs on a text with a digit). The names are searched in ``text.lower()`` when
    ``text`` is ASCII (there ``(?i:...)`` of an ASCII name is exactly lower-case equality) and with
    ``(?i:...)`` otherwise (which also matches e.g. ``ſ`` for ``s``, as the rules do). Raises nothing.
    """
    found = _LITERAL if _LITERAL_GATE.search(text) is not None else 0
    if (_NAME_GATE_LOWER.search(text.lower()) if text.isascii() else _NAME_GATE.search(text)) is not None:
        found |= _NAME
    if _ANY_DIGIT.search(text) is not None and _DIGIT_GATE.search(text) is not None:
        found |= _DIGIT
    return found
