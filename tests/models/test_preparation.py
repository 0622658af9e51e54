"""InputPreparation: the scale, size, channels and normalisation an encoder declares, against values by hand."""
import numpy as np
import pytest
from sklearn.base import clone

from skdbal.models import FunctionEncoder, InputPreparation


def test_bilinear_upsizing_by_hand():
    # width 2 -> 4, align_corners=False: the output pixels sit at source x = -0.25, 0.25, 0.75, 1.25,
    # clamped to [0, 1]: values 0, 0.25, 0.75, 1
    out = InputPreparation(size=(1, 4))(np.array([[[0.0, 1.0]]]))
    assert out.shape == (1, 1, 1, 4) and out.dtype == np.float32
    np.testing.assert_allclose(out[0, 0, 0], [0.0, 0.25, 0.75, 1.0])


def test_antialiased_shrinking_by_hand():
    # 4 -> 2 on each axis: output 0's centre is at 1.0 in source pixels, the triangle filter is 2 wide,
    # so source pixels 0, 1, 2 weigh 0.75, 0.75, 0.25 (normalised: 3/7, 3/7, 1/7)
    image = np.arange(16.0).reshape(1, 4, 4)   # value = 4 * row + column
    out = InputPreparation(size=(2, 2))(image)
    w = np.array([3, 3, 1]) / 7
    first = w @ np.arange(3.0)                 # the filtered coordinate, 5/7
    assert out[0, 0, 0, 0] == pytest.approx(4 * first + first, rel=1e-6)
    # all four pixels of 2 x 2 -> 1 x 1 weigh the same: the mean
    assert InputPreparation(size=(1, 1))(np.array([[[0.0, 1.0], [2.0, 3.0]]]))[0, 0, 0, 0] == pytest.approx(1.5)


def test_grey_to_rgb_then_per_channel_normalisation():
    grey = np.array([[[0.0, 0.5], [1.0, 0.25]]])           # (1, 2, 2)
    prep = InputPreparation(channels=3, mean=(0.5, 0.0, 1.0), std=(0.5, 1.0, 2.0))
    out = prep(grey)
    assert out.shape == (1, 3, 2, 2)
    np.testing.assert_allclose(out[0, 0], (grey[0] - 0.5) / 0.5)
    np.testing.assert_allclose(out[0, 1], grey[0])
    np.testing.assert_allclose(out[0, 2], (grey[0] - 1.0) / 2.0)


def test_scale_comes_first_and_the_callers_array_is_unchanged():
    images = np.array([[[0, 255]]], dtype=np.uint8)
    out = InputPreparation(scale=1 / 255, mean=0.5, std=0.25)(images)
    np.testing.assert_allclose(out.ravel(), [(0 - 0.5) / 0.25, (1 - 0.5) / 0.25], rtol=1e-6)
    rows = np.array([[1.0, 2.0]])
    InputPreparation(scale=2.0)(rows)
    assert rows.tolist() == [[1.0, 2.0]]


def test_rows_are_normalised_per_feature():
    rows = np.array([[1.0, 4.0], [3.0, 8.0]])
    out = InputPreparation(mean=(2.0, 6.0), std=(1.0, 2.0))(rows)
    np.testing.assert_allclose(out, [[-1.0, -1.0], [1.0, 1.0]])


def test_nothing_declared_passes_the_input_as_float32():
    prep = InputPreparation()
    assert prep.is_identity
    X = np.arange(6).reshape(2, 3)
    out = prep(X)
    assert out.dtype == np.float32 and out.tolist() == X.tolist()


@pytest.mark.parametrize("kwargs, message", [
    ({"size": (0, 3)}, "size must be"),
    ({"size": (2, 2, 2)}, "size must be"),
    ({"channels": 0}, "channels must be"),
    ({"mean": 0.5}, "together"),
    ({"mean": 0.5, "std": 0.0}, "std must be positive"),
    ({"mean": float("nan"), "std": 1.0}, "finite"),
    ({"scale": 0}, "scale must be"),
])
def test_bad_declarations_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        InputPreparation(**kwargs)


def test_inputs_that_do_not_fit_the_declaration_are_refused():
    with pytest.raises(ValueError, match=r"images, \(N, H, W\) or \(N, C, H, W\); got shape \(2, 3\)"):
        InputPreparation(size=(4, 4))(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="cannot make 3 channels into 1"):
        InputPreparation(channels=1)(np.zeros((1, 3, 2, 2)))
    with pytest.raises(ValueError, match="mean has 3 values for 2 features"):
        InputPreparation(mean=(0, 0, 0), std=1)(np.zeros((1, 2)))
    with pytest.raises(TypeError, match="numeric"):
        InputPreparation()(np.array([["a"]]))


def test_a_declaration_is_a_value_that_clones_and_compares():
    prep = InputPreparation(size=(8, 8), channels=3, mean=[0.5, 0.5, 0.5], std=[0.2, 0.2, 0.2])
    assert prep == InputPreparation(size=(8, 8), channels=3, mean=(0.5,) * 3, std=(0.2,) * 3)
    encoder = FunctionEncoder(np.ravel, preparation=prep)
    assert clone(encoder).preparation == prep
    assert prep.to_dict() == {"size": [8, 8], "channels": 3, "mean": [0.5] * 3, "std": [0.2] * 3, "scale": None}
