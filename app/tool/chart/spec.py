"""What a chart is: its data (a CSV file or inline records), type and columns; field names
follow upstream's chart JSON (``csvFilePath``, ``chartTitle``). Problems raise ``ToolError``."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.exceptions import ToolError
from app.sandbox.files import FileAccessPolicy

CHART_TYPES = ("auto", "line", "bar", "scatter", "pie", "area", "histogram")
MAX_ROWS = 200_000
_MAX_CSV_BYTES = 50 * 1024 * 1024


class ChartSpec(BaseModel):
    """One chart. ``x`` defaults to the first column, ``y`` to the other numeric columns."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    title: str = Field(alias="chartTitle", min_length=1)
    csv_path: str | None = Field(default=None, alias="csvFilePath")
    data: list[dict[str, Any]] | None = None
    chart_type: Literal["auto", "line", "bar", "scatter", "pie", "area", "histogram"] = Field(
        default="auto", alias="chartType"
    )
    x: str | None = None
    y: list[str] | None = None

    @field_validator("y", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


@dataclass
class Table:
    """Columns in file order; a column is numeric when every non-empty value is a number."""

    columns: list[str]
    rows: list[dict[str, Any]]

    def values(self, column: str) -> list[Any]:
        return [row.get(column) for row in self.rows]

    def numbers(self, column: str) -> list[float]:
        """The column as floats (NaN for blanks), or ``ToolError`` if it is not numeric."""
        out: list[float] = []
        for value in self.values(column):
            number = _number(value)
            if number is None:
                raise ToolError(
                    f"column '{column}' is not numeric (it contains {value!r}); "
                    "choose numeric columns for `y`"
                )
            out.append(number)
        return out

    def is_numeric(self, column: str) -> bool:
        values = [v for v in self.values(column) if not _blank(v)]
        return bool(values) and all(_number(v) is not None for v in values)


def parse_specs(raw: Any, where: str) -> list[ChartSpec]:
    """Chart specs from a list of dicts (or one dict); ``where`` names the source in errors."""
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ToolError(f"{where} must be a non-empty list of chart objects")
    specs = []
    for number, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise ToolError(f"chart {number} in {where} must be an object, got {item!r}")
        try:
            spec = ChartSpec.model_validate(item)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'chart'}: {err['msg']}"
                for err in e.errors()
            )
            raise ToolError(
                f"chart {number} in {where} is not valid: {problems}. Each chart needs "
                "`chartTitle` and either `csvFilePath` or `data` (a list of row objects); "
                f"optional `chartType` ({', '.join(CHART_TYPES)}), `x` and `y`."
            ) from None
        if (spec.csv_path is None) == (spec.data is None):
            raise ToolError(
                f"chart {number} ('{spec.title}') in {where} needs exactly one of "
                "`csvFilePath` or `data`"
            )
        specs.append(spec)
    return specs


def load_table(spec: ChartSpec, policy: FileAccessPolicy) -> Table:
    """The chart's data as a table, read from its CSV (inside the workspace) or its records."""
    if spec.data is not None:
        rows = [dict(row) for row in spec.data]
        columns = list(dict.fromkeys(str(key) for row in rows for key in row))
        table = Table(columns=columns, rows=rows)
    else:
        assert spec.csv_path is not None
        table = _read_csv(policy.resolve(spec.csv_path))
    if not table.rows:
        raise ToolError(f"chart '{spec.title}': the data has no rows")
    if len(table.rows) > MAX_ROWS:
        raise ToolError(
            f"chart '{spec.title}': {len(table.rows)} rows is too many to draw (limit "
            f"{MAX_ROWS}); aggregate the data first"
        )
    return table


def _read_csv(path: Path) -> Table:
    if not path.is_file():
        raise ToolError(f"CSV file not found: {path}")
    if path.stat().st_size > _MAX_CSV_BYTES:
        raise ToolError(f"CSV file {path} is larger than {_MAX_CSV_BYTES // 2**20} MiB")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            rows = [dict(row) for _, row in zip(range(MAX_ROWS + 1), reader, strict=False)]
            columns = list(reader.fieldnames or [])
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ToolError(f"Could not read CSV file {path}: {e}") from e
    if not columns:
        raise ToolError(f"CSV file {path} has no header row")
    return Table(columns=columns, rows=rows)


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _number(value: Any) -> float | None:
    if _blank(value):
        return math.nan
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().replace(",", ""))
        except ValueError:
            return None
    return None
