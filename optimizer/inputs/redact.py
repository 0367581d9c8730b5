"""Secrets out of text mined from the user's sessions, before it is written, shown or sent anywhere
(docs/design.md §21): Yelp's detect-secrets finds them, line by line, in-process and offline, and
our mask replaces them. Never return text that still holds one it knows."""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

from optimizer.inputs import prose
from optimizer.logs import MASK
from optimizer.logs import redact as mask_keys
from optimizer.schemas import Json

if TYPE_CHECKING:
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.plugins.keyword import KeywordDetector


class _Plugin(TypedDict):
    """One entry of detect-secrets' `plugins_used` setting."""

    name: str
    limit: NotRequired[float]


class _Heuristic(Protocol):
    """The part of detect_secrets.filters.heuristic the entropy rules ask."""

    def is_potential_uuid(self, secret: str, /) -> bool: ...

    def is_sequential_string(self, secret: str, /) -> bool: ...


# detect-secrets' plugins, all but IPPublicDetector (an address is not a credential, and sessions
# are full of them). The entropy limits are the library's; shorter strings get a lower one below.
PLUGINS: tuple[_Plugin, ...] = (
    {"name": "ArtifactoryDetector"},
    {"name": "AWSKeyDetector"},
    {"name": "AzureStorageKeyDetector"},
    {"name": "BasicAuthDetector"},
    {"name": "CloudantDetector"},
    {"name": "DiscordBotTokenDetector"},
    {"name": "GitHubTokenDetector"},
    {"name": "GitLabTokenDetector"},
    {"name": "Base64HighEntropyString", "limit": 4.5},
    {"name": "HexHighEntropyString", "limit": 3.0},
    {"name": "IbmCloudIamDetector"},
    {"name": "IbmCosHmacDetector"},
    {"name": "JwtTokenDetector"},
    {"name": "KeywordDetector"},
    {"name": "MailchimpDetector"},
    {"name": "NpmDetector"},
    {"name": "OpenAIDetector"},
    {"name": "PrivateKeyDetector"},
    {"name": "PypiTokenDetector"},
    {"name": "SendGridDetector"},
    {"name": "SlackDetector"},
    {"name": "SoftlayerDetector"},
    {"name": "SquareOAuthDetector"},
    {"name": "StripeDetector"},
    {"name": "TelegramBotTokenDetector"},
    {"name": "TwilioKeyDetector"},
)

# The library's entropy plugins look only inside quotes (made for source files); mined text is
# prose, so every run of the plugin's alphabet is measured, with these floors and tunings
# (bench/secret_masks.py: every secret of tests/secretcorpus.py caught, ordinary lines rarely
# touched).
# Random strings have less entropy the shorter they are: the limit is at most log2(length) - 1,
# which 99.5 % of random base64 strings of 20 to 64 characters clear.
_SHORT_SLACK = 1.0
# A run that reads as words (an identifier, a path: test_grow_evals, DataTableHeader) is not a key:
# its camelCase and snake_case parts are at most one in 16 characters shorter than 3 letters, and
# each longer one is sayable (a vowel, no 5 consonants in a row, or an acronym). Random base64
# strings pass for words 1 time in 200 at 20 characters, 1 in 1,000 at 24, 1 in 3,000 at 32.
_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_VOWEL = re.compile(r"[aeiouy]", re.IGNORECASE)
_CONSONANTS = re.compile(r"[b-df-hj-np-tv-xz]{5}", re.IGNORECASE)
# Whole runs of each alphabet, at least 20 characters (hex: 16): shorter ones are words and
# numbers far more often than keys (the regex skips them without a Python loop).
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{20,}=*")
_HEX_RUN = re.compile(r"(?<![A-Za-z0-9])[0-9A-Fa-f]{16,}(?![A-Za-z0-9])")
_HEX = re.compile(r"[0-9A-Fa-f]+")
# A digest, an id or a boundary named as such (tags.py's `boundary="..."` around the data we send
# must reach the model whole), a few words before it or just after (commit e676e21...,
# "the checksum of orders.csv is 9f86d0...", "... (commit)", request-id: req_011C..., git show
# ...) or the data after `base64,` in a data URI: content the user refers to, not a credential.
_DIGEST_NAME = (
    r"(?i:\b(?:commits?|sha(?:1|224|256|384|512)?|hash(?:es)?|checksums?|digests?|md5|etag|"
    r"revisions?|rev|oid|object id|integrity|fingerprint|boundary)\b|[\w\-]*[_\-]ids?\b|"
    r"\bgit\s+(?:show|checkout|switch|revert|cherry-pick|log|diff|rebase|reset|bisect|tag))"
)
_NAMED_BEFORE = re.compile(_DIGEST_NAME + r"[^\n]{0,30}$|base64,$")
_NAMED_AFTER = re.compile(r"^[\s(\[,:]{0,3}" + _DIGEST_NAME)
# sha256sum's and git's own lines name a hex digest by their shape, first on the line:
# "<digest>  <file>", "<sha> refs/heads/main".
_LISTED = re.compile(r"  \S| refs/")
_SHA_PREFIX = re.compile(r"(?i)^sha(?:1|256|384|512)-")

# Where the library has no rule, ours: private-key bodies (PrivateKeyDetector flags only the
# BEGIN line), token shapes it does not know (fine-grained GitHub, Google, Hugging Face, npm
# outside .npmrc, Stripe test keys and live keys of another length than its 24), credentials in
# URLs with characters its BasicAuthDetector stops at (!, $, &, *, +, ;, =), names its keyword
# list lacks (token, credential, auth, api-key), and a secret named in prose ("the password is
# hunter2": its keyword rules need `=` or `:`; inputs/prose.py).
_SHAPES = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY[A-Z ]*-----.*?(?:-----END [A-Z ]*PRIVATE KEY[A-Z ]*-----|\Z)"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bAIza[0-9A-Za-z_\-]{35}"
    r"|\bhf_[A-Za-z0-9]{30,}"
    r"|\bnpm_[A-Za-z0-9]{36}"
    r"|\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
    re.DOTALL,
)
# Bounded and anchored, as every rule of ours: a 400 KB line must not take quadratic time.
_URL_CREDENTIAL = re.compile(
    r"(?P<head>(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]{0,30}://[^\s:/@]{1,200}:)[^\s@/]{1,200}(?=@)",
    re.IGNORECASE,
)
_ASSIGNED = re.compile(
    r"(?P<head>(?:\b[\w.\-]{0,40}(?:token|credentials?|api-key|apikey|access[_-]?key|passphrase|"
    r"passwort|kennwort|wachtwoord|senha|contrase(?:n|ñ|\\u00f1)a|mot[_-]?de[_-]?passe|"
    r"private[_-]?key[_-]?id)|\bpw|"
    r"\bauth(?:orization)?|\bx-[\w\-]{0,40}(?:auth|key)[\w\-]{0,40})[\"']?\s*[:=]\s*"
    r"(?:(?:bearer|basic|token)\s+)?[\"']?)"
    r"(?P<value>(?=[^\s\"',;]*[A-Za-z])[^\s\"',;()\[\]{}<>]{4,}+)(?![(\[])",
    re.IGNORECASE,
)
# A quoted value under a name for a password, whole: a passphrase has spaces, which end the
# unquoted rules' value (`"passphrase": "correct horse battery staple"`).
_QUOTED = re.compile(
    r"(?P<head>(?:passphrase|pass_phrase|password|passwort|kennwort|mot[_-]?de[_-]?passe|secret)"
    r"[\"']?\s*[:=]\s*(?P<q>[\"']))(?P<value>[^\"'\n]{1,200}?(?= )[^\"'\n]{1,200}?)(?P=q)",
    re.IGNORECASE,
)
# A password given on a command line: `sshpass -p 'pw'`, `--password=pw`, `--password pw`,
# `--passwd pw`, and MySQL's glued `mysql -u root -ppw`. Quoted, the whole quoted value goes
# (it may hold spaces); bare, up to the next space or quote.
_FLAG_PASSWORD = re.compile(
    r"(?P<head>(?:\bsshpass(?:\s+-[a-oq-zA-Z]\S*(?:\s+[^-\s]\S*)?){0,4}\s+(?-i:-p)\s*"
    r"|(?<![\w-])--pass(?:word|wd)(?:=|\s+)"
    r"|\bmysql(?:dump|admin)?\b[^\n]{0,200}?\s(?-i:-p)(?=[^\s-]))"
    r"(?P<q>[\"'])?)(?P<value>(?(q)[^\"'\n]{1,200}|[^\s\"']{1,200}))(?(q)(?P=q))",
    re.IGNORECASE,
)
# secret_name, password_file, token_path: a name that says the value is about a secret, not one.
_NOT_A_CREDENTIAL = re.compile(
    r"[_\-](?:names?|ids?|arn|path|file|dir|url|ref|type|length|len|policy|field|hash|count|hint)"
    r"\b[\"'\]]*\s*[:=]",
    re.IGNORECASE,
)
_ONE_CASE_ALNUM = re.compile(r"(?=\D*\d)(?:[a-z0-9]+|[A-Z0-9]+)")
# All-lowercase slugs (tw-flex-col-reverse-md, report-builder-production): words, never a key.
_SLUG = re.compile(r"[a-z]+(?:[\-_/.][a-z0-9]+)+")
_TRAILING = prose.TRAILING
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-]+")
# A rule that matches `AccountKey=<key>` whole: the name stays readable.
_KEY_NAME = re.compile(r"(?:[A-Z][a-z]+)+=|")
_LOCK = threading.Lock()


@functools.cache
def _plugins() -> tuple[
    tuple[HighEntropyStringsPlugin, ...], tuple[KeywordDetector, ...], tuple[re.Pattern[str], ...]
]:
    """The configured plugins, made once under the library's own settings and sorted by how they
    are asked: (entropy plugins, keyword plugins, the provider rules' patterns). Imported here: the
    command line answers bad input before this weight is loaded."""
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.plugins.keyword import KeywordDetector
    from detect_secrets.settings import get_plugins, transient_settings

    with _LOCK, transient_settings({"plugins_used": list(PLUGINS)}):
        made = tuple(get_plugins())
    entropy = tuple(p for p in made if isinstance(p, HighEntropyStringsPlugin))
    keywords = tuple(p for p in made if isinstance(p, KeywordDetector))
    rules = tuple(
        regex for p in made if p not in entropy and p not in keywords for regex in p.denylist
    )
    return entropy, keywords, rules


@functools.cache
def _keyword_rules() -> tuple[re.Pattern[str], tuple[tuple[re.Pattern[str], int], ...]]:
    """Any of the keyword plugin's names (a cheap first look), and its rules with the group that
    holds the value: those for config files (unquoted values) and for code (quoted)."""
    from detect_secrets.plugins import keyword

    tables = (
        keyword.CONFIG_DENYLIST_REGEX_TO_GROUP,
        keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    )
    rules = tuple((regex, group) for table in tables for regex, group in table.items())
    return re.compile(keyword.DENYLIST_REGEX, re.IGNORECASE), rules


def _spans(line: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every secret detect-secrets finds in one line."""
    from detect_secrets.filters import heuristic

    entropy, keywords, rules = _plugins()
    plugin: HighEntropyStringsPlugin | KeywordDetector
    for plugin in entropy:
        yield from _entropy_spans(plugin, line, heuristic)
    hint, keyword_rules = _keyword_rules()
    for plugin in keywords:
        if not hint.search(line) or (
            plugin.keyword_exclude and plugin.keyword_exclude.search(line)
        ):
            continue
        found = [span for regex, group in keyword_rules for span in _values(line, regex, group)]
        if found and heuristic.is_indirect_reference(line):
            continue  # `password = vault.get("db")`: a lookup, not the value
        for start, end in found:
            yield from _keyword_value(line, start, end)
    for regex in rules:
        for m in regex.finditer(line):
            yield _regex_span(line, m)


def _regex_span(line: str, found: re.Match[str]) -> tuple[int, int]:
    """The secret in a provider rule's match: its last group when that group is preceded by
    context (aws ... key = "<secret>", ://user:<secret>@), else the match less its delimiters;
    either runs on to the token's end (a rule of fixed length would leave a longer key's tail)."""
    for g in range(found.re.groups, 0, -1):
        start, end = found.span(g)
        if start > found.start() and end > start:
            break
    else:
        start, end = found.span()
        text = found.group()
        start += len(text) - len(text.lstrip(" \t\"'=:"))
        end -= len(text) - len(text.rstrip(" \t\"'"))
        name = _KEY_NAME.match(line, start)
        start = min(start + (len(name[0]) if name else 0), end)
    tail = _TOKEN_TAIL.match(line, end)
    return start, max(start, tail.end() if tail else end)


def _values(line: str, regex: re.Pattern[str], group: int) -> Iterator[tuple[int, int]]:
    """Each value a keyword rule finds, looking again just after each: its value runs to the end
    of the line, which would hide a second name (`password: a1 and secret: b2`)."""
    at = 0
    # Each look reads at most 4,096 characters: many names on one long line stay linear.
    while (found := regex.search(line, at, at + 4096)) is not None:
        if not _NOT_A_CREDENTIAL.search(line, found.start(), found.start(group)):
            yield found.span(group)
        at = found.start(group) + 1


def _keyword_value(line: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """A keyword rule's value: quoted, whole; unquoted, up to the first space (the library's rule
    runs to the end of the line) and without the sentence's closing punctuation."""
    from detect_secrets.filters import heuristic

    quoted = start > 0 and line[start - 1] in "\"'`"
    if not quoted:
        cut = re.search(r"\s", line[start:end])
        end = start + cut.start() if cut else end
        while end > start and line[end - 1] in _TRAILING:
            end -= 1
    value = line[start:end]
    if (
        len(value) < 3
        or MASK in value
        or heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_not_alphanumeric_string(value)
    ):
        return
    yield start, end


def _entropy_spans(
    plugin: HighEntropyStringsPlugin, line: str, heuristic: _Heuristic
) -> Iterator[tuple[int, int]]:
    hexed = plugin.secret_type.startswith("Hex")
    for found in (_HEX_RUN if hexed else _BASE64_RUN).finditer(line):
        value = found.group()
        if not hexed and _HEX.fullmatch(value):
            continue  # the hex plugin's to judge, with its own limit and the named-digest rule
        limit = min(plugin.entropy_limit, math.log2(len(value)) - _SHORT_SLACK)
        if plugin.calculate_shannon_entropy(value) <= limit:
            continue
        if not hexed and _wordish(value):
            continue
        if _NAMED_BEFORE.search(line[max(0, found.start() - 60) : found.start()]):
            continue
        if _NAMED_AFTER.search(line[found.end() : found.end() + 24]):
            continue
        if hexed and not line[: found.start()].strip() and _LISTED.match(line, found.end()):
            continue
        if _SHA_PREFIX.match(value) or heuristic.is_potential_uuid(value):
            continue
        if heuristic.is_sequential_string(value):
            continue
        yield found.span()


def _wordish(value: str) -> bool:
    if _SLUG.fullmatch(value):
        return True
    if _ONE_CASE_ALNUM.fullmatch(value):
        return False  # letters of one case and digits, no separator: a key's shape, not words
    letters = [p for p in _PARTS.findall(value) if not p.isdigit()]
    short = sum(1 for p in letters if len(p) <= 2)
    return short <= max(1, len(value) // 16) and all(
        (p.isupper() and len(p) <= 4) or (_VOWEL.search(p) and not _CONSONANTS.search(p))
        for p in letters
        if len(p) >= 4
    )


def _masked_line(line: str) -> str:
    """The line with every span the detector finds masked, overlapping spans as one."""
    merged: list[list[int]] = []
    for start, end in sorted(set(_spans(line))):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, at = [], 0
    for start, end in merged:
        out += [line[at:start], MASK]
        at = end
    return "".join([*out, line[at:]])


def _ours(value: str) -> str:
    masked = _SHAPES.sub(MASK, value)
    masked = _URL_CREDENTIAL.sub(lambda m: m.group("head") + MASK, masked)
    masked = _QUOTED.sub(lambda m: m.group("head") + MASK + m.group("q"), masked)
    masked = _FLAG_PASSWORD.sub(_flag_mask, masked)
    masked = _ASSIGNED.sub(_keep_mask, masked)
    return prose.mask(masked)


def _flag_mask(m: re.Match[str]) -> str:
    if MASK in m.group("value") or m.group("value").startswith("$"):  # masked, or a variable
        return m.group(0)
    return m.group("head") + MASK + (m.group("q") or "")


def _keep_mask(m: re.Match[str]) -> str:
    value = m.group("value")
    core = value.rstrip(_TRAILING)
    if MASK in value or not core:
        return m.group(0)
    return m.group("head") + MASK + value[len(core) :]


def text(value: str) -> str:
    """value with every key-like part replaced by the mask."""
    masked = _ours(mask_keys(value))
    if not masked:
        return masked
    return "".join(_masked_line(line) for line in masked.splitlines(keepends=True))


def deep(value: Json) -> Json:
    """A copy of a JSON-like value with every string in it passed through text()."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(k) if isinstance(k, str) else k: deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [deep(v) for v in value]
    return value


def holds_secret(value: str) -> bool:
    return text(value) != value
