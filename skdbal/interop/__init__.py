"""Working with other active learning libraries.

- :mod:`skdbal.interop.skactiveml`: scikit-activeml's strategies in our
  learner, and our models in its strategies (the ``skactiveml`` extra).

modAL needs no adapter module: our strategies are modAL query strategies
(:func:`skdbal.acquisition.to_modal` pins one to a modAL version).
"""
