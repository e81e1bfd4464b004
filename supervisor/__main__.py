"""`python -m supervisor`: the capture host's command line."""

import sys

from supervisor.cli import main

sys.exit(main())
