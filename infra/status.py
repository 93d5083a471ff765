"""The status line of one local service."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    up: bool
    endpoint: str
    pid: int | None = None
    detail: str = ""

    def line(self) -> str:
        state = "up" if self.up else "down"
        pid = f"pid {self.pid}" if self.pid is not None else "-"
        return f"{self.name:<10} {state:<5} {self.endpoint:<45} {pid:<11} {self.detail}"
