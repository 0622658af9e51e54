import sys

from .experiments.cli import main

sys.exit(main())
