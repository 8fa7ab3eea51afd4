"""`ragmeter report --html`, `ragmeter compare --html` and `ragmeter gate --html`."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

import ragmeter
from ragmeter import cli
from ragmeter.io.jsonl import write_jsonl
from ragmeter.io.trec import write_trec_run

CRAN = Path(__file__).parents[1] / "data" / "cranfield_beir"
DATA_RE = re.compile(r'<script type="application/json" id="ragmeter-data">(.*?)</script>', re.S)


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def page_data(path: Path) -> dict[str, Any]:
    found = DATA_RE.search(path.read_text(encoding="utf-8"))
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data


@pytest.fixture(scope="module")
def weaker_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    weaker = {}
    for qid, docs in ragmeter.load_cranfield_bm25_run().items():
        top = list(docs[:10])
        random.Random(qid).shuffle(top)
        weaker[qid] = top + list(docs[10:])
    path = tmp_path_factory.mktemp("runs") / "weaker.run"
    write_trec_run(weaker, path)
    return path


@pytest.fixture
def samples_file(tmp_path: Path) -> Path:
    samples = [
        {
            "id": f"s{i}",
            "question": f"question {i}?",
            "answer": f"answer {i}. The moon is cheese.",
            "reference": f"answer {i}",
            "context": [f"answer {i} is right", "filler"],
            "retrieved_ids": ["d1", f"d{i + 10}"],
            "reference_ids": ["d1"],
        }
        for i in range(5)
    ]
    return write_lines(tmp_path / "samples.jsonl", samples)


def write_lines(path: Path, samples: list[dict[str, Any]]) -> Path:
    write_jsonl(samples, path)
    return path


def test_report_on_a_beir_directory_brings_its_queries_and_corpus(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "r.html"
    code, stdout, err = invoke(
        capsys, "report", "--qrels", str(CRAN), "--run", str(CRAN / "bm25.run"), "--html", str(out)
    )
    assert code == 0, err
    assert stdout.strip() == f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, 225 queries)"
    data = page_data(out)
    _, queries, qrels = ragmeter.load_cranfield()
    assert data["texts"] == [queries[q] for q in data["ids"]]
    assert data["snips"][0] is not None and data["hasQrels"] is True
    assert data["systems"][0]["label"] == "bm25"  # the run file's name
    report = ragmeter.evaluate_run(qrels, ragmeter.load_cranfield_bm25_run())
    assert data["systems"][0]["scores"]["ndcg@10"][0] == pytest.approx(
        report.per_query[data["ids"][0]]["ndcg@10"], abs=1e-6
    )
    assert "<dt>dataset</dt><dd>cranfield_beir</dd>" in out.read_text(encoding="utf-8")


def test_report_with_a_qrels_file_a_queries_file_and_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    topics = tmp_path / "topics.tsv"
    topics.write_text("1\tfirst topic\n2\tsecond topic\n", encoding="utf-8")
    out = tmp_path / "r.html"
    code, _, err = invoke(
        capsys,
        "report",
        "--qrels",
        str(CRAN / "qrels" / "test.tsv"),
        "--run",
        str(CRAN / "bm25.run"),
        "--queries",
        str(topics),
        "-k",
        "5,10",
        "-m",
        "ndcg,recall",
        "--depth",
        "3",
        "--system",
        "my <bm25>",
        "--title",
        "Cranfield, BM25",
        "--html",
        str(out),
    )
    assert code == 0, err
    data = page_data(out)
    assert [label for label, _ in data["colsets"]] == ["@5", "@10"]
    assert data["systems"][0]["keys"] == ["ndcg@5", "ndcg@10", "recall@5", "recall@10"]
    assert data["texts"][:2] == ["first topic", "second topic"] and data["texts"][2] is None
    assert len(data["detail"][0][0]["r"]) == 3
    assert data["snips"] is None
    page = out.read_text(encoding="utf-8")
    assert "<title>Cranfield, BM25</title>" in page and "my &lt;bm25&gt;" in page


def test_report_on_a_sample_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, samples_file: Path
) -> None:
    out = tmp_path / "rag.html"
    code, stdout, err = invoke(capsys, "report", str(samples_file), "--k", "2", "--html", str(out))
    assert code == 0, err
    assert "5 samples" in stdout
    data = page_data(out)
    assert data["ids"] == [f"s{i}" for i in range(5)]
    assert data["texts"][0] == "question 0?"
    assert "precision@2" in data["systems"][0]["keys"]
    assert data["detail"][0][0]["un"] == ["The moon is cheese"]


def test_report_with_skipped_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, samples_file: Path
) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text(samples_file.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    out = tmp_path / "rag.html"
    code, _, err = invoke(capsys, "report", str(broken), "--html", str(out))
    assert code == 1 and "broken.jsonl:6" in err
    code, _, err = invoke(capsys, "report", str(broken), "--skip-errors", "--html", str(out))
    assert code == 0, err
    assert "<dt>malformed lines skipped</dt><dd>1</dd>" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["report", "--html", "{out}"], 2, "needs a JSONL sample file, or --qrels and --run"),
        (["report", "{samples}", "--qrels", "q", "--html", "{out}"], 2, "not both"),
        (["report", "{samples}", "--k", "1,5", "--html", "{out}"], 2, "one cut-off"),
        (["report", "{samples}"], 2, "--html"),
        (["report", "--qrels", "nope", "--run", "r", "--html", "{out}"], 2, "qrels file not found"),
        (["report", "--qrels", "{cran}", "--run", "nope", "--html", "{out}"], 2, "run file not"),
        (["report", "--qrels", "{cran}", "--run", "{run}", "--queries", "{bad}",
          "--html", "{out}"], 1, "bad.jsonl:2: a record must be a JSON object with an '_id'"),
        (["report", "--qrels", "{cran}", "--run", "{run}", "--html", "{tmp}/no/dir.html"], 1,
         "No such file or directory"),
    ],
)  # fmt: skip
def test_report_bad_input(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    samples_file: Path,
    args: list[str],
    code: int,
    message: str,
) -> None:
    values = {
        "out": str(tmp_path / "o.html"),
        "samples": str(samples_file),
        "cran": str(CRAN),
        "run": str(CRAN / "bm25.run"),
        "tmp": str(tmp_path),
        "bad": str(tmp_path / "bad.jsonl"),
    }
    (tmp_path / "bad.jsonl").write_text('{"_id": "1", "text": "a"}\n{"text": "b"}\n')
    got, _, err = invoke(capsys, *(a.format(**values) for a in args))
    assert got == code
    assert err.startswith("ragmeter: error: ") and message in err
    assert not (tmp_path / "o.html").exists()


def test_compare_html_on_two_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, weaker_run: Path
) -> None:
    out = tmp_path / "cmp.html"
    code, stdout, err = invoke(
        capsys, "compare", str(CRAN / "bm25.run"), str(weaker_run), "--qrels", str(CRAN),
        "--html", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert stdout.startswith("ndcg@10: weaker vs bm25 over 225 paired queries")
    assert err.strip() == f"wrote {out}"
    data = page_data(out)
    assert [s["label"] for s in data["systems"]] == ["bm25", "weaker"]
    assert data["cmp"]["metric"] == "ndcg@10" and len(data["cmp"]["o"]) == 225
    assert data["texts"][0] is not None and data["snips"] is not None
    assert all(d is not None for d in data["detail"])


def test_compare_html_needs_exactly_two_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, weaker_run: Path
) -> None:
    out = tmp_path / "cmp.html"
    runs = [str(CRAN / "bm25.run"), str(weaker_run), str(weaker_run)]
    code, _, err = invoke(capsys, "compare", *runs, "--qrels", str(CRAN), "--html", str(out))
    assert code == 1 and "--html draws one comparison of two systems, got 3 runs" in err
    assert not out.exists()


def test_compare_html_on_sample_files_paired_by_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, samples_file: Path
) -> None:
    lines = samples_file.read_text(encoding="utf-8").splitlines()
    other = tmp_path / "other.jsonl"
    other.write_text(
        "\n".join(line.replace("The moon is cheese.", "") for line in lines) + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "cmp.html"
    code, _, err = invoke(
        capsys, "compare", str(samples_file), str(other), "--samples", "--metric", "faithfulness",
        "--pair-by", "order", "--html", str(out),
    )  # fmt: skip
    assert code == 0, err
    data = page_data(out)
    assert data["mode"] == "rag" and data["ids"] == ["1", "2", "3", "4", "5"]
    assert data["cmp"]["o"] == "wwwww"  # the unsupported claim is gone from every answer
    assert data["texts"][0] == "question 0?"
    assert data["detail"][0][0]["un"] == ["The moon is cheese"]
    assert data["detail"][1][0]["un"] == []


def test_gate_html_shows_the_decision(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, weaker_run: Path
) -> None:
    paths = {}
    for name, run in (("base", CRAN / "bm25.run"), ("now", weaker_run)):
        code, stdout, _ = invoke(
            capsys, "retrieval", "--qrels", str(CRAN / "qrels" / "test.tsv"), "--run", str(run),
            "--json",
        )  # fmt: skip
        assert code == 0
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(stdout, encoding="utf-8")
    out = tmp_path / "gate.html"
    code, stdout, _ = invoke(
        capsys, "gate", "--baseline", str(paths["base"]), "--current", str(paths["now"]),
        "--html", str(out),
    )  # fmt: skip
    assert code == 1 and stdout.startswith("REGRESSION: ndcg@10 dropped by 0.0500")
    page = out.read_text(encoding="utf-8")
    assert '<p class="verdict"><b>REGRESSION: ndcg@10 dropped by 0.0500' in page
    assert [s["label"] for s in page_data(out)["systems"]] == ["baseline", "current"]
