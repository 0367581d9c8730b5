"""Secrets in mined sessions (optimizer/inputs/redact.py): every kind detect-secrets knows and the
ones we add, in prose, JSON, code, URLs, headers and tool results, is masked everywhere `evals mine`
writes, shows or sends it, while ordinary text (named hashes, UUIDs, data URIs, paths, versions)
is left as it was."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import uuid
from pathlib import Path

import pytest
from secretcorpus import Secret, pieces, renditions, secrets
from sessionfiles import Session

from optimizer.inputs import redact, sessions

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "csv-report"
SECRETS = secrets()
PLACES = ("prose", "json", "code", "url", "header")
AWS_SECRET = next(s for s in SECRETS if s.kind == "aws secret").value
AWS_KEY_ID = next(s for s in SECRETS if s.kind == "aws key id").value


def _left(masked: str, corpus: list[Secret] = SECRETS) -> list[str]:
    return [f"{s.kind}: {p[:12]}…" for s in corpus for p in pieces(s.value) if p in masked]


@pytest.mark.parametrize(
    ("secret", "place"),
    [(s, place) for s in SECRETS for place in s.places],
    ids=[f"{s.kind}-{i}-{place}" for i, s in enumerate(SECRETS) for place in s.places],
)
def test_every_kind_of_secret_is_masked_wherever_it_is_written(secret: Secret, place: str) -> None:
    masked = redact.text(renditions(secret)[place])
    assert not _left(masked, [secret]), masked
    assert redact.MASK in masked and redact.holds_secret(renditions(secret)[place])


def test_the_issue_line_loses_the_key_id_and_the_forty_character_secret() -> None:
    line = f"…key is {AWS_KEY_ID} with secret {AWS_SECRET} for the upload, and the password is "
    masked = redact.text(line + "hunter" + "2.")
    assert masked == (
        "…key is [redacted] with secret [redacted] for the upload, and the password is [redacted]."
    )


@pytest.mark.parametrize(
    "line",
    [
        "Reverted commit " + hashlib.sha1(b"1").hexdigest() + " because the totals broke.",
        "The checksum of orders.csv is " + hashlib.sha256(b"2").hexdigest() + ".",
        '{"file": "orders.csv", "sha256": "' + hashlib.sha256(b"3").hexdigest() + '"}',
        hashlib.sha256(b"4").hexdigest() + "  dist/skill_optimizer-0.1.0.tar.gz",
        f"Session {uuid.uuid5(uuid.NAMESPACE_URL, 'x')} resumed at 09:12.",
        "![chart](data:image/png;base64,"
        + base64.b64encode(hashlib.sha512(b"5").digest() * 3).decode()
        + ")",
        "Read /home/alice/projects/skill-optimizer/optimizer/inputs/redact.py and summarise it.",
        "src/components/DataTable/DataTableHeader.tsx",
        "lib/OAuth2ClientCredentialsGrant/getMappingFromSecretTypeToClass.ts",
        "Requires v1.2.3-rc.4+build.20261127 or python 3.11.9 or later.",
        "the password is wrong, please reset it from the admin page",
        "If the password is forgotten, the reset link expires in 24 hours.",
        "Set max_tokens: 4096; the tokenizer is cl100k_base; author: Alice",
        'token = os.environ["GITHUB_TOKEN"]',
        "secret_name: prod/report-builder/db",
        "DB_PASSWORD=${DB_PASSWORD}",
        "the password field is required",
        "Add a passphrase strength meter under the field.",
        "The password for the admin account is stored in the vault.",
        "the passphrase is too short, pick four words",
        "Tell me what the password is before the meeting.",
        "Das Passwort ist falsch; le mot de passe est incorrect.",
        "private_key_id is missing from the service account JSON",
        "client_secret: ${GOOGLE_CLIENT_SECRET}",
        'sshpass -p "$DEPLOY_PW" ssh deploy@host',
        "mysql -u root -p reports",
        "grep -p pattern notes.txt",
        "ls --password-file=/run/secrets/db",
    ],
)
def test_ordinary_text_named_as_what_it_is_is_left_alone(line: str) -> None:
    assert redact.text(line) == line and not redact.holds_secret(line)


def test_a_passphrase_goes_whole_and_the_sentence_after_it_stays() -> None:
    masked = redact.text("My passphrase is correct horse battery staple, and the user is ada.")
    assert masked == "My passphrase is [redacted], and the user is ada."
    masked = redact.text("the password for the staging db is Xk9mP2qL; pw: Tr0ub4dor")
    assert masked == "the password for the staging db is [redacted]; pw: [redacted]"


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        (
            "sshpass -p 'bl4ck cat' ssh deploy@build-7 make",
            "sshpass -p '[redacted]' ssh deploy@build-7 make",
        ),
        ("sshpass -p hunter22 scp report.md host:", "sshpass -p [redacted] scp report.md host:"),
        ("psql --password=Tr0ub4dor -h db", "psql --password=[redacted] -h db"),
        ("deploy --passwd Tr0ub4dor --now", "deploy --passwd [redacted] --now"),
        ("mysql -u root -pS3cretPw reports", "mysql -u root -p[redacted] reports"),
        ("mysql -h db -P3306 -u root -pS3cret4 x", "mysql -h db -P3306 -u root -p[redacted] x"),
        ("sshpass -v -p s3cret2 ssh build-7", "sshpass -v -p [redacted] ssh build-7"),
        ("sshpass -P assword: -p s3cret3 ssh h", "sshpass -P assword: -p [redacted] ssh h"),
    ],
)
def test_a_password_on_a_command_line_goes_and_the_command_stays(line: str, masked: str) -> None:
    assert redact.text(line) == masked


def test_a_digest_first_on_its_line_is_a_listing_but_two_spaces_after_a_secret_are_not() -> None:
    digest = hashlib.sha256(b"6").hexdigest()
    assert redact.text(f"{digest}  dist/a.tar.gz") == f"{digest}  dist/a.tar.gz"
    assert redact.text(f"the signing secret {digest}  (keep it)") == (
        "the signing secret [redacted]  (keep it)"
    )


def test_every_name_on_a_line_loses_its_value() -> None:
    # The library's rule for `name: value` runs to the end of the line; the second name is still
    # looked at.
    masked = redact.text("password: a1x9 and secret: b2y8, then db_pass: c3z7.")
    assert masked == "password: [redacted] and secret: [redacted], then db_pass: [redacted]."


def test_the_boundaries_around_the_data_we_send_reach_the_model_whole() -> None:
    from optimizer.tags import data

    wrapped = data("prompt", "Profile the orders")
    assert redact.text(wrapped) == wrapped


def test_a_secret_across_the_cut_of_a_long_tool_error_leaves_no_piece(tmp_path: Path) -> None:
    # The error is kept to 300 characters; cut before masking, the secret's first 14 characters
    # stayed, a piece no rule recognises.
    error = "x" * 273 + " with secret " + AWS_SECRET + " in the environment"
    session = Session(tmp_path).user("Profile the orders").skill("csv-report", tmp_path)
    session.tool("Bash", {"command": "make report"}, error, error=True)
    [use] = sessions.uses(session.write(tmp_path / "projects"), "csv-report")
    assert len(use.errors[0]) <= 300 and AWS_SECRET[:10] not in use.errors[0]


def test_deep_masks_every_string_and_keeps_the_rest() -> None:
    value = {"note": f"with secret {AWS_SECRET}", f"key {AWS_KEY_ID}": [3, None, "plain text"]}
    assert redact.deep(value) == {
        "note": "with secret [redacted]",
        "key [redacted]": [3, None, "plain text"],
    }


def _corpus_session(project: Path, skill_dir: Path, place: str, start: str) -> Session:
    """One use of the skill whose task, follow-up, tool error and answer hold every secret in one
    place's shape; the error's blocks split each secret's line from its name."""
    lines = [renditions(s)[place] for s in SECRETS if place in s.places]
    body = "\n".join(lines)
    s = Session(project, start=start)
    s.user(f"Write outputs/report.md from data/orders.csv using:\n{body}")
    s.skill("csv-report", skill_dir)
    s.tool("Read", {"file_path": str(project / "data" / "orders.csv")}, "id,amount")
    s.tool("Bash", {"command": "make upload"}, "failed", error=True)
    blocks = []
    for line in lines:
        cut = max(1, len(line) // 2)
        blocks += [{"type": "text", "text": line[:cut]}, {"type": "text", "text": line[cut:]}]
    s.lines[-1]["message"]["content"][0]["content"] = blocks
    s.tool("Write", {"file_path": str(project / "outputs" / "report.md"), "content": "# R"})
    s.say(f"Done; I used these:\n{body}")
    s.user(f"No, you should not print them; mask these next time:\n{body}")
    return s


@pytest.mark.slow
def test_no_secret_survives_in_candidates_review_evals_json_logs_or_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inprocess import Recording
    from inprocess import cli as run_cli
    from typer.testing import CliRunner

    from optimizer import logs
    from optimizer.cli import app

    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    project, projects = tmp_path / "project", tmp_path / "projects"
    (project / "data").mkdir(parents=True)
    (project / "data" / "orders.csv").write_text(
        "id,amount,note\n"
        + "".join(f"{i},10,{renditions(s)['json']}\n" for i, s in enumerate(SECRETS)),
        encoding="utf-8",
    )
    for day, place in enumerate(PLACES, start=10):
        _corpus_session(project, skill, place, f"2026-11-{day}T09:00:00.000Z").write(projects)
    monkeypatch.chdir(tmp_path)
    sim = Recording(seed=0)
    said = run_cli(
        monkeypatch,
        sim,
        "evals",
        "mine",
        str(skill),
        "--from",
        str(projects),
        "--since",
        "3650d",
        "--provider",
        "sim",
    )
    logs.reset()
    data = json.loads((skill / "evals" / "candidates.json").read_text())
    assert len(data["candidates"]) == len(PLACES) and "[redacted]" in json.dumps(data)
    review = CliRunner().invoke(app, ["evals", "review", str(skill)], input="s\n" * 10)
    assert review.exit_code == 0 and review.output.count("[c-") == len(PLACES)
    accepted = CliRunner().invoke(app, ["evals", "accept", str(skill), "--all"])
    assert accepted.exit_code == 0, accepted.output
    logs.reset()
    sinks = {
        "candidates.json, evals.json, evals/files": "".join(
            p.read_text(errors="replace") for p in (skill / "evals").rglob("*") if p.is_file()
        ),
        "the review screen": review.output,
        "what mine and accept printed": said + accepted.output,
        "the logs": "".join(p.read_text() for p in tmp_path.rglob("*.log")),
        "the requests to the model": "".join(body for _, _, body in sim.requests),
    }
    assert any("submit_eval_drafts" in body for _, _, body in sim.requests)
    assert list(tmp_path.rglob("*.log")), "the drafting call logs to runs/evals-mine/"
    evals = json.loads((skill / "evals" / "evals.json").read_text())["evals"]
    assert sum("[redacted]" in json.dumps(e) for e in evals) == len(PLACES)
    for where, text in sinks.items():
        # JSON escapes what it writes (a "/" stays, a newline becomes \n): look at both forms.
        unescaped = text.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
        assert not _left(text) and not _left(unescaped), f"{where}: {_left(unescaped)}"
