"""`python -m proofs`: see `proofs.cli`."""

import sys

from .cli import main

sys.exit(main())
