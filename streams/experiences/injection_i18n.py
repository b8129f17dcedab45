"""The override phrase "ignore all previous instructions" in German, Spanish, French, Portuguese,
Swedish, Japanese and Russian, plus the Chinese phrasings the first Chinese rule missed (pure; used
by :mod:`streams.experiences.injection`).

The patterns are matched against the detector's normal form (NFKC, casefolded, whitespace
collapsed, a few Cyrillic/Greek look-alike letters folded to Latin: see
:func:`streams.experiences.injection.normalise`), so every pattern here is written in plain lower
case and folded the same way when it is compiled (:func:`fold_pattern`).

What is matched, per language: an *imperative* override verb (German ``ignoriere``, ``vergiss``,
``missachte``; Spanish ``ignora``, ``olvida``, ``haz caso omiso de``; French ``ignore``,
``oubliez``, ``ne tiens pas compte de``; Portuguese ``ignore``, ``esqueça``, ``desconsidere``;
Swedish ``ignorera``, ``glöm``, ``bortse från``; Japanese ``無視して``, ``忘れて``; Russian
``игнорируй``, ``забудь``, ``не обращай внимания на``), optional quantifiers (all / the / your),
a positional modifier (previous, prior, above, earlier, original, system) and an instruction noun
(instructions, rules, directives, orders, prompts). Third-person and infinitive forms
("das Modell ignoriert …", "モデルは…無視することがある", "модель игнорирует …") are
descriptions and do not match. Where the imperative is also the third person (Spanish and
Portuguese ``ignora``, French ``ignore``), the verb must start its clause or follow a lead word
("por favor", "agora", "et", "bitte", "och", "и" …) — "El modelo ignora las instrucciones
anteriores" is a description.

Source: eight languages (German, Spanish, French, Portuguese, Swedish, Chinese, Japanese,
Russian), with wording from the translations that public injection test sets use (e.g.
"Ignoriere alle vorherigen Anweisungen", "Ignora todas las instrucciones anteriores", "以前の指示をすべて無視して", "Игнорируй все предыдущие инструкции").
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["I18N_RULES", "fold_pattern"]


def fold_pattern(pattern: str, table: dict[int, str]) -> re.Pattern[str]:
    """``pattern`` with the detector's look-alike fold applied (a char-to-char map, so the regex
    syntax is unchanged), compiled. Raises ``re.error`` for an invalid pattern."""
    return re.compile(pattern.translate(table))


_DE = (
    r"\b(?:ignorier(?:e|en sie)?|vergiss|vergessen sie|missachte|missachten sie|übergehe|übergehen sie|verwirf|verwerfen sie)"
    r"(?: bitte)? (?:(?:alle|sämtliche|die|deine|ihre|jegliche|diese|alles) ){0,3}"
    r"(?:(?:vorherigen?|vorigen?|bisherigen?|obigen?|früheren?|vorangegangenen?|vorhergehenden?|ursprünglichen?|alten|"
    r"oben genannten?|oben stehenden?|zuvor gegebenen?|gegebenen) ){1,2}"
    r"(?:anweisungen|instruktionen|befehle|regeln|vorgaben|anordnungen|richtlinien|systemanweisungen|systemvorgaben|prompts?|eingaben)\b"
)
_ES = (
    r"\b(?:ignora|ignore|ignoren|ignorad|olvida|olvide|olvidad|olviden|descarta|descarte|desatiende|desatienda|omite|omita"
    r"|haz caso omiso de|hagan caso omiso de|no sigas|no sigan|deja de seguir) (?:(?:todas|todos|las|los|tus|sus|cualquier) ){0,3}"
    r"(?:(?:instrucciones|indicaciones|reglas|órdenes|ordenes|directrices|normas|consignas|prompts?) "
    r"(?:anteriores|previas|precedentes|de arriba|originales|del sistema|iniciales)|(?:anteriores|previas) (?:instrucciones|indicaciones|reglas|órdenes))\b"
)
_FR = (
    r"\b(?:ignore|ignorez|oublie|oubliez|néglige|négligez|ne tiens pas compte|ne tenez pas compte|fais abstraction|faites abstraction"
    r"|ne suis pas|ne suivez pas|ne respecte pas|ne respectez pas|écarte|écartez) (?:de |des |d')?(?:(?:toutes|tous|les|tes|vos|ces) ){0,3}"
    r"(?:(?:instructions|consignes|règles|directives|indications|ordres|prompts?) "
    r"(?:précédentes|antérieures|ci-dessus|originales|initiales|d'origine|du système|précédents)|(?:précédentes|anciennes) (?:instructions|consignes|règles))\b"
)
_PT = (
    r"\b(?:ignore|ignora|ignorem|esqueça|esqueca|esquece|esqueçam|desconsidere|desconsidera|desconsiderem|descarte|despreze|despreza"
    r"|não siga|nao siga|deixe de seguir) (?:(?:todas|todos|as|os|suas|tuas|quaisquer) ){0,3}"
    r"(?:(?:instruções|instrucoes|regras|ordens|diretrizes|orientações|indicações|prompts?) "
    r"(?:anteriores|prévias|previas|acima|originais|do sistema|precedentes|iniciais)|(?:anteriores|prévias) (?:instruções|regras|ordens))\b"
)
_SV = (
    r"\b(?:ignorera|glöm|bortse från|strunta i|åsidosätt|bry dig inte om|följ inte|sluta följa) (?:(?:alla|de|dina|era|samtliga) ){0,3}"
    r"(?:(?:(?:tidigare|föregående|ovanstående|ursprungliga|gamla|givna) ){1,2}"
    r"(?:instruktioner(?:na)?|regler(?:na)?|anvisningar(?:na)?|direktiv(?:en)?|order|uppmaningar(?:na)?|prompter|promptar|riktlinjer(?:na)?)"
    r"|(?:instruktionerna|reglerna|anvisningarna) ovan)\b"
)
_JA = (
    r"(?:以前|前|上記|これまで|先ほど|今まで|最初|元|上|既存|システム)の?(?:すべての|全ての|全部の)?"
    r"(?:指示|命令|指令|ルール|プロンプト|設定|制約|インストラクション)(?:を|は)?(?:すべて|全て|全部|一切)?"
    r"(?:無視(?:して|しろ|せよ|しなさい)|忘れ(?:て|ろ|なさい))"
)
_RU = (
    r"(?<!\w)(?:игнорируй(?:те)?|проигнорируй(?:те)?|забудь(?:те)?|не обращай(?:те)? внимания на|не слушай(?:те)?|не следуй(?:те)?|отбрось(?:те)?"
    r"|пренебреги(?:те)?) (?:(?:все|всё|любые|свои|твои|ваши|эти) ){0,2}"
    r"(?:(?:предыдущие|прежние|прошлые|вышеуказанные|вышеприведённые|вышеприведенные|изначальные|исходные|системные|ранее данные|данные ранее"
    r"|указанные выше|приведённые выше) ){1,2}(?:инструкции|указания|правила|команды|распоряжения|промпты|директивы|установки)(?!\w)"
)
_ZH = (
    r"(?:忽略|无视|無視|忽视|忽視|不要理会|不要理會|不要理睬|别管|別管|不要遵守|不要遵循|不再遵守|忘记|忘記|忘掉|放弃|放棄|抛开|拋開)掉? ?"
    r"(?:(?:你|您)?(?:之前|以上|上面|上述|上文|前文|前述|前面|先前|此前|原来|原來|原有)(?:收到|得到|接收)?[的 ]*(?:所有|全部|一切|任何)?"
    r"|(?:你|您)(?:的|收到的)?(?:所有|全部|一切|任何)?|(?:所有|全部|一切|任何))[的 ]*(?:系统|系統)?"
    r"(?:指令|指示|提示词?|提示詞|规则|規則|要求|设定|設定|说明|說明|命令|指导|指導)"
)

# A lead word before an imperative that is also a third-person form ("por favor ignora …").
_LEADS = frozenset(
    {
        "por", "favor", "ahora", "y", "luego", "simplemente", "solo", "también", "e", "agora", "então", "apenas", "também", "et",
        "puis", "maintenant", "simplement", "svp", "stp", "bitte", "jetzt", "und", "dann", "einfach", "och", "nu", "sedan",
        "snälla", "bara", "и", "теперь", "пожалуйста", "затем", "просто", "please", "now", "and", "then", "just",
    }
)  # fmt: skip
_CLAUSE_BREAK = re.compile(r"[.!?;:,>\"`*()\[\]{}|«»„‹›「」『』\u2014\u2013\u3001\u3002\uff0c\uff01\uff1f]| - ")
_WORD = re.compile(r"[\w']+")
# Words before a Chinese verb that make it a description ("模型会忽略之前的指令").
_ZH_DESCRIPTIVE = re.compile(r"(?:会|會|可能|常常|经常|經常|往往|容易|倾向于|傾向於|不会|不會|没有|沒有|不)$")

Guard = Callable[[str, re.Match[str]], bool]


def _clause_words(text: str, start: int) -> list[str]:
    window = text[max(0, start - 80) : start]
    last = 0
    for found in _CLAUSE_BREAK.finditer(window):
        last = found.end()
    return _WORD.findall(window[last:])


def _starts_clause(text: str, found: re.Match[str]) -> bool:
    """The verb starts its clause or follows a lead word (any language of :data:`_LEADS`)."""
    words = _clause_words(text, found.start())
    return not words or all(w in _LEADS for w in words[-2:])


def _zh_not_descriptive(text: str, found: re.Match[str]) -> bool:
    return not _ZH_DESCRIPTIVE.search(text[max(0, found.start() - 4) : found.start()])


def _any(_text: str, _found: re.Match[str]) -> bool:
    return True


I18N_RULES: tuple[tuple[str, str, Guard, tuple[str, ...]], ...] = (
    (
        "override_instructions.zh",
        _ZH,
        _zh_not_descriptive,
        ("忽略", "无视", "無視", "忽视", "忽視", "不要理", "别管", "別管", "不要遵", "不再遵", "忘记", "忘記", "忘掉", "放弃", "放棄", "抛开", "拋開"),
    ),
    ("override_instructions.de", _DE, _any, ("ignorier", "vergiss", "vergessen", "missacht", "übergeh", "verwirf", "verwerfen")),
    ("override_instructions.es", _ES, _starts_clause, ("ignor", "olvid", "descart", "desatiend", "omit", "caso omiso", "no sig", "deja de seguir")),
    (
        "override_instructions.fr",
        _FR,
        _starts_clause,
        ("ignor", "oubli", "néglig", "tiens pas compte", "tenez pas compte", "abstraction", "ne sui", "ne respect", "écart"),
    ),
    (
        "override_instructions.pt",
        _PT,
        _starts_clause,
        ("ignor", "esqueç", "esquec", "desconsider", "descart", "desprez", "não siga", "nao siga", "deixe de seguir"),
    ),
    ("override_instructions.sv", _SV, _any, ("ignorera", "glöm", "bortse", "strunta", "åsidosätt", "bry dig inte", "följ inte", "sluta följa")),
    ("override_instructions.ja", _JA, _any, ("無視", "忘れ")),
    ("override_instructions.ru", _RU, _any, ("игнорир", "забуд", "не обращ", "не слуша", "не следу", "отбрось", "пренебрег")),
)
"""``(rule name, pattern source before the look-alike fold, context guard, needles)``; the detector
compiles each pattern with :func:`fold_pattern`, applies its mention guard before the guard here,
and skips a text that holds none of the needles (every verb of the pattern contains one; folded
the same way)."""
