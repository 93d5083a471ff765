"""When a webhook delivery is tried again: exponential backoff with full jitter, for a bounded time.

An endpoint that answers 2xx has its delivery; anything else (an error status, no answer, a refused or
unsafe address) is tried again after a delay that doubles from :data:`FIRST_DELAY_S` up to
:data:`LONGEST_DELAY_S`, drawn uniformly below it (full jitter: endpoints that failed together do not come
back together), until the delivery is older than the retry window (:data:`RETRY_FOR`, a day);
then it is given up, recorded so. A ``Retry-After`` the endpoint sends is a floor, within the window.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

FIRST_DELAY_S: Final = 5.0
LONGEST_DELAY_S: Final = 3600.0
RETRY_FOR: Final = timedelta(days=1)  # long enough for an endpoint down over a night or a deploy to get every
# delivery (24 tries or so at the hour's cap), short enough that a gone endpoint's deliveries end


@dataclass(frozen=True)
class RetrySchedule:
    retry_for: timedelta = RETRY_FOR
    first_delay_s: float = FIRST_DELAY_S
    longest_delay_s: float = LONGEST_DELAY_S

    def next_attempt(
        self,
        first_at: datetime,
        attempts: int,
        now: datetime,
        retry_after_s: float | None = None,
        draw: Callable[[float, float], float] = random.uniform,
    ) -> datetime | None:
        """When to try again after ``attempts`` failed tries of a delivery first tried at ``first_at``; ``None``
        once the window is spent (give up)."""
        ceiling = min(self.longest_delay_s, self.first_delay_s * 2 ** max(0, attempts - 1))
        delay = max(draw(0.0, ceiling), retry_after_s or 0.0)
        at = now + timedelta(seconds=delay)
        return None if at > first_at + self.retry_for else at
