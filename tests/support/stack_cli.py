"""`python -m tests.support.stack_cli up|down`: the shared test stack, for infra/test.sh.

``up`` starts the stack the test sessions reuse (Kafka and PostgreSQL, from
``tests.support.stack``) unless it runs already, and prints ``started`` or
``running``; ``down`` stops it. infra/test.sh starts it once before the two
pytest sessions it runs side by side (each would otherwise start its own on
the same ports) and stops it at the end when it started it.
"""

from __future__ import annotations

import asyncio
import sys

from tests.support.stack import build_test_stack, running_test_stack, stack_home_for_tests


async def up() -> str:
    _, started = await running_test_stack()
    return "started" if started else "running"


def main(argv: list[str]) -> int:
    if argv == ["up"]:
        print(asyncio.run(up()))
        return 0
    if argv == ["down"]:
        build_test_stack(stack_home_for_tests(), probe_running=True).down()
        return 0
    print("usage: python -m tests.support.stack_cli up|down", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
