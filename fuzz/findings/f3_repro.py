"""F3 reproducer: placement-graph objects restored by default pickling (spec §13: no
validation) reach the attestation's validated-state routine (spec §9.2) and the runtime view
construction, which assume a validated placement: a part whose fragments name a tensor it does
not declare raises KeyError, a parts tuple holding a non-part raises AttributeError, evidence
fragments that are not a sequence raise TypeError -- instead of a spec ValueError."""

import _pickle_repro as R

plan = R.plan()
record = R.record(plan)
placement = record[4]  # target placement
part = placement.parts[0]
tensor = part.tensors[0]
lines = []

# 1. the part declares another tensor id than its fragments use -> KeyError in weight/binding.py
bad_part = R.forged(part, tensors=(R.forged(tensor, tensor_id="other"),))
bad_placement = R.forged(placement, parts=(bad_part,) + placement.parts[1:])
for key in [k for k in bad_placement.__dict__ if k.startswith("_") and k != "_digest_cache"]:
    del bad_placement.__dict__[key]
edited = list(record)
edited[4] = bad_placement
# the attestations of target operations carry the same placement object in the record
edited[6] = tuple(bad_placement if item is placement else item for item in record[6])
lines.append(R.outcome("protocol 4, part tensor id forged", lambda: R.load_record(edited)))
lines.append(R.outcome("protocol 5 (packed), part tensor id forged", lambda: R.load_packed(edited)))

# 2. a parts tuple holding a non-part -> AttributeError in weight/placement.py (_part_index)
bad_placement2 = R.forged(bad_placement, parts=(1,) + placement.parts[1:])
edited2 = list(record)
edited2[4] = bad_placement2
edited2[6] = tuple(bad_placement2 if item is placement else item for item in record[6])
lines.append(R.outcome("protocol 4, parts holds an int", lambda: R.load_record(edited2)))

# 3. evidence whose fragments is not a sequence -> TypeError in _planner/attestation.py
evidence_index = next(i for i, item in enumerate(record[6]) if type(item).__name__ == "RuntimeBindingEvidence")
edited3 = list(record)
table = list(record[6])
table[evidence_index] = R.forged(table[evidence_index], fragments=True)
edited3[6] = tuple(table)
lines.append(R.outcome("protocol 4, evidence fragments=True", lambda: R.load_record(edited3)))

if any(not line.endswith("accepted") and ": ValueError: " not in line for line in lines):
    print("F3 reproduced: non-ValueError rejection(s) above")
else:
    print("F3 fixed: every forgery is rejected with ValueError")
