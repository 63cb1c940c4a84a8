"""The fan-out: a batch of coroutines run concurrently, a task spawned only for those that wait.

Spawning an anyio task costs about 15 µs on asyncio (20 µs on trio): a task handle with its
own cancel scope and event, a wrapper coroutine, scope bookkeeping. Most tool calls never
wait for anything (they compute and return), so a task per call was most of the cost of a
parallel batch. ``map_concurrently`` instead lets one *worker* start the calls in order and
run each to its first suspension. A call that finishes without suspending never needed a
task. The moment a call does suspend, the worker first spawns a new worker for the calls
after it, so none of them waits behind it, and then keeps driving the suspended call to
its end. Every call that waits therefore still gets a task of its own, started in the
model's order, and all of them run concurrently in one task group (the structured
concurrency of before: a failure cancels the siblings, cancellation reaches every call).
This is the idea of Python 3.12's eager task factory, done with anyio's public API only.

Each call runs in its own copy of the context, as it would in its own task, so a contextvar
a tool sets never leaks into a sibling.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator, Sequence
from contextvars import Context, copy_context
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

__all__ = ["first_leaf", "map_concurrently"]

_MISSING: Any = object()

T = TypeVar("T")
R = TypeVar("R")


async def map_concurrently(
    fn: Callable[[T], Coroutine[Any, Any, R]], items: Sequence[T]
) -> list[R]:
    """``[await fn(item) for item in items]``, but every call runs concurrently.

    Results are in the order of ``items``. An exception from any call cancels the others
    and leaves the task group as an exception group, as with one task per call.
    """
    results: list[Any] = [_MISSING] * len(items)
    async with anyio.create_task_group() as tg:
        # The first worker is the task group's host: no spawn at all while calls don't wait.
        await _work(tg, fn, items, 0, results)
    if any(r is _MISSING for r in results):
        # A call ended without a result: it was cancelled by an enclosing scope (anyio's
        # task group exits quietly when its children end by an outer cancellation before
        # the host is hit). Never hand out a result for it: take the cancellation here.
        await anyio.lowlevel.checkpoint_if_cancelled()
        raise RuntimeError("a concurrent call ended without a result and was not cancelled")
    return results


async def _work(
    tg: TaskGroup,
    fn: Callable[[T], Coroutine[Any, Any, Any]],
    items: Sequence[T],
    start: int,
    results: list[Any],
) -> None:
    n = len(items)
    for i in range(start, n):
        coro = fn(items[i])
        context = copy_context()
        try:
            yielded = context.run(coro.send, None)
        except StopIteration as done:
            results[i] = done.value
            continue
        # The call waits for something: its siblings must not wait behind it.
        if i + 1 < n:
            tg.start_soon(_work, tg, fn, items, i + 1, results)
        results[i] = await _Resumed(coro, context, yielded)
        return


class _Resumed:
    """Awaiting it continues a coroutine already run to its first suspension.

    It does what ``yield from`` does for the rest of the coroutine's life (every value the
    event loop sends, every exception it throws, goes through), in the coroutine's own
    context. The suspension happened in the current task, so the coroutine stays there.
    """

    __slots__ = ("_context", "_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, Any], context: Context, yielded: Any) -> None:
        self._coro = coro
        self._context = context
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        run = self._context.run
        value = self._yielded
        self._yielded = None
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                run(coro.close)
                raise
            except BaseException as exc:
                try:
                    value = run(coro.throw, exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    value = run(coro.send, sent)
                except StopIteration as done:
                    return done.value


def first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first non-group exception inside a (possibly nested) exception group."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        inner: BaseExceptionGroup[BaseException] = exc  # pyright: ignore[reportUnknownVariableType]
        exc = inner.exceptions[0]
    return exc
