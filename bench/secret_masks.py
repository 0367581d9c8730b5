"""How much ordinary text the secret redaction of mined sessions eats (optimizer/inputs/redact.py),
and how fast it runs. Prints the false-mask rate over 200+ ordinary lines of the kinds sessions
hold (commit hashes and checksums named as such, UUIDs, base64 image data URIs, file paths,
version strings, identifiers, prose about passwords and tokens), each line that was touched, the
share of tests/secretcorpus.py's secrets masked in every place they are written, and lines per
second. Deterministic; no network.

    .venv/bin/python bench/secret_masks.py
"""

from __future__ import annotations

import base64
import hashlib
import random
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from secretcorpus import pieces, renditions, secrets  # noqa: E402

from optimizer.inputs import redact  # noqa: E402

_RNG = random.Random(7)


def _sha1(i: int) -> str:
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def _sha256(i: int) -> str:
    return hashlib.sha256(f"file {i}".encode()).hexdigest()


def _uuid(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"session {i}"))


def _image(i: int) -> str:
    data = bytes(_RNG.randrange(256) for _ in range(48 + i))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + data).decode()


PROSE = [
    "No, the amounts should be rounded to two decimals, and add a Notes section.",
    "Keep it under 80 words and lead with the decision.",
    "The password field on the login form must be masked.",
    "Add a column with the token count of each request.",
    "The secret to a good summary is to say the result first.",
    "The key is to keep each section short.",
    "Rotate the API keys every 90 days and note it in the runbook.",
    "the password is wrong, please reset it from the admin page",
    "The token is stored in the keychain, not in the repo.",
    "Use the access key from the vault, never paste it here.",
    "Our password policy requires twelve characters.",
    "Set max_tokens: 4096 and temperature: 0.2 for the drafts.",
    "The tokenizer is cl100k_base for this model.",
    "author: Alice Martin, reviewed by Bob",
    "Please use British spelling in the memo.",
    "Don't use bullet points in the executive summary.",
    "Put the chart after the table, not before it.",
    "The report should say which region grew fastest.",
    "Actually, the fiscal year starts in April.",
    "Forget the appendix; nobody reads it.",
    "Credentials are managed by the platform team.",
    "The secret key is rotated by the deploy job.",
    "Write the update for the #eng-announce channel.",
    "The invoice total was $12,480.50 for October.",
    "Meeting moved to 14:30 CET on 2026-11-27.",
    "Use `git rebase -i HEAD~3` to squash the fixups.",
    "The build failed with exit code 137 (out of memory).",
    "Open http://localhost:8080/review to see the page.",
    "See https://github.com/anthropics/skills/blob/main/document-skills/pdf/SKILL.md for the format.",
    "Search https://example.com/search?q=quarterly+report&page=2 for last year's numbers.",
    "Watch https://www.youtube.com/watch?v=dQw4w9WgXcQ before the call.",
    "Call +44 20 7946 0958 if the job fails.",
    "Email ops@example.com with the logs.",
    "It's in section 4.2.1 of the handbook.",
    "The p95 latency dropped from 840 ms to 310 ms.",
    "Merge the branch feature/csv-report-notes into main.",
    "Our order id was 1234567890123456 and it shipped Monday.",
    "Run pytest tests/test_grow_evals.py -k mine -n 0 again.",
    "The pipeline reads from s3://acme-data-lake/raw/2026/11/27/orders.parquet nightly.",
    "The container image is ghcr.io/acme/report-builder:2.4.1 on linux/amd64.",
]
PATHS = [
    "/home/alice/projects/skill-optimizer/optimizer/inputs/redact.py",
    "src/components/DataTable/DataTableHeader.tsx",
    "C:\\Users\\Bob\\Documents\\Q3_Report_Final_v2.xlsx",
    "~/.claude/projects/-home-alice-work/notes/meeting-2026-11-20.md",
    "node_modules/@types/react-dom/index.d.ts",
    "/usr/lib/x86_64-linux-gnu/libssl.so.3",
    "tests/test_grow_evals.py::test_mine_drafts_a_candidate_from_a_session",
    "examples/csv-report/evals/files/orders.csv",
    "/var/log/nginx/access.log.2026-11-26.gz",
    "docs/design.md#21-secrets-are-found-by-a-detector-made-for-it",
    "optimizer/grow/HexHighEntropyStringsPlugin/Base64HighEntropyStringTests.java",
    "app/services/PaymentGatewayWebhookController.rb",
    "lib/OAuth2ClientCredentialsGrant/getMappingFromSecretTypeToClass.ts",
    "internal/httpServerRequestHandler/strengthsAndWeaknesses_test.go",
    "/opt/homebrew/Cellar/python@3.11/3.11.9/Frameworks/Python.framework",
]
VERSIONS = [
    "python 3.11.9",
    "node v20.11.1",
    "anthropic==2.3.1",
    "ubuntu-22.04-x86_64",
    "v1.2.3-rc.4+build.20261127",
    "Claude Code 2.1.330",
    "torch 2.5.1+cu124",
    "openjdk version 21.0.5 2024-10-15 LTS",
    "Chrome/131.0.6778.86 Safari/537.36",
    "postgres 16.4 (Debian 16.4-1.pgdg120+2)",
]


# Written after the rules were tuned on the kinds above, to see what the rate means: 5 of these 25
# were touched then (two unnamed digests, two document ids in URLs, "the password is forgotten");
# the sha256sum / git-ref shapes and participles in -en were taught since, the document ids not.
HELD_OUT = [
    "e676e21 The live line sums the finished iterations' cost once per finished iteration",
    "6f721a3 spending.nominal_levels 3x faster (erfc, a 0.1 grid)",
    f"{_sha256(901)}  dist/skill_optimizer-0.1.0.tar.gz",
    f"{_sha1(902)} refs/heads/main",
    "pip install --require-hashes pyyaml==6.0.2 --hash=sha256:" + _sha256(903),
    "docker pull python@sha256:" + _sha256(904),
    "arn:aws:iam::123456789012:role/ReportBuilderNightly",
    "https://docs.google.com/document/d/1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms/edit",
    "https://drive.google.com/file/d/0B7x3JqkQm9ZcT2hVNl9rX1pYb0k/view?usp=sharing",
    "The Stripe test card is 4242 4242 4242 4242 with any future date.",
    "Please don't share the password in Slack; send it through the vault.",
    "Tokens are counted per request; the budget is 200k tokens a night.",
    "Secret scanning is on for the repo, so pushes with keys are blocked.",
    "The API key goes in ~/.config/optimizer/env, not in the skill folder.",
    "Rename getUserById to fetchUserRecordById in the service layer.",
    "The matrix is 1024x768 and the kernel is 3x3.",
    "Our AWS account is the analytics one, region eu-west-1.",
    "Summarise the meeting in three bullet points for the leadership team.",
    "The quarterly revenue was up 12% against last year's Q3.",
    "Fix the typo in the header: 'Recieved' should be 'Received'.",
    "Use ISO dates (2026-11-27) everywhere in the report.",
    "The slug should be quarterly-report-2026-q3-final.",
    "Translate the memo into French and keep the tone formal.",
    "The webhook fires on every push to main.",
    "If the password is forgotten, the reset link expires in 24 hours.",
]


# Lines that talk about passwords, passphrases and key ids, next to the rules that mask one named
# in prose ("my passphrase is ...", "the password for X is ...", "pw: ...", "das Passwort ist ...").
LOOK_ALIKES = [
    "the password field is required",
    "Add a passphrase strength meter under the field.",
    "The password for the admin account is stored in the vault.",
    "the passphrase is too short, pick four words",
    "The passphrase is checked against the breach list on every login.",
    "Tell me what the password is before the meeting.",
    "The API key for the mailer is rotated monthly by ops.",
    "Das Passwort ist falsch, bitte neu setzen.",
    "Le mot de passe est incorrect.",
    "La contraseña es obligatoria.",
    "private_key_id is missing from the service account JSON",
    "client_secret: ${GOOGLE_CLIENT_SECRET}",
    "Set client_id and client_secret in the OAuth consent screen.",
    "pw: ********",
    "The password for each user is hashed with argon2.",
    "Our password policy asks for a passphrase of four or more words.",
    "The secret is to keep it short and simple.",
    "AKIA is the prefix of a long-term access key id.",
]


def ordinary() -> dict[str, list[str]]:
    """The corpus by kind: 200+ lines, none of which holds a secret."""
    n = range(20)
    return {
        "prose": PROSE,
        "commit hashes, named": [
            t.format(_sha1(i))
            for i, t in zip(
                n,
                [
                    "Reverted commit {} because the totals broke.",
                    "git show {} --stat",
                    "The fix landed in {} (commit), see the PR.",
                    "commit {}\nAuthor: Alice <alice@example.com>",
                    "Cherry-pick revision {} onto the release branch.",
                ]
                * 4,
                strict=True,
            )
        ],
        "sha256 checksums, named": [
            t.format(_sha256(i))
            for i, t in zip(
                n,
                [
                    "sha256: {}",
                    "The checksum of orders.csv is {}.",
                    '{{"file": "orders.csv", "sha256": "{}"}}',
                    "digest sha256:{} pushed",
                    "Expected hash {}, got a different one.",
                ]
                * 4,
                strict=True,
            )
        ],
        "uuids": [
            t.format(_uuid(i))
            for i, t in zip(
                n,
                [
                    "Session {} resumed at 09:12.",
                    "request-id: {}",
                    '{{"id": "{}", "status": "done"}}',
                    "~/.claude/projects/-home-alice/{}.jsonl",
                ]
                * 5,
                strict=True,
            )
        ],
        "base64 image data uris": [
            f"![chart {i}](data:image/png;base64,{_image(i)})" for i in range(10)
        ]
        + [f'<img src="data:image/jpeg;base64,{_image(i + 40)}" alt="logo">' for i in range(10)],
        "file paths": PATHS + [f"Read {p} and summarise it." for p in PATHS],
        "version strings": VERSIONS + [f"Requires {v} or later." for v in VERSIONS],
        "identifiers and code": [
            "def test_mine_drafts_a_candidate_from_a_session(world, cli) -> None:",
            "class HexHighEntropyStringsPlugin(BasePlugin):",
            'token = os.environ["GITHUB_TOKEN"]',
            "password = request.form['password']",
            "api_key = settings.get('api_key')",
            "DB_PASSWORD=${DB_PASSWORD}",
            "const apiKeyInput = document.getElementById('api-key-input');",
            "secret_name: prod/report-builder/db",
            "export AWS_PROFILE=analytics-readonly",
            "kubectl get pods -n report-builder-production --selector=app.kubernetes.io/name=web",
            "SELECT customer_id, SUM(amount_cents) FROM orders_2026_11 GROUP BY customer_id;",
            "import { useQueryClient } from '@tanstack/react-query';",
            "logger.info('evals.mined', sessions=3, uses=4, added=2, pending=2)",
            'ERROR: relation "public.order_line_items" does not exist',
            'Traceback (most recent call last): File "report.py", line 42, in <module>',
            "ValueError: could not convert string to float: 'N/A'",
            "docker run --rm -v $(pwd):/work acme/report-builder:latest make report",
            "CSS: .tw-flex-col-reverse-md { display: flex; }",
            "GET /api/v2/organizations/acme/reports?since=2026-11-01&limit=50 200 OK",
            "x-request-id: req_011CV8ZFPmFxQn2NW5Ju9DjW",
        ],
        "written after tuning": HELD_OUT,
        "look-alikes of a secret in prose": LOOK_ALIKES,
    }


def main() -> None:
    corpus = ordinary()
    lines = [line for kind in corpus.values() for line in kind]
    touched = {
        kind: [ln for ln in kind_lines if redact.text(ln) != ln]
        for kind, kind_lines in corpus.items()
    }
    eaten = sum(len(v) for v in touched.values())
    print(f"ordinary lines: {len(lines)}; touched: {eaten} ({eaten / len(lines):.1%})")
    for kind, hit in touched.items():
        print(f"  {kind}: {len(hit)} of {len(corpus[kind])}")
        for ln in hit:
            print(f"    {ln[:90]!r} -> {redact.text(ln)[:90]!r}")
    places = survived = 0
    print("secrets, by kind (masked in / places written):")
    by_kind: dict[str, list[int]] = {}
    for s in secrets():
        for text in renditions(s).values():
            tally = by_kind.setdefault(s.kind, [0, 0])
            tally[1] += 1
            tally[0] += not any(p in redact.text(text) for p in pieces(s.value))
    for kind, (masked_in, written) in by_kind.items():
        print(f"  {kind}: {masked_in} / {written}")
    for s in secrets():
        for where, text in renditions(s).items():
            places += 1
            masked = redact.text(text)
            if any(p in masked for p in pieces(s.value)):
                survived += 1
                print(f"  SURVIVED: {s.kind} in {where}")
    kinds = len({s.kind for s in secrets()})
    print(
        f"secrets: {len(secrets())} of {kinds} kinds in {places} places; "
        f"masked in {places - survived}"
    )
    repeat = 20
    started = time.perf_counter()
    for _ in range(repeat):
        for ln in lines:
            redact.text(ln)
    took = time.perf_counter() - started
    print(
        f"speed: {repeat * len(lines) / took:,.0f} lines/s ({took / repeat / len(lines) * 1e6:.0f} µs a line)"
    )


if __name__ == "__main__":
    main()
