"""A secret named in prose, in the languages people write to an agent in (redact.py's own rule:
detect-secrets' keyword rules need `=` or `:`): "the password is hunter2", "the password for the
staging db is ...", "das Passwort ist ...", a quoted value, or a passphrase of 2 to 8 words ("my
passphrase is correct horse battery staple"), while talk about one stays ("the password field is
required", "the password is stored in the vault")."""

from __future__ import annotations

import re

from optimizer.logs import MASK

# What ends a value in a sentence, not part of it.
TRAILING = ".,;:!?)]}>"
# The name, what it is for ("the password for the staging db is ..."), a verb; the value is the
# next word, or a quoted string, or a passphrase of 3 to 8 words.
_SECRET_NAME = (
    r"password|passphrase|pass phrase|passcode|passwd|pwd|pw|secret(?: key)?|token|private_key_id|"
    r"api[ _-]?key|access key|credentials?|passwort|kennwort|mot de passe|phrase secr[eè]te|"
    r"contrase[nñ]a|senha|wachtwoord"
)
_IN_PROSE = re.compile(
    r"(?P<head>\b(?:" + _SECRET_NAME + r")"
    r"(?:\s+(?:for|of|to|on|für|von|zum|zur|pour|du|de|des|para|del|da|do|per|voor|van)"
    r"(?:\s+[^\s\"'`.,;:!?]{1,40}){1,4}?)?"
    r"\s+(?:is|was|are|were|ist|lautet|war|est|était|es|era|é|è|jest):?\s+(?P<quote>[\"'`]?))"
    r"(?P<value>[^\s\"'`]{2,})",
    re.IGNORECASE,
)
# Words a passphrase is made of (letters, perhaps a hyphen); one ends at a sentence's end or at a
# conjunction, never at another word (a sentence about the password goes on).
_PASSPHRASE_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)?")
_NEXT_WORD = re.compile(r"[ \t]+([^\W\d_]+(?:-[^\W\d_]+)?)(?=$|[\s.,;:!?)\"'`])", re.MULTILINE)
_CONJUNCTION = re.compile(r"and|or|but|then|so|please|und|oder|et|ou|y|o|e|en", re.IGNORECASE)
# Where a sentence about a password goes on with other words than the password's.
_FUNCTION_WORD = re.compile(
    r"(?:a|an|and|or|but|nor|so|then|to|of|in|on|at|by|for|from|with|without|into|until|till|"
    r"since|before|after|as|than|if|when|while|because|it|its|is|are|was|were|be|been|no|yet|"
    r"please|und|oder|ist|im|für|et|ou|est|dans|pour|y|o|en|es|con|e|è|di|per|niet|en|het)",
    re.IGNORECASE,
)
# What follows "the password is" in ordinary talk about one, not a password.
_NOT_A_VALUE = re.compile(
    r"(?:[a-z]+(?:ed|en|ing|ly|ble)|wrong|incorrect|correct|invalid|valid|missing|empty|set|unset|"
    r"not|now|still|also|never|always|only|too|very|the|this|that|there|here|in|on|at|from|for|"
    r"stored|kept|same|different|weak|strong|long|short|fine|okay|ok|right|gone|old|new|required|"
    r"optional|secret|safe|unsafe|public|private|known|unknown|none|null|shown|hidden|what|which|"
    r"falsch|richtig|korrekt|abgelaufen|geheim|leer|sicher|nicht|faux|fausse|vide|expiré|"
    r"incorrecta|correcta|vacía|segura|errata|giusta|errada|correta|fout|juist|onjuist|"
    r"obligatori[oae]|requerid[oa]|erforderlich|requis|richiesta|verplicht)"
    r"[.,;:!?)]*",
    re.IGNORECASE,
)


def mask(value: str) -> str:
    """value with the secret each sentence names masked: a quoted string whole, a passphrase of 2
    to 8 words whole, else the next word unless it talks about the password ("is wrong")."""
    out, at = [], 0
    for m in _IN_PROSE.finditer(value):
        if m.start() < at:
            continue
        start, end = m.start("value"), _prose_end(m)
        if end > start:
            out += [value[at:start], MASK]
            at = end
    return "".join([*out, value[at:]])


def _prose_end(m: re.Match[str]) -> int:
    """Where the named secret ends (its start when there is none to mask)."""
    text, start, word = m.string, m.start("value"), m.group("value")
    if MASK in word:
        return start
    quote = m.group("quote")
    if quote:
        close = text.find(quote, start, start + 200)
        if close > start and "\n" not in text[start:close] and MASK not in text[start:close]:
            return close
    if _PASSPHRASE_WORD.fullmatch(word):
        at, words = m.end("value"), 1
        while words < 8 and (nxt := _NEXT_WORD.match(text, at)):
            if _FUNCTION_WORD.fullmatch(nxt[1]) or _NOT_A_VALUE.fullmatch(nxt[1]):
                break
            at, words = nxt.end(), words + 1
        stop = _NEXT_WORD.match(text, at)
        if words >= 2 and (stop is None or _CONJUNCTION.fullmatch(stop[1])):
            return at
    core = word.rstrip(TRAILING)
    if not core or _NOT_A_VALUE.fullmatch(word) or _FUNCTION_WORD.fullmatch(core):
        return start
    if len(core) < 4:
        return start  # "the password is ok": a short word alone is talk, not a password
    return start + len(core)
