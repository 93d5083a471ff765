"""`python -m tests.support.stack_cli up [--brokers N]|down`: the shared test stack, for infra/test.sh.

``up`` starts the stack the test sessions reuse (Kafka and PostgreSQL, from
``tests.support.stack``; one broker, or ``--brokers 3``, else as
VOXLOG_TEST_STACK_BROKERS says) unless it runs already, and prints ``started`` or
``running``; ``down`` stops it. infra/test.sh starts it once before the two
pytest sessions it runs side by side (each would otherwise start its own on
the same ports) and stops it at the end when it started it.
"""

from __future__ import annotations

import asyncio
import sys

from tests.support.stack import build_test_stack, running_test_stack, stack_home_for_tests


async def up(brokers: int | None = None) -> str:
    _, started = await running_test_stack(brokers)
    return "started" if started else "running"


def main(argv: list[str]) -> int:
    if argv == ["up"] or (argv[:2] == ["up", "--brokers"] and len(argv) == 3 and argv[2] in ("1", "3")):
        print(asyncio.run(up(int(argv[2]) if len(argv) == 3 else None)))
        return 0
    if argv == ["down"]:
        build_test_stack(stack_home_for_tests(), probe_running=True).down()
        return 0
    print("usage: python -m tests.support.stack_cli up [--brokers 1|3] | down", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
