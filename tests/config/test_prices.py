"""Prices for any model name: from config.toml, OPTIMIZER_PRICES and --set, dotted names quoted or
not, 0 meaning free; an unlisted model priced as the dearest listed one with a warning, once, and a
note in the estimate."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

import pytest

from optimizer import config
from optimizer.budget.estimate import estimate
from optimizer.errors import BadInput
from optimizer.inputs.evals import load_evals
from optimizer.model import cost, make_client
from optimizer.report import spend
from optimizer.sim import Simulator
from optimizer.store import runtoml
from optimizer.store.db import Store

ROOT = Path(__file__).resolve().parents[2]
FREE = config.Price(input=0, output=0, cache_write=0, cache_read=0)


def load(*overrides: str, env: dict | None = None, path: Path | None = None) -> config.Loaded:
    return config.load(path, env=env or {}, overrides=list(overrides))


@pytest.mark.parametrize(
    "overrides",
    [
        ['prices."qwen2.5:0.5b".input=0', 'prices."qwen2.5:0.5b".output=0'],
        ["prices.qwen2.5:0.5b.input=0", "prices.qwen2.5:0.5b.output=0"],  # unquoted keeps its dots
        ['prices."qwen2.5:0.5b"=0'],  # 0 means free
        ["prices.qwen2.5:0.5b=0"],
    ],
)
def test_a_dotted_model_name_gets_a_price_from_the_command_line(overrides) -> None:
    s = load(*overrides).settings
    assert s.price("qwen2.5:0.5b") == FREE
    assert cost.unpriced(s, "qwen2.5:0.5b") is None
    assert s.prices["claude-opus-4-6"] == config.DEFAULT_PRICES["claude-opus-4-6"]


def test_cache_prices_default_to_the_input_price_and_one_field_merges() -> None:
    s = load(
        "prices.local-model.input=2",
        "prices.local-model.output=4",
        "prices.claude-opus-4-6.input=1",
    ).settings
    assert s.price("local-model") == config.Price(input=2, output=4, cache_write=2, cache_read=2)
    opus = s.price("claude-opus-4-6")
    assert (opus.input, opus.output) == (1.0, config.DEFAULT_PRICES["claude-opus-4-6"].output)


def test_environment_and_config_file_prices(tmp_path: Path) -> None:
    env = {"OPTIMIZER_PRICES": '{"qwen2.5:0.5b": 0, "my-model": {"input": 1, "output": 3}}'}
    s = load(env=env).settings
    assert s.price("qwen2.5:0.5b") == FREE and s.price("my-model").output == 3
    toml = tmp_path / "config.toml"
    toml.write_text(
        '[prices]\n"qwen2.5:0.5b" = 0\n\n[prices."other.model"]\ninput = 1\noutput = 2\n'
    )
    s = load(path=toml).settings
    assert s.price("qwen2.5:0.5b") == FREE and s.price("other.model").cache_read == 1
    # --set sits above the environment.
    assert load("prices.my-model.output=5", env=env).settings.price("my-model").output == 5


def test_run_toml_keeps_dotted_model_prices_for_a_resume() -> None:
    loaded = load('prices."qwen2.5:0.5b"=0', "prices.my.model.input=1", "prices.my.model.output=2")
    again = config.load(
        base=tomllib.loads(runtoml.to_toml(loaded.settings, loaded.sources)), env={}
    )
    assert again.settings.prices == loaded.settings.prices


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"overrides": ["prices.new-model.input=0"]},
            "--set prices.new-model.input: prices.new-model has no output price; set it too",
        ),
        (
            {"overrides": ['prices."qwen2.5:0.5b".input=0']},
            'prices."qwen2.5:0.5b" has no output price; set it too (e.g. --set '
            '\'prices."qwen2.5:0.5b".output=0\'), or prices."qwen2.5:0.5b" = 0 for a free model',
        ),
        ({"overrides": ["prices.new-model=3"]}, "is not a price; give its fields"),
        (
            {"overrides": ["prices.new-model.input=cheap", "prices.new-model.output=0"]},
            "prices.new-model.input input should be a valid number",
        ),
        ({"overrides": ['prices."m".inptu=0']}, "expected prices.<model>.<field>"),
        (
            {"env": {"OPTIMIZER_PRICES": "{not json"}},
            "environment variable OPTIMIZER_PRICES: expected",
        ),
        ({"env": {"OPTIMIZER_PRICES_QWEN_INPUT": "0"}}, "OPTIMIZER_PRICES set to a JSON object"),
    ],
)
def test_bad_prices_are_one_sentence_naming_the_key_and_the_fix(kwargs, expected) -> None:
    kwargs.setdefault("env", {})
    with pytest.raises(BadInput) as info:
        config.load(**kwargs)
    assert len(info.value.problems) == 1
    assert expected in info.value.problems[0]


def test_bad_price_on_the_command_line_exits_2_with_nothing_written(cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = cli(
        "run",
        ROOT / "tests" / "fixtures" / "csv-report",
        "--run-dir",
        out,
        "--set",
        "prices.qwen2.5:0.5b.input=0",
    )
    assert result.exit_code == 2
    assert "has no output price" in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_an_unlisted_model_is_priced_as_the_dearest_with_one_warning(tmp_path, log_capture) -> None:
    settings = config.Settings.model_validate(
        {"llm": {"provider": "sim"}, "models": {"executor": "qwen2.5:0.5b"}}
    )
    assert cost.unpriced(settings, "qwen2.5:0.5b") == "claude-opus-4-1"
    assert cost.unpriced(settings, "claude-sonnet-4-6-20260101") is None  # a dated name
    store = Store(tmp_path / "state.db")

    async def calls() -> None:
        client = make_client(settings, store, simulator=Simulator(local=True))
        for text in ("one", "two"):
            await client.message(
                "executor", messages=[{"role": "user", "content": text}], max_tokens=64
            )
        await client.aclose()

    cost._warned.discard("qwen2.5:0.5b")
    asyncio.run(calls())
    warned = [e for e in log_capture if e["event"] == "prices.unknown_model"]
    assert len(warned) == 1 and warned[0]["priced_as"] == "claude-opus-4-1"
    assert 'set prices."qwen2.5:0.5b" to correct it' in warned[0]["hint"]
    assert all(row["cost_usd"] > 0 for row in store.query("select cost_usd from calls"))
    store.close()


def test_a_free_model_spends_nothing_and_the_estimate_says_which_are_unpriced(tmp_path) -> None:
    free = load(
        "llm.provider=sim", "models.executor=qwen2.5:0.5b", "prices.qwen2.5:0.5b=0"
    ).settings
    store = Store(tmp_path / "state.db")

    async def one() -> None:
        client = make_client(free, store, simulator=Simulator(local=True))
        await client.message(
            "executor", messages=[{"role": "user", "content": "hi"}], max_tokens=64
        )
        await client.aclose()

    asyncio.run(one())
    assert [row["cost_usd"] for row in store.query("select cost_usd from calls")] == [0.0]
    store.close()

    example = ROOT / "tests" / "fixtures" / "csv-report"
    priced = estimate(free, load_evals(example), example)
    assert priced["unpriced"] == {}
    unlisted = free.model_copy(update={"prices": dict(config.DEFAULT_PRICES)})
    est = estimate(unlisted, load_evals(example), example)
    assert est["unpriced"] == {"qwen2.5:0.5b": "claude-opus-4-1"}
    assert (
        'qwen2.5:0.5b has no price: priced as claude-opus-4-1; set prices."qwen2.5:0.5b" '
        "to correct it"
    ) in spend.line(est)
