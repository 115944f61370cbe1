"""Spec §16 (and §1.2 last line): the public layer carries annotations a static checker sees.

A real checker, pyright, runs over the small programs in ``tests/typing_snippets/`` with the
package resolved exactly as Python resolves it (the directory ``mooncake.reshard`` is imported
from, so an installed wheel and an editable checkout are both covered). Each snippet says what the
checker must report, on the line where it must report it:

* ``# expect-error[<rule>]: <text>``: an error of that pyright rule on this line whose message
  contains ``<text>``;
* ``# expect-type: <type>``: on a ``reveal_type(...)`` line, the revealed type is exactly ``<type>``.

Every other error or warning in a snippet fails the test, so ``clean_*`` snippets must check clean
(``clean_end_to_end.py`` opts into strict mode, and ``type: ignore`` comments are disabled), and
every ``reject_*`` snippet must carry at least one expected error. A second run,
``pyright --verifytypes mooncake.reshard``, checks that every symbol the public modules export has
a known type.

The checker is pyright from PyPI, pinned by the ``test`` extra. Its wheel bundles the JavaScript
checker; the tests run that bundle with the machine's ``node`` directly, which never touches the
network (the pip wrapper would ask PyPI for a newer release, or fetch Node.js when none is found).
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import mooncake.reshard

SNIPPETS = Path(__file__).parent / "typing_snippets"
PACKAGE_DIR = Path(mooncake.reshard.__file__).resolve().parent
# The reference supports 3.9; this package's floor is 3.10 (spec 1.1): check against the floor.
PYTHON_FLOOR = "3.10"
CHECKER_TIMEOUT_S = 180

EXPECT_ERROR = re.compile(r"#\s*expect-error\[(?P<rule>\w+)\]:\s*(?P<text>.+?)\s*$")
EXPECT_TYPE = re.compile(r"#\s*expect-type:\s*(?P<type>.+?)\s*$")
REVEALED = re.compile(r'^Type of ".*" is "(?P<type>.*)"$', re.DOTALL)

# Modules of spec 2.1 whose exports pyright must see as public (the private ``_planner`` modules
# and the ``mooncake`` namespace package are not public modules).
PUBLIC_MODULES = {
    "mooncake.reshard",
    "mooncake.reshard.contracts",
    "mooncake.reshard.contracts.ids",
    "mooncake.reshard.contracts.fragments",
    "mooncake.reshard.contracts.manifest",
    "mooncake.reshard.geometry",
    "mooncake.reshard.weight",
    "mooncake.reshard.weight.manifest",
    "mooncake.reshard.weight.types",
    "mooncake.reshard.weight.topology",
    "mooncake.reshard.weight.part",
    "mooncake.reshard.weight.placement",
    "mooncake.reshard.weight.runtime",
    "mooncake.reshard.weight.binding",
    "mooncake.reshard.weight.validation",
    "mooncake.reshard.weight.serde",
    "mooncake.reshard.weight.storage_manifest",
    "mooncake.reshard.weight.planner",
}


@dataclass(frozen=True)
class Diagnostic:
    """One pyright diagnostic, reduced to what the expectations compare."""

    line: int  # 1-based
    severity: str
    rule: str
    message: str


@dataclass(frozen=True)
class Expectation:
    """One ``# expect-...`` comment of a snippet."""

    line: int
    kind: str  # "error" or "type"
    rule: str
    text: str


def _pyright_command() -> list[str]:
    """``node <bundled pyright>``; fails (never skips) when the checker is not installed."""
    try:
        import pyright  # installed by the ``test`` extra
    except ImportError:
        pytest.fail("pyright is not installed: install the test extra (pip install '.[test]')")
    bundle = Path(pyright.__file__).parent / "dist" / "index.js"
    assert bundle.is_file(), f"this pyright wheel does not bundle the checker: {bundle} is missing"
    node = shutil.which("node")
    if node is None:
        pytest.fail("pyright needs Node.js: no `node` on PATH (apt-get install nodejs)")
    return [node, str(bundle)]


def _run_pyright(args: list[str], *, cwd: Path, extra_env: dict[str, str]) -> dict[str, Any]:
    # The checker is not under test: keep a sanitizer preload (scripts/sanitize-tests.sh) out of node.
    env = {key: value for key, value in os.environ.items() if key != "LD_PRELOAD"}
    env.update(extra_env)
    completed = subprocess.run(
        [*_pyright_command(), "--outputjson", "--pythonpath", sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHECKER_TIMEOUT_S,
        check=False,
    )
    # 0: no errors, 1: errors reported; anything else is a checker or configuration failure.
    assert completed.returncode in (0, 1), (
        f"pyright failed (exit {completed.returncode}):\n{completed.stdout}\n{completed.stderr}"
    )
    report: dict[str, Any] = json.loads(completed.stdout)
    return report


@pytest.fixture(scope="module")
def search_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``mooncake/reshard`` = the package directory Python imports."""
    root = tmp_path_factory.mktemp("pyright-search-root")
    (root / "mooncake").mkdir()
    target = root / "mooncake" / "reshard"
    try:
        target.symlink_to(PACKAGE_DIR, target_is_directory=True)
    except OSError:  # pragma: no cover - platforms without symlinks
        shutil.copytree(PACKAGE_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture(scope="module")
def snippet_diagnostics(
    search_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[Diagnostic]]:
    """Run pyright once over every snippet; diagnostics grouped by snippet file name."""
    project = tmp_path_factory.mktemp("pyright-project")
    # pyright analyses files under its project root only: check copies of the snippets there.
    shutil.copytree(SNIPPETS, project / "snippets", ignore=shutil.ignore_patterns("__pycache__"))
    config = {
        "include": ["snippets"],
        "extraPaths": [str(search_root)],
        "pythonVersion": PYTHON_FLOOR,
        "typeCheckingMode": "standard",
        "enableTypeIgnoreComments": False,
    }
    (project / "pyrightconfig.json").write_text(json.dumps(config), encoding="utf-8")
    report = _run_pyright(["-p", str(project / "pyrightconfig.json")], cwd=project, extra_env={})
    snippet_files = sorted(path.name for path in SNIPPETS.glob("*.py"))
    assert report["summary"]["filesAnalyzed"] == len(snippet_files)
    grouped: dict[str, list[Diagnostic]] = {name: [] for name in snippet_files}
    for raw in report["generalDiagnostics"]:
        name = Path(raw["file"]).name
        assert name in grouped, f"diagnostic outside the snippets: {raw}"
        grouped[name].append(
            Diagnostic(
                line=raw["range"]["start"]["line"] + 1,
                severity=raw["severity"],
                rule=raw.get("rule", ""),
                message=raw["message"],
            )
        )
    return grouped


def _expectations(path: Path) -> list[Expectation]:
    found: list[Expectation] = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        error = EXPECT_ERROR.search(text)
        if error:
            found.append(Expectation(number, "error", error["rule"], error["text"]))
        revealed = EXPECT_TYPE.search(text)
        if revealed:
            found.append(Expectation(number, "type", "", revealed["type"]))
    return found


def _matches(expectation: Expectation, diagnostic: Diagnostic) -> bool:
    if diagnostic.line != expectation.line:
        return False
    if expectation.kind == "error":
        return (
            diagnostic.severity == "error"
            and diagnostic.rule == expectation.rule
            and expectation.text in diagnostic.message
        )
    revealed = REVEALED.match(diagnostic.message)
    return diagnostic.severity == "information" and revealed is not None and revealed["type"] == expectation.text


def _check_snippet(
    name: str, diagnostics: dict[str, list[Diagnostic]], *, must_flag: tuple[str, ...] = ()
) -> None:
    """The snippet's diagnostics are exactly its expectations; ``must_flag`` lines are expected errors."""
    path = SNIPPETS / name
    expectations = _expectations(path)
    found = diagnostics[name]
    missing = [e for e in expectations if not any(_matches(e, d) for d in found)]
    unexpected = [
        d
        for d in found
        if (d.severity != "information" or REVEALED.match(d.message))
        and not any(_matches(e, d) for e in expectations)
    ]
    assert not missing and not unexpected, (
        f"{name}: expected but not reported: {missing}; reported but not expected: {unexpected}"
    )
    lines = path.read_text(encoding="utf-8").splitlines()
    error_lines = {e.line for e in expectations if e.kind == "error"}
    for source in must_flag:
        flagged = [n for n, text in enumerate(lines, start=1) if source in text and n in error_lines]
        assert flagged, f"{name}: no expected error on a line containing {source!r}"


def test_package_ships_pep561_marker_and_native_stub() -> None:
    assert (PACKAGE_DIR / "py.typed").is_file()
    assert (PACKAGE_DIR / "_native.pyi").is_file()


def test_every_snippet_states_its_outcome() -> None:
    names = sorted(path.name for path in SNIPPETS.glob("*.py"))
    assert "clean_end_to_end.py" in names
    for name in names:
        kinds = {e.kind for e in _expectations(SNIPPETS / name)}
        if name.startswith("reject_"):
            assert "error" in kinds, f"{name} expects no error"
        else:
            assert name.startswith("clean_"), f"{name}: snippet names start with clean_ or reject_"
            assert "error" not in kinds, f"{name} is a clean snippet but expects errors"


def test_split_axis_kind_is_a_literal(snippet_diagnostics: dict[str, list[Diagnostic]]) -> None:
    """Spec 16: ``SplitAxis(kind="pp", dim=0)`` is reported (kind is Literal["ep", "tp"])."""
    _check_snippet(
        "reject_split_axis_kind.py",
        snippet_diagnostics,
        must_flag=('SplitAxis(kind="pp", dim=0)', 'ReplicatedAxis("cp")'),
    )


def test_missing_required_argument_is_reported(snippet_diagnostics: dict[str, list[Diagnostic]]) -> None:
    """Spec 16: ``TransferPlan(...)`` without ``target_placement`` is a missing argument."""
    _check_snippet(
        "reject_missing_arguments.py",
        snippet_diagnostics,
        must_flag=("TransferPlan(", "LogicalTransferPlan(", "TensorDescriptor("),
    )


def test_id_newtypes_do_not_mix(snippet_diagnostics: dict[str, list[Diagnostic]]) -> None:
    """Spec 16: a ``TensorId`` where a ``PlacementId`` is required is reported (and other pairs)."""
    _check_snippet(
        "reject_id_mixups.py",
        snippet_diagnostics,
        must_flag=('placement_id=TensorId("layers.0.w")',),
    )


def test_signature_shapes_are_visible(snippet_diagnostics: dict[str, list[Diagnostic]]) -> None:
    """Keyword-only constructors and parameters, frozen fields and read-only properties."""
    _check_snippet(
        "reject_signature_misuse.py",
        snippet_diagnostics,
        must_flag=("ParallelTopology(1, 1, 1, 1", "rank.tp = 1", "placement.digest ="),
    )


def test_correct_program_checks_clean(snippet_diagnostics: dict[str, list[Diagnostic]]) -> None:
    """A correct end-to-end program has no diagnostic in strict mode, and its values have exact types."""
    text = (SNIPPETS / "clean_end_to_end.py").read_text(encoding="utf-8")
    assert "# pyright: strict" in text
    assert len([e for e in _expectations(SNIPPETS / "clean_end_to_end.py") if e.kind == "type"]) >= 10
    _check_snippet("clean_end_to_end.py", snippet_diagnostics)


def test_correct_program_runs() -> None:
    """The clean snippet is a real program: it runs (plans, binds, resolves) without error."""
    runpy.run_path(str(SNIPPETS / "clean_end_to_end.py"), run_name="__main__")


def test_public_surface_types_are_complete(search_root: Path, tmp_path: Path) -> None:
    """``pyright --verifytypes``: every symbol exported by the public modules has a known type."""
    report = _run_pyright(
        ["--verifytypes", "mooncake.reshard", "--ignoreexternal"],
        cwd=tmp_path,
        extra_env={"PYTHONPATH": os.pathsep.join(filter(None, [str(search_root), os.environ.get("PYTHONPATH")]))},
    )
    completeness = report["typeCompleteness"]
    assert completeness["pyTypedPath"], "pyright found no py.typed marker"
    assert Path(completeness["moduleRootDirectory"]).resolve() == PACKAGE_DIR
    checked = {module["name"] for module in completeness["modules"]}
    assert PUBLIC_MODULES <= checked, f"modules pyright did not see: {sorted(PUBLIC_MODULES - checked)}"
    problems = [
        (symbol["name"], diagnostic["message"])
        for symbol in completeness["symbols"]
        for diagnostic in symbol.get("diagnostics", [])
        if diagnostic["severity"] == "error"
    ]
    assert not problems, problems
    for counts in (completeness["exportedSymbolCounts"], completeness["otherSymbolCounts"]):
        assert counts["withUnknownType"] == 0 and counts["withAmbiguousType"] == 0, counts
    assert completeness["exportedSymbolCounts"]["withKnownType"] > 300
    assert completeness["completenessScore"] == 1
