"""Python-level fuzz engine for mooncake.reshard (issue 6).

Shared by the hypothesis tests (``tests/test_hardening_fuzz.py``), the atheris driver
(``fuzz/atheris_json.py``) and the long random runner (``python fuzz/pyfuzz.py``).

Entry points that take outside data:

* :func:`check_json_text`: ``weight_placement_from_json`` on arbitrary text. Contract: the text is
  either rejected with a ``ValueError`` (the spec's only validation exception, §1.4) or accepted,
  and then the decoded placement re-encodes to the canonical form of the input, decodes back to an
  equal value with an equal digest, and re-encodes to identical bytes (§7.2). Any other exception
  (or a crash) is a finding.
* :func:`mutate_document` / :func:`fix_ids`: structured mutations of a parsed placement document,
  with the content ids recomputed independently (§6.2, §6.3) so mutations reach the deep checks
  instead of stopping at "placement_id does not match canonical logical content".
* :func:`check_constructor`: a public value constructor with one or more fields replaced by a
  hostile value (huge ints, negatives, bools, floats, NaN, str with NUL and lone surrogates,
  containers of the wrong kind, objects whose ``__index__``/``__eq__``/``__hash__``/``__iter__``
  raise). Contract: ``ValueError`` or a value that survives pickle, copy and ``replace``
  unchanged.

Everything is driven by a ``random.Random`` so one engine serves every driver; a failing case is
reproduced from its seed.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import pickle
import random
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

U64 = 2**64 - 1

# --------------------------------------------------------------------------------------------
# hostile values

INT_EDGES: Tuple[int, ...] = (
    0, 1, -1, 2, 7, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**63 + 1,
    U64 - 4, U64 - 1, U64, 2**64, 2**64 + 1, -(2**63), -(2**63) - 1, -(2**64), 10**30, -(10**30),
    2**200,
)
STR_EDGES: Tuple[str, ...] = (
    "", "a", "\x00", "a\x00b", "\ud800", "x\udfffy", "\udc80\ud800", "\u00c4", "\U0001f600", " ",
    "sha256:", "w" * 300, "model_weight", "split", "tp", "dp", "replicated", "ownership", "null",
)


class Boom(Exception):
    """Raised by the hostile dunder methods below; must never escape as anything but itself
    (propagated by Python) or a ValueError."""


class RaisingIndex:
    """An ``__index__`` that raises (drives the C int-conversion error paths)."""

    def __index__(self) -> int:
        raise Boom("__index__")


class RaisingEq:
    """Equality and hashing raise."""

    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")

    def __hash__(self) -> int:
        raise Boom("__hash__")


class RaisingIter:
    """A sequence-looking object whose iteration and length raise."""

    def __iter__(self) -> Any:
        raise Boom("__iter__")

    def __len__(self) -> int:
        raise Boom("__len__")

    def __getitem__(self, index: int) -> Any:
        raise Boom("__getitem__")


class LyingSequence(list):  # type: ignore[type-arg]
    """A list subclass whose ``__len__`` lies and whose ``__iter__`` raises half way."""

    def __len__(self) -> int:
        return 10**6

    def __iter__(self) -> Any:
        yield 1
        raise Boom("__iter__ mid-way")


class IntSub(int):
    pass


class StrSub(str):
    pass


def hostile_objects() -> Tuple[Any, ...]:
    """Non-JSON hostile values (fresh instances)."""
    return (
        True, False, None, 1.0, float("nan"), float("inf"), -0.0, b"ab", bytearray(b"x"), IntSub(3),
        StrSub("w"), RaisingIndex(), RaisingEq(), RaisingIter(), LyingSequence([1, 2]), object(),
        {1, 2}, frozenset({1}), {"a": 1}, (i for i in (1, 2)), [RaisingIndex()], (RaisingEq(),),
        [2**64], (-1,), [True], (1.0,), [], (), [[1]], "abc", complex(1, 1), range(3),
    )


def json_hostile(rng: random.Random, depth: int = 0) -> Any:
    """A JSON-encodable hostile value (including NaN/Infinity, emitted as tokens)."""
    r = rng.random()
    if r < 0.35:
        return rng.choice(INT_EDGES)
    if r < 0.55:
        return rng.choice(STR_EDGES)
    if r < 0.65:
        return rng.choice((True, False, None))
    if r < 0.72:
        return rng.choice((1.0, 0.5, -0.0, float("nan"), float("inf"), -float("inf"), 1e308))
    if r < 0.86 and depth < 2:
        return [json_hostile(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2:
        return {rng.choice(STR_EDGES + ("dp", "tp", "pp", "ep", "kind", "dim")): json_hostile(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    return rng.randint(-3, 9)


# --------------------------------------------------------------------------------------------
# independent content ids (spec §6.2, §6.3) over a parsed document


def _sha(content: Any) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def fix_ids(doc: Any) -> Any:
    """Recompute ``topology.topology_id`` and ``placement_id`` of a (possibly mutated) document
    from its own content, best effort: anything that does not look like the schema is left alone.
    Participants, tensors and parts are hashed in the order the package sorts them, when sortable."""
    if not isinstance(doc, dict):
        return doc
    topo = doc.get("topology")
    try:
        if isinstance(topo, dict):
            participants = topo.get("participants")
            if isinstance(participants, list):
                try:
                    participants = sorted(participants, key=lambda p: p["participant_id"])
                except Exception:
                    pass
            content = {"schema": "weight-parallel-topology", "participants": participants}
            for key in ("tp_size", "pp_size", "ep_size", "dp_size"):
                content[key] = topo.get(key)
            topo["topology_id"] = _sha(content)
        tensors = doc.get("tensors")
        if isinstance(tensors, list):
            try:
                tensors = sorted(tensors, key=lambda t: t["tensor_id"])
            except Exception:
                pass
        parts = doc.get("parts")
        if isinstance(parts, list):
            new_parts = []
            for part in parts:
                if isinstance(part, dict) and isinstance(part.get("fragments"), list):
                    part = dict(part)
                    frags = []
                    for f in part["fragments"]:
                        if isinstance(f, dict):
                            f = dict(f)
                            if f.get("pipeline_stage_id", 0) is None:
                                del f["pipeline_stage_id"]
                            if isinstance(f.get("aliases"), list):
                                try:
                                    f["aliases"] = sorted(f["aliases"])
                                except Exception:
                                    pass
                        frags.append(f)
                    try:
                        frags = sorted(frags, key=lambda f: f["placement_fragment_id"])
                    except Exception:
                        pass
                    part["fragments"] = frags
                new_parts.append(part)
            try:
                parts = sorted(new_parts, key=lambda p: p["participant_id"])
            except Exception:
                parts = new_parts
        if isinstance(tensors, list):
            tensors = [_canonical_axes(t) for t in tensors]
        content = {
            "schema": "complete-weight-placement",
            "resource_id": doc.get("resource_id"),
            "revision": doc.get("revision"),
            "weight_generation": doc.get("weight_generation"),
            "placement_set_id": doc.get("placement_set_id"),
            "topology": topo,
            "tensors": tensors,
            "parts": parts,
        }
        doc["placement_id"] = _sha(content)
    except (TypeError, ValueError, RecursionError):
        pass
    return doc


_KIND_ORDER = {"dp": 0, "pp": 1, "ep": 2, "tp": 3}


def _canonical_axes(tensor: Any) -> Any:
    if isinstance(tensor, dict) and isinstance(tensor.get("parallel_axes"), list):
        axes = tensor["parallel_axes"]
        try:
            axes = sorted(axes, key=lambda a: _KIND_ORDER[a["kind"]])
        except Exception:
            return tensor
        tensor = dict(tensor)
        tensor["parallel_axes"] = axes
    return tensor


def canonical_document(doc: Any) -> Any:
    """What the package must re-encode an accepted document as: inventories sorted the way the
    constructors store them, ``pipeline_stage_id: null`` dropped, aliases sorted, axes in
    canonical kind order, participants sorted."""
    doc = json.loads(json.dumps(doc))
    doc["topology"]["participants"].sort(key=lambda p: p["participant_id"])
    doc["tensors"] = sorted((_canonical_axes(t) for t in doc["tensors"]), key=lambda t: t["tensor_id"])
    for part in doc["parts"]:
        for f in part["fragments"]:
            if "pipeline_stage_id" in f and f["pipeline_stage_id"] is None:
                del f["pipeline_stage_id"]
            f["aliases"] = sorted(f["aliases"])
        part["fragments"].sort(key=lambda f: f["placement_fragment_id"])
    doc["parts"].sort(key=lambda p: p["participant_id"])
    return doc


# --------------------------------------------------------------------------------------------
# structured and textual mutations


def _paths(node: Any, prefix: Tuple[Any, ...] = ()) -> List[Tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_paths(v, prefix + (i,)))
    return out


def _get(node: Any, path: Tuple[Any, ...]) -> Any:
    for step in path:
        node = node[step]
    return node


def mutate_document(doc: Any, rng: random.Random, rounds: int = 1) -> Any:
    """Apply ``rounds`` random structural mutations to a deep copy of ``doc``."""
    doc = copy.deepcopy(doc)
    for _ in range(rounds):
        paths = _paths(doc)
        path = rng.choice(paths)
        if not path:
            if rng.random() < 0.1:
                doc = json_hostile(rng)
            continue
        parent = _get(doc, path[:-1])
        key = path[-1]
        value = parent[key]
        op = rng.random()
        if op < 0.40:
            parent[key] = json_hostile(rng)
        elif op < 0.55 and isinstance(value, int) and not isinstance(value, bool):
            parent[key] = rng.choice((value + 1, value - 1, -value, value * 2**32, 0, U64, 2**64, 2**63))
        elif op < 0.62 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.69 and isinstance(parent, dict):
            parent[rng.choice(("extra", "model_id", "partition_dim", "future_semantics", key + "_"))] = value
        elif op < 0.76 and isinstance(parent, list):
            parent.insert(rng.randint(0, len(parent)), copy.deepcopy(value))
        elif op < 0.83 and isinstance(parent, list):
            del parent[key]
        elif op < 0.90 and isinstance(value, list) and len(value) > 1:
            rng.shuffle(value)
        elif op < 0.95:
            # swap with another node of the document (type confusion between fields)
            other = rng.choice(paths)
            if other and other[: len(path)] != path and path[: len(other)] != other:
                parent[key] = copy.deepcopy(_get(doc, other))
        else:
            parent[key] = [value] if rng.random() < 0.5 else {"v": value}
    if rng.random() < 0.8:
        doc = fix_ids(doc)
    return doc


def serialize(doc: Any, rng: random.Random) -> str:
    """JSON text of ``doc`` with random (valid) formatting choices."""
    return json.dumps(
        doc,
        ensure_ascii=rng.random() < 0.5,
        sort_keys=rng.random() < 0.5,
        indent=rng.choice((None, None, 1)),
        allow_nan=True,
    )


def mutate_text(text: str, rng: random.Random) -> str:
    """Byte/character-level damage to a JSON text."""
    op = rng.randrange(9)
    if not text:
        return rng.choice(("{}", "[]", "", "null"))
    i = rng.randrange(len(text))
    if op == 0:
        return text[:i]  # truncation
    if op == 1:
        return text[:i] + rng.choice(("NaN", "Infinity", "-Infinity", "1e999", "-0", "1.0", "\\u0000", "\x00",
                                      "\ud800", "\"", ",", "]", "}", "{", "[", "tru", "1" * 5000)) + text[i:]
    if op == 2:
        return text[:i] + text[i + 1:]
    if op == 3:
        j = rng.randrange(len(text))
        return text[:i] + text[j] + text[i + 1:]
    if op == 4:
        # duplicate a key at some depth: `"k":` -> `"k":v,"k":`
        k = text.find('":', i)
        s = text.rfind('"', 0, max(k, 0))
        s = text.rfind('"', 0, s) if s > 0 else -1
        if k > 0 and s >= 0:
            key = text[s:k + 2]
            return text[:s] + key + "0," + text[s:]
        return text
    if op == 5:
        return "[" * rng.choice((10, 1000, 100000)) + text
    if op == 6:
        return text + rng.choice(("", " ", "x", "{}", "\n"))
    if op == 7:
        return " \t\n" + text
    return text.replace("0", rng.choice(("00", "-0", "0.0", "1e0")), 1)


# --------------------------------------------------------------------------------------------
# checks


def _load_spec_messages() -> List[Any]:
    import os
    import re

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spec_messages.txt")
    patterns = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                patterns.append(re.compile(re.sub(r"\\\{[^}]*\\\}", ".*", re.escape(line)), re.S))
    return patterns


SPEC_MESSAGES = _load_spec_messages()
# Messages outside the spec's quoted list that are accepted anyway: the documented signed 64-bit
# coordinate limitation (docs/manifest.md), a C-layout value's pickle state that is not a dict
# or names a key that is not one of its fields (docs/api.md: TransferRegion, BoundWeightFragment,
# RuntimeFragmentSnapshot, RuntimeBindingFragment, PlacementFragment), and a placement graph
# value's state that is not a dict (weight/_default_state.py).
EXTRA_MESSAGES = (
    "must fit in a signed 64-bit integer",
    "RuntimeFragmentSnapshot pickle state is invalid: ",
    "BoundWeightFragment pickle state is invalid: ",
    "TransferRegion pickle state is invalid: ",
    "RuntimeBindingFragment pickle state is invalid: ",
    "PlacementFragment pickle state is invalid: ",
    *(
        f"{name} pickle state is invalid: "
        for name in ("ParallelRank", "SplitAxis", "ReplicatedAxis", "OwnershipAxis", "TensorDescriptor",
                     "TopologyParticipant", "ParallelTopology", "WeightPlacementPart",
                     "WeightPlacementManifest", "RuntimeBindingEvidence")
    ),
)


def spec_message(text: str) -> bool:
    """True when ``text`` starts with a spec message template (detail may be appended, §1.3)."""
    return any(p.match(text) for p in SPEC_MESSAGES) or any(m in text for m in EXTRA_MESSAGES)


class Finding(AssertionError):
    """A contract violation found by the fuzzer (the input is attached as ``.input``)."""

    def __init__(self, message: str, data: Any) -> None:
        super().__init__(f"{message}\n  input: {data!r}"[:4000])
        self.input = data


def check_json_text(text: Any) -> Optional[Any]:
    """Decode ``text``; return the placement (accepted) or ``None`` (ValueError). Raises
    :class:`Finding` for any other exception or a broken round trip."""
    from mooncake.reshard.weight import weight_placement_from_json, weight_placement_to_json

    try:
        placement = weight_placement_from_json(text)
    except ValueError as exc:
        if type(exc) is not ValueError and not isinstance(exc, UnicodeError):
            raise Finding(f"ValueError subclass {type(exc).__name__}: {exc}", text) from exc
        if type(exc) is ValueError and not spec_message(str(exc)):
            raise Finding(f"rejection message is not a spec message: {exc}", text) from exc
        return None
    except Exception as exc:  # noqa: BLE001 - the point of the harness
        raise Finding(f"unexpected {type(exc).__name__}: {exc}", text) from exc
    try:
        encoded = weight_placement_to_json(placement)
        again = weight_placement_from_json(encoded)
    except Exception as exc:  # noqa: BLE001
        raise Finding(f"accepted placement does not round-trip: {type(exc).__name__}: {exc}", text) from exc
    if again != placement:
        raise Finding("decode(encode(p)) != p", text)
    if weight_placement_to_json(again) != encoded:
        raise Finding("re-encoding is not byte-identical", text)
    if again.digest != placement.digest:
        raise Finding("digest differs after round trip", text)
    try:
        original = json.loads(text)
        expected = canonical_document(original)
    except Exception as exc:  # noqa: BLE001
        raise Finding(f"accepted text is not plain canonical-schema JSON ({exc})", text) from exc
    if json.loads(encoded) != expected:
        raise Finding("accepted document re-encodes to different content", text)
    try:
        if pickle.loads(pickle.dumps(placement)) != placement:
            raise Finding("pickle round trip differs", text)
    except Finding:
        raise
    except Exception as exc:  # noqa: BLE001
        raise Finding(f"pickle failed: {type(exc).__name__}: {exc}", text) from exc
    return placement


def roundtrip_value(value: Any) -> None:
    """pickle, copy and ``dataclasses.replace`` of an accepted value give an equal value."""
    restored = pickle.loads(pickle.dumps(value))
    if restored != value:
        raise Finding("pickle round trip differs", value)
    if copy.copy(value) != value:
        raise Finding("copy differs", value)
    if copy.deepcopy(value) != value:
        raise Finding("deepcopy differs", value)
    repr(value)
    try:
        hash(value)
    except TypeError:
        pass
    try:
        replaced = dataclasses.replace(value)
    except TypeError:
        return  # spec §13: constructors that do not take all fields
    if replaced != value:
        raise Finding("replace() differs", value)


# Fields the spec (and the reference) convert with a bare ``tuple(value)`` before any check: a
# non-iterable value raises Python's own TypeError there (spec 1.4: TypeError from Python itself).
TUPLE_CONVERTED = {("PlacementExecutorPlan", "placement_fragment_ids")}


# Types whose spec checks only truthiness/repeats of their ids (spec 8.5): the reference's
# ``set(ids)`` raises Python's TypeError for unhashable items, so a TypeError is compatible there.
LOOSE_TYPES = {"PlacementExecutorPlan"}


def _python_tuple_type_error(label: str, kwargs: Dict[str, Any], exc: TypeError) -> bool:
    if label in LOOSE_TYPES and "unhashable" in str(exc):
        return True
    if "not iterable" not in str(exc):
        return False
    for name, value in kwargs.items():
        if (label, name) in TUPLE_CONVERTED:
            try:
                iter(value)
            except TypeError:
                return True
    return False


def check_constructor(factory: Callable[..., Any], kwargs: Dict[str, Any], label: str) -> Optional[Any]:
    """Call ``factory(**kwargs)``; ValueError or a round-tripping value are fine."""
    try:
        value = factory(**kwargs)
    except TypeError as exc:
        if _python_tuple_type_error(label, kwargs, exc):
            return None
        raise Finding(f"{label}: unexpected TypeError: {exc}", kwargs) from exc
    except ValueError as exc:
        # UnicodeEncodeError: StoredWeightManifest hashes ensure_ascii=False JSON encoded as UTF-8
        # (spec 6.5), exactly as the reference does, so a lone surrogate fails in the encoder.
        if type(exc) is not ValueError and not isinstance(exc, UnicodeError):
            raise Finding(f"{label}: ValueError subclass {type(exc).__name__}: {exc}", kwargs) from exc
        if type(exc) is ValueError and not spec_message(str(exc)):
            raise Finding(f"{label}: rejection message is not a spec message: {exc}", kwargs) from exc
        return None
    except Boom:
        # the hostile object's own exception: Python propagates it from the caller's
        # __eq__/__hash__/__index__; acceptable (it is not raised by the package)
        return None
    except Exception as exc:  # noqa: BLE001
        raise Finding(f"{label}: unexpected {type(exc).__name__}: {exc}", kwargs) from exc
    if label in LOOSE_TYPES:
        return value  # no type rules for its ids: arbitrary objects are kept as given
    try:
        roundtrip_value(value)
    except Finding:
        raise
    except Boom:
        return value
    except Exception as exc:  # noqa: BLE001
        raise Finding(f"{label}: accepted value fails pickle/copy/replace: {type(exc).__name__}: {exc}",
                      kwargs) from exc
    return value


# --------------------------------------------------------------------------------------------
# constructor targets


def constructor_targets(
    labels: Optional[Sequence[str]] = None,
) -> List[Tuple[str, Callable[..., Any], Callable[[], Dict[str, Any]]]]:
    """(label, factory, valid-kwargs builder) for the public value types, or for those of
    ``labels`` in that order (``conformance/`` asks for the types the released reference has:
    the classes are looked up only for the targets returned)."""
    import mooncake.reshard.weight as w

    def tensor() -> Dict[str, Any]:
        return dict(tensor_id="w", global_shape=(4, 4), dtype="bfloat16", itemsize=2, shard_dims=(0,),
                    layout_fingerprint="fp:v1", parallel_axes=(w.SplitAxis("tp", 0),), layer_id=None,
                    expert_id=None)

    def fragment() -> Dict[str, Any]:
        return dict(tensor_id="w", global_offset=(0, 0), local_shape=(4, 4), nbytes=32, rank=w.ParallelRank(),
                    pipeline_stage_id=None, aliases=(), placement_fragment_id=None)

    def runtime_fragment() -> Dict[str, Any]:
        return dict(placement_fragment_id="pf-0", fragment_id="rt-0", address=4096, nbytes=32,
                    worker_id="worker-0", endpoint="host:1", device="cuda:0", itemsize=2, local_shape=(4, 4),
                    strides_bytes=(8, 2), storage_address=4096, storage_nbytes=32, storage_offset_bytes=0)

    def topology() -> Dict[str, Any]:
        return dict(tp_size=1, pp_size=1, ep_size=1, dp_size=1,
                    participants=(w.TopologyParticipant("worker-0", w.ParallelRank()),), topology_id=None)

    def part() -> Dict[str, Any]:
        topo = w.ParallelTopology(**topology())
        return dict(resource_id="model", revision="r", weight_generation=7, placement_set_id="s",
                    topology_id=topo.topology_id, participant_id="worker-0", rank=w.ParallelRank(),
                    tensors=(w.TensorDescriptor(**tensor()),),
                    fragments=(w.PlacementFragment(**dict(fragment(), placement_fragment_id="pf-0")),))

    def manifest() -> Dict[str, Any]:
        return dict(resource_id="model", revision="r", weight_generation=7, placement_set_id="s",
                    topology=w.ParallelTopology(**topology()), parts=(w.WeightPlacementPart(**part()),),
                    placement_id=None)

    def binding() -> Dict[str, Any]:
        return dict(resource_id="model", placement_id="sha256:x", placement_digest="a" * 64, instance_id="i",
                    generation=1, lease_id="l", revision="r", participant_id="worker-0",
                    fragments=(w.RuntimeBindingFragment(**runtime_fragment()),))

    def stored_fragment() -> Dict[str, Any]:
        return dict(fragment_id="stored-0", tensor_id="w", global_offset=(0, 0), local_shape=(4, 4),
                    object_key="g/payload/0", object_offset=0, nbytes=32, aliases=())

    def stored() -> Dict[str, Any]:
        return dict(namespace="default", resource_id="model", revision="r", weight_generation=7, group_id="g",
                    manifest_key="g/manifest", tensors=(w.TensorDescriptor(**tensor()),),
                    fragments=(w.StoredFragmentSnapshot(**stored_fragment()),), created_at="2026-07-17T00:00:00Z")

    builders: Dict[str, Callable[[], Dict[str, Any]]] = {
        "ParallelRank": lambda: dict(dp=0, tp=1, pp=0, ep=0),
        "SplitAxis": lambda: dict(kind="tp", dim=1),
        "ReplicatedAxis": lambda: dict(kind="dp"),
        "OwnershipAxis": lambda: dict(kind="pp"),
        "TensorDescriptor": tensor,
        "PlacementFragment": fragment,
        "RuntimeBindingFragment": runtime_fragment,
        "TopologyParticipant": lambda: dict(participant_id="w0", rank=w.ParallelRank()),
        "ParallelTopology": topology,
        "WeightPlacementPart": part,
        "WeightPlacementManifest": manifest,
        "WeightRuntimeBindingManifest": binding,
        "StoredFragmentSnapshot": stored_fragment,
        "StoredWeightManifest": stored,
        "PlanningLimits": lambda: dict(max_transfer_regions=5, max_segments_per_region=5,
                                       max_total_lowered_segments=5),
        "PipelineRouteGroup": lambda: dict(source_pp=0, source_pipeline_stage_id=None, target_pp=1,
                                           target_pipeline_stage_id=2, operation_indices=(0, 1)),
        "PlacementExecutorPlan": lambda: dict(placement_id="p", participant_id="w0", rank=w.ParallelRank(),
                                              placement_fragment_ids=("a", "b")),
    }
    return [(label, getattr(w, label), builders[label]) for label in (builders if labels is None else labels)]


def hostile_value(rng: random.Random, current: Any) -> Any:
    """A replacement for a constructor field currently holding ``current``."""
    r = rng.random()
    if r < 0.3:
        return rng.choice(hostile_objects())
    if r < 0.5:
        return rng.choice(INT_EDGES)
    if r < 0.65:
        return rng.choice(STR_EDGES)
    if isinstance(current, tuple) and r < 0.9:
        items = list(current)
        if items and rng.random() < 0.6:
            i = rng.randrange(len(items))
            items[i] = hostile_value(rng, items[i])
        else:
            items.append(rng.choice(INT_EDGES + STR_EDGES[:6]))
        return rng.choice((tuple, list))(items)
    if isinstance(current, int) and not isinstance(current, bool):
        return rng.choice((current + 1, current - 1, -current, U64 - current, current + 2**64))
    return rng.choice(hostile_objects())


def hostile_call(
    rng: random.Random, labels: Optional[Sequence[str]] = None
) -> Tuple[str, Callable[..., Any], Dict[str, Any]]:
    """A random constructor (of ``labels``, default all) and its valid arguments with 1-3 fields
    made hostile: (label, factory, kwargs)."""
    label, factory, build = rng.choice(constructor_targets(labels))
    kwargs = build()
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(sorted(kwargs))
        kwargs[name] = hostile_value(rng, kwargs[name])
    return label, factory, kwargs


def fuzz_constructor_once(rng: random.Random) -> Tuple[str, bool]:
    """One random constructor call with 1-3 hostile fields; returns (label, accepted)."""
    label, factory, kwargs = hostile_call(rng)
    return label, check_constructor(factory, kwargs, label) is not None


# --------------------------------------------------------------------------------------------
# seed documents


def seed_documents() -> List[str]:
    """Canonical placement JSON documents used as fuzz seeds (the committed corpus is built from
    these by ``python fuzz/pyfuzz.py --write-corpus``)."""
    from mooncake.reshard.weight import (
        OwnershipAxis, ParallelRank, ParallelTopology, PlacementFragment, ReplicatedAxis, SplitAxis,
        TensorDescriptor, TopologyParticipant, WeightPlacementManifest, weight_placement_to_json,
    )

    docs = []
    # spec 6.4 known answer
    t = TensorDescriptor(tensor_id="layers.2.experts.3.w1", global_shape=(4, 4), dtype="bfloat16", itemsize=2,
                         shard_dims=(0,), layout_fingerprint="test:qwen:bf16:v1",
                         parallel_axes=(SplitAxis("tp", 0),), layer_id=2, expert_id=3)
    topo = ParallelTopology(tp_size=1, pp_size=1, ep_size=1, dp_size=1,
                            participants=(TopologyParticipant("worker-0", ParallelRank()),))
    f = PlacementFragment("layers.2.experts.3.w1", (0, 0), (4, 4), 32, ParallelRank(),
                          placement_fragment_id="placement-0")
    docs.append(weight_placement_to_json(WeightPlacementManifest.from_fragments(
        resource_id="model", revision="revision", weight_generation=7, placement_set_id="placement-set-7",
        topology=topo, tensors=(t,), fragments=(f,))))
    # TP2 x DP2 with tied weights, a pipeline stage, an empty participant, derived ids
    ranks = [ParallelRank(dp=d, tp=r, pp=p) for d in range(2) for r in range(2) for p in range(2)]
    topo = ParallelTopology(tp_size=2, pp_size=2, ep_size=1, dp_size=2,
                            participants=tuple(TopologyParticipant(f"w-{r.dp}{r.tp}{r.pp}", r) for r in ranks))
    axes = (ReplicatedAxis("dp"), OwnershipAxis("pp"), SplitAxis("tp", 1))
    tensors = [TensorDescriptor(tensor_id=name, global_shape=(3, 4), dtype="int16", itemsize=2, shard_dims=(1,),
                                layout_fingerprint="fp", parallel_axes=axes, layer_id=0) for name in ("a", "b")]
    frags = []
    for r in ranks:
        if r.pp != 0:
            continue
        for name in ("a", "b"):
            frags.append(PlacementFragment(name, (0, 2 * r.tp), (3, 2), 12, r, pipeline_stage_id=1,
                                           aliases=("a", "b")))
    docs.append(weight_placement_to_json(WeightPlacementManifest.from_fragments(
        resource_id="m\u00e4", revision="r\x00", weight_generation=2**64 - 1, placement_set_id="s",
        topology=topo, tensors=tensors, fragments=frags)))
    # EP-owned experts plus 3-D segmented storage
    ranks = [ParallelRank(ep=e) for e in range(2)]
    topo = ParallelTopology(tp_size=1, pp_size=1, ep_size=2, dp_size=1,
                            participants=tuple(TopologyParticipant(f"e{r.ep}", r) for r in ranks))
    tensors = [TensorDescriptor(tensor_id="x", global_shape=(4, 2, 3), dtype="f32", itemsize=4, shard_dims=(0,),
                                layout_fingerprint="fp", parallel_axes=(SplitAxis("ep", 0),))]
    frags = [PlacementFragment("x", (2 * e, 0, 0), (2, 1, 3), 24, ParallelRank(ep=e)) for e in range(2)]
    frags += [PlacementFragment("x", (2 * e, 1, 0), (2, 1, 3), 24, ParallelRank(ep=e)) for e in range(2)]
    docs.append(weight_placement_to_json(WeightPlacementManifest.from_fragments(
        resource_id="moe", revision="1", weight_generation=0, placement_set_id="s", topology=topo,
        tensors=tensors, fragments=frags)))
    return docs


# Known, reported findings the short runs must not re-hit (see fuzz/findings/). None is open:
# F1 (huge axis sizes) is fixed and guarded by tests/test_regressions.py.


def known_finding(text: Any) -> Optional[str]:
    """The id of an open finding this input would trigger, else ``None`` (none are open)."""
    del text
    return None


def json_case(rng: random.Random, docs: List[str]) -> str:
    """One fuzz input derived from a seed document."""
    doc = json.loads(rng.choice(docs))
    mode = rng.random()
    if mode < 0.75:
        text = serialize(mutate_document(doc, rng, rounds=rng.randint(1, 3)), rng)
    elif mode < 0.95:
        text = mutate_text(serialize(doc, rng), rng)
    else:
        text = serialize(json_hostile(rng), rng)
    return text


class Hang(Finding):
    """A case ran longer than the per-case timeout."""


class case_timeout:
    """Context manager: raise :class:`Hang` after ``seconds`` (SIGALRM, main thread only)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def _fire(self, signum: int, frame: Any) -> None:
        raise Hang(f"case exceeded {self.seconds}s", None)

    def __enter__(self) -> None:
        import signal

        self._old = signal.signal(signal.SIGALRM, self._fire)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc: Any) -> None:
        import signal

        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._old)


def _limit_memory(megabytes: int) -> None:
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def main(argv: List[str]) -> int:
    import argparse
    import os
    import time

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--case-timeout", type=float, default=10.0, help="seconds before a case is a hang")
    parser.add_argument("--max-memory-mb", type=int, default=4096, help="address-space limit of the run")
    parser.add_argument("--write-corpus", metavar="DIR", help="write the seed documents as corpus files")
    args = parser.parse_args(argv)
    if args.write_corpus:
        os.makedirs(args.write_corpus, exist_ok=True)
        for i, text in enumerate(seed_documents()):
            with open(os.path.join(args.write_corpus, f"seed-{i}.json"), "w", encoding="utf-8") as fh:
                fh.write(text)
        return 0
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    docs = seed_documents()
    deadline = time.monotonic() + args.seconds
    count = accepted = skipped = 0
    _limit_memory(args.max_memory_mb)
    case_seed = seed
    while time.monotonic() < deadline:
        case_seed = (case_seed * 6364136223846793005 + 1442695040888963407) % 2**64
        rng = random.Random(case_seed)
        try:
            if rng.random() < 0.6:
                text = json_case(rng, docs)
                if known_finding(text):
                    skipped += 1
                    continue
                with case_timeout(args.case_timeout):
                    accepted += check_json_text(text) is not None
            else:
                with case_timeout(args.case_timeout):
                    accepted += fuzz_constructor_once(rng)[1]
        except Finding as finding:
            print(f"FINDING (reproduce: python fuzz/pyfuzz.py --case {case_seed}):\n{finding}", file=sys.stderr)
            return 1
        count += 1
    print(f"pyfuzz: {count} cases, {accepted} accepted, {skipped} skipped (known findings), seed {seed}, "
          "no findings")
    return 0


def run_case(case_seed: int) -> None:
    """Re-run one case by its seed (printed with every finding)."""
    rng = random.Random(case_seed)
    docs = seed_documents()
    if rng.random() < 0.6:
        check_json_text(json_case(rng, docs))
    else:
        fuzz_constructor_once(rng)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        run_case(int(sys.argv[2]))
        print("case passed")
        raise SystemExit(0)
    raise SystemExit(main(sys.argv[1:]))
