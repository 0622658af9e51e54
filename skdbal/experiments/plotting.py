"""Small matplotlib helpers shared by the report and the quickstart figures.

Nothing here imports matplotlib at module level: the helpers take the axes
(or arrays) they work on.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

__all__ = ["data_ylim", "legend_outside"]


def data_ylim(lows: Sequence, highs: Sequence, bounds: Tuple[float, float] = (0.0, 1.0)) -> Tuple[float, float]:
    """A y range that holds every plotted value, padded and kept within bounds.

    Parameters
    ----------
    lows : sequence of array-like
        The lower edges of what is plotted (e.g. ``mean - std`` of each band).
    highs : sequence of array-like
        The upper edges (e.g. ``mean + std`` of each band).
    bounds : (float, float), default=(0.0, 1.0)
        The range the result is clipped to (accuracies: 0 to 1).

    Returns
    -------
    (float, float)
        ``(low, high)``: the smallest of ``lows`` and the largest of
        ``highs``, each moved out by 5% of their span (at least 0.02), then
        clipped to ``bounds``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.experiments.plotting import data_ylim
    >>> low, high = data_ylim([np.array([0.5, 0.7])], [np.array([0.6, 0.9])])
    >>> round(low, 3), round(high, 3)
    (0.48, 0.92)
    >>> data_ylim([np.array([0.0])], [np.array([1.0])])   # clipped to the bounds
    (0.0, 1.0)
    """
    lo = float(min(np.min(v) for v in lows))
    hi = float(max(np.max(v) for v in highs))
    pad = max(0.02, 0.05 * (hi - lo))
    return max(bounds[0], lo - pad), min(bounds[1], hi + pad)


def legend_outside(ax, handles: Optional[dict] = None, **kwargs) -> None:
    """Put the legend to the right of the axes, off the curves.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes the legend is attached to.
    handles : dict, optional
        ``{label: artist}`` to list (e.g. gathered over several panels). By
        default, the axes' own labelled artists; nothing is drawn where
        there are none, or where ``handles`` is empty.
    **kwargs
        Passed on to :meth:`matplotlib.axes.Axes.legend`.

    Returns
    -------
    None

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from skdbal.experiments.plotting import legend_outside
    >>> fig, ax = plt.subplots()
    >>> line, = ax.plot([0, 1], [0, 1], label="bald")
    >>> legend_outside(ax)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['bald']
    >>> fig2, ax2 = plt.subplots()
    >>> legend_outside(ax2, handles={"random": line})
    >>> [t.get_text() for t in ax2.get_legend().get_texts()]
    ['random']
    >>> plt.close("all")
    """
    args = (list(handles.values()), list(handles.keys())) if handles else ()
    if args or (handles is None and ax.get_legend_handles_labels()[0]):
        ax.legend(*args, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)


def save_figure(fig, path):
    """Save ``fig`` to ``path`` and close it; with ``path=None`` keep it open
    and return it (for notebooks and the example gallery)."""
    if path is None:
        return fig
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return None

