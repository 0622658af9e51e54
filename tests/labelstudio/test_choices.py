"""What skdbal reads of a Label Studio project without a server: its classification, and scores in [0, 1]."""
import numpy as np
import pytest

from skdbal.labelstudio import choices_of
from skdbal.labelstudio.sync import unit_scores


def test_choices_of_a_classification_config():
    config = ('<View><Text name="t" value="$text"/><Choices name="mood" toName="t"><Choice value="up"/>'
              '<Choice value="down"/></Choices></View>')
    assert choices_of(config) == {"from_name": "mood", "to_name": "t", "choices": ["up", "down"], "data": "text"}


@pytest.mark.parametrize("config, count", [
    ('<View><Image name="i" value="$i"/></View>', 0),
    ('<View><Image name="i" value="$i"/><Choices name="a" toName="i"><Choice value="x"/></Choices>'
     '<Choices name="b" toName="i"><Choice value="y"/></Choices></View>', 2),
])
def test_a_config_that_is_not_one_classification_is_refused(config, count):
    with pytest.raises(ValueError, match=f"exactly one <Choices> tag .*it has {count}"):
        choices_of(config)


def test_unit_scores_keep_the_order_and_zero_what_is_not_finite():
    s = unit_scores([0.5, np.nan, 2.5, np.inf, 1.0])
    np.testing.assert_allclose(s, [0.0, 0.0, 1.0, 0.0, 0.25])
