import os
import sys

import freezegun
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# freezegun walks every loaded module on start; kubernetes' lazy modules crash that walk.
freezegun.configure(extend_ignore_list=["kubernetes"])

FROZEN_WORLDS = {
    "real-clock": None,
    "frozen-1999": "1999-12-31 23:59:58",
    "frozen-2099": "2099-06-15 12:00:00",
}


@pytest.fixture(params=list(FROZEN_WORLDS), ids=list(FROZEN_WORLDS))
def frozen_world(request):
    """Run the test with the wall clock real, then frozen in 1999, then frozen in 2099.

    Decisions read only server time from records, so every run must give the same effects."""
    when = FROZEN_WORLDS[request.param]
    if when is None:
        yield request.param
        return
    with freezegun.freeze_time(when, real_asyncio=True):
        yield request.param


def run_in_all_worlds(scenario_fn):
    """Run ``scenario_fn()`` (returning a transcript) in every frozen world; assert all equal."""
    results = {}
    for world, when in FROZEN_WORLDS.items():
        if when is None:
            results[world] = scenario_fn()
        else:
            with freezegun.freeze_time(when, real_asyncio=True):
                results[world] = scenario_fn()
    first = results["real-clock"]
    for world, r in results.items():
        assert r == first, f"effects differ in world {world}"
    return first


@pytest.fixture(autouse=True)
def _scenarios_fold_the_same_in_batches(request):
    """Every scenario a test builds is folded again with ``engine.fold_many`` in random batches
    after the test: the batch fold must agree with ``fold`` on all of them (tests/harness.py)."""
    from tests import harness
    harness.LIVE.clear()
    yield
    scenarios, harness.LIVE[:] = list(harness.LIVE), []
    for n, sc in enumerate(scenarios):
        harness.assert_batches_agree(sc, seed=n)
