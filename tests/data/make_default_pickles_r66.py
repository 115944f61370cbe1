"""The script that wrote tests/data/default_pickles_r66.json: the pickles this package writes
since session 66, of the objects the earlier fixture scripts build.

Until session 65 the placement graph types (``ParallelRank``, the axes, ``TensorDescriptor``,
``TopologyParticipant``, ``ParallelTopology``, ``WeightPlacementPart``,
``WeightPlacementManifest``), ``PlacementFragment`` and ``RuntimeBindingEvidence`` pickled as one
call of a private restore helper, which the released reference does not have. Since session 66
they use default dataclass pickling (spec §13): ``copyreg.__newobj__`` and the field dict, which
the reference loads too. The earlier fixtures (``*_pickles_r15/r16/r17.json``) keep the bytes the
earlier builds wrote; the tests load them (older pickles still load) and compare what this build
writes against this file, family by family, under the same keys as the earlier fixture.

Each family's objects are built as its test module builds them (the same maker script, imported
with tuples unshared where the test imports it so, the objects made at test time otherwise), so
that the pickle memo, hence the bytes, are the same. Run from the tests directory::

    python data/make_default_pickles_r66.py data/default_pickles_r66.json
"""

import json
import os
import pickle
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(TESTS, "data"))

from layout_classes import data_module, tuples_unshared  # noqa: E402

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


def _dumps(value):
    return {str(protocol): pickle.dumps(value, protocol).hex() for protocol in PROTOCOLS}


def placement_family():
    with tuples_unshared():  # (the test module's autouse fixture: tuples unshared throughout)
        maker = data_module("make_placement_pickles_r17")
        out = {name: _dumps(value) for name, value in maker.OBJECTS.items()}
        out["default_canonical"] = {str(p): maker.default_form(maker.CANONICAL, p).hex() for p in PROTOCOLS}
        out["default_explicit"] = {str(p): maker.default_form(maker.EXPLICIT, p).hex() for p in PROTOCOLS}
    return out


def region_family():
    with tuples_unshared():
        maker = data_module("make_region_pickles_r16")
    return {name: _dumps(value) for name, value in maker.OBJECTS.items()}


def snapshot_family():
    maker = data_module("make_snapshot_pickles_r15")
    return {"snapshot": _dumps(maker.snap), "executor": _dumps(maker.ex)}


def bound_family():
    with tuples_unshared():
        import make_bound_pickles_r16 as maker  # (by name: the r17 script imports it so)
    out: dict = {"fragment": {}, "plan": {}}
    for protocol in PROTOCOLS:  # (a fresh plan each time, as the test: pickling caches digests)
        with tuples_unshared():
            plan = maker.bound_plan()
        out["fragment"][str(protocol)] = pickle.dumps(maker.fragments(plan), protocol).hex()
        out["plan"][str(protocol)] = pickle.dumps(plan, protocol).hex()
    return out


def runtime_family():
    with tuples_unshared():  # (the test module's autouse fixture: tuples unshared throughout)
        import make_bound_pickles_r16 as bound_maker
        import make_runtime_pickles_r17 as maker

        return {
            "fragments": _dumps(maker.fragments()),
            "manifest": _dumps(maker.manifest()),
            "plan": _dumps(bound_maker.bound_plan()),
        }


if __name__ == "__main__":
    out = {
        "version": sys.version,
        "placement_pickles_r17": placement_family(),
        "region_pickles_r16": region_family(),
        "snapshot_pickles_r15": snapshot_family(),
        "bound_pickles_r16": bound_family(),
        "runtime_pickles_r17": runtime_family(),
    }
    with open(sys.argv[1], "w", encoding="ascii") as handle:
        json.dump(out, handle, indent=1)
    print("ok", sys.version)
