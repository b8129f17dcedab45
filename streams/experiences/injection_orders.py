"""Orders aimed at the reading agent that the earlier rules left unflagged, and the mention check (pure).

* Tool invocation (``tool_execution.invoke_tool``): "execute this tool immediately: …", a tool
  called with urgency, a destructive or shell tool by name, "you must now invoke the function …";
  an imperative, not an agent narrating its own plan.
* Role headers in plain text (``role_tag.plain_header``): "SYSTEM PROMPT: you are …", a line that
  is only ``### system``.
* Claims of authority (``approval_manipulation.authority_claim``): "the developer message says to
  skip review", "pre-approved by", "approve automatically".
* :func:`mentioned`: a quoted or named override phrase ("a filter against 'ignore previous
  instructions'") is a mention, not an order.

Matched against :func:`streams.experiences.injection_text.normalise`'s form (the bare header
against :func:`~streams.experiences.injection_text.line_form`'s). Source: the examples and negatives of
``tests/support/kb_hardening.py``; the rule table is in :mod:`streams.experiences.injection`.
"""

from __future__ import annotations

import re

from streams.experiences.injection_text import Guard, clause_words, imperative

__all__ = [
    "AUTHORITY_NEEDLES",
    "AUTHORITY_RE",
    "BARE_HEADER_RE",
    "INVOKE_TOOL_RE",
    "MUST_INVOKE_RE",
    "PLAIN_HEADER_RE",
    "invoke_tool_guard",
    "mentioned",
    "unless_mentioned",
]

# -- quoted or named mentions ("a filter against 'ignore previous instructions'")

_OPEN_QUOTES = "\"'`\u201e\u00ab\u2039\u300c\u300e"
_CLOSE_QUOTES = "\"'`\u00bb\u203a\u300d\u300f"
_MENTION_AFTER_RE = re.compile(
    r"[\"'`\u00bb\u203a\u300d\u300f]?\s*(?:-?style |-?type )?(?:attacks?|attempts?|injections?|phrases?|patterns?|strings?|payloads?|examples?"
    r"|filters?|checks?|detectors?|detection|rules? (?:in|of) (?:the|our) (?:filter|detector)|という|といった|这类|這類|之类|之類|类|類)\b"
)


def mentioned(text: str, found: re.Match[str]) -> bool:
    """The phrase is quoted or named, not used: an opening quote right before it and the closing
    quote within 40 characters after it (no sentence break in between), or a noun such as
    "attacks", "phrases", "filter" right after it ("a filter against ignore previous instructions
    attacks")."""
    before = text[: found.start()].rstrip(" ")
    after = text[found.end() :]
    if _MENTION_AFTER_RE.match(after):
        return True
    if not before or before[-1] not in _OPEN_QUOTES:
        return False
    for ch in after[:40]:
        if ch in _CLOSE_QUOTES:
            return True
        if ch in ".!?\u3002\uff01\uff1f":
            return False
    return False


def unless_mentioned(guard: Guard | None) -> Guard:
    """``guard`` (or no guard), but never for a quoted or named mention (:func:`mentioned`)."""

    def check(text: str, found: re.Match[str]) -> bool:
        return not mentioned(text, found) and (guard is None or guard(text, found))

    return check


# -- tool execution aimed at the reading agent's tools

_TOOL_VERB = r"(?:execute|exec|run|invoke|call|trigger|fire|use)"
_TOOL_NOUN = r"(?:tool calls?|function calls?|tools?|functions?)"
_TOOL_NAME = r"[`'\"]?[\w./:-]+[`'\"]?"
_DANGER = (
    r"(?:delete|drop|remove|destroy|wipe|purge|truncate|erase|kill|reset|transfer|shell|bash|exec|execute|terminal|sudo|rm|format|shutdown"
    r"|grant|revoke)"
)
_DANGER_NAME = rf"[`'\"]?[\w./:-]*(?<![a-z]){_DANGER}(?![a-z])[\w./:-]*[`'\"]?"
_URGENT = (
    r"(?:immediately|right away|right now|at once|now(?! that)|without (?:asking|confirmation|confirming|approval|review|hesitation|checking|telling)"
    r"|before (?:answering|replying|responding|anything else|you (?:answer|reply|respond)))"
)
INVOKE_TOOL_RE = re.compile(
    # "Execute this tool immediately: …", "invoke this function:"
    rf"\b(?:execute|exec|run|invoke|call|trigger) (?:this|that) (?:{_TOOL_NAME} )?{_TOOL_NOUN}(?: {_TOOL_NAME})?(?: {_URGENT})? ?:"
    # "… the X tool … immediately", "use the terminal tool right away"
    rf"|\b{_TOOL_VERB} (?:the|this|that|your|a) (?:{_TOOL_NAME} )?{_TOOL_NOUN}(?: {_TOOL_NAME})?(?: [^.;:!?]{{0,40}}?)? {_URGENT}\b"
    # a destructive or shell tool by name: "call the `delete_user` tool", "run the shell tool with"
    rf"|\b{_TOOL_VERB} (?:the |this |that |your |a )?(?:{_DANGER_NAME} {_TOOL_NOUN}|{_TOOL_NOUN} {_DANGER_NAME})(?=$|[\s.,;:!?)])"
)
_OBLIGED = frozenset({"required", "have", "need", "needs", "instructed", "ordered", "told", "asked"})
_FIRST_PERSON = frozenset({"i", "we", "i'll", "we'll", "i'm", "we're", "me", "let's", "i'd", "we'd"})


def invoke_tool_guard(text: str, found: re.Match[str]) -> bool:
    """An imperative (:func:`imperative`), not an agent narrating its own plan ("I should use
    the Bash tool to …", "let me call the delete tool")."""
    words = clause_words(text, found.start())
    if _FIRST_PERSON.intersection(words[-3:]):
        return False
    return imperative(text, found.start()) or (len(words) >= 2 and words[-1] == "to" and words[-2] in _OBLIGED)


MUST_INVOKE_RE = re.compile(
    rf"\byou (?:must|have to|need to|are required to|are instructed to|shall) (?:now|immediately|right away|first) "
    rf"{_TOOL_VERB} (?:the|this|that|your|a) (?:{_TOOL_NAME} )?{_TOOL_NOUN}\b"
)

# -- role headers in plain text and claims of authority

_HEADER_ROLE = r"(?:system|developer|admin|administrator|operator|root)(?: prompt| message| instructions?| override| note| notice| directive)?"
# At the start of a line or after a sentence ends ("the operating system: your build needs …" is prose).
PLAIN_HEADER_RE = re.compile(
    rf"(?:^|(?<=[.!?;>|] ))(?:#{{1,6}} ?|\*\* ?|> ?|\[)?{_HEADER_ROLE}(?:\*\*|\])? ?: ?(?:you\b|your\b|ignore|disregard|forget|approve|accept|trust"
    r"|skip|bypass|disable|always|never|do not|don't|from now|new (?:instructions|rules|policy)|override|act as|respond only|reply only|answer only"
    r"|obey|follow (?:only|these|my))",
    re.MULTILINE,
)
BARE_HEADER_RE = re.compile(r"^[ \t]*(?:#{1,6}|\*\*|__) ?(?:system|developer)(?: prompt| message| instructions?)? ?(?:\*\*|__)? ?:?[ \t]*$", re.MULTILINE)
_AUTHORITY = (
    r"(?:the |your |our )?(?:system|developer|admin|administrator|sysadmin|operator|maintainers?|security team|moderators?|reviewers?|openai|anthropic"
    r"|creators?|owner)(?: (?:message|prompt|team|staff|note|instructions?))?"
)
_REVIEW_TAIL = (
    r"(?:(?:skip|bypass|disable|ignore|avoid) (?:the |any |all )?(?:review|reviews|moderation|quarantine|approval step|reviewers?|injection (?:filter|check)"
    r"|safety checks?)|(?:approve|accept|publish|trust|whitelist|allowlist) (?:this|it|the (?:entry|experience|submission|note)|everything|all entries"
    r"|automatically)|(?:no|without) (?:review|reviewing|moderation|checks?)|pre-?approved|auto-?approve)"
)
AUTHORITY_RE = re.compile(
    rf"\b{_AUTHORITY} (?:says|said|requires|required|instructs?|instructed|wants|allows|permits|authori[sz]es|authori[sz]ed|has authori[sz]ed"
    rf"|has approved|approved|confirmed|has confirmed|told|asks|asked|orders?|ordered)(?: (?:you|us|me|agents|the agent|reviewers))?"
    rf"(?: (?:to|that))?(?: [^.;!?]{{0,40}}?)? {_REVIEW_TAIL}\b"
    r"|\b(?:this|the) (?:entry|experience|note|submission|memory|record) (?:is|was|has been) (?:pre-?approved|authori[sz]ed|whitelisted|cleared)\b"
    r"|\bpre-?approved by\b"
    r"|(?:^|[.;:!?] )(?:and |so |then |please )?(?:approve|publish|accept) (?:it |this |everything )?(?:automatically|without (?:review|checking))\b"
)
AUTHORITY_NEEDLES = (
    "review", "moderation", "quarantine", "approv", "injection", "safety", "accept", "publish", "trust", "whitelist", "allowlist", "check",
    "authori", "cleared",
)  # fmt: skip
"""Every match of :data:`AUTHORITY_RE` contains one of these (a text without any is skipped)."""
