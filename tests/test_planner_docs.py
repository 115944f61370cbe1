"""docs/planning.md: the worked example runs and its stated numbers are the plan's."""

from __future__ import annotations

import os
import re

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "planning.md")


def test_planning_guide_example_reproduces() -> None:
    with open(DOC, encoding="utf-8") as handle:
        text = handle.read()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    namespace: dict = {}
    for block in blocks[:3]:
        exec(compile(block, DOC, "exec"), namespace)  # noqa: S102 - our own documentation
    plan = namespace["plan"]
    rows = [(op.source.placement_fragment_id, op.target.placement_fragment_id, op.overlap_offset, op.overlap_shape)
            for op in plan.operations]
    assert rows == [
        ("src-tp0", "dst-tp0", (0, 0), (2, 3)),
        ("src-tp1", "dst-tp0", (2, 0), (2, 3)),
        ("src-tp0", "dst-tp1", (0, 3), (2, 3)),
        ("src-tp1", "dst-tp1", (2, 3), (2, 3)),
    ]
    op = plan.operations[2]
    assert (op.source_base_offset, op.target_base_offset, op.inner_bytes) == (6, 0, 6)
    assert (op.outer_loop_counts, op.source_strides, op.target_strides) == ((2,), (12,), (6,))
    assert list(op.iter_segments(max_segments=10)) == [(6, 0, 6), (18, 6, 6)]
    assert (op.segment_count, op.total_bytes) == (2, 12)
