"""PyInstaller's entry script: the same ``main`` as the ``branchwise`` console script."""

import sys

from branchwise.desktop.entry import main

if __name__ == "__main__":
    sys.exit(main())
