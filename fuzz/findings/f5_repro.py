"""F5 reproducer: a plan pickle whose target placement carries forged content (restored by
default pickling without validation, spec §13) was ACCEPTED when the forgery is in a field the
plan revalidation never reads: here the tensor descriptor's layout_fingerprint becomes a float
NaN (not a str; the placement_id no longer matches its content). The restored plan then failed
its own round trip (NaN != NaN) and carried a placement its constructor would refuse. Since
session 18 the placement-graph restores refuse a field of the wrong type ("layout_fingerprint
must be a non-empty string"); a forgery of the right type (another string) is still accepted."""

import dataclasses
import pickle

import _pickle_repro as R

plan = R.plan()
record = R.record(plan)
placement = record[4]
tensor = placement.tensors[0]
nan_tensor = R.forged(tensor, layout_fingerprint=float("nan"))
parts = tuple(R.forged(part, tensors=(nan_tensor,)) for part in placement.parts)
bad = R.forged(placement, tensors=(nan_tensor,), parts=parts)
for key in [k for k in bad.__dict__ if k.startswith("_") and k != "_digest_cache"]:
    del bad.__dict__[key]
edited = list(record)
edited[4] = bad
edited[6] = tuple(bad if item is placement else item for item in record[6])
accepted = []
for label, load in (("protocol 4", lambda: R.load_record(edited)), ("protocol 5 (packed)", lambda: R.load_packed(edited))):
    try:
        restored = load()
    except Exception as exc:  # noqa: BLE001
        print(f"{label}: rejected: {type(exc).__name__}: {exc}")
        continue
    fingerprint = restored.target_placement.tensors[0].layout_fingerprint
    again = pickle.loads(pickle.dumps(restored, protocol=5))
    replaced = dataclasses.replace(restored)
    print(f"{label}: accepted; layout_fingerprint={fingerprint!r}; round trip equal: {again == restored}; "
          f"replace accepted: {replaced is not None}")
    accepted.append(label)
    try:
        type(placement).from_fragments(
            resource_id=placement.resource_id, revision=placement.revision,
            weight_generation=placement.weight_generation, placement_set_id=placement.placement_set_id,
            topology=placement.topology, tensors=restored.target_placement.tensors, fragments=placement.fragments)
    except Exception as exc:  # noqa: BLE001
        print(f"  the same tensors through the placement constructor: {type(exc).__name__}: {exc}")
print("F5 reproduced: forged placement accepted" if accepted else "F5 fixed: forged placement rejected")
