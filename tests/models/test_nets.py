import pytest
import torch
from torch import nn

from skdbal.models import MLP, BayesianCNN, KirschCNN, LeNet5, split_module


@pytest.mark.parametrize("shape, n_classes", [((8, 8), 10), ((1, 28, 28), 10), ((3, 16, 16), 4)])
def test_bayesian_cnn_sizes(shape, n_classes):
    net = BayesianCNN(n_classes=n_classes, input_shape=shape)
    c = shape[0] if len(shape) == 3 else 1
    h = shape[-1]
    out = net(torch.zeros(2, c, h, h))
    assert out.shape == (2, n_classes)
    assert net(torch.zeros(2, c * h * h)).shape == (2, n_classes)  # flat input


def test_bayesian_cnn_architecture_matches_gal():
    net = BayesianCNN()  # 28x28: 28 -> 25 -> 22 -> pool 11; 32*11*11 features
    convs = [m for m in net.trunk if isinstance(m, nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size) for c in convs] == [(32, (4, 4)), (32, (4, 4))]
    drops = [m.p for m in net.head if isinstance(m, nn.Dropout)]
    assert drops == [0.25, 0.5]
    linears = [m for m in net.head if isinstance(m, nn.Linear)]
    assert (linears[0].in_features, linears[0].out_features) == (32 * 11 * 11, 128)
    assert linears[-1].out_features == 10


def test_lenet5_matches_table():
    net = LeNet5()
    linears = [(m.in_features, m.out_features) for m in net.head if isinstance(m, nn.Linear)]
    assert linears == [(400, 120), (120, 84), (84, 10)]
    assert [m.p for m in net.head if isinstance(m, nn.Dropout)] == [0.5, 0.25]
    small = LeNet5(input_shape=(8, 8))  # 8 -> 8 -> pool 4 -> pad-2 conv 4 -> pool 2
    assert small(torch.zeros(3, 64)).shape == (3, 10)
    assert small.head[2].in_features == 16 * 2 * 2
    assert LeNet5(input_shape=(12, 12)).head[2].in_features == 16 * 1 * 1  # unpadded from 12 up
    with pytest.raises(ValueError, match="cannot process inputs"):
        LeNet5(input_shape=(3, 3))


def test_mlp_split():
    net = MLP(n_features=6, n_classes=3, hidden_layer_sizes=(5, 4))
    assert net(torch.zeros(2, 6)).shape == (2, 3)
    assert isinstance(net.head[0], nn.Dropout)
    with pytest.raises(ValueError):
        MLP(hidden_layer_sizes=())


@pytest.mark.parametrize("net", [BayesianCNN(input_shape=(8, 8)), LeNet5(), MLP()])
def test_split_is_exact_and_trunk_has_no_dropout(net):
    trunk, head = split_module(net)
    assert not any(isinstance(m, nn.Dropout) for m in trunk.modules())
    assert isinstance(head[0], nn.Dropout)  # the head starts at the first dropout
    assert isinstance(head[-1], nn.Linear)
    net.eval()
    shape = (1, 8, 8) if isinstance(net, BayesianCNN) else (1, 28, 28) if isinstance(net, LeNet5) else (64,)
    x = torch.rand(3, *shape)
    torch.testing.assert_close(net(x), head(trunk(x)))


def test_wrong_input_size_is_clear():
    with pytest.raises(ValueError, match="64 values"):
        BayesianCNN(input_shape=(8, 8))(torch.zeros(2, 10))


def test_split_module_rejects_plain_modules():
    assert split_module(nn.Sequential(nn.Linear(2, 2))) is None


def test_kirsch_cnn_matches_batchbald_and_samples_exactly(row_keyed_reference):
    """Kirsch et al.'s MNIST net: 28 -> conv5 24 -> pool 12 -> conv5 8 -> pool 4, 64*4*4 = 1024 features;
    the trunk is the first convolution, and MC passes draw one mask value per channel and row."""
    import numpy as np

    from skdbal import MCDropoutClassifier

    net = KirschCNN()
    convs = [m for m in [*net.trunk, *net.head] if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size) for c in convs] == [(1, 32, (5, 5)), (32, 64, (5, 5))]
    assert [type(m).__name__ for m in net.head if isinstance(m, nn.modules.dropout._DropoutNd)] == \
        ["Dropout2d", "Dropout2d", "Dropout"]
    assert [(m.in_features, m.out_features) for m in net.head if isinstance(m, nn.Linear)] == [(1024, 128), (128, 10)]
    trunk, head = split_module(net)
    assert [type(m).__name__ for m in trunk] == ["ToImage", "Conv2d"]
    assert [type(m).__name__ for m in head] == ["Dropout2d", "MaxPool2d", "ReLU", "Conv2d", "Dropout2d", "MaxPool2d",
                                                "ReLU", "Flatten", "Linear", "Dropout", "ReLU", "Linear"]
    assert net.training and all(m.training for m in net.modules())  # built in train mode, like any module
    with pytest.raises(ValueError, match="cannot process inputs"):
        KirschCNN(input_shape=(8, 8))

    rng = np.random.RandomState(0)
    X = rng.rand(30, 1, 28, 28).astype(np.float32)
    y = np.arange(30) % 3
    clf = MCDropoutClassifier(KirschCNN, max_epochs=1, random_state=0, n_samples=4).fit(X, y)
    T, xb = 4, X[:3]
    P = clf.predict_proba_samples(xb)
    np.testing.assert_allclose(P, row_keyed_reference(clf, xb, T), atol=1e-6)  # Dropout2d: a draw per channel
    assert not np.allclose(P[0], P[1])  # the passes differ
