"""What both report types share: JSON and markdown rendering, and reading numbers back."""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, overload

from ragmeter.errors import InvalidInputError
from ragmeter.report._fingerprint import ConfigFingerprint, DatasetFingerprint
from ragmeter.report._json import _Rows, _write_json
from ragmeter.report._summary import DistributionSummary

if TYPE_CHECKING:
    from ragmeter.registry import Registry, RunRecord


def _finite(value: Any, where: str) -> float:
    """``value`` as a finite float, or :class:`InvalidInputError` naming ``where``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise InvalidInputError(f"report {where} must be a finite number, got {value!r}")
    return number


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


class _ReportBase:
    """Rendering shared by both report types; subclasses provide the rows."""

    _truth: DatasetFingerprint | Callable[[], DatasetFingerprint] | None = None
    """The dataset fingerprint, or what computes it on first access (set by the driver)."""
    _config_loaded: ConfigFingerprint | None = None
    """The config fingerprint read back by ``from_dict`` (kept: the settings it was made
    under, e.g. an older metric-definition version, are not this ragmeter's)."""

    def set_dataset_fingerprint(
        self, fingerprint: DatasetFingerprint | Callable[[], DatasetFingerprint] | None
    ) -> None:
        """Set what :attr:`dataset_fingerprint` returns: a fingerprint, or a function that
        computes it when first asked for (the drivers hand the qrels or samples this way,
        so scoring pays nothing for it; the ground truth must not change in between)."""
        self._truth = fingerprint

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the dataset fingerprint, not the qrels or samples it would be made from."""
        state = dict(self.__dict__)
        if "_truth" in state:
            state["_truth"] = self.dataset_fingerprint
        return state

    @property
    def dataset_fingerprint(self) -> DatasetFingerprint | None:
        """The :class:`~ragmeter.report.DatasetFingerprint` of the qrels (samples) this
        report was scored against; ``None`` for a report made by hand."""
        truth = self._truth
        if truth is None or isinstance(truth, DatasetFingerprint):
            return truth
        made = truth()
        self._truth = made
        return made

    @property
    def config_fingerprint(self) -> ConfigFingerprint:
        """The :class:`~ragmeter.report.ConfigFingerprint` of the settings behind the
        numbers (metric keys, cut-offs, conventions, metric-definition version, judge)."""
        if self._config_loaded is not None:
            return self._config_loaded
        return ConfigFingerprint.of(self._config_settings())

    def _config_settings(self) -> dict[str, Any]:
        raise NotImplementedError

    def _fingerprints(self) -> dict[str, Any]:
        dataset = self.dataset_fingerprint
        return {
            "dataset": None if dataset is None else dataset.to_dict(),
            "config": self.config_fingerprint.to_dict(),
        }

    def _load_fingerprints(self, data: Mapping[str, Any]) -> None:
        """Take the ``"fingerprints"`` of :meth:`to_dict` output back (``from_dict``)."""
        found = data.get("fingerprints") or {}
        if found.get("dataset"):
            self._truth = DatasetFingerprint.from_dict(found["dataset"])
        if found.get("config"):
            self._config_loaded = ConfigFingerprint.from_dict(found["config"])

    def save(
        self,
        name: str,
        *,
        tags: Mapping[str, str] | Sequence[str] | None = None,
        note: str | None = None,
        registry: Registry | str | os.PathLike[str] | None = None,
    ) -> RunRecord:
        """Save this report as a run named ``name`` in a :class:`~ragmeter.registry.Registry`
        (``registry``: one, or its path; default ``$RAGMETER_REGISTRY``, else
        ``./.ragmeter/runs.sqlite``) and return its :class:`~ragmeter.registry.RunRecord`."""
        from ragmeter.registry import Registry

        report: Any = self  # a RetrievalEvalReport or RagEvalReport
        if isinstance(registry, Registry):
            return registry.save(report, name=name, tags=tags, note=note)
        with Registry(registry) as target:
            return target.save(report, name=name, tags=tags, note=note)

    def _summary_rows(self) -> list[tuple[str, DistributionSummary]]:
        raise NotImplementedError

    def _items(self) -> Iterator[tuple[str, Any]]:
        """``to_dict()``'s items, with the per-item rows wrapped in :class:`_Rows`."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return {k: (v.plain() if isinstance(v, _Rows) else v) for k, v in self._items()}

    @overload
    def to_json(self, fp: None = None, **kwargs: Any) -> str: ...

    @overload
    def to_json(self, fp: str | os.PathLike[str] | IO[str], **kwargs: Any) -> None: ...

    def to_json(
        self, fp: str | os.PathLike[str] | IO[str] | None = None, **kwargs: Any
    ) -> str | None:
        """The report as JSON: a string, or written to ``fp`` (a path or a text stream).

        With ``fp`` the JSON is written in pieces, one per-query (or per-sample) row at a
        time, so a 100k-query report never becomes one giant string; the text is the same
        as ``json.dumps(report.to_dict(), indent=2)``. ``kwargs`` other than those defaults
        go to :func:`json.dumps`. Always standard JSON: a report holds no NaN or infinity
        (the drivers refuse them), and ``allow_nan=False`` makes sure of it.
        """
        kwargs.setdefault("indent", 2)
        kwargs.setdefault("allow_nan", False)
        plain = kwargs == {"indent": 2, "allow_nan": False}
        if fp is None:
            if not plain:
                return json.dumps(self.to_dict(), **kwargs)
            buffer = io.StringIO()
            _write_json(self._items(), buffer)
            return buffer.getvalue()
        if isinstance(fp, (str, os.PathLike)):
            target = Path(fp)
            with open(target, "w", encoding="utf-8") as fh:
                self._dump(fh, plain, kwargs)
            return None
        self._dump(fp, plain, kwargs)
        return None

    def _dump(self, fh: IO[str], plain: bool, kwargs: dict[str, Any]) -> None:
        if plain:
            _write_json(self._items(), fh)
        else:
            json.dump(self.to_dict(), fh, **kwargs)

    def to_markdown(self) -> str:
        """A markdown table: one row per metric key, mean and spread."""
        lines = [
            "| metric | mean | median | std | min | max | n | missing |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        approximate: list[tuple[str, DistributionSummary]] = []
        for key, s in self._summary_rows():
            lines.append(
                f"| {key} | {s.mean:.4f} | {s.median:.4f} | {s.std:.4f} | {s.min:.4f} | "
                f"{s.max:.4f} | {s.count} | {s.missing} |"
            )
            if not s.exact:
                approximate.append((key, s))
        if approximate:
            lines.append("")
            lines.append(_approximate_note(approximate))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def to_text(self) -> str:
        raise NotImplementedError


def _approximate_note(rows: list[tuple[str, DistributionSummary]]) -> str:
    error = max(s.relative_error for _, s in rows)
    keys = ", ".join(k for k, _ in rows)
    return (
        f"median and percentiles of {keys} are approximate (each within a relative error of "
        f"{error:g}; per-item scores were not kept); mean, std, min and max are exact"
    )
