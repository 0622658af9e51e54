import numpy as np
import pytest
import torch

from skdbal import MCDropoutClassifier
from skdbal.models import MLP, FixedLengthLoader, FixedLengthSampler


def test_sampler_counts_by_hand():
    # 8 draws of 3 items: each appears 8 // 3 = 2 or 3 times and the counts add up to 8,
    # hence two items 3 times and one item twice
    for seed in range(5):
        idx = list(FixedLengthSampler(3, 8, generator=torch.Generator().manual_seed(seed)))
        assert len(idx) == 8
        assert sorted(idx.count(i) for i in range(3)) == [2, 3, 3]
    # 9 draws of 3: every item exactly 3 times
    idx = list(FixedLengthSampler(3, 9, generator=torch.Generator().manual_seed(0)))
    assert sorted(idx) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    # as many or more items than draws: one ordinary epoch, nothing left out
    assert sorted(FixedLengthSampler(5, 5)) == [0, 1, 2, 3, 4]
    assert sorted(FixedLengthSampler(7, 2)) == list(range(7))
    assert len(FixedLengthSampler(7, 2)) == 7 and len(FixedLengthSampler(3, 8)) == 8


def test_sampler_order_is_random_and_seeded():
    a = list(FixedLengthSampler(4, 40, generator=torch.Generator().manual_seed(1)))
    b = list(FixedLengthSampler(4, 40, generator=torch.Generator().manual_seed(1)))
    c = list(FixedLengthSampler(4, 40, generator=torch.Generator().manual_seed(2)))
    assert a == b and a != c
    assert a != [i % 4 for i in range(40)]


@pytest.mark.parametrize("n, n_samples, error, match", [
    (0, 5, ValueError, r"n \(the number of items\) must be an int >= 1; got 0"),
    (3, 0, ValueError, r"n_samples \(draws per epoch\) must be an int >= 1; got 0"),
    (3, 2.5, ValueError, r"n_samples \(draws per epoch\) must be an int >= 1; got 2.5"),
    (3, True, ValueError, "must be an int >= 1; got True"),
])
def test_sampler_bad_input(n, n_samples, error, match):
    with pytest.raises(error, match=match):
        FixedLengthSampler(n, n_samples)
    assert len(FixedLengthSampler(np.int64(3), np.int64(8))) == 8  # numpy ints are ints


def test_which_items_get_the_extra_draw_is_random():
    # 8 draws of 3 items: one item is drawn twice; over seeds, each item is sometimes that one
    twice = set()
    for seed in range(30):
        idx = list(FixedLengthSampler(3, 8, generator=torch.Generator().manual_seed(seed)))
        twice |= {i for i in range(3) if idx.count(i) == 2}
    assert twice == {0, 1, 2}


def _data():
    rng = np.random.RandomState(0)
    X = rng.rand(20, 4).astype(np.float32)
    return X, (X[:, 0] > 0.5).astype(int)


def test_loader_gives_fixed_length_epochs_to_a_skorch_net():
    X, y = _data()
    net = MCDropoutClassifier(MLP, batch_size=64, max_epochs=3, random_state=0, iterator_train=FixedLengthLoader,
                              iterator_train__n_samples=640)
    net.fit(X, y)
    # 640 draws of 20 items in batches of 64: 10 gradient steps an epoch, 3 epochs
    assert [len(h["batches"]) for h in net.history] == [10, 10, 10]
    assert all(b["train_batch_size"] == 64 for h in net.history for b in h["batches"])
    # a plain epoch over 20 items is one batch
    plain = MCDropoutClassifier(MLP, batch_size=64, max_epochs=3, random_state=0).fit(X, y)
    assert [len(h["batches"]) for h in plain.history] == [1, 1, 1]
    # seeded by the net's random_state: the same weights twice, other weights with another seed
    again = MCDropoutClassifier(MLP, batch_size=64, max_epochs=3, random_state=0, iterator_train=FixedLengthLoader,
                                iterator_train__n_samples=640).fit(X, y)
    for p, q in zip(net.module_.parameters(), again.module_.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    other = MCDropoutClassifier(MLP, batch_size=64, max_epochs=3, random_state=1, iterator_train=FixedLengthLoader,
                                iterator_train__n_samples=640).fit(X, y)
    assert not torch.equal(net.module_.head[-1].weight, other.module_.head[-1].weight)
    # a generator passed to the loader draws the epochs
    dataset = torch.utils.data.TensorDataset(torch.arange(5))
    first = [b[0].tolist() for b in FixedLengthLoader(dataset, 12, batch_size=4,
                                                      generator=torch.Generator().manual_seed(3))]
    second = [b[0].tolist() for b in FixedLengthLoader(dataset, 12, batch_size=4,
                                                       generator=torch.Generator().manual_seed(3))]
    drawn = sum(first, [])
    assert first == second and len(first) == 3  # 12 draws in batches of 4
    assert sorted(drawn.count(i) for i in range(5)) == [2, 2, 2, 3, 3]


def test_loader_bad_input():
    X, y = _data()
    with pytest.raises(ValueError, match="n_samples"):
        MCDropoutClassifier(MLP, max_epochs=1, iterator_train=FixedLengthLoader,
                            iterator_train__n_samples=0).fit(X, y)
    with pytest.raises(TypeError, match="sampler"):
        FixedLengthLoader(torch.utils.data.TensorDataset(torch.zeros(3)), n_samples=5, sampler=[0, 1, 2])
