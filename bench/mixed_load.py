"""Scenarios (h) head-of-line blocking and (i) batch submission.

(h) Long documents are submitted first, then short requests, to a few workers
of a benchmark engine whose time grows with the text (``ms_per_char``): how
long do the short requests wait behind the documents? voxlog runs it twice:
each document as one job (what a job table does), and through
``POST /v1/documents`` (``voxlog_documents``), which splits it into
paragraph parts at batch priority, as a voxlog user submits a long text. (i) One
``POST /v1/batches`` of many requests with the zero-time engine: how fast do
they all become completed and visible? The baseline has no batch endpoint;
its figure is the same requests submitted one by one by 32 clients.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from bench.cpu import per_job_ms
from bench.errors import BenchError
from bench.measure import Client, Submission, summarize
from bench.scenarios import BENCH_ENGINE, DONE_WITHIN_S, SYSTEMS, Context, _backlog, _voice, _wall, backlog_figures
from contracts import document_part_job_id


def long_documents(ctx: Context, count: int, chars: int, tag: str, joiner: str = " ") -> list[str]:
    """``count`` distinct texts of about ``chars`` characters, made of the corpus's paragraphs.

    With a ``joiner`` other than a space (a blank line: paragraphs for POST /v1/documents) each paragraph
    is numbered, so that no two parts are the same text: the corpus has few paragraphs, and parts that
    repeat would be synthesized once, which is not what this scenario measures."""
    docs = []
    for i in range(count):
        parts, size, j = [f"Document {tag} {i}."], 0, i
        while size < chars - 400:
            paragraph = ctx.paragraphs[j % len(ctx.paragraphs)]
            if joiner != " ":
                paragraph = f"Paragraph {j} of document {tag} {i}. {paragraph}"
            if size + len(paragraph) + 1 > chars - 40:
                break
            parts.append(paragraph)
            size += len(paragraph) + 1
            j += 1
        docs.append(joiner.join(parts))
    return docs


async def head_of_line(ctx: Context) -> dict[str, Any]:
    """(h) short requests submitted just after long documents, on a few workers."""
    p = ctx.profile
    out: dict[str, Any] = {
        "workers": p.hol_workers,
        "documents": p.hol_documents,
        "document_chars": p.hol_document_chars,
        "short_requests": p.hol_short,
        "ms_per_char": p.hol_ms_per_char,
    }
    for system in SYSTEMS:
        async with ctx.deploy(system, BENCH_ENGINE, ms_per_char=p.hol_ms_per_char) as d:
            await d.scale_to(p.hol_workers)
            async with Client(d, BENCH_ENGINE, await _voice(d), concurrency=8) as c:
                ctx.say(f"(h) {system}: {p.hol_documents} documents, then {p.hol_short} short requests")
                documents = await c.submit_all(long_documents(ctx, p.hol_documents, p.hol_document_chars, d.tag))
                shorts: list[Submission] = []
                for text in ctx.texts(f"{d.tag}hol", p.hol_short):
                    shorts.append(await c.submit(text))
                    await asyncio.sleep(p.hol_short_gap_s)  # an interactive trickle, not a burst
                await c.wait_done([s.job_id for s in [*documents, *shorts]], DONE_WITHIN_S)
                short_timings = await c.timings(shorts)
                document_timings = await c.timings(documents)
                out[system] = {
                    "short_latency": summarize([t.visible - t.submitted for t in short_timings]),
                    "document_latency": summarize([t.visible - t.submitted for t in document_timings]),
                    "wall_s": _wall([*short_timings, *document_timings]),
                }
                latency = out[system]["short_latency"]
                ctx.say(f"    short requests: p50 {latency['median_ms']:.0f} ms, p99 {latency['p99_ms']:.0f} ms")
    async with ctx.deploy("voxlog", BENCH_ENGINE, ms_per_char=p.hol_ms_per_char) as d:
        await d.scale_to(p.hol_workers)
        async with Client(d, BENCH_ENGINE, await _voice(d), concurrency=8) as c:
            ctx.say(f"(h) voxlog: {p.hol_documents} documents through POST /v1/documents, then the short requests")
            texts = long_documents(ctx, p.hol_documents, p.hol_document_chars, d.tag, joiner="\n\n")
            parts = [await _document(c, text) for text in texts]
            shorts = []
            for text in ctx.texts(f"{d.tag}hol", p.hol_short):
                shorts.append(await c.submit(text))
                await asyncio.sleep(p.hol_short_gap_s)
            await c.wait_done([s.job_id for s in [*shorts, *(part for doc in parts for part in doc)]], DONE_WITHIN_S)
            short_timings = await c.timings(shorts)
            ends = [max(t.visible for t in await c.timings(doc)) - doc[0].submitted for doc in parts]
            out["voxlog_documents"] = {
                "short_latency": summarize([t.visible - t.submitted for t in short_timings]),
                "document_latency": summarize(ends),
                "parts": sum(len(doc) for doc in parts),
                "wall_s": _wall(short_timings),
            }
            latency = out["voxlog_documents"]["short_latency"]
            ctx.say(f"    short requests: p50 {latency['median_ms']:.0f} ms, p99 {latency['p99_ms']:.0f} ms")
    return out


async def _document(c: Client, text: str) -> list[Submission]:
    """Submit ``text`` through POST /v1/documents; its parts, as submissions of their (derived) job ids."""
    submitted = time.time()
    body = {**c.body(text), "markup": "plain"}
    response = await c.http.post("/v1/documents", json=body)
    accepted = time.time()
    if response.status_code != 202:
        raise BenchError(f"voxlog refused a document: {response.status_code} {response.text[:500]}")
    document_id = uuid.UUID(response.json()["document_id"])
    return [
        Submission(text, str(document_part_job_id(document_id, i)), submitted, accepted)
        for i in range(response.json()["parts"])
    ]


async def batch_submission(ctx: Context) -> dict[str, Any]:
    """(i) one POST /v1/batches with the zero-time engine, against the same requests one by one."""
    p = ctx.profile
    out: dict[str, Any] = {"requests": p.batch_requests, "workers": p.batch_workers}
    for system in SYSTEMS:
        async with ctx.deploy(system, BENCH_ENGINE) as d:
            await d.scale_to(p.batch_workers)
            async with Client(d, BENCH_ENGINE, await _voice(d)) as c:
                await _backlog(c, ctx.texts(f"{d.tag}warm", p.warmup_jobs))  # unmeasured
                texts = ctx.texts(f"{d.tag}batch", p.batch_requests)
                cpu: dict[str, float] = {}
                before = ctx.cpu(d)
                if system == "voxlog":
                    ctx.say(f"(i) {system}: one batch of {len(texts)} requests, {p.batch_workers} workers")
                    submissions, answer_s = await _one_batch(c, texts)
                else:
                    ctx.say(f"(i) {system}: {len(texts)} requests one by one, {p.batch_workers} workers")
                    started = time.time()
                    submissions = await c.submit_all(texts)
                    answer_s = time.time() - started
                await c.wait_done([s.job_id for s in submissions], DONE_WITHIN_S)
                cpu.update(per_job_ms(before, ctx.cpu(d), len(submissions)))
                timings = await c.timings(submissions)
                figures = out[system] = {
                    "submission_s": answer_s,
                    "submitted_per_s": len(texts) / answer_s,
                    **backlog_figures(timings, cpu),
                }
                ctx.say(f"    {figures['jobs_per_s']:.0f} jobs/s end to end (submitted in {answer_s:.2f} s)")
    return out


async def _one_batch(c: Client, texts: list[str], priority: str | None = None) -> tuple[list[Submission], float]:
    extra = {"priority": priority} if priority else {}
    body = {"requests": [c.body(text) | extra for text in texts]}
    submitted = time.time()
    response = await c.http.post("/v1/batches", json=body)
    accepted = time.time()
    if response.status_code != 202:
        raise BenchError(f"voxlog refused the batch: {response.status_code} {response.text[:500]}")
    jobs = response.json()["jobs"]
    return [Submission(text, str(job["job_id"]), submitted, accepted) for text, job in zip(texts, jobs, strict=True)], (
        accepted - submitted
    )
