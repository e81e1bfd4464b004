"""`python -m supervisor`: the capture host's command line."""

import sys

from supervisor.commands.main import main

sys.exit(main())
