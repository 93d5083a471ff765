"""Schemathesis over a live API, every call measured: statuses, failed checks and the API's CPU per request.

:class:`Fuzz` sends each case itself, between two readings of the API process's CPU time
(:mod:`tests.support.process_cpu`), so that a request over its :class:`CpuBudget` fails like a 5xx does:
collected with the case that caused it, and the campaign goes on (a failure found is not shrunk; the
failures are the report). Generation is derandomized and the scenarios seeded: the same schema gives the same
cases on every run (a scenario's later steps also follow the API's answers).
"""

from __future__ import annotations

import base64
import contextlib
import json
import unicodedata
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from contracts import document_part_job_id
from contracts.ssml import MAX_BREAK_MS
from tests.support.apps import wait_for_job
from tests.support.process_cpu import CpuTime, cpu_time

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
Headers = dict[str, str]
REQUEST_TIMEOUT_S = 180  # longer than any answer may take: VOXLOG_SPEECH_TIMEOUT_S (120), a parsing (30 s of CPU)


@dataclass(frozen=True)
class Credential:
    """What a case is sent with to an API that wants keys."""

    headers: Headers
    known: bool
    """A key the API knows, whatever its scopes and limits. Schemathesis' ignored_auth check then sends the case
    again without it and with a made-up one, which must be refused; a 2xx to a case sent with an unknown key
    (or none) fails the check."""

    def apply(self, case: Any) -> None:
        """The case's headers with this credential in place of any schemathesis drew for the security schemes."""
        if self is NO_CREDENTIAL:
            return
        drawn = {k: v for k, v in (case.headers or {}).items() if k.lower() not in ("authorization", "x-api-key")}
        case.headers = {**drawn, **self.headers}
        case._has_explicit_auth = self.known  # what schemathesis' own auth options set


NO_CREDENTIAL = Credential({}, known=False)


def fuzz_settings(examples: int, **more: Any) -> settings:
    """Hypothesis settings of a reproducible campaign: derandomized, no example database, nothing shrunk."""
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        **more,
    )


LEXICON_WORD: Final = "conformance"
LEXICON_PHONEMES: Final = "kənfˈɔɹməns"  # noqa: RUF001 - the stress mark is a phoneme symbol


async def known_ids(client: httpx.AsyncClient, voice: str) -> dict[str, Any]:
    """A completed job and a completed document (and a lexicon word), for the path parameters of the 200
    answers."""
    job = await client.post("/v1/jobs", json={"text": "Conformance, checked end to end.", "voice": voice})
    assert job.status_code in (200, 202), job.text  # 200: another tenant's cached result, as this one's job
    job_id = job.json()["job_id"]
    await wait_for_job(client, job_id)
    text = "# One\n\nThe first chapter.\n\n# Two\n\nThe second chapter."
    document = await client.post("/v1/documents", json={"text": text, "voice": voice})
    assert document.status_code == 202, document.text
    document_id = document.json()["document_id"]
    for part in range(document.json()["parts"]):
        await wait_for_job(client, str(document_part_job_id(uuid.UUID(document_id), part)))
    # A lexicon word of the deployment's own, so that its routes answer 200/202 for the known id too.
    entry = await client.put(f"/v1/lexicon/{LEXICON_WORD}", json={"phonemes": LEXICON_PHONEMES})
    assert entry.status_code == 202, entry.text
    # A webhook endpoint, where the deployment has webhooks on (else any id: the routes answer 404).
    hook = await client.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook", "event_types": ["job.failed"]})
    endpoint_id = hook.json()["endpoint"]["endpoint_id"] if hook.status_code == 201 else str(uuid.uuid4())
    # No delivery is made to it in these tests: the delivery routes answer 404 for the id (and 200 for the list).
    return {
        "job_id": job_id, "document_id": document_id, "index": 0, "word": LEXICON_WORD, "endpoint_id": endpoint_id,
        "delivery_id": str(uuid.uuid4()),
    }  # fmt: skip


def _ids_named(response: Any) -> set[str]:
    """The job and document ids a 2xx answer's body names."""
    kinds = response.headers.get("content-type", [])  # schemathesis' headers: lower-case names, lists of values
    if not 200 <= response.status_code < 300 or not any("json" in kind for kind in kinds):
        return set()
    try:
        body = response.json()
    except ValueError:
        return set()
    return {str(body[k]) for k in ("job_id", "document_id") if isinstance(body, dict) and k in body}


LONG_ANSWER_BREAKS: Final = 10
"""SSML's longest breaks (``contracts.ssml.MAX_BREAK_MS``, 10 s) in a long answer: 100 s of silence at least,
made with no model time, past the 2.1 M frames (87 s at 24 kHz, 44 s at 48 kHz) at which one Vorbis write
overflowed the API's ``to_thread`` stack and killed it (issue 40)."""
LONG_ANSWER_RATE: Final = 48_000
"""The rate of the long answers asked through ``POST /v1/jobs`` (the speech route's are 24 kHz, OpenAI's)."""
LONG_ANSWER_MODES: Final = ("audio", "whole", "sse", "job")
"""How a long answer is asked for: ``/v1/audio/speech`` streamed (its default), with ``"stream": false``,
with ``"stream_format": "sse"``; or ``POST /v1/jobs`` at :data:`LONG_ANSWER_RATE`, then its
``GET /v1/jobs/{id}/audio``."""


def long_answer_ssml(breaks: int, take: int = 1) -> str:
    """SSML that says a few words (``take`` among them, so that each take is a job of its own) around
    ``breaks`` breaks of ``MAX_BREAK_MS`` each."""
    pause = f'<break time="{MAX_BREAK_MS}ms"/>'
    parts = "".join(f"Part {n}.{pause}" for n in range(1, breaks + 1))
    return f"<speak>Take {take}. {parts}The end.</speak>"


@dataclass(frozen=True)
class LongAnswer:
    """One long-audio request of the campaign: ``breaks`` long breaks, answered in ``response_format``."""

    response_format: str
    mode: str
    """One of :data:`LONG_ANSWER_MODES`."""
    breaks: int
    take: int = 1
    """Which of VOXLOG_FUZZ_SCALE's rounds: its words differ, not its length."""

    @property
    def silence_s(self) -> float:
        """The answer's breaks alone: it lasts longer (its words too)."""
        return self.breaks * MAX_BREAK_MS / 1000

    @property
    def rate(self) -> int:
        return LONG_ANSWER_RATE if self.mode == "job" else 24_000

    @property
    def label(self) -> str:
        """The request's, in the report (the job's audio: :attr:`audio_label`)."""
        if self.mode == "job":
            return f"POST /v1/jobs (long: {self.response_format}, {self.rate} Hz)"
        return f"POST /v1/audio/speech (long: {self.response_format}, {self.mode})"

    @property
    def audio_label(self) -> str:
        return f"GET /v1/jobs/{{job_id}}/audio (long: {self.response_format}, {self.rate} Hz)"

    def request(self, voice: str) -> tuple[str, dict[str, Any]]:
        """The path and JSON body to POST."""
        ssml = long_answer_ssml(self.breaks, self.take)
        if self.mode == "job":
            return "/v1/jobs", {"text": ssml, "voice": voice, "format": self.response_format, "sample_rate": self.rate}
        body: dict[str, Any] = {
            "model": "tts-1",
            "input": ssml,
            "voice": voice,
            "response_format": self.response_format,
        }
        if self.mode == "whole":
            body["stream"] = False
        elif self.mode == "sse":
            body["stream_format"] = "sse"
        return "/v1/audio/speech", body


def long_answers(formats: Sequence[str], scale: int) -> list[LongAnswer]:
    """Every format in every mode (:data:`LONG_ANSWER_MODES`), in ``scale`` takes."""
    return [
        LongAnswer(fmt, mode, LONG_ANSWER_BREAKS, take)
        for take in range(1, scale + 1)
        for fmt in formats
        for mode in LONG_ANSWER_MODES
    ]


def sse_audio(body: bytes) -> tuple[bytes, str | None]:
    """The audio of a ``stream_format: sse`` answer (its ``speech.audio.delta`` events' joined) and the type of
    its last event (``speech.audio.done`` when the job completed; None when there was no event)."""
    events = [
        json.loads(line[len("data:") :].strip()) for line in body.decode().splitlines() if line.startswith("data:")
    ]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e.get("type") == "speech.audio.delta")
    return audio, (str(events[-1].get("type")) if events else None)


class _NoAnswer(Exception):
    """A scenario's request got no answer (recorded as a failure): the scenarios stop."""


@dataclass(frozen=True)
class CpuBudget:
    own_s: float
    """The API process's own CPU per request: its event loop, which every other request waits behind."""
    tree_s: float
    """The API and its offload processes (a document's parsing) together, per request."""

    def exceeded(self, spent: CpuTime) -> str | None:
        if spent.own_s > self.own_s:
            return f"the API process took {spent.own_s:.2f} s of CPU, over its budget of {self.own_s} s"
        if spent.tree_s > self.tree_s:
            return f"the API and its offload took {spent.tree_s:.2f} s of CPU, over their budget of {self.tree_s} s"
        return None


@dataclass(frozen=True)
class Call:
    pass_name: str
    label: str
    status: int | None
    """None: no answer (the connection failed)."""
    cpu: CpuTime


_GOOD: Final = {
    "lang": "en-us",
    "format": "wav",
    "response_format": "wav",
    "sample_rate": 24000,
    "speed": 1.0,
    "engine": None,
    "model": "tts-1",
    "markup": "markdown",
}
"""What a guided case's options become, where it has them."""


def _speakable(text: str) -> str:
    """``text`` without control characters (each refused), with a word to say if it had none."""
    kept = "".join(c for c in text if unicodedata.category(c) != "Cc")
    return kept if any(c.isalnum() for c in kept) else f"{kept} and words"


MODE_SWITCHES: Final = frozenset({"/v1/admin/cache-only", "/v1/admin/degraded"})


def never_switched_on(case: Any) -> None:
    """An operator's mode switch sent off, never on: cache-only mode answers every new synthesis 503 by design,
    and the checks allow no 5xx. The route is fuzzed all the same, its body and its scope."""
    if case.operation.path in MODE_SWITCHES and isinstance(case.body, dict) and case.body.get("enabled") is True:
        case.body = {**case.body, "enabled": False}


@dataclass
class Guide:
    """Every other case made likelier to get past the route's validation, so that what lies behind it is fuzzed
    too (and a 202 is what the scenarios' links start from): its text without control characters, its voice the
    one the worker announced, its other options good ones (:data:`_GOOD`), no field the route does not take. The
    document does not say that the request models refuse unknown fields (Litestar's schema drops pydantic's
    extra="forbid"), so schemathesis draws them as valid data."""

    voice: str
    fields: frozenset[str]
    """The fields the request bodies take."""
    _seen: int = 0

    def __call__(self, case: Any) -> None:
        self._seen += 1
        never_switched_on(case)
        if self._seen % 2 or not isinstance(case.body, dict):
            return
        case.body = self._request(case.body)
        if isinstance(case.body.get("requests"), list):
            case.body["requests"] = [self._request(r) if isinstance(r, dict) else r for r in case.body["requests"]]

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        known = {k: v for k, v in body.items() if k in self.fields}
        texts = {k: _speakable(v) for k, v in known.items() if k in ("text", "input") and isinstance(v, str)}
        voice = {"voice": self.voice} if "voice" in known or texts else {}
        return {**known, **{k: v for k, v in _GOOD.items() if k in known}, **texts, **voice}


@dataclass
class Fuzz:
    """One campaign's calls and failures, over any number of passes and APIs."""

    budget: CpuBudget
    guide: Callable[[Any], None] = lambda case: None
    """Applied to each schemathesis case before it is sent."""
    calls: list[Call] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    linked: int = 0
    """Scenario steps whose path named an id that an earlier step's answer had named."""
    _named: set[str] = field(default_factory=set)

    def measured(
        self, pass_name: str, label: str, api_pid: int, send: Callable[[], Any], budget: CpuBudget | None = None
    ) -> Any | None:
        """``send()``'s response, its status and CPU recorded, its CPU judged (by ``budget``, else the campaign's);
        None when it raised."""
        before = cpu_time(api_pid)
        try:
            response = send()
        except Exception as exc:  # no answer at all: the connection was reset, the server died
            self.calls.append(Call(pass_name, label, None, cpu_time(api_pid) - before))
            self.failures.append(f"[{pass_name}] {label}: no answer ({type(exc).__name__}: {exc})"[:2000])
            return None
        spent = cpu_time(api_pid) - before
        self.calls.append(Call(pass_name, label, response.status_code, spent))
        over = (budget or self.budget).exceeded(spent)
        if over is not None:
            self.failures.append(f"[{pass_name}] {label} -> {response.status_code}: {over}")
        return response

    def call(self, pass_name: str, api_pid: int, case: Any, credential: Credential, checks: Sequence[Any]) -> None:
        """Send a schemathesis case with ``credential`` (its headers as the case's own) and check its answer."""
        self.guide(case)
        credential.apply(case)
        label = case.operation.label
        response = self.measured(pass_name, label, api_pid, lambda: case.call(timeout=REQUEST_TIMEOUT_S))
        if response is None:
            return
        try:
            case.validate_response(response, checks=list(checks))
        except (Exception, BaseExceptionGroup) as exc:  # failed checks (a FailureGroup when several): collected
            self.failures.append(f"[{pass_name}] {label}: {exc}"[:2000])

    def operations(
        self,
        pass_name: str,
        api_pid: int,
        schema: Any,
        examples: int,
        *,
        known: dict[str, Any],
        owner: Credential = NO_CREDENTIAL,
        credentials: st.SearchStrategy[Credential] | None = None,
        checks: Sequence[Any] = CHECKS,
    ) -> None:
        """Every operation of ``schema``: ``examples`` positive and ``examples`` negative cases, each sent with a
        credential drawn from ``credentials``, then one with the ``known`` ids in its path (the 200 answers),
        sent with ``owner``'s, the credential they were made with."""
        drawn = credentials if credentials is not None else st.just(NO_CREDENTIAL)
        for result in schema.get_all_operations():
            operation = result.ok()
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

                @given(case=operation.as_strategy(generation_mode=mode), credential=drawn)
                @fuzz_settings(examples)
                def generated(case: Any, credential: Credential) -> None:
                    self.call(pass_name, api_pid, case, credential, checks)

                with contextlib.suppress(Unsatisfiable):  # nothing to negate: no parameter, no body, no key
                    generated()
            names = {p.name for p in operation.path_parameters}
            if names:
                case = operation.Case(path_parameters={name: known[name] for name in names})
                self.call(pass_name, api_pid, case, owner, checks)

    def stateful(
        self,
        pass_name: str,
        api_pid: int,
        schema: Any,
        scenarios: int,
        steps: int,
        credential: Credential = NO_CREDENTIAL,
    ) -> None:
        """``scenarios`` scenarios of up to ``steps`` steps that follow the links schemathesis infers from the schema:
        a 202's ids (its Location, its body's) into the GETs and the DELETE of the job or document it made."""
        fuzz = self

        class Scenarios(schema.as_state_machine()):  # type: ignore[misc]
            def call(self, case: Any, **kwargs: Any) -> Any:
                fuzz.guide(case)
                credential.apply(case)
                fuzz.linked += any(str(v) in fuzz._named for v in (case.path_parameters or {}).values())
                send = lambda: case.call(timeout=REQUEST_TIMEOUT_S, **kwargs)  # noqa: E731
                response = fuzz.measured(pass_name, case.operation.label, api_pid, send)
                if response is None:
                    raise _NoAnswer  # recorded already; the scenarios end here
                fuzz._named |= _ids_named(response)
                return response

            def validate_response(self, response: Any, case: Any, *_: Any, **__: Any) -> None:
                try:
                    case.validate_response(response, checks=CHECKS)
                except (Exception, BaseExceptionGroup) as exc:  # collected (raised, hypothesis would shrink)
                    fuzz.failures.append(f"[{pass_name}] {case.operation.label} (a scenario's step): {exc}"[:2000])

        # One hypothesis run per scenario, seeded by its number: within a run, hypothesis replays its choices and
        # refuses (FlakyStrategyDefinition) a scenario whose steps changed with the API's answers, as they do.
        Scenarios.TestCase.settings = settings(
            max_examples=1,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
            stateful_step_count=steps,
        )
        for number in range(scenarios):
            Scenarios._hypothesis_internal_use_seed = number  # what hypothesis.seed sets
            try:
                Scenarios.TestCase().runTest()
            except _NoAnswer:
                return

    def statuses(self, pass_name: str | None = None) -> Counter[str]:
        """``"<operation> <status>"`` → how many calls answered it."""
        return Counter(f"{c.label} {c.status}" for c in self.calls if pass_name in (None, c.pass_name))
