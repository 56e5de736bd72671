"""Chart tools (real matplotlib, real files) and the DataAnalysis agent on the scripted server."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from app.agent import DataAnalysis
from app.exceptions import ToolError
from app.schema import AgentState
from app.testing import call, tool_calls
from app.tool import DataVisualization, ToolCollection, VisualizationPrepare
from app.tool.base import ToolFailure
from tests.test_upstream_programs import run_program, write_upstream_config

SALES_CSV = "month,revenue,cost\nJan,120,80\nFeb,150,90\nMar,90,95\nApr,200,110\n"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def matplotlib() -> object:
    """Drawing needs the data extra (the test command installs it; elsewhere these skip)."""
    return pytest.importorskip("matplotlib")


@pytest.fixture
def tool(tmp_path: Path) -> DataVisualization:
    (tmp_path / "sales.csv").write_text(SALES_CSV)
    return DataVisualization(workspace=tmp_path)


@pytest.mark.e2e
async def test_csv_to_png_in_the_visualization_folder(matplotlib, tool, tmp_path):
    result = await tool.execute(
        charts=[{"chartTitle": "Monthly sales", "csvFilePath": "sales.csv"}]
    )
    png = tmp_path / "visualization" / "Monthly_sales.png"
    width, height = png_size(png)
    assert width > 400 and height > 200
    assert f"saved {png}" in result.output
    assert "Chart 'Monthly sales' (bar)" in result.output  # categorical x: auto picks bar
    assert not (tmp_path / "visualization" / "Monthly_sales.html").exists()


async def test_html_is_a_self_contained_page_with_insights(matplotlib, tool, tmp_path):
    rows = [{"year": 2020 + i, "users": v} for i, v in enumerate([10, 40, 25, 80])]
    result = await tool.execute(
        charts=[{"chartTitle": "Users <per year>", "data": rows}],
        output_type="both",
        tool_type="insight",
    )
    page = (tmp_path / "visualization" / "Users_per_year.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "</svg>" in page
    assert "<title>Users &lt;per year&gt;</title>" in page
    assert "<script" not in page and "http://" not in page.split("<svg", 1)[0]
    png_size(tmp_path / "visualization" / "Users_per_year.png")
    assert "(line)" in result.output  # numeric x: auto picks line
    assert "insight: users: highest 80 at 2023" in result.output
    assert "insight: users: lowest 10 at 2020" in result.output
    assert "insight: users: from 10 to 80 (+700.0%)" in result.output
    assert "users: highest 80 at 2023" in page


@pytest.mark.parametrize("chart_type", ["line", "bar", "scatter", "area", "histogram", "pie"])
async def test_every_chart_type_draws(matplotlib, tmp_path, chart_type):
    tool = DataVisualization(workspace=tmp_path)
    rows = [{"x": i, "a": i * i, "b": 10 - i} for i in range(1, 6)]
    spec = {"chartTitle": f"t {chart_type}", "data": rows, "chartType": chart_type}
    if chart_type == "pie":
        spec["y"] = "a"
    result = await tool.execute(charts=[spec])
    png_size(tmp_path / "visualization" / f"t_{chart_type}.png")
    assert f"({chart_type})" in result.output


@pytest.mark.e2e
async def test_prepare_then_draw_from_a_json_list(matplotlib, tmp_path):
    """Upstream's two steps: Python writes CSV + chart list, then the list is drawn."""
    prep = VisualizationPrepare(workspace=tmp_path)
    code = (
        "import csv, json\n"
        "rows = [('north', 3), ('south', 7), ('east', 5)]\n"
        "with open('regions.csv', 'w', newline='') as f:\n"
        "    w = csv.writer(f); w.writerow(['region', 'orders']); w.writerows(rows)\n"
        "json.dump([{'csvFilePath': 'regions.csv', 'chartTitle': 'Orders by region'}],"
        " open('charts.json', 'w'))\n"
        "print('charts.json')\n"
    )
    prepared = await prep.execute(code=code, code_type="visualization")
    assert prepared["success"], prepared["observation"]
    assert "charts.json" in prepared["observation"]
    result = await DataVisualization(workspace=tmp_path).execute(
        json_path="charts.json", output_type="html"
    )
    page = tmp_path / "visualization" / "Orders_by_region.html"
    assert f"saved {page}" in result.output and "<svg" in page.read_text()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of `json_path`"),
        ({"json_path": "missing.json"}, "JSON file not found"),
        ({"json_path": "bad.json"}, "not valid JSON \\(Expecting .* at line 1, column 10\\)"),
        ({"json_path": "../outside.json"}, "Access denied"),
        ({"charts": []}, "non-empty list"),
        ({"charts": [{"csvFilePath": "sales.csv"}]}, "chartTitle: Field required"),
        ({"charts": [{"chartTitle": "t"}]}, "exactly one of `csvFilePath` or `data`"),
        (
            {"charts": [{"chartTitle": "t", "csvFilePath": "sales.csv", "chartType": "radar"}]},
            "chartType: Input should be 'auto', 'line'",
        ),
        ({"charts": [{"chartTitle": "t", "csvFilePath": "nope.csv"}]}, "CSV file not found"),
        (
            {"charts": [{"chartTitle": "t", "csvFilePath": "sales.csv", "y": ["profit"]}]},
            "column 'profit' is not in the data \\(columns: month, revenue, cost\\)",
        ),
        (
            {
                "charts": [
                    {"chartTitle": "t", "csvFilePath": "sales.csv", "y": "month", "x": "revenue"}
                ]
            },
            "column 'month' is not numeric",
        ),
        (
            {"charts": [{"chartTitle": "t", "csvFilePath": "sales.csv", "chartType": "scatter"}]},
            "scatter chart needs a numeric x column",
        ),
        (
            {"charts": [{"chartTitle": "t", "csvFilePath": "sales.csv", "chartType": "pie"}]},
            "give exactly one `y`",
        ),
        (
            {"charts": [{"chartTitle": "t", "data": [{"name": "a"}, {"name": "b"}]}]},
            "no numeric column to plot",
        ),
        ({"charts": [{"chartTitle": "t", "data": []}]}, "has no rows"),
        (
            {"charts": [{"chartTitle": "t", "csvFilePath": "sales.csv"}], "output_type": "gif"},
            "output_type must be one of png, html, both",
        ),
    ],
)
async def test_bad_data_or_spec_is_a_clear_error(matplotlib, tool, tmp_path, kwargs, message):
    (tmp_path / "bad.json").write_text('{"a": 1, ]')
    with pytest.raises(ToolError, match=message):
        await tool.execute(**kwargs)
    assert not (tmp_path / "visualization").exists() or not any(
        (tmp_path / "visualization").iterdir()
    )


async def test_one_bad_chart_does_not_lose_the_good_ones(matplotlib, tool, tmp_path):
    result = await ToolCollection(tool).execute(
        name="data_visualization",
        tool_input={
            "charts": [
                {"chartTitle": "good", "csvFilePath": "sales.csv"},
                {"chartTitle": "bad", "csvFilePath": "sales.csv", "y": ["nope"]},
            ]
        },
    )
    assert not isinstance(result, ToolFailure)
    assert (tmp_path / "visualization" / "good.png").is_file()
    assert "Charts that could not be drawn:\n- bad: chart 'bad': column 'nope'" in result.output


@pytest.mark.e2e
async def test_data_analysis_agent_makes_a_chart(matplotlib, llm_server, make_llm, tmp_path):
    llm_server.push(
        tool_calls(
            call(
                "python_execute",
                {
                    "code": (
                        "import csv\n"
                        "rows = [(d, d * 3) for d in range(1, 8)]\n"
                        "with open('daily.csv', 'w', newline='') as f:\n"
                        "    w = csv.writer(f); w.writerow(['day', 'visits']); w.writerows(rows)\n"
                        "print(sum(v for _, v in rows))\n"
                    )
                },
            )
        ),
        tool_calls(
            call(
                "data_visualization",
                {
                    "charts": [
                        {
                            "chartTitle": "Daily visits",
                            "csvFilePath": "daily.csv",
                            "x": "day",
                            "y": ["visits"],
                        }
                    ],
                    "output_type": "png",
                },
            )
        ),
        tool_calls(
            call("terminate", {"status": "success"}),
            content="84 visits in total; chart in visualization/Daily_visits.png",
        ),
    )
    agent = DataAnalysis(llm=make_llm(), workspace=tmp_path)
    assert agent.name == "Data_Analysis" and agent.max_observe == 15000
    assert list(agent.available_tools.tool_map) == [
        "python_execute",
        "visualization_preparation",
        "data_visualization",
        "terminate",
    ]
    result = await agent.run("chart the daily visits")
    assert result.state == AgentState.FINISHED
    png_size(tmp_path / "visualization" / "Daily_visits.png")
    sent = llm_server.requests[2].body["messages"]
    chart_result = next(m["content"] for m in sent if m.get("name") == "data_visualization")
    assert str(tmp_path / "visualization" / "Daily_visits.png") in chart_result
    python_result = next(m["content"] for m in sent if m.get("name") == "python_execute")
    assert "84" in python_result
    assert str(tmp_path) in llm_server.requests[0].body["messages"][0]["content"]


def test_chart_spec_json_file_round_trip(tmp_path):
    """The chart list format is plain JSON with upstream's keys."""
    from app.tool.chart.spec import parse_specs

    raw = json.loads('[{"csvFilePath": "a.csv", "chartTitle": "A", "y": "v"}]')
    (spec,) = parse_specs(raw, "test")
    assert (spec.csv_path, spec.title, spec.y, spec.chart_type) == ("a.csv", "A", ["v"], "auto")


# --- the demo scripts (upstream kept them under app/tool/chart_visualization/test/) -----------

EXAMPLES = Path(__file__).resolve().parent.parent / "scripts" / "examples"


def chart_of(title: str, rows: list[dict[str, object]], **extra: object) -> dict[str, object]:
    return {"charts": [{"chartTitle": title, "data": rows}], **extra}


def done(answer: str) -> object:
    return tool_calls(call("terminate", {"status": "success"}), content=answer)


@pytest.mark.e2e
def test_chart_demo_draws_one_chart_per_task(matplotlib, tmp_path, llm_server):
    rain = [{"Month": m, "Oslo": o, "Lima": 1} for m, o in (("Jan", 49), ("Feb", 36))]
    fruit = [{"Fruit": "Apple", "Count": 12}, {"Fruit": "Pear", "Count": 7}]
    llm_server.push(
        tool_calls(call("data_visualization", chart_of("Rainfall", rain))),
        done("rainfall drawn"),
        tool_calls(call("data_visualization", chart_of("Fruit", fruit, output_type="both"))),
        done("fruit drawn"),
    )
    config = write_upstream_config(tmp_path, llm_server.base_url)
    proc = run_program(tmp_path, config, str(EXAMPLES / "chart_demo.py"))
    assert proc.returncode == 0, proc.stderr
    charts = tmp_path / "ws" / "visualization"
    png_size(charts / "Rainfall.png")
    png_size(charts / "Fruit.png")
    assert (charts / "Fruit.html").read_text().startswith("<!DOCTYPE html>")
    firsts = [r for r in llm_server.requests if all(m["role"] != "tool" for m in r.messages)]
    asked = [next(m["content"] for m in r.messages if m["role"] == "user") for r in firsts]
    assert len(asked) == 2 and "Oslo" in asked[0] and "Apple" in asked[1]


@pytest.mark.e2e
def test_report_demo_runs_the_agent_on_its_table(matplotlib, tmp_path, llm_server):
    rows = [{"Quarter": "Q1", "North": 310}, {"Quarter": "Q2", "North": 335}]
    llm_server.push(
        tool_calls(call("data_visualization", chart_of("North", rows, output_type="html"))),
        done("report written"),
    )
    config = write_upstream_config(tmp_path, llm_server.base_url)
    proc = run_program(tmp_path, config, str(EXAMPLES / "report_demo.py"))
    assert proc.returncode == 0, proc.stderr
    assert "<svg" in (tmp_path / "ws" / "visualization" / "North.html").read_text()
    first = llm_server.requests[0].messages
    assert "Q4 | 390 | 310 | 300" in next(m["content"] for m in first if m["role"] == "user")
