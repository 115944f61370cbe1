"""Smoke tests of the benchmark scripts: tiny arguments, JSON shape, counts and verdicts.

These are not timed tests: they check that both scripts run against the package, print the
documented JSON keys, and report the counts and accept/reject verdicts of spec/API.md section 14
(computed by the scripts from the objects) and counts of the scale workloads that follow from
their parameters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )


def test_runtime_binding_reports_section_14_counts_and_verdicts() -> None:
    completed = _run("runtime_binding.py", "--warmup", "0", "--repeats", "1")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["benchmark"] == "runtime_binding"
    assert document["arguments"] == {"warmup": 0, "repeats": 1, "physical_rows": 128, "physical_regions": 128}
    assert document["contract_mismatches"] == []
    assert document["counts"] == {
        "source_fragments": 8,
        "target_fragments": 8,
        "operations": 8,
        "selected_source_executors": 4,
        "target_executors": 8,
        "complete_source_executors": 8,
        "unselected_source_executors": 4,
        "operation_nbytes": [1024] * 8,
        "operation_repeat": [4096] * 8,
        "total_bytes": 33554432,
    }
    assert document["budgets"] == {
        "logical": {"required_segments": 32768, "accepted_at_required": True, "rejected_below_required": True},
        "physical": {"regions": 128, "segments": 16384, "accepted_at_required": True,
                     "rejected_below_required": True},
    }
    stages = {
        "logical_planning", "runtime_binding", "transfer_plan_revalidation", "pickle_dump", "pickle_restore",
        "physical_validation", "selected_source_projection", "complete_source_projection",
    }
    assert set(document["medians_ms"]) == stages
    assert set(document["reference_medians_ms"]) == stages
    assert set(document["speedup_vs_reference"]) == stages
    assert all(value > 0 for value in document["medians_ms"].values())
    assert document["reference_medians_ms"]["physical_validation"] == 84.4
    assert isinstance(document["binding_peak_traced_memory_bytes"], int)
    assert document["binding_peak_traced_memory_bytes"] > 0
    assert {"python", "machine"} <= set(document)


def test_runtime_binding_physical_workload_follows_its_arguments() -> None:
    completed = _run("runtime_binding.py", "--warmup", "0", "--repeats", "1",
                     "--physical-rows", "16", "--physical-regions", "32")
    assert completed.returncode == 0, completed.stderr
    physical = json.loads(completed.stdout)["budgets"]["physical"]
    assert physical == {"regions": 32, "segments": 512, "accepted_at_required": True,
                        "rejected_below_required": True}


def _pipeline_checks(result: Dict[str, Any]) -> None:
    assert "error" not in result, result.get("error")
    for stage in ("build_inputs", "assemble", "plan", "build_bindings", "bind", "pickle_dump", "pickle_load"):
        timings = result["stages"][stage]
        assert set(timings) == {"wall_s", "cpu_s", "system_s", "minor_faults", "peak_rss_after_bytes"}
        assert timings["system_s"] >= 0 and isinstance(timings["minor_faults"], int) and timings["minor_faults"] >= 0
    assert result["pipeline"]["stages"] == ["assemble", "plan", "bind"]
    assert result["pipeline"]["system_s"] == sum(result["stages"][s]["system_s"] for s in ("assemble", "plan", "bind"))
    memory = result["memory"]
    assert memory["peak_rss_bytes"] >= memory["baseline_rss_bytes"] > 0


def test_scale_small_preset(tmp_path: Path) -> None:
    output = tmp_path / "scale.json"
    completed = _run("scale.py", "--preset", "small", "--min-fragments", "100", "--max-fragments", "1000",
                     "--json", str(output))
    assert completed.returncode == 0, completed.stderr
    document = json.loads(output.read_text(encoding="utf-8"))
    assert document["benchmark"] == "scale"
    assert document["preset"] == "small"
    probe = document["machine"]["fault_probe"]  # the first-touch cost at the run's start
    assert probe["small_pages"]["minor_faults"] >= probe["bytes"] // probe["page_size"] // 2
    assert probe["small_pages"]["system_s_per_gib"] >= 0
    assert "first touch of fresh memory" in completed.stdout
    visits = document["machine"]["visit_probe"]  # object visits at the sweep's sizes
    assert [point["objects"] for point in visits["points"]] == [100, 1000]
    assert all(point["sequential_ns"] > 0 and point["random_ns"] > 0 for point in visits["points"])
    (decade,) = visits["growth"]
    assert (decade["from_objects"], decade["to_objects"]) == (100, 1000)
    assert decade["random_visit_factor"] == visits["points"][1]["random_ns"] / visits["points"][0]["random_ns"]
    assert "object visit, ns" in completed.stdout
    results = document["results"]
    assert set(results) == {"construction", "independent_experts", "grouped_experts", "orthogonal_tp",
                            "grid_3d", "sweep"}
    # Every timed workload ran after one untimed warm-up pipeline in its process (construction
    # times medians of many calls and runs none); each warm-up is recorded.
    assert document["parameters"]["warmup_fragments"] == 996
    timed = [results[name] for name in ("independent_experts", "grouped_experts", "orthogonal_tp", "grid_3d")]
    for result in timed + results["sweep"]["points"]:
        assert result["warmup"]["fragments"] == 996 and result["warmup"]["cpu_s"] > 0, result.get("warmup")
    assert results["construction"]["warmup"] is None
    assert "each process ran one untimed 996-fragment pipeline" in completed.stdout
    # The readable table goes to stdout when the JSON goes to a file.
    assert "assemble+plan+bind" in completed.stdout and "targets" in completed.stdout

    # Independent experts, 1 layer x 48 experts x 3 matrices: EP48 x DP2 -> EP16 x TP8.
    experts, tensors = 48, 48 * 3
    kimi = results["independent_experts"]
    _pipeline_checks(kimi)
    counts = kimi["counts"]
    assert counts["tensors"] == tensors
    assert counts["source_fragments"] == tensors * 2
    assert counts["target_fragments"] == tensors * 8
    assert counts["operations"] == tensors * 8  # each TP shard reads one whole expert matrix
    # w1/w3 shards are row blocks (1 segment); w2 shards are column blocks (7168 rows each).
    assert counts["lowered_segments"] == experts * 8 * (1 + 1 + 7168)
    assert counts["total_bytes"] == tensors * 2048 * 7168 * 2
    assert counts["source_executors"] == 48  # the selected DP replica only
    assert counts["target_executors"] == 128

    # Grouped experts: [48, ...] tensors, EP48 on dim 0 x DP2 -> EP16 x TP8.
    grouped = results["grouped_experts"]
    _pipeline_checks(grouped)
    counts = grouped["counts"]
    assert (counts["tensors"], counts["source_fragments"], counts["target_fragments"]) == (3, 3 * 96, 3 * 128)
    assert counts["operations"] == 3 * 128 * 3  # each target holds 3 experts, one source fragment each
    assert counts["lowered_segments"] == 128 * 3 * (1 + 1 + 7168)

    # Orthogonal TP: 2 tensors (1024, 1024), dim 0 over 8 ranks -> dim 1 over 8 ranks.
    orthogonal = results["orthogonal_tp"]
    _pipeline_checks(orthogonal)
    counts = orthogonal["counts"]
    assert counts["operations"] == 2 * 8 * 8
    assert counts["lowered_segments"] == 2 * 8 * 8 * 128
    assert counts["total_bytes"] == 2 * 1024 * 1024 * 2

    grid = results["grid_3d"]
    assert "error" not in grid, grid.get("error")
    assert grid["counts"] == {"boxes": 1000, "cells_per_dim": 10}

    sweep = results["sweep"]
    points: List[Dict[str, Any]] = sweep["points"]
    assert [p["counts"]["fragments"] for p in points] == [96, 996]
    for point in points:
        _pipeline_checks(point)
        assert point["counts"]["operations"] == point["counts"]["fragments"] // 6 * 4
    assert len(sweep["growth"]) == 1 and sweep["growth"][0]["pipeline_cpu_factor"] > 0

    construction = results["construction"]
    assert set(construction["ratio_vs_plain_dataclass"]) == {
        "placement_fragment_explicit_id", "placement_fragment_derived_id", "runtime_binding_fragment"}

    targets = document["targets"]
    assert targets["kimi_pipeline_cpu_under_2s"]["met"] is None  # scaled down: not judged
    assert targets["kimi_30x_below_reference"]["met"] is None
    assert isinstance(targets["growth_per_decade_at_most_12x"]["met"], bool)
    assert isinstance(targets["construction_at_most_1_5x_plain_dataclass"]["met"], bool)


def test_scale_sweep_keeps_the_fastest_of_its_repeats(tmp_path: Path) -> None:
    output = tmp_path / "sweep.json"
    completed = _run("scale.py", "--families", "sweep", "--min-fragments", "100", "--max-fragments", "1000",
                     "--sweep-repeats", "3", "--cold", "--json", str(output))
    assert completed.returncode == 0, completed.stderr
    document = json.loads(output.read_text(encoding="utf-8"))
    assert document["parameters"]["sweep_repeats"] == 3
    # --cold: the first calls of each process timed, no warm-up pipeline before them
    assert document["parameters"]["warmup_fragments"] == 0
    assert "cold processes" in completed.stdout
    sweep = document["results"]["sweep"]
    for point in sweep["points"]:
        _pipeline_checks(point)
        assert point["warmup"] is None
        runs = point["pipeline_cpu_s_runs"]
        assert len(runs) == 3 and point["pipeline"]["cpu_s"] == min(runs)
    first, second = sweep["points"]
    assert sweep["growth"][0]["pipeline_cpu_factor"] == second["pipeline"]["cpu_s"] / first["pipeline"]["cpu_s"]

    def user(point: Dict[str, Any]) -> float:
        return max(point["pipeline"]["cpu_s"] - point["pipeline"]["system_s"], 0.0)

    # the user-time factor beside the target's (kernel time apart), from the same kept runs
    assert sweep["growth"][0]["pipeline_user_cpu_factor"] == user(second) / max(user(first), 1e-9)
    assert "user growth" in completed.stdout


def test_bind_call_peaks_reports_c_calls() -> None:
    completed = _run("bind_call_peaks.py", "--layers", "1", "--experts", "48", "--top", "3")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["benchmark"] == "bind_call_peaks"
    assert document["arguments"] == {"layers": 1, "experts": 48, "top": 3}
    # 1 layer x 48 experts x 3 matrices, each split over expert-TP 8 on the serving side
    assert document["operations"] == document["result_operations"] == 48 * 3 * 8
    assert document["kept_bytes_per_op"] > 0
    peaks = document["peaks"]
    assert len(peaks) == 3
    values = [row["peak_bytes_per_op"] for row in peaks]
    assert values == sorted(values, reverse=True)
    # bind keeps its result, so the peak inside its largest call is at least what it keeps
    assert values[0] >= document["kept_bytes_per_op"]


def test_bind_rss_curve_reports_stages_and_peak() -> None:
    completed = _run("bind_rss_curve.py", "--layers", "1", "--experts", "48", "--step", "1")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["benchmark"] == "bind_rss_curve"
    assert document["operations"] == 48 * 3 * 8
    stages = document["stages_rss_hwm_mib"]
    assert list(stages) == ["inputs", "assemble", "plan", "bindings", "bind"]
    # the high-water mark never falls, and bind's is the document's peak
    marks = [hwm for _, hwm in stages.values()]
    assert marks == sorted(marks) and document["bind_peak_mib"] == marks[-1]
    assert all(rss <= hwm for rss, hwm in stages.values())
    for event, function, caller, rss, hwm in document["bind_events"]:
        assert event in ("c_call", "c_return", "c_exception") and function and ":" in caller
        assert 0 < rss <= hwm <= document["bind_peak_mib"]



def test_pickle_formats_reports_both_values_at_both_protocols() -> None:
    completed = _run("pickle_formats.py", "--fragments", "1000", "--repeats", "1")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["fragments"] == 1000
    for value in ("placement", "plan"):
        for protocol in (4, 5):
            assert document[f"{value}_p{protocol}_bytes"] > 0
            assert document[f"{value}_p{protocol}_dump_s"] >= 0 and document[f"{value}_p{protocol}_load_s"] >= 0


def test_instruction_counts_loop_runs_every_stage() -> None:
    # The callgrind harness's workload (valgrind itself is not needed: --loop is what it profiles).
    for stage in ("replace", "restore", "bind"):
        completed = _run("instruction_counts.py", "--loop", stage, "2")
        assert completed.returncode == 0, completed.stderr


def test_instruction_counts_refuses_an_unknown_stage() -> None:
    completed = _run("instruction_counts.py", "--stages", "replace,unpickle")
    assert completed.returncode == 2
    assert "unpickle" in completed.stderr


def _benchmark_module(name: str) -> Any:
    """benchmarks/NAME.py imported by path (the folder is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_perf_growth_reads_perf_report_text_as_seconds() -> None:
    module = _benchmark_module("perf_growth")
    report = "\n".join([
        "# Samples: 27K of event 'cpu-clock'",
        "# Overhead  Symbol",
        "#",
        "    50.00%  [k] clear_page_erms",
        "    25.00%  [.] bd_bind_regions_with",
        "    25.00%  [.] set_add_entry.constprop.0",
        "",
    ])
    assert module.parse_report(report, 2.0) == {
        "clear_page_erms": 1.0, "bd_bind_regions_with": 0.5, "set_add_entry.constprop.0": 0.5}


def test_perf_growth_orders_symbols_by_excess_over_linear() -> None:
    module = _benchmark_module("perf_growth")
    small = {"linear": 0.1, "superlinear": 0.01, "gone": 0.02}
    large = {"linear": 1.0, "superlinear": 0.5, "new": 0.05}
    rows = module.excess_rows(small, large, 10.0)
    assert [row[0] for row in rows] == ["superlinear", "new", "linear", "gone"]
    excess = {row[0]: row[1] for row in rows}
    assert abs(excess["superlinear"] - 0.4) < 1e-12 and abs(excess["linear"]) < 1e-12
    assert abs(excess["gone"] + 0.2) < 1e-12 and abs(excess["new"] - 0.05) < 1e-12


def test_visit_probe_times_both_orders_at_each_size() -> None:
    module = _benchmark_module("_visit_probe")
    probe = module.visit_probe([0, 20, 200], repeats=2)
    assert probe["repeats"] == 2
    assert [point["objects"] for point in probe["points"]] == [1, 20, 200]  # (at least one object)
    for point in probe["points"]:
        assert point["sequential_ns"] > 0 and point["random_ns"] > 0
        assert point["random_over_sequential"] == point["random_ns"] / point["sequential_ns"]
    assert [(row["from_objects"], row["to_objects"]) for row in probe["growth"]] == [(1, 20), (20, 200)]
    small, large = probe["points"][1:]
    assert probe["growth"][1]["random_visit_factor"] == large["random_ns"] / small["random_ns"]
    assert probe["growth"][1]["sequential_visit_factor"] == large["sequential_ns"] / small["sequential_ns"]


def test_instruction_growth_reads_callgrinds_collected_count() -> None:
    module = _benchmark_module("instruction_growth")
    log = "==19117== Events    : Ir\n==19117== Collected : 19661259127\n==19117==\n==19117== I   refs:      19,661,259,127\n"
    assert module.collected(log) == 19661259127
    with pytest.raises(ValueError, match="no 'Collected' line"):
        module.collected("==1== I   refs:      5\n")


def test_perf_growth_prepares_a_stage_that_runs() -> None:
    module = _benchmark_module("perf_growth")
    plan = module.prepare_stage("plan", 24)
    first = plan()
    assert len(first.operations) > 0 and plan() == first  # the same plan from the same placements
    bind = module.prepare_stage("bind", 24)
    assert len(bind().operations) == len(first.operations)  # one bound operation per planned one


def test_perf_growth_warms_a_fresh_process_up_before_the_stage() -> None:
    # (in a fresh interpreter: this process has bound plans already) The first large bind of a
    # process collects the package's code objects for its watch; the warm-up pays that, so the
    # plan stage prepared here (which binds nothing) finds them collected.
    script = (
        f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); import perf_growth\n"
        "from mooncake.reshard.weight._planner import exactness\n"
        "assert exactness._CODES is None\n"
        "perf_growth.prepare_stage('plan', 24)\n"
        "print('collected' if exactness._CODES is not None else 'not collected')\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=600, env=dict(os.environ))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["collected"]


def test_perf_growth_prepares_the_assemble_stage() -> None:
    module = _benchmark_module("perf_growth")
    assemble = module.prepare_stage("assemble", 24)
    source, target = assemble()
    again = assemble()
    assert source.digest == again[0].digest and target.digest == again[1].digest  # (computed)
    assert len(source.fragments) + len(target.fragments) >= 24


def test_perf_growth_prepares_the_restore_stage() -> None:
    module = _benchmark_module("perf_growth")
    bound = module.prepare_stage("bind", 24)()
    restore = module.prepare_stage("restore", 24)
    first = restore()
    assert first is not restore()  # a new plan from the payload at every call
    assert type(first) is type(bound) and first == bound  # the bound plan, round-tripped
    with pytest.raises(ValueError, match="unknown stage"):
        module.prepare_stage("dump", 24)


def test_perf_passes_offers_every_prepared_stage() -> None:
    assert _benchmark_module("perf_passes").STAGES == _benchmark_module("perf_growth").STAGES


def test_perf_passes_reads_inclusive_and_self_shares() -> None:
    module = _benchmark_module("perf_passes")
    report = "\n".join([
        "# Samples: 5K of event 'cpu-clock'",
        "# Children      Self  Symbol",
        "#",
        "    79.66%     0.05%  [.] _PyEval_EvalFrameDefault",
        "    20.34%     5.97%  [.] bd_bind_regions_with",
        "     9.91%     0.00%  [.] bd_attest_many",
        "     4.37%     0.00%  [.] bd_attest_many",
        "     5.11%     0.00%  [.] revalidate_views (inlined)",
        "     3.97%     3.97%  [.] PyTuple_GetItem",
        "     2.85%     2.85%  [k] clear_page_erms",
        "",
    ])
    shares = module.parse_children_report(report)
    assert shares["bd_bind_regions_with"] == (20.34, 5.97)
    assert abs(shares["bd_attest_many"][0] - 14.28) < 1e-9 and shares["bd_attest_many"][1] == 0.0  # (copies summed)
    assert shares["revalidate_views (inlined)"] == (5.11, 0.0)
    assert shares["clear_page_erms"] == (2.85, 2.85)
    assert len(shares) == 6
    nm_output = "\n".join([
        "0000000000012340 t bd_bind_regions_with",
        "0000000000012400 t bd_attest_many",
        "0000000000012500 T PyInit__native",
        "                 U PyTuple_GetItem",
        "0000000000080000 d bd_table_data",
    ])
    ours = module.extension_symbols(nm_output)
    assert ours == {"bd_bind_regions_with", "bd_attest_many", "PyInit__native"}
    assert [row[0] for row in module.pass_rows(shares, ours)] == ["bd_bind_regions_with", "bd_attest_many"]
    flat = module.flat_rows(shares)
    assert [row[0] for row in flat] == [
        "bd_bind_regions_with", "PyTuple_GetItem", "clear_page_erms", "_PyEval_EvalFrameDefault"]


def test_reference_side_by_side_child_reports_our_contract_plan() -> None:
    completed = _run("reference_side_by_side.py", "--child", "contract", "--warmup", "0", "--repeats", "1")
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["implementation"]["native"] is True
    assert result["operations"] == 8 and result["logical_planning_median_ms"] > 0
    assert len(result["fingerprint"]) == 64 and int(result["fingerprint"], 16) >= 0


def test_reference_side_by_side_fingerprints_every_operation_field() -> None:
    module = _benchmark_module("reference_side_by_side")
    contract = _benchmark_module("runtime_binding")
    from mooncake.reshard.weight import plan_placement_transfer

    source, target = contract.contract_placements()
    plan = plan_placement_transfer(source, target)
    again = plan_placement_transfer(*contract.contract_placements())
    assert module.plan_fingerprint(source, target, plan) == module.plan_fingerprint(source, target, again)

    class Shuffled:  # the same operations in another order
        operations = tuple(reversed(plan.operations))

    assert module.plan_fingerprint(source, target, Shuffled()) != module.plan_fingerprint(source, target, plan)
    swapped = module.plan_fingerprint(target, source, plan)  # the placements' ids count too
    assert swapped != module.plan_fingerprint(source, target, plan)


def test_reference_side_by_side_refuses_our_package_as_the_reference(tmp_path: Path) -> None:
    import mooncake.reshard

    # a "reference" directory whose mooncake.reshard is ours, C core included
    (tmp_path / "mooncake").mkdir()
    (tmp_path / "mooncake" / "__init__.py").write_text("")
    (tmp_path / "mooncake" / "reshard").symlink_to(Path(mooncake.reshard.__path__[0]).resolve())
    completed = _run("reference_side_by_side.py", "--reference", str(tmp_path), "--workloads", "contract",
                     "--processes", "1", "--warmup", "0", "--repeats", "1")
    assert completed.returncode != 0
    assert "not the reference in" in completed.stderr


def test_reference_side_by_side_requires_a_fetched_reference(tmp_path: Path) -> None:
    completed = _run("reference_side_by_side.py", "--reference", str(tmp_path))
    assert completed.returncode == 2
    assert "holds no reference package" in completed.stderr
    completed = _run("reference_side_by_side.py", "--reference", str(tmp_path), "--workloads", "contract,nope")
    assert completed.returncode == 2
    assert "unknown workloads: nope" in completed.stderr
