"""The config view reads what the runtime needs and rejects what it does not support."""

from __future__ import annotations

import copy

import pytest

from gemma4_static import read_text_config
from gemma4_static.oracle.references.models import e2b_geometry_config, tiny_config


def test_e2b_geometry_view_matches_the_published_e2b_values():
    view = read_text_config(e2b_geometry_config())
    assert view.layer_types == (("sliding_attention",) * 4 + ("full_attention",)) * 7
    assert [i for i, t in enumerate(view.layer_types) if t == "full_attention"] == [4, 9, 14, 19, 24, 29, 34]
    assert view.sliding_window == 512
    full, sliding = view.spec("full_attention"), view.spec("sliding_attention")
    assert (full.head_dim, sliding.head_dim) == (512, 256)
    assert (full.rope.rope_type, full.rope.partial_rotary_factor, full.rope.theta) == (
        "proportional",
        0.25,
        1e6,
    )
    assert (sliding.rope.rope_type, sliding.rope.theta) == ("default", 1e4)
    # layers 15..34 reuse K/V: sliding layers from layer 13, full layers from layer 14
    assert view.kv_sharing_modes[13:15] == ("store", "store")
    assert view.kv_sharing_modes[15:] == ("reuse",) * 20
    assert view.kv_sharing_modes[:13] == (None,) * 13


def test_composite_config_reads_its_text_config():
    view = read_text_config(tiny_config())
    assert view.use_bidirectional_attention == "vision"
    assert view.spec("full_attention").head_dim == 64
    assert view.spec("sliding_attention").head_dim == 32


def test_view_is_returned_as_is():
    view = read_text_config(tiny_config())
    assert read_text_config(view) is view


def _mutated(**changes):
    config = copy.deepcopy(e2b_geometry_config())
    for name, value in changes.items():
        setattr(config, name, value)
    return config


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"layer_types": ["chunked_attention"] * 34 + ["full_attention"]},
            r"layer_types .*chunked_attention",
        ),
        ({"sliding_window": 0}, r"sliding_window must be an integer >= 1, got 0"),
        ({"sliding_window": -4}, r"sliding_window must be an integer >= 1, got -4"),
        (
            {
                "rope_parameters": {
                    "full_attention": {"rope_type": "yarn", "rope_theta": 1e6},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                }
            },
            r"rope_parameters\['full_attention'\]\['rope_type'\]='yarn' is not supported",
        ),
        (
            {"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
            r"rope_parameters\['full_attention'\] is missing",
        ),
        (
            {
                "rope_parameters": {
                    "full_attention": {
                        "rope_type": "proportional",
                        "rope_theta": 1e6,
                        "partial_rotary_factor": 1.5,
                    },
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                }
            },
            r"partial_rotary_factor'\] must be in \[0, 1\], got 1.5",
        ),
        (
            {
                "rope_parameters": {
                    "full_attention": {"rope_type": "proportional", "rope_theta": -1.0},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                }
            },
            r"rope_theta'\] must be a positive number, got -1.0",
        ),
    ],
)
def test_unsupported_values_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        read_text_config(_mutated(**changes))


def test_non_gemma4_config_is_a_type_error():
    with pytest.raises(TypeError, match="text_config must be a Gemma4TextConfig or Gemma4Config, got dict"):
        read_text_config({"layer_types": ["full_attention"]})
