"""`pipeline()`: stages over a stream of items, overlapped with threads.

    with pypto.pipeline(depth=4) as pipe:
        pipe.stage(preprocess, device="cpu")        # numpy pre-processing
        pipe.stage(model, device="accelerator")     # a @pypto.kernel
        outputs = pipe.run(batches)
    print(pipe.stats)                              # wall time, busy time per stage, speedup

Each stage runs in its own thread and hands results to the next through a
bounded queue of `depth` items, so stage k works on item i while stage k+1
works on item i-1. Overlap is real because compiled kernels release the GIL
while they run (and numpy releases it in most array operations).

Honest scope: this machine has no accelerator, so the "accelerator" stage runs
on the CPU too; `device` is recorded as a label and no data is moved between
memories. With a GPU target the kernel stage would own the host<->device copies
(Halide buffers), and the structure would be the same. `run_sequential` runs
the same stages without overlap, for comparison.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

_DONE = object()


@dataclass
class PipelineStats:
    items: int = 0
    wall_s: float = 0.0
    busy_s: dict[str, float] = field(default_factory=dict)

    @property
    def sequential_s(self) -> float:
        """Sum of the stages' busy time: what running them one after another costs."""
        return sum(self.busy_s.values())

    @property
    def overlap_speedup(self) -> float:
        return self.sequential_s / self.wall_s if self.wall_s else 0.0

    def __str__(self) -> str:
        busy = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.busy_s.items())
        return (f"{self.items} items in {self.wall_s * 1e3:.1f} ms (stages busy: {busy}; "
                f"overlap speedup {self.overlap_speedup:.2f}x)")


class Pipeline:
    def __init__(self, depth: int = 4):
        if not 1 <= depth <= 64:
            raise ValueError(f"pipeline depth must be in [1, 64], got {depth}")
        self.depth = depth
        self.stages: list[tuple[str, Callable[[Any], Any], str]] = []
        self.stats = PipelineStats()

    def stage(self, fn: Callable[[Any], Any], device: str = "cpu", name: str | None = None) -> "Pipeline":
        self.stages.append((name or getattr(fn, "__name__", f"stage{len(self.stages)}"), fn, device))
        return self

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def _call(self, fn: Callable[[Any], Any], item: Any) -> Any:
        return fn(*item) if isinstance(item, tuple) else fn(item)

    def run(self, items: Iterable[Any]) -> list[Any]:
        if not self.stages:
            raise ValueError("pipeline has no stages; add them with pipe.stage(fn)")
        qs = [queue.Queue(self.depth) for _ in range(len(self.stages) + 1)]
        busy = {name: 0.0 for name, _, _ in self.stages}
        errors: list[BaseException] = []

        def worker(k: int) -> None:
            name, fn, _ = self.stages[k]
            while True:
                item = qs[k].get()
                if item is _DONE:
                    qs[k + 1].put(_DONE)
                    return
                if errors:
                    continue  # drain after a failure
                t0 = time.perf_counter()
                try:
                    r = self._call(fn, item)
                except BaseException as e:  # re-raised in the caller's thread
                    errors.append(e)
                    continue
                busy[name] += time.perf_counter() - t0
                qs[k + 1].put(r)

        threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(len(self.stages))]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        out: list[Any] = []

        def feed() -> None:
            for it in items:
                qs[0].put(it)
            qs[0].put(_DONE)
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        while (r := qs[-1].get()) is not _DONE:
            out.append(r)
        for t in threads + [feeder]:
            t.join()
        if errors:
            raise errors[0]
        self.stats = PipelineStats(len(out), time.perf_counter() - t0, busy)
        return out

    def run_sequential(self, items: Iterable[Any]) -> list[Any]:
        out = []
        for it in items:
            for _, fn, _ in self.stages:
                it = self._call(fn, it)
            out.append(it)
        return out


def pipeline(depth: int = 4) -> Pipeline:
    return Pipeline(depth)
