"""Fake secrets shaped like real ones, one or more for every kind detect-secrets knows and the ones
we add, and the places a session holds them: prose, JSON, code, a URL, an HTTP header. Built from
a seeded random source and joined prefixes, so no scanner flags this file. Not a test module; also
read by bench/secret_masks.py."""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

_RNG = random.Random(20261127)
ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


# Words a passphrase is drawn from (diceware's way: common, unrelated).
_WORDS = ("lamp", "orbit", "velvet", "cactus", "harbor", "pencil", "meadow", "tundra", "violin")


def draw(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class Secret:
    kind: str
    value: str  # what must not survive
    phrase: str  # the value as a person writes it in a sentence
    field: str = "token"  # its name in JSON, code and a URL's query
    header: str = ""  # how an HTTP request carries it, "" for `Authorization: Bearer <value>`
    # Where a person writes it: a passphrase of words goes in prose and in quotes, not in a URL.
    places: tuple[str, ...] = ("prose", "json", "code", "url", "header")


def _jwt() -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    head = part({"alg": "HS256", "typ": "JWT"})
    body = part({"sub": draw(string.digits, 10), "name": "Ada", "iat": 1_764_000_000})
    return f"{head}.{body}.{draw(URLSAFE, 43)}"


def _private_key() -> tuple[str, str]:
    body = "\n".join(draw(B64, 64) for _ in range(5))
    kind = "RSA " + "PRIVATE" + " KEY"
    return body, f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"


def secrets() -> list[Secret]:
    aws_secret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"  # the issue's own line
    other_aws = draw(B64, 40)
    key_body, key_block = _private_key()
    pw = "hunter" + "2"
    found = [
        Secret(
            "aws key id",
            "AKIA" + draw(string.ascii_uppercase + string.digits, 16),
            "the access key id is {v}",
            "aws_access_key_id",
        ),
        Secret("aws secret", aws_secret, "with secret {v}", "aws_secret_access_key"),
        Secret("aws secret", other_aws, "aws secret key {v}", "aws_secret_access_key"),
        Secret(
            "artifactory",
            "AKC" + draw(ALNUM, 70),
            "artifactory key {v} for the mirror",
            "artifactory_api_key",
        ),
        Secret(
            "azure storage",
            draw(B64, 86) + "==",
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={v}",
            "azure_storage_key",
        ),
        Secret(
            "basic auth url",
            "S3cr" + "etPw" + draw(ALNUM, 6),
            "clone https://deploy:{v}@git.example.com/acme/app.git",
            "password",
        ),
        Secret(
            "cloudant", draw(HEX, 64), "https://acme:{v}@acme.cloudant.com/db", "cloudant_password"
        ),
        Secret(
            "discord",
            "M" + draw(ALNUM, 23) + "." + draw(URLSAFE, 6) + "." + draw(URLSAFE, 27),
            "the bot token {v}",
            "discord_token",
        ),
        Secret("github", "gh" + "p_" + draw(ALNUM, 36), "push with {v}", "github_token"),
        Secret(
            "github fine-grained",
            "github" + "_pat_11" + draw(ALNUM + "_", 70),
            "the PAT {v}",
            "gh_token",
        ),
        Secret("gitlab", "gl" + "pat-" + draw(URLSAFE, 20), "gitlab token {v}", "gitlab_token"),
        Secret(
            "high-entropy base64", draw(B64, 32), "signing key {v} (rotate monthly)", "signing_key"
        ),
        Secret("high-entropy hex", draw(HEX, 40), "the webhook secret {v}", "webhook_secret"),
        Secret(
            "high-entropy lowercase", draw(LOWER_ALNUM, 32), "deploy with {v} tonight", "deploy_key"
        ),
        Secret("ibm cloud iam", draw(URLSAFE, 44), "ibm_cloud_iam_api_key={v}", "ibm_api_key"),
        Secret(
            "ibm cos hmac",
            draw(HEX, 48),
            "cos_hmac_secret_access_key = {v}",
            "cos_secret_access_key",
        ),
        Secret("jwt", "ey" + _jwt()[2:], "session cookie {v}", "id_token"),
        Secret("keyword", pw, "the password is {v}", "password", "X-Password"),
        Secret("keyword", "Tr0ub4dor" + "&3x", "password: {v}", "db_password", "X-Db-Password"),
        # A password on a command line, quoted and bare (issue found with evals mine).
        Secret(
            "command line", draw(ALNUM, 12), "sshpass -p '{v}' ssh deploy@build-7", "ssh_password"
        ),
        Secret("command line", draw(ALNUM, 14), "psql --password={v} -h db", "db_password"),
        Secret("mailchimp", draw(HEX, 32) + "-us" + "12", "mailchimp key {v}", "mc_api_key"),
        Secret(
            "npm",
            "np" + "m_" + draw(ALNUM, 36),
            "//registry.npmjs.org/:_authToken={v}",
            "npm_token",
        ),
        Secret(
            "openai",
            "sk-" + draw(ALNUM, 20) + "T3Blbk" + "FJ" + draw(ALNUM, 20),
            "OPENAI_API_KEY {v}",
            "openai_api_key",
        ),
        Secret(
            "anthropic",
            "sk-" + "ant-api03-" + draw(URLSAFE, 80),
            "my key {v}",
            "anthropic_api_key",
            "x-api-key",
        ),
        Secret("private key", key_body, key_block, "private_key"),
        Secret(
            "pypi", "pypi-AgEI" + "cHlwaS5vcmc" + draw(URLSAFE, 80), "upload with {v}", "pypi_token"
        ),
        Secret(
            "sendgrid",
            "SG" + "." + draw(URLSAFE, 22) + "." + draw(URLSAFE, 43),
            "sendgrid {v}",
            "sendgrid_key",
        ),
        Secret(
            "slack",
            "xo"
            + "xb-"
            + draw(string.digits, 12)
            + "-"
            + draw(string.digits, 13)
            + "-"
            + draw(LOWER_ALNUM, 24),
            "slack bot {v}",
            "slack_token",
        ),
        Secret(
            "slack webhook",
            "hooks.slack.com/services/T"
            + draw(ALNUM, 10)
            + "/B"
            + draw(ALNUM, 10)
            + "/"
            + draw(ALNUM, 24),
            "post to https://{v}",
            "webhook",
        ),
        Secret("softlayer", draw(HEX, 64), "softlayer_api_key: {v}", "sl_api_key"),
        Secret("square", "sq0" + "csp-" + draw(URLSAFE, 43), "square secret {v}", "square_secret"),
        Secret("stripe", "sk" + "_live_" + draw(ALNUM, 24), "charge with {v}", "stripe_key"),
        # Longer than the library's rule of 24: the whole key goes, not its first 32 characters.
        Secret("stripe", "rk" + "_live_" + draw(ALNUM, 99), "refund with {v}", "stripe_key"),
        Secret(
            "telegram",
            draw(string.digits, 9) + ":" + draw(URLSAFE, 35),
            "telegram bot {v}",
            "bot_token",
        ),
        Secret("twilio", "SK" + draw(LOWER_ALNUM, 32), "twilio key {v}", "twilio_key"),
        Secret("google", "AI" + "za" + draw(URLSAFE, 35), "maps key {v}", "maps_api_key"),
        Secret("hugging face", "h" + "f_" + draw(ALNUM, 34), "hub token {v}", "hf_token"),
        Secret(
            "passphrase",
            "correct horse " + "battery staple",  # the issue's own line
            "my passphrase is {v}",
            "passphrase",
            places=("prose", "json", "code"),
        ),
        Secret(
            "passphrase",
            " ".join(_RNG.choice(_WORDS) for _ in range(5)),
            "the wifi pass phrase is '{v}'",
            "wifi_passphrase",
            places=("prose", "json", "code"),
        ),
        Secret(
            "password for a named thing",
            "Xk9" + draw(ALNUM, 9),
            "the password for the staging db is {v}",
            "staging_db_password",
            "X-Db-Password",
        ),
        Secret("pw", draw(ALNUM, 10), "pw: {v}", "pw", "X-Pw"),
        Secret("password in german", "Geh" + draw(ALNUM, 9), "das Passwort ist {v}", "passwort"),
        Secret(
            "password in french", "Sol" + draw(ALNUM, 9), "le mot de passe est {v}", "mot_de_passe"
        ),
        Secret("password in spanish", "Cla" + draw(ALNUM, 9), "la contraseña es {v}", "contraseña"),
        Secret(
            "gcp private key id",
            draw(HEX, 40),
            "the service account's private_key_id is {v}",
            "private_key_id",
        ),
        Secret(
            "oauth client secret",
            "GOC" + "SPX-" + draw(URLSAFE, 28),
            "the client secret is {v}",
            "client_secret",
        ),
    ]
    return found


def pieces(value: str) -> list[str]:
    """What must not survive of a secret: itself, and for a long one any of its thirds (a rule
    that masks only a prefix or a tail leaves the rest); for a private key, each line."""
    if "\n" in value:
        return value.splitlines()
    if len(value) < 24:
        return [value]
    third = len(value) // 3
    return [value, value[:third], value[third : 2 * third], value[2 * third :]]


def renditions(s: Secret) -> dict[str, str]:
    """The secret where sessions hold secrets: the same value in every shape."""
    phrase = s.phrase.format(v=s.value)
    header = f"{s.header}: {s.value}" if s.header else f"Authorization: Bearer {s.value}"
    camel = "".join(w.capitalize() for w in s.field.split("_"))
    every = {
        "prose": f"Please finish the nightly export; {phrase} and then tell me it worked.",
        "json": json.dumps({"service": "export", s.field: s.value, "region": "eu-west-1"}),
        "code": f'{s.field.upper()} = "{s.value}"\nconst {camel[0].lower() + camel[1:]} = '
        f"'{s.value}';",
        "url": f"GET https://api.example.com/v1/export?{s.field}={s.value}&format=csv",
        "header": f"curl -H '{header}' https://api.example.com/v1/export",
    }
    return {place: every[place] for place in s.places}
