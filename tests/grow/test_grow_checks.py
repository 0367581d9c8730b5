"""What makes an expectation one a grader can fail (optimizer/grow/checks.py): precise ones are
never called vague, judgements no output fails are told apart, and a user's correction is said as
the check the first answer would have failed."""

from __future__ import annotations

import pytest

from optimizer.grow import checks


@pytest.mark.parametrize(
    "text",
    [
        "The update is at most 150 words",
        "The FAQ has exactly 5 questions",
        "The report has a `## Summary` section",
        "The newsletter names Lisbon",
        "The update mentions SSO",
        "The heading is #1f6feb",
        "The chart is green",
        "outputs/report.md is written",
        "The amounts are rounded to two decimals",
        "The report says 'no gaps'",
    ],
)
def test_a_precise_expectation_is_precise_and_checkable(text: str) -> None:
    assert checks.precise(text) and checks.checkable(text)


@pytest.mark.parametrize(
    "text",
    [
        "The result does what the task asks",
        'The result does what the task asks: "Summarise the orders"',
        "The output answers the task",
        "The answers are good",
        "The update is helpful",
        "The item is friendly",
        "The output is correct.",
    ],
)
def test_a_judgement_no_output_could_fail_is_not_checkable(text: str) -> None:
    assert not checks.checkable(text)


def test_content_named_without_a_number_is_still_checkable() -> None:
    assert checks.checkable("The update mentions the dashboard")
    assert not checks.precise("The update mentions the dashboard")


@pytest.mark.parametrize(
    ("said", "wanted"),
    [
        ("keep it under 80 words", ["The answer is at most 80 words"]),
        ("Please, no more than 3 bullets", ["The answer is at most 3 bullets"]),
        ("make it at least 200 words", ["The answer is at least 200 words"]),
        (
            "No, the amounts should be rounded to two decimals, and add a Notes section",
            ["The amounts are rounded to two decimals", "The answer has a Notes section"],
        ),
        ("use euros not dollars", ["The answer uses euros, not dollars"]),
        ("don't include the raw data", ["The answer has no raw data"]),
        ("That is wrong: the mean is missing", ["The answer has the mean"]),
        (
            "make it friendlier",
            ['The answer already has what the user asked for afterwards: "make it friendlier"'],
        ),
    ],
)
def test_a_correction_is_said_as_the_check_the_first_answer_failed(
    said: str, wanted: list[str]
) -> None:
    assert checks.from_correction(said) == wanted
    assert all(checks.checkable(c) for c in wanted)


@pytest.mark.parametrize(
    ("said", "asks"),
    [
        ("keep it under 80 words", True),
        ("make it shorter", True),
        ("Thanks, add a chart too", True),
        ("Thanks!", False),
        ("Now report on b.csv", False),
        ("great, that works", False),
        ("Write the marketing newsletter in under 300 words", False),
        ("make a newsletter for the sales team", False),
    ],
)
def test_a_follow_up_that_asks_for_a_change_is_told_apart(said: str, asks: bool) -> None:
    assert checks.asks_for_change(said) is asks
