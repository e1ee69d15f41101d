"""The report pages' pictures read back as text: a mask diagram paints each key as its bit says, the
per-layer error plot draws every point of its line, labels the layers it spans (and no other) and
keeps every label inside its picture."""

from __future__ import annotations

import re

import pytest

from gemma4_static.oracle.pages.svg import error_plot, mask_image


def test_a_mask_diagram_paints_each_key_as_its_bit_says():
    rows = [(3, "xx.", "x..", ".x."), (4, "..x", "..x", "...")]
    svg = mask_image(rows, "keys 0-2")
    assert svg.startswith("<svg ") and svg.endswith("</svg>") and svg.count("<svg") == 1
    sizes = re.findall(r'<rect [^>]*width="(\d+)" height="(\d+)"', svg)
    assert sizes and all(width == height for width, height in sizes)  # square cells, one per key
    painted = re.findall(r'<rect [^>]*class="(\w+)"/>', svg)
    expected = []
    for _, ours, theirs, differ in rows:
        expected += ["allowed" if bit == "x" else "masked" for bit in ours + theirs]
        expected += ["differ" if bit == "x" else "same" for bit in differ]
    assert painted == expected


def _points(layers: int) -> list[dict]:
    row = {"status": "PASS", "metric": "max abs", "value": 1e-5, "tolerance": 1e-4}
    return [{"layer": layer, "relative": 10.0 ** -(layer % 4), **row} for layer in range(layers)]


def _axis_labels(svg: str) -> list[str]:
    return re.findall(r'<text x="[^"]+" y="236" class="axis" text-anchor="middle">([^<]+)</text>', svg)


def test_the_error_plot_draws_a_point_of_its_line_per_layer_from_edge_to_edge():
    svg = error_plot(_points(10), x_key="layer", x_label="decoder layer", title="hidden states")
    (line,) = re.findall(r'<polyline points="([^"]+)" class="series ours line-0"/>', svg)
    xs = [float(pair.split(",")[0]) for pair in line.split()]
    assert len(xs) == 10 and xs[0] == 56.0 and xs[-1] == 704.0 and xs == sorted(xs)  # the plot's left to right


@pytest.mark.parametrize(
    ("layers", "labels"),
    [(10, list(range(10))), (12, list(range(12))), (13, list(range(0, 13, 2))), (35, list(range(0, 35, 3)))],
)
def test_the_error_plot_labels_the_layers_it_spans_and_no_other(layers, labels):
    svg = error_plot(_points(layers), x_key="layer", x_label="decoder layer", title="hidden states")
    assert _axis_labels(svg) == [str(label) for label in labels]  # every layer up to 12, then every ceil(n / 12)


def test_no_points_no_plot():
    assert error_plot([], x_key="layer", x_label="decoder layer", title="hidden states") == ""


def test_a_point_that_compared_nothing_has_no_mark_and_a_nan_is_a_cross_at_the_top():
    """A layer without a figure is not drawn at the axis' floor, where it would read as no error: a
    SKIP has no mark and its line goes around it; a FAIL without a figure (NaN) is a cross at the top."""
    points = _points(5)
    points[1] = {**points[1], "relative": None, "value": None, "status": "SKIP"}
    points[3] = {**points[3], "relative": None, "value": None, "status": "FAIL"}
    svg = error_plot(points, x_key="layer", x_label="decoder layer", title="hidden states")
    (line,) = re.findall(r'<polyline points="([^"]+)" class="series ours line-0"/>', svg)
    assert len(line.split()) == 3  # layers 0, 2 and 4
    assert len(re.findall(r'<circle [^>]*class="dot"', svg)) == 3
    (cross,) = re.findall(r'<path d="M[\d.]+,([\d.]+)l', svg)
    assert float(cross) + 5 == 16.0  # the plot's top edge
    assert "layer 3: max abs = n/a (gate 0.0001) FAIL" in svg


def test_every_label_of_the_error_plot_is_inside_the_picture():
    svg = error_plot(_points(10), x_key="layer", x_label="decoder layer", title="hidden states")
    width, height = map(float, re.search(r'viewBox="0 0 (\S+) (\S+)"', svg).groups())
    texts = re.findall(r'<text x="([^"]+)" y="([^"]+)"[^>]*>([^<]+)</text>', svg)
    assert "decoder layer" in {text for _, _, text in texts}
    for x, y, text in texts:
        assert 0 <= float(x) <= width and 0 <= float(y) <= height, (text, x, y)


def test_the_error_plots_axis_reaches_the_largest_error_and_hfs_line_is_drawn_as_hfs():
    points = _points(4)
    points[2] = {**points[2], "relative": 50.0, "status": "FAIL"}  # 50 times its gate
    points = [{**point, "hf_relative": 0.5} for point in points]
    svg = error_plot(points, x_key="layer", x_label="decoder layer", title="hidden states")
    labels = re.findall(r'text-anchor="end">([^<]+)</text>', svg)
    assert labels == ["1e-4", "1e-3", "1e-2", "1e-1", "gate", "1e1", "1e2"]  # decades up to the worst point
    (cross,) = re.findall(r'<path d="M[\d.]+,([\d.]+)l', svg)
    assert float(cross) + 5 >= 16  # the failing point inside the plot, below its top edge
    assert len(re.findall(r'<polyline points="[^"]+" class="series hf"/>', svg)) == 1


def test_a_narrow_mask_diagram_has_room_for_its_last_panels_label():
    svg = mask_image([(3, "xx.x", "x..x", ".x..")], "keys 0-3")
    width = float(re.search(r'viewBox="0 0 (\S+) ', svg)[1])
    label_x = float(re.search(r'<text x="([\d.]+)" y="16" class="axis">where they differ</text>', svg)[1])
    assert width - label_x >= 100  # the label's width at the axis font (11 px)


@pytest.mark.parametrize(("count", "dots"), [(80, 80), (81, 0)])
def test_a_line_of_more_than_80_points_is_drawn_without_its_dots(count, dots):
    """Up to 80 points each has its dot (and its tooltip); a longer line is the line alone."""
    svg = error_plot(_points(count), x_key="layer", x_label="decoder layer", title="hidden states")
    assert len(re.findall(r'<circle [^>]*class="dot"', svg)) == dots
