"""The estimators against published measurements, each source predicted with constants fitted
without it (leave-one-source-out, `python bench/accuracy.py --write-bands`, which stores the
summary in planner/data/accuracy_bands.yaml): the error the README states. The refit per source
takes minutes, so these tests read the stored summary and check it is current."""

from __future__ import annotations

import pytest

from bench.accuracy import (TARGET_COVERAGE, TARGETS, WIDENING_GRID, band_classes, class_summary,
                            compared_without_constants, held_out_share, source_table, widened)
from bench.reference_cases import Row, all_rows
from planner.physics.bands import bands


@pytest.fixture(scope="module")
def stored():
    return bands()


def test_stored_summary_covers_every_row_of_the_reference_data(stored, catalog):
    """Adding or dropping a row without rerunning the LOSO script fails here."""
    now = class_summary(all_rows(catalog) + compared_without_constants(catalog))
    assert {key: entry["rows"] for key, entry in stored["loso"].items()} == \
        {f"{p}/{m}": entry["rows"] for (p, m), entry in now.items()}
    assert {key: entry["sources"] for key, entry in stored["in_sample"].items()} == \
        {f"{p}/{m}": entry["sources"] for (p, m), entry in now.items()}


def test_in_sample_figures_are_the_committed_constants(stored, catalog):
    now = class_summary(all_rows(catalog) + compared_without_constants(catalog))
    for (platform, metric), entry in now.items():
        assert stored["in_sample"][f"{platform}/{metric}"]["median_abs"] == pytest.approx(entry["median_abs"], abs=1e-4)


@pytest.mark.parametrize("platform,metric,stated", [("b200", "serving tokens/s", 0.0504), ("b200", "training TFLOP/s", 0.0409), ("gpu", "ITL", 0.0623), ("gpu", "TTFT", 0.1577), ("gpu", "serving tokens/s", 0.0715), ("gpu", "training TFLOP/s", 0.0889), ("gpu", "training peak memory", 0.0899), ("lora", "training peak memory", 0.0477), ("moe", "ITL", 0.0742), ("moe", "TTFT", 0.4291), ("moe", "serving tokens/s", 0.0993), ("neuron", "ITL", 0.0969), ("neuron", "TTFT", 0.1902), ("neuron", "serving tokens/s", 0.0951), ("neuron", "training sequences/s", 0.0814), ("nim-one-client", "ITL", 0.0663), ("nim-one-client", "TTFT", 0.0646), ("nim-one-client", "serving tokens/s", 0.0656), ("sweep", "ITL", 0.0977), ("sweep", "TTFT", 0.0567), ("sweep", "serving tokens/s", 0.0838), ("trainium2", "ITL", 0.4213), ("trainium2", "TTFT", 0.3395), ("trainium2", "serving tokens/s", 0.2633)])
def test_loso_errors_are_what_the_readme_states(stored, platform, metric, stated):
    """The honest error per class (README, accuracy table); the target is TARGETS[metric]."""
    assert stored["loso"][f"{platform}/{metric}"]["median_abs"] == pytest.approx(stated, abs=0.001)
    assert metric in TARGETS


def _row(source: str, ratio: float, n: int = 0) -> Row:
    """A compared figure whose measured / predicted is `ratio`."""
    return Row(f"{source}-{n}", "ITL", source, "", 1.0, ratio)


def test_a_band_widens_about_its_geometric_centre():
    assert widened(0.8, 1.25, 1.0) == pytest.approx((0.8, 1.25))
    assert widened(0.8, 1.25, 2.0) == pytest.approx((0.64, 1.5625))
    assert widened(0.5, 2.0, 1.5) == pytest.approx((2 ** -1.5, 2 ** 1.5))


def test_a_band_is_widened_until_it_holds_a_source_it_never_saw():
    """Two sources 15% apart, each spread ±13%: the band drawn from either alone holds 40% of the other's
    rows, so the stored band is widened by the least grid factor that holds TARGET_COVERAGE of each source
    left out (×2.15 here), and no less."""
    rows = [_row("a", 0.85 + 0.03 * i, i) for i in range(10)] + [_row("b", 1.0 + 0.03 * i, i) for i in range(10)]
    entry = band_classes(rows)["gpu/ITL"]
    assert held_out_share(rows, 1.0) == pytest.approx(0.4)
    assert entry["widening"] == 2.15
    assert entry["held_out_share"]["percentiles"] == pytest.approx(held_out_share(rows, 1.0), abs=1e-4)
    assert entry["held_out_share"]["widened"] >= TARGET_COVERAGE
    previous = WIDENING_GRID[WIDENING_GRID.index(entry["widening"]) - 1]
    assert held_out_share(rows, previous) < TARGET_COVERAGE
    assert (entry["q10"], entry["q90"]) == pytest.approx(widened(*entry["percentiles"], entry["widening"]), abs=1e-4)


def test_the_source_table_says_which_source_a_class_misses():
    """Per class and source: rows, median |error| and signed median of the held-out rows, sorted. Predicted 1 against
    measured 0.8, 1.25 and 1.6 is +25%, -20% and -37.5%; against 0.5, +100%."""
    rows = [_row("b", 0.8, 0), _row("b", 1.25, 1), _row("b", 1.6, 2), _row("a", 0.5, 3)]
    assert source_table(rows)[2:] == ["| gpu | ITL | a | 1 | 100.0% | +100.0% |",
                                      "| gpu | ITL | b | 3 | 25.0% | -20.0% |"]


def test_a_class_of_one_source_keeps_its_percentiles():
    """No source is left to check it on: nothing to widen by."""
    entry = band_classes([_row("a", 0.9 + 0.02 * i, i) for i in range(11)])["gpu/ITL"]
    assert "widening" not in entry
    assert (entry["q10"], entry["q90"]) == pytest.approx((0.92, 1.08))


def test_stored_bands_hold_their_target_on_a_source_left_out(stored):
    """Every platform class of two or more sources: the stored band holds TARGET_COVERAGE of the rows of a source
    its band never saw (issue 25: at least 75%), and contains the plain percentiles it widens. A model class
    (MoE: bench/accuracy.py _model_classes) contains its percentiles and its platform's band."""
    classes = stored["classes"]
    for key, entry in classes.items():
        if "joined_with" in entry:
            platform = classes[entry["joined_with"]]
            assert entry["q10"] <= min(entry["percentiles"][0], platform["q10"]), key
            assert entry["q90"] >= max(entry["percentiles"][1], platform["q90"]), key
            continue
        if len(entry["sources"]) < 2:
            continue
        assert entry["held_out_share"]["widened"] >= TARGET_COVERAGE or entry["widening"] == WIDENING_GRID[-1], key
        assert entry["q10"] <= entry["percentiles"][0] and entry["q90"] >= entry["percentiles"][1], key


def test_readme_accuracy_table_is_the_stored_summary(stored):
    """Every row of the README's table is what scripts/accuracy_table.py renders from the stored bands, and every
    stored class has its row (the script rewrites rows; a new class, B200 training, needs one added)."""
    from pathlib import Path

    from scripts.accuracy_table import NAMES, PLATFORMS, ROW, table_row

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text().split("\n")
    rows = [(line, ROW.match(line)) for line in readme]
    rows = [(line, m) for line, m in rows if m and "rows (sources)" not in line]
    assert len(rows) >= 10
    for line, match in rows:
        assert line == table_row(stored, match.group(1), match.group(2).strip())
    platform_of, metric_of = ({v: k for k, v in table.items()} for table in (PLATFORMS, NAMES))
    shown = {f"{platform_of[m.group(1)]}/{metric_of[m.group(2).strip()]}" for _, m in rows}
    assert {k for k in stored["loso"] if k.split("/", 1)[0] in PLATFORMS and k.split("/", 1)[1] in NAMES} <= shown


def test_the_table_marks_a_missed_signed_median_as_well_as_a_missed_error():
    """Issue 25 has two targets a class must meet held out: its median |error| and its signed median within ±5%. The MoE
    tokens/s class meets the first (7.6%) and misses the second (-6.4%): the table says so, not just "≤ 10%"."""
    from scripts.accuracy_table import _missed

    assert _missed({"median_abs": 0.076, "signed_median": -0.064}, 0.10, 0.05) == " (signed median missed)"
    assert _missed({"median_abs": 0.179, "signed_median": -0.030}, 0.12, 0.05) == " (missed)"
    assert _missed({"median_abs": 0.080, "signed_median": 0.020}, 0.10, 0.05) == ""
