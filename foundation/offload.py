"""Work too heavy for an event loop, done in a process of its own under CPU, memory and time budgets.

Reading a document (an EPUB, a Markdown of two million characters) or validating a batch of 10,000
requests takes seconds of CPU; on the API's event loop every other request waits for it (one POST of
30,000 full stops held ``/healthz`` for 10 s). Weighed:

- A thread shares the GIL with the loop. Python code hands it back every few milliseconds, but one long C
  call (a regex over a megabyte, a decompression, a JSON parse) keeps it throughout; and a thread cannot be
  stopped when it runs past its budget, nor can what it allocates be capped.
- A process is held to its budgets by the kernel: ``RLIMIT_CPU`` stops it at its CPU seconds (SIGXCPU,
  which it reports, then SIGKILL two seconds later), ``RLIMIT_AS`` makes an allocation past its memory
  fail (MemoryError, which it reports), and one still running after its wall-clock allowance (a machine
  too loaded to give it its CPU, a test holding it) is killed. What it leaves behind, a heap grown by a
  large document, goes with it.
- One process per call, not a pool: a pool's worker that dies breaks the pool (``concurrent.futures``
  fails every call in flight with ``BrokenProcessPool``), so one hostile document would fail every other
  read alongside it. The processes are forked from a fork server that imported the work's modules once
  (``preload``), so a call costs a fork, a few milliseconds, and the pickling of its arguments and result,
  which happens in this offload's threads, never on the loop.

A call may ask for fewer CPU seconds than the offload's budget (``cpu_s``: a small document's parse gets a small
budget, so that a small upload that unpacks to megabytes of markup is stopped early), never more.

At most ``processes`` calls run at once; more wait their turn. :meth:`Offload.close` kills what still
runs and refuses new calls; the composition root owns it. The fork server exits with the process that
started it.
"""

from __future__ import annotations

import asyncio
import io
import multiprocessing
import os
import resource
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerProcess, set_spawning_popen
from multiprocessing.process import BaseProcess
from typing import Any, Literal, TypeVar

from foundation.errors import FoundationError

T = TypeVar("T")
BudgetKind = Literal["cpu", "memory", "time"]
_HARD_CPU_GRACE_S = 2  # after SIGXCPU, the seconds a process has to report before SIGKILL


@dataclass(frozen=True)
class Budget:
    cpu_s: int
    """CPU seconds one call may take."""
    memory_bytes: int
    """Address space one call may add to what its process starts with."""

    @property
    def wall_s(self) -> float:
        """How long a call may last, however little CPU it gets: generous, a backstop, not a budget."""
        return 10.0 * self.cpu_s + 30.0


class OffloadError(FoundationError):
    """Base of the offload's errors."""


class OverBudget(OffloadError):
    """The call went past one of its budgets and was stopped."""

    def __init__(self, budget: BudgetKind, limit: str) -> None:
        super().__init__(f"the work took more than {limit}")
        self.budget = budget
        self.limit = limit


class WorkerDied(OffloadError):
    """The call's process ended without an answer, for no budget (a crash)."""


class OffloadClosed(OffloadError):
    """The offload is closed (the API is shutting down)."""


class _Call:
    """One call's process, once started; a call cancelled before it starts never starts it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: BaseProcess | None = None
        self._cancelled = False

    def begin(self, process: BaseProcess) -> bool:
        with self._lock:
            if self._cancelled:
                return False
            process.start()
            self._process = process
            return True

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._process is not None:
                self._process.kill()


class _Popen(popen_forkserver.Popen):
    """The fork server's launch, without the caller's ``__main__``: multiprocessing would run the main
    module again in every process (``voxlog.cli``, pytest's script) for objects pickled from it, and the
    work is a function of an importable module. Otherwise ``popen_forkserver.Popen._launch`` as is."""

    def _launch(self, process_obj: BaseProcess) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)  # type: ignore[attr-defined]
        prep_data.pop("init_main_from_name", None)
        prep_data.pop("init_main_from_path", None)
        buf = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)  # type: ignore[attr-defined]
        parent_w = os.dup(w)  # the child's sentinel of this process, as upstream keeps it
        self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))  # type: ignore[attr-defined]
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _Process(ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: BaseProcess) -> _Popen:
        return _Popen(process_obj)


class _CpuSpent(BaseException):
    """Raised in the worker process by SIGXCPU; a BaseException so that the work's ``except Exception`` lets it by."""


class Offload:
    """Runs picklable module-level functions in processes of their own, one per call, under ``budget``."""

    def __init__(self, budget: Budget, processes: int, preload: Sequence[str] = ()) -> None:
        self._budget = budget
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(list(preload))
        self._slots = asyncio.Semaphore(processes)
        self._threads = ThreadPoolExecutor(max_workers=processes, thread_name_prefix="offload")
        self._live: set[BaseProcess] = set()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def budget(self) -> Budget:
        return self._budget

    def start(self) -> None:
        """Start the fork server now (it imports the preloaded modules), not on the first call. Blocking."""
        forkserver.ensure_running()

    async def run(self, work: Callable[..., T], *args: Any, cpu_s: int | None = None) -> T:
        """``work(*args)`` in a process of its own: its result, or what it raised; :class:`OverBudget` past
        a budget (``cpu_s``: this call's CPU seconds, at most the offload's). A cancelled call kills its process."""
        if self._closed:
            raise OffloadClosed("the offload is closed")
        budget = (
            self._budget if cpu_s is None else Budget(max(1, min(cpu_s, self._budget.cpu_s)), self._budget.memory_bytes)
        )
        async with self._slots:
            call = _Call()
            running = asyncio.get_running_loop().run_in_executor(self._threads, self._call, work, args, call, budget)
            try:
                return await running
            except asyncio.CancelledError:
                call.cancel()
                raise

    async def close(self) -> None:
        """Kill every call still running (it answers OffloadClosed), refuse new ones, and wait for the threads."""
        with self._lock:
            self._closed = True
            for process in self._live:
                process.kill()
        await asyncio.to_thread(self._threads.shutdown, wait=True)

    def _call(self, work: Callable[..., T], args: tuple[Any, ...], call: _Call, budget: Budget) -> T:
        receive, send = self._context.Pipe(duplex=False)
        process = _Process(target=_serve, args=(send, budget, work, args), daemon=True)
        with self._lock:
            if self._closed:
                raise OffloadClosed("the offload is closed")
            if not call.begin(process):
                raise asyncio.CancelledError
            self._live.add(process)
        send.close()
        outcome: tuple[str, Any] | None = None
        timed_out = False
        try:
            if receive.poll(budget.wall_s):
                try:
                    outcome = receive.recv()
                except EOFError:  # it died without a word: killed, or a crash
                    outcome = None
            else:
                timed_out = True
                process.kill()
        finally:
            receive.close()
            process.join()
            with self._lock:
                self._live.discard(process)
        return self._answer(outcome, process, budget, timed_out=timed_out)

    def _answer(self, outcome: tuple[str, Any] | None, process: BaseProcess, budget: Budget, *, timed_out: bool) -> Any:
        if timed_out:
            raise OverBudget("time", f"{budget.wall_s:.0f} seconds")
        if outcome is None:
            if self._closed:
                raise OffloadClosed("the offload closed while the work ran")
            if process.exitcode in (-signal.SIGKILL, -signal.SIGXCPU):  # the hard CPU limit
                raise OverBudget("cpu", f"{budget.cpu_s} CPU seconds")
            raise WorkerDied(f"the worker process ended with code {process.exitcode} and no answer")
        kind, value = outcome
        if kind == "done":
            return value
        if kind == "raised":
            raise value
        if kind == "cpu":
            raise OverBudget("cpu", f"{budget.cpu_s} CPU seconds")
        raise OverBudget("memory", f"{budget.memory_bytes // 2**20} MiB of memory")


def _serve(send: Connection, budget: Budget, work: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """The worker process: its budgets set, the work done, its outcome sent back."""
    signal.signal(signal.SIGXCPU, _cpu_spent)
    resource.setrlimit(resource.RLIMIT_CPU, (budget.cpu_s, budget.cpu_s + _HARD_CPU_GRACE_S))
    resource.setrlimit(resource.RLIMIT_AS, (_address_space() + budget.memory_bytes,) * 2)
    outcome: tuple[str, Any]
    try:
        outcome = ("done", work(*args))
    except MemoryError:
        outcome = ("memory", None)
    except _CpuSpent:
        outcome = ("cpu", None)
    except Exception as exc:  # the work's own error: raised again in the caller
        outcome = ("raised", exc)
    try:
        send.send(outcome)
    except MemoryError:
        send.send(("memory", None))
    except _CpuSpent:
        send.send(("cpu", None))
    except Exception as exc:  # an outcome that does not pickle
        send.send(("raised", WorkerDied(f"the work's outcome could not be sent back: {exc!r}")))
    finally:
        send.close()


def _cpu_spent(signum: int, frame: object) -> None:
    raise _CpuSpent


def _address_space() -> int:
    """The bytes of address space this process has now (its budget comes on top)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
