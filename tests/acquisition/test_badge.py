"""BADGE: the gradient embedding against torch's autograd, the selection against scikit-learn's k-means++."""
import numpy as np
import pytest
import torch
from sklearn.cluster import kmeans_plusplus
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import BADGE, badge, get_strategy, noise_filter
from skdbal.acquisition._badge import features_and_proba
from skdbal.acquisition.functional import badge_select, gradient_embedding


def test_the_embedding_is_the_last_layers_cross_entropy_gradient_at_the_predicted_label():
    rng = np.random.RandomState(0)
    N, d, C = 6, 4, 3
    H = rng.randn(N, d)
    layer = torch.nn.Linear(d, C).double()
    with torch.no_grad():
        P = torch.softmax(layer(torch.as_tensor(H)), dim=1).numpy()
    G = gradient_embedding(H, P)
    assert G.shape == (N, C * (d + 1)) and G.dtype == np.float32
    for i in range(N):
        layer.zero_grad()
        logits = layer(torch.as_tensor(H[i:i + 1]))
        torch.nn.functional.cross_entropy(logits, logits.argmax(dim=1)).backward()
        expected = torch.cat([layer.weight.grad, layer.bias.grad[:, None]], dim=1).reshape(-1).numpy()
        np.testing.assert_allclose(G[i], expected, rtol=1e-5, atol=1e-6)
    # a confident prediction has a small gradient, an unsure one a large one
    g = gradient_embedding(np.ones((2, 1)), np.array([[0.99, 0.01], [0.5, 0.5]]), bias=False)
    np.testing.assert_allclose(np.linalg.norm(g, axis=1), [0.01 * np.sqrt(2), 0.5 * np.sqrt(2)], rtol=1e-6)


def test_the_selection_is_scikit_learns_kmeans_plusplus_with_one_trial():
    G = np.random.RandomState(1).randn(200, 5)
    for seed in range(5):
        _, expected = kmeans_plusplus(G, n_clusters=8, random_state=seed, n_local_trials=1)
        np.testing.assert_array_equal(badge_select(G, 8, random_state=seed), expected)


def test_identical_embeddings_give_distinct_picks_by_norm():
    G = np.array([[1.0, 0.0]] * 4 + [[3.0, 0.0], [0.0, 0.5]])
    picks = badge_select(G, 5, random_state=0)
    assert len(set(picks.tolist())) == 5
    with pytest.raises(ValueError, match="cannot choose 7 of 6"):
        badge_select(G, 7)


def test_the_strategy_on_a_network(digits, fitted_net):
    X, _ = digits
    pool = X[300:700]
    idx, norms = badge(fitted_net, pool, n_instances=10, random_state=3)
    H, P = features_and_proba(fitted_net, pool)
    np.testing.assert_array_equal(H, fitted_net.transform(pool))
    np.testing.assert_array_equal(P, fitted_net.predict_proba_deterministic(pool))
    G = gradient_embedding(H, P)
    np.testing.assert_array_equal(idx, badge_select(G, 10, random_state=3))
    np.testing.assert_allclose(norms, np.linalg.norm(G[idx].astype(float), axis=1))
    assert np.array_equal(idx, badge(fitted_net, pool, n_instances=10, random_state=3)[0])
    # more uncertain than the pool at large: the mean gradient norm of the picks is above the pool's
    assert norms.mean() > np.linalg.norm(G.astype(float), axis=1).mean()


def test_with_the_learner_and_the_noise_filter(digits, small_net):
    X, y = digits
    learner = ActiveLearner(small_net(max_epochs=3), get_strategy("badge"), random_state=0, verbose=False)
    history = learner.simulate(X[:400], y[:400], n_queries=2, n_instances=10, initial_idx=np.arange(20))
    assert len(set(learner.labelled_idx_.tolist())) == 40
    assert all(len(set(r["query_indices"])) == 10 for r in history[1:])
    p_label = learner.estimator_.predict_proba(X[:400])[np.arange(400), y[:400]]
    tau = float(np.quantile(p_label, 0.5))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # enough trusted points: nothing filled in
        acq = noise_filter(BADGE(), tau).acquire(learner, X[:400], 5, y_pool=y[:400], random_state=0)
    assert len(set(acq.indices.tolist())) == 5 and acq.info["threshold"] == tau
    assert not set(acq.indices.tolist()) & set(acq.info["rejected_indices"].tolist())


def test_a_model_without_features_is_refused():
    X = np.random.RandomState(0).randn(20, 3)
    model = LogisticRegression().fit(X, np.arange(20) % 2)
    with pytest.raises(TypeError, match="has no transform"):
        badge(model, X, 2)
