"""The labelling config that ``skdbal labelstudio --new-project`` writes: each choice's hotkey is the key of
``skdbal label``'s page, and small images are drawn sharp at a whole multiple of their size (no server)."""
from xml.etree import ElementTree

import numpy as np
import pytest

from skdbal.labelling.pools import Pool
from skdbal.labelstudio import choices_of
from skdbal.labelstudio.cli import add_parser, image_size, label_config


def _hotkeys(config):
    return {c.get("value"): c.get("hotkey") for c in ElementTree.fromstring(config).iter("Choice")}


def _image(config):
    return ElementTree.fromstring(config).find("Image").attrib


def test_digits_take_their_own_digit_whatever_their_order():
    config = label_config("images", ["7", "0", "3"])
    assert _hotkeys(config) == {"7": "7", "0": "0", "3": "3"}
    assert choices_of(config)["choices"] == ["7", "0", "3"]      # still one classification, read back


def test_other_classes_take_one_to_nine_then_zero_and_no_key_past_the_tenth():
    classes = [f"c{i}" for i in range(12)]
    keys = _hotkeys(label_config("table", classes))
    assert [keys[c] for c in classes] == ["1", "2", "3", "4", "5", "6", "7", "8", "9", "0", None, None]


def test_keys_given_are_the_hotkeys():
    assert _hotkeys(label_config("images", ["cat", "dog"], keys="c,d")) == {"cat": "c", "dog": "d"}
    with pytest.raises(ValueError, match="distinct"):
        label_config("images", ["cat", "dog"], keys="c,c")


@pytest.mark.parametrize("size, width", [((8, 8), "320px"), ((28, 28), "308px"), ((32, 16), "320px"),
                                         ((300, 200), "300px"), ((320, 320), "320px")])
def test_a_small_image_is_drawn_without_smoothing_at_a_whole_multiple(size, width):
    # 320 // 8 = 40 -> 320; 320 // 28 = 11 -> 308; 320 // 32 = 10 -> 320 wide (160 high); 320 // 300 = 1
    attrs = _image(label_config("images", ["a", "b"], image_size=size))
    assert (attrs["smoothing"], attrs["width"], attrs["maxWidth"]) == ("false", width, width)


@pytest.mark.parametrize("size", [None, (321, 100), (640, 480)])
def test_a_large_image_or_an_unknown_size_is_drawn_as_label_studio_draws_any(size):
    attrs = _image(label_config("images", ["a", "b"], image_size=size))
    assert attrs == {"name": "image", "value": "$image"}


def test_a_table_gets_its_row_as_text():
    config = ElementTree.fromstring(label_config("table", ["a", "b"], image_size=(8, 8)))
    assert config.find("Image") is None and config.find("Text").attrib == {"name": "item", "value": "$item"}


def test_the_pools_image_size_is_what_is_drawn():
    assert image_size(Pool(np.zeros((3, 8, 8)))) == (8, 8)
    assert image_size(Pool(np.zeros((2, 3, 600, 300)))) == (128, 256)      # drawn at most 256 on its long side
    assert image_size(Pool(np.zeros((2, 3)))) is None


def test_the_command_takes_keys():
    import argparse

    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--demo", "digits", "--url", "http://127.0.0.1:8080", "--token-env", "T",
                              "--new-project", "d", "--keys", "a,b"])
    assert args.keys == "a,b"      # checked with the classes (class_keys), as label_config splits it
