"""`python -m service.cli`: the same command line as `uno-audit`."""

import sys

from service.cli.main import main

sys.exit(main())
