"""F2 reproducer: a plan pickle whose region (or executor) fields have the wrong type or are
missing fails revalidation with Python's own TypeError/AttributeError instead of a spec
ValueError. Same outcome through the packed record (protocol 5), the compact record (protocol
4), the field-state format and dataclasses.replace: the revalidation rules are the owner."""

import dataclasses

import _pickle_repro as R

plan = R.plan()
record = R.record(plan)
operations = list(record[8])  # eleven items per operation (TransferRegion fields, indices for source/target)
bad = []
for index, value, label in ((7, "4", "inner_bytes='4'"), (3, None, "overlap_offset=None"), (9, 6, "source_strides=6")):
    edited = list(record)
    row = list(operations)
    row[index] = value
    edited[8] = tuple(row)
    bad.append(R.outcome(f"protocol 4, region {label}", lambda e=edited: R.load_record(e)))
    bad.append(R.outcome(f"protocol 5 (packed), region {label}", lambda e=edited: R.load_packed(e)))

# Field-state format and replace(): the same rule fails the same way (not the pickle codec).
op = plan.operations[0]
forged_op = R.forged(op, inner_bytes="4")
state = plan.__getstate__()
state["operations"] = (forged_op,) + plan.operations[1:]
bad.append(R.outcome("field state, region inner_bytes='4'", lambda: R.load_field_state(state)))
bad.append(R.outcome("dataclasses.replace, region inner_bytes='4'",
                     lambda: dataclasses.replace(plan, operations=state["operations"])))
missing = R.forged(op, target_strides=...)
state["operations"] = (missing,) + plan.operations[1:]
bad.append(R.outcome("field state, region without target_strides", lambda: R.load_field_state(state)))
executor = plan.source_executors[0]
state = plan.__getstate__()
state["source_executors"] = (R.forged(executor, placement_id=...),) + plan.source_executors[1:]
bad.append(R.outcome("field state, executor without placement_id", lambda: R.load_field_state(state)))
if any(not line.endswith("accepted") and ": ValueError: " not in line for line in bad):
    print("F2 reproduced: non-ValueError rejection(s) above")
else:
    print("F2 fixed: every forgery is rejected with ValueError")
