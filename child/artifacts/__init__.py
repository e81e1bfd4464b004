"""How a child reaches a job's artifacts: local files to read, and a way to store its own."""
