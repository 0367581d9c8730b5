"""Input dollars of one agent run against its turns, with the conversation marked for prompt caching
(each turn writes itself and reads the turns before it) and with the stable prefixes alone (the
tools and the system prompt, as before), on the simulator, which bills caching as the API does:
minimum cacheable lengths per model, a lookback of 20 blocks from a breakpoint, a write at 1.25
times input and a read at the model's read price.

The conversation is synthetic and the same for both: a system prompt and tools of about 2,500
tokens, then turns of one tool call and a tool result of about 500 tokens each, as the built-in
agent's runs have. Each request is marked by the client's own with_cache_control, sent to the
simulator through the SDK, and priced by the catalog's price.

    .venv/bin/python bench/caching.py [--model claude-sonnet-5-5] [--turns 2,4,8,16,32] [--seeds 10]

Whether a written prefix is still warm is drawn per request (3 in 4), so each figure is the mean
over --seeds simulators.

Last line: `caching <model>: <turns> turns $<with> vs $<without> input, <ratio>x`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
import httpx2  # noqa: E402

from optimizer import catalog  # noqa: E402
from optimizer.model.cost import call_cost  # noqa: E402
from optimizer.model.request import canonical_json, with_cache_control  # noqa: E402
from optimizer.sim import Simulator  # noqa: E402

SYSTEM = "You are an agent that works in a sandbox. " * 170  # about 1,800 tokens
TOOLS = [
    {
        "name": name,
        "description": f"The {name} tool. " * 60,
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for name in ("bash", "read_file", "write_file")
]
POLICIES = {
    # The role decides the marks: the executor's turns are a conversation; a grader's are not.
    "conversation": "executor",
    "stable prefixes": "grader",
}


def turns_of(count: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": "Profile data.csv into outputs/report.md."}]
    for number in range(count - 1):
        call = {"type": "tool_use", "id": f"toolu_{number}", "name": "bash", "input": {"n": number}}
        result = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{number}",
            "content": f"row {number}: " + "value, " * 280,  # about 500 tokens
        }
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return messages


async def input_dollars(
    client: anthropic.AsyncAnthropic, model: str, turns: int, role: str
) -> float:
    """The input side of a run of `turns` turns: every turn's request, marked as `role` marks it."""
    price = catalog.facts(model).price
    total = 0.0
    conversation = turns_of(turns)
    for turn in range(1, turns + 1):
        messages = conversation[: 2 * turn - 1]
        request = {
            "model": model,
            "max_tokens": 1024,
            "system": [{"type": "text", "text": SYSTEM}],
            "tools": TOOLS,
            "messages": messages,
        }
        marked = with_cache_control(request, canonical_json(request), role=role, model=model)
        reply = await client.messages.create(
            **marked, extra_headers={"x-optimizer-role": "executor", "x-optimizer-sample": "0"}
        )
        usage = reply.usage
        total += call_cost(price, usage) - (usage.output_tokens or 0) * price.output / 1_000_000
    return total


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=catalog.DEFAULT_MODELS["executor"])
    parser.add_argument("--turns", default="2,4,8,16,32")
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    counts = [int(n) for n in args.turns.split(",")]
    clients = [
        anthropic.AsyncAnthropic(
            api_key="sim",
            base_url="http://sim.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=Simulator(seed=seed).transport()),
        )
        for seed in range(args.seeds)
    ]
    print(f"input dollars of one run, {args.model}: simulated billing, mean of {args.seeds} seeds")
    print(f"{'turns':>6} {'conversation':>13} {'stable prefixes':>16} {'ratio':>6}")
    rows = []
    for turns in counts:
        cost = {
            name: sum([await input_dollars(c, args.model, turns, role) for c in clients])
            / len(clients)
            for name, role in POLICIES.items()
        }
        ratio = cost["stable prefixes"] / cost["conversation"]
        rows.append((turns, cost, ratio))
        print(
            f"{turns:>6} {cost['conversation']:>13.4f} {cost['stable prefixes']:>16.4f} {ratio:>5.2f}x"
        )
    turns, cost, ratio = rows[-1]
    print(
        f"caching {args.model}: {turns} turns ${cost['conversation']:.4f} vs "
        f"${cost['stable prefixes']:.4f} input, {ratio:.2f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
