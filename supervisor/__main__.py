"""`python -m supervisor` and the `storyshelf` command: the capture host's command line.

A command line that starts a host forks the fork server before anything else is imported, so
that the child code and the parent's own load at once (`supervisor.host.ahead`).
"""

import sys

from supervisor.host.ahead import fork_ahead


def main() -> int:
    fork_ahead(sys.argv[1:])
    from supervisor.commands.main import main as command_line

    return command_line()


if __name__ == "__main__":
    sys.exit(main())
