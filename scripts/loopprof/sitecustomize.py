"""Loop CPU by callback, for ``scripts/bench_peer.py --loop-profile`` (never imported by kfold).

Python imports ``sitecustomize`` at start-up from ``sys.path``; bench_peer puts this directory on
``PYTHONPATH`` of the kfold contestant with ``KFOLD_LOOP_PROFILE=<path>`` set. Then every asyncio
callback's CPU time on the loop's thread (``time.thread_time``, so waiting and other threads do not
count) is summed by what it runs: a task's coroutine chain (``task:Daemon._commit_batch``) or a
plain callback's name; and a few synchronous steps of the committer are summed too (``fn:...``,
nested inside their task's figure). Written to ``<path>.<pid>`` every 2 s (the daemon is stopped
with a signal, so there may be no clean exit), sorted by CPU: ``ms calls name`` per line.
Unlike a sampling profiler's shares, these are exact CPU seconds of the loop's thread.
"""
import os

if os.environ.get("KFOLD_LOOP_PROFILE"):
    import asyncio.events
    import collections
    import threading
    import time

    _acc: dict = collections.defaultdict(lambda: [0.0, 0])
    _plain_run = asyncio.events.Handle._run

    def _name(handle) -> str:
        owner = getattr(handle._callback, "__self__", None)
        if owner is not None and hasattr(owner, "get_coro"):
            chain, coro = [], owner.get_coro()
            while coro is not None and len(chain) < 3:
                chain.append(getattr(coro, "__qualname__", "?"))
                coro = getattr(coro, "cr_await", None)
                if coro is not None and not hasattr(coro, "cr_await"):
                    break
            return "task:" + ">".join(chain)
        return getattr(handle._callback, "__qualname__", type(handle._callback).__name__)

    def _timed(label, fn):
        def timed(*args, **kwargs):
            t = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                slot = _acc[label]
                slot[0] += time.thread_time() - t
                slot[1] += 1
        return timed

    def _patch_steps() -> None:
        import kfold.daemon.loop as daemon
        from journal.store import Journal
        for name in ("_fold_ahead", "_release", "_snapshot_due"):
            setattr(daemon.Daemon, name, _timed(f"fn:Daemon.{name}", getattr(daemon.Daemon, name)))
        for name in ("seal", "prepare", "flush"):
            setattr(Journal, name, _timed(f"fn:Journal.{name}", getattr(Journal, name)))
        for name in ("fold", "fold_many"):   # the names kfold.daemon.loop calls
            setattr(daemon, name, _timed(f"fn:engine.{name}", getattr(daemon, name)))

    _patched = []

    def _run(self):
        if not _patched:
            _patched.append(True)
            _patch_steps()
        t = time.thread_time()
        try:
            return _plain_run(self)
        finally:
            slot = _acc[_name(self)]
            slot[0] += time.thread_time() - t
            slot[1] += 1

    asyncio.events.Handle._run = _run

    def _write() -> None:
        path = f"{os.environ['KFOLD_LOOP_PROFILE']}.{os.getpid()}"
        while True:
            time.sleep(2)
            rows = sorted(list(_acc.items()), key=lambda kv: -kv[1][0])
            with open(path, "w") as f:
                for name, (cpu, calls) in rows[:80]:
                    f.write(f"{cpu * 1000:10.1f} ms {calls:9d} {name}\n")

    threading.Thread(target=_write, name="loop-profile", daemon=True).start()
