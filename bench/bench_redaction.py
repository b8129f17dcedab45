"""Benchmark: KnowHub's hand-written secret redaction against Yelp's detect-secrets, and the
injection detector, on the project's test sets and on the real corpus's text.

Prints, per detector:

* the secret cases of ``tests/streams/test_redact.py`` (its cases whose kinds are all credentials, i.e.
  not e-mail / phone / home directory; the hardening set's named-secret and card cases counted apart):
  cases whose every sensitive substring is gone, and negatives changed at all (false positives);
* the corpus (every distinct string of ``shared/corpus``'s JSON lines, ``SOURCES.md`` and the
  Codex hook schemas; sanitised before it was collected, so it holds no real credential and every
  credential hit is a false positive): strings with a hit and hits, per kind / plugin;
* seconds over the corpus and the ratio to the hand-written rules: ``--rounds`` rounds, each timing
  every detector once, one after the other; each round's ratio, and their median;
* for the injection detector: the hardening classes, positives flagged and negatives flagged, and
  corpus strings flagged (all rules, and the hardening rules); the seed documents' paragraphs
  (Chinese and Swedish prose) redacted or flagged by the hardening rules.

``--baseline REV`` also runs ``streams/redaction/redact.py`` and ``injection.py`` as they are at
git revision REV (e.g. ``main``), read with ``git show``: the "before" figures.

detect-secrets runs with its default plugins and filters (``default_settings``, entered once for the
whole run, as its own scan of a tree of files does), line by line as its own file scan does
(``_process_line_based_plugins``, a private function: the public entry points read files). A
detected value is replaced wherever it occurs in the text; union = the hand-written rules, then
detect-secrets on their output. Without the corpus beside the repository, the generated sessions
(``tests/support/session_gen.py``) stand in for it.

Usage: ``python bench/bench_redaction.py [--baseline main]`` (needs ``pip install
'detect-secrets>=1.5,<1.6'``, the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from streams.experiences import injection  # noqa: E402
from streams.redaction import redact  # noqa: E402
from tests import test_redact  # noqa: E402
from tests.support.corpus import CORPUS  # noqa: E402
from tests.support.kb_hardening import CARD_NEGATIVES, CARDS, INJECTION_CLASSES, NAMED_SECRET_NEGATIVES, NAMED_SECRETS  # noqa: E402

PII_KINDS = {"email", "phone", "home_user"}
NEW_RULES = {"tool_execution.invoke_tool", "role_tag.plain_header", "approval_manipulation.authority_claim"} | {
    f"override_instructions.{lang}" for lang in ("de", "es", "fr", "pt", "sv", "ja", "ru", "zh")
}
Redactor = Callable[[str], tuple[str, Counter[str]]]


def _strings(v: Any) -> Iterator[str]:
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _strings(x)


def corpus_texts(root: Path = CORPUS) -> list[str]:
    """Every distinct non-blank string of the corpus (or another directory of session files), in file order."""
    texts: list[str] = []
    for p in sorted(root.rglob("*.jsonl")):
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.extend(_strings(json.loads(line)))
    for p in sorted(root.rglob("*.json")):
        texts.extend(_strings(json.loads(p.read_text(encoding="utf-8"))))
    if (root / "SOURCES.md").exists():
        texts.append((root / "SOURCES.md").read_text(encoding="utf-8"))
    return [t for t in dict.fromkeys(texts) if t.strip()]


def _module_at(rev: str, path: str, name: str, extra: dict[str, types.ModuleType] | None = None) -> types.ModuleType:
    """``path`` as it is at git revision ``rev``, loaded as a fresh module (not registered)."""
    src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    mod = types.ModuleType(name)
    saved = {k: sys.modules.get(k) for k in (extra or {})}
    sys.modules.update(extra or {})
    sys.modules[name] = mod
    try:
        exec(compile(src, f"{rev}:{path}", "exec"), mod.__dict__)
    finally:
        del sys.modules[name]
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod


def hand_redactor(mod: types.ModuleType) -> Redactor:
    """The hand-written rules of ``mod`` (a redact module): credential kinds only."""

    def run(text: str) -> tuple[str, Counter[str]]:
        r = mod.redact(text)
        return r.text, Counter({k: n for k, n in r.counts.items() if k not in PII_KINDS})

    return run


def _eager_line_scan(lines: list[tuple[int, str]], filename: str) -> Iterator[Any]:
    """detect-secrets' line scan with its plugins' ``enable_eager_search`` (unquoted tokens are
    candidates too, as in its ad-hoc string scan) and the entropy limits applied afterwards (the
    eager path leaves them to the caller); the same line, secret and context filters."""
    from detect_secrets.core.scan import _is_filtered_out, _scan_line, get_plugins
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.util.code_snippet import get_code_snippet

    content = [line for _, line in lines]
    for number, line in lines:
        context = get_code_snippet(lines=content, line_number=number)
        if _is_filtered_out(required_filter_parameters=["line"], filename=filename, line=line, context=context):
            continue
        for plugin in get_plugins():
            for s in _scan_line(plugin=plugin, filename=filename, line=line, line_number=number, context=context, enable_eager_search=True):
                if isinstance(plugin, HighEntropyStringsPlugin) and plugin.calculate_shannon_entropy(s.secret_value) <= plugin.entropy_limit:
                    continue
                if not _is_filtered_out(required_filter_parameters=["context"], filename=filename, secret=s.secret_value, plugin=plugin,
                                        line=line, context=context):
                    yield s


def detect_secrets_redactor(*, eager: bool = False) -> Redactor:
    """detect-secrets' plugins and filters, line by line as its file scan does (``eager``: unquoted
    tokens too, :func:`_eager_line_scan`); each value found is replaced. Call it inside
    ``default_settings()``, entered once (``main`` does): entering it per string re-creates every
    plugin and filter each time, work detect-secrets' own scans do once."""
    from detect_secrets.core.scan import _process_line_based_plugins

    scan = _eager_line_scan if eager else _process_line_based_plugins

    def run(text: str) -> tuple[str, Counter[str]]:
        found: Counter[str] = Counter()
        values: set[str] = set()
        for s in scan(list(enumerate(text.splitlines(), 1)), "experience.txt"):
            if s.secret_value:
                found[s.type] += 1
                values.add(s.secret_value)
        for v in sorted(values, key=len, reverse=True):
            text = text.replace(v, "[REDACTED:detect_secrets]")
        return text, found

    return run


def union(a: Redactor, b: Redactor) -> Redactor:
    """``a`` then ``b`` on ``a``'s output."""

    def run(text: str) -> tuple[str, Counter[str]]:
        t1, c1 = a(text)
        t2, c2 = b(t1)
        return t2, c1 + c2

    return run


def score(red: Redactor, cases: list[Any], negatives: list[str]) -> tuple[int, int, int, int]:
    """(cases with every secret gone, cases, negatives with a hit, negatives)."""
    caught = sum(all(s not in red(c.text)[0] for s in c.secrets) for c in cases)
    fps = sum(bool(red(t)[1]) for t in negatives)
    return caught, len(cases), fps, len(negatives)


def corpus_hits(red: Redactor, texts: list[str]) -> tuple[int, Counter[str], float]:
    """(strings with a hit, hits per kind, seconds)."""
    started = time.perf_counter()
    strings, kinds = 0, Counter[str]()
    for t in texts:
        c = red(t)[1]
        strings += bool(c)
        kinds.update(c)
    return strings, kinds, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", help="git revision whose redact.py / injection.py to run as 'before' (e.g. main)")
    ap.add_argument("--rounds", type=int, default=3, help="timed passes over the corpus per detector, alternating (default 3)")
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        _main(args, stack)


def _main(args: argparse.Namespace, stack: contextlib.ExitStack) -> None:
    """The benchmark, inside ``stack`` (detect-secrets' settings, a temporary directory)."""
    new_ids = {c.id for c in NAMED_SECRETS + CARDS}
    secret_cases = [c for c in test_redact.CASES if not set(c.counts) & PII_KINDS]
    old_cases = [c for c in secret_cases if c.id not in new_ids]
    old_negatives = [t for t in test_redact.NEGATIVES if t not in set(NAMED_SECRET_NEGATIVES + CARD_NEGATIVES)]
    sets = {
        "existing secret cases": (old_cases, old_negatives),
        "named secrets": (NAMED_SECRETS, NAMED_SECRET_NEGATIVES),
        "card numbers": (CARDS, CARD_NEGATIVES),
    }
    detectors: dict[str, Redactor] = {}
    base_inj: types.ModuleType | None = None
    if args.baseline:
        detectors[f"hand-written @ {args.baseline}"] = hand_redactor(_module_at(args.baseline, "streams/redaction/redact.py", "_base_redact"))
        base_inj = _module_at(args.baseline, "streams/experiences/injection.py", "_base_injection")
    detectors["hand-written (this tree)"] = hand_redactor(redact)
    try:
        from detect_secrets.settings import default_settings

        stack.enter_context(default_settings())  # once, for every scan below
        ds = detect_secrets_redactor()
        detectors["detect-secrets 1.5 defaults"] = ds
        detectors["detect-secrets, unquoted too"] = detect_secrets_redactor(eager=True)
        detectors["hand-written + detect-secrets"] = union(hand_redactor(redact), ds)
    except ImportError:
        print("detect-secrets is not installed: pip install 'detect-secrets>=1.5,<1.6' (the bench extra)")

    print("== secret redaction on the test sets: positives caught / cases, negatives changed / negatives")
    for name, red in detectors.items():
        row = "; ".join(f"{label}: {c}/{n} caught, {f}/{m} FP" for label, (cases, negs) in sets.items() for c, n, f, m in [score(red, cases, negs)])
        print(f"  {name:34} {row}")

    if CORPUS.exists():
        texts, what = corpus_texts(), "corpus"
    else:
        from tests.support.session_gen import write_sessions

        gen = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        write_sessions(gen)
        texts, what = corpus_texts(gen), "generated sessions (no corpus beside the repository)"
    print(f"== {what}: {len(texts)} distinct strings, {sum(map(len, texts)) / 1e6:.1f} M characters (no real credential: every hit is a false positive)")
    named = sum(bool(re.search(r"(?i)\b(?:secret|password|passwd|passphrase|api[ _-]?key|token)\b", t)) for t in texts)
    runs = sum(bool(re.search(r"(?<![\w.])[2-6]\d{12,18}(?![\w.])|(?<![\w.])[2-6]\d{3}[ -]\d{3,6}(?:[ -]\d{3,6}){1,3}(?![\w.])", t)) for t in texts)
    print(f"  for scale: {named} strings name a secret (secret, password, api key, token ...), {runs} hold a card-shaped digit run")
    timed = {name: red for name, red in detectors.items() if not name.startswith("hand-written +")}  # a union's time is the sum
    hits: dict[str, tuple[int, Counter[str]]] = {}
    secs: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(max(args.rounds, 1)):  # each round times every detector once, one after the other
        for name, red in timed.items():
            strings, kinds, took = corpus_hits(red, texts)
            hits.setdefault(name, (strings, kinds))
            secs[name].append(took)
    anchor = secs["hand-written (this tree)"]
    for name in timed:
        strings, kinds = hits[name]
        ratios = [t / a for t, a in zip(secs[name], anchor, strict=True)]
        top = ", ".join(f"{k} {n}" for k, n in kinds.most_common(6)) or "none"
        print(f"  {name:34} {strings} strings with a hit, {sum(kinds.values())} hits ({top}); "
              f"{statistics.median(secs[name]):.2f} s, {statistics.median(ratios):.1f}x the hand-written rules "
              f"(rounds: {', '.join(f'{r:.1f}' for r in ratios)})")

    print("== injection detector on the hardening classes: positives flagged by their rule / cases, negatives flagged / negatives")
    detect_now = injection.detect_injection
    runs: list[tuple[str, Callable[..., Any]]] = [("this tree", detect_now)]
    if base_inj is not None:
        runs.insert(0, (f"@ {args.baseline}", base_inj.detect_injection))
    for name, det in runs:
        parts = []
        for cls, (pos, neg) in INJECTION_CLASSES.items():
            hit = sum(det("Fix CI", "", c.text).flagged for c in pos)
            fp = sum(det("Fix CI", "", t).flagged for t in neg)
            parts.append(f"{cls}: {hit}/{len(pos)} flagged, {fp}/{len(neg)} FP")
        print(f"  {name:12} " + "; ".join(parts))
    seeds = [p for f in sorted((CORPUS.parent / "seeds").glob("*.md")) for p in f.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    if seeds:  # the seed documents, written by Chinese- and Swedish-speaking teams: ordinary text in those languages
        new_kinds = {"named_secret", "card_number"}
        redacted = sum(bool(new_kinds & set(redact.redact(p).counts)) for p in seeds)
        flagged_new = sum(bool(set(injection.detect_injection(p).rules) & NEW_RULES) for p in seeds)
        print(f"  seeds: {len(seeds)} paragraphs; redacted by named_secret / card_number: {redacted}; flagged by the hardening rules: {flagged_new}")
    for name, det in runs:
        flagged = [det(t).rules for t in texts]
        any_flag = sum(bool(r) for r in flagged)
        new_flag = sum(bool(set(r) & NEW_RULES) for r in flagged)
        rules = Counter(x for r in flagged for x in r)
        print(f"  corpus {name:12} {any_flag} strings flagged ({dict(rules)}); by the hardening rules: {new_flag}")


if __name__ == "__main__":
    main()
