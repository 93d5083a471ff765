"""Prometheus metrics of voxlog's processes, and the port that serves them (/metrics, and /healthz and
/readyz for the probes of the processes that serve no HTTP of their own).

Counters only grow, so a scraper (or a benchmark) takes two readings and
divides the differences by the time between them: synthesis seconds over wall
seconds is the engine's busy fraction, audio seconds over wall seconds its
output rate.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import Counter, Gauge, Histogram, make_wsgi_app

from foundation.readiness import readiness

SYNTHESIS_SECONDS = Counter(
    "voxlog_synthesis_seconds", "Seconds the engine spent rendering segments (its busy time).", ["engine"]
)
AUDIO_SECONDS = Counter("voxlog_audio_seconds", "Seconds of audio the engine rendered.", ["engine"])
SEGMENTS = Counter("voxlog_segments_rendered", "Segments the engine rendered (one model call each).", ["engine"])
SEGMENTS_REUSED = Counter(
    "voxlog_segments_reused", "Segments whose audio an identical earlier segment gave (no model call).", ["engine"]
)

SWEEPER_LEADER = Gauge("voxlog_sweeper_leader", "1 while this sweeper holds the lock that lets it act, else 0.")
SWEEPER_RELEASES = Counter("voxlog_sweeper_releases", "Stale claims the sweeper released, by reason.", ["reason"])
SWEEPER_BLOBS_DELETED = Counter(
    "voxlog_sweeper_blobs_deleted", "Blobs the sweeper deleted: released attempts', and those nothing keeps any more."
)
CACHE_EVICTIONS = Counter(
    "voxlog_cache_evictions", "Results the sweeper evicted from the result cache, by reason.", ["reason"]
)
BLOB_STORE_BYTES = Gauge("voxlog_blob_store_bytes", "Bytes the blob store holds after the sweeper's last cache round.")
BLOB_STORE_OVER_CAP = Gauge(
    "voxlog_blob_store_over_cap_bytes",
    "Bytes held beyond VOXLOG_CACHE_MAX_BYTES because jobs within their retention or attempts in flight keep them.",
)
SWEEPER_SWEEPS = Counter("voxlog_sweeper_sweeps", "Sweeps the leading sweeper made (one look at every live claim).")

# What the log says happened to jobs, counted by the projector once each batch is committed.
JOB_EVENTS = Counter(
    "voxlog_job_events",
    "Job events the projector read, by type and outcome (applied, fenced, duplicate).",
    ["type", "outcome"],
)
JOBS_COMPLETED = Counter("voxlog_jobs_completed", "Jobs completed, by where their audio came from.", ["source"])
JOBS_FAILED = Counter("voxlog_jobs_failed", "Jobs failed, by reason code.", ["reason"])
JOB_RELEASES = Counter(
    "voxlog_job_releases", "Attempts released for another, by reason (transient: a retry).", ["reason"]
)
_PHASE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
JOB_PHASE_SECONDS = Histogram(
    "voxlog_job_phase_seconds",
    "Time a job spent in a phase: queued (submitted to claimed) and first_segment (claimed to first audio), seen by"
    " the worker; visible (completed to projected), seen by the projector.",
    ["phase"],
    buckets=_PHASE_BUCKETS,
)
DEAD_LETTERS = Counter(
    "voxlog_dead_letters", "Records sent to the dead-letter topic, by the service that refused them.", ["service"]
)
PROJECTOR_BATCH_RECORDS = Histogram(
    "voxlog_projector_batch_records",
    "Records the projector applied in one transaction.",
    buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000),
)
PROJECTOR_BATCH_SECONDS = Histogram(
    "voxlog_projector_batch_seconds", "Time the projector took to apply one batch.", buckets=_PHASE_BUCKETS
)
PROJECTOR_FENCED = Counter(
    "voxlog_projector_batches_fenced_off",
    "Batches refused because a newer projector had taken over one of their partitions (projections.shards).",
)
SUBMISSIONS = Counter(
    "voxlog_submissions",
    "Submissions the API accepted, by how: queued (a new job on the log), cached (answered from a live result"
    " without a job) or known (an Idempotency-Key retry naming its first job).",
    ["answer"],
)
JOBS_PLACED = Counter(
    "voxlog_jobs_placed",
    "New jobs the API placed: in the least loaded partition (balanced), where it placed the fingerprint before"
    " while PostgreSQL is down (remembered), or by their key's hash (key).",
    ["how"],
)
LIMITED = Counter(
    "voxlog_limited",
    "Requests the API refused over a client's limit (429): rate (a key's requests per second), live_jobs, chars_day,"
    " chars_month, audio_day or audio_month.",
    ["limit"],
)
LIMITS_UNJUDGED = Counter(
    "voxlog_limits_unjudged",
    "Requests taken without their limits judged, because PostgreSQL could not be read: rate or quotas.",
    ["limit"],
)
SUBMISSIONS_REFUSED = Counter(
    "voxlog_submissions_refused",
    "Submissions the API refused for backpressure: backlog (429, over VOXLOG_MAX_BACKLOG_S) or cache_only (503).",
    ["reason"],
)
SUBMISSIONS_DEGRADED = Counter(
    "voxlog_submissions_degraded",
    "Requests the API took at the degraded settings (a faster speed, a lower sample rate) while degraded mode was"
    " on, rather than at the quality asked for.",
)
BACKLOG_SECONDS = Gauge(
    "voxlog_backlog_seconds", "Seconds of the fleet's synthesis work ahead, as the API last read it (-1: unknown)."
)
WORKERS = Gauge(
    "voxlog_workers",
    "Workers that announced themselves and were heard from within the last 15 s, by engine and model"
    " version, as the API last read the projection's nodes.",
    ["engine", "model_version"],
)
WORKER_QUEUE_JOBS = Gauge(
    "voxlog_worker_queue_jobs",
    "Jobs waiting on each live worker (read from its partitions, not claimed yet), by tenant and priority, as the"
    " worker's last heartbeat counted them and the API last read the projection's node_heartbeats.",
    ["worker", "tenant", "priority"],
)
ENGINE_QUEUE_DEPTH = Gauge("voxlog_engine_queue_depth", "Synthesis calls waiting for the engine (the FIFO).")
FORWARD_LIMIT = Gauge(
    "voxlog_worker_forward_limit",
    "What one forward carries at most (segments; padded_ids, 0: unbounded) and the claims the worker holds,"
    " as set or measured at start-up.",
    ["limit"],
)
REAL_TIME_FACTOR = Histogram(
    "voxlog_real_time_factor",
    "Engine seconds per second of audio, per segment (below 1: faster than real time).",
    ["engine"],
    buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 5),
)

_GROUP = ["group"]
CONSUMER_LAG_RECORDS = Gauge(
    "voxlog_consumer_lag_records", "Records of the jobs topic a consumer has not consumed.", ["group", "partition"]
)
CONSUMER_LAG_SECONDS = Gauge(
    "voxlog_consumer_lag_seconds",
    "Age of the oldest record of the jobs topic a consumer has not consumed (0 without lag).",
    ["group", "partition"],
)
CONSUMER_GROUP_LAG_RECORDS = Gauge("voxlog_consumer_group_lag_records", "A consumer's lag over its partitions.", _GROUP)
CONSUMER_GROUP_LAG_SECONDS = Gauge(
    "voxlog_consumer_group_lag_seconds", "Age of the oldest record a consumer has not consumed.", _GROUP
)
CONSUMER_GROUP_DRAIN_SECONDS = Gauge(
    "voxlog_consumer_group_drain_seconds",
    "Time a consumer needs to consume its lag at its recent rate (NaN: never).",
    _GROUP,
)
CONSUMER_GROUP_STATUS = Gauge(
    "voxlog_consumer_group_status",
    "1 for the consumer's status (OK, WARN, STALL, STOP), 0 for the others.",
    ["group", "status"],
)


def serve_metrics(host: str, port: int) -> None:
    """Serve /metrics, /healthz and /readyz (:mod:`foundation.readiness`) from a daemon thread; ``port`` 0
    means none is served. prometheus_client's own server answers every path with the metrics, so a probe
    of /readyz there would always pass: this one routes."""
    if not port:
        return
    family, *_, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = family

    server = make_server(str(address[0]), port, _probes(make_wsgi_app()), Server, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log: Prometheus and the probes ask every few seconds."""


_App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _probes(metrics: _App) -> _App:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path not in ("/healthz", "/readyz"):
            return metrics(environ, start_response)
        ready, body = readiness() if path == "/readyz" else (True, '{"status": "ok"}')
        start_response("200 OK" if ready else "503 Service Unavailable", [("Content-Type", "application/json")])
        return [body.encode()]

    return app


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+(?P<value>\S+)$")


def parse_totals(exposition: str) -> dict[str, float]:
    """Each metric's value summed over its labels, from Prometheus's text format."""
    totals: dict[str, float] = {}
    for line in exposition.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is not None:
            totals[match["name"]] = totals.get(match["name"], 0.0) + float(match["value"])
    return totals


STREAMS_STALLED = Counter(
    "voxlog_streams_stalled",
    "Streamed answers closed because their client took no chunk within 30 s, by route.",
    ["route"],
)
