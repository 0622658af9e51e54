"""A prediction on one network while another trains (issue 43): it does not wait for the fit (each module
has its own lock, and the row-keyed samplers draw from generators of their own, not torch's global RNG),
and it does not change what the fit computes. A prediction on the training network itself waits."""
import threading
import time

import numpy as np
import torch
from _helpers import small_net
from skorch.callbacks import Callback


class _Started(Callback):
    """Sets ``event`` when the first epoch ends (the fit is under way), and records in ``times`` when
    the training ends (inside the fit, its module's lock still held)."""

    def __init__(self, event=None, times=None):
        self.event = event
        self.times = times

    def on_epoch_end(self, net, **kwargs):
        if self.event is not None:
            self.event.set()

    def on_train_end(self, net, **kwargs):
        if self.times is not None:
            self.times["trained"] = time.perf_counter()


def _weights(net):
    return {k: v.detach().clone() for k, v in net.module_.state_dict().items() if isinstance(v, torch.Tensor)}


def _fit_in_thread(X, y, epochs):
    """Start fitting a seeded net in a thread; return the net, the thread, and a dict that gets the
    time its training ends (``"trained"``), the time its fit returns (``"end"``) or its error."""
    started, out = threading.Event(), {}
    net = small_net(max_epochs=epochs, callbacks=[("started", _Started(started, out))])

    def fit():
        try:
            net.fit(X, y)
        except BaseException as exc:  # re-raised by the test
            out["error"] = exc
        out["end"] = time.perf_counter()

    thread = threading.Thread(target=fit, daemon=True)
    thread.start()
    assert started.wait(60), "the fit did not start"
    return net, thread, out


def test_predictions_on_other_networks_do_not_wait_for_a_fit_nor_change_it(digits):
    X, y = digits
    epochs = 12  # about 1-2 s on one core
    ref = small_net(max_epochs=epochs, callbacks=[("started", _Started())]).fit(X[:300], y[:300])
    other = small_net(max_epochs=1).fit(X[:100], y[:100])
    unseeded = small_net(max_epochs=1, random_state=None).fit(X[:100], y[:100])
    expected = other.predict_proba_samples(X[:50], n_samples=10)

    net, thread, out = _fit_in_thread(X[:300], y[:300], epochs)
    got = other.predict_proba_samples(X[:50], n_samples=10)  # a guess with another network
    other.predict(X[:50])
    other.set_params(mask_seeding="row_philox").predict_proba_samples(X[:50], n_samples=10)
    unseeded.predict_proba_samples(X[:50], n_samples=10)  # draws its key from fresh entropy, not torch's RNG
    done = time.perf_counter()
    still_training = thread.is_alive()
    thread.join(120)
    assert "error" not in out, out.get("error")
    assert still_training and done < out["trained"], "the predictions waited for the other network's fit"
    np.testing.assert_array_equal(got, expected)
    for key, value in _weights(ref).items():  # the fit computed what it computes alone
        assert torch.equal(_weights(net)[key], value), key


def test_a_prediction_on_the_training_network_waits_for_its_fit(digits):
    """Its module's lock is held while it trains: the prediction runs after the fit, on its weights, and
    does not change the training (mode flags, dropout hooks)."""
    X, y = digits
    epochs = 6
    ref = small_net(max_epochs=epochs, callbacks=[("started", _Started())]).fit(X[:300], y[:300])
    net, thread, out = _fit_in_thread(X[:300], y[:300], epochs)
    P = net.predict_proba_samples(X[:20], n_samples=5)
    done = time.perf_counter()
    thread.join(120)
    assert "error" not in out, out.get("error")
    assert done >= out["trained"]
    for key, value in _weights(ref).items():
        assert torch.equal(_weights(net)[key], value), key
    np.testing.assert_array_equal(P, ref.predict_proba_samples(X[:20], n_samples=5))


def test_unseeded_draws_from_torchs_global_rng_wait_and_leave_a_seeded_fit_as_it_was(digits):
    """``mask_seeding="stream"`` unseeded draws from torch's global RNG: such predictions take turns with a
    seeded fit (its lock), so the fit's weights are those it computes alone (they changed before)."""
    X, y = digits
    epochs = 6
    ref = small_net(max_epochs=epochs, callbacks=[("started", _Started())]).fit(X[:300], y[:300])
    other = small_net(max_epochs=1, random_state=None, mask_seeding="stream").fit(X[:100], y[:100])
    net, thread, out = _fit_in_thread(X[:300], y[:300], epochs)
    n = 0
    while thread.is_alive() and n < 500:
        other.predict_proba_samples(X[:20], n_samples=4)
        n += 1
    thread.join(120)
    assert "error" not in out, out.get("error")
    for key, value in _weights(ref).items():
        assert torch.equal(_weights(net)[key], value), key


def test_auto_set_after_a_fit_with_another_seeding_is_row_keyed(digits):
    """``set_params(mask_seeding="auto")`` on a net fitted with ``"stream"``: auto is what the device
    resolves it to (row-keyed), not the seeding the fit used."""
    X, y = digits
    net = small_net(max_epochs=1, mask_seeding="stream").fit(X[:100], y[:100])
    assert net.mask_seeding_ == "stream"
    net.set_params(mask_seeding="auto")
    assert net.row_keyed_samples
    order = np.arange(40)[::-1]
    a = net.predict_proba_samples(X[:40], n_samples=5)
    b = net.predict_proba_samples(X[:40][order], n_samples=5)
    np.testing.assert_array_equal(a[:, order], b)
