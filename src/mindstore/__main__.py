"""``python -m mindstore`` runs the ``mindstore`` command."""

from __future__ import annotations

from mindstore.cli import main

if __name__ == "__main__":
    main()
