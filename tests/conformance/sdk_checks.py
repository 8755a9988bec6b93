"""The checks' common parts for the SDK conformance scripts (`sdk_client.py` and
`sdk_background.py`): a check that prints `ok` or raises, a tool result's text, a sleep."""

from __future__ import annotations

from typing import Any


class CheckFailed(Exception):
    """A check that did not hold; its message says what was expected and what came."""


def check(era: str, what: str, condition: bool, detail: Any = "") -> None:
    if not condition:
        raise CheckFailed(f"{what}: {detail}" if detail != "" else what)
    print(f"ok   [{era}] {what}", flush=True)


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") or "" for block in result.content)


async def anyio_sleep(seconds: float) -> None:
    import anyio

    await anyio.sleep(seconds)
