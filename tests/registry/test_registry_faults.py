"""Files the registry must refuse or handle: corrupt, foreign and newer databases, altered
scores files, read-only registries, an older schema migrated on open; and comparability,
which says what differs between two runs."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ragmeter
from ragmeter.registry import SCHEMA_VERSION, Registry, RegistryError
from ragmeter.registry._schema import V1_SCRIPT
from ragmeter.report import RetrievalEvalReport

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def report(qrels: dict[str, dict[str, float]], run: dict[str, list[str]]) -> RetrievalEvalReport:
    return ragmeter.evaluate_run(qrels, run, k_values=(10,), metrics=["ndcg", "recall"])


@pytest.fixture(autouse=True)
def _outside_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _refused(path: Path, match: str) -> None:
    with pytest.raises(RegistryError, match=match) as caught:
        Registry(path).runs()
    assert str(path) in str(caught.value)


def test_a_file_that_is_not_sqlite_is_named(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"this is not a database\n" * 200)
    _refused(path, "not a SQLite database or it is corrupt")


def test_a_damaged_registry_is_named(tmp_path: Path, report: RetrievalEvalReport) -> None:
    path = tmp_path / "runs.sqlite"
    with Registry(path) as registry:
        for i in range(30):
            registry.save(report, name=f"run{i}", note="x" * 2000)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    blob = bytearray(path.read_bytes())
    page = 4096
    for start in range(page, len(blob), page):  # every page after the first: garbage
        blob[start : start + page] = b"\xa5" * min(page, len(blob) - start)
    path.write_bytes(bytes(blob))
    with pytest.raises(RegistryError) as caught:
        Registry(path).runs()
    assert str(path) in str(caught.value)


def test_a_foreign_sqlite_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    _refused(path, "a SQLite database but not a ragmeter run registry")
    with pytest.raises(RegistryError, match="not a ragmeter run registry"):
        Registry(path).save(RetrievalEvalReport({}, {}, 0, ()), name="x")
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]  # untouched


def test_a_newer_schema_is_refused(tmp_path: Path, report: RetrievalEvalReport) -> None:
    path = tmp_path / "runs.sqlite"
    Registry(path).save(report, name="a")
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    _refused(path, f"schema version {SCHEMA_VERSION + 1}, written by a newer ragmeter")


def test_an_altered_scores_file_is_refused(tmp_path: Path, report: RetrievalEvalReport) -> None:
    registry = Registry(tmp_path / "runs.sqlite")
    record = registry.save(report, name="a")
    record.scores_path.write_bytes(record.scores_path.read_bytes() + b"\0")
    with pytest.raises(RegistryError, match="does not match the registry's sha256") as caught:
        registry.load_report("a")
    assert str(record.scores_path) in str(caught.value)
    record.scores_path.unlink()
    with pytest.raises(RegistryError, match="cannot be read"):
        registry.load_report("a")


def test_a_version_1_registry_is_migrated_on_open(
    tmp_path: Path, report: RetrievalEvalReport
) -> None:
    current = Registry(tmp_path / "now" / "runs.sqlite")
    saved = current.save(report, name="old", tags={"model": "bm25"})
    current.close()
    old = tmp_path / "old" / "runs.sqlite"
    old.parent.mkdir()
    shutil.copytree(tmp_path / "now" / "scores", tmp_path / "old" / "scores")
    conn = sqlite3.connect(old)
    conn.executescript(V1_SCRIPT)  # the version 1 schema, as ragmeter's first release made it
    conn.execute(f"PRAGMA application_id = {0x52474D52}")
    conn.execute("PRAGMA user_version = 1")
    conn.execute("ATTACH ? AS now", [str(tmp_path / "now" / "runs.sqlite")])
    v1 = [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    conn.execute(f"INSERT INTO runs ({', '.join(v1)}) SELECT {', '.join(v1)} FROM now.runs")
    conn.commit()
    conn.close()
    migrated = Registry(old)
    record = migrated.get("old")
    assert record.id == saved.id and record.tags == {"model": "bm25"} and record.note is None
    assert migrated.runs(tag="model=bm25") == [record]
    assert migrated.load_report(record).per_query == report.per_query
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    with pytest.raises(RegistryError, match="open it once writable to migrate it"):
        conn = sqlite3.connect(tmp_path / "v1.sqlite")
        conn.executescript(V1_SCRIPT)
        conn.execute(f"PRAGMA application_id = {0x52474D52}")
        conn.execute("PRAGMA user_version = 1")
        conn.close()
        Registry(tmp_path / "v1.sqlite", read_only=True).runs()


def test_read_only_lists_loads_and_compares_but_does_not_save(
    tmp_path: Path, report: RetrievalEvalReport
) -> None:
    path = tmp_path / "runs.sqlite"
    with Registry(path) as registry:
        a = registry.save(report, name="a")
        registry.save(report, name="b")
    before = path.read_bytes()
    with Registry(path, read_only=True) as registry:
        assert [r.name for r in registry.runs()] == ["b", "a"]
        assert registry.load_report("a").per_query == report.per_query
        assert registry.comparability("a", "b").comparable
        for act in (
            lambda: registry.save(report, name="c"),
            lambda: registry.pin("a"),
            lambda: registry.rm("a"),
        ):
            with pytest.raises(RegistryError, match="read-only") as caught:
                act()
            assert str(path) in str(caught.value)
    assert path.read_bytes() == before and Registry(path).get(a.id).id == a.id
    with pytest.raises(ragmeter.registry.RunNotFoundError, match="does not exist yet"):
        Registry(tmp_path / "missing.sqlite", read_only=True).get("latest")
    assert not (tmp_path / "missing.sqlite").exists()


def test_comparability_says_what_differs(
    qrels: dict[str, dict[str, float]], run: dict[str, list[str]], tmp_path: Path
) -> None:
    registry = Registry(tmp_path / "runs.sqlite")
    base = registry.save(ragmeter.evaluate_run(qrels, run, k_values=(10,)), name="base")
    again = registry.save(ragmeter.evaluate_run(qrels, run, k_values=(10,)), name="again")
    same = registry.comparability(base, again)
    assert same.comparable and same.reasons == [] and same.only_a == same.only_b == []
    assert same.common == list(registry.load_report(base).per_query)
    first = sorted(qrels)[0]
    more = {q: dict(j) for q, j in qrels.items()}
    more[first]["a-new-doc"] = 1
    del more[sorted(qrels)[-1]]
    other = registry.save(
        ragmeter.evaluate_run(more, run, k_values=(10,), missing_queries="skip"), name="other"
    )
    verdict = registry.comparability("base", other)
    assert not verdict.comparable
    assert verdict.reasons[0] == (
        f"qrels changed: 1 judgement added in 1 query ({first}); "
        f"1 query removed ({sorted(qrels)[-1]})"
    )
    assert verdict.reasons[1].startswith("averaging ")
    assert verdict.only_a == [sorted(qrels)[-1]] and verdict.only_b == []
    assert len(verdict.common) == len(same.common) - 1
    hand = RetrievalEvalReport.from_dict(
        {k: v for k, v in json.loads(registry.load_report(base).to_json()).items()
         if k != "fingerprints"}
    )  # fmt: skip
    made = registry.save(hand, name="hand")
    assert registry.comparability(base, made).reasons == [
        "run b has no dataset fingerprint (a report made by hand)"
    ]


# -- a registry the user cannot write, for real (root ignores file modes) ----------------

CHILD = """
import json, os, sys
sys.path.insert(0, sys.argv[2])
from ragmeter.registry import Registry
os.setgid(65534)
os.setuid(65534)
out = {}
with Registry(sys.argv[1]) as registry:
    out["names"] = [r.name for r in registry.runs()]
    out["rows"] = len(registry.load_report("a").per_query)
    out["comparable"] = registry.comparability("a", "b").comparable
    try:
        registry.save(registry.load_report("a"), name="c")
    except Exception as exc:
        out["save"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory an unprivileged user can enter (pytest's ``tmp_path`` is root-only)."""
    root = Path(tempfile.mkdtemp(prefix="ragmeter-reg-ro-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        for p in [root, *root.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(root)


@pytest.mark.parametrize("layout", ["read-only file", "read-only directory"])
def test_a_registry_the_user_cannot_write(
    shared_dir: Path, report: RetrievalEvalReport, layout: str
) -> None:
    if os.geteuid() != 0 or not hasattr(os, "setuid"):  # pragma: no cover
        pytest.skip("needs os.setuid to test as an ordinary user")
    folder = shared_dir / "reg"
    path = folder / "runs.sqlite"
    with Registry(path) as registry:
        registry.save(report, name="a")
        registry.save(report, name="b")
    for p in [path, *(folder / "scores").iterdir()]:
        p.chmod(0o444)
    (folder / "scores").chmod(0o555)
    folder.chmod(0o777 if layout == "read-only file" else 0o555)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(SRC)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=shared_dir,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["names"] == ["b", "a"] and out["rows"] == len(report.per_query)
    assert out["comparable"] is True
    assert out["save"] == (
        f"RegistryError: the run registry {path} is read-only (no write permission): list, "
        "show, load and compare work; save to a writable registry"
    )


def test_clean_removes_what_killed_saves_left(tmp_path: Path, report: RetrievalEvalReport) -> None:
    registry = Registry(tmp_path / "runs.sqlite")
    kept = registry.save(report, name="a")
    scores = tmp_path / "scores"
    orphan = scores / "0123456789ab.jsonl.gz"  # written, then killed before its row
    temp = scores / ".fedcba987654.jsonl.gz.4242.tmp"  # killed while writing
    fresh = scores / "aaaaaaaaaaaa.jsonl.gz"  # another process's save in progress
    for path in (orphan, temp, fresh):
        path.write_bytes(b"partial")
    old = time.time() - 7200
    for path in (orphan, temp, kept.scores_path):
        os.utime(path, (old, old))
    assert sorted(registry.clean()) == sorted([orphan, temp])
    assert fresh.exists() and kept.scores_path.exists()
    assert registry.load_report("a").per_query == report.per_query
    registry.save(report, name="b")
    registry.rm("b")  # rm cleans too
    assert sorted(p.name for p in scores.iterdir()) == sorted([kept.scores_path.name, fresh.name])
