"""Sphinx configuration: ``python -m sphinx -W --keep-going docs docs/_build/html``."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")  # the gallery's small nets: one thread (see the performance page)

import _substitutions  # noqa: E402  (docs/_substitutions.py)

import skdbal  # noqa: E402

project = "skdbal"
author = "the skdbal developers"
copyright = "2026, the skdbal developers"
version = release = skdbal.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_enable_extensions = ["colon_fence", "substitution"]
#: Figures on the results pages, read from docs/results/*/facts.json and the benchmark JSONs
#: (``{{ post2019_cuda__bald__acc90_median }}``; the keys are described in _substitutions.py).
myst_substitutions = _substitutions.substitutions(ROOT / "docs" / "results")
myst_heading_anchors = 3
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
suppress_warnings = ["myst.header"]

autosummary_generate = True
#: scikit-learn's metadata-routing methods are generated on every estimator; their
#: docstrings point into scikit-learn's own documentation. Inherited members are left out by
#: autodoc's default, not set here: one set here would override the ``:inherited-members:`` of
#: the class template (_templates/autosummary/class.rst), which documents ActiveLearner's mixins.
autodoc_default_options = {
    "members": True,
    "exclude-members": ",".join(["get_metadata_routing", "set_fit_request", "set_partial_fit_request",
                                 "set_predict_request", "set_predict_proba_request", "set_score_request",
                                 "set_transform_request", "set_output"]),
}
#: A package page leaves out the names documented on a page of their own (the estimators at
#: ``skdbal.X``, the experiments' names on their modules' pages): one description per object.
_ROUTING = autodoc_default_options["exclude-members"]
templates_path = ["_templates"]
autosummary_context = {"package_pages": {
    "skdbal.models": ",".join(["MCDropoutClassifier", "MCDropoutRegressor", "DeepEnsembleClassifier",
                               "LaplaceClassifier", "DDUClassifier", "NetFeatures", "BayesianLinearRegression",
                               _ROUTING]),
    "skdbal.learner": ",".join(["ActiveLearner", _ROUTING]),
    "skdbal.experiments": ",".join(["RunSpec", "DamagedResultsError", "FolderLockedError", "Preset", _ROUTING]),
}, "mixin_classes": {
    # methods partly from documented mixins: their members are documented, not the scikit-learn classes' named
    "skdbal.ActiveLearner": "BaseEstimator,MetaEstimatorMixin,_MetadataRequester",
}}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "reset_modules": ("matplotlib", "_gallery.reset_torch"),
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
}

html_theme = "pydata_sphinx_theme"
html_title = f"skdbal {release}"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
#: The results and performance pages lead with wide tables: no navigation column beside them (the
#: performance page has no pages below it; the results folders' tables are listed on "Reproducing the papers").
html_sidebars = {"performance": [], "results/README": []}
html_static_path = []
