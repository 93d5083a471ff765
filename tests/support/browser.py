"""Debian's headless Chromium, for the tests that read a page as a person sees it."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from html.parser import HTMLParser

CHROMIUM = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--virtual-time-budget=8000"]


class Figures(HTMLParser):
    """The dashboard's figures, from the data-* attributes and ids of the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = False
        self.refused = ""  # the status the page was refused its figures with (401, 403), if it was
        self.answered = ""  # the status of the API's last answer that held no figures (429, 503...), if any
        self.groups: dict[str, dict[str, str]] = {}
        self.workers: list[str] = []
        self.queues: list[dict[str, str]] = []  # a row per live worker, tenant and priority with jobs waiting
        self.texts: dict[str, str] = {}
        self._id: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.ready = found.get("data-ready") == "true"
            self.refused = found.get("data-refused", "")
            self.answered = found.get("data-answered", "")
        if tag == "tr" and "data-group" in found:
            self.groups[found["data-group"]] = found
        if tag == "tr" and "data-worker" in found:
            self.workers.append(found["data-worker"])
        if tag == "tr" and "data-queue-worker" in found:
            self.queues.append(found)
        self._id = found.get("id")

    def handle_data(self, data: str) -> None:
        if self._id and data.strip():
            self.texts.setdefault(self._id, data.strip())


def chromium(*args: str) -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "Debian's chromium is installed by infra/test.sh"
    done = subprocess.run([binary, *CHROMIUM, *args], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


async def figures(url: str) -> Figures:
    parsed = Figures()
    parsed.feed(await asyncio.to_thread(chromium, "--dump-dom", url))
    return parsed
