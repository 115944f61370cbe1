"""F4 reproducer: a stored-source plan pickle (field-state format: stored-source plans never use
the record) whose StoredWeightManifest carries a StoredFragmentSnapshot with a missing field
(a forged default-pickled dict) raises AttributeError from StoredWeightManifest.__post_init__
(re-run by its __setstate__, spec §13) instead of a spec ValueError; a snapshot field of the
wrong type raises TypeError the same way."""

import pickle

import _pickle_repro as R

plan = R.plan("stored")
manifest = plan.source_manifest
snapshot = manifest.fragments[0]
lines = []
for label, edit in (("without object_key", {"object_key": ...}), ("global_offset=None", {"global_offset": None}),
                    ("without nbytes", {"nbytes": ...})):
    forged_manifest = R.forged(manifest, fragments=(R.forged(snapshot, **edit),) + manifest.fragments[1:])
    state = plan.__getstate__()
    state["source_manifest"] = forged_manifest
    lines.append(R.outcome(f"field state, stored snapshot {label}", lambda s=state: R.load_field_state(s)))
    # the manifest alone: its own pickle (StoredWeightManifest.__setstate__ re-runs __post_init__)
    lines.append(R.outcome(f"StoredWeightManifest pickle, snapshot {label}",
                           lambda m=forged_manifest: pickle.loads(pickle.dumps(m, protocol=4))))
if any(not line.endswith("accepted") and ": ValueError: " not in line for line in lines):
    print("F4 reproduced: non-ValueError rejection(s) above")
else:
    print("F4 fixed: every forgery is rejected with ValueError")
