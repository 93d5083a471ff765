"""The campaign's webhook endpoint: a receiver on loopback that records every delivery and answers 204.

A fault's deployment registers it before its jobs (job.completed and job.failed), runs the delivery process
(``voxlog deliver``, two copies: one leads, the other stands by), and at the end asks of it what a tenant
would: every terminal job's outcome delivered at least once, under one webhook-id, signed with the
endpoint's secret. The signatures are checked here by Standard Webhooks' rule itself (HMAC-SHA256 of
``id.timestamp.body`` under the ``whsec_`` secret's key), not by voxlog's signer. Duplicates (the same
delivery received again, after an attempt whose answer was lost to a fault) are allowed, and counted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from infra.processes import free_port

EVENT_TYPES: Final = ("job.completed", "job.failed")
OUTCOME_TYPES: Final = {"completed": "job.completed", "failed": "job.failed"}


@dataclass(frozen=True)
class Received:
    """One request as the endpoint got it."""

    webhook_id: str
    timestamp: str
    signatures: str
    body: bytes


@dataclass
class Tally:
    """What the endpoint got, against the outcomes it was due."""

    due: int = 0  # terminal jobs: each outcome due once
    delivered: int = 0  # of those, received with a valid signature
    requests: int = 0  # every request received
    duplicates: int = 0  # requests beyond the first of each delivery (the same webhook-id again)
    missing: list[str] = field(default_factory=list)  # "job id (type)" never received
    problems: list[str] = field(default_factory=list)  # bad signatures, an outcome under two webhook-ids


def verifies(secret: str, received: Received) -> bool:
    """Standard Webhooks: one of the space-separated ``v1,<base64>`` signatures is the HMAC-SHA256, under the
    key ``whsec_<base64>`` holds, of ``webhook-id.webhook-timestamp.body``."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{received.webhook_id}.{received.timestamp}.".encode() + received.body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    offered = [part.partition(",")[2] for part in received.signatures.split() if part.startswith("v1,")]
    return any(hmac.compare_digest(expected, signature) for signature in offered)


class Receiver:
    """A webhook endpoint on 127.0.0.1: every POST recorded, every one answered 204 (``delay_s`` late)."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.delay_s = 0.0
        self.some = threading.Event()  # set once a request has arrived
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver._lock:
                    receiver.received.append(
                        Received(
                            self.headers.get("webhook-id", ""),
                            self.headers.get("webhook-timestamp", ""),
                            self.headers.get("webhook-signature", ""),
                            body,
                        )
                    )
                receiver.some.set()
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="webhook-receiver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def tally(self, secret: str, outcomes: dict[str, str]) -> Tally:
        """What was received of ``outcomes`` (job id -> its terminal state, completed or failed)."""
        with self._lock:
            received = list(self.received)
        tally = Tally(due=len(outcomes), requests=len(received))
        ids_of: dict[tuple[str, str], set[str]] = {}
        per_id: Counter[str] = Counter()
        for request in received:
            if not verifies(secret, request):
                tally.problems.append(f"webhook {request.webhook_id}: no signature verifies with the secret")
                continue
            payload = json.loads(request.body)
            job_id = str(payload.get("data", {}).get("job_id"))
            ids_of.setdefault((job_id, str(payload.get("type"))), set()).add(request.webhook_id)
            per_id[request.webhook_id] += 1
        tally.duplicates = sum(count - 1 for count in per_id.values())
        for job_id, state in sorted(outcomes.items()):
            event_type = OUTCOME_TYPES[state]
            ids = ids_of.get((job_id, event_type), set())
            if not ids:
                tally.missing.append(f"{job_id} ({event_type})")
                continue
            tally.delivered += 1
            if len(ids) > 1:
                tally.problems.append(f"{job_id}'s {event_type} delivered under {len(ids)} webhook-ids")
        return tally
