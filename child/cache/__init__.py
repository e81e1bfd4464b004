"""The host's local cache of files read from a remote artifact store, by SHA-256 (`content`)."""
