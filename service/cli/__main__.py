"""`python -m service.cli`: the same command line as `uno-audit`."""

import sys

from service.cli.entry import main

sys.exit(main())
