"""The registry's API end to end on trec_eval's own test collection: save, list, get by every
reference form, load back bit for bit, pin, unpin, rm, and the stored intervals against
scipy."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import scipy.stats

import ragmeter
from ragmeter.registry import Registry, RunNotFoundError, RunRecord
from ragmeter.report import RetrievalEvalReport


@pytest.fixture(scope="module")
def report(qrels: dict[str, dict[str, float]], run: dict[str, list[str]]) -> RetrievalEvalReport:
    return ragmeter.evaluate_run(qrels, run, k_values=(5, 10), metrics=["ndcg", "recall", "map"])


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    with Registry(tmp_path / "reg" / "runs.sqlite") as reg:
        yield reg


def test_save_list_and_load_back_bit_for_bit(
    registry: Registry, report: RetrievalEvalReport
) -> None:
    assert not registry.path.exists()  # created on the first save
    record = report.save(name="bm25", tags={"model": "bm25"}, registry=registry, note="first")
    assert isinstance(record, RunRecord) and registry.path.exists()
    assert record.kind == "retrieval" and record.name == "bm25" and record.note == "first"
    assert record.tags == {"model": "bm25"} and not record.pinned
    assert record.created.tzinfo is not None
    assert record.scores_path == registry.path.parent / "scores" / f"{record.id}.jsonl.gz"
    assert record.ragmeter_version == ragmeter.__version__
    assert record.dataset == report.dataset_fingerprint
    assert record.config == report.config_fingerprint
    assert set(record.metrics) == set(report.metrics)
    loaded = registry.load_report(record.id)
    assert isinstance(loaded, RetrievalEvalReport)
    assert loaded.metrics == report.metrics
    assert json.dumps(loaded.per_query) == json.dumps(report.per_query)  # bit for bit
    assert loaded.judged is not None and report.judged is not None
    assert loaded.judged.per_query == report.judged.per_query
    assert loaded.conventions == report.conventions
    assert loaded.dataset_fingerprint == report.dataset_fingerprint
    assert loaded.dataset_fingerprint is not None
    assert loaded.dataset_fingerprint.per_item == report.dataset_fingerprint.per_item  # type: ignore[union-attr]
    assert registry.runs() == [record]


def test_metric_rows_are_the_mean_and_scipys_t_interval(
    registry: Registry, report: RetrievalEvalReport
) -> None:
    record = registry.save(report, name="bm25")
    for key, row in record.metrics.items():
        scores = list(report.scores(key).values())
        assert row.mean == report.metrics[key] and row.n == len(scores)
        low, high = scipy.stats.t.interval(
            0.95, len(scores) - 1, loc=row.mean, scale=scipy.stats.sem(scores)
        )
        assert row.ci_low == pytest.approx(low, rel=1e-9, abs=1e-12)
        assert row.ci_high == pytest.approx(high, rel=1e-9, abs=1e-12)


def test_every_reference_form(registry: Registry, report: RetrievalEvalReport) -> None:
    a1 = registry.save(report, name="a")
    b1 = registry.save(report, name="b", tags=["nightly", "gpu=a100"])
    a2 = registry.save(report, name="a")
    assert [r.id for r in registry.runs()] == [a2.id, b1.id, a1.id]
    assert [r.id for r in registry.runs(name="a")] == [a2.id, a1.id]
    assert [r.id for r in registry.runs(tag="nightly")] == [b1.id]
    assert [r.id for r in registry.runs(tag="gpu=a100")] == [b1.id]
    assert registry.runs(tag="gpu=h100") == [] and len(registry.runs(limit=2)) == 2
    assert registry.get("latest").id == a2.id
    assert registry.get("latest~1").id == b1.id
    assert registry.get("a").id == a2.id and registry.get("a~1").id == a1.id
    assert registry.get(a1.id).id == a1.id
    assert registry.get(a1.id[:6]).id == a1.id
    with pytest.raises(RunNotFoundError, match=r"'a~2'.*'a' has only 2 run\(s\).*a \(2\), b \(1\)"):
        registry.get("a~2")
    with pytest.raises(RunNotFoundError, match=r"no run 'c' in .*runs.sqlite.*a \(2\), b \(1\)"):
        registry.get("c")
    with pytest.raises(RunNotFoundError, match="no run is pinned"):
        registry.get("pinned")


def test_pin_unpin_and_rm(registry: Registry, report: RetrievalEvalReport) -> None:
    a1 = registry.save(report, name="a")
    a2 = registry.save(report, name="a")
    b1 = registry.save(report, name="b")
    assert registry.pin(a1.id).pinned
    assert registry.get("pinned").id == a1.id and registry.get("pinned:a").id == a1.id
    registry.pin("a")  # one pinned run per name: a2 replaces a1
    assert [r.id for r in registry.runs() if r.pinned] == [a2.id]
    registry.pin("b")
    assert registry.get("pinned").id == b1.id  # the most recently pinned
    assert registry.get("pinned:a").id == a2.id
    registry.unpin("b")
    assert registry.get("pinned").id == a2.id
    registry.unpin()
    assert not any(r.pinned for r in registry.runs())
    removed = registry.rm(a2.id)
    assert removed.id == a2.id and not removed.scores_path.exists()
    assert [r.id for r in registry.runs()] == [b1.id, a1.id]
    with pytest.raises(RunNotFoundError):
        registry.get(a2.id)


def test_default_path_is_the_environment_variable_then_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: RetrievalEvalReport
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGMETER_REGISTRY", raising=False)
    assert Registry().path == tmp_path / ".ragmeter" / "runs.sqlite"
    record = report.save(name="here")
    assert record.scores_path.parent == tmp_path / ".ragmeter" / "scores"
    monkeypatch.setenv("RAGMETER_REGISTRY", str(tmp_path / "elsewhere.sqlite"))
    assert Registry().path == tmp_path / "elsewhere.sqlite"
    assert Registry().runs() == []


def test_git_commit_and_dirty_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: RetrievalEvalReport
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "runs.sqlite"
    assert Registry(path).save(report, name="no-repo").git_commit is None

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    git("init", "-q")
    (tmp_path / "f.txt").write_text("one")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    head = git("rev-parse", "HEAD")
    clean = Registry(path).save(report, name="clean")
    assert (clean.git_commit, clean.git_dirty) == (head, False)  # the registry is untracked
    (tmp_path / "f.txt").write_text("two")
    dirty = Registry(path).save(report, name="dirty")
    assert (dirty.git_commit, dirty.git_dirty) == (head, True)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no git at all: never fails
    assert Registry(path).save(report, name="no-git").git_commit is None


def test_bad_names_and_objects_are_refused(registry: Registry, report: RetrievalEvalReport) -> None:
    for name in ("", "latest", "pinned", "pinned:x", "a~1"):
        with pytest.raises(ragmeter.errors.InvalidInputError, match="run name"):
            registry.save(report, name=name)
    with pytest.raises(ragmeter.errors.InvalidInputError, match="takes a RetrievalEvalReport"):
        registry.save({"metrics": {}}, name="x")  # type: ignore[arg-type]
    assert not math.isnan(report.metrics["map"])
