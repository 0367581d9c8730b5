"""Settings precedence, provenance, and the one-sentence errors for unknown keys and bad types."""

import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from optimizer import config
from optimizer.errors import BadInput
from optimizer.store import runtoml

ROOT = Path(__file__).resolve().parents[2]


def test_repository_config_toml_documents_every_default():
    loaded = config.load(ROOT / "config.toml", env={})
    assert loaded.settings == config.Settings()
    text = (ROOT / "config.toml").read_text()
    for dotted in config.known_keys():
        section, key = dotted.split(".")
        # llm.provider is documented but left unset: an unchosen provider is never the simulator;
        # so is every setting whose default is unset (None): TOML has no null
        unset = dotted == "llm.provider" or getattr(getattr(loaded.settings, section), key) is None
        line = f"\n# {key} = " if unset else f"\n{key} = "
        assert f"[{section}]" in text and line in text, f"{dotted} is not documented"
    # An installed package reads no config.toml unless one is in the working directory: its
    # built-in defaults must be exactly this file's values (the README says so), prices included.
    prices = tomllib.loads(text)["prices"]
    assert prices == {name: p.model_dump() for name, p in config.DEFAULT_PRICES.items()}


def test_precedence_defaults_toml_evalconfig_env_set_flags(tmp_path):
    toml = tmp_path / "config.toml"
    toml.write_text("[evals]\nruns_per_eval = 5\n[loop]\nseed = 1\n[llm]\nmax_concurrency = 2\n")
    loaded = config.load(
        toml,
        eval_config={"runs_per_eval": 4, "judge_model": "judge-x", "unknown_extra": 1},
        env={"OPTIMIZER_LOOP_SEED": "7", "OPTIMIZER_LLM_MAX_CONCURRENCY": "3", "HOME": "/x"},
        overrides=["llm.max_concurrency=9"],
        flags={"loop.max_iterations": 11, "budget.usd": None},
    )
    s = loaded.settings
    assert (
        s.evals.runs_per_eval == 4
        and loaded.source("evals.runs_per_eval") == "evals.json eval_config"
    )
    assert s.models.grader == "judge-x"
    assert s.loop.seed == 7 and loaded.source("loop.seed") == "env OPTIMIZER_LOOP_SEED"
    assert (
        s.llm.max_concurrency == 9
        and loaded.source("llm.max_concurrency") == "--set llm.max_concurrency"
    )
    assert (
        s.loop.max_iterations == 11 and loaded.source("loop.max_iterations") == "command-line flag"
    )
    assert s.budget.usd == 20.0 and loaded.source("budget.usd") == "default"


def test_settings_are_frozen():
    s = config.Settings()
    with pytest.raises(ValidationError):
        s.loop.seed = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"overrides": ["loop.sed=1"]}, "did you mean 'loop.seed'"),
        ({"overrides": ["loop.seed=abc"]}, "'loop.seed' must be int"),
        ({"overrides": ["llm.provider=openai"]}, "one of 'sim', 'anthropic'"),
        ({"overrides": ["noequals"]}, "expected section.key=value"),
        ({"env": {"OPTIMIZER_LOOP_SEEDS": "1"}}, "did you mean 'loop.seed'"),
        ({"overrides": ["evals.structural_gate=maybe"]}, "'evals.structural_gate' must be bool"),
    ],
)
def test_bad_settings_name_the_key_and_the_fix(kwargs, expected):
    kwargs.setdefault("env", {})
    with pytest.raises(BadInput) as info:
        config.load(**kwargs)
    assert expected in str(info.value)
    assert len(info.value.problems) == 1


def test_bad_toml_file(tmp_path):
    bad = tmp_path / "config.toml"
    bad.write_text("[loop\nseed = 1\n")
    with pytest.raises(BadInput, match="not valid TOML"):
        config.load(bad, env={})
    bad.write_text("[loop]\nsead = 1\n")
    with pytest.raises(BadInput, match="did you mean 'loop.seed'"):
        config.load(bad, env={})


def test_run_toml_round_trip_keeps_settings_and_sources():
    loaded = config.load(env={}, overrides=["loop.seed=5", "sim.fault_rate=0.2"])
    text = runtoml.to_toml(loaded.settings, loaded.sources)
    assert "seed = 5  # --set loop.seed" in text
    import tomllib

    again = config.load(base=tomllib.loads(text), env={})
    assert again.settings == loaded.settings


def test_unknown_model_is_priced_as_the_most_expensive():
    s = config.Settings()
    assert s.price("some-new-model") == s.prices["claude-opus-4-1"]
    assert s.price("claude-sonnet-4-6-20260101") == s.prices["claude-sonnet-4-6"]


def test_proposals_per_iteration_stays_below_the_sample_packing_limit(tmp_path):
    """A proposal's ledger sample is iteration·100 + index: 100 proposals would make iteration 1's
    last one ask iteration 2's first question."""
    from optimizer.search.target import proposal_sample

    with pytest.raises(BadInput, match="proposals_per_iteration"):
        config.load(None, overrides=["loop.proposals_per_iteration=100"])
    samples = {proposal_sample(n, k) for n in range(1, 30) for k in range(99)}
    assert len(samples) == 29 * 99


def test_simulated_edit_rates_must_share_one_proposal():
    with pytest.raises(
        BadInput, match="sim.proposal_quality \\+ sim.overfit_rate \\+ sim.harmful_rate is 1.2"
    ):
        config.load(
            env={},
            overrides=[
                "sim.proposal_quality=0.95",
                "sim.overfit_rate=0.15",
                "sim.harmful_rate=0.1",
            ],
        )
    loaded = config.load(env={}, overrides=["sim.proposal_quality=0.75"])
    assert (
        loaded.settings.sim.proposal_quality
        + loaded.settings.sim.overfit_rate
        + loaded.settings.sim.harmful_rate
        == pytest.approx(1.0)
    )


def test_a_retired_stop_setting_resumes_from_run_toml_and_is_named_elsewhere(tmp_path):
    base = {"loop": {"min_step": 0.02, "min_proposals_without_step": 4, "max_iterations": 2}}
    assert config.load(None, env={}, base=base).settings.loop.max_iterations == 2
    with pytest.raises(BadInput, match=r"'loop.min_step' is retired .* set loop.stop_window"):
        config.load(None, env={}, overrides=["loop.min_step=0.02"])


def test_a_renamed_key_is_read_as_its_new_name_wherever_it_is_set(tmp_path):
    """loop.parent_selection became loop.parent ("selection" is the promotion rule's word): a
    config.toml, a run.toml, an environment variable or a --set written before still loads."""
    toml = tmp_path / "config.toml"
    toml.write_text('[loop]\nparent_selection = "pareto"\n', encoding="utf-8")
    ways = [
        config.load(toml, env={}),
        config.load(None, env={}, base={"loop": {"parent_selection": "pareto"}}),
        config.load(None, env={"OPTIMIZER_LOOP_PARENT_SELECTION": "pareto"}),
        config.load(None, env={}, overrides=["loop.parent_selection=pareto"]),
    ]
    assert [w.settings.loop.parent for w in ways] == ["pareto"] * 4
    assert ways[3].source("loop.parent") == "--set loop.parent_selection"
    assert config.Settings().loop.parent == "best"
    with pytest.raises(BadInput, match="loop.parent"):
        config.load(None, env={}, overrides=["loop.parent_selection=worst"])


def test_an_iteration_limit_is_unset_by_default_and_can_be_unset_again():
    assert config.Settings().loop.max_iterations is None
    loaded = config.load(None, env={}, overrides=["loop.max_iterations=none"])
    assert loaded.settings.loop.max_iterations is None
